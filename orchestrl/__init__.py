"""orchestrl: distributed multi-agent RL for orchestrating executable work, on Ray RLlib, Tune and MLflow."""

__version__ = "0.1.0"

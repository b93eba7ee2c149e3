"""An experiment: its typed config, the registry of algorithms, and the RLlib config builder."""

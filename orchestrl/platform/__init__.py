"""The platform: CLI, typed config, RLlib config builder, MLflow tracking, checkpoints, progress."""

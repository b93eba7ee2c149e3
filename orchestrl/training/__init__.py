"""Training: the train loop, the Ray runtime, checkpoints, callbacks, the in-process runner, weight carry."""

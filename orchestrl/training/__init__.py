"""Training: the ``orchestrl train`` loop, the Ray runtime, checkpoints, the in-process runner (no
Ray), and weight carry between curriculum stages."""

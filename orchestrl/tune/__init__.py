"""Ray Tune: sweeps, curricula, the trainable, search spaces, progress."""

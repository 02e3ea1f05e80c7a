"""Training: the loop and its parts (optimizer, precision, checkpoints, layout, metrics)."""

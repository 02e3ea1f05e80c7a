"""Inference: loading a checkpoint for generation, prefill and decode with a static cache."""

"""Measurement: FLOP and memory counts, ``bench``, ``profile`` with its diagnosis and report."""

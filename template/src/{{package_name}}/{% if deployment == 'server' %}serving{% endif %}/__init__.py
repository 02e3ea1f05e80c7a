"""Serving: the continuous-batching engine (``engine.py``) behind an HTTP server (``app.py``)."""

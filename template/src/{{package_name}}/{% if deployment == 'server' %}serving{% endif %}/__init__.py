"""Serving: an engine that batches requests (usable without HTTP) behind an HTTP server."""


class RequestError(ValueError):
    """A request the engine cannot take, with what to change; the server answers 400."""


class EngineFull(RuntimeError):
    """Too many requests waiting (``serve.max_waiting``); the server answers 503."""

"""What every server of this project shares: the app with its lifespan, the JSON errors, the
body limit, ``/health`` and ``/metrics``, the thread that steps the engine, and uvicorn.

Every bad request gets a 4xx with an OpenAI-style JSON error, and the server goes on serving.
uvicorn drains on SIGTERM: it stops accepting connections and waits up to
``serve.drain_seconds`` for the open ones, whose requests the engine finishes, then the
lifespan stops the engine.
"""

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import uvicorn
from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as ASGIMessage

from ..config import Config
from . import EngineFull, RequestError
from .metrics import Metrics

log = logging.getLogger(__name__)


class Engine(Protocol):
    metrics: Metrics

    def idle(self) -> bool: ...

    def step(self) -> object: ...

    def abort(self) -> None: ...

    def health(self) -> dict[str, int]: ...


class Worker:
    """The thread that steps ``engine`` while it has work (torch releases the GIL in its
    kernels, so the event loop keeps serving), and sleeps until ``wake`` when it has none."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.wake = threading.Event()
        self.stopping = False
        self.thread = threading.Thread(target=self.loop, name="engine", daemon=True)

    def loop(self) -> None:
        while not self.stopping:
            if self.engine.idle():
                self.wake.wait(timeout=0.1)
                self.wake.clear()
                continue
            try:
                self.engine.step()
            except Exception:  # one bad step must not take the server down with it
                log.exception("an engine step failed: ending the requests in it")
                self.engine.abort()

    def stop(self, timeout: float) -> None:
        """Finish what is running (up to ``timeout`` seconds), then stop the thread."""
        deadline = time.monotonic() + timeout
        while not self.engine.idle() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stopping = True
        self.wake.set()
        self.thread.join()


def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status
    )


ENGINE_FAILED = "the engine failed on this request: see the server's log"


def new_app(worker: Worker, cfg: Config, title: str) -> FastAPI:
    """The app with the engine's thread as its lifespan, the JSON errors, ``/health`` and
    ``/metrics``; the modality adds its routes."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.thread.start()
        yield
        worker.stop(cfg.serve.drain_seconds)

    app = FastAPI(title=title, lifespan=lifespan)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: HTTPRequest, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return error(400, f"{where}: {first['msg']}")

    @app.exception_handler(HTTPException)
    async def http_error(_: HTTPRequest, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestError)
    async def refused(_: HTTPRequest, exc: RequestError) -> JSONResponse:
        return error(400, str(exc))

    @app.exception_handler(EngineFull)
    async def full(_: HTTPRequest, exc: EngineFull) -> JSONResponse:
        response = error(503, str(exc), "server_overloaded")
        response.headers["Retry-After"] = "1"
        return response

    @app.get("/health")
    async def health() -> dict[str, int | str]:
        return {"status": "ok", **worker.engine.health()}

    @app.get("/metrics")
    async def metrics() -> Response:
        registry = worker.engine.metrics.registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


class BodyLimit:
    """413 for a request body over ``max_bytes``, by its Content-Length or, when it comes in
    chunks, as soon as it has passed the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and int(length) > self.max_bytes:
            await self.too_large(scope, receive, send)
            return
        seen = 0

        async def limited() -> ASGIMessage:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except BodyTooLarge:
            await self.too_large(scope, receive, send)

    async def too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is over serve.max_body_bytes = {self.max_bytes} bytes"
        await error(413, message)(scope, receive, send)


class BodyTooLarge(Exception):
    pass


def run(app: ASGIApp, cfg: Config) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, then drain."""
    if cfg.serve.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serve.host = %s: the server is reachable beyond this machine", cfg.serve.host)
    uvicorn.run(
        app,
        host=cfg.serve.host,
        port=cfg.serve.port,
        timeout_graceful_shutdown=cfg.serve.drain_seconds,
        log_level="info",
    )

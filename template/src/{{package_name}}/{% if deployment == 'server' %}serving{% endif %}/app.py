"""The HTTP server: FastAPI on uvicorn, OpenAI-compatible routes over the engine.

- ``POST /v1/completions`` and ``POST /v1/chat/completions``: streamed as server-sent events
  when ``stream`` is true, ``data: [DONE]`` last, as OpenAI's clients expect;
- ``GET /health``: the slots and the queue;
- ``GET /metrics``: Prometheus (``metrics.py``).

The engine steps in a thread of its own (torch releases the GIL in its kernels), and each
request's text comes back to the event loop through a queue. A client that goes away cancels
its request, which leaves the batch at the next step. Every bad request gets a 4xx with an
OpenAI-style JSON error and the server goes on serving. uvicorn drains on SIGTERM: it stops
accepting connections and waits up to ``serve.drain_seconds`` for the open ones, whose
requests the engine finishes, before it stops the engine.
"""

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

import uvicorn
from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as ASGIMessage

from ..config import Config
from ..data.tokenizer import load_tokenizer
from ..inference.generate import compiled_decode_step, load_for_inference
from .engine import Delta, Engine, EngineFull, Request, RequestError, last_logits
from .metrics import Metrics

log = logging.getLogger(__name__)


class CompletionRequest(BaseModel):
    """The fields of OpenAI's completions this server honours; any other is refused, rather
    than silently ignored."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    prompt: str
    max_tokens: int = Field(16, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_k: int = Field(0, ge=0)  # not OpenAI's: 0 samples from the whole vocabulary
    stop: str | list[str] | None = Field(None, max_length=4)
    stream: bool = False
    n: Literal[1] = 1
    user: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(CompletionRequest):
    prompt: str = ""  # made from messages
    messages: list[Message] = Field(min_length=1)


CHAT_STOP = "\nUser:"  # the model starting the user's next turn ends its own


def chat_prompt(messages: list[Message]) -> str:
    """A minimal chat template: one ``Role: content`` line per message, then the assistant's
    turn to continue. A base model trained on plain text follows it loosely; a model tuned on
    this format follows it closely."""
    turns = [f"{m.role.capitalize()}: {m.content}" for m in messages]
    return "\n".join(turns) + "\nAssistant:"


def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status
    )


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


class Server:
    """The engine, the thread that steps it, and the bridge to the event loop."""

    def __init__(self, engine: Engine, metrics: Metrics, name: str) -> None:
        self.engine, self.metrics, self.name = engine, metrics, name
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

    def submit(self, request: Request) -> asyncio.Queue[Delta]:
        """Queue ``request`` with the engine (which may refuse it, raising); its text comes
        back on the returned queue."""
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue[Delta] = asyncio.Queue()
        request.on_delta = lambda delta: loop.call_soon_threadsafe(deltas.put_nowait, delta)
        self.engine.submit(request)
        self.wake.set()
        return deltas

    async def deltas(self, request: Request, queue: asyncio.Queue[Delta]) -> AsyncIterator[Delta]:
        """``request``'s text as the engine makes it, up to its finish. Leaving early (the
        client gone, the task cancelled) cancels the request."""
        try:
            while True:
                delta = await queue.get()
                yield delta
                if delta.finish_reason:
                    return
        finally:
            if request.finish_reason is None:
                request.cancel()
                self.wake.set()


def engine_request(server: Server, body: CompletionRequest, prompt: str) -> Request:
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if isinstance(body, ChatRequest):
        stop.append(CHAT_STOP)
    return Request(
        prompt=server.engine.tokenizer.encode(prompt),
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_k=body.top_k,
        stop=tuple(s for s in stop if s),
    )


def openai_body(
    request: Request, name: str, chat: bool, stream: bool, text: str, reason: str | None
) -> dict:
    """A completion (``stream`` false) or one chunk of a stream, in OpenAI's shapes."""
    if chat:
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "delta" if stream else "message": message, "finish_reason": reason}
    else:
        choice = {"index": 0, "text": text, "finish_reason": reason, "logprobs": None}
    body = {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-{request.id}",
        "object": ("chat.completion" if chat else "text_completion")
        + (".chunk" if chat and stream else ""),
        "created": int(time.time()),
        "model": name,
        "choices": [choice],
    }
    if not stream:
        generated = len(request.tokens)
        body["usage"] = {
            "prompt_tokens": len(request.prompt),
            "completion_tokens": generated,
            "total_tokens": len(request.prompt) + generated,
        }
    return body


ENGINE_FAILED = "the engine failed on this request: see the server's log"


def build_app(server: Server, cfg: Config) -> ASGIApp:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server.thread.start()
        yield
        server.stop(cfg.serve.drain_seconds)

    app = FastAPI(title=server.name, lifespan=lifespan)

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

    async def complete(http: HTTPRequest, body: CompletionRequest, prompt: str) -> Response:
        if body.max_tokens > cfg.serve.max_tokens:
            raise RequestError(
                f"max_tokens = {body.max_tokens} is over this server's limit of "
                f"{cfg.serve.max_tokens} (serve.max_tokens): ask for fewer"
            )
        request = engine_request(server, body, prompt)
        deltas = server.deltas(request, server.submit(request))
        chat = isinstance(body, ChatRequest)

        def shaped(text: str, reason: str | None, stream: bool) -> dict:
            return openai_body(request, server.name, chat, stream, text, reason)

        if body.stream:
            return StreamingResponse(events(deltas, shaped), media_type="text/event-stream")
        texts: list[str] = []
        collecting = asyncio.ensure_future(collect(deltas, texts))
        while not collecting.done():  # a client that leaves cancels its request
            await asyncio.wait({collecting}, timeout=0.25)
            if not collecting.done() and await http.is_disconnected():
                collecting.cancel()
                return Response(status_code=499)  # nginx's "client closed request"
        reason = collecting.result()
        if reason == "error":
            return error(500, ENGINE_FAILED, "server_error")
        return JSONResponse(shaped("".join(texts), reason, stream=False))

    @app.post("/v1/completions")
    async def completions(http: HTTPRequest, body: CompletionRequest) -> Response:
        return await complete(http, body, body.prompt)

    @app.post("/v1/chat/completions")
    async def chat(http: HTTPRequest, body: ChatRequest) -> Response:
        return await complete(http, body, chat_prompt(body.messages))

    @app.get("/health")
    async def health() -> dict[str, int | str]:
        engine = server.engine
        running, waiting = len(engine.running), len(engine.waiting)
        return {"status": "ok", "slots": len(engine.slots), "running": running, "waiting": waiting}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(server.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return BodyLimit(app, cfg.serve.max_body_bytes)


async def collect(deltas: AsyncIterator[Delta], texts: list[str]) -> str | None:
    reason = None
    async for delta in deltas:
        texts.append(delta.text)
        reason = delta.finish_reason
    return reason


async def events(
    deltas: AsyncIterator[Delta], shaped: Callable[[str, str | None, bool], dict]
) -> AsyncIterator[str]:
    """Server-sent events: one JSON chunk per delta, then ``[DONE]``."""
    async for delta in deltas:
        if delta.finish_reason == "error":
            failed = {"error": {"message": ENGINE_FAILED, "type": "server_error"}}
            yield f"data: {json.dumps(failed)}\n\n"
            return
        yield f"data: {json.dumps(shaped(delta.text, delta.finish_reason, True))}\n\n"
    yield "data: [DONE]\n\n"


def build_server(cfg: Config) -> tuple[ASGIApp, Server]:
    """The latest checkpoint's model (quantized as ``generate.quantization`` says) behind
    an engine with ``serve.max_batch`` slots, and the app that serves it."""
    model, device = load_for_inference(cfg)
    step = compiled_decode_step(device, last_logits) if cfg.generate.compile else last_logits
    metrics = Metrics()
    s = cfg.serve
    engine = Engine(
        model,
        load_tokenizer(cfg.data),
        max_batch=s.max_batch,
        max_tokens_in_flight=s.max_tokens_in_flight,
        prefill_chunk=s.prefill_chunk,
        max_waiting=s.max_waiting,
        decode_step=step,
        metrics=metrics,
    )
    server = Server(engine, metrics, __package__.split(".")[0])
    return build_app(server, cfg), server


def serve(cfg: Config) -> None:
    """The ``serve`` command: serve until SIGINT or SIGTERM, then drain."""
    app, _ = build_server(cfg)
    if cfg.serve.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serve.host = %s: the server is reachable beyond this machine", cfg.serve.host)
    uvicorn.run(
        app,
        host=cfg.serve.host,
        port=cfg.serve.port,
        timeout_graceful_shutdown=cfg.serve.drain_seconds,
        log_level="info",
    )

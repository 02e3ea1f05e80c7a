"""Continuous batching: requests join and leave the running batch at every decode step.

The model's static KV cache has one row per slot: ``serve.max_batch`` rows of
``model.max_seq_len`` positions. A request takes the lowest free slot and its prompt is
prefilled into that row; from then on it is one row of every decode step, at its own position
(positions of shape (batch, 1): the cache writes each row's keys at its own position and masks
them by it), until it stops and frees the slot. Each step:

1. requests cancelled since the last step leave, freeing their slots;
2. waiting requests take free slots, oldest first, while the cache positions they may fill
   (prompt + ``max_tokens``) stay within ``serve.max_tokens_in_flight``;
3. prefill: at most ``serve.prefill_chunk`` prompt tokens in all, oldest request first, so a
   long prompt is spread over several steps and the streams already running keep their pace;
4. decode: one token for every request past its prefill, in one forward over the first ``b``
   rows of the cache, ``b`` the smallest power of two that holds the highest slot in use. The
   decode step takes a few static shapes, so ``generate.compile`` compiles each once.

Nothing here speaks HTTP: ``submit`` and ``step`` (or ``run``) serve the tests and any
offline batch; ``app.py`` drives the same engine from a thread.
"""

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..data.tokenizer import Tokenizer
from ..inference.sampling import sample
from ..model import Transformer
from .metrics import Metrics

REQUEST_IDS = itertools.count()


class RequestError(ValueError):
    """A request the engine cannot take, with what to change; the server answers 400."""


class EngineFull(RuntimeError):
    """Too many requests waiting (``serve.max_waiting``); the server answers 503."""


@dataclass(frozen=True)
class Delta:
    """What one step added to a request: new text (held back while it may still turn into a
    stop string or a partial character), and the reason it finished, once it has."""

    text: str
    finish_reason: str | None = None  # "stop" (a stop string or end of text), "length"


@dataclass
class Request:
    """One completion: the prompt's ids and its sampling parameters, then the engine's state.

    ``on_delta`` is called from the thread that steps the engine, once per step that adds
    text or finishes the request.
    """

    prompt: list[int]
    max_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    on_delta: Callable[[Delta], None] = lambda delta: None
    id: int = field(default_factory=lambda: next(REQUEST_IDS))
    slot: int = -1
    prefilled: int = 0  # prompt tokens in the cache
    tokens: list[int] = field(default_factory=list)  # generated ids
    text: str = ""  # the generated text, cut at a stop string
    sent: int = 0  # characters of ``text`` handed to on_delta
    finish_reason: str | None = None
    cancelled: bool = False
    arrived: float = field(default_factory=time.perf_counter)
    last_token_at: float = 0.0

    @property
    def decoding(self) -> bool:
        return self.prefilled == len(self.prompt) and self.finish_reason is None

    @property
    def position(self) -> int:
        """Where the latest token goes in the cache when it is fed back."""
        return len(self.prompt) + len(self.tokens) - 1

    def cancel(self) -> None:
        """Leave at the next step (the client went away); safe from any thread."""
        self.cancelled = True


def power_of_two_at_least(n: int) -> int:
    return 1 << (n - 1).bit_length()


def stop_prefix(text: str, stop: str) -> int:
    """The length of the longest start of ``stop`` that ``text`` ends with, short of all of it."""
    return next((n for n in range(len(stop) - 1, 0, -1) if text.endswith(stop[:n])), 0)


class Engine:
    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer,
        max_batch: int,
        max_tokens_in_flight: int,
        prefill_chunk: int,
        max_waiting: int,
        decode_step: Callable[[Transformer, Tensor, Tensor], Tensor] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.device = model.output.weight.device
        self.context = model.cfg.max_seq_len
        self.max_tokens_in_flight = max_tokens_in_flight
        self.prefill_chunk, self.max_waiting = prefill_chunk, max_waiting
        self.decode_step = decode_step or last_logits
        self.metrics = metrics
        self.slots: list[Request | None] = [None] * max_batch
        self.waiting: deque[Request] = deque()
        self.lock = threading.Lock()  # submit (any thread) against step (one thread)
        model.setup_cache(max_batch, self.context)

    @property
    def running(self) -> list[Request]:
        return [r for r in self.slots if r is not None]

    def idle(self) -> bool:
        return not self.waiting and not self.running

    def submit(self, request: Request) -> Request:
        """Queue ``request``; it joins the batch at a coming step. Raises ``RequestError`` for
        a request that can never run and ``EngineFull`` when the queue is full."""
        if not request.prompt:
            raise RequestError("the prompt is empty: give at least one token to continue")
        if request.max_tokens < 1:
            raise RequestError(f"max_tokens = {request.max_tokens}: ask for at least 1")
        if (need := len(request.prompt) + request.max_tokens) > self.context:
            raise RequestError(
                f"the prompt ({len(request.prompt)} tokens) and max_tokens "
                f"({request.max_tokens}) need {need} positions, more than the model's context "
                f"of {self.context} (model.max_seq_len): shorten the prompt or lower max_tokens"
            )
        if need > self.max_tokens_in_flight:
            raise RequestError(
                f"the prompt and max_tokens need {need} cache positions, more than "
                f"serve.max_tokens_in_flight = {self.max_tokens_in_flight}: lower max_tokens"
            )
        with self.lock:
            if len(self.waiting) >= self.max_waiting:
                raise EngineFull(
                    f"{len(self.waiting)} requests are waiting (serve.max_waiting): retry later"
                )
            self.waiting.append(request)
        if self.metrics:
            self.metrics.queue_depth.set(len(self.waiting))
        return request

    @torch.no_grad()
    def step(self) -> int:
        """One scheduling step; returns the tokens it generated."""
        self.leave_cancelled()
        self.admit()
        self.prefill()
        return self.decode()

    def run(self) -> None:
        """Step until every submitted request has finished."""
        while not self.idle():
            self.step()

    def leave_cancelled(self) -> None:
        with self.lock:
            gone = [r for r in self.waiting if r.cancelled]
            for request in gone:
                self.waiting.remove(request)
        for request in gone + [r for r in self.running if r.cancelled]:
            self.finish(request, "cancelled")

    def abort(self) -> None:
        """End every request with ``error`` (a step failed), freeing every slot."""
        with self.lock:
            waiting, self.waiting = list(self.waiting), deque()
        for request in waiting + self.running:
            self.finish(request, "error")

    def admit(self) -> None:
        in_flight = sum(len(r.prompt) + r.max_tokens for r in self.running)
        with self.lock:
            while self.waiting and None in self.slots:
                request = self.waiting[0]
                if in_flight + len(request.prompt) + request.max_tokens > self.max_tokens_in_flight:
                    break
                self.waiting.popleft()
                request.slot = self.slots.index(None)
                self.slots[request.slot] = request
                in_flight += len(request.prompt) + request.max_tokens
        if self.metrics:
            self.metrics.queue_depth.set(len(self.waiting))

    def prefill(self) -> None:
        budget = self.prefill_chunk
        for request in sorted(self.running, key=lambda r: r.arrived):
            if budget == 0:
                break
            start = request.prefilled
            chunk = request.prompt[start : start + budget]
            if not chunk:
                continue
            tokens = torch.tensor([chunk], device=self.device)
            positions = torch.arange(start, start + len(chunk), device=self.device)
            with cache_rows(self.model, slice(request.slot, request.slot + 1)):
                logits = self.model(tokens, positions)[:, -1]
            request.prefilled += len(chunk)
            budget -= len(chunk)
            if request.prefilled == len(request.prompt):
                first = sample(logits, request.temperature, request.top_k)
                now = time.perf_counter()
                if self.metrics:
                    self.metrics.time_to_first_token.observe(now - request.arrived)
                self.append(request, int(first), now)

    def decode(self) -> int:
        rows = [r for r in self.running if r.decoding]
        if not rows:
            return 0
        started = time.perf_counter()
        batch = min(power_of_two_at_least(max(r.slot for r in rows) + 1), len(self.slots))
        # Rows not decoding write their dummy token at the last position: a request there
        # writes that position itself in the forward that first reads it.
        tokens = torch.zeros(batch, 1, dtype=torch.long)
        positions = torch.full((batch, 1), self.context - 1)
        for r in rows:
            tokens[r.slot, 0], positions[r.slot, 0] = r.tokens[-1], r.position
        with cache_rows(self.model, slice(0, batch)):
            logits = self.decode_step(self.model, tokens.to(self.device), positions.to(self.device))
        now = time.perf_counter()
        for r in rows:
            token = sample(logits[r.slot : r.slot + 1], r.temperature, r.top_k)
            if self.metrics:
                self.metrics.time_per_output_token.observe(now - r.last_token_at)
            self.append(r, int(token), now)
        if self.metrics:
            self.metrics.decode_step(len(rows), len(self.slots), now - started)
        return len(rows)

    def append(self, request: Request, token: int, now: float) -> None:
        """Add ``token`` to ``request``'s output, hand on the text it completes, and finish
        the request at end of text, a stop string or ``max_tokens``."""
        request.last_token_at = now
        if self.metrics:
            self.metrics.generated_tokens.inc()
        if token == self.tokenizer.eot_id:
            self.finish(request, "stop")
            return
        request.tokens.append(token)
        request.text = self.tokenizer.decode(request.tokens)
        cut = min((i for s in request.stop if (i := request.text.find(s)) >= 0), default=-1)
        if cut >= 0:
            request.text = request.text[:cut]
            self.finish(request, "stop")
        elif len(request.tokens) == request.max_tokens:
            self.finish(request, "length")
        else:
            self.send(request, None)

    def finish(self, request: Request, reason: str) -> None:
        request.finish_reason = reason
        if request.slot >= 0:
            self.slots[request.slot] = None
        if self.metrics:
            self.metrics.requests.labels(reason).inc()
        self.send(request, reason)

    def send(self, request: Request, finish_reason: str | None) -> None:
        """Hand on the text not yet sent. While the request runs, hold back a trailing
        partial character and any tail that may be the start of a stop string."""
        end = len(request.text)
        if finish_reason is None:
            end = len(request.text.rstrip("\ufffd"))  # a character whose bytes are coming
            end -= max((stop_prefix(request.text[:end], stop) for stop in request.stop), default=0)
        if end > request.sent or finish_reason:
            text, request.sent = request.text[request.sent : max(end, request.sent)], end
            request.on_delta(Delta(text, finish_reason))


@contextmanager
def cache_rows(model: Transformer, rows: slice) -> Iterator[None]:
    """Cached forwards inside see only ``rows`` of every layer's cache, as if they were the
    whole batch: a request's prefill writes its own row, and a decode step reads the rows in
    use rather than all the engine has room for. The rows are views, written in place."""
    caches = [layer.attention.kv_cache for layer in model.layers.values()]
    whole = [dict(cache.named_buffers(recurse=False)) for cache in caches]
    for cache, buffers in zip(caches, whole, strict=True):
        for name, buffer in buffers.items():
            if buffer.dim() > 1:  # the slots' positions (1-D) are every row's
                setattr(cache, name, buffer[rows])
    try:
        yield
    finally:
        for cache, buffers in zip(caches, whole, strict=True):
            for name, buffer in buffers.items():
                setattr(cache, name, buffer)


def last_logits(model: Transformer, tokens: Tensor, positions: Tensor) -> Tensor:
    """The decode step: next-token logits (batch, vocab) of one token per row."""
    return model(tokens, positions)[:, -1]

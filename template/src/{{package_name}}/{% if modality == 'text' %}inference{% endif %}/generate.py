"""Autoregressive generation with a static KV cache.

Prefill runs the prompt through the model once and fills the cache; each decode step then
feeds one token per sequence and attends over the cache. The cache has a fixed shape, so the
decode step can be compiled into one graph (``generate.compile``): with CUDA graphs
(``mode="reduce-overhead"``) on a GPU, where the launch overhead of small batch-1 kernels is
what limits decode speed.
"""

import logging
import time
from collections.abc import Callable

import torch
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from ..config import Config, ConfigError
from ..data.tokenizer import load_tokenizer
from ..device import select_device, synchronize
from ..model import Transformer
from ..perf.profiling import classify, time_by_kind
from ..training.checkpoint import checkpoints, load_model_weights, step_of
from ..training.precision import for_inference
from ..training.train import init_model
from .quantize import device_error, quantize, quantized_path, save_quantized, saved_quantized

log = logging.getLogger(__name__)

DecodeStep = Callable[[Transformer, Tensor, Tensor, float, int], Tensor]


def sample(logits: Tensor, temperature: float, top_k: int) -> Tensor:
    """Next-token ids (batch,) from last-position logits (batch, vocab): greedy at temperature 0."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k:
        kth_largest = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    # argmax(p / E) with E ~ Exp(1) is a draw from p (the exponential race), and unlike
    # torch.multinomial it needs no host synchronisation.
    return torch.argmax(probs / torch.empty_like(probs).exponential_(1), dim=-1)


def prefill(model: Transformer, prompt: Tensor, temperature: float, top_k: int) -> Tensor:
    input_pos = torch.arange(prompt.shape[1], device=prompt.device)
    return sample(model(prompt, input_pos)[:, -1], temperature, top_k)


def decode_one(
    model: Transformer, token: Tensor, input_pos: Tensor, temperature: float, top_k: int
) -> Tensor:
    """One decode step: ``token`` (batch, 1) at position ``input_pos`` (1,) to the next ids."""
    return sample(model(token, input_pos)[:, -1], temperature, top_k)


def decode(
    model: Transformer,
    first: Tensor,
    start_pos: int,
    n_tokens: int,
    temperature: float,
    top_k: int,
    decode_step: DecodeStep = decode_one,
) -> Tensor:
    """Feed ``first`` (batch,) at ``start_pos`` and the ``n_tokens`` that follow; (batch, n)."""
    tokens = [first]
    for pos in range(start_pos, start_pos + n_tokens):
        input_pos = torch.tensor([pos], device=first.device)
        # A copy: a CUDA-graph replay writes its output where the previous replay's was.
        step = decode_step(model, tokens[-1][:, None], input_pos, temperature, top_k)
        tokens.append(step.clone())
    if not n_tokens:
        return first.new_empty(first.shape[0], 0)
    return torch.stack(tokens[1:], dim=1)


@torch.no_grad()
def generate(
    model: Transformer,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int = 0,
    decode_step: DecodeStep = decode_one,
) -> Tensor:
    """``prompt`` (batch, prompt_len) followed by ``max_new_tokens`` generated tokens per row.

    The cache holds at most ``model.max_seq_len`` positions, the context the model was built
    for. When the prompt and the new tokens do not fit, the window slides: each time the cache
    is full, the last half of it is prefilled again as the context of what follows, so the
    model always sees between half and all of its context. The prompt must leave room for
    one new token.
    """
    batch, prompt_len = prompt.shape
    context_len = model.cfg.max_seq_len
    if prompt_len >= context_len:
        raise ValueError(f"a prompt of {prompt_len} tokens leaves no room in {context_len}")
    cache_len = min(context_len, prompt_len + max_new_tokens)
    pieces, context, remaining = [prompt], prompt, max_new_tokens
    while remaining:
        model.setup_cache(batch, cache_len)  # the same sizes again: emptied in place
        pos = context.shape[1]
        n = min(remaining, cache_len - pos)  # the last new token is never fed back
        first = prefill(model, context, temperature, top_k)
        rest = decode(model, first, pos, n - 1, temperature, top_k, decode_step)
        pieces += [first[:, None], rest]
        remaining -= n
        context = torch.cat(pieces, dim=1)[:, -(context_len // 2) :]
    return torch.cat(pieces, dim=1)


def compiled_decode_step(device: torch.device) -> DecodeStep:
    """``decode_one`` compiled for ``device``: with CUDA graphs on a GPU, without elsewhere.

    Its guards skip torch's own modules (the Linears, embeddings and norms, whose parameters
    stay put while a model generates): checking every one of them before each call cost a
    tenth of a decode step on a CPU. The project's modules are still checked, so a cache set
    up anew, of another size, gets a step compiled for it.
    """
    if device.type != "cuda":
        log.info("generate.compile: CUDA graphs need CUDA; compiling the decode step without them")
    options = {  # mode="reduce-overhead" is triton.cudagraphs, and takes no other options
        "guard_filter_fn": torch.compiler.skip_guard_on_inbuilt_nn_modules_unsafe,
        "triton.cudagraphs": device.type == "cuda",
    }
    return torch.compile(decode_one, fullgraph=True, options=options)


def load_for_inference(cfg: Config) -> tuple[Transformer, torch.device]:
    """The latest checkpoint's model (or a random one, with a warning), ready on the device,
    quantized as ``generate.quantization`` says (``quantize.py``): from the saved quantized
    weights when they are of the latest checkpoint."""
    device = select_device(cfg.train.device)
    model = init_model(cfg)
    method = cfg.generate.quantization
    if method != "none" and (why := device_error(method, device)):
        # As training falls back from fp8 off its GPUs: the project still runs on a laptop.
        log.warning("%s; generating without quantization", why)
        method = "none"
    saved = saved_quantized(cfg) if method != "none" else None
    step = saved["step"] if saved else load_model_weights(model, cfg.checkpoint.dir)
    if step is None:
        log.warning(
            "no checkpoint in %s/: generating from randomly initialised weights",
            cfg.checkpoint.dir,
        )
    for_inference(model, device, cfg.train.precision)
    if method != "none":
        quantize(model, method, device)
    if saved:
        model.load_state_dict({k: v.to(device) for k, v in saved["model"].items()}, assign=True)
    if step is not None:
        source = quantized_path(cfg) if saved else f"{cfg.checkpoint.dir}/"
        log.info("loaded the weights of step %d from %s (quantization: %s)", step, source, method)
    return model.eval(), device


def write_quantized(cfg: Config) -> dict[str, str | int]:
    """The ``quantize`` command: the latest checkpoint's weights, quantized as
    ``generate.quantization`` says, written where ``generate`` reads them."""
    if cfg.generate.quantization == "none":
        raise ConfigError(
            "generate.quantization = none: name the method to write, e.g. "
            "generate.quantization=int8_weight_only"
        )
    found = checkpoints(cfg.checkpoint.dir)
    if not found:
        raise ConfigError(
            f"no checkpoint in {cfg.checkpoint.dir}: train first, or point checkpoint.dir at one"
        )
    if why := device_error(cfg.generate.quantization, select_device(cfg.train.device)):
        raise ConfigError(why)
    model, _ = load_for_inference(cfg)
    step = step_of(found[-1])
    path = save_quantized(model, cfg, step)
    return {"quantized": str(path), "step": step, "method": cfg.generate.quantization}


def sample_text(cfg: Config) -> list[str]:
    """The ``generate`` command: ``generate.batch_size`` continuations of ``generate.prompt``."""
    g = cfg.generate
    tokenizer = load_tokenizer(cfg.data)
    ids = tokenizer.encode(g.prompt)
    context_len = cfg.model.max_seq_len
    if not ids:
        raise ConfigError("generate.prompt is empty: give at least one character to continue")
    if len(ids) >= context_len:
        log.info(
            "generate.prompt has %d tokens; the model reads at most model.max_seq_len = %d: "
            "continuing its last %d",
            len(ids),
            context_len,
            context_len - 1,
        )
        ids = ids[-(context_len - 1) :]
    if len(ids) + g.max_new_tokens > context_len:
        log.info(
            "the prompt (%d tokens) and generate.max_new_tokens (%d) exceed model.max_seq_len "
            "(%d): the window slides, each new window reading the last %d tokens",
            len(ids),
            g.max_new_tokens,
            context_len,
            context_len // 2,
        )
    model, device = load_for_inference(cfg)
    decode_step = compiled_decode_step(device) if g.compile else decode_one
    prompt = torch.tensor([ids] * g.batch_size, device=device)
    torch.manual_seed(cfg.train.seed)
    out = generate(model, prompt, g.max_new_tokens, g.temperature, g.top_k, decode_step)
    return [tokenizer.decode(row.tolist()) for row in out]


PROFILED_STEPS = 32  # decode steps under the profiler, for decode_time_by_kind


def decode_time_by_kind(
    model: Transformer,
    first: Tensor,
    start_pos: int,
    steps: int,
    args: tuple[float, int],
    decode_step: DecodeStep,
    device: torch.device,
) -> dict[str, float]:
    """Where ``steps`` decode steps spend their wall time, as shares: each kind of op's (the
    kinds of the training profile, ``perf/profiling.py``: matmuls, attention, code compiled by
    Inductor with its guard checks, ...), and ``outside ops`` for the rest. On a CPU the rest
    is Python and dispatch between the ops, what compiling the step removes; on a GPU it is
    the time the device waits for the host, what CUDA graphs remove."""
    if not steps:
        return {}
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        decode(model, first, start_pos, steps, *args, decode_step=decode_step)
        synchronize(device)
        step_ms = (time.perf_counter() - start) * 1e3 / steps
    rows = time_by_kind(classify(prof.events()), cuda, steps)
    shares = {row.name: row.ms_per_step / step_ms for row in rows}
    shares["outside ops"] = max(0.0, 1.0 - sum(shares.values()))
    return {kind: round(share, 4) for kind, share in shares.items()}


@torch.no_grad()
def bench_generation(cfg: Config) -> dict[str, float | int | str | bool]:
    """``generate --bench``: prefill and decode throughput on random prompts.

    One untimed generation first, so that compilation and allocation are not measured.
    """
    g = cfg.generate
    if g.prompt_len + g.max_new_tokens > cfg.model.max_seq_len:
        raise ConfigError(
            f"generate --bench times one fill of the cache: generate.prompt_len + "
            f"generate.max_new_tokens = {g.prompt_len + g.max_new_tokens} must not exceed "
            f"model.max_seq_len ({cfg.model.max_seq_len}); lower one of them"
        )
    model, device = load_for_inference(cfg)
    decode_step = compiled_decode_step(device) if g.compile else decode_one
    generator = torch.Generator().manual_seed(cfg.train.seed)
    prompt = torch.randint(cfg.model.vocab_size, (g.batch_size, g.prompt_len), generator=generator)
    prompt = prompt.to(device)
    args = (g.temperature, g.top_k)
    generate(model, prompt, g.max_new_tokens, *args, decode_step=decode_step)

    # The warm-up's caches, emptied in place: the buffers the compiled step was recorded with.
    model.setup_cache(g.batch_size, g.prompt_len + g.max_new_tokens)
    synchronize(device)
    start = time.perf_counter()
    first = prefill(model, prompt, *args)
    synchronize(device)
    prefill_s = time.perf_counter() - start
    n_decode = g.max_new_tokens - 1
    start = time.perf_counter()
    decode(model, first, g.prompt_len, n_decode, *args, decode_step=decode_step)
    synchronize(device)
    decode_s = time.perf_counter() - start
    model.setup_cache(g.batch_size, g.prompt_len + g.max_new_tokens)
    first = prefill(model, prompt, *args)
    profiled = min(n_decode, PROFILED_STEPS)
    by_kind = decode_time_by_kind(model, first, g.prompt_len, profiled, args, decode_step, device)
    return {
        "prefill_tokens_per_s": g.batch_size * g.prompt_len / prefill_s,
        "decode_tokens_per_s": g.batch_size * n_decode / decode_s if n_decode else 0.0,
        "time_to_first_token_ms": prefill_s * 1e3,
        "decode_ms_per_step": decode_s * 1e3 / n_decode if n_decode else 0.0,
        "decode_time_by_kind": by_kind,
        "batch_size": g.batch_size,
        "prompt_len": g.prompt_len,
        "new_tokens": g.max_new_tokens,
        "compiled": g.compile,
        "quantization": g.quantization,
        "device": device.type,
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
    }

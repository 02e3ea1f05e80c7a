"""Gradient-flow debugging: per-layer gradient norms, and the module where a NaN starts.

``grad_norms(model)`` after a backward pass gives one L2 norm per block component
(``layers.3.attention``, ``layers.3.feed_forward``, ``tok_embeddings``, ...): vanishing
norms in the early layers or one exploding component show up at a glance, which the single
clipped global norm in the logs hides.

``find_nonfinite(model, inputs)`` reruns a forward pass with a hook on every module and names
the first one whose output holds a NaN or an infinity: the innermost module, in execution
order, where the bad value appeared. The trainer calls it when the loss diverges. The forward
always runs to its end: under FSDP2 a rank that stopped early would leave the others waiting
in the next block's all-gather. The ranks then share what they found, so every rank reports
the same cause, whichever rank it appeared on.
"""

import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import Tensor, nn

from ..task import forward

# A task's forward: (model, inputs, *what else the batch holds) -> the model's output.
Forward = Callable[..., object]


def component_of(name: str) -> str:
    """``layers.3.attention.wq.weight`` -> ``layers.3.attention``; ``norm.weight`` -> ``norm``."""
    parts = name.split(".")
    return ".".join(parts[:3]) if parts[0] == "layers" else parts[0]


def grad_norms(model: nn.Module) -> dict[str, float]:
    """The L2 norm of each component's gradients, in parameter order (no gradient: skipped)."""
    squares: dict[str, float] = defaultdict(float)
    for name, param in model.named_parameters():
        if param.grad is not None:
            squares[component_of(name)] += param.grad.detach().float().pow(2).sum().item()
    return {name: math.sqrt(total) for name, total in squares.items()}


def format_grad_norms(norms: dict[str, float]) -> str:
    """One line per component, aligned, for a log or a terminal."""
    width = max(map(len, norms), default=0)
    return "\n".join(f"{name:<{width}}  {norm:.3e}" for name, norm in norms.items())


def _tensors(value: object) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)


@contextmanager
def nonfinite_hooks(model: nn.Module) -> Iterator[list[str]]:
    """Record the modules whose forward output is not finite, in the order they return.

    A module's hook runs when its forward returns, so children report before their parents:
    the first recorded is where the value appeared. Nothing is raised, so the forward (and
    any collective inside it) runs to its end.
    """
    found: list[str] = []

    def check(name: str, output: object) -> None:
        for tensor in _tensors(output):
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                found.append(name or "model")
                return

    handles = [
        module.register_forward_hook(lambda m, i, o, name=name: check(name, o))
        for name, module in model.named_modules()
    ]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def find_nonfinite(
    model: nn.Module,
    inputs: Tensor,
    *rest: Tensor,
    forward: Forward = forward,
    through: nn.Module | None = None,
) -> str | None:
    """The first module of ``model`` producing a NaN/inf on a batch's ``inputs`` (and what
    else the model reads of it), run by the task's ``forward`` through ``through`` (default:
    ``model``; the wrapper or the pipeline a training step calls, which runs ``model``'s
    modules), or None if the forward is finite."""
    with nonfinite_hooks(model) as found:
        forward(model if through is None else through, inputs, *rest)
    return found[0] if found else None


def from_every_rank(value: object) -> list:
    """``value`` as each rank has it, in rank order; ``[value]`` in a process of its own."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [value]
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def explain_nonfinite(
    model: nn.Module,
    inputs: Tensor,
    *rest: Tensor,
    forward: Forward = forward,
    through: nn.Module | None = None,
) -> str:
    """Where a non-finite loss came from, as a clause for the error message; call on all ranks
    (``through``: see ``find_nonfinite``).

    Once an optimizer step has used NaN gradients the weights themselves are NaN and every
    module reports one, so the parameters are checked first (this rank's shards of them; a
    pipeline stage's own parameters).
    """
    local = [name for name, p in model.named_parameters() if not torch.isfinite(_local(p)).all()]
    # Every rank gets the same list, in rank order: the ranks then agree on what comes next.
    broken = list(dict.fromkeys(name for names in from_every_rank(local) for name in names))
    if broken:
        return (
            f"the update already made {len(broken)} parameter tensors non-finite "
            f"(first: {broken[0]})"
        )
    culprits = from_every_rank(
        find_nonfinite(model, inputs, *rest, forward=forward, through=through)
    )
    found = [(rank, culprit) for rank, culprit in enumerate(culprits) if culprit is not None]
    if not found:
        return "a second forward pass on the batch is finite"
    rank, culprit = found[0]
    where = f" on rank {rank}" if len(culprits) > 1 else ""
    return f"the first module with a non-finite output{where} is {culprit}"


def _local(param: Tensor) -> Tensor:
    """This rank's part of a parameter: the shard of a sharded (DTensor) one."""
    return param.to_local() if hasattr(param, "to_local") else param

"""Gradient-flow debugging: per-layer gradient norms, and the module where a NaN starts.

``grad_norms(model)`` after a backward pass gives one L2 norm per block component
(``layers.3.attention``, ``layers.3.feed_forward``, ``tok_embeddings``, ...): vanishing
norms in the early layers or one exploding component show up at a glance, which the single
clipped global norm in the logs hides.

``find_nonfinite(model, tokens)`` reruns a forward pass with a hook on every module and names
the first one whose output holds a NaN or an infinity: the innermost module, in execution
order, where the bad value appeared. The trainer calls it when the loss diverges.
"""

import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn


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


class NonFiniteOutput(RuntimeError):
    """A module produced a NaN or an infinity; ``module`` is its qualified name."""

    def __init__(self, module: str, kind: str) -> None:
        super().__init__(f"{module} ({kind}) produced the first non-finite output")
        self.module = module


def _tensors(value: object) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)


@contextmanager
def nonfinite_hooks(model: nn.Module) -> Iterator[None]:
    """Raise ``NonFiniteOutput`` from the first module whose forward output is not finite.

    A module's hook runs when its forward returns, so children report before their parents:
    the first to raise is where the value appeared.
    """

    def check(name: str, module: nn.Module, _inputs: object, output: object) -> None:
        for tensor in _tensors(output):
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                raise NonFiniteOutput(name or "model", type(module).__name__)

    handles = [
        module.register_forward_hook(lambda m, i, o, name=name: check(name, m, i, o))
        for name, module in model.named_modules()
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def find_nonfinite(model: nn.Module, tokens: Tensor) -> str | None:
    """The first module producing a NaN/inf on ``tokens``, or None if the forward is finite."""
    try:
        with nonfinite_hooks(model):
            model(tokens)
    except NonFiniteOutput as e:
        return e.module
    return None


def explain_nonfinite(model: nn.Module, tokens: Tensor) -> str:
    """Where a non-finite loss came from, as a clause for the error message.

    Once an optimizer step has used NaN gradients the weights themselves are NaN and every
    module reports one, so the parameters are checked first.
    """
    broken = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
    if broken:
        return (
            f"the update already made {len(broken)} parameter tensors non-finite "
            f"(first: {broken[0]})"
        )
    culprit = find_nonfinite(model, tokens)
    if culprit is None:
        return "a second forward pass on the batch is finite"
    return f"the first module with a non-finite output is {culprit}"

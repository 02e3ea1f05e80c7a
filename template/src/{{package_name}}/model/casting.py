"""The dtype the model computes in under autocast, for the tensors it casts itself, and what
its modules keep for the backward, by the dtype they keep it in."""

from dataclasses import dataclass

import torch
from torch import Tensor


def compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype matmuls on x's device run in: autocast's where it is on, else x's own."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


def cast_once(x: Tensor) -> Tensor:
    """x in the compute dtype, for a sub-layer whose matmuls all read it.

    Autocast casts a matmul's input in every call, and every call keeps its own copy for the
    backward: three of the norm output that q, k and v are projected from, two of SwiGLU's
    input. Cast here, once, they share one. The values are those autocast would make, and
    without autocast (fp32, or weights already in low precision) x comes back as it is.
    """
    return x.to(compute_dtype(x))


FP32_BYTES = 4


@dataclass(frozen=True)
class Kept:
    """Elements a module keeps per token for its backward, by the dtype they are kept in: the
    residual stream's, the compute dtype, fp32. Each module counts its own
    (``kept_per_token``); ``perf.memory`` adds them up into bytes."""

    residual: float = 0
    compute: float = 0
    fp32: float = 0

    def __add__(self, other: "Kept") -> "Kept":
        return Kept(
            self.residual + other.residual, self.compute + other.compute, self.fp32 + other.fp32
        )

    def bytes(self, compute_bytes: int, residual_bytes: int) -> float:
        return (
            residual_bytes * self.residual + compute_bytes * self.compute + FP32_BYTES * self.fp32
        )

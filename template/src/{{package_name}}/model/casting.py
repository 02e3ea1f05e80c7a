"""The dtype the model computes in under autocast, for the tensors it casts itself."""

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

"""Rotary position embedding (Su et al., 2021, "RoFormer").

Each pair of channels (2i, 2i+1) of a query or key is rotated by the angle
``position * theta ** (-2i / head_dim)``, so the dot product of a query and a key depends only
on their distance. The table is kept as real cos/sin buffers rather than complex numbers:
every backend, dtype and compiler handles real tensors.
"""

import torch
from torch import Tensor, nn


class RotaryEmbedding(nn.Module):
    """Precomputed cos/sin tables of shape (max_seq_len, head_dim // 2).

    The buffers are non-persistent: they follow from the config, so checkpoints do not carry
    them, and ``reset_buffers`` rebuilds them after ``to_empty`` (meta-device construction).
    """

    def __init__(self, head_dim: int, max_seq_len: int, theta: float) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.max_seq_len = max_seq_len
        self.theta = theta
        self.register_buffer("cos", torch.empty(max_seq_len, head_dim // 2), persistent=False)
        self.register_buffer("sin", torch.empty(max_seq_len, head_dim // 2), persistent=False)
        self.reset_buffers()

    @torch.no_grad()
    def reset_buffers(self) -> None:
        device = self.cos.device
        exponents = torch.arange(0, self.head_dim, 2, device=device).float() / self.head_dim
        inv_freq = self.theta**-exponents
        positions = torch.arange(self.max_seq_len, device=device).float()
        angles = torch.outer(positions, inv_freq)
        self.cos.copy_(angles.cos())
        self.sin.copy_(angles.sin())


def apply_rotary_emb(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x of shape (batch, seq, heads, head_dim) by the angles of its positions.

    cos and sin are the table rows of those positions, shape (seq, head_dim // 2). The
    rotation runs in fp32 (low-precision angles would blur distant positions) and the result
    comes back in x's dtype.
    """
    x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # broadcast over heads
    rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)

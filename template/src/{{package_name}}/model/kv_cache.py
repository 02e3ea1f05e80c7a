"""A static key/value cache in the style of gpt-fast.

The buffers have a fixed shape for the whole generation and are written in place, so every
decode step sees tensors of the same shape: ``torch.compile`` builds one graph for it and CUDA
graphs can replay it. The price is memory for ``max_seq_len`` positions from the start.
"""

import torch
from torch import Tensor, nn


class KVCache(nn.Module):
    """Keys and values of one attention layer, shape (batch, n_kv_heads, max_seq_len, head_dim)."""

    def __init__(
        self,
        batch_size: int,
        n_kv_heads: int,
        max_seq_len: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        shape = (batch_size, n_kv_heads, max_seq_len, head_dim)
        k_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.register_buffer("k_cache", k_cache, persistent=False)
        self.register_buffer("v_cache", torch.zeros_like(k_cache), persistent=False)

    def update(self, input_pos: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write k, v (batch, n_kv_heads, len(input_pos), head_dim) at input_pos; return the caches.

        The whole cache is returned, not the filled part: positions not yet written are hidden
        by the causal mask, and the shapes stay static.
        """
        self.k_cache[:, :, input_pos] = k
        self.v_cache[:, :, input_pos] = v
        return self.k_cache, self.v_cache

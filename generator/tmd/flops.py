"""Analytic training FLOPs per token, the figure behind MFU.

Forward matmuls cost 2 FLOPs per weight per token, backward twice that: 6·N for the N weights
that multiply activations (every Linear, including the output head; the embedding is a lookup).
Attention scores and the weighted sum add 2·2·T·d per layer forward, ×3 with backward: 12·L·T·d.
The causal mask is not discounted (the PaLM convention, also torchtitan's and nanoGPT's), so the
figure is comparable with published MFU numbers.
"""

from __future__ import annotations

from .presets import ModelShape, count_params


def matmul_params(shape: ModelShape) -> int:
    norms = (2 * shape.n_layers + 1) * shape.dim + (
        2 * shape.head_dim * shape.n_layers if shape.qk_norm else 0
    )
    return count_params(shape) - shape.vocab_size * shape.dim - norms


def train_flops_per_token(shape: ModelShape, seq_len: int) -> int:
    return 6 * matmul_params(shape) + 12 * shape.n_layers * seq_len * shape.dim

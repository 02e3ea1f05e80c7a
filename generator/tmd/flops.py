"""Analytic training FLOPs per token, the figure behind MFU.

Forward matmuls cost 2 FLOPs per weight per token, backward twice that: 6·N for the N weights
that multiply activations (every Linear, the output head included; the embedding is a lookup;
a MoE counts only the top-k experts a token visits). Attention scores and the weighted sum add
2·T·(qk width + v width) per layer forward, x3 with backward, with T the keys each query sees
(for sliding-window attention, which scores each block of `window` queries against two
blocks of keys, at most 2·window). The causal mask is not discounted (the PaLM
convention, also torchtitan's and nanoGPT's), so the figure compares with published MFU. The
SSM's scan is elementwise work and is left out, as matmul-only FLOP counters do; its
depthwise convolution counts like a Linear, 2 FLOPs per weight per token.
"""

from __future__ import annotations

from .presets import ModelShape, matmul_weights


def matmul_params(shape: ModelShape) -> int:
    """Weights that multiply activations, per token actually used (top-k experts only)."""
    if shape.ffn != "moe":
        return matmul_weights(shape)
    idle = shape.n_experts - shape.top_k  # experts a token is not routed to
    return matmul_weights(shape) - shape.n_layers * idle * 3 * shape.dim * shape.ffn_hidden_dim


def attention_flops_per_token(shape: ModelShape, seq_len: int, window: int = 0) -> int:
    """Training FLOPs of the score and value matmuls, per token, over all layers."""
    if shape.attention == "ssm":
        return 0
    # A sliding window computes blocks of `window` queries against two blocks of keys.
    keys = min(2 * window, seq_len) if shape.attention == "sliding_window" else seq_len
    hd = shape.head_dim
    qk = shape.n_heads * (hd + shape.rope_head_dim) if shape.attention == "mla" else shape.dim
    v = shape.n_heads * hd
    return 6 * shape.n_layers * keys * (qk + v)


def train_flops_per_token(shape: ModelShape, seq_len: int, window: int = 0) -> int:
    return 6 * matmul_params(shape) + attention_flops_per_token(shape, seq_len, window)

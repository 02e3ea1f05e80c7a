"""Analytic training FLOPs per token, the figure behind MFU.

Forward matmuls cost 2 FLOPs per weight per token, backward twice that: 6·N for the N weights
that multiply activations in the blocks (a MoE counts only the top-k experts a token visits).
The front-end and the head count as the rendered model counts them (`io_flops_per_token`): a
text head on every token (the embedding is a lookup); an image's or a table's head once per
sample. Attention scores and the weighted sum add
2·T·(qk width + v width) per layer forward, x3 with backward, with T the keys each query sees
(for sliding-window attention, which scores each block of `window` queries against two
blocks of keys, at most 2·window). The causal mask is not discounted (the PaLM
convention, also torchtitan's and nanoGPT's), so the figure compares with published MFU. The
SSM's scan is elementwise work and is left out, as matmul-only FLOP counters do; its
depthwise convolution counts like a Linear, 2 FLOPs per weight per token.
"""

from __future__ import annotations

from .presets import ModelShape, io_matmul_weights, matmul_weights


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


def io_flops_per_token(shape: ModelShape, seq_len: int) -> float:
    """Training FLOPs of the front-end and the head, per token of the ``seq_len`` the blocks
    see, as the rendered model counts them (its ``io_flops_per_token``).

    A language model's head runs on every token. An image's patch projection runs on every
    patch, and its backward is its weight's gradient alone (the pixels need none): 4 FLOPs per
    weight, not 6; its class head runs once per image. A forecaster's patch projection runs on
    every patch, its backward whole (RevIN's learned scale needs the input's gradient); its
    head on every token when causal, else once per channel's window, over all its tokens. A
    table's tokenizer is elementwise, and its head runs once per row.
    """
    d = shape.dim
    if shape.modality == "image":
        patches = seq_len - shape.cls_token
        patch_weights = shape.channels * shape.patch_size**2 * d
        return (4 * patch_weights * patches + 6 * d * shape.n_classes) / seq_len
    if shape.modality == "timeseries":
        head = 6 * shape.head_inputs(seq_len) * shape.horizon
        return 6 * shape.patch_len * d + head / (1 if shape.causal else seq_len)
    if shape.modality == "tabular":
        return 6 * d * max(shape.n_classes, 1) / seq_len
    return 6 * shape.vocab_size * d


def train_flops_per_token(shape: ModelShape, seq_len: int, window: int = 0) -> int:
    """Training FLOPs of one token: the blocks' matmuls, attention, the front-end and head."""
    blocks = 6 * (matmul_params(shape) - io_matmul_weights(shape))
    io = io_flops_per_token(shape, seq_len)
    return round(blocks + io) + attention_flops_per_token(shape, seq_len, window)

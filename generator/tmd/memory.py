"""Training-memory estimate per device: the number the parallelism and checkpointing rules read.

The model is simple on purpose and stated in full, so a person can check it by hand:

- model state: fp32 master weights (4 B) + fp32 gradients (4 B) + AdamW's two moments (8 B)
  = 16 bytes per parameter. FSDP2 shards it over every rank (data x tensor x pipeline ranks
  = the world); DDP and a single device keep all of it.
- activations: per token and layer, what autograd saves for the backward of a pre-norm block
  with fused attention (no T x T score matrix is kept): the block input, norm output, second
  residual stream and its norm output (4·d), then the mixer's tensors (q, k, v and the
  attention output; MLA's latent and per-head K/V; the SSM's inner streams and the chunked
  scan's fp32 (inner x state) tensors) and the FFN's
  (SwiGLU: 4·hidden; GELU: 2·hidden; MoE: top_k routed SwiGLU copies and the router logits).
  See block_elements. Stored in the autocast dtype. Full checkpointing keeps only each block's input
  plus one block's activations while it is recomputed; selective checkpointing wraps every
  second block. Tensor parallel with sequence parallel splits activations by the TP degree.
- logits: fp32 logits and their gradient, 8 bytes per token and vocabulary entry (split by TP).

Pipeline parallel does not change this figure: 1F1B keeps as many micro-batches in flight on
the first stage as there are stages, each over 1/pp of the layers. Its gain is communication.
"""

from __future__ import annotations

from dataclasses import dataclass

from .presets import ModelShape, count_params

STATE_BYTES_PER_PARAM = 16
ACTIVATION_BYTES = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 2,
}  # fp8 training keeps bf16 activations
LOGIT_BYTES_PER_ENTRY = 8
GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    params: int
    state_bytes: float
    activation_bytes: float
    logit_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.state_bytes + self.activation_bytes + self.logit_bytes

    @property
    def total_gb(self) -> float:
        return self.total_bytes / GB


def block_elements(shape: ModelShape, precision: str = "fp32") -> int:
    """Activation elements one block keeps per token for its backward (no checkpointing).

    In units of the autocast dtype of ``precision``: the SSM's scan runs in fp32, so each of
    its elements counts 4 / (that dtype's bytes) times.
    """
    d, h = shape.dim, shape.ffn_hidden_dim
    elems = 4 * d  # block input, norm output, second residual stream, second norm output
    if shape.attention == "mla":
        hd, r, c = shape.head_dim, shape.rope_head_dim, shape.kv_latent_dim
        elems += shape.n_heads * (hd + r) + c + r + 3 * shape.n_heads * hd  # q, latent, k, v, out
    elif shape.attention == "ssm":
        inner = shape.ssm_inner
        elems += 12 * inner  # x and gate, conv out, dt, their fp32 copies, scan and gated output
        # The plain-PyTorch chunked scan keeps ~6 fp32 (inner x state) tensors per token: the
        # clamped log-decay, both exponentials, the weighted inputs, their sum, the states.
        elems += 6 * inner * shape.ssm_state_dim * (4 // ACTIVATION_BYTES[precision])
    else:
        elems += 2 * d + 2 * shape.kv_dim  # q, attention output, k, v
    if shape.ffn == "gelu":
        elems += 2 * h
    elif shape.ffn == "moe":
        elems += shape.top_k * 4 * h + shape.n_experts  # routed copies through SwiGLU experts
    else:
        elems += 4 * h  # w1 and w3 outputs, their product, the w2 input
    return elems


def activation_elements(
    shape: ModelShape, activation_checkpointing: str, precision: str = "fp32"
) -> int:
    """Activation elements kept per token, summed over the layers, for one checkpointing mode."""
    block = block_elements(shape, precision)
    n, d = shape.n_layers, shape.dim
    if activation_checkpointing == "full":
        return n * d + block
    if activation_checkpointing == "selective":
        wrapped = n // 2
        return wrapped * d + (n - wrapped) * block + (block if wrapped else 0)
    return n * block


def estimate_train_memory(
    shape: ModelShape,
    *,
    seq_len: int,
    batch_size: int,
    precision: str,
    shard_degree: int,
    tp_degree: int,
    activation_checkpointing: str,
) -> MemoryEstimate:
    params = count_params(shape)
    tokens = batch_size * seq_len
    activations = (
        tokens
        * activation_elements(shape, activation_checkpointing, precision)
        * ACTIVATION_BYTES[precision]
        / tp_degree
    )
    return MemoryEstimate(
        params=params,
        state_bytes=params * STATE_BYTES_PER_PARAM / shard_degree,
        activation_bytes=activations,
        logit_bytes=tokens * shape.vocab_size * LOGIT_BYTES_PER_ENTRY / tp_degree,
    )

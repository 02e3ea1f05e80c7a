"""Training-memory estimate per device: the number the parallelism and checkpointing rules read.

The model is simple on purpose and stated in full, so a person can check it by hand:

- model state: fp32 master weights (4 B) + fp32 gradients (4 B) + AdamW's two moments (8 B)
  = 16 bytes per parameter. FSDP2 shards it over every rank (data x tensor x pipeline ranks
  = the world); DDP and a single device keep all of it.
- activations: per token and layer, what autograd saves for the backward of a pre-norm block
  with fused attention (no T x T score matrix is kept). Three dtypes are involved:

  * the residual stream (block input and the stream after the mixer, which the norms keep):
    fp32 under autocast, because the weights and the embeddings are fp32; the compute dtype
    under FSDP2, whose MixedPrecisionPolicy casts the weights themselves;
  * the compute dtype for everything a matmul produces or reads: the norm outputs, the
    mixer's tensors (q, k, v and the attention output; MLA's latent and per-head K/V; the
    SSM's inner streams) and the FFN's (SwiGLU: 4·hidden; GELU: 2·hidden; MoE: the routed
    copies at the capacity factor). Autocast would cast a tensor in every matmul that reads
    it and keep each copy; the blocks cast each norm output once (the experts their buffer),
    so every matmul input is kept once;
  * fp32 for what the model upcasts on purpose: QK-norm and MLA's latent norm, the MoE
    router's probabilities, the SSM scan's inputs and its (inner x state) tensors.

  Full checkpointing keeps only each block's input plus one block's activations while it is
  recomputed; selective checkpointing wraps every second block. Tensor parallel with
  sequence parallel splits activations by the TP degree. After the blocks, the final norm's
  input and the head's input are kept once per token.
- per step, whatever the batch: autocast's low-precision copies of every matmul weight
  (cached for the forward and saved for the backward); for ALiBi one additive bias of
  heads x T x T shared by the layers, and for sliding windows one mask shared by the layers
  (T x T up to two windows, then one block's w x 2w band), which the fused attention
  kernels keep for their backward; for RoPE the cos/sin tables, whose rows the rotation's
  backward keeps as views.
- logits: fp32 logits and their gradient, 8 bytes per token and vocabulary entry (split by TP).

On a CPU (``accelerator=cpu``) RMSNorm saves more: it has no fused CPU kernel, and its
composite form keeps an fp32 upcast of its input and the normalised input.

Under pipeline parallel ``batch_size`` is one micro-batch of the schedule, and the first rank
keeps the most activations: 1F1B as many micro-batches in flight as there are stages, each
over 1/pp of the layers, as much as one micro-batch through every layer (GPipe keeps all of
them; the interleaved schedule a little more than 1F1B). Its gain is communication. FSDP2 under a pipeline keeps a stage's weights gathered from the first
micro-batch's forward to the last one's backward (gathering them again for every micro-batch
would multiply the all-gathers): 1/pp of the weights (a tp-th of them each) in the compute
dtype, instead of the root unit and two blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .presets import (
    SSM_CONV,
    ModelShape,
    count_params,
    matmul_weights,
    root_params,
)

STATE_BYTES_PER_PARAM = 16
ACTIVATION_BYTES = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 2,
}  # fp8 training keeps bf16 activations
FP32 = 4
INDEX = 8  # bytes of an int64 position
LOGIT_BYTES_PER_ENTRY = 8
GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    params: int
    state_bytes: float
    activation_bytes: float
    weight_copy_bytes: float
    logit_bytes: float
    unsharded_bytes: float = 0.0  # FSDP2's gathered weights: the root unit's and two blocks'

    @property
    def total_bytes(self) -> float:
        return (
            self.state_bytes
            + self.activation_bytes
            + self.weight_copy_bytes
            + self.logit_bytes
            + self.unsharded_bytes
        )

    @property
    def total_gb(self) -> float:
        return self.total_bytes / GB


def residual_bytes(precision: str, autocast: bool) -> int:
    """Bytes per element of the residual stream: fp32 under autocast, else the compute dtype."""
    return FP32 if autocast else ACTIVATION_BYTES[precision]


def block_bytes(
    shape: ModelShape, precision: str, seq_len: int, *, autocast: bool = True, cpu: bool = False
) -> float:
    """Bytes one block keeps per token for its backward (no checkpointing).

    ``autocast``: the weights stay fp32 and ops cast their inputs (a single device, DDP);
    False: the weights are cast once, as FSDP2's MixedPrecisionPolicy does. ``cpu``: with
    PyTorch's CPU kernels (see the module docstring).
    """
    d, h = shape.dim, shape.ffn_hidden_dim
    a, r = ACTIVATION_BYTES[precision], residual_bytes(precision, autocast)
    # The norms keep their input: the block input and the mid-block stream. The composite
    # RMSNorm of the CPU keeps an fp32 upcast of it and the normalised input, in any dtype.
    composite = cpu and shape.norm == "rmsnorm"
    residual = 0 if composite else 2 * d
    fp32 = 2 * 2 * d if composite else 0
    compute = 2 * d  # the norm outputs, cast once for the matmuls that read them
    qk = shape.n_heads * shape.head_dim + shape.kv_dim
    if shape.attention == "mla":
        hd, rope, c, heads = shape.head_dim, shape.rope_head_dim, shape.kv_latent_dim, shape.n_heads
        qkv = 3 * heads * (hd + rope)  # q, k (content + RoPE) and v, padded to the keys' width
        # SDPA's padded output, the slice of it wo reads, the normed latent w_uk and w_uv read
        compute += qkv + heads * (hd + rope) + heads * hd + c
        fp32 += c * (2 if cpu else 1)  # the latent's RMSNorm runs in fp32
        qk = heads * hd * 2
    elif shape.attention == "ssm":
        e, n, rank = shape.ssm_inner, shape.ssm_state_dim, shape.ssm_dt_rank
        # x and gate; the conv's input, padded by SSM_CONV - 1 positions per sequence, and its
        # output; the scan input u; x_proj's (dt, B, C); dt before its softplus; the scan's
        # output, the gate's SiLU and their product, which out_proj reads.
        compute += (9 + (SSM_CONV - 1) / seq_len) * e + rank + 2 * n
        # The scan runs in fp32: dt and dt·u, and below fp32 the copies of u, B and C. Its
        # chunks keep six (inner x state) tensors per token: the clamped log-decay, both
        # exponentials, the weighted inputs, their running sum, the states.
        fp32 += 6 * e * n + 2 * e + (0 if a == FP32 else e + 2 * n)
    else:
        kv = shape.kv_dim
        # On CUDA only FlashAttention takes grouped K/V heads, and it takes no mask and no
        # fp32: elsewhere the rendered attention repeats k and v to the query heads, and SDPA
        # keeps them at the queries' width.
        masked = shape.position == "alibi" or shape.attention == "sliding_window"
        if not cpu and (masked or precision == "fp32"):
            kv = shape.n_heads * shape.head_dim
        compute += 2 * d + 2 * kv  # q, attention output, k, v
        w = shape.window_size
        if shape.attention == "sliding_window" and seq_len > 2 * w:
            compute += 2 * kv  # keys and values of two blocks
    if shape.qk_norm and shape.attention != "ssm":
        fp32 += qk * (2 if cpu else 1)  # QK-norm (RMSNorm) runs in fp32, its weights' dtype
    if shape.ffn == "gelu":
        compute += 2 * h
    elif shape.ffn == "moe":
        k, slots = shape.top_k, shape.capacity_factor * shape.top_k
        residual += 2 * k * d  # the tokens gathered per assignment, the weighted outputs
        compute += k * d + slots * (d + 4 * h) + k  # expert outputs, SwiGLUs, weights
        # Router probabilities, then the routing's bookkeeping in fp32 units (the model's
        # MoE.kept_per_token says what).
        fp32 += shape.n_experts + (8 * k + 4 * k + 4 + 16 * k + k) / 4
    else:
        compute += 4 * h  # w1 and w3 outputs, their product, the w2 input
    return r * residual + a * compute + FP32 * fp32


def head_bytes(
    shape: ModelShape, precision: str, *, autocast: bool = True, cpu: bool = False
) -> int:
    """Bytes kept per token after the blocks: the final norm's input and the head's input."""
    composite = cpu and shape.norm == "rmsnorm"  # fp32 upcast and normalised input
    kept = 2 * FP32 if composite else residual_bytes(precision, autocast)
    return shape.dim * (kept + ACTIVATION_BYTES[precision])


def activation_bytes_per_token(
    shape: ModelShape,
    activation_checkpointing: str,
    precision: str,
    seq_len: int,
    *,
    autocast: bool = True,
    cpu: bool = False,
) -> float:
    """Bytes kept per token over all layers and the head, for one checkpointing mode."""
    block = block_bytes(shape, precision, seq_len, autocast=autocast, cpu=cpu)
    n, kept = shape.n_layers, shape.dim * residual_bytes(precision, autocast)  # a block input
    if activation_checkpointing == "full":
        blocks = n * kept + block
    elif activation_checkpointing == "selective":
        wrapped = n // 2
        blocks = wrapped * kept + (n - wrapped) * block + (block if wrapped else 0)
    else:
        blocks = n * block
    return blocks + head_bytes(shape, precision, autocast=autocast, cpu=cpu)


def weight_copy_bytes(shape: ModelShape, precision: str, *, autocast: bool = True) -> int:
    """Autocast's cached low-precision copy of every matmul weight, held through the step."""
    a = ACTIVATION_BYTES[precision]
    return matmul_weights(shape) * a if autocast and a < FP32 else 0


def position_bytes(shape: ModelShape, precision: str, seq_len: int) -> int:
    """Position tensors and attention masks kept per step, whatever the batch.

    RoPE: the fp32 cos and sin tables (max_seq_len rows, at least T), model buffers whose rows
    the rotation's backward keeps as views, in every layer. ALiBi: an
    additive (heads, T, T) bias in the compute dtype, built once per forward and shared by
    the layers. Sliding windows: one additive mask in the compute dtype (ALiBi's per head),
    also shared by the layers: over the whole sequence up to two windows long; beyond, the
    (w, 2w) band of one block, whose right half is the first block's causal (w, w) mask.
    Learned positions: the T int64 positions the embedding's backward looks up again.
    """
    a = ACTIVATION_BYTES[precision]
    alibi = shape.position == "alibi"
    tables = 0
    if shape.position == "rope" and shape.attention != "ssm":
        rotated = shape.rope_head_dim if shape.attention == "mla" else shape.head_dim
        tables = 2 * max(shape.max_seq_len, seq_len) * (rotated // 2) * FP32
    elif shape.position == "learned" and shape.modality != "text":
        tables = 0  # the table is added whole: no positions to keep
    elif shape.position == "learned":
        tables = seq_len * INDEX  # the positions (int64), which the embedding's backward keeps
    if shape.attention == "sliding_window":
        heads, w = (shape.n_heads if alibi else 1), shape.window_size
        mask = seq_len**2 if seq_len <= 2 * w else 2 * w * w
        return tables + heads * mask * a
    if alibi:
        return shape.n_heads * seq_len * seq_len * a
    return tables


def unsharded_bytes(shape: ModelShape, precision: str, pp_degree: int = 1) -> float:
    """FSDP2's unsharded weights, in the compute dtype, when the backward starts.

    The root unit (embeddings, final norm, head) is not resharded after the forward; the
    last block is gathered again for its backward and the next one is prefetched. Under a
    pipeline of ``pp_degree`` stages, a stage's weights stay gathered.
    """
    if pp_degree > 1:
        return count_params(shape) / pp_degree * ACTIVATION_BYTES[precision]
    root = root_params(shape)
    block = (count_params(shape) - root) / shape.n_layers
    return (root + 2 * block) * ACTIVATION_BYTES[precision]


def loader_bytes(
    batch_size: int,
    seq_len: int,
    *,
    num_workers: int = 0,
    prefetch_factor: int = 2,
    pinned: bool,
    shape: ModelShape | None = None,
) -> int:
    """Host memory of the batches one rank's DataLoader holds ready (the rendered project's
    ``[data]`` defaults: no workers, so one batch at a time).

    Each worker keeps ``prefetch_factor`` batches; a batch is one int64 tensor of
    ``seq_len + 1`` ids per sequence (inputs and targets are views of it), and on a GPU
    (``pinned``) a page-locked copy of the inputs and targets besides.
    """
    in_flight = num_workers * prefetch_factor if num_workers else 1
    if shape is not None and shape.modality == "image":  # fp32 pixels and an int64 label
        batch = batch_size * (shape.channels * shape.image_size**2 * FP32 + INDEX)
        return in_flight * batch * (2 if pinned else 1)
    if shape is not None and shape.modality == "tabular":  # fp32 features; an int64 class
        features = (shape.n_numeric + shape.n_categorical) * FP32
        batch = batch_size * (features + (INDEX if shape.n_classes else FP32))
        return in_flight * batch * (2 if pinned else 1)
    if shape is not None and shape.modality == "timeseries":  # fp32 context and targets
        batch = batch_size * shape.n_channels * (seq_len * shape.patch_len + shape.horizon) * FP32
        return in_flight * batch * (2 if pinned else 1)
    batch = batch_size * (seq_len + 1) * INDEX
    copy = batch_size * seq_len * 2 * INDEX if pinned else 0
    return in_flight * (batch + copy)


def output_elements(shape: ModelShape, samples: int, tokens: int) -> int:
    """The logits a step keeps: one per token and vocabulary entry, or per image and class."""
    if shape.modality == "image":
        return samples * shape.n_classes
    if shape.modality == "tabular":  # a score per class, or one number, per row
        return samples * max(shape.n_classes, 1)
    if shape.modality == "timeseries":  # a forecast per token (causal) or per sequence
        forecasts = tokens if shape.causal else samples * shape.n_channels
        return forecasts * shape.horizon
    return tokens * shape.vocab_size


def estimate_train_memory(
    shape: ModelShape,
    *,
    seq_len: int,
    batch_size: int,
    precision: str,
    shard_degree: int,
    tp_degree: int,
    activation_checkpointing: str,
    autocast: bool = True,
    cpu: bool = False,
    fsdp: bool = False,
    pp_degree: int = 1,
    in_flight: float = 1.0,
) -> MemoryEstimate:
    params = count_params(shape)
    tokens = batch_size * shape.sequences_per_sample * seq_len
    per_token = activation_bytes_per_token(
        shape, activation_checkpointing, precision, seq_len, autocast=autocast, cpu=cpu
    )
    # Tensor parallel splits every layer's activations; each rank keeps the whole position
    # tables.
    # ``in_flight``: the micro-batches' activations a pipeline's first rank keeps at once.
    activations = tokens * per_token / tp_degree * in_flight + position_bytes(
        shape, precision, seq_len
    )
    return MemoryEstimate(
        params=params,
        state_bytes=params * STATE_BYTES_PER_PARAM / shard_degree,
        activation_bytes=activations,
        weight_copy_bytes=weight_copy_bytes(shape, precision, autocast=autocast) / tp_degree,
        logit_bytes=output_elements(shape, batch_size, tokens) * LOGIT_BYTES_PER_ENTRY / tp_degree,
        unsharded_bytes=unsharded_bytes(shape, precision, pp_degree) / tp_degree if fsdp else 0.0,
    )

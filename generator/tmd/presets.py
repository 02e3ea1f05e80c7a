"""Model-size presets: Llama-style shapes that land near the advertised parameter counts.

The numbers become config values in the rendered project (`configs/default.toml`), so a person
can reshape the model later without re-rendering; these are only the starting points. Every
shape field can also be set as an answer (`--data n_layers=6`), which the validators check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """The numbers and mechanisms that fix a model's size: what count_params needs."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_hidden_dim: int
    vocab_size: int
    qk_norm: bool = False
    attention: str = "gqa"  # mha | gqa | mqa | sliding_window | mla | ssm
    position: str = "rope"  # rope | alibi | learned | none
    norm: str = "rmsnorm"  # rmsnorm | layernorm
    ffn: str = "swiglu"  # swiglu | gelu | moe
    max_seq_len: int = 0  # learned positions: one vector per position
    kv_latent_dim: int = 0  # MLA: width of the compressed K/V latent
    n_experts: int = 0  # MoE
    top_k: int = 0  # MoE: experts per token
    ssm_state_dim: int = 16  # SSM: N, the state size per channel
    window_size: int = 0  # sliding-window attention: keys each query sees
    capacity_factor: float = 1.0  # MoE: expert slots over an even share of the assignments
    modality: str = "text"  # what the front-end reads and the head writes
    image_size: int = 0  # image: pixels per side
    patch_size: int = 0  # image: pixels per patch side
    n_classes: int = 0  # image: the head's outputs
    cls_token: bool = False  # image: a CLS token before the patches
    channels: int = 3
    patch_len: int = 0  # timeseries: observations per patch
    horizon: int = 0  # timeseries: steps forecast per channel
    n_channels: int = 0  # timeseries: channels, each its own sequence through the blocks
    causal: bool = True  # timeseries: streaming; a causal forecaster forecasts from every patch
    n_numeric: int = 0  # tabular: numeric features, a weight and a bias vector each
    n_categorical: int = 0  # tabular: categorical features, an embedding row per value

    @property
    def sequences_per_sample(self) -> int:
        """Sequences the blocks see per sample: a forecaster's channels, else one."""
        return self.n_channels if self.modality == "timeseries" else 1

    def head_inputs(self, seq_len: int) -> int:
        """A forecaster's head reads one token (causal: every token forecasts) or all of a
        window's tokens flattened (PatchTST's head)."""
        return self.dim if self.causal else seq_len * self.dim

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def rope_head_dim(self) -> int:
        """MLA's decoupled RoPE part of each query/key head."""
        return self.head_dim // 2

    @property
    def ssm_inner(self) -> int:
        return SSM_EXPAND * self.dim

    @property
    def ssm_dt_rank(self) -> int:
        return -(-self.dim // 16)


SSM_EXPAND = 2  # Mamba's inner width is 2·dim
# The built-in table's categories: 5 colours and 4 sizes, each feature with a row for a value
# the training split never showed.
TABULAR_CATEGORY_ROWS = (5 + 1) + (4 + 1)
SSM_CONV = 4  # depthwise causal convolution width


@dataclass(frozen=True)
class ModelPreset:
    name: str
    label: str
    shape: ModelShape  # with the GQA head count; MHA and MQA change n_kv_heads only
    batch_size: int  # sequences per device per micro-batch in the starting config
    train_steps: int
    # Tokens per optimizer step the starting config aims for; gradient accumulation makes up
    # what the devices' micro-batches fall short of (GPT-3's 0.5M at 125M parameters and 1M
    # at 1.3B, Llama 2 and 3's 4M from 7B up; tiny stays at one micro-batch for the CPU).
    tokens_per_step: int


def _preset(
    name, label, dim, layers, heads, kv, hidden, vocab, batch, steps, tokens
) -> ModelPreset:
    shape = ModelShape(dim, layers, heads, kv, hidden, vocab)
    return ModelPreset(name, label, shape, batch, steps, tokens)


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        # tiny trains in minutes on two CPU cores; vocab 256 is the byte-level tokenizer.
        _preset("tiny", "tiny (~3M, trains on a laptop CPU)", 256, 4, 4, 2, 704, 256, 8, 300, 2048),
        _preset(
            "small",
            "small (~125M, GPT-2 small class)",
            768,
            12,
            12,
            4,
            2048,
            32768,
            8,
            20000,
            2**19,
        ),
        _preset(
            "medium",
            "medium (~1B, Llama-3.2-1B class)",
            2048,
            16,
            32,
            8,
            8192,
            32768,
            4,
            20000,
            2**20,
        ),
        _preset(
            "large",
            "large (~8B, Llama-3-8B class)",
            4096,
            32,
            32,
            8,
            14336,
            128256,
            2,
            20000,
            2**22,
        ),
        _preset(
            "xl", "xl (~70B, Llama-3-70B class)", 8192, 80, 64, 8, 28672, 128256, 1, 20000, 2**22
        ),
    )
}


def kv_heads_for(preset: ModelPreset, attention: str) -> int:
    """KV heads implied by the attention choice: MHA keeps one per query head, MQA shares one."""
    if attention == "mha":
        return preset.shape.n_heads
    if attention == "mqa":
        return 1
    return preset.shape.n_kv_heads


def mixer_params(shape: ModelShape) -> int:
    """The sequence mixer of one block: an attention variant or the SSM."""
    d, hd, h = shape.dim, shape.head_dim, shape.n_heads
    qk = 2 * hd if shape.qk_norm else 0  # per-head RMSNorm gains on q and k
    if shape.attention == "mla":
        r, c = shape.rope_head_dim, shape.kv_latent_dim
        # q with a RoPE part per head; K/V down to the latent (+ a shared RoPE key), its norm,
        # the up-projections to per-head keys and values, and the output.
        return d * h * (hd + r) + d * c + d * r + c + 2 * c * h * hd + h * hd * d + qk
    if shape.attention == "ssm":
        e, n, rank = shape.ssm_inner, shape.ssm_state_dim, shape.ssm_dt_rank
        # in_proj (x and gate), depthwise conv (+bias), x_proj to (dt, B, C), dt_proj (+bias),
        # A_log and D per channel, out_proj
        return d * 2 * e + e * SSM_CONV + e + e * (rank + 2 * n) + rank * e + e + e * n + e + e * d
    return 2 * d * d + 2 * d * shape.kv_dim + qk  # wq, wo, wk, wv


def ffn_params(shape: ModelShape) -> int:
    d, h = shape.dim, shape.ffn_hidden_dim
    if shape.ffn == "gelu":
        return 2 * d * h
    if shape.ffn == "moe":
        return shape.n_experts * 3 * d * h + d * shape.n_experts  # experts + router
    return 3 * d * h  # SwiGLU: w1 and w3 up, w2 down


def norm_params(shape: ModelShape) -> int:
    return 2 * shape.dim if shape.norm == "layernorm" else shape.dim


def matmul_weights(shape: ModelShape) -> int:
    """Weights that matmuls (and the SSM's convolution) read, every expert included.

    All parameters but the embedding tables, the norm gains and, in the SSM, A_log, D and
    the biases, which enter elementwise.
    """
    n = shape.n_layers
    other = io_params(shape) - io_matmul_weights(shape)  # the embedding table, biases, CLS
    other += (2 * n + 1) * norm_params(shape) + position_table_params(shape)
    if shape.qk_norm and shape.attention != "ssm":
        other += 2 * shape.head_dim * n
    if shape.attention == "mla":
        other += shape.kv_latent_dim * n  # the latent's norm
    if shape.attention == "ssm":
        e = shape.ssm_inner
        other += n * (e + e + e * shape.ssm_state_dim + e)  # conv and dt biases, A_log, D
    return count_params(shape) - other


def position_table_params(shape: ModelShape) -> int:
    """The learned position embedding's table (no parameters for the other positions)."""
    return shape.max_seq_len * shape.dim if shape.position == "learned" else 0


def io_matmul_weights(shape: ModelShape) -> int:
    """The weights the front-end's and the head's matmuls read: the head over the vocabulary
    (a token embedding is a lookup); an image's patch projection and class head."""
    if shape.modality == "image":
        return (shape.channels * shape.patch_size**2 + shape.n_classes) * shape.dim
    if shape.modality == "timeseries":
        return shape.patch_len * shape.dim + shape.head_inputs(shape.max_seq_len) * shape.horizon
    if shape.modality == "tabular":  # the numeric features' scales and the head
        return (shape.n_numeric + max(shape.n_classes, 1)) * shape.dim
    return shape.vocab_size * shape.dim


def io_params(shape: ModelShape) -> int:
    """Parameters of the front-end and the head: the untied token embedding and head; or the
    patch projection and its bias, the CLS token, and the class head and its bias."""
    if shape.modality == "image":
        biases = shape.dim + shape.n_classes + (shape.dim if shape.cls_token else 0)
        return io_matmul_weights(shape) + biases
    if shape.modality == "timeseries":  # and the biases, and RevIN's scale and shift per channel
        return io_matmul_weights(shape) + shape.dim + shape.horizon + 2 * shape.n_channels
    if shape.modality == "tabular":  # and a bias per feature, the categories' rows, the CLS token
        features = shape.n_numeric + shape.n_categorical
        rows = TABULAR_CATEGORY_ROWS if shape.n_categorical else 0
        return (
            io_matmul_weights(shape) + (features + rows + 1) * shape.dim + max(shape.n_classes, 1)
        )
    return 2 * shape.vocab_size * shape.dim


def root_params(shape: ModelShape) -> int:
    """Parameters outside the blocks: front-end, head, final norm, position table."""
    return io_params(shape) + norm_params(shape) + position_table_params(shape)


def count_params(shape: ModelShape) -> int:
    """Parameters: untied embedding and head, bias-free projections, the block norms."""
    per_layer = mixer_params(shape) + ffn_params(shape) + 2 * norm_params(shape)
    return shape.n_layers * per_layer + root_params(shape)

"""Model-size presets: Llama-style shapes that land near the advertised parameter counts.

The numbers become config values in the rendered project (`configs/default.toml`), so a person
can reshape the model later without re-rendering; these are only the starting points. Every
shape field can also be set as an answer (`--data n_layers=6`), which the validators check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_hidden_dim: int
    vocab_size: int
    qk_norm: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim


@dataclass(frozen=True)
class ModelPreset:
    name: str
    label: str
    shape: ModelShape  # with the GQA head count; MHA and MQA change n_kv_heads only
    batch_size: int  # sequences per device per step in the starting config
    train_steps: int


def _preset(name, label, dim, layers, heads, kv, hidden, vocab, batch, steps) -> ModelPreset:
    return ModelPreset(name, label, ModelShape(dim, layers, heads, kv, hidden, vocab), batch, steps)


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        # tiny trains in minutes on two CPU cores; vocab 256 is the byte-level tokenizer.
        _preset("tiny", "tiny (~3M, trains on a laptop CPU)", 256, 4, 4, 2, 704, 256, 8, 300),
        _preset("small", "small (~125M, GPT-2 small class)", 768, 12, 12, 4, 2048, 32768, 8, 20000),
        _preset(
            "medium", "medium (~1B, Llama-3.2-1B class)", 2048, 16, 32, 8, 8192, 32768, 4, 20000
        ),
        _preset("large", "large (~8B, Llama-3-8B class)", 4096, 32, 32, 8, 14336, 128256, 2, 20000),
        _preset("xl", "xl (~70B, Llama-3-70B class)", 8192, 80, 64, 8, 28672, 128256, 1, 20000),
    )
}


def kv_heads_for(preset: ModelPreset, attention: str) -> int:
    """KV heads implied by the attention choice: MHA keeps one per query head, MQA shares one."""
    if attention == "mha":
        return preset.shape.n_heads
    if attention == "mqa":
        return 1
    return preset.shape.n_kv_heads


def count_params(shape: ModelShape) -> int:
    """Parameters of the decoder: untied embedding and head, bias-free projections, RMSNorm gains."""
    d = shape.dim
    attn = 2 * d * d + 2 * d * shape.kv_dim  # wq, wo, wk, wv
    ffn = 3 * d * shape.ffn_hidden_dim  # SwiGLU: w1 and w3 up, w2 down
    norms = 2 * d + (2 * shape.head_dim if shape.qk_norm else 0)  # block norms (+ q/k norms)
    per_layer = attn + ffn + norms
    return shape.n_layers * per_layer + 2 * shape.vocab_size * d + d

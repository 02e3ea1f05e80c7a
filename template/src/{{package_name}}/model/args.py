"""The model's hyperparameters: the ``[model]`` section of the run config."""

from dataclasses import dataclass


@dataclass
class ModelConfig:
    """Shape of a decoder-only transformer.

    The defaults are a tiny byte-level model that trains in minutes on a CPU; the
    generated ``configs/default.toml`` carries the size this project was designed for.
    """

    dim: int = 256
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    vocab_size: int = 256
    ffn_hidden_dim: int = 704
    max_seq_len: int = 256
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

"""A Llama-style decoder: pre-norm blocks of grouped-query attention and SwiGLU."""

import math

import torch
from torch import Tensor, nn

from .args import ModelConfig
from .attention import GroupedQueryAttention
from .ffn import SwiGLU
from .kv_cache import KVCache
from .rope import RotaryEmbedding


class TransformerBlock(nn.Module):
    """``x + attn(norm(x))`` then ``h + ffn(norm(h))``.

    Pre-norm keeps an identity path from the embeddings to the output, which is what lets
    deep stacks train without warm-up tricks.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attention = GroupedQueryAttention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.feed_forward = SwiGLU(cfg.dim, cfg.ffn_hidden_dim)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        input_pos: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, input_pos, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """Token ids (batch, seq) to next-token logits (batch, seq, vocab_size).

    ``layers`` is a ModuleDict keyed by the layer index as a string, so parameter names
    (``layers.3.attention.wq.weight``) stay the same when blocks are wrapped, compiled or,
    under pipeline parallelism, removed.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.rope = RotaryEmbedding(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(cfg) for i in range(cfg.n_layers)})
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.register_buffer("causal_mask", None, persistent=False)  # set by setup_cache

    def forward(self, tokens: Tensor, input_pos: Tensor | None = None) -> Tensor:
        """Logits for every position of ``tokens``.

        ``input_pos`` (the absolute positions of ``tokens``, 1-D) switches to the KV-cache
        path used for generation: prefill passes ``arange(prompt_len)``, each decode step the
        one position it writes.
        """
        if input_pos is None:
            seqlen = tokens.shape[1]
            cos, sin = self.rope.cos[:seqlen], self.rope.sin[:seqlen]
            mask = None
        else:
            cos, sin = self.rope.cos[input_pos], self.rope.sin[input_pos]
            mask = self.causal_mask[None, None, input_pos]  # (1, 1, seq, cache_len)
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, cos, sin, input_pos, mask)
        return self.output(self.norm(h))

    def setup_cache(
        self,
        batch_size: int,
        max_seq_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        """Allocate a static KV cache in every layer for generation of up to max_seq_len tokens."""
        if max_seq_len > self.cfg.max_seq_len:
            raise ValueError(
                f"cache length {max_seq_len} exceeds model.max_seq_len {self.cfg.max_seq_len}"
            )
        device = device or self.output.weight.device
        dtype = dtype or self.output.weight.dtype
        for layer in self.layers.values():
            layer.attention.kv_cache = KVCache(
                batch_size, self.cfg.n_kv_heads, max_seq_len, self.cfg.head_dim, dtype, device
            )
        ones = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool, device=device)
        self.causal_mask = torch.tril(ones)

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2 / Llama initialisation: every weight matrix N(0, 0.02), norms at 1.

        The two projections that write into the residual stream (``wo`` and ``w2``) get
        0.02 / sqrt(2 · n_layers): each block adds two such terms to the stream, so with the
        plain std its variance would grow with depth, and deep models would start with
        exploding activations.
        """
        std = 0.02
        residual_std = std / math.sqrt(2 * self.cfg.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                is_residual = name.endswith((".wo", ".w2"))
                nn.init.normal_(module.weight, mean=0.0, std=residual_std if is_residual else std)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.RMSNorm):
                module.reset_parameters()
        self.rope.reset_buffers()

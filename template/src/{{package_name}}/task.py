"""The task this project trains: next-token prediction, a causal language model.

The trainer, ``eval``, ``bench`` and ``profile`` are the same for every task; what they ask
of one is here, so they never look inside a batch or an output themselves:

- ``Model`` and ``build_model``: the model, its weights not yet initialised;
- ``forward(model, inputs, *rest)``: the output for a batch as the loader yields it, after its
  targets are taken out (``rest``: a packed batch's document ids, ``data.packing``);
- ``summed_loss(output, targets)``: the loss of every target, summed, and ``target_count``,
  how many targets that sum covers. The trainer divides by the count of the whole step, so
  however a step is split into ranks and micro-batches, every target weighs the same.
"""

import torch.nn.functional as F
from torch import Tensor

from .model import ModelConfig, Transformer

IGNORE_INDEX = -100  # F.cross_entropy's default: a position with this target carries no loss

Model = Transformer


def build_model(cfg: ModelConfig) -> Transformer:
    return Transformer(cfg)


def forward(model: Transformer, inputs: Tensor, documents: Tensor | None = None) -> Tensor:
    """Next-token logits (batch, seq, vocab_size) for token ids (batch, seq)."""
    return model(inputs, documents=documents)


def summed_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """The cross-entropy of every target token, summed, in fp32: a low-precision log-softmax
    over the vocabulary loses the tail."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )


def target_count(targets: Tensor) -> Tensor:
    """The positions of ``targets`` that carry a loss."""
    return (targets != IGNORE_INDEX).sum()

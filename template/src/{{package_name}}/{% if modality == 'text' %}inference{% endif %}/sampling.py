"""Drawing the next token from a model's logits: greedy, with a temperature, or from the top k."""

import torch
from torch import Tensor
from torch.nn import functional as F


def probabilities(logits: Tensor, temperature: float, top_k: int) -> Tensor:
    """The distribution ``sample`` draws from, over the last dimension of ``logits``, in fp32:
    one-hot on the argmax at temperature 0."""
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).float()
    logits = logits.float() / temperature
    if top_k:
        kth_largest = torch.topk(logits, min(top_k, logits.size(-1))).values[..., -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    return torch.softmax(logits, dim=-1)


def draw(probs: Tensor) -> Tensor:
    """One index per row of ``probs``, drawn from it. argmax(p / E) with E ~ Exp(1) is a draw
    from p (the exponential race), and unlike torch.multinomial it needs no host sync."""
    return torch.argmax(probs / torch.empty_like(probs).exponential_(1), dim=-1)


def sample(logits: Tensor, temperature: float, top_k: int) -> Tensor:
    """Next-token ids (batch,) from last-position logits (batch, vocab): greedy at temperature 0."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    return draw(probabilities(logits, temperature, top_k))

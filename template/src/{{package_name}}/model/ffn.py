"""SwiGLU feed-forward (Shazeer, 2020, "GLU Variants Improve Transformer")."""

import torch.nn.functional as F
from torch import Tensor, nn


class SwiGLU(nn.Module):
    """``w2(silu(w1 x) * w3 x)``: a gated MLP, the FFN of Llama, Mistral and Qwen.

    The gate costs a third matrix, so the hidden size is usually about 2/3 of the 4·dim a
    plain MLP would use, to keep the parameter count level.
    """

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

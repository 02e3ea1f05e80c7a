"""AdamW and its learning-rate schedule: linear warm-up, then cosine decay to ``min_lr``."""

import functools
import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from .config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only.

    Decaying norm gains (1-D) would pull them towards zero for no benefit; the matrices are
    where decay regularises. The fused CUDA kernel updates all parameters in one launch.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=device.type == "cuda"
    )


def lr_multiplier(step: int, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """Factor on the peak LR at ``step``: 1/warmup ... 1 over the warm-up, then a half cosine.

    Warm-up lets Adam's second-moment estimates settle before full-size steps; the cosine
    ends at ``min_ratio`` rather than 0 so the last steps still learn.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_lr_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> LambdaLR:
    schedule = functools.partial(
        lr_multiplier,
        warmup_steps=cfg.warmup_steps,
        total_steps=cfg.steps,
        min_ratio=cfg.min_lr / cfg.lr,
    )
    return LambdaLR(optimizer, schedule)

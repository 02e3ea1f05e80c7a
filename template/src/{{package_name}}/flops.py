"""Analytic FLOPs, parameter counts, and the peak throughput that MFU is measured against.

MFU (model FLOPs utilisation) = the FLOPs the model needs per second of training, counted
from its shape, divided by the device's peak. Counting from the shape, not from the kernels
that ran, makes it independent of recomputation (activation checkpointing adds work but no
model FLOPs) and comparable across implementations.
"""

import time

import torch
from torch import nn

from .model import ModelConfig

# Dense (no 2:4 sparsity) tensor-core peaks in TFLOP/s, from the NVIDIA datasheets:
# A100 SXM4, H100 SXM5, H200 SXM and HGX B200. fp32 matmuls run as TF32 on CUDA (the trainer
# sets float32_matmul_precision "high"), so an fp32 run is measured against the TF32 peak.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "a100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "h100": {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0, "fp16": 989.0, "fp8": 1979.0},
    "h200": {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0, "fp16": 989.0, "fp8": 1979.0},
    "b200": {"fp32": 80.0, "tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0},
}


def forward_flops_by_component(cfg: ModelConfig, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of one token, by component, over all layers (2 per multiply-add).

    ``attention.scores`` is the two T×T matmuls (q·kᵀ and the weighted sum of values). It
    counts the full T×T matrix, as PaLM (Chowdhery et al., 2022, appendix B) and nanoGPT
    do, although a causal kernel skips about half of it: the figure is the dense-equivalent
    work, which keeps MFU comparable with published numbers. The embedding is a lookup and
    costs no matmul FLOPs.
    """
    d, hd, n = cfg.dim, cfg.head_dim, cfg.n_layers
    projections = d * hd * (2 * cfg.n_heads + 2 * cfg.n_kv_heads)  # wq, wk, wv, wo
    scores = 2 * seq_len * cfg.n_heads * hd  # q·kᵀ and p·v, T keys each
    return {
        "embedding": 0,
        "attention.projections": 2 * n * projections,
        "attention.scores": 2 * n * scores,
        "ffn": 2 * n * 3 * d * cfg.ffn_hidden_dim,  # w1, w3 up, w2 down
        "head": 2 * d * cfg.vocab_size,
    }


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matmul: every Linear, the output head included."""
    flops = forward_flops_by_component(cfg, seq_len=0)
    return sum(flops.values()) // 2


def training_flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """FLOPs of one training token: three times the forward pass.

    The backward pass costs twice the forward: for every matmul, one for the gradient of its
    input and one for the gradient of its weight. Recomputation under activation
    checkpointing is not counted; it adds work, not model FLOPs.
    """
    return 3 * sum(forward_flops_by_component(cfg, seq_len).values())


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def accelerator_of(device: torch.device) -> str | None:
    """The PEAK_TFLOPS key of a CUDA device, from its name (None: not in the table)."""
    name = torch.cuda.get_device_name(device).lower()
    return next((key for key in PEAK_TFLOPS if key in name), None)


def measure_cpu_peak_tflops(dtype: torch.dtype, sizes: tuple[int, ...] = (1024, 2048)) -> float:
    """The best matmul throughput this CPU reaches in ``dtype`` (square GEMMs, best of 3).

    There is no datasheet number for an arbitrary CPU and thread count, so the peak is
    measured in the same process, under the same thread settings as the run it rates.
    """
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        a @ b  # warm-up: thread pool, kernel selection
        for _ in range(3):
            start = time.perf_counter()
            a @ b
            best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best / 1e12


def peak_tflops(device: torch.device, precision: str, dtype: torch.dtype) -> float | None:
    """The peak a run in ``precision`` (computing in ``dtype``) is rated against; None: unknown."""
    if device.type == "cpu":
        return measure_cpu_peak_tflops(dtype)
    accelerator = accelerator_of(device)
    if accelerator is None:
        return None
    key = "tf32" if precision == "fp32" else precision
    return PEAK_TFLOPS[accelerator].get(key)

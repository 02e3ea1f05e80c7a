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


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matmul: every Linear, the output head included.

    The token embedding is a lookup, not a matmul, so it is left out.
    """
    head_dim = cfg.head_dim
    attention = cfg.dim * head_dim * (2 * cfg.n_heads + 2 * cfg.n_kv_heads)  # wq, wk, wv, wo
    ffn = 3 * cfg.dim * cfg.ffn_hidden_dim  # w1, w2, w3
    return cfg.n_layers * (attention + ffn) + cfg.dim * cfg.vocab_size


def training_flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """FLOPs of one training token: 6 · matmul params + 12 · n_layers · n_heads · head_dim · T.

    6 per weight = 2 (multiply-add) in the forward pass and 4 in backward (gradients of the
    input and of the weight). The second term is attention's two T×T matmuls (scores and
    weighted values), forward and backward. It counts the full T×T matrix, as PaLM
    (Chowdhery et al., 2022, appendix B) and nanoGPT do, although a causal kernel skips
    about half of it: the figure is the dense-equivalent work, which keeps MFU comparable
    with published numbers.
    """
    attention = 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len
    return 6 * matmul_params(cfg) + attention


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

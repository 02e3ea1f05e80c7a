"""Accelerators the questionnaire knows: memory per device and which dtypes have tensor cores.

Memory is the HBM per device (A100 80 GB SXM, H100 80 GB SXM, H200 141 GB, B200 192 GB). A CPU
run has no fixed budget, so the fit checks are skipped there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Accelerator:
    name: str
    memory_gb: float | None  # None: host memory, no fit check
    fp8: bool  # has fp8 tensor cores (Hopper and later)
    label: str
    bandwidth_tb_s: float | None = None  # HBM bandwidth from the datasheets; None: a host
    # GPU-to-GPU links inside a node at NVLink speeds (SXM boards); over PCIe, tensor
    # parallel's per-layer collectives cost more than the split saves.
    nvlink: bool = True


ACCELERATORS: dict[str, Accelerator] = {
    "cpu": Accelerator(
        "cpu", None, False, "CPU only (smoke runs, tests, tiny models)", nvlink=False
    ),
    "a100": Accelerator("a100", 80.0, False, "NVIDIA A100 80 GB (Ampere: bf16, no fp8)", 2.039),
    "h100": Accelerator("h100", 80.0, True, "NVIDIA H100 80 GB (Hopper: bf16 and fp8)", 3.35),
    "h200": Accelerator("h200", 141.0, True, "NVIDIA H200 141 GB (Hopper: bf16 and fp8)", 4.8),
    "b200": Accelerator("b200", 192.0, True, "NVIDIA B200 192 GB (Blackwell: bf16 and fp8)", 8.0),
}

FP8_ACCELERATORS = tuple(name for name, acc in ACCELERATORS.items() if acc.fp8)

# A run is planned to use at most this share of device memory; past it the 4-step checklist
# already calls memory the bottleneck, and the allocator needs headroom for fragmentation.
USABLE_MEMORY_FRACTION = 0.9

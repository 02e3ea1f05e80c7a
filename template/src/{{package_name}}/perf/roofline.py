"""The roofline: where each matmul of a step sits against the device's compute and memory roofs.

An op doing F FLOPs over B bytes of operands has arithmetic intensity I = F / B. No kernel
beats min(peak FLOP/s, bandwidth x I): left of the ridge (I < peak / bandwidth) an op is
memory-bound and only moving fewer bytes helps; right of it, compute-bound. The points are
the profiler's own FLOP counts and kernel times, one per (op, shapes).
"""

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

# HBM bandwidth in TB/s, from the NVIDIA datasheets: A100 SXM4 80 GB, H100 SXM5, H100 PCIe
# (HBM2e), H200 SXM, HGX B200 (per GPU). Keyed as flops.PEAK_TFLOPS.
HBM_TBPS: dict[str, float] = {
    "a100": 2.039,
    "h100": 3.35,
    "h100 pcie": 2.0,
    "h200": 4.8,
    "b200": 8.0,
}
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


@dataclass(frozen=True)
class OpPoint:
    op: str
    shape: str  # "M×K×N" (with a leading batch for bmm)
    calls: int
    flops: int  # over all calls
    bytes: int  # operands read and result written, over all calls
    seconds: float  # device time over all calls

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12


def ridge(peak_tflops: float, bandwidth_tbps: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
    return peak_tflops / bandwidth_tbps


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_tbps: float) -> float:
    return min(peak_tflops, bandwidth_tbps * intensity)


def measure_cpu_bandwidth_tbps(elements: int = 1 << 25) -> float:
    """The best copy bandwidth this CPU reaches (read + write, 128 MiB of fp32, best of 3)."""
    src = torch.randn(elements)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up: page faults, thread pool
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        dst.copy_(src)
        best = max(best, 2 * src.nbytes / (time.perf_counter() - start))
    return best / 1e12


def gemm_dims(op: str, shapes: list[list[int]]) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of a matmul from its recorded input shapes; None if not a matmul."""
    if op in ("aten::addmm", "aten::baddbmm"):
        shapes = shapes[1:]  # the added term comes first
    if len(shapes) < 2 or not shapes[0] or not shapes[1]:
        return None
    a, b = shapes[0], shapes[1]
    if op in ("aten::mm", "aten::addmm") and len(a) == 2 and len(b) == 2:
        return 1, a[0], a[1], b[1]
    if op in ("aten::bmm", "aten::baddbmm") and len(a) == 3 and len(b) == 3:
        return a[0], a[1], a[2], b[2]
    return None


def matmul_points(events: Iterable, element_bytes: int, device_time: bool) -> list[OpPoint]:
    """Roofline points from ``prof.key_averages(group_by_input_shape=True)``.

    Bytes are the two operands and the result at ``element_bytes`` each: the traffic of a
    matmul whose tiles are reused on chip, the figure a roofline places it by.
    """
    points = []
    for event in events:
        if event.key not in MATMUL_OPS or not event.flops:
            continue
        dims = gemm_dims(event.key, event.input_shapes)
        if dims is None:
            continue
        batch, m, k, n = dims
        micros = event.self_device_time_total if device_time else event.self_cpu_time_total
        if micros <= 0:
            continue
        shape = f"{m}×{k}×{n}" if batch == 1 else f"{batch}×{m}×{k}×{n}"
        per_call = batch * (m * k + k * n + m * n) * element_bytes
        points.append(
            OpPoint(
                event.key, shape, event.count, event.flops, per_call * event.count, micros / 1e6
            )
        )
    return sorted(points, key=lambda p: -p.seconds)


def plot_roofline(
    points: list[OpPoint], peak_tflops: float, bandwidth_tbps: float, path: Path, title: str
) -> bool:
    """Write the roofline PNG; False (and a log line) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -e '.[profile]'): no roofline plot")
        return False
    if not points:
        log.warning("no matmul with a FLOP count in the profile: no roofline plot")
        return False
    knee = ridge(peak_tflops, bandwidth_tbps)
    low = min(min(p.intensity for p in points), knee) / 4
    high = max(max(p.intensity for p in points), knee) * 4
    xs = [low * (high / low) ** (i / 99) for i in range(100)]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    ax.plot(xs, [attainable_tflops(x, peak_tflops, bandwidth_tbps) for x in xs], color="black")
    ax.axvline(knee, color="grey", linestyle=":", linewidth=1)
    total = sum(p.seconds for p in points)
    for point in points:
        size = 20 + 400 * point.seconds / total  # area: share of the matmul time
        ax.scatter(point.intensity, point.tflops, s=size, alpha=0.7)
        ax.annotate(point.shape, (point.intensity, point.tflops), fontsize=7, alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved TFLOP/s")
    bottom = min(min(p.tflops for p in points), attainable_tflops(low, peak_tflops, bandwidth_tbps))
    ax.set_ylim(bottom / 2, max(peak_tflops, max(p.tflops for p in points)) * 2)
    ax.set_title(
        f"{title}: peak {peak_tflops:.3g} TFLOP/s, bandwidth {bandwidth_tbps * 1e3:.0f} GB/s"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True

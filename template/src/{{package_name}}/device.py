"""Which device a run uses, and the GPU-only tools that depend on it.

A project generated for a GPU still runs on a CPU-only machine (smoke runs, tests): it says
in one log line which device it picked and why, and turns the GPU-only features off with a
message instead of failing.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from .config import ConfigError

log = logging.getLogger(__name__)


def select_device(choice: str) -> torch.device:
    """``"auto"``: CUDA when available, else the CPU; ``"cuda"`` / ``"cpu"``: exactly that."""
    has_cuda = torch.cuda.is_available()
    if choice == "cuda" and not has_cuda:
        raise ConfigError(
            "train.device = 'cuda' but no CUDA device is visible; "
            "use train.device=auto or train.device=cpu"
        )
    if choice == "cpu" or not has_cuda:
        reason = "train.device=cpu" if choice == "cpu" else "no CUDA device found"
        log.info("device: cpu (%s; GPU-only features are off)", reason)
        return torch.device("cpu")
    log.info("device: cuda (%s, train.device=%s)", torch.cuda.get_device_name(), choice)
    return torch.device("cuda")


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels, so that a wall-clock timing covers the work it claims to."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory of this process: the CUDA allocator's high-water mark, or the peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    import resource  # POSIX only, so imported where it is needed

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@contextmanager
def cuda_memory_snapshot(enabled: bool, device: torch.device, path: Path) -> Iterator[None]:
    """Record every CUDA allocation while the block runs; dump it to ``path`` at the end.

    The dump happens on an exception too (an OOM is when it is most wanted). Open the file at
    https://pytorch.org/memory_viz.
    """
    if enabled and device.type != "cuda":
        log.warning("train.memory_snapshot needs CUDA; not recording on %s", device.type)
    if not enabled or device.type != "cuda":
        yield
        return
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        yield
    finally:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.cuda.memory._dump_snapshot(str(path))
        torch.cuda.memory._record_memory_history(enabled=None)
        log.info("CUDA memory snapshot written to %s (view at pytorch.org/memory_viz)", path)

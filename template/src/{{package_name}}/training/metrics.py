"""Scalar training metrics, written by rank 0 only.

Rank 0 alone writes, so a run leaves one record however many processes it
has; a writer per rank would duplicate the curves and race on the same files.
Each call is also appended as one JSON line to ``log_dir/metrics.jsonl``: a plain
record that needs no viewer, keeps everything up to a kill (it is flushed per
line), continues where a resumed run left off, and is what tests and quick
scripts read.

An experiment tracker (a ``Tracker``: TensorBoard, W&B) can get the same scalars: the
trainer passes the function that opens the one the project was generated with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol, TextIO


class Tracker(Protocol):
    """Where the scalars go besides the JSONL file: an experiment tracker's run."""

    def log(self, scalars: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class MetricsLogger:
    """Log scalars against the training step; a no-op on every rank but 0.

    The training loop can call ``log`` on all ranks without branching on the
    rank itself. Use it as a context manager, so that everything is flushed and
    closed even when training stops with an exception.
    """

    def __init__(
        self,
        log_dir: str | Path,
        rank: int = 0,
        start_step: int | None = None,
        open_tracker: Callable[[Path, int | None], Tracker | None] | None = None,
    ) -> None:
        """``start_step``: the step the run starts from (0, or a resumed checkpoint's). What an
        earlier run logged past it (steps that are trained again) is dropped, so that each
        step appears once; None keeps everything. ``open_tracker(log_dir, start_step)``, on
        rank 0: a tracker to send the scalars to as well (None from it: there is none)."""
        self.log_dir = Path(log_dir)
        self.rank = rank
        self._file: TextIO | None = None
        self._tracker: Tracker | None = None
        if rank != 0:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / "metrics.jsonl"
        if start_step is not None:
            _drop_records_after(path, start_step)
        # Append, so that a resumed run continues the same record.
        self._file = path.open("a", encoding="utf-8")
        if open_tracker is not None:
            self._tracker = open_tracker(self.log_dir, start_step)

    def log(self, step: int, values: dict[str, float]) -> None:
        """Record ``values`` at ``step``; tensors are turned into floats."""
        if self.rank != 0:
            return
        if self._file is None:
            raise RuntimeError("MetricsLogger.log called after close()")
        scalars = {name: float(value) for name, value in values.items()}
        self._file.write(json.dumps({"step": step, **scalars}) + "\n")
        self._file.flush()
        if self._tracker is not None:
            self._tracker.log(scalars, step)

    def close(self) -> None:
        """Flush and close everything; calling it twice is harmless."""
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _drop_records_after(path: Path, step: int) -> None:
    """Rewrite ``path`` without its records past ``step`` (atomically; a no-op if none)."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= step]
    if len(kept) == len(lines):
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    tmp.replace(path)

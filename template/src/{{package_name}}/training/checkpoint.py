"""Distributed checkpoints (DCP): one format for every layout and every number of ranks.

Every rank writes its own shards in parallel with ``torch.distributed.checkpoint``; the
metadata records which slice of which global tensor each file holds, so a checkpoint written
by N ranks loads on M ranks, in another parallel layout (one process, DDP, FSDP2), or into a
plain model without a process group (generation, evaluation). Replicated tensors (one
process, DDP) are written once, not once per rank. Model and optimizer state are saved
under the model's parameter names (``get_state_dict`` strips wrappers, and the optimizer
state is flattened with ``StateDictOptions(flatten_optimizer_state_dict=True)``), so they
do not depend on how the model was wrapped or sharded.

A save is atomic: the ranks write into a temporary directory, rank 0 adds ``train_state.pt``
(LR schedule, loss scale, step, RNG, the data loader's position; read back with
``torch.load(weights_only=True)``),
fsyncs everything, and renames the directory into place once all ranks are done: a
``step_*`` directory is complete or absent, whenever a process dies. ``checkpoint.dir``
must be on a filesystem that every rank sees. ``consolidate`` writes the weights of a
checkpoint as one safetensors file, for inference elsewhere.
"""

import copy
import logging
import os
import re
import shutil
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)

from ..config import ConfigError

log = logging.getLogger(__name__)


class Stateful(Protocol):
    """What the data loader offers the checkpoint (``data.loader.Batches``)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


STEP_DIR = re.compile(r"step_(\d{8})")
TRAIN_STATE = "train_state.pt"
OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


def checkpoints(directory: str | Path) -> list[Path]:
    """The complete checkpoints in ``directory``, oldest first."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if STEP_DIR.fullmatch(p.name))


def step_of(checkpoint: Path) -> int:
    """The step a checkpoint directory (``step_00000120``) holds."""
    return int(STEP_DIR.fullmatch(checkpoint.name).group(1))


def load_model_weights(model: nn.Module, directory: str | Path) -> int | None:
    """Load the latest checkpoint's weights into an unsharded ``model``; return its step.

    Runs in one process without a process group: DCP reads every shard and assembles the
    full tensors. Returns None when there is no checkpoint.
    """
    found = checkpoints(directory)
    if not found:
        return None
    state = {"model": model.state_dict()}
    check_same_model(shapes(state["model"]), saved_model_shapes(found[-1]), found[-1])
    with warnings.catch_warnings():
        # Loading without a process group is the point here; DCP warns about it regardless.
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.load(state, checkpoint_id=found[-1], no_dist=True)
    model.load_state_dict(state["model"])
    return step_of(found[-1])


def consolidate(model: nn.Module, directory: str | Path, out: str | Path | None = None) -> Path:
    """Write the latest checkpoint's weights as one safetensors file; return its path.

    ``model`` gives the names, shapes and dtypes (a plain model, on the host). The file goes
    into the checkpoint's own directory unless ``out`` names another path.
    """
    step = load_model_weights(model, directory)
    if step is None:
        raise ConfigError(
            f"no checkpoint in {directory}: train first, or point checkpoint.dir at one"
        )
    path = Path(out) if out else checkpoints(directory)[-1] / "model.safetensors"
    state = {key: t.contiguous() for key, t in model.state_dict().items()}
    save_file(state, path, metadata={"step": str(step)})
    return path


class CheckpointManager:
    """Save every so often, resume from the latest, keep the last ``keep``; call on all ranks.

    With ``async_save`` a save returns once the state is copied to host memory, and a
    background thread writes it while training goes on; the checkpoint is published (renamed
    into place) when the next save, a load or ``wait`` finds the write done, and when the
    ``with`` block the manager opens ends.
    """

    def __init__(self, directory: str | Path, keep: int, async_save: bool = False) -> None:
        self.dir = Path(directory)
        self.keep = keep
        self.async_save = async_save
        self._pending: tuple[Future, Path, Callable[[], None]] | None = None
        self._host_group: dist.ProcessGroup | None = None

    def save(
        self,
        step: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler,
        data: Stateful | None = None,
    ) -> Path:
        self.wait()  # one write in flight at a time, published in order
        final = self.dir / f"step_{step:08d}"
        tmp = self.dir / f".{final.name}.tmp"  # the same name on every rank
        if dist.get_rank() == 0 and tmp.exists():  # left by a save that was killed
            shutil.rmtree(tmp)
        dist.barrier()
        # The train state as it is now: an async write is published steps later.
        train_state = copy.deepcopy(
            {
                "step": step,
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                # The same on every rank: the samples the whole run has consumed.
                "data": data.state_dict() if data is not None else {},
            }
        )
        model_state, optimizer_state = get_state_dict(model, optimizer, options=OPTIONS)
        state = {"model": model_state, "optimizer": optimizer_state}
        publish = partial(self._publish, tmp, final, train_state)
        try:
            if self.async_save:
                future = dcp.async_save(state, checkpoint_id=tmp, process_group=self._host())
                self._pending = (future, tmp, publish)
            else:
                dcp.save(state, checkpoint_id=tmp)
                publish()
        except BaseException:
            self._discard(tmp)
            raise
        return final

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.wait()  # the last save is on disk when the run ends, however it ends

    def wait(self) -> None:
        """Publish the async save in flight, once its write is done; a no-op without one."""
        if self._pending is None:
            return
        future, tmp, publish = self._pending
        self._pending = None
        try:
            future.result()
            publish()
        except BaseException:
            self._discard(tmp)
            raise

    def _host(self) -> dist.ProcessGroup:
        """A gloo group of its own for the background write's collectives: they run while
        the training thread issues its own on the default group, and two threads sharing one
        group would interleave their collectives."""
        if self._host_group is None:
            self._host_group = dist.new_group(backend="gloo")
        return self._host_group

    def _discard(self, tmp: Path) -> None:
        if dist.get_rank() == 0:
            shutil.rmtree(tmp, ignore_errors=True)

    def _publish(self, tmp: Path, final: Path, train_state: dict) -> None:
        """Once every rank's shards are written: rank 0 adds the train state, fsyncs, and
        renames the directory into place; the others wait for it."""
        if dist.get_rank() == 0:
            torch.save(train_state, tmp / TRAIN_STATE)
            for file in tmp.iterdir():
                _fsync(file)
            _fsync(tmp)
            if final.exists():  # the same step saved again (a rerun): replace it whole
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync(self.dir)
            for old in checkpoints(self.dir)[: -self.keep]:
                shutil.rmtree(old)
            log.info("checkpoint: step %d saved to %s", train_state["step"], final)
        dist.barrier()

    def load_latest(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler,
        data: Stateful | None = None,
    ) -> int:
        """Restore the latest checkpoint, resharded to this run; return its step (0: none).

        ``data`` resumes at the first sample the checkpointed run had not trained on.
        """
        self.wait()
        found = checkpoints(self.dir)
        if not found:
            return 0
        path = found[-1]
        model_state, optimizer_state = get_state_dict(model, optimizer, options=OPTIONS)
        check_same_model(every_rank_shapes(model_state), saved_model_shapes(path), path)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=OPTIONS,
        )
        train_state = torch.load(path / TRAIN_STATE, map_location="cpu", weights_only=True)
        scheduler.load_state_dict(train_state["scheduler"])
        scaler.load_state_dict(train_state["scaler"])
        torch.set_rng_state(train_state["rng"])
        if train_state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(train_state["cuda_rng"])
        if data is not None and train_state.get("data"):
            data.load_state_dict(train_state["data"])
        elif data is not None:
            log.warning("%s holds no data position: the data starts from its beginning", path)
        log.info("checkpoint: resumed from %s", path)
        return train_state["step"]


Shapes = dict[str, tuple[int, ...]]


def shapes(state: dict[str, torch.Tensor]) -> Shapes:
    """The global shape of every tensor of a model state dict (a DTensor's, not its shard's)."""
    return {key: tuple(t.shape) for key, t in state.items()}


def every_rank_shapes(state: dict[str, torch.Tensor]) -> Shapes:
    """``shapes`` of the model every rank holds a part of: under pipeline parallel each rank
    holds its stages' tensors alone."""
    held = [None] * dist.get_world_size()
    dist.all_gather_object(held, shapes(state))
    return {key: shape for part in held for key, shape in part.items()}


def saved_model_shapes(path: Path) -> Shapes:
    """The model tensors a DCP checkpoint holds, from its metadata alone."""
    metadata = FileSystemReader(path).read_metadata().state_dict_metadata
    return {
        key.removeprefix("model."): tuple(meta.size)
        for key, meta in metadata.items()
        if key.startswith("model.")
    }


def check_same_model(expected: Shapes, saved: Shapes, path: Path) -> None:
    """Refuse a checkpoint of another shape with a message, not load_state_dict's traceback."""
    differences = [
        f"{key} {saved.get(key, 'missing')} != {shape}"
        for key, shape in expected.items()
        if saved.get(key) != shape
    ] + [f"{key} is not in this model" for key in saved.keys() - expected.keys()]
    if differences:
        shown = "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")
        raise ConfigError(
            f"{path} holds another model than the config describes ({shown}): set [model] "
            "back to what it was trained with, or train the new shape into an empty "
            "checkpoint.dir (e.g. checkpoint.dir=checkpoints/new)"
        )


def _fsync(path: Path) -> None:
    """Flush a file's (or a directory entry's) data to disk, not just to the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

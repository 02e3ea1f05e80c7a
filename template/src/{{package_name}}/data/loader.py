"""Batches for every modality: a dataset and a collate in, one rank's batches out.

A modality supplies a map-style dataset (``__len__``, ``__getitem__``; ``__getitems__`` to
read a batch at once) and a collate that turns its samples into (inputs, targets). The rest
is here and shared:

- ``EndlessSampler`` orders the samples: a fresh shuffle each epoch, drawn from (seed,
  epoch), and each rank's share of every global batch. Its one piece of state is the
  position, the number of samples the whole run has consumed.
- ``Batches`` is one rank's stream of training batches through a ``torch.utils.data``
  DataLoader: worker processes, pinned memory and prefetching from ``[data]``, the wait for
  each batch measured, and the position saved with every checkpoint.

Why a plain DataLoader and not torchdata's ``StatefulDataLoader``: the stateful loader saves
each rank's iterator as an opaque blob, valid only for the same number of ranks, while a
checkpoint here resumes on any number of ranks and in any layout. The position is the whole
state: the global batch after position p holds the same samples however many ranks split
it, and a batch the workers prefetched but the trainer never took is not counted.
"""

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from ..config import ConfigError, DataConfig

# A batch is a tuple of tensors, (inputs, targets) or, packed, (inputs, targets, documents).
Collate = Callable[[list], tuple[Tensor, ...]]


class EndlessSampler(Sampler[int | tuple[int, int]]):
    """Dataset indices for one rank, epoch after epoch, from the run's ``position`` on.

    The run consumes one global order: epoch e is a permutation of the dataset seeded from
    (seed, e) (or the plain order when ``shuffle`` is off), and epochs follow one another.
    Rank r of w takes the samples at positions r, r + w, r + 2w, ...: each global batch of
    b samples is split into w disjoint shares of b / w, and one process (w = 1) takes the
    same b samples in one share.

    With ``draws`` each index comes with its position, ``(index, position)``: a dataset that
    augments seeds its random draws from the position, so the same sample is cropped anew in
    every epoch, and identically however many ranks or workers build the batch, and after a
    resume.
    """

    def __init__(
        self,
        size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
        position: int = 0,
        draws: bool = False,
    ) -> None:
        self.size, self.seed, self.shuffle, self.draws = size, seed, shuffle, draws
        self.rank, self.world_size = rank, world_size
        self.position = position
        self._order: tuple[int, Tensor] | None = None  # (epoch, permutation), the last used

    def __iter__(self) -> Iterator[int | tuple[int, int]]:
        position = self.position + self.rank
        while True:
            epoch, index = divmod(position, self.size)
            sample = int(self.order(epoch)[index])
            yield (sample, position) if self.draws else sample
            position += self.world_size

    def order(self, epoch: int) -> Tensor:
        """The dataset's order in ``epoch``."""
        if not self.shuffle:
            return torch.arange(self.size)
        if self._order is None or self._order[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._order = (epoch, torch.randperm(self.size, generator=generator))
        return self._order[1]


@dataclass
class Fetched:
    """What ``Batches`` measured: batches taken and the seconds spent waiting for them."""

    batches: int = 0
    wait_s: float = 0.0


class Batches:
    """One rank's training batches: ``next(batches)`` is (inputs, targets) on the device.

    ``batch_size`` is the global batch, split over the ranks; every rank builds its own
    share. The loader's state is ``position``: ``state_dict`` for the checkpoint,
    ``load_state_dict`` before the next batch to resume exactly where it stopped.
    """

    def __init__(
        self,
        dataset: Dataset,
        collate: Collate,
        cfg: DataConfig,
        batch_size: int,
        seed: int,
        device: torch.device,
        rank: int = 0,
        world_size: int = 1,
        draws: bool = False,
    ) -> None:
        size = holds_a_batch(dataset, batch_size, "training", "use more data or a smaller batch")
        self.dataset, self.collate, self.cfg = dataset, collate, cfg
        self.batch_size, self.device = batch_size, device
        self.sampler = EndlessSampler(size, seed, rank, world_size, draws=draws)
        self.fetched = Fetched()
        self._batches: Iterator | None = None

    @property
    def position(self) -> int:
        """Samples of the whole run taken so far: the next global batch starts here."""
        return self.sampler.position

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position, "samples": self.sampler.size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["samples"] != self.sampler.size:
            raise ConfigError(
                f"the checkpoint was trained on data of {state['samples']} samples, and the "
                f"configured data holds {self.sampler.size}: point [data] back at that data, "
                "or start the new data in an empty checkpoint.dir"
            )
        self.sampler.position = state["position"]
        self._batches = None  # the next batch starts a loader from the new position

    def __iter__(self) -> "Batches":
        return self

    def __next__(self) -> tuple[Tensor, ...]:
        start = time.perf_counter()
        if self._batches is None:
            self._batches = iter(self._loader())
        batch = tuple(part.to(self.device, non_blocking=True) for part in next(self._batches))
        self.sampler.position += self.batch_size
        self.fetched.batches += 1
        self.fetched.wait_s += time.perf_counter() - start
        return batch

    def _loader(self) -> DataLoader:
        """A DataLoader over the sampler from its current position (the sampler is endless,
        so one loader, and one set of workers, serves the whole run)."""
        return loader(
            self.dataset,
            self.collate,
            self.cfg,
            self.batch_size // self.sampler.world_size,
            self.sampler,
            self.device,
        )


def holds_a_batch(dataset: Dataset, batch_size: int, split: str, way_out: str) -> int:
    """The samples of ``dataset``, refused when they are fewer than one global batch."""
    size = len(dataset)
    if size < batch_size:
        raise ConfigError(
            f"the {split} data holds {size} samples, fewer than one batch of "
            f"train.batch_size = {batch_size}: {way_out}"
        )
    return size


def loader(
    dataset: Dataset,
    collate: Collate,
    cfg: DataConfig,
    rows: int,
    sampler: Iterable[int | tuple[int, int]],
    device: torch.device,
) -> DataLoader:
    """A DataLoader of ``rows`` samples per batch with ``[data]``'s workers and buffers."""
    workers = cfg.num_workers > 0
    return DataLoader(
        dataset,
        batch_size=rows,
        sampler=sampler,
        collate_fn=collate,
        num_workers=cfg.num_workers,
        # Page-locked host batches copy to the GPU asynchronously; a CPU run has no copy.
        pin_memory=cfg.pin_memory and device.type == "cuda",
        prefetch_factor=cfg.prefetch_factor if workers else None,
        persistent_workers=cfg.persistent_workers and workers,
    )


def validation_batches(
    dataset: Dataset,
    collate: Collate,
    cfg: DataConfig,
    batch_size: int,
    batches: int,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> DataLoader:
    """The first ``batches`` global batches of the validation data in order, this rank's
    share of each, on the host: the same samples at every evaluation (they repeat if the data
    holds fewer). A set smaller than one batch is validated whole, once, in one smaller batch
    (its samples rounded down to a multiple of the ranks)."""
    size = len(dataset)
    if size < batch_size:
        batch_size, batches = size - size % world_size, 1
        if batch_size == 0:
            raise ConfigError(
                f"the validation data holds {size} samples, fewer than the {world_size} "
                "ranks: raise data.val_fraction or use more data"
            )
    order = EndlessSampler(size, 0, rank, world_size, shuffle=False)
    indices = list(itertools.islice(order, batches * batch_size // world_size))
    return loader(dataset, collate, cfg, batch_size // world_size, indices, device)

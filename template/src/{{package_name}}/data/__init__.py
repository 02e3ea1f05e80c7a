"""Training text as batches of byte tokens.

The built-in corpus, ``corpus.txt`` (about 590 KB of English prose), is the docstrings of a
fixed list of Python 3.11 standard-library modules and of their public classes and
functions, in a fixed order, as ``inspect.getdoc`` returns them (Python Software Foundation
License). It ships inside the package, so training needs no download; ``data.corpus`` may
name any local UTF-8 text file instead.
"""

from importlib.resources import files
from pathlib import Path

import torch
from torch import Tensor

from ..config import ConfigError, DataConfig


def load_corpus(corpus: str) -> bytes:
    """The bytes of the built-in corpus (``"builtin"``) or of a text file."""
    if corpus == "builtin":
        return files(__package__).joinpath("corpus.txt").read_bytes()
    path = Path(corpus)
    if not path.is_file():
        raise ConfigError(f"data.corpus: no such file {corpus!r} (or use data.corpus=builtin)")
    return path.read_bytes()


class Batches:
    """Random windows of a byte corpus, split once into train and validation parts.

    Every batch is drawn from its own generator, seeded from (seed, index): the batch at
    step k is the same whether the run went straight to k or was resumed from a checkpoint,
    and the validation batches are the same at every evaluation.
    """

    def __init__(
        self,
        data: bytes,
        seq_len: int,
        batch_size: int,
        val_fraction: float,
        seed: int,
        device: torch.device | str = "cpu",
    ) -> None:
        # The byte tokenizer's ids are the bytes themselves, so no encoding pass is needed.
        tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        split = len(tokens) - int(len(tokens) * val_fraction)
        self.train_tokens, self.val_tokens = tokens[:split], tokens[split:]
        for split, part in (("train", self.train_tokens), ("validation", self.val_tokens)):
            if len(part) < seq_len + 1:
                raise ConfigError(
                    f"the {split} split has {len(part)} bytes, fewer than train.seq_len + 1 = "
                    f"{seq_len + 1} (a window and its next byte): use a larger corpus or change "
                    "data.val_fraction"
                )
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.device = torch.device(device)

    @classmethod
    def from_config(
        cls, cfg: DataConfig, seq_len: int, batch_size: int, seed: int, device: torch.device
    ) -> "Batches":
        return cls(load_corpus(cfg.corpus), seq_len, batch_size, cfg.val_fraction, seed, device)

    def train(self, step: int) -> tuple[Tensor, Tensor]:
        """Inputs and targets (batch, seq_len) for training step ``step``."""
        return self._windows(self.train_tokens, step)

    def val(self, index: int) -> tuple[Tensor, Tensor]:
        """The ``index``-th validation batch."""
        return self._windows(self.val_tokens, index)

    def _windows(self, tokens: Tensor, index: int) -> tuple[Tensor, Tensor]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        # A window is seq_len + 1 tokens (inputs and the targets shifted by one): every start
        # from 0 to len - seq_len - 1 fits, the last included.
        starts = torch.randint(len(tokens) - self.seq_len, (self.batch_size,), generator=generator)
        offsets = torch.arange(self.seq_len + 1)
        window = tokens[starts[:, None] + offsets].long()
        window = window.to(self.device, non_blocking=True)
        return window[:, :-1], window[:, 1:]

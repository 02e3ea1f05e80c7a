"""Training text as batches of token windows.

Two sources, one sampler:

- ``data.prepared`` set: the token shards ``prepare`` wrote there (``shards.py``), memory-mapped,
  after checking that they were made by the configured tokenizer;
- otherwise ``data.corpus``'s documents read whole as bytes, which the byte tokenizer needs no
  pass to encode. The built-in corpus, ``corpus.txt`` (about 590 KB of English prose), is the
  docstrings of a fixed list of Python 3.11 standard-library modules and of their public
  classes and functions, in a fixed order, as ``inspect.getdoc`` returns them (Python Software
  Foundation License). It ships inside the package, so training needs no download.
"""

from importlib.resources import files
from pathlib import Path

import torch
from torch import Tensor

from ..config import Config, ConfigError, DataConfig
from .shards import Manifest, TokenStream
from .tokenizer import load_tokenizer

TEXT_SUFFIXES = (".txt", ".md")


def source_files(corpus: str) -> list[Path]:
    """The documents of ``data.corpus``: the built-in corpus, a file, or a folder's text files
    (recursively, in sorted order)."""
    if corpus == "builtin":
        return [Path(str(files(__package__).joinpath("corpus.txt")))]
    path = Path(corpus)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file())
        if not found:
            raise ConfigError(
                f"data.corpus: the folder {corpus} holds no {' or '.join(TEXT_SUFFIXES)} files: "
                "put the text there, or point data.corpus at a file"
            )
        return found
    raise ConfigError(
        f"data.corpus: no such file or folder {corpus!r} (or use data.corpus=builtin)"
    )


def load_corpus(corpus: str) -> bytes:
    """The bytes of ``data.corpus``'s documents, joined as they are."""
    return b"".join(path.read_bytes() for path in source_files(corpus))


def byte_streams(data: bytes, val_fraction: float) -> tuple[TokenStream, TokenStream]:
    """``data`` as byte tokens, its last ``val_fraction`` the validation split."""
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    split = len(tokens) - int(len(tokens) * val_fraction)
    return TokenStream([tokens[:split]]), TokenStream([tokens[split:]])


def token_streams(cfg: DataConfig, vocab_size: int) -> tuple[TokenStream, TokenStream]:
    """The training and validation tokens ``cfg`` names (see the module's docstring)."""
    if not cfg.prepared:
        if cfg.tokenizer != "byte":
            raise ConfigError(
                f"data.tokenizer={cfg.tokenizer} reads token shards: run `prepare` with "
                "data.prepared=DIR, then train with the same data.prepared"
            )
        return byte_streams(load_corpus(cfg.corpus), cfg.val_fraction)
    directory = Path(cfg.prepared)
    manifest = Manifest.read(directory)
    if manifest is None:
        raise ConfigError(
            f"data.prepared: {directory} holds no {directory / 'manifest.json'}: run `prepare` "
            "(an interrupted one leaves none; run it again)"
        )
    tokenizer = load_tokenizer(cfg)
    if manifest.tokenizer != tokenizer.fingerprint:
        raise ConfigError(
            f"data.prepared: the shards in {directory} were made by tokenizer "
            f"{manifest.tokenizer}, not by data.tokenizer={cfg.tokenizer} "
            f"({tokenizer.fingerprint}): run `prepare` again, or set data.tokenizer to theirs"
        )
    if manifest.vocab_size > vocab_size:
        raise ConfigError(
            f"the shards in {directory} use {manifest.vocab_size} token ids, more than "
            f"model.vocab_size = {vocab_size}: raise model.vocab_size to {manifest.vocab_size}"
        )
    return (
        TokenStream.from_shards(directory, manifest, "train"),
        TokenStream.from_shards(directory, manifest, "val"),
    )


class Batches:
    """Random windows of the training and validation tokens.

    Every batch is drawn from its own generator, seeded from (seed, index): the batch at
    step k is the same whether the run went straight to k or was resumed from a checkpoint,
    and the validation batches are the same at every evaluation.
    """

    def __init__(
        self,
        train: TokenStream,
        val: TokenStream,
        seq_len: int,
        batch_size: int,
        seed: int,
        device: torch.device | str = "cpu",
    ) -> None:
        for split, part in (("train", train), ("validation", val)):
            if len(part) < seq_len + 1:
                raise ConfigError(
                    f"the {split} split has {len(part)} tokens, fewer than train.seq_len + 1 = "
                    f"{seq_len + 1} (a window and its next token): use a larger corpus or "
                    "change data.val_fraction"
                )
        self.train_tokens, self.val_tokens = train, val
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.device = torch.device(device)

    @classmethod
    def from_config(cls, cfg: Config, device: torch.device) -> "Batches":
        """The batches of ``cfg``'s run: its data, sequence length, batch size and seed."""
        train, val = token_streams(cfg.data, cfg.model.vocab_size)
        tc = cfg.train
        return cls(train, val, tc.seq_len, tc.batch_size, tc.seed, device)

    def train(self, step: int) -> tuple[Tensor, Tensor]:
        """Inputs and targets (batch, seq_len) for training step ``step``."""
        return self._windows(self.train_tokens, step)

    def val(self, index: int) -> tuple[Tensor, Tensor]:
        """The ``index``-th validation batch."""
        return self._windows(self.val_tokens, index)

    def _windows(self, tokens: TokenStream, index: int) -> tuple[Tensor, Tensor]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        # A window is seq_len + 1 tokens (inputs and the targets shifted by one): every start
        # from 0 to len - seq_len - 1 fits, the last included.
        starts = torch.randint(len(tokens) - self.seq_len, (self.batch_size,), generator=generator)
        window = tokens.windows(starts, self.seq_len + 1).to(self.device, non_blocking=True)
        return window[:, :-1], window[:, 1:]

"""Training text as windows of tokens, batched by ``loader.py``.

Two sources of tokens, one dataset (``TokenWindows``) over either:

- ``data.prepared`` set: the token shards ``prepare`` wrote there (``shards.py``), memory-mapped,
  after checking that they were made by the configured tokenizer;
- otherwise ``data.corpus``'s documents read whole as bytes, which the byte tokenizer needs no
  pass to encode.

A corpus is made of documents: a ``.txt`` or ``.md`` file is one, and a ``.jsonl`` file holds
one per line, in its ``"text"`` field (the layout most dataset exports use). A tokenizer with
an end-of-document token ends each with it, which is what packing (``data.packing``) reads
document boundaries from.

The built-in corpus, ``corpus.jsonl`` (about 590 KB of English prose in 1,383 documents), is
the docstrings of a fixed list of Python 3.11 standard-library modules and of their public
classes and functions, in a fixed order, as ``inspect.getdoc`` returns them (Python Software
Foundation License), each headed by its qualified name. It ships inside the package, so
training needs no download.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from importlib.resources import files
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from ..config import Config, ConfigError
from .loader import Batches, Collate, validation_batches
from .shards import Manifest, TokenStream
from .tokenizer import EOT, EOT_LLAMA3, ByteTokenizer, check_vocab, load_tokenizer

TEXT_SUFFIXES = (".txt", ".md", ".jsonl")


def source_files(corpus: str) -> list[Path]:
    """The files of ``data.corpus``: the built-in corpus, a file, or a folder's text and JSONL
    files (recursively, in sorted order)."""
    if corpus == "builtin":
        return [Path(str(files(__package__).joinpath("corpus.jsonl")))]
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


def read_documents(path: Path, start: int = 0, stop: int | None = None) -> Iterator[str]:
    """The documents of one corpus file: a ``.jsonl`` file's ``"text"`` fields, line by line
    (from byte ``start`` to ``stop``, both at line ends, for a piece of it); any other file's
    text whole. Undecodable bytes read as U+FFFD."""
    if path.suffix != ".jsonl":
        yield path.read_bytes().decode("utf-8", errors="replace")
        return
    with path.open("rb") as f:
        f.seek(start)
        position = start
        for line in f:
            if stop is not None and position >= stop:
                return
            begin, position = position, position + len(line)
            if not line.strip():
                continue
            try:
                text = json.loads(line.decode("utf-8", errors="replace"))["text"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ConfigError(
                    f"{path}, line {line_number(path, begin)}: a JSONL corpus holds one JSON "
                    f'object per line with the document in "text" ({error!r}): fix the line or '
                    "remove it"
                ) from None
            if not isinstance(text, str):
                number = line_number(path, begin)
                raise ConfigError(f'{path}, line {number}: "text" must be a string')
            yield text


def line_number(path: Path, begin: int) -> int:
    """The number of the line of ``path`` that starts at byte ``begin`` (for messages)."""
    with path.open("rb") as f:
        return f.read(begin).count(b"\n") + 1


def load_corpus(corpus: str) -> bytes:
    """The bytes of ``data.corpus``'s documents, joined as they are."""
    parts = []
    for path in source_files(corpus):
        if path.suffix == ".jsonl":
            parts += [text.encode(errors="replace") for text in read_documents(path)]
        else:
            parts.append(path.read_bytes())  # as they are, undecodable bytes included
    return b"".join(parts)


def byte_streams(data: bytes, val_fraction: float) -> tuple[TokenStream, TokenStream]:
    """``data`` as byte tokens, its last ``val_fraction`` the validation split."""
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    split = len(tokens) - int(len(tokens) * val_fraction)
    return TokenStream([tokens[:split]]), TokenStream([tokens[split:]])


def token_streams(cfg: Config) -> tuple[TokenStream, TokenStream]:
    """The training and validation tokens ``cfg.data`` names (see the module's docstring)."""
    data = cfg.data
    if not data.prepared:
        if data.tokenizer != "byte":
            raise ConfigError(
                f"data.tokenizer={data.tokenizer} reads token shards: run `prepare` with "
                "data.prepared=DIR, then train with the same data.prepared"
            )
        check_vocab(ByteTokenizer.vocab_size, cfg.model)
        return byte_streams(load_corpus(data.corpus), data.val_fraction)
    directory = Path(data.prepared)
    manifest = Manifest.read(directory)
    if manifest is None:
        raise ConfigError(
            f"data.prepared: {directory} holds no {directory / 'manifest.json'}: run `prepare` "
            "(an interrupted one leaves none; run it again)"
        )
    tokenizer = load_tokenizer(data)
    if manifest.tokenizer != tokenizer.fingerprint:
        raise ConfigError(
            f"data.prepared: the shards in {directory} were made by tokenizer "
            f"{manifest.tokenizer}, not by data.tokenizer={data.tokenizer} "
            f"({tokenizer.fingerprint}): run `prepare` again, or set data.tokenizer to theirs"
        )
    check_vocab(manifest.vocab_size, cfg.model)
    return (
        TokenStream.from_shards(directory, manifest, "train"),
        TokenStream.from_shards(directory, manifest, "val"),
    )


class TokenWindows(Dataset):
    """A split's tokens as windows of ``seq_len + 1`` (inputs and their next tokens), each
    starting where the last one's inputs end: an epoch reads every token once. A window is
    read from the shards when asked for, so the dataset holds no tokens itself."""

    def __init__(self, tokens: TokenStream, seq_len: int) -> None:
        self.tokens, self.seq_len = tokens, seq_len

    def __len__(self) -> int:
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, index: int) -> Tensor:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[Tensor]:
        """A batch's windows in one read (the DataLoader asks for them so)."""
        starts = torch.tensor(indices) * self.seq_len
        return list(self.tokens.windows(starts, self.seq_len + 1))


def next_tokens(windows: list[Tensor]) -> tuple[Tensor, Tensor]:
    """The collate of ``TokenWindows``: inputs, and targets shifted by one."""
    batch = torch.stack(windows)
    return batch[:, :-1], batch[:, 1:]


def document_ids(tokens: Tensor, eot_id: int) -> Tensor:
    """The document of every token in rows of packed documents, counted from 0 in each row:
    an end-of-document token belongs to the document it ends, the token after it opens the
    next one."""
    ends = tokens == eot_id
    return ends.cumsum(dim=-1) - ends.long()


def packed_next_tokens(eot_id: int, windows: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """The collate of ``TokenWindows`` under ``data.packing``: inputs, targets and the inputs'
    document ids, for attention that stays within each document."""
    inputs, targets = next_tokens(windows)
    return inputs, targets, document_ids(inputs, eot_id)


def collate_for(cfg: Config) -> Collate:
    """The collate ``cfg.data`` asks for: packed documents, or plain windows."""
    if not cfg.data.packing:
        return next_tokens
    eot_id = load_tokenizer(cfg.data).eot_id
    if eot_id is None:
        raise ConfigError(
            f"data.packing reads document boundaries from the end-of-document token, and "
            f"data.tokenizer={cfg.data.tokenizer} has none ({EOT} or {EOT_LLAMA3}): use a "
            "tokenizer that has one, or set data.packing=false"
        )
    return partial(packed_next_tokens, eot_id)  # a partial pickles into DataLoader workers


def text_datasets(cfg: Config) -> tuple[TokenWindows, TokenWindows]:
    """The training and validation windows ``cfg`` names."""
    train, val = token_streams(cfg)
    seq_len = cfg.train.seq_len
    for split, part in (("train", train), ("validation", val)):
        if len(part) < seq_len + 1:
            raise ConfigError(
                f"the {split} split has {len(part)} tokens, fewer than train.seq_len + 1 = "
                f"{seq_len + 1} (a window and its next token): use a larger corpus or "
                "change data.val_fraction"
            )
    return TokenWindows(train, seq_len), TokenWindows(val, seq_len)


@dataclass
class Data:
    """A run's data on one rank: the endless training batches, and the fixed validation
    batches (on the host; ``evaluate`` moves them)."""

    train: Batches
    val: DataLoader

    @classmethod
    def from_config(
        cls, cfg: Config, device: torch.device, rank: int = 0, world_size: int = 1
    ) -> "Data":
        train, val = text_datasets(cfg)
        tc, where, collate = cfg.train, (device, rank, world_size), collate_for(cfg)
        return cls(
            Batches(train, collate, cfg.data, tc.batch_size, tc.seed, *where),
            validation_batches(val, collate, cfg.data, tc.batch_size, tc.eval_batches, *where),
        )

"""Token shards: the format ``prepare`` writes and training reads.

A prepared directory (``data.prepared``) holds each split as shards of token ids,
``train-00000.bin``, ``val-00000.bin``, ..., raw little-endian ``uint16`` for vocabularies up to
65,536 and ``uint32`` beyond, and ``manifest.json``: the tokenizer's fingerprint and vocabulary,
the dtype, each shard's token count, and each source file's size, SHA-256 and replaced bytes.
Training maps the shards into memory (``torch.from_file``), so a corpus of billions of tokens
costs no RAM until a window is read. The manifest is written last: a directory without one
holds an interrupted ``prepare``, which a rerun redoes.
"""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor

MANIFEST = "manifest.json"
SHARD_TOKENS = 1 << 26  # tokens per shard: 128 MB of uint16
DTYPES = {"uint16": (torch.uint16, "H"), "uint32": (torch.uint32, "I")}  # torch's, array's


def dtype_for(vocab_size: int) -> str:
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


@dataclass
class Manifest:
    tokenizer: str  # the tokenizer's fingerprint
    recipe: str  # data.tokenizer as asked: byte, a path, or bpe:<model.vocab_size>
    vocab_size: int
    dtype: str
    splits: dict[str, list[tuple[str, int]]]  # split -> (shard file, tokens)
    sources: list[dict] = field(default_factory=list)  # path, bytes, sha256, replaced

    @classmethod
    def read(cls, directory: Path) -> "Manifest | None":
        path = directory / MANIFEST
        if not path.is_file():
            return None
        raw = json.loads(path.read_text())
        raw["splits"] = {k: [tuple(s) for s in v] for k, v in raw["splits"].items()}
        return cls(**raw)

    def write(self, directory: Path) -> None:
        write_atomic(directory / MANIFEST, json.dumps(asdict(self), indent=2).encode())

    def tokens(self, split: str) -> int:
        return sum(n for _, n in self.splits[split])


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


class ShardWriter:
    """One split's shards, written as tokens arrive: ``write`` raw ids of ``dtype``, a new
    file every ``SHARD_TOKENS``, each renamed into place when full (or at ``close``)."""

    def __init__(self, directory: Path, split: str, dtype: str) -> None:
        self.directory, self.split = directory, split
        self.itemsize = DTYPES[dtype][0].itemsize
        self.shards: list[tuple[str, int]] = []  # (file, tokens) of every shard finished
        self._file = None
        self._tokens = 0

    def write(self, ids: bytes | memoryview) -> None:
        view = memoryview(ids)
        while len(view):
            if self._file is None:
                self._open()
            room = (SHARD_TOKENS - self._tokens) * self.itemsize
            self._file.write(view[:room])
            self._tokens += len(view[:room]) // self.itemsize
            view = view[room:]
            if self._tokens == SHARD_TOKENS:
                self._finish()

    def close(self) -> list[tuple[str, int]]:
        if self._file is None and not self.shards:
            self._open()  # an empty split still has its (empty) shard
        if self._file is not None:
            self._finish()
        return self.shards

    def _name(self) -> str:
        return f"{self.split}-{len(self.shards):05d}.bin"

    def _open(self) -> None:
        self._file = (self.directory / (self._name() + ".tmp")).open("wb")
        self._tokens = 0

    def _finish(self) -> None:
        self._file.close()
        tmp, name = Path(self._file.name), self._name()
        tmp.replace(self.directory / name)
        self.shards.append((name, self._tokens))
        self._file = None


class TokenStream:
    """The tokens of one split, in parts (memory-mapped shards, or one in-memory tensor), read
    as one sequence."""

    def __init__(self, parts: list[Tensor]) -> None:
        self.parts = parts
        lengths = torch.tensor([len(p) for p in parts])
        self.ends = lengths.cumsum(0)
        self.source: tuple[Path, Manifest, str] | None = None  # where mapped shards come from

    @classmethod
    def from_shards(cls, directory: Path, manifest: Manifest, split: str) -> "TokenStream":
        dtype = DTYPES[manifest.dtype][0]
        parts = [
            torch.from_file(str(directory / name), shared=False, size=n, dtype=dtype)
            for name, n in manifest.splits[split]
            if n
        ]
        stream = cls(parts)
        stream.source = (directory, manifest, split)
        return stream

    def __reduce_ex__(self, protocol: int):
        """A DataLoader worker started by spawn or forkserver maps the shards anew, rather
        than receive every token through a pipe."""
        if self.source is None:
            return super().__reduce_ex__(protocol)
        return TokenStream.from_shards, self.source

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.parts) else 0

    def windows(self, starts: Tensor, length: int) -> Tensor:
        """Rows of ``length`` tokens from each of ``starts``, as int64 (batch, length)."""
        offsets = torch.arange(length)
        if len(self.parts) == 1:
            return self.parts[0][starts[:, None] + offsets].long()
        return torch.stack([self._window(int(s), length) for s in starts])

    def _window(self, start: int, length: int) -> Tensor:
        pieces, end = [], start + length
        first = int(torch.searchsorted(self.ends, start, right=True))
        for index in range(first, len(self.parts)):
            begin = int(self.ends[index]) - len(self.parts[index])
            lo, hi = max(start, begin) - begin, min(end, int(self.ends[index])) - begin
            pieces.append(self.parts[index][lo:hi].long())
            if self.ends[index] >= end:
                break
        return torch.cat(pieces)

"""Tokenizers: bytes, or a byte-level BPE in Hugging Face's ``tokenizer.json`` format.

``data.tokenizer`` picks one:

- ``byte`` (the default): the UTF-8 bytes of the text are the token ids. No vocabulary file,
  no download and no unknown tokens: any text encodes, and 256 ids cover it. The cost is about
  four times more tokens per word than a trained BPE vocabulary.
- ``bpe``: a byte-level BPE that ``prepare`` trains on the corpus, with ``model.vocab_size``
  entries, and saves as ``tokenizer.json`` beside the shards (``data.prepared``).
- a path to a ``tokenizer.json`` you already have (Llama 3's, GPT-2's, ...), read as it is.

Every tokenizer has ``encode``, ``encode_batch``, ``decode``, ``vocab_size``, ``eot_id`` (the
end-of-document token that ``prepare`` appends to each document; the byte tokenizer has none)
and ``fingerprint``, which the shards' manifest records so that training refuses shards made
by another tokenizer.
"""

import hashlib
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from ..config import ConfigError, DataConfig, ModelConfig

log = logging.getLogger(__name__)

REPLACEMENT = "\ufffd".encode()  # what decode writes for an id that is not a byte
EOT = "<|endoftext|>"  # the end-of-document token a trained BPE gets


VOCAB_MULTIPLE = 64  # embedding and head rows: a multiple keeps the head's matmul on fast tiles


def padded_vocab(ids: int) -> int:
    """The ``model.vocab_size`` for a tokenizer of ``ids`` ids: rounded up to a multiple of
    ``VOCAB_MULTIPLE``. The rows past ``ids`` are never a target, so they learn to stay
    unlikely and cost ``2 * dim`` parameters each."""
    return -(-ids // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def check_vocab(ids: int, cfg: ModelConfig) -> None:
    """``model.vocab_size`` must hold a tokenizer's ``ids``; rows far past them are a warning
    (a large preset's vocabulary under the byte tokenizer is mostly rows no token reaches)."""
    fits = padded_vocab(ids)
    if ids > cfg.vocab_size:
        raise ConfigError(
            f"data.tokenizer has {ids} tokens, more than model.vocab_size = "
            f"{cfg.vocab_size}: set model.vocab_size={fits} (its ids, padded to a "
            f"multiple of {VOCAB_MULTIPLE} for the matmuls)"
        )
    if cfg.vocab_size > fits:
        unused = cfg.vocab_size - ids
        log.warning(
            "model.vocab_size = %d leaves %d embedding and head rows that no token of this "
            "tokenizer reaches (%s parameters): set model.vocab_size=%d",
            cfg.vocab_size,
            unused,
            f"{2 * unused * cfg.dim:,}",
            fits,
        )


class Tokenizer(Protocol):
    vocab_size: int
    eot_id: int | None
    fingerprint: str

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class ByteTokenizer:
    vocab_size = 256
    eot_id = None  # documents are joined as they are
    fingerprint = "byte"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Bytes back to text; invalid UTF-8 becomes U+FFFD instead of raising.

        A model with ``vocab_size > 256`` can sample ids past the byte range; they decode to
        U+FFFD as well.
        """
        out = bytearray()
        for i in ids:
            if 0 <= i < 256:
                out.append(i)
            else:
                out += REPLACEMENT
        return out.decode("utf-8", errors="replace")


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer read from a ``tokenizer.json``."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as Loaded

        try:
            self._tokenizer = Loaded.from_file(str(path))
        except Exception as e:  # the library raises a bare Exception for a file it cannot parse
            raise ConfigError(
                f"{path} is not a tokenizer.json that Hugging Face tokenizers can read ({e}): "
                "point data.tokenizer at another file, or use data.tokenizer=bpe to train one"
            ) from e
        self.vocab_size = self._tokenizer.get_vocab_size()
        self.eot_id = self._tokenizer.token_to_id(EOT)
        self.fingerprint = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Many texts at once, on the library's own threads."""
        return [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)


def train_bpe(texts: Iterator[str], vocab_size: int, path: Path) -> HFTokenizer:
    """Train a byte-level BPE of ``vocab_size`` entries on ``texts``; save it at ``path``.

    Byte-level, as GPT-2's and Llama 3's: its 256 byte tokens cover any text, so every
    string round-trips. The end-of-document token takes one entry of the vocabulary.
    """
    from tokenizers import Tokenizer as Untrained
    from tokenizers import decoders, models, pre_tokenizers, trainers

    bpe = Untrained(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tmp = path.with_suffix(".tmp")
    bpe.save(str(tmp))
    tmp.replace(path)  # atomic: a reader never sees half a file
    return HFTokenizer(path)


def tokenizer_path(cfg: DataConfig) -> Path:
    """Where ``data.tokenizer``'s file is: the trained BPE beside the shards, or the path."""
    if cfg.tokenizer == "bpe":
        if not cfg.prepared:
            raise ConfigError(
                "data.tokenizer=bpe is trained by `prepare` into data.prepared, which is not "
                "set: give data.prepared=DIR"
            )
        return Path(cfg.prepared) / "tokenizer.json"
    return Path(cfg.tokenizer)


def load_tokenizer(cfg: DataConfig) -> Tokenizer:
    """The tokenizer ``data.tokenizer`` names (see the module's docstring)."""
    if cfg.tokenizer == "byte":
        return ByteTokenizer()
    path = tokenizer_path(cfg)
    if not path.is_file():
        how = "run `prepare` first" if cfg.tokenizer == "bpe" else "or use data.tokenizer=byte"
        raise ConfigError(f"data.tokenizer: no tokenizer file at {path}: {how}")
    return HFTokenizer(path)

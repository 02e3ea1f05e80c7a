"""Tokenizers: bytes, a byte-level BPE in Hugging Face's ``tokenizer.json`` format, or tiktoken's.

``data.tokenizer`` picks one:

- ``byte`` (the default): the UTF-8 bytes of the text are the token ids. No vocabulary file,
  no download and no unknown tokens: any text encodes, and 256 ids cover it. The cost is about
  four times more tokens per word than a trained BPE vocabulary.
- ``bpe``: a byte-level BPE that ``prepare`` trains on the corpus, with ``model.vocab_size``
  entries, and saves as ``tokenizer.json`` beside the shards (``data.prepared``).
- a path to a tokenizer file you already have, read as it is: a Hugging Face ``tokenizer.json``
  (GPT-2's, Mistral's, ...), or any other file as a tiktoken BPE (one base64 token and its rank
  per line: ``cl100k_base.tiktoken``, Llama 3's ``tokenizer.model``).

Every tokenizer has ``encode``, ``decode``, ``vocab_size``, ``eot_id`` (the end-of-document
token that ``prepare`` appends to each document; the byte tokenizer has none) and
``fingerprint``, which the shards' manifest records so that training refuses shards made by
another tokenizer.
"""

import base64
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

    def decode(self, ids: Iterable[int]) -> str: ...


class ByteTokenizer:
    vocab_size = 256
    eot_id = None  # documents are joined as they are
    fingerprint = "byte"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

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


# The pre-tokenizer regex of cl100k_base and of Llama 3.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_RANKS, LLAMA3_SPECIAL = 128_000, 256
EOT_LLAMA3 = "<|end_of_text|>"


def fingerprint(raw: bytes) -> str:
    """What the manifest records of a tokenizer file: the SHA-256 of its bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def read_tiktoken_ranks(raw: bytes, path: Path) -> dict[bytes, int]:
    """The ranks of a tiktoken BPE file's bytes ``raw``. Read here rather than with
    ``tiktoken.load``, whose cache is keyed by the path alone and would serve an edited
    file's old contents."""
    ranks = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as e:
            raise ConfigError(
                f"{path} line {number} is not a base64 token and its rank ({e}): "
                "data.tokenizer reads a tokenizer.json, or a tiktoken BPE file"
            ) from e
    return ranks


class TiktokenTokenizer:
    """A tiktoken BPE file: one base64 token and its rank per line, and nothing else.

    The file holds the merges only, so the rest is the convention of the tokenizers that
    ship this way: the split pattern of cl100k_base and Llama 3 (``SPLIT_PATTERN``), and the
    special tokens after the ranks. A file of Llama 3's 128,000 ranks gets Llama 3's 256
    special ids, ``<|end_of_text|>`` (128,001) ending each document; any other gets one
    ``<|endoftext|>`` after its ranks. Text is encoded as text: a special token's name in the
    corpus is never read as the token.
    """

    def __init__(self, path: Path) -> None:
        import tiktoken

        raw = path.read_bytes()
        ranks = read_tiktoken_ranks(raw, path)
        missing = [b for b in range(256) if bytes([b]) not in ranks]
        if missing:
            raise ConfigError(
                f"{path}: a tiktoken BPE must rank every single byte, and {len(missing)} are "
                f"missing (e.g. {missing[0]}): point data.tokenizer at a complete file"
            )
        if len(ranks) == LLAMA3_RANKS:
            names = ["<|begin_of_text|>", EOT_LLAMA3]
            names += [f"<|reserved_special_token_{i}|>" for i in range(LLAMA3_SPECIAL - 2)]
            eot = EOT_LLAMA3
        else:
            names, eot = [EOT], EOT
        specials = {name: len(ranks) + i for i, name in enumerate(names)}
        self._encoding = tiktoken.Encoding(
            name=path.stem,
            pat_str=SPLIT_PATTERN,
            mergeable_ranks=ranks,
            special_tokens=specials,
        )
        self.vocab_size = self._encoding.n_vocab
        self.eot_id = specials[eot]
        self.fingerprint = fingerprint(raw)

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids past the vocabulary (a padded model can sample them) decode to U+FFFD."""
        pieces = [
            self._encoding.decode_single_token_bytes(i) if i < self.vocab_size else REPLACEMENT
            for i in ids
        ]
        return b"".join(pieces).decode("utf-8", errors="replace")


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer read from a ``tokenizer.json``."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as Loaded

        raw = path.read_bytes()
        try:
            self._tokenizer = Loaded.from_str(raw.decode("utf-8"))
        except Exception as e:  # the library raises a bare Exception for a file it cannot parse
            raise ConfigError(
                f"{path} is not a tokenizer.json that Hugging Face tokenizers can read ({e}): "
                "point data.tokenizer at another file, or use data.tokenizer=bpe to train one"
            ) from e
        self.vocab_size = self._tokenizer.get_vocab_size()
        self.eot_id = self._tokenizer.token_to_id(EOT)
        self.fingerprint = fingerprint(raw)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

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
    return load_tokenizer_file(path)


def load_tokenizer_file(path: Path) -> Tokenizer:
    """A tokenizer file as it is: a ``.json`` is Hugging Face's format, anything else tiktoken's."""
    return HFTokenizer(path) if path.suffix == ".json" else TiktokenTokenizer(path)

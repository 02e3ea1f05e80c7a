"""The ``prepare`` command: a corpus of text files to token shards, once, before training.

``data.corpus`` names the text: ``builtin``, a UTF-8 file, or a folder, whose ``.txt`` and
``.md`` files (recursively, in sorted order) are the documents. Each document is tokenized
with ``data.tokenizer`` (``bpe`` is trained here first, on this corpus), followed by the
tokenizer's end-of-document token where it has one; the last ``data.val_fraction`` of the
tokens is the validation split, the rest the training split, as the in-memory path splits
them. The shards and their manifest go to ``data.prepared`` (see ``shards.py``).

Running it again on the same sources with the same tokenizer finds the manifest and does
nothing; anything else is prepared afresh.
"""

import hashlib
import logging
from array import array
from pathlib import Path

from tqdm import tqdm

from ..config import Config, ConfigError
from . import source_files
from .shards import DTYPES, MANIFEST, Manifest, dtype_for, write_shards
from .tokenizer import (
    ByteTokenizer,
    Tokenizer,
    check_vocab,
    load_tokenizer,
    tokenizer_path,
    train_bpe,
)

log = logging.getLogger(__name__)


def read_text(path: Path) -> tuple[str, dict]:
    """A document's text, undecodable bytes replaced by U+FFFD, and what the manifest says of
    its source."""
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    replaced = text.count("\ufffd") - raw.decode("utf-8", errors="ignore").count("\ufffd")
    if replaced:
        log.warning("%s: %d undecodable byte sequences, each replaced by U+FFFD", path, replaced)
    source = {
        "path": str(path),
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "replaced": replaced,
    }
    return text, source


def prepare(cfg: Config) -> dict:
    """Tokenize ``data.corpus`` into shards in ``data.prepared``; returns the summary line."""
    data = cfg.data
    if not data.prepared:
        raise ConfigError(
            "data.prepared is not set: give the folder for the shards, e.g. data.prepared=prepared"
        )
    out = Path(data.prepared)
    paths = source_files(data.corpus)
    documents, sources = zip(*(read_text(p) for p in paths), strict=True)
    if not any(documents):
        raise ConfigError(f"data.corpus {data.corpus}: the text is empty: nothing to train on")
    out.mkdir(parents=True, exist_ok=True)

    recipe = f"bpe:{cfg.model.vocab_size}" if data.tokenizer == "bpe" else data.tokenizer
    done = Manifest.read(out)
    if done and (done.sources, done.recipe) == (list(sources), recipe) and _unchanged(cfg, done):
        log.info("%s already holds these sources, tokenized the same way", out)
        return summary(out, done)

    staged = out / "tokenizer.new.json"  # a trained BPE, until its shards are written
    if data.tokenizer == "bpe":
        if cfg.model.vocab_size <= ByteTokenizer.vocab_size + 1:
            raise ConfigError(
                f"data.tokenizer=bpe with model.vocab_size = {cfg.model.vocab_size}: a BPE "
                "needs more entries than its 256 bytes and the end-of-document token; raise "
                "model.vocab_size (e.g. 8192)"
            )
        log.info("training a %d-entry BPE on %d documents", cfg.model.vocab_size, len(paths))
        tokenizer: Tokenizer = train_bpe(iter(documents), cfg.model.vocab_size, staged)
    else:
        tokenizer = load_tokenizer(data)
    check_vocab(tokenizer.vocab_size, cfg.model)

    (out / MANIFEST).unlink(missing_ok=True)  # from here on, the folder is an unfinished prepare
    dtype = dtype_for(tokenizer.vocab_size)
    ids = array(DTYPES[dtype][1])  # 2 or 4 bytes a token, not a Python int's 28
    with tqdm(total=len(documents), desc="prepare", unit="doc") as progress:
        for start in range(0, len(documents), 64):
            batch = list(documents[start : start + 64])
            for tokens in tokenizer.encode_batch(batch):
                ids.extend(tokens)
                if tokenizer.eot_id is not None:
                    ids.append(tokenizer.eot_id)
            progress.update(len(batch))
    split = len(ids) - int(len(ids) * data.val_fraction)
    splits = {
        "train": write_shards(out, "train", ids[:split], dtype),
        "val": write_shards(out, "val", ids[split:], dtype),
    }
    if data.tokenizer == "bpe":
        staged.replace(tokenizer_path(data))
    manifest = Manifest(
        tokenizer.fingerprint, recipe, tokenizer.vocab_size, dtype, splits, list(sources)
    )
    manifest.write(out)  # last: its presence says the shards are complete
    return summary(out, manifest)


def _unchanged(cfg: Config, manifest: Manifest) -> bool:
    """Whether the tokenizer file ``data.tokenizer`` names is still the one of ``manifest``."""
    try:
        return load_tokenizer(cfg.data).fingerprint == manifest.tokenizer
    except ConfigError:
        return False


def summary(out: Path, manifest: Manifest) -> dict:
    return {
        "prepared": str(out),
        "tokenizer": manifest.tokenizer,
        "vocab_size": manifest.vocab_size,
        "dtype": manifest.dtype,
        "train_tokens": manifest.tokens("train"),
        "val_tokens": manifest.tokens("val"),
        "replaced_bytes": sum(s["replaced"] for s in manifest.sources),
    }

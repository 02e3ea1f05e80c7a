"""The ``prepare`` command: a corpus to token shards, once, before training.

``data.corpus`` names the text: ``builtin``, a file, or a folder, whose ``.txt``, ``.md`` and
``.jsonl`` files (recursively, in sorted order) hold the documents: a text file is one, a JSONL
file one per line (see ``read_documents``). Each document is tokenized with ``data.tokenizer``
(``bpe`` is trained here first, on this corpus), followed by the tokenizer's end-of-document
token where it has one; the last ``data.val_fraction`` of the tokens is the validation split,
the rest the training split, as the in-memory path splits them. The shards and their manifest
go to ``data.prepared`` (see ``shards.py``).

The corpus is tokenized in parts: a text file is one, a JSONL file one per ~8 MB of its lines
(``pieces``). ``data.prepare_workers`` processes tokenize them, each part into a file of its own
(``parts-KEY/``, KEY naming the tokenizer and the corpus); the shards are then cut from the
parts in order, so any number of processes writes the same shards. An interrupted run leaves
its finished parts (and a BPE it trained) behind, and a rerun takes them up where it stopped.
Running it again on finished shards of the same sources and tokenizer does nothing; anything
else is prepared afresh. A large text file is still one part, tokenized by one process: a
JSONL file, or many files, spread the work. The processes are spawned: a script of your own
that calls ``prepare`` runs it under ``if __name__ == "__main__":``, as the ``prepare``
command does.
"""

import hashlib
import json
import logging
import os
import shutil
from array import array
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from tqdm import tqdm

from ..config import Config, ConfigError
from . import read_documents, source_files
from .shards import DTYPES, MANIFEST, Manifest, ShardWriter, dtype_for, write_atomic
from .tokenizer import (
    ByteTokenizer,
    Tokenizer,
    check_vocab,
    load_tokenizer,
    load_tokenizer_file,
    tokenizer_path,
    train_bpe,
)

log = logging.getLogger(__name__)
CHUNK = 1 << 24  # bytes copied from the parts into the shards at a time
# data.prepare_workers=0 starts a process (about two seconds) per this much text at most.
AUTO_BYTES_PER_WORKER = 8 << 20
PIECE_BYTES = 8 << 20  # a JSONL file is tokenized in pieces of about this size, cut at line ends


def describe(path: Path) -> dict:
    """What the manifest records of a source: its path, size and SHA-256."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def pieces(path: Path, size: int) -> list[tuple[int, int]]:
    """The byte ranges of a corpus file tokenized apart: a JSONL file in pieces of about
    ``PIECE_BYTES`` cut at line ends, so that processes share a large one; any other file,
    one document, whole. The cuts depend on the file alone, not on the processes."""
    cuts = [0]
    if path.suffix == ".jsonl":
        with path.open("rb") as f:
            while cuts[-1] + PIECE_BYTES < size:
                f.seek(cuts[-1] + PIECE_BYTES)
                f.readline()  # on to the end of the line the cut fell in
                if f.tell() >= size:
                    break
                cuts.append(f.tell())
    return list(zip(cuts, [*cuts[1:], size], strict=True))


def undecodable(path: Path, start: int, stop: int) -> int:
    """How many byte sequences of ``path[start:stop]`` are not UTF-8 (each read as U+FFFD)."""
    with path.open("rb") as f:
        f.seek(start)
        raw = f.read(stop - start)
    replaced = raw.decode("utf-8", errors="replace").count("\ufffd")
    return replaced - raw.decode("utf-8", errors="ignore").count("\ufffd")


@dataclass(frozen=True)
class Part:
    """The tokens of one file, or of bytes ``start`` to ``stop`` of a JSONL one: ``{name}.bin``
    (raw ids), then ``{name}.json`` once complete."""

    source: Path
    directory: Path
    name: str
    start: int
    stop: int

    @property
    def ids(self) -> Path:
        return self.directory / f"{self.name}.bin"

    @property
    def done(self) -> Path:
        return self.directory / f"{self.name}.json"

    def result(self) -> dict | None:
        """``{"tokens", "replaced"}`` of a finished part, None for one still to do."""
        return json.loads(self.done.read_text()) if self.done.is_file() else None


_worker_tokenizer: Tokenizer | None = None  # each process's, loaded once


def _use(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _load_worker(source: str) -> None:
    """A spawned process's tokenizer, from ``"byte"`` or the file's path."""
    _use(ByteTokenizer() if source == "byte" else load_tokenizer_file(Path(source)))


def tokenize_part(part: Part, dtype: str) -> dict:
    """Tokenize a part's documents, each ended by the end-of-document token where the
    tokenizer has one, into its part file; returns its ``{"tokens", "replaced"}``."""
    ids = array(DTYPES[dtype][1])  # 2 or 4 bytes a token
    eot = _worker_tokenizer.eot_id
    for text in read_documents(part.source, part.start, part.stop):
        ids.extend(_worker_tokenizer.encode(text))
        if eot is not None:
            ids.append(eot)
    write_atomic(part.ids, ids.tobytes())
    result = {"tokens": len(ids), "replaced": undecodable(part.source, part.start, part.stop)}
    write_atomic(part.done, json.dumps(result).encode())  # last: the part is complete
    return result


def prepare(cfg: Config) -> dict:
    """Tokenize ``data.corpus`` into shards in ``data.prepared``; returns the summary line."""
    data = cfg.data
    if not data.prepared:
        raise ConfigError(
            "data.prepared is not set: give the folder for the shards, e.g. data.prepared=prepared"
        )
    out = Path(data.prepared)
    paths = source_files(data.corpus)
    sources = [describe(p) for p in paths]
    if not any(s["bytes"] for s in sources):
        raise ConfigError(f"data.corpus {data.corpus}: the text is empty: nothing to train on")
    out.mkdir(parents=True, exist_ok=True)

    recipe = f"bpe:{cfg.model.vocab_size}" if data.tokenizer == "bpe" else data.tokenizer
    done = Manifest.read(out)
    if (
        done
        and (_sources(done.sources), done.recipe) == (sources, recipe)
        and _unchanged(cfg, done)
    ):
        log.info("%s already holds these sources, tokenized the same way", out)
        return summary(out, done)

    corpus_key = hashlib.sha256(json.dumps([recipe, sources]).encode()).hexdigest()[:16]
    staged = out / f"tokenizer.{corpus_key}.json"  # a trained BPE, until its shards are written
    if data.tokenizer == "bpe":
        if cfg.model.vocab_size <= ByteTokenizer.vocab_size + 1:
            raise ConfigError(
                f"data.tokenizer=bpe with model.vocab_size = {cfg.model.vocab_size}: a BPE "
                "needs more entries than its 256 bytes and the end-of-document token; raise "
                "model.vocab_size (e.g. 8192)"
            )
        if staged.is_file():
            log.info("resuming with the BPE trained on this corpus before: %s", staged)
        else:
            log.info("training a %d-entry BPE on %d files", cfg.model.vocab_size, len(paths))
            documents = (text for path in paths for text in read_documents(path))
            train_bpe(documents, cfg.model.vocab_size, staged)
        tokenizer_file = str(staged)
        tokenizer = load_tokenizer_file(staged)
    else:
        tokenizer_file = data.tokenizer
        tokenizer = load_tokenizer(data)
    check_vocab(tokenizer.vocab_size, cfg.model)

    (out / MANIFEST).unlink(missing_ok=True)  # from here on, the folder is an unfinished prepare
    dtype = dtype_for(tokenizer.vocab_size)
    key = hashlib.sha256(f"{tokenizer.fingerprint} {dtype}".encode()).hexdigest()[:16]
    directory = out / f"parts-{key}"
    directory.mkdir(exist_ok=True)
    parts, owners = [], []  # and the source each part is from
    for path, source in zip(paths, sources, strict=True):
        source["replaced"] = 0
        for start, stop in pieces(path, source["bytes"]):
            name = f"{len(parts):06d}-{source['sha256'][:16]}-{start}"
            parts.append(Part(path, directory, name, start, stop))
            owners.append(source)
    results = tokenize(parts, dtype, tokenizer, tokenizer_file, data.prepare_workers)
    for result, source in zip(results, owners, strict=True):
        source["replaced"] += result["replaced"]
    for source in sources:
        if source["replaced"]:
            log.warning(
                "%s: %d undecodable byte sequences, each replaced by U+FFFD",
                source["path"],
                source["replaced"],
            )

    total = sum(r["tokens"] for r in results)
    splits = write_splits(out, parts, total - int(total * data.val_fraction), dtype)
    if data.tokenizer == "bpe":
        staged.replace(tokenizer_path(data))
    manifest = Manifest(tokenizer.fingerprint, recipe, tokenizer.vocab_size, dtype, splits, sources)
    manifest.write(out)  # last: its presence says the shards are complete
    shutil.rmtree(directory)
    written = {name for shards in splits.values() for name, _ in shards}
    for stale in out.glob("*-[0-9][0-9][0-9][0-9][0-9].bin"):  # a bigger corpus's, before
        if stale.name not in written:
            stale.unlink()
    return summary(out, manifest)


def tokenize(
    parts: list[Part], dtype: str, tokenizer: Tokenizer, source: str, workers: int
) -> list[dict]:
    """Every part tokenized, the finished ones of an interrupted run kept; in order.

    In this process with ``tokenizer``, or in ``workers`` spawned ones that each load it from
    ``source`` (``"byte"`` or the file's path)."""
    results = [part.result() for part in parts]
    todo = [part for part, result in zip(parts, results, strict=True) if result is None]
    if len(todo) < len(parts):
        log.info(
            "resuming: %d of %d parts were tokenized before", len(parts) - len(todo), len(parts)
        )
    if not workers:  # one per CPU, as long as each has enough text to repay its start
        text = sum(part.stop - part.start for part in todo)
        workers = min(os.cpu_count() or 1, -(-text // AUTO_BYTES_PER_WORKER))
    workers = min(workers, len(todo))
    with tqdm(total=len(parts), initial=len(parts) - len(todo), desc="prepare", unit="part") as bar:
        if workers <= 1:
            _use(tokenizer)
            fresh = []
            for part in todo:
                fresh.append(tokenize_part(part, dtype))
                bar.update()
        else:
            # Spawned, not forked: the parent may hold the tokenizer library's threads.
            with ProcessPoolExecutor(
                workers, get_context("spawn"), initializer=_load_worker, initargs=(source,)
            ) as pool:
                fresh = []
                for result in pool.map(tokenize_part, todo, [dtype] * len(todo)):
                    fresh.append(result)
                    bar.update()
    done = iter(fresh)
    return [result if result is not None else next(done) for result in results]


def write_splits(
    out: Path, parts: list[Part], train_tokens: int, dtype: str
) -> dict[str, list[tuple[str, int]]]:
    """The parts, in order, cut into the training shards and then the validation shards."""
    writers = {"train": ShardWriter(out, "train", dtype), "val": ShardWriter(out, "val", dtype)}
    itemsize = DTYPES[dtype][0].itemsize
    room = train_tokens * itemsize  # bytes the training split still takes
    for part in parts:
        with part.ids.open("rb") as f:
            for block in iter(lambda f=f: f.read(CHUNK), b""):
                head = block[:room]
                writers["train"].write(head)
                writers["val"].write(block[len(head) :])
                room -= len(head)
    return {split: writer.close() for split, writer in writers.items()}


def _sources(recorded: list[dict]) -> list[dict]:
    """A manifest's sources as ``describe`` gives them, to compare with the corpus now."""
    return [{key: s[key] for key in ("path", "bytes", "sha256")} for s in recorded]


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

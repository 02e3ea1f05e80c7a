"""The test matrix: a pairwise covering array over the offered answer space.

Every pair of values of any two questions appears together in at least one variant, so each
choice is rendered at least once and every two-way interaction is exercised, with far fewer
renders than the full product. Combinations a rule refuses are skipped while the array is built
(greedy, deterministic: the same engine gives the same list).
"""

from __future__ import annotations

import itertools
from typing import Any

from .plan import AnswerError, resolve
from .questions import BY_KEY, QUESTIONS

Answers = dict[str, Any]

# Integer answers take a few representative values; the rest enumerate their offered choices.
NUMERIC_LEVELS: dict[str, tuple[Any, ...]] = {
    "gpus_per_node": (1, 2),
    "nodes": (1, 2),
    "latency_ms": (0.0, 5.0),
    "n_samples": (20_000, 5_000),  # either side of the small-table rule
}
# Answers whose other value stops the flow wherever it is asked: the negative tests cover it.
ONLY_GOING_ON: Answers = {"neural_anyway": (True,)}
FIXED: Answers = {"project_name": "variant"}
# Answers that make others valid: a layout that shards over several devices needs a device
# count that has them, a forecaster's SSM needs it to stream, and SSL pretraining a modality
# that has an objective for it. A value or a pair is offered where it is valid as it is or
# beside some of these.
ENABLING: tuple[Answers, ...] = ({"gpus_per_node": 2}, {"streaming": True}, {"modality": "image"})
# Answers that change only what their own files do, paired with the answers those files read
# and no others (a pair with the launcher or the tracker tests nothing the array does not).
# `quantization` sets the default method of `inference/quantize.py`, which every project
# renders and whose tests run every method a CPU can: what the answer adds is that method as
# the default of what loads the model for inference, on its accelerator, in its precision,
# through its modality's model and its deployment's loader.
PAIRED_ONLY_WITH: dict[str, tuple[str, ...]] = {
    "quantization": ("accelerator", "precision", "modality", "deployment"),
}
# Asked only for fp16, and then only `true` is valid: the negative tests cover `false`.
# more_capacity only moves ffn's default, and every row sets ffn itself.
SKIPPED = {"package_name", "seq_len", "loss_scaling", "more_capacity"}


def factors() -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for q in QUESTIONS:
        if q.computed or q.key in FIXED or q.key in SKIPPED:
            continue
        if q.key in NUMERIC_LEVELS:
            out[q.key] = NUMERIC_LEVELS[q.key]
        elif q.key in ONLY_GOING_ON:
            out[q.key] = ONLY_GOING_ON[q.key]
        elif q.type == "bool":
            out[q.key] = (False, True)
        elif q.choices:
            out[q.key] = tuple(q.offered_values())
    # A value no answer set can take is left to the negative tests.
    return {k: tuple(v for v in vs if offered({k: v})) for k, vs in out.items()}


def _valid(answers: Answers) -> bool:
    try:
        resolve(answers)
    except AnswerError:
        return False
    return True


def enabled(answers: Answers) -> Answers:
    """``answers`` with ``FIXED``, and with the fewest of ``ENABLING`` that make them valid
    (on two GPUs, streaming) where they are invalid without."""
    for count in range(len(ENABLING) + 1):
        for extra in itertools.combinations(ENABLING, count):
            trial = {**FIXED, **{k: v for e in extra for k, v in e.items()}, **answers}
            if _valid(trial):
                return trial
    return {**FIXED, **answers}


def offered(answers: Answers) -> bool:
    return _valid(enabled(answers))


def asked(key: str, answers: Answers) -> bool:
    """Whether the questionnaire asks ``key`` given ``answers`` (the tokenizer is a text
    question; an image's size is not): a value it never asks for has no pair to cover."""
    when = BY_KEY[key].when
    return when is None or when(resolve({**FIXED, **answers}, strict_keys=False, validate=False))


def paired(a: str, b: str) -> bool:
    """Whether the array covers the pairs of answers ``a`` and ``b`` (``PAIRED_ONLY_WITH``)."""
    return all(y in PAIRED_ONLY_WITH.get(x, (y,)) for x, y in ((a, b), (b, a)))


def pairs_of(answers: Answers, keys: list[str]) -> set[tuple[str, Any, str, Any]]:
    """The pairs of asked answers a row covers."""
    shown = [k for k in keys if k in answers and asked(k, answers)]
    return {
        (x, answers[x], y, answers[y]) for x, y in itertools.combinations(shown, 2) if paired(x, y)
    }


def covering_array() -> list[Answers]:
    levels = factors()
    keys = list(levels)
    uncovered = {
        (a, va, b, vb)
        for a, b in itertools.combinations(keys, 2)
        if paired(a, b)
        for va in levels[a]
        for vb in levels[b]
        if offered({a: va, b: vb})
        and asked(a, enabled({a: va, b: vb}))
        and asked(b, enabled({a: va, b: vb}))
    }
    rows: list[Answers] = []
    while uncovered:
        # Seed with the first uncovered pair, then fill each factor with the value that covers
        # the most remaining pairs while keeping the row valid.
        a, va, b, vb = min(uncovered, key=repr)
        row: Answers = {k: v for k, v in enabled({a: va, b: vb}).items() if k not in FIXED}
        for key in keys:
            if key in row or not asked(key, row):
                continue
            best, best_gain = None, -1
            for value in levels[key]:
                trial = {**FIXED, **row, key: value}
                if not _valid(trial):
                    continue
                gain = sum(
                    (k, trial[k], key, value) in uncovered or (key, value, k, trial[k]) in uncovered
                    for k in row
                )
                if gain > best_gain:
                    best, best_gain = value, gain
            if best is not None:
                row[key] = best
        full = {**FIXED, **row}
        if not _valid(full):
            uncovered.discard((a, va, b, vb))
            continue
        uncovered -= pairs_of(full, keys)
        rows.append(full)
    return rows


# What the slow tests of a rendered project (marked `slow`: the profile, the CLI, checkpoints
# and resume on one rank and on two, gradient accumulation and async saves across ranks,
# training quality, pretraining) depend on. A variant whose suite runs whole is one of a
# subset of the array that still holds every pair of these; the others run their fast tests:
# the model's numbers against references, shapes, config rules, and the distributed equality
# with one process (and a two-rank checkpoint resumed in one) and the compiled equality with
# eager wherever they are rendered.
SLOW_TEST_FACTORS = (
    "modality",
    "parallelism",
    "precision",
    "compile_mode",
    "activation_checkpointing",
    "ffn",
    "objective",
    "streaming",
)


# One process trains a tensor-parallel or pipelined project as it trains an FSDP2 one (the
# mesh is for the ranks torchrun starts), and the slow tests run in one process, but for the
# layout's own (more ranks, compiled stages, checkpoints across meshes). A layout listed here
# pairs with the other factors as the layout it runs as in one process, and its own slow
# tests run in one whole suite; its fast tests, two-rank equality with one process included,
# run in every row that renders it, whatever the precision, compilation or checkpointing.
SLOW_AS = {"fsdp2_tp": "fsdp2", "fsdp2_tp_pp": "fsdp2"}


def slow_pairs(answers: Answers) -> set[tuple[str, Any, str, Any]]:
    """The pairs of SLOW_TEST_FACTORS a resolved row holds (a question it does not ask
    holds none), and the layout alone where it is one of SLOW_AS."""
    keys = [k for k in SLOW_TEST_FACTORS if BY_KEY[k].computed or asked(k, answers)]
    layout = answers["parallelism"]
    seen = {k: SLOW_AS.get(layout, layout) if k == "parallelism" else answers[k] for k in keys}
    pairs = {(a, seen[a], b, seen[b]) for a, b in itertools.combinations(keys, 2)}
    if layout in SLOW_AS:
        pairs.add(("parallelism", layout, "parallelism", layout))
    return pairs


# A SLOW_AS layout's whole suite runs its multi-rank tests besides the rest: about twice the
# time of another's. The greedy choice weighs a row's new pairs by it.
SLOW_AS_COST = 2


def full_suites(rows: list[Answers]) -> list[int]:
    """The rows whose suites run whole: a greedy subset holding every pair of
    SLOW_TEST_FACTORS the rows hold, the row that adds the most per unit of cost first (ties
    to the first)."""
    resolved = [resolve(row) for row in rows]
    pairs = [slow_pairs(answers) for answers in resolved]
    cost = [SLOW_AS_COST if a["parallelism"] in SLOW_AS else 1 for a in resolved]
    left = set().union(*pairs)
    chosen: list[int] = []
    while left:
        best = max(range(len(rows)), key=lambda i: (len(pairs[i] & left) / cost[i], -i))
        chosen.append(best)
        left -= pairs[best]
    return sorted(chosen)


def variant_name(index: int, answers: Answers) -> str:
    """``v07-ddp-bf16-compile``: the layout, precision and graph mode the row resolves to."""
    resolved = resolve(answers)
    parts = [resolved[k] for k in ("parallelism", "precision", "graph_mode")]
    return f"v{index:02d}-" + "-".join(str(p) for p in parts)

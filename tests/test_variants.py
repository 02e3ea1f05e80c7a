"""Test-builds of the pairwise covering array: render, lint, and run each project's own tests.

`tmd variants` lists the same matrix. Each variant is rendered by real copier from the working
tree, must be ruff-clean and ruff-formatted with the project's own settings, must hold no
template residue, and must pass its own test suite on this CPU-only machine: whole for the
variants of `full_suites` (which hold every pair of the answers the slow tests depend on), and
without the tests marked `slow` for the others.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from copier import run_copy

from tmd.plan import explain, resolve
from tmd.questions import BY_KEY
from tmd.variants import (
    PAIRED_ONLY_WITH,
    asked,
    covering_array,
    enabled,
    factors,
    full_suites,
    offered,
    paired,
    slow_pairs,
    variant_name,
)

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = covering_array()
FULL = full_suites(VARIANTS)
RESIDUE = re.compile(r"\{\{|\{%|%\}|\{#|#\}")
TEXT_SUFFIXES = {".py", ".toml", ".md", ".sh", ".sbatch", ".yaml", ".yml", ".txt", ".cfg", ""}


def test_every_pair_of_choices_is_covered():
    """Every pair of values two asked questions can take together (modality against every
    other answer included); a question the modality does not ask, such as an image model's
    tokenizer, has no value to pair, and an answer of ``PAIRED_ONLY_WITH`` pairs with the
    answers named there, but every one of its values is still rendered."""
    levels = factors()
    rows = [{k: resolve(v)[k] for k in levels} for v in VARIANTS]
    for key in PAIRED_ONLY_WITH:
        assert set(levels[key]) <= {r[key] for r in rows}, key
    for a, b in itertools.combinations(levels, 2):
        if not paired(a, b):
            continue
        for va, vb in itertools.product(levels[a], levels[b]):
            try:
                answers = resolve(enabled({a: va, b: vb}))
            except ValueError:
                continue  # a rule refuses the pair outright, on one GPU and on two
            if not (asked(a, answers) and asked(b, answers)):
                continue
            assert any(r[a] == va and r[b] == vb and asked(a, r) and asked(b, r) for r in rows), (
                a,
                va,
                b,
                vb,
            )


@pytest.mark.parametrize(
    "modality", [m for m in BY_KEY["modality"].offered_values() if m != "text"]
)
def test_modality_meets_every_other_answer(modality):
    """Every value a modality's project can take appears in one of its variants."""
    assert modality in {v["modality"] for v in VARIANTS}
    for key, values in factors().items():
        if key == "modality" or not asked(key, {"modality": modality}):
            continue
        seen = {resolve(v)[key] for v in VARIANTS if v["modality"] == modality}
        assert seen == {v for v in values if offered({"modality": modality, key: v})}, key


def test_every_offered_choice_appears():
    for key, values in factors().items():
        seen = {resolve(v)[key] for v in VARIANTS}
        assert set(values) <= seen, key


def render(answers: dict, dest: Path) -> Path:
    asked = {k: v for k, v in answers.items() if not BY_KEY[k].computed}
    run_copy(
        str(ROOT), str(dest), data=asked, defaults=True, unsafe=True, vcs_ref="HEAD", quiet=True
    )
    return dest


def residue(project: Path) -> list[str]:
    hits = []
    for path in project.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES and ".git" not in path.parts:
            if path.name == "corpus.jsonl":
                continue
            text = path.read_text(errors="replace")
            if RESIDUE.search(text):
                hits.append(str(path.relative_to(project)))
    return hits


def _run(cmd, cwd, env=None, timeout=900):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def test_the_full_suites_hold_every_pair_the_slow_tests_depend_on():
    held = set().union(*(slow_pairs(resolve(VARIANTS[i])) for i in FULL))
    assert held == set().union(*(slow_pairs(resolve(v)) for v in VARIANTS))
    assert len(FULL) < len(VARIANTS)


@pytest.mark.variant
@pytest.mark.parametrize(
    ("index", "answers"),
    list(enumerate(VARIANTS)),
    ids=[variant_name(i, v) + ("" if i in FULL else "-fast") for i, v in enumerate(VARIANTS)],
)
def test_variant_builds_and_passes_its_own_tests(tmp_path, index, answers):
    # A long project name, so that the lint sees the longest lines a package name makes.
    project = render(answers, tmp_path / "a-model-whose-name-makes-lines-long")
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    resolved = resolve(answers)
    for key, value in recorded.items():
        if not key.startswith("_"):
            assert value == resolved[key], key  # copier's defaults are the engine's

    design = (project / "DESIGN.md").read_text()
    for row in explain(resolved).rows:
        assert f"| {row.decision} | {row.choice}" in design

    assert residue(project) == []
    lint = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], project)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], project)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr

    env = dict(os.environ, PYTHONPATH=str(project / "src"), PYTHONDONTWRITEBYTECODE="1")
    fast = [] if index in FULL else ["-m", "not slow"]
    tests = _run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *fast], project, env
    )
    assert tests.returncode == 0, failure_report(tests)


def failure_report(tests: subprocess.CompletedProcess) -> str:
    """The end of a failed suite's output without its captured DEBUG records (torch's tracing
    can fill every line the report has room for), so the failing test and its assertion show."""
    kept = [line for line in tests.stdout.splitlines() if "DEBUG " not in line[:40]]
    return "\n".join(kept)[-6000:] + tests.stderr[-3000:]


def test_variant_names_show_the_resolved_layout():
    for i, answers in enumerate(VARIANTS):
        resolved = resolve(answers)
        expected = f"{resolved['parallelism']}-{resolved['precision']}-{resolved['graph_mode']}"
        assert variant_name(i, answers) == f"v{i:02d}-{expected}"

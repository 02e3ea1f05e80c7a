"""The user guide agrees with the engine.

Every question belongs to one page; every choice of a question is a row of that page's
`| Choice | What it generates | When the rule picks it |` table, marked *not rendered yet* exactly
when the engine has it `offered=False`; the presets' shapes and parameter counts, the worked
memory example, the quoted thresholds and every refusal shown in a console block are what the
engine computes. A new question, a new choice, a choice that becomes rendered or a changed number
makes one of these fail until the docs say so.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from tmd import rules
from tmd.cli import parse_data
from tmd.hardware import ACCELERATORS, USABLE_MEMORY_FRACTION
from tmd.memory import STATE_BYTES_PER_PARAM
from tmd.plan import AnswerError, explain, resolve
from tmd.presets import PRESETS, count_params, kv_heads_for
from tmd.questions import BY_KEY, Question
from tmd.report import memory_report

DOCS = Path(__file__).resolve().parents[1] / "docs"

# page -> the questions it documents (asked, advanced and derived alike).
PAGES: dict[str, tuple[str, ...]] = {
    "index.md": ("project_name", "package_name"),
    "graph-mode.md": ("stage", "control_flow", "graph_mode", "compile_mode"),
    "architecture.md": (
        "modality",
        "model_size",
        "tokenizer",
        "seq_len",
        "attention",
        "position",
        "norm",
        "qk_norm",
        "more_capacity",
        "ffn",
        *rules.SHAPE_KEYS,
        "window_size",
        "kv_latent_dim",
        "n_experts",
        "top_k",
        "capacity_factor",
        "ssm_state_dim",
        "param_count",
        "block_bytes",
        "block_bytes_sharded",
        "batch_size",
        "train_steps",
        "tokens_per_step",
        "grad_accum_steps",
    ),
    "precision.md": ("accelerator", "precision", "loss_scaling", "capacity_bytes"),
    "parallelism.md": (
        "gpus_per_node",
        "nodes",
        "world_size",
        "tp_degree",
        "pp_degree",
        "capacity_bytes",
        "parallelism",
        "context_parallel",
        "dp_replicate",
        "dp_shard",
        "tp",
        "pp",
        "dp_degree",
        "pp_schedule",
        "pp_microbatches",
        "activation_checkpointing",
        "memory_gb",
    ),
    "deployment.md": ("deployment", "quantization", "speculative", "latency_ms", "distill"),
    "operations.md": ("launcher", "tracking"),
    "updating.md": (),
    "rules-in-copier.md": (),
    "modalities.md": (
        "image_size",
        "patch_size",
        "n_classes",
        "pooling",
        "context_len",
        "patch_len",
        "horizon",
        "n_channels",
        "streaming",
        "unlabeled",
        "objective",
        "prediction",
        "n_samples",
        "neural_anyway",
    ),
}

CHOICE_HEADER = "| Choice | What it generates | When the rule picks it |"
NOT_RENDERED = "not rendered yet"


def text(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def spelled(value) -> str:
    """A value as a person types it in --data and as the docs show it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def values_of(question: Question) -> list:
    if question.choices:
        return question.values()
    if question.type == "bool":
        return [False, True]
    return []


def offered(question: Question, value) -> bool:
    return not question.choices or value in question.offered_values()


def choice_pages() -> list[tuple[str, str]]:
    """Asked questions with a fixed set of values (derived flags have no table of their own)."""
    return [
        (page, key)
        for page, keys in PAGES.items()
        for key in keys
        if values_of(BY_KEY[key]) and not BY_KEY[key].computed
    ]


def section(page: str, key: str) -> list[str]:
    """The lines under the first heading that names `key`, up to the next heading as high."""
    lines = text(page).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and f"`{key}`" in line:
            level = len(line) - len(line.lstrip("#"))
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if lines[j].startswith("#")
                    and len(lines[j]) - len(lines[j].lstrip("#")) <= level
                ),
                len(lines),
            )
            return lines[i + 1 : end]
    raise AssertionError(f"{page}: no heading names `{key}`")


def table(lines: list[str], header: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first table in `lines` whose header starts so."""
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"no table with header {header!r}")


# --------------------------------------------------------------------------- coverage


def test_every_question_has_a_page():
    documented = {key for keys in PAGES.values() for key in keys}
    assert documented == set(BY_KEY), (
        f"undocumented: {sorted(set(BY_KEY) - documented)}; "
        f"no longer in the engine: {sorted(documented - set(BY_KEY))}"
    )


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_exists_and_names_its_questions(page):
    body = text(page)
    for key in PAGES[page]:
        assert f"`{key}`" in body, f"{page} never names `{key}`"


@pytest.mark.parametrize(("page", "key"), choice_pages(), ids=lambda x: x)
def test_every_choice_is_on_its_page(page, key):
    body = text(page)
    for value in values_of(BY_KEY[key]):
        assert f"`{spelled(value)}`" in body, f"{page}: {key} value `{spelled(value)}` missing"


@pytest.mark.parametrize(("page", "key"), choice_pages(), ids=lambda x: x)
def test_choice_table_matches_the_engine(page, key):
    question = BY_KEY[key]
    rows = table(section(page, key), CHOICE_HEADER)
    listed = [row[0] for row in rows]
    expected = [f"`{spelled(v)}`" for v in values_of(question)]
    assert sorted(listed) == sorted(expected), f"{page} `{key}` table: {listed} != {expected}"
    by_value = dict(zip(listed, rows, strict=True))
    for value in values_of(question):
        row = " | ".join(by_value[f"`{spelled(value)}`"])
        marked = NOT_RENDERED in row
        assert marked == (not offered(question, value)), (
            f"{page} `{key}={spelled(value)}`: marked not rendered={marked}, "
            f"engine offered={offered(question, value)}"
        )
        if not callable(question.default):
            is_default = value == question.default
            assert ("Default." in row) == is_default, (
                f"{page} `{key}={spelled(value)}`: 'Default.' must mark exactly the default "
                f"{spelled(question.default)}"
            )


# --------------------------------------------------------------------------- numbers


def rounded(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n < 1e9 else f"{n / 1e9:.2f}B"


def test_preset_shapes_match_the_engine():
    rows = table(text("architecture.md").splitlines(), "| Preset | dim |")
    assert [r[0] for r in rows] == [f"`{n}`" for n in PRESETS]
    for row, (name, preset) in zip(rows, PRESETS.items(), strict=True):
        seq_len = resolve({"model_size": name}, validate=False)["seq_len"]
        s = preset.shape
        expected = [
            s.dim,
            s.n_layers,
            s.n_heads,
            s.n_kv_heads,
            s.ffn_hidden_dim,
            s.vocab_size,
            preset.batch_size,
            preset.train_steps,
            seq_len,
            preset.tokens_per_step,
        ]
        assert [int(c) for c in row[1:]] == expected, name


PARAMS = re.compile(r"^([\d,]+) \((\d+(?:\.\d+)?[MB])\)$")


def test_parameter_counts_match_count_params():
    rows = table(text("architecture.md").splitlines(), "| Preset | gqa (preset) | mha | mqa |")
    assert [r[0] for r in rows] == [f"`{n}`" for n in PRESETS]
    for row, (name, preset) in zip(rows, PRESETS.items(), strict=True):
        for cell, attention in zip(row[1:], ("gqa", "mha", "mqa"), strict=True):
            shape = replace(preset.shape, n_kv_heads=kv_heads_for(preset, attention))
            n = count_params(shape)
            match = PARAMS.match(cell)
            assert match, f"{name}/{attention}: {cell!r} is not 'N,NNN (X.XM)'"
            assert int(match.group(1).replace(",", "")) == n, f"{name}/{attention}"
            assert match.group(2) == rounded(n), f"{name}/{attention}"


def test_mechanism_parameter_table_matches_count_params():
    rows = table(text("architecture.md").splitlines(), "| Mechanism | tiny | small |")
    expected = [
        f"`{key}={spelled(v)}`"
        for key in ("attention", "position", "norm", "ffn")
        for v in BY_KEY[key].values()
    ]
    assert sorted(r[0] for r in rows) == sorted(expected)
    for row in rows:
        key, value = row[0].strip("`").split("=")
        for cell, size in zip(row[1:], ("tiny", "small"), strict=True):
            answers = resolve({"model_size": size, key: value}, validate=False)
            n = count_params(rules.shape_of(answers))
            match = PARAMS.match(cell)
            assert match, f"{row[0]}/{size}: {cell!r} is not 'N,NNN (X.XM)'"
            assert int(match.group(1).replace(",", "")) == n, f"{row[0]}/{size}"
            assert match.group(2) == rounded(n), f"{row[0]}/{size}"


WORKED = {"model_size": "large", "gpus_per_node": "8"}


def test_worked_memory_example_is_what_tmd_plan_prints():
    body = text("parallelism.md")
    assert "tmd plan --data model_size=large --data gpus_per_node=8" in body
    report = memory_report(explain(resolve(dict(WORKED))))
    for line in report.splitlines():
        if line.strip():
            assert line in body, f"parallelism.md lacks the plan line {line!r}"
    answers = resolve(dict(WORKED))
    assert f"`memory_gb` is `{answers['memory_gb']}`" in body
    assert f"picks `{answers['parallelism']}`" in body
    assert f"picks `{answers['activation_checkpointing']}`" in body


def test_quoted_thresholds_are_the_engines():
    quotes = {
        "architecture.md": [f"{rules.LONG_SEQUENCE} tokens", f"`seq_len` > {rules.LONG_SEQUENCE}"],
        "parallelism.md": [
            f"`seq_len` > {rules.CONTEXT_PARALLEL_SEQUENCE}",
            f"`n_layers` ≥ {rules.DEEP_MODEL_LAYERS}",
            f"min(gpus_per_node, {rules.MAX_TP_DEGREE})",
            f"{STATE_BYTES_PER_PARAM} bytes per parameter",
            f"{USABLE_MEMORY_FRACTION:.0%}",
        ],
        "precision.md": [f"{USABLE_MEMORY_FRACTION:.0%}"],
        "deployment.md": [f"0 < `latency_ms` < {rules.DISTILL_LATENCY_MS}"],
    }
    for page, snippets in quotes.items():
        body = text(page)
        for snippet in snippets:
            assert snippet in body, f"{page} lacks {snippet!r}"


def test_accelerator_budgets_are_the_engines():
    rows = table(section("precision.md", "accelerator"), CHOICE_HEADER)
    by_name = {row[0].strip("`"): " | ".join(row) for row in rows}
    for name, acc in ACCELERATORS.items():
        if acc.memory_gb is None:
            assert "No fixed memory budget" in by_name[name]
        else:
            usable = acc.memory_gb * USABLE_MEMORY_FRACTION
            assert f"{usable:.1f} GB usable" in by_name[name], name
        assert ("no fp8" in by_name[name] or "fp8 refused" in by_name[name]) == (not acc.fp8)


# --------------------------------------------------------------------------- refusals


def console_examples() -> list[tuple[str, str, str]]:
    """(page, command, message) for every `$ tmd plan ...` / `tmd: error: ...` pair."""
    found = []
    for path in sorted(DOCS.glob("*.md")):
        blocks = re.findall(r"```console\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
        for block in blocks:
            lines = block.strip().splitlines()
            for cmd, out in zip(lines, lines[1:], strict=False):
                if cmd.startswith("$ tmd plan") and out.startswith("tmd: error: "):
                    found.append((path.name, cmd[2:], out.removeprefix("tmd: error: ")))
    return found


def test_console_blocks_hold_refusals():
    assert len(console_examples()) >= 10


@pytest.mark.parametrize(("page", "command", "message"), console_examples(), ids=lambda x: x)
def test_refusal_shown_is_the_engines_message(page, command, message):
    argv = shlex.split(command)[2:]
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--data", "-d")]
    with pytest.raises(AnswerError) as err:
        resolve(parse_data(pairs, None))
    assert str(err.value) == message


# --------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    title = heading.lstrip("#").strip().lower()
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def test_index_links_every_page():
    index = text("index.md")
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    assert set(pages) == set(PAGES) - {"index.md"}
    for page in pages:
        assert f"]({page})" in index, f"index.md does not link {page}"


def test_links_between_pages_resolve():
    for path in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([\w\-]+\.md)(?:#([\w\-]+))?\)", path.read_text()):
            page, anchor = target
            assert (DOCS / page).is_file(), f"{path.name} links missing {page}"
            if anchor:
                anchors = {slug(h) for h in text(page).splitlines() if h.startswith("#")}
                assert anchor in anchors, f"{path.name} links {page}#{anchor}, not a heading"

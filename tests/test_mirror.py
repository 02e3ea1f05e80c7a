"""copier.yml's Jinja and the engine's Python agree, rule by rule, over the answer space.

Three layers: the committed copier.yml is exactly what the engine generates; every Jinja default
and validator renders what its Python twin returns, over a grid of every enumerated value and
boundary numbers (including combinations the validators refuse); and copier-order resolution
from Jinja alone gives the same answers or the same first error as `tmd.plan.resolve`.
"""

from __future__ import annotations

import itertools
import random

import pytest

from jinja_answers import FOLDER, cast, copier_questions, render
from jinja_answers import resolve as jinja_resolve
from tmd import copier_yml
from tmd.plan import AnswerError, explain, resolve
from tmd.questions import BY_KEY, QUESTIONS

GRID = {
    "model_size": ["tiny", "small", "medium", "large", "xl"],
    "accelerator": ["cpu", "a100", "h100", "h200", "b200"],
    "precision": ["fp32", "bf16", "fp16", "fp8"],
    "gpus_per_node": [1, 2, 4, 8],
    "nodes": [1, 2, 4],
    "seq_len": [256, 4096, 40000],
    "attention": ["mha", "gqa", "mqa"],
}
CHOICE_KEYS = ["parallelism", "activation_checkpointing"]
ARCH_GRID = {
    "model_size": ["tiny", "small", "medium", "large", "xl"],
    "attention": ["mha", "gqa", "mqa", "sliding_window", "mla", "ssm"],
    "position": ["rope", "alibi", "learned", "none"],
    "norm": ["rmsnorm", "layernorm"],
    "ffn": ["swiglu", "gelu", "moe"],
    "qk_norm": [False, True],
    "seq_len": [256, 4096],
}


def test_copier_yml_is_generated_from_the_engine():
    assert copier_yml.sync(check=True), "copier.yml is stale: run `tmd sync`"


def test_every_question_has_help_and_copier_has_every_engine_key():
    spec = copier_questions()
    for q in QUESTIONS:
        assert q.key in spec and spec[q.key]["help"].strip()


def _grid(grid=GRID):
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        yield dict(zip(keys, values, strict=True))


def _picks(answers):
    return {
        f"suggested_{q.key}": q.default(answers).choice
        for q in QUESTIONS
        if q.decision and callable(q.default)
    }


def _compare(answers):
    spec = copier_questions()
    for q in QUESTIONS:
        if callable(q.default) or q.default_jinja:
            context = {**FOLDER, **answers, **_picks(answers)}
            got = cast(q.type, render(spec[q.key]["default"], context))
            assert got == q.default_for(answers), (q.key, answers)
        if q.decision and callable(q.default):  # the rule's own pick, before any fallback
            pick = cast(q.type, render(spec[f"suggested_{q.key}"]["default"], answers))
            assert pick == q.default(answers).choice, (q.key, answers)
        if q.validator:
            assert render(spec[q.key]["validator"], answers).strip() == (
                q.validator(answers) or ""
            ), (
                q.key,
                answers,
            )


def test_defaults_and_validators_agree_on_the_grid():
    for combo in _grid():
        _compare(resolve(combo, validate=False))


def test_every_architecture_agrees():
    """Parameter counts, activation sizes and the architecture rules, for every mechanism."""
    for combo in _grid(ARCH_GRID):
        _compare(resolve({**combo, "accelerator": "cpu"}, validate=False))


def test_every_layout_choice_agrees_not_just_the_suggested_one():
    rng = random.Random(1)
    combos = list(_grid())
    for combo in rng.sample(combos, 400):
        for key in CHOICE_KEYS:
            for value in BY_KEY[key].values():
                _compare(resolve({**combo, key: value}, validate=False))


@pytest.mark.parametrize(
    "override",
    [
        {"n_kv_heads": 3},
        {"n_heads": 5},
        {"n_heads": 128},
        {"dim": 0},
        {"vocab_size": 100},
        {"tokenizer": "bpe", "vocab_size": 257},
        {"tokenizer": "bpe", "model_size": "tiny"},
        {"tokenizer": "byte", "model_size": "large"},
        {"tokenizer": "file", "vocab_size": 50257},
        {"seq_len": 0},
        {"package_name": "../x"},
        {"package_name": "class"},
        {"package_name": "9lives"},
        {"package_name": "my-pkg"},
        {"package_name": ""},
        {"project_name": "My Fancy Model!"},
        {"latency_ms": -1.0},
        {"latency_ms": 3.0},
        {"speculative": True},
        {"precision": "fp16", "loss_scaling": False},
        {"gpus_per_node": 0},
        {"attention": "sliding_window", "window_size": 256},
        {"attention": "sliding_window", "window_size": 0},
        {"ffn": "moe", "top_k": 9},
        {"ffn": "moe", "n_experts": 1},
        {"ffn": "moe", "capacity_factor": 0.0},
        {"attention": "mla", "position": "alibi"},
        {"attention": "ssm", "position": "rope"},
        {"attention": "ssm", "deployment": "server"},
        {"quantization": "fp8", "accelerator": "a100"},
        {"speculative": True, "deployment": "onnx"},
    ],
)
def test_edge_answers_agree(override):
    _compare(resolve(override, validate=False))


def _first_error(given):
    try:
        return resolve(given), None
    except AnswerError as err:
        return None, (err.key, str(err))


def test_copier_order_resolution_matches_the_engine():
    rng = random.Random(0)
    space = {q.key: q.values() for q in QUESTIONS if q.choices and not q.computed}
    space.update(
        control_flow=[False, True],
        qk_norm=[False, True],
        speculative=[False, True],
        gpus_per_node=[1, 2, 8],
        nodes=[1, 2],
        seq_len=[256, 2048, 9000],
        vocab_size=[256, 1000, 50257],
    )
    for _ in range(600):
        given = {k: rng.choice(v) for k, v in space.items() if rng.random() < 0.5}
        answers, error = _first_error(given)
        j_answers, j_error = jinja_resolve(given)
        assert error == j_error, given
        if error is None:
            for key, value in answers.items():
                assert j_answers[key] == value, (key, given)
            rows = [vars(r) for r in explain(answers).rows]
            assert j_answers["design"] == rows
            assert j_answers["design_notes"] == explain(answers).notes, given


def test_the_answers_file_records_every_preset_override():
    """Derived values are not recorded by copier; the answers file must list each one a person
    can override, or `copier update` would silently reset it to the preset."""
    from jinja_answers import ROOT

    text = (ROOT / "template" / "{{_copier_conf.answers_file}}.jinja").read_text()
    for q in QUESTIONS:
        if q.advanced:
            assert f"('{q.key}', {q.key}, preset_{q.key})" in text, q.key

"""copier.yml resolves answers as the engine does.

The committed copier.yml is exactly what the engine generates, and resolving it in copier's order
(defaults and validators rendered through the template's Jinja extension, `when`, casting, the
choices' own validators) gives the same answers, or the same first refusal, as
`tmd.plan.resolve`, over random answer sets and the edge cases each rule guards.
"""

from __future__ import annotations

import random

import pytest

from jinja_answers import copier_questions
from jinja_answers import resolve as jinja_resolve
from tmd import copier_yml
from tmd.plan import AnswerError, explain, resolve
from tmd.questions import QUESTIONS


def test_copier_yml_is_generated_from_the_engine():
    assert copier_yml.sync(check=True), "copier.yml is stale: run `tmd sync`"


def test_every_question_has_help_and_copier_has_every_engine_key():
    spec = copier_questions()
    for q in QUESTIONS:
        assert q.key in spec and spec[q.key]["help"].strip()


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
        {"quantization": "int4_weight_only", "accelerator": "cpu"},
        {"quantization": "int4_weight_only", "accelerator": "a100"},
        {"quantization": "int8_dynamic", "modality": "image"},
        {"speculative": True, "deployment": "onnx"},
    ],
)
def test_edge_answers_agree(override):
    """Refusals and the values around them come out of copier.yml as out of the engine."""
    answers, error = _first_error(override)
    j_answers, j_error = jinja_resolve(override)
    assert error == j_error, override
    if error is None:
        assert {k: j_answers[k] for k in answers} == answers


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

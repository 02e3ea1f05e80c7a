"""The guided flow: the questions it asks, the defaults it offers, the choices it disables.

questionary is replaced by a scripted stand-in that records every prompt; the flow's logic
(order, defaults chained from earlier answers, rules shown as disabled choices) is what is tested.
"""

from __future__ import annotations

import types

import pytest

from tmd import flow
from tmd.plan import resolve


class Script:
    """Answers prompts from a dict (by question key prefix), else takes the offered default."""

    def __init__(self, replies: dict[str, object]):
        self.replies = replies
        self.prompts: list[dict] = []

    def _reply(self, message, default, **extra):
        key = next((k for k in self.replies if message.startswith(k)), None)
        self.prompts.append({"message": message, "default": default, **extra})
        value = self.replies[key] if key else default
        return types.SimpleNamespace(unsafe_ask=lambda: value)

    def select(self, message, choices, default=None):
        return self._reply(message, default.value if default else None, choices=choices)

    def confirm(self, message, default):
        return self._reply(message, default)

    def text(self, message, default, validate):
        self.prompts.append({"message": message, "default": default, "validate": validate})
        key = next((k for k in self.replies if message.startswith(k)), None)
        value = str(self.replies[key]) if key else default
        assert validate(value) is True
        return types.SimpleNamespace(unsafe_ask=lambda: value)

    @staticmethod
    def Choice(title, value, disabled=None):  # noqa: N802 - mirrors questionary.Choice
        return types.SimpleNamespace(title=title, value=value, disabled=disabled)


@pytest.fixture
def script(monkeypatch):
    def install(replies):
        fake = Script(replies)
        monkeypatch.setattr("questionary.select", fake.select)
        monkeypatch.setattr("questionary.confirm", fake.confirm)
        monkeypatch.setattr("questionary.text", fake.text)
        monkeypatch.setattr("questionary.Choice", fake.Choice)
        return fake

    return install


def test_taking_every_default_gives_the_engine_defaults(script):
    fake = script({})
    assert resolve(flow.guided({})) == resolve({})
    asked = [p["message"].split(":")[0] for p in fake.prompts]
    assert (
        "Does the model have data-dependent control flow (early exit, variable-length loops, conditional layers)?"
        in asked
    )
    assert not any(m.startswith(("world_size", "dim", "memory_gb")) for m in asked)


def test_earlier_answers_steer_later_defaults(script, capsys):
    fake = script({"Is the architecture": "production", "model_size": "large", "gpus_per_node": 8})
    answers = resolve(flow.guided({}))
    assert answers["graph_mode"] == "max_autotune"
    assert answers["parallelism"] == "fsdp2"
    graph = next(p for p in fake.prompts if p["message"].startswith("graph_mode"))
    assert graph["default"] == "max_autotune"
    out = capsys.readouterr().out
    assert "Does it fit on one GPU? ~" in out and "does not fit" in out


def test_rules_show_as_disabled_choices(script):
    fake = script({"accelerator": "a100"})
    flow.guided({})
    precision = next(p for p in fake.prompts if p["message"].startswith("precision"))
    fp8 = next(c for c in precision["choices"] if c.value == "fp8")
    assert "fp8 needs fp8 tensor cores, which a100 lacks" in fp8.disabled
    parallelism = next(p for p in fake.prompts if p["message"].startswith("parallelism"))
    by_value = {c.value: c.disabled for c in parallelism["choices"]}
    assert by_value["single"] is None
    assert "needs at least 2 GPUs" in by_value["ddp"]


def test_a_bad_number_is_refused_at_the_prompt(script):
    fake = script({})
    flow.guided({})
    seq = next(p for p in fake.prompts if p["message"].startswith("seq_len"))
    assert "positive number of tokens" in seq["validate"]("0")
    assert "expects a whole number" in seq["validate"]("many")

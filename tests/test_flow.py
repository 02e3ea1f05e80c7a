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


# ----------------------------------------------------------------------------- a real terminal


class Terminal:
    """`tmd new` on a pseudo-terminal, answered keystroke by keystroke like a person would."""

    PROMPT = b"\x1b[?2004h"  # prompt_toolkit switches bracketed paste on as each prompt opens

    def __init__(self, cwd, *args: str):
        import os
        import pty
        import sys

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become `tmd new ...` in cwd, on a known terminal type
            os.chdir(cwd)
            env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
            os.execve(sys.executable, [sys.executable, "-m", "tmd", "new", *args], env)
        self.output = b""

    def _read(self, timeout: float) -> bool:
        import os
        import select

        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child has exited
            raise EOFError from None
        if not data:
            raise EOFError
        self.output += data
        return True

    def next_prompt(self, timeout: float = 60) -> str:
        """Wait for the next prompt to open and settle; return its text (or raise EOFError)."""
        import time

        start = len(self.output)
        deadline = time.time() + timeout
        while self.PROMPT not in self.output[start:]:
            if time.time() > deadline:
                raise TimeoutError(self.text[-2000:])
            self._read(0.5)
        while self._read(0.2):  # let it finish drawing
            pass
        return self.output[start:].decode(errors="replace")

    def send(self, keys: bytes) -> None:
        import os

        os.write(self.fd, keys)

    def finish(self) -> int:
        import os

        try:
            while True:
                self._read(1.0)
        except EOFError:
            pass
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    @property
    def text(self) -> str:
        import re

        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.output.decode(errors="replace"))


def _walk_to_the_end(term: Terminal, interrupt_at: str | None = None) -> None:
    """Take every offered default; at ``interrupt_at`` press Ctrl-C; at the end answer no."""
    while True:
        prompt = term.next_prompt()
        if interrupt_at and interrupt_at in prompt:
            term.send(b"\x03")
            return
        if "Render the project?" in prompt:
            term.send(b"n\r")
            return
        term.send(b"\r")


def test_a_declined_guided_render_keeps_the_answers_for_data_file(tmp_path):
    import yaml

    term = Terminal(tmp_path, "cool-lm", "--vcs-ref", "HEAD", "--allow-dirty", "-q")
    _walk_to_the_end(term)
    assert term.finish() == 1
    saved = tmp_path / "cool-lm-answers.yml"
    assert f"your answers are kept in {saved}" in term.text.replace("\r\n", " ").replace("\n", " ")
    kept = yaml.safe_load(saved.read_text())
    assert kept["project_name"] == "cool-lm"  # the folder's name was the offered default
    assert resolve(kept) == resolve({"project_name": "cool-lm"})
    # A language model with a full KV cache can take speculative decoding: it is asked.
    assert "Speculative decoding (a small draft" in term.text
    assert not (tmp_path / "cool-lm").exists()


def test_ctrl_c_in_the_guided_flow_keeps_what_was_answered(tmp_path):
    import yaml

    term = Terminal(tmp_path, "proj", "--vcs-ref", "HEAD", "--allow-dirty")
    _walk_to_the_end(term, interrupt_at="model_size")
    assert term.finish() == 130
    kept = yaml.safe_load((tmp_path / "proj-answers.yml").read_text())
    assert kept["project_name"] == "proj" and "graph_mode" in kept and "model_size" not in kept
    assert "no project written" in term.text


def test_a_yes_no_question_with_one_allowed_answer_is_stated_not_asked():
    """An image model cannot take speculative decoding: the flow states `no` with the rule's
    reason instead of asking; a language model is asked."""
    from tmd.flow import _only_allowed
    from tmd.questions import BY_KEY

    question = BY_KEY["speculative"]
    value, reason = _only_allowed(question, resolve({"modality": "image"}, validate=False))
    assert value is False and "keep speculative=false" in reason
    assert _only_allowed(question, resolve({"modality": "text"}, validate=False)) is None

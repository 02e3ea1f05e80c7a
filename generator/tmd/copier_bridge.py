"""What copier.yml calls at prompt time: the engine's own rules, read from copier's answers.

copier renders each default, validator and `when` with the answers given so far in its Jinja
context. `extensions/tmd_engine.py` exposes the functions below as Jinja globals, so copier and
`tmd` run the same Python, and no rule has a second, Jinja, spelling.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .plan import explain
from .questions import BY_KEY, QUESTIONS, Answers


def answers_in(context: Mapping[str, Any]) -> Answers:
    """The answers copier holds so far, in questionnaire order."""
    return {q.key: context[q.key] for q in QUESTIONS if q.key in context}


def default(context: Mapping[str, Any], key: str) -> Any:
    return BY_KEY[key].default_for(answers_in(context))


def check(context: Mapping[str, Any], key: str) -> str:
    """The rule's refusal for this answer, or '' (copier's way of saying valid)."""
    validator = BY_KEY[key].validator
    return (validator(answers_in(context)) or "") if validator else ""


def asked(context: Mapping[str, Any], key: str) -> bool:
    when = BY_KEY[key].when
    return True if when is None else when(answers_in(context))


def design(context: Mapping[str, Any]) -> str:
    """The Design Decisions rows of DESIGN.md, as JSON (copier's `yaml` answers read it)."""
    return json.dumps([vars(row) for row in explain(answers_in(context)).rows])


def design_notes(context: Mapping[str, Any]) -> str:
    return json.dumps(explain(answers_in(context)).notes)

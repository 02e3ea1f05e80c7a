"""The guided questionnaire: the decision trees asked as questions, with questionary.

The flow asks the same questions copier.yml holds, in the same order, with the engine's
defaults; what the trees compute ("does it fit on one GPU?") is shown, not asked.
"""

from __future__ import annotations

from typing import Any

from . import rules
from .plan import AnswerError, check_answer, coerce
from .questions import QUESTIONS, Question

Answers = dict[str, Any]

PROMPTS = {
    "control_flow": "Does the model have data-dependent control flow (early exit, variable-length "
    "loops, conditional layers)?",
    "more_capacity": "Does the model need more capacity (parameters) than its compute per token "
    "pays for?",
    "stage": "Is the architecture still changing (research), or settled and throughput-critical "
    "(production)?",
}


def _ask(question: Question, answers: Answers, default: Any) -> Any:
    import questionary

    message = PROMPTS.get(question.key) or f"{question.key}: {question.help}"
    if question.choices:
        # Choices a rule refuses, or this version does not render, stay visible but disabled,
        # with the reason.
        choices = [
            questionary.Choice(
                c.label,
                value=c.value,
                disabled=check_answer(question, dict(answers, **{question.key: c.value})),
            )
            for c in question.choices
        ]
        return questionary.select(
            message, choices=choices, default=next((c for c in choices if c.value == default), None)
        ).unsafe_ask()
    if question.type == "bool":
        return questionary.confirm(message, default=bool(default)).unsafe_ask()

    def validate(text: str) -> bool | str:
        try:
            trial = dict(answers, **{question.key: coerce(question, text)})
        except AnswerError as err:
            return str(err)
        return check_answer(question, trial) or True

    raw = questionary.text(message, default=str(default), validate=validate).unsafe_ask()
    return coerce(question, raw)


def _only_allowed(question: Question, answers: Answers) -> tuple[bool, str] | None:
    """For a yes/no question whose one answer a rule refuses: (the other, the rule's words)."""
    refusals = {
        value: check_answer(question, dict(answers, **{question.key: value}))
        for value in (False, True)
    }
    allowed = [value for value, refusal in refusals.items() if not refusal]
    if len(allowed) != 1:
        return None
    return allowed[0], refusals[not allowed[0]]


def guided(chosen: Answers, defaults: Answers | None = None) -> Answers:
    """Ask every question that ``chosen`` does not fix, adding each answer to it as it comes.

    ``chosen`` holds the answers given up front and gains every answer asked, in place, so
    that a caller still has them when the flow stops early. ``defaults`` replaces a question's
    own default (the destination folder's name for project_name). Each answer is checked when
    it is given: a refused choice is disabled, a refused number asked again, and a yes/no
    question whose one answer a rule refuses is not asked at all.
    """
    given = dict(chosen)
    answers: Answers = {}
    for question in QUESTIONS:
        if question.key in given:
            answers[question.key] = coerce(question, given[question.key])
            continue
        asked = question.when is None or question.when(answers)
        if question.computed or question.advanced or not asked:
            answers[question.key] = question.default_for(answers)
            continue
        if question.key == "parallelism":
            _show_fit(answers)
        default = (defaults or {}).get(question.key, question.default_for(answers))
        forced = _only_allowed(question, answers) if question.type == "bool" else None
        if forced is not None:
            value, reason = forced
            print(f"  {question.key}: {'yes' if value else 'no'} ({reason})")
        else:
            value = _ask(question, answers, default)
        answers[question.key] = chosen[question.key] = value
    return chosen


def _show_fit(answers: Answers) -> None:
    cap = rules.capacity_bytes(answers)
    one = rules.memory_for(answers, "single", "none")
    if cap is None:
        print(f"  Training memory ~{one.total_gb:.1f} GB; CPU runs have no fixed budget.")
        return
    verdict = "fits" if one.total_bytes <= cap else "does not fit"
    print(
        f"  Does it fit on one GPU? ~{one.total_gb:.1f} GB of {cap / 1e9:.1f} GB usable: {verdict}."
    )

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
    "stage": "Is the architecture still changing (research), or settled and throughput-critical "
    "(production)?",
}


def _ask(question: Question, answers: Answers) -> Any:
    import questionary

    default = question.default_for(answers)
    message = PROMPTS.get(question.key, question.key.replace("_", " "))
    instruction = question.help
    if question.choices:
        choices = []
        for c in question.choices:
            trial = dict(answers, **{question.key: c.value})
            reason = check_answer(question, trial)
            choices.append(questionary.Choice(c.label, value=c.value, disabled=reason))
        answer = questionary.select(
            message,
            choices=choices,
            default=next((c for c in choices if c.value == default), None),
            instruction=instruction,
        ).unsafe_ask()
    elif question.type == "bool":
        answer = questionary.confirm(
            f"{message} — {instruction}", default=bool(default)
        ).unsafe_ask()
    else:

        def validate(text: str) -> bool | str:
            try:
                trial = dict(answers, **{question.key: coerce(question, text)})
            except AnswerError as err:
                return str(err)
            return check_answer(question, trial) or True

        raw = questionary.text(
            f"{message} — {instruction}", default=str(default), validate=validate
        ).unsafe_ask()
        answer = coerce(question, raw)
    return answer


def guided(given: Answers) -> Answers:
    """Ask every question that is not fixed by `given`; returns the asked answers and `given`."""
    answers: Answers = {}
    chosen: Answers = dict(given)
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
        answers[question.key] = chosen[question.key] = _ask(question, answers)
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

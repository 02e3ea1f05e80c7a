"""Resolve a set of answers the way copier does, validate them, and explain the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import rules
from .presets import count_params
from .questions import BY_KEY, QUESTIONS, Question, not_offered_message
from .rationale import CHOICE_RATIONALE, RESEARCH_WITHOUT_GENERATION

Answers = dict[str, Any]


class AnswerError(ValueError):
    """An answer breaks a rule; the message names the rule and the way out."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def coerce(question: Question, raw: Any) -> Any:
    """Turn a --data string (or a YAML value) into the question's type."""
    if question.type == "str":
        return str(raw)
    if isinstance(raw, str):
        text = raw.strip()
        try:
            if question.type == "bool":
                lowered = text.lower()
                if lowered in {"true", "yes", "y", "1", "on"}:
                    return True
                if lowered in {"false", "no", "n", "0", "off"}:
                    return False
                raise ValueError(text)
            if question.type == "int":
                return int(text)
            if question.type == "float":
                return float(text)
        except ValueError:
            raise AnswerError(
                question.key, f"{question.key} expects a {_TYPE_WORDS[question.type]}, got '{raw}'"
            ) from None
    if question.type == "bool" and isinstance(raw, bool):
        return raw
    if question.type == "int" and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if question.type == "float" and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    raise AnswerError(
        question.key, f"{question.key} expects a {_TYPE_WORDS[question.type]}, got {raw!r}"
    )


_TYPE_WORDS = {"int": "whole number", "float": "number", "bool": "true/false", "str": "text"}


def check_answer(question: Question, answers: Answers) -> str | None:
    """The first rule the answer breaks: choice, then 'not rendered', then the question's rule.

    A choice this version does not render is refused before its rules speak, so that no
    message offers a way out that cannot be rendered either.
    """
    value = answers[question.key]
    if question.choices and value not in question.values():
        allowed = ", ".join(str(v) for v in question.offered_values())
        return f"{question.key}={value} is not a choice; choose one of: {allowed}"
    if question.choices and value not in question.offered_values():
        return not_offered_message(question, value)
    return question.validator(answers) if question.validator is not None else None


def check_keys(given: Answers) -> None:
    """Refuse keys that are not questions, and derived values, which follow from others."""
    unknown = sorted(set(given) - set(BY_KEY))
    if unknown:
        settable = ", ".join(q.key for q in QUESTIONS if q.settable)
        raise AnswerError(
            unknown[0],
            f"unknown question{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the "
            f"answers you can give are: {settable}",
        )
    for key in given:
        question = BY_KEY[key]
        if not question.settable:
            names = ", ".join(question.derived_from)
            raise AnswerError(
                key,
                f"{key} is derived from {names} and cannot be set itself: give those answers "
                f"instead (see `tmd plan` for what they imply)",
            )


def resolve(given: Answers, *, strict_keys: bool = True, validate: bool = True) -> Answers:
    """Fill in every answer in questionnaire order; raise AnswerError at the first broken rule.

    With validate=False the answers are filled in but not checked (the engine and docs tests use
    this to read rules on combinations the validators would refuse).
    """
    if strict_keys:
        check_keys(given)
    answers: Answers = {}
    for question in QUESTIONS:
        asked = question.when is None or question.when(answers)
        if question.key in given:
            answers[question.key] = coerce(question, given[question.key])
        else:
            answers[question.key] = question.default_for(answers)
        if validate and (asked or question.key in given):
            message = check_answer(question, answers)
            if message:
                raise AnswerError(question.key, message)
    return answers


@dataclass
class Row:
    decision: str
    choice: str
    rationale: str
    suggested: str | None = None  # the rule's pick, when the answer differs from it


@dataclass
class Plan:
    answers: Answers
    rows: list[Row] = field(default_factory=list)
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (decision, the rule's why)
    notes: list[str] = field(default_factory=list)

    @property
    def params(self) -> int:
        return count_params(rules.shape_of(self.answers))


MEMORY_DECISIONS = ("parallelism", "activation_checkpointing")


def memory_sentence(answers: Answers) -> str:
    cap = answers["capacity_bytes"]
    budget = "CPU: no fixed budget" if not cap else f"of {cap / 1e9:.1f} GB usable"
    return f"Estimated training memory: {answers['memory_gb']} GB per device ({budget})."


def explain(answers: Answers) -> Plan:
    """The Design Decisions rows (as DESIGN.md shows them) and the rules' reasons."""
    plan = Plan(answers)
    for question in QUESTIONS:
        if question.decision is None or (question.when and not question.when(answers)):
            continue
        choice = answers[question.key]
        text = CHOICE_RATIONALE[question.key][choice]
        if (question.key, choice) == ("deployment", "research") and not rules.generates(answers):
            text = RESEARCH_WITHOUT_GENERATION
        if question.key in MEMORY_DECISIONS:
            text = f"{text} {memory_sentence(answers)}"
        suggested = None
        if callable(question.default):
            decision = question.default(answers)
            if isinstance(decision, rules.Decision):
                plan.reasons.append((question.decision, decision.rationale))
                if decision.choice != choice:
                    suggested = str(decision.choice)
        plan.rows.append(Row(question.decision, str(choice), text, suggested))
    if answers["modality"] == "text":
        plan.notes.append(rules.vocabulary_note(answers))
    if rules.small_table(answers):
        plan.notes.append(SMALL_TABLE_NOTE.format(**answers))
    if answers["context_parallel"]:
        plan.notes.append(CONTEXT_PARALLEL_NOTE.format(**answers))
    if answers["pp"] > 1:
        plan.notes.append(pipeline_note(answers))
    if answers["distill"]:
        plan.notes.append(DISTILL_NOTE.format(**answers) + rules.weight_read_sentence(answers))
    if answers["quantization"] == "int8_dynamic" and rules.generates(answers):
        plan.notes.append(rules.INT8_DYNAMIC_NOTE)
    if rules.batched_on_a_gpu(answers) and answers["quantization"] == "int8_weight_only":
        plan.notes.append(rules.INT8_WEIGHT_ONLY_BATCHED_NOTE)
    if answers["speculative"]:
        plan.notes.append(
            SPECULATIVE_NOTE.format(draft_layers=max(1, answers["n_layers"] // 4), **answers)
        )
    return plan


SMALL_TABLE_NOTE = (
    "n_samples={n_samples} is under 10,000 rows, where gradient-boosted trees usually beat a "
    "neural net on tables: `eval` trains LightGBM on the same split and says which won; expect "
    "it to be LightGBM."
)
CONTEXT_PARALLEL_NOTE = (
    "seq_len={seq_len} is past 32768 tokens: the rule adds context parallel (ring attention "
    "over the sequence dimension), a CUDA-only path."
)


def pipeline_note(a: dict) -> str:
    schedule, pp, m = a["pp_schedule"], a["pp"], a["pp_microbatches"]
    stages = pp * rules.stages_per_rank(schedule)
    bubble = rules.pipeline_bubble(schedule, pp, m)
    return (
        f"Pipeline: {a['n_layers']} layers in {stages} stages on {pp} ranks ({schedule}), "
        f"{m} micro-batches of {a['batch_size']} per step: each stage idles for {bubble:.1%} "
        "of a step while the pipeline fills and drains (more micro-batches shrink it)."
    )


SPECULATIVE_NOTE = (
    "Speculative decoding: a {draft_layers}-layer draft (configs/draft.toml, a quarter of "
    "the model's {n_layers}) proposes 4 tokens per forward of the model, which verifies them "
    "at once; greedy output is the model's own and sampled output follows its distribution. "
    "Train or distil the draft before timing it: from its initial weights it agrees with the "
    "model too rarely to pay."
)
DISTILL_NOTE = (
    "The latency target of {latency_ms} ms is under 10 ms: distil a larger trained model into "
    "this one rather than training it small from scratch (`distill`, from the teacher of "
    "configs/teacher.toml)."
)


def memory_table(answers: Answers) -> list[tuple[str, str, float, bool]]:
    """(parallelism, checkpointing, GB per device, fits) for every layout this world allows."""
    rows = []
    for question in (BY_KEY["parallelism"],):
        for parallelism in question.values():
            trial = dict(answers, parallelism=parallelism)
            if rules.check_parallelism(trial):
                continue
            for ac in BY_KEY["activation_checkpointing"].values():
                est = rules.memory_for(trial, parallelism, ac)
                rows.append((parallelism, ac, est.total_gb, rules.fits(trial, parallelism, ac)))
    return rows

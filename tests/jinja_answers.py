"""Resolve answers from copier.yml the way copier does, without running copier.

copier.yml's defaults and validators call the engine through the template's Jinja extension; this
renders them in an environment set up as copier's (the same extensions, sandbox and undefined), so
the tests can check the wiring (question order, `when`, casting, choice validators) over many
answer sets quickly. The variant tests confirm the same through real copier runs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from copier._jinja_ext import SandboxedEnvironment
from jinja2 import FileSystemLoader, StrictUndefined

ROOT = Path(__file__).resolve().parents[1]
# What copier's `_folder_name` holds when the project folder is `my-model`: the engine's
# placeholder project name, so that both sides default to the same name.
FOLDER = {"_folder_name": "my-model"}


@functools.cache
def copier_questions() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((ROOT / "copier.yml").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


@functools.cache
def _env() -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=FileSystemLoader(ROOT),
        extensions=[
            "jinja2_ansible_filters.AnsibleCoreFiltersExtension",
            *yaml.safe_load((ROOT / "copier.yml").read_text())["_jinja_extensions"],
        ],
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )


@functools.cache
def _template(text: str):
    return _env().from_string(text)


def render(text: Any, context: dict[str, Any]) -> Any:
    if not isinstance(text, str):
        return text
    return _template(text).render(**context)


def cast(kind: str, value: Any) -> Any:
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        if isinstance(value, str):
            return value.strip().lower() in {"true", "yes", "1", "y", "on"}
        return bool(value)
    if kind == "yaml":
        return yaml.safe_load(value) if isinstance(value, str) else value
    return str(value) if not isinstance(value, str) else value


def choice_validator(spec: dict[str, Any], value: Any, context: dict[str, Any]) -> str | None:
    for option in (spec.get("choices") or {}).values():
        if isinstance(option, dict) and option["value"] == value:
            return render(option.get("validator") or "", context).strip() or None
    return None


def resolve(given: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """Answers in copier order, and the first (key, message) a validator renders, if any."""
    context: dict[str, Any] = dict(FOLDER)
    for key, spec in copier_questions().items():
        kind = spec.get("type", "str")
        value = given[key] if key in given else cast(kind, render(spec.get("default"), context))
        context[key] = value
        when = spec.get("when", True)
        asked = when if isinstance(when, bool) else cast("bool", render(when, context))
        if not (asked or key in given):
            continue
        message = choice_validator(spec, value, context)
        if not message and "validator" in spec:
            message = render(spec["validator"], context).strip()
        if message:
            return context, (key, message)
    return context, None

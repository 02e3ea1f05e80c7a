"""`tmd`: new, plan, update, variants and sync.

Every bad input ends as one line on stderr and exit status 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from . import __version__
from .plan import AnswerError, explain, resolve
from .questions import BY_KEY
from .report import decisions_table, plan_text

TEMPLATE_ROOT = Path(__file__).resolve().parents[2]


class UsageError(Exception):
    pass


def parse_data(pairs: list[str], data_file: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if data_file:
        path = Path(data_file)
        if not path.is_file():
            raise UsageError(f"--data-file {data_file}: no such file")
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise UsageError(f"--data-file {data_file}: expected a mapping of question: answer")
        data.update({k: v for k, v in loaded.items() if not str(k).startswith("_")})
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--data {pair!r}: expected key=value, e.g. --data precision=bf16")
        data[key.strip()] = value
    return data


def _answers_for_copier(given: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """What copier gets as data: every asked answer, plus derived values the person set."""
    out = {}
    for key, value in answers.items():
        question = BY_KEY[key]
        if key in given or not question.computed:
            out[key] = value
    return out


def cmd_new(args: argparse.Namespace) -> int:
    dest = Path(args.dest)
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(
            f"{dest} exists and is not empty: pick a new folder (tmd update changes a project)"
        )
    given = parse_data(args.data, args.data_file)
    if not args.defaults:
        if not sys.stdin.isatty():
            raise UsageError("no terminal to ask in: pass --defaults (with --data/--data-file)")
        from .flow import guided

        given = guided(given)
    answers = resolve(given)
    plan = explain(answers)
    print(f"## Architecture: {answers['project_name']}\n\n{decisions_table(plan)}\n")
    if not args.defaults:
        import questionary

        if not questionary.confirm("Render the project?", default=True).unsafe_ask():
            return 1
    from copier import run_copy

    created = not dest.exists()
    template = Path(args.template)
    # A local template is recorded by absolute path, so `tmd update` works from any folder.
    source = str(template.resolve()) if template.exists() else args.template
    try:
        run_copy(
            source,
            str(dest),
            data=_answers_for_copier(given, answers),
            defaults=True,
            unsafe=True,
            vcs_ref=args.vcs_ref,
            quiet=args.quiet,
        )
    except BaseException:
        if created and dest.exists():
            shutil.rmtree(dest)
        raise
    print(f"\nRendered {dest}. Next: cd {dest} && pip install -e '.[test]' && python -m pytest")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    answers = resolve(parse_data(args.data, args.data_file))
    plan = explain(answers)
    if args.json:
        print(json.dumps({"answers": answers, "decisions": [vars(r) for r in plan.rows]}, indent=2))
    else:
        print(f"## Architecture: {answers['project_name']}\n")
        print(plan_text(plan), end="")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    dest = Path(args.dest)
    answers_file = dest / ".copier-answers.yml"
    if not answers_file.is_file():
        raise UsageError(
            f"{answers_file} not found: tmd update works on a project tmd or copier made"
        )
    recorded = {
        k: v
        for k, v in (yaml.safe_load(answers_file.read_text()) or {}).items()
        if not k.startswith("_")
    }
    given = parse_data(args.data, args.data_file)
    resolve({**recorded, **given})  # refuse a broken combination before copier touches files
    from copier import run_update

    run_update(
        str(dest),
        data=given,
        defaults=True,
        overwrite=True,
        unsafe=True,
        vcs_ref=args.vcs_ref,
        conflict="inline",
        quiet=args.quiet,
    )
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    from .variants import covering_array, variant_name

    rows = covering_array()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for i, row in enumerate(rows):
            pairs = " ".join(f"{k}={v}" for k, v in row.items())
            print(f"{variant_name(i, row)}: {pairs}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from .copier_yml import default_path, sync

    if args.check:
        if not sync(check=True):
            print(f"{default_path()} is out of date: run `tmd sync`", file=sys.stderr)
            return 1
        return 0
    sync()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tmd", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tmd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def data_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data", "-d", action="append", default=[], metavar="KEY=VALUE")
        p.add_argument("--data-file", metavar="FILE", help="YAML mapping of answers")

    new = sub.add_parser("new", help="render a new project (guided, or --defaults)")
    new.add_argument("dest")
    new.add_argument("--defaults", action="store_true", help="ask nothing; take the defaults")
    new.add_argument("--template", default=str(TEMPLATE_ROOT), help="template source (path or URL)")
    new.add_argument("--vcs-ref", default=None, help="template git ref (HEAD includes local edits)")
    new.add_argument("--quiet", "-q", action="store_true")
    data_options(new)
    new.set_defaults(func=cmd_new)

    plan = sub.add_parser("plan", help="print the decisions and memory estimate; write nothing")
    plan.add_argument("--json", action="store_true")
    data_options(plan)
    plan.set_defaults(func=cmd_plan)

    update = sub.add_parser("update", help="bring template changes into a project (copier update)")
    update.add_argument("dest", nargs="?", default=".")
    update.add_argument("--vcs-ref", default=None)
    update.add_argument("--quiet", "-q", action="store_true")
    data_options(update)
    update.set_defaults(func=cmd_update)

    variants = sub.add_parser("variants", help="list the pairwise test matrix")
    variants.add_argument("--json", action="store_true")
    variants.set_defaults(func=cmd_variants)

    sync = sub.add_parser("sync", help="write copier.yml from the engine (--check: verify only)")
    sync.add_argument("--check", action="store_true")
    sync.set_defaults(func=cmd_sync)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (AnswerError, UsageError) as err:
        print(f"tmd: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tmd: cancelled; nothing written", file=sys.stderr)
        return 130
    except Exception as err:  # copier's own errors: one line, not a traceback
        print(f"tmd: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

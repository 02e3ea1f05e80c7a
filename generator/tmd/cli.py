"""`tmd`: new, plan, update, variants and sync.

Every bad input ends as one line on stderr and exit status 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from . import __version__
from .plan import AnswerError, explain, resolve
from .questions import BY_KEY
from .report import decisions_table, plan_text
from .source import SourceError, check_recorded_commit, check_renderable

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


def install_command(answers: dict[str, Any]) -> str:
    """The project's install line, with the extras its README installs."""
    extras = ["test"] + ([answers["tracking"]] if answers["tracking"] != "none" else [])
    return f"pip install -e '.[{','.join(extras)}]'"


@contextlib.contextmanager
def copier_output(quiet: bool) -> Iterator[None]:
    """With --quiet, copier's own notices (warnings, "No git tags found") stay unprinted.

    Its errors still reach the person: they are exceptions, reported by main in one line.
    """
    if not quiet:
        yield
        return
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def keep_answers(dest: Path, chosen: dict[str, Any]) -> Path:
    """Write the guided flow's answers beside ``dest``, as a file --data-file takes."""
    base = Path.cwd() / f"{dest.resolve().name}-answers"
    path = base.with_suffix(".yml")
    n = 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}").with_suffix(".yml")
    path.write_text(yaml.safe_dump(chosen, sort_keys=False))
    return path


def cmd_new(args: argparse.Namespace) -> int:
    dest = Path(args.dest)
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(
            f"{dest} exists and is not empty: pick a new folder (tmd update changes a project)"
        )
    given = parse_data(args.data, args.data_file)
    # The folder names the project (and, through its slug, the package), so that two projects
    # never share a distribution name by default.
    folder = {"project_name": dest.resolve().name}
    if args.defaults:
        return render_new(args, {**folder, **given})
    if not sys.stdin.isatty():
        raise UsageError("no terminal to ask in: pass --defaults (with --data/--data-file)")
    from .flow import guided

    chosen: dict[str, Any] = dict(given)
    try:
        guided(chosen, defaults=folder)
        return render_new(args, chosen, confirm=True)
    except BaseException as err:  # a refusal, Ctrl-C, a decline, copier: keep what was answered
        if any(key not in given for key in chosen):
            path = keep_answers(dest, chosen)
            print(
                f"tmd: your answers are kept in {path}; run `tmd new {args.dest} --defaults "
                f"--data-file {path}` (with --data KEY=VALUE for what to change)",
                file=sys.stderr,
            )
        if isinstance(err, Declined):
            return 1
        raise


class Declined(Exception):
    """The person answered no to "Render the project?"."""


def render_new(args: argparse.Namespace, given: dict[str, Any], confirm: bool = False) -> int:
    dest = Path(args.dest)
    answers = resolve(given)
    plan = explain(answers)
    print(f"## Architecture: {answers['project_name']}\n\n{decisions_table(plan)}\n")
    if confirm:
        import questionary

        if not questionary.confirm("Render the project?", default=True).unsafe_ask():
            raise Declined()
    check_renderable(args.template, args.vcs_ref, args.allow_dirty)
    from copier import run_copy

    created = not dest.exists()
    template = Path(args.template)
    # A local template is recorded by absolute path, so `tmd update` works from any folder.
    source = str(template.resolve()) if template.exists() else args.template
    try:
        with copier_output(args.quiet):
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
    print(f"\nRendered {dest}. {commit_render(dest, answers['project_name'])}")
    print(f"Next: cd {dest} && {install_command(answers)} && python -m pytest")
    return 0


def commit_render(dest: Path, project_name: str) -> str:
    """Make a fresh project a git repository with the render as its first commit.

    `tmd update` (copier update) works only on a committed tree. A project rendered inside an
    existing repository is left for the person to commit there. Returns a line saying which.
    """
    git = ["git", "-C", str(dest)]
    inside = subprocess.run([*git, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if inside.returncode == 0:
        return f"It is inside the git repository {inside.stdout.strip()}: commit it there."
    who = subprocess.run([*git, "config", "user.email"], capture_output=True, text=True)
    identity = (
        [] if who.stdout.strip() else ["-c", "user.name=tmd", "-c", "user.email=tmd@localhost"]
    )
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    message = f"Render {project_name} with tmd {__version__}"
    subprocess.run([*git, *identity, "commit", "-qm", message], check=True, capture_output=True)
    return "It is a git repository with the render as its first commit."


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
    recorded_file = yaml.safe_load(answers_file.read_text()) or {}
    recorded = {k: v for k, v in recorded_file.items() if not k.startswith("_")}
    given = parse_data(args.data, args.data_file)
    resolve({**recorded, **given})  # refuse a broken combination before copier touches files
    template = str(recorded_file.get("_src_path", ""))
    check_recorded_commit(template, recorded_file.get("_commit"))
    check_renderable(template, args.vcs_ref, args.allow_dirty)
    from copier import run_update

    with copier_output(args.quiet):
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
    conflicted = conflicts(dest)
    if conflicted:
        print(
            f"tmd: the update conflicts with your edits in {len(conflicted)} file"
            f"{'s' if len(conflicted) > 1 else ''}: {', '.join(conflicted)}. In each, keep the "
            "lines you want between <<<<<<< before updating, ======= and >>>>>>> after updating "
            "and delete the markers; then `git add` the files, run the tests, and commit",
            file=sys.stderr,
        )
        return 1
    return 0


def conflicts(project: Path) -> list[str]:
    """Files an update left unmerged (git status UU) or with conflict markers in them."""
    git = ["git", "-C", str(project)]
    unmerged = subprocess.run(
        [*git, "diff", "--name-only", "--diff-filter=U"], capture_output=True, text=True
    ).stdout.split()
    changed = subprocess.run(
        [*git, "diff", "--name-only", "HEAD"], capture_output=True, text=True
    ).stdout.split()
    marked = [
        name
        for name in changed
        if (project / name).is_file()
        and CONFLICT_MARKER in (project / name).read_text(errors="replace")
    ]
    return sorted(set(unmerged) | set(marked))


CONFLICT_MARKER = "\n<<<<<<< before updating"


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


ALLOW_DIRTY_HELP = (
    "render a local template's uncommitted changes (the project then records a version that "
    "exists nowhere else, and cannot be updated)"
)


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
    new.add_argument(
        "--vcs-ref", default=None, help="template git ref (default: the newest release tag)"
    )
    new.add_argument("--quiet", "-q", action="store_true")
    new.add_argument("--allow-dirty", action="store_true", help=ALLOW_DIRTY_HELP)
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
    update.add_argument("--allow-dirty", action="store_true", help=ALLOW_DIRTY_HELP)
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
    except (AnswerError, UsageError, SourceError) as err:
        print(f"tmd: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tmd: cancelled; no project written", file=sys.stderr)
        return 130
    except Exception as err:  # copier's own errors: one line, not a traceback
        print(f"tmd: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

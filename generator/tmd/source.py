"""The template source: which version copier will render, and whether that version can last.

Copier records the template version it rendered as `_commit`, and `copier update` needs that
version again to tell the person's edits from the template's. Two ways to record a version
that will not be there later, both checked here before copier runs:

- rendering `HEAD` of a local template with uncommitted changes: copier commits them in a
  temporary clone and records that commit, which exists nowhere else;
- updating a project whose recorded `_commit` the template no longer has.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from packaging.version import InvalidVersion, Version


class SourceError(Exception):
    """The template version cannot be rendered or found; the message says why and what to do."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def local_repo(template: str) -> Path | None:
    """The template's folder when it is a local git repository (else None: a URL, or no git)."""
    path = Path(template).expanduser()
    if not path.is_dir():
        return None
    top = _git(path, "rev-parse", "--show-toplevel")
    return path.resolve() if top.returncode == 0 else None


def release_tags(repo: Path) -> list[str]:
    """The PEP 440 release tags, newest first: what copier picks from when no ref is given."""
    tags = []
    for tag in _git(repo, "tag", "--list").stdout.split():
        try:
            version = Version(tag)
        except InvalidVersion:
            continue
        if not version.is_prerelease:
            tags.append((version, tag))
    return [tag for _, tag in sorted(tags, reverse=True)]


def ref_to_render(repo: Path, vcs_ref: str | None) -> str:
    """The ref copier will check out: the one given, else the newest release tag, else HEAD."""
    if vcs_ref:
        return vcs_ref
    tags = release_tags(repo)
    return tags[0] if tags else "HEAD"


def uncommitted(repo: Path) -> list[str]:
    """Paths `git status` reports (ignored files excluded), as copier's dirty check sees them."""
    lines = _git(repo, "status", "--porcelain").stdout.splitlines()
    return [line[3:] for line in lines if line.strip()]


def check_renderable(template: str, vcs_ref: str | None, allow_dirty: bool) -> None:
    """Refuse to render uncommitted changes, which copier would record as a phantom commit."""
    repo = local_repo(template)
    if repo is None or allow_dirty:
        return
    ref = ref_to_render(repo, vcs_ref)
    if ref != "HEAD":
        return
    dirty = uncommitted(repo)
    if not dirty:
        return
    shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
    tags = release_tags(repo)
    tag_hint = f"render a release (--vcs-ref {tags[0]}); " if tags else ""
    raise SourceError(
        f"the template at {repo} has uncommitted changes ({shown}): copier would render them "
        "as a commit that exists only in a temporary copy, and `tmd update` could never find "
        f"that version again. Commit or stash them; {tag_hint}or pass --allow-dirty for a "
        "throwaway render that cannot be updated"
    )


def check_recorded_commit(template: str, commit: str | None) -> None:
    """Refuse an update whose recorded template version the template does not have."""
    repo = local_repo(template)
    if repo is None or not commit:
        return
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").returncode == 0:
        return
    tags = release_tags(repo)
    target = tags[0] if tags else "HEAD"
    raise SourceError(
        f"the project was rendered from template version {commit}, which {repo} does not have "
        "(it was rendered from uncommitted changes, or the template's history changed), so "
        "copier cannot tell your edits from the template's. Re-render it from a real version "
        f"with `copier recopy --trust --defaults --vcs-ref {target}` in the project, then "
        "review `git diff` to put back the edits you want"
    )

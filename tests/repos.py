"""Template repositories for the tests: the working tree, committed and tagged as a release.

Tests that render through `tmd` without `--allow-dirty` need a clean template with release
tags, as a person's clone has; the working tree of the checkout is neither while it is edited.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from tmd import __version__

ROOT = Path(__file__).resolve().parents[1]
GIT = [
    "git",
    "-c",
    "user.name=tmd",
    "-c",
    "user.email=tmd@example.invalid",
    "-c",
    "commit.gpgsign=false",
]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


# Release tags as the template's own: this version, then the next patch release.
RELEASE = f"v{__version__}"
_major, _minor, _patch = Version(__version__).release
NEXT = f"v{_major}.{_minor}.{_patch + 1}"


def template_repo(dest: Path) -> Path:
    """A git repo holding the working tree's template (tracked and new files), tagged RELEASE."""
    # NUL-separated: template file names hold spaces and quotes ("{% if x in ['a', 'b'] %}").
    files = git(ROOT, "ls-files", "-z", "-co", "--exclude-standard").split("\0")
    for name in files:
        src = ROOT / name
        if name and src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", RELEASE)
    git(dest, "tag", RELEASE)
    return dest


def release_next(tpl: Path, jinja: str, text: str) -> None:
    """Append ``text`` to a template file and tag the result as the next release."""
    path = tpl / "template" / jinja
    path.write_text(path.read_text() + text)
    git(tpl, "commit", "-qam", NEXT)
    git(tpl, "tag", NEXT)


def tmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tmd", *args], capture_output=True, text=True)

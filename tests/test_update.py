"""`tmd update` (copier update) brings a new template version in and keeps the person's edits."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

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


def template_repo(dest: Path) -> Path:
    """A git repo holding the working tree's template (tracked and new files), tagged v1."""
    files = git(ROOT, "ls-files", "-co", "--exclude-standard").split()
    for name in files:
        src = ROOT / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "v1")
    git(dest, "tag", "v1")
    return dest


def tmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tmd", *args], capture_output=True, text=True)


def test_update_keeps_edits_and_brings_template_changes(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    result = tmd(
        "new", str(project), "--defaults", "--template", str(tpl), "-q", "--data", "n_layers=6"
    )
    assert result.returncode == 0, result.stderr
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "rendered")

    design = project / "DESIGN.md"
    lines = design.read_text().splitlines()
    lines.insert(1, "\nOwned by the retrieval team.")
    design.write_text("\n".join(lines) + "\n")
    git(project, "commit", "-qam", "our note")

    jinja = tpl / "template" / "DESIGN.md.jinja"
    jinja.write_text(jinja.read_text() + "- Template v2 adds this note.\n")
    git(tpl, "commit", "-qam", "v2")
    git(tpl, "tag", "v2")

    result = tmd("update", str(project), "--data", "tracking=none", "-q")
    assert result.returncode == 0, result.stderr
    text = design.read_text()
    assert "Owned by the retrieval team." in text
    assert "Template v2 adds this note." in text
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["_commit"] == "v2"
    assert answers["tracking"] == "none"
    assert answers["n_layers"] == 6  # an override of the preset survives the update
    assert "n_layers = 6" in (project / "configs" / "default.toml").read_text()
    assert "<<<<<<<" not in text

    # A new model_size brings the new preset's shape, except what the person overrode.
    git(project, "add", "-A")
    git(project, "commit", "-qm", "updated")
    result = tmd("update", str(project), "--data", "model_size=small", "-q")
    assert result.returncode == 0, result.stderr
    config = (project / "configs" / "default.toml").read_text()
    assert "dim = 768" in config and "n_layers = 6" in config


def test_update_refuses_a_broken_combination_before_touching_files(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    assert tmd("new", str(project), "--defaults", "--template", str(tpl), "-q").returncode == 0
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "rendered")
    before = (project / ".copier-answers.yml").read_text()
    result = tmd("update", str(project), "--data", "precision=fp8", "--data", "accelerator=a100")
    assert result.returncode == 2
    assert "fp8 needs fp8 tensor cores" in result.stderr
    assert (project / ".copier-answers.yml").read_text() == before
    assert git(project, "status", "--porcelain") == ""

"""`tmd update` (copier update) brings a new template version in and keeps the person's edits."""

from __future__ import annotations

from pathlib import Path

import yaml

from repos import NEXT, RELEASE, git, release_next, template_repo, tmd


def committed_project(tpl: Path, project: Path, *data: str) -> None:
    """``tmd new`` from ``tpl`` (its newest release): a git repository with one clean commit."""
    data_args = [arg for pair in data for arg in ("--data", pair)]
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "-q", *data_args)
    assert result.returncode == 0, result.stderr
    assert "a git repository with the render as its first commit" in result.stdout
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "rev-list", "--count", "HEAD").strip() == "1"


def test_update_keeps_edits_and_brings_template_changes(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    committed_project(tpl, project, "n_layers=6")
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == RELEASE

    # The person's note sits among lines that neither the new release nor the new answers touch.
    design = project / "DESIGN.md"
    text = design.read_text()
    anchor = "- RoPE tables are non-persistent buffers"
    assert anchor in text
    design.write_text(text.replace(anchor, "- Owned by the retrieval team.\n" + anchor))
    git(project, "commit", "-qam", "our note")

    release_next(tpl, "DESIGN.md.jinja", "- Template v2 adds this note.\n")

    result = tmd("update", str(project), "--data", "tracking=none", "-q")
    assert result.returncode == 0, result.stderr
    text = design.read_text()
    assert "Owned by the retrieval team." in text
    assert "Template v2 adds this note." in text
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["_commit"] == NEXT
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
    assert "Owned by the retrieval team." in design.read_text()


def test_a_conflicting_update_names_the_files_and_exits_non_zero(tmp_path):
    """An edit next to lines the update rewrites conflicts; the person must be told, not left
    with markers in a file and exit status 0."""
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    committed_project(tpl, project)
    design = project / "DESIGN.md"
    lines = design.read_text().splitlines()
    lines.insert(1, "\nOwned by the retrieval team.")  # beside the summary model_size rewrites
    design.write_text("\n".join(lines) + "\n")
    git(project, "commit", "-qam", "our note")

    result = tmd("update", str(project), "--data", "model_size=small", "-q")
    assert result.returncode == 1
    assert "conflicts with your edits in 1 file: DESIGN.md" in result.stderr
    assert "<<<<<<< before updating" in result.stderr and "git add" in result.stderr
    assert "<<<<<<< before updating" in design.read_text()  # the person's lines are kept


def test_update_refuses_a_recorded_version_the_template_lacks(tmp_path):
    """A render of uncommitted template changes records a commit made in a temporary clone;
    the update must say so instead of failing inside copier with "Unknown revision"."""
    tpl = template_repo(tmp_path / "tpl")
    (tpl / "template" / "NOTES.md").write_text("uncommitted\n")
    project = tmp_path / "proj"
    result = tmd(
        "new",
        str(project),
        "--defaults",
        "--template",
        str(tpl),
        "-q",
        "--vcs-ref",
        "HEAD",
        "--allow-dirty",
    )
    assert result.returncode == 0, result.stderr
    result = tmd("update", str(project), "--data", "tracking=none", "-q")
    assert result.returncode == 2
    assert "does not have" in result.stderr and "copier recopy" in result.stderr
    assert "Traceback" not in result.stderr
    assert git(project, "status", "--porcelain") == ""


def test_new_refuses_to_render_uncommitted_template_changes(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    (tpl / "scratch").mkdir()
    (tpl / "scratch" / "draft.txt").write_text("a rendered project left in the checkout\n")
    project = tmp_path / "proj"
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "--vcs-ref", "HEAD")
    assert result.returncode == 2
    assert "uncommitted changes (scratch/)" in result.stderr
    assert f"--vcs-ref {RELEASE}" in result.stderr and "--allow-dirty" in result.stderr
    assert not project.exists()
    # The newest release is what tmd renders by default, and it is not affected.
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "-q")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == RELEASE


def test_update_refuses_a_broken_combination_before_touching_files(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    committed_project(tpl, project)
    before = (project / ".copier-answers.yml").read_text()
    result = tmd("update", str(project), "--data", "precision=fp8", "--data", "accelerator=a100")
    assert result.returncode == 2
    assert "fp8 needs fp8 tensor cores" in result.stderr
    assert (project / ".copier-answers.yml").read_text() == before
    assert git(project, "status", "--porcelain") == ""


def test_quiet_renders_print_none_of_copiers_notices(tmp_path):
    """-q once still printed "No git tags found" and a DirtyLocalWarning."""
    tpl = template_repo(tmp_path / "tpl")
    git(tpl, "tag", "-d", RELEASE)
    (tpl / "template" / "NOTES.md").write_text("uncommitted\n")
    project = tmp_path / "proj"
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "-q", "--allow-dirty")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""

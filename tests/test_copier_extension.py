"""copier reaches the engine through the template's Jinja extension: plainly, per template
version, and with a clear message where the extension package is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import yaml

from repos import NEXT, RELEASE, git, template_repo

# A copier run in a fresh interpreter where `copier_template_extensions` cannot be imported, as
# for a person who installed copier alone.
WITHOUT_EXTENSIONS = textwrap.dedent(
    """
    import importlib.abc, sys

    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "copier_template_extensions":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Missing())
    from copier import run_copy
    run_copy(sys.argv[1], sys.argv[2], defaults=True, unsafe=True, quiet=True)
    """
)


def test_plain_copier_without_the_extension_names_the_package(tmp_path):
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTENSIONS, str(tpl), str(project)],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "No module named 'copier_template_extensions'" in result.stderr
    assert "install these extensions alongside Copier" in result.stderr
    assert not project.exists() or not any(project.iterdir())  # nothing half-rendered


def test_plain_copier_renders_the_engines_answers(tmp_path):
    from copier import run_copy

    from tmd.plan import explain, resolve

    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "my-model"
    data = {"model_size": "small", "gpus_per_node": 8, "accelerator": "h100"}
    run_copy(str(tpl), str(project), data=data, defaults=True, unsafe=True, quiet=True)
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    answers = resolve({**data, "project_name": "my-model"})
    asked = {k: v for k, v in recorded.items() if not k.startswith("_")}
    assert asked == {k: answers[k] for k in asked}
    assert recorded["parallelism"] == answers["parallelism"] != "single"
    design = (project / "DESIGN.md").read_text()
    for row in explain(answers).rows:
        assert f"| {row.decision} | {row.choice}" in design


def test_update_runs_each_versions_own_engine_in_one_process(tmp_path):
    """copier update renders the old and the new template in one process; a rule changed
    between the two must show its new text, and the old render must use the old one (a cached
    engine would give both renders the same rules and lose the change, or invent a conflict)."""
    from copier import run_copy, run_update

    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    run_copy(str(tpl), str(project), defaults=True, unsafe=True, quiet=True, vcs_ref=RELEASE)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "render")
    old = "Eager: errors point at the failing line"
    assert old in (project / "DESIGN.md").read_text()

    rationale = tpl / "generator" / "tmd" / "rationale.py"
    new = "Eager, as of the next release: errors point at the failing line"
    rationale.write_text(rationale.read_text().replace(old, new))
    git(tpl, "commit", "-qam", NEXT)
    git(tpl, "tag", NEXT)

    run_update(str(project), defaults=True, unsafe=True, quiet=True, overwrite=True)
    design = (project / "DESIGN.md").read_text()
    assert new in design and old not in design
    assert "<<<<<<<" not in design
    assert not list(project.rglob("*.rej"))
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == NEXT

"""The `tmd` CLI and plain `copier copy`: good input renders, bad input is refused cleanly.

Every refusal must name the rule, exit non-zero and leave nothing behind. Through `tmd` no
traceback may show; through plain copier, which prints its own traceback, the rule's message
must be the last line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COPIER = [sys.executable, "-m", "copier"]
TMD = [sys.executable, "-m", "tmd"]

BAD = [
    (["package_name=../x"], "looks like a path"),
    (["package_name=class"], "is a Python keyword"),
    (["package_name=9lives"], "starts with a digit"),
    (["package_name=my-pkg"], "is not a Python identifier"),
    (["n_kv_heads=3"], "n_kv_heads=3 must divide n_heads=4"),
    (["precision=fp8", "accelerator=a100"], "fp8 needs fp8 tensor cores, which a100 lacks"),
    (["precision=fp8", "accelerator=cpu"], "fp8 needs fp8 tensor cores, which cpu lacks"),
    (["parallelism=ddp"], "data parallel needs at least 2 GPUs"),
    # A choice this version does not render is refused first, offering only rendered ones.
    (
        ["modality=audio"],
        "does not render it yet; choose one of: text, image, timeseries, tabular",
    ),
    (["speculative=true", "attention=ssm"], "keep speculative=false"),
    (["precision=fp16", "loss_scaling=false"], "fp16 without loss scaling"),
    (["gpus_per_node=0"], "gpus_per_node must be at least 1"),
    (["model_size=large"], "exceeds the 72.0 GB usable on h100"),
]


def run(cmd, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)


def data_args(pairs):
    return [arg for pair in pairs for arg in ("--data", pair)]


@pytest.mark.parametrize(("pairs", "message"), BAD, ids=[" ".join(p) for p, _ in BAD])
def test_tmd_new_refuses_bad_answers(tmp_path, pairs, message):
    dest = tmp_path / "proj"
    result = run([*TMD, "new", str(dest), "--defaults", *data_args(pairs)])
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not dest.exists()


@pytest.mark.parametrize(("pairs", "message"), BAD, ids=[" ".join(p) for p, _ in BAD])
def test_plain_copier_refuses_bad_answers_with_the_rule_last(tmp_path, pairs, message):
    dest = tmp_path / "proj"
    cmd = [*COPIER, "copy", "--defaults", "--trust", "--vcs-ref", "HEAD", "--quiet"]
    result = run([*cmd, *data_args(pairs), str(ROOT), str(dest)])
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert message in last
    assert not dest.exists()


def test_tmd_refuses_unknown_keys(tmp_path):
    dest = tmp_path / "proj"
    result = run([*TMD, "new", str(dest), "--defaults", "--data", "precison=bf16"])
    assert result.returncode == 2
    assert "unknown question precison" in result.stderr
    assert "Traceback" not in result.stderr
    assert not dest.exists()


def test_unknown_keys_are_answered_with_the_keys_a_person_can_set(tmp_path):
    result = run([*TMD, "plan", "--data", "precison=bf16"])
    keys = result.stderr.split("the answers you can give are: ")[1].strip().split(", ")
    assert "precision" in keys and "n_layers" in keys  # asked, and a preset value one may set
    assert "world_size" not in keys and "memory_gb" not in keys  # derived: never set


@pytest.mark.parametrize("command", ["plan", "new"])
def test_plan_and_new_refuse_a_derived_value_alike(tmp_path, command):
    """`world_size` follows from gpus_per_node x nodes; plan accepted 7 while new refused it
    with copier's exception text."""
    dest = [str(tmp_path / "proj"), "--defaults"] if command == "new" else []
    result = run([*TMD, command, *dest, "--data", "world_size=7"])
    assert result.returncode == 2
    assert result.stderr == (
        "tmd: error: world_size is derived from gpus_per_node, nodes and cannot be set itself: "
        "give those answers instead (see `tmd plan` for what they imply)\n"
    )
    assert not (tmp_path / "proj").exists()


def test_the_folder_names_the_project_and_its_package(tmp_path):
    """Two projects rendered with the defaults must not share a distribution name."""
    dest = tmp_path / "cool-lm"
    cmd = [*TMD, "new", str(dest), "--defaults", "--vcs-ref", "HEAD", "--allow-dirty", "-q"]
    result = run(cmd)
    assert result.returncode == 0, result.stderr
    answers = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    assert (answers["project_name"], answers["package_name"]) == ("cool-lm", "cool_lm")
    assert 'name = "cool-lm"' in (dest / "pyproject.toml").read_text()
    assert (dest / "src" / "cool_lm" / "__main__.py").is_file()
    # The Next hint installs what the project's README installs.
    hint = result.stdout.strip().splitlines()[-1]
    install = hint.split(" && ")[1]
    assert install == "pip install -e '.[test,tensorboard]'"
    assert install in (dest / "README.md").read_text()


def test_plain_copier_names_the_project_after_its_folder(tmp_path):
    dest = tmp_path / "cool-lm"
    cmd = [*COPIER, "copy", "--defaults", "--trust", "--vcs-ref", "HEAD", "--quiet"]
    result = run([*cmd, str(ROOT), str(dest)])
    assert result.returncode == 0, result.stderr
    answers = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    assert (answers["project_name"], answers["package_name"]) == ("cool-lm", "cool_lm")


def test_tmd_refuses_a_wrong_type(tmp_path):
    result = run([*TMD, "plan", "--data", "gpus_per_node=two"])
    assert result.returncode == 2
    assert "gpus_per_node expects a whole number, got 'two'" in result.stderr


def test_tmd_new_without_a_terminal_asks_for_defaults(tmp_path):
    result = subprocess.run(
        [*TMD, "new", str(tmp_path / "p")], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 2
    assert "pass --defaults" in result.stderr


def test_tmd_new_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    result = run([*TMD, "new", str(tmp_path), "--defaults"])
    assert result.returncode == 2
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_plan_prints_decisions_and_memory_without_writing(tmp_path):
    result = run(
        [*TMD, "plan", "--data", "model_size=large", "--data", "gpus_per_node=8"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| Parallelism | fsdp2 |" in out
    assert "| fsdp2 | none |" in out and "| ddp | none |" in out
    assert "does not fit on one device" in out
    assert list(tmp_path.iterdir()) == []


def test_tmd_new_defaults_renders_the_answers(tmp_path):
    dest = tmp_path / "proj"
    result = run(
        [
            *TMD,
            "new",
            str(dest),
            "--defaults",
            "--vcs-ref",
            "HEAD",
            "--allow-dirty",
            "-q",
            "--data",
            "project_name=Tiny LM",
        ]
    )
    assert result.returncode == 0, result.stderr
    answers = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    assert answers["package_name"] == "tiny_lm"
    assert answers["parallelism"] == "single"
    assert (dest / "src" / "tiny_lm").is_dir()
    design = (dest / "DESIGN.md").read_text()
    assert design.startswith("## Architecture: Tiny LM")
    assert "| Graph mode | eager |" in design


def test_data_file_is_read(tmp_path):
    answers = tmp_path / "answers.yml"
    answers.write_text("stage: production\naccelerator: h200\n")
    result = run([*TMD, "plan", "--json", "--data-file", str(answers)])
    assert result.returncode == 0, result.stderr
    assert '"graph_mode": "max_autotune"' in result.stdout


def test_copier_defaults_with_no_tty(tmp_path):
    """`copier copy --defaults` renders with no terminal at all (CI, scripts)."""
    dest = tmp_path / "p"
    cmd = [
        *COPIER,
        "copy",
        "--defaults",
        "--trust",
        "--vcs-ref",
        "HEAD",
        "--quiet",
        str(ROOT),
        str(dest),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert (dest / "DESIGN.md").is_file()
    shutil.rmtree(dest)

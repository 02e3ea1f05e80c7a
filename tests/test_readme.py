"""The README's commands, run as a person on a fresh clone runs them.

The checkout is copied into a template repository tagged as this release (`repos.template_repo`),
as a clone is; its `.venv` is this one, so the demo finds tmd installed, as after `.ci/run`.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from repos import NEXT, RELEASE, ROOT, git, release_next, template_repo, tmd
from tmd import __version__


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block, as shell words (comments and blank lines dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [
        [shlex.join(words) for line in block.splitlines() if (words := shlex.split(line, True))]
        for block in blocks
    ]


def readme_commands(name: str) -> list[str]:
    """The commands of the README block whose first line starts with ``name``."""
    return next(b for b in bash_blocks((ROOT / "README.md").read_text()) if b[0].startswith(name))


def run(cmd: list[str], cwd: Path, timeout: int = 900, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}
    )


@pytest.mark.variant
def test_the_demo_trains_generates_and_leaves_a_project_that_updates(tmp_path):
    """`bash scripts/demo.sh my-model` from the checkout, then `tmd update` on its project."""
    tpl = template_repo(tmp_path / "tmd")
    (tpl / ".venv").symlink_to(sys.prefix)  # what .ci/run (or the demo itself) installed
    command = readme_commands("bash scripts/demo.sh")[0]
    assert command == "bash scripts/demo.sh my-model"
    try:
        result = run(shlex.split(command), tpl)
    finally:
        run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "my-model"], tpl)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith('{"final_train_loss"'))
    assert json.loads(line)["val_loss"] < 3.0  # trained: a byte model starts near ln(256) = 5.5
    # Then generate prints the prompt and its 200 new bytes, and a blank line. Bytes that are
    # not UTF-8 print as U+FFFD, three bytes, so the text encodes to at least 204.
    sample = result.stdout.split(line + "\n", 1)[1].removesuffix("\n\n")
    assert sample.startswith("The ") and len(sample.encode()) >= 4 + 200

    project = tpl / "my-model"
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert (answers["project_name"], answers["package_name"]) == ("my-model", "my_model")
    assert answers["_commit"] == RELEASE
    # The checkout is still clean: another render from its HEAD records a real commit.
    assert git(tpl, "status", "--porcelain") == ""

    assert git(project, "status", "--porcelain") == ""  # checkpoints and runs are ignored
    result = tmd("update", str(project), "--data", "tracking=none", "-q")
    assert result.returncode == 0, result.stderr
    git(project, "commit", "-qam", "tracking off")
    release_next(tpl, "DESIGN.md.jinja", "- Added by the next release.\n")
    result = tmd("update", str(project), "-q")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == NEXT
    assert "- Added by the next release." in (project / "DESIGN.md").read_text()
    # The project's own README, command by command: test_each_modalitys_readme_runs_...


# What the project README's commands need that this machine has not: a virtual environment and
# an install (the test environment has the dependencies), a cluster, several ranks (the
# distributed variants' own tests run them), and the test suite (test_variants runs it).
NOT_RUN_HERE = {"pip", "pytest", "sbatch", "docker", "kubectl", "copier", "torchrun"}


def run_project_readme(project: Path, port: int = 8000) -> list[str]:
    """Run every python command of a rendered project's README, in order. A command ending
    in ``&`` (the server) runs in the background until the README's ``kill %1``; its ``curl``
    commands go to ``port``, where the walk's config puts it."""
    commands = [c for block in bash_blocks((project / "README.md").read_text()) for c in block]
    ran, background = [], None
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    for command in commands:
        argv = shlex.split(command)
        if argv[0] in NOT_RUN_HERE or argv[:3] == ["python", "-m", "venv"]:
            continue
        if argv[-1] == "&":
            assert background is None and argv[0] == "python", command
            argv = [sys.executable, *argv[1:-1]]
            background = subprocess.Popen(
                argv, cwd=project, env=env, stderr=subprocess.PIPE, text=True
            )
            started = ""
            while "Uvicorn running on" not in started:
                line = background.stderr.readline()
                assert line, (command, started[-3000:])
                started += line
        elif argv[0] == "curl":
            argv = [a.replace("localhost:8000", f"127.0.0.1:{port}") for a in argv]
            result = run(argv, project, timeout=120)
            assert result.returncode == 0 and result.stdout, (command, result.stderr)
        elif argv[:2] == ["kill", "%1"]:
            background.terminate()  # SIGTERM, as kill sends
            assert background.wait(timeout=120) == -signal.SIGTERM, command
            assert "Application shutdown complete" in background.stderr.read(), command
            background = None
        else:
            assert argv[0] == "python", command
            result = run([sys.executable, *argv[1:]], project, PYTHONPATH=str(project / "src"))
            assert result.returncode == 0, (command, result.stderr[-3000:])
        ran.append(command)
    assert background is None, "the README leaves its server running"
    assert any(" train" in c for c in ran) and any(" profile" in c for c in ran), ran
    assert (project / "reports" / "profile.md").is_file()
    return ran


# A new project of every modality, walked on a tiny `configs/default.toml`: the commands are the
# README's, every one; the shapes are small enough that the walk takes seconds per command. The
# rendered suites test what the commands compute (and the demo trains the text model for real);
# this tests that a person can run them.
WALKS = {
    "text": {"modality": "text", "deployment": "server"},
    "image-ssl": {"modality": "image", "unlabeled": "true", "deployment": "export"},
    "timeseries-ssl": {"modality": "timeseries", "unlabeled": "true", "deployment": "onnx"},
    "tabular": {"modality": "tabular", "latency_ms": "5", "deployment": "server"},
}
TINY = {
    "model": {
        "dim": 32,
        "n_layers": 1,
        "n_heads": 2,
        "n_kv_heads": 2,
        "ffn_hidden_dim": 64,
        "decoder_dim": 16,
        "decoder_layers": 1,
        "decoder_heads": 2,
    },
    "train": {
        "batch_size": 16,
        "grad_accum_steps": 1,
        "steps": 4,
        "warmup_steps": 1,
        "eval_every": 2,
        "eval_batches": 2,
        "log_every": 2,
        "precision": "fp32",
    },
    "checkpoint": {"every": 2},
    "pretrain": {"steps": 4},
    "baseline": {"rounds": 10},
    "bench": {"steps": 2, "warmup": 1},
    "profile": {"steps": 3, "wait": 1, "warmup": 1, "active": 1},
}


def shrink(config: Path, values: dict[str, dict[str, object]]) -> None:
    """Set the ``values`` a config file already has, keeping its comments and order."""
    section, lines = "", []
    for line in config.read_text().splitlines(keepends=True):
        if heading := re.match(r"\[(\w+)\]", line):
            section = heading[1]
        elif (kv := re.match(r"(\w+) = [^#\n]*?(\s*#.*)?$", line)) and kv[1] in values.get(
            section, {}
        ):
            line = f"{kv[1]} = {json.dumps(values[section][kv[1]])}{kv[2] or ''}\n"
        lines.append(line)
    config.write_text("".join(lines))
    set_now = tomllib.loads(config.read_text())
    for section, fields in values.items():
        for key, value in fields.items():
            assert set_now.get(section, {}).get(key, value) == value, (section, key)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_readme_data(project: Path) -> None:
    """The datasets the README's "your own data" commands name, in the layouts it describes."""
    rng = random.Random(0)
    pets = project / "data" / "pets"  # 37 breeds, a folder of images each
    for c in range(37):
        (pets / f"breed_{c:02d}").mkdir(parents=True)
        for i in range(4):
            colour = tuple(rng.randrange(256) for _ in range(3))
            Image.new("RGB", (48, 40), colour).save(pets / f"breed_{c:02d}" / f"{i}.jpg")

    # Adult's shape: 6 numeric columns; 8 categorical of 9, 16, 7, 15, 6, 5, 2 and 42 values,
    # 102 values and a row for an unseen one each, 110 rows; a two-valued target.
    cardinalities = [9, 16, 7, 15, 6, 5, 2, 42]
    rows = 600
    table = {f"x{j}": [rng.gauss(0, 1) for _ in range(rows)] for j in range(6)}
    for j, n in enumerate(cardinalities):
        table[f"c{j}"] = [f"v{(i + j) % n}" for i in range(rows)]
    table["income"] = [">50K" if x > 0 else "<=50K" for x in table["x0"]]
    pq.write_table(pa.table(table), project / "data" / "adult.parquet")

    # ETTh1's shape: a date column and 7 channels, hourly.
    series = ["date," + ",".join(f"ch{c}" for c in range(7))]
    for t in range(2000):
        hour = f"2016-07-{1 + t // 24 % 28:02d} {t % 24:02d}:00"
        values = (math.sin(2 * math.pi * t / 24 + c) + rng.gauss(0, 0.1) for c in range(7))
        series.append(hour + "," + ",".join(f"{v:.4f}" for v in values))
    (project / "data" / "ETTh1.csv").write_text("\n".join(series) + "\n")


@pytest.mark.variant
@pytest.mark.parametrize("walk", WALKS)
def test_each_modalitys_readme_runs_command_by_command(tmp_path, walk):
    """A new project of each modality: its README's commands, in order, with the data its
    "your own data" examples name at the paths they name; then the tree is clean for an update."""
    tpl = template_repo(tmp_path / "tmd")
    project = tmp_path / walk
    data = [arg for key, value in WALKS[walk].items() for arg in ("--data", f"{key}={value}")]
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "-q", *data)
    assert result.returncode == 0, result.stderr
    port = free_port()
    shrink(project / "configs" / "default.toml", {**TINY, "serve": {"port": port}})
    git(project, "commit", "-qam", "a tiny configuration for the walk")
    write_readme_data(project)
    ran = run_project_readme(project, port)
    if walk != "text":  # train and eval on "your own" data (text: its own tokenizer)
        assert sum("data.path=data/" in c for c in ran) == 2, ran
    else:
        assert any("--bench" in c for c in ran), ran
    assert any(" quantize quantize.method=" in c for c in ran), ran
    if WALKS[walk].get("unlabeled"):
        assert any(" pretrain" in c for c in ran) and any(" finetune" in c for c in ran), ran
    if WALKS[walk].get("deployment") in ("export", "onnx"):
        assert any(c.endswith(" export") for c in ran), ran
        assert any(c.startswith("python deploy/run_") for c in ran), ran
    if WALKS[walk].get("deployment") == "server":
        assert any(shlex.split(c)[-2:] == ["serve", "&"] for c in ran), ran
        assert ran.count("kill %1") == 1, ran
        assert any(c.startswith("curl") and "/metrics" in c for c in ran), ran
    assert git(project, "status", "--porcelain") == ""


def test_the_readme_usage_commands_run(tmp_path):
    """Every command of "Using it", against a clone of the template (`--template` added, as the
    installed tmd would otherwise render this checkout)."""
    tpl = template_repo(tmp_path / "tmd")
    commands = readme_commands("pip install")
    assert commands[0].startswith("pip install")  # .ci/run has installed it
    assert commands[1] == "tmd new my-model"  # guided: driven on a terminal in test_flow.py
    ran = 0
    for i, command in enumerate(commands[2:]):
        argv = shlex.split(command)
        cwd = tmp_path / f"cmd{i}"
        cwd.mkdir()
        if argv[:2] == ["tmd", "new"]:
            argv += ["--template", str(tpl), "-q"]
            (cwd / "answers.yml").write_text("stage: production\naccelerator: h200\n")
        elif argv[:2] == ["tmd", "update"]:
            assert tmd("new", str(cwd / argv[2]), "--defaults", "--template", str(tpl), "-q")
        elif argv[0] == "pip":  # plain copier's install: the test environment holds it
            assert argv[:2] == ["pip", "install"], command
            for name in argv[2:]:
                assert importlib.util.find_spec(name.replace("-", "_")), name
            ran += 1
            continue
        elif argv[0] == "copier":
            argv = [a.replace("gh:org/tmd-template", str(tpl)) for a in argv] + ["--defaults"]
        result = run([sys.executable, "-m", *argv], cwd)
        assert result.returncode == 0, (command, result.stderr[-2000:])
        ran += 1
        if argv[:2] == ["tmd", "new"]:
            assert (cwd / "my-model" / ".git").is_dir()
        if argv[:2] == ["tmd", "update"]:
            answers = yaml.safe_load((cwd / "my-model" / ".copier-answers.yml").read_text())
            assert answers["tracking"] == "wandb"
    assert ran == len(commands) - 2


def test_the_readme_names_this_release():
    assert f"v{__version__}" in (ROOT / "README.md").read_text()

"""A checkpoint moves between parallel layouts, the documented way to grow a project.

Train in one process, `tmd update` the project to FSDP2, resume on two gloo ranks; then
update back to one process and resume what FSDP2 saved. Each resumed step must see the loss
the run that saved the checkpoint sees when it goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from repos import git, template_repo, tmd

pytestmark = pytest.mark.variant

# The rendered tests' tiny model, in fp32 on the CPU so that layouts can be compared closely.
TINY = [
    "model.dim=64",
    "model.n_layers=2",
    "model.n_heads=4",
    "model.n_kv_heads=2",
    "model.ffn_hidden_dim=128",
    "model.max_seq_len=64",
    "train.seq_len=32",
    "train.batch_size=4",
    "train.warmup_steps=2",
    "train.log_every=1",
    "train.eval_every=100",
    "train.eval_batches=1",
    "train.device=cpu",
    "train.precision=fp32",
    "checkpoint.every=100",  # a checkpoint at the last step only
]
ATOL = 1e-5  # two ranks sum gradients in another order than one process


def run(project: Path, ranks: int, steps: int, checkpoints: Path, resumes: int = 0) -> float:
    """``train`` up to ``steps``, resuming from step ``resumes`` in ``checkpoints`` if given;
    the last step's loss."""
    package = yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"]
    launcher = [sys.executable]
    if ranks > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    overrides = [*TINY, f"train.steps={steps}", f"checkpoint.dir={checkpoints}"]
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    result = subprocess.run(
        [*launcher, "-m", package, "train", *overrides],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = f"resumed from {checkpoints / f'step_{resumes:08d}'}"
    assert (resumed in result.stderr) == bool(resumes), result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])["final_train_loss"]


def update(project: Path, *data: str) -> None:
    result = tmd("update", str(project), "-q", *(arg for pair in data for arg in ("--data", pair)))
    assert result.returncode == 0, result.stderr
    git(project, "add", "-A")
    git(project, "commit", "-qm", f"layout: {' '.join(data)}")


def test_a_checkpoint_resumes_across_layouts(tmp_path: Path) -> None:
    tpl = template_repo(tmp_path / "tpl")
    project = tmp_path / "proj"
    result = tmd("new", str(project), "--defaults", "--template", str(tpl), "-q")
    assert result.returncode == 0, result.stderr
    assert not (project / "src" / "proj" / "training" / "fsdp.py").exists()

    single_straight = run(project, 1, 3, tmp_path / "straight")
    run(project, 1, 2, tmp_path / "moved")  # saved at step 2 by one process

    update(project, "gpus_per_node=2", "parallelism=fsdp2")
    assert (project / "src" / "proj" / "training" / "fsdp.py").exists()
    assert run(project, 2, 3, tmp_path / "moved", resumes=2) == pytest.approx(
        single_straight, abs=ATOL
    )

    # FSDP2's step-3 checkpoint, taken before FSDP2 goes on to step 4.
    shutil.copytree(tmp_path / "moved", tmp_path / "back")
    sharded_straight = run(project, 2, 4, tmp_path / "moved", resumes=3)

    update(project, "gpus_per_node=1", "parallelism=single")
    assert not (project / "src" / "proj" / "training" / "fsdp.py").exists()
    assert run(project, 1, 4, tmp_path / "back", resumes=3) == pytest.approx(
        sharded_straight, abs=ATOL
    )

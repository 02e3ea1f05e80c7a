"""`tmd plan`'s training FLOPs per token are the rendered project's own count.

The project counts each component's FLOPs from its config (`perf/flops.py`, checked against
`FlopCounterMode` in its own tests); the engine counts them from the answers before anything
is rendered. Both must agree for every modality's front-end and head, per token of the
sequence the blocks see.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from copier import run_copy

from tmd import rules
from tmd.flops import train_flops_per_token
from tmd.plan import resolve

ROOT = Path(__file__).resolve().parents[1]
PROJECT_COUNT = """
from p.config import load_config
from p.perf.flops import training_flops_per_token
cfg = load_config("configs/default.toml")
seq = cfg.train.seq_len if hasattr(cfg.train, "seq_len") else cfg.model.max_seq_len
print(training_flops_per_token(cfg.model, seq))
"""


@pytest.mark.parametrize(
    "given",
    [
        {"modality": "text"},
        {"modality": "image"},
        {"modality": "image", "pooling": "mean", "model_size": "small"},
        {"modality": "timeseries"},
        {"modality": "timeseries", "streaming": True},
        {"modality": "tabular", "prediction": "regression"},
    ],
    ids=lambda given: "-".join(str(v) for v in given.values()),
)
def test_plan_counts_the_flops_the_project_counts(tmp_path, given):
    answers = resolve(given)
    engine = train_flops_per_token(
        rules.shape_of(answers), answers["seq_len"], answers["window_size"]
    )
    project = tmp_path / "p"
    data = {"project_name": "p", **given}
    run_copy(
        str(ROOT), str(project), data=data, defaults=True, unsafe=True, vcs_ref="HEAD", quiet=True
    )
    env = {"PYTHONPATH": str(project / "src"), "PATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", PROJECT_COUNT], cwd=project, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    counted = int(result.stdout.split()[-1])
    # The project rounds each component's count per token; a few FLOPs of a few million apart.
    assert engine == pytest.approx(counted, abs=8), (engine, counted)

"""`profile` stays within a bounded multiple of what training itself keeps resident.

A profile of the tiny SSM once needed more than 24 GB of RAM where its training steps needed
3 GB: the profiler's records fragment the C heap, so every profiled step left more resident.
Here every architecture at the tiny preset (the project's own configs/default.toml) runs
`bench` and `profile` through the CLI, and the peak resident set of each process is compared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from copier import run_copy

ROOT = Path(__file__).resolve().parents[1]
# The profile runs training steps and records some; what recording adds must stay within this
# share of the training steps' own peak.
CEILING = 1.75
# Each mixer and FFN code path; MHA and MQA run GQA's code with another KV-head count.
ARCHITECTURES = {
    "gqa": {},
    "sliding_window": {"attention": "sliding_window"},
    "mla": {"attention": "mla"},
    "ssm": {"attention": "ssm", "position": "none"},
    "moe": {"ffn": "moe"},
}
# Fewer timed steps than the defaults and a given peak instead of the GEMM probe: a profile's
# memory depends on neither. The window keeps two active steps, past which the heap grew.
QUICK = [
    "bench.warmup=1",
    "bench.steps=2",
    "bench.peak_tflops=1",
    "profile.steps=2",
    "profile.wait=0",
    "profile.warmup=1",
    "profile.active=2",
]

# The SSM's scan at the preset's 8 × 256 tokens made this its slowest check by far; half the
# batch at half the length records the same kernels per step, and its ratio stays near 1.4.
SMALLER = {"ssm": ["train.batch_size=4", "train.seq_len=128"]}


@pytest.mark.variant
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_profile_memory_is_bounded_by_training_memory(tmp_path, arch):
    project = tmp_path / "p"
    run_copy(
        str(ROOT),
        str(project),
        data={"project_name": "p", **ARCHITECTURES[arch]},
        defaults=True,
        unsafe=True,
        vcs_ref="HEAD",
        quiet=True,
    )
    command = [sys.executable, "-m", "p"]
    overrides = [*QUICK, *SMALLER.get(arch, [])]
    bench = peak_rss_of([*command, "bench", *overrides], project)
    profile = peak_rss_of([*command, "profile", *overrides], project)
    assert (project / "reports" / "profile.md").is_file()
    assert profile <= CEILING * bench, (arch, profile / 1e9, bench / 1e9)


def peak_rss_of(cmd: list[str], cwd: Path) -> int:
    """Run ``cmd`` to completion; the peak resident set of its process, in bytes."""
    env = {**os.environ, "PYTHONPATH": str(cwd / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    log = cwd / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, log.read_text()[-3000:]
    return usage.ru_maxrss * 1024  # Linux reports KiB

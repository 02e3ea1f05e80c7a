"""The launchers in launch/ parse, and the local one starts the processes the design calls for."""

import importlib.util
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from launchers import (
    CONFIG,
    GPUS_PER_NODE,
    LAUNCH,
    PACKAGE,
    ROOT,
    SINGLE,
    TRAIN,
    WORLD_SIZE,
    run_launcher,
)

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_the_configured_batch_splits_over_the_designed_world() -> None:
    """Every rank takes an equal slice of train.batch_size; training refuses any other."""
    config = tomllib.loads((ROOT / CONFIG).read_text(encoding="utf-8"))
    assert config["train"]["batch_size"] % WORLD_SIZE == 0


def test_no_template_syntax_is_left() -> None:
    for path in LAUNCH.iterdir():
        text = path.read_text(encoding="utf-8")
        for marker in ("{" + "{", "{" + "%", "{" + "#"):
            assert marker not in text, f"{path.name} contains {marker!r}"


def test_launchers_name_the_shipped_package_and_config() -> None:
    assert importlib.util.find_spec(f"{PACKAGE}.__main__") is not None
    assert (ROOT / CONFIG).is_file()


@needs_bash
@pytest.mark.parametrize(
    "name", sorted(p.name for p in LAUNCH.iterdir() if p.suffix in (".sh", ".sbatch"))
)
def test_shell_launchers_parse(name: str) -> None:
    subprocess.run(["bash", "-n", str(LAUNCH / name)], check=True)


@needs_bash
def test_local_launcher(tmp_path: Path) -> None:
    argv = run_launcher(LAUNCH / "train.sh", tmp_path)
    if SINGLE:
        assert argv == ["python", *TRAIN]
    else:
        assert argv == ["torchrun", "--standalone", f"--nproc_per_node={GPUS_PER_NODE}", *TRAIN]


@needs_bash
@pytest.mark.skipif(SINGLE, reason="one process: there is no process count to lower")
def test_local_launcher_process_count_can_be_lowered(tmp_path: Path) -> None:
    argv = run_launcher(LAUNCH / "train.sh", tmp_path, {"NPROC_PER_NODE": "2"})
    assert "--nproc_per_node=2" in argv

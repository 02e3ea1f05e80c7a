"""Shared set-up: copier settings isolated from the user's, one inductor cache for all renders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    cache = ROOT / ".tmd-cache"
    cache.mkdir(exist_ok=True)
    settings = cache / "copier-settings.yml"
    # copier 9.19 rejects an empty settings file; an empty mapping means "no user settings".
    settings.write_text("{}\n")
    os.environ["COPIER_SETTINGS_PATH"] = str(settings)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    # Every worker runs one torch process at a time (a project's tests, a training run): one
    # thread each keeps the cores from being oversubscribed, where OpenMP's spinning threads
    # made the suite several times slower.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def template_root() -> Path:
    return ROOT

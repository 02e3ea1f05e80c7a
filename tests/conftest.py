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


# Minutes each, against seconds for the rest: the demo's real training run, a variant's whole
# suite, the README walks, a variant's fast suite, the profiles' memory checks. Run first, so
# that pytest-xdist's workers start on the longest and finish together, instead of one worker
# taking a long test up at the end while the other has nothing left.
LONGEST_FIRST = (
    "test_the_demo_trains",
    "test_variant_builds_and_passes_its_own_tests",  # whole suites: ids without "-fast"
    "test_each_modalitys_readme_runs",
    "-fast]",
    "test_profile_memory_is_bounded",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.nodeid
        if "test_variant_builds" in name and name.endswith("-fast]"):
            return LONGEST_FIRST.index("-fast]")
        return next((i for i, key in enumerate(LONGEST_FIRST) if key in name), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the order within each group is kept

"""Shared test fixtures.

Real third-party data lives beside the repository in ../shared/data (never copied into the
package); PERFCAST_SHARED_DATA overrides the location.
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PERFCAST_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"shared data not found at {DATA} (set PERFCAST_SHARED_DATA)")
    return DATA


# CI explores the same (large) set of generated examples every run, so a red CI always points at
# a reproducible failure; developers' runs stay random and keep finding new cases.
try:
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI"):
        _hsettings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass

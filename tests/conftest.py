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

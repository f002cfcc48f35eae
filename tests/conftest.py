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


@pytest.fixture(scope="session")
def examples_built() -> Path:
    """The bundled example applications, built (the project's setup installs Open MPI: a missing
    compiler is a failure, not a skip)."""
    import shutil
    import subprocess

    if shutil.which("mpicc") is None:
        pytest.fail("mpicc not found: install Open MPI (scripts/install-system-deps.sh)")
    r = subprocess.run(["make", "-s", "-C", str(REPO / "examples")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building examples/ failed: {r.stderr[-2000:]}")
    return REPO / "examples"


# CI explores the same (large) set of generated examples every run, so a red CI always points at
# a reproducible failure; developers' runs stay random and keep finding new cases.
try:
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI"):
        _hsettings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass

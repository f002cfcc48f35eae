"""Where the real third-party data lives: one rule for the library, the tests, the benchmarks and the demo.

The published benchmark tables (SPEC CPU2017 results, counter signatures, MPI micro-benchmarks) and
the peers' profiles are third-party data: they are not part of the ``perfcast`` package.  They are
found in the first of these places that exists:

1. ``$PERFCAST_SHARED_DATA``, a directory laid out like the project's ``shared/data`` (``spec/``,
   ``mpi/``, ``thicket/``, ...) -- used when set, even if it does not exist (the caller's error
   then names it);
2. ``shared/data`` beside a source checkout of perfcast (``<checkout>/../shared/data``);
3. the separate ``perfcast-data`` distribution, when installed: the tables ``systems`` and
   ``project`` read by default, built from 1 or 2 by ``perfcast data wheel`` (:mod:`perfcast.datapkg`)
   and installed with pip next to a non-editable perfcast.

The working directory plays no part, so every command and test finds the same data wherever it is
started from.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

#: the one environment variable that points at the shared data
ENV_VAR = "PERFCAST_SHARED_DATA"

#: the source checkout this module was imported from (src/perfcast/shared_data.py -> checkout)
CHECKOUT = Path(__file__).resolve().parents[2]

#: the import name of the separate data distribution (``perfcast-data`` on pip's side)
DATA_PACKAGE = "perfcast_data"


def checkout_data_dir() -> Path:
    """``<checkout>/../shared/data`` (whether it exists or not)."""
    return (CHECKOUT.parent / "shared" / "data").resolve()


def package_data_dir() -> Path | None:
    """The installed ``perfcast_data`` package's directory (its ``spec/`` is laid out like the shared
    data's), or None when it is not installed.  Found without importing it."""
    try:
        spec = importlib.util.find_spec(DATA_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def locate() -> tuple[Path, str]:
    """The shared data directory and where it came from: ``"environment"`` (``$PERFCAST_SHARED_DATA``),
    ``"checkout"`` (``shared/data`` beside the checkout), ``"package"`` (the installed perfcast-data)
    or ``"none"`` (nothing found: the checkout's path, which does not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve(), "environment"
    checkout = checkout_data_dir()
    if checkout.is_dir():
        return checkout, "checkout"
    pkg = package_data_dir()
    if pkg is not None:
        return pkg, "package"
    return checkout, "none"


def shared_data_dir() -> Path:
    """The directory of :func:`locate` (module doc: environment, checkout, installed package)."""
    return locate()[0]

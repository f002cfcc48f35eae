"""Where the real third-party data lives: one rule for the library, the tests, the benchmarks and the demo.

The published benchmark tables (SPEC CPU2017 results, counter signatures, MPI micro-benchmarks) and
the peers' profiles are third-party data: they are not shipped inside the package.  They are found
in exactly one of two places, in this order:

1. ``$PERFCAST_SHARED_DATA``, a directory laid out like the project's ``shared/data`` (``spec/``,
   ``mpi/``, ``thicket/``, ...);
2. ``shared/data`` beside a source checkout of perfcast (``<checkout>/../shared/data``).

The working directory plays no part, so every command and test finds the same data wherever it is
started from.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the one environment variable that points at the shared data
ENV_VAR = "PERFCAST_SHARED_DATA"

#: the source checkout this module was imported from (src/perfcast/shared_data.py -> checkout)
CHECKOUT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """``$PERFCAST_SHARED_DATA`` when set (even if it does not exist: the caller's error then names
    it), else ``<checkout>/../shared/data``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (CHECKOUT.parent / "shared" / "data").resolve()

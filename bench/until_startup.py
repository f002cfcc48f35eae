#!/usr/bin/env python
"""bench/until_stops.py on one more synthetic oracle, shaped like the jacobi demo campaign
(bench/README.md, "Why the interval at the target jumps along an adaptive campaign"):

    PYTHONPATH=src .venv/bin/python bench/until_startup.py --oracles startup-n2 --seeds 20 [--json out.json]

``startup-n2``: the whole run ``main`` = 0.5 s start-up + ``main->compute`` 6e-6 p^2 +
``main->comm`` 0.0002 p, 3% normal noise on each (bench/advisor.py's Synthetic oracle: grid p = 2..512,
start p = 2..32 x 2 repetitions, target p = 1024, truth 7.0 s); p plays the part of jacobi's n
(``-w n``: n x n points per rank, time ~ a + b n^2).  The other options are until_stops.py's.
Not one of bench/advisor.py's default oracles, so their published numbers do not move.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import advisor as A  # noqa: E402

A.SCENARIOS["startup-n2"] = (lambda p, n: 6e-6 * p ** 2, lambda p, n: 0.0002 * p + 0 * p)
A.ORACLES["startup-n2"] = lambda: A.Synthetic("startup-n2")

import until_stops  # noqa: E402

if __name__ == "__main__":
    sys.exit(until_stops.main(sys.argv[1:]))

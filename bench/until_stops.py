#!/usr/bin/env python
"""Stopping when the interval is narrow enough (issue 21: "intervals stay calibrated (80-95%
coverage) along the way"; `perfcast collect --adaptive --until WIDTH`).

    PYTHONPATH=src PERFCAST_SHARED_DATA=/work/shared/data .venv/bin/python bench/until_stops.py \
        [--seeds 20] [--oracles ...] [--json out.json] [--load out.json]

An adaptive campaign stops at the first step where the 90% interval of the predicted total at the
target is at most ``--until`` wide (relative width, upper - lower over the value).  The width is
itself an estimate, so the campaign may stop on a step where it came out narrow by chance: the
interval it stops on may cover the truth less often than 90% (optional stopping).  This measures
it on bench/advisor.py's oracles (synthetic PMNF sets with known truth, Relearn and HPCCG replayed):
the advisor's campaign (bench/advisor.py ``strategy_advise``, the full grid's cost as budget) is run
once per oracle and seed, and at every step the total's interval at the target (``Advice.value``,
``lower``, ``upper``: what ``collect --adaptive`` reads) is compared with the truth there (the
generating formula; the measured mean at the held-out point).  Per ``--until`` value and stopping
rule it prints how many campaigns stop, the coverage and median error at the stop, and the median
cost spent (fraction of the full grid's); the coverage over every step is the reference.

Rules: stop at the first fit whose interval is within the width at it and at the ``k - 1`` fits
before it (one run apart), for k = 1, 2, 3; `collect --adaptive` uses k =
``perfcast.collect.adaptive.UNTIL_FITS`` (3, chosen on this benchmark; k = 1 was the rule before).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import advisor as A  # noqa: E402  (bench/advisor.py: oracles and the advisor's campaign)

UNTILS = (0.05, 0.1, 0.2, 0.3, 0.5)
RULES = (1, 2, 3)   # consecutive fits within the width


def trajectory(o, seed: int, tmp: str) -> list[dict]:
    """The advisor's campaign on ``o``: per step (start design first) the width, value, bounds,
    truth at the target and the cost spent so far (fraction of the full grid's)."""
    full = sum(o.cost(pt) for pt in o.full())
    cache: dict = {}
    runs = A.strategy_advise(o, seed, tmp, full, [], cache)
    pt = tuple(float(o.target[q]) for q in o.params)
    truth = o.truth(pt)
    out = []
    for k in range(len(o.start), len(runs) + 1):
        err, adv = cache.get(tuple(runs[:k]), ("not computed", None))
        if adv is None or adv.value is None or adv.lower is None or adv.upper is None:
            # no interval at this fit: as for the campaign, not within any width (it breaks a run
            # of narrow fits); left out of the coverage
            out.append({"runs": k, "spent": sum(o.cost(p) for p in runs[:k]) / full, "value": None, "lower": None,
                        "upper": None, "width": float("inf"), "inside": None, "error": None,
                        "at": list(runs[k - 1]) if k > len(o.start) else None})
            continue
        v, lo, hi = float(adv.value), float(adv.lower), float(adv.upper)
        out.append({"runs": k, "spent": sum(o.cost(p) for p in runs[:k]) / full, "value": v, "lower": lo,
                    "upper": hi, "width": (hi - lo) / abs(v) if v else float("inf"),
                    "inside": bool(lo <= truth <= hi), "error": abs(v / truth - 1),
                    "at": list(runs[k - 1]) if k > len(o.start) else None})   # the run this step added
    return out


def stop_at(steps: list[dict], until: float, fits: int) -> dict | None:
    """The step a campaign stops at: the first whose width and the ``fits - 1`` before it are
    within ``until`` (None: it never does)."""
    run = 0
    for s in steps:
        run = run + 1 if s["width"] <= until else 0
        if run >= fits:
            return s
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--oracles", default=",".join(A.ORACLES))
    ap.add_argument("--json", default=None, help="write the rows and every campaign's steps here")
    ap.add_argument("--load", default=None, help="summarise the campaigns of an earlier --json instead")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    traj: dict = {}
    if args.load:
        for key, steps in json.loads(Path(args.load).read_text())["trajectories"].items():
            name, seed = key.rsplit("/", 1)
            traj[(name, int(seed))] = steps
        args.oracles = ",".join(dict.fromkeys(k[0] for k in traj))
    with tempfile.TemporaryDirectory() as tmp:
        for name in ([] if args.load else args.oracles.split(",")):
            o = A.ORACLES[name]()
            for seed in range(args.seeds):
                traj[(name, seed)] = trajectory(o, seed, tmp)
            n = sum(len(traj[(name, s)]) for s in range(args.seeds))
            print(f"{name}: {args.seeds} campaigns, {n} steps ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    every = [s for t in traj.values() for s in t if s["inside"] is not None]
    print(f"every step of every campaign: {len(every)} steps, coverage {np.mean([s['inside'] for s in every]):.0%}, "
          f"median width {np.median([s['width'] for s in every]):.1%}")
    print()
    from perfcast.collect.adaptive import UNTIL_FITS

    print(f"collect --adaptive stops after {UNTIL_FITS} consecutive fits within --until (* below)")
    print("| oracle | --until | fits | stopped | coverage at the stop | median error at the stop | median cost spent |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    names = args.oracles.split(",")
    for name in [*names, "all"]:
        keys = [k for k in traj if name in ("all", k[0])]
        for until in UNTILS:
            for rule in RULES:
                stops = [s for s in (stop_at(traj[k], until, rule) for k in keys) if s is not None]
                row = {"oracle": name, "until": until, "rule": rule, "campaigns": len(keys), "stopped": len(stops),
                       "coverage": float(np.mean([s["inside"] for s in stops])) if stops else None,
                       "error": float(np.median([s["error"] for s in stops])) if stops else None,
                       "spent": float(np.median([s["spent"] for s in stops])) if stops else None}
                rows.append(row)
                if stops:
                    mark = "*" if rule == UNTIL_FITS else ""
                    print(f"| {name} | {until:.0%} | {rule}{mark} | {len(stops)}/{len(keys)} | {row['coverage']:.0%} | "
                          f"{row['error']:.1%} | {row['spent']:.0%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "trajectories": {f"{k[0]}/{k[1]}": v
                                                                              for k, v in traj.items()}}, indent=1))
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

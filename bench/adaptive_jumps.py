#!/usr/bin/env python
"""Width jumps, coverage and the runs chosen along the advisor's campaigns, from the ``--json`` of
bench/until_stops.py or bench/until_startup.py (bench/README.md, "Valuing a run for the drift"):

    PYTHONPATH=src .venv/bin/python bench/adaptive_jumps.py A.json [B.json ...]

Per file and oracle: the campaigns' steps, the share of steps whose width is >= 2x or <= 1/2 the
previous fit's (finite widths only), the coverage over every step, the median error and width at
the last step, and, where the file records the run each step added (``at``), the share of the
runs after the start at the oracle's largest value of the first parameter and at each value.
Reads JSON only; runs nothing."""

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path


def summary(traj: dict) -> dict:
    out = {}
    by = defaultdict(list)
    for key, steps in traj.items():
        by[key.rsplit("/", 1)[0]].append(steps)
    for oracle, camps in sorted(by.items()):
        pairs = jumps = 0
        inside = []
        last_err, last_w = [], []
        at = Counter()
        for steps in camps:
            w = [s["width"] for s in steps]
            for a, b in zip(w, w[1:]):
                if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0:
                    pairs += 1
                    jumps += (b / a >= 2) or (b / a <= 0.5)
            inside += [s["inside"] for s in steps if s["inside"] is not None]
            fin = [s for s in steps if s["error"] is not None]
            if fin:
                last_err.append(fin[-1]["error"])
                last_w.append(fin[-1]["width"])
            at.update(tuple(s["at"]) for s in steps if s.get("at"))
        row = {"campaigns": len(camps), "steps": sum(len(c) for c in camps),
               "jumps_2x": jumps / pairs if pairs else None, "coverage": sum(inside) / len(inside) if inside else None,
               "last_error": statistics.median(last_err) if last_err else None,
               "last_width": statistics.median(last_w) if last_w else None}
        if at:
            n = sum(at.values())
            top = max(p[0] for p in at)
            row["runs"] = n
            row["at_largest_seen"] = sum(v for p, v in at.items() if p[0] == top) / n
            row["by_value"] = {f"{p[0]:g}": v for p, v in sorted(at.items())}
        out[oracle] = row
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    for f in args.files:
        data = json.loads(Path(f).read_text())
        print(f"== {f}")
        for oracle, r in summary(data["trajectories"]).items():
            pct = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
            line = (f"{oracle}: {r['campaigns']} campaigns, {r['steps']} steps; width 2x jumps {pct(r['jumps_2x'])}; "
                    f"coverage {pct(r['coverage'])}; at the last step median error {pct(r['last_error'])}, "
                    f"width {pct(r['last_width'])}")
            if "runs" in r:
                line += (f"; {r['runs']} runs after the start, {pct(r['at_largest_seen'])} at the largest value; "
                         f"by value {r['by_value']}")
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

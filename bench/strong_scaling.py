#!/usr/bin/env python
"""Strong-scaling laws with known truth: perfcast through the CLI side by side with Extra-P 4.2.5.

    .venv/bin/python bench/strong_scaling.py                  # all families, noises, repetitions
    .venv/bin/python bench/strong_scaling.py --no-extrap --series 30

A cost per rank under strong scaling falls with the process count: ``a / p``, a serial part ``c +
a / p``, an overhead that grows (``a / p + b log2(p)``, ``a / p + b sqrt(p)``), a partly parallel
``a p^(-1/2)``; and, for contrast, a weak-scaling ``c + b log2(p)``.  Per family, noise (normal 3%
or uniform +-5%, relative) and repetition count (1, 3, 5): ``--series`` series with ``a`` drawn
from U(1, 100), measured at p = 1, 2, 4, 8, 16, 32 and predicted at p = 1024 by

* perfcast: ``perfcast predict FILE --at p=1024 --json`` (the user's path, defaults), with its 90%
  interval;
* Extra-P: its default ModelGenerator on the same text file, in its own venv (bench/realdata.py's
  helper), its function evaluated at p = 1024 ("Extra-P"); and the same with its option for strong
  scaling, "Negative exponents" (``allow_negative_exponents``: off by default), set ("Extra-P -").

Printed per case: median / p90 / max relative error, >2x misses, negative predictions,
perfcast's interval coverage and "flagged" (of its predictions off by more than 50%, how many carry
confidence "low").  Truth is the generating law at p = 1024 (no noise).  Seeds are
fixed per case, so runs repeat.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "strong_scaling"
sys.path.insert(0, str(HERE))

PS = (1, 2, 4, 8, 16, 32)
TARGET = 1024.0
FAMILIES = {
    "a/p": lambda a, p: a / p,
    "c + a/p": lambda a, p: 0.05 * a + a / p,
    "a/p + b log2(p)": lambda a, p: a / p + 0.01 * a * np.log2(p),
    "a/p + b sqrt(p)": lambda a, p: a / p + 0.005 * a * np.sqrt(p),
    "a p^(-1/2)": lambda a, p: a * p ** -0.5,
    "c + b log2(p)": lambda a, p: a + 0.1 * a * np.log2(p),
}
NOISES = {"normal 3%": lambda rng, k: rng.normal(0, 0.03, k), "uniform 5%": lambda rng, k: rng.uniform(-0.05, 0.05, k)}


def write_case(path: Path, family: str, noise: str, reps: int, count: int) -> dict:
    """The text file of one case; returns the truths {region: value at TARGET}."""
    f = FAMILIES[family]
    rng = np.random.default_rng(zlib.crc32(f"{family}|{noise}|{reps}".encode()))
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), "", "METRIC time", ""]
    truth = {}
    for s in range(count):
        a = rng.uniform(1, 100)
        truth[f"r{s}"] = float(f(a, TARGET))
        lines.append(f"REGION r{s}")
        for p in PS:
            lines.append("DATA " + " ".join(f"{f(a, p) * (1 + e):.10g}" for e in NOISES[noise](rng, reps)))
    path.write_text("\n".join(lines) + "\n")
    return truth


def run_perfcast(path: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "perfcast", "predict", str(path), "--at", f"p={TARGET:g}", "--json"],
                       capture_output=True, text=True, check=True)
    return {i["callpath"]: (i["value"], i["lower"], i["upper"], i["confidence"]) for i in json.loads(r.stdout)["items"]}


def run_extrap(path: Path, truth: dict, negative: bool) -> dict:
    """Extra-P's default ModelGenerator, or with its single-parameter modeler's option "Negative
    exponents" (``allow_negative_exponents``, off by default) set."""
    from realdata import HELPER, run_extrap as extrap

    code = HELPER
    if negative:
        code = HELPER.replace("ModelGenerator(exp).model_all()", "mg = ModelGenerator(exp)\n"
                              "sp = getattr(mg.modeler, 'single_parameter_modeler', mg.modeler)\n"
                              "sp.allow_negative_exponents = True\nmg.model_all()")
        assert code != HELPER
    preds, _, _ = extrap(path, {k: (k, "time") for k in truth}, [{"p": TARGET}], ["p"], code)
    return {cp: v for (cp, _, _), v in preds.items()}


def score(preds: dict, truth: dict) -> dict:
    err = np.array([abs(preds[k][0] / truth[k] - 1) for k in truth if k in preds])
    cover = [preds[k][1] is not None and preds[k][1] <= truth[k] <= preds[k][2] for k in truth if k in preds
             and math.isfinite(preds[k][1] if preds[k][1] is not None else math.nan)]
    return {"n": len(err), "median": float(np.median(err)), "p90": float(np.quantile(err, 0.9)),
            "max": float(err.max()), "miss2x": int(np.sum((err > 1) | np.array(
                [preds[k][0] / truth[k] < 0.5 for k in truth if k in preds]))),
            "negative": int(sum(preds[k][0] < 0 for k in truth if k in preds)),
            "coverage": float(np.mean(cover)) if cover else None,
            "off50": int(np.sum(err > 0.5)),
            "off50_low": int(sum(abs(preds[k][0] / truth[k] - 1) > 0.5 and preds[k][3:] == ("low",)
                                 for k in truth if k in preds))}


def fmt(s: dict) -> str:
    cov = "-" if s["coverage"] is None else f"{s['coverage']:.0%}"
    flag = "-" if s["coverage"] is None else f"{s['off50_low']}/{s['off50']}"
    return (f"{s['median']:8.1%} {s['p90']:9.1%} {s['max']:10.3g} {s['miss2x']:4d} {s['negative']:4d} {cov:>5s} "
            f"{flag:>7s}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=60, help="series per case")
    ap.add_argument("--no-extrap", action="store_true", help="perfcast only")
    ap.add_argument("--json", type=Path, default=None, help="write every case's scores here")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    head = f"{'family':16s} {'noise':10s} reps | {'tool':9s} {'median':>8s} {'p90':>9s} {'max':>10s} >2x  neg  cov90 flagged"
    print(head)
    print("-" * len(head))
    rows = []
    for family in FAMILIES:
        for noise in NOISES:
            for reps in (1, 3, 5):
                path = OUT / f"{family.replace(' ', '').replace('/', '_')}-{noise.split()[0]}-{reps}.txt"
                truth = write_case(path, family, noise, reps, args.series)
                tools = {"perfcast": score(run_perfcast(path), truth)}
                if not args.no_extrap:
                    tools["Extra-P"] = score(run_extrap(path, truth, False), truth)
                    tools["Extra-P -"] = score(run_extrap(path, truth, True), truth)
                for tool, s in tools.items():
                    print(f"{family:16s} {noise:10s} {reps:4d} | {tool:9s} {fmt(s)}", flush=True)
                    rows.append({"family": family, "noise": noise, "reps": reps, "tool": tool, **s})
    for tool in sorted({r["tool"] for r in rows}):
        mine = [r for r in rows if r["tool"] == tool]
        print(f"{tool}: median of the cases' medians {np.median([r['median'] for r in mine]):.1%}, "
              f">2x misses {sum(r['miss2x'] for r in mine)} of {sum(r['n'] for r in mine)}, "
              f"negative {sum(r['negative'] for r in mine)}"
              + ("" if mine[0]["coverage"] is None else
                 f", off by > 50% flagged low {sum(r['off50_low'] for r in mine)} of {sum(r['off50'] for r in mine)}"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

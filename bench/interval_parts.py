#!/usr/bin/env python
"""What makes perfcast's 90% prediction intervals as wide as they are, per prediction, on the splits of
bench/realdata.py (issue 16: "90% intervals cover 80-95% of truths on every split").

    PERFCAST_SHARED_DATA=/work/shared/data .venv/bin/python bench/interval_parts.py                # lulesh, lulesh-max
    .venv/bin/python bench/interval_parts.py --splits all -v                                      # every split, every row

The interval of a prediction is ``value +- q * sqrt(coef + noise + alternatives + drift)``
(perfcast.fit.model.PredictBatch.variance_parts, the rule every output uses): the coefficient
covariance, one new observation's noise (from repetitions, or from the lack of fit with one run per
point), the competing hypotheses' spread, the calibrated extrapolation drift, and ``q`` the t
quantile at the Welch-Satterthwaite degrees of freedom of that sum.  Then ModelSet.predict clips
a lower bound below 0 at 0 (non-negative metrics) and caps an inclusive child's upper bound at its
parent's.  Per split this prints, for the selected hypothesis (the CLI's default):

* the median share of each variance part in the variance;
* the median over the predictions of ``q / z`` (z = 1.645, the normal quantile): how much the few
  degrees of freedom widen the interval;
* the median relative half-width and the coverage of the truths with the interval as shown and
  with one part left out at a time (the drift; the alternatives; the t quantile replaced by z;
  clipping and capping undone) -- what each part buys in width and in coverage.

A segmented model's interval is that of the segment the point lies in (perfcast.fit.segmented),
decomposed the same way.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

Z = 1.6448536269514722
PARTS = ("coef", "noise", "alternatives", "drift")


def decompose(name: str, level: float = 0.9) -> list[dict]:
    """One dict per prediction of split ``name`` (the selected hypothesis): truth, value, the
    shown bounds, the variance parts, dof and q."""
    import perfcast
    from perfcast.fit import columns
    from perfcast.fit.model import PredictBatch
    from realdata import prepare

    train, params, series, targets, truth, _, _ = prepare(name)
    cps = sorted({cp for cp, _ in series})
    mts = sorted({mt for _, mt in series})
    ms = perfcast.model(train, mts, cps).with_averaged(False)
    wanted = set(series)
    shown = {(r["callpath"], r["metric"], tuple(r["at"][p] for p in params)): r for r in ms.predict(targets, level)}
    sel = [sm for sm in ms.series if (sm.callpath, sm.metric) in wanted]
    cols = {p: np.array([float(t[p]) for t in targets]) for p in params}
    inb, b = columns.batch(sel, cols)
    parts = b.variance_parts(level, False)
    out = []
    for s, sm in enumerate(sel):
        m = sm.model
        segs = getattr(m, "segments", None)
        if segs and not inb[s]:
            # a segmented model's interval is its segment's (perfcast.fit.segmented): that
            # segment, a plain model, in a batch of its own
            rows_of = {}
            for j, t in enumerate(targets):
                seg = segs[0] if t[m.parameters[0]] <= m.cut else segs[1]
                one = {p: cols[p][j:j + 1] for p in params}
                b1 = PredictBatch(1, 1, len(seg.terms) + 1, one)
                b1.add_models(np.array([0]), [seg])
                rows_of[j] = (b1, b1.variance_parts(level, False))
        for j, t in enumerate(targets):
            key = (sm.callpath, sm.metric, tuple(t[p] for p in params))
            y = truth[key]
            r = shown[key]
            row = {"callpath": sm.callpath, "metric": sm.metric, "truth": y, "value": r["value"],
                   "lower": r["lower"], "upper": r["upper"], "clipped": bool(r["clipped"]),
                   "in_batch": bool(inb[s]) and bool(parts["ok"][s])}
            bb, pp, ss = b, parts, s
            if segs and not inb[s]:
                (bb, pp), ss = rows_of[j], 0
                row["in_batch"] = bool(pp["ok"][0])
                row["segmented"] = True
                jj = 0
            else:
                jj = j
            if row["in_batch"]:
                # on a measured line with its own level, value and interval are times its factor
                f = float(np.exp(bb.line_log[ss][jj])) if ss in bb.line_log else 1.0
                row.update({k: float(pp[k][ss, jj]) * f * f for k in PARTS})
                row["dof"], row["q"] = float(pp["dof"][ss, jj]), float(pp["q"][ss, jj])
                row["noise_dof"], row["drift_dof"] = float(bb.dof[ss]), float(bb.drift_dof[ss])
                row["centre"] = float(pp["centre"][ss, jj]) * f
            out.append(row)
    return out


def _covered(c, half, y):
    return c - half <= y <= c + half


def summary(rows: list[dict]) -> dict:
    """Shares, q / z, and half-width and coverage with each part left out (module docstring)."""
    from perfcast.fit.special import t_quantile

    d = [r for r in rows if r["in_batch"] and r["value"] != 0 and r["truth"] != 0]
    res = {"n": len(rows), "decomposed": len(d)}
    if not d:
        return res
    tot = np.array([sum(r[k] for k in PARTS) for r in d])
    for k in PARTS:
        res[f"share_{k}"] = float(np.median([r[k] / t if t > 0 else 0.0 for r, t in zip(d, tot)]))
    res["q_over_z"] = float(np.median([r["q"] / Z for r in d]))
    res["err"] = float(np.median([abs(r["value"] - r["truth"]) / abs(r["truth"]) for r in d]))

    def variant(drop=(), normal=False, raw=False):
        halves, cov = [], []
        for r in d:
            if raw or drop or normal:
                v = sum(r[k] for k in PARTS if k not in drop)
                q = Z if normal else (r["q"] if "drift" not in drop else float(t_quantile(np.array(r["noise_dof"]), 0.95)))
                h = q * math.sqrt(max(v, 0.0))
                lo, hi = r["centre"] - h, r["centre"] + h
            else:
                lo, hi = r["lower"], r["upper"]
            halves.append((hi - lo) / 2 / abs(r["value"]))
            cov.append(lo <= r["truth"] <= hi)
        return float(np.median(halves)), float(np.mean(cov))

    res["shown"] = variant()
    res["raw"] = variant(raw=True)
    res["no_drift"] = variant(drop=("drift",))
    res["no_alternatives"] = variant(drop=("alternatives",))
    res["normal_q"] = variant(normal=True)
    res["noise_coef_only"] = variant(drop=("drift", "alternatives"))
    # standardised errors: |truth - value| / sd of the interval; for a calibrated interval their
    # 90% quantile is ~q (and their median ~0.67 q / 1.645)
    zabs = [abs(r["truth"] - r["centre"]) / math.sqrt(t) for r, t in zip(d, tot) if t > 0]
    res["z_median"] = float(np.median(zabs))
    res["z_p90"] = float(np.quantile(zabs, 0.9))
    return res


def main(argv=None):
    from realdata import DEFAULT_SPLITS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", default="lulesh,lulesh-max", help="comma-separated, or 'all' (bench/realdata.py's)")
    ap.add_argument("-v", "--verbose", action="store_true", help="every prediction's parts")
    args = ap.parse_args(argv)
    names = DEFAULT_SPLITS.split(",") if args.splits == "all" else args.splits.split(",")
    print("| split | n | decomposed | median err | coef | noise | alternatives | drift | q/z | width (cov) shown | "
          "not clipped/capped | no drift | no alternatives | z for t | noise+coef only | median, p90 of |z| |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        rows = decompose(name.strip())
        if args.verbose:
            for r in rows:
                if not r["in_batch"]:
                    print(f"  {r['callpath'][-50:]:50s} not decomposed (no interval)")
                    continue
                t = sum(r[k] for k in PARTS)
                if r["truth"] == 0 or r["value"] == 0 or t == 0:
                    print(f"  {r['callpath'][-50:]:50s} value {r['value']:.4g}, truth {r['truth']:.4g}: no relative width")
                    continue
                print(f"  {r['callpath'][-50:]:50s} err {abs(r['value'] - r['truth']) / abs(r['truth']):6.1%} "
                      f"half {r['q'] * math.sqrt(t) / abs(r['value']):6.1%} shown [{r['lower']:.4g}, {r['upper']:.4g}] "
                      f"truth {r['truth']:.4g} q {r['q']:.2f} (dof {r['dof']:.1f}; noise {r['noise_dof']:.0f}, "
                      f"drift {r['drift_dof']:.0f}) " + " ".join(f"{k} {r[k] / t:4.0%}" for k in PARTS))
        s = summary(rows)
        if s["decomposed"] == 0:
            print(f"| {name} | {s['n']} | 0 | | | | | | | | | | | | | |")
            continue
        w = lambda k: f"{s[k][0]:.0%} ({s[k][1]:.0%})"  # noqa: E731
        print(f"| {name} | {s['n']} | {s['decomposed']} | {s['err']:.1%} | " + " | ".join(f"{s['share_' + k]:.0%}" for k in PARTS)
              + f" | {s['q_over_z']:.2f} | {w('shown')} | {w('raw')} | {w('no_drift')} | {w('no_alternatives')} | "
              f"{w('normal_q')} | {w('noise_coef_only')} | {s['z_median']:.2f}, {s['z_p90']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Replay an adaptive campaign's journal, running nothing: per decision, what its interval at the
target was made of (issue 21: "the adaptive campaign's 90% interval at the target jumps as runs are
added").

    PYTHONPATH=src .venv/bin/python bench/adaptive_replay.py OUT/jacobi-adaptive-nN.perfcast [--callpath app] [--advise]

The journal (``OUT.perfcast.campaign/journal.jsonl``, read only; a torn last line is skipped) holds
every run and every ``choose``/``stop`` decision of ``perfcast collect --adaptive``.  Before each
decision the experiment is rebuilt from the records before it
(:func:`perfcast.collect.campaign.build_experiment`, as the campaign did) and fitted as the campaign
fits it (``perfcast.model`` on the time metrics, :func:`perfcast.analysis.advisor.metrics_needed`).
For the whole-run series (``--callpath``; the campaign's ``app``) at the journal's target it prints:

* the runs so far (value: repetitions), the selected formula, the value and the 90% interval as
  ``perfcast predict`` shows it (lower bound clipped at 0), its relative width (and the width the
  journal recorded: the two agree);
* the variance parts of the interval (``PredictBatch.variance_parts``, as bench/interval_parts.py):
  coefficients, noise, competing hypotheses, extrapolation drift (shares of the variance), the
  relative noise, the drift per doubling and its degrees of freedom (held-out points), the
  Welch-Satterthwaite degrees of freedom of the sum and its t quantile ``q``;
* the width without each suspect, unclipped (``2 q sqrt(V) / value``): the drift left out (``q`` at
  the noise's degrees of freedom), the drift's degrees of freedom taken as infinite (``q`` from the
  rest's alone), and the drift per doubling held at the campaign's last value (with its degrees of
  freedom);
* the leave-largest-out check behind the drift, redone by hand: the largest measured value held
  out (its mean and repetitions), the largest kept, the averaged prediction of a fit without it
  (``perfcast.model(..., averaged=True)``, the check's extrapolation to within the fit's own
  shortlist) and its relative miss;
* with ``--advise``, the run the advisor of the source tree imported would choose at that decision
  (the first step of its plan within the budget left, on the campaign's request), beside the
  journal's (bench/README.md, "Valuing a run for the drift").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

PARTS = ("coef", "noise", "alternatives", "drift")


def records(campaign: Path) -> list[dict]:
    out = []
    for line in (campaign / "journal.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break   # a torn last line
    return out


def step_row(spec, recs, target, callpath, metric):
    """The fit of the records ``recs`` (module docstring) at ``target``: a dict."""
    from perfcast.analysis.advisor import metrics_needed
    from perfcast.collect.campaign import build_experiment
    from perfcast.fit import columns
    from perfcast.fit.special import t_quantile
    from perfcast.modelset import model

    exp = build_experiment(spec, recs)
    ms = model(exp, metrics_needed(exp, None))
    sm = next(s for s in ms.series if s.callpath == callpath and s.metric == metric)
    m = sm.model
    shown = next(r for r in ms.predict(target, 0.9) if r["callpath"] == callpath and r["metric"] == metric)
    _, b = columns.batch([sm], {q: np.array([float(target[q])]) for q in ms.parameters})
    P = b.variance_parts(0.9, False)
    part = {k: float(P[k][0, 0]) for k in PARTS}
    rest = part["coef"] + part["noise"] + part["alternatives"]
    V = rest + part["drift"]
    c = float(P["centre"][0, 0])
    dof, d = float(b.dof[0]), float(b.doublings[0, 0])
    data = exp.data[(exp.data.callpath == callpath) & (exp.data.metric == metric)]
    varied = [q for q in exp.parameters if data[q].nunique() > 1]
    row = {"runs": " ".join(f"{v:g}:{k}" for v, k in sorted(data.groupby(varied[0]).size().items()))
           if len(varied) == 1 else str(len(data)),
           "formula": m.formula(digits=4), "value": shown["value"], "lower": shown["lower"], "upper": shown["upper"],
           "width": (shown["upper"] - shown["lower"]) / shown["value"] if shown["value"] else math.nan,
           "shares": {k: part[k] / V if V > 0 else math.nan for k in PARTS}, "noise": m.noise,
           "drift": math.sqrt(part["drift"]) / (abs(c) * d ** m.growth) if d > 0 and c else 0.0,
           "drift_dof": m.drift_dof, "dof": float(P["dof"][0, 0]), "q": float(P["q"][0, 0]),
           "no_drift": 2 * float(t_quantile(np.array(dof), 0.95)) * math.sqrt(rest) / c,
           "drift_dof_inf": 2 * float(t_quantile(np.array(min(V * V / (rest * rest / dof), 1e9) if rest > 0 else 1e9),
                                                 0.95)) * math.sqrt(V) / c,
           "_rest": rest, "_dof": dof, "_c": c, "_d": d, "_growth": m.growth, "_vd": part["drift"]}
    if len(varied) == 1:
        q = varied[0]
        vals = sorted(float(v) for v in data[q].unique())
        if len(vals) >= 4:
            top = vals[-1]
            sub = [r for r in recs if not (r.get("type") == "run" and float(r["config"][q]) >= top)]
            e2 = build_experiment(spec, sub)
            at = {**{k: float(target[k]) for k in exp.parameters}, q: top}
            try:
                ms2 = model(e2, metrics_needed(e2, None), averaged=True)
                pred = next(r for r in ms2.predict(at, 0.9) if r["callpath"] == callpath and r["metric"] == metric)["value"]
            except Exception as e:  # noqa: BLE001 -- a fit that cannot predict there: shown as such
                pred, row["rerun_error"] = math.nan, str(e)
            held = data[data[q] == top]["value"]
            row.update(held_at=top, held_mean=float(held.mean()), held_runs=len(held), kept=vals[-2], rerun=pred,
                       miss=(pred - held.mean()) / held.mean())
    return row


def advised(spec, recs, target, left) -> str:
    """The run the advisor (this source tree's) chooses on the records ``recs``: the first step of
    its plan within ``left`` core-hours, as ``collect --adaptive`` chooses (its request,
    :func:`perfcast.collect.adaptive._request`); the journal's collector prices are left out."""
    import dataclasses

    from perfcast.analysis.advisor import advise, metrics_needed
    from perfcast.collect.adaptive import _request
    from perfcast.collect.campaign import build_experiment
    from perfcast.errors import PerfcastError
    from perfcast.modelset import model

    exp = build_experiment(spec, recs)
    ms = model(exp, metrics_needed(exp, None))
    req = _request(spec, exp, target)
    try:
        plan = advise(ms, exp, dataclasses.replace(req, budget=max(left, 1e-12))).plan
    except PerfcastError as e:
        return f"none ({e.message})"
    if not plan:
        return "none (empty plan)"
    return f"{plan[0]['kind']} {','.join(f'{k}={v:g}' for k, v in plan[0]['at'].items())}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", help="the campaign's output (X.perfcast) or its X.perfcast.campaign directory")
    ap.add_argument("--callpath", default="app")
    ap.add_argument("--metric", default="time")
    ap.add_argument("--advise", action="store_true",
                    help="also the run the advisor of this source tree would choose at each decision (the first "
                         "step of its plan within the budget left, as the campaign chooses)")
    args = ap.parse_args(argv)
    from perfcast.collect import collectors as coll
    from perfcast.collect.campaign import CampaignSpec

    cdir = Path(args.output)
    if not cdir.name.endswith(".campaign"):
        cdir = cdir.with_name(cdir.name + ".campaign")
    h = json.loads((cdir / "campaign.json").read_text())
    spec = CampaignSpec(**{**h["spec"], "collect": coll.parse_names(h["spec"]["collect"])})
    recs = records(cdir)
    start = next(r for r in recs if r.get("type") == "adaptive" and r.get("event") == "start")
    target = {k: float(v) for k, v in start["target"].items()}
    cuts = [i for i, r in enumerate(recs) if r.get("type") == "adaptive" and r.get("event") in ("choose", "stop")]
    rows = []
    for i in cuts:
        r = recs[i]
        row = step_row(spec, recs[:i], target, args.callpath, args.metric)
        row["step"] = r.get("step", "stop")
        row["journal_width"] = r.get("width")
        row["next"] = (f"{r['kind']} {','.join(f'{k}={v:g}' for k, v in r['at'].items())}" if r["event"] == "choose"
                       else f"stop: {r['reason']}")
        if args.advise:
            row["advised"] = advised(spec, recs[:i], target, float(start["budget"]) - float(r.get("spent") or 0.0))
        rows.append(row)
    last = rows[-1]
    per = last["_vd"] / (last["_c"] ** 2 * last["_d"] ** (2 * last["_growth"])) if last["_d"] > 0 else 0.0
    from perfcast.fit.special import t_quantile

    for row in rows:
        vd = per * row["_c"] ** 2 * row["_d"] ** (2 * row["_growth"])
        V = row["_rest"] + vd
        ws = V * V / (row["_rest"] ** 2 / row["_dof"] + vd * vd / max(last["drift_dof"], 1)) if vd > 0 else row["_dof"]
        row["drift_last"] = 2 * float(t_quantile(np.array(ws), 0.95)) * math.sqrt(V) / row["_c"]
    pct = lambda v: "" if v is None or not math.isfinite(v) else f"{v:.1%}"  # noqa: E731
    held = lambda r: f"{r['held_at']:g} ({r['held_mean']:.4g}, {r['held_runs']})" if "held_at" in r else ""  # noqa: E731
    print(f"target {target}, series {args.callpath} ({args.metric})")
    print("| step | runs (value:reps) | formula | value | 90% interval | width (journal) | coef | noise | alt | drift "
          "| noise | drift/doubling | drift dof | dof | q | width: no drift | drift dof inf | last drift "
          "| held out (mean, reps) | kept top | check's prediction | miss | next |" + (" advised now |" if args.advise else ""))
    print("|" + "---|" * (24 if args.advise else 23))
    for r in rows:
        sh = r["shares"]
        print(f"| {r['step']} | {r['runs']} | {r['formula']} | {r['value']:.4g} | [{r['lower']:.4g}, {r['upper']:.4g}] "
              f"| {pct(r['width'])} ({pct(r['journal_width'])}) | " + " | ".join(f"{sh[k]:.0%}" for k in PARTS)
              + f" | {r['noise']:.3g} | {r['drift']:.3g} | {r['drift_dof']} | {r['dof']:.2f} | {r['q']:.2f} "
              f"| {pct(r['no_drift'])} | {pct(r['drift_dof_inf'])} | {pct(r['drift_last'])} | {held(r)} "
              f"| {r.get('kept', '')} | {r.get('rerun', math.nan):.4g} | {pct(r.get('miss'))} | {r['next']} |"
              + (f" {r['advised']} |" if args.advise else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

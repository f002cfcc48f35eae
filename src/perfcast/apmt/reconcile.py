"""Every prediction of the same quantity side by side (issue 23, item 1).

An APMT breakdown predicts the time of the kernels it found and of the MPI routines; the PMNF models
of the measured times (``perfcast predict``) predict each timer of the application, the whole run
included.  They answer different questions, and a user who sees 0.026 s in one place and 1.2 s in
another needs both put next to each other with what each covers and which to believe:

* the APMT total, and the PMNF prediction (with its interval) of the *run time* -- the time series
  of the root of the calling-context tree measuring the most at the largest profiled point (the
  campaign's whole-run time, ``app``; Caliper's ``main``; of an exclusive metric such as CUBE's
  ``time`` the root's inclusive time, its callees' included); the other roots (Caliper's top-level MPI
  calls, ``(unannotated)``) are parts of the run beside it, listed as such (``run_time`` false);
* per kernel mapped to a timer (``--timer kernel=callpath``), its APMT time and the PMNF prediction
  of that timer, and whether the two agree (APMT's value inside the PMNF interval);
* per kernel modelled on a time series of its own (:func:`perfcast.apmt.model._time_models`):
  ``same`` -- the series is the experiment's, its model predict's, the numbers equal; ``inclusive``
  -- the kernel is its callpath's own time (callees taken off), predict's number for the callpath
  includes the callees: both shown, and which answers what;
* what APMT's total leaves out: the kernels without a time (with their share of the cost metric at
  the largest profiled point) and everything outside the kernels and the MPI routines;
* coverage: APMT's total at the largest profiled point (the largest within the cores where that one's
  ranks outnumbered them) over the measured run time there -- how much
  of what was measured APMT accounts for where both are known;
* one verdict: which number is the best estimate of the run's time at the target, and why;
* when the run at the target was measured too (validation runs, never fitted), the check of the
  verdict: each estimate's error against that measurement, whether it lies in the PMNF interval,
  and whether the measurement confirms the estimate the verdict chose.

Times per rank are combined as APMT combines them (the slowest rank: ``max``), so the two sides
model the same quantity; run-level times exist on one rank only and are that value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import PerfcastError

#: APMT accounts for less than this share of the measured run time: its total is partial
PARTIAL = 0.8
#: the rank combination of the time series compared (fit_apmt's default ``ranks``)
RANKS = "max"


@dataclass(frozen=True)
class Verdict:
    best: str          # "pmnf", "apmt" or "agree"
    text: str


def verdict(apmt_total: float, run: Mapping | None, coverage: float | None, oversubscribed: bool,
            root: str = "", where: str = "the largest profiled point") -> Verdict:
    """The best estimate of the run's time (module doc).  ``run``: the PMNF prediction row of the run
    time (``value``, ``lower``, ``upper``); ``coverage``: APMT / measured run time at ``where`` (the
    largest profiled point, or the largest within the cores)."""
    if run is None:
        return Verdict("apmt", "no measured run time to compare with: the APMT total is the only estimate")
    v, lo, hi = run["value"], run["lower"], run["upper"]
    pmnf = f"the PMNF model of the measured {root} time, {v:.4g} s"
    if v is None or not v >= 0:
        # a time below zero (or undefined): the model does not hold at the target (predict's note)
        return Verdict("apmt", f"{pmnf}, is no time: that model does not hold at the target, so the APMT total, "
                               f"{apmt_total:.4g} s, is the only estimate")
    if coverage is not None and coverage < PARTIAL:
        return Verdict("pmnf", f"best estimate of the run's time: {pmnf} -- APMT's total accounts for "
                               f"{coverage:.1%} of the measured run time at {where}: it holds "
                               "the kernels and MPI routines it models, not the rest of the run; use it for the "
                               "breakdown of those parts"
                               + ("; but the measured runs were oversubscribed or shared their cores with other processes, "
                                  "so the PMNF model predicts descheduled runs like them, not a run on free cores "
                                  "(low confidence)"
                                  if oversubscribed else ""))
    agree = agrees(apmt_total, run)
    if agree:
        return Verdict("agree", f"the two agree: APMT's {apmt_total:.4g} s lies in the interval of {pmnf} "
                                f"[{lo:.4g}, {hi:.4g}]; APMT adds the breakdown")
    how = ("they disagree" if agree is False else "its interval, clipped at 0, cannot tell them apart"
           if run.get("clipped") else "the PMNF model has no interval to compare them in")
    if oversubscribed:
        return Verdict("apmt", f"{how} (APMT {apmt_total:.4g} s, {pmnf}): the measured times include "
                               "descheduling of oversubscribed runs (or of runs sharing their cores with other "
                               "processes), so the APMT total (counts, and communication fitted within the "
                               "cores) is the better estimate for a run on free cores")
    return Verdict("pmnf", f"{how} (APMT {apmt_total:.4g} s, {pmnf}): the PMNF model is fitted on "
                           "the run time itself and is the better estimate of it; APMT's parts explain where "
                           "it goes")


def _largest_point(exp) -> dict | None:
    """The measured point with every parameter at its largest measured value, else the measured point
    largest in the process count then the other parameters (parameter order)."""
    pts = exp.points()
    if pts.empty:
        return None
    top = {p: float(pts[p].max()) for p in exp.parameters}
    mask = (pts[list(top)] == list(top.values())).all(axis=1)
    if mask.any():
        return top
    row = pts.sort_values(list(exp.parameters)).iloc[-1]
    return {p: float(row[p]) for p in exp.parameters}


def _largest_within_cores(exp, big: dict | None) -> dict | None:
    """``big`` (:func:`_largest_point`), or where its ranks outnumbered the cores of the campaign's
    machine (:func:`perfcast.analysis.oversubscription.oversubscription`) the largest point of the runs
    the cores held; ``big`` when there is none."""
    from ..analysis.oversubscription import oversubscription

    over = oversubscription(exp) if big is not None else None
    if over is None or big.get(over.parameter) not in set(over.over) or not over.within():
        return big
    return _largest_point(exp.select(**{over.parameter: list(over.within())}))


def _time_metric(exp) -> str | None:
    if "time" in exp.metrics and exp.metrics["time"].kind == "time":
        return "time"
    from ..analysis.kernels import time_metric

    tree = time_metric(exp)   # the one `kernels` ranks by and `view` shows (Caliper: avg#, not min#)
    if tree is not None and not tree.startswith("pmpi"):
        return tree
    return next((n for n, m in exp.metrics.items() if m.kind == "time" and not n.startswith("pmpi")), None)


def reconcile(exp, model, pred, timers: Mapping[str, str] | None = None, level: float = 0.9,
              measured=None, times=None, times_label: str | None = None) -> dict:
    """The side-by-side of :func:`verdict`'s inputs for one APMT ``pred`` (module doc) as a dict
    (``timers``: kernel -> timer callpath, default the model's own):
    ``at``, ``apmt`` (total, computation, communication), ``runs`` (per root: PMNF prediction and the
    measured mean at the largest profiled point), ``kernels`` (APMT vs PMNF of its timer),
    ``left_out``, ``coverage``, ``oversubscribed``, ``verdict``, ``times_from`` and ``check``
    (:func:`check`; None without ``measured``, an experiment of validation runs with the same
    parameters).

    ``times``: another experiment of the same application with the same parameters (a timing
    campaign: more points, larger scales than the counter runs APMT is fitted on) whose PMNF models
    give the run-time and timer predictions instead of ``exp``'s own timers, so that the run's time
    has one PMNF estimate, not one per campaign (``times_label`` names it in ``times_from``);
    the coverage stays APMT's total over the run time measured with it, in ``exp``."""
    import perfcast

    from ..analysis.validation import measured_means

    timers = dict(model.timers if timers is None else timers)
    src = exp if times is None else times
    if times is not None and list(times.parameters) != list(exp.parameters):
        raise PerfcastError(f"the run-time experiment{f' {times_label}' if times_label else ''}: its parameters "
                            f"({', '.join(times.parameters) or 'none'}) "
                            f"differ from the APMT experiment's ({', '.join(exp.parameters) or 'none'})")
    metric = _time_metric(src)
    at = dict(pred.at)
    base = {"at": at, "apmt": {"total": pred.total,
                               "computation": pred.computation if pred.computation_modelled else None,
                               "communication": pred.comm_total}}
    untimed = [k for k, v in pred.kernels.items() if v["total"] is None]
    big = _largest_point(exp)
    label = ",".join(f"{k}={v:g}" for k, v in (big or {}).items())
    shares = {k.name: k.share.get(label) for k in model.kernelset.kernels}
    left_out = [{"kernel": k, "cost_share": shares.get(k), "cost_metric": model.kernelset.metric or None, "at": label}
                for k in untimed]
    if getattr(pred, "size_ratio", 1.0) != 1.0:
        # APMT's larger problem (work per rank p / R): no PMNF model knows that size -- theirs at the same
        # point is the profiled problem, another run; set side by side, they were called agreeing
        return {**base, "runs": [], "kernels": [], "left_out": left_out, "coverage": None,
                "oversubscribed": None, "check": None, "times_from": times_label,
                "verdict": {"best": "apmt", "text": f"the problem is {pred.size_ratio:g}x the profiled size: the "
                                                    "PMNF models of the measured times are of the profiled size "
                                                    "(another run), so the APMT total is the only estimate"}}
    if metric is None:
        return {**base, "runs": [], "kernels": [], "left_out": left_out, "coverage": None,
                "oversubscribed": None, "check": None, "times_from": times_label,
                "verdict": {"best": "apmt", "text": "the experiment has no time metric: the APMT total is the "
                                                    "only estimate"}}
    mpi = {"MPI", "APP"}
    have = _timed(src, metric)
    roots = [r for r in src.tree.roots() if r not in mpi and r in have]
    mapped = {k: t for k, t in timers.items() if k in pred.kernels and t in have}
    # the kernels timed on a series of their own (no mapped timer): predict's number for its callpath
    # (the same series, or the inclusive time of the kernel's one callpath); not with another
    # campaign's times (the kernels' series are this experiment's)
    kcps = {} if times is not None else _kernel_callpaths(model, pred, metric, have, mapped)
    paths = list(dict.fromkeys(roots + list(mapped.values()) + [cp for cp, _ in kcps.values()]))
    if not paths:
        return {**base, "runs": [], "kernels": [], "left_out": left_out, "coverage": None,
                "oversubscribed": None, "check": None, "times_from": times_label,
                "verdict": {"best": "apmt", "text": f"no run time ({metric} of a root callpath) was measured: the "
                                                    "APMT total is the only estimate"}}
    # the whole metric fitted, as `perfcast predict` fits it: a series' model depends on its group
    # (the drift and noise shape pooled over the metric's series), so fitting the selected
    # callpaths alone gave the demo's app 0.928 s where predict said 0.827 s
    wanted = set(paths)
    opts = getattr(model, "pmnf_options", None)
    ms = perfcast.model(src, [metric], locations=RANKS, options=opts)
    rows = {r["callpath"]: r for r in ms.predict(at, level) if r["callpath"] in wanted}
    # a root's run time is its inclusive time: of an exclusive metric (CUBE's time) the root's own
    # series is only the time outside its callees, so a root's run time is the sum of the models
    # under it (the total `advise` takes) and its measurements those of the metric made inclusive
    # (`perfcast view`'s inclusive column); the kernels keep their own series
    run_src, run_rows = _inclusive(src, metric), rows
    if run_src is not src:
        from ..analysis.advisor import subtree_total

        run_rows = {r: subtree_total(ms, metric, [r, *src.tree.descendants(r)], at, level, r) for r in roots}
    # the run time measured with the counters (where APMT's total is known too): exp's own
    own = _own_times(run_src if times is None else _inclusive(exp, metric), metric, roots)
    # the coverage's point: the largest whose ranks the cores held (APMT's CPIs come from such runs; a
    # run with more ranks than cores measures descheduling too), else the largest
    cover = _largest_within_cores(exp, big)
    means = measured_means(own, exp.parameters, RANKS) if cover is not None and own is not None else {}
    key = tuple(cover[p] for p in exp.parameters) if cover is not None else ()
    apmt_big = model.predict(cover).total if cover is not None else None
    runs = []
    for r in roots:
        row = run_rows.get(r)
        m = means.get((r, metric, key))
        runs.append({"callpath": r, "metric": metric, "pmnf": _row(row), "measured_at_largest": None if m is None
                     else m[0], "largest": cover, "made_inclusive": run_src is not src})
    kernels = []
    for k, t in mapped.items():
        row = rows.get(t)
        a = pred.kernels[k]["total"]
        kernels.append({"kernel": k, "timer": t, "apmt": a, "pmnf": _row(row), "agree": agrees(a, row),
                        "relation": "timer"})
    for k, (cp, relation) in kcps.items():
        row = rows.get(cp)
        a = pred.kernels[k]["total"]
        agree = None if relation != "same" else agrees(a, row)
        kernels.append({"kernel": k, "timer": cp, "apmt": a, "pmnf": _row(row), "agree": agree, "relation": relation})
    # the run time: the root measuring most at the largest point
    seen = [(x["measured_at_largest"], x) for x in runs if x["measured_at_largest"]]
    # (the root measuring most at the largest point; without a measurement there, the largest PMNF
    # estimate): the one run-time scope; every other root is a part of the run beside it
    pm = [(x["pmnf"]["value"], x) for x in runs if x["pmnf"] is not None]
    run = (max(seen, key=lambda t: t[0])[1] if seen else max(pm, key=lambda t: t[0])[1] if pm
           else runs[0] if runs else None)
    for x in runs:
        x["run_time"] = x is run
    coverage = (apmt_big / run["measured_at_largest"]
                if run is not None and run["measured_at_largest"] and apmt_big is not None else None)
    over = ms.oversubscribed
    # with another campaign's times the note above is that campaign's; the coverage's measured run
    # time is this experiment's own, at its largest point: say when that run shared its cores
    shared = None
    if coverage is not None and times is not None:
        from ..analysis.oversubscription import oversubscription

        own_over = oversubscription(exp)
        if own_over is not None and cover.get(own_over.parameter) in (
                set(own_over.over) | {q for q, _ in own_over.contended}):
            shared = own_over.note()
    v = verdict(pred.total, run["pmnf"] if run else None, coverage, over is not None,
                run["callpath"] if run else "", "the largest profiled point" if cover == big else
                "the largest profiled point within the cores (" + ", ".join(f"{k}={x:g}" for k, x in cover.items()) + ")")
    return {**base, "runs": runs, "kernels": kernels, "left_out": left_out,
            "check": None if measured is None else check(measured, exp.parameters, run, pred.total, v.best, metric,
                                                         fitted={"apmt": exp, "pmnf": src}),
            "coverage": None if coverage is None else {"value": coverage, "at": cover, "apmt": apmt_big,
                                                       "measured": run["measured_at_largest"],
                                                       "callpath": run["callpath"], "shared": shared},
            "oversubscribed": None if over is None else over.to_dict(), "times_from": times_label,
            "verdict": {"best": v.best, "text": v.text}}


def _kernel_callpaths(model, pred, metric: str, have: set, mapped: Mapping) -> dict:
    """kernel -> (callpath, relation) for the kernels whose time is modelled on a series of
    ``metric`` (:func:`perfcast.apmt.model._time_models`) and have no mapped timer: ``same`` -- the
    kernel's time is that callpath's series (its model is predict's); ``inclusive`` -- the kernel is
    that one callpath's own time, its callees' taken off, while predict models the callpath's
    inclusive time."""
    out = {}
    for km in getattr(model, "kernels", ()):
        ts = km.time_series
        if km.name in mapped or km.name not in pred.kernels or ts is None or ts[1] != metric:
            continue
        cp, _, source = ts
        if source == "experiment" and cp in have:
            out[km.name] = (cp, "same")
            continue
        k = next((k for k in model.kernelset.kernels if k.name == km.name), None)
        if k is not None and len(k.callpaths) == 1 and k.callpaths[0] in have:
            out[km.name] = (k.callpaths[0], "inclusive")
    return out


def _timed(exp, metric: str) -> set:
    """The callpaths with values of ``metric`` in ``exp``."""
    return set(map(str, exp.data.loc[exp.data["metric"] == metric, "callpath"].unique()))


def _inclusive(exp, metric: str):
    """``exp`` with ``metric`` inclusive (each callpath's subtree summed) when it is exclusive, so
    that a root's value is the whole time under it; ``exp`` itself otherwise."""
    m = exp.metrics.get(metric)
    return exp.to_inclusive(metric) if m is not None and m.scope == "exclusive" else exp


def _own_times(exp, metric: str, paths: list[str]):
    """``exp``'s own measurements of the run-time callpaths ``paths`` (the coverage's measured run
    time), or None when it has none of them."""
    if metric not in exp.metrics:
        return None
    have = _timed(exp, metric)
    keep = [p for p in paths if p in have]
    return exp.select(metric=metric, callpath=keep, literal=True) if keep else None


def check(measured, parameters, run: Mapping | None, apmt_total: float, best: str, metric: str,
          fitted: Mapping | None = None) -> dict | None:
    """The verdict checked against the run measured at the target: ``measured`` (validation runs)
    holds the run-time callpath ``run`` at ``run``'s point? Then ``value`` (its mean, ranks combined
    as :data:`RANKS`), ``repetitions``, each estimate's relative ``error`` (APMT's, PMNF's), whether
    the measurement lies in the PMNF ``interval``, which estimate is ``closer`` and whether that is
    the one the verdict chose (``confirms``).  None when the run time was not measured there;
    ``oversubscribed`` says when the measured runs themselves were (their times include
    descheduling); ``fitted``: estimate -> the experiment it was fitted on, and ``fitted_on`` then names
    the estimates whose runs include the target point (--run-times or the APMT experiment holding it:
    no independent check of those)."""
    from ..analysis.oversubscription import oversubscription
    from ..analysis.validation import measured_means

    if run is None or run["pmnf"] is None or metric not in measured.metrics:
        return None
    at = run["pmnf"]["at"]
    measured = _inclusive(measured, metric)     # the run time: the root's inclusive time
    sub = measured.select(metric=metric, callpath=[run["callpath"]], literal=True)
    if sub.data.empty:
        return None
    m = measured_means(sub, parameters, RANKS).get((run["callpath"], metric, tuple(float(at[p]) for p in parameters)))
    if m is None or not m[0] > 0:
        return None
    value, reps = m
    p = run["pmnf"]
    err = {"apmt": (apmt_total - value) / value, "pmnf": (p["value"] - value) / value}
    closer = min(err, key=lambda k: abs(err[k]))
    inside = None if p["lower"] is None else bool(p["lower"] <= value <= p["upper"])
    over = oversubscription(measured)
    chosen = {"agree": None, "apmt": "apmt", "pmnf": "pmnf"}[best]
    key = {p: float(at[p]) for p in parameters}
    fitted_on = [name for name, e in (fitted or {}).items()
                 if e is not None and not e.points().empty
                 and (e.points()[list(key)].astype(float) == list(key.values())).all(axis=1).any()]
    return {"callpath": run["callpath"], "metric": metric, "at": dict(at), "value": value, "repetitions": reps,
            "fitted_on": fitted_on,
            "error": err, "inside": inside, "closer": closer,
            "confirms": None if chosen is None else chosen == closer,
            "oversubscribed": None if over is None else over.to_dict()}


def agrees(apmt: float | None, row) -> bool | None:
    """Whether an APMT time and a PMNF prediction ``row`` (value, lower, upper, clipped) of the same
    time agree: APMT's inside the interval.  None (not comparable) without either, and for a value
    below the prediction when the interval was clipped at 0: its lower end lay below zero, so no
    smaller time could disagree (CoMD's ljForce, APMT 1.096 s against 4.246 s [0 (clipped), 39.08])."""
    if apmt is None or row is None or row.get("lower") is None or row.get("upper") is None:
        return None
    if row.get("clipped") and apmt < row["value"]:
        return None
    return bool(row["lower"] <= apmt <= row["upper"])


def _row(row) -> dict | None:
    if row is None:
        return None
    return {k: row[k] for k in ("at", "value", "lower", "upper", "level", "clipped", "confidence", "formula")}


def lines(rec: Mapping) -> list[str]:
    """The side-by-side as text lines (``perfcast predict --breakdown``)."""
    at = ", ".join(f"{k}={v:g}" for k, v in rec["at"].items())
    out = [f"every prediction of the run at {at}:",
           f"  APMT total (above)            {rec['apmt']['total']:.4g} s  (computation "
           + ("not modelled" if rec["apmt"]["computation"] is None else f"{rec['apmt']['computation']:.4g} s")
           + f", communication {rec['apmt']['communication']:.4g} s)"]
    # with another campaign's times (--run-times) the scope is chosen on this (the APMT) experiment's
    # runs, at its largest point, and modelled on the other's: each named with the experiment it is of
    other = rec.get("times_from")
    src = f"; its PMNF model fitted on {other}" if other else ""
    run = next((r for r in rec["runs"] if r.get("run_time")), None)
    if run is not None and run["pmnf"] is not None:
        big = ", ".join(f"{k}={v:g}" for k, v in (run.get("largest") or {}).items())
        why = (f"the top-level callpath measuring the most at {big}"
               + (" in the APMT experiment's (profiled) runs" if other else "")
               if run["measured_at_largest"] is not None
               else "the top-level callpath predicted the largest" + (f" by the models of {other}" if other else ""))
        inc = " with its callees: the sum of their models" if run.get("made_inclusive") else ""
        out.append(f"  PMNF {run['callpath']} ({run['metric']}{inc}, the run time: {why}{src})  {_pm(run['pmnf'])}")
    parts = [r for r in rec["runs"] if r is not run and r["pmnf"] is not None]
    if parts:
        out.append(f"  parts of the run beside {run['callpath'] if run is not None else 'it'} (other top-level "
                   "callpaths; not run times), PMNF: " + ", ".join(
                       f"{r['callpath']} {r['pmnf']['value']:.4g} s"
                       + (" (!) negative" if r["pmnf"]["value"] < 0 else "") for r in parts))
    for k in rec["kernels"]:
        a = "-" if k["apmt"] is None else f"{k['apmt']:.4g} s"
        pm = _pm(k["pmnf"]) if k["pmnf"] else "-"
        rel = k.get("relation", "timer")
        if rel == "same":
            out.append(f"  {k['kernel']}: APMT {a} = PMNF {k['timer']} {pm}: the same model of the same series "
                       "(`perfcast predict`'s)" + (" -- APMT counts its negative value as 0" if
                                                     k["pmnf"] and k["pmnf"]["value"] < 0 else ""))
        elif rel == "inclusive":
            out.append(f"  {k['kernel']}: APMT {a} is its own time (its callees' taken off: they are kernels or rest "
                       f"here); PMNF {k['timer']} {pm} is the callpath's inclusive time, callees included: "
                       "believe APMT's for the kernel alone, predict's for the callpath with its callees")
        else:
            state = {True: "agree", False: "disagree", None: "not comparable"}[k["agree"]]
            if k["agree"] is None and k["pmnf"] and k["pmnf"].get("clipped") and k["apmt"] is not None:
                state += " (below the PMNF value, in an interval clipped at 0: nothing smaller can disagree)"
            out.append(f"  {k['kernel']}: APMT {a}, PMNF {k['timer']} {pm}: {state}")
    if rec["left_out"]:
        out.append("  not in APMT's total: " + ", ".join(
            k["kernel"] + (f" ({k['cost_share']:.1%} of the {k.get('cost_metric') or 'cost'} at {k['at']})"
                           if k["cost_share"] is not None else "")
            for k in rec["left_out"]) + "; and whatever runs outside the kernels and MPI routines (start-up, I/O)")
    c = rec["coverage"]
    if c is not None:
        pt = ", ".join(f"{k}={v:g}" for k, v in c["at"].items())
        out.append(f"  at {pt} (measured): APMT {c['apmt']:.4g} s vs {c['callpath']} {c['measured']:.4g} s: "
                   f"APMT accounts for {c['value']:.1%}")
        if c.get("shared"):
            out.append(f"  note: that run time is the APMT experiment's, where {c['shared']}")
    if rec["oversubscribed"]:
        out.append(f"  note: {rec['oversubscribed']['note']}")
    out.append("  => " + rec["verdict"]["text"])
    if rec.get("check") is not None:
        out.append("  " + check_line(rec["check"]))
    return out


def check_line(c: Mapping) -> str:
    """:func:`check`'s result as one line."""
    pt = ", ".join(f"{k}={v:g}" for k, v in c["at"].items())
    name = {"apmt": "APMT", "pmnf": "PMNF"}
    inside = {True: " (inside its interval)", False: " (outside its interval)", None: ""}[c["inside"]]
    what = (f"the estimate the verdict chose ({name[c['closer']]}) was the closer" if c["confirms"] else
            f"{name[c['closer']]} was the closer, not the verdict's choice" if c["confirms"] is False else
            f"{name[c['closer']]} was the closer")
    name_of = {"apmt": "APMT", "pmnf": "the PMNF model"}
    fitted = c.get("fitted_on") or []
    how = ("measured, not fitted" if not fitted else
           f"measured; {' and '.join(name_of[f] for f in fitted)} {'were' if len(fitted) > 1 else 'was'} fitted on "
           "runs at this point too: no independent "
           "check of " + ("them" if len(fitted) > 1 else "it"))
    return (f"checked at {pt} ({how}): {c['callpath']} {c['value']:.4g} s "
            f"({c['repetitions']} run(s)): PMNF {c['error']['pmnf']:+.1%}{inside}, APMT "
            f"{c['error']['apmt']:+.1%}: {what}"
            # what the measured runs shared: more ranks than cores, or cores other processes kept busy
            + (f"; of the runs measured there, {c['oversubscribed']['note']}" if c["oversubscribed"] else ""))


def _pm(p: Mapping) -> str:
    """A PMNF estimate as `predict` prints it: a negative value marked, a clipped bound said."""
    v = f"{p['value']:.4g} s" + (" (!) negative: the model does not hold here" if p["value"] < 0 else "")
    if p["lower"] is None:
        return f"{v} ({p['confidence']} confidence)"
    lo = "0 (clipped)" if p.get("clipped") else f"{p['lower']:.4g}"
    return f"{v} [{lo}, {p['upper']:.4g}] ({p['level']:.0%}; {p['confidence']} confidence)"

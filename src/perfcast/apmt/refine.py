"""Refinement loop (APMT, seed 000): validate, attribute the error, say which runs would fix it.

* :func:`validate` compares predictions with measured runs that were not used for fitting: per run
  the relative error of the total, and -- where the validation runs carry them -- of computation
  (the mapped timers / kernel times) and communication (the PMPI time of the modelled routines).
  The larger of the two component errors is where the error comes from; without a computation to
  compare (no mapped timer), the rest of the measured total (beyond the PMPI time) is compared with
  the rest of the predicted one, and a larger error there is said to come from outside the modelled
  communication.  The PMPI profile sums
  every call of the run: where that exceeds the measured total (a timer of part of the run), the
  communication is no part of it -- said per run, with no communication error; the error the
  mapped kernels leave is then attributed to the rest of the total, not split.
* Advice (APMT): a communication error -> two more process counts (one to refit, one to validate);
  a computation error -> rerun one profiled process count at a lower CPU frequency, which lets
  Eq 5 separate CPI_core from BF_mem.
* :func:`apply_eq5` solves Eq 5 when the experiment has runs at >= 2 frequencies (a parameter named
  f / freq / frequency ...): CPI(f) = CPI_core + BF_mem * M(f), M(f) = memory-hierarchy cycles per
  instruction, where cache latencies stay fixed in core cycles and the main-memory latency stays
  fixed in seconds (so its cycle count scales with f).  Intercept = CPI_core, slope = BF_mem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import LOCATION_COLUMNS, Experiment, reduce_over_locations, reduce_over_repetitions
from ..analysis import kernels as kmod
from . import comm as cmod


@dataclass
class Validation:
    rows: list            # dicts: at, measured, predicted, error, comp/comm measured & predicted
    target: float
    mean_error: float
    attribution: str | None
    advice: list = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for r in self.rows:
            at = ", ".join(f"{k}={kmod._num(v)}" for k, v in r["at"].items())
            s = f"{at}: measured {r['measured']:.4g} s, predicted {r['predicted']:.4g} s, error {r['error']:+.1%}"
            if r.get("comp_error") is not None:
                s += f" (computation {r['comp_error']:+.1%}"
                s += f", communication {r['comm_error']:+.1%})" if r.get("comm_error") is not None else ")"
            out.append(s)
        # after the rows (``compare`` prints its own row lines and then these from len(rows) on)
        for r in self.rows:
            if r.get("comm_scope"):
                at = ", ".join(f"{k}={kmod._num(v)}" for k, v in r["at"].items())
                out.append(f"{at}: {r['comm_scope']}")
        ok = self.mean_error <= self.target
        out.append(f"mean absolute error {self.mean_error:.1%} "
                   + ("meets" if ok else "misses") + f" the target {self.target:.0%}")
        if self.attribution:
            out.append(f"the error comes mostly from {self.attribution}")
        out.extend(self.advice)
        return out

    def to_dict(self) -> dict:
        return {"rows": self.rows, "target": self.target, "mean_error": self.mean_error,
                "attribution": self.attribution, "advice": list(self.advice)}


def measured_totals(exp: Experiment, callpath: str, metric: str = "time") -> pd.Series:
    """Mean over repetitions of a run-level value (max over ranks) per point, both by the one rule
    (:func:`reduce_over_locations`, :func:`reduce_over_repetitions`): a sparse profile's run that
    measured ``metric`` but lacks ``callpath`` did not run it, a 0."""
    if callpath not in exp.data["callpath"].cat.categories:
        raise PerfcastError(f"the validation runs have no callpath {callpath!r} (choose the measured total with "
                            "--measure CALLPATH)")
    # every callpath of the metric: which runs measured it
    sub = exp.select(metric=metric).data
    params = list(exp.parameters)
    if any(c in sub.columns for c in LOCATION_COLUMNS):
        sub = reduce_over_locations(exp, sub, "max")
    sub = reduce_over_repetitions(exp, sub, "mean")
    sub = sub[(sub["callpath"] == callpath).to_numpy()]
    return sub.groupby(params, observed=True)["value"].mean()


def timer_series(exp: Experiment, kernel: str, callpath: str) -> tuple[pd.Series, str]:
    """The time of ``kernel`` from the application timer ``callpath`` mapped to it (``--timer
    KERNEL=CALLPATH``), per point of ``exp`` (:func:`measured_totals`: slowest rank, mean over the
    repetitions), and the metric it is read from (``time`` where the timer has it).  The one rule of a
    mapped timer: the kernel's effective CPI (:func:`perfcast.apmt.model.fit_apmt`) and Eq 5
    (:func:`apply_eq5`) read the same values."""
    if callpath not in exp.data["callpath"].cat.categories:
        raise PerfcastError(f"timer {callpath!r} for kernel {kernel!r} is not a callpath of the experiment")
    tsel = exp.select(callpath=callpath, literal=True)
    tm = "time" if "time" in tsel.metrics else next(iter(tsel.metrics))
    return measured_totals(exp, callpath, tm), tm


def _at(params, idx):
    return dict(zip(params, idx if isinstance(idx, tuple) else (idx,)))


def validate(model, validation: Experiment, measure: str, target: float = 0.15,
             timers: Mapping[str, str] | None = None, size_ratio: Mapping | None = None,
             metric: str = "time") -> Validation:
    params = list(model.parameters)
    if set(validation.parameters) != set(params):
        raise PerfcastError(f"validation runs have parameters {', '.join(validation.parameters)}, the model "
                            f"{', '.join(params)}")
    meas = measured_totals(validation, measure, metric)
    # the mapped timers the validation runs measured: the computation compared is theirs on both sides
    # (a timer missing there was left out of the measured sum but its kernel kept in the predicted one)
    timers = {k: tp for k, tp in (timers or {}).items() if tp in validation.data["callpath"].cat.categories}
    comp_meas = None
    if timers:
        comp_meas = sum(measured_totals(validation, tp) for tp in timers.values())
    comm_meas = None
    try:
        t, vp = cmod.mpi_table(validation)
        routines = [r for r in t["routine"].unique() if cmod.P2P.match(r) or cmod.COLLECTIVE.match(r)]
        per = (t[t["routine"].isin(routines)].groupby([*vp, "rep", "rank"], observed=True)["time"].sum()
               .groupby([*vp, "rep"], observed=True).max().groupby(vp, observed=True).mean())
        comm_meas = per
    except PerfcastError:
        pass
    rows = []
    no_comp = False
    for idx, m in meas.items():
        at = _at(params, idx)
        r = (size_ratio or {}).get(idx, 1.0)
        pr = model.predict(at, size_ratio=r)
        row = {"at": at, "measured": float(m), "predicted": pr.total, "error": (pr.total - m) / m}
        if comp_meas is not None and idx in comp_meas.index:
            cm = float(comp_meas.loc[idx])
            pc = sum(pr.kernels[k]["total"] or 0.0 for k in timers if k in pr.kernels)
            row.update(comp_measured=cm, comp_predicted=pc, comp_error=(pc - cm) / m)
        if comm_meas is not None and idx in comm_meas.index:
            cc = float(comm_meas.loc[idx])
            row.update(comm_measured=cc, comm_predicted=pr.comm_total, comm_error=(pr.comm_total - cc) / m)
            if cc > m:
                # a part larger than its whole: the PMPI profile sums every call of the run (examples/
                # jacobi: the barrier before its timed loop, the final reductions after it), the
                # measured total may be a timer of part of the run; the share of the calls inside it
                # is not in the profile
                row.update(comm_error=None, comm_scope=(
                    f"the measured communication ({cc:.4g} s: PMPI time of the modelled routines, slowest rank) "
                    f"exceeds the measured {measure} ({m:.4g} s): the PMPI profile counts every call of the run, "
                    f"also those outside {measure}, so it is no part of it -- no communication error"))
            else:
                # the rest of the measured total -- the kernels without a mapped timer and whatever
                # runs outside the modelled routines -- against the rest of the predicted total
                # (the computation of the kernels without a mapped timer: 0 when none is modelled)
                cm, pc = row.get("comp_measured", 0.0), row.get("comp_predicted", 0.0)
                rest = pr.total - pr.comm_total - pc
                row.update(rest_measured=float(m) - cc - cm, rest_predicted=rest,
                           rest_error=(rest - (float(m) - cc - cm)) / m)
        no_comp = no_comp or not pr.computation_modelled
        rows.append(row)
    if not rows:
        raise PerfcastError("no validation run to compare with")
    mean_err = float(np.mean([abs(r["error"]) for r in rows]))
    attribution = None
    ce = [abs(r["comp_error"]) for r in rows if r.get("comp_error") is not None]
    me = [abs(r["comm_error"]) for r in rows if r.get("comm_error") is not None]
    if ce or me:
        attribution = "computation" if (np.mean(ce) if ce else 0) >= (np.mean(me) if me else 0) else "communication"
    re = [abs(r["rest_error"]) for r in rows if r.get("rest_error") is not None]
    if re and np.mean(re) > max(np.mean(ce) if ce else 0.0, np.mean(me) if me else 0.0):
        # CloverLeaf (computation not modelled: no kernel had a time) missed its run time by -28% and
        # -59% with the communication within +55% and -2%: the error was the computation left out,
        # and the advice to profile more process counts could not fix it
        attribution = (f"outside the modelled {'communication' if not ce else 'kernels and communication'} "
                       f"(the kernels without a time and the rest of {measure}"
                       + ("; APMT models no computation here" if no_comp else "") + ")")
    wider = [r for r in rows if r.get("comm_scope")]
    if wider and ce and not me:
        # no communication part to compare: what the mapped kernels do not explain is the rest of the total
        rest = float(np.mean([abs(r["error"] - r["comp_error"]) for r in rows if r.get("comp_error") is not None]))
        if rest > np.mean(ce):
            attribution = (f"outside the mapped kernels (communication and the rest of {measure}; not split: the "
                           f"measured communication covers more than {measure})")
    advice = []
    if mean_err > target and attribution and attribution.startswith("outside the modelled"):
        advice.append("computation: the kernels without a time are not in APMT's total: map each to the "
                      "application's timer of it (--timer KERNEL=CALLPATH) or collect a cycles counter "
                      "(--collect counters) so that its time is modelled")
    elif mean_err > target:
        advice.extend(suggest_runs(model, attribution if attribution in ("computation", "communication") else None,
                                   [r["at"] for r in rows]))
    return Validation(rows, target, mean_err, attribution, advice)


def suggest_runs(model, attribution: str | None, targets: Sequence[Mapping]) -> list[str]:
    out = []
    procs = model.procs
    prof = model.profiled
    if procs is not None and prof is not None:
        pmax = float(prof[procs].max())
        tmax = max(float(t[procs]) for t in targets)
        if attribution in (None, "communication"):
            # two distinct counts above the profiled ones (the midpoint towards the targets and 2 x the
            # largest could coincide: "two more process counts (p=32)"); one measured already as a
            # validation run is said so -- it needs fitting on, not measuring
            mid = math.sqrt(pmax * tmax) if tmax > 2 * pmax else pmax + (tmax - pmax) / 2
            cands: list[float] = []
            for c in (2 * pmax, mid, 4 * pmax, 8 * pmax):
                c = float(round(c))
                if c > pmax and c not in cands:
                    cands.append(c)
            measured = {float(t[procs]) for t in targets if procs in t}
            named = [kmod._num(c) + (" (measured already: a validation run; fit on it)" if c in measured else "")
                     for c in sorted(cands[:2])]
            out.append(f"communication: profile two more process counts ({procs}={' and '.join(named)}; one to "
                       "refit the volume and Hockney models, one to validate) -- APMT's communication refinement")
        if attribution in (None, "computation"):
            out.append(f"computation: rerun one profiled point (e.g. {procs}={kmod._num(pmax)}) at a lower CPU "
                       "frequency (add a parameter f, e.g. cpupower frequency-set) so Eq 5 can separate "
                       "CPI_core from BF_mem")
    return out


def solve_eq5(cpi: Sequence[float], mem_cpi: Sequence[float]) -> tuple[float, float]:
    """Least-squares line CPI = CPI_core + BF_mem * M through >= 2 (M, CPI) points."""
    m = np.asarray(mem_cpi, float)
    c = np.asarray(cpi, float)
    if len(m) < 2 or np.ptp(m) <= 1e-12 * max(1.0, float(np.abs(m).max())):
        raise PerfcastError("Eq 5 needs runs whose memory cycles per instruction differ (two CPU frequencies)")
    A = np.column_stack([np.ones_like(m), m])
    (core, bf), *_ = np.linalg.lstsq(A, c, rcond=None)
    return float(core), float(bf)


@dataclass
class Eq5:
    """What Eq 5 did with the runs at several frequencies: the kernels whose CPI_core and BF_mem it
    refined (``refined``: kernel, cpi_core, bf_mem, time, points, frequencies) and why every other
    kernel kept its effective CPI (``not_refined``: kernel, reason; cpi_core and bf_mem where a line
    was solved but is no machine's).  ``nothing``: why no kernel was tried at all (one frequency, no
    function profile), else None."""
    parameter: str
    frequencies: list
    refined: list = field(default_factory=list)
    not_refined: list = field(default_factory=list)
    nothing: str | None = None

    def note(self) -> str:
        fs = ", ".join(kmod._num(v) for v in self.frequencies)
        head = f"Eq 5 over the runs at {self.parameter} = {fs}"
        if self.nothing:
            return f"{head} refined nothing: {self.nothing}"
        why = "; ".join(f"{r['kernel']}: {r['reason']}" for r in self.not_refined)
        if not self.refined:
            return f"{head} refined nothing (no kernel's CPI_core or BF_mem; every CPI is the effective one)" \
                + (f": {why}" if why else "")
        done = ", ".join(f"{r['kernel']} (CPI_core {r['cpi_core']:.3g}, BF_mem {r['bf_mem']:.3g}, {r['points']} "
                         f"points, time from {r['time']})" for r in self.refined)
        return f"{head} refined CPI_core and BF_mem of {done}" + (f"; not of {why}" if why else "")

    def to_dict(self) -> dict:
        return {"parameter": self.parameter, "frequencies": [float(v) for v in self.frequencies],
                "refined": [dict(r) for r in self.refined], "not_refined": [dict(r) for r in self.not_refined],
                "nothing": self.nothing}


def apply_eq5(exp: Experiment, fparam: str, ks, kms, machine, roles, ranks: str,
              time_metrics: Sequence[str], timers: Mapping[str, str] | None = None,
              procs: str | None = None, over=None) -> Eq5:
    """Refine CPI_core and BF_mem of every kernel that has instructions, memory counters and a time at
    two or more frequencies (frequency values in Hz, or GHz/MHz when below 1e3/1e6), by the least-squares
    line CPI(x) = CPI_core + BF_mem * M(x) through its points x (every profiled point at every
    frequency), where at each point, from the values measured there: CPI = time x f / instructions and
    M = memory-hierarchy cycles per instruction (:func:`perfcast.apmt.model.level_hits` of the measured
    counts; cache latencies in core cycles, the main-memory latency fixed in seconds, so its cycles scale
    with f / the machine's frequency).

    The time is the one the rest of the breakdown uses (:func:`perfcast.apmt.model.fit_apmt`): the
    application timer ``timers`` maps to the kernel (:func:`timer_series`), else the first of
    ``time_metrics`` -- the kernels' own time metrics (a campaign's ``time``, the run's wall time and
    the application's timers, is none: summed into ``rest`` it gave rest the whole run's time); and
    from the same runs: with ``over`` (:func:`perfcast.analysis.oversubscription.oversubscription`)
    the points whose ``procs`` the cores held, as the effective CPI.  A line with CPI_core <= 0 or
    BF_mem < 0 is no machine's: the kernel keeps its effective CPI, and says so."""
    from .model import MEMORY_ROLES, _within_cores, level_hits

    timers = dict(timers or {})
    freqs = sorted(float(v) for v in exp.data[fparam].unique())
    out = Eq5(fparam, freqs)
    if len(freqs) < 2:
        out.nothing = f"the runs have one {fparam} only"
        return out
    time_metrics = [m for m in time_metrics if m in exp.metrics]
    kexp = kmod.kernel_experiment(exp, ks, sorted({m for v in roles.values() if v for m in v} | set(time_metrics)))
    params = list(kexp.parameters)
    d = kexp.data
    if "rank" in d.columns:
        # over the ranks by the one rule (a sparse profile's rank without the kernel: 0)
        d = reduce_over_locations(kexp, d[[*params, "rep", "callpath", "metric",
                                           *[c for c in LOCATION_COLUMNS if c in d.columns], "value"]], ranks)
    tmetric = next((m for m in time_metrics if m in kexp.metrics), None)
    ins = roles.get("instructions")

    def skip(km, reason, **solved):
        out.not_refined.append({"kernel": km.name, "reason": reason, **solved})
        km.notes.append(f"Eq 5 not applied: {reason}")

    for km in kms:
        if not ins:
            skip(km, "no instruction counter")
            continue
        sub = d[d["callpath"] == km.name]
        piv = sub.pivot_table(index=params, columns="metric", values="value", aggfunc="mean", observed=True)
        if km.name in timers:
            tser, _ = timer_series(exp, km.name, timers[km.name])
            tsrc = f"timer {timers[km.name]}"
        elif tmetric is not None and tmetric in piv.columns:
            tser, tsrc = piv[tmetric], f"{tmetric} samples"
        else:
            skip(km, "no time of its own (no time metric on its functions, no --timer mapped to it)")
            continue
        tser = tser.reindex(piv.index)
        within = _within_cores(piv.index, params, procs, over)
        if within is not None:
            piv, tser = piv.loc[within], tser.loc[within]
        pts_cpi, pts_m, pts_f = [], [], set()
        for idx, row in piv.iterrows():
            at = dict(zip(params, idx if isinstance(idx, tuple) else (idx,)))
            f = _hz(at[fparam])
            n = sum(row.get(m, math.nan) for m in ins)
            t = float(tser.loc[idx])
            counts = {r: (float(sum(row.get(m, math.nan) for m in roles[r])) if roles.get(r) else None)
                      for r in MEMORY_ROLES}
            if not n > 0 or not math.isfinite(t) or any(v is not None and not math.isfinite(v)
                                                        for v in counts.values()):
                continue
            hits = level_hits(counts)
            if not hits:
                continue
            cyc = sum(h * machine.latency_cycles[lvl] for lvl, h in hits.items() if lvl != "memory")
            cyc += hits.get("memory", 0.0) * machine.latency_cycles["memory"] * f / machine.frequency_hz
            pts_cpi.append(t * f / n)
            pts_m.append(cyc / n)
            pts_f.add(f)
        if len(pts_f) < 2:
            skip(km, f"its time, instructions and memory counters together at {len(pts_f)} {fparam} only")
            continue
        try:
            core, bf = solve_eq5(pts_cpi, pts_m)
        except PerfcastError as e:
            skip(km, e.message)
            continue
        if not core > 0 or bf < 0:
            skip(km, "the line through its points is no machine's (CPI_core must be > 0, BF_mem >= 0): "
                     "its effective CPI is kept", cpi_core=core, bf_mem=bf)
            continue
        km.cpi_core, km.bf_mem = core, bf
        km.cpi = core
        km.cpi_source = f"CPI_core from Eq 5 ({fparam} = {', '.join(kmod._num(v) for v in freqs)})"
        # the runs' spread is now their miss of the line (the effective CPI's spread across runs was
        # that of another quantity): standard deviation of the residuals, two coefficients fitted
        c, mm = np.asarray(pts_cpi), np.asarray(pts_m)
        km.cpi_std = float(np.sqrt(np.sum((c - core - bf * mm) ** 2) / (len(c) - 2))) if len(c) > 2 else None
        out.refined.append({"kernel": km.name, "cpi_core": core, "bf_mem": bf, "time": tsrc,
                            "points": len(pts_cpi), "cpi_mean": float(np.mean(c)), "residual_std": km.cpi_std})
    return out


def _hz(v: float) -> float:
    v = float(v)
    if v < 1e3:
        return v * 1e9   # GHz
    if v < 1e6:
        return v * 1e6   # MHz
    return v

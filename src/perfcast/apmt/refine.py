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


def apply_eq5(exp: Experiment, fparam: str, ks, kms, machine, roles, ranks: str,
              time_metrics: Sequence[str]) -> list[str]:
    """Refine CPI_core and BF_mem of every kernel that has instructions, memory counters and a time at
    two or more frequencies (frequency values in Hz, or GHz/MHz when below 1e3/1e6).  ``time_metrics``:
    the metrics that are the kernels' own time, the first one used (the build's rule,
    :func:`perfcast.apmt.model.fit_apmt`: a campaign's ``time`` -- the run's wall time and the
    application's timers -- is none; summed into ``rest`` it gave rest the whole run's time)."""
    notes = []
    freqs = sorted(exp.data[fparam].unique())
    if len(freqs) < 2:
        return notes
    time_metrics = [m for m in time_metrics if m in exp.metrics]
    kexp = kmod.kernel_experiment(exp, ks, sorted({m for v in roles.values() if v for m in v} | set(time_metrics)))
    params = list(kexp.parameters)
    d = kexp.data
    if "rank" in d.columns:
        # over the ranks by the one rule (a sparse profile's rank without the kernel: 0)
        d = reduce_over_locations(kexp, d[[*params, "rep", "callpath", "metric",
                                           *[c for c in LOCATION_COLUMNS if c in d.columns], "value"]], ranks)
    tmetric = next((m for m in time_metrics if m in kexp.metrics), None)
    for km in kms:
        ins = roles.get("instructions")
        if not ins or tmetric is None:
            continue
        sub = d[d["callpath"] == km.name]
        piv = sub.pivot_table(index=params, columns="metric", values="value", aggfunc="mean", observed=True)
        if tmetric not in piv.columns:
            continue
        others = [p for p in params if p != fparam]
        pts_cpi, pts_m = [], []
        for idx, row in piv.iterrows():
            at = dict(zip(params, idx if isinstance(idx, tuple) else (idx,)))
            f = _hz(at[fparam])
            n = sum(row[m] for m in ins)
            if not n > 0:
                continue
            hit_at = {p: at[p] for p in others}
            _, hits = km.memory_time(hit_at, machine)
            if not hits:
                continue
            cyc = sum(h * machine.latency_cycles[l] for l, h in hits.items() if l != "memory")
            cyc += hits.get("memory", 0.0) * machine.latency_cycles["memory"] * f / machine.frequency_hz
            pts_cpi.append(row[tmetric] * f / n)
            pts_m.append(cyc / n)
        try:
            core, bf = solve_eq5(pts_cpi, pts_m)
        except PerfcastError as e:
            km.notes.append(f"Eq 5 not solved: {e.message}")
            continue
        km.cpi_core, km.bf_mem = core, bf
        km.cpi = core
        km.cpi_source = "CPI_core from Eq 5 (two frequencies)"
        notes.append(f"{km.name}: Eq 5 gives CPI_core {core:.3g}, BF_mem {bf:.3g}")
    return notes


def _hz(v: float) -> float:
    v = float(v)
    if v < 1e3:
        return v * 1e9   # GHz
    if v < 1e6:
        return v * 1e6   # MHz
    return v

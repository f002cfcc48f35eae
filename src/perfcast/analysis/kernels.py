"""Key-kernel identification (APMT, seed 000; methods.md §1).

From >= 3 profiled process counts (and, the same way, problem sizes) the functions of an application
are sorted into

1. **hot** kernels: share of the cost metric (cycles, else time, else instructions) >= ``threshold``
   (default 5 %) at some profiled point;
2. **non-scalable** kernels (future hotspots): the cost *per rank* grows faster with p than the
   scaling mode expects -- log-log slope against p > expected + ``flat`` (default 0.1), where the
   expected per-rank cost is

   * **strong** scaling (total work fixed, divided among the ranks): ~ p^-1, so a function is
     flagged when its cost per rank does not fall like 1/p (slope > -0.9: replicated work, halo
     surfaces ~ p^-1/2, anything constant or growing);
   * **weak** scaling (work per rank fixed, total work ~ p): constant, so a function is flagged when
     its cost per rank grows with p (slope > 0.1); a per-rank-constant solver sweep is perfect weak
     scaling and is *not* flagged;

   -- or, along a size parameter, the share grows with the size (slope of the share > ``flat``) --
   provided the function holds at least ``min_share`` (1 %) at the largest such point, so constant
   crumbs are not listed;
3. **rest**: everything else, aggregated into one kernel.

The scaling mode is ``scaling="strong"`` or ``"weak"`` when the user knows it (``--scaling``);
``"auto"`` (default) infers it from the measured work: the application's instructions (else the cost
metric) summed over the ranks -- MPI/runtime functions left out -- are fitted against p on every line
of the other parameters held fixed (log-log slope, median over the lines), and the slope decides by
the one rule :func:`perfcast.scaling.scaling_mode`: a cost per rank that falls with p is strong
scaling; one that does not is weak scaling, or ``undetermined`` when the cost is a time and strong
scaling at >= 50% parallel efficiency explains it as well (a span of about one doubling: p = 1, 2).
Undetermined flags only costs per rank that grow with p (non-scalable in either mode); the slope is
reported.  The inference cannot tell work *replicated* on every rank from weak-scaled work: a
strong-scaling run dominated by replicated work looks weak; give ``--scaling strong`` then.  The expectation is the mode's ideal exponent, never the fitted slope, so a
dominant non-scalable function cannot hide itself by defining what is expected.

Functions are identified by their frame name (the leaf of the callpath): the same function reached
through several callpaths is one kernel.  Functions of the MPI library and its runtime (and of the
dynamic loader) are *communication or start-up*, not computation kernels: they are excluded by
name pattern (``DEFAULT_EXCLUDE``, extendable) and their share is reported.  A candidate measured at
some profiled points only cannot be modelled over the scales; it goes into the rest kernel with a
note naming the points where it is missing.

:func:`kernel_experiment` turns an experiment into one with a callpath per kernel (values summed
over the kernel's callpaths, ranks kept), ready for the modeler.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import (ONE_LOCATION, RUN_TIMERS, CallTree, Experiment, Metric, absent_location_is_missing,
                          aggregate_labels, reduce_over_locations)
from ..scaling import format_exponent, loglog_slope, scaling_mode

REST = "rest"
#: MPI library / runtime / loader functions (communication and start-up, not computation kernels)
DEFAULT_EXCLUDE = ("MPI_*", "PMPI_*", "mpi_*", "pmpi_*", "ompi_*", "opal_*", "orte_*", "mca_*", "pmix_*",
                   "PMIx_*", "ucp_*", "uct_*", "ucs_*", "hwloc_*", "MPIR_*", "MPID*", "MPIU_*", "psm*",
                   "fi_*", "ibv_*", "event_*", "_dl_*", "dl_*", "do_lookup*", "check_match", "_dl_*",
                   # cachegrind's unknown function, literally "???" (an fnmatch "???" is any
                   # three-character name: CG's dot, a campaign's app)
                   "__GI__dl*", "[?][?][?]", "MPI", "APP",
                   # functions without symbols named by the object they live in (io.cachegrind)
                   "* in mca_*", "* in libmpi*", "* in libopen-pal*", "* in libopen-rte*", "* in libpmix*",
                   "* in libmca_*", "* in libucp*", "* in libuct*", "* in libucs*", "* in libfabric*",
                   "* in libhwloc*", "* in libevent*", "* in ld-linux*", "* in ld.so*", "* in libpsm*")
SCALING_MODES = ("auto", "strong", "weak")
#: ideal log-log slope of the cost per rank against p
EXPECTED_SLOPE = {"strong": -1.0, "weak": 0.0, "undetermined": 0.0}  # undetermined: what fails both
#: cost metrics in order of preference (APMT uses cycles; time samples and instructions stand in)
CYCLE_METRICS = ("cycles", "PAPI_TOT_CYC", "CPU_CLK_UNHALTED", "CPU_CLK_UNHALTED.THREAD_P", "cpu-cycles")
TIME_METRICS = ("cpu_time", "time", "samples")
INSTR_METRICS = ("instructions", "Ir", "PAPI_TOT_INS", "INST_RETIRED.ANY", "INST_RETIRED")
PROC_PARAMS = ("p", "procs", "np", "nprocs", "ranks", "processes", "mpi_ranks", "jobsize", "P")
#: a leading value of a line of points below this fraction of what the power law of the points after
#: it gives there is near zero: the function does no real work there (miniFE's make_local_matrix at
#: p = 1: no neighbour to set up), and a growth exponent from it is no scaling law
#: (:func:`_real_start`; a power law from the first point is never cut: each value is its own law's).
#: Not the fit's p = 1 rule (:data:`perfcast.fit.core.NOT_RUNNING_EXPONENT`: values at p = 1 below
#: (1 / x2)^4 of those at the next process count x2, 1/16 at x2 = 2), and not meant to be: this one cuts
#: a leading run of near-zero values from a log-log slope along any parameter, judged against the
#: power law of the points after them (which may fall as well as rise), so a share of that law's value
#: is what says "no real work"; the fit's decides whether p = 1 alone is a regime of its own, against
#: the raw values at x2 (a two-level design has no law to extrapolate back), so its bound is the
#: steepest growth a scaling law between the two process counts may have, which depends on x2.
#: Between them (values 1/100 to 1/16 of p = 2's) a kernel's slope can start at p = 1 while its model
#: is 0 there.
NEAR_ZERO = 0.01


@dataclass(frozen=True)
class Kernel:
    name: str
    #: callpaths whose values make up the kernel
    callpaths: tuple[str, ...]
    #: why it was chosen (plain sentences)
    reasons: tuple[str, ...]
    #: share of the cost metric per point (point label -> fraction)
    share: dict
    kind: str = "hot"  # hot | non-scalable | rest
    #: per parameter, the log-log slope behind the reasons: of the cost per rank against the process
    #: count, of the share against the other parameters (the steepest line of measured points)
    slopes: dict = field(default_factory=dict)
    #: per parameter whose slope's line starts with near-zero values (:data:`NEAR_ZERO`): the first
    #: point of real work, where the slope is measured from
    starts: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "reasons": list(self.reasons),
                "share": {k: float(v) for k, v in self.share.items()}, "callpaths": list(self.callpaths),
                "slopes": {k: float(v) for k, v in self.slopes.items()},
                **({"starts": dict(self.starts)} if self.starts else {})}


@dataclass
class KernelSet:
    kernels: list[Kernel]
    metric: str
    procs: str | None
    threshold: float
    #: share of the selected kernels (without rest) per point
    coverage: dict
    #: share of excluded (MPI/runtime/loader) functions per point
    excluded_share: dict
    notes: list[str] = field(default_factory=list)
    #: strong | weak (None without a process-count parameter)
    scaling: str | None = None
    #: how the scaling mode was decided (given, or inferred from the total work)
    scaling_basis: str = ""
    #: the log-log slope of the application's total work against the process count the mode was
    #: inferred from (None when the mode was given or could not be inferred)
    scaling_slope: float | None = None
    #: the callpaths of excluded (MPI library/runtime) functions that the non-scalable rule flags:
    #: communication outside the kernel list, each a dict (:func:`_growing_excluded`)
    communication: list = field(default_factory=list)
    #: functions whose line along a parameter does real work at its last point only (near zero
    #: before it, :func:`_real_start`), holding ``min_share`` there: no growth exponent can be
    #: measured from one point, so the non-scalable rule did not judge that line (a note each too):
    #: dicts function, parameter, at (the last point), near_zero (the points before), share (at it);
    #: an excluded (communication) function's callpath with ``callpath`` (its share of all the metric)
    unjudged: list = field(default_factory=list)

    def names(self) -> list[str]:
        return [k.name for k in self.kernels]

    def assignment(self) -> dict[str, str]:
        return {cp: k.name for k in self.kernels for cp in k.callpaths}

    def explain(self) -> list[str]:
        if not self.kernels:
            return list(self.notes)   # no computation profile (APMT of an MPI profile alone): why
        out = [f"cost metric: {self.metric}; threshold {self.threshold:.0%}"
               + (f"; process-count parameter {self.procs}" if self.procs else "")]
        if self.scaling:
            out.append(f"{self.scaling} scaling ({self.scaling_basis}): expected cost per rank "
                       f"{_expectation(self.scaling, self.procs)}; a function whose cost per rank grows faster "
                       "is non-scalable")
        for k in self.kernels:
            sh = ", ".join(f"{p}: {v:.1%}" for p, v in k.share.items())
            out.append(f"{k.name} [{k.kind}] -- " + "; ".join(k.reasons) + f" (share {sh})")
        cov = ", ".join(f"{p}: {v:.1%}" for p, v in self.coverage.items())
        out.append(f"the {len(self.kernels) - 1} kernel(s) cover {cov} of the application's {self.metric}")
        if any(v > 0 for v in self.excluded_share.values()):
            ex = ", ".join(f"{p}: {v:.1%}" for p, v in self.excluded_share.items())
            out.append(f"MPI library/runtime/loader functions (not computation kernels; left out of the "
                       f"shares): {ex} of all {self.metric}")
            if self.scaling:
                out.append(self.communication_line())
        out.extend(self.notes)
        return out

    def communication_line(self) -> str:
        """The excluded functions by the non-scalable rule: communication is outside the kernel list
        (APMT models it apart: ``predict --breakdown``), but what of it grows is named."""
        head = (f"communication is outside the kernel list (APMT models it apart: predict --breakdown); "
                f"by the non-scalable rule ({self.scaling} scaling expects cost per rank "
                f"{_expectation(self.scaling, self.procs, False)})")
        if not self.communication:
            return head + ": none of its callpaths grows faster"
        return head + ", growing: " + "; ".join(
            f"{c['callpath']} {_g(c['per_rank_first'])} -> {_g(c['per_rank_last'])} per rank from {c['first_at']} to "
            f"{c['last_at']} (~ {self.procs}^{format_exponent(c['slope'])}; {c['share_last']:.1%} of all "
            f"{self.metric} at {c['last_at']})" for c in self.communication)

    def to_dict(self) -> dict:
        return {"metric": self.metric, "procs": self.procs, "threshold": self.threshold,
                "scaling": self.scaling, "scaling_basis": self.scaling_basis, "scaling_slope": self.scaling_slope,
                "communication": [dict(c) for c in self.communication],
                "kernels": [k.to_dict() for k in self.kernels],
                "coverage": {k: float(v) for k, v in self.coverage.items()},
                "excluded_share": {k: float(v) for k, v in self.excluded_share.items()},
                "unjudged": [dict(u) for u in self.unjudged], "notes": list(self.notes)}


def _g(x: float) -> str:
    return f"{x:.4g}"


def find_metric(exp: Experiment, names: Sequence[str]) -> str | None:
    low = {m.lower(): m for m in exp.metrics}
    for n in names:
        if n.lower() in low:
            return low[n.lower()]
    return None


def function_paths(exp: Experiment) -> list[str] | None:
    """Callpaths that are functions: those carrying cycle or instruction counts, when the profile
    has such counts (a campaign's wall time and timers share the root with the functions but carry
    only ``time``); None = all callpaths."""
    mets = [m for g in (CYCLE_METRICS, INSTR_METRICS) if (m := find_metric(exp, g)) is not None]
    if not mets:
        return None
    d = exp.data
    return list(d[d["metric"].isin(mets)]["callpath"].astype(str).unique())


def time_metric(exp: Experiment) -> str | None:
    """A time metric by its name (:data:`TIME_METRICS`), else the time metric ``view`` shows by default
    (the first of kind time on the calling-context tree: HPCToolkit ``CPUTIME (E)``, TAU ``time (E)``,
    Caliper ``avg#inclusive#sum#time.duration``)."""
    named = find_metric(exp, TIME_METRICS)
    if named is not None:
        return named
    times = [name for name, m in exp.metrics.items() if m.kind == "time" and m.scope != "unknown"]
    if not times:
        return None
    from .views import default_metric

    return default_metric(exp, among=times)


def run_timers(exp: Experiment, metric: str) -> bool:
    """``metric`` is ``perfcast collect``'s time: the run's wall time and the application's timers
    (:data:`perfcast.experiment.RUN_TIMERS`), no time of the functions -- a timer named like a
    function (examples/cg's ``dot`` timer holds dot and its MPI_Allreduce) does not measure it."""
    m = exp.metrics.get(metric)
    return m is not None and m.description == RUN_TIMERS


def function_time_metric(exp: Experiment) -> str | None:
    """The time metric on the functions (sampled, CUBE's, Caliper's ...): :func:`time_metric` unless
    that is a campaign's run time and timers (:func:`run_timers`), then another time metric on the
    calling-context tree, else None."""
    m = time_metric(exp)
    if m is None or not run_timers(exp, m):
        return m
    rest = [n for n, x in exp.metrics.items() if x.kind == "time" and x.scope != "unknown" and n != m
            and not run_timers(exp, n) and not n.startswith("pmpi")]
    return find_metric(exp, [t for t in TIME_METRICS if t in rest]) or (rest[0] if rest else None)


def cost_metric(exp: Experiment) -> str:
    """Cycles, else a sampled time on the functions (not a campaign's timers: :func:`run_timers`),
    else instructions."""
    fp = function_paths(exp)
    for group in (CYCLE_METRICS, TIME_METRICS, INSTR_METRICS):
        m = function_time_metric(exp) if group is TIME_METRICS else find_metric(exp, group)
        if m is None:
            continue
        if group is TIME_METRICS and fp is not None:
            d = exp.data
            if d[(d["metric"] == m) & d["callpath"].isin(fp)].empty:
                continue
        return m
    timers = [n for n in exp.metrics if run_timers(exp, n)]
    raise PerfcastError("no cost metric to rank functions by: need cycles, a time metric on the calling-context "
                        "tree (cpu_time, time, or any metric of kind time with an inclusive or exclusive scope) or "
                        f"instructions (Ir, PAPI_TOT_INS); the experiment has {', '.join(exp.metrics)}"
                        + (f" ({', '.join(timers)}: the campaign's run time and application timers, no profile of "
                           "the functions: collect with cachegrind or perf)" if timers else ""))


def procs_param(exp: Experiment, procs: str | None = None) -> str | None:
    if procs is not None:
        if procs not in exp.parameters:
            raise PerfcastError(f"no parameter {procs!r}; the experiment has {', '.join(exp.parameters) or 'none'}",
                                where="procs")
        return procs
    for p in PROC_PARAMS:
        if p in exp.parameters:
            return p
    return None


def point_label(params: Sequence[str], row) -> str:
    return ",".join(f"{p}={_num(row[p])}" for p in params)


def _num(x) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:g}"


def exclusive_values(exp: Experiment, metric: str, summed: bool = False) -> Experiment:
    """``metric``'s exclusive values (converted from inclusive ones).  Refused where they are not
    known (:func:`perfcast.analysis.views.no_exclusive`, the one rule the views, scaling-loss and the
    report follow): a campaign's run whose application timers nest (CoMD's total > loop > timestep >
    force) has a negative "exclusive" time, which is no cost to rank or sum into a kernel.  ``summed``:
    the caller only adds up every callpath's values of a point (the whole run's total, as
    :func:`guess_scaling`), where the run's negative part and its timers add up to the run's measured
    time: not refused."""
    m = exp.metrics[metric]
    if m.scope != "inclusive":
        return exp.select(metric=metric)
    if not summed:
        from .views import negative_exclusive_cause, no_exclusive

        unknown = no_exclusive(exp, metric)
        if unknown:
            runs = sorted(p for p in unknown if exp.tree.parent(p) not in unknown)
            raise PerfcastError(f"metric {metric!r} has no known exclusive values: the exclusive {metric} of "
                                f"{', '.join(runs)} and its {len(unknown) - len(runs)} timer(s) is not known: "
                                f"{negative_exclusive_cause(m)}, and they add up to more than the run at some "
                                f"measured point", where="metric")
    return exp.select(metric=metric).to_exclusive(metric)


def per_function(exp: Experiment, metric: str, procs: str | None = None, by_callpath: bool = False,
                 summed: bool = False) -> pd.DataFrame:
    """Per point and function (frame name; ``by_callpath``: per callpath, in the column ``function``
    too): ``total`` (summed over ranks, mean over repetitions) and ``per_rank`` (total / number of
    ranks of the point; a value summed over the ranks in the file, Caliper ``sum#``, over the
    process-count parameter ``procs``).  ``summed``: the caller adds up every function of a point
    (:func:`exclusive_values`)."""
    sub = exclusive_values(exp, metric, summed)
    d = sub.data
    params = list(exp.parameters)
    names = pd.Series({cp: cp if by_callpath else sub.tree.name(cp) for cp in d["callpath"].cat.categories})
    d = d.assign(function=d["callpath"].astype(str).map(names))
    keys = [*params, "rep", "function"]
    tot = d.groupby(keys, observed=True)["value"].sum().groupby([*params, "function"], observed=True).mean()
    out = tot.rename("total").reset_index()
    if "rank" in d.columns:
        # per rank (threads summed) by the one rule over ranks (reduce_over_locations: a sparse
        # profile's rank without the callpath is a 0, a dense table's is missing), callpaths summed
        # per function, repetitions averaged
        by = [*params, "rep", "metric", "callpath", "function"]
        r = d.groupby([*by, "rank"], observed=True)["value"].sum().reset_index()
        r = reduce_over_locations(sub, r, "mean")
        pr = r.groupby(keys, observed=True)["value"].sum().groupby([*params, "function"], observed=True).mean()
        out = out.merge(pr.rename("per_rank").reset_index(), on=[*params, "function"], how="left")
    elif procs is not None and exp.metrics[metric].aggregate.startswith("sum over"):
        # was taken as one rank's cost: LULESH sum# "non-scalable, cost per rank ~ jobsize^1.04"
        out["per_rank"] = out["total"] / out[procs].astype(float)
    else:
        out["per_rank"] = out["total"]
    return out


def identify_kernels(exp: Experiment, metric: str | None = None, procs: str | None = None,
                     threshold: float = 0.05, flat: float = 0.1, min_share: float = 0.01,
                     exclude: Sequence[str] = DEFAULT_EXCLUDE, include: Sequence[str] = (),
                     scaling: str = "auto") -> KernelSet:
    """Sort the functions of ``exp`` into hot, non-scalable and rest kernels (module docstring).
    ``scaling``: strong, weak or auto (inferred from the total work); ``flat``: tolerance on the
    log-log slope of the cost per rank above the mode's expectation (and on the share's slope along
    size parameters)."""
    if not 0 < threshold < 1:
        raise PerfcastError(f"threshold must be between 0 and 1, got {threshold}", where="threshold")
    if scaling not in SCALING_MODES:
        raise PerfcastError(f"scaling mode {scaling!r}: use {', '.join(SCALING_MODES)}", where="scaling")
    metric = metric or cost_metric(exp)
    if metric not in exp.metrics:
        raise PerfcastError(f"no metric {metric!r}; the experiment has {', '.join(exp.metrics)}", where="metric")
    procs = procs_param(exp, procs)
    params = list(exp.parameters)
    pts = exp.points()
    if len(pts) < 3:
        raise PerfcastError(f"kernel identification needs >= 3 profiled points (APMT: three process counts); "
                            f"the experiment has {len(pts)}")
    if procs is not None and pts[procs].nunique() < 3:
        raise PerfcastError(f"kernel identification needs >= 3 process counts; {procs} takes "
                            f"{', '.join(_num(v) for v in sorted(pts[procs].unique()))} only")
    fp = function_paths(exp)
    if fp is not None and len(fp) < len(exp.data["callpath"].cat.categories):
        d = exp.data
        if d[(d["metric"] == metric) & d["callpath"].isin(fp)].empty:
            # the metric sits on other callpaths only (a campaign's wall time and timers, the PMPI
            # profile's MPI-> routines): no cost of the functions to rank
            on = list(dict.fromkeys(map(str, d.loc[d["metric"] == metric, "callpath"])))
            raise PerfcastError(f"{metric!r} is not measured on the functions (the callpaths with instruction or "
                                f"cycle counts) but on {', '.join(on[:4])}{', ...' if len(on) > 4 else ''}"
                                + (" -- the campaign's run time and application timers" if run_timers(exp, metric)
                                   else "") + "; rank the functions by one of their metrics (e.g. "
                                f"{find_metric(exp, CYCLE_METRICS) or find_metric(exp, INSTR_METRICS)})",
                                where="metric")
        exp = exp.select(callpath=fp, literal=True)   # names, not globs: "[unknown]", "f [clone .constprop.0]"
    pf = per_function(exp, metric, procs)
    if (pf["total"] < 0).any():
        raise PerfcastError(f"metric {metric!r} has negative exclusive values; cannot rank functions by it")
    labels = [point_label(params, r) for _, r in pts.iterrows()]
    pf["point"] = [point_label(params, r) for _, r in pf.iterrows()]
    totals = pf.groupby("point")["total"].sum()
    if (totals <= 0).any():
        bad = totals[totals <= 0].index[0]
        raise PerfcastError(f"metric {metric!r} sums to zero at {bad}; nothing to rank")
    funcs = list(dict.fromkeys(pf["function"]))
    excluded = [f for f in funcs if _matches(f, exclude) and not _matches(f, include)]
    ex_share = {lab: float(pf[(pf.point == lab) & pf.function.isin(excluded)]["total"].sum() / totals[lab])
                for lab in labels}
    # shares are of the application's own cost (MPI library/runtime/loader functions left out)
    app_tot = pf[~pf.function.isin(excluded)].groupby("point")["total"].sum()
    if app_tot.reindex(labels).fillna(0).le(0).any():
        bad = [lab for lab in labels if not app_tot.get(lab, 0) > 0][0]
        raise PerfcastError(f"at {bad} all of {metric!r} is in MPI library/runtime functions; no application "
                            "function to rank")
    pf["share"] = pf["total"] / pf["point"].map(app_tot)
    mode, basis, mode_slope = None, "", None
    if procs is not None:
        if scaling == "auto":
            mode, basis, mode_slope = infer_scaling(exp, metric, pf, procs, pts, params, labels, exclude, include)
        else:
            mode, basis = scaling, "given"
    share = pf.pivot_table(index="function", columns="point", values="share", aggfunc="sum").reindex(columns=labels)
    per_rank = pf.pivot_table(index="function", columns="point", values="per_rank", aggfunc="sum")
    notes: list[str] = []
    late: list[dict] = []
    chosen: dict[str, list[str]] = {}
    slopes: dict[str, dict[str, float]] = {}
    starts: dict[str, dict[str, str]] = {}
    kinds: dict[str, str] = {}
    lines = _trend_lines(pts, params, labels)
    for f in funcs:
        if f in excluded:
            continue
        sh = share.loc[f]
        present = sh.notna()   # a measured zero counts as present
        reasons = []
        if (sh.fillna(0) >= threshold).any():
            lab = sh.idxmax()
            reasons.append(f"share {sh.max():.1%} >= {threshold:.0%} at {lab}")
            kinds[f] = "hot"
        late_lines: list = []
        trend = _trend(pts, params, procs, per_rank.loc[f], share.loc[f], labels, late_lines, lines)
        for what, at, near in late_lines:
            # real work at the last point of a line only: one point, no exponent -- said, not passed over
            at_share = share.loc[f].get(at)
            if at_share is None or not at_share >= min_share:
                continue
            q = procs if what == "procs" else what
            late.append({"function": f, "parameter": q, "at": at, "near_zero": near, "share": float(at_share)})
            notes.append(f"{f}: near zero at {', '.join(near)} and real work only at {at} ({at_share:.1%} there), "
                         f"the last point of its line along {q}: one point gives no growth exponent on that line, so whether "
                         f"it grows {'faster than ' + mode + ' scaling expects' if what == 'procs' and mode else 'with ' + q} "
                         f"is not judged (measure beyond {at})")
        slopes[f] = {procs if what == "procs" else what: slope for what, slope, *_ in trend}
        starts[f] = {procs if what == "procs" else what: first for what, _, _, first, near in trend if near}
        for what, slope, lab, first, near in trend:
            # from near-zero values (no real work there) the exponent is measured from the first real point
            since = f" from {first} on (near zero at {', '.join(near)})" if near else ""
            if share.loc[f].get(lab, 0) is None or not (share.loc[f].fillna(0).get(lab, 0) >= min_share):
                continue
            if what == "procs" and _grows(mode, slope, flat):
                if mode != "strong":
                    how = f"grows as {procs} grows"
                elif slope > -flat:
                    how = f"does not decrease as {procs} grows"
                else:
                    how = f"decreases slower than 1/{procs}"
                reasons.append(f"non-scalable: cost per rank ~ {procs}^{format_exponent(slope)}{since}, {how} ({mode} scaling expects "
                               f"{_expectation(mode, procs, False)} per rank; {share.loc[f][lab]:.1%} at {lab})")
                kinds.setdefault(f, "non-scalable")
                break
            if what != "procs" and slope > flat:
                reasons.append(f"share grows with {what} (~ {what}^{format_exponent(slope)}{since}; {share.loc[f][lab]:.1%} at {lab})")
                kinds.setdefault(f, "non-scalable")
                break
        if not reasons:
            continue
        if not present.all():
            miss = [lab for lab in labels if not present.get(lab, False)]
            notes.append(f"{f}: " + "; ".join(reasons) + f", but it has no {metric} at {', '.join(miss)} "
                         f"(present at some scales only); aggregated into {REST}")
            kinds.pop(f, None)
            continue
        chosen[f] = reasons
    assign: dict[str, list[str]] = {}
    excluded_paths: dict[str, list[str]] = {}
    sub = exclusive_values(exp, metric)
    for cp in sub.data["callpath"].cat.categories:
        fn = sub.tree.name(cp)
        if fn in excluded:
            excluded_paths.setdefault(fn, []).append(cp)
            continue
        assign.setdefault(fn if fn in chosen else REST, []).append(cp)
    communication = _growing_excluded(exp, metric, [cp for f in excluded for cp in excluded_paths.get(f, ())],
                                      totals, pts, params, procs, labels, mode, flat, min_share, late, notes)
    kernels = []
    order = sorted(chosen, key=lambda f: -float(share.loc[f].fillna(0).max()))
    for f in order:
        kernels.append(Kernel(f, tuple(assign.get(f, ())), tuple(chosen[f]),
                              {lab: float(share.loc[f].fillna(0)[lab]) for lab in labels}, kinds[f], slopes[f],
                              starts.get(f, {})))
    rest_funcs = [f for f in funcs if f not in chosen and f not in excluded]
    rest_share = {lab: float(share.loc[rest_funcs, lab].fillna(0).sum()) if rest_funcs else 0.0 for lab in labels}
    # what the rule left there: below the threshold everywhere and not non-scalable while holding
    # min_share -- or measured at some scales only (a note each), whatever their share or growth
    partial = [f for f in rest_funcs if f in kinds or any(n.startswith(f"{f}: ") for n in notes)]
    why = (f"below {threshold:.0%} at every point and not non-scalable where they hold >= {min_share:.0%}")
    kernels.append(Kernel(REST, tuple(assign.get(REST, ())),
                          (f"{len(rest_funcs)} other function(s): "
                           + (f"{len(partial)} measured at some scales only (notes), the others {why}" if partial
                              else f"each {why}"),),
                          rest_share, "rest"))
    coverage = {lab: float(sum(k.share[lab] for k in kernels[:-1])) for lab in labels}
    return KernelSet(kernels, metric, procs, threshold, coverage, ex_share, notes, mode, basis, mode_slope,
                     communication, late)


def _growing_excluded(exp, metric, paths, totals, pts, params, procs, labels, mode, flat, min_share,
                      unjudged: list | None = None, notes: list | None = None) -> list[dict]:
    """The callpaths of the excluded (MPI library/runtime) functions, ``paths``, whose cost per rank
    grows faster with the process count than the scaling mode expects -- the kernels' non-scalable
    rule (:func:`_grows`), with ``min_share`` of *all* of the metric (``totals`` per point) at the
    line's largest point -- largest growth of the cost per rank first (what ``scaling-loss``'s
    excess work is under weak scaling): callpath, function, slope, the cost per rank at the smallest
    and the largest point of the line and the share of all there.  Per callpath, as ``model`` and
    ``scaling-loss`` take them: a routine that grows under one caller and shrinks under another
    (LULESH's MPI_Wait) is not summed away."""
    if procs is None or mode is None or not paths:
        return []
    # exclusive values from the whole tree (a callee left out would count in its caller), then the paths
    pc = per_function(exp, metric, procs, by_callpath=True)
    pc = pc[pc["function"].isin(set(paths))].copy()
    pc["point"] = [point_label(params, r) for _, r in pc.iterrows()]
    pc["share"] = pc["total"] / pc["point"].map(totals)
    per_rank = pc.pivot_table(index="function", columns="point", values="per_rank", aggfunc="sum")
    share = pc.pivot_table(index="function", columns="point", values="share", aggfunc="sum")
    out = []
    lines = _trend_lines(pts, params, labels)
    for cp in per_rank.index:
        late: list = []
        trend = _trend(pts, params, procs, per_rank.loc[cp], share.loc[cp], labels, late, lines)
        for what, at, near in late:
            # real work at the last process count only: no exponent, so the rule cannot judge it -- said
            sh = share.loc[cp].get(at)
            if what != "procs" or unjudged is None or sh is None or not sh >= min_share:
                continue
            unjudged.append({"function": exp.tree.name(cp), "callpath": cp, "parameter": procs, "at": at,
                             "near_zero": near, "share": float(sh)})
            notes.append(f"{cp} (communication): near zero at {', '.join(near)} and real work only at {at} "
                         f"({sh:.1%} of all {metric} there), the last point of its line along {procs}: one point "
                         f"gives no growth exponent on that line, so whether it grows faster than {mode} scaling "
                         f"expects is not judged (measure beyond {at})")
        for what, slope, last, first, _ in trend:
            if what != "procs" or not _grows(mode, slope, flat):
                continue
            sh, a, b = share.loc[cp].get(last), per_rank.loc[cp].get(first), per_rank.loc[cp].get(last)
            if any(v is None or v != v for v in (sh, a, b)) or not sh >= min_share:
                continue
            out.append({"callpath": cp, "name": exp.tree.name(cp), "slope": float(slope), "first_at": first,
                        "last_at": last, "per_rank_first": float(a), "per_rank_last": float(b), "share_last": float(sh)})
    return sorted(out, key=lambda c: -(c["per_rank_last"] - c["per_rank_first"]))


def _grows(mode: str | None, slope: float, flat: float) -> bool:
    """The non-scalable rule along the process count: the cost per rank's log-log slope above the
    scaling mode's expectation plus ``flat``."""
    return mode is not None and slope > EXPECTED_SLOPE[mode] + flat


def _expectation(mode: str, procs: str | None, long: bool = True) -> str:
    q = procs or "p"
    if mode == "undetermined":
        return "at most constant" if not long else \
            "at most constant (weak or strong scaling: the runs cannot tell which)"
    if not long:
        return f"~ {q}^-1" if mode == "strong" else "constant"
    return (f"~ {q}^-1 (the total work divided among the ranks)" if mode == "strong"
            else "constant (the same work on every rank)")


def infer_scaling(exp: Experiment, metric: str, pf: pd.DataFrame, procs: str, pts: pd.DataFrame,
                  params: list[str], labels: list[str], exclude: Sequence[str] = DEFAULT_EXCLUDE,
                  include: Sequence[str] = ()) -> tuple[str, str, float | None]:
    """(strong | weak, how it was inferred, the slope it was inferred from) from the application's total work against ``procs``
    (module docstring): instructions when the profile has them, else ``metric``; ``pf`` is
    :func:`per_function` of ``metric`` with a ``point`` column."""
    wm = find_metric(exp, INSTR_METRICS) or metric
    if wm != metric:
        w = per_function(exp, wm, procs)
        w["point"] = [point_label(params, r) for _, r in w.iterrows()]
    else:
        w = pf
    app = w[[not (_matches(f, exclude) and not _matches(f, include)) for f in w["function"]]]
    # total work of the point = cost per rank x ranks (equals the sum over ranks when every rank is in
    # the profile; also right for profiles that hold one rank's values)
    per_rank = app.groupby("point")["per_rank"].sum()
    lab = pd.Series(labels, index=pts.index)
    work = per_rank.reindex(lab).to_numpy(dtype=float) * pts[procs].to_numpy(dtype=float)
    work = pd.Series(work, index=pts.index)
    others = [o for o in params if o != procs]
    groups = [g for _, g in pts.groupby(others)] if others else [pts]
    slopes = []
    for g in groups:
        s = loglog_slope(g[procs], work[g.index])
        if s == s:
            slopes.append(s)
    if not slopes:  # no two process counts with the other parameters equal: all points as one line
        s = loglog_slope(pts[procs], work)
        if s != s:
            return "strong", "assumed: the total work cannot be compared across process counts; set --scaling", None
        slopes.append(s)
    s = float(np.median(slopes))
    counts = pts[procs].to_numpy(dtype=float)
    mode, why = scaling_mode(s, float(counts.max() / counts.min()) if counts.min() > 0 else np.inf,
                             find_metric(exp, INSTR_METRICS) is not None)
    basis = f"inferred: {_total_work_words(exp, wm, procs)} ~ {procs}^{format_exponent(s)}: {why}"
    return mode, basis + "; --scaling strong|weak overrides", s


def _total_work_words(exp: Experiment, metric: str, procs: str) -> str:
    """What :func:`infer_scaling`'s total work of a point is, in words: the per-rank cost
    (:func:`per_function`) times the process count -- the sum over the ranks where every rank has a
    value, but where one location holds every value (a campaign's wall time and timers: rank 0,
    :func:`perfcast.experiment.aggregate_labels`) or the file holds one combined value (a mean over
    the ranks) it is that value times ``procs``, no sum of anything measured."""
    label = aggregate_labels(exp).get(metric, "")
    if label.endswith(ONE_LOCATION):
        where = label[: -len(ONE_LOCATION)]
        return f"the application's {metric} at {where} (the only location holding it) times {procs}"
    if "rank" not in exp.cols and "thread" not in exp.cols and label and not label.startswith("sum over"):
        return f"the application's {metric} ({label}) times {procs}"
    return f"the application's total {metric} summed over the ranks"


def guess_scaling(exp: Experiment, metric: str, procs: str, exclude: Sequence[str] = DEFAULT_EXCLUDE,
                  include: Sequence[str] = ()) -> tuple[str, str, float | None]:
    """:func:`infer_scaling` from the experiment alone -- the one rule for telling strong from weak
    scaling that kernel identification and the report's scaling-loss tree share: the application's
    total work (instructions when the profile has them, else ``metric``) against ``procs`` on each line
    of the other parameters fixed, the median slope.  CoMD's time at n = 28 alone (its p = 2 runs slower
    on a shared machine) read as weak scaling, where its instructions at every n are divided."""
    params = list(exp.parameters)
    pts = exp.points()
    labels = [point_label(params, r) for _, r in pts.iterrows()]
    wm = find_metric(exp, INSTR_METRICS) or metric
    pf = per_function(exp, wm, procs, summed=True)   # the total work of each point only
    pf["point"] = [point_label(params, r) for _, r in pf.iterrows()]
    return infer_scaling(exp, wm, pf, procs, pts, params, labels, exclude, include)


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _real_start(x: np.ndarray, y: np.ndarray) -> int:
    """The position of the first point of real work on a line (``x`` ascending, ``y`` its values,
    NaN where absent): scanning back from the last point, a value (or a 0) below :data:`NEAR_ZERO`
    of the log-log least-squares law of the positive values after it (of the one value after it,
    when only one) is near zero, and so is everything before it; 0 when none is."""
    ok = np.isfinite(y) & (x > 0)
    pos = np.flatnonzero(ok)
    for i in range(len(pos) - 2, -1, -1):
        j = pos[i]
        after = pos[i + 1:]
        after = after[y[after] > 0]
        if not len(after):
            return int(pos[i + 1])
        if len(after) == 1:
            ref = y[after[0]]
        else:
            b, a = np.polyfit(np.log(x[after]), np.log(y[after]), 1)
            ref = math.exp(a + b * math.log(x[j]))
        if not y[j] >= NEAR_ZERO * ref:
            return int(pos[i + 1])
    return 0


def _trend_lines(pts: pd.DataFrame, params: list[str], labels: list[str]) -> list[tuple[str, list[tuple]]]:
    """The lines :func:`_trend` takes its slopes on, once for all functions: per parameter ``q``, the
    groups of points with the other parameters fixed that hold >= 2 values of ``q``, each as (its
    values of ``q`` ascending, the positions of its points in ``pts``, their labels)."""
    lab = pd.Series(labels, index=pts.index)
    pos_of = pd.Series(np.arange(len(pts)), index=pts.index)
    out = []
    for q in params:
        others = [o for o in params if o != q]
        groups = pts.groupby(others) if others else [((), pts)]
        lines = []
        for _, g in groups:
            if g[q].nunique() < 2:
                continue
            g = g.sort_values(q)
            lines.append((g[q].to_numpy(dtype=float), pos_of[g.index].to_numpy(), list(lab[g.index])))
        out.append((q, lines))
    return out


def _trend(pts: pd.DataFrame, params: list[str], procs: str | None, per_rank: pd.Series, share: pd.Series,
           labels: list[str], late: list | None = None, lines: list | None = None
           ) -> list[tuple[str, float, str, str, list[str]]]:
    """Per parameter: the largest log-log slope over lines of >= 2 points (others fixed); for the
    process count on the cost per rank, for other parameters on the share.  Also the labels of the
    largest and the smallest point of the line with that slope, and of the points before it whose
    values are near zero (:func:`_real_start`: no real work there), which
    the slope leaves out -- from a near-zero first value (make_local_matrix at p = 1) a log-log slope
    is a huge exponent of no scaling law; it starts at the first point of real work.  A line whose
    only point of real work is its last has no slope (one point); ``late``, when given, receives
    each such line: (parameter, the label of its last point, the labels of the near-zero points).
    ``lines``: :func:`_trend_lines` of ``pts``, computed once by a caller that takes the trends of
    many functions (LULESH under cachegrind: 1760 functions, a pandas groupby each took 20 s)."""
    out = []
    if lines is None:
        lines = _trend_lines(pts, params, labels)
    values: dict[bool, np.ndarray] = {}
    for q, qlines in lines:
        by_rank = q == procs
        if qlines and by_rank not in values:
            values[by_rank] = (per_rank if by_rank else share).reindex(labels).to_numpy(dtype=float)
        best = None
        for x, pos, labs in qlines:
            ys = values[by_rank][pos]
            k = _real_start(x, ys)
            slope = loglog_slope(x[k:], ys[k:])
            if slope != slope:
                near = [str(lb) for lb, y in zip(labs[:k], ys[:k]) if y == y]
                if late is not None and near and np.isfinite(ys[k:]).sum() == 1:
                    late.append(("procs" if by_rank else q, str(labs[k]), near))
                continue
            if best is None or slope > best[0]:
                near = [str(lb) for lb, y in zip(labs[:k], ys[:k]) if y == y]
                best = (slope, labs[-1], labs[k] if near else labs[0], near)
        if best is not None:
            out.append(("procs" if by_rank else q, *best))
    return out


def kernel_experiment(exp: Experiment, kernels: KernelSet, metrics: Sequence[str] | None = None) -> Experiment:
    """An experiment with one callpath per kernel (``rest`` included): exclusive values of
    ``metrics`` (default: all count/time metrics) summed over each kernel's callpaths, per point,
    repetition and rank.  Excluded (MPI/runtime) functions are dropped."""
    metrics = list(metrics) if metrics is not None else [m for m, d in exp.metrics.items()
                                                         if d.kind in ("count", "time")]
    frames, mets = [], []
    for m in metrics:
        if m not in exp.metrics:
            raise PerfcastError(f"no metric {m!r}; the experiment has {', '.join(exp.metrics)}")
        try:
            sub = exclusive_values(exp, m)
        except PerfcastError:
            continue
        d = sub.data
        fn_of = {cp: sub.tree.name(cp) for cp in d["callpath"].cat.categories}
        # a callpath belongs to the kernel named like its function, else rest unless excluded
        names = set(kernels.names())
        excl_patterns = DEFAULT_EXCLUDE
        kmap = {}
        for cp, fn in fn_of.items():
            if fn in names and fn != REST:
                kmap[cp] = fn
            elif _matches(fn, excl_patterns) and cp not in kernels.assignment():
                kmap[cp] = None
            else:
                kmap[cp] = REST
        k = d["callpath"].astype(str).map(kmap)
        d = d.assign(callpath=k).dropna(subset=["callpath"])
        keys = [c for c in d.columns if c not in ("value",)]
        frames.append(d.groupby(keys, observed=True)["value"].sum().reset_index())
        mets.append(Metric(m, exp.metrics[m].unit, exp.metrics[m].kind, "exclusive", exp.metrics[m].description,
                           exact=exp.metrics[m].exact))
    if not frames:
        raise PerfcastError("none of the metrics has values on the kernels")
    data = pd.concat(frames, ignore_index=True)
    tree = CallTree((k, None, k) for k in kernels.names())
    # a dense table's kernels stay dense: an absent rank is missing there, not 0 (reduce_over_locations)
    dense = {"locations": "dense"} if absent_location_is_missing(exp) else {}
    # and listed repetitions stay listed: a shorter list is no run without the kernel (absent_repetition_is_zero)
    if "repetitions" in exp.meta:
        dense["repetitions"] = exp.meta["repetitions"]
    return Experiment(exp.parameters, data, mets, tree, {"kernels": kernels.to_dict(), **dense})

"""Whole projection: compute (factor model or surrogate) + communication (micro-benchmarks) onto targets.

Compute: when the application's signature has the memory groups (llc, bandwidth, prefetch) and
the database holds enough complete systems, the scaling factor comes from the low-rank factor
model of the database (:mod:`.factor`, the closed loop's best method: 11.2 % mean error vs 21.9 % for
the geometric-mean baseline, bench/PROJECTION.md); otherwise from Sharkawi's surrogate, which is
computed and reported in either case.  The default database is SPEC CPU2017 FP rate with the integer
rate results of the same machines joined in (:data:`DEFAULT_TABLES`): ten more benchmarks with
signatures to learn from.

Default data: the shared data directory (:mod:`perfcast.shared_data`: ``$PERFCAST_SHARED_DATA``, else
``shared/data`` beside the checkout; ``spec/`` and ``mpi/`` in it); the integer rate table from there or
from the checkout's ``data/spec``; ``--db``/``--signatures``/``--micro`` override.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from .apptime import BaseTime, base_time, mpi_region_share
from .database import BenchmarkDB, load_spec, load_user_csv
from .lookup import DEFAULT_TABLES, data_root, table_paths  # noqa: F401  (DEFAULT_TABLES, data_root: API)
from .lookup import default_table as _default_table  # noqa: F401
from .signatures import GROUPS, Signature, check_groups, experiment_totals, load_navarro, signature_from_totals

if TYPE_CHECKING:  # the projection's modules import scipy: loaded by project(), not by load_db()
    from .comm import MicroTable
    from .factor import FactorProjector
    from .surrogate import Surrogate

COMPUTE_METHODS = ("auto", "factor", "surrogate", "mean")
#: random published system pairs of the closed-loop check run with the application's counter groups
CHECK_PAIRS = 24
#: random published system pairs of the mean's own check (no counters: numpy only, so many more)
MEAN_CHECK_PAIRS = 300
_LABELS = {"factor": "factor model", "surrogate": "surrogate", "mean": "mean of the benchmarks"}


def closed_loop_check(db: BenchmarkDB, signatures: Mapping[str, Signature], groups: Sequence[str],
                      factor: bool, pairs: int = CHECK_PAIRS, seed: int = 0) -> dict[str, dict]:
    """Error of each compute method on published data with the application's counter groups: every
    benchmark with a signature in turn is the application, projected between ``pairs`` random
    published system pairs (:func:`.closed_loop.closed_loop`).  ``mean`` is the geometric mean of the
    other benchmarks' ratios (the naive baseline); ``factor`` only when ``factor``."""
    from .closed_loop import closed_loop, random_pairs

    benches = [b for b in signatures if b in db.benchmarks]
    sigs = {b: signatures[b] for b in benches}
    sample = random_pairs(db, benches, pairs, seed)

    s = closed_loop(db, sigs, groups, sample, method="surrogate").summary()
    out = {"surrogate": dict(s["method"], projections=s["projections"]),
           "mean": dict(s["baseline"], projections=s["projections"])}
    if factor:
        r = closed_loop(db, sigs, groups, sample, method="factor")
        if set(r.quality) == {"factor"}:
            s = r.summary()
            out["factor"] = dict(s["method"], projections=s["projections"],
                                 interval_coverage=s["interval"]["coverage"] if s["interval"] else None)
    return out


def _check_note(check: dict, groups: Sequence[str], chosen: str) -> str:
    """The note stating :func:`closed_loop_check`'s errors and the method chosen."""
    from .factor import LEVEL

    return (f"closed loop on {CHECK_PAIRS} random published system pairs with the application's counter "
            f"groups ({', '.join(groups)}), mean error: "
            + ", ".join(f"{_LABELS[m]} {v['mean']:.1%}"
                        + (f" (its {LEVEL:.0%} ranges held the published ratio in {v['interval_coverage']:.0%} of "
                           f"the {v['projections']} projections)" if v.get("interval_coverage") is not None
                           else "")
                        for m, v in sorted(check.items(), key=lambda kv: kv[1]["mean"]))
            + f"; compute factor from the {_LABELS[chosen]}")


def load_db(paths: Sequence[str | Path] = ()) -> BenchmarkDB:
    """Benchmark database from ``paths`` (spec17-ml tables or tidy user CSVs), default
    :data:`DEFAULT_TABLES`.  A spec17-ml table of other benchmarks of the same kind (rate or speed)
    as the tables before it is joined to their machines (:meth:`BenchmarkDB.joined`: the same
    machine's integer and floating-point results become one system); anything else is merged as
    further systems.  The result is kept in a binary cache keyed by the tables' paths, sizes and
    modification times (:mod:`.dbcache`), so only the first load parses them."""
    paths = table_paths(paths)
    from .dbcache import cached

    return cached(paths, lambda: _parse_db(paths))


def _parse_db(paths: Sequence[str | Path]) -> BenchmarkDB:
    """:func:`load_db` without its cache: every table parsed, joined or merged in order."""
    db = None
    from .database import read_csv

    for path in paths:
        head = read_csv(path, nrows=0).columns
        spec = any(str(c).startswith("t_") for c in head)
        part = load_spec(path) if spec else load_user_csv(path)
        if db is None:
            db = part
        elif spec and set(part.results["suite"]) <= set(db.results["suite"]) \
                and not set(part.benchmarks) & set(db.benchmarks):
            db, _ = db.joined(part)
        else:
            db = db.merged(part)
    return db


def load_signatures(path: str | Path | None = None) -> dict[str, Signature]:
    if path is None:
        return load_navarro(data_root() / "spec" / "counters")
    p = Path(path)
    if p.is_dir():
        return load_navarro(p)
    from .signatures import load_signature_csv
    return load_signature_csv(p)


@dataclass
class TargetProjection:
    system: str
    name: str
    compute_factor: float
    compute: float
    comm: float | None
    total: float
    comm_detail: dict | None = None
    #: (low, high) of the compute factor at level :data:`.factor.LEVEL` (factor model only)
    factor_interval: tuple[float, float] | None = None

    def to_dict(self) -> dict:
        from .factor import LEVEL

        iv = self.factor_interval
        return {"system": self.system, "name": self.name, "compute_factor": self.compute_factor,
                "compute_factor_interval": None if iv is None else list(iv),
                "compute_interval": None if iv is None else [iv[0] * self.compute / self.compute_factor,
                                                             iv[1] * self.compute / self.compute_factor],
                "interval_level": None if iv is None else LEVEL,
                "compute": self.compute, "communication": self.comm, "total": self.total,
                "communication_detail": self.comm_detail}


@dataclass
class Projection:
    base: str
    base_name: str
    compute_base: float
    comm_base: float | None
    surrogate: Surrogate | None
    targets: list[TargetProjection]
    notes: list[str] = field(default_factory=list)
    nprocs: float | None = None
    models: list[dict] | None = None          # Eq 14-16 models of the MPI profile (when fitted)
    compute_source: str = "surrogate"
    check: dict | None = None                 # closed_loop_check: method -> error on published data
    base_time: BaseTime | None = None         # which time metric, how ranks were combined
    factor_definition: dict | None = None     # what the compute factor is a ratio of (:func:`factor_definition`)
    surrogate_target: str | None = None       # the target ``surrogate`` was found for (it depends on the target)
    #: without a PMPI profile: the tree's MPI regions projected as compute ({share, routines}; :func:`mpi_region_share`)
    mpi_regions: dict | None = None

    def to_dict(self) -> dict:
        return {"base": self.base, "base_name": self.base_name, "compute_base": self.compute_base,
                "communication_base": self.comm_base, "nprocs": self.nprocs, "compute_source": self.compute_source,
                "closed_loop_check": self.check,
                "base_time": None if self.base_time is None else self.base_time.to_dict(),
                "factor_definition": self.factor_definition,
                "surrogate": None if self.surrogate is None else self.surrogate.to_dict(),
                "surrogate_target": self.surrogate_target, "mpi_regions_in_compute": self.mpi_regions,
                "targets": [t.to_dict() for t in self.targets], "notes": self.notes, "mpi_models": self.models,
                "data_note": "SPEC CPU2017 (rate) replaces the seed's SPEC CFP2006; signatures of the benchmarks "
                             "are Skylake-SP measurements (Navarro-Torres et al. 2019)"}


#: how each compute method combines the benchmarks' ratios
_COMBINED = {"mean of the benchmarks": "geometric mean of the benchmarks' ratios",
             "surrogate": "weighted mean of the surrogate benchmarks' ratios (Sharkawi's Eq 10)",
             "factor model": "the factor model's prediction for the application from the benchmarks' ratios"}


def _load(db: BenchmarkDB, system: str) -> dict:
    """Copies (rate) or threads (speed) a published result ran, and the machine's cores."""
    row = db.systems[db.systems["system"] == system]

    def num(col):
        v = row[col].iloc[0] if col in row.columns and len(row) else None
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if math.isfinite(f) and f > 0 else None

    sockets, cps = num("sockets"), num("cores_per_socket")
    return {"copies": num("threads_or_copies"), "cores": sockets * cps if sockets and cps else None}


def factor_definition(db: BenchmarkDB, base: str, targets: Sequence[str], benchmarks: Sequence[str],
                      source: str, per_target: Mapping[str, int] | None = None) -> dict:
    """What the compute factor is a ratio of, for the result and the terminal.

    A SPEC CPU2017 *rate* result's runtime is the time of N concurrent copies of the benchmark, each
    one copy's work (its score, N x reference time / runtime, is the machine's throughput); so the
    ratio target runtime / base runtime is a **per-copy** ratio: how much longer one copy, i.e. one MPI
    rank's compute with the machine loaded by N of them, takes on the target.  That is what scales an
    MPI rank's compute time, so it is the factor used; a per-node ratio (of the scores) would also
    change with the copies per machine (the same CPU in a 4-socket machine scores about twice a
    2-socket one) and is not offered.  Per-copy times still depend on how many copies share a socket's
    memory and caches, so the copies per core of base and each target are listed, with a note when
    they differ by more than 10 %.  A speed result is one run of the benchmark (OpenMP threads on the
    whole machine); a user table's times are used as given.

    ``per_target``: how many benchmarks each target's factor combines (those it and the base both
    published); when they differ the text gives the range and a note names the targets with fewer,
    whose factors combine another set of benchmarks than the others'.
    """
    suites = sorted(set(db.results.loc[db.results["benchmark"].isin(list(benchmarks)), "suite"].astype(str)))
    rate = bool(suites) and all("rate" in x for x in suites)
    speed = bool(suites) and all("speed" in x for x in suites)
    what = ("SPEC CPU2017 rate base runtime (the time each of the run's concurrent copies takes: per copy)" if rate else
            "SPEC CPU2017 speed base runtime (one run with threads on the whole machine: per run)" if speed else
            f"published runtime ({', '.join(suites) or 'user table'})")
    combined = _COMBINED.get(source, source)
    loads = {s: _load(db, s) for s in [base, *targets]}
    counts = sorted(set((per_target or {}).values()))
    over = (f"over {counts[0]}-{counts[-1]} benchmarks (per target: those it and the base published)"
            if len(counts) > 1 else f"over {counts[0] if counts else len(benchmarks)} benchmarks")
    text = (f"factor = {what} on the target / on the base, {combined}, {over}"
            + ("; per copy = per MPI rank on a node loaded like the SPEC run (per-node score ratios are not used)"
               if rate else ""))
    notes = []
    if len(counts) > 1:
        few = [t for t in targets if per_target.get(t, counts[-1]) < counts[-1]]
        notes.append(f"{len(few)} of {len(targets)} target(s) share fewer benchmarks with the base than the others "
                     f"({', '.join(f'{t}: {per_target[t]}' for t in few[:3])}{', ...' if len(few) > 3 else ''}; "
                     f"the others {counts[-1]}, e.g. no integer-suite result joined to the target): their factors "
                     f"combine another set of benchmarks and compare with the others' only approximately")
    if rate:
        def per_core(s):
            ld = loads[s]
            return ld["copies"] / ld["cores"] if ld["copies"] and ld["cores"] else None

        b = per_core(base)
        odd = [s for s in targets if b and per_core(s) and abs(per_core(s) / b - 1) > 0.1]
        if odd:
            kinds = sorted({round(per_core(s), 2) for s in odd})
            notes.append(f"{len(odd)} of {len(targets)} target(s) ran SPEC with "
                         f"{' or '.join(f'{k:g}' for k in kinds)} copies per core, the base {b:g} "
                         f"({loads[base]['copies']:g} copies on {loads[base]['cores']:g} cores; 2 per core = SMT, two "
                         f"copies sharing a core): per-copy times change with the copies sharing a core, a socket's "
                         f"memory bandwidth and caches, so those factors hold for an application placing as many "
                         f"ranks per core as the SPEC runs did (e.g. {odd[0]}: {loads[odd[0]]['copies']:g} copies on "
                         f"{loads[odd[0]]['cores']:g} cores)")
    return {"text": text, "ratio": "target / base", "quantity": what, "per": "copy" if rate else "run",
            "combined_by": combined, "suites": suites, "benchmarks": list(benchmarks),
            "systems": {s: v for s, v in loads.items()}, "notes": notes}


def _signature_point(exp, point, param, counts):
    """The point to read counters at: ``point``, or its nearest measured process count (noted)."""
    if not point or param is None or param not in point or float(point[param]) in counts:
        return point, None
    p = float(point[param])
    near = min(counts, key=lambda c: abs(math.log(c) - math.log(p)))
    return dict(point, **{param: near}), (f"counter signature read at the nearest measured {param}={near:g} "
                                          f"(per-instruction metrics assumed unchanged at {param}={p:g})")


def project(exp, db: BenchmarkDB | None, signatures: Mapping[str, Signature] | None, base: str,
            targets: Sequence[str], point: Mapping[str, float] | None = None, groups: Sequence[str] | None = None,
            micro: MicroTable | None = None, micro_base: str | None = None, micro_targets: Sequence[str] = (),
            all_matches: bool = False, max_members: int = 4, signature: Signature | None = None,
            compute_factor: float | None = None, method: str = "auto", metric: str | None = None,
            ranks: str | None = None) -> Projection:
    """Project ``exp`` (counters [+ PMPI profile]) from ``base`` onto each of ``targets``.

    With ``compute_factor`` the surrogate is skipped (compute time x the factor, e.g. 1 when only the
    network changes) and ``base``/``targets`` name systems of the micro-benchmark table ``micro``.
    At a process count the experiment did not measure, the MPI profile and the compute time come
    from the Eq 14-16 models (:mod:`.mpimodel`), which the result lists.

    ``method``: "factor" (:mod:`.factor`; needs the memory groups in the signature, enough complete
    systems and target ratios, else the surrogate with a note), "surrogate" (Sharkawi's), "mean" (the
    geometric mean of the benchmarks' ratios), or "auto": the one with the smallest mean error in a
    closed loop on the published data run with the application's counter groups
    (:func:`closed_loop_check`; the factor model where that check cannot run).  "mean" needs no
    counters: an experiment with times only is projected by the geometric mean of the ratios of every
    benchmark both systems published.

    The time projected (:mod:`.apptime`): ``metric`` (default: the time metric the views show) with
    per-rank values combined by ``ranks`` (default mean: one rank's time); with an MPI profile, the
    per-rank mean of its time outside MPI.  The factor is a ratio of per-copy runtimes
    (:func:`factor_definition`, in the result).
    """
    from .comm import RoutineProfile, project_comm
    from .factor import factor_projector
    from .surrogate import find_surrogate

    if method not in COMPUTE_METHODS:
        raise PerfcastError(f"unknown compute method {method!r}; methods: {', '.join(COMPUTE_METHODS)}",
                            where="method")
    notes: list[str] = []
    has_mpi = any(str(c).startswith("MPI->") for c in exp.callpaths) and "calls" in exp.metrics
    profile, nprocs, models, counts, param = [], None, None, [], None
    mpi_regions = None
    bt = None
    if has_mpi:
        from .mpimodel import combine_nonblocking, mpi_profiles, profile_at
        if metric is not None or ranks is not None:
            raise PerfcastError("--metric/--ranks choose the time of an experiment without an MPI profile; with one, "
                                "the compute time is the per-rank mean of the time outside MPI (APP)",
                                where="--metric" if metric is not None else "--ranks")
        prof, compute_base, nprocs, pm, n = profile_at(exp, point)
        notes += n
        prof, n = combine_nonblocking(prof)
        notes += n
        profile = [RoutineProfile(r, v["calls"], v["bytes"], v["elapsed"]) for r, v in sorted(prof.items())]
        models = pm.to_list() if pm is not None else None
        mp = mpi_profiles(exp, point)
        counts, param = mp.counts, mp.param
        bt = BaseTime(mp.time_metric, exp.metrics[mp.time_metric].unit, compute_base,
                      "mean over ranks of the MPI profile's time outside MPI (APP)")
    if micro is not None and not has_mpi and compute_factor is None:
        notes.append(f"--micro {micro.source or 'table'} not used: the experiment has no MPI profile (callpaths "
                     f"MPI->MPI_*, calls), so its whole time is projected as compute")
    if compute_factor is not None:
        if not (compute_factor > 0 and math.isfinite(compute_factor)):
            raise PerfcastError(f"the compute factor must be a positive number, not {compute_factor:g}",
                                where="--compute-factor")
        if micro is None or not has_mpi:
            raise PerfcastError("--compute-factor projects communication between micro-benchmark systems: it needs "
                                "an MPI profile and --micro", where="--compute-factor")
        if micro_targets:
            raise PerfcastError("with --compute-factor, --target names the micro-benchmark systems; --micro-target "
                                "is for a projection between systems of the benchmark database", where="--micro-target")
        mb = micro.resolve(micro_base or base)
        tids = []
        for q in targets:
            s = micro.resolve(q)
            if s not in tids:
                tids.append(s)
        notes.append(f"compute time scaled by the given factor {compute_factor:g} (no surrogate)")
        results = []
        for tid in tids:
            cp = project_comm(profile, nprocs, micro, mb, tid, compute_base, compute_factor)
            comp_t = compute_factor * compute_base
            results.append(TargetProjection(tid, tid, compute_factor, comp_t, cp.elapsed_target,
                                            comp_t + cp.elapsed_target, cp.to_dict()))
        results.sort(key=lambda r: r.total)
        return Projection(mb, mb, compute_base, sum(r.elapsed for r in profile), None, results, notes, nprocs,
                          models, "given factor", base_time=bt,
                          factor_definition={"text": f"the given --compute-factor {compute_factor:g}", "per": None})
    if db is None:
        raise PerfcastError("no benchmark database given")
    base_id = db.resolve(base)
    tids: list[str] = []
    for q in targets:
        if all_matches:
            hits = db.find(q)
            if hits.empty:
                db.resolve(q)  # raises the "no system matches" error with suggestions
            tids += [s for s in hits["system"] if s != base_id and s not in tids]
        else:
            s = db.resolve(q)
            if s not in tids:
                tids.append(s)
    if not tids:
        raise PerfcastError("no target system left (the base is not its own target)", where="--target")
    if (micro_targets or micro_base) and micro is None:
        raise PerfcastError("--micro-base/--micro-target name systems of a micro-benchmark table: give it with --micro",
                            where="--micro-target" if micro_targets else "--micro-base")
    if len(micro_targets) > 1 and len(micro_targets) != len(tids):
        raise PerfcastError(f"{len(micro_targets)} --micro-target for {len(tids)} target system(s): give one for "
                            f"every target, in order, or one for all", where="--micro-target")
    spoint, n = _signature_point(exp, point, param, counts)
    if n:
        notes.append(n)
    try:
        totals = experiment_totals(exp, spoint)
    except PerfcastError as e:
        if point and "empty" in str(e):
            raise PerfcastError(f"--at {', '.join(f'{k}={v:g}' for k, v in point.items())} was not measured; "
                                f"an unmeasured point needs an MPI profile to model (Eq 14-16)", where="--at") from None
        raise
    if not has_mpi:
        bt = base_time(exp, point, metric, ranks)
        compute_base = bt.seconds
        if not compute_base > 0:
            raise PerfcastError(f"the time to project ({bt.metric}) is {compute_base:g} s at this point", where="--at")
        share, names = mpi_region_share(exp, point, bt.metric)
        if names:
            mpi_regions = {"share": share, "routines": names, "metric": bt.metric}
            notes.append(f"the profile has MPI regions ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}"
                         + (f": {share:.1%} of {bt.metric}" if share is not None else "")
                         + ") but no PMPI profile (callpaths MPI->MPI_* with calls): their time is projected with "
                           "the compute factor, not from micro-benchmarks (perfcast collect --collect mpi records one)")
    sig = signature or signature_from_totals(totals, "application")
    times_only = False
    if groups is None:
        groups = [g for g in GROUPS if g in sig.groups()]
        if not groups and method in ("mean", "auto"):
            # "auto" takes the best method the data allow: without counters, the mean is the only one
            times_only = True
            notes.append("no counter signature: the compute factor is the geometric mean of the ratios of every "
                         "benchmark both systems published (--method mean"
                         + (", the one method an experiment without counters allows)" if method == "auto" else ")"))
        elif not groups:
            hint = ("; or, when only the network changes, give --compute-factor with --micro systems as "
                    "--base/--target" if has_mpi else "")
            raise PerfcastError("the experiment has no counter signature (instructions with cycles, loads/stores or "
                                "cache misses) for the surrogate: measure counters (perfcast collect --collect "
                                f"counters), or use --method mean, which needs only the times{hint}")
        else:
            notes.append(f"metric groups matched: {', '.join(groups)}")
    t = db.times()
    fp: FactorProjector | None = None
    check = None
    if not times_only and method in ("mean", "auto") and not any(b in t.columns for b in (signatures or {})):
        # the counters have nothing to be matched with (e.g. a SPEC speed or a user table): the mean needs none
        times_only = True
        notes[:] = [n for n in notes if not n.startswith("metric groups matched")]
        notes.append("no benchmark of the database has a counter signature, so the counters are not used: the compute "
                     "factor is the geometric mean of the ratios of every benchmark both systems published")
    if times_only:
        signatures = {}
        cand = [b for b in t.columns if base_id in t.index and np.isfinite(t.at[base_id, b])]
        if not cand:
            raise PerfcastError(f"base system {base_id!r} has no published result")
        chosen = "mean"
    else:
        if signatures is None:
            raise PerfcastError("no benchmark signatures given")
        groups = check_groups(groups)
        sig.require(groups, "the application")
        # benchmarks usable: signature and published result on base and every target
        usable = [b for b in signatures if b in t.columns]
        if not usable:
            raise PerfcastError("no benchmark of the database has a counter signature")
        missing_base = [b for b in usable if not np.isfinite(t.at[base_id, b])] if base_id in t.index else usable
        if len(missing_base) == len(usable):
            raise PerfcastError(f"base system {base_id!r} has no published result for any signature benchmark")
        cand = [b for b in usable if b not in missing_base]
        if method in ("auto", "factor"):
            try:
                fp = factor_projector(t[usable], {b: signatures[b] for b in usable}, sig, groups)
            except PerfcastError as e:
                notes.append(f"factor model not used ({e})")
        if method == "auto":
            try:
                check = closed_loop_check(db, signatures, groups, fp is not None)
            except PerfcastError as e:
                notes.append(f"no closed-loop check on the published data ({e})")
        if method == "auto":
            chosen = min(check, key=lambda m: check[m]["mean"]) if check else ("factor" if fp is not None
                                                                               else "surrogate")
        else:
            chosen = "surrogate" if method == "factor" and fp is None else method
    mean_check = chosen == "mean" and not check    # stated after the targets: over the benchmarks used
    if check:
        notes.append(_check_note(check, groups, chosen))
    if chosen == "factor":
        notes.append(f"compute factor from the rank-{fp.model.rank} supervised factor model of {len(fp.model.systems)} "
                     f"systems x {len(fp.model.benchmarks)} benchmarks (loadings from "
                     f"{', '.join(fp.metrics)}); the surrogate is shown for comparison")
    sources = set()
    results = []
    surrogate, surrogate_target = None, None
    unrated: list[str] = []     # targets whose surrogate match has no degrees of freedom (surrogate.py)
    used: set[str] = set()
    for tid in tids:
        have = [b for b in cand if tid in t.index and np.isfinite(t.at[tid, b])]
        if len(have) < (1 if times_only else 2):
            what = "benchmarks the base published" if times_only else "surrogate benchmarks"
            raise PerfcastError(f"target {tid!r} ({db.name(tid)}) lacks published results for the {what} "
                                f"({', '.join(b for b in cand if b not in have)})", where="--target")
        ratios = {b: float(t.at[tid, b] / t.at[base_id, b]) for b in have}
        used.update(have)
        mean_sf = float(np.exp(np.mean([math.log(r) for r in ratios.values()])))
        extra = {"mean_factor": mean_sf, "benchmarks": len(ratios)}
        sur = None
        if not times_only:
            sur = find_surrogate(sig, {b: signatures[b] for b in have}, groups,
                                 {b: math.log(r) for b, r in ratios.items()}, max_members)
            if surrogate is None:
                surrogate, surrogate_target = sur, tid
            if sur.quality == "unrated":
                unrated.append(tid)
            sf = sur.scaling_factor(ratios)
            extra["surrogate_factor"] = sf
        interval = None
        if chosen == "factor":
            try:
                sf, lo, hi = fp.interval(ratios)
                interval = (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None
                extra["factor_model"] = fp.to_dict()
                extra["pair_benchmarks"] = sum(b in ratios for b in fp.model.benchmarks)
                sources.add("factor model")
            except PerfcastError as e:
                notes.append(f"target {tid}: {e}; surrogate used")
                sources.add("surrogate")
        elif chosen == "mean":
            sf = mean_sf
            sources.add("mean of the benchmarks")
        else:
            sources.add("surrogate")
        comp_t = sf * compute_base
        comm_t, detail = None, None
        if has_mpi and profile:
            if micro is None:
                if not any("no micro-benchmark table" in x for x in notes):
                    notes.append("no micro-benchmark table given (--micro): communication scaled by the compute "
                                 "factor")
                comm_t = sf * sum(r.elapsed for r in profile)
            else:
                mb = micro.resolve(micro_base or base)
                mt = micro.resolve(micro_targets[len(results)] if len(micro_targets) > len(results)
                                   else micro_targets[0] if micro_targets else tid)
                cp = project_comm(profile, nprocs, micro, mb, mt, compute_base, sf)
                comm_t, detail = cp.elapsed_target, cp.to_dict()
                detail["surrogate"] = None if sur is None else sur.to_dict()
                detail.update(extra)
        elif has_mpi:
            comm_t = 0.0
        results.append(TargetProjection(tid, db.name(tid), sf, comp_t, comm_t, comp_t + (comm_t or 0.0),
                                        detail if detail else {"surrogate": None if sur is None else sur.to_dict(),
                                                               **extra}, interval))
    if unrated:
        s0 = next(r.comm_detail["surrogate"] for r in results if r.system == unrated[0])
        notes.append(f"surrogate match not rated for {len(unrated)} of {len(results)} target(s) (e.g. {unrated[0]}): "
                     f"{s0['free_fractions']} free fraction(s) for {s0['constraints']} independent metric "
                     f"constraint(s) ({', '.join(groups)}) reproduce the application's signature by construction "
                     f"(its group errors are 0 and say nothing); the surrogate's error is the closed loop's on "
                     f"published data")
        if chosen == "surrogate" and not (check or {}).get("surrogate"):
            # the surrogate carries the projection and nothing rates it: its error on held-out published pairs
            try:
                check = closed_loop_check(db, signatures, groups, False)
                notes.append(_check_note(check, groups, chosen))
            except PerfcastError as e:
                notes.append(f"no closed-loop check on the published data ({e})")
    if mean_check:
        # no closed loop ran (no counters, or --method mean): state the error the mean makes on published
        # data with the benchmarks these factors combine
        from .closed_loop import mean_baseline, random_pairs

        benches = sorted(used)
        try:
            check = {"mean": mean_baseline(db, benches, random_pairs(db, benches, MEAN_CHECK_PAIRS))}
            e = check["mean"]
            e["systems"] = n_sys = int(t[benches].dropna().shape[0])
            notes.append(f"closed loop on {MEAN_CHECK_PAIRS} random pairs of the {n_sys} published systems with the "
                         f"{len(benches)} benchmarks used"
                         + (" (too few systems and benchmarks for the check to say much)" if n_sys < 10 or
                            len(benches) < 3 else "") + ": the geometric mean of the other benchmarks' ratios misses a benchmark's "
                         f"own ratio by {e['mean']:.1%} on average (median {e['median']:.1%}, p90 {e['p90']:.1%}); "
                         f"expect an error of that order for the application")
        except PerfcastError as e:
            notes.append(f"no closed-loop check on the published data ({e})")
    short = [] if fp is None else [r.comm_detail["pair_benchmarks"] for r in results
                                   if (r.comm_detail or {}).get("pair_benchmarks", math.inf) < len(fp.model.benchmarks)]
    if short:
        have = f"{min(short)}" if min(short) == max(short) else f"{min(short)}-{max(short)}"
        notes.append(f"{len(short)} of {len(results)} target(s) and the base do not share results for all of the factor "
                     f"model's {len(fp.model.benchmarks)} benchmarks (e.g. no integer-suite result joined to one of "
                     f"them): those factors are fitted on the {have} they share")
    results.sort(key=lambda r: r.total)
    comm_base = sum(r.elapsed for r in profile) if has_mpi else None
    source = " + ".join(sorted(sources)) or "surrogate"
    per_target = {r.system: r.comm_detail["benchmarks"] for r in results if (r.comm_detail or {}).get("benchmarks")}
    fdef = factor_definition(db, base_id, [r.system for r in results], sorted(used), source,
                             None if short else per_target)
    notes += fdef.pop("notes")
    return Projection(base_id, db.name(base_id), compute_base, comm_base, surrogate, results, notes, nprocs, models,
                      source, check, bt, fdef, surrogate_target, mpi_regions)

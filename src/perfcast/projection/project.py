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

    def to_dict(self) -> dict:
        return {"base": self.base, "base_name": self.base_name, "compute_base": self.compute_base,
                "communication_base": self.comm_base, "nprocs": self.nprocs, "compute_source": self.compute_source,
                "closed_loop_check": self.check,
                "surrogate": None if self.surrogate is None else self.surrogate.to_dict(),
                "targets": [t.to_dict() for t in self.targets], "notes": self.notes, "mpi_models": self.models,
                "data_note": "SPEC CPU2017 (rate) replaces the seed's SPEC CFP2006; signatures of the benchmarks "
                             "are Skylake-SP measurements (Navarro-Torres et al. 2019)"}


def compute_time(totals: Mapping[str, float], has_mpi: bool, exp=None, point=None) -> float:
    for name in ("time", "cpu_time", "runtime", "walltime"):
        if name in totals and totals[name] > 0:
            return float(totals[name])
    raise PerfcastError("the experiment has no time metric (time, cpu_time, runtime) to project")


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
            compute_factor: float | None = None, method: str = "auto") -> Projection:
    """Project ``exp`` (counters [+ PMPI profile]) from ``base`` onto each of ``targets``.

    With ``compute_factor`` the surrogate is skipped (compute time x the factor, e.g. 1 when only the
    network changes) and ``base``/``targets`` name systems of the micro-benchmark table ``micro``.
    At a process count the experiment did not measure, the MPI profile and the compute time come
    from the Eq 14-16 models (:mod:`.mpimodel`), which the result lists.

    ``method``: "factor" (:mod:`.factor`; needs the memory groups in the signature, enough complete
    systems and target ratios, else the surrogate with a note), "surrogate" (Sharkawi's), "mean" (the
    geometric mean of the benchmarks' ratios), or "auto": the one with the smallest mean error in a
    closed loop on the published data run with the application's counter groups
    (:func:`closed_loop_check`; the factor model where that check cannot run).
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
    if has_mpi:
        from .mpimodel import combine_nonblocking, mpi_profiles, profile_at
        prof, compute_base, nprocs, pm, n = profile_at(exp, point)
        notes += n
        prof, n = combine_nonblocking(prof)
        notes += n
        profile = [RoutineProfile(r, v["calls"], v["bytes"], v["elapsed"]) for r, v in sorted(prof.items())]
        models = pm.to_list() if pm is not None else None
        mp = mpi_profiles(exp, point)
        counts, param = mp.counts, mp.param
    if compute_factor is not None:
        if not (compute_factor > 0 and math.isfinite(compute_factor)):
            raise PerfcastError(f"the compute factor must be a positive number, not {compute_factor:g}",
                                where="--compute-factor")
        if micro is None or not has_mpi:
            raise PerfcastError("--compute-factor projects communication between micro-benchmark systems: it needs "
                                "an MPI profile and --micro", where="--compute-factor")
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
                          models, "given factor")
    if db is None or signatures is None:
        raise PerfcastError("no benchmark database or signatures given")
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
        compute_base = compute_time(totals, False)
    sig = signature or signature_from_totals(totals, "application")
    if groups is None:
        groups = [g for g in GROUPS if g in sig.groups()]
        if not groups:
            hint = ("; or, when only the network changes, give --compute-factor with --micro systems as "
                    "--base/--target" if has_mpi else "")
            raise PerfcastError("the experiment has no counter signature (instructions with cycles, loads/stores or "
                                "cache misses) for the surrogate: measure counters (perfcast collect --collect "
                                f"counters){hint}")
        notes.append(f"metric groups matched: {', '.join(groups)}")
    groups = check_groups(groups)
    sig.require(groups, "the application")
    # benchmarks usable: signature and published result on base and every target
    t = db.times()
    usable = [b for b in signatures if b in t.columns]
    if not usable:
        raise PerfcastError("no benchmark of the database has a counter signature")
    missing_base = [b for b in usable if not np.isfinite(t.at[base_id, b])] if base_id in t.index else usable
    if len(missing_base) == len(usable):
        raise PerfcastError(f"base system {base_id!r} has no published result for any signature benchmark")
    cand = [b for b in usable if b not in missing_base]
    fp: FactorProjector | None = None
    if method in ("auto", "factor"):
        try:
            fp = factor_projector(t[usable], {b: signatures[b] for b in usable}, sig, groups)
        except PerfcastError as e:
            notes.append(f"factor model not used ({e})")
    check = None
    if method == "auto":
        try:
            check = closed_loop_check(db, signatures, groups, fp is not None)
        except PerfcastError as e:
            notes.append(f"no closed-loop check on the published data ({e})")
    if method == "auto":
        chosen = min(check, key=lambda m: check[m]["mean"]) if check else ("factor" if fp is not None else "surrogate")
    else:
        chosen = "surrogate" if method == "factor" and fp is None else method
    if check:
        notes.append(f"closed loop on {CHECK_PAIRS} random published system pairs with the application's counter "
                     f"groups ({', '.join(groups)}), mean error: "
                     + ", ".join(f"{_LABELS[m]} {v['mean']:.1%}" for m, v in sorted(check.items(),
                                                                                  key=lambda kv: kv[1]["mean"]))
                     + f"; compute factor from the {_LABELS[chosen]}")
    if chosen == "factor":
        notes.append(f"compute factor from the rank-{fp.model.rank} supervised factor model of {len(fp.model.systems)} "
                     f"systems x {len(fp.model.benchmarks)} benchmarks (loadings from "
                     f"{', '.join(fp.metrics)}); the surrogate is shown for comparison")
    sources = set()
    results = []
    surrogate = None
    for tid in tids:
        have = [b for b in cand if tid in t.index and np.isfinite(t.at[tid, b])]
        if len(have) < 2:
            raise PerfcastError(f"target {tid!r} ({db.name(tid)}) lacks published results for the surrogate "
                                f"benchmarks ({', '.join(b for b in cand if b not in have)})", where="--target")
        ratios = {b: float(t.at[tid, b] / t.at[base_id, b]) for b in have}
        sur = find_surrogate(sig, {b: signatures[b] for b in have}, groups,
                             {b: math.log(r) for b, r in ratios.items()}, max_members)
        surrogate = surrogate or sur
        sf = sur.scaling_factor(ratios)
        mean_sf = float(np.exp(np.mean([math.log(r) for r in ratios.values()])))
        extra = {"surrogate_factor": sf, "mean_factor": mean_sf}
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
                detail["surrogate"] = sur.to_dict()
                detail.update(extra)
        elif has_mpi:
            comm_t = 0.0
        results.append(TargetProjection(tid, db.name(tid), sf, comp_t, comm_t, comp_t + (comm_t or 0.0),
                                        detail if detail else {"surrogate": sur.to_dict(), **extra}, interval))
    short = [] if fp is None else [r.comm_detail["pair_benchmarks"] for r in results
                                   if (r.comm_detail or {}).get("pair_benchmarks", math.inf) < len(fp.model.benchmarks)]
    if short:
        have = f"{min(short)}" if min(short) == max(short) else f"{min(short)}-{max(short)}"
        notes.append(f"{len(short)} of {len(results)} target(s) and the base do not share results for all of the factor "
                     f"model's {len(fp.model.benchmarks)} benchmarks (e.g. no integer-suite result joined to one of "
                     f"them): those factors are fitted on the {have} they share")
    results.sort(key=lambda r: r.total)
    comm_base = sum(r.elapsed for r in profile) if has_mpi else None
    return Projection(base_id, db.name(base_id), compute_base, comm_base, surrogate, results, notes, nprocs, models,
                      " + ".join(sorted(sources)) or "surrogate", check)

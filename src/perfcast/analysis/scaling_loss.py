"""Scaling loss by differential profiling (HPCToolkit's excess work, seed 003 §3).

For two runs on p < q processes and a scope s with per-process cost C_p(s), C_q(s):

* weak scaling (work per process constant; ideal C_q = C_p):
  ``loss(s) = (C_q(s) - C_p(s)) / T_q``
* strong scaling (total work constant; ideal C_q = p/q C_p), with k = q / p:
  ``loss(s) = (k C_q(s) - C_p(s)) / (k T_q)``

T_q is the total cost of run q: the inclusive cost of the tree's root(s), per process as
``project``'s base time takes it (:func:`perfcast.analysis.views.whole_program_total`: each rank's
whole-program value, then reduced over the ranks); with several roots run by different ranks this
differs from the sum of each root's own rank reduction, and each pair's ``notes`` say so.  The loss is computed
for inclusive costs I(s) and exclusive costs E(s): 0 is perfect scaling, > 0 a loss (a fraction
of run q's total), < 0 superlinear.  The root's inclusive loss is the run's whole excess.

Where the loss lives: a scope whose exclusive loss is at least half its inclusive loss loses
scalability in its own code (``self``); when the inclusive loss outweighs it (exclusive < half of
inclusive) the loss comes from its callees (``callees``, follow the hot path); scopes with no
positive inclusive loss scale (``-``).

Aggregation (decided here, documented for users): cost is *per process*: per repetition, the
values of the locations (ranks/threads) are reduced with ``ranks`` -- ``mean`` by default, i.e.
the sum over ranks divided by their number, which is what the formulas assume; ``max`` takes the
critical path instead -- and repetitions are then averaged.  ``sum`` over per-rank values is
refused: it is the run's total, no per-process cost (perfect weak scaling would look like a loss of
(q - p)/q, and the strong-scaling formula would multiply the total by q/p once more), and the
total over the processes is the mean times the ranks that hold the metric, which ``mean`` already is
per process.  An experiment without location columns is used as stored
(its values are taken to be per-process already, e.g. Caliper's ``avg#...`` aggregates).  In a
dense table (tidy CSV/JSONL/Parquet) a rank lacking a callpath's value has no inclusive value above
it nor exclusive value of its parent (:meth:`perfcast.experiment.Experiment._gapped`): costs and
T_q are reduced over the ranks that have them, never with the absent value counted as 0.  A scope
present in only one run has cost 0 in the other, so diverging trees show up as losses or gains.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from ..experiment import Experiment
from ..scaling import PROC_NAMES  # noqa: F401  (re-exported: its rule lives with the scaling rules)
from .views import (_num, combined_in_file, default_metric, negative_exclusive_cause, no_exclusive, scope_values,
                    tree_total, whole_program_total)

__all__ = ["scaling_loss", "process_parameter", "MODES", "PROC_NAMES"]

MODES = ("weak", "strong")


def process_parameter(exp: Experiment, given: str | None = None) -> str:
    """The parameter counting processes: ``given``, the only varying one, or a conventional name."""
    if given is not None:
        if given not in exp.parameters:
            raise PerfcastError(f"no parameter {given!r}; the experiment has: {', '.join(exp.parameters) or '(none)'}")
        return given
    if not exp.parameters:
        raise PerfcastError("the experiment has no parameters: scaling loss needs runs at several process counts")
    if len(exp.parameters) == 1:
        return exp.parameters[0]
    pts = exp.points()
    varying = [p for p in exp.parameters if pts[p].nunique() > 1]
    if len(varying) == 1:
        return varying[0]
    named = [p for p in varying if p.lower() in PROC_NAMES]
    if len(named) == 1:
        return named[0]
    raise PerfcastError(f"cannot tell which parameter counts processes ({', '.join(varying) or 'none varies'}); "
                        f"name it with --procs")


def scaling_loss(exp: Experiment, mode: str, metric: str | None = None, procs: str | None = None,
                 pairs: Sequence[tuple[float, float]] | None = None, at: Mapping[str, float] | None = None,
                 ranks: str = "mean", sort: str = "exclusive") -> dict:
    """Excess work of every scope for each pair of runs (default: consecutive process counts).

    Returns ``{"mode", "metric", "procs", "ranks", "pairs": [{"p", "q", "total_p", "total_q",
    "loss", "rows": [...]}, ...]}``; rows (one per callpath, ranked by ``sort``: ``exclusive`` or
    ``inclusive`` loss) hold ``path, name, depth, inclusive_p, inclusive_q, exclusive_p,
    exclusive_q, inclusive_loss, exclusive_loss, where``."""
    if mode not in MODES:
        raise PerfcastError(f"scaling mode {mode!r}: use weak or strong")
    if sort not in ("exclusive", "inclusive"):
        raise PerfcastError(f"sort key {sort!r}: use exclusive or inclusive")
    metric = metric or default_metric(exp)
    if metric not in exp.metrics:
        raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(exp.metrics)}")
    proc = process_parameter(exp, procs)
    at = dict(at or {})
    # whose own value is unknown (timers that nest): by the whole campaign's points, as view judges
    unknown = no_exclusive(exp, metric, ranks=ranks) if metric in exp.metrics else frozenset()
    if proc in at:
        raise PerfcastError(f"--at fixes {proc!r}, the process count being compared; fix only other parameters")
    if at:
        exp = exp.select(**at)
    others = [p for p in exp.parameters if p != proc and exp.points()[p].nunique() > 1]
    if others:
        raise PerfcastError(f"parameter(s) {', '.join(others)} vary too; fix them with --at NAME=VALUE")
    counts = sorted(float(x) for x in exp.points()[proc].unique())
    if pairs is None:
        if len(counts) < 2:
            raise PerfcastError(f"only one value of {proc!r} ({_num(counts[0])}); scaling loss compares two runs")
        pairs = list(zip(counts[:-1], counts[1:]))
    for p, q in pairs:
        for v in (p, q):
            if v not in counts:
                raise PerfcastError(f"no run with {proc}={_num(v)}; runs: {', '.join(_num(c) for c in counts)}")
        if not (0 < p < q):
            raise PerfcastError(f"compare a smaller run with a larger one (0 < p < q), got {_num(p)} -> {_num(q)}")
    if ranks == "sum" and exp.has_locations:
        # was taken as a per-process cost: the strong-scaling loss of the jacobi campaign's Ir, p 1 -> 16,
        # came out 95.65 % (the total work per process gives 30.35 %)
        raise PerfcastError("sum: the sum over ranks is the run's total, not a per-process cost, and the "
                            "formulas compare per-process costs; use mean (the sum over ranks / ranks) or max "
                            "(the slowest rank)", where="--ranks")
    vals = scope_values(exp, metric, ranks=ranks, unknown=unknown).set_index([proc, "callpath"])
    vals = vals[[c for c in ("inclusive", "exclusive")]]
    m = exp.metrics[metric]
    summed = m.aggregate.startswith("sum over") and not exp.has_locations
    if summed:
        # one value per run, summed over its ranks in the file (Caliper sum#): the per-process cost is that
        # sum over the process count (was taken as it is: 93 % weak-scaling loss on LULESH, 10 % per process)
        vals = vals.div(vals.index.get_level_values(proc).astype(float), axis=0)
        said = f"summed in the file, divided by {proc}"
    else:
        # without per-rank values nothing is combined: --ranks would name a reduction that was not
        # made (Caliper avg# is a mean whatever --ranks says), so say what a value is, as the views do
        said = combined_in_file(exp, metric) or ranks
    tree = exp.tree
    order = {c: i for i, c in enumerate(tree.preorder())}
    # each run's total by the one rule (views.whole_program_total: the per-rank whole-program value,
    # as project's base time), not the sum of each topmost callpath's own rank reduction: with
    # several topmost callpaths run by different ranks the two differ
    how = "mean" if summed else ranks
    totals = {v: whole_program_total(exp.select(**{proc: v}), metric, how) / (v if summed else 1.0)
              for v in sorted({x for pq in pairs for x in pq})}
    # times of runs whose ranks shared the cores (more ranks than cores, or other processes busy on them)
    # measure the waiting, not the code: a loss between such runs is partly the machine's (the jacobi
    # campaign's p 4 -> 8 "excess work 77.17%" on 2 cores was said as the code's)
    from .oversubscription import of_metric

    over = of_metric(exp, metric, proc)
    shared = (set(over.over) | {v for v, _ in over.contended}) if over is not None else set()
    result = []
    for p, q in pairs:
        a = vals.xs(p, level=proc)
        b = vals.xs(q, level=proc)
        both = a.add_suffix("_p").join(b.add_suffix("_q"), how="outer").fillna(0.0)
        # an exclusive value not known (views.no_exclusive: a run whose timers nest, and its timers) has
        # no exclusive loss and no 'where': a difference of nested timers is nobody's own time
        mine = both.index.astype(str).isin(unknown)
        both.loc[mine, ["exclusive_p", "exclusive_q"]] = np.nan
        tot_p, tot_q = totals[p], totals[q]
        roots = tree_total(exp, a), tree_total(exp, b)
        k = q / p if mode == "strong" else 1.0
        denom = k * tot_q
        if denom == 0:
            raise PerfcastError(f"the total {metric!r} of the run with {proc}={_num(q)} is 0; no loss to relate")
        rows = []
        for path, r in both.iterrows():
            inc_l = (k * r["inclusive_q"] - r["inclusive_p"]) / denom
            exc_l = (k * r["exclusive_q"] - r["exclusive_p"]) / denom
            known = not math.isnan(exc_l)
            rows.append({"path": path, "name": tree.name(path), "depth": tree.depth(path),
                         "inclusive_p": float(r["inclusive_p"]), "inclusive_q": float(r["inclusive_q"]),
                         "exclusive_p": float(r["exclusive_p"]) if known else None,
                         "exclusive_q": float(r["exclusive_q"]) if known else None,
                         "inclusive_loss": float(inc_l), "exclusive_loss": float(exc_l) if known else None,
                         "where": _where(inc_l, exc_l) if known else None})
        # a loss not known last, those by their inclusive loss
        rows.sort(key=lambda r: (r[f"{sort}_loss"] is None, -(r[f"{sort}_loss"] or 0.0), -r["inclusive_loss"],
                                 order.get(r["path"], 0)))
        notes = [f"the total at {proc}={_num(v)} ({_g(t)}) is the {how} over ranks of each rank's whole-program "
                 f"{metric}, as project's base time; the sum of the topmost callpaths' own {how} values is "
                 f"{_g(r)}: they were run by different ranks"
                 for v, t, r in ((p, tot_p, roots[0]), (q, tot_q, roots[1]))
                 if exp.has_locations and abs(t - r) > 1e-9 * max(abs(t), abs(r))]
        # an exclusive value below 0 is no cost (its children's inclusive values exceed its own): its loss
        # and 'where' are differences of non-costs (LULESH max#: lulesh.cycle's exclusive -11.08 s at 27)
        neg = [r for r in rows if r["exclusive_loss"] is not None and min(r["exclusive_p"], r["exclusive_q"]) < -1e-9 * max(
            abs(r["inclusive_p"]), abs(r["inclusive_q"]), 1e-300)]
        if neg:
            worst = min(neg, key=lambda r: min(r["exclusive_p"], r["exclusive_q"]))
            why = ("a maximum or minimum over ranks does not add up along the calling tree"
                   if m.aggregate.startswith(("max", "min")) else
                   "the children's inclusive values exceed their parent's: " + negative_exclusive_cause(m))
            notes.append(f"{len(neg)} scope(s) have a negative exclusive {metric} at {proc}={_num(p)} or "
                         f"{_num(q)} (e.g. {worst['path']}: {_g(min(worst['exclusive_p'], worst['exclusive_q']))}): "
                         f"{why}, so their exclusive loss and 'where' mean nothing; --sort inclusive ranks by "
                         f"the inclusive loss")
        gone = [r["path"] for r in rows if r["exclusive_loss"] is None]
        if gone:
            runs = [c for c in gone if tree.parent(c) not in unknown]
            notes.append(f"the exclusive {metric} of {', '.join(runs)} and its {len(gone) - len(runs)} timer(s) is not "
                         f"known: {negative_exclusive_cause(m)}, and they add up to more than the run at some "
                         f"measured point, so no exclusive loss and no 'where' (n/a): a difference of nested timers "
                         f"is no scope's own; their inclusive losses are measured")
        hit = [v for v in (p, q) if v in shared] if over is not None and over.parameter == proc else sorted(shared)
        if hit:
            why = ([f"more ranks than the {over.cores} cores of {over.host}"] if set(hit) & set(over.over) else []) + \
                (["other processes busy on the cores"] if set(hit) & {v for v, _ in over.contended} else [])
            notes.append(f"the {metric} of the run(s) at {over.parameter} = {', '.join(_num(v) for v in hit)} "
                         f"includes waiting for the cores ({' or '.join(why)}): this loss is partly the "
                         f"machine's, not the code's")
        result.append({"p": p, "q": q, "total_p": tot_p, "total_q": tot_q,
                       "loss": float((k * tot_q - tot_p) / denom), "rows": rows, "notes": notes})
    return {"mode": mode, "metric": metric, "unit": m.unit, "procs": proc, "ranks": said, "sort": sort,
            "at": {k: float(v) for k, v in at.items()}, "pairs": result,
            **({"oversubscribed": over.to_dict()} if over is not None else {})}


def _g(x: float) -> str:
    return f"{x:.6g}"


def _where(inc: float, exc: float) -> str:
    if not inc > 0:
        return "-"
    return "self" if exc >= 0.5 * inc else "callees"


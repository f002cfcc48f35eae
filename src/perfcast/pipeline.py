"""Streamed model runs: ``perfcast model FILE -o OUT.parquet`` on an input larger than memory.

The file is cut into ranges of whole REGION lines (:func:`perfcast.io.extrap.text_ranges`, ~32 MB
each) that are read (:func:`perfcast.io.extrap.text_range`), fitted and written a range at a time,
``FitOptions.workers`` ranges at once in forked processes, so memory follows the range, not the file.
The output is the in-memory run's (:meth:`perfcast.modelset.ModelSet.to_table`): the same rows in
the same order with the same values and column types (the same bytes), because everything a
series' row depends on beyond its own data is computed over the whole file first:

1. **Survey** (a first pass): per fitting group (:func:`perfcast.fit.series.group_parts`: options,
   points, strong-scaling part) the per-series sums of the noise-shape estimate
   (:func:`perfcast.fit.shape.shape_sums`: ~110 bytes per series of 6 points), the metrics in order
   of first use, the largest repetition count and the number of values (whether the fit keeps the
   repetitions), and each callpath named once.  Each group's shape is then
   :func:`perfcast.fit.shape.shape_from_sums` of all its series, as
   :func:`perfcast.fit.core.fit_group` estimates it from the whole group.
2. **Fit** (a second pass): each range is read again and fitted with its groups' shapes
   (``fit_group(shape=...)``; a series' fit depends on nothing else of its group but the drift,
   :mod:`perfcast.fit.core`), segmented and made a :class:`~perfcast.modelset.ModelSet`; its rows'
   model columns (:meth:`~perfcast.modelset.ModelSet.model_columns`) go to a temporary Arrow file,
   the ranking's per-series columns (:func:`perfcast.analysis.ranking.cost_values`, ~50 bytes per
   series) to the parent.
3. **Rank and write**: the ``cost`` ranking of all series at once
   (:func:`perfcast.analysis.ranking.cost_order`: the roots summed over every series), then the rows
   sorted into rank order through buckets of one Parquet row group each (one pass over the
   temporary rows distributes them; a bucket at a time is sorted and written), into a temporary
   file put in place at the end (:func:`perfcast.output.atomic_file`): an error anywhere leaves
   nothing.

The table holds no intervals, so the leave-largest-out check of the fit, whose only product is the
drift of the intervals, is skipped (``fit_group(check=False)``: the same models otherwise).

Taken (else ``None`` is returned and the caller models in memory): one Extra-P text file the
streaming parser reads (any error: the in-memory run's reader names the file and line), with flat
callpaths each named by one REGION line, one parameter, ranked by cost at the default target.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

#: ``--stream auto``: Extra-P text inputs from this size on are modelled a block at a time
STREAM_BYTES = 256 << 20
#: bytes of text per block (~110k series of 6 points x 5 repetitions; ~0.4 GB at a block's peak)
BLOCK_BYTES = 32 << 20
#: rows per row group of the output: pyarrow's ``write_table`` default, as the in-memory run writes
ROW_GROUP = 1 << 20


def streamable(path: str | Path, fmt: str | None, output: str | Path, forced: bool = False) -> bool:
    """Whether ``perfcast model PATH -o OUTPUT`` is streamed: a ``.parquet`` output, an Extra-P
    text file (given or detected) of :data:`STREAM_BYTES` or more (any size when ``forced``)."""
    from .io import detect
    from .output import table_format

    path = Path(path)
    if table_format(output) != "parquet" or fmt not in (None, "extrap-text") or not path.is_file():
        return False
    if not forced and path.stat().st_size < STREAM_BYTES:
        return False
    return fmt == "extrap-text" or detect(path).name == "extrap-text"


def model_table(path: str | Path, output: str | Path, *, force: bool, options=None, locations: str = "auto",
                averaged: bool = False, progress: Callable[[int, int, str], None] | None = None,
                warn: Callable[[str], None] | None = None, roots: dict | None = None) -> int | None:
    """Write ``perfcast model PATH -o OUTPUT`` (a ``.parquet`` file; ``by="cost"``, default target)
    streamed (module docstring); the number of series written, or None when the file is not one
    this takes (nothing written; model it in memory).  ``options.workers`` processes read and fit
    the blocks (each block's fit in one process).  ``warn``: given the reader's warnings about
    the whole file (negative times, parameter values <= 0) before the fit.  ``roots``: filled with
    the cost ranking's root of each flat metric with a whole-run timer (metric -> timer, as
    ``ModelSet.whole_run`` in memory) once the table is written."""
    from dataclasses import replace

    from .fit import FitOptions
    from .io.extrap import StreamUnsupported, text_ranges

    path = Path(path)
    opts = options or FitOptions()
    workers = opts.workers
    opts = replace(opts, workers=1)
    prog = progress or (lambda done, total, what="": None)
    try:
        header, ranges = text_ranges(path, BLOCK_BYTES)
    except StreamUnsupported:
        return None
    with _Pool((path, header, ranges, opts, locations, averaged), workers) as pool:
        try:
            survey = _survey(pool, prog)
        except StreamUnsupported:
            return None
        for w in survey["warnings"] if warn is not None else ():
            warn(w)
        from .output import temporary_dir

        tmp = temporary_dir(output)   # the one rule: a killed writer's directory goes with the next write
        try:
            ranking, pieces, meta = _fit(pool, survey, Path(tmp), prog)
            n = _write(output, force, ranking, pieces, meta, Path(tmp), prog)
            if roots is not None:
                roots.update(meta["roots"])
            return n
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _parent(output) -> str:
    parent = Path(output).parent
    return str(parent) if str(parent) else "."


#: what the forked workers read (set in the parent before the fork, inherited): (path, header,
#: ranges, options, locations, averaged)
_JOB: tuple | None = None


class _Pool:
    """``workers`` processes forked once, before the parent holds anything large (a worker forked
    later would hold the parent's pages too), mapping over the ranges; here when one worker or
    the platform does not fork."""

    def __init__(self, job: tuple, workers: int):
        global _JOB
        import multiprocessing as mp

        _JOB = job
        self.pool = None
        if workers > 1 and len(job[2]) > 1 and "fork" in mp.get_all_start_methods():
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(min(workers, len(job[2])), mp_context=mp.get_context("fork"))

    def map(self, fn, *args):
        """``fn(k, *args)`` for every range k, results in order."""
        from functools import partial

        f = partial(fn, *args) if args else fn
        ks = range(len(_JOB[2]))
        return self.pool.map(f, ks) if self.pool is not None else map(f, ks)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global _JOB
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        _JOB = None


def _read(k: int):
    """Range ``k`` of the job: its Experiment, its number of REGION lines, and its statistics."""
    from .fit.series import _statistics
    from .io.extrap import text_range

    path, header, ranges = _JOB[:3]
    start, end, metric = ranges[k]
    exp, regions = text_range(path, header, start, end, metric, k == len(ranges) - 1)
    if len(exp.parameters) != 1:
        from .io.extrap import StreamUnsupported

        raise StreamUnsupported("not one parameter")
    return exp, regions, _statistics(exp, _JOB[4])


def _survey_range(k: int) -> dict:
    """Pass 1 of one range: its groups' noise-shape sums, metrics, repetition width, numbers."""
    from .fit.series import group_parts
    from .fit.shape import shape_sums

    exp, regions, stats = _read(k)
    st = stats[0]
    parts, cps, _ = group_parts(exp, _JOB[3], _JOB[4], statistics=stats, use_reps=dict.fromkeys(exp.metrics, True))
    sums = {}
    for key, rows, X, o, note, mean, count, ssd, reps in parts:
        if reps is not None:
            r, p2, p3, p4 = shape_sums(reps)
            sums[key] = (r.astype(np.uint16), p2, p3, p4)
    import pyarrow as pa

    from .io import implausible_parameters, time_extremes

    return {"sums": sums, "metrics": list(exp.metrics), "per_metric": _metric_sizes(st, stats[1], exp.parameters[0]),
            "warnings": list(exp.meta.get("warnings", [])) + implausible_parameters(exp) if k == 0 else [],
            "times": time_extremes(exp),
            "series": len(cps), "regions": regions,
            "names": pa.array(exp.tree.paths, type=pa.large_string())}


def _metric_sizes(st, row_of, parameter: str) -> dict:
    """Per metric of a range's statistics ``st``: (largest repetition count, number of values,
    of series, of points) -- what decides whether a metric's repetitions are kept
    (:func:`perfcast.fit.series._metric_reps`)."""
    import pandas as pd

    from .fit.series import factorize_names

    # numbered by first use, on the categoricals' codes (not a string per statistics row) and
    # without a copy of the table per metric
    codes, names = factorize_names(st["metric"])
    values = np.bincount(codes[row_of], minlength=len(names))
    count = np.asarray(st["count"])
    callpath = factorize_names(st["callpath"])[0]
    point = np.asarray(st[parameter])
    out = {}
    for m, name in enumerate(names):
        at = slice(None) if len(names) == 1 else codes == m
        out[str(name)] = (int(count[at].max()), int(values[m]), len(pd.unique(callpath[at])),
                          len(pd.unique(point[at])))
    return out


def _survey(pool: _Pool, prog) -> dict:
    """Pass 1: the groups' noise shapes, the metrics in order of first use, the largest repetition
    count, the numbers of series, points and values; None when not taken."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .fit.shape import shape_from_sums
    from .io.extrap import StreamUnsupported, _Grow

    ranges = _JOB[2]
    sums: dict = {}
    metrics: dict[str, int] = {}
    widths: dict[str, set] = {}
    sizes: dict[str, list] = {}
    S = regions = 0
    names = []
    warnings: list = []
    times: dict = {}
    for k, res in enumerate(pool.map(_survey_range)):
        warnings += res["warnings"]
        for name, (big, neg) in res["times"].items():
            big0, neg0 = times.get(name, (big, neg[:0]))
            times[name] = (max(big0, big), np.concatenate([neg0, neg]))
        for name, (width, nv, ns, npts) in res["per_metric"].items():
            w = widths.setdefault(name, set())
            w.add(width)
            if len(w) > 1 and max(w) > 7:
                # repetitions padded to another width sum in another order (beyond 7 values: pairwise)
                raise StreamUnsupported("uneven repetition counts")
            tot = sizes.setdefault(name, [0, 0, 0])
            tot[0] += nv
            tot[1] += ns
            tot[2] = max(tot[2], npts)
        S += res["series"]
        regions += res["regions"]
        names.append(res["names"])
        for name in res["metrics"]:
            metrics.setdefault(name, len(metrics))
        for key, arrays in res["sums"].items():
            cols = sums.setdefault(key, [_Grow(a.dtype) for a in arrays] + [arrays[1].shape[1]])
            for c, v in zip(cols, arrays):
                c.append(v.ravel(), 0)
        del res
        prog(ranges[k][1], ranges[-1][1], "1/2 survey")
    # each callpath named by one REGION line (else its series would be split over ranges)
    names = pa.chunked_array(names, type=pa.large_string())
    if len(pc.unique(names)) != regions:
        raise StreamUnsupported("a callpath named by several REGION lines")
    del names
    # each metric's repetitions kept as the in-memory fit keeps them (fit.series._metric_reps)
    R = {name: max(w) for name, w in widths.items()}
    use = {name: R[name] >= 2 and ns * npts * R[name] <= 2 * nv for name, (nv, ns, npts) in sizes.items()}
    shapes = {}
    for key in list(sums):
        r, p2, p3, p4, n = sums.pop(key)
        shapes[key] = shape_from_sums(r.take().reshape(-1, n), p2.take().reshape(-1, n), p3.take(),
                                      p4.take().reshape(-1, n))
    from .io import implausible_times

    return {"shapes": shapes, "metrics": list(metrics), "R": R, "series": S,
            "warnings": list(dict.fromkeys(warnings + implausible_times(times))),
            "use_reps": use}


def _fit_range(survey: dict, tmp: Path, k: int) -> dict:
    """Pass 2 of one range: fitted, segmented, its rows' model columns written to a temporary Arrow
    file, the ranking's per-series columns returned."""
    import pyarrow as pa

    from .analysis.ranking import _cost_points, cost_values
    from .fit import columns
    from .fit.grid import grid_models
    from .fit.segmented import segment_models
    from .fit.series import _fit_series, ordered_series
    from .modelset import model_set

    opts, locations, averaged = _JOB[3:6]
    exp, _, stats = _read(k)
    groups, cps, mts, gnum, grow = _fit_series(
        exp, opts, locations, None, statistics=stats, shapes=survey["shapes"].get, check=False,
        reps_width=survey["R"], use_reps=survey["use_reps"])
    items = ordered_series(exp, cps, mts, groups, [gnum], [grow], survey["metrics"])
    st = stats[0]
    del stats, groups
    items = segment_models(exp, items, opts, locations, statistics=st)
    items = grid_models(exp, items, opts, locations, statistics=st)
    ms = model_set(exp, items, locations, averaged, statistics=st)
    del items
    series = list(ms.series)
    sp = columns.split(series)
    points = _cost_points(series, None, ms.procs, ms.upper or None, ms.lower or None, ms.unfollowed)
    vals = columns.values(series, points, averaged, sp)
    mc, metrics, c_low, c_up, c_t, mod_up, ok, code, distinct = cost_values(
        series, points, vals, ms.procs, ms.aggregates, ms.measured, sp)
    # the whole-run timer of each flat metric is found over every range (views.whole_run_of): what
    # this range holds of it, its candidates by position
    from .analysis.views import timer_extremes
    from .modelset import flat_timers

    timers = {}
    for m, wide in flat_timers(exp, st, series):
        ext = timer_extremes(wide)
        where = {sm.callpath: s for s, sm in enumerate(series) if sm.metric == m and sm.callpath in ext[4]}
        timers[m] = (ext, where)
    cols = ms.model_columns(series, sp, np.arange(len(series), dtype=np.int64))
    table = pa.Table.from_arrays(list(cols.values()), names=list(cols))
    piece = tmp / f"piece-{k}.arrow"
    with pa.OSFile(str(piece), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    del st, exp
    return {"mc": mc, "metrics": metrics, "c_low": c_low, "c_up": c_up, "c_t": c_t, "mod_up": mod_up, "ok": ok,
            "code": code, "distinct": distinct, "points": points, "piece": piece, "n": len(series), "timers": timers,
            "types": {f.name: f.type for f in table.schema},
            **{name: getattr(ms, name) for name in ("aggregates", "kinds", "units")}}


def _fit(pool: _Pool, survey: dict, tmp: Path, prog):
    """Pass 2: each range fitted (:func:`_fit_range`); the ranking's per-series columns
    concatenated, codes renumbered over the whole file."""
    metric_order = survey["metrics"]
    metric_no = {m: i for i, m in enumerate(metric_order)}
    keys: dict = {}                        # growth key -> provisional number
    acc = {k: [] for k in ("mc", "c_low", "c_up", "c_t", "mod_up", "ok", "code")}
    pieces = []
    meta: dict = {"aggregates": {}, "kinds": {}, "units": {}, "points": None, "types": {}}
    total = survey["series"]
    done = 0
    timers: dict = {}                      # flat metric -> [(extremes, {callpath: position in the file})]
    for res in pool.map(_fit_range, survey, tmp):
        if meta["points"] is None:
            meta["points"] = res["points"]
        for m, (ext, where) in res["timers"].items():
            timers.setdefault(m, []).append((ext, {cp: done + s for cp, s in where.items()}))
        number = np.array([keys.setdefault(k, len(keys)) for k in res["distinct"]] or [0], dtype=np.int64)
        res["mc"] = np.array([metric_no[m] for m in res["metrics"]] or [0], dtype=np.int64)[res["mc"]]
        res["code"] = number[res["code"]]
        for k in acc:
            acc[k].append(res[k])
        for name in ("aggregates", "kinds", "units"):
            meta[name].update(res[name])
        for name, t in res["types"].items():
            known = meta["types"].get(name)
            if known is None or _vaguer(known, t):
                meta["types"][name] = t
        pieces.append((res["piece"], res["n"]))
        done += res["n"]
        prog(done, total, "2/2 fit")
    ranking = {k: np.concatenate(v) if v else np.zeros(0) for k, v in acc.items()}
    # the growth codes as the whole file's ascending keys number them (perfcast.fit.columns.growth_codes)
    ordered = sorted(keys)
    rank = np.zeros(max(1, len(keys)), dtype=np.int64)
    for r, k in enumerate(ordered):
        rank[keys[k]] = r
    ranking["code"] = rank[ranking["code"]] if len(ranking["code"]) else ranking["code"].astype(np.int64)
    ranking["distinct"] = ordered
    meta["metrics"] = metric_order
    # each flat metric's whole-run timer over every range: the root of its cost shares (as in memory)
    from .analysis.views import whole_run_of

    meta["whole_run"], meta["roots"] = {}, {}
    for m, parts in timers.items():
        name = whole_run_of([ext for ext, _ in parts])
        if name is not None:
            meta["whole_run"][m] = next(w[name] for _, w in parts if name in w)
            meta["roots"][m] = name
    return ranking, pieces, meta


def _vaguer(known, new) -> bool:
    """Whether column type ``known`` says less than ``new`` (null, or a list of nulls: no terms)."""
    import pyarrow as pa

    if pa.types.is_null(known):
        return not pa.types.is_null(new)
    return pa.types.is_list(known) and pa.types.is_null(known.value_type) and not (
        pa.types.is_list(new) and pa.types.is_null(new.value_type))


def _write(output, force: bool, ranking: dict, pieces: list, meta: dict, tmp: Path, prog) -> int:
    """Pass 3: the cost order of every series, then the rows in rank order to ``output``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .analysis.ranking import NEGLIGIBLE, cost_order
    from .output import atomic_file

    N = len(ranking["mc"])
    # the root of each metric: every series, or a flat metric's whole-run timer (_fit)
    top = np.ones(N, dtype=bool)
    for m, pos in meta.get("whole_run", {}).items():
        top[ranking["mc"] == meta["metrics"].index(m)] = False
        top[pos] = True
    order, rc = cost_order(ranking["mc"], meta["metrics"], ranking["c_low"], ranking["c_up"], ranking["c_t"],
                           ranking["mod_up"], ranking["ok"].astype(bool), ranking["code"], ranking["distinct"],
                           top, None, meta["points"], meta["aggregates"], NEGLIGIBLE,
                           meta["kinds"], meta["units"], array=True)
    inc = rc["increase"]
    del ranking, rc
    pos = np.empty(N, dtype=np.int64)
    pos[order] = np.arange(N, dtype=np.int64)
    inc_ranked = inc[order]
    del order, inc
    types = meta["types"]
    schema = pa.schema([pa.field(name, t) for name, t in types.items()])
    # the rows to buckets of one row group each, in rank order within a bucket once read back
    nb = max(1, math.ceil(N / ROW_GROUP))
    bucket_schema = schema.append(pa.field("_pos", pa.int64()))
    sinks = [pa.OSFile(str(tmp / f"bucket-{b}.arrow"), "wb") for b in range(nb)]
    writers = [pa.ipc.new_stream(s, bucket_schema) for s in sinks]
    off = 0
    for k, (piece, n) in enumerate(pieces):
        with pa.memory_map(str(piece)) as src:
            t = pa.ipc.open_file(src).read_all()
        t = pa.Table.from_arrays([_cast(t[f.name], f.type) for f in schema], schema=schema)
        p = pos[off:off + n]
        b = p // ROW_GROUP
        t = t.append_column("_pos", pa.array(p))
        for u in np.unique(b).tolist():
            writers[u].write_table(t.filter(pa.array(b == u)))
        off += n
        os.unlink(piece)
        prog(k + 1, len(pieces), "ranking")
    for w, s in zip(writers, sinks):
        w.close()
        s.close()
    del pos
    all_none = bool(np.isnan(inc_ranked).all()) if N else False
    out_schema = pa.schema([pa.field("rank", pa.int64()), *schema,
                            pa.field("increase", pa.null() if all_none else pa.float64())])
    with atomic_file(output, force) as f:
        with pq.ParquetWriter(f, out_schema) as pw:
            for b in range(nb):
                src_path = tmp / f"bucket-{b}.arrow"
                with pa.memory_map(str(src_path)) as src:
                    t = pa.ipc.open_stream(src).read_all()
                t = t.take(pa.array(np.argsort(t["_pos"].to_numpy(), kind="stable")))
                p = t["_pos"].to_numpy()
                v = inc_ranked[p]
                cols = [pa.array(p + 1), *[t[f.name] for f in schema],
                        pa.nulls(len(p)) if all_none else pa.array(v, mask=np.isnan(v))]
                pw.write_table(pa.Table.from_arrays(cols, schema=out_schema), row_group_size=ROW_GROUP)
                del t
                os.unlink(src_path)
                prog(b + 1, nb, "writing")
    return N


def _cast(col, to):
    import pyarrow as pa

    if col.type.equals(to):
        return col
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), to)
    return col.cast(to)

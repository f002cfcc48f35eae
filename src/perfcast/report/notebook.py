"""A :class:`perfcast.ModelSet` in a notebook: its ranking as an HTML table (``_repr_html_``, what
Jupyter shows for ``ms``) and one series' model drawn with matplotlib (``ModelSet.plot``; the
optional ``perfcast[plot]`` extra).

Both read the model set only (plus, for the measured points of a plot, the experiment it was fitted
on): the value, interval and confidence shown are :meth:`ModelSet.predict`'s, the formula is the
function that produced them, the ranking is :meth:`ModelSet.rank`'s -- what ``perfcast model`` and
``perfcast predict`` print for the same target.
"""

from __future__ import annotations

from dataclasses import replace
from html import escape
from typing import Mapping

import numpy as np

from ..errors import PerfcastError
from ..text import SEP

#: rows of the notebook table (``ModelSet.to_pandas()`` has every series)
HTML_ROWS = 20
#: points of the model curve in a sparkline / plot, geometric from the smallest measured value
CURVE_POINTS = 24


def axis(ms) -> str | None:
    """The parameter a one-dimensional view varies: the process count when known, else the first
    parameter (None without parameters)."""
    if ms.procs is not None:
        return ms.procs
    return ms.parameters[0] if ms.parameters else None


def curve_points(ms, target: Mapping[str, float], n: int = CURVE_POINTS) -> tuple[str, np.ndarray, dict]:
    """(the varied parameter x, its values from the smallest measured value to ``target``'s,
    geometric, the points as columns {param: array}: the other parameters at ``target``'s values)."""
    x = axis(ms)
    lo = float(ms.lower.get(x, ms.upper[x]))
    hi = float(target.get(x, ms.upper[x]))
    if lo > 0 and hi > lo:
        xs = np.geomspace(lo, hi, n)
    else:
        xs = np.linspace(lo, max(hi, lo), n)
    cols = {p: (xs if p == x else np.full(n, float(target.get(p, ms.upper[p])))) for p in ms.parameters}
    return x, xs, cols


def _short(path: str, width: int = 60) -> str:
    from .terminal import short_path

    return short_path(path, width)


def modelset_html(ms, limit: int = HTML_ROWS, level: float = 0.9) -> str:
    """The first ``limit`` rows of the cost ranking at the default target, as an HTML table: rank,
    callpath (leaf kept; the whole path on hover), metric, formula, a sparkline of the model from
    the smallest measured point to the target, the value there with its interval and confidence,
    and the ranking's increase."""
    from .svg import sparkline

    S = len(ms)
    if S == 0 or not ms.parameters:
        return f"<p>perfcast ModelSet: {S} series</p>"
    target = ms.default_target()
    at = ", ".join(f"{escape(k)}={v:g}" for k, v in target.items())
    # the ranking's arrays, models built for the rows shown only (as `perfcast model`'s table)
    from ..analysis.ranking import cost_heading, ranked_rows

    series, order, rc = ms.rank_order(target)
    ranked = ranked_rows(series, order[:limit], rc)
    shown = replace(ms, series=tuple(ms.series_of(r.callpath, r.metric) for r in ranked))
    preds = {(p["callpath"], p["metric"]): p for p in shown.predict(target, level)}
    x, xs, cols = curve_points(ms, target)
    rows = []
    for r in ranked:
        p = preds[(r.callpath, r.metric)]
        formula = p["formula"] if p["status"] == "ok" or p["segmented"] else "insufficient points"
        with np.errstate(all="ignore"):
            curve = np.asarray(r.model.predict(cols, averaged=ms.averaged), dtype=float)
        iv = ""
        if p["lower"] is not None:
            iv = f" [{'0 (clipped)' if p['clipped'] else format(p['lower'], '.4g')}, {p['upper']:.4g}]"
        inc = "" if r.increase is None else f"{r.increase:+.1%}" + ("" if r.significant else " (negligible)")
        agg = ms.aggregates.get(r.metric, "")
        unit = ms.units.get(r.metric, "")
        rows.append(
            f"<tr><td>{r.rank}</td><td title=\"{escape(r.callpath)}\"><code>{escape(_short(r.callpath))}</code></td>"
            f"<td>{escape(r.metric)}{f' ({escape(agg)})' if agg else ''}</td><td><code>{escape(formula)}</code></td>"
            f"<td>{sparkline(curve, tooltip=f'model, {x} = {xs[0]:g} .. {xs[-1]:g}')}</td>"
            f"<td style=\"text-align:right;white-space:nowrap\">{p['value']:.4g}{escape(f' {unit}' if unit else '')}{escape(iv)}</td>"
            f"<td>{escape(p['confidence'])}</td><td style=\"text-align:right\">{escape(inc)}</td></tr>")
    more = (f"; the first {len(ranked)} shown, <code>.to_pandas()</code> has every series"
            if S > len(ranked) else "")
    head = ("<tr><th>#</th><th>callpath</th><th>metric</th><th>model</th><th>model curve</th>"
            f"<th>at {at} ({level:.0%} interval)</th><th>confidence</th><th>change</th></tr>")
    return (f"<div><p>perfcast ModelSet: {S} series over {', '.join(map(escape, ms.parameters))}, ranked as "
            f"scalability bugs {escape(cost_heading(ms.procs, rc.get('first_at') or {}, rc.get('at') or target))}{more}.</p>"
            f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>")


def plot_series(ms, callpath: str, metric: str | None = None, exp=None, ax=None,
                target: Mapping[str, float] | None = None, level: float = 0.9, locations: str = "auto"):
    """Draw one series' model along the process count (else the first parameter) from the smallest
    measured value to ``target`` (default: the ranking's), its ``level`` prediction interval as a
    band and, with ``exp`` (the experiment the models were fitted on), the measured means on the
    line where the other parameters are at ``target``'s values.  Returns the matplotlib Axes."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise PerfcastError("ModelSet.plot needs matplotlib: pip install 'perfcast[plot]'",
                            where="plot") from None
    sm = ms.series_of(callpath, metric)
    target = dict(target) if target is not None else ms.default_target()
    x, xs, cols = curve_points(ms, target)
    one = replace(ms, series=(sm,))
    pts = [{p: float(cols[p][i]) for p in ms.parameters} for i in range(len(xs))]
    pred = one.predict(pts, level)
    value = np.array([p["value"] for p in pred], dtype=float)
    lower = np.array([np.nan if p["lower"] is None else p["lower"] for p in pred], dtype=float)
    upper = np.array([np.nan if p["upper"] is None else p["upper"] for p in pred], dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    unit = ms.units.get(sm.metric, "")
    ax.plot(xs, value, color="#0072B2", label=pred[0]["formula"])
    if np.isfinite(lower).any():
        ax.fill_between(xs, lower, upper, color="#0072B2", alpha=0.2, label=f"{level:.0%} interval")
    if exp is not None:
        mx, my = measured_line(exp, sm.callpath, sm.metric, x, target, locations)
        ax.plot(mx, my, "o", color="#D55E00", label="measured (mean)")
    if len(xs) > 1 and xs[0] > 0 and xs[-1] / xs[0] >= 8:
        ax.set_xscale("log", base=2)
    fixed = ", ".join(f"{p} = {float(cols[p][0]):g}" for p in ms.parameters if p != x)
    ax.set_xlabel(f"{x} ({fixed})" if fixed else x)
    ax.set_ylabel(f"{sm.metric} [{unit}]" if unit else sm.metric)
    ax.set_title(sm.callpath.rsplit(SEP, 1)[-1])
    ax.legend(fontsize="small")
    return ax


def measured_line(exp, callpath: str, metric: str, x: str, target: Mapping[str, float],
                  locations: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """The measured means of one series along ``x`` (the fit's statistics: repetitions averaged,
    locations reduced as ``locations``), the other parameters at ``target``'s values."""
    from ..fit.series import series_statistics

    st = series_statistics(exp.select(metric=[metric]), locations)
    st = st[(st["callpath"] == callpath).to_numpy()]
    for p in exp.parameters:
        if p != x:
            # compared in float64: a target float32 cannot hold must not match a float32 coordinate
            st = st[st[p].to_numpy() == np.float64(target.get(p, st[p].max()))]
    st = st.sort_values(x)
    return st[x].to_numpy(dtype=float), st["mean"].to_numpy(dtype=float)

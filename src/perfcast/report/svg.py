"""Static SVG plot primitives for the HTML report (no plotting library, no JavaScript).

A :class:`Figure` has an x and a y :class:`Scale` (linear or log) and collects layers: measured
points with spread bars, model curves (solid where measured, dashed where extrapolated), prediction
bands, target markers, stacked areas and stacked bars, a legend.  :meth:`Figure.svg` returns one
``<svg>`` element as a string.

Every piece of text that reaches the SVG (labels, titles, tooltips) goes through :func:`esc`:
names come from profiles of untrusted binaries.  Numbers are written with few digits to keep big
reports small; non-finite values are skipped, never drawn.
"""

from __future__ import annotations

import html
import itertools
import math
from typing import Iterable, Sequence

import numpy as np

#: Colour cycle (Okabe-Ito, colour-blind safe) used for series and stacks.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#8C564B", "#7F7F7F")
OTHER_COLOUR = "#BBBBBB"


def esc(text) -> str:
    """Text safe inside SVG/HTML element content and double-quoted attributes."""
    return html.escape(str(text), quote=True)


def fmt(v: float) -> str:
    """Compact coordinate (pixels): at most 1 decimal."""
    r = round(float(v), 1)
    return str(int(r)) if r.is_integer() else f"{r:.1f}"


def label(v: float) -> str:
    """Human tick label: 0.001 -> 1e-3, 12000 -> 12k, 0.25 -> 0.25."""
    v = float(v)
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    a = abs(v)
    if a >= 1e4 and a < 1e15:
        for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if a >= div:
                s = f"{v / div:.3g}"
                return s + suf
    if a < 1e-3:
        m, e = f"{v:.2e}".split("e")
        m = m.rstrip("0").rstrip(".")
        return f"{m}e{int(e)}"
    return f"{v:.4g}"


class Scale:
    """Maps data values to pixels; ``kind`` is ``linear`` or ``log`` (base 10)."""

    def __init__(self, kind: str, lo: float, hi: float, a: float, b: float):
        if kind not in ("linear", "log"):
            raise ValueError(kind)
        lo, hi = float(lo), float(hi)
        if kind == "log":
            lo, hi = max(lo, 1e-300), max(hi, 1e-300)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            lo, hi = (1.0, 10.0) if kind == "log" else (0.0, 1.0)
        if hi <= lo:
            if kind == "log":
                lo, hi = lo / 2, lo * 2
            else:
                pad = abs(lo) * 0.5 or 1.0
                lo, hi = lo - pad, lo + pad
        self.kind, self.lo, self.hi, self.a, self.b = kind, lo, hi, float(a), float(b)

    def _t(self, v):
        v = np.asarray(v, dtype=float)
        if self.kind == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.log10(v)
        return v

    def __call__(self, v):
        t0, t1 = self._t(self.lo), self._t(self.hi)
        return self.a + (self._t(v) - t0) / (t1 - t0) * (self.b - self.a)

    def valid(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        ok = np.isfinite(v)
        if self.kind == "log":
            ok &= v > 0
        return ok

    def ticks(self, max_ticks: int = 7) -> list[float]:
        if self.kind == "log":
            e0, e1 = math.floor(math.log10(self.lo) + 1e-9), math.ceil(math.log10(self.hi) - 1e-9)
            step = max(1, math.ceil((e1 - e0 + 1) / max_ticks))
            out = [10.0 ** e for e in range(e0, e1 + 1, step) if self.lo * (1 - 1e-9) <= 10.0 ** e <= self.hi * (1 + 1e-9)]
            if len(out) < 3:  # less than ~2 decades: add 2x and 5x
                out = sorted({t for e in range(e0 - 1, e1 + 1) for t in (10.0 ** e, 2 * 10.0 ** e, 5 * 10.0 ** e)
                              if self.lo * (1 - 1e-9) <= t <= self.hi * (1 + 1e-9)})
                if len(out) > max_ticks:
                    out = out[:: math.ceil(len(out) / max_ticks)]
            if len(out) < 2:  # a narrow range: fall back to linear ticks in the range
                out = [t for t in nice_ticks(self.lo, self.hi, 4) if t > 0]
            return out
        return nice_ticks(self.lo, self.hi, max_ticks)


def nice_ticks(lo: float, hi: float, max_ticks: int = 6) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi]."""
    span = hi - lo
    if not (span > 0 and math.isfinite(span)):
        return [lo]
    raw = span / max(1, max_ticks - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    t = start
    while t <= hi + step * 1e-9 and len(out) < 50:
        out.append(0.0 if abs(t) < step * 1e-9 else round(t, 12))
        t += step
    return out


def choose_scale(values: Iterable[float], min_ratio: float = 8.0) -> str:
    """``log`` when all values are positive and span at least ``min_ratio`` (e.g. process counts
    1..64), else ``linear``."""
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0 or (v <= 0).any():
        return "linear"
    return "log" if v.max() / v.min() >= min_ratio else "linear"


def padded_range(values: Iterable[float], kind: str, pad: float = 0.06, zero: bool = False) -> tuple[float, float]:
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    if kind == "log":
        v = v[v > 0]
    if len(v) == 0:
        return (1.0, 10.0) if kind == "log" else (0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    if kind == "log":
        f = (hi / lo) ** pad if hi > lo else 1.5
        return lo / f, hi * f
    if zero:
        lo = min(lo, 0.0)
        hi = max(hi, 0.0)
    d = (hi - lo) * pad or (abs(hi) * 0.1 or 1.0)
    return (lo if zero and lo == 0 else lo - d), hi + d


class Figure:
    """One plot: axes, layers, legend.  Build with the layer methods, finish with :meth:`svg`."""

    def __init__(self, width: int = 520, height: int = 300, *, title: str = "", xlabel: str = "",
                 ylabel: str = "", margin: tuple[int, int, int, int] = (28, 16, 44, 64)):
        self.w, self.h = width, height
        self.mt, self.mr, self.mb, self.ml = margin
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.x: Scale | None = None
        self.y: Scale | None = None
        self.layers: list[str] = []
        self.legend_items: list[tuple[str, str, str]] = []  # (kind, colour, text)
        self.x_categories: list[str] | None = None
        self.annotations: list[str] = []  # drawn above the layers, not clipped
        #: legend position: "inside" (top left of the plot area) or "below" (under the axes)
        self.legend_at = "below"

    # -- scales ---------------------------------------------------------------------------------
    def set_scales(self, xkind: str, xrange: tuple[float, float], ykind: str, yrange: tuple[float, float]):
        self.x = Scale(xkind, *xrange, self.ml, self.w - self.mr)
        self.y = Scale(ykind, *yrange, self.h - self.mb, self.mt)
        return self

    def _xy(self, xs, ys):
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        ok = self.x.valid(xs) & self.y.valid(ys)
        return self.x(xs[ok]), self.y(ys[ok]), ok

    def _clip_y(self, py):
        return np.clip(py, self.mt - 4, self.h - self.mb + 4)

    # -- layers ---------------------------------------------------------------------------------
    def band(self, xs, lo, hi, colour: str, opacity: float = 0.18, legend: str | None = None):
        """Filled region between ``lo`` and ``hi`` (e.g. a prediction interval)."""
        xs, lo, hi = (np.asarray(a, dtype=float) for a in (xs, lo, hi))
        ok = self.x.valid(xs) & self.y.valid(lo) & self.y.valid(hi)
        if ok.sum() < 2:
            return self
        px = self.x(xs[ok])
        plo, phi = self._clip_y(self.y(lo[ok])), self._clip_y(self.y(hi[ok]))
        pts = [f"{fmt(a)},{fmt(b)}" for a, b in zip(px, phi)] + [f"{fmt(a)},{fmt(b)}" for a, b in zip(px[::-1], plo[::-1])]
        self.layers.append(f'<polygon class="band" points="{" ".join(pts)}" fill="{esc(colour)}" '
                           f'fill-opacity="{opacity}" stroke="none"/>')
        if legend:
            self.legend_items.append(("band", colour, legend))
        return self

    def line(self, xs, ys, colour: str, *, dashed: bool = False, width: float = 2.0, legend: str | None = None,
             tooltip: str | None = None):
        px, py, _ = self._xy(xs, ys)
        if len(px) < 2:
            return self
        py = self._clip_y(py)
        d = "M" + " L".join(f"{fmt(a)},{fmt(b)}" for a, b in zip(px, py))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        tip = f"<title>{esc(tooltip)}</title>" if tooltip else ""
        self.layers.append(f'<path class="{"extrapolation" if dashed else "curve"}" d="{d}" fill="none" '
                           f'stroke="{esc(colour)}" stroke-width="{width}"{dash}>{tip}</path>')
        if legend:
            self.legend_items.append(("dash" if dashed else "line", colour, legend))
        return self

    def points(self, xs, ys, colour: str, *, lo=None, hi=None, legend: str | None = None,
               tooltips: Sequence[str] | None = None, radius: float = 3.5):
        """Markers at (xs, ys) with optional vertical spread bars from ``lo`` to ``hi``."""
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        parts = []
        for i in range(len(xs)):
            if not (self.x.valid(xs[i]) and self.y.valid(ys[i])):
                continue
            cx, cy = float(self.x(xs[i])), float(self.y(ys[i]))
            if lo is not None and hi is not None:
                l, h = float(lo[i]), float(hi[i])
                if self.y.valid(l) and self.y.valid(h) and h > l:
                    y0, y1 = float(self._clip_y(self.y(l))), float(self._clip_y(self.y(h)))
                    parts.append(f'<path class="spread" d="M{fmt(cx)},{fmt(y0)} V{fmt(y1)} M{fmt(cx - 4)},{fmt(y0)} '
                                 f'h8 M{fmt(cx - 4)},{fmt(y1)} h8" stroke="{esc(colour)}" stroke-width="1.2" fill="none"/>')
            tip = f"<title>{esc(tooltips[i])}</title>" if tooltips is not None else ""
            parts.append(f'<circle class="point" cx="{fmt(cx)}" cy="{fmt(cy)}" r="{radius}" fill="#fff" '
                         f'stroke="{esc(colour)}" stroke-width="2">{tip}</circle>')
        self.layers.append("".join(parts))
        if legend:
            self.legend_items.append(("point", colour, legend))
        return self

    def marker(self, x: float, y: float, colour: str, *, lo: float | None = None, hi: float | None = None,
               legend: str | None = None, tooltip: str | None = None):
        """A diamond at (x, y) (e.g. the prediction at the target) with an optional interval bar."""
        if not (self.x.valid(x) and self.y.valid(y)):
            return self
        cx, cy = float(self.x(x)), float(self.y(y))
        parts = []
        if lo is not None and hi is not None and self.y.valid(lo) and self.y.valid(hi) and hi > lo:
            y0, y1 = float(self._clip_y(self.y(lo))), float(self._clip_y(self.y(hi)))
            parts.append(f'<path d="M{fmt(cx)},{fmt(y0)} V{fmt(y1)} M{fmt(cx - 5)},{fmt(y0)} h10 M{fmt(cx - 5)},{fmt(y1)} h10" '
                         f'stroke="{esc(colour)}" stroke-width="1.5" fill="none"/>')
        tip = f"<title>{esc(tooltip)}</title>" if tooltip else ""
        parts.append(f'<path class="target" d="M{fmt(cx)},{fmt(cy - 6)} l6,6 l-6,6 l-6,-6 z" fill="{esc(colour)}">{tip}</path>')
        self.layers.append("".join(parts))
        if legend:
            self.legend_items.append(("diamond", colour, legend))
        return self

    def vline(self, x: float, colour: str = "#888", text: str | None = None):
        if not self.x.valid(x):
            return self
        px = fmt(self.x(x))
        self.layers.append(f'<line x1="{px}" x2="{px}" y1="{self.mt}" y2="{self.h - self.mb}" stroke="{esc(colour)}" '
                           f'stroke-dasharray="2 3" stroke-width="1"/>')
        if text:
            self.annotations.append(f'<text x="{px}" y="{self.mt - 4}" text-anchor="middle" class="small">{esc(text)}</text>')
        return self

    def stacked_areas(self, xs, series: Sequence[tuple[str, Sequence[float]]], colours: Sequence[str] | None = None):
        """Stacked areas over ``xs`` (ascending); ``series`` = [(name, values)] bottom to top."""
        xs = np.asarray(xs, dtype=float)
        base = np.zeros(len(xs))
        colours = colours or _cycle(len(series))
        for (name, vals), c in zip(series, colours):
            top = base + np.nan_to_num(np.asarray(vals, dtype=float))
            self.band(xs, base if self.y.kind == "linear" else np.maximum(base, self.y.lo), top, c, 0.85)
            self.legend_items.append(("box", c, name))
            base = top
        return self

    def stacked_bars(self, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
                     colours: Sequence[str] | None = None, tooltips: bool = True):
        """Stacked bars, one per category (x axis positions 0..n-1 on a linear scale)."""
        self.x_categories = [str(c) for c in categories]
        n = len(categories)
        colours = colours or _cycle(len(series))
        slot = (self.w - self.ml - self.mr) / max(n, 1)
        bw = min(48.0, slot * 0.7)
        base = np.zeros(n)
        parts = []
        for (name, vals), c in zip(series, colours):
            vals = np.nan_to_num(np.asarray(vals, dtype=float))
            for i in range(n):
                if vals[i] <= 0:
                    continue
                y0, y1 = float(self.y(base[i])), float(self.y(base[i] + vals[i]))
                cx = float(self.x(i))
                tip = f"<title>{esc(name)}: {esc(label(vals[i]))} at {esc(categories[i])}</title>" if tooltips else ""
                parts.append(f'<rect class="bar" x="{fmt(cx - bw / 2)}" y="{fmt(y1)}" width="{fmt(bw)}" '
                             f'height="{fmt(max(y0 - y1, 0.5))}" fill="{esc(c)}">{tip}</rect>')
            base = base + vals
            self.legend_items.append(("box", c, name))
        self.layers.append("".join(parts))
        return self

    # -- output ---------------------------------------------------------------------------------
    def _axes(self) -> str:
        x0, x1, y0, y1 = self.ml, self.w - self.mr, self.h - self.mb, self.mt
        out = [f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="#fff" stroke="#ccc"/>']
        for t in self.y.ticks(6):
            py = fmt(self.y(t))
            out.append(f'<line x1="{x0}" x2="{x1}" y1="{py}" y2="{py}" stroke="#eee"/>'
                       f'<text x="{x0 - 5}" y="{py}" dy="0.32em" text-anchor="end" class="tick">{esc(label(t))}</text>')
        if self.x_categories is not None:
            step = max(1, math.ceil(len(self.x_categories) / 12))
            for i, c in enumerate(self.x_categories):
                if i % step == 0:
                    out.append(f'<text x="{fmt(self.x(i))}" y="{y0 + 15}" text-anchor="middle" class="tick">{esc(c)}</text>')
        else:
            for t in self.x.ticks(8):
                px = fmt(self.x(t))
                out.append(f'<line x1="{px}" x2="{px}" y1="{y1}" y2="{y0}" stroke="#eee"/>'
                           f'<text x="{px}" y="{y0 + 15}" text-anchor="middle" class="tick">{esc(label(t))}</text>')
        xl = self.xlabel + (" (log)" if self.x.kind == "log" and self.x_categories is None else "")
        yl = self.ylabel + (" (log)" if self.y.kind == "log" else "")
        if xl:
            out.append(f'<text x="{fmt((x0 + x1) / 2)}" y="{self.h - 8}" text-anchor="middle" class="axis">{esc(xl)}</text>')
        if yl:
            # the rotated label is centred on the plot area and clipped by the figure's top edge: a long
            # one (a metric's description) is shortened to fit, keeping its unit
            cy = (y0 + y1) / 2
            yl = _fit(yl, 2 * min(cy, self.h - cy) - 8, AXIS_CHAR_PX)
            cy = fmt(cy)
            out.append(f'<text x="12" y="{cy}" transform="rotate(-90 12 {cy})" text-anchor="middle" class="axis">{esc(yl)}</text>')
        return "".join(out)

    def _legend_rows(self) -> list[list[tuple[str, str, str, float]]]:
        """Legend entries flowed into rows across the figure width: (kind, colour, text, width)."""
        rows, row, used = [], [], 0.0
        avail = self.w - self.ml - self.mr
        for kind, c, text in self.legend_items:
            t = _short(text, 60)
            wd = 26 + 5.6 * len(t)
            if row and used + wd > avail:
                rows.append(row)
                row, used = [], 0.0
            row.append((kind, c, t, wd))
            used += wd
        if row:
            rows.append(row)
        return rows

    def _legend(self) -> str:
        if not self.legend_items:
            return ""
        if self.legend_at == "below":
            out = []
            y = self.h + 6
            for row in self._legend_rows():
                x = float(self.ml)
                for kind, c, t, wd in row:
                    out.append(self._legend_item(kind, c, t, x, y))
                    x += wd
                y += 15
            return f'<g class="legend-box">{"".join(out)}</g>'
        out, x, y = [], self.ml + 6, self.mt + 12
        for kind, c, text in self.legend_items:
            out.append(self._legend_item(kind, c, _short(text, 48), x, y))
            y += 14
        return f'<g class="legend-box">{"".join(out)}</g>'

    @staticmethod
    def _legend_item(kind: str, c: str, text: str, x: float, y: float) -> str:
        c = esc(c)
        x, y = round(float(x), 1), round(float(y), 1)
        if kind == "point":
            sym = f'<circle cx="{x + 7}" cy="{y - 4}" r="3.5" fill="#fff" stroke="{c}" stroke-width="2"/>'
        elif kind in ("line", "dash"):
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            sym = f'<line x1="{x}" x2="{x + 14}" y1="{y - 4}" y2="{y - 4}" stroke="{c}" stroke-width="2"{dash}/>'
        elif kind == "diamond":
            sym = f'<path d="M{x + 7},{y - 10} l5,5 l-5,5 l-5,-5 z" fill="{c}"/>'
        elif kind == "band":
            sym = f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{c}" fill-opacity="0.25"/>'
        else:
            sym = f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{c}"/>'
        return f'{sym}<text x="{x + 19}" y="{y}" class="legend">{esc(text)}</text>'

    def svg(self, css_class: str = "plot", aria: str | None = None) -> str:
        if self.x is None or self.y is None:
            raise ValueError("set_scales() first")
        title = f'<text x="{self.ml}" y="16" class="title">{esc(_short(self.title, 90))}</text>' if self.title else ""
        clip_id = f"c{next(_ids)}"
        body = "".join(self.layers)
        h = self.h + (15 * len(self._legend_rows()) + 4 if self.legend_items and self.legend_at == "below" else 0)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(css_class)}" viewBox="0 0 {self.w} {h}" '
                f'width="{self.w}" height="{h}" role="img" aria-label="{esc(aria or self.title)}">'
                f'<defs><clipPath id="{clip_id}"><rect x="{self.ml}" y="{self.mt - 4}" width="{self.w - self.ml - self.mr}" '
                f'height="{self.h - self.mt - self.mb + 8}"/></clipPath></defs>'
                f'{title}{self._axes()}<g clip-path="url(#{clip_id})">{body}</g>{"".join(self.annotations)}'
                f'{self._legend()}</svg>')


_ids = itertools.count(1)


def _cycle(n: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


#: an upper bound of the mean advance of a character of the axis labels (11 px sans-serif: DejaVu Sans
#: averages ~5.5 px over lower-case text), for fitting a label into its room
AXIS_CHAR_PX = 6.2


def _fit(text: str, room: float, char_px: float) -> str:
    """``text`` shortened with an ellipsis to about ``room`` pixels at ``char_px`` per character; a
    trailing unit in brackets (`` [s]``) is kept whole."""
    n = max(int(room // char_px), 8)
    if len(text) <= n:
        return text
    head, sep, unit = text.rpartition(" [")
    if sep and unit.endswith("]") and len(unit) + 2 < n - 4:
        return _short(head, n - len(unit) - 2) + sep + unit
    return _short(text, n)


def sparkline(values: Sequence[float], width: int = 84, height: int = 18, colour: str = "#0072B2",
              tooltip: str | None = None) -> str:
    """A tiny inline line chart of ``values`` (in order), min-max scaled; empty string if fewer than
    two finite values."""
    v = np.asarray(values, dtype=float)
    idx = np.nonzero(np.isfinite(v))[0]
    if len(idx) < 2:
        return ""
    vv = v[idx]
    lo, hi = float(vv.min()), float(vv.max())
    span = hi - lo or 1.0
    n = len(v)
    px = 2 + idx / max(n - 1, 1) * (width - 4)
    py = height - 2 - (vv - lo) / span * (height - 4)
    d = "M" + " L".join(f"{fmt(a)},{fmt(b)}" for a, b in zip(px, py))
    tip = f"<title>{esc(tooltip)}</title>" if tooltip else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="trend">{tip}<path d="{d}" fill="none" stroke="{esc(colour)}" '
            f'stroke-width="1.5"/><circle cx="{fmt(px[-1])}" cy="{fmt(py[-1])}" r="2" fill="{esc(colour)}"/></svg>')


def hbar(fraction: float, width: int = 90, height: int = 10, colour: str = "#D55E00", negative: str = "#009E73") -> str:
    """A horizontal bar for a signed fraction in [-1, 1] (centred at 0)."""
    f = float(fraction) if math.isfinite(float(fraction)) else 0.0
    f = max(-1.0, min(1.0, f))
    mid = width / 2
    w = abs(f) * mid
    x = mid if f >= 0 else mid - w
    c = colour if f >= 0 else negative
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="hbar" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" aria-hidden="true"><line x1="{fmt(mid)}" x2="{fmt(mid)}" y1="0" y2="{height}" stroke="#999"/>'
            f'<rect x="{fmt(x)}" y="1" width="{fmt(max(w, 0.5 if f else 0))}" height="{height - 2}" fill="{c}"/></svg>')

"""Text sparklines for terminal tables: ``▁▂▄█`` from a series of values.

Values are min-max scaled onto eight block characters (``log=True`` scales their logarithms,
natural for costs growing over process counts).  Non-finite values (and non-positive ones on a log
scale) print as a space; a constant series prints as a flat middle line.  ``ascii=True`` uses
``_.-=*#`` for terminals without Unicode.
"""

from __future__ import annotations

import math
from typing import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII = "_.-~=*#@"


def sparkline(values: Sequence[float], log: bool = False, ascii: bool = False) -> str:
    chars = ASCII if ascii else BLOCKS
    vals = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if log:
            x = math.log10(x) if x > 0 and math.isfinite(x) else math.nan
        vals.append(x if math.isfinite(x) else None)
    ok = [x for x in vals if x is not None]
    if not ok:
        return " " * len(vals)
    lo, hi = min(ok), max(ok)
    span = hi - lo
    top = len(chars) - 1
    out = []
    for x in vals:
        if x is None:
            out.append(" ")
        elif span <= abs(hi) * 1e-12 or span == 0:
            out.append(chars[top // 2])
        else:
            out.append(chars[min(top, max(0, int(round((x - lo) / span * top))))])
    return "".join(out)


def trend(values: Sequence[float], log: bool = True, ascii: bool = False) -> str:
    """Sparkline plus the overall change, e.g. ``▁▃▅█ ×4.2`` (last / first finite value)."""
    line = sparkline(values, log=log, ascii=ascii)
    ok = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if len(ok) >= 2 and ok[0] > 0 and ok[-1] > 0:
        r = ok[-1] / ok[0]
        return f"{line} {'x' if ascii else '×'}{r:.2g}"
    return line


def bar(fraction: float, width: int = 10, ascii: bool = False) -> str:
    """A horizontal bar for ``fraction`` in [0, 1] (clipped), in eighths of a character:
    ``█████▍    `` (or ``#####     `` with ``ascii=True``); empty for non-finite values."""
    try:
        f = float(fraction)
    except (TypeError, ValueError):
        return " " * width
    if not math.isfinite(f):
        return " " * width
    f = min(1.0, max(0.0, f))
    if ascii:
        n = int(round(f * width))
        return "#" * n + " " * (width - n)
    eighths = int(round(f * width * 8))
    full, rest = divmod(eighths, 8)
    s = "█" * full + (" ▏▎▍▌▋▊▉"[rest] if rest else "")
    return s + " " * (width - len(s))

"""Parameter values carried by file and directory names.

The Score-P/Extra-P convention names one run's directory ``<prefix>.<param><value>...[.r<rep>]``:
``mm.x10y1z1.r1`` is x=10, y=1, z=1, repetition 1; ``fastest.p16.size131072.r1`` is p=16,
size=131072.  Each dot-separated component after the prefix is a run of ``letters number`` pairs.
"""

from __future__ import annotations

import re
from pathlib import Path

_PAIR = re.compile(r"([A-Za-z_]+)(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_REP = re.compile(r"^r(\d+)$")


def parse_name(name: str) -> tuple[dict[str, float], int | None] | None:
    """Parameters and repetition from one name, or None when it does not follow the convention."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    coords: dict[str, float] = {}
    rep = None
    for i, comp in enumerate(parts[1:], start=1):
        m = _REP.match(comp)
        if m and i == len(parts) - 1:
            rep = int(m.group(1))
            continue
        pairs = _PAIR.findall(comp)
        if not pairs or "".join(a + b for a, b in pairs) != comp:
            if i == len(parts) - 1 and coords:  # a file extension such as .cubex
                continue
            return None
        for k, v in pairs:
            if k in coords:
                return None
            coords[k] = float(v)
    if not coords:
        return None
    return coords, rep


def params_from_path(path: Path) -> tuple[dict[str, float], int | None] | None:
    """Try the path's own name, then its parent directories (``mm.x10y1z1.r1/profile.cubex``)."""
    for part in [path.name, *[p.name for p in path.parents]][:4]:
        found = parse_name(part)
        if found:
            return found
    return None

"""Reader for timemory call-tree JSON (``<component>.tree.json``, e.g. ``wall.tree.json``).

The file (cereal JSON)::

    {"timemory": {"WALL_CLOCK": {"properties": {"id": "wall_clock", ...}, "unit_repr": "sec",
                                 "mpi_size": 2, "mpi": [            # one list per rank ("upcxx"/"ranks" too)
        [ {"node": {"prefix": "unknown-hash=0", "tid": [0], "pid": [..], "depth": 0,
                    "inclusive": {"entry": {"laps": 0, ...}, "stats": {"sum", "count", "min", "max", ...}},
                    "exclusive": {...}},
           "children": [ {"node": {...}, "children": [...]}, ... ]} ] ]}}}

Every component (``WALL_CLOCK``, ``CPU_CLOCK``, ``PEAK_RSS``, ...) gives two metrics named by its id:
``<id> (I)`` (the inclusive ``stats.sum``) and ``<id> (E)`` (the exclusive one), in the
component's ``unit_repr`` (``sec`` -> ``s``, ``msec`` -> ``ms``, ...), plus ``count`` (the
inclusive ``stats.count``: measurements taken) from the first component.  Values are per rank
(column ``rank``: the position in the ``mpi`` list); a node's ``tid`` list names the threads its
values were gathered over, so there is no thread column.

Call tree: the nested ``children``.  The placeholder root timemory writes (``unknown-hash=0`` with no
laps) is dropped; its children become the roots.  A node's name is its ``prefix`` without the
``@file:line`` part (``generate_history@hatchet_tests.cpp:114/outer-loop-0`` ->
``generate_history/outer-loop-0``, as Hatchet names it) and without the ``>>> `` / ``|_`` tree
decoration.  A callpath twice in one rank, a rank count that differs from ``mpi_size``, or a value of
the wrong type is a :class:`PerfcastError` naming the place in the JSON.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric, guess_kind
from . import Reader, register, read_ends, read_json

_UNITS = {"sec": "s", "msec": "ms", "usec": "us", "nsec": "ns", "psec": "ps"}
_PREFIX = re.compile(r"^(.*?)@([^@:/]+):(\d+)(/.*)?$")
_RANK_KEYS = ("mpi", "upcxx", "ranks")


def node_name(prefix: str) -> str:
    p = re.sub(r"^(>>>\s*)?(\|_)*", "", prefix).strip()
    m = _PREFIX.match(p)
    return (m.group(1) + (m.group(4) or "")) if m else p


def _obj(x, what: str, path: Path, where: str) -> dict:
    if not isinstance(x, dict):
        raise PerfcastError(f"{what} is {type(x).__name__}, not an object", path, where)
    return x


def _number(x, what: str, path: Path, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        raise PerfcastError(f"{what} is {x!r:.40}, not a finite number", path, where)
    return float(x)


def read_timemory(path: Path) -> Experiment:
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("timemory"), dict) or not doc["timemory"]:
        raise PerfcastError("not a timemory tree (no 'timemory' object with components)", path)
    tree = CallTree()
    rows = []
    metrics: dict[str, Metric] = {}
    first = True
    n_ranks = None
    for comp_key, comp in doc["timemory"].items():
        where0 = f"timemory.{comp_key}"
        comp = _obj(comp, "the component", path, where0)
        props = comp.get("properties", {})
        mid = props.get("id") if isinstance(props, dict) and isinstance(props.get("id"), str) else str(comp_key).lower()
        unit = comp.get("unit_repr", "")
        if not isinstance(unit, str):
            raise PerfcastError(f"'unit_repr' is {type(unit).__name__}, not a string", path, where0)
        unit = _UNITS.get(unit.strip().lower(), unit.strip())
        kind = guess_kind(mid, unit)
        key = next((k for k in _RANK_KEYS if k in comp), None)
        if key is None:
            raise PerfcastError(f"the component has no per-rank list ({', '.join(_RANK_KEYS)})", path, where0)
        ranks = comp[key]
        if not isinstance(ranks, list) or not ranks:
            raise PerfcastError(f"'{key}' is not a non-empty list", path, f"{where0}.{key}")
        size = comp.get(f"{key}_size")
        if size is not None and size != len(ranks):
            raise PerfcastError(f"'{key}_size' is {size!r:.20} but {len(ranks)} rank(s) are listed (truncated?)", path,
                                f"{where0}.{key}")
        if n_ranks is not None and n_ranks != len(ranks):
            raise PerfcastError(f"{len(ranks)} rank(s) here, {n_ranks} in the first component", path, where0)
        n_ranks = len(ranks)
        inc_name, exc_name = f"{mid} (I)", f"{mid} (E)"
        desc = comp.get("description") if isinstance(comp.get("description"), str) else mid
        if inc_name in metrics:
            raise PerfcastError(f"component {mid!r} twice", path, where0)
        metrics[inc_name] = Metric(inc_name, unit, kind, "inclusive", f"timemory {desc} (inclusive sum)")
        metrics[exc_name] = Metric(exc_name, unit, kind, "exclusive", f"timemory {desc} (exclusive sum)")
        for rank, roots in enumerate(ranks):
            rwhere = f"{where0}.{key}[{rank}]"
            if not isinstance(roots, list):
                raise PerfcastError(f"is {type(roots).__name__}, not a list of trees", path, rwhere)
            seen: set[str] = set()
            stack = [(r, None, f"{rwhere}[{i}]") for i, r in reversed(list(enumerate(roots)))]
            while stack:
                item, parent, where = stack.pop()
                item = _obj(item, "a tree entry", path, where)
                node = _obj(item.get("node"), "'node'", path, where)
                children = item.get("children", [])
                if not isinstance(children, list):
                    raise PerfcastError(f"'children' is {type(children).__name__}, not a list", path, where)
                prefix = node.get("prefix")
                if not isinstance(prefix, str) or not prefix.strip():
                    raise PerfcastError("a node without its 'prefix' (name)", path, where)
                inc = _obj(node.get("inclusive"), "'inclusive'", path, where)
                exc = _obj(node.get("exclusive"), "'exclusive'", path, where)
                inc_stats = _obj(inc.get("stats"), "'inclusive.stats'", path, where)
                exc_stats = _obj(exc.get("stats"), "'exclusive.stats'", path, where)
                laps = _number(_obj(inc.get("entry"), "'inclusive.entry'", path, where).get("laps"), "'laps'", path,
                               where)
                if parent is None and prefix.startswith("unknown-hash=") and laps == 0:
                    cp = None  # timemory's placeholder root
                else:
                    name = node_name(prefix)
                    cp = name if parent is None else parent + SEP + name
                    if cp in seen:
                        raise PerfcastError(f"callpath {cp[-80:]!r} twice in rank {rank}", path, where)
                    seen.add(cp)
                    tree.add(cp, parent, name)
                    s_inc = _number(inc_stats.get("sum"), "'inclusive.stats.sum'", path, where)
                    s_exc = _number(exc_stats.get("sum"), "'exclusive.stats.sum'", path, where)
                    rows.append((cp, inc_name, s_inc, rank))
                    rows.append((cp, exc_name, s_exc, rank))
                    if first:
                        count = _number(inc_stats.get("count"), "'inclusive.stats.count'", path, where)
                        if count < 0 or count != int(count):
                            raise PerfcastError(f"'inclusive.stats.count' {count:g} is not a count", path, where)
                        rows.append((cp, "count", count, rank))
                for i in range(len(children) - 1, -1, -1):
                    stack.append((children[i], cp, f"{where}.children[{i}]"[-160:]))
        first = False
    if not rows:
        raise PerfcastError("the tree holds no nodes", path)
    metrics["count"] = Metric("count", "#", "count", "exclusive", "timemory measurements (inclusive stats count)")
    data = pd.DataFrame(rows, columns=["callpath", "metric", "value", "rank"])
    data["rep"] = 0
    meta = {"timemory": {"components": list(doc["timemory"]), "ranks": n_ranks}}
    return Experiment([], data, metrics.values(), tree, meta)


def _sniff(path: Path) -> bool:
    if not path.is_file():
        return False
    head, _ = read_ends(path, 4096)
    return bool(re.match(rb'\s*\{\s*"timemory"\s*:', head))


register(Reader("timemory", "timemory call-tree JSON (<component>.tree.json)", (".json",), _sniff,
                lambda p, o: read_timemory(p), fallback=False))

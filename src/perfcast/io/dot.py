"""Reader for gprof2dot call graphs (DOT files ``gprof2dot -f callgrind|prof|perf ... > graph.dot``).

gprof2dot writes one statement per line::

    digraph {
        graph [fontname=Arial, nodesep=0.125, ranksep=0.25];
        node [...];
        edge [...];
        "(below main)" [color="#fc1501", label="libc-2.17.so\\n(below main)\\n97.95%\\n(0.00%)\\n0×"];
        "(below main)" -> main [color="#fc1501", label="97.94%\\n1×", ...];
    }

A node's label holds its module (when known), the function name, its total (inclusive) share of the
run time, its own (exclusive) share in parentheses and its calls; an edge's label the share of the
callee's time spent on behalf of the caller and the calls along it.  The values are **percentages of
the profile's total time** (unit ``%``; the absolute times are not in the file), so the metrics
``time (I)`` and ``time (E)`` have kind ``other``; ``calls`` is a count.

Call tree: as for cProfile (io/pyprofile.py), the graph records only caller -> callee pairs.  A
function without incoming edges is a root holding its node's values; every edge becomes the callee's
node under its caller, holding the edge's share (``time (I)``) and calls; the callees of a function
hang under its first node in breadth-first order from the roots (cycles are not unrolled), and a
function's exclusive share (``time (E)``) is put on that first node only, so that it is counted once.
Frame names are the DOT node names (as Hatchet names them).

Only the subset gprof2dot writes is read (one statement per line); a node or edge twice, an edge
to an undeclared node, a label without the ``total%``/``(self%)`` lines, a share outside 0..100 or a
file without its closing ``}`` is a :class:`PerfcastError` naming the line.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric
from . import Reader, register, read_ends, read_text as read_checked

_ID = r'(?:"(?:[^"\\]|\\.)*"|[A-Za-z_0-9.]+)'
_STMT = re.compile(rf"^\s*({_ID})\s*(?:->\s*({_ID})\s*)?(?:\[(.*)\])?\s*;?\s*$")
_ATTR = re.compile(r'\s*([A-Za-z_]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s\]]+)\s*,?')
_PCT = re.compile(r"^([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)%$")
_SELF = re.compile(r"^\(([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)%\)$")
_CALLS = re.compile(r"^([0-9]{1,18})\u00d7$")
_KEYWORDS = {"graph", "node", "edge"}


def _unquote(s: str) -> str:
    if s.startswith('"') and s.endswith('"') and len(s) >= 2:
        return re.sub(r'\\(["\\])', r"\1", s[1:-1])
    return s


def _attrs(text: str, path: Path, lineno: int) -> dict:
    out, pos = {}, 0
    text = text.strip()
    while pos < len(text):
        m = _ATTR.match(text, pos)
        if not m or m.end() == pos:
            raise PerfcastError(f"cannot read the attributes {text[pos:pos + 40]!r}", path, lineno)
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def _pct(s: str, what: str, path: Path, lineno: int, pattern=_PCT) -> float:
    m = pattern.match(s)
    if not m:
        raise PerfcastError(f"{what} {s[:30]!r} is not a percentage", path, lineno)
    v = float(m.group(1))
    if not math.isfinite(v) or v > 100.0:
        raise PerfcastError(f"{what} {s[:30]!r} is outside 0..100%", path, lineno)
    return v


def parse(path: Path):
    """Nodes {name: (module, total%, self%, calls, line)} and edges [(src, dst, total%, calls, line)]."""
    text = read_checked(path)
    lines = text.split("\n")
    nodes: dict[str, tuple] = {}
    edges: list[tuple] = []
    seen_edges: set = set()
    state = "start"
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//") or line.startswith("#"):
            continue
        if state == "start":
            if not re.match(r"^(strict\s+)?digraph\b.*\{$", line):
                raise PerfcastError(f"not a DOT call graph: expected 'digraph {{', found {line[:40]!r}", path, lineno)
            state = "body"
            continue
        if state == "end":
            raise PerfcastError(f"text after the closing '}}': {line[:40]!r}", path, lineno)
        if line == "}":
            state = "end"
            continue
        m = _STMT.match(line)
        if not m:
            raise PerfcastError(f"not a DOT statement gprof2dot writes: {line[:60]!r}", path, lineno)
        a, b, attr_text = m.group(1), m.group(2), m.group(3) or ""
        if b is None and a in _KEYWORDS:
            continue
        attrs = _attrs(attr_text, path, lineno)
        label = _unquote(attrs.get("label", '""')).split("\\n")
        if b is None:
            name = _unquote(a)
            if name in nodes:
                raise PerfcastError(f"node {name[:60]!r} declared twice", path, lineno)
            calls = None
            if label and _CALLS.match(label[-1]):
                calls = float(_CALLS.match(label[-1]).group(1))
                label = label[:-1]
            if len(label) < 3:
                raise PerfcastError(f"the label of node {name[:60]!r} lacks its 'total%' and '(self%)' lines", path,
                                    lineno)
            total = _pct(label[-2], "total share", path, lineno)
            self_ = _pct(label[-1], "self share", path, lineno, _SELF)
            module = label[0] if len(label) >= 4 else ""
            nodes[name] = (module, total, self_, calls, lineno)
        else:
            src, dst = _unquote(a), _unquote(b)
            if (src, dst) in seen_edges:
                raise PerfcastError(f"edge {src[:40]!r} -> {dst[:40]!r} twice", path, lineno)
            seen_edges.add((src, dst))
            if not label or not label[0]:
                raise PerfcastError(f"edge {src[:40]!r} -> {dst[:40]!r} without its share label", path, lineno)
            total = _pct(label[0], "edge share", path, lineno)
            calls = None
            if len(label) > 1:
                c = _CALLS.match(label[1])
                if not c or len(label) > 2:
                    raise PerfcastError(f"edge label {'/'.join(label)[:40]!r} is not 'share%\\ncalls×'", path, lineno)
                calls = float(c.group(1))
            edges.append((src, dst, total, calls, lineno))
    if state == "start":
        raise PerfcastError("not a DOT call graph (no 'digraph {' line)", path)
    if state != "end":
        raise PerfcastError("no closing '}' (truncated file?)", path, len(lines))
    for src, dst, _, _, lineno in edges:
        for n in (src, dst):
            if n not in nodes:
                raise PerfcastError(f"edge to or from node {n[:60]!r}, which is not declared", path, lineno)
    if not nodes:
        raise PerfcastError("the graph has no nodes", path)
    return nodes, edges


def read_dot(path: Path) -> Experiment:
    nodes, edges = parse(path)
    callees = defaultdict(list)
    has_caller = set()
    for e in edges:
        callees[e[0]].append(e)
        has_caller.add(e[1])
    tree = CallTree()
    rows = []
    home: dict[str, str] = {}

    def put(cp, incl, calls, excl=None):
        rows.append((cp, "time (I)", incl))
        if calls is not None:
            rows.append((cp, "calls", calls))
        if excl is not None:
            rows.append((cp, "time (E)", excl))

    queue = deque()

    def visit():
        while queue:
            f = queue.popleft()
            for _, g, share, calls, _ in callees[f]:
                cp = home[f] + SEP + g
                tree.add(cp, home[f], g)
                first = g not in home
                put(cp, share, calls, nodes[g][2] if first else None)
                if first:
                    home[g] = cp
                    queue.append(g)

    for name, (_, total, self_, calls, _) in nodes.items():
        if name not in has_caller:
            home[name] = tree.add(name, None, name)
            put(name, total, calls, self_)
            queue.append(name)
    visit()
    for name, (_, total, self_, calls, _) in nodes.items():  # reached only through a cycle
        if name not in home:
            home[name] = tree.add(name, None, name)
            rows.append((name, "time (E)", self_))
            queue.append(name)
            visit()
    data = pd.DataFrame(rows, columns=["callpath", "metric", "value"])
    data["rep"] = 0
    metrics = [Metric("time (I)", "%", "other", "inclusive", "share of the total time (gprof2dot total %)"),
               Metric("time (E)", "%", "other", "exclusive", "share of the total time (gprof2dot self %)"),
               Metric("calls", "#", "count", "exclusive", "calls (gprof2dot)")]
    meta = {"dot": {"functions": len(nodes), "edges": len(edges),
                    "modules": sorted({m for m, *_ in nodes.values() if m})[:50]}}
    return Experiment([], data, metrics, tree, meta)


def _sniff(path: Path) -> bool:
    if not path.is_file():
        return False
    head, _ = read_ends(path, 8192)
    text = head.decode("utf-8", "replace")
    return bool(re.match(r"\s*(strict\s+)?digraph\b", text)) and bool(re.search(r'label="[^"]*%\\n\(', text))


register(Reader("dot", "gprof2dot call graph (DOT; shares of the total time)", (".dot", ".gv"), _sniff,
                lambda p, o: read_dot(p)))

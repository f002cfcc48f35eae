"""Hatchet GraphFrames saved to files: the JSON of ``GraphFrame.to_json``, the graph literal of
``GraphFrame.to_literal`` and the dataframe written by ``GraphFrame.dataframe.to_csv``.

``to_json`` (``{"graph": [...], "dataframe": [...], "dataframe_indices": [...], "inclusive_metrics",
"exclusive_metrics"}``)
    ``graph`` is a list (one entry per root) of ``{node id: {"data": frame, "children": [ids]}}``;
    ``dataframe`` holds one record per node (and per ``rank``/``thread`` when those are among
    ``dataframe_indices``) with the metric columns named in ``inclusive_metrics`` and
    ``exclusive_metrics``.
graph literal (``[{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}, ...]``)
    nested nodes, one value per metric (Hatchet writes one rank's values); ``_hatchet_nid`` among
    the metrics is the node id, not a metric.  Metrics whose name contains ``(inc)`` are inclusive,
    the others exclusive (Hatchet's rule for literals).
CSV (``gf.dataframe.to_csv(...)``)
    one row per node (and rank/thread), the ``node`` column holding the frame as text.  **The
    CSV holds no parent links** -- Hatchet's dataframe keeps the tree in the Node objects, which
    ``to_csv`` writes as their frame only -- so the callpaths are flat: one top-level callpath per
    node, named by its ``name`` column; nodes sharing a name (``<unknown procedure>``) are told
    apart by their ``nid`` (else the frame) and numbered `` #1``, `` #2``, ... in the order met.
    ``meta["warnings"]`` says so.  Metric columns are the numeric columns other than Hatchet's
    bookkeeping (``nid``, ``line``, ``rank``, ``thread``); ``(inc)`` marks inclusive ones, which
    the metric's description records -- its scope is ``unknown``, since inclusive or exclusive
    values on a flat tree would mislead perfcast's tree arithmetic (every node a root).

Nodes that end at the same callpath (siblings with the same name) are merged, their values summed
(siblings are disjoint subtrees, so inclusive and exclusive sums stay right); a node under two
parents (Hatchet graphs may be DAGs) is refused, as perfcast's call trees are trees.

Units.  Hatchet's files carry none, so units stay empty.  Its ``time`` columns hold what the
profiler recorded: from HPCToolkit the CPUTIME in microseconds (older HPCToolkit) or seconds
(newer), from Caliper seconds -- the file does not say which, so perfcast does not guess.

HDF5 (``GraphFrame.to_hdf``) is refused with a one-line explanation: Hatchet writes it through
pandas/PyTables with its Node objects *pickled* in the table, which cannot be read without
executing Python code stored in the file; save the GraphFrame with ``to_json`` instead.
"""

from __future__ import annotations

import ast
import csv
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Frame, Metric, guess_kind
from . import ReadOptions, Reader, check_readable, read_ends, read_json, read_text, register

__all__ = ["read_hatchet"]

#: dataframe columns that describe a node or a location, never metrics
_BOOKKEEPING = {"node", "nid", "rank", "thread", "line", "name", "type", "file", "module", "_hatchet_nid",
                "children", "parents", "exc_metrics", "inc_metrics", "default_metric"}
#: bound on the callpath strings (each holds all its frames: a deep chain costs depth^2 characters)
_MAX_PATH_CHARS = 1 << 28
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_THICKET_KEYS = (b'"metadata"', b'"profile_mapping"')


def _kind(path: Path) -> str | None:
    """``json``, ``literal``, ``csv``, ``hdf5`` or None."""
    if not path.is_file():
        return None
    head, tail = read_ends(path)
    if head.startswith(_HDF5_MAGIC):
        return "hdf5"
    name = path.name.lower()
    text = head + tail
    start = head.lstrip()[:1]
    # to_json writes graph, dataframe_indices, dataframe, inclusive/exclusive_metrics in this order:
    # in a large file only the first and the last are within reach
    if start == b"{" and b'"graph"' in text and any(
            k in text for k in (b'"dataframe_indices"', b'"exclusive_metrics"', b'"inclusive_metrics"')) \
            and not any(k in text for k in _THICKET_KEYS):
        return "json"
    if start == b"[" and b'"frame"' in head and b'"metrics"' in head:
        return "literal"
    if name.endswith(".csv"):
        first = head.split(b"\n", 2)
        if len(first) >= 2:
            cols = next(csv.reader([first[0].decode("utf-8", "replace")]), [])
            if "node" in cols and "name" in cols and first[1].lstrip(b'"').startswith(b"{'"):
                return "csv"
    return None


def _sniff(path: Path) -> bool:
    return _kind(path) is not None


class _Graph:
    """Nodes (id -> name, parent id) and their values, turned into an Experiment."""

    def __init__(self, path: Path):
        self.path = path
        self.name: dict = {}
        self.parent: dict = {}
        self.order: list = []
        self.rows: list[tuple] = []   # (node id, rank, thread, metric, value)
        self.seen: set = set()
        self.kind: dict = {}          # node id -> what its frame is (Frame), when the file says

    def node(self, nid, name: str, parent, where: str, kind: Frame | None = None):
        if nid in self.name:
            raise PerfcastError(f"node {nid} appears twice (under two parents?): perfcast reads trees only",
                                self.path, where)
        if not isinstance(name, str) or not name:
            raise PerfcastError(f"node {nid} has no name", self.path, where)
        self.name[nid] = name
        self.parent[nid] = parent
        self.order.append(nid)
        if kind is not None:
            self.kind[nid] = kind

    def value(self, nid, rank, thread, metric: str, v, where: str):
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise PerfcastError(f"metric {metric!r}: {str(v)[:40]!r} is not a number", self.path, where)
        v = float(v)
        if not math.isfinite(v):
            raise PerfcastError(f"metric {metric!r}: {v} is not a finite number", self.path, where)
        self.rows.append((nid, rank, thread, metric, v))

    def experiment(self, metrics: dict[str, Metric], has_rank: bool, has_thread: bool, meta: dict) -> Experiment:
        tree = CallTree()
        callpath: dict = {}
        merged = chars = 0
        for nid in self.order:
            par = self.parent[nid]
            if par is not None and par not in callpath:
                raise PerfcastError(f"node {nid}: its parent {par} is not defined before it", self.path, "graph")
            cp = self.name[nid] if par is None else callpath[par] + SEP + self.name[nid]
            chars += len(cp)
            if chars > _MAX_PATH_CHARS:
                raise PerfcastError(f"the callpaths would take more than {_MAX_PATH_CHARS >> 20} MiB of text (a chain "
                                    f"of nodes {len(cp.split(SEP))} deep): not a call tree perfcast can hold",
                                    self.path, f"node {nid}")
            if cp in tree:
                merged += 1
            try:
                tree.add(cp, None if par is None else callpath[par], self.name[nid], self.kind.get(nid))
            except PerfcastError as e:
                raise e.at(self.path, f"node {nid}") from None
            callpath[nid] = cp
        if not self.rows:
            raise PerfcastError("no metric values", self.path)
        df = pd.DataFrame(self.rows, columns=["node", "rank", "thread", "metric", "value"])
        df["callpath"] = [callpath[n] for n in df["node"]]
        keys = ["callpath", "metric"] + (["rank"] if has_rank else []) + (["thread"] if has_thread else [])
        if merged:
            df = df.groupby(keys, sort=False, as_index=False)["value"].sum()
            meta.setdefault("hatchet", {})["merged_nodes"] = merged
        out = pd.DataFrame({"rep": np.zeros(len(df), dtype="int64"),
                            "callpath": pd.Categorical(df["callpath"]),
                            "metric": pd.Categorical(df["metric"]),
                            "value": df["value"].to_numpy(dtype="float64")})
        if has_rank:
            out["rank"] = df["rank"].to_numpy(dtype="int64")
        if has_thread:
            out["thread"] = df["thread"].to_numpy(dtype="int64")
        used = set(df["metric"])
        return Experiment((), out, [m for n, m in metrics.items() if n in used], tree, meta)


def _metric(name: str, inclusive: bool, flat: bool = False) -> Metric:
    scope = "inclusive" if inclusive else "exclusive"
    if flat:
        # without the tree, perfcast's tree arithmetic (subtree sums, topmost callpaths) would
        # treat every node as a root: the values are kept, their scope is not claimed
        return Metric(name, "", guess_kind(name), "unknown",
                      f"Hatchet column {name!r}, {scope} in Hatchet; scope unknown here because the CSV holds "
                      f"no tree; Hatchet files carry no units")
    return Metric(name, "", guess_kind(name), scope,
                  f"Hatchet column {name!r} ({scope}); Hatchet files carry no units")


def _location(v, what: str, path: Path, where: str) -> int:
    if isinstance(v, bool) or v is None:
        raise PerfcastError(f"{what} {v!r} is not a whole number", path, where)
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a whole number", path, where) from None
    if not math.isfinite(f) or f != int(f) or f < 0 or f >= 2**31:
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a whole number from 0 to 2^31-1", path, where)
    return int(f)


# -- to_json -----------------------------------------------------------------------------------

def _read_json_graph(path: Path, doc: dict) -> Experiment:
    g = _Graph(path)
    graphs = doc.get("graph")
    if isinstance(graphs, dict):
        graphs = [graphs]
    if not isinstance(graphs, list) or not all(isinstance(x, dict) for x in graphs):
        raise PerfcastError("'graph' must be a list of {node id: node} objects", path, "graph")
    nodes: dict[str, dict] = {}
    for gi, spec in enumerate(graphs):
        for nid, node in spec.items():
            w = f"graph[{gi}][{nid}]"
            if nid in nodes:
                raise PerfcastError(f"node id {nid} defined twice", path, w)
            if not isinstance(node, dict) or not isinstance(node.get("data"), dict) \
                    or not isinstance(node.get("children", []), list):
                raise PerfcastError("a node must be {\"data\": {frame}, \"children\": [ids]}", path, w)
            nodes[nid] = node
    parent: dict[str, str] = {}
    for nid, node in nodes.items():
        for c in node.get("children", []):
            c = str(c)
            if c not in nodes:
                raise PerfcastError(f"child {c} is not a node of the graph", path, f"graph node {nid}")
            if c in parent:
                raise PerfcastError(f"node {c} has two parents ({parent[c]}, {nid}): perfcast reads trees only",
                                    path, f"graph node {nid}")
            parent[c] = nid
    records = doc.get("dataframe")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise PerfcastError("'dataframe' must be a list of records", path, "dataframe")
    names_from_df: dict[str, str] = {}
    for r in records:
        if isinstance(r.get("name"), str):
            names_from_df.setdefault(str(r.get("node")), r["name"])

    def frame_name(nid: str) -> str:
        data = nodes[nid]["data"]
        name = data.get("name")
        if isinstance(name, str) and name:
            return name
        if nid in names_from_df:
            return names_from_df[nid]
        if "file" in data and "line" in data:
            return f"{data['file']}:{data['line']}"
        raise PerfcastError(f"node {nid} has no name", path, f"graph node {nid}")

    # preorder from the roots: parents before children; what is not reached lies on a cycle
    roots = [n for n in nodes if n not in parent]
    stack = list(reversed(roots))
    while stack:
        nid = stack.pop()
        g.node(nid, frame_name(nid), parent.get(nid), f"graph node {nid}")
        stack.extend(reversed([str(c) for c in nodes[nid].get("children", [])]))
    if len(g.order) != len(nodes):
        raise PerfcastError("the graph's children links form a cycle", path, "graph")

    indices = doc.get("dataframe_indices") or ["node"]
    if not isinstance(indices, list) or "node" not in indices:
        raise PerfcastError("'dataframe_indices' must list 'node'", path, "dataframe_indices")
    has_rank, has_thread = "rank" in indices, "thread" in indices
    inc = doc.get("inclusive_metrics") or []
    exc = doc.get("exclusive_metrics") or []
    if not isinstance(inc, list) or not isinstance(exc, list) or not all(isinstance(m, str) for m in inc + exc):
        raise PerfcastError("'inclusive_metrics' and 'exclusive_metrics' must be lists of column names", path)
    if set(inc) & set(exc):
        raise PerfcastError(f"metric {sorted(set(inc) & set(exc))[0]!r} is both inclusive and exclusive", path)
    if not inc and not exc:  # not named: the numeric columns, Hatchet's "(inc)" rule
        cols = {}
        for r in records:
            for k, v in r.items():
                if k not in _BOOKKEEPING:
                    cols[k] = cols.get(k, True) and (v is None or isinstance(v, (int, float))
                                                     and not isinstance(v, bool))
        inc = [k for k, ok in cols.items() if ok and "(inc)" in k]
        exc = [k for k, ok in cols.items() if ok and "(inc)" not in k]
    metrics = {m: _metric(m, m in inc) for m in [*inc, *exc]}
    if not metrics:
        raise PerfcastError("no metric columns", path, "dataframe")
    seen = set()
    for i, r in enumerate(records):
        w = f"dataframe[{i}]"
        nid = str(r.get("node"))
        if nid not in nodes:
            raise PerfcastError(f"node {r.get('node')!r} is not in the graph", path, w)
        rank = _location(r.get("rank"), "rank", path, w) if has_rank else None
        thread = _location(r.get("thread"), "thread", path, w) if has_thread else None
        if (nid, rank, thread) in seen:
            raise PerfcastError(f"a second record for node {nid}" + (f", rank {rank}" if has_rank else "")
                                + (f", thread {thread}" if has_thread else ""), path, w)
        seen.add((nid, rank, thread))
        for m in metrics:
            g.value(nid, rank, thread, m, r.get(m), f"{w}[{m!r}]")
    return g.experiment(metrics, has_rank, has_thread, {"hatchet": {"file": "to_json"}})


# -- to_literal --------------------------------------------------------------------------------

def _read_literal(path: Path, doc: list) -> Experiment:
    g = _Graph(path)
    metrics: dict[str, Metric] = {}
    nids: set = set()
    counter = [0]
    stack = [(node, None, f"[{i}]") for i, node in reversed(list(enumerate(doc)))]
    while stack:
        node, parent, w = stack.pop()
        if not isinstance(node, dict) or not isinstance(node.get("frame"), dict) \
                or not isinstance(node.get("metrics", {}), dict):
            raise PerfcastError("a node must be {\"frame\": {...}, \"metrics\": {...}, \"children\": [...]}",
                                path, w)
        vals = node.get("metrics", {})
        hnid = vals.get("_hatchet_nid")
        if hnid is not None:
            if hnid in nids:
                raise PerfcastError(f"node _hatchet_nid {hnid} appears twice (under two parents): perfcast "
                                    f"reads trees only", path, w)
            nids.add(hnid)
        counter[0] += 1
        nid = counter[0]
        name = node["frame"].get("name") or node.get("name")
        g.node(nid, name if isinstance(name, str) else None, parent, w)
        for m, v in vals.items():
            if m == "_hatchet_nid":
                continue
            if m not in metrics:
                metrics[m] = _metric(m, "(inc)" in m)
            g.value(nid, None, None, m, v, f"{w}.metrics[{m!r}]")
        children = node.get("children", [])
        if not isinstance(children, list):
            raise PerfcastError("'children' must be a list", path, w)
        stack.extend((c, nid, f"{w}.children[{j}]") for j, c in reversed(list(enumerate(children))))
    if not g.order:
        raise PerfcastError("no nodes", path)
    return g.experiment(metrics, False, False, {"hatchet": {"file": "literal"}})


# -- dataframe CSV -----------------------------------------------------------------------------

#: Hatchet's ``type`` column of HPCToolkit data: the experiment.xml tag of the node
_HPCTOOLKIT_TYPES = {"PF": "procedure", "Pr": "procedure", "L": "loop", "S": "statement"}


def _csv_frame(r: list, col: dict, name: str) -> Frame | None:
    """What a CSV row's node is when Hatchet read it from HPCToolkit (``type`` PF/Pr, L or S), as
    :mod:`perfcast.io.hpctoolkit` records it: a procedure's own name -- Hatchet prefixes the
    call-site line, ``27:MPI_Init`` -- and its file and load module; None for other types."""
    kind = _HPCTOOLKIT_TYPES.get(r[col["type"]]) if "type" in col else None
    if kind != "procedure":
        return None if kind is None else Frame(kind)
    from .hpctoolkit import procedure_where

    proc = name.split(":", 1)[1] if name.split(":", 1)[0].isdigit() and ":" in name else name
    return Frame("procedure", proc, procedure_where(r[col["file"]] if "file" in col else "",
                                                     r[col["module"]] if "module" in col else ""))


def _read_csv(path: Path) -> Experiment:
    text = read_text(path)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or not rows[0]:
        raise PerfcastError("empty file", path, 1)
    header = rows[0]
    if len(set(header)) != len(header):
        raise PerfcastError("a column name appears twice in the header", path, 1)
    col = {c: i for i, c in enumerate(header)}
    if "node" not in col or "name" not in col:
        raise PerfcastError("not a Hatchet dataframe CSV (needs the columns node and name)", path, 1)
    body = [(n, r) for n, r in enumerate(rows[1:], start=2) if r]
    for n, r in body:
        if len(r) != len(header):
            raise PerfcastError(f"{len(r)} field(s) where the header has {len(header)}", path, n)
    if not body:
        raise PerfcastError("no rows", path)

    def number(s: str) -> float | None:
        if s == "":
            return None
        try:
            return float(s)
        except ValueError:
            return None

    # metric columns: mostly numbers (a damaged cell must not make a whole metric vanish: in a
    # metric column every non-empty cell must be a number, else the row is refused)
    metric_cols = []
    for c in header:
        if c in _BOOKKEEPING or c.startswith("Unnamed"):
            continue
        cells = [r[col[c]] for _, r in body if r[col[c]] != ""]
        if cells and 2 * sum(number(x) is not None for x in cells) > len(cells):
            metric_cols.append(c)
    if not metric_cols:
        raise PerfcastError("no numeric metric column", path, 1)
    for n, r in body:
        for c in metric_cols:
            if r[col[c]] != "" and number(r[col[c]]) is None:
                raise PerfcastError(f"metric {c!r}: {r[col[c]][:40]!r} is not a number", path, n)
    metrics = {m: _metric(m, "(inc)" in m, flat=True) for m in metric_cols}
    has_rank, has_thread = "rank" in col, "thread" in col
    g = _Graph(path)
    key_of: dict[tuple, int] = {}
    count: dict[str, int] = {}
    seen = set()
    for n, r in body:
        key = (r[col["node"]], r[col["nid"]] if "nid" in col else None)
        name = r[col["name"]]
        if not name:
            try:
                frame = ast.literal_eval(r[col["node"]])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                frame = None
            name = frame.get("name") if isinstance(frame, dict) and isinstance(frame.get("name"), str) else ""
        if key not in key_of:
            nid = len(key_of) + 1
            key_of[key] = nid
            k = count.get(name, -1) + 1 if name else 0
            count[name] = k
            g.node(nid, name if k == 0 else f"{name} #{k}", None, str(n), _csv_frame(r, col, name))
        nid = key_of[key]
        rank = _location(r[col["rank"]], "rank", path, str(n)) if has_rank else None
        thread = _location(r[col["thread"]], "thread", path, str(n)) if has_thread else None
        if (nid, rank, thread) in seen:
            raise PerfcastError(f"node {name!r}" + (f", rank {rank}" if has_rank else "")
                                + (f", thread {thread}" if has_thread else "") + " given twice", path, n)
        seen.add((nid, rank, thread))
        for m in metric_cols:
            g.value(nid, rank, thread, m, number(r[col[m]]), str(n))
    meta = {"hatchet": {"file": "csv", "flat": True},
            "warnings": [f"{path.name}: a Hatchet dataframe CSV holds no parent links; its {len(key_of)} nodes "
                         f"are read as flat callpaths (save the GraphFrame with to_json to keep the tree)"]}
    return g.experiment(metrics, has_rank, has_thread, meta)


def read_hatchet(path: Path, options: ReadOptions | None = None) -> Experiment:
    check_readable(path)
    if path.is_dir():
        raise PerfcastError("is a directory, not a file", path)
    kind = _kind(path)
    if kind == "hdf5":
        raise PerfcastError("an HDF5 file: perfcast does not read HDF5 (a Hatchet GraphFrame saved with to_hdf holds "
                            "its nodes as pickled Python objects, which perfcast does not execute); save it with "
                            "gf.to_json() and read that file", path)
    if kind is None:  # --format hatchet on a file the sniffer did not recognise: JSON or CSV by content
        head = read_ends(path, 4096)[0].lstrip()[:1]
        kind = "json" if head in (b"{", b"[") else "csv"
    if kind == "csv":
        exp = _read_csv(path)
    else:
        doc = read_json(path)
        if isinstance(doc, list):
            exp = _read_literal(path, doc)
        elif isinstance(doc, dict) and "graph" in doc and "dataframe" in doc:
            exp = _read_json_graph(path, doc)
        else:
            raise PerfcastError("not a Hatchet GraphFrame file (to_json object, to_literal list or dataframe CSV)",
                                path)
    if options is not None and options.progress is not None:
        options.progress(1, 1, str(path))
    return exp


register(Reader("hatchet", "Hatchet GraphFrame file (to_json / to_literal JSON, dataframe CSV)",
                (".json", ".csv", ".h5", ".hdf5", ".hdf"), _sniff, read_hatchet, fallback=False))

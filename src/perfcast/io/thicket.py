"""Thicket's JSON ensemble (``Thicket.to_json``): many Caliper profiles in one file.

The file holds

* ``graph`` -- a Hatchet graph: ``{node id: {"data": {"name", "type"}, "children", "parents"}}``;
* ``dataframe`` -- one record per (node, profile) with the metric columns;
* ``metadata`` -- one record per profile with its Adiak/Caliper globals;
* ``profile`` / ``profile_mapping`` -- the profile ids and the .cali files they came from;
* ``inclusive_metrics`` / ``exclusive_metrics`` -- which metric columns are which.

Each profile is one run; parameters come from the metadata exactly as for a directory of .cali
files (:func:`perfcast.io.caliper.choose_parameters`): given with ``ReadOptions.parameters`` or
chosen among the well-known keys that vary (``jobsize``, ``problem_size``, ``threads``, ...).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PerfcastError
from ..experiment import Experiment, Metric
from . import ReadOptions, Reader, read_ends, read_json, register
from .caliper import (_NOT_METRICS, _THREAD_KEYS, _assemble, _combine_op, _json_safe, _Profile, _split_ops,
                      _to_int_location, _unit_from_name, metric_kind, metric_scope)

_KEYS = ("graph", "dataframe", "metadata")
#: dataframe columns that are bookkeeping, not metrics
_NOT_METRIC_COLUMNS = {"node", "profile", "nid", "name", "spot.channel", "rank", "thread"}


def _sniff(path: Path) -> bool:
    if not path.is_file() or not path.name.lower().endswith(".json"):
        return False
    head, tail = read_ends(path)
    text = head + tail
    # "metadata" may sit in the middle of a large file; Thicket writes these near the ends
    return (head.lstrip()[:1] == b"{" and b'"graph"' in text and b'"dataframe"' in text
            and any(k in text for k in (b'"metadata"', b'"profile_mapping"', b'"inclusive_metrics"')))


def _node_paths(graph: dict, path: Path) -> dict[str, tuple[str, ...]]:
    paths: dict[str, tuple[str, ...]] = {}

    def frames(nid: str) -> tuple[str, ...]:
        chain = []
        cur = nid
        while cur is not None and cur not in paths:
            node = graph.get(cur)
            if not isinstance(node, dict):
                raise PerfcastError(f"node {cur} is referred to but not defined", path, "graph")
            parents = node.get("parents") or []
            if len(parents) > 1:
                raise PerfcastError(f"node {cur} has {len(parents)} parents; only trees are supported", path,
                                    "graph")
            chain.append(cur)
            if len(chain) > len(graph):
                raise PerfcastError("graph parents form a cycle", path, "graph")
            cur = str(parents[0]) if parents else None
        prefix = paths[cur] if cur is not None else ()
        for n in reversed(chain):
            data = graph[n].get("data") or {}
            name = data.get("name")
            if name is None:
                raise PerfcastError(f"node {n} has no name", path, "graph")
            prefix = prefix + (str(name),)
            paths[n] = prefix
        return paths[nid]

    for nid in graph:
        frames(str(nid))
    return paths


def read_thicket(path: Path, options: ReadOptions) -> Experiment:
    doc = read_json(path)
    if not isinstance(doc, dict) or not all(k in doc for k in _KEYS):
        raise PerfcastError("not a Thicket JSON file (needs the keys graph, dataframe, metadata)", path)
    graph = doc["graph"]
    if isinstance(graph, list):  # Thicket writes the graph as a one-element list
        if len(graph) != 1 or not isinstance(graph[0], dict):
            raise PerfcastError("'graph' must hold one graph", path, "graph")
        graph = graph[0]
    if not isinstance(graph, dict):
        raise PerfcastError("'graph' must map node ids to nodes", path, "graph")
    graph = {str(k): v for k, v in graph.items()}
    frames_of = _node_paths(graph, path)
    records, metadata = doc["dataframe"], doc["metadata"]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise PerfcastError("'dataframe' must be a list of records", path, "dataframe")
    if not isinstance(metadata, list) or not all(isinstance(r, dict) and "profile" in r for r in metadata):
        raise PerfcastError("'metadata' must be a list of records with a profile id", path, "metadata")
    mapping = doc.get("profile_mapping") or {}
    inclusive = set(doc.get("inclusive_metrics") or [])
    exclusive = set(doc.get("exclusive_metrics") or [])

    order = [m["profile"] for m in metadata]
    if isinstance(doc.get("profile"), list) and set(doc["profile"]) == set(order):
        order = list(doc["profile"])
    meta_of = {m["profile"]: m for m in metadata}
    profiles: dict = {}
    for pid in order:
        label = str(mapping.get(str(pid), pid))
        prof = _Profile(path, label=label)
        prof.globals = {k: _json_safe(v) for k, v in meta_of[pid].items() if k != "profile"}
        profiles[pid] = prof

    # metric columns: numeric in every record that has them
    columns: dict[str, bool] = {}
    for r in records:
        for k, v in r.items():
            if k in _NOT_METRIC_COLUMNS or k in _NOT_METRICS or k.startswith("iteration#"):
                continue
            numeric = v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
            columns[k] = columns.get(k, True) and numeric
    metric_cols = [k for k, ok in columns.items() if ok]
    if not metric_cols:
        raise PerfcastError("no numeric metric column", path, "dataframe")
    metrics = {}
    for c in metric_cols:
        _ops, base = _split_ops(c)
        unit = _unit_from_name(base)
        scope = "inclusive" if c in inclusive else "exclusive" if c in exclusive else metric_scope(c)
        metrics[c] = Metric(c, unit, metric_kind(c, unit), scope)
    thread_key = next((k for k in _THREAD_KEYS if any(k in r for r in records[:1])), None)

    for i, r in enumerate(records):
        pid = r.get("profile")
        if pid not in profiles:
            raise PerfcastError(f"profile {pid!r} has no metadata record", path, f"dataframe[{i}]")
        node = r.get("node")
        if str(node) not in frames_of:
            raise PerfcastError(f"node {node!r} is not in the graph", path, f"dataframe[{i}]")
        prof = profiles[pid]
        if not prof.metrics:
            prof.metrics = dict(metrics)
            prof.combine = {c: _combine_op(c, False) for c in metric_cols}
        rank = thread = None
        if "rank" in r:
            prof.has_rank = True
            rank = _to_int_location(r["rank"], "rank", path, f"dataframe[{i}]")
        if thread_key and thread_key in r:
            prof.has_thread = True
            thread = _to_int_location(r[thread_key], thread_key, path, f"dataframe[{i}]")
        values = {c: float(r[c]) for c in metric_cols if r.get(c) is not None}
        if values:
            prof.add(frames_of[str(node)], (rank, thread), values, 1.0)
            prof.n_records += 1
    empty = [p.label for p in profiles.values() if not p.cells]
    if empty:
        raise PerfcastError(f"{len(empty)} profile(s) without values, e.g. {empty[0]}", path, "dataframe")
    done = len(profiles)
    if options.progress is not None:
        options.progress(done, done, str(path))
    exp = _assemble(list(profiles.values()), options, None)
    exp.meta["format"] = "thicket"
    return exp


register(Reader("thicket", "Thicket JSON ensemble (Thicket.to_json): many Caliper profiles with metadata",
                (".json",), _sniff, read_thicket))

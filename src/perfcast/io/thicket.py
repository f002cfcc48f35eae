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

In memory (Jupyter), :func:`from_thicket` turns a Thicket object into an Experiment through the
same code (it builds the structure ``to_json`` would write), and :func:`to_thicket` turns an
Experiment into a Thicket: one profile per (point, repetition), its parameters (and, for Caliper
and Thicket sources, the run's metadata) in the metadata table.  :func:`from_hatchet` reads a
Hatchet GraphFrame in memory as :mod:`perfcast.io.hatchet` reads its ``to_json`` file.  Thicket and
Hatchet are optional (``pip install 'perfcast[thicket]'``); only :func:`to_thicket` imports them.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import Experiment, Metric
from . import ReadOptions, Reader, _warn_implausible, read_ends, read_json, register
from .caliper import (_NOT_METRICS, _check_finite, _json_num, _THREAD_KEYS, _assemble, _combine_op, _json_safe, _Profile, _split_ops,
                      _to_int_location, _unit_from_name, metric_kind, metric_scope)

_KEYS = ("graph", "dataframe", "metadata")
#: dataframe columns that are bookkeeping, not metrics
_NOT_METRIC_COLUMNS = {"node", "profile", "nid", "name", "spot.channel", "rank", "thread"}


def _sniff(path: Path) -> bool:
    if not path.is_file() or not path.name.lower().endswith(".json"):
        return False
    head, tail = read_ends(path)
    text = head + tail
    # "metadata" may sit in the middle of a large file; Thicket writes the profile keys at the end.
    # (Hatchet's GraphFrame.to_json writes graph, dataframe and inclusive_metrics too: those alone
    # do not make a Thicket, and detection must not depend on which reader module came first)
    return (head.lstrip()[:1] == b"{" and b'"graph"' in text and b'"dataframe"' in text
            and any(k in text for k in (b'"metadata"', b'"profile_mapping"', b'"profile_idx_name"')))


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
    return _read_doc(doc, path, options)


def _read_doc(doc: dict, path: Path, options: ReadOptions) -> Experiment:
    """The experiment of a Thicket in its JSON structure (``doc``: the keys of ``Thicket.to_json``,
    from a file or built from a Thicket in memory by :func:`from_thicket`); ``path`` names the source
    in messages."""
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
    index_of = {m["profile"]: i for i, m in enumerate(metadata)}
    profiles: dict = {}
    for pid in order:
        label = str(mapping.get(str(pid), pid))
        prof = _Profile(path, label=label, place=f"metadata[{index_of[pid]}]")
        prof.globals = {k: _json_safe(v) for k, v in meta_of[pid].items() if k != "profile"}
        profiles[pid] = prof

    # metric columns: those holding numbers; one holding numbers and, in some record, anything else
    # (text, a boolean) is damage, never a column that is "not a metric" (all its values lost)
    numbers: dict[str, bool] = {}
    other: dict[str, int] = {}  # column -> first record with a value that is no number
    for i, r in enumerate(records):
        for k, v in r.items():
            if k in _NOT_METRIC_COLUMNS or k in _NOT_METRICS or k.startswith("iteration#") or v is None:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                numbers[k] = True
            else:
                other.setdefault(k, i)
    for k in numbers:
        if k in other:
            i = other[k]
            raise PerfcastError(f"{json.dumps(records[i][k])[:40]} is not a number", path, f"dataframe[{i}].{k}")
    metric_cols = list(numbers)
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
        for c, v in values.items():
            _check_finite(v, r[c], c, path, f"dataframe[{i}].{c}")
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


# ------------------------------------------------------------------------------------------------
# Thicket and Hatchet objects in memory

#: how an object in memory is named in messages and ``meta["sources"]``
IN_MEMORY = "<Thicket in memory>"


def _plain(v):
    """A metadata value as JSON: numpy scalars as Python numbers, arrays as lists, NaN as None,
    anything else that JSON cannot hold (timestamps, objects) as its text."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts of Python values, missing values as None (as ``to_json`` writes them)."""
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")


def _graph_doc(graph, what: str) -> dict:
    """``{node id: {"data": frame attributes, "children": [ids], "parents": [ids]}}`` of a Hatchet graph."""
    try:
        nodes = list(graph.traverse())
    except AttributeError:
        raise PerfcastError(f"the {what}'s graph is not a Hatchet graph (no traverse())", IN_MEMORY) from None
    return {str(n._hatchet_nid): {"data": dict(n.frame.attrs), "children": [c._hatchet_nid for c in n.children],
                                  "parents": [c._hatchet_nid for c in n.parents]} for n in nodes}


def _frame_records(df: pd.DataFrame, rename: dict | None = None) -> list[dict]:
    ef = df.reset_index()
    ef["node"] = [n._hatchet_nid for n in ef["node"]]
    if rename:
        ef = ef.rename(columns=rename)
    return _records(ef)


def from_thicket(tk, parameters=None) -> Experiment:
    """The Experiment of a Thicket object in memory (``Thicket.from_caliperreader``, ``from_json``, ...).

    Each profile (the dataframe's ``profile`` index level) is one run at the point given by its
    metadata: ``parameters`` names the metadata columns (``["jobsize"]``), or they are chosen among
    the numeric ones that vary exactly as for a directory of ``.cali`` files.  Metric scopes follow
    the Thicket's ``inc_metrics``/``exc_metrics``; the callpaths follow its graph; missing values
    (NaN, a node absent from a profile) are left out.
    """
    for attr in ("graph", "dataframe", "metadata"):
        if not hasattr(tk, attr):
            raise PerfcastError(f"not a Thicket: a {type(tk).__name__} has no {attr!r}", IN_MEMORY)
    df, meta = tk.dataframe, tk.metadata
    pidx = getattr(tk, "profile_idx_name", None) or "profile"
    if not isinstance(df, pd.DataFrame) or "node" not in df.index.names:
        raise PerfcastError("the Thicket's dataframe is not indexed by node", IN_MEMORY, "dataframe")
    if isinstance(df.columns, pd.MultiIndex):
        raise PerfcastError("the Thicket's dataframe has two column levels (concat_thickets(axis='columns')): "
                            "convert each of the joined Thickets on its own", IN_MEMORY, "dataframe")
    if pidx not in df.index.names:
        raise PerfcastError(f"the Thicket's dataframe has no {pidx!r} index level (index: "
                            f"{', '.join(map(str, df.index.names))}); a Hatchet GraphFrame is read with "
                            f"from_hatchet", IN_MEMORY, "dataframe")
    if not isinstance(meta, pd.DataFrame) or len(meta) == 0 or meta.index.name != pidx:
        raise PerfcastError(f"the Thicket has no metadata table indexed by {pidx!r} (tk.metadata): the profiles' "
                            f"parameters (jobsize, problem_size, ...) come from it", IN_MEMORY, "metadata")
    if len(meta.columns) == 0:
        raise PerfcastError("the Thicket's metadata table has no columns: the profiles' parameters (jobsize, "
                            "problem_size, ...) come from it", IN_MEMORY, "metadata")
    rename = {pidx: "profile"} if pidx != "profile" else None
    mapping = getattr(tk, "profile_mapping", None) or {}
    doc = {"graph": _graph_doc(tk.graph, "Thicket"),
           "dataframe": _frame_records(df, rename),
           "metadata": [{k: _plain(v) for k, v in r.items()} for r in _records(meta.reset_index().rename(
               columns=rename or {}))],
           "profile_mapping": {str(k): str(v) for k, v in mapping.items()},
           "inclusive_metrics": list(getattr(tk, "inc_metrics", None) or []),
           "exclusive_metrics": list(getattr(tk, "exc_metrics", None) or [])}
    if getattr(tk, "profile", None) is not None:
        doc["profile"] = list(tk.profile)
    exp = _read_doc(doc, Path(IN_MEMORY), ReadOptions(parameters=tuple(parameters or ())))
    exp.meta["format"] = "thicket"
    exp.meta["sources"] = [IN_MEMORY]
    return _warn_implausible(exp)


def from_hatchet(gf) -> Experiment:
    """The Experiment of a Hatchet GraphFrame in memory: one profile, so no parameters (give it a
    point with :func:`perfcast.io.at_point`); read exactly as its ``to_json`` file would be
    (:mod:`perfcast.io.hatchet`)."""
    from .hatchet import _read_json_graph

    for attr in ("graph", "dataframe"):
        if not hasattr(gf, attr):
            raise PerfcastError(f"not a Hatchet GraphFrame: a {type(gf).__name__} has no {attr!r}", IN_MEMORY)
    df = gf.dataframe
    if not isinstance(df, pd.DataFrame) or "node" not in df.index.names:
        raise PerfcastError("the GraphFrame's dataframe is not indexed by node", IN_MEMORY, "dataframe")
    doc = {"graph": [_graph_doc(gf.graph, "GraphFrame")], "dataframe": _frame_records(df),
           "dataframe_indices": list(df.index.names),
           "inclusive_metrics": list(getattr(gf, "inc_metrics", None) or []),
           "exclusive_metrics": list(getattr(gf, "exc_metrics", None) or [])}
    exp = _read_json_graph(Path(IN_MEMORY), doc)
    exp.meta["format"] = "hatchet"
    exp.meta["sources"] = [IN_MEMORY]
    return exp


def _run_labels(exp: Experiment, keys: pd.DataFrame) -> list[tuple[str, dict]]:
    """Each (point, rep)'s profile label and metadata: the source run's file and globals when the
    experiment was read from Caliper or Thicket, else ``p=64 n=10 rep=0``."""
    runs = {}
    for run in (exp.meta.get("caliper") or {}).get("runs") or []:
        point = run.get("point") or {}
        try:
            key = (tuple(float(point[p]) for p in exp.parameters), int(run.get("rep", 0)))
        except (KeyError, TypeError, ValueError):
            continue
        runs[key] = run
    out = []
    for row in keys.itertuples(index=False):
        coords = {p: float(getattr(row, p)) for p in exp.parameters}
        rep = int(row.rep)
        run = runs.get((tuple(coords.values()), rep))
        globals_ = dict(run.get("globals") or {}) if run else {}
        label = str(run["file"]) if run and run.get("file") else " ".join(
            [f"{p}={v:g}" for p, v in coords.items()] + [f"rep={rep}"])
        globals_.update({p: _json_num(v) for p, v in coords.items()})
        out.append((label, globals_))
    return out


def to_thicket(exp: Experiment):
    """A Thicket of the experiment: its graph the calling-context tree (frames ``{"name", "type":
    "function"}``), one profile per (point, repetition), the dataframe indexed by (node, profile)
    (and rank/thread for per-location values) with a column per metric (NaN where a callpath has
    no value), the metadata table holding each profile's parameters (plus the run's metadata when
    the experiment came from Caliper or Thicket).  Inclusive metrics go to ``inc_metrics``,
    exclusive ones to ``exc_metrics``; metrics of unknown scope to neither (Thicket has no units).
    Profile ids are Thicket's hash of the label (the run's file for Caliper sources, as
    ``Thicket.from_caliperreader`` makes them)."""
    try:
        from hatchet.frame import Frame
        from hatchet.graph import Graph
        from hatchet.node import Node
        from thicket import Thicket
    except ImportError as e:
        raise PerfcastError(f"to_thicket needs Thicket ({e}): pip install 'perfcast[thicket]'") from None
    params = list(exp.parameters)
    data = exp.data
    locs = [c for c in ("rank", "thread") if c in data.columns]
    keys = data[params + ["rep"]].drop_duplicates().sort_values(params + ["rep"]).reset_index(drop=True)
    labels = _run_labels(exp, keys)
    pids = [Thicket.profile_hasher(label) for label, _ in labels]
    if len(set(pids)) != len(pids):
        raise PerfcastError("two runs share one profile label (the same file read twice?)", IN_MEMORY)

    node_of, roots = {}, []
    for i, path in enumerate(exp.tree.preorder()):
        parent = exp.tree.parent(path)
        node = Node(Frame({"name": exp.tree.name(path), "type": "function"}),
                    None if parent is None else node_of[parent], hnid=i, depth=exp.tree.depth(path))
        if parent is None:
            roots.append(node)
        else:
            node_of[parent].add_child(node)
        node_of[path] = node
    graph = Graph(roots)

    profile = data[params + ["rep"]].merge(keys.assign(profile=pids), on=params + ["rep"], how="left")["profile"]
    wide = (pd.DataFrame({"callpath": data["callpath"].astype(str).to_numpy(), "profile": profile.to_numpy(),
                          **{c: data[c].to_numpy() for c in locs},
                          "metric": data["metric"].astype(str).to_numpy(), "value": data["value"].to_numpy()})
            .pivot(index=["callpath", "profile", *locs], columns="metric", values="value"))
    wide.columns.name = None
    if not locs:  # every node in every profile, as Thicket's readers fill them (NaN where none)
        full = pd.MultiIndex.from_product([list(node_of), pids], names=["callpath", "profile"])
        wide = wide.reindex(full)
    order = [m for m in exp.metrics if m in wide.columns]
    wide = wide[order].reset_index()
    wide["node"] = wide.pop("callpath").map(node_of)
    wide["name"] = [n.frame["name"] for n in wide["node"]]
    frame = wide.set_index(["node", "profile", *locs]).sort_index()

    metadata = pd.DataFrame([m for _, m in labels], index=pd.Index(pids, name="profile"))
    inc = [m for m in order if exp.metrics[m].scope == "inclusive"]
    exc = [m for m in order if exp.metrics[m].scope == "exclusive"]
    default = next((m for m in inc + exc + order if exp.metrics[m].kind == "time"), order[0] if order else "time")
    return Thicket(graph=graph, dataframe=frame, exc_metrics=exc, inc_metrics=inc, default_metric=default,
                   metadata=metadata, profile=pids,
                   profile_mapping=OrderedDict((pid, label) for pid, (label, _) in zip(pids, labels)))


register(Reader("thicket", "Thicket JSON ensemble (Thicket.to_json): many Caliper profiles with metadata",
                (".json",), _sniff, read_thicket))

"""Reader ``pmpi``: the per-rank JSON files written by perfcast's PMPI library (one run).

Input: a directory holding ``pmpi.rank<NNNNN>.json`` (one per MPI rank, all of one run), or one
such file (that rank only).  Every rank 0..size-1 must be present in a directory.

Result: an Experiment without parameters (one run), with a ``rank`` column:

* callpaths: root ``MPI`` with one child per MPI routine the run called (``MPI->MPI_Allreduce``;
  ``MPI->MPI_Init``/``MPI_Init_thread`` carry the initialisation time), and root ``APP`` = the time
  between the return of MPI_Init and the entry of MPI_Finalize not spent in MPI routines;
* metrics (all ``inclusive``; ``MPI`` holds the sum over its routines, so ``to_exclusive`` leaves
  it 0): ``time`` (s), ``calls`` (count), ``bytes_sent``, ``bytes_recv`` and ``bytes`` (= sent +
  received), as defined in the C source's header (point-to-point: message sizes, receives their
  actual size; collectives: the buffer sizes this rank supplies and gets);
* every rank has a value for every routine any rank called (0 where it did not call it).

``meta["pmpi"]`` keeps what is not a value per (callpath, metric, rank):

* ``size``, ``library`` (MPI library version string), ``hosts``, ``untracked_requests``;
* ``histograms``: ``{routine: [[rank, bucket_low, calls], ...]}`` -- message-size histogram in
  log2 buckets: ``bucket_low`` is 0 (empty messages) or 2^k for sizes in [2^k, 2^(k+1));
* ``sent``: ``[[source, destination, messages, bytes], ...]`` point-to-point traffic as counted by
  the sender, ``received``: ``[[destination, source, messages, bytes], ...]`` as counted by the
  receiver (world ranks; APMT's source/destination data);
* ``times``: ``[[rank, init, region, mpi, app], ...]`` seconds;
* ``cart``: the MPI_Cart_create calls of the lowest rank read, ``[{"size": old group's size, "dims": [...],
  "periods": [0|1, ...]}, ...]`` (files written before the library recorded them: ``[]``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import CallTree, Experiment, Metric
from . import ReadOptions, Reader, json_int, read_text, register

FORMAT = "perfcast-pmpi"
VERSION = 1
FILE_RE = re.compile(r"^pmpi\.rank(\d+)\.json$")
METRICS = (
    Metric("time", "s", "time", "inclusive", "time inside MPI routines (APP: outside them)"),
    Metric("calls", "#", "count", "inclusive", "calls of the MPI routine"),
    Metric("bytes_sent", "bytes", "bytes", "inclusive", "bytes sent by this rank"),
    Metric("bytes_recv", "bytes", "bytes", "inclusive", "bytes received by this rank"),
    Metric("bytes", "bytes", "bytes", "inclusive", "bytes sent + received by this rank"),
)
ROOT, APP = "MPI", "APP"


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and FILE_RE.match(p.name))


def sniff(path: Path) -> bool:
    files = _files(path) if path.is_dir() else ([path] if FILE_RE.match(path.name) else [])
    if not files:
        return False
    with open(files[0], "rb") as f:
        head = f.read(256)
    return b'"format"' in head and FORMAT.encode() in head


# -- validation helpers -------------------------------------------------------------------------
def _get(obj: dict, key: str, where: str, path: Path):
    if not isinstance(obj, dict):
        raise PerfcastError("expected a JSON object", path, where or "top level")
    if key not in obj:
        raise PerfcastError("missing field", path, f"{where}.{key}" if where else key)
    return obj[key]


def _count(obj: dict, key: str, where: str, path: Path) -> int:
    v = _get(obj, key, where, path)
    field = f"{where}.{key}" if where else key
    if isinstance(v, bool) or not isinstance(v, int):
        raise PerfcastError(f"expected a whole number, got {v!r}", path, field)
    if v < 0:
        raise PerfcastError(f"negative count {v}", path, field)
    return v


def _seconds(obj: dict, key: str, where: str, path: Path, allow_negative: bool = False) -> float:
    v = _get(obj, key, where, path)
    field = f"{where}.{key}" if where else key
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise PerfcastError(f"expected a finite number of seconds, got {v!r}", path, field)
    if v < 0 and not allow_negative:
        raise PerfcastError(f"negative time {v}", path, field)
    return float(v)


def _list(obj: dict, key: str, where: str, path: Path) -> list:
    v = _get(obj, key, where, path)
    if not isinstance(v, list):
        raise PerfcastError(f"expected a list, got {type(v).__name__}", path, f"{where}.{key}" if where else key)
    return v


def _load(path: Path) -> dict:
    # a JSON document proves its own end (a cut one does not parse), so no final line end is needed
    text = read_text(path, unterminated="allow", encoding="utf-8")
    try:
        doc = json.loads(text, parse_int=json_int)
    except RecursionError:
        raise PerfcastError("JSON nested too deeply", path) from None
    except json.JSONDecodeError as e:
        raise PerfcastError(f"not valid JSON ({e.msg}, column {e.colno}); truncated or corrupt file?",
                            path, e.lineno) from None
    if not isinstance(doc, dict):
        raise PerfcastError("expected a JSON object at the top level", path)
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise PerfcastError(f"not a perfcast PMPI profile (format {fmt!r})", path, "format")
    ver = doc.get("version")
    if ver != VERSION:
        raise PerfcastError(f"unsupported version {ver!r} (this perfcast reads version {VERSION})", path, "version")
    return doc


def _parse_rank(doc: dict, path: Path) -> dict:
    rank = _count(doc, "rank", "", path)
    size = _count(doc, "size", "", path)
    if size < 1 or rank >= size:
        raise PerfcastError(f"rank {rank} is not below size {size}", path, "rank")
    t = _get(doc, "time", "", path)
    times = {k: _seconds(t, k, "time", path, allow_negative=(k == "app")) for k in ("init", "region", "mpi", "app")}
    routines = {}
    for i, r in enumerate(_list(doc, "routines", "", path)):
        where = f"routines[{i}]"
        name = _get(r, "name", where, path)
        if not isinstance(name, str) or not re.fullmatch(r"MPI_[A-Za-z_]+", name):
            raise PerfcastError(f"bad routine name {name!r}", path, f"{where}.name")
        if name in routines:
            raise PerfcastError(f"routine {name} listed twice", path, f"{where}.name")
        hist = []
        for j, pair in enumerate(_list(r, "hist", where, path)):
            field = f"{where}.hist[{j}]"
            if (not isinstance(pair, list) or len(pair) != 2
                    or any(isinstance(x, bool) or not isinstance(x, int) for x in pair)):
                raise PerfcastError(f"expected [bucket_low, calls], got {pair!r}", path, field)
            lo, n = pair
            if n < 0:
                raise PerfcastError(f"negative count {n}", path, field)
            if lo < 0 or (lo and lo & (lo - 1)):
                raise PerfcastError(f"bucket low end {lo} is not 0 or a power of 2", path, field)
            hist.append((lo, n))
        routines[name] = {
            "calls": _count(r, "calls", where, path),
            "bytes_sent": _count(r, "bytes_sent", where, path),
            "bytes_recv": _count(r, "bytes_recv", where, path),
            "time": _seconds(r, "time", where, path),
            "hist": hist,
        }
    peers = []
    for i, p in enumerate(_list(doc, "peers", "", path)):
        where = f"peers[{i}]"
        q = _count(p, "rank", where, path)
        if q >= size:
            raise PerfcastError(f"peer rank {q} is not below size {size}", path, f"{where}.rank")
        peers.append((q, *(_count(p, k, where, path) for k in ("sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes"))))
    carts = []
    for i, c in enumerate(_list(doc, "cart", "", path) if "cart" in doc else ()):
        where = f"cart[{i}]"
        dims = _list(c, "dims", where, path)
        periods = _list(c, "periods", where, path)
        if (not dims or len(periods) != len(dims)
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in dims)
                or any(v not in (0, 1) for v in periods)):
            raise PerfcastError(f"expected positive dims and 0/1 periods of one length, got {dims!r} and "
                                f"{periods!r}", path, where)
        carts.append({"size": _count(c, "size", where, path), "dims": dims, "periods": periods})
    return {"rank": rank, "size": size, "times": times, "routines": routines, "peers": peers, "cart": carts,
            "library": str(doc.get("library", "")), "host": str(doc.get("host", "")),
            "untracked": _count(doc, "untracked_requests", "", path) if "untracked_requests" in doc else 0}


def read_dir(path: Path, options: ReadOptions | None = None) -> Experiment:
    path = Path(path)
    if not path.exists():
        raise PerfcastError("no such file or directory", path)
    files = _files(path)
    if not files:
        raise PerfcastError("no pmpi.rank*.json files (did the run reach MPI_Finalize with "
                            "PERFCAST_PMPI_DIR set?)", path)
    ranks = []
    for i, f in enumerate(files):
        if options and options.progress:
            options.progress(i, len(files), f.name)
        r = _parse_rank(_load(f), f)
        m = FILE_RE.match(f.name)
        if m and int(m.group(1)) != r["rank"]:
            raise PerfcastError(f"file name says rank {int(m.group(1))} but the file holds rank {r['rank']}",
                                f, "rank")
        ranks.append(r)
    size = ranks[0]["size"]
    for r, f in zip(ranks, files):
        if r["size"] != size:
            raise PerfcastError(f"size {r['size']} differs from {size} in {files[0].name} (files of "
                                f"different runs in one directory?)", f, "size")
    if path.is_dir():
        have = {r["rank"] for r in ranks}
        missing = sorted(set(range(size)) - have)
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            raise PerfcastError(f"profiles of {len(missing)} of {size} rank(s) missing (ranks {shown}); "
                                f"a rank that did not reach MPI_Finalize writes none", path)
    ranks.sort(key=lambda r: r["rank"])

    names = sorted({n for r in ranks for n in r["routines"]}, key=_routine_order)
    tree = CallTree()
    tree.add(ROOT, None, ROOT)
    for n in names:
        tree.add(f"{ROOT}->{n}", ROOT, n)
    tree.add(APP, None, APP)

    rows_cp, rows_metric, rows_value, rows_rank = [], [], [], []

    def put(cp, metric, value, rank):
        rows_cp.append(cp)
        rows_metric.append(metric)
        rows_value.append(float(value))
        rows_rank.append(rank)

    hist_meta: dict[str, list] = {}
    sent, received, times = [], [], []
    for r in ranks:
        rk = r["rank"]
        total = {"time": 0.0, "calls": 0, "bytes_sent": 0, "bytes_recv": 0}
        for n in names:
            s = r["routines"].get(n, {"calls": 0, "bytes_sent": 0, "bytes_recv": 0, "time": 0.0, "hist": []})
            cp = f"{ROOT}->{n}"
            for k in ("time", "calls", "bytes_sent", "bytes_recv"):
                put(cp, k, s[k], rk)
                total[k] += s[k]
            put(cp, "bytes", s["bytes_sent"] + s["bytes_recv"], rk)
            for lo, c in s["hist"]:
                if c:
                    hist_meta.setdefault(n, []).append([rk, lo, c])
        for k, v in total.items():
            put(ROOT, k, v, rk)
        put(ROOT, "bytes", total["bytes_sent"] + total["bytes_recv"], rk)
        put(APP, "time", r["times"]["app"], rk)
        for q, sm, sb, rm, rb in r["peers"]:
            if sm:
                sent.append([rk, q, sm, sb])
            if rm:
                received.append([rk, q, rm, rb])
        t = r["times"]
        times.append([rk, t["init"], t["region"], t["mpi"], t["app"]])

    data = pd.DataFrame({"rep": 0, "callpath": rows_cp, "metric": rows_metric, "value": rows_value,
                         "rank": rows_rank})
    meta = {"pmpi": {
        "size": size,
        "library": ranks[0]["library"],
        "hosts": sorted({r["host"] for r in ranks}),
        "untracked_requests": sum(r["untracked"] for r in ranks),
        "histograms": hist_meta,
        "sent": sent,
        "received": received,
        "times": times,
        "cart": ranks[0]["cart"],
    }}
    return Experiment([], data, METRICS, tree, meta)


def _routine_order(name: str):
    # initialisation first, then alphabetical
    return (0 if name.startswith("MPI_Init") else 1, name)


def read(path: Path, options: ReadOptions) -> Experiment:
    return read_dir(path, options)


register(Reader("pmpi", "perfcast PMPI library output (directory of pmpi.rank*.json, one run)", (),
                sniff, read, directories=True, files=_files))

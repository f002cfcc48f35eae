"""Score-P / Scalasca CUBE4 profiles (``.cubex``), one file or a directory of runs.

A ``.cubex`` file is a tar archive holding ``anchor.xml`` (metrics, regions, the calling-context
tree of *cnodes*, the system tree of locations) and, per metric, ``<id>.index`` (which cnodes
have values, as positions in a tree enumeration) and ``<id>.data`` (one value per listed cnode
and location, possibly zlib-compressed).

How this reader maps CUBE onto an :class:`~perfcast.experiment.Experiment`
-------------------------------------------------------------------------
* **Library use.**  The binary ``.index``/``.data`` members are decoded by pycubexr's parsers
  (endianness, compressed ``ZCUBEX.DATA``, every scalar CUBE data type) and the tar archive is
  opened with pycubexr's checksum-tolerant header class when needed (CubeWriter 4.8 bug).
  ``anchor.xml`` is parsed here, because pycubexr's ``CubexParser`` refuses files with derived
  metrics or several root cnodes (assertions), drops the call-site line of cnodes and flattens
  the system tree so that the MPI rank of a location is lost (``Location.rank`` is the thread
  number within its process).
* **Callpaths.**  One callpath per cnode: the region names from the root, joined by ``->``.
  A cnode carrying CUBE parameters gets them appended as ``name (key=value, ...)``.  When
  siblings (cnodes with the same parent) still share a name, the first in document order keeps
  it and each later one gets a suffix, chosen deterministically as the first of these that is
  unique among the siblings: the source location of its *region* when the regions differ
  (``MPI_Bcast @SCOREP_Mpi_Coll.c:719``: two regions of the same name; Score-P's own style for
  OpenMP regions), its call-site line when they are the same region (``foo @line 42``), and
  finally an ordinal (``foo #2``).  No suffix uses glob characters, so
  ``Experiment.select(callpath=...)`` matches them literally.
  ``meta["cube"]["disambiguated"]`` lists every callpath that received a suffix.
* **Locations.**  Values are kept per location: ``rank`` is the rank of the location group
  (the MPI rank), ``thread`` the rank of the location within it (the thread number).  Should
  these pairs not be unique (e.g. accelerator streams sharing a process rank), the threads of
  each rank are renumbered 0, 1, ... in location order and ``meta["cube"]["threads_renumbered"]``
  says so.
* **Scope.**  Every additive metric is stored **exclusive** (scope ``exclusive``): CUBE keeps
  some metrics inclusive (``time``, PAPI counters in Score-P) and others exclusive (``visits``,
  ``bytes_sent``); inclusive ones are converted here, per location, as the value of a cnode
  minus the values of its children (exact integer arithmetic for integer types).
  :meth:`Experiment.to_inclusive` gives the inclusive values back.  Counts, bytes and values of
  unsigned types whose exclusive value comes out negative (counter noise: children above their
  parent) are set to 0, as pycubexr does for unsigned types (then ``to_inclusive`` no longer
  gives back the stored inclusive value there); ``meta["cube"]["clamped_negative"]`` counts them.
  Metrics of type ``MINDOUBLE``/``MAXDOUBLE`` (``min_time``, ``max_time``: the shortest and
  longest single visit) are not additive; their stored values are kept as they are, with
  scope ``unknown``, so that no sum over the tree is ever taken of them.
* **Sparsity.**  CUBE stores values only for the cnodes listed in a metric's index (absent
  means zero).  Rows are produced for the listed cnodes (all locations), plus, for converted
  inclusive metrics, any cnode whose exclusive value is non-zero.  In a directory of runs, a
  callpath that carries a metric in some run gets explicit zeros in the other runs whose tree
  contains it (CUBE's "absent means zero"), so that every point has the same values to model.
* **UINT64 wrap-around.**  Values of 2^64 - 1024 or more in unsigned 64-bit metrics are small
  negative counter deltas written as unsigned; like CubeLib (and pycubexr by default) they read
  as 0; ``meta["cube"]["uint64_wrapped"]`` counts them.
* **Vector metrics.**  ``NDOUBLES(n)`` becomes n metrics ``name[0]`` ... ``name[n-1]`` and
  ``COMPLEX`` two, ``name[re]`` and ``name[im]``: each component is additive, so each is
  converted to exclusive like any scalar.  (pycubexr gives a COMPLEX value as a float by its
  magnitude, which is not additive over the tree; the two parts keep all of it.)
  ``meta["cube"]["vector_metrics"]`` maps each such metric to its components.
* **Skipped metrics** (``meta["skipped_metrics"]``, a list of ``{metric, reason, runs}``):
  derived metrics (CubePL expressions, computed by CUBE on display), types that are not
  numbers or vectors of numbers (``TAU_ATOMIC``, ``RATE``, ``HISTOGRAM``, ``SCALE_FUNC``), and
  metrics that are declared but have no stored values in any run (zero everywhere).
* **Kinds.**  Unit ``sec`` is time, ``bytes`` bytes, ``occ``/``#`` and PAPI counters counts.
* **Scaling** (``ReadOptions.scaling``, ``--scaling``): Extra-P's reduction of each run's
  per-location values to one value -- ``strong`` sums the locations, ``weak`` averages them,
  ``weak-threaded`` averages the non-zero ones (:func:`reduce_scaling`).  Without it every
  location is kept and the modelling commands reduce them (``--ranks``).

Directories
-----------
A directory is searched (to three levels) for ``.cubex`` files.  A single file found is read as
one run without parameters (``perfcast import`` then names it from ``--point`` or its path).
Several files are runs whose parameter values are read from their paths below the directory,
following the Score-P/Extra-P convention (``mm.x10y1z1.r1/profile.cubex``: x=10, y=1, z=1,
repetition 1; the file name is tried first, then its directories from the innermost out).
Directory names follow Extra-P's rules (:func:`run_dir_params`): decimals (``mm.x22.5.y22.5``,
``mm.x1.1y1.1``), decimal commas (``mm.x20,5.y20,5``), no prefix (``x10y1z1``), no ``.rN``.
Runs at the same coordinates become repetitions (numbered in the order of their ``.rN``, then
path).  A run directory holding several ``.cubex`` files is read through its ``profile.cubex``
when it has one (Scalasca adds ``summary.cubex``, ``scout.cubex``, ...; the others are listed in
``meta["cube"]["ignored_files"]``), refused when it holds Scalasca reports without one, and
otherwise, as in Extra-P, each file is a repetition (``mm.x1y1z1/profile1.cubex``,
``profile2.cubex``).  Parameters that never vary between runs are dropped, as
Extra-P does (``mm.x10y1z1`` ... ``mm.x2000y1z1`` has the one parameter x), and kept in
``meta["cube"]["constant_parameters"]``.
"""

from __future__ import annotations

import gzip
import math
import re
import struct
import tarfile
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from xml.etree import ElementTree as ET

import numpy as np
import pandas as pd
from pycubexr.parsers.data_parser import parse_data
from pycubexr.parsers.index_parser import parse_index
from pycubexr.utils.custom_tarinfo import TarInfoWithoutCheck
from pycubexr.utils.exceptions import CorruptIndexError, UnsupportedMetricFormatError

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric, guess_kind
from ..lazy import LazyModule
from . import ReadOptions, Reader, register
from .paths import parse_name

sp = LazyModule("scipy.sparse")   # imported where a sparse matrix is made (perfcast.lazy)

__all__ = ["read_cube"]

#: scalar CUBE data types (the others hold several numbers per value)
_SCALAR_TYPES = {
    "CHAR", "DOUBLE", "FLOAT", "INT", "INT8", "INT16", "INT32", "INT64", "INTEGER", "UINT8", "UINT16",
    "UINT32", "UINT64", "SHORT INT", "SIGNED INT", "SIGNED INTEGER", "SIGNED SHORT INT", "UNSIGNED INT",
    "UNSIGNED INTEGER", "UNSIGNED SHORT INT", "MINDOUBLE", "MAXDOUBLE",
}
_EXTREMA_TYPES = {"MINDOUBLE", "MAXDOUBLE"}
#: CUBE data types that hold something else than numbers per value (skipped, named in meta)
_OTHER_DTYPES = re.compile(r"^(TAU_ATOMIC|RATE|SCALE_FUNC|HISTOGRAM\s*\(\s*\d{1,4}\s*\))$")
_STORED_TYPES = {"EXCLUSIVE", "INCLUSIVE"}
#: why a metric declared in a complete archive without values is skipped: CUBE writes none when zero
_ZERO_EVERYWHERE = "declared but no values stored (zero everywhere)"
#: CUBE metric types whose values CUBE computes (CubePL), none stored
_DERIVED_TYPES = {"SIMPLE", "POSTDERIVED", "PREDERIVED_INCLUSIVE", "PREDERIVED_EXCLUSIVE"}
#: the largest UINT64 that survives CubeLib's round trip through double (larger ones read as 0)
_MAX_UINT64 = np.uint64(0xFFFF_FFFF_FFFF_FBFF)
_INT64_MAX = np.iinfo(np.int64).max
#: what can go wrong while decoding a damaged archive
_DECODE_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, struct.error, ValueError, TypeError,
                  AssertionError, KeyError, IndexError, CorruptIndexError, UnsupportedMetricFormatError)
_DEPTH = 3


# ---------------------------------------------------------------------------------------------
# anchor.xml
# ---------------------------------------------------------------------------------------------
@dataclass
class _CubeMetric:
    id: int
    name: str
    display: str
    descr: str
    type: str
    dtype: str
    unit: str
    parent: str | None
    cubepl: bool


@dataclass
class _Anchor:
    attrs: dict[str, str]
    metrics: list[_CubeMetric]
    #: cnodes in document preorder: parent position (-1 for roots), frame label
    parent: np.ndarray
    labels: list[str]
    children: list[list[int]]
    roots: list[int]
    cube_ids: np.ndarray
    #: per location (in data column order): rank of its group, its own rank
    loc_rank: np.ndarray
    loc_thread: np.ndarray
    notes: dict = field(default_factory=dict)


def _int(text, what: str, path: Path) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        raise PerfcastError(f"anchor.xml: {what} is not an integer ({text!r})", path, "anchor.xml") from None


def _parse_anchor(raw: bytes, path: Path) -> _Anchor:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise PerfcastError(f"anchor.xml is damaged (gzip: {e})", path, "anchor.xml") from None
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise PerfcastError(f"anchor.xml is not well-formed XML ({e})", path,
                            f"anchor.xml line {e.position[0]}") from None
    if root.tag != "cube":
        raise PerfcastError(f"anchor.xml: root element is <{root.tag}>, not <cube>", path, "anchor.xml")
    attrs = {str(a.get("key")): str(a.get("value", "")) for a in root.findall("attr") if a.get("key")}

    # metrics: a tree (nested <metric>)
    metrics: list[_CubeMetric] = []
    mroot = root.find("metrics")
    if mroot is None:
        raise PerfcastError("anchor.xml has no <metrics> section", path, "anchor.xml")
    stack = [(m, None) for m in reversed(mroot.findall("metric"))]
    while stack:
        m, parent = stack.pop()
        name = (m.findtext("uniq_name") or "").strip()
        if not name:
            raise PerfcastError("anchor.xml: a metric without <uniq_name>", path, "anchor.xml")
        metrics.append(_CubeMetric(
            id=_int(m.get("id"), f"id of metric {name!r}", path), name=name,
            display=(m.findtext("disp_name") or "").strip(), descr=(m.findtext("descr") or "").strip(),
            type=(m.get("type") or "").strip().upper(), dtype=(m.findtext("dtype") or "").strip().upper(),
            unit=(m.findtext("uom") or "").strip(), parent=parent, cubepl=m.find("cubepl") is not None))
        stack.extend((c, name) for c in reversed(m.findall("metric")))

    # regions and cnodes
    program = root.find("program")
    if program is None:
        raise PerfcastError("anchor.xml has no <program> section", path, "anchor.xml")
    regions: dict[int, tuple[str, str, int]] = {}
    for r in program.findall("region"):
        rid = _int(r.get("id"), "region id", path)
        try:
            begin = int(r.get("begin", "-1"))
        except ValueError:
            begin = -1
        regions[rid] = ((r.findtext("name") or "").strip() or f"region {rid}", r.get("mod") or "", begin)
    order: list[ET.Element] = []
    parent_pos: list[int] = []
    cstack = [(c, -1) for c in reversed(program.findall("cnode"))]
    while cstack:
        c, par = cstack.pop()
        pos = len(order)
        order.append(c)
        parent_pos.append(par)
        cstack.extend((k, pos) for k in reversed(c.findall("cnode")))
    if not order:
        raise PerfcastError("anchor.xml: the call tree is empty (no <cnode>)", path, "anchor.xml")
    n = len(order)
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for pos, par in enumerate(parent_pos):
        (roots if par < 0 else children[par]).append(pos)
    cube_ids = np.empty(n, dtype=np.int64)
    region_of = np.empty(n, dtype=np.int64)
    lines: list[int | None] = []
    base: list[str] = []
    for pos, c in enumerate(order):
        cube_ids[pos] = _int(c.get("id"), "cnode id", path)
        rid = _int(c.get("calleeId"), f"calleeId of cnode {cube_ids[pos]}", path)
        if rid not in regions:
            raise PerfcastError(f"anchor.xml: cnode {cube_ids[pos]} calls region {rid}, which is not defined",
                                path, "anchor.xml")
        region_of[pos] = rid
        line = c.get("line")
        lines.append(int(line) if line is not None and line.strip().lstrip("-").isdigit() else None)
        label = regions[rid][0]
        params = [(p.get("parkey"), p.get("parvalue")) for p in c.findall("parameter") if p.get("parkey")]
        if params:
            label += " (" + ", ".join(f"{k}={v}" for k, v in params) + ")"
        base.append(label)
    if len(set(cube_ids.tolist())) != n:
        raise PerfcastError("anchor.xml: cnode ids repeat", path, "anchor.xml")
    labels, renamed = _disambiguate(base, children, roots, region_of, lines, regions)

    loc_rank, loc_thread, notes = _parse_system(root, path)
    notes = dict(notes)
    if renamed:
        notes["renamed_cnodes"] = renamed
    return _Anchor(attrs, metrics, np.asarray(parent_pos, dtype=np.int64), labels, children, roots,
                   cube_ids, loc_rank, loc_thread, notes)


def _disambiguate(base, children, roots, region_of, lines, regions):
    """Frame labels unique among siblings (see the module docstring for the rule)."""
    labels = list(base)
    renamed: list[int] = []
    for group in [roots, *children]:
        if len(group) < 2:
            continue
        first: dict[str, int] = {}
        used = {base[p] for p in group}
        for p in group:
            name = base[p]
            if name not in first:
                first[name] = p
                continue
            f = first[name]
            candidates = []
            if region_of[p] != region_of[f]:
                _, mod, begin = regions[int(region_of[p])]
                where = PurePath(mod).name if mod else ""
                if where and begin >= 0:
                    where += f":{begin}"
                candidates.append(where or f"region {int(region_of[p])}")
            if lines[p] is not None:
                candidates.append(f"line {lines[p]}")  # call site
            k = 2
            while True:
                for c in candidates:
                    label = f"{name} @{c}"
                    if label not in used:
                        break
                else:
                    label = f"{name} #{k}"
                    k += 1
                    if label in used:
                        continue
                break
            used.add(label)
            labels[p] = label
            renamed.append(p)
    return labels, renamed


def _parse_system(root, path: Path):
    system = root.find("system")
    if system is None:
        raise PerfcastError("anchor.xml has no <system> section", path, "anchor.xml")
    ids, group_rank, own_rank = [], [], []
    # walk in document order, remembering the enclosing location group (Cube >= 4.0 tags, and the
    # process/thread tags of early CUBE 4 files)
    stack = [(e, None) for e in reversed(list(system))]
    while stack:
        e, grank = stack.pop()
        if e.tag in ("locationgroup", "process"):
            grank = _int(e.findtext("rank"), "rank of a location group", path)
        elif e.tag in ("location", "thread"):
            if grank is None:
                raise PerfcastError("anchor.xml: a location outside any location group", path, "anchor.xml")
            ids.append(_int(e.get("Id", e.get("id")), "location Id", path))
            group_rank.append(grank)
            own_rank.append(_int(e.findtext("rank"), "rank of a location", path))
            continue
        stack.extend((c, grank) for c in reversed(list(e)))
    if not ids:
        raise PerfcastError("anchor.xml: the system tree has no locations", path, "anchor.xml")
    notes = {}
    ids_a = np.asarray(ids, dtype=np.int64)
    ranks = np.asarray(group_rank, dtype=np.int64)
    threads = np.asarray(own_rank, dtype=np.int64)
    if np.array_equal(np.sort(ids_a), np.arange(len(ids_a))):
        # data columns follow the location ids
        order = np.argsort(ids_a, kind="stable")
        ranks, threads = ranks[order], threads[order]
    else:
        notes["locations_in_document_order"] = True
    pairs = pd.MultiIndex.from_arrays([ranks, threads])
    if pairs.has_duplicates:
        threads = pd.Series(ranks).groupby(ranks).cumcount().to_numpy().astype(np.int64)
        notes["threads_renumbered"] = True
    return ranks, threads, notes


# ---------------------------------------------------------------------------------------------
# one file
# ---------------------------------------------------------------------------------------------
@dataclass
class _Run:
    """One profile: callpath records in preorder and value blocks per metric."""

    records: list[tuple[str, str | None, str]]
    paths: list[str]
    rank: np.ndarray
    thread: np.ndarray
    #: metric name -> (callpath positions into ``paths``, values [rows x locations])
    blocks: dict[str, tuple[np.ndarray, np.ndarray]]
    metrics: dict[str, Metric]
    skipped: dict[str, str]
    attrs: dict[str, str]
    notes: dict


def _open_tar(path: Path) -> tuple[tarfile.TarFile, bool]:
    try:
        return tarfile.open(path), False
    except tarfile.ReadError:
        pass
    except (OSError, EOFError) as e:
        raise PerfcastError(f"cannot open ({e})", path) from None
    # CubeWriter 4.8 wrote wrong tar header checksums: read without checking them
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tar = tarfile.open(path, tarinfo=TarInfoWithoutCheck)
            tar.getmembers()
        return tar, True
    except (tarfile.TarError, OSError, EOFError, ValueError, UnicodeDecodeError):
        raise PerfcastError("not a CUBE4 file (not a readable tar archive)", path) from None


def _member(tar: tarfile.TarFile, name: str, path: Path) -> bytes:
    try:
        f = tar.extractfile(name)
        if f is None:
            raise PerfcastError(f"archive member {name} is not a file", path, name)
        with f:
            return f.read()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise PerfcastError(f"archive member {name} is damaged or truncated ({e})", path, name) from None


def _complete(path: Path, tar: tarfile.TarFile) -> bool:
    """True when the archive ends with tar's end-of-archive marker (a zero block after the last member)."""
    members = tar.getmembers()
    if not members:
        return False
    last = members[-1]
    end = last.offset_data + -(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
    with open(path, "rb") as f:
        f.seek(end)
        tail = f.read(tarfile.BLOCKSIZE)
    return len(tail) == tarfile.BLOCKSIZE and not tail.strip(b"\0")


def _read_file(path: Path) -> _Run:
    tar, bad_checksums = _open_tar(path)
    with tar:
        try:
            names = set(tar.getnames())
            complete = _complete(path, tar)
        except (tarfile.TarError, OSError, EOFError) as e:
            raise PerfcastError(f"the archive is damaged or truncated ({e})", path) from None
        if "anchor.xml" not in names:
            if not complete:
                raise PerfcastError("the archive is truncated or damaged (it ends before anchor.xml)", path)
            raise PerfcastError("not a CUBE4 file (the archive has no anchor.xml)", path)
        anchor = _parse_anchor(_member(tar, "anchor.xml", path), path)
        run = _build(anchor, tar, names, path, complete)
    if bad_checksums:
        run.notes["tar_checksums_ignored"] = True
    return run


def _enumerations(anchor: _Anchor) -> dict[str, np.ndarray]:
    """Tree index -> cnode position, for exclusive (depth-first) and inclusive (wide) metrics.

    CUBE lists the cnodes of an exclusive metric in depth-first preorder; those of an inclusive
    metric in an order where all children of a node are numbered together, nodes being visited
    depth-first (pycubexr's "wide" enumeration; verified here against CubeLib dumps).
    """
    n = len(anchor.labels)
    wide: list[int] = []
    for r in anchor.roots:
        wide.append(r)
        stack = [r]
        while stack:
            kids = anchor.children[stack.pop()]
            wide.extend(kids)
            stack.extend(reversed(kids))
    return {"EXCLUSIVE": np.arange(n, dtype=np.int64), "INCLUSIVE": np.asarray(wide, dtype=np.int64)}


_NDOUBLES = re.compile(r"^NDOUBLES\s*\(\s*(\d{1,4})\s*\)$")


def _vector_width(dtype: str) -> int | None:
    """Components of a vector type read as several scalar metrics (NDOUBLES(n), COMPLEX), else None."""
    if dtype == "COMPLEX":
        return 2
    m = _NDOUBLES.match(dtype)
    if m and 1 <= int(m.group(1)) <= 1024:
        return int(m.group(1))
    return None


def _kind(m: _CubeMetric) -> str:
    u = m.unit.lower()
    if m.name.upper().startswith(("PAPI_", "PEVT_")) or u in ("#", "occ"):
        return "count"
    if u in ("sec", "s", "seconds"):
        return "time"
    if u in ("bytes", "byte"):
        return "bytes"
    return guess_kind(m.name, m.unit)


def _build(anchor: _Anchor, tar: tarfile.TarFile, names: set[str], path: Path, complete: bool = True) -> _Run:
    n = len(anchor.labels)
    nloc = len(anchor.loc_rank)
    paths: list[str] = []
    records = []
    for pos in range(n):
        par = int(anchor.parent[pos])
        p = anchor.labels[pos] if par < 0 else paths[par] + SEP + anchor.labels[pos]
        paths.append(p)
        records.append((p, None if par < 0 else paths[par], anchor.labels[pos]))
    if len(set(paths)) != n:
        raise PerfcastError("two cnodes give the same callpath (a region name contains '->')", path, "anchor.xml")
    enums = _enumerations(anchor)
    # C[i, j] = 1 when cnode j is a child of cnode i
    child = np.flatnonzero(anchor.parent >= 0)
    C = sp.csr_matrix((np.ones(len(child), dtype=np.int64), (anchor.parent[child], child)), shape=(n, n))

    blocks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    metrics: dict[str, Metric] = {}
    skipped: dict[str, str] = {}
    wrapped: dict[str, int] = {}
    clamped: dict[str, int] = {}
    demoted: list[str] = []
    extremes: dict[str, str] = {}
    vector_metrics: dict[str, list[str]] = {}
    declared = {m.name for m in anchor.metrics}
    metric_tree = {m.name: m.parent for m in anchor.metrics if m.parent}
    for m in anchor.metrics:
        if m.name in metrics or m.name in skipped:
            raise PerfcastError(f"anchor.xml: metric {m.name!r} is declared twice", path, "anchor.xml")
        # a type or data type CUBE does not define is damage: skipped, the metric would vanish from
        # this run only (in a set of runs, read as missing there)
        if m.type not in _STORED_TYPES and m.type not in _DERIVED_TYPES:
            raise PerfcastError(f"metric {m.name!r} has type {m.type or '(none)'!r}, not a CUBE "
                                f"metric type ({', '.join(sorted(_STORED_TYPES | _DERIVED_TYPES))})", path,
                                "anchor.xml")
        if m.type not in _STORED_TYPES or m.cubepl:
            skipped[m.name] = (f"derived metric (type {m.type or 'none'}): computed by CUBE from a "
                               f"CubePL expression, no values stored")
            continue
        width = _vector_width(m.dtype)
        if m.dtype not in _SCALAR_TYPES and width is None:
            if not _OTHER_DTYPES.match(m.dtype):
                raise PerfcastError(f"metric {m.name!r} has data type {m.dtype or '(none)'!r}, not a "
                                    f"CUBE data type", path, "anchor.xml")
            skipped[m.name] = f"values of type {m.dtype} are not single numbers"
            continue
        index_name, data_name = f"{m.id}.index", f"{m.id}.data"
        if index_name not in names or data_name not in names:
            if not complete or (index_name in names) != (data_name in names):
                lacking = data_name if index_name in names else index_name
                raise PerfcastError(f"the archive is truncated or damaged: metric {m.name!r} lacks {lacking}",
                                    path, lacking)
            skipped[m.name] = _ZERO_EVERYWHERE
            continue
        try:
            idx = parse_index(index_file=_BytesReader(_member(tar, index_name, path)))
        except _DECODE_ERRORS as e:
            raise PerfcastError(f"index of metric {m.name!r} is damaged ({_why(e)})", path, index_name) from None
        try:
            raw = parse_data(data_file=_BytesReader(_member(tar, data_name, path)),
                             data_type="DOUBLE" if m.dtype in _EXTREMA_TYPES else m.dtype,
                             endianness_format_char=idx.endianness_format, allow_full_uint64_values=True)
        except _DECODE_ERRORS as e:
            raise PerfcastError(f"values of metric {m.name!r} are damaged ({_why(e)})", path, data_name) from None
        raw = np.asarray(getattr(raw, "_values", raw))  # COMPLEX comes wrapped in pycubexr's ComplexValues
        tree_idx = np.asarray(idx.tree_indices, dtype=np.int64)
        if width is not None:
            # a vector per value: one scalar metric per component (see the module docstring)
            if m.dtype == "COMPLEX":
                ok = raw.ndim == 1 and np.iscomplexobj(raw)
                parts = [("re", raw.real), ("im", raw.imag)] if ok else []
            else:
                ok = raw.ndim == 2 and raw.shape[1] == width
                parts = [(str(i), raw[:, i]) for i in range(width)] if ok else []
            if not ok or raw.shape[0] != tree_idx.size * nloc:
                raise PerfcastError(f"metric {m.name!r}: {raw.shape[0] if raw.ndim else 0} values for "
                                    f"{tree_idx.size} cnodes x {nloc} locations; the data is truncated or "
                                    f"damaged", path, data_name)
            parts = [(f"{m.name}[{suffix}]", np.ascontiguousarray(a, dtype=np.float64)) for suffix, a in parts]
            clash = next((name for name, _ in parts if name in declared), None)
            if clash is not None:
                raise PerfcastError(f"anchor.xml: component {clash!r} of metric {m.name!r} has the name of "
                                    f"another metric", path, "anchor.xml")
            vector_metrics[m.name] = [name for name, _ in parts]
        else:
            if raw.ndim != 1 or raw.size != tree_idx.size * nloc:
                raise PerfcastError(f"metric {m.name!r}: {raw.size} values for {tree_idx.size} cnodes x {nloc} "
                                    f"locations; the data is truncated or damaged", path, data_name)
            parts = [(m.name, raw)]
        enum = enums[m.type]
        if tree_idx.size and (tree_idx.min() < 0 or tree_idx.max() >= n):
            raise PerfcastError(f"metric {m.name!r}: the index names cnodes that do not exist", path, index_name)
        rows0 = enum[tree_idx]
        if len(np.unique(rows0)) != rows0.size:
            raise PerfcastError(f"metric {m.name!r}: the index lists a cnode twice", path, index_name)
        for name, part in parts:
            rows = rows0
            vals = part.reshape(tree_idx.size, nloc)
            if vals.dtype == np.uint64:
                big = vals > _MAX_UINT64
                if big.any():
                    wrapped[name] = int(big.sum())
                    vals = np.where(big, np.uint64(0), vals)
            kind = _kind(m)
            extrema = m.dtype in _EXTREMA_TYPES
            if m.type == "INCLUSIVE" and not extrema:
                unsigned = np.issubdtype(vals.dtype, np.unsignedinteger)
                rows, vals = _exclusive(rows, vals, C, n)
                if kind in ("count", "bytes") or unsigned:
                    neg = vals < 0
                    if neg.any():
                        clamped[name] = int(neg.sum())
                        vals = np.where(neg, 0.0, vals)
            else:
                vals = vals.astype(np.float64)
            if not np.isfinite(vals).all():
                raise PerfcastError(f"metric {name!r} holds non-finite values (NaN or inf)", path, data_name)
            if kind in ("count", "bytes") and (vals < 0).any():
                kind = "other"
                demoted.append(name)
            order = np.argsort(rows, kind="stable")
            blocks[name] = (rows[order], vals[order])
            descr = m.descr or m.display
            if extrema:
                descr = (descr + "; " if descr else "") + "extreme of single visits, not additive over the call tree"
            if m.parent:
                descr = (descr + "; " if descr else "") + f"sub-metric of {m.parent}"
            if name != m.name:
                what = ("real part" if name.endswith("[re]") else "imaginary part" if name.endswith("[im]")
                        else f"component {name[len(m.name) + 1:-1]}")
                descr = (descr + "; " if descr else "") + f"{what} of {m.name} ({m.dtype})"
            metrics[name] = Metric(name, m.unit, kind, "unknown" if extrema else "exclusive", descr)
            if extrema:
                extremes[name] = "min" if m.dtype == "MINDOUBLE" else "max"
    notes = dict(anchor.notes)
    renamed = notes.pop("renamed_cnodes", [])
    if renamed:
        notes["disambiguated"] = [paths[p] for p in renamed]
    if wrapped:
        notes["uint64_wrapped"] = wrapped
    if clamped:
        notes["clamped_negative"] = clamped
    if demoted:
        notes["negative_counts_kind_other"] = demoted
    if metric_tree:
        notes["metric_parents"] = metric_tree
    if extremes:
        notes["extremes"] = extremes
    if vector_metrics:
        notes["vector_metrics"] = vector_metrics
    return _Run(records, paths, anchor.loc_rank, anchor.loc_thread, blocks, metrics, skipped, anchor.attrs, notes)


def _why(e: BaseException) -> str:
    """What a decoding error of pycubexr's says, in words (not the exception's class)."""
    msg = str(e).strip()
    if isinstance(e, AssertionError):       # pycubexr asserts the data file's header
        return "its header is not a CUBE data header"
    if "multiple of element size" in msg:
        return "its length is not a whole number of values: truncated"
    if "size of the index list" in msg:
        return "the index does not match the number of call-tree nodes"
    return msg or "it cannot be decoded"


class _BytesReader:
    """The file-like object pycubexr's parsers expect (read, peek, closed) over bytes."""

    def __init__(self, data: bytes):
        self._data = data
        self._pos = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else min(len(self._data), self._pos + size)
        out = self._data[self._pos:end]
        self._pos = end
        return out

    def peek(self, size: int = 1) -> bytes:
        return self._data[self._pos:self._pos + max(size, 1)]


def _exclusive(rows: np.ndarray, vals: np.ndarray, C: sp.csr_matrix, n: int):
    """Inclusive values on ``rows`` -> exclusive values (cnode minus its children), per location."""
    if np.issubdtype(vals.dtype, np.integer) and (vals.dtype != np.uint64 or vals.max(initial=0) <= _INT64_MAX):
        work = np.int64
    else:
        work = np.float64
    full = np.zeros((n, vals.shape[1]), dtype=work)
    full[rows] = vals.astype(work)
    excl = full - np.asarray(C.astype(work) @ full)
    keep = np.zeros(n, dtype=bool)
    keep[rows] = True
    keep |= (excl != 0).any(axis=1)
    out_rows = np.flatnonzero(keep)
    return out_rows, excl[out_rows].astype(np.float64)


# ---------------------------------------------------------------------------------------------
# runs -> experiment
# ---------------------------------------------------------------------------------------------
def _experiment(runs: list[_Run], coords: list[dict[str, float]], reps: list[int], parameters: list[str],
                sources: list[str] | None) -> Experiment:
    # global callpath codes and tree
    tree = CallTree()
    code: dict[str, int] = {}
    run_codes: list[np.ndarray] = []
    for run in runs:
        for rec in run.records:
            if rec[0] not in code:
                tree.add(*rec)
                code[rec[0]] = len(code)
        run_codes.append(np.fromiter((code[p] for p in run.paths), dtype=np.int64, count=len(run.paths)))
    categories = list(code)

    # metrics must agree between runs
    metrics: dict[str, Metric] = {}
    for run, src in zip(runs, sources or [None] * len(runs)):
        for name, m in run.metrics.items():
            if name in metrics and metrics[name] != m:
                old = metrics[name]
                if (old.unit, old.scope) != (m.unit, m.scope):
                    raise PerfcastError(f"metric {name!r} differs between runs (unit {old.unit!r}, scope "
                                        f"{old.scope} vs unit {m.unit!r}, scope {m.scope})", src)
                # a count demoted to 'other' in one run (negative values) is 'other' everywhere
                metrics[name] = Metric(name, old.unit, "other" if "other" in (old.kind, m.kind) else old.kind,
                                       old.scope, old.description)
            metrics.setdefault(name, m)
    metric_names = list(metrics)
    metric_code = {n: i for i, n in enumerate(metric_names)}

    # support of each metric across runs: CUBE's "absent means zero" made explicit
    support: dict[str, np.ndarray] = {}
    if len(runs) > 1:
        for name in metric_names:
            support[name] = np.unique(np.concatenate(
                [rc[run.blocks[name][0]] for run, rc in zip(runs, run_codes) if name in run.blocks]))

    cols: dict[str, list[np.ndarray]] = {k: [] for k in (*parameters, "rep", "callpath", "metric", "value",
                                                         "rank", "thread")}
    for i, (run, rc) in enumerate(zip(runs, run_codes)):
        nloc = len(run.rank)
        for name in metric_names:
            if name in run.blocks:
                rows, vals = run.blocks[name]
                cps = rc[rows]
            else:
                cps = np.empty(0, dtype=np.int64)
                vals = np.empty((0, nloc))
            # CUBE stores no values of a cnode where a metric is zero: zero where this run has the
            # metric; a run without it (not declared, or not stored) lacks it: missing, never zero
            if name in support and (name in run.blocks or run.skipped.get(name) == _ZERO_EVERYWHERE):
                missing = np.setdiff1d(np.intersect1d(support[name], rc), cps)
                if missing.size:
                    cps = np.concatenate([cps, missing])
                    vals = np.vstack([vals, np.zeros((missing.size, nloc))])
            if cps.size == 0:
                continue
            nval = cps.size * nloc
            cols["callpath"].append(np.repeat(cps, nloc))
            cols["metric"].append(np.full(nval, metric_code[name], dtype=np.int64))
            cols["value"].append(vals.reshape(-1))
            cols["rank"].append(np.tile(run.rank, cps.size))
            cols["thread"].append(np.tile(run.thread, cps.size))
            cols["rep"].append(np.full(nval, reps[i], dtype=np.int64))
            for p in parameters:
                cols[p].append(np.full(nval, coords[i][p], dtype=np.float64))
    if not cols["value"]:
        raise PerfcastError("no metric with values in the CUBE profile(s)", sources[0] if sources else None)
    data = {k: np.concatenate(v) for k, v in cols.items()}
    df = pd.DataFrame({
        **{p: data[p] for p in parameters},
        "rep": data["rep"],
        "callpath": pd.Categorical.from_codes(data["callpath"], categories=categories),
        "metric": pd.Categorical.from_codes(data["metric"], categories=metric_names),
        "value": data["value"],
        "rank": data["rank"],
        "thread": data["thread"],
    })

    skipped: dict[tuple[str, str], int] = {}
    for run in runs:
        for name, why in run.skipped.items():
            if name in metrics:
                continue  # values in other runs: zero here (_ZERO_EVERYWHERE) or missing (warned below)
            skipped[(name, why)] = skipped.get((name, why), 0) + 1
    lacking: dict[str, list[int]] = {}
    if len(runs) > 1:
        for i, run in enumerate(runs):
            for name in metric_names:
                if name not in run.blocks and run.skipped.get(name) != _ZERO_EVERYWHERE:
                    lacking.setdefault(name, []).append(i)
    warns = []
    for name, idx in lacking.items():
        where = sources[idx[0]] if sources else f"run {idx[0] + 1}"
        warns.append(f"{where}: metric {name!r} has no values in {len(idx)} of the {len(runs)} runs "
                        f"({_run_why(runs[idx[0]], name)}): missing there, not zero")
    cube: dict = {"attrs": runs[0].attrs}
    for key in ("tar_checksums_ignored", "threads_renumbered", "locations_in_document_order"):
        if any(r.notes.get(key) for r in runs):
            cube[key] = True
    for key in ("uint64_wrapped", "clamped_negative"):
        total: dict[str, int] = {}
        for r in runs:
            for name, k in r.notes.get(key, {}).items():
                total[name] = total.get(name, 0) + k
        if total:
            cube[key] = total
    dis = sorted({p for r in runs for p in r.notes.get("disambiguated", [])})
    if dis:
        cube["disambiguated"] = dis
    parents = {k: v for r in runs for k, v in r.notes.get("metric_parents", {}).items() if k in metrics}
    if parents:
        cube["metric_parents"] = parents
    vectors = {k: v for r in runs for k, v in r.notes.get("vector_metrics", {}).items()}
    if vectors:
        cube["vector_metrics"] = vectors
    extremes = {k: v for r in runs for k, v in r.notes.get("extremes", {}).items() if k in metrics}
    if extremes:
        cube["extremes"] = extremes
    demoted = sorted({n for r in runs for n in r.notes.get("negative_counts_kind_other", [])})
    if demoted:
        cube["negative_counts_kind_other"] = demoted
    meta: dict = {"cube": cube,
                  "skipped_metrics": [{"metric": n, "reason": w, "runs": k} for (n, w), k in skipped.items()]}
    if warns:
        meta["warnings"] = warns
    if sources is not None and len(runs) > 1:
        cube["runs"] = [{"path": s, "rep": int(r), **{p: _num(c[p]) for p in parameters}}
                        for s, r, c in zip(sources, reps, coords)]
    return Experiment(parameters, df, metrics.values(), tree, meta)


def _run_why(run: _Run, name: str) -> str:
    """Why ``run`` has no values of metric ``name``."""
    return run.skipped.get(name) or "not declared"


#: Extra-P's scaling types (``--scaling``), as perfcast spells them, and how each reduces a run
SCALINGS = {
    "weak": "mean over all locations (ranks x threads)",
    "weak-threaded": "mean over the locations with a non-zero value (0 when all are zero)",
    "strong": "sum over all locations",
}


def reduce_scaling(exp: Experiment, scaling: str, path: Path | None = None) -> Experiment:
    """One value per run, callpath and metric from the per-location values, as Extra-P does.

    Extra-P 4.2.5 (``CubeFileReader2``) reduces the exclusive value of every location
    (thread of every process): ``strong`` sums them, ``weak`` averages them all, and
    ``weak_threaded`` averages the non-zero ones (zeros are the threads that never ran the
    callpath, e.g. the idle workers outside an OpenMP region; when every location is zero the
    value is 0).  perfcast then models the repetitions' values.  Extra-P pools the locations of
    all repetitions before taking its mean or median; for one repetition per point, or the same
    locations in every repetition, the mean is the same.  Metrics holding extremes (``min_time``,
    ``max_time``) are reduced by their extreme (min/max over the locations) in every mode,
    where Extra-P would sum or average them.
    """
    key = scaling.replace("_", "-").lower()
    if key not in SCALINGS:
        raise PerfcastError(f"unknown scaling {scaling!r}; use one of {', '.join(SCALINGS)}", path)
    if not exp.has_locations:
        return exp
    d = exp.data
    loc = [c for c in ("rank", "thread") if c in d.columns]
    keys = [c for c in d.columns if c not in (*loc, "value")]
    g = d.groupby(keys, observed=True, sort=False)["value"]
    if key == "strong":
        out = g.sum()
    elif key == "weak":
        out = g.mean()
    else:
        nz = d["value"].ne(0)
        s = d["value"].where(nz, 0.0).groupby([d[k] for k in keys], observed=True, sort=False).sum()
        n = nz.groupby([d[k] for k in keys], observed=True, sort=False).sum()
        out = (s / n.where(n > 0, 1)).where(n > 0, 0.0)
    out = out.reset_index()
    extremes = exp.meta.get("cube", {}).get("extremes", {})
    for name, how in extremes.items():
        sel = d["metric"] == name
        if not sel.any():
            continue
        ext = d[sel].groupby(keys, observed=True, sort=False)["value"].agg(how).reset_index()
        out = pd.concat([out[out["metric"] != name], ext], ignore_index=True)
    out = out.sort_values(keys, kind="stable").reset_index(drop=True)
    meta = dict(exp.meta)
    meta["cube"] = {**meta.get("cube", {}), "scaling": {"type": key, "reduction": SCALINGS[key],
                                                      "locations": int(d[loc].drop_duplicates().shape[0])}}
    meta["history"] = [*meta.get("history", []), f"locations reduced for {key} scaling: {SCALINGS[key]}"]
    return Experiment(exp.parameters, out, exp.metrics.values(), exp.tree, meta)


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


# ---------------------------------------------------------------------------------------------
# directories
# ---------------------------------------------------------------------------------------------
def _find_cubex(root: Path) -> list[Path]:
    found = []
    for depth in range(_DEPTH + 1):
        pattern = "/".join(["*"] * depth + ["*.cubex"])
        found.extend(p for p in root.glob(pattern)
                     if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    return sorted(found)


_RUN_VALUE = re.compile(r"([0-9.,]+)")
_RUN_NAME = re.compile(r"^[A-Za-z_]+$")
_RUN_REP = re.compile(r"\.r(\d+)$")


def run_dir_params(name: str) -> tuple[dict[str, float], int | None] | None:
    """Parameters and repetition from a run directory's name, by Extra-P's CUBE-set rules.

    Extra-P (``AbstractDirectoryReader._determine_parameters_from_paths``) drops everything up
    to the first ``.`` (the prefix, optional: ``x10y1z1`` has none) and the repetition suffix
    ``.r<N>``; the rest alternates names and values, a value being a run of digits, ``.`` and
    ``,``.  A value's ``,`` is a decimal comma and a trailing ``.`` or ``,`` separates it from
    the next name, so all of these work: ``mm.x10y1z1.r1``, ``mm.x1.1y1.1z1.1``,
    ``mm.x22.5.y22.5.z1.25.r1``, ``mm.x20,5.y20,5.z1,5.r1``, ``mm.x21.5,y21,5,z1.15.r1``,
    ``mm.x25.y25.z1.r1``, ``x10y1z1``.  Stricter than Extra-P (so that a stray directory such
    as ``scorep-20240101_1200_42`` is not taken for a run): names are letters and ``_`` only,
    each at most once, the name part must end with a value, and the repetition suffix is only
    ``.r<digits>`` at the end (Extra-P cuts at the first ``.r`` anywhere).
    """
    rep = None
    m = _RUN_REP.search(name)
    if m:
        rep = int(m.group(1))
        name = name[:m.start()]
    dot = name.find(".")
    body = name[dot + 1:] if dot >= 0 else name
    parts = _RUN_VALUE.split(body)
    # [name, value, name, value, ..., ''] when the body starts with a name and ends with a value
    if len(parts) < 3 or parts[-1] != "":
        return None
    coords: dict[str, float] = {}
    for key, raw in zip(parts[0:-1:2], parts[1::2]):
        if not _RUN_NAME.match(key) or key in coords:
            return None
        text = raw.replace(",", ".").rstrip(".")
        try:
            value = float(text)
        except ValueError:  # 1.2.3, or a lone separator
            return None
        if not math.isfinite(value):
            return None
        coords[key] = value
    return coords, rep


def _coords_of(rel: PurePath) -> tuple[dict[str, float], int | None] | None:
    """Parameters from the file name, then its directories (innermost first), below the root.

    A file name follows :func:`perfcast.io.paths.parse_name` (``run.p4.cubex``); a directory
    name Extra-P's rules (:func:`run_dir_params`), else ``parse_name``.
    """
    found = parse_name(rel.name)
    if found:
        return found
    for part in [p.name for p in rel.parents if p.name]:
        found = run_dir_params(part) or parse_name(part)
        if found:
            return found
    return None


#: Scalasca's analysis reports of one run (not repetitions of it)
_SCALASCA_REPORTS = {"summary.cubex", "trace.cubex", "scout.cubex", "profile.cubex"}


def _runs_in(root: Path) -> tuple[list[Path], list[Path]]:
    """The run files below ``root``, and the other .cubex files it passed over."""
    files = _find_cubex(root)
    if not files:
        raise PerfcastError("no .cubex file in this directory (looked three levels deep)", root)
    by_dir: dict[Path, list[Path]] = {}
    for f in files:
        by_dir.setdefault(f.parent, []).append(f)
    chosen, ignored = [], []
    for d, fs in by_dir.items():
        if len(fs) == 1 or all(parse_name(f.name) for f in fs):
            chosen.extend(fs)  # one run, or runs named by their files (run.p4.cubex, run.p8.cubex)
            continue
        prof = [f for f in fs if f.name == "profile.cubex"]
        if not prof:
            if any(f.name in _SCALASCA_REPORTS for f in fs):
                raise PerfcastError(f"several .cubex files in one run directory ({', '.join(f.name for f in fs)}); "
                                    f"import the one you mean", d)
            chosen.extend(fs)  # as in Extra-P: several profiles of one run directory are repetitions
            continue
        chosen.extend(prof)
        ignored.extend(f for f in fs if f.name != "profile.cubex")
    return sorted(chosen), sorted(ignored)


def read_cube(path: Path, options: ReadOptions | None = None) -> Experiment:
    """Read one ``.cubex`` file or a directory of runs (see the module docstring)."""
    path = Path(path)
    options = options or ReadOptions()
    if options.scaling is not None and options.scaling.replace("_", "-").lower() not in SCALINGS:
        raise PerfcastError(f"unknown scaling {options.scaling!r}; use one of {', '.join(SCALINGS)}")
    exp = _read_cube(path, options)
    if options.scaling is not None:
        exp = reduce_scaling(exp, options.scaling, path)
    return exp


def _read_cube(path: Path, options: ReadOptions) -> Experiment:
    if not path.is_dir():
        run = _read_file(path)
        return _experiment([run], [{}], [0], [], None)
    files, ignored = _runs_in(path)
    if len(files) == 1:
        run = _read_file(files[0])
        exp = _experiment([run], [{}], [0], [], [str(files[0].relative_to(path))])
        exp.meta["sources"] = [str(files[0])]
        if ignored:
            exp.meta["cube"]["ignored_files"] = [str(f.relative_to(path)) for f in ignored]
        return exp
    rels = [f.relative_to(path) for f in files]
    parsed = [_coords_of(r) for r in rels]
    if not any(parsed):
        raise PerfcastError(
            f"{len(files)} .cubex files whose paths carry no parameter values (e.g. {rels[0]}); name the run "
            f"directories like mm.x10y1z1.r1/profile.cubex, or import the files one by one with --point "
            f"(e.g. --point p=64)", path)
    for f, r, c in zip(files, rels, parsed):
        if c is None:
            raise PerfcastError(f"cannot tell this run's parameter values from its path ({r}); name its "
                                f"directory like mm.x10y1z1.r1, or import it with --point", f)
    params = list(parsed[0][0])
    for f, (c, _) in zip(files, parsed):
        if set(c) != set(params):
            raise PerfcastError(f"parameters {', '.join(sorted(c))} differ from {', '.join(sorted(params))} "
                                f"found in {rels[0]}", f)
    # like Extra-P, a parameter that never varies is not a parameter (mm.x10y1z1 ... mm.x2000y1z1 is
    # one parameter x); it is kept in meta["cube"]["constant_parameters"]
    constant = {p: parsed[0][0][p] for p in params if len({c[p] for c, _ in parsed}) == 1}
    if len(constant) < len(params):
        params = [p for p in params if p not in constant]
    else:
        constant = {}
    # repetitions: runs sharing coordinates, numbered in the order of their .rN, then path
    groups: dict[tuple, list[int]] = {}
    for i, (c, _) in enumerate(parsed):
        groups.setdefault(tuple(c[p] for p in params), []).append(i)
    reps = [0] * len(files)
    for members in groups.values():
        members.sort(key=lambda i: (parsed[i][1] if parsed[i][1] is not None else -1, str(rels[i])))
        for k, i in enumerate(members):
            reps[i] = k
    runs = []
    for i, f in enumerate(files):
        runs.append(_read_file(f))
        if options.progress is not None:
            options.progress(i + 1, len(files), str(rels[i]))
    exp = _experiment(runs, [c for c, _ in parsed], reps, params, [str(r) for r in rels])
    exp.meta["sources"] = [str(f) for f in files]
    if constant:
        exp.meta["cube"]["constant_parameters"] = {p: _num(v) for p, v in constant.items()}
    if ignored:
        exp.meta["cube"]["ignored_files"] = [str(f.relative_to(path)) for f in ignored]
    return exp


def _sniff(path: Path) -> bool:
    if path.is_dir():
        return bool(_find_cubex(path))
    with open(path, "rb") as f:
        head = f.read(512)
    if len(head) < 512 or head[257:262] != b"ustar":
        return False
    if path.name.lower().endswith(".cubex"):
        return True
    try:
        tar, _ = _open_tar(path)
    except PerfcastError:
        return False
    with tar:
        return "anchor.xml" in tar.getnames()


register(Reader("cube", "Score-P/Scalasca CUBE4 profile (.cubex), or a directory of runs named like "
                "mm.x10y1z1.r1/profile.cubex", (".cubex",), _sniff, read_cube, directories=True))

"""Reader for HPCToolkit databases (``hpcprof`` output), legacy and v4.

Accepted inputs (format name ``hpctoolkit``):

* a **legacy database** directory: ``experiment.xml`` (DTD 2.0, written by ``hpcprof`` /
  ``hpcprof-mpi`` up to 2020) plus, when present, the per-thread binary ``*.metric-db`` files
  named in its ``MetricDBTable``; or an ``experiment.xml`` file given directly (a lone XML file
  such as ``flash4-experiment1.xml`` is read on its own summary values);
* a **v4 database** directory: ``meta.db`` + ``profile.db`` (``hpcprof`` 2022 and later; a path
  to ``meta.db`` itself is accepted too).  ``cct.db`` holds the same values arranged by context
  and is not needed; :func:`read_cct_db` decodes it for cross-checks.

Chosen and why: the parsers are written here from the format descriptions -- the DTD carried in
every ``experiment.xml``, the metric-db layout (24-byte ``HPCPROF-metricdb__00.10b`` header, two
big-endian u32 = number of nodes and of metrics, then a big-endian f64 matrix, one row per node id
starting at id 1) and, for v4, the ``FORMATS.md`` shipped inside each database.  Hatchet reads
these too, but it pulls in matplotlib, Cython extensions and version pins that perfcast does not
want; the binary parts here are numpy views over the file (``np.frombuffer`` with packed
structured dtypes), so a block of values costs one vectorised decode, not a Python loop.

**Calling-context tree** (what HPCToolkit's viewer shows top-down):

* procedures (``PF``/``Pr`` in XML, function contexts in v4) -> the procedure name;
* loops -> ``loop at FILE:LINE`` (file base name);
* statements (``S``; v4 line contexts carrying samples) -> leaf frames ``FILE:LINE``; a v4
  instruction context -> ``MODULE@0xOFFSET``;
* call sites (``C``; v4 line/instruction contexts through which a call passes) are not frames of
  their own: the callee frame hangs directly under the caller's procedure or loop frame, and
  records the call site (``FILE:LINE`` in the caller, line 0 unknown) as its
  :attr:`perfcast.experiment.Frame.site`, which the bottom-up view shows for each caller.
* what each frame is -- a procedure (with its own name and its file and load module, base names),
  a loop or a statement -- is recorded in the tree (:meth:`perfcast.experiment.CallTree.frame`),
  so that a flat view can put loops and statements into their procedure
  (:func:`perfcast.analysis.views.flat`) as HPCToolkit's own flat view does.
* v4 entry points are named like the legacy pseudo-procedures, so both versions give the same
  roots: ``main thread`` -> ``<program root>``, ``application thread`` -> ``<thread root>``,
  ``unknown entry`` -> ``<partial call paths>``.

**Siblings with equal names** (a procedure called from several call sites of one caller, several
statements on line 0 of an unknown file, ...) are resolved deterministically: procedure frames
of one parent that share a name but come from *different* call-site lines are named
``NAME@FILE:LINE`` (the call site), those from unknown call sites but different files or load
modules ``NAME (FILE [MODULE])``; contexts that still coincide -- same procedure and same call site,
or statements of the same line -- are the same source-level context and are merged into one frame
whose values are the sums (values of distinct contexts of one thread are disjoint sample sets, so
sums are exact for inclusive and exclusive costs).  A call site on line 0 counts as unknown.  (A
name that would still repeat -- a procedure literally called like a suffixed sibling -- gets
`` #2``, `` #3`` in order of appearance.)  Frames without any non-zero value in any metric are left out of the tree.

**Metrics.** Every HPCToolkit base metric ``X`` becomes two metrics:

* ``X (I)`` -- scope ``inclusive``: HPCToolkit's inclusive cost (v4 ``execution`` scope);
* ``X (E)`` -- scope ``exclusive`` in perfcast's sense: the cost of the frame itself, so that
  ``X (I)`` of a frame = its ``X (E)`` + the ``X (I)`` of its children, and the inclusive value of
  a root equals the sum of ``X (E)`` over its tree.  Both versions compute it the same way: the
  own cost of every source context is its inclusive value minus its children's inclusive values
  (exact on the binary values up to float rounding; on the 6-digit XML summary values
  differences below the printed precision are set to 0), and a frame sums the own cost of the
  contexts folded into it.  v4's ``point`` values are not used directly because hpcprof 2023
  writes values for instruction-level contexts that meta.db does not list: their cost is in the
  inclusive values of the listed ancestors, so it lands as own cost on the deepest listed one
  (the statement), where point values would lose it.  The ``function``/``lex_aware`` scopes
  are not read (they follow from these two).
  Note that HPCToolkit's own "exclusive" of a *procedure* also contains its statements and loops
  (v4 ``function`` scope): here that cost sits in the statement/loop children, so HPCToolkit's
  procedure exclusive = the sum of ``X (E)`` over the procedure's subtree down to the next
  procedure frames.  Time metrics are converted to seconds (``CPUTIME (usec)`` -> ``CPUTIME``,
  unit ``s``), so legacy and v4 databases of a program give the same metric names and units;
  other metrics are event counts (kind ``count``).

**Locations.** With per-thread values (metric-db files, v4 profiles) the table has ``rank`` and
``thread`` columns: legacy ranks/threads come from the metric-db file names
(``PROG-RANK-THREAD-HOST-PID-GEN.metric-db``), v4 ones from the identifier tuples (``RANK`` and
``THREAD`` logical ids; profiles with other identifiers, e.g. GPU streams, are numbered after the
largest thread id of their rank and listed in ``meta['hpctoolkit']['locations']``).  A callpath and
metric that has a value anywhere gets a row at every location (zeros included, so means over ranks
are right); a callpath/metric that is zero everywhere has no rows.  A lone ``experiment.xml`` gives
totals (the XML's ``:Sum`` values over all threads) without location columns; its other
statistics (Mean, StdDev, Min, Max, ...) are not read.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Frame, Metric
from ..lazy import LazyModule
from . import Reader, ReadOptions, register

sp = LazyModule("scipy.sparse")   # imported where a sparse matrix is made (perfcast.lazy)

__all__ = ["read", "sniff", "read_cct_db", "read_profile_db", "read_meta_db"]

#: seconds per unit for time units HPCToolkit uses in metric names
TIME_UNITS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
              "us": 1e-6, "usec": 1e-6, "ns": 1e-9, "nsec": 1e-9}
BYTE_UNITS = {"b", "byte", "bytes"}
ENTRY_NAMES = {0: "<partial call paths>", 1: "<program root>", 2: "<thread root>"}

# roles of source contexts in the folding into frames
_FRAME, _POINT, _SITE = 0, 1, 2

_XML_REL_TOL = 5e-6     # experiment.xml prints values with 6 significant digits
_BIN_REL_TOL = 1e-12


def _base(path: str) -> str:
    """File or module base name; HPCToolkit's pseudo names (``<unknown file> [libc.so]``,
    ``[libmpi.so]``) are kept whole."""
    if not path or path[0] in "<[":
        return path
    return path.rstrip("/").rsplit("/", 1)[-1]


def _where(file: str | None, module: str | None) -> str:
    """What tells a procedure apart from others of its name: its file and load module (base names;
    HPCToolkit's pseudo file ``<unknown file> [libc.so]`` already names the module)."""
    file, module = file or "", module or ""
    if module and not file.endswith(f"[{module}]"):
        return f"{file} [{module}]" if file else f"[{module}]"
    return file


def procedure_where(file: str | None, module: str | None) -> str:
    """A procedure's :attr:`perfcast.experiment.Frame.where` from its file and load module as
    HPCToolkit names them (full paths or pseudo names): what this reader records, for readers of
    HPCToolkit data saved by other tools (Hatchet's dataframe)."""
    return _where(_base(file or ""), _base(module or ""))


def _split_unit(base: str) -> tuple[str, str, float, str]:
    """``CPUTIME (usec)`` -> (name, unit, scale to that unit, kind)."""
    m = re.match(r"^(.*?)\s*\(([^()]*)\)\s*$", base)
    if m and m.group(2).strip().lower() in TIME_UNITS:
        return m.group(1).strip(), "s", TIME_UNITS[m.group(2).strip().lower()], "time"
    if m and m.group(2).strip().lower() in BYTE_UNITS:
        return m.group(1).strip(), "bytes", 1.0, "bytes"
    if "byte" in base.lower():
        return base, "bytes", 1.0, "bytes"
    return base, "", 1.0, "count"


# ------------------------------------------------------------------------------------------
# Source contexts (format-independent) and their folding into frames
# ------------------------------------------------------------------------------------------

@dataclass
class _Sources:
    """The source calling-context tree, one entry per context, parents before children."""

    parent: list = field(default_factory=list)   # source index or -1
    role: list = field(default_factory=list)     # _FRAME / _POINT / _SITE
    name: list = field(default_factory=list)     # frame name (FRAME) or statement name (POINT)
    proc: list = field(default_factory=list)     # FRAME is a procedure (call-site naming applies)
    label: list = field(default_factory=list)    # call-site label this context gives its children
    kind: list = field(default_factory=list)     # what a FRAME/POINT is (FRAME_KINDS) or None (call site)
    where: list = field(default_factory=list)    # a procedure's file/load module ("" unknown)

    def add(self, parent: int, role: int, name: str | None, proc: bool = False,
            label: str | None = None, kind: str | None = None, where: str = "") -> int:
        self.parent.append(parent)
        self.role.append(role)
        self.name.append(name)
        self.proc.append(proc)
        self.label.append(label)
        self.kind.append("procedure" if proc else kind)
        self.where.append(where)
        return len(self.parent) - 1

    def __len__(self):
        return len(self.parent)


@dataclass
class _Folded:
    parent: np.ndarray          # frame -> parent frame (-1 for roots)
    base: list                  # frame base names
    site: list                  # call-site label used in the frame key (procedures) or None
    kind: list                  # what each frame is (experiment.FRAME_KINDS)
    where: list                 # a procedure frame's file/load module ("" unknown)
    m_frame: sp.csr_matrix      # frames x sources: FRAME sources whose inclusive value the frame sums
    m_point: sp.csr_matrix      # frames x sources: POINT sources whose own cost a statement leaf sums
    m_owner: sp.csr_matrix      # frames x sources: the frame each source's own cost belongs to


def _fold(src: _Sources, own_nonzero: np.ndarray) -> _Folded:
    """Map source contexts to frames: call sites disappear, equal contexts merge.

    ``own_nonzero[s]``: whether source ``s`` has own (non-propagated) cost anywhere; a POINT
    context becomes a statement leaf when it has such cost or has no children.
    """
    n = len(src)
    has_children = np.zeros(n, dtype=bool)
    par = np.asarray(src.parent, dtype=np.int64)
    has_children[par[par >= 0]] = True
    enc = np.full(n, -1, dtype=np.int64)            # frame that children of s hang under
    lab: list = [None] * n                           # call-site label children of s see
    owner = np.full(n, -1, dtype=np.int64)
    keys: dict = {}
    f_parent, f_base, f_site, f_kind, f_where = [], [], [], [], []
    rows_f, cols_f, rows_p, cols_p = [], [], [], []

    def frame(parent_frame, name, site, kind, where):
        # procedures of one name from different files/modules stay apart (a frame is one procedure)
        k = (parent_frame, name, site, kind, where)
        f = keys.get(k)
        if f is None:
            f = keys[k] = len(f_parent)
            f_parent.append(parent_frame)
            f_base.append(name)
            f_site.append(site)
            f_kind.append(kind)
            f_where.append(where)
        return f

    for s in range(n):
        p = src.parent[s]
        up = enc[p] if p >= 0 else -1
        site = lab[p] if p >= 0 else None
        role = src.role[s]
        if role == _FRAME:
            f = frame(up, src.name[s], site if src.proc[s] else None, src.kind[s], src.where[s])
            rows_f.append(f)
            cols_f.append(s)
            enc[s] = owner[s] = f
        else:
            enc[s] = owner[s] = up
            lab[s] = src.label[s]
            if role == _POINT and (not has_children[s] or own_nonzero[s]):
                f = owner[s] = frame(up, src.name[s], None, "statement", "")
                rows_p.append(f)
                cols_p.append(s)
    nf = len(f_parent)
    ones = np.ones
    m_frame = sp.csr_matrix((ones(len(rows_f)), (rows_f, cols_f)), shape=(nf, n))
    m_point = sp.csr_matrix((ones(len(rows_p)), (rows_p, cols_p)), shape=(nf, n))
    placed = np.flatnonzero(owner >= 0)   # a call site at the very top has no frame to give its cost
    m_owner = sp.csr_matrix((ones(len(placed)), (owner[placed], placed)), shape=(nf, n))
    return _Folded(np.asarray(f_parent, dtype=np.int64), f_base, f_site, f_kind, f_where, m_frame, m_point, m_owner)


def _paths(folded: _Folded, keep: np.ndarray) -> tuple[list, list]:
    """Callpath ids and frame names of the kept frames (None for dropped ones)."""
    nf = len(folded.parent)
    groups: dict = {}
    for f in np.flatnonzero(keep):
        groups.setdefault((int(folded.parent[f]), folded.base[f]), []).append(int(f))
    display = list(folded.base)
    for (_, name), members in groups.items():
        if len(members) > 1:
            places = {folded.where[f] for f in members if folded.site[f] is None}
            for f in members:
                if folded.site[f] is not None:
                    display[f] = f"{name}@{folded.site[f]}"
                elif len(places) > 1 and folded.where[f]:   # procedures of one name from different places
                    display[f] = f"{name} ({folded.where[f]})"
    # a name may still repeat in pathological cases (a procedure literally named like a suffixed
    # sibling): number the later ones in order of appearance
    seen: dict = {}
    paths: list = [None] * nf
    for f in range(nf):
        if not keep[f]:
            continue
        p = int(folded.parent[f])
        k = (p, display[f])
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > 1:
            display[f] = f"{display[f]} #{seen[k]}"
        paths[f] = display[f] if p < 0 else paths[p] + SEP + display[f]
    return paths, display


def _child_matrix(parent: np.ndarray) -> sp.csr_matrix:
    n = len(parent)
    c = np.flatnonzero(parent >= 0)
    return sp.csr_matrix((np.ones(len(c)), (parent[c], c)), shape=(n, n))


def _own(inclusive: sp.csr_matrix, child: sp.csr_matrix, tol: float) -> sp.csr_matrix:
    """Own cost = inclusive minus the children's inclusive; differences within the precision of
    the stored values (``tol`` relative to the terms) are zero."""
    kids = (child @ inclusive).tocsr()
    own = (inclusive - kids).tocoo()
    bound = (abs(inclusive) + abs(kids)).tocsr()
    b = np.asarray(bound[own.row, own.col]).ravel() if own.nnz else np.zeros(0)
    data = own.data.copy()
    data[np.abs(data) <= b * tol * (1 + 1e-9)] = 0.0
    out = sp.csr_matrix((data, (own.row, own.col)), shape=own.shape)
    out.eliminate_zeros()
    return out


@dataclass
class _MetricValues:
    """Per-source inclusive values of one base metric: rows are sources, columns locations."""

    name: str
    unit: str
    kind: str
    scale: float
    inclusive: sp.csr_matrix
    tol: float = _BIN_REL_TOL


def _build(src: _Sources, metrics: list[_MetricValues], locations: pd.DataFrame | None, meta: dict,
           path: Path, options: ReadOptions) -> Experiment:
    if not metrics:
        raise PerfcastError("the database holds no inclusive metric values to read", path)
    if len(src) == 0:
        raise PerfcastError("the database has an empty calling-context tree", path)
    src_child = _child_matrix(np.asarray(src.parent, dtype=np.int64))
    owns = [_own(m.inclusive, src_child, m.tol) for m in metrics]
    own_nz = np.zeros(len(src), dtype=bool)
    for o in owns:
        own_nz |= np.diff(o.indptr) > 0
    folded = _fold(src, own_nz)
    nf = len(folded.parent)
    inc, exc = [], []
    for m, own in zip(metrics, owns):
        i_f = (folded.m_frame @ m.inclusive + folded.m_point @ own).tocsr()
        e_f = (folded.m_owner @ own).tocsr()
        i_f.eliminate_zeros()
        e_f.eliminate_zeros()
        inc.append(i_f * m.scale)
        exc.append(e_f * m.scale)
    keep = np.zeros(nf, dtype=bool)
    for mat in (*inc, *exc):
        keep |= np.diff(mat.indptr) > 0
    for f in range(nf - 1, -1, -1):  # parents precede children: keep the ancestors of kept frames
        if keep[f] and folded.parent[f] >= 0:
            keep[folded.parent[f]] = True
    if not keep.any():
        raise PerfcastError("the database holds no non-zero values", path)
    paths, names = _paths(folded, keep)
    tree = CallTree()
    for f in range(nf):
        if keep[f]:
            p = int(folded.parent[f])
            kind = folded.kind[f]
            tree.add(paths[f], None if p < 0 else paths[p], names[f],
                     Frame(kind, folded.base[f], folded.where[f], folded.site[f] or "") if kind == "procedure"
                     else Frame(kind))
    kept = np.flatnonzero(keep)
    categories = [paths[f] for f in kept]
    code_of = np.full(nf, -1, dtype=np.int64)
    code_of[kept] = np.arange(len(kept))
    declared, parts = [], []
    for m, i_f, e_f in zip(metrics, inc, exc):
        for suffix, scope, mat in ((" (I)", "inclusive", i_f), (" (E)", "exclusive", e_f)):
            rows = np.flatnonzero(np.diff(mat.indptr) > 0)
            if len(rows) == 0:
                continue
            name = f"{m.name}{suffix}"
            declared.append(Metric(name, m.unit, m.kind, scope, _describe(m, scope), sampled=True))  # hpcrun samples
            block = mat[rows].toarray()            # frames x locations
            parts.append((np.repeat(code_of[rows], block.shape[1]), len(declared) - 1, block.ravel(), len(rows)))
    data = pd.DataFrame({
        "rep": np.zeros(sum(len(p[0]) for p in parts), dtype=np.int64),
        "callpath": pd.Categorical.from_codes(np.concatenate([p[0] for p in parts]), categories=categories),
        "metric": pd.Categorical.from_codes(
            np.concatenate([np.full(len(p[0]), p[1], dtype=np.int64) for p in parts]),
            categories=[d.name for d in declared]),
        "value": np.concatenate([p[2] for p in parts]),
    })
    if locations is not None:
        for col in ("rank", "thread"):
            loc = locations[col].to_numpy().astype(np.int64)
            data[col] = np.concatenate([np.tile(loc, p[3]) for p in parts])
        gap = _rank_gap(locations["rank"].to_numpy())
        if gap:
            meta["hpctoolkit"]["ranks_missing"] = gap
            shown = ", ".join(map(str, gap[:8])) + (", ..." if len(gap) > 8 else "")
            meta.setdefault("warnings", []).append(
                f"{path.parent if path.is_file() else path}: the database has no profile of rank(s) {shown} "
                f"(its ranks run 0..{int(locations['rank'].max())}): a file lost? their values are missing, and "
                "totals over the ranks leave them out")
    if options.progress:
        options.progress(1, 1, "building the experiment")
    return Experiment((), data, declared, tree, meta)


def _rank_gap(ranks: np.ndarray) -> list[int]:
    """The MPI ranks below the largest one that have no profile (MPI numbers ranks 0..N-1)."""
    have = np.unique(ranks)
    if not len(have) or have[0] < 0:
        return []
    return [int(r) for r in np.setdiff1d(np.arange(int(have[-1]) + 1), have)]


def _describe(m: _MetricValues, scope: str) -> str:
    if scope == "inclusive":
        return f"HPCToolkit {m.name}, inclusive (the frame and everything it calls)"
    return (f"HPCToolkit {m.name}, cost of the frame itself (a statement: its line; a procedure or loop: "
            f"what none of its children holds)")


# ------------------------------------------------------------------------------------------
# Binary helper with bounds checks
# ------------------------------------------------------------------------------------------

class _Bin:
    """A read-only view of a binary file whose every access is bounds-checked."""

    def __init__(self, path: Path):
        self.path = path
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                self.buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as e:
            raise PerfcastError(f"cannot read ({e.strerror})", path) from None
        self.size = size

    def fail(self, msg: str, offset: int, what: str):
        raise PerfcastError(f"{msg} (file is {self.size} bytes; truncated or corrupt)", self.path,
                            f"offset {offset}, {what}")

    def need(self, offset: int, n: int, what: str):
        if offset < 0 or n < 0 or offset + n > self.size:
            self.fail(f"{what} needs bytes {offset}..{offset + n} beyond the end", offset, what)

    def unpack(self, fmt: str, offset: int, what: str):
        self.need(offset, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.buf, offset)

    def cstr(self, offset: int, what: str) -> str:
        self.need(offset, 1, what)
        end = self.buf.find(b"\0", offset)
        if end < 0:
            self.fail(f"{what}: string without terminator", offset, what)
        return bytes(self.buf[offset:end]).decode("utf-8", errors="replace")

    def array(self, dtype: np.dtype, offset: int, count: int, what: str) -> np.ndarray:
        dtype = np.dtype(dtype)
        self.need(offset, dtype.itemsize * count, what)
        if count == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(self.buf, dtype=dtype, count=count, offset=offset)


def _v4_header(b: _Bin, fmt: bytes, footer: bytes, nsections: int) -> list[tuple[int, int]]:
    b.need(0, 16, "file header")
    if bytes(b.buf[0:10]) != b"HPCTOOLKIT":
        raise PerfcastError(f"not an HPCToolkit v4 file: magic is {bytes(b.buf[0:10])!r}, expected "
                            f"b'HPCTOOLKIT'", b.path, "offset 0, magic")
    if bytes(b.buf[10:14]) != fmt:
        raise PerfcastError(f"wrong file kind {bytes(b.buf[10:14])!r}, expected {fmt!r}", b.path,
                            "offset 10, format")
    major = b.buf[14]
    if major != 4:
        raise PerfcastError(f"unsupported major version {major} (this reader knows version 4)", b.path,
                            "offset 14, majorVersion")
    if b.size < 8 or bytes(b.buf[b.size - 8:b.size]) != footer:
        raise PerfcastError(f"missing footer {footer!r}: the file is truncated", b.path,
                            f"offset {max(b.size - 8, 0)}, footer")
    out = []
    for i in range(nsections):
        sz, p = b.unpack("<QQ", 0x10 + 16 * i, f"section {i} pointer")
        b.need(p, sz, f"section {i}")
        out.append((sz, p))
    return out


# ------------------------------------------------------------------------------------------
# v4: meta.db
# ------------------------------------------------------------------------------------------

@dataclass
class _Meta:
    title: str
    kind_names: list
    metrics: list            # (name, {scope_type: propMetricId}, {scope_type: statMetricId for sum/$$})
    sources: _Sources
    ctx_to_src: dict         # ctxId -> source index


def read_meta_db(path: str | Path) -> _Meta:
    """Decode ``meta.db``: title, identifier kinds, metrics and the context tree."""
    b = _Bin(Path(path))
    secs = _v4_header(b, b"meta", b"_meta.db", 8)
    (_, p_gen), (_, p_id), (_, p_met), (_, p_ctx) = secs[0], secs[1], secs[2], secs[3]
    (_, p_mod), (_, p_file), (_, p_fun) = secs[5], secs[6], secs[7]
    title = b.cstr(b.unpack("<Q", p_gen, "pTitle")[0], "title")
    pp_names, n_kinds = b.unpack("<QB", p_id, "identifier names")
    kind_names = [b.cstr(b.unpack("<Q", pp_names + 8 * k, "ppNames")[0], "identifier name") for k in range(n_kinds)]

    p_metrics, n_metrics, sz_m, sz_psi, sz_ss = b.unpack("<QIBBB", p_met, "metrics section")
    p_scopes, n_scopes, sz_scope = b.unpack("<QHB", p_met + 0x10, "propagation scopes")
    scope_type = {}
    for i in range(n_scopes):
        o = p_scopes + i * sz_scope
        p_name, typ = b.unpack("<QB", o, "propagation scope")
        scope_type[o] = (b.cstr(p_name, "scope name"), typ)
    metrics = []
    for i in range(n_metrics):
        o = p_metrics + i * sz_m
        p_name, p_psi, p_ss, n_psi, n_ss = b.unpack("<QQQHH", o, f"metric {i}")
        name = b.cstr(p_name, f"metric {i} name")
        prop, stat = {}, {}
        for j in range(n_psi):
            q = p_psi + j * sz_psi
            p_scope, mid = b.unpack("<QH", q, f"metric {name!r} propagated sub-metric")
            if p_scope not in scope_type:
                b.fail(f"metric {name!r} refers to an unknown propagation scope", q, "pScope")
            prop[scope_type[p_scope][1]] = mid
        for j in range(n_ss):
            q = p_ss + j * sz_ss
            p_scope, p_formula, combine, sid = b.unpack("<QQBxH", q, f"metric {name!r} summary")
            if p_scope in scope_type and combine == 0 and b.cstr(p_formula, "formula") == "$$":
                stat[scope_type[p_scope][1]] = sid
        metrics.append((name, prop, stat))

    # modules, files, functions: referenced by pointer
    p_mods, n_mods, sz_mod = b.unpack("<QIH", p_mod, "load modules")
    modules = {}
    for i in range(n_mods):
        o = p_mods + i * sz_mod
        modules[o] = b.cstr(b.unpack("<Q", o + 8, "load module path")[0], "load module path")
    p_files, n_files, sz_file = b.unpack("<QIH", p_file, "source files")
    files = {}
    for i in range(n_files):
        o = p_files + i * sz_file
        files[o] = b.cstr(b.unpack("<Q", o + 8, "source file path")[0], "source file path")
    p_funs, n_funs, sz_fun = b.unpack("<QIH", p_fun, "functions")
    functions, fun_where = {}, {}
    for i in range(n_funs):
        o = p_funs + i * sz_fun
        p_name, p_module, offset, p_file = b.unpack("<QQQQ", o, f"function {i}")
        mod = _base(modules.get(p_module, ""))
        if p_name:
            functions[o] = b.cstr(p_name, "function name")
        else:
            functions[o] = f"<unknown procedure> 0x{offset:x} [{mod}]" if mod else "<unknown procedure>"
        fun_where[o] = _where(_base(files.get(p_file, "")), mod)

    # context tree: iterative walk over the variable-size {Ctx} arrays
    src = _Sources()
    ctx_to_src: dict[int, int] = {}
    p_entries, n_entries, sz_entry = b.unpack("<QHB", p_ctx, "context tree")
    stack = []
    for i in range(n_entries):
        o = p_entries + i * sz_entry
        sz_children, p_children, ctx_id, entry, p_pretty = b.unpack("<QQIHxxQ", o, f"entry point {i}")
        name = ENTRY_NAMES.get(entry) or b.cstr(p_pretty, "entry point name")
        s = src.add(-1, _FRAME, name, proc=True)
        ctx_to_src[ctx_id] = s
        if sz_children:
            stack.append((p_children, p_children + sz_children, s))
    ctx = struct.Struct("<QQIBBBBH")
    while stack:
        o, end, parent = stack.pop()
        while o < end:
            b.need(o, 32, "context")
            sz_children, p_children, ctx_id, flags, relation, lex, n_flex, _prop = ctx.unpack_from(b.buf, o)
            flex = o + 32
            b.need(flex, 8 * n_flex, "context flex fields")
            w = 0
            fn = file = module = None
            line = offset = 0
            fn_where = ""
            if flags & 1:
                p_fn = struct.unpack_from("<Q", b.buf, flex)[0]
                fn = functions.get(p_fn, "<unknown procedure>")
                fn_where = fun_where.get(p_fn, "")
                w += 1
            if flags & 2:
                p_f, line = struct.unpack_from("<QI", b.buf, flex + 8 * w)
                file = _base(files.get(p_f, "<unknown file>"))
                w += 2
            if flags & 4:
                p_m, offset = struct.unpack_from("<QQ", b.buf, flex + 8 * w)
                module = _base(modules.get(p_m, "<unknown module>"))
                w += 2
            if w > n_flex:
                b.fail(f"context {ctx_id} has {n_flex} flex words but its flags need {w}", o, "nFlexWords")
            point_name = (f"{file}:{line}" if file is not None else
                          f"{module}@0x{offset:x}" if module is not None else "<unknown line>")
            if lex == 0:      # function
                s = src.add(parent, _FRAME, fn or "<unknown procedure>", proc=True, where=fn_where)
            elif lex == 1:    # loop
                where = f"{file}:{line}" if file is not None else (
                    f"{module}@0x{offset:x}" if module is not None else "<unknown>")
                s = src.add(parent, _FRAME, f"loop at {where}", kind="loop")
            elif relation == 0:   # line / instruction inside its procedure: a statement or call site
                label = point_name if (file is None or line > 0) else None
                s = src.add(parent, _POINT, point_name, label=label, kind="statement")
            else:                 # line / instruction reached by a call: code of an unknown procedure
                s = src.add(parent, _FRAME, point_name, proc=True, where=_where(file, module))
            if ctx_id in ctx_to_src:
                b.fail(f"context id {ctx_id} appears twice", o, "ctxId")
            ctx_to_src[ctx_id] = s
            if sz_children:
                b.need(p_children, sz_children, f"children of context {ctx_id}")
                stack.append((o + 32 + 8 * n_flex, end, parent))
                stack.append((p_children, p_children + sz_children, s))
                break
            o = flex + 8 * n_flex
    # the walk above visits a context's subtree before its later siblings, so parents precede
    # children in ``src`` -- required by the folding
    return _Meta(title, kind_names, metrics, src, ctx_to_src)


# ------------------------------------------------------------------------------------------
# v4: profile.db and cct.db
# ------------------------------------------------------------------------------------------

_PVAL = np.dtype([("metric", "<u2"), ("value", "<f8")])            # packed, 10 bytes
_PIDX = np.dtype([("ctx", "<u4"), ("start", "<u8")])               # packed, 12 bytes
_CVAL = np.dtype([("prof", "<u4"), ("value", "<f8")])              # packed, 12 bytes
_CIDX = np.dtype([("metric", "<u2"), ("start", "<u8")])            # packed, 10 bytes
_ID = np.dtype([("kind", "u1"), ("pad", "u1"), ("flags", "<u2"), ("logical", "<u4"), ("physical", "<u8")])


@dataclass
class ProfileDB:
    """Decoded ``profile.db``: one entry per profile (index = profIndex)."""

    summary: np.ndarray                     # bool per profile
    id_tuples: list                         # per profile: list of (kind, logicalId, physicalId)
    ctx: list                               # per profile: ctxId per value
    metric: list                            # per profile: metricId per value
    value: list                             # per profile: value


def read_profile_db(path: str | Path, progress=None) -> ProfileDB:
    """Decode every profile of ``profile.db`` into (ctxId, metricId, value) arrays."""
    b = _Bin(Path(path))
    (_, p_info), (_, _p_tuples) = _v4_header(b, b"prof", b"_prof.db", 2)
    p_profiles, n_profiles, sz_profile = b.unpack("<QIB", p_info, "profile info section")
    summary = np.zeros(n_profiles, dtype=bool)
    tuples, ctxs, mets, vals = [], [], [], []
    for i in range(n_profiles):
        o = p_profiles + i * sz_profile
        n_values, p_values, n_ctxs, p_idx, p_tuple, flags = b.unpack("<QQI4xQQI", o, f"profile {i} info")
        summary[i] = bool(flags & 1)
        if p_tuple:
            (n_ids,) = b.unpack("<H", p_tuple, f"profile {i} identifier tuple")
            ids = b.array(_ID, p_tuple + 8, n_ids, f"profile {i} identifiers")
            tuples.append([(int(k), int(lg), int(ph)) for k, lg, ph in
                           zip(ids["kind"], ids["logical"], ids["physical"])])
        else:
            tuples.append([])
        v = b.array(_PVAL, p_values, n_values, f"profile {i} pValues")
        x = b.array(_PIDX, p_idx, n_ctxs, f"profile {i} pCtxIndices")
        su = x["start"]   # compared as unsigned: a corrupt start beyond 2^63 must not wrap
        if n_ctxs and (su[0] != 0 or np.any(su[1:] < su[:-1]) or su[-1] > n_values):
            b.fail(f"profile {i}: context start indices are not increasing within 0..{n_values}",
                   p_idx, f"profile {i} pCtxIndices")
        counts = np.diff(np.append(su.astype(np.int64), np.int64(n_values)))
        ctxs.append(np.repeat(x["ctx"].astype(np.int64), counts))
        mets.append(v["metric"].astype(np.int64))
        vals.append(v["value"].astype(np.float64))
        if progress and (i % 64 == 0 or i == n_profiles - 1):
            progress(i + 1, n_profiles, "profile.db profiles")
    return ProfileDB(summary, tuples, ctxs, mets, vals)


def read_cct_db(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode ``cct.db`` into flat arrays (ctxId, metricId, profIndex, value)."""
    b = _Bin(Path(path))
    ((_, p_info),) = _v4_header(b, b"ctxt", b"__ctx.db", 1)
    p_ctxs, n_ctxs, sz_ctx = b.unpack("<QIB", p_info, "context info section")
    out = ([], [], [], [])
    for c in range(n_ctxs):
        o = p_ctxs + c * sz_ctx
        n_values, p_values, n_metrics, p_idx = b.unpack("<QQH6xQ", o, f"context {c} info")
        v = b.array(_CVAL, p_values, n_values, f"context {c} pValues")
        x = b.array(_CIDX, p_idx, n_metrics, f"context {c} pMetricIndices")
        su = x["start"]   # unsigned, as in read_profile_db
        if n_metrics and (su[0] != 0 or np.any(su[1:] < su[:-1]) or su[-1] > n_values):
            b.fail(f"context {c}: metric start indices are not increasing", p_idx, f"context {c} pMetricIndices")
        counts = np.diff(np.append(su.astype(np.int64), np.int64(n_values)))
        out[0].append(np.full(n_values, c, dtype=np.int64))
        out[1].append(np.repeat(x["metric"].astype(np.int64), counts))
        out[2].append(v["prof"].astype(np.int64))
        out[3].append(v["value"].astype(np.float64))
    return tuple(np.concatenate(a) if a else np.zeros(0) for a in out)


def _v4_locations(prof: ProfileDB, kind_names: list) -> tuple[np.ndarray, pd.DataFrame, list]:
    """Non-summary profile indices and their (rank, thread); extra identifiers listed."""
    kinds = {i: n.upper() for i, n in enumerate(kind_names)}
    plain = {"NODE", "RANK", "THREAD", "CORE"}
    idx, ranks, threads, other = [], [], [], []
    for i, tup in enumerate(prof.id_tuples):
        if prof.summary[i]:
            continue
        names = {kinds.get(k, f"kind{k}"): lg for k, lg, _ in tup}
        idx.append(i)
        ranks.append(names.get("RANK", 0))
        if set(names) <= plain:
            threads.append(names.get("THREAD", 0))
        else:
            threads.append(None)
            other.append(i)
    ranks = np.asarray(ranks, dtype=np.int64)
    listed = []
    if other:
        by_rank: dict = {}
        for r, t in zip(ranks, threads):
            if t is not None:
                by_rank[r] = max(by_rank.get(r, -1), t)
        for j, (i, t) in enumerate(zip(idx, threads)):
            if t is None:
                r = int(ranks[j])
                by_rank[r] = by_rank.get(r, -1) + 1
                threads[j] = by_rank[r]
                listed.append({"rank": r, "thread": int(threads[j]), "profile": int(i),
                               "identifiers": {kinds.get(k, f"kind{k}"): lg for k, lg, _ in prof.id_tuples[i]}})
    loc = pd.DataFrame({"rank": ranks, "thread": np.asarray(threads, dtype=np.int64)})
    if loc.duplicated().any():
        dup = loc[loc.duplicated()].iloc[0]
        raise PerfcastError(f"two profiles share rank {dup['rank']} thread {dup['thread']}")
    return np.asarray(idx, dtype=np.int64), loc, listed


def _read_v4(directory: Path, options: ReadOptions) -> Experiment:
    meta_path, prof_path = directory / "meta.db", directory / "profile.db"
    if not prof_path.is_file():
        raise PerfcastError("v4 database without profile.db (the values live there)", directory)
    meta = read_meta_db(meta_path)
    prof = read_profile_db(prof_path, options.progress)
    pidx, loc, listed = _v4_locations(prof, meta.kind_names)
    if len(pidx) == 0:
        raise PerfcastError("profile.db holds no per-thread profiles", prof_path)
    # order locations by (rank, thread)
    order = np.lexsort((loc["thread"].to_numpy(), loc["rank"].to_numpy()))
    pidx, loc = pidx[order], loc.iloc[order].reset_index(drop=True)
    nsrc = len(meta.sources)
    ctx_ids = np.fromiter(meta.ctx_to_src.keys(), dtype=np.int64, count=len(meta.ctx_to_src))
    src_ids = np.fromiter(meta.ctx_to_src.values(), dtype=np.int64, count=len(meta.ctx_to_src))
    # ctxId -> source row by binary search (a dense table sized by the largest id would let one
    # damaged id ask for gigabytes)
    by_id = np.argsort(ctx_ids, kind="stable")
    ctx_sorted, src_sorted = ctx_ids[by_id], src_ids[by_id]
    ctx = np.concatenate([prof.ctx[i] for i in pidx])
    met = np.concatenate([prof.metric[i] for i in pidx])
    val = np.concatenate([prof.value[i] for i in pidx])
    col = np.concatenate([np.full(len(prof.ctx[i]), j, dtype=np.int64) for j, i in enumerate(pidx)])
    # ctxId 0 is the implicit global context (the aggregate of the roots), not a frame.  hpcprof
    # also stores values for instruction-level contexts that meta.db does not list (seen in
    # hpcprof 2023.03 output): their cost is already in the inclusive values of their listed
    # ancestors, and their own cost shows up as the own cost of the deepest listed ancestor.
    pos = np.searchsorted(ctx_sorted, ctx)
    pos_ok = np.minimum(pos, max(len(ctx_sorted) - 1, 0))
    listed_ctx = (ctx > 0) & (pos < len(ctx_sorted))
    if len(ctx_sorted):
        listed_ctx &= ctx_sorted[pos_ok] == ctx
        listed_ctx[listed_ctx] &= src_sorted[pos_ok[listed_ctx]] >= 0
    unlisted = int(np.count_nonzero((ctx != 0) & ~listed_ctx))
    ctx, met, val, col = ctx[listed_ctx], met[listed_ctx], val[listed_ctx], col[listed_ctx]
    rows = src_sorted[pos_ok[listed_ctx]] if len(ctx_sorted) else np.zeros(0, dtype=np.int64)
    metrics = []
    skipped = []
    for name, prop, _stat in meta.metrics:
        short, unit, scale, kind = _split_unit(name)
        exec_id, point_id = prop.get(2), prop.get(1)
        if exec_id is None and point_id is None:
            skipped.append(name)
            continue
        sel = met == (exec_id if exec_id is not None else point_id)
        mat = sp.csr_matrix((val[sel], (rows[sel], col[sel])), shape=(nsrc, len(pidx)))
        if exec_id is None:  # only raw values: propagate them up the tree
            mat = _accumulate(meta.sources, mat)
        metrics.append(_MetricValues(short, unit, kind, scale, mat, _BIN_REL_TOL))
    if len({m.name for m in metrics}) != len(metrics):
        raise PerfcastError("two metrics give the same name after unit conversion", meta_path)
    info = {"database": "v4", "title": meta.title, "profiles": int(len(pidx)),
            "value_source": "profile.db", "values_at_unlisted_contexts": unlisted}
    if listed:
        info["locations"] = listed
    if skipped:
        info["skipped_metrics"] = skipped
    return _build(meta.sources, metrics, loc, {"hpctoolkit": info}, directory, options)


def _accumulate(src: _Sources, own: sp.csr_matrix) -> sp.csr_matrix:
    """Inclusive values from own values: sums over source subtrees, one tree level at a time."""
    par = np.asarray(src.parent, dtype=np.int64)
    depth = np.zeros(len(par), dtype=np.int64)
    for s in range(len(par)):  # parents precede children
        if par[s] >= 0:
            depth[s] = depth[par[s]] + 1
    total = own.tocsr()
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        up = sp.csr_matrix((np.ones(len(at)), (par[at], at)), shape=(len(par), len(par)))
        total = (total + up @ total).tocsr()
    return total


# ------------------------------------------------------------------------------------------
# legacy: experiment.xml (+ metric-db)
# ------------------------------------------------------------------------------------------

_METRIC_DB_NAME = re.compile(r"-(\d+)-(\d+)-([0-9a-fA-F]+)-(\d+)-(\d+)\.metric-db$")


def _parse_xml(path: Path) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else None
        raise PerfcastError(f"not a readable experiment.xml ({e})", path, line) from None
    except OSError as e:
        raise PerfcastError(f"cannot read ({e.strerror})", path) from None


def _read_legacy(xml_path: Path, options: ReadOptions) -> Experiment:
    root = _parse_xml(xml_path)
    if root.tag != "HPCToolkitExperiment":
        raise PerfcastError(f"not an HPCToolkit experiment.xml (root element <{root.tag}>)", xml_path,
                            "HPCToolkitExperiment")
    sec = root.find("SecCallPathProfile")
    if sec is None:
        raise PerfcastError("experiment.xml has no call path profile section", xml_path, "SecCallPathProfile")
    head = sec.find("SecHeader")
    data = sec.find("SecCallPathProfileData")
    if head is None or data is None:
        raise PerfcastError("experiment.xml call path profile lacks SecHeader or SecCallPathProfileData",
                            xml_path, "SecCallPathProfile")

    def table(tag):
        return {e.get("i"): e.get("n", "") for e in head.iter(tag)}

    procedures, files, modules = table("Procedure"), table("File"), table("LoadModule")

    # ---- the source tree: iterative preorder walk ----------------------------------------
    src = _Sources()
    node_ids = []           # XML node id (i) per source, for metric-db rows
    summary_values: dict[int, list] = {}   # source -> [(metric id, value)]
    stack = [(child, -1, "<unknown file>", "") for child in reversed(list(data))]
    while stack:
        e, parent, cur_file, cur_module = stack.pop()
        tag = e.tag
        if tag == "M":
            continue
        i = e.get("i")
        try:
            nid = int(i) if i is not None else -1
            line = int(e.get("l", "0").split("-")[0] or 0)
        except ValueError:
            raise PerfcastError(f"<{tag}> with a non-numeric id or line ({i!r}, {e.get('l')!r})", xml_path,
                                f"{tag} i={i}") from None
        if not -1 <= nid < 2 ** 62:
            raise PerfcastError(f"<{tag}> node id {nid} out of range", xml_path, f"{tag} i={i}")
        f_attr = e.get("f")
        file = _base(files.get(f_attr, f_attr)) if f_attr is not None else cur_file
        lm = e.get("lm")
        module = _base(modules.get(lm, lm)) if lm is not None else cur_module
        if tag in ("PF", "Pr", "P", "A"):
            n = e.get("n", "")
            name = procedures.get(n, n) or "<unknown procedure>"
            s = src.add(parent, _FRAME, name, proc=True, where=_where(file, module))
        elif tag == "L":
            s = src.add(parent, _FRAME, f"loop at {file}:{line}", kind="loop")
        elif tag == "S":
            s = src.add(parent, _FRAME, f"{file}:{line}", kind="statement")
        elif tag == "C":
            s = src.add(parent, _SITE, None, label=f"{file}:{line}" if line > 0 else None)
        else:
            continue
        node_ids.append(nid)
        ms = [(m.get("n"), m.get("v")) for m in e.findall("M")]
        if ms:
            summary_values[s] = ms
        for child in reversed(list(e)):
            if child.tag != "M":
                stack.append((child, s, file, module))
    if not len(src):
        raise PerfcastError("experiment.xml has an empty calling-context tree", xml_path, "SecCallPathProfileData")
    node_ids = np.asarray(node_ids, dtype=np.int64)
    program = root.find("Header").get("n", "") if root.find("Header") is not None else ""
    info = {"database": "legacy", "program": program}

    # ---- metric-db files (per thread) --------------------------------------------------------
    dbs = [e for e in head.iter("MetricDB")]
    incl = [e for e in dbs if e.get("t") == "inclusive"]
    db_files = []
    if incl:
        globs = {e.get("db-glob") or "*.metric-db" for e in incl}
        for g in sorted(globs):
            db_files.extend(sorted(xml_path.parent.glob(g)))
        db_files = sorted(set(db_files))
    if incl and db_files:
        metrics, loc = _read_metric_dbs(xml_path, db_files, incl, src, node_ids, options)
        info["value_source"] = "metric-db"
        info["metric_db_files"] = len(db_files)
        return _build(src, metrics, loc, {"hpctoolkit": info}, xml_path, options)

    # ---- summary values in the XML (totals over all threads) -----------------------------------
    wanted, skipped = {}, []
    for e in head.iter("Metric"):
        name, mid = e.get("n", ""), e.get("i")
        m = re.match(r"^(.*?)(:Sum)?\s*\(I\)$", name)
        if e.get("t") == "inclusive" and m and ":" not in m.group(1).replace("::", ""):
            wanted[mid] = m.group(1).strip()
        else:
            skipped.append(name)
    if not wanted:
        raise PerfcastError("experiment.xml has neither metric-db files nor inclusive summary metrics",
                            xml_path, "MetricTable")
    metrics = []
    for mid, base in wanted.items():
        rows, vals = [], []
        for s, ms in summary_values.items():
            for n, v in ms:
                if n == mid:
                    try:
                        x = float(v)
                    except (TypeError, ValueError):
                        raise PerfcastError(f"metric value {v!r} is not a number", xml_path,
                                            f"M n={n} at node i={node_ids[s]}") from None
                    if not np.isfinite(x):
                        raise PerfcastError(f"metric value {v!r} is not finite", xml_path,
                                            f"M n={n} at node i={node_ids[s]}")
                    rows.append(s)
                    vals.append(x)
        short, unit, scale, kind = _split_unit(base)
        mat = sp.csr_matrix((vals, (rows, np.zeros(len(rows), dtype=np.int64))), shape=(len(src), 1))
        metrics.append(_MetricValues(short, unit, kind, scale, mat, _XML_REL_TOL))
    info["value_source"] = "experiment.xml summary (Sum over threads)"
    if incl:
        info["metric_db_missing"] = sorted({e.get("db-glob") or "*.metric-db" for e in incl})
    if skipped:
        info["skipped_metrics"] = skipped
    return _build(src, metrics, None, {"hpctoolkit": info}, xml_path, options)


def _read_metric_dbs(xml_path: Path, db_files: list[Path], incl: list, src: _Sources, node_ids: np.ndarray,
                     options: ReadOptions):
    """Per-thread inclusive values from the binary metric-db files."""
    locs = []
    for f in db_files:
        m = _METRIC_DB_NAME.search(f.name)
        if not m:
            raise PerfcastError("cannot tell rank and thread from the metric-db file name "
                                "(expected PROG-RANK-THREAD-HOST-PID-GEN.metric-db)", f)
        locs.append((int(m.group(1)), int(m.group(2))))
    loc = pd.DataFrame(locs, columns=["rank", "thread"])
    if loc.duplicated().any():
        r, t = loc[loc.duplicated()].iloc[0]
        raise PerfcastError(f"two metric-db files for rank {r} thread {t}", xml_path.parent)
    order = np.lexsort((loc["thread"].to_numpy(), loc["rank"].to_numpy()))
    db_files = [db_files[i] for i in order]
    loc = loc.iloc[order].reset_index(drop=True)
    try:
        cols = [int(e.get("db-id")) for e in incl]
        n_expected = {int(e.get("db-num-metrics")) for e in incl}
        header = {int(e.get("db-header-sz", "24")) for e in incl}
    except (TypeError, ValueError):
        raise PerfcastError("MetricDB entry with a missing or non-numeric db-id / db-num-metrics / "
                            "db-header-sz", xml_path, "MetricDBTable") from None
    if len(n_expected) != 1 or len(header) != 1:
        raise PerfcastError("MetricDB entries disagree on db-num-metrics or db-header-sz", xml_path,
                            "MetricDBTable")
    n_metrics, hsz = n_expected.pop(), header.pop()
    if any(c < 0 or c >= n_metrics for c in cols):
        raise PerfcastError(f"MetricDB db-id outside 0..{n_metrics - 1}", xml_path, "MetricDBTable")
    max_id = int(node_ids.max(initial=1))
    valid = node_ids >= 1
    per_metric = [[] for _ in cols]
    for j, f in enumerate(db_files):
        b = _Bin(f)
        b.need(0, hsz + 8, "metric-db header")
        if bytes(b.buf[0:16]) != b"HPCPROF-metricdb":
            raise PerfcastError(f"not a metric-db file: magic {bytes(b.buf[0:16])!r}", f, "offset 0, magic")
        endian = bytes(b.buf[hsz - 1:hsz])
        bo = ">" if endian == b"b" else "<" if endian == b"l" else None
        if bo is None:
            raise PerfcastError(f"unknown byte order mark {endian!r}", f, f"offset {hsz - 1}, endianness")
        n_nodes, n_met = struct.unpack_from(bo + "II", b.buf, hsz)
        if n_met != n_metrics:
            raise PerfcastError(f"holds {n_met} metrics, experiment.xml says {n_metrics}", f,
                                f"offset {hsz + 4}, number of metrics")
        if n_nodes < max_id:
            raise PerfcastError(f"holds {n_nodes} nodes, experiment.xml has node ids up to {max_id}", f,
                                f"offset {hsz}, number of nodes")
        body = b.array(np.dtype(bo + "f8"), hsz + 8, n_nodes * n_met, "metric-db values")
        mat = body.reshape(n_nodes, n_met)
        # node id k is row k - 1 (row 0 is the experiment-wide root, id 1)
        rows_src = np.flatnonzero(valid)
        for k, c in enumerate(cols):
            v = mat[node_ids[rows_src] - 1, c].astype(np.float64)
            if not np.all(np.isfinite(v)):
                raise PerfcastError("holds non-finite values", f, "metric-db values")
            nz = v != 0
            per_metric[k].append((rows_src[nz], np.full(int(nz.sum()), j), v[nz]))
        if options.progress:
            options.progress(j + 1, len(db_files), "metric-db files")
    metrics = []
    for e, parts in zip(incl, per_metric):
        name = e.get("n", "")
        base = re.sub(r"\s*\(I\)$", "", name).strip()
        short, unit, scale, kind = _split_unit(base)
        r = np.concatenate([p[0] for p in parts])
        c = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[2] for p in parts])
        mat = sp.csr_matrix((v, (r, c)), shape=(len(src), len(db_files)))
        metrics.append(_MetricValues(short, unit, kind, scale, mat, _BIN_REL_TOL))
    if len({m.name for m in metrics}) != len(metrics):
        raise PerfcastError("two metrics give the same name after unit conversion", xml_path, "MetricDBTable")
    return metrics, loc


# ------------------------------------------------------------------------------------------
# Reader entry points
# ------------------------------------------------------------------------------------------

def _is_v4_meta(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(14) == b"HPCTOOLKITmeta"
    except OSError:
        return False


def _is_experiment_xml(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16384)
    except OSError:
        return False
    return b"<HPCToolkitExperiment" in head or b"<!DOCTYPE HPCToolkitExperiment" in head


def sniff(path: Path) -> bool:
    path = Path(path)
    if path.is_dir():
        return _is_v4_meta(path / "meta.db") or _is_experiment_xml(path / "experiment.xml")
    return _is_v4_meta(path) or (path.suffix.lower() == ".xml" and _is_experiment_xml(path))


def read(path: Path, options: ReadOptions | None = None) -> Experiment:
    path = Path(path)
    options = options or ReadOptions()
    if path.is_dir():
        if (path / "meta.db").is_file():
            return _read_v4(path, options)
        if (path / "experiment.xml").is_file():
            return _read_legacy(path / "experiment.xml", options)
        raise PerfcastError("no HPCToolkit database here (neither meta.db nor experiment.xml)", path)
    if not path.exists():
        raise PerfcastError("no such file or directory", path)
    if path.name in ("meta.db", "profile.db", "cct.db") or _is_v4_meta(path):
        if not (path.parent / "meta.db").is_file():
            raise PerfcastError("v4 database file without meta.db beside it", path)
        return _read_v4(path.parent, options)
    if path.name.endswith(".metric-db"):
        if not (path.parent / "experiment.xml").is_file():
            raise PerfcastError("metric-db file without experiment.xml beside it", path)
        return _read_legacy(path.parent / "experiment.xml", options)
    return _read_legacy(path, options)


register(Reader("hpctoolkit",
                "HPCToolkit database: legacy experiment.xml (+ metric-db) or v4 meta.db/profile.db",
                (".xml", "meta.db"), sniff, read, directories=True))

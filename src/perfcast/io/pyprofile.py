"""Readers for Python profiles: cProfile/profile ``pstats`` files and pyinstrument JSON sessions.

cProfile (``.pstats``, ``.prof``: ``python -m cProfile -o out.pstats``, ``Profile.dump_stats``)
-----------------------------------------------------------------------------------------------
A pstats file is the ``marshal`` dump of ``{(file, line, function): (primitive calls, calls,
exclusive time, inclusive time, {caller: (primitive calls, calls, exclusive, inclusive)})}``.  It is
loaded with the standard library's :class:`pstats.Stats`, because that is the format's own reader
(it follows whatever the running Python writes) and adds no dependency.  **marshal is not safe for
untrusted data** (the Python documentation says so: a crafted file can make the loader misbehave);
read pstats files only from sources you trust.  What is loaded is validated before use -- a dict of
``(str, int, str)`` keys to five-tuples of non-negative finite numbers and a caller dict whose keys
are functions of the file -- and the whole file must be consumed, so a damaged, truncated or
extended file, or one written by Python 2 (another marshal dialect), is a one-line
:class:`PerfcastError`.

Call tree: cProfile records only caller -> callee pairs, not full call paths.  As in Hatchet's
cProfile reader a function is a node and its children are the functions whose callers table names
it, so a function called from several callers appears under each; a function without callers is a
root with its own totals, and so is a function some of whose calls have no recorded caller (the
profiler was enabled inside the caller): that root holds the calls and times its callers table does
not account for.  To keep every recorded number exactly once, the node of a callee under
a caller holds the values of that caller -> callee pair (its share of the callee's calls and time),
and the callees of a function hang under its first node in breadth-first order from the roots (a
recursive call becomes one child of the function itself; cycles are not unrolled).  So the
exclusive times of all nodes add up to the profile's total time.  Frames are function names; two
functions of one name are told apart by ``name (file:line)``.

Metrics: ``time (E)`` and ``time (I)`` in seconds (exclusive, inclusive), ``calls`` and
``primitive_calls`` (calls that were not recursive), counts.

pyinstrument (``pyinstrument -r json``)
--------------------------------------
A JSON session ``{"start_time", "duration", "sample_count", "program", "root_frame": {function,
file_path, line_no, time, children: [...]}}``.  ``time`` is a frame's inclusive time in seconds; the
exclusive time is the inclusive time less the children's.  Frames with the same function, file and
line under one parent are summed into one node.  Metrics ``time (I)`` and ``time (E)``, seconds.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections import defaultdict, deque
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric
from . import Reader, register, check_readable, read_json, read_ends

_PSTATS_EXT = (".pstats", ".prof")
#: pstats files of real programs are kilobytes to a few megabytes
_MAX_PSTATS_BYTES = 256 << 20


def _num(x, what: str, path: Path, where: str, integer: bool = False) -> float:
    ok = isinstance(x, int) if integer else isinstance(x, (int, float))
    if not ok or isinstance(x, bool):
        raise PerfcastError(f"{what} is {type(x).__name__}, not a{'n integer' if integer else ' number'}", path, where)
    v = float(x) if not integer or abs(x) < 2 ** 63 else math.inf
    if not math.isfinite(v) or v < 0:
        raise PerfcastError(f"{what} {x!r:.40} is negative, not finite or too large", path, where)
    return v


def _key(k, path: Path, where: str) -> tuple[str, int, str]:
    if not (isinstance(k, tuple) and len(k) == 3 and isinstance(k[0], str) and isinstance(k[1], int)
            and isinstance(k[2], str) and not isinstance(k[1], bool)):
        raise PerfcastError(f"a function key is {type(k).__name__} {str(k)[:60]!r}, not (file, line, name)", path,
                            where)
    return k


def load_pstats(path: Path) -> dict:
    """The validated stats dict of a pstats file (see the module docstring)."""
    import marshal
    import pstats

    check_readable(path)
    if path.is_dir():
        raise PerfcastError("is a directory, not a pstats file", path)
    size = path.stat().st_size
    if size > _MAX_PSTATS_BYTES:
        raise PerfcastError(f"{size} bytes: larger than any pstats file perfcast reads ({_MAX_PSTATS_BYTES >> 20} MiB)",
                            path)
    # the whole file must be one marshal object: bytes after it are damage pstats would ignore;
    # its types are checked before pstats works on it
    try:
        with open(path, "rb") as f:
            raw = marshal.load(f)
            rest = f.read(1)
    except (EOFError, ValueError, TypeError, OverflowError, RecursionError, MemoryError) as e:
        raise PerfcastError(f"not a readable Python 3 pstats file ({type(e).__name__}: {str(e)[:80]}): written by "
                            f"another Python major version, or damaged", path) from None
    if rest:
        raise PerfcastError("bytes after the end of the pstats data (damaged or concatenated file)", path)
    if not isinstance(raw, dict) or not raw:
        raise PerfcastError(f"the pstats data is {type(raw).__name__}, not a non-empty table of functions", path)
    out = _validate(raw, path)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # pstats prints its complaints
            stats = pstats.Stats(str(path)).stats
    except (EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError) as e:
        raise PerfcastError(f"pstats cannot read the file ({type(e).__name__}: {str(e)[:80]})", path) from None
    if _validate(stats, path) != out:
        raise PerfcastError("pstats read other values than the file holds", path)
    return out


def _validate(stats: dict, path: Path) -> dict:
    out = {}
    for k, v in stats.items():
        k = _key(k, path, "function")
        where = f"{k[2]} ({k[0]}:{k[1]})"[:120]
        if not (isinstance(v, tuple) and len(v) == 5 and isinstance(v[4], dict)):
            raise PerfcastError("the entry is not (calls, primitive calls, time, cumulative time, callers)", path,
                                where)
        cc = _num(v[0], "primitive calls", path, where, True)
        nc = _num(v[1], "calls", path, where, True)
        tt = _num(v[2], "time", path, where)
        ct = _num(v[3], "cumulative time", path, where)
        callers = {}
        for ck, cv in v[4].items():
            ck = _key(ck, path, where)
            if ck not in stats:
                raise PerfcastError(f"caller {ck[2]!r} is not among the profiled functions", path, where)
            if not (isinstance(cv, tuple) and len(cv) == 4):
                raise PerfcastError(f"the entry of caller {ck[2]!r} is not (calls, primitive calls, time, "
                                    f"cumulative time) (a Python 2 pstats file?)", path, where)
            # a caller entry is (calls, primitive calls, ...): the reverse of a function's first two
            nc_, cc_, tt_, ct_ = (_num(x, f"caller {ck[2]!r}: {w}", path, where, i < 2)
                                  for i, (x, w) in enumerate(zip(cv, ("calls", "primitive calls", "time",
                                                                       "cumulative time"))))
            callers[ck] = (cc_, nc_, tt_, ct_)
        out[k] = (cc, nc, tt, ct, callers)
    return out


def _names(funcs) -> dict:
    count = defaultdict(int)
    for f in funcs:
        count[f[2]] += 1
    return {f: f[2] if count[f[2]] == 1 else f"{f[2]} ({Path(f[0]).name}:{f[1]})" for f in funcs}


def read_pstats(path: Path) -> Experiment:
    stats = load_pstats(path)
    names = _names(stats)
    callees = defaultdict(list)  # caller -> [callee], in file order
    for f, (_, _, _, _, callers) in stats.items():
        for c in callers:
            callees[c].append(f)
    roots = [f for f, v in stats.items() if not v[4]]
    # calls no caller was recorded for (the profiler enabled inside the caller) are top-level calls:
    # the function is also a root holding the remainder of its totals
    extra = {}
    for f, (cc, nc, tt, ct, callers) in stats.items():
        if callers and nc > sum(v[1] for v in callers.values()):
            extra[f] = tuple(max(0.0, total - sum(v[i] for v in callers.values()))
                             for i, total in enumerate((cc, nc, tt, ct)))
    tree = CallTree()
    rows = []
    home: dict = {}  # function -> its first node (breadth first): its callees hang there

    def put(cp, vals):
        cc, nc, tt, ct = vals
        rows.extend([(cp, "time (E)", tt), (cp, "time (I)", ct), (cp, "calls", nc), (cp, "primitive_calls", cc)])

    queue = deque()
    pending = [f for f in stats if f not in roots]
    for r in roots:
        cp = tree.add(names[r], None, names[r])
        home[r] = cp
        put(cp, stats[r][:4])
        queue.append(r)
    while True:
        while queue:
            f = queue.popleft()
            for g in callees[f]:
                cp = home[f] + SEP + names[g]
                tree.add(cp, home[f], names[g])
                put(cp, stats[g][4][f])
                if g not in home:
                    home[g] = cp
                    queue.append(g)
                if g in extra:
                    r = names[g] if names[g] not in tree else f"{names[g]} (no caller)"
                    if r not in tree:
                        tree.add(r, None, r)
                        put(r, extra[g])
        # functions reached only through a cycle without a root: the first becomes a root without
        # values of its own (all its numbers are on its caller edges)
        left = [f for f in pending if f not in home]
        if not left:
            break
        f = left[0]
        cp = tree.add(names[f], None, names[f])
        home[f] = cp
        queue.append(f)
    data = pd.DataFrame(rows, columns=["callpath", "metric", "value"])
    data["rep"] = 0
    metrics = [Metric("time (E)", "s", "time", "exclusive", "cProfile tottime (of the caller -> callee pair)"),
               Metric("time (I)", "s", "time", "inclusive", "cProfile cumtime (of the caller -> callee pair)"),
               Metric("calls", "#", "count", "exclusive", "calls, recursive ones included"),
               Metric("primitive_calls", "#", "count", "exclusive", "calls that were not recursive")]
    meta = {"cprofile": {"functions": len(stats), "total_time": sum(v[2] for v in stats.values())}}
    return Experiment([], data, metrics, tree, meta)


def _sniff_pstats(path: Path) -> bool:
    if not path.is_file() or not path.name.lower().endswith(_PSTATS_EXT):
        return False
    with open(path, "rb") as f:
        return f.read(1) in (b"{", b"\xfb")  # a marshalled dict (with or without the reference flag)


register(Reader("cprofile", "Python cProfile/profile statistics (.pstats, .prof; trusted files only: marshal)",
                _PSTATS_EXT, _sniff_pstats, lambda p, o: read_pstats(p)))


# -- pyinstrument ---------------------------------------------------------------------------------

def _frame_fields(fr, path: Path, where: str) -> tuple[str, str, int, float, list]:
    if not isinstance(fr, dict):
        raise PerfcastError(f"a frame is {type(fr).__name__}, not an object", path, where)
    fn, fp, ln, t, ch = (fr.get("function"), fr.get("file_path"), fr.get("line_no"), fr.get("time"),
                         fr.get("children", []))
    if not isinstance(fn, str) or not fn:
        raise PerfcastError("a frame without a 'function' name", path, where)
    if fp is not None and not isinstance(fp, str):
        raise PerfcastError(f"'file_path' of {fn!r} is {type(fp).__name__}, not a string", path, where)
    if ln is not None and (not isinstance(ln, int) or isinstance(ln, bool)):
        raise PerfcastError(f"'line_no' of {fn!r} is {type(ln).__name__}, not an integer", path, where)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise PerfcastError(f"'time' of {fn!r} is {t!r:.40}, not a non-negative number", path, where)
    if not isinstance(ch, list):
        raise PerfcastError(f"'children' of {fn!r} is {type(ch).__name__}, not a list", path, where)
    return fn, fp or "", ln if ln is not None else 0, float(t), ch


def read_pyinstrument(path: Path) -> Experiment:
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("root_frame"), dict):
        raise PerfcastError("not a pyinstrument session (no 'root_frame' object)", path)
    tree = CallTree()
    incl: dict[str, float] = {}
    child_sum: dict[str, float] = defaultdict(float)
    keys: dict[str, tuple] = {}
    stack = [(doc["root_frame"], None, "root_frame")]
    while stack:
        fr, parent, where = stack.pop()
        fn, fp, ln, t, ch = _frame_fields(fr, path, where)
        key = (fn, fp, ln)
        base = fn if parent is None else parent + SEP + fn
        cp = base
        k = 2
        while cp in keys and keys[cp] != key:  # same name, another function: told apart by its place
            cp = f"{base} ({Path(fp).name}:{ln})" if k == 2 else f"{base} #{k}"
            k += 1
        if cp not in keys:
            keys[cp] = key
            tree.add(cp, parent, cp.rsplit(SEP, 1)[-1] if parent is not None else cp)
        incl[cp] = incl.get(cp, 0.0) + t
        if parent is not None:
            child_sum[parent] += t
        for i in range(len(ch) - 1, -1, -1):
            stack.append((ch[i], cp, f"{where}.children[{i}]"[-120:]))
    rows = []
    for cp, t in incl.items():
        excl = t - child_sum.get(cp, 0.0)
        if excl < -1e-9 * max(t, 1e-300) - 1e-12:
            raise PerfcastError(f"frame {cp[-80:]!r}: its children take {child_sum[cp]:g} s, more than its own "
                                f"{t:g} s", path)
        rows.append((cp, "time (I)", t))
        rows.append((cp, "time (E)", max(excl, 0.0)))
    data = pd.DataFrame(rows, columns=["callpath", "metric", "value"])
    data["rep"] = 0
    metrics = [Metric("time (I)", "s", "time", "inclusive", "pyinstrument frame time"),
               Metric("time (E)", "s", "time", "exclusive", "pyinstrument frame time less its children's")]
    meta = {"pyinstrument": {k: doc[k] for k in ("program", "duration", "sample_count", "start_time", "cpu_time")
                             if isinstance(doc.get(k), (str, int, float)) and not isinstance(doc.get(k), bool)}}
    return Experiment([], data, metrics, tree, meta)


def _sniff_pyinstrument(path: Path) -> bool:
    if not path.is_file():
        return False
    head, _ = read_ends(path, 4096)
    text = head.decode("utf-8", "replace")
    return text.lstrip().startswith("{") and '"root_frame"' in text or (
        '"sample_count"' in text and '"program"' in text and '"duration"' in text)


register(Reader("pyinstrument", "pyinstrument JSON session (pyinstrument -r json)", (".json",),
                _sniff_pyinstrument, lambda p, o: read_pyinstrument(p), fallback=False))

"""Reader for valgrind cachegrind output (``cachegrind.out.*``).

The text format (valgrind manual, "Cachegrind output file format")::

    desc: I1 cache: 32768 B, 64 B, 8-way associative
    cmd: ./app 64
    events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    fl=file.c
    fn=function
    <line> <count> <count> ...        (missing trailing counts are 0)
    summary: <total per event>

Counts are exclusive per function (cachegrind does not record callers).  A function without a
symbol is named by its address (``fn=0x0000000000004d50``, as callgrind writes it); it is shown as
``0x4d50 in <object>`` -- leading zeros dropped, and the object it lives in from the last ``ob=`` line
(the shared object, written by callgrind and by perfcast's callgrind conversion) or else the last
``fl=`` line (the source file), base name only, when that is known (not ``???``) -- so the same
address in two objects stays two functions and the name is the same on every rank and run.  Every function becomes
callpath ``app-><function>``; a function that appears under several ``fl=`` (its own file and
inlined headers) is summed into one.  One metric per event (``Ir``, ``Dr``, ``D1mr``, ...), kind
``count``, scope ``exclusive``, exact (``Metric.exact``: a simulator's counts do not vary between
reruns of the same program).  The ``summary:`` totals are checked against the sum of the counts, so
a truncated file is an error rather than silently smaller numbers.

A file name carrying ``rank<N>`` (``cachegrind.out.rank3``) gives the values a ``rank`` column; a
directory of such files is read as one experiment with one rank per file.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric
from ..text import fortran_name
from . import Reader, ReadOptions, register, read_text as read_checked

ROOT = "app"
_RANK = re.compile(r"rank[._-]?(\d+)")
_ADDR = re.compile(r"0x([0-9a-fA-F]+)")


def display_name(fn: str, obj: str | None = None, file: str | None = None) -> str:
    """``fn`` (a gfortran module procedure as ``module::procedure``, :func:`perfcast.text.fortran_name`)
    unless it is a bare address: then ``0x<hex without leading zeros>`` plus ``in <base name
    of obj, else of file>`` when one is known (module docstring)."""
    m = _ADDR.fullmatch(fn)
    if not m:
        return fortran_name(fn)
    name = f"0x{int(m.group(1), 16):x}"
    where = next((w for w in (obj, file) if w and w.strip() not in ("", "???")), None)
    return f"{name} in {Path(where.strip()).name}" if where else name

DESCRIPTIONS = {
    "Ir": "instructions executed", "I1mr": "I1 cache read misses", "ILmr": "LL cache instruction read misses",
    "Dr": "memory reads", "D1mr": "D1 cache read misses", "DLmr": "LL cache data read misses",
    "Dw": "memory writes", "D1mw": "D1 cache write misses", "DLmw": "LL cache data write misses",
    "Bc": "conditional branches", "Bcm": "conditional branches mispredicted",
    "Bi": "indirect branches", "Bim": "indirect branches mispredicted",
}


def parse(path: Path) -> tuple[list[str], dict[str, np.ndarray], dict]:
    """Events, per-function totals (name -> int64 vector over events) and header fields."""
    events: list[str] | None = None
    header: dict = {"desc": []}
    totals: dict[str, np.ndarray] = {}
    summary = None
    current = None
    obj = file = None
    ids: dict[tuple[str, str], str] = {}  # compressed "(id) name" of ob=/fl= (callgrind style)
    # the last line must end with a line end: cachegrind writes one, and a cut file ends inside a line
    text = read_checked(path, encoding="utf-8", errors="replace")
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isdigit():
            if events is None or current is None:
                raise PerfcastError("count line before 'events:' and 'fn='", path, lineno)
            parts = line.split()
            try:
                nums = [int(x) for x in parts[1:]]
            except ValueError:
                raise PerfcastError(f"non-integer count in {line[:60]!r}", path, lineno) from None
            if any(not 0 <= n < 2**62 for n in nums):
                raise PerfcastError(f"a count in {line[:60]!r} is negative or too large", path, lineno)
            if len(nums) > len(events):
                raise PerfcastError(f"{len(nums)} counts for {len(events)} events", path, lineno)
            vec = totals[current]
            vec[: len(nums)] += np.asarray(nums, dtype=np.int64)  # none given: all zero
            continue
        key, sep, value = line.partition(":") if ":" in line.split("=", 1)[0] else line.partition("=")
        key = key.strip()
        value = value.strip()
        if sep == "=" and key in ("fl", "fi", "fe", "ob"):
            m = re.fullmatch(r"\((\d+)\)\s*(.*)", value)
            if m:
                value = ids.setdefault((key, m.group(1)), m.group(2)) if m.group(2) else \
                    ids.get((key, m.group(1)), "???")
            if key == "ob":
                obj = value
            elif key == "fl":
                file = value
            continue
        if sep == "=" and key == "fn":
            if events is None:
                raise PerfcastError("'fn=' before the 'events:' line", path, lineno)
            current = display_name(value, obj, file) if value else "???"
            totals.setdefault(current, np.zeros(len(events), dtype=np.int64))
            continue
        if sep == ":" and key == "events":
            events = value.split()
            if not events:
                raise PerfcastError("empty 'events:' line", path, lineno)
            continue
        if sep == ":" and key == "summary":
            if events is None:
                raise PerfcastError("'summary:' before 'events:'", path, lineno)
            try:
                summary = np.array([int(x) for x in value.split()], dtype=np.int64)
            except (ValueError, OverflowError):
                raise PerfcastError("non-integer summary", path, lineno) from None
            continue
        if sep == ":" and key == "desc":
            header["desc"].append(value)
            continue
        if sep == ":" and key in ("cmd", "pid", "version", "creator", "positions"):
            header[key] = value
            continue
        raise PerfcastError(f"not a cachegrind output line: {line[:60]!r}", path, lineno)
    if events is None:
        raise PerfcastError("not a cachegrind output file (no 'events:' line)", path)
    if summary is not None:
        total = np.zeros(len(events), dtype=np.int64)
        for v in totals.values():
            total += v
        full = np.zeros(len(events), dtype=np.int64)
        full[: len(summary)] = summary[: len(events)]
        if not np.array_equal(total, full):
            raise PerfcastError("counts do not add up to the 'summary:' line (truncated or corrupt file)",
                                path, "summary")
    else:
        raise PerfcastError("no 'summary:' line (truncated file?)", path)
    header["caches"] = _geometry(header["desc"])
    return events, totals, header


def _geometry(desc: list[str]) -> dict:
    """Cache geometry from the desc: lines (a description with absurd numbers is not used)."""
    out = {}
    for d in desc:
        m = re.match(r"(\w+) cache:\s+(\d{1,18}) B, (\d{1,18}) B, (\d{1,9})-way", d)
        if m:
            out[m.group(1)] = {"size": int(m.group(2)), "line": int(m.group(3)), "ways": int(m.group(4))}
        elif (m := re.match(r"(\w+) cache:\s+(\d{1,18}) B, (\d{1,18}) B, direct-mapped", d)):
            out[m.group(1)] = {"size": int(m.group(2)), "line": int(m.group(3)), "ways": 1}
        elif (m := re.match(r"(\w+) cache:\s+(\d{1,18}) B, (\d{1,18}) B, fully associative", d)):
            out[m.group(1)] = {"size": int(m.group(2)), "line": int(m.group(3)),
                               "ways": int(m.group(2)) // max(int(m.group(3)), 1)}
    return out


def rank_of(path: Path) -> int | None:
    m = _RANK.search(path.name)
    return int(m.group(1)) if m else None


def read_files(paths: list[Path], root: str = ROOT) -> Experiment:
    """One experiment from per-rank cachegrind files (rank from the name, else the file's index)."""
    frames, metrics, tree, headers = [], {}, CallTree(), []
    tree.add(root, None, root)
    ranks_seen: set[int] = set()
    for i, path in enumerate(sorted(paths, key=lambda p: (rank_of(p) is None, rank_of(p) or 0, p.name))):
        events, totals, header = parse(path)
        rank = rank_of(path)
        rank = i if rank is None else rank
        if rank in ranks_seen:
            raise PerfcastError(f"two files for rank {rank}", path)
        ranks_seen.add(rank)
        headers.append({"file": path.name, "rank": rank, **{k: v for k, v in header.items() if k != "desc"}})
        names = list(totals)
        paths_ = []
        for fn in names:
            name = "[unknown]" if fn == "???" else fn
            cp = root + SEP + name
            tree.add(cp, root, name)
            paths_.append(cp)
        mat = np.array([totals[f] for f in names], dtype=np.int64).reshape(len(names), len(events))
        for j, ev in enumerate(events):
            # a simulator's counts: a rerun of the same program gives the same numbers (Metric.exact)
            metrics.setdefault(ev, Metric(ev, "#", "count", "exclusive", DESCRIPTIONS.get(ev, ""), exact=True))
            frames.append(pd.DataFrame({"callpath": paths_, "metric": ev, "value": mat[:, j].astype(float),
                                        "rank": rank}))
    if not frames:
        raise PerfcastError("no cachegrind data")
    data = pd.concat(frames, ignore_index=True)
    # a function whose name repeats after "???" renaming, summed
    data = data.groupby(["callpath", "metric", "rank"], sort=False, as_index=False)["value"].sum()
    data["rep"] = 0
    meta = {"cachegrind": headers}
    exp = Experiment([], data, metrics.values(), tree, meta)
    return exp


def _sniff(path: Path) -> bool:
    if path.is_dir():
        return any(_sniff(p) for p in path.glob("cachegrind.out*") if p.is_file())
    with open(path, "rb") as fh:
        head = fh.read(4096).decode("utf-8", "replace")
    return (bool(re.search(r"^events: ", head, re.M)) and ("fl=" in head or "summary:" in head)
            and "callgrind" not in head and "\ncalls=" not in head)


def _read(path: Path, options: ReadOptions) -> Experiment:
    if path.is_dir():
        files = sorted(p for p in path.glob("cachegrind.out*") if p.is_file())
        if not files:
            raise PerfcastError("no cachegrind.out* files in this directory", path)
        return read_files(files)
    return read_files([path])


register(Reader("cachegrind", "valgrind cachegrind output (cachegrind.out.*; a directory of per-rank files)",
                (), _sniff, _read, directories=True,
                files=lambda d: sorted(p for p in d.glob("cachegrind.out*") if p.is_file() and _sniff(p))))

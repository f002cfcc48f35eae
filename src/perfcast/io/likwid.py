"""Reader for LIKWID ``likwid-perfctr`` text output (wrapper mode and Marker API regions).

What is read is the default (non-CSV) text ``likwid-perfctr -C ... -g GROUP ./app`` and
``likwid-perfctr -m ...`` print, saved with ``-o FILE.txt`` or from the terminal: sections headed

* ``Group N: NAME`` (wrapper mode: the whole run, callpath ``app``), or
* ``Region R, Group N: NAME`` (Marker API: one callpath ``app->R`` per region),

each followed by ASCII tables (``+---+`` borders, ``| cell |`` rows):

* ``Region Info | HWThread 0 | ...`` -- ``RDTSC Runtime [s]`` and ``call count`` per thread
  (metrics ``RDTSC Runtime`` in s and ``call count``);
* ``Event | Counter | HWThread 0 | ...`` -- raw counts: one metric per event (``INSTR_RETIRED_ANY``,
  ``CPU_CLK_UNHALTED_CORE``, ``CAS_COUNT_RD``, ...), kind ``count``; an event measured on several
  counters (``CAS_COUNT_RD`` on ``MBOX0C0``..``MBOX7C0``, one per memory channel) is summed per thread;
* ``Metric | HWThread 0 | ...`` -- the group's derived metrics, named without the bracketed unit
  (``Memory data volume [GBytes]`` -> metric ``Memory data volume``, unit ``GBytes``): kind ``time``
  for seconds, ``bytes`` for byte volumes (``Bytes``, ``KBytes``, ``MBytes``, ``GBytes``, ``TBytes``),
  ``other`` for rates, ratios, frequencies, energies and powers.

Columns ``HWThread N`` (LIKWID 5) and ``Core N`` (LIKWID 4) give the ``thread`` location column (the
hardware thread number).  The ``... STAT`` tables (``Sum | Min | Max | Avg`` over the threads) are
reductions of the per-thread values and are skipped.  Cells LIKWID prints for counters it could not
read (``-``) and non-finite derived values (``nan``, ``inf`` in Metric tables) are left out and
listed in ``meta['likwid']['not_available']``; a non-finite raw count or region runtime is refused.
Tables of other devices (``GPU N``, from ``-G``/``-W``) are skipped and listed in
``meta['likwid']['skipped_tables']``; a table with any other header is refused (it would be dropped
silently).  A row repeated in one table (the same event on the same counter) is refused: it is
not a second measurement, and summing it would double the count.

The file must end with a line end (likwid-perfctr writes one), and every table must be closed by
its border, so a file cut anywhere is refused.  When several groups in one file give the
same metric for the same callpath and thread (``INSTR_RETIRED_ANY`` is in every group), the first
group's value is kept and the others are listed in ``meta['likwid']['duplicates']``.

A file name carrying ``rank<N>`` (LIKWID's ``-o out.rank%r.txt``) gives the values a ``rank``
column; a directory of such files is one experiment with a rank per file.

Not read: the CSV output of ``-O``, the timeline mode (``-t``) and LIKWID 4.0's
``Group N: Region R`` headers (no real example of these was available to test against).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric
from . import Reader, ReadOptions, register, read_text as read_checked
from .perf import rank_of

ROOT = "app"
STAT_COLUMNS = ["Sum", "Min", "Max", "Avg"]

_BORDER = re.compile(r"^\+-[-+]*\+$")
_GROUP = re.compile(r"^Group (\d+):\s*(\S.*?)?\s*$")
_REGION = re.compile(r"^Region (\S.*?), Group (\d+):\s*(\S.*?)?\s*$")
_LOCATION = re.compile(r"^(?:HWThread|Core) (\d{1,7})$")
_OTHER_DEVICE = re.compile(r"^(?:GPU|Nvidia GPU|AMD GPU|Socket) \d{1,7}$")
_UNIT = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\[\]]*)\]$")
_BYTE_UNIT = re.compile(r"^[KMGTP]?i?B(ytes)?$")
_ENERGY = re.compile(r"^PWR_\w*ENERGY$")
_MISSING = {"-", "nan", "-nan", "+nan", "inf", "-inf", "+inf"}
_SNIFF = re.compile(r"^(?:Region \S.*?, )?Group \d+:.*\n\+-[-+]*\+[ \t]*\n\|\s*(?:Event|Region Info|Metric)\s*\|",
                    re.MULTILINE)


def _text(path: Path) -> str:
    """The file's text; a file not ending with a line end is refused (likwid-perfctr always ends
    its output with one, so a missing one means the file was cut)."""
    text = read_checked(path, encoding="utf-8")
    if not text.strip():
        raise PerfcastError("empty file (no likwid-perfctr output)", path, 1)
    return text


def _cells(line: str) -> list[str] | None:
    s = line.strip()
    if len(s) < 2 or not (s.startswith("|") and s.endswith("|")):
        return None
    return [c.strip() for c in s[1:-1].split("|")]


def _value(cell: str, what: str, path, lineno, derived: bool = True) -> float | None:
    """The number in a cell, None for LIKWID's 'not available' cells: ``-`` anywhere, ``nan`` and
    ``inf`` only in derived-metric tables (a ratio over a zero count); a raw count or a region's
    runtime/call count is never non-finite, so there it is damage and refused."""
    if cell == "-" or (derived and cell.lower() in _MISSING):
        return None
    try:
        v = float(cell)
    except ValueError:
        raise PerfcastError(f"non-numeric value {cell!r} for {what}", path, lineno) from None
    if not math.isfinite(v):
        if derived:
            return None
        raise PerfcastError(f"non-finite value {cell!r} for {what}", path, lineno)
    return v


def _derived(label: str) -> Metric:
    m = _UNIT.match(label)
    name, unit = (m.group("name"), m.group("unit").strip()) if m and m.group("name") else (label, "")
    if unit == "s":
        kind = "time"
    elif _BYTE_UNIT.match(unit):
        kind = "bytes"
    else:
        kind = "other"
    return Metric(name, unit, kind, "inclusive", f"LIKWID derived metric {label}")


def parse(lines, source: str | Path = "likwid-perfctr") -> list[dict]:
    """Tables of likwid-perfctr text: a list of sections.

    Each section: {'region', 'group', 'group_name', 'line', 'tables': [(header, rows, line)]} where
    rows are (cells, line number) -- validated for shape (every table closed, every row as wide as
    its header); numbers are checked later.
    """
    sections: list[dict] = []
    cur: dict | None = None
    lines = list(lines)
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].rstrip("\r\n")
        lineno = i + 1
        stripped = line.strip()
        m = _REGION.match(stripped)
        g = None if m else _GROUP.match(stripped)
        if m or g:
            if m:
                if len(m.group(2)) > 9:
                    raise PerfcastError(f"group number {m.group(2)[:20]}... is not a LIKWID group number",
                                        source, lineno)
                cur = {"region": m.group(1), "group": int(m.group(2)), "group_name": m.group(3) or "",
                       "line": lineno, "tables": []}
            else:
                if len(g.group(1)) > 9:
                    raise PerfcastError(f"group number {g.group(1)[:20]}... is not a LIKWID group number",
                                        source, lineno)
                cur = {"region": None, "group": int(g.group(1)), "group_name": g.group(2) or "",
                       "line": lineno, "tables": []}
            sections.append(cur)
            i += 1
            continue
        if _BORDER.match(stripped):
            # a table: border, header row, border, rows, border
            head_line = lineno
            if i + 1 >= n:
                raise PerfcastError("truncated table: the file ends after a table border", source, lineno)
            header = _cells(lines[i + 1])
            if header is None:
                raise PerfcastError(f"table border not followed by a header row: {lines[i + 1].strip()[:60]!r}",
                                    source, lineno + 1)
            if i + 2 >= n or not _BORDER.match(lines[i + 2].strip()):
                raise PerfcastError("truncated table: no border below the header row", source,
                                    min(lineno + 2, n))
            rows = []
            j = i + 3
            closed = False
            while j < n:
                s = lines[j].strip()
                if _BORDER.match(s):
                    closed = True
                    break
                cells = _cells(s)
                if cells is None:
                    raise PerfcastError(f"truncated table {header[0]!r} (started line {head_line}): "
                                        f"{s[:60]!r} is not a table row", source, j + 1)
                if len(cells) != len(header):
                    raise PerfcastError(f"table row has {len(cells)} cells, its header {len(header)}",
                                        source, j + 1)
                rows.append((cells, j + 1))
                j += 1
            if not closed:
                raise PerfcastError(f"truncated table {header[0]!r} (started line {head_line}): the file ends "
                                    f"before its closing border", source, n)
            if header[0] in ("Region Info", "Event", "Metric") and cur is None:
                raise PerfcastError(f"table {header[0]!r} before any 'Group N: NAME' or "
                                    f"'Region R, Group N: NAME' line", source, head_line)
            if cur is not None:
                cur["tables"].append((header, rows, head_line))
            i = j + 1
            continue
        i += 1
    return sections


def _locations(header: list[str]) -> list[int] | None:
    out = []
    for h in header:
        m = _LOCATION.match(h)
        if not m:
            return None
        out.append(int(m.group(1)))
    return out


def read_text(text: str, path: Path, rank: int | None = None, root: str = ROOT
              ) -> tuple[pd.DataFrame, dict[str, Metric], CallTree, dict]:
    lines = text.splitlines()
    sections = parse(lines, path)
    if not any(s["tables"] for s in sections):
        raise PerfcastError("no likwid-perfctr result tables (expected 'Group N: NAME' or "
                            "'Region R, Group N: NAME' followed by Event/Metric tables)", path, 1)
    tree = CallTree()
    tree.add(root, None, root)
    metrics: dict[str, Metric] = {}
    values: dict[tuple, float] = {}      # (callpath, metric, thread) -> value
    origin: dict[tuple, int] = {}        # ... -> group number
    missing, skipped, duplicates, groups = [], [], [], []

    for sec in sections:
        if not sec["tables"]:
            continue
        region = sec["region"]
        cp = root if region is None else tree.add(f"{root}{SEP}{region}", root, region)
        groups.append({"region": region, "group": sec["group"], "name": sec["group_name"]})
        sec_vals: dict[tuple, float] = {}
        sec_missing: dict[tuple, list] = {}
        for header, rows, head_line in sec["tables"]:
            kind = header[0]
            if kind == "Event" and len(header) > 1 and header[1] == "Counter":
                cols = header[2:]
            elif kind in ("Metric", "Region Info"):
                cols = header[1:]
            else:
                skipped.append({"line": head_line, "table": kind, "reason": "not a likwid-perfctr result table"})
                continue
            if cols == STAT_COLUMNS:
                continue  # Sum/Min/Max/Avg over the threads: reductions of the per-thread values
            threads = _locations(cols)
            if (threads is None or not threads) and not (cols and all(_OTHER_DEVICE.match(c) for c in cols)):
                # only tables of other devices (GPU N, from -G/-W) are skipped; any other header is
                # damage and would drop the whole table silently
                raise PerfcastError(f"table {kind!r} has columns {', '.join(c[:20] for c in cols[:3])}...: "
                                    f"expected HWThread N or Core N columns", path, head_line + 1)
            if threads is None or not threads:
                skipped.append({"line": head_line, "table": kind, "region": region,
                                "reason": f"columns {', '.join(cols[:3])}... are not HWThread/Core columns"})
                continue
            first = 2 if kind == "Event" else 1
            seen_rows: dict[tuple, int] = {}
            for cells, lineno in rows:
                label = cells[0]
                if not label:
                    raise PerfcastError(f"row without a name in table {kind!r}", path, lineno)
                if kind == "Event":
                    name = label
                    if _ENERGY.match(name):  # RAPL counters: LIKWID prints them scaled to joules
                        metrics.setdefault(name, Metric(name, "J", "other", "inclusive", f"LIKWID event {name}"))
                    else:
                        metrics.setdefault(name, Metric(name, "#", "count", "inclusive", f"LIKWID event {name}"))
                    counter = cells[1]
                elif kind == "Region Info":
                    if label == "call count":
                        name = "call count"
                        metrics.setdefault(name, Metric(name, "#", "count", "inclusive",
                                                        "Marker API region calls"))
                    else:
                        mt = _derived(label)
                        name = mt.name
                        metrics.setdefault(name, Metric(name, mt.unit, mt.kind, "inclusive",
                                                        f"LIKWID region info {label}"))
                    counter = None
                else:
                    mt = _derived(label)
                    name = mt.name
                    if name in metrics and metrics[name].unit != mt.unit:
                        raise PerfcastError(f"metric {name!r} given in {metrics[name].unit!r} and in "
                                            f"{mt.unit!r}", path, lineno)
                    metrics.setdefault(name, mt)
                    counter = None
                row_key = (label, cells[1] if kind == "Event" else None)
                if row_key in seen_rows:
                    what = f"event {label!r} on counter {cells[1]!r}" if kind == "Event" else repr(label)
                    raise PerfcastError(f"{what} appears twice in this table (first on line "
                                        f"{seen_rows[row_key]}): a repeated row is damage, not a second "
                                        f"measurement", path, lineno)
                seen_rows[row_key] = lineno
                for t, col, cell in zip(threads, cols, cells[first:]):
                    v = _value(cell, f"{label!r} on {col}", path, lineno, derived=(kind == "Metric"))
                    key = (name, t)
                    if v is None:
                        sec_missing.setdefault((name, counter), []).append(t)
                        continue
                    if kind == "Event" and key in sec_vals:
                        sec_vals[key] += v   # the same event on several counters (memory channels)
                    elif key in sec_vals:
                        raise PerfcastError(f"{label!r} appears twice in this section", path, lineno)
                    else:
                        sec_vals[key] = v
        for (name, counter), ts in sec_missing.items():
            item = {"region": region, "group": sec["group"], "name": name, "threads": ts}
            if counter:
                item["counter"] = counter
            missing.append(item)
        for (name, t), v in sec_vals.items():
            key = (cp, name, t)
            if key in values:
                duplicates.append({"region": region, "group": sec["group"], "name": name, "thread": t,
                                   "kept_group": origin[key]})
                continue
            values[key] = v
            origin[key] = sec["group"]

    used = {name for _, name, _ in values}
    metrics = {k: m for k, m in metrics.items() if k in used}
    df = pd.DataFrame([(cp, m, float(v), t) for (cp, m, t), v in values.items()],
                      columns=["callpath", "metric", "value", "thread"])
    if rank is not None:
        df["rank"] = rank
    meta = {"file": path.name, "rank": rank, "groups": groups, "not_available": missing}
    if skipped:
        meta["skipped_tables"] = skipped
    if duplicates:
        meta["duplicates"] = _dedupe(duplicates)
    return df, metrics, tree, meta


def _dedupe(dups: list[dict]) -> list[dict]:
    """Duplicates grouped per (region, group, name): the threads listed once."""
    out: dict[tuple, dict] = {}
    for d in dups:
        k = (d["region"], d["group"], d["name"], d["kept_group"])
        out.setdefault(k, {"region": d["region"], "group": d["group"], "name": d["name"],
                           "kept_group": d["kept_group"], "threads": []})["threads"].append(d["thread"])
    return list(out.values())


def is_likwid(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\x00" in head:
        return False
    return bool(_SNIFF.search(head.decode("utf-8", "replace").replace("\r\n", "\n")))


def read_files(paths: list[Path], root: str = ROOT) -> Experiment:
    frames, metrics, tree, metas = [], {}, CallTree(), []
    ranked = [rank_of(p) for p in paths]
    use_rank = len(paths) > 1 or ranked[0] is not None
    for i, path in enumerate(paths):
        rank = (ranked[i] if ranked[i] is not None else i) if use_rank else None
        df, ms, t, meta = read_text(_text(path), path, rank, root)
        tree = tree.merged(t) if len(tree) else t
        for name, m in ms.items():
            if name in metrics and (metrics[name].unit, metrics[name].kind) != (m.unit, m.kind):
                raise PerfcastError(f"metric {name!r} means different things in different files", path)
            metrics.setdefault(name, m)
        frames.append(df)
        metas.append(meta)
    data = pd.concat(frames, ignore_index=True)
    data["rep"] = 0
    return Experiment([], data, metrics.values(), tree, {"likwid": metas[0] if len(metas) == 1 else metas})


def _files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and _safe_is_likwid(p))


def _safe_is_likwid(p: Path) -> bool:
    try:
        return is_likwid(p)
    except OSError:
        return False


def _sniff(path: Path) -> bool:
    if path.is_dir():
        return bool(_files_in(path))
    return is_likwid(path)


def _read(path: Path, options: ReadOptions) -> Experiment:
    if path.is_dir():
        files = _files_in(path)
        if not files:
            raise PerfcastError("no likwid-perfctr output files here", path)
        return read_files(files)
    return read_files([path])


register(Reader("likwid", "LIKWID likwid-perfctr text output (wrapper mode and Marker API regions; per-rank "
                "files: *rank<N>*)", (), _sniff, _read, directories=True, files=_files_in))

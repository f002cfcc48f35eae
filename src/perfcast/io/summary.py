"""Summary-statistics tables: one row per point and callpath holding statistics, not values.

Benchmark suites and published data sets often keep only a summary of many timed calls per
configuration, e.g. Extra-P's ``mpi_data.csv``::

    mpi,variable,Ranks,N,mean,sd,median,min,max,iqr,ci_sd_left,...,smallest_left,...
    IntelMPI,MPI_Barrier,32,1600,13.26,19.45,11.215,10.32,478.47,2.94,12.31,...,IQR,...

Column roles (:class:`SummaryLayout`; every role can be given explicitly, otherwise it is found):

* **statistics** -- columns named like a statistic (case-insensitive, an optional unit suffix
  ``median [us]`` / ``median(us)`` allowed): ``median``, ``mean``/``avg``/``average``,
  ``min``/``minimum``, ``max``/``maximum``, a count (``N``, ``count``, ``repetitions``, ``reps``,
  ``samples``), a spread (``sd``, ``std``, ``stdev``, ``var``, ``iqr``, ``mad``, ``se``, ``sem``,
  ``cv``), quantiles (``q1``, ``p95``, ...) and confidence bounds (``ci_*``).  The columns from
  the first statistic on form the statistics block.
* **keys** -- the columns before the statistics block.  Numeric ones are parameters (``Ranks``);
  the others name the callpath, joined with ``/`` in column order (``IntelMPI/MPI_Barrier``; a
  flat name, since an MPI library is not a caller; ``join="->"`` nests them instead).  Key
  columns named ``metric`` and ``unit`` give the metric name and its unit.  ``--param COL``
  (:attr:`ReadOptions.parameters`) names the parameters; the remaining key columns then name the
  callpath, numeric ones as ``col=value``.
* **value** -- the statistic that becomes the measurement: ``median`` when present, else
  ``mean`` (``SummaryLayout(value=("mean",))`` chooses another).

What is stored.  There are no repetitions in such a table, and none are invented: each row gives
one value (the chosen statistic) at repetition 0.  Every other numeric statistic of the row --
the count ``N``, ``sd``, ``iqr``, min/max, confidence bounds -- is kept verbatim in
``meta["summary"]`` (``columns`` and ``rows``: parameters, callpath, metric, then the statistics)
so the spread behind each value stays available; ``SummaryLayout(spread_metrics=True)`` also
turns them into metrics (``time sd``, ``time N``, ...).  Label columns in the statistics block
(every cell non-numeric, such as ``smallest_left = IQR``) are listed in
``meta["summary"]["ignored_columns"]``.

Units.  Taken from the layout, a ``unit`` key column, or the value column's suffix
(``median [us]``); otherwise left empty -- except for the known data set below.

* Extra-P's ``mpi_data.csv`` (Intel MPI / Open MPI collectives, header ``mpi, variable, Ranks,
  N, mean, sd, median, ...``) does not state its unit; it is **microseconds per call**
  (metric ``time``, unit ``us``).  Evidence: MPI_Barrier's median is 11.2 at 32 ranks and
  51.8 at 512, its fastest call 10.3 -- as microseconds these are typical barrier latencies of
  an HPC interconnect, whereas nanoseconds would be faster than one network round trip
  (~1 us) and milliseconds 1000x slower than any cluster barrier; the collectives grow with the
  work they do (Allgather and Alltoall reach 12,628 and 9,218 at 512 ranks, i.e. 10-13 ms as
  microseconds), and microseconds per call is the unit of the micro-benchmarks (IMB, OSU) such
  tables come from.  Each row summarises N ~ 400..2000 timed calls.

Errors name the file, the line and the column: a missing value column, a row with too many or
too few fields, a non-numeric parameter or statistic, a negative count or spread, a repeated
point and callpath.
"""

from __future__ import annotations

import csv
import io as _io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PerfcastError
from ..experiment import LISTED_REPETITIONS, RESERVED, CallTree, Experiment, Metric, guess_kind
from ..lazy import LazyModule
from . import ReadOptions, Reader, register, read_text as read_checked

pd = LazyModule("pandas")   # imported when this reader reads (an Extra-P text file is only sniffed here)

__all__ = ["SummaryLayout", "read_summary", "statistic_of"]

#: canonical statistic of each recognised column name (lower case, unit suffix removed)
_VALUE_STATS = {"median": "median", "mean": "mean", "avg": "mean", "average": "mean",
                "min": "min", "minimum": "min", "max": "max", "maximum": "max"}
_COUNT_STATS = {"n", "count", "reps", "repetitions", "samples", "nobs", "runs"}
_SPREAD_STATS = {"sd", "std", "stdev", "stddev", "var", "variance", "iqr", "mad", "se", "sem", "cv"}
_NONNEGATIVE = _COUNT_STATS | _SPREAD_STATS
_PATTERN_STATS = re.compile(r"(ci|conf)[_\-. ].+|[pq]\d{1,3}|(percentile|quantile)[_\-. ]?\d+")
_UNIT_SUFFIX = re.compile(r"^(.*?)\s*[\[(]\s*([^\[\]()]*?)\s*[\])]\s*$")
_NUMBER = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")
_TIME_UNITS = {"s", "sec", "ms", "us", "usec", "µs", "ns", "nsec", "cycles"}

#: data sets whose header is known exactly, with what the file itself does not say
_KNOWN = {
    ("mpi", "variable", "ranks", "n", "mean", "sd", "median", "min", "max", "iqr", "ci_sd_left",
     "ci_sd_right", "ci_median_left", "ci_median_right", "ci_iqr_left", "ci_iqr_right", "smallest_left",
     "largest_left", "smallest_right", "largest_right", "smallest_interval", "largest_interval"): {
        "unit": "us", "metric": "time",
        "note": "Extra-P mpi_data.csv: microseconds per call (inferred from the magnitudes; see "
                "perfcast.io.summary)"},
}


@dataclass(frozen=True)
class SummaryLayout:
    """Which column plays which role; ``None`` = found from the header (see the module doc)."""

    #: numeric columns that are parameters
    parameters: tuple[str, ...] | None = None
    #: columns whose cells, in this order, name the callpath
    callpath: tuple[str, ...] | None = None
    #: the statistic that becomes the value: the first of these present (a statistic or a column name)
    value: tuple[str, ...] = ("median", "mean")
    #: metric name (default: a ``metric`` column, else ``time`` for time units, else ``value``)
    metric: str | None = None
    #: unit of the value (default: ``unit`` column, the value column's ``[unit]`` suffix, known data sets)
    unit: str | None = None
    #: joins the callpath columns: ``/`` gives one flat name, ``->`` nests them in the call tree
    join: str = "/"
    #: also store every other numeric statistic as a metric ``<metric> <column>``
    spread_metrics: bool = False
    #: field delimiter (default: the most frequent of , ; tab in the header line)
    delimiter: str | None = None


def _split_unit(name: str) -> tuple[str, str]:
    m = _UNIT_SUFFIX.match(name.strip())
    if m and m.group(1):
        return m.group(1).strip(), m.group(2)
    return name.strip(), ""


def statistic_of(column: str) -> str | None:
    """The statistic a column name stands for (``median``, ``mean``, ``min``, ``max``, ``count``,
    ``spread``, ``quantile``), or None for other columns."""
    base = _split_unit(column)[0].lower()
    if base in _VALUE_STATS:
        return _VALUE_STATS[base]
    if base in _COUNT_STATS:
        return "count"
    if base in _SPREAD_STATS:
        return "spread"
    if _PATTERN_STATS.fullmatch(base):
        return "quantile"
    return None


def _statistics(header: list[str], parameters=()) -> list[str | None]:
    """The statistic of each header column in context: columns named as parameters are none, and
    ``n`` is a problem size rather than a count when another column holds the count."""
    given = {p.lower() for p in parameters}
    stats = [None if h.lower() in given else statistic_of(h) for h in header]
    bases = [_split_unit(h)[0].lower() for h in header]
    if sum(s == "count" for s in stats) > 1:
        stats = [None if (s == "count" and b == "n") else s for s, b in zip(stats, bases)]
    return stats


def _is_number(s: str) -> bool:
    return bool(_NUMBER.fullmatch(s))


def _delimiter(line: str) -> str:
    counts = {d: line.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _first_line(path: Path, limit: int = 1 << 16) -> str | None:
    with open(path, "rb") as f:
        raw = f.read(limit)
    if b"\x00" in raw:
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if e.start < len(raw) - 3:
            return None
        text = raw[:e.start].decode("utf-8-sig")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line
    return None


def _sniff(path: Path) -> bool:
    line = _first_line(path)
    if line is None:
        return False
    names = next(csv.reader([line], delimiter=_delimiter(line)), [])
    stats = _statistics(names)
    lower = {n.strip().lower() for n in names}
    if {"callpath", "metric", "value"} <= lower:  # a tidy table
        return False
    first = next((i for i, s in enumerate(stats) if s), None)
    return (first is not None and first > 0 and any(s in ("median", "mean") for s in stats)
            and "count" in stats)


class _Table:
    """The CSV as header + rows, each row with its (last) line number."""

    def __init__(self, path: Path, delimiter: str | None):
        text = read_checked(path)  # refuses a last line without its line end (a cut file)
        first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), None)
        if first is None:
            raise PerfcastError("empty file", path)
        reader = csv.reader(_io.StringIO(text, newline=""), delimiter=delimiter or _delimiter(first), strict=True)
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.lines: list[int] = []
        try:
            for row in reader:
                if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                    continue
                if not self.header:
                    self.header = [c.strip() for c in row]
                    self.header_line = reader.line_num
                    continue
                if len(row) != len(self.header):
                    raise PerfcastError(f"row has {len(row)} field(s) but the header has {len(self.header)}",
                                        path, reader.line_num)
                self.rows.append(row)
                self.lines.append(reader.line_num)
        except csv.Error as e:
            raise PerfcastError(f"not valid CSV: {e}", path, reader.line_num) from None
        seen = set()
        for i, name in enumerate(self.header):
            if not name:
                raise PerfcastError(f"column {i + 1} of the header has no name", path, self.header_line)
            if name in seen:
                raise PerfcastError(f"column {name!r} appears twice in the header", path, self.header_line)
            seen.add(name)
        if not self.rows:
            raise PerfcastError("the table has a header but no rows", path, self.header_line)

    def column(self, name: str) -> list[str]:
        j = self.header.index(name)
        return [r[j].strip() for r in self.rows]


def _find(table: _Table, name: str, path: Path, role: str) -> str:
    """The header column named ``name`` (exact, else case-insensitive)."""
    if name in table.header:
        return name
    for h in table.header:
        if h.lower() == name.lower() or _split_unit(h)[0].lower() == name.lower():
            return h
    raise PerfcastError(f"no column {name!r} (the {role}); columns: {', '.join(table.header)}",
                        path, "header")


def _number_column(table: _Table, col: str, path: Path, what: str) -> np.ndarray:
    out = np.empty(len(table.rows))
    for i, cell in enumerate(table.column(col)):
        if not _is_number(cell):
            shown = repr(cell) if cell else "an empty cell"
            raise PerfcastError(f"{what} {col!r}: {shown} is not a number", path,
                                table.lines[i])
        v = float(cell)
        if not math.isfinite(v):
            raise PerfcastError(f"{what} {col!r}: {cell!r} overflows", path, table.lines[i])
        out[i] = v
    return out


def _numeric_share(cells: list[str]) -> tuple[int, int]:
    filled = [c for c in cells if c]
    return sum(_is_number(c) for c in filled), len(filled)


def read_summary(path: str | Path, layout: SummaryLayout | None = None,
                 options: ReadOptions | None = None) -> Experiment:
    """Read a summary-statistics table (see the module doc)."""
    path = Path(path)
    layout = layout or SummaryLayout()
    t = _Table(path, layout.delimiter)
    lower_header = tuple(h.lower() for h in t.header)
    known = _KNOWN.get(lower_header, {})

    # -- the value column and the statistics block
    value_col = None
    for cand in layout.value:
        canon = _VALUE_STATS.get(cand.lower(), cand.lower())
        value_col = next((h for h in t.header if h == cand), None) or next(
            (h for h in t.header if statistic_of(h) == canon or _split_unit(h)[0].lower() == cand.lower()), None)
        if value_col:
            break
    if value_col is None:
        raise PerfcastError(f"no {' or '.join(layout.value)} column to take the values from; columns: "
                            f"{', '.join(t.header)}", path, "header")
    params_given = layout.parameters if layout.parameters is not None else (
        tuple(options.parameters) if options and options.parameters else None)
    col_stats = _statistics(t.header, params_given or ())
    stat_idx = [i for i, st in enumerate(col_stats) if st]
    first_stat = stat_idx[0] if stat_idx else t.header.index(value_col)

    # -- key columns: parameters, callpath, metric, unit
    params = [_find(t, p, path, "parameter") for p in params_given] if params_given is not None else None
    cps = [_find(t, c, path, "callpath column") for c in layout.callpath] if layout.callpath is not None else None
    keys = t.header[:first_stat]
    special = {h.lower(): h for h in keys if h.lower() in ("metric", "unit")}
    metric_col = special.get("metric") if not (cps and special.get("metric") in cps) else None
    unit_col = special.get("unit") if not (cps and special.get("unit") in cps) else None
    used = set(params or ()) | set(cps or ()) | {metric_col, unit_col, value_col}
    free = [h for h in keys if h not in used]
    if params is None:
        params = []
        for h in free:
            if cps is not None and h in cps:
                continue
            n_num, n_filled = _numeric_share(t.column(h))
            if n_filled and n_num == n_filled:
                params.append(h)
            elif n_num and n_num * 2 >= n_filled:
                bad = next(i for i, c in enumerate(t.column(h)) if c and not _is_number(c))
                raise PerfcastError(f"column {h!r}: {t.column(h)[bad]!r} is not a number, unlike the column's "
                                    f"other values (name the parameters with --param to read it as a name)",
                                    path, t.lines[bad])
    if cps is None:
        cps = [h for h in free if h not in params]
    for p in params:
        if p in RESERVED:
            raise PerfcastError(f"parameter name {p!r} is reserved (reserved: {', '.join(RESERVED)})",
                                path, "header")
        if p == value_col:
            raise PerfcastError(f"column {p!r} is a statistic, not a parameter", path, "header")
    overlap = set(params) & set(cps)
    if overlap:
        raise PerfcastError(f"column(s) {', '.join(sorted(overlap))} given both as parameter and callpath",
                            path, "header")

    coords = {p: _number_column(t, p, path, "parameter") for p in params}
    values = _number_column(t, value_col, path, "statistic")

    # -- callpaths
    tree = CallTree()
    names: list[str] = []
    numeric_cp = {c: _numeric_share(t.column(c))[0] == len(t.rows) for c in cps}
    cp_cells = [t.column(c) for c in cps]
    for i in range(len(t.rows)):
        parts = []
        for c, cells in zip(cps, cp_cells):
            cell = cells[i]
            if not cell:
                raise PerfcastError(f"empty cell in the callpath column {c!r}", path, t.lines[i])
            parts.append(f"{c}={cell}" if numeric_cp[c] else cell)
        if not parts:
            parts = ["root"]
        if layout.join == "->":
            name = tree.add_frames(parts)
        else:
            name = layout.join.join(parts)
            if name not in tree:
                tree.add(name, None, name)
        names.append(name)

    # -- metric and unit
    metric_names = t.column(metric_col) if metric_col else None
    units = t.column(unit_col) if unit_col else None
    header_unit = _split_unit(value_col)[1]
    default_unit = layout.unit if layout.unit is not None else (header_unit or known.get("unit", ""))

    def default_metric(unit: str) -> str:
        if layout.metric:
            return layout.metric
        if known.get("metric"):
            return known["metric"]
        return "time" if unit.lower() in _TIME_UNITS else "value"

    row_metric: list[str] = []
    metric_unit: dict[str, tuple[str, int]] = {}
    for i in range(len(t.rows)):
        unit = units[i] if units is not None and units[i] else default_unit
        name = (metric_names[i] if metric_names is not None else "") or default_metric(unit)
        if name in metric_unit and metric_unit[name][0] != unit:
            raise PerfcastError(f"metric {name!r} has the unit {unit!r} here but {metric_unit[name][0]!r} on "
                                f"line {metric_unit[name][1]}", path, t.lines[i])
        metric_unit.setdefault(name, (unit, t.lines[i]))
        row_metric.append(name)

    # -- the other statistics: numeric columns kept, label columns ignored
    stat_cols, ignored = [], []
    for h in t.header[first_stat:]:
        if h in (value_col, *params, *cps, metric_col, unit_col):
            continue
        n_num, n_filled = _numeric_share(t.column(h))
        if n_num == 0:
            ignored.append(h)
            continue
        stat_cols.append(h)
    stats: dict[str, list[float | None]] = {}
    for h in stat_cols:
        col: list[float | None] = []
        canon = _split_unit(h)[0].lower()
        for i, cell in enumerate(t.column(h)):
            if not cell:
                col.append(None)
                continue
            if not _is_number(cell):
                raise PerfcastError(f"statistic {h!r}: {cell!r} is not a number", path, t.lines[i])
            v = float(cell)
            if not math.isfinite(v):
                raise PerfcastError(f"statistic {h!r}: {cell!r} overflows", path, t.lines[i])
            if canon in _NONNEGATIVE and v < 0:
                raise PerfcastError(f"statistic {h!r} cannot be negative ({cell})", path, t.lines[i])
            if canon in _COUNT_STATS and v != int(v):
                raise PerfcastError(f"count {h!r}: {cell!r} is not a whole number", path, t.lines[i])
            col.append(int(v) if canon in _COUNT_STATS else v)
        stats[h] = col

    # -- one value per point, callpath and metric
    seen: dict[tuple, int] = {}
    for i in range(len(t.rows)):
        key = (tuple(coords[p][i] for p in params), names[i], row_metric[i])
        if key in seen:
            at = ", ".join(f"{p}={coords[p][i]:g}" for p in params)
            raise PerfcastError(f"repeated row: callpath {names[i]!r}{' at ' + at if at else ''} is already on "
                                f"line {seen[key]} (a summary table has one row per point and callpath)",
                                path, t.lines[i])
        seen[key] = t.lines[i]

    metrics = {}
    for name, (unit, _) in metric_unit.items():
        kind = "time" if unit.lower() in _TIME_UNITS else guess_kind(name, unit)
        metrics[name] = Metric(name, unit, kind, "unknown",
                               f"{_split_unit(value_col)[0]} per point of a summary table (one value per point; "
                               f"the other statistics are in meta['summary'])")
    frame = {p: coords[p] for p in params}
    frame["rep"] = np.zeros(len(t.rows), dtype="int64")
    frame["callpath"] = names
    frame["metric"] = row_metric
    frame["value"] = values
    data = pd.DataFrame(frame)
    if layout.spread_metrics:
        extra = []
        base = list(metrics)
        row_metric_arr = np.asarray(row_metric)
        for h, col in stats.items():
            canon = _split_unit(h)[0].lower()
            ok = np.array([v is not None for v in col])
            for name in base:
                sel = ok & (row_metric_arr == name)
                mname = f"{name} {h}"
                if mname in metrics:
                    raise PerfcastError(f"metric {mname!r} would exist twice", path, "header")
                if not sel.any():
                    continue
                if canon in _COUNT_STATS:
                    metrics[mname] = Metric(mname, "", "count", "unknown", f"{h} of the summary table")
                else:
                    unit = metrics[name].unit if canon not in ("var", "variance", "cv") else ""
                    metrics[mname] = Metric(mname, unit, metrics[name].kind if unit else "other", "unknown",
                                            f"{h} of the summary table")
                sub = data[sel].copy()
                sub["metric"] = mname
                sub["value"] = np.array([col[i] for i in np.flatnonzero(sel)], dtype="float64")
                extra.append(sub)
        if extra:
            data = pd.concat([data, *extra], ignore_index=True)

    columns = [*params, "callpath", "metric", *stat_cols]
    rows = [[*(float(coords[p][i]) for p in params), names[i], row_metric[i], *(stats[h][i] for h in stat_cols)]
            for i in range(len(t.rows))]
    summary = {"statistic": value_col, "columns": columns, "rows": rows, "ignored_columns": ignored}
    if known.get("note") and layout.unit is None and not units and not header_unit:
        summary["unit_note"] = known["note"]
    return Experiment(params, data, metrics.values(), tree, {"sources": [str(path)], "format": "summary",
                                                             "summary": summary, "repetitions": LISTED_REPETITIONS})


def _read(path: Path, options: ReadOptions) -> Experiment:
    layout = SummaryLayout(value=(options.statistic,)) if options.statistic else None
    return read_summary(path, layout, options)


register(Reader("summary", "summary-statistics table (CSV): key columns, then N/mean/median/sd/... per row; "
                "the median (else mean) becomes the value, the rest is kept", (".csv", ".tsv"), _sniff, _read,
                fallback=False))

"""Caliper profiles: ``.cali`` files (via ``caliperreader``) and ``cali-query`` json-split output.

One file is one run.  A directory (searched recursively) is one experiment: each file becomes a
point, or a further repetition of a point, with coordinates taken from the run's global metadata
(Adiak values such as ``jobsize``, ``problem_size``; Caliper's ``mpi.world.size``).

* **Calling-context tree** -- from the region path (Caliper's nested attributes: ``region``,
  ``function``, ``loop``, ``mpi.function``, ... in nesting order; in json-split the ``path``
  column or the ``source.function#callpath.address`` call stack).  Records outside every region
  go to the root callpath ``(unannotated)``, so the inclusive values of the roots add up to the
  program's total.
* **Metrics** -- the records' numeric attributes (``sum#time.duration``,
  ``avg#inclusive#sum#time.duration``, ``count``, ``any#any#max#Bytes/Rep``, ...), named as in
  Caliper, with the unit and alias of the attribute's metadata.  Scope: ``inclusive`` for
  ``inclusive#``/``.inclusive.``/``(inc)`` names, ``exclusive`` for additive measurements
  (durations, counts, bytes, hardware counters) otherwise, ``unknown`` for properties and
  ratios (``Bytes/Rep``, ``ProblemSize``, bandwidths).  json-split columns take unit and alias
  from ``column_metadata`` (``attribute.unit``, ``attribute.alias``); a time column under an
  alias such as Hatchet's ``time`` is exclusive (its inclusive twin is named ``(inc)``).
* **GPU activity** -- records carrying a CUDA/ROCm kernel name (``cupti.kernel.name``) or only an
  activity kind (``cupti.activity.kind``, e.g. memcpy) become a child of the callpath that
  launched them, named by the kernel (``[memcpy]`` for a kind).
* **Aggregates** -- in profiles without per-rank records the outermost of two operators
  aggregates over the processes (:func:`metric_aggregate`): ``sum#inclusive#sum#time.duration``
  is labelled ``sum over ranks``, ``avg#...`` ``mean over ranks`` (``Metric.aggregate``).
* **Locations** -- records carrying ``mpi.rank`` (``omp.thread.id``) keep per-rank (per-thread)
  values.  Records without a rank in such a file (e.g. before ``MPI_Init``) get rank -1.
* Several records of one callpath and location (time series snapshots, sampled source lines)
  are combined by the attribute's aggregation operator: ``sum#``/``count`` add, ``min#``/``max#``
  take the extreme, ``avg#`` averages weighted by ``count`` (unweighted without one);
  ``scale#`` (a unit conversion) and ``inclusive#`` are looked through.  Spot profiles holding both a
  ``regionprofile`` and a ``timeseries`` channel are read from the ``regionprofile`` records.
* **Time series** (``ReadOptions.timeseries``, ``--timeseries``; .cali only) -- instead of the
  whole run, each ``timeseries.snapshot`` of Caliper's loop monitor becomes a point at parameter
  ``iteration`` = the snapshot's ``loop.start_iteration`` + 1 (the 1-based number of its first
  loop iteration: scaling models need positive values), its records combined per callpath and
  location as above, so ``perfcast model`` fits per-iteration trends (time per time step,
  ``alloc.region.highwatermark``).  The snapshot's own record holds its wall time
  (``timeseries.duration``) at the loop's callpath; ``loop.iterations`` (the snapshot's width,
  on every record) is no metric here but ``iterations_per_snapshot`` in the run's meta.
  Snapshots outside the loop (set-up before it, finalisation after it: no start iteration) are
  left out and listed in meta, so per callpath the snapshots' values plus those left out combine
  to the whole-run value.  A measurement record without a snapshot index, a snapshot whose
  records disagree on its start iteration, or two snapshots starting at one iteration (several
  monitored loops) is an error.

Parameters: ``ReadOptions.parameters`` names global keys to use (each must be numeric in every
file); otherwise, for several files, the numeric globals that vary between files are chosen,
well-known keys first (``jobsize``, ``mpi.world.size``, ``problem_size``, ``threads``, ...),
leaving out run information and results (``launchdate``, ``elapsed_time``,
``figure_of_merit``, ...) and keys that repeat another chosen key.  ``meta["caliper"]`` records
each run's globals and which keys were chosen and why.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from ..experiment import CallTree, Experiment, Metric, guess_kind
from . import ReadOptions, Reader, read_ends, read_json, register

#: callpath of records outside every annotated region
UNANNOTATED = "(unannotated)"
#: the parameter of a time series read per snapshot (``ReadOptions.timeseries``): the 1-based
#: number of the snapshot's first loop iteration
SERIES_PARAMETER = "iteration"

#: global keys tried first as parameters, in order of preference
PREFERRED_PARAMETERS = (
    "jobsize", "mpi.world.size", "nprocs", "num_procs", "ranks", "np", "p",
    "problem_size", "ProblemSizeRunParam", "ProblemSize", "size", "n",
    "threads", "omp_max_threads", "omp_num_threads", "num_threads", "nthreads", "omp.num.threads",
    "nodes", "num_nodes",
)
#: name tokens of run information and results (never parameters when chosen automatically)
_NOISE_TOKENS = {"time", "date", "day", "elapsed", "duration", "timestamp", "pid", "seed", "uid", "id", "fom",
                 "figure", "merit", "version", "rate", "speed", "throughput", "score", "bandwidth", "walltime",
                 "runtime", "seconds"}
_NOISE_ENDINGS = ("time", "date", "day", "stamp")
_NOISE_PREFIX = ("cali.", "spot.", "adiak.", "caliper.")
_NOISE_ADIAK_TYPES = {"date", "timeval", "path", "set of path", "version", "catstring", "set of string"}
_NOISE_SUBCATEGORIES = {"runinfo", "binary"}

_RANK_KEYS = ("mpi.rank",)
_THREAD_KEYS = ("omp.thread.id", "thread.id", "pthread.id")
_NUMERIC_TYPES = {"int", "uint", "double", "float", "long", "ulong"}
#: attributes that are bookkeeping, never metrics
_NOT_METRICS = {"aggregate.slot", "timeseries.starttime", "timeseries.snapshot", "loop.start_iteration",
                "block", "mpi.rank", *_THREAD_KEYS}
#: plain (operator-less) attribute names that are measurements
#: GPU activity records (CUPTI / roctracer activity tracing): the kernel name, else the activity
#: kind, becomes a child of the callpath that launched the activity
_GPU_KERNEL_KEYS = ("cupti.kernel.name", "rocm.kernel.name")
_GPU_KIND_KEYS = ("cupti.activity.kind", "rocm.activity.kind")
_MEASUREMENTS = {"time.duration", "time.duration.ns", "time.duration.us", "time.inclusive.duration",
                 "time.inclusive.duration.ns", "count", "timeseries.duration"}


# ------------------------------------------------------------------------------------------------
# metric naming rules


def _split_ops(name: str) -> tuple[list[str], str]:
    """``avg#inclusive#sum#time.duration`` -> (['avg', 'inclusive', 'sum'], 'time.duration')."""
    parts = name.split("#")
    return parts[:-1], parts[-1]


def metric_scope(name: str) -> str:
    """Inclusive/exclusive/unknown from Caliper's naming conventions."""
    ops, base = _split_ops(name)
    low = name.lower()
    if "inclusive" in ops or ".inclusive." in base.lower() or low.endswith("(inc)") or "inclusive" in base.lower():
        return "inclusive"
    if "/" in base:
        return "unknown"  # ratios and per-repetition properties (Bytes/Rep, loop.iterations/time.duration)
    outer = [o for o in ops if o.lower() not in _TRANSPARENT_OPS]
    if outer and outer[0] == "any":
        return "unknown"  # a representative value, not an accumulated one
    b = base.lower()
    if (b in _MEASUREMENTS or b.startswith("time.") or b.endswith(".count") or b.endswith("count")
            or "bytes" in b or b.startswith(("papi.", "libpfm.", "cupti.", "rocprof", "mem.", "io."))
            or b.endswith(".duration") or "iterations" in b):
        return "exclusive"
    return "unknown"


#: Caliper's cross-process aggregation operators (the outermost of two or more, e.g. spot's
#: ``sum#inclusive#sum#time.duration``: the per-rank sums, summed over the ranks)
_OVER_RANKS = {"sum": "sum over ranks", "max": "max over ranks", "min": "min over ranks", "avg": "mean over ranks"}


def metric_aggregate(name: str, per_rank: bool) -> str:
    """How a value of a run-level profile combines the processes (:attr:`Metric.aggregate`):
    the outermost of at least two aggregation operators (``inclusive`` not counted) in a profile
    without per-rank records; empty otherwise (one operator aggregates within a process)."""
    if per_rank:
        return ""
    ops = [o.lower() for o in _split_ops(name)[0] if o.lower() != "inclusive"]
    return _OVER_RANKS.get(ops[0], "") if len(ops) >= 2 else ""


def _unit_from_name(base: str) -> str:
    b = base.lower()
    for suf, unit in ((".ns", "ns"), (".us", "us"), (".usec", "us"), (".ms", "ms"), (".sec", "s")):
        if b.endswith(suf):
            return unit
    return ""


def metric_kind(name: str, unit: str) -> str:
    ops, base = _split_ops(name)
    b = base.lower()
    if "/" in b:
        num, den = b.split("/", 1)
        if "time" in den or "sec" in den or "/s" in unit.lower():
            return "other"  # a rate
        return guess_kind(num) if "bytes" in num else "other"
    if b == "count" or b.endswith(".count") or b.endswith("count") or "iterations" in b:
        return "count"
    if b.startswith(("papi.", "libpfm.")):
        return "count"
    if "highwatermark" in b or b.startswith("alloc.") or "bytes" in b:
        return "bytes"
    return guess_kind(base, unit)


#: operator prefixes that change neither how values add up nor which extreme they are: ``scale#``
#: (a unit conversion, e.g. ns -> s) and ``inclusive#`` (the scope, handled by :func:`metric_scope`)
_TRANSPARENT_OPS = {"inclusive", "scale"}


def _combine_op(name: str, aggregatable: bool) -> str:
    """How to merge several records' values of one metric at one callpath/location.

    The outermost operator decides: ``sum#``/``count#`` add, ``min#``/``max#`` keep the extreme,
    ``avg#`` takes the mean weighted by the records' ``count`` (each record's mean stands for
    ``count`` events; without a count every record weighs 1), other operators (``any#``,
    ``percent_total#``, ...) keep the first value.  ``scale#`` and ``inclusive#`` are looked
    through: ``scale#cupti.activity.duration`` is a duration in other units and adds up like one.
    A plain attribute adds up when it is a measurement (durations, counts) or Caliper marks it
    aggregatable.
    """
    ops, base = _split_ops(name)
    ops = [o for o in ops if o.lower() not in _TRANSPARENT_OPS]
    if ops:
        op = ops[0].lower()
        if op in ("sum", "count"):
            return "sum"
        if op in ("min", "max"):
            return op
        if op == "avg":
            return "avg"
        return "first"
    b = base.lower()
    if "highwatermark" in b or b.startswith("max"):
        return "max"
    if b in _MEASUREMENTS or aggregatable or b == "count" or b.endswith(".duration"):
        return "sum"
    return "first"


# ------------------------------------------------------------------------------------------------
# one parsed file


@dataclass
class _Profile:
    path: Path
    #: callpath frames -> (rank, thread) -> metric -> accumulator
    cells: dict = field(default_factory=dict)
    order: list = field(default_factory=list)  # frames in first-seen order
    metrics: dict[str, Metric] = field(default_factory=dict)
    combine: dict[str, str] = field(default_factory=dict)
    globals: dict[str, Any] = field(default_factory=dict)
    #: key -> {"type", "adiak.type", "adiak.subcategory"} where known
    global_info: dict[str, dict] = field(default_factory=dict)
    has_rank: bool = False
    has_thread: bool = False
    n_records: int = 0
    #: how the run is named in meta and messages when ``path`` holds several runs (Thicket)
    label: str | None = None
    #: where in ``path`` the run's metadata is (Thicket: ``metadata[3]``), for messages
    place: str | None = None
    notes: list[str] = field(default_factory=list)
    #: what the file holds that is odd but read (meta["warnings"], each naming file and line)
    warnings: list[str] = field(default_factory=list)
    #: read as a time series: what was read (meta); locations then carry the snapshot's
    #: iteration as a third element and :meth:`frame` adds the ``iteration`` column
    series: dict | None = None

    def add(self, frames: tuple[str, ...], loc: tuple, values: dict[str, float], weight: float):
        by_loc = self.cells.get(frames)
        if by_loc is None:
            by_loc = self.cells[frames] = {}
            self.order.append(frames)
        acc = by_loc.setdefault(loc, {})
        for m, v in values.items():
            op = self.combine[m]
            cur = acc.get(m)
            if cur is None:
                acc[m] = [v * weight, weight, 1] if op == "avg" else [v, 1]
                continue
            if op == "sum":
                cur[0] += v
            elif op == "min":
                cur[0] = min(cur[0], v)
            elif op == "max":
                cur[0] = max(cur[0], v)
            elif op == "avg":
                cur[0] += v * weight
                cur[1] += weight
            # "first": keep the first value
            cur[-1] += 1

    def frame(self) -> tuple[pd.DataFrame, CallTree, int]:
        """Tidy rows (callpath, metric, value[, rank[, thread]]), the tree, merged-record count."""
        tree = CallTree()
        cp, met, val, rank, thread, iteration = [], [], [], [], [], []
        merged = 0
        for frames in self.order:
            try:
                path = tree.add_frames(list(frames))
            except PerfcastError as e:
                raise PerfcastError(f"region path {' / '.join(frames)!r}: {e.message}", self.path) from None
            for loc, acc in self.cells[frames].items():
                r, t = loc[0], loc[1]
                for m, a in acc.items():
                    if self.combine[m] == "avg":
                        v = a[0] / a[1] if a[1] else a[0]
                    else:
                        v = a[0]
                    merged = max(merged, a[-1])
                    cp.append(path)
                    met.append(m)
                    val.append(v)
                    rank.append(-1 if r is None else r)
                    thread.append(0 if t is None else t)
                    if self.series is not None:
                        iteration.append(loc[2])
        df = pd.DataFrame({"callpath": cp, "metric": met, "value": np.asarray(val, dtype="float64")})
        if self.series is not None:
            df[SERIES_PARAMETER] = np.asarray(iteration, dtype="float64")
        if self.has_rank or self.has_thread:
            df["rank"] = np.asarray(rank, dtype="int64") if self.has_rank else 0
        if self.has_thread:
            df["thread"] = np.asarray(thread, dtype="int64")
        return df, tree, merged


def _check_finite(value: float, written, metric: str, path: Path, where) -> None:
    """A metric value NaN or infinite (``nan``, ``inf``, ``1e400``) is an error at its place, as in
    every reader (:func:`perfcast.io.extrap._text_number` says what is wrong with it)."""
    if not math.isfinite(value):
        from .extrap import _text_number

        text = written if isinstance(written, str) else json.dumps(written)
        raise PerfcastError(f"metric {metric!r}: {_text_number(text.strip())}", path, where)


def _to_int_location(v, what: str, path: Path, where) -> int:
    if isinstance(v, list):
        if not v:
            raise PerfcastError(f"{what} is an empty list, not a number", path, where)
        v = v[-1]
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a number", path, where) from None
    if not math.isfinite(f) or abs(f) > 2**31:
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a rank or thread number", path, where)
    if not f.is_integer():
        raise PerfcastError(f"{what} {v!r} is not an integer", path, where)
    return int(f)


def _convert_global(value, typ: str | None):
    """A global's value as JSON: numbers for numeric Caliper types, text otherwise."""
    if isinstance(value, list):
        return [_convert_global(v, typ) for v in value]
    if not isinstance(value, str):
        return value
    if typ in ("int", "uint", "long", "ulong"):
        try:
            return int(value)
        except ValueError:
            pass
    if typ in ("double", "float"):
        try:
            f = float(value)
            return f if math.isfinite(f) else value
        except ValueError:
            pass
    if typ == "bool":
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
    return value


# ------------------------------------------------------------------------------------------------
# .cali


def _sniff_cali(path: Path) -> bool:
    if path.is_dir():
        return _has_files(path, (".cali",))
    with open(path, "rb") as f:
        return f.read(6) == b"__rec="


def _has_files(root: Path, exts: tuple[str, ...], check=None) -> bool:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.lower().endswith(exts) and (check is None or check(Path(dirpath) / name)):
                return True
    return False


def _list_files(root: Path, exts: tuple[str, ...]) -> list[Path]:
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        out.extend(Path(dirpath) / n for n in files if n.lower().endswith(exts) and not n.startswith("."))
    return sorted(out)


_CALI_FIELDS = frozenset({"__rec", "id", "attr", "data", "parent", "ref"})
_CALI_FIELD_SPLIT = re.compile(r"(?<!\\),")
_CALI_VALUE_SPLIT = re.compile(r"(?<!\\)=")


def _parse_cali(path: Path, timeseries: bool = False) -> _Profile:
    try:
        from caliperreader import CaliperStreamReader
        from caliperreader.readererror import ReaderError
    except ImportError:  # pragma: no cover - declared dependency
        raise PerfcastError("reading .cali files needs the 'caliper-reader' package", path) from None

    state = {"line": 0, "globals": 0, "last": ""}
    ctx_seen: dict[str, int] = {}  # ctx record text -> its first line
    repeated: list[tuple[int, int]] = []  # (line, the line it repeats)

    def lines(f):
        for i, line in enumerate(f, 1):
            state["line"] = i
            if not line.endswith("\n"):
                raise PerfcastError("truncated: the last line is incomplete", path, i)
            if not line.strip():
                continue
            if line.startswith("__rec=globals"):
                state["globals"] += 1
            if not line.startswith("__rec="):
                raise PerfcastError("not a Caliper .cali file (its records start with '__rec=')", path, i)
            counts = {}
            for part in _CALI_FIELD_SPLIT.split(line.rstrip("\r\n")):
                key, _, value = part.partition("=")
                if key not in _CALI_FIELDS:
                    # caliperreader skips a field it does not know: a garbled ref= would drop the
                    # record's calling context without a word
                    raise PerfcastError(f"unknown field {key[:40]!r} in a Caliper record (fields: "
                                        f"{', '.join(sorted(_CALI_FIELDS))})", path, i)
                if key in ("attr", "data"):
                    counts[key] = len(_CALI_VALUE_SPLIT.split(value))
            if len(counts) == 2 and counts["attr"] != counts["data"]:
                # caliperreader pairs them in order: a value too few shifts every later value onto
                # the next attribute (the average read as the sum) without a word
                raise PerfcastError(f"record has {counts['attr']} attributes but {counts['data']} values", path, i)
            if line.startswith("__rec=ctx,"):
                # a record repeated verbatim (same context, same values) is one measurement written
                # twice: Caliper's aggregation writes each context once per flush.  Read once for
                # every metric -- combined, a sum# doubled while an avg# stayed
                first = ctx_seen.setdefault(line, i)
                if first != i:
                    repeated.append((i, first))
                    continue
            yield line

    raw: list[dict] = []
    rec_line: list[int] = []  # the line of each record of raw
    sr = CaliperStreamReader()
    try:
        with open(path, "r", encoding="utf-8", errors="strict", newline="") as f:
            sr.read(lines(f), lambda rec: (raw.append(rec), rec_line.append(state["line"])))
    except PerfcastError:
        raise
    except UnicodeDecodeError:
        raise PerfcastError("not a Caliper .cali file (binary content)", path, state["line"] + 1) from None
    except ReaderError as e:
        msg = str(e.message).strip()
        if len(msg) > 80:
            msg = msg[:77] + "..."
        raise PerfcastError(f"not a Caliper .cali file ({msg})", path, state["line"]) from None
    except (AttributeError, KeyError, IndexError):
        # caliperreader looks up the node/attribute ids a record refers to and fails on unknown ones
        raise PerfcastError("corrupt Caliper record: it refers to a node or attribute that no earlier record "
                            "defines (the start of the file missing?)", path, state["line"]) from None
    except Exception as e:  # malformed records make caliperreader fail in many ways
        raise PerfcastError(f"corrupt Caliper record ({type(e).__name__}: {e})", path, state["line"]) from None
    if state["line"] == 0:
        raise PerfcastError("empty file", path)
    if not state["globals"]:
        raise PerfcastError("no globals record: the file is truncated or was not completely written", path,
                            state["line"])

    prof = _Profile(path)
    if repeated:
        shown = ", ".join(f"line {a} repeats line {b}" for a, b in repeated[:3]) + (" ..." if len(repeated) > 3 else "")
        prof.warnings.append(f"{path}:{repeated[0][0]}: {len(repeated)} record(s) repeat an earlier record exactly "
                             f"({shown}): read once")
    attrs = sr.db.attributes
    info: dict[str, dict] = {}

    def attr_info(name: str) -> dict:
        got = info.get(name)
        if got is not None:
            return got
        a = attrs.get(name)
        d = {"type": None, "global": False, "nested": False, "aggregatable": False, "unit": "", "alias": "",
             "adiak.type": None, "adiak.subcategory": None, "iteration": False}
        if a is not None:
            try:
                d["type"] = a.attribute_type()
            except Exception:
                d["type"] = None
            d["global"] = a.is_global()
            d["nested"] = a.is_nested()
            d["aggregatable"] = a.is_aggregatable()
            for key, meta_key in (("unit", "attribute.unit"), ("alias", "attribute.alias"),
                                  ("adiak.type", "adiak.type"), ("adiak.subcategory", "adiak.subcategory")):
                try:
                    v = a.get(meta_key)
                except Exception:
                    v = None
                if v is not None:
                    d[key] = v
            try:
                d["iteration"] = a.get("class.iteration") == "true"
            except Exception:
                pass
        info[name] = d
        return d

    # globals
    for k, v in sr.globals.items():
        d = attr_info(k)
        prof.globals[k] = _convert_global(v, d["type"])
        prof.global_info[k] = {x: d[x] for x in ("type", "adiak.type", "adiak.subcategory") if d[x] is not None}

    # spot profiles may mix channels; the region profile is the one to read
    channels = {r.get("spot.channel") for r in raw if "spot.channel" in r}
    keep_channel = "regionprofile" if "regionprofile" in channels and len(channels) > 1 else None
    if keep_channel:
        skipped = sum(1 for r in raw if r.get("spot.channel") != keep_channel)
        prof.notes.append(f"{skipped} record(s) of spot channel(s) "
                          f"{', '.join(sorted(str(c) for c in channels if c != keep_channel))} skipped; "
                          f"read the {keep_channel} records")

    metric_names: dict[str, bool] = {}

    def is_metric(name: str) -> bool:
        got = metric_names.get(name)
        if got is not None:
            return got
        d = attr_info(name)
        ops, base = _split_ops(name)
        ok = (d["type"] in _NUMERIC_TYPES and not d["global"] and not d["nested"] and not d["iteration"]
              and base not in _NOT_METRICS and name not in _NOT_METRICS and not name.startswith("iteration#")
              and not name.startswith(("cali.", "spot.", "adiak."))
              and (d["aggregatable"] or bool(ops) or base in _MEASUREMENTS)
              # loop.iterations is a snapshot's width, repeated on each of its records, not a cost of
              # a callpath: summed over a run's records it said 1200 iterations for a function of a
              # 100-cycle loop.  Per snapshot it goes to meta as iterations_per_snapshot
              and name != "loop.iterations")
        metric_names[name] = ok
        if ok:
            unit = d["unit"] or _unit_from_name(base)
            prof.metrics[name] = Metric(name, unit, metric_kind(name, unit), metric_scope(name), d["alias"])
            prof.combine[name] = _combine_op(name, d["aggregatable"])
        return ok

    rank_key = next((k for k in _RANK_KEYS if k in attrs), None)
    thread_key = next((k for k in _THREAD_KEYS if k in attrs), None)
    prof.has_rank = rank_key is not None and any(rank_key in r for r in raw)
    prof.has_thread = thread_key is not None and any(thread_key in r for r in raw)
    missing_rank = 0
    gpu_records = 0
    start_of = _snapshot_starts(raw, keep_channel, path) if timeseries else None
    left_out: dict[int, int] = {}  # snapshot outside the loop -> records left out
    per_snapshot: dict[int, set] = {}  # iteration -> the snapshot's loop.iterations values
    for i, rec in enumerate(raw):
        if keep_channel and rec.get("spot.channel") != keep_channel:
            continue
        values = {}
        for k, v in rec.items():
            if k == "path" or not is_metric(k):
                continue
            if isinstance(v, list):
                raise PerfcastError(f"metric attribute {k!r} holds several values in one record", path,
                                    f"record {i + 1}")
            try:
                values[k] = float(v)
            except (ValueError, TypeError, OverflowError):
                raise PerfcastError(f"metric attribute {k!r} has a non-numeric value {str(v)[:40]!r}", path,
                                    f"record {i + 1}") from None
            _check_finite(values[k], v, k, path, rec_line[i])
        if not values:
            continue
        iteration = None
        if start_of is not None:
            if _SNAPSHOT_KEY not in rec:
                raise PerfcastError(f"a measurement record without {_SNAPSHOT_KEY} in a time series (its "
                                    f"snapshot index is missing)", path, f"record {i + 1}")
            snap = _to_index(rec[_SNAPSHOT_KEY], _SNAPSHOT_KEY, path, f"record {i + 1}")
            if start_of[snap] is None:
                left_out[snap] = left_out.get(snap, 0) + 1
                continue
            iteration = start_of[snap] + 1  # 1-based: Caliper counts from 0, scaling models need > 0
            per_snapshot.setdefault(iteration, set()).add(rec.get("loop.iterations"))
        frames = rec.get("path")
        if frames is None:
            frames = (UNANNOTATED,)
        elif isinstance(frames, str):
            frames = (frames,)
        else:
            frames = tuple(str(x) for x in frames)
        gpu = _gpu_frame(rec)
        if gpu is not None:
            frames = frames + (gpu,)
            gpu_records += 1
        r = t = None
        if prof.has_rank:
            if rank_key in rec:
                r = _to_int_location(rec[rank_key], "mpi.rank", path, f"record {i + 1}")
            else:
                missing_rank += 1
        if prof.has_thread and thread_key in rec:
            t = _to_int_location(rec[thread_key], thread_key, path, f"record {i + 1}")
        weight = 1.0
        if "count" in rec and prof.combine and is_metric("count"):
            try:
                weight = float(rec["count"])
            except (TypeError, ValueError):
                weight = 1.0
        if not (math.isfinite(weight) and weight > 0):
            weight = 1.0
        prof.add(frames, (r, t) if iteration is None else (r, t, iteration), values, weight)
        prof.n_records += 1
    if start_of is not None:
        prof.series = _series_info(start_of, left_out, per_snapshot)
    if gpu_records:
        prof.notes.append(f"{gpu_records} GPU activity record(s) placed under their launching callpath, "
                          f"one child per kernel name (or [activity kind] when no kernel is named)")
    if missing_rank:
        prof.notes.append(f"{missing_rank} record(s) without mpi.rank (e.g. before MPI_Init) kept as rank -1")
    if not prof.cells:
        raise PerfcastError("no performance records (no record carries a numeric metric attribute)", path)
    return prof


_SNAPSHOT_KEY = "timeseries.snapshot"
_START_KEY = "loop.start_iteration"


def _to_index(v, what: str, path: Path, where: str) -> int:
    """A snapshot index or loop iteration: a non-negative integer."""
    if isinstance(v, list):
        raise PerfcastError(f"{what} holds several values in one record", path, where)
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a number", path, where) from None
    if not (math.isfinite(f) and f.is_integer() and 0 <= f < 2**53):
        raise PerfcastError(f"{what} {str(v)[:40]!r} is not a non-negative integer", path, where)
    return int(f)


def _snapshot_starts(raw: list[dict], keep_channel, path: Path) -> dict[int, int | None]:
    """Time series: snapshot index -> the loop iteration it starts at (``loop.start_iteration``);
    None for snapshots outside the monitored loop (set-up before it, finalisation after it)."""
    start: dict[int, int | None] = {}
    first: dict[int, int] = {}
    for i, rec in enumerate(raw):
        if (keep_channel and rec.get("spot.channel") != keep_channel) or _SNAPSHOT_KEY not in rec:
            continue
        snap = _to_index(rec[_SNAPSHOT_KEY], _SNAPSHOT_KEY, path, f"record {i + 1}")
        start.setdefault(snap, None)
        if _START_KEY in rec:
            it = _to_index(rec[_START_KEY], _START_KEY, path, f"record {i + 1}")
            if start[snap] is None:
                start[snap], first[snap] = it, i
            elif start[snap] != it:
                raise PerfcastError(f"snapshot {snap} starts at loop iteration {it} here but at {start[snap]} in "
                                    f"record {first[snap] + 1}", path, f"record {i + 1}")
    if not start:
        raise PerfcastError(f"not a time series: no record carries {_SNAPSHOT_KEY} (read the whole-run profile "
                            f"instead)", path)
    if all(v is None for v in start.values()):
        raise PerfcastError(f"no time-series snapshot lies in a monitored loop (none carries {_START_KEY})", path)
    seen: dict[int, int] = {}
    for snap in sorted(start):
        it = start[snap]
        if it is None:
            continue
        if it in seen:
            raise PerfcastError(f"snapshots {seen[it]} and {snap} both start at loop iteration {it} (several "
                                f"monitored loops?): each snapshot needs an iteration of its own",
                                path, f"record {first[snap] + 1}")
        seen[it] = snap
    return start


def _series_info(start_of: dict, left_out: dict, per_snapshot: dict) -> dict:
    """What a time series read kept and left out (``meta["caliper"]["runs"][i]["timeseries"]``)."""
    its = sorted(per_snapshot)
    counts = sorted({int(float(c)) for cs in per_snapshot.values() for c in cs
                     if c is not None and _numeric(c) is not None})
    info: dict[str, Any] = {
        "parameter": SERIES_PARAMETER,
        "from": f"{_START_KEY} + 1 of each {_SNAPSHOT_KEY} (the 1-based number of its first loop iteration)",
        "snapshots": len(its),
        "first_iteration": its[0] if its else None,
        "last_iteration": its[-1] if its else None,
        "iterations_per_snapshot": counts,
    }
    if left_out:
        info["left_out"] = {"snapshots": sorted(left_out), "records": sum(left_out.values()),
                            "reason": f"outside the monitored loop (no {_START_KEY}): set-up before the first "
                                      "iteration, finalisation after the last"}
    return info


def _gpu_frame(rec: dict) -> str | None:
    """The child frame of a GPU activity record: its kernel name, else ``[<activity kind>]``."""
    for key in _GPU_KERNEL_KEYS:
        v = rec.get(key)
        if v is not None and not isinstance(v, list) and str(v):
            return str(v)
    for key in _GPU_KIND_KEYS:
        v = rec.get(key)
        if v is not None and not isinstance(v, list) and str(v):
            return f"[{v}]"
    return None


# ------------------------------------------------------------------------------------------------
# json-split

_JSON_SPLIT_KEYS = ("data", "columns", "nodes")
_JSON_SPLIT_MARKERS = (*_JSON_SPLIT_KEYS, "label")


def _sniff_json_split_file(path: Path) -> bool:
    if not path.name.lower().endswith(".json"):
        return False
    head, tail = read_ends(path)
    text = head + tail
    s = head.lstrip()
    return s[:1] == b"{" and all(f"\"{k}\"".encode() in text for k in _JSON_SPLIT_MARKERS)


def _sniff_json_split(path: Path) -> bool:
    if path.is_dir():
        if _has_files(path, (".cali",)):
            return False
        return _has_files(path, (".json",), _safe(_sniff_json_split_file))
    return _sniff_json_split_file(path)


def _safe(fn):
    def inner(p):
        try:
            return fn(p)
        except (OSError, ValueError):
            return False
    return inner


def _json_safe(v):
    """Globals as strict JSON (NaN and infinities become text)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    return v


def _meta_text(v) -> str:
    """A column-metadata text (unit, alias); anything else in its place is ignored."""
    return v.strip()[:100] if isinstance(v, str) else ""


def _parse_json_split(path: Path) -> _Profile:
    doc = read_json(path)
    if not isinstance(doc, dict) or not all(k in doc for k in _JSON_SPLIT_KEYS):
        raise PerfcastError("not Caliper json-split output (needs the keys data, columns, nodes)", path)
    data, columns, nodes = doc["data"], doc["columns"], doc["nodes"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise PerfcastError("'columns' must be a list of names", path, "columns")
    if not isinstance(data, list):
        raise PerfcastError("'data' must be a list of rows", path, "data")
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise PerfcastError("'nodes' must be a list of objects", path, "nodes")
    cmeta = doc.get("column_metadata")
    if cmeta is not None and (not isinstance(cmeta, list) or len(cmeta) != len(columns)
                              or not all(isinstance(m, dict) for m in cmeta)):
        raise PerfcastError("'column_metadata' must hold one object per column", path, "column_metadata")
    node_columns = {n.get("column") for n in nodes}
    if cmeta is not None:
        is_value = [bool(m.get("is_value", False)) for m in cmeta]
    else:
        is_value = [c not in node_columns for c in columns]
    for i, row in enumerate(data):
        if not isinstance(row, list) or len(row) != len(columns):
            raise PerfcastError(f"row has {len(row) if isinstance(row, list) else 'no'} entries for "
                                f"{len(columns)} columns", path, f"data[{i}]")

    # node paths
    n_nodes = len(nodes)
    paths: list[tuple[str, ...] | None] = [None] * n_nodes

    def node_path(idx: int) -> tuple[str, ...]:
        chain = []
        j = idx
        seen = 0
        while j is not None:
            if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < n_nodes:
                raise PerfcastError(f"node parent {str(j)[:40]!r} is not a node index", path, f"nodes[{idx}]")
            if paths[j] is not None:
                break
            chain.append(j)
            seen += 1
            if seen > n_nodes:
                raise PerfcastError("node parents form a cycle", path, f"nodes[{idx}]")
            j = nodes[j].get("parent")
        prefix = paths[j] if j is not None else ()
        for k in reversed(chain):
            label = nodes[k].get("label")
            if label is None:
                raise PerfcastError("node without a label", path, f"nodes[{k}]")
            prefix = prefix + (str(label),)
            paths[k] = prefix
        return paths[idx]

    ref_cols = [c for c, v in zip(columns, is_value) if not v]
    has_parents = {n.get("column") for n in nodes if n.get("parent") is not None}
    if "path" in ref_cols:
        path_col = "path"
    else:
        tree_cols = [c for c in ref_cols if c in has_parents]
        callpath_cols = [c for c in tree_cols if "callpath" in c]
        if callpath_cols:
            path_col = callpath_cols[0]
        elif tree_cols:
            path_col = tree_cols[0]
        elif len(ref_cols) == 1:
            path_col = ref_cols[0]
        else:
            raise PerfcastError("no calling-context column (no 'path' column and no column of nested nodes)",
                                path, "columns")
    pidx = columns.index(path_col)

    prof = _Profile(path)
    for k, v in doc.items():
        if k not in ("data", "columns", "column_metadata", "nodes"):
            prof.globals[k] = _json_safe(v)
    folded = [c for c in ref_cols if c != path_col]
    if folded:
        prof.notes.append(f"values summed over {', '.join(folded)} (not part of the calling context)")

    rank_i = columns.index("mpi.rank") if "mpi.rank" in columns else None
    thread_i = next((columns.index(k) for k in _THREAD_KEYS if k in columns), None)
    metric_cols = []
    for i, (c, v) in enumerate(zip(columns, is_value)):
        if not v or i in (rank_i, thread_i):
            continue
        ops, base = _split_ops(c)
        if base in _NOT_METRICS or c.startswith("iteration#") or c.startswith(("cali.", "spot.")):
            continue
        vals = [row[i] for row in data if row[i] is not None]
        numeric = [isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals]
        if any(numeric) and not all(numeric):
            # one damaged cell must not turn a metric column into "not a metric" (all its values lost)
            j = next(k for k, row in enumerate(data) if row[i] is not None and not (
                isinstance(row[i], (int, float)) and not isinstance(row[i], bool)))
            raise PerfcastError(f"column {c!r} holds numbers and, here, {type(data[j][i]).__name__} "
                                f"{str(data[j][i])[:40]!r}", path, f"data[{j}][{i}]")
        if vals and all(numeric):
            for j, row in enumerate(data):
                x = row[i]
                if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 1e300:
                    raise PerfcastError(f"column {c!r}: {str(x)[:20]}... is too large to be a measurement",
                                        path, f"data[{j}][{i}]")
            metric_cols.append(i)
            meta = cmeta[i] if cmeta is not None else {}
            unit = _meta_text(meta.get("attribute.unit")) or _unit_from_name(base)
            alias = _meta_text(meta.get("attribute.alias"))
            kind = metric_kind(c, unit)
            scope = metric_scope(c)
            if scope == "unknown" and kind == "time" and "/" not in base:
                # a region profile's time under its alias (``time``, Hatchet's naming): Caliper
                # writes the inclusive one as ``... (inc)`` or ``inclusive#``, so this one is the
                # region's own time -- Hatchet reads it as exclusive too
                scope = "exclusive"
            prof.metrics[c] = Metric(c, unit, kind, scope, alias)
            prof.combine[c] = _combine_op(c, False)
        else:
            prof.notes.append(f"column {c!r} is not numeric: not a metric")
    if not metric_cols:
        raise PerfcastError("no numeric metric column", path, "columns")
    prof.has_rank = rank_i is not None
    prof.has_thread = thread_i is not None
    count_i = columns.index("count") if "count" in columns else None

    for i, row in enumerate(data):
        ref = row[pidx]
        if ref is None:
            frames = (UNANNOTATED,)
        else:
            if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < n_nodes:
                raise PerfcastError(f"{path_col} refers to node {ref!r}, not one of the {n_nodes} nodes", path,
                                    f"data[{i}]")
            frames = node_path(ref)
        r = t = None
        if rank_i is not None and row[rank_i] is not None:
            r = _to_int_location(row[rank_i], "mpi.rank", path, f"data[{i}]")
        if thread_i is not None and row[thread_i] is not None:
            t = _to_int_location(row[thread_i], columns[thread_i], path, f"data[{i}]")
        values = {columns[j]: float(row[j]) for j in metric_cols if row[j] is not None}
        for j in metric_cols:
            if row[j] is not None:
                _check_finite(values[columns[j]], row[j], columns[j], path, f"data[{i}][{j}]")
        if not values:
            continue
        weight = 1.0
        if count_i is not None and isinstance(row[count_i], (int, float)):
            weight = float(row[count_i])
            if not (math.isfinite(weight) and weight > 0):
                weight = 1.0
        prof.add(frames, (r, t), values, weight)
        prof.n_records += 1
    if not prof.cells:
        raise PerfcastError("no performance records", path, "data")
    return prof


# ------------------------------------------------------------------------------------------------
# parameters


def _numeric(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _is_noise(key: str, info: dict) -> bool:
    if key.startswith(_NOISE_PREFIX):
        return True
    if info.get("adiak.subcategory") in _NOISE_SUBCATEGORIES:
        return True
    if info.get("adiak.type") in _NOISE_ADIAK_TYPES:
        return True
    tokens = [t for t in re.split(r"[^a-z0-9]+", key.lower()) if t]
    return any(t in _NOISE_TOKENS or t.endswith(_NOISE_ENDINGS) for t in tokens)


def _determined_by(key: str, chosen: Sequence[str], table: list[dict]) -> bool:
    """True when ``key``'s value is a function of the chosen keys' values across the files."""
    seen: dict[tuple, float] = {}
    for row in table:
        sig = tuple(row[c] for c in chosen)
        if sig in seen and seen[sig] != row[key]:
            return False
        seen.setdefault(sig, row[key])
    return True


def choose_parameters(profiles: Sequence[_Profile], requested: Sequence[str]) -> tuple[list[str], list[dict], dict]:
    """Parameter keys, each file's coordinates, and the explanation stored in meta."""
    if requested:
        coords = []
        for p in profiles:
            c = {}
            for key in requested:
                where = key if p.label is None else f"{p.label}: {key}"
                if key not in p.globals:
                    have = sorted(k for k, v in p.globals.items() if _numeric(v) is not None)
                    raise PerfcastError(f"no global metadata {key!r} in this run; numeric globals here: "
                                        f"{', '.join(have) or '(none)'}", p.path, where)
                v = _numeric(p.globals[key])
                if v is None:
                    raise PerfcastError(f"global metadata {key!r} is not numeric ({p.globals[key]!r})", p.path,
                                        where)
                c[key] = v
            coords.append(c)
        return list(requested), coords, {"keys": list(requested), "how": "given",
                                         "reason": "named by the user"}
    if len(profiles) < 2:
        return [], [{}], {"keys": [], "how": "auto", "reason": "a single run: no parameter varies"}

    common = set(profiles[0].globals)
    for p in profiles[1:]:
        common &= set(p.globals)
    info = {}
    for p in profiles:
        for k, v in p.global_info.items():
            info.setdefault(k, v)
    _check_gaps(profiles, info)
    table = [{} for _ in profiles]
    varying, noise = [], []
    for key in sorted(common):
        vals = [_numeric(p.globals[key]) for p in profiles]
        if any(v is None for v in vals):
            continue
        typed = info.get(key, {}).get("type") in _NUMERIC_TYPES or all(
            isinstance(p.globals[key], (int, float)) for p in profiles)
        if not typed and key not in PREFERRED_PARAMETERS:
            continue  # numbers written as text count only for well-known keys
        if len(set(vals)) < 2:
            continue
        for row, v in zip(table, vals):
            row[key] = v
        (noise if _is_noise(key, info.get(key, {})) else varying).append(key)
    preferred = [k for k in PREFERRED_PARAMETERS if k in varying]
    others = [k for k in varying if k not in PREFERRED_PARAMETERS]
    pool = preferred if preferred else others
    chosen: list[str] = []
    redundant: dict[str, str] = {}
    for key in pool:
        if chosen and _determined_by(key, chosen, table):
            redundant[key] = ", ".join(chosen)
            continue
        chosen.append(key)
    if chosen:
        reason = ("well-known parameter key(s) that vary between runs" if preferred else
                  "numeric metadata that varies between runs (no well-known parameter key varies)")
    else:
        reason = "no numeric metadata varies between runs: the runs are repetitions of one point"
    explanation = {"keys": chosen, "how": "auto", "reason": reason,
                   "varying": {k: sorted(set(r[k] for r in table)) for k in varying + noise}}
    if noise:
        explanation["ignored"] = {k: "run information or a result, not an input" for k in noise}
    for key in varying:
        if key not in chosen and key not in redundant and _determined_by(key, chosen, table):
            redundant[key] = ", ".join(chosen)
    if redundant:
        explanation["redundant"] = {k: f"determined by {v}" for k, v in redundant.items()}
    unused = [k for k in varying if k not in chosen and k not in redundant]
    if unused:
        explanation["not_chosen"] = unused
    coords = [{k: row[k] for k in chosen} for row in table]
    return chosen, coords, explanation


def _check_gaps(profiles: Sequence[_Profile], info: dict) -> None:
    """A run that lacks a key (or holds no number in it) that the other runs hold as a varying
    number -- a parameter -- is an error naming it: choosing without that key merged different job
    sizes as repetitions of one point."""
    keys = sorted(set().union(*(p.globals for p in profiles)))
    for key in keys:
        vals = [_numeric(p.globals.get(key)) for p in profiles]
        have = [v for v in vals if v is not None]
        if len(have) == len(profiles) or len(set(have)) < 2 or _is_noise(key, info.get(key, {})):
            continue
        typed = info.get(key, {}).get("type") in _NUMERIC_TYPES or all(
            isinstance(p.globals[key], (int, float)) for p, v in zip(profiles, vals) if v is not None)
        if not typed and key not in PREFERRED_PARAMETERS:
            continue
        bad = next(p for p, v in zip(profiles, vals) if v is None)
        what = ("has no metadata " + repr(key) if key not in bad.globals
                else f"has {key} = {str(bad.globals[key])[:40]!r}, not a number,")
        run = f"run {bad.label}" if bad.label is not None else "this run"
        shown = ", ".join(f"{v:g}" for v in sorted(set(have))[:8]) + (", ..." if len(set(have)) > 8 else "")
        raise PerfcastError(f"{run} {what} while {len(have)} other run(s) have numeric values of it ({shown}): "
                            f"its point is unknown; leave it out (--where) or choose the parameters (--param)",
                            bad.path, bad.place)


def _mixed_within_points(profiles: Sequence[_Profile], coords: list[dict]) -> dict[str, list]:
    """Non-numeric, non-noise globals that differ between runs sharing a point."""
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(coords):
        groups.setdefault(tuple(sorted(c.items())), []).append(i)
    mixed: dict[str, set] = {}
    for idx in groups.values():
        if len(idx) < 2:
            continue
        keys = set().union(*(profiles[i].globals for i in idx))
        for key in keys:
            info = next((profiles[i].global_info.get(key) for i in idx if key in profiles[i].global_info), {}) or {}
            if _is_noise(key, info) or key in ("cmdline", "libraries", "executablepath", "user"):
                continue
            vals = {_text(profiles[i].globals.get(key)) for i in idx}
            if len(vals) > 1:
                mixed.setdefault(key, set()).update(vals)
    out = {}
    for k, vs in sorted(mixed.items()):
        vals = sorted(vs)
        out[k] = vals if len(vals) <= 20 else [*vals[:20], f"... ({len(vals)} distinct values)"]
    return out


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


# ------------------------------------------------------------------------------------------------
# assembling an experiment


def select_runs(profiles: Sequence[_Profile], where: Sequence[tuple[str, str]]) -> list[_Profile]:
    """The runs whose metadata match ``where`` ((key, value) pairs: every key named must hold one of
    its values; text compared as written, numbers as numbers, so ``jobsize=64`` matches 64.0).  A key
    no run has, or a filter no run passes, is an error naming the values the runs have."""
    if not where:
        return list(profiles)
    wanted: dict[str, set[str]] = {}
    for key, value in where:
        wanted.setdefault(key, set()).add(value)

    def same(v, value: str) -> bool:
        if v is None:
            return False
        a, b = _numeric(v), _numeric(value)
        return _text(v) == value or (a is not None and b is not None and a == b)

    where_txt = " ".join(f"{k}={v}" for k, v in where)
    kept, passed = list(profiles), []
    for key, values in wanted.items():
        if not any(key in p.globals for p in profiles):
            raise PerfcastError(f"no run has the metadata key {key!r} (where {where_txt})", profiles[0].path)
        have = sorted({_text(p.globals[key]) for p in kept if key in p.globals})
        kept = [p for p in kept if any(same(p.globals.get(key), v) for v in values)]
        if not kept:
            shown = ", ".join(have[:12]) + (f", ... ({len(have)} values)" if len(have) > 12 else "")
            runs = "the runs" + (" with " + " ".join(passed) if passed else "")
            raise PerfcastError(f"no run matches where {where_txt}; {runs} have {key} = {shown or '(none)'}",
                                profiles[0].path)
        passed += [f"{key}={v}" for v in sorted(values)]
    return kept


def _assemble(profiles: Sequence[_Profile], options: ReadOptions, root: Path | None) -> Experiment:
    n_runs = len(profiles)
    profiles = select_runs(profiles, options.where)
    file_params, coords, explanation = choose_parameters(profiles, tuple(options.parameters))
    params = list(file_params)
    uneven = []
    if any(p.series is not None for p in profiles):
        if SERIES_PARAMETER in params:
            raise PerfcastError(f"global metadata {SERIES_PARAMETER!r} is a parameter, but a time series uses "
                                f"{SERIES_PARAMETER!r} for the snapshots' loop iteration", profiles[0].path)
        params.append(SERIES_PARAMETER)
        uneven = [p for p in profiles if len(p.series["iterations_per_snapshot"]) > 1]
    ranked = {p.has_rank or p.has_thread for p in profiles}
    if len(ranked) > 1:
        with_r = next(p for p in profiles if p.has_rank or p.has_thread)
        without = next(p for p in profiles if not (p.has_rank or p.has_thread))
        raise PerfcastError(f"holds totals while {with_r.path} holds per-rank values; read them separately",
                            without.path)
    threaded = any(p.has_thread for p in profiles)

    metrics: dict[str, Metric] = {}
    first_of: dict[str, Path] = {}
    tree = CallTree()
    frames = []
    reps: dict[tuple, int] = {}
    runs = []
    for prof, c in zip(profiles, coords):
        for name, m in prof.metrics.items():
            if name in metrics:
                old = metrics[name]
                if (old.unit, old.kind, old.scope) != (m.unit, m.kind, m.scope):
                    raise PerfcastError(f"metric {name!r} has unit {m.unit!r} here but {old.unit!r} in "
                                        f"{first_of[name]}", prof.path, name)
            else:
                metrics[name] = replace(m, aggregate=metric_aggregate(name, prof.has_rank or prof.has_thread))
                first_of[name] = prof.path
        df, t, merged = prof.frame()
        try:
            tree = tree.merged(t)
        except PerfcastError as e:
            raise PerfcastError(e.message, prof.path, prof.label) from None
        key = tuple(c[p] for p in file_params)
        rep = reps.get(key, 0)
        reps[key] = rep + 1
        for p in file_params:
            df[p] = c[p]
        df["rep"] = rep
        if threaded and "thread" not in df.columns:
            df["thread"] = 0
        frames.append(df)
        if prof.label is not None:
            label = prof.label
        else:
            label = str(prof.path.relative_to(root)) if root is not None else str(prof.path)
        run = {"file": label, "point": {p: _json_num(c[p]) for p in file_params}, "rep": rep,
               "records": prof.n_records, "globals": prof.globals}
        if prof.series is not None:
            run["timeseries"] = prof.series
        if merged > 1:
            run["records_merged"] = f"up to {merged} records per callpath and location combined"
        if prof.notes:
            run["notes"] = list(prof.notes)
        runs.append(run)
    data = pd.concat(frames, ignore_index=True)
    cal: dict[str, Any] = {"parameters": explanation, "runs": runs,
                           **({"where": [list(w) for w in options.where], "runs_selected": len(profiles),
                               "runs_read": n_runs} if options.where else {}),
                           "unannotated": f"records outside every region are under the root {UNANNOTATED!r}"}
    warnings = [w for p in profiles for w in p.warnings]
    if len(profiles) > 1:
        mixed = _mixed_within_points(profiles, coords)
        if mixed:
            cal["mixed_within_points"] = mixed
            key, vals = next(iter(mixed.items()))
            warnings.append("runs treated as repetitions of one point differ in " + ", ".join(mixed)
                            + f"; select runs by their metadata (where {key}={vals[0]}), read them separately, "
                              "or name a distinguishing numeric key as parameter")
    if uneven:
        warnings.append(f"snapshots of {uneven[0].path.name} cover different numbers of loop iterations "
                        f"({', '.join(map(str, uneven[0].series['iterations_per_snapshot']))}): per-snapshot "
                        "values are not comparable per iteration")
    meta = {"sources": list(dict.fromkeys(str(p.path) for p in profiles)), "caliper": cal}
    if warnings:
        meta["warnings"] = warnings
    return Experiment(params, data, metrics.values(), tree, meta)


def _json_num(x: float):
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _read_paths(files: Sequence[Path], parse, options: ReadOptions, root: Path | None) -> Experiment:
    """Parse ``files`` (``parse``: one function, or one per file) with progress, then assemble."""
    parsers = list(parse) if isinstance(parse, (list, tuple)) else [parse] * len(files)
    profiles = []
    total = len(files)
    for i, (f, fn) in enumerate(zip(files, parsers)):
        if options.progress is not None:
            options.progress(i, total, str(f))
        profiles.append(fn(f))
    if options.progress is not None:
        options.progress(total, total, "done")
    return _assemble(profiles, options, root)


def read_many(paths: Sequence[str | Path], options: ReadOptions | None = None) -> Experiment:
    """Read several Caliper files (``.cali`` or json-split) as one experiment.

    Unlike reading them one by one, the parameters can be chosen from the globals that vary
    between the files.
    """
    options = options or ReadOptions()
    files = [Path(p) for p in paths]
    if not files:
        raise PerfcastError("no input given")
    for f in files:
        if not f.is_file():
            raise PerfcastError("not a file", f)
    parsers = [_cali_parser(options) if f.name.lower().endswith(".cali") or _sniff_cali_file(f)
               else _json_split_parser(options) for f in files]
    return _read_paths(files, parsers, options, None)


def _sniff_cali_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(6) == b"__rec="
    except OSError:
        return False


def read_cali(path: Path, options: ReadOptions) -> Experiment:
    path = Path(path)
    if path.is_dir():
        files = _list_files(path, (".cali",))
        if not files:
            raise PerfcastError("no .cali files in this directory", path)
        return _read_paths(files, _cali_parser(options), options, path)
    return _assemble([_cali_parser(options)(path)], options, None)


def read_json_split(path: Path, options: ReadOptions) -> Experiment:
    path = Path(path)
    if path.is_dir():
        files = [f for f in _list_files(path, (".json",)) if _safe(_sniff_json_split_file)(f)]
        if not files:
            raise PerfcastError("no Caliper json-split files (.json) in this directory", path)
        return _read_paths(files, _json_split_parser(options), options, path)
    return _assemble([_json_split_parser(options)(path)], options, None)


def _cali_parser(options: ReadOptions):
    return (lambda p: _parse_cali(p, timeseries=True)) if options.timeseries else _parse_cali


def _json_split_parser(options: ReadOptions):
    if not options.timeseries:
        return _parse_json_split

    def refuse(p: Path):
        raise PerfcastError("time series are read from Caliper .cali files; this is cali-query json-split output",
                            p)
    return refuse


register(Reader("caliper", "Caliper .cali profile (a directory of .cali files = one experiment)", (".cali",),
                _sniff_cali, read_cali, directories=True, read_many=read_many))
register(Reader("caliper-json", "Caliper json-split profile from cali-query (a directory of them = one experiment)",
                (".json",), _sniff_json_split, read_json_split, directories=True,
                read_many=read_many))

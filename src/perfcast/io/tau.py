"""Reader for TAU profiles (``profile.N.C.T`` files, as ``pprof`` and ParaProf read them).

A TAU run writes one text file per MPI rank ``N``, context ``C`` and thread ``T``; with several
metrics (``TAU_METRICS``) one directory ``MULTI__<metric>`` per metric holds such files.  A file::

    23 templated_functions_MULTI_TIME
    # Name Calls Subrs Excl Incl ProfileCalls # <metadata>...</metadata>
    ".TAU application" 1 7 449 51781 0 GROUP="TAU_DEFAULT"
    ".TAU application => MPI_Init()  " 1 0 17983 17983 0 GROUP="TAU_CALLPATH|MPI"
    ...                                           (23 event lines in all)
    0 aggregates
    2 userevents                                  (optional: atomic events, not read)
    # eventname numevents max min mean sumsqr
    "Message size for broadcast" 1 4 4 4 16

Values are kept per location: file ``profile.N.C.T`` gives rank ``N`` and thread ``T`` (two files of
one rank and thread in different contexts are refused).  Metrics, for a time metric (``TIME``,
``P_WALL_CLOCK_TIME``, ...; TAU stores them in **microseconds**, and so does perfcast: unit ``us``):
``time (I)`` (inclusive), ``time (E)`` (exclusive); for a counter (``PAPI_TOT_CYC``, ...) the same
two under its own name, unit ``#``; ``calls`` (times the event was entered) and ``subroutine_calls``
(calls it made to other events), both exclusive counts taken from the first metric directory.

Call tree: when the file holds callpath events (``a => b => c``, TAU_CALLPATH), they are the tree;
a flat event that never appears below another event in a callpath (the ``.TAU application`` root,
or an event outside every callpath) is a root, and the other flat events are dropped, since their
values are the sums of their callpaths.  Without callpath events every event is a root (a flat
profile).  Frame names are stripped of the blanks TAU pads them with.

Completeness: the event count of the first line must match the event lines, and the
``aggregates`` line must follow them; the user-event count, when present, must match its lines;
the last line must end with a line end.  Anything else is a :class:`PerfcastError` naming file and
line.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import CallTree, Experiment, Metric
from . import Reader, ReadOptions, register, check_readable, read_text as read_checked

_FILE = re.compile(r"^profile\.(\d{1,9})\.(\d{1,9})\.(\d{1,9})$")
_FIRST = re.compile(r"^(\d{1,9}) templated_functions(?:_MULTI_(\S+))?\s*$")
_EVENT = re.compile(r'^"(.*)"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+GROUP="(.*)"\s*$')
_AGGREGATES = re.compile(r"^(\d{1,9}) aggregates\s*$")
_USEREVENTS = re.compile(r"^(\d{1,9}) userevents\s*$")
_METRIC_NAME = re.compile(r"<attribute><name>Metric Name</name><value>([^<]*)</value></attribute>")
_MULTI = "MULTI__"
#: largest count that a float still holds exactly
_MAX_COUNT = 2.0 ** 53


def location_of(path: Path) -> tuple[int, int, int] | None:
    """(rank, context, thread) of a ``profile.N.C.T`` file name, else None."""
    m = _FILE.match(path.name)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _number(s: str, what: str, path: Path, lineno: int, integer: bool = False) -> float:
    try:
        v = float(s)
    except ValueError:
        raise PerfcastError(f"{what} {s[:30]!r} is not a number", path, lineno) from None
    if not math.isfinite(v) or v < 0:
        raise PerfcastError(f"{what} {s[:30]!r} is negative or not finite", path, lineno)
    if integer and (v != int(v) or v > _MAX_COUNT):
        raise PerfcastError(f"{what} {s[:30]!r} is not a whole count", path, lineno)
    return v


def parse(path: Path) -> tuple[str, list[tuple[str, float, float, float, float]]]:
    """The metric name and the events (name, calls, subrs, excl, incl) of one profile file."""
    text = read_checked(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    m = _FIRST.match(lines[0]) if lines else None
    if not m:
        raise PerfcastError("not a TAU profile (the first line is not 'N templated_functions...')", path, 1)
    n = int(m.group(1))
    metric = m.group(2)
    if len(lines) < 2 or not lines[1].startswith("# Name Calls Subrs Excl Incl"):
        raise PerfcastError("the second line is not the '# Name Calls Subrs Excl Incl ...' header", path, 2)
    if metric is None:
        mm = _METRIC_NAME.search(lines[1])
        metric = mm.group(1).strip() if mm and mm.group(1).strip() else "TIME"
    if len(lines) < 2 + n + 1:
        raise PerfcastError(f"the file announces {n} events but ends after {max(len(lines) - 2, 0)} lines of them "
                            f"(truncated?)", path, len(lines))
    events, seen = [], set()
    for i in range(2, 2 + n):
        e = _EVENT.match(lines[i])
        if not e:
            raise PerfcastError(f"not a TAU event line ('\"name\" calls subrs excl incl profilecalls GROUP=\"...\"'): "
                                f"{lines[i][:60]!r}", path, i + 1)
        name = e.group(1)
        if name in seen:
            raise PerfcastError(f"event {name.strip()[:60]!r} appears twice", path, i + 1)
        seen.add(name)
        calls = _number(e.group(2), "calls", path, i + 1, integer=True)
        subrs = _number(e.group(3), "subroutine calls", path, i + 1, integer=True)
        excl = _number(e.group(4), "exclusive value", path, i + 1)
        incl = _number(e.group(5), "inclusive value", path, i + 1)
        events.append((name, calls, subrs, excl, incl))
    i = 2 + n
    a = _AGGREGATES.match(lines[i])
    if not a:
        raise PerfcastError(f"expected the 'N aggregates' line after the {n} events, found {lines[i][:60]!r}",
                            path, i + 1)
    i += 1 + int(a.group(1))
    if i > len(lines):
        raise PerfcastError("the file ends inside its aggregates (truncated?)", path, len(lines))
    if i < len(lines):
        u = _USEREVENTS.match(lines[i])
        if not u:
            raise PerfcastError(f"expected the 'N userevents' line, found {lines[i][:60]!r}", path, i + 1)
        k = int(u.group(1))
        if k and (len(lines) <= i + 1 or not lines[i + 1].startswith("#")):
            raise PerfcastError("expected the '# eventname ...' header of the user events", path, i + 2)
        body = [ln for ln in lines[i + 1 + (1 if k else 0):] if ln.strip()]
        if len(body) != k:
            raise PerfcastError(f"{k} user events announced, {len(body)} found (truncated or extended file)",
                                path, len(lines))
    return metric, events


def _frames(name: str) -> list[str]:
    return [f.strip() for f in name.split("=>")] if "=>" in name else [name.strip()]


def _profile_dirs(path: Path) -> list[tuple[str | None, Path]]:
    """(metric from the directory name or None, directory) for a run directory."""
    multi = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith(_MULTI))
    if multi:
        return [(p.name[len(_MULTI):], p) for p in multi]
    return [(None, path)]


def _files(d: Path) -> list[Path]:
    return sorted((p for p in d.iterdir() if p.is_file() and _FILE.match(p.name)), key=location_of)


def read_run(path: Path) -> Experiment:
    """One experiment from a TAU run: a directory (with or without MULTI__ metric directories) or
    one ``profile.N.C.T`` file."""
    if path.is_file():
        groups = [(None, [path])]
    else:
        groups = [(m, _files(d)) for m, d in _profile_dirs(path)]
        groups = [(m, fs) for m, fs in groups if fs]
        if not groups:
            raise PerfcastError("no TAU profile.N.C.T files in this directory", path)
    tree = CallTree()
    metrics: dict[str, Metric] = {}
    frames = []
    locations0 = None
    for gi, (dir_metric, files) in enumerate(groups):
        locations: dict[tuple[int, int], Path] = {}
        for f in files:
            check_readable(f)
            loc = location_of(f)
            rank, thread = (0, 0) if loc is None else (loc[0], loc[2])
            if (rank, thread) in locations:
                raise PerfcastError(f"two profiles of rank {rank} thread {thread} ({locations[(rank, thread)].name}, "
                                    f"{f.name}): several TAU contexts are not supported", f)
            locations[(rank, thread)] = f
        if locations0 is None:
            locations0 = set(locations)
        elif set(locations) != locations0:
            missing = sorted(locations0 ^ set(locations))[:3]
            raise PerfcastError(f"the metric directories hold profiles of different locations (rank, thread) "
                                f"{missing}", files[0].parent)
        for (rank, thread), f in locations.items():
            metric, events = parse(f)
            if dir_metric is not None and metric != dir_metric:
                raise PerfcastError(f"holds metric {metric!r} inside directory {_MULTI}{dir_metric}", f, 1)
            is_time = "TIME" in metric.upper()
            label = "time" if metric.upper() == "TIME" else metric
            unit = "us" if is_time else "#"
            kind = "time" if is_time else "count"
            metrics.setdefault(f"{label} (I)", Metric(f"{label} (I)", unit, kind, "inclusive",
                                                      f"TAU {metric}, inclusive" + (" (microseconds)" if is_time else "")))
            metrics.setdefault(f"{label} (E)", Metric(f"{label} (E)", unit, kind, "exclusive",
                                                      f"TAU {metric}, exclusive" + (" (microseconds)" if is_time else "")))
            callpath = any("=>" in e[0] for e in events)
            below = set()
            if callpath:
                for e in events:
                    below.update(_frames(e[0])[1:])
            rows = []
            for name, calls, subrs, excl, incl in events:
                fr = _frames(name)
                if callpath and len(fr) == 1 and fr[0] in below:
                    continue  # a flat event whose callpaths carry its values
                if any(not x for x in fr):
                    raise PerfcastError(f"event {name[:60]!r} has an empty frame name", f)
                cp = tree.add_frames(fr) if len(fr) > 1 else tree.add(fr[0], None, fr[0])
                rows.append((cp, f"{label} (I)", incl))
                rows.append((cp, f"{label} (E)", excl))
                if gi == 0:
                    rows.append((cp, "calls", calls))
                    rows.append((cp, "subroutine_calls", subrs))
            if not rows:
                raise PerfcastError("the profile holds no events", f)
            df = pd.DataFrame(rows, columns=["callpath", "metric", "value"])
            if df.duplicated(["callpath", "metric"]).any():
                dup = df[df.duplicated(["callpath", "metric"])].iloc[0]["callpath"]
                raise PerfcastError(f"event {dup!r} appears twice (after stripping blanks)", f)
            df["rank"] = rank
            df["thread"] = thread
            frames.append(df)
    metrics["calls"] = Metric("calls", "#", "count", "exclusive", "times the TAU event was entered")
    metrics["subroutine_calls"] = Metric("subroutine_calls", "#", "count", "exclusive",
                                         "calls the TAU event made to other events")
    data = pd.concat(frames, ignore_index=True)
    data["rep"] = 0
    meta = {"tau": {"metrics": [m for m in metrics], "locations": len(locations0 or ())}}
    return Experiment([], data, metrics.values(), tree, meta)


def _is_profile(p: Path) -> bool:
    if not (p.is_file() and _FILE.match(p.name)):
        return False
    with open(p, "rb") as fh:
        head = fh.read(200).split(b"\n", 1)[0].decode("utf-8", "replace")
    return bool(_FIRST.match(head))


def _sniff(path: Path) -> bool:
    if path.is_file():
        return _is_profile(path)
    for _, d in _profile_dirs(path):
        for p in d.iterdir():
            if _is_profile(p):
                return True
    return False


def _all_files(path: Path) -> list[Path]:
    return [f for _, d in _profile_dirs(path) for f in _files(d)]


def _read(path: Path, options: ReadOptions) -> Experiment:
    return read_run(path)


register(Reader("tau", "TAU profiles (a directory of profile.N.C.T files, or of MULTI__<metric> directories)",
                (), _sniff, _read, directories=True, files=_all_files))

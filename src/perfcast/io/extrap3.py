"""Extra-P 3's binary experiment files (the legacy format Extra-P 4 still opens with ``--extra-p-3``).

Layout, as Extra-P 4.2.5 decodes it (``extrap/fileio/file_reader/extrap3_experiment_reader.py``):

* two bytes, the 16-bit integer 1 in the file's byte order (``01 00``: little endian, ``00 01``:
  big endian); every later number uses that order;
* strings: a 32-bit unsigned length, then that many UTF-8 bytes;
* the string ``EXTRAP_EXPERIMENT``, a version string (``1.0``), then objects until the end of the
  file, each a type string followed by its fields (integers are 64-bit, reals doubles):

  ``Parameter``   id, name
  ``Metric``      id, name, unit
  ``Region``      id, name, source file, first line
  ``Callpath``    id, region id, parent callpath id (-1 for a root)
  ``Coordinate``  id, count, then count x (parameter name, value)
  ``ExperimentPoint``  coordinate id, sample count, mean, mean CI start/end, standard deviation,
                  median, median CI start/end, minimum, maximum, metric id, callpath id
  ``ModelComment`` id, text
  ``SingleParameterSimpleModelGenerator`` / ``SingleParameterRefiningModelGenerator`` /
  ``MultiParameterSimpleModelGenerator`` / ``MultiParameterSparseModelGenerator``: the modeler's
                  settings (name, cross-validation, epsilon, ``GENERATE_MODEL_MEAN|MEDIAN``, and --
                  in files of the sparse-modeler era -- point-selection options; their presence also
                  adds a fourth error measure to each model)
  ``Model``       metric id, callpath id, generator id, the function, three (upper, lower) function
                  pairs, RSS, adjusted R^2, SMAPE [, RE], comment ids, per-parameter intervals.

Regions sharing a name get `` #1``, `` #2``, ... in the order met (as Extra-P names them);
callpaths are the region names of the chain of parents joined by ``->``.  The file stores
statistics, not repetitions: each point becomes one value at repetition 0, the statistic of the
first model generator (mean or median, mean without one; ``ReadOptions.statistic`` overrides), the
statistics go to ``meta["summary"]`` exactly as for Extra-P 4's saved experiments
(:mod:`perfcast.io.extrap`), and ``meta["warnings"]`` says so.  Stored models are decoded (to
check the file) but not kept beyond their count and generator names in ``meta["extrap3"]``.

Bad input.  The format has no length field or checksum, so completeness is checked the way Extra-P
validates what it read: every metric of every callpath must have a point at every coordinate (a
file cut between objects loses points or is refused), a cut inside an object is refused, ids must
be defined before use and only once, values must be finite.  Errors name the byte offset and the
object being read.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

from ..errors import PerfcastError
from ..experiment import SEP, Experiment
from . import ReadOptions, Reader, read_bytes, register
from .extrap import ARCHIVE_STATS, _Builder, _check_parameter_names

__all__ = ["MAGIC", "read_extrap3"]

#: the qualifier string every Extra-P 3 experiment starts with (after the byte-order mark)
MAGIC = b"EXTRAP_EXPERIMENT"
_STATS = ("mean", "median", "minimum", "maximum")
_GENERATORS = ("SingleParameterSimpleModelGenerator", "SingleParameterRefiningModelGenerator",
               "MultiParameterSimpleModelGenerator", "MultiParameterSparseModelGenerator")
_SINGLE_STRATEGIES = ("FIRST_POINTS_FOUND", "MAX_NUMBER_POINTS", "CHEAPEST_POINTS")
_MULTI_STRATEGIES = ("INCREASING_COST", "DECREASING_COST")
#: Extra-P writes this for a metric without a unit
_NO_UNIT = ("", "unknown")


def _sniff(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        head = f.read(6 + len(MAGIC))
    n = len(MAGIC)
    return (head[:6] == b"\x01\x00" + n.to_bytes(4, "little") or head[:6] == b"\x00\x01" + n.to_bytes(4, "big")) \
        and head[6:] == MAGIC


class _Stream:
    """A cursor over the file's bytes; every read past the end or of a malformed field raises a
    PerfcastError naming the offset and the object being read."""

    def __init__(self, data: bytes, path: Path, order: str):
        self.data, self.path, self.pos = data, path, 0
        self.order = order
        self.obj = "header"
        self._s: dict[str, struct.Struct] = {}

    def err(self, msg: str, at: int | None = None) -> PerfcastError:
        return PerfcastError(msg, self.path, f"byte {self.pos if at is None else at}, {self.obj}")

    def _take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise self.err(f"the file ends inside {what} ({len(self.data) - self.pos} of {n} bytes left): "
                           f"truncated or damaged")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str, what: str) -> tuple:
        s = self._s.get(fmt) or self._s.setdefault(fmt, struct.Struct(self.order + fmt))
        return s.unpack(self._take(s.size, what))

    def int(self, what: str) -> int:
        return self.unpack("q", what)[0]

    def real(self, what: str, finite: bool = True) -> float:
        at = self.pos
        v = self.unpack("d", what)[0]
        if finite and not math.isfinite(v):
            raise self.err(f"{what} is {v}, not a finite number", at)
        return v

    def count(self, what: str, min_item_bytes: int) -> int:
        at = self.pos
        n = self.int(what)
        if n < 0 or n * min_item_bytes > len(self.data) - self.pos:
            raise self.err(f"{what} {n} is impossible here (the file has {len(self.data) - self.pos} bytes left)", at)
        return n

    def string(self, what: str) -> str:
        at = self.pos
        n = self.unpack("I", f"the length of {what}")[0]
        raw = self._take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.err(f"{what} is not UTF-8 text", at) from None

    def word(self, what: str, allowed: tuple[str, ...]) -> str:
        at = self.pos
        s = self.string(what)
        if s not in allowed:
            raise self.err(f"{what} is {s[:40]!r}, expected {' or '.join(allowed)}", at)
        return s

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _function(s: _Stream, params: set[str]) -> None:
    """Decode (and discard) one function, its type string included."""
    at = s.pos
    kind = s.string("a function type")
    if kind in ("SingleParameterFunction", "MultiParameterFunction"):
        s.real("a constant coefficient", finite=False)
        if kind == "SingleParameterFunction":
            for _ in range(s.count("a term count", 12)):
                s.word("a term type", ("CompoundTerm",))
                _compound(s)
        else:
            for _ in range(s.count("a term count", 16)):
                s.real("a coefficient", finite=False)
                for _ in range(s.count("a factor count", 12)):
                    pat = s.pos
                    name = s.string("a parameter name")
                    if name not in params:
                        raise s.err(f"model term names the undeclared parameter {name[:40]!r}", pat)
                    s.word("a term type", ("CompoundTerm",))
                    _compound(s)
    elif kind == "CompoundTerm":
        _compound(s)
    elif kind == "SimpleTerm":
        s.string("a function type")
        s.real("an exponent", finite=False)
    elif kind != "Function":
        raise s.err(f"unknown function type {kind[:40]!r}", at)


def _compound(s: _Stream) -> None:
    s.real("a coefficient", finite=False)
    for _ in range(s.count("a simple-term count", 16)):
        s.word("a term type", ("SimpleTerm",))
        s.string("a function type")
        s.real("an exponent", finite=False)


def _options(s: _Stream) -> bool:
    """The point-selection options later Extra-P 3 versions append to a generator: read when present
    (True), else the stream is left where it was (False), as Extra-P does."""
    start, obj = s.pos, s.obj
    try:
        s.int("min points")
        single = s.string("a strategy")
        s.int("add points")
        s.int("number of added points")
        multi = s.string("a strategy")
    except PerfcastError:
        single = multi = None
    if single in _SINGLE_STRATEGIES and multi in _MULTI_STRATEGIES:
        return True
    s.pos, s.obj = start, obj
    return False


def read_extrap3(path: Path, options: ReadOptions | None = None) -> Experiment:  # noqa: C901 -- one format
    options = options or ReadOptions()
    data = read_bytes(path)
    bom = data[:2]
    if bom not in (b"\x01\x00", b"\x00\x01"):
        raise PerfcastError("not an Extra-P 3 experiment (no byte-order mark)", path, "byte 0")
    s = _Stream(data, path, "<" if bom == b"\x01\x00" else ">")
    s.pos = 2
    if s.string("the qualifier") != MAGIC.decode():
        raise s.err("not an Extra-P 3 experiment (no EXTRAP_EXPERIMENT qualifier)", 2)
    version = s.string("the version")

    params: list[str] = []
    param_ids: dict[int, str] = {}
    metrics: dict[int, tuple[str, str]] = {}
    regions: dict[int, str] = {}
    region_seen: dict[str, int] = {}
    callpaths: dict[int, str] = {}
    coords: dict[int, tuple[float, ...]] = {}
    points: dict[tuple, tuple] = {}   # (coords, callpath, metric) -> stats
    order: list[tuple] = []
    generators: list[tuple[str, str]] = []  # (type, statistic)
    sparse = False
    n_models = 0
    n_obj = 0

    def new_id(table: dict, what: str, at: int) -> int:
        i = s.int(f"the {what} id")
        if i in table:
            raise s.err(f"{what} id {i} defined twice", at)
        return i

    def ref(table: dict, what: str) -> object:
        at = s.pos
        i = s.int(f"a {what} id")
        if i not in table:
            raise s.err(f"{what} id {i} is not defined (before this point)", at)
        return table[i]

    while not s.at_end:
        at = s.pos
        s.obj = "object type"
        kind = s.string("an object type")
        n_obj += 1
        s.obj = f"{kind[:40]} at byte {at}"
        if kind == "Parameter":
            i = new_id(param_ids, "parameter", at)
            name = s.string("the parameter name")
            if name in params:
                raise s.err(f"parameter {name!r} declared twice", at)
            if coords:
                raise s.err(f"parameter {name!r} declared after the first coordinate", at)
            param_ids[i] = name
            params.append(name)
        elif kind == "Metric":
            i = new_id(metrics, "metric", at)
            name = s.string("the metric name")
            unit = s.string("the metric unit")
            if not name:
                raise s.err("a metric without a name", at)
            if any(name == m for m, _ in metrics.values()):
                raise s.err(f"metric {name!r} declared twice", at)
            metrics[i] = (name, "" if unit.strip().lower() in _NO_UNIT else unit)
        elif kind == "Region":
            i = new_id(regions, "region", at)
            name = s.string("the region name")
            s.string("the source file")
            s.int("the first line")
            if not name.strip():
                raise s.err("a region without a name", at)
            if SEP in name:
                raise s.err(f"region name {name[:40]!r} contains {SEP!r}, which separates callpath frames", at)
            if name in region_seen:
                region_seen[name] += 1
                name = f"{name} #{region_seen[name]}"
            else:
                region_seen[name] = 0
            regions[i] = name
        elif kind == "Callpath":
            i = new_id(callpaths, "callpath", at)
            region = ref(regions, "region")
            pat = s.pos
            parent_id = s.int("the parent callpath id")
            if parent_id == -1:
                cp = region
            elif parent_id in callpaths:
                cp = callpaths[parent_id] + SEP + region
            else:
                raise s.err(f"parent callpath id {parent_id} is not defined (before this point)", pat)
            if cp in callpaths.values():
                raise s.err(f"callpath {cp[:80]!r} defined twice", at)
            callpaths[i] = cp
        elif kind == "Coordinate":
            i = new_id(coords, "coordinate", at)
            n = s.count("the coordinate length", 12)
            if n != len(params):
                raise s.err(f"a coordinate of {n} value(s) but {len(params)} parameter(s) are declared", at)
            vals: dict[str, float] = {}
            for _ in range(n):
                pat = s.pos
                name = s.string("a parameter name")
                if name not in params:
                    raise s.err(f"coordinate names the undeclared parameter {name[:40]!r}", pat)
                if name in vals:
                    raise s.err(f"coordinate gives parameter {name!r} twice", pat)
                vals[name] = s.real(f"the value of {name}")
            # files written by Extra-P 3 repeat coordinates under new ids: the same point
            coords[i] = tuple(vals[p] for p in params)
        elif kind == "ExperimentPoint":
            c = ref(coords, "coordinate")
            pat = s.pos
            samples = s.int("the sample count")
            if samples < 0:
                raise s.err(f"sample count {samples} is negative", pat)
            st = {}
            for k in ("mean", "mean CI start", "mean CI end", "std", "median", "median CI start",
                      "median CI end", "minimum", "maximum"):
                st[k] = s.real(f"the {k}", finite=k in ("mean", "median", "minimum", "maximum", "std"))
            if st["std"] < 0:
                raise s.err(f"a standard deviation cannot be negative ({st['std']})", at)
            metric = ref(metrics, "metric")[0]
            cp = ref(callpaths, "callpath")
            key = (c, cp, metric)
            if key in points:
                raise s.err(f"a second point for {cp[:60]!r} / {metric!r} at {c}", at)
            points[key] = (samples, st)
            order.append(key)
        elif kind == "ModelComment":
            s.int("the comment id")
            s.string("the comment")
        elif kind in _GENERATORS:
            s.string("the generator name")
            if kind.startswith("SingleParameter"):
                s.string("the cross-validation method")
                s.real("epsilon", finite=False)
            measure = s.string("the model statistic")
            if _options(s):
                sparse = True
            if kind == "SingleParameterSimpleModelGenerator":
                for _ in range(s.count("the building-block count", 12)):
                    s.word("a term type", ("CompoundTerm",))
                    _compound(s)
                s.int("the maximum term count")
            generators.append((kind, {"GENERATE_MODEL_MEDIAN": "median"}.get(measure, "mean")))
        elif kind == "Model":
            ref(metrics, "metric")
            ref(callpaths, "callpath")
            pat = s.pos
            g = s.int("the generator id")
            if not 0 <= g < len(generators):
                raise s.err(f"generator id {g} is not defined (before this point)", pat)
            _function(s, set(params))
            for _ in range(6):
                _function(s, set(params))
            for k in ("RSS", "AR2", "SMAPE") + (("RE",) if sparse else ()):
                s.real(f"the {k}", finite=False)
            for _ in range(s.count("the comment count", 8)):
                s.int("a comment id")
            for _ in range(s.count("the interval count", 12)):
                s.string("a parameter name")
                for _ in range(s.count("the interval count", 16)):
                    s.real("an interval start", finite=False)
                    s.real("an interval end", finite=False)
            n_models += 1
        else:
            raise s.err(f"unknown object type {kind[:40]!r}: not an Extra-P 3 experiment, or damaged", at)

    s.obj = "end of file"
    if not params:
        raise s.err("no parameters")
    msg = _check_parameter_names(params)
    if msg:
        raise s.err(msg)
    if not coords:
        raise s.err("no coordinates")
    if not points:
        raise s.err("no measurements (no ExperimentPoint)")
    # completeness, as Extra-P validates it: every measured (callpath, metric) at every coordinate
    seen: dict[tuple, int] = {}
    n_coords = len(set(coords.values()))
    for c, cp, m in order:
        seen[(cp, m)] = seen.get((cp, m), 0) + 1
    for (cp, m), n in seen.items():
        if n != n_coords:
            raise s.err(f"{cp[:60]!r} / {m!r} has {n} point(s) for {n_coords} coordinate(s): truncated or damaged")
    # Extra-P 3 wrote full tables: a (callpath, metric) without points is a file cut between them
    for cp in callpaths.values():
        for m, _ in metrics.values():
            if (cp, m) not in seen:
                raise s.err(f"{cp[:60]!r} / {m!r} has no points (Extra-P 3 writes every metric of every "
                            f"callpath): truncated or damaged")

    stat = (options.statistic or "").lower()
    stat = {"min": "minimum", "max": "maximum"}.get(stat, stat) or (generators[0][1] if generators else "mean")
    if stat not in _STATS:
        raise PerfcastError(f"unknown statistic {options.statistic!r}; use mean, median, minimum or maximum")
    b = _Builder(params)
    for cp in callpaths.values():
        b.callpath(cp)
    for name, unit in metrics.values():
        b.metric(name, unit)
    rows = []
    for key in order:
        c, cp, m = key
        samples, st = points[key]
        try:
            b.add(c, cp, m, [st[stat]])
        except PerfcastError as e:
            raise PerfcastError(e.message, path, "ExperimentPoint") from None
        rows.append([*c, cp, m, samples, st["mean"], st["median"], st["minimum"], st["maximum"], st["std"]])
    meta = {"extrap3": {"version": version, "models": n_models, "generators": [g for g, _ in generators]},
            "summary": {"statistic": stat, "columns": [*params, "callpath", "metric", *ARCHIVE_STATS],
                        "rows": rows},
            "warnings": [f"{path.name}: an Extra-P 3 experiment stores statistics, not repetitions; each point "
                         f"holds one value, the {stat} (the statistics are in meta['summary'])"]}
    if options.progress is not None:
        options.progress(1, 1, str(path))
    return b.experiment(meta)


register(Reader("extrap3", "Extra-P 3 binary experiment (legacy; EXTRAP_EXPERIMENT)", (".extrap3",), _sniff,
                read_extrap3))

"""Extra-P input formats: text, JSON (both layouts), JSON Lines, Talpas and saved experiments.

Five readers are registered:

``extrap-text``
    Extra-P's text format (``PARAMETER`` / ``POINTS`` / ``METRIC`` / ``REGION`` / ``DATA`` lines).
    ``PARAMETER`` lines name the parameters (several names per line allowed); ``POINTS`` lines list
    the coordinates, each point in parentheses ``( 4 10 )`` (parentheses are optional with one
    parameter); ``METRIC`` and ``REGION`` select the metric and callpath of the following ``DATA``
    lines; a run of ``DATA`` lines gives, in order, the values of every point -- exactly one line
    per declared point.  ``#`` starts a comment line.  Callpaths nest with ``->``.  A file
    without any ``METRIC`` line has one metric, named :data:`DEFAULT_METRIC`.
``extrap-json``
    Extra-P's JSON input, both layouts: the newer
    ``{"parameters": [...], "measurements": {callpath: {metric: [{"point": [...], "values": [...]}]}}}``
    and the older id-based one with ``parameters`` / ``callpaths`` / ``metrics`` / ``coordinates`` /
    ``measurements`` lists.
``extrap-jsonl``
    JSON Lines: one object per line, ``{"params": {...}, "value": v | [v, ...]}`` with optional
    ``callpath`` and ``metric`` (defaults :data:`DEFAULT_CALLPATH`, :data:`DEFAULT_METRIC`); any
    other field is refused (a misspelt ``metric`` would silently select the default).
``talpas``
    The Talpas format: one measurement per line,
    ``{"parameters":{"x":20};"metric":"time";"callpath":"compute";"value":82.0}`` (``;`` separates
    the fields).
``extrap-experiment``
    An experiment saved by Extra-P 4 (``.extra-p``): a zip archive holding ``experiment.json`` --
    ``{"Extra-P": version, "parameters": [...], "measurements": {callpath: {metric: [{"coordinate":
    [...], "median", "mean", "minimum", "maximum", "std", "repetitions", "values"}]}}, "modelers":
    [...]}`` -- and, when Extra-P was told to keep them (``--keep-values``), the repetitions:
    ``"values": [chunk, i]`` refers to the i-th NumPy ``.npy`` array in ``values/<chunk>.vals``
    (16-byte magic ``Extra-P VALUES``), located by the little-endian 64-bit offsets in
    ``values/<chunk>.indx`` (magic ``Extra-P INDEX``, then the count).  With repetitions the
    experiment equals the one read from the original input.  **By default Extra-P saves no
    repetitions** (``"values": null``; so does the shared ``two_parameter3.txt.extra-p``): then
    each point holds one value at repetition 0 -- the statistic Extra-P's own saved modeler used
    (``use_measure``; mean when absent) -- the per-point statistics go verbatim to
    ``meta["summary"]`` and ``meta["warnings"]`` says so.  Nothing is invented: perfcast's noise
    estimate sees one value per point.  The stored models (``modelers``) are not read.

Every value list at a point becomes repetitions 0..k-1; values met again for a point, callpath and
metric (a repeated coordinate, a repeated REGION block, a second line) continue the repetition
numbering -- nothing is collapsed.  In a text file, a coordinate listed twice in POINTS and a
(REGION, METRIC) block of DATA lines met twice are warned about (``meta["warnings"]``): Extra-P
refuses such files, and a copy-paste slip would pass silently.

Files cut short.  Extra-P's own files often end without a line end, so a missing last line end
alone is not refused here (the line-based readers that always get one, e.g. tidy CSV, refuse it).
Instead: JSON Lines and Talpas records prove their own end (a cut object is not valid JSON); in the
text format a file ending on a REGION or METRIC line without DATA, or with fewer DATA lines than
POINTS, is refused, and a last DATA line without its line end must have as many values as the DATA
line before it in its block (a cut that drops values is refused).  A cut inside the very last
number after a digit (``223`` -> ``22``) cannot be told from a complete file and is the one cut
that still loads (a value ending in ``.``, ``e`` or a sign there is refused).  A warning for every
such file was considered and rejected: most Extra-P files end this way, so it would fire on nearly
every intact input.  These formats carry no units and no inclusive/exclusive
meaning, so metrics get ``Metric.guess(name)`` with scope ``unknown`` (the old JSON layout may
give a ``unit`` per metric).  Errors name the file and the line (text, JSON Lines, Talpas) or the
JSON field path.

Exporters: :func:`export` (``perfcast export``; :func:`write_extrap_text`, :func:`write_extrap_json`)
writes any Experiment as ``extrap-text`` or ``extrap-json`` (points layout) input that Extra-P 4 and
these readers read back value for value (see :func:`export` for what is reduced and refused).
"""

from __future__ import annotations

import collections
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
from .. import arrow_kernels as pc

from ..errors import PerfcastError
from ..experiment import (LISTED_REPETITIONS, RESERVED, SEP, CallTree, Experiment, Metric, coordinate_dtype,
                          fill_absent_repetitions, guess_kind)
from . import ReadOptions, Reader, register
from . import MAX_LINE_BYTES, json_int
from . import read_text as _read_checked
from .memory import release
from ..lazy import LazyModule
from ..table import Category, Columns, arrow_array, arrow_strings, numpy_of

pd = LazyModule("pandas")   # the line-by-line reader's and the exporters' frames (perfcast.lazy)

__all__ = ["DEFAULT_METRIC", "DEFAULT_CALLPATH", "read_text", "read_json", "read_jsonl", "read_talpas",
           "EXPORT_FORMATS", "export", "export_format", "write_extrap_text", "write_extrap_json"]

#: metric name used when a file does not name its metric (Extra-P leaves it empty)
DEFAULT_METRIC = "metric"
#: callpath used when a JSON Lines record has no callpath (Extra-P calls it ``<root>``)
DEFAULT_CALLPATH = "root"

#: how much of a file the sniffers look at
_SNIFF_BYTES = 1 << 16
#: JSON files up to this size are parsed completely when sniffing
_SNIFF_PARSE_LIMIT = 16 << 20

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_NONFINITE = re.compile(r"[-+]?(?:nan|inf|infinity)", re.IGNORECASE)
_KEYWORDS = ("PARAMETER", "POINTS", "METRIC", "REGION", "DATA")


# ---------------------------------------------------------------------------------------------
# shared pieces


class _Builder:
    """Collects values into tidy columns, numbering repetitions per point, callpath and metric."""

    def __init__(self, parameters: Iterable[str]):
        self.parameters = tuple(parameters)
        self.coords: list[tuple[float, ...]] = []
        self.reps: list[int] = []
        self.callpaths: list[str] = []
        self.metric_col: list[str] = []
        self.values: list[float] = []
        self._next_rep: dict[tuple, int] = {}
        self.tree = CallTree()
        self.metrics: dict[str, Metric] = {}
        #: what the input holds that is odd but read (meta["warnings"])
        self.warnings: list[str] = []

    def callpath(self, name: str) -> str:
        """Add ``name`` (frames joined by ``->``) to the tree; returns the callpath id.

        Raises a location-less PerfcastError on an empty frame; callers add the place.
        """
        frames = [f.strip() for f in name.split(SEP)]
        if any(not f for f in frames):
            raise PerfcastError(f"callpath {name!r} has an empty frame")
        path = SEP.join(frames)
        if path not in self.tree:
            self.tree.add_frames(frames)
        return path

    def metric(self, name: str, unit: str = "") -> str:
        if name not in self.metrics:
            self.metrics[name] = Metric.guess(name, unit)
        elif unit and self.metrics[name].unit != unit:
            raise PerfcastError(f"metric {name!r} given two units ({self.metrics[name].unit!r}, {unit!r})")
        return name

    def add(self, coords: tuple[float, ...], callpath: str, metric: str, values: list[float]):
        """Append ``values`` as the next repetitions; a location-less PerfcastError for a negative
        count (callers add the place)."""
        m = self.metrics[metric]
        if m.kind in ("count", "bytes") and any(v < 0 for v in values):
            raise PerfcastError(f"metric {metric!r} counts {m.kind} but the value {min(values)} is negative")
        key = (coords, callpath, metric)
        rep = self._next_rep.get(key, 0)
        for v in values:
            self.coords.append(coords)
            self.reps.append(rep)
            self.callpaths.append(callpath)
            self.metric_col.append(metric)
            self.values.append(v)
            rep += 1
        self._next_rep[key] = rep

    def experiment(self, meta: dict | None = None) -> Experiment:
        if not self.values:
            raise PerfcastError("no measured values")
        n = len(self.values)
        frame: dict[str, Any] = {}
        if self.parameters:
            arr = np.asarray(self.coords, dtype="float64").reshape(n, len(self.parameters))
            for i, p in enumerate(self.parameters):
                frame[p] = arr[:, i]
        frame["rep"] = np.asarray(self.reps, dtype="int64")
        frame["callpath"] = pd.Categorical(self.callpaths)
        frame["metric"] = pd.Categorical(self.metric_col)
        frame["value"] = np.asarray(self.values, dtype="float64")
        # each callpath's repetitions are its own value list: a shorter one is fewer measurements
        # (experiment.absent_repetition_is_zero)
        meta = {**(meta or {}), "repetitions": LISTED_REPETITIONS}
        if self.warnings:
            meta["warnings"] = [*meta.get("warnings", []), *self.warnings]
        return Experiment(self.parameters, pd.DataFrame(frame), self.metrics.values(), self.tree, meta)


def _check_parameter_names(names: list[str]) -> str | None:
    """A message when the names cannot be parameters, else None."""
    seen = set()
    for n in names:
        if n in RESERVED:
            return f"parameter name {n!r} is reserved (reserved: {', '.join(RESERVED)})"
        if n in seen:
            return f"parameter {n!r} is declared twice"
        seen.add(n)
    return None


def _read_text_file(path: Path) -> str:
    """The file as text (UTF-8, BOM tolerated); a decoding error names the line.  A last line
    without its line end is allowed here: each format checks its own last record (see read_text
    and _read_lines_format)."""
    return _read_checked(path, unterminated="allow")


def _lines(text: str) -> list[str]:
    """Lines split on newlines only (so numbers match what editors show), CR stripped."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def _head(path: Path, limit: int = _SNIFF_BYTES) -> str | None:
    """The start of a file as text, or None when it is not text."""
    with open(path, "rb") as f:
        raw = f.read(limit)
    if b"\x00" in raw:
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if e.start >= len(raw) - 3:  # a multi-byte character cut by the limit
            return raw[:e.start].decode("utf-8-sig")
        return None


# ---------------------------------------------------------------------------------------------
# text format


def _text_number(tok: str) -> float | str:
    """The float value of ``tok``, or a message saying what is wrong with it."""
    if _NUMBER.fullmatch(tok):
        v = float(tok)
        if math.isfinite(v):
            return v
        return f"value {tok!r} overflows to infinity"
    if _NONFINITE.fullmatch(tok):
        return f"value {tok!r} is not finite (NaN and infinity are not measurements)"
    return f"{tok!r} is not a number"


def _repeats(path: str | Path, points: list[tuple[float, ...]], blocks: list[tuple[str, str, int]],
             n_blocks: int = 0) -> list[str]:
    """The warnings for what the text format merges as repetitions but Extra-P refuses, and a
    copy-paste slip would otherwise pass silently: coordinates listed more than once in POINTS,
    and (callpath, metric) blocks of DATA lines met more than once (``blocks``: callpath, metric,
    how many blocks; the first few in name order of ``n_blocks`` such)."""
    out = []
    twice = _points_twice(path, "POINTS", points, "the DATA lines at those positions")
    if twice:
        out.append(twice)
    if blocks:
        shown = ", ".join(f"REGION {cp!r} METRIC {mt!r} {k} times" for cp, mt, k in blocks[:3])
        n_blocks = max(n_blocks, len(blocks))
        more = f" and {n_blocks - 3} more" if n_blocks > 3 else ""
        out.append(f"{Path(path).name}: DATA blocks of {shown}{more}: their values are merged as repetitions "
                   f"at each point (Extra-P refuses such a file); rename the blocks unless they are meant as "
                   f"repetitions (runs appended to one file)")
    return out


def _points_twice(path: str | Path, lister: str, points: list[tuple[float, ...]], merged: str,
                  elsewhere: int = 0, refused: bool = True) -> str | None:
    """The one warning for coordinates listed more than once (text POINTS, a JSON point list):
    ``merged`` (what holds their values) is merged as repetitions of one point; ``elsewhere``:
    further lists with points twice; ``refused``: Extra-P refuses such a file (its text reader)."""
    counts = collections.Counter(points)
    twice = [(pt, k) for pt, k in counts.items() if k > 1]
    if not twice:
        return None
    shown = ", ".join(f"({' '.join(_fmt(v) for v in pt)}) {k} times" for pt, k in twice[:5])
    more = f" and {len(twice) - 5} more point(s)" if len(twice) > 5 else ""
    also = f" (so do {elsewhere} more list(s))" if elsewhere else ""
    refuses = " (Extra-P refuses such a file)" if refused else ""
    return (f"{Path(path).name}: {lister} lists {shown}{more}{also}: {merged} are merged as repetitions of one "
            f"point{refuses}; list every point once unless they are meant as repetitions")


def _parse_points(text: str, nparams: int) -> list[tuple[float, ...]] | str:
    """The points of a POINTS line, or a message saying what is wrong."""
    tokens = re.findall(r"\(|\)|[^\s()]+", text)
    if not tokens:
        return "POINTS line lists no point"
    points: list[list[float]] = []
    bare: list[bool] = []  # the point was a bare number, not parenthesised
    depth = 0
    cur: list[float] = []
    inner = 0  # numbers inside a parenthesised coordinate
    for tok in tokens:
        if tok == "(":
            if depth == 0:
                cur = []
            elif depth == 1:
                inner = 0
            else:
                return "parentheses nested too deeply in POINTS"
            depth += 1
        elif tok == ")":
            if depth == 0:
                return "')' without a matching '(' in POINTS"
            if depth == 2 and inner != 1:
                return "a parenthesised coordinate must hold exactly one number"
            depth -= 1
            if depth == 0:
                points.append(cur)
                bare.append(False)
        else:
            v = _text_number(tok)
            if isinstance(v, str):
                return f"coordinate {v}" if v.startswith("value") else v
            if depth == 0:
                points.append([v])
                bare.append(True)
            else:
                cur.append(v)
                if depth == 2:
                    inner += 1
    if depth:
        return "'(' is not closed in POINTS (truncated line?)"
    for pt, was_bare in zip(points, bare):
        if len(pt) != nparams:
            shown = "( " + " ".join(_fmt(v) for v in pt) + " )"
            hint = "; put each point in parentheses" if was_bare else ""
            return (f"point {shown} has {len(pt)} coordinate(s) but {nparams} parameter(s) are "
                    f"declared{hint}")
    return [tuple(pt) for pt in points]


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def read_text(path: Path, options: ReadOptions | None = None) -> Experiment:
    """Read an Extra-P text file.

    The file is parsed in chunks of :data:`TEXT_CHUNK_BYTES` (pyarrow/numpy, memory about the size
    of the value table); a file the streaming path does not take -- any error, non-ASCII or control
    characters -- is read line by line (:func:`_read_text_lines`), whose messages name the line.
    """
    try:
        return _read_text_stream(path)
    except _Slow:
        return _read_text_lines(path)


def _read_text_lines(path: Path) -> Experiment:
    """Read an Extra-P text file line by line (the reference for the streaming path)."""
    lines = _lines(_read_text_file(path))

    def err(msg: str, line: int) -> PerfcastError:
        return PerfcastError(msg, path, line)

    has_metric = any(ln.split(None, 1)[:1] == ["METRIC"] for ln in lines)
    parameters: list[str] = []
    points: list[tuple[float, ...]] = []
    b: _Builder | None = None
    region: str | None = None
    metric: str | None = None
    block = {"count": 0, "first": 0, "last": 0}
    comments: list[str] = []
    last_line = 0
    data_lens: list[tuple[int, int, int]] = []  # (line, number of values, block start line)
    blocks: collections.Counter = collections.Counter()  # (callpath, metric) -> its blocks of DATA lines
    open_key: tuple[str, int] | None = None  # a REGION/METRIC line not yet followed by DATA

    def close_block():
        n = block["count"]
        if 0 < n < len(points):
            raise err(f"REGION {region!r} METRIC {metric!r} has {n} DATA line(s) (lines {block['first']}-"
                      f"{block['last']}) but {len(points)} POINTS are declared; give one DATA line per point",
                      block["last"])
        block.update(count=0, first=0, last=0)

    for no, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        last_line = no
        if s.startswith("#"):
            comments.append(s[1:].strip())
            continue
        parts = s.split(None, 1)
        key = parts[0]
        rest = " ".join(parts[1].split()) if len(parts) > 1 else ""
        if key == "PARAMETER":
            if points or region is not None or metric is not None:
                raise err("PARAMETER after POINTS/REGION/METRIC: declare all parameters first", no)
            names = rest.split()
            if not names:
                raise err("PARAMETER line names no parameter", no)
            msg = _check_parameter_names(parameters + names)
            if msg:
                raise err(msg, no)
            parameters += names
        elif key == "POINTS":
            if not parameters:
                raise err("POINTS before any PARAMETER line", no)
            if b is not None and b.values:
                raise err("POINTS after DATA lines: declare all points before the measurements", no)
            pts = _parse_points(rest, len(parameters))
            if isinstance(pts, str):
                raise err(pts, no)
            points += pts
        elif key in ("REGION", "METRIC"):
            if not rest:
                raise err(f"{key} line without a name", no)
            close_block()
            open_key = (key, no)
            if key == "REGION":
                if b is None:
                    b = _Builder(parameters)
                try:
                    region = b.callpath(rest)
                except PerfcastError as e:
                    raise err(e.message, no) from None
            else:
                metric = rest
        elif key == "DATA":
            if not points:
                raise err("DATA before any POINTS line", no)
            if region is None:
                raise err("DATA before any REGION line", no)
            if metric is None:
                if has_metric:
                    raise err("DATA line before the first METRIC line: its metric is unknown", no)
                metric = DEFAULT_METRIC
            if block["count"] >= len(points):
                raise err(f"more DATA lines than the {len(points)} declared POINTS for REGION {region!r} "
                          f"METRIC {metric!r}", no)
            toks = rest.split()
            if not toks:
                raise err("DATA line without values", no)
            values = []
            for tok in toks:
                v = _text_number(tok)
                if isinstance(v, str):
                    raise err(f"DATA {v}", no)
                values.append(v)
            assert b is not None
            b.metric(metric)
            try:
                b.add(points[block["count"]], region, metric, values)
            except PerfcastError as e:
                raise err(e.message, no) from None
            if block["count"] == 0:
                block["first"] = no
                blocks[(region, metric)] += 1
            block["count"] += 1
            block["last"] = no
            data_lens.append((no, len(toks), block["first"]))
            open_key = None
        else:
            word = key if len(key) <= 40 else key[:40] + "..."
            raise err(f"unknown keyword {word!r} (expected one of {', '.join(_KEYWORDS)} or a # comment)", no)

    close_block()
    if not parameters:
        raise PerfcastError("no PARAMETER line (not an Extra-P text file, or empty)", path, last_line or None)
    if b is None or not b.values:
        raise PerfcastError("no DATA lines (truncated file?)", path, last_line or None)
    if open_key is not None:
        raise PerfcastError(f"the file ends after this {open_key[0]} line without its DATA lines "
                            f"(truncated file?)", path, open_key[1])
    meta = {"comments": comments} if comments else {}
    again = sorted((cp, mt, k) for (cp, mt), k in blocks.items() if k > 1)
    twice = _repeats(path, points, again[:3], len(again))
    if twice:
        meta["warnings"] = twice
    unterminated = len(lines) == last_line and bool(lines[-1].strip())
    if unterminated and data_lens and data_lens[-1][0] == last_line:
        no, n, start = data_lens[-1]
        if len(data_lens) > 1 and data_lens[-2][1] != n and data_lens[-2][2] == start:
            raise PerfcastError(f"the last line has no line end and {n} value(s) where the DATA line before "
                                f"it has {data_lens[-2][1]}: the file may be truncated (add a newline at "
                                f"the end if it is complete)", path, no)
        tok = lines[-1].split()[-1]
        if tok[-1] in ".eE+-":
            raise PerfcastError(f"the last line has no line end and its last value {tok!r} ends in "
                                f"{tok[-1]!r}: the file may be truncated (add a newline at the end if it "
                                f"is complete)", path, no)
    return b.experiment(meta)


# ---------------------------------------------------------------------------------------------
# text format, streaming path

#: the text reader parses the file in chunks of about this many bytes (cut at a line end)
TEXT_CHUNK_BYTES = 4 << 20

#: bytes the streaming path handles: printable ASCII, tab, CR, LF.  Anything else (non-ASCII names,
#: other control characters) goes to the line-by-line reader, whose whitespace rules are Python's.
_PLAIN_BYTES = bytes([9, 10, 13, *range(32, 127)])


class _Slow(Exception):
    """The streaming path met something it leaves to the line-by-line reader (every error, so the
    messages and line numbers stay those of one implementation)."""


# line kinds of the streaming text parser
_BLANK, _DATA, _REGION, _METRIC, _COMMENT, _OTHER = range(6)
#: the bytes a DATA value may hold (pyarrow's cast to float64 accepts, over these, exactly what
#: _NUMBER accepts; "nan", "inf" and the like are kept out by this set)
_NUMBER_BYTES = b"0123456789.eE+-"


def _word(w: bytes) -> int:
    return int.from_bytes(w, "little")


def _kinds(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The kind of each trimmed line ``data[starts:ends]`` from its first bytes."""
    kind = np.full(len(starts), _OTHER, dtype=np.int8)
    length = ends - starts
    kind[length == 0] = _BLANK
    if len(data) < 8:
        data = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    n = len(data)
    # the first 4 bytes of every line as one little-endian integer (an unaligned view, one gather)
    head = np.ndarray((n - 3,), dtype="<u4", buffer=data, strides=(1,))[np.minimum(starts, n - 4)]
    head[length < 4] = 0

    def blank_at(pos: np.ndarray) -> np.ndarray:
        c = data[np.minimum(pos, n - 1)]
        return (c == 32) | (c == 9) | (c == 13)

    data_ = head == _word(b"DATA")
    data_ &= (length == 4) | blank_at(starts + 4)
    kind[data_] = _DATA
    for word, k in ((b"REGION", _REGION), (b"METRIC", _METRIC)):
        # "REGION" alone is an error (no name): left _OTHER
        cand = np.flatnonzero((head == _word(word[:4])) & (length > 6))
        s = starts[cand]
        ok = (data[s + 4] == word[4]) & (data[s + 5] == word[5]) & blank_at(s + 6)
        kind[cand[ok]] = k
    kind[(data[np.minimum(starts, n - 1)] == ord("#")) & (length > 0)] = _COMMENT
    return kind


def _names(lines: pa.Array, skip: int) -> pa.Array:
    """The names after a REGION/METRIC keyword: blank runs collapsed to one space, as
    ``" ".join(rest.split())``."""
    names = pc.ascii_ltrim_whitespace(pc.utf8_slice_codeunits(lines, skip))
    return pc.replace_substring_regex(names, r"[ \t\r]+", " ")


class _TextStream:
    """State of the streaming text parser across chunks.

    A chunk is handled as whole arrays, not line by line: the kind of every line from its first
    bytes, the callpath, metric and point of every DATA line from the REGION/METRIC lines before it
    (numpy searches), the values of all DATA lines by one split and one cast.  Only the lines of
    other kinds (PARAMETER, POINTS, anything wrong) go one at a time through :meth:`other`; they
    cut the chunk into segments handled by :meth:`segment`.  Callpaths are kept as the REGION
    lines' names (arrow arrays, the value table holds the REGION line's number) and numbered once
    at the end, in :meth:`experiment`.
    """

    def __init__(self):
        self.parameters: list[str] = []
        self.points: list[tuple[float, ...]] = []
        self.region: int | None = None  # number of the current REGION line
        self.metric: int | None = None  # metric code
        self.names: list[pa.Array] = []  # the (normalised) names of the REGION lines, in order
        self.n_regions = 0  # REGION lines so far
        self.metric_codes: dict[str, int] = {}
        self.default_metric_used = False
        self.block_count = 0
        self.block_serial = 0
        # (REGION line, metric) of every block, to find a (callpath, metric) block met twice at the end
        self.block_cp: list[np.ndarray] = []
        self.block_metric: list[np.ndarray] = []
        self.any_data = False
        self.open_key = False
        self.comments: list[str] = []
        # the value table's columns, grown chunk by chunk (created at the first DATA)
        self.cols: dict[str, _Grow] | None = None
        self.size = 0  # bytes of the file, to size the columns
        self.done = 0  # bytes parsed
        self.last_data: list[tuple[int, int]] = []  # (number of values, block serial) of the last 2 DATA lines
        self.last_line_kind = ""
        self.unterminated = False
        self.blocks_twice: tuple[list, int] = ([], 0)

    # -- one line of another kind (stripped, non-empty): PARAMETER, POINTS, or an error --------
    def other(self, s: str):
        self.last_line_kind = "other"
        parts = s.split(None, 1)
        key = parts[0]
        rest = " ".join(parts[1].split()) if len(parts) > 1 else ""
        if key == "PARAMETER":
            if self.points or self.region is not None or self.metric is not None:
                raise _Slow
            names = rest.split()
            if not names or _check_parameter_names(self.parameters + names):
                raise _Slow
            self.parameters += names
        elif key == "POINTS":
            if not self.parameters or self.any_data:
                raise _Slow
            pts = _parse_points(rest, len(self.parameters))
            if isinstance(pts, str):
                raise _Slow
            self.points += pts
        else:
            raise _Slow

    def close_block(self):
        if 0 < self.block_count < len(self.points):
            raise _Slow
        self.block_count = 0
        self.block_serial += 1

    # -- a run of REGION, METRIC, DATA and comment lines --------------------------------------
    def segment(self, kind: np.ndarray, lines: pa.Array) -> tuple[np.ndarray, ...] | None:
        """The lines' kinds and trimmed texts (blank lines included); returns (point, REGION line, metric, block serial)
        of each DATA line, or None without DATA lines."""
        npts = len(self.points)
        com = np.flatnonzero(kind == _COMMENT)
        if len(com):
            self.comments += [c[1:].strip() for c in pc.take(lines, arrow_array(com)).to_pylist()]
        is_key = (kind == _REGION) | (kind == _METRIC)
        rpos = np.flatnonzero(kind == _REGION)
        mpos = np.flatnonzero(kind == _METRIC)
        if len(rpos):
            names = _names(pc.take(lines, arrow_array(rpos)), 6)
            if pc.any(pc.match_substring(names, SEP)).as_py():  # frames stripped, as _Builder.callpath
                names = pc.replace_substring_regex(names, r" ?-> ?", SEP)
                if pc.any(pc.match_substring_regex(names, r"^->|->$|->->")).as_py():
                    raise _Slow  # an empty frame
            self.names.append(names)
        if len(mpos):
            if self.default_metric_used:
                raise _Slow  # DATA before the first METRIC line
            names = _names(pc.take(lines, arrow_array(mpos)), 6)
            for name in pc.unique(names).to_pylist():
                self.metric_codes.setdefault(name, len(self.metric_codes))
            mcode = pc.index_in(names, value_set=arrow_strings(list(self.metric_codes), names.type))
            mcode = numpy_of(mcode).astype(np.int64)
        is_data = kind == _DATA
        di = np.flatnonzero(is_data)
        nd = len(di)
        nkeys = len(rpos) + len(mpos)
        out = None
        if nd:
            if not npts:
                raise _Slow
            # the REGION line (numbered across the file) and metric of each DATA line: the last
            # ones before it, by running counts (linear, no searches)
            nr = np.cumsum(kind == _REGION)[di]
            region = np.where(nr > 0, self.n_regions + nr - 1, -1 if self.region is None else self.region)
            if region[0] < 0:
                raise _Slow  # DATA before any REGION line
            nm = np.cumsum(kind == _METRIC)[di]
            metric = mcode[np.maximum(nm - 1, 0)] if len(mpos) else np.empty(nd, dtype=np.int64)
            metric[nm == 0] = -1 if self.metric is None else self.metric
            if metric[0] < 0:  # DATA before the first METRIC line: the default metric, and no METRIC after
                if len(mpos):
                    raise _Slow
                self.default_metric_used = True
                self.metric = self.metric_codes.setdefault(DEFAULT_METRIC, len(self.metric_codes))
                metric[:] = self.metric
            blk = np.cumsum(is_key)[di]  # the block of each DATA line: keys before it
            total = np.bincount(blk, minlength=nkeys + 1)
            total[0] += self.block_count
            closed = total[:nkeys]
            if total.max() > npts or ((closed > 0) & (closed < npts)).any():
                raise _Slow  # more DATA lines than points, or a block closed with fewer
            # the point of a DATA line: DATA lines before it since the last key (plus the carried count)
            count = np.cumsum(is_data)
            point = count[di] - 1 - np.maximum.accumulate(np.where(is_key, count, 0))[di]
            point[blk == 0] += self.block_count
            first = point == 0  # a block starts: its (callpath, metric) recorded
            self.block_cp.append(region[first])
            self.block_metric.append(metric[first])
            out = point, region, metric, self.block_serial + blk
            self.block_count = int(total[-1])
            self.any_data = True
        elif nkeys:
            if 0 < self.block_count < npts:
                raise _Slow  # the first key closes a block with fewer DATA lines than points
            self.block_count = 0
        self.block_serial += nkeys
        if nkeys:
            self.open_key = not nd or di[-1] < np.flatnonzero(is_key)[-1]
        elif nd:
            self.open_key = False
        if len(rpos):
            self.n_regions += len(rpos)
            self.region = self.n_regions - 1
        if len(mpos):
            self.metric = int(mcode[-1])
        shown = kind[kind != _BLANK]
        if len(shown):
            self.last_line_kind = "data" if shown[-1] == _DATA else "other"
        return out

    def repeated(self, cp_code: np.ndarray, block_cp: np.ndarray, block_metric: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (callpath code, metric code) pairs met in more than one block, and in how many
        (``cp_code``: REGION line -> code; the blocks' REGION lines and metrics)."""
        M = max(1, len(self.metric_codes))
        key = cp_code[block_cp].astype(np.int64) * M
        key += block_metric
        # a sort and a look at neighbours: np.unique (numpy 2.x hashes plain int arrays) took
        # 0.3 s for 300k blocks, this 20 ms
        key.sort()
        if not (key[1:] == key[:-1]).any():
            return (np.zeros(0, dtype=np.int64),) * 3
        u, k = np.unique(key, return_counts=True)
        u, k = u[k > 1], k[k > 1]
        return u // M, u % M, k

    # -- one chunk of whole lines -------------------------------------------------------------
    def chunk(self, raw: bytes):
        self.done += len(raw)
        if raw.translate(None, _PLAIN_BYTES):
            raise _Slow
        buf = np.frombuffer(raw, dtype=np.uint8)
        ends = np.flatnonzero(buf == 10)
        if len(ends) == 0 or ends[-1] != len(raw) - 1:
            ends = np.append(ends, len(raw))  # the last line of a file without a line end
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        if np.max(ends - starts) > MAX_LINE_BYTES:
            raise _Slow
        offsets = np.empty(len(ends) + 1, dtype=np.int64)
        offsets[:-1] = starts
        offsets[-1] = ends[-1]
        # lines without their line end: [start, next start - 1), the LF excluded by trimming
        lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(raw))
        lines = pc.ascii_trim_whitespace(lines)
        toff = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
        kind = _kinds(np.frombuffer(lines.buffers()[2], dtype=np.uint8), toff[:-1], toff[1:])
        if (kind == _BLANK).all():
            return
        runs = []
        done = 0
        for o in np.flatnonzero(kind == _OTHER).tolist() + [len(kind)]:  # PARAMETER, POINTS (few)
            if o > done:
                runs.append(self.segment(kind[done:o], lines.slice(done, o - done)))
            if o < len(kind):
                self.other(lines[o].as_py())
            done = o + 1
        runs = [r for r in runs if r is not None]
        if not runs:
            return
        line_point, line_cp, line_met, serial = (np.concatenate(c) for c in zip(*runs))
        nd = len(line_point)
        # the values: the text after DATA, split on blanks; over the bytes [0-9.eE+-] the cast to
        # float64 accepts exactly the numbers _NUMBER matches (checked over every token of up to 6
        # of these bytes), and refuses an empty token ("DATA" alone)
        data = pc.filter(lines, arrow_array(kind == _DATA))
        toks = pc.ascii_split_whitespace(pc.ascii_ltrim_whitespace(pc.utf8_slice_codeunits(data, 4)))
        lens = numpy_of(pc.list_value_length(toks)).astype(np.int64)
        flat = pc.list_flatten(toks)
        foff = np.frombuffer(flat.buffers()[1], dtype=np.int64)
        chars = flat.buffers()[2][foff[flat.offset]:foff[flat.offset + len(flat)]]
        if chars.to_pybytes().translate(None, _NUMBER_BYTES):
            raise _Slow
        try:
            values = numpy_of(pc.cast(flat, pa.float64()))
        except pa.ArrowInvalid:
            raise _Slow from None
        if not np.isfinite(values).all():
            raise _Slow
        nv = len(values)
        val_line = np.repeat(np.arange(nd), lens)
        line_first = np.cumsum(lens) - lens
        met = line_met[val_line]
        counted = np.array([guess_kind(m) in ("count", "bytes") for m in self.metric_codes])
        if counted.any() and (values[counted[met]] < 0).any():
            raise _Slow
        if self.cols is None:  # the points are final once values came (POINTS after DATA is an error)
            self.cols = {"point": _Grow(_narrow(len(self.points))), "cp": _Grow(np.int32),
                         "metric": _Grow(np.int8), "rep": _Grow(np.int8), "value": _Grow(np.float64)}
            self.pts = np.asarray(self.points, dtype="float64").reshape(len(self.points), len(self.parameters))
        # the columns are sized by the share of the file parsed so far (no doubling, no copies)
        expect = int((self.cols["value"].n + nv) * max(1.0, self.size / max(1, self.done)) * 1.02) + 1024
        point = line_point[val_line]
        self.cols["point"].append(point, expect)
        self.cols["cp"].append(line_cp[val_line], expect)
        if len(self.metric_codes) > 127:
            self.cols["metric"].widen(np.int32)
        self.cols["metric"].append(met, expect)
        rep = np.arange(nv) - line_first[val_line]
        self.cols["rep"].widen(_narrow(int(lens.max(initial=0))))
        self.cols["rep"].append(rep, expect)
        self.cols["value"].append(values, expect)
        for i in range(max(0, nd - 2), nd):
            self.last_data = [*self.last_data, (int(lens[i]), int(serial[i]))][-2:]
        self.last_tok = flat[nv - 1].as_py() if nv else ""

    # -- the Experiment -----------------------------------------------------------------------
    def experiment(self, unterminated: bool) -> Experiment:
        self.close_block()
        self.final_checks(unterminated)
        cols = {k: c.take() for k, c in self.cols.items()}
        self.cols = None
        names, self.names = [pa.concat_arrays(self.names)], []  # handed over: freed by the callee
        block_cp, self.block_cp = np.concatenate(self.block_cp), []
        block_metric, self.block_metric = np.concatenate(self.block_metric), []
        return self._experiment_of(cols, names, 0, block_cp, block_metric)

    def final_checks(self, unterminated: bool) -> None:
        """What the end of the file must satisfy (after :meth:`close_block`)."""
        if not self.parameters or self.region is None or not self.any_data or self.open_key:
            raise _Slow
        if unterminated and self.last_line_kind == "data":
            n, serial = self.last_data[-1]
            if len(self.last_data) > 1 and self.last_data[-2][1] == serial and self.last_data[-2][0] != n:
                raise _Slow
            if self.last_tok[-1:] in (".", "e", "E", "+", "-"):
                raise _Slow

    def _experiment_of(self, cols: dict, names: list[pa.Array], base: int, block_cp: np.ndarray,
                       block_metric: np.ndarray) -> Experiment:
        """The Experiment of the value table ``cols`` (emptied) whose REGION lines are ``names``
        (a list of one array, emptied: the caller keeps no reference to the names; REGION line
        ``base`` first), its (callpath, metric) blocks ``block_cp`` (REGION lines) and
        ``block_metric``: the whole file, or a range of whole REGION lines (:func:`text_range`)."""
        b = _Builder(self.parameters)
        metric_names = list(self.metric_codes)
        for code in _first_seen(block_metric):  # the metrics with values, by first use
            b.metric(metric_names[code])
        # the callpaths: the REGION lines' names numbered by first occurrence, then sorted
        enc = pc.dictionary_encode(names.pop())
        release()  # the hash table's memory (~70 MB at 800k names), the chunks' freed heap
        order = pc.array_sort_indices(enc.dictionary)  # bytes (ASCII): Python's str order
        categories = pc.take(enc.dictionary, order)
        order = numpy_of(order)
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        cp_code = rank[numpy_of(enc.indices)]  # REGION line - base -> sorted code
        b.tree = CallTree.from_paths(enc.dictionary)  # no Python string per callpath
        del enc, rank, order
        rep, cp, met, value, point = cols.pop("rep"), cols.pop("cp"), cols.pop("metric"), cols.pop("value"), cols.pop("point")
        if base:
            cp -= base
        _remap(cp, cp_code)
        coord_id: dict[tuple[float, ...], int] = {}
        canon = np.array([coord_id.setdefault(pt, len(coord_id)) for pt in self.points], dtype=np.int32)
        rcp, rmt, rk = self.repeated(cp_code, block_cp - base, block_metric)
        #: (callpath, metric, blocks) of the first blocks met again, and how many such (:func:`_repeats`)
        self.blocks_twice = (sorted((categories[c].as_py(), metric_names[m], int(k)) for c, m, k
                                    in zip(rcp.tolist(), rmt.tolist(), rk.tolist()))[:3], len(rk))
        if len(rk) or len(coord_id) < len(self.points):
            # values met again for a coordinate, callpath and metric (a repeated block, a coordinate
            # listed twice in POINTS) continue its repetitions
            rep = _cumcount([canon[point], cp, met], [len(categories), len(metric_names)])
            rep = rep.astype(_narrow(int(rep.max(initial=0))))
        # the parameter columns from the point codes, now that the names' hash table is gone (the
        # chunks kept 1 byte a value, not 8 per parameter); every point has values (a block holds
        # one DATA line per point), so the points' dtype is the column's (coordinate_dtype)
        release()  # what the names, the tree and the remap freed, before the columns are made
        params = []
        for i in range(len(self.parameters)):
            dtype = coordinate_dtype(self.pts[:, i])
            params.append(_take(self.pts[:, i].astype(dtype), point))
        del point, cp_code
        release()  # the point codes (in the C heap: freed, but kept there without a trim)
        frame: dict[str, Any] = dict(zip(self.parameters, params))
        frame["rep"] = rep
        frame["callpath"] = Category(cp, categories)
        del categories
        frame["metric"] = _sorted_categorical(met, metric_names)
        frame["value"] = value
        del params, rep, cp, met, value
        meta = {"comments": self.comments} if self.comments else {}
        meta["repetitions"] = LISTED_REPETITIONS  # as _Builder.experiment
        # the columns handed over: the DataFrame is made when something reads Experiment.data
        return Experiment(b.parameters, Columns(frame), b.metrics.values(), b.tree, meta, owned=True)


class _Grow:
    """A column grown in place: ndarray.resize reallocates (a remap of the pages for a large
    array, not a copy), so a column costs its final size, not twice it."""

    def __init__(self, dtype):
        self.a = np.empty(0, dtype=dtype)
        self.n = 0

    def append(self, x: np.ndarray, expect: int):
        need = self.n + len(x)
        if need > len(self.a):
            self.a.resize(max(need, expect, len(self.a) + len(self.a) // 8), refcheck=False)
        self.a[self.n:need] = x
        self.n = need

    def widen(self, dtype):
        """Widen to ``dtype`` (never narrows)."""
        if np.dtype(dtype).itemsize > self.a.dtype.itemsize:
            self.a = self.a.astype(dtype)

    def take(self) -> np.ndarray:
        self.a.resize(self.n, refcheck=False)
        return self.a


def _narrow(n: int) -> type:
    """The narrowest signed integer type holding 0..n."""
    return np.int8 if n < 2**7 else np.int16 if n < 2**15 else np.int32


def _take(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``table[codes]``, a block at a time (no int64 copy of narrow codes)."""
    out = np.empty(len(codes), dtype=table.dtype)
    step = 1 << 20
    for i in range(0, len(codes), step):
        np.take(table, codes[i:i + step], out=out[i:i + step])
    return out


def _remap(codes: np.ndarray, remap: np.ndarray):
    """``codes[:] = remap[codes]`` in place, a block at a time (np.take into an overlapping out
    copies it whole)."""
    step = 1 << 20
    for i in range(0, len(codes), step):
        np.take(remap, codes[i:i + step], out=codes[i:i + step], mode="clip")


def _sorted_categorical(codes: np.ndarray, names: list[str]) -> Category:
    """Codes into ``names`` (distinct) as a category column with sorted names (what
    pd.Categorical of the strings gives; ``codes`` renumbered in place)."""
    order = sorted(range(len(names)), key=names.__getitem__)
    remap = np.empty(len(names), dtype=codes.dtype)
    remap[order] = np.arange(len(names), dtype=codes.dtype)
    _remap(codes, remap)
    return Category(codes, [names[i] for i in order])


def _first_seen(codes: np.ndarray) -> list[int]:
    """The distinct values of ``codes`` in order of first appearance (what pd.unique gives)."""
    uniq, first = np.unique(codes, return_index=True)
    return uniq[np.argsort(first, kind="stable")].tolist()


def _cumcount(keys: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """For rows keyed by the non-negative integer columns ``keys`` (``sizes``: the number of
    values of each but the first): each row's number among the earlier rows of its key (0, 1,
    ...; what pandas' ``groupby(keys).cumcount()`` gives), by one stable sort of a combined key."""
    n = len(keys[0])
    key = keys[0].astype(np.int64)
    for col, size in zip(keys[1:], sizes):
        key *= max(int(size), 1)
        key += col
    order = np.argsort(key, kind="stable")
    sk = key[order]
    change = np.ones(n, dtype=bool)
    change[1:] = sk[1:] != sk[:-1]
    starts = np.flatnonzero(change)
    pos = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(starts, append=n))
    out = np.empty(n, dtype=np.int64)
    out[order] = pos
    return out


def _read_text_stream(path: Path) -> Experiment:
    """The streaming text reader; raises _Slow for anything it leaves to the line-by-line one."""
    st = _TextStream()
    collections.deque(_fed(path, st), maxlen=0)      # fed to the end (the yields are for progress)
    return _with_repeat_warnings(st.experiment(st.unterminated), path, st)


def _with_repeat_warnings(exp: Experiment, path: Path, st: "_TextStream") -> Experiment:
    """``exp`` with :func:`_repeats`' warnings in its ``meta["warnings"]``."""
    w = _repeats(path, st.points, *st.blocks_twice)
    if w:
        exp.meta["warnings"] = list(exp.meta.get("warnings", [])) + w
    return exp


def _fed(path: Path, st: "_TextStream", start: int = 0, end: int | None = None):
    """Feed the file (its bytes ``start:end``) to ``st`` a chunk of :data:`TEXT_CHUNK_BYTES` at a
    time, yielding after each (``st.unterminated`` set at the end); raises _Slow for anything the
    streaming parser leaves to the line-by-line reader."""
    from . import check_readable

    check_readable(path)
    if path.is_dir():
        raise _Slow
    size = path.stat().st_size
    end = size if end is None else end
    st.size = end - start
    pool = pa.default_memory_pool()
    carry = b""
    first = start == 0
    last_byte = b""
    left = end - start
    try:
        f = open(path, "rb")
    except OSError:
        raise _Slow from None
    with f:
        f.seek(start)
        while True:
            block = f.read(min(TEXT_CHUNK_BYTES, left))
            left -= len(block)
            if first:
                first = False
                if block.startswith(b"\xef\xbb\xbf"):
                    block = block[3:]
            if not block:
                break
            last_byte = block[-1:]
            data = carry + block if carry else block
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) > MAX_LINE_BYTES:
                    raise _Slow
                carry = data
                continue
            carry = data[cut:]
            st.chunk(data[:cut] if cut < len(data) else data)
            del data
            pool.release_unused()  # the chunk's pyarrow temporaries (kept by the pool otherwise: ~40 MB)
            yield
        if carry:
            st.chunk(carry)
    st.unterminated = last_byte not in (b"", b"\n") and bool(carry.strip())
    release()  # the chunks' temporaries, kept by pyarrow's pool and the C heap (io/memory.py)


class StreamUnsupported(Exception):
    """:func:`text_ranges` / :func:`text_range` do not take this file (read it whole:
    :func:`read_text`, whose messages name the file and line of any error)."""


#: bytes scanned at a time by :func:`text_ranges`
_SCAN_BYTES = 64 << 20
#: the blanks a trimmed line may start with, and those a REGION/METRIC keyword is followed by
#: (:func:`_kinds`)
_LEAD, _AFTER = b" \t\v\f\r", b" \t"


def _key_lines(buf: bytes, word: bytes, pos: int = 0, first: bool = False):
    """Start offsets of the lines of ``buf`` (from ``pos``) that are ``word`` lines as the streaming
    parser tells them (:func:`_kinds`: the keyword first on the trimmed line, a blank after it),
    found by ``bytes.find`` (C speed); ``first``: the first only."""
    n = len(word)
    while True:
        i = buf.find(word, pos)
        if i < 0:
            return
        pos = i + n
        start = buf.rfind(b"\n", 0, i) + 1
        if buf[i + n:i + n + 1] in (b" ", b"\t") and not buf[start:i].strip(_LEAD):
            yield start
            if first:
                return


def text_ranges(path: str | Path, nbytes: int) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """An Extra-P text file cut into ranges of whole REGION lines of about ``nbytes`` bytes, each
    readable alone (:func:`text_range`), so that a file larger than memory can be read, and
    modelled, a part at a time and the parts in parallel (:mod:`perfcast.pipeline`): (the header --
    the bytes before the first REGION line: PARAMETER and POINTS --, [(start, end, the METRIC line
    in force at start)]).  A scan of the bytes for REGION and METRIC lines; nothing else is
    checked here (:func:`text_range` parses, and refuses what the streaming parser would)."""
    path = Path(path)
    size = path.stat().st_size
    cuts: list[tuple[int, bytes]] = []
    metric = b""
    want = 0
    base = 0
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_SCAN_BYTES)
            data = carry + block if carry else block
            if not data:
                break
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if cut == 0:
                if len(data) > MAX_LINE_BYTES:
                    raise StreamUnsupported(f"{path}: a line longer than {MAX_LINE_BYTES} bytes")
                carry = data
                continue
            buf, carry = data[:cut], data[cut:]
            mets = list(_key_lines(buf, b"METRIC"))
            k = 0
            pos = max(0, want - base)
            while pos < len(buf):
                at = next(_key_lines(buf, b"REGION", pos, first=True), None)
                if at is None:
                    break
                while k < len(mets) and mets[k] < at:
                    k += 1
                if k:
                    metric = buf[mets[k - 1]:buf.find(b"\n", mets[k - 1]) + 1]
                cuts.append((base + at, metric if cuts else b""))
                want = base + at + nbytes
                pos = want - base
            if len(mets) > k:
                metric = buf[mets[-1]:buf.find(b"\n", mets[-1]) + 1]
            base += len(buf)
            if not block:
                break
    if not cuts:
        raise StreamUnsupported(f"{path}: no REGION line")
    with open(path, "rb") as f:
        header = f.read(cuts[0][0])
    if header.startswith(b"\xef\xbb\xbf"):
        header = header[3:]
    ends = [c for c, _ in cuts[1:]] + [size]
    return header, [(start, end, (m if m.endswith(b"\n") else m + b"\n") if m else b"")
                    for (start, m), end in zip(cuts, ends)]


def text_range(path: str | Path, header: bytes, start: int, end: int, metric: bytes, last: bool
               ) -> tuple[Experiment, int]:
    """The Experiment of the range ``start:end`` of :func:`text_ranges` (its header and METRIC
    line given; ``last``: the file's end) -- what :func:`read_text` gives for those REGION lines
    (their rows, callpaths and metrics; the part's own callpath categories and tree) -- and its
    number of REGION lines.  :class:`StreamUnsupported` for what the streaming parser does not
    take (any error: the line-by-line reader names it) and for nested callpaths (the tree orders
    them; the parts' flat trees are the callpaths in order of first appearance)."""
    path = Path(path)
    st = _TextStream()
    try:
        if header or metric:
            st.chunk(header + metric)
        st.done = 0
        collections.deque(_fed(path, st, start, end), maxlen=0)
        exp = st.experiment(st.unterminated if last else False)
    except _Slow:
        raise StreamUnsupported(str(path)) from None
    if exp.tree.links():
        raise StreamUnsupported(f"{path}: nested callpaths")
    return _with_repeat_warnings(exp, path, st), st.n_regions


def _sniff_text(path: Path) -> bool:
    head = _head(path)
    if head is None:
        return False
    for ln in _lines(head):
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        toks = s.split()
        return toks[0] == "PARAMETER" and len(toks) >= 2
    return False


# ---------------------------------------------------------------------------------------------
# JSON helpers


class _DupObject(dict):
    """A JSON object whose keys repeat; ``pairs`` keeps every (key, value) in file order."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = list(pairs)


def _object_hook(pairs):
    d = dict(pairs)
    return d if len(d) == len(pairs) else _DupObject(pairs)


def _items(obj: dict):
    return obj.pairs if isinstance(obj, _DupObject) else list(obj.items())


def _field(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


def _no_dups(obj: dict, path: Path, where: str, line: int | None = None):
    if isinstance(obj, _DupObject):
        seen, dup = set(), None
        for k, _ in obj.pairs:
            if k in seen:
                dup = k
                break
            seen.add(k)
        raise _jerr(f"key {dup!r} appears twice", path, _field(where, dup), line)


def _jerr(msg: str, path: Path, where: str, line: int | None = None) -> PerfcastError:
    """A JSON error: at a field path (whole-file JSON) or at a line with the field in the message."""
    if line is None:
        return PerfcastError(msg, path, where or "top level")
    return PerfcastError(f"{where}: {msg}" if where else msg, path, line)


def _jnum(v, path: Path, where: str, line: int | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _jerr(f"{json.dumps(v)[:40]} is not a number", path, where, line)
    try:
        f = float(v)
    except OverflowError:
        raise _jerr("number too large", path, where, line) from None
    if not math.isfinite(f):
        raise _jerr(f"{v} is not finite (NaN and infinity are not measurements)", path, where, line)
    return f


def _jvalues(v, path: Path, where: str, line: int | None = None) -> list[float]:
    if isinstance(v, list):
        if not v:
            raise _jerr("empty list of values", path, where, line)
        return [_jnum(x, path, _field(where, i), line) for i, x in enumerate(v)]
    return [_jnum(v, path, where, line)]


def _jstr(v, path: Path, where: str, line: int | None = None) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _jerr(f"{json.dumps(v)[:40]} is not a non-empty string", path, where, line)
    return v.strip()


def _jget(obj, key: str, path: Path, where: str, line: int | None = None, kind: type | None = None):
    if not isinstance(obj, dict):
        raise _jerr(f"expected an object, found {type(obj).__name__}", path, where, line)
    if key not in obj:
        raise _jerr(f"missing field {key!r}", path, where, line)
    v = obj[key]
    if kind is not None and not isinstance(v, kind):
        raise _jerr(f"expected {'an object' if kind is dict else 'a list'}, found {json.dumps(v)[:40]}",
                    path, _field(where, key), line)
    return v


def _jcallpath(b: _Builder, name, path: Path, where: str, line: int | None = None) -> str:
    name = _jstr(name, path, where, line)
    try:
        return b.callpath(name)
    except PerfcastError as e:
        raise _jerr(e.message, path, where, line) from None


def _jint(v, path: Path, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise _jerr(f"{json.dumps(v)[:40]} is not an integer id", path, where)
    return v


# ---------------------------------------------------------------------------------------------
# JSON (both layouts)


def _json_layout(obj) -> str | None:
    if not isinstance(obj, dict):
        return None
    if {"callpaths", "coordinates", "measurements"} <= obj.keys():
        return "ids"
    if "callpaths" not in obj and {"parameters", "measurements"} <= obj.keys() \
            and isinstance(obj["measurements"], dict):
        return "points"
    return None


def read_json(path: Path, options: ReadOptions | None = None) -> Experiment:
    """Read an Extra-P JSON input file (either layout)."""
    text = _read_text_file(path)
    try:
        obj = json.loads(text, object_pairs_hook=_object_hook, parse_int=json_int)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and _looks_jsonl(text):
            return _read_lines_format(path, text, "jsonl")  # Extra-P accepts JSON Lines in .json too
        raise PerfcastError(f"invalid JSON at column {e.colno}: {e.msg}", path, e.lineno) from None
    except RecursionError:
        raise PerfcastError("JSON nested too deeply", path) from None
    layout = _json_layout(obj)
    if layout is None:
        raise PerfcastError("not an Extra-P JSON input: expected an object with 'parameters' and "
                            "'measurements' (or the id-based 'callpaths', 'coordinates', 'measurements', "
                            "'metrics', 'parameters')", path, "top level")
    _no_dups(obj, path, "")
    b = _read_json_ids(obj, path) if layout == "ids" else _read_json_points(obj, path)
    try:
        return b.experiment({"extrap_json_layout": layout})
    except PerfcastError as e:
        raise e.at(path, "measurements") from None


def _read_json_points(obj: dict, path: Path) -> _Builder:
    params = _jget(obj, "parameters", path, "", kind=list)
    names = [_jstr(p, path, _field("parameters", i)) for i, p in enumerate(params)]
    if not names:
        raise _jerr("no parameters", path, "parameters")
    msg = _check_parameter_names(names)
    if msg:
        raise _jerr(msg, path, "parameters")
    b = _Builder(names)
    meas = obj["measurements"]
    if not meas:
        raise _jerr("no measurements", path, "measurements")
    twice: list[tuple[str, list]] = []  # (where, points) of the point lists holding a point twice
    for cp_name, by_metric in _items(meas):
        w_cp = _field("measurements", cp_name)
        cp = _jcallpath(b, cp_name, path, w_cp)
        if not isinstance(by_metric, dict):
            raise _jerr("expected an object of metrics", path, w_cp)
        for metric_name, entries in _items(by_metric):
            w_m = _field(w_cp, metric_name)
            metric = b.metric(_jstr(metric_name, path, w_m))
            if not isinstance(entries, list):
                raise _jerr("expected a list of {\"point\": [...], \"values\": [...]}", path, w_m)
            listed = []
            for i, entry in enumerate(entries):
                w_e = _field(w_m, i)
                point = _jget(entry, "point", path, w_e, kind=list)
                _no_dups(entry, path, w_e)
                w_p = _field(w_e, "point")
                if len(point) != len(names):
                    raise _jerr(f"point has {len(point)} coordinate(s) but {len(names)} parameter(s) are "
                                f"declared", path, w_p)
                coords = tuple(_jnum(c, path, _field(w_p, k)) for k, c in enumerate(point))
                listed.append(coords)
                w_v = _field(w_e, "values")
                values = _jvalues(_jget(entry, "values", path, w_e), path, w_v)
                try:
                    b.add(coords, cp, metric, values)
                except PerfcastError as e:
                    raise _jerr(e.message, path, w_v) from None
            if len(set(listed)) < len(listed):
                twice.append((w_m, listed))
    if twice:
        b.warnings.append(_points_twice(path, twice[0][0], twice[0][1], "the values of those entries",
                                        len(twice) - 1, refused=False))
    return b


def _read_json_ids(obj: dict, path: Path) -> _Builder:
    def table(key: str) -> list:
        return _jget(obj, key, path, "", kind=list)

    def by_id(key: str, fields: tuple[str, ...]) -> dict[int, dict]:
        out: dict[int, dict] = {}
        for i, e in enumerate(table(key)):
            w = _field(key, i)
            if not isinstance(e, dict):
                raise _jerr("expected an object", path, w)
            _no_dups(e, path, w)
            for f in ("id", *fields):
                _jget(e, f, path, w)
            ident = _jint(e["id"], path, _field(w, "id"))
            if ident in out:
                raise _jerr(f"id {ident} is used twice", path, _field(w, "id"))
            out[ident] = {**e, "_where": w}
        return out

    params = by_id("parameters", ("name",))
    order = sorted(params)  # Extra-P orders parameters by id
    names = [_jstr(params[i]["name"], path, _field(params[i]["_where"], "name")) for i in order]
    msg = _check_parameter_names(names)
    if msg:
        raise _jerr(msg, path, "parameters")
    b = _Builder(names)
    index = {pid: k for k, pid in enumerate(order)}

    callpaths = {}
    for cid, e in sorted(by_id("callpaths", ("name",)).items()):
        callpaths[cid] = _jcallpath(b, e["name"], path, _field(e["_where"], "name"))
    metrics = {}
    for mid, e in sorted(by_id("metrics", ("name",)).items()):
        unit = e.get("unit", "")
        if not isinstance(unit, str):
            raise _jerr("unit is not a string", path, _field(e["_where"], "unit"))
        name = _jstr(e["name"], path, _field(e["_where"], "name"))
        try:
            metrics[mid] = b.metric(name, unit.strip())
        except PerfcastError as err:
            raise _jerr(err.message, path, e["_where"]) from None
    coords: dict[int, tuple[float, ...]] = {}
    for cid, e in by_id("coordinates", ("parameter_value_pairs",)).items():
        w = _field(e["_where"], "parameter_value_pairs")
        pairs = e["parameter_value_pairs"]
        if not isinstance(pairs, list):
            raise _jerr("expected a list", path, w)
        vals: list[float | None] = [None] * len(names)
        for k, pv in enumerate(pairs):
            wk = _field(w, k)
            pid = _jint(_jget(pv, "parameter_id", path, wk), path, _field(wk, "parameter_id"))
            if pid not in index:
                raise _jerr(f"no parameter with id {pid}", path, _field(wk, "parameter_id"))
            if vals[index[pid]] is not None:
                raise _jerr(f"parameter {names[index[pid]]!r} given twice", path, _field(wk, "parameter_id"))
            vals[index[pid]] = _jnum(_jget(pv, "parameter_value", path, wk), path, _field(wk, "parameter_value"))
        missing = [names[k] for k, v in enumerate(vals) if v is None]
        if missing:
            raise _jerr(f"no value for parameter(s) {', '.join(missing)}", path, w)
        coords[cid] = tuple(vals)  # type: ignore[arg-type]

    for i, m in enumerate(table("measurements")):
        w = _field("measurements", i)
        if not isinstance(m, dict):
            raise _jerr("expected an object", path, w)
        _no_dups(m, path, w)
        refs = []
        for f, known in (("coordinate_id", coords), ("callpath_id", callpaths), ("metric_id", metrics)):
            ref = _jint(_jget(m, f, path, w), path, _field(w, f))
            if ref not in known:
                raise _jerr(f"no {f[:-3]} with id {ref}", path, _field(w, f))
            refs.append(known[ref])
        value = _jnum(_jget(m, "value", path, w), path, _field(w, "value"))
        try:
            b.add(refs[0], refs[1], refs[2], [value])
        except PerfcastError as e:
            raise _jerr(e.message, path, _field(w, "value")) from None
    if not b.values:
        raise _jerr("no measurements", path, "measurements")
    twice = _points_twice(path, "coordinates", [coords[c] for c in sorted(coords)],
                          "the measurements at those coordinates", refused=False)
    if twice:
        b.warnings.append(twice)
    return b


def _sniff_json(path: Path) -> bool:
    head = _head(path)
    if head is None or not head.lstrip().startswith("{"):
        return False
    if path.stat().st_size <= _SNIFF_PARSE_LIMIT:
        try:
            obj = json.loads(path.read_text(encoding="utf-8-sig"))
        except (ValueError, RecursionError):
            obj = None
        if obj is not None:
            return _json_layout(obj) is not None
    # too large, or broken: recognise the layout's characteristic keys so that the reader
    # (and its precise error) is chosen; JSON Lines go to extrap-jsonl
    if _looks_jsonl(head):
        return False
    return ('"parameter_value_pairs"' in head and '"callpaths"' in head) or \
        ('"measurements"' in head and '"point"' in head and '"values"' in head)


# ---------------------------------------------------------------------------------------------
# JSON Lines and Talpas


def _talpas_to_json(line: str) -> str:
    """Replace the ``;`` field separators outside strings with commas (same length)."""
    if ";" not in line:
        return line
    out = []
    in_str = esc = False
    for ch in line:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == ";":
            ch = ","
        out.append(ch)
    return "".join(out)


_FORMATS = {
    # name: (parameter key, callpath required, metric required, transform)
    "jsonl": ("params", False, False, None),
    "talpas": ("parameters", True, True, _talpas_to_json),
}


def _read_lines_format(path: Path, text: str, fmt: str) -> Experiment:
    pkey, need_cp, need_metric, transform = _FORMATS[fmt]
    b: _Builder | None = None
    first_names: list[str] | None = None
    first_line = 0
    for no, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        src = transform(line) if transform else line
        try:
            obj = json.loads(src, object_pairs_hook=_object_hook, parse_int=json_int)
        except json.JSONDecodeError as e:
            msg = e.msg.replace("','", "';' or ','") if transform else e.msg
            raise PerfcastError(f"invalid JSON at column {e.colno}: {msg}", path, no) from None
        except RecursionError:
            raise PerfcastError("JSON nested too deeply", path, no) from None
        except PerfcastError as e:
            raise PerfcastError(e.message, path, no) from None
        if not isinstance(obj, dict):
            raise PerfcastError(f"expected a JSON object per line, found {type(obj).__name__}", path, no)
        _no_dups(obj, path, "", no)
        unknown = [k for k in obj if k not in (pkey, "callpath", "metric", "value")]
        if unknown:
            # a misspelt "metric" would otherwise put the value under the default metric
            raise PerfcastError(f"unknown field {unknown[0]!r} (a record has {pkey!r}, 'value' and optionally "
                                f"'callpath' and 'metric')", path, no)
        params = _jget(obj, pkey, path, "", no, kind=dict)
        _no_dups(params, path, pkey, no)
        names = list(params)
        if first_names is None:
            msg = _check_parameter_names(names)
            if msg:
                raise PerfcastError(msg, path, no)
            first_names, first_line = names, no
            b = _Builder(names)
        elif set(names) != set(first_names):
            raise PerfcastError(f"parameters {', '.join(names) or '(none)'} differ from those of line "
                                f"{first_line} ({', '.join(first_names) or 'none'})", path, no)
        assert b is not None
        coords = tuple(_jnum(params[p], path, _field(pkey, p), no) for p in first_names)
        if "callpath" in obj:
            cp = _jcallpath(b, obj["callpath"], path, "callpath", no)
        elif need_cp:
            raise PerfcastError("missing field 'callpath'", path, no)
        else:
            cp = b.callpath(DEFAULT_CALLPATH)
        if "metric" in obj:
            metric = _jstr(obj["metric"], path, "metric", no)
        elif need_metric:
            raise PerfcastError("missing field 'metric'", path, no)
        else:
            metric = DEFAULT_METRIC
        b.metric(metric)
        values = _jvalues(_jget(obj, "value", path, "", no), path, "value", no)
        try:
            b.add(coords, cp, metric, values)
        except PerfcastError as e:
            raise PerfcastError(e.message, path, no) from None
    if b is None:
        raise PerfcastError("no measurements (empty file)", path)
    return b.experiment()


def _looks_jsonl(text: str) -> bool:
    lines = [ln.strip() for ln in _lines(text) if ln.strip()][:50]
    return len(lines) >= 2 and all(ln.startswith("{") for ln in lines)


def read_jsonl(path: Path, options: ReadOptions | None = None) -> Experiment:
    """Read an Extra-P JSON Lines file."""
    return _read_lines_format(path, _read_text_file(path), "jsonl")


def read_talpas(path: Path, options: ReadOptions | None = None) -> Experiment:
    """Read a Talpas file."""
    return _read_lines_format(path, _read_text_file(path), "talpas")


def _first_record(path: Path, fmt: str):
    head = _head(path, 1 << 20)
    if head is None:
        return None
    for ln in _lines(head):
        if ln.strip():
            src = _talpas_to_json(ln) if fmt == "talpas" else ln
            try:
                return json.loads(src)
            except (ValueError, RecursionError):
                return None
    return None


def _sniff_jsonl(path: Path) -> bool:
    rec = _first_record(path, "jsonl")
    return isinstance(rec, dict) and isinstance(rec.get("params"), dict) and "value" in rec


def _sniff_talpas(path: Path) -> bool:
    rec = _first_record(path, "talpas")
    return isinstance(rec, dict) and isinstance(rec.get("parameters"), dict) and "value" in rec


# ---------------------------------------------------------------------------------------------
# saved Extra-P experiments (.extra-p)

#: the JSON member of a saved experiment
ARCHIVE_DATA = "experiment.json"
#: the statistics Extra-P stores per point, in the order meta["summary"] lists them
ARCHIVE_STATS = ("repetitions", "mean", "median", "minimum", "maximum", "std")
_INDEX_MAGIC = b"Extra-P INDEX\0\0\0"
_VALUES_MAGIC = b"Extra-P VALUES\0\0"
#: Extra-P's old way of appending tags to a callpath or metric name
_TAG_SEPARATOR = "\x03"


def _sniff_archive(path: Path) -> bool:
    import zipfile

    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return ARCHIVE_DATA in zf.namelist()
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


class _ArchiveValues:
    """Repetition values stored beside experiment.json: ``values/<chunk>.indx`` (magic, count,
    little-endian 64-bit offsets) and ``values/<chunk>.vals`` (magic, then NumPy ``.npy`` arrays
    at those offsets)."""

    def __init__(self, zf, path: Path):
        self.zf, self.path = zf, path
        self.chunks: dict[int, tuple[list[int], bytes]] = {}

    def _member(self, name: str) -> bytes:
        import zipfile
        import zlib

        try:
            return self.zf.read(name)
        except KeyError:
            raise PerfcastError(f"the archive has no {name} (values referenced by experiment.json)",
                                self.path) from None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
            raise PerfcastError(f"{name} is damaged ({e})", self.path) from None

    def _chunk(self, chunk: int) -> tuple[list[int], bytes]:
        if chunk not in self.chunks:
            import struct

            idx_name, val_name = f"values/{chunk}.indx", f"values/{chunk}.vals"
            idx, vals = self._member(idx_name), self._member(val_name)
            if idx[:16] != _INDEX_MAGIC or len(idx) < 24:
                raise PerfcastError(f"{idx_name} is not an Extra-P value index", self.path)
            if vals[:16] != _VALUES_MAGIC:
                raise PerfcastError(f"{val_name} is not an Extra-P value file", self.path)
            (n,) = struct.unpack_from("<Q", idx, 16)
            if len(idx) < 24 + 8 * n:
                raise PerfcastError(f"{idx_name} lists {n} arrays but is cut short (truncated?)", self.path)
            offsets = list(struct.unpack_from(f"<{n}Q", idx, 24))
            self.chunks[chunk] = (offsets, vals)
        return self.chunks[chunk]

    def read(self, ref, where: str) -> list[float]:
        import io as _io

        if (not isinstance(ref, list) or len(ref) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ref)):
            raise _jerr(f"expected null or a [chunk, index] pair, found {json.dumps(ref)[:40]}", self.path, where)
        offsets, vals = self._chunk(ref[0])
        if ref[1] >= len(offsets) or offsets[ref[1]] >= len(vals):
            raise _jerr(f"values [{ref[0]}, {ref[1]}] are not in values/{ref[0]}.vals (truncated?)",
                        self.path, where)
        try:
            arr = np.lib.format.read_array(_io.BytesIO(vals[offsets[ref[1]]:]), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise _jerr(f"values [{ref[0]}, {ref[1]}] in values/{ref[0]}.vals are unreadable ({e})",
                        self.path, where) from None
        if arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise _jerr(f"values [{ref[0]}, {ref[1]}] have shape {arr.shape} and type {arr.dtype}; perfcast reads "
                        f"one number per repetition", self.path, where)
        out = [float(v) for v in arr]
        if not out or not all(math.isfinite(v) for v in out):
            raise _jerr(f"values [{ref[0]}, {ref[1]}] are empty or not finite", self.path, where)
        return out


def read_archive(path: Path, options: ReadOptions | None = None, statistic: str | None = None) -> Experiment:
    """Read a saved Extra-P experiment (``.extra-p``).

    ``statistic`` (``mean``, ``median``, ``minimum``, ``maximum``) picks the value of points saved
    without their repetitions; default: the measure of the archive's first modeler, else mean.
    """
    import zipfile
    import zlib

    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise PerfcastError(f"not a readable Extra-P experiment: damaged or truncated zip archive ({e})",
                            path) from None
    with zf:
        if ARCHIVE_DATA not in zf.namelist():
            raise PerfcastError(f"no {ARCHIVE_DATA} in the zip archive (not a saved Extra-P experiment)", path)
        try:
            raw = zf.read(ARCHIVE_DATA)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
            raise PerfcastError(f"{ARCHIVE_DATA} in the archive is damaged ({e})", path) from None
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line = raw[:e.start].count(b"\n") + 1
            raise PerfcastError(f"{ARCHIVE_DATA} is not UTF-8 text", path, f"{ARCHIVE_DATA} line {line}") from None
        try:
            obj = json.loads(text, object_pairs_hook=_object_hook, parse_int=json_int)
        except json.JSONDecodeError as e:
            raise PerfcastError(f"invalid JSON at column {e.colno}: {e.msg}", path,
                                f"{ARCHIVE_DATA} line {e.lineno}") from None
        except RecursionError:
            raise PerfcastError("JSON nested too deeply", path, ARCHIVE_DATA) from None
        return _archive_experiment(obj, path, _ArchiveValues(zf, path), statistic)


def _untag(name: str) -> str:
    return name.split(_TAG_SEPARATOR, 1)[0]


def _archive_experiment(obj, path: Path, store: _ArchiveValues, statistic: str | None) -> Experiment:
    top = ARCHIVE_DATA + " "

    def where(field: str) -> str:
        return top + (field or "top level")

    if not isinstance(obj, dict):
        raise _jerr(f"expected an object, found {type(obj).__name__}", path, where(""))
    _no_dups(obj, path, top.strip())
    params = _jget(obj, "parameters", path, where(""), kind=list)
    names = []
    for i, p in enumerate(params):
        if isinstance(p, dict) and "name" in p:  # tolerate parameters saved as objects
            p = p["name"]
        names.append(_jstr(p, path, where(_field("parameters", i))))
    if not names:
        raise _jerr("no parameters", path, where("parameters"))
    msg = _check_parameter_names(names)
    if msg:
        raise _jerr(msg, path, where("parameters"))
    meas = _jget(obj, "measurements", path, where(""), kind=dict)
    if not meas:
        raise _jerr("no measurements", path, where("measurements"))

    if statistic is None:
        statistic = "mean"
        modelers = obj.get("modelers")
        if isinstance(modelers, list) and modelers and isinstance(modelers[0], dict):
            m = modelers[0].get("modeler")
            measure = m.get("use_measure") if isinstance(m, dict) else None
            if isinstance(measure, str) and measure.lower() in ("mean", "median", "minimum", "maximum"):
                statistic = measure.lower()
            elif isinstance(m, dict) and m.get("use_median") is True:
                statistic = "median"
    if statistic not in ("mean", "median", "minimum", "maximum"):
        raise PerfcastError(f"unknown statistic {statistic!r}; use mean, median, minimum or maximum")

    # collect every entry first: repetitions are used only when every point has them
    entries = []  # (coords, callpath, metric, entry, where)
    b = _Builder(names)
    for cp_name, by_metric in _items(meas):
        w_cp = _field("measurements", cp_name)
        cp = _jcallpath(b, _untag(cp_name) if isinstance(cp_name, str) else cp_name, path, where(w_cp))
        if not isinstance(by_metric, dict):
            raise _jerr("expected an object of metrics", path, where(w_cp))
        for metric_name, lst in _items(by_metric):
            w_m = _field(w_cp, metric_name)
            metric = b.metric(_jstr(_untag(metric_name), path, where(w_m)))
            if not isinstance(lst, list):
                raise _jerr("expected a list of measurements", path, where(w_m))
            for i, e in enumerate(lst):
                w_e = _field(w_m, i)
                if not isinstance(e, dict):
                    raise _jerr("expected an object", path, where(w_e))
                _no_dups(e, path, where(w_e))
                point = _jget(e, "coordinate", path, where(w_e), kind=list)
                w_p = _field(w_e, "coordinate")
                if len(point) != len(names):
                    raise _jerr(f"coordinate has {len(point)} value(s) but {len(names)} parameter(s) are declared",
                                path, where(w_p))
                coords = tuple(_jnum(c, path, where(_field(w_p, k))) for k, c in enumerate(point))
                entries.append((coords, cp, metric, e, w_e))
    if not entries:
        raise _jerr("no measurements", path, where("measurements"))

    with_values = all(e.get("values") is not None for _, _, _, e, _ in entries)
    rows, seen = [], {}
    for coords, cp, metric, e, w_e in entries:
        stats = {}
        for k in ARCHIVE_STATS:
            v = e.get(k)
            if v is None:
                if k == statistic and not with_values:
                    raise _jerr(f"missing field {k!r} (the statistic read, as the experiment was saved without "
                                f"repetition values)", path, where(w_e))
                stats[k] = None
                continue
            w_k = _field(w_e, k)
            if k == "repetitions":
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise _jerr(f"{json.dumps(v)[:40]} is not a positive whole number", path, where(w_k))
                stats[k] = v
            else:
                stats[k] = _jnum(v, path, where(w_k))
                if k == "std" and stats[k] < 0:
                    raise _jerr(f"a standard deviation cannot be negative ({v})", path, where(w_k))
        key = (coords, cp, metric)
        if with_values:
            values = store.read(e["values"], where(_field(w_e, "values")))
        else:
            if key in seen:
                raise _jerr(f"coordinate repeated for {cp!r} / {metric!r} (first at {seen[key]})", path,
                            where(_field(w_e, "coordinate")))
            seen[key] = _field(w_e, "coordinate")
            values = [stats[statistic]]
        try:
            b.add(coords, cp, metric, values)
        except PerfcastError as err:
            raise _jerr(err.message, path, where(w_e)) from None
        rows.append([*coords, cp, metric, *(stats[k] for k in ARCHIVE_STATS)])

    meta: dict = {"extrap_version": obj.get("Extra-P") if isinstance(obj.get("Extra-P"), str) else None}
    if not with_values:
        meta["summary"] = {"statistic": statistic, "columns": [*names, "callpath", "metric", *ARCHIVE_STATS],
                           "rows": rows}
        meta["warnings"] = [f"{path.name}: the experiment was saved without its repetitions; each point holds "
                            f"one value, the {statistic} (Extra-P's statistics are in meta['summary'])"]
    return b.experiment(meta)


def _read_archive(path: Path, options: ReadOptions) -> Experiment:
    stat = {"min": "minimum", "max": "maximum"}.get((options.statistic or "").lower(), options.statistic)
    return read_archive(path, options, stat.lower() if stat else None)


register(Reader("extrap-text", "Extra-P text input (PARAMETER / POINTS / REGION / METRIC / DATA lines)",
                (".txt",), _sniff_text, read_text))
register(Reader("extrap-json", "Extra-P JSON input (points layout or the older id-based layout)",
                (".json",), _sniff_json, read_json))
register(Reader("extrap-jsonl", "Extra-P JSON Lines input (one {\"params\": ..., \"value\": ...} per line)",
                (".jsonl",), _sniff_jsonl, read_jsonl))
register(Reader("talpas", "Talpas input (one {\"parameters\":...;\"metric\":...;\"callpath\":...;\"value\":...} "
                "per line)", (".txt",), _sniff_talpas, read_talpas))
register(Reader("extrap-experiment", "Extra-P saved experiment (.extra-p zip: experiment.json [+ values/])",
                (".extra-p",), _sniff_archive, _read_archive))


# ---------------------------------------------------------------------------------------------
# exporters: an Experiment as Extra-P text or JSON input (issue 19)

#: the formats :func:`export` writes (``perfcast export --to``)
EXPORT_FORMATS = ("extrap-text", "extrap-json")
#: Extra-P's text reader takes at most this many parameters
TEXT_MAX_PARAMETERS = 4


def export_format(path: str | Path, to: str | None) -> str:
    """``to``, or the export format named by the suffix of ``path`` (``.txt`` text, ``.json`` JSON)."""
    if to is not None:
        if to not in EXPORT_FORMATS:
            raise PerfcastError(f"unknown export format {to!r}; use one of {', '.join(EXPORT_FORMATS)}",
                                where="--to")
        return to
    by_suffix = {".txt": "extrap-text", ".json": "extrap-json"}.get(Path(path).suffix.lower())
    if by_suffix is None:
        raise PerfcastError(f"cannot tell the format from the suffix {Path(path).suffix or '(none)'!r}: give "
                            f"--to {' or --to '.join(EXPORT_FORMATS)}", path)
    return by_suffix


def write_extrap_text(exp: Experiment, path: str | Path, *, force: bool = False, locations: str = "auto",
                      drop_incomplete: bool = False) -> dict:
    """Write ``exp`` as an Extra-P text file (see :func:`export`); returns what was written."""
    return export(exp, path, "extrap-text", force=force, locations=locations, drop_incomplete=drop_incomplete)


def write_extrap_json(exp: Experiment, path: str | Path, *, force: bool = False, locations: str = "auto",
                      drop_incomplete: bool = False) -> dict:
    """Write ``exp`` as Extra-P JSON input, the points layout (see :func:`export`)."""
    return export(exp, path, "extrap-json", force=force, locations=locations, drop_incomplete=drop_incomplete)


def export(exp: Experiment, path: str | Path, to: str, *, force: bool = False, locations: str = "auto",
           drop_incomplete: bool = False) -> dict:
    """Write ``exp`` as Extra-P input that Extra-P 4 (``extrap --text`` / ``--json``, the GUI) and
    perfcast's own readers read back value for value.  Returns a JSON-ready description of what was
    written (``perfcast export --json`` prints it).

    * ``extrap-text``: ``PARAMETER`` lines, a ``POINTS`` line per point (``( 2 16 )``), then per
      callpath (tree order, ``REGION a->b->c``) and metric (``METRIC name``) one ``DATA`` line per
      point holding the repetitions in order.  Extra-P's text reader takes 1 to 4 parameters and
      collapses runs of white space in names: a name it would change is refused, naming it.
    * ``extrap-json``: the points layout ``{"parameters": [...], "measurements": {callpath:
      {metric: [{"point": [...], "values": [...]}]}}}``.

    Numbers are written exactly (``repr``): read back, every value is the same float.  Repetitions
    keep their order; numbered with gaps (after a selection) they are read back as 0..k-1.
    Per-rank/thread values are reduced per point, repetition and callpath by ``locations``
    (:meth:`Experiment.reduce_locations`; ``auto`` sums counts and bytes and averages the rest, as
    ``perfcast model`` does), so Extra-P models the series perfcast models; the description labels
    each metric as ``perfcast model`` does (:func:`~perfcast.experiment.aggregate_labels`: ``rank 0
    only`` for a metric one location holds).  Extra-P refuses an
    experiment in which a callpath x metric series lacks a point: such series are refused, naming
    the first, or left out with ``drop_incomplete`` (listed in the description).  Neither format
    carries units, metric kinds or scopes: the description lists the units left behind.  The file
    is checked completely before anything is written, then written atomically (``force`` replaces
    an existing file)."""
    from ..experiment import aggregate_labels
    from ..output import check_file_output, write_file

    path = check_file_output(path, force)
    to = export_format(path, to)
    text = to == "extrap-text"

    def refuse(msg: str) -> PerfcastError:
        return PerfcastError(f"cannot write {to}: {msg}", path)

    params = list(exp.parameters)
    if not params:
        raise refuse("the experiment has no parameters; Extra-P models values over at least one "
                     "(give each input its coordinates with --point, or use --param)")
    if text and len(params) > TEXT_MAX_PARAMETERS:
        raise refuse(f"{len(params)} parameters, Extra-P's text format takes at most {TEXT_MAX_PARAMETERS} "
                     f"(use --to extrap-json)")
    for p in params:
        _check_export_name(p, "parameter", text, refuse)
        if text and " " in p:
            raise refuse(f"parameter {p!r} contains a space, which separates names on a PARAMETER line "
                         f"(use --to extrap-json)")

    reduced: dict[str, str] = {}
    if exp.has_locations:
        # the labels perfcast model shows: "rank 0 only" where one location holds every value
        reduced = {name: label for name, label in aggregate_labels(exp, locations).items() if label}
        exp = exp.reduce_locations(locations)
    # a profile's run without a callpath did not run it: written as a 0 value, so that Extra-P's
    # mean over the listed values is perfcast's (experiment.absent_repetition_is_zero)
    d = fill_absent_repetitions(exp, exp.data)

    # every row's point (sorted coordinates), callpath (tree order) and metric (declared order)
    by_point = d.groupby(params, sort=True)  # hashing: np.unique(axis=0) sorted 1M rows 15x slower
    point = by_point.ngroup().to_numpy()
    coords = np.asarray(by_point.size().index.tolist(), dtype="float64").reshape(-1, len(params))
    order = {p: i for i, p in enumerate(exp.tree.preorder())}
    cp_col, m_col = d["callpath"].array, d["metric"].array
    cp_rank = np.array([order[c] for c in cp_col.categories], dtype=np.int64)[cp_col.codes]
    metric_names = list(exp.metrics)
    m_pos = {n: i for i, n in enumerate(metric_names)}
    m_rank = np.array([m_pos[c] for c in m_col.categories], dtype=np.int64)[m_col.codes]
    rep = d["rep"].to_numpy()
    idx = np.lexsort((rep, point, m_rank, cp_rank))
    series = cp_rank[idx] * len(metric_names) + m_rank[idx]
    point = point[idx]
    n = len(idx)
    cell_start = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (point[1:] != point[:-1])])
    cell_series = series[cell_start]
    series_cell = np.flatnonzero(np.r_[True, cell_series[1:] != cell_series[:-1]])  # first cell of each
    n_cells = np.diff(np.r_[series_cell, len(cell_start)])
    preorder = list(order)
    n_points = len(coords)

    def point_text(k: int) -> str:
        return "(" + ", ".join(f"{p}={_fmt(v)}" for p, v in zip(params, coords[k])) + ")"

    dropped = []
    incomplete = np.flatnonzero(n_cells < n_points)
    if len(incomplete):
        first = int(incomplete[0])
        s = int(cell_series[series_cell[first]])
        cp, metric = preorder[s // len(metric_names)], metric_names[s % len(metric_names)]
        if not drop_incomplete:
            have = set(point[cell_start[series_cell[first]:series_cell[first] + n_cells[first]]].tolist())
            miss = next(k for k in range(n_points) if k not in have)
            raise refuse(f"callpath {cp!r} metric {metric!r} has values at {int(n_cells[first])} of the "
                         f"{n_points} points (none at {point_text(miss)}); Extra-P needs every series at every "
                         f"point: --drop-incomplete leaves out the {len(incomplete)} such series")
        for i in incomplete.tolist():
            s = int(cell_series[series_cell[i]])
            dropped.append({"callpath": preorder[s // len(metric_names)],
                            "metric": metric_names[s % len(metric_names)], "points": int(n_cells[i])})
        if len(incomplete) == len(series_cell):
            raise refuse(f"no callpath x metric series has values at all {n_points} points; Extra-P needs "
                         f"every series at every point")

    keep = np.ones(len(series_cell), dtype=bool)
    keep[incomplete] = False
    kept_series = cell_series[series_cell[keep]]
    cps = sorted({int(s) // len(metric_names) for s in kept_series.tolist()})
    used_metrics = sorted({int(s) % len(metric_names) for s in kept_series.tolist()})
    for i in used_metrics:
        _check_export_name(metric_names[i], "metric", text, refuse)
    _check_export_callpaths(exp.tree, [preorder[i] for i in cps], text, refuse)

    cell_end = np.r_[cell_start[1:], n]
    gaps = bool(np.any(rep[idx] != np.arange(n) - np.repeat(cell_start, cell_end - cell_start)))
    values = list(map(repr, d["value"].to_numpy()[idx].tolist()))
    n_values = 0
    reps_min, reps_max = None, 0
    out: list[str] = []
    if text:
        out += [f"PARAMETER {p}\n" for p in params]
        out += ["POINTS ( " + " ".join(_fmt(v) for v in c) + " )\n" for c in coords]
    else:
        out.append('{"parameters": ' + json.dumps(params) + ',\n "measurements": {')
    point_json = ["[" + ", ".join(_fmt(v) for v in c) + "]" for c in coords]
    last_cp = None
    for i in np.flatnonzero(keep).tolist():
        s = int(cell_series[series_cell[i]])
        cp, metric = preorder[s // len(metric_names)], metric_names[s % len(metric_names)]
        cells = range(int(series_cell[i]), int(series_cell[i] + n_cells[i]))
        if text:
            if cp != last_cp:
                out.append(f"\nREGION {cp}\n")
            out.append(f"METRIC {metric}\n")
        else:
            if cp != last_cp:
                out.append(("\n  }," if last_cp is not None else "") + f"\n  {json.dumps(cp)}: {{")
            else:
                out.append(",")
            out.append(f"\n   {json.dumps(metric)}: [")
        for j, c in enumerate(cells):
            a, b = int(cell_start[c]), int(cell_end[c])
            n_values += b - a
            reps_min = b - a if reps_min is None else min(reps_min, b - a)
            reps_max = max(reps_max, b - a)
            if text:
                out.append("DATA " + " ".join(values[a:b]) + "\n")
            else:
                out.append(("," if j else "") + f"\n    {{\"point\": {point_json[int(point[a])]}, "
                           f"\"values\": [{', '.join(values[a:b])}]}}")
        if not text:
            out.append("]")
        last_cp = cp
    if not text:
        out.append("\n  }\n }\n}\n")
    write_file(path, "".join(out), force)

    units = {m: exp.metrics[m].unit for m in (metric_names[i] for i in used_metrics) if exp.metrics[m].unit}
    written = [metric_names[i] for i in used_metrics]
    reduced = {m: reduced[m] for m in written if m in reduced}
    notes = []
    if reduced:
        hows = {how: [m for m in reduced if reduced[m] == how] for how in reduced.values()}
        notes.append("per-location values reduced per point, repetition and callpath: "
                     + "; ".join(f"{how} ({', '.join(ms)})" for how, ms in hows.items()))
    if units:
        notes.append("Extra-P's input formats carry no units: " + ", ".join(f"{m} [{u}]" for m, u in units.items()))
    if dropped:
        notes.append(f"{len(dropped)} callpath x metric series without values at every point left out "
                     f"(Extra-P needs every series at every point)")
    if gaps:
        notes.append("repetitions numbered with gaps are written in order and read back as 0..k-1")
    return {"output": str(path), "format": to, "parameters": params, "n_points": n_points,
            "points": [dict(zip(params, (_json_number(v) for v in c))) for c in coords],
            "n_callpaths": len(cps), "metrics": written, "n_series": int(keep.sum()), "n_values": n_values,
            "repetitions": {"min": reps_min, "max": reps_max}, "locations": reduced,
            "units": units, "dropped": dropped, "notes": notes}


def _json_number(v: float):
    v = float(v)
    return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v


def _check_export_name(name: str, what: str, text: bool, refuse) -> None:
    """Refuse a name the format would not give back unchanged (perfcast's readers and Extra-P's strip
    names; Extra-P's text reader also collapses white space)."""
    if not name.strip():
        raise refuse(f"{what} {name!r} is empty")
    if name != name.strip():
        raise refuse(f"{what} {name!r} begins or ends with white space, which the readers strip")
    if text and " ".join(name.split()) != name:
        raise refuse(f"{what} {name!r} holds a line break, a tab or repeated spaces, which Extra-P's text "
                     f"format cannot carry (use --to extrap-json)")
    if text and "\0" in name:
        raise refuse(f"{what} {name!r} holds a NUL character, which a text file cannot carry (use --to "
                     f"extrap-json)")


def _check_export_callpaths(tree: CallTree, paths: list[str], text: bool, refuse) -> None:
    """Extra-P builds the tree by splitting each callpath at ``->``: every callpath written, and each
    of its ancestors, must be its parent's path, ``->`` and a frame without ``->``."""
    seen: set[str] = set()
    for path in paths:
        while path is not None and path not in seen:
            seen.add(path)
            parent = tree.parent(path)
            if parent is None:
                frame = path
            elif path.startswith(parent + SEP):
                frame = path[len(parent) + len(SEP):]
            else:
                raise refuse(f"callpath {path!r} is not its parent's path {parent!r} followed by '{SEP}' and "
                             f"a frame, so Extra-P, which nests callpaths by splitting them at '{SEP}', would "
                             f"place it elsewhere")
            if SEP in frame:
                raise refuse(f"callpath {path!r}: the frame {frame!r} contains '{SEP}', which Extra-P reads "
                             f"as nesting")
            _check_export_name(frame, f"callpath {path!r}: frame", text, refuse)
            path = parent

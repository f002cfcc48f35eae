"""Readers: one module per external format, each turning a file or directory into an Experiment.

Every reader module registers a :class:`Reader` with :func:`register`.  :func:`load` picks the
reader (``format=`` or auto-detection: extension first, then content sniffing), reads each input
and combines several inputs into one experiment.  Readers know nothing about models.

A reader may return an experiment without parameters (one profile of one run); :func:`load`
then gives it coordinates from the user (``points=``) or from its path
(:func:`perfcast.io.paths.params_from_path`), and says clearly when neither is possible.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import PerfcastError
from ..experiment import Experiment, combine

__all__ = ["Reader", "ReadOptions", "register", "readers", "detect", "read_one", "load", "read_ends", "read_json",
           "check_readable", "read_bytes", "read_text", "json_int", "MAX_INPUT_BYTES", "MAX_LINE_BYTES"]

#: inputs larger than this are refused before they are read (PERFCAST_MAX_INPUT_BYTES overrides)
MAX_INPUT_BYTES = 4 << 30
#: a text line longer than this is refused (no real profile has one; a file without line ends has)
MAX_LINE_BYTES = 16 << 20


@dataclass(frozen=True)
class ReadOptions:
    """Options every reader receives (each uses what applies to its format)."""

    #: metadata keys to use as parameters (Caliper/Adiak globals such as ``jobsize``); empty = auto
    parameters: tuple[str, ...] = ()
    #: report progress: called with (done, total, label)
    progress: Callable[[int, int, str], None] | None = None
    #: inputs holding statistics instead of values (summary tables, Extra-P archives saved without
    #: repetitions): the statistic that becomes the value (``median``, ``mean``, ...); None = the
    #: reader's default
    statistic: str | None = None
    #: CUBE sets: reduce the per-location values of each run as Extra-P's ``--scaling`` does
    #: (``weak``, ``weak-threaded``, ``strong``; see perfcast.io.cube); None keeps every location
    scaling: str | None = None
    #: Caliper time series (``timeseries.snapshot`` records): one point per snapshot, at parameter
    #: ``iteration`` (the snapshot's ``loop.start_iteration``), instead of the whole-run profile
    timeseries: bool = False
    #: Caliper/Adiak/Thicket run metadata filters: (key, value) pairs; a run is read when, for every
    #: key named, its value equals one of the values given for that key (``compiler=clang``)
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Reader:
    name: str
    description: str
    #: file name endings (lower case, with the dot) this reader claims, e.g. (".cubex",)
    extensions: tuple[str, ...]
    #: content check: True when the path (file or directory) is in this format
    sniff: Callable[[Path], bool]
    read: Callable[[Path, ReadOptions], Experiment]
    #: True when the reader accepts directories
    directories: bool = False
    #: optional: read several files of this format as one experiment, choosing parameters across
    #: them (e.g. the Caliper globals that vary between runs)
    read_many: Callable[[Sequence[Path], ReadOptions], Experiment] | None = None
    #: chosen by its extension alone when no reader recognises the content (False for readers
    #: sharing a common extension with a more general one, e.g. summary tables among CSVs)
    fallback: bool = True
    #: optional, for directory readers: the files of a directory this reader would read (named in
    #: the error for a directory that mixes formats)
    files: Callable[[Path], list[Path]] | None = None


_READERS: dict[str, Reader] = {}
_MODULES = ("tidy", "summary", "extrap", "extrap3", "hatchet", "cube", "caliper", "thicket", "hpctoolkit", "perf", "cachegrind",
            "pmpi", "likwid", "tau", "pyprofile", "dot", "timemory")
#: how many of :data:`_MODULES` are imported (in their order: the readers' order in ``_READERS``)
_imported = 0


def register(reader: Reader) -> Reader:
    _READERS[reader.name] = reader
    return reader


def _load_next() -> bool:
    """Import the next reader module of :data:`_MODULES`; False when all are."""
    global _imported
    if _imported >= len(_MODULES):
        return False
    mod = _MODULES[_imported]
    _imported += 1
    try:
        importlib.import_module(f"{__name__}.{mod}")
    except ModuleNotFoundError as e:
        # a reader module that does not exist yet in this version
        if e.name != f"{__name__}.{mod}":
            raise
    return True


def _load_modules():
    """Import every reader module not imported yet."""
    for _ in iter(_load_next, False):
        continue


def readers() -> dict[str, Reader]:
    _load_modules()
    return dict(_READERS)


def detect(path: Path) -> Reader:
    """The reader for ``path``: by extension, then by content."""
    from .. import store

    store.recover(path)  # a store left aside by a writer killed mid-replace
    if store.is_store(path) or (path.is_dir() and (path / "experiment.json").is_file()
                                and (path / "values.parquet").exists()):
        return _STORE_READER  # a damaged store too: store.read names what is wrong
    check_readable(path)
    if path.is_dir():
        _load_modules()
        # a directory holding the per-rank files of two tools would be read as one of them, the
        # other's files dropped without a word: refused, naming the files of each format
        found = [r for r in _READERS.values() if r.directories and _safe_sniff(r, path)]
        if len(found) > 1:
            parts = []
            for r in found:
                try:
                    names = [f.name for f in r.files(path)] if r.files else []
                except OSError:
                    names = []
                shown = ", ".join(names[:4]) + (f", ... ({len(names)} files)" if len(names) > 4 else "")
                parts.append(f"{r.name} ({shown})" if names else r.name)
            raise PerfcastError(f"the directory holds inputs of several formats: {'; '.join(parts)}; read "
                                f"each format's files on their own, or choose one with --format", path)
    name = path.name.lower()

    def by_extension(r: Reader) -> bool:
        return any(name.endswith(ext) for ext in r.extensions) and (r.directories or path.is_file())

    # the readers of the extension in their order, their modules imported only until one
    # recognises the content (a file: an Extra-P text file needs 3 of the 17 modules; the order,
    # and so the reader chosen, is the one of all the modules imported first)
    seen = 0
    while True:
        registered = list(_READERS.values())
        for r in registered[seen:]:
            if by_extension(r) and _safe_sniff(r, path):
                return r
        seen = len(registered)
        if not _load_next():
            break
    candidates = [r for r in _READERS.values() if by_extension(r)]
    for r in _READERS.values():
        if r not in candidates and (r.directories or path.is_file()) and _safe_sniff(r, path):
            return r
    candidates = [r for r in candidates if r.fallback]
    if len(candidates) == 1:
        return candidates[0]
    kinds = ", ".join(sorted(_READERS))
    what = "directory" if path.is_dir() else "file"
    if path.is_dir():
        # a directory holding a pyinstrument/timemory/cProfile file: those readers read files, say which
        try:
            inside = sorted(f for f in path.iterdir() if f.is_file() and not f.name.startswith("."))[:50]
        except OSError:
            inside = []
        named = [(f, r) for f in inside for r in _READERS.values()
                 if not r.directories and f.name.lower().endswith(r.extensions) and _safe_sniff(r, f)]
        if named:
            shown = ", ".join(f"{f.name} ({r.name})" for f, r in named[:4]) + (" ..." if len(named) > 4 else "")
            raise PerfcastError(f"unknown format: no reader reads this directory as a whole; the files in it that "
                                f"a reader recognises: {shown}: give them as inputs", path)
    raise PerfcastError(f"unknown format: no reader recognises this {what} (formats: {kinds}; "
                        f"choose one with --format)", path)


def _max_input_bytes() -> int:
    import os

    try:
        return int(os.environ.get("PERFCAST_MAX_INPUT_BYTES", MAX_INPUT_BYTES))
    except ValueError:
        return MAX_INPUT_BYTES


def check_readable(path: Path) -> None:
    """Refuse, before anything opens it, an input that is not a regular file or a directory.

    A FIFO with no writer would block the reader forever and a device such as ``/dev/zero`` never
    ends; neither can be a profile.  A regular file larger than the input bound is refused too.
    """
    import os
    import stat as st

    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise PerfcastError("no such file or directory", path) from None
    except OSError as e:
        raise PerfcastError(f"cannot read: {e.strerror or e}", path) from None
    if st.S_ISDIR(info.st_mode):
        return
    if not st.S_ISREG(info.st_mode):
        what = ("a FIFO (named pipe)" if st.S_ISFIFO(info.st_mode) else
                "a device" if st.S_ISCHR(info.st_mode) or st.S_ISBLK(info.st_mode) else
                "a socket" if st.S_ISSOCK(info.st_mode) else "not a regular file")
        raise PerfcastError(f"{what}, not a regular file: perfcast reads profiles from files and "
                            f"directories (save the data to a file first)", path)
    limit = _max_input_bytes()
    if info.st_size > limit:
        raise PerfcastError(f"the file has {info.st_size} bytes, more than the {limit} perfcast reads "
                            f"(set PERFCAST_MAX_INPUT_BYTES to read it)", path)


def read_bytes(path: Path) -> bytes:
    """A file's bytes, after :func:`check_readable`; a directory or an unreadable file is a
    one-line error."""
    check_readable(path)
    if path.is_dir():
        raise PerfcastError("is a directory, not a file", path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise PerfcastError(f"cannot read: {e.strerror or e}", path) from None


def read_text(path: Path, *, unterminated: str = "refuse", encoding: str = "utf-8-sig",
              errors: str = "strict") -> str:
    """A line-based input as text, checked so that a damaged file cannot pass for a complete one.

    * not a regular file, or larger than the input bound: refused (:func:`check_readable`);
    * a line longer than :data:`MAX_LINE_BYTES`: refused with its line number;
    * not decodable (``errors="strict"``) or holding NUL bytes: refused with the line number;
    * the last line without its line end: ``unterminated="refuse"`` refuses it (line number of the
      last line): a text file cut at an arbitrary byte ends inside a line, and in a line-based format
      the cut line can itself look complete (``5.3`` cut to ``5.``, ``3.6e-05`` to ``3.6e-0``), so the
      only sound test of completeness is the line end every writer puts after its last record.  A
      last line holding only blanks is harmless and accepted.  ``unterminated="allow"`` is for
      formats whose records prove their own end (a JSON object per line) or whose reader checks
      the last line itself; such a reader must say so in its docstring.
    """
    raw = read_bytes(path)
    if len(raw) > MAX_LINE_BYTES:
        import re

        m = re.search(rb"[^\n]{%d}" % (MAX_LINE_BYTES + 1), raw)
        if m:
            raise PerfcastError(f"a line longer than {MAX_LINE_BYTES >> 20} MiB: not a line-based text file",
                                path, raw.count(b"\n", 0, m.start()) + 1)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise PerfcastError("not a text file (binary content: a NUL byte)", path, raw.count(b"\n", 0, nul) + 1)
    try:
        text = raw.decode(encoding, errors)
    except UnicodeDecodeError as e:
        raise PerfcastError(f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})", path,
                            raw.count(b"\n", 0, e.start) + 1) from None
    if unterminated == "refuse" and text and not text.endswith("\n"):
        tail = text.rsplit("\n", 1)[-1]
        if tail.strip():
            raise PerfcastError(unterminated_message(), path, text.count("\n") + 1)
    return text


#: more digits than any float can carry (1e308 has 309): such an integer is damage, not data
_MAX_INT_DIGITS = 330


def json_int(s: str) -> int:
    """``parse_int`` for json.loads: an integer longer than any measurement is refused (Python
    refuses to convert > 4300 digits with a bare ValueError, and a 400-digit count overflows
    every numeric column)."""
    if len(s) > _MAX_INT_DIGITS:
        raise PerfcastError(f"an integer with {len(s.lstrip('-'))} digits: too large to be a measurement")
    return int(s)


def unterminated_message() -> str:
    return ("the last line has no line end: the file may be truncated (add a newline at the end if it "
            "is complete)")


def read_ends(path: Path, n: int = 65536) -> tuple[bytes, bytes]:
    """The first and last ``n`` bytes of a file (the tail empty when the file is shorter), for
    sniffers that look for markers JSON writers put near either end."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(n)
        tail = b""
        if size > n:
            f.seek(max(n, size - n))
            tail = f.read()
    return head, tail


def read_json(path: Path):
    """Parse a JSON file; invalid JSON or binary content is a PerfcastError naming file and line."""
    import json

    check_readable(path)
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f, parse_int=json_int)
    except json.JSONDecodeError as e:
        raise PerfcastError(f"not valid JSON ({e.msg})", path, e.lineno) from None
    except RecursionError:
        raise PerfcastError("JSON nested too deeply", path) from None
    except UnicodeDecodeError:
        raise PerfcastError("not a JSON text file (binary content)", path) from None


def _safe_sniff(r: Reader, path: Path) -> bool:
    try:
        return bool(r.sniff(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def _read_store(path: Path, options: ReadOptions) -> Experiment:
    from .. import store

    return store.read(path)


_STORE_READER = Reader("perfcast", "a stored perfcast experiment (NAME.perfcast directory)", (".perfcast",),
                       lambda p: False, _read_store, directories=True)


def read_one(path: str | Path, format: str | None = None, options: ReadOptions | None = None) -> Experiment:
    path = Path(path)
    options = options or ReadOptions()
    if format:
        _load_modules()
        table = {**_READERS, "perfcast": _STORE_READER}
        if format not in table:
            raise PerfcastError(f"unknown format {format!r}; known: {', '.join(sorted(table))}")
        reader = table[format]
        check_readable(path)
        if path.is_dir() and not reader.directories:
            raise PerfcastError(f"is a directory; the {format} reader reads files", path)
    else:
        reader = detect(path)
    try:
        exp = reader.read(path, options)
    except PerfcastError as e:
        raise e.at(path) from None
    except (UnicodeDecodeError, EOFError) as e:
        raise PerfcastError(f"not a readable {reader.name} input ({type(e).__name__}: {e})", path) from None
    exp.meta.setdefault("sources", [str(path)])
    exp.meta.setdefault("format", reader.name)
    if path.is_dir() and reader is not _STORE_READER:
        left, renamed = _left_out(path, reader, exp.meta["sources"])

        def shown(files):
            return ", ".join(str(f.relative_to(path)) for f in files[:4]) + (" ..." if len(files) > 4 else "")

        if left:
            exp.meta.setdefault("warnings", []).append(
                f"{path}: {len(left)} file(s) of another format left out ({shown(left)}): the {reader.name} reader "
                "reads its own files only; give the others as inputs of their own")
        if renamed:
            exp.meta.setdefault("warnings", []).append(
                f"{path}: {len(renamed)} file(s) in the {reader.name} format by their content left out "
                f"({shown(renamed)}): the {reader.name} reader reads the files ending in "
                f"{', '.join(reader.extensions)}; rename them to read them")
    return exp


def _left_out(path: Path, reader: Reader, sources: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """Files in the directory ``path`` that ``reader`` did not read and (1) another (file) reader
    recognises: a tidy CSV beside the .cali files of a run was dropped without a word; (2) ``reader``
    itself recognises by their content, under a name it does not read (a .cali renamed .txt).
    Known only when the reader names the files it read (``sources`` inside ``path``, or its
    ``files``)."""
    read = {Path(s).resolve() for s in sources}
    inside = [f for f in read if path.resolve() in f.parents]
    if not inside and reader.files is not None:
        try:
            inside = [f.resolve() for f in reader.files(path)]
        except OSError:
            return [], []
        read |= set(inside)
    if not inside:
        return [], []
    deep = any(f.parent != path.resolve() for f in inside)
    try:
        candidates = sorted(f for f in (path.rglob("*") if deep else path.iterdir())
                            if f.is_file() and not f.name.startswith(".") and f.resolve() not in read)
    except OSError:
        return [], []
    others = [r for r in _READERS.values() if r is not reader and not r.directories and r.extensions]
    foreign = [f for f in candidates
               if any(f.name.lower().endswith(r.extensions) and _safe_sniff(r, f) for r in others)]
    renamed = [f for f in candidates if f not in foreign and reader.extensions
               and not f.name.lower().endswith(reader.extensions) and _safe_sniff(reader, f)]
    return foreign, renamed


def load(inputs: Sequence[str | Path], format: str | None = None, points: Sequence[Mapping] | None = None,
         options: ReadOptions | None = None) -> Experiment:
    """Read ``inputs`` and combine them into one experiment.

    ``points`` (one mapping per input, optional) gives the coordinates of inputs that carry no
    parameters of their own; otherwise the path is parsed (``mm.x10y1z1.r1``, ``run.p64.r2``).
    """
    if not inputs:
        raise PerfcastError("no input given")
    want = tuple((options or ReadOptions()).parameters)
    if points is not None and len(points) not in (0, len(inputs)):
        raise PerfcastError(f"{len(points)} --point value(s) for {len(inputs)} input(s); give one per input")
    if len(inputs) > 1:
        seen: dict[str, str] = {}
        for inp in inputs:
            real = os.path.realpath(inp)
            if real in seen:
                raise PerfcastError(f"given twice (also as {seen[real]}): its runs would count twice, as further "
                                    "repetitions", inp)
            seen[real] = str(inp)
    if len(inputs) > 1 and not points:
        paths = [Path(i) for i in inputs]
        found = [detect(p) if not format else None for p in paths]
        if (not format and all(p.is_file() for p in paths) and found[0].read_many is not None
                and all(r is found[0] for r in found)):
            exp = found[0].read_many(paths, options or ReadOptions())
            exp.meta.setdefault("sources", [str(p) for p in paths])
            exp.meta.setdefault("format", found[0].name)
            return _loaded(exp, inputs, options)
    exps, names = [], []
    for i, inp in enumerate(inputs):
        exp = read_one(inp, format, options)
        given = points[i] if points else None
        if given:
            if exp.parameters:
                raise PerfcastError(f"already has parameters {', '.join(exp.parameters)}; "
                                    f"--point applies only to inputs without parameters", inp)
            exp = at_point(exp, given)
        elif not exp.parameters and (len(inputs) > 1 or want):
            # the path's repetition number only labels the run: equal coordinates become
            # further repetitions when the inputs are combined
            exp = at_point(exp, _path_coordinates(Path(inp), want))
        exps.append(exp)
        names.append(str(inp))
    return _loaded(exps[0] if len(exps) == 1 else combine(exps, names), inputs, options)


def _runs_overlap(exp: Experiment, n_inputs: int) -> None:
    """Several files read as one experiment (Caliper's ``read_many``: one run per file, its
    repetition number within its point): record, as :func:`perfcast.experiment.combine` does, how
    many points more than one file held and warn about a file repeating another's values exactly
    (one .cali copied under two names was two identical repetitions without a word)."""
    from ..experiment import overlap

    runs = (exp.meta.get("caliper") or {}).get("runs") or []
    files = {(tuple(float(r["point"].get(p, 0)) for p in exp.parameters), int(r["rep"])): str(r["file"])
             for r in runs if isinstance(r, dict) and "point" in r and "rep" in r}
    if not files or "rep" not in exp.data.columns:
        return
    shared, twins = overlap(exp.data, exp.parameters, lambda c, rep: files.get((c, int(rep)), f"run {rep}"), "rep")
    exp.meta["combined"] = {"inputs": n_inputs, "points_in_several_inputs": shared}
    if twins:
        exp.meta["warnings"] = list(dict.fromkeys([*exp.meta.get("warnings", []), *twins]))


def _loaded(exp: Experiment, inputs: Sequence[str | Path], options: ReadOptions | None) -> Experiment:
    """:func:`load`'s result: every ``--param`` a parameter of ``exp`` (a format whose parameters
    the file declares, Extra-P text or a store, takes no other), the ``--where`` filters applied,
    implausible values warned about."""
    options = options or ReadOptions()
    if "combined" not in exp.meta:
        _runs_overlap(exp, len(inputs))
    missing = [p for p in options.parameters if p not in exp.parameters]
    if missing:
        raise PerfcastError(f"--param {missing[0]}: not a parameter of the input{'s' if len(inputs) > 1 else ''}, "
                            f"whose parameters are {', '.join(exp.parameters) or 'none'}",
                            inputs[0] if len(inputs) == 1 else None)
    return _warn_implausible(where_parameters(exp, options.where))


def _path_coordinates(path: Path, want: Sequence[str]) -> dict[str, float]:
    """The coordinates of a run without parameters of its own from its path's name
    (:func:`perfcast.io.paths.params_from_path`: ``mm.x10y1z1.r1``); ``want`` (``--param``): only
    those, each of which the name must carry."""
    from .paths import params_from_path

    found = params_from_path(path)
    if found is None:
        name = f"{want[0]}" if want else "p"
        raise PerfcastError(f"cannot tell this input's parameter values (not in its metadata or path); name them "
                            f"with --point, e.g. --point {name}=64", path)
    if not want:
        return found[0]
    lacking = [p for p in want if p not in found[0]]
    if lacking:
        raise PerfcastError(f"--param {lacking[0]}: neither the run's metadata nor its path name carries a value of "
                            f"it (the name gives {', '.join(found[0])}); name it with --point {lacking[0]}=VALUE", path)
    return {p: found[0][p] for p in want}


def where_parameters(exp: Experiment, where: Sequence[tuple[str, str]]) -> Experiment:
    """``exp`` restricted by the ``where`` filters whose key is one of its parameters (any format:
    ``--where p=2 --where p=4`` keeps the runs at p = 2 and 4); other keys are run metadata, which the
    Caliper and Thicket readers apply themselves."""
    wanted: dict[str, list[float]] = {}
    for key, value in where:
        if key in exp.parameters:
            try:
                wanted.setdefault(key, []).append(float(value))
            except ValueError:
                raise PerfcastError(f"{key}={value}: {value!r} is not a number (parameter {key!r})",
                                    where="--where") from None
    for key, values in wanted.items():
        have = sorted(float(v) for v in exp.data[key].unique())
        if not set(values) & set(have):
            raise PerfcastError(f"no run has {key} = {' or '.join(f'{v:g}' for v in values)}; the runs have "
                                f"{key} = {', '.join(f'{v:g}' for v in have)}", where="--where")
    return exp.select(**wanted) if wanted else exp


#: rows checked at a time by _warn_implausible: no copy of the value column (20 M values: 160 MB)
_WARN_BLOCK_ROWS = 1 << 20


def _warn_implausible(exp: Experiment) -> Experiment:
    """Warn (``meta["warnings"]``) about values no measurement has but a file can hold: negative
    times, and parameter values <= 0 (scaling models take powers and logarithms of parameters).
    Warnings, not errors: the values are read as written and may be meant (a message size of 0)."""
    warnings = list(exp.meta.get("warnings", [])) + implausible_parameters(exp)
    warnings += implausible_times(time_extremes(exp))
    if warnings:
        exp.meta["warnings"] = list(dict.fromkeys(warnings))
    return exp


def implausible_parameters(exp: Experiment) -> list[str]:
    """The warnings of :func:`_warn_implausible` about parameter values <= 0."""
    import numpy as np

    out = []
    for p in exp.parameters:
        col = exp.cols[p]  # as stored (float32 or float64): no float64 copy of the column
        bad = col <= 0
        if bad.any():
            vals = col[bad].astype(np.float64)
            out.append(f"parameter {p!r} has the value {vals.min():g} (<= 0) at "
                       f"{len(np.unique(vals))} value(s): scaling models need positive parameter "
                       f"values (powers and logarithms)")
    return out


def time_extremes(exp: Experiment) -> dict:
    """Per time metric with values, in metric order: (the largest absolute value, the negative
    values) -- what :func:`implausible_times` needs; of parts of an experiment, merged (the
    largest of the largest, the negatives concatenated), what it needs of the whole."""
    import numpy as np

    cols = exp.cols
    values = cols["value"].astype("float64", copy=False)
    cats = cols["metric"].name_list()
    codes = cols["metric"].codes
    step = _WARN_BLOCK_ROWS

    def blocks(code: int):
        for i in range(0, len(values), step):
            v = values[i:i + step]
            yield v[codes[i:i + step] == code]

    out = {}
    for name, m in exp.metrics.items():
        if m.kind != "time" or name not in cats:
            continue
        code = cats.index(name)
        big = max((float(np.nanmax(np.abs(v))) for v in blocks(code) if len(v)), default=None)
        if big is not None:
            neg = [v[v < 0] for v in blocks(code)]
            out[name] = (big, np.concatenate(neg) if neg else np.zeros(0))
    return out


def implausible_times(extremes: dict) -> list[str]:
    """The warnings of :func:`_warn_implausible` about negative times, from :func:`time_extremes`."""
    out = []
    for name, (big, neg) in extremes.items():
        # exclusive times derived by subtraction carry rounding noise (-7e-15 s): not warned
        v = neg[neg < -1e-9 * big]
        if len(v):
            out.append(f"metric {name!r} is a time but has {len(v)} negative value(s) (smallest {float(v.min()):g})")
    return out


def at_point(exp: Experiment, coords: Mapping[str, float], rep: int | None = None) -> Experiment:
    """Give a parameterless experiment the coordinates ``coords`` (and optionally a repetition)."""
    data = exp.data.copy()
    for k, v in coords.items():
        data[k] = float(v)
    if rep is not None:
        data["rep"] = data["rep"] + int(rep)
    return Experiment(list(coords), data, exp.metrics, exp.tree, exp.meta)


# -- Thicket and Hatchet objects in memory (perfcast.io.thicket; Thicket itself is optional) --------

def from_thicket(tk, parameters: Sequence[str] | None = None) -> Experiment:
    """The Experiment of a Thicket object in memory (see :func:`perfcast.io.thicket.from_thicket`)."""
    from .thicket import from_thicket as convert

    return convert(tk, parameters)


def to_thicket(exp: Experiment):
    """A Thicket of an Experiment (see :func:`perfcast.io.thicket.to_thicket`; needs perfcast[thicket])."""
    from .thicket import to_thicket as convert

    return convert(exp)


def from_hatchet(gf) -> Experiment:
    """The Experiment of a Hatchet GraphFrame in memory (see :func:`perfcast.io.thicket.from_hatchet`)."""
    from .thicket import from_hatchet as convert

    return convert(gf)


__all__ += ["from_thicket", "to_thicket", "from_hatchet"]

"""Tidy CSV / Parquet: a row per value.

A CSV file is read by pyarrow a block at a time (columns grown in place, callpath and metric
dictionary-encoded per block, repetitions numbered with one dense integer key a block of rows at a
time); anything unusual or wrong goes to the whole-file reader, which gives every error message.

Columns: one numeric column per parameter, ``callpath``, ``metric``, ``value``, optionally ``rep``
(repetition; when absent, rows repeating a coordinate/callpath/metric become repetitions in
file order), ``rank``, ``thread``, ``unit`` (per metric, must not vary within a metric),
``kind`` and ``scope``.  Every other column must be numeric and is a parameter.  Callpaths use
``->`` between frames (``main->solve->halo``); missing ancestors are created.

A CSV file must end with a line end: a CSV cut at any byte but a line end has a last row that can
still parse (``5.3`` cut to ``5.``, ``3.6e-05`` to ``3.6e-0``), so a last line without its line end
is refused with its line number (add the newline if the file is complete).  A file cut exactly at a
line end is a valid shorter table and cannot be recognised.  Column names must be unique (pandas
would rename a second ``p`` to ``p.1``, a new parameter).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import PerfcastError
from ..experiment import (COVERAGE, KINDS, SCOPES, CallTree, Experiment, Metric, coordinate_dtype, coverage_from_attrs,
                          coverage_from_not_measured, guess_kind, split_not_measured)
from .. import arrow_kernels as pc
from ..lazy import LazyModule
from . import MAX_LINE_BYTES, ReadOptions, Reader, register, read_text as read_checked
from .memory import release

pd = LazyModule("pandas")   # imported when this reader reads (an Extra-P text file is only sniffed here)

pq = LazyModule("pyarrow.parquet")   # imported where a Parquet file is read or written (perfcast.lazy)

_META_COLUMNS = ("unit", "kind", "scope")
_REQUIRED = ("callpath", "metric", "value")


def _sniff_csv(path: Path) -> bool:
    with open(path, "r", encoding="utf-8", errors="strict") as f:
        head = f.readline()
    cols = {c.strip().strip('"') for c in head.strip().split(",")}
    return all(c in cols for c in _REQUIRED)


def _sniff_parquet(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.read(4) != b"PAR1":
            return False
    names = set(pq.read_schema(path).names)
    return all(c in names for c in _REQUIRED)


def _dense(exp: Experiment) -> Experiment:
    """A tidy table holds a value for every rank that ran a callpath: one it lacks is missing
    (:func:`perfcast.experiment.absent_location_is_missing`), not a zero."""
    exp.meta["locations"] = "dense"
    return exp


def _read_csv(path: Path, options: ReadOptions) -> Experiment:
    try:
        return _dense(_read_csv_stream(path))
    except _Slow:
        pa.default_memory_pool().release_unused()
        return _dense(_read_csv_whole(path, options))


#: bytes pyarrow parses at a time in the streaming path.  Its streaming reader reads up to 32
#: blocks ahead of the parser (arrow's background generator, not configurable): 4 MiB blocks held
#: ~120 MB of the file at once, 1 MiB blocks ~32 MB, at the same CPU time (a 210 MB file)
CSV_BLOCK_BYTES = 1 << 20
#: rows numbered at a time when repetitions are counted (a block's keys are sorted)
REP_BLOCK_ROWS = 1 << 20


class _Slow(Exception):
    """The streaming path met something it leaves to the whole-file reader (every error and every
    unusual input, so messages and results stay those of one implementation)."""


class _Checked(io.RawIOBase):
    """The file's bytes for pyarrow, with the checks read_text makes: no NUL byte, no line longer
    than MAX_LINE_BYTES; a leading UTF-8 byte-order mark is dropped."""

    def __init__(self, f):
        self.f = f
        self.run = 0  # bytes since the last line end
        self.first = True

    def readable(self):
        return True

    def readinto(self, b):
        n = self.f.readinto(b)
        if not n:
            return n
        view = memoryview(b)[:n]
        if self.first:
            self.first = False
            if bytes(view[:3]) == b"\xef\xbb\xbf":
                view[:n - 3] = bytes(view[3:n])
                n -= 3
                view = view[:n]
        raw = np.frombuffer(view, dtype=np.uint8)
        if (raw == 0).any():
            raise _Slow
        ends = np.flatnonzero(raw == 10)
        if len(ends) == 0:
            self.run += n
        else:
            longest = max(self.run + int(ends[0]), int(np.diff(ends).max(initial=0)))
            self.run = n - 1 - int(ends[-1])
            if longest > MAX_LINE_BYTES:
                raise _Slow
        if self.run > MAX_LINE_BYTES:
            raise _Slow
        return n


def _header(path: Path) -> list[str]:
    """The header's column names, when the streaming path takes them (else _Slow)."""
    import csv

    with open(path, "rb") as f:
        line = f.readline(1 << 20)
    if not line.endswith(b"\n") or b'"' in line:
        raise _Slow
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _Slow from None
    names = next(csv.reader([text.rstrip("\r\n")], skipinitialspace=True), [])
    if (not names or len(set(names)) != len(names) or any(not n or n != n.strip() for n in names)
            or any(c not in names for c in _REQUIRED)):
        raise _Slow
    return names


def _names(arr: pa.Array, table: dict[str, int], strip: bool = True) -> np.ndarray:
    """Dictionary-encoded strings -> codes in ``table`` (first appearance in the rows), names
    stripped; an empty name, a missing value or a quote left in a name is left to the whole-file
    reader.  Only the entries the rows use count, in the order the rows first use them (a Parquet
    dictionary is the writer's, in any order, maybe with unused entries)."""
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    if arr.null_count or arr.indices.null_count:
        raise _Slow
    idx = arr.indices.to_numpy(zero_copy_only=False)
    first = np.full(len(arr.dictionary), len(idx), dtype=np.int64)
    first[idx[::-1]] = np.arange(len(idx) - 1, -1, -1)  # repeated indices: the last write, the first row, wins
    used = np.flatnonzero(first < len(idx))
    used = used[np.argsort(first[used], kind="stable")]
    remap = np.zeros(len(arr.dictionary), dtype=np.int64)
    for i, raw in zip(used.tolist(), pc.take(arr.dictionary, pa.array(used)).to_pylist()):
        name = raw.strip()
        if not name or '"' in raw or (not strip and name != raw):
            raise _Slow
        remap[i] = table.setdefault(name, len(table))
    return remap[idx]


def _read_csv_stream(path: Path) -> Experiment:
    """The tidy CSV read a block at a time by pyarrow: columns grown in place (as the Extra-P text
    reader), callpath and metric dictionary-encoded per block and mapped to one code table.
    Raises _Slow for anything it leaves to the whole-file reader."""
    import pyarrow.csv as pcsv

    from . import check_readable

    check_readable(path)
    if path.is_dir() or path.stat().st_size == 0:
        raise _Slow
    with open(path, "rb") as f:
        f.seek(-1, 2)
        if f.read(1) != b"\n":
            raise _Slow
    header = _header(path)
    numeric, strings = _column_kinds(header)
    types = {c: pa.float64() for c in numeric}
    types.update({c: pa.dictionary(pa.int32(), pa.string()) for c in strings})

    def batches():
        with open(path, "rb") as raw:
            reader = pcsv.open_csv(
                io.BufferedReader(_Checked(raw), 1 << 20),
                read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES, skip_rows=1, column_names=header,
                                              use_threads=False),
                parse_options=pcsv.ParseOptions(newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(column_types=types, null_values=[""],
                                                    strings_can_be_null=True, quoted_strings_can_be_null=True))
            for k, batch in enumerate(reader, 1):
                yield batch, _parsed(raw, k, CSV_BLOCK_BYTES)

    return _from_batches(path, header, batches())


def _parsed(raw, batches: int, block: int) -> int:
    """The bytes of the file parsed after ``batches`` batches of pyarrow's streaming reader (one
    block of ``block`` bytes each), which sizes the columns.  ``raw.tell()`` alone runs ahead of
    the parser by its read-ahead: the early estimates of the row count came out several times too
    small, and the columns grew by many small steps in glibc's heap, whose freed copies stayed
    resident (the tidy CSV's peak varied by 120 MB from run to run)."""
    return min(raw.tell(), batches * block)


def _column_kinds(header: list[str]) -> tuple[list[str], list[str]]:
    """The numeric columns (parameters, value, rep, rank, thread) and the string ones."""
    params = [c for c in header if c not in (*_REQUIRED, "rep", "rank", "thread", *_META_COLUMNS)]
    numeric = [*params, "value", *[c for c in ("rep", "rank", "thread") if c in header]]
    return numeric, [c for c in ("callpath", "metric", *_META_COLUMNS) if c in header]


def _unique_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of equal-length float columns and each row's index among them (what
    ``np.unique(np.stack(columns, 1), axis=0, return_inverse=True)`` gives, in some order): a 1-D
    unique per column combined into one integer code, not a sort of structured rows."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    radix = 1
    for c in columns:
        _, inv = np.unique(c, return_inverse=True)
        k = int(inv.max(initial=0)) + 1
        if radix * k >= 1 << 62:  # renumber the codes so far densely before they could overflow
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1).astype(np.int64)
            radix = int(key.max(initial=0)) + 1
        key *= k
        key += inv.reshape(-1)
        radix *= k
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return np.stack([c[first] for c in columns], axis=1), inv.reshape(-1)


def _from_batches(path: Path, header: list[str], batches, total_rows: int | None = None) -> Experiment:
    """The Experiment from pyarrow record batches ``(batch, bytes of the file read so far)`` with the
    columns of ``header`` (numbers as integers or floats, names as strings or dictionaries of
    strings); the columns are sized by ``total_rows`` when known, else by the share of the file
    read.  _Slow for anything unusual."""
    from .extrap import _Grow, _narrow, _sorted_categorical

    meta_cols = [c for c in header if c in _META_COLUMNS]
    loc_cols = [c for c in ("rank", "thread") if c in header]
    params = [c for c in header if c not in (*_REQUIRED, "rep", "rank", "thread", *_META_COLUMNS)]
    numeric, _ = _column_kinds(header)
    size = path.stat().st_size
    # parameter columns float32 while every value is exactly one (coordinate_dtype, block by block:
    # the first block that is not widens the column), 4 bytes a row less during the read
    cols = {c: _Grow(np.float32) for c in params}
    cols["value"] = _Grow(np.float64)
    cols.update({"cp": _Grow(np.int32), "metric": _Grow(np.int8), "point": _Grow(np.int8)})
    cols.update({c: _Grow(np.int64) for c in loc_cols})
    if "rep" in header:
        cols["rep"] = _Grow(np.int32)
    cp_codes: dict[str, int] = {}
    metric_codes: dict[str, int] = {}
    point_codes: dict[tuple, int] = {}
    meta_seen: dict[str, dict[int, set]] = {c: {} for c in meta_cols}
    meta_codes: dict[str, dict[str, int]] = {c: {} for c in meta_cols}
    try:
        for batch, read in batches:
            nb = batch.num_rows
            if not nb:
                continue
            expect = (total_rows if total_rows is not None else
                      int((cols["value"].n + nb) * max(1.0, size / max(1, read)) * 1.02) + 1024)
            for c in numeric:
                a = batch.column(c)
                if a.null_count:
                    raise _Slow
                v = a.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)  # (Parquet: integers)
                if not np.isfinite(v).all():
                    raise _Slow
                if c in ("rep", "rank", "thread"):
                    if ((v < 0) | (v != np.floor(v)) | (v >= 2**31)).any():
                        raise _Slow
                    if c == "rep":
                        cols["rep"].append(v.astype(np.int32), expect)
                        continue
                if c in cols and cols[c].a.dtype == np.float32 and coordinate_dtype(v) != np.float32:
                    cols[c].widen(np.float64)
                cols[c].append(v, expect)
            cols["cp"].append(_names(batch.column("callpath"), cp_codes), expect)
            met = _names(batch.column("metric"), metric_codes)
            if len(metric_codes) > 127:
                cols["metric"].widen(np.int32)
            cols["metric"].append(met, expect)
            for c in meta_cols:
                a = batch.column(c)
                # empty cells are missing (what the whole-file reader drops); others taken as written
                ok = pc.invert(pc.is_null(a)).to_numpy(zero_copy_only=False)
                if not ok.any():
                    continue
                vals = _names(pc.drop_null(a).combine_chunks() if isinstance(a, pa.ChunkedArray)
                              else pc.drop_null(a), meta_codes[c], strip=False)
                for m, v in set(zip(met[ok].tolist(), vals.tolist())) if len(vals) < 4096 else \
                        {tuple(x) for x in np.unique(np.stack([met[ok], vals], 1), axis=0).tolist()}:
                    meta_seen[c].setdefault(m, set()).add(v)
            # points: the distinct coordinates of the block, numbered across blocks
            if params:
                uniq, inv = _unique_rows([cols[p].a[cols[p].n - nb:cols[p].n] for p in params])
                remap = np.array([point_codes.setdefault(tuple(u), len(point_codes)) for u in uniq.tolist()],
                                 dtype=np.int64)
                cols["point"].widen(_narrow(len(point_codes)))
                cols["point"].append(remap[inv.reshape(-1)], expect)
            else:
                cols["point"].append(np.zeros(nb, dtype=np.int8), expect)
    except (pa.ArrowException, UnicodeDecodeError, OSError, ValueError):
        raise _Slow from None
    finally:
        pa.default_memory_pool().release_unused()
    n = cols["value"].n
    if n == 0:
        raise _Slow
    # metrics, in order of first appearance, with the unit/kind/scope their rows give
    metric_names = list(metric_codes)
    inv_meta = {c: {code: name for name, code in meta_codes[c].items()} for c in meta_cols}
    metrics = []
    for code, name in enumerate(metric_names):
        fields = {}
        for c in meta_cols:
            vals = meta_seen[c].get(code, set())
            if len(vals) > 1:
                raise _Slow
            if vals:
                fields[c] = inv_meta[c][next(iter(vals))]
        unit = fields.get("unit", "")
        kind = fields.get("kind") or guess_kind(name, unit)
        scope = fields.get("scope") or "unknown"
        if kind not in KINDS or scope not in SCOPES:
            raise _Slow
        metrics.append(Metric(name, unit, kind, scope))
    data = {c: g.take() for c, g in cols.items()}
    counted = np.array([m.kind in ("count", "bytes") for m in metrics])
    if counted.any():
        for i in range(0, n, REP_BLOCK_ROWS):
            b = slice(i, i + REP_BLOCK_ROWS)
            if (counted[data["metric"][b]] & (data["value"][b] < 0)).any():
                raise _Slow
    # (point, callpath, metric, rank, thread[, rep]) as one dense integer key, a block of rows at a time
    dims = [(data["point"], len(point_codes) or 1), (data["cp"], len(cp_codes)), (data["metric"], len(metric_codes))]
    dims += [(data[c], int(data[c].max()) + 1) for c in loc_cols]
    if "rep" in data:
        dims.append((data["rep"], int(data["rep"].max()) + 1))
    total = 1
    for _, k in dims:
        total *= k
    if total > max(1 << 24, n):
        raise _Slow  # too many combinations for a dense key: the whole-file reader's group-by

    def keys(b: slice) -> np.ndarray:
        k = np.zeros(len(data["value"][b]), dtype=np.int64)
        for col, size in dims:
            k *= size
            k += col[b]
        return k

    if "rep" in data:
        seen = np.zeros(total, dtype=bool)
        for i in range(0, n, REP_BLOCK_ROWS):
            k = np.sort(keys(slice(i, i + REP_BLOCK_ROWS)))
            if seen[k].any() or (k[1:] == k[:-1]).any():
                raise _Slow  # a duplicate row
            seen[k] = True
        del seen
        rep = data.pop("rep")
        rep = rep.astype(_narrow(int(rep.max(initial=0))))
    else:
        # repeated coordinates are repetitions, numbered in file order
        count = np.zeros(total, dtype=np.int64)
        for i in range(0, n, REP_BLOCK_ROWS):
            count += np.bincount(keys(slice(i, i + REP_BLOCK_ROWS)), minlength=total)
        rep = np.empty(n, dtype=_narrow(int(count.max())))
        count[:] = 0
        for i in range(0, n, REP_BLOCK_ROWS):
            b = slice(i, i + REP_BLOCK_ROWS)
            k = keys(b)
            order = np.argsort(k, kind="stable")
            ks = k[order]
            first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
            group = np.cumsum(np.r_[True, ks[1:] != ks[:-1]]) - 1
            out = np.empty(len(k), dtype=np.int64)
            out[order] = count[ks] + (np.arange(len(k)) - first[group])
            rep[b] = out
            count[ks[first]] += np.diff(np.r_[first, len(k)])
        del count
    del data["point"]
    cp_names = list(cp_codes)
    del cp_codes
    tree = CallTree.from_paths(cp_names)
    frame: dict = {p: None for p in params}  # the columns' order
    frame["rep"] = rep
    frame["callpath"] = _sorted_categorical(data.pop("cp"), cp_names).to_pandas()
    del cp_names
    frame["metric"] = _sorted_categorical(data.pop("metric"), metric_names).to_pandas()
    frame["value"] = data.pop("value")
    for c in loc_cols:
        frame[c] = data.pop(c)
    release()  # the blocks' freed temporaries (glibc's heap kept ~120 MB of them at 9 M rows)
    for p in params:
        frame[p] = data.pop(p)
    return Experiment(params, pd.DataFrame(frame, copy=False), metrics, tree,
                      {"sources": [str(path)], "format": "tidy"}, owned=True)


def _read_csv_whole(path: Path, options: ReadOptions) -> Experiment:
    import csv

    text = read_checked(path)  # refuses a cut last line and non-files, bounds the line length
    try:
        head = text[:text.find("\n") + 1] if "\n" in text[:1 << 20] else text  # not a copy of the file
        if '"' in head:  # a quoted header field may span lines
            head = text
        header = next(csv.reader(io.StringIO(head.lstrip("\ufeff")), skipinitialspace=True), [])
    except csv.Error as e:
        raise PerfcastError(f"not valid CSV: {e}", path, 1) from None
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise PerfcastError(f"column {name!r} appears twice in the header", path, 1)
        seen.add(name)
    try:
        # the text as UTF-8 bytes: a StringIO of it holds 4 bytes a character (4x the file)
        buf = io.BytesIO(text.encode("utf-8"))
        del text
        df = pd.read_csv(buf, dtype={"callpath": str, "metric": str}, keep_default_na=False,
                         na_values=[""], skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise PerfcastError("empty file", path) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise _csv_error(e, path) from None
    # CSV line of data row i: header is line 1
    return _from_frame(df, path, row_to_line=lambda i: i + 2)


# -- JSON Lines: one object per line with the tidy CSV's columns as keys -------------------------
#: bytes pyarrow parses at a time in the streaming JSON Lines path
JSONL_BLOCK_BYTES = 4 << 20


def _first_object(path: Path, limit: int = 1 << 16) -> tuple[dict | None, int]:
    """The first non-blank line's JSON object (None when it is not one) and its line number."""
    import json

    with open(path, "rb") as f:
        head = f.read(limit)
    for no, line in enumerate(head.split(b"\n"), 1):
        if line.strip():
            try:
                obj = json.loads(line.decode("utf-8-sig" if no == 1 else "utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                return None, no
            return (obj if isinstance(obj, dict) else None), no
    return None, 0


def _sniff_jsonl(path: Path) -> bool:
    obj, _ = _first_object(path)
    # an Extra-P JSON Lines record has a "params" object; a tidy record one number per parameter
    return obj is not None and all(c in obj for c in _REQUIRED) and not isinstance(obj.get("params"), dict)


def _read_jsonl(path: Path, options: ReadOptions) -> Experiment:
    try:
        exp = _read_jsonl_stream(path)
    except _Slow:
        pa.default_memory_pool().release_unused()
        exp = _read_jsonl_whole(path)
    exp.meta["format"] = "tidy-jsonl"
    return _dense(exp)


def _read_jsonl_stream(path: Path) -> Experiment:
    import pyarrow.json as pjson

    from . import check_readable

    check_readable(path)
    if path.is_dir():
        raise _Slow
    obj, _ = _first_object(path)
    if obj is None:
        raise _Slow
    header = list(obj)
    if any(c not in header for c in _REQUIRED) or any(not c or c != c.strip() for c in header):
        raise _Slow
    numeric, strings = _column_kinds(header)
    schema = pa.schema([(c, pa.float64() if c in numeric else pa.string()) for c in header])
    with open(path, "rb") as f:
        if f.read(3) == b"\xef\xbb\xbf":
            raise _Slow

    def batches():
        with open(path, "rb") as raw:
            reader = pjson.open_json(
                io.BufferedReader(_Checked(raw), 1 << 20),
                read_options=pjson.ReadOptions(block_size=JSONL_BLOCK_BYTES, use_threads=False),
                parse_options=pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"))
            for k, batch in enumerate(reader, 1):
                yield batch.select(header), _parsed(raw, k, JSONL_BLOCK_BYTES)

    return _from_batches(path, header, batches())


def _read_jsonl_whole(path: Path) -> Experiment:
    """Line by line with the json module: every error names its line."""
    import json

    from . import json_int

    def pairs(items):
        seen = {}
        for k, v in items:
            if k in seen:
                raise ValueError(f"the field {k!r} appears twice")
            seen[k] = v
        return seen

    text = read_checked(path, unterminated="allow")  # a JSON object proves its own end
    first: list[str] | None = None
    first_line = 0
    columns: dict[str, list] = {}
    lines: list[int] = []
    for no, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=pairs, parse_int=json_int)
        except json.JSONDecodeError as e:
            raise PerfcastError(f"invalid JSON at column {e.colno}: {e.msg}", path, no) from None
        except (ValueError, PerfcastError, RecursionError) as e:
            raise PerfcastError(str(getattr(e, "message", e)) if not isinstance(e, RecursionError) else
                                "JSON nested too deeply", path, no) from None
        if not isinstance(obj, dict):
            raise PerfcastError(f"expected a JSON object per line, found {type(obj).__name__}", path, no)
        if first is None:
            first, first_line = list(obj), no
            missing = [c for c in _REQUIRED if c not in obj]
            if missing:
                raise PerfcastError(f"missing field(s) {', '.join(missing)} (a tidy record has callpath, metric, "
                                    f"value and one number per parameter)", path, no)
            columns = {c: [] for c in first}
            numeric, _ = _column_kinds(first)
        elif set(obj) != set(first):
            extra = sorted(set(obj) - set(first))
            gone = sorted(set(first) - set(obj))
            raise PerfcastError(f"the fields differ from those of line {first_line}: "
                                + (f"no {', '.join(map(repr, gone))}" if gone else "")
                                + ("; " if gone and extra else "")
                                + (f"unexpected {', '.join(map(repr, extra))}" if extra else ""), path, no)
        for c in first:
            v = obj[c]
            if c == "value" and v is None:
                pass   # null: not measured (experiment.not_measured_rows)
            elif c in numeric:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise PerfcastError(f"field {c!r}: {json.dumps(v)[:40]} is not a number", path, no)
                if isinstance(v, float) and not np.isfinite(v):  # the json module reads NaN, Infinity
                    raise PerfcastError(f"field {c!r}: {json.dumps(v)} is not a finite number", path, no)
            elif not isinstance(v, str) and not (v is None and c in _META_COLUMNS):
                raise PerfcastError(f"field {c!r}: {json.dumps(v)[:40]} is not a string", path, no)
            columns[c].append(v)
        lines.append(no)
    if first is None:
        raise PerfcastError("no records (empty file)", path)
    df = pd.DataFrame({c: pd.array(v, dtype=object) if c not in ("callpath", "metric") else v
                       for c, v in columns.items()})
    if "value" in df.columns:
        df["value"] = pd.to_numeric(df["value"])   # null -> NaN (not measured), numbers as they are
    return _from_frame(df, path, row_to_line=lambda i: lines[i])


def _read_parquet(path: Path, options: ReadOptions) -> Experiment:
    try:
        exp = _dense(_read_parquet_stream(path))
    except _Slow:
        pa.default_memory_pool().release_unused()
        exp = _dense(_read_parquet_whole(path))
    cov = _parquet_coverage(path)
    if cov:
        exp.meta[COVERAGE] = cov
    return exp


def _parquet_coverage(path: Path) -> list | None:
    """The coverage record of a table written by ``Experiment.to_pandas().to_parquet(...)``: pandas
    keeps ``df.attrs`` in the schema metadata (``PANDAS_ATTRS``, JSON); None without one."""
    import json

    try:
        raw = (pq.read_schema(path).metadata or {}).get(b"PANDAS_ATTRS")
    except (OSError, pa.ArrowException):
        return None
    if raw is None:
        return None
    try:
        attrs = json.loads(raw)
    except ValueError:
        raise PerfcastError("the schema's PANDAS_ATTRS metadata is not JSON", path, "PANDAS_ATTRS") from None
    return coverage_from_attrs(attrs, path)


#: rows pyarrow decodes at a time in the streaming Parquet path
PARQUET_BATCH_ROWS = 1 << 18


def _read_parquet_stream(path: Path) -> Experiment:
    """The tidy Parquet file read a batch of rows at a time (``ParquetFile.iter_batches``, string
    columns as dictionaries) into the columns the CSV path grows; _Slow for anything unusual (a
    column type other than integer, float or string, a missing value, a damaged file), which the
    whole-table reader then reads or refuses with its message."""
    from . import check_readable

    check_readable(path)
    if path.is_dir():
        raise _Slow
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError, IndexError, OverflowError):
        raise _Slow from None
    header = list(schema.names)
    if (len(set(header)) != len(header) or any(not c or c != c.strip() for c in header)
            or any(c not in header for c in _REQUIRED)):
        raise _Slow
    numeric, strings = _column_kinds(header)
    for c in header:
        t = schema.field(c).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        ok = ((pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)) if c in numeric
              else (pa.types.is_string(t) or pa.types.is_large_string(t)))
        if not ok:
            raise _Slow
    total = pf.metadata.num_rows

    def batches():
        reader = pq.ParquetFile(path, read_dictionary=strings)
        for batch in reader.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=header, use_threads=False,
                                         use_pandas_metadata=False):
            yield batch, None

    return _from_batches(path, header, batches(), total_rows=total)


def _read_parquet_whole(path: Path) -> Experiment:
    try:
        # the pandas metadata (index, dtypes) is a writer's hint, not data: a damaged one must not
        # break the read, so it is ignored
        df = pq.read_table(path).to_pandas(ignore_metadata=True)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError, IndexError, OverflowError) as e:
        raise PerfcastError(f"not a readable Parquet file: {type(e).__name__}: {e}"[:300], path) from None
    return _from_frame(df, path, row_to_line=None)


def _where(path, row_to_line, i: int, col: str):
    return row_to_line(i) if row_to_line else f"row {i}, column {col!r}"


def _csv_error(e: Exception, path) -> PerfcastError:
    """pandas' CSV error as one located line: ``FILE:LINE: expected 5 fields, found 6`` (pandas counts
    the file's lines from 1, the header included), else its last line without pandas' wording."""
    import re

    text = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if m:
        return PerfcastError(f"not valid CSV: expected {m.group(1)} fields (the header's), found {m.group(3)}",
                             path, int(m.group(2)))
    return PerfcastError(f"not valid CSV: {text.replace('Error tokenizing data. C error: ', '')}", path)


def _from_frame(df: pd.DataFrame, path: Path, row_to_line) -> Experiment:
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise PerfcastError(f"missing column(s) {', '.join(missing)} (a tidy table needs "
                            f"callpath, metric, value and one column per parameter)", path, "header")
    if len(df) == 0:
        raise PerfcastError("the table has no rows", path)
    # an empty value: the row's metric was not measured at its callpath (the coverage record,
    # experiment.not_measured_rows); the other rows are the values
    if df["value"].isna().any():
        df, unseen, _ = split_not_measured(df.reset_index(drop=True), lambda i: (path, _where(path, row_to_line, i, "value")))
        if len(df) == 0:
            raise PerfcastError("the table has no values (every row's value is empty: not measured)", path)
        lines = df.index.to_numpy()
        line_of = (lambda i: row_to_line(int(lines[i]))) if row_to_line else None
        df = df.reset_index(drop=True)
        exp = _from_frame(df, path, line_of)
        every = list(dict.fromkeys([*exp.tree.paths, *sorted(c for cs in unseen.values() for c in cs)]))
        tree = CallTree.from_paths(every)
        cov = coverage_from_not_measured(unseen, tree.paths, list(exp.metrics))
        return Experiment(exp.parameters, exp.data, exp.metrics.values(), tree, {**exp.meta, COVERAGE: cov}
                          if cov else exp.meta)
    params = [c for c in df.columns if c not in (*_REQUIRED, "rep", "rank", "thread", *_META_COLUMNS)]
    for c in [*params, "value", "rep", "rank", "thread"]:
        if c not in df.columns:
            continue
        num = pd.to_numeric(df[c], errors="coerce")
        bad = num.isna().to_numpy() & df[c].notna().to_numpy() | df[c].isna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            what = "parameter" if c in params else "column"
            cell = df[c].iloc[i]
            raise PerfcastError(f"{what} {c!r}: {cell!r} is not a number" if isinstance(cell, str) else
                                f"{what} {c!r}: empty cell is not a number",
                                path, _where(path, row_to_line, i, c))
        vals = num.to_numpy(dtype="float64")
        nonfinite = ~np.isfinite(vals)
        if nonfinite.any():
            i = int(np.argmax(nonfinite))
            raise PerfcastError(f"column {c!r}: {str(df[c].iloc[i])!r} is not finite",
                                path, _where(path, row_to_line, i, c))
        if c in ("rep", "rank", "thread"):
            bad = (vals < 0) | (vals != np.floor(vals)) | (vals >= 2**31)
            if bad.any():
                i = int(np.argmax(bad))
                raise PerfcastError(f"column {c!r}: {str(df[c].iloc[i])[:40]!r} is not a non-negative integer "
                                    f"below 2^31",
                                    path, _where(path, row_to_line, i, c))
        df[c] = vals
    for c in ("callpath", "metric"):
        # stripped and checked per distinct name, not per row (millions of rows, few names): a
        # categorical with sorted categories, what the Experiment makes of a column of strings
        cat = df[c].astype("category").array
        names = pd.Index(cat.categories.astype(str)).str.strip()
        codes = np.asarray(cat.codes)
        empty = (codes < 0) | np.asarray(names == "", dtype=bool)[codes]
        if empty.any():
            i = int(np.argmax(empty))
            raise PerfcastError(f"empty {c}", path, _where(path, row_to_line, i, c))
        remap, uniq = pd.factorize(names, sort=True)  # names equal once stripped become one
        df[c] = pd.Categorical.from_codes(remap[codes], uniq.astype(object).astype(str), validate=False)

    metrics = []
    for name, rows in df.groupby("metric", sort=False):
        fields = {}
        for c in _META_COLUMNS:
            if c in df.columns:
                vals = rows[c].dropna().astype(str).unique()
                if len(vals) > 1:
                    raise PerfcastError(f"metric {name!r} has several {c}s: {', '.join(vals)}", path, c)
                if len(vals):
                    fields[c] = vals[0]
        unit = fields.get("unit", "")
        kind = fields.get("kind") or guess_kind(name, unit)
        scope = fields.get("scope") or "unknown"
        if kind not in KINDS or scope not in SCOPES:
            raise PerfcastError(f"metric {name!r}: kind must be one of {', '.join(KINDS)} and scope one of "
                                f"{', '.join(SCOPES)}", path, "kind" if kind not in KINDS else "scope")
        metrics.append(Metric(name, unit, kind, scope))
        m = metrics[-1]
        if m.kind in ("count", "bytes"):
            neg = rows["value"].to_numpy() < 0
            if neg.any():
                i = int(rows.index[np.argmax(neg)])
                raise PerfcastError(f"metric {name!r} counts {m.kind} but has the negative value "
                                    f"{rows['value'].iloc[int(np.argmax(neg))]}", path,
                                    _where(path, row_to_line, i, "value"))

    keys = [*params, "callpath", "metric", *[c for c in ("rank", "thread") if c in df.columns]]
    if "rep" not in df.columns:
        # repeated coordinates are repetitions, numbered in file order (never collapsed)
        df["rep"] = df.groupby(keys, sort=False).cumcount() if keys else np.arange(len(df))
    else:
        dup = df.duplicated([*keys, "rep"], keep="first").to_numpy()
        if dup.any():
            i = int(np.argmax(dup))
            raise PerfcastError("duplicate row: the same point, callpath, metric and rep appear twice",
                                path, _where(path, row_to_line, i, "rep"))
    tree = CallTree.from_paths(pd.unique(df["callpath"]))
    cols = [*params, "rep", "callpath", "metric", "value", *[c for c in ("rank", "thread") if c in df.columns]]
    return Experiment(params, df[cols], metrics, tree, {"sources": [str(path)], "format": "tidy"})


register(Reader("tidy", "tidy CSV: one column per parameter plus callpath, metric, value[, rep, rank, thread, unit]",
                (".csv",), _sniff_csv, _read_csv))
register(Reader("tidy-jsonl", "tidy JSON Lines: one object per line with the tidy CSV's columns as keys",
                (".jsonl", ".ndjson"), _sniff_jsonl, _read_jsonl))
register(Reader("tidy-parquet", "tidy Parquet table (same columns as tidy CSV)", (".parquet", ".pq"),
                _sniff_parquet, _read_parquet))

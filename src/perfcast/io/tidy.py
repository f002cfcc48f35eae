"""Tidy CSV / Parquet: a row per value.

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

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import PerfcastError
from ..experiment import KINDS, SCOPES, CallTree, Experiment, Metric, guess_kind
from . import ReadOptions, Reader, register, read_text as read_checked

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


def _read_csv(path: Path, options: ReadOptions) -> Experiment:
    import csv
    import io

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
        raise PerfcastError(f"not valid CSV: {str(e).strip().splitlines()[-1]}", path) from None
    # CSV line of data row i: header is line 1
    return _from_frame(df, path, row_to_line=lambda i: i + 2)


def _read_parquet(path: Path, options: ReadOptions) -> Experiment:
    try:
        # the pandas metadata (index, dtypes) is a writer's hint, not data: a damaged one must not
        # break the read, so it is ignored
        df = pq.read_table(path).to_pandas(ignore_metadata=True)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError, IndexError, OverflowError) as e:
        raise PerfcastError(f"not a readable Parquet file: {type(e).__name__}: {e}"[:300], path) from None
    return _from_frame(df, path, row_to_line=None)


def _where(path, row_to_line, i: int, col: str):
    return row_to_line(i) if row_to_line else f"row {i}, column {col!r}"


def _from_frame(df: pd.DataFrame, path: Path, row_to_line) -> Experiment:
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise PerfcastError(f"missing column(s) {', '.join(missing)} (a tidy table needs "
                            f"callpath, metric, value and one column per parameter)", path, "header")
    if len(df) == 0:
        raise PerfcastError("the table has no rows", path)
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
register(Reader("tidy-parquet", "tidy Parquet table (same columns as tidy CSV)", (".parquet", ".pq"),
                _sniff_parquet, _read_parquet))

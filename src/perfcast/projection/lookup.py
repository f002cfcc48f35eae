"""System search without pandas: the query rules of :meth:`.database.BenchmarkDB.find` over plain
numpy columns, and ``perfcast systems``' fast path (the cached systems table read with pyarrow).

Query rules (one implementation, used by :class:`.database.BenchmarkDB` too):

* a word must occur (case-insensitive) in the system's description -- the fields of
  :data:`NAME_FIELDS` present (display name, vendor, processor, sponsor); internal ids are not
  searched, so ``8380`` does not match the result ``cpu2017-20180816-08380`` of a Xeon 8158.  A word
  equal to a system id (whole, case-insensitive) matches that system;
* ``key=value`` keeps systems whose attribute ``key`` equals ``value`` (numbers numerically when the
  column holds numbers, text case-insensitively as a substring), ``key>value``, ``key<value``,
  ``key>=value``, ``key<=value`` compare numerically.  A missing value matches nothing.

Choosing one system (``--base``/``--target``, :meth:`.database.BenchmarkDB.resolve`) is stricter
about model numbers: a word with a digit that the only matching system has just inside a longer
word (``7302`` in ``EPYC 7302P``, ``6148`` in ``Gold 6148F``: other processors) is not taken as
naming it (:func:`partial_model_words`); the error names the system so the user can give its whole
model name or id.

Importing this module loads numpy only; :func:`load_systems` adds pyarrow when the cache is warm and
falls back to parsing the tables (pandas) when it is not.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from ..shared_data import CHECKOUT, ENV_VAR, shared_data_dir

#: Description columns searched by free words (those present); ``system`` (the id) is not one.
NAME_FIELDS = ("name", "vendor", "hardware_vendor", "model_name", "test_sponsor")
_FILTER_RE = re.compile(r"^([A-Za-z_][\w.]*)\s*(=|<=|>=|<|>)\s*(.+)$")

#: the published tables loaded when no --db is given: SPEC CPU2017 FP rate (shared data) and the
#: integer rate results, joined to the same machines (``data/spec`` of the checkout, data/README.md)
DEFAULT_TABLES = ("spec17ml_input_FP_rate.csv", "spec17ml_input_Int_rate.csv.gz")


def data_root() -> Path:
    """Where the published benchmark tables live (:func:`perfcast.shared_data.shared_data_dir`; the
    tables are third-party data and are not shipped in the package; --db and friends name them
    explicitly)."""
    return shared_data_dir()


def find_table(name: str, dirs: Sequence[Path]) -> Path | None:
    """The first of ``name``, it without ``.gz`` and it with ``.gz`` in the first of ``dirs`` that has
    one (a table may be stored compressed or not; the loaders read both)."""
    base = name.removesuffix(".gz")
    for d in dirs:
        for cand in (d / name, d / base, d / (base + ".gz")):
            if cand.is_file():
                return cand
    return None


def default_table(name: str) -> Path | None:
    return find_table(name, (data_root() / "spec", CHECKOUT / "data" / "spec"))


def table_paths(paths: Sequence[str | Path] = ()) -> list[str | Path]:
    """``paths`` as given, else the default tables that exist (the FP rate table is required)."""
    if paths:
        return list(paths)
    fp = default_table(DEFAULT_TABLES[0])
    if fp is None:
        raise PerfcastError("default SPEC CPU2017 table not found; give --db FILE, set "
                            f"{ENV_VAR}, or install the perfcast-data wheel (perfcast data wheel)",
                            data_root() / "spec" / DEFAULT_TABLES[0])
    return [fp] + [p for p in (default_table(n) for n in DEFAULT_TABLES[1:]) if p is not None]


# -- matching ---------------------------------------------------------------------------------
def parse_query(query: str) -> tuple[list[str], list[tuple[str, str, str]]]:
    words, filters = [], []
    for tok in query.split():
        m = _FILTER_RE.match(tok)
        if m:
            filters.append((m.group(1), m.group(2), m.group(3)))
        else:
            words.append(tok)
    return words, filters


def _missing(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))


def _text(v) -> str:
    return "" if _missing(v) else str(v).lower()


def _number(v) -> float:
    """``v`` as a float; NaN when it is missing or not a number (``"1_000"`` is not one)."""
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if _missing(v):
        return math.nan
    if isinstance(v, str) and "_" in v:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _numbers(col: np.ndarray) -> np.ndarray:
    if col.dtype.kind in "iufb":
        return col.astype(float)
    return np.fromiter((_number(v) for v in col), float, len(col))


def match(columns: Mapping[str, np.ndarray], query: str) -> np.ndarray:
    """Boolean mask of the systems (rows of ``columns``, which holds ``system``) matching every word
    and filter of ``query`` (module doc)."""
    n = len(columns["system"])
    words, filters = parse_query(query)
    keep = np.ones(n, dtype=bool)
    if words:
        fields = [columns[c] for c in NAME_FIELDS if c in columns]
        text = [" ".join(_text(v) for v in row) for row in zip(*fields)] if fields else [""] * n
        ids = [_text(v) for v in columns["system"]]
        for w in words:
            w = w.lower()
            keep &= np.fromiter((w in t or w == i for t, i in zip(text, ids)), bool, n)
    for key, op, value in filters:
        if key not in columns:
            raise PerfcastError(f"unknown system attribute {key!r} in filter; known: "
                                f"{', '.join(c for c in columns if c != 'name')}", where="query")
        col = columns[key]
        num = _numbers(col)
        try:
            v = float(value)
        except ValueError:
            v = None
        if op == "=":
            if v is not None and not np.isnan(num).all():
                keep &= num == v
            else:
                value = value.lower()
                keep &= np.fromiter((value in _text(x) for x in col), bool, n)
        else:
            if v is None:
                raise PerfcastError(f"filter {key}{op}{value}: {value!r} is not a number", where="query")
            with np.errstate(invalid="ignore"):
                keep &= {"<": num < v, ">": num > v, "<=": num <= v, ">=": num >= v}[op]
    return keep


_TOKENS = re.compile(r"[^\s(),;:/]+")


def partial_model_words(query: str, row: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(word, longer word)`` for every word of ``query`` with a digit that occurs in the system's
    description fields (``row``: column -> value) only inside a longer word, never whole: ``7302``
    matching ``7302P`` names another processor than the one typed."""
    words, _ = parse_query(query)
    tokens = [t for c in NAME_FIELDS if c in row for t in _TOKENS.findall(_text(row[c]))]
    ident = _text(row.get("system"))
    out = []
    for w in words:
        w = w.lower()
        if w == ident or not any(ch.isdigit() for ch in w) or w in tokens:
            continue
        longer = next((t for t in tokens if w in t), None)
        if longer is not None:
            out.append((w, longer))
    return out


def no_match_error(query: str, names, count: int, source: str) -> PerfcastError:
    """The error for a query no system matches: the closest processor (or display) names."""
    close = difflib.get_close_matches(query, list(dict.fromkeys(str(v) for v in names)), n=4, cutoff=0.5)
    hint = f"; closest names: {', '.join(close)}" if close else ""
    return PerfcastError(f"no system matches {query!r} ({count} systems in {source or 'the database'}){hint}",
                         where="system")


# -- the systems table without pandas ----------------------------------------------------------
@dataclass(frozen=True)
class SystemTable:
    """The systems of a benchmark database as numpy columns (in the table's column order)."""

    columns: Mapping[str, np.ndarray]
    source: str = ""

    @classmethod
    def from_frame(cls, systems, source: str = "") -> "SystemTable":
        return cls({str(c): systems[c].to_numpy() for c in systems.columns}, source)

    def __len__(self) -> int:
        return len(self.columns["system"])

    def find(self, query: str) -> np.ndarray:
        """Row numbers of the systems matching ``query``, in table order (all for an empty query)."""
        return np.flatnonzero(match(self.columns, query))

    def rows(self, index, cols: Sequence[str]) -> list[list[str]]:
        """``cols`` of the rows ``index`` as text."""
        return [[str(self.columns[c][i]) for c in cols] for i in index]

    def no_match_error(self, query: str) -> PerfcastError:
        names = self.columns.get("model_name", self.columns["name"])
        return no_match_error(query.strip(), names, len(self), self.source)


def load_systems(paths: Sequence[str | Path] = ()) -> SystemTable:
    """The systems of :func:`.project.load_db`'s database: from the cache with pyarrow alone when it
    is valid, else parsed (pandas) -- which also writes the cache."""
    paths = table_paths(paths)
    from .dbcache import read_systems

    hit = read_systems(paths)
    if hit is not None:
        return hit
    from .project import load_db

    db = load_db(paths)
    return SystemTable.from_frame(db.systems, db.source)

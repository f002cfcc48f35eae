"""Published benchmark results: which system ran which benchmark in how many seconds.

A :class:`BenchmarkDB` is one tidy table ``system, suite, benchmark, time`` (seconds, lower is
better) plus a table of system attributes (one row per system: ``system`` = a unique id, ``name``
for display, and any descriptive columns such as ``vendor``, ``model_name``, ``sockets``).

Sources
-------
* SPEC CPU2017 published results as flattened by spec17-ml (``spec17ml_input_FP_rate.csv``):
  one row per result, ``t_<benchmark>`` = base runtime; the result file name is the system id.
* A user CSV in tidy form (:func:`load_user_csv`)::

      system,benchmark,time[,suite][,<any attribute column>...]
      mybox,503.bwaves_r,412.5,,Xeon Gold 6148,...

  ``time`` is seconds (> 0); attribute columns must be constant per system.  Several sources
  can be merged with :meth:`BenchmarkDB.merged` (system ids must not collide).
* Another suite run on the same machines (e.g. SPEC CPU2017 integer rate next to FP rate) is
  attached to them with :meth:`BenchmarkDB.joined`: a result joins the system of the same
  configuration (:data:`CONFIG_FIELDS`), one to one, closest submission number first.

Selecting systems
-----------------
:meth:`BenchmarkDB.find` takes a query of words and filters (:mod:`.lookup`): every word must occur
(case-insensitive) in the system's description fields (an id only when the word is the whole id);
``key=value`` keeps systems whose attribute ``key`` equals ``value`` (numbers compare numerically,
text case-insensitively as a substring), ``key>value`` / ``key<value`` compare numerically.
:meth:`BenchmarkDB.resolve` insists on one system: no match is an error naming the closest names,
several matches an error listing the candidates (never a guess).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from .lookup import NAME_FIELDS, match, no_match_error, partial_model_words  # noqa: F401  (NAME_FIELDS: searched)


@dataclass(frozen=True)
class BenchmarkDB:
    """Tidy benchmark results: ``results`` (system, suite, benchmark, time) and ``systems``."""

    results: pd.DataFrame
    systems: pd.DataFrame
    source: str = ""

    def __post_init__(self):
        if self.systems["system"].duplicated().any():
            dup = self.systems["system"][self.systems["system"].duplicated()].iloc[0]
            raise PerfcastError(f"system id {dup!r} appears twice", self.source)

    # -- access -------------------------------------------------------------------------------
    @property
    def benchmarks(self) -> list[str]:
        return sorted(self.results["benchmark"].unique())

    def __len__(self) -> int:
        return len(self.systems)

    def times(self) -> pd.DataFrame:
        """Wide table: one row per system (index = id), one column per benchmark (seconds)."""
        return self.results.pivot_table(index="system", columns="benchmark", values="time", aggfunc="first")

    def time(self, system: str, benchmark: str) -> float:
        """One published runtime; missing is a :class:`PerfcastError`."""
        r = self.results[(self.results["system"] == system) & (self.results["benchmark"] == benchmark)]
        if r.empty:
            raise PerfcastError(f"benchmark {benchmark!r} has no published result on system {system!r}")
        return float(r["time"].iloc[0])

    def name(self, system: str) -> str:
        row = self.systems[self.systems["system"] == system]
        return str(row["name"].iloc[0]) if len(row) else system

    def merged(self, other: "BenchmarkDB") -> "BenchmarkDB":
        clash = set(self.systems["system"]) & set(other.systems["system"])
        if clash:
            raise PerfcastError(f"system ids defined twice: {', '.join(sorted(clash)[:5])}", other.source)
        return BenchmarkDB(pd.concat([self.results, other.results], ignore_index=True),
                           pd.concat([self.systems, other.systems], ignore_index=True),
                           "+".join(s for s in (self.source, other.source) if s))

    def joined(self, other: "BenchmarkDB") -> tuple["BenchmarkDB", int]:
        """This database with ``other``'s results attached to the same machines: a result of
        ``other`` joins this database's system of the same configuration (:data:`CONFIG_FIELDS`),
        one to one, the closest submission number first (a vendor submits the integer and the
        floating-point suite of one machine together); only systems with results of ``other``'s suite
        (rate or speed) are candidates.  Results of ``other`` that match no system,
        or whose benchmarks this database already has, are left out.  Returns the joined database
        and the number of ``other``'s systems linked."""
        clash = set(self.benchmarks) & set(other.benchmarks)
        if clash:
            raise PerfcastError(f"cannot join two tables of the same benchmarks ({', '.join(sorted(clash)[:3])})",
                                other.source)
        suites = set(other.results["suite"])
        mine = self.systems[self.systems["system"].isin(self.results.loc[self.results["suite"].isin(suites), "system"])]
        a, b = _configuration(mine), _configuration(other.systems)
        if a is None or b is None:
            raise PerfcastError(f"joining needs the configuration columns {', '.join(CONFIG_FIELDS)}",
                                other.source)
        cand = a.merge(b, on="config", suffixes=("", "_other"))
        cand["gap"] = (cand["seq"] - cand["seq_other"]).abs().fillna(0)
        cand = cand.sort_values(["gap", "system", "system_other"], kind="stable")
        link, used = {}, set()
        for mine, theirs in zip(cand["system"], cand["system_other"]):
            if mine not in used and theirs not in link:
                link[theirs] = mine
                used.add(mine)
        res = other.results[other.results["system"].isin(link)].copy()
        res["system"] = res["system"].map(link)
        note = f"{other.source} ({len(link)} of {len(other)} results joined to the same machines)"
        db = BenchmarkDB(pd.concat([self.results, res], ignore_index=True), self.systems,
                         f"{self.source} + {note}" if self.source else note)
        return db, len(link)

    # -- selection ----------------------------------------------------------------------------
    def find(self, query: str) -> pd.DataFrame:
        """Systems matching every word and filter of ``query`` (:mod:`.lookup`)."""
        s = self.systems
        return s[match({str(c): s[c].to_numpy() for c in s.columns}, query)]

    def resolve(self, query: str, max_listed: int = 8) -> str:
        """The one system id ``query`` designates; an exact id always wins."""
        q = query.strip()
        if not q:
            raise PerfcastError("empty system query")
        exact = self.systems[self.systems["system"].str.lower() == q.lower()]
        if len(exact) == 1:
            return str(exact["system"].iloc[0])
        hits = self.find(q)
        if len(hits) == 1:
            row = hits.iloc[0]
            partial = partial_model_words(q, row.to_dict())
            if partial:
                inside = ", ".join(f"{w!r} inside {t!r}" for w, t in partial)
                raise PerfcastError(f"{q!r} matches one system, {row['system']} = {row['name']}, but only through "
                                    f"{inside}: another model than the one typed; give its whole model name or "
                                    f"its id", where="system")
            return str(hits["system"].iloc[0])
        if hits.empty:
            raise no_match_error(q, self.systems.get("model_name", self.systems["name"]), len(self), self.source)
        listed = "; ".join(f"{r.system} = {r.name}" for r in hits.head(max_listed).itertuples())
        more = f"; ... and {len(hits) - max_listed} more" if len(hits) > max_listed else ""
        raise PerfcastError(f"{q!r} is ambiguous: {len(hits)} systems match ({listed}{more}); narrow it with "
                            f"more words, key=value filters (e.g. sockets=2) or give a system id", where="system")


# -- loaders ----------------------------------------------------------------------------------
#: What makes two published results the same machine (:meth:`BenchmarkDB.joined`): the spec17-ml
#: attributes of the hardware, the copies run, and the compiler (family and version).
CONFIG_FIELDS = ("hardware_vendor", "model_name", "cpus", "cores_per_socket", "sockets", "threads_or_copies",
                 "mem_kb", "mem_channels", "mem_data_rate", "l3_cache_kb", "max_mhz", "compiler")
_COMPILER_RE = re.compile(r"Version\s+(\S+)\s+of\s+(\w+)", re.IGNORECASE)


def _configuration(systems: pd.DataFrame) -> pd.DataFrame | None:
    """``system, config, seq`` per system: the configuration key of :data:`CONFIG_FIELDS` (memory in
    GiB, numbers normalised, the compiler reduced to its first "Version X of Y") and the submission
    number (the digits ending the id, e.g. ``cpu2017-20190428-12621``; NaN for other ids)."""
    if any(c not in systems.columns for c in CONFIG_FIELDS):
        return None
    parts = []
    for c in CONFIG_FIELDS:
        col = systems[c]
        if c == "compiler":
            m = col.astype(str).str.extract(_COMPILER_RE)
            parts.append((m[1].fillna("").str.lower() + " " + m[0].fillna("")).str.strip())
            continue
        num = pd.to_numeric(col, errors="coerce")
        if c == "mem_kb":
            num = (num / 2 ** 20).round()
        parts.append(num.map(lambda v: "" if pd.isna(v) else f"{v:g}").where(num.notna(),
                                                                              col.astype(str).str.strip().str.lower()))
    config = parts[0].str.cat(parts[1:], sep="|")
    seq = pd.to_numeric(systems["system"].astype(str).str.extract(r"(\d+)$")[0], errors="coerce")
    return pd.DataFrame({"system": systems["system"].to_numpy(), "config": config.to_numpy(), "seq": seq.to_numpy()})


def read_csv(path: str | Path, **kw) -> pd.DataFrame:
    """``pandas.read_csv`` with every way a path can fail as one located :class:`PerfcastError`."""
    path = Path(path)
    if not path.exists():
        raise PerfcastError("no such file", path)
    if path.is_dir():
        raise PerfcastError("is a directory, not a CSV file", path)
    try:
        return pd.read_csv(path, **kw)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
        raise PerfcastError(f"not a readable CSV: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                            path) from None



def load_spec(path: str | Path, suite: str | None = None) -> BenchmarkDB:
    """SPEC CPU2017 results flattened one result per row (spec17-ml's ``spec17ml_input_*.csv``).

    System id = the result file name without ``.csv``; name = ``hardware_vendor model_name
    (sockets x cores_per_socket, copies/threads)``.  Non-positive or missing runtimes are dropped.
    """
    path = Path(path)
    df = read_csv(path)
    tcols = [c for c in df.columns if c.startswith("t_")]
    if not tcols or "file" not in df.columns:
        raise PerfcastError("not a spec17-ml table: needs a 'file' column and t_<benchmark> runtime columns", path)
    if suite is None:
        suite = "cpu2017_" + ("rate" if "rate" in path.name.lower() else "speed" if "speed" in path.name.lower()
                              else "unknown")
    ids = df["file"].astype(str).str.replace(r"\.csv$", "", regex=True)
    if ids.duplicated().any():
        # keep the first of duplicated result files (the data set holds a few re-submissions)
        df = df[~ids.duplicated()].reset_index(drop=True)
        ids = ids[~ids.duplicated()].reset_index(drop=True)
    attrs = [c for c in df.columns if not c.startswith("t_") and not re.match(r"^\d{3}\.", c) and c != "file"]
    systems = df[attrs].copy()
    systems.insert(0, "system", ids)

    def _n(v):
        try:
            return f"{int(float(v))}"
        except (TypeError, ValueError):
            return "?"

    def col(c):
        return df[c] if c in df.columns else [None] * len(df)
    systems.insert(1, "name", [
        f"{hv or ''} {mn or ''} ({_n(so)}x{_n(cs)} cores, {_n(tc)} {'copies' if 'rate' in suite else 'threads'})".strip()
        for hv, mn, so, cs, tc in zip(col("hardware_vendor"), col("model_name"), col("sockets"),
                                      col("cores_per_socket"), col("threads_or_copies"))])
    long = df[tcols].copy()
    long.columns = [c[2:] for c in tcols]
    long.insert(0, "system", ids)
    long = long.melt(id_vars="system", var_name="benchmark", value_name="time")
    long["time"] = pd.to_numeric(long["time"], errors="coerce")
    long = long[np.isfinite(long["time"]) & (long["time"] > 0)]
    long.insert(1, "suite", suite)
    return BenchmarkDB(long.reset_index(drop=True), systems.reset_index(drop=True), str(path))


def load_user_csv(path: str | Path) -> BenchmarkDB:
    """Tidy user results ``system, benchmark, time[, suite][, attributes...]`` (see module doc)."""
    path = Path(path)
    df = read_csv(path)
    missing = [c for c in ("system", "benchmark", "time") if c not in df.columns]
    if missing:
        raise PerfcastError(f"missing column(s) {', '.join(missing)}; a benchmark table needs "
                            f"system, benchmark, time[, suite, attributes...]", path)
    if df.empty:
        raise PerfcastError("no rows", path)
    t = pd.to_numeric(df["time"], errors="coerce")
    bad = ~(np.isfinite(t) & (t > 0))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise PerfcastError(f"time {df['time'].iloc[i]!r} is not a positive number of seconds", path, i + 2)
    df = df.assign(time=t.astype(float), system=df["system"].astype(str), benchmark=df["benchmark"].astype(str))
    if "suite" not in df.columns:
        df["suite"] = "user"
    df["suite"] = df["suite"].fillna("user").astype(str)
    dup = df.duplicated(["system", "suite", "benchmark"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise PerfcastError(f"second result for system {df['system'].iloc[i]!r}, benchmark "
                            f"{df['benchmark'].iloc[i]!r}", path, i + 2)
    attrs = [c for c in df.columns if c not in ("system", "benchmark", "time", "suite")]
    systems = df.groupby("system", sort=False)[attrs].first().reset_index() if attrs else \
        pd.DataFrame({"system": df["system"].unique()})
    for a in attrs:
        if (df.groupby("system")[a].nunique(dropna=False) > 1).any():
            raise PerfcastError(f"attribute column {a!r} differs between rows of one system", path)
    if "name" not in systems.columns:
        systems.insert(1, "name", systems["system"])
    return BenchmarkDB(df[["system", "suite", "benchmark", "time"]].reset_index(drop=True),
                       systems.reset_index(drop=True), str(path))

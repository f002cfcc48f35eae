"""Counter signatures: per-instruction hardware metrics of a benchmark or an application.

The surrogate search compares signatures measured on the *base* machine.  Sharkawi's POWER5+
groups (CPI stack, FP mix, translation misses, L1 reloads by source, memory bandwidth) are mapped
to what the published characterisation of SPEC CPU2017 on Skylake-SP (Navarro-Torres et al. 2019,
``navarro2019_skx_2K17Rate_*``) and ordinary counter tools provide:

==========  =====================================================  ======================
group       metrics (per instruction unless said)                   source columns
==========  =====================================================  ======================
cpi         ``cpi`` cycles per instruction                          General_Info CPI
mix         ``load_frac``, ``store_frac`` loads/stores per instr.   Lect, Escr
cache       ``l1_mpki``, ``l2_mpki``, ``l3_mpki`` misses / 1000 i.  MPKI1, MPKI2, MPKI3
llc         ``llc_mpki``, ``llc_apki`` LLC misses/accesses / 1000   MPKI_All, APKI_All
bandwidth   ``bw_cpi`` = DRAM GB/s x CPI (~ bytes per instruction)  BW_All x CPI
prefetch    ``nopf_llc_mpki``, ``nopf_llc_apki``, ``pf_cpi_gain``    *_None, CPI_None - CPI
==========  =====================================================  ======================

``cpi``, ``mix`` and ``cache`` (:data:`PORTABLE`) can be measured on any machine with perf, PAPI
or cachegrind; the other groups need the characterisation's setup (prefetchers switched off,
uncore bandwidth counters) and are used only when the application's signature has them.  From an
experiment, ``bw_cpi`` = DRAM bytes / instructions x cycles / CPU seconds / 1e9 (bytes per
instruction times the clock in GHz, which is what GB/s x CPI of one copy is), with the DRAM bytes
of the whole job: a ``dram_bytes`` metric, or perf's ``uncore_imc/cas_count_read/`` +
``uncore_imc/cas_count_write/`` (system-wide counts, e.g. one ``perf stat -a`` per node) or
LIKWID's MEM group (``Memory data volume``), and the CPU seconds from ``task-clock`` (perf) or
``Runtime unhalted`` (LIKWID).  The closed loop gives 15 % mean error with this group alone
(bench/PROJECTION.md).

Every metric is a per-instruction average, so a serial combination of benchmarks in which
benchmark k executes a fraction phi_k of the instructions has the metric sum_k phi_k m_k
(Sharkawi's Eq 7 with I_sk / I_total) -- the surrogate search relies on this linearity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from .database import read_csv

GROUPS: dict[str, tuple[str, ...]] = {
    "cpi": ("cpi",),
    "mix": ("load_frac", "store_frac"),
    "cache": ("l1_mpki", "l2_mpki", "l3_mpki"),
    "llc": ("llc_mpki", "llc_apki"),
    "bandwidth": ("bw_cpi",),
    "prefetch": ("nopf_llc_mpki", "nopf_llc_apki", "pf_cpi_gain"),
}
PORTABLE = ("cpi", "mix", "cache")
METRICS = tuple(m for g in GROUPS.values() for m in g)


@dataclass(frozen=True)
class Signature:
    """Per-instruction metrics of one program on the base machine; ``instructions`` in units of 1e9."""

    name: str
    values: Mapping[str, float]
    instructions: float = float("nan")
    inputs: int = 1
    source: str = ""

    def groups(self) -> list[str]:
        """Groups whose every metric is present."""
        return [g for g, ms in GROUPS.items() if all(m in self.values for m in ms)]

    def vector(self, metrics: Sequence[str]) -> np.ndarray:
        return np.array([self.values[m] for m in metrics], dtype=float)

    def require(self, groups: Sequence[str], what: str = "") -> None:
        """Raise naming the missing metrics if any group in ``groups`` is incomplete."""
        missing = [m for g in groups for m in GROUPS[g] if m not in self.values]
        if missing:
            raise PerfcastError(f"signature of {what or self.name!r} lacks metric(s) {', '.join(missing)} needed by "
                                f"group(s) {', '.join(g for g in groups if any(m in missing for m in GROUPS[g]))}; "
                                f"measure them or choose groups from: {', '.join(self.groups()) or 'none'}",
                                self.source or None)


def check_groups(groups: Sequence[str]) -> list[str]:
    out = []
    for g in groups:
        if g not in GROUPS:
            raise PerfcastError(f"unknown metric group {g!r}; groups: {', '.join(GROUPS)}", where="groups")
        if g not in out:
            out.append(g)
    if not out:
        raise PerfcastError("no metric groups chosen", where="groups")
    return out


# -- Navarro-Torres et al. characterisation -----------------------------------------------------
def _pct(s: pd.Series) -> pd.Series:
    t = s.astype(str).str.strip()
    pct = t.str.endswith("%")
    v = pd.to_numeric(t.str.rstrip("%"), errors="coerce")
    return v.where(~pct, v / 100.0)


def load_navarro(directory: str | Path, prefix: str = "navarro2019_skx_2K17Rate_") -> dict[str, Signature]:
    """Signatures per benchmark from the three Navarro-Torres tables (General_Info, prefetch, BW).

    Benchmarks with several inputs (``503.bwaves_r.1..4``) are combined as a serial run: per
    instruction metrics weighted by the inputs' instruction counts (``Instr``, 1e9).  The BW and
    prefetch tables are optional: without them those groups are absent.
    """
    d = Path(directory)
    gpath = d / f"{prefix}General_Info.csv"
    if not gpath.exists():
        raise PerfcastError("characterisation table not found", gpath)
    gi = read_csv(gpath)
    need = ["Benchmark", "Instr", "Lect", "Escr", "MPKI1", "MPKI2", "MPKI3", "CPI"]
    miss = [c for c in need if c not in gi.columns]
    if miss:
        raise PerfcastError(f"missing column(s) {', '.join(miss)}", gpath)
    gi = gi[gi["Benchmark"].astype(str).str.upper() != "AVG"].copy()
    df = pd.DataFrame({"input": gi["Benchmark"].astype(str), "instr": pd.to_numeric(gi["Instr"], errors="coerce"),
                       "cpi": pd.to_numeric(gi["CPI"], errors="coerce"), "load_frac": _pct(gi["Lect"]),
                       "store_frac": _pct(gi["Escr"]), "l1_mpki": pd.to_numeric(gi["MPKI1"], errors="coerce"),
                       "l2_mpki": pd.to_numeric(gi["MPKI2"], errors="coerce"),
                       "l3_mpki": pd.to_numeric(gi["MPKI3"], errors="coerce")})
    ppath = d / f"{prefix}MPKI_APKI_CPI_Prefetch.csv"
    if ppath.exists():
        raw = read_csv(ppath, header=None, keep_default_na=False, dtype=str)
        top, sub = raw.iloc[0].tolist(), raw.iloc[1].tolist()
        cols, cur = [], ""
        for a, b in zip(top, sub):
            if isinstance(a, str) and a.strip():
                cur = a.strip()
            cols.append("input" if str(b).strip() == "Benchmark" else f"{cur}_{str(b).strip()}")
        pf = raw.iloc[2:].copy()
        pf.columns = cols
        for c in cols[1:]:
            pf[c] = pd.to_numeric(pf[c], errors="coerce")
        pf = pd.DataFrame({"input": pf["input"].astype(str), "llc_mpki": pf["MPKI_All"], "llc_apki": pf["APKI_All"],
                           "nopf_llc_mpki": pf["MPKI_None"], "nopf_llc_apki": pf["APKI_None"],
                           "pf_cpi_gain": pf["CPI_None"] - pf["CPI_All"]})
        df = df.merge(pf, on="input", how="left")
    bpath = d / f"{prefix}BW.csv"
    if bpath.exists():
        bw = read_csv(bpath, keep_default_na=False)
        df = df.merge(pd.DataFrame({"input": bw["Benchmark"].astype(str),
                                    "bw": pd.to_numeric(bw["All"], errors="coerce")}), on="input", how="left")
        df["bw_cpi"] = df["bw"] * df["cpi"]
        df = df.drop(columns="bw")
    df["benchmark"] = df["input"].str.replace(r"\.\d+$", "", regex=True)
    metrics = [c for c in METRICS if c in df.columns]
    out: dict[str, Signature] = {}
    for bench, g in df.groupby("benchmark", sort=True):
        w = g["instr"].to_numpy(float)
        if not np.all(np.isfinite(w)) or w.sum() <= 0:
            raise PerfcastError(f"benchmark {bench}: instruction counts missing", gpath)
        vals = {}
        for m in metrics:
            v = g[m].to_numpy(float)
            if np.all(np.isfinite(v)):
                vals[m] = float(np.dot(w, v) / w.sum())
        out[bench] = Signature(bench, vals, float(w.sum()), len(g), str(gpath))
    return out


def load_signature_csv(path: str | Path) -> dict[str, Signature]:
    """Tidy signatures ``name, metric, value``; metric ``instructions`` (1e9) is optional."""
    path = Path(path)
    df = read_csv(path)
    miss = [c for c in ("name", "metric", "value") if c not in df.columns]
    if miss:
        raise PerfcastError(f"missing column(s) {', '.join(miss)}; a signature table needs name, metric, value", path)
    out = {}
    for name, g in df.groupby("name", sort=False):
        vals = {}
        for i, r in g.iterrows():
            m, v = str(r["metric"]), pd.to_numeric(r["value"], errors="coerce")
            if m not in METRICS and m != "instructions":
                raise PerfcastError(f"unknown signature metric {m!r}; known: {', '.join(METRICS)}, instructions",
                                    path, int(i) + 2)
            if not np.isfinite(v):
                raise PerfcastError(f"value {r['value']!r} is not a number", path, int(i) + 2)
            vals[m] = float(v)
        ins = vals.pop("instructions", float("nan"))
        out[str(name)] = Signature(str(name), vals, ins, 1, str(path))
    return out


# -- from an Experiment ------------------------------------------------------------------------
#: raw counter -> accepted metric names (perf, PAPI, cachegrind, common Intel event names)
ALIASES: dict[str, tuple[str, ...]] = {
    "instructions": ("instructions", "Ir", "PAPI_TOT_INS", "inst_retired.any", "instructions:u", "INSTR_RETIRED_ANY"),
    "cycles": ("cycles", "cpu-cycles", "PAPI_TOT_CYC", "cpu_clk_unhalted.thread", "cycles:u",
               "CPU_CLK_UNHALTED_CORE"),
    "loads": ("loads", "Dr", "PAPI_LD_INS", "mem_inst_retired.all_loads", "L1-dcache-loads"),
    "stores": ("stores", "Dw", "PAPI_SR_INS", "mem_inst_retired.all_stores", "L1-dcache-stores"),
    "l1_misses": ("l1_misses", "PAPI_L1_DCM", "L1-dcache-load-misses", "D1mr+D1mw"),
    "l2_misses": ("l2_misses", "PAPI_L2_DCM", "PAPI_L2_TCM", "l2_rqsts.miss"),
    "l3_misses": ("l3_misses", "PAPI_L3_TCM", "LLC-load-misses", "longest_lat_cache.miss", "DLmr+DLmw"),
    # DRAM traffic of the whole job in bytes (byte units are converted by experiment_totals; perf's
    # named uncore events count in MiB) and the CPU time its cycles ran in: the bandwidth group
    "dram_bytes": ("dram_bytes", "uncore_imc/cas_count_read/+uncore_imc/cas_count_write/",
                   "unc_m_cas_count.rd+unc_m_cas_count.wr", "Memory data volume"),
    "cpu_seconds": ("task-clock", "cpu-clock", "cpu_seconds", "Runtime unhalted"),
}
#: byte units -> bytes
BYTE_UNITS = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "kib": 2.0 ** 10, "mb": 1e6, "mib": 2.0 ** 20,
              "gb": 1e9, "gib": 2.0 ** 30, "gbytes": 1e9, "mbytes": 1e6}
_DERIVED = {"cpi": ("cycles", 1.0), "load_frac": ("loads", 1.0), "store_frac": ("stores", 1.0),
            "l1_mpki": ("l1_misses", 1000.0), "l2_mpki": ("l2_misses", 1000.0), "l3_mpki": ("l3_misses", 1000.0)}


def experiment_totals(exp, point: Mapping[str, float] | None = None) -> dict[str, float]:
    """Whole-program totals per metric at one point (mean over repetitions, summed over ranks).

    Inclusive metrics are read at the roots of the calling-context tree, exclusive and flat ones
    summed over all callpaths.  A signature metric given ready (``cpi``, ``llc_mpki``, ... of
    :data:`METRICS`: a per-instruction ratio, e.g. made by ``perfcast metrics --derive``) is not a
    count and is not summed: its values over the callpaths and ranks are averaged, weighted by the
    instructions of the same callpath and rank when the experiment counts them (what the ratio of
    the summed counters would give), else equally.
    """
    sel = exp
    if exp.parameters:
        pts = exp.points()
        if point:
            sel = exp.select(**{k: v for k, v in point.items()})
        elif len(pts) != 1:
            raise PerfcastError(f"the experiment has {len(pts)} points; choose one with --at "
                                f"({', '.join(exp.parameters)})", where="--at")
    data = sel.reduce_locations("sum").aggregate("mean", over=("rep",))
    roots = set(sel.tree.roots())
    out = {}
    for name, m in sel.metrics.items():
        if name in METRICS:
            out[name] = _ratio_mean(sel, name, roots)
            continue
        d = data[data["metric"] == name]
        if m.scope == "inclusive":
            d = d[d["callpath"].astype(str).isin(roots)]
        out[name] = float(d["value"].sum()) * _unit_factor(sel, name)
    return out


def _unit_factor(exp, name: str) -> float:
    """Bytes per unit of a byte metric, seconds per unit of a time metric (the CPU seconds of the
    bandwidth group: ``task-clock`` in msec is 1e-3 s), else 1."""
    unit = str(exp.metrics[name].unit or "").strip().lower()
    if unit in BYTE_UNITS:
        return BYTE_UNITS[unit]
    if exp.metrics[name].kind == "time" and unit:
        from ..analysis.waste import time_factor

        try:
            return time_factor(exp, name)
        except PerfcastError:       # cycles and the like are not seconds
            return 1.0
    return 1.0


def _ratio_mean(sel, name: str, roots: set) -> float:
    """A ready per-instruction metric over the point's callpaths and ranks (:func:`experiment_totals`)."""
    per = sel.aggregate("mean", over=("rep",))
    keys = [c for c in per.columns if c not in ("metric", "value")]

    def rows(metric):
        d = per[per["metric"] == metric]
        if sel.metrics[metric].scope == "inclusive":
            d = d[d["callpath"].astype(str).isin(roots)]
        d = d[np.isfinite(d["value"].to_numpy(float))]
        return d.assign(callpath=d["callpath"].astype(str))[keys + ["value"]]

    d = rows(name)
    if d.empty:
        return float("nan")
    ins = next((a for a in ALIASES["instructions"] if a in sel.metrics
                and sel.metrics[a].scope == sel.metrics[name].scope), None)
    if ins is not None:
        w = d.merge(rows(ins), on=keys, how="left", suffixes=("", "_ins"))["value_ins"].to_numpy(float)
        if len(w) == len(d) and np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0:
            return float(np.dot(w, d["value"].to_numpy(float)) / w.sum())
    return float(d["value"].mean())


def signature_from_totals(totals: Mapping[str, float], name: str = "application", source: str = "") -> Signature:
    """Per-instruction signature from raw counter totals (names per :data:`ALIASES`) or ready metrics."""
    raw: dict[str, float] = {}
    for key, names in ALIASES.items():
        for n in names:
            if "+" in n:
                parts = n.split("+")
                if all(p in totals for p in parts):
                    raw[key] = float(sum(totals[p] for p in parts))
                    break
            elif n in totals:
                raw[key] = float(totals[n])
                break
    vals = {m: float(totals[m]) for m in METRICS if m in totals}
    ins = raw.get("instructions")
    if ins is not None and ins <= 0:
        raise PerfcastError("instruction count is zero", source or None)
    for m, (key, scale) in _DERIVED.items():
        if m not in vals and ins and key in raw:
            vals[m] = scale * raw[key] / ins
    # bw_cpi = DRAM GB/s x CPI of one copy = DRAM bytes per instruction x clock (GHz), the clock being
    # the cycles per second of CPU time
    if "bw_cpi" not in vals and ins and raw.get("dram_bytes") is not None and raw.get("cycles") \
            and raw.get("cpu_seconds"):
        vals["bw_cpi"] = 1e-9 * raw["dram_bytes"] / ins * raw["cycles"] / raw["cpu_seconds"]
    return Signature(name, vals, ins / 1e9 if ins else float("nan"), 1, source)


def signature_from_experiment(exp, point: Mapping[str, float] | None = None, name: str = "application",
                              source: str = "") -> Signature:
    return signature_from_totals(experiment_totals(exp, point), name, source)

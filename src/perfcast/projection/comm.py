"""Communication projection from MPI micro-benchmark tables (Sharkawi Sec. 4, Eq 14-21).

Micro-benchmark table (tidy, one row per measurement)::

    system, routine, nprocs, bytes, time_us

``time_us`` = time of one call in microseconds (IMB t / t_avg, OSU latency).  ``routine`` names
the operation (``PingPong``, ``Allreduce``, ``Allgather``, ``Alltoall``, ...).  Loaders read the
archer-benchmarks IMB CSV, the stackhpc hpc-tests IMB/OSU CSV and user CSVs in this form.

Interpolation (stated in every result): in message size, time is interpolated linearly in
log(time) against log2(bytes) between tabulated sizes (0 bytes uses the 0-byte row, or the
smallest size); above the largest size it is extrapolated linearly in bytes with the last
segment's per-byte cost (the bandwidth term).  In process count, log(time) is interpolated
linearly in log2(p) between tabulated counts and held at the nearest count outside them (noted).

Projection per MPI routine r of the application's profile at process count p (calls N, average
message size m = max(bytes sent, bytes received) / N, elapsed time E on the base):

* Eq 17  transfer_base = N x T_base(r, m, p),  wait_base = E - transfer_base
* Eq 19  transfer_target = N x T_target(r, m, p)
* when the table's N x T_base exceeds the measured E (the run's calls were faster than the table's,
  e.g. within one node against a table of many nodes), both transfers are scaled by
  E / (N x T_base): the base's transfer is then its measured E (no wait), the target's E x
  T_target/T_base -- the table's ratio, never its absolute time, so that base and target on the
  same table give back E; noted
* Eq 20  SF_r = (w_r SF_comm,r + w_comp SF_comp) / (w_r + w_comp), with SF_comm,r =
  T_target/T_base at (m, p), w = shares of the base elapsed time (normalised so SF_r is a
  weighted mean -- the seed's form without the normalisation shrinks SF when w_r + w_comp < 1)
* Eq 21  wait_target = SF_r x wait_base;  elapsed_target = transfer_target + wait_target.

MPI routines map to table routines by :data:`ROUTINE_MAP`; a routine without a table is scaled
by the compute scaling factor and noted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import PerfcastError
from .database import read_csv

INTERPOLATION = ("log(time) linear in log2(bytes) between tabulated sizes, linear in bytes above the largest; "
                 "log(time) linear in log2(p) between tabulated process counts, nearest count outside")

#: MPI routine (as named by the PMPI reader, without ``MPI_``) -> table routines to try, in order
ROUTINE_MAP: dict[str, tuple[str, ...]] = {
    "Send": ("PingPong", "latency"), "Isend": ("PingPong", "latency"), "Recv": ("PingPong", "latency"),
    "Irecv": ("PingPong", "latency"), "Ssend": ("PingPong", "latency"), "Bsend": ("PingPong", "latency"),
    "Rsend": ("PingPong", "latency"), "Sendrecv": ("Sendrecv", "PingPong", "latency"),
    "Allreduce": ("Allreduce",), "Reduce": ("Reduce", "Allreduce"), "Bcast": ("Bcast",),
    "Allgather": ("Allgather",), "Allgatherv": ("Allgatherv", "Allgather"), "Alltoall": ("Alltoall",),
    "Alltoallv": ("Alltoallv", "Alltoall"), "Barrier": ("Barrier",),
    # Isend/Irecv + Wait* merged by mpimodel.combine_nonblocking: Sharkawi's multi-Sendrecv, x = 1
    "Isend/Irecv+Wait": ("Sendrecv", "PingPong", "latency"),
}


@dataclass(frozen=True)
class MicroTable:
    """Micro-benchmark times ``system, routine, nprocs, bytes, time_us``."""

    data: pd.DataFrame
    source: str = ""

    @property
    def systems(self) -> list[str]:
        return sorted(self.data["system"].unique())

    def routines(self, system: str) -> list[str]:
        return sorted(self.data.loc[self.data["system"] == system, "routine"].unique())

    def resolve(self, query: str) -> str:
        q = query.strip().lower()
        exact = [s for s in self.systems if s.lower() == q]
        if exact:
            return exact[0]
        words = q.split()
        hits = [s for s in self.systems if all(w in s.lower() for w in words)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise PerfcastError(f"no micro-benchmark system matches {query!r}; systems: {', '.join(self.systems)}",
                                where="system")
        raise PerfcastError(f"{query!r} is ambiguous: {len(hits)} micro-benchmark systems match "
                            f"({', '.join(hits[:8])}{', ...' if len(hits) > 8 else ''})", where="system")

    def time(self, system: str, routine: str, nbytes: float, nprocs: float) -> tuple[float, list[str]]:
        """Interpolated time of one call (microseconds) and notes on extrapolation."""
        d = self.data[(self.data["system"] == system) & (self.data["routine"] == routine)]
        if d.empty:
            raise PerfcastError(f"no {routine} results for system {system!r}; it has: "
                                f"{', '.join(self.routines(system)) or 'nothing'}")
        notes: list[str] = []
        ps = np.sort(d["nprocs"].unique())
        if nprocs <= ps[0] or nprocs >= ps[-1] or nprocs in ps:
            near = ps[np.argmin(np.abs(np.log2(ps) - math.log2(max(nprocs, 1))))]
            if near != nprocs:
                notes.append(f"{routine} on {system}: p={nprocs:g} outside tabulated {ps[0]:g}..{ps[-1]:g}, "
                             f"used p={near:g}")
            return _size_interp(d[d["nprocs"] == near], nbytes, notes, f"{routine} on {system}"), notes
        hi = np.searchsorted(ps, nprocs)
        p0, p1 = ps[hi - 1], ps[hi]
        t0 = _size_interp(d[d["nprocs"] == p0], nbytes, notes, f"{routine} on {system}")
        t1 = _size_interp(d[d["nprocs"] == p1], nbytes, notes, f"{routine} on {system}")
        f = (math.log2(nprocs) - math.log2(p0)) / (math.log2(p1) - math.log2(p0))
        return float(math.exp((1 - f) * math.log(t0) + f * math.log(t1))), notes


def _size_interp(d: pd.DataFrame, nbytes: float, notes: list, what: str) -> float:
    g = d.groupby("bytes")["time_us"].mean()
    g = g[g > 0]
    if g.empty:
        raise PerfcastError(f"{what}: no positive times")
    b, t = g.index.to_numpy(float), g.to_numpy(float)
    if nbytes <= 0:
        return float(t[0])
    pos = b > 0
    bp, tp = b[pos], t[pos]
    if len(bp) == 0:
        return float(t[0])
    if nbytes <= bp[0]:
        return float(tp[0])
    if nbytes >= bp[-1]:
        if len(bp) == 1:
            return float(tp[-1])
        slope = max((tp[-1] - tp[-2]) / (bp[-1] - bp[-2]), 0.0)
        if nbytes > bp[-1]:
            notes.append(f"{what}: {nbytes:g} B above the largest tabulated {bp[-1]:g} B, extrapolated linearly")
        return float(tp[-1] + slope * (nbytes - bp[-1]))
    return float(np.exp(np.interp(math.log2(nbytes), np.log2(bp), np.log(tp))))


# -- loaders ----------------------------------------------------------------------------------
def _read(path) -> pd.DataFrame:
    return read_csv(path)


def load_micro(path: str | Path) -> MicroTable:
    """Any of the three forms (sniffed by columns): user tidy, archer IMB, stackhpc IMB/OSU."""
    df = _read(path)
    cols = set(df.columns)
    if {"system", "routine", "nprocs", "bytes", "time_us"} <= cols:
        out = df[["system", "routine", "nprocs", "bytes", "time_us"]].copy()
    elif {"config", "benchmark", "nprocs", "bytes", "t_avg[usec]", "t[usec]"} <= cols:
        t = df["t_avg[usec]"].where(df["t_avg[usec]"].notna(), df["t[usec]"])
        out = pd.DataFrame({"system": df["config"].astype(str), "routine": df["benchmark"].astype(str),
                            "nprocs": df["nprocs"], "bytes": df["bytes"], "time_us": t})
    elif {"system", "partition", "test", "ntasks", "bytes", "metric1", "value1"} <= cols:
        rows = []
        for test, routine in (("IMB_PingPong", "PingPong"), ("Osu_latency", "latency"),
                              ("Osu_allreduce", "Allreduce"), ("Osu_allgather", "Allgather"),
                              ("Osu_alltoall", "Alltoall")):
            s = df[df["test"] == test]
            if s.empty:
                continue
            if test == "IMB_PingPong" and not (s["metric1"] == "t_usec").all():
                raise PerfcastError("IMB_PingPong rows without t_usec", path)
            # PingPong/latency are 2-rank tests whatever the job size
            npr = 2 if test in ("IMB_PingPong", "Osu_latency") else s["ntasks"]
            rows.append(pd.DataFrame({"system": s["system"].astype(str) + "/" + s["partition"].astype(str),
                                      "routine": routine, "nprocs": npr, "bytes": s["bytes"],
                                      "time_us": s["value1"]}))
        if not rows:
            raise PerfcastError("no latency-type tests (IMB_PingPong, Osu_latency, Osu_allreduce, ...)", path)
        out = pd.concat(rows, ignore_index=True)
    else:
        raise PerfcastError("not a micro-benchmark table: need columns system, routine, nprocs, bytes, time_us "
                            "(or the archer IMB / stackhpc hpc-tests layouts)", path)
    for c in ("nprocs", "bytes", "time_us"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    bad = out[["nprocs", "bytes", "time_us"]].isna().any(axis=1) | (out["time_us"] < 0) | (out["nprocs"] < 1)
    if bad.all():
        raise PerfcastError("no usable rows", path)
    if {"system", "routine", "nprocs", "bytes", "time_us"} <= cols and bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise PerfcastError("nprocs, bytes and time_us must be numbers (time >= 0, nprocs >= 1)", path, i + 2)
    return MicroTable(out[~bad].reset_index(drop=True), str(path))


# -- projection -------------------------------------------------------------------------------
@dataclass
class RoutineProfile:
    """One MPI routine on the base at one process count (per rank averages)."""

    routine: str
    calls: float
    bytes: float       # average message size per call
    elapsed: float     # seconds


@dataclass
class CommProjection:
    rows: list[dict]
    transfer_base: float
    wait_base: float
    elapsed_base: float
    elapsed_target: float
    notes: list[str] = field(default_factory=list)
    interpolation: str = INTERPOLATION

    def to_dict(self) -> dict:
        return {"routines": self.rows, "elapsed_base": self.elapsed_base, "elapsed_target": self.elapsed_target,
                "transfer_base": self.transfer_base, "wait_base": self.wait_base, "notes": self.notes,
                "interpolation": self.interpolation}


def _table_routine(table: MicroTable, system: str, routine: str) -> str | None:
    have = set(table.routines(system))
    for r in ROUTINE_MAP.get(routine, (routine,)):
        if r in have:
            return r
    return None


def project_comm(profile: Sequence[RoutineProfile], nprocs: float, table: MicroTable, base: str, target: str,
                 compute_base: float, sf_comp: float, target_table: MicroTable | None = None) -> CommProjection:
    """Eq 17-21 for every routine of ``profile`` (see module doc); times in seconds."""
    ttable = target_table or table
    elapsed_total = compute_base + sum(r.elapsed for r in profile)
    if elapsed_total <= 0:
        raise PerfcastError("the base profile has no time")
    w_comp = compute_base / elapsed_total
    rows, notes = [], []
    tb = wb = eb = et = 0.0
    for r in profile:
        if r.calls <= 0 or r.elapsed < 0:
            continue
        rb, rt = _table_routine(table, base, r.routine), _table_routine(ttable, target, r.routine)
        w_r = r.elapsed / elapsed_total
        if rb is None or rt is None:
            missing = base if rb is None else target
            notes.append(f"{r.routine}: no micro-benchmark on {missing}; scaled by the compute factor")
            e_t = r.elapsed * sf_comp
            rows.append({"routine": r.routine, "calls": r.calls, "bytes": r.bytes, "elapsed_base": r.elapsed,
                         "transfer_base": None, "wait_base": None, "transfer_target": None,
                         "wait_target": None, "elapsed_target": e_t, "table": None})
            eb += r.elapsed
            et += e_t
            continue
        p_b, n1 = table.time(base, rb, r.bytes, nprocs)
        p_t, n2 = ttable.time(target, rt, r.bytes, nprocs)
        notes += [n for n in n1 + n2 if n not in notes]
        trans_b = r.calls * p_b * 1e-6
        trans_t = r.calls * p_t * 1e-6
        if trans_b > r.elapsed:
            # the table's transfer alone exceeds what the run measured: keep the table's ratio only
            k = r.elapsed / trans_b
            notes.append(f"{r.routine}: the micro-benchmark's transfer time on {base} ({trans_b:.4g} s for "
                         f"{r.calls:g} calls) exceeds the measured {r.elapsed:.4g} s; both transfers scaled by "
                         f"{k:.3g} (the base's time is all transfer, the target's is it x the table's ratio)")
            trans_b, trans_t = r.elapsed, trans_t * k
        wait_b = r.elapsed - trans_b
        sf_comm = p_t / p_b if p_b > 0 else 1.0
        sf = (w_r * sf_comm + w_comp * sf_comp) / (w_r + w_comp) if (w_r + w_comp) > 0 else sf_comm
        wait_t = sf * wait_b
        rows.append({"routine": r.routine, "calls": r.calls, "bytes": r.bytes, "elapsed_base": r.elapsed,
                     "transfer_base": trans_b, "wait_base": wait_b, "transfer_target": trans_t,
                     "wait_target": wait_t, "elapsed_target": trans_t + wait_t, "table": rb,
                     "sf_comm": sf_comm, "sf_wait": sf})
        tb += trans_b
        wb += wait_b
        eb += r.elapsed
        et += trans_t + wait_t
    return CommProjection(rows, tb, wb, eb, et, notes)


def profile_from_experiment(exp, point: Mapping[str, float] | None = None) -> tuple[list[RoutineProfile], float, float]:
    """Per-routine profile (per-rank averages), compute time (``APP``) and process count from a PMPI
    Experiment at ``point`` -- measured, or from the Eq 14-16 models (see :mod:`.mpimodel`) -- with
    non-blocking point-to-point calls merged into one multi-Sendrecv entry."""
    from .mpimodel import combine_nonblocking, profile_at

    prof, compute, p, _, _ = profile_at(exp, point)
    prof, _ = combine_nonblocking(prof)
    return [RoutineProfile(r, v["calls"], v["bytes"], v["elapsed"]) for r, v in sorted(prof.items())], compute, p

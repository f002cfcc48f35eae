"""MPI profiles on the base per process count, and Sharkawi's Eq 14-16 models of them.

Profile (per MPI routine r at process count p, averages per rank = sum over ranks / the ranks that
reported, p unless a run's profile lacks ranks, which is noted):
calls N_r(p), message size S_r(p) = max(bytes sent, bytes received) / N_r(p), elapsed time
E_r(p); plus the compute time C(p) = time outside MPI (PMPI's ``APP`` callpath).  The PMPI
reader's layout is used: callpaths ``MPI->MPI_Xxx`` and ``APP``, metrics ``calls``,
``bytes_sent``, ``bytes_recv`` and the time metric (``pmpi_time`` in a ``perfcast collect``
campaign, ``time`` in a profile read alone), one row per rank.

Eq 14-16 (seed lines 3080-3120): S_r(C_j) = alpha_r S_r(C_1), N_r(C_j) = beta_r N_r(C_1), where
alpha and beta are "constants or fitted functions".  Here each of N_r(p), S_r(p), E_r(p) and
C(p) is fitted by the PMNF modeler (:func:`perfcast.fit.fit_series`, one term, exponents incl.
negative ones for strong scaling, non-negative coefficients, leave-one-point-out selection
because only a few counts are measured; calls and message sizes in the space p^i log2(p)^j,
|i| <= 1, j <= 1) over the measured process counts at which the routine is called (repetitions
as replicates); a routine measured at one count only gets a constant
(alpha = beta = 1), as the seed allows.  When the runs recorded the Cartesian process grid their
code built (:func:`perfcast.fit.grid.experiment_grid`), a routine's noise-free calls and volume
per rank are modelled in the grid's covariates where those pass through every measured count
(:func:`perfcast.fit.grid.fit_grid`), and its message size is their ratio: a halo's average face
is no power law in p (jacobi's 256^2 grid at p = 64, 8 x 8: 256 bytes per Isend, where the power
law fitted on p = 2..16 said 394); a note says so at the point.  Every model is returned with its formula so the
projection can state what it used.  Models are evaluated only at a process count that was not
measured; at a measured count the measured means are used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import PerfcastError

#: non-blocking point-to-point calls and their completions: projected together as Sharkawi's
#: multi-Sendrecv with x = 1 (seed lines 3406-3416)
NB_SEND = ("Isend", "Issend", "Ibsend", "Irsend")
NB_RECV = ("Irecv",)
NB_COMPLETE = ("Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome")
NB_GROUP = "Isend/Irecv+Wait"
#: hypothesis space for per-rank call counts and message sizes: p^i log2(p)^j with |i| <= 1, j <= 1
#: (per-rank traffic grows at most like an all-to-all's, ~p; strong scaling shrinks it like 1/p)
VOLUME_SPACE = tuple((e, j) for e in ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1") for j in (0, 1))
SKIP = ("Init", "Init_thread", "Finalize")


def time_metric(exp) -> str:
    names = set(exp.metrics)
    tm = "pmpi_time" if "pmpi_time" in names else "time"
    if not {"calls", tm} <= names or not any(str(c).startswith("MPI->") for c in exp.callpaths):
        raise PerfcastError("the experiment has no MPI profile (callpaths MPI->MPI_*, metrics calls and "
                            "pmpi_time or time from the PMPI reader)")
    return tm


def process_param(exp) -> str | None:
    """The parameter counting processes, or None for an experiment without one."""
    if not exp.parameters:
        return None
    from ..analysis.scaling_loss import process_parameter
    return process_parameter(exp)


@dataclass
class MPIProfiles:
    """Per-rank averages per (process count, repetition): ``table`` columns
    ``p, rep, routine, calls, bytes, elapsed`` (routine ``APP`` = compute, calls/bytes 0)."""

    table: pd.DataFrame
    param: str | None
    fixed: dict = field(default_factory=dict)   # other parameters held at these values
    time_metric: str = "time"
    notes: list = field(default_factory=list)   # e.g. runs lacking ranks
    #: the process grid the runs recorded (perfcast.fit.grid.Grid over ``param``), or None
    grid: object = None

    @property
    def counts(self) -> list[float]:
        return sorted(self.table["p"].unique())

    def routines(self) -> list[str]:
        return sorted(r for r in self.table["routine"].unique() if r != "APP")

    def measured(self, p: float) -> dict[str, dict[str, float]]:
        """Means over repetitions at a measured count: routine -> {calls, bytes, elapsed}."""
        d = self.table[self.table["p"] == p]
        g = d.groupby("routine")[["calls", "bytes", "elapsed"]].mean()
        return {r: {k: float(v) for k, v in row.items()} for r, row in g.iterrows()}


def mpi_profiles(exp, point: Mapping[str, float] | None = None) -> MPIProfiles:
    """Per-rank average profile at every measured process count (other parameters fixed by ``point``)."""
    tm = time_metric(exp)
    unknown = [k for k in (point or {}) if k not in exp.parameters]
    if unknown:
        raise PerfcastError(f"no parameter {unknown[0]!r}; the experiment has: {', '.join(exp.parameters) or '(none)'}",
                            where="--at")
    param = process_param(exp)
    fixed = {}
    sel = exp
    if param is not None:
        others = [q for q in exp.parameters if q != param]
        pts = exp.points()
        for q in others:
            if point and q in point:
                if float(point[q]) not in set(pts[q].astype(float)):
                    raise PerfcastError(f"{q}={point[q]:g} was not measured (measured: "
                                        f"{', '.join(f'{v:g}' for v in sorted(pts[q].unique()))}); the MPI models "
                                        f"are in {param} only", where="--at")
                fixed[q] = float(point[q])
            elif pts[q].nunique() > 1:
                raise PerfcastError(f"the experiment varies {q} too; fix it with --at {q}=V", where="--at")
        if fixed:
            sel = exp.select(**fixed)
    d = sel.data
    d = d[d["metric"].isin(["calls", "bytes_sent", "bytes_recv", tm])]
    cp = d["callpath"].astype(str)
    d = d[cp.str.startswith("MPI->") | (cp == "APP")].copy()
    d["callpath"] = d["callpath"].astype(str)
    if d.empty:
        raise PerfcastError("the MPI profile is empty")
    keys = ([param] if param else []) + (["rep"] if "rep" in d.columns else [])
    if "rep" not in d.columns:
        d["rep"] = 0
        keys = ([param] if param else []) + ["rep"]
    if param is None:
        d["_p"] = float(d["rank"].nunique()) if "rank" in d.columns else float(
            (exp.meta.get("pmpi", {}) or {}).get("size", 1) or 1)
    else:
        d["_p"] = d[param].astype(float)
    # per-rank averages over the ranks that reported: a rank absent from a run's profile (a lost
    # output) is not a rank that made no calls and spent no time
    notes = []
    if param is not None and "rank" in d.columns:
        d["_n"] = d.groupby(keys, observed=True)["rank"].transform("nunique").astype(float)
        short = d.loc[d["_n"] < d["_p"], keys + ["_p", "_n"]].drop_duplicates()
        if len(short):
            r0 = short.iloc[0]
            notes.append(f"{len(short)} run(s) of the MPI profile lack ranks (e.g. {param}={r0['_p']:g}: "
                         f"{r0['_n']:g} of {r0['_p']:g} ranks reported): per-rank averages over the ranks present")
    else:
        d["_n"] = d["_p"]
    summed = d.groupby(keys + ["_p", "_n", "callpath", "metric"], observed=True)["value"].sum().unstack("metric")
    summed = summed.reindex(columns=["calls", "bytes_sent", "bytes_recv", tm]).fillna(0.0).reset_index()
    rows = []
    for _, r in summed.iterrows():
        n = float(r["_n"])
        path = r["callpath"]
        routine = "APP" if path == "APP" else path.split("->", 1)[1].removeprefix("MPI_")
        if routine in SKIP:
            continue
        calls = float(r["calls"]) / n
        nbytes = max(float(r["bytes_sent"]), float(r["bytes_recv"])) / n
        rows.append({"p": float(r["_p"]), "rep": r["rep"], "routine": routine, "calls": calls,
                     "bytes": nbytes / calls if calls > 0 else 0.0, "elapsed": float(r[tm]) / n,
                     "bytes_sent": float(r["bytes_sent"]) / n, "bytes_recv": float(r["bytes_recv"]) / n})
    t = pd.DataFrame(rows)
    if t.empty or not (t["routine"] == "APP").any():
        raise PerfcastError("the MPI profile has no APP time (compute time outside MPI)")
    t = t[(t["routine"] == "APP") | (t["calls"] > 0)].reset_index(drop=True)
    grid = None
    if param is not None:
        from ..fit.grid import experiment_grid

        grid = experiment_grid(exp)[0]
        if grid is not None and grid.parameter != param:
            grid = None
    return MPIProfiles(t, param, fixed, tm, notes, grid)


@dataclass
class SeriesFit:
    what: str           # "calls", "bytes", "elapsed"
    routine: str
    formula: str
    points: list[float]
    model: object = None    # perfcast.fit.Model, or None for a constant
    constant: float = float("nan")

    def __call__(self, p: float) -> float:
        if self.model is None:
            return self.constant
        return float(self.model.predict({"p": p}))

    def grid_note(self, p: float) -> str | None:
        """Where this quantity comes from the process grid at ``p``: which dims and rule."""
        grids = [m for m in ((self.model,) if not isinstance(self.model, Ratio) else
                             (self.model.num, self.model.den)) if getattr(m, "grid", None) is not None]
        if not grids:
            return None
        g = grids[0].grid
        return (f"{self.routine} {self.what}: on the process grid the runs recorded -- dims = MPI_Dims_create(p, "
                f"{g.ndims}), {g.rule} rule: {g.describe(p)} at p={p:g} ({self.formula})")

    def to_dict(self) -> dict:
        return {"routine": self.routine, "quantity": self.what, "model": self.formula,
                "fitted_on": [float(x) for x in self.points]}


@dataclass(frozen=True)
class PerRank:
    """A per-rank mean as a model of the sum over ranks divided by the process count ``p``."""

    total: object

    @property
    def grid(self):
        return getattr(self.total, "grid", None)

    def predict(self, at):
        return np.asarray(self.total.predict(at), dtype=float) / np.asarray(at["p"], dtype=float)

    def formula(self) -> str:
        return f"({self.total.formula()}) / p"


@dataclass(frozen=True)
class Ratio:
    """A message size as the ratio of two models of the process grid: volume / calls per rank."""

    num: object
    den: object

    def predict(self, at):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.num.predict(at), dtype=float) / np.asarray(self.den.predict(at), dtype=float)


def _fit(routine: str, what: str, g: pd.DataFrame, col: str, grid=None, absent=()) -> SeriesFit:
    """The PMNF model of ``col`` over the process counts (Eq 14-16); with a recorded ``grid``, a
    noise-free count no PMNF function passes through (or that a grid covariate passes through as
    well, parting from it beyond) is modelled on the grid (:func:`perfcast.fit.grid.fit_grid`),
    which also sees the zero count at the measured process counts ``absent`` where the routine was
    not called (a rank without neighbours: p = 1) -- the PMNF law does not (a zero pins it)."""
    from .. import fit

    by = g.groupby("p")[col]
    xs = sorted(by.groups)
    if len(xs) == 1:
        c = float(by.mean().iloc[0])
        return SeriesFit(what, routine, f"{c:.4g} (constant: measured at p={xs[0]:g} only)", xs, None, c)
    vals = [by.get_group(x).to_numpy(float) for x in xs]
    if all(np.allclose(v, vals[0][0], rtol=1e-9, atol=0) for v in vals):
        c = float(vals[0][0])
        return SeriesFit(what, routine, f"{c:.6g} (constant)", xs, None, c)
    opts = fit.FitOptions(negative=True, nonnegative=True, selection="cv",
                          space=VOLUME_SPACE if what in ("calls", "bytes") else fit.core.DEFAULT_SPACE)
    m = fit.fit_series(xs, vals, ("p",), opts)
    if grid is not None:
        from dataclasses import replace

        from ..fit.grid import fit_grid

        gx = sorted([*xs, *absent])
        gvals = [vals[xs.index(x)] if x in xs else np.zeros(1) for x in gx]
        mean = np.array([v.mean() for v in gvals])
        ssd = np.array([float(((v - v.mean()) ** 2).sum()) for v in gvals])
        # the sum over the ranks (the per-rank mean times p): its grid covariates take more distinct
        # values than the per-rank ones (jacobi's halo bytes: cuts(p) = 0, 1, 2, 4, 6 at p = 1..16,
        # cuts(p)/p = 0, 0.5, 0.5, 0.5, 0.375 -- too few to check a law on, fit_grid's held-out point)
        gp = np.array(gx, dtype=float)
        on_grid = fit_grid(gp[:, None], mean * gp, np.array([float(len(v)) for v in gvals]), ssd * gp ** 2,
                           ("p",), replace(grid, parameter="p"), opts)
        if on_grid is not None:
            per = PerRank(on_grid)
            return SeriesFit(what, routine, per.formula(), gx, per)
    return SeriesFit(what, routine, m.formula(), xs, m)


@dataclass
class ProfileModels:
    """Eq 14-16 models per routine (calls, message size, elapsed) and the compute time model."""

    fits: dict[str, dict[str, SeriesFit]]
    compute: SeriesFit
    param: str | None

    def at(self, p: float) -> tuple[dict[str, dict[str, float]], float, list[str]]:
        """Modelled profile at ``p``: routine -> {calls, bytes, elapsed}, compute time, notes."""
        prof, notes = {}, []
        for r, f in self.fits.items():
            on_grid = {k: n for k in ("calls", "bytes") if (n := f[k].grid_note(p)) is not None}
            notes += list(on_grid.values())
            v = {k: f[k](p) for k in ("calls", "bytes", "elapsed")}
            for k in on_grid:
                if not np.isfinite(v[k]):
                    raise PerfcastError(f"{r} {k}: modelled on the process grid, which has a whole number of "
                                        f"processes, not p={p:g}", where="--at")
            for k in ("calls", "bytes", "elapsed"):
                if not np.isfinite(v[k]) or v[k] < 0:
                    notes.append(f"{r}: modelled {k} {v[k]:.4g} at p={p:g} is negative; clipped to 0")
                    v[k] = max(v[k], 0.0) if np.isfinite(v[k]) else 0.0
            prof[r] = v
        c = self.compute(p)
        if not np.isfinite(c) or c < 0:
            notes.append(f"compute: modelled time {c:.4g} at p={p:g} is negative; clipped to 0")
            c = 0.0
        return prof, float(c), notes

    def to_list(self) -> list[dict]:
        out = [f.to_dict() for fs in self.fits.values() for f in fs.values()]
        return out + [self.compute.to_dict()]


def fit_profile_models(prof: MPIProfiles) -> ProfileModels:
    """Eq 14-16 with the modeler (module doc)."""
    t = prof.table
    fits = {}
    grid = prof.grid
    for r in prof.routines():
        g = t[t["routine"] == r]
        absent = [p for p in prof.counts if p not in set(g["p"])]
        calls = _fit(r, "calls", g, "calls", grid, absent)
        size = _fit(r, "bytes", g, "bytes")
        if isinstance(calls.model, PerRank):
            # the message size is the ratio of two counts of the grid (a halo's faces over its
            # neighbours), no covariate itself: volume per rank on the grid, divided by the calls
            vol = _fit(r, "volume", g.assign(volume=g["calls"] * g["bytes"]), "volume", grid, absent)
            if isinstance(vol.model, PerRank):
                size = SeriesFit("bytes", r, f"{vol.model.total.formula()} / ({calls.model.total.formula()})",
                                 vol.points, Ratio(vol.model, calls.model))
        fits[r] = {"calls": calls, "bytes": size, "elapsed": _fit(r, "elapsed", g, "elapsed")}
    comp = _fit("APP", "compute", t[t["routine"] == "APP"], "elapsed")
    return ProfileModels(fits, comp, prof.param)


def combine_nonblocking(prof: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Merge Isend/Irecv and their Wait*/Test* completions into one multi-Sendrecv (x = 1) entry:
    calls = the sends (else the receives), message size = their bytes per call, elapsed = the sum."""
    sends = [r for r in NB_SEND if r in prof and prof[r]["calls"] > 0]
    recvs = [r for r in NB_RECV if r in prof and prof[r]["calls"] > 0]
    if not sends and not recvs:
        return {r: dict(v) for r, v in prof.items()}, []
    members = sends + recvs + [r for r in NB_COMPLETE if r in prof]
    src = sends or recvs
    calls = sum(prof[r]["calls"] for r in src)
    nbytes = sum(prof[r]["calls"] * prof[r]["bytes"] for r in src) / calls if calls > 0 else 0.0
    out = {r: dict(v) for r, v in prof.items() if r not in members}
    out[NB_GROUP] = {"calls": calls, "bytes": nbytes, "elapsed": sum(prof[r]["elapsed"] for r in members)}
    return out, [f"{', '.join(members)} projected together as one exchange per "
                 f"{'send' if sends else 'receive'} (Sharkawi's multi-Sendrecv with x = 1)"]


def profile_at(exp, point: Mapping[str, float] | None = None):
    """(profile routine -> {calls, bytes, elapsed}, compute time, process count, models or None, notes).

    At a measured process count the measured means (and no models: none is used, so none is fitted
    or shown next to values it did not give); otherwise the Eq 14-16 models.
    """
    prof = mpi_profiles(exp, point)
    counts = prof.counts
    notes = list(prof.notes)
    if prof.param is None:
        p = counts[0]
        if point:
            raise PerfcastError("the experiment has no parameters; drop --at", where="--at")
    elif point is None or prof.param not in point:
        if len(counts) != 1:
            raise PerfcastError(f"the experiment has {len(counts)} process counts "
                                f"({', '.join(f'{c:g}' for c in counts)}); choose one with --at "
                                f"{prof.param}=N", where="--at")
        p = counts[0]
    else:
        p = float(point[prof.param])
        if not p >= 1 or not math.isfinite(p):
            raise PerfcastError(f"{prof.param} must be a process count >= 1, not {p:g}", where="--at")
    if p in counts:
        m = prof.measured(p)
        comp = m.pop("APP")["elapsed"]
        return m, comp, p, None, notes
    models = fit_profile_models(prof) if len(counts) > 1 else None
    if models is None:
        raise PerfcastError(f"{prof.param}={p:g} was not measured and one process count is too few to model "
                            f"(measured: {', '.join(f'{c:g}' for c in counts)})", where="--at")
    prof_p, comp, n = models.at(p)
    notes += n
    if p > max(counts) or p < min(counts):
        notes.append(f"{prof.param}={p:g} is outside the measured {min(counts):g}..{max(counts):g}: "
                     f"the MPI profile and compute time are extrapolated with the Eq 14-16 models")
    else:
        notes.append(f"{prof.param}={p:g} was not measured: the MPI profile and compute time come from the "
                     f"Eq 14-16 models")
    return prof_p, comp, p, models, notes

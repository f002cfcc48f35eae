"""Communication model from PMPI profiles (APMT, seed 000; methods.md §1).

Input: an experiment holding the PMPI reader's callpaths ``MPI-><routine>`` with per-rank metrics
``time`` (or ``pmpi_time`` when a campaign renamed it), ``calls`` and ``bytes`` (sent + received).

* Point-to-point (Send/Recv/Isend/Irecv/Sendrecv and the Wait/Test calls where their time lands):
  the Hockney model.  One observation per rank and run: ``t = a * s_tot + b * n_msg`` with ``s_tot``
  the bytes a rank moved (sent + received) and ``n_msg`` its messages (sends + receives;
  Sendrecv counts two) -- ``a`` is the inverse bandwidth, ``b`` the latency per message.  APMT
  writes ``t = a * s_tot + b`` with a constant ``b`` (a fixed message count); ``form="apmt"`` fits
  exactly that.  Coefficients are non-negative least squares; when every fitted observation has one
  bytes-per-message ratio (one message size: e.g. only p = 2 within the cores) ``a`` and ``b`` cannot
  be told apart -- the split found is one of many, said in a note and ``separable`` False.  ``s_tot`` and ``n_msg`` of the
  critical rank (``ranks="max"``, default; ``"mean"`` for the average rank) are modelled as functions
  of the parameters with the PMNF modeler.  A rank that moved no point-to-point message in a run
  (e.g. the single rank at p = 1) is an observation of zero bytes and zero messages for these
  models, and at a process count where no rank of any profiled run sent or received a message the
  prediction is exactly zero (no message, no time) instead of an extrapolated fit -- such a count is
  left out of the volume and message fits (its zero would pin their laws to 0 there).
* Process grids: when the runs recorded the Cartesian grid their code built (the PMPI library's
  record of MPI_Cart_create, :func:`perfcast.fit.grid.experiment_grid`), the noise-free volume,
  message and call counts are modelled in the covariates of the dims MPI_Dims_create gives at each
  process count (:func:`perfcast.fit.grid.fit_grid`: e.g. ``2.048e5 * maxface(p)``, the busiest
  rank's faces, for jacobi's 256^2 halo) -- the grid's model also where a smooth law passes through
  the measured counts by coincidence (``log2(p)`` neighbours at p = 2..16 on a 2-D grid); the
  prediction says so (:meth:`perfcast.apmt.model.APMTModel.predict`'s notes).  Without a record
  (a code without a Cartesian topology, or a store collected before the record existed) they are
  smooth PMNF laws in ``p``, and a note says why.
* Collectives, per routine: per call ``t = a * log2(p) + b * s + c`` with ``s`` the average bytes
  a rank sends per call (``bytes_sent``; half of ``bytes`` when only the sum is known); calls per rank and ``s`` are PMNF models.  A regressor that does not vary over the
  profiled runs (e.g. a fixed 8-byte Allreduce) cannot be separated from ``c``: it is dropped and
  the model says so.
* ``BF_comm`` (overlap of communication with computation) is 1 -- bulk-synchronous -- unless the
  caller measured it.

Larger problems (APMT): ``size_ratio`` scales the communication volume, ``t = a * ratio * s + b``
and ``a * log2(p) + b * ratio * s + c``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from .. import fit
from ..errors import PerfcastError
from ..experiment import Experiment

P2P = re.compile(r"^MPI_(I?[sbr]?send|Send|I?recv|Recv|Sendrecv(_replace)?|Ssend|Bsend|Rsend|Issend|Ibsend|Irsend|"
                 r"Wait(all|any|some)?|Test(all|any|some)?|Probe|Iprobe|Mprobe|Improbe|Mrecv|Imrecv|Start(all)?|"
                 r"Send_init|Recv_init)$", re.IGNORECASE)
SEND = re.compile(r"^MPI_(I?[sbr]?send|Send|Ssend|Bsend|Rsend|Issend|Ibsend|Irsend)$", re.IGNORECASE)
RECV = re.compile(r"^MPI_(I?recv|Recv|Mrecv|Imrecv)$", re.IGNORECASE)
COLLECTIVE = re.compile(r"^MPI_I?(Allreduce|Reduce|Bcast|Alltoallv?w?|Allgatherv?|Gatherv?|Scatterv?|Barrier|"
                        r"Reduce_scatter(_block)?|Scan|Exscan|Neighbor_\w+)$", re.IGNORECASE)
ROOT = "MPI"


@dataclass
class P2PModel:
    a: float                    # s per byte (inverse bandwidth)
    b: float                    # s per message (latency); per run when form == "apmt"
    form: str
    volume: fit.Model           # bytes per rank
    messages: fit.Model | None  # messages per rank
    r2: float
    n_obs: int
    routines: list[str]
    procs: str | None = None
    #: process counts at which the profile measured no point-to-point message on any rank
    zero_at: tuple = ()
    #: False when the fitted observations cannot tell ``a`` from ``b`` (one bytes-per-message ratio, or
    #: one volume in the ``apmt`` form): ``a`` and ``b`` are then one split of many that fit alike
    separable: bool = True
    #: the rank whose volume and messages are modelled: ``max`` the busiest (critical) one, ``mean``
    ranks: str = "max"

    def counted(self) -> str:
        """What the volume and message models count, as the insight says it: not the routines' calls
        (``perfcast model``'s ``calls``), an MPI_Sendrecv is a send and a receive."""
        who = "the busiest rank" if self.ranks == "max" else "the mean over ranks"
        return f"bytes sent + received and messages sent + received (an MPI_Sendrecv is two), of {who}"

    def silent(self, at: Mapping) -> bool:
        return self.procs is not None and self.procs in at and float(at[self.procs]) in self.zero_at

    def predict(self, at: Mapping, size_ratio: float = 1.0) -> float:
        if self.silent(at):
            return 0.0
        s = max(float(self.volume.predict(at)), 0.0) * size_ratio
        if self.form == "apmt":
            return self.a * s + self.b
        n = max(float(self.messages.predict(at)), 0.0)
        return self.a * s + self.b * n

    def to_dict(self) -> dict:
        return {"form": self.form, "a_s_per_byte": self.a, "b_s": self.b,
                "bandwidth_bytes_per_s": (1 / self.a) if self.a > 0 else None, "r2": self.r2, "n_obs": self.n_obs,
                "volume_model": self.volume.formula(),
                "messages_model": None if self.messages is None else self.messages.formula(),
                "routines": self.routines, "zero_at": {self.procs: list(self.zero_at)} if self.zero_at else {},
                "separable": self.separable, "ranks": self.ranks, "counted": self.counted()}


@dataclass
class CollectiveModel:
    routine: str
    a: float                  # s per log2(p)
    b: float                  # s per byte
    c: float                  # s
    calls: fit.Model
    size: fit.Model
    procs: str | None
    r2: float
    dropped: list[str] = field(default_factory=list)

    def per_call(self, at: Mapping, size_ratio: float = 1.0) -> float:
        lp = math.log2(float(at[self.procs])) if self.procs else 0.0
        s = max(float(self.size.predict(at)), 0.0) * size_ratio
        return self.a * lp + self.b * s + self.c

    def predict(self, at: Mapping, size_ratio: float = 1.0) -> float:
        return max(float(self.calls.predict(at)), 0.0) * self.per_call(at, size_ratio)

    def to_dict(self) -> dict:
        return {"routine": self.routine, "a_s_per_log2p": self.a, "b_s_per_byte": self.b, "c_s": self.c,
                "r2": self.r2, "calls_model": self.calls.formula(), "size_model": self.size.formula(),
                "dropped": self.dropped}


@dataclass
class CommModel:
    p2p: P2PModel | None
    collectives: list[CollectiveModel]
    bf_comm: float = 1.0
    notes: list[str] = field(default_factory=list)

    def predict(self, at: Mapping, size_ratio: float = 1.0) -> dict[str, float]:
        out = {}
        if self.p2p is not None:
            out["point-to-point"] = self.bf_comm * self.p2p.predict(at, size_ratio)
        for c in self.collectives:
            out[c.routine] = self.bf_comm * c.predict(at, size_ratio)
        return out

    def to_dict(self) -> dict:
        return {"bf_comm": self.bf_comm, "p2p": None if self.p2p is None else self.p2p.to_dict(),
                "collectives": [c.to_dict() for c in self.collectives], "notes": list(self.notes)}


def _metric(exp: Experiment, names: tuple[str, ...]) -> str | None:
    mpi_cps = [c for c in exp.data["callpath"].cat.categories if str(c).startswith(ROOT + "->")]
    have = set(exp.data[exp.data["callpath"].isin(mpi_cps)]["metric"].astype(str).unique())
    for n in names:
        if n in have:
            return n
    return None


def mpi_table(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    """Per (point, rep, rank, routine): time, calls, bytes."""
    tm = _metric(exp, ("pmpi_time", "time"))
    calls = _metric(exp, ("pmpi_calls", "calls"))
    by = _metric(exp, ("pmpi_bytes", "bytes"))
    sent = _metric(exp, ("pmpi_bytes_sent", "bytes_sent"))
    missing = [n for n, m in (("time", tm), ("calls", calls), ("bytes", by)) if m is None]
    if missing:
        raise PerfcastError(f"no MPI profile: the experiment lacks {', '.join(missing)} on MPI-><routine> "
                            "callpaths (collect with --collect mpi, or read pmpi.rank*.json)")
    if "rank" not in exp.data.columns:
        raise PerfcastError("the MPI profile has no rank column; the communication model needs per-rank values")
    params = list(exp.parameters)
    d = exp.data[exp.data["callpath"].astype(str).str.startswith(ROOT + "->")
                 & exp.data["metric"].isin([m for m in (tm, calls, by, sent) if m])]
    names = {tm: "time", calls: "calls", by: "bytes"}
    if sent:
        names[sent] = "bytes_sent"
    d = d.assign(routine=d["callpath"].astype(str).str.slice(len(ROOT) + 2),
                 metric=d["metric"].astype(str).map(names))
    t = d.pivot_table(index=[*params, "rep", "rank", "routine"], columns="metric", values="value",
                      aggfunc="sum", observed=True).reset_index()
    for c in ("time", "calls", "bytes"):
        if c not in t.columns:
            t[c] = 0.0
    t = t.fillna(0.0)
    if "bytes_sent" not in t.columns:
        t["bytes_sent"] = t["bytes"] / 2   # sent + received, symmetric collectives
    t.attrs["size_from"] = "bytes_sent" if sent else "bytes / 2"
    # runs with different rank sets at one point are a mismatch
    if params:
        sizes = t.groupby([*params, "rep"], observed=True)["rank"].nunique()
        for key, n in sizes.items():
            key = key if isinstance(key, tuple) else (key,)
            coords = dict(zip(params, key[:-1]))
            procs = next((p for p in ("p", "procs", "np", "nprocs", "ranks") if p in coords), None)
            if procs is not None and int(coords[procs]) != n:
                raise PerfcastError(f"mismatched ranks: the MPI profile at "
                                    f"{', '.join(f'{k}={v:g}' for k, v in coords.items())} (repetition {key[-1]}) "
                                    f"has {n} rank(s) but {procs}={coords[procs]:g}")
    return t, params


def _messages(row_routine: str, calls: float) -> float:
    if SEND.match(row_routine) or RECV.match(row_routine):
        return calls
    if row_routine.lower().startswith("mpi_sendrecv"):
        return 2 * calls
    return 0.0


def _r2(v: float) -> float:
    """R^2 without a round-off sign: a fit no better than the mean by 1e-16 printed "R^2 -0.00" and
    "explains only -0% of the variance"."""
    return 0.0 if abs(v) < 1e-9 else v


def _reduce_ranks(df: pd.DataFrame, params: list[str], col: str, ranks: str) -> pd.DataFrame:
    per = df.groupby([*params, "rep", "rank"], observed=True)[col].sum().reset_index()
    return per.groupby([*params, "rep"], observed=True)[col].agg(ranks).reset_index()


def _series(points: pd.DataFrame, params: list[str], col: str):
    g = points.groupby(params if len(params) > 1 else params[0], observed=True)[col]
    items = list(g)
    xs = np.array([list(k) if isinstance(k, tuple) else [k] for k, _ in items], dtype=float)
    return xs, [grp.to_numpy(dtype=float) for _, grp in items]


def _fit(points: pd.DataFrame, params: list[str], col: str, options, grid=None, silent: pd.Series | None = None):
    """The model of ``col`` over the points; on a recorded process grid, a count no PMNF function
    passes through is modelled in the grid's covariates (:func:`perfcast.fit.grid.fit_grid`).
    ``silent``: the rows (True) of process counts without any message, predicted as exactly zero:
    left out of the PMNF law (their zero pinned it to 0 at p=1), kept for the grid's covariates (a
    rank without neighbours has none)."""
    # counts (bytes, messages, calls, sizes): the sign rule of counts, as the kernels' counters and
    # `perfcast model` fit them -- a law that falls below zero as the ranks grow is no count's
    opts = (options or fit.FitOptions()).for_kind("count")
    flows = points if silent is None or not silent.any() else points[~silent.to_numpy()]
    m = fit.fit_series(*_series(flows, params, col), params, opts)
    if grid is None:
        return m
    from ..fit.grid import fit_grid

    xs, vals = _series(points, params, col)
    single = m if flows is points else fit.fit_series(xs, vals, params, opts)
    mean = np.array([v.mean() for v in vals])
    count = np.array([float(len(v)) for v in vals])
    ssd = np.array([float(((v - v.mean()) ** 2).sum()) for v in vals])
    on_grid = fit_grid(xs, mean, count, ssd, params, grid, (options or fit.FitOptions()).for_kind("count", True),
                       single)
    return m if on_grid is None else on_grid


def fit_comm(exp: Experiment, procs: str | None = None, ranks: str = "max", form: str = "hockney",
             options: fit.FitOptions | None = None, bf_comm: float = 1.0,
             time_procs_max: float | None = None) -> CommModel:
    """Fit the communication models (module docstring).  ``time_procs_max``: fit the *time*
    coefficients (Hockney a, b; collectives' a, b, c) only on runs with at most this many processes
    -- e.g. the cores of the machine, since oversubscribed runs measure descheduling, not transfers;
    the counts (bytes, messages, calls, sizes) are exact and use every run."""
    if ranks not in ("max", "mean"):
        raise PerfcastError(f"ranks must be max or mean, not {ranks!r}", where="ranks")
    if form not in ("hockney", "apmt"):
        raise PerfcastError(f"form must be hockney or apmt, not {form!r}", where="form")
    t, params = mpi_table(exp)
    if not params:
        raise PerfcastError("the MPI profile has no parameters; profile >= 3 process counts")
    from ..analysis.kernels import procs_param
    from ..fit.grid import experiment_grid
    procs = procs_param(exp, procs)
    notes = []
    # the process grid the runs recorded: halo counts are modelled in its covariates
    grid, no_grid = experiment_grid(exp)
    if grid is not None and grid.parameter != procs:
        grid, no_grid = None, f"the recorded process grids count {grid.parameter}, not {procs}"
    timed = t
    if time_procs_max is not None:
        if procs is None:
            raise PerfcastError("a process-count limit for the time fits needs a process-count parameter")
        timed = t[t[procs] <= float(time_procs_max)]
        if timed.empty:
            raise PerfcastError(f"no profiled run has {procs} <= {time_procs_max:g} to fit communication times on")
        notes.append(f"communication times fitted on the runs with {procs} <= {time_procs_max:g} only (counts "
                     "and sizes on all runs)")
    routines = sorted(t["routine"].unique())
    p2p_r = [r for r in routines if P2P.match(r)]
    coll_r = [r for r in routines if COLLECTIVE.match(r)]
    other = [r for r in routines if r not in p2p_r and r not in coll_r]
    if other:
        notes.append(f"not modelled (set-up or other): {', '.join(other)}")
    npoints = len(t[params].drop_duplicates())
    p2p = None
    if p2p_r:
        d = t[t["routine"].isin(p2p_r)].copy()
        d["msgs"] = [_messages(r, c) for r, c in zip(d["routine"], d["calls"])]
        obs = d.groupby([*params, "rep", "rank"], observed=True)[["time", "bytes", "msgs"]].sum().reset_index()
        reg = obs if time_procs_max is None else obs[obs[procs] <= float(time_procs_max)]
        if reg.empty:
            reg = obs
            notes.append(f"point-to-point: no p2p call at {procs} <= {time_procs_max:g}; Hockney fitted on all runs")
        y = reg["time"].to_numpy(float)
        if form == "hockney":
            X = reg[["bytes", "msgs"]].to_numpy(float)
        else:
            X = np.column_stack([reg["bytes"].to_numpy(float), np.ones(len(reg))])
        scale = np.where(X.max(axis=0) > 0, X.max(axis=0), 1.0)
        coef, _ = nnls(X / scale, y)
        coef = coef / scale
        separable = len(reg) > 0 and int(np.linalg.matrix_rank(X / scale, tol=1e-9)) == X.shape[1]
        if not separable:
            what = ("every observation has the same bytes per message" if form == "hockney"
                    else "every observation moved the same volume")
            notes.append(f"point-to-point: {what} in the runs the times are fitted on, so the transfer cost per "
                         "byte and the latency cannot be told apart: the fitted split (the insight's latency and "
                         "bandwidth) is one of many that fit them alike, and predictions where messages are "
                         "larger or smaller depend on it")
        pred = X @ coef
        ss = float(((y - y.mean()) ** 2).sum())
        r2 = _r2(1 - float(((y - pred) ** 2).sum()) / ss) if ss > 0 else 1.0
        # every rank of every run is an observation: one without p2p calls moved 0 bytes in 0 messages
        every = t[[*params, "rep", "rank"]].drop_duplicates()
        full = every.merge(obs, on=[*params, "rep", "rank"], how="left").fillna(0.0)
        zero_at = ()
        if procs is not None:
            moved = full.groupby(procs, observed=True)[["bytes", "msgs"]].sum().sum(axis=1)
            zero_at = tuple(float(v) for v in moved.index[moved <= 0])
            if zero_at:
                notes.append(f"point-to-point: no message at {procs}={', '.join(f'{v:g}' for v in zero_at)} "
                             "in the profile; predicted as zero there")
        # the volume and message models over the process counts where messages flow: at one without any
        # (predicted as exactly zero above) a zero pinned the laws to 0 at p=1 -- CG's constant halo
        # volume of the critical rank from p=4 on was fitted as 1.6e6 p^-1 log2(p)^2, 24% low at p=32
        vols, ms = _reduce_ranks(full, params, "bytes", ranks), _reduce_ranks(full, params, "msgs", ranks)
        silent = (lambda d: d[procs].astype(float).isin(zero_at) if zero_at else None)  # noqa: E731
        vol = _fit(vols, params, "bytes", options, grid, silent(vols))
        msgs = _fit(ms, params, "msgs", options, grid, silent(ms)) if form == "hockney" else None
        p2p = P2PModel(float(coef[0]), float(coef[1]), form, vol, msgs, r2, len(reg), p2p_r, procs, zero_at,
                       separable, ranks)
        # what the fit says about its own laws (a law on two values of p, a poor fit) is said here too:
        # LULESH's busiest rank sends and receives 149, 502 messages at p = 8, 27 (none at p = 1), so the
        # law is one power through two values, 0.368 + 18.6 p: 1191 at p = 64, where by its source
        # the busiest rank still has 26 neighbours, 502 messages
        from ..analysis.fitcheck import fit_warnings

        said: dict[str, list[str]] = {}
        for what, m in (("volume", vol), ("messages", msgs)):
            for w in (fit_warnings(m) if m is not None else ()):
                said.setdefault(w, []).append(what)
        for w, whats in said.items():
            notes.append(f"point-to-point: {' and '.join(whats)} per rank ({ranks} over the ranks): {w}")
        if grid is None and procs is not None:
            # said, so that a halo's smooth law is not taken for its grid's (a store collected before
            # the PMPI library recorded MPI_Cart_create has no grid, whatever the code's decomposition)
            notes.append(f"point-to-point: volume and messages per rank are smooth laws in {procs}, not functions "
                         f"of a process grid: {no_grid}")
        if r2 < 0.5:
            notes.append(f"point-to-point: the Hockney fit explains only {r2:.0%} of the variance of the "
                         "per-rank p2p time (waiting for late partners is not a transfer cost)")
    colls = []
    for r in coll_r:
        d = t[(t["routine"] == r) & (t["calls"] > 0)]
        if d.empty:
            continue
        dt = d if time_procs_max is None else d[d[procs] <= float(time_procs_max)]
        if dt.empty:
            dt = d
            notes.append(f"{r}: not called at {procs} <= {time_procs_max:g}; its times are fitted on all runs")
        pt = dt.groupby(params, observed=True).agg(time=("time", "sum"), calls=("calls", "sum"),
                                                   bytes=("bytes_sent", "sum")).reset_index()
        per_call = (pt["time"] / pt["calls"]).to_numpy(float)
        size = (pt["bytes"] / pt["calls"]).to_numpy(float)
        cols, names = [], []
        if procs is not None:
            cols.append(np.log2(pt[procs].to_numpy(float)))
            names.append("log2p")
        cols.append(size)
        names.append("size")
        dropped = []
        keep_cols, keep_names = [], []
        for c, n in zip(cols, names):
            if np.ptp(c) > 1e-12 * max(1.0, float(np.abs(c).max())):
                keep_cols.append(c)
                keep_names.append(n)
            else:
                dropped.append(n)
        X = np.column_stack([*keep_cols, np.ones(len(pt))])
        if len(pt) < X.shape[1]:
            notes.append(f"{r}: {len(pt)} point(s) cannot fix {X.shape[1]} coefficients; modelled as a constant per call")
            X = np.ones((len(pt), 1))
            keep_names = []
        scale = np.where(np.abs(X).max(axis=0) > 0, np.abs(X).max(axis=0), 1.0)
        coef, _ = nnls(X / scale, per_call)
        coef = coef / scale
        pred = X @ coef
        ss = float(((per_call - per_call.mean()) ** 2).sum())
        r2 = _r2(1 - float(((per_call - pred) ** 2).sum()) / ss) if ss > 0 else 1.0
        vals = dict(zip(keep_names, coef[:-1]))
        calls_pts = _reduce_ranks(d, params, "calls", ranks)
        d2 = d.assign(avg=d["bytes_sent"] / d["calls"])
        size_pts = d2.groupby([*params, "rep"], observed=True)["avg"].mean().reset_index()
        cm = CollectiveModel(r, float(vals.get("log2p", 0.0)), float(vals.get("size", 0.0)), float(coef[-1]),
                             _fit(calls_pts, params, "calls", options, grid), _fit(size_pts, params, "avg", options),
                             procs, r2, dropped)
        if dropped:
            notes.append(f"{r}: {', '.join(dropped)} does not vary over the profiled runs; its effect is in the constant")
        colls.append(cm)
    if p2p is None and not colls:
        raise PerfcastError("the MPI profile has no point-to-point or collective routine to model")
    if npoints < 3:
        notes.append(f"only {npoints} profiled point(s); APMT needs >= 3 process counts")
    return CommModel(p2p, colls, bf_comm, notes)

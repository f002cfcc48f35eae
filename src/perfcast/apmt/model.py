"""APMT application model: kernels x (computation + memory) + communication (seed 000, Eq 2).

    T(x) = sum_i [ T_comp_i(x) + BF_mem_i * T_mem_i(x) ] + BF_comm * T_comm(x)

Per kernel (from :func:`perfcast.analysis.kernels.identify_kernels`), every hardware counter the
profile has is modelled as a function of the parameters with the PMNF modeler (APMT's predefined
one-term functions are ``FitOptions(max_terms=1)`` over :data:`APMT_SPACE`, chosen with
``functions="apmt"``).  Counters are per rank: the critical rank (``ranks="max"``) by default.

* CPI: measured = cycles / instructions (computation cycles only, cycles - stall cycles, when a stall
  counter exists); without a cycles counter the *effective* CPI = kernel time x f / instructions
  from a time the profile has for the kernel (sampled time on its callpaths, or an application
  timer mapped to it with ``timers``) -- it includes memory stalls.  The mean over the profiling
  runs is used and its standard deviation reported (APMT Eq 4).
* ``T_comp = N_instr x CPI / f``.
* ``T_mem = sum over levels of hits x latency / f`` (L1 hits = loads + stores - L1 misses, L2 hits =
  L1 misses - L2 misses, LLC hits = (L2 or L1) misses - LLC misses, memory = LLC misses; latencies
  from the machine description).  ``BF_mem = T_stall / T_mem`` needs a stall counter; without it
  the memory time is not split off (the effective CPI already contains it) and ``T_mem`` is shown
  only as the no-overlap latency bound.
* A kernel with a time but no instruction counter is modelled on its time directly, by
  ``perfcast.model`` with `perfcast predict`'s options (``--terms``, ``--negative``): a time that is
  a series of the experiment (a mapped timer; a kernel of one callpath whose callees carry no time)
  is that series' model in the model set of its metric -- the formula and the number `perfcast
  model` / `predict` give; any other (callees' time taken off, callpaths summed) is fitted alike
  in the kernels' experiment.  One with neither has no prediction (it is listed).

Communication: :mod:`perfcast.apmt.comm`.  Larger problems: ``size_ratio`` R evaluates the
computation models at the equivalent per-rank work ``p / R`` (APMT) and scales the communication
volume by R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import fit
from ..analysis import kernels as kmod
from ..errors import PerfcastError
from ..experiment import LOCATION_COLUMNS, Experiment, fill_absent_repetitions, reduce_over_locations
from ..fit.lines import line_note
from ..machine import Machine
from . import comm as cmod
from .counters import missing_insights, resolve

#: APMT's predefined one-term functions a * x^m * log2(x)^k + b (polynomial and logarithmic;
#: negative m for work divided among ranks)
APMT_SPACE = tuple((Fraction(m), k) for m in ("-1", "-1/2", "1/2", "1", "3/2", "2", "3") for k in (0,)) + \
    ((Fraction(0), 1), (Fraction(1), 1), (Fraction(-1), 1))
FREQ_PARAMS = ("f", "freq", "frequency", "cpu_freq", "ghz", "mhz")
CONTENTION_E = 1e-4


def fit_options(functions: str = "pmnf", negative: bool = True) -> fit.FitOptions:
    """The search of the counter decomposition's counts (instructions, cycles, cache misses, message
    volumes): ``apmt`` APMT's predefined one-term functions (:data:`APMT_SPACE`); ``pmnf`` up to two
    terms with negative exponents -- a count per rank of work divided among the ranks falls as
    1/p, and a count is often the sum of the work and a per-rank overhead.  A count is no time:
    APMT turns it into one (x CPI / f, Hockney), and no other command prints it as a time.  The
    kernels' *time* models are not fitted with these: :func:`fit_apmt` takes them from the model set
    `perfcast model` / `predict` build (:func:`_time_models`)."""
    if functions == "apmt":
        return fit.FitOptions(space=APMT_SPACE, max_terms=1, negative=False)
    if functions == "pmnf":
        return fit.FitOptions(negative=negative, max_terms=2)
    raise PerfcastError(f"functions must be pmnf or apmt, not {functions!r}", where="functions")


#: the counter roles the memory levels' hits come from (:func:`level_hits`)
MEMORY_ROLES = ("loads", "stores", "l1_misses", "l2_misses", "llc_misses")


def level_hits(counts: Mapping[str, float | None]) -> dict:
    """Hits per memory level from the counts of :data:`MEMORY_ROLES` (None: not counted): L1 hits =
    loads + stores - L1 misses, L2 hits = L1 misses - L2 misses, LLC hits = (L2 or L1) misses - LLC
    misses, memory = LLC misses; a level whose counters are missing is left out."""
    acc = None
    if counts.get("loads") is not None:
        acc = counts["loads"] + (counts.get("stores") or 0.0)
    l1m, l2m, llcm = counts.get("l1_misses"), counts.get("l2_misses"), counts.get("llc_misses")
    hits = {}
    if acc is not None and l1m is not None:
        hits["L1"] = max(acc - l1m, 0.0)
    upper = l1m
    if l2m is not None and l1m is not None:
        hits["L2"] = max(l1m - l2m, 0.0)
        upper = l2m
    elif l2m is not None:
        upper = l2m
    if llcm is not None and upper is not None:
        hits["LLC"] = max(upper - llcm, 0.0)
    if llcm is not None:
        hits["memory"] = llcm
    return hits


@dataclass
class KernelModel:
    name: str
    kind: str
    counters: dict = field(default_factory=dict)      # role -> fit.Model (per rank)
    time_model: fit.Model | None = None                # direct time model (no instructions)
    #: (callpath, metric, "experiment" | "kernels") of the series ``time_model`` models: a series of the
    #: experiment (predict's model of it) or the kernel's own in the kernels' experiment
    time_series: tuple | None = None
    cpi: float | None = None
    cpi_std: float | None = None
    cpi_values: list = field(default_factory=list)     # (point label, CPI)
    cpi_source: str | None = None
    bf_mem: float | None = None
    cpi_core: float | None = None
    notes: list = field(default_factory=list)

    def _count(self, role, at):
        m = self.counters.get(role)
        return None if m is None else max(float(m.predict(at)), 0.0)

    def memory_time(self, at, machine: Machine, freq_hz: float | None = None) -> tuple[float | None, dict]:
        """Latency-weighted T_mem (seconds) and per-level hits; None when no level is known.  At a core
        frequency ``freq_hz`` (default the machine's) the caches' latencies stay fixed in core cycles,
        main memory's in seconds (its cycles at the machine's frequency), as in Eq 5."""
        hits = level_hits({r: self._count(r, at) for r in MEMORY_ROLES})
        if not hits:
            return None, {}
        f = freq_hz or machine.frequency_hz
        t = sum(h * machine.latency_cycles[lvl] for lvl, h in hits.items() if lvl != "memory") / f \
            + hits.get("memory", 0.0) * machine.latency_cycles["memory"] / machine.frequency_hz
        return t, hits

    def predict(self, at, machine: Machine, freq_hz: float | None = None) -> dict:
        """{'computation', 'memory', 'total', 'memory_bound'} in seconds (None where unavailable), at the
        core frequency ``freq_hz`` (default the machine's): T_comp = N_instr x CPI / f."""
        n = self._count("instructions", at)
        if n is not None and self.cpi is not None:
            f = freq_hz or machine.frequency_hz
            comp = n * self.cpi / f
            tmem, _ = self.memory_time(at, machine, f)
            mem = None
            if self.bf_mem is not None and tmem is not None:
                mem = self.bf_mem * tmem
            return {"computation": comp, "memory": mem, "total": comp + (mem or 0.0),
                    "memory_bound": tmem}
        if self.time_model is not None:
            t = max(float(self.time_model.predict(at)), 0.0)
            return {"computation": t, "memory": None, "total": t, "memory_bound": None}
        return {"computation": None, "memory": None, "total": None, "memory_bound": None}

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind,
                "counters": {r: m.formula() for r, m in self.counters.items()},
                "time_model": None if self.time_model is None else self.time_model.formula(),
                "time_series": None if self.time_series is None else dict(zip(("callpath", "metric", "source"),
                                                                              self.time_series)),
                "cpi": self.cpi, "cpi_std": self.cpi_std, "cpi_source": self.cpi_source,
                "cpi_values": [[p, v] for p, v in self.cpi_values], "bf_mem": self.bf_mem,
                "cpi_core": self.cpi_core, "notes": list(self.notes)}


@dataclass
class Prediction:
    at: dict
    size_ratio: float
    kernels: dict          # name -> {computation, memory, total, memory_bound}
    communication: dict    # routine class -> seconds
    total: float
    notes: list = field(default_factory=list)

    @property
    def computation(self) -> float:
        return sum(v["total"] or 0.0 for v in self.kernels.values())

    @property
    def computation_modelled(self) -> bool:
        """Some kernel has a time (else the total holds no computation: not 0 s, unknown)."""
        return any(v["total"] is not None for v in self.kernels.values())

    @property
    def comm_total(self) -> float:
        return sum(self.communication.values())

    def to_dict(self) -> dict:
        return {"at": self.at, "size_ratio": self.size_ratio, "total": self.total,
                "computation": self.computation if self.computation_modelled else None,
                "communication_total": self.comm_total,
                "kernels": self.kernels, "communication": self.communication, "notes": list(self.notes)}

    def lines(self) -> list[str]:
        at = ", ".join(f"{k}={kmod._num(v)}" for k, v in self.at.items())
        out = [f"prediction at {at}" + (f" (problem {self.size_ratio:g}x the profiled size)"
                                        if self.size_ratio != 1 else "") + f": {self.total:.4g} s"]
        untimed = [k for k, v in self.kernels.items() if v["total"] is None]
        for k, v in self.kernels.items():
            if v["total"] is None:
                continue
            mem = "n/a (no stall counter)" if v["memory"] is None else f"{v['memory']:.4g} s"
            out.append(f"  {k:<24} {v['total']:.4g} s  computation {v['computation']:.4g} s, memory {mem}"
                       + (f" [latency bound {v['memory_bound']:.3g} s]" if v.get("memory_bound") else ""))
        for k, v in self.communication.items():
            out.append(f"  {k:<24} {v:.4g} s  communication")
        if untimed:
            out.append(f"  not in the total (no cycles counter, no time to derive a CPI from): {', '.join(untimed)}")
        out.extend("  note: " + n for n in self.notes)
        return out


@dataclass
class APMTModel:
    parameters: tuple
    procs: str | None
    machine: Machine
    kernelset: kmod.KernelSet
    kernels: list[KernelModel]
    comm: cmod.CommModel | None
    roles: dict
    contention: dict        # kernel -> {point: E}
    notes: list = field(default_factory=list)
    profiled: pd.DataFrame | None = None
    #: kernel -> application timer callpath its time came from (``fit_apmt(timers=...)``)
    timers: dict = field(default_factory=dict)
    #: the options `perfcast predict` fits the times with here (``--terms``, ``--negative``): the
    #: kernels' time models and the PMNF run times next to the breakdown (:mod:`.reconcile`)
    pmnf_options: fit.FitOptions = field(default_factory=fit.FitOptions)
    #: what Eq 5 refined with the runs at other frequencies (:class:`perfcast.apmt.refine.Eq5`); None
    #: without a frequency parameter
    eq5: object | None = None
    #: with a frequency parameter (runs at several CPU frequencies): (parameter, its value and its
    #: frequency in Hz at the runs the counters and effective CPIs come from); the computation is
    #: evaluated at the frequency ``predict``'s point gives, not at the machine description's
    frequency: tuple | None = None

    # -- prediction ------------------------------------------------------------------------------
    def predict(self, at: Mapping, size_ratio: float = 1.0) -> Prediction:
        at = {k: float(v) for k, v in at.items()}
        missing = [p for p in self.parameters if p not in at]
        if missing:
            raise PerfcastError(f"no value for parameter(s) {', '.join(missing)} (give --at "
                                f"{','.join(f'{p}=...' for p in self.parameters)})", where="at")
        if not size_ratio > 0:
            raise PerfcastError(f"size ratio must be > 0, got {size_ratio}", where="size_ratio")
        notes = []
        comp_at = dict(at)
        if size_ratio != 1.0:
            if self.procs is None:
                raise PerfcastError("a size ratio needs a process-count parameter (work per rank = size / p)")
            comp_at[self.procs] = at[self.procs] / size_ratio
            notes.append(f"computation evaluated at the equivalent work per rank: {self.procs}="
                         f"{comp_at[self.procs]:.4g} on the profiled size (APMT)")
        named = self._named_models(comp_at, at)
        bad = self._undefined(named)
        if bad is not None:
            # as ModelSet.predict: a model undefined there (log2(p)^-1 at p <= 1) is refused
            label, m, pt = bad
            raise PerfcastError(f"{label}: the model {m.formula()} is undefined at "
                                f"{','.join(f'{k}={v:g}' for k, v in pt.items())}", where="at")
        fhz = self._frequency_at(at, notes)
        ks = {k.name: k.predict(comp_at, self.machine, fhz) for k in self.kernels}
        cm = self.comm.predict(at, size_ratio) if self.comm is not None else {}
        total = sum(v["total"] or 0.0 for v in ks.values()) + sum(cm.values())
        if self.comm is None:
            notes.append("no MPI profile: communication is not modelled")
        notes += self._line_notes(named)
        notes += self._grid_notes(named)
        notes += self._negative_notes(named)
        return Prediction(at, size_ratio, ks, cm, total, notes)

    def _frequency_at(self, at: Mapping, notes: list) -> float | None:
        """The core frequency (Hz) the computation is evaluated at: the point's value of the frequency
        parameter (the profiled runs' one when the point has none), None without such a parameter (the
        machine's).  Said in ``notes`` where the frequency is not the profiled runs': a kernel whose CPI
        Eq 5 did not split keeps its effective CPI, memory stalls included, as if they were core cycles."""
        if self.frequency is None:
            return None
        from .refine import _hz

        fp, top, top_hz = self.frequency
        if fp not in at:
            return top_hz
        fhz = _hz(at[fp])
        if not fhz > 0:
            raise PerfcastError(f"{fp}={at[fp]:g}: a CPU frequency must be > 0", where="at")
        kept = [k.name for k in self.kernels if k.cpi is not None and k.cpi_core is None]
        if fhz != top_hz and kept:
            notes.append(f"{', '.join(kept)}: the effective CPI of the runs at {fp}={kmod._num(top)} is taken as it is "
                         f"at {fp}={kmod._num(at[fp])} (Eq 5 did not split it into CPI_core and BF_mem): its memory "
                         "stalls scale with the frequency as if they were core cycles")
        return fhz

    def _named_models(self, comp_at: Mapping, at: Mapping) -> list[tuple]:
        """(label, fitted model, point it is evaluated at) of every count and time the breakdown uses."""
        named = [(f"{k.name} {role}", m, comp_at)
                 for k in self.kernels for role, m in (*k.counters.items(), ("time", k.time_model))]
        if self.comm is not None:
            if self.comm.p2p is not None and not self.comm.p2p.silent(at):   # silent: 0, no law evaluated
                named += [("point-to-point bytes", self.comm.p2p.volume, at),
                          ("point-to-point messages", self.comm.p2p.messages, at)]
            named += [(f"{c.routine} {what}", m, at) for c in self.comm.collectives
                      for what, m in (("calls", c.calls), ("bytes per call", c.size))]
        return [(label, m, pt) for label, m, pt in named if m is not None]

    @staticmethod
    def _line_notes(named: list[tuple]) -> list[str]:
        """A note per fitted count or time whose value at the point lies on a measured line with its
        own level (:mod:`perfcast.fit.lines`): the breakdown uses the formula's value times the line's
        factor, not the formula printed for it."""
        out = []
        for label, m, pt in named:
            line = m.line_at(pt) if hasattr(m, "line_at") else None
            if line is not None:
                out.append(f"{label}: {line_note(line)}")
        return out

    @staticmethod
    def _grid_notes(named: list[tuple]) -> list[str]:
        """A note per fitted count that is a function of the process grid (:mod:`perfcast.fit.grid`):
        its value here comes from the dims MPI_Dims_create gives at this process count, not from a
        smooth law in it -- which rule, which dims, and the covariate's value."""
        from ..fit.grid import GridModel

        out = []
        for label, m, pt in named:
            if isinstance(m, GridModel) and m.grid.parameter in pt:
                g = m.grid
                out.append(f"{label}: on the process grid{' the runs recorded' if g.recorded else ''} -- "
                           f"{m.definition(float(pt[g.parameter]))}"
                           + (f" (the plain law {m.single.formula(digits=4)} passes through the measured points "
                              f"too: {float(m.single.predict(dict(pt))):.6g} here)" if m.rival and m.single else ""))
        return out

    @staticmethod
    def _negative_notes(named: list[tuple]) -> list[str]:
        """A note per fitted count or time that is negative at the point: the breakdown takes it as 0
        (``KernelModel.predict``, ``comm``), so the total leaves that part out."""
        out = []
        for label, m, pt in named:
            v = float(m.predict(pt))
            if v < 0:
                out.append(f"{label}: the model gives {v:.4g} here, counted as 0 in the total "
                           f"({m.formula()})")
        return out

    def strong_scaling(self, procs_values: Sequence[float], at: Mapping, size_ratio: float = 1.0) -> list[Prediction]:
        """The same problem (``size_ratio`` x the profiled one) over ``procs_values``."""
        return [self.predict({**at, self.procs: p}, size_ratio=size_ratio) for p in procs_values]

    def weak_scaling(self, procs_values: Sequence[float], at: Mapping) -> list[Prediction]:
        """Problem grows with p (size ratio p / p0, p0 = the ``at`` process count): APMT's method."""
        p0 = float(at[self.procs])
        return [self.predict({**at, self.procs: p}, size_ratio=p / p0) for p in procs_values]

    @staticmethod
    def _undefined(named) -> tuple | None:
        """The first (label, model, point) of ``named`` (:meth:`_named_models`) whose model is
        undefined at its point (NaN: a ``log2(p)^-1`` term at p = 1), or None."""
        for label, m, pt in named:
            with np.errstate(invalid="ignore", divide="ignore"):
                if not math.isfinite(float(m.predict(pt))):
                    return label, m, pt
        return None

    def crossover(self, at: Mapping, limit: float = 2 ** 20) -> float | None:
        """Smallest p where the predicted communication exceeds the predicted computation: the profiled
        process counts in order, then powers of 2 above the largest (the other parameters at ``at``),
        leaving out those where a model is undefined (a law fitted from p = 2 on with a ``log2(p)^-1``
        term has none at p = 1).  None without a communication model or without any kernel time
        (no computation to compare)."""
        if self.comm is None or self.procs is None:
            return None
        prof = sorted({float(v) for v in self.profiled[self.procs].unique()}) if self.profiled is not None else []
        cands = list(prof)
        p = 2.0 ** math.ceil(math.log2(prof[-1])) if prof else 1.0
        while p <= limit:
            if not prof or p > prof[-1]:
                cands.append(p)
            p *= 2
        for p in cands:
            if self._undefined(self._named_models({**at, self.procs: p}, {**at, self.procs: p})) is not None:
                continue   # a model undefined there (a strong-scaling law with log2(p)^-1 at p = 1): no comparison
            pr = self.predict({**at, self.procs: p})
            if not pr.computation_modelled:
                return None
            if pr.comm_total > pr.computation:
                return p
        return None

    # -- words -------------------------------------------------------------------------------------
    def insights(self, at: Mapping | None = None) -> list[str]:
        out = []
        for k in self.kernels:
            parts = []
            line = next((r for r in (self.eq5.refined if self.eq5 is not None else ()) if r["kernel"] == k.name), None)
            if line is not None:
                # CPI_core of Eq 5's line: the runs' spread is their miss of that line, relative to their CPI
                std = line.get("residual_std")
                rel = std / line["cpi_mean"] if std is not None and line["cpi_mean"] else None
                parts.append(f"{k.cpi_source} {k.cpi:.3g} (a line through {line['points']} points; "
                             + ("its miss of the runs unknown: 2 points)" if rel is None else
                                f"the runs' CPIs miss it by std {std:.2g}, {rel:.0%} of their mean {line['cpi_mean']:.3g})"))
                if rel is not None and rel > 0.15:
                    parts.append("the runs miss the Eq 5 line by much: CPI_core and BF_mem are uncertain "
                                 "(oversubscribed or memory-contended runs?)")
            elif k.cpi is not None and k.cpi_std is None:
                # a CPI without its spread across runs (KernelModel.cpi_std is optional): no std to state
                parts.append(f"{k.cpi_source} CPI {k.cpi:.3g} (Eq 4; its spread across runs unknown)")
            elif k.cpi is not None:
                rel = (k.cpi_std / k.cpi) if k.cpi else 0.0
                parts.append(f"{k.cpi_source} CPI {k.cpi:.3g} (std {k.cpi_std:.2g}, {rel:.0%} across runs, Eq 4)")
                if rel > 0.15:
                    parts.append("CPI varies a lot between runs: the constant-CPI model is uncertain "
                                 "(oversubscribed or memory-contended runs?)")
            if k.bf_mem is not None:
                parts.append(("memory-bound" if k.bf_mem > 0.5 else "compute-bound")
                             + f": BF_mem {k.bf_mem:.2f}")
            ins = k.counters.get("instructions")
            if ins is not None and self.procs:
                lead = ins.lead().get(self.procs)
                if lead:
                    parts.append(f"instructions per rank ~ {ins.formula(digits=3)}")
            e = self.contention.get(k.name)
            if e:
                worst = max(e.values())
                parts.append(f"E = LLC misses / accesses up to {worst:.1e}"
                             + (" > 1e-4: memory contention already shows at the profiled scales" if worst > CONTENTION_E
                                else " (<= 1e-4: contention negligible)"))
            if k.time_model is not None and ins is None:
                parts.append(f"time modelled directly: {k.time_model.formula(digits=3)}")
            if not parts:
                parts.append("no counters or time to model")
            out.append(f"{k.name}: " + "; ".join(parts))
        if self.comm is not None and self.comm.p2p is not None:
            p = self.comm.p2p
            bw = f"{1 / p.a / 1e6:.0f} MB/s" if p.a > 0 else "unbounded"
            out.append(f"point-to-point: Hockney fit latency {p.b * 1e6:.2f} us/message, bandwidth {bw} "
                       f"(R^2 {p.r2:.2f}" + ("" if p.separable else "; not separable: one split of many, see the note")
                       + f"); volume per rank ~ {p.volume.formula(digits=3)}"
                       + ("" if p.messages is None else f", messages per rank ~ {p.messages.formula(digits=3)}")
                       + f" ({p.counted()})")
        if self.comm is not None:
            for c in self.comm.collectives:
                # the message size by its name: LULESH's problem size is a parameter "s", and "ns/byte * s"
                # read as it
                out.append(f"{c.routine}: per call {c.a * 1e6:.2f} us * log2({c.procs or 'p'}) + {c.b * 1e9:.3g} "
                           f"ns/byte * size + {c.c * 1e6:.2f} us, size = bytes sent per call ~ "
                           f"{c.size.formula(digits=3)} (R^2 {c.r2:.2f})")
        if at is not None:
            x = self.crossover(at)
            if x is not None:
                left = [k for k, v in self.predict({**at, self.procs: x}).kernels.items() if v["total"] is None]
                out.append(f"communication exceeds computation first at {self.procs}={kmod._num(x)} (of the profiled "
                           f"{self.procs} and the powers of 2 above them)"
                           + (f"; the computation there holds only the kernels with a time, not {', '.join(left)}"
                              if left else ""))
        return out

    def to_dict(self) -> dict:
        return {"parameters": list(self.parameters), "procs": self.procs, "machine": self.machine.to_dict(),
                "kernels": self.kernelset.to_dict(), "kernel_models": [k.to_dict() for k in self.kernels],
                "communication": None if self.comm is None else self.comm.to_dict(),
                "counters": {r: list(v) if v else None for r, v in self.roles.items()},
                "contention": self.contention, "eq5": None if self.eq5 is None else self.eq5.to_dict(),
                "notes": list(self.notes)}


# ---------------------------------------------------------------------------------------------
def _point_values(kexp: Experiment, metrics: Sequence[str], ranks: str) -> pd.DataFrame:
    """Per (point, rep, kernel, metric): value of the critical (max) or mean rank."""
    d = kexp.data[kexp.data["metric"].isin(list(metrics))]
    params = list(kexp.parameters)
    if "rank" in d.columns:
        # over the ranks by the one rule (a sparse profile's rank without the kernel: 0)
        d = reduce_over_locations(kexp, d[[*params, "rep", "callpath", "metric",
                                           *[c for c in LOCATION_COLUMNS if c in d.columns], "value"]], ranks)
    # and the repetitions (a sparse profile's run that measured the metric but not the kernel: 0)
    return fill_absent_repetitions(kexp, d)


def _series(df: pd.DataFrame, params: list[str], kernel: str, metrics: Sequence[str]):
    """Summed metrics of one kernel: (xs, list of rep arrays) per point, and the means."""
    sub = df[(df["callpath"] == kernel) & df["metric"].isin(list(metrics))]
    if sub.empty:
        return None
    per = sub.groupby([*params, "rep"], observed=True)["value"].sum().reset_index()
    g = per.groupby(params if len(params) > 1 else params[0], observed=True)["value"]
    items = list(g)
    xs = np.array([list(k) if isinstance(k, tuple) else [k] for k, _ in items], dtype=float)
    vals = [grp.to_numpy(float) for _, grp in items]
    return xs, vals


def fit_apmt(exp: Experiment, machine: Machine | None = None, *, procs: str | None = None,
             threshold: float = 0.05, cost: str | None = None, timers: Mapping[str, str] | None = None,
             ranks: str = "max", functions: str = "pmnf", comm_form: str = "hockney",
             bf_comm: float = 1.0, comm_time_procs_max: float | None = None, scaling: str = "auto",
             max_terms: int = 1, negative: bool = False) -> APMTModel:
    """Fit the whole APMT model to a profiled experiment (module docstring); ``scaling`` (strong, weak,
    auto) decides which kernels are non-scalable (:func:`perfcast.analysis.kernels.identify_kernels`).
    ``max_terms``, ``negative``: the options of the kernels' time models, as `perfcast model` /
    `predict` take them (``--terms``, ``--negative``; their defaults): a kernel time is the model of
    its series in the model set those commands build (:func:`_time_models`)."""
    machine = machine or Machine.host()
    # the core frequency of the runs the counters and CPIs come from: a frequency parameter's, else the machine's
    fhz = machine.frequency_hz
    if ranks not in ("max", "mean"):
        raise PerfcastError(f"ranks must be max or mean, not {ranks!r}", where="ranks")
    params = [p for p in exp.parameters if p.lower() not in FREQ_PARAMS]
    freq = [p for p in exp.parameters if p.lower() in FREQ_PARAMS]
    notes = []
    base = exp
    if freq:
        from .refine import _hz

        fp = freq[0]
        top = float(exp.data[fp].max())
        fhz = _hz(top)
        base = exp.select(**{fp: top})
        base = Experiment([p for p in exp.parameters if p != fp], base.data.drop(columns=[fp]), base.metrics,
                          base.tree, base.meta)
        notes.append(f"counters and CPI from the runs at {fp}={kmod._num(top)} (Eq 5 below: what the other "
                     f"frequencies refine); the computation is evaluated at the point's {fp}, not at the machine "
                     "description's frequency")
    procs = kmod.procs_param(base, procs)
    from ..analysis.oversubscription import oversubscription

    over = oversubscription(base, procs)
    opts = fit_options(functions)
    # the times: predict's options (APMT's own function set when asked for)
    pmnf = fit.FitOptions(max_terms=max_terms, negative=negative)
    topts = opts if functions == "apmt" else pmnf
    time_of: dict = {}      # kernel -> (callpath of the experiment or None, metric) of its time series
    # computation part: the non-MPI callpaths
    mpi_paths = [c for c in base.data["callpath"].cat.categories if str(c) == "MPI" or str(c).startswith("MPI->")
                 or str(c) == "APP"]
    comp_exp = base
    if mpi_paths:
        keep = [c for c in base.data["callpath"].cat.categories if c not in mpi_paths]
        comp_exp = base.select(callpath=keep, literal=True) if keep else None
    timers = dict(timers or {})
    roles = resolve(comp_exp) if comp_exp is not None else {}
    if comp_exp is not None and not any(roles.get(r) for r in ("instructions", "cycles")) \
            and kmod.function_time_metric(comp_exp) is None:
        # no profile of the functions: a campaign's time is the run's wall time and the application's
        # timers (overlapping: a loop total holds the others), no functions to sum as kernels
        have = [m for m in comp_exp.metrics if kmod.run_timers(comp_exp, m)]
        no_profile = ("no function profile (instruction or cycle counts, or sampled times, on the functions): "
                      "computation is not modelled -- the total is communication only"
                      + (f"; {', '.join(have)} holds the run's wall time and the application's timers, which may "
                         "overlap and are no functions (collect with cachegrind or perf)" if have else ""))
        comp_exp = None
    else:
        no_profile = "no computation profile"
    ks = None
    eq5 = None
    kms: list[KernelModel] = []
    contention = {}
    if comp_exp is not None:
        timer_paths = set(timers.values())
        cand = comp_exp
        fn_metrics = [m for r in ("instructions", "cycles") for m in (roles.get(r) or ())]
        if fn_metrics:
            # functions are the callpaths that carry instruction/cycle counts (a campaign's wall
            # time and timers sit on other callpaths of the same root)
            d = cand.data
            keep = list(d[d["metric"].isin(fn_metrics)]["callpath"].astype(str).unique())
        else:
            keep = [c for c in cand.data["callpath"].cat.categories if c not in timer_paths]
        if len(keep) < len(cand.data["callpath"].cat.categories):
            cand = cand.select(callpath=keep, literal=True)
        cost_metric = cost or _cost(cand, roles)
        # only callpaths carrying the cost metric are functions (the campaign's app/timer paths are not)
        ks = kmod.identify_kernels(cand, metric=cost_metric, procs=procs, threshold=threshold, scaling=scaling)
        _check_timers(timers, ks.names())
        counter_metrics = sorted({m for v in roles.values() if v for m in v})
        time_metrics = [m for m in kmod.TIME_METRICS if m in cand.metrics and m != "time"] + \
            [m for m in cand.metrics if cand.metrics[m].kind == "time" and m not in kmod.TIME_METRICS
             and cand.metrics[m].scope != "unknown" and not kmod.run_timers(cand, m)]
        if cost_metric in time_metrics:
            # the kernels' time is the metric they were chosen by (Caliper: avg#..., not min#... listed first)
            time_metrics.remove(cost_metric)
            time_metrics.insert(0, cost_metric)
        if "time" in cand.metrics and cand.metrics["time"].scope in ("exclusive", "inclusive") \
                and not kmod.run_timers(cand, "time"):
            # a time metric on the functions themselves (sampled profiles, CUBE), not the campaign's wall
            # time and timers (a timer named like a function is no time of it: map it with timers=)
            fn_paths = set(cp for k in ks.kernels for cp in k.callpaths)
            has = cand.data[(cand.data["metric"] == "time") & cand.data["callpath"].isin(list(fn_paths))]
            if not has.empty:
                time_metrics.append("time")
        kexp = kmod.kernel_experiment(cand, ks, counter_metrics + time_metrics)
        vals = _point_values(kexp, list(kexp.metrics), ranks)
        bparams = list(base.parameters)
        missing = missing_insights(roles)
        notes.extend(missing)
        for k in ks.kernels:
            if k.kind == "rest" and not k.callpaths:
                continue   # no other function: nothing to model, nothing left out of the total
            km = KernelModel(k.name, k.kind)
            for role, mets in roles.items():
                if not mets or role in ("store_stalls",):
                    continue
                s = _series(vals, bparams, k.name, mets)
                if s is None:
                    continue
                xs, v = s
                if len(xs) < 3:
                    km.notes.append(f"{role}: measured at {len(xs)} point(s) only")
                    continue
                # a count cannot be negative: the sign rule of counts (never below zero where
                # measured, nor as the ranks grow), as `perfcast model` fits count metrics
                km.counters[role] = fit.fit_series(xs, v, bparams, opts.for_kind("count"))
            # time for the kernel
            tser = None
            tsrc = None
            tof = None
            if k.name in timers:
                from .refine import timer_series

                tp = timers[k.name]
                tser, tm = timer_series(base, k.name, tp)
                tsrc = f"timer {tp}"
                tof = (tp, tm)
            elif time_metrics:
                s = _series(vals, bparams, k.name, time_metrics[:1])
                if s is not None:
                    xs, v = s
                    tser = pd.Series([a.mean() for a in v],
                                     index=pd.MultiIndex.from_arrays(xs.T, names=bparams) if len(bparams) > 1
                                     else pd.Index(xs[:, 0], name=bparams[0]))
                    tsrc = f"{time_metrics[0]} samples"
                    tof = (_own_series(cand, k.callpaths, time_metrics[0]), time_metrics[0])
            instr = _means(vals, bparams, k.name, roles.get("instructions"))
            cyc = _means(vals, bparams, k.name, roles.get("cycles"))
            stalls = _means(vals, bparams, k.name, roles.get("stall_cycles"))
            if instr is not None and (instr <= 0).any():
                zero = [kmod._num(i) if not isinstance(i, tuple) else ",".join(kmod._num(x) for x in i)
                        for i in instr.index[instr <= 0]]
                km.notes.append(f"zero instructions at {', '.join(zero)}: no CPI there")
                instr = instr[instr > 0]
                if instr.empty:
                    instr = None
            cpis = None
            if instr is not None and cyc is not None:
                c = cyc - (stalls if stalls is not None else 0.0)
                cpis = (c / instr).dropna()
                km.cpi_source = "measured" + (" (computation cycles: cycles - stalls)" if stalls is not None else "")
                if stalls is not None:
                    km.bf_mem = _bf_mem(km, vals, bparams, k.name, stalls, machine, roles, fhz)
            elif instr is not None and tser is not None:
                common = instr.index.intersection(tser.index)
                if len(common) == 0:
                    km.notes.append(f"the time ({tsrc}) and the instruction counts share no profiled point")
                else:
                    within = _within_cores(common, bparams, procs, over)
                    if within is not None:
                        # a time measured with more ranks than cores holds the waits for descheduled
                        # ranks: no CPI of the code (the instruction counts are exact either way)
                        km.notes.append(f"effective CPI from the runs within the {over.cores} cores ({procs} = "
                                        f"{', '.join(kmod._num(v) for v in over.within())}); the runs at {procs} = "
                                        f"{', '.join(kmod._num(v) for v in over.over)} were oversubscribed: their "
                                        f"{tsrc} includes descheduling")
                        notes.append(f"{k.name}: {km.notes[-1]}")
                        common = within
                    cpis = (tser.loc[common] * fhz / instr.loc[common]).dropna()
                    km.cpi_source = f"effective (time from {tsrc} x f / instructions)"
            elif instr is not None:
                km.notes.append("no cycles counter and no time for this kernel: CPI unavailable, so the kernel "
                                "has no time prediction (map an application timer to it, or sample it with perf)")
            if cpis is not None and len(cpis):
                km.cpi = float(cpis.mean())
                km.cpi_std = float(cpis.std(ddof=0))   # APMT Eq 4
                km.cpi_values = [(_label(bparams, i), float(v)) for i, v in cpis.items()]
            if instr is None and tser is not None and len(tser) >= 3:
                time_of[k.name] = tof
            # contention check E = LLC misses / memory accesses
            llc = _means(vals, bparams, k.name, roles.get("llc_misses"))
            acc = _means(vals, bparams, k.name, roles.get("loads"))
            st = _means(vals, bparams, k.name, roles.get("stores"))
            if llc is not None and acc is not None:
                tot = acc + (st if st is not None else 0.0)
                e = (llc / tot.where(tot > 0)).dropna()
                contention[k.name] = {_label(bparams, i): float(v) for i, v in e.items()}
                if (e > CONTENTION_E).any():
                    km.notes.append(f"memory contention: E = LLC misses / accesses reaches {e.max():.1e} > 1e-4 "
                                    "at the profiled scales; predictions for larger problems per node are optimistic")
            kms.append(km)
        models = _time_models(base, cand, ks, time_of, ranks, topts)
        for km in kms:
            if km.name in models:
                km.time_model, km.time_series = models[km.name]
        if freq:
            from .refine import apply_eq5

            eq5 = apply_eq5(exp, freq[0], ks, kms, machine, roles, ranks, time_metrics, timers=timers,
                            procs=procs, over=over)
    comm = None
    if mpi_paths:
        comm = cmod.fit_comm(base, procs=procs, ranks=ranks, form=comm_form, options=opts, bf_comm=bf_comm,
                             time_procs_max=comm_time_procs_max)
        notes.extend(comm.notes)
    if ks is None:
        _check_timers(timers, [])
    if ks is None and comm is None:
        raise PerfcastError("nothing to model: the experiment has neither function profiles nor an MPI profile")
    if freq:
        if eq5 is None:
            from .refine import Eq5

            eq5 = Eq5(freq[0], sorted(float(v) for v in exp.data[freq[0]].unique()),
                      nothing="no computation profile, so no kernel to refine")
        notes.append(eq5.note())
    if ks is None:
        ks = kmod.KernelSet([], "", procs, threshold, {}, {}, [no_profile])
    return APMTModel(tuple(base.parameters), procs, machine, ks, kms, comm, roles, contention, notes,
                     base.points(), dict(timers), pmnf, eq5, (freq[0], top, fhz) if freq else None)


def _within_cores(index, params, procs, over):
    """The points of ``index`` (one parameter value or a tuple per point) whose process count the cores
    held, when some others were oversubscribed; None when there is nothing to leave out (or nothing
    would remain)."""
    if over is None or not over.over or procs is None or procs not in params:
        return None
    i = list(params).index(procs)
    keep = [x for x in index if float(x[i] if isinstance(x, tuple) else x) <= over.cores]
    return index[[x in keep for x in index]] if 0 < len(keep) < len(index) else None


def _check_timers(timers: Mapping[str, str], kernels: Sequence[str]) -> None:
    """A timer mapped to a kernel that is not one (a typo, a function below the threshold) would be
    ignored and its kernel left out of the total without a word: refused, naming the kernels."""
    for name, cp in timers.items():
        if name not in kernels:
            raise PerfcastError(f"{name}={cp}: no kernel {name!r} to map the timer to; "
                                + (f"the kernels are {', '.join(kernels)}" if kernels else
                                   "the experiment has no function profile, so no kernels"), where="--timer")


def _own_series(exp: Experiment, callpaths: Sequence[str], metric: str) -> str | None:
    """The callpath of ``exp`` whose ``metric`` series is a kernel's time (its exclusive values summed
    over its ``callpaths``): its one callpath when no callee of it carries the metric (an inclusive
    time then equals the exclusive one), else None (the kernel's time is no series of ``exp``)."""
    if len(callpaths) != 1:
        return None
    cp = callpaths[0]
    if exp.metrics[metric].scope == "inclusive":
        d = exp.data
        timed = set(map(str, d.loc[d["metric"] == metric, "callpath"].unique()))
        if any(c in timed for c in exp.tree.children(cp)):
            return None
    return cp


def _time_models(base: Experiment, cand: Experiment, ks, time_of: Mapping, ranks: str,
                 options: fit.FitOptions) -> dict:
    """kernel -> (model of its time, (callpath, metric, source)) from ``perfcast.model`` with
    ``options`` (predict's): a time that is a series of the experiment (a mapped timer, a kernel of
    one callpath without timed callees) is that series' model in the model set of its whole metric
    -- the model, and the number, `perfcast predict` gives for it; any other kernel's time (callees'
    time taken off, several callpaths summed: `rest`) is fitted the same way in the model set of the
    kernels' experiment (:func:`perfcast.analysis.kernels.kernel_experiment`) -- no command has its
    series.  ``source``: "experiment" or "kernels"."""
    import perfcast

    out = {}
    own = {(cp, m) for cp, m in time_of.values() if cp is not None}
    for metric in dict.fromkeys(m for _, m in own):
        ms = perfcast.model(base, [metric], locations=ranks, options=options)
        series = {s.callpath: s.model for s in ms.series if s.metric == metric}
        for name, (cp, m) in time_of.items():
            if m == metric and cp in series:
                out[name] = (series[cp], (cp, metric, "experiment"))
    rest = {}
    for name, (cp, m) in time_of.items():
        if name not in out:
            rest.setdefault(m, []).append(name)
    for metric, names in rest.items():
        ms = perfcast.model(kmod.kernel_experiment(cand, ks, [metric]), [metric], locations=ranks, options=options)
        series = {s.callpath: s.model for s in ms.series if s.metric == metric}
        for name in names:
            if name in series:
                out[name] = (series[name], (name, metric, "kernels"))
    return out


def _cost(exp: Experiment, roles: dict) -> str:
    if roles.get("cycles"):
        return roles["cycles"][0]
    for m in kmod.TIME_METRICS:
        if m in exp.metrics and exp.metrics[m].scope != "unknown" and m != "time":
            return m
    if "time" in exp.metrics and exp.metrics["time"].scope in ("exclusive", "inclusive") \
            and not kmod.run_timers(exp, "time"):
        return "time"
    if roles.get("instructions"):
        return roles["instructions"][0]
    return kmod.cost_metric(exp)


def _label(params, idx) -> str:
    idx = idx if isinstance(idx, tuple) else (idx,)
    return ",".join(f"{p}={kmod._num(v)}" for p, v in zip(params, idx))


def _means(vals: pd.DataFrame, params, kernel, metrics) -> pd.Series | None:
    if not metrics:
        return None
    sub = vals[(vals["callpath"] == kernel) & vals["metric"].isin(list(metrics))]
    if sub.empty:
        return None
    per = sub.groupby([*params, "rep"], observed=True)["value"].sum()
    return per.groupby(level=list(range(len(params))) if len(params) > 1 else 0).mean()


def _bf_mem(km: KernelModel, vals, params, kernel, stalls: pd.Series, machine: Machine, roles,
            freq_hz: float) -> float | None:
    """Mean over profiled points of T_stall / T_mem (from the counter values at the points), both at the
    core frequency ``freq_hz`` of the runs."""
    ratios = []
    for idx, st in stalls.items():
        at = dict(zip(params, idx if isinstance(idx, tuple) else (idx,)))
        tmem, _ = km.memory_time(at, machine, freq_hz) if km.counters else (None, {})
        if tmem and tmem > 0:
            ratios.append(st / freq_hz / tmem)
    if not ratios:
        km.notes.append("stall cycles measured but no memory level counted: BF_mem unavailable")
        return None
    return float(np.mean(ratios))

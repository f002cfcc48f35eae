"""Runs whose ranks shared the cores -- more ranks than the machine had cores, or other processes
busy on them: their times measure descheduling.

A campaign run by ``perfcast collect`` with the local launcher starts every rank on the machine
whose record the campaign keeps (``meta["campaign"]["machine"]``: the CPUs the process could use).
When a run starts more ranks than that, ranks take turns on the cores: a rank waiting in a
collective or a halo exchange waits for a descheduled partner, so times (and everything derived
from times) grow with the oversubscription, not with the application.  Counts and bytes (PMPI,
cachegrind) stay exact.

Evidence only: the rank count is the parameter the launch command passes to ``-np``/``-n``/``-c``
(``mpirun -np {p}``), else the model set's process-count parameter; the cores are the record's
usable CPUs.  Without a local campaign's record (third-party profiles, Slurm campaigns, whose nodes
are not this machine) nothing is claimed.

Runs within the cores can still share them: other processes on the machine (another user's job, a
build, a second campaign) take CPU time the ranks wait for.  The launcher measures it per run
(:class:`perfcast.collect.launchers.CpuShare`: the usable CPUs' busy time from ``/proc/stat`` minus
the run's own, as the average number of CPUs others kept busy, ``others``, and how finely
``/proc/stat``'s clock ticks resolve it over the run, ``others_resolution``: a run is judged by
``others`` less that).  A run whose ranks
and those others need more than the usable CPUs (by more than :data:`CONTENTION_SLACK`) *shared its
cores*: its times are slowed by a load that is not the application's.  Runs without that record
(older campaigns, third-party data) are not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

#: launcher options whose value is the number of ranks
_NP_FLAGS = ("-np", "-n", "-c", "--np", "--n", "--ntasks")
_PLACEHOLDER = re.compile(r"^\{(\w[\w.]*)\}$")
#: metric kinds whose values change with the oversubscription (times and rates derived from them)
AFFECTED_KINDS = ("time",)


#: a run within the cores shared them when its ranks plus the other processes' average busy CPUs
#: exceed the usable CPUs by more than this: a quarter of a core, i.e. the ranks of a run asking for
#: every core lost over ~12% of their CPU time to others (a daemon's stray tenth of a core does not count)
CONTENTION_SLACK = 0.25
#: every note on a prediction fitted on such runs starts with this (the report finds them by it)
FITTED = "times fitted on "


@dataclass(frozen=True)
class Oversubscription:
    """The runs of an experiment whose ranks shared the cores: more ranks than cores (``over``), or
    within the cores while other processes kept some busy (``contended``)."""
    parameter: str                 # the rank-count parameter
    cores: int                     # CPUs usable by the campaign on its machine
    host: str
    over: tuple[float, ...]        # measured rank counts above ``cores``
    measured: tuple[float, ...]    # every measured rank count
    #: runs within the cores that shared them: (rank count, other processes' average busy CPUs)
    contended: tuple[tuple[float, float], ...] = ()
    #: successful runs within the cores with a CPU record (the denominator of ``contended``)
    judged: int = 0

    def within(self) -> tuple[float, ...]:
        """The measured rank counts the cores could hold."""
        return tuple(v for v in self.measured if v <= self.cores)

    def note(self) -> str:
        parts = []
        if self.over:
            vals = ", ".join(f"{v:g}" for v in self.over)
            parts.append(f"runs at {self.parameter} = {vals} had more ranks than the {self.cores} cores of "
                         f"{self.host}: their times include waiting for descheduled ranks (counts and bytes are exact)")
        if self.contended:
            at = ", ".join(f"{v:g}" for v in sorted({p for p, _ in self.contended}))
            busy = [b for _, b in self.contended]
            parts.append(f"{len(self.contended)} of the {self.judged} runs within the cores ({self.parameter} = {at}) "
                         f"shared them with other processes, which kept {sum(busy) / len(busy):.2g} of the "
                         f"{self.cores} CPUs busy on average (up to {max(busy):.2g}): their times include waiting "
                         "for those processes")
        return "; ".join(parts)

    def fitted_note(self) -> str:
        """The note on a time prediction fitted on these runs (starts with :data:`FITTED`)."""
        why = []
        if self.over:
            why.append(f"oversubscribed runs ({self.parameter} > {self.cores} cores)")
        if self.contended:
            why.append(f"runs that shared their cores with other processes ({len(self.contended)} of {self.judged})")
        return FITTED + " and ".join(why)

    def to_dict(self) -> dict:
        return {"parameter": self.parameter, "cores": self.cores, "host": self.host, "over": list(self.over),
                "within": list(self.within()),
                "contended": [{self.parameter: p, "others": b} for p, b in self.contended], "judged": self.judged,
                "note": self.note()}


def rank_parameter(command, parameters) -> str | None:
    """The parameter the launch ``command`` (a list of tokens) passes as the number of ranks."""
    toks = [str(t) for t in command or ()]
    for i, t in enumerate(toks[:-1]):
        if t in _NP_FLAGS:
            m = _PLACEHOLDER.match(toks[i + 1])
            if m and m.group(1) in parameters:
                return m.group(1)
    return None


def _cores(machine: Mapping) -> int | None:
    for key in ("usable_cpus", "logical_cpus"):
        v = machine.get(key)
        if isinstance(v, (int, float)) and v >= 1:
            return int(v)
    return None


def contended_runs(runs, param: str, cores: int) -> tuple[list[tuple[float, float]], int]:
    """Of a campaign's ``runs`` (``meta["campaign"]["runs"]``), the successful timed runs within the
    ``cores`` that shared them (module doc): (rank count, others) each, and how many were judged."""
    found, judged = [], 0
    for r in runs or ():
        if not isinstance(r, Mapping) or r.get("status") != "ok" or r.get("mode", "main") != "main":
            continue
        others, config = r.get("others"), r.get("config") or {}
        ranks = config.get(param) if isinstance(config, Mapping) else None
        if not isinstance(others, (int, float)) or not isinstance(ranks, (int, float)) or ranks > cores:
            continue
        judged += 1
        # a figure no larger than what /proc/stat can resolve over the run (a few-ms run) shows nothing
        res = r.get("others_resolution")
        res = float(res) if isinstance(res, (int, float)) and res > 0 else 0.0
        if ranks + others - res > cores + CONTENTION_SLACK:
            found.append((float(ranks), float(others)))
    return found, judged


def _point(config: Mapping, parameters) -> tuple | None:
    try:
        return tuple(float(config[p]) for p in parameters)
    except (KeyError, TypeError, ValueError):
        return None


def oversubscription(exp, procs: str | None = None) -> Oversubscription | None:
    """The runs of ``exp`` whose ranks shared the cores (module doc), or None when there are none or
    nothing shows it.  ``procs``: the process-count parameter to use when the launch command names
    none."""
    camp = (exp.meta or {}).get("campaign")
    if not isinstance(camp, Mapping) or camp.get("launcher", "local") != "local":
        return None
    machine = camp.get("machine")
    cores = _cores(machine) if isinstance(machine, Mapping) else None
    param = rank_parameter(camp.get("command"), exp.parameters) or procs
    if cores is None or param is None or param not in exp.parameters:
        return None
    measured = tuple(sorted(float(v) for v in exp.data[param].dropna().unique()))
    over = tuple(v for v in measured if v > cores)
    # the runs of the points the experiment holds (``--where`` may have left some out)
    held = {tuple(float(v) for v in r) for r in exp.points()[list(exp.parameters)].to_numpy(float)}
    runs = [r for r in camp.get("runs") or () if isinstance(r, Mapping) and isinstance(r.get("config"), Mapping)
            and _point(r["config"], exp.parameters) in held]
    contended, judged = contended_runs(runs, param, cores)
    if not over and not contended:
        return None
    return Oversubscription(param, cores, str(machine.get("hostname") or "the machine"), over, measured,
                            tuple(contended), judged)


def of_metric(exp, metric: str, procs: str | None = None) -> Oversubscription | None:
    """:func:`oversubscription` of ``exp`` when the values of ``metric`` change with it (its kind in
    :data:`AFFECTED_KINDS`: times), else None -- counts and bytes stay exact.  Of an experiment
    selected at one point (``view --at p=27``), the runs of that point only."""
    m = exp.metrics.get(metric)
    return oversubscription(exp, procs) if m is not None and m.kind in AFFECTED_KINDS else None

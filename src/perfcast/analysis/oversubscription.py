"""Runs with more ranks than the machine had cores: their times measure descheduling.

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


@dataclass(frozen=True)
class Oversubscription:
    """The runs of an experiment that had more ranks than cores."""
    parameter: str                 # the rank-count parameter
    cores: int                     # CPUs usable by the campaign on its machine
    host: str
    over: tuple[float, ...]        # measured rank counts above ``cores``
    measured: tuple[float, ...]    # every measured rank count

    def within(self) -> tuple[float, ...]:
        """The measured rank counts the cores could hold."""
        return tuple(v for v in self.measured if v <= self.cores)

    def note(self) -> str:
        vals = ", ".join(f"{v:g}" for v in self.over)
        return (f"runs at {self.parameter} = {vals} had more ranks than the {self.cores} cores of {self.host}: "
                "their times include waiting for descheduled ranks (counts and bytes are exact)")

    def to_dict(self) -> dict:
        return {"parameter": self.parameter, "cores": self.cores, "host": self.host, "over": list(self.over),
                "within": list(self.within()), "note": self.note()}


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


def oversubscription(exp, procs: str | None = None) -> Oversubscription | None:
    """The oversubscribed runs of ``exp`` (module doc), or None when there are none or nothing shows
    it.  ``procs``: the process-count parameter to use when the launch command names none."""
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
    if not over:
        return None
    return Oversubscription(param, cores, str(machine.get("hostname") or "the machine"), over, measured)

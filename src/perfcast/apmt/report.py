"""The APMT breakdown for the HTML report: computation / memory / communication vs process count.

:func:`breakdown_series` evaluates a fitted :class:`~perfcast.apmt.model.APMTModel` at every profiled
process count and at the report's target one, the other parameters at the target's values -- the
very numbers ``perfcast predict --breakdown --at ...`` prints for those points:

* computation = the sum over kernels of their computation time (``N_instr x CPI / f``; a kernel
  modelled on its time directly counts here too);
* memory = the sum of ``BF_mem x T_mem`` (only with a stall counter; otherwise the effective CPI
  already holds the memory time and the component is left out, said in the note);
* communication = the sum over the modelled MPI routine classes (Hockney point-to-point and the
  collectives).

:func:`fit_for_report` decides whether an experiment supports the breakdown: it needs instruction
counts on the functions (cachegrind, perf stat, PAPI) with a CPI source (cycles, a sampled time, or
an application timer mapped with ``timers``), and/or a PMPI profile; otherwise it returns the reason.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import PerfcastError
from ..experiment import Experiment


def fit_for_report(exp: Experiment, machine=None, timers: Mapping[str, str] | None = None,
                   threshold: float = 0.05, comm_max_procs: float | None = None, scaling: str = "auto",
                   max_terms: int = 1, negative: bool = False):
    """(model, None) when the experiment supports an APMT breakdown, else (None, reason); (None, None)
    when it has nothing APMT could use (no instruction counts, no MPI profile, no timers given).
    ``max_terms``, ``negative``: the report's --terms, --negative (the kernels' time models are its
    model set's)."""
    from .counters import resolve
    from .model import fit_apmt

    comp_paths = [c for c in exp.data["callpath"].cat.categories
                  if not (str(c) in ("MPI", "APP") or str(c).startswith("MPI->"))]
    has_mpi = len(comp_paths) < len(exp.data["callpath"].cat.categories)
    has_instr = bool(comp_paths) and resolve(exp.select(callpath=comp_paths, literal=True)).get("instructions") is not None
    if not has_instr and not has_mpi and not timers:
        return None, None
    if not has_instr and not has_mpi:
        return None, ("no instruction counts on the functions (collect with cachegrind or counters): the APMT "
                      "computation model needs them")
    model = fit_apmt(exp, machine, timers=timers, threshold=threshold, comm_time_procs_max=comm_max_procs,
                     scaling=scaling, max_terms=max_terms, negative=negative)
    if not any(k.cpi is not None or k.time_model is not None for k in model.kernels) and model.comm is None:
        return None, ("no kernel has a CPI: the profile has no cycles counter or sampled time, and no application "
                      "timer is mapped to a kernel (give --timer KERNEL=CALLPATH, e.g. compute_sweep=app->compute), "
                      "and no MPI profile to model the communication")
    # no kernel with a time but a communication model: the breakdown `predict --breakdown` prints (its
    # communication, the kernels said not in the total), not refused
    return model, None


def breakdown_series(model, target: Mapping[str, float]) -> dict:
    """The report's ``apmt`` section (module docstring)."""
    procs = model.procs
    if procs is None:
        raise PerfcastError("the APMT breakdown is drawn against the process count; the experiment has no "
                            "process-count parameter")
    at = {p: float(target[p]) for p in model.parameters if p in target}
    missing = [p for p in model.parameters if p not in at]
    if missing:
        raise PerfcastError(f"the report target has no value for {', '.join(missing)}")
    xs = sorted({float(v) for v in model.profiled[procs].unique()} | {at[procs]})
    comp, mem, comm, totals = [], [], [], []
    has_mem = False
    left_out: set[str] = set()
    in_any = False
    for x in xs:
        pr = model.predict({**at, procs: x})
        comp.append(sum(v["computation"] or 0.0 for v in pr.kernels.values() if v["total"] is not None))
        mem.append(sum(v["memory"] or 0.0 for v in pr.kernels.values() if v["total"] is not None))
        has_mem = has_mem or any(v["memory"] is not None for v in pr.kernels.values())
        comm.append(pr.comm_total)
        totals.append(pr.total)
        left_out |= {k for k, v in pr.kernels.items() if v["total"] is None}
        in_any = in_any or any(v["total"] is not None for v in pr.kernels.values())
    # no kernel in the total at any point: the computation is not modelled (said), not 0 s
    comps = {"computation": comp} if in_any else {}
    if has_mem:
        comps["memory"] = mem
    if model.comm is not None:
        comps["communication"] = comm
    fixed = ", ".join(f"{p}={at[p]:g}" for p in model.parameters if p != procs)
    note = [f"APMT prediction (T = computation + BF_mem x memory + BF_comm x communication) per {procs}"
            + (f" at {fixed}" if fixed else "") + f"; {procs}={at[procs]:g} is the target, the others were profiled."]
    in_total = [k.name for k in model.kernels if k.name not in left_out]
    if in_total:
        note.append(f"Kernels in the total: {', '.join(in_total)}.")
    if left_out:
        note.append(f"Not in the total (no CPI: no cycles counter, no time mapped): {', '.join(sorted(left_out))}"
                    + ("; the computation is not modelled: the total is the communication's." if not in_any else "."))
    if not model.kernels:
        note.append("No instruction counts on the functions (collect with cachegrind or counters): the computation "
                    "is not modelled; the total is the communication's.")
    elif in_any and not has_mem:
        note.append("Memory is not split off (no stall counter): the effective CPI includes it.")
    if model.comm is None:
        note.append("No MPI profile: communication is not modelled.")
    # what the model itself says (oversubscribed runs, missing counters, what Eq 5 refined, ...) and
    # what its prediction at the target adds: the notes `predict --breakdown` prints
    said = list(dict.fromkeys([*model.notes, *model.predict(at).notes]))
    return {"x": procs, "points": xs, "components": comps, "unit": "s", "note": " ".join(note),
            "notes": said, "totals": totals, "at": at}

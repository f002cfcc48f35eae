"""Hardware-counter roles: which metric of a profile means what (cachegrind, perf stat, PAPI).

A role is filled by the first metric (case-insensitive) the profile has; a role given as a sum
(cachegrind's D1 misses = D1mr + D1mw) needs all its parts.  What a missing role costs is said in
:data:`INSIGHT`, so a model never invents a counter.
"""

from __future__ import annotations

from ..experiment import Experiment

#: role -> alternatives; an alternative is a tuple of metric names that are summed
ROLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "instructions": (("Ir",), ("instructions",), ("PAPI_TOT_INS",), ("INST_RETIRED.ANY",), ("INST_RETIRED",)),
    "cycles": (("cycles",), ("PAPI_TOT_CYC",), ("CPU_CLK_UNHALTED.THREAD_P",), ("CPU_CLK_UNHALTED",), ("cpu-cycles",)),
    "loads": (("Dr",), ("PAPI_LD_INS",), ("L1-dcache-loads",), ("MEM_UOPS_RETIRED.ALL_LOADS",)),
    "stores": (("Dw",), ("PAPI_SR_INS",), ("L1-dcache-stores",), ("MEM_UOPS_RETIRED.ALL_STORES",)),
    "l1_misses": (("D1mr", "D1mw"), ("PAPI_L1_DCM",), ("L1-dcache-load-misses",)),
    "l2_misses": (("PAPI_L2_DCM",), ("PAPI_L2_TCM",), ("l2_rqsts.miss",)),
    "llc_misses": (("DLmr", "DLmw"), ("PAPI_L3_TCM",), ("LLC-load-misses",), ("LONGEST_LAT_CACHE.MISS",)),
    "stall_cycles": (("stalled-cycles-backend",), ("PAPI_RES_STL",), ("RESOURCE_STALLS.ANY",),
                     ("CYCLE_ACTIVITY.STALLS_TOTAL",)),
    "store_stalls": (("RESOURCE_STALLS.ST",),),
    "fp_ops": (("PAPI_FP_OPS",), ("PAPI_DP_OPS",), ("fp_ops",)),
}

INSIGHT = {
    "instructions": "the counter-based computation model (T_comp = N_instr x CPI / f); the kernel time is "
                    "modelled directly instead",
    "cycles": "a measured CPI (cycles / instructions); an effective CPI from measured time x f / instructions "
              "is used where the kernel has a time",
    "loads": "L1 hits (accesses - L1 misses), so T_mem lacks its L1 part",
    "stores": "stores in the accesses (only loads count as accesses)",
    "l1_misses": "L1 misses, so neither L1 nor L2 hits can be separated",
    "l2_misses": "a separate L2 level (hits below L1 are attributed to the last-level cache)",
    "llc_misses": "main-memory accesses (T_mm) and the contention check E",
    "stall_cycles": "BF_mem = T_stall / T_mem (the non-overlapped share of memory time), and with it the "
                    "split of the kernel time into computation and memory",
    "store_stalls": "the share of store stalls in the memory stalls",
    "fp_ops": "floating-point rates and efficiency",
}


def resolve(exp: Experiment) -> dict[str, tuple[str, ...] | None]:
    """role -> the metric names that make it up in ``exp`` (None when absent)."""
    low = {m.lower(): m for m in exp.metrics}
    out = {}
    for role, alts in ROLES.items():
        out[role] = None
        for alt in alts:
            if all(a.lower() in low for a in alt):
                out[role] = tuple(low[a.lower()] for a in alt)
                break
    return out


def missing_insights(roles: dict) -> list[str]:
    return [f"no {r.replace('_', ' ')} counter: unavailable -- {INSIGHT[r]}" for r, v in roles.items() if v is None]

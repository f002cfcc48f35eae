"""Communication projection between the two networks of one cluster (stackhpc hpc-tests data).

1. Point-to-point, cross-benchmark: the "application" makes N calls at each message size; its base
   profile (elapsed) and the truth on the target come from OSU osu_latency on InfiniBand and RoCE;
   the projection uses the *IMB PingPong* tables of the two networks (a different benchmark).
2. Collectives, leave-one-size-out: Allreduce/Allgather/Alltoall at 64 ranks; the tabulated size
   being projected is removed from both tables, so the time comes from interpolation between
   the neighbouring sizes; truth = the removed OSU value on the target.

Error = |projected / measured - 1| on the target.  Usage: .venv/bin/python bench/projection_comm.py [--json]
"""

import os
from pathlib import Path
import json
import sys

import numpy as np

from perfcast.shared_data import shared_data_dir
from perfcast.projection.comm import MicroTable, RoutineProfile, load_micro, project_comm
_SHARED = shared_data_dir()  # $PERFCAST_SHARED_DATA, else shared/data beside the checkout

DATA = str(_SHARED / "mpi/stackhpc_hpctests_imb_osu.csv")
PAIRS = [("alaska/ib-gcc9-impi-verbs", "alaska/roce-gcc9-impi-verbs"),
         ("alaska/ib-gcc9-openmpi4-ucx", "alaska/roce-gcc9-openmpi4-ucx"),
         ("csd3/cclake-ib-gcc9-ompi3-ucx", "csd3/cclake-roce-gcc9-ompi3-ucx")]


def run():
    t = load_micro(DATA)
    d = t.data
    imb = MicroTable(d[d["routine"] == "PingPong"].reset_index(drop=True))
    out = {"p2p": {}, "collectives": {}}
    for base, target in PAIRS + [(b, a) for a, b in PAIRS]:
        lat = d[d["routine"] == "latency"]
        lb = lat[lat["system"] == base].set_index("bytes")["time_us"]
        lt = lat[lat["system"] == target].set_index("bytes")["time_us"]
        sizes = [s for s in lb.index if s in lt.index and s > 0]
        errs = []
        for s in sizes:
            prof = [RoutineProfile("Send", 1000.0, float(s), 1000.0 * lb[s] * 1e-6)]
            r = project_comm(prof, 2, imb, base, target, compute_base=0.0, sf_comp=1.0)
            errs.append(abs(r.elapsed_target / (1000.0 * lt[s] * 1e-6) - 1))
        # one mixed profile: equal call counts at every size
        prof = [RoutineProfile("Send", 100.0, float(s), 100.0 * lb[s] * 1e-6) for s in sizes]
        r = project_comm(prof, 2, imb, base, target, compute_base=0.0, sf_comp=1.0)
        truth = sum(100.0 * lt[s] * 1e-6 for s in sizes)
        naive = sum(p.elapsed for p in prof)
        out["p2p"][f"{base} -> {target}"] = {"mean_error_per_size": float(np.mean(errs)),
                                             "median_error_per_size": float(np.median(errs)),
                                             "mixed_profile_error": abs(r.elapsed_target / truth - 1),
                                             "unchanged_time_error": abs(naive / truth - 1)}
    for base, target in PAIRS + [(b, a) for a, b in PAIRS]:
        for routine in ("Allreduce", "Allgather", "Alltoall"):
            c = d[d["routine"] == routine]
            cb, ct = c[c["system"] == base], c[c["system"] == target]
            if cb.empty or ct.empty:
                continue
            sizes = sorted(set(cb["bytes"]) & set(ct["bytes"]))
            errs, naive = [], []
            for s in sizes[1:-1]:
                tab = MicroTable(c[(c["bytes"] != s)].reset_index(drop=True))
                eb = float(cb[cb["bytes"] == s]["time_us"].iloc[0])
                et = float(ct[ct["bytes"] == s]["time_us"].iloc[0])
                prof = [RoutineProfile(routine, 1000.0, float(s), 1000.0 * eb * 1e-6)]
                r = project_comm(prof, 64, tab, base, target, compute_base=0.0, sf_comp=1.0)
                errs.append(abs(r.elapsed_target / (1000.0 * et * 1e-6) - 1))
                naive.append(abs(eb / et - 1))
            out["collectives"][f"{routine} {base} -> {target}"] = {
                "mean_error": float(np.mean(errs)), "median_error": float(np.median(errs)),
                "unchanged_time_error": float(np.mean(naive)), "sizes": len(errs)}
    allp = [v["mean_error_per_size"] for v in out["p2p"].values()]
    allc = [v["mean_error"] for v in out["collectives"].values()]
    out["summary"] = {"p2p_mean_error": float(np.mean(allp)), "collective_mean_error": float(np.mean(allc)),
                      "p2p_unchanged_error": float(np.mean([v["unchanged_time_error"] for v in out["p2p"].values()])),
                      "collective_unchanged_error": float(np.mean([v["unchanged_time_error"]
                                                                  for v in out["collectives"].values()]))}
    return out


if __name__ == "__main__":
    res = run()
    if "--json" in sys.argv:
        print(json.dumps(res, indent=1))
    else:
        for k, v in res["p2p"].items():
            print(f"p2p  {k:70s} per-size mean {v['mean_error_per_size']:.1%} median {v['median_error_per_size']:.1%}"
                  f"  mixed profile {v['mixed_profile_error']:.1%}  (time unchanged: {v['unchanged_time_error']:.1%})")
        for k, v in res["collectives"].items():
            print(f"coll {k:70s} mean {v['mean_error']:.1%} median {v['median_error']:.1%}"
                  f"  (time unchanged: {v['unchanged_time_error']:.1%})")
        print("summary", {k: f"{x:.1%}" for k, x in res["summary"].items()})

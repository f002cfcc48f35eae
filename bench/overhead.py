"""Profiling overhead of each perfcast collector on an example MPI application.

The application's own timed region (its ``perfcast-timer total`` line) is compared between plain runs
and runs under each collector, alternating base and profiled runs (base, perf, mpi, base, perf, mpi,
...) so drift and background load hit all of them alike.  Printed per collector: the median timed
region, the overhead ratio (median profiled / median base - 1), and the min-based ratio, which is
less sensitive to a busy machine.  Target (APMT): <= 3 % for perf sampling and PMPI.  cachegrind is
measured on a smaller problem and reported as a slow-down factor.

    .venv/bin/python bench/overhead.py [--reps 5] [--np 2] [--size 1024] [--iters 100] [--json out.json]

Needs ``make -C examples`` (examples/jacobi/jacobi), mpirun, and perf / valgrind / the PMPI shim for
the respective collectors (unavailable ones are skipped with the reason).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from perfcast.collect import collectors as coll  # noqa: E402
from perfcast.collect.campaign import CampaignSpec, build_argv, write_wrapper  # noqa: E402
from perfcast.collect.launchers import RunRequest, execute  # noqa: E402


def one_run(spec: CampaignSpec, config: dict, colls: list, run_dir: Path, timer: str) -> float:
    run_dir.mkdir(parents=True, exist_ok=True)
    wrapper = write_wrapper(run_dir, colls)
    env, mpi_args = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}, []
    for c in colls:
        env.update(c.env(run_dir))
        mpi_args += c.mpirun_args(run_dir)
    argv = build_argv(spec, config, wrapper, mpi_args)
    res = execute(RunRequest(id=run_dir.name, config=config, mode="main", attempt=0, argv=argv, env=env,
                             run_dir=str(run_dir), cwd=str(REPO), timeout=600))
    if res["status"] != "ok":
        raise SystemExit(f"run failed ({' '.join(argv)}): {res['reason']}")
    timers = coll.TimeCollector().timers(res["stdout_tail"])
    if (timer, None) not in timers:
        raise SystemExit(f"no 'perfcast-timer {timer}' in the output of {' '.join(argv)}")
    for c in colls:  # the profile must be readable, or the overhead means nothing
        c.collect(run_dir, {"wall": res["wall"], "stdout_tail": res["stdout_tail"]})
    return timers[(timer, None)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", default=str(REPO / "examples/jacobi/jacobi"))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--freq", type=int, default=999, help="perf sampling frequency")
    ap.add_argument("--cg-size", type=int, default=256)
    ap.add_argument("--cg-iters", type=int, default=20)
    ap.add_argument("--timer", default="total")
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args(argv)
    if not Path(a.app).is_file():
        raise SystemExit(f"{a.app} not built: run make -C examples")
    cmd = f"mpirun -np {a.np} {{wrap}} {a.app} -n {{n}} -i {{i}} -q"
    spec = CampaignSpec(command=cmd, parameters={"n": [a.size], "i": [a.iters]})
    big = {"n": float(a.size), "i": float(a.iters)}
    small = {"n": float(a.cg_size), "i": float(a.cg_iters)}
    candidates = {"perf": coll.PerfCollector(a.freq), "mpi": coll.MpiCollector()}
    usable, skipped = {}, {}
    for name, c in candidates.items():
        ok, why = c.available()
        (usable.__setitem__(name, c) if ok else skipped.__setitem__(name, why))
    times: dict[str, list[float]] = {"base": [], **{n: [] for n in usable}}
    with tempfile.TemporaryDirectory(prefix="perfcast-overhead.") as tmp:
        tmp = Path(tmp)
        k = 0
        for rep in range(a.reps):
            for name in ["base", *usable]:
                colls = [] if name == "base" else [usable[name]]
                times[name].append(one_run(spec, big, colls, tmp / f"{name}.{rep}", a.timer))
                k += 1
                print(f"  {name:5s} rep {rep}: {times[name][-1]:.4f} s", file=sys.stderr)
        results = {"app": a.app, "np": a.np, "size": a.size, "iters": a.iters, "reps": a.reps, "timer": a.timer,
                   "times": times, "skipped": skipped, "collectors": {}}
        base_med, base_min = statistics.median(times["base"]), min(times["base"])
        for name in usable:
            med, mn = statistics.median(times[name]), min(times[name])
            results["collectors"][name] = {"median": med, "overhead_median": med / base_med - 1,
                                           "overhead_min": mn / base_min - 1}
        cg = coll.CachegrindCollector()
        ok, why = cg.available()
        if ok:
            cg_base, cg_prof = [], []
            for rep in range(max(2, a.reps // 2)):
                cg_base.append(one_run(spec, small, [], tmp / f"cgbase.{rep}", a.timer))
                cg_prof.append(one_run(spec, small, [cg], tmp / f"cg.{rep}", a.timer))
            results["cachegrind"] = {"size": a.cg_size, "iters": a.cg_iters, "base": cg_base, "profiled": cg_prof,
                                     "slowdown": statistics.median(cg_prof) / statistics.median(cg_base)}
        else:
            skipped["cachegrind"] = why
    print(f"timed region '{a.timer}' of {Path(a.app).name} -n {a.size} -i {a.iters} on {a.np} ranks, "
          f"{a.reps} alternated repetitions")
    print(f"  base        median {base_med:.4f} s   min {base_min:.4f} s")
    for name, r in results["collectors"].items():
        verdict = "ok" if r["overhead_median"] <= 0.03 else "ABOVE 3% target"
        print(f"  {name:10s}  median {r['median']:.4f} s   overhead {100 * r['overhead_median']:+.1f}% (median), "
              f"{100 * r['overhead_min']:+.1f}% (min)   [{verdict}]")
    if "cachegrind" in results:
        c = results["cachegrind"]
        print(f"  cachegrind  slow-down x{c['slowdown']:.1f} (-n {c['size']} -i {c['iters']})")
    for name, why in skipped.items():
        print(f"  {name:10s}  skipped: {why}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

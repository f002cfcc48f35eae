"""`perfcast model FILE --json` in one process, with `--workers N` and with `--dask ADDRESS` on a
local Dask cluster of N worker processes (issue 17, item 4).

    .venv/bin/python bench/dask_scale.py                 # 60k one-parameter series, N = 2
    .venv/bin/python bench/dask_scale.py --series 10000 --workers 2

Each run is one subprocess `python -m perfcast model FILE --json [...]` with stdout to a file,
timed per child with `os.wait4` (wall, CPU of that child -- the cluster's workers are other
processes, so their CPU is not in the --dask row).  The cluster (`distributed.LocalCluster`, N
workers of one thread on 127.0.0.1) is started before and outside the timed runs, in its own
process, which writes its address to a file when ready.  The outputs must be byte-identical
(printed; exit 1 otherwise).  Input: bench/cli_scale.py's one-parameter file of that size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cli_scale  # noqa: E402

CLUSTER = """
import sys, time, os
from distributed import LocalCluster
with LocalCluster(n_workers=int(sys.argv[2]), threads_per_worker=1, processes=True, host="127.0.0.1",
                  dashboard_address=":0") as lc:
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write(lc.scheduler_address)
    os.replace(tmp, sys.argv[1])
    sys.stdin.read()          # until the benchmark closes our stdin
"""


def run(args: list[str], out: Path) -> tuple[float, float]:
    """(wall s, CPU s of the child) of `python -m perfcast ARGS > out`."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    t0 = time.perf_counter()
    with open(out, "wb") as f:
        p = subprocess.Popen([sys.executable, "-m", "perfcast", *args], stdout=f, env=env)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"perfcast {' '.join(args)}: exit {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=60000)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    path, count, _ = cli_scale.experiment_file(1, a.series)
    out = cli_scale.OUT
    addr_file = out / f"dask-address-{os.getpid()}"
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    t0 = time.perf_counter()
    cluster = subprocess.Popen([sys.executable, "-c", CLUSTER, str(addr_file), str(a.workers)], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        while not addr_file.exists():
            if cluster.poll() is not None:
                sys.exit("the local Dask cluster did not start")
            time.sleep(0.1)
        address = addr_file.read_text()
        started = time.perf_counter() - t0
        print(f"{count} series, {path.name}; cluster of {a.workers} workers at {address} up in {started:.1f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
        rows = []
        for label, extra in (("1 process", []), (f"--workers {a.workers}", ["--workers", str(a.workers)]),
                             (f"--dask ({a.workers} workers)", ["--dask", address])):
            dest = out / f"dask-bench-{len(rows)}.json"
            wall, cpu = run(["model", str(path), "--json", *extra], dest)
            rows.append((label, wall, cpu, dest.read_bytes()))
            print(f"  {label:<22} wall {wall:7.2f} s   cpu {cpu:7.2f} s   load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(30)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()
        addr_file.unlink(missing_ok=True)
    same = all(r[3] == rows[0][3] for r in rows)
    print("outputs byte-identical:", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Measure the real-code campaigns that bench/realdata.py's splits cg-p, jacobi-p, hpccg-n and
hpccg-p read (issue 16, item 2), with perfcast's own campaign tool (`perfcast collect`), as a user
would, and copy the small results to bench/data/<campaign>/.

    # the third-party mini-app, HPCCG (BSD-3, Sandia), built from source:
    git clone https://github.com/Mantevo/HPCCG /tmp/hpccg        # the data: commit 80dd2f12a4e8
    .venv/bin/python bench/measure_codes.py --hpccg-src /tmp/hpccg            # all campaigns
    .venv/bin/python bench/measure_codes.py --only cg-p,jacobi-p              # no HPCCG needed

Needs Open MPI (mpicc, mpicxx, mpirun), valgrind, and a C compiler for perfcast's PMPI shim.
It builds examples/ (make -C examples) and HPCCG (out of tree, in bench/out/build/hpccg, with
mpicxx -O2 -g -fno-omit-frame-pointer -DUSING_MPI), then runs each campaign into
bench/out/campaigns/<name>.perfcast (journal beside it; rerunning resumes) and copies the
experiment store plus the campaign's campaign.json and journal.jsonl (gzipped) and a
PROVENANCE.md to bench/data/<name>/
(the per-run directories with raw profiler output stay in bench/out).

Campaigns (collectors time, cachegrind, mpi = PMPI call counts and bytes per rank; cachegrind is
one deterministic run per configuration, counting only inside the named kernels and their
callees (--cachegrind-toggle), so MPI start-up is left out):

  cg-p      examples/cg -d 3 -n 32 -i 50 -t 0 (CG on a 32^3 grid, exactly 50 iterations),
            strong scaling p = 1, 2, 4, 8, 16
  jacobi-p  examples/jacobi -n 256 -i 50 (2D, 256^2 grid, 50 sweeps), p = 1, 2, 4, 8, 16
  hpccg-n   HPCCG nx = ny = nz = n per rank (150 CG iterations, fixed), p = 2,
            n = 16, 20, 24, 28, 32, 40
  hpccg-p   HPCCG n = 16 per rank (weak scaling), p = 1, 2, 4, 8, 16

Times: 3 repetitions per configuration.  The machine this was measured on has 2 cores, so at
p > 2 ranks share cores and their times measure descheduling (oversubscription): the splits use
times only from hpccg-n (p = 2); the counts (cachegrind, PMPI) do not depend on it.
HPCCG prints its "Time Summary" and "FLOPS Summary" with the same labels; the timer regex takes
only values below 10 written without a positive exponent (the times; FLOPS are > 1e6 and MFLOPS
> 10 at these sizes), so app->Total/DDOT/WAXPBY/SPARSEMV are HPCCG's own timers (rank 0's).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "campaigns"
DATA = HERE / "data"
HPCCG_SRC = ["main.cpp", "generate_matrix.cpp", "read_HPC_row.cpp", "compute_residual.cpp", "mytimer.cpp",
             "dump_matlab_matrix.cpp", "HPC_sparsemv.cpp", "HPCCG.cpp", "waxpby.cpp", "ddot.cpp",
             "make_local_matrix.cpp", "exchange_externals.cpp", "YAML_Element.cpp", "YAML_Doc.cpp"]
HPCCG_TIMERS = r"^  (Total|DDOT|WAXPBY|SPARSEMV)\s*: ([0-9]\.[0-9]*(?:e-[0-9]+)?)$"
ROOT_OPT = ["--allow-run-as-root"] if os.geteuid() == 0 else []


def campaigns(hpccg: Path | None):
    cg, jac = ROOT / "examples" / "cg" / "cg", ROOT / "examples" / "jacobi" / "jacobi"
    mpirun = ["mpirun", *ROOT_OPT, "-np", "{p}", "{wrap}"]
    out = {
        "cg-p": dict(params={"p": "1,2,4,8,16"}, cmd=[*mpirun, str(cg), "-d", "3", "-n", "32", "-i", "50", "-t", "0", "-q"],
                     toggle=["spmv", "halo_exchange", "dot", "axpy", "xpby"], extra=[]),
        "jacobi-p": dict(params={"p": "1,2,4,8,16"}, cmd=[*mpirun, str(jac), "-n", "256", "-i", "50", "-q"],
                         toggle=["compute_sweep", "halo_exchange", "reduce_residual"], extra=[]),
    }
    if hpccg is not None:
        tog = ["HPCCG*", "generate_matrix*", "make_local_matrix*"]
        out["hpccg-n"] = dict(params={"p": "2", "n": "16,20,24,28,32,40"},
                              cmd=[*mpirun, str(hpccg), "{n}", "{n}", "{n}"], toggle=tog,
                              extra=["--timer-regex", HPCCG_TIMERS])
        out["hpccg-p"] = dict(params={"p": "1,2,4,8,16", "n": "16"},
                              cmd=[*mpirun, str(hpccg), "{n}", "{n}", "{n}"], toggle=tog,
                              extra=["--timer-regex", HPCCG_TIMERS])
    return out


def build(hpccg_src: Path | None) -> Path | None:
    subprocess.run(["make", "-C", str(ROOT / "examples")], check=True)
    if hpccg_src is None:
        return None
    bdir = HERE / "out" / "build" / "hpccg"
    bdir.mkdir(parents=True, exist_ok=True)
    exe = bdir / "test_HPCCG"
    if not exe.exists():
        subprocess.run(["mpicxx", "-O2", "-g", "-fno-omit-frame-pointer", "-DUSING_MPI", "-o", str(exe),
                        *[str(hpccg_src / f) for f in HPCCG_SRC], "-lm"], check=True)
    return exe


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "unknown")
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    cc = subprocess.run(["mpicc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return (f"`nproc` = {os.cpu_count()}, CPU model \"{cpu}\" (/proc/cpuinfo), {platform.system()} "
            f"{platform.release()} {platform.machine()}; {' '.join(mpi)}; {vg}; {' '.join(cc)}")


def provenance(name: str, c: dict, argv: list[str], hpccg_commit: str | None) -> str:
    head = json.loads((OUT / f"{name}.perfcast.campaign" / "campaign.json").read_text())
    runs = [json.loads(ln) for ln in (OUT / f"{name}.perfcast.campaign" / "journal.jsonl").read_text().splitlines()
            if ln.strip()]
    starts = sorted(r["start"] for r in runs if r.get("start"))
    lines = [f"# {name}: provenance", "",
             f"Measured by `bench/measure_codes.py` (perfcast's own `perfcast collect`) on "
             f"{starts[0][:10] if starts else datetime.date.today()} "
             f"({starts[0] if starts else '?'} .. {max(r.get('end') or '' for r in runs)}), "
             f"{len(runs)} runs ({sum(r.get('status') == 'ok' for r in runs)} ok).", "",
             f"Machine: {machine()}.", "",
             "The exact command (run in a scratch working directory, bench/out/campaigns/"
             f"{name}.work; `{{wrap}}` is where perfcast puts valgrind for the cachegrind runs):", "",
             "    python " + shlex.join(argv[1:]), "",
             "Build: " + ("examples/Makefile (`make -C examples`: mpicc -O2 -g -fno-omit-frame-pointer)."
                          if "hpccg" not in name else
                          f"HPCCG (https://github.com/Mantevo/HPCCG, commit {hpccg_commit or 'unknown'}), "
                          "`mpicxx -O2 -g -fno-omit-frame-pointer -DUSING_MPI -o test_HPCCG <its 14 .cpp "
                          "files> -lm`; HPCCG's nx ny nz are per rank (weak scaling in p); 150 CG iterations "
                          "always (tolerance 0)."), "",
             "Files: `" + name + ".perfcast/` is the experiment perfcast wrote (read it with "
             "`perfcast.io.load`); `campaign.json` (spec + machine) and `journal.jsonl.gz` (one record per "
             "run: command, environment, host, start/end, exit code, timers, values) are the campaign's "
             "journal.  The per-run directories (raw callgrind/PMPI output) are not kept.", "",
             "**Times at p > 2 are oversubscribed**: the machine has 2 cores, so with more ranks they "
             "share cores and the times measure descheduling, not the code.  Other jobs ran on the machine "
             "at the same time (load average 7-14 on the 2 cores while these were measured), so even the "
             "p <= 2 times are noisy.  The cachegrind counts (one run per configuration, counted only inside "
             f"{', '.join(c['toggle'])} and their callees) and the PMPI call counts and bytes do not depend "
             "on this (except the MPI library's own polling functions, which the benchmark leaves out)."]
    if head.get("machine"):
        m = head["machine"]
        lines += ["", f"perfcast's machine record (campaign.json, \"machine\"): {m.get('logical_cpus')} logical CPUs, "
                  f"{m.get('physical_cores')} physical cores, {m.get('cpu_model')}, "
                  f"{(m.get('memory_bytes') or 0) / 2**30:.1f} GiB."]
    lines += ["", "Re-measure: `python bench/measure_codes.py --hpccg-src <HPCCG checkout> --only " + name + "` "
              "(it builds the code, runs the command above and rewrites this folder)."]
    return "\n".join(lines) + "\n"


def run(name: str, c: dict, python: str, hpccg_commit: str | None = None) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    work = OUT / f"{name}.work"          # HPCCG writes a YAML report into its working directory
    work.mkdir(exist_ok=True)
    store = OUT / f"{name}.perfcast"
    argv = [python, "-m", "perfcast", "collect", "-o", str(store), "--collect", "time,cachegrind,mpi",
            "--reps", "3", *[a for k, v in c["params"].items() for a in ("-P", f"{k}={v}")],
            *[a for t in c["toggle"] for a in ("--cachegrind-toggle", t)], *c["extra"], "--", *c["cmd"]]
    print("+", " ".join(argv), flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(argv, check=True, cwd=work, env=env)
    dest = DATA / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(store, dest / f"{name}.perfcast")
    shutil.copy2(OUT / f"{name}.perfcast.campaign" / "campaign.json", dest / "campaign.json")
    with open(OUT / f"{name}.perfcast.campaign" / "journal.jsonl", "rb") as src, \
            gzip.GzipFile(dest / "journal.jsonl.gz", "wb", mtime=0) as gz:
        shutil.copyfileobj(src, gz)
    (dest / "PROVENANCE.md").write_text(provenance(name, c, argv, hpccg_commit))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hpccg-src", type=Path, default=None, help="HPCCG source tree (github.com/Mantevo/HPCCG)")
    ap.add_argument("--only", default=None, help="comma-separated campaign names")
    ap.add_argument("--hpccg-commit", default=None,
                    help="the HPCCG commit, for PROVENANCE.md (default: git rev-parse HEAD in --hpccg-src)")
    ap.add_argument("--python", default=sys.executable, help="the Python with perfcast installed")
    args = ap.parse_args(argv)
    exe = build(args.hpccg_src)
    todo = campaigns(exe)
    names = args.only.split(",") if args.only else list(todo)
    for n in names:
        if n not in todo:
            ap.error(f"unknown campaign {n!r} (HPCCG campaigns need --hpccg-src); choose from {', '.join(todo)}")
    commit = args.hpccg_commit
    if commit is None and args.hpccg_src is not None:
        r = subprocess.run(["git", "-C", str(args.hpccg_src), "rev-parse", "HEAD"], capture_output=True, text=True)
        commit = r.stdout.strip() or None
    for n in names:
        run(n, todo[n], args.python, commit)


if __name__ == "__main__":
    main()

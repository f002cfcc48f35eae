"""Every command through the CLI at 1k .. 1M series, side by side with Extra-P 4.2.5 (issue 17, item 3).

Each measurement is one subprocess ``python -m perfcast COMMAND ...`` -- exactly what a user runs,
interpreter start and imports included -- with stdout redirected to a file (as ``> out.json``);
one that takes under 20 s is run ``--repeat`` times (default 3) and the run of median wall time is
shown, as is the median of as many runs of Extra-P.  Per
command, parameter count and size it prints: wall time, CPU time (user + system of that child,
from ``os.wait4``), peak resident memory of that child (``ru_maxrss`` of ``os.wait4``, per child,
not the cumulative RUSAGE_CHILDREN), wall time per series, the ratio of Extra-P's time per
callpath (reading + modelling, bench/vs_extrap.py's helper, run in the same invocation on files
written by this script, at the largest --extrap count) to perfcast's wall time per series (for
``show`` and ``import``: Extra-P's reading alone; PASS/FAIL uses this wall-time ratio), the same
ratio of whole-process CPU times ("cpu vs E-P": Extra-P's child including its import, perfcast's
including start-up; less sensitive to the load of a shared machine), and the growth exponent of the wall time from the previous
size, log(t2/t1) / log(S2/S1) (1.0 = linear).

Inputs: Extra-P text files, series ``c0 + c1*b(p)`` (one parameter, p = 4..128, 6 points) or a
product / sum of one block per parameter (two parameters, 5x5 points, p = 4..64, n = 16..256),
blocks drawn from Extra-P's default hypothesis space (bench/vs_extrap.BLOCKS), c0 log-uniform in
[1, 1000], the term 10-95% of the value at the largest point, 5 repetitions, 5% band noise.  Cached
under bench/out/cli-<sp|mp>-<size>.txt (gitignored); the generator writes 1M series in well under
a minute.

Commands (``--commands`` subsets them):
  startup   ``perfcast --version`` (interpreter + CLI import; size independent, run once)
  read      ``perfcast show FILE`` (reading and describing the experiment)
  import    ``perfcast import FILE -o X.perfcast --force`` (read and store)
  model     ``perfcast model FILE`` (the table)
  json      ``perfcast model FILE --json``
  parquet   ``perfcast model FILE -o X.parquet`` -- only when ``model --help`` lists ``-o``,
            else reported "n/a"
  predict   ``perfcast predict FILE --at p=512[,n=1024] --json``
  check     ``perfcast check FILE --expect "*: O(p^2)"`` (exit 1 = a violation found; both count as ok)
  report    ``perfcast report FILE -o X.html --force`` (the CLI path, unlike bench/report_scale.py)

Targets (issue 17; printed next to the measured numbers, PASS/FAIL):
  - model --json, predict --json, check and the table: >= 300x Extra-P per callpath on 1 parameter,
    >= 100x on 2 parameters (the issue states them at 30k series; add 30000 to --sizes to measure
    exactly there; every row shows its ratio against the target).
  - 1,000,000 series (1 parameter, 6 points) through the CLI to Parquet in <= 60 s and <= 4 GB;
    growth exponent <= 1.1 from 10k to 1M; 10,000,000 series (``--sizes 1M,10M --commands parquet
    --workers 2``: a 2.8 GB input, generated once, ~5 min) in <= 600 s, streamed (inputs from 256 MB
    on: perfcast.pipeline).  "peak MB" is the perfcast process's own peak (``ru_maxrss``: it, or its
    largest forked worker), "tree MB" the largest sum of the proportional set sizes of the process
    and its workers (sampled; a page shared after the fork counts once); the memory targets are
    checked against the larger of the two.
  - report on 10k callpaths <= 10 s.
  - 200 MB text input <= 20 s and <= 1 GB (``--sizes ...,200MB``: a 1-parameter file of that size,
    read by ``show`` and ``import``).

A command that ran out of time (``--timeout``) or memory (``--mem-limit``, checked while it runs)
at one size is skipped at the larger ones, as is one whose predicted time (previous size, growth
at least linear) exceeds the timeout.  The machine is shared: the load average is printed with
every row.

    .venv/bin/python bench/cli_scale.py                      # everything (long: hours at 1M today)
    .venv/bin/python bench/cli_scale.py --quick              # a few minutes
    .venv/bin/python bench/cli_scale.py --sizes 1000,10000 --params 1 --commands json,predict \\
        --extrap 300 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import vs_extrap  # noqa: E402  (bench/vs_extrap.py: BLOCKS, bval, ensure_extrap, run_extrap)

OUT = HERE / "out"

P1 = [4, 8, 16, 32, 64, 128]          # one parameter: 6 points
P2 = ([4, 8, 16, 32, 64], [16, 32, 64, 128, 256])   # two parameters: 5x5 points
REPS = 5
NOISE = 0.05                            # band width: y = f (1 + U(-2.5%, 2.5%))

COMMANDS = ["startup", "read", "import", "model", "json", "parquet", "predict", "check", "report"]
#: commands whose per-callpath ratio has a target (1 parameter, 2 parameters)
RATIO_TARGET = {"model": (300, 100), "json": (300, 100), "predict": (300, 100), "check": (300, 100),
                "parquet": (300, 100)}
#: absolute targets: (command, params, size) -> (seconds, MB)
ABS_TARGET = {("parquet", 1, 1_000_000): (60.0, 4000.0), ("parquet", 1, 10_000_000): (600.0, None),
              ("report", 1, 10_000): (10.0, None),
              ("report", 2, 10_000): (10.0, None), ("read", 1, "200MB"): (20.0, 1000.0),
              ("import", 1, "200MB"): (20.0, 1000.0)}
GROWTH_TARGET = 1.1   # 10k -> 1M


# ---------------------------------------------------------------- pure helpers

#: measurements shorter than this are run ``--repeat`` times (the median shown); longer ones once
REPEAT_BELOW_S = 20.0


def growth_exponent(s1: float, t1: float, s2: float, t2: float) -> float:
    """log(t2/t1) / log(s2/s1): 1 = time linear in the size, 2 = quadratic."""
    if s1 <= 0 or s2 <= 0 or t1 <= 0 or t2 <= 0 or s1 == s2:
        return float("nan")
    return math.log(t2 / t1) / math.log(s2 / s1)


#: resident memory of a run that does not grow with the series (interpreter, numpy, pandas, pyarrow)
BASE_MB = 200.0


def grown_mb(peak_mb: float, factor: float) -> float:
    """A run's peak predicted from a smaller one's: the part above BASE_MB grows with the series."""
    base = min(peak_mb, BASE_MB)
    return base + (peak_mb - base) * factor


def parse_sizes(text: str) -> list:
    """'1k,10000,1M,200MB' -> [1000, 10000, 1000000, '200MB'] (k/M suffixes; 'NMB' = a text file of
    N megabytes)."""
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok.upper().endswith("MB"):
            out.append(f"{int(float(tok[:-2]))}MB")
            continue
        mult = 1
        if tok[-1] in "kK":
            mult, tok = 1000, tok[:-1]
        elif tok[-1] == "M":
            mult, tok = 1_000_000, tok[:-1]
        n = int(float(tok) * mult)
        if n > 0:                     # 0 (e.g. `--sizes2 0`): no size, not an empty file
            out.append(n)
    return out


def points(nparam: int) -> list[tuple]:
    if nparam == 1:
        return [(p,) for p in P1]
    return [(p, n) for p in P2[0] for n in P2[1]]


def truth_values(rng, nparam: int, count: int) -> np.ndarray:
    """Noise-free values (count, points) of ``count`` truths drawn as bench/vs_extrap.make_truths
    draws them ('one' kind), vectorised."""
    pts = np.array(points(nparam), dtype=float)
    nb = len(vs_extrap.BLOCKS)
    c0 = 10 ** rng.uniform(0, 3, count)
    share = rng.uniform(0.1, 0.95, count)
    ratio = share / (1 - share) * c0
    if nparam == 1:
        B = np.array([vs_extrap.bval(b, pts[:, 0]) for b in vs_extrap.BLOCKS])      # (42, points)
        bmax = B[:, -1]
        k = rng.integers(nb, size=count)
        return c0[:, None] + (ratio / bmax[k])[:, None] * B[k]
    Bp = np.array([vs_extrap.bval(b, pts[:, 0]) for b in vs_extrap.BLOCKS])
    Bn = np.array([vs_extrap.bval(b, pts[:, 1]) for b in vs_extrap.BLOCKS])
    pmax = np.array([vs_extrap.bval(b, P2[0][-1]) for b in vs_extrap.BLOCKS])
    nmax = np.array([vs_extrap.bval(b, P2[1][-1]) for b in vs_extrap.BLOCKS])
    kp = rng.integers(nb, size=count)
    kn = rng.integers(nb, size=count)
    product = rng.random(count) < 0.5
    prod = (ratio / (pmax[kp] * nmax[kn]))[:, None] * Bp[kp] * Bn[kn]
    summ = (ratio / 2 / pmax[kp])[:, None] * Bp[kp] + (ratio / 2 / nmax[kn])[:, None] * Bn[kn]
    return c0[:, None] + np.where(product[:, None], prod, summ)


def write_experiment(path: Path, nparam: int, count: int, seed: int = 1, chunk: int = 20_000) -> None:
    """An Extra-P text file of ``count`` series (regions r0..r{count-1}), written in chunks with one
    %-format per chunk (C speed; 1M one-parameter series ~ 350 MB)."""
    rng = np.random.default_rng(seed + 1000 * nparam)
    pts = points(nparam)
    params = ["p"] if nparam == 1 else ["p", "n"]
    head = "".join(f"PARAMETER {p}\n" for p in params) + "\n"
    head += "POINTS " + " ".join("( " + " ".join(str(v) for v in pt) + " )" for pt in pts) + "\n\nMETRIC time\n\n"
    one = "REGION r%d\n" + ("DATA" + " %.6g" * REPS + "\n") * len(pts) + "\n"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write(head)
        for a in range(0, count, chunk):
            m = min(chunk, count - a)
            f = truth_values(rng, nparam, m)                                  # (m, points)
            y = f[:, :, None] * (1 + rng.uniform(-NOISE / 2, NOISE / 2, size=(m, len(pts), REPS)))
            vals = np.empty((m, 1 + len(pts) * REPS), dtype=object)
            vals[:, 0] = np.arange(a, a + m)
            vals[:, 1:] = y.reshape(m, -1)
            fh.write((one * m) % tuple(vals.ravel().tolist()))
    tmp.replace(path)


def experiment_file(nparam: int, size, seed: int = 1) -> tuple[Path, int, float]:
    """(path, series, seconds spent generating: 0 when cached).  ``size`` 'NMB': a 1-parameter file
    of about N MB."""
    OUT.mkdir(exist_ok=True)
    tag = "" if seed == 1 else f"-s{seed}"
    if isinstance(size, str):
        mb = int(size[:-2])
        probe = OUT / f"cli-sp-probe{tag}.txt"
        if not probe.exists():
            write_experiment(probe, 1, 2000, seed)
        count = int(mb * 1e6 * 2000 / probe.stat().st_size)
        path = OUT / f"cli-sp-{mb}MB{tag}.txt"
    else:
        count = size
        path = OUT / f"cli-{'sp' if nparam == 1 else 'mp'}-{size}{tag}.txt"
    dt = 0.0
    if not path.exists():
        t0 = time.perf_counter()
        write_experiment(path, nparam, count, seed)
        dt = time.perf_counter() - t0
    return path, count, dt


# ---------------------------------------------------------------- measurement

def _status_mb(path: str, key: str) -> float | None:
    """The ``key:`` line of a /proc file in kB, as MB (None when the file or line is missing)."""
    with contextlib.suppress(OSError):
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    return None


def _rss_mb(pid: int) -> float:
    return _status_mb(f"/proc/{pid}/status", "VmRSS") or 0.0


def _pss_mb(pid: int) -> float:
    """Proportional set size of ``pid`` (each shared page divided among the processes sharing it);
    its RSS where the kernel gives no smaps_rollup."""
    pss = _status_mb(f"/proc/{pid}/smaps_rollup", "Pss")
    return _rss_mb(pid) if pss is None else pss


def _tree_mb(pid: int) -> float:
    """Memory of ``pid`` and all its descendants (forked workers): their proportional set sizes
    summed (pages a worker shares with the parent after the fork count once)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += _pss_mb(p)
        with contextlib.suppress(OSError):   # the process ended meanwhile
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
    return total


def run_measured(argv: list[str], stdout_path: Path, timeout: float, mem_limit_mb: float) -> dict:
    """Run ``argv`` as one child; wall, CPU (user+sys) and peak RSS of that child (os.wait4: its
    own, or its largest waited-for descendant's), and the peak of the memory of the child and its
    descendants (``tree_mb``: proportional set sizes summed, sampled every 0.1-0.2 s).

    The wall time ends when the child does (this thread blocks in ``os.wait4``); the memory is
    sampled by a second thread, less often than a short run's polling loop did (0.02 s: reading
    every process's smaps_rollup walks its page tables, which slowed a 0.8 s run by ~0.05 s and
    added up to one polling interval to its wall time)."""
    import threading

    load = os.getloadavg()[0]
    with open(stdout_path, "wb") as out, open(stdout_path.with_suffix(".err"), "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        state = {"tree": 0.0, "killed": None}
        done = threading.Event()

        def sample():
            while not done.is_set():
                el = time.perf_counter() - t0
                with contextlib.suppress(OSError, ValueError):
                    now = _tree_mb(proc.pid)
                    state["tree"] = max(state["tree"], now)
                    if el > timeout:
                        state["killed"] = "timeout"
                    elif mem_limit_mb and now > mem_limit_mb:
                        state["killed"] = "memory"
                    if state["killed"]:
                        proc.kill()
                        return
                done.wait(0.1 if el < 2 else 0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
    tree, killed = state["tree"], state["killed"]
    proc.returncode = os.waitstatus_to_exitcode(status)
    res = {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_mb": ru.ru_maxrss / 1024,
           "tree_mb": max(tree, ru.ru_maxrss / 1024),
           "exit": proc.returncode, "load": load, "killed": killed,
           "out_mb": stdout_path.stat().st_size / 1e6}
    if killed is None and proc.returncode not in (0, 1):
        tail = stdout_path.with_suffix(".err").read_text(errors="replace").strip().splitlines()
        res["error"] = tail[-1] if tail else f"exit {proc.returncode}"
    return res


def has_model_output(py: str) -> bool:
    """Whether ``perfcast model`` has an -o/--output option (issue 17 item 1 may add it)."""
    h = subprocess.run([py, "-m", "perfcast", "model", "--help"], capture_output=True, text=True).stdout
    return " -o," in h or "--output" in h


#: the commands that fit models and take ``--workers N`` (perfcast model/predict/check)
FITTING = ("model", "json", "parquet", "predict", "check")


def command_argv(cmd: str, py: str, path: Path, nparam: int, work: Path, workers: str | None = None) -> list[str] | None:
    base = [py, "-m", "perfcast"]
    extra = ["--workers", workers] if workers and cmd in FITTING else []
    at = "p=512" if nparam == 1 else "p=256,n=1024"
    expect = "*: O(p^2)" if nparam == 1 else "*: O(p^2 n^2)"
    return {
        "startup": base + ["--version"],
        "read": base + ["show", str(path)],
        "import": base + ["import", str(path), "-o", str(work / "x.perfcast"), "--force"],
        "model": base + ["model", str(path)],
        "json": base + ["model", str(path), "--json"],
        "parquet": base + ["model", str(path), "-o", str(work / "x.parquet"), "--force"],
        "predict": base + ["predict", str(path), "--at", at, "--json"],
        "check": base + ["check", str(path), "--expect", expect],
        "report": base + ["report", str(path), "-o", str(work / "x.html"), "--force"],
    }[cmd] + extra


LABEL = {"startup": "--version", "read": "show", "import": "import", "model": "model (table)",
         "json": "model --json", "parquet": "model -o .parquet", "predict": "predict --json",
         "check": "check", "report": "report (HTML)"}


def median_run(runs: list[dict], key: str) -> dict:
    """The run whose ``key`` is the median of ``runs`` (the lower middle one of an even number),
    with every run's ``key`` under ``<key>_runs``."""
    ordered = sorted(runs, key=lambda r: r[key])
    mid = dict(ordered[(len(ordered) - 1) // 2])
    mid[f"{key}_runs"] = [r[key] for r in runs]
    return mid


def run_extrap_sizes(nparam: int, sizes: list[int], seed: int, repeat: int = 1) -> dict:
    """Extra-P 4.2.5 (its own venv) on this script's files: {size: {read, model, wall, ms_per_cp}},
    the median of ``repeat`` runs by ms_per_cp."""
    params = ["p"] if nparam == 1 else ["p", "n"]
    target = [512] if nparam == 1 else [256, 1024]
    res = {}
    for s in sizes:
        path, count, _ = experiment_file(nparam, s, seed)
        runs = []
        for _ in range(max(1, repeat)):
            load = os.getloadavg()[0]
            # CPU of the Extra-P child: this process waits for one child at a time, so the delta of
            # RUSAGE_CHILDREN's CPU times is that child's (peak memory is not additive: not used)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            d, _, _ = vs_extrap.run_extrap(path, target, params, reuse=False)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
            runs.append({"read_s": d["read"], "model_s": d["model"], "import_s": d["import"], "wall_s": d["wall"],
                         "cpu_s": cpu, "ms_per_cp": 1000 * (d["read"] + d["model"]) / count,
                         "cpu_ms_per_cp": 1000 * cpu / count, "load": load})
        r = res[s] = median_run(runs, "ms_per_cp")
        spread = (f", median of {len(runs)} runs: " + " ".join(f"{v:.2f}" for v in r["ms_per_cp_runs"])
                  if len(runs) > 1 else "")
        print(f"  Extra-P 4.2.5, {nparam} param, {s:>7d} callpaths: read {r['read_s']:.2f} s + model "
              f"{r['model_s']:.2f} s = {r['ms_per_cp']:.2f} ms/callpath (wall incl. import {r['wall_s']:.1f} s, "
              f"whole process CPU {r['cpu_s']:.1f} s = {r['cpu_ms_per_cp']:.2f} ms/callpath, load {r['load']:.2f}"
              f"{spread})", flush=True)
    return res


def fmt_size(s) -> str:
    if isinstance(s, str):
        return s
    return f"{s // 1_000_000}M" if s >= 1_000_000 and s % 1_000_000 == 0 else (
        f"{s // 1000}k" if s >= 1000 and s % 1000 == 0 else str(s))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=None,
                    help="series counts (k/M suffixes; default 1k,10k,100k,1M); 'NMB' adds the N-megabyte text "
                         "input target")
    ap.add_argument("--sizes2", default=None,
                    help="series counts for 2 parameters (default: --sizes up to 100k; a 1M 2-parameter "
                         "file is ~1.4 GB)")
    ap.add_argument("--params", default="1,2")
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--extrap", default=None,
                    help="Extra-P callpath counts (default 300,1000; '' or 0: none)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per command run")
    ap.add_argument("--mem-limit", type=float, default=None,
                    help="MB of RSS at which a run is killed (default: 80%% of physical memory)")
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: 1 parameter 1k and 10k, 2 parameters 1k, Extra-P at 300 "
                         "(explicit --sizes/--sizes2/--extrap win)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3,
                    help=f"runs of every measurement that takes under {REPEAT_BELOW_S:.0f} s, perfcast's and "
                         "Extra-P's alike; the median run's figures are shown (one run on a shared machine "
                         "is noisy; default 3)")
    ap.add_argument("--workers", default=None,
                    help="pass --workers N (or auto) to the commands that fit (model, predict, check); rows "
                         "are labelled 'wN'. Default: none passed, so the CLI's default (auto: the usable "
                         "CPUs, up to 8)")
    ap.add_argument("--json", default=None, help="write all numbers to this file")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes = a.sizes or "1000,10000"
        a.sizes2 = a.sizes2 or "1000"
        a.extrap = a.extrap if a.extrap is not None else "300"
    a.sizes = a.sizes or "1000,10000,100000,1000000"
    a.extrap = a.extrap if a.extrap is not None else "300,1000"
    sizes1 = parse_sizes(a.sizes)
    sizes2 = parse_sizes(a.sizes2) if a.sizes2 else [s for s in sizes1 if isinstance(s, int) and s <= 100_000]
    sizes2 = [s for s in sizes2 if isinstance(s, int)]
    nparams = [int(v) for v in a.params.split(",") if v.strip()]
    commands = [c.strip() for c in a.commands.split(",") if c.strip()]
    for c in commands:
        if c not in COMMANDS:
            ap.error(f"unknown command {c!r} (one of {', '.join(COMMANDS)})")
    extrap_sizes = [int(v) for v in a.extrap.split(",") if v.strip() and int(v) > 0]
    mem_limit = a.mem_limit or 0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 20
    py = sys.executable
    work = OUT / "cli-work"
    work.mkdir(parents=True, exist_ok=True)

    import platform
    head = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(), "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "load_start": os.getloadavg()}
    # the perfcast the runs import (PYTHONPATH may select another tree than this checkout's)
    pkg = subprocess.run([py, "-c", "import os, perfcast; print(os.path.dirname(perfcast.__file__))"],
                         capture_output=True, text=True).stdout.strip()
    try:
        head["commit"] = subprocess.run(["git", "-C", pkg or str(HERE), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", pkg or str(HERE), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True).stdout.strip()
        head["commit"] += "+changes" if dirty and head["commit"] else ""
    except OSError:
        pass
    print(f"bench/cli_scale.py {head['date']} perfcast {pkg or '?'} at commit {head.get('commit') or '?'}, "
          f"{head['cpus']} cpus, load average {' '.join(f'{v:.2f}' for v in head['load_start'])}", flush=True)
    parquet_ok = "parquet" in commands and has_model_output(py)
    # perfcast's modules byte-compiled first, as installing a wheel does (pip compiles at install,
    # as it did for Extra-P's venv): an editable install under PYTHONDONTWRITEBYTECODE would
    # otherwise compile every module from source in every measured run (~0.4 s here)
    if pkg:
        subprocess.run([py, "-m", "compileall", "-q", pkg], capture_output=True)
        print(f"  byte-compiled {pkg} (as a wheel install does)", flush=True)

    results = {"head": head, "extrap": {}, "runs": []}
    for nparam in nparams:
        sizes = sizes1 if nparam == 1 else sizes2
        # the files (generated once, cached under bench/out)
        for s in sorted(set(sizes + extrap_sizes), key=lambda v: (isinstance(v, str), v)):
            if nparam == 2 and isinstance(s, str):
                continue
            path, count, dt = experiment_file(nparam, s, a.seed)
            if dt:
                print(f"  generated {path.name}: {count} series, {path.stat().st_size / 1e6:.1f} MB in {dt:.1f} s",
                      flush=True)
        ex = run_extrap_sizes(nparam, extrap_sizes, a.seed, a.repeat) if extrap_sizes else {}
        results["extrap"][nparam] = ex
        ex_ref = ex[max(ex)]["ms_per_cp"] if ex else None
        ex_cpu_ref = ex[max(ex)]["cpu_ms_per_cp"] if ex else None
        ex_read_ref = 1000 * ex[max(ex)]["read_s"] / max(ex) if ex else None
        for cmd in commands:
            prev = None   # (size, wall, rss) of the last completed size
            stop = None
            csizes = [s for s in sizes if not isinstance(s, str) or cmd in ("read", "import")]
            if nparam == 2:
                csizes = [s for s in csizes if not isinstance(s, str)]
            if cmd == "startup":
                csizes = csizes[:1]
            for s in csizes:
                path, count, _ = experiment_file(nparam, s, a.seed)
                label = LABEL[cmd] + (f" w{a.workers}" if a.workers and cmd in FITTING else "")
                row = {"command": cmd, "label": label, "params": nparam, "size": s, "series": count,
                       "file_mb": path.stat().st_size / 1e6}
                if cmd == "parquet" and not parquet_ok:
                    row["status"] = "n/a (model has no -o)"
                elif stop:
                    row["status"] = stop
                elif prev and isinstance(s, int) and prev[1] * (s / prev[0]) ** max(1.0, prev[3]) > a.timeout:
                    row["status"] = (f"skipped (predicted "
                                     f"{prev[1] * (s / prev[0]) ** max(1.0, prev[3]):.0f} s > timeout)")
                elif prev and isinstance(s, int) and grown_mb(prev[2], s / prev[0]) > mem_limit:
                    row["status"] = f"skipped (predicted {grown_mb(prev[2], s / prev[0]):.0f} MB > limit)"
                else:
                    argv = command_argv(cmd, py, path, nparam, work, a.workers)
                    m = run_measured(argv, work / f"{cmd}.out", a.timeout, mem_limit)
                    if a.repeat > 1 and not m["killed"] and "error" not in m and m["wall_s"] < REPEAT_BELOW_S:
                        runs = [m] + [run_measured(argv, work / f"{cmd}.out", a.timeout, mem_limit)
                                      for _ in range(a.repeat - 1)]
                        if all(not r["killed"] and "error" not in r for r in runs):
                            m = median_run(runs, "wall_s")
                    row.update(m)
                    if m["killed"]:
                        row["status"] = f"killed ({m['killed']})"
                        stop = f"skipped (killed at {fmt_size(s)})"
                    elif "error" in m:
                        row["status"] = f"error: {m['error']}"
                        stop = f"skipped (error at {fmt_size(s)})"
                    else:
                        row["status"] = "ok"
                        if cmd != "startup":
                            row["ms_per_series"] = 1000 * m["wall_s"] / count
                        if ex_ref and cmd in ("read", "import"):
                            row["ratio_extrap"] = ex_read_ref / row["ms_per_series"]
                        elif ex_ref and cmd != "startup":
                            row["ratio_extrap"] = ex_ref / row["ms_per_series"]
                            row["cpu_ratio_extrap"] = ex_cpu_ref / (1000 * m["cpu_s"] / count)
                            tgt = RATIO_TARGET.get(cmd)
                            if tgt:
                                row["ratio_target"] = tgt[nparam - 1]
                        if prev and isinstance(s, int):
                            row["growth"] = growth_exponent(prev[0], prev[1], s, m["wall_s"])
                        abs_t = ABS_TARGET.get((cmd, nparam, s))
                        if abs_t:
                            row["target_s"], row["target_mb"] = abs_t
                        if isinstance(s, int):
                            g = row.get("growth", float("nan"))
                            prev = (s, m["wall_s"], m["maxrss_mb"], g if g == g else 1.0)
                results["runs"].append(row)
                print_row(row, flush=True)
        # the 10k -> 1M growth of each command
        for cmd in commands:
            rr = {r["size"]: r for r in results["runs"] if r["command"] == cmd and r["params"] == nparam
                  and r.get("status") == "ok"}
            if 10_000 in rr and 1_000_000 in rr:
                g = growth_exponent(1e4, rr[10_000]["wall_s"], 1e6, rr[1_000_000]["wall_s"])
                results.setdefault("growth_10k_1M", {})[f"{cmd}/{nparam}"] = g
                print(f"  {LABEL[cmd]}, {nparam} param: growth 10k -> 1M {g:.2f} (target <= {GROWTH_TARGET}) "
                      f"{'PASS' if g <= GROWTH_TARGET else 'FAIL'}")
    head["load_end"] = os.getloadavg()
    print(f"load average at the end {' '.join(f'{v:.2f}' for v in head['load_end'])}")
    print()
    print_table(results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


HEADER = (f"| {'command':20s} | par | {'size':>5s} | {'wall s':>7s} | {'cpu s':>7s} | {'peak MB':>7s} | "
          f"{'tree MB':>7s} | "
          f"{'ms/series':>9s} | {'vs Extra-P':>10s} | {'cpu vs E-P':>10s} | {'target':>6s} | {'growth':>6s} | {'load':>4s} | status")


def row_line(r: dict) -> str:
    def f(key, spec):
        v = r.get(key)
        return format(v, spec) if isinstance(v, (int, float)) and v == v else format("-", ">" + spec.split(".")[0])
    def rat(key):
        if key not in r:
            return "-"
        return f"{r[key]:.0f}x" if r[key] >= 10 else f"{r[key]:.2f}x"
    ratio, cratio = rat("ratio_extrap"), rat("cpu_ratio_extrap")
    status = r.get("status", "")
    tgt = "-"
    if "ratio_target" in r:
        tgt = f">={r['ratio_target']}x"
        status += " PASS" if r["ratio_extrap"] >= r["ratio_target"] else " FAIL"
    if "target_s" in r:
        mb = max(r["maxrss_mb"], r.get("tree_mb") or 0)
        ok = r["wall_s"] <= r["target_s"] and (r["target_mb"] is None or mb <= r["target_mb"])
        lim = f"<={r['target_s']:.0f}s" + (f"/{r['target_mb'] / 1000:.0f}GB" if r["target_mb"] else "")
        status += f"; {lim} {'PASS' if ok else 'FAIL'}"
    return (f"| {r['label']:20s} | {r['params']:3d} | {fmt_size(r['size']):>5s} | {f('wall_s', '7.2f')} | "
            f"{f('cpu_s', '7.2f')} | {f('maxrss_mb', '7.0f')} | {f('tree_mb', '7.0f')} | "
            f"{f('ms_per_series', '9.3f')} | {ratio:>10s} | "
            f"{cratio:>10s} | "
            f"{tgt:>6s} | {f('growth', '6.2f')} | {f('load', '4.1f')} | {status}")


def print_row(r: dict, flush=False) -> None:
    print("  " + row_line(r), flush=flush)


def print_table(results: dict) -> None:
    for nparam, ex in results["extrap"].items():
        for s, e in ex.items():
            print(f"Extra-P 4.2.5, {nparam} parameter(s), {s} callpaths: {e['ms_per_cp']:.2f} ms/callpath "
                  f"(read {e['read_s']:.2f} s + model {e['model_s']:.2f} s; whole process CPU "
                  f"{e['cpu_ms_per_cp']:.2f} ms/callpath; load {e['load']:.2f})")
    print(HEADER)
    print("|" + "|".join("-" * (len(c)) for c in HEADER.split("|")[1:-1]) + "|--------")
    for r in results["runs"]:
        print(row_line(r))


if __name__ == "__main__":
    sys.exit(main())

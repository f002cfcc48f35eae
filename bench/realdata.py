#!/usr/bin/env python
"""Real-data accuracy benchmark (issue 16, item 2): leave-the-largest-out extrapolation on real,
third-party measurements, perfcast side by side with Extra-P 4.2.5.

    PERFCAST_SHARED_DATA=/work/shared/data .venv/bin/python bench/realdata.py             # all splits
    .venv/bin/python bench/realdata.py --splits lulesh,relearn-p --no-extrap            # perfcast only
    .venv/bin/python bench/realdata.py --json bench/out/realdata.json

Data come from the shared data folder (perfcast.shared_data.shared_data_dir(); read-only) and are
read with perfcast's own readers (perfcast.io.load), as a user would.  Splits:

  lulesh      thicket/lulesh_weak_scaling_cali/*.cali (LULESH weak scaling on LLNL opal, Caliper,
              read with --param jobsize), metric avg#inclusive#sum#time.duration (time per rank),
              regions >= 1% of main at the largest training point; fit jobsize 27..216, predict 343.
  lulesh-max  the same runs, metric max#inclusive#sum#time.duration (the slowest rank's time).
  rajaperf-n  thicket/rajaperf_lassen_sizes (RAJAPerf on LLNL lassen, Caliper, problem sizes 1M..8M,
              GPU block size 256: the block sizes are tunings with up to 3x different times, which
              the reader refuses to merge silently), avg time per rank of the kernels >= 0.1% of the
              root; fit 1M..4M, predict 8M (3 training points).
  relearn-p   extrap/text/mpa/relearn_data.txt (Relearn timers, p = 32..512 x n = 5000..9000,
              2 repetitions); fit p <= 256 (all n), predict p = 512 (5 points per timer).
  relearn-n   the same file; fit n <= 8000 (all p), predict n = 9000 (5 points per timer).
  mpi         extrap/mpi_data.csv (Intel MPI / Open MPI collectives, microseconds per call, one
              summary row per rank count; the summary reader's value is the median); fit
              Ranks 32..256, predict 512.
  cube-mm     extrap/cubeset/single_parameter (Score-P CUBE profiles of a matrix multiply,
              x = 1..2000, one run each, per-rank values reduced by perfcast's "auto" rule),
              metrics time, PAPI_FP_OPS, PAPI_L2_TCM, PAPI_L3_TCM; fit x <= 1000, predict 2000.
Campaigns of real MPI codes measured on this project's 2-core machine with `perfcast collect`
(bench/measure_codes.py re-measures them; bench/data/<campaign>/ holds the stored experiments and
a PROVENANCE.md each), read with perfcast.io.load; per-rank values = the maximum over ranks:
  cg-p        examples/cg (3D, 32^3, 50 iterations), strong scaling: cachegrind self instructions
              (Ir) of the application's functions; fit p = 1..8, predict p = 16.
  cg-p-mpi    the same runs, PMPI calls and bytes of each MPI routine; fit p = 2..8, predict 16.
  jacobi-p    examples/jacobi (2D, 256^2, 50 sweeps), as cg-p;  jacobi-p-mpi as cg-p-mpi.
  hpccg-n     HPCCG (github.com/Mantevo/HPCCG, built from source) at p = 2, nx = ny = nz = n per
              rank: Ir of its functions; fit n = 16..32, predict n = 40.  hpccg-n-mpi: PMPI.
  hpccg-n-t   the same campaign's times (3 runs per n, p = 2 on 2 cores): wall time and HPCCG's
              own Total/DDOT/WAXPBY/SPARSEMV timers (rank 0's).
  hpccg-p     HPCCG n = 16 per rank (weak scaling), Ir, fit p = 1..8, predict 16; hpccg-p-mpi.
  Times at p > 2 are oversubscribed (ranks share the 2 cores) and are not used; series constant
  over every point (MPI_Init's one call, ...) are left out; the MPI library's internal functions
  (opal_progress, ...) are left out of the Ir splits (they poll as long as a rank waits).
Not included: thicket/lulesh_user_ensemble.json reads as a sparse (jobsize, problem_size,
threads) design: at any fixed (jobsize, threads) it has at most 2 problem sizes ((1,1): 10, 30;
(1,32): 10, 20; (8,1): 10; (8,16): 40, 50; (27,1): 10, 50; (64,1): 40, 50; (125,1): 30, 40;
(216,1): 20, 30; the compilers merged as repetitions, separating them leaves fewer), at fixed
(problem_size, threads) at most 3 jobsizes, and the runs of one point differ in their iteration
count (130 distinct values), so no one-parameter leave-the-largest-out split with >= 4 values
exists; the CUBE multi-parameter set has 3 values per parameter (2 left for fitting).

perfcast: the path of `perfcast predict` (perfcast.model with the CLI's defaults, then
ModelSet.predict): the selected hypothesis (the CLI's default) and the average over the competing
hypotheses ("--averaged"), with 90% intervals and the confidence flag.
Extra-P: each split's TRAINING data (the same repetitions, ranks reduced the same way perfcast
reduces them) are written in Extra-P's text format to bench/out/realdata/<split>.txt and modelled
by Extra-P's default ModelGenerator in its own venv bench/.venv-extrap (created like
bench/vs_extrap.py does: `pip install extrap`); its function is evaluated at the held-out points.
Only series measured at every training point and at the held-out point(s) are compared (both
tools see the same series).

Errors: truth = the measured mean over the repetitions at the held-out point (series with a zero
truth are skipped); relative error = |pred - truth| / truth; a ">2x miss" is pred/truth > 2 or
< 0.5 (a negative prediction counts as a miss and is also counted on its own); coverage = share of
held-out truths inside perfcast's 90% prediction interval (an interval for one new measurement;
NaN intervals count as not covering); width = median half-width of that interval relative to the
prediction (coverage bought with width shows here); flagged = of the predictions off by more than 50%, how many
carry confidence "low" (the line below the table: the share of all predictions flagged low).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "realdata"
sys.path.insert(0, str(HERE))

HELPER = r'''
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from extrap.fileio.file_reader.text_file_reader import TextFileReader
from extrap.modelers.model_generator import ModelGenerator
t0 = time.perf_counter()
exp = TextFileReader().read_experiment(sys.argv[1])
ModelGenerator(exp).model_all()
t1 = time.perf_counter()
targets = np.array(json.loads(sys.argv[2]), dtype=float)   # (k, nparams)
out = {}
for (cp, metric), m in exp.modelers[0].models.items():
    f = m.hypothesis.function
    if targets.shape[1] == 1:
        pred = np.asarray(f.evaluate(targets[:, 0]), dtype=float).reshape(-1)
    else:
        pred = np.asarray(f.evaluate(targets.T), dtype=float).reshape(-1)
    if pred.size == 1 and len(targets) > 1:
        pred = np.repeat(pred, len(targets))
    out[str(cp)] = {"pred": pred.tolist(), "formula": f.to_string(*exp.parameters)}
json.dump({"model_s": t1 - t0, "models": out}, open(sys.argv[3], "w"))
'''


# -- data -------------------------------------------------------------------------------------
def _load(kind):
    from perfcast import io
    from perfcast.io import ReadOptions
    from perfcast.shared_data import shared_data_dir

    d = Path(shared_data_dir())
    if kind == "lulesh":
        files = sorted((d / "thicket" / "lulesh_weak_scaling_cali").glob("*.cali"))
        return io.load(files, options=ReadOptions(parameters=("jobsize",)))
    if kind == "rajaperf":
        # one GPU block size (RAJAPerf's default, 256): the block sizes are tunings with 3x different
        # times, which the reader warns against merging as repetitions of one point
        files = sorted((d / "thicket" / "rajaperf_lassen_sizes").rglob("Base_CUDA-block_256.cali"))
        return io.load(files, options=ReadOptions(parameters=("ProblemSizeRunParam",)))
    if kind == "relearn":
        return io.load([d / "extrap" / "text" / "mpa" / "relearn_data.txt"])
    if kind == "mpi":
        return io.load([d / "extrap" / "mpi_data.csv"])
    if kind == "cube":
        return io.load([d / "extrap" / "cubeset" / "single_parameter"])
    raise KeyError(kind)


def split_lulesh():
    exp = _load("lulesh").select(metric="avg#inclusive#sum#time.duration")
    return exp, "jobsize", 343.0, _share_filter("main", 0.01)


def split_lulesh_max():
    exp = _load("lulesh").select(metric="max#inclusive#sum#time.duration")
    return exp, "jobsize", 343.0, _share_filter("main", 0.01)


def split_rajaperf():
    exp = _load("rajaperf").select(metric="avg#inclusive#sum#time.duration")
    return exp, "ProblemSizeRunParam", 8388608.0, _share_filter("RAJAPerf", 0.001)


def split_relearn_p():
    return _load("relearn"), "p", 512.0, None


def split_relearn_n():
    return _load("relearn"), "n", 9000.0, None


def split_mpi():
    return _load("mpi"), "Ranks", 512.0, None


def split_cube():
    exp = _load("cube").select(metric=["time", "PAPI_FP_OPS", "PAPI_L2_TCM", "PAPI_L3_TCM"])
    return exp, "x", 2000.0, None


SPLITS = {"lulesh": split_lulesh, "lulesh-max": split_lulesh_max, "rajaperf-n": split_rajaperf, "relearn-p": split_relearn_p, "relearn-n": split_relearn_n,
          "mpi": split_mpi, "cube-mm": split_cube}


# -- campaigns of real MPI codes measured here (bench/measure_codes.py, bench/data/) ---------
# <code>-<design> (Ir): the application's own functions, cachegrind self-cost instructions (exact;
# the MPI library's internals such as opal_progress poll for as long as a rank waits, so they are
# left out), per rank = the maximum over ranks.  <code>-<design>-mpi: each MPI routine's calls and
# bytes (sent + received) per rank (PMPI, maximum over ranks); in p from p = 2 on (a single rank has
# no one to talk to: its routines are absent, not measured).  Series with the same value at every
# point (MPI_Init's one call, a fixed number of Allreduce calls per iteration, ...) are left out:
# nothing to extrapolate.  Times only where no core is oversubscribed (hpccg-n-t, p = 2).
CODE_KERNELS = {
    "cg-p": ["app->spmv", "app->halo_exchange", "app->dot", "app->axpy", "app->xpby"],
    "jacobi-p": ["app->compute_sweep", "app->halo_exchange", "app->reduce_residual"],
    "hpccg-n": [f"app->{f}(*" for f in ("HPC_sparsemv", "ddot", "waxpby", "exchange_externals", "HPCCG",
                                         "generate_matrix", "make_local_matrix")],
}
CODE_KERNELS["hpccg-p"] = CODE_KERNELS["hpccg-n"]
HPCCG_TIMERS = ["app", "app->Total", "app->DDOT", "app->WAXPBY", "app->SPARSEMV"]


def _campaign(name, metrics, callpaths, **coords):
    """The stored campaign bench/data/<name>/<name>.perfcast (perfcast.io.load), restricted to
    ``coords``, per-rank values reduced by the maximum over ranks, single-valued parameters
    dropped, series constant over all points dropped."""
    from perfcast import io
    from perfcast.experiment import Experiment

    exp = io.load([HERE / "data" / name / f"{name}.perfcast"])
    exp = exp.select(metric=metrics, callpath=callpaths, **coords).reduce_locations("max")
    fixed = [p for p in exp.parameters if exp.data[p].nunique() == 1]
    if fixed:
        exp = Experiment([p for p in exp.parameters if p not in fixed], exp.data.drop(columns=fixed),
                         exp.metrics, exp.tree, exp.meta)
    v = exp.data.groupby(["callpath", "metric"], observed=True)["value"]
    varying = (v.transform("max") != v.transform("min")).to_numpy()
    return exp.replace(data=exp.data[varying].reset_index(drop=True))


def _code_split(name, param, held, kind):
    def split():
        if kind == "ir":
            return _campaign(name, "Ir", CODE_KERNELS[name]), param, held, None
        coords = {"p": [2, 4, 8, 16]} if param == "p" else {}
        return _campaign(name, ["calls", "bytes"], "MPI->MPI_*", **coords), param, held, None
    return split


def split_hpccg_n_time():
    return _campaign("hpccg-n", "time", HPCCG_TIMERS), "n", 40.0, None


CODE_SPLITS = {}
for _name, _param, _held in (("cg-p", "p", 16.0), ("jacobi-p", "p", 16.0), ("hpccg-n", "n", 40.0),
                             ("hpccg-p", "p", 16.0)):
    CODE_SPLITS[_name] = _code_split(_name, _param, _held, "ir")
    CODE_SPLITS[f"{_name}-mpi"] = _code_split(_name, _param, _held, "mpi")
CODE_SPLITS["hpccg-n-t"] = split_hpccg_n_time
SPLITS.update(CODE_SPLITS)
DEFAULT_SPLITS = ",".join(SPLITS)


def _share_filter(root, share):
    """Keep the series whose training mean at the largest training point is >= share x root's."""
    def keep(st, param):
        top = st[st[param] == st[param].max()]
        ref = top.loc[top["callpath"] == root, "mean"]
        if ref.empty:
            return set(top["callpath"])
        return set(top.loc[top["mean"] >= share * float(ref.iloc[0]), "callpath"].astype(str))
    return keep


def prepare(name):
    """(train experiment, parameters, series [(callpath, metric)], targets [point dicts], truth
    {(cp, metric, point tuple): mean}, reps {(cp, metric): {point tuple: [values]}})."""
    from perfcast.fit.series import _statistics

    exp, param, held, keep = SPLITS[name]()
    params = list(exp.parameters)
    values = sorted(set(exp.data[param].astype(float)))
    train = exp.select(**{param: [v for v in values if v < held]})
    test = exp.select(**{param: [held]})
    st, row_of, rep_of, vals = _statistics(train, "auto")
    st, tst = st.to_pandas(), _statistics(test, "auto")[0].to_pandas()     # the statistics' columns as frames
    tpoints = sorted({tuple(map(float, r)) for r in st[params].to_numpy(float)})
    targets = sorted({tuple(map(float, r)) for r in tst[params].to_numpy(float)})
    allowed = keep(st, param) if keep else None
    reps, truth = {}, {}
    key_rows = list(zip(st["callpath"].astype(str), st["metric"].astype(str), (tuple(map(float, r)) for r in st[params].to_numpy(float))))
    for v, r in zip(vals, row_of):
        cp, mt, pt = key_rows[r]
        reps.setdefault((cp, mt), {}).setdefault(pt, []).append(float(v))
    for cp, mt, pt, m in zip(tst["callpath"].astype(str), tst["metric"].astype(str),
                             (tuple(map(float, r)) for r in tst[params].to_numpy(float)), tst["mean"]):
        truth[(cp, mt, pt)] = float(m)
    series = [s for s, by in reps.items()
              if len(by) == len(tpoints) and all((*s, t) in truth for t in targets)
              and (allowed is None or s[0] in allowed)]
    return train, params, series, [dict(zip(params, t)) for t in targets], truth, reps, tpoints


# -- the tools --------------------------------------------------------------------------------
def run_perfcast(train, series, targets, params):
    """Through the user's path: perfcast.model (the CLI's defaults) and ModelSet.predict, selected
    and averaged; each prediction (value, lower, upper, confidence)."""
    import perfcast

    t0 = time.perf_counter()
    cps = sorted({cp for cp, _ in series})
    mts = sorted({mt for _, mt in series})
    ms = perfcast.model(train, mts, cps)
    wanted = set(series)
    out = {"averaged": {}, "selected": {}}
    for variant, avg in (("averaged", True), ("selected", False)):
        for r in ms.with_averaged(avg).predict(targets, 0.9):
            if (r["callpath"], r["metric"]) not in wanted:
                continue
            lo = float("nan") if r["lower"] is None else r["lower"]
            hi = float("nan") if r["upper"] is None else r["upper"]
            out[variant][(r["callpath"], r["metric"], tuple(r["at"][p] for p in params))] = (
                r["value"], lo, hi, r["confidence"])
    return out, time.perf_counter() - t0


def write_extrap_text(path, params, series, reps, tpoints):
    lines = [f"PARAMETER {p}" for p in params] + [""]
    lines += [f"POINTS ( {' '.join(f'{v:g}' for v in pt)} )" for pt in tpoints] + [""]
    names = {}
    for mt in sorted({m for _, m in series}):
        lines += [f"METRIC {mt}", ""]
        for cp, m in series:
            if m != mt:
                continue
            rn = f"r{len(names)}"
            names[rn] = (cp, mt)
            lines.append(f"REGION {rn}")
            for pt in tpoints:
                lines.append("DATA " + " ".join(repr(v) for v in reps[(cp, mt)][pt]))
            lines.append("")
    path.write_text("\n".join(lines))
    return names


def run_extrap(path, names, targets, params, code: str = HELPER):
    """Extra-P's models of the text file ``path`` evaluated at ``targets``, by the helper script
    ``code`` run in Extra-P's venv (default: its default ModelGenerator)."""
    from vs_extrap import ensure_extrap

    py = ensure_extrap()
    helper = path.parent / "_extrap_helper.py"
    helper.write_text(code)
    res = path.with_suffix(".extrap.json")
    tl = [[t[p] for p in params] for t in targets]
    t0 = time.perf_counter()
    subprocess.run([str(py), str(helper), str(path), json.dumps(tl), str(res)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    d = json.loads(res.read_text())
    out = {}
    for rn, m in d["models"].items():
        cp, mt = names[rn.split("->")[-1].strip()]
        for t, v in zip(tl, m["pred"]):
            out[(cp, mt, tuple(t))] = (float(v), math.nan, math.nan)
    return out, wall, {names[k.split("->")[-1].strip()][0]: m["formula"] for k, m in d["models"].items()}


# -- scoring ----------------------------------------------------------------------------------
def score(preds, truth, keys):
    err, miss, neg, cover, width, n = [], 0, 0, [], [], 0
    big = flagged = low_ok = 0
    for k in keys:
        y = truth[k]
        if y == 0 or k not in preds:
            continue
        n += 1
        v, lo, hi, *conf = preds[k]
        err.append(abs(v - y) / abs(y))
        if err[-1] > 0.5:
            big += 1
            flagged += int(bool(conf) and conf[0] == "low")
        elif conf:
            low_ok += int(conf[0] == "low")
        r = v / y
        miss += int(not (0.5 <= r <= 2))
        neg += int(v < 0)
        cover.append(bool(lo <= y <= hi) if math.isfinite(lo) and math.isfinite(hi) else False)
        if math.isfinite(lo) and math.isfinite(hi) and v != 0:
            width.append((hi - lo) / 2 / abs(v))
    e = np.array(err) if err else np.array([np.nan])
    has_iv = any(math.isfinite(preds[k][1]) for k in keys if k in preds)
    return {"n": n, "median": float(np.median(e)), "mean": float(np.mean(e)), "p90": float(np.quantile(e, 0.9)),
            "miss2x": miss, "negative": neg, "coverage90": float(np.mean(cover)) if has_iv and cover else None,
            "width90": float(np.median(width)) if has_iv and width else None,
            "off50": big, "off50_flagged": flagged, "low_within50": low_ok,
            "errors": [float(x) for x in err]}


#: paired comparison: two predictions within this relative distance of each other are a tie
TIE = 0.005


def paired(preds_a, preds_b, truth, keys, reps=2000, seed=0):
    """Tool a against tool b on the same predictions: wins, losses and ties of a (|error| smaller,
    larger, predictions within ``TIE`` of each other), and the differences a - b of the median and
    the p90 error with 90% bootstrap intervals; the bootstrap resamples series (callpath, metric)
    with all their held-out points, so a series predicted at several points counts once."""
    ks = [k for k in keys if truth[k] != 0 and k in preds_a and k in preds_b]
    if not ks:
        return None
    y = np.array([truth[k] for k in ks])
    a, b = np.array([preds_a[k][0] for k in ks]), np.array([preds_b[k][0] for k in ks])
    ea, eb = np.abs(a - y) / np.abs(y), np.abs(b - y) / np.abs(y)
    tie = np.abs(a - b) <= TIE * np.maximum(np.abs(a), np.abs(b))
    clusters = {}
    for i, k in enumerate(ks):
        clusters.setdefault(k[:2], []).append(i)
    groups = list(clusters.values())
    rng = np.random.default_rng(seed)
    d_med, d_p90 = [], []
    for _ in range(reps):
        idx = np.concatenate([groups[j] for j in rng.integers(0, len(groups), len(groups))])
        d_med.append(np.median(ea[idx]) - np.median(eb[idx]))
        d_p90.append(np.quantile(ea[idx], 0.9) - np.quantile(eb[idx], 0.9))
    ci = lambda d: [float(np.quantile(d, 0.05)), float(np.quantile(d, 0.95))]  # noqa: E731
    return {"wins": int(np.sum(~tie & (ea < eb))), "losses": int(np.sum(~tie & (ea > eb))), "ties": int(np.sum(tie)),
            "series": len(groups), "median_diff": float(np.median(ea) - np.median(eb)), "median_diff_ci": ci(d_med),
            "p90_diff": float(np.quantile(ea, 0.9) - np.quantile(eb, 0.9)), "p90_diff_ci": ci(d_p90)}


def fmt_paired(split, c):
    def pp(x):
        return f"{100 * x:+.1f}"
    return (f"| {split:12s} | {c['wins']:4d} | {c['losses']:6d} | {c['ties']:4d} | {c['series']:6d} "
            f"| {pp(c['median_diff']):>6s} [{pp(c['median_diff_ci'][0])}, {pp(c['median_diff_ci'][1])}] "
            f"| {pp(c['p90_diff']):>6s} [{pp(c['p90_diff_ci'][0])}, {pp(c['p90_diff_ci'][1])}] |")


PAIRED_HEAD = ("perfcast (selected) against Extra-P 4.2.5 on the same predictions: wins / losses / ties "
               f"(predictions within {TIE:.1%}), and perfcast - Extra-P in percentage points\n"
               "of the median and the p90 error, [90% bootstrap interval over series]:\n"
               "| split        | wins | losses | ties | series | median diff, pp         | p90 diff, pp            |\n"
               "|--------------|------|--------|------|--------|-------------------------|-------------------------|")


def fmt_row(split, tool, s):
    cov = "-" if s["coverage90"] is None else f"{s['coverage90']:.0%}"
    width = "-" if s.get("width90") is None else f"{s['width90']:.0%}"
    flag = "-" if s["coverage90"] is None else f"{s['off50_flagged']}/{s['off50']}"
    return (f"| {split:12s} | {tool:19s} | {s['n']:4d} | {s['median']:7.1%} | {s['mean']:7.1%} | {s['p90']:7.1%} "
            f"| {s['miss2x']:3d} | {s['negative']:3d} | {cov:>5s} | {width:>5s} | {flag:>7s} |")


HEAD = ("| split        | tool                |    n |  median |    mean |     p90 | >2x | neg | cov90 | width | flagged |\n"
        "|--------------|---------------------|------|---------|---------|---------|-----|-----|-------|-------|---------|")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", default=DEFAULT_SPLITS, help=f"comma-separated, of {','.join(SPLITS)}")
    ap.add_argument("--no-extrap", action="store_true", help="perfcast only")
    ap.add_argument("--json", default=None, help="write all numbers (and per-series predictions) here")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every prediction")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    tools = ["perfcast", "perfcast --averaged"] + ([] if args.no_extrap else ["Extra-P 4.2.5"])
    results, pooled, rows = {}, {t: {} for t in tools}, []
    t_start = time.perf_counter()
    for name in args.splits.split(","):
        name = name.strip()
        if name not in SPLITS:
            ap.error(f"unknown split {name!r}; choose from {', '.join(SPLITS)}")
        try:
            train, params, series, targets, truth, reps, tpoints = prepare(name)
        except Exception as e:  # noqa: BLE001 - an unreadable optional split is reported, not fatal
            print(f"{name}: skipped ({type(e).__name__}: {e})", flush=True)
            results[name] = {"skipped": f"{type(e).__name__}: {e}"}
            continue
        keys = [(cp, mt, tuple(t[p] for p in params)) for cp, mt in series for t in targets]
        pc, pc_s = run_perfcast(train, series, targets, params)
        preds = {"perfcast": pc["selected"], "perfcast --averaged": pc["averaged"]}
        row = {"series": len(series), "train_points": [list(p) for p in tpoints],
               "targets": targets, "perfcast_s": pc_s}
        if not args.no_extrap:
            path = OUT / f"{name}.txt"
            names = write_extrap_text(path, params, series, reps, tpoints)
            try:
                ex, ex_s, _ = run_extrap(path, names, targets, params)
                preds["Extra-P 4.2.5"] = ex
                row["extrap_s"] = ex_s
            except Exception as e:  # noqa: BLE001
                print(f"{name}: Extra-P failed ({type(e).__name__}: {e})", flush=True)
                row["extrap_error"] = str(e)
        row["scores"] = {}
        for tool in tools:
            if tool not in preds:
                continue
            s = score(preds[tool], truth, keys)
            row["scores"][tool] = s
            rows.append(fmt_row(name, tool, s))
            pooled[tool].update({(name, *k): (*preds[tool][k],) for k in keys if k in preds[tool]})
        if "Extra-P 4.2.5" in preds:
            row["paired"] = paired(preds["perfcast"], preds["Extra-P 4.2.5"], truth, keys)
        row["predictions"] = [{"callpath": k[0], "metric": k[1], "at": list(k[2]), "truth": truth[k],
                               **{t: preds[t].get(k, (None,))[0] for t in preds}} for k in keys]
        if args.verbose:
            for p in row["predictions"]:
                print(f"  {name} {p['callpath'][-50:]:50s} {p['metric'][:12]:12s} {p['at']} truth {p['truth']:.4g} "
                      + " ".join(f"{t}={p[t]:.4g}" for t in preds if p[t] is not None))
        results[name] = row
        print(f"{name}: {len(series)} series x {len(targets)} held-out point(s); perfcast {pc_s:.1f} s"
              + (f", Extra-P {row['extrap_s']:.1f} s" if "extrap_s" in row else ""), flush=True)
    all_truth = {(n, *k): results[n]["predictions"][i]["truth"] for n in results if "predictions" in results[n]
                 for i, k in enumerate((p["callpath"], p["metric"], tuple(p["at"])) for p in results[n]["predictions"])}
    results["overall"] = {}
    for tool in tools:
        if pooled[tool]:
            s = score(pooled[tool], all_truth, list(all_truth))
            results["overall"][tool] = s
            rows.append(fmt_row("overall", tool, s))
    if "Extra-P 4.2.5" in tools and pooled["Extra-P 4.2.5"]:
        results["overall"]["paired"] = paired(pooled["perfcast"], pooled["Extra-P 4.2.5"], all_truth, list(all_truth))
    print()
    print(HEAD)
    print("\n".join(rows))
    prs = [(n, r["paired"]) for n, r in results.items() if isinstance(r, dict) and r.get("paired")]
    if prs:
        print()
        print(PAIRED_HEAD)
        print("\n".join(fmt_paired(n, c) for n, c in prs))
    for tool, s in results["overall"].items():
        if s.get("coverage90") is not None:
            print(f"{tool}: confidence low on {s['off50_flagged'] + s['low_within50']} of {s['n']} predictions "
                  f"({s['off50_flagged']} of the {s['off50']} off by more than 50%)")
    print(f"\nwall time {time.perf_counter() - t_start:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    main()

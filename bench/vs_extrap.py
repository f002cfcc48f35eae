#!/usr/bin/env python
"""perfcast vs. Extra-P 4.2.5 on synthetic experiments with known ground truth, side by side.

    .venv/bin/python bench/vs_extrap.py                  # all sets, both tools
    .venv/bin/python bench/vs_extrap.py --sets sp,mp     # some sets
    .venv/bin/python bench/vs_extrap.py --no-extrap      # perfcast only (quick tuning)

Every set is written in Extra-P's text format to bench/out/<set>.txt; both tools read the same
file.  Extra-P runs in its own virtual environment bench/.venv-extrap (created on first use with
``pip install -r requirements-extrap.lock``, Extra-P 4.2.5 pinned; it pins numpy<2 and pulls PySide6, so it never goes into the main venv),
through a small helper that times reading and modelling separately.

Truths: c0 + c1*b(p) with b drawn uniformly from Extra-P's 42 default building blocks (as the
anchor measurements did); noise is multiplicative uniform.  "n% noise" follows the anchor's
convention: a uniform band n% wide, y = f(x) * (1 + U(-n/2, n/2)) -- with it Extra-P reproduces
the anchor's numbers (sp 5%: 49% exact, p90 18%, vs. the anchor's 52% / 17.8%).  The sets
"sp-pm5"/"mp-pm5" keep the former, harder reading (U(-5%, 5%)) as extra sets.
Reported per set and tool: modelling time per callpath (and the ratio), end-to-end time
(read + model), lead-order term exactness, relative extrapolation error at 4x the largest
measured value of every parameter (median / p90), and coverage of the 90% prediction interval
for 20 new noisy observations per series at that point (Extra-P has no intervals).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
VENV = HERE / ".venv-extrap"

#: Extra-P's default single-parameter building blocks (numerator, denominator, log exponent),
#: restated from its documentation/behaviour so truths come from its own hypothesis space.
EXTRAP_BLOCKS = [(0, 1, 1), (0, 1, 2), (1, 4, 0), (1, 3, 0), (1, 4, 1), (1, 3, 1), (1, 4, 2), (1, 3, 2),
                 (1, 2, 0), (1, 2, 1), (1, 2, 2), (2, 3, 0), (3, 4, 0), (2, 3, 1), (3, 4, 1), (4, 5, 0),
                 (2, 3, 2), (3, 4, 2), (1, 1, 0), (1, 1, 1), (1, 1, 2), (5, 4, 0), (5, 4, 1), (4, 3, 0),
                 (4, 3, 1), (3, 2, 0), (3, 2, 1), (3, 2, 2), (5, 3, 0), (7, 4, 0), (2, 1, 0), (2, 1, 1),
                 (2, 1, 2), (9, 4, 0), (7, 3, 0), (5, 2, 0), (5, 2, 1), (5, 2, 2), (8, 3, 0), (11, 4, 0),
                 (3, 1, 0), (3, 1, 1)]
BLOCKS = [(Fraction(a, b), j) for a, b, j in EXTRAP_BLOCKS]

P_VALUES = [4, 8, 16, 32, 64]
N_VALUES = [16, 32, 64, 128, 256]

SETS = {
    #  name: (parameters, callpaths, noise (band width: y = f (1 + U(-noise/2, noise/2))),
    #         repetitions, kind, p values)
    # primary sets: the anchor's description (extrap-anchor.md)
    "sp": (1, 2000, 0.05, 5, "one", P_VALUES),
    "mp": (2, 200, 0.05, 5, "one", P_VALUES),
    "sp-1pct": (1, 500, 0.01, 5, "one", P_VALUES),
    "sp-20pct": (1, 500, 0.20, 5, "one", P_VALUES),
    "sp-6pts": (1, 500, 0.05, 5, "one", [4, 8, 16, 32, 64, 128]),
    # extra, harder sets
    "sp-2term": (1, 500, 0.05, 5, "two", P_VALUES),
    "sp-small": (1, 500, 0.05, 5, "small", P_VALUES),
    "sp-pm5": (1, 1000, 0.10, 5, "one", P_VALUES),   # U(-5%, 5%): the former primary sp
    "mp-pm5": (2, 200, 0.10, 5, "one", P_VALUES),    # U(-5%, 5%): the former primary mp
    # one run per point (no repetitions: the noise model cannot be estimated from them)
    "sp-1rep": (1, 1000, 0.05, 1, "one", P_VALUES),
    "mp-1rep": (2, 200, 0.05, 1, "one", P_VALUES),
}


def _posterior_mean_median(logp, pred) -> tuple[float, float]:
    """Mean and median of ``pred`` under the weights ``exp(logp)`` (normalised)."""
    wt = np.exp(logp - logp.max())
    wt /= wt.sum()
    o = np.argsort(pred)
    return float(wt @ pred), float(pred[o][np.searchsorted(np.cumsum(wt[o]), 0.5)])


def bval(block, x):
    i, j = block
    x = np.asarray(x, dtype=float)
    return x ** float(i) * (np.log2(x) ** j if j else 1.0)


def make_truths(rng, nparam, count, kind, pmax, nmax):
    """Truths as dicts: c0, terms [(coef, {param: block})], lead {param: block}."""
    out = []
    for _ in range(count):
        c0 = float(10 ** rng.uniform(0, 3))
        if nparam == 1:
            b = BLOCKS[rng.integers(len(BLOCKS))]
            if kind == "one":
                share = rng.uniform(0.1, 0.95)
            else:  # "small": the term explains 3-25% of the value at the largest measured point
                share = rng.uniform(0.03, 0.25)
            c1 = share / (1 - share) * c0 / bval(b, pmax)
            terms = [(c1, {"p": b})]
            if kind == "two":
                lower = [q for q in BLOCKS if q < b]
                if lower:
                    b2 = lower[rng.integers(len(lower))]
                    s2 = rng.uniform(0.2, 0.6)  # second term's share of the first at pmax
                    terms.append((s2 * c1 * bval(b, pmax) / bval(b2, pmax), {"p": b2}))
            out.append({"c0": c0, "terms": terms, "lead": {"p": b}})
        else:
            bp = BLOCKS[rng.integers(len(BLOCKS))]
            bn = BLOCKS[rng.integers(len(BLOCKS))]
            share = rng.uniform(0.1, 0.95)
            if rng.random() < 0.5:  # product
                c1 = share / (1 - share) * c0 / (bval(bp, pmax) * bval(bn, nmax))
                terms = [(c1, {"p": bp, "n": bn})]
            else:  # sum, both terms of similar size at the largest point
                c1 = share / (1 - share) * c0 / 2 / bval(bp, pmax)
                c2 = share / (1 - share) * c0 / 2 / bval(bn, nmax)
                terms = [(c1, {"p": bp}), (c2, {"n": bn})]
            out.append({"c0": c0, "terms": terms, "lead": {"p": bp, "n": bn}})
    return out


def evaluate(truth, cols):
    v = truth["c0"]
    for c, fac in truth["terms"]:
        t = c
        for p, b in fac.items():
            t = t * bval(b, cols[p])
        v = v + t
    return v


def write_text(path, params, points, truths, noise, reps, rng):
    lines = [f"PARAMETER {p}" for p in params] + [""]
    lines += ["POINTS " + " ".join("( " + " ".join(str(v) for v in pt) + " )" for pt in points), "",
              "METRIC time", ""]
    cols = {p: np.array([pt[k] for pt in points], dtype=float) for k, p in enumerate(params)}
    data = []
    for i, t in enumerate(truths):
        f = evaluate(t, cols)
        lines.append(f"REGION r{i}")
        y = f[:, None] * (1 + rng.uniform(-noise / 2, noise / 2, size=(len(points), reps)))
        data.append(y)
        for row in y:
            lines.append("DATA " + " ".join(repr(float(v)) for v in row))
        lines.append("")
    text = "\n".join(lines)
    fresh = not path.exists() or path.read_text() != text
    if fresh:
        path.write_text(text)
    return data, fresh


def oracle(truths, data, points, params, target):
    """Predictions of the TRUE hypothesis (the truth's terms, coefficients unknown) fitted by the
    modeler's weighted least squares (weights r / mean^2 on the per-point means) on the same
    noisy data: the ceiling of any method that has to find the shape from the data."""
    cols = {p: np.array([pt[k] for pt in points], dtype=float) for k, p in enumerate(params)}
    tcols = {p: np.array([v], dtype=float) for p, v in zip(params, target)}
    preds = {}
    for i, (t, y) in enumerate(zip(truths, data)):
        mean = y.mean(axis=1)
        w = y.shape[1] / mean ** 2
        basis = lambda c: np.column_stack([np.ones(len(next(iter(c.values()))))]  # noqa: E731
                                          + [evaluate({"c0": 0.0, "terms": [(1.0, fac)]}, c) for _, fac in t["terms"]])
        D = basis(cols)
        sw = np.sqrt(w)
        beta = np.linalg.lstsq(D * sw[:, None], mean * sw, rcond=None)[0]
        preds[f"r{i}"] = float(basis(tcols)[0] @ beta)
    return preds


HELPER = r'''
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
t0 = time.perf_counter()
from extrap.fileio.file_reader.text_file_reader import TextFileReader
from extrap.modelers.model_generator import ModelGenerator
t1 = time.perf_counter()
exp = TextFileReader().read_experiment(sys.argv[1])
t2 = time.perf_counter()
ModelGenerator(exp).model_all()
t3 = time.perf_counter()
target = [float(v) for v in sys.argv[2].split(",")]
models = exp.modelers[0].models
out = {}
for (cp, metric), m in models.items():
    f = m.hypothesis.function
    lead = {}
    terms = []
    for ct in f.compound_terms:
        pairs = getattr(ct, "parameter_term_pairs", None)
        if pairs is None:
            pairs = [(0, ct)]
        for pidx, c in pairs:
            poly = 0.0; lg = 0.0
            for st in c.simple_terms:
                if st.term_type == "polynomial":
                    poly = float(st.exponent)
                else:
                    lg = float(st.exponent)
            cur = lead.get(pidx, (0.0, 0.0))
            if (poly, lg) > cur:
                lead[pidx] = (poly, lg)
    if len(target) == 1:
        pred = float(f.evaluate(target[0]))
    else:
        pred = float(np.asarray(f.evaluate(np.array([[v] for v in target]))).ravel()[0])
    out[str(cp)] = {"lead": {str(k): v for k, v in lead.items()}, "pred": pred,
                    "formula": f.to_string(*exp.parameters)}
json.dump({"import": t1 - t0, "read": t2 - t1, "model": t3 - t2, "models": out}, open(sys.argv[3], "w"))
'''


def ensure_extrap():
    py = VENV / "bin" / "python"
    if not py.exists():
        print("creating", VENV, "(pip install -r requirements-extrap.lock) ...", flush=True)
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(HERE.parent / "requirements-extrap.lock")],
                       check=True)
    return py


def prior_shapes(nparam, pvals, points, target):
    """The generator's hypotheses as term shapes normalised to 1 at the largest point, at the
    measured points (H, n) and at the target (H,).  One parameter: the 42 blocks.  Two: every
    (block p, block n) as a product and as a sum of two terms of equal size at the largest point
    (how make_truths draws them: product or sum with probability 1/2, blocks uniform)."""
    if nparam == 1:
        x = np.array([pt[0] for pt in points], dtype=float)
        T = np.array([bval(b, x) / bval(b, pvals[-1]) for b in BLOCKS])
        Tt = np.array([bval(b, target[0]) / bval(b, pvals[-1]) for b in BLOCKS])
        return T, Tt
    X = np.array(points, dtype=float)
    tp = np.array([bval(b, X[:, 0]) / bval(b, pvals[-1]) for b in BLOCKS])   # (B, n)
    tn = np.array([bval(b, X[:, 1]) / bval(b, N_VALUES[-1]) for b in BLOCKS])
    ttp = np.array([bval(b, target[0]) / bval(b, pvals[-1]) for b in BLOCKS])
    ttn = np.array([bval(b, target[1]) / bval(b, N_VALUES[-1]) for b in BLOCKS])
    prod = (tp[:, None, :] * tn[None, :, :]).reshape(-1, len(X))
    summ = ((tp[:, None, :] + tn[None, :, :]) / 2).reshape(-1, len(X))
    return np.concatenate([prod, summ]), np.concatenate([np.outer(ttp, ttn).ravel(), ((ttp[:, None] + ttn[None, :]) / 2).ravel()])


def _mean_weights(y):
    """Point means of ``y`` (points x repetitions) and the weights of a normal likelihood of the
    means: repetitions / variance, with the relative variance pooled over the points."""
    mean = y.mean(axis=1)
    rel2 = np.mean(y.var(axis=1, ddof=1) / mean ** 2)
    return mean, y.shape[1] / (rel2 * mean ** 2)


def bayes_laplace(data, T, Tt, kind):
    """:func:`bayes_ceiling` with the normal likelihood in closed form (Laplace): per hypothesis
    the weighted least-squares fit of c0 + c1 * T, evidence exp(-chi2/2) det(A)^-1/2 / V^2 (V = c0
    + c1, the value at the largest point: the prior is uniform in the share c1 / V and
    scale-free in V) times the posterior mass of the share inside the generator's range; the
    prediction of a hypothesis is its fit.  Matches the grid integral on the single-parameter
    sets (sp-6pts p90 15.5 / 16.5%) and is fast enough for mp's 3,528 hypotheses."""
    from scipy.stats import norm
    lo, hi = (0.03, 0.25) if kind == "small" else (0.1, 0.95)
    out = {"mean": {}, "median": {}}
    for i, y in enumerate(data):
        mean, w = _mean_weights(y)
        a00, a01, a11 = w.sum(), T @ w, (T * T) @ w
        b0, b1 = w @ mean, T @ (w * mean)
        det = a00 * a11 - a01 * a01
        c0 = (a11 * b0 - a01 * b1) / det
        c1 = (a00 * b1 - a01 * b0) / det
        chi2 = np.sum(w * (mean[None, :] - c0[:, None] - c1[:, None] * T) ** 2, axis=1)
        V = c0 + c1
        sh = c1 / V
        # delta method: ds = (c0 dc1 - c1 dc0) / V^2 with cov = A^-1
        v00, v01, v11 = a11 / det, -a01 / det, a00 / det
        ssd = np.sqrt(np.maximum((c0 ** 2 * v11 - 2 * c0 * c1 * v01 + c1 ** 2 * v00), 1e-300)) / V ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            mass = norm.cdf((hi - sh) / ssd) - norm.cdf((lo - sh) / ssd)
            logp = -chi2 / 2 - 0.5 * np.log(det) - 2 * np.log(np.abs(V)) + np.log(mass)
        logp = np.where((V > 0) & np.isfinite(logp), logp, -np.inf)
        pred = c0 + c1 * Tt
        out["mean"][f"r{i}"], out["median"][f"r{i}"] = _posterior_mean_median(logp, pred)
    return out


def bayes_ceiling(data, T, Tt, kind, noise, likelihood="gauss", grid=300, chunk=400):
    """Posterior mean and median of the value at the target under the generator's OWN prior:
    hypotheses ``T`` (term shapes, 1 at the largest point; :func:`prior_shapes`) uniform, the
    term's share at the largest point uniform on the generator's range, c0 log-uniform,
    integrated on a grid of shares.  It does not know the truth, only how truths are drawn: the
    best any method can do with that likelihood.  ``likelihood="gauss"``: normal means with the
    variance estimated from the repetitions (what a mean/variance based modeler uses);
    ``"uniform"``: the generator's exact uniform band noise (every observation within +-noise/2
    of the truth).  Returns {"mean": preds, "median": preds} (two-term truths: the one-term
    prior, misspecified)."""
    lo, hi = (0.03, 0.25) if kind == "small" else (0.1, 0.95)
    s = np.linspace(lo, hi, grid)[1:-1]
    r = s / (1 - s)
    out = {"mean": {}, "median": {}}
    for i, y in enumerate(data):
        reps = y.shape[1]
        mean, w = _mean_weights(y)
        logps, preds = [], []
        for a in range(0, len(T), chunk):
            G = 1 + r[None, :, None] * T[a:a + chunk, None, :]   # value / c0 for (hypothesis, share, point)
            gsum = np.sum(w * G * G, axis=2)
            c0 = np.sum(w * G * mean, axis=2) / gsum             # given (hypothesis, share): normal in c0
            chi2 = np.sum(w * (mean - c0[..., None] * G) ** 2, axis=2)
            with np.errstate(divide="ignore", invalid="ignore"):
                logp = np.where(c0 > 0, -chi2 / 2 - 0.5 * np.log(gsum) - np.log(np.maximum(c0, 1e-300)), -np.inf)
            if likelihood == "uniform":
                h = noise / 2
                L = np.max(y.max(axis=1) / (G * (1 + h)), axis=2)   # c0 must put every observation in the band
                U = np.min(y.min(axis=1) / (G * (1 - h)), axis=2)
                N = y.size
                ok = U > L
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    q = np.where(ok, L / U, 0.0)
                    logu = np.where(ok, -reps * np.sum(np.log(G), axis=2) - N * np.log(L) + np.log1p(-q ** N), -np.inf)
                    cu = np.where(ok, N / (N - 1) * L * (1 - q ** (N - 1)) / (1 - q ** N), 0.0)
                logps.append((logp, logu))
                preds.append((c0 * (1 + r[None, :] * Tt[a:a + chunk, None]), cu * (1 + r[None, :] * Tt[a:a + chunk, None])))
            else:
                logps.append((logp, logp))
                preds.append((c0 * (1 + r[None, :] * Tt[a:a + chunk, None]),) * 2)
        k = 1 if likelihood == "uniform" and any(np.isfinite(lp[1]).any() for lp in logps) else 0
        # (uniform: if no grid point is feasible, keep the normal approximation)
        logp = np.concatenate([lp[k].ravel() for lp in logps])
        pred = np.concatenate([pr[k].ravel() for pr in preds])
        out["mean"][f"r{i}"], out["median"][f"r{i}"] = _posterior_mean_median(logp, pred)
    return out


def run_extrap(path, target, params, reuse=False):
    """Extra-P's models of ``path``; ``reuse``: the cached bench/out/<set>.extrap.json of an
    identical earlier file (same seed, scale and generator) instead of a new run."""
    res = OUT / (path.stem + ".extrap.json")
    if reuse and res.exists():
        d = json.loads(res.read_text())
        d.setdefault("wall", float("nan"))
        d["cached"] = True
    else:
        py = ensure_extrap()
        helper = OUT / "_extrap_helper.py"
        helper.write_text(HELPER)
        t0 = time.perf_counter()
        subprocess.run([str(py), str(helper), str(path), ",".join(str(v) for v in target), str(res)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = json.loads(res.read_text())
        d["wall"] = time.perf_counter() - t0
        d["cached"] = False
    preds, leads = {}, {}
    for cp, m in d["models"].items():
        preds[cp] = m["pred"]
        leads[cp] = {params[int(k)]: (Fraction(v[0]).limit_denominator(12), int(v[1])) for k, v in m["lead"].items()}
    return d, preds, leads


def run_perfcast(path, target, params, options=None):
    t0 = time.perf_counter()
    from perfcast import fit, io
    t1 = time.perf_counter()
    exp = io.load([path])
    t2 = time.perf_counter()
    res = fit.model_experiment(exp, options=options)
    t3 = time.perf_counter()
    preds, leads, ivs, apreds, aivs = {}, {}, {}, {}, {}
    at = dict(zip(params, target))
    for r in res:
        m = r.model
        preds[r.callpath] = m.predict(at)
        ivs[r.callpath] = m.interval(at, 0.9)
        apreds[r.callpath] = m.predict(at, averaged=True)
        aivs[r.callpath] = m.interval(at, 0.9, averaged=True)
        leads[r.callpath] = m.lead_order()
    return {"import": t1 - t0, "read": t2 - t1, "model": t3 - t2}, preds, leads, ivs, apreds, aivs


def score(truths, preds, leads, ivs, target, params, noise, rng):
    cols = {p: np.array([v]) for p, v in zip(params, target)}
    exact, errs, cover = [], [], []
    for i, t in enumerate(truths):
        cp = f"r{i}"
        if cp not in preds:
            exact.append(False)
            errs.append(np.inf)
            continue
        truth_lead = {p: t["lead"].get(p, (Fraction(0), 0)) for p in params}
        got = {p: leads[cp].get(p, (Fraction(0), 0)) for p in params}
        exact.append(all(got[p] == truth_lead[p] for p in params))
        f = float(evaluate(t, cols)[0])
        errs.append(abs(preds[cp] - f) / f)
        if ivs is not None:
            lo, hi = ivs[cp]
            new = f * (1 + rng.uniform(-noise / 2, noise / 2, 20))
            cover.append(np.mean((new >= lo) & (new <= hi)) if np.isfinite(lo) else 0.0)
    errs = np.array(errs)
    return {"exact": float(np.mean(exact)), "err_median": float(np.median(errs)),
            "err_p90": float(np.quantile(errs, 0.9)), "coverage": float(np.mean(cover)) if cover else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--no-extrap", action="store_true", help="perfcast only")
    ap.add_argument("--oracle", action="store_true",
                    help="also fit the true hypothesis (truth's terms, WLS coefficients): the ceiling")
    ap.add_argument("--bayes", action="store_true",
                    help="also the Bayes ceiling (the generator's prior; normal and uniform-band likelihoods; "
                         "slow, minutes on mp)")
    ap.add_argument("--rerun-extrap", action="store_true",
                    help="run Extra-P even when an identical file has a cached result")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of callpaths")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--selection", default=None, help="perfcast selection criterion (cv, bic)")
    ap.add_argument("--max-terms", type=int, default=None)
    ap.add_argument("--likelihood", default=None, help="perfcast likelihood (auto, normal)")
    ap.add_argument("--noise", default=None, help="perfcast noise model of the weights (mixed, relative)")
    ap.add_argument("--json", default=None, help="write all numbers to this file")
    ap.add_argument("--out", default=None, help="directory for the generated files (default bench/out)")
    args = ap.parse_args(argv)
    global OUT
    if args.out:
        OUT = Path(args.out)
    OUT.mkdir(exist_ok=True)
    from perfcast.fit import FitOptions
    kw = {}
    if args.selection:
        kw["selection"] = args.selection
    if args.max_terms:
        kw["max_terms"] = args.max_terms
    if args.likelihood:
        kw["likelihood"] = args.likelihood
    if args.noise:
        kw["noise"] = args.noise
    if os.environ.get("PERFCAST_SHORTLIST"):
        kw["shortlist"] = int(os.environ["PERFCAST_SHORTLIST"])
    options = FitOptions(**kw)
    results = {}
    for name in args.sets.split(","):
        nparam, count, noise, reps, kind, pvals = SETS[name]
        count = max(10, int(count * args.scale))
        rng = np.random.default_rng(args.seed + zlib.crc32(name.encode()) % 1000)
        params = ["p"] if nparam == 1 else ["p", "n"]
        if nparam == 1:
            points = [(p,) for p in pvals]
            target = [4 * pvals[-1]]
        else:
            points = [(p, n) for p in pvals for n in N_VALUES]
            target = [4 * pvals[-1], 4 * N_VALUES[-1]]
        truths = make_truths(rng, nparam, count, kind, pvals[-1], N_VALUES[-1])
        path = OUT / f"{name}.txt"
        data, fresh = write_text(path, params, points, truths, noise, reps, rng)
        row = {"callpaths": count, "noise": noise}
        pt, preds, leads, ivs, apreds, aivs = run_perfcast(path, target, params, options)
        row["perfcast"] = {**score(truths, preds, leads, ivs, target, params, noise, np.random.default_rng(7)),
                           "model_s": pt["model"], "read_s": pt["read"],
                           "ms_per_callpath": 1000 * pt["model"] / count}
        avg = score(truths, apreds, leads, aivs, target, params, noise, np.random.default_rng(7))
        row["perfcast_averaged"] = {k: avg[k] for k in ("err_median", "err_p90", "coverage")}
        if args.oracle:
            opreds = oracle(truths, data, points, params, target)
            orc = score(truths, opreds, {k: {} for k in opreds}, None, target, params, noise, np.random.default_rng(7))
            row["oracle"] = {k: orc[k] for k in ("err_median", "err_p90")}
        if args.bayes:
            T, Tt = prior_shapes(nparam, pvals, points, target)
            for lik in ("gauss", "uniform", "laplace"):
                if lik == "laplace":
                    bp = bayes_laplace(data, T, Tt, kind)
                elif nparam == 1:
                    bp = bayes_ceiling(data, T, Tt, kind, noise, lik, 300 if lik == "gauss" else 3000)
                else:
                    continue   # the grid integrals are too slow for 3,528 hypotheses
                for stat, preds_b in bp.items():
                    sc = score(truths, preds_b, {k: {} for k in preds_b}, None, target, params, noise,
                               np.random.default_rng(7))
                    row[f"bayes_{lik}_{stat}"] = {k: sc[k] for k in ("err_median", "err_p90")}
        if not args.no_extrap:
            d, epreds, eleads = run_extrap(path, target, params, reuse=not fresh and not args.rerun_extrap)
            row["extrap_cached"] = d["cached"]
            row["extrap"] = {**score(truths, epreds, eleads, None, target, params, noise, np.random.default_rng(7)),
                             "model_s": d["model"], "read_s": d["read"], "wall_s": d["wall"],
                             "ms_per_callpath": 1000 * d["model"] / count}
            row["speedup_model"] = d["model"] / max(pt["model"], 1e-9)
            row["speedup_read_model"] = (d["read"] + d["model"]) / max(pt["read"] + pt["model"], 1e-9)
        results[name] = row
        report(name, row)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def report(name, row):
    pc = row["perfcast"]
    line = (f"{name:9s} n={row['callpaths']:5d} noise=±{row['noise'] / 2:.1%} | perfcast: "
            f"{pc['ms_per_callpath']:.3f} ms/cp, exact {pc['exact']:.1%}, err med {pc['err_median']:.2%} "
            f"p90 {pc['err_p90']:.2%}, 90%-PI coverage {pc['coverage']:.1%}")
    av = row["perfcast_averaged"]
    line += (f" | averaged: err med {av['err_median']:.2%} p90 {av['err_p90']:.2%}, coverage {av['coverage']:.1%}")
    if "oracle" in row:
        line += f" | oracle (true shape): err med {row['oracle']['err_median']:.2%} p90 {row['oracle']['err_p90']:.2%}"
    for key in ("bayes_gauss_mean", "bayes_gauss_median", "bayes_uniform_mean", "bayes_uniform_median",
                "bayes_laplace_mean", "bayes_laplace_median"):
        if key in row:
            line += f" | {key}: p90 {row[key]['err_p90']:.2%}"
    if "extrap" in row:
        ex = row["extrap"]
        line += (f" | Extra-P: {ex['ms_per_callpath']:.2f} ms/cp, exact {ex['exact']:.1%}, err med "
                 f"{ex['err_median']:.2%} p90 {ex['err_p90']:.2%} | speed x{row['speedup_model']:.0f} "
                 f"(read+model x{row['speedup_read_model']:.0f}), p90 ratio "
                 f"{pc['err_p90'] / max(ex['err_p90'], 1e-12):.2f} (averaged {av['err_p90'] / max(ex['err_p90'], 1e-12):.2f})")
        if "oracle" in row:
            line += f", oracle ratio {row['oracle']['err_p90'] / max(ex['err_p90'], 1e-12):.2f}"
        if row.get("extrap_cached"):
            line += " [Extra-P cached]"
    print(line, flush=True)


if __name__ == "__main__":
    main()

"""Closed-loop validation of the compute projection on published data.

Each SPEC CPU2017 FP benchmark in turn plays "the application": its signature comes from the
characterisation data, its surrogate is built from the *other* benchmarks only, and its runtime
on a target system is projected from its published runtime on a base system; the published
runtime on the target is the truth.  The naive baseline scales by the geometric mean of the other
benchmarks' target/base ratios.  Error = |projected / published - 1|.

Methods: ``"factor"`` (default, :mod:`.factor`: low-rank model of the database without the
application's column, loadings predicted from the signature), ``"surrogate"`` (Sharkawi's
combination of benchmarks, optionally blended with a ridge regression).  The factor method needs
the memory groups of :data:`.factor.FEATURE_GROUPS` among ``groups``; otherwise it falls back to
the surrogate (``LoopResult.quality`` says which ran).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PerfcastError
from .database import BenchmarkDB
from .signatures import Signature
from .signatures import GROUPS
from .factor import LEVEL, factor_projector, feature_metrics
from .surrogate import find_surrogate, regression_log_ratio

METHODS = ("factor", "surrogate")


@dataclass
class LoopResult:
    app: np.ndarray          # benchmark name per row
    base: np.ndarray
    target: np.ndarray
    error: np.ndarray        # |projected / published - 1| of the method
    baseline: np.ndarray     # geometric-mean baseline
    quality: np.ndarray
    truth: np.ndarray        # published target/base ratio of the application
    low: np.ndarray          # the method's interval on the ratio (level LEVEL; NaN where it has none)
    high: np.ndarray

    def coverage(self, mask=None) -> dict | None:
        """Share of published ratios inside the intervals and their median relative half-width."""
        m = np.isfinite(self.low) & np.isfinite(self.high)
        if mask is not None:
            m &= mask
        if not m.any():
            return None
        inside = (self.low[m] <= self.truth[m]) & (self.truth[m] <= self.high[m])
        return {"level": LEVEL, "projections": int(m.sum()), "coverage": float(inside.mean()),
                "median_half_width": float(np.median(np.sqrt(self.high[m] / self.low[m]) - 1))}

    def summary(self) -> dict:
        def s(e):
            return {"mean": float(np.mean(e)), "median": float(np.median(e)), "p90": float(np.quantile(e, 0.9))}
        per = {}
        for a in np.unique(self.app):
            m = self.app == a
            per[str(a)] = {"method": float(self.error[m].mean()), "baseline": float(self.baseline[m].mean())}
            cov = self.coverage(m)
            if cov is not None:
                per[str(a)]["coverage"] = cov["coverage"]
        return {"pairs": int(len(np.unique(np.stack([self.base, self.target]), axis=1)[0])),
                "projections": int(len(self.error)), "method": s(self.error), "baseline": s(self.baseline),
                "interval": self.coverage(), "per_benchmark": per}


def random_pairs(db: BenchmarkDB, benchmarks: list[str], n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` random ordered (base, target) pairs of distinct systems having every benchmark."""
    t = db.times()
    t = t[[b for b in benchmarks if b in t.columns]].dropna()
    if len(t) < 2:
        raise PerfcastError("fewer than two systems have every benchmark")
    rng = np.random.default_rng(seed)
    ids = t.index.to_numpy()
    b = rng.integers(0, len(ids), 2 * n)
    g = rng.integers(0, len(ids), 2 * n)
    keep = b != g
    return list(zip(ids[b[keep]][:n], ids[g[keep]][:n]))


def mean_baseline(db: BenchmarkDB, benchmarks: list[str], pairs) -> dict:
    """The geometric-mean baseline alone, for a projection without counters: on each pair every one of
    ``benchmarks`` in turn is the application, projected by the geometric mean of the others' ratios.
    ``{mean, median, p90, projections}`` of ``|projected / published - 1|``."""
    t = db.times()[[b for b in benchmarks if b in db.benchmarks]]
    err = []
    for base, target in pairs:
        lr = np.log(t.loc[target].to_numpy(float) / t.loc[base].to_numpy(float))
        lr = lr[np.isfinite(lr)]
        if len(lr) < 2:
            continue
        others = (lr.sum() - lr) / (len(lr) - 1)
        err += list(np.abs(np.exp(others - lr) - 1))
    if not err:
        raise PerfcastError("no published pair with two benchmarks")
    e = np.array(err)
    return {"mean": float(e.mean()), "median": float(np.median(e)), "p90": float(np.quantile(e, 0.9)),
            "projections": len(e)}


def closed_loop(db: BenchmarkDB, signatures: dict[str, Signature], groups, pairs, target_aware: bool = True,
                max_members: int = 4, blend: float | None = None, method: str = "factor",
                rank: int | None = None, alpha: float | None = None, supervised: bool = True,
                apps: list[str] | None = None) -> LoopResult:
    """``method`` "factor" (default) or "surrogate".  For the surrogate, ``blend`` = w: projected log
    ratio = w x surrogate + (1 - w) x ridge regression of the other benchmarks' log ratios on their
    signatures (:func:`regression_log_ratio`); None = surrogate only.  ``rank``/``alpha`` override
    the factor model's defaults (:data:`.factor.RANK`, :data:`.factor.ALPHA`); ``supervised=False`` uses
    the plain SVD (:func:`.factor.factor_projector`).

    ``apps``: the benchmarks that play the application (default: every benchmark with a signature
    and results); the others with signatures only train.  A pair's benchmarks without a result on
    both systems (e.g. a second suite joined to part of the systems) are left out of that pair's
    fit.  The baseline is the geometric mean over the other *applications* (the issue's baseline:
    the other FP benchmarks), the same whatever else trains."""
    if method not in METHODS:
        raise PerfcastError(f"unknown method {method!r}; methods: {', '.join(METHODS)}", where="method")
    benches = [b for b in sorted(signatures) if b in db.benchmarks]
    if len(benches) < 3:
        raise PerfcastError("fewer than three benchmarks have both a signature and published results")
    apps = benches if apps is None else [b for b in apps if b in benches]
    if not apps:
        raise PerfcastError("none of the applications has both a signature and published results")
    t = db.times()[benches]
    rows = {k: [] for k in ("app", "base", "target", "error", "baseline", "quality", "truth", "low", "high")}
    cache = {}
    factor = {}
    if method == "factor":
        kw = {k: v for k, v in (("rank", rank), ("alpha", alpha)) if v is not None}
        for app in apps:
            if feature_metrics(signatures[app], groups):
                # the application's own column is dropped: the model sees only the other benchmarks
                factor[app] = factor_projector(t.drop(columns=app), {b: signatures[b] for b in benches if b != app},
                                               signatures[app], groups, supervised=supervised, **kw)
    for base, target in pairs:
        lr = np.log(t.loc[target].to_numpy(float) / t.loc[base].to_numpy(float))
        have = [b for b, x in zip(benches, lr) if np.isfinite(x)]
        ratios = {b: float(np.exp(x)) for b, x in zip(benches, lr) if np.isfinite(x)}
        for app in apps:
            if app not in ratios:
                continue
            others = {b: signatures[b] for b in have if b != app}
            logr = {b: float(np.log(ratios[b])) for b in others}
            lo = hi = float("nan")
            if app in factor:
                sf, lo, hi = (float(np.exp(x)) for x in factor[app].log_interval(logr))
                quality = "factor"
            elif target_aware:
                sur = find_surrogate(signatures[app], others, groups, logr, max_members)
            else:
                key = (app, tuple(others))
                if key not in cache:
                    cache[key] = find_surrogate(signatures[app], others, groups, None, max_members)
                sur = cache[key]
            if app not in factor:
                sf = sur.scaling_factor(ratios)
                quality = sur.quality
            if blend is not None and app not in factor:
                metrics = [m for g in groups for m in GROUPS[g]]
                reg = regression_log_ratio(signatures[app], others, logr, metrics)
                sf = float(np.exp(blend * np.log(sf) + (1 - blend) * reg))
            truth = ratios[app]
            base_sf = float(np.exp(np.mean([logr[b] for b in apps if b in logr])))
            rows["app"].append(app)
            rows["base"].append(base)
            rows["target"].append(target)
            rows["error"].append(abs(sf / truth - 1))
            rows["baseline"].append(abs(base_sf / truth - 1))
            rows["quality"].append(quality)
            rows["truth"].append(truth)
            rows["low"].append(lo)
            rows["high"].append(hi)
    return LoopResult(**{k: np.array(v) for k, v in rows.items()})

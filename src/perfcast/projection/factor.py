"""Low-rank factor model of a benchmark database: the default compute projection (issue #7).

Published results of many systems on the same benchmarks co-vary in a few ways.  With
``L[s, b] = log t(system s, benchmark b)``::

    L[s, b] = a_s + mu_b + sum_k u_sk v_bk + e_sb        (k = 1..K)

``a_s`` is the system's overall speed, ``mu_b`` the benchmark's length, ``u_s`` the system's
position on the K factors and ``v_b`` the benchmark's loadings (its sensitivity to them); ``e`` is
what no factor explains.  On SPEC CPU2017 FP rate the first factor alone explains 75 % of the
variance left after ``a_s`` and ``mu_b``; its system scores follow the memory bandwidth per copy
(correlation 0.67 with log(channels x data rate / copies)) and its loadings separate the
streaming benchmarks (bwaves, lbm, fotonik3d, roms) from the compute-bound ones (imagick, nab,
namd).

Supervised fit (:func:`supervised_model`, the default): only the loadings an application's counter
signature can predict are useful, so the SVD is not of the double-centred ``L`` (systems x
benchmarks, every system with a result for every benchmark) but of ``L @ H``, ``H`` the ridge hat
matrix of the benchmarks' signature features: the direction of largest variance among those the
signatures can express, with the benchmarks' loadings their ridge-smoothed least-squares loadings.
On the closed loop this takes the mean error from 12.3 % (plain SVD, loadings regressed on the
signatures afterwards) to 11.8 % (bench/PROJECTION.md); a second supervised factor makes it worse.
More benchmarks with signatures help more than any setting: with the integer rate results joined
to the same machines (22 training benchmarks instead of 12) the error is 11.2 %.

Projection of an application from system ``s`` to system ``s'``:

1. the benchmarks' published log ratios ``d_b = L[s', b] - L[s, b] = c + v_b . du + noise``
   give ``c`` and ``du = u_s' - u_s`` by weighted least squares (weights 1 / the benchmark's
   residual variance ``var(e_b)``: benchmarks with large idiosyncrasies, e.g. compiler-sensitive
   ones, count less);
2. the application's loadings ``v_app`` are predicted from its counter signature by the same ridge
   regression across the benchmarks of their least-squares loadings on their signatures;
3. projected log ratio ``= c + v_app . du``; scaling factor = its exponential.

Interval (:meth:`FactorModel.log_interval`, level :data:`LEVEL`): the projected log ratio errs by
the application's own residual on the pair, the error of ``c`` and ``du``, and the error of its
predicted loading times ``du``.  The first two are scaled by this pair's weighted residual mean
square over the benchmarks (a pair the factors describe poorly, e.g. across vendors or compilers,
gets a wider interval); the loading's error is its leave-one-benchmark-out error over the training
benchmarks.  Quantile of Student's t with the pair fit's degrees of freedom.  No constant was
tuned: the closed loop's 90 % intervals cover 90.3-90.6 % of published ratios (bench/PROJECTION.md).

Features of step 2 (:data:`FEATURE_GROUPS`): the memory-hierarchy metrics -- LLC misses and
accesses, DRAM bytes, prefetch-off LLC traffic and CPI gain of prefetching -- per instruction and
per cycle (metric / CPI: the demand rate a copy puts on the shared memory system), log-compressed
and standardised as in :mod:`.surrogate`.  A leave-one-benchmark-out search over all subsets of
the six metric groups picks these three for 11 of the 13 benchmarks; the portable groups (CPI,
load/store mix, demand cache misses) do not predict the first loading (streaming codes hide their
traffic behind prefetching), so without the memory groups :func:`factor_projector` refuses and the
callers fall back to the surrogate.  ``RANK`` and ``ALPHA`` were chosen on held-out system pairs
(bench/PROJECTION.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from scipy import stats

from ..errors import PerfcastError
from .signatures import GROUPS, Signature

#: metric groups whose metrics predict the loadings (per instruction and per cycle)
FEATURE_GROUPS = ("llc", "bandwidth", "prefetch")
#: factors fitted / ridge penalty of the loading regression (chosen on held-out pairs)
RANK = 1
ALPHA = 0.3
#: level of the projection intervals
LEVEL = 0.9


@dataclass(frozen=True)
class PairFit:
    """``log ratio_b = c + v_b . du`` fitted on one pair's benchmarks (weights ``1 / var(e_b)``)."""

    c: float
    du: np.ndarray
    used: list[str]
    cov: np.ndarray      # (A' W A)^-1 of the weighted fit, A = [1, loadings]
    scale: float         # weighted residual mean square: this pair's residual variance / the database's
    dof: int


@dataclass
class FactorModel:
    """``L[s, b] = a_s + mu_b + scores[s] . loadings[b] + e``, fitted on complete rows."""

    benchmarks: list[str]
    systems: list[str]
    offsets: np.ndarray        # a_s, per system (mean log time over the benchmarks)
    means: np.ndarray          # mu_b, per benchmark (mean of L - a_s over the systems)
    scores: np.ndarray         # (n_systems, K)
    loadings: np.ndarray       # (n_benchmarks, K)
    residual_var: np.ndarray   # var(e_b) per benchmark
    explained: np.ndarray      # share of the double-centred variance per factor (all factors)
    free_loadings: np.ndarray | None = None  # least-squares loadings on the scores (= loadings unless smoothed)

    @property
    def rank(self) -> int:
        return self.loadings.shape[1]

    @property
    def weights(self) -> np.ndarray:
        """Weights of the pair fit: 1 / residual variance (floored so an exact model stays finite)."""
        v = self.residual_var
        return 1.0 / (v + 1e-6 * (float(v.mean()) if v.mean() > 0 else 1.0) + 1e-12)

    def loading(self, name: str) -> np.ndarray:
        return self.loadings[self.benchmarks.index(name)]

    def loading_of(self, times: Mapping[str, float]) -> tuple[float, np.ndarray]:
        """``(mu, v)`` of a new column (system -> runtime) by least squares on the system scores.

        For an application measured on several systems of the database; the closed loop never
        uses it (the application's column is what it predicts)."""
        idx = {s: i for i, s in enumerate(self.systems)}
        rows = [(idx[s], float(t)) for s, t in times.items() if s in idx and np.isfinite(t) and t > 0]
        if len(rows) < self.rank + 2:
            raise PerfcastError(f"a column needs results on at least {self.rank + 2} systems of the model")
        i = np.array([r[0] for r in rows])
        y = np.log([r[1] for r in rows]) - self.offsets[i]
        coef = np.linalg.lstsq(np.c_[np.ones(len(i)), self.scores[i]], y, rcond=None)[0]
        return float(coef[0]), coef[1:]

    def pair(self, log_ratios: Mapping[str, float]) -> PairFit:
        """Fit ``c`` and ``du = u_target - u_base`` from the benchmarks' log target/base ratios on one pair."""
        use = [j for j, b in enumerate(self.benchmarks) if np.isfinite(log_ratios.get(b, np.nan))]
        if len(use) < self.rank + 2:
            raise PerfcastError(f"the factor model needs target/base ratios of at least {self.rank + 2} of its "
                                f"benchmarks ({len(use)} given)")
        A = np.c_[np.ones(len(use)), self.loadings[use]]
        y = np.array([log_ratios[self.benchmarks[j]] for j in use])
        w = self.weights[use]
        sw = np.sqrt(w)
        coef = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)[0]
        dof = len(use) - A.shape[1]
        r = y - A @ coef
        scale = float(np.sum(w * r * r) / dof) if dof > 0 else float("nan")
        cov = np.linalg.pinv(A.T @ (A * w[:, None]))
        return PairFit(float(coef[0]), coef[1:], [self.benchmarks[j] for j in use], cov, scale, dof)

    def fit_pair(self, log_ratios: Mapping[str, float]) -> tuple[float, np.ndarray, list[str]]:
        """``(c, du, benchmarks used)`` from the benchmarks' log target/base ratios on one pair."""
        f = self.pair(log_ratios)
        return f.c, f.du, f.used

    def log_ratio(self, log_ratios: Mapping[str, float], loading: np.ndarray) -> float:
        """Projected log target/base ratio of a program with ``loading``."""
        f = self.pair(log_ratios)
        return float(f.c + np.asarray(loading, float) @ f.du)

    def log_interval(self, log_ratios: Mapping[str, float], loading: np.ndarray, loading_sd: np.ndarray,
                     level: float = LEVEL) -> tuple[float, float, float]:
        """``(projected, low, high)`` log ratio of a program whose ``loading`` is known to ``loading_sd``
        (module doc); low/high are NaN when the pair leaves no degree of freedom."""
        if not 0 < level < 1:
            raise PerfcastError(f"the interval level must be between 0 and 1, not {level:g}", where="level")
        f = self.pair(log_ratios)
        v = np.asarray(loading, float)
        mid = float(f.c + v @ f.du)
        if f.dof <= 0:
            return mid, float("nan"), float("nan")
        a = np.r_[1.0, v]
        var = f.scale * (float(self.residual_var.mean()) + float(a @ f.cov @ a)) \
            + float(np.sum((np.asarray(loading_sd, float) * f.du) ** 2))
        half = float(stats.t.ppf(0.5 + level / 2, f.dof)) * np.sqrt(max(var, 0.0))
        return mid, mid - half, mid + half


def fit_factor_model(times: pd.DataFrame, rank: int = RANK, smoother: np.ndarray | None = None) -> FactorModel:
    """SVD of the double-centred log runtimes (systems x benchmarks) over the complete rows.

    ``smoother`` (benchmarks x benchmarks, e.g. the ridge hat matrix of the benchmarks' signature
    features) restricts the loadings to what it can express: the SVD is then of ``R @ smoother``,
    the directions of largest variance among those the signatures can predict, and the loadings
    are the smoothed least-squares loadings (``free_loadings`` keeps the unsmoothed ones)."""
    if rank < 1:
        raise PerfcastError("the factor model needs rank >= 1", where="rank")
    t = _complete(times)
    nb = t.shape[1]
    if nb < rank + 2:
        raise PerfcastError(f"a rank-{rank} factor model needs at least {rank + 2} benchmarks ({nb} given)")
    if len(t) < rank + 2:
        raise PerfcastError(f"a rank-{rank} factor model needs at least {rank + 2} systems with a result for "
                            f"every benchmark ({len(t)} have)")
    if smoother is not None and np.shape(smoother) != (nb, nb):
        raise PerfcastError(f"the smoother must be {nb} x {nb} (one row and column per benchmark)")
    off, mu, scores, loadings, free, resid_var, explained = _svd(np.log(t.to_numpy(float)), rank, smoother)
    return FactorModel([str(c) for c in t.columns], [str(i) for i in t.index], off, mu, scores, loadings,
                       resid_var, explained, free)


def _complete(times: pd.DataFrame) -> pd.DataFrame:
    """The systems with a positive, finite result for every benchmark."""
    t = times.apply(pd.to_numeric, errors="coerce")
    return t[(t > 0).all(axis=1) & np.isfinite(t).all(axis=1)]


def _svd(L: np.ndarray, rank: int, smoother: np.ndarray | None):
    """Offsets, means, scores, (smoothed) loadings, free loadings, residual variances and explained
    shares of the log runtimes ``L`` (systems x benchmarks); :func:`fit_factor_model`."""
    off = L.mean(axis=1)
    R = L - off[:, None]
    mu = R.mean(axis=0)
    R = R - mu
    M = R if smoother is None else R @ smoother
    # SVD through the benchmarks x benchmarks Gram matrix: thousands of systems, a dozen benchmarks
    w, V = np.linalg.eigh(M.T @ M)
    order = np.argsort(w)[::-1]
    S = np.sqrt(np.clip(w[order], 0.0, None))
    Vt = V[:, order].T
    if S[rank - 1] ** 2 <= 1e-12 * max(float(np.sum(R ** 2)), 1e-300):
        raise PerfcastError(f"the benchmarks' results (or the part of them the signatures can express) vary "
                            f"along fewer than {rank} direction(s): no rank-{rank} factor model")
    n = len(R)
    scores = (M @ Vt[:rank].T / S[:rank]) * np.sqrt(n)        # unit variance per factor
    loadings = Vt[:rank].T * (S[:rank] / np.sqrt(n))   # log-time units per unit score
    free = R.T @ scores / n
    resid = R - scores @ loadings.T
    tot = float(np.sum(R ** 2))
    return off, mu, scores, loadings, free, resid.var(axis=0), S ** 2 / tot if tot > 0 else np.zeros_like(S)


# -- loadings from counter signatures ------------------------------------------------------------
def feature_metrics(app: Signature, groups: Sequence[str] | None = None) -> list[str]:
    """Metrics of :data:`FEATURE_GROUPS` (within ``groups``) that the application's signature has."""
    gs = [g for g in FEATURE_GROUPS if (groups is None or g in groups)
          and all(m in app.values for m in GROUPS[g])]
    return [m for g in gs for m in GROUPS[g]]


def _raw_features(sig: Signature, metrics: Sequence[str]) -> np.ndarray:
    x = [sig.values[m] for m in metrics]
    cpi = sig.values.get("cpi")
    if cpi is not None and cpi > 0:
        x += [sig.values[m] / cpi for m in metrics if m != "cpi"]
    return np.array(x, dtype=float)


def signature_design(signatures: Mapping[str, Signature], names: Sequence[str], metrics: Sequence[str],
                     app: Signature | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Design matrix of the benchmarks ``names`` (and the row of ``app``) for the loading regression.

    Features: ``metrics`` per instruction and, when every signature has a CPI, per cycle;
    log-compressed by the benchmarks' median magnitude and standardised over ``names``; a leading
    column of ones (the intercept)."""
    per_cycle = all((signatures[b].values.get("cpi") or 0) > 0 for b in names) and \
        (app is None or (app.values.get("cpi") or 0) > 0)

    def raw(s):
        return _raw_features(s, metrics) if per_cycle else np.array([s.values[m] for m in metrics], float)
    X = np.array([raw(signatures[b]) for b in names])
    ref = np.median(np.abs(X), axis=0)
    ref = np.where(ref > 0, ref, 1.0)
    z = np.sign(X) * np.log1p(np.abs(X) / ref)
    mu, sd = z.mean(axis=0), z.std(axis=0)
    ok = sd > 1e-12
    Z = np.c_[np.ones(len(names)), (z[:, ok] - mu[ok]) / sd[ok]]
    if app is None:
        return Z, None
    xa = raw(app)
    za = np.sign(xa) * np.log1p(np.abs(xa) / ref)
    return Z, np.r_[1.0, (za[ok] - mu[ok]) / sd[ok]]


def ridge_operator(Z: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``(Z'Z + alpha I)^-1 Z'`` with the intercept (first column) not penalised."""
    P = alpha * np.eye(Z.shape[1])
    P[0, 0] = 0.0
    return np.linalg.solve(Z.T @ Z + P, Z.T)


def _feature_benchmarks(names: Sequence[str], signatures: Mapping[str, Signature], metrics: Sequence[str],
                        exclude: str | None = None) -> list[str]:
    return [b for b in names if b != exclude and b in signatures and all(m in signatures[b].values for m in metrics)]


def predict_loading(model: FactorModel, signatures: Mapping[str, Signature], app: Signature,
                    metrics: Sequence[str], alpha: float = ALPHA) -> tuple[np.ndarray, list[str]]:
    """Ridge prediction of ``app``'s loadings from the model benchmarks' (free loading, signature)
    pairs (:func:`signature_design`).  Returns the loadings and the benchmarks trained on."""
    if not metrics:
        raise PerfcastError("no signature metrics to predict factor loadings from")
    names = _feature_benchmarks(model.benchmarks, signatures, metrics, app.name)
    if len(names) < 3:
        raise PerfcastError(f"predicting factor loadings needs at least three benchmarks with signatures "
                            f"having {', '.join(metrics)} ({len(names)} have)")
    Z, a = signature_design(signatures, names, metrics, app)
    free = model.loadings if model.free_loadings is None else model.free_loadings
    V = free[[model.benchmarks.index(b) for b in names]]
    return a @ (ridge_operator(Z, alpha) @ V), names


def supervised_model(times: pd.DataFrame, signatures: Mapping[str, Signature], metrics: Sequence[str],
                     rank: int = RANK, alpha: float = ALPHA) -> FactorModel:
    """Factor model of the benchmarks of ``times`` having ``metrics`` in their signatures, smoothed by
    the ridge hat matrix of those signatures (:func:`fit_factor_model`): loadings an application's
    signature can predict."""
    names = _feature_benchmarks(list(times.columns), signatures, metrics)
    if len(names) < 3:
        raise PerfcastError(f"predicting factor loadings needs at least three benchmarks with signatures "
                            f"having {', '.join(metrics)} ({len(names)} have)")
    Z, _ = signature_design(signatures, names, metrics)
    return fit_factor_model(times[names], rank, smoother=Z @ ridge_operator(Z, alpha))


def loading_error(times: pd.DataFrame, signatures: Mapping[str, Signature], metrics: Sequence[str],
                  names: Sequence[str], rank: int = RANK, alpha: float = ALPHA) -> np.ndarray | None:
    """Root mean square leave-one-benchmark-out error of the predicted loadings over ``names``: each
    benchmark's loading predicted by the model of the others vs its own least-squares loading on
    that model's scores; per factor, None with fewer than five benchmarks."""
    if len(names) < max(5, rank + 3):
        return None
    L = np.log(_complete(times[list(names)]).to_numpy(float))
    err = []
    for j, b in enumerate(names):
        others = [x for x in names if x != b]
        Z, a = signature_design(signatures, others, metrics, signatures[b])
        B = ridge_operator(Z, alpha)
        keep = [k for k in range(len(names)) if k != j]
        off, _, scores, _, free, _, _ = _svd(L[:, keep], rank, Z @ B)
        own = np.linalg.lstsq(np.c_[np.ones(len(L)), scores], L[:, j] - off, rcond=None)[0][1:]
        err.append(a @ (B @ free) - own)
    return np.sqrt(np.mean(np.square(err), axis=0))


@dataclass
class FactorProjector:
    """A fitted model and one application's predicted loadings: scaling factors for any pair."""

    model: FactorModel
    loading: np.ndarray
    metrics: list[str]
    trained_on: list[str]
    loading_sd: np.ndarray | None = None     # leave-one-benchmark-out error of the loading
    notes: list[str] = field(default_factory=list)

    def log_ratio(self, log_ratios: Mapping[str, float]) -> float:
        return self.model.log_ratio(log_ratios, self.loading)

    def log_interval(self, log_ratios: Mapping[str, float], level: float = LEVEL) -> tuple[float, float, float]:
        """``(projected, low, high)`` log ratio; low/high NaN when the loading's error is unknown."""
        if self.loading_sd is None:
            mid = self.log_ratio(log_ratios)
            return mid, float("nan"), float("nan")
        return self.model.log_interval(log_ratios, self.loading, self.loading_sd, level)

    def interval(self, ratios: Mapping[str, float], level: float = LEVEL) -> tuple[float, float, float]:
        """``(scaling factor, low, high)`` from the benchmarks' published target/base ratios."""
        return tuple(float(np.exp(x)) for x in self.log_interval(_log_ratios(ratios), level))

    def scaling_factor(self, ratios: Mapping[str, float]) -> float:
        """Projected target/base time ratio from the benchmarks' published ratios on the pair."""
        return float(np.exp(self.log_ratio(_log_ratios(ratios))))

    def to_dict(self) -> dict:
        return {"method": "factor model", "rank": self.model.rank, "systems": len(self.model.systems),
                "benchmarks": self.model.benchmarks, "loading": [float(x) for x in self.loading],
                "loading_error": None if self.loading_sd is None else [float(x) for x in self.loading_sd],
                "features": self.metrics, "explained": [float(x) for x in self.model.explained[:self.model.rank]],
                "notes": self.notes}


def factor_projector(times: pd.DataFrame, signatures: Mapping[str, Signature], app: Signature,
                     groups: Sequence[str] | None = None, rank: int = RANK, alpha: float = ALPHA,
                     supervised: bool = True) -> FactorProjector:
    """Fit the factor model on ``times`` (systems x benchmarks; the application's own column must not
    be in it) and predict ``app``'s loadings from its signature (metrics of :data:`FEATURE_GROUPS`
    within ``groups``).  ``supervised=False``: the plain SVD (the previous default, for comparison).
    Raises :class:`PerfcastError` when the signature lacks those groups."""
    metrics = feature_metrics(app, groups)
    if not metrics:
        raise PerfcastError(f"the factor model needs signature group(s) {', '.join(FEATURE_GROUPS)} "
                            f"(the application has {', '.join(app.groups()) or 'none'})")
    if app.name in times.columns:
        times = times.drop(columns=app.name)
    model = supervised_model(times, signatures, metrics, rank, alpha) if supervised else fit_factor_model(times, rank)
    v, names = predict_loading(model, signatures, app, metrics, alpha)
    sd = loading_error(times, signatures, metrics, names, rank, alpha) if supervised else None
    return FactorProjector(model, v, metrics, names, sd)


def _log_ratios(ratios: Mapping[str, float]) -> dict[str, float]:
    return {b: float(np.log(r)) for b, r in ratios.items() if r is not None and np.isfinite(r) and r > 0}

"""Surrogate search and the compute scaling factor (Sharkawi Sec. 3, Eq 6-10 as reconstructed).

A surrogate is a serial combination of 1..4 benchmarks: benchmark k executes a fraction phi_k of
the instructions (phi >= 0, sum 1).  Its per-instruction metrics are sum_k phi_k m_k (Eq 7), its
share of base time is s_k = phi_k CPI_k / sum_j phi_j CPI_j, and its target/base time ratio is the
scaling factor (Eq 10)

    SF = sum_k s_k P_k,        P_k = t_k(target) / t_k(base)   (published runtimes)

which equals sum_k phi_k I CPI_k t'_k/t_k / sum phi_k I CPI_k: the combination's target time over
its base time.  Projected compute time = SF x the application's compute time on the base.

Matching (Eq 8-9).  Per metric group g the match error is Sharkawi's
E_g = sum_j |m_j(app) - m_j(comb)| / sum_j m_j(app) (a floor of 10 % of the benchmarks' median
group size keeps near-zero groups, e.g. povray's cache misses, from dominating), and a group
"matches" when E_g <= tolerance (10 %).  The weights phi of every candidate subset of 1..4
benchmarks are found by non-negative least squares on the group-scaled metric residuals (sum to
one enforced by a heavily weighted extra row); subsets are searched exhaustively among the
candidates that a first NNLS over all benchmarks, and the best single benchmarks, propose.

Degrees of freedom.  A combination of k benchmarks has k - 1 free fractions (they sum to one):
it can move the combined signature in k - 1 independent directions (the affine rank of its
members' signatures).  The match has as many independent constraints as the signatures of the
candidates and the application vary in independent directions (the rank of their centred matrix;
the number of metrics unless some are linear in others).  When the free fractions are as many as
the constraints or more, a combination with positive fractions reproduces the application's
signature exactly, whatever the benchmarks' behaviour on other machines: its in-sample group
errors are 0 by construction and say nothing, so the match is not rated (``quality``
``"unrated"``, with a note); the projection's error is then only known from held-out data (the
closed loop on published pairs, :func:`perfcast.projection.project.closed_loop_check`).

Group ranking (Eq 2-5).  Sharkawi ranks the groups by their share of cycles on the target,
obtained by fitting the benchmarks' published target/base ratios.  Here the same data are used
directly: a ridge regression across the candidate benchmarks of log P_b on their standardised
(log-compressed) metrics tells which metrics explain how this target differs from this base; the
absolute coefficients weight the metrics in the match (plus a floor so nothing is ignored), and
the groups are ranked by the summed weights.  Without target data all metrics weigh the same.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import nnls

from ..errors import PerfcastError
from .signatures import GROUPS, Signature, check_groups

TOLERANCE = 0.10
_SUM_ROW = 1e3  # weight of the sum-to-one row in the NNLS


@dataclass
class Surrogate:
    """The chosen benchmarks, their instruction fractions and base-time shares, and match quality."""

    members: list[str]
    fractions: np.ndarray          # phi_k, instruction fractions
    shares: np.ndarray             # s_k, base-time shares (weights of the scaling factor)
    groups: list[str]              # groups used, in rank order (most important first)
    group_error: dict[str, float]  # Sharkawi's E_g per group
    group_weight: dict[str, float]
    residual: float                # weighted least-squares residual norm of the match
    tolerance: float = TOLERANCE
    notes: list[str] = field(default_factory=list)
    free: int = 0                  # free instruction fractions: affine rank of the members' signatures
    constraints: int = 1           # independent metric constraints (module doc: degrees of freedom)

    @property
    def dof(self) -> int:
        """Degrees of freedom the match leaves: independent constraints less free fractions; at 0 or
        below the combination reproduces the application's signature by construction."""
        return self.constraints - self.free

    @property
    def poor(self) -> list[str]:
        """Groups whose error exceeds the tolerance (the match is flagged when any does)."""
        return [g for g in self.groups if self.group_error[g] > self.tolerance]

    @property
    def quality(self) -> str:
        """``good``, ``fair`` or ``poor`` by the groups' match errors; ``unrated`` when the match has no
        degrees of freedom left (:attr:`dof`): its errors are 0 by construction."""
        if self.dof <= 0:
            return "unrated"
        bad = self.poor
        if not bad:
            return "good"
        return "poor" if bad[0] == self.groups[0] or len(bad) * 2 > len(self.groups) else "fair"

    def scaling_factor(self, ratios: Mapping[str, float]) -> float:
        """sum_k s_k P_k with P_k = target/base time ratio of member k."""
        missing = [m for m in self.members if m not in ratios or not np.isfinite(ratios[m])]
        if missing:
            raise PerfcastError(f"no target/base ratio for surrogate member(s) {', '.join(missing)}")
        return float(sum(s * ratios[m] for m, s in zip(self.members, self.shares)))

    def describe(self) -> str:
        return " + ".join(f"{s:.2f} {m}" for m, s in sorted(zip(self.members, self.shares), key=lambda x: -x[1]))

    def to_dict(self) -> dict:
        return {"members": self.members, "instruction_fractions": [float(x) for x in self.fractions],
                "time_shares": [float(x) for x in self.shares], "groups": self.groups,
                "group_error": {g: float(e) for g, e in self.group_error.items()},
                "group_weight": {g: float(w) for g, w in self.group_weight.items()},
                "residual": float(self.residual), "quality": self.quality, "poor_groups": self.poor,
                "free_fractions": self.free, "constraints": self.constraints, "degrees_of_freedom": self.dof,
                "notes": self.notes}

    def unrated_note(self) -> str:
        """Why the match is not rated (:attr:`quality` ``unrated``), to print beside it."""
        return (f"{len(self.members)} member(s) = {self.free} free fraction(s) for {self.constraints} independent "
                f"metric constraint(s) ({', '.join(self.groups)}): the combination reproduces the application's "
                f"signature by construction ({self.dof} degrees of freedom left), so its match error (0) says "
                f"nothing; the surrogate's error is the closed loop's on published data")


def degrees(members: np.ndarray, everything: np.ndarray) -> tuple[int, int]:
    """(free fractions, independent constraints) of a match (module doc): the affine rank of the
    members' signatures (rows of ``members``), and the rank of the centred signatures of the
    candidates and the application (rows of ``everything``), in the fit's scaled metrics."""
    free = int(np.linalg.matrix_rank(members[1:] - members[0])) if len(members) > 1 else 0
    constraints = int(np.linalg.matrix_rank(everything - everything.mean(axis=0))) if len(everything) > 1 else 0
    return free, constraints


def _compress(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x) / ref)


def metric_weights(cands: np.ndarray, log_ratios: np.ndarray, alpha: float = 3.0, floor: float = 0.05) -> np.ndarray:
    """Per-metric weights from a ridge fit of log target/base ratios on the candidates' metrics.

    ``cands`` is (n_candidates, n_metrics).  Metrics are log-compressed (log1p of the value over
    its median magnitude) and standardised; the weights are |beta| + ``floor``, normalised to
    mean 1.  Metrics constant over the candidates get the floor.
    """
    ref = np.median(np.abs(cands), axis=0)
    ref = np.where(ref > 0, ref, 1.0)
    z = _compress(cands, ref)
    sd = z.std(axis=0)
    ok = sd > 1e-12
    zs = np.zeros_like(z)
    zs[:, ok] = (z[:, ok] - z[:, ok].mean(axis=0)) / sd[ok]
    y = log_ratios - log_ratios.mean()
    A = zs[:, ok]
    beta = np.zeros(cands.shape[1])
    if A.shape[1]:
        beta[ok] = np.linalg.solve(A.T @ A + alpha * np.eye(A.shape[1]), A.T @ y)
    w = np.abs(beta) + floor * (np.abs(beta).max() if np.abs(beta).max() > 0 else 1.0)
    return w / w.mean()


def regression_log_ratio(app: Signature, candidates: Mapping[str, Signature], log_ratios: Mapping[str, float],
                         metrics: Sequence[str], alpha: float = 10.0) -> float:
    """Ridge prediction of the application's log target/base ratio from the candidates' published
    ratios on this pair, with the same log-compressed, standardised metrics as :func:`metric_weights`.

    Used by the closed loop's blended estimator: log SF = w log SF_surrogate + (1 - w) this
    (``alpha`` = 10 and w = 0.5 chosen on held-out system pairs, see bench/projection_closed_loop.py).
    """
    names = [n for n in candidates if n != app.name and np.isfinite(log_ratios.get(n, np.nan))
             and all(m in candidates[n].values for m in metrics)]
    if len(names) < 3:
        raise PerfcastError("the regression needs at least three benchmarks with signatures and ratios")
    X = np.array([candidates[n].vector(metrics) for n in names])
    y = np.array([log_ratios[n] for n in names])
    ref = np.median(np.abs(X), axis=0)
    ref = np.where(ref > 0, ref, 1.0)
    z, za = _compress(X, ref), _compress(app.vector(metrics), ref)
    mu, sd = z.mean(axis=0), z.std(axis=0)
    ok = sd > 1e-12
    A, a = (z[:, ok] - mu[ok]) / sd[ok], (za[ok] - mu[ok]) / sd[ok]
    beta = np.linalg.solve(A.T @ A + alpha * np.eye(A.shape[1]), A.T @ (y - y.mean()))
    return float(y.mean() + a @ beta)


def _positive_fits(A: np.ndarray, y: np.ndarray, subs: np.ndarray, solve) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of ``y`` on the columns ``subs[i]`` of ``A`` with the sum-to-one row, all at once
    (batched QR): normalised weights and residual norms, ``inf`` where a weight is not positive.
    Rank-deficient or underdetermined combinations fall back to ``solve`` (the NNLS) one by one."""
    m, k = subs.shape
    Ai = np.concatenate([np.moveaxis(A[:, subs], 0, 1), np.full((m, 1, k), _SUM_ROW)], axis=1)
    b = np.append(y, _SUM_ROW)
    if Ai.shape[1] < k:                     # fewer equations than members: the NNLS decides
        ok = np.zeros(m, dtype=bool)
    else:
        Q, R = np.linalg.qr(Ai)
        diag = np.abs(np.diagonal(R, axis1=1, axis2=2))
        ok = np.all(diag > 1e-10 * max(float(diag.max(initial=0.0)), 1e-300), axis=1)
    phis = np.zeros((m, k))
    rs = np.full(m, np.inf)
    if ok.any():
        qb = np.einsum("mnk,n->mk", Q[ok], b)
        phi = np.linalg.solve(R[ok], qb[..., None])[..., 0]
        pos = np.all(phi > 0, axis=1)
        phi = phi / phi.sum(axis=1, keepdims=True)
        res = np.linalg.norm(np.einsum("nmk,mk->mn", A[:, subs[ok]], phi) - y, axis=1)
        idx = np.flatnonzero(ok)
        phis[idx] = phi
        rs[idx[pos]] = res[pos]
    for i in np.flatnonzero(~ok):
        phi, r = solve(list(subs[i]))
        if phi is not None and np.all(phi > 0):
            phis[i], rs[i] = phi, r
    return phis, rs


def find_surrogate(app: Signature, candidates: Mapping[str, Signature], groups: Sequence[str],
                   log_ratios: Mapping[str, float] | None = None, max_members: int = 4,
                   tolerance: float = TOLERANCE, screen: int = 8) -> Surrogate:
    """The best 1..``max_members`` benchmark combination matching ``app`` on ``groups``.

    ``log_ratios`` (log target/base time per candidate) turn on the target-aware metric weighting
    (see module doc).  Candidates lacking a metric of ``groups`` are skipped (noted); the
    application lacking one is an error.
    """
    groups = check_groups(groups)
    if not 1 <= max_members <= 6:
        raise PerfcastError("a surrogate has 1 to 6 members", where="max_members")
    app.require(groups)
    metrics = [m for g in groups for m in GROUPS[g]]
    names, notes = [], []
    for n, s in candidates.items():
        if n == app.name:
            continue
        if all(m in s.values for m in metrics) and (log_ratios is None or np.isfinite(log_ratios.get(n, np.nan))):
            names.append(n)
        else:
            notes.append(f"{n} skipped (incomplete signature or no published ratio)")
    if not names:
        raise PerfcastError(f"no benchmark has a complete signature for groups {', '.join(groups)}")
    M = np.array([candidates[n].vector(metrics) for n in names])  # (n_cand, n_metrics)
    a = app.vector(metrics)
    # group scaling: Sharkawi's E_g denominator with a floor
    scale = np.empty(len(metrics))
    gidx = {}
    i = 0
    for g in groups:
        k = len(GROUPS[g])
        size = np.abs(M[:, i:i + k]).sum(axis=1)
        floor = 0.1 * float(np.median(size)) if np.median(size) > 0 else 1.0
        scale[i:i + k] = max(float(np.abs(a[i:i + k]).sum()), floor)
        gidx[g] = slice(i, i + k)
        i += k
    if log_ratios is not None and len(names) >= 3:
        w = metric_weights(M, np.array([log_ratios[n] for n in names]))
    else:
        w = np.ones(len(metrics))
    gw = {g: float(w[gidx[g]].sum() / len(GROUPS[g])) for g in groups}
    ranked = sorted(groups, key=lambda g: -gw[g])
    A = (M / scale).T * w[:, None]        # (n_metrics, n_cand)
    y = a / scale * w

    def solve(idx):
        Ai = np.vstack([A[:, idx], np.full(len(idx), _SUM_ROW)])
        phi, _ = nnls(Ai, np.append(y, _SUM_ROW))
        s = phi.sum()
        if s <= 0:
            return None, np.inf
        phi = phi / s
        return phi, float(np.linalg.norm(A[:, idx] @ phi - y))

    # screening: one NNLS over everything + the best single benchmarks
    phi_all, _ = solve(list(range(len(names))))
    single = _positive_fits(A, y, np.arange(len(names))[:, None], solve)[1]
    singles = sorted(range(len(names)), key=lambda j: single[j])
    pool = [j for j in np.argsort(-(phi_all if phi_all is not None else np.zeros(len(names))))
            if phi_all is not None and phi_all[j] > 1e-9][:screen]
    for j in singles:
        if len(pool) >= screen:
            break
        if j not in pool:
            pool.append(j)
    # the NNLS optimum of a combination is the least-squares fit on one of its sub-combinations with
    # all weights positive; every sub-combination is itself a candidate, so the best combination is
    # the best positive least-squares fit, found by size (smallest first) as the NNLS search would
    best = (np.inf, None, None)
    for k in range(1, min(max_members, len(pool)) + 1):
        subs = np.array(list(itertools.combinations(pool, k)))
        phis, rs = _positive_fits(A, y, subs, solve)
        for sub, phi, r in zip(subs, phis, rs):
            if r < best[0] - 1e-12:
                best = (r, list(sub), phi)
    r, sub, phi = best
    keep = phi > 1e-6
    sub, phi = [s for s, kp in zip(sub, keep) if kp], phi[keep] / phi[keep].sum()
    members = [names[j] for j in sub]
    comb = M[sub].T @ phi
    gerr = {g: float(np.abs(a[gidx[g]] - comb[gidx[g]]).sum() / scale[gidx[g]][0]) for g in groups}
    cpis = [candidates[m].values.get("cpi") for m in members]
    if all(c is not None and c > 0 for c in cpis):
        shares = phi * np.array(cpis)
        shares = shares / shares.sum()
    else:
        shares = phi.copy()
        notes.append("no CPI for every member: time shares taken equal to instruction fractions")
    free, constraints = degrees(A[:, sub].T, np.vstack([A.T, y]))
    sur = Surrogate(members, phi, shares, ranked, gerr, gw, r, tolerance, notes, free, constraints)
    if sur.quality == "unrated":
        notes.append("match not rated: " + sur.unrated_note())
    return sur

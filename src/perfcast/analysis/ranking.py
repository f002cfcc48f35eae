"""Scalability-bug ranking (SC13): order modelled callpaths by asymptotic growth, then by the
predicted cost at a target scale.

The growth key of a model is its per-parameter lead orders, largest first (so ``p^2`` outranks
``p log p`` outranks ``p``, and a model growing in two parameters outranks one growing in one at
the same order).  Ties are broken by the value predicted at ``target`` (when given), then by the
value at the largest measured point.  Series without a usable model rank last.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping

from ..errors import PerfcastError


@dataclass(frozen=True)
class Ranked:
    rank: int
    callpath: str
    metric: str
    model: object
    growth: tuple
    predicted: float | None


def growth_key(model) -> tuple:
    orders = sorted((tuple(o) for o in model.lead_order().values()), reverse=True)
    return tuple(orders)


def rank(series_models: Iterable, target: Mapping[str, float] | None = None, averaged: bool = False) -> list[Ranked]:
    """Rank objects with ``callpath``, ``metric``, ``model`` (e.g. fit.SeriesModel).

    The cost at ``target`` is the selected hypothesis' prediction (``averaged=True``: averaged over
    the competing hypotheses), as in ``perfcast predict``."""
    items = list(series_models)
    rows = []
    for sm in items:
        m = sm.model
        pred = None
        if target is not None:
            missing = [p for p in m.parameters if p not in target]
            if missing:
                raise PerfcastError(f"--target lacks parameter(s) {', '.join(missing)}", where="target")
            pred = float(m.predict({p: target[p] for p in m.parameters}, averaged=averaged))
            if math.isnan(pred):   # e.g. log2(p)^-1 at p <= 1 (perfcast.fit.terms.factor_values)
                raise PerfcastError(f"{sm.callpath} / {sm.metric}: the model {m.formula()} is undefined at the "
                                    f"target {','.join(f'{p}={target[p]:g}' for p in m.parameters)}", where="target")
        ok = m.status == "ok"
        key = growth_key(m) if ok else ()
        rows.append((ok, key, pred if pred is not None else float("-inf"), m.constant, sm, pred))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]), reverse=True)
    return [Ranked(i + 1, r[4].callpath, r[4].metric, r[4].model, r[1], r[5]) for i, r in enumerate(rows)]


def growth_str(key: tuple, parameters) -> str:
    return ", ".join(f"({i}, {j})" for i, j in key) if key else "-"


__all__ = ["Ranked", "rank", "growth_key", "Fraction"]

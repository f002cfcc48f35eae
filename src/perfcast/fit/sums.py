"""A parent that is exactly the sum of its children, modelled as the sum of their models.

PMPI's ``MPI`` node holds the calls (bytes) of all routines: at the bundled Jacobi solver
``3 p + 101 p + 100 p + 200 nbrs(p)`` calls (Init, Barrier, Reduce; Allreduce; Waitall; the halo's
Isend and Irecv on the process grid, :mod:`perfcast.fit.grid`).  Each routine's count has an exact
model; their sum has none in the PMNF search space (a power law of p plus a grid covariate), so the
parent's own fit misses its measured points and is off at a target (+19 % on the demo's bytes at
p = 16) while the children's sum is exact.  :func:`sum_models` replaces such a parent's model by the
sum of its children's -- only for a noise-free parent that is the sum of its children at every
measured point (:attr:`perfcast.modelset.ModelSet.sum_nodes`), whose children are all noise-free
and modelled exactly at every point they were measured, whose own model misses a point, and where
the children's sum passes through every one of the parent's points.  A child first measured at a
larger scale than its parent (no MPI_Waitall at p = 1: no neighbour) counts from there on, as it
did in the runs; one missing at a point between is not a sum that passes.  No file I/O happens here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from .model import Composite, Model, Quality, Term, point_columns

#: a model is exact at a measured point when it is no further from the mean than this (relative to
#: the series' largest absolute mean)
EXACT = 1e-9


@dataclass(frozen=True)
class SumModel(Composite):
    """The sum of ``parts`` (the children's models), with like terms merged in the formula."""

    parameters: tuple[str, ...]
    parts: tuple
    #: the children's callpaths, in the order of ``parts``
    children: tuple[str, ...]
    #: per part, the smallest value of each parameter it was measured at (None: everywhere): below
    #: it the part is absent (0), as it was in the runs (no MPI_Waitall at p = 1, no neighbour)
    starts: tuple = ()
    quality: Quality | None = None
    #: the largest measured value of each parameter
    upper: tuple[float, ...] | None = None
    single: Model | None = None
    status: str = "ok"
    needed: int = 0
    notes: tuple[str, ...] = ()

    # -- the Model interface ----------------------------------------------------------------------
    def _merged(self, parts=None) -> Model:
        """One Model of the merged terms of ``parts`` (default: all; its parameters: every name a
        part's terms use), whatever the parts' gates (:meth:`_gates`)."""
        const, coef, order = 0.0, {}, []
        for m in self.parts if parts is None else parts:
            const += _shown_constant(m)
            for t in m.terms:
                if t.factors not in coef:
                    order.append(t.factors)
                    coef[t.factors] = 0.0
                coef[t.factors] += float(t.coefficient)
        names = []
        for f in order:
            names += [q for q, _, _ in f if q not in names]
        terms = tuple(Term(coef[f], f) for f in order if coef[f] != 0.0)
        return Model(tuple(names), const, terms)

    @property
    def inner(self) -> Model:
        """The merged terms (no noise, no degrees of freedom: a sum of exact models)."""
        return self._merged()

    def lead_order(self):
        out = {q: (0, 0) for q in self.parameters}
        for m in self.parts:
            for q, o in m.lead_order().items():
                out[q] = max(out[q], o)
        return out

    def lead(self) -> dict[str, dict]:
        from .terms import fraction_str

        return {q: {"exponent": fraction_str(i), "log_exponent": int(j)} for q, (i, j) in self.lead_order().items()}

    def _present(self, X) -> list:
        """Per part, where it is present at ``X`` (boolean, of the points' shape)."""
        cols, shape = point_columns(self.parameters, X)
        out = []
        for k in range(len(self.parts)):
            start = self.starts[k] if k < len(self.starts) else None
            present = np.ones(int(np.prod(shape)) if shape else 1, dtype=bool)
            for q, lo in zip(self.parameters, start or ()):
                present &= cols[q] >= lo
            out.append(present.reshape(shape))
        return out

    def predict(self, X, averaged: bool = False) -> np.ndarray | float:
        out = None
        for m, here in zip(self.parts, self._present(X)):
            y = np.where(here, np.asarray(m.predict(X, averaged), dtype=float), 0.0)
            out = y if out is None else out + y
        return float(out) if out.ndim == 0 else out

    def interval(self, X, level: float = 0.9, averaged: bool = False) -> tuple:
        """The sum of the parts' bounds (their errors taken as fully correlated: never narrower than
        the truth's spread when they are not)."""
        lo = hi = None
        for m, here in zip(self.parts, self._present(X)):
            a, b = (np.where(here, np.asarray(v, dtype=float), 0.0) for v in m.interval(X, level, averaged))
            lo, hi = (a, b) if lo is None else (lo + a, hi + b)
        return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)

    def _gates(self) -> list:
        """The parts grouped by where they are present: ``[(gate, parts)]``, ``gate`` = (the part's
        own :attr:`Model.zero_below`, its :attr:`Model.zero_from`, its start in :attr:`starts`),
        the parts present everywhere first."""
        groups: dict = {}
        for k, m in enumerate(self.parts):
            inner = getattr(m, "base", m)
            zb, zf = getattr(inner, "zero_below", None), getattr(inner, "zero_from", None)
            start = self.starts[k] if k < len(self.starts) else None
            key = (tuple(zb) if zb else None, tuple(zf) if zf else None, tuple(start) if start else None)
            groups.setdefault(key, []).append(m)
        return sorted(groups.items(), key=lambda g: g[0] != (None, None, None))

    def formula(self, style: str = "plain", digits: int = 4) -> str:
        """The children's models added up, like terms merged: ``204 * p + 200 * nbrs(p)``; the parts
        that are 0 somewhere (a routine that does not run at p = 1, :attr:`Model.zero_below`, or a
        child first measured at a larger scale, :attr:`starts`) are merged apart, under their
        condition, as :meth:`predict` adds them: ``608 * p + (p >= 2) * (-1.28e5 + 6400 * p * n + 96000 * p)``."""
        from .model import zero_below_text

        texts = []
        for (zb, zf, start), parts in self._gates():
            merged = self._merged(parts)
            if (zb is not None or zf is not None or start is not None) and merged.constant == 0 and not merged.terms:
                continue        # a part that is 0 wherever it is present (MPI_Waitall's bytes)
            text = merged.formula(style, digits)
            if zb is None and zf is None and start is None:
                texts.append(text)
                continue
            text = zero_below_text(text, zb, style, zf)
            for q, lo in zip(self.parameters, start or ()):
                text = (f"[{q} \\geq {lo:g}] \\cdot \\left({text}\\right)" if style == "latex"
                        else f"({q} >= {lo:g}) * ({text})")
            texts.append(text)
        return " + ".join(texts) or "0"

    def __str__(self) -> str:
        return self.formula()

    # -- JSON -------------------------------------------------------------------------------------
    def to_dict(self, alternatives: bool = True) -> dict:
        d = {"kind": "sum", "parameters": list(self.parameters), "status": self.status,
             "formula": self.formula(), "children": list(self.children),
             "parts": [m.to_dict(alternatives=False) for m in self.parts],
             "starts": [None if st is None else [float(v) for v in st] for st in self.starts],
             "constant": float(self.constant), "terms": [t.to_dict() for t in self.terms],
             "quality": None if self.quality is None else self.quality.to_dict(), "lead": self.lead()}
        return self._extras(d)

    @classmethod
    def from_dict(cls, d: Mapping) -> "SumModel":
        from .segmented import model_from_dict

        try:
            if d.get("kind") != "sum":
                raise PerfcastError("not a sum model (kind is not 'sum')", where="kind")
            parts = tuple(model_from_dict(m) for m in d["parts"])
            children = tuple(str(c) for c in d["children"])
            if len(children) != len(parts) or not parts:
                raise PerfcastError("a sum model needs one part per child", where="parts")
            q, largest, single = d.get("quality"), d.get("largest_measured"), d.get("single")
            starts = tuple(None if st is None else tuple(float(v) for v in st) for st in d.get("starts") or ())
            if starts and len(starts) != len(parts):
                raise PerfcastError("a sum model needs one start per part", where="starts")
            return cls(tuple(d["parameters"]), parts, children, starts, None if q is None else Quality.from_dict(q),
                       None if largest is None else tuple(float(v) for v in largest),
                       None if single is None else Model.from_dict(single), str(d.get("status", "ok")),
                       int(d.get("needed", 0)), tuple(d.get("notes", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise PerfcastError(f"malformed sum model ({type(e).__name__}: {e})") from None


def _shown_as_terms(m) -> bool:
    """Whether ``m``'s value is its constant and terms everywhere (what the merged formula shows):
    a fitted model, or one of a process grid or a sum, without measured lines of their own level."""
    from .grid import GridModel

    if getattr(m, "status", "ok") != "ok" or type(m) not in (Model, GridModel, SumModel):
        return False
    return not getattr(getattr(m, "base", m), "lines", ())


def _shown_constant(m) -> float:
    """A part's constant as its formula shows it: 0 when it is the solver's round-off."""
    inner = getattr(m, "base", m)
    roundoff = getattr(inner, "constant_is_roundoff", None)
    return 0.0 if roundoff is not None and roundoff() else float(m.constant)


def _exact(model, X: np.ndarray, params: Sequence[str], mean: np.ndarray) -> bool:
    """Whether ``model``'s function (its measured lines' levels aside: :func:`perfcast.fit.lines.function_only`)
    passes through every measured mean."""
    from .lines import function_only

    with np.errstate(all="ignore"):
        y = np.asarray(function_only(model).predict({q: X[:, k] for k, q in enumerate(params)}), dtype=float)
    scale = max(float(np.max(np.abs(mean))), 1e-300) if len(mean) else 1.0
    return bool(np.all(np.abs(y - mean) <= EXACT * scale))


def sum_models(exp, series_models: Sequence, sum_nodes, parents: Mapping[str, str], statistics) -> list:
    """``series_models`` (fit.SeriesModel of ``exp``) with the model of each parent of ``sum_nodes``
    (``{(callpath, metric)}``: measured as the sum of its children) replaced by a :class:`SumModel`
    of its children's models where the module docstring's conditions hold; ``parents``: callpath ->
    parent callpath; ``statistics``: ``fit.series.statistics_columns(exp, locations)``."""
    from .segmented import _series_arrays
    from .series import SeriesModel

    items = list(series_models)
    if not sum_nodes:
        return items
    at = {(sm.callpath, sm.metric): i for i, sm in enumerate(items)}
    kids: dict[int, list[int]] = {}
    for i, sm in enumerate(items):
        p = at.get((parents.get(sm.callpath), sm.metric))
        if p is not None and (items[p].callpath, sm.metric) in sum_nodes:
            kids.setdefault(p, []).append(i)
    if not kids:
        return items
    params = tuple(exp.parameters)
    index, bounds, X, M, C, S = _series_arrays(statistics, params)
    rows = dict(zip(kids, index.find([(items[p].callpath, items[p].metric) for p in kids])))
    krows = {i: k for i, k in zip([i for ks in kids.values() for i in ks],
                                  index.find([(items[i].callpath, items[i].metric) for ks in kids.values() for i in ks]))}

    def data(k):
        a, b = bounds[k], bounds[k + 1]
        return X[a:b], M[a:b], C[a:b], S[a:b]

    # deepest parents first: a parent's children may themselves have become sums
    depth = {p: items[p].callpath.count("->") for p in kids}
    for p in sorted(kids, key=depth.get, reverse=True):
        k = rows[p]
        if k is None or any(krows.get(i) is None for i in kids[p]):
            continue
        x, mean, count, ssd = data(k)
        own = items[p].model
        if np.any(ssd != 0) or getattr(own, "status", "ok") != "ok" or _exact(own, x, params, mean):
            continue
        parts = [items[i].model for i in kids[p]]
        if not all(_shown_as_terms(m) for m in parts):
            continue
        starts, late = [], []
        for i in kids[p]:
            cx, cm, _, cs = data(krows[i])
            if np.any(cs != 0) or not _exact(items[i].model, cx, params, cm):
                break
            first = cx.min(axis=0)
            later = bool(np.any(first > x.min(axis=0)))
            starts.append(tuple(float(v) for v in first) if later else None)
            if later:
                late.append(f"{items[i].callpath} from " + ", ".join(
                    f"{q}={v:g}" for q, v, lo in zip(params, first, x.min(axis=0)) if v > lo))
        if len(starts) != len(parts):
            continue
        children = tuple(items[i].callpath for i in kids[p])
        total = SumModel(params, tuple(parts), children, tuple(starts))
        if not _exact(total, x, params, mean):
            continue
        q = Quality(0.0, 1.0, 0.0, None, None, len(mean), int(np.sum(count)))
        note = (f"the sum of its {len(parts)} children's models, each exact at the points it was measured: it is "
                f"their sum at every measured point, where its own model {own.formula()} is not",)
        if late:
            note += (f"children counted from where they were first measured (absent below, as in the runs): "
                     f"{'; '.join(late)}",)
        items[p] = SeriesModel(items[p].callpath, items[p].metric,
                               SumModel(params, tuple(parts), children, tuple(starts), q,
                                        tuple(float(v) for v in x.max(axis=0)), own, "ok", 0, note))
    return items


__all__ = ["SumModel", "sum_models"]

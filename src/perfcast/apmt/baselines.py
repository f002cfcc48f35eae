"""Baselines APMT is compared with (seed 000, §5): empirical and analytical whole-run models.

* Worley et al. (empirical): ``T(p) = a / p + b * p^c + d`` fitted to measured totals over the
  process count at one problem size (non-negative a, b, d; 0 <= c <= 3; bounded least squares).
  It has no size dependence: at another size it cannot predict and says so.
* Nan et al. (analytical): ``T = a * (size / p) + b`` with ``size`` a product of parameter powers
  the user names (e.g. ``n^2`` for an n x n grid, ``n^2*i`` with iterations); relative least squares
  with non-negative a and b.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, nnls

from ..errors import PerfcastError


@dataclass
class Worley:
    a: float
    b: float
    c: float
    d: float
    procs: str
    fixed: dict   # the other parameters' values of the fitted runs

    @classmethod
    def fit(cls, totals: pd.Series, procs: str) -> "Worley":
        params = list(totals.index.names)
        df = totals.rename("_t").reset_index()
        others = [p for p in params if p != procs]
        if others:
            # the size with the most process counts
            key = df.groupby(others)[procs].nunique().idxmax()
            key = key if isinstance(key, tuple) else (key,)
            for o, v in zip(others, key):
                df = df[df[o] == v]
        if df[procs].nunique() < 4:
            raise PerfcastError(f"the Worley model has 4 coefficients and needs >= 4 process counts at one size; "
                                f"got {df[procs].nunique()}")
        p, t = df[procs].to_numpy(float), df["_t"].to_numpy(float)

        def res(x):
            return (x[0] / p + x[1] * p ** x[2] + x[3] - t) / t
        r = least_squares(res, [t.max(), 0.0, 1.0, 0.0], bounds=([0, 0, 0, 0], [np.inf, np.inf, 3, np.inf]))
        return cls(*map(float, r.x), procs, {o: float(df[o].iloc[0]) for o in others})

    def predict(self, at: Mapping) -> float | None:
        if any(abs(float(at[o]) - v) > 1e-9 for o, v in self.fixed.items()):
            return None
        p = float(at[self.procs])
        return self.a / p + self.b * p ** self.c + self.d

    def formula(self) -> str:
        return f"{self.a:.4g}/{self.procs} + {self.b:.4g}*{self.procs}^{self.c:.3g} + {self.d:.4g}"


_FACTOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\^\s*([0-9.]+(?:/[0-9]+)?))?\s*$")


def parse_size(expr: str, params) -> list[tuple[str, float]]:
    out = []
    for part in expr.split("*"):
        m = _FACTOR.match(part)
        if not m:
            raise PerfcastError(f"size {expr!r}: expected a product like n^2*i", where="size")
        name, e = m.group(1), m.group(2)
        if name not in params:
            raise PerfcastError(f"size {expr!r}: no parameter {name!r} (parameters: {', '.join(params)})",
                                where="size")
        if e and "/" in e:
            a, b = e.split("/")
            ev = float(a) / float(b)
        else:
            ev = float(e) if e else 1.0
        out.append((name, ev))
    return out


@dataclass
class Nan:
    a: float
    b: float
    procs: str
    size: list

    def _x(self, at) -> float:
        s = 1.0
        for name, e in self.size:
            s *= float(at[name]) ** e
        return s / float(at[self.procs])

    @classmethod
    def fit(cls, totals: pd.Series, procs: str, size: str) -> "Nan":
        params = list(totals.index.names)
        sz = parse_size(size, params)
        df = totals.rename("_t").reset_index()
        tmp = cls(0, 0, procs, sz)
        x = np.array([tmp._x(r) for _, r in df.iterrows()])
        t = df["_t"].to_numpy(float)
        if len(np.unique(x)) < 2:
            raise PerfcastError("the Nan model needs runs with >= 2 different amounts of work per rank")
        # relative least squares, a and b >= 0: a time per unit of work and a fixed time (unconstrained,
        # HPCCG's oversubscribed totals gave "-2.081e-05*(n^3/p) + 0.09854": more work, less time)
        A = np.column_stack([x, np.ones_like(x)]) / t[:, None]
        scale = np.where(A.max(axis=0) > 0, A.max(axis=0), 1.0)
        (a, b), _ = nnls(A / scale, np.ones_like(t))
        return cls(float(a / scale[0]), float(b / scale[1]), procs, sz)

    def predict(self, at: Mapping) -> float:
        return self.a * self._x(at) + self.b

    def formula(self) -> str:
        s = "*".join(f"{n}^{e:g}" if e != 1 else n for n, e in self.size)
        return f"{self.a:.4g}*({s}/{self.procs}) + {self.b:.4g}"

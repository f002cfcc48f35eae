"""Predictions against measurements the models were not fitted on.

The way to trust an extrapolation is to check one: fit on the small runs, measure one larger run,
compare.  :func:`measured_means` reduces a second experiment exactly as the fitter reduces the
first (ranks by the same rule, the mean over repetitions); :func:`compare` joins predictions with
those means and :func:`summarize` gives the relative errors and the share of measured means
inside the prediction intervals.

Error = predicted / measured - 1 (undefined where the measured mean is 0).  A routine a profile
does not record at a measured point did not run there (the profile rule:
:func:`perfcast.experiment.absent_repetition_is_zero`): it is measured as 0, and a non-zero
prediction there is counted apart (``predicted_where_zero``), never left blank.  The intervals are for
one new measurement; a mean over r repetitions is less noisy, so coverage of means is, if anything,
higher than the nominal level where the model is right.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from ..experiment import Experiment, absent_repetition_is_zero


def _key(point: Mapping[str, float], params: Sequence[str]) -> tuple[float, ...]:
    return tuple(float(point[p]) for p in params)


class MeasuredMeans(dict):
    """``(callpath, metric, point) -> (mean, repetitions)`` of the measured experiment, plus
    ``zero``: ``(metric, point) -> repetitions`` where a callpath without a value did not run (a
    sparse profile's points that measured the metric: :func:`absent_repetition_is_zero`); empty for
    a dense table or listed repetitions, whose absent values are missing."""

    def __init__(self, items=(), zero: Mapping | None = None):
        super().__init__(items)
        self.zero = dict(zero or {})
        self.callpaths = {k[0] for k in self}

    def lookup(self, callpath: str, metric: str, point: tuple[float, ...]) -> tuple[float, int, bool] | None:
        """``(mean, repetitions, ran)`` of the series at ``point``: ``ran`` False for a callpath the
        profile does not record there (measured 0: it did not run); None where nothing says."""
        m = self.get((callpath, metric, point))
        if m is not None:
            return m[0], m[1], True
        n = self.zero.get((metric, point))
        return None if n is None else (0.0, n, False)

    def of_metric(self, metric: str) -> "MeasuredMeans":
        """The means of ``metric`` only (with its points' zero rule)."""
        return MeasuredMeans({k: v for k, v in self.items() if k[1] == metric},
                             {k: v for k, v in self.zero.items() if k[0] == metric})

    def points(self, metric: str) -> list[tuple[float, ...]]:
        """The points that measured ``metric``, sorted."""
        return sorted({k[2] for k in self if k[1] == metric} | {k[1] for k in self.zero if k[0] == metric})


def measured_means(exp: Experiment, parameters: Sequence[str], locations: str = "auto",
                   source: Sequence[str] | str | None = None) -> MeasuredMeans:
    """``(callpath, metric, point) -> (mean, repetitions)`` of ``exp``, whose parameters must be
    ``parameters`` (the fitted experiment's); ``source``: the input(s) ``exp`` was read from, named
    by the error when they differ.  In a sparse profile a callpath absent at a point that measured
    the metric is a 0 there (:class:`MeasuredMeans` ``zero``)."""
    from ..fit.series import series_statistics

    if set(exp.parameters) != set(parameters):
        raise parameter_mismatch(exp.parameters, parameters, source)
    # a callpath absent at a whole point: not filled with 0s here, the rule below marks it (``ran``)
    st = series_statistics(exp, locations, absent_points=False)
    pts = st[list(parameters)].to_numpy(float)
    out = MeasuredMeans({(str(c), str(m), tuple(p)): (float(v), int(n))
                         for c, m, p, v, n in zip(st["callpath"], st["metric"], map(tuple, pts), st["mean"],
                                                  st["count"])})
    if absent_repetition_is_zero(exp):
        # a point's repetitions that measured the metric: the most any callpath has there (a sparse
        # profile's absent repetitions are already 0s: every callpath present has them all)
        for (_, m, p), (_, n) in out.items():
            if n > out.zero.get((m, p), 0):
                out.zero[(m, p)] = n
    return out


def parameter_mismatch(measured: Sequence[str], fitted: Sequence[str], source: Sequence[str] | str | None
                       ) -> PerfcastError:
    """The one-line error of measurements whose parameters are not the models' (``source``: the
    measured input(s), named first): without parameters (a single run, whose values sit in its
    metadata or path), what to give so they are read."""
    names = [source] if isinstance(source, str) else [str(s) for s in source or ()]
    path = None if not names else names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} more)"
    want = ", ".join(fitted)
    if not measured:
        hint = (f"a single run holds no parameter values unless they are named: give --param "
                f"{' --param '.join(fitted)} (a key of the run's metadata, as Caliper/Adiak record them, or a value "
                f"its path name carries, as in mm.x2000y1z1.r1), or validate with a set of runs whose paths carry "
                f"the values")
        return PerfcastError(f"the measured experiment has no parameters; the models have {want}: {hint}", path,
                             "--validate")
    return PerfcastError(f"the measured experiment has parameters {', '.join(measured)}; the models have {want} "
                         f"(--param selects metadata keys as parameters)", path, "--validate")


def measured_points(exp: Experiment, parameters: Sequence[str]) -> list[dict[str, float]]:
    """The measured experiment's points, in the models' parameter order."""
    pts = exp.data[list(parameters)].drop_duplicates().sort_values(list(parameters)).to_numpy(float)
    return [dict(zip(parameters, map(float, p))) for p in pts]


def compare(rows: list[dict], measured: Mapping, parameters: Sequence[str], fitted: Experiment | None = None
            ) -> list[dict]:
    """Add ``measured``, ``repetitions``, ``error`` and ``inside`` to prediction rows (dicts with
    callpath, metric, at, value, lower, upper); rows without a measurement get None.  ``fitted``:
    the experiment the models were fitted on; a measured row at one of its points gets ``fitted_on``
    True (the model saw that point: its error there is no check of a prediction).  ``measured``: a
    :class:`MeasuredMeans` says which callpaths did not run at a point (measured 0, ``ran`` False) --
    callpaths the measured profile records elsewhere, or any where some predicted series was
    measured (the same names: a profile of other names is not a profile in which nothing ran)."""
    seen = set()
    if fitted is not None and len(fitted.data):
        seen = set(map(tuple, fitted.data[list(parameters)].drop_duplicates().to_numpy(float).tolist()))
    keys = [_key(r["at"], parameters) for r in rows]
    lookup = getattr(measured, "lookup", None)
    named = any((r["callpath"], r["metric"], k) in measured for r, k in zip(rows, keys))
    known = getattr(measured, "callpaths", set())
    out = []
    for r, key in zip(rows, keys):
        m = measured.get((r["callpath"], r["metric"], key))
        ran = True
        if m is None and lookup is not None and (named or r["callpath"] in known):
            got = lookup(r["callpath"], r["metric"], key)
            if got is not None:
                m, ran = got[:2], got[2]
        r = dict(r)
        if m is None:
            r.update(measured=None, repetitions=0, error=None, inside=None)
        else:
            v, n = m
            r.update(measured=v, repetitions=n,
                     error=None if v == 0 else r["value"] / v - 1,
                     inside=None if r.get("lower") is None else bool(r["lower"] <= v <= r["upper"]))
            if not ran:
                r["ran"] = False
            if fitted is not None:
                r["fitted_on"] = key in seen
        out.append(r)
    return out


def summarize(rows: Sequence[dict]) -> dict:
    """Relative errors and interval coverage over the compared rows that are a check of a prediction:
    those at points the models were not fitted on.  Rows at fitted points (``fitted_on``) are
    counted (``at_fitted_points``) and summarised apart (``at_fitted``: the fit's residuals) -- mixed
    in, 100 fitted points of Relearn gave a median error of 1.0% next to 25 held-out ones at 4-10%."""
    measured = [r for r in rows if r.get("measured") is not None]
    fitted = [r for r in measured if r.get("fitted_on")]
    held = [r for r in measured if not r.get("fitted_on")]
    out = {"compared": len(measured), **_errors(held), "at_fitted_points": len(fitted), "held_out": len(held)}
    if fitted:
        out["at_fitted"] = _errors(fitted)
    return out


def _errors(rows: Sequence[dict]) -> dict:
    # measured 0 (a routine that did not run), predicted non-zero: no relative error, still a miss
    zero = [r for r in rows if r.get("measured") == 0 and r.get("value")]
    err = np.array([abs(r["error"]) for r in rows if r.get("error") is not None and math.isfinite(r["error"])])
    inside = [r["inside"] for r in rows if r.get("inside") is not None]
    return {"with_error": int(len(err)),
            "median_abs_error": float(np.median(err)) if len(err) else None,
            "mean_abs_error": float(np.mean(err)) if len(err) else None,
            "max_abs_error": float(np.max(err)) if len(err) else None,
            "inside": int(sum(inside)), "with_interval": len(inside),
            "predicted_where_zero": len(zero),
            "max_predicted_where_zero": max((abs(r["value"]) for r in zero), default=None)}


def fitted_note(summary: Mapping) -> str | None:
    """What to say when measured rows lie at points the models were fitted on (:func:`compare`'s
    ``fitted``): those errors are the fit's, not a check of a prediction; None when none do."""
    k = summary.get("at_fitted_points") or 0
    if not k:
        return None
    return (f"{k} of the {summary['compared']} compared prediction(s) are at points the models were fitted on: "
            "their errors are the fit's residuals, not a check of a prediction, and are left out of the error "
            "and coverage figures (validate with runs not fitted on)")

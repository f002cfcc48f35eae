"""Predictions against measurements the models were not fitted on.

The way to trust an extrapolation is to check one: fit on the small runs, measure one larger run,
compare.  :func:`measured_means` reduces a second experiment exactly as the fitter reduces the
first (ranks by the same rule, the mean over repetitions); :func:`compare` joins predictions with
those means and :func:`summarize` gives the relative errors and the share of measured means
inside the prediction intervals.

Error = predicted / measured - 1 (undefined where the measured mean is 0).  The intervals are for
one new measurement; a mean over r repetitions is less noisy, so coverage of means is, if anything,
higher than the nominal level where the model is right.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from ..experiment import Experiment


def _key(point: Mapping[str, float], params: Sequence[str]) -> tuple[float, ...]:
    return tuple(float(point[p]) for p in params)


def measured_means(exp: Experiment, parameters: Sequence[str], locations: str = "auto",
                   source: Sequence[str] | str | None = None
                   ) -> dict[tuple[str, str, tuple[float, ...]], tuple[float, int]]:
    """``(callpath, metric, point) -> (mean, repetitions)`` of ``exp``, whose parameters must be
    ``parameters`` (the fitted experiment's); ``source``: the input(s) ``exp`` was read from, named
    by the error when they differ."""
    from ..fit.series import series_statistics

    if set(exp.parameters) != set(parameters):
        raise parameter_mismatch(exp.parameters, parameters, source)
    st = series_statistics(exp, locations)
    pts = st[list(parameters)].to_numpy(float)
    return {(str(c), str(m), tuple(p)): (float(v), int(n))
            for c, m, p, v, n in zip(st["callpath"], st["metric"], map(tuple, pts), st["mean"], st["count"])}


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
    True (the model saw that point: its error there is no check of a prediction)."""
    seen = set()
    if fitted is not None and len(fitted.data):
        seen = set(map(tuple, fitted.data[list(parameters)].drop_duplicates().to_numpy(float).tolist()))
    out = []
    for r in rows:
        key = _key(r["at"], parameters)
        m = measured.get((r["callpath"], r["metric"], key))
        r = dict(r)
        if m is None:
            r.update(measured=None, repetitions=0, error=None, inside=None)
        else:
            v, n = m
            r.update(measured=v, repetitions=n,
                     error=None if v == 0 else r["value"] / v - 1,
                     inside=None if r.get("lower") is None else bool(r["lower"] <= v <= r["upper"]))
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
    err = np.array([abs(r["error"]) for r in rows if r.get("error") is not None and math.isfinite(r["error"])])
    inside = [r["inside"] for r in rows if r.get("inside") is not None]
    return {"with_error": int(len(err)),
            "median_abs_error": float(np.median(err)) if len(err) else None,
            "mean_abs_error": float(np.mean(err)) if len(err) else None,
            "max_abs_error": float(np.max(err)) if len(err) else None,
            "inside": int(sum(inside)), "with_interval": len(inside)}


def fitted_note(summary: Mapping) -> str | None:
    """What to say when measured rows lie at points the models were fitted on (:func:`compare`'s
    ``fitted``): those errors are the fit's, not a check of a prediction; None when none do."""
    k = summary.get("at_fitted_points") or 0
    if not k:
        return None
    return (f"{k} of the {summary['compared']} compared prediction(s) are at points the models were fitted on: "
            "their errors are the fit's residuals, not a check of a prediction, and are left out of the error "
            "and coverage figures (validate with runs not fitted on)")

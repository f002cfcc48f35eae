"""Scaling models in the performance model normal form (PMNF), fitted in batch.

>>> from perfcast import fit
>>> models = fit.model_experiment(exp)                 # one per callpath x metric
>>> m = models[0].model
>>> m.formula(), m.predict({"p": 4096}), m.interval({"p": 4096}, 0.9), m.to_dict()

No file I/O happens in this package.
"""

from .core import FitOptions, GroupFit, fit_group
from .model import Model, Quality, Term
from .series import LOCATION_REDUCTIONS, SeriesModel, fit_experiment, model_experiment, series_statistics
from .terms import DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS, make_blocks, parse_fraction

__all__ = ["FitOptions", "GroupFit", "fit_group", "Model", "Quality", "Term", "SeriesModel",
           "fit_experiment", "model_experiment", "series_statistics", "LOCATION_REDUCTIONS",
           "DEFAULT_EXPONENTS", "DEFAULT_LOG_EXPONENTS", "make_blocks", "parse_fraction", "fit_series"]


def fit_series(x, values, parameters=("p",), options: FitOptions | None = None) -> Model:
    """Model one series given as points ``x`` (n or n x m) and ``values`` (n values, or n lists of
    repetitions); ``parameters``: the parameters' names (one name may be given as a string)."""
    import numpy as np

    if isinstance(parameters, str):
        parameters = (parameters,)

    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    from ..errors import PerfcastError
    from dataclasses import replace

    from .series import falling, out_of_range

    reps = [np.atleast_1d(np.asarray(v, dtype=float)) for v in values]
    if len(reps) != len(x):
        raise PerfcastError(f"{len(reps)} value lists for {len(x)} points")
    for pt, r in zip(x, reps):
        bad = out_of_range(r)
        if bad is not None:
            at = ", ".join(f"{p}={v:g}" for p, v in zip(parameters, pt))
            raise PerfcastError(f"value {r[bad[0]]:g} at {at} is {bad[1]}")
    mean = np.array([[r.mean() for r in reps]])
    count = np.array([[len(r) for r in reps]])
    ssd = np.array([[((r - r.mean()) ** 2).sum() for r in reps]])
    # a series that does not run at p = 1 is fitted from the next process count on, 0 below it
    # (perfcast.fit.core.not_running_first), and one that falls with a parameter (strong scaling)
    # searches negative exponents too and says so, as in an experiment's fit (series.falling)
    from .core import NOT_RUNNING_EXPONENT, not_running_first, zero_below

    opts = (options or FitOptions()).for_kind(None)
    start = None
    off = not_running_first(x, mean, tuple(parameters), count, ssd, opts)
    if off is not None:
        _, exact, q, x2 = off
        on = x[:, q] >= x2
        x, mean, count, ssd = x[on], mean[:, on], count[:, on], ssd[:, on]
        start = (tuple(parameters)[q], x2, 0.0 if exact[0] else x2 ** -float(NOT_RUNNING_EXPONENT))
    fall = falling(opts, x, mean, tuple(parameters))
    if fall is not None and fall[0][0]:
        gf = fit_group(x, mean, count, ssd, tuple(parameters), fall[1])
        gf = replace(gf, notes=gf.notes + fall[2])
    else:
        gf = fit_group(x, mean, count, ssd, tuple(parameters), options)
    if start is not None:
        gf = zero_below(gf, *start)
    if x.shape[1] >= 2:
        from .series import _with_lines      # measured lines with their own level, as for experiments

        gf = _with_lines(gf, x, mean)
    return gf.model(0)

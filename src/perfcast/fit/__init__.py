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


def fit_series(x, values, parameters=("p",), options: FitOptions | None = None, summed: bool = False) -> Model:
    """Model one series given as points ``x`` (n or n x m) and ``values`` (n values, or n lists of
    repetitions); ``parameters``: the parameters' names (one name may be given as a string);
    ``summed``: the values are sums over ranks (a routine that does not run at p = 1, measured at
    one process count beyond it, is then the line through its 0 there, not flat:
    :func:`perfcast.fit.core.zero_rule_sets`)."""
    import numpy as np

    if isinstance(parameters, str):
        parameters = (parameters,)

    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    from ..errors import PerfcastError
    from .series import out_of_range

    reps = [np.atleast_1d(np.asarray(v, dtype=float)) for v in values]
    if len(reps) != len(x):
        raise PerfcastError(f"{len(reps)} value lists for {len(x)} points")
    for pt, r in zip(x, reps):
        bad = out_of_range(r)
        if bad is not None:
            at = ", ".join(f"{p}={v:g}" for p, v in zip(parameters, pt))
            raise PerfcastError(f"value {r[bad[0]]:g} at {at} is {bad[1]}")
    mean = np.array([r.mean() for r in reps])
    count = np.array([len(r) for r in reps])
    ssd = np.array([((r - r.mean()) ** 2).sum() for r in reps])
    # as in an experiment's fit (one path, series.fit_one): a series that does not run at p = 1 is
    # fitted from the next process count on, 0 below it (``summed``: a sum over ranks, with one
    # process count beyond p = 1 the line through that 0), one that runs at p = 1 only is 0 beyond
    # it (perfcast.fit.core.zero_rule_sets), and one that falls with a parameter (strong scaling)
    # searches negative exponents too and says so (series.falling)
    from .series import fit_one

    return fit_one(x, mean, count, ssd, tuple(parameters), options, summed=summed).model(0)

"""Exact measurements (Metric.exact, FitOptions.exact; fit.core.exact_series / exact_scale): series
of a metric marked exact (cachegrind counts) weigh their means by the model error only -- growing series alike (the
ordinary least-squares coefficients on the means), falling ones relative to their value.  Checked
against least squares computed independently with numpy.linalg.lstsq on the generating values."""
import numpy as np
import pandas as pd
import pytest

from perfcast import store
from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.fit import FitOptions, fit_group, model_experiment
from perfcast.fit.core import exact_series

X = np.array([4.0, 8.0, 16.0, 32.0, 64.0])


def _fit(y, options, count=None, ssd=None):
    y = np.atleast_2d(y)
    count = np.ones_like(y) if count is None else count
    ssd = np.zeros_like(y) if ssd is None else ssd
    return fit_group(X[:, None], y, count, ssd, ["x"], options).model(0)


def _lstsq(model, y, scale):
    """(constant, coefficients) of the model's own terms by least squares on y / scale."""
    A = np.column_stack([np.ones_like(X)] + [t.evaluate({"x": X}) for t in model.terms])
    coef, *_ = np.linalg.lstsq(A / scale[:, None], y / scale, rcond=None)
    return coef


def _coef(model):
    return np.array([model.constant] + [t.coefficient for t in model.terms])


def test_growing_exact_series_is_ordinary_least_squares_on_the_means():
    """3 + 0.2 x^2 + 5 x log2 x: no one-term model is right; marked exact, the coefficients of the
    selected term are the unweighted least-squares ones (not those of today's noise weights)."""
    y = 3 + 0.2 * X ** 2 + 5 * X * np.log2(X)
    m = _fit(y, FitOptions(exact=True))
    assert len(m.terms) == 1
    np.testing.assert_allclose(_coef(m), _lstsq(m, y, np.ones_like(y)), rtol=1e-9)
    noisy = _fit(y, FitOptions())
    if noisy.terms == m.terms:      # the same form under today's weights: other coefficients
        assert not np.allclose(_coef(noisy), _coef(m), rtol=1e-6)


def test_falling_exact_series_keeps_relative_weights():
    """2e5 / x + 40 + 30 log2 x: the smallest values lie at the largest x (the extrapolation side),
    so each mean keeps its own value as its scale: weighted least squares with weights 1 / y^2."""
    y = 2e5 / X + 40 + 30 * np.log2(X)
    m = _fit(y, FitOptions(exact=True, negative=True))
    np.testing.assert_allclose(_coef(m), _lstsq(m, y, y), rtol=1e-9)


def test_scale_is_never_below_the_value_at_the_largest_x():
    """A series that dips in the middle: scales max(y_i, y at x = 64) by hand."""
    y = np.array([900.0, 500.0, 300.0, 450.0, 700.0])
    m = _fit(y, FitOptions(exact=True))
    np.testing.assert_allclose(_coef(m), _lstsq(m, y, np.maximum(y, y[-1])), rtol=1e-9)


def test_varying_repetitions_overrule_the_mark_and_identical_ones_alone_do_not_make_a_series_exact():
    y = 3 + 0.2 * X ** 2 + 5 * X * np.log2(X)
    three = np.full_like(y, 3.0)
    # unmarked, three identical repetitions at every point: today's noise weights, not OLS
    m = _fit(y, FitOptions(), count=three)
    assert not np.allclose(_coef(m), _lstsq(m, y, np.ones_like(y)), rtol=1e-6)
    mean = np.vstack([y, y, y, y])
    count = np.vstack([three, three, np.ones_like(y), np.where(X == 8, 0.0, 3.0)])
    ssd = np.zeros_like(mean)
    ssd[1, 2] = 3 * (0.01 * y[2]) ** 2          # one point's repetitions differ by 1%
    assert exact_series(mean, count, ssd, False).tolist() == [False] * 4
    assert exact_series(mean, count, ssd, True).tolist() == [True, False, True, True]
    # repetitions that agree up to float rounding of their mean still agree
    v = np.array([0.1, 0.2, 0.3]) * 0 + 0.7
    assert exact_series(np.array([[v.mean()]]), np.array([[3.0]]), np.array([[1e-40]]), True)[0]


def test_relative_noise_model_ignores_exactness():
    y = 3 + 0.2 * X ** 2 + 5 * X * np.log2(X)
    a, b = _fit(y, FitOptions(noise="relative", exact=True)), _fit(y, FitOptions(noise="relative"))
    assert a.terms == b.terms and np.array_equal(_coef(a), _coef(b))


def _experiment(exact):
    y = 3 + 0.2 * X ** 2 + 5 * X * np.log2(X)
    df = pd.DataFrame({"x": X, "rep": 0, "callpath": "app->k", "metric": "Ir", "value": y})
    return Experiment(["x"], df, [Metric("Ir", "#", "count", "exclusive", exact=exact)],
                      CallTree([("app", None, "app"), ("app->k", "app", "k")])), y


def test_marked_metric_round_trips_through_the_store_and_reaches_the_fit(tmp_path):
    exp, y = _experiment(True)
    back = store.read(store.write(exp, tmp_path / "e.perfcast"))
    assert back.metrics["Ir"].exact and back.metrics["Ir"] == exp.metrics["Ir"]
    sm = model_experiment(back)[0].model
    np.testing.assert_allclose(_coef(sm), _lstsq(sm, y, np.ones_like(y)), rtol=1e-9)
    # unmarked metrics are written as before (no "exact" key) and read back unmarked
    plain, _ = _experiment(False)
    assert "exact" not in plain.metrics["Ir"].to_dict()
    assert not store.read(store.write(plain, tmp_path / "p.perfcast")).metrics["Ir"].exact


@pytest.mark.parametrize("name,exact", [("calls", False), ("bytes", False), ("time", False)])
def test_pmpi_reader_leaves_its_metrics_unmarked(name, exact):
    """PMPI counts are exact too, but its neighbour-exchange counts are step functions of the process
    grid that extrapolate worse under exact weights (bench/README.md "Exact measurements")."""
    from perfcast.io.pmpi import METRICS
    assert {m.name: m.exact for m in METRICS}[name] is exact

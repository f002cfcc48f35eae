"""The modeler on series generated from known formulas (ground truth = the generating formula)."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment, Metric
from perfcast.fit import FitOptions, Model, fit_group, fit_series, model_experiment

from conftest import cli, cli_items

P = np.array([4, 8, 16, 32, 64], dtype=float)


def noisy(f, x, noise, reps, rng):
    return [f(v) * (1 + rng.uniform(-noise, noise, reps)) for v in x]


@pytest.mark.parametrize("f, lead", [
    (lambda p: 10 + 2 * p * math.log2(p), (Fraction(1), 1)),
    (lambda p: 3 + 0.5 * p ** 1.5, (Fraction(3, 2), 0)),
    (lambda p: 100 + 4 * math.log2(p) ** 2, (Fraction(0), 2)),
    (lambda p: 1 + 0.01 * p ** 3, (Fraction(3), 0)),
    (lambda p: 7 + 3 * p ** (1 / 3), (Fraction(1, 3), 0)),
])
def test_exact_recovery_without_noise(f, lead):
    m = fit_series(P, [[f(p)] * 3 for p in P])
    assert m.status == "ok"
    assert m.lead_order()["p"] == lead
    for x in (128.0, 512.0):
        assert m.predict(x) == pytest.approx(f(x), rel=1e-6)


def test_coefficients_without_noise():
    m = fit_series(P, [[10 + 2 * p * math.log2(p)] for p in P])
    assert m.constant == pytest.approx(10, rel=1e-8)
    (t,) = m.terms
    assert t.coefficient == pytest.approx(2, rel=1e-8)
    assert t.factors == (("p", Fraction(1), 1),)


def test_lead_term_at_one_percent_noise():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(20):
        m = fit_series(P, noisy(lambda p: 5 + 0.2 * p ** 2, P, 0.01, 5, rng))
        hits += m.lead_order()["p"] == (Fraction(2), 0)
    assert hits >= 18


def test_batched_equals_one_by_one():
    rng = np.random.default_rng(2)
    fs = [lambda p: 3 + p, lambda p: 1 + 0.1 * p ** 2, lambda p: 50 + np.log2(p), lambda p: 8 + 0 * p]
    reps = [np.array(noisy(f, P, 0.05, 4, rng)) for f in fs]
    mean = np.array([r.mean(axis=1) for r in reps])
    count = np.full(mean.shape, 4.0)
    ssd = np.array([((r - r.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) for r in reps])
    g = fit_group(P[:, None], mean, count, ssd, ["p"])
    for s, r in enumerate(reps):
        one = fit_series(P, list(r))
        both = g.model(s)
        assert both.formula() == one.formula()
        assert both.predict(256) == pytest.approx(one.predict(256), rel=1e-9)


def test_closed_form_loo_matches_refitting():
    """quality.cv (closed form, hat matrix) equals leaving each point out and refitting the same
    hypothesis with the same relative weights."""
    rng = np.random.default_rng(3)
    reps = np.array(noisy(lambda p: 2 + 0.3 * p, P, 0.05, 5, rng))
    m = fit_series(P, list(reps), options=FitOptions(nonnegative=False))
    (t,) = m.terms
    i, j = t.factors[0][1], t.factors[0][2]
    ybar = reps.mean(axis=1)
    w = 5 / ybar ** 2
    basis = P ** float(i) * np.log2(P) ** j
    errs = []
    for k in range(len(P)):
        keep = np.arange(len(P)) != k
        A = np.column_stack([np.ones(keep.sum()), basis[keep]]) * np.sqrt(w[keep])[:, None]
        beta = np.linalg.lstsq(A, ybar[keep] * np.sqrt(w[keep]), rcond=None)[0]
        pred = beta[0] + beta[1] * basis[k]
        errs.append((ybar[k] - pred) / ybar[k])
    assert m.quality.cv == pytest.approx(100 * np.sqrt(np.mean(np.square(errs))), rel=1e-6)


def test_quality_numbers_by_hand():
    rng = np.random.default_rng(4)
    reps = np.array(noisy(lambda p: 20 + 3 * p, P, 0.03, 4, rng))
    m = fit_series(P, list(reps))
    ybar = reps.mean(axis=1)
    pred = m.predict(P)
    assert m.quality.rss == pytest.approx(np.sum((ybar - pred) ** 2), rel=1e-9)
    smape = 100 * np.mean(2 * np.abs(pred - ybar) / (np.abs(pred) + np.abs(ybar)))
    assert m.quality.smape == pytest.approx(smape, rel=1e-9)
    noise = 100 * np.sqrt(np.sum(((reps - ybar[:, None]) / ybar[:, None]) ** 2) / (reps.size - len(P)))
    assert m.quality.noise == pytest.approx(noise, rel=1e-9)
    assert m.quality.n_points == 5 and m.quality.n_obs == 20


def test_interval_coverage_at_measured_scale():
    """90% intervals for a new observation at a measured point cover about 90% of them."""
    rng = np.random.default_rng(5)
    inside = total = 0
    for _ in range(150):
        f = lambda p: 30 + 0.5 * p ** 1.5  # noqa: E731
        m = fit_series(P, noisy(f, P, 0.05, 5, rng))
        lo, hi = m.interval(32.0, 0.9)
        new = f(32.0) * (1 + rng.uniform(-0.05, 0.05, 10))
        inside += int(np.sum((new >= lo) & (new <= hi)))
        total += 10
    assert 0.82 <= inside / total <= 0.98


def test_interval_contains_prediction_and_grows_with_noise():
    rng = np.random.default_rng(6)
    f = lambda p: 5 + p  # noqa: E731
    quiet = fit_series(P, noisy(f, P, 0.01, 5, rng))
    loud = fit_series(P, noisy(f, P, 0.2, 5, rng))
    for m in (quiet, loud):
        lo, hi = m.interval(256.0)
        assert lo < m.predict(256.0) < hi
    assert np.subtract(*loud.interval(64.0)[::-1]) > np.subtract(*quiet.interval(64.0)[::-1])
    lo95, hi95 = quiet.interval(64.0, 0.95)
    lo90, hi90 = quiet.interval(64.0, 0.9)
    assert lo95 < lo90 and hi95 > hi90
    with pytest.raises(PerfcastError):
        quiet.interval(64.0, 1.5)


def test_degenerate_series():
    one = fit_series([8], [[3.0, 3.2]])
    assert one.status == "insufficient" and one.needed == 2 and one.constant == pytest.approx(3.1)
    assert math.isnan(one.interval(8.0)[0])
    const = fit_series(P, [[4.0, 4.0]] * 5)
    assert const.status == "ok" and const.terms == () and const.constant == pytest.approx(4.0)
    zero = fit_series(P, [[0.0, 0.0]] * 5)
    assert zero.status == "ok" and zero.formula() == "0" and zero.predict(1e6) == 0.0
    mixed = fit_series(P, [[0.0], [0.0], [1.0], [0.0], [2.0]])
    assert np.isfinite(mixed.predict(128.0))
    negative = fit_series(P, [[-1.0], [-2.0], [-3.0], [-4.0], [-5.0]], options=FitOptions(nonnegative=False))
    assert np.isfinite(negative.predict(128.0))
    # p <= 0 makes log terms undefined: those hypotheses are skipped, not crashed on
    m = fit_series([0, 1, 2, 3, 4], [[1.0], [2.0], [3.0], [4.0], [5.0]])
    assert m.predict(5.0) == pytest.approx(6.0, rel=1e-6)


def test_two_terms_option():
    f = lambda p: 5 + 0.01 * p ** 2 + 40 * math.log2(p)  # noqa: E731
    x = np.array([2, 4, 8, 16, 32, 64, 128], dtype=float)
    m = fit_series(x, [[f(p)] * 2 for p in x], options=FitOptions(max_terms=2))
    assert len(m.terms) == 2
    assert {t.factors[0][1:] for t in m.terms} == {(Fraction(2), 0), (Fraction(0), 1)}
    assert m.predict(1024.0) == pytest.approx(f(1024.0), rel=1e-6)


def test_negative_exponents_for_strong_scaling():
    f = lambda p: 2 + 1000 / p  # noqa: E731
    m = fit_series(P, [[f(p)] * 3 for p in P], options=FitOptions(negative=True))
    assert m.lead_order()["p"] == (Fraction(0), 0)
    assert any(t.factors[0][1] == -1 for t in m.terms)
    assert m.predict(1024.0) == pytest.approx(f(1024.0), rel=1e-6)


def test_formula_styles_and_json_roundtrip():
    rng = np.random.default_rng(7)
    m = fit_series(P, noisy(lambda p: 3 + 0.5 * p * math.log2(p), P, 0.02, 5, rng))
    code = m.formula("python", digits=17)
    assert eval(code, {"log2": math.log2, "p": 100.0}) == pytest.approx(m.predict(100.0), rel=1e-12)
    assert "\\log_2" in m.formula("latex")
    d = m.to_dict()
    assert d["lead"] == {"p": {"exponent": "1", "log_exponent": 1}}
    assert d["terms"][0]["factors"] == {"p": {"exponent": "1", "log_exponent": 1}}
    back = Model.from_dict(d)
    assert back.formula() == m.formula()
    assert back.interval(512.0) == pytest.approx(m.interval(512.0), rel=1e-12)
    assert back.predict(512.0, averaged=True) == pytest.approx(m.predict(512.0, averaged=True), rel=1e-12)
    with pytest.raises(PerfcastError):
        Model.from_dict({"parameters": ["p"], "terms": [{"coefficient": 1, "factors": {"q": {"exponent": "1"}}}],
                         "constant": 0})
    with pytest.raises(PerfcastError):
        m.formula("fortran")


def test_formula_numbers_at_the_exponent_boundaries():
    """Formula texts write "%.<digits>g" numbers with the exponent unpadded and unsigned when
    positive (4.271e-7, 1e4), a zero constant as "0": around the places where "g" switches to an exponent
    (1e-4 and 10^digits, with the values that round across them) and beyond."""
    import re

    from perfcast.fit.model import Term

    base = [0.0, -0.0, 1e-4, 9.99949e-5, 9.99951e-5, 1.5e-7, 3.0, 123.456, 1e300, -2.5e-300, float("inf")]
    for digits in (1, 2, 4, 6, 17):
        edge = [10.0 ** digits, 10.0 ** digits - 0.5, 10.0 ** digits - 0.51, 0.9 * 10.0 ** digits, 10.0 ** (digits + 1)]
        for v in base + edge + [-x for x in edge]:
            ref = "0" if v == 0 else re.sub(r"e([-+])0*(\d)", lambda g: "e" + g[1].replace("+", "") + g[2],
                                            f"{abs(v):.{digits}g}")
            m = Model(("p",), 1.0, (Term(v, (("p", Fraction(1), 0),)),))
            sign = " - " if v < 0 else " + "
            # a zero term adds nothing and is not printed (test_zero_terms_are_not_printed...)
            assert m.formula(digits=digits) == ("1" if v == 0 else "1" + sign + ref + " * p"), (v, digits)


def test_multi_parameter_product_and_sum():
    ps, ns = [4, 8, 16, 32, 64], [10, 20, 40, 80, 160]
    X = np.array([(p, n) for p in ps for n in ns], dtype=float)
    prod = 3 + 0.5 * X[:, 0] * np.sqrt(X[:, 1])
    summ = 1 + 2 * X[:, 0] ** 2 + 5 * np.log2(X[:, 1])
    mean = np.array([prod, summ])
    g = fit_group(X, mean, np.full(mean.shape, 2.0), np.zeros(mean.shape), ["p", "n"])
    mp, ms = g.model(0), g.model(1)
    assert mp.lead_order() == {"p": (Fraction(1), 0), "n": (Fraction(1, 2), 0)}
    assert len(mp.terms) == 1
    assert ms.lead_order() == {"p": (Fraction(2), 0), "n": (Fraction(0), 1)}
    assert len(ms.terms) == 2
    assert mp.predict({"p": 1024, "n": 1000}) == pytest.approx(3 + 0.5 * 1024 * math.sqrt(1000), rel=1e-6)


def test_multi_parameter_sparse_points():
    """A cross of two lines plus two off-line points (not a grid) is enough."""
    pts = [(p, 10) for p in (4, 8, 16, 32, 64)] + [(4, n) for n in (20, 40, 80, 160)] + [(16, 40), (64, 160)]
    X = np.array(pts, dtype=float)
    y = 2 + 0.1 * X[:, 0] * X[:, 1]
    g = fit_group(X, y[None], np.ones((1, len(X))), np.zeros((1, len(X))), ["p", "n"])
    m = g.model(0)
    assert m.lead_order() == {"p": (Fraction(1), 0), "n": (Fraction(1), 0)}
    assert m.predict({"p": 256, "n": 640}) == pytest.approx(2 + 0.1 * 256 * 640, rel=1e-6)


def test_model_experiment_groups_point_sets_and_locations():
    rows = []
    for p in (4, 8, 16, 32):
        for rep in range(2):
            for rank in range(int(p)):
                rows.append({"p": p, "rep": rep, "callpath": "main", "metric": "time", "value": 1.0 + p,
                             "rank": rank})
                rows.append({"p": p, "rep": rep, "callpath": "main", "metric": "visits", "value": 3.0,
                             "rank": rank})
            if p > 4:  # measured on fewer points
                rows.append({"p": p, "rep": rep, "callpath": "main->solve", "metric": "time",
                             "value": 2.0 * p * p, "rank": 0})
    exp = Experiment(["p"], pd.DataFrame(rows),
                     [Metric("time", "s", "time"), Metric("visits", "", "count")])
    res = {(r.callpath, r.metric): r.model for r in model_experiment(exp)}
    # time: mean over ranks -> 1 + p; visits: sum over ranks -> 3 p
    assert res[("main", "time")].predict(100.0) == pytest.approx(101.0, rel=1e-6)
    assert res[("main", "visits")].predict(100.0) == pytest.approx(300.0, rel=1e-6)
    # main->solve: 2 p^2 on rank 0 alone; the other ranks of this (sparse) profile did not run it,
    # so per rank it is 2 p^2 / p = 2 p (experiment.reduce_over_locations, as the views count it)
    assert res[("main->solve", "time")].predict(100.0) == pytest.approx(200.0, rel=1e-6)
    assert res[("main->solve", "time")].quality.n_points == 3
    maxed = model_experiment(exp, metric="time", callpath="main", locations="max")
    assert [(r.callpath, r.metric) for r in maxed] == [("main", "time")]
    with pytest.raises(PerfcastError):
        model_experiment(exp, locations="avg")
    d = maxed[0].to_dict()
    assert d["callpath"] == "main" and d["metric"] == "time" and "formula" in d and "lead" in d


def test_closed_form_block_scores_match_refitting():
    """The vectorised one-block scorer (all blocks at once) equals weighted least squares solved
    block by block with lstsq, and its PRESS equals refitting without each point."""
    from perfcast.fit.core import _one_block_err

    rng = np.random.default_rng(3)
    n, H, S = 6, 5, 4
    T = rng.uniform(0.05, 1.0, (n, H))
    T[:, 2] = 0.5  # a constant column: not identifiable next to the intercept
    valid = np.ones(H, dtype=bool)
    valid[4] = False
    y = rng.uniform(0.5, 1.5, (S, n))
    w = rng.uniform(0.5, 3.0, (S, n))
    rss = _one_block_err(T, valid, y, w, cv=False)
    press = _one_block_err(T, valid, y, w, cv=True)
    assert np.all(np.isinf(rss[:, [2, 4]])) and np.all(np.isinf(press[:, [2, 4]]))
    for s in range(S):
        for h in (0, 1, 3):
            D = np.column_stack([np.ones(n), T[:, h]])
            sw = np.sqrt(w[s])
            beta = np.linalg.lstsq(D * sw[:, None], y[s] * sw, rcond=None)[0]
            assert rss[s, h] == pytest.approx(np.sum(w[s] * (y[s] - D @ beta) ** 2), rel=1e-9)
            loo = 0.0
            for i in range(n):
                keep = np.arange(n) != i
                b = np.linalg.lstsq(D[keep] * sw[keep, None], y[s, keep] * sw[keep], rcond=None)[0]
                loo += w[s, i] * (y[s, i] - D[i] @ b) ** 2
            assert press[s, h] == pytest.approx(loo, rel=1e-9)


def test_per_series_design_fit_matches_lstsq():
    """Weighted least squares with a different design per series (multi-parameter combinations,
    computed column by column) equals lstsq per series; leverages equal the hat-matrix diagonal."""
    from perfcast.fit.core import _wls

    rng = np.random.default_rng(4)
    S, n, k = 5, 9, 3
    D = rng.uniform(0.1, 1.0, (S, n, k))
    y = rng.uniform(0.5, 1.5, (S, n))
    w = rng.uniform(0.5, 3.0, (S, n))
    fit = _wls(D, y, w)
    for s in range(S):
        sw = np.sqrt(w[s])
        Xw = D[s] * sw[:, None]
        beta = np.linalg.lstsq(Xw, y[s] * sw, rcond=None)[0]
        np.testing.assert_allclose(fit.beta[s], beta, rtol=1e-9)
        assert fit.rss[s] == pytest.approx(np.sum(w[s] * (y[s] - D[s] @ beta) ** 2), rel=1e-9)
        hat = np.diag(Xw @ np.linalg.inv(Xw.T @ Xw) @ Xw.T)
        np.testing.assert_allclose(fit.hat[s], hat, rtol=1e-9)


def test_normal_equations_alone_match_lstsq_and_the_full_fit():
    """The normal equations solved without residuals (the leave-largest-out rerun's refits):
    coefficients as lstsq gives them, the inverse normal matrix as numpy inverts X'WX, and the
    same floats as :func:`_wls` (with the constant's sums given once per series)."""
    from perfcast.fit.core import _const_sums, _normal, _wls

    rng = np.random.default_rng(5)
    S, n, k = 6, 7, 3
    D = rng.uniform(0.1, 1.0, (S, n, k))
    D[:, :, 0] = 1.0
    y = rng.uniform(0.5, 1.5, (S, n))
    w = rng.uniform(0.5, 3.0, (S, n))
    w[:, -1] = 0.0                       # a held-out point
    _, _, beta, ainv, ok = _normal(D, y, w, _const_sums(y, w))
    assert ok.all()
    for s in range(S):
        sw = np.sqrt(w[s])
        Xw = D[s] * sw[:, None]
        np.testing.assert_allclose(beta[s], np.linalg.lstsq(Xw, y[s] * sw, rcond=None)[0], rtol=1e-9)
        np.testing.assert_allclose(ainv[s], np.linalg.inv(Xw.T @ Xw), rtol=1e-9)
    fit = _wls(D, y, w, leverage=False)
    assert np.array_equal(fit.beta, beta) and np.array_equal(fit.ainv, ainv)


@pytest.mark.parametrize("pattern", ["all", "held", "mixed", "many"])
def test_below_zero_at_measured_points_as_point_by_point(pattern):
    """Which lines ``b0 + b1 t`` of a column table go below zero at a series' measured points
    (weight > 0): by each set of measured points' column extremes, as evaluating every measured
    point gives it -- also for infinite slopes (inf * 0 is no point below zero)."""
    from perfcast.fit.core import NEGATIVE_TOL, _below_zero_at_points

    rng = np.random.default_rng({"all": 6, "held": 7, "mixed": 8, "many": 9}[pattern])
    n, H, S = 6, 9, 300
    T = rng.uniform(-1.0, 1.0, (n, H))
    T[:, 3] = np.abs(T[:, 3])
    T[2, 3] = 0.0                        # a column whose smallest value is 0: inf * 0 at an extreme
    b0 = rng.normal(0.0, 1.0, (S, H))
    b1 = rng.normal(0.0, 1.0, (S, H))
    b1[::17, 3] = np.inf
    b1[::19, 3] = -np.inf
    b0[::23, 5] = np.inf
    w = rng.uniform(0.5, 2.0, (S, n))
    if pattern == "held":
        w[:, -1] = 0.0
    elif pattern == "mixed":             # a few sets of measured points, taken set by set
        masks = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0], [0, 1, 1, 1, 1, 1]], dtype=bool)
        w[~masks[np.arange(S) % 3]] = 0.0
        w[0] = 0.0                       # nothing measured: never below zero
    else:                                # a set per few rows: point by point
        w[rng.uniform(size=(S, n)) < 0.3] = 0.0
    got = _below_zero_at_points(b0, b1, T, w)
    with np.errstate(invalid="ignore"):
        at = b0[:, None, :] + b1[:, None, :] * T[None, :, :]
        want = np.any((at < -NEGATIVE_TOL) & (w > 0)[:, :, None], axis=1)
    # series measured at every point: the columns' extremes, a NaN product there included (the
    # rule as it stands; a fit that passed its checks has finite coefficients)
    full = np.all(w > 0, axis=1)
    lo, hi = T.min(axis=0), T.max(axis=0)
    with np.errstate(invalid="ignore"):
        want[full] = (b0 + np.minimum(b1 * lo, b1 * hi) < -NEGATIVE_TOL)[full]
    assert want.any() and not want.all()
    assert np.array_equal(got, want)


def test_insufficient_and_non_finite_quality_round_trip_through_json():
    import json as _json
    import math as _math

    from perfcast.fit import fit_series

    m = fit_series([2, 4], [[1.0, 1.1], [2.0, 2.1]])           # two points: too few for a term
    d = _json.loads(_json.dumps(m.to_dict()))                  # NaN quality fields become null
    back = Model.from_dict(d)
    assert back.status == m.status and back.needed == m.needed
    for k in ("rss", "adj_r2", "smape"):
        a, b = getattr(m.quality, k), getattr(back.quality, k)
        assert (a == b) or (_math.isnan(a) and _math.isnan(b))


def test_solver_roundoff_constant_is_not_printed(data_dir, capsys):
    """A constant that is least-squares round-off next to the terms over the measured range
    (-4.996e-16 next to 0.001 * p up to p = 64) is not printed; a small real one is."""
    from perfcast.fit.model import Term
    from perfcast.report.html import formula_mathml

    term = (Term(0.001, (("p", Fraction(1), 0),)),)
    m = Model(("p",), -4.996e-16, term, upper=(64.0,))
    assert m.formula() == "0.001 * p" and "<mn>" in str(formula_mathml(m))
    assert "e-16" not in str(formula_mathml(m)) and "10</mn><mn>-16" not in str(formula_mathml(m))
    assert Model(("p",), -4.996e-16, term).formula().startswith("-4.996e-16")  # range unknown: printed
    assert Model(("p",), 1e-6, term, upper=(64.0,)).formula() == "1e-6 + 0.001 * p"
    # the same on real data: Extra-P's one_parameter_segmented_5 has such a segment
    import json

    from perfcast.cli import main
    assert main(["model", str(data_dir / "extrap" / "text" / "one_parameter_segmented_5.txt"), "--json"]) == 0
    formulas = [r["formula"] for r in cli_items(capsys.readouterr().out, "models")]
    assert "0.001 * p" in formulas and not any("e-16" in f for f in formulas)


def test_two_points_give_a_law_through_them_never_their_mean():
    # 1 -> 3 between p = 8 and 16: exponent log2(3) = 1.585 (nearest twelfth 19/12 = 1.5833)
    two = fit_series([8, 16], [[1.0], [3.0, 3.0]])
    assert two.status == "ok" and len(two.terms) == 1 and two.constant == 0.0
    (p, e, j), = two.terms[0].factors
    assert (p, e, j) == ("p", Fraction(19, 12), 0)
    # the law reproduces both means to the rounding of the exponent, and extrapolates as one
    assert two.predict(8.0) == pytest.approx(1.0, rel=2e-3) and two.predict(16.0) == pytest.approx(3.0, rel=2e-3)
    assert two.predict(64.0) == pytest.approx(27.0, rel=0.01)        # 3 x 3 x 3 by hand
    # a simple exponent is printed as such: 10 -> 40 over a factor 8 is p^(2/3)
    pw = fit_series([8, 64], [[10.0, 10.5, 9.5], [40.0, 41.0, 39.0]])
    assert pw.formula() == "2.5 * p^(2/3)" and pw.predict(512.0) == pytest.approx(160.0, rel=1e-9)
    # the interval is wide beyond the data and grows with the distance (an exponent doubt of 0.25)
    # by hand at p = 128 (one doubling): centre 2.5 * 128^(2/3); relative noise^2 = (0.5/100 + 2/1600) / 4;
    # drift 0.25 ln 2 per doubling with 2 dof; Welch-Satterthwaite dof; Student t 90 %
    from scipy import stats
    c = 2.5 * 128 ** (2 / 3)
    v, vd = (0.00625 / 4) * c ** 2, (0.25 * math.log(2) * c) ** 2
    dof = (v + vd) ** 2 / (v ** 2 / 4 + vd ** 2 / 2)
    half = stats.t.ppf(0.95, dof) * math.sqrt(v + vd)
    assert pw.interval(128.0) == pytest.approx((c - half, c + half), rel=1e-9)
    lo1, hi1 = pw.interval(128.0)
    lo3, hi3 = pw.interval(512.0)
    assert (hi3 - lo3) / 160 > (hi1 - lo1) / c     # wider, relatively, further out
    from perfcast.analysis.fitcheck import fit_warnings
    assert any(w.startswith("2 points only") for w in fit_warnings(pw))
    # the law is in p: no note may say p was treated as having no effect
    assert not any("no effect" in n for n in pw.notes)
    # a falling count reaches 0: the straight line through the two points (no log of 0)
    line = fit_series([8, 64], [[10.0], [0.0]])
    assert line.predict(8.0) == pytest.approx(10.0) and line.predict(36.0) == pytest.approx(5.0)
    # flat: the constant is a law too (exponent 0)
    flat = fit_series([8, 64], [[5.0], [5.0]])
    assert flat.terms == () and flat.constant == pytest.approx(5.0) and flat.status == "ok"


def _one_series(values_at, kind, ps=(1, 2, 4, 8, 16)):
    import pandas as pd
    from perfcast import Experiment, Metric
    from perfcast.fit import model_experiment

    rows = [{"p": p, "rep": r, "callpath": "k", "metric": "m", "value": values_at(p) * (1 + d)}
            for p in ps for r, d in enumerate((0.0, 0.002, -0.002))]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("m", "", kind, "exclusive")])
    return model_experiment(exp)[0].model


def test_times_and_counts_never_fall_below_zero_as_the_parameters_grow():
    # 100 - 10 log2(p) fits these five points exactly, and is negative from p = 1024 on
    falling = lambda p: 100 - 10 * math.log2(p)  # noqa: E731
    other = _one_series(falling, "other")          # a quantity that may be negative: the exact law
    assert other.predict(1024.0) == pytest.approx(0.0, abs=0.5) and other.predict(4096.0) < 0
    for kind in ("time", "count", "bytes"):
        m = _one_series(falling, kind)
        lead = [t for t in m.terms if any(i > 0 or (i == 0 and j > 0) for _, i, j in t.factors)]
        assert all(t.coefficient >= 0 for t in lead), m.formula()
        assert min(m.predict(np.array([2.0 ** k for k in range(5, 40)]))) >= 0, m.formula()
    # a negative constant under a growing term is a law that stays positive: kept
    grow = lambda p: -50 + 60 * math.log2(p)  # noqa: E731
    m = _one_series(grow, "time", ps=(2, 4, 8, 16, 32, 64))
    assert m.constant < 0 and m.predict(1024.0) == pytest.approx(grow(1024.0), rel=0.01)


def test_strong_scaling_series_get_negative_exponents_and_say_so():
    # per-rank work of a strong-scaling code: 1e9 / p + 1e6 (exact ground truth), p = 1..8
    m = _one_series(lambda p: 1e9 / p + 1e6, "count", ps=(1, 2, 4, 8))
    assert m.predict(64.0) == pytest.approx(1e9 / 64 + 1e6, rel=0.01)
    assert any("negative exponents" in n for n in m.notes)
    # a growing series keeps the growing space (no note)
    g = _one_series(lambda p: 1e5 * p ** 0.5, "count", ps=(1, 2, 4, 8))
    assert g.predict(64.0) == pytest.approx(8e5, rel=0.01) and not g.notes
    # a start-up cost at the first point only is not a trend: 30 at p=1, then flat 12
    s = _one_series(lambda p: 30.0 if p == 1 else 12.0, "time", ps=(1, 2, 4, 8, 16))
    assert not s.notes


def test_three_deterministic_points_do_not_give_a_zero_width_interval_beyond_them():
    # 100 p at p = 2, 4, 8, exact: the form cannot be checked on a held-out point, so beyond the data
    # the interval carries the exponent doubt (0.25 per doubling, 2 dof) instead of collapsing
    m = fit_series([2, 4, 8], [[200.0], [400.0], [800.0]])
    assert m.predict(64.0) == pytest.approx(6400.0, rel=1e-9)
    assert m.interval(8.0) == pytest.approx((800.0, 800.0))          # inside the data: exact counts
    from scipy import stats
    half = stats.t.ppf(0.95, 2) * 0.25 * math.log(2) * 3 * 6400.0     # 3 doublings beyond p = 8
    assert m.interval(64.0) == pytest.approx((6400.0 - half, 6400.0 + half), rel=1e-9)
    # a truth of another exponent within the doubt is covered: 100 * 8 * (p/8)^1.25 at p = 64
    assert m.interval(64.0)[0] <= 800 * 8 ** 1.25 <= m.interval(64.0)[1]


def test_a_dip_does_not_pin_the_model():
    """A zero byte count at the smallest scale (a rank that sent nothing there) among a constant
    3.4e7: under relative weights the zero carried 1e6x the weight of the others and the model
    predicted ~136 bytes at p = 64.  The generating value is 3.4e7."""
    P = np.array([2.0, 4, 8, 16, 32])
    m = fit_series(P, [0.0, 3.4e7, 3.4e7, 3.4e7, 3.4e7])
    assert float(m.predict(np.array([64.0]))[0]) == pytest.approx(3.4e7, rel=0.1)


def test_noise_scale_by_hand():
    """The dip rule of fit.core.noise_scale on LULESH's CalcForceForNodes->MPI_Waitall means
    (jobsize 27, 64, 125, 216), computed by hand: the first point's reference is the log-log
    extrapolation of the next two, the last point's that of the two before it (bounded by their
    level); a mean below half its reference gets 2 * reference - mean; others keep |mean|."""
    from perfcast.fit.core import noise_scale
    x = np.array([27.0, 64, 125, 216])
    y = np.array([0.018, 3.01, 4.66, 1.42]) / 4.66
    f = noise_scale(y[None], x[:, None], [[np.arange(4)]])[0]
    slope = math.log(4.66 / 3.01) / math.log(125 / 64)
    ref0 = 3.01 * (27 / 64) ** slope / 4.66
    assert f[0] == pytest.approx(2 * ref0 - y[0], rel=1e-12)
    # the interior points lie above half the geometric interpolation of their neighbours
    assert f[1] == pytest.approx(y[1], rel=1e-12) and f[2] == pytest.approx(y[2], rel=1e-12)
    slope3 = math.log(3.01 / 4.66) / math.log(64 / 125)     # from (125, 4.66) back to (64, 3.01)
    ref3 = min(4.66 * (216 / 125) ** slope3, 4.66) / 4.66
    expect3 = 2 * ref3 - y[3] if y[3] < 0.5 * ref3 else y[3]
    assert f[3] == pytest.approx(expect3, rel=1e-12)
    # a smooth steep series (p^3) is untouched
    p = np.array([1.0, 2, 4, 8, 16])
    s = p ** 3 / 16 ** 3
    assert np.allclose(noise_scale(s[None], p[:, None], [[np.arange(5)]])[0], np.maximum(s, 1e-3))


def test_three_point_doubt_by_hand():
    """Single-parameter groups measured at three values: the exponent doubt beyond the data is
    pooled over the group -- how far the exponent from the second mean to the third differs from
    the exponent through the first two, times THREE_POINT_SHARE (ln 2).  Means (1, 2, 4.4) x a at
    x = 1, 2, 4: the first two give exponent 1, the last two log2(4.4 / 2) = 1 + log2(1.1); the
    change is log2 1.1, the doubt ln 2 * log2 1.1 (exponent units, as TWO_POINT_EXPONENT_SD), and
    the drift, the relative standard deviation per doubling beyond the data, that times ln 2 once
    more (an exponent off by e misses by 2^e per doubling).  At x = 1, 3, 9 (a tripling): means
    (1, 3, 9.9) change the exponent by log3 1.1.  Exact power laws miss by 0 (floored at
    THREE_POINT_MIN_SD); fewer than THREE_POINT_SAMPLE series keep the two-point default."""
    from perfcast.fit import core

    ln2 = math.log(2)
    assert core.THREE_POINT_SHARE == ln2
    X = np.array([[1.0], [2.0], [4.0]])
    a = np.linspace(1, 50, 25)[:, None]
    assert core._three_point_doubt(X, a * np.array([1.0, 2.0, 4.4])) == pytest.approx(ln2 * math.log2(1.1), rel=1e-12)
    X3 = np.array([[1.0], [3.0], [9.0]])
    assert core._three_point_doubt(X3, a * np.array([1.0, 3.0, 9.9])) == pytest.approx(
        ln2 * math.log(1.1) / math.log(3), rel=1e-12)
    assert core._three_point_doubt(X, a * np.array([1.0, 2.0, 4.0])) == core.THREE_POINT_MIN_SD
    assert core._three_point_doubt(X, a[:5] * np.array([1.0, 2.0, 4.4])) == core.TWO_POINT_EXPONENT_SD
    # through the modeller: the drift per doubling is the doubt times ln 2
    g = fit_group(X, a * np.array([1.0, 2.0, 4.4]), np.ones((25, 3)), np.zeros((25, 3)), ["x"])
    assert g.models()[0].drift == pytest.approx(ln2 * math.log2(1.1) * ln2, rel=1e-12)
    g = fit_group(X3, a * np.array([1.0, 3.0, 9.9]), np.ones((25, 3)), np.zeros((25, 3)), ["x"])
    assert g.models()[0].drift == pytest.approx(ln2 * math.log(1.1) / math.log(3) * ln2, rel=1e-12)
    # too few series: the two-point default exponent doubt, 0.25 * ln 2 per doubling
    g = fit_group(X, a[:5] * np.array([1.0, 2.0, 4.4]), np.ones((5, 3)), np.zeros((5, 3)), ["x"])
    assert g.models()[0].drift == pytest.approx(0.25 * ln2, rel=1e-12)


def test_rowsum_gives_numpys_floats():
    """``_rowsum`` (columns added in order for short rows) returns exactly the floats of
    ``np.sum(x, axis=1)`` -- the fit's criteria must not move in the last digit -- for every row
    length, signed zeros, infinities and NaN included, and for transposed (F-order) views; in
    double and in single precision (the noise-shape fit's repetitions)."""
    from perfcast.fit.core import _rowsum

    rng = np.random.default_rng(11)
    for n in range(1, 12):
        x = rng.standard_normal((3000, n)) * np.exp(rng.standard_normal((3000, n)) * 6)
        x[:3] = -0.0
        x[3, 0], x[4, -1], x[5, 0] = np.inf, np.nan, -np.inf
        for xx in (x, x.astype(np.float32)):
            for a in (xx, np.ascontiguousarray(xx.T).T):
                got, want = _rowsum(a), np.sum(np.ascontiguousarray(a), axis=1)
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (n, xx.dtype)


def test_stable_top_is_the_stable_argsort():
    """``_stable_top`` (the fit's top-M of a merge, by integer keys on wide rows) picks exactly the
    indices of ``np.argsort(kind="stable")[:, :M]``: ties by column, values one ulp apart,
    infinities, signed zeros and NaN included, at every width around the switch to keys."""
    from perfcast.fit.core import _TOP_MIN_WIDTH, _stable_top

    rng = np.random.default_rng(17)
    for trial in range(240):
        S = int(rng.integers(1, 80))
        W = int(rng.integers(_TOP_MIN_WIDTH - 3, 2 * _TOP_MIN_WIDTH + 8))
        M = int(rng.integers(1, W + 3))
        a = rng.standard_normal((S, W)) * 10.0 ** rng.integers(-3, 4)
        kind = trial % 6
        if kind == 1:
            a = np.round(a)                                   # many exact ties
        elif kind == 2:
            a[rng.random((S, W)) < 0.6] = np.inf              # fewer than M finite in many rows
        elif kind == 3:                                       # a neighbour one ulp away, either side
            j = rng.integers(0, W, size=S)
            a[np.arange(S), j] = np.nextafter(a[np.arange(S), (j + 1) % W],
                                              rng.choice([-np.inf, np.inf], size=S))
        elif kind == 4:
            a[rng.random((S, W)) < 0.3] = rng.choice([0.0, -0.0, -np.inf, np.nan])
        elif kind == 5:                                       # equal and one-ulp-apart values mixed
            a = np.nextafter(np.round(a), np.where(rng.random((S, W)) < 0.5, -np.inf, np.inf))
        want = np.argsort(a, axis=1, kind="stable")[:, :M]
        got = _stable_top(a, M)
        assert got.shape == want.shape and np.array_equal(got, want), (trial, kind)


def test_pair_gather_and_scatter_match_fancy_indexing():
    """``_take2``/``_put2`` (the fit's (series, alternative) gathers and writes through flat indices)
    read and write exactly the elements numpy's fancy indexing does, partial trailing blocks
    included."""
    from perfcast.fit.core import _put2, _take2

    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 5, 3, 3))
    i, j = rng.integers(0, 7, size=20), rng.integers(0, 5, size=20)
    assert np.array_equal(_take2(a, i, j), a[i, j])
    idx = rng.integers(0, 5, size=(7, 4))
    assert np.array_equal(_take2(a, np.arange(7)[:, None], idx), a[np.arange(7)[:, None], idx])
    i, j = np.array([0, 6, 3, 3]), np.array([4, 0, 2, 1])             # distinct pairs
    for arr, sub in ((a, (3, 3)), (a, (2, 2)), (a, (1, 3)), (a[..., 0], (3,)), (a[..., 0], (2,)),
                     (a[..., 0, 0], ())):
        b, want = arr.copy(), arr.copy()
        v = rng.standard_normal((4, *sub))
        _put2(b, i, j, v)
        want[(i, j, *[slice(0, d) for d in sub])] = v
        assert np.array_equal(b, want), sub


def test_noise_shape_layout_keeps_numpys_floats():
    """``estimate_shape`` sums the repetitions in (repetition, series, point) layout: the pooled
    sums it starts from equal the plain (S, n, R) numpy reductions bit for bit, with and without
    missing repetitions (checked through the kurtosis statistic's inputs)."""
    from perfcast.fit.core import _rowsum

    rng = np.random.default_rng(5)
    for R in (1, 3, 5, 7, 8, 9):
        x = np.exp(rng.standard_normal((500, 6, R)))
        x[rng.random(x.shape) < 0.1] = np.nan
        xt = np.ascontiguousarray(np.moveaxis(x, 2, 0))
        clean = np.where(np.isnan(xt), 0.0, xt)
        got = _rowsum(clean.reshape(R, -1).T).reshape(500, 6)
        assert got.tobytes() == np.nansum(x, axis=2).tobytes()


def test_wls_shared_constant_sums_give_the_same_floats():
    """The constant column's normal-equation sums computed once per series (``_const_sums``, as
    the multi-parameter search shares them between a series' hypotheses) give the per-series
    weighted least squares exactly the floats it computes itself."""
    from perfcast.fit.core import _const_sums, _wls

    rng = np.random.default_rng(8)
    S, n = 300, 25
    for k in (1, 2, 3):
        Dt = rng.random((k, S, n))
        Dt[0] = 1.0
        D = Dt.transpose(1, 2, 0)
        y, w = rng.random((S, n)), rng.random((S, n)) + 0.1
        for lev in (False, True):
            a, b = _wls(D, y, w, lev), _wls(D, y, w, lev, _const_sums(y, w))
            for f in ("beta", "rss", "press", "ainv", "ok", "resid", "hat"):
                assert getattr(a, f).tobytes() == getattr(b, f).tobytes(), (k, lev, f)


def test_zero_terms_are_not_printed_and_the_text_is_the_function():
    from perfcast.fit.model import Term, formulas

    lin = (("p", Fraction(1), 0),)
    log = (("p", Fraction(0), 1),)
    cases = [  # (constant, coefficients of p and log2(p), the text by hand)
        (-1.0, (0.0, 0.0), "-1"),
        (-1.0, (0.0, -2.0), "-1 - 2 * log2(p)"),
        (0.0, (0.0, -2.0), "-2 * log2(p)"),
        (0.0, (-0.0, 0.0), "0"),
        (3.0, (0.5, 0.0), "3 + 0.5 * p"),
        (3.0, (1e-300, 0.0), "3 + 1e-300 * p"),       # tiny but not zero: printed, the value needs it
    ]
    models = [Model(("p",), c, (Term(a, lin), Term(b, log))) for c, (a, b), _ in cases]
    want = [t for *_, t in cases]
    assert [m.formula() for m in models] == want
    assert formulas(models) == want                    # the batch path renders the same rows
    # the printed (python) formula evaluates to what the model predicts
    for m in models:
        f = m.formula("python")
        for p in (2.0, 5.0, 64.0):
            assert eval(f, {"log2": math.log2, "p": p}) == pytest.approx(float(m.predict({"p": p})), abs=1e-300)


def test_python_formula_writes_exponent_one_as_the_bare_factor():
    """The python style writes p, not p**1, and log2(p), not log2(p)**1; other exponents as
    Python powers; each text evaluates to what the model predicts (values by hand)."""
    from perfcast.fit.model import Term

    F = Fraction
    cases = [  # (factors of the one term, coefficient 0.3, the python text by hand, value at p = 16 by hand)
        ((("p", F(1), 0),), "5 + 0.3 * p", 5 + 0.3 * 16),
        ((("p", F(0), 1),), "5 + 0.3 * log2(p)", 5 + 0.3 * 4),
        ((("p", F(1), 1),), "5 + 0.3 * p * log2(p)", 5 + 0.3 * 16 * 4),
        ((("p", F(2), 2),), "5 + 0.3 * p**2 * log2(p)**2", 5 + 0.3 * 256 * 16),
        ((("p", F(-1), -1),), "5 + 0.3 * p**(-1) * log2(p)**(-1)", 5 + 0.3 / 16 / 4),
        ((("p", F(1, 2), 0),), "5 + 0.3 * p**(1/2)", 5 + 0.3 * 4),
    ]
    for factors, text, value in cases:
        m = Model(("p",), 5.0, (Term(0.3, factors),))
        assert m.formula("python") == text
        assert eval(text, {"log2": math.log2, "p": 16.0}) == pytest.approx(value, rel=1e-15)
        assert m.predict(16.0) == pytest.approx(value, rel=1e-15)
    two = Model(("p", "n"), 1.0, (Term(2.0, (("p", F(1), 0), ("n", F(1), 1))),))
    assert two.formula("python") == "1 + 2 * p * n * log2(n)"
    assert eval(two.formula("python"), {"log2": math.log2, "p": 3.0, "n": 8.0}) == pytest.approx(1 + 2 * 3 * 8 * 3)


def test_law_through_every_point_keeps_its_own_three_point_doubt():
    """A grid with three values of one parameter cannot be checked by leaving its largest values
    out, so beyond the data every series carries an exponent doubt -- on a multi-parameter grid the
    two-point default, 0.25 per doubling, with 2 degrees of freedom (t = 2.92: +-50% one doubling
    out).  CoMD's MPI calls (cg.perfcast, p = 1, 2, 4, 8 x n = 10, 12, 14): exactly 150 p at every
    point, and 2400 at p = 16, n = 16, were predicted 2400 [1186, 3614].  A law through every
    measured mean (to round-off) at four values of some parameter (p: the law through three also
    meets the fourth) takes its own measurements' doubt instead (their exponent changes along every
    line: 0 here, floored at THREE_POINT_MIN_SD, never 0 width).  A series the law misses (n^3 with
    a staircase at n = 12) keeps the group's doubt, and so does the same law on three values of
    every parameter (issue 16: three deterministic points do not narrow an extrapolation)."""
    from perfcast.fit import core

    P, N = np.meshgrid([1.0, 2.0, 4.0, 8.0], [10.0, 12.0, 14.0], indexing="ij")
    X = np.column_stack([P.ravel(), N.ravel()])
    calls = 150 * X[:, 0]                                   # exact: 150 calls per rank
    bump = np.where(X[:, 1] == 12, 1.4, 1.0)                # a staircase in n, as CoMD's link cells
    work = 1.5e6 * X[:, 1] ** 3 * bump
    y = np.vstack([calls, work])
    g = fit_group(X, y, np.ones_like(y), np.zeros_like(y), ["p", "n"], FitOptions(nonnegative="asymptotic"))
    m = g.model(0)
    assert m.predict({"p": 16, "n": 16}) == pytest.approx(2400, rel=1e-9)
    lo, hi = m.interval({"p": 16, "n": 16}, 0.9)
    assert lo < 2400 < hi                                   # never zero width
    # was +-50.6%; per parameter (test_drift_of_a_law_through_every_point_is_per_parameter): along
    # p (1 doubling) its own floor 0.02 ln 2, along n (14 -> 16, log2(16/14) doublings) the
    # default 0.25 ln 2; the larger, with 2 degrees of freedom (t = 2.92), and exact coefficients
    want = _t90_two_dof() * max(core.THREE_POINT_MIN_SD, core.TWO_POINT_EXPONENT_SD * math.log2(16 / 14)) * math.log(2)
    assert (hi - 2400) / 2400 == pytest.approx(want, rel=1e-6) and (2400 - lo) / 2400 == pytest.approx(want, rel=1e-6)
    # the bending series: its law misses the staircase, the group's doubt stays
    assert g.drift[1] == pytest.approx(core.TWO_POINT_EXPONENT_SD * math.log(2), rel=1e-12)
    # three values of p and of n: no fourth value checks the law, the group's doubt stays
    keep = X[:, 0] >= 2
    g3 = fit_group(X[keep], y[:, keep], np.ones_like(y[:, keep]), np.zeros_like(y[:, keep]), ["p", "n"],
                   FitOptions(nonnegative="asymptotic"))
    assert g3.model(0).predict({"p": 16, "n": 16}) == pytest.approx(2400, rel=1e-9)
    assert g3.drift[0] == pytest.approx(core.TWO_POINT_EXPONENT_SD * math.log(2), rel=1e-12)
    # by hand: own exponent change along each line of a law through its points
    # per parameter: p (four values) has its own, n (three values) none (NaN: the group's doubt)
    own = core._own_three_point_doubt(X, np.vstack([calls, 100 + X[:, 0] * X[:, 1]]), [0, 1])
    assert own[0, 0] == core.THREE_POINT_MIN_SD and math.isnan(own[0, 1])
    # 100 + p n: along p (2, 4, 8) at n: exponents log2((100+4n)/(100+2n)), log2((100+8n)/(100+4n))
    ch = []
    for n in (10.0, 12.0, 14.0):
        ch.append(math.log2((100 + 8 * n) / (100 + 4 * n)) - math.log2((100 + 4 * n) / (100 + 2 * n)))
    want = max(math.log(2) * math.sqrt(sum(c * c for c in ch) / len(ch)), core.THREE_POINT_MIN_SD)
    assert own[1, 0] == pytest.approx(want, rel=1e-12) and math.isnan(own[1, 1])


def _t90_two_dof() -> float:
    """Student's t 95 % quantile at 2 degrees of freedom, closed form: (2P - 1) / sqrt(2 P (1 - P))."""
    return 0.9 / math.sqrt(2 * 0.95 * 0.05)


def test_drift_of_a_law_through_every_point_is_per_parameter(tmp_path, capsys):
    """A law through every mean of a grid with four values of p and three of n (3 p n^2, counts:
    no noise) keeps the doubt its own lines support along p only.  Along n, measured at three
    values, the extrapolation carries the default multi-parameter doubt (TWO_POINT_EXPONENT_SD =
    0.25 exponent per doubling, drift 0.25 ln 2 per doubling, linear growth, TWO_POINT_DRIFT_DOF =
    2 degrees of freedom: model.py's documented interval).  Without noise the coefficients are
    exact, so the half-width is t(0.95, 2) * 0.25 ln 2 * doublings * value: at n = 28 (one doubling
    beyond 14) 2.92 * 0.1733 = 50.6 % of the value; the earlier single drift gave the p-lines' 0.02
    ln 2 there too (4.0 %).  Along p the exponent does not change on any p-line: the floor
    THREE_POINT_MIN_SD, 0.02 ln 2 per doubling; beyond both, the larger of the two."""
    from perfcast.fit import core

    ln2 = math.log(2)
    q = _t90_two_dof()
    ps, ns = (1, 2, 4, 8), (10, 12, 14)
    X = np.array([[p, n] for p in ps for n in ns], dtype=float)
    law = 3.0 * X[:, 0] * X[:, 1] ** 2
    y = law[None, :]
    g = fit_group(X, y, np.full_like(y, 2.0), np.zeros_like(y), ["p", "n"])
    m = g.model(0)
    for pt, want in (({"p": 8, "n": 28}, q * core.TWO_POINT_EXPONENT_SD * ln2 * 1.0),
                     ({"p": 8, "n": 56}, q * core.TWO_POINT_EXPONENT_SD * ln2 * 2.0),
                     ({"p": 32, "n": 14}, q * core.THREE_POINT_MIN_SD * ln2 * 2.0),
                     ({"p": 16, "n": 28}, max(q * core.TWO_POINT_EXPONENT_SD * ln2, q * core.THREE_POINT_MIN_SD * ln2))):
        value = 3.0 * pt["p"] * pt["n"] ** 2
        assert m.predict(pt) == pytest.approx(value, rel=1e-9)
        lo, hi = m.interval(pt, 0.9)
        assert (hi - value) / value == pytest.approx(want, rel=1e-6), pt
        assert (value - lo) / value == pytest.approx(want, rel=1e-6), pt
    # with known noise (repetitions 1 % either side of the exact law: the means are the law) the
    # extrapolation part of the variance is the same by-hand drift
    r = np.stack([law * 0.99, law * 1.01])[None, :, :].transpose(0, 2, 1)   # (1, n, 2)
    gn = fit_group(X, y, np.full_like(y, 2.0), np.sum((r - y[..., None]) ** 2, axis=2), ["p", "n"])
    mn = gn.model(0)
    # pooled relative noise: 12 points x 2 squared deviations of 1e-4, over 24 observations less
    # the law's 2 coefficients
    assert mn.noise == pytest.approx(math.sqrt(12 * 2 * 1e-4 / (24 - 2)), rel=1e-9)
    from perfcast.fit.model import PredictBatch
    cols = {"p": np.array([8.0, 32.0]), "n": np.array([56.0, 14.0])}
    b = PredictBatch(1, 2, 1 + len(mn.terms), cols)
    b.add_models(np.array([0]), [mn])
    vd = b.variance_parts(0.9, False)["drift"][0]
    value = 3.0 * cols["p"] * cols["n"] ** 2
    assert np.sqrt(vd) / value == pytest.approx([core.TWO_POINT_EXPONENT_SD * ln2 * 2.0,
                                                 core.THREE_POINT_MIN_SD * ln2 * 2.0], rel=1e-9)
    # through the command line (the models' columns): the same bounds, and the record says why
    lines = ["PARAMETER p", "PARAMETER n", "", "POINTS " + " ".join(f"( {p} {n} )" for p in ps for n in ns), "",
             "METRIC count", "", "REGION r"]
    lines += [f"DATA {v:.17g} {v:.17g}" for v in law]
    path = tmp_path / "grid.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "predict", path, "--at", "p=8,n=28", "--at", "p=32,n=14", "--json")
    assert code == 0, err
    items = cli_items(out, "predictions")
    for it, want in zip(items, (q * core.TWO_POINT_EXPONENT_SD * ln2, q * core.THREE_POINT_MIN_SD * ln2 * 2.0)):
        assert (it["upper"] - it["value"]) / it["value"] == pytest.approx(want, rel=1e-6), it["at"]
    code, out, err = cli(capsys, "model", path, "--json")
    assert code == 0, err
    rec = cli_items(out, "models")[0]
    assert rec["drift_along"] == pytest.approx({"p": core.THREE_POINT_MIN_SD * ln2, "n": core.TWO_POINT_EXPONENT_SD * ln2})
    assert Model.from_dict(rec).drift_along == pytest.approx((core.THREE_POINT_MIN_SD * ln2, core.TWO_POINT_EXPONENT_SD * ln2))

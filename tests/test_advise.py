"""`perfcast advise` (issue 21, item 1): candidate runs ranked by the uncertainty they remove at the
target per core-hour.  Every number is checked against an independent route to it: the closed form of
weighted simple linear regression (coefficients), the two-hypothesis posterior written with tanh and
integrated by scipy's quad (hypotheses), the generating formula times the process count (cost)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate

from conftest import cli, cli_items, cli_json, one_error, require_data

from perfcast.analysis.advisor import advise, progression, request
from perfcast.fit.model import Model, Term
from perfcast.fit.series import SeriesModel

A, B, DELTA = 5.0, 3.0, 0.02          # y = A + B p, repetitions y (1 +- DELTA)
PS = [2, 4, 8, 16, 32]


def _write(path, rows):
    path.write_text("p,rep,callpath,metric,value\n" + "".join(f"{p},{r},{cp},time,{v!r}\n" for p, r, cp, v in rows))
    return path


def _linear(tmp_path, ps=PS, f=lambda p: A + B * p):
    reps = ((0, 1 + DELTA), (1, 1 - DELTA))
    return _write(tmp_path / "lin.csv", [(p, r, "main", f(p) * s) for p in ps for r, s in reps])


def _wls_variance(xs, ws, s2, t):
    """Variance of a + b t from weighted simple linear regression (weights ``ws``, noise ``s2``):
    s2 (1 / sum w + (t - xbar)^2 / Sxx), the textbook closed form."""
    xs, ws = np.asarray(xs, float), np.asarray(ws, float)
    sw = ws.sum()
    xbar = (ws * xs).sum() / sw
    sxx = (ws * (xs - xbar) ** 2).sum()
    return s2 * (1 / sw + (t - xbar) ** 2 / sxx)


def _hand_reduction(x0, target):
    """Variance reduction at ``target`` of one more run at ``x0`` (weights r / f^2 of the fit's
    statistical model; s2 the pooled relative repetition variance, 10 deltas^2 over 10 - 2 dof)."""
    s2 = len(PS) * 2 * DELTA ** 2 / (2 * len(PS) - 2)
    f = lambda p: A + B * p  # noqa: E731
    ws = [2 / f(p) ** 2 for p in PS]
    before = _wls_variance(PS, ws, s2, target)
    after = _wls_variance(PS + [x0], ws + [1 / f(x0) ** 2], s2, target)
    return before - after


def test_coefficient_reduction_is_the_closed_form_of_simple_linear_regression(tmp_path, capsys):
    path = _linear(tmp_path)
    code, out, err = cli(capsys, "advise", path, "--target", "p=256", "--json")
    assert code == 0, err
    doc = cli_json(out, "advice")
    items = doc["items"]
    # default candidates: the doubling continued two steps (64, 128), and a repetition of every point
    assert sorted((c["kind"], c["at"]["p"]) for c in items) == sorted(
        [("new", 64.0), ("new", 128.0)] + [("repeat", float(p)) for p in PS])
    y_t = A + B * 256
    for c in items:
        hand = _hand_reduction(c["at"]["p"], 256)
        assert c["parts"]["coefficients"] * y_t ** 2 == pytest.approx(hand, rel=1e-6), c["at"]
        # cost: the generating formula (the whole-run time) x p, in core-hours
        assert c["cost"] == pytest.approx((A + B * c["at"]["p"]) * c["at"]["p"] / 3600, rel=1e-6)
        assert c["cost_predicted"] == (c["kind"] == "new")
    assert doc["procs"] == "p" and doc["root"] == ["main"]


def test_ranking_follows_the_hand_computed_reduction_per_cost(tmp_path):
    """One hypothesis only (no alternatives, no drift): the order is the closed-form variance
    reduction over the cost (A + B p) p."""
    import perfcast
    from perfcast.io import load

    exp = load([_linear(tmp_path)])
    ms = perfcast.model(exp)
    m = ms[("main", "time")]
    m = dataclasses.replace(m, alternatives=(), drift=0.0)
    ms = dataclasses.replace(ms, series=(SeriesModel("main", "time", m),))
    req = request(exp.parameters, exp.data[["p"]].drop_duplicates().to_dict("records"), {"p": 256},
                  [{"p": [48, 64, 100, 128, 200]}])
    adv = advise(ms, exp, req)
    score = {}
    for c in adv.choices:
        x = c.at["p"]
        score[(c.kind, x)] = _hand_reduction(x, 256) / ((A + B * x) * x / 3600)
    assert [(c.kind, c.at["p"]) for c in adv.choices] == sorted(score, key=lambda k: -score[k])
    assert all(c.parts["hypotheses"] == 0 and c.parts["extrapolation"] == 0 for c in adv.choices)


def _two_hypotheses(tmp_path):
    """Selected: a line; alternative: a + b p log2(p) fitted to the line on the measured points
    (they agree there within 1%, well inside the 2% noise) -- equal weights, no coefficient
    uncertainty, so only the hypotheses' part is left."""
    import perfcast
    from perfcast.io import load

    ps = [16, 24, 32, 48, 64]
    line = lambda p: 1000 + 10 * p  # noqa: E731
    exp = load([_linear(tmp_path, ps, line)])
    ms = perfcast.model(exp)
    x = np.array(ps, float)
    w = 1 / line(x)                            # least squares in relative terms
    a2, b2 = np.linalg.lstsq(np.c_[np.ones(5), x * np.log2(x)] * w[:, None], line(x) * w, rcond=None)[0]
    alt_f = lambda p: a2 + b2 * p * np.log2(p)  # noqa: E731
    assert np.max(np.abs(alt_f(x) / line(x) - 1)) < 0.01
    zero = ((0.0, 0.0), (0.0, 0.0))
    alt = Model(("p",), float(a2), (Term(float(b2), (("p", Fraction(1), 1),)),), cov=zero, noise=DELTA, dof=8,
                upper=(64.0,))
    sel = Model(("p",), 1000.0, (Term(10.0, (("p", Fraction(1), 0),)),), cov=zero, noise=DELTA, dof=8,
                alternatives=((0.5, alt),), upper=(64.0,))
    ms = dataclasses.replace(ms, series=(SeriesModel("main", "time", sel),))
    return exp, ms, line, alt_f, sel, alt


def _tanh_reduction(t1, t2, mu1, mu2, sigma):
    """Two hypotheses of weight 1/2: the posterior mean at the target is the midpoint plus
    (t1 - t2)/2 tanh(L/2), L the log likelihood ratio, which is N(d^2/2, d^2) under either
    hypothesis (d = |mu1 - mu2| / sigma); its variance is the expected reduction of the spread."""
    d = abs(mu1 - mu2) / sigma
    if d == 0:
        return 0.0
    density = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    e = integrate.quad(lambda z: math.tanh((d * d / 2 + d * z) / 2) ** 2 * density(z), -12, 12, limit=200)[0]
    return ((t1 - t2) / 2) ** 2 * e


def test_two_hypotheses_the_point_that_separates_them_per_cost_comes_first(tmp_path):
    exp, ms, line, alt_f, sel, alt = _two_hypotheses(tmp_path)
    target = 1024.0
    req = request(("p",), [{"p": p} for p in (16, 24, 32, 48, 64)], {"p": target}, [{"p": [96, 128, 256, 512]}])
    adv = advise(ms, exp, req)
    t1, t2 = line(target), alt_f(target)
    truth = {}
    for c in adv.choices:
        x = c.at["p"]
        expected = _tanh_reduction(t1, t2, line(x), alt_f(x), DELTA * line(x))
        assert c.parts["hypotheses"] * t1 ** 2 == pytest.approx(expected, rel=1e-6, abs=1e-9 * t1 ** 2), x
        assert c.parts["coefficients"] == 0
        truth[(c.kind, x)] = expected / (line(x) * x / 3600)
    best = max(truth, key=truth.get)
    top = adv.choices[0]
    assert (top.kind, top.at["p"]) == best and best[0] == "new"
    # the largest disagreement is not simply the answer: the cost decides between 256 and 512
    assert top.part == "hypotheses" and top.series == "main"
    assert set(top.hypotheses) == {sel.formula(), alt.formula()}
    assert sel.formula() in top.reason and alt.formula() in top.reason
    # the repetitions, where the two agree within the noise, separate them little
    assert all(c.parts["hypotheses"] < 0.2 * top.parts["hypotheses"] for c in adv.choices if c.kind == "repeat")


def test_cost_of_a_run_is_the_whole_run_time_times_the_processes(tmp_path, capsys):
    """Two flat callpaths, neither the larger at every point: the whole run is their sum, so a run
    at p costs (100 + 4 p) p / 3600 core-hours -- predicted at new points, measured at repetitions."""
    rows = []
    for p in PS:
        for r, s in ((0, 1 + DELTA), (1, 1 - DELTA)):
            rows += [(p, r, "init", 100.0 * s), (p, r, "solve", 4.0 * p * s)]
    path = _write(tmp_path / "two.csv", rows)
    code, out, err = cli(capsys, "advise", path, "--target", "p=512", "--candidates", "p=64,128,256", "--json")
    assert code == 0, err
    doc = cli_json(out, "advice")
    assert sorted(doc["cost_root"]) == ["init", "solve"]
    for c in doc["items"]:
        p = c["at"]["p"]
        assert c["cost"] == pytest.approx((100 + 4 * p) * p / 3600, rel=1e-6), p
        assert c["run_seconds"] == pytest.approx(100 + 4 * p, rel=1e-6)
        assert c["processes"] == p


def test_without_a_process_parameter_a_run_costs_its_ranks(tmp_path, capsys):
    """A code run at a fixed 4 ranks, sizes n varied: each run costs its time (A + B n, recorded on
    every rank) x 4 processes, not x 1; runs with different rank counts fall back to one process."""
    rows = ["n,rep,rank,callpath,metric,value\n"]
    for n in PS:
        for r, s in ((0, 1 + DELTA), (1, 1 - DELTA)):
            rows += [f"{n},{r},{k},main,time,{(A + B * n) * s!r}\n" for k in range(4)]
    path = tmp_path / "ranks.csv"
    path.write_text("".join(rows))
    code, out, err = cli(capsys, "advise", path, "--target", "n=512", "--candidates", "n=64,128", "--json")
    assert code == 0, err
    doc = cli_json(out, "advice")
    for c in doc["items"]:
        assert c["processes"] == 4
        assert c["cost"] == pytest.approx((A + B * c["at"]["n"]) * 4 / 3600, rel=1e-6)
    path.write_text("".join(rows) + f"{PS[0]},2,0,main,time,{A + B * PS[0]!r}\n")     # a run on one rank
    code, out, err = cli(capsys, "advise", path, "--target", "n=512", "--candidates", "n=64,128", "--json")
    assert code == 0, err
    assert {c["processes"] for c in cli_json(out, "advice")["items"]} == {1}


def test_budget_plan_stays_within_the_budget(tmp_path, capsys):
    path = _linear(tmp_path)
    budget = 1.0
    code, out, err = cli(capsys, "advise", path, "--target", "p=256", "--budget", budget, "--json")
    assert code == 0, err
    doc = cli_json(out, "advice")
    costs = {(c["kind"], c["at"]["p"]): c["cost"] for c in doc["items"]}
    plan = doc["plan"]
    assert plan and doc["spent"] <= budget
    assert doc["spent"] == pytest.approx(sum(costs[(s["kind"], s["at"]["p"])] for s in plan), rel=1e-12)
    # each step lowers the uncertainty
    after = [doc["uncertainty"]] + [s["uncertainty_after"] for s in plan]
    assert all(b < a for a, b in zip(after, after[1:]))


def test_text_output_gives_one_reason_per_candidate(tmp_path, capsys):
    path = _linear(tmp_path)
    code, out, err = cli(capsys, "advise", path, "--target", "p=256")
    assert code == 0, err
    import re

    lines = [ln for ln in out.splitlines() if re.match(r"\s*\d+\. ", ln)]
    assert len(lines) == 7                      # 2 new points + 5 repetitions
    assert all("core-h" in ln for ln in lines)


@pytest.mark.parametrize("args, says", [
    (["--target", "q=512"], "unknown parameter 'q'"),
    (["--target", "p=16"], "inside the measured range"),
    (["--target", "p=1"], "not beyond the measured range"),      # below the smallest run: not "inside"
    (["--target", "p=0"], "p=0: a scaling model predicts at positive parameter values only"),
    (["--target", "p=256", "--candidates", "p=4,8,16"], "no candidate beyond the measured range"),
    (["--target", "p=256", "--candidates", "q=64"], "unknown parameter 'q'"),
    (["--target", "p=256", "--budget", "0.0001"], "buys no run"),
    (["--target", "p=256", "--budget", "-1"], "must be above 0"),
    (["--target", "p=256", "--candidates", "p=64,x"], "not numbers"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    path = _linear(tmp_path)
    code, out, err = cli(capsys, "advise", path, *args)
    line = one_error(code, err)
    assert says in line, line
    assert out == ""


def test_a_parameter_the_campaign_did_not_vary_is_refused(tmp_path, capsys):
    path = tmp_path / "fixed.csv"
    path.write_text("p,n,rep,callpath,metric,value\n" + "".join(
        f"{p},10,{r},main,time,{(A + B * p) * s!r}\n" for p in PS for r, s in ((0, 1.01), (1, 0.99))))
    for args in (["--target", "p=256,n=20"], ["--target", "p=256", "--candidates", "n=20"]):
        code, out, err = cli(capsys, "advise", path, *args)
        assert "measured n at 10 only" in one_error(code, err)
    code, out, err = cli(capsys, "advise", path, "--target", "p=256", "--json")
    assert code == 0, err
    assert {c["at"]["n"] for c in cli_json(out, "advice")["items"]} == {10.0}


@pytest.mark.parametrize("values, expected", [
    ([32, 64, 128, 256, 512], [1024, 2048]),          # doubling
    ([5000, 6000, 7000, 8000, 9000], [10000, 11000]),  # constant step
    ([27, 64, 125, 216, 343], [512, 729]),             # cubes of 3..7 (LULESH's sizes)
    ([1, 4, 9, 16], [25, 36]),                         # squares
    ([1.5, 4.5, 6.0], [8.0, 32 / 3]),                  # irregular: the ratio of the last two (4/3)
])
def test_progression_continues_the_measured_values(values, expected):
    assert progression(values) == pytest.approx(expected, rel=1e-12)


def _drift_grid(tmp_path):
    """p = 2..32 x n = 100, 800, time 1 + 0.01 n log2(p) (+-2% repetitions), modelled; its one
    series given drift 0.1 and growth 2 and no competing hypotheses (the extrapolation part alone)."""
    import perfcast
    from perfcast.io import load

    path = tmp_path / "grid.csv"
    path.write_text("p,n,rep,callpath,metric,value\n" + "".join(
        f"{p},{n},{r},main,time,{(1 + 0.01 * n * math.log2(p)) * s!r}\n"
        for p in PS for n in (100, 800) for r, s in ((0, 1.02), (1, 0.98))))
    exp = load([path])
    ms = perfcast.model(exp)
    m = dataclasses.replace(ms[("main", "time")], alternatives=(), drift=0.1, growth=2.0)
    return exp, dataclasses.replace(ms, series=(SeriesModel("main", "time", m),))


def test_extrapolation_part_counts_doublings_from_the_nearest_measured_point(tmp_path):
    """Drift 0.1 per doubling squared (growth 2): the extrapolation variance at d doublings is
    (0.1 d^2 y)^2, the doublings along several parameters added (d = sum_q d_q).  On the grid
    p = 2..32 x n = 100, 800 the target p=1024,n=800 is 5 doublings of p from (32, 800); a run at
    p=256 brings it to 2 at n = 800, but at n = 100 it is 2 doublings of p and 3 of n away: 5, no
    closer than the data already are (p = 128 at n = 100: 6)."""
    exp, ms = _drift_grid(tmp_path)
    req = request(("p", "n"), exp.data[["p", "n"]].drop_duplicates().to_dict("records"), {"p": 1024},
                  [{"p": [128, 256], "n": [100, 800]}])
    adv = advise(ms, exp, req)
    fourth = {(128, 100): 5 ** 4, (128, 800): 3 ** 4, (256, 100): 5 ** 4, (256, 800): 2 ** 4}
    for c in adv.choices:
        key = (c.at["p"], c.at["n"])
        expected = 0.0 if c.kind == "repeat" else 0.01 * (5 ** 4 - fourth[key])
        assert c.parts["extrapolation"] == pytest.approx(expected, rel=1e-9, abs=1e-12), key
    assert adv.parts["extrapolation"] == pytest.approx(0.01 * 5 ** 4, rel=1e-9)


def test_flat_timers_under_a_whole_run_timer_are_said_to_nest(capsys, data_dir):
    # Relearn's flat timers: main() is at least every other timer at each of the 25 points (by the
    # file's numbers, e.g. 406.0 against Simulation loop's 405.7 at p = 32, n = 5000): the run is
    # main(), and the kernels listed (main(), Simulation loop, ... each about 100%) may hold one another
    relearn = require_data(data_dir / "extrap" / "text" / "mpa" / "relearn_data.txt")
    code, out, err = cli(capsys, "advise", relearn, "--target", "p=1024,n=9000", "--json")
    assert code == 0, err
    adv = cli_json(out, "advice")
    assert adv["root"] == ["main()"] and adv["cost_root"] == ["main()"]
    assert any("holds every other timer" in n and "may nest" in n for n in adv["notes"])


def test_an_unmeasured_point_inside_the_measured_range_is_a_candidate(tmp_path):
    """p = 12 and 24 lie between measured points: no longer refused (a grid's gaps are runs one can
    make); their coefficient part is the closed form of weighted simple linear regression."""
    import perfcast
    from perfcast.io import load

    exp = load([_linear(tmp_path)])
    ms = perfcast.model(exp)
    req = request(exp.parameters, exp.data[["p"]].drop_duplicates().to_dict("records"), {"p": 256},
                  [{"p": [12, 24]}])
    assert req.new == ((12.0,), (24.0,))
    adv = advise(ms, exp, req)
    y_t = A + B * 256
    for c in adv.choices:
        assert c.parts["coefficients"] * y_t ** 2 == pytest.approx(_hand_reduction(c.at["p"], 256), rel=1e-6)


def test_floor_is_the_drift_no_candidate_removes(tmp_path):
    """Drift 0.1, growth 2 on p = 2..32 x n = 100, 800, target p=1024,n=800: the nearest candidate,
    p=256 at n=800, is 2 doublings away, so (0.1 * 2^2)^2 = 0.16 of the relative variance stays
    whatever is run; a run is worth making when it removes MIN_STEP of the rest."""
    from perfcast.analysis.advisor import MIN_STEP

    exp, ms = _drift_grid(tmp_path)
    pts = exp.data[["p", "n"]].drop_duplicates().to_dict("records")
    adv = advise(ms, exp, request(("p", "n"), pts, {"p": 1024}, [{"p": [128, 256], "n": [100, 800]}]))
    assert adv.floor == pytest.approx(0.01 * 2 ** 4, rel=1e-9)
    assert adv.worth == pytest.approx(MIN_STEP * (adv.sd ** 2 - 0.16), rel=1e-9)
    # with p=128 the nearest candidate: 3 doublings of p stay
    adv = advise(ms, exp, request(("p", "n"), pts, {"p": 1024}, [{"p": [128], "n": [100, 800]}]))
    assert adv.floor == pytest.approx(0.01 * 3 ** 4, rel=1e-9)


def test_uncertainty_is_the_interval_perfcast_predict_gives(tmp_path, capsys):
    """The advice states its uncertainty now as the half-width of `perfcast predict`'s 90% interval
    of the root at the target, relative to the value: the same figure as predict --json's row."""
    path = _linear(tmp_path)
    code, out, err = cli(capsys, "predict", path, "--at", "p=256", "--json")
    assert code == 0, err
    rows = [r for r in cli_json(out, "predictions")["items"] if r["callpath"] == "main" and r["metric"] == "time"]
    assert len(rows) == 1
    r = rows[0]
    half = (r["upper"] - r["lower"]) / 2 / r["value"]
    code, out, err = cli(capsys, "advise", path, "--target", "p=256", "--budget", 1.0, "--json")
    assert code == 0, err
    doc = cli_json(out, "advice")
    assert doc["root"] == ["main"] and doc["level"] == r["level"] == 0.9
    assert doc["uncertainty"] == pytest.approx(half, rel=1e-12)
    assert (doc["value"], doc["lower"], doc["upper"]) == pytest.approx((r["value"], r["lower"], r["upper"]), rel=1e-12)
    assert all(c["uncertainty_before"] == pytest.approx(half, rel=1e-12) for c in doc["items"])


def test_interval_after_a_run_is_the_t_interval_of_the_updated_regression(tmp_path):
    """One hypothesis, no drift, normal noise: after one more run at x the 90% interval at the target
    is t_{0.95, dof} sqrt(Var(a + b t | x added) + s2 y_t^2) / y_t, the variance by the closed form of
    weighted simple linear regression (dof 10 - 2, as fitted)."""
    import perfcast
    from scipy import stats as st
    from perfcast.io import load

    exp = load([_linear(tmp_path)])
    ms = perfcast.model(exp)
    m = dataclasses.replace(ms[("main", "time")], alternatives=(), drift=0.0, noise_shape=2.0)
    ms = dataclasses.replace(ms, series=(SeriesModel("main", "time", m),))
    assert m.dof == 2 * len(PS) - 2
    req = request(exp.parameters, exp.data[["p"]].drop_duplicates().to_dict("records"), {"p": 256},
                  [{"p": [48, 64, 128]}])
    adv = advise(ms, exp, req)
    s2 = len(PS) * 2 * DELTA ** 2 / (2 * len(PS) - 2)
    f = lambda p: A + B * p  # noqa: E731
    ws = [2 / f(p) ** 2 for p in PS]
    q = st.t.ppf(0.95, 2 * len(PS) - 2)
    y_t = f(256)
    now = q * math.sqrt(_wls_variance(PS, ws, s2, 256) + s2 * y_t ** 2) / y_t
    assert adv.uncertainty == pytest.approx(now, rel=1e-6)
    for c in adv.choices:
        x = c.at["p"]
        var = _wls_variance(PS + [x], ws + [1 / f(x) ** 2], s2, 256)
        assert c.before == pytest.approx(now, rel=1e-6)
        assert c.after == pytest.approx(q * math.sqrt(var + s2 * y_t ** 2) / y_t, rel=1e-6), (c.kind, x)


def test_a_total_without_interval_is_said_plainly(tmp_path, capsys):
    # a second topmost callpath measured at one scale only: one point gives no model, so predict
    # gives it no interval and the total has none; the first line read "the total's 90% interval
    # there is no interval (perfcast predict's)"
    rows = [(p, r, "main", (A + B * p) * s) for p in PS for r, s in enumerate((0.98, 1.0, 1.02))]
    src = _write(tmp_path / "one.csv", rows + [(PS[-1], r, "finalize", 0.5 + 0.01 * r) for r in range(3)])
    code, out, err = cli(capsys, "predict", src, "--at", "p=1000", "--json")
    assert code == 0, err
    tops = cli_json(out, "predictions")["items"]
    assert {r["callpath"]: r["lower"] is None for r in tops} == {"main": False, "finalize": True}
    code, out, err = cli(capsys, "advise", src, "--target", "p=1000")
    assert code == 0, err
    first = out.splitlines()[0]
    assert "is no interval" not in first
    assert "the total has no 90% interval there" in first
    code, out, err = cli(capsys, "advise", src, "--target", "p=1000", "--json")
    assert code == 0 and cli_json(out, "advice")["uncertainty"] is None



def test_a_target_at_zero_beside_one_beyond_is_refused_before_any_model(tmp_path, capsys, data_dir):
    """p=256 is beyond the runs, n=0 is no run at all: refused as such.  On Relearn (p = 32 .. 512,
    n = 5000 .. 9000) p=2048,n=0 was advised on until the models gave nan for the whole run there."""
    path = tmp_path / "pn.csv"
    path.write_text("p,n,rep,callpath,metric,value\n" + "".join(
        f"{p},{n},{r},main,time,{(A + B * p) * n * s!r}\n" for p in PS for n in (10, 20)
        for r, s in ((0, 1.01), (1, 0.99))))
    relearn = data_dir / "extrap" / "text" / "mpa" / "relearn_data.txt"
    for exp, target in ((path, "p=256,n=0"), (relearn, "p=2048,n=0")):
        code, out, err = cli(capsys, "advise", exp, "--target", target)
        assert "n=0: a scaling model predicts at positive parameter values only" in one_error(code, err)
        assert out == ""


def test_each_reason_states_the_figure_the_candidates_are_ranked_by(capsys, data_dir):
    """Relearn, target p=2048,n=9000: predict's interval of the total after a run at p=1024 is ±17.8% for
    n = 6000 .. 9000 alike, while the candidates are ranked 7000, 8000, 6000, 9000 by the kernels' sd
    removed per core-hour.  Each reason states that sd before and after, and by hand
    (sd_before^2 - sd_after^2) / core-hours does not increase down the list."""
    relearn = data_dir / "extrap" / "text" / "mpa" / "relearn_data.txt"
    code, out, err = cli(capsys, "advise", relearn, "--target", "p=2048,n=9000", "--json")
    assert code == 0, err
    items = cli_items(out, "advice")
    per = []
    for c in items:
        assert f"sd of the kernels ±{c['sd_before']:.1%} -> ±{c['sd_after']:.1%} (ranked by)" in c["reason"]
        per.append((c["sd_before"] ** 2 - c["sd_after"] ** 2) / c["cost"])
    assert all(b <= a * (1 + 1e-9) for a, b in zip(per, per[1:]))
    at_1024 = [c for c in items if c["at"]["p"] == 1024 and c["kind"] == "new"]
    assert len({round(c["uncertainty_after"], 3) for c in at_1024}) == 1      # the interval does not tell them apart
    assert len({round(c["sd_after"], 3) for c in at_1024}) == len(at_1024)     # the sd does


def test_a_kernel_predicted_above_its_caller_is_said(tmp_path, capsys):
    """Inclusive time: main = 10 + p holds main->a = 1 + 0.02 p^2 at every measured p (2 .. 32: 21.48 <= 42),
    but at p=256 the child's formula gives 1 + 0.02 * 65536 = 1311.72 against main's 266: two models
    disagreeing, which the kernels' shares (a above main) do not say by themselves."""
    path = tmp_path / "nest.csv"
    path.write_text("p,rep,callpath,metric,value,scope\n" + "".join(
        f"{p},{r},{cp},time,{f(p) * s!r},inclusive\n" for p in PS for r, s in ((0, 1.01), (1, 0.99))
        for cp, f in (("main", lambda p: 10 + p), ("main->a", lambda p: 1 + 0.02 * p ** 2))))
    code, out, err = cli(capsys, "advise", path, "--target", "p=256", "--json")
    assert code == 0, err
    adv = cli_json(out, "advice")
    share = {k["callpath"]: k["share"] for k in adv["kernels"]}
    assert share["main->a"] > share["main"]
    (note,) = [n for n in adv["notes"] if "predicted above a caller" in n]
    assert "main->a 1312 above main 266" in note

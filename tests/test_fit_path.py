"""Parameters varied together along one measured path (perfcast.fit.path): a law along the path,
never the training mean; off the path a wide interval and low confidence.  Checked against the
formulas that generated the data and, for Extra-P's input2.json, against the file's values by hand."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast import Experiment, Metric
from perfcast.shared_data import shared_data_dir

from conftest import cli, cli_items

TIME = [Metric("time", "s", "time", "exclusive")]


def truth_x(x):
    return 3.0 + 0.5 * x * math.log2(x)


def _diagonal(xs=(4, 8, 16, 32, 64), noise=(0.0, 0.01, -0.01)):
    # y = 10 log2(x) - 10 along the path: the truth is a function of x alone there
    rows = [{"x": x, "y": 10 * math.log2(x) - 10, "rep": r, "callpath": "k", "metric": "time",
             "value": truth_x(x) * (1 + e)} for x in xs for r, e in enumerate(noise)]
    return Experiment(["x", "y"], pd.DataFrame(rows), TIME)


def test_a_path_gives_a_law_along_it_within_tolerance_of_the_truth():
    exp = _diagonal()
    ms = perfcast.model(exp)
    r = ms.predict({"x": 128.0, "y": 60.0})[0]          # one doubling further along the path
    truth = truth_x(128.0)                              # 451
    mean = float(exp.data["value"].mean())
    assert r["status"] == "ok"
    assert r["value"] == pytest.approx(truth, rel=0.05)
    assert r["lower"] <= truth <= r["upper"]
    assert abs(r["value"] - mean) > 0.5 * mean
    # the formula printed is the function that gave the value: a law in x alone
    m = ms[("k", "time")]
    assert all(q == "x" for t in m.terms for q, _, _ in t.factors) and m.terms
    assert m.predict({"x": 128.0, "y": 60.0}) == pytest.approx(r["value"], rel=1e-12)
    assert any("varied together" in n for n in r["notes"])
    assert not any("off the measured path" in n for n in r["notes"])


def test_the_parameter_the_path_follows_is_chosen_by_the_criterion():
    # the truth is a power of y; along the path x = y + 7, in which it is no PMNF law: the law
    # chosen is in y
    rows = [{"x": y + 7, "y": y, "rep": r, "callpath": "k", "metric": "time",
             "value": (1.0 + 3.0 * y ** 1.5) * (1 + e)} for y in (8, 16, 24, 32, 40)
            for r, e in enumerate((0.0, 0.01, -0.01))]
    ms = perfcast.model(Experiment(["x", "y"], pd.DataFrame(rows), TIME))
    m = ms[("k", "time")]
    assert m.terms and all(q == "y" for t in m.terms for q, _, _ in t.factors)
    r = ms.predict({"x": 87.0, "y": 80.0})[0]
    truth = 1.0 + 3.0 * 80 ** 1.5
    assert r["value"] == pytest.approx(truth, rel=0.05) and r["lower"] <= truth <= r["upper"]


def test_off_the_path_the_interval_holds_each_parameter_alone_and_confidence_is_low():
    ms = perfcast.model(_diagonal())
    on = ms.predict({"x": 128.0, "y": 60.0})[0]
    off = ms.predict({"x": 128.0, "y": 50.0})[0]       # x one doubling on, y where the path had x = 64
    # the value is the path law's at x = 128; if only y mattered the time would be the path's at y = 50
    assert off["value"] == pytest.approx(on["value"], rel=1e-12)
    assert off["confidence"] == "low"
    assert any("off the measured path" in n for n in off["notes"])
    assert off["lower"] <= truth_x(64.0) * 1.02 and off["upper"] >= truth_x(128.0) * 0.98
    assert off["upper"] - off["lower"] > 2 * (on["upper"] - on["lower"])
    # the other way: y beyond the data with x measured: the interval reaches the value at y's position
    up = ms.predict({"x": 64.0, "y": 60.0})[0]
    assert up["confidence"] == "low" and up["upper"] >= truth_x(128.0) * 0.98
    assert up["lower"] <= truth_x(64.0) * 1.02


def test_two_points_of_a_path_give_the_two_point_law_and_one_point_is_an_error():
    rows = [{"x": x, "y": y, "rep": 0, "callpath": "k", "metric": "time", "value": 2.0 * x}
            for x, y in ((4, 10), (8, 20))]
    ms = perfcast.model(Experiment(["x", "y"], pd.DataFrame(rows), TIME))
    r = ms.predict({"x": 16.0, "y": 30.0})[0]
    # the one-term law through both means, by hand: exponent log(16/8)/log(8/4) = 1, c = 2
    assert r["value"] == pytest.approx(32.0, rel=1e-9) and r["value"] != pytest.approx(12.0)
    assert r["status"] == "ok" and r["confidence"] == "low"
    assert r["upper"] - r["lower"] > 0.1 * r["value"]
    assert any("varied together" in n for n in r["notes"])
    one = Experiment(["x", "y"], pd.DataFrame([{"x": 4, "y": 10, "rep": 0, "callpath": "k", "metric": "time",
                                                "value": 1.0}]), TIME)
    with pytest.raises(perfcast.PerfcastError, match="at least 2 points"):
        perfcast.model(one)


def test_extrap_input2_is_no_longer_the_training_mean(capsys):
    path = shared_data_dir() / "extrap" / "json" / "new" / "input2.json"
    doc = json.loads(path.read_text())
    meas = doc["measurements"]["sweep"]["time"]
    pts = [(m["point"][0], float(np.mean(m["values"]))) for m in meas]
    mean = float(np.mean([v for m in meas for v in m["values"]]))       # the training mean, by hand
    # the file's means lie on the line through its first two points (by hand: 1.5 + 0.5 x)
    (x0, t0), (x1, t1) = pts[:2]
    slope = (t1 - t0) / (x1 - x0)
    assert all(t == pytest.approx(t0 + slope * (x - x0)) for x, t in pts)
    code, out, err = cli(capsys, "predict", path, "--at", "x=128,y=60", "--json")
    assert code == 0, err
    row = next(r for r in cli_items(out, "predictions") if r["callpath"] == "sweep" and r["metric"] == "time")
    truth = t0 + slope * (128 - x0)
    assert row["status"] == "ok"
    assert abs(row["value"] - mean) > 0.5 * mean
    assert row["value"] == pytest.approx(truth, rel=0.01)
    assert row["lower"] <= truth * (1 + 1e-9) and row["upper"] >= truth * (1 - 1e-9)


def test_a_three_point_path_says_its_interval_is_the_exponent_doubt(capsys, tmp_path):
    """3 x^2 exactly (two equal runs each) at (x, y) = (4, 10), (8, 20), (16, 30): three values of
    each parameter, so no point of the path can be held out to check the law, and beyond the data
    its interval is the exponent doubt, not noise.  Grids of three values say so (the exponent-doubt
    note); the path said nothing.  Four points along a path (one held out) get no such note."""
    from perfcast.fit.core import exponent_doubt_note

    def path(points):
        rows = [{"x": x, "y": y, "rep": r, "callpath": "k", "metric": "time", "value": 3.0 * x ** 2}
                for x, y in points for r in range(2)]
        return Experiment(["x", "y"], pd.DataFrame(rows), TIME)

    three = ((4, 10), (8, 20), (16, 30))
    ms = perfcast.model(path(three))
    m = ms[("k", "time")]
    assert m.predict({"x": 16.0, "y": 30.0}) == pytest.approx(3 * 16 ** 2, rel=1e-9)
    far, inside = ms.predict([{"x": 32.0, "y": 40.0}, {"x": 8.0, "y": 20.0}])
    # one doubling of x beyond the data (y by a third): the doubt along x, the law exact at every point
    assert exponent_doubt_note("x", 3, m.drift, True) in far["notes"]
    assert m.unchecked_on == (3, 3)
    assert far["lower"] < 3 * 32 ** 2 < far["upper"]
    assert not any("no measured point could be held out" in n for n in inside["notes"])
    perfcast.store.write(path(three), tmp_path / "path.perfcast")
    code, out, err = cli(capsys, "model", tmp_path / "path.perfcast", "--json")
    assert code == 0, err
    [item] = cli_items(out, "models")
    assert item["unchecked_on"] == {"x": 3, "y": 3}
    four = perfcast.model(path(three + ((32, 40),)))
    assert four[("k", "time")].unchecked_on is None
    (r,) = four.predict({"x": 64.0, "y": 50.0})
    assert not any("no measured point could be held out" in n for n in r["notes"])

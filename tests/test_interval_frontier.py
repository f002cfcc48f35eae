"""The distance beyond the data of a prediction interval is counted from the measured points
(Model.frontier, fit.model.frontier_doublings), not from each parameter's largest measured value
on its own: on a cross design (p = 2..32 at n = 10, n = 10..40 at p = 2) the corner p = 32,
n = 40 was never run and lies 2 doublings (of n, from p = 32, n = 10) beyond the data; on a full
grid the only point not dominated is the corner of the largest values and nothing changes.  The
truth is the generating law 1 + 0.01 p n^2 and the doublings worked out by hand."""

import json
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment
from perfcast.fit.model import Model, PredictBatch, Term, measured_frontier, reach_after
from perfcast.modelset import CONFIDENCE_LIMITS

from conftest import cli, cli_items

CROSS = [(p, 10.0) for p in (2.0, 4.0, 8.0, 16.0, 32.0)] + [(2.0, n) for n in (20.0, 30.0, 40.0)]
GRID = [(p, n) for p in (2.0, 4.0, 8.0, 16.0, 32.0) for n in (10.0, 20.0, 30.0, 40.0)]
CORNER = {"p": 32.0, "n": 40.0}


def law(p, n):
    return 1 + 0.01 * p * n * n


def _rows(points, S=6, reps=4, noise=0.03, seed=1):
    rng = np.random.default_rng(seed)
    return [{"p": p, "n": n, "callpath": f"k{s}", "metric": "time", "value": law(p, n) * (1 + rng.normal(0, noise))}
            for s in range(S) for p, n in points for _ in range(reps)]


def _model(points, **kw):
    exp = Experiment.from_pandas(pd.DataFrame(_rows(points, **kw)), parameters=["p", "n"])
    return perfcast.model(exp, segmented=False)


def _parts(m, point):
    cols = {q: np.array([float(point[q])]) for q in m.parameters}
    b = PredictBatch(1, 1, len(m.terms) + 1, cols)
    b.add_models(np.array([0]), [m])
    return b.variance_parts(0.9, averaged=False)


def _hand_doublings(x, measured):
    """min over the measured points q of max_k log2(x_k / q_k)^+, by hand."""
    return min(max(max(math.log2(x[k] / q[k]), 0.0) for k in range(len(x))) for q in measured)


def test_hand_doublings_of_the_cross_design():
    # the rule itself, worked out: the corner is 2 doublings of n from (32, 10), 4 of p from (2, 40)
    assert _hand_doublings((32.0, 40.0), CROSS) == 2.0
    assert _hand_doublings((4.0, 20.0), CROSS) == 1.0
    assert _hand_doublings((64.0, 80.0), GRID) == 1.0


def test_frontier_of_measured_points():
    assert measured_frontier(np.array(CROSS)) == ((32.0, 10.0), (2.0, 40.0))
    assert measured_frontier(np.array(GRID)) is None           # the corner (32, 40) was run
    assert measured_frontier(np.array([[1.0, 4.0], [2.0, 2.0], [4.0, 1.0], [1.0, 1.0], [2.0, 2.0]])) == \
        ((4.0, 1.0), (2.0, 2.0), (1.0, 4.0))
    assert measured_frontier(np.array([[2.0], [8.0], [4.0]])) is None


def test_unmeasured_corner_of_a_cross_design_carries_the_drift():
    ms = _model(CROSS)
    rows = ms.predict(CORNER)
    flipped = 0
    with_drift = 0
    for sm, r in zip(ms.series, rows):
        m = sm.model
        assert m.status == "ok"
        assert m.doublings(CORNER) == _hand_doublings((32.0, 40.0), CROSS) == 2.0
        assert m.doublings({"p": 4.0, "n": 20.0}) == 1.0
        assert m.doublings({"p": 16.0, "n": 10.0}) == 0.0 and m.doublings({"p": 2.0, "n": 30.0}) == 0.0
        parts = _parts(m, CORNER)
        centre = parts["centre"][0, 0]
        assert parts["drift"][0, 0] == pytest.approx((m.drift * 2.0 ** m.growth * centre) ** 2, rel=1e-12)
        if not m.drift:
            continue
        with_drift += 1
        # the interval predict shows is wider than the same model's without the drift
        lo, hi = m.interval(CORNER)
        lo0, hi0 = replace(m, drift=0.0).interval(CORNER)
        assert (r["lower"], r["upper"]) == pytest.approx((max(lo, 0.0), hi), rel=1e-9)
        assert hi - lo > hi0 - lo0
        half, half0 = (hi - lo) / 2 / abs(centre), (hi0 - lo0) / 2 / abs(centre)
        if half0 <= CONFIDENCE_LIMITS[1] < half:
            # without the drift the interval would say medium (or high); with it it says low
            flipped += 1
            assert r["confidence"] == "low"
    assert with_drift >= 2
    assert flipped >= 1
    assert all(sm.model.frontier == ((32.0, 10.0), (2.0, 40.0)) for sm in ms.series)


def test_drift_per_parameter_counted_from_the_nearest_measured_point():
    # drift 0.1 along p and 0.3 along n, growth 2; from (32, 10): 0.3 * 2^2 = 1.2 along n; from
    # (2, 40): 0.1 * 4^2 = 1.6 along p; the nearest measured point's, 1.2
    m = Model(("p", "n"), 0.0, (Term(1.0, (("p", Fraction(1), 0), ("n", Fraction(2), 0))),), cov=((0.0, 0.0), (0.0, 0.0)),
              noise=0.0, dof=10, drift=0.3, upper=(32.0, 40.0), growth=2.0, drift_dof=0, drift_along=(0.1, 0.3),
              frontier=((32.0, 10.0), (2.0, 40.0)))
    y = 32.0 * 40.0 ** 2
    assert _parts(m, CORNER)["drift"][0, 0] == pytest.approx((1.2 * y) ** 2, rel=1e-12)
    # at p = 64, n = 10: 1 doubling of p from (32, 10) (0.1), 5 of p from (2, 40) (2.5): 0.1
    assert _parts(m, {"p": 64.0, "n": 10.0})["drift"][0, 0] == pytest.approx((0.1 * 64.0 * 100.0) ** 2, rel=1e-12)
    # the same model counted from the corner alone (a full grid): nothing beyond the data at the corner
    assert _parts(replace(m, frontier=None), CORNER)["drift"][0, 0] == 0.0


def test_full_grid_is_counted_from_the_corner_as_before():
    ms = _model(GRID)
    at = [{"p": 64.0, "n": 80.0}, {"p": 128.0, "n": 40.0}, {"p": 32.0, "n": 40.0}, {"p": 4.0, "n": 20.0},
          {"p": 64.0, "n": 20.0}]
    hand = [1.0, 2.0, 0.0, 0.0, 1.0]
    assert [_hand_doublings((t["p"], t["n"]), GRID) for t in at] == hand
    for sm in ms.series:
        m = sm.model
        assert getattr(m, "frontier", None) is None and m.upper == (32.0, 40.0)
        assert "measured_frontier" not in m.to_dict()
        for t, d in zip(at, hand):
            assert m.doublings(t) == d
            parts = _parts(m, t)
            assert parts["drift"][0, 0] == pytest.approx((m.drift * d ** m.growth * parts["centre"][0, 0]) ** 2,
                                                         rel=1e-12, abs=0.0)


def test_frontier_in_json_round_trip_and_schema(capsys, tmp_path):
    ms = _model(CROSS, S=2)
    # the models streamed from the fit's arrays and the built ones say the same
    recs = json.loads("".join(ms.json_chunks()))
    assert [r["measured_frontier"] for r in recs] == [[[32.0, 10.0], [2.0, 40.0]]] * 2
    m = ms.series[0].model
    d = m.to_dict()
    assert d["measured_frontier"] == [[32.0, 10.0], [2.0, 40.0]]
    back = Model.from_dict(d)
    assert back.frontier == m.frontier and back.doublings(CORNER) == 2.0
    for bad in ([[32.0, 10.0]], [[32.0, 10.0], [2.0]]):
        with pytest.raises(PerfcastError, match="measured_frontier"):
            Model.from_dict({**d, "measured_frontier": bad})
    # a model written before the field: counted from the largest measured values, as it was
    old = {k: v for k, v in d.items() if k != "measured_frontier"}
    assert Model.from_dict(old).doublings(CORNER) == 0.0
    # the command line's JSON, against the schema
    path = tmp_path / "cross.csv"
    pd.DataFrame(_rows(CROSS, S=2)).to_csv(path, index=False)
    code, out, err = cli(capsys, "model", str(path), "--json")
    assert code == 0, err
    assert [r["measured_frontier"] for r in cli_items(out, "models")] == [[[32.0, 10.0], [2.0, 40.0]]] * 2
    code, out, err = cli(capsys, "predict", str(path), "--at", "p=32,n=40", "--json")
    assert code == 0, err
    assert len(cli_items(out, "predictions")) == 2


def test_measured_points_after_a_run():
    # what the advisor's interval after a run (analysis.advisor._RootInterval) counts from: the cross
    # with its corner run is a full grid's reach (the corner alone); with p = 32, n = 20 run, the
    # corner is 1 doubling of n from it
    cross = measured_frontier(np.array(CROSS))
    assert reach_after((32.0, 40.0), cross, [[32.0, 40.0]]) == ((32.0, 40.0), None)
    up, fr = reach_after((32.0, 40.0), cross, [[32.0, 20.0]])
    assert (up, fr) == ((32.0, 40.0), ((32.0, 20.0), (2.0, 40.0)))
    m = Model(("p", "n"), 1.0, upper=up, frontier=fr)
    assert m.doublings(CORNER) == 1.0
    # a full grid's corner and a run beyond it in p alone: (64, 40) is not measured, 1 doubling of n
    # from (64, 10)
    up, fr = reach_after((32.0, 40.0), None, [[64.0, 10.0]])
    assert (up, fr) == ((64.0, 40.0), ((64.0, 10.0), (32.0, 40.0)))
    assert Model(("p", "n"), 1.0, upper=up, frontier=fr).doublings({"p": 64.0, "n": 40.0}) == 1.0
    assert reach_after(None, None, [[1.0, 1.0]]) == (None, None)

"""One quantity combined over the ranks in several ways (Caliper's min#X, avg#X, max#X, each its own
metric): whatever the ranks, min <= mean <= max.  Models fitted apart may cross beyond the data;
the predictions then say so (issue 16: outputs that contradict each other).  Ground truth: the
generating formulas."""

import pandas as pd
import pytest

import perfcast
from perfcast.experiment import CallTree, Experiment, Metric

LAWS = {"min#t": lambda p: 5 * p, "avg#t": lambda p: 25 + 3 * p, "max#t": lambda p: 50 + p}
OVER = {"min#t": "min over ranks", "avg#t": "mean over ranks", "max#t": "max over ranks"}


def _exp(laws=LAWS, over=OVER):
    # measured p = 1..8, where 5 p <= 25 + 3 p <= 50 + p; at p = 64 the laws give 320 > 217 > 114
    rows = [{"p": p, "rep": r, "callpath": "solve", "metric": m, "value": float(f(p) * (1 + 0.001 * (r - 1)))}
            for m, f in laws.items() for p in (1.0, 2.0, 3.0, 4.0, 6.0, 8.0) for r in range(3)]
    metrics = [Metric(m, "s", "time", "inclusive", aggregate=over[m]) for m in laws]
    return Experiment(["p"], pd.DataFrame(rows), metrics, CallTree([("solve", None, "solve")]))


def _rows(ms, p):
    return {r["metric"]: r for r in ms.predict([{"p": p}], 0.9)}


def test_min_mean_max_that_cross_beyond_the_data_say_so():
    ms = perfcast.model(_exp())
    far = _rows(ms, 64.0)
    for m, f in LAWS.items():
        assert far[m]["value"] == pytest.approx(f(64.0), rel=1e-2)
    said = lambda r, other: [n for n in r["notes"] if other in n and "the two models disagree" in n]  # noqa: E731
    assert said(far["min#t"], "avg#t") and said(far["min#t"], "max#t")
    assert said(far["avg#t"], "max#t") and said(far["avg#t"], "min#t")
    assert said(far["max#t"], "min#t") and said(far["max#t"], "avg#t")
    assert {r["confidence"] for r in far.values()} == {"low"}
    # where the laws keep their order (measured p = 8): nothing said
    near = _rows(ms, 8.0)
    assert not any(said(r, o) for r in near.values() for o in LAWS)


def test_metrics_that_are_not_one_quantitys_aggregates_are_not_compared():
    # the same names without the over-ranks labels (three unrelated metrics), and a family of one
    ms = perfcast.model(_exp(over={m: "" for m in LAWS}))
    assert not any("the two models disagree" in n for r in _rows(ms, 64.0).values() for n in r["notes"])
    one = {"min#t": LAWS["min#t"], "max#u": LAWS["max#t"]}
    ms = perfcast.model(_exp(one, {"min#t": "min over ranks", "max#u": "max over ranks"}))
    assert not any("the two models disagree" in n for r in _rows(ms, 64.0).values() for n in r["notes"])

"""The one repetition rule (experiment.reduce_over_repetitions: a sparse profile's run that
measured the metric but lacks a callpath did not run it, a 0) at every place that combines
repetitions (issue 16, item 5), against hand calculations on a small hand-built sparse profile."""

import pandas as pd
import pytest

from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.projection.signatures import experiment_totals

P = (2, 4, 8)


# A profile per run (p = 2, 4, 8; repetitions 0 and 1; ranks 0 and 1), exclusive seconds: main 1
# on every rank of every run; main->x 12 on rank 0 of repetition 0 only (rank 1 and all of
# repetition 1 did not run it: a sparse profile has no row).
def _rows(points=P):
    rows = []
    for p in points:
        for rep in (0, 1):
            for r in (0, 1):
                rows.append((p, rep, r, "main", "time", 1.0))
                if rep == 0 and r == 0:
                    rows.append((p, rep, r, "main->x", "time", 12.0))
    return pd.DataFrame(rows, columns=["p", "rep", "rank", "callpath", "metric", "value"])


def _exp(meta=None, points=P) -> Experiment:
    return Experiment(["p"], _rows(points), [Metric("time", "s", "time", "exclusive")],
                      CallTree.from_paths(["main", "main->x"]), dict(meta or {}))


def _values(df):
    return {(float(p), str(c)): float(v) for p, c, v in zip(df["p"], df["callpath"], df["value"])}


def test_aggregate_over_repetitions_counts_an_absent_run_as_zero():
    exp = _exp()
    # per rank mean: repetition 0 (12 + 0) / 2 = 6, repetition 1 0 -> 3
    v = _values(exp.aggregate("mean", over=["rep", "rank"]))
    assert v == {**{(p, "main"): 1.0 for p in P}, **{(p, "main->x"): pytest.approx(3.0) for p in P}}
    # ranks summed first: repetition 0 12, repetition 1 0 -> mean 6, max 12, min 0
    red = exp.reduce_locations("sum")
    assert _values(red.aggregate("mean"))[(2.0, "main->x")] == pytest.approx(6.0)
    assert _values(red.aggregate("min"))[(2.0, "main->x")] == 0.0
    assert _values(red.aggregate("max"))[(2.0, "main->x")] == 12.0
    # a dense table's repetition without the callpath is missing: over the one present
    dense = _exp({"locations": "dense"}).reduce_locations("sum")
    assert _values(dense.aggregate("mean"))[(2.0, "main->x")] == pytest.approx(12.0)


def test_signature_totals_count_an_absent_run_as_zero():
    # whole program (exclusive, summed over callpaths and ranks): repetition 0 1 + 1 + 12 = 14,
    # repetition 1 1 + 1 = 2 -> mean 8 (not 2 + 12 = 14 averaging main->x over its one run)
    assert experiment_totals(_exp(), {"p": 4})["time"] == pytest.approx(8.0)

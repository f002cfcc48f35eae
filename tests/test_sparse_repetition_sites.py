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


def _flat(meta=None) -> Experiment:
    # flat timers (scope unknown), one value per run: main() 10 in repetition 0 and 20 in
    # repetition 1; io 18 in repetition 1 only (repetition 0 did not run it)
    rows = []
    for p in P:
        rows += [(p, 0, "main()", "time", 10.0), (p, 1, "main()", "time", 20.0), (p, 1, "io", "time", 18.0)]
    d = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value"])
    return Experiment(["p"], d, [Metric("time", "s", "time", "unknown")], CallTree.from_paths(["main()", "io"]),
                      dict(meta or {}))


def test_project_base_time_finds_the_whole_run_timer_over_absent_runs_as_zero():
    from perfcast.projection.apptime import base_time

    # means: main() (10 + 20) / 2 = 15, io (0 + 18) / 2 = 9: main() holds io at every point, so
    # the program's time is main()'s, 15 (io averaged over its one run, 18, would exceed main()'s
    # 15 and be taken for the whole run: 18)
    bt = base_time(_flat(), {"p": 4})
    assert bt.seconds == pytest.approx(15.0)
    assert "whole-run timer main()" in bt.ranks
    # listed repetitions (a shorter list is fewer measurements): io's mean over its one value, 18,
    # holds main()'s 15 at every point: io is the whole-run timer, 18
    bt = base_time(_flat({"repetitions": "listed"}), {"p": 4})
    assert bt.seconds == pytest.approx(18.0)
    assert "whole-run timer io" in bt.ranks


def test_apmt_measured_totals_and_kernel_values_count_an_absent_run_as_zero():
    from perfcast.apmt.model import _means, _point_values
    from perfcast.apmt.refine import measured_totals

    exp = _exp()
    # max over the ranks: repetition 0 12, repetition 1 0 (did not run main->x) -> 6
    m = measured_totals(exp, "main->x")
    assert dict(m) == {p: pytest.approx(6.0) for p in P}
    assert dict(measured_totals(exp, "main")) == {p: pytest.approx(1.0) for p in P}
    # the kernels' per-run values (APMT's counters and time samples): the same 0 run
    vals = _point_values(exp, ["time"], "max")
    assert dict(_means(vals, ["p"], "main->x", ["time"])) == {p: pytest.approx(6.0) for p in P}
    # listed repetitions: over the one run that has it
    listed = _exp({"repetitions": "listed"})
    assert dict(measured_totals(listed, "main->x")) == {p: pytest.approx(12.0) for p in P}


def test_report_metrics_table_counts_an_absent_run_as_zero():
    from perfcast.report.html import build_report

    rep = build_report(_exp())
    rows = {r["callpath"]: r["values"] for r in rep.metrics_table["rows"]}
    assert rep.metrics_table["at"] == {"p": 8.0} and rep.metrics_table["columns"] == ["time"]
    # at p = 8, time averaged over the ranks: repetition 0 (12 + 0) / 2 = 6, repetition 1 0 -> 3
    assert rows["main->x"] == [pytest.approx(3.0)]


def test_validation_measured_means_count_an_absent_run_as_zero():
    # correct before this change too (series_statistics applies the rule): kept as a guard
    from perfcast.analysis.validation import measured_means

    mm = measured_means(_exp(), ["p"], "mean")
    # time averaged over the ranks: repetition 0 (12 + 0) / 2 = 6, repetition 1 0 -> 3 over 2 runs
    assert {p: mm[("main->x", "time", (p,))] for p in map(float, P)} == {p: (pytest.approx(3.0), 2) for p in map(float, P)}


def test_aggregate_over_repetitions_per_rank_counts_an_absent_run_as_zero():
    exp = _exp()
    v = exp.aggregate("mean", over=["rep"])
    got = {(float(p), str(c), int(r)): float(x) for p, c, r, x in zip(v["p"], v["callpath"], v["rank"], v["value"])}
    # rank 0: main->x 12 in repetition 0, 0 in repetition 1 -> 6; rank 1 ran it in neither -> 0
    assert got == {**{(p, "main", r): 1.0 for p in P for r in (0, 1)},
                   **{(p, "main->x", 0): pytest.approx(6.0) for p in P}, **{(p, "main->x", 1): 0.0 for p in P}}
    # a dense table: over the one repetition of rank 0 that has it; no row for rank 1
    d = _exp({"locations": "dense"}).aggregate("mean", over=["rep"])
    x = d[(d["callpath"] == "main->x").to_numpy()]
    assert list(x["rank"]) == [0, 0, 0] and list(x["value"]) == [12.0, 12.0, 12.0]

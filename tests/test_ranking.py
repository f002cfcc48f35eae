"""Scalability-bug ranking (perfcast.analysis.ranking via ModelSet.rank): the per-process cost
order against hand calculations from the generating formulas, the growth order kept as an option,
and on real LULESH weak-scaling data the bug scaling-loss finds on top; aggregates over ranks
labelled from the reader to every output."""


import pandas as pd
import pytest

import perfcast
from perfcast import Experiment, Metric
from perfcast.analysis.ranking import NEGLIGIBLE
from perfcast.analysis.scaling_loss import scaling_loss
from perfcast.cli import main
from perfcast.errors import PerfcastError

from conftest import cli_items, cli_json

P = (2, 4, 8, 16, 32)
LAWS = {"a": lambda p: 100.0,            # large, constant
        "b": lambda p: 1e-3 * p ** 2,    # quadratic
        "c": lambda p: 1e-6 * p ** 3,    # cubic, small at the data
        "d": lambda p: 1e-6 * p}         # growing, but negligible


def _exp(laws=LAWS, metric=Metric("time", "s", "time", "exclusive")):
    rows = [{"p": p, "rep": r, "callpath": cp, "metric": metric.name, "value": f(p)}
            for cp, f in laws.items() for p in P for r in range(2)]
    return Experiment(["p"], pd.DataFrame(rows), [metric])


def _by_hand(laws, target):
    """Per-process increase from p=2 to the target (measured = the law at the measured points,
    the model = the law), as a share of the root (exclusive metric: the sum of all) at the target."""
    root = sum(f(target) for f in laws.values())
    inc = {cp: (f(32) - f(2) + f(target) - f(32)) / root for cp, f in laws.items()}
    big = {cp: max(f(2), f(32), f(target)) / root for cp, f in laws.items()}
    return inc, big


def test_cost_order_by_hand_at_the_default_target():
    ms = perfcast.model(_exp())
    for cp, f in LAWS.items():                      # the data are exact: the models are the laws
        assert ms[(cp, "time")].predict({"p": 64.0}) == pytest.approx(f(64), rel=1e-6)
    ranked = ms.rank()
    # default target: twice the largest measured process count
    assert ranked[0].at == {"p": 64.0} and ranked[0].first_at == {"p": 2.0}
    inc, big = _by_hand(LAWS, 64)
    # by hand: root = 100 + 4.096 + 0.262144 + 6.4e-5 = 104.358208; b: (4.096 - 0.004) / root =
    # 3.92%, c: (0.262144 - 8e-6) / root = 0.25%, a: 0, d: 6.2e-5 / root but 6.4e-5 / root is
    # below 0.1% of the root: negligible, after a although it grows
    assert inc["b"] == pytest.approx(4.092 / 104.358208) and big["d"] < NEGLIGIBLE <= big["c"]
    assert [r.callpath for r in ranked] == ["b", "c", "a", "d"]
    got = {r.callpath: r for r in ranked}
    for cp in LAWS:
        assert got[cp].increase == pytest.approx(inc[cp], rel=1e-6, abs=1e-12)
        assert got[cp].per_process == pytest.approx(LAWS[cp](64), rel=1e-6)
    assert [got[cp].significant for cp in "abcd"] == [True, True, True, False]


def test_cost_order_by_hand_far_out_and_the_growth_order():
    ms = perfcast.model(_exp())
    # at p=1024 the cubic overtakes the quadratic: c 1073.74 - 8e-6, b 1048.576 - 0.004
    inc, _ = _by_hand(LAWS, 1024)
    assert inc["c"] > inc["b"] > inc["a"] == 0
    assert [r.callpath for r in ms.rank({"p": 1024.0})] == ["c", "b", "a", "d"]
    # --by growth: asymptotic order first (p^3, p^2, p, 1) whatever the cost
    assert [r.callpath for r in ms.rank({"p": 64.0}, by="growth")] == ["c", "b", "d", "a"]
    with pytest.raises(PerfcastError, match="use cost or growth"):
        ms.rank(by="size")


def test_a_sum_over_ranks_is_ranked_per_process():
    """A metric summed over the ranks: e costs 10 s on every rank (sum 10 p), f 0.01 p per rank
    (sum 0.01 p^2).  Per process e does not grow at all."""
    laws = {"e": lambda p: 10.0 * p, "f": lambda p: 0.01 * p * p}
    exp = _exp(laws, Metric("total", "s", "time", "exclusive", aggregate="sum over ranks"))
    ms = perfcast.model(exp)
    assert ms.aggregates == {"total": "sum over ranks"} and ms.procs == "p"
    got = {r.callpath: r for r in ms.rank()}
    root = 10.0 + 0.01 * 64                            # per process at p = 64
    assert got["e"].per_process == pytest.approx(10.0, rel=1e-6)
    assert got["e"].increase == pytest.approx(0.0, abs=1e-6)
    # f per process: 0.02 at p=2, 0.32 at 32, 0.64 at 64
    assert got["f"].per_process_first == pytest.approx(0.02, rel=1e-9)
    assert got["f"].per_process_now == pytest.approx(0.32, rel=1e-9)
    assert got["f"].increase == pytest.approx((0.64 - 0.02) / root, rel=1e-6)
    assert [r.callpath for r in ms.rank()] == ["f", "e"]
    # the aggregate reaches --json and the tables' frame
    d = {r["callpath"]: r for r in ms.to_dict()}
    assert d["f"]["aggregate"] == "sum over ranks" and d["f"]["ranking"]["increase_share"] == pytest.approx(
        (0.64 - 0.02) / root, rel=1e-6)
    assert set(ms.to_frame()["aggregate"]) == {"sum over ranks"}
    assert {r["aggregate"] for r in ms.predict({"p": 64.0})} == {"sum over ranks"}


def test_per_rank_values_are_labelled_as_fitted():
    """Per-rank data: times are averaged over the ranks, counts summed (--ranks auto)."""
    rows = [{"p": p, "rep": 0, "rank": r, "callpath": "x", "metric": m, "value": 1.0}
            for p in P for r in range(p) for m in ("time", "calls")]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive"),
                                                 Metric("calls", "#", "count", "exclusive")])
    assert perfcast.model(exp).aggregates == {"time": "mean over ranks", "calls": "sum over ranks"}


# -- real data: LULESH weak scaling (Caliper spot, one value per run) -------------------------
AVG = "avg#inclusive#sum#time.duration"
ALLREDUCE = "main->lulesh.cycle->TimeIncrement->MPI_Allreduce"


@pytest.fixture(scope="module")
def lulesh(data_dir):
    d = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    exp = perfcast.io.load([d])
    return d, exp, perfcast.model(exp)


def test_lulesh_aggregates_labelled_from_the_metric_names(lulesh):
    _, exp, ms = lulesh
    want = {"sum#inclusive#sum#time.duration": "sum over ranks", "max#inclusive#sum#time.duration": "max over ranks",
            "min#inclusive#sum#time.duration": "min over ranks", AVG: "mean over ranks"}
    assert {n: m.aggregate for n, m in exp.metrics.items()} == want
    assert dict(ms.aggregates) == want


def test_lulesh_top_bug_is_what_scaling_loss_finds(lulesh):
    _, exp, ms = lulesh
    sl = scaling_loss(exp, "weak", AVG, pairs=[(27.0, 343.0)])
    first = sl["pairs"][0]["rows"][0]["path"]
    assert first == ALLREDUCE
    ranked = ms.rank()
    top = ranked[0]
    # the Allreduce or its parent chain (an inclusive metric: TimeIncrement holds it), per process
    assert ALLREDUCE.startswith(top.callpath) and top.metric == AVG
    pos = {(r.callpath, r.metric): r.rank for r in ranked}
    assert pos[(ALLREDUCE, AVG)] <= 2
    # its increase: measured 27 -> 343 (the avg over ranks read from the profiles), then the model
    d = exp.data
    v = d[(d.callpath == ALLREDUCE) & (d.metric == AVG)].set_index("jobsize")["value"]
    assert v[27.0] == pytest.approx(7.86, abs=0.01) and v[343.0] == pytest.approx(16.42, abs=0.01)
    r = next(x for x in ranked if (x.callpath, x.metric) == (ALLREDUCE, AVG))
    assert (r.per_process_first, r.per_process_now) == (pytest.approx(v[27.0]), pytest.approx(v[343.0]))
    # MPI_Comm_free (13 microseconds per process) ranks below it in every aggregate, and negligible
    free = [x for x in ranked if x.callpath == "MPI_Comm_free"]
    assert len(free) == 4 and all(x.rank > pos[(ALLREDUCE, AVG)] and not x.significant for x in free)
    # the asymptotic order (--by growth) is still there: it puts a sum over ranks first
    assert ms.rank(by="growth")[0].metric != AVG


def test_lulesh_cli_model_and_report_show_the_aggregate(lulesh, capsys, tmp_path):
    d, _, _ = lulesh
    assert main(["model", str(d), "--json", "--metric", AVG, "--metric", "sum#inclusive#sum#time.duration"]) == 0
    rows = cli_items(capsys.readouterr().out, "models")
    assert {r["metric"]: r["aggregate"] for r in rows} == {AVG: "mean over ranks",
                                                           "sum#inclusive#sum#time.duration": "sum over ranks"}
    assert ALLREDUCE.startswith(rows[0]["callpath"]) and rows[0]["ranking"]["by"] == "cost"
    assert main(["model", str(d), "--metric", AVG, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "mean over ranks" in out and "per-process cost increase" in out
    html = tmp_path / "r.html"
    assert main(["report", str(d), "-o", str(html), "--metric", "sum#inclusive#sum#time.duration", "--json"]) == 0
    rep = cli_items(capsys.readouterr().out, "report")[0]
    assert rep["aggregate"] == "sum over ranks" and rep["ranked_by"] == "cost"
    assert ALLREDUCE.startswith(rep["kernels"][0]["callpath"])
    text = html.read_text()
    assert "sum over ranks" in text and "divided by the process count" in text


def test_per_rank_times_and_bytes_are_both_first_tier():
    """Means over ranks are preferred only over other aggregates of the same quantity: per-rank
    bytes (summed over ranks when fitted) are another quantity than the times (averaged)."""
    rows = [{"p": p, "rep": 0, "rank": r, "callpath": cp, "metric": m, "value": v(p)}
            for p in P for r in range(p)
            for cp, m, v in (("t", "time", lambda p: 1.0), ("b", "bytes", lambda p: 1e3 * p))]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive"),
                                                 Metric("bytes", "bytes", "bytes", "exclusive")])
    ms = perfcast.model(exp)
    assert ms.aggregates == {"time": "mean over ranks", "bytes": "sum over ranks"}
    got = {r.callpath: r for r in ms.rank()}
    # bytes per process: the sum over ranks (1e3 p^2) divided by p, 1e3 p: +1e3 * (64 - 2) per
    # process, all of the root's growth (the only bytes callpath) -- ranked first
    assert got["b"].per_process == pytest.approx(64e3, rel=1e-6)
    assert got["b"].increase == pytest.approx(62e3 / 64e3, rel=1e-6)
    assert [r.callpath for r in ms.rank()] == ["b", "t"]


def test_descending_is_pythons_reverse_stable_sort():
    """The array sort of the rankings (np.lexsort) orders like sorted(..., reverse=True) of the
    per-series tuples, ties in their original order."""
    import numpy as np

    from perfcast.analysis.ranking import _descending

    rng = np.random.default_rng(3)
    S = 500
    ok = rng.random(S) < 0.7
    code = rng.integers(-1, 4, S)
    val = np.where(rng.random(S) < 0.2, float("-inf"), rng.choice([0.0, -0.0, 1.5, -2.0, 3.25], S))
    tuples = list(zip(ok.tolist(), code.tolist(), val.tolist()))
    assert _descending([ok, code, val]) == sorted(range(S), key=tuples.__getitem__, reverse=True)
    assert _descending([np.zeros(0, dtype=bool)]) == []


def test_measured_ends_are_the_measured_means_at_both_ends():
    """ModelSet.measured: per series the mean of the repetitions at the smallest and the largest
    process count (the data's own values); where the series lacks that point, None in a tidy
    table (absent = missing) and 0 in a profile (absent where the metric was measured = did not
    run)."""
    rows = [{"p": p, "rep": r, "callpath": cp, "metric": "time", "value": f(p) * (1 + 0.1 * r)}
            for cp, f in LAWS.items() for p in P for r in range(2) if not (cp == "d" and p == 2)]
    met = Metric("time", "s", "time", "exclusive")
    for exp, absent in ((Experiment.from_pandas(pd.DataFrame(rows), ["p"], [met]), None),
                        (Experiment(["p"], pd.DataFrame(rows), [met]), 0.0)):
        ms = perfcast.model(exp)
        for cp, f in LAWS.items():
            lo, hi = ms.measured[(cp, "time")]
            assert hi == pytest.approx(f(32) * 1.05, rel=1e-12)
            assert (lo == absent) if cp == "d" else lo == pytest.approx(f(2) * 1.05, rel=1e-12)
    # the arrays serve the series they were computed for, in that order, and nothing else
    assert ms.measured.arrays(list(ms.series)) is not None
    assert ms.measured.arrays(list(ms.series)[::-1]) is None


def test_a_routine_a_profile_did_not_run_at_the_first_point_cost_zero_there():
    """miniFE under the PMPI collector at p = 1, 2, 4: MPI_Irecv (halo exchange) runs from p = 2
    on (one rank has no neighbour), so the p = 1 profile holds no row of it -- it did not run
    there.  Generating formulas (calls summed over ranks): MPI_Allreduce 200 p, MPI_Irecv 100 (p - 1)
    from p = 2 on.  Its per-process cost at the first point is the measured 0, not its model's
    value at p = 1 (the sum model extrapolated below its data); the increase to p = 8 by hand:
    (measured 100 * 3 / 4 - 0 + (model at 8 / 8 - model at 4 / 4)) / the root at p = 8."""
    ps = (1.0, 2.0, 4.0)
    rows = [{"p": p, "rep": 0, "callpath": "MPI->MPI_Allreduce", "metric": "calls", "value": 200.0 * p}
            for p in ps]
    rows += [{"p": p, "rep": 0, "callpath": "MPI->MPI_Irecv", "metric": "calls", "value": 100.0 * (p - 1)}
             for p in ps if p > 1]
    rows += [{"p": p, "rep": 0, "callpath": "MPI", "metric": "calls",
              "value": 200.0 * p + 100.0 * (p - 1)} for p in ps]
    met = Metric("calls", "#", "count", "inclusive", aggregate="sum over ranks")
    sparse = Experiment(["p"], pd.DataFrame(rows), [met])            # a profile: absent = did not run
    ms = perfcast.model(sparse)
    irecv = ms[("MPI->MPI_Irecv", "calls")]
    got = {r.callpath: r for r in ms.rank({"p": 8.0})}["MPI->MPI_Irecv"]
    assert got.per_process_first == 0.0
    assert got.per_process_now == pytest.approx(100.0 * 3 / 4, rel=1e-9)
    # the root: MPI's per-process calls at p = 8 (at least each routine's own there)
    root = max(ms[(cp, "calls")].predict({"p": 8.0}) / 8 for cp in ("MPI", "MPI->MPI_Allreduce", "MPI->MPI_Irecv"))
    inc = (100.0 * 3 / 4 - 0.0 + irecv.predict({"p": 8.0}) / 8 - irecv.predict({"p": 4.0}) / 4) / root
    assert got.increase == pytest.approx(inc, rel=1e-6)
    # a tidy table's absent value is missing, not 0: the model's value stands in
    dense = Experiment.from_pandas(pd.DataFrame(rows), parameters=["p"], metrics=[met])
    got = {r.callpath: r for r in perfcast.model(dense).rank({"p": 8.0})}["MPI->MPI_Irecv"]
    assert got.per_process_first == pytest.approx(perfcast.model(dense)[("MPI->MPI_Irecv", "calls")].predict({"p": 1.0}))


def _halo(ps):
    """PMPI calls summed over ranks at ``ps`` x n = 64, 128, 256 (n changes nothing): MPI_Allreduce
    100 p, MPI_Irecv 200 (p - 1) -- none at p = 1 (one rank, no neighbour) -- and their parent MPI."""
    rows = []
    for p in ps:
        for n in (64.0, 128.0, 256.0):
            rows.append({"p": p, "n": n, "rep": 0, "callpath": "MPI->MPI_Allreduce", "metric": "calls", "value": 100.0 * p})
            if p > 1:
                rows.append({"p": p, "n": n, "rep": 0, "callpath": "MPI->MPI_Irecv", "metric": "calls",
                             "value": 200.0 * (p - 1)})
            rows.append({"p": p, "n": n, "rep": 0, "callpath": "MPI", "metric": "calls",
                         "value": 100.0 * p + 200.0 * (p - 1)})
    met = Metric("calls", "#", "count", "inclusive", aggregate="sum over ranks")
    return Experiment(["p", "n"], pd.DataFrame(rows), [met])


def test_the_default_target_stays_within_a_process_count_no_model_follows(capsys, tmp_path):
    """p = 1, 2 only: no line of >= 3 points along p, so no law in p can be checked (at most one
    power through the two values, fit.core's two-level law).  The default target (twice the largest
    p) would rank an increase to p = 4 that no checked model speaks for; it stays at the largest measured point, p = 2, n = 256, and the
    ranking is the measured one.  By hand, per process at p = 1: Allreduce 100, Irecv 0, MPI 100; at
    p = 2: Allreduce 100, Irecv 100, MPI 200 (the root): increases 0, 100 / 200, 100 / 200."""
    ms = perfcast.model(_halo((1.0, 2.0)))
    assert ms.unfollowed == ("p",)
    got = {r.callpath: r for r in ms.rank()}
    assert got["MPI->MPI_Irecv"].at == {"p": 2.0, "n": 256.0}
    assert got["MPI->MPI_Irecv"].increase == pytest.approx(100 / 200, rel=1e-9)
    assert got["MPI->MPI_Allreduce"].increase == pytest.approx(0.0, abs=1e-9)
    assert got["MPI"].increase == pytest.approx(100 / 200, rel=1e-9)
    # the table's heading and the JSON say why; a given target beyond p = 2 is said to be no model's
    from perfcast import store

    store.write(_halo((1.0, 2.0)), tmp_path / "h.perfcast")
    capsys.readouterr()
    assert main(["model", str(tmp_path / "h.perfcast"), "--json"]) == 0
    doc = cli_json(capsys.readouterr().out, "models")
    assert doc["ranking_target"]["at"] == {"p": 2.0, "n": 256.0} and doc["ranking_target"]["given"] is False
    assert doc["ranking_target"]["unfollowed"] == ["p"]
    assert {r["callpath"]: r["ranking"]["at"] for r in doc["items"]}["MPI->MPI_Irecv"] == {"p": 2.0, "n": 256.0}
    assert main(["model", str(tmp_path / "h.perfcast"), "--json", "--target", "p=4,n=256"]) == 0
    doc = cli_json(capsys.readouterr().out, "models")
    assert doc["ranking_target"]["given"] is True and doc["ranking_target"]["at"] == {"p": 4.0, "n": 256.0}
    # with p = 1, 2, 4 (a line of 3 along p) the models follow p: the default is p = 8, nothing said
    ms = perfcast.model(_halo((1.0, 2.0, 4.0)))
    assert ms.unfollowed == () and ms.rank()[0].at == {"p": 8.0, "n": 256.0}
    store.write(_halo((1.0, 2.0, 4.0)), tmp_path / "h4.perfcast")
    assert main(["model", str(tmp_path / "h4.perfcast"), "--json"]) == 0
    assert "ranking_target" not in cli_json(capsys.readouterr().out, "models")


def test_the_reports_target_beyond_a_process_count_without_a_line_of_three_is_said():
    """The report ranks at its own default target, 4x the largest measured p: on p = 1, 2 only (no
    line of >= 3 values along p) that lies beyond what any law in p can be checked on, and the
    report's notes say so, naming its default target, as model's heading does for a given --target;
    with p = 1, 2, 4 nothing is said."""
    from perfcast.report.html import ReportOptions, build_report

    def said(exp, target=None):
        rep = build_report(exp, ReportOptions(metric="calls", target=target))
        assert rep.target["p"] == (8.0 if target is None else target["p"])   # 4 x 2 by default
        return [n for n in rep.notes if "no line of >= 3 values" in n]

    notes = said(_halo((1.0, 2.0)))
    assert len(notes) == 1 and notes[0].startswith("The default target (4x the largest measured p)")
    notes = said(_halo((1.0, 2.0)), {"p": 8.0, "n": 256.0})
    assert len(notes) == 1 and notes[0].startswith("--target")
    rep = build_report(_halo((1.0, 2.0, 4.0)), ReportOptions(metric="calls"))
    assert rep.target["p"] == 16.0 and not [n for n in rep.notes if "no line of >= 3 values" in n]

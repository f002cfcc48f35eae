"""One rule for a callpath that some repetitions of a point lack (issue 16, item 5), the model
path and the views alike, against hand calculations: a sparse profile's run that measured the
metric but lacks the callpath did not run it (0); a dense tidy table's repetition without it is
missing (averaged over the repetitions present, and said); formats that list each callpath's
repetitions (Extra-P text) average the values listed.  And the views' total is the whole
program's (each rank's roots summed, then reduced over the ranks), for ``view`` and ``waste``."""

import json

import pandas as pd
import pytest

import perfcast
from perfcast.analysis.views import profile, scope_values, top_down
from perfcast.analysis.waste import waste
from perfcast.experiment import CallTree, Experiment, Metric, repetition_gaps
from perfcast.fit import series_statistics
from perfcast.io import load

P = (2, 4, 8)


def _stat(st, cp, metric="time"):
    st = st.assign(callpath=st["callpath"].astype(str), metric=st["metric"].astype(str))
    s = st[(st["callpath"] == cp) & (st["metric"] == metric)]
    return {float(p): (m, int(c), ss) for p, m, c, ss in zip(s["p"], s["mean"], s["count"], s["ssd"])}


# A profile per run (p = 2, 4, 8; repetitions 0 and 1; ranks 0 and 1), exclusive seconds: main 1
# on every rank of every run; main->x 12 on rank 0 of repetition 0 only (rank 1 and all of
# repetition 1 did not run it: a sparse profile has no row).  "wall" (inclusive, main) is taken in
# repetition 0 only, 20 on each rank: repetition 1 did not measure it, which is no 0.
def _rows():
    rows = []
    for p in P:
        for rep in (0, 1):
            for r in (0, 1):
                rows.append((p, rep, r, "main", "time", 1.0))
                if rep == 0:
                    rows.append((p, rep, r, "main", "wall", 20.0))
                    if r == 0:
                        rows.append((p, rep, r, "main->x", "time", 12.0))
    return pd.DataFrame(rows, columns=["p", "rep", "rank", "callpath", "metric", "value"])


def _exp(meta) -> Experiment:
    metrics = [Metric("time", "s", "time", "exclusive"), Metric("wall", "s", "time", "inclusive")]
    return Experiment(["p"], _rows(), metrics, CallTree.from_paths(["main", "main->x"]), meta)


def test_sparse_profile_absent_repetition_is_zero_in_model_and_views():
    exp = _exp({})
    st = series_statistics(exp, "mean")
    # per rank: repetition 0 (12 + 0) / 2 = 6, repetition 1 0 -> mean 3 over 2 runs, ssd 3^2 + 3^2
    assert _stat(st, "main->x") == {p: (pytest.approx(3.0), 2, pytest.approx(18.0)) for p in P}
    # wall: repetition 1 measured no wall time: its one run's value, not halved
    assert _stat(st, "main", "wall") == {p: (pytest.approx(20.0), 1, pytest.approx(0.0)) for p in P}
    for p in P:
        v = scope_values(exp.select(p=p), "time", ranks="mean").set_index("callpath")
        assert v.at["main->x", "exclusive"] == pytest.approx(3.0)
        # main inclusive per rank: repetition 0 (13 + 1) / 2 = 7, repetition 1 1 -> 4
        assert v.at["main", "inclusive"] == pytest.approx(4.0)
        s = scope_values(exp.select(p=p), "time", ranks="sum").set_index("callpath")
        # summed over ranks: repetition 0 12, repetition 1 0 -> 6; main 14 and 2 -> 8
        assert s.at["main->x", "exclusive"] == pytest.approx(6.0)
        assert s.at["main", "inclusive"] == pytest.approx(8.0)
    pred = {r["callpath"]: r["value"] for r in perfcast.model(exp, metrics=["time"], locations="mean")
            .predict({"p": 16})}
    assert pred["main->x"] == pytest.approx(3.0, rel=1e-9)
    assert repetition_gaps(exp) == []


def test_dense_table_absent_repetition_is_missing_in_model_and_views():
    exp = _exp({"locations": "dense"})
    st = series_statistics(exp, "mean")
    # over the one rank (0) and the one repetition (0) that have it
    assert _stat(st, "main->x") == {p: (pytest.approx(12.0), 1, pytest.approx(0.0)) for p in P}
    for p in P:
        v = scope_values(exp.select(p=p), "time", ranks="mean").set_index("callpath")
        assert v.at["main->x", "exclusive"] == pytest.approx(12.0)
        # main's inclusive value is known where nothing under it is missing: rank 0 of repetition 0
        assert v.at["main", "inclusive"] == pytest.approx(13.0)
        assert v.at["main", "exclusive"] == pytest.approx(1.0)
    assert repetition_gaps(exp) == [{"metric": "time", "callpath": "main->x", "missing": 3, "expected": 6,
                                     "points": 3, "files": []}]


def _tidy(tmp_path):
    """The issue's example: main->x lacks repetition 1 of p = 8 in a tidy table."""
    rows = ["p,rep,callpath,metric,scope,unit,value"]
    for p in (2, 4, 8, 16, 32):
        for rep in (0, 1):
            rows.append(f"{p},{rep},main,time,exclusive,s,{10 * p}")
            if not (p == 8 and rep == 1):
                rows.append(f"{p},{rep},main->x,time,exclusive,s,{p}")
    f = tmp_path / "t.csv"
    f.write_text("\n".join(rows) + "\n")
    return f


def test_tidy_table_view_and_model_agree_and_warn(tmp_path, capsys):
    from conftest import cli

    f = _tidy(tmp_path)
    exp = load([str(f)])
    assert _stat(series_statistics(exp), "main->x")[8.0][:2] == (pytest.approx(8.0), 1)
    gap = [{"metric": "time", "callpath": "main->x", "missing": 1, "expected": 2, "points": 1, "files": [str(f)]}]
    code, out, err = cli(capsys, "view", f, "--at", "p=8", "--json")
    assert code == 0, err
    item = json.loads(out)["items"][0]
    nodes = {n["path"]: n for n in item["nodes"]}
    # main->x: the one repetition's 8 (was 8 / 2); main's inclusive 80 + 8 (its repetition 1 is
    # unknown: a value under it is missing), exclusive 80
    assert (nodes["main->x"]["exclusive"], nodes["main"]["inclusive"], nodes["main"]["exclusive"]) == (8.0, 88.0, 80.0)
    assert item["total"] == 88.0 and item["missing_repetitions"] == gap
    code, out, err = cli(capsys, "model", f, "--json")
    assert code == 0, err
    assert json.loads(out)["missing_repetitions"] == gap
    code, out, err = cli(capsys, "model", f)
    assert code == 0 and "main->x time: 1 of 2 in " in err and "averaged over the repetitions present" in err


def test_listed_repetitions_are_not_zero_filled(tmp_path):
    """Extra-P text lists each region's values per point: a shorter list is fewer measurements."""
    f = tmp_path / "e.txt"
    f.write_text("PARAMETER p\nPOINTS (2) (4) (8)\n\nREGION a\nDATA 1 2 3\nDATA 2 4\nDATA 4 8 6\n"
                 "\nREGION b\nDATA 5\nDATA 7 9\nDATA 1 2 3\n")
    exp = load([str(f)])
    assert exp.meta.get("repetitions") == "listed"
    st = series_statistics(exp)
    means = {cp: {p: m for p, (m, c, _) in _stat(st, cp, str(exp.data["metric"].iloc[0])).items()} for cp in ("a", "b")}
    assert means == {"a": {2.0: pytest.approx(2.0), 4.0: pytest.approx(3.0), 8.0: pytest.approx(6.0)},
                     "b": {2.0: pytest.approx(5.0), 4.0: pytest.approx(8.0), 8.0: pytest.approx(2.0)}}
    assert repetition_gaps(exp) == []


# Two roots run by different ranks (inclusive): time main 10 (rank 0), 12 (rank 1), io 6 (rank 0
# only); flops main 20, 30, io 4 (rank 0).  Per rank whole program: time 16, 12; flops 24, 30.
def _two_roots():
    rows = [(0, "main", "time", 10.0), (1, "main", "time", 12.0), (0, "io", "time", 6.0),
            (0, "main", "flops", 20.0), (1, "main", "flops", 30.0), (0, "io", "flops", 4.0)]
    d = pd.DataFrame(rows, columns=["rank", "callpath", "metric", "value"]).assign(p=2.0, rep=0)
    return Experiment(["p"], d, [Metric("time", "s", "time", "inclusive"), Metric("flops", "", "count", "inclusive")],
                      CallTree.from_paths(["main", "io"]), {})


def test_view_total_and_percentages_are_of_the_whole_program():
    prof = profile(_two_roots(), "time", ranks="max")
    # the slowest rank's whole program: max(10 + 6, 12) = 16, not max(main) + max(io) = 18
    assert prof.total == pytest.approx(16.0)
    nodes = {n["path"]: n for n in top_down(prof)["nodes"]}
    assert nodes["io"]["inclusive_pct"] == pytest.approx(100.0 * 6 / 16)
    assert nodes["main"]["inclusive_pct"] == pytest.approx(100.0 * 12 / 16)
    # mean over the ranks: (16 + 12) / 2 = 14 = mean(main) 11 + io 6 / 2
    assert profile(_two_roots(), "time", ranks="mean").total == pytest.approx(14.0)


def test_waste_totals_are_of_the_whole_program():
    res = waste(_two_roots(), "flops", "time", peak=10.0, ranks="max")
    # work: max(24, 30) = 30; potential: max(16, 12) * 10 = 160; waste 130; efficiency 30 / 160
    assert res["total_work"] == pytest.approx(30.0)
    assert res["total_potential"] == pytest.approx(160.0)
    assert res["total_waste"] == pytest.approx(130.0)
    assert res["efficiency"] == pytest.approx(100.0 * 30 / 160)
    rows = {r["path"]: r for r in res["rows"]}
    # io: potential 6 * 10 = 60, work 4 -> waste 56, its share of 130
    assert rows["io"]["waste_inclusive_share"] == pytest.approx(100.0 * 56 / 130)


def test_sparse_profile_round_trips_through_a_tidy_csv(tmp_path):
    """to_pandas writes the profile's zeros (rank 1 of repetition 0, both ranks of repetition 1 for
    main->x), so the table read back as a tidy CSV (absent = missing) gives the same numbers."""
    exp = _exp({})
    frame = exp.to_pandas()
    zeros = frame[frame["value"] == 0.0]
    assert sorted(zip(zeros["p"], zeros["rep"], zeros["rank"], zeros["callpath"].astype(str))) == [
        (p, rep, r, "main->x") for p in P for rep, r in ((0, 1), (1, 0), (1, 1))]
    f = tmp_path / "t.csv"
    frame.assign(scope=frame["metric"].astype(str).map({"time": "exclusive", "wall": "inclusive"}),
                 unit="s").to_csv(f, index=False)
    back = load([str(f)])
    assert back.meta.get("locations") == "dense" and repetition_gaps(back) == []
    assert _stat(series_statistics(back, "mean"), "main->x") == _stat(series_statistics(exp, "mean"), "main->x")
    for p in P:
        va = scope_values(exp.select(p=p), "time", ranks="mean").set_index("callpath").sort_index()
        vb = scope_values(back.select(p=p), "time", ranks="mean").set_index("callpath").sort_index()
        assert vb[["inclusive", "exclusive"]].to_numpy().ravel().tolist() == pytest.approx(
            va[["inclusive", "exclusive"]].to_numpy().ravel().tolist())
        # main 4 inclusive, 1 exclusive; main->x 3 (the hand calculation above)
        assert va[["inclusive", "exclusive"]].to_numpy().ravel().tolist() == pytest.approx([4.0, 1.0, 3.0, 3.0])


def test_export_to_extrap_writes_a_profiles_absent_runs_as_zeros(tmp_path):
    """Exported as Extra-P text (ranks averaged), main->x lists 6 (repetition 0) and 0 (repetition
    1, which did not run it) at each point: Extra-P's mean of the list, 3, is perfcast's."""
    from perfcast.io.extrap import export

    f = tmp_path / "x.txt"
    export(_exp({}), f, "extrap-text", locations="mean")
    back = load([str(f)])
    assert back.meta.get("repetitions") == "listed"
    d = back.data[back.data["callpath"].astype(str) == "main->x"]
    assert sorted(zip(d["p"], d["value"])) == [(p, v) for p in P for v in (0.0, 6.0)]
    assert _stat(series_statistics(back), "main->x") == _stat(series_statistics(_exp({}), "mean"), "main->x")

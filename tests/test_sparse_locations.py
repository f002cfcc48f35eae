"""One rule for a callpath that some ranks of a sparse profile did not run (issue 16, item 5):
the model path, the views and Experiment.reduce_locations give the same per-rank value, against
hand calculations; a dense table keeps "absent = missing"; a sparse table written out with
Experiment.to_pandas and read back as a tidy CSV gives the same numbers."""

import json

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.analysis.views import scope_values
from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.fit import series_statistics
from perfcast.io import load

# Per rank at p (4 or 8 ranks), exclusive seconds: main 1 on every rank, main->solve 2 on every
# rank, main->io 2 * p on rank 0 only (it did not run elsewhere: a sparse profile has no row).
# The per-rank mean of main->io is 2 * p / p = 2, of main's inclusive time 1 + 2 + 2 = 5;
# rank 0 alone spends 1 + 2 + 2p.  "wall" is taken once per run, on rank 0 (10 * p): ranks that
# never recorded it are not zeros, its mean is rank 0's value.
P = (4, 8)


def _rows():
    rows = []
    for p in P:
        for r in range(p):
            rows.append((p, "main", "time", r, 1.0))
            rows.append((p, "main->solve", "time", r, 2.0))
            if r == 0:
                rows.append((p, "main->io", "time", r, 2.0 * p))
                rows.append((p, "main", "wall", r, 10.0 * p))
    return pd.DataFrame(rows, columns=["p", "callpath", "metric", "rank", "value"]).assign(rep=0)


def _sparse(meta=None) -> Experiment:
    tree = CallTree.from_paths(["main", "main->solve", "main->io"])
    metrics = [Metric("time", "s", "time", "exclusive"), Metric("wall", "s", "time", "inclusive")]
    return Experiment(["p"], _rows(), metrics, tree, meta or {})


def _stat(st, cp, metric="time"):
    st = st.assign(callpath=st["callpath"].astype(str), metric=st["metric"].astype(str))
    s = st[(st["callpath"] == cp) & (st["metric"] == metric)]
    return dict(zip(s["p"].astype(float), s["mean"]))


def test_model_and_views_agree_with_the_hand_calculation():
    exp = _sparse()
    st = series_statistics(exp, "auto")
    assert _stat(st, "main->io") == {4.0: pytest.approx(2.0), 8.0: pytest.approx(2.0)}
    assert _stat(st, "main->solve") == {4.0: pytest.approx(2.0), 8.0: pytest.approx(2.0)}
    assert _stat(st, "main", "wall") == {4.0: pytest.approx(40.0), 8.0: pytest.approx(80.0)}
    for p in P:
        v = scope_values(exp.select(p=p), "time", ranks="mean").set_index("callpath")
        assert v.at["main->io", "exclusive"] == pytest.approx(2.0)
        assert v.at["main", "inclusive"] == pytest.approx(5.0)
        # a child's per-rank mean never exceeds its parent's
        assert v.at["main->io", "inclusive"] <= v.at["main", "inclusive"]
    # the model set's prediction of the constant 2 (per rank), and of main's 5 inclusive
    ms = perfcast.model(exp, metrics=["time"])
    pred = {r["callpath"]: r["value"] for r in ms.predict({"p": 16})}
    assert pred["main->io"] == pytest.approx(2.0, rel=1e-9)
    assert pred["main->solve"] == pytest.approx(2.0, rel=1e-9)


@pytest.mark.parametrize("how, want", [
    # main->io at p = 4: rank 0 holds 8, ranks 1..3 did not run it (0)
    ("mean", 2.0), ("sum", 8.0), ("max", 8.0), ("min", 0.0), ("median", 0.0),
    ("std", float(np.std([8, 0, 0, 0], ddof=1))), ("count", 4.0)])
def test_every_rank_reduction_counts_the_absent_rank_as_zero(how, want):
    exp = _sparse().select(p=4)
    red = exp.reduce_locations(how).data
    got = red[(red["callpath"].astype(str) == "main->io") & (red["metric"].astype(str) == "time")]["value"]
    assert list(got) == [pytest.approx(want)]
    if how in ("mean", "sum", "max", "min", "median"):
        st = series_statistics(exp, how)
        assert _stat(st, "main->io") == {4.0: pytest.approx(want)}
    if how in ("mean", "sum", "max", "min"):
        v = scope_values(exp, "time", ranks=how).set_index("callpath")
        assert v.at["main->io", "exclusive"] == pytest.approx(want)


def test_dense_table_keeps_absent_as_missing():
    exp = _sparse({"locations": "dense"})
    st = series_statistics(exp, "auto")
    # over the one rank that has it
    assert _stat(st, "main->io") == {4.0: pytest.approx(8.0), 8.0: pytest.approx(16.0)}
    assert exp.select(p=4).reduce_locations("min").data.query("callpath == 'main->io'")["value"].tolist() == [8.0]


def test_a_users_frame_means_what_its_tidy_csv_means(tmp_path):
    # Experiment.from_pandas of the frame: main->io is missing at ranks 1..p-1 (over rank 0: 2p),
    # as the same frame written to a tidy CSV and read back; meta "sparse" makes it the profile (2)
    frame = _rows()
    exp = Experiment.from_pandas(frame, parameters=["p"])
    assert _stat(series_statistics(exp, "auto"), "main->io") == {4.0: pytest.approx(8.0), 8.0: pytest.approx(16.0)}
    f = tmp_path / "t.csv"
    frame.assign(scope="exclusive", unit="s").to_csv(f, index=False)
    assert _stat(series_statistics(load([str(f)]), "auto"), "main->io") == {4.0: 8.0, 8.0: 16.0}
    prof = Experiment.from_pandas(frame, parameters=["p"], meta={"locations": "sparse"})
    assert _stat(series_statistics(prof, "auto"), "main->io") == {4.0: pytest.approx(2.0), 8.0: pytest.approx(2.0)}


def test_sparse_table_round_trips_through_a_tidy_csv(tmp_path, capsys):
    exp = _sparse()
    frame = exp.to_pandas()
    # the zeros the profile means: main->io at ranks 1..p-1 of each point; "wall" gets none
    zeros = frame[frame["value"] == 0.0]
    assert sorted(zip(zeros["p"], zeros["rank"])) == [(4, r) for r in range(1, 4)] + [(8, r) for r in range(1, 8)]
    assert set(zeros["callpath"].astype(str)) == {"main->io"}
    f = tmp_path / "t.csv"
    frame.assign(scope=frame["metric"].astype(str).map({"time": "exclusive", "wall": "inclusive"}),
                 unit="s").to_csv(f, index=False)
    back = load([str(f)])
    assert back.meta.get("locations") == "dense"
    a = series_statistics(exp, "auto").astype({"callpath": str, "metric": str})
    b = series_statistics(back, "auto").astype({"callpath": str, "metric": str})
    key = ["p", "callpath", "metric"]
    m = a.merge(b, on=key, suffixes=("_a", "_b"))
    assert len(m) == len(a) == len(b)
    assert np.allclose(m["mean_a"], m["mean_b"], rtol=0, atol=1e-12)
    for p in P:
        va = scope_values(exp.select(p=p), "time", ranks="mean").set_index("callpath").sort_index()
        vb = scope_values(back.select(p=p), "time", ranks="mean").set_index("callpath").sort_index()
        assert np.allclose(va[["inclusive", "exclusive"]], vb[["inclusive", "exclusive"]], rtol=0, atol=1e-12)


# Two topmost callpaths run by different ranks (inclusive seconds): "main" on every rank,
# "io" on rank 0 only.  p = 2: main 10, 12; io 6.  p = 4: main 10, 12, 14, 16; io 8.
def _two_roots(meta):
    rows = []
    for p, main, io in ((2, (10, 12), 6), (4, (10, 12, 14, 16), 8)):
        rows += [(p, "main", "time", r, float(v)) for r, v in enumerate(main)]
        rows.append((p, "io", "time", 0, float(io)))
    d = pd.DataFrame(rows, columns=["p", "callpath", "metric", "rank", "value"]).assign(rep=0)
    return Experiment(["p"], d, [Metric("time", "s", "time", "inclusive")], CallTree.from_paths(["main", "io"]), meta)


@pytest.mark.parametrize("meta, ranks, want", [
    # sparse, slowest rank: rank 0 runs both (10 + 6 = 16 at p = 2; 10 + 8 = 18 at p = 4), not
    # max(main) + max(io) (12 + 6 = 18; 16 + 8 = 24)
    ({}, "max", {2: 16.0, 4: 18.0}),
    # sparse mean: (16 + 12) / 2 = 14; (18 + 12 + 14 + 16) / 4 = 15 (= mean(main) + io / p)
    ({}, "mean", {2: 14.0, 4: 15.0}),
    # dense: only rank 0 has a whole-program total (the others lack io: missing, not 0)
    ({"locations": "dense"}, "mean", {2: 16.0, 4: 18.0}),
])
def test_scaling_loss_total_is_projects_base_time(meta, ranks, want):
    from perfcast.analysis.scaling_loss import scaling_loss
    from perfcast.projection.apptime import base_time

    exp = _two_roots(meta)
    res = scaling_loss(exp, "weak", "time", "p", ranks=ranks)
    [pair] = res["pairs"]
    assert (pair["total_p"], pair["total_q"]) == (pytest.approx(want[2]), pytest.approx(want[4]))
    for p in (2, 4):
        assert base_time(exp, {"p": p}, "time", ranks).seconds == pytest.approx(want[p])
    # weak scaling: (T_q - T_p) / T_q
    assert pair["loss"] == pytest.approx((want[4] - want[2]) / want[4])
    if ranks == "max" or meta:
        # where the sum of the roots' own reductions differs, the output says so
        assert pair["notes"] and "different ranks" in pair["notes"][0]
    else:
        assert pair["notes"] == []


def test_gap_warning_names_the_file_of_the_point(tmp_path, capsys):
    """Two tidy files, the rank gap in the second: the warning and --json name that file only."""
    from conftest import cli

    a, b = tmp_path / "p4.csv", tmp_path / "p8.csv"
    a.write_text("p,callpath,metric,rank,value\n" + "".join(f"4,main,time,{r},10\n4,main->x,time,{r},2\n" for r in (0, 1)))
    b.write_text("p,callpath,metric,rank,value\n" + "".join(f"8,main,time,{r},10\n" for r in (0, 1)) + "8,main->x,time,0,2\n")
    code, out, err = cli(capsys, "model", a, b, "--ranks", "mean", "--json")
    assert code == 0, err
    assert json.loads(out)["missing_ranks"] == [{"metric": "time", "callpath": "main->x", "missing": 1,
                                                 "expected": 2, "points": 1, "files": [str(b)]}]
    code, out, err = cli(capsys, "model", a, b, "--ranks", "mean")
    assert code == 0 and f"main->x time: 1 of 2 in {b})" in err, err


@pytest.mark.parametrize("meta, want", [({}, 2.0), ({"locations": "dense"}, 8.0)])
def test_kernels_cost_per_rank_follows_the_rule(meta, want):
    """kernels' per-rank cost of a function: main->io at p = 4 is 8 s on rank 0 alone: 8 / 4 per
    rank in a profile (the other ranks did not run it), 8 over the one rank that has it in a tidy
    table (the others' values are missing)."""
    from perfcast.analysis.kernels import per_function

    pf = per_function(_sparse(meta), "time")
    row = pf[(pf["function"] == "io") & (pf["p"] == 4)]
    assert row["total"].tolist() == [8.0] and row["per_rank"].tolist() == [pytest.approx(want)]
    solve = pf[(pf["function"] == "solve") & (pf["p"] == 8)]
    assert solve["per_rank"].tolist() == [pytest.approx(2.0)]

import numpy as np
import pandas as pd
import pytest

from perfcast import CallTree, Experiment, Metric, PerfcastError, combine
from perfcast.io import at_point
from perfcast.io.paths import params_from_path, parse_name
from pathlib import Path

# main (1) -> a (2) -> b (3); main -> c (4): exclusive values, scaled by p
EXCL = {"main": 1.0, "main->a": 2.0, "main->a->b": 3.0, "main->c": 4.0}


def small(scope="exclusive", reps=2, ranks=False):
    tree = CallTree.from_paths(EXCL)
    rows = []
    for p in (2, 4):
        for rep in range(reps):
            for cp, v in EXCL.items():
                if ranks:
                    for r in range(p):
                        rows.append(dict(p=p, rep=rep, callpath=cp, metric="time", value=v * (r + 1), rank=r))
                else:
                    rows.append(dict(p=p, rep=rep, callpath=cp, metric="time", value=v * p + rep))
    return Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", scope)], tree)


def test_tree_links():
    t = CallTree.from_paths(["main->a->b", "main->c"])
    assert t.roots() == ["main"]
    assert t.children("main") == ["main->a", "main->c"]
    assert t.parent("main->a->b") == "main->a"
    assert t.descendants("main") == ["main->a", "main->a->b", "main->c"]
    assert t.depth("main->a->b") == 2
    assert t.name("main->a->b") == "b"


def test_tree_rejects_conflicting_parent():
    t = CallTree([("x", None, "x"), ("y", None, "y"), ("z", "x", "z")])
    with pytest.raises(PerfcastError, match="two parents"):
        t.add("z", "y", "z")


def test_inclusive_by_hand():
    inc = small().to_inclusive("time")
    assert inc.metrics["time"].scope == "inclusive"
    agg = inc.aggregate("mean").set_index(["p", "callpath"])["value"]
    # p=2, rep mean of (v*2 + rep) with rep 0,1 -> v*2 + 0.5 ; inclusive sums over the subtree
    assert agg[(2.0, "main")] == pytest.approx((1 + 2 + 3 + 4) * 2 + 4 * 0.5)
    assert agg[(2.0, "main->a")] == pytest.approx((2 + 3) * 2 + 2 * 0.5)
    assert agg[(4.0, "main->c")] == pytest.approx(4 * 4 + 0.5)


def test_exclusive_inverts_inclusive():
    e = small()
    back = e.to_inclusive("time").to_exclusive("time")
    assert back.equals(e)


def test_conversion_needs_right_scope():
    with pytest.raises(PerfcastError, match="needs exclusive"):
        small(scope="inclusive").to_inclusive("time")


def test_conversion_keeps_ranks_separate():
    inc = small(ranks=True).to_inclusive("time", name="time (I)")
    assert set(inc.metrics) == {"time", "time (I)"}
    row = inc.data[(inc.data.metric == "time (I)") & (inc.data.callpath == "main") & (inc.data.p == 4)
                   & (inc.data["rank"] == 3) & (inc.data.rep == 0)]
    assert row["value"].item() == pytest.approx(10 * 4)


def test_aggregate_statistics():
    e = small(reps=3)
    med = e.aggregate("median").set_index(["p", "callpath"])["value"]
    assert med[(4.0, "main->a")] == pytest.approx(2 * 4 + 1)
    mx = e.aggregate("max").set_index(["p", "callpath"])["value"]
    assert mx[(2.0, "main")] == pytest.approx(2 + 2)
    with pytest.raises(PerfcastError):
        e.aggregate("mode")


def test_reduce_locations_sums_ranks():
    e = small(ranks=True).reduce_locations("sum")
    assert not e.has_locations
    v = e.data[(e.data.p == 4) & (e.data.callpath == "main->c") & (e.data.rep == 0)]["value"].item()
    assert v == pytest.approx(4 * (1 + 2 + 3 + 4))


def test_select_glob_and_coords():
    e = small().select(callpath="main->a*", p=4)
    assert set(e.callpaths) == {"main->a", "main->a->b"}
    assert "main" in e.tree  # ancestors kept for the tree
    assert e.points()["p"].tolist() == [4.0]
    with pytest.raises(PerfcastError, match="no parameter"):
        small().select(q=1)


def test_select_literal_names_are_not_globs():
    tree = CallTree.from_paths(["main->a[0]", "main->a0"])
    rows = [dict(p=p, rep=0, callpath=cp, metric="time", value=1.0) for p in (2, 4) for cp in ("main->a[0]", "main->a0")]
    e = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], tree)
    # a callpath's own name is that callpath (as a metric's name is that metric), though as a glob
    # "a[0]" is the character class [0], which matches main->a0 only; a glob that is no name globs
    assert set(e.select(callpath="main->a[0]").callpaths) == {"main->a[0]"}
    assert set(e.select(callpath="main->a[01]").callpaths) == {"main->a0"}
    assert set(e.select(callpath=["main->a[0]"], literal=True).callpaths) == {"main->a[0]"}


def test_a_callpath_named_with_brackets_is_chosen_by_its_name(tmp_path, capsys):
    """LULESH -O2 under cachegrind names functions `[unknown]` and `IntegrateStressForElems(...)
    [clone .constprop.0]`; `predict --callpath NAME` with the name copied from `view` said "the
    selection is empty: no callpath matches ..." (the brackets taken as a glob's character class).
    Generating formula: 100 p at p = 1, 2, 4, 8, so 1600 at p = 16."""
    from perfcast.cli import main

    from conftest import cli_json

    name = "app->f(double (*) [8]) [clone .constprop.0]"
    path = tmp_path / "b.csv"
    path.write_text("p,callpath,metric,value\n" + "".join(f'{p},"{name}",Ir,{100 * p}\n' for p in (1, 2, 4, 8)))
    main(["predict", str(path), "--at", "p=16", "--callpath", name, "--json"])
    [row] = cli_json(capsys.readouterr().out, "predictions")["items"]
    assert row["callpath"] == name and row["value"] == pytest.approx(1600.0, rel=1e-9)


def test_metric_globs_select_and_model():
    """--metric takes globs as --callpath does: names matched by fnmatch, in the experiment's
    metric order; a metric whose name holds glob characters is itself; no match is an error."""
    tree = CallTree.from_paths(["main"])
    names = ["avg#time", "max#time", "PAPI_L2_TCM", "PAPI_FP_OPS", "a[1]"]
    rows = [dict(p=p, rep=0, callpath="main", metric=m, value=float(p * (i + 1)))
            for p in (2, 4, 8, 16, 32) for i, m in enumerate(names)]
    e = Experiment(["p"], pd.DataFrame(rows), [Metric(m, "", "count", "exclusive") for m in names], tree)
    assert e.metric_names("PAPI_*") == ["PAPI_L2_TCM", "PAPI_FP_OPS"]
    assert e.metric_names(["*#time", "PAPI_FP_OPS"]) == ["avg#time", "max#time", "PAPI_FP_OPS"]
    assert e.metric_names("a[1]") == ["a[1]"]          # a name before a glob
    assert set(e.select(metric="max#*").metrics) == {"max#time"}
    with pytest.raises(PerfcastError, match=r"no metric matches 'L3\*'; the experiment has: avg#time"):
        e.metric_names("L3*")
    import perfcast

    ms = perfcast.model(e, ["PAPI_*"])
    assert sorted(k[1] for k in ms.keys()) == ["PAPI_FP_OPS", "PAPI_L2_TCM"]
    # each is p times its position in the list: the law the fit recovers
    assert ms[("main", "PAPI_FP_OPS")].predict({"p": 64.0}) == pytest.approx(64.0 * 4)


def test_combine_makes_repetitions_never_collapses():
    e = small(reps=2)
    c = combine([e, e])
    assert c.repetitions()["repetitions"].tolist() == [4, 4]
    assert len(c.data) == 2 * len(e.data)


def test_combine_rejects_different_parameters():
    e = small()
    other = Experiment(["n"], e.data.rename(columns={"p": "n"}), e.metrics, e.tree)
    with pytest.raises(PerfcastError, match="parameters differ"):
        combine([e, other], ["a", "b"])


@pytest.mark.parametrize("bad,match", [
    (dict(value=np.nan), "non-finite"),
    (dict(value=np.inf), "non-finite"),
    (dict(p=np.nan), "non-finite"),
])
def test_validation_non_finite(bad, match):
    df = small().data.copy()
    for k, v in bad.items():
        df.loc[0, k] = v
    with pytest.raises(PerfcastError, match=match):
        Experiment(["p"], df, [Metric("time", "s", "time", "exclusive")], CallTree.from_paths(EXCL))


def test_validation_negative_counts():
    df = small().data.copy()
    df["metric"] = "visits"
    df.loc[3, "value"] = -1
    with pytest.raises(PerfcastError, match="negative"):
        Experiment(["p"], df, [Metric("visits", "", "count")], CallTree.from_paths(EXCL))


def test_validation_empty_and_reserved():
    with pytest.raises(PerfcastError, match="empty"):
        Experiment(["p"], small().data.iloc[:0], [Metric("time")])
    with pytest.raises(PerfcastError, match="reserved"):
        Experiment(["rank"], small().data.rename(columns={"p": "rank"}), [Metric("time")])


def test_at_point_and_path_names():
    e = small()
    one = Experiment([], e.data[e.data.p == 2].drop(columns="p"), e.metrics, e.tree)
    placed = at_point(one, {"x": 10, "y": 1})
    assert placed.parameters == ("x", "y")
    assert placed.points().values.tolist() == [[10.0, 1.0]]
    assert parse_name("mm.x10y1z1.r1") == ({"x": 10.0, "y": 1.0, "z": 1.0}, 1)
    assert parse_name("fastest.p16.size131072.r1") == ({"p": 16.0, "size": 131072.0}, 1)
    assert parse_name("profile.cubex") is None
    assert params_from_path(Path("set/mm.x25y1z1.r2/profile.cubex")) == ({"x": 25.0, "y": 1.0, "z": 1.0}, 2)


def test_summary_is_json_ready():
    import json

    s = small(ranks=True).summary()
    json.dumps(s, allow_nan=False)
    # p ranks at point p (small: ranks 0 .. p-1); the header's count is the whole experiment's
    assert s["points"] == [{"p": 2, "repetitions": 2, "locations": {"rank": 2}},
                           {"p": 4, "repetitions": 2, "locations": {"rank": 4}}]
    assert s["locations"] == {"rank": 4}
    assert all("repetitions" not in m for m in s["metrics"])


def test_summary_says_a_metric_measured_fewer_times():
    """A campaign's cachegrind counts are one run per point, its times three: the points' count (3)
    is not every metric's.  Built: Ir once at p=2 and p=4, time 3 times at p=2 and twice at p=4."""
    rows = [dict(p=2, rep=0, callpath="a", metric="Ir", value=1.0), dict(p=4, rep=0, callpath="a", metric="Ir", value=1.0)]
    rows += [dict(p=2, rep=r, callpath="a", metric="time", value=1.0) for r in range(3)]
    rows += [dict(p=4, rep=r, callpath="a", metric="time", value=1.0) for r in range(2)]
    s = Experiment(["p"], pd.DataFrame(rows), [Metric("Ir", "#", "count", "exclusive"),
                                               Metric("time", "s", "time", "exclusive")]).summary()
    assert s["points"] == [{"p": 2, "repetitions": 3}, {"p": 4, "repetitions": 2}]
    assert {m["name"]: m["repetitions"] for m in s["metrics"]} == {"Ir": 1, "time": [2, 3]}
    # metrics measured as often as each other, however that varies over the points: nothing per metric
    same = [dict(r, metric="Ir") for r in rows if r["metric"] == "time"] + [r for r in rows if r["metric"] == "time"]
    s = Experiment(["p"], pd.DataFrame(same), [Metric("Ir", "#", "count", "exclusive"),
                                               Metric("time", "s", "time", "exclusive")]).summary()
    assert s["points"] == [{"p": 2, "repetitions": 3}, {"p": 4, "repetitions": 2}]
    assert all("repetitions" not in m for m in s["metrics"])


def test_summary_per_point_locations_beside_a_parameter_named_threads():
    """The point's own parameter 'threads' stays its value; the threads holding values are under locations."""
    rows = [dict(threads=t, rep=0, callpath="a", metric="time", value=1.0, rank=0, thread=k)
            for t in (1, 4) for k in range(t)]
    s = Experiment(["threads"], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")]).summary()
    assert s["points"] == [{"threads": 1, "repetitions": 1, "locations": {"rank": 1, "thread": 1}},
                           {"threads": 4, "repetitions": 1, "locations": {"rank": 1, "thread": 4}}]


def test_inclusive_on_a_deep_chain_and_a_forest():
    # a 3000-deep chain: inclusive at depth k = number of nodes at depth >= k (each holds 1)
    frames = [f"f{i}" for i in range(3000)]
    tree = CallTree()
    path = tree.add_frames(frames)
    paths = tree.preorder()
    tree.add("other", None, "other")  # a second root with its own value
    df = pd.DataFrame({"callpath": paths + ["other"], "metric": "t", "value": 1.0})
    e = Experiment([], df, [Metric("t", "s", "time", "exclusive")], tree)
    inc = e.to_inclusive("t").data.set_index("callpath")["value"]
    assert inc["f0"] == 3000 and inc[path] == 1 and inc[paths[1000]] == 2000 and inc["other"] == 1
    assert e.to_inclusive("t").to_exclusive("t").equals(e)


def test_value_table_is_its_own_copy_and_drops_unused_categories():
    import numpy as np
    import pandas as pd

    from perfcast.experiment import Experiment, Metric
    df = pd.DataFrame({"p": [1.0, 2.0, 2.0], "rep": [0, 0, 1],
                       "callpath": pd.Categorical(["a", "a", "a"], categories=["a", "b"]),
                       "metric": pd.Categorical(["t", "t", "t"]), "value": [1.0, 2.0, 3.0]})
    e = Experiment(["p"], df, [Metric("t", kind="time")])
    assert list(e.data["callpath"].cat.categories) == ["a"]
    full = pd.DataFrame({"p": np.array([1.0, 2.0]), "callpath": pd.Categorical(["a", "b"]),
                         "metric": pd.Categorical(["t", "t"]), "value": np.array([5.0, 6.0])})
    e2 = Experiment(["p"], full, [Metric("t", kind="time")])
    full.loc[0, "value"] = -1.0
    full.loc[0, "p"] = 9.0
    full.loc[0, "callpath"] = "b"
    assert e2.data["value"].tolist() == [5.0, 6.0] and e2.data["p"].tolist() == [1.0, 2.0]
    assert e2.data["callpath"].astype(str).tolist() == ["a", "b"]


def test_summary_without_the_callpath_list():
    e = small()
    full, short = e.summary(), e.summary(callpaths=False)
    assert short["callpaths"] is None and len(full["callpaths"]) == len(EXCL)
    assert {k: v for k, v in short.items() if k != "callpaths"} == {k: v for k, v in full.items() if k != "callpaths"}


def _reference_points(rows, params):
    """Straightforward: a dict from coordinate tuple to the set of its reps, sorted by coordinate."""
    reps = {}
    for r in rows:
        reps.setdefault(tuple(float(r[p]) for p in params), set()).add(int(r.get("rep", 0)))
    coords = sorted(reps)
    pts = pd.DataFrame({p: np.array([c[i] for c in coords], dtype="float64") for i, p in enumerate(params)},
                       index=pd.RangeIndex(len(coords)))
    return pts, pts.assign(repetitions=np.array([len(reps[c]) for c in coords], dtype="int64"))


def _rows(rng, params, n, ranks=False):
    grids = {p: rng.choice([0.5, 1.0, 2.0, 3.25, 64.0, 1e6, -7.0], size=int(rng.integers(1, 5)), replace=False)
             for p in params}
    rows = []
    for _ in range(n):
        r = {p: float(rng.choice(grids[p])) for p in params}
        r.update(rep=int(rng.choice([0, 1, 2, 5])), callpath=str(rng.choice(["a", "b", "c"])), metric="t",
                 value=float(rng.random()))
        if ranks:
            r["rank"] = int(rng.integers(0, 4))
        rows.append(r)
    return rows


@pytest.mark.parametrize("params", [["p"], ["p", "n"], ["n", "p", "q"]])
@pytest.mark.parametrize("ranks", [False, True])
def test_points_and_repetitions_match_a_plain_computation(params, ranks):
    rng = np.random.default_rng(len(params) * 10 + ranks)
    for n in (1, 7, 200):
        rows = _rows(rng, params, n, ranks)
        e = Experiment(params, pd.DataFrame(rows), [Metric("t", kind="time")])
        pts, reps = _reference_points(rows, params)
        pd.testing.assert_frame_equal(e.points(), pts)
        pd.testing.assert_frame_equal(e.repetitions(), reps)


def test_repetitions_by_hand_uneven_and_without_parameters():
    rows = [dict(p=4.0, n=1.5, rep=0), dict(p=4.0, n=1.5, rep=3), dict(p=4.0, n=1.5, rep=3),
            dict(p=2.0, n=10.0, rep=1), dict(p=4.0, n=0.25, rep=0), dict(p=2.0, n=10.0, rep=0)]
    df = pd.DataFrame([{**r, "callpath": "a", "metric": "t", "value": 1.0} for r in rows])
    e = Experiment(["p", "n"], df, [Metric("t", kind="time")])
    assert e.repetitions().values.tolist() == [[2.0, 10.0, 2], [4.0, 0.25, 1], [4.0, 1.5, 2]]
    assert e.repetitions()["repetitions"].dtype == np.int64
    assert e.points().values.tolist() == [[2.0, 10.0], [4.0, 0.25], [4.0, 1.5]]
    e0 = Experiment([], df.drop(columns=["p", "n"]), [Metric("t", kind="time")])
    assert e0.repetitions()["repetitions"].tolist() == [3]
    assert e0.points().shape == (1, 0)


def test_repetitions_with_more_combinations_than_rows():
    # 300 distinct values in each of 3 parameters: 2.7e7 combinations, more than a mark each is worth
    rng = np.random.default_rng(3)
    rows = [dict(a=float(i), b=float(rng.integers(0, 10**6)), c=float(-i), rep=i % 3) for i in range(300)]
    rows += [dict(rows[5], rep=7), dict(rows[5], rep=7)]
    df = pd.DataFrame([{**r, "callpath": "a", "metric": "t", "value": 1.0} for r in rows])
    e = Experiment(["a", "b", "c"], df, [Metric("t", kind="time")])
    pts, reps = _reference_points(rows, ["a", "b", "c"])
    pd.testing.assert_frame_equal(e.points(), pts)
    pd.testing.assert_frame_equal(e.repetitions(), reps)


def test_thread_values_alone_are_locations_not_repetitions():
    """An experiment with per-thread values and no rank column: the threads are reduced like ranks
    (counts summed, times averaged) before modelling, not taken as repetitions.  Generating
    formulas: each of 2 threads does 10 p operations (total 20 p) and takes 2 + 3p resp. 4 + 3p s."""
    import perfcast

    rows = []
    for p in (1, 2, 4, 8, 16):
        for rep in (0, 1):
            for th, t0 in ((0, 2.0), (1, 4.0)):
                rows.append((p, rep, th, "main", "time", t0 + 3 * p))
                rows.append((p, rep, th, "main", "ops", 10.0 * p))
    exp = Experiment(["p"], pd.DataFrame(rows, columns=["p", "rep", "thread", "callpath", "metric", "value"]),
                     [Metric("time", "s", "time"), Metric("ops", "#", "count")])
    assert exp.has_locations
    pred = {r["metric"]: r["value"] for r in perfcast.model(exp).predict({"p": 32})}
    assert pred["ops"] == pytest.approx(20 * 32, rel=1e-9)
    assert pred["time"] == pytest.approx(3 + 3 * 32, rel=1e-9)


def test_selecting_a_value_no_run_has_names_it_and_the_measured_ones():
    # small(): p = 2 and 4 ("the selection is empty" said neither)
    with pytest.raises(PerfcastError, match=r"^no run with p=3; measured p: 2, 4$"):
        small().select(p=3)
    assert small().select(p=[3, 4]).points()["p"].tolist() == [4.0]

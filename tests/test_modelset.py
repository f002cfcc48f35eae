"""The one model set behind every output (perfcast.model -> ModelSet), checked against the laws that
generated the data and against the CLI's own --json (the API reproduces the commands)."""

import math

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast import Experiment, Metric
from perfcast.cli import main

from conftest import cli_items

LAWS = {"main->solve": lambda p: 2.0 + 3.0 * p,                 # time, linear
        "main->reduce": lambda p: 0.5 * math.log2(p) + 1.0,     # time, logarithmic
        "main->setup": lambda p: 4.0}                            # time, constant
P = (2, 4, 8, 16, 32)


def _experiment(noise=(0.0, 0.001, -0.001)):
    rows = [{"p": p, "rep": r, "callpath": cp, "metric": "time", "value": f(p) * (1 + e)}
            for cp, f in LAWS.items() for p in P for r, e in enumerate(noise)]
    rows += [{"p": p, "rep": 0, "callpath": "main", "metric": "time", "value": sum(f(p) for f in LAWS.values())}
             for p in P]
    # value lists per callpath (main measured once, its children three times), not runs that lacked main
    return Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")],
                      meta={"repetitions": "listed"})


def test_subpackages_and_model_are_reachable_from_the_top():
    assert perfcast.fit.FitOptions is not None and perfcast.io.load is not None
    assert perfcast.model is perfcast.modelset.model and perfcast.ModelSet is perfcast.modelset.ModelSet


def test_predictions_follow_the_generating_laws_and_the_printed_formula():
    ms = perfcast.model(_experiment())
    assert set(ms.keys()) == {(cp, "time") for cp in [*LAWS, "main"]}
    rows = ms.predict([{"p": 256.0}, {"p": 1024.0}])
    assert len(rows) == 2 * len(ms)
    for r in rows:
        if r["callpath"] in LAWS:
            assert r["value"] == pytest.approx(LAWS[r["callpath"]](r["at"]["p"]), rel=1e-3)
        # the formula printed is the function that gave the value (4 significant digits printed)
        shown = eval(r["formula"].replace("^", "**"), {"log2": math.log2, "p": r["at"]["p"]})
        assert shown == pytest.approx(r["value"], rel=2e-3)
        assert r["unit"] == "s" and r["lower"] <= r["value"] <= r["upper"]
        if r["callpath"] in LAWS:
            assert not r["clipped"]
        else:
            # main: one run per point of 7 + 3p + 0.5 log2(p), fitted by a one-term law; its own
            # leave-largest-out check (one held-out point) makes the interval wide, but it holds
            # the truth
            truth = sum(f(r["at"]["p"]) for f in LAWS.values())
            assert r["lower"] <= truth <= r["upper"]
    # the data are nearly exact and the laws are in the search space: high confidence at 8x
    conf = {r["callpath"]: r["confidence"] for r in rows if r["at"]["p"] == 256.0}
    assert conf["main->solve"] == "high" and conf["main->setup"] == "high"


def test_rank_frame_and_dict_agree_with_the_cli(tmp_path, capsys):
    exp = _experiment()
    ms = perfcast.model(exp)
    ranked = ms.rank({"p": 1024.0})
    # growth first: the linear ones (solve and main, which contains it), then log, then constant
    assert [r.callpath for r in ranked][-2:] == ["main->reduce", "main->setup"]
    frame = ms.to_frame({"p": 1024.0})
    assert list(frame["callpath"]) == [r.callpath for r in ranked]
    assert frame.set_index("callpath").loc["main->solve", "value"] == pytest.approx(2 + 3 * 1024, rel=1e-3)
    # the API reproduces `perfcast model --json` and `perfcast predict --json`
    f = tmp_path / "e.csv"
    exp.data.to_csv(f, index=False)
    capsys.readouterr()
    assert main(["model", str(f), "--target", "p=1024", "--json"]) == 0
    cli_rows = cli_items(capsys.readouterr().out, "models")
    api_rows = perfcast.model(perfcast.io.load([f])).to_dict({"p": 1024.0})
    assert [r["callpath"] for r in cli_rows] == [r["callpath"] for r in api_rows]
    assert [r["value"] for r in cli_rows] == pytest.approx([r["value"] for r in api_rows])
    assert main(["predict", str(f), "--at", "p=1024", "--json"]) == 0
    cli_pred = cli_items(capsys.readouterr().out, "predictions")
    api_pred = perfcast.model(perfcast.io.load([f])).predict({"p": 1024.0})
    assert [(r["callpath"], r["value"], r["confidence"]) for r in cli_pred] == \
        [(r["callpath"], pytest.approx(r["value"]), r["confidence"]) for r in api_pred]


def test_a_clipped_bound_is_marked_and_lowers_the_confidence():
    # a noisy count at three points extrapolated 64x: the interval reaches below zero
    rng = np.random.default_rng(3)
    rows = [{"p": p, "rep": r, "callpath": "k", "metric": "bytes", "value": 1000 * (1 + rng.uniform(-0.4, 0.4))}
            for p in (2, 4, 8) for r in range(3)]
    ms = perfcast.model(Experiment(["p"], pd.DataFrame(rows), [Metric("bytes", "B", "bytes", "exclusive")]))
    r = ms.predict({"p": 512.0})[0]
    assert r["value"] >= 0
    if r["clipped"]:
        assert r["lower"] == 0.0 and r["confidence"] == "low" and "interval clipped at 0" in r["notes"]
    # two points: a law through them, flagged low whatever its interval
    two = perfcast.model(Experiment(["p"], pd.DataFrame(
        [{"p": p, "rep": 0, "callpath": "k", "metric": "time", "value": 2.0 * p} for p in (4, 8)]),
        [Metric("time", "s", "time", "exclusive")]))
    t = two.predict({"p": 64.0})[0]
    assert t["value"] == pytest.approx(128.0, rel=1e-9) and t["confidence"] == "low"


def test_one_point_and_no_parameter_are_errors():
    one = Experiment(["p"], pd.DataFrame([{"p": 4, "rep": 0, "callpath": "k", "metric": "time", "value": 1.0}]),
                     [Metric("time", "s", "time", "exclusive")])
    with pytest.raises(perfcast.PerfcastError, match="at least 2 points"):
        perfcast.model(one)


def test_a_child_predicted_above_its_parent_is_flagged():
    # inclusive times: the child grows like p^2 and passes its slowly growing parent beyond p = 32
    rows = [{"p": p, "rep": r, "callpath": cp, "metric": "time", "value": v * (1 + e)}
            for p in (2, 4, 8, 16, 32) for r, e in enumerate((0.0, 0.001))
            for cp, v in (("main", 2000.0 + 10 * p), ("main->kernel", 1.0 * p * p))]
    ms = perfcast.model(Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")]))
    at = {r["callpath"]: r for r in ms.predict({"p": 128.0})}
    assert at["main->kernel"]["value"] == pytest.approx(128.0 ** 2, rel=1e-3)   # 16384 > 2000 + 1280
    assert at["main->kernel"]["confidence"] == "low"
    assert any("above its parent main" in n for n in at["main->kernel"]["notes"])
    assert not any("above its parent" in n for n in at["main"]["notes"])
    inside = {r["callpath"]: r for r in ms.predict({"p": 16.0})}              # 256 < 2160: consistent
    assert not any("above its parent" in n for n in inside["main->kernel"]["notes"])


def test_confidence_rule_by_hand():
    from perfcast.modelset import confidence

    assert confidence(100.0, 95.0, 105.0, []) == "high"          # half-width 5%
    assert confidence(100.0, 70.0, 130.0, []) == "medium"        # 30%
    assert confidence(100.0, 20.0, 180.0, []) == "low"           # 80%
    assert confidence(100.0, 95.0, 105.0, ["poor fit: ..."]) == "low"
    assert confidence(100.0, None, None, []) == "low"            # no interval
    assert confidence(0.0, 0.0, 0.0, []) == "high"               # an exact zero (no bytes sent)
    assert confidence(0.0, -1.0, 1.0, []) == "low"


def test_a_prediction_steeper_than_any_measured_step_is_low_confidence():
    """Bytes per rank of a halo exchange on a 2-D process grid (jacobi at p = 2, 4, 8: 102400,
    102400, 128000; measured 102400 at p = 16): three deterministic points fit exactly by a steep
    law.  The measured log-log slopes are 0 and log2(1.25) = 0.32; a prediction at 16 that rises
    faster than p^(0.32 + 1) is flagged low with a note.  A p^3 law measured as p^3 is not."""
    rows = [{"p": p, "rep": 0, "callpath": "halo", "metric": "bytes", "value": v}
            for p, v in ((2, 102400.0), (4, 102400.0), (8, 128000.0))]
    rows += [{"p": p, "rep": 0, "callpath": "cube", "metric": "bytes", "value": 5.0 * p ** 3} for p in (2, 4, 8)]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("bytes", "B", "bytes", "exclusive")])
    ms = perfcast.model(exp)
    assert ms.slopes[("halo", "bytes")]["p"] == pytest.approx((0.0, math.log2(1.25)), abs=1e-12)
    by = {r["callpath"]: r for r in ms.predict({"p": 16.0})}
    halo, cube = by["halo"], by["cube"]
    rise = math.log(halo["value"] / float(ms["halo", "bytes"].predict({"p": 8.0}))) / math.log(2)
    assert rise > math.log2(1.25) + 1
    assert halo["confidence"] == "low" and any("faster than any measured step" in n for n in halo["notes"])
    assert cube["value"] == pytest.approx(5.0 * 16 ** 3, rel=1e-6)
    assert not any("faster than any measured step" in n for n in cube["notes"])


def test_process_parameter_only_on_evidence(data_dir):
    """The only parameter of Extra-P's CUBE matrix-multiply set is the matrix size x (each run
    has the same ranks): it is not taken for the process count, so counts summed over locations
    are not divided by it (that made growing series show negative increases).  A parameter that
    equals the number of measured ranks at every point is the process count, whatever its name."""
    from perfcast.io import load

    exp = load([data_dir / "extrap/cubeset/single_parameter"])
    ms = perfcast.model(exp, ["PAPI_FP_OPS"])
    assert ms.procs is None
    by = {r.callpath: r for r in ms.rank()}
    # measured FP operations of mat_mul: 2 at x = 1, 4028 at x = 2000 (the files' values)
    assert by["main->mat_mul"].per_process_first == 2.0 and by["main->mat_mul"].per_process_now == 4028.0
    assert by["main->mat_mul"].increase > 0 and by["main->init_mat"].increase > 0
    rows = [{"size": s, "rank": r, "rep": 0, "callpath": "main", "metric": "time", "value": 1.0 + s}
            for s in (2, 4, 8) for r in range(s)]
    exp2 = Experiment(["size"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")])
    assert perfcast.model(exp2).procs == "size"


@pytest.mark.parametrize("categorical", [True, False])
def test_measured_ends_by_name_whatever_the_table_holds(categorical):
    """The mean at the lower and the upper point per series, by (callpath, metric) names: a series
    the table lacks, or lacks at one end, gets None there; a table with one row twice (per point
    and series) answers with the last, as a dict would."""
    from perfcast.fit.series import SeriesModel
    from perfcast.modelset import _measured_ends

    st = pd.DataFrame({"p": [2.0, 8.0, 2.0, 8.0, 8.0],
                       "callpath": ["a", "a", "b", "c", "c"], "metric": ["t", "t", "t", "t", "t"],
                       "mean": [1.0, 4.0, 2.0, 5.0, 6.0]})
    if categorical:
        st["callpath"] = pd.Categorical(st["callpath"], categories=["c", "b", "a", "z"])
        st["metric"] = st["metric"].astype("category")
    m = _experiment_model()
    series = [SeriesModel(cp, mt, m) for cp, mt in (("c", "t"), ("a", "t"), ("b", "t"), ("a", "x"), ("q", "t"))]
    ends = _measured_ends(st, series, {"p": 2.0}, {"p": 8.0})
    assert [ends[(s.callpath, s.metric)] for s in series] == [(None, 6.0), (1.0, 4.0), (2.0, None), (None, None),
                                                              (None, None)]


def _experiment_model():
    return perfcast.model(_experiment()).series[0].model


def test_wide_means_is_pandas_pivot():
    # ground truth: pandas' pivot_table of the same rows -- one and two parameters, callpaths not
    # measured everywhere, unobserved categories, and the inputs the fast path leaves to pandas
    # (a NaN mean, a (point, callpath) twice, string callpaths)
    import numpy as np
    import pandas as pd

    from perfcast.analysis.views import Wide
    from perfcast.modelset import _wide_means
    from perfcast.table import Columns

    rng = np.random.default_rng(11)
    for params in (["p"], ["p", "n"]):
        rows = [dict({q: float(v) for q, v in zip(params, pt)}, callpath=f"c{c}", mean=float(rng.lognormal()))
                for pt in ([(2 ** i, 10 * j) for i in range(1, 6) for j in range(1, 4)] if len(params) == 2
                           else [(2 ** i,) for i in range(1, 7)])
                for c in range(40) if rng.random() < 0.8]
        d = pd.DataFrame(rows)
        d["callpath"] = pd.Categorical(d["callpath"], categories=[f"c{c}" for c in range(45)][::-1])
        variants = [d, d.assign(mean=d["mean"].where(d.index != 3)), pd.concat([d, d.iloc[:2]]),
                    d.assign(callpath=d["callpath"].astype(str)), d.assign(p=d["p"].astype("float32"))]
        for k, v in enumerate(variants):
            want = v.pivot_table(index=params, columns="callpath", values="mean", observed=True)
            got = _wide_means(Columns.from_pandas(v.reset_index(drop=True)), params)
            if isinstance(got, Wide):    # placed by codes (no pandas): the pivot's points, names, values
                assert k in (0, 4)
                assert got.points == want.index.tolist()
                assert got.callpaths == list(want.columns)
                assert np.array_equal(got.values, want.to_numpy(), equal_nan=True)
                continue
            assert k in (1, 2, 3)
            assert got.index.equals(want.index) and list(got.index.names) == list(want.index.names)
            assert got.index.dtypes.tolist() == want.index.dtypes.tolist() if len(params) > 1 else got.index.dtype == want.index.dtype
            assert list(got.columns) == list(want.columns)
            assert np.array_equal(got.to_numpy(), want.to_numpy(), equal_nan=True)

"""Thicket and Hatchet objects in memory <-> perfcast (perfcast.io.from_thicket / to_thicket /
from_hatchet), against Thicket's and Hatchet's own values on the shared LULESH data.

These tests need Thicket, whose pins conflict with the main test venv (llnl-thicket holds pandas
below 3), so they live outside tests/ and run in their own venv: ``make test`` builds
``.venv-thicket`` from requirements-thicket.lock and runs this directory there.  Thicket is
imported unconditionally: a venv without it fails here, it never skips.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import thicket as th
from hatchet import GraphFrame

import perfcast
from perfcast.errors import PerfcastError
from perfcast.experiment import SEP, Experiment
from perfcast.io import ReadOptions
from perfcast.io.caliper import UNANNOTATED
from perfcast.shared_data import shared_data_dir

DATA = shared_data_dir() / "thicket"
CALI = DATA / "lulesh_weak_scaling_cali"
ENSEMBLE = DATA / "lulesh_user_ensemble.json"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"shared data missing: {path} (set PERFCAST_SHARED_DATA)", pytrace=False)
    return path


def _cali_files() -> list[str]:
    files = sorted(str(f) for f in _need(CALI).glob("*.cali"))
    assert len(files) == 5
    return files


def _thicket_from_cali(native: bool = False) -> th.Thicket:
    return th.Thicket.from_caliperreader(_cali_files(), disable_tqdm=True, native=native)


def _thicket_from_ensemble() -> th.Thicket:
    doc = json.loads(_need(ENSEMBLE).read_text())
    # the file was written by an older Thicket that did not store the profile index's name; the
    # current Thicket.from_json needs it (it is "profile", the key the file uses)
    doc.setdefault("profile_idx_name", "profile")
    return th.Thicket.from_json(json.dumps(doc))


def _callpath(node) -> str:
    """The node's frames from its root, by Hatchet's own parent links."""
    names = []
    while node is not None:
        names.append(node.frame["name"])
        node = node.parents[0] if node.parents else None
    return SEP.join(reversed(names))


def _thicket_values(tk) -> dict:
    """(callpath, profile, metric) -> value of every non-missing cell of Thicket's dataframe."""
    metrics = list(tk.exc_metrics) + list(tk.inc_metrics)
    out = {}
    for (node, profile), row in tk.dataframe[metrics].iterrows():
        for m in metrics:
            if not pd.isna(row[m]):
                out[(_callpath(node), str(profile), m)] = float(row[m])
    return out


def _experiment_values(exp, profile_of) -> dict:
    """(callpath, profile, metric) -> value of the experiment, the profile found by the run label
    (``profile_of``: label -> profile id) of each (point, rep) in meta['caliper']['runs']."""
    runs = {(tuple(float(r["point"][p]) for p in exp.parameters), r["rep"]): profile_of[r["file"]]
            for r in exp.meta["caliper"]["runs"]}
    out = {}
    for r in exp.data.itertuples():
        key = (tuple(getattr(r, p) for p in exp.parameters), r.rep)
        out[(str(r.callpath), runs[key], str(r.metric))] = r.value
    return out


def _labels(tk) -> dict:
    """run label (the profile's file) -> profile id, as text (ids read from JSON are text)"""
    return {str(label): str(pid) for pid, label in tk.profile_mapping.items()}


# ----------------------------------------------------------------------------------------------
# (1) Thicket in memory -> perfcast -> Thicket: Thicket's own values, cell by cell


@pytest.mark.parametrize("native", [False, True])
def test_cali_thicket_values_and_points(native):
    tk = _thicket_from_cali(native)
    exp = perfcast.io.from_thicket(tk)
    assert exp.meta["format"] == "thicket"
    # the parameter is chosen from the metadata as for the .cali files themselves
    assert exp.parameters == ("jobsize",)
    run_of = {r["file"]: r for r in exp.meta["caliper"]["runs"]}
    for pid, label in tk.profile_mapping.items():
        assert run_of[label]["point"] == {"jobsize": int(tk.metadata.loc[pid, "jobsize"])}
    want = _thicket_values(tk)
    got = _experiment_values(exp, _labels(tk))
    assert got == want
    # 45 nodes x 5 profiles x 4 metrics, every cell measured
    assert len(want) == len(exp.data) == tk.dataframe[tk.exc_metrics + tk.inc_metrics].notna().sum().sum() == 900
    # scopes as the Thicket lists them (Hatchet lists the aliased Caliper metrics as exclusive)
    for m in tk.inc_metrics:
        assert exp.metrics[m].scope == "inclusive"
    for m in tk.exc_metrics:
        assert exp.metrics[m].scope == "exclusive"
    assert (tk.inc_metrics if native else tk.exc_metrics) and not (tk.exc_metrics if native else tk.inc_metrics)
    # the call tree is the Thicket's graph
    assert sorted(exp.tree) == sorted(_callpath(n) for n in tk.graph.traverse())


def test_cali_thicket_round_trip():
    tk = _thicket_from_cali()
    back = perfcast.io.from_thicket(tk).to_thicket()
    assert isinstance(back, th.Thicket)
    # the same profiles (Thicket's hashes of the same files), graph and values
    assert dict(back.profile_mapping) == dict(tk.profile_mapping)
    assert sorted(back.profile) == sorted(tk.profile)
    assert back.graph == tk.graph
    assert _thicket_values(back) == _thicket_values(tk)
    assert sorted(back.exc_metrics) == sorted(tk.exc_metrics) and back.inc_metrics == []
    # the same dataframe shape: every node in every profile, NaN where a run lacks the node
    assert len(back.dataframe) == len(tk.dataframe) == 45 * 5
    # the metadata table: every column and value of the original
    assert set(back.metadata.columns) == set(tk.metadata.columns)
    for pid in tk.profile:
        for col in tk.metadata.columns:
            assert back.metadata.loc[pid, col] == tk.metadata.loc[pid, col], (pid, col)
    # and Thicket's own analysis runs on it with Thicket's results
    metric = "Avg time/rank"
    th.stats.mean(tk, columns=[metric])
    th.stats.mean(back, columns=[metric])
    mean_of = lambda t: {_callpath(n): v for n, v in t.statsframe.dataframe[f"{metric}_mean"].items()}  # noqa: E731
    a, b = mean_of(tk), mean_of(back)
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-12, nan_ok=True)


def test_ensemble_thicket_values_and_round_trip():
    tk = _thicket_from_ensemble()
    exp = perfcast.io.from_thicket(tk)
    assert exp.parameters == ("jobsize", "problem_size", "threads")
    assert len(tk.profile) == 172
    want = _thicket_values(tk)
    assert _experiment_values(exp, _labels(tk)) == want
    assert len(want) == len(exp.data) == 13112
    for m in tk.inc_metrics:
        assert exp.metrics[m].scope == "inclusive"
    back = exp.to_thicket()
    labels_back, labels_tk = _labels(back), _labels(tk)
    assert labels_back.keys() == labels_tk.keys()
    # values per (callpath, run, metric), the run named by its file

    def by_run(vals, labels):
        label_of = {pid: label for label, pid in labels.items()}
        return {(c, label_of[p], m): x for (c, p, m), x in vals.items()}

    assert by_run(_thicket_values(back), labels_back) == by_run(want, labels_tk)
    for label, pid in labels_tk.items():
        mine, theirs = back.metadata.loc[int(labels_back[label])], tk.metadata.loc[int(pid)]
        # the parameters as numbers (the file writes threads as text, "1"), the rest as it was
        for col in ("jobsize", "problem_size", "threads"):
            assert float(mine[col]) == float(theirs[col])
        assert mine["compiler"] == theirs["compiler"]


# ----------------------------------------------------------------------------------------------
# (2) the Experiment from a Thicket equals the one perfcast's own readers give for the same files


def test_ensemble_thicket_equals_perfcast_json_reader():
    exp = perfcast.io.from_thicket(_thicket_from_ensemble())
    own = perfcast.io.load([ENSEMBLE])
    assert exp.parameters == own.parameters
    assert exp.metrics == own.metrics
    assert exp.tree == own.tree
    key = [*exp.parameters, "rep", "callpath", "metric"]
    a = exp.data.astype({"callpath": str, "metric": str}).sort_values(key).reset_index(drop=True)
    b = own.data.astype({"callpath": str, "metric": str}).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert exp.meta["caliper"]["runs"] == own.meta["caliper"]["runs"]


def test_cali_thicket_equals_perfcast_cali_reader():
    # Caliper's own metric names (native=True): the names perfcast's .cali reader uses
    exp = perfcast.io.from_thicket(_thicket_from_cali(native=True))
    own = perfcast.io.load([CALI])
    assert exp.parameters == own.parameters == ("jobsize",)
    assert set(exp.metrics) == set(own.metrics)
    for name, m in own.metrics.items():
        # Thicket carries no units or aliases; kind, scope and the over-ranks aggregate agree
        assert (exp.metrics[name].kind, exp.metrics[name].scope, exp.metrics[name].aggregate) == \
            (m.kind, m.scope, m.aggregate)

    def table(e):
        return {(r.jobsize, str(r.callpath), str(r.metric)): r.value for r in e.data.itertuples()}

    mine, theirs = table(exp), table(own)
    # perfcast's reader keeps the records outside every region under (unannotated); Hatchet drops them
    extra = {k for k in theirs if k not in mine}
    assert extra and all(k[1] == UNANNOTATED for k in extra)
    assert set(mine) == set(theirs) - extra
    for k, v in mine.items():
        assert v == pytest.approx(theirs[k], rel=1e-12), k
    assert set(exp.tree) == set(own.tree) - {UNANNOTATED}


def test_perfcast_experiment_to_thicket_and_back():
    """A perfcast campaign -> Thicket -> perfcast: the same experiment; Thicket's dataframe holds
    exactly the experiment's values (the CLI's reader gives the experiment)."""
    own = perfcast.io.load([CALI])
    tk = own.to_thicket()
    assert tk.inc_metrics == list(own.metrics) and tk.exc_metrics == []
    assert list(tk.metadata["jobsize"]) == [27, 64, 125, 216, 343]
    # every value of the experiment is in Thicket's dataframe, nothing else is
    vals = _thicket_values(tk)
    assert len(vals) == len(own.data)
    by_label = _labels(tk)
    assert _experiment_values(own, by_label) == vals
    back = Experiment.from_thicket(tk, parameters=["jobsize"])
    key = ["jobsize", "rep", "callpath", "metric"]
    a = back.data.astype({"callpath": str, "metric": str}).sort_values(key).reset_index(drop=True)
    b = own.data.astype({"callpath": str, "metric": str}).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert back.tree == own.tree


# ----------------------------------------------------------------------------------------------
# Hatchet GraphFrame in memory


def test_hatchet_graphframe_values(tmp_path):
    f = _cali_files()[0]
    gf = GraphFrame.from_caliperreader(f)
    exp = perfcast.io.from_hatchet(gf)
    assert exp.parameters == ()
    metrics = gf.exc_metrics + gf.inc_metrics
    want = {(_callpath(n), m): float(row[m]) for n, row in gf.dataframe[metrics].iterrows()
            for m in metrics if not pd.isna(row[m])}
    got = {(str(r.callpath), str(r.metric)): r.value for r in exp.data.itertuples()}
    assert got == want and len(got) == 4 * 45 - int(gf.dataframe[metrics].isna().sum().sum())
    # and the same as perfcast's reader of the GraphFrame's own to_json file
    j = tmp_path / "gf.json"
    j.write_text(gf.to_json())
    own = perfcast.io.load([j])
    assert {(str(r.callpath), str(r.metric)): r.value for r in own.data.itertuples()} == got
    assert own.metrics == exp.metrics and own.tree == exp.tree


# ----------------------------------------------------------------------------------------------
# (3) errors


def test_thicket_without_the_metadata_is_a_clear_error():
    tk = _thicket_from_cali()
    label = tk.profile_mapping[tk.profile[0]]
    tk.metadata.loc[tk.profile[0], "jobsize"] = None
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(tk, parameters=["jobsize"])
    assert ei.value.where == f"{label}: jobsize" and "jobsize" in ei.value.message
    tk.metadata = tk.metadata.drop(columns=["jobsize"])
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(tk, parameters=["jobsize"])
    assert "no global metadata 'jobsize'" in ei.value.message and "mpi.world.size" in ei.value.message
    tk.metadata = tk.metadata.iloc[:, :0]
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(tk)
    assert ei.value.where == "metadata" and "no columns" in ei.value.message


def test_not_a_thicket_is_a_clear_error():
    gf = GraphFrame.from_caliperreader(_cali_files()[0])
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(gf)
    assert "from_hatchet" in ei.value.message
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(object())
    assert "not a Thicket" in ei.value.message
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_hatchet(pd.DataFrame({"a": [1.0]}))
    assert "not a Hatchet GraphFrame" in ei.value.message


def test_per_rank_experiment_to_thicket_keeps_the_ranks():
    own = perfcast.io.load([CALI])
    df = own.data.copy()
    # two ranks with known values: rank 1 holds twice rank 0's value
    df = pd.concat([df.assign(rank=0), df.assign(rank=1, value=2 * df["value"])], ignore_index=True)
    exp = own.replace(data=df)
    tk = exp.to_thicket()
    assert tk.dataframe.index.names == ["node", "profile", "rank"]
    m = "avg#inclusive#sum#time.duration"
    x = tk.dataframe[m].xs(1, level="rank") / tk.dataframe[m].xs(0, level="rank")
    assert np.allclose(x.dropna().to_numpy(), 2.0)


def test_sparse_caliper_rank_mean_is_hatchets():
    """A callpath that some ranks of a Caliper profile did not run: Hatchet's Caliper reader adds a
    0 row for every rank without the node, and its mean over ranks (drop_index_levels) is the
    per-rank value that perfcast's model statistics and views give (issue 16 item 5: one rule).
    SW4's CUDA activity profile, 4 ranks: GPU kernels and host regions recorded on some ranks only."""
    from perfcast.analysis.views import scope_values
    from perfcast.fit import series_statistics

    f = _need(shared_data_dir() / "formats" / "caliper" / "caliper-sw4-cuda-activity-cali"
              / "caliper_cuda_activity_profile.cali")
    gf = GraphFrame.from_caliperreader(str(f))
    df = gf.dataframe.reset_index()
    df["cp"] = [SEP.join(str(x.frame.get("name")) for x in n.path()) for n in df["node"]]
    per_node = df.groupby("cp").size()
    assert set(per_node) <= {4, 8}     # every node at every rank (zeros added), one name twice
    gf.drop_index_levels(function=np.mean)
    hm = gf.dataframe.assign(cp=[SEP.join(str(x.frame.get("name")) for x in n.path())
                                 for n in gf.dataframe.index])
    hm = hm[hm["cp"].isin(per_node[per_node == 4].index)].set_index("cp")

    exp = perfcast.io.load([str(f)])
    raw = exp.data.assign(callpath=exp.data["callpath"].astype(str))
    st = series_statistics(exp, "auto").astype({"callpath": str, "metric": str})
    compared = gapped = 0
    for col, metric in (("time", "scale#sum#cupti.host.duration"), ("time (gpu)", "scale#cupti.activity.duration")):
        ours = st[st["metric"] == metric].set_index("callpath")["mean"]
        view = scope_values(exp, metric, ranks="mean").set_index("callpath")["exclusive"]
        ranks = raw[raw["metric"] == metric].groupby("callpath")["rank"].nunique()
        both = ours.index.intersection(hm.index)
        assert len(both) >= 150
        np.testing.assert_allclose(ours[both].to_numpy(), hm.loc[both, col].to_numpy(), rtol=1e-12, atol=0)
        np.testing.assert_allclose(view[both].to_numpy(), hm.loc[both, col].to_numpy(), rtol=1e-12, atol=0)
        compared += len(both)
        gapped += int((ranks.reindex(both) < 4).sum())
    assert compared >= 500 and gapped >= 50   # many series were run by some ranks only

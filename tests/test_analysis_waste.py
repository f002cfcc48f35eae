"""Waste and efficiency: by hand on a built profile, and FP efficiency of the BLAST CUBE profile
(Blue Gene/Q, 64 ranks) against the pycubexr CSV ground truth."""

import pandas as pd
import pytest

from perfcast import CallTree, Experiment, Metric, PerfcastError
from perfcast.analysis.waste import time_factor, waste
from perfcast.io import load

from test_analysis_views import cube_paths

# exclusive cycles and FP operations per rank (2 ranks: rank 1 doubles rank 0)
CYC = {"main": 100.0, "main->loop1": 900.0, "main->loop2": 100.0, "main->copy": 50.0}
OPS = {"main": 0.0, "main->loop1": 1800.0, "main->loop2": 48.0, "main->copy": 0.0}


def fp_profile():
    rows = []
    for r in (0, 1):
        for cp in CYC:
            rows.append(dict(callpath=cp, metric="cycles", value=CYC[cp] * (r + 1), rank=r))
            rows.append(dict(callpath=cp, metric="fp_ops", value=OPS[cp] * (r + 1), rank=r))
    return Experiment([], pd.DataFrame(rows), [Metric("cycles", "", "count", "exclusive"),
                                               Metric("fp_ops", "", "count", "exclusive")], CallTree.from_paths(CYC))


def test_fp_waste_by_hand():
    # the seed's example: a loop with 90 % of the time at 50 % of peak wastes more than a loop
    # with 10 % of the time at 12 % of peak; peak 4 operations per cycle
    res = waste(fp_profile(), "fp_ops", "cycles", 4.0)
    rows = {r["path"]: r for r in res["rows"]}
    l1, l2, cp = rows["main->loop1"], rows["main->loop2"], rows["main->copy"]
    # ranks summed: cycles x3, ops x3
    assert l1["waste_exclusive"] == pytest.approx(3 * (900 * 4 - 1800))
    assert l1["efficiency_exclusive"] == pytest.approx(50.0)
    assert l2["waste_exclusive"] == pytest.approx(3 * (100 * 4 - 48))
    assert l2["efficiency_exclusive"] == pytest.approx(12.0)
    assert cp["efficiency_exclusive"] == 0.0 and cp["waste_exclusive"] == pytest.approx(3 * 200)
    main = rows["main"]
    assert main["waste_inclusive"] == pytest.approx(3 * (1150 * 4 - 1848)) == pytest.approx(res["total_waste"])
    assert main["efficiency_inclusive"] == pytest.approx(100 * 1848 / (1150 * 4))
    assert res["efficiency"] == pytest.approx(100 * 1848 / (1150 * 4))
    # ranked by waste: loop1 first although loop2 is less efficient
    assert [r["path"] for r in res["rows"]] == ["main->loop1", "main", "main->loop2", "main->copy"]
    assert l1["waste_exclusive_share"] == pytest.approx(100 * 1800 / (4600 - 1848))
    # threshold on the share of total waste (inclusive)
    assert {r["path"] for r in waste(fp_profile(), "fp_ops", "cycles", 4.0, threshold=20)["rows"]} == {
        "main", "main->loop1"}
    # the mean over ranks scales every cost by 1/2 and leaves efficiencies unchanged
    mean = {r["path"]: r for r in waste(fp_profile(), "fp_ops", "cycles", 4.0, ranks="mean")["rows"]}
    assert mean["main->loop1"]["waste_exclusive"] == pytest.approx(1.5 * 1800)
    assert mean["main->loop2"]["efficiency_exclusive"] == pytest.approx(12.0)


def test_bandwidth_units_and_errors():
    d = pd.DataFrame({"callpath": ["k", "k"], "metric": ["bytes", "time"], "value": [4e9, 500.0]})
    e = Experiment([], d, [Metric("bytes", "B", "bytes", "exclusive"), Metric("time", "ms", "time", "exclusive")])
    assert time_factor(e, "time") == 1e-3
    res = waste(e, "bytes", "time", 10e9, resource_factor=time_factor(e, "time"))
    (row,) = res["rows"]
    assert row["potential_exclusive"] == pytest.approx(5e9)
    assert row["waste_exclusive"] == pytest.approx(1e9)
    assert row["efficiency_exclusive"] == pytest.approx(80.0)
    with pytest.raises(PerfcastError, match="not a time unit"):
        time_factor(e, "bytes")
    with pytest.raises(PerfcastError, match="positive"):
        waste(e, "bytes", "time", 0.0)
    with pytest.raises(PerfcastError, match="no metric 'flops'"):
        waste(e, "flops", "time", 1.0)


def test_blast_fp_efficiency_against_ground_truth(data_dir):
    d = data_dir / "formats" / "cube" / "blast.p64.r1"
    paths = cube_paths(d / "profile.cubex")
    peak = 12.8e9  # Blue Gene/Q core: 1.6 GHz x 8 flops per cycle
    res = waste(load([d / "profile.cubex"]), "PAPI_FP_OPS", "time", peak)
    rows = {r["path"]: r for r in res["rows"]}
    checked = 0
    for scope, csv in (("exclusive", "excl.csv"), ("inclusive", "incl.csv")):
        t = pd.read_csv(d / csv, skipinitialspace=True).groupby("Cnode ID")[["time", "PAPI_FP_OPS"]].sum()
        for cnode, (time, ops) in t.iterrows():
            path = paths[cnode]
            if time <= 1e-3:  # the CSV rounds times to 6 significant digits
                continue
            r = rows[path]
            assert r[f"efficiency_{scope}"] == pytest.approx(100 * ops / (time * peak), rel=1e-4)
            assert r[f"waste_{scope}"] == pytest.approx(time * peak - ops, rel=1e-4)
            checked += 1
    assert checked > 30
    # the ranking by exclusive waste, from the ground truth
    t = pd.read_csv(d / "excl.csv", skipinitialspace=True).groupby("Cnode ID")[["time", "PAPI_FP_OPS"]].sum()
    want = (t["time"] * peak - t["PAPI_FP_OPS"]).sort_values(ascending=False)
    assert [r["path"] for r in res["rows"][:5]] == [paths[i] for i in want.index[:5]]

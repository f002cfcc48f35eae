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


def test_no_resource_and_above_peak_have_no_waste_and_shares_add_up():
    # exclusive cycles and operations per rank (rank 1 doubles rank 0, so a sum over ranks is x3);
    # peak 4 operations per cycle.  loop2 does 500 in 100 cycles: 5 per cycle, above the peak;
    # helper has operations but no cycles row: no resource measured
    cyc = {"main": 100.0, "main->loop1": 900.0, "main->loop2": 100.0}
    ops = {"main": 0.0, "main->loop1": 1800.0, "main->loop2": 500.0, "main->helper": 30.0}
    rows = []
    for r in (0, 1):
        rows += [dict(callpath=cp, metric="cycles", value=v * (r + 1), rank=r) for cp, v in cyc.items()]
        rows += [dict(callpath=cp, metric="fp_ops", value=v * (r + 1), rank=r) for cp, v in ops.items()]
    e = Experiment([], pd.DataFrame(rows), [Metric("cycles", "", "count", "exclusive"),
                                            Metric("fp_ops", "", "count", "exclusive")], CallTree.from_paths(ops))
    res = waste(e, "fp_ops", "cycles", 4.0)
    got = {r["path"]: r for r in res["rows"]}
    loop2, helper = got["main->loop2"], got["main->helper"]
    assert loop2["status_exclusive"] == loop2["status_inclusive"] == "above peak"
    assert loop2["waste_exclusive"] is None and loop2["waste_exclusive_share"] is None
    assert loop2["efficiency_exclusive"] == pytest.approx(100 * 500 / 400)      # kept: by how much
    assert helper["status_exclusive"] == "no resource"
    assert helper["waste_exclusive"] is None and helper["efficiency_exclusive"] is None
    # defined exclusive wastes: main 3 * 400, loop1 3 * (3600 - 1800); shares of their sum, 3 * 2200
    assert got["main"]["waste_exclusive"] == pytest.approx(3 * 400)
    assert res["waste_attributed"] == pytest.approx(3 * 2200)
    assert got["main->loop1"]["waste_exclusive_share"] == pytest.approx(100 * 1800 / 2200)
    assert got["main"]["waste_exclusive_share"] == pytest.approx(100 * 400 / 2200)
    assert sum(r["waste_exclusive_share"] or 0 for r in res["rows"]) == pytest.approx(100.0)
    # inclusive: the whole program, 3 * (1100 * 4 - 2330) with every operation counted
    assert res["total_waste"] == pytest.approx(3 * (4400 - 2330))
    assert got["main"]["waste_inclusive"] == pytest.approx(res["total_waste"])
    assert got["main"]["waste_inclusive_share"] == pytest.approx(100.0)
    assert not any(r["waste_exclusive"] is not None and r["waste_exclusive"] < 0 for r in res["rows"])
    # ranked: defined wastes first (largest first), then above the peak, then no resource
    assert [r["path"] for r in res["rows"]] == ["main->loop1", "main", "main->loop2", "main->helper"]
    assert len(res["notes"]) == 3


def test_whole_run_timer_is_not_a_scope_of_its_own():
    # a campaign's inclusive times: app the wall time, the timers total (the solve loop), a and b
    # (inside it); operations in a and b only; peak 1 operation per second.  total >= a, b at
    # every point: the whole-run timer of the timers, so app's exclusive time is 20 - 4 - 1.5
    t = {1: {"app": 20.0, "app->total": 6.0, "app->a": 4.0, "app->b": 1.5},
         2: {"app": 30.0, "app->total": 8.0, "app->a": 5.0, "app->b": 2.0}}
    ops = {"app->a": 2.0, "app->b": 1.0}
    rows = [dict(p=p, callpath=cp, metric="time", value=v) for p, tv in t.items() for cp, v in tv.items()]
    rows += [dict(p=p, callpath=cp, metric="ops", value=v) for p in t for cp, v in ops.items()]
    e = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive"),
                                               Metric("ops", "", "count", "exclusive")], CallTree.from_paths(t[1]))
    res = waste(e, "ops", "time", 1.0, at={"p": 1})
    got = {r["path"]: r for r in res["rows"]}
    assert res["whole_run_timers"] == ["app->total"] and "app->total" not in got
    assert got["app"]["potential_exclusive"] == pytest.approx(14.5)
    assert got["app->a"]["waste_exclusive"] == pytest.approx(2.0)
    assert got["app->b"]["waste_exclusive"] == pytest.approx(0.5)
    assert res["total_waste"] == pytest.approx(20 - 3) == pytest.approx(res["waste_attributed"])
    assert got["app"]["waste_exclusive_share"] == pytest.approx(100 * 14.5 / 17)
    # without the whole-run timer's rule its potential (6) would have counted a's and b's again
    # and app's own time would have been 20 - 11.5
    assert sum(r["potential_exclusive"] for r in res["rows"]) == pytest.approx(20.0)


def test_cg_p_timers_named_like_functions_are_not_compared():
    # the campaign of bench/data/cg-p at p = 2: Ir (cachegrind, both ranks) against the timers (rank 0).
    # Its timer spmv and cachegrind's function spmv are both app->spmv: the timer's time (all it holds)
    # was put against the function's own Ir ("above peak"); as CoMD's timer `timestep` against the
    # function timestep's own Ir printed 0.05% efficiency and 100% of the waste.  Below the run no
    # timer pairs a function's work; the run pairs its wall time with all the Ir (truth: pandas)
    from pathlib import Path

    store = Path(__file__).resolve().parents[1] / "bench" / "data" / "cg-p" / "cg-p.perfcast"
    e = load([str(store)])
    res = waste(e, "Ir", "time", 4e9, at={"p": 2})
    got = {r["path"]: r for r in res["rows"]}
    v = pd.read_parquet(store / "values.parquet")
    v = v[v["p"] == 2]
    timers = set(v.loc[v["metric"] == "time", "callpath"]) - {"app"}
    funcs = set(v.loc[v["metric"] == "Ir", "callpath"])
    both = sorted((timers & funcs) - {"app->total"})
    assert "app->spmv" in both                                                   # the premise
    for p in both:
        assert got[p]["status_exclusive"] == got[p]["status_inclusive"] == "not comparable"
        assert got[p]["waste_exclusive"] is got[p]["efficiency_inclusive"] is got[p]["waste_inclusive_share"] is None
    assert got["app->xpby"]["status_exclusive"] == "no resource" and got["app->xpby"]["waste_exclusive"] is None
    assert "app->total" not in got and res["whole_run_timers"] == ["app->total"]
    # the run: its wall time (rank 0, mean of the repetitions) x the peak against all the Ir (summed over ranks)
    ir = v[v["metric"] == "Ir"].groupby("rep")["value"].sum().mean()
    t = v[(v["metric"] == "time") & (v["callpath"] == "app")]["value"].mean()
    assert got["app"]["efficiency_inclusive"] == pytest.approx(100 * ir / (4e9 * t))
    assert got["app"]["waste_inclusive_share"] == pytest.approx(100.0)
    assert not any(r["waste_exclusive"] is not None and r["waste_exclusive"] < 0 for r in res["rows"])
    assert res["warnings"]    # time held by rank 0, Ir by ranks 0 and 1, summed


def test_comd_timer_and_function_timestep_are_not_compared():
    # CoMD as a campaign with collectors time + cachegrind stores it: the timers (nested: total > loop >
    # timestep > force) and cachegrind's flat functions, each under app; the timer `timestep` and the
    # function timestep (its own 5e6 Ir, its callees' 4e9 elsewhere) are both app->timestep.  waste put
    # the function's own Ir against the timer's 8 s: 0.05% efficiency, 100% of the waste.  Peak 1e9/s
    from perfcast.experiment import RUN_TIMERS

    t = {"app": 10.0, "app->total": 9.5, "app->loop": 9.0, "app->timestep": 8.0, "app->force": 6.0}
    ir = {"app->timestep": 5e6, "app->ljForce": 4e9, "app->main": 1e6}
    rows = [dict(p=p, rep=0, rank=0, callpath=c, metric="time", value=x) for p in (1, 2) for c, x in t.items()]
    rows += [dict(p=p, rep=0, rank=0, callpath=c, metric="Ir", value=x) for p in (1, 2) for c, x in ir.items()]
    e = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive", RUN_TIMERS),
                                               Metric("Ir", "#", "count", "exclusive", exact=True)],
                   CallTree.from_paths([*t, *ir]))
    res = waste(e, "Ir", "time", 1e9, at={"p": 1})
    got = {r["path"]: r for r in res["rows"]}
    ts = got["app->timestep"]
    assert ts["status_exclusive"] == ts["status_inclusive"] == "not comparable"
    assert ts["efficiency_exclusive"] is ts["efficiency_inclusive"] is ts["waste_inclusive_share"] is None
    # the run, whole with whole: 10 s x 1e9 against all 4.006e9 Ir; its own time is not known (nested)
    assert got["app"]["efficiency_inclusive"] == pytest.approx(100 * 4.006e9 / 1e10)
    assert got["app"]["waste_inclusive"] == pytest.approx(1e10 - 4.006e9)
    assert got["app"]["waste_exclusive"] is None and got["app"]["potential_exclusive"] is None
    assert not any(r["waste_exclusive"] is not None and r["waste_exclusive"] < 0 for r in res["rows"])


def test_nested_timers_leave_their_parent_no_time_and_no_negative_waste():
    # CoMD's timers as a campaign stores them, each under app: total (the whole run of the others),
    # loop > force (force runs inside loop, the collector cannot know it); operations in force and
    # in a function `kernel` (cachegrind's, no time of its own); peak 1 operation per second.
    # app's exclusive time is 20 - 15 - 12 = -7 s once the whole-run timer is set aside: less than
    # none, its waste is undefined -- `perfcast waste` on a CoMD campaign printed app's exclusive
    # waste -2.342e10 with a share of 186.9% and "exclusive of -1.253e+10"
    t = {"app": 20.0, "app->total": 18.0, "app->loop": 15.0, "app->force": 12.0}
    ops = {"app->force": 2.0, "app->kernel": 3.0}
    rows = [dict(p=p, callpath=cp, metric="time", value=v * p) for p in (1, 2) for cp, v in t.items()]
    rows += [dict(p=p, callpath=cp, metric="ops", value=v * p) for p in (1, 2) for cp, v in ops.items()]
    e = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive"),
                                               Metric("ops", "", "count", "exclusive")],
                   CallTree.from_paths([*t, *ops]))
    res = waste(e, "ops", "time", 1.0, at={"p": 1})
    got = {r["path"]: r for r in res["rows"]}
    assert res["whole_run_timers"] == ["app->total"]
    assert got["app"]["potential_exclusive"] == pytest.approx(20 - 15 - 12)    # the premise: below zero
    assert got["app"]["waste_exclusive"] is None and got["app"]["status_exclusive"] == "no resource"
    assert got["app"]["waste_exclusive_share"] is None
    assert not any(r["waste_exclusive"] is not None and r["waste_exclusive"] < 0 for r in res["rows"])
    # defined: loop 15 - 0, force 12 - 2
    assert res["waste_attributed"] == pytest.approx(15 + 10)
    assert sum(r["waste_exclusive_share"] or 0 for r in res["rows"]) == pytest.approx(100.0)
    assert any("app" in n and "below zero" in n for n in res["notes"])

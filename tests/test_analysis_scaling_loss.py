"""Scaling loss by differential profiling: formulas by hand on built experiments, and the LULESH
weak-scaling series (27 -> 343 ranks) against a hand calculation from the raw .cali region times."""

import caliperreader
import pandas as pd
import pytest

from perfcast import CallTree, Experiment, Metric, PerfcastError
from perfcast.analysis.scaling_loss import scaling_loss
from perfcast.io import load

AVG = "avg#inclusive#sum#time.duration"


def series(costs, ranks_per_run=None, scope="exclusive", extra=None):
    """costs: {p: {callpath: per-process cost}}; with ranks_per_run each rank r gets cost * (r + 1) /
    mean(1..p) so that the mean over ranks is the given cost."""
    rows = []
    for p, by in costs.items():
        for cp, v in by.items():
            if ranks_per_run:
                k = sum(range(1, p + 1)) / p
                rows += [dict(p=p, rep=0, callpath=cp, metric="time", value=v * (r + 1) / k, rank=r) for r in range(p)]
            else:
                rows.append(dict(p=p, rep=0, callpath=cp, metric="time", value=v, **(extra or {})))
    paths = sorted({cp for by in costs.values() for cp in by}, key=lambda c: c.count("->"))
    return Experiment(["p", *(extra or {})], pd.DataFrame(rows), [Metric("time", "s", "time", scope)],
                      CallTree.from_paths(paths))


def rows_of(pair):
    return {r["path"]: r for r in pair["rows"]}


def test_weak_scaling_by_hand():
    # exclusive per-process cost; perfect weak scaling keeps it constant
    e = series({2: {"main": 1.0, "main->work": 6.0, "main->comm": 1.0, "main->comm->wait": 2.0},
                4: {"main": 1.0, "main->work": 6.0, "main->comm": 1.5, "main->comm->wait": 4.5}}, ranks_per_run=True)
    res = scaling_loss(e, "weak")
    (pair,) = res["pairs"]
    assert (pair["p"], pair["q"], pair["total_p"], pair["total_q"]) == (2.0, 4.0, pytest.approx(10.0),
                                                                       pytest.approx(13.0))
    r = rows_of(pair)
    assert r["main->work"]["exclusive_loss"] == pytest.approx(0.0)
    assert r["main->comm->wait"]["exclusive_loss"] == pytest.approx((4.5 - 2.0) / 13)
    assert r["main->comm"]["exclusive_loss"] == pytest.approx(0.5 / 13)
    assert r["main->comm"]["inclusive_loss"] == pytest.approx((6.0 - 3.0) / 13)
    assert r["main"]["inclusive_loss"] == pytest.approx(3.0 / 13) == pytest.approx(pair["loss"])
    # wait's loss is its own; comm's lives in its callee; work scales
    assert (r["main->comm->wait"]["where"], r["main->comm"]["where"], r["main->work"]["where"]) == (
        "self", "callees", "-")
    assert [x["path"] for x in pair["rows"]][:2] == ["main->comm->wait", "main->comm"]
    assert [x["path"] for x in scaling_loss(e, "weak", sort="inclusive")["pairs"][0]["rows"]][:2] == [
        "main", "main->comm"]


def test_strong_scaling_by_hand_and_consecutive_pairs():
    # work halves with doubled processes (perfect), the allreduce does not shrink
    e = series({2: {"main": 8.0, "main->work": 8.0, "main->allreduce": 1.0},
                4: {"main": 4.0, "main->work": 4.0, "main->allreduce": 1.0},
                8: {"main": 2.0, "main->work": 1.5, "main->allreduce": 1.5}})
    res = scaling_loss(e, "strong")
    assert [(x["p"], x["q"]) for x in res["pairs"]] == [(2.0, 4.0), (4.0, 8.0)]
    r = rows_of(res["pairs"][0])
    k, tq = 2.0, 9.0
    assert r["main->work"]["exclusive_loss"] == pytest.approx(0.0)
    assert r["main->allreduce"]["exclusive_loss"] == pytest.approx((k * 1.0 - 1.0) / (k * tq))
    assert r["main"]["inclusive_loss"] == pytest.approx((k * 9.0 - 17.0) / (k * tq))
    r = rows_of(res["pairs"][1])
    assert r["main->work"]["exclusive_loss"] == pytest.approx((2 * 1.5 - 4.0) / (2 * 5.0))  # superlinear: < 0
    one = scaling_loss(e, "strong", pairs=[(2.0, 8.0)])["pairs"][0]
    assert rows_of(one)["main->allreduce"]["exclusive_loss"] == pytest.approx((4 * 1.5 - 1.0) / (4 * 5.0))


def test_inclusive_metric_and_diverging_trees():
    # inclusive values (converted to exclusive here); a scope only in the larger run
    e = series({8: {"main": 10.0, "main->a": 4.0}, 16: {"main": 12.0, "main->a": 4.0, "main->b": 1.0}},
               scope="inclusive")
    r = rows_of(scaling_loss(e, "weak")["pairs"][0])
    assert r["main->b"]["inclusive_p"] == 0.0 and r["main->b"]["inclusive_loss"] == pytest.approx(1 / 12)
    assert r["main"]["exclusive_loss"] == pytest.approx(((12 - 5) - (10 - 4)) / 12)


def test_errors():
    e = series({2: {"main": 1.0}, 4: {"main": 2.0}})
    with pytest.raises(PerfcastError, match="weak or strong"):
        scaling_loss(e, "medium")
    with pytest.raises(PerfcastError, match="no run with p=3"):
        scaling_loss(e, "weak", pairs=[(2.0, 3.0)])
    with pytest.raises(PerfcastError, match="0 < p < q"):
        scaling_loss(e, "weak", pairs=[(4.0, 2.0)])
    with pytest.raises(PerfcastError, match="only one value"):
        scaling_loss(series({2: {"main": 1.0}}), "weak")
    two = Experiment(["x", "n"], pd.DataFrame([dict(x=x, n=n, callpath="main", metric="time", value=1.0)
                                               for x in (2, 4) for n in (1, 2)]),
                     [Metric("time", "s", "time", "exclusive")])
    with pytest.raises(PerfcastError, match="which parameter counts processes"):
        scaling_loss(two, "weak")
    with pytest.raises(PerfcastError, match="fix them with --at"):
        scaling_loss(two, "weak", procs="x")
    assert len(scaling_loss(two, "weak", procs="x", at={"n": 2})["pairs"]) == 1
    # a conventional name (p, ranks, jobsize, ...) is taken when several parameters vary
    p_n = Experiment(["p", "n"], two.data.rename(columns={"x": "p"}), two.metrics)
    with pytest.raises(PerfcastError, match="parameter\\(s\\) n vary too"):
        scaling_loss(p_n, "weak")


# -- LULESH weak scaling, checked against the raw region times --------------------------------
def raw_lulesh(path):
    """callpath -> avg inclusive time, read with caliper-reader; the path-less record is time
    outside every region (a root of its own)."""
    r = caliperreader.CaliperReader()
    r.read(str(path))
    out, outside = {}, 0.0
    for rec in r.records:
        if AVG not in rec:
            continue
        if "path" not in rec:
            outside += float(rec[AVG])
            continue
        frames = rec["path"] if isinstance(rec["path"], list) else [rec["path"]]
        out["->".join(frames)] = float(rec[AVG])
    return out, outside, int(r.globals["jobsize"])


def by_hand(p_file, q_file):
    inc_p, out_p, p = raw_lulesh(p_file)
    inc_q, out_q, q = raw_lulesh(q_file)
    paths = set(inc_p) | set(inc_q)

    def exclusive(inc, path):
        kids = [c for c in inc if c.startswith(path + "->") and "->" not in c[len(path) + 2:]]
        return inc[path] - sum(inc[c] for c in kids) if path in inc else 0.0

    total_q = sum(v for c, v in inc_q.items() if "->" not in c) + out_q
    return p, q, total_q, {c: ((inc_q.get(c, 0.0) - inc_p.get(c, 0.0)) / total_q,
                               (exclusive(inc_q, c) - exclusive(inc_p, c)) / total_q) for c in paths}


@pytest.fixture(scope="module")
def lulesh(data_dir):
    d = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    return d, load([d])


def test_lulesh_weak_scaling_loss_against_raw_times(lulesh):
    d, exp = lulesh
    res = scaling_loss(exp, "weak", AVG, pairs=[(27.0, 343.0)])
    assert res["procs"] == "jobsize"
    pair = res["pairs"][0]
    p, q, total_q, want = by_hand(d / "27_cores.cali", d / "343_cores.cali")
    assert (pair["p"], pair["q"]) == (p, q)
    assert pair["total_q"] == pytest.approx(total_q, rel=1e-12)
    got = rows_of(pair)
    assert set(want) <= set(got)
    for path, (inc_l, exc_l) in want.items():
        assert got[path]["inclusive_loss"] == pytest.approx(inc_l, rel=1e-9, abs=1e-12), path
        assert got[path]["exclusive_loss"] == pytest.approx(exc_l, rel=1e-9, abs=1e-12), path
    # the ranking: by exclusive excess work, the hand calculation's order
    ranked = [r["path"] for r in pair["rows"] if r["path"] in want][:8]
    assert ranked == sorted(want, key=lambda c: -want[c][1])[:8]
    # the biggest loss: the MPI_Allreduce in TimeIncrement, its own (16 % of the 343-rank run)
    top = pair["rows"][0]
    assert top["path"] == "main->lulesh.cycle->TimeIncrement->MPI_Allreduce" and top["where"] == "self"
    assert top["exclusive_loss"] == pytest.approx(0.1626, abs=5e-4)
    # CalcForceForNodes gains inclusively (its callees got faster) though its waits lose
    cf = got["main->lulesh.cycle->LagrangeLeapFrog->LagrangeNodal->CalcForceForNodes"]
    assert cf["inclusive_loss"] < 0 and cf["where"] == "-"


@pytest.mark.parametrize("ranks", ["max", "min", "sum"])
def test_lulesh_ranks_option_on_values_already_averaged_says_what_they_are(lulesh, ranks):
    """The .cali files hold one avg# value per run (mean over ranks): --ranks max combines nothing,
    the losses are the hand calculation from the raw averages, and the result says 'mean over ranks
    in the file', not 'max'."""
    d, exp = lulesh
    res = scaling_loss(exp, "weak", AVG, pairs=[(27.0, 343.0)], ranks=ranks)
    assert res["ranks"] == "mean over ranks in the file"
    _, _, total_q, want = by_hand(d / "27_cores.cali", d / "343_cores.cali")
    got = rows_of(res["pairs"][0])
    assert res["pairs"][0]["total_q"] == pytest.approx(total_q, rel=1e-12)
    for path, (inc_l, exc_l) in want.items():
        assert got[path]["exclusive_loss"] == pytest.approx(exc_l, rel=1e-9, abs=1e-12), path


def test_lulesh_consecutive_pairs(lulesh):
    d, exp = lulesh
    res = scaling_loss(exp, "weak", AVG)
    assert [(x["p"], x["q"]) for x in res["pairs"]] == [(27, 64), (64, 125), (125, 216), (216, 343)]
    files = {27: "27_cores.cali", 64: "64_cores.cali", 125: "125_cores.cali", 216: "216_cores.cali",
             343: "343_cores.cali"}
    for pair in res["pairs"]:
        _, _, total_q, want = by_hand(d / files[int(pair["p"])], d / files[int(pair["q"])])
        got = rows_of(pair)
        assert pair["total_q"] == pytest.approx(total_q, rel=1e-12)
        for path, (inc_l, exc_l) in want.items():
            assert got[path]["inclusive_loss"] == pytest.approx(inc_l, rel=1e-9, abs=1e-12)
            assert got[path]["exclusive_loss"] == pytest.approx(exc_l, rel=1e-9, abs=1e-12)


def test_a_rank_without_the_metric_is_missing_not_zero():
    """As in a campaign: wall time recorded once per run (rank 0), instructions on every rank.  The
    mean over ranks of the time is rank 0's time; dividing by all ranks (the missing ones counted as
    0) turned the demo's strong-scaling loss of 95.3 % into 57.9 %."""
    from perfcast.analysis.views import scope_values

    wall = {1: 10.0, 2: 8.0, 4: 7.0}          # strong scaling: ideal would be 10, 5, 2.5
    rows = []
    for p, t in wall.items():
        rows.append({"p": p, "rep": 0, "rank": 0, "callpath": "app", "metric": "time", "value": t})
        for r in range(p):
            rows.append({"p": p, "rep": 0, "rank": r, "callpath": "app", "metric": "Ir", "value": 100.0 / p})
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive"),
                                                 Metric("Ir", "#", "count", "inclusive")])
    sv = scope_values(exp, "time", ranks="mean").set_index("p")["inclusive"]
    assert sv.to_dict() == {1: 10.0, 2: 8.0, 4: 7.0}
    iv = scope_values(exp, "Ir", ranks="mean").set_index("p")["inclusive"]
    assert iv.to_dict() == pytest.approx({1: 100.0, 2: 50.0, 4: 25.0})
    res = scaling_loss(exp, "strong", "time", pairs=[(1, 4)])
    # by hand: k = 4, loss = (4 * 7 - 10) / (4 * 7) = 18 / 28
    assert res["pairs"][0]["loss"] == pytest.approx(18 / 28, rel=1e-12)
    assert res["pairs"][0]["total_q"] == 7.0
    # the report's scaling-loss section reads the same per-process costs
    from perfcast.report.html import ReportOptions, build_report

    rep = build_report(exp, ReportOptions(metric="time", scaling="strong"))
    assert (rep.scaling_loss["p"], rep.scaling_loss["q"]) == (1, 4)
    assert rep.scaling_loss["loss"] == pytest.approx(18 / 28, rel=1e-12)


# -- the demo's campaign: wall time once per run, PMPI metrics on every rank --------------------
def test_demo_campaign_strong_scaling_loss_of_the_report_by_hand(examples_built, tmp_path):
    """The demo's `perfcast collect ... --collect time,mpi -- mpirun -np {p} jacobi -w {n}` (a
    smaller grid: p = 1, 3; n = 32, 64): the application's wall time ``time`` of ``app`` is recorded
    once per run (rank 0) while the PMPI metrics hold every rank.  The report's strong-scaling loss
    (smallest against largest run, n at its largest) is, by its definition,
    1 - T(1) / (k T(3)) with k = 3 and T the wall time averaged over the repetitions -- computed here
    from the stored rows.  Counting the ranks without a wall time as 0 divided T(3) by 3."""
    import os

    from perfcast.cli import main
    from perfcast.report.html import ReportOptions, build_report

    store = tmp_path / "jacobi.perfcast"
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert main(["collect", "-o", str(store), "-P", "p=1,3", "-P", "n=32,64", "--reps", "2..3", "--cv", "0.05",
                 "--cv-metric", "total", "--collect", "time,mpi", "--json", "--",
                 "mpirun", *root, "-np", "{p}", str(examples_built / "jacobi" / "jacobi"), "-w", "{n}",
                 "-i", "100", "-q"]) == 0
    exp = load([store])
    d = exp.data
    wall = d[(d.metric == "time") & (d.callpath == "app") & (d.n == 64)]
    # the structure that mattered: one wall time per run, PMPI values from all 3 ranks
    assert set(wall["rank"]) == {0}
    assert set(d[(d.metric == "pmpi_time") & (d.p == 3)]["rank"]) == {0, 1, 2}
    t = wall.groupby("p")["value"].mean()
    assert (wall.groupby("p").size() >= 2).all()
    want = 1 - t[1.0] / (3 * t[3.0])

    rep = build_report(exp, ReportOptions(metric="time", scaling="strong"))
    sl = rep.scaling_loss
    assert (sl["mode"], sl["p"], sl["q"]) == ("strong", 1.0, 3.0)
    assert sl["total_p"] == pytest.approx(t[1.0], rel=1e-12) and sl["total_q"] == pytest.approx(t[3.0], rel=1e-12)
    assert sl["loss"] == pytest.approx(want, rel=1e-12)


def test_a_sum_over_ranks_is_refused_not_taken_as_a_per_process_cost():
    """Strong scaling, per-rank work: p=2 ranks do 3 and 5 (total 8), p=4 ranks 2, 2, 3, 3 (total 10).
    By hand the per-process loss is (4/2 * 2.5 - 4) / (4/2 * 2.5) = 0.2 (the growth of the total work,
    (10 - 8) / 10); the sum over ranks taken as the per-process cost gave (2 * 10 - 8) / (2 * 10) = 0.6."""
    work = {2: [3.0, 5.0], 4: [2.0, 2.0, 3.0, 3.0]}
    rows = [{"p": p, "rep": 0, "rank": r, "callpath": "main", "metric": "Ir", "value": v}
            for p, vs in work.items() for r, v in enumerate(vs)]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("Ir", "#", "count", "exclusive")])
    assert scaling_loss(exp, "strong", "Ir")["pairs"][0]["loss"] == pytest.approx((10 - 8) / 10, rel=1e-12)
    with pytest.raises(PerfcastError, match="not a per-process cost"):
        scaling_loss(exp, "strong", "Ir", ranks="sum")
    # one value per run (no ranks): nothing is summed over ranks, the values are used as they are
    flat = Experiment(["p"], pd.DataFrame([{"p": 2, "rep": 0, "callpath": "main", "metric": "t", "value": 4.0},
                                           {"p": 4, "rep": 0, "callpath": "main", "metric": "t", "value": 2.5}]),
                      [Metric("t", "s", "time", "exclusive")])
    assert scaling_loss(flat, "strong", "t", ranks="sum")["pairs"][0]["loss"] == pytest.approx(0.2, rel=1e-12)


def test_negative_exclusive_values_of_a_max_over_ranks_are_said():
    """A max over ranks in the file (Caliper max#): main 10 holds a = 6 and b = 7 (their maxima came from
    different ranks), so main's exclusive is 10 - 13 = -3 s at p=8 -- no cost, and its exclusive loss
    (weak, by hand (1 - (-3)) / 12) means nothing; a note says so.  The mean over ranks adds up: no note."""
    rows = [dict(p=8, rep=0, callpath="main", value=10.0), dict(p=8, rep=0, callpath="main->a", value=6.0),
            dict(p=8, rep=0, callpath="main->b", value=7.0), dict(p=16, rep=0, callpath="main", value=12.0),
            dict(p=16, rep=0, callpath="main->a", value=6.0), dict(p=16, rep=0, callpath="main->b", value=5.0)]
    df = pd.DataFrame(rows).assign(metric="max#t")
    tree = CallTree.from_paths(["main", "main->a", "main->b"])
    exp = Experiment(["p"], df, [Metric("max#t", "s", "time", "inclusive", aggregate="max over ranks")], tree)
    (pair,) = scaling_loss(exp, "weak")["pairs"]
    r = rows_of(pair)
    assert (r["main"]["exclusive_p"], r["main"]["exclusive_q"]) == (-3.0, 1.0)
    assert r["main"]["exclusive_loss"] == pytest.approx((1 - (-3)) / 12, rel=1e-12)
    (note,) = [n for n in pair["notes"] if "negative exclusive" in n]
    assert note.startswith("1 scope(s) have a negative exclusive max#t at p=8 or 16 (e.g. main: -3)")
    assert "maximum or minimum over ranks" in note
    avg_rows = pd.DataFrame(rows).assign(metric="avg#t")
    avg_rows.loc[avg_rows.callpath == "main", "value"] = [14.0, 12.0]       # a mean holds its callees
    avg = Experiment(["p"], avg_rows, [Metric("avg#t", "s", "time", "inclusive", aggregate="mean over ranks")], tree)
    assert scaling_loss(avg, "weak")["pairs"][0]["notes"] == []

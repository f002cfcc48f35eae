"""The p = 1 rules beyond their first form (fit.core.zero_rule_sets): a sum over ranks that does not
run at p = 1, measured at one process count beyond it, is the line through its 0 there (not flat);
a routine that runs at p = 1 only is 0 beyond it; every path that fits a series applies the rules
(fit_series, fit.segmented, fit.grid).  Every truth here is a hand count of the generating program
(examples/jacobi/jacobi.c's halo exchange, Open MPI's self communicator), or values read from a
store with pandas."""

import math

import numpy as np
import pandas as pd
import pytest

import perfcast
import perfcast.experiment
from perfcast.experiment import Experiment, Metric

NS = (16.0, 24.0, 32.0)


def _ranked(ps, per_rank, metric="calls", kind="count", reps=2, ns=NS, meta=None, exact=False):
    """A sparse per-rank profile: ``per_rank(p, n, r)`` the value of rank r (None: the rank's
    profile lacks the callpath, as a PMPI profile of a rank that never called the routine)."""
    rows = []
    for p in ps:
        for n in ns:
            for rep in range(reps):
                for r in range(int(p)):
                    for cp, f in per_rank.items():
                        v = f(p, n, r)
                        if v is not None:
                            rows.append({"p": p, "n": n, "rep": rep, "rank": r, "callpath": cp, "metric": metric,
                                         "value": v})
    return Experiment(["p", "n"], pd.DataFrame(rows), [Metric(metric, "#", kind, exact=exact)],
                      meta={"locations": "sparse", **(meta or {})})


def _evaluated(formula: str, p: float, n: float) -> float:
    return float(eval(formula.replace("^", "**"), {"__builtins__": {}, "log2": math.log2}, {"p": p, "n": n}))


# MPI_Isend calls of a 1-D halo exchange with 100 iterations: rank r sends one message per
# neighbour per iteration (r - 1 and r + 1 where they exist): 0 at p = 1, 200 (p - 1) summed over ranks
def ISEND(p, n, r):
    k = (r > 0) + (r < p - 1)
    return 100.0 * k if k else None


def WORK(p, n, r):
    return 1000.0 * n


def test_a_sum_over_ranks_with_one_process_count_beyond_p1_is_the_line_through_its_zero():
    """Measured at p = 1, 2 only: 0 and 200 calls summed over ranks.  The law from p = 2 on was flat
    (200 at p = 4, 8, where the hand count is 600 and 1400); a sum over ranks of a routine with no work
    at p = 1 is the line through that 0 (exact for a 1-D exchange).  Still a guess, said so."""
    exp = _ranked((1.0, 2.0), {"MPI->MPI_Isend": ISEND, "MPI->MPI_Allreduce": WORK})
    assert perfcast.experiment.aggregate_labels(exp)["calls"] == "sum over ranks"
    ms = perfcast.model(exp)
    got = {r["at"]["p"]: r for r in ms.predict([{"p": p, "n": 16.0} for p in (1.0, 2.0, 4.0, 8.0)])
           if r["callpath"] == "MPI->MPI_Isend"}
    for p, r in got.items():
        truth = 200.0 * (p - 1)
        assert r["value"] == pytest.approx(truth, rel=1e-9, abs=1e-9), (r["formula"], p)
        assert _evaluated(r["formula"], p, 16.0) == pytest.approx(r["value"], rel=1e-9, abs=1e-9)
    assert got[8.0]["confidence"] == "low"
    assert any("(p - 1)" in n and n.startswith("2 values of p only (1, 2)") for n in got[8.0]["notes"])
    m = next(sm.model for sm in ms.series if sm.callpath == "MPI->MPI_Isend")
    assert m.to_dict()["zero_below"] == {"parameter": "p", "start": 2.0, "bound": 0.0, "through_zero": True}
    back = perfcast.fit.Model.from_dict(m.to_dict())
    assert back.predict({"p": 8.0, "n": 20.0}) == pytest.approx(1400.0, rel=1e-9)


def test_a_mean_over_ranks_stays_flat_beyond_p2():
    """The same routine's count per rank (a mean over ranks, locations="mean") has no such line: a
    rank's neighbours do not grow with p (1 at p = 2; 2 inside a 1-D grid)."""
    exp = _ranked((1.0, 2.0), {"MPI->MPI_Isend": ISEND, "MPI->MPI_Allreduce": WORK})
    ms = perfcast.model(exp, locations="mean")
    r = next(r for r in ms.predict([{"p": 8.0, "n": 16.0}]) if r["callpath"] == "MPI->MPI_Isend")
    assert r["value"] == pytest.approx(100.0, rel=1e-9), r["formula"]


def test_two_process_counts_beyond_p1_keep_the_fitted_law():
    """Measured at p = 1, 2, 4: the 0 at p = 1 is a point of the law 200 (p - 1) and is kept (the
    line is for one process count beyond p = 1 only)."""
    exp = _ranked((1.0, 2.0, 4.0), {"MPI->MPI_Isend": ISEND, "MPI->MPI_Allreduce": WORK})
    ms = perfcast.model(exp)
    r = next(r for r in ms.predict([{"p": 16.0, "n": 16.0}]) if r["callpath"] == "MPI->MPI_Isend")
    assert r["value"] == pytest.approx(3000.0, rel=1e-9), r["formula"]


def test_jacobi_isend_calls_from_p1_p2_against_the_hand_count():
    """bench/data/jacobi-p (examples/jacobi -n 256 -i 50, 2-D grid from MPI_Dims_create): per
    iteration one MPI_Isend per neighbour of each rank, so 2 x 50 x (neighbour pairs) calls per run --
    dims 2x1, 2x2, 4x2, 4x4 at p = 2, 4, 8, 16: 100, 400, 1000, 2400 (jacobi.c's halo_exchange; the
    store holds them: read with pandas).  Fitted from p = 1, 2 alone, the line through the 0 at p = 1
    predicts 300, 700, 1500 (25-38% low); flat gave 100 (75-96% low)."""
    from pathlib import Path

    from perfcast import io

    store = Path(__file__).resolve().parents[1] / "bench" / "data" / "jacobi-p" / "jacobi-p.perfcast"
    exp = io.load([store])
    d = exp.data
    isend = d[(d["callpath"] == "MPI->MPI_Isend") & (d["metric"] == "calls")]
    per_run = isend.groupby(["p", "rep"])["value"].sum().groupby("p").mean()
    pairs = {2.0: 1, 4.0: 4, 8.0: 10, 16.0: 24}
    for p, k in pairs.items():
        assert per_run[p] == 2 * 50 * k
    small = Experiment(list(exp.parameters), d[d["p"] <= 2].reset_index(drop=True), list(exp.metrics.values()),
                       meta=exp.meta)
    ms = perfcast.model(small.select(metric=["calls"]))
    got = {r["at"]["p"]: r["value"] for r in ms.predict([{"p": p} for p in pairs]) if r["callpath"] == "MPI->MPI_Isend"}
    for p, k in pairs.items():
        truth = 2 * 50 * k
        assert abs(got[p] - truth) <= 0.4 * truth, (p, got[p], truth)


# Open MPI's coll/self component: MPI_Allreduce on a communicator of one rank (p = 1) only
SELF = lambda p, n, r: 714.0 if p == 1 else None     # noqa: E731
RUN = lambda p, n, r: 50.0 * n                        # noqa: E731
COVER = {"coverage": [{"metrics": ["Ir"], "callpaths": ["app->self_allreduce", "app->run"]}]}


def test_a_routine_that_runs_at_p1_only_is_zero_beyond_it():
    """CoMD's cachegrind profiles hold mca_coll_self_allreduce_intra, 714 Ir at p = 1 and absent from
    p = 2 on within the collector's coverage: it ran at p = 1 only.  It was predicted 714 at p = 16;
    now 0 [0, 0] from p = 2 on, 714 at p = 1, and the formula says so."""
    exp = _ranked((1.0, 2.0, 4.0, 8.0), {"app->self_allreduce": SELF, "app->run": RUN}, metric="Ir", reps=1,
                  meta=COVER, exact=True)
    ms = perfcast.model(exp)
    got = {r["at"]["p"]: r for r in ms.predict([{"p": 1.0, "n": 20.0}, {"p": 16.0, "n": 20.0}])
           if r["callpath"] == "app->self_allreduce"}
    assert got[16.0]["value"] == 0.0 and (got[16.0]["lower"], got[16.0]["upper"]) == (0.0, 0.0)
    assert got[1.0]["value"] == pytest.approx(714.0, rel=1e-9)
    for p, r in got.items():
        assert _evaluated(r["formula"], p, 20.0) == pytest.approx(r["value"], rel=1e-9, abs=1e-12)
    m = next(sm.model for sm in ms.series if sm.callpath == "app->self_allreduce")
    assert m.to_dict()["zero_from"] == {"parameter": "p", "start": 2.0}
    assert perfcast.fit.Model.from_dict(m.to_dict()).predict({"p": 4.0, "n": 12.0}) == 0.0


def test_a_sampled_profile_keeps_an_absence_beyond_p1_missing():
    """Without a coverage record and for a metric that is not exact (a sampled profile: a routine
    absent beyond p = 1 may have been too short to be sampled) nothing is filled beyond p = 1."""
    from perfcast.experiment import fill_absent_points

    exp = _ranked((1.0, 2.0, 4.0), {"app->self_allreduce": SELF, "app->run": RUN}, metric="samples", reps=1)
    out = fill_absent_points(exp, exp.aggregate("sum", ("rank",)))
    cp = out[out["callpath"] == "app->self_allreduce"]
    assert sorted(cp["p"].unique()) == [1.0]
    covered = _ranked((1.0, 2.0, 4.0), {"app->self_allreduce": SELF, "app->run": RUN}, metric="Ir", reps=1,
                      meta=COVER)
    out = fill_absent_points(covered, covered.aggregate("sum", ("rank",)))
    cp = out[out["callpath"] == "app->self_allreduce"]
    assert sorted(cp["p"].unique()) == [1.0, 2.0, 4.0] and (cp[cp["p"] > 1]["value"] == 0).all()


def test_fit_series_runs_at_p1_only_and_summed_line():
    from perfcast.fit import fit_series

    only = fit_series([1.0, 2.0, 4.0, 8.0], [[714.0], [0.0], [0.0], [0.0]], "p")
    assert only.predict({"p": 1.0}) == pytest.approx(714.0) and only.predict({"p": 16.0}) == 0.0
    line = fit_series([1.0, 2.0], [[0.0, 0.0], [200.0, 200.0]], "p", summed=True)
    assert line.predict({"p": 4.0}) == pytest.approx(600.0, rel=1e-9)      # 200 (p - 1), 1-D halo
    assert fit_series([1.0, 2.0], [[0.0, 0.0], [200.0, 200.0]], "p").predict({"p": 4.0}) == pytest.approx(200.0)


def test_segmented_and_grid_fits_apply_the_p1_rule():
    """fit.segmented and fit.grid fit their plain model as fit_series does (series.fit_one): a
    routine without neighbours at p = 1 (0 there; 5 p^2 from p = 2 on: 20, 80, 320, 1280, 5120)
    is 0 at p = 1 and its law holds from p = 2 (a law through the 0 and the rest is none of it)."""
    from perfcast.fit.grid import Grid, fit_grid
    from perfcast.fit.segmented import fit_segmented

    ps = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    vals = [0.0 if p == 1 else 5.0 * p ** 2 for p in ps]
    seg = fit_segmented(ps, [[v, v] for v in vals], "p")
    assert seg.predict({"p": 1.0}) == 0.0
    assert seg.predict({"p": 64.0}) == pytest.approx(5.0 * 64 ** 2, rel=1e-6)
    # examples/jacobi's MPI_Isend calls with -i 50 on its 2-D grid: 2 x 50 x neighbour pairs
    grid = Grid("p", 2)
    pairs = {1.0: 0, 2.0: 1, 4.0: 4, 8.0: 10, 16.0: 24}
    X = np.array(list(pairs))[:, None]
    mean = np.array([100.0 * k for k in pairs.values()])
    g = fit_grid(X, mean, np.ones(len(X)), np.zeros(len(X)), ("p",), grid)
    assert g is not None and g.predict({"p": 64.0}) == 100.0 * 112      # 8 x 8: 2 x 8 x 7 pairs
    assert g.single.predict({"p": 1.0}) == 0.0                            # the plain model it was preferred to
    from perfcast.fit.grid import _fit

    plain = _fit(X, mean, np.ones(len(X)), np.zeros(len(X)), ("p",), perfcast.fit.FitOptions())
    assert plain.predict({"p": 1.0}) == 0.0


def test_cli_json_carries_both_rules(tmp_path, capsys):
    """`perfcast model --json` (validated against the output schema): ``zero_from`` of a routine that
    runs at p = 1 only, ``through_zero`` of the summed line, and formulas that give the values."""
    from perfcast import store

    from conftest import cli, cli_items

    only = _ranked((1.0, 2.0, 4.0, 8.0), {"app->self_allreduce": SELF, "app->run": RUN}, metric="Ir", reps=1,
                   meta=COVER, exact=True)
    store.write(only, tmp_path / "only.perfcast")
    line = _ranked((1.0, 2.0), {"MPI->MPI_Isend": ISEND, "MPI->MPI_Allreduce": WORK})
    store.write(line, tmp_path / "line.perfcast")
    capsys.readouterr()
    code, out, _ = cli(capsys, "model", tmp_path / "only.perfcast", "--json")
    assert code == 0
    m = next(i for i in cli_items(out, "models") if i["callpath"] == "app->self_allreduce")
    assert m["zero_from"] == {"parameter": "p", "start": 2.0}
    assert _evaluated(m["formula"], 16.0, 20.0) == 0.0 and _evaluated(m["formula"], 1.0, 20.0) == pytest.approx(714.0)
    code, out, _ = cli(capsys, "model", tmp_path / "line.perfcast", "--json")
    assert code == 0
    m = next(i for i in cli_items(out, "models") if i["callpath"] == "MPI->MPI_Isend")
    assert m["zero_below"]["through_zero"] is True
    assert _evaluated(m["formula"], 8.0, 20.0) == pytest.approx(1400.0, rel=1e-3)


def _sampled_and_counted():
    """Per rank: app->run 1e6 Ir and 40 cpu-clock samples at every p; app->short 5000 Ir at every p
    (it runs everywhere: cachegrind counts it) but one sample at p = 1 only (too short to be sampled
    beyond it).  Ir is exact with a coverage record (cachegrind), the samples have none (perf)."""
    rows = []
    for p in (1.0, 2.0, 4.0, 8.0):
        for rep in range(2):
            for r in range(int(p)):
                rows += [{"p": p, "rep": rep, "rank": r, "callpath": "app->run", "metric": "Ir", "value": 1e6},
                         {"p": p, "rep": rep, "rank": r, "callpath": "app->run", "metric": "samples", "value": 40.0},
                         {"p": p, "rep": rep, "rank": r, "callpath": "app->short", "metric": "Ir", "value": 5000.0}]
                if p == 1:
                    rows.append({"p": p, "rep": rep, "rank": r, "callpath": "app->short", "metric": "samples",
                                 "value": 1.0})
    return Experiment(["p"], pd.DataFrame(rows), [Metric("Ir", "#", "count", exact=True), Metric("samples", "#", "count")],
                      meta={"locations": "sparse",
                            "coverage": [{"metrics": ["Ir"], "callpaths": ["app->run", "app->short"]}]})


def test_a_ratio_with_a_sampled_operand_is_not_zero_where_nothing_was_sampled():
    """``Ir / samples`` inherits Ir's coverage record (analysis.derived), which made its absence
    beyond p = 1 at app->short mean "did not run": 0 [0, 0] at p = 16, formula (p < 2) * (5000).
    The routine ran (5000 Ir per rank at every p, read from the table above); only the sampler missed
    it, and the ratio is x / 0 there: undefined, never 0.  It stays missing: the one point left,
    p = 1, gives its mean (5000), no law.  A derived metric is as sure as its least sure operand:
    ``2 * Ir`` of a routine absent beyond p = 1 is 0 there (as Ir's own model), ``2 * samples`` and
    ``Ir + samples`` stay missing."""
    from perfcast.analysis.derived import derive
    from perfcast.experiment import fill_absent_points

    d, _ = derive(_sampled_and_counted(), ["per_sample = Ir / samples"])
    out = fill_absent_points(d, d.aggregate("sum", ("rank",)))
    short = out[(out["callpath"] == "app->short") & (out["metric"] == "per_sample")]
    assert sorted(short["p"].unique()) == [1.0]
    ms = perfcast.model(d.select(metric=["per_sample"]))
    got = {r["callpath"]: r for r in ms.predict([{"p": 16.0}])}
    assert got["app->short"]["value"] == pytest.approx(5000.0, rel=1e-12)     # 5000 Ir / 1 sample at p = 1
    assert got["app->run"]["value"] == pytest.approx(1e6 / 40, rel=1e-9)
    m = next(sm.model for sm in ms.series if sm.callpath == "app->short")
    assert "zero_from" not in m.to_dict()

    exp = _sampled_and_counted()
    gone = exp.data[~((exp.data["callpath"] == "app->short") & (exp.data["p"] > 1))].reset_index(drop=True)
    exp = Experiment(["p"], gone, list(exp.metrics.values()), meta=exp.meta)
    s, _ = derive(exp, ["twice_ir = 2 * Ir", "both = Ir + samples"])
    out = fill_absent_points(s, s.aggregate("sum", ("rank",)))
    short = out[(out["callpath"] == "app->short") & (out["metric"] == "twice_ir")]
    assert sorted(short["p"].unique()) == [1.0, 2.0, 4.0, 8.0] and (short[short["p"] > 1]["value"] == 0).all()
    assert sorted(out[(out["callpath"] == "app->short") & (out["metric"] == "both")]["p"].unique()) == [1.0]
    # the samples alone: no record, not exact -- missing beyond p = 1 (test_a_sampled_profile_keeps_...)
    only = derive(exp, ["twice = 2 * samples"])[0]
    out = fill_absent_points(only, only.aggregate("sum", ("rank",)))
    assert sorted(out[(out["callpath"] == "app->short") & (out["metric"] == "twice")]["p"].unique()) == [1.0]


def test_a_sampled_metric_combined_with_a_covered_one_keeps_its_absence_beyond_p1_missing(tmp_path):
    """``combine`` (and a campaign) records the tree of perf's input as its coverage, so perf's
    samples had a record and a routine sampled at p = 1 only (one sample of a short routine: too
    brief to be sampled at p = 2, 4, 8, not "did not run") got 0 rows beyond p = 1.  The perf reader
    marks its metrics sampled (Metric.sampled, kept by the store) and such a metric is never filled
    beyond p = 1, while the exact Ir of a routine at p = 1 only still is.  The truth is the
    generating table: samples at app->short exist at p = 1 only."""
    from perfcast.experiment import absent_means_not_run, combine, fill_absent_points
    from perfcast.io.perf import samples_experiment

    parts_s, parts_c = [], []
    for p in (1.0, 2.0, 4.0, 8.0):
        for r in range(int(p)):
            acc = {(("run",), "cpu-clock", False): (40, 1_000_000)}
            if p == 1.0:
                acc[(("short",), "cpu-clock", False)] = (1, 1_000_000)
            df, mets, tree = samples_experiment(acc, r)
            parts_s.append(df.assign(p=p, rep=0))
            parts_c += [{"p": p, "rep": 0, "rank": r, "callpath": cp, "metric": "Ir", "value": v}
                        for cp, v in (("app->run", 1e6), ("app->short", 5e3))]
            if p == 1.0:
                parts_c.append({"p": p, "rep": 0, "rank": r, "callpath": "app->self", "metric": "Ir", "value": 714.0})
    assert mets["samples"].sampled and mets["cpu_time"].sampled
    data = pd.concat(parts_s, ignore_index=True)
    data["callpath"] = data["callpath"].astype(str).str.replace(r"^[^>]*->", "app->", regex=True)
    data = data[data["callpath"] != data["callpath"].str.split("->").str[0]]
    s = Experiment(["p"], data, [mets["samples"], mets["cpu_time"]], meta={"locations": "sparse"})
    c = Experiment(["p"], pd.DataFrame(parts_c), [Metric("Ir", "#", "count", exact=True)],
                   meta={"locations": "sparse"})
    x = combine([s, c])
    assert x.metrics["samples"].sampled and not x.metrics["Ir"].sampled
    assert not absent_means_not_run(x, "samples") and absent_means_not_run(x, "Ir")
    out = fill_absent_points(x, x.aggregate("sum", ("rank",)))
    short = out[(out["callpath"] == "app->short") & (out["metric"] == "samples")]
    assert sorted(short["p"].unique()) == [1.0]
    selfs = out[(out["callpath"] == "app->self") & (out["metric"] == "Ir")]
    assert sorted(selfs["p"].unique()) == [1.0, 2.0, 4.0, 8.0] and (selfs[selfs["p"] > 1]["value"] == 0).all()
    assert Metric.from_dict(x.metrics["samples"].to_dict()).sampled
    from perfcast import store

    assert store.read(store.write(x, tmp_path / "x.perfcast")).metrics["samples"].sampled

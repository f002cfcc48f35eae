"""The report opens with three answers (issue 23 item 3), each taken from the section that shows it in
full: the ranking's first row, the root's prediction at the target (the generating formula, since the
data are exact) and the scope with the largest measured scaling loss (by hand)."""

import math

import pandas as pd
import pytest

from perfcast import model
from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.report.html import ReportOptions, build_report

PS = (1, 2, 4, 8, 16)
SOLVE, MAIN_SELF = 10.0, 1.0


def comm(p):
    return 2 * math.log2(p) + 0.5


def _exp():
    """Weak scaling, inclusive time: main = 1 (own) + solve (10) + comm (2 log2 p + 0.5)."""
    rows = []
    for p in PS:
        for rep in (0, 1):
            rows += [(p, rep, "main", MAIN_SELF + SOLVE + comm(p)), (p, rep, "main->solve", SOLVE),
                     (p, rep, "main->comm", comm(p))]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    return Experiment(["p"], df, [Metric("time", "s", "time", scope="inclusive")],
                      CallTree.from_paths(["main", "main->solve", "main->comm"]))


def test_three_answers_agree_with_the_sections_below():
    rep = build_report(_exp(), ReportOptions(target={"p": 64}))
    grows, cost, lost = rep.answers
    assert grows["callpath"] == rep.kernels[0]["callpath"] == "main->comm"
    assert grows["formula"] == rep.kernels[0]["formula"]
    # the ranking's confidence column is the confidence of `perfcast predict` at the target
    pred = {r["callpath"]: r["confidence"] for r in model(_exp(), ["time"]).predict({"p": 64})}
    assert all(k["confidence"] == pred[k["callpath"]] for k in rep.kernels)
    assert grows["confidence"] == pred["main->comm"]
    assert cost["callpath"] == "main" and cost["at"] == {"p": 64.0}
    assert cost["value"] == pytest.approx(MAIN_SELF + SOLVE + comm(64), rel=1e-6)
    assert cost["lower"] <= cost["value"] <= cost["upper"] and cost["confidence"] in ("high", "medium", "low")
    # weak scaling from p=1 to p=16: excess work of a scope = its growth over the larger run's total
    total16 = MAIN_SELF + SOLVE + comm(16)
    assert lost["callpath"] == "main->comm" and lost["confidence"] == "measured"
    assert lost["value"] == pytest.approx((comm(16) - comm(1)) / total16, rel=1e-9)
    assert lost["total"] == pytest.approx((comm(16) - comm(1)) / total16, rel=1e-9)
    assert rep.to_dict()["answers"][1]["value"] == cost["value"]


def test_what_grows_names_the_callpath_inside_the_root_that_makes_it_grow():
    """Two growing children (comm 2 log2 p, io log2 p): the inclusive root grows by both and ranks
    first; comm holds 2/3 of its growth (>= half), io 1/3, so the answer is comm."""
    rows = []
    for p in PS:
        for rep in (0, 1):
            c, i = comm(p), math.log2(p) + 0.25
            rows += [(p, rep, "main", MAIN_SELF + SOLVE + c + i), (p, rep, "main->solve", SOLVE),
                     (p, rep, "main->comm", c), (p, rep, "main->io", i)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["p"], df, [Metric("time", "s", "time", scope="inclusive")],
                     CallTree.from_paths(["main", "main->solve", "main->comm", "main->io"]))
    rep = build_report(exp, ReportOptions(target={"p": 64}))
    inc = {k["callpath"]: k["increase"] for k in rep.kernels}
    assert rep.kernels[0]["callpath"] == "main"
    # by hand: increases from p=1 to 64 are 12 (comm) and 6 (io) of the root's cost at 64
    root64 = MAIN_SELF + SOLVE + comm(64) + math.log2(64) + 0.25
    assert inc["main"] == pytest.approx(18 / root64, rel=1e-6)
    assert inc["main->comm"] == pytest.approx(12 / root64, rel=1e-6)
    grows = rep.answers[0]
    assert grows["callpath"] == "main->comm"
    assert grows["answer"].startswith("main->comm (inside main, which ranks first)")
    assert rep.to_dict()["kernels"][0]["confidence"] in ("high", "medium", "low")


def test_growth_spread_over_parts_names_the_largest():
    """Three children growing alike (log2 p each): none holds half of the root's growth, so the root
    is the answer and its three parts are named, each +1/3 of the root's increase."""
    rows = []
    kids = ("a", "b", "c")
    for p in PS:
        for rep in (0, 1):
            g = math.log2(p) + 0.25
            rows += [(p, rep, "main", SOLVE + 3 * g)] + [(p, rep, f"main->{c}", g) for c in kids]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["p"], df, [Metric("time", "s", "time", scope="inclusive")],
                     CallTree.from_paths(["main", *(f"main->{c}" for c in kids)]))
    rep = build_report(exp, ReportOptions(target={"p": 64}))
    grows = rep.answers[0]
    inc = {k["callpath"]: k["increase"] for k in rep.kernels}
    # by hand: each child grows by 6 (log2 64 - log2 1) of the root's 10 + 3 * 6.25 at p = 64
    root64 = SOLVE + 3 * (6 + 0.25)
    assert inc["main"] == pytest.approx(18 / root64, rel=1e-6)
    assert all(inc[f"main->{c}"] == pytest.approx(6 / root64, rel=1e-6) for c in kids)
    assert grows["callpath"] == "main"
    assert "no part under it holds half of that growth, the largest: " in grows["answer"]
    named = grows["answer"].split("the largest: ")[1]
    assert sorted(part.split(" ")[0] for part in named.split(", ")) == [f"main->{c}" for c in kids]


def _two_runs(per_rank_at_2):
    """p = 1, 2 with a per-rank time main = solve + 0.5 (exclusive self): solve 9.5 s at p = 1, and
    per_rank_at_2 - 0.5 at p = 2 (inclusive times, two repetitions)."""
    rows = []
    for p, main in ((1, 10.0), (2, per_rank_at_2)):
        for rep in (0, 1):
            rows += [(p, rep, "main", main), (p, rep, "main->solve", main - 0.5)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    return Experiment(["p"], df, [Metric("time", "s", "time", scope="inclusive")],
                      CallTree.from_paths(["main", "main->solve"]))


def test_scaling_auto_on_two_process_counts():
    # 10 s per rank at p = 1, 7.5 s at p = 2: the work per rank fell -- strong scaling (at 67%
    # efficiency), not weak; the loss is then (q/p C_q - C_p) / (q/p T_q) = (15 - 10) / 15 by hand
    rep = build_report(_two_runs(7.5), ReportOptions())
    sl = rep.scaling_loss
    assert sl["mode"] == "strong" and sl["guessed"] is True
    assert sl["loss"] == pytest.approx((2 * 7.5 - 10) / (2 * 7.5))
    # 10 s -> 9.9 s: weak, or strong at 10 / 19.8 = 51% efficiency: said, not guessed
    rep = build_report(_two_runs(9.9), ReportOptions())
    assert rep.scaling_loss is None
    assert any("could not be told" in n and "--scaling" in n for n in rep.notes)
    # told, it is drawn
    assert build_report(_two_runs(9.9), ReportOptions(scaling="weak")).scaling_loss["mode"] == "weak"


def test_an_answer_says_when_its_callpath_is_predicted_above_its_parent():
    """main measured constant (12) while its child grows as 0.01 p^2 (2.56 at p = 16, inside main):
    at p = 64 the child's law gives 40.96 above main's 12 -- the two models disagree, and the answer
    that names the child says so, as `perfcast predict` does."""
    rows = []
    for p in PS:
        for rep in (0, 1):
            rows += [(p, rep, "main", 12.0), (p, rep, "main->grow", 0.01 * p * p)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["p"], df, [Metric("time", "s", "time", scope="inclusive")],
                     CallTree.from_paths(["main", "main->grow"]))
    pred = {r["callpath"]: r for r in model(exp, ["time"]).predict({"p": 64})}
    assert pred["main->grow"]["value"] == pytest.approx(0.01 * 64 ** 2, rel=1e-6)
    assert pred["main"]["value"] == pytest.approx(12.0, rel=1e-6)
    above = [n for n in pred["main->grow"]["notes"] if n.startswith("predicted above its parent main")]
    assert len(above) == 1
    grows = build_report(exp, ReportOptions(target={"p": 64})).answers[0]
    assert grows["callpath"] == "main->grow" and above[0] in grows["notes"]


def test_what_grows_says_the_measured_growth_and_a_model_that_does_not_follow_it():
    """LULESH's TimeIncrement (single runs, avg per rank): 7.862, 10.84, 13.33, 8.482, 16.42 s at
    jobsize 27..343.  The ranking's increase counts the measured growth (7.862 -> 16.42 s); the
    model cannot follow the dip at 216 and predicts less than the last run at the target: the answer
    gives the two measurements and says so, instead of "grows ... to the target" next to a smaller
    model value."""
    js, ti = (27, 64, 125, 216, 343), (7.862, 10.84, 13.33, 8.482, 16.42)
    rows = []
    for j, t in zip(js, ti):
        rows += [(j, 0, "main", 36.0 + t), (j, 0, "main->work", 36.0), (j, 0, "main->step", t)]
    df = pd.DataFrame(rows, columns=["jobsize", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["jobsize"], df, [Metric("time", "s", "time", scope="inclusive")],
                     CallTree.from_paths(["main", "main->work", "main->step"]))
    rep = build_report(exp, ReportOptions(target={"jobsize": 4096}))
    grows = rep.answers[0]
    assert grows["callpath"] == "main->step"
    assert grows["measured"] == {"first": 7.862, "first_at": {"jobsize": 27.0}, "last": 16.42,
                                 "last_at": {"jobsize": 343.0}}
    at_target = next(r["value"] for r in model(exp, ["time"]).predict({"jobsize": 4096})
                     if r["callpath"] == "main->step")
    assert at_target < 16.42          # the fit's own number: it does not follow the measured growth
    assert grows["follows"] is False and "does not follow the growth" in grows["answer"]
    assert rep.to_dict()["answers"][0]["measured"]["last"] == 16.42


def test_what_grows_of_a_followed_growth_gives_the_two_measurements_only():
    rep = build_report(_exp(), ReportOptions(target={"p": 64}))
    grows = rep.answers[0]
    # comm(1) = 0.5 and comm(16) = 8.5 by the generating formula; its model follows it beyond
    assert grows["measured"]["first"] == pytest.approx(comm(1)) and grows["measured"]["last"] == pytest.approx(comm(16))
    assert (grows["measured"]["first_at"], grows["measured"]["last_at"]) == ({"p": 1.0}, {"p": 16.0})
    assert grows["follows"] is True and "does not follow" not in grows["answer"]


def test_the_cost_of_an_exclusive_metric_is_the_roots_inclusive_time():
    """CUBE stores time exclusive: the root's own series is only its time outside its callees (here
    main's 1 s), which the answer gave as the run's cost at the target while its callee comm alone
    costs 2 log2(64) + 0.5 = 12.5 s there.  The run's cost is main with its callees: the generating
    formula 1 + 10 + 2 log2(p) + 0.5 at p = 64, 23.5 s (exact data): the sum of the models under main,
    the total `advise` takes."""
    rows = []
    for p in PS:
        for rep in (0, 1):
            rows += [(p, rep, "main", MAIN_SELF), (p, rep, "main->solve", SOLVE), (p, rep, "main->comm", comm(p))]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["p"], df, [Metric("time", "s", "time", scope="exclusive")],
                     CallTree.from_paths(["main", "main->solve", "main->comm"]))
    rep = build_report(exp, ReportOptions(target={"p": 64}))
    cost = rep.answers[1]
    assert cost["question"].startswith("What will it cost") and cost["callpath"] == "main"
    assert cost["value"] == pytest.approx(MAIN_SELF + SOLVE + comm(64), rel=1e-6)
    assert cost["lower"] <= cost["value"] <= cost["upper"]
    assert "with its callees" in cost["answer"]


def test_what_grows_with_one_process_count_names_no_measured_growth():
    """Runs at one process count (hpccg-n: p = 2 throughout, n varied): the smallest and the largest
    run by process count are the same point, and the answer said "measured 2.503 to 2.503 s from
    p=2, n=40 to p=2, n=40".  It now names the one measurement (comm at n = 16: 2 log2(16) + 0.5 =
    8.5, the generating formula) and says that nothing measured grows per process."""
    rows = []
    for n in PS:
        for rep in (0, 1):
            rows += [(2, n, rep, "main", MAIN_SELF + SOLVE + comm(n)), (2, n, rep, "main->solve", SOLVE),
                     (2, n, rep, "main->comm", comm(n))]
    df = pd.DataFrame(rows, columns=["p", "n", "rep", "callpath", "value"]).assign(metric="time")
    exp = Experiment(["p", "n"], df, [Metric("time", "s", "time", scope="inclusive")],
                     CallTree.from_paths(["main", "main->solve", "main->comm"]))
    grows = build_report(exp, ReportOptions(target={"p": 2, "n": 64})).answers[0]
    assert grows["callpath"] == "main->comm"
    m = grows["measured"]
    assert m["first_at"] == m["last_at"] == {"p": 2.0, "n": 16.0} and m["last"] == pytest.approx(comm(16))
    assert "measured 8.5 to 8.5" not in grows["answer"]
    assert "predicted from its 8.5 s measured at p=2, n=16" in grows["answer"]
    assert "one process count" in grows["answer"]


def test_scaling_guess_follows_the_total_work_not_one_pairs_time():
    """CoMD's campaigns (n the global box, runs at fixed n strong scaling): at the largest n the p = 2
    run's wall time was above p = 1's on a shared machine, and the report, from that pair's times
    alone, guessed "weak scaling from p=1".  The guess is now kernel identification's rule
    (kernels.guess_scaling): the total work on every line of the other parameters, instructions
    when the profile has them.  Here (as CoMD under cachegrind) the instructions per run are the
    same at every p (strong by hand: 4e9 per run, divided among the ranks) while the time per rank
    grows at the largest n."""
    rows = []
    for n, t1, t2 in ((10, 1.0, 0.55), (12, 2.0, 1.1), (14, 3.0, 3.3)):
        for p, t in ((1, t1), (2, t2), (4, t2 * 0.6)):
            for r in range(p):
                rows += [(p, n, 0, r, "app->ljForce", "Ir", 4e9 * n / 10 / p)]
            rows += [(p, n, 0, 0, "app", "time", t)]
    df = pd.DataFrame(rows, columns=["p", "n", "rep", "rank", "callpath", "metric", "value"])
    exp = Experiment(["p", "n"], df, [Metric("time", "s", "time", "inclusive"),
                                      Metric("Ir", "#", "count", "exclusive", exact=True)],
                     CallTree.from_paths(["app", "app->ljForce"]))
    w = df[df["metric"] == "Ir"].groupby(["n", "p"])["value"].sum().unstack("p")
    assert (w.nunique(axis=1) == 1).all()                                 # the premise: the same work at every p
    t = df[(df["metric"] == "time") & (df["n"] == 14)].set_index("p")["value"]
    assert 4 * t[4] > 1 * t[1]                                            # and more time x ranks at the largest n
    sl = build_report(exp, ReportOptions(metric="time")).scaling_loss
    assert sl["mode"] == "strong" and sl["guessed"] is True
    assert "Ir" in sl["guessed_from"]


def test_comd_time_alone_is_not_guessed_weak():
    """CoMD's time-only campaign (tests/data/comd/md.perfcast): n is the global box, so the runs at a
    fixed n are strong scaling (PROVENANCE.md); the report guessed weak from n = 28's pair, whose p = 2
    wall time exceeds p = 1's (read with pandas).  Time alone over one doubling cannot tell (the
    scaling rule's 'undetermined'): said, never weak."""
    from pathlib import Path

    from perfcast.io import load

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    app = v[(v["metric"] == "time") & (v["callpath"] == "app")].groupby(["n", "p"])["value"].mean().unstack("p")
    assert app.loc[28.0, 2.0] > app.loc[28.0, 1.0]                        # the premise
    rep = build_report(load([store]), ReportOptions())
    assert rep.scaling_loss is None or rep.scaling_loss["mode"] == "strong"
    assert rep.scaling_loss is not None or any("could not be told" in n for n in rep.notes)


def test_comd_nested_timers_are_no_stack_of_own_costs():
    """CoMD (tests/data/comd/md.perfcast): the timers CoMD printed nest (their sum exceeds the run's at
    every point, pandas), so none has an own (exclusive) time: the report's cost breakdown stacked
    them (total over loop over timestep ...: the same seconds three times, app's negative rest left
    out) and, once they had none, drew an empty chart.  Now no breakdown, the reason in the notes."""
    from pathlib import Path

    from perfcast.io import load

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    t = v[v["metric"] == "time"].groupby(["p", "n", "rep", "callpath"])["value"].sum()
    t = t.groupby(["p", "n", "callpath"]).mean().unstack("callpath")
    assert (t.drop(columns="app").sum(axis=1) > t["app"]).all()          # the premise
    rep = build_report(load([store]), ReportOptions())
    assert rep.cost_breakdown is None
    assert any(n.startswith("No cost breakdown") and "timers nest" in n for n in rep.notes)


def test_comd_scaling_guess_does_not_call_rank_0s_time_a_sum_over_ranks():
    """The inferred-scaling text of CoMD's time-only campaign said "the application's total time
    summed over the ranks", while only rank 0 holds the time (read with pandas): the total work it
    compares is rank 0's time times p.  It says so now."""
    from pathlib import Path

    from perfcast.io import load

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    assert set(v.loc[v["metric"] == "time", "rank"].unique()) == {0}      # the premise: rank 0 only
    rep = build_report(load([store]), ReportOptions())
    said = [n for n in rep.notes if "inferred: " in n]
    said += [rep.scaling_loss["guessed_from"]] if rep.scaling_loss and rep.scaling_loss.get("guessed") else []
    assert said
    for s in said:
        assert "summed over the ranks" not in s
        assert "time at rank 0 (the only location holding it) times p" in s

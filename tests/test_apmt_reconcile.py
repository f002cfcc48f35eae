"""Every prediction of the run side by side (issue 23 item 1; apmt/reconcile.py): the APMT total, the
PMNF models of the measured run time and of the kernels' timers, what APMT leaves out, how much of
the measured time it accounts for, and one verdict.  On a campaign recorded on this project's
2-core VM (bench/data/jacobi-p: cachegrind, timers and PMPI of examples/jacobi at p = 1..16); the
measured means by hand with pandas, the PMNF values against `perfcast predict` itself."""

import math

import numpy as np
import pandas as pd
import pytest

from perfcast import io
from perfcast.apmt.model import fit_apmt
from perfcast.apmt.reconcile import PARTIAL, reconcile, verdict

from conftest import REPO, cli, cli_json

CAMPAIGN = REPO / "bench" / "data" / "jacobi-p" / "jacobi-p.perfcast"
TIMERS = {"compute_sweep": "app->compute"}


def test_verdict_rules():
    run = {"value": 1.0, "lower": 0.8, "upper": 1.2}
    assert verdict(0.9, run, 0.95, False, "app").best == "agree"
    assert verdict(0.9, run, PARTIAL / 2, False, "app").best == "pmnf"        # APMT holds part of the run
    assert "4.0%" in verdict(0.9, run, 0.04, False, "app").text
    assert "oversubscribed" in verdict(0.9, run, 0.04, True, "app").text
    assert verdict(0.5, run, 0.9, False, "app").best == "pmnf"                 # outside, times trusted
    assert verdict(0.5, run, 0.9, True, "app").best == "apmt"                  # outside, times oversubscribed
    assert verdict(0.5, None, None, False).best == "apmt"
    assert verdict(0.5, {"value": 1.0, "lower": None, "upper": None}, 0.9, False).best == "pmnf"
    # a PMNF time below zero is no estimate (the law does not hold there), whatever the coverage
    neg = {"value": -5.0, "lower": -5.01, "upper": -4.99}
    assert verdict(0.5, neg, 0.9, False).best == "apmt" and verdict(0.5, neg, PARTIAL / 2, False).best == "apmt"


@pytest.fixture(scope="module")
def recorded():
    exp = io.load([CAMPAIGN])
    model = fit_apmt(exp, timers=TIMERS)
    return exp, model, model.predict({"p": 32})


def test_side_by_side_on_a_recorded_campaign(recorded, capsys):
    exp, model, pred = recorded
    rec = reconcile(exp, model, pred, TIMERS)
    assert rec["apmt"]["total"] == pytest.approx(pred.total)
    # the measured run time at the largest profiled point the VM's 2 cores held (p = 2; the runs at
    # p = 4..16 measure descheduling too), by hand: per repetition the slowest rank, then the mean over
    # the repetitions
    d = exp.data
    d = d[(d["metric"] == "time") & (d["callpath"] == "app") & (d["p"] == 2)]
    by_hand = d.groupby("rep")["value"].max().mean()
    cov = rec["coverage"]
    assert cov["at"] == {"p": 2.0} and cov["callpath"] == "app"
    assert cov["measured"] == pytest.approx(by_hand, rel=1e-12)
    assert cov["apmt"] == pytest.approx(model.predict({"p": 2}).total, rel=1e-12)
    assert cov["value"] == pytest.approx(cov["apmt"] / by_hand, rel=1e-12)
    # the PMNF numbers are the ones `perfcast predict` prints for the same series
    code, out, err = cli(capsys, "predict", CAMPAIGN, "--at", "p=32", "--metric", "time", "--callpath", "app",
                         "--callpath", "app->compute", "--ranks", "max", "--json")
    rows = {r["callpath"]: r for r in cli_json(out, "predictions")["items"]}
    run, = rec["runs"]
    assert run["pmnf"]["value"] == pytest.approx(rows["app"]["value"], rel=1e-12)
    assert run["pmnf"]["upper"] == pytest.approx(rows["app"]["upper"], rel=1e-12)
    k, = rec["kernels"]
    assert k["kernel"] == "compute_sweep" and k["timer"] == "app->compute"
    assert k["apmt"] == pytest.approx(pred.kernels["compute_sweep"]["total"])
    assert k["pmnf"]["value"] == pytest.approx(rows["app->compute"]["value"], rel=1e-12)
    # inside the interval agrees, except below the value in an interval clipped at 0 (here: APMT
    # 0.0008 s against 0.00395 s [0 (clipped), 0.13]): nothing smaller could disagree
    below_clipped = k["pmnf"]["clipped"] and k["apmt"] < k["pmnf"]["value"]
    assert k["agree"] == (None if below_clipped else k["pmnf"]["lower"] <= k["apmt"] <= k["pmnf"]["upper"])
    # p up to 16 on the 2-core VM: said, and the verdict follows the rules above
    assert rec["oversubscribed"]["over"] == [4.0, 8.0, 16.0]
    want = verdict(pred.total, run["pmnf"], cov["value"], True, "app", "the largest profiled point within the cores (p=2)")
    assert rec["verdict"] == {"best": want.best, "text": want.text}


def test_breakdown_command_prints_and_writes_it(capsys):
    args = ["predict", CAMPAIGN, "--breakdown", "--at", "p=32", "--timer", "compute_sweep=app->compute"]
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    doc = cli_json(out, "breakdown")
    rec, = doc["reconciliation"]
    assert rec["verdict"]["best"] in ("pmnf", "apmt", "agree") and rec["coverage"]["callpath"] == "app"
    code, out, err = cli(capsys, *args)
    assert code == 0 and "every prediction of the run at p=32" in out and "=> " in out


def test_report_shows_it_with_the_apmt_breakdown(recorded, tmp_path, capsys):
    import html

    exp, model, _ = recorded
    out_html = tmp_path / "r.html"
    code, out, err = cli(capsys, "report", CAMPAIGN, "-o", out_html, "--timer", "compute_sweep=app->compute",
                         "--target", "p=32")
    assert code == 0, err
    page = html.unescape(out_html.read_text())
    rec = reconcile(exp, model, model.predict({"p": 32}))       # the model's own timers
    assert rec["kernels"][0]["timer"] == "app->compute"
    assert "Every prediction of the run at p=32" in page and rec["verdict"]["text"] in page
    # what the model says of its data, as predict --breakdown prints it: among it, that the effective
    # CPI comes from the runs within the VM's 2 cores, the others (p > 2 in the store) oversubscribed
    over = sorted(int(v) for v in exp.data["p"].unique() if v > 2)
    said = page.split("What the APMT model says of its data", 1)[1].split("</details>", 1)[0]
    assert f"the runs at p = {', '.join(map(str, over))} were oversubscribed" in said
    assert all(n in said for n in model.notes)


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    """The campaign without its p = 16 runs, and those runs as validation runs (never fitted)."""
    from perfcast import store

    exp = io.load([CAMPAIGN])
    train = exp.replace(data=exp.data[exp.data["p"] < 16].reset_index(drop=True))
    val = exp.replace(data=exp.data[exp.data["p"] == 16].reset_index(drop=True))
    d = tmp_path_factory.mktemp("held")
    store.write(train, d / "train.perfcast")
    store.write(val, d / "val.perfcast")
    return train, val, d / "train.perfcast", d / "val.perfcast"


def test_the_verdict_checked_against_the_run_measured_at_the_target(held_out, capsys):
    train, val, train_file, val_file = held_out
    model = fit_apmt(train, timers=TIMERS)
    pred = model.predict({"p": 16})
    rec = reconcile(train, model, pred, TIMERS, measured=val)
    c = rec["check"]
    # the measured run time at p = 16 by hand: per repetition the slowest rank, then the mean
    d = val.data
    d = d[(d["metric"] == "time") & (d["callpath"] == "app")]
    by_hand = d.groupby("rep")["value"].max().mean()
    assert c["callpath"] == "app" and c["at"] == {"p": 16.0}
    assert c["value"] == pytest.approx(by_hand, rel=1e-12) and c["repetitions"] == d["rep"].nunique()
    run, = rec["runs"]
    assert c["error"]["apmt"] == pytest.approx((pred.total - by_hand) / by_hand, rel=1e-12)
    assert c["error"]["pmnf"] == pytest.approx((run["pmnf"]["value"] - by_hand) / by_hand, rel=1e-12)
    assert c["inside"] == (run["pmnf"]["lower"] <= by_hand <= run["pmnf"]["upper"])
    closer = "apmt" if abs(pred.total - by_hand) < abs(run["pmnf"]["value"] - by_hand) else "pmnf"
    assert c["closer"] == closer
    best = rec["verdict"]["best"]
    assert c["confirms"] == (None if best == "agree" else best == closer)
    assert c["oversubscribed"] is not None          # 16 ranks on the 2-core VM that recorded it
    # the command: the point from the validation runs, the same check in JSON and in words
    args = ["predict", train_file, "--breakdown", "--validate", val_file, "--timer", "compute_sweep=app->compute"]
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    got, = cli_json(out, "breakdown")["reconciliation"]
    assert got["check"]["value"] == pytest.approx(by_hand, rel=1e-12)
    assert got["check"]["error"]["apmt"] == pytest.approx(c["error"]["apmt"], rel=1e-9)
    code, out, err = cli(capsys, *args)
    assert code == 0 and "checked at p=16 (measured, not fitted): app" in out


def test_no_check_without_the_run_time_measured_there(held_out):
    train, val, _, _ = held_out
    model = fit_apmt(train, timers=TIMERS)
    calls = val.select(metric=[m for m in val.metrics if m != "time"])
    rec = reconcile(train, model, model.predict({"p": 16}), TIMERS, measured=calls)
    assert rec["check"] is None
    rec = reconcile(train, model, model.predict({"p": 32}), TIMERS, measured=val)     # measured at p=16 only
    assert rec["check"] is None


def test_report_checks_the_verdict_with_the_validation_runs(held_out, tmp_path, capsys):
    import html

    train, val, train_file, val_file = held_out
    out_html = tmp_path / "r.html"
    code, out, err = cli(capsys, "report", train_file, "-o", out_html, "--timer", "compute_sweep=app->compute",
                         "--target", "p=16", "--validate", val_file)
    assert code == 0, err
    page = html.unescape(out_html.read_text())
    model = fit_apmt(train, timers=TIMERS)
    rec = reconcile(train, model, model.predict({"p": 16}), measured=val)
    from perfcast.apmt.reconcile import check_line
    assert rec["check"] is not None and check_line(rec["check"]) in page


def _timing_campaign(path, params=("p",), noisy=False, ps=(1, 2, 4, 8, 16, 32, 64)):
    """A timing campaign of the 'same application' (a tidy CSV): app = 0.5 + 0.1 p and app->compute
    = 0.01 p seconds exactly, 3 runs at p = 1..64 (more and larger points than the counter runs);
    ``noisy``: 20% noise on them and six more timers under app with 40% noise."""
    import pandas as pd

    rng = np.random.default_rng(8)
    rows = []
    for p in ps:
        for rep in range(3):
            vals = [("app", 0.5 + 0.1 * p, 0.2), ("app->compute", 0.01 * p, 0.2)]
            if noisy:
                vals += [(f"app->t{i}", 0.001 * (i + 1) * p ** (i / 4), 0.4) for i in range(6)]
            for cp, v, sd in vals:
                v = v * (1 + rng.uniform(-sd, sd)) if noisy else v
                rows.append({**{k: p for k in params}, "callpath": cp, "metric": "time", "value": v, "rep": rep,
                             "unit": "s", "scope": "inclusive"})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_run_time_from_a_timing_campaign(recorded, tmp_path, capsys):
    # one PMNF estimate of the run: the timing campaign's laws at the target (0.5 + 0.1 * 128 and
    # 0.01 * 128), while the coverage stays APMT's total over the time measured with the counters
    exp, model, _ = recorded
    pred = model.predict({"p": 128})
    times = io.load([_timing_campaign(tmp_path / "times.csv")])
    own = reconcile(exp, model, pred, TIMERS)
    rec = reconcile(exp, model, pred, TIMERS, times=times, times_label="times.csv")
    run, = rec["runs"]
    assert run["pmnf"]["value"] == pytest.approx(0.5 + 0.1 * 128, rel=1e-9)
    k, = rec["kernels"]
    assert k["pmnf"]["value"] == pytest.approx(0.01 * 128, rel=1e-9)
    # (the same numbers; with another campaign's times it also says when its own run shared the cores)
    same = lambda c: {k: v for k, v in c.items() if k != "shared"}  # noqa: E731
    assert same(rec["coverage"]) == same(own["coverage"]) and rec["times_from"] == "times.csv"
    code, out, err = cli(capsys, "predict", CAMPAIGN, "--breakdown", "--at", "p=128", "--timer",
                         "compute_sweep=app->compute", "--run-times", tmp_path / "times.csv")
    assert code == 0, err
    line, = [ln for ln in out.splitlines() if ln.strip().startswith("PMNF app ")]
    assert f"fitted on {tmp_path / 'times.csv'}" in line
    # the report: its cost answer (this campaign's own model) names the timing campaign's estimate
    code, out, err = cli(capsys, "report", CAMPAIGN, "-o", tmp_path / "r.html", "--target", "p=128", "--timer",
                         "compute_sweep=app->compute", "--run-times", tmp_path / "times.csv", "--json")
    assert code == 0, err
    cost, = [a for a in cli_json(out, "report")["items"][0]["answers"] if a["question"].startswith("What will it cost")]
    assert cost["callpath"] == "app" and any(f"timing campaign {tmp_path / 'times.csv'}" in n for n in cost["notes"])
    # a report without an APMT breakdown has nothing to put it next to: refused, nothing written
    code, out, err = cli(capsys, "report", tmp_path / "times.csv", "-o", tmp_path / "t.html", "--run-times",
                         tmp_path / "times.csv")
    assert code == 2 and "--run-times: no APMT breakdown" in err and not (tmp_path / "t.html").exists()
    # a campaign over other parameters is not the same application's run: one line, exit 2
    _timing_campaign(tmp_path / "other.csv", params=("nodes",))
    code, out, err = cli(capsys, "predict", CAMPAIGN, "--breakdown", "--at", "p=128", "--run-times",
                         tmp_path / "other.csv")
    assert code == 2 and "other.csv: its parameters (nodes) differ" in err and "Traceback" not in err


def test_the_pmnf_run_time_is_what_predict_says(recorded, tmp_path):
    """The breakdown's PMNF estimates are `perfcast predict`'s numbers for the same experiment: the
    whole time metric fitted (a series' drift and noise shape are pooled over its metric's series;
    the demo's app came out 0.928 s from its timers alone against predict's 0.827 s)."""
    import perfcast

    exp, model, _ = recorded
    at = {"p": 128.0}
    pred = model.predict(at)
    times = io.load([_timing_campaign(tmp_path / "times.csv", noisy=True)])
    for src, rec in ((exp, reconcile(exp, model, pred, TIMERS)),
                     (times, reconcile(exp, model, pred, TIMERS, times=times))):
        want = {r["callpath"]: r for r in perfcast.model(src, ["time"], locations="max").predict(at)}
        got = [(x["callpath"], x["pmnf"]) for x in rec["runs"]] + [(k["timer"], k["pmnf"]) for k in rec["kernels"]]
        assert got
        for cp, row in got:
            assert (row["value"], row["lower"], row["upper"]) == (want[cp]["value"], want[cp]["lower"],
                                                                  want[cp]["upper"]), cp


def test_breakdown_text_marks_negative_and_clipped_pmnf_estimates_as_its_json(capsys, data_dir, tmp_path):
    """The text printed a negative PMNF estimate as a plain run time and showed clipped lower bounds
    as '0'.  Every PMNF line now says what the --json says: on LULESH weak scaling at jobsize=27
    (clipped bounds), and below the data of a time that is -10 + 5 log2(p) exactly at p = 8..128:
    -5 s at p = 2 (by hand)."""
    src = tmp_path / "neg.csv"
    src.write_text("p,rep,callpath,metric,value,scope\n" + "".join(
        f"{p},{r},{cp},time,{f * (-10 + 5 * math.log2(p))!r},inclusive\n"
        for p in (8, 16, 32, 64, 128) for r in (0, 1) for cp, f in (("app", 1.0), ("app->solve", 0.5))))
    code, js, err = cli(capsys, "predict", src, "--at", "p=2", "--breakdown", "--json")
    assert code == 0, err
    (app,) = [r["pmnf"] for r in cli_json(js, "breakdown")["reconciliation"][0]["runs"] if r["callpath"] == "app"]
    assert app["value"] == pytest.approx(-5.0, rel=1e-3)
    code, out, err = cli(capsys, "predict", src, "--at", "p=2", "--breakdown")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  PMNF app ")]
    assert "(!) negative" in line
    lulesh = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    args = ("predict", lulesh, "--at", "jobsize=27", "--breakdown")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    code, js, err = cli(capsys, *args, "--json")
    assert code == 0, err
    runs = cli_json(js, "breakdown")["reconciliation"][0]["runs"]
    # one run time (main, the top-level callpath measuring the most: the file's values at jobsize=343)
    # with its interval; the other top-level callpaths on one line as parts of the run
    [run] = [r for r in runs if r["run_time"]]
    assert run["callpath"] == "main" and len(runs) >= 5
    [ln] = [ln for ln in out.splitlines() if ln.startswith("  PMNF ")]
    assert ln.startswith("  PMNF main (") and "the run time" in ln
    assert bool(run["pmnf"]["clipped"]) == ("0 (clipped)" in ln) and ("(!) negative" in ln) == (run["pmnf"]["value"] < 0)
    [parts] = [ln for ln in out.splitlines() if ln.startswith("  parts of the run beside main")]
    for r in runs:
        if r is run:
            continue
        said = parts.split(f" {r['callpath']} ", 1)[1].split(",", 1)[0]
        assert float(said.split(" s", 1)[0]) == pytest.approx(r["pmnf"]["value"], rel=1e-3), said
        assert (r["pmnf"]["value"] < 0) == ("(!) negative" in said), said
    assert any(r["pmnf"]["clipped"] for r in runs)


@pytest.mark.parametrize("opts", [(), ("--terms", "2", "--negative")])
def test_kernel_times_are_predicts_numbers(capsys, data_dir, opts):
    """LULESH weak scaling (issue 16 item 1): the breakdown fitted each kernel time with its own options
    (two terms, negative exponents) and put the flat CalcKinematicsForElems (2.83-3.08 s measured) at
    32.08 s at jobsize=4096, where `perfcast predict` says 2.926 s (their mean).  A kernel whose time is a series of
    the experiment (a leaf function of one callpath) is now that series' model in predict's model set,
    with predict's --terms/--negative: the same number, said so next to it.  A kernel with timed
    callees (CalcHourglassControlForElems) is its own time: predict's inclusive number is shown beside
    it as the callpath's, and the kernel's lies within its own measured values (the file's inclusive
    time less its callee's, per point)."""
    lulesh = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    metric = "avg#inclusive#sum#time.duration"
    code, js, err = cli(capsys, "predict", lulesh, "--at", "jobsize=4096", "--breakdown", "--json", *opts)
    assert code == 0, err
    doc = cli_json(js, "breakdown")
    pred, rec = doc["items"][0], doc["reconciliation"][0]
    code, js, err = cli(capsys, "predict", lulesh, "--at", "jobsize=4096", "--metric", metric, "--json", *opts)
    assert code == 0, err
    rows = {r["callpath"]: r for r in cli_json(js, "predictions")["items"]}
    rel = {k["kernel"]: k for k in rec["kernels"]}
    same = [k for k in rel.values() if k["relation"] == "same"]
    assert "CalcKinematicsForElems" in {k["kernel"] for k in same} and len(same) >= 3
    for k in same:
        want = rows[k["timer"]]["value"]
        assert pred["kernels"][k["kernel"]]["total"] == pytest.approx(max(want, 0.0), rel=1e-12), k["kernel"]
        assert k["pmnf"]["value"] == pytest.approx(want, rel=1e-12)
    kin = pred["kernels"]["CalcKinematicsForElems"]["total"]
    t = io.load([lulesh]).data
    t = t[t["metric"] == metric].astype({"callpath": str})
    if not opts:
        # flat: a constant, the mean of its five measured values (one run per jobsize), by hand
        flat = t[t["callpath"] == rel["CalcKinematicsForElems"]["timer"]]["value"]
        assert len(flat) == 5 and kin == pytest.approx(float(flat.mean()), rel=1e-12)
    hg = rel["CalcHourglassControlForElems"]
    assert hg["relation"] == "inclusive" and hg["pmnf"]["value"] == pytest.approx(rows[hg["timer"]]["value"], rel=1e-12)
    # its own time by hand from the file (one run per jobsize): inclusive minus the callee's, per point
    cp = hg["timer"]
    own = []
    for _, g in t.groupby("jobsize"):
        v = g.set_index("callpath")["value"]
        own.append(v[cp] - v[cp + "->CalcFBHourglassForceForElems"])
    assert len(own) == 5
    total = pred["kernels"]["CalcHourglassControlForElems"]["total"]
    assert min(own) <= total <= max(own) < hg["pmnf"]["value"]


def test_compare_names_communication_wider_than_the_measured_total(held_out, capsys):
    """`perfcast compare` took the PMPI time of every modelled routine (every call of the run: the
    barrier before jacobi's timed loop, the final reductions after it) as a part of the loop timer
    app->total and printed a communication error below -100% (the demo: 0.360 s > 0.334 s).  At p=16
    of the recorded campaign (by hand: PMPI times summed per rank, the slowest rank, mean over the
    runs; app->total's slowest rank, mean) the part exceeds the whole: said, and no communication
    error is given."""
    _, val, train_path, val_path = held_out
    code, out, err = cli(capsys, "compare", train_path, "--validate", val_path, "--timer", "compute_sweep=app->compute",
                         "--measure", "app->total", "--json")
    assert code == 0, err
    [row] = cli_json(out, "comparison")["validation"]["rows"]
    d = val.data.astype({"callpath": str})
    total = d[(d["metric"] == "time") & (d["callpath"] == "app->total")].groupby("rep")["value"].max().mean()
    routines = [f"MPI->MPI_{r}" for r in ("Allreduce", "Barrier", "Reduce", "Irecv", "Isend", "Waitall")]
    c = d[(d["metric"] == "pmpi_time") & d["callpath"].isin(routines)]
    comm = c.groupby(["rep", "rank"])["value"].sum().groupby("rep").max().mean()
    assert row["measured"] == pytest.approx(total, rel=1e-12) and row["comm_measured"] == pytest.approx(comm, rel=1e-12)
    assert comm > total and row["comm_error"] is None and "app->total" in row["comm_scope"]
    code, out, err = cli(capsys, "compare", train_path, "--validate", val_path, "--timer", "compute_sweep=app->compute",
                         "--measure", "app->total")
    assert code == 0, err
    said = [ln for ln in out.splitlines() if "exceeds the measured app->total" in ln]
    assert len(said) == 1 and said[0].startswith("p=16: ")
    assert "communication -" not in out


def test_the_run_time_of_an_exclusive_metric_is_the_roots_inclusive_time(data_dir):
    """CUBE stores time exclusive: the root main's own series is only the time outside its callees
    (1.3e-5 s of 4.5e-5 s at x=2000 in Extra-P's single-parameter CUBE set).  The breakdown took that
    as the run time, said APMT's 4.7e-5 s (the sum of the four exclusive times) accounts for 358% of
    it and that the two disagree.  The run time is main's inclusive time: at the largest profiled
    point, by hand, the sum of every callpath's exclusive time there; the PMNF run time the sum of
    predict's models under main (the total `advise` takes), checked against a held-out run the same way."""
    cubes = data_dir / "extrap" / "cubeset" / "single_parameter"
    exp = io.load([cubes])
    assert exp.metrics["time"].scope == "exclusive"
    d = exp.data[exp.data["metric"] == "time"]
    # one location per run here: the whole run's time per point is the sum of the exclusive times
    assert not {"rank", "thread"} & set(d.columns) or d.groupby(["x", "callpath"]).size().max() == 1
    totals = d.groupby("x")["value"].sum()
    model = fit_apmt(exp)
    pred = model.predict({"x": 4000.0})
    rec = reconcile(exp, model, pred)
    [run] = [r for r in rec["runs"] if r["run_time"]]
    assert run["callpath"] == "main" and run["made_inclusive"]
    assert run["measured_at_largest"] == pytest.approx(totals[2000.0], rel=1e-12)
    cov = rec["coverage"]
    assert cov["measured"] == pytest.approx(totals[2000.0], rel=1e-12)
    assert cov["value"] == pytest.approx(cov["apmt"] / totals[2000.0], rel=1e-12)
    # the PMNF run time is the sum of predict's models under main (the total `advise` takes), its
    # interval their half-widths combined as independent errors (root sum of squares), by hand
    import perfcast

    rows = [r for r in perfcast.model(exp, ["time"], locations="max").predict({"x": 4000.0})]
    assert {r["callpath"] for r in rows} == {"main", "main->init_mat", "main->mat_mul", "main->zero_mat"}
    total = sum(r["value"] for r in rows)
    assert run["pmnf"]["value"] == pytest.approx(total, rel=1e-12)
    assert run["pmnf"]["lower"] == pytest.approx(
        max(0.0, total - math.sqrt(sum((r["value"] - r["lower"]) ** 2 for r in rows))), rel=1e-12)
    assert run["pmnf"]["upper"] == pytest.approx(
        total + math.sqrt(sum((r["upper"] - r["value"]) ** 2 for r in rows)), rel=1e-12)
    # (main's own model, the mean of its exclusive times, lay below every measured total)
    assert run["pmnf"]["value"] > totals.max()
    # the kernel main keeps its own (exclusive) time and predict's number for it
    [k] = [k for k in rec["kernels"] if k["kernel"] == "main"]
    assert k["pmnf"]["value"] == pytest.approx(next(r["value"] for r in rows if r["callpath"] == "main"), rel=1e-12)
    # the check against the run at x=2000 held out: its measured run time is that run's total too
    train = exp.replace(data=exp.data[exp.data["x"] < 2000].reset_index(drop=True))
    val = exp.replace(data=exp.data[exp.data["x"] == 2000].reset_index(drop=True))
    m2 = fit_apmt(train)
    chk = reconcile(train, m2, m2.predict({"x": 2000.0}), measured=val)["check"]
    assert chk["value"] == pytest.approx(totals[2000.0], rel=1e-12)


def test_a_larger_problem_is_not_set_beside_the_profiled_sizes_pmnf(recorded):
    # --size-ratio 2: APMT's total is of a problem twice the profiled size; the PMNF models of the
    # measured times know the profiled size only, and their prediction at p=32 (another run) was shown
    # as "every prediction of the run", the kernel's two numbers "agree"
    exp, model, _ = recorded
    pred = model.predict({"p": 32}, size_ratio=2)
    rec = reconcile(exp, model, pred, TIMERS)
    assert rec["runs"] == [] and rec["kernels"] == [] and rec["coverage"] is None
    assert rec["verdict"]["best"] == "apmt" and "2x the profiled size" in rec["verdict"]["text"]
    assert rec["apmt"]["total"] == pred.total


def test_the_check_says_when_an_estimate_was_fitted_on_the_target_run(held_out, recorded):
    # --run-times with the whole campaign (p = 1..16) and --validate at p=16: the PMNF run time was fitted
    # on the very runs it is checked against, yet the check said "measured, not fitted"
    train, val, _, _ = held_out
    exp, _, _ = recorded
    model = fit_apmt(train, timers=TIMERS)
    rec = reconcile(train, model, model.predict({"p": 16}), TIMERS, measured=val, times=exp, times_label="all")
    assert rec["check"]["fitted_on"] == ["pmnf"]
    from perfcast.apmt.reconcile import lines

    assert any("the PMNF model was fitted on runs at this point too: no independent check of it" in s
               for s in lines(rec))
    assert reconcile(train, model, model.predict({"p": 16}), TIMERS, measured=val)["check"]["fitted_on"] == []


def test_left_out_kernels_name_the_metric_of_their_share(recorded):
    # "rest (17.5% of the cost at p=16)": the cost is the instructions (Ir), not the time
    exp, model, pred = recorded
    rec = reconcile(exp, model, pred, TIMERS)
    rest, = rec["left_out"]
    assert rest["kernel"] == "rest" and rest["cost_metric"] == "Ir" and rest["at"] == "p=16"
    # the share of the application's Ir at p=16 outside compute_sweep, by hand from the kernel shares
    k = {x.name: x for x in model.kernelset.kernels}
    assert rest["cost_share"] == pytest.approx(1 - k["compute_sweep"].share["p=16"], rel=1e-9)
    from perfcast.apmt.reconcile import lines

    assert any(f"not in APMT's total: rest ({rest['cost_share']:.1%} of the Ir at p=16)" in s for s in lines(rec))


def test_breakdown_honours_level_and_refuses_options_it_cannot_use(capsys):
    # --level was ignored (the PMNF intervals beside the APMT total stayed 90%); --metric, --callpath,
    # --ranks, --averaged, --limit were accepted and did nothing
    args = ["predict", CAMPAIGN, "--breakdown", "--at", "p=32", "--timer", "compute_sweep=app->compute"]
    code, out, err = cli(capsys, *args, "--level", "0.5", "--json")
    assert code == 0, err
    rec, = cli_json(out, "breakdown")["reconciliation"]
    code, out, err = cli(capsys, "predict", CAMPAIGN, "--at", "p=32", "--metric", "time", "--callpath", "app",
                         "--ranks", "max", "--level", "0.5", "--json")
    row, = cli_json(out, "predictions")["items"]
    run, = rec["runs"]
    assert run["pmnf"]["level"] == 0.5
    assert run["pmnf"]["upper"] == pytest.approx(row["upper"], rel=1e-12)
    for extra in (["--metric", "time"], ["--callpath", "app"], ["--ranks", "max"], ["--averaged"], ["--limit", "3"]):
        code, out, err = cli(capsys, *args, *extra)
        assert code == 2 and out == "" and f"{extra[0]}: not with --breakdown" in err


def test_the_coverage_with_another_campaigns_times_says_when_its_run_shared_the_cores(recorded, tmp_path):
    """miniFE: counters from a cachegrind campaign up to p = 4 on the 2-core VM, times from a timing
    campaign (--run-times) at p = 1, 2.  The coverage compares APMT's total with the counter
    campaign's own run time at its largest point (p = 4, more ranks than cores), but the only note
    printed was the timing campaign's.  The recorded campaign ran p = 16 on 2 cores (its record:
    p = 4, 8, 16 oversubscribed); the timing CSV has no record."""
    from perfcast.apmt.reconcile import lines

    exp, model, _ = recorded
    pred = model.predict({"p": 128})
    times = io.load([_timing_campaign(tmp_path / "times.csv")])
    rec = reconcile(exp, model, pred, TIMERS, times=times, times_label="times.csv")
    assert rec["oversubscribed"] is None                  # the timing campaign's: no record
    cov = rec["coverage"]
    # now at the largest point the cores held (p = 2; the record: no other process busy then), so
    # there is no shared run to name
    assert cov["at"] == {"p": 2.0}
    assert cov["shared"] is None
    assert not any(ln.strip().startswith("note: that run time is the APMT experiment's") for ln in lines(rec))
    # its own times: the note above is already the experiment's, nothing added
    own = reconcile(exp, model, pred, TIMERS)
    assert own["coverage"]["shared"] is None and own["oversubscribed"]["over"] == [4.0, 8.0, 16.0]


def test_the_run_time_label_names_the_experiment_of_its_point(tmp_path, capsys):
    # the run-time scope is chosen where the counter campaign measured the most (its largest point),
    # its PMNF model is the timing campaign's: a timing campaign without that point (p = 1, 2, 4 only,
    # read back with pandas) must not be named as where it was measured
    import pandas as pd

    # the coverage's point: the largest p the VM's 2 cores held (the record: p = 4, 8, 16 had more ranks)
    times = _timing_campaign(tmp_path / "times.csv", ps=(1, 4))
    big = 2.0
    assert big in set(io.load([CAMPAIGN]).data["p"].astype(float))
    assert big not in set(pd.read_csv(times)["p"].astype(float))
    code, out, err = cli(capsys, "predict", CAMPAIGN, "--breakdown", "--at", "p=128", "--timer",
                         "compute_sweep=app->compute", "--run-times", times)
    assert code == 0, err
    line, = [ln for ln in out.splitlines() if ln.strip().startswith("PMNF app ")]
    clauses = line.split(";")
    at, = [c for c in clauses if f"p={big:g}" in c]
    assert str(times) not in at and "APMT experiment" in at
    fitted, = [c for c in clauses if str(times) in c]
    assert "fitted on" in fitted and f"p={big:g}" not in fitted


def test_a_value_below_the_pmnf_value_inside_an_interval_clipped_at_0_is_not_agreement():
    """CoMD at p=2, n=36 (predict cg.perfcast --breakdown --timer ljForce=app->force): 'ljForce:
    APMT 1.096 s, PMNF app->force 4.246 s [0 (clipped), 39.08]: agree' -- a factor 3.9 called
    agreement because the interval, clipped at 0, holds every value below the prediction (its
    lower end lies below zero: nothing smaller can disagree).  By hand: such a value is not
    comparable; above the value, and in an interval not clipped, the interval decides."""
    from perfcast.apmt.reconcile import agrees

    clipped = {"value": 4.246, "lower": 0.0, "upper": 39.08, "clipped": True}
    assert agrees(1.096, clipped) is None
    assert agrees(5.0, clipped) is True and agrees(40.0, clipped) is False
    free = {"value": 4.246, "lower": 3.0, "upper": 5.5, "clipped": False}
    assert agrees(4.0, free) is True and agrees(1.096, free) is False
    assert agrees(None, free) is None and agrees(1.0, None) is None
    assert agrees(1.0, {**free, "lower": None}) is None


def test_the_run_verdict_does_not_call_a_value_below_a_clipped_interval_agreement():
    """The run-level verdict follows the kernels' rule (reconcile.agrees): APMT's total below the
    PMNF value of the run time, in an interval clipped at 0, is not agreement (by hand: 1 s against
    4 s [0 (clipped), 40]); the PMNF model, fitted on the run time, is the estimate, said as not told
    apart; inside an interval that is not clipped the two agree, as before."""
    from perfcast.apmt.reconcile import verdict

    v = verdict(1.0, {"value": 4.0, "lower": 0.0, "upper": 40.0, "clipped": True}, None, False, "app")
    assert v.best == "pmnf" and "cannot tell" in v.text and "agree" not in v.text
    v = verdict(1.0, {"value": 4.0, "lower": 0.0, "upper": 40.0, "clipped": True}, None, True, "app")
    assert v.best == "apmt" and "cannot tell" in v.text
    assert verdict(4.2, {"value": 4.0, "lower": 3.0, "upper": 5.0, "clipped": False}, None, False, "app").best == "agree"
    assert verdict(4.2, {"value": 4.0, "lower": 0.0, "upper": 40.0, "clipped": True}, None, False, "app").best == "agree"


def test_report_shows_the_communication_only_breakdown_predict_shows(tmp_path, capsys):
    """jacobi-p (as CoMD's cg.perfcast): Ir from cachegrind, no cycles counter, no --timer, an MPI
    profile.  `predict --breakdown --run-times` gave the communication-only breakdown (the kernels
    "not in the total"), `report --run-times` refused it ("no APMT breakdown to put the run time next
    to").  Now the report holds the breakdown predict prints (one library call, fit_apmt), with no
    computation component (not modelled, not 0 s)."""
    import pandas as pd

    v = pd.read_parquet(CAMPAIGN / "values.parquet")
    assert "cycles" not in set(v["metric"]) and v["callpath"].astype(str).str.startswith("MPI->").any()  # premise
    code, out, err = cli(capsys, "report", CAMPAIGN, "-o", tmp_path / "r.html", "--target", "p=4",
                         "--run-times", CAMPAIGN, "--json")
    assert code == 0, err
    rep = cli_json(out, "report")["items"][0]
    comps = rep["apmt"]["components"]
    assert set(comps) == {"communication"} and rep["reconciliation"]["verdict"]
    for x, c in zip(rep["apmt"]["points"], comps["communication"]):
        code, out, err = cli(capsys, "predict", CAMPAIGN, "--breakdown", "--at", f"p={x:g}", "--json")
        assert code == 0, err
        pr = cli_json(out, "breakdown")["items"][0]
        assert pr["computation"] is None and c == pytest.approx(pr["communication_total"], rel=1e-12)


def test_breakdown_where_the_profile_has_no_point_to_point_message_is_zero_there(tmp_path, capsys):
    """cg-p's point-to-point volume is a strong-scaling law fitted from p = 2 on (log2(p)^-1: a pole
    at p = 1).  At p = 1 the profile has no point-to-point call (MPI_Isend, MPI_Irecv, MPI_Waitall
    calls summed over ranks, read with pandas: 0 there, 306 at p = 2), so the breakdown's point-to-
    point part is 0 there without evaluating the law; `predict --breakdown --at p=1` stopped with
    "undefined at p=1" and the report left its APMT section out for it."""
    store = REPO / "bench" / "data" / "cg-p" / "cg-p.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    p2p = v[v.callpath.isin(["MPI->MPI_Isend", "MPI->MPI_Irecv", "MPI->MPI_Waitall"]) & (v.metric == "calls")]
    by_p = p2p.groupby("p").value.sum()
    assert by_p.get(1.0, 0.0) == 0 and by_p.loc[2.0] > 0
    code, out, err = cli(capsys, "predict", store, "--breakdown", "--at", "p=1", "--json")
    assert code == 0, err
    item = cli_json(out, "breakdown")["items"][0]
    assert item["communication"]["point-to-point"] == 0.0
    code, out, err = cli(capsys, "report", store, "-o", tmp_path / "r.html", "--target", "p=1", "--json")
    assert code == 0, err
    assert not any(n.startswith("APMT breakdown not shown") for n in cli_json(out, "report")["items"][0]["notes"])

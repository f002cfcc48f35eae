"""Every prediction of the run side by side (issue 23 item 1; apmt/reconcile.py): the APMT total, the
PMNF models of the measured run time and of the kernels' timers, what APMT leaves out, how much of
the measured time it accounts for, and one verdict.  On a campaign recorded on this project's
2-core VM (bench/data/jacobi-p: cachegrind, timers and PMPI of examples/jacobi at p = 1..16); the
measured means by hand with pandas, the PMNF values against `perfcast predict` itself."""

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


@pytest.fixture(scope="module")
def recorded():
    exp = io.load([CAMPAIGN])
    model = fit_apmt(exp, timers=TIMERS)
    return exp, model, model.predict({"p": 32})


def test_side_by_side_on_a_recorded_campaign(recorded, capsys):
    exp, model, pred = recorded
    rec = reconcile(exp, model, pred, TIMERS)
    assert rec["apmt"]["total"] == pytest.approx(pred.total)
    # the measured run time at the largest profiled point, by hand: per repetition the slowest rank,
    # then the mean over the repetitions
    d = exp.data
    d = d[(d["metric"] == "time") & (d["callpath"] == "app") & (d["p"] == 16)]
    by_hand = d.groupby("rep")["value"].max().mean()
    cov = rec["coverage"]
    assert cov["at"] == {"p": 16.0} and cov["callpath"] == "app"
    assert cov["measured"] == pytest.approx(by_hand, rel=1e-12)
    assert cov["apmt"] == pytest.approx(model.predict({"p": 16}).total, rel=1e-12)
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
    assert k["agree"] == (k["pmnf"]["lower"] <= k["apmt"] <= k["pmnf"]["upper"])
    # p up to 16 on the 2-core VM: said, and the verdict follows the rules above
    assert rec["oversubscribed"]["over"] == [4.0, 8.0, 16.0]
    want = verdict(pred.total, run["pmnf"], cov["value"], True, "app")
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

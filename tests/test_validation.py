"""predict --validate: predictions compared with measurements the models were not fitted on."""


import pytest

from perfcast.analysis import validation
from perfcast.cli import main
from perfcast.io import load
from conftest import cli_items, cli_json, number_after


def _csv(path, rows, header="p,callpath,metric,rep,value"):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


@pytest.fixture
def runs(tmp_path):
    # fitted on p = 1..8: solve = 2 + 3 p, two repetitions at -1 % and +1 % of the formula
    small = []
    for p in (1, 2, 3, 4, 6, 8):
        t = 2 + 3 * p
        small += [(p, "main->solve", "time", 0, t * 0.99), (p, "main->solve", "time", 1, t * 1.01)]
    small_f = _csv(tmp_path / "small.csv", small)
    # measured at p = 16 (the formula: 50) and p = 32 (the formula: 98; measured 110 and 100, mean 105),
    # and a callpath the models do not have
    big = [(16, "main->solve", "time", 0, 50.0), (16, "main->solve", "time", 1, 50.0),
           (32, "main->solve", "time", 0, 110.0), (32, "main->solve", "time", 1, 100.0),
           (32, "main->other", "time", 0, 1.0)]
    return small_f, _csv(tmp_path / "big.csv", big)


def test_compare_against_a_hand_calculation(runs):
    small_f, big_f = runs
    big = load([big_f])
    means = validation.measured_means(big, ["p"])
    assert means[("main->solve", "time", (32.0,))] == (105.0, 2)
    rows = [{"callpath": "main->solve", "metric": "time", "at": {"p": 32.0}, "value": 98.0, "lower": 90.0,
             "upper": 106.0},
            {"callpath": "main->solve", "metric": "time", "at": {"p": 64.0}, "value": 194.0, "lower": None,
             "upper": None}]
    got = validation.compare(rows, means, ["p"])
    assert got[0]["measured"] == 105.0 and got[0]["repetitions"] == 2
    assert got[0]["error"] == pytest.approx(98 / 105 - 1) and got[0]["inside"] is True
    assert got[1]["measured"] is None and got[1]["error"] is None
    s = validation.summarize(got)
    assert s["compared"] == 1 and s["median_abs_error"] == pytest.approx(1 - 98 / 105)
    assert (s["inside"], s["with_interval"]) == (1, 1)
    assert validation.measured_points(big, ["p"]) == [{"p": 16.0}, {"p": 32.0}]


def test_cli_predicts_the_measured_points_and_reports_the_errors(runs, capsys):
    small_f, big_f = runs
    capsys.readouterr()
    assert main(["predict", str(small_f), "--validate", str(big_f), "--json"]) == 0
    doc = cli_json(capsys.readouterr().out, "predictions")
    rows = {(r["callpath"], r["at"]["p"]): r for r in doc["items"]}
    # the model recovers 2 + 3 p: exact at 16 (measured 50), 98 vs 105 measured at 32
    assert rows[("main->solve", 16.0)]["value"] == pytest.approx(50, rel=1e-3)
    assert rows[("main->solve", 16.0)]["error"] == pytest.approx(0, abs=1e-3)
    assert rows[("main->solve", 32.0)]["error"] == pytest.approx(98 / 105 - 1, abs=1e-3)
    assert rows[("main->solve", 32.0)]["measured"] == 105.0
    acc = doc["accuracy"]
    assert acc["compared"] == 2 and acc["max_abs_error"] == pytest.approx(1 - 98 / 105, abs=1e-3)
    # terminal: the table has the measured column and the summary line
    assert main(["predict", str(small_f), "--validate", str(big_f)]) == 0
    text = capsys.readouterr().out
    assert "Predictions vs measured" in text
    row32 = next(line for line in text.splitlines() if "p=32" in line)
    assert number_after(row32, "105 (outside) |") == pytest.approx(100 * (98 / 105 - 1), abs=0.05)   # error column, %
    assert "measured: 2 of 2 predictions" in text
    assert number_after(text, "|error| median") == pytest.approx(100 * (1 - 98 / 105) / 2, abs=0.05)


def test_cli_measured_bad_input(runs, tmp_path, capsys):
    small_f, big_f = runs
    other = _csv(tmp_path / "n.csv", [(1, "main->solve", "time", 0, 1.0), (2, "main->solve", "time", 0, 2.0)],
                 header="n,callpath,metric,rep,value")
    nothing = _csv(tmp_path / "x.csv", [(16, "elsewhere", "time", 0, 1.0)])
    for args, msg in (([str(small_f), "--validate", str(other)], "the measured experiment has parameters n"),
                      ([str(small_f), "--validate", str(nothing)], "no predicted series was measured"),
                      ([str(small_f)], "no point to predict: give --at"),
                      ([str(small_f), "--validate", str(tmp_path / "missing.csv")], "missing.csv")):
        capsys.readouterr()
        assert main(["predict", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, err


def test_report_compares_the_ranked_kernels_with_the_validation_runs(runs, tmp_path, capsys):
    small_f, big_f = runs
    out = tmp_path / "r.html"
    capsys.readouterr()
    assert main(["report", str(small_f), "-o", str(out), "--validate", str(big_f), "--json"]) == 0
    doc = cli_items(capsys.readouterr().out, "report")[0]
    assert "validation" in doc["sections"]
    rows = {r["at"]["p"]: r for r in doc["validation"]["rows"]}
    # main->solve only (main->other is not a modelled kernel of the fitted runs): 2 + 3 p vs the means
    assert {r["callpath"] for r in doc["validation"]["rows"]} == {"main->solve"}
    assert rows[16.0]["measured"] == 50.0 and rows[16.0]["error"] == pytest.approx(0, abs=1e-3)
    assert rows[32.0]["measured"] == 105.0 and rows[32.0]["error"] == pytest.approx(98 / 105 - 1, abs=1e-3)
    assert doc["validation"]["summary"]["compared"] == 2
    html = out.read_text()
    assert 'id="validation"' in html and "validation run (not fitted)" in html
    # a validation experiment over other parameters: one located line, no report written
    other = _csv(tmp_path / "n.csv", [(1, "main->solve", "time", 0, 1.0)], header="n,callpath,metric,rep,value")
    out.unlink()
    assert main(["report", str(small_f), "-o", str(out), "--validate", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert "the measured experiment has parameters n" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_validation_runs_at_fitted_points_are_said_not_to_be_a_check(runs, tmp_path, capsys):
    """`predict small --validate small` reported a 1% median error as if the predictions had been
    checked: every compared point was one the models were fitted on.  The fitted points are counted
    (JSON accuracy ``at_fitted_points``, each row ``fitted_on``) and a warning says the errors are the
    fit's residuals.  Here 6 points x 1 series fitted (p = 1..8) and validated at p = 8 and 16: one
    of the two compared rows (p = 8) is a fitted point, by construction."""
    small_f, big_f = runs
    mixed = _csv(tmp_path / "mixed.csv", [(8, "main->solve", "time", 0, 26.0), (16, "main->solve", "time", 0, 50.0)])
    capsys.readouterr()
    assert main(["predict", str(small_f), "--validate", str(mixed), "--json"]) == 0
    doc = cli_json(capsys.readouterr().out, "predictions")
    assert doc["accuracy"]["compared"] == 2 and doc["accuracy"]["at_fitted_points"] == 1
    assert {r["at"]["p"]: r["fitted_on"] for r in doc["items"]} == {8.0: True, 16.0: False}
    assert main(["predict", str(small_f), "--validate", str(mixed)]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 of the 2 compared prediction(s) are at points the models were fitted on" in err
    # held-out runs only: nothing said
    assert main(["predict", str(small_f), "--validate", str(big_f), "--json"]) == 0
    out, err = capsys.readouterr()
    assert cli_json(out, "predictions")["accuracy"]["at_fitted_points"] == 0
    assert main(["predict", str(small_f), "--validate", str(big_f)]) == 0
    assert "fitted on" not in capsys.readouterr().err


def test_error_figures_leave_out_the_fitted_points(runs, tmp_path, capsys):
    """Validation runs at fitted points are the fit's residuals: mixed into the error figures they
    made Relearn's report say '|error| median 1.0%' (100 fitted points) while its 25 held-out runs
    were off by 4-10%.  The figures are of the held-out rows; the fitted ones apart (at_fitted).
    Model 2 + 3 p (fitted on p = 1..8): at p = 8 (fitted) 26 vs a measured 30, -13.3%; at p = 16 (held
    out) 50 vs a measured 40, +25%."""
    small_f, _ = runs
    mixed = _csv(tmp_path / "mixed.csv", [(8, "main->solve", "time", 0, 30.0), (16, "main->solve", "time", 0, 40.0)])
    capsys.readouterr()
    assert main(["predict", str(small_f), "--validate", str(mixed), "--json"]) == 0
    acc = cli_json(capsys.readouterr().out, "predictions")["accuracy"]
    assert (acc["compared"], acc["held_out"], acc["at_fitted_points"], acc["with_error"]) == (2, 1, 1, 1)
    assert acc["median_abs_error"] == pytest.approx(50 / 40 - 1, abs=2e-3)
    assert acc["max_abs_error"] == pytest.approx(50 / 40 - 1, abs=2e-3)
    assert acc["at_fitted"]["median_abs_error"] == pytest.approx(1 - 26 / 30, abs=2e-3)
    assert acc["with_interval"] == 1 and acc["at_fitted"]["with_interval"] == 1
    assert main(["predict", str(small_f), "--validate", str(mixed)]) == 0
    text = capsys.readouterr().out
    assert "at the 1 not fitted on: |error| median" in text
    assert number_after(text, "|error| median") == pytest.approx(25.0, abs=0.2)
    out = tmp_path / "r.html"
    assert main(["report", str(small_f), "-o", str(out), "--validate", str(mixed), "--json"]) == 0
    vs = cli_items(capsys.readouterr().out, "report")[0]["validation"]["summary"]
    assert vs["median_abs_error"] == pytest.approx(50 / 40 - 1, abs=2e-3) and vs["held_out"] == 1
    assert "of the 1 at points the models were not fitted on: |error| median 25" in out.read_text()


def _halo_runs(meta):
    """Fitted on p = 2, 4, 8 (two runs each): main->halo 2 p calls (a neighbour exchange) and
    main->sum 1 call per run.  Measured at p = 1 and 16 (one run each): at p = 1 the one rank has no
    neighbour, so its profile has no main->halo row; at p = 16, 32 calls."""
    from perfcast.experiment import CallTree, Experiment, Metric
    import pandas as pd

    def exp(rows):
        d = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value"])
        return Experiment(["p"], d, [Metric("calls", "#", "count", "exclusive")],
                          CallTree.from_paths(["main", "main->halo", "main->sum"]), dict(meta))

    fit = [(p, r, cp, "calls", v) for p in (2, 4, 8) for r in (0, 1)
           for cp, v in (("main->sum", 1.0), ("main->halo", 2.0 * p))]
    measured = [(1, 0, "main->sum", "calls", 1.0),
                (16, 0, "main->sum", "calls", 1.0), (16, 0, "main->halo", "calls", 32.0)]
    return exp(fit), exp(measured)


def _halo_rows():
    # predictions of main->halo (2 p: 2 at p = 1, 32 at p = 16) and of main->other, a callpath
    # neither profile has
    return [{"callpath": "main->halo", "metric": "calls", "at": {"p": 1.0}, "value": 2.0, "lower": 1.5,
             "upper": 2.5},
            {"callpath": "main->halo", "metric": "calls", "at": {"p": 16.0}, "value": 32.0, "lower": 31.0,
             "upper": 33.0}]


def test_a_routine_a_profile_does_not_record_at_a_measured_point_did_not_run_there():
    # the profile rule (experiment.absent_repetition_is_zero): a sparse profile records what each run
    # executed; p = 1 measured calls (main->sum: 1) without main->halo: it made 0 calls there, and the
    # prediction of 2 calls is a miss to report, not a blank
    fitted, measured = _halo_runs({})
    means = validation.measured_means(measured, ["p"])
    got = validation.compare(_halo_rows(), means, ["p"], fitted=fitted)
    at1, at16 = got
    assert (at1["measured"], at1["repetitions"], at1.get("ran")) == (0.0, 1, False)
    assert at1["inside"] is False and at1["error"] is None
    assert (at16["measured"], at16["error"], at16.get("ran", True)) == (32.0, 0.0, True)
    s = validation.summarize(got)
    assert s["compared"] == 2 and s["predicted_where_zero"] == 1 and s["max_predicted_where_zero"] == 2.0
    # a callpath the measured profile has at no point of the metric stays unmeasured where no predicted
    # series of the metric was measured either (other names: no evidence that nothing ran)
    other = validation.compare([dict(r, callpath="elsewhere", metric="time") for r in _halo_rows()], means, ["p"])
    assert [r["measured"] for r in other] == [None, None]


def test_a_dense_table_keeps_an_absent_routine_missing():
    fitted, measured = _halo_runs({"locations": "dense"})
    got = validation.compare(_halo_rows(), validation.measured_means(measured, ["p"]), ["p"], fitted=fitted)
    assert got[0]["measured"] is None and got[0].get("ran") is None
    assert got[1]["measured"] == 32.0
    assert validation.summarize(got)["predicted_where_zero"] == 0


def test_cli_validate_shows_the_routine_that_did_not_run(tmp_path, capsys):
    from perfcast import store

    fitted, measured = _halo_runs({})
    store.write(fitted, tmp_path / "fit.perfcast")
    store.write(measured, tmp_path / "check.perfcast")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "fit.perfcast"), "--validate", str(tmp_path / "check.perfcast"),
                 "--callpath", "main->halo", "--json"]) == 0
    doc = cli_json(capsys.readouterr().out, "predictions")
    rows = {r["at"]["p"]: r for r in doc["items"]}
    # the model (2 p, exact counts) predicts 2 calls at p = 1; the profile has none there: 0 measured
    assert rows[1.0]["value"] == pytest.approx(2.0, rel=1e-6)
    assert rows[1.0]["measured"] == 0.0 and rows[1.0]["ran"] is False
    assert rows[16.0]["measured"] == 32.0
    assert doc["accuracy"]["predicted_where_zero"] == 1

"""perfcast model / predict / check on files whose generating formulas are known."""

import json
import math

import numpy as np
import pytest

from perfcast.cli import main

from conftest import cli_items, cli_json


def cli(capsys, *args):
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:  # check exits 1 on violations
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def text_file(tmp_path):
    """Extra-P text file: a = 3 + 2 p^2 (exact), b = 10 + 5 log2(p) (exact), c: one point only."""
    ps = [4, 8, 16, 32, 64]
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in ps), "", "METRIC time", ""]
    lines.append("REGION a")
    lines += [f"DATA {3 + 2 * p * p} {3 + 2 * p * p}" for p in ps]
    lines += ["", "REGION b"]
    import math
    lines += [f"DATA {10 + 5 * math.log2(p)} {10 + 5 * math.log2(p)}" for p in ps]
    path = tmp_path / "exp.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_model_json_ranked(capsys, text_file):
    code, out, err = cli(capsys, "model", text_file, "--json", "--target", "p=1024")
    assert code == 0, err
    rows = cli_items(out, "models")
    assert [r["callpath"] for r in rows] == ["a", "b"]  # p^2 outranks log p
    a, b = rows
    assert a["rank"] == 1 and a["lead"] == {"p": {"exponent": "2", "log_exponent": 0}}
    assert a["terms"][0]["factors"] == {"p": {"exponent": "2", "log_exponent": 0}}
    assert a["terms"][0]["coefficient"] == pytest.approx(2, rel=1e-6)
    assert a["constant"] == pytest.approx(3, rel=1e-4)
    assert a["at"] == {"p": 1024} and a["value"] == pytest.approx(3 + 2 * 1024 ** 2, rel=1e-6)
    assert a["largest_measured"] == [64]
    assert b["lead"] == {"p": {"exponent": "0", "log_exponent": 1}}
    assert set(a["quality"]) >= {"rss", "adj_r2", "smape", "cv", "noise"}


def test_model_table_and_filters(capsys, text_file):
    code, out, err = cli(capsys, "model", text_file, "--callpath", "b")
    assert code == 0, err
    assert "log2(p)" in out and "p^2" not in out


def test_predict_json(capsys, text_file):
    code, out, err = cli(capsys, "predict", text_file, "--at", "p=256", "--json")
    assert code == 0, err
    rows = {r["callpath"]: r for r in cli_items(out, "predictions")}
    assert rows["a"]["value"] == pytest.approx(3 + 2 * 256 ** 2, rel=1e-6)
    assert rows["b"]["value"] == pytest.approx(10 + 5 * 8, rel=1e-6)
    for r in rows.values():
        assert r["lower"] <= r["value"] <= r["upper"] and r["level"] == 0.9
        # the formula printed is the function that gave the value (4 significant digits printed)
        shown = eval(r["formula"].replace("^", "**"), {"log2": math.log2, "p": 256.0})
        assert shown == pytest.approx(r["value"], rel=1e-3)


def test_check_exit_codes(capsys, text_file):
    code, out, err = cli(capsys, "check", text_file, "--expect", "*: O(p log p)")
    assert code == 1
    assert "a" in out and "O(p^2)" in out
    code, out, err = cli(capsys, "check", text_file, "--expect", "a: O(p^2)", "--expect", "b: O(log p)", "--json")
    assert code == 0, err
    d = cli_json(out, "check")
    assert (d["checked"], d["items"], d["ok"], d["unchecked"]) == (2, [], True, [])


def test_tables_limit_rows_and_say_how_many_are_not_shown(capsys, text_file):
    # two series: a limit of 1 prints the first row and names the one left out
    code, out, err = cli(capsys, "predict", text_file, "--at", "p=256", "--limit", "1")
    assert code == 0, err
    assert "p^2" in out and "log2(p)" not in out
    assert "1 more predictions not shown" in err and "--limit 0" in err
    code, out, err = cli(capsys, "predict", text_file, "--at", "p=256", "--at", "p=512", "--limit", "0")
    assert code == 0, err
    assert out.count("log2(p)") == 2 and "not shown" not in err
    code, out, err = cli(capsys, "model", text_file, "--limit", "1")
    assert code == 0, err
    assert "1 more models not shown" in err
    code, out, err = cli(capsys, "check", text_file, "--expect", "*: O(1)", "--limit", "1")
    assert code == 1
    assert "2 of 2 check(s) failed" in out and "1 more failed checks not shown" in err
    code, out, err = cli(capsys, "model", text_file, "--limit", "-1")
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("args, needle", [
    (["check", "--expect", "*: O(q^2)"], "unknown parameter"),
    (["check", "--expect", "*: O(p^^2)"], "cannot read growth order"),
    (["check", "--expect", "nomatch: O(p)"], "no modelled callpath"),
    (["predict", "--at", "q=3"], "give exactly the parameters"),
    (["model", "--metric", "bytes"], "no metric"),
])
def test_errors_are_one_line(capsys, text_file, args, needle):
    code, out, err = cli(capsys, args[0], text_file, *args[1:])
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def _term_value(term, at):
    v = term["coefficient"]
    for p, f in term["factors"].items():
        num, _, den = str(f["exponent"]).partition("/")
        e = float(num) / float(den or 1)
        v *= at[p] ** e * math.log2(at[p]) ** int(f["log_exponent"])
    return v


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_model_output_file_holds_the_generating_laws(capsys, text_file, tmp_path, suffix):
    """`model -o FILE` writes every model; the structured terms are the generating laws
    (a = 3 + 2 p^2, b = 10 + 5 log2 p), evaluated here by hand from the file's columns."""
    import pandas as pd

    out_path = tmp_path / f"models{suffix}"
    code, out, err = cli(capsys, "model", text_file, "-o", out_path, "--json")
    assert code == 0, err
    assert cli_items(out, "written") == [{"output": str(out_path), "what": "models", "count": 2}]
    if suffix == ".json":
        rows = cli_items(out_path.read_text(), "models")
    else:
        frame = pd.read_parquet(out_path) if suffix == ".parquet" else pd.read_csv(out_path)
        rows = frame.to_dict("records")
        for r in rows:
            r["terms"] = json.loads(r["terms"]) if suffix == ".csv" else [
                {"coefficient": t["coefficient"], "factors": {p: f for p, f in t["factors"].items() if f}}
                for t in r["terms"]]
    law = {"a": lambda p: 3 + 2 * p * p, "b": lambda p: 10 + 5 * math.log2(p)}
    assert {r["callpath"] for r in rows} == set(law)
    for r in rows:
        at = {"p": 1000.0}
        got = r["constant"] + sum(_term_value(t, at) for t in r["terms"])
        assert got == pytest.approx(law[r["callpath"]](1000.0), rel=1e-9)


def test_predict_output_file_and_refusals(capsys, text_file, tmp_path):
    import pandas as pd

    out_path = tmp_path / "pred.parquet"
    code, _, err = cli(capsys, "predict", text_file, "--at", "p=128", "--at", "p=256", "-o", out_path)
    assert code == 0, err
    frame = pd.read_parquet(out_path).set_index(["callpath", "p"])
    assert frame.loc[("a", 256.0), "value"] == pytest.approx(3 + 2 * 256 ** 2, rel=1e-9)
    assert frame.loc[("b", 128.0), "value"] == pytest.approx(10 + 5 * 7, rel=1e-9)
    # an existing file needs --force; an unknown suffix is refused before anything is computed
    code, _, err = cli(capsys, "predict", text_file, "--at", "p=128", "-o", out_path)
    assert code == 2 and "use --force" in err and str(out_path) in err
    code, _, err = cli(capsys, "model", text_file, "-o", tmp_path / "m.xlsx")
    assert code == 2 and "unknown output format '.xlsx'" in err
    assert not (tmp_path / "m.xlsx").exists()


def test_rank_absent_from_a_tidy_table_is_said_by_model_predict_check(tmp_path, capsys):
    # 2 ranks per run, time per rank = 3 p (rank 0) and 3 p + 1 (rank 1); at p = 8 rank 1 has no
    # main->solve row: the mean there is over rank 0 alone (24), not (24 + 0) / 2
    rows = ["p,callpath,metric,rank,value"]
    for p in (2, 4, 8, 16, 32):
        for r in (0, 1):
            rows.append(f"{p},main,time,{r},{10 * p}")
            if not (p == 8 and r == 1):
                rows.append(f"{p},main->solve,time,{r},{3 * p + r}")
    f = tmp_path / "t.csv"
    f.write_text("\n".join(rows) + "\n")
    want = [{"metric": "time", "callpath": "main->solve", "missing": 1, "expected": 2, "points": 1, "files": [str(f)]}]
    for args in (["model", f, "--ranks", "mean"], ["predict", f, "--at", "p=64"],
                 ["check", f, "--expect", "*: O(p)"]):
        code, out, err = cli(capsys, *args, "--json")
        assert code == 0, err
        assert json.loads(out)["missing_ranks"] == want, args
        code, out, err = cli(capsys, *args)
        assert code == 0 and f"main->solve time: 1 of 2 in {f}" in err and "not counted as 0" in err, (args, err)
    code, out, _ = cli(capsys, "predict", f, "--at", "p=8", "--ranks", "mean", "--callpath", "main->solve", "--json")
    # the model through the present values: 3 p + 1/2 at every p but 8 (24); the prediction at p = 8
    # lies near 24.5, far from the 12 a zero for rank 1 would make
    pred = json.loads(out)["items"][0]["value"]
    assert abs(pred - 24.5) < 1.0


def test_predict_json_file_is_streamed_with_the_bytes_of_the_rows(capsys, text_file, tmp_path, monkeypatch):
    # `predict -o X.json` is the text of the row dicts (json_text(envelope(...)) of ModelSet.predict,
    # what it wrote before), written a column at a time without building them
    import perfcast.cli as C
    from perfcast.modelset import ModelSet
    from perfcast.output import envelope, json_text

    fitted = []
    real_fit, real_predict = C._fit_models, ModelSet.predict
    monkeypatch.setattr(C, "_fit_models", lambda *a, **k: fitted.append(real_fit(*a, **k)) or fitted[-1])

    def no_rows(self, *a, **k):
        raise AssertionError("a dict per row built for a JSON file")

    monkeypatch.setattr(ModelSet, "predict", no_rows)
    out_path = tmp_path / "pred.json"
    targets = [{"p": 128.0}, {"p": 256.0}]
    code, out, err = cli(capsys, "predict", text_file, "--at", "p=128", "--at", "p=256", "-o", out_path, "--json")
    assert code == 0, err
    rows = real_predict(fitted[0], targets, 0.9)
    assert out_path.read_bytes() == json_text(envelope("predictions", rows)).encode()
    assert cli_items(out, "written") == [{"output": str(out_path), "what": "predictions", "count": len(rows)}]
    # the generating laws at p = 256 (a = 3 + 2 p^2)
    got = {(r["callpath"], r["at"]["p"]): r["value"] for r in cli_items(out_path.read_text(), "predictions")}
    assert got[("a", 256.0)] == pytest.approx(3 + 2 * 256 ** 2, rel=1e-9)


def test_a_negative_value_lies_in_its_interval(capsys, tmp_path):
    """Issue 16 (c): a time measured 10 -> 90 over p = 8 .. 128 follows ``-50 + 20 log2(p)``
    (generating law), positive wherever measured and beyond; below the data, at p = 2, the model is
    -30 (flagged).  Its interval is the model's own around that value, not clipped to [0, 0] (which
    printed "-22.8 (!) [0 (clipped), 0]"): the value shown lies in the interval shown, in the JSON
    and in the table.  (Beyond the data a time is never modelled negative:
    tests/test_fit_negative_beyond_data.py.)"""
    import numpy as np

    import perfcast

    rng = np.random.default_rng(1)
    ps = [8, 16, 32, 64, 128]
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in ps), "", "METRIC time", "", "REGION k"]
    lines += ["DATA " + " ".join(f"{(-50 + 20 * math.log2(p)) * (1 + rng.uniform(-0.01, 0.01)):.10g}"
                                 for _ in range(3)) for p in ps]
    path = tmp_path / "rise.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "predict", path, "--at", "p=2", "--json")
    assert code == 0, err
    r = cli_items(out, "predictions")[0]
    m = perfcast.model(perfcast.io.load([path]))["k", "time"]
    lo, hi = m.interval({"p": 2.0}, 0.9)
    assert r["value"] == pytest.approx(-30, rel=0.05) and hi < 0
    assert r["value"] == pytest.approx(m.predict({"p": 2.0}), rel=1e-12)
    assert (r["lower"], r["upper"]) == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
    assert r["lower"] <= r["value"] <= r["upper"] and not r["clipped"] and r["confidence"] == "low"
    assert any("negative value" in n for n in r["notes"])
    code, out, err = cli(capsys, "predict", path, "--at", "p=2")
    assert code == 0, err
    row = next(ln for ln in out.splitlines() if ln.startswith(" k "))
    shown = [float(x) for x in row.split("[")[1].split("]")[0].split(",")]
    value = float(row.split("|")[4].split()[0])
    assert shown[0] <= value <= shown[1] and "clipped" not in row

def test_zero_coefficient_term_undefined_at_a_point_adds_nothing(capsys, text_file, monkeypatch):
    """5 + 0 * log2(p)^-1 is the function 5 (its formula prints "5"): 5 at p = 1 too, where
    log2(p)^-1 is undefined, through every path that evaluates a model."""
    from dataclasses import replace
    from fractions import Fraction

    import perfcast.cli as cli_mod
    from perfcast.fit.model import Model, Term, predict_many, values_at
    from perfcast.fit.series import SeriesModel

    m = Model(("p",), 5.0, (Term(0.0, (("p", Fraction(0), -1),)), Term(0.0, (("p", Fraction(-1), 0),))))
    assert m.formula() == "5"
    assert m.predict({"p": 1.0}) == 5.0 and m.predict(0.0) == 5.0
    assert m.predict([1.0, 2.0, 0.0]).tolist() == [5.0, 5.0, 5.0]
    assert predict_many([m], {"p": np.array([1.0, 0.0, 8.0])})[0].tolist() == [[5.0, 5.0, 5.0]]
    assert values_at([m], [{"p": 1.0}, {"p": 0.0}]).tolist() == [[5.0, 5.0]]
    # a nonzero coefficient keeps the term: undefined at p = 1 (the search's rule)
    assert math.isnan(Model(("p",), 5.0, (Term(1e-300, (("p", Fraction(0), -1),)),)).predict(1.0))

    fit = cli_mod._fit_models

    def with_zero_term(*a, **k):
        ms = fit(*a, **k)
        return replace(ms, series=(SeriesModel("a", "time", m),))

    monkeypatch.setattr(cli_mod, "_fit_models", with_zero_term)
    code, out, err = cli(capsys, "predict", text_file, "--at", "p=1", "--at", "p=16", "--json")
    assert code == 0, err
    rows = cli_items(out, "predictions")
    assert [(r["callpath"], r["value"], r["formula"]) for r in rows] == [("a", 5.0, "5"), ("a", 5.0, "5")]


@pytest.mark.parametrize("args, needle", [
    (["predict", "--at", "p=0"], "at: p=0: a scaling model predicts at positive parameter values only"),
    (["predict", "--at", "p=0", "--json"], "at: p=0: a scaling model predicts at positive parameter values only"),
    (["model", "--target", "p=0"], "--target: p=0: a scaling model predicts at positive parameter values only"),
    (["model", "--target", "p=0", "--json"], "--target: p=0: a scaling model predicts at positive parameter values only"),
])
def test_log_at_zero_is_refused_in_one_line(capsys, text_file, args, needle):
    """b = 10 + 5 log2(p) has no value at p = 0 (log2(0) = -inf), and no model predicts there: refused
    with exit 2 and one line naming the point -- not '-inf' in the table, not an internal error
    writing JSON, and no numpy warning on the way (warnings are errors here)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = cli(capsys, args[0], text_file, *args[1:])
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and out == ""


def test_terms_two_finds_a_cancelling_pair_in_noise_free_repetitions(capsys, tmp_path):
    """`perfcast model --terms 2` on counts that repeat exactly: 5 + p^2 - p (the messages of an
    all-to-all plus set-up) is found term for term and predicted exactly at p = 1024."""
    ps = [2, 4, 8, 16, 32, 64]
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in ps), "", "METRIC calls", "",
             "REGION alltoall"] + [f"DATA {5 + p * p - p} {5 + p * p - p} {5 + p * p - p}" for p in ps]
    path = tmp_path / "a2a.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "predict", path, "--terms", "2", "--at", "p=1024", "--json")
    assert code == 0, err
    (row,) = cli_items(out)
    assert row["value"] == pytest.approx(5 + 1024 * 1024 - 1024, rel=1e-9)


def test_terms_two_on_several_parameters_says_it_does_not_apply(capsys, tmp_path):
    lines = ["PARAMETER p", "PARAMETER n", "", "POINTS " + " ".join(f"( {p} {n} )" for p in (2, 4, 8, 16)
                                                                   for n in (10, 20, 30, 40)), "",
             "METRIC time", "", "REGION r"] + [f"DATA {p * n} {p * n * 1.01}" for p in (2, 4, 8, 16)
                                               for n in (10, 20, 30, 40)]
    path = tmp_path / "pn.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "model", path, "--terms", "2")
    assert code == 0, err
    assert "--terms 2 applies to models of one parameter" in err
    code, out, err = cli(capsys, "model", path)
    assert "--terms" not in err

"""Bad input found by an adversarial audit: every case is one located line on stderr, exit code 2,
and no output left behind (regression tests for the fixes)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, cli, one_error

from perfcast.cli import main

TEXT = DATA / "extrap" / "text" / "one_parameter_1.txt"  # parameter x, callpath compute, metric time


@pytest.mark.parametrize("cmd", [
    ["predict", TEXT, "--at", "x=inf"],
    ["predict", TEXT, "--at", "x=inf", "--json"],
    ["predict", TEXT, "--at", "x=nan"],
    ["predict", TEXT, "--at", "x=1e400", "--json"],
    ["model", TEXT, "--target", "x=nan"],
    ["model", TEXT, "--target", "x=-inf", "--json"],
])
def test_non_finite_coordinates_are_rejected(capsys, cmd):
    # were accepted: NaN predictions, numpy warnings on stderr, and with --json an internal error
    # (exit 1: "Out of range float values are not JSON compliant")
    line = one_error(*cli(capsys, *cmd)[::2])
    opt = cmd[2]
    assert f"{opt} '{cmd[3]}'" in line and "is not a finite number" in line


@pytest.mark.parametrize("cmd", [
    ["predict", TEXT, "--at", "x=-1"],
    ["predict", TEXT, "--at", "x=0", "--json"],
    ["model", TEXT, "--target", "x=0"],
    ["model", TEXT, "--target", "x=-5", "--json"],
    ["report", TEXT, "--target", "x=-5", "-o", "REPORT"],
])
def test_coordinates_at_or_below_zero_are_rejected(capsys, tmp_path, cmd):
    # were accepted for power-law models (exit 0: a value at x = -1, an increase of -5043% at
    # x = 0), while logarithms were undefined there and the report refused them
    cmd = [str(tmp_path / "r.html") if c == "REPORT" else c for c in cmd]
    line = one_error(*cli(capsys, *cmd)[::2])
    assert f"{cmd[3]}: a scaling model predicts at positive parameter values only" in line
    assert not (tmp_path / "r.html").exists()

def test_callpath_glob_matching_nothing_names_the_glob(capsys):
    for extra in ([], ["--json"]):
        line = one_error(*cli(capsys, "model", TEXT, "--callpath", "nomatch*", *extra)[::2])
        assert line == "perfcast: error: the selection is empty: no callpath matches 'nomatch*'"


def test_derived_formula_with_overflowing_literal_names_the_column(capsys):
    # was "cannot render a negative or non-finite literal", without a place; 1e400 is infinity,
    # which empties every cell (as 1/0 does)
    for extra in ([], ["--json"]):
        line = one_error(*cli(capsys, "metrics", TEXT, "--derive", "a = 1e400 * time", *extra)[::2])
        assert line == ("perfcast: error: column 2: 'a' is empty everywhere (every cell divides by zero or has "
                        "no operand values) in 'a = 1e400 * time'")


@pytest.fixture
def procs_csv(tmp_path):
    path = tmp_path / "p.csv"
    rows = ["p,callpath,metric,value"] + [f"{p},app,time,{10 / p}" for p in (1, 2, 4, 8)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("strong, bad", [("abc", "'abc' is not a number"), ("4,,8", "'' is not a number"),
                                         ("4,-2", "'-2' is not a positive process count"),
                                         ("nan", "'nan' is not a positive process count")])
def test_breakdown_strong_curve_values(capsys, procs_csv, strong, bad):
    # was an internal error (ValueError: could not convert string to float), exit 1
    line = one_error(*cli(capsys, "predict", procs_csv, "--at", "p=16", "--breakdown", "--strong", strong)[::2])
    assert line == f"perfcast: error: --strong {strong!r}: {bad}"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc (an unwritable directory)")
def test_unwritable_output_directory(capsys, tmp_path):
    # /proc refuses new files even to root; was an internal error (FileNotFoundError), exit 1
    out = Path("/proc") / "perfcast-audit-report.html"
    line = one_error(*cli(capsys, "report", TEXT, "-o", out)[::2])
    assert line.startswith(f"perfcast: error: {out}: cannot write the output (")
    assert not out.exists()
    store = Path("/proc") / "perfcast-audit.perfcast"
    for cmd in (["import", TEXT, "-o", store], ["import", TEXT, "-o", store, "--json"],
                ["metrics", TEXT, "--derive", "d = 2 * time", "-o", store]):
        line = one_error(*cli(capsys, *cmd)[::2])
        assert line.startswith(f"perfcast: error: {store}: cannot write the output (")
        assert not store.exists()


@pytest.fixture
def stored(capsys, tmp_path):
    dest = tmp_path / "one.perfcast"
    assert main(["import", str(TEXT), "-o", str(dest)]) == 0
    capsys.readouterr()
    return dest


def _edit_header(store, **changes):
    head = store / "experiment.json"
    h = json.loads(head.read_text())
    h.update(changes)
    head.write_text(json.dumps(h))


def test_damaged_store_header(capsys, stored):
    head = stored / "experiment.json"
    text = head.read_text()
    # truncated header: was "unknown format: no reader recognises this directory"
    head.write_text(text[: len(text) // 2])
    line = one_error(*cli(capsys, "show", stored)[::2])
    assert line.startswith(f"perfcast: error: {head}: corrupt header: ")
    # a version that is not a number: was an internal error (TypeError), exit 1
    head.write_text(text)
    _edit_header(stored, version="x")
    line = one_error(*cli(capsys, "show", stored, "--json")[::2])
    assert line == f"perfcast: error: {head} (version): corrupt header: store version 'x' is not a number"
    # a header that is not an object: was an internal error (AttributeError), exit 1
    head.write_text("[1, 2]")
    line = one_error(*cli(capsys, "show", stored, "--format", "perfcast")[::2])
    assert line == f"perfcast: error: {head}: corrupt header: not a JSON object"


def test_store_value_table_of_the_wrong_shape(capsys, stored):
    # was: missing field "None of [Index([...], dtype='str')] are in the [columns]"
    shutil.copy(stored / "callpaths.parquet", stored / "values.parquet")
    line = one_error(*cli(capsys, "show", stored)[::2])
    assert line == (f"perfcast: error: {stored / 'values.parquet'}: the stored value table lacks column(s) "
                    "x, rep, callpath, metric, value")


def test_machine_file_with_binary_content(capsys, tmp_path):
    # was an internal error (UnicodeDecodeError), exit 1 -- for machine --from, predict --breakdown
    # --machine, compare --machine and report --apmt-machine alike
    bad = tmp_path / "machine.yaml"
    bad.write_bytes(b"name: x\n\xff\xfe\x00garbage\n")
    line = one_error(*cli(capsys, "machine", "--from", bad)[::2])
    assert line == f"perfcast: error: {bad}: not a YAML text file (binary content)"


def test_tidy_empty_cell_is_named_plainly(capsys, tmp_path):
    # was: column 'value': np.float64(nan) is not a number / column 'x': np.float64(inf) is not finite
    f = tmp_path / "t.csv"
    f.write_text("x,callpath,metric,value\n1,app,time,1.0\n2,app,time,\n")
    line = one_error(*cli(capsys, "show", f)[::2])
    # an empty value means "not measured" (the coverage record of a tidy export, README): beside
    # measured values of the same metric and callpath it is an error at its line
    assert line == (f"perfcast: error: {f}:3: metric 'time' at 'app': an empty value (not measured: its collector "
                    f"never saw the callpath) beside measured values of it")
    f.write_text("x,callpath,metric,value\n1,app,time,1.0\n1e400,app,time,2.0\n")
    line = one_error(*cli(capsys, "import", f, "-o", tmp_path / "t.perfcast")[::2])
    assert line == f"perfcast: error: {f}:3: column 'x': 'inf' is not finite"
    assert not (tmp_path / "t.perfcast").exists()


def _with_value(tmp_path, old, new, name="t.txt"):
    f = tmp_path / name
    text = TEXT.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    return f


@pytest.mark.parametrize("cmd", [["model"], ["model", "--json"], ["predict", "--at", "x=100"],
                                 ["check", "--expect", "*: O(x^2)", "--json"]])
def test_values_too_large_to_model(capsys, tmp_path, cmd):
    # finite but huge values (1e300) overflowed in the fit: numpy RuntimeWarnings on stderr, then an
    # internal error (ValueError: cannot convert float NaN to integer), exit 1
    f = _with_value(tmp_path, "82.00848518948744 ", "1e300 ")
    line = one_error(*cli(capsys, cmd[0], f, *cmd[1:])[::2])
    assert line == (f"perfcast: error: {f} (callpath compute, metric time, x=20): value 1e+300 is too large to "
                    "model (the fit takes values up to 1e+100)")


@pytest.mark.parametrize("cmd", [["model"], ["predict", "--at", "x=100"]])
def test_values_too_small_to_model(capsys, tmp_path, cmd):
    # a series of 1e-300 s: its squares underflowed to 0, RuntimeWarnings (invalid value in divide),
    # then an internal error (ValueError: cannot convert float NaN to integer), exit 1
    text = TEXT.read_text()
    lines = [ln if not ln.startswith("DATA") else "DATA " + " ".join(f"{float(v) * 1e-300!r}" for v in ln.split()[1:])
             for ln in text.splitlines()]
    f = tmp_path / "t.txt"
    f.write_text("\n".join(lines) + "\n")
    code, _, err = cli(capsys, cmd[0], f, *cmd[1:])
    line = one_error(code, err)
    assert line.startswith(f"perfcast: error: {f} (callpath ") and line.endswith(
        " is too small to model (the fit takes 0 and values from 1e-100 on: rescale the metric)")


@pytest.mark.parametrize("data", ["82.00848518948744 ", "all"])
def test_values_too_large_to_model_warn_nothing(capsys, tmp_path, data):
    """Near float's largest (1.7e308), one value or all of a point's repetitions (their sum and
    squares overflow in the statistics): the one-line error and no numpy RuntimeWarning before it
    (warnings turned into errors here; the CLI would print them on stderr)."""
    import warnings

    first = next(line for line in TEXT.read_text().splitlines() if line.startswith("DATA"))
    old = first if data == "all" else data
    new = "DATA " + " ".join(["1.7e308"] * (len(first.split()) - 1)) if data == "all" else "1.7e308 "
    f = _with_value(tmp_path, old, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        line = one_error(*cli(capsys, "model", f, "--json")[::2])
    assert line == (f"perfcast: error: {f} (callpath compute, metric time, x=20): value 1.7e+308 is too large to "
                    "model (the fit takes values up to 1e+100)")


def test_parameter_values_too_large_to_model(capsys, tmp_path):
    # x = 1e150: RuntimeWarnings (overflow in power) and no usable model
    f = _with_value(tmp_path, "POINTS ( 60 )", "POINTS ( 1e150 )")
    out = tmp_path / "r.html"
    line = one_error(*cli(capsys, "report", f, "-o", out)[::2])
    assert line == (f"perfcast: error: {f} (parameter x): parameter value x=1e+150 is too large to model "
                    "(the fit takes values up to 1e+50)")
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["predict", TEXT, "--level", "7"],
     "Invalid value for '--level': 7.0 is not in the range 0<x<1. (try 'perfcast predict --help')"),
    (["predict", TEXT], "no point to predict: give --at P=V[,Q=W] or validation runs with --validate"),
    (["view", TEXT, "--mode", "sideways"],
     "Invalid value for '--mode': 'sideways' is not one of 'top-down', 'bottom-up', 'flat'. "
     "(try 'perfcast view --help')"),
    (["model", TEXT, "--nosuch"], "No such option '--nosuch'. (try 'perfcast model --help')"),
])
def test_bad_options_are_one_line(capsys, args, message):
    # click's usage errors were three lines (Usage: ..., Try ..., blank, Error: ...)
    line = one_error(*cli(capsys, *args)[::2])
    assert line == f"perfcast: error: {message}"


@pytest.mark.parametrize("args, message", [
    (["view", TEXT, "--threshold", "nan"], "Invalid value for '--threshold': 'nan' is not a finite number"),
    (["kernels", TEXT, "--threshold", "nan"], "Invalid value for '--threshold': 'nan' is not a finite number"),
    (["predict", TEXT, "--at", "x=4", "--level", "nan"], "Invalid value for '--level': 'nan' is not a finite number"),
])
def test_nan_option_values_are_refused(args, message, capsys):
    line = one_error(*cli(capsys, *args)[::2])
    assert message in line, line


def test_predict_at_on_an_experiment_without_parameters(tmp_path, capsys):
    f = tmp_path / "one.csv"
    f.write_text("callpath,metric,value\nmain,time,1\n")
    line = one_error(*cli(capsys, "predict", f, "--at", "p=1")[::2])
    assert line.endswith("the experiment has no parameters (one run): nothing to predict at --at; scaling models "
                         "need runs at several points"), line


def test_point_outside_a_models_domain_is_one_error_line(tmp_path):
    # log2(p) at p=0 is undefined: the refusal was preceded by a numpy "RuntimeWarning: invalid value
    # encountered in multiply" with a source line of perfcast on stderr (a separate process: pytest
    # would catch the warning in-process); p = 0 is now refused before any model is evaluated
    import subprocess
    import sys

    relearn = DATA / "extrap" / "text" / "mpa" / "relearn_data.txt"   # models with log2(p) terms
    r = subprocess.run([sys.executable, "-W", "default", "-m", "perfcast", "predict", str(relearn), "--at", "p=0,n=5"],
                       capture_output=True, text=True)
    assert r.stdout == ""
    line = one_error(r.returncode, r.stderr)
    assert line.endswith("p=0: a scaling model predicts at positive parameter values only")


def test_points_beyond_the_range_of_floats(tmp_path):
    """A point so far out that a model's value or its interval leaves the range of floats: before,
    numpy's RuntimeWarnings with perfcast's source lines on stderr, `predict --json` and `model
    --target --json` an internal error (infinite bounds are no JSON), `advise` an OverflowError.
    Now a value within range is shown without an interval (JSON null, a note says why), one out of
    range is one error line, and advise refuses a target whose run time it cannot plan for.  Each
    command in its own process with warnings shown (pytest would catch them in-process)."""
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    lines = ["PARAMETER p", "", "POINTS ( 2 ) ( 4 ) ( 8 ) ( 16 ) ( 32 )", "", "REGION r", "METRIC time"]
    lines += ["DATA " + " ".join(f"{(2 + 3 * p * p) * (1 + 0.05 * e):.6g}" for e in rng.standard_normal(4))
              for p in (2, 4, 8, 16, 32)]
    f = tmp_path / "law.txt"
    f.write_text("\n".join(lines) + "\n")

    def run(*args):
        r = subprocess.run([sys.executable, "-W", "default", "-m", "perfcast", *args], capture_output=True, text=True)
        assert "Warning" not in r.stderr and "internal error" not in r.stderr, r.stderr
        return r

    r = run("predict", str(f), "--at", "p=1e150", "--json")   # 3e300: the value fits, its variance not
    assert r.returncode == 0
    (row,) = json.loads(r.stdout)["items"]
    assert row["value"] == pytest.approx(2 + 3 * 1e300, rel=0.1)     # the generating law
    assert row["lower"] is None and row["upper"] is None and row["confidence"] == "low"
    assert any("exceed the range of floating-point numbers" in n for n in row["notes"])
    r = run("model", str(f), "--target", "p=1e150", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["items"][0]["prediction"]["upper"] is None
    r = run("predict", str(f), "--at", "p=1e300")                  # 3e600: beyond floats
    assert "r / time: the model" in one_error(r.returncode, r.stderr)
    r = run("advise", str(f), "--target", "p=1e60")                 # 3e120 s
    assert "beyond 1e+100: no run plan is computed" in one_error(r.returncode, r.stderr)


def test_yaml_key_given_twice_is_refused(capsys, tmp_path):
    # was silent: PyYAML keeps the last of two equal keys, so this campaign ran p = 4, 8 only and the
    # machine file used the second peak
    spec = tmp_path / "campaign.yaml"
    spec.write_text('command: ["true", "{p}"]\nparameters:\n  p: [1, 2]\nparameters:\n  p: [4, 8]\n')
    line = one_error(*cli(capsys, "collect", spec)[::2])
    assert line == (f"perfcast: error: {spec}:4: key 'parameters' given twice (first on line 2); "
                    "YAML would keep only the last")
    assert not (tmp_path / "campaign.perfcast").exists() and not (tmp_path / "campaign.perfcast.campaign").exists()
    machine = tmp_path / "m.yaml"
    machine.write_text("name: x\ncaches: []\npeak_flops: 1.0e+12\npeak_flops: 2.0e+12\n")
    line = one_error(*cli(capsys, "machine", "--from", machine)[::2])
    assert line.startswith(f"perfcast: error: {machine}:4: key 'peak_flops' given twice (first on line 3)")


def test_yaml_merge_key_may_be_overridden(tmp_path):
    # ``<<: *base`` followed by one of base's keys is YAML's way to override, not a repetition
    from perfcast.yamlfile import read_yaml
    f = tmp_path / "m.yaml"
    f.write_text("base: &b {frequency_hz: 2.0e+9, name: a}\nmachine:\n  <<: *b\n  name: b\n")
    assert read_yaml(f) == {"base": {"frequency_hz": 2e9, "name": "a"},
                            "machine": {"frequency_hz": 2e9, "name": "b"}}

"""Lack-of-fit warnings (analysis/fitcheck.py) on real and synthetic Extra-P inputs."""

import csv
import math
from fractions import Fraction

import pytest

from perfcast.analysis.fitcheck import fit_warnings
from perfcast.cli import main
from perfcast.fit import model_experiment
from perfcast.fit.model import Quality
from perfcast.io import load

from conftest import DATA, cli_items, cli_json


class _M:
    status = "ok"

    def __init__(self, smape, noise):
        self.quality = Quality(0.0, 1.0, smape, float("nan"), noise, 5, 25, 0.0)


def test_rule_by_hand():
    assert fit_warnings(_M(9.9, 0.0)) == []           # noise measured (none): below the 10 % floor
    assert fit_warnings(_M(10.1, 0.0))                 # above it
    assert fit_warnings(_M(29.0, 10.0)) == []          # within 3 x noise
    assert fit_warnings(_M(31.0, 10.0))                # beyond 3 x noise
    assert fit_warnings(_M(24.9, None)) == []          # no repetitions: single runs scatter, limit 25 %
    assert fit_warnings(_M(25.1, None))
    assert fit_warnings(_M(float("nan"), None)) == []  # no quality: nothing claimed


def test_mpi_data_flags_only_the_series_with_a_step(capsys):
    path = DATA / "extrap" / "mpi_data.csv"
    # the ground truth, read independently: the largest step between consecutive rank counts
    med = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            med.setdefault(f"{row['mpi']}/{row['variable']}", []).append((int(row["Ranks"]), float(row["median"])))
    step = {k: max(b[1] / a[1] for a, b in zip(sorted(v), sorted(v)[1:])) for k, v in med.items()}
    assert max(step, key=step.get) == "OpenMPI/MPI_Gather" and step["OpenMPI/MPI_Gather"] > 9
    # the single PMNF models: only the series with the step is a poor fit
    flagged = {sm.callpath for sm in model_experiment(load([path])) if fit_warnings(sm.model)}
    assert flagged == {"OpenMPI/MPI_Gather"}
    # the commands replace it by a segmented model that names the step and extends the regime of 2
    # points by the law through them (never their mean); nothing else is segmented or flagged
    assert main(["model", str(path), "--json"]) == 0
    rows = cli_items(capsys.readouterr().out)
    assert {r["callpath"] for r in rows if r.get("kind") == "segmented"} == {"OpenMPI/MPI_Gather"}
    assert not any(r["warnings"] for r in rows)
    g = next(r for r in rows if r["callpath"] == "OpenMPI/MPI_Gather")
    assert (g["change"]["lower"], g["change"]["upper"], g["status"]) == (128, 256, "ok")
    y256, y512 = sorted(v for r, v in med["OpenMPI/MPI_Gather"] if r >= 256)
    assert (y256, y512) == (580.5126, 749.7881)
    (term,) = g["terms"]
    exponent = float(Fraction(term["factors"]["Ranks"]["exponent"]))
    assert term["factors"]["Ranks"]["log_exponent"] == 0
    # the measured exponent, rounded to a fraction of denominator <= 12 (4/11 < 0.369 < 3/8: within 1/176)
    assert g["constant"] == 0.0 and exponent == pytest.approx(math.log2(y512 / y256), abs=1 / 176)
    # the law through both medians (its exponent rounded to 1/288 at most): within 0.3 % of each
    for x, y in ((256, y256), (512, y512)):
        assert term["coefficient"] * x ** exponent == pytest.approx(y, rel=3e-3)
    assert main(["model", str(path), "--callpath", "OpenMPI/MPI_Gather"]) == 0
    cap = capsys.readouterr()
    assert "Ranks <= 128:" in cap.out and "regime change between Ranks = 128 and Ranks = 256" in cap.err


def test_segmented_input_is_modelled_in_two_regimes_by_the_commands(capsys):
    # one_parameter_segmented_1: p^2 for p <= 6, 30 + p from p = 6 on (the data, p = 1..10)
    path = DATA / "extrap" / "text" / "one_parameter_segmented_1.txt"
    assert main(["predict", str(path), "--at", "p=3", "--at", "p=20", "--json"]) == 0
    rows = cli_items(capsys.readouterr().out)
    assert [r["value"] for r in rows] == pytest.approx([9.0, 50.0])
    assert all(r["segmented"] and r["status"] == "ok" for r in rows)
    assert main(["predict", str(path), "--at", "p=3", "--at", "p=20"]) == 0
    assert capsys.readouterr().err.count("regime change at p = 6") == 1  # once per series, not per point


@pytest.mark.parametrize("name, flagged", [("one_parameter_segmented_1.txt", True),
                                           ("two_parameter_segmented_1.txt", True),
                                           ("one_parameter_1.txt", False), ("two_parameter_1.txt", False)])
def test_segmented_inputs_are_flagged_and_pmnf_ones_are_not(name, flagged):
    models = model_experiment(load([DATA / "extrap" / "text" / name]))
    assert any(fit_warnings(sm.model) for sm in models) == flagged


def test_check_names_the_series_it_cannot_judge(capsys, tmp_path):
    # "solve" grows linearly at 5 scales; "setup" was measured at one scale only: no model, no
    # verdict -- the check is incomplete (exit 3), not a pass
    path = tmp_path / "two.csv"
    path.write_text("p,rep,callpath,metric,value\n"
                    + "".join(f"{p},{r},solve,time,{(1 + 0.5 * p) * (1 + 0.01 * r)!r}\n"
                              for p in (2, 4, 8, 16, 32) for r in (0, 1))
                    + "".join(f"32,{r},setup,time,{0.3 + 0.01 * r!r}\n" for r in (0, 1)))
    with pytest.raises(SystemExit) as e:
        main(["check", str(path), "--expect", "*: O(p^2)", "--json"])
    assert e.value.code == 3
    res = cli_json(capsys.readouterr().out, "check")
    assert res["checked"] == 1 and not res["ok"] and res["status"] == "incomplete" and res["items"] == []
    assert [(u["callpath"], "need 2" in u["reason"]) for u in res["unchecked"]] == [("setup", True)]
    with pytest.raises(SystemExit) as e:
        main(["check", str(path), "--expect", "*: O(p^2)"])
    assert e.value.code == 3
    cap = capsys.readouterr()
    assert "INCOMPLETE" in cap.out and "1 series could not be checked" in cap.out
    assert "series not (or not fully) checked" in cap.out and "setup" in cap.out and "unchecked" in cap.out


def test_follows_growth_by_hand():
    """The one rule of a model that stays below the measured growth (the report's "What grows?" and
    `check`): grew from first to last, and the model at the target is below last by more than the
    poor-fit limit, as the symmetric relative error 2 (last - t) / (last + t)."""
    from perfcast.analysis.fitcheck import follows_growth, misfit_limit

    assert misfit_limit(None) == 25.0 and misfit_limit(float("nan")) == 25.0
    assert misfit_limit(2.0) == 10.0 and misfit_limit(5.0) == 15.0
    # LULESH TimeIncrement: 2 * (16.43 - 11.62) / (16.43 + 11.62) = 34.3 % > 25 %
    assert not follows_growth(7.865, 16.43, 11.62)
    # LULESH main: 2 * (52.59 - 50.8) / 103.39 = 3.5 %: within the noise of single runs
    assert follows_growth(47.24, 52.59, 50.8)
    # measured noise 2 %: limit 10 %; 2 * (12 - 10.5) / 22.5 = 13.3 % beyond, 2 * (12 - 11) / 23 = 8.7 % within
    assert not follows_growth(10.0, 12.0, 10.5, 2.0) and follows_growth(10.0, 12.0, 11.0, 2.0)
    # a falling series (strong scaling, 1/p) falling further at the target follows; so does a model above
    assert follows_growth(10.0, 5.0, 2.5) and follows_growth(1.0, 2.0, 4.0)
    assert follows_growth(1.0, 2.0, None) and follows_growth(float("nan"), 2.0, 1.0)


def _check_cli(capsys, tmp_path, values, expect):
    path = tmp_path / "s.csv"
    path.write_text("p,callpath,metric,value\n" + "".join(f"{p},main,time,{v!r}\n" for p, v in values.items()))
    try:
        main(["check", str(path), "--expect", expect, "--json"])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, cli_json(capsys.readouterr().out, "check")


def test_check_leaves_unchecked_a_model_below_the_measured_growth(capsys, tmp_path):
    """LULESH TimeIncrement's five single runs (as the report test takes them): a constant model
    (their mean, 11.39; SMAPE under the 25 % limit) at p = 64 lies 2 * (16.42 - 11.39) / 27.81 = 36 %
    below the last run: `check O(1)` does not pass it (exit 3, as a poor fit)."""
    ti = {27: 7.862, 64: 10.84, 125: 13.33, 216: 8.482, 343: 16.42}
    code, d = _check_cli(capsys, tmp_path, ti, "*: O(1)")
    assert code == 3 and d["status"] == "incomplete" and d["checked"] == 0
    [u] = d["unchecked"]
    mean = sum(ti.values()) / 5
    assert u["growth"]["first"] == 7.862 and u["growth"]["last"] == 16.42
    assert u["growth"]["model_at_target"] == pytest.approx(mean, rel=1e-9)
    assert (u["growth"]["first_at"], u["growth"]["last_at"], u["growth"]["target"]) == ({"p": 27.0}, {"p": 343.0},
                                                                                        {"p": 686.0})
    assert u["reason"].startswith("the model does not follow the measured growth (x2.1 from p=27 to p=343")


def test_check_passes_a_flat_series_whose_last_run_is_a_little_high(capsys, tmp_path):
    """10 s per rank at every scale with +-3 % scatter, the last run 10.3: the constant (10.02)
    lies 2.8 % below it -- noise, not growth: O(1) passes, O(log p) too."""
    flat = {27: 10.0, 64: 9.8, 125: 10.1, 216: 9.9, 343: 10.3}
    for expect in ("*: O(1)", "*: O(log p)"):
        code, d = _check_cli(capsys, tmp_path, flat, expect)
        assert (code, d["status"], d["checked"], d["unchecked"]) == (0, "pass", 1, [])


def test_check_passes_a_growth_its_model_follows(capsys, tmp_path):
    """3 + 2 p exactly: the model is the formula, at the target above the last run."""
    code, d = _check_cli(capsys, tmp_path, {p: 3 + 2 * p for p in (4, 8, 16, 32, 64)}, "*: O(p)")
    assert (code, d["status"], d["checked"], d["unchecked"]) == (0, "pass", 1, [])


def test_check_takes_a_callpath_named_with_brackets_by_its_name(capsys, tmp_path):
    """cachegrind's `[unknown]` (LULESH -O2): `check --expect 'app->[unknown]: O(1)'` said "no
    modelled callpath matches the expectations' globs" (exit 2): the name was only a glob, whose
    "[unknown]" is a one-character class.  Generating formula 100 p: O(p) exceeds O(1), a fail."""
    path = tmp_path / "u.csv"
    path.write_text("p,callpath,metric,value\n" + "".join(f"{p},app->[unknown],Ir,{100 * p}\n" for p in (1, 2, 4, 8)))
    with pytest.raises(SystemExit) as e:
        main(["check", str(path), "--expect", "app->[unknown]: O(1)", "--json"])
    d = cli_json(capsys.readouterr().out, "check")
    assert e.value.code == 1 and d["status"] == "fail"
    [v] = d["items"]
    assert (v["callpath"], v["found"], v["parameters"]) == ("app->[unknown]", "O(p)", ["p"])

"""Selecting runs of an ensemble by their metadata (`--where KEY=VALUE`, ReadOptions.where; issue 19):
an ensemble of builds is not mixed as repetitions of one point."""

from __future__ import annotations

import json

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import ReadOptions, load

from conftest import cli, cli_items, one_error, require_data


@pytest.fixture(scope="module")
def ensemble(data_dir):
    path = require_data(data_dir / "thicket" / "lulesh_user_ensemble.json")
    return path, json.loads(path.read_text())["metadata"]     # the runs' metadata, read here independently


def _runs(exp):
    return exp.meta["caliper"]["runs"]


def test_where_keeps_exactly_the_matching_runs(ensemble):
    path, meta = ensemble
    clang = [m for m in meta if m["compiler"] == "clang"]
    exp = load([path], options=ReadOptions(where=(("compiler", "clang"),)))
    assert len(_runs(exp)) == len(clang) and exp.meta["caliper"]["runs_read"] == len(meta)
    assert {r["globals"]["compiler"] for r in _runs(exp)} == {"clang"}
    # one key given twice: either value; two keys: both
    two = load([path], options=ReadOptions(where=(("compiler", "clang"), ("compiler", "gnu"))))
    assert len(_runs(two)) == sum(m["compiler"] in ("clang", "gnu") for m in meta)
    both = load([path], options=ReadOptions(where=(("compiler", "intel"), ("mpi", "openmpi"))))
    assert len(_runs(both)) == sum(m["compiler"] == "intel" and m["mpi"] == "openmpi" for m in meta) > 0
    # numbers compare as numbers: jobsize=27 matches the metadata text "27" (and 27.0)
    j = load([path], options=ReadOptions(where=(("jobsize", "27.0"),)))
    assert len(_runs(j)) == sum(str(m["jobsize"]) == "27" for m in meta)
    assert {r["globals"]["jobsize"] for r in _runs(j)} == {"27"}


def test_mixed_builds_are_named_and_selecting_one_removes_that_warning(ensemble):
    path, _ = ensemble
    mixed = load([path])
    (w,) = [w for w in mixed.meta["warnings"] if w.startswith("runs treated as repetitions")]
    assert "compiler" in w and "where compiler=" in w
    one = load([path], options=ReadOptions(where=(("compiler", "clang"),)))
    assert "compiler" not in one.meta["caliper"].get("mixed_within_points", {})


def test_where_errors_name_the_values_there_are(ensemble, capsys):
    path, meta = ensemble
    with pytest.raises(PerfcastError, match="no run has the metadata key 'compilr'"):
        load([path], options=ReadOptions(where=(("compilr", "clang"),)))
    with pytest.raises(PerfcastError) as e:
        load([path], options=ReadOptions(where=(("compiler", "clang"), ("user", "carol"))))
    users = sorted({m["user"] for m in meta if m["compiler"] == "clang"})
    assert f"the runs with compiler=clang have user = {', '.join(users)}" in str(e.value)
    code, out, err = cli(capsys, "show", path, "--where", "compiler=pgi")
    assert "clang, gnu, intel" in one_error(code, err) and out == ""
    code, out, err = cli(capsys, "show", path, "--where", "compiler")
    assert "--where" in one_error(code, err)


def test_cli_where_and_other_formats(ensemble, capsys, tmp_path):
    path, meta = ensemble
    code, out, err = cli(capsys, "show", path, "--where", "compiler=intel", "--json")
    assert code == 0, err
    (d,) = cli_items(out, "experiment")
    assert d["meta"]["caliper"]["runs_selected"] == sum(m["compiler"] == "intel" for m in meta)
    f = tmp_path / "t.csv"
    f.write_text("p,callpath,metric,value\n2,main,time,1\n4,main,time,2\n")
    code, out, err = cli(capsys, "show", f, "--where", "compiler=intel")
    assert code == 0 and "--where compiler: not a parameter, and run metadata exist in Caliper and Thicket" in err


def test_where_selects_parameter_values_in_any_format(tmp_path, capsys):
    """--where on a parameter keeps the runs at those values (the values themselves unchanged)."""
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER p\nPOINTS ( 1 ) ( 2 ) ( 4 )\nREGION main\nMETRIC time\n"
                 "DATA 1.0 1.5\nDATA 2.0 2.5\nDATA 4.0 4.5\n")
    code, out, err = cli(capsys, "show", f, "--where", "p=1", "--where", "p=4", "--json")
    assert code == 0, err
    (d,) = cli_items(out, "experiment")
    assert [pt["p"] for pt in d["points"]] == [1, 4]
    exp = load([f], options=ReadOptions(where=(("p", "2"),)))
    assert sorted(exp.data["value"]) == [2.0, 2.5]
    code, out, err = cli(capsys, "show", f, "--where", "p=3")
    assert "the runs have p = 1, 2, 4" in one_error(code, err)
    code, out, err = cli(capsys, "show", f, "--where", "p=two")
    assert "not a number" in one_error(code, err)


def test_where_on_a_parameter_chooses_the_fitted_runs_not_the_compared_ones(tmp_path, capsys):
    """predict --where p=... --validate BIG: the filter picks the runs to fit; BIG's runs (other p)
    are still compared.  Generating formula 3 p."""
    def write(path, ps):
        path.write_text("PARAMETER p\nPOINTS " + " ".join(f"( {p} )" for p in ps) + "\nREGION main\nMETRIC time\n"
                        + "".join(f"DATA {3.0 * p} {3.0 * p}\n" for p in ps))
        return path

    small, big = write(tmp_path / "small.txt", (1, 2, 4, 8, 32)), write(tmp_path / "big.txt", (16,))
    code, out, err = cli(capsys, "predict", small, "--where", "p=1", "--where", "p=2", "--where", "p=4",
                         "--where", "p=8", "--validate", big, "--json")
    assert code == 0, err
    row, = cli_items(out, "predictions")
    assert row["at"] == {"p": 16.0} and row["measured"] == pytest.approx(48.0)
    assert row["value"] == pytest.approx(48.0, rel=1e-9)

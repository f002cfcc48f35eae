"""A rank absent from a dense tidy table is missing, not 0, in values computed at that rank too
(Experiment._gapped): a rank lacking a child's value has no exclusive value of the parent (it would
be inflated by the child's time) and no inclusive value or whole-program total above the gap (it
would lack the child's time), so `view`, `scaling-loss` and `project` reduce those over the ranks
that have them.  Figures are hand calculations on the tables built here; sparse profiles keep
absence = did not run = 0."""

import copy

import pytest
from conftest import DATA, cli, cli_json, require_data

from perfcast.analysis.scaling_loss import scaling_loss
from perfcast.analysis.views import profile
from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment
from perfcast.io import load
from perfcast.projection.apptime import base_time

BASE, TARGET = "cpu2017-20191014-19065", "cpu2017-20190625-15882"   # SPEC CPU2017 systems of the shared data


def _write(path, scope):
    """2 ranks at p = 2 .. 32: main's own time 10 p, main->solve 3 p + rank; rank 1 has no main->solve
    row at p = 8.  ``exclusive``: those values; ``inclusive``: main 13 p + rank (measured at both ranks)."""
    rows = ["p,callpath,metric,rank,value,scope"]
    for p in (2, 4, 8, 16, 32):
        for r in (0, 1):
            rows.append(f"{p},main,time,{r},{10 * p if scope == 'exclusive' else 13 * p + r},{scope}")
            if not (p == 8 and r == 1):
                rows.append(f"{p},main->solve,time,{r},{3 * p + r},{scope}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def exc_csv(tmp_path):
    return _write(tmp_path / "exc.csv", "exclusive")


@pytest.fixture
def inc_csv(tmp_path):
    return _write(tmp_path / "inc.csv", "inclusive")


def _sparse(exp):
    meta = copy.deepcopy(exp.meta)
    meta.pop("locations", None)
    return Experiment(exp.parameters, exp.data, exp.metrics.values(), exp.tree, meta)


def test_whole_program_total_leaves_out_a_rank_with_a_gap(exc_csv):
    exp = load([exc_csv])
    # p = 8: rank 0's total 80 + 24 = 104; rank 1 lacks solve, so it has no total (not 80 + 0 = 80)
    assert base_time(exp, {"p": 8}).seconds == pytest.approx(104.0)
    assert "1 of 2 with a whole-program total" in base_time(exp, {"p": 8}).ranks
    # p = 4 has no gap: mean(40 + 12, 40 + 13)
    assert base_time(exp, {"p": 4}).seconds == pytest.approx(52.5)
    # inclusive at p = 8 over the ranks that have it: main 104 (not mean(104, 80) = 92), solve 24
    t = profile(exp, "time", {"p": 8}, ranks="mean").table
    assert t.loc["main", "inclusive"] == pytest.approx(104.0) and t.loc["main", "exclusive"] == pytest.approx(80.0)
    assert t.loc["main->solve", "inclusive"] == pytest.approx(24.0)
    # a sparse profile: absence = did not run = 0 at rank 1, mean over both ranks: (104 + 80) / 2
    assert base_time(_sparse(exp), {"p": 8}).seconds == pytest.approx(92.0)
    assert profile(_sparse(exp), "time", {"p": 8}, ranks="mean").table.loc["main", "inclusive"] == pytest.approx(92.0)


def test_scaling_loss_total_and_costs_over_the_ranks_present(exc_csv):
    res = scaling_loss(load([exc_csv]), "weak")
    pair = next(x for x in res["pairs"] if (x["p"], x["q"]) == (4.0, 8.0))
    assert pair["total_p"] == pytest.approx(52.5)            # mean(52, 53)
    assert pair["total_q"] == pytest.approx(104.0)           # rank 0 only (was mean(104, 80) = 92)
    assert pair["loss"] == pytest.approx((104.0 - 52.5) / 104.0)
    main = next(r for r in pair["rows"] if r["path"] == "main")
    assert main["inclusive_q"] == pytest.approx(104.0) and main["exclusive_q"] == pytest.approx(80.0)
    assert main["inclusive_loss"] == pytest.approx((104.0 - 52.5) / 104.0)
    nxt = next(x for x in res["pairs"] if (x["p"], x["q"]) == (8.0, 16.0))
    assert nxt["total_p"] == pytest.approx(104.0) and nxt["total_q"] == pytest.approx(208.5)


def test_exclusive_value_of_a_parent_missing_where_a_child_is(inc_csv):
    exp = load([inc_csv])
    ex = exp.to_exclusive("time").data
    at8 = ex[ex["p"] == 8]
    # rank 0: 104 - 24 = 80; rank 1 (main 105 measured, solve absent): no exclusive value (not 105)
    assert sorted(zip(at8["rank"], at8["callpath"], at8["value"])) == [(0, "main", 80.0), (0, "main->solve", 24.0)]
    t = profile(exp, "time", {"p": 8}, ranks="mean").table
    assert t.loc["main", "exclusive"] == pytest.approx(80.0)     # was mean(80, 105) = 92.5
    assert t.loc["main", "inclusive"] == pytest.approx(104.5)    # measured at both ranks: mean(104, 105)
    pair = next(x for x in scaling_loss(exp, "weak")["pairs"] if (x["p"], x["q"]) == (4.0, 8.0))
    main = next(r for r in pair["rows"] if r["path"] == "main")
    assert main["exclusive_p"] == pytest.approx(40.0) and main["exclusive_q"] == pytest.approx(80.0)
    assert main["exclusive_loss"] == pytest.approx((80.0 - 40.0) / 104.5)
    assert pair["total_q"] == pytest.approx(104.5)
    # sparse: rank 1's solve is 0, its exclusive main 105: mean(80, 105)
    sp = profile(_sparse(exp), "time", {"p": 8}, ranks="mean").table
    assert sp.loc["main", "exclusive"] == pytest.approx(92.5)


def test_commands_print_the_figures(exc_csv, capsys):
    code, out, err = cli(capsys, "scaling-loss", exc_csv, "--mode", "weak", "--json")
    assert code == 0, err
    pair = next(x for x in cli_json(out, "scaling-loss")["items"][0]["pairs"] if x["q"] == 8.0)
    assert pair["total_q"] == pytest.approx(104.0)
    require_data(DATA / "spec")
    code, out, err = cli(capsys, "project", exc_csv, "--at", "p=8", "--base", BASE, "--target", TARGET,
                         "--method", "mean", "--json")
    assert code == 0, err
    assert cli_json(out, "projection")["items"][0]["base_time"]["seconds"] == pytest.approx(104.0)


def test_every_rank_with_a_gap_is_an_error_not_a_zero(tmp_path, capsys):
    f = tmp_path / "all.csv"
    f.write_text("p,callpath,metric,rank,value,scope\n"
                 "8,main,time,0,80,exclusive\n8,main,time,1,80,exclusive\n"
                 "8,main->solve,time,0,24,exclusive\n8,main->io,time,1,4,exclusive\n")
    for args in (["view", f], ["project", f, "--base", BASE, "--target", TARGET, "--method", "mean"]):
        code, out, err = cli(capsys, *args)
        assert code == 2 and out == "" and "missing, not 0" in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"perfcast: error: {f}"), err     # the file is named
    with pytest.raises(PerfcastError, match="no rank/thread has a whole-program total") as e:
        base_time(load([f]), {"p": 8})
    assert e.value.path == str(f)
    # combined inputs: the error names the file that holds the point
    g = tmp_path / "ok.csv"
    g.write_text("p,callpath,metric,rank,value,scope\n4,main,time,0,40,exclusive\n4,main,time,1,40,exclusive\n")
    code, out, err = cli(capsys, "view", g, f, "--at", "p=8")
    assert code == 2 and err.startswith(f"perfcast: error: {f}: "), err
    code, out, err = cli(capsys, "view", g, f, "--at", "p=4")
    assert code == 0, err

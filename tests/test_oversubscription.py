"""Runs with more ranks than cores (issue 23 item 2; analysis/oversubscription.py): detected from a
local campaign's machine record and launch command, said by `show`, `model`, `predict` (also of the
runs compared with --validate), `check` and the report, and the time predictions fitted on them are
of low confidence while counts keep theirs.  Values against the generating formulas."""

import pandas as pd
import pytest

import perfcast
from perfcast import store
from perfcast.analysis.oversubscription import oversubscription, rank_parameter
from perfcast.experiment import Experiment, Metric

from conftest import cli, cli_items, cli_json


def _campaign(cores=2, launcher="local", command=("mpirun", "--allow-run-as-root", "-np", "{p}", "{wrap}", "./app")):
    return {"campaign": {"command": list(command), "launcher": launcher,
                         "machine": {"hostname": "box", "usable_cpus": cores, "logical_cpus": 4}}}


def _exp(ps=(1, 2, 4, 8), meta=None):
    """time = 1 + 0.5 p s (rank 0 only), ops = 100 p per rank on every rank: exact values."""
    rows = []
    for p in ps:
        for rep in (0, 1):
            rows.append((p, rep, 0, "main", "time", 1 + 0.5 * p))
            for r in range(p):
                rows.append((p, rep, r, "main", "ops", 100.0 * p))
    df = pd.DataFrame(rows, columns=["p", "rep", "rank", "callpath", "metric", "value"])
    return Experiment(["p"], df, [Metric("time", "s", "time"), Metric("ops", "#", "count")],
                      meta=meta if meta is not None else _campaign())


def test_rank_parameter_is_the_launchers_rank_count():
    assert rank_parameter(["mpirun", "-np", "{p}", "./a"], ["p", "n"]) == "p"
    assert rank_parameter(["srun", "-n", "{ranks}", "./a", "{n}"], ["ranks", "n"]) == "ranks"
    assert rank_parameter(["./a", "{p}"], ["p"]) is None               # not a launcher's rank count
    assert rank_parameter(["mpirun", "-np", "4", "./a", "{n}"], ["n"]) is None


def test_detected_only_with_evidence():
    o = oversubscription(_exp())
    assert o is not None and o.parameter == "p" and o.cores == 2
    assert o.over == (4.0, 8.0) and o.within() == (1.0, 2.0) and "box" in o.note()
    assert oversubscription(_exp(ps=(1, 2))) is None                        # within the cores
    assert oversubscription(_exp(meta={})) is None                          # third-party profile: no record
    assert oversubscription(_exp(meta=_campaign(launcher="slurm"))) is None  # ranks on other nodes
    assert oversubscription(_exp(meta=_campaign(cores=8))) is None


def test_time_predictions_on_oversubscribed_runs_are_noted_and_low_counts_are_not():
    ms = perfcast.model(_exp())
    rows = {r["metric"]: r for r in ms.predict({"p": 16})}
    t, ops = rows["time"], rows["ops"]
    assert t["value"] == pytest.approx(1 + 0.5 * 16, rel=1e-9)      # the value is still the formula's
    assert ops["value"] == pytest.approx(100 * 16 * 16, rel=1e-9)    # summed over the 16 ranks
    assert t["confidence"] == "low" and any("oversubscribed" in n for n in t["notes"])
    assert ops["confidence"] == "high" and not any("oversubscribed" in n for n in ops["notes"])
    # the same series measured within the cores only: nothing said
    calm = {r["metric"]: r for r in perfcast.model(_exp(meta=_campaign(cores=16))).predict({"p": 16})}
    assert not any("oversubscribed" in n for n in calm["time"]["notes"])


def test_commands_say_it(tmp_path, capsys):
    exp = store.write(_exp(), tmp_path / "a.perfcast")
    big = store.write(_exp(ps=(16,)), tmp_path / "big.perfcast")
    code, out, err = cli(capsys, "predict", exp, "--at", "p=16", "--json")
    doc = cli_json(out, "predictions")
    assert code == 0 and doc["oversubscribed"]["fitted"]["over"] == [4.0, 8.0]
    code, out, err = cli(capsys, "predict", exp, "--validate", big)
    assert code == 0 and "more ranks than the 2 cores of box" in err and "p = 16" in err
    code, out, err = cli(capsys, "predict", exp, "--validate", big, "--json")
    assert cli_json(out, "predictions")["oversubscribed"]["measured"]["over"] == [16.0]
    code, out, err = cli(capsys, "model", exp, "--json")
    assert cli_json(out, "models")["oversubscribed"]["fitted"]["cores"] == 2
    code, out, err = cli(capsys, "check", exp, "--metric", "time", "--expect", "main: O(p)", "--json")
    assert cli_json(out, "check")["oversubscribed"]["fitted"]["parameter"] == "p"
    code, out, err = cli(capsys, "show", exp, "--json")
    assert cli_json(out, "experiment")["items"][0]["oversubscribed"]["over"] == [4.0, 8.0]
    code, out, err = cli(capsys, "show", exp)
    assert code == 0 and "p = 4, 8 had more ranks than the 2 cores" in err
    code, out, err = cli(capsys, "report", exp, "-o", tmp_path / "r.html", "--metric", "time")
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "more ranks than the 2 cores of box" in html and "low confidence" in html


def test_scaling_loss_between_oversubscribed_runs_is_said_to_be_partly_the_machines():
    """Strong scaling of time = 1 + 0.5 p (rank 0) on 2 cores: the pair 1 -> 2 is within the cores
    (no note), 2 -> 4 and 4 -> 8 hold runs above them (noted, by the runs named); the counts' loss is
    not noted.  The loss itself stays the formula's: (k T_q - T_p) / (k T_q), k = q / p."""
    from perfcast.analysis.scaling_loss import scaling_loss

    exp = Experiment(_exp().parameters, _exp().data, [Metric("time", "s", "time", "inclusive"),
                                                      Metric("ops", "#", "count", "inclusive")], meta=_campaign())
    res = scaling_loss(exp, "strong", "time")
    t = {p: 1 + 0.5 * p for p in (1, 2, 4, 8)}
    for pair in res["pairs"]:
        p, q = pair["p"], pair["q"]
        assert pair["loss"] == pytest.approx(((q / p) * t[q] - t[p]) / ((q / p) * t[q]), rel=1e-12)
    notes = {(pr["p"], pr["q"]): pr["notes"] for pr in res["pairs"]}
    assert notes[(1.0, 2.0)] == []
    assert len(notes[(2.0, 4.0)]) == 1 and "p = 4 includes waiting" in notes[(2.0, 4.0)][0]
    assert "p = 4, 8 includes waiting" in notes[(4.0, 8.0)][0] and "2 cores of box" in notes[(4.0, 8.0)][0]
    assert res["oversubscribed"]["over"] == [4.0, 8.0]
    counts = scaling_loss(exp, "strong", "ops")
    assert all(pr["notes"] == [] for pr in counts["pairs"]) and "oversubscribed" not in counts


def test_advise_says_its_time_models_rest_on_oversubscribed_runs(tmp_path, capsys):
    """p = 1 .. 8 on 2 cores (runs at 4 and 8 above them): the advice for p=32 ranks and prices runs by
    time models fitted on them, and the runs it advises above 2 ranks would share the cores too."""
    exp = store.write(_exp(), tmp_path / "a.perfcast")
    code, out, err = cli(capsys, "advise", exp, "--target", "p=32", "--json")
    assert code == 0, err
    adv = cli_json(out, "advice")
    (note,) = [n for n in adv["notes"] if "more ranks than the 2 cores of box" in n]
    assert "p = 4, 8 had more ranks" in note and "fitted on them" in note
    advised = sorted({c["at"]["p"] for c in cli_items(out, "advice") if c["at"]["p"] > 2})
    assert advised and f"runs advised at p = {', '.join(f'{v:g}' for v in advised)} would share" in note
    calm = store.write(_exp(ps=(1, 2)), tmp_path / "calm.perfcast")
    code, out, err = cli(capsys, "advise", calm, "--target", "p=32", "--json")
    assert code == 0 and not any("cores" in n for n in cli_json(out, "advice")["notes"])


def test_the_reports_scaling_loss_tree_says_its_runs_shared_the_cores(tmp_path, capsys):
    from perfcast.report.html import ReportOptions, build_report

    exp = Experiment(_exp().parameters, _exp().data, [Metric("time", "s", "time", "inclusive"),
                                                      Metric("ops", "#", "count", "inclusive")], meta=_campaign())
    rep = build_report(exp, ReportOptions(metric="time", scaling="strong"))
    assert (rep.scaling_loss["p"], rep.scaling_loss["q"]) == (1, 8)
    assert any(n.startswith("Scaling-loss tree: the time of the run(s) at p = 8 includes waiting for the cores")
               for n in rep.notes)

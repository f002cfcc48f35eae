"""--ranks on values that hold one value per run (no rank column, one rank per run, Caliper avg#/max#/sum#
aggregates) combines nothing: every command that takes --ranks says so (stderr note and the JSON's
``ranks_not_combined``), as ``view`` did alone -- the others ignored it silently."""

import pytest

from conftest import cli, cli_json
from perfcast import store
from perfcast.experiment import Experiment, Metric

pd = pytest.importorskip("pandas")


def _campaign_like(tmp_path):
    """A campaign's layout: wall time ``time`` held by rank 0 only (one value per run), instruction
    counts ``ins`` by both ranks of each run; per-rank value r+1 times the point's p."""
    rows = []
    for p in (2.0, 4.0, 8.0):
        for cp in ("main", "main->solve"):
            rows.append({"p": p, "rep": 0, "callpath": cp, "metric": "time", "value": 0.5 * p, "rank": 0})
            for r in (0, 1):
                rows.append({"p": p, "rep": 0, "callpath": cp, "metric": "ins", "value": (r + 1) * p, "rank": r})
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive"),
                                                 Metric("ins", "#", "count", "inclusive")])
    path = tmp_path / "c.perfcast"
    store.write(exp, path)
    return path


def test_library_rule_names_what_each_metric_holds(tmp_path):
    from perfcast.experiment import ranks_not_combined

    exp = store.read(_campaign_like(tmp_path))
    assert ranks_not_combined(exp) == [{"metric": "time", "holds": "at one rank/thread only"}]
    flat = exp.reduce_locations("sum")
    assert [i["metric"] for i in ranks_not_combined(flat)] == ["time", "ins"]


def test_waste_says_ranks_max_on_one_rank_time(capsys, tmp_path):
    path = _campaign_like(tmp_path)
    code, out, err = cli(capsys, "waste", path, "--ops", "ins", "--time", "time", "--peak-ops-per-second", "100",
                         "--at", "p=4", "--ranks", "max", "--json")
    assert code == 0, err
    doc = cli_json(out, "waste")
    assert doc["ranks_not_combined"] == {"ranks": "max",
                                         "metrics": [{"metric": "time", "holds": "at one rank/thread only"}]}
    code, out, err = cli(capsys, "waste", path, "--ops", "ins", "--time", "time", "--peak-ops-per-second", "100",
                         "--at", "p=4", "--ranks", "max")
    assert code == 0 and "--ranks max: time holds one value per run" in err and "ins holds" not in err
    # the default is no request: nothing said
    code, out, err = cli(capsys, "waste", path, "--ops", "ins", "--time", "time", "--peak-ops-per-second", "100",
                         "--at", "p=4", "--json")
    assert code == 0 and "ranks_not_combined" not in cli_json(out, "waste")


@pytest.mark.parametrize("cmd", [["model"], ["predict", "--at", "x=100"], ["check", "--expect", "*: O(x)"],
                                 ["export", "-o", "{tmp}/o.txt"]])
def test_modelling_commands_say_ranks_on_extrap_text(capsys, tmp_path, data_dir, cmd):
    """An Extra-P text file has no ranks at all (its format: one value list per point)."""
    src = data_dir / "extrap" / "text" / "one_parameter_1.txt"
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    ok = (0, 1, 3) if args[0] == "check" else (0,)   # check: its verdict's exit code
    code, out, err = cli(capsys, args[0], src, *args[1:], "--ranks", "max", "--json")
    assert code in ok, err
    doc = cli_json(out)
    assert doc["ranks_not_combined"]["ranks"] == "max"
    assert [m["holds"] for m in doc["ranks_not_combined"]["metrics"]] == ["no per-rank values"]
    code, out, err = cli(capsys, args[0], src, *args[1:], "--ranks", "max", *(["--force"] if args[0] == "export"
                                                                            else []))
    assert code in ok and "--ranks max:" in err and "nothing is combined over ranks" in err
    code, out, err = cli(capsys, args[0], src, *args[1:], *(["--force"] if args[0] == "export" else []))
    assert code in ok and "nothing is combined over ranks" not in err


@pytest.mark.parametrize("cmd", [["scaling-loss", "--mode", "weak"], ["report", "-o", "{tmp}/r.html"],
                                 ["view", "--at", "jobsize=27", "--depth", "0"]])
def test_commands_say_ranks_on_caliper_aggregates(capsys, tmp_path, data_dir, cmd):
    """LULESH .cali: avg#... is the mean over ranks the file holds (one record per run)."""
    import caliperreader

    lulesh = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    r = caliperreader.CaliperReader()
    r.read(str(lulesh / "27_cores.cali"))
    keys = set().union(*(x.keys() for x in r.records))
    # the file's own record: aggregates over ranks, no rank attribute
    assert "avg#inclusive#sum#time.duration" in keys and not any("rank" in k for k in keys)
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    code, out, err = cli(capsys, args[0], lulesh, *args[1:], "--metric", "avg#inclusive#sum#time.duration",
                         "--ranks", "max", "--json")
    assert code == 0, err
    doc = cli_json(out)
    assert doc["ranks_not_combined"] == {"ranks": "max", "metrics": [
        {"metric": "avg#inclusive#sum#time.duration", "holds": "mean over ranks in the file"}]}

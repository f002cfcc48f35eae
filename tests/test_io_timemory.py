"""timemory tree JSON reader, on the wall-clock tree of Hatchet's test data (2 ranks).

Hatchet 2026.2.0 (throwaway venv, not a dependency) reads this file as 14 nodes, 28 rows (2 ranks),
roots generate_history/outer-loop-0 and -1, sum of 'sum.wall_clock' 113.816802493 and of
'sum.wall_clock (inc)' 228.637603458:
    python3 -m venv /tmp/hatchet-venv && /tmp/hatchet-venv/bin/pip install llnl-hatchet
    /tmp/hatchet-venv/bin/python -c "import hatchet as ht; gf = ht.GraphFrame.from_timemory(F);
        print(len(gf.graph), len(gf.dataframe), gf.dataframe['sum.wall_clock'].sum(),
              gf.dataframe['sum.wall_clock (inc)'].sum())"
"""

import json

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import detect, load

TM = "formats/other/timemory/wall.tree.json"


def _refused(path, fmt="timemory"):
    with pytest.raises(PerfcastError) as e:
        load([path], format=fmt)
    assert str(path) in e.value.format()
    return e.value


def test_timemory_tree_per_rank(data_dir):
    f = data_dir / TM
    assert detect(f).name == "timemory"
    exp = load([f])
    assert len(exp.tree) == 14
    assert exp.tree.roots() == ["generate_history/outer-loop-0", "generate_history/outer-loop-1"]
    assert [exp.tree.name(c) for c in exp.tree.children("generate_history/outer-loop-0")] == [
        "generate_history/inner-loop-0", "generate_history/inner-loop-1"]
    d = exp.data
    assert sorted(d["rank"].unique()) == [0, 1]
    assert d.loc[d.metric == "wall_clock (E)", "value"].sum() == pytest.approx(113.816802493, abs=1e-9)
    assert d.loc[d.metric == "wall_clock (I)", "value"].sum() == pytest.approx(228.637603458, abs=1e-9)
    assert exp.metrics["wall_clock (I)"].unit == "s" and exp.metrics["wall_clock (I)"].kind == "time"
    # independent: rank 1's first outer loop straight from the JSON
    doc = json.loads(f.read_text())
    outer = doc["timemory"]["WALL_CLOCK"]["mpi"][1][0]["children"][0]["node"]
    assert outer["prefix"].startswith("generate_history@hatchet_tests.cpp:114/outer-loop-0")
    v = d[(d["rank"] == 1) & (d.callpath == "generate_history/outer-loop-0")].set_index("metric")["value"]
    assert (v["wall_clock (I)"], v["wall_clock (E)"], v["count"]) == (
        outer["inclusive"]["stats"]["sum"], outer["exclusive"]["stats"]["sum"], outer["inclusive"]["stats"]["count"])


def test_timemory_damage(data_dir, tmp_path):
    doc = json.loads((data_dir / TM).read_text())
    f = tmp_path / "t.json"
    comp = doc["timemory"]["WALL_CLOCK"]
    comp["mpi"].pop()  # a rank lost
    f.write_text(json.dumps(doc))
    assert "mpi_size" in _refused(f).message
    doc = json.loads((data_dir / TM).read_text())
    node = doc["timemory"]["WALL_CLOCK"]["mpi"][0][0]["children"][1]["node"]
    node["exclusive"]["stats"]["sum"] = "1.0"
    f.write_text(json.dumps(doc))
    e = _refused(f)
    assert e.where == "timemory.WALL_CLOCK.mpi[0][0].children[1]" and "exclusive.stats.sum" in e.message
    node["exclusive"]["stats"]["sum"] = 1.0
    kids = doc["timemory"]["WALL_CLOCK"]["mpi"][0][0]["children"]
    kids.append(kids[0])  # a callpath twice
    f.write_text(json.dumps(doc))
    assert "twice in rank 0" in _refused(f).message
    f.write_text(json.dumps(doc)[:-5])
    assert "not valid JSON" in _refused(f).message

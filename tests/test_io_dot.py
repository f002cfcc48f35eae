"""gprof2dot DOT reader, on the callgrind graph of Hatchet's test data (cpi, Intel MPI/PSM2).

Hatchet 2026.2.0 (throwaway venv, not a dependency) reads this file as 105 nodes, roots
'(below main)', '0x0000000000000ff0', 'hwloc_topology_load', 'ibv_get_device_list',
'psm_allocate_vbufs', "_dl_catch_error'2", 'psm_no_lock', sum of 'time' (self %) 99.07:
    python3 -m venv /tmp/hatchet-venv && /tmp/hatchet-venv/bin/pip install llnl-hatchet
    /tmp/hatchet-venv/bin/python -c "import hatchet as ht; gf = ht.GraphFrame.from_gprof_dot(F);
        print(len(gf.graph), [r.frame['name'] for r in gf.graph.roots], gf.dataframe['time'].sum())"
"""

import re

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import detect, load

DOT = "formats/other/gprof2dot-cpi/callgrind.dot.64042.0.1"


def _refused(path, fmt="dot"):
    with pytest.raises(PerfcastError) as e:
        load([path], format=fmt)
    assert str(path) in e.value.format()
    return e.value


def test_dot_graph_tree_and_shares(data_dir):
    f = data_dir / DOT
    assert detect(f).name == "dot"
    exp = load([f])
    text = f.read_text()
    # independent: the node statements of the file and their self shares
    node_lines = [ln for ln in text.splitlines() if "label=" in ln and " -> " not in ln]
    selfs = [float(x) for x in re.findall(r'label="[^"]*\\n\(([0-9.]+)%\)', text)]
    assert len(node_lines) == len(selfs) == 105
    assert {exp.tree.name(p) for p in exp.tree} == {re.match(r'\s*"?(.*?)"? \[', ln).group(1) for ln in node_lines}
    assert sorted(exp.tree.roots()) == sorted(['(below main)', '0x0000000000000ff0', 'hwloc_topology_load',
                                               'ibv_get_device_list', 'psm_allocate_vbufs', "_dl_catch_error'2",
                                               'psm_no_lock'])
    d = exp.data
    assert d.loc[d.metric == "time (E)", "value"].sum() == pytest.approx(sum(selfs)) == pytest.approx(99.07)
    assert exp.tree.children("(below main)") == ["(below main)->main"]
    assert sorted(exp.tree.children("(below main)->main")) == ["(below main)->main->PMPI_Bcast",
                                                               "(below main)->main->PMPI_Reduce"]
    v = d[d.callpath == "(below main)->main"].set_index("metric")["value"]
    assert (v["time (I)"], v["calls"]) == (97.94, 1)  # the edge's label: 97.94%, 1x
    root = d[d.callpath == "(below main)"].set_index("metric")["value"]
    assert (root["time (I)"], root["time (E)"], root["calls"]) == (97.95, 0.0, 0)
    assert exp.metrics["time (I)"].unit == "%" and exp.metrics["time (I)"].kind == "other"


def test_dot_damage(data_dir, tmp_path):
    src = (data_dir / DOT).read_text()
    lines = src.splitlines(keepends=True)
    f = tmp_path / "g.dot"
    f.write_text("".join(lines[:-1]))  # the closing brace cut
    assert "closing" in _refused(f).message
    f.write_text(src.replace("\\n97.95%\\n", "\\n197.95%\\n"))
    e = _refused(f)
    assert "0..100" in e.message and e.where == "5"
    f.write_text(src.replace("(0.00%)\\n0×", "0.00%\\n0×", 1))
    assert _refused(f).where == "5"
    f.write_text("".join(lines[:5] + [lines[5]] + lines[5:]))  # an edge twice
    assert "twice" in _refused(f).message
    f.write_text("".join(lines[:4] + lines[5:]))  # a node's declaration deleted
    assert "not declared" in _refused(f).message
    f.write_text(src[:-3])
    assert "no line end" in _refused(f).message

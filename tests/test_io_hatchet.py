"""Hatchet GraphFrame files (io/hatchet.py).

Ground truth: the to_json file's own numbers (its inclusive column equals the exclusive column plus
the children's inclusive values, node by node -- Hatchet's definition, checked here by perfcast's
tree arithmetic), literals written by hand, and for the dataframe CSV -- the same HPCToolkit run
as the database in formats/hpctoolkit/hpctoolkit-cpi-database -- perfcast's HPCToolkit reader.
"""

import json

import numpy as np
import pytest
from conftest import cli, one_error, require_data

from perfcast.errors import PerfcastError
from perfcast.io import detect, load


@pytest.fixture(scope="module")
def hatchet_dir(data_dir):
    return require_data(data_dir / "formats" / "hatchet")


def _values(exp, metric, rank=None):
    d = exp.data[exp.data["metric"] == metric]
    if rank is not None:
        d = d[d["rank"] == rank]
    return dict(zip(d["callpath"].astype(str), d["value"]))


def test_to_json_file_keeps_the_tree_and_hatchets_scopes(hatchet_dir):
    f = hatchet_dir / "hatchet-graph-literal.json"
    assert detect(f).name == "hatchet"  # not Thicket's ensemble, which shares the graph/dataframe keys
    exp = load([f])
    t = exp.tree
    assert t.roots() == ["foo", "waldo"] and len(t) == 24
    assert t.children("foo") == ["foo->bar", "foo->qux", "foo->waldo"]
    # node 6 (corge) lists its children as 7, 11, 10: bar, grault, garply
    assert t.children("foo->qux->quux->corge") == ["foo->qux->quux->corge->bar", "foo->qux->quux->corge->grault",
                                                    "foo->qux->quux->corge->garply"]
    assert t.children("waldo->bar") == ["waldo->bar->baz", "waldo->bar->grault"]
    assert exp.metrics["time (inc)"].scope == "inclusive" and exp.metrics["time"].scope == "exclusive"
    inc, exc = _values(exp, "time (inc)"), _values(exp, "time")
    assert inc["foo"] == 135 and exc["foo"] == 0 and inc["foo->waldo->fred->xyzzy"] == 30 and inc["waldo"] == 30
    assert "rank" not in exp.data.columns and set(exp.data["rep"]) == {0}
    # Hatchet's inclusive = exclusive + children's inclusive, at every node (e.g. foo: 0 + 20 + 60 + 55)
    derived = _values(exp.to_exclusive("time (inc)", name="x"), "x")
    assert derived == exc


LITERAL = [
    {"frame": {"name": "main", "type": "function"}, "metrics": {"time (inc)": 30.0, "time": 2.0, "_hatchet_nid": 0},
     "children": [
         {"frame": {"name": "solve", "type": "function"}, "metrics": {"time (inc)": 20.0, "time": 12.0,
                                                                      "_hatchet_nid": 1},
          "children": [{"frame": {"name": "MPI_Allreduce", "type": "function"},
                        "metrics": {"time (inc)": 8.0, "time": 8.0, "_hatchet_nid": 2}}]},
         {"frame": {"name": "io", "type": "function"}, "metrics": {"time (inc)": 5.0, "time": 5.0, "_hatchet_nid": 3}},
         # a second sibling named io (another call site): merged with the first, values summed
         {"frame": {"name": "io", "type": "function"}, "metrics": {"time (inc)": 3.0, "time": 3.0, "_hatchet_nid": 4}},
     ]},
]


def test_a_large_to_json_file_is_detected(tmp_path):
    # the keys in the middle of a large file are out of the sniffer's reach
    n = 20000
    graph = {str(i): {"data": {"name": f"f{i}", "type": "function"}, "children": list(range(1, n)) if i == 0 else []}
             for i in range(n)}
    df = [{"node": i, "name": f"f{i}", "time (inc)": float(n if i == 0 else 1), "time": float(i > 0)}
          for i in range(n)]
    f = tmp_path / "big.json"
    f.write_text(json.dumps({"graph": [graph], "dataframe_indices": ["node"], "dataframe": df,
                             "inclusive_metrics": ["time (inc)"], "exclusive_metrics": ["time"]}))
    assert f.stat().st_size > 1 << 20
    assert detect(f).name == "hatchet"
    exp = load([f])
    assert len(exp.tree) == n and len(exp.tree.children("f0")) == n - 1
    assert _values(exp, "time (inc)")["f0"] == n and _values(exp, "time (inc)")["f0->f7"] == 1


def test_graph_literal_by_hand(tmp_path):
    f = tmp_path / "literal.json"
    f.write_text(json.dumps(LITERAL))
    assert detect(f).name == "hatchet"
    exp = load([f])
    assert exp.tree.paths == ["main", "main->solve", "main->solve->MPI_Allreduce", "main->io"]
    assert list(exp.metrics) == ["time (inc)", "time"]  # _hatchet_nid is the node id, not a metric
    assert exp.metrics["time (inc)"].scope == "inclusive" and exp.metrics["time"].scope == "exclusive"
    assert _values(exp, "time (inc)") == {"main": 30, "main->solve": 20, "main->solve->MPI_Allreduce": 8,
                                          "main->io": 8}
    assert _values(exp, "time") == {"main": 2, "main->solve": 12, "main->solve->MPI_Allreduce": 8, "main->io": 8}
    assert exp.meta["hatchet"]["merged_nodes"] == 1
    # 30 = 2 + 20 + 5 + 3: the merge keeps the tree arithmetic right
    assert _values(exp.to_exclusive("time (inc)", name="x"), "x") == _values(exp, "time")


def test_csv_agrees_with_perfcasts_hpctoolkit_reader_on_the_same_run(hatchet_dir, data_dir):
    f = hatchet_dir / "hpctoolkit-cpi-graphframe.csv"
    assert detect(f).name == "hatchet"
    exp = load([f])
    db = load([require_data(data_dir / "formats" / "hpctoolkit" / "hpctoolkit-cpi-database")])
    assert sorted(exp.data["rank"].unique()) == [0, 1, 2, 3]
    # the CSV holds no parent links: 34 flat callpaths, said in a warning; the scope is not claimed
    assert len(exp.tree) == 34 and len(exp.tree.roots()) == 34
    assert any("no parent links" in w for w in exp.meta["warnings"])
    assert exp.metrics["time (inc)"].scope == "unknown" and "inclusive" in exp.metrics["time (inc)"].description
    assert exp.metrics["time"].unit == ""  # the file does not say; the comparison below shows microseconds
    for rank in range(4):
        inc, exc = _values(exp, "time (inc)", rank), _values(exp, "time", rank)
        dinc, dexc = _values(db, "CPUTIME (I)", rank), _values(db, "CPUTIME (E)", rank)
        # totals: the root's inclusive time, and the exclusive times summed over all nodes
        assert inc["<program root>"] * 1e-6 == pytest.approx(dinc["<program root>"], rel=1e-12)
        assert sum(exc.values()) * 1e-6 == pytest.approx(sum(dexc.values()), rel=1e-12)
        assert sum(exc.values()) == inc["<program root>"]
        assert inc["main"] * 1e-6 == pytest.approx(dinc["<program root>->main"], rel=1e-12)
    # one leaf, a unique statement: __GI_sched_yield's line
    leaf = next(p for p in _values(db, "CPUTIME (E)", 0) if p.endswith("__GI_sched_yield->interp.c:0"))
    assert _values(exp, "time", 0)["interp.c:0 #1"] * 1e-6 == pytest.approx(_values(db, "CPUTIME (E)", 0)[leaf])
    # nodes sharing a name are told apart by their nid
    assert "<unknown procedure> #8" in exp.tree and "<unknown procedure> #9" not in exp.tree



def test_csv_records_what_each_node_is_from_its_type_column(hatchet_dir, data_dir, capsys):
    """The CSV's type column is the experiment.xml tag of each node (Hatchet's HPCToolkit reader):
    PF a procedure, S a statement.  Frames recorded as perfcast's HPCToolkit reader does, read by
    hand from the database's experiment.xml for the CSV's node ids: a <PF>'s <Procedure> name
    (Hatchet's '27:MPI_Init' is MPI_Init called from line 27), its <File> and <LoadModule> base
    names.  The views still refuse the CSV: its metrics have no scope (no parent links)."""
    import collections
    import csv
    import os
    import xml.etree.ElementTree as ET

    from perfcast.experiment import Frame

    f = hatchet_dir / "hpctoolkit-cpi-graphframe.csv"
    xml = ET.parse(require_data(data_dir / "formats" / "hpctoolkit" / "hpctoolkit-cpi-database") / "experiment.xml")
    head = xml.getroot().find(".//SecHeader")
    table = {t: {e.get("i"): e.get("n") for e in head.iter(t)} for t in ("Procedure", "File", "LoadModule")}
    node = {e.get("i"): e for e in xml.getroot().find(".//SecCallPathProfileData").iter() if e.get("i")}
    want = collections.Counter()
    for nid in dict.fromkeys(r["nid"] for r in csv.DictReader(open(f))):
        e = node[nid]
        if e.tag == "PF":
            file = os.path.basename(table["File"][e.get("f")])
            want[Frame("procedure", table["Procedure"][e.get("n")],
                       f"{file} [{os.path.basename(table['LoadModule'][e.get('lm')])}]")] += 1
        else:
            want[Frame({"S": "statement", "L": "loop"}[e.tag])] += 1
    exp = load([f])
    got = collections.Counter(exp.tree.frame(p) for p in exp.tree.paths)
    assert got == want and sum(want.values()) == 34
    assert exp.tree.frame("27:MPI_Init") == Frame("procedure", "MPI_Init", "<unknown file> [libmonitor.so.0.0.0]")
    code, out, err = cli(capsys, "view", f, "--mode", "flat")
    assert code == 2 and "scopes unknown" in err

# -- bad input ------------------------------------------------------------------------------------

def _refused(f):
    with pytest.raises(PerfcastError) as e:
        load([f], format="hatchet")
    assert str(f) in e.value.format() and "\n" not in e.value.format()
    return e.value


def test_hdf5_graphframe_is_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "gf.h5"
    f.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64))
    assert "to_json" in _refused(f).message
    line = one_error(*cli(capsys, "show", f)[::2])
    assert str(f) in line and "pickled" in line


def test_damaged_json_graphs_are_refused(hatchet_dir, tmp_path):
    doc = json.loads((hatchet_dir / "hatchet-graph-literal.json").read_text())
    f = tmp_path / "g.json"

    def write(d):
        f.write_text(json.dumps(d))

    d = json.loads(json.dumps(doc))
    d["graph"][0]["0"]["children"].append(99)
    write(d)
    assert "child 99" in _refused(f).message
    d = json.loads(json.dumps(doc))
    d["graph"][0]["1"]["children"].append(4)  # qux under foo and bar: a DAG
    write(d)
    assert "two parents" in _refused(f).message
    d = json.loads(json.dumps(doc))
    d["dataframe"][3]["time"] = "5"
    write(d)
    e = _refused(f)
    assert e.where == "dataframe[3]['time']" and "not a number" in e.message
    d = json.loads(json.dumps(doc))
    d["dataframe"].append(dict(d["dataframe"][2]))
    write(d)
    assert "second record for node 2" in _refused(f).message
    lit = json.loads(json.dumps(LITERAL))
    lit[0]["children"][1]["metrics"]["_hatchet_nid"] = 1
    write(lit)
    assert "appears twice" in _refused(f).message
    f.write_text(json.dumps(LITERAL)[:-5])
    assert "not valid JSON" in _refused(f).message


def test_damaged_csv_is_refused_at_its_line(hatchet_dir, tmp_path):
    lines = (hatchet_dir / "hpctoolkit-cpi-graphframe.csv").read_text().splitlines(keepends=True)
    f = tmp_path / "gf.csv"
    f.write_text("".join(lines[:5] + [lines[4]] + lines[5:]))
    e = _refused(f)
    assert e.where == "6" and "given twice" in e.message
    f.write_text("".join(lines)[:-3])
    assert "no line end" in _refused(f).message
    f.write_text("".join(lines[:3] + [lines[3].replace(",1000306.0,", ",1e999,")] + lines[4:]))
    e = _refused(f)
    assert e.where == "4" and "finite" in e.message
    f.write_text("".join(lines[:3] + [lines[3].replace(",1000306.0,", ",abc,")] + lines[4:]))
    e = _refused(f)
    assert e.where == "4" and "'time (inc)'" in e.message
    f.write_text("".join(lines[:3] + [lines[3].replace("\",2,", "\",2.5,", 1)] + lines[4:]))
    e = _refused(f)
    assert e.where == "4" and "rank" in e.message
    f.write_text("".join(lines[:3] + [lines[3].replace("\",2,", "\",18446744073709551617,", 1)] + lines[4:]))
    assert _refused(f).where == "4"  # was: OverflowError building the rank column
    # a cut at a line end reads the rows before it (a valid shorter dataframe)
    f.write_text("".join(lines[:9]))
    assert len(load([f]).data) == 16
    assert np.isfinite(load([f]).data["value"]).all()

"""cProfile (pstats) and pyinstrument readers, on the samples of Hatchet's test data, compared with
Hatchet's reading of the same files and with the standard library's totals.

Hatchet numbers below come from Hatchet 2026.2.0 in a throwaway venv (not a dependency):
    python3 -m venv /tmp/hatchet-venv && /tmp/hatchet-venv/bin/pip install llnl-hatchet
    /tmp/hatchet-venv/bin/python -c "import hatchet as ht; gf = ht.GraphFrame.from_cprofile(F)   # or from_pyinstrument
        print(len(gf.graph), [r.frame['name'] for r in gf.graph.roots], gf.dataframe['time'].sum(),
              gf.dataframe['time (inc)'].sum())"
"""

import json
import marshal
import pstats

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import detect, load

PSTATS = "formats/other/cprofile-hatchet-pstats/cprofile-cycle.pstats"
PYINST = "formats/other/pyinstrument-hatchet-json/pyinstrument-hatchet-profile.json"


def _refused(path, fmt=None):
    with pytest.raises(PerfcastError) as e:
        load([path], format=fmt)
    assert str(path) in e.value.format()
    return e.value


def test_cprofile_tree_and_totals(data_dir):
    f = data_dir / PSTATS
    assert detect(f).name == "cprofile"
    exp = load([f])
    # Hatchet: 9 nodes (one per function), roots e and __exit__, sum of 'time' 23.045403
    names = {exp.tree.name(p) for p in exp.tree}
    assert names == {"e", "f", "g", "recursive", "__exit__", "<built-in method builtins.next>", "phase", "end",
                     "<method 'disable' of '_lsprof.Profiler' objects>"}
    roots = exp.tree.roots()
    assert roots[:2] == ["e", "__exit__"]
    # g was called 1001 times, 1000 of them from f: the call without a recorded caller is a root
    assert roots[2:] == ["g"]
    assert exp.tree.children("e") == ["e->f"]
    assert sorted(exp.tree.children("e->f")) == ["e->f->g", "e->f->recursive"]
    assert exp.tree.children("e->f->recursive") == ["e->f->recursive->recursive"]  # the recursive calls
    d = exp.data
    st = pstats.Stats(str(f))  # the standard library's own totals
    assert d.loc[d.metric == "time (E)", "value"].sum() == pytest.approx(23.045403, abs=1e-9)
    assert d.loc[d.metric == "time (E)", "value"].sum() == pytest.approx(st.total_tt, abs=1e-9)
    assert d.loc[d.metric == "calls", "value"].sum() == st.total_calls == 101204007
    # the recursive calls: the callers entry of recursive for itself, (calls, primitive calls) first
    r = d[d.callpath == "e->f->recursive->recursive"].set_index("metric")["value"]
    assert (r["calls"], r["primitive_calls"], r["time (E)"]) == (100200000, 1002000, 22.500777)
    g = d[d.callpath == "e->f->g"].set_index("metric")["value"]
    assert (g["calls"], g["time (E)"]) == (1000, 0.257098)  # f -> g in the callers table of g
    assert exp.metrics["time (E)"].unit == "s" and exp.metrics["time (I)"].scope == "inclusive"


def test_cprofile_damage(data_dir, tmp_path):
    py2 = data_dir / "formats/other/cprofile-hatchet-pstats/cprofile-cycle-py2.pstats"
    assert "Python 3 pstats" in _refused(py2).message  # Hatchet refuses it too (Python 2 marshal)
    raw = (data_dir / PSTATS).read_bytes()
    f = tmp_path / "x.pstats"
    for k in (1, len(raw) // 2, len(raw) - 1):
        f.write_bytes(raw[:k])
        _refused(f)
    f.write_bytes(raw + b"\x00")
    assert "bytes after" in _refused(f).message
    stats = marshal.loads(raw)
    key = next(k for k in stats if k[2] == "g")
    bad = dict(stats)
    bad[key] = (1001, 1001, "0.25", 22.9, stats[key][4])
    f.write_bytes(marshal.dumps(bad))
    e = _refused(f)
    assert "time is str" in e.message and "g (" in e.where
    bad[key] = (1001, 1001, 0.25, float("nan"), stats[key][4])
    f.write_bytes(marshal.dumps(bad))
    assert "not finite" in _refused(f).message
    bad[key] = (1001, 1001, 0.25, 1.0, {("nowhere.py", 1, "h"): (1, 1, 0.1, 0.1)})
    f.write_bytes(marshal.dumps(bad))
    assert "'h' is not among" in _refused(f).message
    f.write_bytes(marshal.dumps([1, 2, 3]))
    _refused(f, "cprofile")


def test_pyinstrument_tree_and_totals(data_dir):
    f = data_dir / PYINST
    assert detect(f).name == "pyinstrument"
    exp = load([f])
    # Hatchet: 111 nodes, root <module>, its children <module>, __repr__, from_caliper_json, print;
    # sum of 'time' 0.47815, of 'time (inc)' 3.518396
    assert len(exp.tree) == 111
    assert exp.tree.roots() == ["<module>"]
    assert sorted(exp.tree.name(c) for c in exp.tree.children("<module>")) == [
        "<module>", "__repr__", "from_caliper_json", "print"]
    d = exp.data
    assert d.loc[d.metric == "time (E)", "value"].sum() == pytest.approx(0.47815, abs=1e-9)
    assert d.loc[d.metric == "time (I)", "value"].sum() == pytest.approx(3.518396, abs=1e-9)
    # independent: the inclusive times of the JSON, summed over every frame
    doc = json.loads(f.read_text())

    def total(fr):
        return fr["time"] + sum(total(c) for c in fr.get("children", []))

    assert d.loc[d.metric == "time (I)", "value"].sum() == pytest.approx(total(doc["root_frame"]), abs=1e-9)
    assert exp.metrics["time (I)"].unit == "s"


def test_pyinstrument_damage(data_dir, tmp_path):
    doc = json.loads((data_dir / PYINST).read_text())
    f = tmp_path / "p.json"
    doc["root_frame"]["children"][1]["time"] = "0.3"
    f.write_text(json.dumps(doc))
    e = _refused(f)
    assert e.where == "root_frame.children[1]" and "'time'" in e.message
    doc["root_frame"]["children"][1]["time"] = 99.0  # a child longer than its parent
    f.write_text(json.dumps(doc))
    assert "more than its own" in _refused(f).message
    doc["root_frame"]["children"][1]["time"] = 0.1
    doc["root_frame"]["children"][0]["children"] = {}
    f.write_text(json.dumps(doc))
    assert "not a list" in _refused(f).message
    f.write_text(json.dumps(doc)[:-20])
    assert "not valid JSON" in _refused(f, "pyinstrument").message

"""Extra-P 3 binary experiments (io/extrap3.py).

Ground truth: Extra-P 4.2.5's own reader (``Extrap3ExperimentFileReader``) on the same files.  The
numbers written below were dumped with

    bench/.venv-extrap/bin/python -c "<_DUMP below>" FILE

and, where that venv exists (bench/.venv-extrap, or PERFCAST_EXTRAP_PYTHON naming its python),
``test_every_point_equals_extrap`` runs it again and compares every point.
"""

import json
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, extrap_python, require_data

from perfcast.errors import PerfcastError
from perfcast.io import detect, load

SP = REPO / "tests" / "data" / "extrap3" / "experiment_3"


@pytest.fixture(scope="module")
def mp(data_dir) -> Path:
    return require_data(data_dir / "extrap" / "input" / "experiment_3_mp")


def _points(exp, stat="mean"):
    """{(coords, callpath, metric): value} of an experiment read from an Extra-P 3 file."""
    df = exp.data
    cols = [df[p].tolist() for p in exp.parameters]
    return {(tuple(c), str(cp), str(m)): v
            for c, cp, m, v in zip(zip(*cols), df["callpath"], df["metric"], df["value"])}


def test_single_parameter_file_as_extrap_reads_it():
    assert detect(SP).name == "extrap3"
    exp = load([SP])
    assert exp.parameters == ("p",) or list(exp.parameters) == ["p"]
    # Extra-P: callpaths ['met1', 'met2', 'met1 #1', 'met3'] (the second region named met1 gets ' #1')
    assert exp.tree.paths == ["met1", "met2", "met1 #1", "met3"]
    assert all(exp.tree.parent(p) is None for p in exp.tree.paths)
    assert list(exp.metrics) == ["test"] and exp.metrics["test"].unit == ""  # stored unit "unknown"
    got = _points(exp)
    assert len(got) == 20 and set(exp.data["rep"]) == {0}
    # Extra-P's means (the file's modelers use GENERATE_MODEL_MEAN)
    assert got[((1000.0,), "met1", "test")] == 4.0200000000000005
    assert got[((16000.0,), "met1", "test")] == 4.2
    assert got[((4000.0,), "met2", "test")] == 16.001800000000003
    assert got[((8000.0,), "met1 #1", "test")] == 68.02000000000001
    assert got[((4000.0,), "met3", "test")] == 16000002.666666666
    assert got[((16000.0,), "met3", "test")] == 256000001.66666666
    # the other statistics, verbatim in meta["summary"]
    s = exp.meta["summary"]
    assert s["statistic"] == "mean"
    rows = {(r[0], r[1], r[2]): dict(zip(s["columns"][3:], r[3:])) for r in s["rows"]}
    r = rows[(16000.0, "met1", "test")]
    assert (r["median"], r["minimum"], r["maximum"], r["std"]) == (4.1, 3.9, 4.9, 0.40000000000000024)
    assert exp.meta["extrap3"]["models"] == 12
    assert any("statistics, not repetitions" in w for w in exp.meta["warnings"])


def test_statistic_option_picks_the_median():
    from perfcast.io import ReadOptions, read_one

    exp = read_one(SP, options=ReadOptions(statistic="median"))
    got = _points(exp)
    assert got[((4000.0,), "met2", "test")] == 16.0
    assert got[((4000.0,), "met3", "test")] == 16000003.0


def test_multi_parameter_file_as_extrap_reads_it(mp):
    exp = load([mp])
    assert exp.meta["format"] == "extrap3"
    assert list(exp.parameters) == ["x", "y", "z"]
    assert exp.tree.paths == ["main", "main->init_mat", "main->zero_mat", "main->mat_mul"]
    assert [exp.tree.parent(p) for p in exp.tree.paths] == [None, "main", "main", "main"]
    assert list(exp.metrics) == ["visits", "time", "min_time", "max_time", "bytes_put", "bytes_get",
                                 "PAPI_FP_OPS", "PAPI_L3_TCM", "PAPI_L2_TCM"]
    assert exp.metrics["time"].unit == "sec" and exp.metrics["time"].kind == "time"
    pts = {tuple(r) for r in exp.data[["x", "y", "z"]].drop_duplicates().itertuples(index=False)}
    assert pts == {(x, y, z) for x in (1.0, 10.0, 25.0) for y in (1.0, 10.0, 25.0) for z in (1.0, 10.0, 25.0)}
    got = _points(exp)
    assert len(got) == 972
    assert got[((1.0, 10.0, 25.0), "main", "time")] == 1.4139000000000001e-05
    assert got[((25.0, 25.0, 25.0), "main->mat_mul", "time")] == 1.6161e-05
    assert got[((25.0, 25.0, 25.0), "main->init_mat", "PAPI_FP_OPS")] == 2556.0
    assert got[((25.0, 25.0, 25.0), "main->mat_mul", "PAPI_FP_OPS")] == 31380.0
    assert exp.meta["extrap3"]["models"] == 36


_DUMP = r"""
import json, sys
from extrap.fileio.file_reader.extrap3_experiment_reader import Extrap3ExperimentFileReader
e = Extrap3ExperimentFileReader().read_experiment(sys.argv[1])
json.dump({"parameters": [str(p) for p in e.parameters],
           "callpaths": [c.name for c in e.callpaths], "metrics": [m.name for m in e.metrics],
           "points": [[list(m.coordinate.as_tuple()), m.callpath.name, m.metric.name,
                       m.mean, m.median, m.minimum, m.maximum, m.std]
                      for ms in e.measurements.values() for m in ms]}, sys.stdout)
"""


@pytest.mark.parametrize("which", ["sp", "mp"])
def test_every_point_equals_extrap(which, data_dir, tmp_path):
    path = SP if which == "sp" else require_data(data_dir / "extrap" / "input" / "experiment_3_mp")
    r = subprocess.run([str(extrap_python()), "-c", _DUMP, str(path)], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ref = json.loads(r.stdout)
    exp = load([path])
    assert list(exp.parameters) == ref["parameters"]
    assert exp.tree.paths == ref["callpaths"]
    assert list(exp.metrics) == ref["metrics"]
    s = exp.meta["summary"]
    n = len(exp.parameters)
    ours = {(tuple(row[:n]), row[n], row[n + 1]): dict(zip(s["columns"][n + 2:], row[n + 2:])) for row in s["rows"]}
    assert len(ours) == len(ref["points"])
    for coords, cp, metric, mean, median, mn, mx, std in ref["points"]:
        o = ours[(tuple(coords), cp, metric)]
        assert (o["mean"], o["median"], o["minimum"], o["maximum"], o["std"]) == (mean, median, mn, mx, std)
    assert _points(exp) == {(tuple(c), cp, m): mean for c, cp, m, mean, *_ in ref["points"]}


# -- bad input ------------------------------------------------------------------------------------

def _refused(f, fmt="extrap3"):
    with pytest.raises(PerfcastError) as e:
        load([f], format=fmt)
    assert str(f) in e.value.format() and "\n" not in e.value.format()
    return e.value


def test_every_cut_is_refused_or_reads_the_whole_file(tmp_path):
    # a cut inside an object is refused; a cut between objects either drops points (refused: every
    # callpath/metric must have every coordinate) or only models (the values are the intact ones)
    data = SP.read_bytes()
    intact = _points(load([SP]))
    f = tmp_path / "cut"
    for k in range(0, len(data), 7):
        f.write_bytes(data[:k])
        try:
            exp = load([f], format="extrap3")
        except PerfcastError as e:
            assert str(f) in e.format()
            continue
        assert _points(exp) == intact, k


def test_damage_is_refused_at_its_place(tmp_path):
    data = SP.read_bytes()
    f = tmp_path / "e"
    f.write_bytes(b"\x02\x00" + data[2:])
    assert "byte-order" in _refused(f).message
    f.write_bytes(data[:6] + b"EXTRAP_EXPERIMENX" + data[23:])
    assert "qualifier" in _refused(f).message
    # an unknown object type: the type string of the first Parameter renamed
    i = data.index(b"Parameter")
    f.write_bytes(data[:i] + b"Parameteq" + data[i + 9:])
    e = _refused(f)
    assert "unknown object type 'Parameteq'" in e.message and e.where.startswith(f"byte {i - 4}")
    # a non-finite mean in the first ExperimentPoint
    j = data.index(b"ExperimentPoint") + len(b"ExperimentPoint") + 16  # coordinate id, sample count
    f.write_bytes(data[:j] + struct.pack("<d", float("nan")) + data[j + 8:])
    e = _refused(f)
    assert "mean" in e.message and "finite" in e.message and f"byte {j}" in e.where
    # a huge string length
    f.write_bytes(data[:i - 4] + struct.pack("<I", 2**31) + data[i:])
    assert "ends inside" in _refused(f).message
    # not detected as Extra-P 3 at all
    f.write_bytes(b"\x01\x00garbage")
    with pytest.raises(PerfcastError):
        load([f])

"""CUBE4 (.cubex) reader against independent ground truth.

* CubeLib CSV dumps shipped with three profiles (``excl.csv``/``incl.csv``: a row per cnode id and
  location, a column per metric) -- every value, exclusive as read and inclusive through
  ``Experiment.to_inclusive``, to the precision printed in the dump;
* pycubexr's own per-cnode API (``MetricValues.cnode_values`` with its recursive exclusive
  conversion), keyed by cnode id, for files without a dump;
* facts read straight from anchor.xml with ElementTree in this file (metric names, location ranks).
"""

from __future__ import annotations

import csv
import io
import shutil
import struct
import tarfile
import warnings
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from pycubexr import CubexParser

from perfcast import store
from perfcast.errors import PerfcastError
from perfcast.io import ReadOptions, detect, load
from perfcast.io.cube import read_cube

from conftest import cli, cli_items, extrap_python, one_error

CSV_SETS = ["blast.p64.r1", "call_tree_test", "time.p4.n2000.x1.r0"]
MAX_UINT64_DOUBLE = 0xFFFF_FFFF_FFFF_FBFF


@pytest.fixture(scope="module")
def cube_dir(data_dir) -> Path:
    return data_dir / "formats" / "cube"


@pytest.fixture(scope="module")
def cubeset(data_dir) -> Path:
    return data_dir / "extrap" / "cubeset"


# -- independent helpers ------------------------------------------------------------------------
def _anchor(path: Path) -> ET.Element:
    """anchor.xml of a cubex, read with the standard library only."""
    import gzip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tar = tarfile.open(path)
        except tarfile.ReadError:
            from pycubexr.utils.custom_tarinfo import TarInfoWithoutCheck

            tar = tarfile.open(path, tarinfo=TarInfoWithoutCheck)
        with tar:
            raw = tar.extractfile("anchor.xml").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return ET.fromstring(raw)


def _locations(path: Path) -> dict[int, tuple[int, int]]:
    """location Id -> (rank of its location group, its own rank)."""
    out = {}
    for g in _anchor(path).iter("locationgroup"):
        for loc in g.iter("location"):
            out[int(loc.get("Id"))] = (int(g.findtext("rank")), int(loc.findtext("rank")))
    return out


def _pycubexr_values(path: Path, metric: str, exclusive: bool = True) -> dict[tuple[str, int, int], float]:
    """(callpath of region names, rank, thread) -> value, as pycubexr computes it (per cnode id)."""
    locs = _locations(path)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with CubexParser(path) as c:
            m = c.get_metric_by_name(metric)
            mv = c.get_metric_values(m)
            for cn in c.all_cnodes():
                names, x = [], cn
                while x is not None:
                    names.append(x.region.name)
                    x = x.parent
                cp = "->".join(reversed(names))
                vals = mv.cnode_values(cn, convert_to_exclusive=exclusive)
                vals = vals.astype(float) if hasattr(vals, "astype") else np.asarray(vals, dtype=float)
                for j, v in enumerate(np.asarray(vals, dtype=float)):
                    out[(cp, *locs[j])] = float(v)
    return out


def _ours(exp, metric: str) -> dict[tuple[str, int, int], float]:
    d = exp.data[exp.data["metric"] == metric]
    return {(str(cp), int(r), int(t)): float(v)
            for cp, r, t, v in zip(d["callpath"], d["rank"], d["thread"], d["value"])}


def _printed_tolerance(text: str) -> float:
    """One unit in the last printed digit of a CSV number ("45.2808" -> 1e-4, "3.57e-005" -> 1e-7)."""
    mant, _, exp = text.strip().lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return 10.0 ** ((int(exp) if exp else 0) - decimals)


def _cnode_paths(path: Path) -> dict[int, str]:
    """cnode id -> region names from the root, joined by '->' (anchor.xml, ElementTree)."""
    root = _anchor(path)
    program = root.find("program")
    names = {int(r.get("id")): r.findtext("name") for r in program.findall("region")}
    out = {}
    stack = [(c, "") for c in program.findall("cnode")]
    while stack:
        c, prefix = stack.pop()
        p = names[int(c.get("calleeId"))] if not prefix else prefix + "->" + names[int(c.get("calleeId"))]
        out[int(c.get("id"))] = p
        stack.extend((k, p) for k in c.findall("cnode"))
    return out


# -- CubeLib dumps --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CSV_SETS)
def test_values_equal_cubelib_dump(cube_dir, name):
    folder = cube_dir / name
    cubex = next(folder.glob("*.cubex"))
    exp = read_cube(cubex)
    paths = _cnode_paths(cubex)
    locs = _locations(cubex)
    assert not exp.parameters and exp.has_locations
    checked = 0
    for scope in ("excl", "incl"):
        with open(folder / f"{scope}.csv", newline="") as f:
            rows = list(csv.reader(f))
        header = [h.strip() for h in rows[0]]
        body = rows[1:]
        assert header[:2] == ["Cnode ID", "Thread ID"]
        for j, metric in enumerate(header[2:], start=2):
            if metric not in exp.metrics:
                # declared without stored values: CubeLib dumps zeros
                assert metric in {s["metric"] for s in exp.meta["skipped_metrics"]}
                assert all(float(r[j]) == 0 for r in body), metric
                continue
            m = exp.metrics[metric]
            if scope == "incl":
                if m.scope != "exclusive":
                    assert m.scope == "unknown" and metric in ("min_time", "max_time")
                    continue  # extrema are not sums over the tree
                e = exp.to_inclusive(metric)
                assert e.metrics[metric].scope == "inclusive"
            else:
                e = exp
            got = _ours(e, metric)
            want = {(paths[int(r[0])], *locs[int(r[1])]): (float(r[j]), _printed_tolerance(r[j])) for r in body}
            assert len(want) == len(body)
            # values absent from our table are CUBE's implicit zeros
            assert set(got) <= set(want)
            for key, (v, tol) in want.items():
                assert abs(got.get(key, 0.0) - v) <= tol, (scope, metric, key, got.get(key), v)
                checked += 1
    assert checked > 0


def test_location_values_sum_to_cnode_totals(cube_dir):
    """Per-rank values reduce to the per-cnode totals of the dump (sum over its location rows)."""
    folder = cube_dir / "blast.p64.r1"
    cubex = folder / "profile.cubex"
    exp = read_cube(cubex)
    assert sorted(exp.data["rank"].unique()) == list(range(64))
    assert set(exp.data["thread"].unique()) == {0}
    totals = exp.reduce_locations("sum")
    assert not totals.has_locations
    paths = _cnode_paths(cubex)
    with open(folder / "excl.csv", newline="") as f:
        rows = list(csv.reader(f))
    header = [h.strip() for h in rows[0]]
    for metric in ("time", "visits", "PAPI_TOT_INS", "bytes_sent"):
        j = header.index(metric)
        want: dict[str, float] = {}
        tol: dict[str, float] = {}
        for r in rows[1:]:
            p = paths[int(r[0])]
            want[p] = want.get(p, 0.0) + float(r[j])
            tol[p] = tol.get(p, 0.0) + _printed_tolerance(r[j])
        d = totals.data[totals.data["metric"] == metric]
        got = dict(zip(d["callpath"].astype(str), d["value"]))
        for p, v in want.items():
            assert abs(got.get(p, 0.0) - v) <= tol[p] + 1e-9 * abs(v), (metric, p)
    # and the grand total of exclusive time is the inclusive time of the root
    d = totals.data[totals.data["metric"] == "time"]
    j = header.index("time")
    with open(folder / "incl.csv", newline="") as f:
        incl = list(csv.reader(f))[1:]
    root_id = min(paths, key=lambda i: paths[i].count("->"))
    root_incl = sum(float(r[j]) for r in incl if int(r[0]) == root_id)
    assert abs(d["value"].sum() - root_incl) <= 64 * 1e-4


# -- Extra-P CUBE sets ----------------------------------------------------------------------------
def test_multi_parameter_set(cubeset):
    root = cubeset / "multi_parameter"
    seen = []
    exp = read_cube(root, ReadOptions(progress=lambda done, total, what: seen.append((done, total, what))))
    assert exp.parameters == ("x", "y", "z")
    pts = exp.points()
    assert len(pts) == 27
    assert {tuple(r) for r in pts.to_numpy()} == {(x, y, z) for x in (1, 10, 25) for y in (1, 10, 25)
                                                  for z in (1, 10, 25)}
    assert (exp.repetitions()["repetitions"] == 1).all()
    # metric names as declared in the runs' anchor.xml, minus those without stored values
    declared = [m.findtext("uniq_name") for m in _anchor(root / "mm.x1y1z1.r1" / "profile.cubex").iter("metric")]
    assert declared == ["visits", "time", "min_time", "max_time", "bytes_put", "bytes_get",
                        "PAPI_FP_OPS", "PAPI_L3_TCM", "PAPI_L2_TCM"]
    assert list(exp.metrics) == ["visits", "time", "min_time", "max_time", "PAPI_FP_OPS", "PAPI_L3_TCM",
                                 "PAPI_L2_TCM"]
    assert {s["metric"]: s["runs"] for s in exp.meta["skipped_metrics"]} == {"bytes_put": 27, "bytes_get": 27}
    for name in ("PAPI_FP_OPS", "PAPI_L3_TCM", "PAPI_L2_TCM", "visits"):
        assert exp.metrics[name].kind == "count" and exp.metrics[name].scope == "exclusive"
    assert exp.metrics["time"].kind == "time" and exp.metrics["time"].unit == "sec"
    assert exp.metrics["min_time"].scope == "unknown"
    assert set(exp.tree.paths) == {"main", "main->init_mat", "main->zero_mat", "main->mat_mul"}
    assert seen[-1][:2] == (27, 27) and len(seen) == 27
    # every value equals pycubexr's exclusive conversion of the run at its coordinates
    for run in sorted(root.iterdir()):
        x, y, z = (float(v) for v in run.name.split(".")[1].replace("x", " ").replace("y", " ")
                   .replace("z", " ").split())
        sub = exp.select(x=x, y=y, z=z)
        for metric in ("time", "PAPI_FP_OPS", "PAPI_L2_TCM", "visits", "max_time"):
            want = _pycubexr_values(run / "profile.cubex", metric)
            got = _ours(sub, metric)
            assert got.keys() == want.keys()
            for k, v in want.items():
                assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-15), (run.name, metric, k)


def test_single_parameter_set(cubeset):
    exp = read_cube(cubeset / "single_parameter")
    # y and z never vary: like Extra-P, one parameter x (the constants are kept in meta)
    assert exp.parameters == ("x",)
    assert sorted(exp.points()["x"]) == [1, 10, 25, 50, 100, 250, 500, 1000, 2000]
    assert exp.meta["cube"]["constant_parameters"] == {"y": 1, "z": 1}
    run = cubeset / "single_parameter" / "mm.x250y1z1.r1" / "profile.cubex"
    want = _pycubexr_values(run, "PAPI_L3_TCM")
    got = _ours(exp.select(x=250), "PAPI_L3_TCM")
    assert got == pytest.approx(want)


def test_param_takes_a_single_runs_value_from_its_path_name(cubeset, capsys):
    """--param x on one run directory: the value its name carries (mm.x2000y1z1.r1: x = 2000), so
    that run validates models of the set; a name without the value, or a format whose file declares
    its parameters, is an error naming the input (before, --param was ignored there: no parameters,
    or the file's own)."""
    run = cubeset / "single_parameter" / "mm.x2000y1z1.r1"
    exp = load([run], options=ReadOptions(parameters=("x",)))
    assert exp.parameters == ("x",)
    assert set(exp.data["x"]) == {2000.0}
    assert load([run]).parameters == ()          # without --param: one run, no parameters
    # two runs: the name's coordinates, restricted to the ones asked for
    two = [run, cubeset / "single_parameter" / "mm.x10y1z1.r1"]
    assert load(two).parameters == ("x", "y", "z")
    assert load(two, options=ReadOptions(parameters=("x",))).parameters == ("x",)
    with pytest.raises(PerfcastError, match=r"--param w: neither the run's metadata nor its path name"):
        load([run], options=ReadOptions(parameters=("w",)))
    code, _, err = cli(capsys, "show", str(cubeset.parent / "text" / "mpa" / "relearn_data.txt"), "--param", "foo")
    assert "relearn_data.txt: --param foo: not a parameter of the input, whose parameters are p, n" in one_error(code, err)
    # the validation the error message of a parameterless run suggests: measured x = 2000 is the
    # mean of the run's own values, which the set's models were fitted on
    code, out, err = cli(capsys, "predict", str(cubeset / "single_parameter"), "--validate", str(run), "--param", "x",
                         "--metric", "time", "--callpath", "main", "--json")
    assert code == 0, err
    (row,) = cli_items(out)
    assert row["at"] == {"x": 2000.0}
    assert row["measured"] == pytest.approx(float(exp.select(callpath="main", metric="time").data["value"].mean()))


def test_threads_and_ranks(cube_dir, cubeset):
    # Score-P hybrid run: 2 MPI ranks x 4 OpenMP threads (and the CubeWriter 4.8 checksum bug)
    cubex = cube_dir / "bt-mz_sum.p2.r1" / "cube4.8_with_checksum_bug.cubex"
    exp = read_cube(cubex)
    locs = exp.data[["rank", "thread"]].drop_duplicates()
    assert sorted(map(tuple, locs.to_numpy())) == sorted(set(_locations(cubex).values()))
    assert sorted(map(tuple, locs.to_numpy())) == [(r, t) for r in (0, 1) for t in range(4)]
    assert exp.meta["cube"]["tar_checksums_ignored"] is True
    for metric in ("visits", "time", "bytes_sent"):
        want = _pycubexr_values(cubex, metric)
        got = _ours(exp, metric)
        for k, v in want.items():
            assert got.get(k, 0.0) == pytest.approx(v, rel=1e-9, abs=1e-12), (metric, k)
    # threaded Extra-P example: 2 processes x 2 threads, one parameter f from example.f<N>
    st = read_cube(cubeset / "simple_threaded")
    assert st.parameters == ("f",) and sorted(st.points()["f"]) == [1, 2, 3, 4, 5]
    assert sorted(map(tuple, st.data[["rank", "thread"]].drop_duplicates().to_numpy())) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]


def test_same_name_siblings_stay_distinct(cube_dir):
    # cpi: main->iteration calls MPI_Bcast (region of the MPI adapter) and a second region also
    # named MPI_Bcast defined in SCOREP_Mpi_Coll.c line 719
    cubex = cube_dir / "scorep-cpi-cubex" / "profile.cubex"
    exp = read_cube(cubex)
    plain = "cpi->main->iteration->MPI_Bcast"
    other = "cpi->main->iteration->MPI_Bcast @SCOREP_Mpi_Coll.c:719"
    assert plain in exp.tree and other in exp.tree
    assert exp.tree.parent(other) == exp.tree.parent(plain) == "cpi->main->iteration"
    assert exp.meta["cube"]["disambiguated"] == [other]
    # values go to the right cnode: compare per cnode id with pycubexr
    root = _anchor(cubex)
    regions = {int(r.get("id")): (r.findtext("name"), r.get("mod")) for r in root.find("program").findall("region")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with CubexParser(cubex) as c:
            mv = c.get_metric_values(c.get_metric_by_name("visits"))
            for cn in c.all_cnodes():
                if cn.region.name != "MPI_Bcast" or cn.parent.region.name != "iteration":
                    continue
                cp = other if regions[cn.callee_region_id][1].endswith("SCOREP_Mpi_Coll.c") else plain
                want = np.asarray(mv.cnode_values(cn), dtype=float)
                got = exp.select(callpath=cp, metric="visits").data.sort_values("rank")["value"].to_numpy()
                assert np.array_equal(got, want)


def test_wrapped_counters_and_negative_exclusive(cube_dir):
    """PAPI_L3_DCA holds small negative deltas written as UINT64; CubeLib/pycubexr read them as 0."""
    cubex = cube_dir / "hw_counter" / "L3_DCA_negative.cubex"
    exp = read_cube(cubex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with CubexParser(cubex) as c:
            raw = c.get_metric_values(c.get_metric_by_name("PAPI_L3_DCA"), allow_full_uint64_values=True).values
    assert exp.meta["cube"]["uint64_wrapped"] == {"PAPI_L3_DCA": int((raw > MAX_UINT64_DOUBLE).sum())}
    want = _pycubexr_values(cubex, "PAPI_L3_DCA")  # pycubexr clamps negative unsigned differences at 0
    got = _ours(exp, "PAPI_L3_DCA")
    assert got.keys() <= want.keys()
    for k, v in want.items():
        assert got.get(k, 0.0) == v, k
    assert (exp.select(metric="PAPI_L3_DCA").data["value"] >= 0).all()
    assert exp.metrics["PAPI_L3_DCA"].kind == "count"
    assert exp.meta["cube"]["clamped_negative"]["PAPI_L3_DCA"] > 0


def test_unreadable_metric_types_are_skipped(cube_dir):
    cubex = cube_dir / "test_only_files" / "cube-values_example.cubex"
    exp = read_cube(cubex)
    dtypes = {m.findtext("uniq_name"): m.findtext("dtype") for m in _anchor(cubex).iter("metric")}
    non_scalar = {n for n, t in dtypes.items()
                  if t.split("(")[0] in ("RATE", "TAU_ATOMIC", "HISTOGRAM", "NDOUBLES", "SCALE_FUNC", "COMPLEX")}
    assert non_scalar == {"RATE", "TAU_ATOMIC", "TAU_ATOMIC2", "HISTOGRAM5", "NDOUBLES10", "SCALE_FUNC3", "COMPLEX"}
    # NDOUBLES and COMPLEX are read as one metric per component (test_vector_metrics_are_components)
    vectors = {"NDOUBLES10": [f"NDOUBLES10[{i}]" for i in range(10)], "COMPLEX": ["COMPLEX[re]", "COMPLEX[im]"]}
    assert {s["metric"] for s in exp.meta["skipped_metrics"]} == non_scalar - set(vectors)
    assert set(exp.metrics) == (set(dtypes) - non_scalar) | {c for cs in vectors.values() for c in cs}
    for metric in ("INT8", "UINT16", "INT64", "UINT64", "DOUBLE"):
        want = _pycubexr_values(cubex, metric)
        got = _ours(exp, metric)
        for k, v in want.items():
            assert got.get(k, 0.0) == pytest.approx(v), (metric, k)


def _rewrite(src: Path, dest: Path, replace: dict[str, bytes]):
    """Copy a cubex archive, replacing some members' contents."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w") as tout:
        for member in tin.getmembers():
            data = replace.get(member.name, tin.extractfile(member).read())
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


def test_derived_metric_is_skipped(cube_dir, tmp_path):
    src = cube_dir / "call_tree_test" / "call_tree_test.cubex"
    with tarfile.open(src) as t:
        anchor = t.extractfile("anchor.xml").read().decode()
    derived = ('<metric id="50" type="POSTDERIVED"><disp_name>Per visit</disp_name><uniq_name>time_per_visit'
               '</uniq_name><dtype>DOUBLE</dtype><uom>sec</uom><cubepl>metric::time()/metric::visits()</cubepl>'
               '</metric>')
    assert "</metrics>" in anchor
    dest = tmp_path / "derived.cubex"
    _rewrite(src, dest, {"anchor.xml": anchor.replace("</metrics>", derived + "</metrics>").encode()})
    exp = read_cube(dest)
    skipped = {s["metric"]: s["reason"] for s in exp.meta["skipped_metrics"]}
    assert "derived" in skipped["time_per_visit"]
    assert "time" in exp.metrics and "time_per_visit" not in exp.metrics
    assert exp.equals(read_cube(src).replace(meta=exp.meta))


_TIME_METRIC = ('<metric id="1" type="INCLUSIVE">\n<disp_name>Time</disp_name>\n<uniq_name>time</uniq_name>\n'
                '<dtype>DOUBLE</dtype>')


@pytest.mark.parametrize("old, new, said", [
    ("<dtype>DOUBLE</dtype>", "<dtype>FLOAT128</dtype>", "metric 'time' has data type 'FLOAT128'"),
    ('type="INCLUSIVE"', 'type="INCLUSIVEX"', "metric 'time' has type 'INCLUSIVEX'"),
])
def test_unknown_metric_type_is_an_error(cube_dir, tmp_path, old, new, said):
    # was: the metric skipped without a word (in a set of runs, its values there read as 0)
    src = cube_dir / "call_tree_test" / "call_tree_test.cubex"
    with tarfile.open(src) as t:
        anchor = t.extractfile("anchor.xml").read().decode()
    assert anchor.count(_TIME_METRIC) == 1
    dest = tmp_path / "bad.cubex"
    _rewrite(src, dest, {"anchor.xml": anchor.replace(_TIME_METRIC, _TIME_METRIC.replace(old, new)).encode()})
    err = _fails(dest, said)
    assert err.path == str(dest) and err.where == "anchor.xml"


def test_metric_missing_from_one_run_of_a_set_is_missing_not_zero(cube_dir, tmp_path):
    # a run whose anchor does not declare 'time': its values were filled with 0 wherever another
    # run had one, and a model fitted through a 0 point
    src = cube_dir / "call_tree_test" / "call_tree_test.cubex"
    with tarfile.open(src) as t:
        anchor = t.extractfile("anchor.xml").read().decode()
    start = anchor.index(_TIME_METRIC)
    end = anchor.index("</metric>", start) + len("</metric>")
    root = tmp_path / "set"
    for x in (1, 2, 4, 8):
        d = root / f"mm.x{x}.r1"
        d.mkdir(parents=True)
        if x == 4:
            _rewrite(src, d / "profile.cubex", {"anchor.xml": (anchor[:start] + anchor[end:]).encode()})
        else:
            shutil.copy(src, d / "profile.cubex")
    exp = read_cube(root)
    time = exp.data[exp.data["metric"] == "time"]
    assert sorted(time["x"].unique()) == [1.0, 2.0, 8.0]
    # the other runs hold pycubexr's exclusive values of the file, summed over the tree
    want = sum(_pycubexr_values(src, "time").values())
    assert time.groupby("x")["value"].sum().to_numpy() == pytest.approx([want] * 3)
    # the other metrics are still there at x=4
    assert (exp.data[exp.data["metric"] == "visits"]["x"] == 4).any()
    assert any("metric 'time' has no values in 1 of the 4 runs" in w and "mm.x4.r1" in w
               for w in exp.meta["warnings"])


# -- bad input --------------------------------------------------------------------------------------
def _fails(path, match: str, **kw) -> PerfcastError:
    with pytest.raises(PerfcastError, match=match) as info:
        read_cube(path, **kw)
    return info.value


def test_bad_files_raise_perfcast_errors(cube_dir, tmp_path):
    good = (cube_dir / "blast.p64.r1" / "profile.cubex").read_bytes()
    for cut in (100, len(good) // 3, len(good) - 3000):
        p = tmp_path / f"cut{cut}.cubex"
        p.write_bytes(good[:cut])
        err = _fails(p, "truncated|damaged|not a CUBE4")
        assert err.path == str(p)
    junk = tmp_path / "junk.cubex"
    junk.write_bytes(b"this is not a tar archive\n" * 40)
    assert _fails(junk, "not a CUBE4 file").path == str(junk)
    # a damaged data member: the error names the member
    src = cube_dir / "call_tree_test" / "call_tree_test.cubex"
    bad = tmp_path / "bad_data.cubex"
    _rewrite(src, bad, {"1.data": b"CUBEX.DATA" + b"\x00" * 13})
    err = _fails(bad, "metric 'time'")
    assert err.path == str(bad) and err.where == "1.data"
    # ... in words, not pycubexr's exception classes: a wrong header, a length that is no whole
    # number of 8-byte values
    _rewrite(src, bad, {"1.data": b"NOTCUBE..." + b"\x00" * 16})
    assert "Error" not in str(_fails(bad, "its header is not a CUBE data header"))
    _rewrite(src, bad, {"1.data": b"CUBEX.DATA" + b"\x00" * 13})
    assert "Error" not in str(_fails(bad, "metric 'time'"))
    bad_xml = tmp_path / "bad_xml.cubex"
    _rewrite(src, bad_xml, {"anchor.xml": b"<?xml version='1.0'?>\n<cube>\n<metrics>\n</cube>"})
    err = _fails(bad_xml, "not well-formed XML")
    assert err.where == "anchor.xml line 4"
    # through the registry: same error, one line, naming the file
    with pytest.raises(PerfcastError) as info:
        load([junk], format="cube")
    assert str(junk) in str(info.value) and "\n" not in str(info.value)


def test_bad_directories(cubeset, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no profiles here")
    assert _fails(empty, "no .cubex file").path == str(empty)
    with pytest.raises(PerfcastError, match="no .cubex file"):
        load([empty], format="cube")
    # runs whose names carry no parameters
    unnamed = tmp_path / "unnamed"
    for i, run in enumerate(("mm.x1y1z1.r1", "mm.x10y1z1.r1")):
        (unnamed / f"run_{'ab'[i]}").mkdir(parents=True)
        shutil.copy(cubeset / "single_parameter" / run / "profile.cubex", unnamed / f"run_{'ab'[i]}")
    err = _fails(unnamed, "--point")
    assert err.path == str(unnamed)
    # one named, one not: the error names the unnamed run
    mixed = tmp_path / "mixed"
    shutil.copytree(unnamed / "run_a", mixed / "run_a")
    shutil.copytree(cubeset / "single_parameter" / "mm.x10y1z1.r1", mixed / "mm.x10y1z1.r1")
    err = _fails(mixed, "--point")
    assert err.path == str(mixed / "run_a" / "profile.cubex")
    # two profiles in one run directory without a profile.cubex: ambiguous
    two = tmp_path / "two" / "mm.x1.r1"
    two.mkdir(parents=True)
    for n in ("summary.cubex", "trace.cubex"):
        shutil.copy(cubeset / "single_parameter" / "mm.x1y1z1.r1" / "profile.cubex", two / n)
    (tmp_path / "two" / "mm.x2.r1").mkdir()
    shutil.copy(cubeset / "single_parameter" / "mm.x10y1z1.r1" / "profile.cubex", tmp_path / "two" / "mm.x2.r1")
    assert _fails(tmp_path / "two", "several .cubex files").path == str(two)
    # with a profile.cubex beside them, that one is the run and the others are listed as ignored
    shutil.copy(two / "summary.cubex", two / "profile.cubex")
    exp = read_cube(tmp_path / "two")
    assert sorted(exp.points()["x"]) == [1, 2]
    assert exp.meta["cube"]["ignored_files"] == ["mm.x1.r1/summary.cubex", "mm.x1.r1/trace.cubex"]


# -- repetitions, registry, store -------------------------------------------------------------------
def test_repetitions_follow_run_numbers(cubeset, tmp_path):
    single = cubeset / "single_parameter"
    exp_dir = tmp_path / "reps"
    # x=1 measured twice: r2 is (deliberately) the x=10 profile, r1 the x=1 profile
    for src, dest in (("mm.x1y1z1.r1", "mm.x1.r2"), ("mm.x10y1z1.r1", "mm.x1.r1"), ("mm.x25y1z1.r1", "mm.x25.r1")):
        (exp_dir / dest).mkdir(parents=True)
        shutil.copy(single / src / "profile.cubex", exp_dir / dest / "profile.cubex")
    exp = read_cube(exp_dir)
    assert exp.parameters == ("x",)
    reps = dict(zip(exp.repetitions()["x"], exp.repetitions()["repetitions"]))
    assert reps == {1.0: 2, 25.0: 1}
    for rep, src in ((0, "mm.x10y1z1.r1"), (1, "mm.x1y1z1.r1")):
        rows = exp.data[(exp.data["x"] == 1) & (exp.data["rep"] == rep)].reset_index(drop=True)
        got = _ours(exp.replace(data=rows), "time")
        assert got == pytest.approx(_pycubexr_values(single / src / "profile.cubex", "time"))
    assert [(r["path"], r["rep"]) for r in exp.meta["cube"]["runs"]] == [
        ("mm.x1.r1/profile.cubex", 0), ("mm.x1.r2/profile.cubex", 1), ("mm.x25.r1/profile.cubex", 0)]


def test_registry_detects_and_loads_runs(cubeset):
    runs = [cubeset / "multi_parameter" / n for n in ("mm.x1y1z1.r1", "mm.x25y1z10.r1")]
    assert detect(runs[0] / "profile.cubex").name == "cube"
    assert detect(cubeset / "multi_parameter").name == "cube"
    # one run directory = one run without parameters; perfcast.io.load names it from its path
    one = read_cube(runs[0])
    assert one.parameters == ()
    both = load(runs)
    assert both.parameters == ("x", "y", "z")
    assert {tuple(r) for r in both.points().to_numpy()} == {(1, 1, 1), (25, 1, 10)}


def test_store_round_trip(cubeset, cube_dir, tmp_path):
    for i, src in enumerate((cubeset / "multi_parameter", cube_dir / "bt-mz_sum.p2.r1",
                             cube_dir / "scorep-cpi-cubex" / "profile.cubex")):
        exp = read_cube(src)
        dest = store.write(exp, tmp_path / f"e{i}.perfcast")
        back = store.read(dest)
        assert back.equals(exp)
        assert back.meta["skipped_metrics"] == exp.meta["skipped_metrics"]


# -- a hand-made profile: two roots, same-region siblings, sparse inclusive index ------------------
HAND_ANCHOR = """<?xml version="1.0" encoding="UTF-8"?>
<cube version="4.4">
 <attr key="Creator" value="perfcast test"/>
 <metrics>
  <metric id="0" type="EXCLUSIVE"><uniq_name>visits</uniq_name><dtype>UINT64</dtype><uom>occ</uom></metric>
  <metric id="1" type="INCLUSIVE"><uniq_name>time</uniq_name><dtype>DOUBLE</dtype><uom>sec</uom></metric>
 </metrics>
 <program>
  <region id="0" mod="a.c" begin="1" end="9"><name>A</name></region>
  <region id="1" mod="a.c" begin="10" end="19"><name>work</name></region>
  <region id="2" mod="a.c" begin="20" end="29"><name>D</name></region>
  <region id="3" mod="e.c" begin="1" end="9"><name>E</name></region>
  <region id="4" mod="e.c" begin="10" end="19"><name>F</name></region>
  <cnode id="10" calleeId="0">
   <cnode id="11" calleeId="1" line="7"><cnode id="12" calleeId="2" line="12"/></cnode>
   <cnode id="13" calleeId="1" line="9"/>
  </cnode>
  <cnode id="14" calleeId="3"><cnode id="15" calleeId="4" line="3"/></cnode>
 </program>
 <system>
  <systemtreenode Id="0"><name>machine</name><class>machine</class>
   <locationgroup Id="0"><name>rank 0</name><rank>0</rank><type>process</type>
    <location Id="0"><name>t0</name><rank>0</rank><type>thread</type></location>
    <location Id="1"><name>t1</name><rank>1</rank><type>thread</type></location>
   </locationgroup>
  </systemtreenode>
 </system>
</cube>
"""


def _index(tree_indices) -> bytes:
    # CUBEX.INDEX, endianness check 1, version, index type, count, then the tree indices (int32)
    return (b"CUBEX.INDEX" + struct.pack("<ihbi", 1, 0, 1, len(tree_indices))
            + struct.pack(f"<{len(tree_indices)}i", *tree_indices))


def _write_cubex(path: Path, anchor: str, members: dict[str, bytes]):
    with tarfile.open(path, "w") as tar:
        for name, data in [*members.items(), ("anchor.xml", anchor.encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_hand_made_profile(tmp_path):
    """Inclusive values listed in CUBE's 'wide' order: a node's children numbered together.

    Preorder A, work(7), D, work(9), E, F; wide order A, work(7), work(9), D, E, F.
    Inclusive time A=10, work(7)=6, D=4, work(9)=3 (not stored: index omits it -> 0), E=5, F=2,
    hence exclusive A=10-6-0=4, work(7)=2, D=4, E=3, F=2; thread 1 holds ten times thread 0.
    """
    time_rows = [0, 1, 3, 4, 5]  # wide positions of A, work(7), D, E, F
    time_vals = np.array([10.0, 6.0, 4.0, 5.0, 2.0])
    visits = np.array([1, 2, 3, 4, 5, 6], dtype="<u8")  # preorder A, work7, D, work9, E, F
    path = tmp_path / "hand.cubex"
    _write_cubex(path, HAND_ANCHOR, {
        "0.index": _index(range(6)),
        "0.data": b"CUBEX.DATA" + (visits[:, None] * np.array([1, 10], dtype="<u8")).astype("<u8").tobytes(),
        "1.index": _index(time_rows),
        "1.data": b"CUBEX.DATA" + (time_vals[:, None] * [1.0, 10.0]).astype("<f8").tobytes(),
    })
    exp = read_cube(path)
    assert exp.tree.roots() == ["A", "E"]
    assert exp.tree.children("A") == ["A->work", "A->work @line 9"]
    assert exp.meta["cube"]["disambiguated"] == ["A->work @line 9"]
    t = _ours(exp, "time")
    want = {"A": 4.0, "A->work": 2.0, "A->work->D": 4.0, "E": 3.0, "E->F": 2.0}
    assert t == {(cp, 0, th): v * (10 if th else 1) for cp, v in want.items() for th in (0, 1)}
    v = _ours(exp, "visits")
    order = ["A", "A->work", "A->work->D", "A->work @line 9", "E", "E->F"]
    assert v == {(cp, 0, th): float(i + 1) * (10 if th else 1) for i, cp in enumerate(order) for th in (0, 1)}
    inc = _ours(exp.to_inclusive("time"), "time")
    assert inc[("A", 0, 0)] == 10.0 and inc[("E", 0, 1)] == 50.0 and inc[("A->work", 0, 0)] == 6.0


# -- Extra-P's scaling types (--scaling) ----------------------------------------------------------
# Reference values: Extra-P 4.2.5 on the same directory, its mean per callpath/metric/coordinate:
#   bench/.venv-extrap/bin/python -c "from extrap.fileio.file_reader.cube_file_reader2 import \
#     CubeFileReader2; e = CubeFileReader2().read_cube_file('<data>/extrap/cubeset/simple_threaded', S); \
#     print({(str(c), str(m)): [x.mean for x in ms] for (c, m), ms in e.measurements.items()})"
# with S = weak_threaded / weak / strong.  Every series is linear in f; the slope is listed
# (visits of main, main->foo and main->zero are constant and listed as constants).  The
# weak_threaded slopes are also the ones Extra-P's own test asserts (tests/test_load_cube_files.py).
EXTRAP_SIMPLE_THREADED = {
    "weak-threaded": {("main", "time"): (1.4, "f"), ("main->foo", "time"): (4.95, "f"),
                      ("main->bar", "time"): (4.15, "f"), ("main->omp parallel", "time"): (3.3, "f"),
                      ("main", "visits"): (1.0, 1), ("main->foo", "visits"): (8.0, 1),
                      ("main->bar", "visits"): (7.0, "f"), ("main->omp parallel", "visits"): (6.0, "f"),
                      ("main->zero", "visits"): (1.0, 1)},
    "weak": {("main", "time"): (0.7, "f"), ("main->foo", "time"): (2.475, "f"),
             ("main->bar", "time"): (2.075, "f"), ("main->omp parallel", "time"): (3.3, "f"),
             ("main", "visits"): (0.5, 1), ("main->foo", "visits"): (4.0, 1),
             ("main->bar", "visits"): (3.5, "f"), ("main->omp parallel", "visits"): (6.0, "f"),
             ("main->zero", "visits"): (0.5, 1)},
    "strong": {("main", "time"): (2.8, "f"), ("main->foo", "time"): (9.9, "f"),
               ("main->bar", "time"): (8.3, "f"), ("main->omp parallel", "time"): (13.2, "f"),
               ("main", "visits"): (2.0, 1), ("main->foo", "visits"): (16.0, 1),
               ("main->bar", "visits"): (14.0, "f"), ("main->omp parallel", "visits"): (24.0, "f"),
               ("main->zero", "visits"): (2.0, 1)},
}


@pytest.mark.parametrize("scaling", list(EXTRAP_SIMPLE_THREADED))
def test_scaling_reproduces_extrap(cubeset, scaling):
    exp = load([cubeset / "simple_threaded"], options=ReadOptions(scaling=scaling))
    assert exp.parameters == ("f",)
    assert not exp.has_locations
    assert exp.meta["cube"]["scaling"]["type"] == scaling
    got = {(str(r.callpath), str(r.metric), r.f): r.value for r in exp.data.itertuples()}
    want = {}
    for (cp, m), (slope, dep) in EXTRAP_SIMPLE_THREADED[scaling].items():
        for f in (1.0, 2.0, 3.0, 4.0, 5.0):
            want[(cp, m, f)] = slope * (f if dep == "f" else 1)
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())


def test_per_location_values_average_as_extrap_weak(cubeset):
    """Without --scaling every location is kept; the modelling path's and the views' per-location
    mean (a location without a value counts as 0, the one rule of sparse profiles:
    perfcast.experiment.reduce_over_locations) is Extra-P's weak-scaling value of the same files
    (table above), including the threads whose value is 0."""
    from perfcast.analysis.views import scope_values
    from perfcast.fit import series_statistics

    exp = load([cubeset / "simple_threaded"])
    assert exp.has_locations
    st = series_statistics(exp, "mean").astype({"callpath": str, "metric": str})
    got = {(r.callpath, r.metric, r.f): r.mean for r in st.itertuples()}
    want = {(cp, m, f): slope * (f if dep == "f" else 1)
            for (cp, m), (slope, dep) in EXTRAP_SIMPLE_THREADED["weak"].items() for f in (1.0, 2.0, 3.0, 4.0, 5.0)}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())
    for metric in ("time", "visits"):
        v = scope_values(exp, metric, ranks="mean")
        view = {(r.callpath, metric, r.f): r.exclusive for r in v.itertuples()}
        assert all(view[k] == pytest.approx(want[k], rel=1e-12) for k in want if k[1] == metric)


_EXTRAP_WEAK_MEANS = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from extrap.fileio.file_reader.cube_file_reader2 import CubeFileReader2
e = CubeFileReader2().read_cube_file(sys.argv[1], "weak")
print(json.dumps({str(c) + "|" + str(m): ms[0].mean for (c, m), ms in e.measurements.items()}))
"""


def test_rank_mean_of_a_real_profile_is_extraps(data_dir, tmp_path):
    """BLAST on 64 ranks (Score-P, Blue Gene/Q): Extra-P 4.2.5 reads the file with weak scaling
    (the mean over every location, a location without a value counting as 0; 24 of its series are
    0 at some ranks only); perfcast's model statistics and views give the same per-rank means."""
    import json
    import subprocess

    from perfcast.analysis.views import scope_values
    from perfcast.fit import series_statistics

    py = extrap_python()
    src = data_dir / "formats" / "cube" / "blast.p64.r1"
    for name in ("blast.p64.r1", "blast.p65.r1"):   # Extra-P needs a parameter that varies
        (tmp_path / name).symlink_to(src)
    r = subprocess.run([str(py), "-c", _EXTRAP_WEAK_MEANS, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    theirs = json.loads(r.stdout)
    exp = load([src / "profile.cubex"])
    st = series_statistics(exp, "mean").astype({"callpath": str, "metric": str})
    ours = {f"{x.callpath}|{x.metric}": x.mean for x in st.itertuples()}
    assert ours.keys() == theirs.keys() and len(ours) == 313
    assert all(ours[k] == pytest.approx(v, rel=1e-12, abs=1e-300) for k, v in theirs.items())
    partly_zero = exp.data.groupby(["metric", "callpath"], observed=True)["value"].agg(
        lambda v: bool((v == 0).any() and (v != 0).any()))
    assert int(partly_zero.sum()) == 24
    view = scope_values(exp, "time", ranks="mean")
    for x in view.itertuples():
        assert x.exclusive == pytest.approx(theirs[f"{x.callpath}|time"], rel=1e-12, abs=1e-300)


def test_scaling_on_the_command_line(cubeset, capsys):
    import json

    from perfcast.cli import main

    assert main(["model", str(cubeset / "simple_threaded"), "--scaling", "weak-threaded", "--metric", "time",
                 "--callpath", "main->foo", "--json"]) == 0, capsys.readouterr().err
    [m] = cli_items(capsys.readouterr().out, "models")
    # Extra-P's weak_threaded value of main->foo is 4.95 * f (table above): the fit finds it
    assert m["callpath"] == "main->foo" and m["constant"] == pytest.approx(0, abs=1e-9)
    [term] = m["terms"]
    assert term["coefficient"] == pytest.approx(4.95, rel=1e-9)
    assert term["factors"] == {"f": {"exponent": "1", "log_exponent": 0}}


def test_unknown_scaling_is_refused(cubeset):
    with pytest.raises(PerfcastError, match="unknown scaling"):
        load([cubeset / "simple_threaded"], options=ReadOptions(scaling="sideways"))


# -- Extra-P's run-directory naming styles --------------------------------------------------------
# The directory names of Extra-P's tests/data/cubeset/allowed_formats (Extra-P 4.2.5), with the
# coordinates Extra-P's rules give them, worked out by hand: the prefix up to the first '.' is
# dropped (none in x10y1z1), '.r<N>' is the repetition, a value is digits with '.'/',' (',' a
# decimal comma; a trailing separator ends the value).
NAMING_STYLES = {
    "mm.x1.1y1.1z1.1": ((1.1, 1.1, 1.1), 2),          # decimal points, 2 profiles = 2 repetitions
    "mm.x10y1z1.r1": ((10, 1, 1), 1),
    "mm.x1y1z1": ((1, 1, 1), 2),                      # no .rN, 2 profiles
    "mm.x20,5.y20,5.z1,5.r1": ((20.5, 20.5, 1.5), 1),  # decimal commas, '.' between parameters
    "mm.x21.5,y21,5,z1.15.r1": ((21.5, 21.5, 1.15), 1),  # mixed, ',' between parameters
    "mm.x22.5.y22.5.z1.25.r1": ((22.5, 22.5, 1.25), 1),
    "mm.x25.y25.z1.r1": ((25, 25, 1), 1),              # '.' between integer parameters
    "x10y1z1": ((10, 1, 1), 1),                        # no prefix
}


def _make_set(root: Path, src: Path, names: dict) -> Path:
    for name, (_coords, n_files) in names.items():
        d = root / name
        d.mkdir(parents=True)
        if n_files == 1:
            shutil.copy(src, d / "profile.cubex")
        else:
            for k in range(1, n_files + 1):
                shutil.copy(src, d / f"profile{k}.cubex")
    return root


@pytest.mark.parametrize("style", list(NAMING_STYLES))
def test_extrap_naming_style_alone(cubeset, tmp_path, style):
    # each style beside a plain mm.x2y3z4.r1 run, so that every parameter varies
    src = cubeset / "single_parameter" / "mm.x1y1z1.r1" / "profile.cubex"
    names = {style: NAMING_STYLES[style], "mm.x2y3z4.r1": ((2, 3, 4), 1)}
    exp = read_cube(_make_set(tmp_path / "set", src, names))
    assert exp.parameters == ("x", "y", "z")
    got = {tuple(r[:3]): r[3] for r in exp.repetitions()[["x", "y", "z", "repetitions"]].to_numpy()}
    assert got == pytest.approx({tuple(float(v) for v in c): n for c, n in names.values()})
    # every repetition holds the profile's values (pycubexr's, summed over the tree)
    want = sum(_pycubexr_values(src, "time").values())
    per_run = exp.data[exp.data["metric"] == "time"].groupby(["x", "y", "z", "rep"])["value"].sum()
    assert per_run.to_numpy() == pytest.approx(np.full(len(per_run), want))


def test_extrap_allowed_formats_together(cubeset, tmp_path):
    # Extra-P's allowed_formats set: all styles in one directory, read as one experiment
    src = cubeset / "single_parameter" / "mm.x1y1z1.r1" / "profile.cubex"
    exp = read_cube(_make_set(tmp_path / "allowed_formats", src, NAMING_STYLES))
    want: dict = {}
    for coords, n in NAMING_STYLES.values():
        key = tuple(float(v) for v in coords)
        want[key] = want.get(key, 0) + n
    got = {tuple(r[:3]): r[3] for r in exp.repetitions()[["x", "y", "z", "repetitions"]].to_numpy()}
    assert got == pytest.approx(want)  # x10y1z1 and mm.x10y1z1.r1 are one point, 2 repetitions
    paths = {r["path"] for r in exp.meta["cube"]["runs"]}
    assert {"mm.x1y1z1/profile1.cubex", "mm.x1y1z1/profile2.cubex"} <= paths


def test_extrap_negative_examples(cubeset, tmp_path):
    src = cubeset / "single_parameter" / "mm.x1y1z1.r1" / "profile.cubex"
    # Extra-P's negative_example: parameter names differ (x,y,wrong vs x,y,z)
    neg = _make_set(tmp_path / "neg", src, {"mm.x1y1wrong1": ((), 1), "x10y1z1": ((), 1)})
    assert "differ" in _fails(neg, "parameters").message
    # a value that is no number (two decimal points): the run's parameters are unknown
    bad = _make_set(tmp_path / "bad", src, {"mm.x1.2.3y1": ((), 1), "mm.x2y1": ((), 1)})
    err = _fails(bad, "--point")
    assert err.path == str(bad / "mm.x1.2.3y1" / "profile.cubex")


def _pycubexr_components(path: Path, metric: str) -> dict[tuple[str, int, int], np.ndarray]:
    """(callpath, rank, thread) -> the exclusive value's components, as pycubexr computes them:
    NDOUBLES(n) as n floats, COMPLEX as (real, imaginary) of the complex number it holds."""
    locs = _locations(path)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with CubexParser(path) as c:
            mv = c.get_metric_values(c.get_metric_by_name(metric))
            for cn in c.all_cnodes():
                names, x = [], cn
                while x is not None:
                    names.append(x.region.name)
                    x = x.parent
                vals = mv.cnode_values(cn, convert_to_exclusive=True)
                vals = np.asarray(getattr(vals, "_values", vals))
                if np.iscomplexobj(vals):
                    vals = np.stack([vals.real, vals.imag], axis=1)
                for j, v in enumerate(vals):
                    out[("->".join(reversed(names)), *locs[j])] = np.asarray(v, dtype=float)
    return out


def test_vector_metrics_are_components(cube_dir):
    # NDOUBLES(10): ten metrics NDOUBLES10[0..9]; COMPLEX: COMPLEX[re] and COMPLEX[im] (additive,
    # unlike pycubexr's float view of a complex value, its magnitude); each converted to exclusive
    # like any inclusive metric.  Expected: pycubexr's own exclusive values of the same file.
    cubex = cube_dir / "test_only_files" / "cube-values_example.cubex"
    exp = read_cube(cubex)
    dtypes = {m.findtext("uniq_name"): m.findtext("dtype") for m in _anchor(cubex).iter("metric")}
    assert dtypes["NDOUBLES10"] == "NDOUBLES(10)" and dtypes["COMPLEX"] == "COMPLEX"
    for metric, names in (("NDOUBLES10", [f"NDOUBLES10[{i}]" for i in range(10)]),
                          ("COMPLEX", ["COMPLEX[re]", "COMPLEX[im]"])):
        want = _pycubexr_components(cubex, metric)
        assert len(want) == 12  # 3 cnodes x 4 locations
        assert exp.meta["cube"]["vector_metrics"][metric] == names
        for i, name in enumerate(names):
            got = _ours(exp, name)
            assert exp.metrics[name].scope == "exclusive"
            for k, v in want.items():
                assert got.get(k, 0.0) == pytest.approx(v[i]), (name, k)
    # the inclusive values come back too: main's NDOUBLES10[0] of location 0 is 0 in the file
    inc = exp.to_inclusive("NDOUBLES10[0]", name="inc")
    d = inc.data[(inc.data["metric"] == "inc") & (inc.data["callpath"] == "main")]
    assert d[(d["rank"] == 0) & (d["thread"] == 0)]["value"].item() == pytest.approx(0.0)

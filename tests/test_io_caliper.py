"""Caliper readers (.cali and json-split) against the raw files of real runs.

Ground truth comes from the files themselves, read here without caliperreader: a small parser of
the .cali text format (node and ctx records), the JSON rows of json-split output, and formulas
that RAJAPerf's kernels obey (DAXPY: 2 flops and 24 bytes per element).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from perfcast import store
from perfcast.errors import PerfcastError
from perfcast.experiment import SEP
from perfcast.io import ReadOptions, load
from perfcast.io.caliper import UNANNOTATED, read_many

from conftest import cli_items

LULESH = "thicket/lulesh_weak_scaling_cali"


# ----------------------------------------------------------------------------------------------
# an independent reader of the .cali text format, enough for the region profiles used here


def _split_record(line: str) -> dict[str, list[str]]:
    out, entry, cur = {}, [], ""
    it = iter(line.rstrip("\n"))
    for c in it:
        if c == "\\":
            cur += next(it)
        elif c == ",":
            entry.append(cur)
            out[entry[0]] = entry[1:]
            entry, cur = [], ""
        elif c == "=":
            entry.append(cur)
            cur = ""
        else:
            cur += c
    entry.append(cur)
    out[entry[0]] = entry[1:]
    return out


def raw_cali(path: Path, channel: str | None = None) -> tuple[dict[tuple, dict[str, float]], dict[str, str]]:
    """{region path: {metric: value}} and globals, parsed from the text by hand.

    Region frames are the values of attributes with the nested property; metrics are the
    visible attributes named ``op#...``.  ``channel`` keeps only records of that spot channel.
    """
    nodes = {}  # id -> (attr id, data, parent id)
    names = {8: "cali.attribute.name"}
    rows, globals_ = {}, {}

    def prop(attr_id: int) -> int:
        # an attribute's properties hang above its name node (attr 10 = cali.attribute.prop)
        n = nodes[attr_id][2] if attr_id in nodes else None
        while n is not None:
            attr, data, parent = nodes[n]
            if attr == 10:
                return int(data)
            n = parent
        return 0

    for line in path.read_text().splitlines():
        rec = _split_record(line)
        kind = rec["__rec"][0]
        if kind == "node":
            nid, attr = int(rec["id"][0]), int(rec["attr"][0])
            parent = int(rec["parent"][0]) if "parent" in rec else None
            nodes[nid] = (attr, rec["data"][0], parent)
            if attr == 8:
                names[nid] = rec["data"][0]
        elif kind in ("ctx", "globals"):
            frames, refvals = [], {}
            for ref in rec.get("ref", []):
                n = int(ref)
                chain = []
                while n is not None:
                    attr, data, parent = nodes[n]
                    refvals.setdefault(names[attr], data)
                    if kind == "ctx" and prop(attr) & 256:  # CALI_ATTR_NESTED
                        chain.append(data)
                    n = parent
                frames.extend(reversed(chain))
            values = {int(a): d for a, d in zip(rec.get("attr", []), rec.get("data", []))}
            if kind == "globals":
                globals_.update(refvals)
                globals_.update({names[a]: d for a, d in values.items()})
                continue
            if channel is not None and refvals.get("spot.channel") != channel:
                continue
            key = tuple(frames) if frames else (UNANNOTATED,)
            assert key not in rows, f"{path}: region {key} twice"
            # 128 = CALI_ATTR_HIDDEN (internal values such as avg.count#...)
            rows[key] = {names[a]: float(v) for a, v in values.items()
                         if "#" in names[a] and "aggregate.slot" not in names[a] and not prop(a) & 128}
    return rows, globals_


def _values(exp, **coords) -> dict[tuple[str, str], float]:
    d = exp.data
    for k, v in coords.items():
        d = d[d[k] == v]
    return {(str(r.callpath), str(r.metric)): r.value for r in d.itertuples()}


# ----------------------------------------------------------------------------------------------
# .cali: LULESH weak scaling


@pytest.fixture(scope="module")
def lulesh(data_dir):
    seen = []
    exp = load([data_dir / LULESH], options=ReadOptions(progress=lambda i, n, label: seen.append((i, n))))
    return exp, seen



def _split_path(nodes, i) -> str:
    """The callpath of node ``i`` of a json-split file's node table (labels up the parent chain)."""
    out = []
    while i is not None:
        out.append(nodes[i]["label"])
        i = nodes[i].get("parent")
    return SEP.join(reversed(out))

def test_lulesh_points_from_adiak_jobsize(lulesh):
    exp, progress = lulesh
    assert exp.parameters == ("jobsize",)
    assert exp.points()["jobsize"].tolist() == [27.0, 64.0, 125.0, 216.0, 343.0]
    assert exp.repetitions()["repetitions"].tolist() == [1] * 5
    # one progress call per file and a final one
    assert progress[0] == (0, 5) and progress[-1] == (5, 5) and len(progress) == 6
    choice = exp.meta["caliper"]["parameters"]
    assert choice["keys"] == ["jobsize"] and choice["how"] == "auto"
    # mpi.world.size and numhosts repeat jobsize; results and dates are not parameters
    assert set(choice["redundant"]) == {"mpi.world.size", "numhosts"}
    assert {"elapsed_time", "figure_of_merit"} <= set(choice["ignored"])
    # per-run globals are kept, numbers as numbers
    runs = {r["file"]: r for r in exp.meta["caliper"]["runs"]}
    assert runs["27_cores.cali"]["globals"]["problem_size"] == 30
    assert runs["343_cores.cali"]["globals"]["cluster"] == "opal"
    assert runs["343_cores.cali"]["point"] == {"jobsize": 343}
    assert exp.meta["format"] == "caliper"


def test_lulesh_tree_and_metrics(lulesh):
    exp, _ = lulesh
    tree = exp.tree
    cff = SEP.join(["main", "lulesh.cycle", "LagrangeLeapFrog", "LagrangeNodal", "CalcForceForNodes"])
    assert cff in tree
    assert tree.parent(cff) == SEP.join(["main", "lulesh.cycle", "LagrangeLeapFrog", "LagrangeNodal"])
    assert tree.name(cff) == "CalcForceForNodes"
    assert tree.depth(cff) == 4
    assert set(tree.roots()) >= {"main", UNANNOTATED, "MPI_Comm_dup"}
    m = exp.metrics["avg#inclusive#sum#time.duration"]
    assert (m.unit, m.kind, m.scope, m.description) == ("sec", "time", "inclusive", "Avg time/rank")
    assert exp.metrics["sum#inclusive#sum#time.duration"].description == "Total time"
    assert not exp.has_locations  # spot profiles hold cross-rank statistics
    # inclusive values: each callpath's exclusive share (value minus children) is not negative
    ex = exp.to_exclusive("sum#inclusive#sum#time.duration", name="x")
    assert ex.select(metric="x").data["value"].min() >= -1e-9


@pytest.mark.parametrize("cores", [27, 64, 125, 216, 343])
def test_lulesh_values_match_raw_file(lulesh, data_dir, cores):
    exp, _ = lulesh
    rows, globals_ = raw_cali(data_dir / LULESH / f"{cores}_cores.cali")
    assert int(globals_["jobsize"]) == cores and int(globals_["mpi.world.size"]) == cores
    got = _values(exp, jobsize=float(cores))
    want = {(SEP.join(frames), m): v for frames, ms in rows.items() for m, v in ms.items()}
    assert len(want) > 150
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12, abs=0), k


def test_lulesh_literal_values(lulesh):
    exp, _ = lulesh
    got = _values(exp, jobsize=27.0)
    # 27_cores.cali: "__rec=ctx,ref=43=101,attr=86=89=92=96=94=99,data=47.226995=47.248547=47.238297=..."
    # (node 43 is function=main; attr 92 is avg#inclusive#sum#time.duration)
    assert got[("main", "avg#inclusive#sum#time.duration")] == 47.238297
    assert got[("main", "min#inclusive#sum#time.duration")] == 47.226995
    assert got[("main", "sum#inclusive#sum#time.duration")] == 1275.434023
    # the record without any region is kept under the unannotated root
    assert got[(UNANNOTATED, "sum#inclusive#sum#time.duration")] == 0.053702


def test_lulesh_parameter_given_by_user(data_dir):
    exp = load([data_dir / LULESH], options=ReadOptions(parameters=("mpi.world.size",)))
    assert exp.parameters == ("mpi.world.size",)
    assert exp.points()["mpi.world.size"].tolist() == [27.0, 64.0, 125.0, 216.0, 343.0]
    assert exp.meta["caliper"]["parameters"]["how"] == "given"
    two = load([data_dir / LULESH], options=ReadOptions(parameters=("jobsize", "problem_size")))
    assert two.points()["problem_size"].unique().tolist() == [30.0]


def test_lulesh_single_file_has_no_parameters(data_dir):
    exp = load([data_dir / LULESH / "64_cores.cali"])
    assert exp.parameters == ()
    assert exp.meta["caliper"]["runs"][0]["globals"]["jobsize"] == 64
    one = load([data_dir / LULESH / "64_cores.cali"], options=ReadOptions(parameters=("jobsize",)))
    assert one.points()["jobsize"].tolist() == [64.0]


def test_read_many_files_as_one_experiment(data_dir):
    files = [data_dir / LULESH / f"{c}_cores.cali" for c in (27, 64, 125)]
    exp = read_many(files)
    assert exp.parameters == ("jobsize",)
    assert exp.points()["jobsize"].tolist() == [27.0, 64.0, 125.0]


def test_round_trip_through_store(lulesh, tmp_path):
    exp, _ = lulesh
    dest = store.write(exp, tmp_path / "lulesh.perfcast")
    back = store.read(dest)
    assert back.equals(exp)
    again = load([dest])
    assert again.equals(exp)


# ----------------------------------------------------------------------------------------------
# .cali: RAJAPerf


def _cali_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.cali"))


def test_rajaperf_lassen_sizes_kernels_and_formulas(data_dir):
    root = data_dir / "thicket/rajaperf_lassen_sizes"
    exp = load([root])
    assert exp.parameters == ("ProblemSizeRunParam",)
    sizes = [1048576.0, 2097152.0, 4194304.0, 8388608.0]
    assert exp.points()["ProblemSizeRunParam"].tolist() == sizes
    # repetitions = files per size (directory names end in the size)
    per_size = defaultdict(int)
    for f in _cali_files(root):
        per_size[float(f.parent.parent.name.rsplit("_", 1)[1])] += 1
    assert exp.repetitions()["repetitions"].tolist() == [per_size[s] for s in sizes]
    # the GPU block sizes are not numeric globals: flagged, not silently merged
    assert exp.meta["caliper"]["mixed_within_points"]["tuning"] == ["block_1024", "block_128", "block_256",
                                                                    "block_512"]
    assert any("tuning" in w for w in exp.meta["warnings"])
    daxpy = "RAJAPerf->Basic->Basic_DAXPY"
    assert exp.tree.parent(daxpy) == "RAJAPerf->Basic"
    assert exp.metrics["any#any#max#Bytes/Rep"].scope == "unknown"
    for n in sizes:
        s = exp.select(callpath=daxpy, ProblemSizeRunParam=n).data
        by = {m: g["value"].to_numpy() for m, g in s.groupby("metric", observed=True)}
        # y[i] += a * x[i]: 2 flops, two 8-byte loads and one store per element
        assert np.all(by["any#any#max#Flops/Rep"] == 2 * n)
        assert np.all(by["any#any#max#Bytes/Rep"] == 24 * n)
        assert np.all(by["any#any#max#Iterations/Rep"] == n)
        assert sorted(set(by["any#any#max#BlockSize"])) == [128, 256, 512, 1024]


def test_rajaperf_values_match_raw_file(data_dir):
    root = data_dir / "thicket/rajaperf_lassen_sizes"
    exp = load([root])
    f = root / "clang10.0.1_nvcc10.2.89_4194304/1/Base_CUDA-block_512.cali"
    run = next(r for r in exp.meta["caliper"]["runs"] if r["file"] == str(f.relative_to(root)))
    rows, globals_ = raw_cali(f)
    assert globals_["tuning"] == "block_512" and run["globals"]["tuning"] == "block_512"
    got = _values(exp, ProblemSizeRunParam=4194304.0, rep=run["rep"])
    want = {(SEP.join(fr), m): v for fr, ms in rows.items() for m, v in ms.items()}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())


@pytest.mark.parametrize("sub", ["thicket/rajaperf", "thicket/rajaperf_quartz_8M"])
def test_rajaperf_directories_read(data_dir, sub):
    root = data_dir / sub
    exp = load([root])
    files = _cali_files(root)
    assert len(exp.meta["caliper"]["runs"]) == len(files)
    assert int(exp.repetitions()["repetitions"].sum()) == len(files)
    kernels = [p for p in exp.tree if exp.tree.depth(p) == 2 and p.startswith("RAJAPerf->")]
    assert len(kernels) > 40
    assert any(m.endswith("Bytes/Rep") for m in exp.metrics)
    assert any(m.endswith("Flops/Rep") for m in exp.metrics)
    if sub.endswith("8M"):
        # only compiler flags differ: one point, the flags are reported as mixed
        assert exp.parameters == ()
        assert "cmake_cxx_flags" in exp.meta["caliper"]["mixed_within_points"]
        assert exp.metrics["inclusive#sum#time.duration.ns"].unit == "ns"
        assert exp.metrics["sum#sum#time.duration.ns"].scope == "exclusive"
    else:
        assert exp.parameters == ("ProblemSizeRunParam", "omp_max_threads")


# ----------------------------------------------------------------------------------------------
# .cali: other shapes (spot channels, time series, old aggregation profiles)


def test_spotdb_two_parameters_and_regionprofile_channel(data_dir):
    root = data_dir / "formats/caliper/spotdb"
    exp = load([root])
    assert exp.parameters == ("jobsize", "threads")
    pts = exp.points()
    assert list(map(tuple, pts.to_numpy())) == [(1.0, 4.0), (64.0, 1.0), (64.0, 2.0)]
    assert exp.repetitions()["repetitions"].tolist() == [2, 1, 1]
    # the timeseries channel's metrics are not mixed into the region profile
    assert not any("loop.iterations" in m for m in exp.metrics)
    rows, _ = raw_cali(root / "1.cali", channel="regionprofile")
    got = _values(exp, jobsize=64.0, threads=2.0)
    want = {(SEP.join(fr), m): v for fr, ms in rows.items() for m, v in ms.items()}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())


def test_old_aggregation_profile_exclusive_metrics(data_dir):
    f = data_dir / "formats/caliper/caliper-lulesh-cali/lulesh-annotation-profile.cali"
    exp = load([f])
    assert exp.metrics["sum#time.duration"].scope == "exclusive"
    assert exp.metrics["count"].kind == "count"
    rows, _ = raw_cali(f)
    got = _values(exp)
    want = {(SEP.join(fr), m): v for fr, ms in rows.items() for m, v in ms.items()}
    assert {k for k in got if k[1] != "count"} == set(want)
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())
    # "main" record: count=2, sum#time.duration=0.025121 (line with ref to function=main)
    assert got[("main", "count")] == 2
    assert got[("main", "sum#time.duration")] == 0.025121


def test_timeseries_snapshots_are_combined(data_dir):
    f = data_dir / "formats/caliper/caliper-timeseries-cali/timeseries.cali"
    exp = load([f])
    import caliperreader

    r = caliperreader.CaliperReader()
    r.read(str(f))
    # sum over all snapshots of the main->lulesh.cycle records, by hand
    target = ["main", "lulesh.cycle"]
    recs = [x for x in r.records if x.get("path") == target and "sum#time.duration.ns" in x]
    assert len(recs) > 10
    total = sum(float(x["sum#time.duration.ns"]) for x in recs)
    count = sum(float(x["count"]) for x in recs)
    mx = max(float(x["max#time.duration.ns"]) for x in recs)
    mn = min(float(x["min#time.duration.ns"]) for x in recs)
    got = _values(exp)
    cp = SEP.join(target)
    assert got[(cp, "sum#time.duration.ns")] == pytest.approx(total, rel=1e-12)
    assert got[(cp, "count")] == count
    assert got[(cp, "max#time.duration.ns")] == mx
    assert got[(cp, "min#time.duration.ns")] == mn
    assert exp.metrics["sum#time.duration.ns"].unit == "ns"


# ----------------------------------------------------------------------------------------------
# json-split


def test_json_split_lulesh_tree_ranks_and_values(data_dir):
    f = data_dir / "formats/caliper/caliper-lulesh-json/lulesh-annotation-profile.json"
    exp = load([f])
    assert exp.meta["format"] == "caliper-json"
    doc = json.loads(f.read_text())
    nodes = doc["nodes"]

    def path(i):
        return _split_path(nodes, i)

    assert len(exp.tree) == len(nodes) + 1  # + the unannotated root
    for i, n in enumerate(nodes):
        p = path(i)
        assert exp.tree.parent(p) == (path(n["parent"]) if "parent" in n else None)
    assert exp.has_locations
    assert sorted(exp.data["rank"].unique()) == list(range(8))
    cols = doc["columns"]
    d = exp.data
    got = {(str(r.callpath), int(r.rank), str(r.metric)): r.value for r in d.itertuples()}
    n = 0
    for row in doc["data"]:
        rec = dict(zip(cols, row))
        cp = UNANNOTATED if rec["path"] is None else path(rec["path"])
        for m in ("inclusive#sum#time.duration", "sum#time.duration"):
            assert got[(cp, rec["mpi.rank"], m)] == rec[m]
            n += 1
    assert n == len(d)
    assert exp.metrics["inclusive#sum#time.duration"].scope == "inclusive"
    assert exp.metrics["sum#time.duration"].scope == "exclusive"
    # the scopes are right: inclusive minus children's inclusive is exactly the exclusive column
    x = exp.to_exclusive("inclusive#sum#time.duration", name="derived")
    t = x.data.pivot_table(index=["callpath", "rank"], columns="metric", values="value", observed=True)
    assert np.array_equal(t["derived"].to_numpy(), t["sum#time.duration"].to_numpy())


def test_json_split_cpi_sums_over_source_lines(data_dir):
    f = data_dir / "formats/caliper/caliper-cpi-json/cpi-callpath-profile.json"
    exp = load([f])
    doc = json.loads(f.read_text())
    nodes, cols = doc["nodes"], doc["columns"]

    def path(i):
        return _split_path(nodes, i)

    want = defaultdict(float)
    for row in doc["data"]:
        rec = dict(zip(cols, row))
        cp = path(rec["source.function#callpath.address"])
        want[(cp, rec["mpi.rank"], "sum#time.duration")] += rec["sum#time.duration"]
        want[(cp, rec["mpi.rank"], "count")] += rec["count"]
    got = {(str(r.callpath), int(r.rank), str(r.metric)): r.value for r in exp.data.itertuples()}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())
    main = "_start->__libc_start_main->main"
    assert exp.tree.parent(main) == "_start->__libc_start_main"
    assert any("sourceloc#cali.sampler.pc" in n for n in exp.meta["caliper"]["runs"][0]["notes"])


def test_json_split_directory(data_dir, tmp_path):
    src = data_dir / "formats/caliper/caliper-lulesh-json/lulesh-annotation-profile.json"
    for n in (4, 8):
        d = tmp_path / f"run{n}"
        d.mkdir()
        doc = json.loads(src.read_text())
        doc["jobsize"] = n
        (d / "profile.json").write_text(json.dumps(doc))
    exp = load([tmp_path])
    assert exp.meta["format"] == "caliper-json"
    assert exp.parameters == ("jobsize",)
    assert exp.points()["jobsize"].tolist() == [4.0, 8.0]


# ----------------------------------------------------------------------------------------------
# bad input


def _err(excinfo) -> PerfcastError:
    e = excinfo.value
    assert "\n" not in str(e)
    return e


def test_truncated_cali_mid_line(data_dir, tmp_path):
    text = (data_dir / LULESH / "27_cores.cali").read_text()
    bad = tmp_path / "cut.cali"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(PerfcastError) as ei:
        load([bad])
    e = _err(ei)
    assert e.path == str(bad) and "truncated" in e.message and e.where.isdigit()


def test_truncated_cali_at_line_boundary(data_dir, tmp_path):
    lines = (data_dir / LULESH / "27_cores.cali").read_text().splitlines(keepends=True)
    bad = tmp_path / "cut.cali"
    bad.write_text("".join(lines[: len(lines) // 2]))
    with pytest.raises(PerfcastError) as ei:
        load([bad])
    e = _err(ei)
    assert e.path == str(bad) and "truncated" in e.message


def test_truncated_file_inside_directory_names_the_file(data_dir, tmp_path):
    d = tmp_path / "runs"
    shutil.copytree(data_dir / LULESH, d)
    victim = d / "125_cores.cali"
    os.chmod(victim, 0o644)
    victim.write_text(victim.read_text()[:3000])
    with pytest.raises(PerfcastError) as ei:
        load([d])
    assert _err(ei).path == str(victim)


def test_non_caliper_files_with_format_caliper(data_dir, tmp_path):
    j = data_dir / "formats/caliper/caliper-lulesh-json/lulesh-annotation-profile.json"
    with pytest.raises(PerfcastError) as ei:
        load([j], format="caliper")
    e = _err(ei)
    assert e.path == str(j) and "not a Caliper .cali file" in e.message and e.where == "1"
    binary = tmp_path / "x.cali"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(PerfcastError) as ei:
        load([binary], format="caliper")
    assert _err(ei).path == str(binary)
    empty = tmp_path / "empty.cali"
    empty.write_text("")
    with pytest.raises(PerfcastError, match="empty"):
        load([empty], format="caliper")


def test_corrupt_record_reference(data_dir, tmp_path):
    text = (data_dir / LULESH / "27_cores.cali").read_text()
    bad = tmp_path / "bad.cali"
    bad.write_text(text.replace("__rec=ctx,ref=43=101,", "__rec=ctx,ref=99999=101,"))
    with pytest.raises(PerfcastError) as ei:
        load([bad])
    e = _err(ei)
    assert e.path == str(bad) and e.where.isdigit()
    assert text.splitlines()[int(e.where) - 1].startswith("__rec=ctx,ref=43=101,")
    assert "refers to a node or attribute" in e.message and "Error" not in e.message
    # the first line cut off: the next record's parent is defined nowhere
    headless = tmp_path / "headless.cali"
    headless.write_text(text.split("\n", 1)[1])
    with pytest.raises(PerfcastError) as ei:
        load([headless], format="caliper")
    e = _err(ei)
    assert e.path == str(headless) and e.where == "1" and "refers to a node or attribute" in e.message


@pytest.mark.parametrize("drop", [2, 5])
def test_record_with_fewer_values_than_attributes(data_dir, tmp_path, drop):
    # caliperreader pairs attr ids with data values in order: a value dropped shifted the later
    # ones onto the next attributes (main's avg read as its sum), exit 0
    lines = (data_dir / LULESH / "64_cores.cali").read_text().splitlines(keepends=True)
    no = next(i for i, ln in enumerate(lines, 1) if ln.startswith("__rec=ctx,ref=43=101,attr=86=89=92=96=94=99,"))
    head, data = lines[no - 1].rstrip("\n").split(",data=")
    values = data.split("=")
    assert len(values) == len(head.split(",attr=")[1].split("=")) == 6
    del values[drop]
    lines[no - 1] = head + ",data=" + "=".join(values) + "\n"
    d = tmp_path / "runs"
    d.mkdir()
    for f in (data_dir / LULESH).glob("*.cali"):
        (d / f.name).write_text(f.read_text())
    (d / "64_cores.cali").write_text("".join(lines))
    with pytest.raises(PerfcastError) as ei:
        load([d])
    e = _err(ei)
    assert (e.path, e.where, e.message) == (str(d / "64_cores.cali"), str(no), "record has 6 attributes but 5 values")


def test_a_record_repeated_verbatim_is_read_once_for_every_metric(data_dir, tmp_path):
    # a duplicated ctx record (no rank attribute) was added in for sum# metrics but averaged away
    # for avg#: one consistent rule, read once, warned at its line
    from caliperreader import read_caliper_contents

    src = data_dir / LULESH / "64_cores.cali"
    lines = src.read_text().splitlines(keepends=True)
    no = next(i for i, ln in enumerate(lines, 1) if ln.startswith("__rec=ctx,ref=43=101,attr=86=89=92=96=94=99,"))
    bad = tmp_path / "64_cores.cali"
    bad.write_text("".join(lines[:no] + [lines[no - 1]] + lines[no:]))
    exp = load([bad])
    # each value is the one record's: caliperreader's records of the untouched file, keyed by path
    records, _ = read_caliper_contents(str(src))
    got = {(str(r.callpath), str(r.metric)): r.value for r in exp.data.itertuples()}
    n = 0
    for rec in records:
        if "sum#inclusive#sum#time.duration" not in rec:
            continue
        p = rec.get("path", UNANNOTATED)
        cp = SEP.join([p] if isinstance(p, str) else p)
        for m in ("sum#inclusive#sum#time.duration", "avg#inclusive#sum#time.duration",
                  "min#inclusive#sum#time.duration", "max#inclusive#sum#time.duration"):
            assert got[(cp, m)] == float(rec[m]), (cp, m)
            n += 1
    assert n == 4 * len({k[0] for k in got})
    assert exp.meta["warnings"][0] == (f"{bad}:{no + 1}: 1 record(s) repeat an earlier record exactly (line {no + 1} "
                                       f"repeats line {no}): read once")


def test_directory_without_cali(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with pytest.raises(PerfcastError) as ei:
        load([tmp_path], format="caliper")
    e = _err(ei)
    assert e.path == str(tmp_path) and "no .cali files" in e.message
    with pytest.raises(PerfcastError) as ei:
        load([tmp_path], format="caliper-json")
    assert _err(ei).path == str(tmp_path)


def test_requested_parameter_missing_or_not_numeric(data_dir):
    with pytest.raises(PerfcastError) as ei:
        load([data_dir / LULESH], options=ReadOptions(parameters=("nodecount",)))
    e = _err(ei)
    assert e.path.endswith(".cali") and e.where == "nodecount" and "jobsize" in e.message
    with pytest.raises(PerfcastError) as ei:
        load([data_dir / LULESH], options=ReadOptions(parameters=("cluster",)))
    e = _err(ei)
    assert e.where == "cluster" and "not numeric" in e.message and "'opal'" in e.message


def test_bad_json_split(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [[1, 0]],\n "columns": ["count", "path"],\n "nodes": [ }')
    with pytest.raises(PerfcastError) as ei:
        load([broken], format="caliper-json")
    e = _err(ei)
    assert e.path == str(broken) and e.where == "3"
    dangling = tmp_path / "dangling.json"
    dangling.write_text(json.dumps({"data": [[1.0, 7]], "columns": ["count", "path"],
                                    "column_metadata": [{"is_value": True}, {"is_value": False}],
                                    "nodes": [{"column": "path", "label": "main"}]}))
    with pytest.raises(PerfcastError) as ei:
        load([dangling], format="caliper-json")
    e = _err(ei)
    assert e.where == "data[0]" and "node 7" in e.message
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"data": [[1.0]], "columns": ["count", "path"], "nodes": []}))
    with pytest.raises(PerfcastError) as ei:
        load([short], format="caliper-json")
    assert _err(ei).where == "data[0]"


def test_detection_by_content(data_dir):
    from perfcast.io import detect

    assert detect(data_dir / LULESH).name == "caliper"
    assert detect(data_dir / LULESH / "27_cores.cali").name == "caliper"
    assert detect(data_dir / "formats/caliper/caliper-cpi-json/cpi-callpath-profile.json").name == "caliper-json"
    assert detect(data_dir / "formats/caliper/caliper-cpi-json").name == "caliper-json"


# ----------------------------------------------------------------------------------------------
# Thicket JSON ensemble

ENSEMBLE = "thicket/lulesh_user_ensemble.json"


@pytest.fixture(scope="module")
def ensemble(data_dir):
    import perfcast.io.thicket  # noqa: F401  (registers the reader)

    return load([data_dir / ENSEMBLE]), json.loads((data_dir / ENSEMBLE).read_text())


def test_thicket_points_from_metadata(ensemble):
    exp, doc = ensemble
    assert exp.meta["format"] == "thicket"
    assert exp.parameters == ("jobsize", "problem_size", "threads")
    want = defaultdict(int)
    for m in doc["metadata"]:
        want[(float(m["jobsize"]), float(m["problem_size"]), float(m["threads"]))] += 1
    reps = exp.repetitions()
    got = {(r.jobsize, r.problem_size, r.threads): r.repetitions for r in reps.itertuples()}
    assert got == dict(want)
    assert sum(got.values()) == 172
    # compilers differ between runs of one point: reported, not hidden
    assert exp.meta["caliper"]["mixed_within_points"]["compiler"] == ["clang", "gnu", "intel"]


def test_thicket_values_and_tree_match_json(ensemble):
    exp, doc = ensemble
    graph = doc["graph"][0]

    def path(nid):
        out = []
        while True:
            out.append(graph[str(nid)]["data"]["name"])
            if not graph[str(nid)]["parents"]:
                return SEP.join(reversed(out))
            nid = graph[str(nid)]["parents"][0]

    assert sorted(exp.tree) == sorted(path(n) for n in graph)
    run_of = {r["file"]: r for r in exp.meta["caliper"]["runs"]}
    params = exp.parameters
    d = exp.data
    got = {(tuple(getattr(r, p) for p in params), r.rep, str(r.callpath), str(r.metric)): r.value
           for r in d.itertuples()}
    n = 0
    for rec in doc["dataframe"]:
        run = run_of[doc["profile_mapping"][str(rec["profile"])]]
        key = (tuple(float(run["point"][p]) for p in params), run["rep"], path(rec["node"]))
        for m in doc["inclusive_metrics"]:
            assert got[(*key, m)] == rec[m]
            n += 1
    assert n == len(d) == 13112
    assert all(exp.metrics[m].scope == "inclusive" for m in doc["inclusive_metrics"])


def test_thicket_bad_input(ensemble, tmp_path):
    _, doc = ensemble
    small = dict(doc)
    small["metadata"] = [dict(m) for m in doc["metadata"]]
    del small["metadata"][3]["jobsize"]
    f = tmp_path / "ens.json"
    f.write_text(json.dumps(small))
    with pytest.raises(PerfcastError) as ei:
        load([f], options=ReadOptions(parameters=("jobsize",)))
    e = _err(ei)
    label = doc["profile_mapping"][str(doc["metadata"][3]["profile"])]
    assert e.path == str(f) and e.where == f"{label}: jobsize"
    small = dict(doc)
    small["dataframe"] = [dict(r) for r in doc["dataframe"]]
    small["dataframe"][5]["node"] = 999
    f.write_text(json.dumps(small))
    with pytest.raises(PerfcastError) as ei:
        load([f])
    e = _err(ei)
    assert e.where == "dataframe[5]" and "999" in e.message


@pytest.mark.parametrize("value", [None, "big"])
def test_thicket_profile_without_a_parameter_the_others_have(ensemble, tmp_path, value):
    # one profile without jobsize (or jobsize 'big') turned the parameter off for the whole
    # ensemble: different job sizes merged as repetitions
    _, doc = ensemble
    assert len({m["jobsize"] for m in doc["metadata"]}) > 1
    bad = dict(doc)
    bad["metadata"] = [dict(m) for m in doc["metadata"]]
    if value is None:
        del bad["metadata"][0]["jobsize"]
        what = "has no metadata 'jobsize'"
    else:
        bad["metadata"][0]["jobsize"] = value
        what = "has jobsize = 'big', not a number,"
    f = tmp_path / "ens.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(PerfcastError) as ei:
        load([f])
    e = _err(ei)
    label = doc["profile_mapping"][str(doc["metadata"][0]["profile"])]
    sizes = sorted({int(m["jobsize"]) for m in doc["metadata"][1:]})
    assert (e.path, e.where) == (str(f), "metadata[0]")
    assert e.message.startswith(f"run {label} {what} while {len(doc['metadata']) - 1} other run(s) have numeric "
                                f"values of it ({', '.join(map(str, sizes))})")
    # named by the user, the other parameters read without it
    exp = load([f], options=ReadOptions(parameters=("problem_size",)))
    assert exp.parameters == ("problem_size",)


def test_cali_directory_run_without_a_parameter_the_others_have(data_dir, tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for f in (data_dir / LULESH).glob("*.cali"):
        (d / f.name).write_text(f.read_text())
    victim = d / "64_cores.cali"
    lines = victim.read_text().splitlines(keepends=True)
    # the globals record names jobsize through a node: the node record defining the value 64
    # of the jobsize attribute is renamed, so this run has no jobsize
    from caliperreader import read_caliper_contents

    assert read_caliper_contents(str(victim))[1]["jobsize"] == "64"
    jid = next(ln.split("id=")[1].split(",")[0] for ln in lines
               if ln.startswith("__rec=node,") and ",data=jobsize," in ln)
    i = next(i for i, ln in enumerate(lines) if ln.startswith("__rec=node,") and f",attr={jid},data=64" in ln)
    lines[i] = lines[i].replace(f",attr={jid},data=64", f",attr={jid},data=sixty-four")
    victim.write_text("".join(lines))
    with pytest.raises(PerfcastError) as ei:
        load([d])
    e = _err(ei)
    assert e.path == str(victim) and e.message.startswith(
        "this run has jobsize = 'sixty-four', not a number, while 4 other run(s) have numeric values of it "
        "(27, 125, 216, 343)")


def test_thicket_text_in_a_metric_cell_is_an_error(ensemble, tmp_path, capsys):
    # one text value in one cell made the whole column "not a metric": the metric vanished from
    # all 172 runs, exit 0
    from conftest import cli, one_error

    _, doc = ensemble
    col = "avg#inclusive#sum#time.duration"
    assert all(isinstance(r[col], float) for r in doc["dataframe"])
    bad = dict(doc)
    bad["dataframe"] = [dict(r) for r in doc["dataframe"]]
    bad["dataframe"][5][col] = "abc"
    f = tmp_path / "ens.json"
    f.write_text(json.dumps(bad))
    line = one_error(*cli(capsys, "show", f)[::2])
    assert line == f'perfcast: error: {f} (dataframe[5].{col}): "abc" is not a number'


@pytest.mark.parametrize("written, said", [("nan", "value 'nan' is not finite (NaN and infinity are not measurements)"),
                                           ("inf", "value 'inf' is not finite (NaN and infinity are not measurements)"),
                                           ("1e400", "value '1e400' overflows to infinity")])
def test_non_finite_cali_value_is_an_error_at_its_line(data_dir, tmp_path, written, said):
    # was dropped with a warning naming no file or place; every other reader refuses it
    src = data_dir / "formats" / "caliper" / "caliper-example-cali" / "example-profile.cali"
    rec = "attr=66=69=72=76=74=79,data=0.001533=0.001533=0.001533=0.001533=1=0.001533"
    lines = src.read_text().splitlines(keepends=True)
    no = next(i for i, ln in enumerate(lines, 1) if rec in ln)
    lines[no - 1] = lines[no - 1].replace("data=0.001533", f"data={written}", 1)
    bad = tmp_path / "bad.cali"
    bad.write_text("".join(lines))
    with pytest.raises(PerfcastError) as ei:
        load([bad])
    e = _err(ei)
    # attribute 66 is the first of the record: its name is the one in its node record
    name = next(ln.split(",data=")[1].split(",")[0] for ln in lines if ln.startswith("__rec=node,id=66,"))
    assert (e.path, e.where, e.message) == (str(bad), str(no), f"metric {name!r}: {said}")
    load([src])  # the file itself reads


@pytest.mark.parametrize("value, text", [(float("nan"), "NaN"), (float("inf"), "Infinity")])
def test_non_finite_json_values_are_errors_at_their_place(data_dir, ensemble, tmp_path, value, text):
    said = f"value {text!r} is not finite (NaN and infinity are not measurements)"
    # caliper json-split: data[row][column]
    doc = json.loads((data_dir / "formats/caliper/caliper-cpi-json/cpi-callpath-profile.json").read_text())
    j = doc["columns"].index("sum#time.duration")
    doc["data"][1][j] = value
    f = tmp_path / "split.json"
    f.write_text(json.dumps(doc))  # Python's json writes NaN / Infinity
    with pytest.raises(PerfcastError) as ei:
        load([f])
    e = _err(ei)
    assert (e.path, e.where, e.message) == (str(f), f"data[1][{j}]", f"metric 'sum#time.duration': {said}")
    # Thicket: dataframe[i].column (Thicket.to_json writes a missing value as null, never NaN)
    _, ens = ensemble
    col = "avg#inclusive#sum#time.duration"
    bad = dict(ens)
    bad["dataframe"] = [dict(r) for r in ens["dataframe"]]
    bad["dataframe"][7][col] = value
    f = tmp_path / "ens.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(PerfcastError) as ei:
        load([f])
    e = _err(ei)
    assert (e.path, e.where, e.message) == (str(f), f"dataframe[7].{col}", f"metric {col!r}: {said}")


# ----------------------------------------------------------------------------------------------
# GPU activity profiles (SW4, CUDA activity tracing)

SW4 = "formats/caliper/caliper-sw4-cuda-activity-cali/caliper_cuda_activity_profile.cali"
SW4_SUMMARY = "formats/caliper/caliper-sw4-cuda-activity-profile-cali/caliper_cuda_activity_profile_summary_v2.cali"


def _raw_records(path: Path) -> list[dict]:
    from caliperreader import read_caliper_contents

    records, _globals = read_caliper_contents(str(path))
    return records


@pytest.mark.parametrize("rel, metric", [(SW4, "scale#cupti.activity.duration"),
                                         (SW4_SUMMARY, "sum#scale#cupti.activity.duration")])
def test_sw4_gpu_time_is_the_sum_of_all_records(data_dir, rel, metric):
    f = data_dir / rel
    # the raw records' GPU time, summed here; the data README gives 15.36 s for it
    raw = sum(float(r[metric]) for r in _raw_records(f) if metric in r)
    assert raw == pytest.approx(15.36, abs=0.005)
    exp = load([f])
    assert exp.metrics[metric].scope == "exclusive"
    assert exp.data.loc[exp.data["metric"] == metric, "value"].sum() == pytest.approx(raw, rel=1e-12)


def test_sw4_kernels_are_children_of_their_launching_callpath(data_dir):
    f = data_dir / SW4
    exp = load([f])
    metric = "scale#cupti.activity.duration"
    want = defaultdict(float)
    for r in _raw_records(f):
        if metric not in r:
            continue
        p = r.get("path")
        frames = [UNANNOTATED] if p is None else ([p] if isinstance(p, str) else list(p))
        child = r.get("cupti.kernel.name") or f"[{r['cupti.activity.kind']}]"
        want[(SEP.join([*frames, child]), int(r["mpi.rank"]))] += float(r[metric])
    d = exp.data[exp.data["metric"] == metric]
    got = {(str(r.callpath), int(r.rank)): r.value for r in d.itertuples()}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())
    launch = ("main->solve->TIME_STEPPING->CLEAN_TIME->enforceIC->enforceIC::PREDICTOR->"
              "compute_preliminary_corrector->cudaLaunchKernel")
    kernels = exp.tree.children(launch)
    assert kernels and all(exp.tree.name(k).startswith("void ") for k in kernels)
    assert "main->solve->Solve::Host->Managed->cudaMemcpy->[memcpy]" in exp.tree
    # host time stays where it was measured
    host = exp.data[exp.data["metric"] == "scale#sum#cupti.host.duration"]
    assert host["value"].sum() == pytest.approx(
        sum(float(r["scale#sum#cupti.host.duration"]) for r in _raw_records(f)
            if "scale#sum#cupti.host.duration" in r), rel=1e-12)


def test_repeated_records_combined_by_their_operator(tmp_path):
    # several records of one callpath and rank: scale#/sum# add, min#/max# keep the extreme,
    # avg# is the mean weighted by count (hand-computed below)
    cols = ["path", "mpi.rank", "count", "scale#cupti.activity.duration", "sum#time.duration",
            "min#time.duration", "max#time.duration", "avg#time.duration"]
    rows = [[0, 0, 1, 0.5, 1.0, 0.25, 2.0, 4.0],
            [0, 0, 3, 1.5, 2.0, 0.125, 3.0, 8.0],
            [0, 0, 4, 2.0, 4.0, 0.5, 1.0, 1.0]]
    doc = {"data": rows, "columns": cols, "nodes": [{"label": "main", "column": "path"}],
           "column_metadata": [{"is_value": c not in ("path", "mpi.rank")} for c in cols]}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    got = {m: v for m, v in load([f]).data.groupby("metric")["value"].sum().items()}
    assert got["scale#cupti.activity.duration"] == 4.0
    assert got["sum#time.duration"] == 7.0
    assert got["min#time.duration"] == 0.125
    assert got["max#time.duration"] == 3.0
    assert got["avg#time.duration"] == pytest.approx((1 * 4.0 + 3 * 8.0 + 4 * 1.0) / 8)
    assert got["count"] == 8


@pytest.mark.parametrize("rel", ["formats/caliper/caliper-ordered-json/caliper-region-node-order.json",
                                 "formats/caliper/caliper-ordered-duplicate-json/caliper-region-dup-node-order.json"])
def test_json_split_alias_time_is_exclusive_with_its_unit(data_dir, rel):
    # Hatchet's region-profile json-split: the column 'time' (alias of sum#time.duration, unit sec in
    # column_metadata); Hatchet reads every value column without '(inc)' as exclusive.  Expected
    # numbers: the JSON's own data column, summed here per callpath.
    f = data_dir / rel
    doc = json.loads(f.read_text())
    cols, nodes = doc["columns"], doc["nodes"]
    t = cols.index("time")
    assert doc["column_metadata"][t]["attribute.unit"] == "sec"

    def path(i):
        return _split_path(nodes, i)

    want = defaultdict(float)
    for row in doc["data"]:
        p = row[cols.index("path")]
        want[UNANNOTATED if p is None else path(p)] += row[t]
    exp = load([f])
    m = exp.metrics["time"]
    assert (m.unit, m.kind, m.scope) == ("sec", "time", "exclusive")
    d = exp.data[exp.data["metric"] == "time"]
    got = d.groupby("callpath", observed=True)["value"].sum()
    assert set(got.index) == set(want)
    assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items())
    # inclusive time of main = its subtree's rows, summed from the JSON directly
    inc = exp.to_inclusive("time", name="inc")
    main = inc.data[(inc.data["metric"] == "inc") & (inc.data["callpath"] == "main")]["value"].sum()
    assert main == pytest.approx(sum(v for k, v in want.items() if k == "main" or k.startswith("main" + SEP)),
                                 rel=1e-12)
    # 'Node order' is a property, not a cost: its scope stays unknown
    assert exp.metrics["Node order"].scope == "unknown"


def test_json_split_view_reads_time(data_dir, capsys):
    from perfcast.cli import main

    f = data_dir / "formats/caliper/caliper-ordered-json/caliper-region-node-order.json"
    assert main(["view", str(f), "--json"]) == 0, capsys.readouterr().err
    out = cli_items(capsys.readouterr().out)[0]
    doc = json.loads(f.read_text())
    total = sum(r[doc["columns"].index("time")] for r in doc["data"])
    assert (out["metric"], out["unit"]) == ("time", "sec")
    assert out["total"] == pytest.approx(total, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# time series read per snapshot (ReadOptions.timeseries / --timeseries)

TS_DIR = "formats/caliper/caliper-timeseries-cali"
TS_LULESH = f"{TS_DIR}/timeseries.cali"
TS_SMALL = f"{TS_DIR}/230711-163829_2055495_OV0UMVFsW6yp.cali"
TS = ReadOptions(timeseries=True)


def _raw_by_snapshot(path: Path, metric: str, op=sum) -> tuple[dict, dict]:
    """From caliperreader's records: {(iteration, callpath): op of ``metric``} over the records of
    snapshots inside the loop (iteration = loop.start_iteration + 1), and {callpath: [values]} of
    the records of snapshots outside it."""
    inside, outside = defaultdict(list), defaultdict(list)
    for r in _raw_records(path):
        if metric not in r:
            continue
        p = r.get("path")
        cp = SEP.join([UNANNOTATED] if p is None else ([p] if isinstance(p, str) else p))
        if "loop.start_iteration" in r:
            inside[(int(r["loop.start_iteration"]) + 1, cp)].append(float(r[metric]))
        else:
            outside[cp].append(float(r[metric]))
    return {k: op(v) for k, v in inside.items()}, outside


def _series(exp, metric: str) -> dict:
    d = exp.data[exp.data["metric"] == metric]
    return {(int(r.iteration), str(r.callpath)): r.value for r in d.itertuples()}


@pytest.mark.parametrize("rel, n, step", [(TS_LULESH, 50, 2), (TS_SMALL, 5, 20)])
def test_timeseries_per_snapshot_values_match_raw_records(data_dir, rel, n, step):
    f = data_dir / rel
    exp = load([f], options=TS)
    assert list(exp.parameters) == ["iteration"]
    # LULESH: 50 snapshots of 2 cycles (0, 2, ..., 98); the small run: 5 of 20 (0, 20, ..., 80)
    assert sorted(exp.data["iteration"].unique()) == [1 + step * k for k in range(n)]
    assert set(exp.data["rep"]) == {0}
    for metric in ("sum#time.duration.ns", "count", "max#time.duration.ns", "timeseries.duration"):
        want, _ = _raw_by_snapshot(f, metric, max if metric.startswith("max#") else sum)
        got = _series(exp, metric)
        assert got.keys() == want.keys(), metric
        assert all(got[k] == pytest.approx(v, rel=1e-12) for k, v in want.items()), metric
    # the snapshot's own record (its wall time, timeseries.duration) sits at the loop's callpath
    loops = {cp for (_, cp) in _series(exp, "timeseries.duration")}
    assert len(loops) == 1 and next(iter(loops)).split(SEP)[-1] in ("lulesh.cycle", "mainloop")
    # loop.iterations, on every record of a snapshot, is its width: in meta, not a metric
    assert "loop.iterations" not in exp.metrics
    run = exp.meta["caliper"]["runs"][0]["timeseries"]
    assert (run["snapshots"], run["first_iteration"], run["last_iteration"]) == (n, 1, 1 + step * (n - 1))
    assert run["iterations_per_snapshot"] == [step]
    # snapshot 0 (set-up) and the last one (finalisation) carry no loop.start_iteration
    assert run["left_out"]["snapshots"] == [0, n + 1]


def test_timeseries_small_run_by_hand(data_dir):
    # main/mainloop/foo, sum#time.duration.ns of the snapshots 1..5, read off the file's ctx lines
    exp = load([data_dir / TS_SMALL], options=TS)
    got = _series(exp, "sum#time.duration.ns")
    foo = SEP.join(["main", "mainloop", "foo"])
    assert {it: got[(it, foo)] for it in (1, 21, 41, 61, 81)} == {
        1: 3281358.0, 21: 3364016.0, 41: 3522373.0, 61: 3203448.0, 81: 4120824.0}
    whole = _values(load([data_dir / TS_SMALL]))
    assert whole[(foo, "sum#time.duration.ns")] == 3281358 + 3364016 + 3522373 + 3203448 + 4120824
    # main/mainloop also has a record in the finalisation snapshot 6 (114486 ns), left out here
    loop = SEP.join(["main", "mainloop"])
    assert sum(v for (it, cp), v in got.items() if cp == loop) == 282447 + 357604 + 402162 + 348946 + 407532
    assert whole[(loop, "sum#time.duration.ns")] == 282447 + 357604 + 402162 + 348946 + 407532 + 114486


@pytest.mark.parametrize("rel", [TS_LULESH, TS_SMALL])
def test_timeseries_sum_over_snapshots_is_the_whole_run(data_dir, rel):
    f = data_dir / rel
    whole = _values(load([f]))
    series = load([f], options=TS)
    for metric, combine in (("sum#time.duration.ns", sum), ("count", sum), ("max#time.duration.ns", max),
                            ("min#time.duration.ns", min), ("alloc.region.highwatermark", max)):
        per = _series(series, metric)
        if not per:
            continue
        _, outside = _raw_by_snapshot(f, metric)
        by_cp = defaultdict(list)
        for (_, cp), v in per.items():
            by_cp[cp].append(v)
        for cp in {cp for cp, m in whole if m == metric}:
            vals = by_cp.get(cp, []) + outside.get(cp, [])
            assert combine(vals) == pytest.approx(whole[(cp, metric)], rel=1e-12), (cp, metric)
            if cp not in outside:  # measured inside the loop only: the snapshots alone make the run
                assert combine(by_cp[cp]) == pytest.approx(whole[(cp, metric)], rel=1e-12), (cp, metric)
    # LULESH: every kernel of the time step lies inside the loop
    if rel == TS_LULESH:
        leap = SEP.join(["main", "lulesh.cycle", "LagrangeLeapFrog"])
        assert sum(v for (_, cp), v in _series(series, "sum#time.duration.ns").items() if cp == leap) == \
            pytest.approx(whole[(leap, "sum#time.duration.ns")], rel=1e-12)


def test_timeseries_default_is_the_whole_run(data_dir):
    exp = load([data_dir / TS_SMALL])
    assert list(exp.parameters) == [] and "iteration" not in exp.data.columns
    assert "timeseries" not in exp.meta["caliper"]["runs"][0]


def test_timeseries_model_fits_a_per_iteration_trend(data_dir, tmp_path):
    # a trend over the iterations: foo takes 1000 ns more per snapshot (iteration = 1, 21, ...)
    text = (data_dir / TS_SMALL).read_text()
    for k, old in enumerate(("3281358.000000", "3364016.000000", "3522373.000000", "3203448.000000",
                             "4120824.000000")):
        assert text.count(f"={old}=") == 1
        text = text.replace(f"={old}=", f"={1000000 + 1000 * (1 + 20 * k)}.000000=")
    f = tmp_path / "trend.cali"
    f.write_text(text)
    exp = load([f], options=TS)
    foo = SEP.join(["main", "mainloop", "foo"])
    got = _series(exp, "sum#time.duration.ns")
    assert [got[(it, foo)] for it in (1, 21, 41, 61, 81)] == [1000000 + 1000 * it for it in (1, 21, 41, 61, 81)]
    from perfcast.fit import fit_series

    its = sorted(it for it, cp in got if cp == foo)
    m = fit_series(its, [[got[(it, foo)]] for it in its], ("iteration",))
    assert m.predict({"iteration": 101}) == pytest.approx(1000000 + 1000 * 101, rel=1e-6)


def _ctx_index(lines: list[str], i: int) -> int:
    return sum(1 for ln in lines[: i + 1] if ln.startswith("__rec=ctx"))


def test_timeseries_record_without_snapshot_index(data_dir, tmp_path):
    lines = (data_dir / TS_SMALL).read_text().splitlines(keepends=True)
    # the foo record of snapshot 1: drop its timeseries.snapshot (attribute 33, the last value)
    i = next(k for k, ln in enumerate(lines) if ln.startswith("__rec=ctx,ref=104=93,") and ln.rstrip().endswith("=1"))
    head, data = lines[i].rstrip("\n").split(",data=")
    assert head.endswith("=33")
    lines[i] = head[: -len("=33")] + ",data=" + data[: -len("=1")] + "\n"
    bad = tmp_path / "nosnap.cali"
    bad.write_text("".join(lines))
    with pytest.raises(PerfcastError) as ei:
        load([bad], options=TS)
    e = _err(ei)
    assert e.path == str(bad) and "timeseries.snapshot" in e.message
    assert e.where == f"record {_ctx_index(lines, i)}"
    load([bad])  # the whole-run profile does not need snapshot indices


def test_timeseries_bad_snapshots(data_dir, tmp_path):
    text = (data_dir / TS_SMALL).read_text()
    lines = text.splitlines(keepends=True)
    # snapshot 2's foo record claims to start at iteration 30 while its loop record says 20
    i = next(k for k, ln in enumerate(lines) if ln.startswith("__rec=ctx,ref=104=93,") and ln.rstrip().endswith("=20=20=1689118709.140271=2"))
    lines2 = list(lines)
    lines2[i] = lines[i].replace("=20=20=1689118709.140271=2", "=20=30=1689118709.140271=2")
    bad = tmp_path / "disagree.cali"
    bad.write_text("".join(lines2))
    with pytest.raises(PerfcastError) as ei:
        load([bad], options=TS)
    e = _err(ei)
    assert e.path == str(bad) and "snapshot 2" in e.message and "30" in e.message and "20" in e.message
    assert e.where == f"record {_ctx_index(lines2, i)}"
    # snapshot 3 starting where snapshot 2 started (two monitored loops?) would fold them together
    dup = tmp_path / "dup.cali"
    dup.write_text(text.replace("=20=40=1689118709.143993=3", "=20=20=1689118709.143993=3"))
    with pytest.raises(PerfcastError) as ei:
        load([dup], options=TS)
    e = _err(ei)
    assert e.path == str(dup) and "snapshots 2 and 3" in e.message
    # a snapshot index that is not an integer
    frac = tmp_path / "frac.cali"
    frac.write_text(text.replace("=1689118709.147921=4\n", "=1689118709.147921=4.5\n", 1))
    with pytest.raises(PerfcastError) as ei:
        load([frac], options=TS)
    e = _err(ei)
    assert e.path == str(frac) and "timeseries.snapshot" in e.message and "4.5" in e.message


def test_timeseries_refused_where_there_is_none(data_dir, tmp_path):
    plain = data_dir / LULESH / "27_cores.cali"
    with pytest.raises(PerfcastError) as ei:
        load([plain], options=TS)
    e = _err(ei)
    assert e.path == str(plain) and "timeseries.snapshot" in e.message
    j = data_dir / "formats/caliper/caliper-lulesh-json/lulesh-annotation-profile.json"
    with pytest.raises(PerfcastError) as ei:
        load([j], options=TS)
    e = _err(ei)
    assert e.path == str(j) and ".cali" in e.message


def test_timeseries_cli(data_dir, tmp_path, capsys):
    from perfcast.cli import main

    f = data_dir / TS_SMALL
    assert main(["show", str(f), "--timeseries", "--json"]) == 0, capsys.readouterr().err
    out = cli_items(capsys.readouterr().out)[0]
    assert out["parameters"] == ["iteration"]
    assert [p["iteration"] for p in out["points"]] == [1, 21, 41, 61, 81]
    dest = tmp_path / "ts.perfcast"
    assert main(["import", str(f), "--timeseries", "-o", str(dest), "--json"]) == 0
    assert cli_items(capsys.readouterr().out, "import")[0]["n_points"] == 5
    assert list(store.read(dest).parameters) == ["iteration"]
    assert main(["show", str(data_dir / LULESH / "27_cores.cali"), "--timeseries", "--json"]) == 2
    assert "timeseries.snapshot" in capsys.readouterr().err


def test_loop_iterations_is_not_summed_into_a_metric(data_dir):
    """loop.iterations sits on every record of a time-series snapshot (its width); summed over a
    whole run's records it gave main->lulesh.cycle 200 and CalcTimeConstraintsForElems 1200 for a
    100-cycle run.  It is not a metric; the snapshots' widths are read per snapshot instead."""
    exp = load([data_dir / "formats/caliper/caliper-timeseries-cali/timeseries.cali"])
    assert "loop.iterations" not in exp.metrics

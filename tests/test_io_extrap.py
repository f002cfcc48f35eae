"""Extra-P input readers (text, JSON both layouts, JSON Lines, Talpas) against the real files.

Expectations come from the files themselves: a deliberately simple scan of the raw text (regular
expressions, ``json`` from the standard library), values copied by hand from the files, and the
formulas that generated the synthetic files (given in their comments).
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from perfcast import io, store
from perfcast.errors import PerfcastError
from perfcast.io import extrap

TEXT = [
    "text/one_parameter_1.txt", "text/one_parameter_2.txt", "text/one_parameter_6.txt",
    "text/one_parameter_segmented_1.txt", "text/one_parameter_segmented_5.txt",
    "text/three_parameter_1.txt", "text/three_parameter_3.txt", "text/two_parameter_1.txt",
    "text/two_parameter_3.txt", "text/two_parameter_5.txt", "text/two_parameter_segmented_1.txt",
    "text/strong_scaling/one_parameter_1.txt", "text/strong_scaling/two_parameter_1.txt",
    "text/mpa/2_param_gpr2.txt", "text/mpa/gpr_test_data_1.txt", "text/mpa/relearn_data.txt",
]
JSON = ["json/input_1.JSON", "json/input_9.JSON", "json/input_10.JSON", "json/new/input1.json",
        "json/new/input2.json"]
JSONL = ["jsonlines/input_1.jsonl", "jsonlines/matrix_4p.jsonl", "jsonlines/sparse_matrix_2p.jsonl",
         "jsonlines/test2.jsonl"]
TALPAS = ["talpas/talpas_1.txt", "talpas/talpas_9.txt"]
ALL = [(f, "extrap-text") for f in TEXT] + [(f, "extrap-json") for f in JSON] + \
      [(f, "extrap-jsonl") for f in JSONL] + [(f, "talpas") for f in TALPAS]


@pytest.fixture(scope="module")
def xp(data_dir) -> Path:
    return data_dir / "extrap"


def test_every_extrap_input_file_is_covered(xp):
    """The lists above hold every text/JSON/JSONL/Talpas file of the data set (CUBE sets,
    binary experiments and the CSV are other readers' business)."""
    found = {str(p.relative_to(xp)) for p in xp.rglob("*")
             if p.is_file() and p.suffix.lower() in (".txt", ".json", ".jsonl") and "cubeset" not in p.parts}
    assert found == {f for f, _ in ALL}


# ------------------------------------------------------------------------------------------
# independent scanners of the raw files


def scan_text(path: Path) -> dict:
    params, points, regions, metrics, nvalues = [], [], [], [], 0
    for line in path.read_text().splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "PARAMETER":
            params += words[1:]
        elif words[0] == "POINTS":
            body = line.split("POINTS", 1)[1]
            groups = re.findall(r"\(([^()]*)\)", body)
            if groups:
                points += [tuple(float(x) for x in g.split()) for g in groups]
            else:
                points += [(float(x),) for x in body.split()]
        elif words[0] == "REGION":
            regions.append(" ".join(words[1:]))
        elif words[0] == "METRIC":
            metrics.append(" ".join(words[1:]))
        elif words[0] == "DATA":
            nvalues += len(words) - 1
    return {"params": params, "points": points, "regions": regions, "metrics": metrics, "nvalues": nvalues}


def exp_points(exp) -> set:
    return {tuple(r) for r in exp.points().itertuples(index=False)}


def values_at(exp, callpath, metric, **coords) -> list:
    d = exp.select(callpath=callpath, metric=metric, **coords).data.sort_values("rep")
    assert d["rep"].tolist() == list(range(len(d)))
    return d["value"].tolist()


# ------------------------------------------------------------------------------------------
# every real file


@pytest.mark.parametrize("name", TEXT)
def test_text_files_match_their_declarations(xp, name):
    path = xp / name
    exp = io.read_one(path, "extrap-text")
    s = scan_text(path)
    assert list(exp.parameters) == s["params"]
    assert exp_points(exp) == set(s["points"])
    assert len(exp.points()) == len(set(s["points"]))
    assert set(exp.callpaths) == set(s["regions"])
    assert set(exp.metrics) == (set(s["metrics"]) or {extrap.DEFAULT_METRIC})
    assert len(exp.data) == s["nvalues"]  # every value kept: repetitions are never collapsed
    for m in exp.metrics.values():
        assert m.scope == "unknown" and m.unit == ""


@pytest.mark.parametrize("name", JSON)
def test_json_files_match_their_declarations(xp, name):
    path = xp / name
    exp = io.read_one(path, "extrap-json")
    raw = json.loads(path.read_text())
    if "callpaths" in raw:  # id-based layout
        params = [p["name"] for p in sorted(raw["parameters"], key=lambda p: p["id"])]
        pid = {p["id"]: p["name"] for p in raw["parameters"]}
        pts = {tuple(float({pid[pv["parameter_id"]]: pv["parameter_value"] for pv in c["parameter_value_pairs"]}[p])
                     for p in params) for c in raw["coordinates"]}
        callpaths = {c["name"] for c in raw["callpaths"]}
        metrics = {m["name"] for m in raw["metrics"]}
        nvalues = len(raw["measurements"])
    else:
        params = raw["parameters"]
        entries = [e for by_m in raw["measurements"].values() for es in by_m.values() for e in es]
        pts = {tuple(float(c) for c in e["point"]) for e in entries}
        callpaths = set(raw["measurements"])
        metrics = {m for by_m in raw["measurements"].values() for m in by_m}
        nvalues = sum(len(e["values"]) for e in entries)
    assert list(exp.parameters) == params
    assert exp_points(exp) == pts
    assert set(exp.callpaths) == callpaths
    assert set(exp.metrics) == metrics
    assert len(exp.data) == nvalues


@pytest.mark.parametrize("name", JSONL + TALPAS)
def test_line_files_match_their_records(xp, name):
    path = xp / name
    fmt = "talpas" if name.startswith("talpas") else "extrap-jsonl"
    pkey = "parameters" if fmt == "talpas" else "params"
    recs = []
    for line in path.read_text().splitlines():
        if line.strip():
            # Talpas separates the fields with ';' (no string in these files holds one)
            recs.append(json.loads(line.replace(";", ",")))
    params = list(recs[0][pkey])
    exp = io.read_one(path, fmt)
    assert list(exp.parameters) == params
    assert exp_points(exp) == {tuple(float(r[pkey][p]) for p in params) for r in recs}
    assert set(exp.callpaths) == {r.get("callpath", extrap.DEFAULT_CALLPATH) for r in recs}
    assert set(exp.metrics) == {r.get("metric", extrap.DEFAULT_METRIC) for r in recs}
    assert len(exp.data) == len(recs)
    # each record's value, in file order, is the next repetition of its point
    first = recs[0]
    coords = {p: first[pkey][p] for p in params}
    same = [r["value"] for r in recs if r[pkey] == first[pkey] and r.get("callpath") == first.get("callpath")
            and r.get("metric") == first.get("metric")]
    cp = first.get("callpath", extrap.DEFAULT_CALLPATH)
    assert values_at(exp, cp, first.get("metric", extrap.DEFAULT_METRIC), **coords) == same


@pytest.mark.parametrize("name,fmt", ALL)
def test_autodetection_picks_the_right_reader(xp, name, fmt):
    assert io.detect(xp / name).name == fmt


@pytest.mark.parametrize("name,fmt", [ALL[0], ALL[15], ALL[17], ALL[19], ALL[21], ALL[25]])
def test_store_round_trip(xp, tmp_path, name, fmt):
    exp = io.read_one(xp / name)
    back = store.read(store.write(exp, tmp_path / "x.perfcast"))
    assert back.equals(exp)
    assert back.meta["format"] == fmt


# ------------------------------------------------------------------------------------------
# values checked by hand or against the generating formula


def test_relearn_two_parameters_25_points_two_repetitions(xp):
    exp = io.read_one(xp / "text/mpa/relearn_data.txt")
    assert exp.parameters == ("p", "n")
    pts = exp.points()
    assert len(pts) == 25
    assert sorted(pts["p"].unique()) == [32, 64, 128, 256, 512]
    assert sorted(pts["n"].unique()) == [5000, 6000, 7000, 8000, 9000]
    assert (exp.repetitions()["repetitions"] == 2).all()
    assert len(exp.callpaths) == 14 and list(exp.metrics) == ["time"]
    # lines 33, 114 and 409 of the file
    assert values_at(exp, "main()", "time", p=32, n=5000) == [406.498, 405.58]
    assert values_at(exp, "Update electrical activity", "time", p=32, n=5000) == [4e-08, 4.4e-08]
    assert values_at(exp, "Create synapses (w/ Alltoall)", "time", p=512, n=9000) == [2342.5, 2342.5]
    assert exp.metrics["time"].kind == "time"


def test_text_repetitions_are_never_collapsed(xp):
    exp = io.read_one(xp / "text/one_parameter_1.txt")
    # line 11: six values, the last two equal
    assert values_at(exp, "compute", "time", x=20) == [
        82.00848518948744, 81.42023198759563, 81.98984501217201, 80.76019835580321,
        82.54252892405795, 82.54252892405795]
    strong = io.read_one(xp / "text/strong_scaling/one_parameter_1.txt")
    assert values_at(strong, "compute", "time", x=20)[0] == 725.3886983183301  # listed in reverse


def test_text_uneven_repetitions_and_unnamed_metric(xp):
    exp = io.read_one(xp / "text/one_parameter_6.txt")
    assert list(exp.metrics) == [extrap.DEFAULT_METRIC]
    m = extrap.DEFAULT_METRIC
    assert values_at(exp, "met2", m, p=16000) == [256.01, 255.99, 256, 256]
    assert values_at(exp, "met4", m, p=1000) == [1000000, 1000001, 1000002]
    assert values_at(exp, "met1", m, p=4000) == [4.1, 3.9, 4.3, 4.0, 4.1]


def test_text_formula_two_parameter_5(xp):
    """Comment of the file: 2 + 0.884 * s * log(p), log base 2."""
    exp = io.read_one(xp / "text/two_parameter_5.txt")
    assert exp.parameters == ("p", "s")
    d = exp.data
    assert len(d) == 25 and (d["rep"] == 0).all()
    s, p = d["s"].to_numpy(float), d["p"].to_numpy(float)  # the coordinates as float64
    np.testing.assert_allclose(d["value"], 2 + 0.884 * s * np.log2(p), rtol=1e-12)
    assert exp.meta["comments"] == ["formula: 2 + 0.884 * s * log(p)"]


def test_text_formula_two_parameter_segmented(xp):
    """Comment of the file: =IF(x<55;x^2*0.4*y;1400+x*10*y) -- the first repetition is exact."""
    exp = io.read_one(xp / "text/two_parameter_segmented_1.txt")
    d = exp.data[exp.data["rep"] == 0]
    assert len(d) == 60
    x, y = d["x"].to_numpy(), d["y"].to_numpy()
    np.testing.assert_allclose(d["value"], np.where(x < 55, x**2 * 0.4 * y, 1400 + x * 10 * y), rtol=1e-12)
    assert (exp.repetitions()["repetitions"] == 5).all()


def test_text_segmented_one_parameter(xp):
    exp = io.read_one(xp / "text/one_parameter_segmented_1.txt")
    d = exp.data
    p = d["p"].to_numpy()
    np.testing.assert_array_equal(d["value"], np.where(p <= 6, p**2, 30 + p))
    assert list(exp.metrics) == ["runtime"]


def test_text_nested_regions_build_the_tree(xp):
    exp = io.read_one(xp / "text/one_parameter_2.txt")
    tree = exp.tree
    assert tree.parent("main->merge") == "main"
    assert tree.parent("main->merge->comp1") == "main->merge"
    assert tree.roots() == ["main", "side"]  # the file's top-level regions
    assert tree.children("side->test2") == ["side->test2->func1"]
    for path in tree:
        assert tree.depth(path) == path.count("->")


def test_text_same_region_with_two_metrics(xp):
    exp = io.read_one(xp / "text/mpa/gpr_test_data_1.txt")
    assert set(exp.metrics) == {"time", "maxtime"}
    assert values_at(exp, "scatter", "time", x=30) == [40, 44, 47, 41, 38]
    assert values_at(exp, "scatter", "maxtime", x=50) == [160, 165, 167, 155, 170]
    assert len(values_at(exp, "compute", "time", x=40)) == 6


def test_json_old_layout_values(xp):
    exp = io.read_one(xp / "json/input_9.JSON")
    assert exp.parameters == ("x", "y", "z")
    # last coordinate (id 125): x=64, y=50, z=10; measurement 625 holds 6148.5
    assert values_at(exp, "sweep", "time", x=64, y=50, z=10)[-1] == 6148.5
    assert exp.meta["extrap_json_layout"] == "ids"
    assert (exp.repetitions()["repetitions"] == 5).all()


def test_json_new_layout_values(xp):
    exp = io.read_one(xp / "json/new/input2.json")
    assert exp.meta["extrap_json_layout"] == "points"
    assert values_at(exp, "sweep", "visits", x=4, y=10) == [5]
    assert values_at(exp, "sweep2", "time", x=64, y=50) == [33.5] * 5
    assert exp.metrics["visits"].kind == "count" and exp.metrics["time"].kind == "time"


def test_jsonl_coordinate_repeated_on_separate_lines(xp):
    exp = io.read_one(xp / "jsonlines/matrix_4p.jsonl")
    # (1,1,1,1) is on lines 1, 7, 13 and 19
    assert values_at(exp, extrap.DEFAULT_CALLPATH, "metr", a=1, b=1, c=1, d=1) == [1.0] * 4
    assert len(exp.points()) == 17


def test_talpas_values(xp):
    exp = io.read_one(xp / "talpas/talpas_9.txt")
    assert set(exp.callpaths) == {"compute", "sort"} and set(exp.metrics) == {"time", "flops"}
    assert values_at(exp, "compute", "time", x=20, y=1)[:2] == [1.007912824061828, 1.0003031166379763]
    assert values_at(exp, "sort", "flops", x=60, y=5)[-2:] == [1646.4234125252788, 1641.8554614544396]


# ------------------------------------------------------------------------------------------
# synthetic variants: duplicates become repetitions; the format's options


def write(tmp_path, name, text) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_text_duplicate_points_and_blocks_become_repetitions(tmp_path):
    p = write(tmp_path, "dup.txt", "PARAMETER x\nPOINTS (1) (1) (2)\nMETRIC time\nREGION a\n"
              "DATA 1 2\nDATA 3\nDATA 4\nREGION a\nDATA 5\nDATA 6\nDATA 7\n")
    exp = io.read_one(p)
    assert values_at(exp, "a", "time", x=1) == [1, 2, 3, 5, 6]
    assert values_at(exp, "a", "time", x=2) == [4, 7]
    # a point listed twice is said (Extra-P refuses the file; a copy-paste slip must not pass
    # silently), by the streaming reader and by the line-by-line one (a non-ASCII name takes it)
    for name, region in (("dup.txt", "a"), ("dup-utf8.txt", "a\u00e9")):
        q = write(tmp_path, name, f"PARAMETER x y\nPOINTS (1 2) (4 2) (1 2) (8 2) (4 2)\nREGION {region}\n"
                  + "DATA 1\n" * 5)
        warned = io.read_one(q).meta["warnings"]
        assert len(warned) == 1 and warned[0].startswith(f"{name}: POINTS lists (1 2) 2 times, (4 2) 2 times:")
    # a (REGION, METRIC) block met again is said too, by both readers (Extra-P refuses it; rising
    # 1..3 and 10..30 under one name would be modelled as one noisy series), and nothing else is
    for name, region in (("blocks.txt", "a"), ("blocks-utf8.txt", "a\u00e9")):
        q = write(tmp_path, name, f"PARAMETER x\nPOINTS (1) (2) (3)\nMETRIC t\nREGION {region}\nDATA 1\nDATA 2\n"
                  f"DATA 3\nREGION b\nDATA 1\nDATA 2\nDATA 3\nREGION {region}\nDATA 10\nDATA 20\nDATA 30\n")
        exp = io.read_one(q)
        assert values_at(exp, region, "t", x=1) == [1, 10]
        assert exp.meta["warnings"] == [f"{name}: DATA blocks of REGION {region!r} METRIC 't' 2 times: their values "
                                        "are merged as repetitions at each point (Extra-P refuses such a file); "
                                        "rename the blocks unless they are meant as repetitions (runs appended "
                                        "to one file)"]
    once = write(tmp_path, "once.txt", "PARAMETER x\nPOINTS (1) (2) (3)\nREGION a\nDATA 1\nDATA 2\nDATA 3\n")
    assert "warnings" not in io.read_one(once).meta


def test_text_format_options(tmp_path):
    # comments, several names on one PARAMETER line, bare numbers are not allowed with 2 parameters
    # but coordinates may be parenthesised, tabs, CRLF, region nesting with spaces around '->'
    p = write(tmp_path, "opt.txt", "# header\r\nPARAMETER p n\r\nPOINTS ((2) (10))\t( 4 20 )\r\n\r\n"
              "REGION main -> solve\r\nMETRIC  bytes sent\r\nDATA\t1e3 +2.5E3\r\nDATA .5 -0\r\n")
    exp = io.read_one(p, "extrap-text")
    assert exp.parameters == ("p", "n")
    assert exp.callpaths == ["main->solve"] and exp.tree.parent("main->solve") == "main"
    assert values_at(exp, "main->solve", "bytes sent", p=2, n=10) == [1000.0, 2500.0]
    assert values_at(exp, "main->solve", "bytes sent", p=4, n=20) == [0.5, 0.0]
    assert exp.metrics["bytes sent"].kind == "bytes"
    one = write(tmp_path, "bare.txt", "PARAMETER x\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2\n")
    assert exp_points(io.read_one(one)) == {(1.0,), (2.0,)}


def test_json_duplicates_become_repetitions(tmp_path):
    new = write(tmp_path, "n.json", '{"parameters": ["x"], "measurements": {"a": {"t": ['
                '{"point": [1], "values": [1, 2]}, {"point": [1], "values": [3]}]}, '
                '"a": {"t": [{"point": [1], "values": [4]}]}}}')
    exp = io.read_one(new)
    assert values_at(exp, "a", "t", x=1) == [1, 2, 3, 4]
    # a point listed twice in one list is said, as the text reader says it of POINTS
    assert exp.meta["warnings"] == [
        "n.json: measurements.a.t lists (1) 2 times: the values of those entries are merged as repetitions of "
        "one point; list every point once unless they are meant as repetitions"]
    old = write(tmp_path, "o.json", json.dumps({
        "parameters": [{"id": 2, "name": "y"}, {"id": 1, "name": "x"}],
        "callpaths": [{"id": 7, "name": "a->b"}],
        "metrics": [{"id": 3, "name": "time", "unit": "s"}],
        "coordinates": [{"id": 1, "parameter_value_pairs": [{"parameter_id": 2, "parameter_value": 5},
                                                            {"parameter_id": 1, "parameter_value": 1}]},
                        {"id": 2, "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 1},
                                                            {"parameter_id": 2, "parameter_value": 5}]}],
        "measurements": [{"callpath_id": 7, "coordinate_id": 1, "metric_id": 3, "value": 1.5},
                         {"callpath_id": 7, "coordinate_id": 2, "metric_id": 3, "value": 2.5}]}))
    exp = io.read_one(old)
    assert exp.parameters == ("x", "y")  # ordered by id
    assert values_at(exp, "a->b", "time", x=1, y=5) == [1.5, 2.5]
    assert exp.meta["warnings"] == [
        "o.json: coordinates lists (1 5) 2 times: the measurements at those coordinates are merged as repetitions "
        "of one point; list every point once unless they are meant as repetitions"]
    assert exp.metrics["time"].unit == "s" and exp.tree.parent("a->b") == "a"


def test_jsonl_value_lists_and_defaults(tmp_path):
    p = write(tmp_path, "v.jsonl", '{"params": {"x": 1}, "value": [1, 2]}\n\n'
              '{"params": {"x": 1}, "value": 3, "callpath": "c", "metric": "m"}\n'
              '{"value": 4, "params": {"x": 1}}\n')
    exp = io.read_one(p)
    assert values_at(exp, extrap.DEFAULT_CALLPATH, extrap.DEFAULT_METRIC, x=1) == [1, 2, 4]
    assert values_at(exp, "c", "m", x=1) == [3]


def test_talpas_semicolon_inside_string_is_kept(tmp_path):
    p = write(tmp_path, "t.txt", '{"parameters":{"x":1;"y":2};"metric":"a;b";"callpath":"f(x;y)";"value":3}\n')
    exp = io.read_one(p)
    assert io.detect(p).name == "talpas"
    assert values_at(exp, "f(x;y)", "a;b", x=1, y=2) == [3]


def test_jsonl_content_in_json_file(tmp_path):
    p = write(tmp_path, "lines.json", '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}, "value": 2}\n')
    assert io.detect(p).name == "extrap-jsonl"
    assert len(io.read_one(p, "extrap-json").data) == 2  # Extra-P accepts JSON Lines in .json too


# ------------------------------------------------------------------------------------------
# sniffers claim only their own format


def test_sniffers_reject_other_formats(xp, data_dir, tmp_path):
    r = io.readers()
    mine = ["extrap-text", "extrap-json", "extrap-jsonl", "talpas"]
    others = [p for p in (data_dir / "formats").rglob("*") if p.is_file() and p.stat().st_size < 2_000_000]
    others += [data_dir / "thicket/lulesh_user_ensemble.json", xp / "mpi_data.csv",
               xp / "experiments/two_parameter3.txt.extra-p", xp / "input/experiment_3_mp"]
    others += [write(tmp_path, "notes.txt", "PARAMETERS of the run\nx = 4\n"),
               write(tmp_path, "empty.txt", ""),
               write(tmp_path, "other.json", '{"parameters": {"a": 1}, "data": []}'),
               write(tmp_path, "records.jsonl", '{"name": "a", "value": 1}\n')]
    for p in others:
        for name in mine:
            assert not r[name].sniff(p), (name, p)
    for f, fmt in ALL:  # and not each other's files
        for name in mine:
            assert r[name].sniff(xp / f) == (name == fmt), (name, f)


def test_non_extrap_txt_is_not_claimed(tmp_path):
    p = write(tmp_path, "readme.txt", "This is a note.\nPOINTS are made here.\n")
    try:
        reader = io.detect(p)
    except PerfcastError:
        return
    assert reader.name not in ("extrap-text", "talpas")


# ------------------------------------------------------------------------------------------
# bad input: one line naming the file and the place


def bad(path: Path, fmt: str | None = None) -> str:
    with pytest.raises(PerfcastError) as info:
        io.read_one(path, fmt)
    msg = str(info.value)
    assert msg.startswith(str(path)), msg
    return msg


TEXT_CASES = {
    "data_before_metric": ("PARAMETER x\nPOINTS (1)\nREGION r\nDATA 1\nMETRIC t\nDATA 2\n", 4, "before the first METRIC"),
    "coordinates": ("PARAMETER x y\nPOINTS ( 1 2 ) ( 3 )\nREGION r\nDATA 1\n", 2, "1 coordinate(s) but 2"),
    "non_numeric": ("PARAMETER x\nPOINTS (1) (2)\nREGION r\nDATA 1\nDATA 2 abc\n", 5, "'abc' is not a number"),
    "nan": ("PARAMETER x\nPOINTS (1)\nREGION r\nDATA NaN\n", 4, "not finite"),
    "inf": ("PARAMETER x\nPOINTS (1)\nREGION r\nDATA 1 -inf\n", 4, "not finite"),
    "overflow": ("PARAMETER x\nPOINTS (1)\nREGION r\nDATA 1e999\n", 4, "infinity"),
    "nan_point": ("PARAMETER x\nPOINTS (1) (nan)\nREGION r\nDATA 1\n", 2, "not finite"),
    "too_many_data": ("PARAMETER x\nPOINTS (1) (2)\nREGION r\nDATA 1\nDATA 2\nDATA 3\n", 6, "more DATA lines"),
    "too_few_data": ("PARAMETER x\nPOINTS (1) (2) (3)\nREGION r\nDATA 1\nDATA 2\nREGION s\nDATA 1\nDATA 1\n"
                     "DATA 1\n", 5, "2 DATA line(s)"),
    "unclosed": ("PARAMETER x y\nPOINTS ( 1 2 ) ( 3\n", 2, "not closed"),
    "keyword": ("PARAMETER x\nPOINTS (1)\nREGION r\nDAT 1\n", 4, "unknown keyword 'DAT'"),
    "data_before_points": ("PARAMETER x\nREGION r\nDATA 1\n", 3, "before any POINTS"),
    "data_before_region": ("PARAMETER x\nPOINTS (1)\nMETRIC m\nDATA 1\n", 4, "before any REGION"),
    "points_after_data": ("PARAMETER x\nPOINTS (1)\nREGION r\nDATA 1\nPOINTS (2)\n", 5, "POINTS after DATA"),
    "parameter_late": ("PARAMETER x\nREGION r\nPARAMETER y\nPOINTS ( 1 2 )\nDATA 1\n", 3, "declare all parameters"),
    "reserved": ("PARAMETER x rep\nPOINTS ( 1 2 )\n", 1, "reserved"),
    "empty_frame": ("PARAMETER x\nPOINTS (1)\nREGION a->\nDATA 1\n", 3, "empty frame"),
    "no_data": ("PARAMETER x\nPOINTS (1)\n", 2, "no DATA"),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_text_bad_input(tmp_path, case):
    text, line, words = TEXT_CASES[case]
    p = write(tmp_path, f"{case}.txt", text)
    msg = bad(p, "extrap-text")
    assert msg.startswith(f"{p}:{line}: "), msg
    assert words in msg
    if case not in ("no_data",):  # detection still picks the reader, so auto-detection gives the same error
        assert bad(p) == msg


def test_text_truncated_real_file(xp, tmp_path):
    lines = (xp / "text/mpa/relearn_data.txt").read_text().splitlines()
    p = write(tmp_path, "cut.txt", "\n".join(lines[:40]) + "\n")  # main() block stops after 8 of 25 DATA lines
    msg = bad(p)
    assert msg.startswith(f"{p}:40: ") and "8 DATA line(s)" in msg and "25 POINTS" in msg
    p2 = write(tmp_path, "cut2.txt", "\n".join(lines[:20]) + "\nPOINTS ( 512 ")
    assert bad(p2).startswith(f"{p2}:21: ")


def test_text_not_utf8(tmp_path):
    p = tmp_path / "bin.txt"
    p.write_bytes(b"PARAMETER x\nPOINTS (1)\nREGION \xff\xfe\nDATA 1\n")
    assert bad(p, "extrap-text").startswith(f"{p}:3: ")


def test_json_bad_input(xp, tmp_path):
    # truncated real file: invalid JSON with line and column
    cut = write(tmp_path, "cut.json", (xp / "json/input_1.JSON").read_text()[:2000])
    msg = bad(cut, "extrap-json")
    assert re.match(rf"{re.escape(str(cut))}:\d+: invalid JSON at column \d+", msg), msg
    assert bad(cut) == msg  # auto-detection still recognises the layout
    lines = (xp / "json/input_1.JSON").read_text()[:2000].count("\n") + 1
    assert msg.startswith(f"{cut}:{lines}: ")

    def case(obj, field, words):
        p = write(tmp_path, "c.json", obj if isinstance(obj, str) else json.dumps(obj))
        msg = bad(p, "extrap-json")
        assert msg.startswith(f"{p} ({field}): "), msg
        assert words in msg, msg

    new = {"parameters": ["x"], "measurements": {"a b": {"t": [{"point": [1], "values": [1, "2"]}]}}}
    case(new, 'measurements["a b"].t[0].values[1]', "not a number")
    new["measurements"]["a b"]["t"][0] = {"point": [1, 2], "values": [1]}
    case(new, 'measurements["a b"].t[0].point', "2 coordinate(s) but 1")
    case('{"parameters": ["x"], "measurements": {"a": {"t": [{"point": [1], "values": [NaN]}]}}}',
         "measurements.a.t[0].values[0]", "not finite")
    case('{"parameters": ["x"], "measurements": {"a": {"t": [{"point": [1], "values": []}]}}}',
         "measurements.a.t[0].values", "empty")
    old = json.loads((xp / "json/input_1.JSON").read_text())
    old["measurements"][3]["coordinate_id"] = 99
    case(old, "measurements[3].coordinate_id", "no coordinate with id 99")
    old = json.loads((xp / "json/input_1.JSON").read_text())
    old["measurements"][7]["value"] = None
    case(old, "measurements[7].value", "not a number")
    old = json.loads((xp / "json/input_1.JSON").read_text())
    del old["coordinates"][2]["parameter_value_pairs"][0]
    case(old, "coordinates[2].parameter_value_pairs", "no value for parameter(s) x")
    old = json.loads((xp / "json/input_1.JSON").read_text())
    del old["metrics"]
    case(old, "top level", "missing field 'metrics'")


def test_jsonl_and_talpas_bad_input(xp, tmp_path):
    good = (xp / "jsonlines/input_1.jsonl").read_text().splitlines()
    cut = write(tmp_path, "cut.jsonl", "\n".join(good[:10]) + "\n" + good[10][:30])
    msg = bad(cut)
    assert msg.startswith(f"{cut}:11: invalid JSON at column"), msg
    cases = [
        ('{"params": {"x": 1}, "value": 1}\n{"params": {"x": 1}, "value": NaN}\n', 2, "not finite"),
        ('{"params": {"x": 1}, "value": 1}\n{"params": {"x": 1}, "value": "1.5"}\n', 2, "not a number"),
        ('{"params": {"x": 1}, "value": 1}\n{"params": {"y": 1}, "value": 1}\n', 2, "differ from those of line 1"),
        ('{"params": {"x": 1}, "value": 1}\n{"params": {"x": 1}}\n', 2, "missing field 'value'"),
        ('{"params": {"x": true}, "value": 1}\n', 1, "not a number"),
        ('{"params": {"x": 1, "x": 2}, "value": 1}\n', 1, "appears twice"),
        ('[1, 2]\n{"params": {"x": 1}, "value": 1}\n', 1, "expected a JSON object"),
    ]
    for text, line, words in cases:
        p = write(tmp_path, "c.jsonl", text)
        msg = bad(p, "extrap-jsonl")
        assert msg.startswith(f"{p}:{line}: ") and words in msg, msg
    tal = (xp / "talpas/talpas_1.txt").read_text().splitlines()
    cut = write(tmp_path, "cut_talpas.txt", "\n".join(tal[:7]) + "\n" + tal[7][:-10])
    msg = bad(cut)
    assert msg.startswith(f"{cut}:8: invalid JSON"), msg
    p = write(tmp_path, "t.txt", '{"parameters":{"x":1};"metric":"m";"value":1}\n')
    msg = bad(p, "talpas")
    assert msg.startswith(f"{p}:1: ") and "callpath" in msg
    p = write(tmp_path, "t2.txt", tal[0] + "\n" + tal[1].replace("81.42023198759563", "Infinity") + "\n")
    msg = bad(p)
    assert msg.startswith(f"{p}:2: ") and "not finite" in msg


def test_counts_must_not_be_negative(tmp_path):
    p = write(tmp_path, "neg.txt", "PARAMETER x\nPOINTS (1)\nMETRIC visits\nREGION r\nDATA -3\n")
    msg = bad(p)
    assert msg.startswith(f"{p}:5: ") and "negative" in msg
    p = write(tmp_path, "neg.jsonl", '{"params": {"x": 1}, "metric": "bytes", "value": [1, -2]}\n')
    assert bad(p).startswith(f"{p}:1: ")

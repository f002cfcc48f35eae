"""Saved Extra-P experiments (.extra-p) against the text file they were made from.

The shared archive experiments/two_parameter3.txt.extra-p was saved from text/two_parameter_3.txt
without repetition values (``"values": null``): only Extra-P's per-point statistics.  The
expectations are computed here from the raw text (a regular-expression scan, numpy), not by
perfcast.  Archives that keep their repetitions are built here byte by byte in Extra-P's layout
(values/<chunk>.indx + values/<chunk>.vals holding .npy arrays).
"""

import io as _io
import json
import re
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from perfcast import io
from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.io.extrap import read_archive


@pytest.fixture(scope="module")
def archive(data_dir) -> Path:
    return data_dir / "extrap" / "experiments" / "two_parameter3.txt.extra-p"


@pytest.fixture(scope="module")
def text(data_dir) -> Path:
    return data_dir / "extrap" / "text" / "two_parameter_3.txt"


def scan(path: Path) -> dict:
    """{(x, y, region, metric): [values...]} from an Extra-P text file."""
    points, out, region, metric, k = [], {}, None, None, 0
    for line in path.read_text().splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "POINTS":
            points += [tuple(float(v) for v in g.split()) for g in re.findall(r"\(([^()]*)\)", line)]
        elif w[0] in ("REGION", "METRIC"):
            region, k = (w[1], 0) if w[0] == "REGION" else (region, 0)
            metric = w[1] if w[0] == "METRIC" else metric
        elif w[0] == "DATA":
            out[(*points[k], region, metric)] = [float(v) for v in w[1:]]
            k += 1
    return out


def by_key(exp) -> dict:
    d = exp.data.sort_values("rep")
    out = {}
    for r in d.itertuples(index=False):
        out.setdefault((r.x, r.y, r.callpath, r.metric), []).append(r.value)
    return out


def test_detected_and_shaped(archive, text):
    assert io.detect(archive).name == "extrap-experiment"
    exp = io.read_one(archive)
    ref = io.read_one(text)
    assert list(exp.parameters) == ["x", "y"] == list(ref.parameters)
    assert exp.tree.paths == ref.tree.paths == ["merge", "sort"]
    assert list(exp.metrics) == ["time", "flops"] and exp.metrics == ref.metrics
    assert len(exp.points()) == 25 and set(exp.data["rep"]) == {0}
    assert exp.meta["extrap_version"] == "4.2.0-beta.1"
    assert any("without its repetitions" in w for w in exp.meta["warnings"])


def test_values_are_the_text_means(archive, text):
    """Saved without repetitions: one value per point, the mean (the measure of the archive's model)."""
    want = scan(text)
    got = by_key(io.read_one(archive))
    assert set(got) == set(want) and len(got) == 100
    for k, vals in want.items():
        assert len(got[k]) == 1
        assert got[k][0] == pytest.approx(np.mean(vals), rel=1e-13, abs=0), k


def test_statistics_kept(archive, text):
    want = scan(text)
    s = io.read_one(archive).meta["summary"]
    assert s["statistic"] == "mean"
    assert s["columns"] == ["x", "y", "callpath", "metric", "repetitions", "mean", "median", "minimum",
                            "maximum", "std"]
    assert len(s["rows"]) == 100
    for row in s["rows"]:
        d = dict(zip(s["columns"], row))
        vals = np.array(want[(d["x"], d["y"], d["callpath"], d["metric"])])
        assert d["repetitions"] == len(vals) == 5
        assert d["median"] == np.median(vals) and d["minimum"] == vals.min() and d["maximum"] == vals.max()
        assert d["std"] == pytest.approx(vals.std(ddof=0), rel=1e-12)


def test_median_on_request(archive, text):
    want = scan(text)
    got = by_key(read_archive(archive, statistic="median"))
    assert {k: v[0] for k, v in got.items()} == {k: float(np.median(v)) for k, v in want.items()}


# ------------------------------------------------------------------------------------------
# archives written here in Extra-P's layout


def build(path: Path, measurements: dict, parameters=("x", "y"), arrays=(), extra: dict | None = None,
          members: dict | None = None) -> Path:
    """Write a .extra-p zip: experiment.json and, when ``arrays`` is given, values/0.indx/.vals."""
    doc = {"Extra-P": "4.2.5", "parameters": list(parameters), "measurements": measurements, **(extra or {})}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if arrays:
            vals = _io.BytesIO()
            vals.write(b"Extra-P VALUES\0\0")
            offsets = []
            for a in arrays:
                offsets.append(vals.tell())
                np.lib.format.write_array(vals, np.asarray(a))
            zf.writestr("values/0.vals", vals.getvalue())
            zf.writestr("values/0.indx", b"Extra-P INDEX\0\0\0" + struct.pack("<Q", len(offsets))
                        + b"".join(struct.pack("<Q", o) for o in offsets))
        for name, data in (members or {}).items():
            zf.writestr(name, data)
        zf.writestr("experiment.json", json.dumps(doc))
    return path


def stats(vals) -> dict:
    v = np.asarray(vals, dtype=float)
    return {"median": float(np.median(v)), "mean": float(v.mean()), "minimum": float(v.min()),
            "maximum": float(v.max()), "std": float(v.std()), "repetitions": len(v)}


def test_archive_with_repetitions_equals_the_text_file(tmp_path, text):
    want = scan(text)
    meas, arrays = {}, []
    for (x, y, region, metric), vals in want.items():
        meas.setdefault(region, {}).setdefault(metric, []).append(
            {"coordinate": [x, y], **stats(vals), "values": [0, len(arrays)]})
        arrays.append(vals)
    p = build(tmp_path / "kept.extra-p", meas, arrays=arrays)
    exp, ref = io.read_one(p), io.read_one(text)
    assert by_key(exp) == want  # every repetition, in order
    cols = ["x", "y", "callpath", "metric", "rep"]
    a = exp.data.sort_values(cols).reset_index(drop=True)
    b = ref.data.sort_values(cols).reset_index(drop=True)
    assert a[cols].astype(str).equals(b[cols].astype(str)) and (a["value"] == b["value"]).all()
    assert exp.metrics == ref.metrics and exp.tree.paths == ref.tree.paths
    assert "warnings" not in exp.meta and "summary" not in exp.meta


def test_statistic_follows_the_saved_modeler(tmp_path):
    meas = {"main->solve": {"time\x03{\"gpu\": \"no\"}": [
        {"coordinate": [c], **stats([c, 2 * c, 6 * c]), "values": None} for c in (1.0, 2.0, 4.0)]}}
    model = {"modelers": [{"name": "m", "modeler": {"use_median": True, "use_measure": "MEDIAN"}, "models": {}}]}
    exp = io.read_one(build(tmp_path / "med.extra-p", meas, ("p",), extra=model))
    assert exp.meta["summary"]["statistic"] == "median"
    assert sorted(exp.data["value"]) == [2.0, 4.0, 8.0]
    assert exp.tree.paths == ["main", "main->solve"] and list(exp.metrics) == ["time"]


# ------------------------------------------------------------------------------------------
# bad input


def one(c=1.0, **kw):
    return {"coordinate": [c], **stats([c, c]), "values": None, **kw}


@pytest.mark.parametrize("meas,params,where,needle", [
    ({"f": {"time": [one(mean="fast")]}}, ("p",), "measurements.f.time[0].mean", "is not a number"),
    ({"f": {"time": [one(coordinate=[1, 2])]}}, ("p",), "measurements.f.time[0].coordinate", "2 value(s)"),
    ({"f": {"time": [one(std=-1.0)]}}, ("p",), "measurements.f.time[0].std", "cannot be negative"),
    ({"f": {"time": [one(repetitions=0)]}}, ("p",), "measurements.f.time[0].repetitions", "positive"),
    ({"f": {"time": [one(), one()]}}, ("p",), "measurements.f.time[1].coordinate", "repeated"),
    ({"f": {"time": [one(values=[0, 0])]}}, ("p",), None, "values/0.indx"),
    ({"f": {"time": [one(mean=None)]}}, ("p",), "measurements.f.time[0]", "missing field 'mean'"),
    ({}, ("p",), "measurements", "no measurements"),
    ({"f": {"time": [one()]}}, ("rep",), "parameters", "reserved"),
])
def test_bad_experiment_json(tmp_path, meas, params, where, needle):
    p = build(tmp_path / "bad.extra-p", meas, params)
    with pytest.raises(PerfcastError) as ei:
        io.read_one(p)
    e = ei.value
    assert e.path == str(p) and needle in e.message, e.format()
    if where:
        assert e.where == f"experiment.json {where}", e.format()


def test_truncated_and_foreign_zips(tmp_path, archive):
    raw = archive.read_bytes()
    cut = tmp_path / "cut.extra-p"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(PerfcastError, match="damaged or truncated zip") as ei:
        io.read_one(cut)
    assert ei.value.path == str(cut)
    other = tmp_path / "other.extra-p"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(PerfcastError, match="no experiment.json"):
        io.read_one(other, "extrap-experiment")
    broken = build(tmp_path / "json.extra-p", {}, members={})
    with zipfile.ZipFile(broken, "w") as zf:
        zf.writestr("experiment.json", '{"parameters": ["p"],\n "measurements": {,}}')
    with pytest.raises(PerfcastError) as ei:
        io.read_one(broken)
    assert ei.value.where == "experiment.json line 2" and "invalid JSON" in ei.value.message


def test_damaged_values(tmp_path):
    meas = {"f": {"time": [one(values=[0, 0]), one(2.0, values=[0, 5])]}}
    p = build(tmp_path / "v.extra-p", meas, ("p",), arrays=[[1.0, 1.0]])
    with pytest.raises(PerfcastError, match=r"values \[0, 5\] are not in values/0.vals") as ei:
        io.read_one(p)
    assert ei.value.where == "experiment.json measurements.f.time[1].values"
    p = build(tmp_path / "m.extra-p", {"f": {"time": [one(values=[0, 0])]}}, ("p",), arrays=[[[1.0, 2.0]]])
    with pytest.raises(PerfcastError, match="one number per repetition"):
        io.read_one(p)


def test_bad_archive_on_the_command_line(capsys, tmp_path, archive):
    cut = tmp_path / "cut.extra-p"
    cut.write_bytes(archive.read_bytes()[:1000])
    code = main(["import", str(cut), "-o", str(tmp_path / "o.perfcast")])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and str(cut) in lines[0] and "Traceback" not in err
    assert not (tmp_path / "o.perfcast").exists()

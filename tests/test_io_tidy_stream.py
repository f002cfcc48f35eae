"""The streamed tidy CSV reader (pyarrow blocks) against the csv module and against the whole-file
reader: names and metrics first met in a later block, repetitions counted across blocks, CRLF,
quoted fields, a malformed line in a later block named by its line number."""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.io import tidy


def _rows(n: int, seed: int, *, rep: bool = False, rank: bool = False, unit: bool = False):
    rng = random.Random(seed)
    header = ["p", "n", "callpath", "metric", "value"] + (["rep"] if rep else []) + (["rank"] if rank else []) \
        + (["unit"] if unit else [])
    rows, reps = [], {}
    for i in range(n):
        # callpaths and metrics keep appearing late in the file (later blocks than the first)
        cp = rng.choice(["main", "main->solve", f"main->k{i // 400}", "a,b", "x->y"])
        metric = rng.choice(["time", "visits"] if i < n // 2 else ["time", "visits", "bytes_sent"])
        p, nn = rng.choice([2, 4, 8]), rng.choice([16.5, 32])
        value = rng.choice([rng.uniform(0, 1e3), rng.randint(0, 10**6)])
        row = [str(p), repr(nn), cp, metric, repr(value) if isinstance(value, float) else str(value)]
        loc = rng.randint(0, 3)
        if rep:
            key = (p, nn, cp, metric, loc)
            reps[key] = reps.get(key, -1) + 1
            row.append(str(reps[key]))
        if rank:
            row.append(str(loc))
        if unit:
            row.append({"time": "s", "visits": "", "bytes_sent": "B"}[metric])
        rows.append(row)
    return header, rows


def _write(path, header, rows, newline="\n"):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator=newline)  # quotes "a,b"
        w.writerow(header)
        w.writerows(rows)


def _expected(path):
    """The file as the csv module reads it: one tuple per row, callpath/metric stripped."""
    with open(path, newline="") as f:
        recs = list(csv.DictReader(f, skipinitialspace=True))
    return recs


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("opts", [{}, {"rep": True, "rank": True}, {"unit": True, "rank": True}])
def test_stream_matches_csv_module(tmp_path, monkeypatch, newline, opts):
    monkeypatch.setattr(tidy, "CSV_BLOCK_BYTES", 4096)  # dozens of blocks
    monkeypatch.setattr(tidy, "REP_BLOCK_ROWS", 97)
    header, rows = _rows(3000, 3, **opts)
    f = tmp_path / "t.csv"
    _write(f, header, rows, newline)
    assert f.stat().st_size > 20 * 4096
    exp = tidy._read_csv_stream(f)  # the streaming path takes it (no fallback)
    recs = _expected(f)
    d = exp.data
    got = list(zip(d["p"].tolist(), d["n"].tolist(), d["callpath"].astype(str), d["metric"].astype(str),
                   d["value"].tolist()))
    assert got == [(float(r["p"]), float(r["n"]), r["callpath"], r["metric"], float(r["value"])) for r in recs]
    assert list(exp.metrics) == list(dict.fromkeys(r["metric"] for r in recs))  # first appearance
    # callpaths with values, their ancestors created (main before main->solve, x before x->y)
    assert set(exp.callpaths) == {r["callpath"] for r in recs}
    assert exp.tree.parent("x->y") == "x" and exp.tree.parent("a,b") is None
    if "rank" in header:
        assert d["rank"].tolist() == [int(r["rank"]) for r in recs]
    if "rep" in header:
        assert d["rep"].tolist() == [int(r["rep"]) for r in recs]
    else:  # repetitions: repeats of a point/callpath/metric[/rank] in file order
        seen, want = {}, []
        for r in recs:
            key = (r["p"], r["n"], r["callpath"], r["metric"], r.get("rank"))
            want.append(seen.get(key, 0))
            seen[key] = want[-1] + 1
        assert d["rep"].tolist() == want
    if "unit" in header:
        assert {m.name: m.unit for m in exp.metrics.values()} == {"time": "s", "visits": "", "bytes_sent": "B"}
    # and the same Experiment as the whole-file reader (which gives every error message)
    whole = tidy._read_csv_whole(f, None)
    assert list(exp.tree) == list(whole.tree) and exp.metrics == whole.metrics
    assert exp.equals(whole)


def test_tree_order_is_first_appearance(tmp_path, monkeypatch):
    monkeypatch.setattr(tidy, "CSV_BLOCK_BYTES", 1024)
    rows = [["4", f"main->k{i}", "time", "1.5"] for i in range(200)] + [["4", "late", "t2", "2"]]
    f = tmp_path / "o.csv"
    _write(f, ["p", "callpath", "metric", "value"], rows)
    exp = tidy._read_csv_stream(f)
    assert list(exp.tree) == ["main", *[f"main->k{i}" for i in range(200)], "late"]
    assert list(exp.metrics) == ["time", "t2"]
    assert list(exp.data["callpath"].cat.categories) == sorted(p for p in exp.tree if p != "main")


@pytest.mark.parametrize("bad, message", [
    ("8,abc,main,time,3", "parameter 'n': 'abc' is not a number"),
    ("8,1.5,,time,3", "empty callpath"),
    ("8,1.5,main,time", None),  # a missing field
])
def test_malformed_line_in_a_later_block_names_its_line(tmp_path, monkeypatch, bad, message):
    monkeypatch.setattr(tidy, "CSV_BLOCK_BYTES", 4096)
    header, rows = _rows(3000, 4)
    f = tmp_path / "bad.csv"
    _write(f, header, rows)
    lines = f.read_text().split("\n")
    lines[2500] = bad
    f.write_text("\n".join(lines))
    with pytest.raises(PerfcastError) as e:
        tidy._read_csv(f, None)
    assert str(f) in str(e.value)
    if message:
        assert e.value.message == message and e.value.where == "2501"


def test_unusual_inputs_fall_back_with_the_same_result(tmp_path):
    """What the stream leaves to the whole-file reader (blanks before numbers, a quoted name with
    a blank before its quote) still reads, with the csv module's values."""
    f = tmp_path / "u.csv"
    f.write_text('p, callpath, metric, value\n4, "main", time, 1.5\n8, main, time, 2.5\n')
    with pytest.raises(tidy._Slow):
        tidy._read_csv_stream(f)
    exp = tidy._read_csv(f, None)
    assert exp.data["value"].tolist() == [1.5, 2.5] and list(exp.tree) == ["main"]


def test_duplicate_rep_left_to_the_whole_file_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(tidy, "REP_BLOCK_ROWS", 3)
    rows = [["4", "main", "time", str(v), str(r)] for r, v in enumerate([1, 2, 3, 4, 5])] + [["4", "main", "time", "9", "1"]]
    f = tmp_path / "d.csv"
    _write(f, ["p", "callpath", "metric", "value", "rep"], rows)
    with pytest.raises(PerfcastError) as e:
        tidy._read_csv(f, None)
    assert e.value.where == "7" and "duplicate row" in e.value.message
    f.write_text(f.read_text().replace("9,1\n", "9,5\n"))
    exp = tidy._read_csv_stream(f)
    assert exp.data["rep"].tolist() == [0, 1, 2, 3, 4, 5] and exp.data["rep"].dtype == np.int8  # narrow


# -- JSON Lines ----------------------------------------------------------------------------------
def _write_jsonl(path, header, rows, newline="\n"):
    import json

    with open(path, "w", newline="") as f:
        for r in rows:
            rec = {}
            for c, v in zip(header, r):
                rec[c] = v if c in ("callpath", "metric", "unit") else (int(v) if v.lstrip("-").isdigit() else float(v))
            f.write(json.dumps(rec) + newline)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("opts", [{}, {"rep": True, "rank": True}])
def test_jsonl_stream_matches_json_module(tmp_path, monkeypatch, newline, opts):
    import json

    from perfcast import io as pio

    monkeypatch.setattr(tidy, "JSONL_BLOCK_BYTES", 4096)
    monkeypatch.setattr(tidy, "REP_BLOCK_ROWS", 97)
    header, rows = _rows(3000, 5, **opts)
    f = tmp_path / "t.jsonl"
    _write_jsonl(f, header, rows, newline)
    assert f.stat().st_size > 20 * 4096
    exp = tidy._read_jsonl_stream(f)  # the streaming path takes it
    recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    d = exp.data
    got = list(zip(d["p"].tolist(), d["n"].tolist(), d["callpath"].astype(str), d["metric"].astype(str),
                   d["value"].tolist()))
    assert got == [(float(r["p"]), float(r["n"]), r["callpath"], r["metric"], float(r["value"])) for r in recs]
    assert list(exp.metrics) == list(dict.fromkeys(r["metric"] for r in recs))
    if "rep" in header:
        assert d["rep"].tolist() == [r["rep"] for r in recs]
    whole = tidy._read_jsonl_whole(f)
    assert list(exp.tree) == list(whole.tree) and exp.metrics == whole.metrics and exp.equals(whole)
    assert pio.detect(f).name == "tidy-jsonl" and pio.read_one(f).meta["format"] == "tidy-jsonl"


@pytest.mark.parametrize("bad, message", [
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time", "value": "x"}', "field 'value': \"x\" is not a number"),
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time", "value": true}', "field 'value': true is not a number"),
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time"}', "the fields differ from those of line 1: no 'value'"),
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time", "value": 1, "q": 2}',
     "the fields differ from those of line 1: unexpected 'q'"),
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time", "value": 1', None),
    ('{"p": 8, "n": 2, "callpath": "  ", "metric": "time", "value": 1}', "empty callpath"),
    ('{"p": 8, "n": 2, "callpath": "main", "metric": "time", "value": NaN}', "field 'value': NaN is not a finite number"),
])
def test_jsonl_malformed_line_in_a_later_block_names_its_line(tmp_path, monkeypatch, bad, message):
    monkeypatch.setattr(tidy, "JSONL_BLOCK_BYTES", 4096)
    header, rows = _rows(3000, 6)
    f = tmp_path / "bad.jsonl"
    _write_jsonl(f, header, rows)
    lines = f.read_text().split("\n")
    lines[2500] = bad
    f.write_text("\n".join(lines))
    with pytest.raises(PerfcastError) as e:
        tidy._read_jsonl(f, None)
    assert str(f) in str(e.value) and e.value.where == "2501"
    if message:
        assert e.value.message == message
    else:
        assert e.value.message.startswith("invalid JSON at column")


def test_extrap_jsonl_is_not_taken_for_tidy(tmp_path):
    from perfcast import io as pio

    f = tmp_path / "e.jsonl"
    f.write_text('{"params": {"p": 4}, "callpath": "main", "metric": "time", "value": 1.5}\n'
                 '{"params": {"p": 8}, "callpath": "main", "metric": "time", "value": 2.5}\n')
    assert pio.detect(f).name == "extrap-jsonl"

"""perfcast.table: the value table as plain columns, the Arrow conversions without pandas, and the
Extra-P text reader that builds an Experiment from columns without importing pandas."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment, Metric
from perfcast.io.extrap import _cumcount, _first_seen, _sorted_categorical
from perfcast.table import Category, Columns, arrow_array, arrow_strings, numpy_of

SRC = str(Path(__file__).resolve().parents[1] / "src")

TEXT = textwrap.dedent("""\
    PARAMETER p
    POINTS 2 4 8 16
    METRIC time
    REGION b
    DATA 1.0 1.1
    DATA 2.0 2.1
    DATA 4.0 4.2
    DATA 8.0 8.1
    REGION a
    DATA 3 3
    DATA 3 3.5
    DATA 3 3
    DATA 3 3
    """)


def _fresh(code: str) -> str:
    """``code``'s stdout in a fresh interpreter with this tree's perfcast."""
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_arrow_array_and_numpy_of_by_hand():
    for a in (np.array([3, -1, 7], dtype=np.int8), np.array([0, 2**40], dtype=np.int64),
              np.array([1.5, np.nan, -0.0]), np.array([2.5], dtype=np.float32), np.array([], dtype=np.int32)):
        arr = arrow_array(a)
        assert arr.type == pa.from_numpy_dtype(a.dtype) and arr.null_count == 0
        back = numpy_of(arr)
        assert back.dtype == a.dtype and np.array_equal(back, a, equal_nan=True)
    b = arrow_array(np.array([True, False, False, True, True, False, True, False, True]))
    assert b.to_pylist() == [True, False, False, True, True, False, True, False, True]
    # a slice starts inside the bit buffer and the value buffer: the offset is honoured
    assert numpy_of(b.slice(3, 4)).tolist() == [True, True, False, True]
    assert numpy_of(arrow_array(np.arange(10, dtype=np.int16)).slice(7)).tolist() == [7, 8, 9]
    chunked = pa.chunked_array([arrow_array(np.array([1, 2])), arrow_array(np.array([5]))])
    assert numpy_of(chunked).tolist() == [1, 2, 5]
    # nulls: left to pyarrow's own conversion (NaN for a float)
    assert np.isnan(numpy_of(pa.array([1.0, None]))[1])


def test_arrow_strings_by_hand():
    s = arrow_strings(["a", "", "héllo", "x->y"])
    assert s.type == pa.string() and s.to_pylist() == ["a", "", "héllo", "x->y"]
    assert np.frombuffer(s.buffers()[1], dtype=np.int32).tolist() == [0, 1, 1, 7, 11]     # é is two bytes
    big = arrow_strings(["ab", "c"], pa.large_string())
    assert big.type == pa.large_string() and big.to_pylist() == ["ab", "c"]
    assert arrow_strings([]).to_pylist() == []


def test_cumcount_and_first_seen_by_hand():
    a = np.array([0, 1, 0, 0, 1, 2])
    b = np.array([1, 1, 1, 0, 1, 1])
    # keys (a, b): (0,1) rows 0, 2; (1,1) rows 1, 4; (0,0) row 3; (2,1) row 5
    assert _cumcount([a, b], [2]).tolist() == [0, 0, 1, 0, 1, 0]
    assert _cumcount([np.array([5, 5, 5])], []).tolist() == [0, 1, 2]
    assert _first_seen(np.array([3, 1, 3, 0, 1])) == [3, 1, 0]


def test_sorted_categorical_by_hand():
    codes = np.array([0, 1, 2, 1], dtype=np.int8)
    cat = _sorted_categorical(codes, ["time", "bytes", "visits"])
    assert cat.name_list() == ["bytes", "time", "visits"]
    assert cat.codes.tolist() == [1, 0, 2, 0]
    assert cat.strings(np.array([0, 2])) == ["time", "visits"]


def test_columns_experiment_drops_unused_names_and_matches_the_frame():
    cols = Columns({"p": np.array([1.0, 2.0, 4.0]), "rep": np.zeros(3, dtype=np.int8),
                    "callpath": Category(np.array([2, 2, 0], dtype=np.int32), pa.array(["a", "b", "c"])),
                    "metric": Category(np.array([0, 0, 0], dtype=np.int8), ["time"]),
                    "value": np.array([1.0, 2.0, 3.0])})
    e = Experiment(["p"], cols, [Metric.guess("time")])
    c = e.cols["callpath"]
    assert c.name_list() == ["a", "c"] and c.codes.tolist() == [1, 1, 0]   # "b" unused: dropped
    assert e.callpaths == ["a", "c"]
    assert e.cols["p"].dtype == np.float32                                 # exact in float32
    d = e.data
    assert d["callpath"].astype(str).tolist() == ["c", "c", "a"]
    assert list(d["callpath"].cat.categories) == ["a", "c"]
    assert d["value"].tolist() == [1.0, 2.0, 3.0] and d["rep"].dtype == np.int8
    # the same table given as a DataFrame makes an equal experiment
    assert Experiment(["p"], d, [Metric.guess("time")]).equals(e)


def test_columns_experiment_validates():
    def exp(values, metric="visits"):
        return Experiment(["p"], Columns({
            "p": np.array([1.0, 2.0]), "callpath": Category(np.array([0, 0]), ["main"]),
            "metric": Category(np.array([0, 0]), [metric]), "value": np.asarray(values, dtype=float)}),
            [Metric("visits", kind="count")])
    assert exp([1, 2]).cols["rep"].tolist() == [0, 0]
    with pytest.raises(PerfcastError, match="1 non-finite"):
        exp([1, np.inf])
    with pytest.raises(PerfcastError, match=r"negative value\(s\), e.g. -2.0 at callpath 'main', point \(p=2\)"):
        exp([1, -2])
    with pytest.raises(PerfcastError, match="undeclared metric"):
        exp([1, 2], metric="time")


def test_extrap_text_read_without_pandas(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(TEXT)
    out = _fresh(f"""
import json, sys
from perfcast import io
e = io.load([{str(f)!r}])
c = e.cols
print(json.dumps({{"pandas": "pandas" in sys.modules, "callpaths": c["callpath"].name_list(),
                  "codes": c["callpath"].codes.tolist(), "p": c["p"].tolist(), "rep": c["rep"].tolist(),
                  "value": c["value"].tolist(), "tree": e.tree.paths}}))
""")
    got = json.loads(out)
    assert got["pandas"] is False
    assert got["callpaths"] == ["a", "b"] and got["tree"] == ["b", "a"]    # sorted names; tree in file order
    assert got["codes"] == [1] * 8 + [0] * 8
    assert got["p"] == [2, 2, 4, 4, 8, 8, 16, 16] * 2
    assert got["rep"] == [0, 1] * 8
    assert got["value"] == [1.0, 1.1, 2.0, 2.1, 4.0, 4.2, 8.0, 8.1, 3, 3, 3, 3.5, 3, 3, 3, 3]


def test_extrap_repeated_block_numbers_repetitions(tmp_path):
    # the same (REGION, METRIC) block twice: its values continue the repetitions (not pandas' cumcount now)
    f = tmp_path / "t.txt"
    f.write_text("PARAMETER p\nPOINTS 1 2\nMETRIC time\nREGION a\nDATA 1\nDATA 2\nREGION b\nDATA 5\nDATA 6\n"
                 "REGION a\nDATA 1.5\nDATA 2.5 2.7\n")
    from perfcast import io

    e = io.load([str(f)])
    d = e.data
    a = d[d["callpath"] == "a"].sort_values(["p", "rep"])
    assert a["rep"].tolist() == [0, 1, 0, 1, 2]
    assert a["value"].tolist() == [1.0, 1.5, 2.0, 2.5, 2.7]


@pytest.mark.parametrize("args", [["model", "--json"], ["model", "--limit", "0"], ["predict", "--at", "p=64", "--json"],
                                  ["check", "--expect", "*: O(p)"]])
def test_modelling_an_extrap_text_file_imports_no_pandas(tmp_path, args):
    """The model path from an Extra-P text file (reading, statistics, fit, model set, the table,
    the JSON records, predictions, checks) runs on the experiment's columns: pandas is never
    imported (~0.19 s of the command), nor pyarrow.compute (~20 ms: perfcast.arrow_kernels), nor,
    for --json, rich (~15 ms); and the command's output is complete."""
    f = tmp_path / "t.txt"
    # b = p / 2 exactly (two equal repetitions), a constant 3; 100 more regions c<k> = k + p, so
    # that the whole-array paths (formulas, number texts, joined records) run
    f.write_text("PARAMETER p\nPOINTS 2 4 8 16 32\nMETRIC time\nREGION b\n"
                 + "".join(f"DATA {p / 2} {p / 2}\n" for p in (2, 4, 8, 16, 32))
                 + "REGION a\n" + "DATA 3 3\n" * 5
                 + "".join(f"REGION c{k}\n" + "".join(f"DATA {k + p} {k + p}\n" for p in (2, 4, 8, 16, 32))
                           for k in range(100)))
    cmd = [args[0], str(f), *args[1:]]
    out = _fresh(f"""
import io, json, sys
from contextlib import redirect_stdout
from perfcast.cli import main
buf = io.StringIO()
with redirect_stdout(buf):
    try:
        code = main({cmd!r})
    except SystemExit as e:
        code = e.code
print(json.dumps({{"pandas": "pandas" in sys.modules, "compute": "pyarrow.compute" in sys.modules,
                  "rich": "rich" in sys.modules, "code": code, "out": buf.getvalue()}}))
""")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["pandas"] is False
    assert got["compute"] is False
    assert got["rich"] is ("--json" not in args)
    assert got["code"] in (0, None)
    text = got["out"]
    if "--json" in args:
        doc = json.loads(text)
        items = doc["items"]
        assert {r["callpath"] for r in items} == {"a", "b"} | {f"c{k}" for k in range(100)}
        if args[0] == "predict":
            b = next(r for r in items if r["callpath"] == "b")
            assert b["value"] == pytest.approx(32.0, rel=1e-9)     # p / 2 at p = 64
            c7 = next(r for r in items if r["callpath"] == "c7")
            assert c7["value"] == pytest.approx(7 + 64.0, rel=1e-9)
        else:
            c7 = next(r for r in items if r["callpath"] == "c7")
            assert c7["constant"] == pytest.approx(7.0, rel=1e-9)
            assert c7["terms"][0]["coefficient"] == pytest.approx(1.0, rel=1e-9)
    elif args[0] == "check":
        assert text == "all 102 check(s) passed\n"      # b, c<k> ~ p and the constant a are within O(p)
    else:
        assert "p/2" in text.replace(" ", "") or "0.5" in text      # the table's b: p / 2


def test_distinct_sorted_is_np_unique_over_blocks(monkeypatch):
    """distinct_sorted searches a block of rows at a time: values the sample misses, in any block
    (the first, a middle one, the last row), are found; the result is np.unique's."""
    from perfcast import table

    monkeypatch.setattr(table, "_DISTINCT_BLOCK", 1000)
    rng = np.random.default_rng(2)
    a = rng.choice(np.array([4.0, 8.0, 16.0, 32.0], dtype=np.float32), 50_000)
    a[7], a[25_001], a[-1] = 3.5, 1e9, -2.0      # once each: not in the sample of every 12th row
    assert np.array_equal(table.distinct_sorted(a), np.unique(a))
    r = rng.integers(0, 5, 30_000).astype(np.int8)
    assert np.array_equal(table.distinct_sorted(r), np.unique(r))

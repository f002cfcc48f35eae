"""The tidy Parquet file read a batch of rows at a time (ParquetFile.iter_batches) against the
values written into it and against the whole-table reader: several row groups and batches,
integer parameter columns, a writer's dictionary in another order than the rows and with unused
entries, names and metrics first met in a later batch, repetitions counted across batches; what
the stream leaves to the whole-table reader (a missing value, a string parameter column) still
gets that reader's result or message."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfcast.errors import PerfcastError
from perfcast.io import tidy


def _columns(n: int, seed: int, *, rep: bool = False, unit: bool = False) -> dict[str, list]:
    rng = random.Random(seed)
    cols: dict[str, list] = {"p": [], "n": [], "callpath": [], "metric": [], "value": []}
    if rep:
        cols["rep"] = []
    if unit:
        cols["unit"] = []
    reps: dict[tuple, int] = {}
    for i in range(n):
        cp = rng.choice(["main", "main->solve", f"main->k{i // 300}", "x->y"])
        metric = rng.choice(["time", "visits"] if i < n // 2 else ["time", "visits", "bytes_sent"])
        p, nn = rng.choice([2, 4, 8]), rng.choice([16.5, 32.0])
        cols["p"].append(p)
        cols["n"].append(nn)
        cols["callpath"].append(cp)
        cols["metric"].append(metric)
        cols["value"].append(rng.uniform(0, 1e3))
        if rep:
            key = (p, nn, cp, metric)
            reps[key] = reps.get(key, -1) + 1
            cols["rep"].append(reps[key])
        if unit:
            cols["unit"].append({"time": "s", "visits": None, "bytes_sent": "B"}[metric])
    return cols


def _table(cols: dict[str, list]) -> pa.Table:
    types = {"p": pa.int64(), "n": pa.float64(), "value": pa.float64(), "rep": pa.int32()}
    return pa.table({c: pa.array(v, type=types.get(c, pa.string())) for c, v in cols.items()})


@pytest.mark.parametrize("opts", [{}, {"rep": True}, {"unit": True}])
def test_stream_matches_the_values_written(tmp_path, monkeypatch, opts):
    monkeypatch.setattr(tidy, "PARQUET_BATCH_ROWS", 97)  # dozens of batches in each row group
    monkeypatch.setattr(tidy, "REP_BLOCK_ROWS", 113)
    cols = _columns(3000, 5, **opts)
    f = tmp_path / "t.parquet"
    pq.write_table(_table(cols), f, row_group_size=700)
    assert pq.ParquetFile(f).num_row_groups == 5
    exp = tidy._read_parquet_stream(f)  # the streaming path takes it (no fallback)
    d = exp.data
    got = list(zip(d["p"].tolist(), d["n"].tolist(), d["callpath"].astype(str), d["metric"].astype(str),
                   d["value"].tolist()))
    assert got == [(float(p), n, cp, m, v) for p, n, cp, m, v in
                   zip(cols["p"], cols["n"], cols["callpath"], cols["metric"], cols["value"])]
    assert list(exp.metrics) == list(dict.fromkeys(cols["metric"]))  # first appearance
    if "rep" in cols:
        assert d["rep"].tolist() == cols["rep"]
    else:
        seen, want = {}, []
        for key in zip(cols["p"], cols["n"], cols["callpath"], cols["metric"]):
            want.append(seen.get(key, 0))
            seen[key] = want[-1] + 1
        assert d["rep"].tolist() == want
    if "unit" in cols:
        assert {m.name: m.unit for m in exp.metrics.values()} == {"time": "s", "visits": "", "bytes_sent": "B"}
    whole = tidy._read_parquet_whole(f)
    assert list(exp.tree) == list(whole.tree) and exp.metrics == whole.metrics
    assert exp.equals(whole)


def test_writer_dictionary_order_and_unused_entries(tmp_path, monkeypatch):
    """A dictionary column whose dictionary is sorted backwards and holds names no row uses: the
    tree and the metrics follow the rows, the unused names are not callpaths."""
    monkeypatch.setattr(tidy, "PARQUET_BATCH_ROWS", 3)
    names = ["zeta", "unused", "main->b", "main->a", "alpha"]
    rows = [3, 2, 3, 0, 4, 0, 3, 2]  # codes into names
    cp = pa.DictionaryArray.from_arrays(pa.array(rows, type=pa.int32()), pa.array(names))
    metric = pa.DictionaryArray.from_arrays(pa.array([1, 1, 0, 0, 1, 1, 0, 0], type=pa.int32()),
                                            pa.array(["visits", "time", "never"]))
    t = pa.table({"p": pa.array([4, 4, 4, 4, 8, 8, 8, 8], type=pa.int16()), "callpath": cp, "metric": metric,
                  "value": pa.array([1.0, 2, 3, 4, 5, 6, 7, 8], type=pa.float32())})
    f = tmp_path / "d.parquet"
    pq.write_table(t, f)
    exp = tidy._read_parquet_stream(f)
    assert list(exp.tree) == ["main", "main->a", "main->b", "zeta", "alpha"]
    assert list(exp.metrics) == ["time", "visits"]
    assert exp.data["callpath"].astype(str).tolist() == [names[i] for i in rows]
    assert exp.data["value"].tolist() == [1.0, 2, 3, 4, 5, 6, 7, 8]
    assert exp.equals(tidy._read_parquet_whole(f))


def test_missing_value_left_to_the_whole_table_reader(tmp_path):
    t = pa.table({"p": [4, 8, 16], "callpath": ["main", "main", "main"], "metric": ["time"] * 3,
                  "value": pa.array([1.0, None, 3.0])})
    f = tmp_path / "m.parquet"
    pq.write_table(t, f)
    with pytest.raises(tidy._Slow):
        tidy._read_parquet_stream(f)
    with pytest.raises(PerfcastError) as e:
        tidy._read_parquet(f, None)
    # an empty value is "not measured" (experiment.not_measured_rows): beside values of the same
    # metric and callpath, an error at its row
    assert str(f) in str(e.value) and e.value.message.startswith("metric 'time' at 'main': an empty value (not measured")
    assert e.value.where == "row 1, column 'value'"


def test_string_parameter_column_falls_back_with_the_same_result(tmp_path):
    t = pa.table({"p": ["4", "8"], "callpath": ["main", "main"], "metric": ["time", "time"], "value": [1.5, 2.5]})
    f = tmp_path / "s.parquet"
    pq.write_table(t, f)
    with pytest.raises(tidy._Slow):
        tidy._read_parquet_stream(f)
    exp = tidy._read_parquet(f, None)
    assert exp.data["p"].tolist() == [4.0, 8.0] and exp.data["value"].tolist() == [1.5, 2.5]


def test_damaged_file_gives_the_whole_table_readers_message(tmp_path):
    f = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"p": [4.0], "callpath": ["main"], "metric": ["time"], "value": [1.0]}), f)
    raw = f.read_bytes()
    f.write_bytes(raw[:len(raw) // 2] + raw[-8:])
    with pytest.raises(PerfcastError) as e:
        tidy._read_parquet(f, None)
    assert str(f) in str(e.value) and "not a readable Parquet file" in e.value.message


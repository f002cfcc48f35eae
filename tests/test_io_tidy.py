"""The tidy CSV reader against the csv module: names stripped and merged per distinct name, an
empty name deep in the file named by its line."""

from __future__ import annotations

import csv
import random

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import tidy


def _write(tmp_path, n: int):
    rng = random.Random(5)
    rows = [["p", "callpath", "metric", "value"]]
    for i in range(n):
        cp = rng.choice(["main", " main", "main->a", "main->a ", "main->b"])
        rows.append([str(rng.choice([2, 4, 8])), cp, rng.choice(["time", " time", "visits"]),
                     f"{rng.uniform(0, 100):.6g}"])
    f = tmp_path / "t.csv"
    f.write_text("\n".join(",".join(r) for r in rows) + "\n")
    return f, rows


def test_names_stripped_per_distinct_name(tmp_path):
    f, rows = _write(tmp_path, 3000)
    exp = tidy._read_csv(f, None)
    want = [(float(p), cp.strip(), m.strip(), float(v)) for p, cp, m, v in rows[1:]]
    d = exp.data
    got = list(zip(d["p"].tolist(), d["callpath"].astype(str), d["metric"].astype(str), d["value"].tolist()))
    assert got == want
    assert list(d["callpath"].cat.categories) == ["main", "main->a", "main->b"]
    assert list(exp.metrics) == list(dict.fromkeys(m for _, _, m, _ in want))  # first appearance
    # repetitions: rows repeating a point/callpath/metric, numbered in file order
    seen = {}
    for (p, cp, m, _), rep in zip(want, d["rep"].tolist()):
        assert rep == seen.get((p, cp, m), 0)
        seen[(p, cp, m)] = rep + 1
    assert exp.tree.parent("main->a") == "main"


def test_blank_name_deep_in_the_file_names_its_line(tmp_path):
    f, rows = _write(tmp_path, 3000)
    lines = f.read_text().split("\n")
    lines[2500] = "4,  ,time,1.5"
    f.write_text("\n".join(lines))
    with pytest.raises(PerfcastError) as e:
        tidy._read_csv(f, None)
    assert e.value.message == "empty callpath" and e.value.where == "2501" and str(f) in str(e.value)
    lines[2500] = "4,main,,1.5"
    f.write_text("\n".join(lines))
    with pytest.raises(PerfcastError) as e:
        tidy._read_csv(f, None)
    assert e.value.message == "empty metric" and e.value.where == "2501"


@pytest.mark.parametrize("block_rows", [1, 7, 1 << 20])
def test_negative_time_warning_counted_across_row_blocks(tmp_path, monkeypatch, block_rows):
    """The negative-time warning (checked a block of rows at a time) against a count made with the
    csv module: the threshold is 1e-9 times the largest magnitude of that metric's values."""
    import perfcast.io as io

    monkeypatch.setattr(io, "_WARN_BLOCK_ROWS", block_rows)
    rng = random.Random(11)
    rows = [["p", "callpath", "metric", "value"]]
    for i in range(400):
        metric = rng.choice(["time", "comm_time", "visits"])
        v = rng.uniform(-5, 50) if metric != "visits" else rng.randint(0, 9)
        if metric == "comm_time":
            v = rng.choice([-1e-12, 3.0, 7.5])  # rounding noise below the threshold: not warned
        rows.append([str(rng.choice([2, 4, 8])), rng.choice(["main", "main->a"]), metric, repr(v)])
    f = tmp_path / "w.csv"
    f.write_text("\n".join(",".join(r) for r in rows) + "\n")
    with open(f, newline="") as fh:
        recs = list(csv.DictReader(fh))
    times = [float(r["value"]) for r in recs if r["metric"] == "time"]
    limit = -1e-9 * max(abs(v) for v in times)
    neg = [v for v in times if v < limit]
    assert neg  # the data has some
    exp = io.load([f])
    import re

    warned = [re.fullmatch(r"metric '(\w+)' is a time but has (\d+) negative value\(s\) \(smallest (\S+)\)", w)
              for w in exp.meta.get("warnings", []) if "is a time" in w]
    assert len(warned) == 1 and warned[0].group(1) == "time" and int(warned[0].group(2)) == len(neg)
    assert float(warned[0].group(3)) == pytest.approx(min(neg), rel=1e-5)  # printed with 6 digits


def test_a_row_with_more_fields_than_the_header_names_its_line(tmp_path):
    # was "not valid CSV: Error tokenizing data. C error: Expected 4 fields in line 2501, saw 5",
    # without the file's place
    from perfcast.io import load

    f, rows = _write(tmp_path, 3000)
    lines = f.read_text().split("\n")
    lines[2500] = "4,main,time,1.5,extra"
    f.write_text("\n".join(lines))
    for read in (lambda: tidy._read_csv(f, None), lambda: load([f])):
        with pytest.raises(PerfcastError) as e:
            read()
        assert e.value.where == "2501" and str(f) in str(e.value)
        assert e.value.message == "not valid CSV: expected 4 fields (the header's), found 5"

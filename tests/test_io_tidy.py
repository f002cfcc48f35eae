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

"""The tidy CSV reader against the csv module: names stripped and merged per distinct name, an
empty name deep in the file named by its line."""

from __future__ import annotations

import csv
import random

import numpy as np
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


@pytest.mark.parametrize("store_name", ["md", "big"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_tidy_export_keeps_the_coverage_record(tmp_path, capsys, store_name, fmt):
    """CoMD's campaigns (tests/data/comd) merge two collectors: the timing one saw app and its timers,
    PMPI saw MPI->*.  A tidy CSV or JSON Lines export (Experiment.to_pandas, then pandas' to_csv /
    to_json) had no place for that record (df.attrs only), so read back, calls at app->force -- never
    seen by PMPI -- was a 0 again.  The export now writes a row with an empty value for each callpath
    a metric's collector never saw; read back, the record and every value are those of the store
    (read with json and pandas)."""
    import json
    from pathlib import Path

    import pandas as pd

    from conftest import cli, cli_json
    from perfcast.io import load

    store = Path(__file__).parent / "data" / "comd" / f"{store_name}.perfcast"
    want_cov = json.loads((store / "experiment.json").read_text())["meta"]["coverage"]
    want = pd.read_parquet(store / "values.parquet")
    df = load([store]).to_pandas()
    f = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        df.to_csv(f, index=False)
    else:
        df.to_json(f, orient="records", lines=True)
    back = load([f])
    got_cov = {frozenset(g["metrics"]): set(g["callpaths"]) for g in back.meta["coverage"]}
    assert got_cov == {frozenset(g["metrics"]): set(g["callpaths"]) for g in want_cov}
    keys = ["p", "n", "rep", "callpath", "metric", "rank"]
    got = back.data.astype({"callpath": str, "metric": str})
    merged = want.astype({"callpath": str, "metric": str}).merge(got, on=keys, how="outer", suffixes=("", "_back"),
                                                                 indicator=True)
    assert (merged["_merge"] == "both").all()
    # CSV: pandas writes every float exactly; JSON: to_json's 10 significant digits by default
    close = (merged["value"] == merged["value_back"]) if fmt == "csv" else \
        np.isclose(merged["value"], merged["value_back"], rtol=1e-9, atol=0)
    assert close.all(), merged[~close].head().to_string()
    # and what the record means: PMPI's calls at CoMD's force timer are not measured, not a 0
    from perfcast.experiment import covered

    assert covered(back, "calls", ["app->force", "MPI->MPI_Sendrecv"]).tolist() == [False, True]
    assert covered(back, "time", ["app->force", "MPI->MPI_Sendrecv"]).tolist() == [True, False]


def test_an_empty_value_beside_measured_values_is_one_error(tmp_path, capsys):
    from conftest import cli

    f = tmp_path / "t.csv"
    f.write_text("p,callpath,metric,value\n1,main,time,2.5\n2,main,time,\n1,main->f,time,1\n")
    code, out, err = cli(capsys, "show", f)
    assert code == 2 and f"{f}:3" in err and "not measured" in err and "Traceback" not in err

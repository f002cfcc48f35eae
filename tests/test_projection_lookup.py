"""System search (perfcast.projection.lookup): the pandas-free path of `perfcast systems` (the cached
systems table read with pyarrow) gives the same rows in the same order as the parsed (pandas)
database; words match the description fields, not the result ids (issue 19), checked against the
published table's rows read with the csv module."""

import csv
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from perfcast.projection import dbcache
from perfcast.projection import lookup as L
from perfcast.projection import project as P

from conftest import DATA, cli_json, require_data

FP_RATE = DATA / "spec" / "spec17ml_input_FP_rate.csv"
QUERIES = ("EPYC 7742", "Platinum 8380", "Intel", "AMD", "Hewlett Packard Enterprise", "Dell EPYC 7742 sockets=2",
           "Xeon Gold cores_per_socket>=20", "sockets<2 epyc", "model_name=platinum", "nosuchthing", "",
           "cpu2017-20180816-08380", "08380", "max_mhz>4000", "sockets=2.0 lenovo", "test_sponsor=dell")
DESCRIPTION = ("vendor", "hardware_vendor", "model_name", "test_sponsor")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """(default table paths, parsed database, cache directory) with the cache written."""
    require_data(FP_RATE)
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("cache")
        mp.setenv("PERFCAST_CACHE", str(root))
        paths = L.table_paths(())
        parsed = P._parse_db(paths)
        P.load_db(paths)                                  # writes the cache
        yield paths, parsed, root

@pytest.fixture
def warm(real, monkeypatch):
    paths, parsed, root = real
    monkeypatch.setenv("PERFCAST_CACHE", str(root))
    return paths, parsed, root


def _raw_rows():
    """The FP rate table's results as published, one per result file (the first of a duplicate)."""
    with open(FP_RATE, newline="") as fh:
        rows, seen = [], set()
        for r in csv.DictReader(fh):
            sid = r["file"].removesuffix(".csv")
            if sid not in seen:
                seen.add(sid)
                rows.append(dict(r, system=sid))
    return rows


def _pandas_reference(s, query):
    """The query rules written again with pandas string and numeric operations (the search before
    issue 19, with ids matched whole only): the ground truth for the numpy matcher."""
    keep = pd.Series(True, index=s.index)
    for tok in query.split():
        m = re.match(r"^([A-Za-z_][\w.]*)(=|<=|>=|<|>)(.+)$", tok)
        if m is None:
            fields = [s[c].astype(object).where(s[c].notna(), "").astype(str)
                      for c in L.NAME_FIELDS if c in s.columns]
            text = fields[0].str.cat(fields[1:], sep=" ").str.lower()
            keep &= text.str.contains(tok.lower(), regex=False) | (s["system"].str.lower() == tok.lower())
            continue
        key, op, value = m.groups()
        num = pd.to_numeric(s[key], errors="coerce")
        v = pd.to_numeric(value, errors="coerce")
        if op == "=" and not (pd.notna(v) and num.notna().any()):
            keep &= s[key].astype(object).where(s[key].notna(), "").astype(str).str.lower() \
                .str.contains(value.lower(), regex=False)
        else:
            keep &= {"=": num == v, "<": num < v, ">": num > v, "<=": num <= v, ">=": num >= v}[op].fillna(False)
    return s[keep.to_numpy(dtype=bool)]


def test_fast_path_reads_the_cache_and_equals_the_pandas_path(warm, monkeypatch):
    paths, parsed, _ = warm
    fast = dbcache.read_systems(paths)
    assert fast is not None and fast.source == parsed.source and len(fast) == len(parsed)
    assert list(fast.columns) == list(parsed.systems.columns)
    monkeypatch.setattr(P, "load_db", lambda *a: pytest.fail("parsed although the cache is valid"))
    table = L.load_systems(())
    for q in QUERIES:
        want = parsed.find(q)[["system", "name"]].astype(str).values.tolist()
        assert table.rows(table.find(q), ["system", "name"]) == want, q
        assert _pandas_reference(parsed.systems, q)[["system", "name"]].astype(str).values.tolist() == want, q
    assert len(table.find("")) == len(parsed)


def test_cli_json_and_table_from_the_fast_path_equal_the_pandas_rows_without_importing_pandas(warm):
    paths, parsed, root = warm
    env = dict(os.environ, PERFCAST_CACHE=str(root))
    code = ("import sys; from perfcast.cli import main; rc = main(sys.argv[1:]); "
            "sys.stderr.write('PANDAS=%s SCIPY=%s' % ('pandas' in sys.modules, 'scipy' in sys.modules)); sys.exit(rc)")
    for q in ("EPYC 7742", "Intel sockets=1", "Platinum 8380"):
        want = parsed.find(q)[["system", "name"]].astype(str)
        r = subprocess.run([sys.executable, "-c", code, "systems", q, "--json", "--limit", "10"],
                           capture_output=True, text=True, env=env, timeout=300)
        assert "PANDAS=False SCIPY=False" in r.stderr, r.stderr
        if want.empty:    # no match: the error the table form gives, with --json too
            assert r.returncode == 2 and r.stdout == "" and "no system matches 'Platinum 8380'" in r.stderr
        else:
            assert r.returncode == 0, r.stderr
            got = cli_json(r.stdout, "systems")
            assert got["matches"] == len(want) and got["items"] == want.head(10).to_dict("records")
        r = subprocess.run([sys.executable, "-c", code, "systems", q, "--limit", "10"],
                           capture_output=True, text=True, env=env, timeout=300)
        if want.empty:
            assert r.returncode == 2 and "no system matches 'Platinum 8380'" in r.stderr
            assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        else:
            assert r.returncode == 0 and "PANDAS=False" in r.stderr, r.stderr
            lines = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("cpu2017-")]
            assert [ln.split("|")[0].strip() for ln in lines] == list(want["system"].head(10))


def test_words_match_descriptions_not_ids(warm):
    """Issue 19: "Platinum 8380" matched cpu2017-20180816-08380, a Xeon Platinum 8158."""
    rows = _raw_rows()
    table = L.load_systems(())
    for q in ("Platinum 8380", "Platinum 8260", "EPYC 7742", "Xeon Gold 6148"):
        want = [r["system"] for r in rows if q.lower() in r["model_name"].lower()]
        assert want or q == "Platinum 8380"
        assert table.rows(table.find(q), ["system"]) == [[s] for s in want], q
    assert not [r for r in rows if "platinum 8380" in r["model_name"].lower()]
    # an id typed whole designates its system; a piece of an id matches nothing (no description has it)
    assert table.rows(table.find("CPU2017-20180816-08380"), ["system"]) == [["cpu2017-20180816-08380"]]
    assert not [r for r in rows if any("08380" in r[c] for c in DESCRIPTION)]
    assert len(table.find("08380")) == 0
    # a vendor alone: every system whose description fields name it
    want = [r["system"] for r in rows if any("supermicro" in r[c].lower() for c in DESCRIPTION)]
    assert len(want) > 10
    assert table.rows(table.find("Supermicro"), ["system"]) == [[s] for s in want]


def test_a_damaged_systems_cache_falls_back_to_parsing(warm, tmp_path, monkeypatch):
    paths, parsed, root = warm
    monkeypatch.setenv("PERFCAST_CACHE", str(tmp_path))
    P.load_db(paths)
    (f,) = (tmp_path / "benchdb").glob("*.systems.parquet")
    f.write_bytes(b"PAR1" + b"\0" * 64)
    assert dbcache.read_systems(paths) is None
    table = L.load_systems(())
    assert table.rows(table.find("EPYC 7742"), ["system", "name"]) == \
        parsed.find("EPYC 7742")[["system", "name"]].astype(str).values.tolist()
    assert dbcache.read_systems(paths) is not None                  # rewritten


def test_filters_on_plain_columns():
    """The matcher on hand-made columns: numbers compare numerically, a missing value matches nothing,
    an unknown attribute and a non-number comparison are located errors."""
    import numpy as np

    from perfcast.errors import PerfcastError

    cols = {"system": np.array(["a1", "b2", "c3"], dtype=object), "name": np.array(["Alpha", "Beta", "Gamma"],
                                                                                    dtype=object),
            "vendor": np.array(["X", None, "Y"], dtype=object), "sockets": np.array([1.0, 2.0, np.nan]),
            "mem": np.array(["16", "32", "n/a"], dtype=object)}
    t = L.SystemTable(cols)
    assert list(t.find("sockets=2")) == [1] and list(t.find("sockets<2")) == [0]
    assert list(t.find("sockets>=1")) == [0, 1]
    assert list(t.find("mem>20")) == [1] and list(t.find("mem=16")) == [0] and list(t.find("mem=n/a")) == [2]
    assert list(t.find("vendor=x")) == [0] and list(t.find("none")) == [] and list(t.find("nan")) == []
    assert list(t.find("a1")) == [0] and list(t.find("a")) == [0, 1, 2] and list(t.find("2")) == []
    with pytest.raises(PerfcastError, match="unknown system attribute 'cores'"):
        t.find("cores=2")
    with pytest.raises(PerfcastError, match="not a number"):
        t.find("sockets>two")

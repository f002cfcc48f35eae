"""The benchmark database's binary cache (perfcast.projection.dbcache): the cached database is the
parsed one, column by column; a changed table, a corrupt cache and an unwritable cache directory all
give the parsed database; the cache lives under $PERFCAST_CACHE / $XDG_CACHE_HOME / ~/.cache."""

import csv
import os
import subprocess
import sys

import pandas as pd
import pytest

from perfcast.projection import dbcache
from perfcast.projection import project as P

from conftest import DATA, cli_items, require_data

FP_RATE = DATA / "spec" / "spec17ml_input_FP_rate.csv"


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """A fresh XDG cache home (and no $PERFCAST_CACHE); returns the database cache directory."""
    monkeypatch.delenv("PERFCAST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "perfcast" / "benchdb"


def _no_parsing(monkeypatch):
    """From here on the tables cannot be parsed: a load that succeeds came from the cache."""
    def refuse(paths):
        raise AssertionError("parsed although the cache is valid")
    monkeypatch.setattr(P, "_parse_db", refuse)


def _tidy(path, systems, benchmarks=("b1", "b2", "b3"), scale=1.0):
    """A tidy user table: time of system i, benchmark j = scale * (i + 1) * (j + 2); a vendor column
    with one blank (missing) value."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "benchmark", "time", "vendor"])
        for i in range(systems):
            for j, b in enumerate(benchmarks):
                w.writerow([f"sys{i:05d}", b, scale * (i + 1) * (j + 2), "" if i == 1 else f"V{i % 3}"])
    return path


def _assert_same(a, b):
    assert a.source == b.source
    for got, want in ((a.results, b.results), (a.systems, b.systems)):
        assert list(got.columns) == list(want.columns)
        assert len(got) == len(want)
        for c in want.columns:
            pd.testing.assert_series_equal(got[c], want[c], check_exact=True, obj=f"column {c}")


def test_cached_default_database_equals_the_parsed_one(cache_home, monkeypatch):
    require_data(FP_RATE)
    first = P.load_db(())                                # parses and writes the cache
    files = sorted(p.name for p in cache_home.iterdir())
    assert len(files) == 2 and files[0].endswith(".results.parquet") and files[1].endswith(".systems.parquet")
    paths = [P._default_table(n) for n in P.DEFAULT_TABLES]
    parsed = P._parse_db(paths)
    _no_parsing(monkeypatch)
    cached = P.load_db(())
    _assert_same(cached, parsed)
    _assert_same(first, parsed)
    # independent ground truth: runtimes straight from the published table
    with open(FP_RATE, newline="") as fh:
        rows = [r for _, r in zip(range(3), csv.DictReader(fh))]
    t = cached.times()
    for r in rows:
        sid = r["file"].removesuffix(".csv")
        assert t.loc[sid, "519.lbm_r"] == float(r["t_519.lbm_r"])
        assert cached.systems.set_index("system").loc[sid, "model_name"] == r["model_name"]


def test_user_table_is_cached_and_a_touched_table_rebuilds_it(cache_home, tmp_path, monkeypatch):
    monkeypatch.setattr(dbcache, "MIN_BYTES", 0)
    real = P._parse_db
    src = _tidy(tmp_path / "mine.csv", 20)
    assert P.load_db([src]).time("sys00004", "b2") == 5 * 3
    _no_parsing(monkeypatch)
    assert P.load_db([src]).time("sys00004", "b2") == 5 * 3      # from the cache
    monkeypatch.setattr(P, "_parse_db", real)
    # same size, one value changed, the mtime one second later: the cache is stale
    st = src.stat()
    text = src.read_bytes()
    assert text.count(b"sys00004,b2,15.0,") == 1
    src.write_bytes(text.replace(b"sys00004,b2,15.0,", b"sys00004,b2,16.0,"))
    assert src.stat().st_size == st.st_size
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert P.load_db([src]).time("sys00004", "b2") == 16.0
    _no_parsing(monkeypatch)
    assert P.load_db([src]).time("sys00004", "b2") == 16.0       # and the rebuilt cache is used


@pytest.mark.parametrize("which", ["results", "systems"])
@pytest.mark.parametrize("damage", [b"", b"not parquet at all", b"PAR1" + b"\0" * 64])
def test_corrupt_cache_file_is_parsed_around_and_rebuilt(cache_home, tmp_path, monkeypatch, which, damage):
    monkeypatch.setattr(dbcache, "MIN_BYTES", 0)
    src = _tidy(tmp_path / "mine.csv", 12)
    want = P._parse_db([src])
    P.load_db([src])
    (bad,) = cache_home.glob(f"*.{which}.parquet")
    bad.write_bytes(damage)
    _assert_same(P.load_db([src]), want)
    _no_parsing(monkeypatch)
    _assert_same(P.load_db([src]), want)                         # rebuilt: read without parsing


def test_cache_of_another_build_is_not_used(cache_home, tmp_path, monkeypatch):
    """The pair must carry the same key as the sources: a results file left by another build (here:
    another key) is ignored."""
    monkeypatch.setattr(dbcache, "MIN_BYTES", 0)
    src = _tidy(tmp_path / "mine.csv", 12)
    P.load_db([src])
    monkeypatch.setattr(dbcache, "VERSION", "other")
    calls = []
    real = P._parse_db
    monkeypatch.setattr(P, "_parse_db", lambda paths: calls.append(1) or real(paths))
    assert P.load_db([src]).time("sys00003", "b1") == 4 * 2
    assert calls == [1]


def test_unwritable_cache_directory_still_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(dbcache, "MIN_BYTES", 0)
    monkeypatch.delenv("PERFCAST_CACHE", raising=False)
    blocker = tmp_path / "xdg"
    blocker.write_text("a file where the cache directory would be\n")   # mkdir fails, even as root
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    src = _tidy(tmp_path / "mine.csv", 12)
    _assert_same(P.load_db([src]), P._parse_db([src]))
    assert blocker.read_text().startswith("a file")


def test_cli_systems_with_an_unwritable_cache_and_a_missing_vendor(tmp_path):
    """Through the command line, with a table large enough to be cached: the answer is the table's,
    with no traceback; one system has no vendor (a missing value matches nothing)."""
    src = _tidy(tmp_path / "big.csv", 4000)
    assert src.stat().st_size >= dbcache.MIN_BYTES
    blocker = tmp_path / "xdg"
    blocker.write_text("")
    env = dict(os.environ, XDG_CACHE_HOME=str(blocker))
    env.pop("PERFCAST_CACHE", None)
    for query, want in (("sys00002", ["sys00002"]), ("V1 sys0000", [f"sys0000{i}" for i in (4, 7)])):
        r = subprocess.run([sys.executable, "-m", "perfcast", "systems", query, "--db", str(src), "--json"],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert [s["system"] for s in cli_items(r.stdout, "systems")] == want


def test_missing_name_field_does_not_break_the_search(tmp_path):
    from perfcast.projection.database import load_user_csv

    db = load_user_csv(_tidy(tmp_path / "mine.csv", 4))
    assert db.systems["vendor"].isna().sum() == 1
    assert list(db.find("sys0000").system) == [f"sys0000{i}" for i in range(4)]
    assert list(db.find("V1").system) == []                      # sys00001's vendor is blank
    assert list(db.find("V2").system) == ["sys00002"]


def test_cache_directory_rules(tmp_path, monkeypatch):
    # one rule for every cache perfcast keeps: the benchmark tables and the compiled PMPI library
    from perfcast.collect import pmpi

    def dirs():
        return dbcache.cache_dir(), pmpi.cache_dir()

    monkeypatch.delenv("PERFCAST_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = tmp_path / "home" / ".cache" / "perfcast"
    assert dirs() == (home / "benchdb", home / "pmpi")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert dirs() == (home / "benchdb", home / "pmpi")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert dirs() == (tmp_path / "x" / "perfcast" / "benchdb", tmp_path / "x" / "perfcast" / "pmpi")
    monkeypatch.setenv("PERFCAST_CACHE", str(tmp_path / "pc"))
    assert dirs() == (tmp_path / "pc" / "benchdb", tmp_path / "pc" / "pmpi")


def test_small_tables_are_not_cached(cache_home, tmp_path):
    src = _tidy(tmp_path / "mine.csv", 3)
    assert src.stat().st_size < dbcache.MIN_BYTES
    assert P.load_db([src]).time("sys00002", "b3") == 3 * 4
    assert not cache_home.exists()


def test_missing_table_is_still_a_located_error(cache_home, tmp_path):
    from perfcast.errors import PerfcastError

    with pytest.raises(PerfcastError) as e:
        P.load_db([tmp_path / "nope.csv"])
    assert "no such file" in str(e.value) and "nope.csv" in str(e.value)
    assert not cache_home.exists()


def test_writing_a_new_pair_removes_only_stale_entries_of_the_same_database(cache_home, tmp_path, monkeypatch):
    """A rebuild (here: another loader version) removes the same database's older pair, its files of
    the old unkeyed naming and temporary files of interrupted writes older than STALE_TMP_SECONDS; it
    keeps the new pair, a newer file of another key (a concurrent run of another build), a temporary
    file that may be a write under way, and every other database's files."""
    monkeypatch.setattr(dbcache, "MIN_BYTES", 0)
    src = _tidy(tmp_path / "mine.csv", 12)
    other = _tidy(tmp_path / "other.csv", 5)
    P.load_db([src])
    P.load_db([other])
    old_pair = sorted(cache_home.iterdir())
    assert len(old_pair) == 4
    stem = dbcache._key([src])[0]
    hour_ago = os.stat(src).st_mtime - 2 * dbcache.STALE_TMP_SECONDS
    made = {}
    for name, fname in (("unkeyed", f"{stem}.systems.parquet"), ("old_tmp", f"{stem}-x.results.parquet.abc.tmp"),
                      ("new_tmp", f"{stem}-y.systems.parquet.def.tmp"), ("newer", f"{stem}-ffff.systems.parquet")):
        made[name] = cache_home / fname
        made[name].write_bytes(b"x")
    for p in old_pair + [made["unkeyed"], made["old_tmp"]]:
        os.utime(p, (hour_ago, hour_ago))
    future = os.stat(src).st_mtime + 3 * dbcache.STALE_TMP_SECONDS
    os.utime(made["newer"], (future, future))

    monkeypatch.setattr(dbcache, "VERSION", "next")
    assert P.load_db([src]).time("sys00003", "b1") == 8.0
    left = set(cache_home.iterdir())
    new_pair = set(dbcache._paths(cache_home, stem, dbcache._key([src])[1]))
    other_pair = {p for p in old_pair if p.name.startswith(dbcache._key([other])[0])}
    assert len(new_pair) == 2 and len(other_pair) == 2
    assert left == new_pair | other_pair | {made["new_tmp"], made["newer"]}
    _no_parsing(monkeypatch)
    assert P.load_db([src]).time("sys00003", "b1") == 8.0              # the new pair is the cache

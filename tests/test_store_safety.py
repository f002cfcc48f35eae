"""The store under hostile use: concurrent writers, writers killed at any moment, umask, renameat2.

Ground truth is the intact input (the tidy CSV read by the tidy reader) -- never the store's own
earlier output; processes are synchronised on the kernel's lock table and on files, not on sleeps.
"""

import errno
import fcntl
import json
import os
import platform
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfcast import PerfcastError, store
from perfcast.io import load

from test_experiment import small

HERE = Path(__file__).resolve().parent
A = "p,callpath,metric,value,unit\n2,main,time,1.0,s\n4,main,time,2.0,s\n"
B = "p,callpath,metric,value,unit\n2,main,time,5.0,s\n4,main,time,7.0,s\n8,main,time,9.0,s\n"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 and /proc/locks are Linux")


@pytest.fixture
def csvs(tmp_path):
    (tmp_path / "a.csv").write_text(A)
    (tmp_path / "b.csv").write_text(B)
    return tmp_path / "a.csv", tmp_path / "b.csv"


def beside(dest: Path) -> list[str]:
    """Everything a writer may leave beside ``dest``: temporaries and the lock file."""
    return sorted(n for n in os.listdir(dest.parent) if n.startswith(f".{dest.name}."))


def perfcast(*args):
    return subprocess.Popen([sys.executable, "-m", "perfcast", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def flock_waiters(inode: int) -> set[int]:
    """Pids blocked in flock on the file with this inode, from the kernel's lock table."""
    pids = set()
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if "->" in f and "FLOCK" in f:
            i = f.index("->")  # "N: -> FLOCK ADVISORY WRITE pid maj:min:inode start end"
            if int(f[i + 5].rsplit(":", 1)[1]) == inode:
                pids.add(int(f[i + 4]))
    return pids


# --- two writers, one destination -------------------------------------------------------------

@linux
def test_concurrent_imports_one_wins_the_other_is_told_it_exists(tmp_path, csvs):
    """Both imports pass the command's early 'exists?' check, then queue on the destination's
    lock (held here until the kernel shows both waiting): exactly one writes, the other exits 2."""
    dest = tmp_path / "same.perfcast"
    lock = tmp_path / ".same.perfcast.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    procs = [perfcast("import", c, "-o", dest) for c in csvs]
    try:
        deadline = time.monotonic() + 300
        while flock_waiters(os.fstat(fd).st_ino) != {p.pid for p in procs}:
            dead = [p for p in procs if p.poll() is not None]
            assert not dead, dead[0].communicate()
            assert time.monotonic() < deadline, "the imports never queued on the lock"
            time.sleep(0.02)
    finally:
        os.close(fd)  # release; the winner removes the lock file when it is done
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], outs
    win, lose = codes.index(0), codes.index(2)
    err = outs[lose][1].strip()
    assert len(err.splitlines()) == 1 and "exists" in err and "same.perfcast" in err
    assert "wrote" in outs[win][0] and "wrote" not in outs[lose][0]
    assert store.read(dest).equals(load([csvs[win]]))  # the winner's input, whole
    assert beside(dest) == []


def test_concurrent_imports_unsynchronised(tmp_path, csvs):
    """The hostile user's plain version: start both, whatever the interleaving, one result."""
    dest = tmp_path / "same.perfcast"
    procs = [perfcast("import", c, "-o", dest) for c in csvs]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], outs
    err = outs[codes.index(2)][1].strip()
    assert len(err.splitlines()) == 1 and "exists" in err
    assert store.read(dest).equals(load([csvs[codes.index(0)]]))
    assert beside(dest) == []


def test_overwrite_false_is_checked_by_the_store(tmp_path):
    dest = tmp_path / "x.perfcast"
    store.write(small(), dest, overwrite=False)
    with pytest.raises(PerfcastError, match="exists"):
        store.write(small(reps=3), dest, overwrite=False)
    assert store.read(dest).equals(small())
    assert beside(dest) == []


# --- writers killed at any moment -------------------------------------------------------------

def kill_run(tmp_path, csvs, mode, count, seed=0):
    dest = tmp_path / "k" / "x.perfcast"
    dest.parent.mkdir()
    r = subprocess.run([sys.executable, str(HERE / "store_killer.py"), dest, *csvs, mode, str(count), str(seed)],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    return dest, recs[0] if "lines" in recs[0] else None, [x for x in recs if "k" in x]


def assert_survived(dest, recs, always_there):
    for r in recs:
        assert r["killed"], r  # the kill landed inside the write
        assert r["which"] in ("A", "B"), r  # the old or the new store, complete
        if always_there:
            assert r["existed"], r  # no moment without a store at the destination
        assert r["clean_write"] == 0 and r["after_write"] == [] and r["after_write_is"] == "A", r
    assert os.listdir(dest.parent) == ["x.perfcast"]


@linux
def test_kill_at_many_steps_of_an_exchange_replace(tmp_path, csvs):
    dest, head, recs = kill_run(tmp_path, csvs, "lines", 16)
    assert len(recs) == head["points"] > 16
    assert_survived(dest, recs, always_there=True)
    # the kill points straddle the exchange: some left the old store, some the new
    assert {r["which"] for r in recs} == {"A", "B"}
    assert any(r["after_kill"] for r in recs)  # killed writers did leave temporaries to clean


def test_kill_at_many_steps_of_a_fallback_replace(tmp_path, csvs):
    dest, head, recs = kill_run(tmp_path, csvs, "lines-fallback", 16)
    assert len(recs) == head["points"] > 16
    assert_survived(dest, recs, always_there=False)
    assert {r["which"] for r in recs} == {"A", "B"}
    # the window between the two renames was hit, and the reader put the old store back
    gap = [r for r in recs if not r["existed"]]
    assert gap and all(r["which"] == "A" for r in gap)


def test_sigkill_at_random_moments_of_a_replacing_loop(tmp_path, csvs):
    dest, _, recs = kill_run(tmp_path, csvs, "random", 20, seed=18)
    assert len(recs) == 20
    assert_survived(dest, recs, always_there=sys.platform.startswith("linux"))


# --- the pieces -------------------------------------------------------------------------------

def test_fallback_leftover_is_restored_by_read_and_by_write(tmp_path):
    """A writer killed between 'old aside' and 'new in' leaves no NAME, only .NAME.*.old/x."""
    dest = tmp_path / "x.perfcast"
    store.write(small(), dest)
    aside = tmp_path / ".x.perfcast.0123abcd.old"
    aside.mkdir()
    os.rename(dest, aside / "x")
    (tmp_path / ".x.perfcast.4567cdef.tmp").mkdir()  # the new store, never moved in
    load([dest])  # the CLI's reader restores it ...
    assert dest.is_dir() and store.read(dest).equals(small())  # ... whole

    os.rename(dest, aside / "x")
    assert store.read(dest).equals(small())  # so does store.read

    os.rename(dest, aside / "x")
    with pytest.raises(PerfcastError, match="exists"):  # the write restores it first, then refuses
        store.write(small(reps=3), dest, overwrite=False)
    assert store.read(dest).equals(small())
    assert beside(dest) == []


def test_stale_temporaries_of_this_destination_only_are_removed(tmp_path):
    dest = tmp_path / "x.perfcast"
    stale = [".x.perfcast.deadbeef.tmp", ".x.perfcast.abc_1234.old", ".x.perfcast.0badf00d.old"]
    for n in stale:
        (tmp_path / n).mkdir()
        (tmp_path / n / "junk").write_text("j")
    store.write(small(), dest)  # .old/x absent: nothing to restore, only litter
    other = tmp_path / ".x.perfcast.more.deadbeef.tmp"  # a temporary of x.perfcast.more
    other.mkdir()
    store.write(small(reps=3), dest)
    assert beside(dest) == [other.name]
    assert store.read(dest).equals(small(reps=3))


def test_fallback_replace_without_renameat2(tmp_path, monkeypatch):
    def unsupported(a, b, **kw):
        raise OSError(errno.EINVAL, "not here")

    monkeypatch.setattr(store, "exchange", unsupported)
    dest = tmp_path / "x.perfcast"
    store.write(small(), dest)
    store.write(small(reps=3), dest)
    assert store.read(dest).equals(small(reps=3))
    assert os.listdir(tmp_path) == ["x.perfcast"]


@pytest.mark.parametrize("mask, dmode, fmode", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640),
                                                (0o002, 0o775, 0o664)])
def test_store_modes_follow_the_umask(tmp_path, mask, dmode, fmode):
    dest = tmp_path / "x.perfcast"
    old = os.umask(mask)
    try:
        store.write(small(), dest)
        store.write(small(reps=3), dest)  # a replacement too
    finally:
        os.umask(old)
    assert stat.S_IMODE(dest.stat().st_mode) == dmode
    files = sorted(dest.iterdir())
    assert [f.name for f in files] == ["callpaths.parquet", "experiment.json", "values.parquet"]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {fmode}


@linux
@pytest.mark.parametrize("use_syscall", [False, True], ids=["libc", "syscall"])
def test_renameat2_exchange_swaps_two_directories(tmp_path, use_syscall):
    if use_syscall and platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"):
        pytest.skip(f"no renameat2 syscall number known for {platform.machine()}")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("A")
    (b / "g").write_text("B")
    ino_a, ino_b = a.stat().st_ino, b.stat().st_ino
    try:
        store.exchange(a, b, use_syscall=use_syscall)
    except OSError as e:
        if e.errno in store.UNSUPPORTED:
            pytest.skip(f"this filesystem cannot exchange ({e})")
        raise
    assert (a.stat().st_ino, b.stat().st_ino) == (ino_b, ino_a)
    assert os.listdir(a) == ["g"] and (a / "g").read_text() == "B"
    assert os.listdir(b) == ["f"] and (b / "f").read_text() == "A"
    with pytest.raises(FileNotFoundError):  # both sides must exist: nothing moved
        store.exchange(a, tmp_path / "missing", use_syscall=use_syscall)
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]

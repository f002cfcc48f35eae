"""Every perfcast writer that renames a temporary into place names it ``.NAME.HOST.PID-START.XXXXXXXX.tmp``
and removes the ones a killed writer left (perfcast.output's rule, one helper): the PMPI library build,
the data wheel, the benchmark-table cache, a campaign's records and a streamed fit's working directory.
The names are made here by hand from the documented form (host: its first label, letters, digits and
'-', at most 24 characters, '-', 6 hex digits of the SHA-1 of the whole host name); a dead writer is
a process that ran and was reaped here, a live one this test's own process (with its start time from
/proc/self/stat)."""

import hashlib
import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import DATA

from test_pipeline import _law_file


def _host() -> str:
    name = socket.gethostname() or "localhost"
    label = re.sub(r"[^A-Za-z0-9-]", "-", name.split(".")[0])[:24]
    return f"{label}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _own_start() -> int:
    text = Path("/proc/self/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[19])


def _plant(target: Path, directory: bool = False) -> tuple[Path, Path]:
    """A dead writer's and a live writer's temporary of ``target`` beside it: (dead, live)."""
    dead = target.parent / f".{target.name}.{_host()}.{_dead_pid()}-12345.dead0000.tmp"
    live = target.parent / f".{target.name}.{_host()}.{os.getpid()}-{_own_start()}.live0000.tmp"
    for t in (dead, live):
        if directory:
            t.mkdir()
            (t / "piece.parquet").write_bytes(b"x" * 1000)
        else:
            t.write_bytes(b"x" * 1000)
    return dead, live


def _campaign_record(tmp_path):
    from perfcast.collect.launchers import _atomic_write

    target = tmp_path / "pending.json"
    return target, lambda: _atomic_write(target, json.dumps(["r1"]))


def _bench_cache(tmp_path):
    from perfcast.projection.dbcache import _write

    target = tmp_path / "spec.key.results.parquet"
    return target, lambda: _write(pd.DataFrame({"a": [1.0, 2.0]}), target, "key", "source")


def _wheel(tmp_path):
    from perfcast.datapkg import build_wheel

    out = tmp_path / "dist"
    target = Path(build_wheel(out, DATA)["wheel"])   # its name (the version) from a first build
    return target, lambda: build_wheel(out, DATA)


def _pmpi_library(tmp_path, monkeypatch):
    from perfcast.collect import pmpi

    monkeypatch.setenv("PERFCAST_CACHE", str(tmp_path / "cache"))
    target = pmpi.build_shim()                        # where the library goes (cache key: mpicc, source)
    return target, lambda: pmpi.build_shim(force=True)


def _streamed_fit(tmp_path):
    from perfcast import pipeline
    from perfcast.fit import FitOptions

    src = _law_file(tmp_path / "exact.txt", {"k0": lambda p: 3 + 2 * p, "k1": lambda p: 50.0})
    target = tmp_path / "models.parquet"
    return target, lambda: pipeline.model_table(src, target, force=True, options=FitOptions(workers=1))


@pytest.mark.parametrize("writer", ["campaign record", "bench cache", "wheel", "pmpi library", "streamed fit"])
def test_a_killed_writers_temporary_goes_with_the_next_write_and_a_live_ones_stays(tmp_path, monkeypatch, writer):
    """Before, each writer had its own naming (``.libperfcast_pmpi.so.XXXX.tmp``,
    ``.perfcast_data-XXXX.whl.tmp``, ``NAME.XXXX.tmp``, ``.NAME.PID.tmp``, ``.perfcast-stream-XXXX``)
    and a SIGKILLed writer's temporary stayed for good (the cache's after an hour)."""
    if writer == "pmpi library":
        target, run = _pmpi_library(tmp_path, monkeypatch)
    else:
        target, run = {"campaign record": _campaign_record, "bench cache": _bench_cache, "wheel": _wheel,
                       "streamed fit": _streamed_fit}[writer](tmp_path)
    dead, live = _plant(target, directory=writer == "streamed fit")
    run()
    assert target.exists()
    assert not os.path.lexists(dead)
    assert live.exists() and (live.is_dir() if writer == "streamed fit" else live.read_bytes() == b"x" * 1000)
    # nothing else of the writer's is left beside the target
    left = sorted(p.name for p in target.parent.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))
    assert left == [live.name]


_KILLED_WHEEL = """
import os, signal, sys
from pathlib import Path
import perfcast.projection.project as project
from perfcast.datapkg import build_wheel
project._parse_db = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)   # killed outright while parsing
build_wheel(Path(sys.argv[1]), Path(sys.argv[2]))
"""

_KILLED_PROBE = """
from perfcast.collect.collectors import _probe_record
_probe_record("cpu-clock")
"""


def _run_killed(code: str, tmp_path: Path, *args, path: str | None = None) -> Path:
    """Run ``code`` in a Python process with its own system temporary directory (TMPDIR), which it
    is expected to die in by SIGKILL; returns that directory."""
    import sys

    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(system_tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    if path is not None:
        env["PATH"] = path
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    return system_tmp


def test_a_wheel_build_killed_while_parsing_leaves_nothing_in_the_system_temp(tmp_path):
    """The wheel's build laid the tables out to parse them in a tempfile.TemporaryDirectory() in the
    system's /tmp: a build killed outright left it there for good.  It is now a temporary of the
    output directory by the one rule, which the next build removes."""
    out = tmp_path / "dist"
    system_tmp = _run_killed(_KILLED_WHEEL, tmp_path, out, DATA)
    assert os.listdir(system_tmp) == []
    left = [p for p in out.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].is_dir()
    from perfcast.datapkg import build_wheel

    wheel = Path(build_wheel(out, DATA)["wheel"])
    assert sorted(p.name for p in out.iterdir()) == [wheel.name]


def test_a_perf_probe_killed_outright_leaves_nothing_in_the_system_temp(tmp_path):
    """collectors._probe_record ran perf record into a tempfile.TemporaryDirectory() of the system's
    /tmp: killed outright (here a `perf` that SIGKILLs its caller), the directory stayed.  The probe's
    samples go to a pipe now: no scratch file at all."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "perf"
    fake.write_text("#!/bin/sh\nkill -9 $PPID\n")
    fake.chmod(0o755)
    system_tmp = _run_killed(_KILLED_PROBE, tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert os.listdir(system_tmp) == []


def test_the_perf_probe_still_tells_a_usable_event_from_an_unknown_one():
    """The probe without a file: perf record of `true` with the software event cpu-clock works on any
    Linux perf allows (this machine: perf_event_paranoid 2, user-space events), an unknown event does not."""
    from perfcast.collect.collectors import _probe_record

    assert _probe_record("cpu-clock") == (True, "")
    ok, why = _probe_record("no-such-event-xyz")
    assert not ok and "no-such-event-xyz" in why

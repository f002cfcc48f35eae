"""Issue 18 (outputs, exit codes, terminal): names from profiles reach the terminal escaped, never
as control sequences, emoji or markup (JSON keeps them exact); outputs are replaced only with
--force and never when they are not regular files; OS errors are one located line, exit 2; an
overlong formula is refused, not a crash."""

import errno
import os
import stat
from pathlib import Path

import pytest

from perfcast.errors import PerfcastError
from perfcast.output import check_file_output, write_file
from perfcast.text import safe_text
from conftest import cli, cli_items, one_error

# callpath leaves as an application could name them: clear screen, a title-setting OSC, a bidi
# override, NUL, an emoji code and rich markup
# (a NUL byte makes a CSV "not a text file": the readers refuse it, the sanitiser test covers NUL)
HOSTILE = ["\x1b[2Jclear", "osc\x1b]0;pwned\x07", "rtl\u202egnp.exe", ":thumbs_up:", "[bold]x[/bold]"]
SHOWN = ["\\x1b[2Jclear", "osc\\x1b]0;pwned\\x07", "rtl\\u202egnp.exe", ":thumbs_up:", "[bold]x[/bold]"]
RAW = ["\x1b", "\x07", "\u202e", "\x00", "\U0001f44d"]  # none of these may reach stdout


@pytest.fixture
def hostile_csv(tmp_path):
    lines = ["p,callpath,metric,value"]
    for p in (1, 2, 4):
        lines.append(f"{p},main,time,{p}")
        lines += [f"{p},main->{leaf},time,{i + 1}" for i, leaf in enumerate(HOSTILE)]
    path = tmp_path / "hostile.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def plain_csv(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("p,callpath,metric,value\n" + "".join(f"{p},main,t,{10 * p}\n" for p in (1, 2, 4, 8)))
    return path


# -- the sanitiser ------------------------------------------------------------------------------------
def test_safe_text_escapes_controls_bidi_and_keeps_the_rest():
    assert safe_text("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert safe_text("\x00\x7f\x85\x9b") == "\\x00\\x7f\\x85\\x9b"  # NUL, DEL, C1 (NEL, CSI)
    for cp in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]:
        assert safe_text(f"x{chr(cp)}y") == f"x\\u{cp:04x}y"
    assert safe_text("a\tb\nc") == "a\\tb\\nc"
    assert safe_text("a\tb\nc", multiline=True) == "a\tb\nc"
    assert safe_text("a\u2028b") == "a\\u2028b"  # a line separator does not split a table row
    assert safe_text("bad\udcff.csv") == "bad\\udcff.csv"  # undecodable byte of a file name
    for fine in ("main->solve", "Größe µs 時間", ":thumbs_up: [bold]", "👍", ""):
        assert safe_text(fine) == fine


# -- names on the terminal ----------------------------------------------------------------------------
def test_show_prints_hostile_callpaths_escaped(capsys, hostile_csv):
    code, out, err = cli(capsys, "show", hostile_csv)
    assert code == 0, err
    for raw in RAW:
        assert raw not in out, repr(raw)
    for shown in SHOWN:
        assert shown in out, shown  # emoji codes and markup literally, control characters escaped


def test_show_json_keeps_the_exact_names(capsys, hostile_csv):
    code, out, err = cli(capsys, "show", hostile_csv, "--json")
    assert code == 0, err
    names = {c["name"] for c in cli_items(out, "experiment")[0]["callpaths"]}
    assert names == {"main", *HOSTILE}


def test_tables_and_views_escape_names(capsys, tmp_path):
    lines = ["p,callpath,metric,value"]
    for p in (1, 2, 4, 8):
        lines += [f"{p},main,t\x1b]0;x\x07ime,{p}", f"{p},main->[red]k\u202eern,t\x1b]0;x\x07ime,{p * p}"]
    f = tmp_path / "m.csv"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # the views need a scope: a stored copy with the metric declared exclusive
    from perfcast import store
    from perfcast.io import load

    e = load([f])
    scoped = tmp_path / "m.perfcast"
    store.write(e.replace(metrics={n: m.__class__(m.name, m.unit, "time", "exclusive")
                                   for n, m in e.metrics.items()}), scoped)
    for cmd in (["model", f], ["metrics", f], ["view", scoped, "--at", "p=8", "--mode", "flat"],
                ["view", scoped, "--at", "p=8", "--mode", "bottom-up"], ["view", scoped, "--at", "p=8"]):
        code, out, err = cli(capsys, *cmd)
        assert code == 0, (cmd, err)
        for raw in RAW:
            assert raw not in out and raw not in err, (cmd, repr(raw))
        assert "t\\x1b]0;x\\x07ime" in out, cmd
    code, out, err = cli(capsys, "model", f)
    assert "[red]k\\u202eern" in out


def test_error_lines_escape_names(capsys, tmp_path):
    line = one_error(*cli(capsys, "show", tmp_path / "no\x1b[2Jsuch.csv")[::2])
    assert "\x1b" not in line and "no\\x1b[2Jsuch.csv" in line


def test_console_safety_net(capsys):
    """Even text printed without the sanitiser (a future call site) reaches stdout escaped."""
    from perfcast.report.terminal import out

    out.print("raw \x1b[2J \u202e :thumbs_up:", markup=False)
    out.print("[bold]styled[/bold] \x1b]0;t\x07")
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    # (rich itself drops BEL, BS, VT, FF and CR from text)
    assert "raw \\x1b[2J \\u202e :thumbs_up:" in text and "styled \\x1b]0;t" in text


# -- outputs: --force, never a FIFO/device/directory, atomic -----------------------------------------
def test_report_onto_a_fifo_is_refused_even_with_force(capsys, plain_csv, tmp_path):
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    for force in ([], ["--force"]):
        line = one_error(*cli(capsys, "report", plain_csv, "-o", fifo, *force)[::2])
        assert str(fifo) in line and "FIFO" in line
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.html", "plain.csv"]  # no temp file left


def test_report_onto_a_directory_is_refused(capsys, plain_csv, tmp_path):
    d = tmp_path / "dir.html"
    d.mkdir()
    line = one_error(*cli(capsys, "report", plain_csv, "-o", d, "--force")[::2])
    assert str(d) in line and "directory" in line and d.is_dir()


def test_devices_are_never_outputs():
    # checked without writing: a regression must not replace /dev/null on the test machine
    for force in (False, True):
        with pytest.raises(PerfcastError, match="a device") as e:
            check_file_output("/dev/null", force)
        assert e.value.path == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_report_replaces_an_existing_file_only_with_force(capsys, plain_csv, tmp_path):
    out = tmp_path / "r.html"
    out.write_text("precious")
    line = one_error(*cli(capsys, "report", plain_csv, "-o", out)[::2])
    assert str(out) in line and "exists; use --force to replace it" in line
    assert out.read_text() == "precious"
    code, _, err = cli(capsys, "report", plain_csv, "-o", out, "--force")
    assert code == 0, err
    assert out.read_text().lstrip().lower().startswith("<!doctype html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.csv", "r.html"]


def test_machine_write_needs_force_to_replace(capsys, tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("mine\n")
    line = one_error(*cli(capsys, "machine", "--write", m)[::2])
    assert str(m) in line and "--force" in line and m.read_text() == "mine\n"
    code, _, err = cli(capsys, "machine", "--write", m, "--force")
    assert code == 0, err
    assert "frequency_hz" in m.read_text()


def test_store_outputs_follow_the_same_force_rule(capsys, plain_csv, tmp_path):
    s = tmp_path / "x.perfcast"
    assert cli(capsys, "import", plain_csv, "-o", s)[0] == 0
    for cmd in (["import", plain_csv, "-o", s], ["metrics", s, "--derive", "y = 2 * t", "-o", s]):
        line = one_error(*cli(capsys, *cmd)[::2])
        assert str(s) in line and "exists; use --force to replace it" in line
    fifo = tmp_path / "pipe.perfcast"
    os.mkfifo(fifo)
    line = one_error(*cli(capsys, "import", plain_csv, "-o", fifo, "--force")[::2])
    assert str(fifo) in line and "FIFO" in line and stat.S_ISFIFO(os.lstat(fifo).st_mode)


# -- OS errors: exit 2, one line naming the path ------------------------------------------------------
@pytest.mark.parametrize("code,name", [(errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS"), (errno.EACCES, "EACCES")])
def test_write_errors_name_the_output_and_leave_the_old_file(monkeypatch, tmp_path, code, name):
    """The disk filling up (or a read-only/forbidden target) while the report is written: one error
    naming the output, the previous file intact, no temporary file left.  (Root ignores directory
    permissions, so the failure is injected where the OS would raise it.)"""
    import perfcast.output as po

    out = tmp_path / "r.html"
    out.write_text("old")

    def fail(*a):
        raise OSError(code, os.strerror(code))  # as from write(2)/fsync(2): no file name attached

    monkeypatch.setattr(po.os, "fsync", fail)
    with pytest.raises(PerfcastError) as e:
        write_file(out, "new", force=True)
    assert e.value.path == str(out) and name in e.value.message and os.strerror(code) in e.value.message
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.html"]


@pytest.mark.parametrize("code,name", [(errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS"), (errno.EACCES, "EACCES")])
def test_os_errors_anywhere_are_exit_2_naming_the_path(monkeypatch, capsys, plain_csv, tmp_path, code, name):
    import perfcast.store as st

    target = tmp_path / "x.perfcast"

    def fail(exp, dest, **kw):
        raise OSError(code, os.strerror(code), str(dest))

    monkeypatch.setattr(st, "write", fail)
    line = one_error(*cli(capsys, "import", plain_csv, "-o", target)[::2])
    assert str(target) in line and os.strerror(code) in line and name in line


def test_unwritable_location_is_exit_2(capsys, plain_csv):
    """/proc takes no new files, whoever asks: a real OS refusal, not an injected one."""
    target = "/proc/perfcast-test-report.html"
    line = one_error(*cli(capsys, "report", plain_csv, "-o", target)[::2])
    assert target in line


# -- formulas: too deep is refused, not a RecursionError ----------------------------------------------
def test_long_flat_sum_is_refused_cleanly_and_a_short_one_works(capsys, plain_csv):
    line = one_error(*cli(capsys, "metrics", plain_csv, "--derive", "X = " + " + ".join(["t"] * 2000))[::2])
    assert "too deeply nested" in line and "RecursionError" not in line
    # 100 terms (99 operators) are fine: X = 100 * t at every point (t = 10 p)
    spec = "X = " + " + ".join(["t"] * 100)
    code, out, err = cli(capsys, "metrics", plain_csv, "--derive", spec, "--json")
    assert code == 0, err
    from perfcast.analysis.derived import derive
    from perfcast.io import load

    exp, _ = derive(load([plain_csv]), [spec])
    x = exp.data[exp.data["metric"] == "X"]
    assert sorted(zip(x["p"], x["value"])) == [(p, 1000.0 * p) for p in (1, 2, 4, 8)]


def test_an_output_appearing_after_the_last_check_is_not_replaced_without_force(monkeypatch, tmp_path):
    """Two writers without --force started together both passed the existence check and the later
    os.replace silently replaced the earlier's file (200 races of two `write_file`s: 8 both
    "succeeded").  Here the other writer finishes right after this one's last check: this one is
    refused and the other's file is kept, byte for byte."""
    import perfcast.output as output

    out = tmp_path / "model.txt"
    original = output.check_file_output
    calls = []

    def check_then_other_writer_finishes(path, force):
        got = original(path, force)
        calls.append(path)
        if len(calls) == 2:          # the check just before the file is put in place
            out.write_text("the other writer's file\n")
        return got

    monkeypatch.setattr(output, "check_file_output", check_then_other_writer_finishes)
    with pytest.raises(PerfcastError, match="output exists"):
        write_file(out, "mine\n", force=False)
    assert out.read_text() == "the other writer's file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.txt"]   # no temporary left
    # with --force the later writer replaces it, as asked
    monkeypatch.setattr(output, "check_file_output", original)
    write_file(out, "mine\n", force=True)
    assert out.read_text() == "mine\n"


def test_concurrent_writers_without_force_one_wins(tmp_path):
    """Processes racing to write one new file without --force: exactly one succeeds each time, the
    file holds its text whole, the others are told the output exists."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for i in range(25):
        path = tmp_path / f"r{i}.txt"
        barrier, q = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_race_writer, args=(str(path), tag, barrier, q)) for tag in "abc"]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        results = sorted(q.get(timeout=5) for _ in procs)
        winners = [tag for status, tag in results if status == "ok"]
        assert len(winners) == 1, results
        assert [s for s, _ in results].count("exists") == 2, results
        assert path.read_text() == winners[0] * 4096
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"r{i}.txt" for i in sorted(range(25), key=str)]


def _race_writer(path, tag, barrier, q):
    barrier.wait()
    try:
        write_file(path, tag * 4096, force=False)
        q.put(("ok", tag))
    except PerfcastError as e:
        q.put(("exists" if "output exists" in str(e) else str(e), tag))


def test_a_directory_of_other_files_is_never_replaced_by_a_store(capsys, plain_csv, tmp_path):
    """`import X -o DIR --force` replaced any existing directory with the store, deleting what was
    in it (a directory of raw profiles, a thesis).  Only a perfcast experiment or an empty
    directory is replaced; the check is made before anything is read and again by the store's
    writer under its lock (the library call)."""
    from perfcast import store
    from perfcast.io import load

    d = tmp_path / "runs"
    d.mkdir()
    (d / "thesis.tex").write_text("precious\n")
    for cmd in (["import", plain_csv, "-o", d, "--force"], ["metrics", plain_csv, "--derive", "y = 2 * t", "-o", d,
                                                             "--force"]):
        line = one_error(*cli(capsys, *cmd)[::2])
        assert str(d) in line and "not a perfcast experiment" in line
    with pytest.raises(PerfcastError, match="not a perfcast experiment"):
        store.write(load([plain_csv]), d, overwrite=True)
    assert sorted(p.name for p in d.iterdir()) == ["thesis.tex"] and (d / "thesis.tex").read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []   # no temporaries left
    # an empty directory and an existing experiment are replaced with --force
    e = tmp_path / "empty"
    e.mkdir()
    assert cli(capsys, "import", plain_csv, "-o", e, "--force")[0] == 0 and store.is_store(e)
    assert cli(capsys, "import", plain_csv, "-o", e, "--force")[0] == 0 and store.is_store(e)


_SLOW_WRITER = """
import sys
from perfcast.output import atomic_file
with atomic_file(sys.argv[1], True) as f:
    f.write(sys.argv[2].encode() * (8 << 20))   # 8 MiB, then wait: killed here, or told to finish
    f.flush()
    print("ready", flush=True)
    sys.stdin.readline()
"""


def _writer(out, tag):
    """A process writing ``out`` through atomic_file, stopped mid-write (its temporary in place)."""
    import subprocess
    import sys

    import perfcast

    env = dict(os.environ, PYTHONPATH=str(Path(perfcast.__file__).parents[1]))
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out), tag], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline() == "ready\n"
    return p


def _temps(out):
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.") and p.name.endswith(".tmp"))


def _own_start_time():
    """This process's start time in clock ticks since boot: field 22 of Linux /proc/self/stat."""
    text = Path("/proc/self/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[19])


def test_a_killed_writers_temporary_is_removed_by_the_next_writer_and_a_live_ones_never(tmp_path):
    """A writer SIGKILLed mid-write left `.r.txt.XXXXXXXX.tmp` (8 MiB) beside the output for good:
    nothing could tell it from a live writer's.  Its name now carries the host and the writer's
    process id (and start time); the next write of r.txt removes it, while the temporary of a
    writer still running is left alone (and that writer finishes normally), as are another host's
    and older unnamed ones.  One with the id of a live process but another start time is a dead
    writer's whose id was reused: removed."""
    import signal
    import socket

    out = tmp_path / "r.txt"
    dead = _writer(out, "a")
    dead.send_signal(signal.SIGKILL)
    dead.wait(30)
    assert dead.returncode == -signal.SIGKILL
    [left] = _temps(out)
    assert (tmp_path / left).stat().st_size == 8 << 20
    assert f".{dead.pid}-" in left                           # the dead writer's process id ...
    assert socket.gethostname().split(".")[0][:10] in left    # ... and host, in the name

    live = _writer(out, "b")
    [live_tmp] = [t for t in _temps(out) if t != left]
    assert f".{live.pid}-" in live_tmp
    live_inode = (tmp_path / live_tmp).stat().st_ino
    host_part = left.split(".")[3]                            # .r.txt.HOST.PID-START.XXXXXXXX.tmp
    others = {   # name -> kept?
        left.replace(host_part, "otherhost-000000"): True,                       # another host's
        f".{out.name}.abcd1234.tmp": True,                                          # older perfcast's
        f".{out.name}.{host_part}.{os.getpid()}-{_own_start_time() + 1}.zzzz9999.tmp": False,  # a reused id
    }
    for name in others:
        (tmp_path / name).write_bytes(b"x")

    write_file(out, "new\n", force=True)
    assert out.read_text() == "new\n"
    now = set(_temps(out))
    assert left not in now                                   # the killed writer's: removed
    assert live_tmp in now and (tmp_path / live_tmp).stat().st_ino == live_inode   # the live one's: untouched
    assert {n for n, kept in others.items() if n in now} == {n for n, kept in others.items() if kept}

    live.communicate("go\n", timeout=60)
    assert live.returncode == 0
    assert out.read_bytes() == b"b" * (8 << 20)              # the live writer finished its file
    assert set(_temps(out)) == {n for n, kept in others.items() if kept}

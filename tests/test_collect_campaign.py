"""Campaign engine: grid, interleaving, adaptive repetitions, failures, timeouts, resume."""

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfcast import store
from perfcast.collect.campaign import CampaignSpec, Journal, build_argv, campaign_dir, load_spec, run_campaign
from perfcast.errors import PerfcastError
from perfcast.io import load

REPO = Path(__file__).resolve().parents[1]


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a killed orphan may linger as a zombie until init reaps it


def journal(out: Path) -> list[dict]:
    return [json.loads(l) for l in (campaign_dir(out) / "journal.jsonl").read_text().splitlines()]


def test_grid_lands_as_stored_experiment(tmp_path):
    # the timer is a known function of the parameters: compute = p * n / 10
    app = script(tmp_path / "app.sh", 'echo "perfcast-timer compute $(($1 * $2)).0e-1"\n'
                                      'echo "perfcast-timer io 0.25"\n')
    spec = CampaignSpec(command=f"{app} {{p}} {{n}}", parameters={"p": [1, 2], "n": [3, 4]},
                        reps_min=2, reps_max=2)
    out = tmp_path / "app.perfcast"
    seen = []
    exp = run_campaign(spec, out, progress=lambda d, t, w: seen.append((d, t)))
    for e in (store.read(out), load([out])):
        assert e.parameters == ("p", "n")
        reps = e.repetitions()
        assert len(reps) == 4 and set(reps["repetitions"]) == {2}
        agg = e.aggregate("mean")
        for p in (1, 2):
            for n in (3, 4):
                row = agg[(agg.p == p) & (agg.n == n) & (agg.callpath == "app->compute")]
                assert row["value"].item() == pytest.approx(p * n / 10)
        assert set(e.data["callpath"].astype(str)) == {"app", "app->compute", "app->io"}
        assert (e.data[e.data.callpath == "app"]["value"] > 0).all()
    assert exp.equals(store.read(out))
    recs = journal(out)
    assert len(recs) == 8
    # interleaved: the first round runs every configuration once before any repeats
    assert len({r["key"] for r in recs[:4]}) == 4
    assert recs[0]["command"] == [str(app), str(int(recs[0]["config"]["p"])), str(int(recs[0]["config"]["n"]))]
    assert recs[0]["timers"]["io"] == 0.25 and recs[0]["exit_code"] == 0
    assert seen[-1] == (8, 8)


def test_repetitions_stop_by_cv(tmp_path):
    # n=1: constant runtime (CV 0) -> stops at reps_min; n=2: alternates 1,2,1,2 -> CV ~0.4 -> reps_max
    app = script(tmp_path / "app.sh",
                 'f="$0.count.$1"; c=$(cat "$f" 2>/dev/null || echo 0); echo $((c + 1)) > "$f"\n'
                 'if [ "$1" = 1 ]; then echo "perfcast-timer t 1.0"; else echo "perfcast-timer t $((c % 2 + 1))"; fi\n')
    spec = CampaignSpec(command=[str(app), "{n}"], parameters={"n": [1, 2]}, reps_min=2, reps_max=5, cv=0.05,
                        cv_metric="t")
    exp = run_campaign(spec, tmp_path / "cv.perfcast")
    reps = dict(zip(exp.repetitions()["n"], exp.repetitions()["repetitions"]))
    assert reps == {1.0: 2, 2.0: 5}
    # a loose threshold stops n=2 at reps_min too, resuming the same campaign adds nothing
    spec.cv = 1.0
    exp2 = run_campaign(spec, tmp_path / "cv.perfcast")
    assert dict(zip(exp2.repetitions()["n"], exp2.repetitions()["repetitions"])) == reps
    assert len(journal(tmp_path / "cv.perfcast")) == 7


def test_failed_and_timed_out_runs_are_recorded_and_excluded(tmp_path):
    pidfile = tmp_path / "child.pid"
    app = script(tmp_path / "app.sh",
                 'case $1 in\n'
                 '  1) echo "perfcast-timer t 0.5";;\n'
                 '  2) echo "boom: bad input" >&2; exit 3;;\n'
                 f'  3) sleep 30 & echo $! >> {pidfile}; wait;;\n'
                 'esac\n')
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3]}, reps_min=2, reps_max=2,
                        timeout=0.5, max_failures=2)
    logs = []
    exp = run_campaign(spec, tmp_path / "f.perfcast", log=logs.append)
    assert exp.points()["n"].tolist() == [1.0]
    recs = journal(tmp_path / "f.perfcast")
    by = {}
    for r in recs:
        by.setdefault(r["config"]["n"], []).append(r)
    assert [r["status"] for r in by[1.0]] == ["ok", "ok"]
    assert [r["status"] for r in by[2.0]] == ["failed", "failed"]
    assert by[2.0][0]["reason"] == "exit code 3: boom: bad input" and by[2.0][0]["exit_code"] == 3
    assert [r["status"] for r in by[3.0]] == ["timeout", "timeout"]
    assert by[3.0][0]["reason"] == "timed out after 0.5 s"
    assert all(0.5 <= r["wall"] < 30 for r in by[3.0])   # stopped at the timeout, not after the 30 s sleep
    assert len(exp.meta["campaign"]["failed"]) == 4 and len(logs) == 4
    # the timeout killed the whole process group, the background sleep included
    for pid in map(int, pidfile.read_text().split()):
        assert not alive(pid)


def test_all_runs_failing_is_an_error(tmp_path):
    # an executable file that cannot start (its interpreter is missing; a missing program is refused
    # before anything runs: test_collect_cli)
    prog = tmp_path / "bad-interpreter"
    prog.write_text("#!/nonexistent/interpreter\n")
    prog.chmod(0o755)
    spec = CampaignSpec(command=[str(prog)], parameters={"n": [1]}, reps_min=1,
                        reps_max=1, max_failures=1)
    with pytest.raises(PerfcastError, match="no run succeeded.*cannot start"):
        run_campaign(spec, tmp_path / "x.perfcast")
    assert not (tmp_path / "x.perfcast").exists()


KILL_DRIVER = """
import sys
from perfcast.collect.campaign import CampaignSpec, run_campaign
spec = CampaignSpec(command=[sys.argv[1], "{a}", "{b}"], parameters={"a": [1, 2, 3], "b": [1, 2]},
                    reps_min=3, reps_max=3)
run_campaign(spec, sys.argv[2])
"""


def test_kill_and_resume(tmp_path):
    # runs are serial: while the gate file exists, the 6th run parks itself (recording its pid) after
    # five runs were journalled, so the kill lands at a known place whatever the machine's load
    gate, parked, count = tmp_path / "gate", tmp_path / "parked", tmp_path / "count"
    gate.touch()
    app = script(tmp_path / "app.sh",
                 f'echo x >> {count}\n'
                 f'if [ -e {gate} ] && [ "$(wc -l < {count})" -gt 5 ]; then echo $$ > {parked}.tmp; '
                 f'mv {parked}.tmp {parked}; exec sleep 300; fi\n'
                 'echo "perfcast-timer t $1.$2"\n')
    out = tmp_path / "k.perfcast"
    driver = tmp_path / "driver.py"
    driver.write_text(KILL_DRIVER)
    jpath = campaign_dir(out) / "journal.jsonl"
    proc = subprocess.Popen([sys.executable, str(driver), str(app), str(out)])
    try:
        while not parked.exists():       # the driver cannot finish: it waits on the parked run
            assert proc.poll() is None, "the campaign ended before the kill"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
        if parked.exists():
            os.kill(int(parked.read_text()), signal.SIGKILL)
    gate.unlink()
    before = jpath.read_bytes()
    assert len(before.splitlines()) == 5, "killed after five journalled runs"
    assert not out.exists()
    # a torn record (the kill hit a write) must be cut off, not break the journal
    with open(jpath, "ab") as fh:
        fh.write(b'{"type":"run","id":"a9_b9.main.0","sta')
    spec = CampaignSpec(command=[str(app), "{a}", "{b}"], parameters={"a": [1, 2, 3], "b": [1, 2]},
                        reps_min=3, reps_max=3)
    exp = run_campaign(spec, out)
    after = jpath.read_bytes()
    assert after.startswith(before)          # nothing completed was lost or rewritten
    recs = [json.loads(l) for l in after.splitlines()]
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) == 18   # nothing repeated, nothing missing
    counts = {}
    for r in recs:
        assert r["status"] == "ok"
        counts[r["key"]] = counts.get(r["key"], 0) + 1
    assert sorted(counts.values()) == [3] * 6
    assert set(exp.repetitions()["repetitions"]) == {3}
    agg = exp.aggregate("mean")
    t = agg[agg.callpath == "app->t"]
    assert all(v == pytest.approx(a + b / 10) for a, b, v in zip(t.a, t.b, t.value))


def test_yaml_campaign_and_errors(tmp_path):
    app = script(tmp_path / "app.sh", 'echo "T=$1"\n')
    y = tmp_path / "c.yaml"
    y.write_text(f"command: {app} {{n}}\nparameters:\n  n: [2, 4]\nreps: 1..1\n"
                 "timer_regex: 'T=([0-9.]+)'\noutput: out.perfcast\n")
    with pytest.raises(PerfcastError, match="two groups"):
        spec, out = load_spec(y)
        run_campaign(spec, out)
    y.write_text(f"command: {app} {{n}}\nparameters:\n  n: [2, 4]\nreps: 1\n"
                 "timer_regex: '(T)=([0-9.]+)'\noutput: out.perfcast\n")
    spec, out = load_spec(y)
    assert out == str(tmp_path / "out.perfcast")
    exp = run_campaign(spec, out)
    agg = exp.aggregate("mean")
    assert agg[agg.callpath == "app->T"]["value"].tolist() == [2.0, 4.0]
    y.write_text(f"command: {app}\nparameters: {{n: [1]}}\nrepz: 3\n")
    with pytest.raises(PerfcastError) as e:
        load_spec(y)
    assert e.value.where == "repz" and e.value.path == str(y)
    with pytest.raises(PerfcastError, match=r"\{m\}"):
        CampaignSpec(command="app {m}", parameters={"n": [1]})
    with pytest.raises(PerfcastError, match="not available"):
        run_campaign(CampaignSpec(command=str(app), parameters={"n": [1]}, collect="time,counters",
                                  settings={"counters": {"events": ["no-such-event"]}}), tmp_path / "c.perfcast")
    # the same collector marked optional only warns
    logs = []
    run_campaign(CampaignSpec(command=str(app), parameters={"n": [1]}, reps_min=1, reps_max=1,
                              collect="time,counters?", settings={"counters": {"events": ["no-such-event"]}}),
                 tmp_path / "d.perfcast", log=logs.append)
    assert len(logs) == 1 and "counters" in logs[0]
    # a resumed campaign must be the same campaign
    with pytest.raises(PerfcastError, match="different campaign"):
        run_campaign(CampaignSpec(command=f"{app} x", parameters={"n": [1]}), tmp_path / "d.perfcast")


def test_wrapper_goes_before_the_program():
    spec = CampaignSpec(command="mpirun -np {p} --map-by core -x FOO=1 --mca btl self,vader ./app {n}",
                        parameters={"p": [4], "n": [8]}, oversubscribe=False)
    argv = build_argv(spec, {"p": 4.0, "n": 8.0}, "/w.sh", ["-x", "LD_PRELOAD=/s.so"])
    assert argv == ["mpirun", "-x", "LD_PRELOAD=/s.so", "-np", "4", "--map-by", "core", "-x", "FOO=1",
                    "--mca", "btl", "self,vader", "/w.sh", "./app", "8"]
    spec = CampaignSpec(command="mpiexec -n {p} {wrap} python3 app.py", parameters={"p": [2]}, oversubscribe=False)
    assert build_argv(spec, {"p": 2.0}, None, []) == ["mpiexec", "-n", "2", "python3", "app.py"]
    assert build_argv(spec, {"p": 2.0}, "/w", []) == ["mpiexec", "-n", "2", "/w", "python3", "app.py"]
    serial = CampaignSpec(command="./app {n}", parameters={"n": [0.5]})
    assert build_argv(serial, {"n": 0.5}, "/w", []) == ["/w", "./app", "0.5"]


# -- time limits, signals, output (issue 18) ----------------------------------------------------------
def test_automatic_time_limit_rule(tmp_path):
    from perfcast.collect.campaign import Campaign, parse_timeout

    spec = CampaignSpec(command="./app {n}", parameters={"n": [1, 2, 3]})
    c = Campaign(spec, tmp_path / "t.perfcast")
    assert c.time_limit({"n": 1.0}, "main")[0] == 3600  # nothing succeeded yet: the first-run limit

    def run(n, wall, status="ok", mode="main"):
        return {"type": "run", "key": f"n{n}", "mode": mode, "status": status, "wall": wall}

    c.records = [run(1, 2.0), run(1, 30.0), run(1, 4.0), run(2, 10.0), run(2, 14.0), run(2, 12.0), run(2, 500.0,
                 "timeout"), run(3, 1000.0, "failed")]
    assert c.time_limit({"n": 1.0}, "main")[0] == 60         # max(60, 10 x median(2, 4, 30) = 40)
    assert c.time_limit({"n": 2.0}, "main")[0] == 120        # 10 x median(10, 12, 14); the timeout not counted
    assert c.time_limit({"n": 3.0}, "main")[0] == 300        # no success of its own: 10 x longest success (30)
    assert c.time_limit({"n": 3.0}, "cachegrind")[0] == 300 * 50
    spec.timeout = 7.0
    assert c.time_limit({"n": 2.0}, "main")[0] == 7 and c.time_limit({"n": 2.0}, "cachegrind")[0] == 350
    spec.timeout = 0.0
    assert c.time_limit({"n": 2.0}, "main")[0] is None
    assert [parse_timeout(v) for v in ("none", "0", 0, "auto", None, "90", 2.5)] == [0, 0, 0, None, None, 90, 2.5]
    for bad in ("-1", "soon", float("nan")):
        with pytest.raises(PerfcastError, match="timeout"):
            parse_timeout(bad)


def test_hanging_runs_hit_the_automatic_limit(tmp_path, monkeypatch):
    from perfcast.collect import campaign as cp

    monkeypatch.setattr(cp, "AUTO_MIN", 0.5)   # the 60 s floor, shrunk for the test
    pidfile = tmp_path / "child.pid"
    app = script(tmp_path / "app.sh", f'if [ "$1" = 2 ]; then sleep 300 & echo $! >> {pidfile}; wait; fi\n'
                                      'echo "perfcast-timer t 1"\n')
    spec = CampaignSpec(command=[str(app), "{n}"], parameters={"n": [1, 2]}, reps_min=2, reps_max=2,
                        first_timeout=0.5, max_failures=2)
    exp = run_campaign(spec, tmp_path / "h.perfcast")
    assert exp.points()["n"].tolist() == [1.0]
    seen_ok = False
    for r in journal(tmp_path / "h.perfcast"):
        if r["config"]["n"] == 1.0:
            assert r["status"] == "ok"
            seen_ok = True
            continue
        assert r["status"] == "timeout"
        # before any success the first-run limit applies, then 10 x the longest success (floor 0.5 s)
        assert ("longest successful run so far" if seen_ok else "first-run limit") in r["reason"]
        assert "--timeout" in r["reason"]
    last = [r for r in journal(tmp_path / "h.perfcast") if r["config"]["n"] == 2.0][-1]
    assert exp.meta["campaign"]["incomplete"] == [
        {"config": {"n": 2.0}, "key": "n2", "mode": "main", "succeeded": 0, "wanted": 2, "failed": 2,
         "last_status": "timeout", "last_reason": last["reason"]}]
    for pid in map(int, pidfile.read_text().split()):
        assert not alive(pid)


SIG_APP = """#!/bin/sh
# the second run parks while the gate exists: records its pid and its child's, then sleeps
echo x >> {count}
if [ -e {gate} ] && [ "$(wc -l < {count})" -gt 1 ]; then
  sleep 300 &
  echo "$$ $!" > {pids}.tmp; mv {pids}.tmp {pids}
  wait
fi
echo "perfcast-timer t $1"
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_sigterm_and_sighup_stop_cleanly_and_resume(tmp_path, sig, code):
    gate, pids, count = tmp_path / "gate", tmp_path / "pids", tmp_path / "count"
    gate.touch()
    app = tmp_path / "app.sh"
    app.write_text(SIG_APP.format(count=count, gate=gate, pids=pids))
    app.chmod(0o755)
    out = tmp_path / "s.perfcast"
    argv = [sys.executable, "-m", "perfcast", "collect", "-o", str(out), "-P", "n=1,2,3", "--reps", "1",
            "--", str(app), "{n}"]
    # Ctrl-C's default action even where the tests run with SIGINT ignored (a background job)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while not pids.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert signal.Signals(sig).name in err.decode() and "rerun the same command to resume" in err.decode(), err
    assert len(err.decode().strip().splitlines()) == 1, err
    app_pid, child_pid = map(int, pids.read_text().split())
    # the application and its child are gone (killed as a process group, not left as orphans)
    for pid in (app_pid, child_pid):
        for _ in range(500):
            if not alive(pid):
                break
            time.sleep(0.02)
        assert not alive(pid), pid
    jpath = campaign_dir(out) / "journal.jsonl"
    before = jpath.read_bytes()
    recs = [json.loads(l) for l in before.decode().splitlines()]   # every line whole
    assert before.endswith(b"\n") and [r["status"] for r in recs] == ["ok"]
    assert not (campaign_dir(out) / "running.json").exists() and not out.exists()
    gate.unlink()
    done = subprocess.run(argv, capture_output=True)
    assert done.returncode == 0, done.stderr
    after = jpath.read_bytes()
    assert after.startswith(before)
    recs = [json.loads(l) for l in after.decode().splitlines()]
    assert sorted(r["config"]["n"] for r in recs) == [1.0, 2.0, 3.0] and {r["status"] for r in recs} == {"ok"}
    agg = store.read(out).aggregate("mean")
    assert sorted(agg[agg.callpath == "app->t"]["value"]) == [1.0, 2.0, 3.0]


BIG_DRIVER = """
import json, resource, sys
from perfcast.collect.campaign import CampaignSpec, run_campaign
small, big, out = sys.argv[1:4]
run_campaign(CampaignSpec(command=[small], parameters={"n": [1]}, reps_min=1, reps_max=1), out + ".warm.perfcast")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
exp = run_campaign(CampaignSpec(command=[big], parameters={"n": [1]}, reps_min=1, reps_max=1), out)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "after_kb": after}))
"""


def test_big_output_is_streamed_and_capped(tmp_path):
    from perfcast.collect.launchers import KEEP_END, OUTPUT_CAP

    # 500000 lines of 100 bytes (50 MB), a timer line inside what the cap drops, one at the very end
    line = b"0" * 99 + b"\n"
    early, late = b"perfcast-timer early 0.25\n", b"perfcast-timer solve 1.5\n"
    big = script(tmp_path / "big.sh", f'yes "$(printf %099d 0)" | head -n 200000\necho "{early.decode().strip()}"\n'
                                      f'yes "$(printf %099d 0)" | head -n 300000\necho "{late.decode().strip()}"\n')
    small = script(tmp_path / "small.sh", 'echo "perfcast-timer solve 1"\n')
    driver = tmp_path / "driver.py"
    driver.write_text(BIG_DRIVER)
    out = tmp_path / "big.perfcast"
    proc = subprocess.run([sys.executable, str(driver), str(small), str(big), str(out)], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    rss = json.loads(proc.stdout)
    growth_mb = (rss["after_kb"] - rss["before_kb"]) / 1024
    print(f"collect peak RSS {rss['after_kb'] / 1024:.0f} MB, growth over a tiny run {growth_mb:.1f} MB "
          f"for 50 MB of output")
    assert growth_mb < 30
    total = 500000 * len(line) + len(early) + len(late)
    agg = store.read(out).aggregate("mean")
    timers = dict(zip(agg.callpath.astype(str), agg.value))
    assert timers["app->early"] == 0.25 and timers["app->solve"] == 1.5   # the early one was in the dropped part
    (rec,) = journal(out)
    assert rec["output_dropped"] == {"stdout": total - OUTPUT_CAP, "stderr": 0}
    stored = (campaign_dir(out) / "runs" / rec["id"] / "stdout.txt").read_bytes()
    head = OUTPUT_CAP - KEEP_END
    original_head = (line * (head // len(line) + 1))[:head]
    original_end = (line * (KEEP_END // len(line) + 1) + late)[-KEEP_END:]
    assert stored[:head] == original_head and stored[-KEEP_END:] == original_end
    marker = stored[head:-KEEP_END].decode()
    assert marker.count("\n") == 2 and marker.startswith("\n[perfcast:")   # on a line of its own
    nums = [int(x) for x in re.findall(r"\d+", marker)]
    assert nums[:4] == [total - OUTPUT_CAP, head, KEEP_END, total]


def test_timer_lines_are_scanned_line_by_line(tmp_path):
    from perfcast.collect.collectors import TimerScan

    text = "x perfcast-timer a 1.5\nperfcast-timer a 0.5\nperfcast-timer b 2\nperfcast-timer b nan\n"
    anchored = TimerScan(r"^perfcast-timer (\S+) ([0-9.]+)$")    # ^/$ hold at every line
    anchored.feed(text)
    assert anchored.values == {("a", None): 0.5, ("b", None): 2.0}
    # a regex that could match across a line break does not: "T=\n3" is no timer
    loose = TimerScan(r"(T)=\s*([0-9.]+)")
    loose.feed("T=\n3\nT= 4\n")
    assert loose.values == {("T", None): 4.0}
    # a file is read in blocks of whole lines: a timer across a block boundary is still read whole
    f = tmp_path / "out.txt"
    f.write_bytes(b"y" * 1000 + b"\nperfcast-timer c 12.25\n" + b"z\n" * 10)
    scan = TimerScan()
    scan.feed_file(f, block=1010)
    assert scan.values == {("c", None): 12.25}


#: what `mpirun -np 2 lulesh2.0` (LULESH 2.0, Open MPI 4.1.4) wrote to stderr: LULESH needs a cube
#: of ranks (lulesh-init.cc: printf("Num processors must be a cube of an integer (1, 8, 27, ...)\n")
#: on stdout, then MPI_Abort)
OMPI_ABORT = """--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode -1.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
[vm:22486] 1 more process has sent help message help-mpi-api.txt / mpi-abort
[vm:22486] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages
"""


def test_a_failed_mpi_run_is_said_by_the_abort_and_the_applications_last_words(tmp_path):
    """LULESH at p = 2: the campaign's reason was Open MPI's last stderr line, 'exit code 255: [vm:22486]
    Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages' -- nothing
    of why.  Now the help aggregation lines are left out, Open MPI's help text is its first line,
    and an MPI_ABORT brings the application's last line of output with it."""
    err = tmp_path / "ompi.err"
    err.write_text(OMPI_ABORT)
    app = script(tmp_path / "app.sh",
                 'echo "Running problem size 5^3 per domain until completion"\n'
                 'echo "Num processors must be a cube of an integer (1, 8, 27, ...)"\n'
                 f'cat {err} >&2\nexit 255\n')
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [2]}, reps_min=1, reps_max=1, max_failures=1)
    with pytest.raises(PerfcastError):
        run_campaign(spec, tmp_path / "l.perfcast", log=lambda *_: None)
    [rec] = journal(tmp_path / "l.perfcast")
    assert rec["reason"] == ("exit code 255: MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD; "
                             "its last output: Num processors must be a cube of an integer (1, 8, 27, ...)")

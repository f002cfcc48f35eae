"""Campaign engine: grid, interleaving, adaptive repetitions, failures, timeouts, resume."""

import json
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
    spec = CampaignSpec(command=[str(tmp_path / "missing-program")], parameters={"n": [1]}, reps_min=1,
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

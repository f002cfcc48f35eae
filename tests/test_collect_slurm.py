"""The Slurm launcher against a real single-node Slurm (munge + slurmctld + slurmd on loopback),
started by the fixture in a temporary directory and torn down afterwards."""

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from perfcast import store
from perfcast.collect.campaign import CampaignSpec, campaign_dir, run_campaign
from conftest import require_tools

TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(pidfile: Path):
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        require_tools(*missing)
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root")
    d = Path(tmp_path_factory.mktemp("slurm"))
    d.chmod(0o755)
    for sub in ("munge", "state", "spool", "log"):
        (d / sub).mkdir()
    (d / "munge").chmod(0o700)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host = platform.node().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=perfcasttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig={d}/plugstack.conf
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    (d / "plugstack.conf").write_text("")
    old_conf = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    started = []
    try:
        steps = [
            (["munged", f"--key-file={key}", f"--socket={d}/munge/munge.sock", f"--pid-file={d}/munge/munged.pid",
              f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge/seed", "--force"], d / "munge/munged.pid"),
            (["slurmctld", "-f", str(conf)], d / "slurmctld.pid"),
            (["slurmd", "-f", str(conf)], d / "slurmd.pid"),
        ]
        for cmd, pidfile in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            if proc.returncode != 0:
                pytest.skip(f"cannot start {cmd[0]}: {(proc.stderr or proc.stdout).strip()[-200:]}")
            started.append(pidfile)
            time.sleep(0.5)
        deadline = time.time() + 30
        while time.time() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip()
            if out in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        else:
            log = (d / "log/slurmctld.log").read_text()[-300:] if (d / "log/slurmctld.log").exists() else ""
            pytest.skip(f"the test Slurm node did not come up (state {out!r}): {log}")
        yield d
    finally:
        for pidfile in reversed(started):
            _stop(pidfile)
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf


def test_slurm_job_array_campaign(slurm, tmp_path):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\necho "perfcast-timer t $1.5"\necho "job $SLURM_JOB_ID task $SLURM_ARRAY_TASK_ID"\n')
    app.chmod(0o755)
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3]}, reps_min=2, reps_max=2,
                        launcher="slurm", slurm={"poll": 0.2}, timeout=60)
    out = tmp_path / "s.perfcast"
    exp = run_campaign(spec, out)
    back = store.read(out)
    assert back.equals(exp)
    assert dict(zip(back.repetitions()["n"], back.repetitions()["repetitions"])) == {1.0: 2, 2.0: 2, 3.0: 2}
    agg = back.aggregate("mean")
    assert agg[agg.callpath == "app->t"]["value"].tolist() == [1.5, 2.5, 3.5]
    recs = [json.loads(l) for l in (campaign_dir(out) / "journal.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs)
    # each run really ran as a Slurm array task (two rounds = two job arrays)
    jobs = set()
    for r in recs:
        assert "task" in r["stdout_tail"] and r["env"].get("SLURM_ARRAY_TASK_ID") is not None
        jobs.add(r["env"]["SLURM_ARRAY_JOB_ID"])
        assert r["machine"]["hostname"] == platform.node()
    assert len(jobs) == 2
    assert not (campaign_dir(out) / "slurm" / "pending.json").exists()


def test_slurm_failures_and_timeouts(slurm, tmp_path):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\ncase $1 in 1) echo ok;; 2) exit 4;; 3) sleep 30;; esac\n')
    app.chmod(0o755)
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3]}, reps_min=1, reps_max=1,
                        launcher="slurm", slurm={"poll": 0.2}, timeout=1, max_failures=1)
    exp = run_campaign(spec, tmp_path / "f.perfcast")
    assert exp.points()["n"].tolist() == [1.0]
    status = {f["config"]["n"]: (f["status"], f["reason"]) for f in exp.meta["campaign"]["failed"]}
    assert status == {2.0: ("failed", "exit code 4"), 3.0: ("timeout", "timed out after 1 s")}


def test_slurm_adaptive_campaign(slurm, tmp_path):
    # collect --adaptive through the Slurm launcher: every run sleeps S seconds, one process each, so
    # a run costs S/3600 core-hours and the budget of 4.5 runs buys the start design (3 points, one
    # run each) and exactly 1 chosen run; each round is its own job array
    from perfcast.collect.adaptive import run_adaptive

    S = 1.0
    app = tmp_path / "app.sh"
    app.write_text(f'#!/bin/sh\nsleep {S}\necho "task $SLURM_ARRAY_TASK_ID"\n')
    app.chmod(0o755)
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3, 4, 6, 8, 12, 16, 24]}, reps_min=1,
                        reps_max=1, launcher="slurm", slurm={"poll": 0.2}, timeout=60)
    out = tmp_path / "a.perfcast"
    budget = 4.5 * S / 3600
    res = run_adaptive(spec, out, {"n": 64}, budget, until=1e-9)
    recs = [json.loads(l) for l in (campaign_dir(out) / "journal.jsonl").read_text().splitlines()]
    runs = [r for r in recs if r.get("type") == "run"]
    chosen = [r for r in recs if r.get("type") == "adaptive" and r.get("event") == "choose"]
    assert res.stop == "budget" and len(runs) == 4 and len(chosen) == 1
    assert all(r["status"] == "ok" for r in runs)
    spent = sum(r["wall"] for r in runs) / 3600
    assert res.spent == pytest.approx(spent, rel=1e-12) and spent <= budget < spent + S / 3600
    assert [r["config"] for r in runs[3:]] == [c["at"] for c in chosen]
    # every run was a Slurm array task: the probe, the rest of the start design, then the step
    jobs = [r["env"]["SLURM_ARRAY_JOB_ID"] for r in runs]
    assert all("task" in r["stdout_tail"] for r in runs)
    assert len(set(jobs)) == 3 and len(set(jobs[3:])) == 1
    assert store.read(out).equals(res.experiment)

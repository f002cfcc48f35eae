"""The memory collector: DRAM traffic from the memory controllers' uncore counters, counted with
``perf stat -a`` once per node.  This machine has no uncore PMU, so the probe, the node wrapper and
the whole campaign are checked with a fake ``perf`` and a temporary sysfs; the counts it writes
follow real ``perf stat -a -x ,`` output (perf 6.x: ``value,unit,event,run-time,percent,,``)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perfcast import store
from perfcast.cli import main
from perfcast.collect import campaign as cp
from perfcast.collect import collectors as coll
from perfcast.collect import machine
from perfcast.errors import PerfcastError
from perfcast.projection.signatures import experiment_totals, signature_from_experiment, signature_from_totals

from conftest import cli_items

READ, WRITE = coll.MEMORY_EVENTS
SYSFS = Path("/sys/bus/event_source/devices")
HAS_UNCORE = SYSFS.is_dir() and any(p.name.startswith("uncore_imc") for p in SYSFS.iterdir())
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_LOCAL_RANK",
             "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK")


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def fresh_probe():
    machine.probe_memory_events.cache_clear()
    yield
    machine.probe_memory_events.cache_clear()


@pytest.fixture
def fake_sysfs(tmp_path, monkeypatch):
    d = tmp_path / "devices"
    for pmu in ("cpu", "software", "uncore_imc_0", "uncore_imc_1"):
        (d / pmu).mkdir(parents=True)
    monkeypatch.setattr(machine, "PMU_SYSFS", d)
    return d


def fake_perf(bin_dir: Path, stderr: str, code: int = 0) -> Path:
    """A perf that logs its arguments, prints ``stderr`` to stderr and exits with ``code``."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "stderr.txt").write_text(stderr)
    return script(bin_dir / "perf", f'echo "$*" >> "{bin_dir}/calls.log"\ncat "{bin_dir}/stderr.txt" >&2\n'
                                    f"exit {code}\n")


# -- on this machine -------------------------------------------------------------------------------
@pytest.mark.skipif(HAS_UNCORE or not shutil.which("perf"), reason="needs perf and a machine without uncore_imc")
def test_unavailable_here_required_stops_optional_warns(tmp_path, capsys, fresh_probe):
    ok, reason = coll.MemoryCollector().available()
    assert not ok
    assert reason == ("no memory-controller PMU (uncore_imc_*) in /sys/bus/event_source/devices: DRAM traffic "
                      "needs an Intel server with uncore counters")
    marker = tmp_path / "ran.txt"
    app = script(tmp_path / "app.sh", f'echo "$1" >> {marker}\necho "perfcast-timer solve $1"\n')
    out = tmp_path / "m.perfcast"
    rc = main(["collect", "-o", str(out), "-P", "n=1,2", "--reps", "1", "--collect", "time,memory", "--",
               str(app), "{n}"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfcast: error:"), err
    assert "collector 'memory' is not available here" in err[0] and "uncore_imc" in err[0]
    assert not marker.exists() and not out.exists()  # nothing ran
    assert not list(tmp_path.glob("m.perfcast*"))  # and nothing is left behind (no campaign directory)

    rc = main(["collect", "-o", str(out), "-P", "n=1,2", "--reps", "1", "--collect", "time,memory?", "--json",
               "--", str(app), "{n}"])
    assert rc == 0
    captured = capsys.readouterr()
    warn = [l for l in captured.err.splitlines() if "warning" in l]
    assert len(warn) == 1 and "collector 'memory' skipped: no memory-controller PMU" in warn[0]
    summary = cli_items(captured.out, "campaign")[0]
    assert summary["runs"] == 2 and summary["warnings"] == [warn[0].split("warning: ", 1)[1]]
    assert READ not in summary["metrics"]
    assert sorted(marker.read_text().split()) == ["1", "2"]


# -- the probe -------------------------------------------------------------------------------------
def test_probe_with_fake_perf_and_sysfs(tmp_path, monkeypatch, fake_sysfs, fresh_probe):
    bin_dir = tmp_path / "bin"
    log = bin_dir / "calls.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    # (a) numeric counts: usable; the probe counts both events system-wide around `true`, once
    fake_perf(bin_dir, f"1.52,MiB,{READ},1001594197,100.00,,\n0.37,MiB,{WRITE},1001594197,100.00,,\n")
    assert machine.probe_memory_events(coll.MEMORY_EVENTS) == (True, "")
    assert coll.MemoryCollector().available() == (True, "")  # cached: perf is not run again
    assert log.read_text().splitlines() == [f"stat -a -x , -e {READ},{WRITE} -- true"]

    # (b) the PMU exists but has no such event
    machine.probe_memory_events.cache_clear()
    fake_perf(bin_dir, f"<not supported>,MiB,{READ},0,100.00,,\n0.37,MiB,{WRITE},1001594197,100.00,,\n")
    ok, reason = machine.probe_memory_events(coll.MEMORY_EVENTS)
    assert not ok and f"counts {READ} as <not supported>" in reason and "--memory-events" in reason

    # (c) perf refuses system-wide counting
    machine.probe_memory_events.cache_clear()
    fake_perf(bin_dir, "Error:\nAccess to performance monitoring and observability operations is limited.\n"
                       "Consider adjusting /proc/sys/kernel/perf_event_paranoid setting to open\n", code=255)
    ok, reason = machine.probe_memory_events(coll.MEMORY_EVENTS)
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    assert not ok
    assert "Access to performance monitoring and observability operations is limited." in reason
    assert f"kernel.perf_event_paranoid <= 0 (now: {paranoid})" in reason and "CAP_PERFMON" in reason

    # an event syntax error: perf's pointer line is kept
    machine.probe_memory_events.cache_clear()
    fake_perf(bin_dir, "event syntax error: 'uncore_imc/cas_count_rd/'\n"
                       "                     \\___ unknown term 'cas_count_rd' for pmu 'uncore_imc_0'\n", code=129)
    ok, reason = machine.probe_memory_events(["uncore_imc/cas_count_rd/"])
    assert not ok and "event syntax error: 'uncore_imc/cas_count_rd/' (unknown term 'cas_count_rd'" in reason

    # no memory-controller PMU: perf is not even run; other PMUs are looked up by their own name
    log.unlink()
    machine.probe_memory_events.cache_clear()
    for d in fake_sysfs.glob("uncore_imc_*"):
        d.rmdir()
    ok, reason = machine.probe_memory_events(coll.MEMORY_EVENTS)
    assert not ok and reason.startswith(f"no memory-controller PMU (uncore_imc_*) in {fake_sysfs}: ")
    ok, reason = machine.probe_memory_events(["amd_df/dram_read/"])
    assert not ok and reason.startswith(f"no PMU amd_df (amd_df_*) in {fake_sysfs}")
    assert not log.exists()


def test_event_names_are_checked(tmp_path, capsys):
    assert coll.parse_events(None) == [READ, WRITE]
    assert coll.parse_events(" amd_df/dram_read/ ,unc_m_cas_count.rd") == ["amd_df/dram_read/", "unc_m_cas_count.rd"]
    for bad in ("", ",", f"{READ},", "a b", ["x", ""], [3], "{a,b}", 7):
        with pytest.raises(PerfcastError, match="memory event"):
            coll.MemoryCollector(bad)
    app = script(tmp_path / "app.sh", "true\n")
    base = ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=1", "--collect", "time,memory?"]
    y = tmp_path / "c.yaml"
    cases = [base + ["--memory-events", "", "--", str(app)],
             base + ["--memory-events", f"{READ},cas count", "--", str(app)],
             ["collect", str(y)]]
    for i, argv in enumerate(cases):
        y.write_text(f"command: [{app}]\nparameters: {{n: [1]}}\ncollect: [time, memory]\n"
                     + ("memory: {events: [uncore_imc/x/, '']}\n" if i == 2 else "") + "output: y.perfcast\n")
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("perfcast: error:") and "memory" in err[0], (argv, err)
    y.write_text(f"command: [{app}]\nparameters: {{n: [1]}}\nmemory: {{evnts: [{READ}]}}\noutput: y.perfcast\n")
    assert main(["collect", str(y)]) == 2
    assert "memory: a mapping with one option, events" in capsys.readouterr().err
    # a campaign file's events reach the collector (and so the probe)
    y.write_text(f"command: [{app}]\nparameters: {{n: [1]}}\ncollect: [memory]\n"
                 "memory: {events: [amd_df/dram_read/, amd_df/dram_write/]}\n")
    spec, _ = cp.load_spec(y)
    (mem,) = [c for c in coll.build(spec.collect, spec.settings) if c.name == "memory"]
    assert mem.events == ["amd_df/dram_read/", "amd_df/dram_write/"]
    assert "-e amd_df/dram_read/,amd_df/dram_write/ " in mem.node_wrapper()


# -- wrap.sh ---------------------------------------------------------------------------------------
class RankCounters(coll.Collector):
    """Per-rank words like the counters collector's, without probing the machine."""

    name = "counters"

    def wrapper(self):
        return 'perf stat -x , -e instructions -o "$D/perf.stat.rank$R.csv" --'


# logs its arguments, then runs what follows its own "--" (which may be another perf)
LOGGING_PERF = """\
{ printf 'perf'; for a in "$@"; do printf ' %s' "$a"; done; echo; } >> "$PERF_LOG"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


def run_wrapper(wrap: str, tmp_path: Path, **rank_env) -> tuple[int, list[str], list[str]]:
    log, ran = tmp_path / "perf.log", tmp_path / "ran.log"
    for f in (log, ran):
        f.unlink(missing_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script(bin_dir / "perf", LOGGING_PERF)
    prog = script(tmp_path / "prog.sh", f'echo "ran $*" >> {ran}\nexit 7\n')
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", PERF_LOG=str(log), **rank_env)
    proc = subprocess.run(["/bin/sh", wrap, str(prog), "a b"], env=env, capture_output=True, text=True, timeout=30)
    lines = lambda f: f.read_text().splitlines() if f.exists() else []  # noqa: E731
    return proc.returncode, lines(log), lines(ran)


def test_wrapper_runs_the_node_tool_on_the_first_process_of_each_node(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    wrap = cp.write_wrapper(run_dir, [coll.MemoryCollector(), RankCounters()])
    prog = tmp_path / "prog.sh"
    node = f"perf stat -a -x , -e {READ},{WRITE} -o {run_dir}/perf.memory.rank3.csv --"
    rank = f"perf stat -x , -e instructions -o {run_dir}/perf.stat.rank3.csv --"
    # local rank 0: the node tool outermost, then the per-rank tool, then the program once
    rc, calls, ran = run_wrapper(wrap, tmp_path, OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="0")
    assert rc == 7 and ran == ["ran a b"]
    assert calls == [f"{node} {rank} {prog} a b", f"{rank} {prog} a b"]
    # any other local rank: only the per-rank tool
    rc, calls, ran = run_wrapper(wrap, tmp_path, OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="1")
    assert rc == 7 and ran == ["ran a b"] and calls == [f"{rank} {prog} a b"]
    # MPICH's Hydra and srun name the local rank differently
    rc, calls, ran = run_wrapper(wrap, tmp_path, PMI_RANK="3", MPI_LOCALRANKID="2")
    assert rc == 7 and ran == ["ran a b"] and calls == [f"{rank} {prog} a b"]
    rc, calls, ran = run_wrapper(wrap, tmp_path, SLURM_PROCID="3", SLURM_LOCALID="0")
    assert rc == 7 and ran == ["ran a b"] and calls[0].startswith(node)

    # the memory collector alone: no per-rank words
    wrap = cp.write_wrapper(run_dir, [coll.TimeCollector(), coll.MemoryCollector()])
    rc, calls, ran = run_wrapper(wrap, tmp_path, OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="0")
    assert rc == 7 and ran == ["ran a b"] and calls == [f"{node} {prog} a b"]
    rc, calls, ran = run_wrapper(wrap, tmp_path, OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="1")
    assert rc == 7 and ran == ["ran a b"] and calls == []

    # without node tools the wrapper is what it always was
    wrap = cp.write_wrapper(run_dir, [RankCounters()])
    assert Path(wrap).read_text() == ("#!/bin/sh\n# perfcast: run one rank under the profilers of this run\n"
                                      f"D={run_dir}\n{coll.RANK_SH}\n"
                                      'exec perf stat -x , -e instructions -o "$D/perf.stat.rank$R.csv" -- "$@"\n')
    assert cp.write_wrapper(run_dir, [coll.TimeCollector()]) is None


# -- reading the counts ----------------------------------------------------------------------------
def stat_file(path: Path, lines: list[str]):
    # what perf stat -o writes: a header, a blank line, one line per event
    path.write_text("# started on Tue Mar  4 10:12:01 2025\n\n" + "\n".join(lines) + "\n")


def test_node_counts_sum_to_the_jobs_traffic_and_give_bw_cpi(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # two nodes, their first processes global ranks 0 and 4
    stat_file(run / "perf.memory.rank0.csv", [f"1491.27,MiB,{READ},51018789,100.00,,",
                                              f"402.19,MiB,{WRITE},51018789,100.00,,"])
    stat_file(run / "perf.memory.rank4.csv", [f"1302.50,MiB,{READ},51020001,100.00,,",
                                              f"388.04,MiB,{WRITE},51020001,100.00,,"])
    exp = coll.MemoryCollector().collect(run, {})
    assert sorted(exp.data["rank"].unique()) == [0, 4]
    assert exp.metrics[READ].unit == "MiB"
    mem = experiment_totals(exp)
    assert mem[READ] == pytest.approx((1491.27 + 1302.50) * 2**20, rel=1e-12)
    assert mem[WRITE] == pytest.approx((402.19 + 388.04) * 2**20, rel=1e-12)

    # the counters collector's per-rank perf stat (task-clock in msec)
    stat_file(run / "perf.stat.rank0.csv", ["20000.50,msec,task-clock,20000500000,100.00,1.000,CPUs utilized",
                                            "31000000000,,instructions,20000500000,100.00,1.24,insn per cycle",
                                            "25000000000,,cycles,20000500000,100.00,1.250,GHz"])
    stat_file(run / "perf.stat.rank4.csv", ["19500.25,msec,task-clock,19500250000,100.00,1.000,CPUs utilized",
                                            "32000000000,,instructions,19500250000,100.00,1.23,insn per cycle",
                                            "26000000000,,cycles,19500250000,100.00,1.333,GHz"])
    counters = experiment_totals(coll.CountersCollector().collect(run, {}))
    assert counters["task-clock"] == pytest.approx(39.50075, rel=1e-12)  # msec -> s
    sig = signature_from_totals({**mem, **counters})
    dram = (1491.27 + 1302.50 + 402.19 + 388.04) * 2**20
    expected = 1e-9 * dram / (31e9 + 32e9) * (25e9 + 26e9) / 39.50075
    assert sig.values["bw_cpi"] == pytest.approx(expected, rel=1e-12)
    assert sig.values["cpi"] == pytest.approx(51 / 63, rel=1e-12)
    assert {"cpi", "bandwidth"} <= set(sig.groups())

    (run / "perf.memory.rank0.csv").unlink()
    (run / "perf.memory.rank4.csv").unlink()
    with pytest.raises(PerfcastError, match="no perf.memory.rank"):
        coll.MemoryCollector().collect(run, {})


def test_default_counters_carry_the_cpu_seconds(monkeypatch):
    # bw_cpi needs the ranks' CPU seconds: the counters collector adds task-clock to the hardware events
    monkeypatch.setattr(machine, "describe", lambda: {"counters": {
        "instructions": True, "cycles": True, "LLC-loads": False, "task-clock": True, "page-faults": True}})
    assert coll.CountersCollector().events == ["instructions", "cycles", "task-clock"]
    # but a machine without hardware counters still has no counters collector
    monkeypatch.setattr(machine, "describe", lambda: {"counters": {"instructions": False, "task-clock": True}})
    assert coll.CountersCollector().events == []


# -- a whole campaign -----------------------------------------------------------------------------
COUNTING_PERF = """\
[ "$1" = "--version" ] && { echo "perf version 0.0.fake"; exit 0; }
shift
out=; events=
while [ $# -gt 0 ]; do
  case "$1" in
    -x|-e|-o) opt=$1; shift; [ "$opt" = -e ] && events=$1; [ "$opt" = -o ] && out=$1 ;;
    --) shift; break ;;
  esac
  shift
done
"$@"; rc=$?
{
  [ -n "$out" ] && printf '# started on Tue Mar  4 10:12:01 2025\\n\\n'
  for e in $(echo "$events" | tr , ' '); do
    case "$e" in
      uncore_imc/cas_count_read/) echo "1000.50,MiB,$e,1500123456,100.00,," ;;
      uncore_imc/cas_count_write/) echo "250.25,MiB,$e,1500123456,100.00,," ;;
      task-clock) echo "1500.00,msec,$e,1500000000,100.00,0.999,CPUs utilized" ;;
      instructions) echo "2000000000,,$e,1500000000,100.00,0.67,insn per cycle" ;;
      cycles) echo "3000000000,,$e,1500000000,100.00,2.000,GHz" ;;
      *) echo "<not supported>,,$e,0,100.00,," ;;
    esac
  done
} > "${out:-/dev/stderr}"
exit $rc
"""


def test_campaign_records_dram_traffic_for_the_bandwidth_group(tmp_path, monkeypatch, fake_sysfs, fresh_probe,
                                                                capsys):
    machine.describe()  # the real machine's description, cached before perf is faked
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir / "perf", COUNTING_PERF)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for k in RANK_VARS:
        monkeypatch.delenv(k, raising=False)
    app = script(tmp_path / "app.sh", 'echo "perfcast-timer solve $1"\n')
    out = tmp_path / "bw.perfcast"
    rc = main(["collect", "-o", str(out), "-P", "n=1", "--reps", "2", "--collect", "time,counters,memory",
               "--counters", "instructions,cycles,task-clock", "--json", "--", str(app), "{n}"])
    assert rc == 0, capsys.readouterr().err
    exp = store.read(out)
    assert {READ, WRITE, "instructions", "cycles", "task-clock"} <= set(exp.metrics)
    run_dirs = sorted((cp.campaign_dir(out) / "runs").iterdir())
    assert len(run_dirs) == 2 and all((d / "perf.memory.rank0.csv").is_file() for d in run_dirs)
    sig = signature_from_experiment(exp)
    assert sig.values["bw_cpi"] == pytest.approx(1e-9 * (1000.50 + 250.25) * 2**20 / 2e9 * 3e9 / 1.5, rel=1e-12)
    assert "bandwidth" in sig.groups()

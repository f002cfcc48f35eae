"""Launchers: run one campaign run (a prepared command line) and report what happened.

* :class:`LocalLauncher` runs each run as a subprocess in its own session; a timeout kills the whole
  process group (mpirun and every rank), first with SIGTERM, then SIGKILL; so does any exception while
  it runs (Ctrl-C, or :class:`Terminated` for SIGTERM/SIGHUP).  Its stdout/stderr are streamed through
  pipes into capped files (:data:`OUTPUT_CAP` bytes each by default, the middle of a longer stream
  replaced by a marker line) while timer lines are scanned as they arrive (:func:`execute`).
* :class:`SlurmLauncher` submits a round of runs as one ``sbatch`` job array; every array task runs
  ``python -m perfcast.collect.launchers task BATCH INDEX`` on its node, which executes the run exactly as
  the local launcher does and leaves ``result.json`` in the run's directory.  The campaign gathers the
  results back into its journal.  A submitted, unfinished job survives a killed campaign: on restart the
  campaign waits for it and gathers its results (``slurm/pending.json``).

Both call ``finish(request, result)`` once per run as soon as its result is known.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import resource
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..errors import PerfcastError

TAIL = 4000  # characters of stdout/stderr kept in the journal
#: bytes of stdout and of stderr kept on disk per run (each); more is cut out of the middle
OUTPUT_CAP = 10 * 1024 * 1024
KEEP_END = 64 * 1024  # of the capped bytes, this many are the stream's end (the rest its start)
BLOCK = 64 * 1024     # bytes read from the pipes at a time
LONG_LINE = 1 << 20   # a line longer than this is scanned for timers in pieces
DRAIN = 2.0           # seconds the pipes are drained after the run's leader ended
_ENV_KEYS = ("OMP_", "OMPI_", "MPI", "PMIX_", "SLURM_", "PERFCAST_", "I_MPI_", "UCX_", "KMP_", "GOMP_",
             "MKL_", "OPENBLAS_")
_ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "HOSTNAME", "CC", "CFLAGS")


@dataclass
class RunRequest:
    """One run of a campaign: everything needed to execute it anywhere."""

    id: str
    config: dict            # parameter -> value
    mode: str               # "main" or "cachegrind"
    attempt: int
    argv: list[str]
    env: dict               # variables added to the inherited environment
    run_dir: str
    cwd: str
    timeout: float | None = None
    #: regex of the application's timer lines, scanned while the output streams (None: not scanned)
    timer_regex: str | None = None
    #: bytes of stdout and of stderr kept on disk (each); None keeps everything
    output_cap: int | None = OUTPUT_CAP
    #: seconds a run that reached ``timeout`` gets between SIGTERM and SIGKILL (0: SIGKILL at once)
    stop_grace: float = 2.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunRequest":
        return cls(**d)


def relevant_env(env: dict) -> dict:
    """The part of an environment worth recording with a run."""
    return {k: v for k, v in sorted(env.items()) if k in _ENV_NAMES or k.startswith(_ENV_KEYS)}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


#: Open MPI's help aggregation lines ("[vm:22486] 1 more process has sent help message help-mpi-api.txt /
#: mpi-abort", "[vm:22486] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error
#: messages"): never why a run failed
_MPI_HELP_NOISE = re.compile(r"^\[[^\]]*\] (?:\d+ more process(?:es)? ha(?:s|ve) sent help message|Set MCA parameter "
                             r"\"orte_base_help_aggregate\")")
_DASHES = re.compile(r"^-{10,}$")


def failure_reason(stderr: str, stdout: str = "") -> str:
    """Why a run that exited with an error failed, in one line: the last line of its ``stderr``
    that says something -- Open MPI's help aggregation lines left out, and a help text between
    dashed lines (MPI_ABORT's, ORTE's) by its first line -- and, when that is Open MPI's MPI_ABORT
    notice, the application's last line of ``stdout`` (what it printed before it aborted: LULESH's
    "Num processors must be a cube of an integer (1, 8, 27, ...)").  Empty when nothing is left."""
    lines, block, first = [], False, None
    for raw in stderr.strip().splitlines():
        line = raw.strip()
        if not line or _MPI_HELP_NOISE.match(line):
            continue
        if _DASHES.match(line):
            if block and first is not None:
                lines.append(first)
            block, first = not block, None
            continue
        if block:
            first = line if first is None else first
        else:
            lines.append(line)
    if block and first is not None:
        lines.append(first)
    if not lines:
        return ""
    why = lines[-1][:200]
    if why.startswith("MPI_ABORT was invoked"):
        said = [ln.strip() for ln in stdout.strip().splitlines() if ln.strip()]
        if said:
            why += f"; its last output: {said[-1][:200]}"
    return why


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (Slurm, systemd, ``timeout``, a closed terminal) as an exception, so the
    campaign unwinds exactly as on Ctrl-C (SIGINT, KeyboardInterrupt): the running application's
    process group is killed and the journal keeps every completed record.  ``exit_code`` is the
    shell's 128 + signal number (143 for SIGTERM, 129 for SIGHUP; Ctrl-C gives 130)."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_DEFERRED = {signal.SIGINT, *TERMINATING}


@contextmanager
def terminate_on_signals():
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; elsewhere a no-op)."""
    def handler(signum, frame):
        raise Terminated(signum)

    old = {}
    try:
        for sig in TERMINATING:
            old[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextmanager
def deferred_signals():
    """Hold SIGINT/SIGTERM/SIGHUP back while inside (a journal record is written whole, or not at all);
    they are delivered on the way out."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _kill_group(pgid: int, grace: float = 2.0, proc: subprocess.Popen | None = None):
    for sig in (signal.SIGTERM, signal.SIGKILL) if grace > 0 else (signal.SIGKILL,):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if proc is not None:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
        # the leader is gone; make sure no straggler of the group is left
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05 if sig == signal.SIGKILL else grace / 10)


class _CappedFile:
    """A stream written to a file, keeping at most ``cap`` bytes (None: all): the first ``cap - keep``
    and the last ``keep`` bytes, with a marker line between them saying how much was dropped.  Only the
    last ``keep`` bytes are ever held in memory."""

    def __init__(self, path: Path, cap: int | None):
        self.fh = open(path, "wb")
        self.cap = cap
        self.keep = 0 if cap is None else min(KEEP_END, cap // 2)
        self.head_left = 0 if cap is None else cap - self.keep
        self.head_end = b"\n"
        self.end = bytearray()
        self.total = 0
        self.dropped = 0

    def write(self, data: bytes):
        self.total += len(data)
        if self.cap is None:
            self.fh.write(data)
            return
        if self.head_left > 0:
            n = min(len(data), self.head_left)
            self.fh.write(data[:n])
            self.head_end = data[n - 1:n]
            self.head_left -= n
            data = data[n:]
        if data:
            self.end += data
            over = len(self.end) - self.keep
            if over > 0:
                self.dropped += over
                del self.end[:over]

    def close(self):
        if self.dropped:
            kept = self.total - self.dropped
            self.fh.write((b"" if self.head_end == b"\n" else b"\n") + (
                f"[perfcast: {self.dropped} bytes of output dropped here; kept the first "
                f"{kept - len(self.end)} and the last {len(self.end)} of {self.total} bytes "
                f"(output cap {self.cap} bytes per stream, --output-cap)]\n").encode())
        self.fh.write(self.end)
        self.fh.close()


class _Lines:
    """Cuts a byte stream into blocks of whole lines for a :class:`~perfcast.collect.collectors.TimerScan`
    (a line longer than LONG_LINE is scanned in pieces)."""

    def __init__(self, scan):
        self.scan = scan
        self.rest = b""

    def write(self, data: bytes):
        data = self.rest + data if self.rest else data
        cut = data.rfind(b"\n") + 1
        if cut:
            self.scan.feed(data[:cut].decode("utf-8", "replace"))
            data = data[cut:]
        if len(data) > LONG_LINE:
            self.scan.feed(data.decode("utf-8", "replace"))
            data = b""
        self.rest = data

    def close(self):
        if self.rest:
            self.scan.feed(self.rest.decode("utf-8", "replace"))
            self.rest = b""


def busy_seconds(stat: str, cpus, tick: int) -> float | None:
    """Seconds the CPUs numbered in ``cpus`` have been busy since boot, from the text of
    ``/proc/stat`` (``tick``: clock ticks per second): every state but idle and iowait (``steal``
    counts: a hypervisor running other guests takes the core as surely as a local process does);
    None when it lists none of them or a line is short."""
    ticks, found = 0, 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
            continue
        v = [int(x) for x in rest.split()[:8]]
        if len(v) < 8:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = v
        ticks += user + nice + system + irq + softirq + steal
        found += 1
    return ticks / tick if found else None


def cpu_busy(cpus) -> float | None:
    """:func:`busy_seconds` of this machine now; None where ``/proc/stat`` cannot be read."""
    try:
        with open("/proc/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return busy_seconds(stat, cpus, os.sysconf("SC_CLK_TCK"))


def _clock_ticks() -> int:
    """Clock ticks per second, the unit of ``/proc/stat``."""
    return os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU seconds of this process and of its reaped children (the runs) so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class CpuShare:
    """What else ran on the run's CPUs while it ran: the CPUs this process may use (its affinity),
    their busy seconds from ``/proc/stat`` and this process' own CPU time with its children's at the
    start; :meth:`result` turns the differences at the end into the average number of those CPUs
    kept busy by *other* processes (``others``) -- the ranks of a run asking for all the cores while
    other processes hold ``others`` of them wait for their turn, and their times measure that."""

    def __init__(self):
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.busy = cpu_busy(set(self.cpus)) if self.cpus else None
        self.own = _own_cpu()

    def result(self, wall: float) -> dict:
        """``cpus`` (usable), ``cpu`` (seconds of the run and of this process), ``others`` (average
        busy CPUs besides them, within [0, cpus]) and ``others_resolution``: ``/proc/stat`` counts
        whole clock ticks per CPU, so ``others`` is uncertain by up to ``cpus`` ticks over the run's
        wall time (on a 6 ms run of 2 CPUs at 100 ticks/s: 3.3 CPUs -- the figure says nothing
        there); empty where ``/proc/stat`` is not there or the run took no time."""
        busy = cpu_busy(set(self.cpus)) if self.busy is not None else None
        if busy is None or wall <= 0:
            return {}
        own = _own_cpu() - self.own
        n = len(self.cpus)
        others = min(max((busy - self.busy - own) / wall, 0.0), float(n))
        return {"cpus": n, "cpu": round(own, 3), "others": round(others, 3),
                "others_resolution": round(n / (_clock_ticks() * wall), 3)}


def execute(req: RunRequest, running_file: Path | None = None) -> dict:
    """Run ``req`` to completion (or its timeout) and describe the outcome.

    stdout/stderr are streamed (never held whole in memory) to ``stdout.txt``/``stderr.txt`` in the
    run directory, each capped at ``req.output_cap`` bytes (:class:`_CappedFile`); the timers
    (``req.timer_regex``) are scanned from every stdout line as it arrives, dropped ones included,
    and returned as ``timer_values``.  ``running_file`` (if given) holds the process-group id while
    the run is alive, so a restarted campaign can kill the orphans of a killed one.  Any exception
    while the run is alive (KeyboardInterrupt, :class:`Terminated`) kills its process group first.
    """
    run_dir = Path(req.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(req.env)
    env["PERFCAST_RUN_DIR"] = str(run_dir)
    result = {"id": req.id, "host": platform.node(), "env": relevant_env({**env}), "command": req.argv}
    out_f, err_f = run_dir / "stdout.txt", run_dir / "stderr.txt"
    scan = None
    if req.timer_regex is not None:
        from .collectors import TimerScan

        scan = TimerScan(req.timer_regex)
    start = time.time()
    share = CpuShare()
    t0 = time.perf_counter()
    status, reason, code = "ok", None, None
    out, err = _CappedFile(out_f, req.output_cap), _CappedFile(err_f, req.output_cap)
    lines = _Lines(scan) if scan is not None else None
    try:
        try:
            proc = subprocess.Popen(req.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, env=env, cwd=req.cwd, start_new_session=True)
        except OSError as e:
            proc = None
            status, reason = "error", f"cannot start {req.argv[0]!r}: {e.strerror or e}"
        if proc is not None:
            try:
                if running_file is not None:
                    running_file.write_text(json.dumps({"pgid": proc.pid, "run_dir": str(run_dir)}))
                code, timed_out = _pump(proc, req.timeout, t0, out, err, lines, req.stop_grace)
                if timed_out:
                    status, reason = "timeout", f"timed out after {req.timeout:g} s"
            except BaseException:
                with deferred_signals():  # a second SIGTERM/Ctrl-C must not cut the kill short
                    _kill_group(proc.pid, proc=proc)
                raise
            finally:
                # children of the run that outlived its leader (daemonised ranks) go too
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                for fh in (proc.stdout, proc.stderr):
                    fh.close()
                if running_file is not None:
                    running_file.unlink(missing_ok=True)
    finally:
        out.close()
        err.close()
        if lines is not None:
            lines.close()
    if status == "ok" and code != 0:
        status = "failed"
        reason = (f"killed by signal {-code}" if code < 0 else f"exit code {code}")
        why = failure_reason(_tail(err_f), _tail(out_f))
        if why:
            reason += f": {why}"
    wall = time.perf_counter() - t0
    end = time.time()
    result.update(share.result(wall))
    result.update({"status": status, "reason": reason, "exit_code": code, "start": _iso(start), "end": _iso(end),
                   "start_epoch": start, "wall": wall,
                   "stdout_tail": _tail(out_f), "stderr_tail": _tail(err_f),
                   "output_bytes": {"stdout": out.total, "stderr": err.total},
                   "output_dropped": {"stdout": out.dropped, "stderr": err.dropped}})
    if scan is not None:
        result["timer_values"] = scan.to_list()
        if scan.invalid:
            result["timer_invalid"] = scan.invalid
    return result


def _pump(proc: subprocess.Popen, timeout: float | None, t0: float, out: _CappedFile, err: _CappedFile,
          lines: _Lines | None, grace: float = 2.0) -> tuple[int, bool]:
    """Move the run's output into its files until it ends or times out; returns (exit code, timed out).

    When the leader exits its process group is killed (stragglers holding the pipes go too) and the
    pipes are drained for at most DRAIN seconds (a process that left the group may keep them open)."""
    deadline = None if not timeout else t0 + timeout
    sinks = {proc.stdout.fileno(): (out, lines), proc.stderr.fileno(): (err, None)}
    sel = selectors.DefaultSelector()
    for fd in sinks:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    code, timed_out, drain_until = None, False, None
    try:
        while sel.get_map():
            now = time.perf_counter()
            if drain_until is not None and now > drain_until:
                break
            if code is None and deadline is not None and now >= deadline:
                timed_out = True
                _kill_group(proc.pid, grace, proc=proc)
                code = proc.wait()
                drain_until = time.perf_counter() + DRAIN
                continue
            wait = 0.2 if deadline is None or code is not None else max(0.0, min(0.2, deadline - now))
            for key, _ in sel.select(wait):
                try:
                    data = os.read(key.fd, BLOCK)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fd)
                    continue
                for sink in sinks[key.fd]:
                    if sink is not None:
                        sink.write(data)
            if code is None:
                code = proc.poll()
                if code is not None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    drain_until = time.perf_counter() + DRAIN
    finally:
        sel.close()
    if code is None:
        # the run closed its output but goes on
        try:
            code = proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, proc=proc)
            code = proc.wait()
    return code, timed_out


def kill_orphans(running_file: Path):
    """Kill the process group a killed campaign left running (checked against its run directory)."""
    try:
        info = json.loads(running_file.read_text())
        pgid, run_dir = int(info["pgid"]), str(info["run_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        running_file.unlink(missing_ok=True)
        return
    try:
        environ = Path(f"/proc/{pgid}/environ").read_bytes().split(b"\0")
        ours = f"PERFCAST_RUN_DIR={run_dir}".encode() in environ
    except OSError:
        ours = False
    if ours:
        _kill_group(pgid)
    running_file.unlink(missing_ok=True)


Finish = Callable[[RunRequest, dict], None]


class LocalLauncher:
    name = "local"

    def __init__(self, campaign_dir: Path):
        self.dir = Path(campaign_dir)
        self.running = self.dir / "running.json"

    def recover(self, finish: Finish, requests_by_id: Callable[[str], RunRequest | None]):
        kill_orphans(self.running)

    def run_batch(self, requests: list[RunRequest], finish: Finish):
        for req in requests:
            finish(req, execute(req, self.running))


def _atomic_write(path: Path, text: str):
    from ..output import temporary_file

    fd, tmp = temporary_file(path)   # the one rule: a killed writer's temporary goes with the next write
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):   # the next write's cleanup takes what is left
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass
class SlurmOptions:
    partition: str | None = None
    #: extra sbatch options, e.g. ["--nodes=1", "--account=x"]
    options: list[str] = field(default_factory=list)
    #: array tasks allowed to run at once (None: as many as Slurm schedules)
    parallel: int | None = None
    #: ask for whole nodes so runs do not disturb each other
    exclusive: bool = True
    #: time limit per task in minutes (default: from the run timeout, else 60)
    time_minutes: int | None = None
    poll: float = 1.0


class SlurmLauncher:
    name = "slurm"

    def __init__(self, campaign_dir: Path, options: SlurmOptions | None = None):
        self.dir = Path(campaign_dir) / "slurm"
        self.opts = options or SlurmOptions()

    @staticmethod
    def available() -> tuple[bool, str]:
        for tool in ("sbatch", "squeue"):
            if not shutil.which(tool):
                return False, f"{tool} is not on PATH"
        proc = subprocess.run(["squeue", "-h", "-o", "%i", "-u", str(os.getuid())], capture_output=True, text=True)
        if proc.returncode != 0:
            return False, f"squeue fails: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        return True, ""

    def _submit(self, requests: list[RunRequest]) -> dict:
        self.dir.mkdir(parents=True, exist_ok=True)
        k = len(list(self.dir.glob("batch-*.json")))
        batch = self.dir / f"batch-{k:04d}.json"
        _atomic_write(batch, json.dumps([r.to_dict() for r in requests]))
        timeouts = [r.timeout for r in requests if r.timeout]
        minutes = self.opts.time_minutes or (int(max(timeouts) * 1.5 / 60) + 5 if timeouts else 60)
        array = f"0-{len(requests) - 1}" + (f"%{self.opts.parallel}" if self.opts.parallel else "")
        lines = ["#!/bin/sh", "#SBATCH --job-name=perfcast", f"#SBATCH --array={array}",
                 f"#SBATCH --output={self.dir}/job-%A_%a.out", f"#SBATCH --time={minutes}",
                 f"#SBATCH --chdir={requests[0].cwd}"]
        if self.opts.exclusive:
            lines.append("#SBATCH --exclusive")
        if self.opts.partition:
            lines.append(f"#SBATCH --partition={self.opts.partition}")
        lines += [f"#SBATCH {o}" for o in self.opts.options]
        lines.append(f"exec {shlex.quote(sys.executable)} -m perfcast.collect.launchers task "
                     f"{shlex.quote(str(batch))} \"$SLURM_ARRAY_TASK_ID\"")
        script = self.dir / f"batch-{k:04d}.sh"
        script.write_text("\n".join(lines) + "\n")
        proc = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or ["sbatch failed"])[-1]
            raise PerfcastError(f"sbatch refused the job array: {msg}", script)
        job = proc.stdout.strip().split(";")[0]
        pending = {"job": job, "batch": str(batch)}
        _atomic_write(self.dir / "pending.json", json.dumps(pending))
        return pending

    def _alive(self, job: str) -> bool:
        proc = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True)
        if proc.returncode != 0:
            # squeue errors for a job id it no longer knows
            return "Invalid job id" not in proc.stderr and bool(proc.stdout.strip())
        return bool(proc.stdout.strip())

    def _gather(self, pending: dict, finish: Finish):
        requests = [RunRequest.from_dict(d) for d in json.loads(Path(pending["batch"]).read_text())]
        left = {r.id: r for r in requests}
        job = pending["job"]
        while left:
            for rid, req in list(left.items()):
                res = Path(req.run_dir) / "result.json"
                if res.is_file():
                    try:
                        result = json.loads(res.read_text())
                    except ValueError:
                        continue
                    if result.get("id") == rid:
                        del left[rid]
                        finish(req, result)
            if not left:
                break
            if not self._alive(job):
                # a last look: the job may have finished between the two checks
                time.sleep(self.opts.poll)
                for rid, req in list(left.items()):
                    res = Path(req.run_dir) / "result.json"
                    if res.is_file():
                        continue
                    idx = requests.index(req)
                    log = self.dir / f"job-{job}_{idx}.out"
                    tail = _tail(log).strip().splitlines()
                    del left[rid]
                    finish(req, {"id": rid, "status": "error", "reason": "Slurm task ended without a result"
                                 + (f": {tail[-1][:200]}" if tail else ""), "command": req.argv,
                                 "exit_code": None, "wall": None, "start": None, "end": None, "host": None,
                                 "stdout_tail": "", "stderr_tail": "\n".join(tail[-20:]), "env": {}})
                continue
            time.sleep(self.opts.poll)
        (self.dir / "pending.json").unlink(missing_ok=True)

    def recover(self, finish: Finish, requests_by_id):
        p = self.dir / "pending.json"
        if p.is_file():
            try:
                pending = json.loads(p.read_text())
            except ValueError:
                p.unlink()
                return
            self._gather(pending, finish)

    def run_batch(self, requests: list[RunRequest], finish: Finish):
        if not requests:
            return
        for r in requests:
            (Path(r.run_dir) / "result.json").unlink(missing_ok=True)
        self._gather(self._submit(requests), finish)


def _task_main(argv: list[str]) -> int:
    """Entry of one Slurm array task: execute request INDEX of BATCH and leave result.json."""
    if len(argv) != 3 or argv[0] != "task":
        print("usage: python -m perfcast.collect.launchers task BATCH.json INDEX", file=sys.stderr)
        return 2
    requests = json.loads(Path(argv[1]).read_text())
    req = RunRequest.from_dict(requests[int(argv[2])])
    from .machine import describe

    result = execute(req)
    result["machine"] = describe()
    _atomic_write(Path(req.run_dir) / "result.json", json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_task_main(sys.argv[1:]))

"""Profiling campaigns: run an application over a parameter grid and store the result as an Experiment.

::

    spec = CampaignSpec(command="mpirun -np {p} ./app {n}", parameters={"p": [1, 2, 4], "n": [64, 128]},
                        reps_min=3, reps_max=10, cv=0.05)
    exp = run_campaign(spec, "app.perfcast")

How it runs
  * Rounds.  Each round runs every configuration (grid point) that still needs a run once, in a
    seeded shuffle of the grid, so configurations are interleaved in time (drift and noise spread
    over all of them instead of hitting one).  A configuration needs runs until it has ``reps_min``
    successful ones and then until the coefficient of variation (sample std / mean) of its runtime
    is at most ``cv`` or it has ``reps_max``.  The runtime is the wall time of the run, or the
    application timer named by ``cv_metric``.
  * Failures.  A run that exits non-zero, times out (status ``timeout``: the whole process group is
    killed), cannot start, or whose collector output cannot be read is recorded with its reason and
    left out of the experiment; the configuration is retried until it has failed ``max_failures``
    times, then given up.  The campaign goes on either way.
  * Time limit per run.  ``timeout`` (``--timeout``) seconds if given; ``0`` (``none``) is no limit.
    Otherwise it is automatic (:meth:`Campaign.time_limit`): ``max(AUTO_MIN = 60 s, AUTO_FACTOR = 10 x``
    the median wall time of the configuration's successful runs``)``, or, for a configuration without
    one, ``10 x`` the longest successful run of the campaign so far; while no run has succeeded at all,
    ``first_timeout`` (``--first-timeout``, default FIRST_TIMEOUT = 1 hour; 0 = none).  cachegrind runs
    get CACHEGRIND_SLOWDOWN (50) times a plain run's limit.  A run stopped by an automatic limit says
    so in its reason.  A campaign with a budget (``collect --adaptive``) lowers the limit further to
    what is left of it (:attr:`Campaign.round_limits`) and holds back runs it cannot afford.
  * Incomplete configurations.  After the campaign, :meth:`Campaign.incomplete` lists the
    configurations with fewer successful runs than ``reps_min`` (given up after ``max_failures``):
    how many succeeded, how many were wanted, the last failure's status and reason.  The experiment
    of the runs that succeeded is written anyway and carries the list in
    ``meta["campaign"]["incomplete"]``; ``perfcast collect`` prints it and exits 3 unless
    ``--allow-missing``.
  * Output.  The application's stdout/stderr are streamed (never held whole in memory) to
    ``runs/<id>/stdout.txt``/``stderr.txt``, at most ``output_cap`` bytes each (``--output-cap``,
    default 10 MiB; None/0 keeps all): the start and the last 64 KiB, with a marker line saying how
    many bytes were dropped between them.  Timer lines are scanned line by line from the whole
    stream, the dropped part included.
  * Signals.  Ctrl-C (SIGINT) and, under ``perfcast collect`` (:func:`terminate_on_signals`),
    SIGTERM and SIGHUP (Slurm, systemd, ``timeout``, a closed terminal) stop the campaign the same
    way: the running application's process group is killed, the record of a finished run is written
    whole before the signal takes effect (:func:`deferred_signals`), and the command exits 130
    (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).  Rerun to resume.
  * Journal.  Next to the output, ``<output>.campaign/`` holds ``campaign.json`` (the spec and the
    machine), ``journal.jsonl`` (one JSON record per finished run, appended with a single write and
    fsync'd) and ``runs/<id>/`` (stdout, stderr, profiler files).  A run counts as done once its
    record is in the journal.  Killing the campaign at any moment and running it again finishes the
    grid without repeating or losing a finished run (a torn last line is cut off; the orphaned
    processes of the interrupted run are killed).  The stored experiment is rebuilt from the journal
    at the end of every campaign (atomically, via :func:`perfcast.store.write`).
  * Per run the journal keeps the command, the relevant environment, the host, start/end, exit
    code, the tails of stdout/stderr, the application's timers and the measured values.

The experiment's parameters are the grid's names; each successful run is one repetition of its
point.  Wall time is callpath ``app`` / metric ``time``; timers are ``app-><name>``.  Collectors
with per-rank output (perf, counters, cachegrind, mpi; memory per node, at the rank of the node's
first process) keep a ``rank`` column; run-level values (wall time, timers without a rank) are then
stored at rank 0.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import fcntl
import itertools
import json
import math
import os
import random
import re
import shlex
import shutil
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .. import store
from ..errors import PerfcastError
from ..experiment import COVERAGE, CallTree, Experiment, Metric, coverage_record
from . import collectors as coll
from . import machine
from .launchers import (OUTPUT_CAP, LocalLauncher, RunRequest, SlurmLauncher, SlurmOptions, Terminated,  # noqa: F401
                        _atomic_write, deferred_signals, terminate_on_signals)

JOURNAL = "journal.jsonl"
HEADER = "campaign.json"
FORMAT = "perfcast-campaign"

_MPI_LAUNCHERS = {"mpirun", "mpiexec", "orterun", "mpiexec.hydra", "mpiexec.openmpi", "mpirun.openmpi", "srun"}
# launcher options followed by one (or two) separate arguments
_ARG1 = {"-np", "-n", "--np", "--n", "-c", "-N", "-H", "--host", "-host", "-hostfile", "--hostfile",
         "-machinefile", "--machinefile", "--map-by", "-map-by", "--bind-to", "-bind-to", "--rank-by",
         "-rank-by", "-x", "-wdir", "--wdir", "-wd", "--prefix", "-npernode", "--npernode", "-npersocket",
         "--npersocket", "-ppn", "--ppn", "--cpus-per-proc", "-cpus-per-proc", "--cpus-per-rank",
         "--output-filename", "-output-filename", "--timeout", "-p", "-t", "-A", "-J", "-o", "-e", "-w",
         "--partition", "--time", "--account", "--nodes", "--ntasks", "--cpu-bind", "--mpi", "-f",
         "--hosts", "-hosts", "-bind-to", "-map-by", "-launcher", "-iface"}
_ARG2 = {"--mca", "-mca", "--gmca", "-gmca", "-genv", "-env", "--env"}
_PLACEHOLDER = re.compile(r"\{(\w*)\}")
_KEYS = {"command", "parameters", "reps", "cv", "timeout", "collect", "timer_regex", "launcher", "oversubscribe",
         "seed", "max_failures", "env", "workdir", "cv_metric", "perf", "counters", "memory", "cachegrind",
         "slurm", "output", "first_timeout", "output_cap"}
#: the automatic run time limit: max(AUTO_MIN, AUTO_FACTOR x a successful runtime) (see the docstring)
AUTO_MIN = 60.0
AUTO_FACTOR = 10.0
#: the limit of every run before one has succeeded (seconds), unless --first-timeout says otherwise
FIRST_TIMEOUT = 3600.0
CACHEGRIND_SLOWDOWN = 50  # a cachegrind run's limit is this many times a plain run's
#: Campaign.mode_cost fits a collector's slope over plain run times only when they differ this much
SPREAD_FOR_SLOPE = 1.5


@dataclass(frozen=True)
class ModeCost:
    """A collector's run (cachegrind, perf, ...) next to a plain run of the same configuration that
    takes ``t`` seconds: ``max(alpha + beta t, t)`` seconds (:meth:`Campaign.mode_cost`)."""

    alpha: float
    beta: float

    def seconds(self, t):
        """The run's seconds for plain runs of ``t`` seconds (a float or an array)."""
        t = np.asarray(t, dtype=float)
        out = np.maximum(self.alpha + self.beta * t, t)
        return float(out) if out.ndim == 0 else out

Progress = Callable[[int, int, str], None]


def fmt_value(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def parse_param(text: str) -> tuple[str, list[float]]:
    """``p=1,2,4,8`` -> ("p", [1, 2, 4, 8])."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name or not values.strip():
        raise PerfcastError(f"-P {text!r}: expected NAME=V1,V2,...", where="-P")
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise PerfcastError(f"-P {text!r}: parameter names are identifiers", where="-P")
    out = []
    for v in values.split(","):
        try:
            x = float(v)
        except ValueError:
            raise PerfcastError(f"-P {text!r}: {v.strip()!r} is not a number", where="-P") from None
        if not math.isfinite(x):
            raise PerfcastError(f"-P {text!r}: {v.strip()!r} is not finite", where="-P")
        if x in out:
            raise PerfcastError(f"-P {text!r}: the value {fmt_value(x)} is given twice", where="-P")
        out.append(x)
    return name, out


def parse_params(texts) -> dict[str, list[float]]:
    """Several ``-P NAME=V1,V2`` (:func:`parse_param`) -> {name: values}; a name given twice is refused
    (the later -P replaced the earlier one)."""
    params: dict[str, list[float]] = {}
    for text in texts:
        name, values = parse_param(text)
        if name in params:
            raise PerfcastError(f"-P {text!r}: parameter {name} is given twice; give all its values in one -P "
                                f"({name}={','.join(fmt_value(v) for v in params[name] + values)})", where="-P")
        params[name] = values
    return params


def parse_timeout(value, where: str = "timeout") -> float | None:
    """A run time limit: seconds > 0; ``0``/``none``/``off`` = no limit (0.0); ``auto``/None = automatic (None)."""
    if value is None:
        return None
    given = value   # said as given ('-3', not -3.0)
    if isinstance(value, str):
        s = value.strip().lower()
        if s in ("none", "off", "no", "inf", "unlimited"):
            return 0.0
        if s == "auto":
            return None
        try:
            value = float(s.rstrip("s"))
        except ValueError:
            raise PerfcastError(f"{where} {value!r}: expected seconds, 'none' (no limit) or 'auto'",
                                where=where) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PerfcastError(f"{where} {given!r}: expected seconds >= 0 (0 or 'none': no limit)", where=where)
    return float(value)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)i?b?", re.IGNORECASE)


def parse_size(value, where: str = "output_cap") -> int | None:
    """A byte count: ``10M``, ``500k``, ``1G``, ``4096``; ``0``/``none`` = no cap (None)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "off", "unlimited")):
        return None
    if isinstance(value, bool):
        raise PerfcastError(f"{where} {value!r}: expected a size such as 10M", where=where)
    if isinstance(value, (int, float)):
        n = value
    else:
        m = _SIZE.fullmatch(str(value).strip())
        if not m:
            raise PerfcastError(f"{where} {value!r}: expected a size such as 10M, 500k or 4096 (bytes)", where=where)
        n = float(m.group(1)) * 1024 ** " kmg".index(m.group(2).lower() or " ")
    if not math.isfinite(n) or n < 0:
        raise PerfcastError(f"{where} {value!r}: expected a size >= 0", where=where)
    n = int(n)
    if 0 < n < 1024:
        raise PerfcastError(f"{where} {value!r}: keep at least 1024 bytes (or 0: no cap)", where=where)
    return n or None


def parse_reps(text) -> tuple[int, int]:
    """``3..10`` -> (3, 10); ``5`` -> (5, 5)."""
    if isinstance(text, int):
        lo = hi = text
    elif isinstance(text, (list, tuple)) and len(text) == 2:
        lo, hi = text
    else:
        s = str(text).strip()
        m = re.fullmatch(r"(\d+)\s*(?:\.\.|-|:)\s*(\d+)", s)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
        elif s.isdigit():
            lo = hi = int(s)
        else:
            raise PerfcastError(f"--reps {text!r}: expected MIN..MAX or N", where="reps")
    try:
        lo, hi = int(lo), int(hi)
    except (TypeError, ValueError):
        raise PerfcastError(f"--reps {text!r}: expected integers", where="reps") from None
    if lo < 1 or hi < lo:
        raise PerfcastError(f"--reps {text!r}: need 1 <= MIN <= MAX", where="reps")
    return lo, hi


@dataclass
class CampaignSpec:
    command: str | list[str]
    parameters: dict[str, list[float]]
    reps_min: int = 3
    reps_max: int = 10
    cv: float = 0.05
    #: seconds per run; None: automatic (see the module docstring); 0: no limit
    timeout: float | None = None
    collect: list[tuple[str, bool]] = field(default_factory=lambda: [("time", True)])
    #: collector settings: timer_regex, perf {frequency, event, callgraph}, counters {events},
    #: memory {events (perf stat -a events, default Intel's uncore_imc CAS counts)},
    #: cachegrind {I1, D1, LL, reps, toggle (function patterns to count in; start-up left out)}
    settings: dict = field(default_factory=dict)
    launcher: str = "local"
    oversubscribe: bool = True
    seed: int = 0
    max_failures: int = 2
    env: dict = field(default_factory=dict)
    workdir: str = "."
    cv_metric: str = "time"
    slurm: dict = field(default_factory=dict)
    #: the automatic limit before any run succeeded (seconds; 0: none)
    first_timeout: float = FIRST_TIMEOUT
    #: bytes of stdout and of stderr kept per run (each); None: all
    output_cap: int | None = OUTPUT_CAP

    def __post_init__(self):
        if isinstance(self.collect, str):
            self.collect = coll.parse_names(self.collect)
        self.collect = [tuple(x) if not isinstance(x, str) else (x, True) for x in self.collect]
        self.parameters = {str(k): [float(v) for v in vs] for k, vs in self.parameters.items()}
        self.validate()

    def validate(self):
        if not self.parameters:
            raise PerfcastError("a campaign needs at least one parameter (-P NAME=V1,V2)", where="parameters")
        for k, vs in self.parameters.items():
            if k in ("rep", "callpath", "metric", "value", "rank", "thread", "wrap"):
                raise PerfcastError(f"parameter name {k!r} is reserved", where="parameters")
            if not vs:
                raise PerfcastError(f"parameter {k!r} has no values", where="parameters")
            twice = sorted({v for v in vs if vs.count(v) > 1})
            if twice:
                raise PerfcastError(f"parameter {k!r}: the value {fmt_value(twice[0])} is given twice "
                                    f"(each value is one configuration)", where="parameters")
        if not (1 <= self.reps_min <= self.reps_max):
            raise PerfcastError("need 1 <= reps_min <= reps_max", where="reps")
        if not (self.cv >= 0):
            raise PerfcastError(f"cv {self.cv} must be >= 0", where="cv")
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout >= 0):
            raise PerfcastError(f"timeout {self.timeout} must be >= 0 seconds (0: no limit)", where="timeout")
        if not (math.isfinite(self.first_timeout) and self.first_timeout >= 0):
            raise PerfcastError(f"first_timeout {self.first_timeout} must be >= 0 seconds (0: no limit)",
                                where="first_timeout")
        if self.output_cap is not None and not (isinstance(self.output_cap, int) and self.output_cap >= 1024):
            raise PerfcastError(f"output_cap {self.output_cap!r} must be >= 1024 bytes (None: no cap)",
                                where="output_cap")
        if self.launcher not in ("local", "slurm"):
            raise PerfcastError(f"launcher {self.launcher!r}: use local or slurm", where="launcher")
        if self.max_failures < 1:
            raise PerfcastError("max_failures must be >= 1", where="max_failures")
        tokens = self.tokens()
        if not tokens:
            raise PerfcastError("empty command", where="command")
        used = set()
        for t in tokens:
            for name in _PLACEHOLDER.findall(t):
                if name != "wrap" and name not in self.parameters:
                    raise PerfcastError(f"command uses {{{name}}} but there is no parameter {name!r} "
                                        f"(parameters: {', '.join(self.parameters)})", where="command")
                used.add(name)
        # only the command's words are substituted (build_argv; env and workdir are taken as they are):
        # a parameter that varies but never reaches the command would label identical runs as different
        # points.  One value may stay a label of the campaign.
        for k, vs in self.parameters.items():
            if len(vs) > 1 and k not in used:
                raise PerfcastError(f"parameter {k} has {len(vs)} values but the command never uses {{{k}}} "
                                    f"(each run would be the same; give it one value to keep it as a label)",
                                    where="command")
        if "{wrap}" in tokens and not all(t == "{wrap}" or "{wrap}" not in t for t in tokens):
            raise PerfcastError("{wrap} must be a word of its own in the command", where="command")
        cg = self.settings.get("cachegrind")
        if isinstance(cg, dict) and cg.get("toggle") is not None:
            coll.parse_toggle(cg["toggle"])
        mem = self.settings.get("memory")
        if mem is not None:
            if not isinstance(mem, dict) or set(mem) - {"events"}:
                raise PerfcastError("memory: a mapping with one option, events: [perf event names]", where="memory")
            if "events" in mem:
                coll.parse_events(mem["events"])

    def tokens(self) -> list[str]:
        if isinstance(self.command, str):
            try:
                return shlex.split(self.command)
            except ValueError as e:
                raise PerfcastError(f"cannot split the command: {e}", where="command") from None
        return [str(t) for t in self.command]

    def grid(self) -> list[dict[str, float]]:
        names = list(self.parameters)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.parameters.values())]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["collect"] = [n + ("" if r else "?") for n, r in self.collect]
        return d

    def fingerprint(self) -> dict:
        """What must not change when a campaign is resumed (the grid, reps and cv may)."""
        return {"command": self.tokens(), "collect": sorted(n for n, _ in self.collect),
                "settings": self.settings, "env": self.env, "workdir": str(Path(self.workdir).resolve()),
                "parameters": sorted(self.parameters)}

    @classmethod
    def from_dict(cls, d: dict, source: str | Path | None = None) -> "CampaignSpec":
        if not isinstance(d, dict):
            raise PerfcastError("a campaign file is a mapping (command:, parameters:, ...)", source)
        unknown = set(d) - _KEYS
        if unknown:
            raise PerfcastError(f"unknown key(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(_KEYS))})",
                                source, sorted(unknown)[0])
        if "command" not in d:
            raise PerfcastError("no command", source, "command")
        params = d.get("parameters")
        if not isinstance(params, dict) or not params:
            raise PerfcastError("parameters: a mapping NAME: [values]", source, "parameters")
        grid = {}
        for k, v in params.items():
            if isinstance(v, str):
                _, vals = parse_param(f"{k}={v}")
            elif isinstance(v, (int, float)):
                vals = [float(v)]
            elif isinstance(v, list):
                try:
                    vals = [float(x) for x in v]
                except (TypeError, ValueError):
                    raise PerfcastError(f"parameter {k!r}: values must be numbers", source, f"parameters.{k}") from None
            else:
                raise PerfcastError(f"parameter {k!r}: give a list of numbers", source, f"parameters.{k}")
            grid[str(k)] = vals
        try:
            lo, hi = parse_reps(d.get("reps", "3..10"))
            settings = {k: d[k] for k in ("timer_regex", "perf", "counters", "memory", "cachegrind")
                        if d.get(k) is not None}
            for k in ("perf", "counters", "memory", "cachegrind"):
                if k in settings and not isinstance(settings[k], dict):
                    raise PerfcastError(f"{k}: a mapping of options", where=k)
            workdir = d.get("workdir", ".")
            if source is not None and not Path(workdir).is_absolute():
                workdir = str((Path(source).parent / workdir).resolve())
            collect = d.get("collect", ["time"])
            return cls(command=d["command"], parameters=grid, reps_min=lo, reps_max=hi,
                       cv=float(d.get("cv", 0.05)),
                       timeout=parse_timeout(d.get("timeout")),
                       first_timeout=_or(parse_timeout(d.get("first_timeout"), "first_timeout"), FIRST_TIMEOUT),
                       output_cap=parse_size(d["output_cap"]) if "output_cap" in d else OUTPUT_CAP,
                       collect=coll.parse_names(collect), settings=settings,
                       launcher=str(d.get("launcher", "local")), oversubscribe=bool(d.get("oversubscribe", True)),
                       seed=int(d.get("seed", 0)), max_failures=int(d.get("max_failures", 2)),
                       env={str(k): str(v) for k, v in (d.get("env") or {}).items()}, workdir=workdir,
                       cv_metric=str(d.get("cv_metric", "time")), slurm=dict(d.get("slurm") or {}))
        except PerfcastError as e:
            raise e.at(source) from None
        except (TypeError, ValueError) as e:
            raise PerfcastError(f"bad value: {e}", source) from None


def _or(value, default):
    return default if value is None else value


def load_spec(path: str | Path) -> tuple[CampaignSpec, str | None]:
    """A campaign from a YAML file; also returns its ``output`` (relative to the file) if given."""
    from ..yamlfile import read_yaml

    path = Path(path)
    d = read_yaml(path, "the campaign file")
    spec = CampaignSpec.from_dict(d, path)
    out = d.get("output")
    if out is not None and not Path(out).is_absolute():
        out = str(path.parent / out)
    return spec, out


def campaign_dir(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".campaign")


def config_key(config: dict) -> str:
    return "_".join(f"{k}{fmt_value(v)}" for k, v in config.items())


# -- journal ------------------------------------------------------------------------------------------
class Journal:
    """Append-only JSON lines; each record is one write + fsync, a torn tail is cut off on load."""

    def __init__(self, path: Path):
        self.path = path

    def load(self) -> list[dict]:
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
                fh.flush()
                os.fsync(fh.fileno())
            raw = raw[:cut]
        out = []
        for i, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                raise PerfcastError("corrupt journal line (not JSON)", self.path, i) from None
        return out

    def append(self, record: dict):
        data = (json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n").encode()
        with deferred_signals():  # a signal cannot tear the record
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)


# -- command preparation ------------------------------------------------------------------------------
def _is_openmpi() -> bool:
    v = machine.describe()["tools"].get("mpirun") or ""
    return "Open MPI" in v or "OpenRTE" in v


def _program_index(tokens: list[str]) -> int | None:
    """Index of the program in an MPI launcher command line (None: not an MPI launch)."""
    if not tokens or Path(tokens[0]).name not in _MPI_LAUNCHERS:
        return None
    i = 1
    while i < len(tokens):
        t = tokens[i]
        if t == "--":
            return i + 1
        if not t.startswith("-") or t == "-":
            return i
        if "=" in t:
            i += 1
        elif t in _ARG2:
            i += 3
        elif t in _ARG1:
            i += 2
        else:
            i += 1
    raise PerfcastError("cannot find the program in the MPI launcher command; mark it with {wrap} "
                        "(e.g. mpirun -np {p} {wrap} ./app)", where="command")


def build_argv(spec: CampaignSpec, config: dict, wrapper: str | None, extra_mpi_args: list[str]) -> list[str]:
    values = {k: fmt_value(v) for k, v in config.items()}
    tokens = [_PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1) == "wrap" else values[m.group(1)], t)
              for t in spec.tokens()]
    launcher = Path(tokens[0]).name in _MPI_LAUNCHERS
    if "{wrap}" in tokens:
        i = tokens.index("{wrap}")
        tokens = tokens[:i] + ([wrapper] if wrapper else []) + tokens[i + 1:]
    elif wrapper:
        i = _program_index(tokens)
        tokens = tokens[: i or 0] + [wrapper] + tokens[i or 0:]
    if launcher and Path(tokens[0]).name != "srun":
        extra = list(extra_mpi_args)
        if spec.oversubscribe and "--oversubscribe" not in tokens and "-oversubscribe" not in tokens and _is_openmpi():
            extra.insert(0, "--oversubscribe")
        tokens = tokens[:1] + extra + tokens[1:]
    return tokens


_ORDER = {"memory": 0, "perf": 1, "counters": 2, "cachegrind": 3}


def write_wrapper(run_dir: Path, colls: list[coll.Collector]) -> str | None:
    """``run_dir/wrap.sh`` that runs one rank under the per-rank tools (perf record outside perf stat)
    and, on the first rank of each node, under the node tools too (outermost); None without tools."""
    def words(kind: str) -> list[str]:
        found = [(c.name, getattr(c, kind)()) for c in colls]
        return [w for _, w in sorted((x for x in found if x[1]), key=lambda x: _ORDER.get(x[0], 9))]

    rank, node = words("wrapper"), words("node_wrapper")
    if not rank and not node:
        return None
    text = ("#!/bin/sh\n# perfcast: run one rank under the profilers of this run\n"
            f"D={shlex.quote(str(run_dir))}\n{coll.RANK_SH}\n")
    if node:
        text += (f"{coll.LOCAL_RANK_SH}\n"
                 "# the first process on each node also runs the system-wide tools (once per node)\n"
                 f"if [ \"$L\" = 0 ]; then exec {' '.join(node + rank)} \"$@\"; fi\n")
    text += f"exec {' '.join(rank)} \"$@\"\n" if rank else 'exec "$@"\n'
    path = run_dir / "wrap.sh"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


# -- the campaign -------------------------------------------------------------------------------------
class Campaign:
    def __init__(self, spec: CampaignSpec, output: str | Path, progress: Progress | None = None,
                 log: Callable[[str], None] | None = None, launcher=None):
        self.spec = spec
        self.output = Path(output)
        self.dir = campaign_dir(self.output)
        self.progress = progress or (lambda done, total, what="": None)
        self.log = log or (lambda msg: None)
        self.launcher = launcher
        self.journal = Journal(self.dir / JOURNAL)
        self.records: list[dict] = []
        self.warnings: list[str] = []
        #: run id -> how its time limit was chosen, and whether :attr:`round_limits` set it
        self._limits: dict[str, tuple[str, bool]] = {}
        #: the configurations to run (None: the spec's whole grid; an adaptive campaign sets its own)
        self.points: list[dict] | None = None
        #: successful runs wanted at a configuration, in place of the repetition rule (config_key ->
        #: count; an adaptive campaign's probe and chosen runs)
        self.at_least: dict[str, int] = {}
        #: a time limit per run of a round beyond the campaign's own (an adaptive campaign's budget
        #: left, shared among the round's runs): the round's (config, mode) list -> per run None (no
        #: more limit) or (seconds, why); seconds <= 0 holds the run back (not started).  A run that
        #: reaches such a limit is killed at once (SIGKILL, no grace): what it spends past the limit
        #: is spent past the budget (mpirun takes 1 s to end after SIGTERM), and its result is
        #: discarded anyway
        self.round_limits: Callable[[list[tuple[dict, str]]], list[tuple[float, str] | None]] | None = None
        #: the runs the last :meth:`execute` held back for :attr:`round_limits`, with why
        self.held: list[tuple[dict, str, str]] = []
        #: whether the first successful run was looked at for the ``cv_metric`` timer (:meth:`_check_cv_metric`)
        self._cv_metric_checked = False

    # state
    def _runs(self, config: dict, mode: str) -> list[dict]:
        key = config_key(config)
        return [r for r in self.records if r.get("type") == "run" and r["key"] == key and r["mode"] == mode]

    def _cv(self, runs: list[dict]) -> float | None:
        vals = []
        for r in runs:
            if r["status"] != "ok":
                continue
            if self.spec.cv_metric == "time":
                vals.append(r["wall"])
            else:
                t = (r.get("timers") or {}).get(self.spec.cv_metric)
                if t is not None:
                    vals.append(t)
        if len(vals) < 2:
            return None
        mean = sum(vals) / len(vals)
        if mean <= 0:
            return 0.0
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
        return math.sqrt(var) / mean

    def _needs(self, config: dict, mode: str) -> int:
        """Runs this (config, mode) still needs at least (0 = done)."""
        runs = self._runs(config, mode)
        ok = sum(r["status"] == "ok" for r in runs)
        failed = len(runs) - ok
        if failed >= self.spec.max_failures:
            return 0
        if mode != "main":
            target = self.sel.for_mode(mode)[0].reps if mode == "cachegrind" else 1
            return max(0, target - ok)
        wanted = self.at_least.get(config_key(config))
        if wanted is not None:
            return max(0, wanted - ok)
        if ok < self.spec.reps_min:
            return self.spec.reps_min - ok
        if ok >= self.spec.reps_max:
            return 0
        cv = self._cv(runs)
        return 0 if (cv is not None and cv <= self.spec.cv) else 1

    def mode_cost(self, mode: str) -> "ModeCost":
        """What a run of ``mode`` takes next to a plain (``main``) run of the same configuration
        (:class:`ModeCost`), from the campaign's own runs: over the configurations with successful
        runs of both, the medians (plain ``t``, mode ``w``) give ``w = alpha + beta t`` by least
        squares when the plain times differ by SPREAD_FOR_SLOPE x or more (``beta`` at least 1: no
        tool makes the application's own work faster; a noisy start-up can tilt the line below it,
        as on a test whose runs sleep, where the slope is 1); else ``beta`` is the
        tool's slowdown on the application's own work (CACHEGRIND_SLOWDOWN for cachegrind, 1 for
        perf, counters, memory: sampling and counting add little) and ``alpha`` the median of
        ``w - beta t`` (the tool's start-up, e.g. MPI_Init under valgrind).  A constant ratio would
        not do: on the jacobi demo cachegrind took 11x a plain run at n = 16..64 (start-up
        dominated: 4 s vs 0.35 s) and 27x at n = 512 (17.0 s vs 0.62 s); ``4.0 + 50 (t - 0.35)``
        gives 17.5 s there.  Before any pair: alpha 0, beta the slowdown."""
        prior = float(CACHEGRIND_SLOWDOWN) if mode == "cachegrind" else 1.0
        if mode == "main":
            return ModeCost(0.0, 1.0)
        walls: dict[tuple[str, str], list[float]] = {}
        for r in self.records:
            if r.get("type") == "run" and r["status"] == "ok" and r.get("wall") and r["mode"] in ("main", mode):
                walls.setdefault((r["key"], r["mode"]), []).append(float(r["wall"]))
        pairs = [(statistics.median(walls[(key, "main")]), statistics.median(w))
                 for (key, m), w in walls.items() if m == mode and walls.get((key, "main"))]
        if not pairs:
            return ModeCost(0.0, prior)
        t = [a for a, _ in pairs]
        w = [b for _, b in pairs]
        if len(pairs) >= 2 and max(t) >= SPREAD_FOR_SLOPE * min(t):
            tm, wm = statistics.fmean(t), statistics.fmean(w)
            beta = max(sum((a - tm) * (b - wm) for a, b in pairs) / sum((a - tm) ** 2 for a in t), 1.0)
            return ModeCost(wm - beta * tm, beta)
        return ModeCost(statistics.median(b - prior * a for a, b in pairs), prior)

    def grid(self) -> list[dict]:
        """The configurations this campaign runs: :attr:`points`, else the spec's grid."""
        return self.spec.grid() if self.points is None else [dict(c) for c in self.points]

    def _plan(self) -> list[tuple[dict, str]]:
        todo = [(c, m) for c in self.grid() for m in self.sel.modes if self._needs(c, m) > 0]
        rng = random.Random(f"{self.spec.seed}:{len(self.records)}")
        rng.shuffle(todo)
        return todo

    def _remaining(self) -> int:
        return sum(self._needs(c, m) for c in self.grid() for m in self.sel.modes)

    def _request(self, config: dict, mode: str, extra: tuple[float, str] | None = None) -> RunRequest:
        attempt = len(self._runs(config, mode))
        rid = f"{config_key(config)}.{mode}.{attempt}"
        run_dir = (self.dir / "runs" / rid).resolve()
        if run_dir.exists():
            shutil.rmtree(run_dir)  # an interrupted, unrecorded attempt: its files are stale
        run_dir.mkdir(parents=True)
        colls = self.sel.for_mode(mode)
        wrapper = write_wrapper(run_dir, colls)
        env = {k: str(v) for k, v in self.spec.env.items()}
        mpi_args: list[str] = []
        for c in colls:
            env.update(c.env(run_dir))
            mpi_args += c.mpirun_args(run_dir)
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        env["PERFCAST_RUN_ID"] = rid
        argv = build_argv(self.spec, config, wrapper, mpi_args)
        limit, why = self.time_limit(config, mode)
        rounds = extra is not None and (limit is None or extra[0] < limit)
        if rounds:
            limit, why = extra
        self._limits[rid] = (why, rounds)
        return RunRequest(id=rid, config=dict(config), mode=mode, attempt=attempt, argv=argv, env=env,
                          run_dir=str(run_dir), cwd=str(Path(self.spec.workdir).resolve()), timeout=limit,
                          timer_regex=self.sel.collectors[0].pattern, output_cap=self.spec.output_cap,
                          stop_grace=0.0 if rounds else 2.0)

    def time_limit(self, config: dict, mode: str) -> tuple[float | None, str]:
        """The run time limit of the next run of (config, mode) and how it was chosen (see the module
        docstring): explicit, or max(AUTO_MIN, AUTO_FACTOR x the median successful runtime of this
        configuration, else x the longest successful run so far), else the first-run limit."""
        slow = CACHEGRIND_SLOWDOWN if mode == "cachegrind" else 1
        if self.spec.timeout is not None:
            if self.spec.timeout == 0:
                return None, "no limit"
            return self.spec.timeout * slow, "--timeout" + (f" x {slow} (cachegrind)" if slow > 1 else "")
        own = sorted(r["wall"] for r in self._runs(config, mode) if r["status"] == "ok" and r.get("wall"))
        if own:
            mid = len(own) // 2
            median = own[mid] if len(own) % 2 else (own[mid - 1] + own[mid]) / 2
            return (max(AUTO_MIN, AUTO_FACTOR * median),
                    f"automatic: max({AUTO_MIN:g} s, {AUTO_FACTOR:g} x this configuration's median run "
                    f"{median:.3g} s)")
        walls = [r["wall"] for r in self.records if r.get("type") == "run" and r["status"] == "ok" and r.get("wall")
                 and r["mode"] == mode]
        if walls:
            return (max(AUTO_MIN, AUTO_FACTOR * max(walls)),
                    f"automatic: max({AUTO_MIN:g} s, {AUTO_FACTOR:g} x the longest successful run so far "
                    f"{max(walls):.3g} s)")
        main = [r["wall"] for r in self.records if r.get("type") == "run" and r["status"] == "ok" and r.get("wall")
                and r["mode"] == "main"]
        if slow > 1 and main:
            return (max(AUTO_MIN, AUTO_FACTOR * max(main)) * slow,
                    f"automatic: max({AUTO_MIN:g} s, {AUTO_FACTOR:g} x the longest successful run so far "
                    f"{max(main):.3g} s) x {slow} (cachegrind)")
        if not self.spec.first_timeout:
            return None, "no limit before the first successful run"
        return self.spec.first_timeout, "the first-run limit (no run has succeeded yet; --first-timeout)"

    def _finish(self, req: RunRequest, result: dict):
        # a finished run is journalled whole before SIGINT/SIGTERM/SIGHUP may stop the campaign
        with deferred_signals():
            self._record(req, result)

    def _record(self, req: RunRequest, result: dict):
        run_dir = Path(req.run_dir)
        status, reason = result.get("status", "error"), result.get("reason")
        why, rounds = self._limits.pop(req.id, (None, False))
        if status == "timeout" and why and rounds:
            reason = f"{reason} ({why})"
        elif status == "timeout" and why and not why.startswith("--timeout"):
            reason = f"{reason} ({why}; set --timeout to change it)"
        values = None
        if status == "ok":
            try:
                values = self._values(req.mode, run_dir, result)
            except coll.InvalidTimer:
                raise   # the application's output is wrong, not the run: rerunning would repeat it
            except PerfcastError as e:
                status, reason = "failed", f"collector output unreadable: {e.format()}"
        record = {"type": "run", "id": req.id, "key": config_key(req.config), "config": req.config,
                  "mode": req.mode, "attempt": req.attempt, "status": status, "reason": reason,
                  "command": req.argv, "env": result.get("env", {}), "host": result.get("host"),
                  "start": result.get("start"), "end": result.get("end"), "start_epoch": result.get("start_epoch"),
                  "wall": result.get("wall"), "exit_code": result.get("exit_code"),
                  "stdout_tail": result.get("stdout_tail", ""), "stderr_tail": result.get("stderr_tail", ""),
                  "timers": result.get("timers", {}), "values": values}
        # what else kept the run's CPUs busy (launchers.CpuShare), where it could be measured
        record.update({k: result[k] for k in ("cpus", "cpu", "others", "others_resolution") if result.get(k) is not None})
        if any((result.get("output_dropped") or {}).values()):
            record["output_dropped"] = result["output_dropped"]  # bytes cut out of stdout/stderr (output cap)
        if "machine" in result:
            record["machine"] = result["machine"]
        self.journal.append(record)
        self.records.append(record)
        if status != "ok":
            self.log(f"run {req.id} {status}: {reason}")
        elif req.mode == "main":
            self._check_cv_metric(record)
        self.progress(self._done(), self._done() + self._remaining(), req.id)

    def _done(self) -> int:
        return sum(1 for r in self.records if r.get("type") == "run")

    def _values(self, mode: str, run_dir: Path, result: dict) -> dict:
        exps: list[tuple[coll.Collector, Experiment]] = []
        for c in self.sel.for_mode(mode):
            try:
                e = c.collect(run_dir, result)
            except coll.InvalidTimer:
                raise
            except PerfcastError as err:
                raise PerfcastError(f"{c.name}: {err.format()}") from None
            if e is not None:
                exps.append((c, e))
        metrics: dict[str, dict] = {}
        tree = CallTree()
        frames = []
        coverage = []   # the callpaths each collector could see (experiment.metric_coverage)
        for c, e in exps:
            rename = {}
            for name, m in e.metrics.items():
                new = name
                if name in metrics and metrics[name] != m.to_dict():
                    new = ("pmpi_" if c.name == "mpi" else f"{c.name}_") + name
                    rename[name] = new
                metrics[new] = dataclasses.replace(m, name=new, aggregate="").to_dict()
            tree = tree.merged(e.tree)
            coverage.append({"metrics": [rename.get(n, n) for n in e.metrics], "callpaths": e.tree.paths})
            d = e.data.astype({"callpath": str, "metric": str})
            if rename:
                d["metric"] = d["metric"].map(lambda x: rename.get(x, x))
            frames.append(d)
        data = pd.concat(frames, ignore_index=True)
        out = {"callpath": data["callpath"].tolist(), "metric": data["metric"].tolist(),
               "value": [float(v) for v in data["value"]],
               "metrics": list(metrics.values()), "tree": tree.to_records(), "coverage": coverage}
        if "rank" in data.columns:
            out["rank"] = [int(r) for r in data["rank"].fillna(0)]
        # the process grids the run created (the PMPI library's record): perfcast.fit.grid
        carts = [c for _, e in exps for c in (e.meta.get("pmpi") or {}).get("cart") or ()]
        if carts:
            out["cart"] = carts
        return out

    # main loop
    def run(self) -> Experiment:
        with self.session():
            self.execute()
            return self.write()

    @contextlib.contextmanager
    def session(self):
        """The campaign open: its directory locked, header written, journal loaded, launcher ready
        and the runs of an interrupted launch recovered.  A campaign that failed before its first
        run (a collector or launcher unavailable) leaves nothing behind; one with runs stays, to be
        resumed."""
        fresh = not self.dir.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = open(self.dir / "lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise PerfcastError("another perfcast collect is running this campaign", self.dir) from None
        try:
            self._open()
            yield self
        except BaseException:
            if fresh and {f.name for f in self.dir.iterdir()} <= {"lock", HEADER}:
                shutil.rmtree(self.dir, ignore_errors=True)
            raise
        finally:
            lock.close()

    def _open(self) -> None:
        head = self.dir / HEADER
        fp = self.spec.fingerprint()
        if head.is_file():
            try:
                old = json.loads(head.read_text())
            except ValueError:
                raise PerfcastError("corrupt campaign header", head) from None
            if old.get("fingerprint") != json.loads(json.dumps(fp)):
                diff = [k for k in fp if old.get("fingerprint", {}).get(k) != json.loads(json.dumps(fp[k]))]
                raise PerfcastError(f"this campaign directory holds a different campaign ({', '.join(diff)} "
                                    f"differ); choose another output or remove {self.dir}", head)
        self.sel = coll.select(self.spec.collect, self.spec.settings)
        for w in self.sel.warnings:
            self.warnings.append(w)
            self.log(w)
        _atomic_write(head, json.dumps({"format": FORMAT, "spec": self.spec.to_dict(), "fingerprint": fp,
                                        "machine": machine.describe(),
                                        "collectors": {c.name: c.options() for c in self.sel.collectors}},
                                       indent=1))
        self.records = self.journal.load()
        if self.launcher is None:
            if self.spec.launcher == "slurm":
                ok, why = SlurmLauncher.available()
                if not ok:
                    raise PerfcastError(f"the Slurm launcher cannot work here: {why}", where="launcher")
                self.launcher = SlurmLauncher(self.dir, SlurmOptions(**self.spec.slurm))
            else:
                self.launcher = LocalLauncher(self.dir)
        known = {r["id"] for r in self.records if r.get("type") == "run"}
        self.launcher.recover(lambda req, res: None if req.id in known else self._finish(req, res), None)
        self._say_given_up()
        first = next((r for r in self.records if r.get("type") == "run" and r["status"] == "ok"
                      and r["mode"] == "main"), None)
        if first is not None:
            self._check_cv_metric(first)

    def _check_cv_metric(self, record: dict) -> None:
        """Warn (once) when the first successful run printed no timer named ``cv_metric``: --cv then
        never sees two values, and every configuration runs ``reps_max`` times."""
        name = self.spec.cv_metric
        if name == "time" or self._cv_metric_checked:
            return
        self._cv_metric_checked = True
        timers = sorted(record.get("timers") or {})
        if name in timers:
            return
        seen = f"its timers: {', '.join(timers[:10])}{', ...' if len(timers) > 10 else ''}" if timers else "no timers"
        w = (f"--cv-metric {name}: the first successful run ({record['id']}) printed no timer {name!r} ({seen}); "
             f"--cv cannot stop the repetitions, each configuration runs --reps MAX ({self.spec.reps_max}) times")
        self.warnings.append(w)
        self.log(w)

    def _say_given_up(self) -> None:
        """On resume: the configurations an earlier launch gave up (``max_failures`` failed runs) are not
        run again; say which, why, and how to retry them (the limit is not part of the campaign's
        fingerprint, so a larger one resumes the same campaign)."""
        given = [m for m in self.incomplete() if m["failed"] >= self.spec.max_failures]
        if not given:
            return
        names = "; ".join(", ".join(f"{k}={fmt_value(v)}" for k, v in m["config"].items())
                          + ("" if m["mode"] == "main" else f" ({m['mode']} runs)") for m in given)
        last = given[-1]
        more = max(m["failed"] for m in given) + 1
        w = (f"{len(given)} configuration(s) given up after {self.spec.max_failures} failed run(s) are not run "
             f"again: {names} (last: {last['last_status']}: {last['last_reason']}); to retry them rerun with "
             f"--max-failures {more} (max_failures: in a campaign file)")
        self.warnings.append(w)
        self.log(w)

    def execute(self) -> None:
        """Run what :meth:`grid` still needs (rounds of interleaved runs, see the module docstring)."""
        self.progress(self._done(), self._done() + self._remaining(), "")
        self.held = []
        while True:
            todo = self._plan()
            if not todo:
                break
            extra = self.round_limits(todo) if self.round_limits is not None else [None] * len(todo)
            self.held = [(c, m, x[1]) for (c, m), x in zip(todo, extra) if x is not None and x[0] <= 0]
            requests = [self._request(c, m, x) for (c, m), x in zip(todo, extra) if x is None or x[0] > 0]
            if not requests:
                break
            self.launcher.run_batch(requests, self._finish)

    def experiment(self, extra: dict | None = None) -> Experiment:
        """The experiment of the journal so far (not stored); ``extra``: more campaign metadata."""
        return build_experiment(self.spec, self.records,
                                {**self._header_meta(), "incomplete": self.incomplete(), **(extra or {})})

    def write(self, extra: dict | None = None) -> Experiment:
        """Build the experiment of the journal and store it at the output (atomically)."""
        exp = self.experiment(extra)
        store.write(exp, self.output)
        return exp

    def note(self, record: dict) -> None:
        """Append a record that is not a run (an adaptive campaign's decisions) to the journal."""
        self.journal.append(record)
        self.records.append(record)

    def incomplete(self) -> list[dict]:
        """The configurations (and cachegrind runs) short of the wanted successful runs: ``reps_min``
        (the collector's ``reps`` for cachegrind runs).  Each: config, mode, succeeded, wanted, failed,
        last_status and last_reason (of its last failed run; None if none failed)."""
        out = []
        for c in self.grid():
            for m in self.sel.modes:
                runs = self._runs(c, m)
                ok = sum(r["status"] == "ok" for r in runs)
                wanted = self.spec.reps_min if m == "main" else (
                    self.sel.for_mode(m)[0].reps if m == "cachegrind" else 1)
                if ok >= wanted:
                    continue
                bad = [r for r in runs if r["status"] != "ok"]
                out.append({"config": dict(c), "key": config_key(c), "mode": m, "succeeded": ok, "wanted": wanted,
                            "failed": len(bad), "last_status": bad[-1]["status"] if bad else None,
                            "last_reason": bad[-1]["reason"] if bad else None})
        return out

    def _header_meta(self) -> dict:
        return {"machine": machine.describe(), "collectors": {c.name: c.options() for c in self.sel.collectors},
                "warnings": self.warnings, "campaign_dir": str(self.dir)}


def build_experiment(spec: CampaignSpec, records: list[dict], extra: dict | None = None) -> Experiment:
    """The experiment of a campaign's journal: one repetition per successful run of a point."""
    params = list(spec.parameters)
    frames, metrics, tree = [], {}, CallTree()
    reps: dict[tuple, int] = {}
    runs_meta, failed = [], []
    seen: set[str] = set()
    any_rank = any(r.get("values") and "rank" in r["values"] for r in records if r.get("type") == "run")
    # per metric, the callpaths its collector saw in some run: each collector's own record, or (journals
    # written before it) the run's tree -- a cachegrind run's functions, a main run's timers
    saw: dict[str, set] = {}
    for r in records:
        if r.get("type") != "run" or r["id"] in seen:
            continue
        seen.add(r["id"])
        info = {k: r.get(k) for k in ("id", "config", "mode", "status", "reason", "wall", "start", "host", "exit_code")}
        # what else kept the run's CPUs busy (launchers.CpuShare), where it was measured
        info.update({k: r[k] for k in ("cpus", "cpu", "others", "others_resolution") if r.get(k) is not None})
        if (r.get("values") or {}).get("cart"):
            info["cart"] = r["values"]["cart"]
        runs_meta.append(info)
        if r["status"] != "ok":
            failed.append(info)
            continue
        v = r["values"]
        if set(r["config"]) != set(params):
            continue  # a run of a campaign with other parameter names cannot be placed
        key = (r["key"], r["mode"])
        rep = reps.get(key, 0)
        reps[key] = rep + 1
        for m in v["metrics"]:
            metric = Metric.from_dict(m)
            if m["name"] in metrics and metrics[m["name"]] != metric:
                if metrics[m["name"]].kind != metric.kind or metrics[m["name"]].scope != metric.scope:
                    raise PerfcastError(f"metric {m['name']!r} changes meaning between runs (run {r['id']})")
                continue
            metrics[m["name"]] = metric
        for path, parent, name in v["tree"]:
            tree.add(path, parent, name)
        for g in v.get("coverage") or [{"metrics": [m["name"] for m in v["metrics"]],
                                        "callpaths": [t[0] for t in v["tree"]]}]:
            for m in g["metrics"]:
                saw.setdefault(m, set()).update(g["callpaths"])
        df = pd.DataFrame({"callpath": v["callpath"], "metric": v["metric"], "value": v["value"]})
        if any_rank:
            df["rank"] = v.get("rank", [0] * len(df))
        for p in params:
            df[p] = float(r["config"][p])
        df["rep"] = rep
        frames.append(df)
    if not frames:
        first = failed[0] if failed else None
        raise PerfcastError("no run succeeded" + (f"; e.g. {first['id']}: {first['status']}: {first['reason']}"
                                                   if first else ""))
    data = pd.concat(frames, ignore_index=True)
    meta = {"campaign": {"command": spec.tokens(), "grid": spec.parameters, "reps": [spec.reps_min, spec.reps_max],
                         "cv": spec.cv, "cv_metric": spec.cv_metric, "collect": [n for n, _ in spec.collect],
                         "launcher": spec.launcher, "runs": runs_meta, "failed": failed,
                         "rank_note": ("run-level values (wall time, timers without a rank) are stored at rank 0"
                                       if any_rank else None),
                         **copy.deepcopy(extra or {})},
            "sources": [str(extra.get("campaign_dir"))] if extra and extra.get("campaign_dir") else []}
    cov = coverage_record(saw, tree.paths)
    if cov:
        meta[COVERAGE] = cov
    return Experiment(params, data, metrics.values(), tree, meta)


def check_output(output: str | Path, force: bool = False) -> Path:
    """The ``-o`` of a campaign, checked before anything runs: :func:`perfcast.output.check_store_output`'s
    rule (never a file, FIFO or device; a new name is a store's, ``NAME.perfcast``; its directory
    exists) and an existing experiment is replaced only with ``force`` -- unless it is this campaign's
    own, with its journal next to it (``NAME.perfcast.campaign/``): that is resumed (the journal's
    header must match the campaign, :meth:`Campaign._open`)."""
    from ..output import check_store_output

    out = check_store_output(output, True)
    if out.exists() and not store.is_store(out):
        raise PerfcastError("output exists and is not a perfcast experiment", out)
    if out.exists() and not force and not (campaign_dir(out) / HEADER).is_file():
        raise PerfcastError(f"output exists and has no campaign journal to resume ({campaign_dir(out).name}/); "
                            f"use --force to replace it", out)
    return out


#: launcher options that change the directory the program is found in (then it is not checked)
_CHDIR = {"-wdir", "--wdir", "-wd", "--chdir", "-D", "-chdir"}


def _expand(spec: CampaignSpec, word: str) -> list[str]:
    """``word`` with its placeholders replaced, for every configuration of the grid (``{wrap}`` kept)."""
    if not _PLACEHOLDER.search(word):
        return [word]
    out = []
    for config in spec.grid():
        values = {k: fmt_value(v) for k, v in config.items()}
        w = _PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1) == "wrap" else values[m.group(1)], word)
        if w not in out:
            out.append(w)
    return out


def check_program(spec: CampaignSpec) -> None:
    """Refuse, before anything runs, a command whose program cannot start (each run would fail and
    the configurations would be given up after ``max_failures``): its first word as the launcher
    starts it -- a path (with a ``/``) from the working directory, else a name on the run's PATH
    (``env: PATH`` if set) -- must be an executable file; after an MPI launcher (``mpirun``, ``srun``)
    the program it starts (after ``{wrap}``, else after the launcher's options) must exist when it is
    a path and the launcher does not change the directory.  Local campaigns only: a Slurm run finds
    its program on the node."""
    if spec.launcher != "local":
        return
    tokens = spec.tokens()
    cwd = Path(spec.workdir).resolve()
    search = spec.env.get("PATH", os.environ.get("PATH", os.defpath))
    for word in _expand(spec, tokens[0]):
        if "/" in word:
            path = cwd / word
            if not path.exists():
                raise PerfcastError(f"the command's program {word!r} does not exist (in {cwd})", where="command")
            if path.is_dir() or not os.access(path, os.X_OK):
                raise PerfcastError(f"the command's program {word!r} is not an executable file", where="command")
        elif shutil.which(word, path=search) is None:
            raise PerfcastError(f"the command's program {word!r} is not found on PATH", where="command")
    if Path(tokens[0]).name not in _MPI_LAUNCHERS or _CHDIR & set(tokens):
        return
    if "{wrap}" in tokens:
        i = tokens.index("{wrap}") + 1
    else:
        try:
            i = _program_index(tokens)
        except PerfcastError:
            return   # said when the first run is prepared
    if i is None or i >= len(tokens) or "/" not in tokens[i]:
        return   # a name: the launcher searches its own PATH, on every node
    for word in _expand(spec, tokens[i]):
        if not (cwd / word).exists():
            raise PerfcastError(f"the program {word!r} that {Path(tokens[0]).name} starts does not exist "
                                f"(in {cwd})", where="command")


def run_campaign(spec: CampaignSpec, output: str | Path, progress: Progress | None = None,
                 log: Callable[[str], None] | None = None, launcher=None, force: bool = False) -> Experiment:
    """Run (or resume) the campaign and store its experiment at ``output``; returns the experiment.
    An existing ``output`` without the campaign's journal is replaced only with ``force``
    (:func:`check_output`)."""
    out = check_output(output, force)
    check_program(spec)
    return Campaign(spec, out, progress, log, launcher).run()


def rebuild(output: str | Path) -> Experiment:
    """Rebuild (and store) the experiment of an existing campaign from its journal alone."""
    cdir = campaign_dir(output)
    head = cdir / HEADER
    if not head.is_file():
        raise PerfcastError("no campaign here", cdir)
    h = json.loads(head.read_text())
    spec = CampaignSpec(**{**h["spec"], "collect": coll.parse_names(h["spec"]["collect"])})
    exp = build_experiment(spec, Journal(cdir / JOURNAL).load(),
                           {"machine": h.get("machine"), "collectors": h.get("collectors"), "campaign_dir": str(cdir)})
    store.write(exp, output)
    return exp

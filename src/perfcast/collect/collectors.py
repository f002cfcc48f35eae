"""Collectors: what a campaign measures in each run.

Every collector probes its availability (``available() -> (ok, reason)``) before the campaign
starts.  A collector named in ``--collect`` is *required*: if it cannot work here the campaign stops
with an error before running anything.  A name with a trailing ``?`` (``counters?``) is *optional*:
it is dropped with a one-line warning when unavailable.

==========  =================================================================================
time        wall time of the whole run (callpath ``app``, metric ``time``) and the timers the
            application prints (default regex ``perfcast-timer (\\S+) ([0-9.eE+-]+)``; callpath
            ``app-><name>``).  A timer printed several times (one line per rank) keeps the maximum
            unless the regex has a named group ``rank``.  Always on.
perf        ``perf record`` per rank (cycles where the PMU has them, cpu-clock otherwise), call
            graphs by frame pointers, ``-N -B --no-bpf-event``; read by :mod:`perfcast.io.perf`.
counters    ``perf stat`` per rank on the hardware events the machine supports (probed), and
            ``task-clock`` (the rank's CPU seconds) when there is at least one of them.
memory      DRAM traffic: ``perf stat -a`` on Intel's memory-controller (uncore) events
            ``uncore_imc/cas_count_read/`` and ``uncore_imc/cas_count_write/`` (MiB), or the events
            given (``--memory-events``, ``memory: {events: [...]}``).  These count system-wide only,
            so the first process of each node runs one ``perf stat -a`` around its rank, and the
            node's counts are stored at that process's rank (summed over nodes, they are the job's
            traffic).  It counts everything on the node: use exclusive nodes.  Needs root,
            CAP_PERFMON or ``kernel.perf_event_paranoid`` <= 0 (probed).  With ``counters``
            (instructions, cycles, task-clock) it gives the ``bandwidth`` group (``bw_cpi``) of
            ``perfcast project``; other event names are kept as they are but only the names
            :data:`perfcast.projection.signatures.ALIASES` knows feed that group.
cachegrind  ``valgrind --tool=cachegrind --cache-sim=yes`` per rank with a configurable geometry, in
            runs of its own (it slows the program ~50x, so those runs give no times); deterministic,
            one run per configuration unless told otherwise.  ``toggle`` (function patterns, valgrind
            wildcards ``*``/``?``) counts only inside those functions and their callees, so start-up
            code (``MPI_Init``'s getenv/strcmp/malloc) does not show as work: cachegrind itself has no
            such option before valgrind 3.22, so these runs use callgrind's identical cache
            simulator (``--tool=callgrind --cache-sim=yes --collect-atstart=no
            --toggle-collect=PATTERN``) and its self costs are written as ``cachegrind.out.rank<R>``.
mpi         the PMPI interposition library (:mod:`perfcast.collect.pmpi`) via LD_PRELOAD.
==========  =================================================================================

Per-rank tools wrap each rank: ``mpirun -np 4 <run_dir>/wrap.sh ./app``; the wrapper reads the rank
from ``OMPI_COMM_WORLD_RANK``/``PMIX_RANK``/``PMI_RANK``/``SLURM_PROCID`` and names its files
``perf.rank<R>.data``, ``perf.stat.rank<R>.csv``, ``cachegrind.out.rank<R>``.  perf record wraps
perf stat (perf stat only waits for the program, so the samples hardly see it; perf stat counts only
its child, not perf record).  Node tools (memory) wrap both, on the process whose node-local rank
(:data:`LOCAL_RANK_SH`) is 0: ``perf.memory.rank<R>.csv``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import RUN_TIMERS, SEP, CallTree, Experiment, Metric
from . import machine

ROOT = "app"
DEFAULT_TIMER_REGEX = r"perfcast-timer (\S+) ([0-9.eE+-]+)"
NAMES = ("time", "perf", "counters", "memory", "cachegrind", "mpi")
RANK_SH = 'R="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}"'
#: the process's rank on its node: Open MPI (OMPI_COMM_WORLD_LOCAL_RANK), MPICH's Hydra and Intel MPI
#: (MPI_LOCALRANKID), srun (SLURM_LOCALID), some PMIx launchers such as Cray PALS (PMIX_LOCAL_RANK;
#: Open MPI's PMIx sets only PMIX_RANK); 0 without a launcher
LOCAL_RANK_SH = 'L="${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-${PMIX_LOCAL_RANK:-0}}}}"'


class Collector:
    name = ""
    #: "main" runs (timed, repeated) or "cachegrind" runs (separate)
    mode = "main"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def wrapper(self) -> str | None:
        """Shell words (may use $D = run directory, $R = rank) put before the rank's command."""
        return None

    def node_wrapper(self) -> str | None:
        """Shell words put before the command of the first rank on each node (node-local rank $L = 0),
        outside the per-rank words, for system-wide counting once per node."""
        return None

    def env(self, run_dir: Path) -> dict[str, str]:
        return {}

    def mpirun_args(self, run_dir: Path) -> list[str]:
        return []

    def collect(self, run_dir: Path, result: dict) -> Experiment | None:
        return None

    def options(self) -> dict:
        return {}


# -- time ---------------------------------------------------------------------------------------------
class TimerScan:
    """The application timers in its output, fed a block of whole lines at a time (memory stays bounded
    whatever the output's size).  The regex applies line by line: ``^``/``$`` match at every line,
    a match never spans lines.  A timer seen several times keeps its maximum."""

    def __init__(self, timer_regex: str = DEFAULT_TIMER_REGEX):
        try:
            self.regex = re.compile(timer_regex)
            self.block_regex = re.compile(timer_regex, re.MULTILINE)
        except re.error as e:
            raise PerfcastError(f"timer regex {timer_regex!r} is invalid: {e}", where="timer_regex") from None
        names = self.regex.groupindex
        if not (("name" in names and "value" in names) or self.regex.groups >= 2):
            raise PerfcastError("the timer regex needs two groups (name, seconds) or named groups "
                                "'name' and 'value'", where="timer_regex")
        self.values: dict[tuple[str, int | None], float] = {}
        #: timers printed with a time no run can take (negative, NaN, infinite): [name, rank, text]
        self.invalid: list[list] = []

    def feed(self, block: str):
        """Scan ``block``, whole lines (a line cut short by the caller counts as a line)."""
        matches = list(self.block_regex.finditer(block))
        if any("\n" in m.group(0) for m in matches):
            # the regex can match across a line break: scan this block one line at a time
            matches = [m for line in block.split("\n") for m in self.regex.finditer(line)]
        gi = self.regex.groupindex
        for m in matches:
            name = m.group("name") if "name" in gi else m.group(1)
            raw = m.group("value") if "value" in gi else m.group(2)
            rank = int(m.group("rank")) if "rank" in gi and m.group("rank") is not None else None
            try:
                v = float(raw)
            except (TypeError, ValueError):
                continue
            if name is None:
                continue
            if not (v >= 0 and v != float("inf")):  # negative, NaN or infinite: refused by collect()
                if len(self.invalid) < 10:
                    self.invalid.append([name, rank, raw])
                continue
            key = (name, rank)
            self.values[key] = max(self.values.get(key, v), v)

    def feed_file(self, path: Path, block: int = 1 << 20):
        """Scan a file in blocks of whole lines."""
        rest = b""
        with open(path, "rb") as fh:
            while True:
                data = fh.read(block)
                if not data:
                    break
                data = rest + data
                cut = data.rfind(b"\n") + 1
                if cut == 0 and len(data) < block:
                    rest = data
                    continue
                cut = cut or len(data)
                self.feed(data[:cut].decode("utf-8", "replace"))
                rest = data[cut:]
        if rest:
            self.feed(rest.decode("utf-8", "replace"))

    def to_list(self) -> list[list]:
        """JSON-friendly ``[[name, rank or None, seconds], ...]``."""
        return [[n, r, v] for (n, r), v in self.values.items()]


class InvalidTimer(PerfcastError):
    """An application timer printed a time no run can take: the campaign stops (exit 2) instead of
    storing it or counting the run as failed and running it again."""


class TimeCollector(Collector):
    name = "time"

    def __init__(self, timer_regex: str = DEFAULT_TIMER_REGEX):
        TimerScan(timer_regex)  # validates
        self.pattern = timer_regex

    def options(self) -> dict:
        return {"timer_regex": self.pattern}

    def timers(self, text: str) -> dict[tuple[str, int | None], float]:
        scan = TimerScan(self.pattern)
        scan.feed(text)
        return scan.values

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        if result.get("timer_values") is not None:
            # scanned while the run streamed its output (the stored stdout may be capped)
            timers = {(n, None if r is None else int(r)): float(v) for n, r, v in result["timer_values"]}
            invalid = result.get("timer_invalid") or []
        else:
            scan = TimerScan(self.pattern)
            if (run_dir / "stdout.txt").is_file():
                scan.feed_file(run_dir / "stdout.txt")
            else:
                scan.feed(result.get("stdout_tail", ""))
            timers, invalid = scan.values, scan.invalid
        if invalid:
            name, rank, raw = invalid[0]
            raise InvalidTimer(f"timer {name!r}{'' if rank is None else f' (rank {rank})'} printed the time {raw!r}: "
                               f"a time must be a finite number >= 0 (fix the application's timer output or "
                               f"--timer-regex, then run the campaign again to resume it)", run_dir / "stdout.txt")
        result["timers"] = {f"{n}" + (f"@{r}" if r is not None else ""): v for (n, r), v in timers.items()}
        tree = CallTree()
        tree.add(ROOT, None, ROOT)
        rows = [(ROOT, "time", float(result["wall"]), None)]
        for (name, rank), v in timers.items():
            cp = tree.add(ROOT + SEP + name, ROOT, name)
            rows.append((cp, "time", v, rank))
        df = pd.DataFrame(rows, columns=["callpath", "metric", "value", "rank"])
        if df["rank"].isna().all():
            df = df.drop(columns="rank")
        else:
            df["rank"] = df["rank"].fillna(0).astype("int64")
        df["rep"] = 0
        m = Metric("time", "s", "time", "inclusive", RUN_TIMERS)
        return Experiment([], df, [m], tree, {})


# -- perf record --------------------------------------------------------------------------------------
def _probe_record(event: str) -> tuple[bool, str]:
    if not shutil.which("perf"):
        return False, "perf is not on PATH"
    # the probe's samples go to a pipe (-o -: perf's pipe mode) and are dropped: no scratch file, so
    # none in the system temporary directory that a probe killed outright would leave there
    try:
        proc = subprocess.run(["perf", "record", "-e", event, "-N", "-B", "--no-bpf-event", "-q", "-o", "-",
                               "--", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"perf record does not run: {e}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return False, f"perf record -e {event} fails here: {last.strip()[:160]}"
    return True, ""


class PerfCollector(Collector):
    name = "perf"

    def __init__(self, frequency: int = 999, event: str | None = None, callgraph: str = "fp"):
        if not (1 <= int(frequency) <= 100000):
            raise PerfcastError(f"perf frequency {frequency} is outside 1..100000 Hz", where="perf.frequency")
        self.frequency = int(frequency)
        self.requested_event = event
        self.callgraph = callgraph
        self._event: str | None = None

    @property
    def event(self) -> str:
        if self._event is None:
            if self.requested_event:
                self._event = self.requested_event
            else:
                self._event = "cycles" if machine.describe()["counters"].get("cycles") else "cpu-clock"
        return self._event

    def options(self) -> dict:
        return {"frequency": self.frequency, "event": self.requested_event, "callgraph": self.callgraph}

    def available(self):
        return _probe_record(self.event)

    def wrapper(self):
        cg = "-g" if self.callgraph == "fp" else f"--call-graph={shlex.quote(self.callgraph)}"
        return (f"perf record -F {self.frequency} -e {shlex.quote(self.event)} -N -B --no-bpf-event {cg} -q "
                f'-o "$D/perf.rank$R.data" --')

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        from ..io import perf as perf_io

        files = sorted(run_dir.glob("perf.rank*.data"))
        if not files:
            raise PerfcastError("perf wrote no perf.rank*.data file", run_dir)
        return perf_io.read_files(files, hz=machine.nominal_hz())


# -- perf stat ----------------------------------------------------------------------------------------
class CountersCollector(Collector):
    name = "counters"

    def __init__(self, events: list[str] | None = None):
        self.requested = list(events) if events else None
        self._events: list[str] | None = None

    def options(self) -> dict:
        return {"events": self.requested}

    @property
    def events(self) -> list[str]:
        if self._events is None:
            if self.requested:
                probe = machine.probe_perf_events(tuple(self.requested))
                self._events = [e for e, ok in probe.items() if ok]
            else:
                have = machine.describe()["counters"]
                self._events = [e for e in machine.HW_EVENTS if have.get(e)]
                # the ranks' CPU seconds (the bandwidth group's clock), with the hardware events only
                if self._events and have.get("task-clock"):
                    self._events.append("task-clock")
        return self._events

    def available(self):
        if not shutil.which("perf"):
            return False, "perf is not on PATH"
        if not self.events:
            what = ", ".join(self.requested) if self.requested else "any hardware event"
            return False, (f"perf stat cannot count {what} on this machine (no PMU access?); "
                           f"perf sampling with cpu-clock and cachegrind still work")
        return True, ""

    def wrapper(self):
        return f'perf stat -x , -e {shlex.quote(",".join(self.events))} -o "$D/perf.stat.rank$R.csv" --'

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        from ..io import perf as perf_io

        files = sorted(run_dir.glob("perf.stat.rank*.csv"))
        if not files:
            raise PerfcastError("perf stat wrote no perf.stat.rank*.csv file", run_dir)
        return perf_io.read_files(files)


# -- perf stat -a (memory controllers) ---------------------------------------------------------------
#: DRAM reads and writes counted by Intel's memory controllers (perf scales them to MiB)
MEMORY_EVENTS = ("uncore_imc/cas_count_read/", "uncore_imc/cas_count_write/")
_EVENT = re.compile(r"[A-Za-z_][\w.\-]*(?:/[\w.\-=:@]+/[A-Za-z]*)?(?::[A-Za-z]+)?")


def parse_events(value, where: str = "memory.events") -> list[str]:
    """perf event names: a list, or one string of comma-separated names; None gives the defaults."""
    if value is None:
        return list(MEMORY_EVENTS)
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise PerfcastError("memory events: a list of perf event names", where=where)
    out = []
    for it in items:
        e = it.strip() if isinstance(it, str) else it
        if not isinstance(e, str) or not _EVENT.fullmatch(e):
            raise PerfcastError(f"memory event {it!r}: expected a perf event name such as {MEMORY_EVENTS[0]} "
                                f"(no spaces or commas, so no raw event=..,umask=.. terms)", where=where)
        if e not in out:
            out.append(e)
    if not out:
        raise PerfcastError("memory events: give at least one perf event name", where=where)
    return out


class MemoryCollector(Collector):
    """DRAM traffic of the whole node, counted by ``perf stat -a`` once per node around the ranks."""

    name = "memory"

    def __init__(self, events=None):
        self.events = parse_events(events)

    def options(self) -> dict:
        return {"events": self.events}

    def available(self):
        return machine.probe_memory_events(tuple(self.events))

    def node_wrapper(self):
        # the node's counts are stored under the global rank of its first process
        return f'perf stat -a -x , -e {shlex.quote(",".join(self.events))} -o "$D/perf.memory.rank$R.csv" --'

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        from ..io import perf as perf_io

        files = sorted(run_dir.glob("perf.memory.rank*.csv"))
        if not files:
            raise PerfcastError("perf stat -a wrote no perf.memory.rank*.csv file (no process had node-local "
                                "rank 0?)", run_dir)
        return perf_io.read_files(files)


# -- cachegrind ---------------------------------------------------------------------------------------
_GEOM = re.compile(r"^\d+,\d+,\d+$")


def parse_toggle(value) -> list[str]:
    """Function patterns to count in: a string (one pattern) or a list of them."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise PerfcastError("cachegrind toggle: a function pattern or a list of them", where="cachegrind.toggle")
    out = []
    for it in items:
        if not isinstance(it, str) or not it.strip() or any(c in it for c in "\n\r\0"):
            raise PerfcastError(f"cachegrind toggle {it!r}: expected a function name pattern (e.g. 'solve_*')",
                                where="cachegrind.toggle")
        if it.strip() not in out:
            out.append(it.strip())
    return out


class CachegrindCollector(Collector):
    name = "cachegrind"
    mode = "cachegrind"

    def __init__(self, I1: str | None = None, D1: str | None = None, LL: str | None = None, reps: int = 1,
                 toggle=None):
        for key, g in (("I1", I1), ("D1", D1), ("LL", LL)):
            if g is not None and not _GEOM.match(str(g)):
                raise PerfcastError(f"cache geometry {g!r}: expected SIZE,ASSOC,LINE (bytes, ways, bytes)",
                                    where=f"cachegrind.{key}")
        self.geometry = {"I1": I1, "D1": D1, "LL": LL}
        self.reps = int(reps)
        self.toggle = parse_toggle(toggle)

    def options(self) -> dict:
        return {**self.geometry, "reps": self.reps, **({"toggle": self.toggle} if self.toggle else {})}

    def available(self):
        if not shutil.which("valgrind"):
            return False, "valgrind is not on PATH"
        return True, ""

    def wrapper(self):
        geo = " ".join(f"--{k}={v}" for k, v in self.geometry.items() if v)
        if self.toggle:
            tog = " ".join(f"--toggle-collect={shlex.quote(t)}" for t in self.toggle)
            return (f"valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no {tog} {geo} -q "
                    f'--callgrind-out-file="$D/callgrind.out.rank$R"').replace("  ", " ")
        return (f"valgrind --tool=cachegrind --cache-sim=yes {geo} -q "
                f'--cachegrind-out-file="$D/cachegrind.out.rank$R"').replace("  ", " ")

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        from ..io import cachegrind as cg_io

        if self.toggle:
            raw = sorted(run_dir.glob("callgrind.out.rank*"))
            if not raw:
                raise PerfcastError("callgrind wrote no callgrind.out.rank* file", run_dir)
            counted = 0
            for f in raw:
                counted += callgrind_to_cachegrind(f, f.with_name(f.name.replace("callgrind", "cachegrind", 1)))
            if counted == 0:
                like = toggle_candidates(raw, self.toggle)
                hint = (f"; the program's functions named like it: {', '.join(like)} (give the symbol: Fortran "
                        "compilers add _ to a procedure's name, gfortran names a module procedure "
                        "__<module>_MOD_<name>)" if like else "")
                raise PerfcastError(f"the cachegrind toggle {', '.join(self.toggle)} matched no executed function "
                                    f"(nothing was counted on any rank){hint}", run_dir)
        files = sorted(run_dir.glob("cachegrind.out.rank*"))
        if not files:
            raise PerfcastError("cachegrind wrote no cachegrind.out.rank* file", run_dir)
        return cg_io.read_files(files)


def toggle_candidates(callgrind_files, patterns, limit: int = 8) -> list[str]:
    """The functions of the profiled program (the ``cmd:`` of the first callgrind file; its symbol
    table read by ``nm``) whose names contain a toggle pattern's text (glob characters left out,
    case ignored): what a toggle that matched nothing was probably meant to name (CloverLeaf's
    ``hydro`` is the symbol ``hydro_``).  Empty when the program or ``nm`` cannot be found."""
    nm = shutil.which("nm")
    if not nm or not callgrind_files:
        return []
    program = None
    try:
        with open(callgrind_files[0], errors="replace") as fh:
            for line in fh:
                if line.startswith("cmd:"):
                    words = line[4:].split()
                    program = words[0] if words else None
                    break
                if line.startswith(("fn=", "events:")):
                    break
    except OSError:
        return []
    if not program or not Path(program).is_file():
        return []
    try:
        out = subprocess.run([nm, "--defined-only", program], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    keys = [k for k in (re.sub(r"[*?\[\]]", "", p).lower() for p in patterns) if k]
    names = {w[2] for w in (line.split() for line in out.splitlines()) if len(w) == 3 and w[1] in "TtWw"}
    return sorted(n for n in names if any(k in n.lower() for k in keys))[:limit]


def callgrind_to_cachegrind(src: Path, dst: Path) -> int:
    """Write the self (exclusive) costs per function of a callgrind profile in cachegrind's format;
    returns the number of functions with a cost.

    callgrind format: ``fn=(id) name`` opens a function (``(id)`` alone reuses a name; ``cfn=`` shares
    the table), a cost line is ``<positions> <counts>`` (positions may be relative: ``+n``, ``-n``,
    ``*``), and the cost line right after ``calls=`` is the *inclusive* cost of that call, which is not
    the caller's own.  The self costs must add up to the ``summary:``/``totals:`` line."""
    names: dict[str, str] = {}      # function names (fn=/cfn= share one compression table)
    objects: dict[str, str] = {}    # object files (ob=/cob= share another)
    events: list[str] | None = None
    npos = 1
    # self costs per (object, function): an unnamed function is only identifiable with its object
    costs: dict[tuple[str, str], list[int]] = {}
    header: list[str] = []
    summary = None
    current = None
    obj = ""
    skip_next = False

    def name(v: str, table: dict[str, str] = names) -> str:
        v = v.strip()
        if v.startswith("("):
            ident, _, rest = v.partition(")")
            ident = ident[1:]
            rest = rest.strip()
            if rest:
                table[ident] = rest
            elif ident not in table:
                raise PerfcastError(f"callgrind name ({ident}) used before it is defined", src)
            return table[ident]
        return v or "???"

    try:
        fh = open(src, encoding="utf-8", errors="replace")
    except OSError as e:
        raise PerfcastError(f"cannot read: {e.strerror}", src) from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                if events is None or current is None:
                    raise PerfcastError("cost line before 'events:' and 'fn='", src, lineno)
                parts = line.split()[npos:]
                try:
                    nums = [int(x, 0) for x in parts]
                except ValueError:
                    raise PerfcastError(f"non-integer cost in {line[:60]!r}", src, lineno) from None
                vec = costs.setdefault((obj, current), [0] * len(events))
                for i, v in enumerate(nums[: len(events)]):
                    vec[i] += v
                continue
            key, sep, value = line.partition("=")
            if sep and key in ("fn", "cfn", "cfi", "cfl", "cob", "ob", "fl", "fi", "fe", "calls", "jump", "jcnd"):
                if key == "fn":
                    current = name(value)
                elif key == "cfn":
                    name(value)
                elif key == "ob":
                    obj = name(value, objects)
                elif key == "cob":
                    name(value, objects)
                elif key == "calls":
                    skip_next = True
                elif key in ("jump", "jcnd"):
                    skip_next = False
                continue
            key, sep, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "events":
                events = value.split()
            elif key == "positions":
                npos = max(1, len(value.split()))
            elif key in ("summary", "totals"):
                try:
                    summary = [int(x) for x in value.split()]
                except ValueError:
                    raise PerfcastError("non-integer summary", src, lineno) from None
            elif key in ("desc", "cmd"):
                header.append(f"{key}: {value}")
    if events is None:
        raise PerfcastError("not a callgrind output file (no 'events:' line)", src)
    total = [sum(v[i] for v in costs.values()) for i in range(len(events))]
    if summary is None:
        raise PerfcastError("no 'summary:' or 'totals:' line (truncated file?)", src)
    want = (summary + [0] * len(events))[: len(events)]
    if total != want:
        raise PerfcastError(f"self costs {total} do not add up to the summary {want} (truncated or corrupt file)", src)
    out = [*header, "events: " + " ".join(events)]
    n = 0
    last_obj = None
    for (ob, fn), vec in costs.items():
        if any(vec):
            n += 1
            if ob and ob != last_obj:
                out.append(f"ob={ob}")
                last_obj = ob
            out += [f"fn={fn}", "0 " + " ".join(str(v) for v in vec)]
    out.append("summary: " + " ".join(str(v) for v in total))
    dst.write_text("\n".join(out) + "\n")
    return n


# -- PMPI shim ----------------------------------------------------------------------------------------
class MpiCollector(Collector):
    name = "mpi"

    def _pmpi(self):
        try:
            from . import pmpi
        except ImportError as e:
            return None, f"the PMPI shim module is missing ({e})"
        return pmpi, ""

    def available(self):
        pmpi, why = self._pmpi()
        if pmpi is None:
            return False, why
        ok, reason = pmpi.available()
        if ok:
            try:
                pmpi.build_shim()
            except PerfcastError as e:
                return False, f"cannot build the PMPI shim: {e.message}"
        return ok, reason

    def env(self, run_dir):
        pmpi, _ = self._pmpi()
        return pmpi.shim_env(run_dir / "pmpi")

    def mpirun_args(self, run_dir):
        pmpi, _ = self._pmpi()
        return pmpi.mpirun_args(run_dir / "pmpi")

    def collect(self, run_dir: Path, result: dict) -> Experiment:
        from ..io import read_one

        d = run_dir / "pmpi"
        if not d.is_dir() or not any(d.iterdir()):
            raise PerfcastError("the PMPI shim wrote nothing (is the program an MPI program?)", d)
        return read_one(d, format="pmpi")


# -- selection ----------------------------------------------------------------------------------------
@dataclass
class Selection:
    collectors: list[Collector]
    warnings: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.collectors]

    def for_mode(self, mode: str) -> list[Collector]:
        return [c for c in self.collectors if c.mode == mode]

    @property
    def modes(self) -> list[str]:
        return ["main"] + sorted({c.mode for c in self.collectors if c.mode != "main"})


def parse_names(spec: str | list[str]) -> list[tuple[str, bool]]:
    """``"time,perf,counters?"`` -> [(name, required)]."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        item = str(item).strip()
        if not item:
            continue
        required = not item.endswith("?")
        name = item.rstrip("?")
        if name not in NAMES:
            raise PerfcastError(f"unknown collector {name!r}; choose from {', '.join(NAMES)}", where="collect")
        if name not in [n for n, _ in out]:
            out.append((name, required))
    return out


def build(names: list[tuple[str, bool]], settings: dict) -> list[Collector]:
    """Collectors for ``names`` (``time`` first, always present) configured by ``settings``."""
    made: list[Collector] = [TimeCollector(settings.get("timer_regex") or DEFAULT_TIMER_REGEX)]
    for name, _ in names:
        s = settings.get(name) or {}
        if name == "time":
            continue
        if name == "perf":
            made.append(PerfCollector(s.get("frequency", 999), s.get("event"), s.get("callgraph", "fp")))
        elif name == "counters":
            made.append(CountersCollector(s.get("events")))
        elif name == "memory":
            made.append(MemoryCollector(s.get("events")))
        elif name == "cachegrind":
            made.append(CachegrindCollector(s.get("I1"), s.get("D1"), s.get("LL"), s.get("reps", 1), s.get("toggle")))
        elif name == "mpi":
            made.append(MpiCollector())
    return made


def select(names: list[tuple[str, bool]], settings: dict) -> Selection:
    """Probe and keep the usable collectors: required ones must work, optional ones warn."""
    required = {n: r for n, r in names}
    chosen, warnings = [], []
    for c in build(names, settings):
        ok, reason = c.available()
        if ok:
            chosen.append(c)
        elif required.get(c.name, True):
            raise PerfcastError(f"collector {c.name!r} is not available here: {reason} "
                                f"(write '{c.name}?' to make it optional)", where="collect")
        else:
            warnings.append(f"collector {c.name!r} skipped: {reason}")
    return Selection(chosen, warnings)

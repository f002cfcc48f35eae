"""Reader for Linux ``perf`` output: sampled profiles and ``perf stat`` counts.

Three inputs are accepted:

* ``perf.data`` files written by ``perf record`` (recognised by their ``PERFILE2`` magic); they are
  decoded by running ``perf script`` (so ``perf`` and the profiled binaries must be present);
* the text ``perf script -F comm,tid,time,period,event,ip,sym,dso`` prints (with or without call
  chains) -- what :data:`SCRIPT_FIELDS` asks for;
* ``perf stat -x,`` CSV output (``perf stat -x, -o FILE``).

Samples become an exclusive profile on a calling-context tree rooted at ``app``: each sample's call
chain (root first) is a callpath, after dropping the C start-up frames (``_start``,
``__libc_start_main``, ``start_thread``, ...), folding kernel frames into one ``[kernel]`` frame and
cutting the chain at the first frame inside the MPI library (Open MPI, MPICH, UCX, libfabric, PMIx
and the perfcast PMPI shim): ``app->main->solve->MPI_Allreduce`` holds everything that happened
inside that call.  ``PMPI_X`` is shown as ``MPI_X``.

Metrics (all exclusive): ``samples`` (count); for clock events (``cpu-clock``, ``task-clock``, whose
periods are nanoseconds) ``cpu_time`` in seconds; for other events the summed periods under the
event's name (``cycles``, ``instructions``, ...), and ``cpu_time = cycles / hz`` when the clock
frequency is given.  ``mpi_samples`` and ``mpi_time`` (or ``mpi_<event>``) hold the part of those
spent inside the MPI library, so application time = ``cpu_time - mpi_time``.

Perf stat counts go to callpath ``app`` as one metric per event (``task-clock`` in seconds, the rest
counts); ``<not supported>`` / ``<not counted>`` events are listed in ``meta['perf_stat']``.

A file name carrying ``rank<N>`` (``perf.rank3.data``) gives the values a ``rank`` column; a
directory of such files is one experiment with a rank per file.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pandas as pd

from ..errors import PerfcastError
from ..experiment import SEP, CallTree, Experiment, Metric
from ..text import fortran_name
from . import Reader, ReadOptions, register, read_text as read_checked

ROOT = "app"
SCRIPT_FIELDS = "comm,tid,time,period,event,ip,sym,dso"
CLOCK_EVENTS = {"cpu-clock", "task-clock"}
CYCLE_EVENTS = {"cycles", "cpu-cycles", "cpu_clk_unhalted", "cpu_clk_unhalted.thread"}
_RANK = re.compile(r"rank[._-]?(\d+)")

_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<tid>\d+)(?:/\d+)?\s+(?:\[\d+\]\s+)?(?P<time>\d+\.\d+):\s+"
                     r"(?:(?P<period>\d+)\s+)?(?P<event>\S+?):(?:\s+(?P<rest>.*))?$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-fA-F]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*(?:\([^()]*\)[^()]*)*)\)\s*$")
_INLINE = re.compile(r"^(?P<ip>[0-9a-fA-F]+)\s+(?P<sym>.*?)\s+\((?P<dso>.*)\)\s*$")

_STARTUP = re.compile(r"^(_start|__libc_start_main.*|__libc_start_call_main|start_thread|clone3?|__clone\d*|"
                      r"_dl_start_user|_dl_start)$")
_MPI_DSO = re.compile(r"(^|/)lib(mpi|mpi_mpifh|mpi_usempi\w*|open-pal|open-rte|pmix|ucp|ucs|uct|ucm|fabric|"
                      r"psm2?|mpich\w*|mpl|hcoll|perfcast_pmpi|perfcast-pmpi)[.\-_]|(^|/)mca_|/openmpi/|/pmix/")
_MPI_SYM = re.compile(r"^(P?MPI_|ompi_|opal_|orte_|mca_|pmix_|PMPI_|mpi_\w+_$|pmpi_)")


def rank_of(path: Path) -> int | None:
    m = _RANK.search(path.name)
    return int(m.group(1)) if m else None


def is_mpi_frame(sym: str, dso: str) -> bool:
    return bool(_MPI_DSO.search(dso) or _MPI_SYM.match(sym))


def _frame_name(sym: str, dso: str) -> str:
    if not sym or sym == "[unknown]":
        base = dso.rsplit("/", 1)[-1] if dso and dso != "[unknown]" else "unknown"
        return f"[{base}]"
    if sym.startswith("PMPI_"):
        sym = sym[1:]
    return fortran_name(sym)


def _kernel(dso: str) -> bool:
    return dso.startswith("[kernel") or dso in ("[vdso]", "[vsyscall]")


def fold(chain: list[tuple[str, str]]) -> tuple[list[str], bool]:
    """Frames (root first) for a call chain given leaf first as (symbol, dso); and whether MPI."""
    frames = list(reversed(chain))
    while len(frames) > 1 and _STARTUP.match(frames[0][0]):
        frames.pop(0)
    out: list[str] = []
    mpi = False
    for sym, dso in frames:
        if _kernel(dso):
            if not out or out[-1] != "[kernel]":
                out.append("[kernel]")
            continue
        if is_mpi_frame(sym, dso):
            out.append(_frame_name(sym, dso))
            mpi = True
            break
        out.append(_frame_name(sym, dso))
    if not out:
        out = ["[unknown]"]
    return out, mpi


def parse_script(lines, source: str | Path = "perf script") -> tuple[dict, dict]:
    """Aggregate ``perf script`` text: {(frames tuple, event, mpi): [samples, period]}, and info."""
    acc: dict = defaultdict(lambda: [0, 0])
    info: dict = {"events": set(), "comms": set(), "samples": 0}
    cur = None  # (event, period)
    chain: list[tuple[str, str]] = []

    def flush():
        if cur is None:
            return
        frames, mpi = fold(chain)
        slot = acc[(tuple(frames), cur[0], mpi)]
        slot[0] += 1
        slot[1] += cur[1]
        info["samples"] += 1

    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            continue
        if line[0].isspace():
            m = _FRAME.match(line)
            if not m:
                if cur is None:
                    raise PerfcastError(f"not perf script output: {line.strip()[:60]!r}", source, lineno)
                continue  # a frame format we do not know: ignore the frame, keep the sample
            chain.append((m.group("sym").strip(), m.group("dso").strip()))
            continue
        m = _HEADER.match(line)
        if not m:
            raise PerfcastError(f"not a perf script sample line: {line[:60]!r} (expected the fields "
                                f"{SCRIPT_FIELDS})", source, lineno)
        flush()
        event = m.group("event")
        if m.group("period") and len(m.group("period")) > 18:
            raise PerfcastError(f"sample period {m.group('period')[:20]}... is too large", source, lineno)
        period = int(m.group("period")) if m.group("period") else 1
        cur = (event, period)
        info["events"].add(event)
        info["comms"].add(m.group("comm"))
        chain = []
        rest = (m.group("rest") or "").strip()
        if rest:
            im = _INLINE.match(rest)
            if im:
                chain.append((im.group("sym").strip(), im.group("dso").strip()))
    flush()
    if info["samples"] == 0:
        raise PerfcastError("no samples in the perf profile", source)
    return acc, info


def _event_base(event: str) -> str:
    return event.split(":")[0]


def samples_experiment(acc: dict, rank: int | None, hz: float | None = None, root: str = ROOT,
                       tree: CallTree | None = None) -> tuple[pd.DataFrame, dict[str, Metric], CallTree]:
    tree = tree or CallTree()
    tree.add(root, None, root)
    rows: dict = defaultdict(float)
    metrics: dict[str, Metric] = {
        "samples": Metric("samples", "#", "count", "exclusive", "perf samples", sampled=True),
        "mpi_samples": Metric("mpi_samples", "#", "count", "exclusive", "perf samples inside the MPI library",
                              sampled=True),
    }
    for (frames, event, mpi), (n, period) in acc.items():
        cp = tree.add_frames([root, *frames])
        base = _event_base(event)
        rows[(cp, "samples")] += n
        if mpi:
            rows[(cp, "mpi_samples")] += n
        if base in CLOCK_EVENTS:
            name, value = "cpu_time", period * 1e-9
            metrics[name] = Metric(name, "s", "time", "exclusive", f"CPU time estimated from {base} samples", sampled=True)
        else:
            name, value = base, float(period)
            metrics[name] = Metric(name, "#", "count", "exclusive", f"sampled {base} events", sampled=True)
        rows[(cp, name)] += value
        if mpi:
            mname = "mpi_time" if name == "cpu_time" else f"mpi_{name}"
            metrics[mname] = replace_name(metrics[name], mname, "inside the MPI library")
            rows[(cp, mname)] += value
        if base in CYCLE_EVENTS and hz:
            metrics["cpu_time"] = Metric("cpu_time", "s", "time", "exclusive", f"{base} / {hz:.4g} Hz", sampled=True)
            rows[(cp, "cpu_time")] += period / hz
            if mpi:
                metrics["mpi_time"] = replace_name(metrics["cpu_time"], "mpi_time", "inside the MPI library")
                rows[(cp, "mpi_time")] += period / hz
    if not any(m == "mpi_samples" for _, m in rows):
        del metrics["mpi_samples"]
    df = pd.DataFrame([(cp, m, v) for (cp, m), v in rows.items()], columns=["callpath", "metric", "value"])
    if rank is not None:
        df["rank"] = rank
    return df, metrics, tree


def replace_name(m: Metric, name: str, extra: str) -> Metric:
    return Metric(name, m.unit, m.kind, m.scope, f"{m.description} {extra}".strip(), sampled=m.sampled)


def script_text(path: Path) -> str:
    """Decode a perf.data file with ``perf script``."""
    if not shutil.which("perf"):
        raise PerfcastError("reading perf.data needs the 'perf' tool on PATH", path)
    try:
        proc = subprocess.run(["perf", "script", "-i", str(path), "-F", SCRIPT_FIELDS, "--ns"],
                              capture_output=True, text=True, errors="replace", timeout=600)
    except subprocess.TimeoutExpired:
        raise PerfcastError("perf script took longer than 10 minutes", path) from None
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise PerfcastError(f"perf script failed: {msg}", path)
    return proc.stdout


def parse_stat(lines, source: str | Path = "perf stat") -> tuple[dict[str, tuple[float, str]], list[str]]:
    """``perf stat -x,`` output: {event: (value, unit)} and the events that were not counted."""
    counts: dict[str, tuple[float, str]] = {}
    first: dict[str, int] = {}
    missing: list[str] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) < 3:
            raise PerfcastError(f"not perf stat -x, output: {line[:60]!r}", source, lineno)
        value, unit, event = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not event:
            raise PerfcastError(f"no event name in {line[:60]!r}", source, lineno)
        if value.startswith("<"):
            missing.append(event)
            continue
        try:
            v = float(value)
        except ValueError:
            raise PerfcastError(f"non-numeric count {value!r} for {event}", source, lineno) from None
        if event in counts:
            # a repeated event line is damage or output this reader does not know (per-CPU, per-
            # cgroup); summing it would double the count
            raise PerfcastError(f"event {event!r} appears twice (first on line {first[event]}); per-CPU, "
                                f"per-thread or per-cgroup perf stat output is not read", source, lineno)
        first[event] = lineno
        counts[event] = (v, unit)
    return counts, missing


def stat_experiment(counts: dict[str, tuple[float, str]], rank: int | None, root: str = ROOT
                    ) -> tuple[pd.DataFrame, dict[str, Metric], CallTree]:
    tree = CallTree()
    tree.add(root, None, root)
    rows, metrics = [], {}
    scale = {"msec": 1e-3, "ms": 1e-3, "usec": 1e-6, "us": 1e-6, "nsec": 1e-9, "ns": 1e-9, "sec": 1.0, "s": 1.0}
    for event, (v, unit) in counts.items():
        name = _event_base(event)
        if unit in scale:
            metrics[name] = Metric(name, "s", "time", "inclusive", f"perf stat {name}")
            v *= scale[unit]
        else:
            metrics[name] = Metric(name, unit or "#", "count", "inclusive", f"perf stat {name}")
        rows.append((root, name, v))
    df = pd.DataFrame(rows, columns=["callpath", "metric", "value"])
    if rank is not None:
        df["rank"] = rank
    return df, metrics, tree


def kind_of(path: Path) -> str | None:
    """'data', 'script', 'stat' or None."""
    with open(path, "rb") as fh:
        head = fh.read(8192)
    if head.startswith(b"PERFILE2"):
        return "data"
    text = head.decode("utf-8", "replace")
    lines = [l for l in text.splitlines() if l.strip()]
    body = [l for l in lines if not l.startswith("#")]
    if any(l.startswith("# started on") for l in lines) and body and all("," in l for l in body[:5]):
        return "stat"
    if body and _HEADER.match(body[0]):
        return "script"
    if body and all(len(l.split(",")) >= 5 for l in body[:5]) and any(
            l.split(",")[2].strip() in ("task-clock", "cycles", "instructions", "cpu-clock") for l in body[:20]):
        return "stat"
    return None


def _check_last_sample(text: str, path: Path) -> None:
    """perf script ends a sample that has a call stack (a header line without an inline symbol,
    then one frame per line) with a blank line; a last stack without it may be cut short, and a
    shorter stack is another callpath, so it is refused."""
    body = text.rstrip(" \t\r\n")
    last = body.rsplit("\n", 1)[-1] if body else ""
    if not last or re.search(r"\n[ \t\r]*\n[ \t\r\n]*\Z", text):
        return
    m = _HEADER.match(last)
    if last[:1].isspace() or (m and not (m.group("rest") or "").strip()):
        raise PerfcastError("the last sample is not followed by the blank line perf script writes after "
                            "each call stack: the file may be truncated", path, body.count("\n") + 1)


def read_files(paths: list[Path], hz: float | None = None, root: str = ROOT) -> Experiment:
    """One experiment from per-rank perf files (any mix of perf.data, script text, stat CSV)."""
    frames, metrics, tree, meta = [], {}, CallTree(), {}
    ranked = [rank_of(p) for p in paths]
    use_rank = len(paths) > 1 or ranked[0] is not None
    for i, path in enumerate(paths):
        kind = kind_of(path)
        rank = (ranked[i] if ranked[i] is not None else i) if use_rank else None
        if kind in ("data", "script"):
            text = script_text(path) if kind == "data" else read_checked(path, errors="replace")
            if kind == "script":
                _check_last_sample(text, path)
            acc, info = parse_script(text.splitlines(), path)
            df, ms, tree = samples_experiment(acc, rank, hz, root, tree)
            meta.setdefault("perf", []).append({"file": path.name, "rank": rank, "samples": info["samples"],
                                 "events": sorted(info["events"]), "commands": sorted(info["comms"])})
        elif kind == "stat":
            counts, missing = parse_stat(read_checked(path, errors="replace").splitlines(), path)
            if not counts:
                raise PerfcastError(f"perf stat counted none of its events ({', '.join(missing)})", path)
            df, ms, t = stat_experiment(counts, rank, root)
            tree = tree.merged(t) if len(tree) else t
            meta.setdefault("perf_stat", []).append({"file": path.name, "rank": rank, "not_counted": missing})
        else:
            raise PerfcastError("not perf output (perf.data, perf script text or perf stat -x, CSV)", path)
        for n, m in ms.items():
            if n in metrics and metrics[n] != m:
                if metrics[n].kind == m.kind:
                    continue
                raise PerfcastError(f"metric {n!r} means different things in different files", path)
            metrics.setdefault(n, m)
        frames.append(df)
    data = pd.concat(frames, ignore_index=True)
    data["rep"] = 0
    return Experiment([], data, metrics.values(), tree, meta)


def _files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.startswith("perf")
                  and not p.name.endswith(".old") and kind_of(p) is not None)


def _sniff(path: Path) -> bool:
    if path.is_dir():
        return bool(_files_in(path))
    return kind_of(path) is not None


def _read(path: Path, options: ReadOptions) -> Experiment:
    if path.is_dir():
        files = _files_in(path)
        if not files:
            raise PerfcastError("no perf files (perf*.data, perf script text, perf stat CSV) here", path)
        return read_files(files)
    return read_files([path])


register(Reader("perf", "Linux perf: perf.data, perf script text, perf stat -x, CSV (per-rank files: "
                "perf.rank<N>.*)", (".data",), _sniff, _read, directories=True, files=_files_in))

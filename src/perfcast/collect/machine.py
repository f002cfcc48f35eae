"""Describe the machine a campaign runs on, by probing (never assuming).

:func:`describe` returns a JSON-ready dict: host, kernel, CPU model, frequency, logical and physical
cores, cache geometry (from sysfs), memory, and the tools and hardware counters that actually work
(``perf stat`` is run once on a trivial command and every event that comes back ``<not supported>``
is marked unavailable).  :func:`probe_memory_events` checks the memory-controller events the memory
collector counts system-wide.  Results are cached per process.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

#: Hardware events the counters collector asks for when the machine has them (perf's generic names).
HW_EVENTS = ("instructions", "cycles", "cache-references", "cache-misses", "L1-dcache-loads",
             "L1-dcache-load-misses", "LLC-loads", "LLC-load-misses", "stalled-cycles-frontend",
             "stalled-cycles-backend", "branch-misses")
#: Software events that always exist where perf works (no PMU needed).
SW_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _run(args: list[str], timeout: float = 20.0) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _cpuinfo() -> dict:
    text = _read("/proc/cpuinfo") or ""
    model = None
    mhz = []
    cores = set()
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            k, _, v = line.partition(":")
            fields[k.strip()] = v.strip()
        if "model name" in fields and model is None:
            model = fields["model name"]
        if "cpu MHz" in fields:
            try:
                mhz.append(float(fields["cpu MHz"]))
            except ValueError:
                pass
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return {"model": model, "mhz": mhz, "physical_cores": len(cores) or None,
            "sockets": len({c[0] for c in cores}) or None}


def _frequency_hz(mhz: list[float]) -> dict:
    out: dict = {}
    base = Path("/sys/devices/system/cpu/cpu0/cpufreq")
    for key, name in (("cpuinfo_max_freq", "max_hz"), ("cpuinfo_min_freq", "min_hz"),
                      ("scaling_cur_freq", "current_hz"), ("base_frequency", "base_hz")):
        v = _read(base / key)
        if v and v.isdigit():
            out[name] = int(v) * 1000  # sysfs gives kHz
    if mhz:
        out.setdefault("current_hz", int(sum(mhz) / len(mhz) * 1e6))
    # the nominal clock: base, else max, else what /proc/cpuinfo reports now
    out["nominal_hz"] = out.get("base_hz") or out.get("max_hz") or out.get("current_hz")
    out["scaling"] = base.is_dir()
    return out


def _size_bytes(text: str | None) -> int | None:
    """A sysfs cache size (``32768K``, ``1M``, ``512``) in bytes; None when it is not one."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text or "")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)] if m else None


def caches() -> list[dict]:
    """Cache levels of CPU 0 from sysfs: level, type, size (bytes), line size, associativity."""
    out = []
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(root.glob("index*")):
        size = _size_bytes(_read(d / "size"))
        if size is None:
            continue
        try:
            out.append({"level": int(_read(d / "level") or 0), "type": _read(d / "type"),
                        "size": size,
                        "line": int(_read(d / "coherency_line_size") or 0),
                        "ways": int(_read(d / "ways_of_associativity") or 0)})
        except ValueError:
            continue
    return out


def last_level_cache(cpus=None, root: str | Path = "/sys/devices/system/cpu") -> dict | None:
    """The last-level cache the CPUs ``cpus`` (default: the ones this process may run on) use, from
    sysfs: ``level``, ``size`` (bytes, one instance), ``instances`` (distinct caches of that level
    among those CPUs, told apart by their ``shared_cpu_list``) and ``total`` (their summed size:
    what processes spread over those CPUs share).  The level is the highest data or unified level
    any of them reports.  None when sysfs gives no cache size (probed, never assumed: ``getconf
    LEVEL3_CACHE_SIZE`` is not a fallback -- on a 32 MiB AMD EPYC VM it says 320 MiB)."""
    root = Path(root)
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = range(os.cpu_count() or 1)
    found: dict[tuple[int, str], int] = {}
    for cpu in cpus:
        for d in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            size, level = _size_bytes(_read(d / "size")), _read(d / "level") or ""
            if size is None or not level.isdigit() or _read(d / "type") == "Instruction":
                continue
            # a cache without its sharing list is counted once per CPU that reports it
            found[(int(level), _read(d / "shared_cpu_list") or f"cpu{cpu}")] = size
    if not found:
        return None
    top = max(level for level, _ in found)
    sizes = [size for (level, _), size in found.items() if level == top]
    return {"level": top, "size": max(sizes), "instances": len(sizes), "total": sum(sizes)}


def last_level(caches: list[dict]) -> dict | None:
    """The last-level entry of a machine record's ``caches`` (:func:`caches`: CPU 0's): the highest
    level that holds data (instruction caches left out); None when the record has none."""
    data = [c for c in caches or () if c.get("type") != "Instruction" and c.get("level") and c.get("size")]
    return max(data, key=lambda c: (c["level"], c["size"])) if data else None


def _memory_bytes() -> int | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def probe_perf_events(events: tuple[str, ...] | list[str]) -> dict[str, bool]:
    """Which of ``events`` ``perf stat`` can count here (False for all when perf is missing)."""
    result = {e: False for e in events}
    if not shutil.which("perf") or not events:
        return result
    proc = _run(["perf", "stat", "-x", ",", "-e", ",".join(events), "--", "true"])
    if proc is None:
        return result
    for line in proc.stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 3:
            continue
        value, name = parts[0].strip(), parts[2].strip()
        # perf may append modifiers (":u") to the name it prints
        base = name.split(":")[0]
        key = name if name in result else base if base in result else None
        if key is None:
            continue
        result[key] = not value.startswith("<")
    return result


#: Where the kernel lists the PMUs perf can open (uncore memory controllers: ``uncore_imc_<N>``).
PMU_SYSFS = Path("/sys/bus/event_source/devices")
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


def _event_pmu(event: str) -> str | None:
    """The PMU an event names (``uncore_imc/cas_count_read/`` -> ``uncore_imc``), None for plain names."""
    pmu, sep, _ = event.partition("/")
    return pmu if sep and pmu else None


def _perf_failure(stderr: str) -> str:
    """The first line of perf's complaint that says something (not a bare ``Error:``), with the
    ``\\___`` pointer line perf prints under an event syntax error."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    lines = [l for l in lines if l.rstrip(":").lower() != "error" and not re.match(r"^-?\d|^<", l)]
    if not lines:
        return "perf stat -a failed"
    first = lines[0]
    if len(lines) > 1 and lines[1].startswith("\\___"):
        first += " (" + lines[1].lstrip("\\_ ").strip() + ")"
    return first[:200]


def probe_memory_events(events: tuple[str, ...] | list[str], sysfs: str | Path | None = None) -> tuple[bool, str]:
    """Whether ``perf stat -a`` counts every one of ``events`` (memory-controller events) here, and
    why not.  Checks that perf is on PATH and the events' PMU exists in ``sysfs`` (default
    :data:`PMU_SYSFS`), then counts them system-wide once around ``true``.  Cached per process
    (per events, sysfs root and perf binary); ``probe_memory_events.cache_clear()`` forgets."""
    return _probe_memory(tuple(events), str(sysfs or PMU_SYSFS), shutil.which("perf"))


@functools.lru_cache(maxsize=16)
def _probe_memory(events: tuple[str, ...], sysfs: str, perf: str | None) -> tuple[bool, str]:
    if not events:
        return False, "no memory events to count"
    if perf is None:
        return False, "perf is not on PATH"
    root = Path(sysfs)
    try:
        pmus = sorted(p.name for p in root.iterdir())
    except OSError:
        pmus = []
    for pmu in dict.fromkeys(_event_pmu(e) for e in events):
        if pmu is None:
            continue  # a named alias (unc_m_cas_count.rd): only perf itself can tell
        if not any(n == pmu or n.startswith(pmu + "_") for n in pmus):
            if pmu == "uncore_imc":
                return False, (f"no memory-controller PMU (uncore_imc_*) in {root}: DRAM traffic needs an Intel "
                               f"server with uncore counters")
            return False, f"no PMU {pmu} ({pmu}_*) in {root}, which the event(s) {', '.join(events)} need"
    hint = ("system-wide counting needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 0 "
            f"(now: {_read(PARANOID) or 'unknown'})")
    proc = _run([perf, "stat", "-a", "-x", ",", "-e", ",".join(events), "--", "true"])
    if proc is None:
        return False, "perf stat -a does not run (timed out or cannot start)"
    counts: dict[str, str] = {}
    for line in proc.stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 3:
            continue
        value, name = parts[0].strip(), parts[2].strip()
        key = name if name in events else name.split(":")[0] if name.split(":")[0] in events else None
        if key is not None:
            counts.setdefault(key, value)
    if proc.returncode != 0:
        return False, f"perf stat -a -e {','.join(events)} fails here: {_perf_failure(proc.stderr)}; {hint}"
    for e in events:
        value = counts.get(e)
        if value is None:
            return False, f"perf stat -a printed no count for {e}; {hint}"
        try:
            float(value)
        except ValueError:
            return False, (f"perf stat -a counts {e} as {value} here (an event this CPU's memory controller "
                           f"does not have? give the right ones with --memory-events)")
    return True, ""


probe_memory_events.cache_clear = _probe_memory.cache_clear  # type: ignore[attr-defined]


def _tool_version(args: list[str]) -> str | None:
    if not shutil.which(args[0]):
        return None
    proc = _run(args)
    if proc is None or proc.returncode != 0:
        return None
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0].strip() if text else None


@functools.lru_cache(maxsize=1)
def describe() -> dict:
    """The machine description recorded with every campaign (cached per process)."""
    info = _cpuinfo()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    perf_version = _tool_version(["perf", "--version"])
    events = probe_perf_events(HW_EVENTS + SW_EVENTS) if perf_version else {}
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu_model": info["model"],
        "frequency": _frequency_hz(info["mhz"]),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": affinity,
        "physical_cores": info["physical_cores"],
        "sockets": info["sockets"],
        "memory_bytes": _memory_bytes(),
        "caches": caches(),
        "tools": {
            "perf": perf_version,
            "valgrind": _tool_version(["valgrind", "--version"]),
            "mpirun": _tool_version(["mpirun", "--version"]),
            "sbatch": _tool_version(["sbatch", "--version"]),
        },
        "perf_event_paranoid": _read("/proc/sys/kernel/perf_event_paranoid"),
        "counters": {e: ok for e, ok in events.items()},
        "hardware_counters": any(events.get(e) for e in HW_EVENTS),
    }


def nominal_hz() -> float | None:
    f = describe()["frequency"].get("nominal_hz")
    return float(f) if f else None

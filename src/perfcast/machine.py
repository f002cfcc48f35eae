"""Machine descriptions for performance models: frequency, cache latencies, cores, peaks.

One mechanism, three sources, every value labelled with where it came from (``provenance``):

1. a YAML file the user wrote (``Machine.load``; ``perfcast machine --write FILE`` makes one to edit);
2. the host probe of :mod:`perfcast.collect.machine` (frequency, cores, cache sizes, ISA) --
   ``Machine.host()``; nothing is probed twice;
3. the packaged defaults in ``perfcast/apmt/machines/generic-x86-64.yaml`` for what no probe can
   see (load-to-use latencies), marked ``assumed``.

``Machine.host()`` = probe + defaults; ``Machine.load(path)`` = the file, with missing latencies
filled from the defaults (marked ``assumed``).  Peak flops are derived from the ISA flags
(double-precision flops per cycle: AVX-512+FMA 32, AVX2+FMA 16, AVX 8, SSE2 4) times the
frequency and the cores; peak memory bandwidth cannot be probed and stays unknown unless given.

YAML layout::

    name: mycluster
    frequency_hz: 2.6e9
    cores_per_node: 48
    latency_cycles: {L1: 4, L2: 14, LLC: 50, memory: 240}
    flops_per_cycle: 32          # per core, double precision
    peak_flops: 4.0e12           # per node (default: cores * frequency * flops_per_cycle)
    peak_bandwidth: 2.0e11       # bytes/s per node
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Mapping

import yaml

from .errors import PerfcastError
from .yamlfile import read_yaml

LEVELS = ("L1", "L2", "LLC", "memory")
_KEYS = {"name", "frequency_hz", "cores_per_node", "latency_cycles", "flops_per_cycle", "peak_flops",
         "peak_bandwidth", "caches", "provenance"}
DEFAULTS_FILE = "generic-x86-64.yaml"


@dataclass(frozen=True)
class Machine:
    name: str
    frequency_hz: float
    cores_per_node: int | None = None
    #: load-to-use latency per level in core cycles at ``frequency_hz``
    latency_cycles: dict = field(default_factory=dict)
    flops_per_cycle: float | None = None
    peak_flops: float | None = None
    peak_bandwidth: float | None = None
    #: [{level, type, size, line}] (informational)
    caches: tuple = ()
    #: field -> "probed" | "derived: ..." | "assumed: ..." | "file"
    provenance: dict = field(default_factory=dict)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping, path: str | Path | None = None) -> "Machine":
        if not isinstance(d, Mapping):
            raise PerfcastError("a machine description is a mapping (name, frequency_hz, latency_cycles, ...)",
                                path)
        unknown = set(d) - _KEYS
        if unknown:
            raise PerfcastError(f"unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_KEYS))}",
                                path, sorted(unknown)[0])
        prov = {k: "file" for k in d if k not in ("provenance", "name")}
        given = d.get("provenance") or {}
        if not isinstance(given, Mapping):
            raise PerfcastError("provenance must map fields to where their values came from", path, "provenance")
        prov.update({str(k): str(v) for k, v in given.items()})
        freq = _positive(d.get("frequency_hz"), "frequency_hz", path, required=True)
        lat_in = d.get("latency_cycles") or {}
        if not isinstance(lat_in, Mapping):
            raise PerfcastError("latency_cycles must map levels (L1, L2, LLC, memory) to cycles", path,
                                "latency_cycles")
        bad = set(lat_in) - set(LEVELS)
        if bad:
            raise PerfcastError(f"unknown cache level(s) {', '.join(sorted(bad))}; use {', '.join(LEVELS)}", path,
                                "latency_cycles")
        lat = {k: _positive(v, f"latency_cycles.{k}", path) for k, v in lat_in.items()}
        defaults = _defaults()
        for lvl in LEVELS:
            if lvl not in lat:
                lat[lvl] = float(defaults["latency_cycles"][lvl])
                prov[f"latency_cycles.{lvl}"] = f"assumed: {defaults['name']} default"
            else:
                key = f"latency_cycles.{lvl}"
                prov.setdefault(key, prov.get("latency_cycles", "file"))
                if str(prov[key]).startswith("assumed") and lat[lvl] != float(defaults["latency_cycles"][lvl]):
                    # a written file's value edited without deleting its provenance entry: the user's number
                    prov[key] = "file"
        prov.pop("latency_cycles", None)
        order = [lat[lvl] for lvl in LEVELS]
        if any(b < a for a, b in zip(order, order[1:])):
            raise PerfcastError(f"latencies must not decrease from L1 to memory, got "
                                f"{dict(zip(LEVELS, order))}", path, "latency_cycles")
        cores = d.get("cores_per_node")
        if cores is not None:
            if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
                raise PerfcastError(f"cores_per_node must be a whole number >= 1, got {cores!r}", path,
                                    "cores_per_node")
        fpc = _positive(d.get("flops_per_cycle"), "flops_per_cycle", path)
        peak = _positive(d.get("peak_flops"), "peak_flops", path)
        if peak is None and fpc and cores:
            peak = cores * freq * fpc
            prov["peak_flops"] = "derived: cores_per_node x frequency_hz x flops_per_cycle"
        bw = _positive(d.get("peak_bandwidth"), "peak_bandwidth", path)
        caches = d.get("caches") or ()
        if not isinstance(caches, (list, tuple)) or not all(isinstance(c, Mapping) for c in caches):
            raise PerfcastError("caches must be a list of mappings (level, type, size, line)", path, "caches")
        caches = tuple(dict(c) for c in caches)
        return cls(str(d.get("name") or "unnamed"), freq, cores, lat, fpc, peak, bw, caches, prov)

    @classmethod
    def load(cls, path: str | Path) -> "Machine":
        path = Path(path)
        doc = read_yaml(path, "the machine file")
        return cls.from_dict(doc or {}, path)

    @classmethod
    def host(cls) -> "Machine":
        """This host: probed values + packaged latency defaults (marked ``assumed``)."""
        from .collect import machine as probe

        info = probe.describe()
        prov = {}
        freq = info.get("frequency", {}).get("nominal_hz")
        if freq:
            prov["frequency_hz"] = "probed"
        else:
            raise PerfcastError("the host probe found no CPU frequency; write a machine file "
                                "(perfcast machine --write FILE) and set frequency_hz")
        cores = info.get("usable_cpus") or info.get("logical_cpus")
        prov["cores_per_node"] = "probed (usable CPUs)"
        fpc = _flops_per_cycle()
        if fpc:
            prov["flops_per_cycle"] = "derived: ISA flags in /proc/cpuinfo (double precision)"
        caches = tuple({k: c.get(k) for k in ("level", "type", "size", "line")} for c in info.get("caches", []))
        if caches:
            prov["caches"] = "probed (sysfs)"
        d = {"name": info.get("hostname") or "host", "frequency_hz": float(freq), "cores_per_node": cores,
             "flops_per_cycle": fpc, "caches": caches, "provenance": prov}
        m = cls.from_dict({k: v for k, v in d.items() if v is not None})
        prov = {k: v for k, v in m.provenance.items() if v != "file" or k in ("name",)}
        prov["name"] = "probed (hostname)"
        prov["peak_bandwidth"] = "unknown: not probeable; measure (e.g. STREAM) and write it in a machine file"
        return replace(m, provenance=prov)

    # -- output ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"name": self.name, "frequency_hz": float(self.frequency_hz), "cores_per_node": self.cores_per_node,
             "latency_cycles": {k: float(self.latency_cycles[k]) for k in LEVELS},
             "flops_per_cycle": self.flops_per_cycle, "peak_flops": self.peak_flops,
             "peak_bandwidth": self.peak_bandwidth, "caches": [dict(c) for c in self.caches],
             "provenance": dict(self.provenance)}
        return {k: v for k, v in d.items() if v is not None and v != []}

    def save(self, path: str | Path, force: bool = True):
        """Write the description as YAML, atomically; an existing file is replaced only with ``force``
        (a FIFO, device or directory never is: :mod:`perfcast.output`)."""
        from .output import write_file

        head = ("# perfcast machine description.  Values marked 'assumed' in provenance are defaults,\n"
                "# not measurements: replace them for real predictions (a latency changed from its default is read\n"
                "# as the file's own value).\n")
        write_file(path, head + yaml.safe_dump(self.to_dict(), sort_keys=False), force)

    def latency_seconds(self, level: str) -> float:
        return self.latency_cycles[level] / self.frequency_hz

    def assumed(self) -> list[str]:
        return [k for k, v in self.provenance.items() if str(v).startswith("assumed")]


def _positive(v, what, path, required=False):
    if v is None:
        if required:
            raise PerfcastError(f"{what} is required", path, what)
        return None
    if isinstance(v, str):
        try:
            v = float(v)   # YAML 1.1 reads 2e9 (no dot) as a string
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise PerfcastError(f"{what} must be a positive number, got {v!r}", path, what)
    return float(v)


def _defaults() -> dict:
    text = resources.files("perfcast.apmt").joinpath("machines", DEFAULTS_FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _flops_per_cycle() -> float | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    if not flags:
        return None
    if "avx512f" in flags and "fma" in flags:
        return 32.0
    if "avx2" in flags and "fma" in flags:
        return 16.0
    if "avx" in flags:
        return 8.0
    if "sse2" in flags:
        return 4.0
    return None

"""Damaged inputs for every reader: refused with a located error, or read with the intact values.

Each intact input (real files from the shared data, the LIKWID files in tests/data, and small
perf / cachegrind / PMPI texts in the formats those tools write) is damaged by one mutation --
truncated at a byte, a byte replaced, a line deleted or duplicated, a blank line added, a number
replaced by a huge one, ``nan`` or a word -- and read with ``perfcast.io.load``.  Every outcome
falls in one class:

``refused``      PerfcastError whose message names the file (exit 2 at the CLI)
``same``         loaded, values equal to the intact file's
``shorter``      a cut exactly at a line end that loads a subset of the intact values: a valid
                 shorter file the format cannot tell from a complete one (tidy CSV rows, JSON
                 Lines records, perf stat events)
``cut_last_number`` Extra-P text without a final line end, cut after a digit of its very last
                 value (``223`` -> ``22``): the one cut that format cannot reveal (see io/extrap.py)
``changed``      a mutation that may legitimately mean something else (a digit replaced, a row
                 deleted or duplicated) loaded other finite values: a valid different file
``silent_wrong`` loaded but wrong: a cut anywhere but a line end, or a mutation that cannot change
                 the meaning (a blank line added) changed the values, or a non-finite value loaded
``unlocated``    PerfcastError that does not name the file
``internal``     any other exception (a bug: exit 1 at the CLI)

    PYTHONPATH=src python bench/fuzz_readers.py [--mutants 6000] [--seed 1] [--show 5] [--reader NAME]

The CI suite (tests/test_fuzz_readers.py) runs the same mutations, a few hundred of them, and
fails on ``silent_wrong``, ``unlocated`` and ``internal``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import signal
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from perfcast.errors import PerfcastError  # noqa: E402
from perfcast.io import load  # noqa: E402
from perfcast.shared_data import shared_data_dir  # noqa: E402

# (name, path relative to the shared data) -- real third-party files
SHARED = [
    ("extrap-text", "extrap/text/one_parameter_1.txt"),
    ("extrap-text", "extrap/text/two_parameter_1.txt"),
    ("extrap-text", "extrap/text/mpa/gpr_test_data_1.txt"),
    ("extrap-jsonl", "extrap/jsonlines/test2.jsonl"),
    ("talpas", "extrap/talpas/talpas_1.txt"),
    ("extrap-json", "extrap/json/input_1.JSON"),
    ("summary", "extrap/mpi_data.csv"),
    ("caliper-json", "formats/caliper/caliper-cpi-json/cpi-callpath-profile.json"),
    ("caliper-json", "formats/caliper/caliper-lulesh-json/lulesh-annotation-profile.json"),
    ("caliper", "formats/caliper/caliper-lulesh-cali/lulesh-annotation-profile.cali"),
    ("caliper", "formats/caliper/caliper-ordered-cali-mpi/230525-151723_1930647_FSY8b8cKSEEi.cali"),
    ("cube", "formats/cube/kripke.p8.d2.g32.r1/profile.cubex"),
    ("extrap-experiment", "extrap/experiments/two_parameter3.txt.extra-p"),
    ("cprofile", "formats/other/cprofile-hatchet-pstats/cprofile-cycle.pstats"),
    ("pyinstrument", "formats/other/pyinstrument-hatchet-json/pyinstrument-hatchet-profile.json"),
    ("dot", "formats/other/gprof2dot-cpi/callgrind.dot.64042.0.1"),
    ("timemory", "formats/other/timemory/wall.tree.json"),
    ("extrap3", "extrap/input/experiment_3_mp"),
    ("hatchet-json", "formats/hatchet/hatchet-graph-literal.json"),
    ("hatchet-csv", "formats/hatchet/hpctoolkit-cpi-graphframe.csv"),
]
# directory inputs: (reader, directory relative to the shared data, the files in it that are damaged)
SHARED_DIRS = [
    ("hpctoolkit", "formats/hpctoolkit/hpctoolkit-cpi-database",
     ["experiment.xml", "1.cpi-000001-000-a8c00270-160444-0.metric-db"]),
    ("tau", "formats/other/tau-cpi-mpi", ["profile.0.0.0", "profile.3.0.0"]),
    ("hpctoolkit", "formats/hpctoolkit/hpctoolkit-cpi-v4-database", ["meta.db", "profile.db", "cct.db"]),
]
DIR_READERS = {"pmpi", "hpctoolkit", "tau"}
# a tidy table of real values: the first rows of the Relearn timers (p x n, 2 repetitions)
TIDY_SOURCE = "extrap/text/mpa/relearn_data.txt"

PERF_SCRIPT = """\
app  101 10.000001:    1000000 cpu-clock: \n\
\t    7f00 opal_progress (/usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.2)
\t    7d00 PMPI_Allreduce (/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)

app  101 10.000002:    2000000 cpu-clock: \n\
\t    5000 stencil (/tmp/app)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)

app  101 10.000003:    4000000 cpu-clock: \n\
\t    5000 stencil (/tmp/app)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)

"""

PERF_STAT = """\
# started on Thu Nov 26 10:00:00 2026

12.73,msec,task-clock,12730000,100.00,0.912,CPUs utilized
131,,page-faults,12730000,100.00,10.291,K/sec
44231871,,instructions,12730000,100.00,,
18112042,,cycles,12730000,100.00,1.423,GHz
"""

# a Hatchet graph literal (GraphFrame.to_literal), written by hand
HATCHET_LITERAL = """\
[{"frame": {"name": "main", "type": "function"}, "metrics": {"time (inc)": 30.5, "time": 2.25, "_hatchet_nid": 0},
  "children": [
   {"frame": {"name": "solve", "type": "function"}, "metrics": {"time (inc)": 20.0, "time": 12.75, "_hatchet_nid": 1},
    "children": [{"frame": {"name": "MPI_Allreduce", "type": "function"},
                  "metrics": {"time (inc)": 7.25, "time": 7.25, "_hatchet_nid": 2}}]},
   {"frame": {"name": "io", "type": "function"}, "metrics": {"time (inc)": 8.25, "time": 8.25, "_hatchet_nid": 3}}]}]
"""

CACHEGRIND = """\
desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         49152 B, 64 B, 12-way associative
desc: LL cache:         31457280 B, 64 B, 15-way associative
cmd: ./app 64
events: Ir Dr Dw
fl=solver.c
fn=main
10 120 30 10
11 40 10 5
fn=stencil
20 90000 30000 8000
21 45000 15000 4000
fl=comm.c
fn=exchange
5 700 300 100
summary: 135860 45340 12115
"""


def pmpi_rank(rank: int, size: int = 2) -> str:
    """One rank's file as the PMPI shim writes it (perfcast-pmpi version 1)."""
    d = {"format": "perfcast-pmpi", "version": 1, "rank": rank, "size": size, "host": "h", "pid": 1,
         "library": "Open MPI v4.1.2", "untracked_requests": 0,
         "time": {"init": 0.125, "region": 2.5 + rank, "mpi": 0.5 + 0.25 * rank, "app": 2.0 + 0.75 * rank},
         "routines": [{"name": "MPI_Send", "calls": 3, "bytes_sent": 24, "bytes_recv": 0, "time": 0.25,
                       "hist": [[8, 3]]},
                      {"name": "MPI_Allreduce", "calls": 100, "bytes_sent": 800, "bytes_recv": 800,
                       "time": 0.25 + 0.25 * rank, "hist": [[8, 100]]}],
         "peers": [{"rank": (rank + 1) % size, "sent_msgs": 3, "sent_bytes": 24, "recv_msgs": 3,
                    "recv_bytes": 24}]}
    return json.dumps(d, indent=1) + "\n"


def build_corpus(root: Path, data: Path | None = None) -> list[tuple[str, Path]]:
    """Write the intact inputs under ``root``; returns (reader, path) pairs."""
    data = data or shared_data_dir()
    out = []
    for name, rel in SHARED:
        dst = root / name / Path(rel).name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data / rel, dst)
        out.append((name, dst))
    for name, rel, targets in SHARED_DIRS:
        dst = root / name / Path(rel).name
        shutil.copytree(data / rel, dst, ignore=shutil.ignore_patterns("*.md"))
        for t in targets:
            out.append((name, dst / t))
    src = load([data / TIDY_SOURCE], format="extrap-text")
    df = src.data.head(60)
    (root / "tidy").mkdir(exist_ok=True)
    rows = [",".join([*src.parameters, "rep", "callpath", "metric", "unit", "value"])]
    for r in df.itertuples(index=False):
        d = r._asdict()
        rows.append(",".join([*(repr(float(d[p])) for p in src.parameters), str(d["rep"]), str(d["callpath"]),
                              str(d["metric"]), "s", repr(float(d["value"]))]))
    (root / "tidy" / "relearn.csv").write_text("\n".join(rows) + "\n")
    out.append(("tidy", root / "tidy" / "relearn.csv"))
    (root / "likwid").mkdir(exist_ok=True)
    for f in sorted((REPO / "tests" / "data" / "likwid").glob("*.txt")):
        shutil.copy(f, root / "likwid" / f.name)
        out.append(("likwid", root / "likwid" / f.name))
    for name, fname, text in [("perf-script", "perf.rank0.txt", PERF_SCRIPT),
                              ("perf-stat", "perf.stat.rank0.csv", PERF_STAT),
                              ("cachegrind", "cachegrind.out.rank0", CACHEGRIND),
                              ("hatchet-literal", "literal.json", HATCHET_LITERAL)]:
        (root / name).mkdir(exist_ok=True)
        (root / name / fname).write_text(text)
        out.append((name, root / name / fname))
    import pandas as pd

    (root / "tidy-parquet").mkdir(exist_ok=True)
    pd.read_csv(root / "tidy" / "relearn.csv").to_parquet(root / "tidy-parquet" / "relearn.parquet", index=False)
    out.append(("tidy-parquet", root / "tidy-parquet" / "relearn.parquet"))
    d = root / "pmpi" / "run.p2"
    d.mkdir(parents=True, exist_ok=True)
    for r in range(2):
        (d / f"pmpi.rank{r:05d}.json").write_text(pmpi_rank(r))
    out.append(("pmpi", d / "pmpi.rank00000.json"))
    return out


def _input(name: str, target: Path) -> Path:
    """What is read: the file itself, or for directory formats its directory."""
    return target.parent if name in DIR_READERS else target


# ---------------------------------------------------------------------------------------------
# mutations: (kind, bytes, info) -- info["line_end"] for cuts at a line end, info["neutral"] when
# the mutation cannot change the file's meaning

MUTATIONS = ("truncate", "truncate", "truncate", "flip", "delete_line", "duplicate_line",
             "blank_line", "number")
_NUM = re.compile(rb"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_REPLACEMENTS = (b"1e999", b"-1e999", b"nan", b"inf", b"9" * 5000, b"18446744073709551617", b"abc", b"-3",
                 b"0", b"")


def mutate(data: bytes, rng: random.Random, kind: str | None = None) -> tuple[str, bytes, dict]:
    kind = kind or rng.choice(MUTATIONS)
    info: dict = {"neutral": False, "line_end": False}
    if kind == "truncate":
        k = rng.randrange(0, len(data))
        # what is left ends with whole lines (or with a whole last line that lost only its line end)
        info["line_end"] = k == 0 or data[k - 1:k] == b"\n" or data[k:k + 2] in (b"\n", b"\r\n") \
            or data[k:k + 1] == b"\n"
        cut = data[:k].rsplit(b"\n", 1)[-1]
        # a cut after a digit of the last number of an Extra-P DATA line (documented as the one
        # cut that format cannot reveal when the file has no final line end)
        info["in_last_number"] = bool(re.fullmatch(rb"\s*DATA\s.*\d", cut)) and data[k:k + 1].isdigit() \
            or bool(re.fullmatch(rb"\s*DATA\s.*\d", cut)) and data[k:k + 1] in (b".", b"e", b"E")
        return kind, data[:k], info
    if kind == "flip":
        k = rng.randrange(0, len(data))
        b = rng.choice([rng.randrange(256), ord(rng.choice("0123456789.e-+,|{}\"\n \t;x"))])
        return kind, data[:k] + bytes([b]) + data[k + 1:], info
    lines = data.split(b"\n")
    i = rng.randrange(0, len(lines))
    if kind == "delete_line":
        return kind, b"\n".join(lines[:i] + lines[i + 1:]), info
    if kind == "duplicate_line":
        return kind, b"\n".join(lines[:i + 1] + lines[i:]), info
    if kind == "blank_line":
        # an empty line added where the file already has one: no format gives that a meaning
        blanks = [j for j, ln in enumerate(lines[:-1]) if not ln.strip()]
        if not blanks:
            return mutate(data, rng, "truncate")
        j = rng.choice(blanks)
        info["neutral"] = True
        return kind, b"\n".join(lines[:j] + [b""] + lines[j:]), info
    if kind == "number":
        nums = list(_NUM.finditer(data))
        if not nums:
            return mutate(data, rng, "flip")
        m = rng.choice(nums)
        return kind, data[:m.start()] + rng.choice(_REPLACEMENTS) + data[m.end():], info
    raise ValueError(kind)


# ---------------------------------------------------------------------------------------------
# oracle


def values(exp) -> dict:
    """{(coordinates, callpath, metric, rep, rank, thread): value} of an experiment."""
    df = exp.data
    keys = [*exp.parameters, "callpath", "metric", "rep", *[c for c in ("rank", "thread") if c in df.columns]]
    cols = [df[k].astype(str).tolist() if k in ("callpath", "metric") else df[k].tolist() for k in keys]
    return {tuple(t): v for t, v in zip(zip(*cols), df["value"].tolist())}


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


#: readers whose values are sums over records (perf samples): a file cut at a record boundary
#: holds fewer records, so its sums are smaller, not equal
AGGREGATES = {"perf-script"}


def classify(path: Path, kind: str, info: dict, intact: dict, fmt: str | None = None,
             timeout: int = 20, reader: str = "") -> tuple[str, str]:
    """Read the mutant at ``path``; returns (class, detail)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        exp = load([path], format=fmt)
    except PerfcastError as e:
        msg = e.format()
        return ("refused" if str(path) in msg else "unlocated"), msg
    except _Timeout:
        return "internal", f"no answer within {timeout} s"
    except Exception as e:  # noqa: BLE001 -- any other exception is what the suite hunts for
        return "internal", f"{type(e).__name__}: {e}"[:300]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    got = values(exp)
    bad = [v for v in got.values() if not math.isfinite(v)]
    if bad:
        return "silent_wrong", f"non-finite value {bad[0]} loaded"
    if got == intact:
        return "same", ""
    if info.get("neutral"):
        return "silent_wrong", "a mutation that cannot change the meaning changed the values"
    if kind == "truncate":
        if info.get("line_end") and all(k in intact and (intact[k] == v or reader in AGGREGATES
                                                         and 0 <= v <= intact[k]) for k, v in got.items()):
            return "shorter", ""
        if reader == "extrap-text" and info.get("in_last_number"):
            return "cut_last_number", ""
        diff = next((k for k in got if intact.get(k) != got[k]), None)
        return "silent_wrong", (f"cut file loaded {len(got)} value(s) (intact {len(intact)}); first "
                                f"difference at {diff}: {got.get(diff)} vs {intact.get(diff)}")
    return "changed", ""


READER_FORMAT = {"perf-script": "perf", "perf-stat": "perf"}


def run(n: int, seed: int, corpus: list[tuple[str, Path]], work: Path, show: int = 0,
        verbose: bool = True) -> dict[str, Counter]:
    rng = random.Random(seed)
    intact = {}
    for name, p in corpus:
        intact[p] = values(load([_input(name, p)], format=_format(name, p)))
    counts: dict[str, Counter] = defaultdict(Counter)
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    for i in range(n):
        name, p = corpus[i % len(corpus)]
        kind, data, info = mutate(p.read_bytes(), rng)
        m = work / f"m{i % 7}" / name / p.parent.name / p.name
        if m.parent.exists():
            shutil.rmtree(m.parent)
        shutil.copytree(p.parent, m.parent)
        m.write_bytes(data)
        cls, detail = classify(_input(name, m), kind, info, intact[p], _format(name, p), reader=name)
        counts[name][cls] += 1
        if cls in ("silent_wrong", "internal", "unlocated") and len(examples[(name, cls)]) < show:
            examples[(name, cls)].append(f"{kind}: {detail}")
    if verbose:
        classes = ["refused", "same", "shorter", "changed", "cut_last_number", "silent_wrong", "unlocated",
                   "internal"]
        print(f"{'reader':14s}" + "".join(f"{c:>16s}" for c in classes))
        total = Counter()
        for name in sorted(counts):
            total.update(counts[name])
            print(f"{name:14s}" + "".join(f"{counts[name][c]:16d}" for c in classes))
        print(f"{'total':14s}" + "".join(f"{total[c]:16d}" for c in classes))
        for (name, cls), ex in sorted(examples.items()):
            for e in ex:
                print(f"  {name} {cls}: {e}")
    return counts


def _format(name: str, p: Path) -> str | None:
    # a damaged file may no longer be recognisable; the user would then name the format, as here
    return {"perf-script": "perf", "perf-stat": "perf", "extrap-text": "extrap-text",
            "extrap-jsonl": "extrap-jsonl", "talpas": "talpas", "extrap-json": "extrap-json",
            "summary": "summary", "tidy": "tidy", "likwid": "likwid", "cachegrind": "cachegrind",
            "caliper-json": "caliper-json", "caliper": "caliper", "cube": "cube", "extrap-experiment": "extrap-experiment",
            "hpctoolkit": "hpctoolkit", "tidy-parquet": "tidy-parquet", "pmpi": "pmpi",
            "tau": "tau", "cprofile": "cprofile", "pyinstrument": "pyinstrument",
            "dot": "dot", "timemory": "timemory",
            "extrap3": "extrap3",
            "hatchet-json": "hatchet", "hatchet-csv": "hatchet", "hatchet-literal": "hatchet"}.get(name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=3, help="examples printed per reader and bad class")
    ap.add_argument("--reader", action="append", help="only these corpus entries (repeatable)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(Path(tmp) / "intact")
        if a.reader:
            corpus = [(n, p) for n, p in corpus if n in a.reader]
        run(a.mutants, a.seed, corpus, Path(tmp) / "mutants", a.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""cachegrind reader: numbers checked against hand calculations on a generated C program."""

import shutil
import subprocess
from pathlib import Path

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import read_one
from perfcast.io.cachegrind import parse
from conftest import require_tools

@pytest.fixture(autouse=True, scope="module")
def _tools():
    require_tools("valgrind", "gcc")

N1, N2 = 1 << 20, 1 << 21          # bytes of the two scanned arrays
STRIDE = 32                        # bytes between two reads
K = (1000, 3000, 7000)             # loop counts of three identical work functions

SOURCE = r"""
#include <stdlib.h>
#define SCAN(name) __attribute__((noinline)) long name(volatile char *a, long n) \
  { long s = 0; for (long i = 0; i < n; i += %(stride)d) s += a[i]; return s; }
#define WORK(name) __attribute__((noinline)) long name(long k) \
  { volatile long s = 0; for (long i = 0; i < k; i++) s += i; return s; }
SCAN(scan_a) SCAN(scan_b) WORK(work1) WORK(work2) WORK(work3)
int main(void) {
  char *a = malloc(%(n1)d), *b = malloc(%(n2)d);
  for (long i = 0; i < %(n1)d; i++) a[i] = 1;
  for (long i = 0; i < %(n2)d; i++) b[i] = 1;
  long s = scan_a(a, %(n1)d) + scan_b(b, %(n2)d);
  s += work1(%(k1)d) + work2(%(k2)d) + work3(%(k3)d);
  return s == 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("cg")
    (d / "prog.c").write_text(SOURCE % dict(stride=STRIDE, n1=N1, n2=N2, k1=K[0], k2=K[1], k3=K[2]))
    subprocess.run(["gcc", "-O1", "-g", "-o", str(d / "prog"), str(d / "prog.c")], check=True)
    return d


def run_cachegrind(d: Path, line: int, name: str) -> Path:
    out = d / name
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--I1=32768,8,{line}",
                    f"--D1=32768,8,{line}", f"--LL=262144,8,{line}", f"--cachegrind-out-file={out}",
                    str(d / "prog")], check=True, capture_output=True)
    return out


def values(exp, fn):
    d = exp.data[exp.data["callpath"] == f"app->{fn}"]
    return {str(m): float(v) for m, v in zip(d["metric"], d["value"])}


@pytest.mark.parametrize("line", [64, 128])
def test_misses_and_instructions_match_hand_calculation(program, line):
    path = run_cachegrind(program, line, f"cachegrind.out.rank{line // 64}")
    exp = read_one(path)  # auto-detected
    assert exp.meta["format"] == "cachegrind"
    assert set(exp.data["rank"]) == {line // 64}
    a, b = values(exp, "scan_a"), values(exp, "scan_b")
    # every read of a fresh line misses D1 (32 KiB) and LL (256 KiB): the arrays are 1 and 2 MiB and
    # were evicted by later initialisation / the other scan; identical code => constants cancel
    assert b["D1mr"] - a["D1mr"] == (N2 - N1) // line
    assert b["DLmr"] - a["DLmr"] == (N2 - N1) // line
    assert b["Dr"] - a["Dr"] == (N2 - N1) // STRIDE
    assert a["D1mr"] >= N1 // line
    # instructions: affine in the loop count, exactly
    w = [values(exp, f"work{i}")["Ir"] for i in (1, 2, 3)]
    per_iter = (w[1] - w[0]) / (K[1] - K[0])
    assert per_iter == int(per_iter) and per_iter >= 3
    assert w[2] == w[0] + per_iter * (K[2] - K[0])
    # the configured geometry is recorded
    caches = exp.meta["cachegrind"][0]["caches"]
    assert caches["D1"] == {"size": 32768, "line": line, "ways": 8}
    assert exp.metrics["Ir"].kind == "count" and exp.metrics["Ir"].scope == "exclusive"


def test_totals_equal_summary_and_truncation_is_an_error(program, tmp_path):
    path = run_cachegrind(program, 64, "cachegrind.out.1")
    events, totals, header = parse(path)
    summary = [int(x) for x in path.read_text().split("summary:")[1].split()]
    assert [sum(int(v[i]) for v in totals.values()) for i in range(len(events))] == summary
    text = path.read_text().splitlines()
    cut = tmp_path / "cachegrind.out.cut"
    # drop one count line in the middle but keep the summary
    idx = next(i for i, l in enumerate(text) if l and l[0].isdigit() and i > len(text) // 2)
    cut.write_text("\n".join(text[:idx] + text[idx + 1:]) + "\n")
    with pytest.raises(PerfcastError, match="summary"):
        read_one(cut, format="cachegrind")
    bad = tmp_path / "cachegrind.out.bad"
    bad.write_text("events: Ir\nfn=f\n1 x\n")
    with pytest.raises(PerfcastError) as e:
        read_one(bad, format="cachegrind")
    assert e.value.where == "3"


def test_directory_of_ranks(program, tmp_path):
    for r in (0, 1):
        shutil.copy(run_cachegrind(program, 64, f"cg{r}"), tmp_path / f"cachegrind.out.rank{r}")
    exp = read_one(tmp_path, format="cachegrind")
    assert sorted(exp.data["rank"].unique()) == [0, 1]
    per_rank = exp.data[(exp.data["metric"] == "Ir") & (exp.data["callpath"] == "app->work2")]
    assert len(per_rank) == 2 and per_rank["value"].nunique() == 1


# -- functions without symbols: callgrind (and perfcast's conversion of it) names them by address ----

UNNAMED = """events: Ir Dr
ob=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so
fl=???
fn=0x0000000000004d50
0 100 10
fn=mca_btl_vader_sendi
0 7 1
ob=(3) /usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.2
fl=???
fn=0x0000000000004d50
0 20 2
ob=/work/app
fl=(5) solver.c
fn=0x00000000000013b0
0 3 0
fl=???
fn=0x000000000000b500
0 4 4
ob=(3)
fn=0x0000000000004d50
0 1 0
fn=???
0 5 0
summary: 140 17
"""


def test_unnamed_functions_are_named_by_address_and_object(tmp_path):
    for r in (0, 1):
        (tmp_path / f"cachegrind.out.rank{r}").write_text(UNNAMED)
    events, totals, _ = parse(tmp_path / "cachegrind.out.rank0")
    # by hand: the same address in two objects is two functions; the second "ob=(3)" reuses the
    # compressed name of libopen-pal (20 + 1 instructions); the object (/work/app) wins over the file
    assert {k: list(v) for k, v in totals.items()} == {
        "0x4d50 in mca_btl_vader.so": [100, 10], "mca_btl_vader_sendi": [7, 1],
        "0x4d50 in libopen-pal.so.40.30.2": [21, 2], "0x13b0 in app": [3, 0], "0xb500 in app": [4, 4],
        "???": [5, 0]}
    exp = read_one(tmp_path, "cachegrind")
    d = exp.data[exp.data["metric"] == "Ir"]
    # the callpath ids are the same on every rank (one row per rank each)
    assert sorted(d.groupby("callpath", observed=True)["rank"].nunique().items()) == sorted(
        (f"app->{n}", 2) for n in ("0x4d50 in mca_btl_vader.so", "mca_btl_vader_sendi",
                                    "0x4d50 in libopen-pal.so.40.30.2", "0x13b0 in app", "0xb500 in app",
                                    "[unknown]"))


def test_unnamed_function_without_object_uses_the_file_or_the_bare_address(tmp_path):
    f = tmp_path / "cachegrind.out.1"
    f.write_text("events: Ir\nfl=???\nfn=0x0000000000026890\n0 8\nfl=/src/lib/pack.c\nfn=0x00000000000000c0\n"
                 "0 2\nfn=0x10\n0 1\nsummary: 11\n")
    _, totals, _ = parse(f)
    assert {k: int(v[0]) for k, v in totals.items()} == {"0x26890": 8, "0xc0 in pack.c": 2, "0x10 in pack.c": 1}

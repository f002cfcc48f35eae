"""cachegrind collector with a toggle: only the named functions (and their callees) are counted, so
MPI start-up and the program's own set-up do not show as work.  Checked on a real MPI program
against the untoggled cachegrind counts of the same functions and the program's loop structure."""

import subprocess

import pytest

from perfcast import store
from perfcast.cli import main
from perfcast.collect.campaign import CampaignSpec, run_campaign
from perfcast.collect.collectors import CachegrindCollector, callgrind_to_cachegrind
from perfcast.errors import PerfcastError
from perfcast.io import cachegrind as cg_io
from conftest import require_tools

@pytest.fixture(autouse=True, scope="module")
def _tools():
    require_tools("mpicc", "mpirun", "valgrind")

ITERS = 5
# set_up() and MPI_Init run before the kernel; kernel_step() calls leaf_add() (a callee: counted);
# the Allreduce in main() is outside the toggled function (not counted)
SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#define NOINLINE __attribute__((noinline))
volatile double sink;
NOINLINE double leaf_add(double s, long i) { sink = s; return s + i * 1e-9; }
NOINLINE double kernel_step(long n) { double s = 0; for (long i = 0; i < n; i++) s = leaf_add(s, i); return s; }
NOINLINE void set_up(long m) { char *p = malloc(4096); for (long i = 0; i < m; i++) p[i & 4095] = (char)i; sink = p[7]; free(p); }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
  long n = atol(argv[1]); double s = 0, g;
  set_up(3000000);
  for (int it = 0; it < %d; it++) { s += kernel_step(n * (r + 1)); MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }
  if (r == 0) printf("perfcast-timer solve 1\n");
  MPI_Finalize(); return 0;
}
""" % ITERS


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    d = tmp_path_factory.mktemp("cgapp")
    (d / "app.c").write_text(SOURCE)
    subprocess.run(["mpicc", "-O1", "-g", "-o", str(d / "app"), str(d / "app.c")], check=True)
    return d / "app"


def _counts(exp, n, metric="Ir"):
    d = exp.data
    sel = d[(d.n == n) & (d.metric == metric)]
    return {(str(cp).split("->")[-1], int(r)): v for cp, r, v in zip(sel.callpath, sel["rank"], sel["value"]) if v}


def test_toggle_counts_only_the_kernel_and_its_callees(app, tmp_path):
    common = dict(command=f"mpirun -np 2 {app} {{n}}", reps_min=1, reps_max=1, collect="time,cachegrind",
                  timeout=120)
    full = run_campaign(CampaignSpec(parameters={"n": [20000]}, **common), tmp_path / "full.perfcast")
    tog = run_campaign(CampaignSpec(parameters={"n": [20000, 40000]}, settings={"cachegrind": {"toggle": "kernel_*"}},
                                    **common), tmp_path / "tog.perfcast")
    back = store.read(tmp_path / "tog.perfcast")
    assert back.equals(tog)
    # the collector knows its counts are exact (Metric.exact); the store keeps it; times are not
    assert all(back.metrics[m].exact for m in ("Ir", "Dr", "Dw")) and not back.metrics["time"].exact
    f, t = _counts(full, 20000), _counts(tog, 20000)
    # without the toggle, MPI start-up and set_up() carry most instructions
    assert f[("set_up", 0)] > 3_000_000 and sum(v for (fn, r), v in f.items() if r == 0) > 3 * (
        f[("kernel_step", 0)] + f[("leaf_add", 0)])
    # with it, exactly the kernel and its callee, on both ranks -- and the very same counts
    assert set(t) == {(fn, r) for fn in ("kernel_step", "leaf_add") for r in (0, 1)}
    for key, v in t.items():
        assert v == f[key], key
    for m in ("Dr", "Dw"):
        tm, fm = _counts(tog, 20000, m), _counts(full, 20000, m)
        assert all(v == fm[k] for k, v in tm.items())
    # by hand: kernel_step runs ITERS * n(r+1) loop trips, so its instructions are affine in the trips
    # and rank 1 (twice the trips) minus rank 0 equals n=40000 rank 0 minus n=20000 rank 0
    t2 = _counts(tog, 40000)
    for fn in ("kernel_step", "leaf_add"):
        per_trip = (t[(fn, 1)] - t[(fn, 0)]) / (ITERS * 20000)
        assert per_trip == int(per_trip) and per_trip >= 2
        assert t2[(fn, 0)] - t[(fn, 0)] == t[(fn, 1)] - t[(fn, 0)]
        assert t2[(fn, 1)] == t[(fn, 0)] + 3 * (t[(fn, 1)] - t[(fn, 0)])
    camp = tog.meta["campaign"]["collectors"]["cachegrind"]
    assert camp["toggle"] == ["kernel_*"]


def _failed_toggle(app, tmp_path, pattern: str) -> dict:
    """The one failed run of a one-run cachegrind campaign whose toggle is ``pattern``."""
    spec = CampaignSpec(command=f"mpirun -np 1 {app} 100", parameters={"n": [1]}, reps_min=1, reps_max=1,
                        collect="time,cachegrind", settings={"cachegrind": {"toggle": [pattern]}},
                        max_failures=1, timeout=120)
    exp = run_campaign(spec, tmp_path / "none.perfcast")
    (failed,) = exp.meta["campaign"]["failed"]
    return failed


def test_toggle_matching_nothing_fails_the_run_with_a_reason(app, tmp_path):
    failed = _failed_toggle(app, tmp_path, "no_such_fn*")
    assert failed["mode"] == "cachegrind" and "matched no executed function" in failed["reason"]


def test_collect_cli_option_and_yaml(app, tmp_path, capsys):
    out = tmp_path / "cli.perfcast"
    rc = main(["collect", "-o", str(out), "-P", "n=1000", "--reps", "1", "--collect", "time,cachegrind",
               "--cachegrind-toggle", "kernel_step", "--json", "--", "mpirun", "-np", "1", str(app), "{n}"])
    assert rc == 0, capsys.readouterr().err
    exp = store.read(out)
    fns = {str(cp).split("->")[-1] for cp in exp.data[exp.data.metric == "Ir"]["callpath"]
           if exp.data[(exp.data.callpath == cp) & (exp.data.metric == "Ir")]["value"].sum() > 0}
    assert fns == {"kernel_step", "leaf_add"}
    y = tmp_path / "c.yaml"
    y.write_text(f"command: [{app}, '{{n}}']\nparameters: {{n: [1]}}\ncollect: [time, cachegrind]\n"
                 "cachegrind: {toggle: 42}\noutput: y.perfcast\n")
    assert main(["collect", str(y)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "toggle" in err[0] and err[0].startswith("perfcast: error:")


def test_toggle_wrapper_quotes_patterns_and_bad_patterns_are_errors():
    w = CachegrindCollector(toggle=["solve_*", "a b(int)"]).wrapper()
    assert "--tool=callgrind" in w and "--collect-atstart=no" in w
    assert "--toggle-collect='solve_*'" in w and "--toggle-collect='a b(int)'" in w
    assert "--tool=cachegrind" in CachegrindCollector().wrapper()
    for bad in ("", " ", ["x", ""], 3, ["a\nb"]):
        with pytest.raises(PerfcastError, match="toggle"):
            CachegrindCollector(toggle=bad)


def test_callgrind_self_costs(tmp_path):
    # a hand-written callgrind profile: main calls f (inclusive 30) and has self cost 5; f has self 20
    # and calls g (inclusive 10 = g's self); relative positions and name compression
    src = tmp_path / "callgrind.out.rank0"
    src.write_text("version: 1\ncmd: ./x\npositions: line\nevents: Ir Dr\n"
                   "fl=(1) x.c\nfn=(1) main\n3 5 1\ncfn=(2) f\ncalls=1 10\n+1 30 4\n"
                   "fn=(2)\n10 12 2\n+2 8\ncfn=(3) g\ncalls=2 20\n* 10 1\n"
                   "fn=(3)\n20 10 1\nsummary: 35 4\ntotals: 35 4\n")
    dst = tmp_path / "cachegrind.out.rank0"
    assert callgrind_to_cachegrind(src, dst) == 3
    e = cg_io.read_files([dst])
    got = {(str(cp), m): v for cp, m, v in zip(e.data.callpath, e.data.metric, e.data["value"])}
    assert got == {("app->main", "Ir"): 5, ("app->main", "Dr"): 1, ("app->f", "Ir"): 20, ("app->f", "Dr"): 2,
                   ("app->g", "Ir"): 10, ("app->g", "Dr"): 1}
    src.write_text(src.read_text().replace("summary: 35 4\ntotals: 35 4", "summary: 36 4"))
    with pytest.raises(PerfcastError, match="do not add up"):
        callgrind_to_cachegrind(src, dst)


def test_callgrind_objects_kept_for_unnamed_functions(tmp_path):
    # the same unnamed address in two libraries (ob= with its own name compression, cob= for a callee's
    # object) stays two functions, each named with its object; costs by hand: 7 + 3 in libA, 4 in libB
    src = tmp_path / "callgrind.out.rank0"
    src.write_text("version: 1\npositions: line\nevents: Ir\n"
                   "ob=(1) /usr/lib/libA.so\nfl=(1) ???\nfn=(1) 0x0000000000004d50\n1 7\n"
                   "cob=(2) /usr/lib/libB.so\ncfn=(1)\ncalls=1 0\n1 4\n+1 3\n"
                   "ob=(2)\nfn=(1)\n1 4\nsummary: 14\n")
    dst = tmp_path / "cachegrind.out.rank0"
    assert callgrind_to_cachegrind(src, dst) == 2
    e = cg_io.read_files([dst])
    got = {str(cp).split("->")[-1]: v for cp, m, v in zip(e.data.callpath, e.data.metric, e.data["value"])}
    assert got == {"0x4d50 in libA.so": 10, "0x4d50 in libB.so": 4}


def test_toggle_matching_nothing_names_the_programs_functions_like_it(app, tmp_path):
    # CloverLeaf: --cachegrind-toggle hydro matched nothing (its symbol is hydro_, gfortran's) and the
    # reason said no more.  The reason now names the program's functions whose names hold the
    # pattern: here kernel_step (SOURCE above defines it; "kernel" is no function of its own).
    failed = _failed_toggle(app, tmp_path, "kernel")
    assert "matched no executed function" in failed["reason"]
    assert "named like it: kernel_step (" in failed["reason"], failed["reason"]

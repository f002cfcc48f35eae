"""perf reader: sampled profiles (real perf record) and perf stat CSV; MPI folding on known text."""

import resource
import subprocess
from pathlib import Path

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import read_one
from perfcast.io.perf import fold, parse_script, samples_experiment
from conftest import require_tools


SPIN = r"""
#include <stdio.h>
__attribute__((noinline)) double hot(long n)  { double s = 0; for (long i = 0; i < n; i++) s += i * 0.5;  return s; }
__attribute__((noinline)) double cold(long n) { double s = 0; for (long i = 0; i < n; i++) s += i * 0.25; return s; }
int main(void) { printf("%f\n", hot(400000000L) + cold(40000000L)); return 0; }
"""


def test_sampling_attributes_the_dominant_symbol(tmp_path):
    require_tools("perf", "gcc")
    (tmp_path / "spin.c").write_text(SPIN)
    subprocess.run(["gcc", "-O1", "-fno-omit-frame-pointer", "-o", str(tmp_path / "spin"),
                    str(tmp_path / "spin.c")], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = tmp_path / "perf.rank2.data"
    proc = subprocess.run(["perf", "record", "-F", "2000", "-e", "cpu-clock", "-N", "-B", "--no-bpf-event",
                           "-g", "-o", str(out), "--", str(tmp_path / "spin")], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"perf record cannot run here: {proc.stderr.decode()[-200:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    exp = read_one(out)
    assert exp.meta["format"] == "perf" and set(exp.data["rank"]) == {2}
    t = exp.data[exp.data["metric"] == "cpu_time"].groupby("callpath", observed=True)["value"].sum()
    hot = sum(v for k, v in t.items() if k.endswith("hot"))
    cold = sum(v for k, v in t.items() if k.endswith("cold"))
    total = t.sum()
    # ~10/11 of the application's work; under load some samples land outside both loops (startup,
    # kernel entry on preemption), so the share is of the two loops and the loops hold most of it
    assert hot / (hot + cold) > 0.8
    assert (hot + cold) / total > 0.6
    assert 6 < hot / cold < 16                 # loop counts differ 10x, same body
    # the sampled CPU time agrees with what the kernel accounted to the child (spin + perf itself)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert 0.6 * cpu < total <= 1.05 * cpu
    assert "mpi_time" not in exp.metrics


# hand-written perf script text: two samples in MPI (one via the PMPI name), one in the app, one in
# the kernel below the app; periods are nanoseconds of cpu-clock
SCRIPT = """\
app  101 10.000001:    1000000 cpu-clock: 
\t    7f00 opal_progress (/usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.2)
\t    7e00 ompi_coll_base_allreduce (/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_coll_tuned.so)
\t    7d00 PMPI_Allreduce (/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)
\t    2000 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)

app  101 10.000002:    2000000 cpu-clock: 
\t    7d10 MPI_Allreduce (/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)

app  101 10.000003:    4000000 cpu-clock: 
\t    5000 stencil (/tmp/app)
\t    4000 solve (/tmp/app)
\t    3000 main (/tmp/app)
\t    2000 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)

app  101 10.000004:    8000000 cpu-clock: 
\t ffffffff81000000 clear_page_erms ([kernel.kallsyms])
\t ffffffff81000100 do_page_fault ([kernel.kallsyms])
\t    5000 stencil (/tmp/app)
\t    3000 main (/tmp/app)

"""  # perf script ends every call stack, the last one too, with a blank line


def test_script_text_folds_mpi_and_kernel_frames(tmp_path):
    f = tmp_path / "perf.rank1.txt"
    f.write_text(SCRIPT)
    exp = read_one(f, format="perf")
    got = {(str(c), str(m)): v for c, m, v in zip(exp.data["callpath"], exp.data["metric"], exp.data["value"])}
    assert got[("app->main->solve->MPI_Allreduce", "cpu_time")] == pytest.approx(3e-3)
    assert got[("app->main->solve->MPI_Allreduce", "mpi_time")] == pytest.approx(3e-3)
    assert got[("app->main->solve->MPI_Allreduce", "samples")] == 2
    assert got[("app->main->solve->stencil", "cpu_time")] == pytest.approx(4e-3)
    assert got[("app->main->stencil->[kernel]", "cpu_time")] == pytest.approx(8e-3)
    assert ("app->main->solve->stencil", "mpi_time") not in got
    total = exp.data[exp.data["metric"] == "cpu_time"]["value"].sum()
    mpi = exp.data[exp.data["metric"] == "mpi_time"]["value"].sum()
    assert total == pytest.approx(15e-3) and mpi == pytest.approx(3e-3)
    assert exp.tree.parent("app->main->solve->MPI_Allreduce") == "app->main->solve"


def test_fold_cycles_with_frequency():
    acc, info = parse_script(SCRIPT.replace("cpu-clock", "cycles").splitlines())
    df, metrics, tree = samples_experiment(acc, None, hz=2e9)
    assert metrics["cycles"].kind == "count"
    cyc = df[df["metric"] == "cycles"]["value"].sum()
    assert cyc == 15e6
    assert df[df["metric"] == "cpu_time"]["value"].sum() == pytest.approx(15e6 / 2e9)
    assert fold([("x", "/a"), ("_start", "/a")]) == (["x"], False)


def test_perf_stat_csv(tmp_path):
    require_tools("perf")
    out = tmp_path / "perf.stat.rank0.csv"
    subprocess.run(["perf", "stat", "-x", ",", "-e", "task-clock,page-faults,instructions", "-o", str(out),
                    "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], check=True)
    exp = read_one(out)
    d = {str(m): v for m, v in zip(exp.data["metric"], exp.data["value"])}
    raw = [l.split(",") for l in out.read_text().splitlines() if l and not l.startswith("#")]
    tc = next(float(r[0]) for r in raw if r[2] == "task-clock")
    assert d["task-clock"] == pytest.approx(tc * 1e-3)
    assert exp.metrics["task-clock"].kind == "time" and exp.metrics["page-faults"].kind == "count"
    supported = any(r[2] == "instructions" and not r[0].startswith("<") for r in raw)
    assert ("instructions" in d) == supported
    if not supported:
        assert exp.meta["perf_stat"][0]["not_counted"] == ["instructions"]


def test_garbage_is_a_located_error(tmp_path):
    f = tmp_path / "perf.txt"
    f.write_text(SCRIPT.splitlines()[0] + "\n" + "this is not perf output\n")
    with pytest.raises(PerfcastError) as e:
        read_one(f, format="perf")
    assert e.value.where == "2"
    empty = tmp_path / "perf2.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(PerfcastError):
        read_one(empty, format="perf")

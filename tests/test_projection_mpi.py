"""End to end: a PMPI campaign of examples/jacobi projected between two stackhpc networks (issue #7).

Ground truth, independent of the projection code:
* MPI call counts and message sizes per rank from jacobi's documented structure (a 2-D Cartesian
  grid from MPI_Dims_create, one Isend + Irecv per existing neighbour per iteration, one Waitall,
  Allreduce of one double per iteration + 1, Reduce of 4 doubles, one Barrier; face = W doubles);
* micro-benchmark times read from the raw stackhpc CSV with the csv module (IMB_PingPong t_usec,
  Osu_allreduce value) at tabulated sizes, so no interpolation is involved;
* Sharkawi's Eq 17-21 evaluated by hand on those numbers and the measured PMPI times;
* a held-out campaign at p=6 checks the Eq 14-16 models fitted on p=1..4.
"""

import csv
import itertools
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.io import load
from perfcast.projection.comm import load_micro
from perfcast.projection.mpimodel import fit_profile_models, mpi_profiles, profile_at
from perfcast.projection.project import project
from conftest import DATA, cli_items, require_data, require_tools  # ../shared/data or $PERFCAST_SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
MICRO = DATA / "mpi" / "stackhpc_hpctests_imb_osu.csv"
IB, ROCE = "alaska/ib-gcc9-impi-verbs", "alaska/roce-gcc9-impi-verbs"
W, ITERS = 32, 50

@pytest.fixture(autouse=True, scope="module")
def _tools():
    require_tools("mpicc", "mpirun")
    require_data(MICRO)


def _campaign(tmp, name, ps):
    out = tmp / f"{name}.perfcast"
    root = " --allow-run-as-root" if os.geteuid() == 0 else ""
    code = main(["collect", "-o", str(out), "-P", "p=" + ",".join(map(str, ps)), "--reps", "1..2", "--cv", "0.5",
                 "--cv-metric", "total", "--collect", "time,mpi", "--json", "--",
                 *f"mpirun{root} -np {{p}} {ROOT}/examples/jacobi/jacobi -w {W} -i {ITERS} -q".split()])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    subprocess.run(["make", "-s", "-C", str(ROOT / "examples")], check=True, capture_output=True)
    tmp = tmp_path_factory.mktemp("jacobi_pmpi")
    return _campaign(tmp, "train", [1, 2, 3, 4]), _campaign(tmp, "heldout", [6])


def _neighbours(p):
    """Average existing neighbours per rank on MPI_Dims_create(p, 2)'s non-periodic grid."""
    dims = {1: (1, 1), 2: (2, 1), 3: (3, 1), 4: (2, 2), 6: (3, 2)}[p]
    tot = 0
    for i in range(dims[0]):
        for j in range(dims[1]):
            tot += (i > 0) + (i < dims[0] - 1) + (j > 0) + (j < dims[1] - 1)
    return tot / p


def _raw_micro():
    """(system, test, bytes) -> time in us, straight from the CSV."""
    out = {}
    with open(MICRO, newline="") as f:
        for r in csv.DictReader(f):
            if r["test"] == "IMB_PingPong" or (r["test"] == "Osu_allreduce" and r["ntasks"] == "64"):
                out[(f"{r['system']}/{r['partition']}", r["test"], int(r["bytes"]))] = float(r["value1"])
    return out


def _measured_times(exp, p):
    """Per-rank mean of the PMPI time per routine (sum over ranks / p, mean over repetitions)."""
    d = exp.data
    d = d[(d["p"] == p) & (d["metric"] == "pmpi_time")]
    per = d.groupby(["callpath", "rep"], observed=True)["value"].sum().groupby("callpath", observed=True).mean() / p
    return {str(k): float(v) for k, v in per.items()}


def _hand_projection(times, counts, T, base, target, sf_comp=1.0):
    """Eq 17-21 by hand. counts: routine -> (calls, bytes, table, elapsed)."""
    compute = times["APP"]
    total = compute + sum(c[3] for c in counts.values())
    w_comp = compute / total
    out = {}
    for r, (n, m, test, e) in counts.items():
        if test is None:
            out[r] = e * sf_comp
            continue
        tb, tt = T[(base, test, m)], T[(target, test, m)]
        trans_b, trans_t = n * tb * 1e-6, n * tt * 1e-6
        if trans_b > e:        # the table's transfer exceeds the measured time: its ratio only
            trans_b, trans_t = e, e * tt / tb
        wait_b = e - trans_b
        w_r = e / total
        sf = (w_r * tt / tb + w_comp * sf_comp) / (w_r + w_comp)
        out[r] = trans_t + sf * wait_b
    return compute * sf_comp, out


def test_pmpi_profile_matches_jacobi_structure(runs):
    exp = load([str(runs[0])])
    prof = mpi_profiles(exp)
    assert prof.time_metric == "pmpi_time" and prof.counts == [1, 2, 3, 4]
    for p in (1, 2, 3, 4):
        m = prof.measured(p)
        nb = _neighbours(p)
        assert m["Allreduce"]["calls"] == pytest.approx(ITERS + 1) and m["Allreduce"]["bytes"] == 8
        assert m["Reduce"]["calls"] == 1 and m["Reduce"]["bytes"] == 32
        assert m["Barrier"]["calls"] == 1
        if nb:
            # per-rank average over ranks with 1 and 2 neighbours at p=3: 4/3 x 50
            assert m["Isend"]["calls"] == pytest.approx(ITERS * nb) and m["Irecv"]["calls"] == pytest.approx(ITERS * nb)
            assert m["Isend"]["bytes"] == W * 8 and m["Waitall"]["calls"] == ITERS
        else:
            assert "Isend" not in m and "Waitall" not in m


def test_projection_ib_to_roce_by_hand(runs):
    exp = load([str(runs[0])])
    T = _raw_micro()
    micro = load_micro(MICRO)
    for p in (2, 4):
        res = project(exp, None, None, IB, [ROCE], {"p": p}, micro=micro, compute_factor=1.0)
        times = _measured_times(exp, p)
        nb = _neighbours(p)
        e_nb = times["MPI->MPI_Isend"] + times["MPI->MPI_Irecv"] + times["MPI->MPI_Waitall"]
        counts = {"Isend/Irecv+Wait": (ITERS * nb, W * 8, "IMB_PingPong", e_nb),
                  "Allreduce": (ITERS + 1, 8, "Osu_allreduce", times["MPI->MPI_Allreduce"]),
                  "Reduce": (1, 32, "Osu_allreduce", times["MPI->MPI_Reduce"]),   # no Reduce table: Allreduce
                  "Barrier": (1, 0, None, times["MPI->MPI_Barrier"])}             # no table: compute factor
        comp, per = _hand_projection(times, counts, T, IB, ROCE)
        t = res.targets[0]
        rows = {r["routine"]: r for r in t.comm_detail["routines"]}
        assert set(rows) == set(per)
        for r, v in per.items():
            assert rows[r]["elapsed_target"] == pytest.approx(v, rel=1e-9), r
        assert res.compute_base == pytest.approx(times["APP"], rel=1e-9) and t.compute == pytest.approx(comp)
        assert t.total == pytest.approx(comp + sum(per.values()), rel=1e-9)
        assert res.comm_base == pytest.approx(sum(c[3] for c in counts.values()), rel=1e-9)
        # RoCE's PingPong at 256 B and Allreduce at 8 B are slower than IB's: the projection grows
        assert T[(ROCE, "IMB_PingPong", 256)] > T[(IB, "IMB_PingPong", 256)]
        assert t.comm > 0.999 * res.comm_base


def test_eq14_16_models_at_an_unmeasured_count(runs):
    exp = load([str(runs[0])])
    held = load([str(runs[1])])
    models = fit_profile_models(mpi_profiles(exp))
    prof6, comp6, n = models.at(6)
    # held-out truth at p=6: jacobi's counts (3x2 grid: 14/6 neighbours) and the measured profile
    truth = mpi_profiles(held).measured(6)
    assert truth["Isend"]["calls"] == pytest.approx(ITERS * _neighbours(6))
    assert prof6["Allreduce"]["calls"] == pytest.approx(ITERS + 1) and prof6["Allreduce"]["bytes"] == 8
    assert prof6["Isend"]["bytes"] == W * 8 and prof6["Waitall"]["calls"] == ITERS
    assert prof6["Isend"]["calls"] == pytest.approx(truth["Isend"]["calls"], rel=0.10)
    # the projection at p=6 uses exactly these models and says so
    micro = load_micro(MICRO)
    res = project(exp, None, None, IB, [ROCE], {"p": 6}, micro=micro, compute_factor=1.0)
    assert res.nprocs == 6 and any("not measured" in x or "outside" in x for x in res.notes)
    rows = {r["routine"]: r for r in res.targets[0].comm_detail["routines"]}
    nbrow = rows["Isend/Irecv+Wait"]
    assert nbrow["calls"] == pytest.approx(prof6["Isend"]["calls"])
    assert nbrow["elapsed_base"] == pytest.approx(sum(prof6[r]["elapsed"] for r in ("Isend", "Irecv", "Waitall")))
    assert res.compute_base == pytest.approx(comp6)
    stated = {(m["routine"], m["quantity"]): m for m in res.models}
    assert stated[("Isend", "calls")]["fitted_on"] == [1, 2, 3, 4]    # on the grid: no call at p=1 is a count too
    assert stated[("Isend", "elapsed")]["fitted_on"] == [2, 3, 4]     # a time: not called at p=1, not measured
    assert stated[("Allreduce", "calls")]["model"].startswith("51")
    # the numbers at p=6 follow Eq 17-21 by hand from the modelled profile and the raw tables
    T = _raw_micro()
    counts = {"Isend/Irecv+Wait": (nbrow["calls"], 256, "IMB_PingPong", nbrow["elapsed_base"]),
              "Allreduce": (51, 8, "Osu_allreduce", prof6["Allreduce"]["elapsed"]),
              "Reduce": (1, 32, "Osu_allreduce", prof6["Reduce"]["elapsed"]),
              "Barrier": (1, 0, None, prof6["Barrier"]["elapsed"])}
    comp, per = _hand_projection({"APP": comp6}, counts, T, IB, ROCE)
    assert res.targets[0].total == pytest.approx(comp + sum(per.values()), rel=1e-9)
    # the halo's calls are modelled on the process grid the runs recorded (exactly: 14/6 neighbours
    # per rank at p=6), which has no 3.5 processes; a single count cannot be modelled
    assert prof6["Isend"]["calls"] == pytest.approx(truth["Isend"]["calls"], rel=1e-9)
    assert any(x.startswith("Isend calls: on the process grid") and "3x2 at p=6" in x for x in n)
    with pytest.raises(PerfcastError, match="whole number of processes, not p=3.5"):
        profile_at(exp, {"p": 3.5})
    with pytest.raises(PerfcastError, match="one process count is too few"):
        profile_at(held, {"p": 8})


# -- CLI -----------------------------------------------------------------------------------------
def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


TARGETS = [ROCE, "alaska/roce-gcc9-openmpi4-ucx", "csd3/cclake-roce-gcc9-ompi3-ucx", "alaska/ib-gcc9-openmpi4-ucx"]


def test_cli_json_and_ranked_table(capsys, runs):
    args = ["project", runs[0], "--micro", MICRO, "--compute-factor", "1", "--base", IB]
    for t in TARGETS:
        args += ["--target", t]
    code, out, err = cli(capsys, *args, "--at", "p=8", "--json")
    assert code == 0, err
    d = cli_items(out, "projection")[0]
    assert d["base"] == IB and d["nprocs"] == 8 and d["compute_source"] == "given factor"
    assert {m["quantity"] for m in d["mpi_models"]} == {"calls", "bytes", "elapsed", "compute"}
    totals = [t["total"] for t in d["targets"]]
    assert totals == sorted(totals) and {t["system"] for t in d["targets"]} == set(TARGETS)
    for t in d["targets"]:
        det = t["communication_detail"]
        assert t["total"] == pytest.approx(t["compute"] + t["communication"])
        assert t["communication"] == pytest.approx(sum(r["elapsed_target"] for r in det["routines"]))
        assert "log2(bytes)" in det["interpolation"]
    code, out, err = cli(capsys, *args, "--at", "p=8")
    assert code == 0, err
    # the text table lists the same systems in the same (fastest first) order, and states the models
    order = [t["system"] for t in d["targets"]]
    pos = [out.index(s + " ") for s in order]
    assert pos == sorted(pos)
    assert "MPI profile models in p (Eq 14-16" in out and "Isend" in out and "fitted on p=2,3,4" in out
    assert "extrapolated" in out and "interpolation" in out


@pytest.mark.parametrize("extra,msg", [
    (["--at", "p=0"], "process count >= 1"),
    (["--at", "n=5"], "no parameter 'n'"),
    (["--at", "p=8", "--compute-factor", "-1"], "positive"),
    (["--at", "p=4", "--target", "nowhere/net"], "no micro-benchmark system matches"),
    (["--at", "p=4", "--base", "alaska"], "ambiguous"),
])
def test_cli_bad_input(capsys, runs, extra, msg):
    args = ["project", runs[0], "--micro", MICRO, "--compute-factor", "1", "--base", IB, "--target", ROCE]
    # later options win for single-valued ones (click); --target is repeatable, so a bad one is added
    code, out, err = cli(capsys, *args, *extra)
    assert code == 2 and msg in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_bad_input_without_factor(capsys, runs):
    # no counters in the campaign: the surrogate asked by name cannot run; the error says what to do
    code, out, err = cli(capsys, "project", runs[0], "--base", "cpu2017-20200413-21968", "--target",
                         "cpu2017-20191014-19065", "--at", "p=2", "--method", "surrogate")
    assert code == 2 and "--compute-factor" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli(capsys, "project", runs[0], "--compute-factor", "1", "--base", IB, "--target", ROCE,
                         "--at", "p=2")
    assert code == 2 and "--micro" in err
    code, out, err = cli(capsys, "project", runs[0], "--micro", MICRO, "--compute-factor", "1", "--base", IB,
                         "--target", ROCE)
    assert code == 2 and "choose one with --at" in err


def _jacobi_totals(dims, n, iters):
    """Isend calls and bytes sent summed over the ranks of jacobi -n n -i iters on a non-periodic
    grid of ``dims``, counted rank by rank from jacobi.c's decomposition (the first n % d coordinates
    of a dimension one point more; a face holds the rank's points along the other dimension)."""
    calls = sent = 0
    for c in itertools.product(*(range(d) for d in dims)):
        ln = [n // d + (c[a] < n % d) for a, d in enumerate(dims)]
        for a in range(2):
            k = (c[a] > 0) + (c[a] < dims[a] - 1)
            calls += k * iters
            sent += k * iters * 8 * ln[1 - a]
    return calls, sent


def test_eq14_16_halo_on_the_recorded_process_grid(tmp_path):
    """jacobi -n 256 -i 50 (bench/data/jacobi-p's command) profiled at p = 1..16: the Isend calls and
    message size per rank at p = 12, 36, 48, 64 (Open MPI's 4x3, 6x6, 8x6, 8x8) as jacobi.c's
    decomposition gives them -- exactly, also where 256 does not divide by the dims (the sum over
    ranks of a halo is whole cross-sections).  The power laws in p were -4..-15% off in calls and
    +2..+54% in size there."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "examples")], check=True, capture_output=True)
    out = tmp_path / "j.perfcast"
    root = " --allow-run-as-root" if os.geteuid() == 0 else ""
    assert main(["collect", "-o", str(out), "-P", "p=1,2,4,8,16", "--reps", "1", "--collect", "mpi", "--",
                 *f"mpirun{root} --oversubscribe -np {{p}} {ROOT}/examples/jacobi/jacobi -n 256 -i 50 -q".split()]) == 0
    models = fit_profile_models(mpi_profiles(load([str(out)])))
    for p, dims in ((12, (4, 3)), (36, (6, 6)), (48, (8, 6)), (64, (8, 8))):
        prof, _, notes = models.at(p)
        calls, sent = _jacobi_totals(dims, 256, 50)
        assert prof["Isend"]["calls"] == pytest.approx(calls / p, rel=1e-9)
        assert prof["Isend"]["bytes"] == pytest.approx(sent / calls, rel=1e-9)
        assert any(x.startswith("Isend bytes: on the process grid") and f"{dims[0]}x{dims[1]} at p={p}" in x
                   for x in notes)
    assert _jacobi_totals((8, 8), 256, 50) == (11200, 2867200)       # 175 calls of 256 bytes per rank

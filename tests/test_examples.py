"""The example MPI applications: built with make, run at 1, 2 and 4 ranks, checked against the
closed-form behaviour of their manufactured problems (see the headers of jacobi.c and cg.c).

These tests need mpicc and mpirun (the project's setup installs Open MPI); they fail, not skip,
when those are missing.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
JACOBI = EXAMPLES / "jacobi" / "jacobi"
CG = EXAMPLES / "cg" / "cg"
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def mpirun() -> str:
    path = shutil.which("mpirun")
    if path is None:
        pytest.fail("mpirun not found: install Open MPI (scripts/install-system-deps.sh)")
    return path


@pytest.fixture(scope="module")
def built():
    if shutil.which("mpicc") is None:
        pytest.fail("mpicc not found: install Open MPI (scripts/install-system-deps.sh)")
    r = subprocess.run(["make", "-C", str(EXAMPLES)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert JACOBI.is_file() and CG.is_file()
    return True


def run(np_: int, exe: Path, *args: str) -> dict:
    cmd = [mpirun(), "--oversubscribe", "-np", str(np_), str(exe), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout}\n{r.stderr}"
    out = {"info": {}, "residual": {}, "result": {}, "timer": {}}
    for line in r.stdout.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("perfcast-"):
            continue
        kind = parts[0][len("perfcast-"):]
        if kind == "info":
            out["info"][parts[1]] = parts[2:]
        elif kind == "residual":
            out["residual"][int(parts[1])] = float(parts[2])
        elif kind in ("result", "timer"):
            assert len(parts) == 3, line
            out[kind][parts[1]] = float(parts[2])
    return out


def jacobi_theory(grid: list[int], iterations: int):
    """Residual norm of iterate k and error norm after `iterations` (jacobi.c's header)."""
    d = len(grid)
    h = 1.0 / (grid[0] + 1)
    lam = sum((2 - 2 * math.cos(math.pi / (n + 1))) / h**2 for n in grid)
    c = sum(math.cos(math.pi / (n + 1)) for n in grid) / d
    # |s|^2 computed on the grid directly (not via the (N+1)/2 identity)
    s2 = 1.0
    for n in grid:
        s2 *= float(np.sum(np.sin(np.pi * np.arange(1, n + 1) / (n + 1)) ** 2))
    snorm = math.sqrt(s2)
    return (lambda k: lam * c**k * snorm), c**iterations * snorm


def check_timers(out: dict, names: tuple[str, ...]):
    assert set(out["timer"]) == set(names)
    assert all(v >= 0 for v in out["timer"].values())
    parts = sum(v for k, v in out["timer"].items() if k != "total")
    # the parts are maxima over ranks of disjoint intervals; each is at most the total
    assert all(out["timer"][k] <= out["timer"]["total"] * 1.0001 + 1e-6 for k in names)
    assert parts > 0


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_jacobi_2d_matches_closed_form(built, ranks):
    n, iters, k = 21, 12, 3
    out = run(ranks, JACOBI, "-n", str(n), "-i", str(iters), "-k", str(k))
    res_of, err = jacobi_theory([n, n], iters)
    assert sorted(out["residual"]) == [2, 5, 8, 11]  # Allreduce after iterations 3, 6, 9, 12
    for it, value in out["residual"].items():
        assert value == pytest.approx(res_of(it), rel=1e-11)
    vals = [out["residual"][i] for i in sorted(out["residual"])]
    assert all(b < a for a, b in zip(vals, vals[1:]))
    assert out["result"]["error"] == pytest.approx(err, rel=1e-11)
    check_timers(out, ("compute", "halo", "reduce", "total"))
    assert out["info"]["ranks"] == [str(ranks)]


@pytest.mark.parametrize("ranks,mode", [(1, "isend"), (4, "isend"), (4, "sendrecv")])
def test_jacobi_3d(built, ranks, mode):
    n, iters = 10, 5
    out = run(ranks, JACOBI, "-d", "3", "-n", str(n), "-i", str(iters), "-m", mode)
    res_of, err = jacobi_theory([n, n, n], iters)
    assert sorted(out["residual"]) == list(range(iters))
    for it, value in out["residual"].items():
        assert value == pytest.approx(res_of(it), rel=1e-11)
    assert out["result"]["error"] == pytest.approx(err, rel=1e-11)
    assert out["info"]["halo"] == [mode]


def test_jacobi_weak_scaling_grid(built):
    # -w 6 on 4 ranks in 3D: MPI_Dims_create(4, 3) = 2 x 2 x 1, global grid 12 x 12 x 6
    out = run(4, JACOBI, "-d", "3", "-w", "6", "-i", "4", "-q")
    assert out["info"]["procs"] == ["2", "2", "1"]
    assert out["info"]["grid"] == ["12", "12", "6"]
    _, err = jacobi_theory([12, 12, 6], 4)
    assert out["result"]["error"] == pytest.approx(err, rel=1e-11)
    assert out["residual"] == {}


@pytest.mark.parametrize("dim,n", [(2, 24), (3, 10)])
def test_cg_converges_to_manufactured_solution(built, dim, n):
    results = {}
    for ranks in (1, 2, 4):
        out = run(ranks, CG, "-d", str(dim), "-n", str(n), "-t", "1e-10", "-i", "500")
        assert out["result"]["relres"] < 1e-10
        assert out["result"]["error"] < 1e-8
        check_timers(out, ("spmv", "halo", "dot", "axpy", "total"))
        results[ranks] = out
    # same Krylov iterates whatever the distribution (only summation order differs)
    its = {r: int(o["result"]["iterations"]) for r, o in results.items()}
    assert len(set(its.values())) == 1, its
    base = results[1]["residual"]
    for r in (2, 4):
        for it in range(1, min(its[1], 6) + 1):
            assert results[r]["residual"][it] == pytest.approx(base[it], rel=1e-9)


def test_cg_fixed_iterations(built):
    # -t 0: exactly MAXITER iterations; relative residuals decrease overall
    out = run(2, CG, "-n", "16", "-i", "7", "-t", "0")
    assert out["result"]["iterations"] == 7
    assert sorted(out["residual"]) == list(range(1, 8))
    assert out["residual"][7] < out["residual"][1]


def test_bad_arguments_fail_cleanly(built):
    r = subprocess.run([mpirun(), "-np", "1", str(JACOBI), "-d", "5"], capture_output=True, text=True,
                       env=ENV, timeout=60)
    assert r.returncode != 0
    assert "-d must be 2 or 3" in r.stderr

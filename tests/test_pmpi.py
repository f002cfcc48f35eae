"""The PMPI library and its reader.

Expected counts and bytes are derived by hand: for the Jacobi example from the stencil's geometry
(Cartesian process grid, block sizes, faces x iterations x 8 bytes, Allreduce every k iterations);
for the routine exerciser below from the messages it sends and the byte rules documented in the
header of perfcast_pmpi.c.  These tests need mpicc and mpirun and fail (not skip) without them.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from perfcast import store
from perfcast.collect import pmpi
from perfcast.errors import PerfcastError
from perfcast.io import read_one
from perfcast.io.pmpi import read_dir
from conftest import require_tools

REPO = Path(__file__).resolve().parents[1]
JACOBI = REPO / "examples" / "jacobi" / "jacobi"
BASE_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("pmpi-cache")


@pytest.fixture(scope="module")
def shim(cache):
    old = os.environ.get("PERFCAST_CACHE")
    os.environ["PERFCAST_CACHE"] = str(cache)
    try:
        require_tools("mpicc", "mpirun")
        lib = pmpi.build_shim()
        yield lib
    finally:
        if old is None:
            os.environ.pop("PERFCAST_CACHE", None)
        else:
            os.environ["PERFCAST_CACHE"] = old


@pytest.fixture(scope="module")
def jacobi():
    r = subprocess.run(["make", "-C", str(REPO / "examples"), "jacobi/jacobi"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return JACOBI


def profiled_run(outdir: Path, ranks: int, argv: list[str], extra_env: dict | None = None):
    env = {**os.environ, **BASE_ENV, **pmpi.shim_env(outdir), **(extra_env or {})}
    cmd = ["mpirun", *pmpi.mpirun_args(outdir), "--oversubscribe", "-np", str(ranks), *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"{cmd}\n{r.stdout}\n{r.stderr}"
    return r


def raw(outdir: Path) -> dict[int, dict]:
    out = {}
    for f in sorted(outdir.glob("pmpi.rank*.json")):
        d = json.loads(f.read_text())
        out[d["rank"]] = d
    return out


def routine(d: dict, name: str) -> dict:
    for r in d["routines"]:
        if r["name"] == name:
            return r
    return {"name": name, "calls": 0, "bytes_sent": 0, "bytes_recv": 0, "time": 0.0, "hist": []}


def peers(d: dict) -> dict[int, tuple[int, int, int, int]]:
    return {p["rank"]: (p["sent_msgs"], p["sent_bytes"], p["recv_msgs"], p["recv_bytes"]) for p in d["peers"]}


def bucket_low(nbytes: int) -> int:
    return 0 if nbytes == 0 else 1 << (nbytes.bit_length() - 1)


# -- the build --------------------------------------------------------------------------------------
def test_build_is_cached_and_forceable(shim, cache):
    assert shim.is_file() and shim.name == "libperfcast_pmpi.so"
    assert cache in shim.parents
    mtime = shim.stat().st_mtime_ns
    assert pmpi.build_shim() == shim and shim.stat().st_mtime_ns == mtime  # no rebuild
    assert pmpi.build_shim(force=True) == shim and shim.stat().st_mtime_ns != mtime
    nm = subprocess.run(["nm", "-D", "--defined-only", str(shim)], capture_output=True, text=True).stdout
    for sym in ("MPI_Send", "MPI_Waitall", "MPI_Ialltoallw", "MPI_Mrecv", "mpi_send_", "mpi_send__",
                "MPI_SEND", "ompi_send_f", "mpi_waitall_", "mpi_init_"):
        assert f" {sym}\n" in nm, sym
    ok, why = pmpi.available()
    assert ok and str(shim) in why


def test_build_errors_are_one_line(shim, tmp_path, monkeypatch):
    monkeypatch.setenv("MPICC", "no-such-mpicc-here")
    with pytest.raises(PerfcastError, match="no-such-mpicc-here not found"):
        pmpi.build_shim()
    ok, why = pmpi.available()
    assert not ok and "not found" in why
    # a broken source: the compiler's first error line is reported
    monkeypatch.delenv("MPICC")
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undeclared_thing; }\n")
    monkeypatch.setattr(pmpi, "SOURCE", bad)
    monkeypatch.setenv("PERFCAST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(PerfcastError) as e:
        pmpi.build_shim()
    assert "undeclared_thing" in e.value.message and "\n" not in e.value.message
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-built left behind


def test_env_and_mpirun_args(shim, tmp_path, monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    env = pmpi.shim_env(tmp_path / "out")
    assert env["LD_PRELOAD"] == f"{shim}:/opt/other.so"
    assert env["PERFCAST_PMPI_DIR"] == str((tmp_path / "out").resolve())
    assert (tmp_path / "out").is_dir()
    assert pmpi.mpirun_args(tmp_path / "out") == ["-x", "LD_PRELOAD", "-x", "PERFCAST_PMPI_DIR"]


# -- Jacobi: expectations from the geometry ---------------------------------------------------------
def dims_create(p: int, d: int) -> list[int]:
    """MPI_Dims_create: the most balanced factorisation, non-increasing."""
    best = None
    for combo in itertools.product(range(1, p + 1), repeat=d):
        if math.prod(combo) == p and list(combo) == sorted(combo, reverse=True):
            key = (max(combo) - min(combo), [-c for c in combo])
            if best is None or key < best[0]:
                best = (key, list(combo))
    return best[1]


def jacobi_expectations(ranks: int, d: int, n: int, iters: int, k: int, mode: str) -> dict[int, dict]:
    dims = dims_create(ranks, d)
    exp = {}
    for r in range(ranks):
        # row-major Cartesian order: the last dimension varies fastest
        coords, rest = [], r
        for a in reversed(range(d)):
            coords.insert(0, rest % dims[a])
            rest //= dims[a]
        local = [n // dims[a] + (coords[a] < n % dims[a]) for a in range(d)]

        def rank_of(c):
            out = 0
            for a in range(d):
                out = out * dims[a] + c[a]
            return out

        nbrs = {}  # (dim, side) -> world rank
        for a in range(d):
            for s, delta in ((0, -1), (1, +1)):
                c = list(coords)
                c[a] += delta
                if 0 <= c[a] < dims[a]:
                    nbrs[(a, s)] = rank_of(c)
        face = {a: 8 * math.prod(local[b] for b in range(d) if b != a) for a in range(d)}
        e = {"routines": {}, "peers": {}, "dims": dims}
        if mode == "isend":
            nb = len(nbrs)
            per_iter = sum(face[a] for (a, s) in nbrs)
            e["routines"]["MPI_Isend"] = (iters * nb, iters * per_iter, 0)
            e["routines"]["MPI_Irecv"] = (iters * nb, 0, iters * per_iter)
            e["routines"]["MPI_Waitall"] = (iters if nb else 0, 0, 0)
            e["hist"] = {}
            for (a, s) in nbrs:
                e["hist"][bucket_low(face[a])] = e["hist"].get(bucket_low(face[a]), 0) + iters
        else:
            calls = sent = recv = 0
            for a in range(d):
                for s in (0, 1):
                    to, frm = nbrs.get((a, s)), nbrs.get((a, 1 - s))
                    if to is None and frm is None:
                        continue
                    calls += 1
                    sent += face[a] if to is not None else 0
                    recv += face[a] if frm is not None else 0
            e["routines"]["MPI_Sendrecv"] = (iters * calls, iters * sent, iters * recv)
        for (a, s), q in nbrs.items():
            e["peers"][q] = (iters, iters * face[a], iters, iters * face[a])
        n_allreduce = iters // k + 1  # residual every k iterations + the final error
        e["routines"]["MPI_Allreduce"] = (n_allreduce, 8 * n_allreduce, 8 * n_allreduce)
        e["routines"]["MPI_Reduce"] = (1, 32, 32 if r == 0 else 0)
        e["routines"]["MPI_Barrier"] = (1, 0, 0)
        exp[r] = e
    return exp


@pytest.mark.parametrize("ranks,d,n,iters,k,mode", [
    (2, 2, 21, 7, 2, "isend"),
    (4, 2, 21, 6, 3, "isend"),
    (4, 3, 9, 5, 1, "sendrecv"),
])
def test_jacobi_message_pattern(shim, jacobi, tmp_path, ranks, d, n, iters, k, mode):
    out = tmp_path / "pmpi"
    profiled_run(out, ranks, [str(jacobi), "-d", str(d), "-n", str(n), "-i", str(iters), "-k", str(k),
                              "-m", mode, "-q"])
    got = raw(out)
    assert sorted(got) == list(range(ranks))
    expected = jacobi_expectations(ranks, d, n, iters, k, mode)
    p2p = {"MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Send", "MPI_Recv"}
    for r, e in expected.items():
        g = got[r]
        assert g["size"] == ranks
        for name, (calls, sent, recv) in e["routines"].items():
            rr = routine(g, name)
            assert (rr["calls"], rr["bytes_sent"], rr["bytes_recv"]) == (calls, sent, recv), (r, name)
        # no point-to-point routine beyond the expected ones
        called = {x["name"] for x in g["routines"] if x["calls"]}
        assert called & p2p == {x for x in e["routines"] if x in p2p and e["routines"][x][0]}
        assert peers(g) == e["peers"], r
        if mode == "isend":
            assert {lo: c for lo, c in routine(g, "MPI_Isend")["hist"]} == e["hist"]
            assert {lo: c for lo, c in routine(g, "MPI_Irecv")["hist"]} == e["hist"]
        assert routine(g, "MPI_Allreduce")["hist"] == [[8, iters // k + 1]]
        # the process grid jacobi.c made (MPI_Dims_create + MPI_Cart_create, non-periodic), as MPI reports it
        assert g["cart"] == [{"size": ranks, "dims": e["dims"], "periods": [0] * d}]
        t = g["time"]
        assert t["region"] > 0 and t["mpi"] >= 0
        assert t["app"] == pytest.approx(t["region"] - t["mpi"], abs=2e-9)

    # the reader: same numbers in the Experiment, and a lossless store round trip
    exp = read_one(out)
    assert exp.meta["format"] == "pmpi" and exp.parameters == ()
    vals = exp.data.astype({"callpath": str, "metric": str})
    for r, e in expected.items():
        for name, (calls, sent, recv) in e["routines"].items():
            sel = vals[(vals["rank"] == r) & (vals["callpath"] == f"MPI->{name}")]
            m = dict(zip(sel["metric"], sel["value"]))
            assert (m["calls"], m["bytes_sent"], m["bytes_recv"], m["bytes"]) == (calls, sent, recv, sent + recv)
        root = vals[(vals["rank"] == r) & (vals["callpath"] == "MPI") & (vals["metric"] == "calls")]["value"]
        assert float(root.iloc[0]) == sum(x["calls"] for x in got[r]["routines"])
    sent = {(s, q): (m, b) for s, q, m, b in exp.meta["pmpi"]["sent"]}
    recv = {(q, s): (m, b) for q, s, m, b in exp.meta["pmpi"]["received"]}
    assert sent == recv  # every message counted once by its sender and once by its receiver
    dest = tmp_path / "run.perfcast"
    store.write(exp, dest)
    assert store.read(dest).equals(exp)
    excl = exp.to_exclusive("calls")
    assert float(excl.data[(excl.data["callpath"] == "MPI") & (excl.data["metric"] == "calls")]["value"].abs().max()) == 0


# -- every routine family: a C exerciser with hand-derived expectations ------------------------------
EXERCISER = r"""
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (p != 4) MPI_Abort(MPI_COMM_WORLD, 3);
    int ibuf[100]; double dbuf[100]; char cbuf[100]; float fbuf[8];
    memset(ibuf, 0, sizeof ibuf); memset(dbuf, 0, sizeof dbuf); memset(cbuf, 1, sizeof cbuf);
    memset(fbuf, 0, sizeof fbuf);
    MPI_Status st;
    /* blocking: 0 -> 1 ten ints received with ANY_SOURCE into 100 ints; 0 -> 2 Ssend 5 doubles */
    if (r == 0) { MPI_Send(ibuf, 10, MPI_INT, 1, 1, MPI_COMM_WORLD);
                  MPI_Ssend(dbuf, 5, MPI_DOUBLE, 2, 2, MPI_COMM_WORLD); }
    if (r == 1) MPI_Recv(ibuf, 100, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (r == 2) MPI_Recv(dbuf, 5, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, &st);
    /* ring of 3 ints */
    MPI_Sendrecv_replace(ibuf, 3, MPI_INT, (r + 1) % p, 3, (r + p - 1) % p, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* non-blocking: 0 -> 3 seven chars, 1 -> 3 nine chars, received with ANY_SOURCE */
    if (r == 0 || r == 1) { MPI_Request q; MPI_Isend(cbuf, r == 0 ? 7 : 9, MPI_CHAR, 3, 4, MPI_COMM_WORLD, &q);
                            MPI_Wait(&q, MPI_STATUS_IGNORE); }
    if (r == 3) {
        MPI_Request q[2]; int idx, out, ind[2];
        MPI_Irecv(cbuf, 50, MPI_CHAR, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &q[0]);
        MPI_Irecv(cbuf + 50, 50, MPI_CHAR, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &q[1]);
        MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE);
        do { MPI_Waitsome(2, q, &out, ind, MPI_STATUSES_IGNORE); } while (out != MPI_UNDEFINED);
    }
    /* persistent: 3 -> 2 two doubles, started three times */
    if (r == 2 || r == 3) {
        MPI_Request q;
        if (r == 3) MPI_Send_init(dbuf, 2, MPI_DOUBLE, 2, 5, MPI_COMM_WORLD, &q);
        else MPI_Recv_init(dbuf, 2, MPI_DOUBLE, 3, 5, MPI_COMM_WORLD, &q);
        for (int i = 0; i < 3; i++) { MPI_Start(&q); MPI_Wait(&q, MPI_STATUS_IGNORE); }
        MPI_Request_free(&q);
    }
    /* matched probes: 1 -> 0 twelve bytes (Mprobe/Mrecv), 2 -> 0 twenty bytes (Improbe/Imrecv) */
    if (r == 1) MPI_Send(cbuf, 12, MPI_BYTE, 0, 6, MPI_COMM_WORLD);
    if (r == 2) MPI_Send(cbuf, 20, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    if (r == 0) {
        MPI_Message m; MPI_Request q; int flag = 0;
        MPI_Mprobe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &m, &st);
        MPI_Mrecv(cbuf, 100, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        while (!flag) MPI_Improbe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
        MPI_Imrecv(cbuf, 100, MPI_BYTE, &m, &q);
        flag = 0;
        while (!flag) MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
    }
    /* sub-communicator with reversed order: world 2 is rank 0 of {2, 0}; it sends one int to world 0 */
    MPI_Comm sub; MPI_Comm_split(MPI_COMM_WORLD, r % 2, -r, &sub);
    if (r == 2) MPI_Send(ibuf, 1, MPI_INT, 1, 8, sub);
    if (r == 0) MPI_Recv(ibuf, 1, MPI_INT, MPI_ANY_SOURCE, 8, sub, MPI_STATUS_IGNORE);
    MPI_Comm_free(&sub);
    /* collectives */
    int counts[4] = {1, 2, 3, 4}, displs[4] = {0, 1, 3, 6}, sc[4], sd[4], rc[4], rd[4];
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(dbuf, 5, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Reduce(ibuf, ibuf + 10, 3, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD);
    MPI_Allreduce(fbuf, fbuf + 4, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, dbuf, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(ibuf, 2, MPI_INT, ibuf + 20, 2, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gatherv(ibuf, r + 1, MPI_INT, ibuf + 40, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatter(ibuf, 3, MPI_INT, ibuf + 60, 3, MPI_INT, 3, MPI_COMM_WORLD);
    MPI_Allgather(dbuf, 1, MPI_DOUBLE, dbuf + 10, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoall(ibuf, 2, MPI_INT, ibuf + 20, 2, MPI_INT, MPI_COMM_WORLD);
    for (int j = 0, o = 0; j < 4; j++) { sc[j] = j + 1; sd[j] = o; o += j + 1; rc[j] = r + 1; rd[j] = j * (r + 1); }
    MPI_Alltoallv(ibuf, sc, sd, MPI_INT, ibuf + 40, rc, rd, MPI_INT, MPI_COMM_WORLD);
    int rsc[4] = {1, 1, 2, 2};
    MPI_Reduce_scatter(ibuf, ibuf + 80, rsc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(ibuf, ibuf + 80, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(ibuf, ibuf + 90, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(ibuf, ibuf + 91, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Request q[2];
    MPI_Ibcast(ibuf, 3, MPI_INT, 0, MPI_COMM_WORLD, &q[0]);
    MPI_Iallreduce(dbuf, dbuf + 50, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    MPI_Finalize();
    return 0;
}
"""


def exerciser_expectations():
    P = 4
    routines = {r: {} for r in range(P)}

    def add(rank, name, calls=1, sent=0, recv=0):
        c, s, v = routines[rank].get(name, (0, 0, 0))
        routines[rank][name] = (c + calls, s + sent, v + recv)

    # (src, dst, bytes, send routine, recv routine): every point-to-point message of the program
    msgs = [(0, 1, 40, "MPI_Send", "MPI_Recv"), (0, 2, 40, "MPI_Ssend", "MPI_Recv")]
    msgs += [(s, (s + 1) % P, 12, "MPI_Sendrecv_replace", "MPI_Sendrecv_replace") for s in range(P)]
    msgs += [(0, 3, 7, "MPI_Isend", "MPI_Irecv"), (1, 3, 9, "MPI_Isend", "MPI_Irecv")]
    msgs += [(3, 2, 16, "MPI_Send_init", "MPI_Recv_init")] * 3
    msgs += [(1, 0, 12, "MPI_Send", "MPI_Mrecv"), (2, 0, 20, "MPI_Send", "MPI_Imrecv"),
             (2, 0, 4, "MPI_Send", "MPI_Recv")]
    peer = {r: {} for r in range(P)}
    for s, d, b, sr, rr in msgs:
        # calls of persistent routines are the *_init calls, counted separately below
        add(s, sr, calls=0 if sr == "MPI_Send_init" else 1, sent=b)
        add(d, rr, calls=0 if rr in ("MPI_Recv_init", "MPI_Sendrecv_replace") else 1, recv=b)
        ps = peer[s].get(d, (0, 0, 0, 0))
        peer[s][d] = (ps[0] + 1, ps[1] + b, ps[2], ps[3])
        pr = peer[d].get(s, (0, 0, 0, 0))
        peer[d][s] = (pr[0], pr[1], pr[2] + 1, pr[3] + b)
    add(3, "MPI_Send_init")
    add(2, "MPI_Recv_init")
    for r in (2, 3):
        add(r, "MPI_Start", calls=3)
        add(r, "MPI_Request_free")
    add(0, "MPI_Mprobe")
    # collectives, by the documented buffer rules
    for r in range(P):
        add(r, "MPI_Barrier")
        add(r, "MPI_Bcast", sent=40 if r == 1 else 0, recv=0 if r == 1 else 40)
        add(r, "MPI_Reduce", sent=12, recv=12 if r == 2 else 0)
        add(r, "MPI_Allreduce", sent=16, recv=16)
        add(r, "MPI_Allreduce", sent=16, recv=16)  # MPI_IN_PLACE counts like a separate buffer
        add(r, "MPI_Gather", sent=8, recv=32 if r == 0 else 0)
        add(r, "MPI_Gatherv", sent=4 * (r + 1), recv=40 if r == 0 else 0)
        add(r, "MPI_Scatter", sent=48 if r == 3 else 0, recv=12)
        add(r, "MPI_Allgather", sent=8, recv=32)
        add(r, "MPI_Alltoall", sent=32, recv=32)
        add(r, "MPI_Alltoallv", sent=40, recv=16 * (r + 1))
        add(r, "MPI_Reduce_scatter", sent=24, recv=4 * [1, 1, 2, 2][r])
        add(r, "MPI_Reduce_scatter_block", sent=32, recv=8)
        add(r, "MPI_Scan", sent=4, recv=4)
        add(r, "MPI_Exscan", sent=4, recv=4)
        add(r, "MPI_Ibcast", sent=12 if r == 0 else 0, recv=0 if r == 0 else 12)
        add(r, "MPI_Iallreduce", sent=8, recv=8)
        add(r, "MPI_Waitall")
    return routines, peer


def test_every_routine_family(shim, tmp_path):
    src = tmp_path / "exerciser.c"
    src.write_text(EXERCISER)
    exe = tmp_path / "exerciser"
    r = subprocess.run(["mpicc", "-O1", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "pmpi"
    profiled_run(out, 4, [str(exe)])
    got = raw(out)
    routines, peer = exerciser_expectations()
    for rank in range(4):
        for name, (calls, sent, recv) in routines[rank].items():
            g = routine(got[rank], name)
            assert (g["calls"], g["bytes_sent"], g["bytes_recv"]) == (calls, sent, recv), (rank, name)
        assert peers(got[rank]) == peer[rank], rank
        assert got[rank]["untracked_requests"] == 0
    # histograms: Alltoallv on rank 3 moves max(40, 64) = 64 bytes -> bucket [64, 128)
    assert routine(got[3], "MPI_Alltoallv")["hist"] == [[64, 1]]
    assert routine(got[0], "MPI_Barrier")["hist"] == [[0, 1]]
    assert routine(got[3], "MPI_Irecv")["hist"] == [[4, 1], [8, 1]]  # 7 and 9 bytes
    # probes and tests are timed and counted but move no bytes
    assert routine(got[0], "MPI_Improbe")["calls"] >= 1 and routine(got[0], "MPI_Improbe")["bytes_recv"] == 0
    assert routine(got[0], "MPI_Test")["calls"] >= 1


# -- Fortran entry points (called from C: gfortran is not required to exercise them) -----------------
FORTRAN_FROM_C = r"""
#include <mpi.h>
typedef MPI_Fint F;
void mpi_init_(F *); void mpi_finalize_(F *);
void mpi_send_(void *, F *, F *, F *, F *, F *, F *);
void mpi_recv_(void *, F *, F *, F *, F *, F *, F *, F *);
void mpi_isend_(void *, F *, F *, F *, F *, F *, F *, F *);
void mpi_irecv_(void *, F *, F *, F *, F *, F *, F *, F *);
void mpi_waitall_(F *, F *, F *, F *);
void mpi_allreduce_(void *, void *, F *, F *, F *, F *, F *);
void mpi_bcast_(void *, F *, F *, F *, F *, F *);
void mpi_barrier_(F *, F *);
int main(void) {
    F ierr, rank, size;
    mpi_init_(&ierr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    F comm = MPI_Comm_c2f(MPI_COMM_WORLD), dbl = MPI_Type_c2f(MPI_DOUBLE), itg = MPI_Type_c2f(MPI_INT);
    F sum = MPI_Op_c2f(MPI_SUM), tag = 9, six = 6, ten = 10, four = 4, three = 3, one = 1, two = 2, zero = 0;
    double buf[16] = {0}, x = 1, y;
    int ib[3] = {0};
    if (rank == 0) { F dest = 1; mpi_send_(buf, &six, &dbl, &dest, &tag, &comm, &ierr); }
    if (rank == 1) { F src = 0; mpi_recv_(buf, &ten, &dbl, &src, &tag, &comm, MPI_F_STATUS_IGNORE, &ierr); }
    F next = (rank + 1) % size, prev = (rank + size - 1) % size, req[2];
    mpi_irecv_(buf + 8, &four, &dbl, &prev, &tag, &comm, &req[0], &ierr);
    mpi_isend_(buf, &four, &dbl, &next, &tag, &comm, &req[1], &ierr);
    mpi_waitall_(&two, req, MPI_F_STATUSES_IGNORE, &ierr);
    mpi_allreduce_(&x, &y, &one, &dbl, &sum, &comm, &ierr);
    mpi_bcast_(ib, &three, &itg, &zero, &comm, &ierr);
    mpi_barrier_(&comm, &ierr);
    mpi_finalize_(&ierr);
    return y == size ? 0 : 1;
}
"""


def test_fortran_entry_points(shim, tmp_path):
    src = tmp_path / "fort.c"
    src.write_text(FORTRAN_FROM_C)
    exe = tmp_path / "fort"
    r = subprocess.run(["mpicc", "-o", str(exe), str(src), "-lmpi_mpifh"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "pmpi"
    profiled_run(out, 3, [str(exe)])
    got = raw(out)
    assert sorted(got) == [0, 1, 2]
    for rank in range(3):
        g = got[rank]
        assert routine(g, "MPI_Init")["calls"] == 1
        want_send = (1, 48, 0) if rank == 0 else (0, 0, 0)
        want_recv = (1, 0, 48) if rank == 1 else (0, 0, 0)
        for name, want in (("MPI_Send", want_send), ("MPI_Recv", want_recv),
                           ("MPI_Isend", (1, 32, 0)), ("MPI_Irecv", (1, 0, 32)), ("MPI_Waitall", (1, 0, 0)),
                           ("MPI_Allreduce", (1, 8, 8)), ("MPI_Barrier", (1, 0, 0)),
                           ("MPI_Bcast", (1, 12 if rank == 0 else 0, 0 if rank == 0 else 12))):
            x = routine(g, name)
            assert (x["calls"], x["bytes_sent"], x["bytes_recv"]) == want, (rank, name)
        nxt, prv = (rank + 1) % 3, (rank + 2) % 3
        p = peers(g)
        assert p[nxt][:2] == (1 + (rank == 0 and nxt == 1), 32 + (48 if rank == 0 and nxt == 1 else 0))
        assert p[prv][2:] == (1 + (rank == 1 and prv == 0), 32 + (48 if rank == 1 and prv == 0 else 0))


# -- mpi4py ----------------------------------------------------------------------------------------------
MPI4PY_PROGRAM = """
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
r = c.Get_rank()
a = np.arange(100, dtype="f8")
if r == 0:
    c.Send(a, dest=1, tag=3)
elif r == 1:
    b = np.empty(200)
    c.Recv(b, source=0, tag=3)
c.Allreduce(np.ones(7), np.empty(7))
"""


FORTRAN_PROGRAM = """program f
  use mpi
  implicit none
  integer :: ierr, rank, i
  double precision :: x(100), y(100)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank
  do i = 1, 7
    call MPI_Allreduce(x, y, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do
  if (rank == 0) then
    call MPI_Send(x, 10, MPI_DOUBLE_PRECISION, 1, 5, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Recv(y, 10, MPI_DOUBLE_PRECISION, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program f
"""


def test_real_fortran_program(shim, tmp_path):
    """A program compiled with mpif90 (Open MPI's Fortran layer calls PMPI_ directly, so only the
    library's own Fortran entry points can see these calls)."""
    require_tools("mpif90")
    src = tmp_path / "f.f90"
    src.write_text(FORTRAN_PROGRAM)
    exe = tmp_path / "f"
    r = subprocess.run(["mpif90", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    out.mkdir()
    profiled_run(out, 2, [str(exe)])
    docs = raw(out)
    assert sorted(docs) == [0, 1]
    for rank, d in docs.items():
        ar = routine(d, "MPI_Allreduce")
        # 7 calls of 100 doubles: 800 bytes contributed and received per call
        assert (ar["calls"], ar["bytes_sent"], ar["bytes_recv"]) == (7, 5600, 5600)
        assert routine(d, "MPI_Barrier")["calls"] == 1
    assert (routine(docs[0], "MPI_Send")["calls"], routine(docs[0], "MPI_Send")["bytes_sent"]) == (1, 80)
    assert (routine(docs[1], "MPI_Recv")["calls"], routine(docs[1], "MPI_Recv")["bytes_recv"]) == (1, 80)


def test_mpi4py_program(shim, tmp_path):
    # mpi4py is a test dependency (pyproject [test]): missing, the import fails the test
    import sys

    prog = tmp_path / "prog.py"
    prog.write_text(MPI4PY_PROGRAM)
    out = tmp_path / "pmpi"
    profiled_run(out, 2, [sys.executable, str(prog)])
    got = raw(out)
    assert routine(got[0], "MPI_Init_thread")["calls"] == 1  # mpi4py initialises with MPI_Init_thread
    s, v = routine(got[0], "MPI_Send"), routine(got[1], "MPI_Recv")
    assert (s["calls"], s["bytes_sent"]) == (1, 800)
    assert (v["calls"], v["bytes_recv"]) == (1, 800)  # actual size, not the 1600-byte buffer
    for rank in (0, 1):
        a = routine(got[rank], "MPI_Allreduce")
        assert (a["calls"], a["bytes_sent"], a["bytes_recv"]) == (1, 56, 56)


# -- the reader on bad input ---------------------------------------------------------------------------
def minimal(rank: int, size: int, **changes) -> dict:
    d = {"format": "perfcast-pmpi", "version": 1, "rank": rank, "size": size, "host": "h", "pid": 1,
         "library": "x", "untracked_requests": 0,
         "time": {"init": 0.1, "region": 1.0, "mpi": 0.25, "app": 0.75},
         "routines": [{"name": "MPI_Send", "calls": 3, "bytes_sent": 24, "bytes_recv": 0, "time": 0.25,
                       "hist": [[8, 3]]}],
         "peers": [{"rank": (rank + 1) % size, "sent_msgs": 3, "sent_bytes": 24, "recv_msgs": 0,
                    "recv_bytes": 0}]}
    d.update(changes)
    return d


def write_run(dirpath: Path, docs: list[dict]):
    dirpath.mkdir(parents=True, exist_ok=True)
    for d in docs:
        (dirpath / f"pmpi.rank{d['rank']:05d}.json").write_text(json.dumps(d, indent=1))


def test_reader_hand_made_run(tmp_path):
    write_run(tmp_path / "run", [minimal(0, 2), minimal(1, 2, routines=[])])
    exp = read_one(tmp_path / "run")
    v = exp.data.astype({"callpath": str, "metric": str})
    key = lambda cp, m, r: float(v[(v.callpath == cp) & (v.metric == m) & (v["rank"] == r)]["value"].iloc[0])
    assert key("MPI->MPI_Send", "calls", 0) == 3 and key("MPI->MPI_Send", "calls", 1) == 0  # filled with 0
    assert key("MPI->MPI_Send", "bytes", 0) == 24
    assert key("APP", "time", 0) == 0.75 and key("MPI", "time", 0) == 0.25
    assert exp.meta["pmpi"]["sent"] == [[0, 1, 3, 24], [1, 0, 3, 24]]
    assert exp.meta["pmpi"]["histograms"] == {"MPI_Send": [[0, 8, 3]]}
    assert exp.meta["pmpi"]["cart"] == []      # written before the library recorded grids
    write_run(tmp_path / "grid", [minimal(0, 1, cart=[{"size": 1, "dims": [1, 1], "periods": [1, 0]}])])
    assert read_one(tmp_path / "grid").meta["pmpi"]["cart"] == [{"size": 1, "dims": [1, 1], "periods": [1, 0]}]


@pytest.mark.parametrize("mutate,where,message", [
    (lambda d: d["routines"][0].pop("calls"), "routines[0].calls", "missing field"),
    (lambda d: d["routines"][0].update(calls=-1), "routines[0].calls", "negative count"),
    (lambda d: d["routines"][0].update(time=float("nan")), "routines[0].time", "finite"),
    (lambda d: d["routines"][0].update(hist=[[6, 1]]), "routines[0].hist[0]", "power of 2"),
    (lambda d: d["peers"][0].update(rank=7), "peers[0].rank", "not below size"),
    (lambda d: d.update(version=99), "version", "unsupported version"),
    (lambda d: d.update(cart=[{"size": 1, "dims": [0], "periods": [0]}]), "cart[0]", "positive dims"),
    (lambda d: d.update(cart=[{"size": 1, "dims": [1, 1], "periods": [0]}]), "cart[0]", "of one length"),
    (lambda d: d.update(cart=[{"dims": [1], "periods": [0]}]), "cart[0].size", "missing field"),
    (lambda d: d["time"].pop("region"), "time.region", "missing field"),
])
def test_reader_rejects_bad_fields(tmp_path, mutate, where, message):
    doc = minimal(0, 1)
    mutate(doc)
    write_run(tmp_path / "run", [doc])
    with pytest.raises(PerfcastError) as e:
        read_one(tmp_path / "run", format="pmpi")
    assert e.value.where == where and message in e.value.message
    assert e.value.path.endswith("pmpi.rank00000.json")


def test_reader_truncated_and_missing_ranks(tmp_path):
    write_run(tmp_path / "t", [minimal(0, 1)])
    f = tmp_path / "t" / "pmpi.rank00000.json"
    text = f.read_text()
    f.write_text(text[: len(text) // 2])
    with pytest.raises(PerfcastError) as e:
        read_one(tmp_path / "t", format="pmpi")
    assert "not valid JSON" in e.value.message and e.value.path == str(f) and e.value.where.isdigit()

    write_run(tmp_path / "m", [minimal(0, 4), minimal(2, 4)])
    with pytest.raises(PerfcastError, match=r"2 of 4 rank\(s\) missing \(ranks 1, 3\)"):
        read_one(tmp_path / "m")
    write_run(tmp_path / "s", [minimal(0, 2), minimal(1, 3)])
    with pytest.raises(PerfcastError, match="differs"):
        read_one(tmp_path / "s")
    (tmp_path / "e").mkdir()
    with pytest.raises(PerfcastError, match="no pmpi.rank"):
        read_dir(tmp_path / "e")

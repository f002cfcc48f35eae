"""CloverLeaf's (github.com/UK-MAC/CloverLeaf_ref) halo exchange, counted by hand from its source.

clover_decompose splits an N x N mesh into chunk_x x chunk_y chunks (the first divisor c of p with
(p / c) / c <= 1 gives chunk_y = c, a 1-D split when that is p: 2x1 at p = 2, 2x2 at p = 4, 2x4 at
p = 8).  Every update_halo calls clover_exchange, which sends each neighbour one message of
nfields * depth * (cells along the face + 5) doubles (MPI_Isend, MPI_DOUBLE_PRECISION).  A run of
20 steps calls update_halo once at start-up (10 fields, depth 2: 20) and 6 times per step
(timestep 5 + 1, PdV 1 at depth 1; advection 4 + 6 + 6 at depth 2: 39), 800 field-depths in all.
So the bytes sent summed over ranks are 8 * 800 * sum over the ranks' faces of (face + 5), and a
run at p = 1 sends nothing (MPI_Isend absent from its profile).  MPI_Allreduce, MPI_Reduce and
MPI_Allgather add 320, 160 and 128 bytes per rank at every p (measured with perfcast's PMPI
library: tests/data/cloverleaf/PROVENANCE.md)."""

import math

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.experiment import CallTree, Experiment, Metric

NS = (256.0, 384.0, 512.0, 640.0)
FIELD_DEPTHS = 20 + 20 * 39


def decompose(p: int) -> tuple[int, int]:
    """clover.f90's clover_decompose for a square mesh: (chunk_x, chunk_y)."""
    cx, cy, found = p, 1, False
    for c in range(1, p + 1):
        if p % c == 0 and (p / c) / c <= 1.0:
            cx, cy, found = p // c, c, True
            break
    if not found or cy == p:
        cx, cy = p, 1
    return cx, cy


def isend_bytes(p: float, n: float) -> float:
    """Bytes MPI_Isend sent summed over the ranks of a 20-step run on an n x n mesh."""
    cx, cy = decompose(int(p))
    faces = 2 * (cx - 1) * cy * (n / cy + 5) + 2 * (cy - 1) * cx * (n / cx + 5)   # left/right, bottom/top
    return 8.0 * FIELD_DEPTHS * faces


COLLECTIVES = 320.0 + 160.0 + 128.0      # Allreduce, Reduce, Allgather bytes per rank


def _exp(ps=(1.0, 2.0, 4.0)) -> Experiment:
    rows = []
    for p in ps:
        for n in NS:
            for r in range(2):
                rows.append({"p": p, "n": n, "rep": r, "callpath": "MPI->MPI_Allreduce", "metric": "bytes_sent",
                             "value": COLLECTIVES * p})
                if p > 1:
                    rows.append({"p": p, "n": n, "rep": r, "callpath": "MPI->MPI_Isend", "metric": "bytes_sent",
                                 "value": isend_bytes(p, n)})
                rows.append({"p": p, "n": n, "rep": r, "callpath": "MPI", "metric": "bytes_sent",
                             "value": COLLECTIVES * p + (isend_bytes(p, n) if p > 1 else 0.0)})
    tree = CallTree([("MPI", None, "MPI"), ("MPI->MPI_Allreduce", "MPI", "MPI_Allreduce"),
                     ("MPI->MPI_Isend", "MPI", "MPI_Isend")])
    m = Metric("bytes_sent", "bytes", "bytes", "inclusive", aggregate="sum over ranks")
    return Experiment(["p", "n"], pd.DataFrame(rows), [m], tree, meta={"locations": "sparse"})


def _evaluated(formula: str, p: float, n: float) -> float:
    return float(eval(formula.replace("^", "**"), {"__builtins__": {}, "log2": math.log2}, {"p": p, "n": n}))


def test_hand_count_matches_the_grids():
    assert [decompose(p) for p in (1, 2, 4, 8)] == [(1, 1), (2, 1), (2, 2), (2, 4)]
    assert isend_bytes(2, 256) == 12800 * (256 + 5)            # one neighbour, faces of 256 cells
    assert isend_bytes(4, 256) == 25600 * 256 + 256000         # two neighbours each, faces of 128


def test_noise_free_halo_bytes_are_modelled_through_every_measured_point():
    # Before: 1.307e4 * log2(p) * n, through the zeros at p = 1 but up to 2% off the exact counts
    # at p = 2, 4 (SMAPE 0.52%, within the 1% a noisy series is allowed) and 25% low at p = 8.
    ms = perfcast.model(_exp())
    pts = [{"p": p, "n": n} for p in (1.0, 2.0, 4.0) for n in NS] + [{"p": 8.0, "n": 640.0}]
    got = {(r["at"]["p"], r["at"]["n"]): r for r in ms.predict(pts) if r["callpath"] == "MPI->MPI_Isend"}
    for (p, n), r in got.items():
        truth = isend_bytes(p, n) if p > 1 else 0.0
        assert r["value"] == pytest.approx(truth, rel=1e-9, abs=1e-6), (r["formula"], p, n)


def test_a_sum_with_a_child_that_does_not_run_at_p1_prints_the_function_it_evaluates():
    # The MPI node is its children's exact sum, MPI_Isend 0 at p = 1: its formula printed the
    # merged terms without MPI_Isend's (p >= 2), 1.607e6 at p = 1, n = 256 where its value is 608.
    ms = perfcast.model(_exp())
    pts = [{"p": 1.0, "n": 256.0}, {"p": 2.0, "n": 640.0}, {"p": 4.0, "n": 384.0}]
    rows = [r for r in ms.predict(pts) if r["callpath"] == "MPI"]
    assert len(rows) == 3
    for r in rows:
        p, n = r["at"]["p"], r["at"]["n"]
        truth = COLLECTIVES * p + (isend_bytes(p, n) if p > 1 else 0.0)
        assert r["value"] == pytest.approx(truth, rel=1e-9)
        assert _evaluated(r["formula"], p, n) == pytest.approx(truth, rel=1e-3), (r["formula"], p, n)



STORES = __import__("pathlib").Path(__file__).parent / "data" / "cloverleaf"


def _measured(store, callpath, metric, p, n):
    """Summed over ranks, mean over repetitions, read with pandas from the store's table."""
    df = pd.read_parquet(STORES / store / "values.parquet")
    sel = df[(df.callpath.astype(str) == callpath) & (df.metric.astype(str) == metric) & (df.p == p) & (df.n == n)]
    return float(sel.groupby("rep")["value"].sum().mean())


def test_the_measured_campaign_holds_the_hand_counts_and_predicts_them_at_p8():
    for p in (2.0, 4.0):
        for n in NS:
            assert _measured("cl.perfcast", "MPI->MPI_Isend", "bytes_sent", p, n) == isend_bytes(p, n)
    assert _measured("cgbig.perfcast", "MPI->MPI_Isend", "bytes_sent", 8.0, 320.0) == isend_bytes(8, 320)
    exp = perfcast.io.load([STORES / "cl.perfcast"])
    ms = perfcast.model(exp, metrics=["bytes_sent"])
    rows = {(r["callpath"], r["at"]["p"]): r for r in ms.predict([{"p": 1.0, "n": 256.0}, {"p": 8.0, "n": 320.0}])}
    # was 1.307e4 * log2(p) * n: 1.254e7 at p = 8, n = 320, -26%
    assert rows["MPI->MPI_Isend", 8.0]["value"] == pytest.approx(isend_bytes(8, 320), rel=1e-9)
    mpi1 = rows["MPI", 1.0]
    truth = _measured("cl.perfcast", "MPI", "bytes_sent", 1.0, 256.0)
    assert truth == COLLECTIVES
    assert mpi1["value"] == pytest.approx(truth, rel=1e-9)          # was 0 (0 taken below p = 2)
    assert _evaluated(mpi1["formula"], 1.0, 256.0) == pytest.approx(truth, rel=1e-3), mpi1["formula"]


def test_advise_credits_no_run_outside_a_routines_law(capsys):
    # CloverLeaf's MPI_Waitall time is fitted from p = 2 on (0 by rule at p = 1: (p >= 2) * ...).
    # advise said "p=1,n=640 again: pins down the coefficients of MPI->MPI_Waitall: +-20.3% ->
    # +-0.4%".  Truth: a refit with that repetition added (a copy of a measured run at p = 1, n = 640)
    # gives MPI_Waitall the same model, so no run at p = 1 can pin it down.
    from conftest import cli, cli_items

    store = STORES / "cl.perfcast"
    exp = perfcast.io.load([store])
    wait = ("MPI->MPI_Waitall", "pmpi_time")
    before = perfcast.model(exp, metrics=["pmpi_time"])[wait]
    assert before.zero_below and before.zero_below[:2] == ("p", 2.0)
    df = exp.to_pandas()
    extra = df[(df.p == 1.0) & (df.n == 640.0) & (df.rep == 0)].assign(rep=99)
    again = perfcast.experiment.Experiment.from_pandas(pd.concat([df, extra]), parameters=["p", "n"])
    after = perfcast.model(again, metrics=["pmpi_time"])[wait]
    assert after.formula() == before.formula()
    assert np.allclose(after.cov, before.cov, rtol=1e-9, atol=0)

    code, out, _ = cli(capsys, "advise", store, "--target", "p=8,n=640", "--metric", "pmpi_time", "--json")
    assert code == 0
    at_p1 = [c for c in cli_items(out, "advice") if c["at"]["p"] == 1.0]
    assert at_p1
    for c in at_p1:
        assert c["series"] != "MPI->MPI_Waitall", c["reason"]


def test_advise_says_a_caller_listed_beside_its_callees_counts_them_twice(capsys):
    # advise listed CloverLeaf's MPI node (pmpi_time, inclusive: the sum of its routines) at 96% of
    # the run beside MPI_Init 30%, MPI_Allreduce 10%, MPI_Barrier 1% and MPI_Waitall 57%, shares
    # adding to 198%, and said nothing.  The nesting is the store's own callpaths (read with pandas):
    # every routine is MPI->NAME.
    from conftest import cli, cli_json

    names = set(pd.read_parquet(STORES / "cl.perfcast" / "values.parquet")["callpath"].astype(str))
    code, out, _ = cli(capsys, "advise", STORES / "cl.perfcast", "--target", "p=8,n=640", "--metric", "pmpi_time",
                       "--json")
    assert code == 0
    doc = cli_json(out, "advice")
    listed = [k["callpath"] for k in doc["kernels"]]
    assert "MPI" in listed
    under = [cp for cp in listed if cp.startswith("MPI->")]
    assert under and all(cp in names for cp in under)
    assert sum(k["share"] for k in doc["kernels"]) > 1.0
    [note] = [n for n in doc["notes"] if n.startswith("MPI holds ")]
    assert all(cp in note for cp in under)

"""Communication models recover the parameters a synthetic PMPI profile was generated from."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from perfcast.apmt import fit_comm
from perfcast.apmt.comm import mpi_table
from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment, Metric

A, B = 2.5e-10, 4.0e-6            # Hockney: 4 GB/s, 4 us per message
CA, CB, CC = 3.0e-6, 1.0e-9, 2e-6  # Allreduce per call: a log2 p + b s + c
METRICS = [Metric("time", "s", "time", "inclusive"), Metric("calls", "#", "count", "inclusive"),
           Metric("bytes", "bytes", "bytes", "inclusive"), Metric("bytes_sent", "bytes", "bytes", "inclusive")]


def _profile(ps=(3, 4, 8, 16), ns=(1000, 2000, 4000), drop_rank=None, noise=0.0, seed=0):
    """1-D halo exchange: rank r sends one message of 8n bytes to each existing neighbour and
    receives one from it; every rank calls Allreduce 10 times with 8*n/100 bytes."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in ps:
        for n in ns:
            for r in range(p):
                if r == drop_rank and p == ps[-1]:
                    continue
                nb = (r > 0) + (r < p - 1)
                s = 8 * n
                isend_b, irecv_b = nb * s, nb * s
                t_p2p = A * (isend_b + irecv_b) + B * (2 * nb)
                # the p2p time lands in Waitall (Isend/Irecv return at once)
                put = lambda cp, t, c, b, bs: rows.extend(
                    {"p": p, "n": n, "rep": 0, "rank": r, "callpath": cp, "metric": m, "value": v}
                    for m, v in (("time", t), ("calls", c), ("bytes", b), ("bytes_sent", bs)))
                put("MPI->MPI_Isend", 0.0, nb, isend_b, isend_b)
                put("MPI->MPI_Irecv", 0.0, nb, irecv_b, 0)
                put("MPI->MPI_Waitall", t_p2p * (1 + noise * rng.standard_normal()), 1, 0, 0)
                size = 8 * n / 100
                per_call = CA * math.log2(p) + CB * size + CC
                # a collective's bytes are what the rank supplies (sent) plus what it gets
                put("MPI->MPI_Allreduce", 10 * per_call, 10, 10 * 2 * size, 10 * size)
                put("MPI->MPI_Init", 0.01, 1, 0, 0)
    rows += [{"p": r["p"], "n": r["n"], "rep": 0, "rank": r["rank"], "callpath": "MPI", "metric": "time",
              "value": 0.0} for r in rows[:1]]
    return Experiment(["p", "n"], pd.DataFrame(rows), METRICS)


def test_hockney_parameters_recovered_exactly():
    cm = fit_comm(_profile())
    assert cm.p2p.a == pytest.approx(A, rel=1e-6)
    assert cm.p2p.b == pytest.approx(B, rel=1e-6)
    assert cm.p2p.r2 == pytest.approx(1.0)
    assert cm.p2p.routines == ["MPI_Irecv", "MPI_Isend", "MPI_Waitall"]
    # s_tot of the critical rank (2 neighbours): 4 * 8n bytes, modelled in n and p
    assert cm.p2p.volume.predict({"p": 32, "n": 8000}) == pytest.approx(32 * 8000, rel=1e-3)
    # prediction = a * s_tot + b * n_msg of an interior rank at an unprofiled point
    assert cm.predict({"p": 32, "n": 8000})["point-to-point"] == pytest.approx(A * 32 * 8000 + B * 4, rel=1e-3)
    assert any("MPI_Init" in n for n in cm.notes)


def test_collective_log_p_and_size_recovered():
    cm = fit_comm(_profile())
    (ar,) = cm.collectives
    assert ar.routine == "MPI_Allreduce"
    assert (ar.a, ar.b, ar.c) == pytest.approx((CA, CB, CC), rel=1e-6)
    want = 10 * (CA * math.log2(64) + CB * 8 * 16000 / 100 + CC)
    assert ar.predict({"p": 64, "n": 16000}) == pytest.approx(want, rel=1e-3)
    # APMT's larger-problem rule: the message size scales with the size ratio
    want2 = 10 * (CA * math.log2(64) + CB * 3 * 8 * 16000 / 100 + CC)
    assert ar.predict({"p": 64, "n": 16000}, size_ratio=3) == pytest.approx(want2, rel=1e-3)


def test_noisy_profile_stays_close():
    cm = fit_comm(_profile(noise=0.05, seed=3))
    assert cm.p2p.a == pytest.approx(A, rel=0.05)
    assert cm.p2p.b == pytest.approx(B, rel=0.15)


def test_apmt_form_has_a_constant():
    cm = fit_comm(_profile(ns=(1000,)), form="apmt")
    assert cm.p2p.form == "apmt" and cm.p2p.a > 0


def test_constant_message_size_is_dropped_with_a_note():
    cm = fit_comm(_profile(ns=(1000,)))
    (ar,) = cm.collectives
    assert ar.dropped == ["size"] and ar.b == 0.0
    assert ar.a == pytest.approx(CA, rel=1e-6)
    assert any("does not vary" in n for n in cm.notes)


def test_mismatched_ranks_and_missing_profile():
    with pytest.raises(PerfcastError, match="mismatched ranks.*p=16.*15 rank"):
        fit_comm(_profile(drop_rank=3))
    e = Experiment(["p"], pd.DataFrame({"p": [1, 2, 4], "callpath": "main", "metric": "time", "value": 1.0}),
                   [Metric("time", "s", "time", "exclusive")])
    with pytest.raises(PerfcastError, match="no MPI profile"):
        mpi_table(e)


def test_single_rank_without_messages_predicts_zero_point_to_point():
    """At p=1 the halo exchange has no partner: the PMPI profile holds no p2p routine at all for that
    run (only the Allreduce).  The p2p time predicted at p=1 must be zero, not an extrapolated fit,
    and the volume model sees the rank's zero bytes."""
    full = _profile(ps=(1, 2, 4, 8))
    d = full.data
    no_p2p = (d["p"] == 1) & d["callpath"].isin(["MPI->MPI_Isend", "MPI->MPI_Irecv", "MPI->MPI_Waitall"])
    exp = Experiment(["p", "n"], d[~no_p2p].reset_index(drop=True), METRICS)
    cm = fit_comm(exp)
    assert cm.p2p.zero_at == (1.0,)
    for n in (1000, 4000, 9000):
        assert cm.predict({"p": 1, "n": n})["point-to-point"] == 0.0
    # the other process counts keep the generating Hockney parameters
    assert (cm.p2p.a, cm.p2p.b) == pytest.approx((A, B), rel=1e-6)
    # the critical rank's neighbours step 0, 1, 2, 2 over p = 1, 2, 4, 8: no PMNF function is exact,
    # the fit stays within 25% at the profiled counts
    for p in (2, 4, 8):
        nb = 1 if p == 2 else 2
        want = A * 2 * nb * 8 * 2000 + B * 2 * nb
        assert cm.predict({"p": p, "n": 2000})["point-to-point"] == pytest.approx(want, rel=0.25)
    # the collective is still there at p=1 (log2 1 = 0: size and constant terms only)
    assert cm.predict({"p": 1, "n": 1000})["MPI_Allreduce"] == pytest.approx(10 * (CB * 80 + CC), rel=1e-3)
    assert any("no message at p=1" in n for n in cm.notes)


def test_time_fits_limited_to_undersubscribed_runs():
    """Runs at p=16 on a machine with 8 cores: their MPI times are inflated 10x by descheduling.
    Limiting the time fits to p <= 8 recovers the generating parameters; the counts still use p=16."""
    exp = _profile()
    d = exp.data.copy()
    d.loc[(d["p"] == 16) & (d["metric"] == "time"), "value"] *= 10
    bad = fit_comm(Experiment(["p", "n"], d, METRICS))
    assert bad.p2p.a > 2 * A
    cm = fit_comm(Experiment(["p", "n"], d, METRICS), time_procs_max=8)
    assert (cm.p2p.a, cm.p2p.b) == pytest.approx((A, B), rel=1e-6)
    (ar,) = cm.collectives
    assert (ar.a, ar.b, ar.c) == pytest.approx((CA, CB, CC), rel=1e-6)
    assert cm.p2p.volume.predict({"p": 16, "n": 4000}) == pytest.approx(32 * 4000, rel=1e-3)
    assert any("p <= 8 only" in n for n in cm.notes)
    with pytest.raises(PerfcastError, match="no profiled run has p <= 2"):
        fit_comm(exp, time_procs_max=2)


def test_one_bytes_per_message_ratio_cannot_separate_latency_from_bandwidth():
    # n fixed: every message has 8000 bytes, so t = A s + B m = (8000 A + B) m -- any split of it fits;
    # NNLS returned one (the jacobi campaign fitted within its 2 cores: "latency 0.00 us/message,
    # bandwidth 23 MB/s") and nothing said it was arbitrary
    cm = fit_comm(_profile(ns=(1000,)))
    assert cm.p2p.separable is False and cm.p2p.to_dict()["separable"] is False
    assert any("cannot be told apart" in n for n in cm.notes)
    # any split reproduces the profiled times: an interior rank of p=8 moves 4 messages of 8000 bytes
    assert cm.p2p.a * 32000 + cm.p2p.b * 4 == pytest.approx(A * 32000 + B * 4, rel=1e-6)
    full = fit_comm(_profile())
    assert full.p2p.separable is True and not any("cannot be told apart" in n for n in full.notes)


def test_volume_law_is_not_pinned_to_the_zero_at_p1():
    # p=1 moves no message (predicted exactly 0 there anyway); its zero in the volume fit bent the law
    # through 0 at p=1: the critical rank's 4 x 8n bytes from p=4 on came out 24% low at p=32
    full = _profile(ps=(1, 2, 4, 8, 16))
    d = full.data
    no_p2p = (d["p"] == 1) & d["callpath"].isin(["MPI->MPI_Isend", "MPI->MPI_Irecv", "MPI->MPI_Waitall"])
    from perfcast.apmt.model import fit_options

    cm = fit_comm(Experiment(["p", "n"], d[~no_p2p].reset_index(drop=True), METRICS), options=fit_options("pmnf"))
    for p in (32, 64):
        assert cm.p2p.volume.predict({"p": p, "n": 2000}) == pytest.approx(4 * 8 * 2000, rel=0.05)
    assert cm.predict({"p": 1, "n": 2000})["point-to-point"] == 0.0


def test_cg_campaign_halo_volume_follows_the_slab_decomposition():
    # examples/cg: slabs of a 32^3 grid, an interior rank sends and receives one 32 x 32 plane of doubles
    # to each of its 2 neighbours per halo exchange, 51 exchanges (50 iterations + the start): the same
    # 51 x 4 x 8 x 32^2 bytes at every p from 3 to 32 (the code's own layout, not the profile)
    from pathlib import Path

    from perfcast.apmt.model import fit_options
    from perfcast.io import load

    store = Path(__file__).resolve().parents[1] / "bench" / "data" / "cg-p" / "cg-p.perfcast"
    cm = fit_comm(load([store]), time_procs_max=2, options=fit_options("pmnf"))
    want = 51 * 4 * 8 * 32 ** 2
    # the profile agrees with the layout (pandas: the slowest rank's bytes at p = 4..16)
    v = pd.read_parquet(store / "values.parquet")
    b = v[v.callpath.isin(["MPI->MPI_Isend", "MPI->MPI_Irecv"]) & (v.metric == "bytes")]
    assert set(b[b.p >= 4].groupby(["p", "rep", "rank"]).value.sum().groupby(["p", "rep"]).max()) == {want}
    for p in (4, 16, 32):
        assert cm.p2p.volume.predict({"p": p}) == pytest.approx(want, rel=0.05)


def test_no_round_off_sign_on_a_zero_r2():
    # examples/cg fitted within 2 cores: one (bytes, messages) pair, the fit is the mean: R^2 -1e-16
    # printed as "R^2 -0.00" and "explains only -0% of the variance"
    from pathlib import Path

    from perfcast.apmt.model import fit_options
    from perfcast.io import load

    store = Path(__file__).resolve().parents[1] / "bench" / "data" / "cg-p" / "cg-p.perfcast"
    cm = fit_comm(load([store]), time_procs_max=2, options=fit_options("pmnf"))
    assert cm.p2p.r2 == 0.0 and str(cm.p2p.r2) == "0.0"
    assert any("explains only 0% of the variance" in n for n in cm.notes)


def _jacobi_busiest(dims, n, iters):
    """Bytes (sent + received) and messages of jacobi.c's busiest rank in isend mode, counted rank by
    rank from its decomposition: dimension a of the n x n grid split over dims[a] ranks, the first
    n % dims[a] coordinates one point more; a face towards each existing neighbour along a holds
    the rank's points along the other dimension, 8 bytes each, sent and received once per iteration."""
    best = (0, 0)
    for c in itertools.product(*(range(d) for d in dims)):
        ln = [n // d + (c[a] < n % d) for a, d in enumerate(dims)]
        nbrs = [(c[a] > 0) + (c[a] < dims[a] - 1) for a in range(2)]
        doubles = sum(nbrs[a] * ln[1 - a] for a in range(2))
        best = max(best, (2 * 8 * doubles * iters, 2 * sum(nbrs) * iters))
    return best


def test_jacobi_halo_on_its_process_grid_at_unmeasured_counts(tmp_path, examples_built):
    """The bundled jacobi (n = 256, 50 sweeps: bench/data/jacobi-p's command) profiled with PMPI at
    p = 1, 2, 4, 8, 16: the runs record their MPI_Cart_create grids, and the busiest rank's halo at
    p = 12, 36, 48, 64 (4x3, 6x6, 8x6, 8x8: Open MPI's MPI_Dims_create, as jacobi prints them) is
    predicted from those grids.  Messages exactly (the smooth law 100 * log2(p) passes through the
    measured counts and was 600 at p = 64, +50%); bytes exactly where 256 divides by the dims (p = 64;
    the smooth law stored for this campaign was +75% there), within 1% where jacobi.c gives the first
    256 mod d coordinates one point more (the grid's covariate assumes equal blocks)."""
    from perfcast import store
    from perfcast.apmt import fit_apmt
    from perfcast.collect.campaign import CampaignSpec, run_campaign

    spec = CampaignSpec(parameters={"p": [1, 2, 4, 8, 16]},
                        command=["mpirun", "--oversubscribe", "-np", "{p}", str(examples_built / "jacobi" / "jacobi"),
                                 "-n", "256", "-i", "50", "-q"],
                        reps_min=1, reps_max=1, collect=[("mpi", True)])
    run_campaign(spec, tmp_path / "j.perfcast")
    exp = store.read(tmp_path / "j.perfcast")
    p2p = fit_comm(exp, time_procs_max=2).p2p
    for p, dims in ((64, (8, 8)), (12, (4, 3)), (36, (6, 6)), (48, (8, 6))):
        nbytes, msgs = _jacobi_busiest(dims, 256, 50)
        assert p2p.messages.predict({"p": p}) == pytest.approx(msgs, rel=1e-9)
        assert p2p.volume.predict({"p": p}) == pytest.approx(nbytes, rel=1e-9 if p == 64 else 1e-2)
    assert _jacobi_busiest((8, 8), 256, 50) == (102400, 400)
    # the breakdown says that its point-to-point counts come from the grid, and which
    pr = fit_apmt(exp, comm_time_procs_max=2).predict({"p": 64})
    said = [n for n in pr.notes if "on the process grid" in n]
    assert len(said) == 2 and all("8x8" in n and "MPI_Dims_create(p, 2)" in n for n in said)


def test_a_profile_without_a_recorded_grid_says_its_laws_are_smooth():
    """bench/data/jacobi-p was collected before the PMPI library recorded MPI_Cart_create: it still
    reads, its halo is modelled by smooth laws in p, and the model says why."""
    from pathlib import Path

    from perfcast import io
    from perfcast.fit.grid import GridModel

    exp = io.load([Path(__file__).parent.parent / "bench" / "data" / "jacobi-p" / "jacobi-p.perfcast"])
    cm = fit_comm(exp, time_procs_max=2)
    assert not isinstance(cm.p2p.volume, GridModel) and not isinstance(cm.p2p.messages, GridModel)
    assert any("smooth laws in p" in n and "no run recorded an MPI_Cart_create" in n for n in cm.notes)


def test_comd_messages_are_sends_plus_receives_of_the_busiest_rank_and_say_so():
    """CoMD (tests/data/comd/md.perfcast): haloExchange.c makes two MPI_Sendrecv per dimension per
    exchange, one exchange per step plus one at start-up: 6 x (20 + 1) = 126 calls per rank, which
    `perfcast model` shows as MPI_Sendrecv calls 126 * p summed over ranks.  APMT's insight said
    "messages per rank ~ 252" with nothing saying that it counts a Sendrecv as a send and a receive:
    two numbers for one quantity.  Its value is 2 x 126 and the model says what it counts."""
    from pathlib import Path

    import pandas as pd

    from perfcast import io
    from perfcast.apmt.model import fit_apmt

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    calls = v[(v["callpath"] == "MPI->MPI_Sendrecv") & (v["metric"] == "calls")]
    per_rank = calls.groupby(["p", "n", "rep", "rank"])["value"].sum()
    assert (per_rank == 6 * (20 + 1)).all()                     # the hand count
    exp = io.load([str(store)])
    p2p = fit_comm(exp).p2p
    for at in ({"p": 1, "n": 12}, {"p": 2, "n": 36}, {"p": 8, "n": 20}):
        assert float(p2p.messages.predict(at)) == pytest.approx(2 * 126, rel=1e-9)
    # the busiest rank's bytes sent + received at a measured point
    b = v[(v["callpath"] == "MPI->MPI_Sendrecv") & (v["metric"] == "bytes") & (v["p"] == 2) & (v["n"] == 28)]
    busiest = b.groupby(["rep", "rank"])["value"].sum().groupby("rep").max().mean()
    assert float(p2p.volume.predict({"p": 2, "n": 28})) == pytest.approx(busiest, rel=0.1)
    d = p2p.to_dict()
    assert d["ranks"] == "max" and "Sendrecv is two" in d["counted"]
    assert any("messages per rank" in s and p2p.counted() in s for s in fit_apmt(exp).insights())

"""Message counts on Cartesian process grids (perfcast.fit.grid): MPI_Dims_create emulated and checked
against the installed MPI library, counts modelled in grid covariates and checked against a brute-force
count of neighbours over every rank's coordinates, and the PMPI library's record of MPI_Cart_create
feeding the model of a real campaign of the bundled Jacobi solver."""

import itertools
import json
import math
import subprocess

import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.fit import FitOptions, fit_series
from perfcast.fit.grid import (Grid, GridModel, dims_create, experiment_grid, fit_grid, first_difference,
                               grid_of_records)
from perfcast.fit.segmented import model_from_dict
from perfcast.fit.sums import SumModel
from conftest import require_tools

DIMS_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  for (int d = 2; d <= 3; d++) for (int p = 1; p <= 2000; p++) {
    int dims[3] = {0, 0, 0};
    MPI_Dims_create(p, d, dims);
    printf("%d %d", d, p); for (int i = 0; i < d; i++) printf(" %d", dims[i]); printf("\n");
  }
  MPI_Finalize(); return 0;
}
"""


def neighbour_messages(dims) -> int:
    """Messages of one halo exchange summed over ranks, counted rank by rank: one per existing
    neighbour along each axis of a non-periodic grid (jacobi.c's isend mode)."""
    total = 0
    for coords in itertools.product(*(range(d) for d in dims)):
        total += sum((c > 0) + (c < d - 1) for c, d in zip(coords, dims))
    return total


def test_greedy_rule_is_the_installed_mpi_library_s(tmp_path):
    require_tools("mpicc", "mpirun")
    lib = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    (tmp_path / "d.c").write_text(DIMS_SOURCE)
    subprocess.run(["mpicc", "-o", str(tmp_path / "d"), str(tmp_path / "d.c")], check=True)
    out = subprocess.run([str(tmp_path / "d")], capture_output=True, text=True, check=True).stdout
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    assert len(rows) == 4000
    if "Open MPI" in lib:
        wrong = [(d, p, tuple(dims)) for d, p, *dims in rows if dims_create(p, d, "greedy") != tuple(dims)]
        assert wrong == []
        # the balanced rule is another: it differs at some of these (72 = 9 x 8, not 12 x 6)
        assert sum(dims_create(p, d, "balanced") != tuple(dims) for d, p, *dims in rows) > 0
    # whatever the library: from its grids perfcast takes a rule that gives every one, or says none does
    for nd in (2, 3):
        recs = [(p, tuple(dims)) for d, p, *dims in rows if d == nd]
        grid, why = grid_of_records("p", recs)
        assert (grid is not None and all(grid.dims(p) == dims for p, dims in recs)) or "no known" in why


def test_balanced_rule_by_hand():
    assert dims_create(72, 2, "balanced") == (9, 8)
    assert dims_create(72, 2, "greedy") == (12, 6)
    assert dims_create(12, 3, "balanced") == (3, 2, 2)
    assert dims_create(1024, 3, "balanced") == (16, 8, 8)
    assert dims_create(7, 2, "balanced") == (7, 1)
    assert dims_create(20, 4, "balanced") == (5, 2, 2, 1)     # spread 4 either way, fewer squares
    with pytest.raises(PerfcastError, match="whole number"):
        dims_create(2.5, 2)
    with pytest.raises(PerfcastError, match="unknown process-grid rule"):
        dims_create(4, 2, "square")


def _jacobi_counts(ps, ns, iters=100):
    """Isend calls and bytes of jacobi -w n -i iters (2-D), summed over ranks, from the brute-force count."""
    X = np.array([(p, n) for p in ps for n in ns], dtype=float)
    msgs = np.array([neighbour_messages(dims_create(int(p), 2)) for p, _ in X]) * iters
    return X, msgs.astype(float), msgs * 8.0 * X[:, 1]


def test_counts_of_a_2d_grid_are_exact_at_unmeasured_grids():
    X, calls, nbytes = _jacobi_counts([1, 2, 3, 4, 6, 8, 9], [64, 128, 192, 256])
    grid = Grid("p", 2)
    zero, ones = np.zeros(len(X)), np.full(len(X), 3.0)
    opts = FitOptions().for_kind("count", True)
    plain = fit_series(X, calls, ("p", "n"), opts)
    m = fit_grid(X, calls, ones, zero, ("p", "n"), grid, opts, plain)
    b = fit_grid(X, nbytes, ones, zero, ("p", "n"), grid, FitOptions().for_kind("bytes", True))
    assert isinstance(m, GridModel) and m.covariate == "nbrs(p)" and m.formula() == "100 * nbrs(p)"
    assert b.formula() == "800 * nbrs(p) * n"
    for p in (16, 12, 72, 1000):
        truth = neighbour_messages(dims_create(p, 2)) * 100
        assert m.predict({"p": p, "n": 256}) == pytest.approx(truth, rel=1e-9)
        assert b.predict({"p": p, "n": 512}) == pytest.approx(truth * 8 * 512, rel=1e-9)
        lo, hi = m.interval({"p": p, "n": 256})
        assert lo == pytest.approx(truth, rel=1e-6) and hi == pytest.approx(truth, rel=1e-6)
    # the plain PMNF model was off at the square target: that is why the grid's model was kept
    assert abs(plain.predict({"p": 16, "n": 256}) / (48 * 100) - 1) > 0.03
    assert m.doublings({"p": 36, "n": 256}) == pytest.approx(2.0)
    assert m.lead_order()["p"] == (1, 0)
    # JSON round trip through the one model reader
    again = model_from_dict(json.loads(json.dumps(m.to_dict())))
    assert isinstance(again, GridModel)
    assert again.predict({"p": 72, "n": 1}) == pytest.approx(m.predict({"p": 72, "n": 1}), rel=1e-12)


def test_per_rank_max_neighbours_of_a_3d_grid():
    ps = [1, 2, 3, 4, 5, 6, 8, 12]
    X = np.array(ps, dtype=float)[:, None]
    dims = [dims_create(p, 3) for p in ps]
    most = np.array([max(sum((c > 0) + (c < d - 1) for c, d in zip(coords, ds))
                         for coords in itertools.product(*(range(d) for d in ds))) for ds in dims], dtype=float)
    m = fit_grid(X, most * 7, np.ones(len(ps)), np.zeros(len(ps)), ("p",), Grid("p", 3))
    assert m is not None and m.covariate == "maxnbrs(p)"
    for p in (27, 64, 96):
        ds = dims_create(p, 3)
        truth = max(sum((c > 0) + (c < d - 1) for c, d in zip(coords, ds))
                    for coords in itertools.product(*(range(d) for d in ds))) * 7
        assert m.predict(p) == pytest.approx(truth, rel=1e-9)


def test_strong_scaling_halo_bytes_of_the_busiest_rank():
    # a 240 x 240 grid split over p ranks (240 divides by every dim here): the busiest rank sends
    # one face per neighbour, 8 bytes per point; counted rank by rank
    ps = [1, 2, 3, 4, 5, 6, 8, 10]

    def busiest(p):
        dims = dims_create(p, 2)
        local = [240 // d for d in dims]
        return max(sum(((c[a] > 0) + (c[a] < dims[a] - 1)) * 8 * local[1 - a] for a in range(2))
                   for c in itertools.product(*(range(d) for d in dims)))

    x = np.array(ps, dtype=float)[:, None]
    m = fit_grid(x, np.array([busiest(p) for p in ps], dtype=float), np.ones(8), np.zeros(8), ("p",), Grid("p", 2))
    assert m is not None and m.covariate == "maxface(p)"
    for p in (12, 15, 16, 24):
        assert m.predict(p) == pytest.approx(busiest(p), rel=1e-9)


def test_what_the_grid_leaves_alone():
    X, calls, _ = _jacobi_counts([1, 2, 3, 4, 6, 8, 9], [64])
    x = X[:, :1]
    grid = Grid("p", 2)
    n = len(x)
    # noisy series (a repetition spread), a series a power law passes through, too few process counts
    assert fit_grid(x, calls, np.full(n, 3.0), np.full(n, 1.0), ("p",), grid) is None
    assert fit_grid(x, 21.0 * x[:, 0], np.ones(n), np.zeros(n), ("p",), grid) is None
    assert fit_grid(x[:3], calls[:3], np.ones(3), np.zeros(3), ("p",), grid) is None
    # a series the grid's covariates do not pass through either stays plain
    rng = np.random.default_rng(3)
    assert fit_grid(x, np.round(calls * rng.uniform(0.8, 1.2, n)), np.ones(n), np.zeros(n), ("p",), grid) is None


def test_records_decide_the_rule():
    g, why = grid_of_records("p", [(p, dims_create(p, 2, "balanced")) for p in (4, 8, 72)])
    assert why == "" and g.rule == "balanced" and g.ambiguous == ()
    g, _ = grid_of_records("p", [(p, dims_create(p, 2)) for p in (2, 4, 6, 9)])
    assert g.rule == "greedy" and g.ambiguous == ("balanced",)
    assert first_difference(g, 9) == (72, {"balanced": (9, 8)})
    # a model on such a grid: exact where the rules agree, its interval spans both where they do not
    ps = [1, 2, 3, 4, 6, 8, 9]
    x = np.array(ps, dtype=float)[:, None]
    calls = np.array([neighbour_messages(dims_create(p, 2)) for p in ps], dtype=float)
    m = fit_grid(x, calls, np.ones(7), np.zeros(7), ("p",), g)
    assert m.interval(16) == pytest.approx((48, 48), rel=1e-9)
    greedy, balanced = (neighbour_messages(dims_create(72, 2, r)) for r in ("greedy", "balanced"))
    assert (greedy, balanced) == (2 * (11 * 6 + 5 * 12), 2 * (8 * 8 + 7 * 9))
    assert m.predict(72) == pytest.approx(greedy, rel=1e-9)
    assert m.interval(72) == pytest.approx((min(greedy, balanced), max(greedy, balanced)), rel=1e-9)
    assert grid_of_records("p", [(6, (6, 1))])[1] == "the grid 6x1 recorded at p=6 follows no known MPI_Dims_create rule"
    assert "2 and 3 dimensions" in grid_of_records("p", [(4, (2, 2)), (8, (2, 2, 2))])[1]
    assert "not all processes" in grid_of_records("p", [(4, (2, 1))])[1]
    assert grid_of_records("p", [])[0] is None


def test_campaign_of_the_bundled_jacobi_models_its_halo_messages(tmp_path, examples_built):
    """A real campaign (time + PMPI) at p = 1..6: the PMPI library records the grids; the halo
    messages at p = 8, 9 and 12 (never run) come out as jacobi.c's rule counts them."""
    from perfcast import model, store
    from perfcast.collect.campaign import CampaignSpec, run_campaign

    jacobi = examples_built / "jacobi" / "jacobi"
    spec = CampaignSpec(parameters={"p": [1, 2, 3, 4, 5, 6], "n": [8, 12, 16]},
                        command=["mpirun", "-np", "{p}", str(jacobi), "-w", "{n}", "-i", "3", "-q"],
                        reps_min=1, reps_max=1, collect=[("time", True), ("mpi", True)])
    run_campaign(spec, tmp_path / "j.perfcast")
    exp = store.read(tmp_path / "j.perfcast")
    grid, why = experiment_grid(exp)
    assert why == "" and grid.parameter == "p" and grid.ndims == 2
    assert dict(grid.recorded) == {float(p): dims_create(p, 2) for p in range(1, 7)}
    ms = model(exp, metrics=["calls", "bytes_sent"])
    calls = ms["MPI->MPI_Isend", "calls"]
    sent = ms["MPI->MPI_Isend", "bytes_sent"]
    assert isinstance(calls, GridModel) and isinstance(sent, GridModel)
    for p in (8, 9, 12):
        msgs = neighbour_messages(dims_create(p, 2)) * 3
        assert calls.predict({"p": p, "n": 16}) == pytest.approx(msgs, rel=1e-9)
        assert sent.predict({"p": p, "n": 20}) == pytest.approx(msgs * 8 * 20, rel=1e-9)
    [row] = [r for r in ms.predict({"p": 12, "n": 16}) if r["callpath"] == "MPI->MPI_Isend" and r["metric"] == "calls"]
    assert row["value"] == pytest.approx(neighbour_messages((4, 3)) * 3, rel=1e-9)
    assert row["formula"] == "3 * nbrs(p)"
    assert not isinstance(model(exp, metrics=["calls"], grid=False)["MPI->MPI_Isend", "calls"], GridModel)

    # the MPI node is the sum of its routines at every point (bytes sent, jacobi.c's list: the halo's
    # faces, one double per Allreduce (iters + 1 per rank at -k 1), 4 doubles per rank's MPI_Reduce):
    # the sum of their models
    def sent(p, n, iters=3):
        return 8 * n * neighbour_messages(dims_create(p, 2)) * iters + 8 * (iters + 1) * p + 32 * p

    d = exp.data
    for p, n in ((1, 8), (4, 12), (6, 16)):     # the rule above is the measured one
        rows = d[(d.callpath == "MPI") & (d.metric == "bytes_sent") & (d.p == p) & (d.n == n)]
        assert rows["value"].sum() == sent(p, n)
    root = ms["MPI", "bytes_sent"]
    assert isinstance(root, SumModel) and "nbrs(p) * n" in root.formula()
    for p in (8, 9, 12):
        assert root.predict({"p": p, "n": 20}) == pytest.approx(sent(p, 20), rel=1e-9)
    assert model_from_dict(json.loads(json.dumps(root.to_dict()))).predict({"p": 12, "n": 20}) == \
        pytest.approx(sent(12, 20), rel=1e-9)
    # calls (jacobi.c's list): Init, Barrier, Reduce once, Allreduce iters + 1 times per rank; per
    # iteration a Waitall on every rank with a neighbour (none at p = 1: counted from p = 2 on) and an
    # Isend and an Irecv per neighbour
    def calls(p, iters=3):
        return 3 * p + (iters + 1) * p + iters * p * (p > 1) + 2 * iters * neighbour_messages(dims_create(p, 2))

    for p, n in ((1, 8), (2, 12), (5, 16)):
        rows = d[(d.callpath == "MPI") & (d.metric == "calls") & (d.p == p) & (d.n == n)]
        assert rows["value"].sum() == calls(p)
    total = ms["MPI", "calls"]
    # MPI_Waitall (3 p from p = 2 on) under its condition: "10 * p + ..." gave 10 at p = 1, where 7 were made
    assert isinstance(total, SumModel) and total.formula() == "7 * p + 6 * nbrs(p) + (p >= 2) * (3 * p)"
    for p in (1, 8, 9, 12):
        assert total.predict({"p": p, "n": 16}) == pytest.approx(calls(p), rel=1e-9)
    # no grid of 12.5 processes: one line, naming the point
    with pytest.raises(PerfcastError, match=r"undefined at p=12.5,n=16 \(a process grid has a whole number"):
        ms.predict({"p": 12.5, "n": 16})
    # a callpath filter shows the same model (its children are fitted beside it, not shown)
    alone = model(exp, metrics=["bytes_sent"], callpaths=["MPI"])
    assert [sm.callpath for sm in alone.series] == ["MPI"]
    assert alone["MPI", "bytes_sent"].formula() == root.formula()

    # APMT's point-to-point volume and messages of the busiest rank (max over ranks: its neighbours)
    from perfcast.apmt.comm import fit_comm

    p2p = fit_comm(exp, time_procs_max=2).p2p
    for p in (8, 9, 12):
        dims = dims_create(p, 2)
        most = max(sum((c > 0) + (c < d - 1) for c, d in zip(coords, dims))
                   for coords in itertools.product(*(range(d) for d in dims)))
        assert p2p.volume.predict({"p": p, "n": 20}) == pytest.approx(most * 3 * 2 * 8 * 20, rel=1e-9)
        assert p2p.messages.predict({"p": p, "n": 20}) == pytest.approx(most * 3 * 2, rel=1e-9)


def test_sum_model_merges_like_terms():
    from perfcast.fit.model import Model, Term

    grid = Grid("p", 2)
    a = Model(("p",), 2.0, (Term(3.0, (("p", 1, 0),)),))
    b = Model(("p",), 0.0, (Term(4.0, (("p", 1, 0),)),))
    c = GridModel(("p",), grid, "nbrs(p)", Model(("nbrs(p)",), 0.0, (Term(5.0, (("nbrs(p)", 1, 0),)),)), (9.0,))
    s = SumModel(("p",), (a, b, c), ("A", "B", "C"))
    assert s.formula() == "2 + 7 * p + 5 * nbrs(p)"
    assert s.predict(16) == pytest.approx(2 + 7 * 16 + 5 * 48)
    assert s.lead_order()["p"] == (1, 0)


def _busiest_neighbours(dims) -> int:
    """Neighbours of the rank with the most on a non-periodic grid, counted rank by rank."""
    return max(sum((c > 0) + (c < d - 1) for c, d in zip(coords, dims))
               for coords in itertools.product(*(range(d) for d in dims)))


def test_grid_model_kept_where_a_power_law_passes_through_the_powers_of_two():
    """The busiest rank's halo messages on a 2-D grid at p = 1, 2, 4, 8, 16 (2x1, 2x2, 4x2, 4x4:
    1, 2, 3, 4 neighbours) are exactly 100 * log2(p) there; at p = 64 (8x8) the rank has 4, not 6.
    Both models pass through every measured point: the recorded grid decides, and the interval spans
    the plain law's value."""
    dims = {1: (1, 1), 2: (2, 1), 4: (2, 2), 8: (4, 2), 16: (4, 4)}    # Open MPI's, as jacobi prints them
    ps = sorted(dims)
    y = np.array([100.0 * _busiest_neighbours(dims[p]) for p in ps])
    assert list(y) == [100 * math.log2(p) for p in ps]        # the coincidence
    x = np.array(ps, dtype=float)[:, None]
    m = fit_grid(x, y, np.ones(5), np.zeros(5), ("p",), Grid("p", 2))
    assert isinstance(m, GridModel) and m.covariate == "maxnbrs(p)" and m.rival
    for p, d in ((64, (8, 8)), (12, (4, 3)), (36, (6, 6)), (48, (8, 6)), (1024, (32, 32))):
        assert m.predict(p) == pytest.approx(100 * _busiest_neighbours(d), rel=1e-9)
    assert m.interval(64) == pytest.approx((400, 600), rel=1e-9)
    assert any("passes through every measured point too" in n for n in m.notes)
    again = model_from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.rival and again.interval(64) == pytest.approx((400, 600), rel=1e-9)
    # a grid whose covariate is the plain law itself (1-D: cut planes p - 1) keeps the plain model
    x1 = np.arange(1, 9, dtype=float)[:, None]
    assert fit_grid(x1, 7 * (x1[:, 0] - 1), np.ones(8), np.zeros(8), ("p",), Grid("p", 1)) is None


def test_mpi_standard_dims_create_examples():
    """The MPI standard's examples of MPI_Dims_create without a fixed dimension (MPI 4.0 §8.5.2):
    6 over 2 dims is 3 x 2, 7 over 2 is 7 x 1 -- under either rule; and its non-increasing order
    in 3 dims (6 is 3 x 2 x 1)."""
    for rule in ("greedy", "balanced"):
        assert dims_create(6, 2, rule) == (3, 2)
        assert dims_create(7, 2, rule) == (7, 1)
        assert dims_create(6, 3, rule) == (3, 2, 1)

"""Kernel identification on hand-made profiles whose shares and trends are known by construction."""

import math

import numpy as np
import pandas as pd
import pytest

from perfcast.analysis.kernels import REST, identify_kernels, kernel_experiment
from perfcast.errors import PerfcastError
from perfcast.experiment import Experiment, Metric

PS = (1, 2, 4, 8)


def _exp(funcs, ps=PS, extra_rows=()):
    """funcs: name -> cost per rank as a function of p; every rank has the same cost."""
    rows = []
    for p in ps:
        for r in range(p):
            for name, f in funcs.items():
                v = f(p)
                if v is not None:
                    rows.append({"p": p, "rep": 0, "callpath": f"main->{name}", "metric": "cycles", "value": v,
                                 "rank": r})
            rows.append({"p": p, "rep": 0, "callpath": "main", "metric": "cycles", "value": 0.0, "rank": r})
    rows.extend(extra_rows)
    return Experiment(["p"], pd.DataFrame(rows), [Metric("cycles", "#", "count", "exclusive")])


def test_hot_nonscalable_rest_and_coverage():
    funcs = {
        "solve": lambda p: 8000.0 / p,       # perfectly scalable, dominant
        "serial": lambda p: 40.0,            # constant per rank: non-scalable, 0.5% .. 3.8% share
        "tiny_a": lambda p: 10.0 / p,        # scalable crumbs -> rest
        "tiny_b": lambda p: 20.0 / p,
        "MPI_Allreduce": lambda p: 500.0,    # MPI library: excluded
    }
    ks = identify_kernels(_exp(funcs), threshold=0.05)
    names = ks.names()
    assert names == ["solve", "serial", REST]
    solve, serial, rest = ks.kernels
    assert solve.kind == "hot" and "share" in solve.reasons[0]
    # constant per rank: the slope is exactly 0 (no round-off sign: "p^-0.00" was printed on some BLAS)
    assert serial.kind == "non-scalable" and serial.slopes["p"] == 0.0
    assert "does not decrease as p grows" in serial.reasons[0] and "-0.00" not in serial.reasons[0]
    # shares by hand (application functions only): at p=8, solve 1000, serial 40, tiny 3.75
    tot8 = 1000 + 40 + 1.25 + 2.5
    assert serial.share["p=8"] == pytest.approx(40 / tot8)
    assert rest.share["p=8"] == pytest.approx(3.75 / tot8)
    assert ks.coverage["p=1"] == pytest.approx((8000 + 40) / (8000 + 40 + 30))
    # the MPI routine is reported as excluded: at p=1 it is 500 of 8570 cycles
    assert ks.excluded_share["p=1"] == pytest.approx(500 / 8570)
    assert any("MPI library" in line for line in ks.explain())
    # kernel experiment: rest sums the two crumbs per rank
    kexp = kernel_experiment(_exp(funcs), ks, ["cycles"])
    d = kexp.data
    v = d[(d.callpath == REST) & (d.p == 2) & (d["rank"] == 1)]["value"].item()
    assert v == pytest.approx(15.0)
    assert "MPI_Allreduce" not in set(d.callpath.astype(str))


def test_kernel_present_at_some_scales_only_goes_to_rest_with_a_note():
    funcs = {"solve": lambda p: 800.0 / p, "late": lambda p: 300.0 if p >= 4 else None}
    ks = identify_kernels(_exp(funcs))
    assert "late" not in ks.names()
    note = " ".join(ks.notes)
    assert "late" in note and "p=1" in note and "p=2" in note and "some scales only" in note


def test_needs_three_process_counts_and_nonzero_cost():
    with pytest.raises(PerfcastError, match=">= 3"):
        identify_kernels(_exp({"solve": lambda p: 1.0}, ps=(1, 2)))
    with pytest.raises(PerfcastError, match="sums to zero"):
        identify_kernels(_exp({"solve": lambda p: 0.0}))
    with pytest.raises(PerfcastError, match="threshold"):
        identify_kernels(_exp({"solve": lambda p: 1.0}), threshold=5)


# -- scaling mode: the non-scalable rule expects a constant cost per rank under weak scaling and
#    ~ 1/p under strong scaling; auto infers the mode from the total work (summed over ranks) -----

def _grid(funcs, ps, ns, metric="Ir", size="n"):
    """funcs: name -> cost per rank f(p, n) (None = not measured there); every rank the same."""
    rows = []
    for p in ps:
        for n in ns:
            for r in range(p):
                for name, f in funcs.items():
                    v = f(p, n)
                    if v is not None:
                        rows.append({"p": p, size: n, "rep": 0, "callpath": f"app->{name}", "metric": metric,
                                     "value": float(v), "rank": r})
    return Experiment(["p", size], pd.DataFrame(rows), [Metric(metric, "#", "count", "exclusive")])


def _total_slope(funcs, ps, n):
    """Log-log slope of the application's total work p * sum(cost per rank) against p at size n,
    straight from the generating formulas (MPI functions left out)."""
    tot = [p * sum(f(p, n) or 0.0 for k, f in funcs.items() if not k.startswith("MPI_")) for p in ps]
    return float(np.polyfit(np.log(ps), np.log(tot), 1)[0])


def _nonscalable(ks):
    """Kernels with a non-scalable reason about p."""
    return {k.name for k in ks.kernels if any(r.startswith("non-scalable") for r in k.reasons)}


# weak scaling: n x n points per rank; exponents of the cost per rank in p by construction:
# stencil 0, bookkeeping 0, setup 0 (perfect weak scaling), halo ~ log2(2p) (> 0), gather 1
WEAK = {
    "stencil": lambda p, n: 50.0 * n * n,
    "halo": lambda p, n: 40.0 * n * math.log2(2 * p),
    "gather": lambda p, n: 30.0 * p * n,
    "bookkeeping": lambda p, n: 20000.0,
    "setup": lambda p, n: 2000.0,
    "MPI_Allreduce": lambda p, n: 5000.0 * math.log2(2 * p),
}
# strong scaling: N x N points in total; exponents: stencil -1, update -1, halo -1/2 (surface of a
# 2-D block), replicated 0, tiny 0 (but < 1% everywhere)
STRONG = {
    "stencil": lambda p, n: 50.0 * n * n / p,
    "update": lambda p, n: 2.0 * n * n / p,
    "halo": lambda p, n: 300.0 * n / math.sqrt(p),
    "replicated": lambda p, n: 40000.0,
    "tiny": lambda p, n: 200.0,
}
PS4 = (1, 2, 4, 8)


def test_weak_scaling_flags_only_costs_per_rank_that_grow_with_p():
    exp = _grid(WEAK, PS4, (100, 200))
    for mode in ("weak", "auto"):
        ks = identify_kernels(exp, scaling=mode)
        assert ks.scaling == "weak"
        # shares by hand at p=8, n=100: stencil 500000 of 562000 -> the only hot kernel; halo 16000
        # (2.8%), gather 24000 (4.3%) >= 1%: non-scalable; bookkeeping 20000 (3.6%) is constant per
        # rank -- perfect weak scaling -- so it stays in the rest
        assert _nonscalable(ks) == {"halo", "gather"}
        assert ks.names() == ["stencil", "gather", "halo", REST]
        k = {k.name: k for k in ks.kernels}
        assert k["stencil"].kind == "hot" and k["gather"].kind == "non-scalable"
        assert k["gather"].share["p=8,n=100"] == pytest.approx(24000 / 562000)
        g = next(r for r in k["gather"].reasons if r.startswith("non-scalable"))
        assert k["gather"].slopes["p"] == pytest.approx(1.0, abs=1e-12)   # gather ~ p per rank
        assert "grows as p grows" in g and "weak scaling expects constant per rank" in g
    assert "inferred" in identify_kernels(exp).scaling_basis
    assert identify_kernels(exp, scaling="weak").scaling_basis == "given"
    # the same profile read as strong scaling: every cost per rank that does not fall like 1/p is
    # non-scalable -- the per-rank-constant stencil and bookkeeping too
    ks = identify_kernels(exp, scaling="strong")
    assert _nonscalable(ks) == {"stencil", "halo", "gather", "bookkeeping"}
    st = next(r for r in ks.kernels[0].reasons if r.startswith("non-scalable"))
    assert ks.kernels[0].slopes["p"] == 0.0    # the stencil's cost per rank is constant
    assert "does not decrease as p grows" in st and "strong scaling expects ~ p^-1 per rank" in st
    assert any(line.startswith("strong scaling (given): expected cost per rank ~ p^-1") for line in ks.explain())


def test_strong_scaling_flags_costs_per_rank_falling_slower_than_1_over_p():
    exp = _grid(STRONG, PS4, (400, 600))
    for mode in ("strong", "auto"):
        ks = identify_kernels(exp, scaling=mode)
        assert ks.scaling == "strong"
        # halo ~ p^-0.5 decreases, but slower than 1/p (the old "does not decrease" rule missed it);
        # replicated is 3.6% at p=8, N=400; tiny is below 1% everywhere; stencil and update ~ 1/p
        assert _nonscalable(ks) == {"halo", "replicated"}
        k = {k.name: k for k in ks.kernels}
        assert k["halo"].kind == "non-scalable" and k["stencil"].kind == "hot" and "update" not in k
        assert k["halo"].slopes["p"] == pytest.approx(-0.5, abs=1e-12)
        assert any("decreases slower than 1/p" in r for r in k["halo"].reasons)
        assert k["replicated"].slopes["p"] == 0.0
        assert any("does not decrease as p grows" in r for r in k["replicated"].reasons)
    # read as weak scaling nothing grows per rank, so nothing is non-scalable
    assert _nonscalable(identify_kernels(exp, scaling="weak")) == set()


def test_auto_inference_reports_the_total_work_slope():
    for funcs, ns, mode in ((WEAK, (100, 200), "weak"), (STRONG, (400, 600), "strong")):
        ks = identify_kernels(_grid(funcs, PS4, ns))
        want = float(np.median([_total_slope(funcs, PS4, n) for n in ns]))
        assert (want >= 0.5) == (mode == "weak")
        assert ks.scaling == mode
        assert ks.scaling_slope == pytest.approx(want, abs=1e-12)
        assert ks.to_dict()["scaling_slope"] == ks.scaling_slope and "total Ir" in ks.scaling_basis
        assert ks.to_dict()["scaling"] == mode
    # instructions decide even when the cost metric is cycles (which also include waiting)
    rows = _grid(STRONG, PS4, (400, 600)).data
    cyc = rows.assign(metric="cycles", value=rows["value"] * rows["p"])  # waiting: cycles per rank constant
    exp = Experiment(["p", "n"], pd.concat([rows, cyc], ignore_index=True),
                     [Metric("Ir", "#", "count", "exclusive"), Metric("cycles", "#", "count", "exclusive")])
    ks = identify_kernels(exp)
    assert ks.metric == "cycles" and ks.scaling == "strong" and "total Ir" in ks.scaling_basis
    with pytest.raises(PerfcastError, match="scaling mode 'sideways'"):
        identify_kernels(exp, scaling="sideways")


def test_jacobi_weak_scaling_no_longer_flags_the_solver_sweep():
    """Mirrors the demo's cachegrind counts of examples/jacobi -w n (n x n points per rank), p=1..4:
    compute_sweep Ir per rank = 2000 n^2 + 1600 n + 9100 at every p (fitted exactly to the measured
    2108300, 4693900, 8303500 at n=32, 48, 64), halo_exchange 17700, 23812, 25612, 29212 per rank,
    face_copy (no neighbour at p=1) and an unnamed function of the MPI shared-memory transport."""
    halo = {1: 17700, 2: 23812, 3: 25612, 4: 29212}
    nb = {2: 1.0, 3: 4 / 3, 4: 1.65}
    funcs = {
        "compute_sweep": lambda p, n: 2000 * n * n + 1600 * n + 9100,
        "halo_exchange": lambda p, n: halo[p],
        "face_copy": lambda p, n: nb[p] * (9300 * n + 20558) if p > 1 else None,
        "0x4d50 in mca_btl_vader.so": lambda p, n: 110000.0 * p if p > 1 else None,
        "opal_progress": lambda p, n: 150000.0 if p > 1 else None,
    }
    exp = _grid(funcs, (1, 2, 3, 4), (32, 48, 64))
    ks = identify_kernels(exp)
    assert ks.scaling == "weak"
    sweep = ks.kernels[0]
    assert sweep.name == "compute_sweep" and sweep.kind == "hot"
    assert not any("non-scalable" in r for r in sweep.reasons), sweep.reasons
    # the unnamed function lives in Open MPI's transport: excluded like the named MPI functions
    assert all("0x4d50" not in k.name for k in ks.kernels) and not any("0x4d50" in n for n in ks.notes)
    # p=4, n=32: MPI 440000 + 150000 of all Ir by hand
    app = 2000 * 32 * 32 + 1600 * 32 + 9100 + 29212 + 1.65 * (9300 * 32 + 20558)
    assert ks.excluded_share["p=4,n=32"] == pytest.approx(590000 / (590000 + app))
    assert ks.excluded_share["p=1,n=32"] == 0
    # told it is strong scaling, the constant sweep is what does not scale
    st = identify_kernels(exp, scaling="strong").kernels[0]
    assert st.name == "compute_sweep" and st.slopes["p"] == 0.0     # the sweep's Ir per rank is constant
    assert any(r.startswith("non-scalable: cost per rank") for r in st.reasons)


def test_default_cost_metric_is_the_time_metric_view_shows():
    # HPCToolkit names its time CPUTIME (I)/(E), TAU time (I)/(E), Caliper avg#inclusive#sum#time.duration:
    # none is called "time", and `perfcast kernels` refused them all ("no cost metric") although `view`,
    # `scaling-loss` and `project` use them.  The exclusive member of the pair is the cost, as in `view`.
    work = {"solve": lambda p: 60.0 / p, "setup": lambda p: 3.0, "io": lambda p: 1.0 / p}
    rows = []
    for p in (1, 2, 4):
        excl = {name: f(p) for name, f in work.items()}
        rows.append({"p": p, "rep": 0, "callpath": "main", "metric": "CPUTIME (E)", "value": 0.5})
        rows.append({"p": p, "rep": 0, "callpath": "main", "metric": "CPUTIME (I)", "value": 0.5 + sum(excl.values())})
        rows.append({"p": p, "rep": 0, "callpath": "main", "metric": "calls", "value": 7.0})
        for name, v in excl.items():
            rows.append({"p": p, "rep": 0, "callpath": f"main->{name}", "metric": "CPUTIME (E)", "value": v})
            rows.append({"p": p, "rep": 0, "callpath": f"main->{name}", "metric": "CPUTIME (I)", "value": v})
            rows.append({"p": p, "rep": 0, "callpath": f"main->{name}", "metric": "calls", "value": 1.0})
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("calls", "", "count", "exclusive"),
                                                   Metric("CPUTIME (I)", "s", "time", "inclusive"),
                                                   Metric("CPUTIME (E)", "s", "time", "exclusive")])
    ks = identify_kernels(exp, scaling="strong")
    assert ks.metric == "CPUTIME (E)"
    by_name = {k.name: k for k in ks.kernels}
    # at p=4: solve 15, setup 3, io 0.25, main 0.5 (its own time) -> 18.75 in all
    assert by_name["solve"].share["p=4"] == pytest.approx(15 / 18.75)
    # constant per rank while strong scaling expects ~1/p: hot (16 %) and non-scalable
    assert any(r.startswith("non-scalable") for r in by_name["setup"].reasons)
    assert by_name["setup"].share["p=4"] == pytest.approx(3 / 18.75)


def test_no_time_metric_on_the_tree_is_still_refused():
    exp = Experiment(["p"], pd.DataFrame([{"p": p, "rep": 0, "callpath": "main", "metric": "bytes_sent", "value": 1.0}
                                          for p in (1, 2, 4)]), [Metric("bytes_sent", "B", "bytes", "exclusive")])
    with pytest.raises(PerfcastError, match="no cost metric to rank functions by"):
        identify_kernels(exp)


def test_a_metric_summed_over_ranks_in_the_file_is_per_rank_over_the_process_count():
    # Caliper sum#: one value per run, the sum over its ranks.  Every rank's cost is constant here (perfect
    # weak scaling: solve 6, setup 1 per rank), so the sum is p times that; it was taken as one rank's cost:
    # "non-scalable: cost per rank ~ p^1"
    rows = []
    for p in (2, 4, 8, 16):
        for cp, v in (("main", 0.5), ("main->solve", 6.0), ("main->setup", 1.0)):
            rows.append({"p": p, "rep": 0, "callpath": cp, "metric": "sum#time", "value": p * v})
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("sum#time", "s", "time", "exclusive",
                                                        aggregate="sum over ranks")])
    ks = identify_kernels(exp, metric="sum#time")
    assert ks.scaling == "weak"                  # the total work ~ p: weak, inferred
    solve = next(k for k in ks.kernels if k.name == "solve")
    assert solve.kind == "hot" and solve.slopes["p"] == pytest.approx(0.0, abs=1e-12)
    assert not any(r.startswith("non-scalable") for k in ks.kernels for r in k.reasons)


def test_time_per_rank_flat_over_one_doubling_is_undetermined():
    # p = 2, 3, 4 (a span of 2), cycles per rank (a time-like cost): solve 100, io = p (grows),
    # setup = 10 / p (falls): 107, 106.3, 106.5 per rank -- flat.  Weak scaling explains it, and so
    # does strong scaling at >= 50% efficiency (total work slope <= 1 over a span of 2)
    funcs = {"solve": lambda p: 100.0, "io": lambda p: 1.0 * p, "setup": lambda p: 10.0 / p}
    ks = identify_kernels(_exp(funcs, ps=(2, 3, 4)))
    s = _total_slope({k: (lambda p, n, f=f: f(p)) for k, f in funcs.items()}, (2, 3, 4), None)
    assert -0.1 < s - 1 <= 0 and ks.scaling == "undetermined"
    assert ks.scaling_slope == pytest.approx(s, abs=1e-12)
    # what fails both modes is flagged (io grows per rank), what only strong scaling would blame is not
    names = _nonscalable(ks)
    assert "io" in names and "solve" not in names
    assert "solve" in _nonscalable(identify_kernels(_exp(funcs, ps=(2, 3, 4)), scaling="strong"))


def test_growing_communication_is_named_outside_the_kernel_list():
    """Weak scaling: solve 1000 per rank (scales), MPI_Allreduce 100 log2(2p) (100 -> 400 from p = 1
    to 8), MPI_Waitall 10 p (10 -> 80), MPI_Isend 50 (constant), MPI_Wait 0.001 p (grows, but
    0.008 of 1530 at p = 8: below the 1% a function needs).  The kernel list stays computation
    only; the communication line names the two growing callpaths, the larger growth first, with
    the cost per rank at both ends, the log-log slope and the share of all at p = 8 -- by hand."""
    funcs = {"solve": lambda p: 1000.0, "MPI_Allreduce": lambda p: 100.0 * math.log2(2 * p),
             "MPI_Waitall": lambda p: 10.0 * p, "MPI_Isend": lambda p: 50.0, "MPI_Wait": lambda p: 0.001 * p}
    ks = identify_kernels(_exp(funcs), threshold=0.05, scaling="weak")
    assert ks.names() == ["solve", REST]
    ps = np.array(PS, dtype=float)
    allreduce = 100.0 * np.log2(2 * ps)
    all8 = 1000 + 400 + 80 + 50 + 0.008
    got = [(c["callpath"], c["per_rank_first"], c["per_rank_last"], c["first_at"], c["last_at"]) for c in ks.communication]
    assert got == [("main->MPI_Allreduce", 100.0, 400.0, "p=1", "p=8"), ("main->MPI_Waitall", 10.0, 80.0, "p=1", "p=8")]
    a, w = ks.communication
    assert a["slope"] == pytest.approx(np.polyfit(np.log(ps), np.log(allreduce), 1)[0], rel=1e-9)
    assert w["slope"] == pytest.approx(1.0, rel=1e-9)
    assert a["share_last"] == pytest.approx(400 / all8) and w["share_last"] == pytest.approx(80 / all8)
    line = ks.explain()[-1]
    assert line.startswith("communication is outside the kernel list")
    assert "main->MPI_Allreduce 100 -> 400 per rank from p=1 to p=8" in line and "MPI_Isend" not in line
    assert ks.to_dict()["communication"][0]["callpath"] == "main->MPI_Allreduce"
    # nothing grows: said, not left out
    ks = identify_kernels(_exp({"solve": lambda p: 1000.0, "MPI_Isend": lambda p: 50.0}), scaling="weak")
    assert ks.communication == [] and ks.explain()[-1].endswith("none of its callpaths grows faster")


def test_three_character_function_names_are_application_functions():
    # the exclude list names cachegrind's unknown function "???" literally: an fnmatch "???" took
    # every three-character name for the MPI library (examples/cg's dot: 20% of the instructions
    # counted as MPI, left out of the kernels)
    funcs = {"dot": lambda p: 300.0 / p, "spmv": lambda p: 700.0 / p, "???": lambda p: 50.0}
    ks = identify_kernels(_exp(funcs))
    assert ks.names()[:2] == ["spmv", "dot"]
    dot = ks.kernels[1]
    # shares by construction: at p=1 dot 300, spmv 700 of 1000 application cycles; ??? is excluded
    assert dot.share["p=1"] == pytest.approx(0.3)
    assert ks.excluded_share["p=1"] == pytest.approx(50 / 1050)


def test_cg_campaign_dot_is_a_kernel_with_its_measured_instructions():
    from pathlib import Path

    from perfcast.io import load

    store = Path(__file__).resolve().parents[1] / "bench" / "data" / "cg-p" / "cg-p.perfcast"
    ks = identify_kernels(load([store]), metric="Ir")
    assert "dot" in ks.names()
    # ground truth read with pandas: the ratio of the two functions' instructions (summed over ranks,
    # one cachegrind run per point) is the ratio of their shares, whatever the denominator
    v = pd.read_parquet(store / "values.parquet")
    ir = v[v.metric == "Ir"].groupby(["p", "callpath"]).value.sum()
    k = {x.name: x for x in ks.kernels}
    for p in (1, 2, 4, 8, 16):
        want = ir[(float(p), "app->dot")] / ir[(float(p), "app->spmv")]
        assert k["dot"].share[f"p={p}"] / k["spmv"].share[f"p={p}"] == pytest.approx(want, rel=1e-9)
    # p=1 has no MPI traffic: the library's share there is small, not dot's 20%
    assert ks.excluded_share["p=1"] < 0.01


def test_a_cost_metric_not_on_the_functions_is_refused_in_one_line():
    # `kernels --metric time` on a campaign with cachegrind counts: the timers are not on the functions'
    # callpaths, and the selection of the functions dropped the metric: KeyError 'time' (exit 1)
    timer = [{"p": p, "rep": 0, "callpath": "main->t_solve", "metric": "time", "value": 1.0 / p, "rank": 0}
             for p in PS]
    rows = [{"p": p, "rep": 0, "callpath": cp, "metric": "cycles", "value": v, "rank": r}
            for p in PS for r in range(p) for cp, v in (("main->solve", 800.0 / p), ("main", 0.0))]
    exp = Experiment(["p"], pd.DataFrame(rows + timer), [Metric("cycles", "#", "count", "exclusive"),
                                                         Metric("time", "s", "time", "inclusive")])
    with pytest.raises(PerfcastError, match=r"'time' is not measured on the functions .* but on main->t_solve"):
        identify_kernels(exp, metric="time")
    assert identify_kernels(exp, metric="cycles").names() == ["solve", REST]


def test_a_function_near_zero_at_the_first_process_count_grows_from_its_first_real_work():
    """miniFE's make_local_matrix: next to nothing at p = 1 (one rank: no neighbour to set up), real
    work from p = 2 on.  Generating formula: 1 cycle at p = 1, 400 sqrt(p) per rank from p = 2.  The
    growth of its cost per rank is the law's exponent, 0.5 (log(400 sqrt(8)) - log(400 sqrt(2))
    over log 8 - log 2 = 0.5 log 4 / log 4), measured from p = 2 (the law of p = 2, 4, 8 gives 400 at
    p = 1, where 1 is 0.25% of it: near zero); from the near-zero p = 1 a log-log
    fit over all four points said p^3.09 (least squares of log(1), log(566), log(800), log(1131)
    against log p), no scaling law."""
    funcs = {"solve": lambda p: 8000.0, "make_local_matrix": lambda p: 1.0 if p == 1 else 400.0 * p ** 0.5}
    ks = identify_kernels(_exp(funcs), scaling="weak")
    k = {x.name: x for x in ks.kernels}["make_local_matrix"]
    assert k.slopes["p"] == pytest.approx(0.5, rel=1e-9)
    assert k.starts == {"p": "p=2"} and k.to_dict()["starts"] == {"p": "p=2"}
    # still non-scalable under weak scaling (0.5 > 0 + flat), its reason naming where growth is measured from
    assert k.kind == "hot" and any(r.startswith("non-scalable") and "p=2" in r and "p=1" in r for r in k.reasons)
    # a true power law from p = 1 keeps its exponent and says nothing of a start, though its p = 1
    # value is 0.2% of its p = 8 one (8 p^3: 8 and 4096): each value is the law of the later ones
    ks = identify_kernels(_exp({"solve": lambda p: 8000.0, "cubic": lambda p: 8.0 * p ** 3}), scaling="weak")
    k = {x.name: x for x in ks.kernels}["cubic"]
    assert k.slopes["p"] == pytest.approx(3.0, rel=1e-9) and k.starts == {}


def test_the_first_point_of_real_work_on_a_line_by_hand():
    from perfcast.analysis.kernels import _real_start

    x = np.array([1.0, 2.0, 4.0, 8.0])
    # two near-zero values before the work starts: the law of p = 4, 8 (100 p) gives 200 at p = 2
    assert _real_start(x, np.array([0.5, 1.0, 400.0, 800.0])) == 2
    # a measured 0, then the work: 0 is below any fraction of it
    assert _real_start(x, np.array([0.0, 50.0, 100.0, 200.0])) == 1
    # a power law (p^4: 1 at p = 1, 4096 at p = 8) and a falling one (strong scaling): no cut
    assert _real_start(x, x ** 4) == 0 and _real_start(x, 1e6 / x) == 0
    # only the last point does real work: it starts there (one point: no slope)
    assert _real_start(x, np.array([1.0, 1.0, 1.0, 5000.0])) == 3


def test_a_line_with_real_work_at_its_last_point_only_is_said_not_passed_over(tmp_path, capsys):
    """A tidy CSV written here: solve 8000 cycles at every p (weak scaling), setup 1 cycle at
    p = 1, 2, 4 and 200 at p = 8, crumb 0 then 10.  setup's line along p does real work only at
    p = 8 (1 is below 1% of 200: near zero), so no growth exponent can be measured: it was left in
    the rest without a word.  Now `unjudged` (JSON) and a note say so; its share at p = 8 by hand:
    200 / (8000 + 200 + 10).  crumb's 10 / 8210 (0.12%) is below min_share (1%): not listed.  The
    MPI library's MPI_Allreduce (1 cycle, then 300 at p = 8: communication, outside the kernels)
    likewise, its share of all cycles there 300 / 8510, with its callpath."""
    from conftest import cli_items

    from perfcast.cli import main

    rows = ["p,callpath,metric,value,scope"]
    for p in (1, 2, 4, 8):
        rows += [f"{p},main,cycles,0,exclusive", f"{p},main->solve,cycles,8000,exclusive",
                 f"{p},main->setup,cycles,{200 if p == 8 else 1},exclusive",
                 f"{p},main->crumb,cycles,{10 if p == 8 else 0},exclusive",
                 f"{p},main->MPI_Allreduce,cycles,{300 if p == 8 else 1},exclusive"]
    csv = tmp_path / "late.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert main(["kernels", str(csv), "--scaling", "weak", "--json"]) == 0
    ks = cli_items(capsys.readouterr().out, "kernels")[0]
    assert [k["name"] for k in ks["kernels"]] == ["solve", REST]
    assert len(ks["unjudged"]) == 2
    u, c = ks["unjudged"]
    assert (u["function"], u["parameter"], u["at"], u["near_zero"]) == ("setup", "p", "p=8", ["p=1", "p=2", "p=4"])
    assert u["share"] == pytest.approx(200 / 8210, rel=1e-12) and "callpath" not in u
    assert (c["function"], c["callpath"], c["parameter"], c["at"], c["near_zero"]) == \
        ("MPI_Allreduce", "main->MPI_Allreduce", "p", "p=8", ["p=1", "p=2", "p=4"])
    assert c["share"] == pytest.approx(300 / 8510, rel=1e-12)
    assert sum(n.startswith("setup: ") for n in ks["notes"]) == 1
    assert sum(n.startswith("main->MPI_Allreduce (communication): ") for n in ks["notes"]) == 1
    assert main(["kernels", str(csv), "--scaling", "weak"]) == 0
    assert "setup: near zero at p=1, p=2, p=4" in capsys.readouterr().out


def test_kernels_refuse_the_exclusive_time_of_timers_that_nest(capsys):
    """CoMD's time campaign (tests/data/comd/md.perfcast): the timers CoMD prints nest (total > loop >
    timestep > force), and the campaign stores each under app, so their inclusive times add up to more
    than app's at every point (read with pandas): app's "exclusive" time is negative.  `kernels --metric
    time --procs n` used it and stopped at "negative exclusive values"; the exclusive values are refused
    by the views' rule now (exclusive_values), saying why -- and kernel_experiment leaves the metric out."""
    from pathlib import Path

    from conftest import cli
    from perfcast.analysis.kernels import exclusive_values
    from perfcast.io import load

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    t = v[v["metric"] == "time"].groupby(["p", "n", "callpath"])["value"].mean().unstack("callpath")
    timers = [c for c in t.columns if c != "app"]
    assert (t[timers].sum(axis=1) > t["app"]).all()                  # the premise: the timers nest
    code, out, err = cli(capsys, "kernels", store, "--metric", "time", "--procs", "n")
    assert code == 2 and "negative exclusive" not in err
    assert "timers nest" in err and "Traceback" not in err
    with pytest.raises(PerfcastError):
        exclusive_values(load([store]), "time")


def test_functions_whose_names_hold_brackets_are_kept_beside_a_campaigns_timers():
    """LULESH under cachegrind (-O2): `[unknown]`, `IntegrateStressForElems(...) [clone .constprop.0]`
    and `CalcElemShapeFunctionDerivatives(..., double (*) [8], double*)` hold 11% of its Ir.  With the
    campaign's timers beside them the functions are selected by name, and the names were taken as
    globs ("[8]" a character class): the three were dropped from the kernels, the others' shares
    inflated (CalcHourglassControlForElems 19.8% instead of 16.7%).  Generating values: per rank
    600 instructions in "hot [clone .constprop.0]", 300 in "f(double (*) [8])", 100 in
    "[unknown]" at every p: shares 60%, 30%, 10% of the application's instructions."""
    funcs = {"hot [clone .constprop.0]": 600.0, "f(double (*) [8])": 300.0, "[unknown]": 100.0}
    rows = [{"p": p, "rep": 0, "callpath": f"app->{name}", "metric": "Ir", "value": v, "rank": r}
            for p in PS for r in range(p) for name, v in funcs.items()]
    timers = [{"p": p, "rep": 0, "callpath": cp, "metric": "time", "value": 1.0, "rank": 0}
              for p in PS for cp in ("app", "app->Elapsed")]
    exp = Experiment(["p"], pd.DataFrame(rows + timers), [Metric("Ir", "#", "count", "exclusive"),
                                                          Metric("time", "s", "time", "inclusive")])
    ks = identify_kernels(exp, metric="Ir", threshold=0.05)
    k = {x.name: x for x in ks.kernels}
    for name, v in funcs.items():
        assert k[name].share == {f"p={p}": pytest.approx(v / 1000.0, rel=1e-12) for p in PS}
    assert set(ks.names()) == {*funcs, REST}

"""Kernel identification on hand-made profiles whose shares and trends are known by construction."""

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
    assert serial.kind == "non-scalable" and "p^0.00" in serial.reasons[0]
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

"""A routine that does not run at p = 1 (no neighbour to exchange with): 0 there, its law from the
next process count on (fit.core.not_running_first, Model.zero_below).  Before, miniFE's MPI_Irecv,
absent from its p = 1 profiles, was fitted from p = 2 on and predicted 379 calls at p = 1 where 0
were measured, and examples/jacobi's halo time (~0 at p = 1) got a p^(22/3) law through the two
process counts.  Every truth here is the generating formula (or a hand count of it)."""

import math

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.experiment import Experiment
from perfcast.fit.model import Model

NS = (16.0, 24.0, 32.0, 40.0, 48.0)
SPARSE = {"locations": "sparse"}


def _sparse(laws, ps, ns=NS, reps=2, noise=0.0, seed=0):
    """A sparse profile (absent = did not run): ``laws`` {callpath: f(p, n)}; a value of None
    leaves the row out, as a profile of a run that never called the routine does."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, f in laws.items():
        for p in ps:
            for n in ns:
                for r in range(reps):
                    v = f(p, n)
                    if v is not None:
                        rows.append({"p": p, "n": n, "rep": r, "callpath": name, "metric": "calls",
                                     "value": v * (1 + noise * rng.standard_normal())})
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"], meta=SPARSE)


def _evaluated(formula: str, p: float, n: float) -> float:
    return float(eval(formula.replace("^", "**"), {"__builtins__": {}, "log2": math.log2}, {"p": p, "n": n}))


# MPI_Irecv of a 1-D halo exchange, calls per rank: 2 n per run from p = 2 on (one per row and
# neighbour), never called at p = 1 (its profile has no MPI_Irecv); MPI_Allreduce runs everywhere
IRECV = lambda p, n: None if p == 1 else 2.0 * n          # noqa: E731
ALLREDUCE = lambda p, n: 3.0 * n * p                     # noqa: E731


def test_routine_absent_at_p1_is_zero_there_and_its_law_holds_from_p2():
    exp = _sparse({"MPI->MPI_Irecv": IRECV, "MPI->MPI_Allreduce": ALLREDUCE}, (1.0, 2.0))
    ms = perfcast.model(exp)
    pts = [{"p": 1.0, "n": 56.0}, {"p": 1.0, "n": 16.0}, {"p": 2.0, "n": 56.0}, {"p": 2.0, "n": 64.0}]
    got = [r for r in ms.predict(pts) if r["callpath"] == "MPI->MPI_Irecv"]
    assert len(got) == len(pts)
    for r in got:
        p, n = r["at"]["p"], r["at"]["n"]
        truth = 0.0 if p == 1 else 2.0 * n
        assert r["value"] == pytest.approx(truth, rel=1e-9, abs=1e-9), (r["formula"], r["at"])
        assert r["lower"] <= truth <= r["upper"]
        # the printed formula is the function that gave the value, the p = 1 exception included
        assert _evaluated(r["formula"], p, n) == pytest.approx(r["value"], rel=1e-9, abs=1e-9)
        if p == 1:
            assert (r["lower"], r["upper"]) == (0.0, 0.0)      # never called in any run at p = 1
    m = next(sm.model for sm in ms.series if sm.callpath == "MPI->MPI_Irecv")
    assert m.zero_below[:2] == ("p", 2.0)
    assert m.formula().startswith("(p >= 2) * (")
    # the JSON form predicts the same
    back = Model.from_dict(m.to_dict())
    X = {"p": np.array([1.0, 2.0, 2.0]), "n": np.array([20.0, 20.0, 64.0])}
    assert np.array_equal(back.predict(X), m.predict(X))
    assert np.allclose(m.predict(X), [0.0, 40.0, 128.0])


def test_absent_routine_at_several_process_counts_predicts_zero_at_p1():
    """p = 1, 2, 4, 8: a per-rank count of 2 neighbours' messages from p = 2 on, 2 * (p > 1) * 100;
    the law from p = 2 on is flat, 0 at p = 1 (was 200 there: the mean from p = 2 on)."""
    f = lambda p, n: None if p == 1 else 200.0              # noqa: E731
    exp = _sparse({"halo": f, "work": lambda p, n: 1000.0 * n / p}, (1.0, 2.0, 4.0, 8.0))
    ms = perfcast.model(exp)
    for r in ms.predict([{"p": 1.0, "n": 32.0}, {"p": 16.0, "n": 32.0}]):
        if r["callpath"] == "halo":
            truth = 0.0 if r["at"]["p"] == 1 else 200.0
            assert r["value"] == pytest.approx(truth, abs=1e-6), (r["formula"], r["at"])
            assert _evaluated(r["formula"], r["at"]["p"], r["at"]["n"]) == pytest.approx(r["value"], abs=1e-6)


def test_near_zero_at_p1_gets_no_steep_power_law():
    """A halo exchange's time per rank: ~0 at p = 1 (no neighbour: 1e-7 s of bookkeeping), 3e-5 n
    s from p = 2 on, the same with more ranks (two neighbours each, the same message size).  A
    power law through both levels was p^11 (2^11 too high at p = 4); now p = 1 is 0 (its
    interval reaches the 1e-7 measured there) and from p = 2 on the law in n, flat in p, with the
    two-level warning."""
    f = lambda p, n: 1e-7 if p == 1 else 3e-5 * n           # noqa: E731
    exp = _sparse({"app->halo": f, "app->work": lambda p, n: 1e-6 * n ** 3 / p}, (1.0, 2.0), noise=0.01, reps=3)
    ms = perfcast.model(exp)
    rows = [r for r in ms.predict([{"p": 1.0, "n": 32.0}, {"p": 2.0, "n": 32.0}, {"p": 4.0, "n": 32.0}])
            if r["callpath"] == "app->halo"]
    at = {r["at"]["p"]: r for r in rows}
    for p in (4.0, 2.0):
        assert at[p]["value"] == pytest.approx(3e-5 * 32, rel=0.05), at[p]["formula"]
        assert at[p]["lower"] <= 3e-5 * 32 <= at[p]["upper"]
    assert at[1.0]["value"] == 0.0 and at[1.0]["lower"] <= 1e-7 <= at[1.0]["upper"]
    assert at[4.0]["confidence"] == "low"
    assert any(n.startswith("2 values of p only (1, 2): does not run at p = 1") for n in at[4.0]["notes"])
    for r in rows:
        # (printed to 4 significant digits)
        assert _evaluated(r["formula"], r["at"]["p"], r["at"]["n"]) == pytest.approx(r["value"], rel=1e-3, abs=0)


def test_a_steep_but_real_law_keeps_its_power():
    """n p^3 (1/8 of p = 2 at p = 1: above the rule's 1/16) runs at p = 1: its power law stays."""
    exp = _sparse({"a": lambda p, n: n * p ** 3, "b": lambda p, n: n}, (1.0, 2.0))
    ms = perfcast.model(exp)
    r = next(r for r in ms.predict([{"p": 4.0, "n": 32.0}]) if r["callpath"] == "a")
    assert r["value"] == pytest.approx(32.0 * 64, rel=1e-9)
    assert "p >=" not in r["formula"]


def test_absent_point_outside_the_collector_coverage_stays_missing():
    """Within its metric's coverage a callpath absent at a whole point is 0 there; outside (the
    timer 'halo' that the MPI collector cannot see) it stays missing."""
    from perfcast.experiment import fill_absent_points

    rows = [{"p": p, "rep": 0, "callpath": cp, "metric": "calls", "value": 5.0}
            for p, cp in ((1.0, "MPI->MPI_Send"), (2.0, "MPI->MPI_Send"), (2.0, "MPI->MPI_Irecv"), (2.0, "halo"))]
    meta = {**SPARSE, "coverage": [{"metrics": ["calls"], "callpaths": ["MPI->MPI_Send", "MPI->MPI_Irecv"]}]}
    exp = Experiment.from_pandas(pd.DataFrame(rows), parameters=["p"], meta=meta)
    out = fill_absent_points(exp, exp.data)
    at1 = out[out["p"] == 1.0].set_index("callpath")["value"]
    assert at1.to_dict() == {"MPI->MPI_Send": 5.0, "MPI->MPI_Irecv": 0.0}


def test_cli_json_says_where_the_routine_does_not_run(tmp_path, capsys):
    """`perfcast model --json` and `predict --json` (validated against the output schema): the model
    says where it is 0 (``zero_below``) and the formula printed gives the value predicted."""
    from perfcast import store

    from conftest import cli, cli_items

    exp = _sparse({"MPI->MPI_Irecv": IRECV, "MPI->MPI_Allreduce": ALLREDUCE}, (1.0, 2.0))
    store.write(exp, tmp_path / "e.perfcast")
    capsys.readouterr()
    code, out, _ = cli(capsys, "model", tmp_path / "e.perfcast", "--json")
    assert code == 0
    m = next(i for i in cli_items(out, "models") if i["callpath"] == "MPI->MPI_Irecv")
    assert m["zero_below"] == {"parameter": "p", "start": 2.0, "bound": 0.0}
    code, out, _ = cli(capsys, "predict", tmp_path / "e.perfcast", "--at", "p=1,n=30", "--at", "p=2,n=30", "--json")
    assert code == 0
    got = {r["at"]["p"]: r for r in cli_items(out, "predictions") if r["callpath"] == "MPI->MPI_Irecv"}
    assert got[1.0]["value"] == 0.0 and got[2.0]["value"] == pytest.approx(60.0, rel=1e-9)
    for p, r in got.items():
        assert _evaluated(r["formula"], p, 30.0) == pytest.approx(r["value"], rel=1e-9, abs=1e-12)


def test_a_zero_on_the_law_at_p1_keeps_its_point():
    """MPI_Bcast's bytes received summed over ranks: 56 (p - 1) -- the root receives nothing -- at
    p = 1, 2, 4 (0 absent from the profile at p = 1).  The 0 is a point of the law, not a regime of
    its own: the law through the three points is kept (392 at p = 8), not one fitted from p = 2, 4
    alone (18.7 p^(19/12): 502)."""
    exp = _sparse({"MPI->MPI_Bcast": lambda p, n: None if p == 1 else 56.0 * (p - 1),
                   "MPI->MPI_Allreduce": ALLREDUCE}, (1.0, 2.0, 4.0))
    ms = perfcast.model(exp)
    got = {r["at"]["p"]: r for r in ms.predict([{"p": 1.0, "n": 30.0}, {"p": 8.0, "n": 30.0}])
           if r["callpath"] == "MPI->MPI_Bcast"}
    assert got[8.0]["value"] == pytest.approx(56.0 * 7, rel=1e-9), got[8.0]["formula"]
    assert got[1.0]["value"] == pytest.approx(0.0, abs=1e-9)
    assert "p >=" not in got[8.0]["formula"]


def test_fit_series_applies_the_same_rule():
    """The single-series API (perfcast.fit.fit_series) models a routine that does not run at p = 1
    as an experiment's fit does: 0 there, the law from p = 2 on.  Generating formula: MPI_Isend
    calls summed over ranks of a 1-D halo exchange with 100 steps, 200 (p - 1) -- 0 at p = 1 --
    measured at p = 1, 2, 4, 8 plus a routine that is 0 at p = 1 and a constant 2 n beyond."""
    from perfcast.fit import fit_series

    ps = [1.0, 2.0, 4.0, 8.0]
    step = fit_series(ps, [[0.0, 0.0] if p == 1 else [64.0, 64.0] for p in ps], "p")
    assert step.predict({"p": 1.0}) == 0.0
    assert step.predict({"p": 16.0}) == pytest.approx(64.0, rel=1e-9)
    assert step.zero_below is not None and step.zero_below[:2] == ("p", 2.0)
    # a 0 at p = 1 that is a point of the law keeps its point (no exception below p = 2)
    line = fit_series(ps, [[200.0 * (p - 1)] * 2 for p in ps], "p")
    assert line.predict({"p": 16.0}) == pytest.approx(3000.0, rel=1e-9)
    assert line.zero_below is None

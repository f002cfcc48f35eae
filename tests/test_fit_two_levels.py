"""A parameter measured at two values only, the others on lines (the most common small campaign:
p = 1, 2 on a two-core workstation x several problem sizes, miniFE's and the bundled jacobi's).
The model was the training mean along p ("treated as having no effect": `3 p n` predicted 172.8 at
p = 4, n = 48 instead of 576).  Now a one-term power law in p goes through the two levels of the
lines along it (a product ``f(n) (p / p1)^a`` or a sum ``f(n) + c p^b``, chosen by the search's
criterion), with the two-point model's wide interval, its warning, and low confidence beyond the
measured p.  Every truth here is the generating formula."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import perfcast
from perfcast.experiment import Experiment

from conftest import cli, cli_items

NS = (16.0, 24.0, 32.0, 40.0, 48.0)
LAWS = {
    "3pn": lambda p, n: 3.0 * p * n,
    "5+2pn^2": lambda p, n: 5.0 + 2.0 * p * n ** 2,
    "cn/p": lambda p, n: 7.5 * n / p,           # strong scaling: per-rank work falls with p
}
FLAT = {"n^1.5": lambda p, n: 4.0 * n ** 1.5}
TARGETS = [{"p": 4.0, "n": 48.0}, {"p": 8.0, "n": 48.0}, {"p": 4.0, "n": 32.0}, {"p": 8.0, "n": 16.0}]
#: the interval rule of a two-point law (fit.core.TWO_POINT_EXPONENT_SD, TWO_POINT_DRIFT_DOF): an
#: exponent uncertain by 0.25, so the relative standard deviation grows by 0.25 ln 2 per doubling
#: beyond the data with 2 degrees of freedom.  Without noise the 90% interval's upper half is
#: t(0.95, 2) * 0.25 * ln 2 = 50.6% of the value per doubling of p beyond p = 2 (WIDE); with noise
#: the noise's variance is added and the Welch-Satterthwaite degrees of freedom rise, so the upper
#: half is at least the normal quantile's 1.645 * 0.25 * ln 2 = 28.5% per doubling (WIDE_NOISY)
WIDE = stats.t.ppf(0.95, 2) * 0.25 * math.log(2)
WIDE_NOISY = stats.norm.ppf(0.95) * 0.25 * math.log(2)


def _experiment(laws, noise=0.0, reps=2, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"p": p, "n": n, "callpath": name, "metric": "time",
             "value": f(p, n) * (1 + noise * rng.standard_normal())}
            for name, f in laws.items() for p in (1.0, 2.0) for n in NS for _ in range(reps)]
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"])


@pytest.mark.parametrize("name", list(LAWS))
def test_exact_laws_at_two_process_counts_extrapolate_in_p(name):
    ms = perfcast.model(_experiment({name: LAWS[name]}))
    for r in ms.predict(TARGETS):
        truth = LAWS[name](r["at"]["p"], r["at"]["n"])
        assert r["value"] == pytest.approx(truth, rel=1e-9), (r["formula"], r["at"])
        assert r["lower"] <= truth <= r["upper"]
        assert r["confidence"] == "low"
        assert any(n.startswith("2 values of p only (1, 2)") for n in r["notes"])
        assert any(n.startswith(f"p={r['at']['p']:g}: beyond the measured p (1 to 2)") for n in r["notes"])
        assert not any("no model says how" in n or "no line of" in n for n in r["notes"])
        assert (r["upper"] - r["value"]) / r["value"] >= 0.999 * WIDE * math.log2(r["at"]["p"] / 2.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noisy_laws_hold_the_truth_in_a_wide_interval(seed):
    # 2% relative noise, 3 repetitions: the truth inside the 90% interval, whose upper half is at
    # least the two-point rule's width (WIDE_NOISY per doubling of p beyond p = 2)
    ms = perfcast.model(_experiment(LAWS, noise=0.02, reps=3, seed=seed))
    for r in ms.predict(TARGETS):
        truth = LAWS[r["callpath"]](r["at"]["p"], r["at"]["n"])
        assert r["lower"] <= truth <= r["upper"], (r["callpath"], r["formula"], r["at"])
        assert abs(r["value"] - truth) <= 0.05 * truth
        doublings = math.log2(r["at"]["p"] / 2.0)
        assert (r["upper"] - r["value"]) / r["value"] >= WIDE_NOISY * doublings


@pytest.mark.parametrize("noise,reps", [(0.0, 2), (0.02, 3)])
def test_a_series_flat_in_p_stays_flat(noise, reps):
    ms = perfcast.model(_experiment(FLAT, noise=noise, reps=reps, seed=5))
    m = ms[("n^1.5", "time")]
    assert all(q != "p" for t in m.terms for q, *_ in t.factors), m.formula()
    rows = ms.predict([{"p": 1.0, "n": 64.0}, {"p": 8.0, "n": 64.0}])
    assert rows[0]["value"] == pytest.approx(rows[1]["value"], rel=1e-12)
    assert rows[1]["value"] == pytest.approx(4.0 * 64.0 ** 1.5, rel=0.05)
    # flat because the two levels agree, a law found (exponent 0), not "no effect" by default
    assert any(n.startswith("2 values of p only") for n in rows[1]["notes"])
    assert not any("no line of" in n for n in rows[1]["notes"])


def test_an_additive_law_in_p_is_a_sum():
    # n^2 + 100 p: the levels differ by the same 100 at every n (a product cannot follow that)
    law = {"add": lambda p, n: n ** 2 + 100.0 * p}
    ms = perfcast.model(_experiment(law))
    for r in ms.predict(TARGETS):
        assert r["value"] == pytest.approx(law["add"](r["at"]["p"], r["at"]["n"]), rel=1e-9)


def test_predict_and_model_on_the_command_line(capsys, tmp_path):
    # the reproduction: exact 3 p n at p = 1, 2 x n = 16..48, two repetitions
    rows = [{"p": p, "n": n, "rep": r, "callpath": "f", "metric": "calls", "value": 3 * p * n}
            for p in (1, 2) for n in (16, 24, 32, 40, 48) for r in range(2)]
    pd.DataFrame(rows).to_csv(path := tmp_path / "t3pn.csv", index=False)
    code, out, err = cli(capsys, "predict", path, "--at", "p=4,n=48", "--json")
    assert code == 0, err
    (r,) = cli_items(out, "predictions")
    assert r["value"] == pytest.approx(576.0, rel=1e-9)        # was the mean's 172.8
    assert r["confidence"] == "low"
    assert not any("falls like" in n or "no model says" in n for n in r["notes"])
    code, out, err = cli(capsys, "model", path)
    assert code == 0, err
    assert "(!) 2 values of p only" in out and "treated as having no effect" not in err
    # within the measured p, on a measured line, the value is the formula's (no line factor)
    code, out, err = cli(capsys, "predict", path, "--at", "p=2,n=64", "--json")
    (r,) = cli_items(out, "predictions")
    assert r["value"] == pytest.approx(384.0, rel=1e-9) and "line" not in r
    assert r["confidence"] != "low"


def test_many_series_are_summed_up_as_laws_on_two_values(capsys, tmp_path):
    # seven series a p n: the warning summary named them "poor fit(s)"
    rows = [{"p": p, "n": n, "callpath": f"r{s}", "metric": "calls", "value": (s + 1) * p * n}
            for s in range(7) for p in (1, 2) for n in NS]
    pd.DataFrame(rows).to_csv(path := tmp_path / "seven.csv", index=False)
    code, out, err = cli(capsys, "model", path)
    assert code == 0, err
    assert "7 series with a law on 2 values of a parameter" in err and "poor fit" not in err


def test_a_level_of_zero_gives_the_straight_line_not_a_round_off_power():
    # CoMD's barrier (cachegrind, tests of branch app20): 0 write misses at p = 2, 1, 0, 1 at p = 8
    # (n = 10, 12, 14).  The sum form's law through the levels 0 and 2/3 is the straight line (a
    # power law through a level <= 0 has no exponent), but the reduced fit's constant was a
    # round-off 1.96e-17, not 0, and the law became 1.073e-25 * p^(302/11): 1.2e8 misses at p = 16,
    # ranked first among CoMD's 15306 series as a scalability bug.  Truth: the straight line
    # through (2, 0) and (8, 2/3) at p = 16 is 2/3 * 14 / 6.
    rows = [{"p": p, "n": n, "callpath": "barrier", "metric": "misses", "value": v}
            for p, vs in ((2.0, (0.0, 0.0, 0.0)), (8.0, (1.0, 0.0, 1.0))) for n, v in zip((10.0, 12.0, 14.0), vs)]
    ms = perfcast.model(Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"]))
    (r,) = ms.predict([{"p": 16.0, "n": 12.0}])
    assert r["value"] == pytest.approx(2 / 3 * 14 / 6, rel=1e-6), r["formula"]

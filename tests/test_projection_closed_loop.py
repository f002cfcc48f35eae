"""Closed loops on published data (issue #7): SPEC CPU2017 FP rate compute, IB vs RoCE communication.

The numbers pinned are the bench results (bench/projection_closed_loop.py, bench/projection_comm.py)
with room for the random pair sample; they fail if the surrogate stops beating the naive
geometric-mean baseline (the default factor-model method: tests/test_projection_factor.py) or the communication projection stops beating "time unchanged".
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from perfcast.projection.closed_loop import closed_loop, random_pairs
from perfcast.projection.database import load_spec
from perfcast.projection.signatures import GROUPS, load_navarro

from conftest import DATA  # ../shared/data or $PERFCAST_SHARED_DATA
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def spec():
    db = load_spec(DATA / "spec" / "spec17ml_input_FP_rate.csv")
    sigs = load_navarro(DATA / "spec" / "counters")
    return db, sigs


def test_baseline_reproduces_the_published_figure(spec):
    db, sigs = spec
    pairs = random_pairs(db, list(sigs), 400, seed=7)
    r = closed_loop(db, sigs, list(GROUPS), pairs, target_aware=False, method="surrogate")
    s = r.summary()
    # the issue: the geometric-mean baseline is about 22 % mean, 17 % median over random pairs
    assert 0.18 < s["baseline"]["mean"] < 0.26
    assert 0.13 < s["baseline"]["median"] < 0.20
    # surrogates (all groups): bench gives 19.8 % mean / 11.5 % median vs 21.9 / 16.3
    assert s["method"]["mean"] < s["baseline"]["mean"]
    assert s["method"]["median"] < 0.85 * s["baseline"]["median"]
    # where the signature finds a close match the gain is large (this sample: fotonik3d 7.3 % vs 23.5 %,
    # nab 12.0 % vs 24.3 %, namd 9.9 % vs 17.2 %); bwaves, parest, povray, wrf are worse than the baseline
    per = s["per_benchmark"]
    for b in ("549.fotonik3d_r", "544.nab_r", "508.namd_r"):
        assert per[b]["method"] < 0.75 * per[b]["baseline"], b


def test_target_aware_ranking(spec):
    db, sigs = spec
    pairs = random_pairs(db, list(sigs), 30, seed=11)
    s = closed_loop(db, sigs, list(GROUPS), pairs, target_aware=True, method="surrogate").summary()
    # bench (300 pairs): 18.1 % mean, 11.1 % median vs baseline 21.9 / 16.3
    assert s["method"]["mean"] < s["baseline"]["mean"]
    assert s["method"]["median"] < 0.85 * s["baseline"]["median"]


def test_communication_ib_vs_roce():
    spec_ = importlib.util.spec_from_file_location("projection_comm", ROOT / "bench" / "projection_comm.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    res = mod.run()["summary"]
    # bench: p2p 8.2 % (unchanged time 118 %), collectives 7.8 % (unchanged 33.5 %)
    assert res["p2p_mean_error"] < 0.13
    assert res["collective_mean_error"] < 0.11
    assert res["p2p_mean_error"] < 0.2 * res["p2p_unchanged_error"]
    assert res["collective_mean_error"] < 0.4 * res["collective_unchanged_error"]

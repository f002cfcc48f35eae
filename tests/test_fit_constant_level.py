"""The constant hypothesis's value is the mean of all repetitions (perfcast.fit.core._constant_level).

Under relative noise a constant's weights are its own value's, the same at every point: the least
squares estimate is the plain mean.  Weights from the observed means pull it toward the points that
came out low.  Ground truth here: hand-calculated means of the data the tests generate."""

import numpy as np
import pytest

import perfcast
from perfcast import io
from perfcast.fit import fit_series

from conftest import write_reps_file


def test_lulesh_max_rank_times_give_their_mean():
    # LULESH's slowest rank's time of main at jobsize 27, 64, 125, 216 (one run each,
    # ../shared/data/thicket/lulesh_weak_scaling_cali): no trend, so a constant; its value is the
    # mean, 50.369061 -- Extra-P 4.2.5 models the same four values as that constant too
    values = [47.248547, 55.128451, 56.252457, 42.846789]
    m = fit_series([27, 64, 125, 216], values, "jobsize")
    assert not m.terms
    assert abs(float(m.predict(343.0)) - sum(values) / 4) < 1e-9 * 50
    # and its quality describes that constant: SMAPE and residual sum of squares by hand
    c = np.mean(values)
    y = np.array(values)
    assert m.quality.smape == pytest.approx(100 * np.mean(2 * np.abs(c - y) / (np.abs(c) + np.abs(y))), rel=1e-9)
    assert m.quality.rss == pytest.approx(np.sum((y - c) ** 2), rel=1e-9)




def test_single_runs_of_constants_unbiased(tmp_path):
    rng = np.random.default_rng(11)
    x = np.array([27.0, 64.0, 125.0, 216.0])
    S = 1000
    # uniform noise of +-25% (standard deviation 0.25 / sqrt(3) = 14.4%): no value can fall below
    # half its neighbours, so no mean is a dip (which keeps a lifted noise scale: noise_scale)
    reps = 50.0 * (1 + rng.uniform(-0.25, 0.25, (S, len(x), 1)))
    ms = perfcast.model(io.load([write_reps_file(tmp_path / "c.txt", x, reps)]))
    got = {r["callpath"]: r["value"] for r in ms.predict([{"p": 343.0}], 0.9)
           if not ms[(r["callpath"], r["metric"])].terms}
    assert len(got) > S // 2          # most of them are modelled as the constant they are
    means = reps.mean(axis=(1, 2))
    err = [got[f"r{s}"] / means[s] - 1 for s in range(S) if f"r{s}" in got]
    assert max(abs(e) for e in err) < 1e-12
    # and so, over the series, no bias: the mean of the values is within 3 standard errors of 50
    # (the observed means' weights gave -1.6% here, 3 standard errors being 0.72%)
    vals = np.array(list(got.values()))
    assert abs(vals.mean() / 50.0 - 1) < 3 * (0.25 / np.sqrt(3)) / np.sqrt(len(x) * len(vals))


def test_repetitions_weigh_by_their_count(tmp_path):
    rng = np.random.default_rng(5)
    x = np.array([2.0, 4.0, 8.0, 16.0, 32.0])
    S = 60
    reps = 7.0 * (1 + rng.normal(0, 0.05, (S, len(x), 3)))
    ms = perfcast.model(io.load([write_reps_file(tmp_path / "c.txt", x, reps)]))
    n = 0
    for r in ms.predict([{"p": 343.0}], 0.9):
        if ms[(r["callpath"], r["metric"])].terms:
            continue
        s = int(r["callpath"][1:])
        assert abs(r["value"] / reps[s].mean() - 1) < 1e-12
        n += 1
    assert n > S // 2


def test_zeros_next_to_zeros_do_not_pin_a_constant():
    # CloverLeaf's "Tile Halo Exchange" timer (tests/data/cloverleaf/cl.perfcast), printed with 4
    # decimals: 0 or 0.0001 s in every run, 0 in every repetition at 4 of the 12 points, whose
    # neighbours are 0 too (no dip).  Those zeros kept the floor's weight (a million times the
    # others') and the constant came out 2.367e-10 s, not their mean.  Truth: the mean of all
    # repetitions, read with pandas from the store.
    import pandas as pd
    from pathlib import Path
    from perfcast.experiment import Experiment

    df = pd.read_parquet(Path(__file__).parent / "data" / "cloverleaf" / "cl.perfcast" / "values.parquet")
    d = df[df.callpath.astype(str) == "app->Tile_Halo_Exchange"][["p", "n", "rep", "value"]]
    means = d.groupby(["p", "n"])["value"].mean()
    assert (means == 0).sum() == 4 and d["value"].isin([0.0, 1e-4]).all()
    exp = Experiment.from_pandas(d.assign(callpath="T", metric="time"), parameters=["p", "n"])
    m = perfcast.model(exp)[("T", "time")]
    assert not m.terms
    assert float(m.predict({"p": 8.0, "n": 1024.0})) == pytest.approx(d["value"].mean(), rel=1e-6)
    # and its interval at a measured point is that of values in {0, 0.0001}: it holds them, within
    # 3 standard deviations of the repetitions above their mean (was [0, 0.0303]: the floor's
    # weight made the residuals' noise 43000%)
    (row,) = perfcast.model(exp).predict([{"p": 1.0, "n": 256.0}])
    assert d["value"].max() <= row["upper"] <= d["value"].mean() + 3 * d["value"].std()

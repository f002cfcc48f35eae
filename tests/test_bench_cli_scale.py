"""The pure helpers of bench/cli_scale.py (no timing): growth exponent, size parsing, generated files."""

import math

import numpy as np

from perfcast.io import load

from conftest import bench_module

cs = bench_module("cli_scale", "cli_scale.py")


def test_growth_exponent_by_hand():
    assert math.isclose(cs.growth_exponent(1000, 2.0, 10_000, 20.0), 1.0)       # 10x size, 10x time
    assert math.isclose(cs.growth_exponent(1000, 1.0, 10_000, 100.0), 2.0)      # 10x size, 100x time
    assert math.isclose(cs.growth_exponent(10_000, 4.0, 1_000_000, 4.0), 0.0)
    assert math.isclose(cs.growth_exponent(1e4, 3.0, 4e4, 6.0), 0.5)             # 4x size, 2x time
    assert math.isnan(cs.growth_exponent(1000, 0.0, 2000, 1.0))


def test_parse_sizes():
    assert cs.parse_sizes("1000,10k,1M,200MB") == [1000, 10_000, 1_000_000, "200MB"]


def test_generated_file_sizes_and_noise(tmp_path):
    for nparam, npts in ((1, 6), (2, 25)):
        path = tmp_path / f"x{nparam}.txt"
        cs.write_experiment(path, nparam, 37)
        exp = load([path])
        d = exp.data
        assert d["callpath"].nunique() == 37
        assert len(exp.parameters) == nparam
        assert len(d) == 37 * npts * 5
        g = d.groupby(["callpath"] + list(exp.parameters), observed=True)["value"]
        assert (g.size() == 5).all()
        # 5% band noise around the truth: max/min of one point at most 1.025/0.975
        assert (g.max() / g.min()).max() <= 1.025 / 0.975 * (1 + 1e-5)
        assert (d["value"] > 0).all()
    # truths: c0 in [1, 1000], the term's share at the largest point in [0.1, 0.95]:
    # value at the largest point / c0 = 1 / (1 - share) in [1/0.9, 20]
    rng = np.random.default_rng(0)
    f = cs.truth_values(rng, 1, 2000)
    assert f.shape == (2000, 6) and (np.diff(f, axis=1) >= 0).all()
    f2 = cs.truth_values(rng, 2, 500)
    assert f2.shape == (500, 25) and (f2 > 0).all()


def test_median_run_picks_the_middle_run_and_keeps_every_value():
    runs = [{"wall_s": 0.9, "cpu_s": 1}, {"wall_s": 0.7, "cpu_s": 2}, {"wall_s": 0.8, "cpu_s": 3}]
    m = cs.median_run(runs, "wall_s")
    assert m["wall_s"] == 0.8 and m["cpu_s"] == 3        # the run's own other figures
    assert m["wall_s_runs"] == [0.9, 0.7, 0.8]
    even = cs.median_run(runs + [{"wall_s": 0.1, "cpu_s": 4}], "wall_s")
    assert even["wall_s"] == 0.7                          # the lower middle of 0.1 0.7 0.8 0.9
    assert cs.median_run(runs[:1], "wall_s")["wall_s"] == 0.9

"""fit.series statistics against a hand calculation: groups numbered by first appearance, mean,
count and sum of squared deviations per (point, callpath, metric)."""

from __future__ import annotations

import pandas as pd
import pytest

from perfcast.experiment import Experiment, Metric
from perfcast.fit.series import _factorize_rows, _statistics, series_statistics


def _exp():
    rows = [  # p, n, rep, callpath, metric, value
        (8, 1, 0, "main->b", "time", 4.0), (4, 1, 0, "main", "time", 1.0), (4, 1, 1, "main", "time", 3.0),
        (8, 1, 1, "main->b", "time", 6.0), (4, 2, 0, "main", "time", 5.0), (4, 1, 0, "main", "visits", 7.0),
        (8, 1, 2, "main->b", "time", 8.0), (4, 1, 2, "main", "time", 2.0),
    ]
    df = pd.DataFrame(rows, columns=["p", "n", "rep", "callpath", "metric", "value"])
    return Experiment(["p", "n"], df, [Metric("time", kind="time"), Metric("visits", kind="count")])


def test_statistics_by_hand():
    st, row_of, rep_of, values = _statistics(_exp(), "auto")
    st = st.to_pandas()     # the statistics' columns (perfcast.table.Columns) as a frame
    got = [(r.p, r.n, r.callpath, r.metric, r.mean, r.count, r.ssd) for r in st.itertuples()]
    assert got == [
        (8.0, 1.0, "main->b", "time", 6.0, 3, 8.0),           # 4, 6, 8: mean 6, ssd 4+0+4
        (4.0, 1.0, "main", "time", 2.0, 3, 2.0),              # 1, 3, 2: mean 2, ssd 1+1+0
        (4.0, 2.0, "main", "time", 5.0, 1, 0.0),
        (4.0, 1.0, "main", "visits", 7.0, 1, 0.0),
    ]
    assert row_of.tolist() == [0, 1, 1, 0, 2, 3, 0, 1]
    assert rep_of.tolist() == [0, 0, 1, 1, 0, 0, 2, 2]
    assert values.tolist() == [4.0, 1.0, 3.0, 6.0, 5.0, 7.0, 8.0, 2.0]
    assert series_statistics(_exp()).equals(st)


def test_factorize_rows_first_appearance():
    df = pd.DataFrame({"a": [2.0, 1.0, 2.0, 1.0, 2.0], "c": pd.Categorical(["x", "y", "x", "x", "y"])})
    ids, first = _factorize_rows(df, ["a", "c"])
    assert ids.tolist() == [0, 1, 0, 2, 3] and first.tolist() == [0, 1, 3, 4]
    ids, first = _factorize_rows(df, [])
    assert ids.tolist() == [0] * 5 and first.tolist() == [0]


def test_per_rank_values_are_reduced_first():
    df = pd.DataFrame({"p": [2.0] * 4, "rep": [0, 0, 1, 1], "rank": [0, 1, 0, 1], "callpath": ["main"] * 4,
                       "metric": ["visits"] * 4, "value": [1.0, 2.0, 5.0, 6.0]})
    st = series_statistics(Experiment(["p"], df, [Metric("visits", kind="count")]))
    # counts summed over ranks: 3 and 11, mean 7, ssd 16 + 16
    assert st[["mean", "count", "ssd"]].to_numpy().tolist() == [pytest.approx([7.0, 2, 32.0])]


def test_progress_counts_every_series_once_over_the_option_parts():
    """Metrics fitted under different options (a time: non-negative; an "other" kind: not) are
    fitted apart; the progress runs over all series of both parts: 3 callpaths x 2 metrics."""
    from perfcast.fit.series import model_experiment

    rows = [(p, r, cp, mt, float(p) * (1 + i) + 0.1 * r)
            for p in (2, 4, 8, 16) for r in range(2) for i, cp in enumerate(("main", "main->a", "main->b"))
            for mt in ("time", "ratio")]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value"])
    exp = Experiment(["p"], df, [Metric("time", kind="time"), Metric("ratio", kind="other")])
    seen = []
    res = model_experiment(exp, progress=lambda done, total: seen.append((done, total)))
    assert len(res) == 6
    assert seen[-1] == (6, 6)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_statistics_of_a_readers_order_by_hand():
    """Rows of each (point, callpath, metric) together, as a reader writes them (groups of 3, 1
    and 2 values): numbered in order, repetitions counted from each group's first row."""
    rows = [(4, 0, "main", "time", 1.0), (4, 1, "main", "time", 3.0), (4, 2, "main", "time", 2.0),
            (8, 0, "main", "time", 5.0), (4, 0, "main->b", "time", 4.0), (4, 1, "main->b", "time", 8.0)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value"])
    # each callpath's own value list (as Extra-P text lists them): not runs that lacked main->b
    exp = Experiment(["p"], df, [Metric("time", kind="time")], meta={"repetitions": "listed"})
    st, row_of, rep_of, values = _statistics(exp, "auto")
    st = st.to_pandas()
    got = [(r.p, r.callpath, r.mean, r.count, r.ssd) for r in st.itertuples()]
    assert got == [(4.0, "main", 2.0, 3, 2.0), (8.0, "main", 5.0, 1, 0.0), (4.0, "main->b", 6.0, 2, 8.0)]
    assert row_of.tolist() == [0, 0, 0, 1, 2, 2]
    assert rep_of.tolist() == [0, 1, 2, 0, 0, 1]


@pytest.mark.parametrize("equal", [True, False])
def test_run_moments_are_pandas_groupby_bit_for_bit(equal):
    """The runs' mean, count and variance in numpy (fit.series._run_moments) against pandas'
    groupby of the same values (the peer computation the statistics used before): the same bits,
    over magnitudes from 1e-300 to 1e300, zeros, -0.0 and infinities, runs of equal and of
    different lengths."""
    import numpy as np

    from perfcast.fit.series import _run_moments

    rng = np.random.default_rng(7)
    G = 20000
    sizes = np.full(G, 5) if equal else rng.integers(1, 12, G)
    n = int(sizes.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    scale = 10.0 ** rng.uniform(-300, 300, G)
    v = np.repeat(scale, sizes) * (1 + rng.uniform(-0.5, 0.5, n)) * (rng.random(n) < 0.97)
    v[rng.integers(0, n, 5)] = np.inf
    v[rng.integers(0, n, 5)] = -0.0
    v[rng.integers(0, n, 3)] = -np.inf
    grouped = pd.Series(v).groupby(np.repeat(np.arange(G), sizes), sort=True)
    with np.errstate(all="ignore"):
        mean, count, var = _run_moments(v, starts)
        want = (grouped.mean().to_numpy(), grouped.count().to_numpy(), grouped.var(ddof=0).to_numpy())
    for got, ref in zip((mean, count, var), want):
        assert got.dtype == ref.dtype and got.tobytes() == ref.tobytes()


def test_run_moments_decline_nan_and_long_runs():
    """A NaN (pandas skips it: other sums; an Experiment holds none, but the function is general)
    or a run longer than RUN_STEPS: None, left to pandas."""
    import numpy as np

    from perfcast.fit.series import RUN_STEPS, _run_moments

    assert _run_moments(np.array([1.0, np.nan, 3.0]), np.array([0, 2])) is None
    assert _run_moments(np.ones(RUN_STEPS + 1), np.array([0])) is None
    mean, count, var = _run_moments(np.arange(RUN_STEPS, dtype=float), np.array([0]))
    # 0..63: mean 31.5, variance (64^2 - 1) / 12
    assert mean.tolist() == [31.5] and count.tolist() == [RUN_STEPS] and var.tolist() == [(64 ** 2 - 1) / 12]

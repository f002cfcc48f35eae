"""The shared scaling rules (perfcast.scaling) and the one way to find the shared data."""

import math
from pathlib import Path

import numpy as np
import pytest

from perfcast.scaling import format_exponent, loglog_slope
from perfcast.shared_data import ENV_VAR, shared_data_dir


@pytest.mark.parametrize("value", [1e-30, 3.0, 0.1, 7e12, 123456.789, 0.30000000000000004])
def test_constant_series_has_slope_exactly_zero(value):
    # np.polyfit returns about -6e-16 here on some BLAS builds (printed as p^-0.00)
    xs = [1, 2, 3, 4, 6, 8, 9, 16, 27, 64, 125, 216, 343]
    assert loglog_slope(xs, [value] * len(xs)) == 0.0


def test_power_laws_recovered():
    xs = np.array([2.0, 4, 8, 16, 32, 64])
    for b in (-1.0, -0.5, 0.25, 1.0, 2.0, 3.5):
        assert loglog_slope(xs, 7.5 * xs ** b) == pytest.approx(b, abs=1e-12)
    # two points: the slope through them, by hand: log(40 / 10) / log(8 / 2) = 1
    assert loglog_slope([2, 8], [10, 40]) == pytest.approx(1.0, abs=1e-15)
    # noisy: least squares on log scales, by hand for three points (x = 1, e, e^2; log y = 0, 1, 3)
    assert loglog_slope([1, math.e, math.e ** 2], [1, math.e, math.e ** 3]) == pytest.approx(1.5, abs=1e-12)


def test_points_that_cannot_be_logged_are_left_out():
    assert loglog_slope([1, 2, 4, 8], [0, 2, 4, float("nan")]) == pytest.approx(1.0, abs=1e-12)
    assert math.isnan(loglog_slope([1, 2], [0, 5]))            # one usable point
    assert math.isnan(loglog_slope([4, 4, 4], [1, 2, 3]))      # one distinct x
    with pytest.raises(ValueError):
        loglog_slope([1, 2, 3], [1, 2])


@pytest.mark.parametrize("e, digits, shown", [(-6e-16, 2, "0.00"), (-0.004, 2, "0.00"), (-0.0, 2, "0.00"),
                                              (0.004, 2, "0.00"), (-0.005001, 2, "-0.01"), (-0.5, 2, "-0.50"),
                                              (1.0, 2, "1.00"), (-1e-9, 3, "0.000"), (2.345, 1, "2.3")])
def test_exponent_never_prints_negative_zero(e, digits, shown):
    assert format_exponent(e, digits) == shown


def test_shared_data_found_by_one_rule_wherever_started(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    here = shared_data_dir()
    monkeypatch.chdir(tmp_path)                  # the working directory plays no part
    assert shared_data_dir() == here
    import perfcast

    checkout = Path(perfcast.__file__).resolve().parents[2]
    assert here == (checkout.parent / "shared" / "data").resolve()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "elsewhere"))
    assert shared_data_dir() == (tmp_path / "elsewhere").resolve()
    from perfcast.projection.project import data_root

    assert data_root() == (tmp_path / "elsewhere").resolve()


def test_scaling_mode_from_the_total_work_by_hand():
    import math

    from perfcast.scaling import scaling_mode

    def slope(first, last, p, q):  # total work = time per rank x ranks, log-log against p
        return math.log(last * q / (first * p)) / math.log(q / p)

    # p = 1 -> 2, 10 s per rank -> 7.5 s: the cost per rank falls (weak scaling never does): strong
    assert scaling_mode(slope(10, 7.5, 1, 2), 2, False)[0] == "strong"
    assert scaling_mode(slope(10, 5, 1, 2), 2, False)[0] == "strong"
    # 10 s -> 9.9 s: weak, or strong at 10 / (2 x 9.9) = 51% efficiency: the two runs cannot tell
    assert scaling_mode(slope(10, 9.9, 1, 2), 2, False)[0] == "undetermined"
    # ... unless the cost counts instructions (no waiting in it): the same work per rank
    assert scaling_mode(slope(10, 9.9, 1, 2), 2, True)[0] == "weak"
    # 10 s -> 10.5 s at twice the ranks: strong would be 10 / 21 = 48% < 50% efficient: weak
    assert scaling_mode(slope(10, 10.5, 1, 2), 2, False)[0] == "weak"
    # a constant time per rank from p = 1 to 16: strong would mean 1/16 efficiency: weak
    assert scaling_mode(slope(10, 10, 1, 16), 16, False)[0] == "weak"


def test_row_nanmedian_is_numpys():
    # ground truth: numpy's nanmedian row by row; rows of 1-6 values with NaNs (none all-NaN, as
    # `decreasing` passes them), odd and even counts, ties, infinities
    import numpy as np

    from perfcast.scaling import row_nanmedian

    rng = np.random.default_rng(3)
    for k in range(1, 7):
        a = rng.standard_normal((5000, k)) * 10.0 ** rng.integers(-3, 4, (5000, k))
        a[rng.random(a.shape) < 0.3] = np.nan
        a[np.isnan(a).all(axis=1), 0] = 1.5
        a[:50] = np.round(a[:50])
        a[50, 0] = np.inf
        want = np.array([np.nanmedian(row) for row in a])
        assert np.array_equal(row_nanmedian(a), want)
    assert row_nanmedian(np.array([[1.0, 2.0], [3.0, np.nan], [0.1, 0.2]])).tolist() == [1.5, 3.0, (0.1 + 0.2) / 2]

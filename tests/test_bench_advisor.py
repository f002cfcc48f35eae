"""bench/advisor.py's budgeted simulation (--budgeted): a fixed grid within a budget and the
advisor's campaign within one, against costs computed by hand from the oracle's generating formula."""

import numpy as np
import pytest

from conftest import bench_module

ba = bench_module("bench_advisor", "advisor.py")


def _hand_cost(p):
    """linear-compute: whole run 0.5 + (8 + 0.001 p) + 0.1 sqrt(p) seconds on p processes."""
    return (0.5 + 8 + 0.001 * p + 0.1 * np.sqrt(p)) * p / 3600


def test_fixed_grid_within_a_budget_skips_what_no_longer_fits():
    """The extend grid after the start (p = 2..32 twice): 64, 128, 256, 512 once, then the missing
    repetitions largest first.  A budget of the start + 64 + 128 + 256 + 64 again (by hand) cannot
    pay 512 nor a second 256 or 128, but a second 64 still fits: runs 64, 128, 256, 64."""
    o = ba.ORACLES["linear-compute"]()
    start = sum(_hand_cost(pt[0]) for pt in o.start)
    assert sum(o.cost(pt) for pt in o.start) == pytest.approx(start, rel=1e-12)
    limit = start + _hand_cost(64) * 2 + _hand_cost(128) + _hand_cost(256) + 1e-9
    runs, spent = ba.affordable(o, list(o.start) + ba.fixed(o, "extend"), limit)
    assert runs[len(o.start):] == [(64,), (128,), (256,), (64,)]
    assert spent == pytest.approx(limit - 1e-9, rel=1e-12)
    # the prefix rule of the default scoring stops at the first run that does not fit
    pre, _ = ba.prefix(o, list(o.start) + ba.fixed(o, "extend"), limit)
    assert pre[len(o.start):] == [(64,), (128,), (256,)]


def test_advise_campaign_stays_within_its_budget(tmp_path):
    """The advisor's campaign at 30% of the full grid's cost spends at most that (the oracle's own
    cost of each run, the generating formula's time x p), and the full grid costs the hand sum."""
    o = ba.ORACLES["linear-compute"]()
    full = sum(2 * _hand_cost(p) for p in ba.PS)
    assert sum(o.cost(pt) for pt in o.full()) == pytest.approx(full, rel=1e-12)
    cache: dict = {}
    runs = ba.strategy_advise(o, 0, tmp_path, 0.3 * full, [], cache)
    assert runs[:len(o.start)] == o.start and len(runs) > len(o.start)
    assert sum(_hand_cost(pt[0]) for pt in runs) <= 0.3 * full * (1 + 1e-9)
    # with the full grid's cost as budget the campaign buys more (where 30% could not pay its next
    # choice it took a cheaper one instead), still within that budget
    more = ba.strategy_advise(o, 0, tmp_path, full, [], {})
    assert len(more) > len(runs) and sum(_hand_cost(pt[0]) for pt in more) <= full * (1 + 1e-9)


def test_until_stops_rule_by_hand():
    """bench/until_stops.py: a campaign stops at the first step whose width and the k - 1 before it
    are within --until (hand-made widths)."""
    us = bench_module("bench_until_stops", "until_stops.py")
    steps = [{"width": w} for w in (0.9, 0.2, 0.6, 0.25, 0.1, 0.3, 0.2, 0.1)]
    assert us.stop_at(steps, 0.3, 1) is steps[1]
    assert us.stop_at(steps, 0.3, 2) is steps[4]
    assert us.stop_at(steps, 0.3, 3) is steps[5]
    assert us.stop_at(steps, 0.05, 1) is None
    assert us.stop_at(steps, 0.25, 3) is None          # 0.25, 0.1 then 0.3 breaks the run


def test_adaptive_jumps_by_hand():
    """bench/adaptive_jumps.py: width jumps (>= 2x or <= 1/2 the previous finite width), coverage over
    the steps with an interval and the runs each step added, counted by hand on made-up campaigns."""
    aj = bench_module("bench_adaptive_jumps", "adaptive_jumps.py")
    inf = float("inf")

    def step(w, inside, err, at=None):
        return {"width": w, "inside": inside, "error": err, "at": at}

    traj = {"o/0": [step(1.0, True, 0.1), step(2.5, False, 0.2, [512.0]), step(1.0, True, 0.05, [64.0]),
                    step(1.1, True, 0.04, [512.0])],
            "o/1": [step(0.5, True, 0.3), step(inf, None, None, [64.0]), step(0.2, False, 0.02, [512.0])]}
    r = aj.summary(traj)["o"]
    # pairs with both widths finite: 1->2.5 (jump), 2.5->1 (jump), 1->1.1; the inf breaks o/1's pairs
    assert r["jumps_2x"] == pytest.approx(2 / 3)
    assert r["coverage"] == pytest.approx(4 / 6)
    assert r["last_error"] == pytest.approx((0.04 + 0.02) / 2)     # median of two
    assert r["runs"] == 5 and r["at_largest_seen"] == pytest.approx(3 / 5)
    assert r["by_value"] == {"64": 2, "512": 3}

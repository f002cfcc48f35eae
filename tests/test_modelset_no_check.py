"""perfcast.model(..., intervals=False): the fit without its leave-largest-out check (whose only
product is the drift of the intervals) gives the same models; `perfcast model` (the table) and
`perfcast check` use it, and print exactly what the fit with the check prints; the set refuses
intervals and model records."""

import numpy as np
import pytest

from perfcast.errors import PerfcastError

from conftest import write_reps_file

X = np.array([4.0, 8, 16, 32, 64, 128])


@pytest.fixture
def exp_file(tmp_path):
    """300 series ``a + b p^e + c p^2.5`` (c = 0 for half of them: one term fits those, the others
    need two, so a one-term model misses the held-out largest point and the check gives drift), 5
    repetitions with +-2.5% noise."""
    rng = np.random.default_rng(11)
    S = 300
    e = rng.choice([0.5, 1.0, 1.5], S)
    c = np.where(np.arange(S) % 2 == 0, 0.0, rng.uniform(1e-4, 1e-3, S))
    mu = rng.uniform(1, 10, S)[:, None] + rng.uniform(0.01, 1, S)[:, None] * X ** e[:, None] + c[:, None] * X ** 2.5
    reps = mu[:, :, None] * (1 + rng.uniform(-0.025, 0.025, (S, len(X), 5)))
    return write_reps_file(tmp_path / "exp.txt", X, reps)


def test_same_models_without_the_check(exp_file):
    import perfcast
    from perfcast.fit import columns

    exp = perfcast.io.load([exp_file])
    full = perfcast.model(exp)
    fast = perfcast.model(exp, intervals=False)
    a, b = list(full.series), list(fast.series)
    assert [(s.callpath, s.metric) for s in a] == [(s.callpath, s.metric) for s in b]
    assert columns.formulas(a) == columns.formulas(b)
    ga, gb = columns.split(a)[0][0][0], columns.split(b)[0][0][0]
    for f in ("hyp", "coef", "cov", "noise", "dof", "weight", "quality", "status"):
        assert np.array_equal(getattr(ga, f), getattr(gb, f), equal_nan=True), f
    # the check matters: it gives drift to some series; without it the drift is unknown (NaN), so a
    # model taken from the set makes no interval rather than one that leaves the drift out
    assert (ga.drift > 0).any() and np.isnan(gb.drift).all()
    m = fast[b[1].callpath, b[1].metric]
    lo, hi = m.interval({"p": 1024.0})
    assert np.isnan(lo) and np.isnan(hi)
    lo, hi = full[a[1].callpath, a[1].metric].interval({"p": 1024.0})
    assert lo < full[a[1].callpath, a[1].metric].predict({"p": 1024.0}) < hi
    # the ranking (every field but the model object, whose drift differs) and its notes
    ra, rb = full.rank_head({"p": 1024.0}, "cost", 0), fast.rank_head({"p": 1024.0}, "cost", 0)
    strip = lambda rows: [(r.rank, r.callpath, r.predicted, r.increase, r.significant, r.model.formula())  # noqa: E731
                          for r in rows]
    assert strip(ra[0]) == strip(rb[0]) and ra[1:] == rb[1:]
    for refused in (lambda: fast.predict({"p": 1024.0}), lambda: "".join(fast.json_chunks()),
                    lambda: fast.to_dict()):
        with pytest.raises(PerfcastError, match="leave-largest-out"):
            refused()


def test_table_and_check_print_what_the_checked_fit_prints(exp_file, capsys, monkeypatch):
    import perfcast.modelset as modelset
    from perfcast.cli import main

    runs = [["model", str(exp_file), "--limit", "0"], ["model", str(exp_file), "--target", "p=1024"],
            ["check", str(exp_file), "--expect", "*: O(p)"], ["check", str(exp_file), "--expect", "*: O(p)", "--json"]]
    seen = []
    real = modelset.model

    def spy(*a, intervals=True, **k):
        seen.append(intervals)
        return real(*a, intervals=force if force is not None else intervals, **k)

    monkeypatch.setattr(modelset, "model", spy)
    outs = {}
    for force in (None, True):
        for argv in runs:
            try:
                code = main(argv)
            except SystemExit as e:     # check: exit 1 on a violation
                code = e.code
            o = capsys.readouterr()
            outs.setdefault(tuple(argv), []).append((code, o.out, o.err))
    # the commands ask for no check, but the table at a target: it shows predict's intervals there
    assert seen[:len(runs)] == [False, True, False, False]
    for argv, (plain, checked) in outs.items():
        assert plain == checked, argv
    assert outs[tuple(runs[2])][0][0] == 1 and "of 300 check(s) failed" in outs[tuple(runs[2])][0][1]

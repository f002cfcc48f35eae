"""`predict` and `check` from the fit's arrays (fit.columns.predict, ModelSet.predict, the columnar
expectations check): every value and interval against the built Model's own predict/interval
computed one series at a time (an independent path: one model, its own arrays), the interval rule
against a hand computation, and the checks against lead orders worked out by hand."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import perfcast
from perfcast.experiment import Experiment
from perfcast.fit import columns
from perfcast.fit.model import Model, Term

from conftest import PMNF_LAWS, pmnf_law

PS = [4.0, 8.0, 16.0, 32.0, 64.0]
LAWS = PMNF_LAWS


def _noisy_laws(reps=4, noise=0.03, seed=3, copies=6):
    """Each law ``copies`` times with uniform relative noise: intervals with noise, coefficient
    uncertainty, competing hypotheses and drift; one series measured at a single point
    (insufficient)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, law in LAWS.items():
        for c in range(copies):
            for p in PS:
                for _ in range(reps):
                    rows.append({"p": p, "callpath": f"{name}{c}", "metric": "time",
                                 "value": pmnf_law(law, p) * (1 + rng.uniform(-noise, noise))})
    rows += [{"p": 4.0, "callpath": "one", "metric": "time", "value": v} for v in (42.0, 43.0)]
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p"])


def _stepped(S=5, seed=1):
    """Two parameters, a measured line p = 128 at 2.5 times the level of the formula (line factors)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(S):
        c = rng.uniform(0.5, 2.0)
        for p in (32.0, 64.0, 128.0, 256.0):
            for n in (5000.0, 6000.0, 7000.0, 8000.0):
                for _ in range(3):
                    v = c * 1e-6 * p * n * (2.5 if p == 128.0 else 1.0) * (1 + rng.uniform(-0.02, 0.02))
                    rows.append({"p": p, "n": n, "callpath": f"s{s}", "metric": "time", "value": v})
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"])


def _one_by_one(series, points, level, averaged):
    """Value, lower, upper of each series' built Model, one series and one point at a time."""
    S, P = len(series), len(points)
    v, lo, hi = np.full((S, P), np.nan), np.full((S, P), np.nan), np.full((S, P), np.nan)
    for s, sm in enumerate(series):
        m = sm._group.model(sm._row) if sm._model is None else sm._model     # not kept on the series
        for j, t in enumerate(points):
            v[s, j] = m.predict(t, averaged=averaged)
            lo[s, j], hi[s, j] = m.interval(t, level, averaged=averaged)
    return v, lo, hi


def _same(a, b):
    scale = np.nanmax(np.abs(b)) if np.isfinite(b).any() else 1.0
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("averaged", [False, True])
@pytest.mark.parametrize("which", ["noisy", "lines"])
def test_columnar_predict_is_the_models_own(averaged, which):
    """fit.columns.predict over pending series (and a mix of built and pending ones) gives what
    each built Model's predict and interval give, inside and beyond the data, on measured lines."""
    if which == "noisy":
        exp = _noisy_laws()
        points = [{"p": 16.0}, {"p": 64.0}, {"p": 256.0}, {"p": 4096.0}]
    else:
        exp = _stepped()
        points = [{"p": 128.0, "n": 9000.0}, {"p": 512.0, "n": 8000.0}, {"p": 64.0, "n": 6000.0},
                  {"p": 1024.0, "n": 20000.0}]
    ms = perfcast.model(exp, segmented=False)
    series = list(ms.series)
    assert all(sm._model is None for sm in series)
    if which == "lines":
        assert any(sm._group.lines is not None and sm._group.lines[sm._row] for sm in series)
    else:
        assert any(sm._group.status[sm._row] != 0 for sm in series)      # the insufficient one
        assert any((sm._group.weight[sm._row, 1:] >= 0.02).any() for sm in series)   # alternatives
    cols = {p: np.array([t[p] for t in points]) for p in exp.parameters}
    truth = _one_by_one(series, points, 0.8, averaged)
    inb, v, lo, hi = columns.predict(series, cols, 0.8, averaged)
    assert inb.all() and all(sm._model is None for sm in series)
    for got, want in zip((v, lo, hi), truth):
        _same(got, want)
    # some models built (their alternatives too), the others pending: the same floats
    for sm in series[::3]:
        m = sm.model
        list(m.alternatives)
    inb, v2, lo2, hi2 = columns.predict(series, cols, 0.8, averaged)
    assert inb.all()
    for got, want in zip((v2, lo2, hi2), (v, lo, hi)):
        _same(got, want)


def test_interval_by_hand():
    """10 + 2 p at p = 8 (26): variance = cov of (constant, coefficient) along (1, 8) + (noise x
    value)^2 = 0.04 + 64 x 0.01 + (0.05 x 26)^2; t quantile with 4 degrees of freedom.  Beyond the
    data (upper 4: one doubling) the drift adds (0.1 x 1^2 x 26)^2, with Welch-Satterthwaite degrees
    of freedom when it has its own (3)."""
    term = Term(2.0, (("p", Fraction(1), 0),))
    m = Model(("p",), 10.0, (term,), cov=((0.04, 0.0), (0.0, 0.01)), noise=0.05, dof=4)
    v = 0.04 + 64 * 0.01 + (0.05 * 26) ** 2
    half = stats.t.ppf(0.95, 4) * math.sqrt(v)
    assert m.predict({"p": 8.0}) == pytest.approx(26.0)
    assert m.interval({"p": 8.0}, 0.9) == pytest.approx((26 - half, 26 + half), rel=1e-12)
    md = Model(("p",), 10.0, (term,), cov=((0.04, 0.0), (0.0, 0.01)), noise=0.05, dof=4, drift=0.1,
               upper=(4.0,), growth=2.0, drift_dof=3)
    vd = (0.1 * 26) ** 2
    dof = (v + vd) ** 2 / (v ** 2 / 4 + vd ** 2 / 3)
    half = stats.t.ppf(0.95, dof) * math.sqrt(v + vd)
    assert md.interval({"p": 8.0}, 0.9) == pytest.approx((26 - half, 26 + half), rel=1e-12)


def test_predict_rows_without_building_models():
    """ModelSet.predict: values, clipped intervals, formulas, statuses and warnings of each row are
    its built model's, one series at a time; no model is built for them."""
    from perfcast.analysis.fitcheck import fit_warnings

    exp = _noisy_laws()
    ms = perfcast.model(exp, segmented=False)
    points = [{"p": 32.0}, {"p": 1024.0}]
    rows = ms.predict(points, 0.9)
    assert all(sm._model is None for sm in ms.series)
    assert len(rows) == 2 * len(ms.series)
    for k, r in enumerate(rows):
        sm = ms.series[k // 2]
        t = points[k % 2]
        m = sm._group.model(sm._row)
        assert (r["callpath"], r["metric"], r["at"]) == (sm.callpath, sm.metric, t)
        assert r["value"] == pytest.approx(m.predict(t), rel=1e-12)
        lo, hi = m.interval(t, 0.9)
        if math.isnan(lo):
            assert r["lower"] is None and r["upper"] is None and r["confidence"] == "low"
        elif lo < 0 and r["value"] >= 0:
            # a time's interval clipped at 0 (above 0 the model's own bound)
            assert r["clipped"] and r["lower"] == 0.0 and r["upper"] == pytest.approx(hi, rel=1e-12)
        else:
            assert not r["clipped"]
            assert (r["lower"], r["upper"]) == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
        # the formula printed with the digits its terms' cancellation needs (4 where they do not
        # cancel): evaluated as printed, it gives the value to 4 digits
        digits = int(ms.formula_digits([sm], None, points)[0])
        assert r["formula"] == m.formula(digits=digits) and r["status"] == m.status and r["segmented"] is False
        printed = eval(r["formula"].replace("^", "**"), {"log2": math.log2, "__builtins__": {}}, dict(t))
        assert printed == pytest.approx(r["value"], rel=5e-4, abs=1e-12)
        assert r["notes"][:len(fit_warnings(m))] == fit_warnings(m)
    assert {r["status"] for r in rows} == {"ok", "insufficient"}


def test_slope_notes_by_hand():
    """A prediction beyond the data rising faster than any measured step by more than one power
    of p is flagged: quad (3 + 2 p^2) grows like p^2 between 32 and 64 (slope log(8195/2051) /
    log 2 = 1.998...), a model forced one power steeper at the edge is flagged, the law is not."""
    exp = _noisy_laws(noise=0.0, reps=2, copies=1)
    ms = perfcast.model(exp, segmented=False)
    rows = {r["callpath"]: r for r in ms.predict({"p": 1024.0})}
    assert not any("beyond the data" in n for r in rows.values() for n in r["notes"])
    lo, hi = ms.slopes[("quad0", "time")]["p"]
    assert hi == pytest.approx(math.log(pmnf_law(LAWS["quad"], 64.0) / pmnf_law(LAWS["quad"], 32.0)) / math.log(2))
    # the same slopes against a steeper model: p^3.2 from the edge p = 64 to 1024 (slope 3.2),
    # for the model set's series (the slopes' arrays) and for one of them (the mapping)
    q = next(s for s, sm in enumerate(ms.series) if sm.callpath == "quad0")
    S = len(ms.series)
    value, base = np.full((S, 1), 2.0), np.full((S, 1), 1.0)    # slope 1/4 for the others
    value[q, 0], base[q, 0] = 64.0 ** 3.2 * 16 ** 3.2, 64.0 ** 3.2
    note = f"grows like p^3.2 beyond the data, faster than any measured step (p^{hi:.2g})"
    lines = [(("p",), ())] * S
    assert ms._beyond_measured_slopes(list(ms.series), lines, [{"p": 1024.0}], value, base) == [{q: note}]
    assert ms._beyond_measured_slopes([ms.series[q]], lines[:1], [{"p": 1024.0}], value[q:q + 1],
                                      base[q:q + 1]) == [{0: note}]
    # inside the data: no point beyond it in one parameter
    assert ms._beyond_measured_slopes(list(ms.series), lines, [{"p": 32.0}], value, base) == [None]


def test_slope_notes_say_the_direction_of_the_prediction():
    """A constant model past rising data read "falls like p^0 beyond the data, faster than any
    measured step (p^1.3)" (RAJAPerf's Basic_MAT_MAT_SHARED): it stays flat, and the measured steps
    rose.  The note now says the prediction's own direction, by hand from the slope log(v / v0) /
    log(t / edge) from the data's edge p = 64 to p = 1024 (a factor 16)."""
    exp = _noisy_laws(noise=0.0, reps=2, copies=1)
    ms = perfcast.model(exp, segmented=False)
    at = {"p": 1024.0}
    note = lambda measured, ratio: ms._slope_note("p", measured, at, ratio, 1.0)  # noqa: E731
    # flat (slope 0) past steps rising like p^1.3 .. p^2
    assert note((1.3, 2.0), 1.0) == "stays flat beyond the data, while every measured step rose (p^1.3 at the least)"
    # rising like p^0.25, more slowly than every measured step
    assert note((1.3, 2.0), 2.0) == "grows like p^0.25 beyond the data, more slowly than any measured step (p^1.3)"
    # falling like p^-0.5 past rising steps
    assert note((1.3, 2.0), 0.25) == "falls like p^-0.5 beyond the data, while every measured step rose (p^1.3 at the least)"
    # falling like p^-2.5 past steps falling like p^-1 .. p^-0.5: faster
    assert note((-1.0, -0.5), 16.0 ** -2.5) == "falls like p^-2.5 beyond the data, faster than any measured step (p^-1)"
    # falling like p^-0.25 (rather: flattening) past steps falling like p^-2.5 .. p^-1.5: more slowly
    assert note((-2.5, -1.5), 0.5) == "falls like p^-0.25 beyond the data, more slowly than any measured step (p^-1.5)"
    # rising like p^3.2 past steps up to p^2: faster (the note test_slope_notes_by_hand checks)
    assert note((1.0, 2.0), 16.0 ** 3.2) == "grows like p^3.2 beyond the data, faster than any measured step (p^2)"
    # within one power of the measured steps: no note
    assert note((1.0, 2.0), 16.0 ** 2.5) is None


def test_check_from_arrays_by_hand(tmp_path):
    """The expectations check on pending series: quad (p^2) and plogp (p log p) exceed O(p), the
    others do not; the violations' formulas are the models' own; no model is built."""
    from perfcast.analysis.expectations import check, parse_expectation

    exp = _noisy_laws(noise=0.0, reps=2, copies=1)
    ms = perfcast.model(exp, segmented=False)
    series = list(ms.series)
    res = check(series, [parse_expectation("*: O(p)", ["p"]), parse_expectation("quad*: O(p^2)", ["p"])])
    bad, checked = res.violations, res.checked
    # only the series that cannot be judged builds its model (for the reason it names)
    assert all(sm._model is None for sm in series if sm.callpath != "one")
    assert checked == len(LAWS) + 1                  # "one" is insufficient: not judged, listed
    assert [u.callpath for u in res.unchecked] == ["one"]
    found = {v.callpath: v for v in bad}
    assert set(found) == {"quad0", "plogp0"}
    assert found["quad0"].found == "O(p^2)" and found["plogp0"].found == "O(p log p)"
    assert found["quad0"].expected == "O(p)" and found["quad0"].parameters == ("p",)
    for v in bad:
        sm = next(s for s in series if s.callpath == v.callpath)
        assert v.formula == sm._group.model(sm._row).formula()


def test_a_parameter_measured_at_one_value_is_not_extrapolated_in_silence():
    """A campaign that held n at 100 says nothing of n = 200: every model is flat in n.  `predict
    --at p=64,n=200` gave p + 0.05 (the law of the data, by hand: p + 0.1 rep, mean over rep 0, 1)
    with high confidence and no word; `advise` refuses such a target.  The value stays the model's
    (the one at n = 100), with a note naming n and low confidence; at n = 100 nothing changes."""
    from perfcast.experiment import CallTree, Experiment, Metric

    rows = [(p, 100.0, r, "solve", "time", p + 0.1 * r) for p in (2, 4, 8, 16, 32) for r in (0, 1)]
    df = pd.DataFrame(rows, columns=["p", "n", "rep", "callpath", "metric", "value"])
    exp = Experiment(["p", "n"], df, [Metric("time", "s", "time")], CallTree.from_paths(["solve"]))
    ms = perfcast.model(exp)
    far, kept = ms.predict([{"p": 64.0, "n": 200.0}, {"p": 64.0, "n": 100.0}])
    assert far["value"] == pytest.approx(64.05, rel=1e-9) == kept["value"]
    assert far["confidence"] == "low"
    assert any(n.startswith("n=200: the experiment measured n at 100 only") for n in far["notes"])
    assert kept["confidence"] != "low" and not any("measured n at" in n for n in kept["notes"])


def test_a_series_measured_at_one_value_of_a_parameter_is_not_extrapolated_in_silence():
    """miniFE under the PMPI collector at p = 1, 2: MPI_Irecv (halo exchange) runs from p = 2 on,
    so its series holds p = 2 only and its model is flat in p.  `predict --at p=4,n=48` gave its
    p = 2 level with medium confidence and no note, though the experiment's other series vary p.
    Generating formulas (calls summed over ranks): MPI_Allreduce 2 n p at p = 1, 2, 4; MPI_Irecv
    3 n at p = 2 only.  At p = 8 the Irecv value stays the model's (the p = 2 line: 3 n), with a
    note and low confidence; at p = 2 nothing changes; Allreduce, measured along p, gets no note."""
    from perfcast.experiment import Metric

    ns = (16.0, 24.0, 32.0, 40.0, 48.0)
    rows = [{"p": p, "n": n, "callpath": "MPI->MPI_Allreduce", "metric": "calls", "value": 2.0 * n * p}
            for p in (1.0, 2.0, 4.0) for n in ns]
    rows += [{"p": 2.0, "n": n, "callpath": "MPI->MPI_Irecv", "metric": "calls", "value": 3.0 * n} for n in ns]
    exp = Experiment(["p", "n"], pd.DataFrame(rows), [Metric("calls", "#", "count", "inclusive")])
    ms = perfcast.model(exp)
    far, kept = (r for r in ms.predict([{"p": 8.0, "n": 48.0}, {"p": 2.0, "n": 64.0}])
                 if r["callpath"] == "MPI->MPI_Irecv")
    assert far["value"] == pytest.approx(3.0 * 48, rel=1e-6) and kept["value"] == pytest.approx(3.0 * 64, rel=1e-6)
    assert far["confidence"] == "low"
    # the profile is sparse: MPI_Irecv's absence at p = 1 is a 0 there (not called: no neighbour),
    # so the series holds p = 1 (0) and p = 2 and its model says it does not run at p = 1 and is
    # flat in p beyond p = 2, a guess (fit.core.not_running_first)
    assert any(n.startswith("2 values of p only (1, 2): does not run at p = 1") and "flat in p beyond it, a guess" in n
               for n in far["notes"])
    assert kept["confidence"] != "low" and not any("was measured at" in n for n in kept["notes"])
    other = next(r for r in ms.predict({"p": 8.0, "n": 48.0}) if r["callpath"] == "MPI->MPI_Allreduce")
    assert not any("was measured at" in n for n in other["notes"])


def test_a_prediction_beyond_a_parameter_no_line_follows_is_low_confidence():
    """p = 1 at n = 16, 24, 32 and p = 2 at n = 40, 48 (no pair of points that differ in p alone,
    so no law through two levels, tests/test_fit_two_levels.py): p has no line of 3 points, so every
    model is flat in p (the fit's note says so).  `predict --at p=4,n=48` gave MPI_Bcast's bytes (56
    at both p, exact) as [56, 56] with high confidence: nothing measured says how they change beyond
    p = 2.  Generating formula: 56 bytes at every point.  At p = 4 the value is the model's with a
    note and low confidence; at p = 2, n = 64 (within the measured p) nothing is added."""
    from perfcast.experiment import Metric

    rows = [{"p": p, "n": n, "callpath": "MPI->MPI_Bcast", "metric": "bytes_sent", "value": 56.0}
            for p, ns in ((1.0, (16.0, 24.0, 32.0)), (2.0, (40.0, 48.0))) for n in ns]
    exp = Experiment(["p", "n"], pd.DataFrame(rows), [Metric("bytes_sent", "bytes", "bytes", "inclusive")])
    ms = perfcast.model(exp)
    far, kept = ms.predict([{"p": 4.0, "n": 48.0}, {"p": 2.0, "n": 64.0}])
    assert far["value"] == pytest.approx(56.0) and kept["value"] == pytest.approx(56.0)
    assert any(n.startswith("parameter 'p': no line of >= 3 points") for n in far["notes"])
    assert far["confidence"] == "low"
    assert any(n.startswith("p=4: beyond the measured p (1 to 2)") for n in far["notes"])
    assert kept["confidence"] == "high" and not any("beyond the measured" in n for n in kept["notes"])


def test_a_prediction_beyond_two_measured_values_is_low_confidence_within_them_not():
    """miniFE at p = 1, 2 x n = 16..48: MPI_Bcast's bytes, 56 at every point (the generating
    formula).  The law along p goes through the two levels (exponent 0: flat); at p = 4 the value
    is 56 with the note that the law along p rests on two values and low confidence, at p = 2,
    n = 40 (measured) 56 without a doubt, and no note says that no model follows p."""
    from perfcast.experiment import Metric

    rows = [{"p": p, "n": n, "callpath": "MPI->MPI_Bcast", "metric": "bytes_sent", "value": 56.0}
            for p in (1.0, 2.0) for n in (16.0, 24.0, 32.0, 40.0, 48.0)]
    exp = Experiment(["p", "n"], pd.DataFrame(rows), [Metric("bytes_sent", "bytes", "bytes", "inclusive")])
    far, kept = perfcast.model(exp).predict([{"p": 4.0, "n": 48.0}, {"p": 2.0, "n": 40.0}])
    assert far["value"] == pytest.approx(56.0) and kept["value"] == pytest.approx(56.0)
    assert far["confidence"] == "low"
    assert any(n.startswith("p=4: beyond the measured p (1 to 2); the law along p rests on") for n in far["notes"])
    assert kept["confidence"] == "high" and not any("beyond the measured" in n for n in kept["notes"])
    assert not any("no model says" in n or "no line of" in n for r in (far, kept) for n in r["notes"])


def test_the_exponent_doubt_note_names_a_parameter_with_an_exponent():
    """3 x^2 exactly at x = 4, 8, 16 with y measured at 5 only: beyond the data in both, the law's
    exponent doubt is x's (3 values); y, measured at one value, has no exponent to doubt (the note
    once read 'an exponent fitted on 1 values of y')."""
    rows = [dict(x=x, y=5.0, rep=r, callpath="k", metric="Ir", value=3.0 * x * x)
            for x in (4.0, 8.0, 16.0) for r in range(2)]
    ms = perfcast.model(Experiment.from_pandas(pd.DataFrame(rows)))
    both, y_only = ms.predict([{"x": 32.0, "y": 50.0}, {"x": 16.0, "y": 50.0}])
    assert both["value"] == pytest.approx(3 * 32.0 ** 2)
    doubt = [n for n in both["notes"] if "doubt of an exponent" in n]
    assert len(doubt) == 1 and "fitted on 3 values of x" in doubt[0]
    assert not [n for n in y_only["notes"] if "doubt of an exponent" in n]
    assert any("measured y at 5 only" in n for n in y_only["notes"])

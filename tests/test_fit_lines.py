"""Line levels (perfcast.fit.lines): a measured line of a multi-parameter series whose level differs
from the fitted function carries its own level into predictions on it.  Checked against series
generated from known formulas (a step of one parameter's level, a smooth law, exact data) at fixed
seeds, through the user's path (perfcast.model, the CLI), and against the rule computed by hand
from the generated data and the printed function."""
import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.experiment import Experiment
from perfcast.fit.lines import line_effects, line_log_factors
from perfcast.fit.model import Model

from conftest import cli_items

P = [32.0, 64.0, 128.0, 256.0]
N = [5000.0, 6000.0, 7000.0, 8000.0]
STEP_P, STEP = 128.0, 2.5          # the generating formula's level of the line p = 128


def _truth(p, n, step=True):
    """The generating formula: 1e-6 * p * n, times STEP on the line p = STEP_P."""
    return 1e-6 * p * n * (STEP if step and p == STEP_P else 1.0)


def _experiment(S, noise, reps, step, seed, ps=P, ns=N, slow=None):
    """S series ``c * _truth`` on ``ps`` x ``ns``; ``slow`` = (p, n, repetition): that repetition
    is 10x the formula's (a slow run)."""
    rng = np.random.default_rng(seed)
    rows, scale = [], {}
    for s in range(S):
        c = scale[f"s{s}"] = rng.uniform(0.5, 2.0)
        for p in ps:
            for n in ns:
                for k in range(reps):
                    f = 10.0 if (p, n, k) == slow else 1.0
                    rows.append({"p": p, "n": n, "callpath": f"s{s}", "metric": "time",
                                 "value": f * c * _truth(p, n, step) * (1 + rng.uniform(-noise, noise))})
    return Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"]), scale


def test_a_stepped_line_keeps_its_level_beyond_the_data():
    exp, scale = _experiment(S=6, noise=0.02, reps=3, step=True, seed=1)
    ms = perfcast.model(exp, ["time"])
    errs, plain_errs = [], []
    for sm in ms.series:
        c = scale[sm.callpath]
        m = sm.model
        plain = dataclasses.replace(m, lines=())
        assert any(j == 1 and key == (STEP_P,) for j, key, _ in m.lines), m.lines
        for p in P:
            at = {"p": p, "n": 9000.0}
            truth = c * _truth(p, 9000.0)
            errs.append(abs(m.predict(at) - truth) / truth)
            plain_errs.append(abs(plain.predict(at) - truth) / truth)
            lo, hi = m.interval(at)
            assert lo <= truth <= hi
        at = {"p": STEP_P, "n": 9000.0}
        # the interval is the function's, scaled by the same factor as the value
        f = m.predict(at) / plain.predict(at)
        lo, hi = m.interval(at)
        plo, phi = plain.interval(at)
        assert lo == pytest.approx(f * plo) and hi == pytest.approx(f * phi)
    # the function alone cannot follow the step (its n-shape bends to it as well): 24-55% off at
    # n = 9000; with the lines' levels every prediction is within 15% and most within 5%
    assert min(plain_errs[2::4]) > 0.3 and np.median(plain_errs) > 0.25
    assert max(errs) < 0.15 and np.median(errs) < 0.05


def test_predict_rows_and_ranking_use_the_line_level():
    exp, _ = _experiment(S=2, noise=0.02, reps=3, step=True, seed=1)
    ms = perfcast.model(exp, ["time"])
    at = {"p": STEP_P, "n": 9000.0}
    rows = {r["callpath"]: r for r in ms.predict(at)}
    for r in ms.rank(at):
        assert r.predicted == pytest.approx(rows[r.callpath]["value"])
        assert rows[r.callpath]["value"] == pytest.approx(ms[(r.callpath, "time")].predict(at))


def test_a_smooth_law_is_left_alone():
    # 40 series of the formula without the step: the F test at 5% lets few lines through and the
    # shrinkage keeps those near the function
    exp, _ = _experiment(S=40, noise=0.02, reps=3, step=False, seed=2)
    ms = perfcast.model(exp, ["time"])
    with_lines = [sm.model for sm in ms.series if sm.model.lines]
    assert len(with_lines) <= 6
    for m in with_lines:
        assert max(abs(e) for _, _, e in m.lines) < 0.03


def test_exact_data_have_no_lines():
    exp, _ = _experiment(S=3, noise=0.0, reps=1, step=False, seed=3)
    ms = perfcast.model(exp, ["time"])
    for sm in ms.series:
        assert sm.model.lines == ()


def test_line_effects_by_hand():
    # two lines along n (p = 1, 2), two points each, residuals log(mean / fitted):
    # p=1: +0.1, +0.3 (mean 0.2), p=2: -0.1, +0.1 (mean 0)
    X = np.array([[1.0, 10.0], [1.0, 20.0], [2.0, 10.0], [2.0, 20.0]])
    r = np.array([0.1, 0.3, -0.1, 0.1])
    fitted = np.ones((1, 4))
    mean = np.exp(r)[None, :]
    # within SS = 0.02 + 0.02 = 0.04 over N - G = 2 dof: s2 = 0.02; squared levels 2 * 0.2^2 = 0.08,
    # F = 0.08 / 2 / 0.02 = 2 on (2, 2) dof: p = 1 / (1 + F) = 1/3 > 0.05: no effect
    assert line_effects(X, mean, fitted) == [()]
    # the same levels with 10x less scatter: s2 = 0.0002, F = 200 (p = 0.005): an effect on p = 1,
    # tau2 = (0.08 - 2 * 0.0002) / 4 = 0.0199, shrink = tau2 / (tau2 + s2 / 2) = 0.0199 / 0.02
    r = np.array([0.19, 0.21, -0.01, 0.01])
    eff = line_effects(X, np.exp(r)[None, :], fitted)[0]
    along_n = {key: e for j, key, e in eff if j == 1}
    assert along_n[(1.0,)] == pytest.approx(0.2 * 0.0199 / 0.02)
    assert (2.0,) not in along_n or along_n[(2.0,)] == pytest.approx(0.0)


def test_a_lines_level_is_its_median_residual_by_hand():
    # two lines along n (p = 1, 2), four points each; p = 1 at +0.5 with one point at +1.5 (an
    # outlying run), p = 2 at the function's level.  By hand: means 0.75 and 0; within SS
    # 0.7502 + 0.0002 = 0.7504 over 6 dof, s2 = 0.125067; Q = 4 * 0.75^2 = 2.25, F = 2.25 / 2 / s2
    # = 8.995 on (2, 6) dof (p = 0.016); tau2 = (2.25 - 2 s2) / 8 = 0.249983, shrink = tau2 / (tau2
    # + s2 / 4) = 0.888830; the level of p = 1 is the median 0.505 (its mean, 0.75, would give 0.667)
    X = np.array([[p, n] for p in (1.0, 2.0) for n in (10.0, 20.0, 30.0, 40.0)])
    r = np.array([0.49, 0.50, 0.51, 1.5, -0.01, 0.0, 0.01, 0.0])
    eff = line_effects(X, np.exp(r)[None, :], np.ones((1, 8)))[0]
    along_n = {key: e for j, key, e in eff if j == 1}
    s2 = 0.7504 / 6
    tau2 = (2.25 - 2 * s2) / 8
    assert along_n[(1.0,)] == pytest.approx(tau2 / (tau2 + s2 / 4) * 0.505, rel=1e-9)
    assert along_n[(1.0,)] == pytest.approx(0.448859, abs=1e-6)
    assert (2.0,) not in along_n                                    # median 0: no effect


P5 = [32.0, 64.0, 128.0, 256.0, 512.0]
N5 = [5000.0, 6000.0, 7000.0, 8000.0, 9000.0]
OUTLIER = (256.0, 7000.0)


def test_one_outlying_run_does_not_set_a_lines_level():
    # stepped series on 5 x 5 points, 2 repetitions, 2% noise; one repetition at OUTLIER is 10x
    # the formula's, so that point's mean is 5.5x.  The line p = 256 (n varies) holds it; its level
    # is the median of its five points' residuals, so the prediction at n = 10000 on it stays near
    # the generating formula (the lines' mean residuals put it 30-49% above)
    exp, scale = _experiment(S=8, noise=0.02, reps=2, step=True, seed=1, ps=P5, ns=N5, slow=(*OUTLIER, 1))
    ms = perfcast.model(exp, ["time"])
    at = {"p": OUTLIER[0], "n": 10000.0}
    errs = [abs(sm.model.predict(at) / (scale[sm.callpath] * _truth(at["p"], at["n"])) - 1) for sm in ms.series]
    assert all(any(j == 1 and key == (OUTLIER[0],) for j, key, _ in sm.model.lines) for sm in ms.series)
    assert max(errs) < 0.25 and np.median(errs) < 0.05, errs


def test_line_log_factors_and_round_trip():
    lines = ((1, (128.0,), 0.5), (0, (9000.0,), 0.1))
    p = np.array([128.0, 128.0, 64.0, 100.0])
    n = np.array([9500.0, 9000.0, 9000.0, 9500.0])
    got = line_log_factors(lines, [p, n])
    # on the line along n at p=128; on both lines (their mean); on the line along p at n=9000; none
    assert got.tolist() == pytest.approx([0.5, 0.3, 0.1, 0.0])
    m = Model(("p", "n"), 1.0, (), lines=lines)
    assert m.predict({"p": 128.0, "n": 9500.0}) == pytest.approx(math.exp(0.5))
    back = Model.from_dict(m.to_dict())
    assert [(j, k) for j, k, _ in back.lines] == [(1, (128.0,)), (0, (9000.0,))]
    assert [e for _, _, e in back.lines] == pytest.approx([0.5, 0.1])
    assert back.predict({"p": 128.0, "n": 9000.0}) == pytest.approx(math.exp(0.3))


# -- a known law whose line p = 256 is scaled by a known factor, through the command line ---------

LP = [32.0, 64.0, 128.0, 256.0, 512.0]
LN = [5000.0, 6000.0, 7000.0, 8000.0]
LINE_P, LINE_FACTOR = 256.0, 2.0
SCALE = {"a": 1.0, "b": 3.0}


def _law(p, n):
    """The generating PMNF law (before the step of the line p = LINE_P)."""
    return 2e-6 * p * n


def _stepped_truth(region, p, n):
    return SCALE[region] * _law(p, n) * (LINE_FACTOR if p == LINE_P else 1.0)


def _write_stepped(path, seed=7, noise=0.02, reps=3):
    """An Extra-P text file of the law times SCALE per region, the line p = 256 times 2, uniform
    noise of +-2% per repetition; returns {(region, p, n): repetitions}."""
    rng = np.random.default_rng(seed)
    text = ["PARAMETER p", "PARAMETER n", ""] + [f"POINTS ( {p:g} {n:g} )" for p in LP for n in LN]
    text += ["", "METRIC time", ""]
    data = {}
    for reg in SCALE:
        text.append(f"REGION {reg}")
        for p in LP:
            for n in LN:
                v = [_stepped_truth(reg, p, n) * (1 + rng.uniform(-noise, noise)) for _ in range(reps)]
                data[(reg, p, n)] = v
                text.append("DATA " + " ".join(repr(x) for x in v))
        text.append("")
    path.write_text("\n".join(text) + "\n")
    return data


def _function(rec, at):
    """The printed PMNF function of a `model --json` record at ``at``, from its constant and terms."""
    v = rec["constant"]
    for t in rec["terms"]:
        f = t["coefficient"]
        for q, e in t["factors"].items():
            num, _, den = e["exponent"].partition("/")
            f *= at[q] ** (int(num) / int(den or 1)) * math.log2(at[q]) ** e["log_exponent"]
        v += f
    return v


def _lines_by_hand(data, region, rec):
    """The rule of perfcast.fit.lines computed here for the lines along n (one per p): log
    residuals of the measured means against the printed function, the F test at 5%, the BLUP
    shrinkage of each line's median residual; {p: factor} for the lines it keeps (empty when the
    test does not reject)."""
    from scipy.stats import f as fdist

    r = {p: [math.log(np.mean(data[(region, p, n)]) / _function(rec, {"p": p, "n": n})) for n in LN] for p in LP}
    G, N = len(LP), len(LP) * len(LN)
    rbar = {p: sum(v) / len(v) for p, v in r.items()}
    s2 = sum((x - rbar[p]) ** 2 for p, v in r.items() for x in v) / (N - G)
    Q = sum(len(LN) * rbar[p] ** 2 for p in LP)
    if fdist.sf(Q / G / s2, G, N - G) >= 0.05:
        return {}
    tau2 = max(Q - G * s2, 0.0) / N
    return {p: math.exp(tau2 / (tau2 + s2 / len(LN)) * float(np.median(r[p]))) for p in LP}


def ms_lines(rec):
    """The lines of a `model --json` record as Model.lines holds them, read here from the JSON."""
    params = rec["parameters"]
    return tuple((params.index(ln["along"]), tuple(float(ln["at"][q]) for q in params if q != ln["along"]),
                  pytest.approx(math.log(ln["factor"]), rel=1e-12)) for ln in rec["lines"])


@pytest.fixture
def stepped(tmp_path):
    path = tmp_path / "stepped.txt"
    return path, _write_stepped(path)


def test_cli_predict_shows_the_line_factor_and_value_is_function_times_factor(stepped, capsys):
    from conftest import cli

    path, data = stepped
    on, off = {"p": LINE_P, "n": 9000.0}, {"p": 100.0, "n": 9000.0}
    code, out, _ = cli(capsys, "model", path, "--json")
    assert code == 0
    recs = {r["callpath"]: r for r in cli_items(out, "models")}
    code, out, _ = cli(capsys, "predict", path, "--at", "p=256,n=9000", "--at", "p=100,n=9000", "--json")
    assert code == 0
    rows = {(r["callpath"], r["at"]["p"]): r for r in cli_items(out, "predictions")}
    for reg in SCALE:
        rec = recs[reg]
        hand = _lines_by_hand(data, reg, rec)
        # the factor of the line p = 256: the rule by hand from the generated data and the function
        assert LINE_P in hand
        row = rows[(reg, LINE_P)]
        assert row["line"]["factor"] == pytest.approx(hand[LINE_P], rel=1e-9)
        assert row["line"]["lines"] == [{"along": "n", "at": {"p": LINE_P}, "factor": row["line"]["factor"]}]
        # the model's lines in its JSON: the same factors, one per line the rule keeps
        assert {ln["at"]["p"]: ln["factor"] for ln in rec["lines"] if ln["along"] == "n"} == pytest.approx(hand, rel=1e-9)
        # value = the printed function at the point x the factor shown; off the line: the function
        assert row["value"] == pytest.approx(_function(rec, on) * row["line"]["factor"], rel=1e-12)
        assert "line" not in rows[(reg, 100.0)]
        assert rows[(reg, 100.0)]["value"] == pytest.approx(_function(rec, off), rel=1e-12)
        # the function alone bends part of the way to the step; with the line's level the value
        # at the next n on the line is within 5% of the generating law x 2 (the function: > 25% off)
        truth = _stepped_truth(reg, LINE_P, 9000.0)
        assert abs(row["value"] - truth) / truth < 0.05
        assert abs(_function(rec, on) - truth) / truth > 0.25
        # a JSON round trip of the model gives the same value
        back = Model.from_dict(rec)
        assert back.predict(on) == pytest.approx(row["value"], rel=1e-12)
        assert back.lines == ms_lines(rec)


def test_every_view_applies_the_same_factor(stepped):
    import pyarrow as pa

    from perfcast.fit import columns
    from perfcast.output import json_text

    path, _ = stepped
    on = {"p": LINE_P, "n": 9000.0}
    ms = perfcast.model(perfcast.io.load([path]))
    # the columnar values (models not built) equal the built models' values
    vals = columns.values(list(ms.series), [on, {"p": 100.0, "n": 6000.0}])
    chunks = "".join(ms.json_chunks(on))
    table = ms.to_table(on)
    rows = {r["callpath"]: r for r in ms.predict(on)}
    for s, sm in enumerate(ms.series):
        m = sm.model
        assert vals[s].tolist() == pytest.approx([m.predict(on), m.predict({"p": 100.0, "n": 6000.0})], rel=1e-12)
        assert rows[sm.callpath]["value"] == pytest.approx(m.predict(on), rel=1e-12)
    for r in ms.rank(on):
        assert r.predicted == pytest.approx(rows[r.callpath]["value"], rel=1e-12)
    # the streamed model JSON and the table built from the arrays equal the model objects' views
    assert chunks == json_text(ms.to_dict(on))
    fresh = perfcast.model(perfcast.io.load([path]))          # models not built: the columnar path
    assert "".join(fresh.json_chunks(on)) == chunks
    assert "".join(fresh.json_chunks()) == json_text(ms.to_dict())
    recs = json.loads(chunks)
    for rec in recs:
        assert rec["line"] == rows[rec["callpath"]]["line"] and rec["at"] == on
        assert rec["ranking"]["at"] == on and rec["ranking"]["line"] == rows[rec["callpath"]]["line"]
        assert rec["value"] == pytest.approx(rows[rec["callpath"]]["value"], rel=1e-12)
    assert table.equals(pa.Table.from_pandas(ms.to_frame(on), preserve_index=False))
    assert fresh.to_table(on).equals(table)
    assert table.column("line").to_pylist() == [rows[rec["callpath"]]["line"] for rec in recs]


def test_a_single_parameter_series_has_no_lines(tmp_path):
    rng = np.random.default_rng(5)
    rows = [{"p": p, "callpath": "x", "metric": "time", "value": 1e-3 * p * (1 + rng.uniform(-0.02, 0.02))}
            for p in (8.0, 16.0, 32.0, 64.0, 128.0) for _ in range(3)]
    ms = perfcast.model(Experiment.from_pandas(pd.DataFrame(rows), parameters=["p"]))
    assert ms.series[0].model.lines == ()
    row = ms.predict({"p": 64.0})[0]
    assert "line" not in row
    assert "lines" not in ms.to_dict({"p": 64.0})[0]


def test_the_report_marks_a_value_on_a_measured_line(stepped, tmp_path, capsys):
    from conftest import cli

    path, _ = stepped
    code, out, _ = cli(capsys, "predict", path, "--at", "p=256,n=9000", "--json")
    lines = {r["callpath"]: r["line"] for r in cli_items(out, "predictions")}
    code, out, _ = cli(capsys, "report", path, "--target", "p=256,n=9000", "--json", "-o", tmp_path / "r.html")
    assert code == 0
    kernels = cli_items(out, "report")[0]["kernels"]
    assert {k["callpath"]: k["line"] for k in kernels} == lines
    html = (tmp_path / "r.html").read_text()
    for f in lines.values():
        assert f"×{f['factor']:.4g}"[:4] in html


def test_fit_series_applies_the_same_rule():
    # the array API (fit.fit_series) and the experiment path give one series the same lines
    from perfcast.fit import fit_series

    exp, _ = _experiment(S=1, noise=0.02, reps=3, step=True, seed=1)
    m = perfcast.model(exp, ["time"]).series[0].model
    d = exp.data.groupby(["p", "n"], sort=True)["value"].apply(list)
    got = fit_series(np.array(d.index.tolist()), d.tolist(), ("p", "n"))
    assert got.lines and [(j, k) for j, k, _ in got.lines] == [(j, k) for j, k, _ in m.lines]
    assert [e for _, _, e in got.lines] == pytest.approx([e for _, _, e in m.lines], rel=1e-9)


def test_the_reports_validation_rows_mark_a_value_on_a_measured_line(stepped, tmp_path, capsys):
    # validation runs on the line p = 256 (n = 9000, beyond the fitted n) and off it (p = 100): the
    # compared value is the function times the line's factor on the line, the function off it
    from conftest import cli

    path, _ = stepped
    vpath = tmp_path / "validation.txt"
    text = ["PARAMETER p", "PARAMETER n", "", "POINTS ( 256 9000 ) ( 100 9000 )", "", "METRIC time", ""]
    for reg in SCALE:
        text += [f"REGION {reg}", *(f"DATA {_stepped_truth(reg, p, 9000.0)!r}" for p in (LINE_P, 100.0)), ""]
    vpath.write_text("\n".join(text) + "\n")
    code, out, _ = cli(capsys, "model", path, "--json")
    recs = {r["callpath"]: r for r in cli_items(out, "models")}
    code, out, err = cli(capsys, "report", path, "--target", "p=256,n=9000", "--validate", vpath, "--json",
                         "-o", tmp_path / "r.html")
    assert code == 0, err
    rows = cli_items(out, "report")[0]["validation"]["rows"]
    assert len(rows) == 2 * len(SCALE)
    for r in rows:
        fn = _function(recs[r["callpath"]], r["at"])
        if r["at"]["p"] == LINE_P:
            assert r["line"]["lines"][0]["at"] == {"p": LINE_P}
            assert r["value"] == pytest.approx(fn * r["line"]["factor"], rel=1e-12)
            # the measured value is the generating law's: the line's level brings the value within 5%
            assert abs(r["error"]) < 0.05 and abs(fn / r["measured"] - 1) > 0.25
        else:
            assert "line" not in r and r["value"] == pytest.approx(fn, rel=1e-12)
    html = (tmp_path / "r.html").read_text()
    section = html[html.index('id="validation"'):]
    assert section.count("measured line</span>") == len(SCALE)


@pytest.mark.parametrize("truth", [lambda p, n: p, lambda p, n: 3.0 * p])
def test_exact_lines_at_different_levels_keep_their_levels(truth):
    # noise-free counts measured at two process counts (no line of 3 along p; since the law in p
    # through the two levels, tests/test_fit_two_levels.py, the function itself is exact and no
    # line keeps a level of its own): miniFE's MPI_Init calls summed over ranks are p, its
    # MPI_Allgather calls 3 p.  Within each
    # line along n the data are exact multiples of the function (no scatter to test against), and
    # the lines' levels differ: a value on a measured line is that line's level, the generating
    # formula's at the new n (before: the function's level between the lines, 1.5 for calls = p)
    rows = [{"p": p, "n": n, "callpath": "MPI->MPI_Init", "metric": "calls", "value": truth(p, n)}
            for p in (1.0, 2.0) for n in (16.0, 24.0, 32.0, 40.0, 48.0)]
    exp = Experiment.from_pandas(pd.DataFrame(rows), parameters=["p", "n"])
    ms = perfcast.model(exp, ["calls"])
    m = ms[("MPI->MPI_Init", "calls")]
    for p in (1.0, 2.0):
        for n in (56.0, 64.0):
            assert m.predict({"p": p, "n": n}) == pytest.approx(truth(p, n), rel=1e-9)
    rows = {(r["at"]["p"], r["at"]["n"]): r["value"] for r in ms.predict([{"p": 1.0, "n": 64.0}, {"p": 2.0, "n": 64.0}])}
    assert rows[(1.0, 64.0)] == pytest.approx(truth(1.0, 64.0), rel=1e-9)
    assert rows[(2.0, 64.0)] == pytest.approx(truth(2.0, 64.0), rel=1e-9)

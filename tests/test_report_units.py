"""Report building blocks without a browser: scales and ticks, SVG escaping, sparklines, MathML
formulas, the report's numbers on LULESH, the CLI command and its errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from fractions import Fraction

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.fit import fit_series
from perfcast.fit.model import Model, Term
from perfcast.report import svg as S
from perfcast.report.html import ReportOptions, build_report, formula_mathml, render_html
from perfcast.report.sparkline import sparkline, trend

from conftest import cli_items

SVGNS = "{http://www.w3.org/2000/svg}"


def test_scales_map_and_tick():
    s = S.Scale("log", 1, 1000, 0, 300)
    assert s(1) == pytest.approx(0) and s(1000) == pytest.approx(300) and s(10) == pytest.approx(100)
    assert s.ticks() == [1, 10, 100, 1000]
    lin = S.Scale("linear", 0, 1, 100, 0)
    assert lin(0.25) == pytest.approx(75)
    assert S.nice_ticks(0, 1, 6) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert S.nice_ticks(3, 97, 5) == [25, 50, 75]
    narrow = S.Scale("log", 20, 70, 0, 1).ticks()
    assert narrow and all(20 <= t <= 70 for t in narrow)
    assert S.choose_scale([1, 2, 4, 8]) == "log" and S.choose_scale([1, 2, 4]) == "linear"
    assert S.choose_scale([0, 10, 100]) == "linear"
    assert S.label(12000) == "12k" and S.label(0.0001) == "1e-4" and S.label(0.25) == "0.25"


def test_figure_is_wellformed_escaped_svg_and_skips_bad_values():
    fig = S.Figure(title="<b>t</b>", xlabel="p&q", ylabel='"y"')
    fig.set_scales("log", (1, 64), "log", (0.1, 100))
    fig.band([1, 8, 64], [0.5, 1, 2], [2, 4, 8], "#123456", legend="<i>band</i>")
    fig.line([1, 8, 64], [1, 2, np.nan], "#000", legend="m")
    fig.line([1, 8, 64], [1, 2, 4], "#000", dashed=True, tooltip="<script>x</script>")
    fig.points([1, 2, 4, 8], [1, -1, 3, np.inf], "#f00", lo=[0.5, 0, 2, 1], hi=[2, 1, 4, 2],
               tooltips=["a<", "b", "c", "d"])
    fig.marker(64, 4, "#0f0", lo=3, hi=5, legend="target", tooltip="x>y")
    fig.vline(64, text="<t>")
    text = fig.svg()
    root = ET.fromstring(text)  # well-formed XML: nothing unescaped slipped through
    assert root.tag == SVGNS + "svg"
    assert "<script>" not in text and "<b>" not in text and "&lt;b&gt;t&lt;/b&gt;" in text
    # one point at y=-1 (log) and one at inf are skipped; spread bars only where drawable
    assert len(root.findall(f".//{SVGNS}circle[@class='point']")) == 2
    assert len(root.findall(f".//{SVGNS}path[@class='curve']")) == 1  # the NaN leaves 2 points: still a line
    assert len(root.findall(f".//{SVGNS}path[@class='extrapolation']")) == 1
    assert len(root.findall(f".//{SVGNS}polygon[@class='band']")) == 1
    titles = [t.text for t in root.iter(SVGNS + "title")]
    assert "<script>x</script>" in titles and "a<" in titles


def test_stacked_bars_heights_add_up():
    fig = S.Figure(400, 300, margin=(10, 10, 40, 40))
    fig.set_scales("linear", (-0.5, 1.5), "linear", (0, 10))
    fig.stacked_bars(["a", "b"], [("x", [2, 4]), ("y", [3, 0])])
    root = ET.fromstring(fig.svg())
    rects = root.findall(f".//{SVGNS}rect[@class='bar']")
    assert len(rects) == 3  # the zero is not drawn
    px_per_unit = (300 - 40 - 10) / 10
    heights = sorted(round(float(r.get("height")) / px_per_unit, 1) for r in rects)
    assert heights == [2.0, 3.0, 4.0]


def test_svg_sparkline_and_hbar():
    sp = S.sparkline([1, 2, np.nan, 4], tooltip="<x>")
    root = ET.fromstring(sp)
    assert root.get("class") == "spark" and "&lt;x&gt;" in sp
    assert S.sparkline([1]) == "" and S.sparkline([np.nan, np.nan]) == ""
    assert ET.fromstring(S.hbar(-0.5)) is not None and ET.fromstring(S.hbar(float("nan"))) is not None


def test_text_sparklines():
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([3, 3, 3]) == "▄▄▄"
    assert sparkline([1, None, float("nan"), 8]) == "▁  █"
    assert sparkline([1, 10, 100], log=True) == "▁▅█"
    assert sparkline([0, 1], log=True) == " ▄"
    assert sparkline([1, 2], ascii=True) == "_@"
    assert trend([2, 4, 8]) == "▁▅█ ×4"


def test_formula_mathml_is_readable_and_escaped():
    m = Model(("p<1>",), 3.1, (Term(-2e-7, (("p<1>", Fraction(3, 2), 1),)),))
    mm = str(formula_mathml(m))
    root = ET.fromstring(mm.replace("&#x2212;", "-").replace("&#xB7;", "*").replace("&#xD7;", "x")
                         .replace("&#x2061;", ""))
    assert root.tag == "math"
    assert "p&lt;1&gt;" in mm and "<p<1>" not in mm
    assert "<msup><mi>p&lt;1&gt;</mi><mrow><mn>3</mn><mo>/</mo><mn>2</mn></mrow></msup>" in mm
    assert "<msub><mi>log</mi><mn>2</mn></msub>" in mm and "<msup><mn>10</mn><mn>-7</mn></msup>" in mm
    assert "&#x2212;" in mm  # the negative coefficient is a minus sign
    fitted = fit_series([4, 8, 16, 32, 64], [[v * 1.01, v * 0.99] for v in (3 + 0.5 * np.array([4, 8, 16, 32, 64]))])
    assert "<mi>p</mi>" in str(formula_mathml(fitted))
    # a long formula (its text beyond WRAP_CHARS) one term per row, each row one term of the model
    long = Model(("p", "n"), 1.071e-5, (Term(1.672e-5, (("p", Fraction(3, 2), 2),)),
                                        Term(-2.392e-8, (("p", Fraction(3, 2), 2), ("n", Fraction(5, 3), 0)))))
    assert len(long.formula()) > 44
    rows = ET.fromstring(str(formula_mathml(long)).replace("&#x2212;", "-").replace("&#xB7;", "*")
                         .replace("&#x2061;", "")).findall(".//mtr")
    assert len(rows) == 3
    texts = ["".join(r.itertext()) for r in rows]
    assert texts[0] == "1.071×10-5" and texts[1].startswith("+1.672") and texts[2].startswith("-2.392")
    assert "n" in texts[2] and "n" not in texts[1]
    assert "<mtable" not in str(formula_mathml(m))   # a short one stays on one line


def test_lulesh_report_numbers(data_dir):
    from perfcast.io import load

    exp = load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    rep = build_report(exp, ReportOptions(target={"jobsize": 1000}, kernels=10, plots=3))
    assert rep.metric == "avg#inclusive#sum#time.duration" and rep.x == "jobsize"
    assert rep.target == {"jobsize": 1000.0} and not rep.target_default
    assert len(rep.kernels) == 10 and rep.other["count"] == 46 - 10 and len(rep.plots) == 3
    # ranks follow the SC13 order: growth first; main holds (almost) the whole inclusive total
    assert [k["rank"] for k in rep.kernels] == sorted(k["rank"] for k in rep.kernels)
    main = next(k for k in rep.kernels if k["callpath"] == "main")
    assert main["share_now"] == pytest.approx(1.0, abs=0.01)
    # measured medians at jobsize=343 are the raw values (one repetition)
    raw = exp.data[(exp.data["callpath"] == "main") & (exp.data["metric"] == rep.metric) & (exp.data["jobsize"] == 343)]
    assert main["now"] == pytest.approx(float(raw["value"].iloc[0]))
    assert all(k["lower"] is None or 0 <= k["lower"] <= k["predicted"] <= k["upper"] for k in rep.kernels)
    # weak scaling is recognised from the totals; MPI_Allreduce under TimeIncrement loses in itself
    sl = rep.scaling_loss
    assert sl["mode"] == "weak" and sl["guessed"] and (sl["p"], sl["q"]) == (27.0, 343.0)
    allred = next(r for r in sl["rows"] if r["path"] == "main->lulesh.cycle->TimeIncrement->MPI_Allreduce")
    assert allred["where"] == "self" and allred["exclusive_loss"] > 0.1
    bd = rep.cost_breakdown
    assert bd["points"] == [27.0, 64.0, 125.0, 216.0, 343.0] and len(bd["names"]) <= 9
    html = render_html(rep)
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="plot"') == 3 + 1
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "").replace("http://www.w3.org/1998/Math/MathML", "")


def test_optional_sections_appear_with_their_data(data_dir):
    from perfcast.io import load

    exp = load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    apmt = {"x": "jobsize", "points": [64, 27, 125], "unit": "s",
            "components": {"computation": [2, 1, 3], "memory": [1, 1, 1], "communication": [0.5, 0.2, 0.9]}}
    proj = [{"system": "<b>x</b>", "total": 1.5}, {"system": "y", "total": None}]
    rep = build_report(exp, ReportOptions(plots=1, kernels=2), apmt=apmt, projections=proj)
    assert rep.sections() == ["answers", "summary", "ranking", "plots", "apmt", "breakdown", "scaling-loss",
                              "metrics", "projections"]
    assert rep.apmt["points"] == [27.0, 64.0, 125.0] and rep.apmt["components"]["computation"] == [1.0, 2.0, 3.0]
    html = render_html(rep)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    with pytest.raises(PerfcastError):
        build_report(exp, apmt={"points": [1, 2], "components": {"computation": [1]}})


def test_report_cli(data_dir, tmp_path, capsys):
    src = str(data_dir / "thicket" / "lulesh_weak_scaling_cali")
    out = tmp_path / "r.html"
    assert main(["report", src, "-o", str(out), "--kernels", "5", "--plots", "2", "--json"]) == 0
    d = cli_items(capsys.readouterr().out, "report")[0]
    assert d["output"] == str(out) and d["bytes"] == out.stat().st_size and len(d["kernels"]) == 5
    assert d["target"] == {"jobsize": 1372.0} and d["target_default"]
    assert out.read_text().startswith("<!DOCTYPE html>")
    for args, msg in ((["--target", "nope=3"], "unknown parameter"), (["--metric", "nope"], "no metric 'nope'"),
                      (["--scaling", "weak", "--x", "zz"], "no parameter 'zz'"),
                      (["--base", "x"], "--base and --machine together")):
        assert main(["report", src, "-o", str(tmp_path / "bad.html"), *args]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "bad.html").exists()
    assert main(["report", src, "-o", str(tmp_path / "missing" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_terminal_trends_follow_the_measured_means(data_dir):
    from perfcast.io import load
    from perfcast.report.terminal import trends

    exp = load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    m = "avg#inclusive#sum#time.duration"
    cp = "main->lulesh.cycle->TimeIncrement->MPI_Allreduce"
    t = trends(exp, [(cp, m), ("no such", m)])
    assert set(t) == {(cp, m)}
    vals = exp.data[(exp.data["callpath"] == cp) & (exp.data["metric"] == m)].sort_values("jobsize")["value"]
    assert t[(cp, m)] == trend(vals.to_numpy(), log=True)
    ratio = float(t[(cp, m)].rsplit("×", 1)[1])          # the trend ends with last/first measured
    assert ratio == pytest.approx(vals.iloc[-1] / vals.iloc[0], rel=0.05)


def test_bar_widths_by_hand():
    from perfcast.report.sparkline import bar

    assert bar(0.5, 10, ascii=True) == "#####     "
    assert bar(1.7, 4, ascii=True) == "####"          # clipped at 1
    assert bar(-1, 4) == "    " and bar(float("nan"), 3) == "   "
    # 0.56 * 10 characters = 5 full blocks and 5 eighths (0.6 * 8 = 4.8 -> 5)
    assert bar(0.56, 10) == "█████▋    "


def test_report_shows_regimes_and_marks_poor_fits(data_dir):
    from perfcast.io import load

    # mpi_data: Open MPI's MPI_Gather steps between 128 and 256 ranks: two regimes, no poor fit left
    exp = load([data_dir / "extrap" / "mpi_data.csv"])
    rep = build_report(exp, ReportOptions(kernels=20, min_share=0.0))
    assert not any(k["warnings"] for k in rep.kernels)
    g = next(k for k in rep.kernels if k["callpath"] == "OpenMPI/MPI_Gather")
    assert g["formula"].startswith("Ranks <= 128: ") and "Ranks >= 256: " in g["formula"]
    assert "&#x2264;" in str(g["mathml"]) and "&#x2265;" in str(g["mathml"])
    html = render_html(rep)
    assert "poor fit: predictions unreliable" not in html
    # a two-parameter segmented input is not segmented (one parameter only): marked as a poor fit
    rep = build_report(load([data_dir / "extrap" / "text" / "two_parameter_segmented_1.txt"]),
                       ReportOptions(min_share=0.0))
    assert [k["callpath"] for k in rep.kernels if k["warnings"]] == ["reg"]
    assert render_html(rep).count("poor fit: predictions unreliable") == 1


def test_report_projects_at_the_measured_point_like_the_project_command(tmp_path, capsys):
    from perfcast.projection.signatures import load_navarro

    from conftest import DATA

    sig = load_navarro(DATA / "spec" / "counters")["519.lbm_r"]
    rows = ["p,callpath,metric,value"]
    for p in (1, 2, 4, 8):
        rows.append(f"{p},main,time,{100.0 / p + 2 * p}")
        rows += [f"{p},main,{m},{v!r}" for m, v in sig.values.items()]
    app = tmp_path / "app.csv"
    app.write_text("\n".join(rows) + "\n")
    base, targets = "cpu2017-20190916-18068", ["cpu2017-20200413-21968", "cpu2017-20200609-22848"]
    capsys.readouterr()
    assert main(["project", str(app), "--base", base, "--at", "p=8", "--json"]
                + [a for t in targets for a in ("--target", t)]) == 0
    proj = {t["system"]: t for t in cli_items(capsys.readouterr().out, "projection")[0]["targets"]}
    for extra, note in (([], "At p=8. Measured on"),
                        (["--target", "p=64"], "At p=8 (largest measured point; the target cannot")):
        assert main(["report", str(app), "-o", str(tmp_path / "r.html"), "--force", "--base", base, "--json"]
                    + [a for t in targets for a in ("--machine", t)] + extra) == 0
        tab = cli_items(capsys.readouterr().out, "report")[0]["projections"]
        assert tab["note"].startswith(note)
        got = {r[0]: r for r in tab["values"]}
        assert set(got) == set(targets)
        for t in targets:
            # compute at p=8 on the base is 100/8 + 2*8 = 28.5 s, scaled by the same factor as `project`
            assert got[t][2] == pytest.approx(proj[t]["compute_factor"], rel=1e-12)
            assert got[t][3] == pytest.approx(28.5 * proj[t]["compute_factor"], rel=1e-12)
            # the factor model's 90 % interval, as `project` gives it
            assert tab["columns"][6:] == ["factor low (90%)", "factor high (90%)"]
            assert got[t][6:] == pytest.approx(proj[t]["compute_factor_interval"], rel=1e-12)


def test_report_model_and_predict_agree_on_the_value_at_the_target(data_dir, tmp_path, capsys):
    """One prediction everywhere: the report's and `model`'s value at the target is `perfcast predict`'s
    (the selected hypothesis by default, averaged over the competing hypotheses with --averaged)."""
    src = str(data_dir / "thicket" / "lulesh_weak_scaling_cali")
    metric = "avg#inclusive#sum#time.duration"
    got = {}
    for flag in ([], ["--averaged"]):
        assert main(["report", src, "-o", str(tmp_path / "r.html"), "--force", "--target", "jobsize=1000",
                     "--metric", metric, "--kernels", "8", "--plots", "0", "--min-share", "0", *flag, "--json"]) == 0
        rep = {k["callpath"]: k for k in cli_items(capsys.readouterr().out, "report")[0]["kernels"] if k["status"] == "ok"}
        assert main(["predict", src, "--at", "jobsize=1000", "--metric", metric, *flag, "--json"]) == 0
        pred = {r["callpath"]: r for r in cli_items(capsys.readouterr().out, "predictions")}
        assert main(["model", src, "--target", "jobsize=1000", "--metric", metric, *flag, "--json"]) == 0
        mod = {r["callpath"]: r["value"] for r in cli_items(capsys.readouterr().out, "models")}
        assert len(rep) >= 5
        for cp, k in rep.items():
            assert k["value"] == pytest.approx(pred[cp]["value"], rel=1e-9)
            assert k["value"] == pytest.approx(mod[cp], rel=1e-9)
            if k["lower"] is not None and pred[cp]["lower"] is not None:
                assert k["lower"] == pytest.approx(pred[cp]["lower"], rel=1e-9, abs=1e-12)
                assert k["upper"] == pytest.approx(pred[cp]["upper"], rel=1e-9)
        got[bool(flag)] = {cp: k["value"] for cp, k in rep.items()}
    # the two modes differ where hypotheses compete, so the agreement above is not vacuous
    common = set(got[True]) & set(got[False])
    assert any(abs(got[True][c] / got[False][c] - 1) > 1e-3 for c in common)
    assert "values at the target: averaged over the competing hypotheses" in (tmp_path / "r.html").read_text()


def _two_parameter_experiment(S=40, seed=3, negative=False):
    """S callpaths at p = 4..64 x n = 10, 20, 40 with 3 repetitions: flat callpaths of different
    sizes, two growing like p^2 and p log p; exclusive time."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rng = np.random.default_rng(seed)
    base = rng.uniform(1.0, 10.0, S)
    rows = []
    for s in range(S):
        for p in (4, 8, 16, 32, 64):
            for n in (10, 20, 40):
                law = base[s] * n / 10 * ((p / 4) ** 2 if s == 7 else p * np.log2(p) / 8 if s == 23 else 1.0)
                for r in range(3):
                    rows.append({"p": float(p), "n": float(n), "rep": r, "callpath": f"k{s}", "metric": "time",
                                 "value": law * (1 + 0.02 * rng.standard_normal())})
    if negative:
        rows[5]["value"] = -0.5
    return Experiment(["p", "n"], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")])


def test_report_numbers_by_hand_and_only_the_shown_models_built():
    """The kernels' measured values (mean over repetitions at the largest point -- the statistic the
    models are fitted on and the ranking's measured cost --, the median trend along p at the largest
    n), shares and the "other kernels" row against numpy on the raw values; the report builds the
    models of the kernels it shows only (the ranking reads the fit's arrays)."""
    from perfcast.modelset import model

    exp = _two_parameter_experiment()
    series = model(exp).series
    built_before = {sm.callpath for sm in series if sm.pending() is None}
    rep = build_report(exp, ReportOptions(kernels=5, plots=2, min_share=0.0), models=series)
    d = exp.data
    med = d.groupby(["callpath", "p", "n"])["value"].median()
    corner = {cp: float(np.mean(d[(d.callpath == cp) & (d.p == 64) & (d.n == 40)]["value"])) for cp in med.index.levels[0]}
    total = sum(corner.values())
    assert [k["callpath"] for k in rep.kernels][:2] == ["k7", "k23"]   # the growing ones first
    assert len(rep.kernels) == 5 and rep.other["count"] == 35 and len(rep.plots) == 2
    for k in rep.kernels:
        assert k["now"] == pytest.approx(corner[k["callpath"]], rel=1e-14)
        assert k["now"] == pytest.approx(k["per_process_now"], rel=1e-14)   # the ranking's measured cost
        assert k["share_now"] == pytest.approx(corner[k["callpath"]] / total, rel=1e-12)
        assert k["series"] == [float(np.median(d[(d.callpath == k["callpath"]) & (d.p == p) & (d.n == 40)]["value"]))
                               for p in (4, 8, 16, 32, 64)]
    shown = {k["callpath"] for k in rep.kernels}
    assert rep.other["max_share_now"] == pytest.approx(max(v for cp, v in corner.items() if cp not in shown) / total,
                                                       rel=1e-12)
    assert rep.clipped   # every value >= 0: intervals clip at 0
    built = {sm.callpath for sm in series if sm.pending() is None}
    assert built - built_before <= shown and shown - built_before <= built
    # one negative measurement: no clipping
    assert not build_report(_two_parameter_experiment(negative=True), ReportOptions(kernels=5, plots=0)).clipped


def test_report_shares_do_not_depend_on_the_hash_seed(tmp_path):
    # the predicted total is summed over a set of callpaths: the report must be the same for any
    # PYTHONHASHSEED
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(11)
    text = ["PARAMETER p", "", "POINTS ( 4 ) ( 8 ) ( 16 ) ( 32 ) ( 64 )", "", "METRIC time", ""]
    for r in range(60):
        c, e = rng.uniform(0.1, 10.0), rng.choice([0.0, 0.5, 1.0])
        text.append(f"REGION k{r}")
        text += ["DATA " + " ".join(repr(float(c * 1.37 ** r % 7.3 * p ** e * (1 + rng.uniform(-0.02, 0.02))))
                                    for _ in range(3)) for p in (4, 8, 16, 32, 64)]
        text.append("")
    # two timers each largest at one end only: no timer holds all the others at every point, so the
    # flat list has no whole-run timer and the shares are of the sum of the timers
    for name, big in (("xa", 4), ("xb", 64)):
        text += [f"REGION {name}"] + [f"DATA {1e4 if p == big else 1e-3} {1e4 if p == big else 1e-3}"
                                      for p in (4, 8, 16, 32, 64)] + [""]
    path = tmp_path / "many.txt"
    path.write_text("\n".join(text) + "\n")
    outs = []
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "perfcast", "report", str(path), "--json", "--kernels", "100",
                            "-o", str(tmp_path / f"r{seed}.html")], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        outs.append(cli_items(r.stdout, "report")[0])
    assert outs[0]["kernels"] == outs[1]["kernels"] == outs[2]["kernels"]
    rows = [k for k in outs[0]["kernels"] if k.get("share_target") is not None]
    # every share is its kernel's prediction over one total (flat tree: the sum of all 62 predictions)
    totals = [k["value"] / k["share_target"] for k in rows]
    assert len(rows) >= 5 and max(totals) == pytest.approx(min(totals), rel=1e-12)
    assert sum(k["value"] for k in rows) < totals[0]


def test_report_labels_clipped_bounds_and_lines_not_drawn(data_dir):
    """Issue 19, item 6: the y axes use the source's metric alias; a lower bound raised to 0 says so;
    a two-parameter plot names the measured lines it leaves out."""
    from perfcast.io import load

    exp = load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    rep = build_report(exp, ReportOptions(target={"jobsize": 4096}, kernels=10, plots=2))
    assert rep.label == "Avg time/rank [sec]"      # Caliper's attribute.alias of avg#inclusive#sum#time.duration
    html = render_html(rep)
    assert "Avg time/rank [sec]</text>" in html
    # clipped exactly where the model's own interval reaches below 0 (a time cannot) around a
    # value that does not (a negative value keeps its interval: modelset.clip_interval)
    import perfcast

    ms = perfcast.model(exp, metrics=[rep.metric])
    for k in rep.kernels:
        if k["status"] == "ok":
            raw = ms[k["callpath"], rep.metric].interval({"jobsize": 4096}, 0.9)[0]
            assert k["clipped"] == (raw < 0 and k["predicted"] >= 0), k["callpath"]
            assert (k["lower"] == 0.0) == (raw <= 0 and k["predicted"] >= 0) or raw == 0, k["callpath"]
    clipped = [k for k in rep.kernels if k["clipped"]]
    assert clipped and html.count(">0 clipped</span>") == len(clipped)

    rl = load([data_dir / "extrap" / "text" / "mpa" / "relearn_data.txt"])
    rep = build_report(rl, ReportOptions(plots=1))
    ns = sorted(set(rl.data["n"]))
    assert len(ns) == 5                            # n = 5000 .. 9000: four lines drawn, one named
    p = rep.plots[0]
    drawn = p["svg"].count('class="point"')
    assert p["omitted"] and p["omitted"].startswith("n=")
    assert f"not drawn (the 4 measured lines with the most points are): {p['omitted']}" in render_html(rep)
    assert drawn == 4 * len(set(rl.data["p"]))


def test_values_table_tells_rows_of_one_name_apart(tmp_path):
    # LULESH has MPI_Waitall under CalcForceForNodes and under LagrangeNodal: the "Values at" table
    # showed two bare "MPI_Waitall" rows with different numbers
    from html.parser import HTMLParser

    from conftest import DATA, require_data
    from perfcast.io import load
    from perfcast.report.html import write_report

    src = require_data(DATA / "thicket" / "lulesh_weak_scaling_cali")
    exp = load([src])
    out = tmp_path / "l.html"
    write_report(exp, out, ReportOptions(target={"jobsize": 1000}))
    page = out.read_text()
    table = page[page.index("Values at jobsize=343"):]
    table = table[:table.index("</table>")]

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell, self.depth = [], None, 0

        def handle_starttag(self, tag, attrs):
            if tag == "td" and ("class", "path") in attrs:
                self.cell, self.title = [], dict(attrs)["title"]

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

        def handle_endtag(self, tag):
            if tag == "td" and self.cell is not None:
                self.rows.append((self.title, " ".join(self.cell)))
                self.cell = None

    p = Cells()
    p.feed(table)
    titles = [t for t, _ in p.rows]
    shown = [s for _, s in p.rows]
    # two distinct callpaths ending in MPI_Waitall in the data, both in the table
    waitall = {c for c in map(str, exp.data["callpath"].unique()) if c.endswith("->MPI_Waitall")}
    assert len(waitall & set(titles)) >= 2
    assert len(set(titles)) == len(titles)
    assert len(set(shown)) == len(shown), shown    # what a reader sees tells every row apart


def test_no_share_above_100_percent_when_a_part_is_predicted_above_the_whole():
    """A callee whose model passes its root's at the target (hpccg-n: app->Total 78.56 s under app
    22.45 s showed a share of 349.9%): shares stay within 100%, the whole taken as at least its
    largest part (the ranking's rule), the row is marked and a note names the disagreement.
    Ground truth: main = 10 at every p, main->k = 0.01 p^2 (exact, so both models are exact) --
    at p = 100 k is 100 and main 10."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = [{"p": float(p), "rep": 0, "callpath": cp, "metric": "time", "value": v}
            for p in (1, 2, 4, 8, 16) for cp, v in (("main", 10.0), ("main->k", 0.01 * p * p))]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")])
    rep = build_report(exp, ReportOptions(target={"p": 100.0}, min_share=0.0, plots=0))
    ks = {k["callpath"]: k for k in rep.kernels}
    assert ks["main->k"]["predicted"] == pytest.approx(100.0, rel=1e-9)
    assert ks["main"]["predicted"] == pytest.approx(10.0, rel=1e-9)
    assert ks["main->k"]["share_target"] == pytest.approx(1.0, rel=1e-9)
    assert ks["main"]["share_target"] == pytest.approx(0.1, rel=1e-9)
    assert all(0 <= k["share_target"] <= 1 for k in rep.kernels)
    assert ks["main->k"]["above_root"] and not ks["main"]["above_root"]
    assert any("predicted above the whole" in n for n in rep.notes)
    html = render_html(rep)
    assert "(!)" in html


def test_values_table_columns_carry_unit_and_rank_reduction():
    """The 'Values at' table printed bare numbers: a count summed over the ranks next to a time
    averaged over them, no unit.  Its columns now name both; the numbers by hand: 2 ranks, 2
    repetitions at p = 4: calls (1+3, 2+4) summed -> 4, 6, mean 5; time (1, 3), (2, 4) averaged over
    ranks -> 2, 3, mean 2.5."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = []
    for p in (1, 2, 4):
        for rep, (a, b) in enumerate(((1.0, 3.0), (2.0, 4.0))):
            for rank, v in ((0, a), (1, b)):
                rows += [{"p": float(p), "rep": rep, "rank": rank, "callpath": "main", "metric": "calls",
                          "value": v * p}, {"p": float(p), "rep": rep, "rank": rank, "callpath": "main",
                                            "metric": "time", "value": v * p}]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("calls", "#", "count", "inclusive"),
                                                 Metric("time", "s", "time", "inclusive")])
    rep = build_report(exp, ReportOptions(plots=0, metric="time"))
    mt = rep.metrics_table
    assert mt["heads"] == [{"name": "calls", "unit": "#", "ranks": "sum over ranks"},
                           {"name": "time", "unit": "s", "ranks": "mean over ranks"}]
    assert mt["rows"][0]["values"] == [pytest.approx(5 * 4), pytest.approx(2.5 * 4)]
    html = render_html(rep)
    assert '<th class="num">calls [#]<span class="full">sum over ranks</span></th>' in html
    assert '<th class="num">time [s]<span class="full">mean over ranks</span></th>' in html


def test_breakdown_tells_two_callpaths_of_one_name_apart():
    """Two heavy callpaths named alike (LULESH has MPI_Wait under CalcQForElems and under
    LagrangeNodal) were two bars with one label, and the breakdown's values, keyed by label, kept
    only one series.  Exclusive times by hand: main->a->MPI_Wait = 3 p, main->b->MPI_Wait = 5 p."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = []
    for p in (1, 2, 4):
        for cp, v in (("main", 20.0 + 8 * p), ("main->a", 1.0 + 3 * p), ("main->a->MPI_Wait", 3.0 * p),
                      ("main->b", 1.0 + 5 * p), ("main->b->MPI_Wait", 5.0 * p)):
            rows.append({"p": float(p), "rep": 0, "callpath": cp, "metric": "time", "value": v})
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")])
    bd = build_report(exp, ReportOptions(plots=0)).cost_breakdown
    assert bd["values"]["MPI_Wait in a"] == pytest.approx([3.0, 6.0, 12.0])
    assert bd["values"]["MPI_Wait in b"] == pytest.approx([5.0, 10.0, 20.0])
    assert len(set(bd["names"])) == len(bd["names"])


@pytest.mark.parametrize("metric,ranks,said", [("calls", "auto", "sum over ranks"), ("time", "auto", "mean over ranks"),
                                               ("time", "max", "max over ranks")])
def test_report_says_how_per_rank_values_were_combined(metric, ranks, said):
    """Per-rank values: model and predict label the metric 'Ir [#] (sum over ranks)'; the report
    said nothing, so a total over 16 ranks read as a rank's value.  Its heading and ranking note now
    carry the label of the reduction --ranks chose."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = [{"p": float(p), "rep": 0, "rank": r, "callpath": "main", "metric": m, "value": float(p + r)}
            for p in (1, 2, 4, 8) for r in range(2) for m in ("calls", "time")]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("calls", "#", "count", "inclusive"),
                                                 Metric("time", "s", "time", "inclusive")])
    rep = build_report(exp, ReportOptions(plots=0, metric=metric, locations=ranks))
    assert rep.aggregate == said and rep.to_dict()["aggregate"] == said
    html = render_html(rep)
    assert f"modelled for {metric} ({said}" in html and f", {said}</div></header>" in html


def test_ranking_and_scaling_loss_columns_name_the_unit():
    """The ranking's 'at target' and 'now' columns and the scaling-loss tree's inclusive columns
    showed bare numbers (the unit only in the page heading and on the plots' axes)."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = [{"p": float(p), "rep": 0, "callpath": cp, "metric": "time", "value": v}
            for p in (1, 2, 4, 8) for cp, v in (("main", 10.0 + p), ("main->k", 1.0 * p))]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "ms", "time", "inclusive")])
    html = render_html(build_report(exp, ReportOptions(plots=0)))
    assert '<th class="num sortable">at target [ms]<span class="full">' in html
    assert '<th class="num sortable">now [ms]<span class="full">' in html
    assert '<th class="num">inclusive 1 [ms]</th><th class="num">inclusive 8 [ms]</th>' in html


def test_a_ratio_metric_gets_no_shares_and_no_run_cost(tmp_path, capsys):
    """A derived ratio (Jacobi's 'share = 100 * time / @time', here 'r = t / w') does not add up
    over callpaths: the report showed shares of its sum over callpaths and answered 'What will it
    cost?' with the sum of the callpaths' percentages (134.1).  Now no shares, no run cost, a note
    why; the values stay (main->a: t = p, w = 4, so r = p / 4: 2 at p = 8)."""
    from conftest import cli

    csv = tmp_path / "t.csv"
    csv.write_text("p,callpath,metric,value\n" + "".join(
        f"{p},{cp},t,{v}\n{p},{cp},w,4\n" for p in (1, 2, 4, 8)
        for cp, v in (("main", 10.0 + 2 * p), ("main->a", 1.0 * p), ("main->b", 1.0 * p))))
    code, out, err = cli(capsys, "report", csv, "-o", tmp_path / "r.html", "--derive", "r = t / w",
                         "--metric", "r", "--target", "p=8", "--min-share", "0", "--json")
    assert code == 0, err
    doc = cli_items(out, "report")[0]
    ks = {k["callpath"]: k for k in doc["kernels"]}
    assert set(ks) == {"main", "main->a", "main->b"}
    assert all(k["share_now"] is None and k["share_target"] is None for k in ks.values())
    assert ks["main->a"]["now"] == pytest.approx(8 / 4)
    assert not any(a["question"].startswith("What will it cost") for a in doc["answers"])
    assert any(n.startswith("No shares and no run cost: 'r' is derived as") for n in doc["notes"])


def test_breakdown_of_a_metric_summed_over_ranks_is_per_process():
    """Caliper's sum#... holds the whole run's time: the breakdown said "per process" next to
    LULESH's 212.3 s of MPI_Allreduce at 27 ranks (7.862 s each).  Divided by the process count on
    the x axis, by hand: main->k sums 3 s per rank, so 3 p, shown as 3 at every p."""
    import pandas as pd

    from perfcast import Experiment, Metric

    rows = [{"jobsize": float(p), "rep": 0, "callpath": cp, "metric": "sum#time", "value": v}
            for p in (8, 27, 64) for cp, v in (("main", 5.0 * p), ("main->k", 3.0 * p))]
    exp = Experiment(["jobsize"], pd.DataFrame(rows),
                     [Metric("sum#time", "s", "time", "inclusive", aggregate="sum over ranks")])
    rep = build_report(exp, ReportOptions(plots=0))
    bd = rep.cost_breakdown
    assert bd["values"]["k"] == pytest.approx([3.0, 3.0, 3.0])
    assert bd["values"]["main"] == pytest.approx([2.0, 2.0, 2.0])
    assert bd["per"].startswith("per process (the metric's sum over ranks divided by jobsize")
    assert "Exclusive cost per process (the metric&#39;s sum over ranks divided by jobsize" in render_html(rep)

"""Found by auditing perfcast as a new HPC user on the shared third-party data (regression tests for the
fixes): options that were silently misread, defaults that refused real profiles."""

import json

import pytest
from conftest import DATA, cli, one_error, require_data

LULESH = DATA / "thicket" / "lulesh_weak_scaling_cali"


def test_kernels_on_caliper_uses_the_time_metric_view_shows(capsys):
    # was "no cost metric to rank functions by: need ... a time metric" while listing four time metrics
    require_data(LULESH)
    code, out, err = cli(capsys, "kernels", LULESH, "--param", "jobsize", "--json")
    assert code == 0, err
    ks = json.loads(out)["items"][0]
    assert ks["metric"] == "avg#inclusive#sum#time.duration"
    # the five runs are jobsize 27 .. 343: every one gets a share column
    assert sorted(ks["coverage"]) == sorted(f"jobsize={p}" for p in (27, 64, 125, 216, 343))



@pytest.fixture
def three_scopes(tmp_path):
    """main (exclusive 1) with children a, b, c (exclusive 10, 20, 30 per process at p = 2, twice that at
    p = 4): four scopes with inclusive times."""
    path = tmp_path / "tree.csv"
    rows = ["p,callpath,metric,value,scope"]
    for p, grow in ((2, 1), (4, 2)):
        rows.append(f"{p},main,time,{1 + grow * 60},inclusive")
        rows += [f"{p},main->{n},time,{grow * v},inclusive" for n, v in (("a", 10), ("b", 20), ("c", 30))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _scope_names(out: str) -> list[str]:
    """First cells of a table's body rows (the lines with column separators, after the header)."""
    return [line.split("|")[0].strip() for line in out.splitlines() if "|" in line][1:]


@pytest.mark.parametrize("cmd", [["scaling-loss", "--mode", "weak"], ["view", "--at", "p=2", "--mode", "flat"]])
def test_limit_zero_prints_every_row_and_a_negative_limit_is_refused(capsys, three_scopes, cmd):
    # --limit 0 printed no row ("… 4 more scope(s)"), --limit -1 every row but the last (a Python slice)
    code, out, err = cli(capsys, cmd[0], three_scopes, *cmd[1:], "--limit", "0")
    assert code == 0, err
    assert sorted(_scope_names(out)) == ["a", "b", "c", "main"]
    code, out, err = cli(capsys, cmd[0], three_scopes, *cmd[1:], "--limit", "1")
    assert code == 0, err
    assert len(_scope_names(out)) == 1
    line = one_error(*cli(capsys, cmd[0], three_scopes, *cmd[1:], "--limit", "-1")[::2])
    assert "--limit" in line and "-1" in line


def test_systems_limit_zero_lists_every_match(capsys):
    code, out, err = cli(capsys, "systems", "EPYC 7742", "--limit", "0", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["matches"] > 25 and len(d["items"]) == d["matches"]
    line = one_error(*cli(capsys, "systems", "EPYC 7742", "--limit", "-2")[::2])
    assert "--limit" in line


RELEARN = DATA / "extrap" / "text" / "mpa" / "relearn_data.txt"  # parameters p, n


@pytest.mark.parametrize("cmd, opt", [(["predict", RELEARN, "--at", "p=64,p=128"], "--at"),
                                      (["model", RELEARN, "--target", "n=5000,p=64,n=6000"], "--target")])
def test_a_parameter_given_twice_is_refused(capsys, cmd, opt):
    # the last value won silently: `--at p=64,p=128` predicted at p=128 (and named only 'p=128' in its error)
    line = one_error(*cli(capsys, *cmd)[::2])
    assert line.startswith(f"perfcast: error: {opt} '{cmd[3]}'") and "given twice" in line


@pytest.mark.parametrize("cmd", [["show", LULESH, "--depth", "-1"], ["show", LULESH, "--max-callpaths", "-1"],
                                 ["view", LULESH, "--at", "jobsize=27", "--depth", "-1"]])
def test_negative_tree_depths_are_refused(capsys, cmd):
    # were accepted: `show` drew no tree ("… 46 more callpath(s)"), `view` hid every scope
    line = one_error(*cli(capsys, *cmd)[::2])
    assert f"'{cmd[-2]}'" in line and "-1" in line


def test_the_same_input_twice_is_refused(capsys, tmp_path):
    # `show run.csv run.csv` (an overlapping shell glob) read every value twice, as two repetitions:
    # the noise of every point measured as zero
    run = tmp_path / "run.csv"
    run.write_text("p,callpath,metric,value\n1,a,time,1\n2,a,time,2\n4,a,time,4\n")
    alias = tmp_path / "sub" / ".." / "run.csv"
    (tmp_path / "sub").mkdir()
    line = one_error(*cli(capsys, "show", run, alias)[::2])
    assert line == (f"perfcast: error: {alias}: given twice (also as {run}): its runs would count twice, as further "
                    "repetitions")
    # a copy is another input: its values are the second repetition of each point
    copy = tmp_path / "copy.csv"
    copy.write_bytes(run.read_bytes())
    code, out, err = cli(capsys, "show", run, copy, "--json")
    assert code == 0, err
    assert [pt["repetitions"] for pt in json.loads(out)["items"][0]["points"]] == [2, 2, 2]


def test_collect_names_a_missing_campaign_file(capsys, tmp_path):
    # a mistyped campaign name was read as the command to run: "give the parameters with -P NAME=V1,V2
    # (or use a YAML campaign file)"
    missing = tmp_path / "campagin.yaml"
    line = one_error(*cli(capsys, "collect", missing)[::2])
    assert line == f"perfcast: error: {missing}: campaign file: no such file"
    assert list(tmp_path.iterdir()) == []


def test_model_target_with_an_unknown_parameter_is_refused(capsys):
    # relearn_data.txt declares PARAMETER p and PARAMETER n; q was ignored and the models ranked at p, n
    for extra in ([], ["--json"], ["--by", "growth"]):
        line = one_error(*cli(capsys, "model", RELEARN, "--target", "p=1024,n=9000,q=5", *extra)[::2])
        assert line == "perfcast: error: --target: unknown parameter(s) q; the experiment has: p, n"


@pytest.fixture
def linear_time(tmp_path):
    """time = -5 + 10 p exactly at p = 1 .. 16: below zero for p < 0.5."""
    path = tmp_path / "lin.csv"
    path.write_text("p,callpath,metric,value\n" + "".join(f"{p},app,time,{-5 + 10 * p}\n" for p in (1, 2, 4, 8, 16)))
    return path


def test_model_marks_a_negative_time_at_the_target_as_predict_does(capsys, linear_time):
    # the "at target" column printed -2.5 for a time with no mark and no note; predict marks it (!)
    code, out, err = cli(capsys, "model", linear_time, "--target", "p=0.25")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.lstrip().startswith("1 "))
    cells = [c.strip() for c in row.split("|")]
    value, bounds = cells[7].split(" (!) ")        # predict's value, mark and interval
    assert float(value) == pytest.approx(-5 + 10 * 0.25) and bounds.startswith("[")
    note = "app time: p=0.25: the model predicts a negative value here: it does not extrapolate this far"
    assert f"perfcast: note: {note}" in err.splitlines()
    code, out, err = cli(capsys, "predict", linear_time, "--at", "p=0.25", "--json")
    assert code == 0, err
    item = json.loads(out)["items"][0]
    assert item["value"] == pytest.approx(-2.5) and note.split(": ", 2)[2] in item["notes"]


SPEC_FP = DATA / "spec" / "spec17ml_input_FP_rate.csv"
BASE, TARGET = "cpu2017-20191014-19065", "cpu2017-20190625-15882"   # EPYC 7742, Xeon Gold 6248


def test_report_projects_a_profile_without_counters_with_method_mean(capsys, tmp_path):
    # report --base/--machine on Caliper times only: "... or use --method mean", an option report lacked
    import numpy as np
    import pandas as pd

    require_data(SPEC_FP)
    out_html = tmp_path / "r.html"
    code, out, err = cli(capsys, "report", LULESH, "--param", "jobsize", "-o", out_html, "--base", BASE,
                         "--machine", TARGET, "--method", "mean", "--apmt", "off", "--json")
    assert code == 0, err
    proj = json.loads(out)["items"][0]["projections"]
    system, _, factor, compute, comm, total = proj["values"][0]
    # the factor by hand: geometric mean over the FP rate benchmarks both systems published of t_target / t_base
    spec = pd.read_csv(SPEC_FP)
    row = {s: spec[spec["file"] == f"{s}.csv"].iloc[0] for s in (BASE, TARGET)}
    ratios = [row[TARGET][c] / row[BASE][c] for c in spec.columns if c.startswith("t_")
              if np.isfinite(row[TARGET][c]) and np.isfinite(row[BASE][c])]
    assert len(ratios) == 13 and factor == pytest.approx(float(np.exp(np.mean(np.log(ratios)))), rel=1e-12)
    # the projected time is the measured one (largest run, as `perfcast project` reads it) times the factor
    code, pout, err = cli(capsys, "project", LULESH, "--param", "jobsize", "--at", "jobsize=343", "--base", BASE,
                          "--target", TARGET, "--method", "mean", "--json")
    assert code == 0, err
    base_s = json.loads(pout)["items"][0]["compute_base"]
    assert system == TARGET and comm is None and compute == pytest.approx(factor * base_s) and total == compute


def test_report_says_when_no_callpath_reaches_min_share(capsys, tmp_path):
    # 150 equal callpaths hold 1/150 = 0.67 % each, below the default --min-share 1 %: the report had no
    # ranking section at all (and no plots, no answers), its summary line "0 kernel(s) ranked"
    csv = tmp_path / "flat.csv"
    # f0 a hair above the others at p=1 only, f1 at p=2 only: no timer holds all the others at every
    # point (a whole-run timer would be the root of the shares, as in `model` and `advise`)
    eps = {(0, 1): 1e-6, (1, 2): 1e-6}
    csv.write_text("p,callpath,metric,value\n" + "".join(f"{p},f{i},time,{2.0 * p + eps.get((i, p), 0.0)!r}\n"
                                                          for i in range(150) for p in (1, 2, 4, 8)))
    html = tmp_path / "r.html"
    code, out, err = cli(capsys, "report", csv, "-o", html, "--json")
    assert code == 0, err
    rep = json.loads(out)["items"][0]
    assert rep["kernels"] == [] and "ranking" in rep["sections"]
    assert rep["other"]["count"] == 150 and rep["other"]["insignificant"] == 150
    assert rep["other"]["max_share_now"] == pytest.approx(1 / 150)
    page = html.read_text()
    assert 'id="ranking"' in page and "150 more callpath(s), 150 below " in page
    code, out, err = cli(capsys, "report", csv, "-o", tmp_path / "r2.html")
    assert code == 0, err
    assert "0 kernel(s) ranked (150 more below --min-share " in out


def test_view_heading_says_ranks_are_combined_only_when_there_are_ranks(capsys, tmp_path):
    # Caliper avg# values (one per run, the mean over ranks) were headed "ranks sum, total 47.25"
    flat = tmp_path / "run.csv"
    flat.write_text("p,callpath,metric,value,scope\n4,main,time,5,inclusive\n4,main->a,time,3,inclusive\n")
    code, out, err = cli(capsys, "view", flat, "--json")
    assert code == 0, err
    head = json.loads(out)["items"][0]
    assert head["combined"] == "one value per run" and head["total"] == pytest.approx(5)
    code, out, err = cli(capsys, "view", flat)
    assert code == 0 and "one value per run" in out.splitlines()[0] and "ranks sum" not in out
    per_rank = tmp_path / "ranks.csv"
    per_rank.write_text("p,callpath,metric,value,scope,rank\n" + "".join(
        f"2,main,time,{5 + r},inclusive,{r}\n2,main->a,time,3,inclusive,{r}\n" for r in (0, 1)))
    code, out, err = cli(capsys, "view", per_rank, "--json")
    assert code == 0, err
    head = json.loads(out)["items"][0]
    assert head["combined"] is None and head["ranks"] == "sum" and head["total"] == pytest.approx(5 + 6)
    require_data(LULESH)
    code, out, err = cli(capsys, "view", LULESH, "--param", "jobsize", "--at", "jobsize=27")
    assert code == 0 and "mean over ranks in the file" in out.splitlines()[0]


def test_statistic_on_an_input_of_values_is_said_to_be_ignored(capsys, tmp_path):
    # --statistic mean on an Extra-P text file (repetitions, not statistics) or on a stored experiment was
    # accepted without a word, and the values stayed what they were
    mpi = DATA / "extrap" / "mpi_data.csv"
    for inp in (RELEARN,):
        code, out, err = cli(capsys, "show", inp, "--statistic", "mean")
        assert code == 0 and "--statistic applies to inputs holding statistics" in err and "extrap-text" in err
    store = tmp_path / "mpi.perfcast"
    code, _, err = cli(capsys, "import", mpi, "-o", store)
    assert code == 0, err
    code, out, err = cli(capsys, "show", store, "--statistic", "mean")
    assert code == 0 and "ignored for a stored experiment" in err
    # where it applies it is used, without the warning: mean and median of mpi_data.csv differ
    code, _, err = cli(capsys, "show", mpi, "--statistic", "mean")
    assert code == 0 and "--statistic applies" not in err


@pytest.mark.parametrize("extra, named", [(["--timer", "solve=main()"], "--timer"),
                                          (["--strong", "64,128"], "--strong"),
                                          (["--size-ratio", "2", "--scaling", "weak"], "--size-ratio, --scaling")])
def test_breakdown_options_without_breakdown_are_refused(capsys, extra, named):
    # were accepted and ignored: the per-series predictions came out as without them
    line = one_error(*cli(capsys, "predict", RELEARN, "--at", "p=64,n=5000", *extra)[::2])
    assert line == f"perfcast: error: {named}: only with --breakdown (the APMT total and its parts)"


def test_nested_logarithm_in_an_expectation_is_named():
    # 'O(log log p)' was refused as naming an unknown parameter 'log'
    from perfcast.analysis.expectations import parse_order
    from perfcast.errors import PerfcastError

    with pytest.raises(PerfcastError, match=r"'O\(log log p\)': log of log\(\.\.\.\) is not a PMNF term"):
        parse_order("O(log log p)", ["p"])
    # a parameter that is named like nothing special still reads: log^2 p times n
    from fractions import Fraction

    assert parse_order("O(log^2 p n)", ["p", "n"]) == {"p": (Fraction(0), 2), "n": (Fraction(1), 0)}


def test_where_performance_is_lost_says_why_a_part_exceeds_the_whole(capsys, tmp_path):
    # LULESH 27 -> 343: MPI_Allreduce's excess work is 16.3 % of the 343 run, the run's 10.2 % in all (MPI_Wait
    # got faster): "16.3% ... of 10.2% in all" read as a contradiction
    require_data(LULESH)
    code, out, err = cli(capsys, "report", LULESH, "--param", "jobsize", "-o", tmp_path / "r.html", "--apmt", "off",
                         "--json")
    assert code == 0, err
    lost = next(a for a in json.loads(out)["items"][0]["answers"] if a["question"] == "Where is performance lost?")
    # weak scaling loss by hand from the view of the two runs: (C_343 - C_27) / T_343
    views = {}
    for j in (27, 343):
        code, vout, err = cli(capsys, "view", LULESH, "--param", "jobsize", "--at", f"jobsize={j}", "--json")
        assert code == 0, err
        views[j] = json.loads(vout)["items"][0]
    c = {j: next(n["exclusive"] for n in views[j]["nodes"] if n["path"] == lost["callpath"]) for j in views}
    assert lost["callpath"] == "main->lulesh.cycle->TimeIncrement->MPI_Allreduce"
    assert lost["value"] == pytest.approx((c[343] - c[27]) / views[343]["total"], rel=1e-6)
    assert lost["value"] > lost["total"] and "other scopes gained time back" in lost["answer"]


def test_flat_profile_error_does_not_speak_of_views_in_other_commands(capsys):
    line = one_error(*cli(capsys, "scaling-loss", RELEARN, "--mode", "strong")[::2])
    assert "views need" not in line and "calling-context profile" in line and "scope column" in line


def test_view_warns_of_negative_exclusive_costs(capsys, tmp_path):
    # Caliper max#...: the maxima of the children add up to more than their parent's maximum, and view printed
    # "lulesh.cycle ... exclusive -20.63" as if it were a measured time
    require_data(LULESH)
    metric = "max#inclusive#sum#time.duration"
    code, out, err = cli(capsys, "view", LULESH, "--param", "jobsize", "--at", "jobsize=343", "--metric", metric,
                         "--json")
    assert code == 0, err
    d = json.loads(out)["items"][0]
    nodes = {n["path"]: n for n in d["nodes"]}
    # exclusive by hand: the inclusive value less the children's inclusive values
    excl = {p: n["inclusive"] - sum(c["inclusive"] for q, c in nodes.items() if q.rsplit("->", 1)[0] == p and "->" in q)
            for p, n in nodes.items()}
    negative = sorted(p for p, v in excl.items() if v < -1e-9)
    assert negative and all(nodes[p]["exclusive"] == pytest.approx(excl[p]) for p in negative)
    [w] = d["warnings"]
    assert w.startswith(f"{len(negative)} scope(s) with a negative exclusive {metric}")
    assert "maximum or minimum over ranks does not add up" in w
    code, out, err = cli(capsys, "view", LULESH, "--param", "jobsize", "--at", "jobsize=343")
    assert code == 0 and "perfcast: warning:" not in err          # avg#: no negative exclusive time
    # a tidy profile whose children exceed their parent: said as an inconsistent tree
    csv = tmp_path / "t.csv"
    csv.write_text("callpath,metric,value,scope\napp,time,1,inclusive\napp->solve,time,3,inclusive\n")
    code, out, err = cli(capsys, "view", csv)
    assert code == 0
    assert "perfcast: warning: 1 scope(s) with a negative exclusive time (e.g. app: -2)" in err
    assert "the profile's tree is not consistent" in err


@pytest.mark.parametrize("cmd", [["export", RELEARN, "--to", "extrap-text", "-o", "-"], ["import", RELEARN, "-o", "-"],
                                 ["report", RELEARN, "-o", "-"], ["machine", "--write", "-"],
                                 ["collect", "-o", "-", "-P", "p=1", "--", "true"]])
def test_dash_is_not_taken_for_a_file_name(capsys, tmp_path, monkeypatch, cmd):
    # `-o -` (standard output to most tools) wrote a file, or a store and its journal, named '-'
    monkeypatch.chdir(tmp_path)
    line = one_error(*cli(capsys, *cmd)[::2])
    assert line.startswith("perfcast: error: '-' is not an output file here")
    assert list(tmp_path.iterdir()) == []


def test_a_directory_read_by_one_reader_names_the_files_of_another_format_it_left_out(capsys, tmp_path):
    # a tidy CSV beside the .cali file of a run was dropped without a word
    import shutil

    cali = DATA / "formats" / "caliper" / "caliper-lulesh-cali" / "lulesh-annotation-profile.cali"
    require_data(cali)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(cali, run / cali.name)
    (run / "README.txt").write_text("notes on this run\n")          # not a profile: not named
    code, out, err = cli(capsys, "show", run, "--json")
    assert code == 0 and "left out" not in err
    (run / "extra.csv").write_text("p,callpath,metric,value\n1,a,time,1\n2,a,time,2\n")
    code, out, err = cli(capsys, "show", run, "--json")
    assert code == 0
    assert (f"perfcast: warning: {run}: 1 file(s) of another format left out (extra.csv): the caliper reader reads "
            "its own files only; give the others as inputs of their own") in err.splitlines()
    assert json.loads(out)["items"][0]["meta"]["sources"] == [str(run / cali.name)]


def test_a_directory_names_a_file_of_its_format_under_another_ending(capsys, tmp_path):
    # a .cali renamed .txt was left out without a word: 4 points instead of 5
    require_data(LULESH)
    run = tmp_path / "runs"
    run.mkdir()
    files = sorted(LULESH.glob("*.cali"))
    assert len(files) == 5
    for f in files:
        (run / f.name).write_bytes(f.read_bytes())
    code, out, err = cli(capsys, "show", run, "--json")
    assert code == 0 and "left out" not in err
    (run / "64_cores.cali").rename(run / "64_cores.txt")
    code, out, err = cli(capsys, "show", run, "--json")
    assert code == 0
    assert (f"perfcast: warning: {run}: 1 file(s) in the caliper format by their content left out (64_cores.txt): "
            "the caliper reader reads the files ending in .cali; rename them to read them") in err.splitlines()
    assert len(json.loads(out)["items"][0]["meta"]["sources"]) == 4


@pytest.mark.parametrize("extra, line", [
    (["--method", "mean"], "perfcast: error: --method: only with --base and --machine (the projection)"),
    (["--apmt", "off", "--timer", "solve=main()", "--comm-max-procs", "4"],
     "perfcast: error: --timer, --comm-max-procs: not with --apmt off (the APMT breakdown is left out)")])
def test_report_options_of_a_part_left_out_are_refused(capsys, tmp_path, extra, line):
    # were accepted and ignored
    out = tmp_path / "r.html"
    assert one_error(*cli(capsys, "report", RELEARN, "-o", out, *extra)[::2]) == line
    assert not out.exists()


def test_scaling_loss_of_a_sum_over_ranks_is_per_process(capsys):
    # Caliper sum#: one value per run summed over its ranks; the weak-scaling loss was computed on the sums
    # (92.9 % "excess work" from 27 to 343 ranks).  Caliper's avg# is the same sum over the ranks: both give
    # the same per-process losses
    require_data(LULESH)
    res = {}
    for agg in ("sum", "avg"):
        code, out, err = cli(capsys, "scaling-loss", LULESH, "--param", "jobsize", "--mode", "weak", "--from",
                             "jobsize=27", "--to", "jobsize=343", "--metric", f"{agg}#inclusive#sum#time.duration",
                             "--json")
        assert code == 0, err
        res[agg] = json.loads(out)["items"][0]
    s, a = res["sum"]["pairs"][0], res["avg"]["pairs"][0]
    assert s["loss"] == pytest.approx(a["loss"], rel=1e-4) and 0.05 < s["loss"] < 0.2
    assert res["sum"]["ranks"] == "summed in the file, divided by jobsize"
    # per scope by hand from the sums `view` shows: (C_343 / 343 - C_27 / 27) / (T_343 / 343)
    sums = {}
    for j in (27, 343):
        code, out, err = cli(capsys, "view", LULESH, "--param", "jobsize", "--at", f"jobsize={j}", "--metric",
                             "sum#inclusive#sum#time.duration", "--json")
        assert code == 0, err
        v = json.loads(out)["items"][0]
        sums[j] = ({n["path"]: n["exclusive"] for n in v["nodes"]}, v["total"])
    for r in s["rows"][:10]:
        c27, c343 = sums[27][0].get(r["path"], 0.0), sums[343][0].get(r["path"], 0.0)
        assert r["exclusive_loss"] == pytest.approx((c343 / 343 - c27 / 27) / (sums[343][1] / 343), rel=1e-9)


def test_a_directory_of_single_file_profiles_names_its_files(capsys):
    # a directory holding a pyinstrument JSON (a reader of files) was "unknown format: no reader recognises
    # this directory (formats: ...)"
    d = DATA / "formats" / "other" / "pyinstrument-hatchet-json"
    require_data(d)
    line = one_error(*cli(capsys, "show", d)[::2])
    assert line == (f"perfcast: error: {d}: unknown format: no reader reads this directory as a whole; the files in "
                    "it that a reader recognises: pyinstrument-hatchet-profile.json (pyinstrument): give them as inputs")
    code, out, err = cli(capsys, "show", d / "pyinstrument-hatchet-profile.json")
    assert code == 0, err

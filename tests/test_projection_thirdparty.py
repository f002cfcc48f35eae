"""`perfcast project` on third-party profiles (issue 19, item 5): Caliper LULESH and a Score-P CUBE set
projected with the mean of the SPEC benchmarks (no counters needed), the time metric and the rank
combination chosen and stated, the factor explained.  Expectations by hand: the factor from the SPEC
table's own rows (read here with csv, not through perfcast), the time from the profile's values."""

import csv
import math

import pytest

from perfcast.cli import main
from perfcast.io import ReadOptions, load

from conftest import DATA, cli_items, cli_json, require_data

FP_RATE = DATA / "spec" / "spec17ml_input_FP_rate.csv"
LULESH = DATA / "thicket" / "lulesh_weak_scaling_cali"
CUBESET = DATA / "extrap" / "cubeset" / "single_parameter"
ALLGATHER = DATA / "formats" / "hpctoolkit" / "hpctoolkit-allgather-database"
BASE = "cpu2017-20191014-19065"     # Dell EPYC 7742, 2 x 64 cores, 128 copies
TARGET = "cpu2017-20190625-15882"   # ASUSTeK Xeon Gold 6248, 2 x 20 cores, 80 copies (SMT)



@pytest.fixture(autouse=True)
def _shared_data():
    """Every test here reads the shared data: missing files fail (conftest.require_data), never skip."""
    for path in (FP_RATE, LULESH):
        require_data(path)


def _spec_rows():
    with open(FP_RATE, newline="") as f:
        return {r["file"].removesuffix(".csv"): r for r in csv.DictReader(f)}


def _hand_factor(base, target):
    """Geometric mean over the benchmarks both rows publish of t_<bench>(target) / t_<bench>(base)."""
    rows = _spec_rows()
    b, t = rows[base], rows[target]
    logs = []
    for col in b:
        if col.startswith("t_") and b[col] and t[col] and float(b[col]) > 0 and float(t[col]) > 0:
            logs.append(math.log(float(t[col]) / float(b[col])))
    return math.exp(sum(logs) / len(logs)), len(logs), (b, t)


def _run(capsys, *args):
    capsys.readouterr()
    code = main(["project", *map(str, args)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _root_total(exp, metric, point):
    """Sum of the metric's values at the calling-context tree's roots at ``point`` (mean over reps)."""
    d = exp.data
    d = d[(d["metric"] == metric) & (d["callpath"].astype(str).isin(set(exp.tree.roots())))]
    for k, v in point.items():
        d = d[d[k] == v]
    return float(d.groupby("rep")["value"].sum().mean())


def test_lulesh_caliper_projected_by_the_mean_of_the_spec_ratios(capsys):
    factor, n, (b, t) = _hand_factor(BASE, TARGET)
    assert n == 13  # the FP rate benchmarks, both published
    exp = load([LULESH], options=ReadOptions(parameters=("jobsize",)))
    avg = _root_total(exp, "avg#inclusive#sum#time.duration", {"jobsize": 27})
    # the file's own numbers agree: the mean over ranks is the sum over the 27 ranks / 27
    assert avg == pytest.approx(_root_total(exp, "sum#inclusive#sum#time.duration", {"jobsize": 27}) / 27, rel=1e-4)
    code, out, err = _run(capsys, LULESH, "--param", "jobsize", "--at", "jobsize=27", "--db", FP_RATE,
                          "--base", BASE, "--target", TARGET, "--method", "mean", "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["compute_source"] == "mean of the benchmarks" and res["surrogate"] is None
    bt = res["base_time"]
    assert bt["metric"] == "avg#inclusive#sum#time.duration" and bt["unit"] == "sec"
    assert bt["ranks"].startswith("mean over ranks") and "avg#" in bt["ranks"]
    assert set(bt["other_time_metrics"]) == {f"{a}#inclusive#sum#time.duration" for a in ("min", "max", "sum")}
    assert res["compute_base"] == pytest.approx(avg, rel=1e-12)
    tgt, = res["targets"]
    assert tgt["compute_factor"] == pytest.approx(factor, rel=1e-12)
    assert tgt["compute"] == pytest.approx(avg * factor, rel=1e-12) and tgt["total"] == tgt["compute"]
    fd = res["factor_definition"]
    assert fd["per"] == "copy" and fd["ratio"] == "target / base" and len(fd["benchmarks"]) == 13
    assert fd["systems"][BASE] == {"copies": float(b["threads_or_copies"]), "cores": 128.0}
    assert fd["systems"][TARGET] == {"copies": 80.0, "cores": 40.0}
    # the target ran two copies per core (SMT), the base one: said
    assert any("2 copies per core, the base 1" in n for n in res["notes"])

    # the slowest rank instead: Caliper's max# metric, named in the output
    code, out, err = _run(capsys, LULESH, "--param", "jobsize", "--at", "jobsize=27", "--db", FP_RATE,
                          "--base", BASE, "--target", TARGET, "--method", "mean", "--metric",
                          "max#inclusive#sum#time.duration")
    assert code == 0, err
    mx = _root_total(exp, "max#inclusive#sum#time.duration", {"jobsize": 27})
    assert "time: metric max#inclusive#sum#time.duration [sec], max over ranks" in out
    assert "per-copy runtime ratio target/base" in out and "per copy" in out
    row = next(line for line in out.splitlines() if line.startswith(f" {TARGET}"))
    cells = [c.strip() for c in row.split("|")]
    assert float(cells[2]) == pytest.approx(factor, abs=5e-4)
    assert float(cells[3]) == pytest.approx(mx * factor, rel=5e-4)


def test_mpi_regions_without_a_pmpi_profile_are_said_with_their_share(capsys):
    # LULESH at 27 ranks spends 39.6 % of its time in MPI regions (waits, Allreduce), read here with
    # caliper-reader: topmost MPI_* regions' avg#inclusive time over the roots'.  Without a PMPI profile
    # that time is scaled by the compute factor: it was not said
    import caliperreader as cr   # a dependency of perfcast (pyproject)
    r = cr.CaliperReader()
    r.read(str(LULESH / "27_cores.cali"))
    roots = mpi = 0.0
    for rec in r.records:
        path = rec.get("path")
        path = path if isinstance(path, list) else ([path] if path else [])
        v = float(rec.get("avg#inclusive#sum#time.duration", 0) or 0)
        roots += v if len(path) == 1 else 0.0
        if path and path[-1].startswith("MPI_") and not any(q.startswith("MPI_") for q in path[:-1]):
            mpi += v
    code, out, err = _run(capsys, LULESH, "--param", "jobsize", "--at", "jobsize=27", "--db", FP_RATE,
                          "--base", BASE, "--target", TARGET, "--method", "mean", "--json")
    assert code == 0, err
    got = cli_items(out, "projection")[0]["mpi_regions_in_compute"]
    assert got["share"] == pytest.approx(mpi / roots, rel=1e-4) and 0.3 < got["share"] < 0.5
    assert {"MPI_Allreduce", "MPI_Wait", "MPI_Waitall"} <= set(got["routines"])
    code, out, err = _run(capsys, LULESH, "--param", "jobsize", "--at", "jobsize=27", "--db", FP_RATE,
                          "--base", BASE, "--target", TARGET, "--method", "mean")
    assert code == 0 and "MPI regions" in out and "no PMPI profile" in out


def test_cube_set_projected_with_times_only(capsys):
    factor, _, _ = _hand_factor(BASE, TARGET)
    exp = load(sorted(CUBESET.iterdir()))
    # CUBE's "time" is exclusive: the whole program is the sum over every callpath (one rank here)
    d = exp.data[(exp.data["metric"] == "time") & (exp.data["x"] == 1000)]
    assert d["rank"].nunique() == 1
    measured = float(d.groupby("rep")["value"].sum().mean())
    code, out, err = _run(capsys, CUBESET, "--at", "x=1000", "--db", FP_RATE, "--base", BASE, "--target", TARGET,
                          "--method", "mean", "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["base_time"]["metric"] == "time" and res["base_time"]["ranks"] == "mean over 1 rank"
    assert res["compute_base"] == pytest.approx(measured, rel=1e-12)
    assert res["targets"][0]["compute"] == pytest.approx(measured * factor, rel=1e-12)
    # the default method (auto) takes the only one times allow: the same hand factor, said in a note
    code, out, err = _run(capsys, CUBESET, "--at", "x=1000", "--db", FP_RATE, "--base", BASE, "--target", TARGET,
                          "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["targets"][0]["compute"] == pytest.approx(measured * factor, rel=1e-12)
    assert any("no counter signature" in n and "allows" in n for n in res["notes"])
    # a method that needs counters, asked by name: one line that names the way out
    code, out, err = _run(capsys, CUBESET, "--at", "x=1000", "--db", FP_RATE, "--base", BASE, "--target", TARGET,
                          "--method", "surrogate")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--method mean" in err


def test_per_rank_values_are_combined_as_asked(capsys):
    require_data(ALLGATHER)
    factor, _, _ = _hand_factor(BASE, TARGET)
    exp = load([ALLGATHER])
    d = exp.data[exp.data["metric"] == "CPUTIME (E)"]
    locations = len(d[["rank", "thread"]].drop_duplicates())
    assert locations == 20
    total = float(d["value"].sum())  # exclusive: every callpath and location of the one run
    per_loc = d.groupby(["rank", "thread"])["value"].sum()
    for ranks, expect in (("mean", total / locations), ("sum", total), ("max", float(per_loc.max()))):
        args = [ALLGATHER, "--db", FP_RATE, "--base", BASE, "--target", TARGET, "--method", "mean", "--json"]
        code, out, err = _run(capsys, *args, *([] if ranks == "mean" else ["--ranks", ranks]))
        assert code == 0, err
        res = cli_items(out, "projection")[0]
        assert res["base_time"]["metric"] == "CPUTIME (E)"
        assert res["base_time"]["ranks"] == f"{ranks} over 20 locations (10 rank(s) x 2 threads)"
        assert res["compute_base"] == pytest.approx(expect, rel=1e-9)
        assert res["targets"][0]["compute"] == pytest.approx(expect * factor, rel=1e-9)


def test_bad_metric_choices_are_one_line(capsys, tmp_path):
    for metric, msg in (("nosuch", "no metric 'nosuch'"), ("visits", "is not a time in seconds")):
        code, _, err = _run(capsys, CUBESET, "--at", "x=1000", "--db", FP_RATE, "--base", BASE, "--target", TARGET,
                            "--method", "mean", "--metric", metric)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    app = tmp_path / "app.csv"
    app.write_text("callpath,metric,value\nmain,visits,3\n")
    code, _, err = _run(capsys, app, "--db", FP_RATE, "--base", BASE, "--target", TARGET, "--method", "mean")
    assert code == 2 and "no time metric to project" in err and len(err.strip().splitlines()) == 1, err


def test_time_units_are_converted_and_cycles_are_not_a_time(capsys, tmp_path):
    factor, _, _ = _hand_factor(BASE, TARGET)
    app = tmp_path / "app.csv"
    # a tidy profile: main and its child; runtime in ms, inclusive; cycles (a "time" by unit guess, not seconds)
    app.write_text("callpath,metric,value,unit,kind,scope\n"
                   "main,runtime,2500,ms,time,inclusive\nmain->solve,runtime,2000,ms,time,inclusive\n"
                   "main,clk,7e9,cycles,time,inclusive\n")
    code, out, err = _run(capsys, app, "--db", FP_RATE, "--base", BASE, "--target", TARGET, "--method", "mean",
                          "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["base_time"]["metric"] == "runtime" and res["base_time"]["other_time_metrics"] == []
    assert res["compute_base"] == pytest.approx(2.5) and res["targets"][0]["compute"] == pytest.approx(2.5 * factor)
    code, _, err = _run(capsys, app, "--db", FP_RATE, "--base", BASE, "--target", TARGET, "--method", "mean",
                        "--metric", "clk")
    assert code == 2 and "not a time in seconds" in err and len(err.strip().splitlines()) == 1, err


RELEARN = DATA / "extrap" / "text" / "mpa" / "relearn_data.txt"


def test_flat_timers_with_a_whole_run_timer_are_not_summed(capsys, tmp_path):
    require_data(RELEARN)
    # Relearn's flat timers: main() holds Simulation loop, which holds Connectivity update, ...; the
    # run is main(): its two repetitions at p = 32, n = 5000 in the file (DATA 406.498 405.58), not the
    # sum of the 14 timers (about 1975 s, nested time counted up to 5 times)
    factor, _, _ = _hand_factor(BASE, TARGET)
    code, out, err = _run(capsys, RELEARN, "--at", "p=32,n=5000", "--db", FP_RATE, "--base", BASE,
                          "--target", TARGET, "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["compute_base"] == pytest.approx((406.498 + 405.58) / 2, rel=1e-12)
    assert "whole-run timer main()" in res["base_time"]["ranks"]
    assert res["targets"][0]["compute"] == pytest.approx((406.498 + 405.58) / 2 * factor, rel=1e-12)
    # no timer holds all the others at every point (a > b at p = 2, b > a at p = 4): summed, and said
    f = tmp_path / "flat.txt"
    f.write_text("PARAMETER p\n\nPOINTS ( 2 ) ( 4 )\n\nMETRIC time\n\nREGION a\nDATA 2\nDATA 1\n\n"
                 "REGION b\nDATA 1\nDATA 3\n")
    code, out, err = _run(capsys, f, "--at", "p=4", "--db", FP_RATE, "--base", BASE, "--target", TARGET, "--json")
    assert code == 0, err
    res = cli_items(out, "projection")[0]
    assert res["compute_base"] == pytest.approx(1 + 3)
    assert "summed over 2 callpaths" in res["base_time"]["ranks"] and "not nested" in res["base_time"]["ranks"]


def test_ranks_on_caliper_avg_metric_is_said_once(capsys):
    """`project --ranks max` on LULESH's Caliper avg# metric (one value per run: the mean over the
    ranks, combined in the file -- the file's avg# root equals its sum# root over 27 ranks, read
    here) said so twice: the note every command gives (stderr; JSON ranks_not_combined) and the time
    line's own '--ranks max has nothing to combine'.  One note now, in text and JSON."""
    exp = load([LULESH], options=ReadOptions(parameters=("jobsize",)))
    avg = _root_total(exp, "avg#inclusive#sum#time.duration", {"jobsize": 27})
    assert avg == pytest.approx(_root_total(exp, "sum#inclusive#sum#time.duration", {"jobsize": 27}) / 27, rel=1e-4)
    args = (LULESH, "--param", "jobsize", "--at", "jobsize=27", "--db", FP_RATE, "--base", BASE, "--target", TARGET,
            "--method", "mean", "--ranks", "max")
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    text = out + err
    assert text.count("--ranks max") == 1 and "nothing is combined over ranks" in err
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    doc = cli_json(out, "projection")
    assert doc["ranks_not_combined"]["metrics"] == [{"metric": "avg#inclusive#sum#time.duration",
                                                      "holds": "mean over ranks in the file"}]
    bt = doc["items"][0]["base_time"]
    assert "--ranks" not in bt["ranks"] and bt["seconds"] == pytest.approx(avg, rel=1e-12)

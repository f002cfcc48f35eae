"""The analysis commands: metrics --derive, view, waste, scaling-loss (JSON numbers checked by hand,
errors as one located line and exit 2)."""


import pytest

from perfcast import store
from perfcast.cli import main

from conftest import cli_json

# exclusive cycles/instructions of main -> solve -> kernel, main -> io, at p = 2, 4, 8 and 2 ranks;
# rank 1 doubles rank 0.
CYC = {"main": 10, "main->solve": 20, "main->solve->kernel": 60, "main->io": 10}
INS = {"main": 10, "main->solve": 10, "main->solve->kernel": 30, "main->io": 0}


@pytest.fixture
def csv(tmp_path):
    lines = ["p,callpath,metric,value,rank,unit"]
    for p in (2, 4, 8):
        for r in (0, 1):
            for cp in CYC:
                lines.append(f"{p},{cp},cycles,{CYC[cp] * p * (r + 1)},{r},")
                lines.append(f"{p},{cp},instructions,{INS[cp] * p * (r + 1)},{r},")
    path = tmp_path / "counters.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def js(capsys, *args):
    """The command's --json envelope (checked against the package's JSON Schema) -- its items, or
    for a command that produces one object, that object."""
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    doc = cli_json(out, args[0])
    return doc["items"][0] if args[0] in ("view", "scaling-loss") else doc


def tidy_scopes(tmp_path, csv):
    """The tidy reader leaves scope unknown; declare the counters exclusive via a stored copy."""
    from perfcast.io import load

    e = load([csv])
    metrics = {n: m.__class__(m.name, m.unit, "count", "exclusive") for n, m in e.metrics.items()}
    out = tmp_path / "c.perfcast"
    store.write(e.replace(metrics=metrics), out)
    return out


def test_metrics_derive_store_and_list(capsys, tmp_path, csv):
    exp = tidy_scopes(tmp_path, csv)
    res = js(capsys, "metrics", exp)
    assert [(m["index"], m["name"]) for m in res["items"]] == [(0, "cycles"), (1, "instructions")]
    out = tmp_path / "d.perfcast"
    res = js(capsys, "metrics", exp, "--derive", "CPI = $0 / instructions", "--derive", "share = 100 * cycles / @cycles",
             "-o", out)
    rep = {r["name"]: r for r in res["derived"]}
    # io has no instructions: 3 points x 2 ranks empty cells in each scope of CPI
    assert rep["CPI"]["empty"] == 6 and rep["CPI (inc)"]["empty"] == 6 and rep["share"]["empty"] == 0
    back = store.read(out)
    assert back.metrics["CPI (inc)"].scope == "inclusive"
    d = back.data
    v = d[(d.metric == "CPI (inc)") & (d.callpath == "main->solve") & (d.p == 4) & (d["rank"] == 1)]["value"]
    assert float(v.iloc[0]) == pytest.approx((20 + 60) / (10 + 30))
    v = d[(d.metric == "share") & (d.callpath == "main->solve->kernel") & (d.p == 8) & (d["rank"] == 0)]["value"]
    assert float(v.iloc[0]) == pytest.approx(100 * 60 / 100)
    listed = js(capsys, "metrics", out)["items"]
    assert [m["name"] for m in listed] == ["cycles", "instructions", "CPI", "CPI (inc)", "share", "share (inc)"]
    assert listed[2]["formula"] == "(cycles / instructions)"
    # the output exists: refuse without --force
    code, _, err = cli(capsys, "metrics", exp, "--derive", "x = 1", "-o", out)
    assert code == 2 and "--force" in err


def test_formula_errors_are_located(capsys, tmp_path, csv):
    exp = tidy_scopes(tmp_path, csv)
    code, out, err = cli(capsys, "metrics", exp, "--derive", "CPI = cycles / / instructions")
    assert code == 2 and out == ""
    (line,) = err.rstrip("\n").splitlines()
    assert line.startswith("perfcast: error: column 16: expected a number")
    assert line.endswith("in 'CPI = cycles / / instructions'")
    code, _, err = cli(capsys, "metrics", exp, "--derive", "x = cycels")
    assert code == 2 and "no metric 'cycels'; did you mean cycles" in err
    assert not (tmp_path / "x.perfcast").exists()


def test_view_modes(capsys, tmp_path, csv):
    exp = tidy_scopes(tmp_path, csv)
    td = js(capsys, "view", exp, "--metric", "cycles", "--at", "p=4")
    # ranks summed: (1 + 2) x value x p
    nodes = {n["path"]: n for n in td["nodes"]}
    assert td["total"] == 3 * 4 * 100
    assert (nodes["main->solve"]["inclusive"], nodes["main->solve"]["exclusive"]) == (3 * 4 * 80, 3 * 4 * 20)
    assert nodes["main->solve"]["inclusive_pct"] == pytest.approx(80.0)
    th = js(capsys, "view", exp, "--metric", "cycles", "--at", "p=4", "--threshold", "50")
    assert [n["path"] for n in th["nodes"]] == ["main", "main->solve", "main->solve->kernel"]
    fl = js(capsys, "view", exp, "--metric", "cycles", "--at", "p=2", "--mode", "flat", "--ranks", "mean")
    assert [(r["name"], r["exclusive"]) for r in fl["rows"]] == [("kernel", 180.0), ("solve", 60.0), ("main", 30.0),
                                                              ("io", 30.0)]
    bu = js(capsys, "view", exp, "--at", "p=2", "--mode", "bottom-up", "--metric", "instructions")
    assert bu["rows"][0]["name"] == "kernel" and bu["rows"][0]["callers"][0]["name"] == "solve"
    hp = js(capsys, "view", exp, "--at", "p=8", "--metric", "cycles", "--hot-path", "-")
    assert [n["name"] for n in hp["nodes"]] == ["main", "solve", "kernel"]
    code, out, err = cli(capsys, "view", exp, "--at", "p=8", "--metric", "cycles", "--mode", "bottom-up")
    assert code == 0 and "kernel" in out and "solve" in out
    code, _, err = cli(capsys, "view", exp, "--metric", "cycles")
    assert code == 2 and "3 points" in err and "--at" in err
    code, _, err = cli(capsys, "view", exp, "--at", "p=3")
    assert code == 2 and "no run with p=3; measured p: 2, 4, 8" in err


def test_waste_cli(capsys, tmp_path, csv):
    exp = tidy_scopes(tmp_path, csv)
    (res,) = js(capsys, "waste", exp, "--ops", "instructions", "--cycles", "cycles", "--peak-ops-per-cycle", "2",
                "--at", "p=2")["items"]
    rows = {r["path"]: r for r in res["rows"]}
    # kernel: potential 2 x 60 x 2 x 3 (ranks), ops 30 x 2 x 3
    assert rows["main->solve->kernel"]["waste_exclusive"] == pytest.approx(3 * 2 * (120 - 30))
    assert rows["main->solve->kernel"]["efficiency_exclusive"] == pytest.approx(25.0)
    assert rows["main->io"]["efficiency_exclusive"] == 0.0
    assert res["rows"][0]["path"] == "main->solve->kernel"
    code, _, err = cli(capsys, "waste", exp, "--ops", "instructions", "--cycles", "cycles")
    assert code == 2 and "--peak-ops-per-cycle" in err
    code, _, err = cli(capsys, "waste", exp, "--bytes", "instructions", "--time", "cycles", "--peak-bandwidth", "x")
    assert code == 2 and "not a number" in err
    code, _, err = cli(capsys, "waste", exp)
    assert code == 2 and "nothing to compute" in err


def test_scaling_loss_cli_on_lulesh(capsys, data_dir):
    d = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    res = js(capsys, "scaling-loss", d, "--mode", "weak", "--from", "jobsize=27", "--to", "jobsize=343",
             "--metric", "avg#inclusive#sum#time.duration")
    (pair,) = res["pairs"]
    top = pair["rows"][0]
    # checked against the raw region times in test_analysis_scaling_loss; here the command's output
    assert top["path"] == "main->lulesh.cycle->TimeIncrement->MPI_Allreduce"
    assert top["exclusive_loss"] == pytest.approx((top["exclusive_q"] - top["exclusive_p"]) / pair["total_q"])
    assert top["exclusive_loss"] == pytest.approx(0.1626, abs=5e-4)
    strong = js(capsys, "scaling-loss", d, "--mode", "strong", "--from", "jobsize=27", "--to", "jobsize=64",
                "--metric", "avg#inclusive#sum#time.duration", "--sort", "inclusive")
    r = strong["pairs"][0]["rows"][0]
    k = 64 / 27
    assert r["inclusive_loss"] == pytest.approx((k * r["inclusive_q"] - r["inclusive_p"]) /
                                                (k * strong["pairs"][0]["total_q"]))
    code, out, _ = cli(capsys, "scaling-loss", d, "--mode", "weak", "--limit", "3")
    assert code == 0 and out.count("weak scaling loss") == 4
    code, _, err = cli(capsys, "scaling-loss", d, "--mode", "weak", "--from", "jobsize=27")
    assert code == 2 and "--from and --to together" in err
    code, _, err = cli(capsys, "scaling-loss", d, "--mode", "weak", "--from", "jobsize=27", "--to", "jobsize=100")
    assert code == 2 and "no run with jobsize=100" in err


@pytest.mark.parametrize("mode", ["top-down", "flat", "bottom-up"])
def test_view_heading_shows_the_unit(capsys, data_dir, mode):
    """HPCToolkit CPUTIME is in seconds: the heading names "[s]" (rich read it as strike-through
    markup and printed nothing), as --json's "unit" does."""
    db = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-cpi-database"
    code, out, err = cli(capsys, "view", db, "--mode", mode, "--depth", "1")
    assert code == 0, err
    assert out.splitlines()[0].split(": ", 1)[1].startswith("CPUTIME (E) [s] at the only run")
    assert js(capsys, "view", db, "--mode", mode, "--depth", "1")["unit"] == "s"


def test_view_flat_of_hpctoolkit_lists_procedures(capsys, data_dir):
    """OSU allgather: `view --mode flat` listed source lines, its top row '<unknown file>
    [libpsm_infinipath.so.1.16]:0' (53%) merging statements of dozens of procedures.  Now a row per
    procedure, HPCToolkit's own procedure exclusive costs read from the raw database (--json
    validated against the schema)."""
    from test_analysis_views import hpctoolkit_procedure_truth

    db = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-allgather-database"
    exc, inc = hpctoolkit_procedure_truth(db)
    d = js(capsys, "view", db, "--mode", "flat", "--limit", "0")
    want = sorted(((k[0], e) for k, e in exc.items() if e), key=lambda x: -x[1])
    assert [r["name"] for r in d["rows"][:5]] == [n for n, _ in want[:5]]
    assert d["rows"][0]["exclusive"] == pytest.approx(want[0][1], rel=1e-9)
    assert sum(r["exclusive"] for r in d["rows"]) == pytest.approx(d["total"], rel=1e-9)
    code, out, err = cli(capsys, "view", db, "--mode", "flat", "--limit", "3")
    assert code == 0 and want[0][0] in out.splitlines()[3] and ":0 " not in out



def test_view_bottom_up_of_hpctoolkit_lists_procedures_and_calling_procedures(capsys, data_dir):
    """OSU allgather: `view --mode bottom-up --depth 0` listed source lines, its top row '<unknown
    file> [libpsm_infinipath.so.1.16]:0' (13.92 s) merging statements of dozens of procedures, and
    a row's callers were the frames above it (its own procedure, loops).  Now the flat view's
    procedures, with HPCToolkit's own procedure exclusive costs read from the raw database, and
    calling procedures (--json validated against the schema)."""
    from test_analysis_views import hpctoolkit_callers_truth

    db = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-allgather-database"
    truth = hpctoolkit_callers_truth(db, 1)
    d = js(capsys, "view", db, "--mode", "bottom-up", "--depth", "1", "--limit", "0")
    want = sorted(((k[0], v[0]) for k, v in truth.items() if len(k) == 1 and v[0]), key=lambda x: -x[1])
    assert [r["name"] for r in d["rows"][:5]] == [n for n, _ in want[:5]]
    assert d["rows"][0]["exclusive"] == pytest.approx(want[0][1], rel=1e-9)
    assert sum(r["exclusive"] for r in d["rows"]) == pytest.approx(d["total"], rel=1e-9)
    for r in d["rows"][:5]:
        assert {c["name"]: c["exclusive"] for c in r["callers"]} == pytest.approx(
            {k[1]: v[0] for k, v in truth.items() if len(k) == 2 and k[0] == r["name"]}, rel=1e-9)
    code, out, err = cli(capsys, "view", db, "--mode", "bottom-up", "--depth", "0", "--limit", "3")
    assert code == 0 and want[0][0] in out.splitlines()[2] and ":0 " not in out

def test_view_heading_names_what_a_mean_over_ranks_is_over(capsys, data_dir):
    """OSU allgather, 10 ranks x 2 threads (the second thread idle): --ranks mean averages 20
    locations, half a rank's time; the heading says so.  The total is HPCToolkit's own stored
    root inclusive time (CPUTIME (I)) summed over the locations and divided by 20."""
    from perfcast.io import load

    db = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-allgather-database"
    code, out, err = cli(capsys, "view", db, "--ranks", "mean", "--depth", "0")
    assert code == 0, err
    assert "ranks mean over 20 locations (10 rank(s) x 2 threads)" in out.splitlines()[0]
    e = load([db])
    d = e.data[e.data["metric"] == "CPUTIME (I)"]
    stored = d[d["callpath"].astype(str).isin(e.tree.roots())]["value"].sum() / 20
    assert js(capsys, "view", db, "--ranks", "mean", "--depth", "0")["total"] == pytest.approx(stored, rel=1e-9)


@pytest.mark.parametrize("args, says", [
    (["--hot-fraction", "0.3"], "--hot-fraction: only with --hot-path"),
    (["--hot-path", "-", "--depth", "1"], "--depth: not with --hot-path"),
    (["--hot-path", "-", "--mode", "flat", "--sort", "name"], "--mode, --sort: not with --hot-path"),
    (["--limit", "2"], "--limit: not with --mode top-down"),
])
def test_view_options_the_view_does_not_use_are_refused(capsys, tmp_path, csv, args, says):
    """Each was accepted and ignored: --hot-fraction 0.3 alone printed the whole top-down tree."""
    exp = tidy_scopes(tmp_path, csv)
    code, out, err = cli(capsys, "view", exp, "--at", "p=2", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err


def test_view_says_ranks_given_on_values_combined_in_the_file(capsys, data_dir):
    """LULESH .cali avg#: one mean over ranks per run; --ranks max combines nothing (the values shown
    are the file's means: main at jobsize=27 is 47.2 s, the avg# record read with caliper-reader)."""
    import caliperreader

    lulesh = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    r = caliperreader.CaliperReader()
    r.read(str(lulesh / "27_cores.cali"))
    main = next(float(x["avg#inclusive#sum#time.duration"]) for x in r.records if x.get("path") in ("main", ["main"]))
    code, out, err = cli(capsys, "view", lulesh, "--at", "jobsize=27", "--ranks", "max", "--depth", "0")
    assert code == 0 and "--ranks max: avg#inclusive#sum#time.duration holds one value per run (mean over ranks " \
                         "in the file), so nothing is combined over ranks" in err
    doc = js(capsys, "view", lulesh, "--at", "jobsize=27", "--ranks", "max", "--depth", "0")
    assert {n["path"]: n["inclusive"] for n in doc["nodes"]}["main"] == pytest.approx(main, rel=1e-12)
    code, out, err = cli(capsys, "view", lulesh, "--at", "jobsize=27", "--depth", "0")
    assert code == 0 and "nothing is combined" not in err


@pytest.mark.parametrize("mode", ["flat", "bottom-up"])
def test_view_says_how_many_procedures_limit_left_out(capsys, tmp_path, csv, mode):
    exp = tidy_scopes(tmp_path, csv)
    n = len(js(capsys, "view", exp, "--at", "p=2", "--mode", mode, "--metric", "cycles")["rows"])
    code, out, err = cli(capsys, "view", exp, "--at", "p=2", "--mode", mode, "--metric", "cycles", "--limit", "1")
    assert code == 0 and n > 1 and f"{n - 1} more procedure(s) not shown" in err
    code, out, err = cli(capsys, "view", exp, "--at", "p=2", "--mode", mode, "--metric", "cycles", "--limit", "0")
    assert code == 0 and "not shown" not in err

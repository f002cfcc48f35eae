"""Inputs measured by different collectors, merged: a metric absent at a callpath its collector never
saw is missing there, not 0 (experiment.covered).  Derived ``Ir/time`` was 0 at a campaign's timers
(cachegrind never saw them) and ``waste`` said 0 % efficiency at ``app->halo``; an absence within the
collector's own callpaths stays a 0 (sparse profiles omit zeros)."""

import gzip
import json

import pytest

from conftest import cli, cli_json
from perfcast import store
from perfcast.experiment import Experiment, Metric, combine

pd = pytest.importorskip("pandas")

BENCH = __import__("pathlib").Path(__file__).resolve().parents[1] / "bench" / "data" / "jacobi-p"


def _inputs():
    """A cachegrind-like profile (Ir at main->f, main->g; main->g ran at p=1 only: absent at p=2, a
    sparse 0) and a timing-like one (time at main->f, main->g and the timer main->halo)."""
    ir = {1.0: {"main->f": 100.0, "main->g": 50.0}, 2.0: {"main->f": 200.0}}
    time = {"main->f": 2.0, "main->g": 1.0, "main->halo": 1.5}
    a = pd.DataFrame([{"p": p, "rep": 0, "callpath": c, "metric": "Ir", "value": v}
                      for p, vs in ir.items() for c, v in vs.items()])
    b = pd.DataFrame([{"p": p, "rep": 0, "callpath": c, "metric": "time", "value": v * p}
                      for p in ir for c, v in time.items()])
    ea = Experiment(["p"], a, [Metric("Ir", "#", "count", "exclusive")])
    eb = Experiment(["p"], b, [Metric("time", "s", "time", "exclusive")])
    return ea, eb


def _cells(exp, metric):
    d = exp.data[exp.data["metric"] == metric]
    return {(float(p), str(c)): float(v) for p, c, v in zip(d["p"], d["callpath"], d["value"])}


def _derived(exp):
    from perfcast.analysis.derived import derive

    out, reports = derive(exp, ["X = Ir / time"], "exclusive")
    return _cells(out, "X"), reports[0]


def test_derived_ratio_missing_where_the_collector_never_looked():
    exp = combine(list(_inputs()))
    x, report = _derived(exp)
    # hand ratios: Ir / time at the callpaths cachegrind saw; main->g at p=2 ran no instructions there (0)
    assert x == {(1.0, "main->f"): 100 / 2, (1.0, "main->g"): 50 / 1, (2.0, "main->f"): 200 / 4,
                 (2.0, "main->g"): 0.0}
    # main->halo: not measured by Ir's collector -- no cell (was 0.0), counted as not measured
    assert (1.0, "main->halo") not in x and report["not_measured"] == 2


def test_coverage_survives_store_and_import_and_old_stores_read_as_before(tmp_path, capsys):
    ea, eb = _inputs()
    store.write(ea, tmp_path / "a.perfcast")
    store.write(eb, tmp_path / "b.perfcast")
    # import of two inputs: combined, then stored; read back
    code, out, err = cli(capsys, "import", tmp_path / "a.perfcast", tmp_path / "b.perfcast",
                         "-o", tmp_path / "ab.perfcast")
    assert code == 0, err
    back = store.read(tmp_path / "ab.perfcast")
    x, _ = _derived(back)
    assert (1.0, "main->halo") not in x and x[(2.0, "main->g")] == 0.0
    # and a re-import of the stored one keeps it
    code, out, err = cli(capsys, "import", tmp_path / "ab.perfcast", "-o", tmp_path / "ab2.perfcast")
    assert code == 0, err
    assert (1.0, "main->halo") not in _derived(store.read(tmp_path / "ab2.perfcast"))[0]
    # a store written before the record existed: no record, absence counts as before (0)
    old = back.replace(meta={k: v for k, v in back.meta.items() if k != "coverage"})
    store.write(old, tmp_path / "old.perfcast")
    assert _derived(store.read(tmp_path / "old.perfcast"))[0][(1.0, "main->halo")] == 0.0


def test_a_derived_metric_is_seen_where_all_its_operands_are():
    from perfcast.analysis.derived import derive
    from perfcast.experiment import metric_coverage

    exp, _ = derive(combine(list(_inputs())), ["X = Ir / time"], "exclusive")
    assert metric_coverage(exp, "X") == metric_coverage(exp, "Ir") == frozenset({"main", "main->f", "main->g"})
    # then X * time at main->halo: X missing there (not 0), so the product is too
    y = _cells(derive(exp, ["Y = X * time"], "exclusive")[0], "Y")
    assert (1.0, "main->halo") not in y and y[(1.0, "main->f")] == pytest.approx(100.0)


def test_waste_cannot_tell_where_work_was_not_measured():
    from perfcast.analysis.waste import waste

    exp = combine(list(_inputs()))
    res = waste(exp, "Ir", "time", 100.0, {"p": 1.0}, "sum", "FP waste")
    rows = {r["path"]: r for r in res["rows"]}
    halo = rows["main->halo"]
    assert halo["status_exclusive"] == "no work" and halo["efficiency_exclusive"] is None
    assert halo["waste_exclusive"] is None and halo["work_exclusive"] is None
    # main->f: 100 Ir in 2 s at 100 per s -> efficiency 100 * 100 / 200
    assert rows["main->f"]["efficiency_exclusive"] == pytest.approx(50.0)
    assert any("not measured" in n for n in res["notes"])


def _rebuilt_bench(tmp_path):
    """The jacobi-p bench campaign rebuilt from its journal (timing + PMPI runs, cachegrind runs)."""
    from perfcast.collect import campaign as C
    from perfcast.collect import collectors as coll

    h = json.loads((BENCH / "campaign.json").read_text())
    spec = C.CampaignSpec(**{**h["spec"], "collect": coll.parse_names(h["spec"]["collect"])})
    with gzip.open(BENCH / "journal.jsonl.gz", "rt") as f:
        recs = [json.loads(line) for line in f if line.strip()]
    exp = C.build_experiment(spec, recs, {"machine": h.get("machine")})
    out = tmp_path / "jacobi.perfcast"
    store.write(exp, out)
    return out, recs


def test_bench_campaign_ratio_at_timers_missing_and_hand_ratio_at_root(tmp_path, capsys):
    path, recs = _rebuilt_bench(tmp_path)
    code, out, err = cli(capsys, "metrics", path, "--derive", "X = Ir / time", "-o", tmp_path / "x.perfcast")
    assert code == 0, err
    x = store.read(tmp_path / "x.perfcast").data
    x = x[x["metric"] == "X (inc)"]
    at = {(float(p), int(r), str(c)): v for p, r, c, v in zip(x["p"], x["rep"], x["callpath"], x["value"])}
    # the timers only the timing collector saw: no Ir there, so no ratio (was 0.0)
    for timer in ("app->compute", "app->halo", "app->reduce"):
        assert not any(k[2] == timer for k in at)
    # the root both saw: rank 0's instructions (every function of the first cachegrind run at p=4) over
    # its wall time (the first main run's ``time`` at app), read from the journal itself
    def first(mode):
        return next(r["values"] for r in recs if r.get("type") == "run" and r["status"] == "ok"
                    and r["mode"] == mode and r["config"]["p"] == 4)

    cg, main = first("cachegrind"), first("main")
    ir = sum(val for m, val, rk in zip(cg["metric"], cg["value"], cg["rank"]) if m == "Ir" and rk == 0)
    wall = next(val for cp, m, val in zip(main["callpath"], main["metric"], main["value"]) if m == "time" and cp == "app")
    assert at[(4.0, 0, "app")] == pytest.approx(ir / wall, rel=1e-12)


def test_bench_campaign_waste_says_it_cannot_tell_at_the_timers(tmp_path, capsys):
    path, _ = _rebuilt_bench(tmp_path)
    code, out, err = cli(capsys, "waste", path, "--ops", "Ir", "--time", "time", "--peak-ops-per-second", "1G",
                         "--at", "p=4", "--json")
    assert code == 0, err
    rows = {r["path"]: r for r in cli_json(out, "waste")["items"][0]["rows"]}
    for timer in ("app->compute", "app->halo", "app->reduce"):
        assert rows[timer]["status_exclusive"] == "no work" and rows[timer]["efficiency_exclusive"] is None
        assert rows[timer]["efficiency_inclusive"] is None


def test_coverage_survives_a_tidy_table_and_its_parquet_file(tmp_path, capsys):
    """Experiment.to_pandas dropped the record: read back (Experiment.from_pandas, or the table written
    with df.to_parquet and read as tidy Parquet), derived Ir/time at main->halo -- a timer
    cachegrind never saw -- was 0 again.  The table now carries it in df.attrs, which from_pandas
    and pandas' Parquet writer keep.  Hand ratios from _inputs' values; main->g at p=2 ran no
    instructions (a 0 within Ir's coverage)."""
    exp = combine(list(_inputs()))
    df = exp.to_pandas()
    back = Experiment.from_pandas(df, ["p"], list(exp.metrics.values()))
    x, report = _derived(back)
    assert x == {(1.0, "main->f"): 100 / 2, (1.0, "main->g"): 50 / 1, (2.0, "main->f"): 200 / 4,
                 (2.0, "main->g"): 0.0}
    assert report["not_measured"] == 2
    f = tmp_path / "t.parquet"
    df.astype({"callpath": str, "metric": str}).to_parquet(f)
    code, out, err = cli(capsys, "metrics", f, "--derive", "X = Ir / time", "-o", tmp_path / "x.perfcast")
    assert code == 0, err
    got = _cells(store.read(tmp_path / "x.perfcast"), "X")
    assert got == {(1.0, "main->f"): 100 / 2, (1.0, "main->g"): 50 / 1, (2.0, "main->f"): 200 / 4,
                   (2.0, "main->g"): 0.0}
    # a table without the record (an older one: no rows with an empty value, no attrs) reads as before:
    # absence within a measured run is 0
    df = df[df["value"].notna()].copy()
    df.attrs = {}
    assert _derived(Experiment.from_pandas(df, ["p"], list(exp.metrics.values())))[0][(1.0, "main->halo")] == 0.0


def test_a_malformed_coverage_attribute_in_a_parquet_file_is_one_error(tmp_path, capsys):
    exp = combine(list(_inputs()))
    df = exp.to_pandas().astype({"callpath": str, "metric": str})
    df.attrs = {"perfcast": {"coverage": [{"metrics": "Ir", "callpaths": ["main"]}]}}
    f = tmp_path / "bad.parquet"
    df.to_parquet(f)
    code, out, err = cli(capsys, "show", f)
    assert code == 2 and str(f) in err and "coverage" in err and "Traceback" not in err

"""Joining a second suite of published results to the same machines (BenchmarkDB.joined), the
shipped SPEC CPU2017 integer rate table, and what the joined database does to the projection."""

import gzip
import io

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import PerfcastError
from perfcast.projection.database import BenchmarkDB, load_spec

from conftest import DATA, REPO, cli_items

INT_RATE = REPO / "data" / "spec" / "spec17ml_input_Int_rate.csv.gz"
FP_RATE = DATA / "spec" / "spec17ml_input_FP_rate.csv"

_CONFIG = dict(hardware_vendor="Dell Inc.", model_name="Xeon Gold 6148", cpus=80, cores_per_socket=20, sockets=2,
               threads_or_copies=80, mem_kb=394_000_000, mem_channels=12, mem_data_rate=2666, l3_cache_kb=28160,
               max_mhz=3700, compiler="C/C++: Version 19.0.1.144 of Intel C/C++")


def _table(path, benchmarks, rows):
    """A spec17-ml table: one row per result (file id, configuration overrides, runtime per benchmark)."""
    out = []
    for file, over, times in rows:
        r = dict(_CONFIG, **over, file=f"{file}.csv")
        for b, t in zip(benchmarks, times):
            r[b] = 1.0
            r["t_" + b] = t
        out.append(r)
    pd.DataFrame(out).to_csv(path, index=False)
    return load_spec(path)


def test_joined_links_the_same_configuration_one_to_one_closest_submission_first(tmp_path):
    fp = _table(tmp_path / "fp_rate.csv", ["503.bwaves_r", "519.lbm_r"], [
        ("cpu2017-20190101-00100", {}, (400.0, 300.0)),
        ("cpu2017-20190101-00200", {}, (401.0, 301.0)),
        ("cpu2017-20190101-00300", {"model_name": "EPYC 7742", "compiler": "C/C++/Fortran: Version 2.0.0 of AOCC"},
         (200.0, 150.0)),
        ("cpu2017-20190101-00400", {"mem_data_rate": 2933}, (390.0, 290.0))])
    it = _table(tmp_path / "int_rate.csv", ["505.mcf_r", "557.xz_r"], [
        ("cpu2017-20190101-00198", {"mem_kb": 394_100_000}, (50.0, 60.0)),     # same GiB: joins 00200 (gap 2)
        ("cpu2017-20190101-00103", {}, (51.0, 61.0)),                          # joins 00100 (gap 3)
        ("cpu2017-20190101-00104", {}, (52.0, 62.0)),                          # both taken: left out
        ("cpu2017-20190101-00301", {"model_name": "EPYC 7742",                 # AOCC 2.0.0 in both: joins
                                    "compiler": "C/C++: Version 2.0.0 of AOCC"}, (30.0, 40.0)),
        ("cpu2017-20190101-00401", {"mem_data_rate": 2933, "compiler": "C/C++: Version 19.0.4.227 of Intel C/C++"},
         (53.0, 63.0))])                                                       # other compiler version: no
    db, n = fp.joined(it)
    assert n == 3 and len(db) == 4
    t = db.times()
    assert t.loc["cpu2017-20190101-00200", "505.mcf_r"] == 50.0
    assert t.loc["cpu2017-20190101-00100", "557.xz_r"] == 61.0
    assert t.loc["cpu2017-20190101-00300", "505.mcf_r"] == 30.0
    assert np.isnan(t.loc["cpu2017-20190101-00400", "505.mcf_r"])
    assert t.loc["cpu2017-20190101-00100", "503.bwaves_r"] == 400.0          # own results unchanged
    assert "3 of 5 results joined" in db.source
    with pytest.raises(PerfcastError, match="same benchmarks"):
        fp.joined(fp)
    bare = BenchmarkDB(it.results, it.systems[["system", "name"]], "bare.csv")
    with pytest.raises(PerfcastError, match="configuration columns"):
        fp.joined(bare)


# SPEC CPU2017 reference times (seconds) of the integer rate benchmarks: published constants
REFERENCE = {"500.perlbench_r": 1592, "502.gcc_r": 1416, "505.mcf_r": 1616, "520.omnetpp_r": 1312,
             "523.xalancbmk_r": 1056, "525.x264_r": 1751, "531.deepsjeng_r": 1146, "541.leela_r": 1656,
             "548.exchange2_r": 2620, "557.xz_r": 1080}


def test_shipped_int_rate_table_agrees_with_spec_reference_times():
    raw = gzip.decompress(INT_RATE.read_bytes())
    assert len(raw) == 2_658_777                      # the source file's length (data/README.md)
    df = pd.read_csv(io.BytesIO(raw))
    assert len(df) == 5553 and not df["file"].duplicated().any()
    for b, ref in REFERENCE.items():
        # rate ratio = copies x reference time / runtime, for every published result
        implied = df[b] * df["t_" + b] / df["threads_or_copies"]
        assert np.all(np.abs(implied / ref - 1) < 1e-4), b


def test_default_database_joins_the_integer_results_to_the_fp_machines():
    from perfcast.projection.project import load_db

    fp = load_spec(FP_RATE)
    db = load_db(())
    assert len(db) == len(fp)                          # the FP machines, no new systems
    assert "4705 of 5553 results joined" in db.source
    t = db.times()
    assert set(REFERENCE) <= set(t.columns)
    assert int(t[list(REFERENCE)].notna().all(axis=1).sum()) == 4705
    # the FP results are untouched
    assert t[fp.benchmarks].equals(fp.times()[fp.benchmarks])
    # an explicit list joins the same way (same kind of suite, other benchmarks)
    again = load_db([FP_RATE, INT_RATE])
    assert again.times().equals(t)
    # with the speed suite merged in between, the integer rate results still join the rate machines
    speed = load_spec(DATA / "spec" / "spec17ml_input_FP_speed.csv")
    mixed = load_db([FP_RATE, DATA / "spec" / "spec17ml_input_FP_speed.csv", INT_RATE])
    assert len(mixed) == len(fp) + len(speed) and "4705 of 5553 results joined" in mixed.source
    assert mixed.times().loc[t.index, list(REFERENCE)].equals(t[list(REFERENCE)])


def test_closed_loop_with_the_integer_results_beats_fp_only_on_the_same_pairs():
    from perfcast.projection.closed_loop import closed_loop, random_pairs
    from perfcast.projection.signatures import GROUPS, load_navarro

    fp = load_spec(FP_RATE)
    sigs = load_navarro(DATA / "spec" / "counters")
    apps = [b for b in fp.benchmarks if b in sigs]
    db, n = fp.joined(load_spec(INT_RATE))
    assert n == 4705
    pairs = random_pairs(fp, apps, 120, seed=12)
    joint = closed_loop(db, sigs, list(GROUPS), pairs, apps=apps)
    alone = closed_loop(fp, sigs, list(GROUPS), pairs, apps=apps)
    assert set(joint.app) == set(apps) and len(joint.error) == len(alone.error) == 120 * 13
    assert np.array_equal(joint.baseline, alone.baseline)   # the baseline stays the issue's: FP only
    sj, sa = joint.summary(), alone.summary()
    # measured on this sample: 11.25 % vs 11.83 % mean, 7.35 % vs 7.69 % median (bench, 300 pairs
    # seed 1: 11.2 % vs 11.8 %); the intervals keep their level (here 91.1 %)
    assert sj["method"]["mean"] < sa["method"]["mean"] - 0.003
    assert sj["method"]["median"] < sa["method"]["median"]
    assert 0.86 < sj["interval"]["coverage"] < 0.94


def test_project_on_the_default_database_says_which_targets_lack_the_integer_results(tmp_path, capsys):
    import json

    from perfcast.cli import main
    from perfcast.projection.project import load_db
    from perfcast.projection.signatures import load_navarro

    sigs = load_navarro(DATA / "spec" / "counters")
    app = tmp_path / "app.csv"
    app.write_text("callpath,metric,value\nmain,time,100.0\n"
                   + "".join(f"main,{m},{v!r}\n" for m, v in sigs["549.fotonik3d_r"].values.items()))
    t = load_db(()).times()
    full = t[list(REFERENCE)].notna().all(axis=1)
    base, with_int = full[full].index[:2]
    without = full[~full].index[0]
    assert main(["project", str(app), "--base", base, "--target", with_int, "--target", without, "--json"]) == 0
    out = cli_items(capsys.readouterr().out, "projection")[0]
    assert out["compute_source"] == "factor model"
    got = {x["system"]: x["communication_detail"]["pair_benchmarks"] for x in out["targets"]}
    # every benchmark with a signature and results (13 FP + 10 integer) vs the FP ones only
    assert got == {with_int: 23, without: 13}
    assert any(n.startswith("1 of 2 target(s) and the base do not share results") and "fitted on the 13 they share"
               in n for n in out["notes"])


def test_bad_tables_to_join_are_one_located_line(tmp_path, capsys):
    from perfcast.cli import main

    bare = tmp_path / "bare_int_rate.csv"          # a spec17-ml table without the configuration columns
    bare.write_text("file,505.mcf_r,t_505.mcf_r\ncpu2017-20190101-00001.csv,10,100\n")
    cut = tmp_path / "cut_Int_rate.csv.gz"         # the shipped table, truncated
    cut.write_bytes(INT_RATE.read_bytes()[:300_000])
    for bad, msg in ((bare, "joining needs the configuration columns"),
                     (cut, "not a readable CSV: Compressed file ended")):
        capsys.readouterr()
        assert main(["systems", "--db", str(FP_RATE), "--db", str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(bad.name) in err and msg in err, err

"""Summary-statistics tables (perfcast.io.summary) against Extra-P's real mpi_data.csv.

Expectations come from the CSV itself, read row by row with the standard library's csv module;
the modeling check evaluates the printed models by hand against the measured medians and
inter-quartile ranges.
"""

import csv
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from perfcast import io, store
from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.io.summary import SummaryLayout, read_summary, statistic_of

from conftest import cli_items

LABELS = ["smallest_left", "largest_left", "smallest_right", "largest_right", "smallest_interval",
          "largest_interval"]


@pytest.fixture(scope="module")
def mpi_csv(data_dir) -> Path:
    return data_dir / "extrap" / "mpi_data.csv"


@pytest.fixture(scope="module")
def rows(mpi_csv) -> list[dict]:
    with open(mpi_csv, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def exp(mpi_csv):
    return io.read_one(mpi_csv)


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------------------------------
# mpi_data.csv


def test_detected_and_shaped(mpi_csv, rows, exp):
    assert io.detect(mpi_csv).name == "summary"
    assert exp.meta["format"] == "summary"
    assert exp.parameters == ("Ranks",) or list(exp.parameters) == ["Ranks"]
    assert sorted(exp.data["Ranks"].unique()) == [32, 64, 128, 256, 512]
    expected_paths = list(dict.fromkeys(f"{r['mpi']}/{r['variable']}" for r in rows))
    assert len(expected_paths) == 14 and exp.tree.paths == expected_paths
    assert len(exp.data) == len(rows) == 70
    assert (exp.data.groupby("callpath", observed=True).size() == 5).all()
    assert set(exp.data["rep"]) == {0}  # no invented repetitions
    (m,) = exp.metrics.values()
    assert (m.name, m.unit, m.kind) == ("time", "us", "time")


def test_values_are_the_csv_medians(rows, exp):
    got = {(float(r.Ranks), r.callpath): r.value for r in exp.data.itertuples()}
    want = {(float(r["Ranks"]), f"{r['mpi']}/{r['variable']}"): float(r["median"]) for r in rows}
    assert got == want
    assert got[(32.0, "IntelMPI/MPI_Barrier")] == 11.21505


def test_spread_kept_verbatim(rows, exp):
    s = exp.meta["summary"]
    assert s["statistic"] == "median"
    assert s["ignored_columns"] == LABELS
    cols = s["columns"]
    assert cols[:3] == ["Ranks", "callpath", "metric"]
    assert {"N", "mean", "sd", "iqr", "min", "max", "ci_median_left", "ci_median_right"} <= set(cols)
    assert "median" not in cols
    for r, kept in zip(rows, s["rows"]):
        d = dict(zip(cols, kept))
        assert d["callpath"] == f"{r['mpi']}/{r['variable']}" and d["Ranks"] == float(r["Ranks"])
        assert d["N"] == int(r["N"]) and isinstance(d["N"], int)
        for c in ("mean", "sd", "iqr", "min", "max", "ci_sd_left", "ci_iqr_right"):
            assert d[c] == float(r[c])
    assert "microseconds" in s["unit_note"]
    json.dumps(exp.meta, allow_nan=False)  # storable


def test_other_statistic_and_spread_metrics(mpi_csv, rows):
    e = read_summary(mpi_csv, SummaryLayout(value=("mean",), spread_metrics=True))
    assert e.meta["summary"]["statistic"] == "mean"
    d = e.data
    mean = d[d["metric"] == "time"].set_index(["Ranks", "callpath"])["value"]
    sd = d[d["metric"] == "time sd"].set_index(["Ranks", "callpath"])["value"]
    n = d[d["metric"] == "time N"].set_index(["Ranks", "callpath"])["value"]
    for r in rows:
        key = (float(r["Ranks"]), f"{r['mpi']}/{r['variable']}")
        assert mean[key] == float(r["mean"]) and sd[key] == float(r["sd"]) and n[key] == int(r["N"])
    assert e.metrics["time N"].kind == "count" and e.metrics["time sd"].unit == "us"
    assert "time median" in e.metrics and "time smallest_left" not in e.metrics


def test_store_round_trip(tmp_path, mpi_csv, exp):
    out = tmp_path / "mpi.perfcast"
    store.write(exp, out)
    back = store.read(out)
    assert back.meta["summary"] == exp.meta["summary"]
    assert back.data.sort_values(["callpath", "Ranks"])["value"].tolist() == \
        exp.data.sort_values(["callpath", "Ranks"])["value"].tolist()


def _evaluate(model: dict, p: float) -> float:
    v = model["constant"]
    for t in model["terms"]:
        f = t["factors"]["Ranks"]
        v += t["coefficient"] * p ** float(Fraction(f["exponent"])) * math.log2(p) ** f["log_exponent"]
    return v


def test_model_end_to_end(capsys, mpi_csv, rows):
    code, out, err = cli(capsys, "model", mpi_csv, "--json")
    assert code == 0, err
    models = {m["callpath"]: m for m in cli_items(out, "models")}
    assert set(models) == {f"{r['mpi']}/{r['variable']}" for r in rows}
    assert all(m["metric"] == "time" and m["parameters"] == ["Ranks"] for m in models.values())
    by = {}
    for r in rows:
        by.setdefault(f"{r['mpi']}/{r['variable']}", []).append(r)
    # the latency-bound collectives: every measured median is reproduced within 1.5 IQR of it
    for lib in ("IntelMPI", "OpenMPI"):
        for routine in ("MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce"):
            cp = f"{lib}/{routine}"
            for r in by[cp]:
                pred = _evaluate(models[cp], float(r["Ranks"]))
                assert abs(pred - float(r["median"])) <= 1.5 * float(r["iqr"]), (cp, r["Ranks"], pred)
    # tree collectives: the measured medians grow sublinearly (log-log slope 0.25..0.6 from 32 to 512
    # ranks); the models' lead order must be sublinear too and reproduce that growth
    for lib in ("IntelMPI", "OpenMPI"):
        for routine in ("MPI_Allreduce", "MPI_Bcast"):
            cp = f"{lib}/{routine}"
            med = {float(r["Ranks"]): float(r["median"]) for r in by[cp]}
            slope = math.log(med[512] / med[32]) / math.log(16)
            assert 0.2 < slope < 0.6, (cp, slope)
            lead = models[cp]["lead"]["Ranks"]
            assert Fraction(lead["exponent"]) < 1 and lead["log_exponent"] <= 2, (cp, lead)
            ratio = _evaluate(models[cp], 512) / _evaluate(models[cp], 32)
            assert abs(ratio / (med[512] / med[32]) - 1) < 0.15, (cp, ratio)


# ------------------------------------------------------------------------------------------
# other layouts


def test_general_layout_units_from_header(tmp_path):
    p = write(tmp_path, "k.csv", "app,kernel,p,n,count,avg [ms],stdev\n"
                                 "lulesh,force,8,10,5,1.5,0.1\nlulesh,force,8,20,5,3.0,0.2\n"
                                 "lulesh,force,27,10,5,1.7,0.1\nlulesh,halo,8,10,5,0.5,0.05\n")
    assert io.detect(p).name == "summary"
    e = io.read_one(p)
    assert list(e.parameters) == ["p", "n"]
    assert e.tree.paths == ["lulesh/force", "lulesh/halo"]
    (m,) = e.metrics.values()
    assert (m.name, m.unit, m.kind) == ("time", "ms", "time")  # no median: the mean
    assert e.meta["summary"]["statistic"] == "avg [ms]"
    assert e.data["value"].tolist() == [1.5, 3.0, 1.7, 0.5]


def test_param_option_names_parameters_and_numeric_keys_join_the_callpath(tmp_path):
    p = write(tmp_path, "imb.csv", "benchmark,nprocs,bytes,N,median,metric,unit\n"
                                   "Allgather,2,8,1000,1.0,t,us\nAllgather,4,8,1000,2.0,t,us\n"
                                   "Allgather,2,64,1000,3.0,t,us\n")
    # metric and unit come after the first statistic here, so they are statistics block labels
    e = io.read_one(p, options=io.ReadOptions(parameters=("nprocs",)))
    assert list(e.parameters) == ["nprocs"]
    assert e.tree.paths == ["Allgather/bytes=8", "Allgather/bytes=64"]
    p2 = write(tmp_path, "imb2.csv", "benchmark,metric,unit,nprocs,N,median\n"
                                     "Allgather,t,us,2,1000,1.0\nAllgather,t,us,4,1000,2.0\n"
                                     "Allgather,bw,MB/s,2,1000,9.0\n")
    e2 = io.read_one(p2)
    assert e2.metrics["t"].unit == "us" and e2.metrics["bw"].unit == "MB/s"
    assert sorted(e2.data["metric"]) == ["bw", "t", "t"]


def test_statistic_names():
    assert statistic_of("Median") == "median" and statistic_of("avg [us]") == "mean"
    assert statistic_of("N") == "count" and statistic_of("ci_median_left") == "quantile"
    assert statistic_of("p95") == "quantile" and statistic_of("sd") == "spread"
    assert statistic_of("Ranks") is None and statistic_of("variable") is None


def test_sniffer_claims_only_summary_tables(data_dir, tmp_path, mpi_csv):
    sniff = io.readers()["summary"].sniff
    assert sniff(mpi_csv)
    tidy = write(tmp_path, "t.csv", "p,callpath,metric,value,mean,N\n1,main,time,1,1,1\n")
    assert not sniff(tidy) and io.detect(tidy).name == "tidy"
    for p in [data_dir / "mpi" / "archer_benchmarks_imb.csv", data_dir / "mpi" / "stackhpc_hpctests_imb_osu.csv",
              data_dir / "spec" / "spec17ml_input_FP_rate.csv", data_dir / "extrap" / "text" / "two_parameter_3.txt",
              data_dir / "extrap" / "experiments" / "two_parameter3.txt.extra-p"]:
        assert not sniff(p), p
    # an unrecognised CSV still gets the tidy reader's explanation of what is missing
    other = write(tmp_path, "o.csv", "a,b\n1,2\n")
    with pytest.raises(PerfcastError, match="missing column"):
        io.read_one(other)


# ------------------------------------------------------------------------------------------
# bad input: one error naming the file and the line


HEADER = "mpi,variable,Ranks,N,mean,sd,median\n"
GOOD = "IntelMPI,MPI_Barrier,32,1600,13.2,19.4,11.2\n"


@pytest.mark.parametrize("body,where,needle", [
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,64,1998,16.5,41.8\n", ":3", "6 field(s)"),
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,64,1998,16.5,41.8,fast\n", ":3", "'fast' is not a number"),
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,64,1998,16.5,41.8,\n", ":3", "empty cell is not a number"),
    (HEADER + GOOD + "IntelMPI,MPI_Bcast,32,1600,abc,1,2\nIntelMPI,MPI_Bcast,64,1600,1,1,2\n", ":3",
     "'abc' is not a number"),
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,64,-3,16.5,41.8,14.3\n", ":3", "cannot be negative"),
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,64,12.5,16.5,41.8,14.3\n", ":3", "not a whole number"),
    (HEADER + GOOD + GOOD, ":3", "already on line 2"),
    (HEADER + GOOD + "IntelMPI,MPI_Barrier,6x4,1600,1,1,1\nIntelMPI,MPI_Barrier,128,1600,1,1,1\n", ":3",
     "'6x4' is not a number"),
    (HEADER + GOOD + "IntelMPI,,64,1998,16.5,41.8,14.3\n", ":3", "empty cell in the callpath column"),
    (HEADER, ":1", "no rows"),
    ("mpi,variable,Ranks,N,sd\nIntelMPI,MPI_Barrier,32,1600,1\n", " (header)", "no median or mean column"),
    ("mpi,variable,Ranks,N,mean,mean,median\n" + GOOD, ":1", "appears twice"),
])
def test_bad_input(tmp_path, body, where, needle):
    p = write(tmp_path, "bad.csv", body)
    with pytest.raises(PerfcastError) as ei:
        io.read_one(p, "summary")
    msg = ei.value.format()
    assert msg.startswith(str(p) + where), msg
    assert needle in msg, msg


def test_bad_input_on_the_command_line(capsys, tmp_path):
    p = write(tmp_path, "bad.csv", HEADER + GOOD + "IntelMPI,MPI_Barrier,64,1998,16.5,41.8,n/a\n")
    code, out, err = cli(capsys, "show", p)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{p}:3" in lines[0] and "'n/a' is not a number" in lines[0]
    code, _, err = cli(capsys, "import", p, "-o", tmp_path / "x.perfcast")
    assert code == 2 and not (tmp_path / "x.perfcast").exists()
    assert io.read_one(write(tmp_path, "ok.csv", HEADER + GOOD)).data["value"].tolist() == [11.2]


def test_missing_layout_column(tmp_path, mpi_csv):
    with pytest.raises(PerfcastError, match="no column 'nprocs'") as ei:
        read_summary(mpi_csv, SummaryLayout(parameters=("nprocs",)))
    assert ei.value.path == str(mpi_csv) and ei.value.where == "header"
    with pytest.raises(PerfcastError, match="no p50 column"):
        read_summary(mpi_csv, SummaryLayout(value=("p50",)))


def test_combined_summary_inputs_keep_their_statistics(tmp_path):
    from conftest import DATA

    lines = (DATA / "extrap" / "mpi_data.csv").read_text().splitlines()
    parts = {lib: [lines[0]] + [ln for ln in lines[1:] if ln.startswith(lib + ",")] for lib in ("IntelMPI", "OpenMPI")}
    paths = []
    for lib, rows in parts.items():
        paths.append(tmp_path / f"{lib}.csv")
        paths[-1].write_text("\n".join(rows) + "\n")
    whole = io.load([DATA / "extrap" / "mpi_data.csv"])
    both = io.load(paths)
    key = lambda r: json.dumps(r)  # noqa: E731
    assert sorted(map(key, both.meta["summary"]["rows"])) == sorted(map(key, whole.meta["summary"]["rows"]))
    assert both.meta["summary"]["columns"] == whole.meta["summary"]["columns"] and len(both.data) == 70
    # a summary table with a tidy table of the same parameter: the statistics cannot be kept together
    tidy = tmp_path / "tidy.csv"
    tidy.write_text("Ranks,callpath,metric,value\n32,x,calls,1.0\n64,x,calls,2.0\n")
    mixed = io.load([paths[0], tidy])
    assert "summary" not in mixed.meta
    assert any("summary statistics have different layouts" in w for w in mixed.meta["warnings"])


def test_statistic_option_chooses_the_value_on_the_command_line(tmp_path):
    from conftest import DATA

    src = DATA / "extrap" / "mpi_data.csv"
    with open(src, newline="") as f:
        means = {(f"{r['mpi']}/{r['variable']}", float(r["Ranks"])): float(r["mean"]) for r in csv.DictReader(f)}
    out = tmp_path / "m.perfcast"
    assert main(["import", str(src), "--statistic", "mean", "-o", str(out)]) == 0
    exp = store.read(out)
    got = {(r.callpath, float(r.Ranks)): r.value for r in exp.data.itertuples()}
    assert got == pytest.approx(means) and len(got) == 70
    assert exp.meta["summary"]["statistic"] == "mean"
    # Extra-P archives: the median of each point instead of Extra-P's mean
    arc = DATA / "extrap" / "experiments" / "two_parameter3.txt.extra-p"
    assert main(["import", str(arc), "--statistic", "median", "-o", str(tmp_path / "a.perfcast")]) == 0
    a = store.read(tmp_path / "a.perfcast")
    cols = a.meta["summary"]["columns"]
    med = {tuple(r[:cols.index("callpath") + 2]): r[cols.index("median")] for r in a.meta["summary"]["rows"]}
    names = cols[:cols.index("callpath")]
    vals = {(*(float(getattr(r, n)) for n in names), r.callpath, r.metric): r.value for r in a.data.itertuples()}
    assert vals == pytest.approx({(*map(float, k[:-2]), *k[-2:]): v for k, v in med.items()})
    # an unknown statistic: one line, exit 2
    assert main(["import", str(src), "--statistic", "mode", "-o", str(tmp_path / "x.perfcast")]) == 2
    assert not (tmp_path / "x.perfcast").exists()

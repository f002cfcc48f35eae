"""Issue 16: a series' model, value and interval do not depend on which metrics or callpaths the
user asked to see (--metric / --callpath, ``perfcast.model(metrics=, callpaths=)``).  What a series
shares with others (the pooled drift of the intervals, its growth, the noise shape) comes from its
own metric's series over the whole experiment.

The experiment is generated from known formulas: two time metrics of 12 callpaths each, measured
at p = 4 .. 128 with 5 repetitions of 4 % noise; "time" follows one-term laws, "comm_time" two-term
laws that a one-term model misses beyond the data (a larger drift), so pooling the two metrics
together (as main did) moves both metrics' intervals."""

import math

import numpy as np
import pytest

import perfcast
from perfcast.cli import main

from conftest import cli_items

PS = [4, 8, 16, 32, 64, 128]
TARGET = 512
CALLPATHS = [f"k{i}" for i in range(12)]


def _truths():
    """(metric, callpath) -> the generating formula f(p)."""
    rng = np.random.default_rng(16)
    laws = {}
    for i, cp in enumerate(CALLPATHS):
        c0, c1, e = rng.uniform(1, 10), rng.uniform(0.05, 0.5), (1.0, 1.5, 2.0, 0.5)[i % 4]
        laws[("time", cp)] = lambda p, c0=c0, c1=c1, e=e: c0 + c1 * p ** e
        d1 = rng.uniform(0.5, 2.0)
        laws[("comm_time", cp)] = lambda p, c0=c0, c1=c1, d1=d1: c0 + d1 * math.log2(p) + c1 * p ** 1.25
    return laws


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = np.random.default_rng(7)
    laws = _truths()
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), ""]
    for metric in ("time", "comm_time"):
        lines += [f"METRIC {metric}", ""]
        for cp in CALLPATHS:
            lines.append(f"REGION {cp}")
            for p in PS:
                f = laws[(metric, cp)](p)
                lines.append("DATA " + " ".join(f"{f * (1 + rng.uniform(-0.02, 0.02)):.10g}" for _ in range(5)))
            lines.append("")
    path = tmp_path_factory.mktemp("sel") / "exp.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli_predictions(capsys, path, *filters):
    code = main(["predict", str(path), "--at", f"p={TARGET}", "--json", *filters])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {(r["callpath"], r["metric"]): r for r in cli_items(out, "predictions")}


def _api_predictions(exp, **filters):
    ms = perfcast.model(exp, **filters)
    return {(r["callpath"], r["metric"]): r for r in ms.predict({"p": TARGET})}


FILTERS = [
    ((("--metric", "time"),), {"metrics": ["time"]}, {("time", cp) for cp in CALLPATHS}),
    ((("--metric", "comm_time"),), {"metrics": ["comm_time"]}, {("comm_time", cp) for cp in CALLPATHS}),
    ((("--callpath", "k1*"),), {"callpaths": ["k1*"]},
     {(m, cp) for m in ("time", "comm_time") for cp in ("k1", "k10", "k11")}),
    ((("--callpath", "k3"), ("--metric", "comm_time")), {"callpaths": ["k3"], "metrics": ["comm_time"]},
     {("comm_time", "k3")}),
]


def test_full_run_is_sound(capsys, text_file):
    """The full run's values lie near the generating formulas and inside their own intervals
    (the reference the filtered runs are compared with is itself meaningful)."""
    laws = _truths()
    full = _cli_predictions(capsys, text_file)
    assert set(full) == {(cp, m) for (m, cp) in laws}
    for (cp, m), r in full.items():
        value, lower, upper = r["value"], r["lower"], r["upper"]
        truth = laws[(m, cp)](TARGET)
        assert value == pytest.approx(truth, rel=0.35), (cp, m)
        assert lower <= value <= upper


@pytest.mark.parametrize("cli_filter, api_filter, kept", FILTERS)
def test_filtered_runs_give_the_full_runs_series(capsys, text_file, cli_filter, api_filter, kept):
    full = _cli_predictions(capsys, text_file)
    args = [a for pair in cli_filter for a in pair]
    part = _cli_predictions(capsys, text_file, *args)
    assert set(part) == {(cp, m) for (m, cp) in kept}
    for key, got in part.items():
        assert got == full[key], key       # the whole row: value, interval (the same floats), formula,
        #                                    confidence, notes

    exp = perfcast.io.load([text_file])
    api_full = _api_predictions(exp)
    assert api_full == full
    api_part = _api_predictions(exp, **api_filter)
    assert api_part == {k: full[k] for k in part}


def test_a_metrics_repetitions_are_its_own():
    """Whether a metric's repetitions are kept (for the noise shape: uniform noise is light-tailed)
    and how wide they are padded is decided on that metric's values alone: "time", 20 series of 5
    repetitions of 4 % uniform noise, fitted next to "comm_time", 200 series of one repetition
    (padded to 5 with them they would more than double the values, and main dropped the
    repetitions of both), gets the model and interval of "time" fitted alone."""
    import pandas as pd

    from perfcast.experiment import Experiment

    rng = np.random.default_rng(5)
    rows, truth = [], {}
    for i in range(20):
        c0, c1 = rng.uniform(1, 10), rng.uniform(0.05, 0.5)
        truth[f"a{i}"] = c0 + c1 * TARGET
        rows += [{"p": float(p), "rep": r, "callpath": f"a{i}", "metric": "time",
                  "value": (c0 + c1 * p) * (1 + rng.uniform(-0.04, 0.04))} for p in PS for r in range(5)]
    for i in range(200):
        c0, c1 = rng.uniform(1, 10), rng.uniform(0.05, 0.5)
        rows += [{"p": float(p), "rep": 0, "callpath": f"b{i}", "metric": "comm_time",
                  "value": (c0 + c1 * p ** 1.5) * (1 + rng.uniform(-0.04, 0.04))} for p in PS]
    exp = Experiment.from_pandas(pd.DataFrame(rows), parameters=["p"])
    full = _api_predictions(exp)
    alone = _api_predictions(exp, metrics=["time"])
    assert alone == {k: full[k] for k in alone} and len(alone) == 20
    for (cp, _), r in alone.items():
        value, lower, upper = r["value"], r["lower"], r["upper"]
        assert value == pytest.approx(truth[cp], rel=0.25) and lower <= value <= upper
    assert _api_predictions(exp, callpaths=["a1*"]) == {k: full[k] for k in full if k[0].startswith("a1")}


def test_a_child_above_its_parent_is_flagged_whatever_the_filter():
    """An inclusive child predicted above its parent is flagged (a note, confidence low) also when
    --callpath leaves the parent out: main = 10 + 0.1 p, main->k = 1 + 0.001 p^2 (below main over
    p = 4 .. 64, 1049 against 112 at p = 1024)."""
    import pandas as pd

    from perfcast.experiment import Experiment, Metric

    rng = np.random.default_rng(2)
    laws = {"main": lambda p: 10 + 0.1 * p, "main->k": lambda p: 1 + 0.001 * p * p}
    rows = [{"p": float(p), "rep": r, "callpath": cp, "metric": "time",
             "value": f(p) * (1 + rng.uniform(-0.01, 0.01))} for cp, f in laws.items()
            for p in (4, 8, 16, 32, 64) for r in range(3)]
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")])

    def rows_of(**kw):
        return {r["callpath"]: r for r in perfcast.model(exp, **kw).predict({"p": 1024.0})}

    full, part = rows_of(), rows_of(callpaths=["main->k"])
    assert set(part) == {"main->k"}
    assert full["main->k"]["value"] == pytest.approx(laws["main->k"](1024), rel=0.05)
    assert full["main->k"]["confidence"] == "low"
    assert any("predicted above its parent main" in n for n in full["main->k"]["notes"])
    assert part["main->k"] == full["main->k"]

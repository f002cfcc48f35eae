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
    return {(r["callpath"], r["metric"]): (r["value"], r["lower"], r["upper"], r["formula"])
            for r in cli_items(out, "predictions")}


def _api_predictions(exp, **filters):
    ms = perfcast.model(exp, **filters)
    return {(r["callpath"], r["metric"]): (r["value"], r["lower"], r["upper"], r["formula"])
            for r in ms.predict({"p": TARGET})}


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
    for (cp, m), (value, lower, upper, _) in full.items():
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
        assert got == full[key], key       # value, lower, upper, formula: the same floats

    exp = perfcast.io.load([text_file])
    api_full = _api_predictions(exp)
    assert api_full == full
    api_part = _api_predictions(exp, **api_filter)
    assert api_part == {k: full[k] for k in part}

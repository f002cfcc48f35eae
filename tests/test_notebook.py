"""The notebook story (issue 19, item 1), run as an analyst would in Jupyter: read, model, look at the
models as a DataFrame, as the HTML Jupyter shows, and as a plot."""

from __future__ import annotations

import math
from html import escape

import matplotlib
import numpy as np
import pytest

import perfcast
from perfcast import io
from perfcast.io import ReadOptions

from conftest import require_data

matplotlib.use("Agg")   # no display in CI


def _exact(tmp_path):
    """Two regions measured exactly (two identical repetitions): main = 3 + 2 p^2, solve = 5 p."""
    pts = (2, 4, 8, 16, 32)
    lines = ["PARAMETER p", "POINTS " + " ".join(map(str, pts)), "", "REGION main", "METRIC time"]
    lines += [f"DATA {3 + 2 * p * p} {3 + 2 * p * p}" for p in pts]
    lines += ["", "REGION solve", "METRIC time"] + [f"DATA {5 * p} {5 * p}" for p in pts]
    f = tmp_path / "exact.txt"
    f.write_text("\n".join(lines) + "\n")
    return io.load([f])


def test_to_pandas_values_are_the_generating_functions_at_the_default_target(tmp_path):
    ms = perfcast.model(_exact(tmp_path))
    assert ms.default_target() == {"p": 64.0}          # twice the largest measured p
    df = ms.to_pandas()
    assert list(df["rank"]) == [1, 2]
    got = dict(zip(df["callpath"], df["value"]))
    assert math.isclose(got["main"], 3 + 2 * 64 ** 2, rel_tol=1e-9)
    assert math.isclose(got["solve"], 5 * 64, rel_tol=1e-9)
    assert {"formula", "lower", "upper", "clipped", "confidence", "increase"} <= set(df.columns)
    assert (df["lower"] <= df["value"]).all() and (df["value"] <= df["upper"]).all()
    # another target: the same functions there
    df = ms.to_pandas({"p": 1000})
    assert math.isclose(dict(zip(df["callpath"], df["value"]))["main"], 3 + 2 * 1000 ** 2, rel_tol=1e-9)
    # lookups by key (one metric: the metric may be left out)
    assert ms["main", "time"] is ms.series_of("main").model
    with pytest.raises(KeyError, match="nothing"):
        ms.series_of("nothing")


def test_lulesh_in_a_notebook(data_dir, tmp_path):
    path = require_data(data_dir / "thicket" / "lulesh_weak_scaling_cali")
    exp = io.load([path], options=ReadOptions(parameters=("jobsize",)))
    ms = perfcast.model(exp)
    df = ms.to_pandas()
    # one row per (callpath, metric) series of the experiment, ranked 1..S
    series = exp.data.groupby(["callpath", "metric"], observed=True).ngroups
    assert len(df) == len(ms) == series
    assert sorted(df["rank"]) == list(range(1, series + 1))
    assert df["formula"].map(len).gt(0).all() and np.isfinite(df["value"]).all()

    html = ms._repr_html_()
    top = df.iloc[0]
    assert html.startswith("<div>") and f"{len(ms)} series" in html and "<svg" in html
    assert f'title="{escape(top["callpath"])}"' in html
    assert html.count("<tr>") == 1 + 20                    # the header and the first 20 of the ranking

    # the plot: the model along jobsize and the measured means, which are the data's own means
    cp, mt = "main", "avg#inclusive#sum#time.duration"
    ax = ms.plot(cp, mt, exp=exp)
    x, y = ax.lines[1].get_data()
    d = exp.data[(exp.data["callpath"] == cp).to_numpy() & (exp.data["metric"] == mt).to_numpy()]
    means = d.groupby("jobsize")["value"].mean()
    assert np.allclose(x, means.index.to_numpy(dtype=float)) and np.allclose(y, means.to_numpy())
    # the curve is the model's value
    cx, cy = ax.lines[0].get_data()
    assert np.allclose(cy, ms[cp, mt].predict({"jobsize": np.asarray(cx)}))
    png = tmp_path / "main.png"
    ax.figure.savefig(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

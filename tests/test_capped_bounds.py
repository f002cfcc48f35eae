"""An inclusive child's upper bound never exceeds its ancestors' (a part cannot exceed the whole):
predict, a callpath filter, the report's ranking table, its plots and its validation all show the
bound of ModelSet.bounds.  The case of LULESH's TimeIncrement (five single runs 7.9 .. 16.4 s, a
constant model whose 90% interval at jobsize 4096 reached 7,923 s while main's reached 63 s)."""

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast import Experiment, Metric
from perfcast.modelset import CAPPED_NOTE

P = (27.0, 64.0, 125.0, 216.0, 343.0)
# one run per point; the kernel's values scatter like LULESH's TimeIncrement (avg time, seconds)
KERNEL = (7.865, 11.415, 13.523, 8.878, 16.428)
TARGET = {"p": 4096.0}


def _experiment():
    rows = []
    for p, k in zip(P, KERNEL):
        rows += [{"p": p, "rep": 0, "callpath": "main", "metric": "time", "value": 50.0 + 0.01 * p},
                 {"p": p, "rep": 0, "callpath": "main->cycle", "metric": "time", "value": 49.0 + 0.01 * p},
                 {"p": p, "rep": 0, "callpath": "main->cycle->step", "metric": "time", "value": k}]
    return Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive")])


def test_a_childs_upper_bound_is_capped_by_its_ancestors():
    exp = _experiment()
    ms = perfcast.model(exp)
    rows = {r["callpath"]: r for r in ms.predict(TARGET)}
    own = {cp: ms[(cp, "time")].interval(TARGET, 0.9)[1] for cp in rows}   # each model's own bound
    step, cycle, main = rows["main->cycle->step"], rows["main->cycle"], rows["main"]
    # the generating laws: main and cycle exact lines, so their bounds are the lines' values
    assert main["value"] == pytest.approx(50.0 + 0.01 * 4096, rel=1e-6)
    assert cycle["value"] == pytest.approx(49.0 + 0.01 * 4096, rel=1e-6)
    assert float(own["main->cycle->step"]) > 2 * cycle["upper"]     # the kernel's own bound: far above
    assert step["upper"] == min(float(own["main->cycle->step"]), cycle["upper"], main["upper"])
    assert step["upper"] == cycle["upper"]
    assert step["lower"] <= step["value"] <= step["upper"]
    assert f"{CAPPED_NOTE} main->cycle" in step["notes"]
    assert not any(CAPPED_NOTE in n for n in cycle["notes"] + main["notes"])
    # a callpath filter keeps the full run's numbers (the ancestors stay as context)
    part = perfcast.model(exp, callpaths=["main->cycle->step"]).predict(TARGET)
    assert len(part) == 1 and part[0] == step
    # the arrays behind reports: the same bound, and who set it
    v, lo, hi, clipped, capped_by = ms.bounds([("main->cycle->step", "time")], [TARGET], 0.9)
    assert (v[0, 0], lo[0, 0], hi[0, 0]) == (step["value"], step["lower"], step["upper"])
    assert capped_by[0, 0] == "main->cycle"
    with pytest.raises(perfcast.PerfcastError, match="no model of"):
        ms.bounds([("nowhere", "time")], [TARGET])


def test_the_report_shows_the_capped_bound_in_its_table_plot_and_validation():
    from perfcast.report.html import ReportOptions, build_report

    exp = _experiment()
    rows = {r["callpath"]: r for r in perfcast.model(exp).predict(TARGET)}
    check = Experiment(["p"], pd.DataFrame([{"p": 4096.0, "rep": 0, "callpath": cp, "metric": "time", "value": v}
                                            for cp, v in (("main", 91.0), ("main->cycle", 90.0),
                                                          ("main->cycle->step", 12.0))]),
                       [Metric("time", "s", "time", "inclusive")])
    rep = build_report(exp, ReportOptions(target=TARGET, min_share=0.0), validation=check)
    k = next(k for k in rep.kernels if k["callpath"] == "main->cycle->step")
    assert (k["lower"], k["upper"], k["capped_by"]) == (rows["main->cycle->step"]["lower"],
                                                          rows["main->cycle->step"]["upper"], "main->cycle")
    plot = next(p for p in rep.plots if p["callpath"] == "main->cycle->step")
    assert (plot["predicted"], plot["upper"]) == (rows["main->cycle->step"]["value"], rows["main->cycle->step"]["upper"])
    val = next(r for r in rep.validation["rows"] if r["callpath"] == "main->cycle->step")
    assert val["upper"] == rows["main->cycle->step"]["upper"]
    assert np.isfinite(val["lower"])


def test_an_averaged_value_names_the_value_of_the_formula_shown():
    """With the values averaged over the competing hypotheses, the formula printed is the selected
    one: where the two differ, a note gives the formula's own value (the selected model's predict)."""
    from perfcast.modelset import AVERAGED_NOTE

    ms = perfcast.model(_experiment()).with_averaged(True)
    rows = {r["callpath"]: r for r in ms.predict(TARGET)}
    step = rows["main->cycle->step"]
    own = float(ms[("main->cycle->step", "time")].predict(TARGET))
    assert abs(step["value"] / own - 1) > 1e-3          # the noisy kernel: the average moved
    note = next(n for n in step["notes"] if n.startswith(AVERAGED_NOTE))
    assert float(note.rsplit(" ", 1)[1]) == pytest.approx(own, rel=1e-5)
    # the exact lines: every hypothesis agrees, nothing to say
    assert not any(n.startswith(AVERAGED_NOTE) for n in rows["main"]["notes"])

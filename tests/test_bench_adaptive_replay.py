"""bench/adaptive_replay.py: an adaptive campaign's journal replayed, decision by decision, without
running anything -- checked against the journal itself (its recorded widths, its runs' values) and
against the fitted models' own drift."""

import json

import pytest

from perfcast.collect.adaptive import run_adaptive
from perfcast.collect.campaign import CampaignSpec, campaign_dir

from conftest import bench_module

ar = bench_module("bench_adaptive_replay", "adaptive_replay.py")


def test_replay_reproduces_the_campaigns_fits(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\nsleep $(echo "0.05 + 0.004 * $1" | bc -l)\n')
    app.chmod(0o755)
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3, 4, 8, 16]}, reps_min=2, reps_max=2)
    out = tmp_path / "r.perfcast"
    run_adaptive(spec, out, {"n": 32.0}, budget=0.002, until=1e-9)
    cdir = campaign_dir(out)
    recs = [json.loads(line) for line in (cdir / "journal.jsonl").read_text().splitlines()]
    cuts = [i for i, r in enumerate(recs) if r.get("type") == "adaptive" and r.get("event") in ("choose", "stop")]
    assert len(cuts) >= 3, "too few decisions: the test proves nothing"
    checked = 0
    for i in cuts:
        row = ar.step_row(spec, recs[:i], {"n": 32.0}, "app", "time")
        # the replay rebuilds what the campaign fitted: the width it recorded at that decision
        assert row["width"] == pytest.approx(recs[i]["width"], rel=1e-9)
        assert sum(row["shares"].values()) == pytest.approx(1.0, rel=1e-9)
        # the wall times of the runs at the largest n so far, read from the journal by hand
        ok = [r for r in recs[:i] if r.get("type") == "run" and r["status"] == "ok"]
        top = max(r["config"]["n"] for r in ok)
        walls = [v for r in ok if r["config"]["n"] == top
                 for cp, m, v in zip(r["values"]["callpath"], r["values"]["metric"], r["values"]["value"])
                 if cp == "app" and m == "time"]
        if "held_at" in row:
            assert row["held_at"] == top and row["held_runs"] == len(walls)
            assert row["held_mean"] == pytest.approx(sum(walls) / len(walls), rel=1e-12)
            checked += 1
    assert checked >= 1
    # --advise: the run this source tree's advisor chooses at each decision is the one the campaign
    # (the same code, the same request and budget left) recorded in its journal
    for i in cuts[:4]:
        r = recs[i]
        if r["event"] == "choose":
            assert ar.advised(spec, recs[:i], {"n": 32.0}, 0.002 - r["spent"]) == f"{r['kind']} n={r['at']['n']:g}"
    # the whole table: one line per decision
    assert ar.main([str(out)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ") and not ln.startswith("| step")]
    assert len(lines) == len(cuts)

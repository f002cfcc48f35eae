"""collect --adaptive (issue 21, item 2): start design, fit, advise, run, stop rules, journal, resume,
bad input -- on fake applications whose run time follows a known formula (a sleep)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfcast import store
from perfcast.collect.adaptive import check, parse_until, run_adaptive, start_design, total_interval
from perfcast.collect.campaign import CampaignSpec, build_experiment, campaign_dir
from perfcast.errors import PerfcastError
from perfcast.modelset import model

from conftest import cli_json

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def journal(out: Path) -> list[dict]:
    return [json.loads(l) for l in (campaign_dir(out) / "journal.jsonl").read_text().splitlines()]


def runs(recs):
    return [r for r in recs if r.get("type") == "run"]


def decisions(recs, event):
    return [r for r in recs if r.get("type") == "adaptive" and r.get("event") == event]


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "perfcast", *args], capture_output=True, text=True, env=ENV, **kw)


def test_start_design_and_until_parsing():
    # the corner, then the next two values along each parameter with >= 3 values; a held one stays
    assert start_design({"p": [8, 1, 2, 4], "n": [64, 16, 32], "k": [5]}) == [
        {"p": 1, "n": 16, "k": 5}, {"p": 2, "n": 16, "k": 5}, {"p": 4, "n": 16, "k": 5},
        {"p": 1, "n": 32, "k": 5}, {"p": 1, "n": 64, "k": 5}]
    assert parse_until("10%") == 0.1 and parse_until("0.25") == 0.25
    for bad in ("0", "-5%", "ten", "nan%"):
        with pytest.raises(PerfcastError):
            parse_until(bad)


def _one_run_per_point(tmp_path, body: str, budget: float):
    """An adaptive campaign of the shell script ``body`` (its argument: n) on n = 1..24, one run per
    point, target n = 64, an unreachable --until: (result, output, progress lines)."""
    app = script(tmp_path / "app.sh", body)
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3, 4, 6, 8, 12, 16, 24]}, reps_min=1,
                        reps_max=1)
    out = tmp_path / "b.perfcast"
    lines: list[str] = []
    return run_adaptive(spec, out, {"n": 64}, budget, until=1e-9, say=lines.append), out, lines


def test_budget_stops_after_exactly_the_runs_that_fit(tmp_path):
    # every run sleeps S seconds whatever n is, one process each: a run costs S/3600 core-hours.
    # The budget holds 4.5 runs: 3 for the start design (one run per point), then the one chosen
    # run that still fits (n = 3 is 4.4 doublings from the target: a run further out is always worth
    # it); the 5th would need S more with only ~S/2 left
    S = 1.0
    budget = 4.5 * S / 3600
    res, out, lines = _one_run_per_point(tmp_path, f"sleep {S}\n", budget)
    recs = journal(out)
    rr = runs(recs)
    assert len(rr) == 4 and all(r["status"] == "ok" for r in rr)
    assert res.stop == "budget" and res.runs == 4
    # the cost: measured wall time x 1 process, summed over the journal
    spent = sum(r["wall"] for r in rr) / 3600
    assert res.spent == pytest.approx(spent, rel=1e-12)
    assert spent <= budget < spent + S / 3600
    # the start design ran first, in full: n = 1, 2, 3
    assert sorted(r["config"]["n"] for r in rr[:3]) == [1, 2, 3]
    # each chosen run is journaled with the advisor's reason before it ran, in order
    chosen = decisions(recs, "choose")
    assert [c["step"] for c in chosen] == [1]
    for c, r in zip(chosen, rr[3:]):
        assert recs.index(c) < recs.index(r) and r["config"] == c["at"]
        assert c["reason"].startswith(",".join(f"n={v:g}" for v in c["at"].values()))
        assert c["width"] > 1e-9
    stop = decisions(recs, "stop")
    assert len(stop) == 1 and stop[0]["reason"] == "budget" and "what is left buys no useful run" in stop[0]["why"]
    assert len(decisions(recs, "design")) == 1
    assert lines[0].startswith("adaptive: start design 3 point(s)") and lines[-1].startswith("adaptive: stop (budget)")
    # the stored experiment holds exactly the journaled runs
    exp = store.read(out)
    assert int(exp.repetitions()["repetitions"].sum()) == 4


def _width(exp, target):
    from perfcast.analysis.advisor import metrics_needed

    ms = model(exp, metrics_needed(exp, None))
    value, lo, hi = total_interval(ms, "time", ["app"], target)
    return (hi - lo) / value


def test_until_stops_when_the_width_is_reached(tmp_path):
    # run time 0.1 + 0.05 * p seconds, cost x p processes; the 90% interval of the wall time
    # predicted at p = 32 from p <= 3 is wide (3.4 doublings of extrapolation); the points up to
    # p = 16 narrow it
    app = script(tmp_path / "app.sh", 'sleep $(echo "0.1 + 0.05 * $1" | bc -l)\n')
    spec = CampaignSpec(command=f"{app} {{p}}", parameters={"p": [1, 2, 3, 4, 8, 16]}, reps_min=2, reps_max=2)
    out = tmp_path / "u.perfcast"
    until, target = 1.0, {"p": 32.0}
    res = run_adaptive(spec, out, target, budget=0.02, until=until)
    recs = journal(out)
    rr = runs(recs)
    assert res.stop == "until" and res.width <= until
    # cost = wall x p, from the journal
    assert res.spent == pytest.approx(sum(r["wall"] * r["config"]["p"] for r in rr) / 3600, rel=1e-12)
    # the stop rule checked independently, on the experiments of the journal's prefixes: the fits
    # are the one after the start design and one after each chosen run; the campaign stopped at the
    # first fit whose interval and the two before it were within --until
    chosen = decisions(recs, "choose")
    assert len(chosen) >= 2, "fewer than three fits: the test proves nothing"
    run_ends = [i + 1 for i, r in enumerate(recs) if r.get("type") == "run"]
    fits = [recs.index(c) for c in chosen] + [len(recs)]
    widths = [_width(build_experiment(spec, recs[:i]), target) for i in fits]
    assert all(w == pytest.approx(c["width"], rel=1e-9) for w, c in zip(widths, chosen))
    assert widths[-1] == pytest.approx(res.width, rel=1e-9) and run_ends[-1] <= fits[-1]
    within = [w <= until for w in widths]
    assert within[-3:] == [True, True, True]
    assert not any(all(within[j - 2:j + 1]) for j in range(2, len(within) - 1))
    # the prediction the campaign stopped on is the generating formula's run time, within a factor
    # of 2 (a loaded machine stretches the small runs; the interval itself is the models' business)
    assert 0.5 < res.value / (0.1 + 0.05 * 32) < 2


def test_resume_after_kill_reruns_nothing(tmp_path):
    app = script(tmp_path / "app.sh", 'sleep $(echo "0.2 + 0.01 * $1" | bc -l)\n')
    out = tmp_path / "r.perfcast"
    base = ["collect", "--adaptive", "--target", "n=128", "-o", str(out), "-P", "n=1,2,3,4,6,8,12,16,24,32",
            "--reps", "1..1", "--", str(app), "{n}"]
    proc = subprocess.Popen([sys.executable, "-m", "perfcast", *base[:4], "--budget", "1", "--until", "1e-9",
                             *base[4:]], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    jpath = campaign_dir(out) / "journal.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if jpath.exists() and len(decisions([json.loads(l) for l in jpath.read_text().splitlines() if l.strip()],
                                            "choose")) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    before = journal(out)
    assert len(decisions(before, "choose")) >= 2 and not decisions(before, "stop")
    # resume with a budget above the cheapest run (0.2 s) but below what is spent (>= 5 runs): the
    # step the kill interrupted is not finished (nothing is left to pay for it); it stops at once
    r = cli(*base[:4], "--budget", str(0.5 / 3600), "--until", "1e-9", *base[4:])
    assert r.returncode == 0, r.stderr
    after = journal(out)
    assert after[:len(before)] == before and not runs(after[len(before):])
    assert decisions(after, "stop")[-1]["reason"] == "budget"
    # resume with 1 s more than was spent: it finishes what the interrupted step had not run (and
    # may buy one more run with what is left), then stops
    spent = sum(x["wall"] for x in runs(before)) / 3600
    r = cli(*base[:4], "--budget", str(spent + 1 / 3600), "--until", "1e-9", "--json", *base[4:])
    assert r.returncode == 0, r.stderr
    after = journal(out)
    ids = [x["id"] for x in runs(after)]
    assert len(ids) == len(set(ids))                     # no run twice
    new = runs(after[len(before):])
    # the first run after the kill is the chosen step that had not finished; any other is a new step's
    pending = [c for c in decisions(before, "choose")
               if sum(1 for x in runs(before) if x["key"] == runs_key(c["at"]) and x["status"] == "ok") < c["at_least"]]
    assert len(pending) <= 1
    later = decisions(after[len(before):], "choose")
    assert [x["config"] for x in new] == [c["at"] for c in pending + later]
    # every step has its runs; the last one's may have been stopped at the budget (a loaded machine
    # stretches a run beyond the share of the budget it was given)
    last = runs(after)[-1]
    for c in decisions(after, "choose"):
        done = sum(1 for x in runs(after) if x["key"] == runs_key(c["at"]) and x["status"] == "ok")
        assert done >= c["at_least"] or (c is decisions(after, "choose")[-1] and last["status"] == "timeout"
                                         and "the budget" in last["reason"] and last["config"] == c["at"])
    # what is left after the pending run (~0.5 s) buys no run, or none that removes the advisor's
    # 5% of the uncertainty: either way the budget ends it
    stop = decisions(after, "stop")[-1]
    assert len(decisions(after, "design")) == 1 and stop["reason"] in ("budget", "exhausted")
    summary = cli_json(r.stdout, "campaign")
    assert summary["kind"] == "campaign" and summary["stop"] == stop["reason"] and summary["runs"] == len(ids)
    assert [s["step"] for s in summary["items"]] == [c["step"] for c in decisions(after, "choose")]
    assert summary["spent"] <= spent + 1 / 3600 + 0.3 / 3600


def runs_key(at):
    from perfcast.collect.campaign import config_key

    return config_key(at)


@pytest.mark.parametrize("args,where", [
    (["--target", "n=4", "-P", "n=1,2,3,4,8"], "inside the range the campaign can measure"),
    (["--target", "n=16", "-P", "n=1,2,3"], "no candidate beyond the start design"),
    (["--target", "n=16,m=6", "-P", "n=1,2,3,4", "-P", "m=5"], "cannot vary m"),
    (["--target", "n=16,q=2", "-P", "n=1,2,3,4"], "unknown parameter 'q'"),
    (["--target", "n=16", "-P", "n=1,2,3,4", "-P", "m=5,6"], "a model along m needs 3 values"),
])
def test_bad_input_one_line_exit_2_nothing_run(tmp_path, args, where):
    app = script(tmp_path / "app.sh", f'touch {tmp_path}/ran\n')
    out = tmp_path / "x.perfcast"
    uses = ["{m}"] if any(a.startswith("m=") for a in args) else []   # a varied m must reach the command
    r = cli("collect", "--adaptive", "--budget", "1", "-o", str(out), *args, "--", str(app), "{n}", *uses)
    assert r.returncode == 2 and where in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "ran").exists() and not out.exists() and not campaign_dir(out).exists()


def test_budget_below_one_runs_cost(tmp_path):
    # a run's cost is known once one ran: a fresh campaign runs one probe (the cheapest point, once),
    # stopped when it has spent the budget; a resumed one refuses before running anything
    app = script(tmp_path / "app.sh", 'sleep 0.3; echo x >> "$0.count"\n')
    count = tmp_path / "app.sh.count"
    out = tmp_path / "c.perfcast"
    args = ["collect", "--adaptive", "--target", "n=16", "-o", str(out), "-P", "n=1,2,3,4", "--", str(app), "{n}"]
    r = cli(*args[:4], "--budget", "1e-5", *args[4:])        # 0.036 s of one process
    assert r.returncode == 2 and "below one run's cost: n=1 was stopped after" in r.stderr, r.stderr
    # the start-design line, the stopped run's warning, then the error
    assert len(r.stderr.strip().splitlines()) == 3 and "the budget" in r.stderr.splitlines()[1]
    assert not count.exists()                               # stopped in its sleep: it never finished
    (probe,) = runs(journal(out))
    assert probe["status"] == "timeout" and "the budget" in probe["reason"]
    assert 0.036 <= probe["wall"] < 0.036 + 0.3             # the budget's wall time, and killing it
    # a budget the probe fits in, but not the rest of the start design (>= 5 more runs of >= 0.3 s)
    r = cli(*args[:4], "--budget", str(4 * 0.3 / 3600), *args[4:])
    assert r.returncode == 2 and "below what the start design still needs" in r.stderr, r.stderr
    assert count.read_text().count("x") == 1
    r = cli(*args[:4], "--budget", "2e-5", *args[4:])
    assert r.returncode == 2 and "below one run's cost: the cheapest run so far, n=1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert count.read_text().count("x") == 1
    with pytest.raises(PerfcastError, match="budget must be above 0"):
        check(CampaignSpec(command="x {n}", parameters={"n": [1, 2, 3, 4]}), {"n": 8}, 0.0, 0.1)



def test_a_probe_whose_plain_run_fails_is_one_error(tmp_path):
    # the application fails unless valgrind runs it: the probe's cachegrind run succeeds, its plain
    # run does not, and the plain run is what prices the campaign -- one line, exit 2, no store
    from conftest import require_tools

    require_tools("valgrind")
    app = script(tmp_path / "app.sh", 'case "$LD_PRELOAD" in *vgpreload*) exit 0;; *) echo broken >&2; exit 3;; esac\n')
    out = tmp_path / "f.perfcast"
    r = cli("collect", "--adaptive", "--target", "n=16", "--budget", "1", "-o", str(out), "-P", "n=1,2,3,4",
            "--collect", "time,cachegrind", "--", str(app), "{n}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("perfcast: error: the plain run of n=1 failed:"), r.stderr
    modes = {(x["mode"], x["status"]) for x in runs(journal(out))}
    assert ("cachegrind", "ok") in modes and ("main", "ok") not in modes
    assert not out.exists()

def test_a_run_longer_than_priced_is_stopped_at_the_budget(tmp_path):
    # runs at n <= 3 take S seconds, beyond 10 S: the advisor prices a new point from the models of
    # the start design (S), so the chosen run is affordable by its price; the campaign gives it what
    # is left of the budget (1.5 S) and stops it there.  The budget is spent, not exceeded (but for
    # the hundredths of a second killing the run takes), and the stop says why
    S = 1.0
    budget = 4.5 * S / 3600
    res, out, lines = _one_run_per_point(tmp_path, f'if [ "$1" -le 3 ]; then sleep {S}; else sleep {10 * S}; fi\n',
                                         budget)
    rr = runs(journal(out))
    assert [r["status"] for r in rr] == ["ok"] * 3 + ["timeout"]
    assert rr[3]["config"]["n"] > 3 and "the budget" in rr[3]["reason"]
    left = budget - sum(r["wall"] for r in rr[:3]) / 3600
    assert rr[3]["wall"] / 3600 == pytest.approx(left, abs=0.3 / 3600)
    assert res.spent == pytest.approx(sum(r["wall"] for r in rr) / 3600, rel=1e-12)
    assert res.spent < budget + 0.3 / 3600                  # killed at once: no grace after SIGTERM
    assert res.stop == "budget" and "was stopped when it reached the budget" in res.why
    assert lines[-1].startswith("adaptive: stop (budget)")


def test_each_step_reads_the_total_from_the_advice(tmp_path, monkeypatch):
    """A step predicts the total at the target once, in the advisor (Advice.value/lower/upper, the
    interval total_interval gives): ModelSet.predict runs once per advise call, not once more for
    the loop; the journaled width is the one total_interval gives on the runs before the step."""
    import perfcast.analysis.advisor as advisor
    from perfcast.analysis.advisor import metrics_needed
    from perfcast.modelset import ModelSet

    S = 0.2
    app = script(tmp_path / "app.sh", f"sleep {S}\n")
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3, 4, 6, 8, 12, 16, 24]}, reps_min=1,
                        reps_max=1)
    calls = {"predict": 0, "advise": 0}
    predict, advise = ModelSet.predict, advisor.advise

    def count_predict(self, *a, **k):
        calls["predict"] += 1
        return predict(self, *a, **k)

    def count_advise(*a, **k):
        calls["advise"] += 1
        return advise(*a, **k)

    monkeypatch.setattr(ModelSet, "predict", count_predict)
    monkeypatch.setattr(advisor, "advise", count_advise)
    out = tmp_path / "s.perfcast"
    res = run_adaptive(spec, out, {"n": 64}, 8 * S / 3600, until=1e-9)
    recs = journal(out)
    chosen = decisions(recs, "choose")
    assert res.runs == len(runs(recs)) >= 4 and len(chosen) >= 1
    assert calls["advise"] >= 2 * len(chosen) and calls["predict"] == calls["advise"]
    monkeypatch.setattr(ModelSet, "predict", predict)
    for c in chosen:
        exp = build_experiment(spec, recs[:recs.index(c)])
        value, lo, hi = total_interval(model(exp, metrics_needed(exp, None)), "time", ["app"], {"n": 64})
        assert c["width"] == (hi - lo) / value


def test_other_collectors_runs_are_priced_from_their_measured_times(tmp_path):
    # a plain run sleeps 0.3 n seconds; its cachegrind run takes valgrind's start-up more (sh's
    # sleep child is not instrumented, so the slope is 1, not cachegrind's 50x on real work).  A new
    # point runs both, a repetition the plain command only: the advisor prices a new point at its
    # plain run t plus alpha + beta t, the line through the cachegrind runs' (plain, cachegrind)
    # medians measured so far; a round's shares of the budget left go by the same costs
    import numpy as np

    from perfcast.collect.adaptive import _budget_limits
    from perfcast.collect.campaign import Campaign
    from conftest import require_tools

    require_tools("valgrind")
    app = script(tmp_path / "app.sh", 'sleep $(echo "0.3 * $1" | bc -l)\n')
    spec = CampaignSpec(command=f"{app} {{n}}", parameters={"n": [1, 2, 3, 4, 6, 8, 12, 16, 24]}, reps_min=1,
                        reps_max=1, collect="time,cachegrind")
    out = tmp_path / "c.perfcast"
    budget = 20.0 / 3600     # the start design (valgrind starts slowly on a loaded machine) leaves room to choose
    res = run_adaptive(spec, out, {"n": 64}, budget, until=1e-9)
    recs = journal(out)
    rr = runs(recs)
    assert {r["mode"] for r in rr} == {"main", "cachegrind"}

    def line(before):
        walls = {}
        for r in before:
            if r["status"] == "ok":
                walls.setdefault((r["key"], r["mode"]), []).append(r["wall"])
        t, w = zip(*[(np.median(walls[(k, "main")]), np.median(v)) for (k, m), v in walls.items()
                     if m == "cachegrind" and (k, "main") in walls])
        slope = np.polyfit(t, w, 1)[0]           # the plain times differ 3x (0.3..0.9 s): a slope
        assert slope < 5                            # a sleep is not slowed 50x (valgrind's start-up varies)
        beta = max(slope, 1.0)                      # no tool speeds the work up
        return np.mean(w) - beta * np.mean(t), beta

    chosen = decisions(recs, "choose")
    assert chosen and any(c["kind"] == "new" for c in chosen)
    for c in chosen:
        alpha, beta = line(runs(recs[:recs.index(c)]))
        assert 0 < alpha < 10                                # valgrind's start-up
        t = c["run_estimate"] * 3600                         # the plain run, one process
        extra = max(alpha + beta * t, t) if c["kind"] == "new" else 0.0
        assert c["cost_estimate"] * 3600 == pytest.approx(t + extra, rel=1e-6)
    assert res.spent == pytest.approx(sum(r["wall"] for r in rr) / 3600, rel=1e-12)
    assert res.spent < budget + 0.3 / 3600
    # a round of a new point: the cachegrind run's share against the plain run's, the plain run
    # priced as the cheapest plain run so far (per process)
    new = next({"n": float(n)} for n in (24, 16, 12, 8, 6, 4) if not any(r["config"]["n"] == n for r in rr))
    spent = sum(r["wall"] for r in rr) / 3600
    t = min(r["wall"] for r in rr if r["mode"] == "main" and r["status"] == "ok")
    alpha, beta = line(rr)
    camp = Campaign(spec, out)
    with camp.session():
        limits = _budget_limits(camp, spent + 100 / 3600, {})([(new, "main"), (new, "cachegrind")])
    assert limits[1][0] / limits[0][0] == pytest.approx(max(alpha + beta * t, t) / t, rel=1e-6)
    assert limits[0][0] + limits[1][0] == pytest.approx(100, rel=1e-9)


def _sysfs_last_level_bytes():
    """The size of CPU 0's highest data/unified cache level, read from sysfs here (None: none)."""
    best = None
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level, kind, size = ((d / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        if kind != "Instruction" and size[:-1].isdigit() and size[-1] == "K":
            if best is None or int(level) > best[0]:
                best = (int(level), int(size[:-1]) * 1024)
    return None if best is None else best[1]


def test_stop_says_the_interval_cannot_see_beyond_the_runs(tmp_path):
    """The interval at a target beyond the runs comes from them: a change of behaviour between the
    largest measured point and the target (the demo's n = 1024 outgrew the 32 MiB L3 every measured
    n <= 512 fitted in: measured 31-40% above the interval) is not in it.  The campaign says so, in
    its stop line and --json (caveat), with the largest measured values and, when the machine record
    has caches, its last-level cache."""
    res, out, lines = _one_run_per_point(tmp_path, "sleep 0.2\n", 4.5 * 0.2 / 3600)
    ok = [r for r in runs(journal(out)) if r["status"] == "ok"]
    assert res.measured_max == {"n": max(r["config"]["n"] for r in ok)}
    assert res.measured_max["n"] < 64 and res.value is not None
    assert res.caveat is not None and res.caveat in lines[-1] and lines[-1].startswith("adaptive: stop (")
    assert res.summary()["caveat"] == res.caveat and res.summary()["measured_max"] == res.measured_max
    # the machine's last-level cache named exactly when sysfs has one
    assert ("last-level cache" in res.caveat) == (_sysfs_last_level_bytes() is not None)
    # no caveat when nothing lies beyond the runs (the target at the largest measured value)
    from perfcast.collect.adaptive import beyond_the_runs

    top, caveat = beyond_the_runs(store.read(out), res.measured_max)
    assert top == res.measured_max and caveat is None

"""The HTML report in a real browser: Debian Chromium, headless, driven over the DevTools protocol
on a pipe (``--remote-debugging-pipe``; standard library only, no network port).

For each report the test fails on any console message of level error/warning, uncaught exception,
JavaScript dialog (``alert``) or request leaving the file (the report must work offline), checks
that the plots are drawn, and writes screenshots under the test's temp dir.

Inputs: a real dataset (LULESH weak scaling, Caliper, ../shared/data), a small campaign of the
example Jacobi app collected with ``perfcast collect``, and a hostile experiment whose callpath,
metric and parameter names carry markup (``<script>alert(1)</script>`` must show as text).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.experiment import Experiment, Metric
from perfcast.report.html import ReportOptions, write_report

REPO = Path(__file__).resolve().parents[1]
XSS = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium not found: install it (scripts/install-system-deps.sh)")


class Browser:
    """One headless Chromium speaking CDP over fds 3 (commands in) and 4 (replies out)."""

    def __init__(self, tmp: Path):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def child_fds():
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={tmp / 'chrome-profile'}", "--remote-debugging-pipe",
                "--window-size=1400,3000", "about:blank"]
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=child_fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                m = json.loads(raw)
                if m.get("id") == self._id:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m["result"]
                self.events.append(m)
            left = end - time.monotonic()
            ready, _, _ = select.select([self._r], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"chromium did not answer {method} within {timeout} s")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited")
            self._buf += chunk

    def close(self):
        try:
            os.write(self._w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def open_report(path: Path, tmp: Path, shots: str) -> dict:
    """Load ``path``; return its DOM facts and the problems the browser reported."""
    b = Browser(tmp)
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            b.send(f"{domain}.enable", session=s)
        b.send("Page.navigate", {"url": path.resolve().as_uri()}, s)
        ev = lambda expr: b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, s)["result"].get("value")  # noqa: E731
        end = time.monotonic() + 30
        while ev("document.readyState") != "complete":
            assert time.monotonic() < end, "the report did not finish loading"
            time.sleep(0.05)
        facts = json.loads(ev("""JSON.stringify({
            plots: document.querySelectorAll('svg.plot').length,
            curves: document.querySelectorAll('svg.plot path.curve').length,
            extrapolations: document.querySelectorAll('svg.plot path.extrapolation').length,
            bands: document.querySelectorAll('svg.plot polygon.band').length,
            points: document.querySelectorAll('svg.plot circle.point').length,
            bars: document.querySelectorAll('svg.plot rect.bar').length,
            sparks: document.querySelectorAll('svg.spark').length,
            maths: document.querySelectorAll('math').length,
            rankRows: document.querySelectorAll('#ranktable tbody tr').length,
            sections: Array.from(document.querySelectorAll('main > section')).map(e => e.id),
            scripts: Array.from(document.scripts).map(e => e.textContent),
            imgs: document.querySelectorAll('img').length,
            text: document.body.innerText,
            height: document.documentElement.scrollHeight,
            // each rotated y-axis label's extent against its figure's: [label top, bottom, svg top, bottom, text]
            ylabels: Array.from(document.querySelectorAll('svg text.axis[transform]')).map(t => {
                const a = t.getBoundingClientRect(), b = t.ownerSVGElement.getBoundingClientRect();
                return [a.top, a.bottom, b.top, b.bottom, t.textContent]; })})"""))
        # interactivity: sorting by the first column reverses the rank order, the filter hides rows
        ev("document.querySelector('#ranktable thead th').click()")
        ev("document.querySelector('#ranktable thead th').click()")
        facts["sorted_ranks"] = ev("Array.from(document.querySelectorAll('#ranktable tbody tr:not(.other)'))"
                                   ".map(r => +r.cells[0].getAttribute('data-v'))")
        ev("document.querySelector('#ranktable thead th').click()")
        # the "at target" column at common screen widths: its right edge inside the window
        facts["target_column"] = {}
        for width in (1280, 1920):
            b.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 3000, "deviceScaleFactor": 1,
                                                          "mobile": False}, s)
            facts["target_column"][width] = ev(
                "(function(){var th=Array.from(document.querySelectorAll('#ranktable thead th'))"
                ".find(e => e.textContent.trim().startsWith('at target'));"
                "return th ? [th.getBoundingClientRect().right, window.innerWidth] : null})()")
        b.send("Emulation.clearDeviceMetricsOverride", {}, s)
        shot_files = []
        for k, y in enumerate(range(0, min(int(facts["height"]), 9000), 3000)):
            img = b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": y, "width": 1400, "height": 3000,
                                                             "scale": 1}}, s)["data"]
            f = tmp / f"{shots}_{k}.png"
            f.write_bytes(base64.b64decode(img))
            shot_files.append(f)
        facts["screenshots"] = shot_files
        time.sleep(0.2)
        b.send("Runtime.evaluate", {"expression": "1"}, s)  # flush pending events
    finally:
        b.close()
    problems = []
    for e in b.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            problems.append(("exception", p["exceptionDetails"].get("exception", {}).get("description")
                             or p["exceptionDetails"].get("text")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            problems.append(("console", [a.get("value") for a in p.get("args", [])]))
        elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
            problems.append(("log", p["entry"].get("text")))
        elif m == "Page.javascriptDialogOpening":
            problems.append(("dialog", p.get("message")))
        elif m == "Network.requestWillBeSent" and not p["request"]["url"].startswith(("file:", "data:", "about:")):
            problems.append(("network", p["request"]["url"]))
    facts["problems"] = problems
    return facts


def check_clean(facts: dict):
    assert facts["problems"] == [], facts["problems"]
    for f in facts["screenshots"]:
        assert f.stat().st_size > 10_000, f  # a rendered page, not a blank image
    # the only script is the report's own sorting/filter code
    assert len(facts["scripts"]) == 1 and "querySelectorAll('table.sortable')" in facts["scripts"][0]


def test_lulesh_report_in_chromium(data_dir, tmp_path):
    from perfcast.io import load

    exp = load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    out = tmp_path / "lulesh.html"
    rep = write_report(exp, out, ReportOptions(target={"jobsize": 1000}))
    facts = open_report(out, tmp_path, "lulesh")
    check_clean(facts)
    assert facts["sections"] == ["answers", "summary", "ranking", "plots", "breakdown", "scaling-loss", "metrics"]
    # the three answers open the page, the first naming the ranking's first row
    assert [a["question"] for a in rep.answers] == ["What grows?", "What will it cost at jobsize=1000?",
                                                    "Where is performance lost?"]
    assert rep.kernels[0]["callpath"] in facts["text"].split("What will it cost")[0]
    n = len(rep.plots)
    assert n == min(12, sum(1 for k in rep.kernels if k["status"] == "ok")) and n >= 5
    assert facts["plots"] == n + 1  # kernel plots + the cost breakdown
    assert facts["curves"] >= n and facts["extrapolations"] == n and facts["bands"] >= n
    assert facts["points"] == 5 * n  # five process counts, one repetition each
    assert facts["bars"] > 0 and facts["sparks"] == len(rep.kernels)
    assert facts["maths"] == len(rep.kernels) + n
    assert facts["rankRows"] == len(rep.kernels) + 1  # + "other kernels"
    assert facts["sorted_ranks"] == sorted(facts["sorted_ranks"], reverse=True)
    text = facts["text"]
    assert "jobsize=1000" in text and "other kernels: " in text
    assert "CalcHourglassControlForElems" in text and "MPI_Allreduce" in text
    # the prediction at the target is on screen without scrolling the table (issue 19)
    for width, (right, inner) in facts["target_column"].items():
        assert right <= inner, (width, right, inner)


@pytest.fixture(scope="module")
def jacobi_campaign(tmp_path_factory):
    """A real campaign of the example Jacobi app: p = 1..4, 2 repetitions, app timers."""
    if shutil.which("mpicc") is None or shutil.which("mpirun") is None:
        pytest.fail("Open MPI not found: install it (scripts/install-system-deps.sh)")
    r = subprocess.run(["make", "-C", str(REPO / "examples")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = tmp_path_factory.mktemp("jacobi")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cmd = [sys.executable, "-m", "perfcast", "collect", "-o", str(d / "jacobi.perfcast"),
           "-P", "p=1,2,3,4", "--reps", "2..2", "--collect", "time", "--json", "--",
           "mpirun", "--oversubscribe", "-np", "{p}", str(REPO / "examples" / "jacobi" / "jacobi"),
           "-n", "96", "-i", "200", "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "jacobi.perfcast"


def test_example_campaign_report_in_chromium(jacobi_campaign, tmp_path):
    from perfcast.io import load

    exp = load([jacobi_campaign])
    out = tmp_path / "jacobi.html"
    rep = write_report(exp, out, ReportOptions(min_share=0.0))  # all five timers, however small
    facts = open_report(out, tmp_path, "jacobi")
    check_clean(facts)
    assert rep.target == {"p": 16.0} and rep.target_default
    assert {"summary", "ranking", "plots"} <= set(facts["sections"])
    assert len(rep.kernels) == 5 and rep.other is None
    assert len(rep.plots) >= 4 and facts["plots"] == len(rep.plots) + (rep.cost_breakdown is not None)
    assert facts["bands"] >= len(rep.plots) - 1
    # two repetitions per point: spread bars exist and each plot shows the 4 measured medians
    assert facts["points"] == 4 * len(rep.plots)
    assert "mpirun" in facts["text"] and "halo" in facts["text"]


def test_validation_runs_in_chromium(jacobi_campaign, tmp_path):
    # fitted on p = 1..3, validated on the measured p = 4: the table and one black point per plot
    from perfcast.io import load

    exp = load([jacobi_campaign])
    out = tmp_path / "validated.html"
    rep = write_report(exp.select(p=[1, 2, 3]), out, ReportOptions(min_share=0.0, target={"p": 4}),
                       validation=exp.select(p=4))
    facts = open_report(out, tmp_path, "validated")
    check_clean(facts)
    assert "validation" in facts["sections"]
    v = rep.validation
    assert v["summary"]["compared"] == len([k for k in rep.kernels if k["status"] == "ok"]) > 0
    assert all(r["at"] == {"p": 4.0} and r["measured"] > 0 for r in v["rows"])
    # 3 measured medians + 1 validation point per plot
    assert facts["points"] == 4 * len(rep.plots)


def hostile_experiment() -> Experiment:
    rng = np.random.default_rng(1)
    rows = []
    paths = ["main", f"main->{XSS}", f"main->{IMG}", "main->solve", "main->solve->x</svg><b>y"]
    for p in (2, 4, 8, 16, 32):
        for rep in range(3):
            for k, cp in enumerate(paths[1:]):
                v = (k + 1) * 0.01 * p ** (1 + 0.5 * (k == 0)) * (1 + 0.02 * rng.standard_normal())
                rows.append({"p&<q>": p, "rep": rep, "callpath": cp, "metric": "t<i>me</i>", "value": v})
            rows.append({"p&<q>": p, "rep": rep, "callpath": "main", "metric": "t<i>me</i>", "value": 0.001})
    df = pd.DataFrame(rows)
    return Experiment(["p&<q>"], df, [Metric("t<i>me</i>", "s<br>", "time", "exclusive")],
                      meta={"sources": ["<script>alert(3)</script>.cali"]})


def test_hostile_names_are_text_not_markup(tmp_path):
    out = tmp_path / "xss.html"
    write_report(hostile_experiment(), out, ReportOptions(target={"p&<q>": 64}, min_share=0.0))
    html = out.read_text()
    assert XSS not in html and "<img" not in html and "</svg><b>" not in html
    facts = open_report(out, tmp_path, "xss")
    check_clean(facts)  # includes: no dialog opened, only the report's own script
    assert not any("alert" in s for s in facts["scripts"])
    assert facts["imgs"] == 0
    text = facts["text"]
    assert XSS in text and IMG in text and "x</svg><b>y" in text and "t<i>me</i>" in text
    assert facts["plots"] >= 4 and facts["maths"] >= 4


def test_long_axis_labels_fit_their_figures(tmp_path):
    # a metric described at length (the Jacobi example's time: "wall time of the run (app) and
    # application-reported timers" [s]) was drawn as a rotated y label longer than the plot: the browser
    # clipped both ends, the unit with them
    rows = [{"p": p, "rep": r, "callpath": cp, "metric": "time", "value": v * p * (1 + 0.01 * r)}
            for p in (1, 2, 4, 8) for r in range(2) for cp, v in (("app", 1.0), ("app->solve", 0.6))]
    desc = "wall time of the run (app) and application-reported timers"
    exp = Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive", description=desc)])
    out = tmp_path / "long.html"
    write_report(exp, out, ReportOptions(min_share=0.0))
    facts = open_report(out, tmp_path, "long")
    check_clean(facts)
    labels = facts["ylabels"]
    assert len(labels) >= 3   # the model plots and the cost-by-callpath bars
    for top, bottom, svg_top, svg_bottom, text in labels:
        assert top >= svg_top - 0.5 and bottom <= svg_bottom + 0.5, (text, top, bottom, svg_top, svg_bottom)
        assert text.endswith(" [s]") and text.startswith("wall time of the run")

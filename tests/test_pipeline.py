"""The streamed model run (``perfcast model FILE -o X.parquet --stream``, perfcast.pipeline): a file
read, fitted and written a block of REGION lines at a time gives the in-memory run's table (same
bytes), its models are the generating laws and its ranking the hand-computed one; bad input
mid-file is one line naming the file and line, exit 2, nothing written."""

import math

import numpy as np
import pyarrow.parquet as pq
import pytest

import perfcast.pipeline as pipeline
from perfcast.fit import FitOptions, fit_group
from perfcast.fit.shape import estimate_shape, shape_from_sums, shape_sums

from conftest import cli

PS = [4, 8, 16, 32, 64, 128]


def _laws():
    """Generating laws of the mixed file: growth of every kind, strong scaling (falls with p), a
    regime change (segmented), a constant and an all-zero series."""
    return [
        lambda p: 3 + 2 * p * p,
        lambda p: 10 + 5 * math.log2(p),
        lambda p: 1 + 0.5 * p * math.log2(p),
        lambda p: 100 / p + 2,                       # falls with p: a group of its own
        lambda p: 50.0,
        lambda p: 5 + (0 if p <= 16 else 40 * (p - 16)),   # a regime change
        lambda p: 0.0,
        lambda p: 2 + 0.01 * p ** 1.5,
    ]


def _write_mixed(path, regions=300, seed=3, bad_at=None):
    """An Extra-P text file of ``regions`` REGION lines with two metrics (``time``; ``flops``, a
    count: fitted under other options), 5 repetitions with laplace, uniform or no noise.  With
    ``bad_at`` the DATA line of that region's third point holds a word: the line number is
    returned."""
    rng = np.random.default_rng(seed)
    laws = _laws()
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), ""]
    bad_line = None
    for r in range(regions):
        lines.append(f"REGION kernel_{r}")
        for metric in ("time", "flops"):
            lines.append(f"METRIC {metric}")
            law = laws[(r + (metric == "flops")) % len(laws)]
            level = [0.0, 0.02, 0.1][r % 3]
            for k, p in enumerate(PS):
                mu = law(p)
                noise = rng.laplace(0, level, 5) if r % 2 else rng.uniform(-level, level, 5)
                vals = mu * (1 + noise)
                if metric == "flops":
                    vals = np.abs(vals)
                if bad_at == r and metric == "time" and k == 2:
                    lines.append("DATA 1.0 2.0 oops 3.0 4.0")
                    bad_line = len(lines)
                else:
                    lines.append("DATA " + " ".join(f"{v:.9g}" for v in vals))
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return bad_line


@pytest.fixture
def small_blocks(monkeypatch):
    """Ranges of ~3,000 bytes: the 300-region file is read, fitted and written in many parts."""
    monkeypatch.setattr(pipeline, "BLOCK_BYTES", 3000)
    monkeypatch.setattr("perfcast.io.extrap.TEXT_CHUNK_BYTES", 4096)


def test_streamed_table_is_the_in_memory_one(capsys, tmp_path, small_blocks):
    """Same bytes with --stream (many blocks) and --no-stream, one process and two workers; the
    file has several fitting groups (two metric kinds, strong scaling), non-normal noise (the
    adaptive likelihood needs the groups' noise shapes) and segmented models."""
    src = tmp_path / "mixed.txt"
    _write_mixed(src)
    ref = tmp_path / "memory.parquet"
    code, _, err = cli(capsys, "model", src, "-o", ref, "--no-stream", "--workers", "1")
    assert code == 0, err
    for workers in ("1", "2"):
        out = tmp_path / f"stream{workers}.parquet"
        calls = []
        orig = pipeline.model_table

        def spy(*a, **k):
            calls.append(1)
            return orig(*a, **k)

        pipeline_model = pytest.MonkeyPatch()
        pipeline_model.setattr(pipeline, "model_table", spy)
        try:
            code, _, err = cli(capsys, "model", src, "-o", out, "--stream", "--workers", workers)
        finally:
            pipeline_model.undo()
        assert code == 0, err
        assert calls, "the streamed path did not run"
        assert out.read_bytes() == ref.read_bytes()
    assert pq.read_table(ref).num_rows == 600


def test_streamed_models_and_ranking_follow_the_laws(tmp_path, small_blocks):
    """Exact series: each row's model is its generating law (evaluated from the structured terms),
    and the ranking is the hand calculation: increase = (f(256) - f(4)) / sum of every f(256)
    (measured = model on exact data; the default target twice the largest p), in descending order."""
    laws = {f"k{i}": law for i, law in enumerate([lambda p: 3 + 2 * p * p, lambda p: 10 + 5 * math.log2(p),
                                                   lambda p: 1 + 0.5 * p * math.log2(p), lambda p: 50.0,
                                                   lambda p: 2 + 0.25 * p ** 1.5])}
    src = _law_file(tmp_path / "exact.txt", laws)
    out = tmp_path / "x.parquet"
    n = pipeline.model_table(src, out, force=False, options=FitOptions(workers=1))
    assert n == len(laws)
    rows = pq.read_table(out).to_pylist()
    for r in rows:
        got = r["constant"]
        for t in r["terms"] or []:
            f = t["factors"]["p"]
            num, _, den = f["exponent"].partition("/")
            got += t["coefficient"] * 1000.0 ** (float(num) / float(den or 1)) * math.log2(1000.0) ** f["log_exponent"]
        assert got == pytest.approx(laws[r["callpath"]](1000.0), rel=1e-9)
    root = sum(law(256) for law in laws.values())
    want = {k: (law(256) - law(4)) / root for k, law in laws.items()}
    assert [r["callpath"] for r in rows] == sorted(want, key=want.get, reverse=True)
    assert [r["rank"] for r in rows] == list(range(1, len(laws) + 1))
    for r in rows:
        assert r["increase"] == pytest.approx(want[r["callpath"]], rel=1e-9, abs=1e-12)


def test_bad_line_mid_file_is_one_line_and_nothing_is_written(capsys, tmp_path, small_blocks):
    src = tmp_path / "bad.txt"
    line = _write_mixed(src, regions=200, bad_at=150)
    out = tmp_path / "out.parquet"
    code, stdout, err = cli(capsys, "model", src, "-o", out, "--stream")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"{src}:{line}:" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]     # no output, no temporary files


@pytest.mark.parametrize("kind", ["nested", "repeated"])
def test_files_it_does_not_take_are_modelled_in_memory(capsys, tmp_path, small_blocks, kind):
    """Nested callpaths (tree order) and a callpath named by two REGION lines: --stream declines and
    the in-memory run writes the table (the same bytes as --no-stream)."""
    src = tmp_path / f"{kind}.txt"
    _write_mixed(src, regions=40)
    text = src.read_text()
    if kind == "nested":
        text = text.replace("REGION kernel_1\n", "REGION kernel_0->kernel_1\n")
    else:
        text = text.replace("REGION kernel_30\n", "REGION kernel_3\nMETRIC other\n" + "\n".join(
            f"DATA {p} {p} {p}" for p in PS) + "\nREGION kernel_30\n")
    src.write_text(text)
    assert pipeline.model_table(src, tmp_path / "declined.parquet", force=False,
                                options=FitOptions(workers=1)) is None
    assert not (tmp_path / "declined.parquet").exists()
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert cli(capsys, "model", src, "-o", a, "--stream")[0] == 0
    assert cli(capsys, "model", src, "-o", b, "--no-stream")[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_progress_is_reported(tmp_path, small_blocks):
    src = tmp_path / "mixed.txt"
    _write_mixed(src, regions=60)
    seen = []
    pipeline.model_table(src, tmp_path / "x.parquet", force=False, options=FitOptions(workers=1),
                         progress=lambda done, total, what="": seen.append((what, done, total)))
    phases = [w for w, _, _ in seen]
    assert {"1/2 survey", "2/2 fit", "ranking", "writing"} <= set(phases)
    survey = [(d, t) for w, d, t in seen if w == "1/2 survey"]
    assert survey[-1][0] == survey[-1][1] == src.stat().st_size
    fit = [d for w, d, _ in seen if w == "2/2 fit"]
    assert fit == sorted(fit) and fit[-1] == 120


def test_shape_from_parts_is_the_whole_groups():
    """The noise shape from the sums of a group's series taken in parts is estimate_shape of the
    whole group, bit for bit; fit_group given it gives the same arrays; check=False changes the
    drift only."""
    rng = np.random.default_rng(7)
    p = np.array(PS, dtype=float)
    S = 400
    # exponents off the grid: the leave-largest-out check finds drift
    mu = (5 + rng.uniform(0.01, 1, S)[:, None] * p[None, :] ** rng.uniform(0.3, 2.2, S)[:, None]
          * np.log2(p)[None, :] ** rng.uniform(0, 1.5, S)[:, None])
    reps = mu[:, :, None] * (1 + rng.laplace(0, 0.05, (S, len(p), 5)))
    whole = estimate_shape(reps)
    assert whole.adaptive
    parts = [shape_sums(reps[a:a + 37]) for a in range(0, S, 37)]
    r, p2, p3, p4 = (np.concatenate(x) for x in zip(*parts))
    assert shape_from_sums(r.astype(np.uint16), p2, p3, p4) == whole
    mean = reps.mean(axis=2)
    ssd = ((reps - mean[:, :, None]) ** 2).sum(axis=2)
    count = np.full(mean.shape, 5.0)
    opt = FitOptions()
    a = fit_group(p[:, None], mean, count, ssd, ["p"], opt, reps=reps)
    b = fit_group(p[:, None], mean[:100], count[:100], ssd[:100], ["p"], opt, reps=reps[:100], shape=whole)
    c = fit_group(p[:, None], mean, count, ssd, ["p"], opt, reps=reps, check=False)
    assert a.shape == whole
    for f in ("status", "hyp", "weight", "coef", "cov", "quality", "noise", "dof"):
        assert np.array_equal(getattr(a, f)[:100], getattr(b, f), equal_nan=True), f
        assert np.array_equal(getattr(a, f), getattr(c, f), equal_nan=True), f
    assert np.all(np.isnan(c.drift)) and np.any(a.drift > 0)   # unchecked: the drift is unknown


def test_reader_warnings_are_the_whole_files(capsys, tmp_path, small_blocks):
    """Negative times in several ranges: the streamed run prints the in-memory reader's warning
    (the count and the smallest over the whole file, against its largest value)."""
    src = tmp_path / "neg.txt"
    _write_mixed(src, regions=120)
    lines = src.read_text().splitlines()
    data = [i for i, ln in enumerate(lines) if ln.startswith("DATA")]
    for i, v in zip((data[3], data[601], data[1297]), ("-0.5", "-2.25", "-0.125")):   # time blocks
        lines[i] = "DATA " + " ".join([v] + lines[i].split()[2:])
    src.write_text("\n".join(lines) + "\n")
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    _, _, err_stream = cli(capsys, "model", src, "-o", a, "--stream")
    _, _, err_memory = cli(capsys, "model", src, "-o", b, "--no-stream")
    warned = [ln for ln in err_stream.splitlines() if ln.startswith("perfcast: warning:")]
    assert warned == [ln for ln in err_memory.splitlines() if ln.startswith("perfcast: warning:")]
    assert len(warned) == 1 and "3 negative value(s) (smallest -2.25)" in warned[0]
    assert a.read_bytes() == b.read_bytes()


def test_streamed_repetitions_are_kept_per_metric(capsys, tmp_path, small_blocks):
    """Two time metrics, "time" of 5 repetitions of uniform noise on 30 regions and "comm_time" of
    one run on 300: whether a metric's repetitions are kept (its noise shape) and how wide they are
    padded are decided on its own values (fit.series._metric_reps), in memory and block by block
    alike (the survey sums them per metric): the same bytes."""
    rng = np.random.default_rng(3)
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), ""]
    for metric, reps, n in (("time", 5, 30), ("comm_time", 1, 300)):
        lines += [f"METRIC {metric}", ""]
        for i in range(n):
            c0, c1 = rng.uniform(1, 10), rng.uniform(0.05, 0.5)
            lines.append(f"REGION {metric}_k{i}")
            lines += ["DATA " + " ".join(f"{(c0 + c1 * p) * (1 + rng.uniform(-0.04, 0.04)):.10g}"
                                         for _ in range(reps)) for p in PS]
            lines.append("")
    src = tmp_path / "uneven.txt"
    src.write_text("\n".join(lines) + "\n")
    ref, out = tmp_path / "memory.parquet", tmp_path / "stream.parquet"
    code, _, err = cli(capsys, "model", src, "-o", ref, "--no-stream")
    assert code == 0, err
    calls = []
    orig = pipeline.model_table
    mp = pytest.MonkeyPatch()
    mp.setattr(pipeline, "model_table", lambda *a, **k: calls.append(1) or orig(*a, **k))
    try:
        code, _, err = cli(capsys, "model", src, "-o", out, "--stream")
    finally:
        mp.undo()
    assert code == 0, err
    assert calls, "the streamed path did not run"
    assert out.read_bytes() == ref.read_bytes() and pq.read_table(ref).num_rows == 330


def _flat_timers(tmp_path, laws):
    """An Extra-P text file of the flat timers ``laws`` (name -> law of p, 3 equal repetitions at PS)
    plus ``main``, their sum plus 1 (it holds every other timer at every point); ``laws`` gains main."""
    parts = dict(laws)
    laws["main"] = lambda p: 1 + sum(f(p) for f in parts.values())
    return _law_file(tmp_path / "flat.txt", laws)


def _law_file(path, laws):
    """An Extra-P text file at ``path``: each law (name -> law of p) as a region with 3 equal
    repetitions at PS."""
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), "", "METRIC time", ""]
    for name, law in laws.items():
        lines.append(f"REGION {name}")
        lines += ["DATA " + " ".join([repr(float(law(p)))] * 3) for p in PS]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_streamed_root_of_a_flat_timer_list_is_its_whole_run_timer(capsys, tmp_path, small_blocks):
    """A flat timer list whose ``main`` holds every other timer at every point (the sum of the others
    plus 1): the shares are of main (views.whole_run_timer, as in memory), found over every range
    -- main is read in the last of many blocks -- by hand: increase = (f(256) - f(4)) / main(256)."""
    # each a + b p^2 (main too, the sum: its model is exact as well)
    laws = {f"k{i}": (lambda p, i=i: (1 + i) + 0.1 * (1 + i % 7) * p * p) for i in range(40)}
    src = _flat_timers(tmp_path, laws)
    ref = tmp_path / "memory.parquet"
    code, _, err = cli(capsys, "model", src, "-o", ref, "--no-stream")
    assert code == 0, err
    out = tmp_path / "x.parquet"
    n = pipeline.model_table(src, out, force=False, options=FitOptions(workers=1))
    assert n == len(laws)
    assert out.read_bytes() == ref.read_bytes()
    rows = pq.read_table(out).to_pylist()
    want = {k: (law(256) - law(4)) / laws["main"](256) for k, law in laws.items()}
    for r in rows:
        assert r["increase"] == pytest.approx(want[r["callpath"]], rel=1e-9, abs=1e-12)


def test_streamed_and_in_memory_say_the_whole_run_root_alike(capsys, tmp_path, monkeypatch):
    """A flat timer list whose ``main`` holds the others at every point (by construction: their sum
    plus 1, as Relearn's main() holds its timers): both paths of ``model -o X.parquet`` rank by
    main's cost and say so in the same stderr note, naming main; --json keeps stderr quiet."""
    laws = {"comm": lambda p: 2 + 0.5 * p, "compute": lambda p: 100 / p + 3, "io": lambda p: 1 + math.log2(p)}
    src = _flat_timers(tmp_path, laws)
    streamed = []
    orig = pipeline.model_table
    monkeypatch.setattr(pipeline, "model_table", lambda *a, **k: streamed.append(1) or orig(*a, **k))
    notes = {}
    for mode in ("--stream", "--no-stream"):
        code, out, err = cli(capsys, "model", src, "-o", tmp_path / f"{mode}.parquet", mode)
        assert code == 0, err
        notes[mode] = [ln for ln in err.splitlines() if ln.startswith("perfcast: note:")]
        code, out, err = cli(capsys, "model", src, "-o", tmp_path / f"{mode}-q.parquet", mode, "--json")
        assert code == 0 and "note:" not in err, err
    assert len(streamed) == 2                      # --stream took the streamed path (twice), --no-stream not
    assert len(notes["--stream"]) == 1 and "'time' is a flat timer list whose main holds" in notes["--stream"][0]
    assert notes["--stream"] == notes["--no-stream"]
    assert (tmp_path / "--stream.parquet").read_bytes() == (tmp_path / "--no-stream.parquet").read_bytes()

"""The streaming Extra-P text reader against an independent tiny parser, on files spanning many
chunks (the chunk size is lowered), and its hand-over to the line-by-line reader on bad input."""

from __future__ import annotations

import random

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import extrap


def _tiny_parse(text: str):
    """Rows (coords, rep, callpath, metric, value) of a well-formed text file, straight from the spec."""
    params, points, rows, reps = [], [], [], {}
    region = metric = None
    k = 0
    for line in text.splitlines():
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "PARAMETER":
            params += t[1:]
        elif t[0] == "POINTS":
            nums = [float(x) for x in line.replace("(", " ").replace(")", " ").split()[1:]]
            points += [tuple(nums[i:i + len(params)]) for i in range(0, len(nums), len(params))]
        elif t[0] == "REGION":
            region, k = t[1], 0
        elif t[0] == "METRIC":
            metric, k = t[1], 0
        elif t[0] == "DATA":
            for v in t[1:]:
                key = (points[k], region, metric or "metric")
                rows.append((points[k], reps.get(key, 0), region, metric or "metric", float(v)))
                reps[key] = reps.get(key, 0) + 1
            k += 1
    return params, rows


def _write(tmp_path, nparams: int, regions: int, repeat_block: bool, end: str = "\n"):
    rng = random.Random(7)
    pts = [(p,) for p in (4, 8, 16)] if nparams == 1 else [(p, n) for p in (4, 8) for n in (10, 20)]
    lines = ["# made by the test", "PARAMETER p" + (" n" if nparams == 2 else ""),
             "POINTS " + " ".join("( " + " ".join(str(v) for v in pt) + " )" for pt in pts)]
    for m in ("time", "visits"):
        lines.append(f"METRIC {m}")
        for r in range(regions):
            lines.append(f"REGION main->r{r % 97}->k{r}")
            for _ in pts:
                nrep = rng.randint(1, 4)
                lines.append("  DATA\t" + " ".join(f"{rng.uniform(0, 1e3):.{rng.randint(1, 9)}g}"
                                                  for _ in range(nrep)))
            if rng.random() < 0.1:
                lines.append("")
    if repeat_block:  # a block met again continues the repetitions
        lines += ["REGION main->r0->k0"] + [f"DATA {i}.5 {i}.25" for i in range(len(pts))]
    f = tmp_path / "big.txt"
    f.write_text("\r\n".join(lines) + end if nparams == 2 else "\n".join(lines) + end)
    return f


@pytest.mark.parametrize("nparams,repeat_block,end", [(1, False, "\n"), (2, True, ""), (1, True, "")])
def test_streaming_equals_tiny_parser(tmp_path, monkeypatch, nparams, repeat_block, end):
    f = _write(tmp_path, nparams, 600, repeat_block, end)
    monkeypatch.setattr(extrap, "TEXT_CHUNK_BYTES", 4096)  # the file spans dozens of chunks
    assert f.stat().st_size > 20 * 4096
    exp = extrap._read_text_stream(f)  # the streaming path itself, no hand-over
    params, rows = _tiny_parse(f.read_text())
    assert list(exp.parameters) == params
    d = exp.data
    got = list(zip(map(tuple, d[params].to_numpy().tolist()), d["rep"].tolist(), d["callpath"].astype(str),
                   d["metric"].astype(str), d["value"].tolist()))
    assert got == rows  # same rows, same order, bit-identical values
    assert set(exp.metrics) == {"time", "visits"}
    assert exp.tree.parent("main->r0->k0") == "main->r0"
    # each region lists its own repetitions (experiment.absent_repetition_is_zero: never zero-filled)
    said = {"warnings": ["big.txt: DATA blocks of REGION 'main->r0->k0' METRIC 'visits' 2 times: their values are "
                         "merged as repetitions at each point (Extra-P refuses such a file); rename the blocks "
                         "unless they are meant as repetitions (runs appended to one file)"]} if repeat_block else {}
    assert exp.meta == {"comments": ["made by the test"], "repetitions": "listed", **said}
    # and the public reader gives the same Experiment as the line-by-line reference
    assert extrap.read_text(f).equals(extrap._read_text_lines(f))


def test_error_deep_in_a_chunked_file_names_its_line(tmp_path, monkeypatch):
    f = _write(tmp_path, 1, 300, False)
    lines = f.read_text().split("\n")
    bad = len(lines) - 40
    assert lines[bad - 1].lstrip().startswith("DATA")
    lines[bad - 1] = "DATA 1.0 x2"
    f.write_text("\n".join(lines))
    monkeypatch.setattr(extrap, "TEXT_CHUNK_BYTES", 4096)
    with pytest.raises(extrap._Slow):
        extrap._read_text_stream(f)
    with pytest.raises(PerfcastError) as e:
        extrap.read_text(f)
    assert e.value.where == str(bad) and "'x2' is not a number" in e.value.message and str(f) in str(e.value)


def test_many_metrics_single_frame_regions(tmp_path, monkeypatch):
    """200 metrics (more than a byte of codes: the metric column widens mid-file), regions of one
    frame, and a negative count deep in the file handed to the line reader."""
    rng = random.Random(3)
    lines = ["PARAMETER p", "POINTS ( 2 ) ( 4 )"]
    for m in range(200):
        lines.append(f"METRIC m{m}")
        for r in range(5):
            lines += [f"REGION r{r}", f"DATA {rng.uniform(0, 9):.4g} {rng.uniform(0, 9):.4g}",
                      f"DATA {rng.uniform(0, 9):.4g}"]
    f = tmp_path / "m.txt"
    f.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(extrap, "TEXT_CHUNK_BYTES", 1024)
    exp = extrap._read_text_stream(f)
    params, rows = _tiny_parse(f.read_text())
    d = exp.data
    got = list(zip(map(tuple, d[params].to_numpy().tolist()), d["rep"].tolist(), d["callpath"].astype(str),
                   d["metric"].astype(str), d["value"].tolist()))
    assert got == rows
    assert exp.tree.roots() == [f"r{r}" for r in range(5)]
    assert exp.equals(extrap._read_text_lines(f))
    lines.insert(len(lines) - 30, "METRIC visits")
    lines.insert(len(lines) - 30, "REGION r1")
    lines.insert(len(lines) - 30, "DATA 3 -2")
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(extrap._Slow):
        extrap._read_text_stream(f)
    with pytest.raises(PerfcastError) as e:
        extrap.read_text(f)
    assert e.value.where == str(len(lines) - 30) and "negative" in e.value.message


def _random_file(r: random.Random) -> str:
    """A small text file with random blanks, comments, metrics, nested names and a few damages."""
    blank = lambda: r.choice([" ", "  ", "\t", " \t", "\r"]) if r.random() < 0.2 else " "  # noqa: E731
    npar = r.choice([1, 1, 2])
    lines = ["# head"] if r.random() < 0.2 else []
    lines.append("PARAMETER" + blank() + " ".join(["p", "q"][:npar]))
    pts = [[r.choice([1, 2, 4, 8]) for _ in range(npar)] for _ in range(r.randint(1, 3))]
    lines.append("POINTS " + " ".join("( " + " ".join(map(str, p)) + " )" for p in pts))
    metrics = r.choice([[None], ["time"], ["time", "visits"], ["bytes sent"]])
    names = ["a", "b", "a->b", "a -> c", "x  y", "a->b->c", "r1", "->z", "a->", "a->->b", "a - > b"]
    for m in metrics:
        if m is not None:
            lines.append("METRIC" + blank() + m)
        for _ in range(r.randint(1, 4)):
            lines.append("REGION" + blank() + r.choice(names if r.random() < 0.1 else names[:7]) + blank())
            if r.random() < 0.3 and m is not None and len(metrics) > 1:
                lines.append("METRIC " + r.choice(metrics))
            for _ in pts:
                vals = [r.choice(["1", "2.5", "-3", "1e3", ".5", "4.", "7E-2", "+8"]) for _ in range(r.randint(1, 3))]
                lines.append(("  " if r.random() < 0.2 else "") + "DATA" + blank() + blank().join(vals))
            if r.random() < 0.2:
                lines.append(r.choice(["", "# c" + blank() + "x", "#"]))
    for _ in range(r.choice([0, 0, 0, 1, 2])):
        if not lines:
            break
        i = r.randrange(len(lines))
        op = r.randrange(8)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[r.randrange(len(lines))])
        elif op == 2:
            lines[i] = lines[i][:max(0, len(lines[i]) - 1)]
        elif op == 3:
            lines = lines[:i]
        elif op == 4:
            lines[i] = lines[i].replace("1", "-1") + r.choice(["", " x"])
        else:
            lines.insert(i, r.choice(["DATA", "REGION", "METRIC", "REGION ", "DATA nan", "DATA 1e999", "POINTS 3",
                                      "PARAMETER z", "DATAx 1", "FOO", "DATA 1..2", "DATA e5", "DATA -", "DATA 1 2"]))
    return "\n".join(lines) + r.choice(["\n", "", "\n\n", " "])


def _strict(exp):
    """Everything of an Experiment, in order (the repetitions' integer width aside)."""
    d = exp.data
    cats = [(c, list(d[c].cat.categories), d[c].cat.codes.tolist()) for c in ("callpath", "metric")]
    return (exp.parameters, exp.metrics, list(exp.tree._parent.items()), list(exp.tree._name.items()),
            list(exp.tree._children.items()), exp.meta, list(d.columns),
            [str(t) for c, t in d.dtypes.items() if c != "rep"], cats,
            [d[c].tolist() for c in d.columns if c not in ("callpath", "metric")])


def test_streaming_equals_line_reader_on_random_files(tmp_path, monkeypatch):
    """On random files (blanks, comments, nested names, damages), cut into chunks of 16 bytes to
    4 MiB, the streaming path gives exactly the line reader's Experiment or hands the file over; it
    hands over no file the line reader takes."""
    r = random.Random(11)
    f = tmp_path / "r.txt"
    taken = refused = 0
    for _ in range(400):
        f.write_text(_random_file(r))
        monkeypatch.setattr(extrap, "TEXT_CHUNK_BYTES", r.choice([16, 64, 4 << 20]))
        try:
            ref = _strict(extrap._read_text_lines(f))
        except PerfcastError:
            ref = None
        try:
            got = _strict(extrap._read_text_stream(f))
        except extrap._Slow:
            got = None
        assert got == ref, f.read_text()
        taken += got is not None
        refused += ref is None
    assert taken > 100 and refused > 100


def test_cast_accepts_exactly_the_number_syntax():
    """The stream checks DATA values by their bytes ([0-9.eE+-]) and pyarrow's cast to float64;
    over those bytes the cast must accept exactly what the line reader's number pattern accepts,
    with Python's value."""
    import itertools

    import pyarrow as pa
    import pyarrow.compute as pc

    toks = ["".join(t) for n in range(1, 5) for t in itertools.product("01.eE+-", repeat=n)]
    toks += ["1.5e-3", "+.5E+07", "12345678901234567890", "0.1e400", "1e-400", "-0.", "1.e5", "5e+", "1e5.5"]
    for tok in toks:
        try:
            got = pc.cast(pa.array([tok], pa.large_string()), pa.float64())[0].as_py()
        except pa.ArrowInvalid:
            got = None
        want = float(tok) if extrap._NUMBER.fullmatch(tok) else None
        assert got == want, tok

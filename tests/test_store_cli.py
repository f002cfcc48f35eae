"""The on-disk store, the tidy reader and the CLI shell (import/show/formats, errors)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfcast import PerfcastError, store
from perfcast.cli import main
from perfcast.io import load

from test_experiment import small

from conftest import cli_items

CSV = """p,n,callpath,metric,value,unit
2,10,main,time,1.0,s
2,10,main->solve,time,0.5,s
2,10,main,time,1.1,s
4,10,main,time,2.0,s
4,10,main->solve,time,1.5,s
4,10,main,visits,3,
"""


@pytest.fixture
def csv(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text(CSV)
    return p


def run(*args):
    """Run the real console script (one process, as a user would)."""
    exe = Path(sys.executable).with_name("perfcast")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_store_round_trip(tmp_path):
    e = small(ranks=True)
    e.meta["note"] = {"k": [1, 2]}
    store.write(e, tmp_path / "x.perfcast")
    back = store.read(tmp_path / "x.perfcast")
    assert back.equals(e)
    assert back.tree.to_records() == e.tree.to_records()
    assert store.is_store(tmp_path / "x.perfcast")


def test_store_write_is_atomic(tmp_path, monkeypatch):
    e = small()
    dest = tmp_path / "x.perfcast"
    store.write(e, dest)
    before = sorted(os.listdir(dest))

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(store.pq, "write_table", boom)
    with pytest.raises(OSError):
        store.write(small(reps=3), dest)
    # old store intact, no temporary directories left behind
    assert store.read(dest).equals(e)
    assert sorted(os.listdir(dest)) == before
    assert [p.name for p in tmp_path.iterdir()] == ["x.perfcast"]


def test_tidy_reader_repetitions_and_metrics(csv):
    e = load([csv])
    assert e.parameters == ("p", "n")
    reps = e.repetitions().set_index("p")["repetitions"]
    assert reps[2.0] == 2 and reps[4.0] == 1
    assert e.metrics["time"].unit == "s" and e.metrics["time"].kind == "time"
    assert e.metrics["visits"].kind == "count"
    assert e.tree.parent("main->solve") == "main"
    mean = e.aggregate("mean").set_index(["p", "callpath", "metric"])["value"]
    assert mean[(2.0, "main", "time")] == pytest.approx(1.05)


@pytest.mark.parametrize("content,where", [
    ("p,callpath,metric,value\n2,main,time,abc\n", ":2:"),
    ("p,callpath,metric,value\n2,main,time,1\n4,main,time,nan\n", ":3:"),
    ("p,callpath,metric,value\n2,main,time,1\nx,main,time,2\n", ":3:"),
    ("p,callpath,metric,value\n2,main,visits,-4\n", ":2:"),
    ("p,callpath,metric\n2,main,time\n", "(header)"),
    ("p,callpath,metric,value,rep\n2,main,time,1,0\n2,main,time,2,0\n", ":3:"),
    ("", "empty"),
])
def test_tidy_bad_input_names_file_and_line(tmp_path, content, where):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(PerfcastError) as ei:
        load([p], format="tidy")
    msg = ei.value.format()
    assert str(p) in msg and where in msg


def test_cli_import_show_json(tmp_path, csv):
    out = tmp_path / "e.perfcast"
    r = run("import", csv, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    summary = cli_items(r.stdout, "import")[0]
    assert summary["n_points"] == 2 and summary["parameters"] == ["p", "n"]
    r = run("show", out, "--json")
    assert r.returncode == 0, r.stderr
    s = cli_items(r.stdout, "experiment")[0]
    assert [pt["repetitions"] for pt in s["points"]] == [2, 1]
    assert {m["name"]: m["unit"] for m in s["metrics"]} == {"time": "s", "visits": ""}
    assert [c["path"] for c in s["callpaths"]] == ["main", "main->solve"]
    r = run("show", out)
    assert r.returncode == 0 and "solve" in r.stdout and "repetitions" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["show", "/nonexistent/file.csv"], "no such file"),
    (["show", "--format", "nosuch", "{csv}"], "unknown format"),
    (["import", "{csv}", "-o", "{csv}"], "exists"),
    (["show", "{txt}"], "unknown format"),
    (["show", "{csv}", "{csv}", "--point", "p=1"], "--point"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, csv, args, needle):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello\n")
    args = [a.format(csv=csv, txt=txt) for a in args]
    r = run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert needle in lines[0]


def test_cli_failed_import_writes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("p,callpath,metric,value\n2,main,time,1\n3,main,time,oops\n")
    out = tmp_path / "o.perfcast"
    assert main(["import", str(bad), "-o", str(out)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_cli_points_for_parameterless_inputs(tmp_path):
    for i, v in enumerate((1.0, 2.5)):
        (tmp_path / f"run{i}.csv").write_text(f"callpath,metric,value\nmain,time,{v}\n")
    out = tmp_path / "o.perfcast"
    assert main(["import", str(tmp_path / "run0.csv"), str(tmp_path / "run1.csv"),
                 "--point", "p=4", "--point", "p=8", "-o", str(out)]) == 0
    e = store.read(out)
    assert e.aggregate().set_index("p")["value"].to_dict() == {4.0: 1.0, 8.0: 2.5}
    # without --point and without parameters in the paths it says what to do
    with pytest.raises(PerfcastError, match="--point"):
        load([tmp_path / "run0.csv", tmp_path / "run1.csv"])


def test_cli_help_and_version():
    assert main(["--version"]) == 0
    for cmd in ("import", "show", "formats"):
        r = run(cmd, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout


def test_help_and_version_do_not_load_the_numerical_stack():
    # `perfcast --help` / `--version` answer without importing pandas, scipy or numpy (0.08 s instead
    # of 0.7 s on the development VM); checked by module presence, not by timing
    import subprocess
    import sys

    code = ("import sys; from perfcast.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('pandas', 'scipy', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_help_describes_no_range_for_unbounded_numbers():
    # click described a number option without bounds as "[x<=None]" (`project --compute-factor`,
    # `advise --budget`, `view --threshold`, ...): every option's help, read from click's own tree
    import click

    from perfcast.cli import Finite, cli

    seen = 0
    ctx = click.Context(cli)
    for name, cmd in cli.commands.items():
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [(name, cmd)]
        for sub, c in subs:
            text = c.get_help(click.Context(c, info_name=sub, parent=ctx))
            assert "None]" not in text and "None;" not in text, (name, sub)
            unbounded = [o for o in c.params if isinstance(o.type, Finite) and o.type.min is None and o.type.max is None]
            seen += len(unbounded)
    assert seen >= 5   # project --compute-factor, advise/collect --budget, collect --cv, view/waste --threshold
    # a bounded one still says its range
    view = cli.commands["view"]
    assert "x>=0" in view.get_help(click.Context(view, info_name="view", parent=ctx))


def _text(path, points, values):
    """An Extra-P text file of one parameter p, one callpath and metric, one DATA line per point."""
    lines = ["PARAMETER p", "POINTS " + " ".join(f"( {p} )" for p in points), "REGION main", "METRIC time"]
    lines += ["DATA " + " ".join(map(str, v)) for v in values]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_says_which_points_several_inputs_shared(tmp_path, capsys):
    """Inputs whose points overlap are merged as further repetitions without a word (a stored
    experiment given with the file it came from doubled every repetition: 700 -> 1400 values of
    Relearn).  import now says how many points more than one input held (here p = 4 and 8, by
    construction), and every command warns when an input repeats an earlier one's values exactly
    at a point (measured times never do) -- but not for a real rerun, nor for integer counts."""
    from conftest import cli

    a = _text(tmp_path / "a.txt", (2, 4, 8), ([1.25, 1.5], [2.25, 2.5], [4.25, 4.5]))
    rerun = _text(tmp_path / "b.txt", (4, 8, 16), ([2.3], [4.2], [8.1]))
    code, out, err = cli(capsys, "import", a, rerun, "-o", tmp_path / "ab.perfcast", "--json")
    assert code == 0, err
    item = cli_items(out, "import")[0]
    assert (item["n_points"], item["points_in_several_inputs"], item["n_inputs"], item["n_values"]) == (4, 2, 2, 9)
    assert "warning" not in err
    code, out, err = cli(capsys, "import", a, rerun, "-o", tmp_path / "ab2.perfcast")
    assert code == 0 and "2 point(s) measured in more than one of the 2 inputs" in out
    # the same runs twice: a stored experiment and the file it was imported from
    assert cli(capsys, "import", a, "-o", tmp_path / "a.perfcast")[0] == 0
    code, out, err = cli(capsys, "import", tmp_path / "a.perfcast", a, "-o", tmp_path / "aa.perfcast", "--json")
    assert code == 0
    assert cli_items(out, "import")[0]["points_in_several_inputs"] == 3
    warned = [ln for ln in err.splitlines() if ln.startswith("perfcast: warning:")]
    assert len(warned) == 1 and f"{a} holds exactly the values of {tmp_path / 'a.perfcast'} at 3 point(s)" in warned[0]
    assert store.read(tmp_path / "aa.perfcast").data.groupby("p")["rep"].nunique().to_dict() == {2.0: 4, 4.0: 4, 8.0: 4}
    # integer counts repeat exactly in real reruns: no warning
    c1 = _text(tmp_path / "c1.txt", (2, 4), ([3], [5]))
    c2 = _text(tmp_path / "c2.txt", (2, 4), ([3], [5]))
    code, out, err = cli(capsys, "import", c1, c2, "-o", tmp_path / "c.perfcast", "--json")
    assert code == 0 and "warning" not in err and cli_items(out, "import")[0]["points_in_several_inputs"] == 2


@pytest.mark.parametrize("edit,field", [
    (lambda h: h.update(metrics=5), "metrics"),
    (lambda h: h.update(meta=[1]), "meta"),
    (lambda h: h["metrics"][0].update(unit=[1]), "metrics"),
    (lambda h: h.update(parameters="p"), "parameters"),
])
def test_a_corrupt_store_header_is_one_located_error(tmp_path, capsys, csv, edit, field):
    """A hand-edited experiment.json of the wrong shape: 'metrics': 5 and 'meta': [1] ended in an
    internal TypeError (exit 1), a unit [1] was taken as it was."""
    import json

    from conftest import cli, one_error

    out = tmp_path / "e.perfcast"
    assert main(["import", str(csv), "-o", str(out)]) == 0
    head = out / "experiment.json"
    h = json.loads(head.read_text())
    edit(h)
    head.write_text(json.dumps(h))
    line = one_error(*cli(capsys, "show", out)[::2])
    assert f"{head} ({field}): corrupt header" in line


def test_a_metric_described_differently_by_two_inputs_names_the_difference(tmp_path, capsys):
    """The error printed two dataclass reprs (Metric(name='time', unit='', kind='time', ...) vs ...)
    for a unit that differs; it names the field and the two values."""
    from conftest import cli, one_error

    a = _text(tmp_path / "a.txt", (2, 4), ([1.5], [2.5]))
    b = tmp_path / "b.csv"
    b.write_text("p,callpath,metric,value,unit\n8,main,time,4.5,s\n")
    line = one_error(*cli(capsys, "import", a, b, "-o", tmp_path / "ab.perfcast")[::2])
    assert line == f"perfcast: error: {b}: metric 'time' differs between inputs (unit '' vs 's'); the inputs must " \
                   "describe it alike"
    assert not (tmp_path / "ab.perfcast").exists()


def test_one_cali_file_under_two_names_is_warned_about(tmp_path, capsys, data_dir):
    """Caliper files are read together (one run per file, the runs at one jobsize its repetitions):
    the same .cali copied under two names became two identical repetitions without a word, and
    import counted no shared point.  A real second run at another point is not warned about."""
    import shutil

    from conftest import cli

    src = data_dir / "thicket" / "lulesh_weak_scaling_cali"
    d = tmp_path / "runs"
    d.mkdir()
    shutil.copy(src / "27_cores.cali", d / "a.cali")
    shutil.copy(src / "27_cores.cali", d / "b.cali")
    shutil.copy(src / "64_cores.cali", d / "c.cali")
    code, out, err = cli(capsys, "import", d / "a.cali", d / "b.cali", d / "c.cali", "-o", tmp_path / "x.perfcast",
                         "--json")
    assert code == 0, err
    item = cli_items(out, "import")[0]
    assert (item["n_points"], item["points_in_several_inputs"]) == (2, 1)
    warned = [ln for ln in err.splitlines() if "holds exactly the values" in ln]
    assert warned == [f"perfcast: warning: {d / 'b.cali'} holds exactly the values of {d / 'a.cali'} at 1 point(s) "
                      "(the same runs given twice?): they are merged as further repetitions and count twice"]
    # the directory: the same warning, with the names relative to it
    code, out, err = cli(capsys, "show", d)
    assert code == 0 and "b.cali holds exactly the values of a.cali at 1 point(s)" in err
    # the real campaign: five runs at five points, nothing shared, nothing said
    code, out, err = cli(capsys, "import", *sorted(src.glob("*.cali")), "-o", tmp_path / "l.perfcast", "--json")
    assert code == 0 and "holds exactly" not in err
    assert cli_items(out, "import")[0]["points_in_several_inputs"] == 0

"""Export to Extra-P input (io/extrap.py ``export``, ``perfcast export``).

Ground truth: the generating formulas and hand-written values of the experiment built below, the
input files' own values reduced here with pandas, and Extra-P 4.2.5 itself (its readers and its
modeler, run in its own venv: bench/.venv-extrap or PERFCAST_EXTRAP_PYTHON) on the written files.
"""

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, cli, cli_items, extrap_python, one_error, require_data

from perfcast import store
from perfcast.experiment import CallTree, Experiment, Metric
from perfcast.io import load

PS = [2, 4, 8, 16, 32]
NS = [10, 20, 30, 40, 50]
#: the callpaths of the generated experiment, a tree; 'main->solve' has no values of its own
TREE = ["main", "main->solve", "main->solve->dot product(int, double*)", "main->solve->halo", "main->io"]
#: generating formulas (p, n) -> value of the series Extra-P must recover
LAWS = {("main->solve->dot product(int, double*)", "time"): lambda p, n: 3 + 0.01 * n ** 2 * math.log2(p),
        ("main->solve->halo", "time"): lambda p, n: 5 + 2 * p}
#: repetitions around the formula's value: their mean is the value
SPREAD = (0.98, 1.0, 1.02)


def _generated() -> Experiment:
    """2 parameters, 3 repetitions, a callpath tree, two metrics with units."""
    rng = np.random.default_rng(19)
    rows = []
    for cp in TREE:
        if cp == "main->solve":
            continue
        for metric in ("time", "visits"):
            law = LAWS.get((cp, metric))
            for p in PS:
                for n in NS:
                    for rep, f in enumerate(SPREAD):
                        if law is not None:
                            v = law(p, n) * f
                        elif metric == "visits":
                            v = float(rng.integers(1, 10 ** 9))
                        else:
                            v = float(rng.uniform(1e-7, 1e3))   # full-precision doubles
                        rows.append((p, n, rep, cp, metric, v))
    df = pd.DataFrame(rows, columns=["p", "n", "rep", "callpath", "metric", "value"])
    return Experiment(["p", "n"], df, [Metric("time", "s", "time"), Metric("visits", "#", "count")],
                      CallTree.from_paths(TREE))


def _values(exp) -> dict:
    """{(coords, callpath, metric, rep): value}."""
    d = exp.data
    cols = [d[p].tolist() for p in exp.parameters]
    return {(tuple(c), str(cp), str(m), int(r)): v for c, cp, m, r, v in
            zip(zip(*cols), d["callpath"], d["metric"], d["rep"], d["value"])}


@pytest.fixture(scope="module")
def generated():
    return _generated()


@pytest.fixture(scope="module")
def written(generated, tmp_path_factory):
    """The generated experiment written in both formats: {format: path}."""
    from perfcast.io.extrap import write_extrap_json, write_extrap_text

    d = tmp_path_factory.mktemp("export")
    write_extrap_text(generated, d / "gen.txt")
    write_extrap_json(generated, d / "gen.json")
    return {"extrap-text": d / "gen.txt", "extrap-json": d / "gen.json"}


# -- round trip through perfcast's own readers ----------------------------------------------------

@pytest.mark.parametrize("fmt", ["extrap-text", "extrap-json"])
def test_generated_round_trip_is_value_for_value(generated, written, fmt):
    back = load([written[fmt]])
    assert back.meta["format"] == fmt
    assert back.parameters == ("p", "n")
    want = _values(generated)
    assert len(want) == 4 * 2 * 25 * 3
    assert _values(back) == want                     # every float identical, repetitions in order
    # the tree: parents as generated, 'main->solve' (no values) recreated as the inner node
    assert {p: back.tree.parent(p) for p in back.tree.paths} == \
        {"main": None, "main->solve": "main", "main->solve->dot product(int, double*)": "main->solve",
         "main->solve->halo": "main->solve", "main->io": "main"}
    assert set(back.metrics) == {"time", "visits"}


def test_text_file_is_extrap_grammar(written):
    """The text layout checked by hand: PARAMETER lines, one POINTS line per point, REGION then
    METRIC and a DATA line per point with the three repetitions."""
    lines = written["extrap-text"].read_text().splitlines()
    assert lines[:2] == ["PARAMETER p", "PARAMETER n"]
    assert lines[2:27] == [f"POINTS ( {p} {n} )" for p in PS for n in NS]
    i = lines.index("REGION main->solve->halo")
    assert lines[i + 1] == "METRIC time"
    # point (2, 10): 5 + 2*2 = 9, times 0.98, 1, 1.02
    assert lines[i + 2] == "DATA " + " ".join(repr(9 * f) for f in SPREAD)
    assert "REGION main->solve" not in lines        # no values of its own: Extra-P makes the node


def test_real_campaign_round_trip(tmp_path, capsys):
    """A perfcast-collected campaign (HPCCG, per-rank values, some callpaths at some points only):
    the file holds the values reduced here with pandas -- counts summed and times averaged over the
    ranks of each repetition -- for every series measured at all points, the others left out."""
    src = require_data(REPO / "bench" / "data" / "hpccg-n" / "hpccg-n.perfcast")
    exp = load([src])
    code, out, err = cli(capsys, "export", src, "-o", tmp_path / "h.txt", "--drop-incomplete", "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    d = exp.data.astype({"callpath": str, "metric": str})
    kind = {n: m.kind for n, m in exp.metrics.items()}
    keys = ["p", "n", "rep", "callpath", "metric"]
    red = pd.concat([g.groupby(keys)["value"].agg("sum" if kind[m] in ("count", "bytes") else "mean")
                     for m, g in d.groupby("metric")]).reset_index()
    npts = red.groupby(["callpath", "metric"])[["p", "n"]].apply(lambda x: len(x.drop_duplicates()))
    complete = set(npts[npts == npts.max()].index)
    want = {(( r.p, r.n), r.callpath, r.metric, r.rep): r.value for r in red.itertuples()
            if (r.callpath, r.metric) in complete}
    assert _values(load([tmp_path / "h.txt"])) == want
    assert info["n_values"] == len(want) and info["n_series"] == len(complete)
    assert len(info["dropped"]) == len(npts) - len(complete) > 0
    # time is a campaign timer, recorded by rank 0 alone: nothing was averaged
    assert set(d.loc[d["metric"] == "time", "rank"]) == {0} and d.loc[d["metric"] == "Ir", "rank"].nunique() > 1
    assert info["locations"]["time"] == "rank 0 only" and info["locations"]["Ir"] == "sum over ranks"
    assert info["units"]["time"] == "s"


@pytest.mark.parametrize("ranks", ["auto", "max"])
def test_a_metric_one_rank_holds_is_labelled_as_model_labels_it(tmp_path, capsys, ranks):
    """A bench campaign (jacobi): its timers ("time") are recorded once per run, by rank 0; the other
    metrics on every rank.  The description names, per metric, what pandas finds in the store: one
    rank's values ("rank R only", whatever --ranks says), else the reduction over the ranks -- the
    label ``perfcast model`` puts beside the metric (it said "mean over ranks" for the timers)."""
    src = require_data(REPO / "bench" / "data" / "jacobi-p" / "jacobi-p.perfcast")
    exp = load([src])
    d = exp.data.astype({"metric": str})
    code, out, err = cli(capsys, "export", src, "-o", tmp_path / "j.txt", "--drop-incomplete", "--ranks", ranks,
                         "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    ranks_of = d.groupby("metric")["rank"].unique()
    one = {m: int(r[0]) for m, r in ranks_of.items() if len(r) == 1}
    assert one == {"time": 0}
    want = {m: (f"rank {one[m]} only" if m in one else
                f"{ranks if ranks != 'auto' else ('sum' if exp.metrics[m].kind in ('count', 'bytes') else 'mean')}"
                f" over ranks") for m in info["metrics"]}
    assert info["locations"] == want
    note = next(n for n in info["notes"] if "reduced per point" in n)
    assert "rank 0 only (time)" in note and "over ranks (time" not in note and ", time" not in note
    code, out, err = cli(capsys, "model", src, "--metric", "time", "--ranks", ranks, "--json")
    assert code == 0, err
    assert "rank 0 only" in out and "mean over ranks" not in out


def test_caliper_set_round_trip(tmp_path, capsys, data_dir):
    """Caliper region profiles (LULESH weak scaling, one value per run) through JSON."""
    src = require_data(data_dir / "thicket" / "lulesh_weak_scaling_cali")
    exp = load([src])
    code, out, err = cli(capsys, "export", src, "-o", tmp_path / "l.json", "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    back = load([tmp_path / "l.json"])
    assert _values(back) == _values(exp)
    assert info["n_values"] == len(exp.data) == 920 and info["dropped"] == [] and info["locations"] == {}


# -- Extra-P itself reads and models the files ----------------------------------------------------

_EXTRAP = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
from extrap.fileio.file_reader.json_file_reader import JsonFileReader
from extrap.fileio.file_reader.text_file_reader import TextFileReader
from extrap.modelers.model_generator import ModelGenerator
out = {}
for path, model in zip(sys.argv[1::2], sys.argv[2::2]):
    reader = (JsonFileReader if path.endswith(".json") else TextFileReader)()
    reader.keep_values = True
    e = reader.read_experiment(path)
    r = {"parameters": [str(p) for p in e.parameters],
         "tree": [[c.name for c in node.childs] for node in [e.call_tree]],
         "points": [[list(m.coordinate.as_tuple()), m.callpath.name, m.metric.name, m.mean, list(m.values)]
                    for ms in e.measurements.values() for m in ms]}
    if model == "1":
        ModelGenerator(e).model_all()
        at = np.array([[64.0, 128.0], [100.0, 60.0]])   # one column per point, a row per parameter
        r["models"] = {f"{cp.name}|{m.name}": [f.hypothesis.function.to_string(*e.parameters),
                                                np.asarray(f.hypothesis.function.evaluate(at)).tolist()]
                       for (cp, m), f in e.modelers[0].models.items()}
    out[path] = r
json.dump(out, sys.stdout)
"""


def test_extrap_reads_and_models_the_files(generated, written, tmp_path, capsys):
    real = tmp_path / "h.json"
    code, _, err = cli(capsys, "export", REPO / "bench" / "data" / "hpccg-n" / "hpccg-n.perfcast", "-o", real,
                       "--drop-incomplete")
    assert code == 0, err
    args = [str(written["extrap-text"]), "1", str(written["extrap-json"]), "1", str(real), "0"]
    r = subprocess.run([str(extrap_python()), "-c", _EXTRAP, *args], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    ours = _values(generated)
    means = generated.aggregate("mean").set_index(["p", "n", "callpath", "metric"])["value"]
    for fmt in ("extrap-text", "extrap-json"):
        ex = res[str(written[fmt])]
        assert ex["parameters"] == ["p", "n"]
        assert ex["tree"] == [["main"]]
        assert len(ex["points"]) == 4 * 2 * 25
        for coords, cp, metric, mean, values in ex["points"]:
            key = tuple(float(c) for c in coords)
            assert values == [ours[(key, cp, metric, k)] for k in range(3)]   # the very floats
            assert mean == pytest.approx(means[(*key, cp, metric)], rel=1e-13)
        # Extra-P's models of the generated series give the generating formulas
        for (cp, metric), law in LAWS.items():
            formula, vals = ex["models"][f"{cp}|{metric}"]
            assert vals == pytest.approx([law(64, 100), law(128, 60)], rel=1e-9), formula
    # the real campaign: Extra-P's means are perfcast's means of the exported series
    ex = res[str(real)]
    back = load([real]).aggregate("mean").set_index(["p", "n", "callpath", "metric"])["value"]
    assert len(ex["points"]) == len(back) > 9000
    for coords, cp, metric, mean, _ in ex["points"]:
        assert mean == pytest.approx(back[(*(float(c) for c in coords), cp, metric)], rel=1e-13)


# -- per-rank values ------------------------------------------------------------------------------

def _ranked(tmp_path):
    """Two ranks, two repetitions at p = 1, 2: time (s) and calls (count), values by hand."""
    rows = []
    for p in (1, 2):
        for rep in (0, 1):
            for rank, t, c in ((0, 1.0 + rep, 10), (1, 3.0 + rep, 30)):
                rows += [(p, rep, "main", "time", t * p, rank), (p, rep, "main", "calls", c * p, rank)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value", "rank"])
    exp = Experiment(["p"], df, [Metric("time", "s", "time"), Metric("calls", "#", "count")])
    store.write(exp, tmp_path / "r.perfcast")
    return tmp_path / "r.perfcast"


@pytest.mark.parametrize("ranks, time, calls", [
    ("auto", {(1, 0): 2.0, (1, 1): 3.0, (2, 0): 4.0, (2, 1): 6.0},          # mean of times
     {(1, 0): 40.0, (1, 1): 40.0, (2, 0): 80.0, (2, 1): 80.0}),              # sum of counts
    ("max", {(1, 0): 3.0, (1, 1): 4.0, (2, 0): 6.0, (2, 1): 8.0},
     {(1, 0): 30.0, (1, 1): 30.0, (2, 0): 60.0, (2, 1): 60.0})])
def test_ranks_are_reduced_per_repetition(tmp_path, capsys, ranks, time, calls):
    src = _ranked(tmp_path)
    code, out, err = cli(capsys, "export", src, "-o", tmp_path / "r.txt", "--ranks", ranks, "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    back = _values(load([tmp_path / "r.txt"]))
    assert {(c[0], r): v for (c, _, m, r), v in back.items() if m == "time"} == time
    assert {(c[0], r): v for (c, _, m, r), v in back.items() if m == "calls"} == calls
    how = {"auto": ("mean", "sum")}.get(ranks, (ranks, ranks))
    assert info["locations"] == {"time": f"{how[0]} over ranks", "calls": f"{how[1]} over ranks"}
    assert any("reduced per point, repetition and callpath" in n for n in info["notes"])


def test_a_thread_column_alone_is_reduced_too(tmp_path):
    from perfcast.io.extrap import write_extrap_json

    df = pd.DataFrame({"p": [1, 1, 2, 2], "callpath": "main", "metric": "time", "value": [1.0, 2.0, 4.0, 8.0],
                       "thread": [0, 1, 0, 1]})
    info = write_extrap_json(Experiment(["p"], df, [Metric("time", "s", "time")]), tmp_path / "t.json")
    assert info["locations"] == {"time": "mean over threads"}
    assert _values(load([tmp_path / "t.json"])) == {((1.0,), "main", "time", 0): 1.5, ((2.0,), "main", "time", 0): 6.0}


# -- the command line -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gen_store(generated, tmp_path_factory):
    return store.write(generated, tmp_path_factory.mktemp("store") / "gen.perfcast")


@pytest.mark.parametrize("suffix, to", [(".txt", "extrap-text"), (".json", "extrap-json")])
def test_cli_json_describes_what_was_written(gen_store, tmp_path, capsys, suffix, to):
    out_path = tmp_path / ("gen" + suffix)
    code, out, err = cli(capsys, "export", gen_store, "-o", out_path, "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    assert info["output"] == str(out_path) and info["format"] == to
    assert info["parameters"] == ["p", "n"] and info["n_points"] == 25
    assert info["points"][:2] == [{"p": 2, "n": 10}, {"p": 2, "n": 20}]
    assert info["n_callpaths"] == 4 and info["metrics"] == ["time", "visits"]
    assert info["n_series"] == 8 and info["n_values"] == 8 * 25 * 3
    assert info["repetitions"] == {"min": 3, "max": 3}
    assert info["units"] == {"time": "s", "visits": "#"} and info["locations"] == {} and info["dropped"] == []
    # the file holds what it says
    assert _values(load([out_path])) == _values(load([gen_store]))
    # --to wins over the suffix; the terminal line says the same
    code, out, err = cli(capsys, "export", gen_store, "-o", tmp_path / "x.dat", "--to", to)
    assert code == 0, err
    assert f"({to}): 25 point(s) over p, n, 4 callpath(s), 2 metric(s), 8 series, 600 value(s)" in out
    assert "carry no units" in err


def _exp(tmp_path, rows, params=("p",), name="bad.perfcast", tree=None):
    cols = [*params, "rep", "callpath", "metric", "value"]
    exp = Experiment(list(params), pd.DataFrame(rows, columns=cols),
                     [Metric.guess(m) for m in dict.fromkeys(r[len(params) + 2] for r in rows)], tree)
    return store.write(exp, tmp_path / name)


def _two_points(cp="main", metric="time"):
    return [(1, 0, cp, metric, 1.0), (2, 0, cp, metric, 2.0)]


@pytest.mark.parametrize("case, to, message", [
    ("newline", "extrap-text", "line break"),
    ("spaces", "extrap-text", "repeated spaces"),
    ("arrow", "extrap-json", "contains '->'"),
    ("incomplete", "extrap-json", "has values at 1 of the 2 points (none at (p=2))"),
    ("five", "extrap-text", "at most 4"),
    ("space-param", "extrap-text", "contains a space"),
])
def test_bad_input_is_one_line_and_nothing_written(tmp_path, capsys, case, to, message):
    if case == "newline":
        src = _exp(tmp_path, _two_points("main->re\ngion"))
    elif case == "spaces":
        src = _exp(tmp_path, _two_points(metric="wall  time"))
    elif case == "arrow":   # a frame whose name holds the separator (explicit parent link)
        tree = CallTree([("main", None, "main"), ("main->a->b", "main", "a->b")])
        src = _exp(tmp_path, _two_points("main->a->b"), tree=tree)
    elif case == "incomplete":
        src = _exp(tmp_path, _two_points() + [(1, 0, "main->x", "time", 5.0)])
    elif case == "five":
        src = _exp(tmp_path, [(1, 2, 3, 4, 5, 0, "main", "time", 1.0)], params=("a", "b", "c", "d", "e"))
    else:
        src = _exp(tmp_path, [(1, 0, "main", "time", 1.0)], params=("problem size",))
    out_path = tmp_path / "out.file"
    line = one_error(*cli(capsys, "export", src, "-o", out_path, "--to", to)[::2])
    assert message in line and str(out_path) in line, line
    assert list(tmp_path.glob("out.file*")) == [] and list(tmp_path.glob(".out.file*")) == []
    if case == "incomplete":   # --drop-incomplete writes the complete series, listing the other
        code, out, err = cli(capsys, "export", src, "-o", out_path, "--to", to, "--drop-incomplete", "--json")
        assert code == 0, err
        assert cli_items(out, "export")[0]["dropped"] == [{"callpath": "main->x", "metric": "time", "points": 1}]
        assert _values(load([out_path])) == {((1.0,), "main", "time", 0): 1.0, ((2.0,), "main", "time", 0): 2.0}


def test_json_carries_what_text_cannot(tmp_path, capsys):
    src = _exp(tmp_path, _two_points("main->re\ngion", "wall  time"))
    code, _, err = cli(capsys, "export", src, "-o", tmp_path / "ok.json")
    assert code == 0, err
    assert _values(load([tmp_path / "ok.json"])) == {((1.0,), "main->re\ngion", "wall  time", 0): 1.0,
                                                      ((2.0,), "main->re\ngion", "wall  time", 0): 2.0}


def test_existing_output_needs_force_and_a_refused_export_keeps_it(tmp_path, capsys, gen_store):
    out_path = tmp_path / "o.txt"
    out_path.write_text("precious\n")
    line = one_error(*cli(capsys, "export", gen_store, "-o", out_path)[::2])
    assert "output exists; use --force" in line
    bad = _exp(tmp_path, _two_points("main->re\ngion"))
    one_error(*cli(capsys, "export", bad, "-o", out_path, "--force")[::2])
    assert out_path.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".o.txt")] == []
    code, _, err = cli(capsys, "export", gen_store, "-o", out_path, "--force")
    assert code == 0, err
    assert _values(load([out_path])) == _values(load([gen_store]))


def test_no_parameters_and_unknown_suffix_are_refused(tmp_path, capsys, gen_store):
    line = one_error(*cli(capsys, "export", gen_store, "-o", tmp_path / "o.dat")[::2])
    assert "--to extrap-text or --to extrap-json" in line
    line = one_error(*cli(capsys, "export", gen_store, "-o", tmp_path / "o.txt", "--to", "csv")[::2])
    assert "--to" in line
    exp = Experiment([], pd.DataFrame({"callpath": ["main"], "metric": ["time"], "value": [1.0]}),
                     [Metric.guess("time")])
    store.write(exp, tmp_path / "none.perfcast")
    line = one_error(*cli(capsys, "export", tmp_path / "none.perfcast", "-o", tmp_path / "o.txt")[::2])
    assert "no parameters" in line
    assert not (tmp_path / "o.txt").exists()


def test_metric_and_callpath_select_what_is_written(generated, gen_store, tmp_path, capsys):
    """--metric / --callpath write only the chosen series, value for value; an unknown name is one
    error line and writes nothing."""
    out_path = tmp_path / "sel.txt"
    code, out, err = cli(capsys, "export", gen_store, "-o", out_path, "--metric", "time",
                         "--callpath", "main->solve->*", "--json")
    assert code == 0, err
    info = cli_items(out, "export")[0]
    assert info["metrics"] == ["time"] and info["n_series"] == 2
    want = {k: v for k, v in _values(generated).items()
            if k[2] == "time" and k[1].startswith("main->solve->")}
    assert len(want) == 2 * 25 * 3
    assert _values(load([out_path])) == want
    # the written means are the generating formulas' values (the repetitions are 0.98, 1, 1.02 x)
    back = load([out_path]).data
    halo = back[(back["callpath"] == "main->solve->halo") & (back["p"] == 16) & (back["n"] == 30)]
    assert halo["value"].mean() == pytest.approx(5 + 2 * 16, rel=1e-12)
    code, out, err = cli(capsys, "export", gen_store, "-o", tmp_path / "none.txt", "--metric", "cycles")
    assert "no metric 'cycles'" in one_error(code, err) and not (tmp_path / "none.txt").exists()
    code, out, err = cli(capsys, "export", gen_store, "-o", tmp_path / "none.txt", "--callpath", "nowhere*")
    assert "no callpath matches" in one_error(code, err) and not (tmp_path / "none.txt").exists()

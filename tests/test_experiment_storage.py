"""How the Experiment stores what readers hand it (issue 17, item 2: readers at <= 3x the file):
parameter columns as float32 when every value is exactly a float32, and a flat call tree without a
Python object per callpath.  Ground truth: the float64 values given, and a tree built node by node
(the dict representation)."""

import pickle

import numpy as np
import pandas as pd
import pytest

from perfcast import CallTree, Experiment, Metric, PerfcastError
from perfcast.experiment import coordinate_dtype, coordinates


def _exp(p, n_callpaths=3, reps=2):
    rows = [(x, r, f"c{i}", "time", 1.0 + x + i + r) for x in p for i in range(n_callpaths) for r in range(reps)]
    df = pd.DataFrame(rows, columns=["p", "rep", "callpath", "metric", "value"])
    return Experiment(["p"], df, [Metric("time", "s", "time")]), df


@pytest.mark.parametrize("values", [[1, 2, 4, 8, 128], [0.5, 0.25, 3.75], [2.0 ** 24, -7, 0],
                                    [2.0 ** 100, 2.0 ** -20]])
def test_exact_float32_coordinates_are_stored_narrow_with_the_same_values(values):
    exp, df = _exp(values)
    col = exp.data["p"].to_numpy()
    assert col.dtype == np.float32
    # every stored value is the float64 given, exactly
    np.testing.assert_array_equal(col.astype(np.float64), df["p"].to_numpy(dtype=np.float64))
    assert list(exp.points()["p"]) == sorted(set(float(v) for v in values))
    assert exp.points()["p"].dtype == np.float64


@pytest.mark.parametrize("odd", [0.1, 2.0 ** 24 + 1, 1e300, 1.0 + 2.0 ** -30])
def test_a_value_float32_cannot_hold_keeps_the_column_float64(odd):
    exp, df = _exp([1, 2, 4, odd])
    col = exp.data["p"].to_numpy()
    assert col.dtype == np.float64
    np.testing.assert_array_equal(col, df["p"].to_numpy(dtype=np.float64))


def test_coordinate_dtype_decides_by_every_value():
    assert coordinate_dtype(np.array([1.0, 3.0, 2.0 ** 24])) == np.float32
    assert coordinate_dtype(np.array([1.0, 3.0, 2.0 ** 24 + 1])) == np.float64
    assert coordinate_dtype(np.array([1.0, np.nan])) == np.float64   # validate reports the NaN
    assert coordinate_dtype(np.array([1, 2], dtype=np.int64)) == np.float32
    assert coordinate_dtype(np.array([1.5], dtype=np.float32)) == np.float32
    # the odd value in a later block of the check
    big = np.ones(3 << 20)
    big[-1] = 0.1
    assert coordinate_dtype(big) == np.float64
    x = np.array([4.0, 8.0])
    assert coordinates(x).dtype == np.float32 and coordinates(np.array([0.1])).dtype == np.float64


def test_experiments_of_the_same_values_are_equal_whatever_width_they_were_given_in():
    exp64, df = _exp([1, 2, 4])
    df32 = df.astype({"p": np.float32})
    exp32 = Experiment(["p"], df32, [Metric("time", "s", "time")])
    assert exp64.equals(exp32) and exp32.equals(exp64)
    other, _ = _exp([1, 2, 5])
    assert not exp64.equals(other)


def test_selection_and_non_finite_checks_stay_exact_on_a_narrow_column():
    exp, _ = _exp([2.0 ** 24, 2.0])
    assert exp.data["p"].dtype == np.float32
    assert len(exp.select(p=2.0 ** 24).data) == 6
    df = pd.DataFrame({"p": [1.0, np.inf], "callpath": ["a", "a"], "metric": ["t", "t"], "value": [1.0, 2.0]})
    with pytest.raises(PerfcastError, match="parameter 'p' holds 1 non-finite"):
        Experiment(["p"], df, [Metric("t")])


def _selects_any(exp, v):
    try:
        return len(exp.select(p=v).data) > 0
    except PerfcastError:   # an empty selection may be refused: also no match
        return False


def test_a_selection_of_a_value_float32_rounds_onto_a_coordinate_matches_nothing():
    exp, _ = _exp([2.0 ** 24, 2.0])
    assert np.float32(2.0 ** 24 + 1) == np.float32(2.0 ** 24)   # what a float32 comparison would see
    assert not _selects_any(exp, 2.0 ** 24 + 1)
    assert _selects_any(exp, 2.0 ** 24)


# -- the flat call tree ---------------------------------------------------------------------------

PATHS = ["zeta", "alpha", "mid", "alpha", "b"]      # a repeat: kept once, at its first place
ORDER = ["zeta", "alpha", "mid", "b"]


def _both():
    flat = CallTree.from_paths(PATHS)
    ref = CallTree((p, None, p) for p in ORDER)    # node by node: the dict representation
    return flat, ref


def test_flat_tree_answers_as_the_tree_built_node_by_node():
    flat, ref = _both()
    assert flat._par is None and ref._par is not None   # the storage under test, and the reference
    assert flat.paths == ref.paths == ORDER
    assert list(flat) == ORDER and len(flat) == 4
    assert flat.roots() == ref.roots() and list(flat.iter_roots()) == ORDER
    assert flat.preorder() == ref.preorder() and flat.to_records() == ref.to_records()
    assert list(flat.walk()) == list(ref.walk()) == [(p, None, p, 0) for p in ORDER]
    for p in ORDER:
        assert p in flat
        assert (flat.parent(p), flat.name(p), flat.children(p), flat.depth(p), flat.ancestors(p),
                flat.descendants(p)) == (None, p, [], 0, [], [])
    for q in ("", "alph", "alphaa", "zz", "a", None, 3):
        assert q not in flat
    for method in ("parent", "name", "children", "depth", "ancestors", "descendants"):
        with pytest.raises(KeyError):
            getattr(flat, method)("nope")
    assert flat == ref and ref == flat and flat == CallTree.from_paths(list(reversed(ORDER)))
    assert flat != CallTree.from_paths(ORDER[:3])
    assert flat.links() == {}
    assert flat.missing(["b", "x", "alpha", "y"]) == ref.missing(["b", "x", "alpha", "y"]) == ["x", "y"]
    assert flat.missing(sorted(ORDER)) == [] and flat.missing(pd.Index(sorted(ORDER))) == []
    assert flat.missing(["alpha", "b", "mid", "zzz"]) == ["zzz"]   # as many as the tree, one unknown
    assert flat.subset(["b", "zeta"]).paths == ref.subset(["b", "zeta"]).paths == ["zeta", "b"]
    v = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(flat.accumulate(ORDER, v), ref.accumulate(ORDER, v))
    with pytest.raises(KeyError):
        flat.accumulate(["nope"], np.ones((1, 1)))
    assert repr(flat) == repr(ref)


def test_flat_tree_survives_pickling_and_becomes_a_dict_when_changed():
    flat, ref = _both()
    back = pickle.loads(pickle.dumps(flat))
    assert back == ref and back.paths == ORDER
    flat.add("alpha->x", "alpha")
    assert flat._par is not None
    assert flat.children("alpha") == ["alpha->x"] and flat.preorder() == ["zeta", "alpha", "alpha->x", "mid", "b"]


def test_many_lookups_build_the_dict_once_and_answer_the_same():
    paths = [f"r{i}" for i in range(5000)]
    tree = CallTree.from_paths(paths)
    assert all(p in tree for p in paths)          # more lookups than len/8 + 1024
    assert tree._par is not None
    assert tree.paths == paths and "r5000" not in tree


def test_nested_paths_still_build_the_linked_tree():
    tree = CallTree.from_paths(["main->a->b", "main", "side"])
    assert tree._par is not None
    assert tree.paths == ["main", "main->a", "main->a->b", "side"]
    assert tree.parent("main->a->b") == "main->a"
    assert list(tree.walk()) == [("main", None, "main", 0), ("main->a", "main", "a", 1),
                                 ("main->a->b", "main->a", "b", 2), ("side", None, "side", 0)]


def test_an_experiment_names_a_callpath_its_tree_lacks():
    df = pd.DataFrame({"callpath": ["a", "b"], "metric": ["t", "t"], "value": [1.0, 2.0]})
    with pytest.raises(PerfcastError, match="not in the call tree: b"):
        Experiment([], df, [Metric("t")], CallTree.from_paths(["a", "c"]))
    assert Experiment([], df, [Metric("t")], CallTree.from_paths(["b", "a"])).tree.paths == ["b", "a"]


# -- the readers give the same columns ------------------------------------------------------------

def _text(path, points):
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {x!r} )" for x in points), "", "METRIC time", ""]
    for r in ("r0", "r1"):
        lines += [f"REGION {r}"] + [f"DATA {i + 1}.5 {i + 2}.25" for i in range(len(points))] + [""]
    path.write_text("\n".join(lines) + "\n")
    return path


def _csv(path, points):
    rows = ["p,callpath,metric,value"]
    for r in ("r0", "r1"):
        for i, x in enumerate(points):
            rows += [f"{x!r},{r},time,{i + 1}.5", f"{x!r},{r},time,{i + 2}.25"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("points, dtype", [([4.0, 8.0, 16.0, 32.0], np.float32),
                                           ([0.1, 1.0, 10.0, 100.0], np.float64)])
def test_text_stream_line_reader_and_tidy_csv_agree_on_the_parameter_column(tmp_path, points, dtype):
    from perfcast import io
    from perfcast.io import extrap

    text = _text(tmp_path / "a.txt", points)
    streamed = extrap._read_text_stream(text)
    lines = extrap._read_text_lines(text)
    tidy = io.read_one(_csv(tmp_path / "a.csv", points))
    for exp in (streamed, lines, tidy):
        col = exp.data["p"].to_numpy()
        assert col.dtype == dtype
        # the coordinates as written (float64 of the decimal text), each row's its point's
        assert sorted(set(col.astype(np.float64).tolist())) == points
        key = exp.data.assign(callpath=exp.data["callpath"].astype(str)).sort_values(["callpath", "p", "rep"])
        np.testing.assert_array_equal(key["p"].to_numpy(np.float64), np.repeat(points * 2, 2))
        np.testing.assert_array_equal(key["value"].to_numpy(),
                                      [v for _ in range(2) for i in range(len(points)) for v in (i + 1.5, i + 2.25)])
    assert streamed.equals(lines)


@pytest.mark.parametrize("tree", [None, CallTree.from_paths(["b", "x", "a"]),
                                  CallTree([("x", None, "x"), ("x->a", "x", "a"), ("b", None, "b")])])
def test_callpath_records_say_which_callpaths_have_rows(tree):
    paths = ["b", "a"] if tree is None or "a" in tree else ["b", "x->a"]
    df = pd.DataFrame({"callpath": paths, "metric": ["t", "t"], "value": [1.0, 2.0]})
    exp = Experiment([], df, [Metric("t")], tree)
    recs = list(exp.callpath_records())
    assert [r["path"] for r in recs] == exp.tree.preorder()
    rows = set(df["callpath"])                  # ground truth: the callpaths the rows name
    assert {r["path"]: r["has_values"] for r in recs} == {p: p in rows for p in exp.tree.paths}


def test_a_tidy_column_widens_when_a_later_block_holds_a_value_float32_cannot(tmp_path):
    from perfcast.io import tidy

    n = 80_000                                  # ~1.9 MB: more than one of the stream's blocks
    assert n * 24 > tidy.CSV_BLOCK_BYTES
    rows = ["p,callpath,metric,value"]
    rows += [f"{4 if i % 2 else 8},c{i % 100},time,{i}.5" for i in range(n)]
    rows += [f"0.1,c{i},time,{i}.25" for i in range(100)]      # the last block only
    path = tmp_path / "late.csv"
    path.write_text("\n".join(rows) + "\n")
    streamed = tidy._read_csv_stream(path)
    col = streamed.data["p"].to_numpy()
    assert col.dtype == np.float64
    assert sorted(set(col.tolist())) == [0.1, 4.0, 8.0]
    # row by row the values written (the stream keeps the file's row order)
    np.testing.assert_array_equal(col, [4.0 if i % 2 else 8.0 for i in range(n)] + [0.1] * 100)
    whole = tidy._read_csv_whole(path, None)
    assert whole.data["p"].dtype == np.float64 and streamed.equals(whole)

"""perfcast.arrow_kernels calls Arrow's kernels as pyarrow.compute does: every function perfcast
calls through it, on the same inputs, gives pyarrow.compute's result (the peer implementation)."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from perfcast import arrow_kernels as ak

LINES = pa.array(["  DATA 1 2.5  3e-7", "REGION  a ->  b", None, "", "METRIC\ttime", "# note"], pa.large_string())
TEXT = pa.array(["x", "", None, "a b"])


@pytest.mark.parametrize("name, args, kwargs", [
    ("ascii_trim_whitespace", (LINES,), {}),
    ("ascii_ltrim_whitespace", (LINES,), {}),
    ("utf8_slice_codeunits", (LINES, 4), {}),
    ("utf8_slice_codeunits", (LINES, 1, 3), {}),
    ("replace_substring_regex", (LINES, r"[ \t\r]+", " "), {}),
    ("replace_substring_regex", (LINES, r"a", "b"), {"max_replacements": 1}),
    ("match_substring", (LINES, "->"), {}),
    ("match_substring_regex", (LINES, r"^->|->$"), {}),
    ("ascii_split_whitespace", (LINES,), {}),
    ("list_value_length", (pc.ascii_split_whitespace(LINES),), {}),
    ("list_flatten", (pc.ascii_split_whitespace(LINES),), {}),
    ("any", (pa.array([False, None, True]),), {}),
    ("any", (pa.array([False, None]),), {}),
    ("unique", (TEXT,), {}),
    ("drop_null", (TEXT,), {}),
    ("is_null", (TEXT,), {}),
    ("invert", (pa.array([True, None, False]),), {}),
    ("if_else", (pa.array([True, False, None, True]), TEXT, pa.scalar("null")), {}),
    ("replace_with_mask", (TEXT, pa.array([True, False, False, True]), pa.array(["A", "B"])), {}),
    ("binary_join_element_wise", (pa.scalar("<"), TEXT, pa.scalar(">"), pa.scalar("")), {}),
    ("index_in", (TEXT,), {"value_set": pa.array(["a b", "x"])}),
    ("dictionary_encode", (TEXT,), {}),
    ("array_sort_indices", (pa.array([3, 1, None, 2]),), {}),
])
def test_the_functions_perfcast_calls_equal_pyarrow_compute(name, args, kwargs):
    got = getattr(ak, name)(*args, **kwargs)
    want = getattr(pc, name)(*args, **kwargs)
    assert got.equals(want), (name, got, want)
    assert type(got) is type(want)


def test_cast_take_filter_as_pyarrow_compute_and_the_array_methods():
    f = ak.cast(pa.array(["1.5", "-2e3", "7"]), pa.float64())
    assert f.to_pylist() == [1.5, -2000.0, 7.0]
    s = ak.cast(pa.array([0.1, 1e22, -3.25]), pa.string())
    assert s.equals(pc.cast(pa.array([0.1, 1e22, -3.25]), pa.string()))
    with pytest.raises(pa.ArrowInvalid):          # not a number: refused, as pc.cast (safe)
        ak.cast(pa.array(["1.5", "x"]), pa.float64())
    with pytest.raises(pa.ArrowInvalid):          # an overflow: refused
        ak.cast(pa.array([300], pa.int64()), pa.int8())
    idx = np.array([3, 0, 0])
    assert ak.take(TEXT, idx).equals(TEXT.take(idx)) and ak.take(TEXT, idx).to_pylist() == ["a b", "x", "x"]
    with pytest.raises(IndexError):
        ak.take(TEXT, np.array([4]))
    mask = pa.array([True, None, False, True])
    assert ak.filter(TEXT, mask).equals(TEXT.filter(mask)) and ak.filter(TEXT, mask).to_pylist() == ["x", "a b"]


def test_wrong_calls_fail_as_pyarrow_compute():
    with pytest.raises(AttributeError):
        ak.no_such_kernel
    with pytest.raises(TypeError):
        ak.utf8_slice_codeunits()                  # the strings missing
    with pytest.raises(TypeError):
        ak.unique(TEXT, 3)                         # an option for a function that has none

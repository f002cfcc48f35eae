"""An experiment's value table as plain columns: numpy arrays, names as codes into a list.

The Experiment's public ``data`` is a pandas DataFrame (:mod:`perfcast.experiment`); a reader
can hand its columns over as a :class:`Columns` instead, and the model path (statistics, fit,
model set) reads them through :attr:`perfcast.experiment.Experiment.cols`, so that a command
reading an Extra-P text file and modelling it never imports pandas (~0.19 s of a ~0.9 s
command: issue 17).  The DataFrame is made from the columns when something asks for it
(:meth:`Columns.to_pandas`), and the columns of a DataFrame are its own arrays
(:meth:`Columns.from_pandas`): one representation of the rules on the columns for both.
"""

from __future__ import annotations

import sys
from typing import Iterator, Mapping

import numpy as np

from .lazy import LazyModule

pd = LazyModule("pandas")   # imported when a DataFrame is made or read (perfcast.lazy)


def pandas_object(obj, *types: str) -> bool:
    """Whether ``obj`` is an instance of one of the pandas ``types`` (dotted names under
    ``pandas``), without importing pandas: an object of a module not imported is none."""
    mod = sys.modules.get("pandas")
    if mod is None:
        return False
    for t in types:
        cls = mod
        for part in t.split("."):
            cls = getattr(cls, part)
        if isinstance(obj, cls):
            return True
    return False


def names_list(names) -> list[str]:
    """``names`` (a list, a numpy array, a pandas Index, an Arrow array) as a list of str."""
    if hasattr(names, "to_pylist"):
        return names.to_pylist()
    return names.tolist() if hasattr(names, "tolist") else list(names)


class Category:
    """A categorical column: ``codes`` (signed integers; -1 a missing value) into ``names``
    (distinct strings: a list, a numpy array, a pandas Index or an Arrow string array)."""

    __slots__ = ("codes", "names", "_objects")

    def __init__(self, codes: np.ndarray, names):
        self.codes = codes
        self.names = names
        self._objects = None

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def n_names(self) -> int:
        return len(self.names)

    def name_list(self) -> list[str]:
        """Every name, in code order, as Python strings."""
        return self.objects().tolist()

    def objects(self) -> np.ndarray:
        """The names as a numpy object array of str (made once)."""
        if self._objects is None:
            self._objects = np.array(names_list(self.names) if len(self.names) else [], dtype=object)
        return self._objects

    def strings(self, rows: np.ndarray) -> list[str]:
        """The names of the rows ``rows`` (codes >= 0), as Python strings."""
        return self.objects()[self.codes[rows]].tolist()

    def code_of(self, name: str) -> int:
        """The code of ``name``, -1 when it is not a name."""
        for i, n in enumerate(names_list(self.names)):
            if n == name:
                return i
        return -1

    def take(self, rows: np.ndarray) -> "Category":
        c = Category(self.codes[rows], self.names)
        c._objects = self._objects
        return c

    def to_pandas(self):
        """The pandas Categorical of these codes and names (string categories; the names are
        distinct by construction, so pandas' check that they are, which builds the Index's hash
        table -- for 800,000 callpaths an object array of new strings and its table, +57 MB --
        is skipped)."""
        names = self.names
        if isinstance(names, list):
            names = pd.Index(names)
        elif not isinstance(names, pd.Index):
            names = pd.Index(names, dtype="str")
        fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)  # private: the public path if it goes
        if fast is None:
            return pd.Categorical.from_codes(self.codes, names, validate=False)
        return pd.Categorical.from_codes(self.codes, dtype=fast(names, False), validate=False)


class Columns:
    """Named columns of equal length: numpy arrays and :class:`Category` columns, in order."""

    __slots__ = ("_cols", "_n")

    def __init__(self, cols: Mapping[str, "np.ndarray | Category"]):
        self._cols = dict(cols)
        lengths = {len(c) for c in self._cols.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self._n = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str):
        return self._cols[name]

    def __contains__(self, name: str) -> bool:
        return name in self._cols

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols)

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def take(self, rows: np.ndarray) -> "Columns":
        return Columns({k: c.take(rows) if isinstance(c, Category) else c[rows] for k, c in self._cols.items()})

    def select(self, names) -> "Columns":
        """The columns ``names``, in that order (not copied)."""
        return Columns({k: self._cols[k] for k in names})

    def with_columns(self, **cols) -> "Columns":
        out = dict(self._cols)
        out.update(cols)
        return Columns(out)

    def to_pandas(self):
        """The DataFrame of these columns (no copy of the numpy arrays)."""
        frame = {k: c.to_pandas() if isinstance(c, Category) else c for k, c in self._cols.items()}
        return pd.DataFrame(frame, index=pd.RangeIndex(self._n), copy=False)

    @classmethod
    def from_pandas(cls, df) -> "Columns":
        """The columns of ``df`` (categorical columns by their codes and categories; no copy)."""
        return cls({k: column(df[k]) for k in df.columns})


def column(series) -> "np.ndarray | Category":
    """A pandas column as a numpy array, or a :class:`Category` when it is categorical."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cat = series.array
        return Category(cat.codes, cat.categories)
    return series.to_numpy()


#: rows searched at a time by :func:`distinct_sorted` (its temporaries: ~10 bytes a row)
_DISTINCT_BLOCK = 1 << 20


def distinct_sorted(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` (the distinct values, sorted) of a numeric column, quick when they are few
    (a parameter's: a few values over millions of rows): the distinct values of a sample, then
    one search of every row among them, a block of rows at a time (a whole-column search of 21M
    rows held ~350 MB of positions and comparisons: ``perfcast show`` of a 200 MB file peaked at
    870 MB), a sort only of the rows not found."""
    n = len(a)
    if n <= 8192:
        return np.unique(a)
    cand = np.unique(a[::n // 4096])
    missed = []
    for i in range(0, n, _DISTINCT_BLOCK):
        b = a[i:i + _DISTINCT_BLOCK]
        pos = np.searchsorted(cand, b)
        np.minimum(pos, len(cand) - 1, out=pos)
        miss = cand[pos] != b
        if miss.any():
            missed.append(b[miss])
    if missed:
        cand = np.unique(np.concatenate([cand, *missed]))
    return cand


def factorize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(a)`` of a numeric array without NaN: each value's number in order of first
    appearance (int64) and the distinct values in that order; pandas' own for anything else."""
    if a.dtype.kind not in "biuf" or (a.dtype.kind == "f" and np.isnan(a).any()):
        codes, uniq = pd.factorize(a)
        return codes.astype(np.int64, copy=False), np.asarray(uniq)
    u = distinct_sorted(a)
    inv = np.searchsorted(u, a)
    n = len(a)
    first = np.empty(len(u), dtype=np.int64)
    first[inv[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)   # repeated: the last write (the first row) stays
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(u), dtype=np.int64)
    rank[order] = np.arange(len(u), dtype=np.int64)
    return rank[inv], u[order]


# pyarrow's own conversions (pa.array, pa.scalar, a Python number or a numpy array handed to a
# pyarrow.compute function) import pandas on their first call, to ask whether the object is a
# pandas one (pyarrow's pandas shim: ~0.19 s).  The arrays the model path hands to Arrow are
# made from their buffers instead.

def arrow_array(a: np.ndarray):
    """A 1-D numpy array of numbers or booleans as an Arrow array of the same values (what
    ``pa.array(a)`` gives: NaN stays a value, nothing is null), from its buffer."""
    import pyarrow as pa

    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        bits = np.packbits(a, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def arrow_strings(strings, type=None):
    """Python strings as an Arrow string array (``type``: pa.string() or pa.large_string();
    what ``pa.array(strings, type=type)`` gives), from their UTF-8 bytes."""
    import pyarrow as pa

    type = pa.string() if type is None else type
    try:
        data = [s.encode("utf-8") for s in strings]
    except AttributeError:      # not all strings (a None: a null): pyarrow's own conversion
        return pa.array(strings, type)
    wide = type == pa.large_string()
    offsets = np.zeros(len(data) + 1, dtype=np.int64 if wide else np.int32)
    np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)), out=offsets[1:])
    return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


_NUMPY_OF_ARROW: dict = {}


def _numpy_dtype(t) -> np.dtype | None:
    """The numpy dtype of an Arrow integer, floating or boolean type; None for any other."""
    if not _NUMPY_OF_ARROW:
        import pyarrow as pa

        for np_t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                     np.float16, np.float32, np.float64, np.bool_):
            _NUMPY_OF_ARROW[pa.from_numpy_dtype(np.dtype(np_t))] = np.dtype(np_t)
    return _NUMPY_OF_ARROW.get(t)


def numpy_of(arr) -> np.ndarray:
    """An Arrow array (or chunked array) of numbers or booleans without nulls as numpy (what
    ``arr.to_numpy(zero_copy_only=False)`` gives: a read-only view of its buffer where it can),
    read from its buffers; anything else by ``to_numpy`` itself (which imports pandas)."""
    import pyarrow as pa

    dtype = _numpy_dtype(arr.type)
    if dtype is None or arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    if isinstance(arr, pa.ChunkedArray):
        parts = [numpy_of(c) for c in arr.chunks]
        if len(parts) == 1:
            return parts[0]
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
        out.flags.writeable = False
        return out
    n, off = len(arr), arr.offset
    buf = arr.buffers()[1]
    if dtype == np.bool_:
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.frombuffer(buf, dtype=np.uint8)
        out = np.unpackbits(bits, bitorder="little", count=off + n)[off:].astype(bool)
        out.flags.writeable = False
        return out
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n, offset=off * dtype.itemsize)


def arrow_scalar(text: str):
    """``text`` as an Arrow string scalar (for a pyarrow.compute argument: a Python str there is
    converted by ``pa.scalar``, which imports pandas)."""
    return arrow_strings([text])[0]

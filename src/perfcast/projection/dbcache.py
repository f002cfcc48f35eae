"""The benchmark database parsed once: a binary cache of :func:`.project.load_db`'s result.

Parsing the published SPEC CPU2017 tables and joining the integer results to the same machines
takes seconds; reading the result back from Parquet takes tens of milliseconds.  The cache holds
the final :class:`.database.BenchmarkDB` (``results`` and ``systems``, two Parquet files written
side by side) for one list of source tables.

Where: ``$PERFCAST_CACHE/benchdb`` when set, else ``$XDG_CACHE_HOME/perfcast/benchdb``, else
``~/.cache/perfcast/benchdb`` -- never beside the (read-only, third-party) tables or in the package.

Validity: the files are named after the source tables' resolved paths (the *stem*: one database)
and a key made of every source's path, size and modification time (ns) plus a digest of the loader's
own source code and :data:`VERSION`; the key is also stored in each file and checked on reading.  A
table that changes (or a loader that changes) gives another key, and the database is parsed and
written under the new name.  Writing a new pair removes the stale entries of the same database: its
files of another key (or of the old unkeyed naming) that are older than the pair just written, and
temporary files of interrupted writes of older perfcast (``NAME.XXXXXXXX.tmp``) older than
:data:`STALE_TMP_SECONDS` -- never a file newer than the new pair (a concurrent run of another
build may have just written it) and never the pair itself.  Each file is written to a temporary
name and renamed into place (atomic on one file system), so a reader sees a whole file or none; the
temporary is named and cleaned by the rule of every perfcast writer
(:func:`perfcast.output.temporary_file`: a killed writer's goes with the next write of the file); a pair from two
different builds has two keys and is not used.  A missing, corrupt, foreign or unreadable cache
means parsing, and a cache that cannot be written is skipped -- the cache can make a command faster,
never fail it.  Sources smaller than :data:`MIN_BYTES` in total are not cached (parsing them is as
fast as reading a cache).

The installed ``perfcast-data`` wheel (:mod:`perfcast.datapkg`) carries the database of its own
tables already parsed, in ``benchdb/``: when every source is a table of that package, the packaged
pair is read first (keyed by the tables' contents and the loader's code, not by paths or times,
which the installation decides), so a fresh install answers its first query without parsing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..cache import cache_root

#: bump when the cached layout changes
VERSION = "2"
#: sources smaller than this in total (bytes) are parsed every time
MIN_BYTES = 256 * 1024
_META = b"perfcast.benchdb"
#: modules whose code decides what the database holds (their digest is part of the key)
_LOADER_FILES = ("database.py", "project.py", "dbcache.py")
#: temporary files of older perfcast's naming of this age (seconds) are left over from an interrupted
#: write, not one under way (today's are removed when their writer is gone: output.temporary_file)
STALE_TMP_SECONDS = 3600
#: characters of the key in a file name
_KEY_CHARS = 16


def cache_dir() -> Path:
    """``$PERFCAST_CACHE/benchdb``, else ``$XDG_CACHE_HOME/perfcast/benchdb``, else
    ``~/.cache/perfcast/benchdb`` (an empty variable counts as unset)."""
    return cache_root() / "benchdb"


def _code_digest() -> str:
    h = hashlib.sha256(VERSION.encode())
    here = Path(__file__).resolve().parent
    for name in _LOADER_FILES:
        try:
            h.update((here / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()


def _key(given: Sequence[str | Path]) -> tuple[str, str, int] | None:
    """(file stem, validity key, total bytes) of the sources ``given``; None when one cannot be
    stat'ed (the loader then reports it).  The stem names each source as given and resolved (the
    database's ``source`` text quotes them as given)."""
    try:
        paths = [Path(p).expanduser().resolve() for p in given]
    except (OSError, RuntimeError):
        return None
    stem = hashlib.sha256("\0".join(f"{g}\0{p}" for g, p in zip(given, paths)).encode()).hexdigest()[:24]
    parts, total = [_code_digest()], 0
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            return None
        parts.append(f"{p}\0{st.st_size}\0{st.st_mtime_ns}")
        total += st.st_size
    return f"benchdb-{stem}", hashlib.sha256("\n".join(parts).encode()).hexdigest(), total


def _read(path: Path, key: str) -> tuple["pd.DataFrame", str] | None:  # noqa: F821
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(_META, b"{}"))
    if meta.get("key") != key:
        return None
    return table.to_pandas(), str(meta.get("source", ""))


def _write(df: "pd.DataFrame",  # noqa: F821
           path: Path, key: str, source: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           _META: json.dumps({"key": key, "source": source}).encode()})
    from ..output import temporary_file

    fd, tmp = temporary_file(path)   # the one rule: a killed writer's temporary goes with the next write
    try:
        with os.fdopen(fd, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):   # the temporary file may never have been written
            os.unlink(tmp)
        raise


def _paths(d: Path, stem: str, key: str) -> tuple[Path, Path]:
    """The (results, systems) files of database ``stem`` at ``key``."""
    name = f"{stem}-{key[:_KEY_CHARS]}"
    return d / f"{name}.results.parquet", d / f"{name}.systems.parquet"


#: the packaged pair's directory and file names inside the perfcast-data package
PACKAGED_DIR = "benchdb"
_ROOT_MARK = "{perfcast_data}"


def content_key(root: Path, paths: Sequence[str | Path]) -> str | None:
    """The key of a database parsed from ``paths``, all files under ``root`` (else None): the loader's
    code digest and, per source, its name relative to ``root`` and the sha256 of its bytes."""
    h = hashlib.sha256(_code_digest().encode())
    try:
        for p in paths:
            rp = Path(p).expanduser().resolve()
            if not rp.is_relative_to(root):
                return None
            h.update(rp.relative_to(root).as_posix().encode() + b"\0" + hashlib.sha256(rp.read_bytes()).digest())
    except (OSError, RuntimeError):
        return None
    return h.hexdigest()


def _packaged(paths: Sequence[str | Path]) -> tuple[Path, Path, str, Path] | None:
    """(results, systems, key, package root) of the packaged pair that would hold ``paths``' database,
    or None when the sources are not all tables of the installed perfcast-data package."""
    from ..shared_data import package_data_dir

    root = package_data_dir()
    if root is None or not (root / PACKAGED_DIR).is_dir():
        return None
    key = content_key(root, paths)
    if key is None:
        return None
    d = root / PACKAGED_DIR
    return d / "results.parquet", d / "systems.parquet", key, root


def write_packaged(db: "BenchmarkDB", root: Path, key: str) -> list[Path]:  # noqa: F821
    """Write ``db`` (parsed from tables under ``root``) as the packaged pair in ``root/benchdb``, its
    source text relative to ``root``; returns the two files."""
    d = root / PACKAGED_DIR
    d.mkdir(parents=True, exist_ok=True)
    source = db.source.replace(str(root), _ROOT_MARK)
    out = [d / "results.parquet", d / "systems.parquet"]
    _write(db.results, out[0], key, source)
    _write(db.systems, out[1], key, source)
    return out


def _clean(d: Path, stem: str, keep: tuple[Path, Path]) -> None:
    """Remove the stale entries of database ``stem`` (module doc); best effort."""
    try:
        written = min(p.stat().st_mtime_ns for p in keep)
    except OSError:
        return
    now = time.time_ns()
    for p in d.glob(f"{stem}*"):
        if p in keep:
            continue
        with contextlib.suppress(OSError):
            st = p.stat()
            if p.name.endswith(".tmp"):
                stale = now - st.st_mtime_ns > STALE_TMP_SECONDS * 10 ** 9
            else:
                stale = p.name.endswith(".parquet") and st.st_mtime_ns < written
            if stale:
                p.unlink()


class _Columns(Mapping):
    """The columns of a pyarrow table as numpy arrays, each converted when first asked for and with
    the dtypes ``Table.to_pandas`` gives (a search needs a few of the columns; pyarrow's own
    ``to_numpy`` would import pandas): integers with a missing value become floats with NaN,
    text and anything else an object array with None for a missing value."""

    def __init__(self, table, names: list[str]):
        self._table, self._names, self._done = table, names, {}

    def __getitem__(self, name: str):
        if name not in self._done:
            if name not in self._names:
                raise KeyError(name)
            import numpy as np
            import pyarrow.types as pt

            col = self._table.column(name)
            values = col.to_pylist()
            if pt.is_floating(col.type) or (pt.is_integer(col.type) and col.null_count):
                arr = np.array([np.nan if v is None else v for v in values], dtype=float)
            elif (pt.is_integer(col.type) or pt.is_boolean(col.type)) and not col.null_count:
                arr = np.array(values, dtype=col.type.to_pandas_dtype())
            else:
                arr = np.empty(len(values), dtype=object)
                arr[:] = values
            self._done[name] = arr
        return self._done[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def read_systems(paths: Sequence[str | Path]) -> "SystemTable | None":  # noqa: F821
    """The cached systems table of ``paths`` read with pyarrow alone (no pandas), or None when there is
    no valid cache (then :func:`cached` parses and writes it)."""
    pk = _packaged(paths)
    if pk is not None:
        hit = _read_systems(pk[1], pk[2], pk[3])
        if hit is not None:
            return hit
    k = _key(list(paths))
    if k is None or k[2] < MIN_BYTES:
        return None
    stem, key, _ = k
    return _read_systems(_paths(cache_dir(), stem, key)[1], key)


def _read_systems(path: Path, key: str, root: Path | None = None) -> "SystemTable | None":  # noqa: F821
    from .lookup import SystemTable

    with contextlib.suppress(Exception):   # missing, truncated, foreign or unreadable: None
        import pyarrow.parquet as pq

        # ParquetFile, not read_table (which imports pyarrow.dataset and with it pandas)
        table = pq.ParquetFile(path).read()
        meta = json.loads((table.schema.metadata or {}).get(_META, b"{}"))
        if meta.get("key") != key:
            return None
        names = [n for n in table.column_names if not n.startswith("__index_level_")]
        if "system" in names and "name" in names:
            return SystemTable(_Columns(table, names), _source(meta, root))
    return None


def _source(meta: Mapping, root: Path | None) -> str:
    text = str(meta.get("source", ""))
    return text.replace(_ROOT_MARK, str(root)) if root is not None else text


def cached(paths: Sequence[str | Path], build: Callable[[], "BenchmarkDB"]) -> "BenchmarkDB":  # noqa: F821
    """The database of ``paths``: from the cache when it is valid, else ``build()`` (whose errors
    propagate) written to the cache when possible."""
    from .database import BenchmarkDB

    pk = _packaged(paths)
    if pk is not None:
        with contextlib.suppress(Exception):
            r, s = _read(pk[0], pk[2]), _read(pk[1], pk[2])
            if r is not None and s is not None and r[1] == s[1]:
                return BenchmarkDB(r[0], s[0], r[1].replace(_ROOT_MARK, str(pk[3])))
    k = _key(list(paths))
    if k is None or k[2] < MIN_BYTES:
        return build()
    stem, key, _ = k
    d = cache_dir()
    res_path, sys_path = _paths(d, stem, key)
    # missing, truncated, foreign or unreadable: parse instead
    with contextlib.suppress(Exception):
        r, s = _read(res_path, key), _read(sys_path, key)
        if r is not None and s is not None and r[1] == s[1]:
            return BenchmarkDB(r[0], s[0], r[1])
    db = build()
    # read-only or full cache directory: the parsed database is the answer
    with contextlib.suppress(Exception):
        d.mkdir(parents=True, exist_ok=True)
        _write(db.systems, sys_path, key, db.source)
        _write(db.results, res_path, key, db.source)
        _clean(d, stem, (res_path, sys_path))
    return db

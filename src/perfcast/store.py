"""On-disk experiment: a directory ``NAME.perfcast`` holding

* ``experiment.json`` -- format tag and version, parameters, metrics, meta, value columns;
* ``values.parquet``  -- the tidy value table;
* ``callpaths.parquet`` -- the calling-context tree (path, parent, name), in tree order.

Writes are atomic and serialised (:func:`atomic_dir`):

* Writers to one destination take an exclusive ``flock`` on ``.NAME.lock`` beside it and hold it
  across check-and-write, so of two concurrent writers without ``overwrite`` exactly one wins and
  the other is told the output exists. The lock file is removed when the write ends (a waiter that
  then holds a lock on an unlinked file notices and retries). Without ``fcntl`` (Windows) writes
  are not serialised. On NFS the lock is as good as the server's ``flock`` emulation.
* Everything goes into a temporary sibling ``.NAME.XXXXXXXX.tmp``; every file and directory in it
  is fsync'ed and given the modes the umask asks for (0o777/0o666 & ~umask) before it is moved in.
* A new destination is a plain ``rename``. An existing one is replaced by swapping the two
  directories in one step -- Linux ``renameat2(RENAME_EXCHANGE)`` -- and then deleting the old
  copy, so at every moment ``NAME`` is either the whole old or the whole new store.
* Fallback where the exchange is unsupported (not Linux, or the filesystem answers EINVAL/ENOSYS/
  EOPNOTSUPP): the old store is renamed aside to ``.NAME.XXXXXXXX.old/x``, the new one renamed in,
  then the aside copy deleted. The old store is kept until the new one is in place; a writer killed
  between the two renames leaves ``NAME`` missing and the aside copy, which the next write or read
  of ``NAME`` (:func:`recover`) renames back.
* Temporaries left by killed writers (``.NAME.XXXXXXXX.tmp`` / ``.old``) are deleted by the next
  write to ``NAME``, while it holds the lock -- so no live writer can own them.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
import sys
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

import pyarrow as pa

from .errors import PerfcastError
from .experiment import CallTree, Experiment, Frame, Metric
from .lazy import LazyModule

pd = LazyModule("pandas")   # imported where a store is read or written (perfcast.lazy)
pq = LazyModule("pyarrow.parquet")   # imported where a Parquet file is read or written (perfcast.lazy)

FORMAT = "perfcast-experiment"
VERSION = 1
SUFFIX = ".perfcast"

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_SYSCALL_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}
#: errno values meaning "this kernel/filesystem cannot exchange": use the two-rename fallback
UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)})


def is_store(path: str | Path) -> bool:
    p = Path(path)
    if not (p.is_dir() and (p / "experiment.json").is_file()):
        return False
    try:
        return json.loads((p / "experiment.json").read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


# --- renameat2 -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _renameat2(use_syscall: bool = False):
    """A callable ``f(olddirfd, old, newdirfd, new, flags) -> int`` for renameat2, or None.

    The libc symbol (glibc >= 2.28) unless ``use_syscall`` or it is missing; then the raw system
    call by number on x86_64 and aarch64."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import platform

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fn = None if use_syscall else getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
        return fn
    nr = _SYSCALL_RENAMEAT2.get(platform.machine().lower())
    syscall = getattr(libc, "syscall", None)
    if nr is None or syscall is None:
        return None
    syscall.restype = ctypes.c_long

    def call(olddirfd, old, newdirfd, new, flags):
        return syscall(ctypes.c_long(nr), ctypes.c_int(olddirfd), ctypes.c_char_p(old),
                       ctypes.c_int(newdirfd), ctypes.c_char_p(new), ctypes.c_uint(flags))

    return call


def exchange(a: str | Path, b: str | Path, *, use_syscall: bool = False) -> None:
    """Atomically swap the directory entries ``a`` and ``b`` (both must exist).

    Raises OSError; its errno is in :data:`UNSUPPORTED` where the platform or filesystem cannot."""
    fn = _renameat2(use_syscall)
    if fn is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available on this platform", str(a), None, str(b))
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a), None, str(b))


# --- helpers ---------------------------------------------------------------------------------

def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no os.getumask before Python 3.13; set and restore
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF):  # filesystems that cannot sync a directory
            raise
    finally:
        os.close(fd)


def _seal(tmp: Path) -> None:
    """Give everything under ``tmp`` the umask's modes and fsync it, deepest first."""
    mask = _umask()
    for root, _dirs, files in os.walk(tmp, topdown=False):
        for name in files:
            p = os.path.join(root, name)
            if os.path.islink(p):
                continue
            os.chmod(p, 0o666 & ~mask)
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.chmod(root, 0o777 & ~mask)
        _fsync_dir(Path(root))


def _remove(p: Path) -> None:
    if p.is_symlink() or (os.path.lexists(p) and not p.is_dir()):
        with contextlib.suppress(OSError):
            os.unlink(p)
    else:
        import shutil

        shutil.rmtree(p, ignore_errors=True)


def _mkdir_tmp(parent: Path, name: str, kind: str) -> Path:
    import secrets    # here, where a store is written (reading only asks whether a path is one)

    for _ in range(100):
        p = parent / f".{name}.{secrets.token_hex(4)}.{kind}"
        try:
            os.mkdir(p, 0o700)
            return p
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(parent / f".{name}.*.{kind}"))


def _temporaries(dest: Path) -> list[Path]:
    """Temporaries of writers to ``dest``: ``.NAME.XXXXXXXX.tmp`` and ``.old`` (8 characters of
    ``[a-z0-9_]``, which also matches older perfcast's tempfile names but never the temporaries of
    another destination such as ``NAME.x``)."""
    pat = re.compile(rf"\.{re.escape(dest.name)}\.[a-z0-9_]{{8}}\.(tmp|old)")
    try:
        names = os.listdir(dest.parent)
    except OSError:
        return []
    return [dest.parent / n for n in names if pat.fullmatch(n)]


def _asides(dest: Path) -> list[Path]:
    return [t / "x" for t in _temporaries(dest) if t.name.endswith(".old") and os.path.lexists(t / "x")]


@contextlib.contextmanager
def _locked(dest: Path):
    """Hold the exclusive lock of ``dest`` (``.NAME.lock`` beside it)."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = dest.parent / f".{dest.name}.lock"
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as e:
            raise PerfcastError(f"cannot write the output ({e.strerror or e})", dest) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the holder we waited for removed this lock file: lock the current one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still holding the lock: waiters on this file will retry
        os.close(fd)


def _recover_locked(dest: Path) -> bool:
    if os.path.lexists(dest):
        return False
    asides = _asides(dest)
    if not asides:
        return False
    newest = max(asides, key=lambda x: x.parent.stat().st_mtime)
    os.rename(newest, dest)
    _fsync_dir(dest.parent)
    return True


def recover(dest: str | Path) -> bool:
    """If ``dest`` is missing because a writer was killed between the fallback's two renames,
    put the old store (its aside copy) back. True when something was restored."""
    dest = Path(dest)
    if os.path.lexists(dest) or not _asides(dest):
        return False
    try:
        with _locked(dest):
            return _recover_locked(dest)
    except (PerfcastError, OSError):
        return False  # e.g. a read-only directory: the reader reports the missing store


def _replace(tmp: Path, dest: Path) -> None:
    """Put the complete directory ``tmp`` at the existing ``dest``; remove the old copy."""
    parent = dest.parent
    try:
        exchange(tmp, dest)
    except OSError as e:
        if e.errno not in UNSUPPORTED:
            raise
    else:
        _fsync_dir(parent)
        _remove(tmp)  # now holds the old store
        return
    old = _mkdir_tmp(parent, dest.name, "old")
    os.rename(dest, old / "x")
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old / "x", dest)
        _remove(old)
        raise
    _fsync_dir(parent)
    os.rename(old / "x", old / "done")  # no longer a recovery candidate
    _remove(old)


def replaceable(path: str | Path) -> bool:
    """An existing directory a store may replace: a perfcast experiment or an empty directory --
    never a directory of someone's files (``import runs/ -o runs --force`` deleted the profiles)."""
    p = Path(path)
    if is_store(p):
        return True
    try:
        return p.is_dir() and not any(os.scandir(p))
    except OSError:
        return False


def atomic_dir(dest: Path, fill, overwrite: bool = True, replace_only=None) -> Path:
    """Create or replace directory ``dest`` atomically: ``fill(tmpdir)`` writes into a temporary
    sibling that is moved into place when complete (see the module docstring for the guarantees).

    Without ``overwrite`` an existing ``dest`` -- judged while holding the lock -- is an error;
    ``replace_only(dest)`` false refuses to replace it even with ``overwrite``."""
    dest = Path(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    dest = parent / dest.name
    if not parent.is_dir():
        raise PerfcastError("output directory does not exist", parent)
    with _locked(dest):
        _recover_locked(dest)
        for t in _temporaries(dest):
            _remove(t)
        if os.path.lexists(dest):
            if not dest.is_dir():
                raise PerfcastError("output exists and is not a directory", dest)
            if replace_only is not None and not replace_only(dest):
                from .output import NOT_A_STORE

                raise PerfcastError(NOT_A_STORE, dest)
            if not overwrite:
                raise PerfcastError("output exists; use --force to replace it", dest)
        try:
            tmp = _mkdir_tmp(parent, dest.name, "tmp")
        except OSError as e:
            raise PerfcastError(f"cannot write the output ({e.strerror or e})", dest) from None
        try:
            fill(tmp)
            _seal(tmp)
            if os.path.lexists(dest):
                _replace(tmp, dest)
            else:
                os.rename(tmp, dest)
                _fsync_dir(parent)
        except BaseException:
            _remove(tmp)
            raise
    return dest


def write(exp: Experiment, dest: str | Path, overwrite: bool = True) -> Path:
    """Store ``exp`` at ``dest`` (a directory, conventionally ``NAME.perfcast``).

    ``overwrite=False`` refuses an existing ``dest`` (checked under the destination's lock)."""

    def fill(tmp: Path):
        header = {
            "format": FORMAT,
            "version": VERSION,
            "parameters": list(exp.parameters),
            "metrics": [m.to_dict() for m in exp.metrics.values()],
            "columns": list(exp.data.columns),
            "meta": exp.meta,
        }
        try:
            text = json.dumps(header, indent=1, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise PerfcastError(f"experiment metadata is not JSON-serialisable ({e})") from None
        pq.write_table(pa.Table.from_pandas(exp.data, preserve_index=False), tmp / "values.parquet")
        recs = exp.tree.to_records()
        cols = {"path": pa.array([r[0] for r in recs], pa.string()),
                "parent": pa.array([r[1] for r in recs], pa.string()),
                "name": pa.array([r[2] for r in recs], pa.string())}
        if exp.tree.has_kinds:   # what the frames are (CallTree.frame), when the reader recorded it
            kinds = [exp.tree.frame(r[0]) for r in recs]
            cols["kind"] = pa.array([k.kind if k else None for k in kinds], pa.string())
            cols["procedure"] = pa.array([k.procedure if k else None for k in kinds], pa.string())
            cols["where"] = pa.array([k.where if k else None for k in kinds], pa.string())
            if any(k is not None and k.site for k in kinds):   # call sites (stores before them lack the column)
                cols["site"] = pa.array([k.site if k else None for k in kinds], pa.string())
        tree = pa.table(cols)
        pq.write_table(tree, tmp / "callpaths.parquet")
        (tmp / "experiment.json").write_text(text)  # written last: marks a complete store

    return atomic_dir(Path(dest), fill, overwrite, replace_only=replaceable)


def _check_header(header: dict, head: Path) -> None:
    """The shape :func:`write` gives the header -- lists of names, metric objects whose fields are
    strings, a meta object -- or one error naming the file and the field (a hand-edited header
    ended in an internal TypeError, or a unit [1] shown as such)."""
    def names(key):
        v = header.get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise PerfcastError(f"corrupt header: {key!r} is not a list of names", head, key)

    names("parameters")
    names("columns")
    ms = header.get("metrics")
    if not isinstance(ms, list) or not all(isinstance(m, dict) for m in ms):
        raise PerfcastError("corrupt header: 'metrics' is not a list of metric objects", head, "metrics")
    for i, m in enumerate(ms):
        for k in ("name", "unit", "kind", "scope", "description", "aggregate"):
            if k in m and not isinstance(m[k], str) and not (k == "aggregate" and m[k] is None):
                raise PerfcastError(f"corrupt header: metric {i + 1}'s {k!r} is not a string", head, "metrics")
    if not isinstance(header.get("meta", {}), dict):
        raise PerfcastError("corrupt header: 'meta' is not an object", head, "meta")


def read(path: str | Path) -> Experiment:
    p = Path(path)
    recover(p)
    head = p / "experiment.json"
    if not head.is_file():
        raise PerfcastError("not a perfcast experiment (no experiment.json)", p)
    try:
        header = json.loads(head.read_text())
    except ValueError as e:
        raise PerfcastError(f"corrupt header: {e}", head) from None
    if not isinstance(header, dict):
        raise PerfcastError("corrupt header: not a JSON object", head)
    if header.get("format") != FORMAT:
        raise PerfcastError(f"not a perfcast experiment (format {header.get('format')!r})", head)
    version = header.get("version", 0)
    if not isinstance(version, int):
        raise PerfcastError(f"corrupt header: store version {version!r} is not a number", head, "version")
    if version > VERSION:
        raise PerfcastError(f"written by a newer perfcast (store version {header['version']})", head)
    _check_header(header, head)
    try:
        data = pq.read_table(p / "values.parquet").to_pandas()
        tree_t = pq.read_table(p / "callpaths.parquet").to_pydict()
    except (OSError, pa.ArrowException) as e:
        raise PerfcastError(f"cannot read stored tables: {e}", p) from None
    try:
        tree = CallTree()
        sites = tree_t.get("site") or [None] * len(tree_t["path"])
        kinds = zip(tree_t["kind"], tree_t["procedure"], tree_t["where"], sites) if "kind" in tree_t else None
        for path, parent, name in zip(tree_t["path"], tree_t["parent"], tree_t["name"]):
            k = next(kinds) if kinds is not None else (None, None, None, None)
            tree.add(path, parent, name, Frame(k[0], k[1], k[2] or "", k[3] or "") if k[0] is not None else None)
    except (KeyError, PerfcastError) as e:
        raise PerfcastError(f"corrupt callpath table ({e})", p / "callpaths.parquet") from None
    missing = [c for c in header.get("columns", []) if c not in data.columns]
    if missing:
        raise PerfcastError(f"the stored value table lacks column(s) {', '.join(map(str, missing))}",
                            p / "values.parquet")
    try:
        metrics = [Metric.from_dict(m) for m in header["metrics"]]
        return Experiment(header["parameters"], data[header["columns"]], metrics, tree, header.get("meta", {}))
    except (KeyError, PerfcastError) as e:
        err = e if isinstance(e, PerfcastError) else PerfcastError(f"missing field {e}")
        raise err.at(p) from None

"""Files perfcast writes on request (``report -o``, ``model -o``, ``machine --write``): the one rule.

* An existing output is replaced only with ``force`` (the CLI's ``--force``); without it the
  command stops with "output exists; use --force to replace it".
* Something that is not a regular file -- a FIFO, a device node such as /dev/null, a socket, a
  directory -- is never replaced, ``force`` or not: a report must not replace /dev/null (as root)
  or a named pipe someone reads from.
* The file is written to a temporary sibling and renamed over the output (``os.replace``), so a
  failed or interrupted write leaves the previous file (or nothing), never half a file.  Without
  ``force`` it is hard-linked into place, which fails if the output has appeared meanwhile: of two
  writers started together, one writes and the other is told the output exists.
* The temporary is ``.NAME.HOST.PID-START.XXXXXXXX.tmp``: the writer's host (:func:`host_tag`),
  process id and process start time (Linux ``/proc``; 0 where unknown).  A writer killed outright
  (SIGKILL, a power cut) cannot remove it, and a plain file has no lock to tell a dead writer's
  temporary from a live one's, so the next writer of ``NAME`` removes the temporaries of ``NAME``
  whose writer is gone (:func:`remove_dead_temporaries`): written on this host by a process that no
  longer exists, is a zombie, or is another process with the same id (its start time differs).
  Another host's temporaries, a live writer's, and unnamed ones (older perfcast's
  ``.NAME.XXXXXXXX.tmp``) are never touched.  Limit: writers on one host name in separate process
  namespaces (containers with the same host name sharing a directory) cannot see each other's
  processes; a live writer whose temporary was removed fails with a one-line error, writing nothing.
  Every other perfcast writer of a file by rename (the PMPI library build, the data wheel, the
  benchmark-table cache, a campaign's records, a streamed fit's working directory) takes its
  temporary from :func:`temporary_file` / :func:`temporary_dir`: the same names, the same cleanup.

Stores (``NAME.perfcast`` directories) are written by :mod:`perfcast.store`;
:func:`check_store_output` applies the same ``--force`` rule to them before anything is computed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import stat
from pathlib import Path

from .errors import PerfcastError

REFUSE_EXISTING = "output exists; use --force to replace it"
#: an existing directory that is not a perfcast experiment: --force would have deleted its files
NOT_A_STORE = ("output exists and is a directory that is not a perfcast experiment (nor empty); not replacing "
               "it (even with --force): its files would be deleted")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _existing(path: Path):
    """(lstat, stat-through-symlinks) of ``path``; None for what does not exist."""
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        raise PerfcastError(f"cannot use the output ({e.strerror or e})", path) from None
    try:
        return lst, os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return lst, None  # a dangling symlink: replaced like a file
    except OSError as e:
        raise PerfcastError(f"cannot use the output ({e.strerror or e})", path) from None


def _parent(path: Path) -> Path:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PerfcastError("output directory does not exist", parent)
    return parent


def refuse_stdout(path: str | Path) -> None:
    """``-o -`` means standard output to most tools; it wrote a file named '-' in the working directory."""
    if str(path) == "-":
        raise PerfcastError("'-' is not an output file here (for standard output use --json, or the printed "
                            "table); give a file name")


def check_file_output(path: str | Path, force: bool) -> Path:
    """Refuse ``path`` as the output file unless it is new, or an existing regular file and ``force``."""
    refuse_stdout(path)
    path = Path(path)
    lst, st = _existing(path)
    if lst is not None:
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise PerfcastError(f"output exists and is {_kind(st.st_mode)}, not a regular file; not replacing it "
                                f"(even with --force)", path)
        if not force:
            raise PerfcastError(REFUSE_EXISTING, path)
    _parent(path)
    return path


def check_store_output(path: str | Path, force: bool) -> Path:
    """The ``--force`` rule for a store directory: an existing output needs ``force``, and what is
    not a directory (a file, a FIFO, a device) is never replaced."""
    refuse_stdout(path)
    path = Path(path)
    lst, st = _existing(path)
    if lst is not None:
        if st is None or not stat.S_ISDIR(st.st_mode):
            what = _kind(st.st_mode) if st is not None else "a dangling symbolic link"
            what = "a regular file" if st is not None and stat.S_ISREG(st.st_mode) else what
            raise PerfcastError(f"output exists and is {what}, not an experiment directory; not replacing it "
                                f"(even with --force)", path)
        from .store import replaceable

        if not replaceable(path):
            raise PerfcastError(NOT_A_STORE, path)
        if not force:
            raise PerfcastError(REFUSE_EXISTING, path)
    else:
        refuse_file_suffix(path)
    _parent(path)
    return path


def refuse_file_suffix(path: Path) -> None:
    """A new store directory named like a file of another format (``x.txt``, ``x.json``, ``x.csv``):
    the user meant a file; a directory of that name would be written instead.  Refused, naming the
    path, before anything is computed.  Names without a suffix, with ``.perfcast``, or whose
    suffix is not a word (``run.2``, ``v1.5``) are taken."""
    suffix = path.suffix
    word = suffix[1:].replace("-", "").replace("_", "")
    if suffix and suffix.lower() != ".perfcast" and word.isalpha() and word.isascii():
        raise PerfcastError(f"an experiment is stored as a directory, named NAME.perfcast; '{suffix}' names a file "
                            f"of another format, so nothing was written: give -o {path.stem}.perfcast (perfcast "
                            f"export writes Extra-P input files)", path)


def write_file(path: str | Path, data: str | bytes, force: bool, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` atomically under the rule above; OS errors (disk full, read-only
    file system, permission) become one :class:`PerfcastError` naming ``path``."""
    raw = data.encode(encoding) if isinstance(data, str) else data
    with atomic_file(path, force) as f:
        f.write(raw)
    return Path(path)


@contextlib.contextmanager
def atomic_file(path: str | Path, force: bool):
    """A binary file object writing ``path`` atomically under the rule above: a temporary file
    beside it, put in place when the block ends without an error, else removed (nothing
    half-written); OS errors become one :class:`PerfcastError` naming ``path``."""
    path = check_file_output(path, force)
    try:
        fd, tmp = temporary_file(path)
    except OSError as e:
        raise PerfcastError(f"cannot write the output ({os_reason(e)})", path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        check_file_output(path, force)  # again: something may have appeared meanwhile
        if force or not _link_new(tmp, path):
            os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise PerfcastError(f"cannot write the output ({os_reason(e)})", path) from None
        raise


#: the longest file name most filesystems take (bytes)
_NAME_MAX = 255


def temporary_file(path: str | Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` for a writer that renames it over ``path`` when done:
    ``(fd, name)``, named ``.NAME.HOST.PID-START.XXXXXXXX.tmp`` (mode 0600), after removing the
    temporaries of ``path`` that killed writers left (:func:`remove_dead_temporaries`).  The one
    rule of every perfcast writer's temporaries (module doc): outputs, the PMPI library build, the
    data wheel, the benchmark-table cache, a campaign's files.  OS errors are raised as they are."""
    import tempfile   # writing a file only: not imported by every command

    path = Path(path)
    remove_dead_temporaries(path)
    return tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=_parent(path))


def temporary_dir(path: str | Path) -> str:
    """A new temporary directory beside ``path`` (its name as :func:`temporary_file`'s) for a writer
    of ``path`` that keeps intermediate files there and removes it when done; one a killed writer
    left is removed with its contents by the next writer of ``path``."""
    import tempfile

    path = Path(path)
    remove_dead_temporaries(path)
    return tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=_parent(path))


@functools.lru_cache(maxsize=1)
def host_tag() -> str:
    """This host in a temporary's name: its first label (letters, digits and ``-`` only, at most 24
    characters) and 6 hex digits of a hash of the whole name, e.g. ``node17-3fa2b1`` (the label for
    people, the hash so that truncated or cleaned-up names of different hosts differ)."""
    import socket

    name = socket.gethostname() or "localhost"
    label = re.sub(r"[^A-Za-z0-9-]", "-", name.split(".")[0])[:24]
    return f"{label}-{hashlib.sha1(name.encode('utf-8', 'surrogateescape')).hexdigest()[:6]}"


def _start_time(pid: int | str) -> tuple[int, str] | None:
    """(start time in clock ticks since boot, state letter) of process ``pid`` from Linux
    ``/proc/PID/stat``; None where it cannot be read (no such process, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()   # after "(comm)", which may hold spaces and parentheses
    try:
        return int(fields[19]), fields[0]          # field 22 of stat(5); field 3 is the state
    except (IndexError, ValueError):
        return None


def _temp_prefix(path: Path) -> str:
    """``.NAME.HOST.PID-START.`` (module doc), or ``.NAME.`` where that name would be too long."""
    own = _start_time("self")
    prefix = f".{path.name}.{host_tag()}.{os.getpid()}-{own[0] if own else 0}."
    if len(os.fsencode(prefix)) + 8 + len(".tmp") > _NAME_MAX:
        return f".{path.name}."        # writable still, but not identifiable: never removed by others
    return prefix


def _writer_alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` of this host that started at ``start`` (0: unknown) may still be
    writing: True unless it is shown gone (no such process, a zombie, another process now)."""
    if pid <= 0:
        return True                    # not a process id os.kill may be asked about (0 = our group)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                    # EPERM: it exists, as another user's process
    now = _start_time(pid)
    if now is None:
        return True
    return now[1] != "Z" and (not start or now[0] == start)


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` (``.NAME.HOST.PID-START.XXXXXXXX.tmp``, module doc) that a
    writer on this host left when it was killed, and return them; anything else stays."""
    pat = re.compile(rf"\.{re.escape(path.name)}\.([A-Za-z0-9-]*-[0-9a-f]{{6}})\.(\d+)-(\d+)\.[a-z0-9_]{{8}}\.tmp")
    host = host_tag()
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    removed = []
    for n in names:
        m = pat.fullmatch(n)
        if m is None or m.group(1) != host or _writer_alive(int(m.group(2)), int(m.group(3))):
            continue
        left = path.parent / n
        try:
            mode = os.lstat(left).st_mode
            if stat.S_ISDIR(mode):     # a killed writer's working directory (temporary_dir)
                import shutil

                shutil.rmtree(left)
            elif stat.S_ISREG(mode):
                os.unlink(left)
            else:
                continue
        except OSError:
            continue                   # gone already (another writer removed it), or not ours to remove
        removed.append(left)
    return removed


def _link_new(tmp: str, path: Path) -> bool:
    """Without ``--force``, put ``tmp`` at ``path`` only if nothing is there, in one step: a hard
    link fails when ``path`` exists, so of two writers started together the second is refused
    (a check before ``os.replace`` let both pass and the later silently replace the earlier's file).
    True when done (``tmp`` removed); False where the filesystem has no hard links (then the
    check-and-replace above is all there is)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise PerfcastError(REFUSE_EXISTING, path) from None
    except OSError as e:
        if e.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS,
                       getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
            return False
        raise
    os.unlink(tmp)
    return True


def os_reason(e: OSError) -> str:
    """'No space left on device (ENOSPC)': the reason of an OS error, with its errno name."""
    reason = e.strerror or str(e) or type(e).__name__
    name = errno.errorcode.get(e.errno) if isinstance(e.errno, int) else None
    return f"{reason} ({name})" if name else reason


def os_error_message(e: OSError) -> str:
    """One line for an OS error that reached the command line: the path(s) and the reason."""
    paths = [p for p in (e.filename, e.filename2) if p is not None]
    where = " -> ".join(os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in paths)
    return f"{where}: {os_reason(e)}" if where else os_reason(e)


#: table outputs (``model -o``, ``predict -o``) by file suffix
TABLE_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json"}


def table_format(path: str | Path) -> str:
    """``parquet``, ``csv`` or ``json`` from the suffix of ``path``; anything else is an error."""
    fmt = TABLE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise PerfcastError(f"unknown output format {Path(path).suffix or '(no suffix)'!r}: use "
                            + ", ".join(TABLE_FORMATS), path, where="--output")
    return fmt


#: version of the ``--json`` layout (:func:`envelope`); raised when a field changes meaning or goes
SCHEMA_VERSION = 1
#: the JSON Schema of every command's ``--json`` output, shipped with the package
SCHEMA_FILE = Path(__file__).parent / "schema" / "output.schema.json"


def envelope(kind: str, items, **extra) -> dict:
    """Every command's ``--json`` output: ``{"perfcast": VERSION, "schema": SCHEMA_VERSION, "kind":
    kind, ...extra, "items": [...]}`` -- ``items`` the list of what the command produced (models,
    predictions, rows; one object for a command that produces one thing), ``extra`` the command's
    summary fields.  The same names mean the same things in every kind: a prediction is ``value``
    with ``lower``, ``upper`` (its interval), ``level``, ``unit`` and ``at`` (``SCHEMA_FILE``)."""
    from . import __version__

    if not isinstance(items, list):
        items = [items]
    return {"perfcast": __version__, "schema": SCHEMA_VERSION, "kind": kind, **extra, "items": items}


def enveloped_chunks(kind: str, list_chunks, **extra):
    """:func:`envelope` around a JSON list written a piece at a time (``list_chunks``: the pieces of
    ``[...]`` followed by a newline, e.g. :meth:`perfcast.modelset.ModelSet.json_chunks`): the
    same text as ``json_text(envelope(kind, the_list, **extra))`` up to the list's own layout."""
    head = json_text(envelope(kind, [], **extra))
    # '..., "items": []}\n' -> '..., "items": ' + the list + '}\n'
    yield from _after(head[:-len("[]}\n")], list_chunks, "}\n")


def _after(head: str, chunks, tail: str):
    """``head``, ``chunks`` without the newline that ends the last one, ``tail`` -- ``head`` only
    once the first chunk exists, so that what fails before its first piece (the contract of the
    chunk writers) still fails before anything is written."""
    it = iter(chunks)
    prev = next(it, None)
    if prev is None:
        return
    yield head
    for c in it:
        yield prev
        prev = c
    yield prev.rstrip("\n") + tail


def list_of_chunks(chunks):
    """The pieces of a JSON value (ending in a newline, as :func:`json_chunks` writes them) as the
    pieces of a one-element list ``[value]`` followed by a newline."""
    yield from _after("[", chunks, "]\n")


def json_text(obj) -> str:
    """``obj`` as JSON text.  A list (or a dict holding lists) is written one element per line, each
    by the C encoder: pretty-printing (``indent``) falls back to the pure-Python encoder, which took
    longer than fitting the models on 10,000 series (issue 17).  NaN and infinities are refused."""
    import functools
    import json

    enc = functools.partial(json.dumps, allow_nan=False, default=_json_default)
    if isinstance(obj, list):
        return ("[" + ",\n ".join(enc(e) for e in obj) + "]\n") if obj else "[]\n"
    if isinstance(obj, dict) and obj:
        return "{" + ",\n ".join(enc(k) + ": " + (("[" + ",\n  ".join(enc(e) for e in v) + "]")
                                                   if isinstance(v, list) and v else enc(v))
                                  for k, v in obj.items()) + "}\n"
    return enc(obj) + "\n"


def json_chunks(obj, block: int = 4096):
    """:func:`json_text` of a dict a piece at a time; a value that is an iterator is written as a
    list, ``block`` elements a piece, never held whole.  Every other value is encoded before the
    first piece, so only an iterator's elements can fail once writing began."""
    import functools
    import json
    from collections.abc import Iterator

    if not isinstance(obj, dict) or not obj or not any(isinstance(v, Iterator) for v in obj.values()):
        yield json_text(obj)
        return
    enc = functools.partial(json.dumps, allow_nan=False, default=_json_default)
    parts = [(enc(k) + ": ", v if isinstance(v, Iterator) else
              ("[" + ",\n  ".join(enc(e) for e in v) + "]") if isinstance(v, list) and v else enc(v))
             for k, v in obj.items()]
    yield "{"
    for i, (head, v) in enumerate(parts):
        yield (",\n " if i else "") + head
        if isinstance(v, str):
            yield v
            continue
        buf: list[str] = []
        empty = True
        for e in v:
            buf.append("[" + enc(e) if empty else ",\n  " + enc(e))
            empty = False
            if len(buf) >= block:
                yield "".join(buf)
                buf.clear()
        yield "[]" if empty else "".join(buf) + "]"
    yield "}\n"


def _json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_table(path: str | Path, frame, records, force: bool, table=None) -> Path:
    """Write a command's table to ``path`` in the format its suffix names (:func:`table_format`),
    atomically (:func:`write_file`): ``frame`` (a pandas DataFrame; list and dict cells become
    nested Parquet columns, JSON text in CSV) for ``.parquet`` and ``.csv``, ``records`` (what
    ``--json`` prints, or its text) for ``.json``.  Either may be a zero-argument callable, built only when its
    format is asked for.  ``table`` (optional, a callable): the same table as a pyarrow Table, built
    column by column, written instead of converting ``frame`` for ``.parquet``."""
    fmt = table_format(path)
    check_file_output(path, force)
    if fmt == "json":
        records = records() if callable(records) else records
        return write_file(path, records if isinstance(records, str) else json_text(records), force)
    if fmt == "parquet" and table is not None:
        return _write_parquet(path, table(), force)
    frame = frame() if callable(frame) else frame
    if fmt == "csv":
        import json

        nested = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, (list, dict))).any()]
        out = frame.copy() if nested else frame
        for c in nested:
            out[c] = out[c].map(lambda v: json.dumps(v, default=_json_default) if isinstance(v, (list, dict)) else v)
        return write_file(path, out.to_csv(index=False), force)
    import pyarrow as pa

    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise PerfcastError(f"cannot write the table as Parquet ({e})", path) from None
    return _write_parquet(path, table, force)


def _write_parquet(path, table, force: bool) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    return write_file(path, buf.getvalue().to_pybytes(), force)



#: a text of fewer parts than this is built in one process (a fork and a hand-over cost more than
#: half of it: :func:`forked_texts`)
FORK_MIN_PARTS = 8192


def forked_texts(make, parts: int, workers: int = 1, direct: bool = False, step: int | None = None):
    """The pieces of ``make(0, parts)`` -- a text of ``parts`` parts that ``make(lo, hi)`` yields
    in pieces of ``step`` parts from ``lo`` (one piece when ``step`` is None), the same text
    however the range is cut -- built by up to ``workers`` processes: this one yields the first
    share as it is made while forked ones build the others whole, handed over in order.  A share
    not built by the time this process gets to it is built here a piece at a time until it is
    (a forked process that finds no free core costs a fork, not a wait), the forked process
    handing over the rest.  The same text as ``make(0, parts)``: where the platform does not
    fork, with one worker or fewer than :data:`FORK_MIN_PARTS` parts, or if a forked process
    fails before its share is whole, this process builds the share itself.  ``make`` must not
    fail after its first piece (the chunk writers check first).

    ``direct``: a forked share is yielded as a :class:`ForkedText` (not a string) that the
    consumer writes with :meth:`ForkedText.write` -- the forked process writes its text straight
    to the consumer's file, no copy through this one (:func:`perfcast.report.terminal.write_json_chunks`)."""
    workers = max(1, min(int(workers), parts // (FORK_MIN_PARTS // 2) if parts >= FORK_MIN_PARTS else 1))
    if workers == 1 or not hasattr(os, "fork"):
        yield from make(0, parts)
        return
    edges = [parts * i // workers for i in range(workers + 1)]
    kids: list = []
    try:
        for lo, hi in zip(edges[1:-1], edges[2:]):
            kids.append(ForkedText(make, lo, hi, step, [fd for k in kids for fd in (k.fd, k.go)]))
        yield from make(0, edges[1])
        while kids:
            kid = kids.pop(0)
            # while the forked process is not done: its share's next piece built here
            while kid.done < kid.hi and not kid.ready():
                yield from make(kid.done, min(kid.hi, kid.done + kid.step))
                kid.done = min(kid.hi, kid.done + kid.step)
            if kid.done == kid.hi:
                kid.close()
            else:
                yield kid if direct else kid.text()
    finally:
        for kid in kids:        # abandoned (the consumer stopped): not left running
            kid.close()


class ForkedText:
    """A share ``make(lo, hi)`` of a text (:func:`forked_texts`) that a forked process builds whole,
    then hands over from part :attr:`done` on (its pieces before that built by this process):
    :meth:`text` through a pipe, or :meth:`write` straight to a file; built here instead if the
    process failed before its text was whole."""

    def __init__(self, make, lo: int, hi: int, step: int | None = None, inherited=()):
        import sys

        self.make, self.lo, self.hi, self.done, self.status, self.whole = make, lo, hi, lo, None, None
        self.ordered = False
        self.step = hi - lo if step is None else step     # the parts of each of make's pieces
        for f in (sys.stdout, sys.stderr):    # nothing of this process' buffers written twice
            with contextlib.suppress(Exception):
                f.flush()
        r, w = os.pipe()         # child -> here: "R" once its text is whole; then the text if asked
        r2, w2 = os.pipe()       # here -> child: what to do with it
        pid = os.fork()
        if pid:
            os.close(w)
            os.close(r2)
            self.pid, self.fd, self.go = pid, r, w2
            return
        code = 1
        try:
            for fd in (r, w2, *inherited):   # the other processes' pipes: theirs alone to end
                os.close(fd)
            data = [piece.encode("utf-8") for piece in make(lo, hi)]    # a piece per step parts
            _write_all(w, b"R")
            order = os.read(r2, 13)
            if order[:1] in (b"W", b"P"):
                done = int.from_bytes(order[5:13], "little")
                text = b"".join(data[done // self.step:])    # the pieces the parent did not build
                if order[:1] == b"W":            # to this file descriptor (inherited at the fork)
                    try:
                        _write_all(int.from_bytes(order[1:5], "little"), text)
                    except OSError as e:         # a closed pipe, a full disk: said to the parent
                        _write_all(w, (e.errno or 0).to_bytes(4, "little"))
                        raise
                else:
                    _write_all(w, len(text).to_bytes(8, "little") + text)
                code = 0
        finally:
            os._exit(code)   # never the parent's exit handlers, buffers or the rest of its command

    def ready(self) -> bool:
        """Whether the forked process' text is whole (without waiting); False for good once it failed."""
        import select

        if self.whole is None and self.pid is not None and select.select([self.fd], [], [], 0)[0]:
            self.whole = os.read(self.fd, 1) == b"R"
        return bool(self.whole)

    def _ready(self) -> bool:
        """Whether the forked process built its text whole (waiting for it; else it has ended)."""
        if self.whole is None:
            self.whole = os.read(self.fd, 1) == b"R"
        return self.whole

    def _order(self, what: bytes, fd: int = 0) -> None:
        self.ordered = True
        _write_all(self.go, what + fd.to_bytes(4, "little") + (self.done - self.lo).to_bytes(8, "little"))

    def _rest(self) -> str:
        return "".join(self.make(self.done, self.hi))

    def text(self) -> str:
        """The share's text from part :attr:`done` on."""
        data = None
        try:
            if self._ready():
                self._order(b"P")
                with os.fdopen(os.dup(self.fd), "rb") as f:
                    head = f.read(8)
                    n = int.from_bytes(head, "little")
                    data = f.read(n) if len(head) == 8 else b""
                    data = data if len(data) == n else None
        finally:
            ok = self.close() == 0
        return data.decode("utf-8") if ok and data is not None else self._rest()

    def write(self, stream) -> None:
        """Write the share from part :attr:`done` on to ``stream`` (a text stream) after what was
        written to it: the forked process writes it to the stream's file itself (the stream
        flushed first) when the stream has one; else :meth:`text`."""
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is None:
            stream.write(self.text())
            return
        failed = b""
        try:
            ready = self._ready()
            if ready:
                stream.flush()
                self._order(b"W", fd)
                failed = os.read(self.fd, 4)     # nothing once it wrote all (its end closed)
        finally:
            status = self.close()
        if not ready:
            stream.write(self._rest())
        elif len(failed) == 4 and int.from_bytes(failed, "little"):
            # as this process' own write would have failed (BrokenPipeError for a closed pipe)
            code = int.from_bytes(failed, "little")
            raise OSError(code, os.strerror(code))
        elif status != 0:
            raise PerfcastError("a forked process failed writing its share of the output: the output is incomplete")

    def close(self) -> int | None:
        """End the hand-over: a process given no order killed, the pipes closed, the process
        waited for; its exit status."""
        if self.pid is None:
            return self.status
        if not self.ordered:     # its text not wanted (built here, or the consumer stopped)
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)
        for fd in (self.fd, self.go):
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            _, self.status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            self.status = None
        self.pid = None
        return self.status

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

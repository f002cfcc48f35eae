"""Chunks of a group fitted on an existing Dask cluster (``FitOptions.dask``, ``--dask ADDRESS``).

The same unit of work as ``FitOptions.workers``: :func:`perfcast.fit.core._fit_chunk` over the
series ``lo:hi`` of a group, with the group's state sent to the workers once (scattered, broadcast)
and the chunks' results collected in chunk order, so the output is byte-identical to one process.

``dask[distributed]`` is an optional extra, imported only here and only when a cluster is used.
Before the first group a connection checks that every worker runs the same fitting code and the
same numpy/scipy as this process, with a one-thread BLAS (else results could differ silently in
the last digits).  The CLI holds one connection for all the groups of a command
(:func:`session`); a library caller fitting many groups can do the same, else each group connects
anew.  Workers joining the cluster after the connection was checked are not checked.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sys
from pathlib import Path

from ..errors import PerfcastError

#: seconds to wait for the scheduler before giving up (tests shorten it)
CONNECT_TIMEOUT = 10.0
#: what the errors name
WHERE = "--dask"
INSTALL = "--dask needs the optional extra: pip install 'perfcast[dask]'"

#: open clients by address (:func:`session`): one connection for all the groups of a command
_OPEN: dict[str, object] = {}


def _distributed():
    try:
        import distributed
    except ImportError:
        raise PerfcastError(INSTALL, where=WHERE) from None
    return distributed


def fingerprint() -> str:
    """What makes two processes fit alike: the fitting code, Python, numpy and scipy versions."""
    import numpy
    import scipy

    h = hashlib.sha256(f"{sys.version_info[:2]} numpy {numpy.__version__} scipy {scipy.__version__}".encode())
    root = Path(__file__).resolve().parent
    for f in sorted(root.glob("*.py")) + [root.parent / "errors.py"]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def blas_threads() -> str:
    """The BLAS thread count this process was started with ("" = not set: one per core).  Dask
    workers started by a nanny (the default) have 1; the CLI sets 1 for itself."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var):
            return os.environ[var].strip()
    return ""


def _connect(address: str):
    distributed = _distributed()
    problem = None
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as e:
        text = " ".join(str(e).split())
        detail = "" if isinstance(e, TimeoutError) or "timed out" in text.lower() else f" ({text or type(e).__name__})"
        problem = f"cannot reach a Dask scheduler at {address!r} within {CONNECT_TIMEOUT:g} s{detail}"
    except (ValueError, TypeError) as e:
        problem = (f"{address!r} is not a Dask scheduler address, e.g. tcp://HOST:8786 "
                   f"({' '.join(str(e).split())})")
    if problem is not None:
        # the half-made client closes now, while its event loop runs (not noisily at exit)
        gc.collect()
        raise PerfcastError(problem, where=WHERE)
    try:
        mine = fingerprint()
        theirs = client.run(fingerprint)
        if not theirs:
            raise PerfcastError(f"the Dask cluster at {address!r} has no workers", where=WHERE)
        other = sorted(w for w, fp in theirs.items() if fp != mine)
        if other:
            raise PerfcastError(f"Dask worker(s) {', '.join(other)} at {address!r} run other fitting code or "
                                f"numpy/scipy versions than this process (results would differ)", where=WHERE)
        threaded = sorted(w for w, n in client.run(blas_threads).items() if n != "1")
        if threaded:
            # a threaded BLAS rounds some sums differently: results could differ in the last digits
            raise PerfcastError(f"Dask worker(s) {', '.join(threaded)} at {address!r} run numpy's BLAS with "
                                f"several threads (results could differ from one process): start them with "
                                f"OMP_NUM_THREADS=1 or with a nanny (the default)", where=WHERE)
    except BaseException:
        client.close()
        raise
    return client


@contextlib.contextmanager
def session(address: str | None):
    """One client to ``address`` for everything fitted inside (nested sessions share it); closed at
    the end.  ``None``: nothing."""
    if address is None or address in _OPEN:
        yield
        return
    client = _connect(address)
    _OPEN[address] = client
    try:
        yield
    finally:
        del _OPEN[address]
        with contextlib.suppress(Exception):
            client.close()


def map_chunks(address: str, func, state, bounds):
    """``(lo, hi, func(state, lo, hi))`` for every ``(lo, hi)`` of ``bounds``, in order, computed
    on the Dask cluster at ``address`` (``state`` sent to the workers once)."""
    distributed = _distributed()
    with session(address):
        client = _OPEN[address]
        futures = []
        try:
            try:
                # a list of one: scatter sends the tuple as one piece of data, to every worker
                [remote] = client.scatter([state], broadcast=True, hash=False)
            except (OSError, TimeoutError) as e:
                raise PerfcastError(f"sending the series to the Dask cluster at {address!r} failed "
                                    f"({' '.join(str(e).split()) or type(e).__name__})", where=WHERE) from None
            futures = [client.submit(func, remote, lo, hi, pure=False) for lo, hi in bounds]
            for i, (lo, hi) in enumerate(bounds):
                fut, futures[i] = futures[i], None   # its result leaves the cluster once read
                try:
                    res = fut.result()
                except distributed.KilledWorker:
                    raise PerfcastError(f"a Dask worker at {address!r} died fitting series {lo}:{hi} "
                                        f"(out of memory? see the worker's log)", where=WHERE) from None
                except (OSError, TimeoutError, distributed.client.FutureCancelledError) as e:
                    raise PerfcastError(f"lost the Dask cluster at {address!r} fitting series {lo}:{hi} "
                                        f"({' '.join(str(e).split()) or type(e).__name__})",
                                        where=WHERE) from None
                del fut
                yield lo, hi, res
        finally:
            # stopped early (an error, the caller stopped reading): the rest is not computed
            pending = [f for f in futures if f is not None and not f.done()]
            if pending:
                with contextlib.suppress(Exception):
                    client.cancel(pending)

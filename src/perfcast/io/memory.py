"""Returning a reader's freed memory to the system.

A streaming reader allocates and frees a chunk's temporaries (a few MB each) over and over while
its columns grow.  Freed memory is not returned at once: pyarrow's pool keeps it for reuse, and so
does glibc's malloc, whose heap keeps freed blocks below the ones still in use (numpy's temporaries
come from that heap once glibc has raised its mmap threshold for them).  On a 200 MB Extra-P text
file the two held 60-120 MB at the end of the read, when the final columns are built -- the
moment of the peak.  :func:`release` hands both back; the readers call it where the chunks end
and after their large temporaries (a hash table of the names), not per chunk (a trim per 4 MiB
chunk costs CPU for pages that the next chunk faults in again).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import pyarrow as pa


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim`` (None on a C library without it: musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release() -> None:
    """Return the memory pyarrow's pool and the C heap hold free to the system."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

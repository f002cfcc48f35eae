"""The PMPI interposition library: build it, and the environment that profiles every rank of a run.

The C source ships in the package (``pmpi/perfcast_pmpi.c``); :func:`build_shim` compiles it with
``mpicc`` on first use and caches the shared library under
``pmpi/<key>/libperfcast_pmpi.so`` under perfcast's cache (``$PERFCAST_CACHE``, else
``$XDG_CACHE_HOME/perfcast``, else ``~/.cache/perfcast``),
where ``<key>`` hashes the source and the compiler wrapper's configuration (``mpicc --showme`` /
``-show`` and ``--version``), so a changed MPI installation gets its own build.

Launching (Open MPI 4, checked here): ranks started by ``mpirun`` on the local node inherit
mpirun's environment, so the variables of :func:`shim_env` in the environment of ``mpirun`` are
enough on one node (LD_PRELOAD on mpirun itself is harmless: the library does nothing until a
process calls MPI_Init).  Ranks on other nodes are started through ``orted`` over ssh/Slurm and
receive only variables named with ``-x``; :func:`mpirun_args` returns ``-x LD_PRELOAD -x
PERFCAST_PMPI_DIR`` (forward by name, value taken from mpirun's environment), so the safe recipe for
any node count is::

    env = {**os.environ, **shim_env(outdir)}
    subprocess.run(["mpirun", *mpirun_args(outdir), "-np", "4", "./app"], env=env)

MPICH/Hydra forwards the whole environment by default; ``srun`` does too (``--export=ALL``).

Each rank writes ``outdir/pmpi.rank<NNNNN>.json`` at MPI_Finalize; read them with
:func:`read` or ``perfcast.io.read_one(outdir, format="pmpi")``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..cache import cache_root
from ..errors import PerfcastError

__all__ = ["SOURCE", "LIBRARY_NAME", "build_shim", "shim_env", "mpirun_args", "available", "read",
           "cache_dir"]

SOURCE = Path(__file__).with_name("pmpi") / "perfcast_pmpi.c"
LIBRARY_NAME = "libperfcast_pmpi.so"
CFLAGS = ("-O2", "-g", "-fPIC", "-shared", "-Wall")
_TIMEOUT = 300


def _mpicc() -> str:
    name = os.environ.get("MPICC", "mpicc")
    path = shutil.which(name)
    if path is None:
        raise PerfcastError(f"{name} not found on PATH; install an MPI development package "
                            f"(e.g. Debian: openmpi-bin libopenmpi-dev) to build the PMPI library")
    return path


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PerfcastError(f"cannot run {cmd[0]}: {e}") from None


def _wrapper_config(mpicc: str) -> str:
    """The compiler wrapper's configuration: what it adds to the command line, and its version."""
    parts = []
    for flag in ("--showme", "-show"):  # Open MPI, MPICH
        r = _run([mpicc, flag])
        if r.returncode == 0:
            parts.append(r.stdout.strip())
            break
    r = _run([mpicc, "--version"])
    parts.append(r.stdout.strip())
    return "\n".join(parts)


def cache_dir() -> Path:
    """``pmpi/`` under perfcast's cache (:func:`perfcast.cache.cache_root`)."""
    return cache_root() / "pmpi"


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # gcc/clang: "file:line:col: error: ...", "fatal error:"; linkers: "error: ..."
        if re.search(r"(^|\s|:)(fatal )?error:", ln, re.IGNORECASE):
            return ln
    return lines[0] if lines else "(no compiler output)"


@functools.lru_cache(maxsize=None)
def _key(mpicc: str, source_bytes: bytes) -> str:
    h = hashlib.sha256()
    h.update(source_bytes)
    h.update(b"\0")
    h.update(" ".join(CFLAGS).encode())
    h.update(b"\0")
    h.update(_wrapper_config(mpicc).encode())
    return h.hexdigest()[:16]


def build_shim(force: bool = False) -> Path:
    """Compile the PMPI library with mpicc (once; cached) and return the path of the .so.

    Raises :class:`PerfcastError` when mpicc is missing or the compilation fails (with the
    compiler's first error line).  The library is written to a temporary name and renamed into
    place, so concurrent builds and interrupted builds never leave a broken library behind.
    """
    mpicc = _mpicc()
    try:
        src = SOURCE.read_bytes()
    except OSError as e:
        raise PerfcastError(f"PMPI library source missing ({e.strerror})", SOURCE) from None
    dest_dir = cache_dir() / _key(mpicc, src)
    lib = dest_dir / LIBRARY_NAME
    if lib.is_file() and not force:
        return lib
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PerfcastError(f"cannot create the cache directory ({e.strerror})", dest_dir) from None
    from ..output import temporary_file

    try:   # named and cleaned by the one rule (a build killed outright leaves it to the next build)
        fd, tmp = temporary_file(lib)
    except OSError as e:
        raise PerfcastError(f"cannot write into the cache directory ({e.strerror})", dest_dir) from None
    os.close(fd)
    try:
        r = _run([mpicc, *CFLAGS, "-o", tmp, str(SOURCE)], cwd=dest_dir)
        if r.returncode != 0:
            raise PerfcastError(f"building the PMPI library failed: {_first_error(r.stderr or r.stdout)}",
                                SOURCE)
        os.chmod(tmp, 0o755)
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def shim_env(outdir: Path) -> dict[str, str]:
    """Environment variables to add to a run so every rank is profiled into ``outdir``.

    ``LD_PRELOAD`` puts the library first (keeping a preload already in this process's
    environment); ``PERFCAST_PMPI_DIR`` is the absolute output directory (created here).  Under
    ``mpirun`` on several nodes also pass :func:`mpirun_args` (see the module docstring).
    """
    lib = str(build_shim())
    outdir = Path(outdir).resolve()
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PerfcastError(f"cannot create the PMPI output directory ({e.strerror})", outdir) from None
    existing = [p for p in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p and p != lib]
    return {"LD_PRELOAD": ":".join([lib, *existing]), "PERFCAST_PMPI_DIR": str(outdir)}


@functools.lru_cache(maxsize=None)
def _launcher_flavour(mpirun: str) -> str:
    path = shutil.which(mpirun)
    if path is None:
        return "unknown"
    r = _run([path, "--version"])
    text = (r.stdout + r.stderr).lower()
    if "open mpi" in text or "open-mpi" in text or "open-rte" in text:
        return "openmpi"
    if "hydra" in text or "mpich" in text or "intel(r) mpi" in text:
        return "hydra"
    return "unknown"


def mpirun_args(outdir: Path, mpirun: str = "mpirun") -> list[str]:
    """Extra ``mpirun`` flags that forward the variables of :func:`shim_env` to every rank.

    Open MPI: ``-x LD_PRELOAD -x PERFCAST_PMPI_DIR`` (values from mpirun's environment, so use
    together with :func:`shim_env`).  MPICH/Hydra: ``-genvlist LD_PRELOAD,PERFCAST_PMPI_DIR``.
    Unknown launchers: no flags (they usually forward the environment).  ``outdir`` is accepted
    for symmetry with :func:`shim_env`; the value travels in the environment.
    """
    flavour = _launcher_flavour(mpirun)
    if flavour == "openmpi":
        return ["-x", "LD_PRELOAD", "-x", "PERFCAST_PMPI_DIR"]
    if flavour == "hydra":
        return ["-genvlist", "LD_PRELOAD,PERFCAST_PMPI_DIR"]
    return []


def available() -> tuple[bool, str]:
    """Whether the PMPI collector can be used here, and why (the library path, or the problem)."""
    try:
        lib = build_shim()
    except PerfcastError as e:
        return False, e.message
    return True, f"PMPI library at {lib}"


def read(outdir: Path):
    """The Experiment of one profiled run (the directory of per-rank files)."""
    from ..io.pmpi import read_dir

    return read_dir(Path(outdir))

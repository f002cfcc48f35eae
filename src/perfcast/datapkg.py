"""The benchmark tables as their own pip distribution, ``perfcast-data``, built from the shared data.

``perfcast systems`` and ``perfcast project`` read published tables by default (the SPEC CPU2017 FP
rate results, the integer rate results joined to the same machines, the Skylake-SP counter
signatures).  They are third-party data and are not part of the ``perfcast`` package; in a checkout
they are found in ``shared/data`` beside it (:mod:`perfcast.shared_data`).  For an installation
without a checkout, :func:`build_wheel` packs exactly those tables into a separate wheel::

    perfcast data wheel -o dist/            # from the shared data (and the checkout's data/spec)
    pip install dist/perfcast_data-*.whl    # next to perfcast; then no environment variable

The wheel is pure data plus an ``__init__`` that says where it is: ``perfcast_data/spec/...`` laid
out like ``shared/data/spec`` (the large CSV tables gzip-compressed, which the loaders read as
they are), a ``MANIFEST.json`` naming each file's source and sha256, and the sources' README and
licences.  It is reproducible: the same sources give the same bytes (fixed timestamps, sorted
entries), and its version carries a digest of the contents.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .errors import PerfcastError
from .projection.lookup import DEFAULT_TABLES, default_table, find_table
from .shared_data import CHECKOUT, DATA_PACKAGE, ENV_VAR, locate

#: the distribution's name on pip's side
DIST_NAME = "perfcast-data"
#: the name the build's working directory (the tables laid out to be parsed) is the temporary of, in
#: the output directory (perfcast.output.temporary_dir: ``.perfcast_data.build.HOST.PID-START.XXXXXXXX.tmp``)
WORK_NAME = "perfcast_data.build"
#: the layout version of the package (the digest of the contents follows it in the version)
LAYOUT = "1"
#: what the default paths of ``systems`` and ``project`` read, relative to the data root; a table
#: is found in the shared data or, for the integer rate results, in the checkout's ``data/``
TABLES = tuple(f"spec/{name}" for name in DEFAULT_TABLES)
COUNTERS = "spec/counters"
#: tables larger than this are stored gzip-compressed (the loaders read ``.gz`` as they are)
COMPRESS_ABOVE = 64 * 1024
_EPOCH = (1980, 1, 1, 0, 0, 0)
LICENCES = ("SPEC CPU2017 published results as flattened by ashtou/spec17-ml (Apache-2.0); "
            "Skylake-SP counter signatures from agusnt/Xeon-SP_Memory_Characterization_SPEC-CPU-2K6-2K17 "
            "(GPL-3.0)")


@dataclass(frozen=True)
class Source:
    """One file of the package: where it is read from and its name inside ``perfcast_data/``."""
    path: Path
    name: str
    compress: bool

    def payload(self) -> bytes:
        raw = self.path.read_bytes()
        if not self.compress:
            return raw
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
            gz.write(raw)
        return buf.getvalue()


def sources(root: Path | None = None) -> list[Source]:
    """The files of the package, read from ``root`` (default: the shared data of
    :func:`perfcast.shared_data.locate`) and the checkout's ``data/``; an error names what is missing."""
    if root is None:
        root, _ = locate()
    root = Path(root)
    roots = [root, CHECKOUT / "data"]
    found: list[Source] = []
    for rel in TABLES:
        p = find_table(rel, roots)
        if p is None:
            raise PerfcastError(f"table {rel} not found under {root} (give the shared data directory "
                                f"as SOURCE or set {ENV_VAR})", root / rel)
        base = rel.removesuffix(".gz")
        gz = p.suffix != ".gz" and p.stat().st_size > COMPRESS_ABOVE
        found.append(Source(p, base + ".gz" if gz or p.suffix == ".gz" else base, gz))
    counters = root / COUNTERS
    csvs = sorted(counters.glob("*.csv")) if counters.is_dir() else []
    if not csvs:
        raise PerfcastError(f"no counter signatures (*.csv) in {counters}", counters)
    found += [Source(p, f"{COUNTERS}/{p.name}", False) for p in csvs]
    for readme, name in ((root / "README.md", "README-shared-data.md"),
                         (CHECKOUT / "data" / "README.md", "README-data.md")):
        if readme.is_file():    # the sources' own provenance and licence notes travel with them
            found.append(Source(readme, name, False))
    return found


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _init_py() -> bytes:
    return (b'"""Published benchmark tables for perfcast (built by `perfcast data wheel`; '
            b'MANIFEST.json names the sources)."""\n\nfrom pathlib import Path\n\n'
            b"#: the data root: spec/ laid out like perfcast's shared/data\n"
            b"DATA_DIR = Path(__file__).resolve().parent\n")


def _packaged_db(files: dict[str, bytes], out_dir: Path) -> dict[str, bytes]:
    """The database of the package's default tables parsed now (``project``'s loader on the files as
    they will be installed), as the packaged pair :mod:`.projection.dbcache` reads first.  The files
    are laid out in a working directory beside the wheel in ``out_dir`` (the one rule,
    :func:`perfcast.output.temporary_dir`: one a killed build left goes with the next build), not in
    the system's temporary directory, where it would stay."""
    import shutil

    from .output import temporary_dir
    from .projection.dbcache import PACKAGED_DIR, content_key, write_packaged
    from .projection.project import _parse_db

    prefix = f"{DATA_PACKAGE}/"
    try:
        tmp = temporary_dir(out_dir / WORK_NAME)
    except OSError as e:
        raise PerfcastError(f"cannot write the wheel ({e.strerror})", out_dir) from None
    try:
        root = Path(tmp).resolve()
        for name, data in files.items():
            dest = root / name.removeprefix(prefix)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        tables = [find_table(rel, [root]) for rel in TABLES]
        key = content_key(root, tables)
        written = write_packaged(_parse_db(tables), root, key)
        return {f"{prefix}{PACKAGED_DIR}/{p.name}": p.read_bytes() for p in written}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_wheel(out_dir: str | Path, root: Path | None = None) -> dict:
    """Write the ``perfcast-data`` wheel into ``out_dir``; returns what was written (path, version,
    files with their sources, sizes).  The wheel appears whole or not at all."""
    srcs = sources(root)
    files: dict[str, bytes] = {}
    manifest = []
    for s in srcs:
        data = s.payload()
        files[f"{DATA_PACKAGE}/{s.name}"] = data
        manifest.append({"name": s.name, "source": str(s.path), "source_bytes": s.path.stat().st_size,
                         "source_sha256": hashlib.sha256(s.path.read_bytes()).hexdigest(),
                         "compressed": s.compress, "bytes": len(data)})
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PerfcastError(f"cannot create the output directory: {e.strerror}", out_dir) from None
    parsed = _packaged_db(files, out_dir)
    files.update(parsed)
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    version = f"{LAYOUT}.0+g{digest.hexdigest()[:12]}"
    files[f"{DATA_PACKAGE}/__init__.py"] = _init_py()
    files[f"{DATA_PACKAGE}/MANIFEST.json"] = (json.dumps(
        {"distribution": DIST_NAME, "version": version, "licences": LICENCES, "files": manifest,
         "parsed": sorted(n.removeprefix(f"{DATA_PACKAGE}/") for n in parsed),
         "parsed_by": "perfcast.projection.project.load_db of the default tables above (read first by "
                      "perfcast of the same loader code; otherwise the tables are parsed)"},
        indent=1, sort_keys=True) + "\n").encode()
    info = f"perfcast_data-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST_NAME}\nVersion: {version}\n"
        "Summary: Published benchmark tables (SPEC CPU2017 results, counter signatures) read by "
        "perfcast systems and perfcast project\n"
        f"License: {LICENCES}\n").encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: perfcast data wheel\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = [f"{n},{_record_hash(d)},{len(d)}" for n, d in sorted(files.items())]
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()

    target = out_dir / f"perfcast_data-{version}-py3-none-any.whl"
    from .output import temporary_file

    try:   # named and cleaned by the one rule (a build killed outright leaves it to the next build)
        fd, tmp = temporary_file(target)
    except OSError as e:
        raise PerfcastError(f"cannot write the wheel ({e.strerror})", out_dir) from None
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
            for name in sorted(files, key=lambda n: (n.startswith(info), n)):   # dist-info last
                zi = zipfile.ZipInfo(name, date_time=_EPOCH)
                zi.compress_type = zipfile.ZIP_DEFLATED
                zi.external_attr = 0o644 << 16
                z.writestr(zi, files[name])
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)     # mkstemp's 0600 would keep others from installing it
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"wheel": str(target), "distribution": DIST_NAME, "version": version,
            "bytes": target.stat().st_size, "files": manifest}


def status() -> dict:
    """Where the shared data is found (:func:`perfcast.shared_data.locate`) and which of the tables
    ``systems`` and ``project`` read by default are there."""
    root, origin = locate()
    tables = []
    for name in DEFAULT_TABLES:
        p = default_table(name)
        tables.append({"table": f"spec/{name}", "path": str(p) if p else None, "found": p is not None})
    counters = root / COUNTERS
    n = len(list(counters.glob("*.csv"))) if counters.is_dir() else 0
    tables.append({"table": COUNTERS, "path": str(counters) if n else None, "found": n > 0, "files": n})
    return {"root": str(root), "source": origin, "exists": root.is_dir(), "tables": tables}

"""On-disk experiment: a directory ``NAME.perfcast`` holding

* ``experiment.json`` -- format tag and version, parameters, metrics, meta, value columns;
* ``values.parquet``  -- the tidy value table;
* ``callpaths.parquet`` -- the calling-context tree (path, parent, name), in tree order.

Writes are atomic: everything goes into a temporary sibling directory that is renamed into place
only when complete, so an interrupted or failed write leaves the previous state (or nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import PerfcastError
from .experiment import CallTree, Experiment, Metric

FORMAT = "perfcast-experiment"
VERSION = 1
SUFFIX = ".perfcast"


def is_store(path: str | Path) -> bool:
    p = Path(path)
    if not (p.is_dir() and (p / "experiment.json").is_file()):
        return False
    try:
        return json.loads((p / "experiment.json").read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def atomic_dir(dest: Path, fill) -> Path:
    """Create directory ``dest`` atomically: ``fill(tmpdir)`` writes into a temporary sibling."""
    dest = Path(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    if not parent.is_dir():
        raise PerfcastError("output directory does not exist", parent)
    if dest.exists() and not dest.is_dir():
        raise PerfcastError("output exists and is not a directory", dest)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=parent))
    except OSError as e:
        raise PerfcastError(f"cannot write the output ({e.strerror or e})", dest) from None
    try:
        fill(tmp)
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=parent))
            os.rename(dest, old / "x")
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def write(exp: Experiment, dest: str | Path) -> Path:
    """Store ``exp`` at ``dest`` (a directory, conventionally ``NAME.perfcast``)."""

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
        tree = pa.table({"path": pa.array([r[0] for r in recs], pa.string()),
                         "parent": pa.array([r[1] for r in recs], pa.string()),
                         "name": pa.array([r[2] for r in recs], pa.string())})
        pq.write_table(tree, tmp / "callpaths.parquet")
        (tmp / "experiment.json").write_text(text)  # written last: marks a complete store

    return atomic_dir(Path(dest), fill)


def read(path: str | Path) -> Experiment:
    p = Path(path)
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
    try:
        data = pq.read_table(p / "values.parquet").to_pandas()
        tree_t = pq.read_table(p / "callpaths.parquet").to_pydict()
    except (OSError, pa.ArrowException) as e:
        raise PerfcastError(f"cannot read stored tables: {e}", p) from None
    tree = CallTree(zip(tree_t["path"], tree_t["parent"], tree_t["name"]))
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

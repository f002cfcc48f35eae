"""The benchmark tables as the separate perfcast-data wheel (issue 19, item 4): what the wheel holds
(checked against the source files and an independent sha256 of every entry), that it is
reproducible, the `data` commands' errors, and a non-editable install in a fresh venv with no
checkout and no environment variable running `systems` and `project` -- their answers checked
against the SPEC table read here with csv."""

import base64
import csv
import gzip
import hashlib
import io
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from perfcast.datapkg import build_wheel

from conftest import DATA, REPO, cli, cli_json, cli_items, one_error, require_data

FP_RATE = DATA / "spec" / "spec17ml_input_FP_rate.csv"
INT_RATE = REPO / "data" / "spec" / "spec17ml_input_Int_rate.csv.gz"
COUNTERS = DATA / "spec" / "counters"
BASE = "cpu2017-20191014-19065"     # Dell EPYC 7742, 2 x 64 cores, 128 copies
TARGET = "cpu2017-20190625-15882"   # ASUSTeK Xeon Gold 6248, 2 x 20 cores, 80 copies


def _entries(whl: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(whl) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_wheel_holds_the_default_tables_byte_for_byte_with_a_valid_record(tmp_path):
    require_data(FP_RATE)
    res = build_wheel(tmp_path, DATA)
    whl = Path(res["wheel"])
    files = _entries(whl)
    pkg = {n.removeprefix("perfcast_data/"): d for n, d in files.items() if n.startswith("perfcast_data/")}
    # the tables: the FP rate CSV gzip-compressed, the integer rate table as stored, the signatures
    assert gzip.decompress(pkg["spec/spec17ml_input_FP_rate.csv.gz"]) == FP_RATE.read_bytes()
    assert pkg["spec/spec17ml_input_Int_rate.csv.gz"] == INT_RATE.read_bytes()
    sigs = sorted(COUNTERS.glob("*.csv"))
    assert len(sigs) == 9
    for p in sigs:
        assert pkg[f"spec/counters/{p.name}"] == p.read_bytes()
    assert pkg["README-shared-data.md"] == (DATA / "README.md").read_bytes()
    # wheel metadata: name, version with the contents' digest, file name, RECORD
    info = f"perfcast_data-{res['version']}.dist-info"
    meta = files[f"{info}/METADATA"].decode()
    assert "Name: perfcast-data\n" in meta and f"Version: {res['version']}\n" in meta
    assert whl.name == f"perfcast_data-{res['version']}-py3-none-any.whl"
    assert "Tag: py3-none-any" in files[f"{info}/WHEEL"].decode()
    record = list(csv.reader(files[f"{info}/RECORD"].decode().splitlines()))
    assert {r[0] for r in record} == set(files)
    for name, digest, size in record:
        if name.endswith("RECORD"):
            assert digest == size == ""
            continue
        sha = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={sha}" and int(size) == len(files[name])
    # the manifest names each file's source and its sha256
    manifest = {f["name"]: f for f in res["files"]}
    assert manifest["spec/spec17ml_input_FP_rate.csv.gz"]["source_sha256"] == \
        hashlib.sha256(FP_RATE.read_bytes()).hexdigest()
    # the database parsed into the wheel is the one the tables give: every FP rate result a system
    import pyarrow.parquet as pq
    systems = pq.read_table(io.BytesIO(pkg["benchdb/systems.parquet"])).column("system").to_pylist()
    with open(FP_RATE, newline="") as f:
        ids = {r["file"].removesuffix(".csv") for r in csv.DictReader(f)}
    assert set(systems) == ids
    # reproducible: the same sources give the same bytes
    again = build_wheel(tmp_path / "again", DATA)
    assert Path(again["wheel"]).read_bytes() == whl.read_bytes()


def test_data_commands_json_and_errors(tmp_path, capsys):
    require_data(FP_RATE)
    code, out, err = cli(capsys, "data", "status", "--json")
    doc = cli_json(out, "data")
    # the documented order: $PERFCAST_SHARED_DATA when set, else shared/data beside the checkout
    source = "environment" if os.environ.get("PERFCAST_SHARED_DATA") else "checkout"
    assert code == 0 and doc["source"] == source and doc["complete"] is True
    assert Path(doc["root"]) == DATA.resolve()
    code, out, err = cli(capsys, "data", "wheel", "-o", tmp_path / "w", "--json")
    item, = cli_items(out, "written")
    assert code == 0 and Path(item["output"]).is_file() and item["count"] == len(item["files"]) == 13
    # a source without the tables: exit 2, one line naming the place, no wheel written
    empty = tmp_path / "empty"
    (empty / "spec").mkdir(parents=True)
    code, out, err = cli(capsys, "data", "wheel", empty, "-o", tmp_path / "none")
    line = one_error(code, err)
    assert "spec17ml_input_FP_rate.csv" in line and str(empty) in line
    assert not (tmp_path / "none").exists() or not list((tmp_path / "none").iterdir())
    code, out, err = cli(capsys, "data", "wheel", tmp_path / "missing", "-o", tmp_path / "none")
    assert "missing" in one_error(code, err)


def test_data_status_says_when_the_shared_data_directory_does_not_exist(tmp_path, capsys, monkeypatch):
    # a mistyped $PERFCAST_SHARED_DATA listed every table MISSING without saying the directory is absent
    monkeypatch.setenv("PERFCAST_SHARED_DATA", str(tmp_path / "typo"))
    code, out, err = cli(capsys, "data", "status", "--json")
    doc = cli_json(out, "data")
    assert code == 1 and doc["root_exists"] is False and doc["complete"] is False
    code, out, err = cli(capsys, "data", "status")
    assert code == 1 and "(environment; no such directory)" in out
    monkeypatch.setenv("PERFCAST_SHARED_DATA", str(tmp_path))
    code, out, err = cli(capsys, "data", "status", "--json")
    assert cli_json(out, "data")["root_exists"] is True


def _hand_factor(base: str, target: str) -> float:
    """Geometric mean over the FP rate benchmarks both results publish of t(target) / t(base), read
    from the CSV here."""
    with open(FP_RATE, newline="") as f:
        rows = {r["file"].removesuffix(".csv"): r for r in csv.DictReader(f)}
    b, t = rows[base], rows[target]
    logs = [math.log(float(t[c]) / float(b[c])) for c in b
            if c.startswith("t_") and b[c] and t[c] and float(b[c]) > 0 and float(t[c]) > 0]
    return math.exp(sum(logs) / len(logs))


def _names_matching(words: str) -> set[str]:
    """FP rate results whose vendor / model name hold every word (the rule of `systems`)."""
    with open(FP_RATE, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = ("hardware_vendor", "model_name", "test_sponsor")
    return {r["file"].removesuffix(".csv") for r in rows
            if all(w.lower() in " ".join(r.get(k) or "" for k in fields).lower() for w in words.split())}


def test_non_editable_install_runs_systems_and_project_with_no_environment_variable(tmp_path):
    """Both wheels into a new venv (no checkout beside it, run from an unrelated directory, no
    PERFCAST_SHARED_DATA): the installed package finds the installed tables."""
    require_data(FP_RATE)
    dist = tmp_path / "dist"
    py = sys.executable
    subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, REPO], check=True,
                   capture_output=True, timeout=600)
    subprocess.run([py, "-m", "perfcast", "data", "wheel", "-o", dist], check=True, capture_output=True)
    venv = tmp_path / "venv"
    subprocess.run([py, "-m", "venv", venv], check=True, timeout=300)
    wheels = sorted(map(str, dist.glob("*.whl")))
    assert len(wheels) == 2
    env = {k: v for k, v in os.environ.items() if k not in ("PERFCAST_SHARED_DATA", "PYTHONPATH")}
    # without PYTHONPATH: a suite run with PYTHONPATH=src sees src/perfcast.egg-info (left by `pip wheel`
    # above), and pip took perfcast as already installed -- no venv/bin/perfcast
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", REPO / "requirements-test.lock",
                    *wheels], check=True, capture_output=True, timeout=900, env=env)
    env["PERFCAST_CACHE"] = str(tmp_path / "cache")
    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*args):
        r = subprocess.run([venv / "bin" / "perfcast", *map(str, args)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout

    where = run("data", "status", "--json")
    doc = cli_json(where, "data")
    assert doc["source"] == "package" and doc["complete"] is True
    assert Path(doc["root"]).is_relative_to(venv) and REPO not in Path(doc["root"]).parents
    # the installed package is not the checkout's
    loc = subprocess.run([venv / "bin" / "python", "-c", "import perfcast; print(perfcast.__file__)"],
                         cwd=work, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(loc).is_relative_to(venv)

    found = cli_json(run("systems", "EPYC 7742", "--json", "--limit", "1000"), "systems")
    assert {s["system"] for s in found["items"]} == _names_matching("EPYC 7742")
    # answered from the database the wheel carries parsed: nothing was parsed into the user cache
    assert not (tmp_path / "cache" / "benchdb").exists()

    app = tmp_path / "app.txt"
    app.write_text("PARAMETER p\nPOINTS ( 2 ) ( 4 ) ( 8 )\nREGION main\nMETRIC time\n"
                   "DATA 10.0 10.2\nDATA 11.0 11.1\nDATA 12.0 12.2\n")
    run("import", app, "-o", tmp_path / "app.perfcast")
    proj = cli_json(run("project", tmp_path / "app.perfcast", "--at", "p=8", "--base", BASE, "--target", TARGET,
                        "--method", "mean", "--json"), "projection")
    res, = proj["items"]
    assert res["compute_base"] == pytest.approx(12.1, rel=1e-12)   # mean of the two repetitions at p=8
    tgt, = res["targets"]
    assert tgt["compute_factor"] == pytest.approx(_hand_factor(BASE, TARGET), rel=1e-12)
    assert tgt["compute"] == pytest.approx(12.1 * _hand_factor(BASE, TARGET), rel=1e-12)


def test_packaged_database_is_read_only_for_the_tables_it_was_parsed_from(tmp_path, monkeypatch):
    """The parsed pair in the wheel answers for its own tables; a changed table or a damaged pair
    means parsing (into the user cache), never a stale or failed answer."""
    require_data(FP_RATE)
    import perfcast.shared_data as sd
    from perfcast.projection import dbcache
    from perfcast.projection.lookup import load_systems
    from perfcast.projection.project import load_db

    res = build_wheel(tmp_path / "dist", DATA)
    site = tmp_path / "site"
    with zipfile.ZipFile(res["wheel"]) as z:
        z.extractall(site)
    root = site / "perfcast_data"
    monkeypatch.setattr(sd, "package_data_dir", lambda: root)
    tables = [root / "spec" / "spec17ml_input_FP_rate.csv.gz", root / "spec" / "spec17ml_input_Int_rate.csv.gz"]
    monkeypatch.setenv("PERFCAST_CACHE", str(tmp_path / "cache"))
    with open(FP_RATE, newline="") as f:
        ids = {r["file"].removesuffix(".csv") for r in csv.DictReader(f)}

    st = load_systems(tables)
    assert set(st.columns["system"]) == ids and str(root) in st.source
    assert set(load_db(tables).systems["system"]) == ids
    assert not (tmp_path / "cache" / "benchdb").exists()          # nothing parsed

    (root / dbcache.PACKAGED_DIR / "systems.parquet").write_bytes(b"not parquet")   # damaged pair
    assert set(load_systems(tables).columns["system"]) == ids
    assert (tmp_path / "cache" / "benchdb").is_dir()               # parsed, and cached for next time

    # a table that changed after the pair was parsed: its key no longer matches
    rows = gzip.decompress(tables[0].read_bytes()).splitlines(keepends=True)
    tables[0].write_bytes(gzip.compress(b"".join(rows[:-1])))     # the last result removed
    dropped = rows[-1].split(b",")[list(csv.reader([rows[0].decode()]))[0].index("file")].decode()
    assert dbcache.content_key(root, tables) is not None
    got = set(load_db(tables).systems["system"])
    assert got == ids - {dropped.removesuffix(".csv")}

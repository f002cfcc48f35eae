"""Damaged inputs for every reader (hypothesis; deterministic in CI, see conftest.py).

5,000 deterministic mutants per run (the issue's bar for CI).  Real files from the shared data (and the tools' own output formats for perf, cachegrind, LIKWID,
PMPI) are truncated, have a byte replaced, a line deleted or duplicated, a blank line added or a
number replaced by a huge one, ``nan`` or a word; ``perfcast.io.load`` must then either refuse
them with a PerfcastError naming the file, or return the intact file's values (ground truth: the
intact file read by the same reader) -- a cut file only when the cut fell at a line end and the
values are a subset of the intact ones -- and never raise anything else.  The mutations and the
oracle are those of bench/fuzz_readers.py, which runs thousands of them.
"""

import importlib.util
import json
import os
import random
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from perfcast.errors import PerfcastError
from perfcast.io import load

from hypothesis import HealthCheck, given, settings  # noqa: E402  (a test dependency: never skipped)
from hypothesis import strategies as st  # noqa: E402

_spec = importlib.util.spec_from_file_location("fuzz_readers", REPO / "bench" / "fuzz_readers.py")
fz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fz)

BAD = ("silent_wrong", "unlocated", "internal")


class Corpus(tuple):
    def __repr__(self):  # hypothesis prints the arguments of a failing case: keep it short
        return f"<corpus of {len(self[0])} inputs>"


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("intact")
    entries = fz.build_corpus(root, data_dir)
    intact = {p: fz.values(load([fz._input(n, p)], format=fz._format(n, p))) for n, p in entries}
    return Corpus((entries, intact))


def test_every_reader_is_in_the_corpus(corpus):
    entries, intact = corpus
    names = {n for n, _ in entries}
    assert {"tidy", "tidy-parquet", "summary", "extrap-text", "extrap-jsonl", "talpas", "extrap-json",
            "likwid", "perf-script", "perf-stat", "cachegrind", "pmpi", "caliper-json", "caliper", "tau",
            "cprofile", "pyinstrument", "dot", "timemory", "extrap3", "hatchet-json", "hatchet-csv",
            "hatchet-literal"} <= names
    assert all(intact[p] for _, p in entries)  # every intact input has values


@settings(max_examples=5000, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(i=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(fz.MUTATIONS))
def test_damaged_input_is_refused_or_read_intact(corpus, tmp_path_factory, i, seed, kind):
    entries, intact = corpus
    name, p = entries[i % len(entries)]
    kind, data, info = fz.mutate(p.read_bytes(), random.Random(seed), kind)
    work = tmp_path_factory.mktemp("mutant") / p.parent.name
    import shutil

    shutil.copytree(p.parent, work)
    (work / p.name).write_bytes(data)
    cls, detail = fz.classify(fz._input(name, work / p.name), kind, info, intact[p], fz._format(name, p),
                              reader=name)
    assert cls not in BAD, f"{name} {kind}: {cls}: {detail}"


def test_every_cut_of_a_tidy_csv_inside_a_line_is_refused(corpus, tmp_path):
    # exhaustive for one file: all cuts that do not fall at a line end
    entries, intact = corpus
    p = next(p for n, p in entries if n == "tidy")
    data = p.read_bytes()[:400]  # the header and the first rows
    lines_end = {i + 1 for i, b in enumerate(data) if b == 0x0A}
    for k in range(1, len(data)):
        if k in lines_end:
            continue
        f = tmp_path / "cut.csv"
        f.write_bytes(data[:k])
        with pytest.raises(PerfcastError) as e:
            load([f], format="tidy")
        assert str(f) in e.value.format()


def test_a_cut_number_in_a_tidy_csv_names_its_line(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("p,callpath,metric,value\n1,main,time,3.6e-05\n2,main,time,3.6e-0")  # was stored 1e5 x too big
    with pytest.raises(PerfcastError) as e:
        load([f])
    assert e.value.where == "3" and "no line end" in e.value.message
    f.write_text("p,callpath,metric,value\n1,main,time,3.6e-05\n2,main,time,3.6e-05\n")
    assert sorted(load([f]).data["value"]) == [3.6e-05, 3.6e-05]


def test_special_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # no writer: opening it would block forever
    for args in (["show", str(fifo)], ["show", "/dev/zero", "--format", "extrap-text"]):
        # a subprocess so that a regression hangs only it (killed by the timeout), not the suite
        r = subprocess.run([sys.executable, "-m", "perfcast", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert "not a regular file" in r.stderr and args[1] in r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_line_longer_than_the_bound_is_refused(tmp_path):
    from perfcast.io import MAX_LINE_BYTES

    f = tmp_path / "long.txt"
    f.write_bytes(b"PARAMETER p\n" + b"9" * (MAX_LINE_BYTES + 10) + b"\n")
    with pytest.raises(PerfcastError) as e:
        load([f], format="extrap-text")
    assert e.value.where == "2" and "longer than" in e.value.message


def test_a_directory_mixing_formats_is_refused_naming_the_files(tmp_path):
    # was read as perf, both PMPI ranks dropped
    for r in range(2):
        (tmp_path / f"pmpi.rank{r:05d}.json").write_text(fz.pmpi_rank(r))
    (tmp_path / "perf.rank0.txt").write_text(fz.PERF_SCRIPT)
    with pytest.raises(PerfcastError) as e:
        load([tmp_path])
    msg = e.value.format()
    assert str(tmp_path) in msg and "several formats" in msg
    assert "perf (perf.rank0.txt)" in msg and "pmpi (pmpi.rank00000.json, pmpi.rank00001.json)" in msg
    (tmp_path / "perf.rank0.txt").unlink()
    exp = load([tmp_path])
    assert sorted(exp.data["rank"].unique()) == [0, 1]


def test_a_misspelt_json_lines_key_is_refused(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"params":{"p":1},"metric":"time","value":2.5}\n{"params":{"p":2},"metirc":"time","value":5}\n')
    with pytest.raises(PerfcastError) as e:
        load([f])
    assert e.value.where == "2" and "'metirc'" in e.value.message


def test_negative_times_and_non_positive_parameters_are_warned(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("p,callpath,metric,unit,value\n0,main,time,s,2.0\n4,main,time,s,-1.5\n8,main,time,s,3.0\n")
    exp = load([f])
    assert sorted(exp.data["value"]) == [-1.5, 2.0, 3.0]  # read as written
    w = exp.meta["warnings"]
    assert any("'p'" in x and "<= 0" in x for x in w)
    assert any("'time'" in x and "1 negative" in x for x in w)
    f.write_text("p,callpath,metric,unit,value\n1,main,time,s,2.0\n4,main,time,s,1.5\n")
    assert "warnings" not in load([f]).meta


# -- the damage the hostile-user run found, one case each (ground truth: the intact file) ----------

LIKWID = REPO / "tests" / "data" / "likwid" / "mem_broadwell_1thread.txt"


def _refused(f, fmt=None):
    with pytest.raises(PerfcastError) as e:
        load([f], format=fmt)
    assert str(f) in e.value.format()
    return e.value


def test_likwid_repeated_row_non_finite_count_and_bad_header_are_refused(tmp_path):
    lines = LIKWID.read_text().splitlines(keepends=True)
    assert lines[15].startswith("|   INSTR_RETIRED_ANY")
    f = tmp_path / "likwid.txt"
    f.write_text("".join(lines[:16] + [lines[15]] + lines[16:]))  # the row twice: was counted twice
    e = _refused(f, "likwid")
    assert e.where == "17" and "INSTR_RETIRED_ANY" in e.message and "twice" in e.message
    f.write_text("".join(lines[:15] + [lines[15].replace("454421715271", "         inf")] + lines[16:]))
    e = _refused(f, "likwid")  # was: the counter silently dropped
    assert e.where == "16" and "non-finite" in e.message
    f.write_text("".join(lines[:13] + [lines[13].replace("HWThread 0", "HWThrexd 0")] + lines[14:]))
    e = _refused(f, "likwid")  # was: the whole table dropped
    assert e.where == "14" and "HWThread" in e.message
    cut = "".join(lines[:20])  # a cut at a line end inside the table: no closing border
    f.write_text(cut)
    assert "truncated table" in _refused(f, "likwid").message


def test_caliper_json_split_cell_of_the_wrong_type_is_refused_at_the_cell(data_dir, tmp_path):
    doc = json.loads((data_dir / "formats/caliper/caliper-cpi-json/cpi-callpath-profile.json").read_text())
    j = doc["columns"].index("sum#time.duration")
    doc["data"][7][j] = "309432.0"  # was: the whole time column dropped
    f = tmp_path / "cpi.json"
    f.write_text(json.dumps(doc))
    e = _refused(f, "caliper-json")
    assert e.where == f"data[7][{j}]" and "sum#time.duration" in e.message
    doc["data"][7][j] = 1.0
    doc["data"][3][doc["columns"].index("mpi.rank")] = []  # was: internal error
    f.write_text(json.dumps(doc))
    assert _refused(f, "caliper-json").where == "data[3]"


def test_perf_cuts_and_repeated_events(tmp_path):
    f = tmp_path / "perf.rank0.txt"
    lines = fz.PERF_SCRIPT.splitlines(keepends=True)
    f.write_text("".join(lines[:-2]))  # cut at a line end inside the last stack: another callpath
    e = _refused(f, "perf")
    assert "blank line" in e.message and e.where == str(len(lines) - 2)
    s = tmp_path / "perf.stat.rank0.csv"
    s.write_text(fz.PERF_STAT + fz.PERF_STAT.splitlines(keepends=True)[3])  # page-faults twice: was summed
    e = _refused(s, "perf")
    assert "page-faults" in e.message and "twice" in e.message and e.where == "7"
    s.write_text(fz.PERF_STAT[:-5])  # cut inside the last line
    assert "no line end" in _refused(s, "perf").message


def test_extrap_text_cuts(data_dir, tmp_path):
    src = (data_dir / "extrap/text/one_parameter_1.txt").read_text()
    assert not src.endswith("\n")  # Extra-P's own files end without a line end: still read
    intact = fz.values(load([data_dir / "extrap/text/one_parameter_1.txt"]))
    f = tmp_path / "e.txt"
    last = src.rsplit("\n", 1)[-1]
    f.write_text(src[:len(src) - len(last)] + " ".join(last.split()[:4]))  # values dropped by the cut
    e = _refused(f, "extrap-text")
    assert e.where == "15" and "no line end" in e.message
    f.write_text(src[:-len("0616186790007")])  # 721.0616186790007 cut to 721.
    assert "ends in '.'" in _refused(f, "extrap-text").message
    f.write_text(src + "\nREGION other\nMETRIC time\n")  # cut after a block's header lines
    e = _refused(f, "extrap-text")
    assert "without its DATA" in e.message and e.where == "17"
    f.write_text(src + "\n")
    assert fz.values(load([f], format="extrap-text")) == intact


def test_cachegrind_count_line_cut_after_its_line_number(tmp_path):
    f = tmp_path / "cachegrind.out.1"
    text = fz.CACHEGRIND
    i = text.index("21 45000")
    f.write_text(text[:i + 2])  # "21" without counts and without a line end
    assert "no line end" in _refused(f, "cachegrind").message
    f.write_text(text[:i + 3] + "\n" + text[text.index("fl=comm.c"):])  # the counts gone: totals differ
    assert "summary" in _refused(f, "cachegrind").message


def test_garbled_cali_field_is_refused(data_dir, tmp_path):
    src = (data_dir / "formats/caliper/caliper-lulesh-cali/lulesh-annotation-profile.cali").read_text()
    assert src.count("__rec=ctx,ref=165,") == 1
    f = tmp_path / "lulesh.cali"
    f.write_text(src.replace("__rec=ctx,ref=165,", "__rec=ctx,rXf=165,"))  # was: the record dropped
    e = _refused(f, "caliper")
    assert "'rXf'" in e.message and e.where == str(src[:src.index("__rec=ctx,ref=165,")].count("\n") + 1)

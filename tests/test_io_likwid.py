"""LIKWID likwid-perfctr reader, on real outputs copied into tests/data/likwid (see the README there)."""

import shutil
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.io import detect, load, read_one

HERE = Path(__file__).resolve().parent / "data" / "likwid"
MEM = HERE / "mem_broadwell_1thread.txt"          # wrapper mode, group MEM, HWThread 0
SAXPY = HERE / "flops_sp_marker_3threads.txt"     # Marker API, region saxpy_cpu!, HWThread 0-2
MEM_DP = HERE / "mem_dp_marker_2regions.txt"      # Marker API, regions Setup and Solve, Core 0/Core 14


def values(exp, callpath, metric):
    d = exp.data[(exp.data["callpath"] == callpath) & (exp.data["metric"] == metric)]
    return {int(t): float(v) for t, v in zip(d["thread"], d["value"])}


def stat_rows(text):
    """The STAT rows of every section: [(section, name, counter or None, sum, min, max, avg)]."""
    out, section = [], -1
    for line in text.splitlines():
        if line.startswith(("Region ", "Group ")):
            section += 1
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not cells[0].endswith(" STAT"):
            continue
        name = cells[0][: -len(" STAT")]
        if len(cells) == 6:
            out.append((section, name, cells[1], *map(float, cells[2:])))
        else:
            out.append((section, name, None, *map(float, cells[1:])))
    return out


def test_wrapper_mode_single_thread_values():
    exp = read_one(MEM)
    assert exp.meta["format"] == "likwid" and list(exp.parameters) == []
    assert exp.tree.paths == ["app"] and set(exp.data["callpath"]) == {"app"}
    assert set(exp.data["thread"]) == {0} and "rank" not in exp.data.columns
    assert values(exp, "app", "INSTR_RETIRED_ANY") == {0: 454421715271}
    assert values(exp, "app", "CPU_CLK_UNHALTED_CORE") == {0: 303936872339}
    # CAS_COUNT_RD on the channels LIKWID could read (MBOX0..3 and MBOX6); MBOX4, 5, 7 printed '-'
    rd = 138706163 + 143371367 + 153623122 + 139019707 + 0
    assert values(exp, "app", "CAS_COUNT_RD") == {0: rd}
    assert values(exp, "app", "Memory data volume") == {0: 62.6840}
    assert values(exp, "app", "Runtime (RDTSC)") == {0: 103.9265}
    # the group's own formula: read data volume [GBytes] = 1e-9 * 64 B * CAS_COUNT_RD
    assert values(exp, "app", "Memory read data volume")[0] == pytest.approx(64e-9 * rd, abs=5e-5)
    m = exp.metrics
    assert (m["INSTR_RETIRED_ANY"].kind, m["INSTR_RETIRED_ANY"].unit) == ("count", "#")
    assert (m["Memory data volume"].kind, m["Memory data volume"].unit) == ("bytes", "GBytes")
    assert (m["Memory bandwidth"].kind, m["Memory bandwidth"].unit) == ("other", "MBytes/s")
    assert (m["Runtime (RDTSC)"].kind, m["Runtime (RDTSC)"].unit) == ("time", "s")
    assert (m["Clock"].unit, m["CPI"].unit) == ("MHz", "")
    na = exp.meta["likwid"]["not_available"]
    assert sorted(x["counter"] for x in na if x["name"] == "CAS_COUNT_RD") == ["MBOX4C0", "MBOX5C0", "MBOX7C0"]


def test_marker_threads_agree_with_the_stat_tables():
    exp = read_one(SAXPY)
    cp = "app->saxpy_cpu!"
    assert exp.tree.paths == ["app", cp] and exp.tree.parent(cp) == "app"
    assert set(exp.data["callpath"]) == {cp}
    assert values(exp, cp, "INSTR_RETIRED_ANY") == {0: 46977220, 1: 47074720, 2: 47030020}
    assert values(exp, cp, "call count") == {0: 1, 1: 1, 2: 1}
    assert values(exp, cp, "RDTSC Runtime") == {0: 0.146394, 1: 0.199333, 2: 0.178488}
    assert values(exp, cp, "Clock") == {0: 3689.9336, 1: 3265.3756, 2: 3265.5725}
    rows = stat_rows(SAXPY.read_text())
    assert len(rows) == 7 + 10
    for _, name, counter, s, lo, hi, avg in rows:
        metric = name if counter else name.split(" [")[0]
        v = list(values(exp, cp, metric).values())
        assert len(v) == 3
        tol = 0 if counter else 3e-4          # derived values are printed with 4 decimals
        assert sum(v) == pytest.approx(s, abs=tol, rel=1e-9)
        assert (min(v), max(v)) == (pytest.approx(lo, abs=tol), pytest.approx(hi, abs=tol))
        assert sum(v) / 3 == pytest.approx(avg, abs=tol, rel=1e-6)


def test_one_callpath_per_marker_region():
    exp = read_one(MEM_DP)
    assert exp.tree.paths == ["app", "app->Setup", "app->Solve"]
    assert set(exp.data["callpath"]) == {"app->Setup", "app->Solve"}   # nothing measured outside regions
    assert set(exp.data["thread"]) == {0, 14}                          # 'Core 0', 'Core 14'
    assert values(exp, "app->Solve", "INSTR_RETIRED_ANY") == {0: 74654430000, 14: 75272750000}
    assert values(exp, "app->Setup", "call count") == {0: 2, 14: 2}
    assert values(exp, "app->Solve", "Memory data volume") == {0: 2.3300, 14: 1.8766}
    assert exp.metrics["PWR_PKG_ENERGY"].unit == "J"
    assert values(exp, "app->Setup", "PWR_PKG_ENERGY") == values(exp, "app->Setup", "Energy")
    # memory data volume [GBytes] = 1e-9 * 64 B * (CAS reads + writes over the six channels)
    rd = values(exp, "app->Setup", "CAS_COUNT_RD")[0]
    wr = values(exp, "app->Setup", "CAS_COUNT_WR")[0]
    assert rd == 47143 + 40951 + 54214 + 33937 + 32677 + 31935
    assert 64e-9 * (rd + wr) == pytest.approx(0.0475, abs=5e-5)
    # every STAT row of both regions: the per-thread values reduce to what LIKWID printed
    text = MEM_DP.read_text()
    regions = {0: "app->Setup", 1: "app->Solve"}
    summed: dict = {}
    for sec, name, counter, s, lo, hi, avg in stat_rows(text):
        cp = regions[sec]
        if counter and name.startswith("CAS_COUNT"):   # one row per channel; the reader sums channels
            summed[(cp, name)] = summed.get((cp, name), 0) + s
            continue
        metric = name if counter else name.split(" [")[0]
        v = list(values(exp, cp, metric).values())
        tol = 0 if counter and not name.startswith("PWR") else 2e-4
        assert sum(v) == pytest.approx(s, abs=tol, rel=1e-9), (cp, name)
        assert min(v) == pytest.approx(lo, abs=tol) and max(v) == pytest.approx(hi, abs=tol)
        assert sum(v) / 2 == pytest.approx(avg, abs=tol, rel=1e-6)
    assert len(summed) == 4
    for (cp, name), s in summed.items():
        assert sum(values(exp, cp, name).values()) == s


def test_format_detection(tmp_path):
    for f in (MEM, SAXPY, MEM_DP):
        assert detect(f).name == "likwid"
    renamed = tmp_path / "run.out"
    shutil.copy(MEM_DP, renamed)
    assert detect(renamed).name == "likwid"
    other = tmp_path / "notes.txt"
    other.write_text("Group 1: MEM\nno table here\n")
    with pytest.raises(PerfcastError, match="unknown format"):
        detect(other)


def test_rank_from_file_name_and_directories(tmp_path):
    one = tmp_path / "single" / "likwid.rank3.txt"
    one.parent.mkdir()
    shutil.copy(MEM, one)
    assert set(read_one(one).data["rank"]) == {3}
    d = tmp_path / "ranks"
    d.mkdir()
    shutil.copy(MEM_DP, d / "mem_dp.rank0.txt")
    shutil.copy(MEM_DP, d / "mem_dp.rank1.txt")
    exp = read_one(d)
    assert exp.meta["format"] == "likwid" and set(exp.data["rank"]) == {0, 1}
    assert len(exp.data) == 2 * len(read_one(MEM_DP).data)
    # several files given together: one experiment per file needs coordinates (--point)
    both = load([SAXPY, MEM], points=[{"p": 1}, {"p": 2}])
    assert sorted(set(both.data["p"])) == [1.0, 2.0]


def test_several_groups_keep_the_first_value(tmp_path):
    # the same output twice, the second time as group 2 of region Setup (likwid-perfctr -g A -g B)
    text = MEM_DP.read_text().replace("Region Solve, Group 1: MEM_DP", "Region Setup, Group 2: MEM_DP")
    f = tmp_path / "two_groups.txt"
    f.write_text(text)
    exp = read_one(f)
    assert exp.tree.paths == ["app", "app->Setup"]
    assert values(exp, "app->Setup", "INSTR_RETIRED_ANY") == {0: 347081100, 14: 304000500}
    dup = exp.meta["likwid"]["duplicates"]
    assert {d["group"] for d in dup} == {2} and {d["kept_group"] for d in dup} == {1}
    assert [g["group"] for g in exp.meta["likwid"]["groups"]] == [1, 2]


def _lines(path, n):
    return "".join(path.read_text().splitlines(keepends=True)[:n])


@pytest.fixture
def bad_files(tmp_path):
    trunc = tmp_path / "truncated.txt"
    trunc.write_text(_lines(MEM, 20))                       # ends inside the Event table
    nonnum = tmp_path / "nonnumeric.txt"
    nonnum.write_text(MEM.read_text().replace("454421715271", "45442x715271"))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "garbage.txt"
    binary.write_bytes(b"Group 1: MEM\n\x00\xff\xfe\x01binary\n")
    return {"truncated": (trunc, "20", "truncated table"),
            "nonnumeric": (nonnum, "16", "non-numeric value '45442x715271' for 'INSTR_RETIRED_ANY' on HWThread 0"),
            "empty": (empty, "1", "empty file"),
            "binary": (binary, "2", "binary content")}


@pytest.mark.parametrize("case", ["truncated", "nonnumeric", "empty", "binary"])
def test_bad_input_is_one_located_error(bad_files, case, capsys):
    path, line, msg = bad_files[case]
    with pytest.raises(PerfcastError) as e:
        read_one(path, format="likwid")
    assert e.value.path == str(path) and e.value.where == line and msg in e.value.message
    # on the command line: one `perfcast: error:` line naming file and line, exit code 2
    code = main(["show", "--format", "likwid", str(path)])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"perfcast: error: {path}:{line}: ") and msg in lines[0]


@pytest.mark.parametrize("case", ["truncated", "nonnumeric"])
def test_bad_likwid_output_is_recognised_without_format(bad_files, case, capsys):
    path, line, msg = bad_files[case]
    code = main(["show", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [err.splitlines()[0]]
    assert err.startswith(f"perfcast: error: {path}:{line}: ") and msg in err


def test_show_prints_the_experiment(capsys):
    assert main(["show", str(MEM_DP)]) == 0
    out = capsys.readouterr().out
    assert "app->Solve" in out or "Solve" in out
    assert "Memory data volume" in out

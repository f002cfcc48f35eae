"""TAU profile reader: the cpi run of Hatchet's test data (4 ranks, TAU_CALLPATH), compared with
independent readings of the same files."""

import re
import shutil

import pytest

from perfcast.errors import PerfcastError
from perfcast.io import detect, load


@pytest.fixture
def tau_dir(data_dir):
    return data_dir / "formats" / "other" / "tau-cpi-mpi"


def _raw_events(path):
    """name -> (calls, subrs, excl, incl) by a regex over the file (independent of the reader)."""
    out = {}
    for m in re.finditer(r'^"(.*)" (\d+) (\d+) (\S+) (\S+) \d+ GROUP=', path.read_text(), re.M):
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)), float(m.group(5)))
    return out


def test_tau_directory_is_detected_and_read_per_rank(tau_dir):
    assert detect(tau_dir).name == "tau"
    exp = load([tau_dir])
    # Hatchet 2026.2.0 reads 12 nodes (root .TAU application, 7 children, 4 under MPI_Finalize),
    # 48 rows, sum of exclusive 'time' 214047 and of 'time (inc)' 537794:
    #   python3 -m venv /tmp/hatchet-venv && /tmp/hatchet-venv/bin/pip install llnl-hatchet
    #   /tmp/hatchet-venv/bin/python -c "import hatchet as ht; gf = ht.GraphFrame.from_tau('.../tau-cpi-mpi');
    #       print(len(gf.graph), len(gf.dataframe), gf.dataframe['time'].sum(), gf.dataframe['time (inc)'].sum())"
    assert len(exp.tree) == 12
    assert exp.tree.roots() == [".TAU application"]
    root = ".TAU application"
    assert sorted(exp.tree.name(c) for c in exp.tree.children(root)) == sorted(
        ["MPI_Bcast()", "MPI_Comm_rank()", "MPI_Comm_size()", "MPI_Finalize()", "MPI_Get_processor_name()",
         "MPI_Init()", "MPI_Reduce()"])
    fin = root + "->MPI_Finalize()"
    assert sorted(exp.tree.name(c) for c in exp.tree.children(fin)) == sorted(
        ["MPI_Info_create()", "MPI_File_open()", "MPI_Info_free()", "MPI_Comm_get_attr()"])
    d = exp.data
    assert sorted(d["rank"].unique()) == [0, 1, 2, 3] and set(d["thread"]) == {0}
    assert d.loc[d.metric == "time (E)", "value"].sum() == 214047.0
    assert d.loc[d.metric == "time (I)", "value"].sum() == 537794.0
    assert exp.metrics["time (E)"].unit == "us" and exp.metrics["time (I)"].scope == "inclusive"
    # every rank: the values of its file, event by event (callpaths and the root)
    for rank in range(4):
        raw = _raw_events(tau_dir / f"profile.{rank}.0.0")
        for name, (calls, subrs, excl, incl) in raw.items():
            frames = [f.strip() for f in name.split("=>")]
            if len(frames) == 1 and frames[0] != root:
                continue  # flat events are the sums of their callpaths
            cp = "->".join(frames)
            got = d[(d["rank"] == rank) & (d.callpath == cp)].set_index("metric")["value"]
            assert (got["calls"], got["subroutine_calls"], got["time (E)"], got["time (I)"]) == (
                calls, subrs, excl, incl), (rank, cp)


def test_tau_multi_metric_directories_and_threads(tau_dir, tmp_path):
    run = tmp_path / "run"
    for metric in ("TIME", "PAPI_TOT_CYC"):
        d = run / f"MULTI__{metric}"
        d.mkdir(parents=True)
        for rank in range(2):
            text = (tau_dir / f"profile.{rank}.0.0").read_text().replace("_MULTI_TIME", f"_MULTI_{metric}")
            (d / f"profile.{rank}.0.0").write_text(text)
            (d / f"profile.{rank}.0.1").write_text(text)
    assert detect(run).name == "tau"
    exp = load([run])
    assert set(exp.metrics) == {"time (I)", "time (E)", "PAPI_TOT_CYC (I)", "PAPI_TOT_CYC (E)", "calls",
                                "subroutine_calls"}
    assert exp.metrics["PAPI_TOT_CYC (E)"].kind == "count" and exp.metrics["PAPI_TOT_CYC (E)"].unit == "#"
    d = exp.data
    assert sorted(set(zip(d["rank"], d["thread"]))) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    raw0 = _raw_events(tau_dir / "profile.0.0.0")
    v = d[(d["rank"] == 0) & (d["thread"] == 1) & (d.callpath == ".TAU application") & (d.metric == "PAPI_TOT_CYC (I)")]
    assert v["value"].tolist() == [raw0[".TAU application"][3]]
    (run / "MULTI__TIME" / "profile.1.0.1").unlink()  # one metric lacks a location
    with pytest.raises(PerfcastError) as e:
        load([run])
    assert "different locations" in e.value.message


def test_tau_flat_profile_without_callpaths(tmp_path):
    f = tmp_path / "profile.0.0.0"
    f.write_text('2 templated_functions_MULTI_TIME\n# Name Calls Subrs Excl Incl ProfileCalls #\n'
                 '"main" 1 1 10 30 0 GROUP="TAU_DEFAULT"\n"solve" 4 0 20 20 0 GROUP="TAU_USER"\n0 aggregates\n')
    exp = load([tmp_path])
    assert sorted(exp.tree.roots()) == ["main", "solve"]
    assert exp.data.loc[exp.data.metric == "time (E)", "value"].sum() == 30.0


def _refused(path):
    with pytest.raises(PerfcastError) as e:
        load([path])
    assert str(path) in e.value.format()
    return e.value


def test_tau_damage_is_refused_with_its_line(tau_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tau_dir, run)
    f = run / "profile.2.0.0"
    src = f.read_text()
    lines = src.splitlines(keepends=True)
    f.write_text("".join(lines[:10]))  # cut at a line end inside the events
    e = _refused(run)
    assert "announces 23 events" in e.message and e.path == str(f)
    f.write_text(src[:-10])  # cut inside the last line
    assert "no line end" in _refused(run).message
    f.write_text("".join(lines[:5] + [lines[5].replace(" 1 0 ", " 1 x ", 1)] + lines[6:]))
    e = _refused(run)
    assert e.where == "6" and "'x'" in e.message
    f.write_text("".join(lines[:5] + [lines[5].replace(" 1 0 ", " -1 0 ", 1)] + lines[6:]))
    assert _refused(run).where == "6"
    f.write_text("".join(lines[:6] + [lines[5]] + lines[7:]))  # an event twice
    assert "twice" in _refused(run).message
    f.write_text("".join(lines[:-1]))  # a user event missing
    assert "user events" in _refused(run).message

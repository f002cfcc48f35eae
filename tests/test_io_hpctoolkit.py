"""HPCToolkit reader: legacy experiment.xml + metric-db and v4 meta.db/profile.db.

Ground truth is taken from the files themselves by means independent of the reader: the XML's
own summary values read with xml.etree, the metric-db matrices read with numpy from the byte
layout, and the v4 arrays decoded here with ``struct`` straight from FORMATS.md.
"""

import glob
import shutil
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from perfcast import PerfcastError, store
from perfcast.cli import main
from perfcast.experiment import SEP, combine
from perfcast.io import ReadOptions, at_point, detect, load
from perfcast.io import hpctoolkit as H

LEGACY, V4, ALLGATHER, FLASH = ("hpctoolkit-cpi-database", "hpctoolkit-cpi-v4-database",
                                "hpctoolkit-allgather-database", "flash4-experiment1.xml")
XML_REL = 5e-6  # experiment.xml prints 6 significant digits


@pytest.fixture(scope="module")
def hpc(data_dir) -> Path:
    return data_dir / "formats" / "hpctoolkit"


@pytest.fixture(scope="module")
def exps(hpc):
    return {name: H.read(hpc / name) for name in (LEGACY, V4, ALLGATHER, FLASH)}


def per_location(exp, metric, paths=None):
    """{(callpath, rank, thread): value} (rank/thread None when the experiment has totals)."""
    d = exp.data[exp.data["metric"] == metric]
    if paths is not None:
        d = d[d["callpath"].isin(paths)]
    loc = [c for c in ("rank", "thread") if c in d.columns]
    out = {}
    for row in d.itertuples(index=False):
        key = (row.callpath, *(getattr(row, c) for c in loc)) if loc else (row.callpath, None, None)
        out[key] = out.get(key, 0.0) + row.value
    return out


def xml_values(xml_path):
    """{node id: {metric id: value}} from the XML summary, plus the experiment-wide values."""
    root = ET.parse(xml_path).getroot()
    data = root.find("SecCallPathProfile/SecCallPathProfileData")
    top = {m.get("n"): float(m.get("v")) for m in data.findall("M")}
    nodes = {}
    for e in data.iter():
        if e.get("i") is not None and e.tag in ("PF", "Pr", "C", "L", "S"):
            nodes[int(e.get("i"))] = {m.get("n"): float(m.get("v")) for m in e.findall("M")}
    return root, top, nodes


def metric_db(path):
    """(rank, thread, matrix nodes x metrics) read straight from the byte layout."""
    raw = Path(path).read_bytes()
    assert raw[:16] == b"HPCPROF-metricdb" and raw[23:24] == b"b"
    n_nodes, n_metrics = struct.unpack(">II", raw[24:32])
    mat = np.frombuffer(raw, dtype=">f8", offset=32).reshape(n_nodes, n_metrics)
    fields = Path(path).name[:-len(".metric-db")].split("-")   # PROG-RANK-THREAD-HOST-PID-GEN
    return int(fields[-5]), int(fields[-4]), mat


# ---- legacy cpi: tree and totals ---------------------------------------------------------------

U = "<unknown procedure>"
FIN = SEP.join(["<program root>", "main", "MPI_Finalize", "PMPI_Finalize", "MPID_Finalize", "MPIDI_CH3_Finalize",
                "psm_dofinalize", U, U, U])
CPI_LEGACY_PATHS = {
    "<program root>", "<program root>->main", "<program root>->main->MPI_Finalize",
    "<program root>->main->MPI_Finalize->PMPI_Finalize",
    "<program root>->main->MPI_Finalize->PMPI_Finalize->MPID_Finalize",
    "<program root>->main->MPI_Finalize->PMPI_Finalize->MPID_Finalize->MPIDI_CH3_Finalize",
    SEP.join(FIN.split(SEP)[:7]), SEP.join(FIN.split(SEP)[:8]), SEP.join(FIN.split(SEP)[:9]), FIN,
    FIN + "-><unknown file>:0",                     # S 60
    FIN + "->" + U,                                 # PF 43, 46, 49 merged (same name, call sites on line 0)
    FIN + "->" + U + "-><unknown file>:0",          # S 44, 47, 56
    FIN + "->" + U + "->" + U,                      # PF 51, 54
    FIN + "->" + U + "->" + U + "-><unknown file>:0",  # S 52, 55
    FIN + "->__GI_sched_yield",                     # PF 58
    FIN + "->__GI_sched_yield->interp.c:0",         # S 59
}


def test_legacy_cpi_tree_by_hand(exps):
    e = exps[LEGACY]
    # worked out by hand from experiment.xml: the MPI_Init path has no values and is left out,
    # call sites are not frames, equal-named siblings from line-0 call sites are merged
    assert set(e.tree.paths) == CPI_LEGACY_PATHS
    assert e.tree.roots() == ["<program root>"]
    assert e.tree.parent(FIN + "->" + U) == FIN
    assert {m.name: (m.unit, m.kind, m.scope) for m in e.metrics.values()} == {
        "CPUTIME (I)": ("s", "time", "inclusive"), "CPUTIME (E)": ("s", "time", "exclusive")}
    assert e.meta["hpctoolkit"]["value_source"] == "metric-db"


def test_legacy_cpi_values_against_xml_and_metric_db(hpc, exps):
    e = exps[LEGACY]
    _, top, nodes = xml_values(hpc / LEGACY / "experiment.xml")
    inc = per_location(e, "CPUTIME (I)")
    exc = per_location(e, "CPUTIME (E)")
    total = lambda d, p: sum(v for k, v in d.items() if k[0] == p)  # noqa: E731
    # experiment-wide total (metric 2 = CPUTIME:Sum (I), usec, summed over the 4 ranks)
    assert total(inc, "<program root>") == pytest.approx(top["2"] * 1e-6, rel=XML_REL)
    # merged frames hold the sums of the XML nodes merged into them (metric 3 = Sum (E))
    assert total(exc, FIN + "-><unknown file>:0") == pytest.approx(nodes[60]["3"] * 1e-6, rel=XML_REL)
    merged_stmt = sum(nodes[i]["3"] for i in (44, 47, 56)) * 1e-6
    assert total(exc, FIN + "->" + U + "-><unknown file>:0") == pytest.approx(merged_stmt, rel=XML_REL)
    assert total(inc, FIN + "->" + U) == pytest.approx(sum(nodes[i]["2"] for i in (43, 46, 49)) * 1e-6, rel=XML_REL)
    assert total(inc, FIN + "->" + U + "->" + U) == pytest.approx((nodes[51]["2"] + nodes[54]["2"]) * 1e-6,
                                                                   rel=XML_REL)
    assert total(inc, FIN + "->__GI_sched_yield") == pytest.approx(nodes[58]["2"] * 1e-6, rel=XML_REL)
    # per rank, exactly: metric-db row (node id - 1), column 0 = inclusive, 1 = exclusive, usec
    files = sorted(glob.glob(str(hpc / LEGACY / "*.metric-db")))
    assert len(files) == 4
    for f in files:
        rank, thread, mat = metric_db(f)
        assert inc[("<program root>", rank, thread)] == pytest.approx(mat[0, 0] * 1e-6, rel=1e-12)
        assert inc[(FIN, rank, thread)] == pytest.approx(mat[40, 0] * 1e-6, rel=1e-12)
        assert exc[(FIN + "-><unknown file>:0", rank, thread)] == pytest.approx(mat[59, 1] * 1e-6, rel=1e-12)
        stmt = sum(mat[i - 1, 1] for i in (44, 47, 56)) * 1e-6
        assert exc[(FIN + "->" + U + "-><unknown file>:0", rank, thread)] == pytest.approx(stmt, rel=1e-12)
    assert sorted({k[1] for k in inc}) == [0, 1, 2, 3] and {k[2] for k in inc} == {0}


def test_legacy_without_metric_db_reads_the_xml_totals(hpc, exps, tmp_path):
    (tmp_path / "db").mkdir()
    shutil.copy(hpc / LEGACY / "experiment.xml", tmp_path / "db")
    e = H.read(tmp_path / "db")
    assert e.tree == exps[LEGACY].tree and not e.has_locations
    assert e.meta["hpctoolkit"]["metric_db_missing"] == ["*.metric-db"]
    full = exps[LEGACY].reduce_locations("sum").data
    for path in e.tree.paths:
        for m in ("CPUTIME (I)", "CPUTIME (E)"):
            mine = e.data[(e.data["callpath"] == path) & (e.data["metric"] == m)]["value"].sum()
            exact = full[(full["callpath"] == path) & (full["metric"] == m)]["value"].sum()
            assert mine == pytest.approx(exact, rel=2 * XML_REL), (path, m)


def test_legacy_node_id_out_of_range_is_refused(hpc, tmp_path):
    """A node id beyond 64 bits (found by the fuzz suite) is a one-line error naming the element."""
    import re
    (tmp_path / "db").mkdir()
    text = (hpc / LEGACY / "experiment.xml").read_text()
    text, n = re.subn(r'(<PF [^>]*\bi=")\d+"', r'\g<1>18446744073709551617"', text, count=1)
    assert n == 1
    (tmp_path / "db" / "experiment.xml").write_text(text)
    with pytest.raises(PerfcastError, match="out of range") as err:
        H.read(tmp_path / "db")
    assert "18446744073709551617" in str(err.value)


def test_v4_start_indices_beyond_2_63_are_refused(hpc, tmp_path):
    """A damaged profile.db whose context start indices wrap to negative int64 values with
    non-negative differences (found by the fuzz suite: one byte replaced by a 20-digit number)
    used to pass the ordering check and crash numpy (segfault) in np.repeat; now it is refused."""
    db = tmp_path / "db"
    shutil.copytree(hpc / V4, db)
    raw = (db / "profile.db").read_bytes()
    assert raw[24032:24033] == b"4"
    (db / "profile.db").write_bytes(raw[:24032] + b"18446744073709551617" + raw[24033:])
    with pytest.raises(PerfcastError, match="start indices"):
        load([db], format="hpctoolkit")


# ---- invariants on every database ---------------------------------------------------------------

@pytest.mark.parametrize("name", [LEGACY, V4, ALLGATHER, FLASH])
def test_inclusive_is_exclusive_plus_children(exps, name):
    e = exps[name]
    inc, exc = per_location(e, "CPUTIME (I)"), per_location(e, "CPUTIME (E)")
    rel = XML_REL * 4 if name == FLASH else 1e-9
    locs = {k[1:] for k in inc}
    checked = 0
    for path in e.tree.paths:
        for loc in locs:
            i = inc.get((path, *loc), 0.0)
            kids = sum(inc.get((c, *loc), 0.0) for c in e.tree.children(path))
            assert i == pytest.approx(exc.get((path, *loc), 0.0) + kids, rel=rel, abs=1e-12), (path, loc)
            checked += 1
    assert checked >= len(e.tree)
    # inclusive root = sum of exclusive over its tree, per location and in total
    for r in e.tree.roots():
        members = {r, *e.tree.descendants(r)}
        for loc in locs:
            s = sum(v for k, v in exc.items() if k[0] in members and k[1:] == loc)
            assert inc.get((r, *loc), 0.0) == pytest.approx(s, rel=rel, abs=1e-12)
    assert (e.data["value"] >= 0).all()


# ---- v4: values against the spec's raw arrays, decoded here with struct -----------------------

def v4_raw(db: Path):
    """Per profile: (rank, thread, summary flag, {metricId: value at ctxId 0}, {metricId: sum over
    all other contexts}); plus {scope type: propMetricId} of the one metric."""
    meta = (db / "meta.db").read_bytes()
    p_names, n_kinds = struct.unpack_from("<QB", meta, struct.unpack_from("<Q", meta, 0x28)[0])
    cstr = lambda buf, o: buf[o:buf.index(b"\0", o)].decode()  # noqa: E731
    kinds = [cstr(meta, struct.unpack_from("<Q", meta, p_names + 8 * k)[0]) for k in range(n_kinds)]
    p_met = struct.unpack_from("<Q", meta, 0x38)[0]
    p_metrics, n_metrics, sz_m, sz_psi = struct.unpack_from("<QIBB", meta, p_met)
    assert n_metrics == 1
    _, p_psi, _, n_psi = struct.unpack_from("<QQQH", meta, p_metrics)
    scope_ids = {}
    for j in range(n_psi):
        p_scope, mid = struct.unpack_from("<QH", meta, p_psi + j * sz_psi)
        scope_ids[meta[p_scope + 8]] = mid
    prof = (db / "profile.db").read_bytes()
    p_prof, n_prof, sz_prof = struct.unpack_from("<QIB", prof, struct.unpack_from("<Q", prof, 0x18)[0])
    out = []
    for i in range(n_prof):
        n_values, p_values, n_ctxs, p_idx, p_tuple, flags = struct.unpack_from("<QQI4xQQI", prof,
                                                                                p_prof + i * sz_prof)
        ids = {}
        if p_tuple:
            (n_ids,) = struct.unpack_from("<H", prof, p_tuple)
            for k in range(n_ids):
                kind, _, _, logical = struct.unpack_from("<BBHI", prof, p_tuple + 8 + 16 * k)
                ids[kinds[kind]] = logical
        starts = [struct.unpack_from("<IQ", prof, p_idx + 12 * c) for c in range(n_ctxs)]
        at0, elsewhere = {}, {}
        for c, (ctx, start) in enumerate(starts):
            end = starts[c + 1][1] if c + 1 < n_ctxs else n_values
            for v in range(start, end):
                mid, val = struct.unpack_from("<Hd", prof, p_values + 10 * v)
                target = at0 if ctx == 0 else elsewhere
                target[mid] = target.get(mid, 0.0) + val
        out.append((ids.get("RANK", 0), ids.get("THREAD", 0), bool(flags & 1), at0, elsewhere))
    return out, scope_ids


def test_v4_cpi_against_raw_arrays(hpc, exps):
    e = exps[V4]
    profiles, scope = v4_raw(hpc / V4)
    execution, point = scope[2], scope[1]   # FORMATS.md: type 1 = point, 2 = execution
    inc, exc = per_location(e, "CPUTIME (I)"), per_location(e, "CPUTIME (E)")
    roots = e.tree.roots()
    assert sorted(roots) == ["<program root>", "<thread root>"]   # main thread, application thread
    summary = [p for p in profiles if p[2]]
    threads = [p for p in profiles if not p[2]]
    assert len(summary) == 1 and len(threads) == 16
    assert {(p[0], p[1]) for p in threads} == {(r, t) for r in range(4) for t in range(4)}
    for rank, thread, _, at0, elsewhere in threads:
        # the global context (ctxId 0) holds the aggregate of the roots of this thread
        ours = sum(inc.get((r, rank, thread), 0.0) for r in roots)
        assert ours == pytest.approx(at0.get(execution, 0.0), rel=1e-12, abs=1e-15)
        # raw (point) values over all contexts, listed in meta.db or not, = our exclusive total
        ours_e = sum(v for k, v in exc.items() if k[1:] == (rank, thread))
        assert ours_e == pytest.approx(elsewhere.get(point, 0.0), rel=1e-12, abs=1e-15)
    # the summary profile's sum statistic (statMetricId = propMetricId here) is the grand total
    grand = sum(v for k, v in inc.items() if k[0] in roots)
    assert grand == pytest.approx(summary[0][3][execution], rel=1e-12)
    assert grand == pytest.approx(0.325975, abs=1e-9)  # 4 ranks x 4 threads, seconds


def test_v4_cct_db_holds_the_profile_db_values(hpc):
    ctx, met, prof, val = H.read_cct_db(hpc / V4 / "cct.db")
    pdb = H.read_profile_db(hpc / V4 / "profile.db")
    a = {(int(c), int(m), int(p)): v for c, m, p, v in zip(ctx, met, prof, val)}
    b = {}
    for p in range(len(pdb.ctx)):
        if pdb.summary[p]:
            continue
        for c, m, v in zip(pdb.ctx[p], pdb.metric[p], pdb.value[p]):
            b[(int(c), int(m), p)] = v
    assert len(a) == len(b) > 800
    assert a == b


def test_legacy_and_v4_cpi_agree(exps):
    old, new = exps[LEGACY], exps[V4]
    # the same naming, roots and metrics, so the two can be combined into one experiment
    for e in (old, new):
        assert "<program root>->main->MPI_Finalize" in e.tree
        assert e.tree.children("<program root>") == ["<program root>->main"]
    assert old.metrics == new.metrics
    both = combine([at_point(old, {"version": 1}), at_point(new, {"version": 2})])
    assert len(both.points()) == 2
    # They are different runs (2017 MVAPICH2/PSM vs 2023 Open MPI/UCX, different lengths), so
    # totals differ; what must hold in each: main is the whole program root, MPI_Finalize is
    # under main, and per-rank values add up to the total.
    for e in (old, new):
        inc = per_location(e, "CPUTIME (I)")
        main_total = sum(v for k, v in inc.items() if k[0] == "<program root>->main")
        root_total = sum(v for k, v in inc.items() if k[0] == "<program root>")
        assert main_total == pytest.approx(root_total, rel=1e-12)
        fin = sum(v for k, v in inc.items() if k[0] == "<program root>->main->MPI_Finalize")
        assert 0 < fin <= main_total
        agg = e.reduce_locations("sum").data
        assert agg[(agg["callpath"] == "<program root>") & (agg["metric"] == "CPUTIME (I)")]["value"].sum() == \
            pytest.approx(root_total, rel=1e-12)
    assert sum(v for k, v in per_location(old, "CPUTIME (I)").items() if k[0] == "<program root>") == \
        pytest.approx(3.998242, abs=1e-9)


# ---- allgather: 10 ranks x 2 threads --------------------------------------------------------------

def test_allgather_ranks_and_threads(hpc, exps):
    e = exps[ALLGATHER]
    assert e.summary()["locations"] == {"rank": 10, "thread": 2}
    inc = per_location(e, "CPUTIME (I)")
    roots = e.tree.roots()
    assert set(roots) == {"<program root>", "<partial call paths>"}
    files = sorted(glob.glob(str(hpc / ALLGATHER / "*.metric-db")))
    assert len(files) == 20
    for f in files:
        rank, thread, mat = metric_db(f)
        ours = sum(inc.get((r, rank, thread), 0.0) for r in roots)
        assert ours == pytest.approx(mat[0, 0] * 1e-6, rel=1e-12, abs=0)
        if thread == 1:  # the helper threads recorded nothing
            assert not mat.any()
            assert all(v == 0 for k, v in inc.items() if k[1:] == (rank, 1))
    _, top, nodes = xml_values(hpc / ALLGATHER / "experiment.xml")
    assert sum(v for k, v in inc.items() if k[0] in roots) == pytest.approx(top["2"] * 1e-6, rel=XML_REL)
    # the Allgather call in the benchmark loop, against its XML node (PF 238, called at line 97)
    path = "<program root>->main->loop at osu_allgather.c:86->loop at osu_allgather.c:95->PMPI_Allgather"
    assert sum(v for k, v in inc.items() if k[0] == path) == pytest.approx(nodes[238]["2"] * 1e-6, rel=XML_REL)


# ---- flash4: a lone experiment.xml ----------------------------------------------------------------

def test_flash4_xml_alone(hpc, exps):
    e = exps[FLASH]
    assert not e.has_locations and e.parameters == ()
    root, top, nodes = xml_values(hpc / FLASH)
    inc = per_location(e, "CPUTIME (I)")
    assert inc[("<program root>", None, None)] == pytest.approx(top["2"] * 1e-6, rel=1e-12)
    # the first procedure below the program root (PF i=4, reached through call site C i=3)
    procs = {p.get("i"): p.get("n") for p in root.iter("Procedure")}
    pf4 = next(x for x in root.iter("PF") if x.get("i") == "4")
    name = procs[pf4.get("n")]
    assert inc[(f"<program root>->{name}", None, None)] == pytest.approx(nodes[4]["2"] * 1e-6, rel=1e-12)
    loops = [p for p in e.tree.paths if e.tree.name(p).startswith("loop at ")]
    assert len(loops) > 100 and all(":" in e.tree.name(p) for p in loops)
    # only the Sum statistic is read; Mean, StdDev, ... are listed as skipped
    assert "CPUTIME (usec):Mean (I)" in e.meta["hpctoolkit"]["skipped_metrics"]


TOY = """<?xml version="1.0"?>
<HPCToolkitExperiment version="2.0">
<Header n="toy"><Info/></Header>
<SecCallPathProfile i="0" n="toy">
<SecHeader>
  <MetricTable>
    <Metric i="0" n="PAPI_TOT_CYC:Sum (I)" v="derived-incr" t="inclusive" partner="1"/>
    <Metric i="1" n="PAPI_TOT_CYC:Sum (E)" v="derived-incr" t="exclusive" partner="0"/>
  </MetricTable>
  <MetricDBTable></MetricDBTable>
  <FileTable><File i="1" n="./src/toy.c"/></FileTable>
  <ProcedureTable><Procedure i="20" n="main"/><Procedure i="21" n="foo"/><Procedure i="22" n="bar"/></ProcedureTable>
</SecHeader>
<SecCallPathProfileData>
<M n="0" v="101"/>
<PF i="2" n="20" f="1" l="1"><M n="0" v="101"/><M n="1" v="8"/>
  <S i="3" l="5"><M n="0" v="7"/><M n="1" v="7"/></S>
  <C i="4" l="10"><M n="0" v="20"/>
    <PF i="5" n="21" f="1" l="30"><M n="0" v="20"/><S i="6" l="31"><M n="0" v="20"/></S></PF></C>
  <C i="7" l="20"><M n="0" v="30"/>
    <PF i="8" n="21" f="1" l="30"><M n="0" v="30"/><S i="9" l="31"><M n="0" v="30"/></S></PF></C>
  <L i="10" l="40" f="1"><M n="0" v="43"/>
    <S i="11" l="41"><M n="0" v="3"/></S>
    <C i="12" l="0"><M n="0" v="15"/><PF i="13" n="22"><M n="0" v="15"/><S i="14" l="0"><M n="0" v="15"/></S></PF></C>
    <C i="15" l="0"><M n="0" v="25"/><PF i="16" n="22"><M n="0" v="25"/><S i="17" l="0"><M n="0" v="25"/></S></PF></C>
  </L>
</PF>
</SecCallPathProfileData>
</SecCallPathProfile>
</HPCToolkitExperiment>
"""


def test_naming_and_merging_on_a_hand_made_tree(tmp_path):
    x = tmp_path / "experiment.xml"
    x.write_text(TOY)
    e = H.read(x)
    inc = {k[0]: v for k, v in per_location(e, "PAPI_TOT_CYC (I)").items()}
    exc = {k[0]: v for k, v in per_location(e, "PAPI_TOT_CYC (E)").items()}
    loop = "main->loop at toy.c:40"
    # foo is called from two lines of main: both keep their call site; bar is called twice from
    # unknown lines (0) of the loop: one frame holding both
    assert inc == {"main": 101, "main->toy.c:5": 7, "main->foo@toy.c:10": 20, "main->foo@toy.c:10->toy.c:31": 20,
                   "main->foo@toy.c:20": 30, "main->foo@toy.c:20->toy.c:31": 30, loop: 43,
                   loop + "->toy.c:41": 3, loop + "->bar": 40, loop + "->bar->toy.c:0": 40}
    # own cost: statements hold their line; main keeps the 1 that none of its children holds
    assert exc == {"main": 1, "main->toy.c:5": 7, "main->foo@toy.c:10->toy.c:31": 20,
                   "main->foo@toy.c:20->toy.c:31": 30, loop + "->toy.c:41": 3, loop + "->bar->toy.c:0": 40}
    assert e.tree.name("main->foo@toy.c:10") == "foo@toy.c:10"
    assert e.tree.children(loop) == [loop + "->toy.c:41", loop + "->bar"]
    assert e.metrics["PAPI_TOT_CYC (I)"] .kind == "count" and e.metrics["PAPI_TOT_CYC (I)"].unit == ""
    assert not e.has_locations


def test_frame_kinds_are_recorded(tmp_path):
    """The toy database with load modules, and bar called from two unknown lines (0) of the loop,
    once in libA and once in libB: two procedures, not one frame (which the flat view would take
    for one procedure).  What each frame is, by hand from the XML tags: PF procedure (its
    Procedure name, file and module), L loop, S statement."""
    from perfcast.experiment import Frame

    x = tmp_path / "experiment.xml"
    x.write_text(TOY.replace('<FileTable>', '<LoadModuleTable><LoadModule i="30" n="/opt/toy"/>'
                             '<LoadModule i="31" n="/lib/libA.so"/><LoadModule i="32" n="/lib/libB.so"/>'
                             '</LoadModuleTable><FileTable>')
                 .replace('<PF i="2" n="20"', '<PF i="2" lm="30" n="20"')
                 .replace('<PF i="13" n="22"', '<PF i="13" lm="31" n="22"')
                 .replace('<PF i="16" n="22"', '<PF i="16" lm="32" n="22"'))
    e = H.read(x)
    loop = "main->loop at toy.c:40"
    kinds = {p: e.tree.frame(p) for p in e.tree.paths}
    P = lambda n, w, site="": Frame("procedure", n, w, site)  # noqa: E731
    S = Frame("statement")
    # foo's two calling contexts record their <C> line in main (bar's lines are 0: unknown)
    assert kinds == {
        "main": P("main", "toy.c [toy]"), "main->toy.c:5": S,
        "main->foo@toy.c:10": P("foo", "toy.c [toy]", "toy.c:10"), "main->foo@toy.c:10->toy.c:31": S,
        "main->foo@toy.c:20": P("foo", "toy.c [toy]", "toy.c:20"), "main->foo@toy.c:20->toy.c:31": S,
        loop: Frame("loop"), loop + "->toy.c:41": S,
        loop + "->bar (toy.c [libA.so])": P("bar", "toy.c [libA.so]"), loop + "->bar (toy.c [libA.so])->toy.c:0": S,
        loop + "->bar (toy.c [libB.so])": P("bar", "toy.c [libB.so]"), loop + "->bar (toy.c [libB.so])->toy.c:0": S}
    exc = {k[0]: v for k, v in per_location(e, "PAPI_TOT_CYC (E)").items()}
    assert exc[loop + "->bar (toy.c [libA.so])->toy.c:0"] == 15 and exc[loop + "->bar (toy.c [libB.so])->toy.c:0"] == 25


def test_every_frame_of_the_real_databases_has_a_kind(exps):
    """Legacy and v4: every frame is a procedure, loop or statement; loops are the frames named
    'loop at', statements are leaves (calls from a line hang under the line's procedure or loop)."""
    for name in (LEGACY, V4, ALLGATHER, FLASH):
        t = exps[name].tree
        kinds = {p: t.frame(p) for p in t.paths}
        assert all(k is not None for k in kinds.values()), name
        assert all((k.kind == "loop") == t.name(p).startswith("loop at") for p, k in kinds.items()), name
        assert all(not t.children(p) for p, k in kinds.items() if k.kind == "statement"), name
        assert {k.kind for k in kinds.values()} >= {"procedure", "statement"}, name
        assert all(k.procedure and t.name(p).startswith(k.procedure) for p, k in kinds.items()
                   if k.kind == "procedure"), name


def test_sibling_names_are_unique(exps):
    for name in (LEGACY, V4, ALLGATHER, FLASH):
        t = exps[name].tree
        for p in t.paths:
            names = [t.name(c) for c in t.children(p)]
            assert len(names) == len(set(names))
    # flash4: _gfortrani_list_formatted_read is called from several lines of one loop
    t = exps[FLASH].tree
    assert sum(1 for p in t.paths if t.name(p).startswith("_gfortrani_list_formatted_read@eos_initHelmholtz.F90:")) >= 4


def test_reading_is_deterministic(hpc, exps):
    again = H.read(hpc / FLASH)
    assert again.tree == exps[FLASH].tree and again.equals(exps[FLASH])


# ---- the registry, the store, progress ---------------------------------------------------------------

def test_detect_and_load(hpc):
    for p in (LEGACY, V4, ALLGATHER, FLASH, f"{V4}/meta.db", f"{LEGACY}/experiment.xml"):
        assert detect(hpc / p).name == "hpctoolkit"
    e = load([hpc / LEGACY, hpc / V4], points=[{"p": 4}, {"p": 16}])
    assert e.parameters == ("p",) and len(e.points()) == 2


@pytest.mark.parametrize("name", [LEGACY, V4])
def test_store_round_trip(tmp_path, exps, name):
    dest = store.write(exps[name], tmp_path / "x.perfcast")
    assert store.read(dest).equals(exps[name])


def test_progress_is_reported(hpc):
    calls = []
    H.read(hpc / LEGACY, ReadOptions(progress=lambda d, t, label: calls.append((d, t, label))))
    assert (4, 4, "metric-db files") in calls
    calls.clear()
    H.read(hpc / V4, ReadOptions(progress=lambda d, t, label: calls.append((d, t, label))))
    assert (17, 17, "profile.db profiles") in calls


# ---- bad input: one PerfcastError naming the file and the place ------------------------------------

def _copy(hpc, name, tmp_path) -> Path:
    return Path(shutil.copytree(hpc / name, tmp_path / name))


def test_missing_rank_file_is_warned(hpc, tmp_path):
    # rank 1's metric-db file removed: read as a 3-rank run without a word (totals changed)
    db = _copy(hpc, LEGACY, tmp_path)
    files = sorted(db.glob("*.metric-db"))
    ranks = [int(f.name.split("-")[1]) for f in files]
    assert ranks == [0, 1, 2, 3]
    assert not any("no profile of rank" in w for w in H.read(db).meta.get("warnings", []))
    files[1].unlink()
    exp = load([db])
    assert sorted(exp.data["rank"].unique()) == [0, 2, 3]
    assert exp.meta["hpctoolkit"]["ranks_missing"] == [1]
    assert any(w.startswith(f"{db}: the database has no profile of rank(s) 1 (its ranks run 0..3)")
               for w in exp.meta["warnings"]), exp.meta.get("warnings")


def test_truncated_metric_db(hpc, tmp_path):
    db = _copy(hpc, LEGACY, tmp_path)
    f = sorted(db.glob("*.metric-db"))[2]
    f.write_bytes(f.read_bytes()[:500])
    with pytest.raises(PerfcastError) as err:
        H.read(db)
    assert err.value.path == str(f) and "offset 32" in err.value.where and "truncated" in err.value.message


def test_metric_db_with_wrong_magic(hpc, tmp_path):
    db = _copy(hpc, LEGACY, tmp_path)
    f = sorted(db.glob("*.metric-db"))[0]
    f.write_bytes(b"X" * 16 + f.read_bytes()[16:])
    with pytest.raises(PerfcastError) as err:
        H.read(db)
    assert err.value.path == str(f) and err.value.where == "offset 0, magic"


def test_truncated_profile_db(hpc, tmp_path):
    db = _copy(hpc, V4, tmp_path)
    f = db / "profile.db"
    f.write_bytes(f.read_bytes()[:9000])
    with pytest.raises(PerfcastError) as err:
        H.read(db)
    assert err.value.path == str(f) and "footer" in err.value.where and "truncated" in err.value.message


def test_profile_db_pointer_past_the_end(hpc, tmp_path):
    db = _copy(hpc, V4, tmp_path)
    f = db / "profile.db"
    raw = bytearray(f.read_bytes())
    p_prof, _, sz = struct.unpack_from("<QIB", raw, struct.unpack_from("<Q", raw, 0x18)[0])
    struct.pack_into("<Q", raw, p_prof + 3 * sz + 8, len(raw) + 4096)   # profile 3: pValues
    f.write_bytes(bytes(raw))
    with pytest.raises(PerfcastError) as err:
        H.read(db)
    assert err.value.path == str(f)
    assert err.value.where == f"offset {len(raw) + 4096}, profile 3 pValues"


def test_meta_db_with_wrong_magic(hpc, tmp_path):
    db = _copy(hpc, V4, tmp_path)
    f = db / "meta.db"
    f.write_bytes(b"HPCTOOLKIX" + f.read_bytes()[10:])
    with pytest.raises(PerfcastError) as err:
        H.read(db, ReadOptions())
    assert err.value.path == str(f) and err.value.where == "offset 0, magic"


def test_experiment_xml_that_is_not_xml(hpc, tmp_path):
    db = _copy(hpc, LEGACY, tmp_path)
    x = db / "experiment.xml"
    x.write_text("<HPCToolkitExperiment version=\"2.0\">\n<Header n=\"cpi\">\n</Oops>\n")
    with pytest.raises(PerfcastError) as err:
        H.read(db)
    assert err.value.path == str(x) and err.value.where == "3"
    x.write_bytes(b"\x00\x01binary junk")
    with pytest.raises(PerfcastError) as err:
        H.read(x)
    assert err.value.path == str(x)


def test_directory_without_a_database(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(PerfcastError) as err:
        H.read(tmp_path)
    assert err.value.path == str(tmp_path) and "no HPCToolkit database" in err.value.message
    with pytest.raises(PerfcastError):
        load([tmp_path], format="hpctoolkit")


def test_cli_reports_bad_input_in_one_line(hpc, tmp_path, capsys):
    db = _copy(hpc, V4, tmp_path)
    (db / "meta.db").write_bytes(b"HPCTOOLKITmeta\x04\x00" + b"\x00" * 8)
    rc = main(["import", str(db), "--format", "hpctoolkit", "-o", str(tmp_path / "x.perfcast")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "meta.db" in err and "Traceback" not in err
    rc = main(["import", str(hpc / LEGACY), "-o", str(tmp_path / "ok.perfcast")])
    assert rc == 0 and store.read(tmp_path / "ok.perfcast").equals(load([hpc / LEGACY]))

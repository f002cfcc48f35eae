"""Calling-context views: by hand on small trees, and against the databases' own inclusive and
exclusive values (pycubexr CSV ground truth for CUBE; HPCToolkit's stored (I) metrics)."""

import tarfile
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from perfcast import CallTree, Experiment, Metric, PerfcastError
from perfcast.analysis.views import bottom_up, flat, hot_path, profile, top_down
from perfcast.io import load

from test_experiment import small

# recursion: main -> f -> g -> f ; main -> h -> g   (exclusive costs)
REC = {"main": 1.0, "main->f": 2.0, "main->f->g": 4.0, "main->f->g->f": 8.0, "main->h": 16.0, "main->h->g": 32.0}


def recursive():
    rows = [dict(callpath=c, metric="time", value=v) for c, v in REC.items()]
    return Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], CallTree.from_paths(REC))


def test_top_down_by_hand():
    prof = profile(small(ranks=True), at={"p": 4})
    # p = 4: rank r holds v * (r + 1); summed over 4 ranks -> 10 v (both repetitions equal)
    assert prof.total == pytest.approx(10 * 10)
    td = top_down(prof)
    got = {n["path"]: (n["inclusive"], n["exclusive"], n["depth"]) for n in td["nodes"]}
    assert got == {"main": (100.0, 10.0, 0), "main->a": (50.0, 20.0, 1), "main->a->b": (30.0, 30.0, 2),
                   "main->c": (40.0, 40.0, 1)}
    # siblings sorted by inclusive cost: a (50) before c (40); by exclusive: c (40) before a (20)
    assert [n["path"] for n in td["nodes"]] == ["main", "main->a", "main->a->b", "main->c"]
    assert [n["path"] for n in top_down(prof, sort="exclusive")["nodes"]] == ["main", "main->c", "main->a",
                                                                               "main->a->b"]
    # threshold 45 %: c (40 %) hidden; b (30 %) hidden under a
    th = top_down(prof, threshold=45)
    assert [n["path"] for n in th["nodes"]] == ["main", "main->a"] and th["hidden"] == 2
    assert top_down(prof, depth=0)["hidden"] == 3
    assert td["nodes"][1]["inclusive_pct"] == pytest.approx(50.0)


def test_ranks_and_repetitions_reduction():
    e = small(ranks=True)
    # mean over ranks: p = 4 -> v * (1 + 2 + 3 + 4) / 4
    assert profile(e, "time", {"p": 4}, "mean").table.at["main->c", "exclusive"] == pytest.approx(4 * 2.5)
    assert profile(e, "time", {"p": 4}, "max").table.at["main->a", "inclusive"] == pytest.approx(5 * 4)
    # repetitions: v * p + rep averaged over rep 0, 1
    assert profile(small(), "time", {"p": 2}).table.at["main->a", "inclusive"] == pytest.approx(5 * 2 + 2 * 0.5)
    with pytest.raises(PerfcastError, match="2 points"):
        profile(e)


def test_bottom_up_and_flat_with_recursion():
    prof = profile(recursive())
    fl = {r["name"]: r for r in flat(prof)["rows"]}
    # f: exclusive 2 + 8; inclusive only the outermost f (2 + 4 + 8), not the nested one again
    assert (fl["f"]["exclusive"], fl["f"]["inclusive"], fl["f"]["contexts"]) == (10.0, 14.0, 2)
    assert (fl["g"]["exclusive"], fl["g"]["inclusive"]) == (36.0, 12.0 + 32.0)
    assert fl["main"]["inclusive"] == prof.total == 63.0
    bu = {r["name"]: r for r in bottom_up(prof)["rows"]}
    g = bu["g"]
    callers = {c["name"]: c for c in g["callers"]}
    assert set(callers) == {"f", "h"}
    assert (callers["h"]["exclusive"], callers["h"]["inclusive"]) == (32.0, 32.0)
    assert (callers["f"]["exclusive"], callers["f"]["inclusive"]) == (4.0, 12.0)
    # expandable upward: g <- f <- main, g <- h <- main
    assert [c["name"] for c in callers["f"]["callers"]] == ["main"]
    f_callers = {c["name"]: c for c in bu["f"]["callers"]}
    assert f_callers["g"]["exclusive"] == 8.0 and f_callers["main"]["exclusive"] == 2.0
    assert f_callers["g"]["inclusive"] == 0.0  # the nested f adds nothing to f's inclusive cost
    # sorted by exclusive cost
    assert [r["name"] for r in bottom_up(prof)["rows"]] == ["g", "h", "f", "main"]
    assert bottom_up(prof, depth=1)["rows"][0]["callers"][0]["callers"] == []


def test_hot_path():
    prof = profile(recursive())
    # main (63) -> h (48 >= 31.5) -> g (32 >= 24): stops at the leaf
    assert [n["path"] for n in hot_path(prof)["nodes"]] == ["main", "main->h", "main->h->g"]
    # from f (14): g holds 12 >= 7 -> f (8 >= 6)
    assert [n["path"] for n in hot_path(prof, "main->f")["nodes"]] == ["main->f", "main->f->g", "main->f->g->f"]
    assert [n["path"] for n in hot_path(prof, "main", 0.8)["nodes"]] == ["main"]  # h has 48/63 < 80 %
    assert hot_path(prof, "h")["nodes"][0]["path"] == "main->h"  # a unique frame name
    with pytest.raises(PerfcastError, match="2 calling contexts"):
        hot_path(prof, "f")
    with pytest.raises(PerfcastError, match="not a callpath"):
        hot_path(prof, "nope")


def test_flat_metric_is_refused():
    d = pd.DataFrame({"callpath": ["f"], "metric": ["t"], "value": [1.0]})
    with pytest.raises(PerfcastError, match="scope 'unknown'"):
        profile(Experiment.from_pandas(d, parameters=[]), "t")


# -- real databases -------------------------------------------------------------------------------
def cube_paths(cubex):
    """cnode id -> callpath, parsed here from the archive's anchor.xml (independently of the reader)."""
    root = ET.fromstring(tarfile.open(cubex).extractfile("anchor.xml").read())
    regions = {r.get("id"): r.findtext("name") for r in root.iter("region")}
    out = {}

    def walk(c, prefix):
        path = (prefix + "->" if prefix else "") + regions[c.get("calleeId")]
        out[int(c.get("id"))] = path
        for k in c.findall("cnode"):
            walk(k, path)

    for c in root.find("program").findall("cnode"):
        walk(c, "")
    assert len(set(out.values())) == len(out)
    return out


@pytest.mark.parametrize("run,cubex,metric", [("time.p4.n2000.x1.r0", "profile.cubex", "time"),
                                              ("blast.p64.r1", "profile.cubex", "time"),
                                              ("blast.p64.r1", "profile.cubex", "PAPI_FP_OPS"),
                                              ("call_tree_test", "call_tree_test.cubex", "time")])
def test_cube_views_match_pycubexr_ground_truth(data_dir, run, cubex, metric):
    d = data_dir / "formats" / "cube" / run
    paths = cube_paths(d / cubex)
    truth = {}
    for scope in ("incl", "excl"):
        csv = pd.read_csv(d / f"{scope}.csv", skipinitialspace=True)
        s = csv.groupby("Cnode ID")[metric].sum()  # summed over all locations
        truth[scope] = {paths[i]: v for i, v in s.items()}
    prof = profile(load([d / cubex]), metric, ranks="sum")
    td = {n["path"]: n for n in top_down(prof)["nodes"]}
    assert set(td) <= set(paths.values())
    checked = 0
    for path in paths.values():
        inc, exc = truth["incl"][path], truth["excl"][path]
        node = td.get(path)
        if node is None:  # not in the profile: no value stored anywhere in its subtree
            assert inc == 0 and exc == 0
            continue
        # the CSVs print 6 significant digits
        assert node["inclusive"] == pytest.approx(inc, rel=2e-5, abs=1e-5)
        assert node["exclusive"] == pytest.approx(exc, rel=2e-5, abs=1e-5)
        checked += 1
    assert checked >= 15
    roots = [p for p in paths.values() if "->" not in p]
    assert prof.total == pytest.approx(sum(truth["incl"][r] for r in roots), rel=2e-5)


@pytest.mark.parametrize("db", ["hpctoolkit-cpi-database", "hpctoolkit-allgather-database",
                                "hpctoolkit-cpi-v4-database"])
def test_hpctoolkit_views_match_stored_inclusive_values(data_dir, db):
    exp = load([data_dir / "formats" / "hpctoolkit" / db])
    # the views' inclusive costs are computed from the exclusive metric alone ...
    only_exc = exp.select(metric="CPUTIME (E)")
    prof = profile(only_exc, "CPUTIME (E)", ranks="sum")
    # ... and must equal HPCToolkit's own inclusive metric, summed over ranks and threads by hand
    d = exp.data[exp.data["metric"] == "CPUTIME (I)"]
    stored = d.groupby(d["callpath"].astype(str))["value"].sum()
    td = {n["path"]: n for n in top_down(prof)["nodes"]}
    assert len(td) > 10
    for path, node in td.items():
        assert node["inclusive"] == pytest.approx(stored.get(path, 0.0), rel=1e-9, abs=1e-9)
    roots = [p for p in exp.tree.roots() if p in stored.index]
    assert prof.total == pytest.approx(stored[roots].sum(), rel=1e-9)
    # flat view: the root procedures (<program root>, and <partial call paths> when unwinding
    # failed) together hold the total
    fl = {r["name"]: r["inclusive"] for r in flat(prof)["rows"]}
    assert sum(fl[exp.tree.name(r)] for r in roots) == pytest.approx(prof.total)


def test_deep_trees_do_not_hit_the_recursion_limit():
    n = 1200  # deeper than Python's default recursion limit (1000)
    nodes = [(f"n{i}", f"n{i - 1}" if i else None, "rec" if i % 2 else f"f{i}") for i in range(n)]
    rows = [dict(callpath=f"n{i}", metric="time", value=1.0) for i in range(n)]
    e = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], CallTree(nodes))
    prof = profile(e)
    assert prof.total == n
    td = top_down(prof)
    assert len(td["nodes"]) == n and td["nodes"][-1]["depth"] == n - 1
    assert len(hot_path(prof)["nodes"]) == n  # every child holds all but 1 of its parent's cost
    rec = {r["name"]: r for r in bottom_up(prof, depth=2)["rows"]}["rec"]
    # n / 2 contexts of "rec"; inclusive counts only the outermost (n1: n - 1)
    assert (rec["contexts"], rec["exclusive"], rec["inclusive"]) == (n // 2, n // 2, n - 1)
    assert len(bottom_up(prof, depth=2)["rows"]) == n // 2 + 1


def test_rank_absent_from_a_tidy_table_is_missing_and_said(tmp_path, capsys):
    # 4 ranks at p = 4; main->solve has no row for rank 3 (inclusive times, seconds)
    from perfcast.cli import main
    import json

    solve = {0: 6.0, 1: 8.0, 2: 10.0}
    rows = ["p,callpath,metric,rank,value,scope"]
    rows += [f"4,main,time,{r},20,inclusive" for r in range(4)]
    rows += [f"4,main->solve,time,{r},{v},inclusive" for r, v in solve.items()]
    f = tmp_path / "t.csv"
    f.write_text("\n".join(rows) + "\n")
    for ranks, want in (("mean", sum(solve.values()) / 3), ("sum", sum(solve.values())),
                        ("min", 6.0), ("max", 10.0)):
        assert main(["view", str(f), "--mode", "flat", "--ranks", ranks, "--json"]) == 0
        out = capsys.readouterr()
        item = json.loads(out.out)["items"][0]
        got = {r["name"]: r["inclusive"] for r in item["rows"]}
        # over the 3 ranks present (the mean was 24 / 4 = 6: the absent rank counted as 0)
        assert got["solve"] == pytest.approx(want), ranks
        assert item["missing_ranks"] == [{"metric": "time", "callpath": "main->solve", "missing": 1,
                                          "expected": 4, "points": 1, "files": [str(f)]}]
    assert main(["view", str(f), "--mode", "flat", "--ranks", "sum"]) == 0
    warn = [l for l in capsys.readouterr().err.splitlines() if "absent" in l]
    assert len(warn) == 1 and "main->solve time: 1 of 4" in warn[0]
    # a sparse profile keeps its meaning: a rank without the callpath did not run it (a 0 in the mean)
    e = load([str(f)])
    e.meta.pop("locations")
    assert profile(e, "time", None, "mean").table.at["main->solve", "inclusive"] == pytest.approx(24 / 4)
    assert top_down(profile(e, "time", None, "mean"))["missing_ranks"] == []


def test_whole_run_timer_in_parts_is_the_per_column_rule():
    """views.whole_run_timer, and whole_run_of over the timers split in two parts (the streamed
    model's ranges), against the rule written out column by column: the first timer measured at
    every point and at least the largest of the others there (a point where no other is measured
    holding nothing); random small tables with ties, negatives and gaps."""
    import numpy as np
    import pandas as pd

    from perfcast.analysis.views import timer_extremes, whole_run_of, whole_run_timer

    def rule(wide):
        if wide.shape[1] < 2:
            return None
        for cp in wide.columns:
            others = wide.drop(columns=[cp]).max(axis=1)
            if wide[cp].notna().all() and bool((wide[cp] >= others * (1 - 1e-9)).all()):
                return cp
        return None

    rng = np.random.default_rng(2)
    found = 0
    for _ in range(3000):
        P, C = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        v = rng.integers(0, 4, (P, C)).astype(float) * rng.choice([1, -1])
        v[rng.random((P, C)) < 0.15] = np.nan
        w = pd.DataFrame(v, index=pd.Index(range(P), name="p"), columns=[f"c{j}" for j in range(C)]).dropna(how="all")
        if w.empty:
            continue
        want = rule(w)
        found += want is not None
        k = int(rng.integers(0, C + 1))
        split = [timer_extremes(w.iloc[:, :k].dropna(how="all")), timer_extremes(w.iloc[:, k:].dropna(how="all"))]
        assert whole_run_timer(w) == want == whole_run_of(split), w
    assert found > 500


def test_flat_and_bottom_up_max_min_over_ranks_of_each_ranks_own_sum():
    """A procedure in two contexts, rank 0 busy in one, rank 1 in the other: its max over ranks is
    10 (what each rank spent in it), not 10 + 10 (each context's max summed)."""
    paths = {"main": None, "main->a": None, "main->a->f": None, "main->b": None, "main->b->f": None}
    per_rank = {0: {"main": 1.0, "main->a": 0.0, "main->a->f": 10.0, "main->b": 0.0, "main->b->f": 0.0},
                1: {"main": 1.0, "main->a": 0.0, "main->a->f": 0.0, "main->b": 0.0, "main->b->f": 10.0}}
    rows = [dict(callpath=c, metric="time", value=v, rank=r) for r, vs in per_rank.items() for c, v in vs.items()]
    exp = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], CallTree.from_paths(paths))
    for ranks, f_cost, total in (("max", 10.0, 11.0), ("min", 10.0, 11.0), ("sum", 20.0, 22.0), ("mean", 10.0, 11.0)):
        prof = profile(exp, "time", ranks=ranks)
        assert prof.total == total
        fl = {r["name"]: r for r in flat(prof)["rows"]}
        assert (fl["f"]["exclusive"], fl["f"]["inclusive"], fl["f"]["contexts"]) == (f_cost, f_cost, 2)
        assert fl["f"]["exclusive_pct"] <= 100.0
        bu = {r["name"]: r for r in bottom_up(prof)["rows"]}
        assert bu["f"]["exclusive"] == f_cost
        callers = {c["name"]: c["exclusive"] for c in bu["f"]["callers"]}
        # one context per caller: the per-context reduction (rank 0's 10 under a, rank 1's under b)
        each = {"sum": 10.0, "mean": 5.0, "max": 10.0, "min": 0.0}[ranks]
        assert callers == {"a": each, "b": each}
        assert bu["f"]["callers"][0]["callers"][0]["exclusive"] == callers[bu["f"]["callers"][0]["name"]]


def test_hpctoolkit_flat_max_min_match_hatchet_per_rank_sums(data_dir):
    """cpi (4 ranks): the statements (<S>) whose nearest enclosing <PF> in experiment.xml is
    '<unknown procedure>' (of libpsm_infinipath), summed per rank from Hatchet's own dataframe of
    the same database (time in us, per node id), give that procedure's exclusive max, min and
    mean over ranks in the flat view."""
    db = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-cpi-database"
    gf = data_dir / "formats" / "hatchet" / "hpctoolkit-cpi-graphframe.csv"
    root = ET.parse(db / "experiment.xml").getroot()
    procs = {p.get("i"): p.get("n") for p in root.iter("Procedure")}
    nodes = []

    def walk(el, proc):
        for ch in el:
            pr = procs[ch.get("n")] if ch.tag == "PF" else proc
            if ch.tag == "S" and pr == "<unknown procedure>":
                nodes.append(int(ch.get("i")))
            walk(ch, pr)
    walk(root.find(".//SecCallPathProfileData"), None)
    hat = pd.read_csv(gf)
    per_rank = hat[hat["nid"].isin(nodes)].groupby("rank")["time"].sum() / 1e6
    assert len(per_rank) == 4 and len(nodes) >= 5
    exp = load([db]).select(metric="CPUTIME (E)")
    for ranks in ("max", "min", "mean"):
        fl = {r["name"]: r for r in flat(profile(exp, "CPUTIME (E)", ranks=ranks))["rows"]}
        assert fl["<unknown procedure>"]["exclusive"] == pytest.approx(per_rank.agg(ranks), rel=1e-9)


def hpctoolkit_procedure_truth(db):
    """HPCToolkit's own per-procedure costs, read straight from the database (no perfcast code):
    procedure = (<Procedure> name, <File>, <LoadModule>) of each <PF>; its exclusive cost = the sum
    of HPCToolkit's exclusive metric at its <PF> nodes (HPCToolkit's exclusive of a procedure frame
    holds its statements and loops, not its callees); its inclusive cost = the sum of the inclusive
    metric at the <PF> nodes with no enclosing <PF> of the same procedure.  Values are the
    metric-db files (big-endian f64 after a 32-byte header, row = node id - 1) summed over the
    threads, or else the XML's ':Sum' summary values; in seconds (the metric is in usec)."""
    import glob

    xml = db / "experiment.xml" if db.is_dir() else db
    root = ET.parse(xml).getroot()
    head = root.find(".//SecHeader")
    procs = {e.get("i"): e.get("n") for e in head.iter("Procedure")}
    files = {e.get("i"): e.get("n") for e in head.iter("File")}
    mods = {e.get("i"): e.get("n") for e in head.iter("LoadModule")}
    dbs = sorted(glob.glob(str(xml.parent / "*.metric-db"))) if db.is_dir() else []
    if dbs:
        tot = 0.0
        for f in dbs:
            raw = open(f, "rb").read()
            n, m = np.frombuffer(raw, ">u4", 2, 24)
            tot = tot + np.frombuffer(raw, ">f8", int(n * m), 32).reshape(int(n), int(m))
        cols = {e.get("t"): int(e.get("db-id")) for e in head.iter("MetricDB")}

        def value(el, t):
            return float(tot[int(el.get("i")) - 1, cols[t]])
    else:
        ids = {e.get("n"): e.get("i") for e in head.iter("Metric")}
        want = {"inclusive": ids["CPUTIME (usec):Sum (I)"], "exclusive": ids["CPUTIME (usec):Sum (E)"]}

        def value(el, t):
            return sum(float(m.get("v")) for m in el.findall("M") if m.get("n") == want[t])
    exc, inc = {}, {}

    def walk(el, stack, module):
        for ch in el:
            if ch.tag == "M":
                continue
            mod = mods.get(ch.get("lm"), module)
            if ch.tag == "PF":
                key = (procs[ch.get("n")], files.get(ch.get("f")), mod)
                exc[key] = exc.get(key, 0.0) + value(ch, "exclusive") / 1e6
                inc[key] = inc.get(key, 0.0) + (0.0 if key in stack else value(ch, "inclusive") / 1e6)
                walk(ch, stack | {key}, mod)
            else:
                walk(ch, stack, mod)
    walk(root.find(".//SecCallPathProfileData"), frozenset(), None)
    return exc, inc


def hpctoolkit_callers_truth(db, depth, ranks="sum"):
    """HPCToolkit's Callers View read straight from the database (no perfcast code): for each <PF>
    its chain of calling procedures -- the procedure of the nearest enclosing <PF>, that one's, ...
    (through <L>, <S> and <C>: a call from a loop or line of g is a call from g) -- cut after
    ``depth`` callers; a chain (f, g, ...) gets the exclusive metric of f's <PF> nodes with that
    chain and the inclusive metric of those with no enclosing <PF> of f (recursion once), as
    :func:`hpctoolkit_procedure_truth` (procedures named by their <Procedure> name, distinct in
    these databases).  Values per metric-db file (one per rank and thread), combined over the
    files with ``ranks``; the XML's ':Sum' values when the database has no metric-db files (sum
    only).  Returns {chain: (exclusive, inclusive)} in seconds."""
    import glob

    xml = db / "experiment.xml" if db.is_dir() else db
    root = ET.parse(xml).getroot()
    head = root.find(".//SecHeader")
    procs = {e.get("i"): e.get("n") for e in head.iter("Procedure")}
    dbs = sorted(glob.glob(str(xml.parent / "*.metric-db"))) if db.is_dir() else []
    if dbs:
        per = []
        for f in dbs:
            raw = open(f, "rb").read()
            n, m = np.frombuffer(raw, ">u4", 2, 24)
            per.append(np.frombuffer(raw, ">f8", int(n * m), 32).reshape(int(n), int(m)))
        per = np.stack(per)        # files x nodes x metrics
        cols = {e.get("t"): int(e.get("db-id")) for e in head.iter("MetricDB")}

        def value(el, t):
            return per[:, int(el.get("i")) - 1, cols[t]]
    else:
        assert ranks == "sum"
        ids = {e.get("n"): e.get("i") for e in head.iter("Metric")}
        want = {"inclusive": ids["CPUTIME (usec):Sum (I)"], "exclusive": ids["CPUTIME (usec):Sum (E)"]}

        def value(el, t):
            return np.array([sum(float(m.get("v")) for m in el.findall("M") if m.get("n") == want[t])])
    exc, inc = {}, {}

    def walk(el, stack):
        for ch in el:
            if ch.tag == "M":
                continue
            if ch.tag == "PF":
                f = procs[ch.get("n")]
                chain = (f, *reversed(stack[-depth:] if depth else []))
                for i in range(1, len(chain) + 1):
                    exc[chain[:i]] = exc.get(chain[:i], 0.0) + value(ch, "exclusive") / 1e6
                    inc[chain[:i]] = inc.get(chain[:i], 0.0) + (0.0 if f in stack else value(ch, "inclusive") / 1e6)
                walk(ch, [*stack, f])
            else:
                walk(ch, stack)
    walk(root.find(".//SecCallPathProfileData"), [])
    return {k: (float(getattr(np, ranks)(exc[k])), float(getattr(np, ranks)(inc[k]))) for k in exc}


def _chains(rows, up=()):
    """{(f, caller, caller's caller, ...): (exclusive, inclusive)} of a bottom-up view's rows."""
    out = {}
    for r in rows:
        k = (*up, r["name"])
        out[k] = (r["exclusive"], r["inclusive"])
        out.update(_chains(r["callers"], k))
    return out


@pytest.mark.parametrize("db, ranks, rel", [("hpctoolkit-cpi-database", "sum", 1e-9),
                                            ("hpctoolkit-allgather-database", "sum", 1e-9),
                                            ("hpctoolkit-allgather-database", "max", 1e-9),
                                            ("hpctoolkit-cpi-database", "max", 1e-9),
                                            ("flash4-experiment1.xml", "sum", 2e-4)])
def test_hpctoolkit_bottom_up_is_per_procedure_with_calling_procedures(data_dir, db, ranks, rel):
    """The bottom-up view of an HPCToolkit database: one row per procedure and callers that are
    procedures, two levels up, with HPCToolkit's own costs from the raw database
    (:func:`hpctoolkit_callers_truth`), per rank and thread first with --ranks max.  It grouped
    by frame name: the OSU allgather top row '<unknown file> [libpsm_infinipath.so.1.16]:0'
    (13.92 s) merged hundreds of statements of different procedures, and its callers were the
    procedures and loops the statements sat in."""
    path = data_dir / "formats" / "hpctoolkit" / db
    truth = hpctoolkit_callers_truth(path, 2, ranks)
    exp = load([path]).select(metric="CPUTIME (E)")
    prof = profile(exp, "CPUTIME (E)", ranks=ranks)
    got = _chains(bottom_up(prof, depth=2)["rows"])
    # every chain with a cost; a chain of contexts without values (never sampled) may be left out
    assert {k for k, v in truth.items() if v[0] or v[1]} <= set(got) <= set(truth)
    tol = 1e-6 * prof.total * (rel > 1e-9)   # the XML's 6 digits
    for k, (e, i) in ((k, truth[k]) for k in got):
        assert got[k][0] == pytest.approx(e, rel=rel, abs=tol), k
        assert got[k][1] == pytest.approx(i, rel=rel, abs=tol), k
    assert sum(len(k) == 3 for k in truth) >= 5
    # the rows are the flat view's procedures
    fl = {r["name"]: (r["exclusive"], r["inclusive"], r["contexts"]) for r in flat(prof)["rows"]}
    bu = {r["name"]: (r["exclusive"], r["inclusive"], r["contexts"]) for r in bottom_up(prof, depth=0)["rows"]}
    assert set(bu) == set(fl)
    for name, (e, i, n) in fl.items():
        assert bu[name][0] == pytest.approx(e, rel=1e-12, abs=1e-15) and bu[name][2] == n
        assert bu[name][1] == pytest.approx(i, rel=1e-12, abs=1e-15)


def hpctoolkit_call_sites_truth(db, depth):
    """The call sites of HPCToolkit's Callers View read straight from experiment.xml (no perfcast
    code): a <PF> whose parent is a <C> with line l > 0 was called at FILE:l, FILE the base name of
    the <File> of the nearest element at or above the <C> with an ``f`` attribute (the caller's
    file).  A chain (f, g, h, ...) as in :func:`hpctoolkit_callers_truth`; the entry of the caller at
    position i gets the call site of the <PF> at position i - 1 (f's for g, g's for h).  Only <PF>
    nodes with values (an <M> child) count.  Returns {chain: set of "FILE:LINE"}."""
    xml = db / "experiment.xml" if db.is_dir() else db
    root = ET.parse(xml).getroot()
    head = root.find(".//SecHeader")
    procs = {e.get("i"): e.get("n") for e in head.iter("Procedure")}
    files = {e.get("i"): e.get("n").rstrip("/").rsplit("/", 1)[-1] for e in head.iter("File")}
    out: dict = {}

    def walk(el, stack, file):          # stack: [(procedure, its call site)], outermost first
        for ch in el:
            if ch.tag == "M":
                continue
            f = files.get(ch.get("f"), file) if ch.get("f") is not None else file
            if ch.tag == "PF":
                site = None
                if el.tag == "C" and int(el.get("l", "0").split("-")[0] or 0) > 0:
                    site = f"{file}:{int(el.get('l').split('-')[0])}"
                me = (procs[ch.get("n")], site)
                links = [me, *reversed(stack)][:depth + 1]
                for i in range(1, len(links)):
                    chain = tuple(x for x, _ in links[:i + 1])
                    out.setdefault(chain, set())
                    if links[i - 1][1] and ch.find("M") is not None:
                        out[chain].add(links[i - 1][1])
                walk(ch, [*stack, me], f)
            else:
                walk(ch, stack, f)
    walk(root.find(".//SecCallPathProfileData"), [], "<unknown file>")
    return out


def _sites(rows, up=()):
    """{(f, caller, ...): set of call sites} of a bottom-up view's caller entries."""
    out = {}
    for r in rows:
        k = (*up, r["name"])
        if up:
            out[k] = set(r["call_sites"])
        out.update(_sites(r["callers"], k))
    return out


@pytest.mark.parametrize("db", ["hpctoolkit-cpi-database", "hpctoolkit-allgather-database", "flash4-experiment1.xml"])
def test_hpctoolkit_callers_carry_the_call_site_lines(data_dir, db):
    """Each caller entry of the bottom-up view names the line(s) of the caller that make the call,
    as read from experiment.xml's <C> nodes (:func:`hpctoolkit_call_sites_truth`).  The reader
    dropped the <C> nodes' lines (they only named a procedure called from two lines of one caller
    NAME@FILE:LINE), so the Callers View could not say from which line a procedure is called."""
    path = data_dir / "formats" / "hpctoolkit" / db
    truth = hpctoolkit_call_sites_truth(path, 2)
    exp = load([path]).select(metric="CPUTIME (E)")
    got = _sites(bottom_up(profile(exp, "CPUTIME (E)"), depth=2)["rows"])
    assert got and set(got) <= set(truth)
    assert sum(bool(v) for v in got.values()) >= 3
    for k, v in got.items():
        assert v == truth[k], k


def test_call_sites_and_callers_note_in_the_json_output(data_dir, capsys):
    """`perfcast view DB --mode bottom-up --ranks max --json` on the HPCToolkit cpi database: the
    output follows the schema, its caller entries carry experiment.xml's call sites, and since the
    max over ranks of the callers of some entries add up to more than the entry (checked on the
    numbers themselves), ``callers_note`` says so."""
    from conftest import cli_items

    from perfcast.cli import main

    path = data_dir / "formats" / "hpctoolkit" / "hpctoolkit-cpi-database"
    assert main(["view", str(path), "--metric", "CPUTIME (E)", "--mode", "bottom-up", "--ranks", "max",
                 "--depth", "3", "--json"]) == 0
    res = cli_items(capsys.readouterr().out, "view")[0]
    truth = hpctoolkit_call_sites_truth(path, 3)
    got = _sites(res["rows"])
    assert any(got.values()) and all(v == truth[k] for k, v in got.items())

    def over(rows):
        return any(sum(c[s] for c in r["callers"]) > r[s] * (1 + 1e-9) or over(r["callers"])
                   for r in rows for s in ("exclusive", "inclusive") if r["callers"])
    assert over(res["rows"]) and res["callers_note"]


def test_callers_that_add_up_to_more_than_their_row_with_ranks_max_are_said():
    """--ranks max: f's caller entries are each the largest rank's own sum (g: rank 1's 5, main:
    rank 0's 5) and add up to 10, more than f's row (rank 0's or rank 1's 6): said in
    ``callers_note``; --ranks sum (12 = 6 + 6) needs no note."""
    from perfcast.experiment import Frame

    tree = CallTree()
    for path, kind in (("main", Frame("procedure", "main")), ("main->g", Frame("procedure", "g")),
                       ("main->f", Frame("procedure", "f", "", "m.c:3")),
                       ("main->g->f", Frame("procedure", "f", "", "g.c:7"))):
        parent, _, name = path.rpartition("->")
        tree.add(path, parent or None, name, kind)
    vals = {0: {"main->f": 5.0, "main->g->f": 1.0}, 1: {"main->f": 1.0, "main->g->f": 5.0}}
    rows = [dict(callpath=c, metric="time", value=v, rank=r) for r, d in vals.items() for c, v in d.items()]
    rows += [dict(callpath=c, metric="time", value=0.0, rank=r) for r in (0, 1) for c in ("main", "main->g")]
    exp = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], tree)
    mx = bottom_up(profile(exp, ranks="max"), depth=1)
    f = {r["name"]: r for r in mx["rows"]}["f"]
    assert f["exclusive"] == 6.0 and sum(c["exclusive"] for c in f["callers"]) == 10.0
    assert "callers_note" in mx
    assert {c["name"]: c["call_sites"] for c in f["callers"]} == {"main": ["m.c:3"], "g": ["g.c:7"]}
    assert "callers_note" not in bottom_up(profile(exp, ranks="sum"), depth=1)


def test_bottom_up_callers_are_procedures():
    """A constructed tree whose reader recorded what each frame is (procedures f of two modules,
    statements on '<unknown file>:0', a loop of f calling k, a recursive g calling h, which has no
    kind), on two ranks.  By hand, rank 0 (rank 1 holds only 100 in f's statement under g):
    f (libA) exclusive 1 + 2 + 4, inclusive (1 + 2 + 128) + 4; called from main (3; 131) and
    from g (4; 4), not from its statements or loop; k is called from f (libA), not from 'loop at
    a.c:3'; g exclusive 16 + 32, inclusive 116 (the nested g once), called from main and from g
    (32; 0); h <- g <- g <- main.  With --ranks max each entry is the larger rank's own sum."""
    from perfcast.experiment import Frame

    P = lambda name, where: Frame("procedure", name, where)  # noqa: E731
    S = Frame("statement")
    nodes = [  # path, kind, exclusive on rank 0
        ("main", P("main", "m.c [app]"), 0.0),
        ("main->f", P("f", "[libA]"), 0.0),
        ("main->f-><unknown file>:0", S, 1.0),
        ("main->f->loop at a.c:3", Frame("loop"), 0.0),
        ("main->f->loop at a.c:3->a.c:4", S, 2.0),
        ("main->f->loop at a.c:3->k", P("k", "k.c [app]"), 0.0),
        ("main->f->loop at a.c:3->k->k.c:2", S, 128.0),
        ("main->g", P("g", "g.c [app]"), 0.0),
        ("main->g->f@g.c:7", P("f", "[libA]"), 0.0),
        ("main->g->f@g.c:7-><unknown file>:0", S, 4.0),
        ("main->g->g.c:9", S, 16.0),
        ("main->g->g", P("g", "g.c [app]"), 0.0),
        ("main->g->g->g.c:9", S, 32.0),
        ("main->g->g->h", None, 64.0),
        ("main->f2", P("f", "[libB]"), 0.0),
        ("main->f2-><unknown file>:0", S, 8.0),
    ]
    tree = CallTree()
    for path, kind, _ in nodes:
        parent, _, name = path.rpartition("->")
        tree.add(path, parent or None, name, kind)
    rows = [dict(callpath=c, metric="time", value=v, rank=0) for c, _, v in nodes]
    rows += [dict(callpath=c, metric="time", value=100.0 if c == "main->g->f@g.c:7-><unknown file>:0" else 0.0,
                  rank=1) for c, _, _ in nodes]
    exp = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], tree)
    one = Experiment([], pd.DataFrame(rows[:len(nodes)]).drop(columns="rank"), [Metric("time", "s", "time", "exclusive")],
                     tree)
    bu = bottom_up(profile(one))
    got = _chains(bu["rows"])
    fa, fb = "f ([libA])", "f ([libB])"
    assert {k[0] for k in got} == {"main", fa, fb, "g", "h", "k"}
    assert got == {
        ("main",): (0.0, 255.0),
        (fa,): (7.0, 135.0), (fa, "main"): (3.0, 131.0), (fa, "g"): (4.0, 4.0), (fa, "g", "main"): (4.0, 4.0),
        ("k",): (128.0, 128.0), ("k", fa): (128.0, 128.0), ("k", fa, "main"): (128.0, 128.0),
        ("g",): (48.0, 116.0), ("g", "main"): (16.0, 116.0), ("g", "g"): (32.0, 0.0), ("g", "g", "main"): (32.0, 0.0),
        ("h",): (64.0, 64.0), ("h", "g"): (64.0, 64.0), ("h", "g", "g"): (64.0, 64.0),
        ("h", "g", "g", "main"): (64.0, 64.0),
        (fb,): (8.0, 8.0), (fb, "main"): (8.0, 8.0)}
    rows_ = {r["name"]: r for r in bu["rows"]}
    # calling contexts: f's two frames, g's two (the recursive one too); each caller's own
    assert (rows_[fa]["contexts"], rows_["g"]["contexts"], rows_[fa]["where"]) == (2, 2, "[libA]")
    assert [(c["name"], c["contexts"]) for c in rows_[fa]["callers"]] == [("g", 1), ("main", 1)]
    assert "where" not in rows_["h"]
    # depth: callers cut after one level
    assert all(len(k) <= 2 for k in _chains(bottom_up(profile(one), depth=1)["rows"]))
    # per rank first: f (libA) is rank 0's 7 or rank 1's 100, f <- g 4 or 100, f <- main 3 or 0
    mx = _chains(bottom_up(profile(exp, ranks="max"))["rows"])
    assert (mx[(fa,)], mx[(fa, "g")], mx[(fa, "main")]) == ((100.0, 135.0), (100.0, 100.0), (3.0, 131.0))
    assert mx[("g",)] == (48.0, 116.0)
    sm = _chains(bottom_up(profile(exp, ranks="sum"))["rows"])
    assert (sm[(fa,)], sm[(fa, "g")]) == ((107.0, 235.0), (104.0, 104.0))


@pytest.mark.parametrize("db, rel", [("hpctoolkit-cpi-database", 1e-9), ("hpctoolkit-allgather-database", 1e-9),
                                     ("flash4-experiment1.xml", 2e-4)])
def test_hpctoolkit_flat_view_is_per_procedure(data_dir, db, rel):
    """The flat view of an HPCToolkit database has one row per procedure, with HPCToolkit's own
    procedure exclusive and (recursion counted once) inclusive costs read from the raw database
    (:func:`hpctoolkit_procedure_truth`).  It grouped statements by source line: the OSU allgather
    row '<unknown file> [libpsm_infinipath.so.1.16]:0' merged 375 statements of dozens of procedures
    (53% of the run), FLASH's rows were single lines of Fortran files."""
    path = data_dir / "formats" / "hpctoolkit" / db
    exc, inc = hpctoolkit_procedure_truth(path)
    exp = load([path]).select(metric="CPUTIME (E)")
    rows = flat(profile(exp, "CPUTIME (E)", ranks="sum"))["rows"]
    assert len({k[0] for k in exc}) == len(exc)   # in these databases the names alone are distinct
    truth = {k[0]: (exc[k], inc[k]) for k in exc if inc[k] or exc[k]}
    got = {r["name"]: (r["exclusive"], r["inclusive"]) for r in rows}
    assert set(got) == set(truth)
    tol = 1e-6 * max(v[1] for v in truth.values())   # the XML's 6 digits
    for name, (e, i) in truth.items():
        assert got[name][0] == pytest.approx(e, rel=rel, abs=tol * (rel > 1e-9)), name
        assert got[name][1] == pytest.approx(i, rel=rel, abs=tol * (rel > 1e-9)), name
    assert len(truth) >= 9


def test_flat_view_attributes_loops_and_statements_to_their_procedure(tmp_path):
    """A constructed tree whose reader recorded what each frame is: two procedures named 'f' in
    different modules, each with statements on '<unknown file>:0' and a loop; a recursive 'g'.
    By hand: f (libA) exclusive 1 + 2 + 4 = 7 over both its calling contexts; f (libB) 8; g is
    exclusive 16 + 32, inclusive 16 + 32 + 64 (the nested g counted once); the frames without a
    kind (h) stay grouped by name."""
    from perfcast.experiment import Frame

    P = lambda name, where: Frame("procedure", name, where)  # noqa: E731
    nodes = [  # path, kind, exclusive
        ("main", P("main", "m.c [app]"), 0.0),
        ("main->f", P("f", "[libA]"), 0.0),
        ("main->f-><unknown file>:0", Frame("statement"), 1.0),
        ("main->f->loop at a.c:3", Frame("loop"), 0.0),
        ("main->f->loop at a.c:3->a.c:4", Frame("statement"), 2.0),
        ("main->g", P("g", "g.c [app]"), 0.0),
        ("main->g->f@g.c:7", P("f", "[libA]"), 0.0),
        ("main->g->f@g.c:7-><unknown file>:0", Frame("statement"), 4.0),
        ("main->g->g.c:9", Frame("statement"), 16.0),
        ("main->g->g", P("g", "g.c [app]"), 0.0),
        ("main->g->g->g.c:9", Frame("statement"), 32.0),
        ("main->g->g->h", None, 64.0),
        ("main->f2", P("f", "[libB]"), 0.0),
        ("main->f2-><unknown file>:0", Frame("statement"), 8.0),
    ]
    tree = CallTree()
    for path, kind, _ in nodes:
        parent, _, name = path.rpartition("->")
        tree.add(path, parent or None, name, kind)
    rows = [dict(callpath=c, metric="time", value=v) for c, _, v in nodes]
    exp = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "exclusive")], tree)
    fl = {r["name"]: r for r in flat(profile(exp))["rows"]}
    assert set(fl) == {"main", "f ([libA])", "f ([libB])", "g", "h"}
    fa = fl["f ([libA])"]
    assert (fa["exclusive"], fa["inclusive"], fa["contexts"], fa["where"]) == (7.0, 7.0, 2, "[libA]")
    assert (fl["f ([libB])"]["exclusive"], fl["f ([libB])"]["inclusive"]) == (8.0, 8.0)
    assert (fl["g"]["exclusive"], fl["g"]["inclusive"], fl["g"]["contexts"]) == (48.0, 116.0, 2)
    assert (fl["h"]["exclusive"], fl["h"]["inclusive"]) == (64.0, 64.0)
    assert fl["main"]["inclusive"] == 127.0 and fl["main"]["exclusive"] == 0.0
    # per location first with max/min: the same groups
    assert {r["name"]: r["exclusive"] for r in flat(profile(exp, ranks="max"))["rows"]}["g"] == 48.0
    # the kinds survive a selection, a combination of inputs and the store
    assert exp.select(metric="time").tree.frame("main->g->g") == Frame("procedure", "g", "g.c [app]")
    assert exp.tree.merged(exp.tree) == exp.tree
    other = CallTree([("main", None, "main"), ("main->g", "main", "g"), ("main->k", "main", "k")])
    other.add("main->g", "main", "g", Frame("procedure", "g", "g.c [other build]"))
    both = exp.tree.merged(other)
    assert both.frame("main->g") == Frame("procedure", "g", "")       # placed differently: no place
    assert both.frame("main") is None and both.frame("main->k") is None   # one input has no kind for it
    assert both.frame("main->f") == P("f", "[libA]")                          # a frame of one input
    from perfcast import store

    back = store.read(store.write(exp, tmp_path / "exp"))
    assert back.tree == exp.tree and back.tree.frame("main->f2-><unknown file>:0") == Frame("statement")


def test_scopes_over_fewer_ranks_are_named_and_unbalanced_columns_said(tmp_path, capsys):
    # 8 ranks at p = 8, inclusive times main 112, main->solve 64, main->comm 28 per rank; rank 0 has
    # no main->comm row: its comm and so its main exclusive are missing (not 0)
    from perfcast.cli import main
    import json

    rows = ["p,rank,callpath,metric,value,scope"]
    for r in range(8):
        rows += [f"8,{r},main,time,112,inclusive", f"8,{r},main->solve,time,64,inclusive"]
        if r:
            rows.append(f"8,{r},main->comm,time,28,inclusive")
    f = tmp_path / "miss.csv"
    f.write_text("\n".join(rows) + "\n")
    fewer = [{"path": "main", "scope": "exclusive", "locations": 7, "of": 8},
             {"path": "main->comm", "scope": "inclusive", "locations": 7, "of": 8},
             {"path": "main->comm", "scope": "exclusive", "locations": 7, "of": 8}]
    # sum: main 8 x 112, solve 8 x 64, comm 7 x 28, main exclusive 7 x (112 - 64 - 28): the exclusive
    # column adds up to 7 x 20 + 512 + 196 = 848 of 896 -- said, with the scopes over 7 ranks
    assert main(["view", str(f), "--at", "p=8", "--ranks", "sum", "--json"]) == 0
    item = json.loads(capsys.readouterr().out)["items"][0]
    got = {n["path"]: (n["inclusive"], n["exclusive"]) for n in item["nodes"]}
    assert got == {"main": (896, 140), "main->solve": (512, 512), "main->comm": (196, 196)}
    assert item["total"] == 896 and item["fewer_ranks"] == fewer
    said = [w for w in item["warnings"] if "do not add up" in w]
    assert len(said) == 1 and "main->comm" in said[0]
    # mean over the ranks that hold each value: 112 = 20 + 64 + 28, comm 28 / 112 = 25 %; nothing to
    # say about the sums, but the heading's scopes over 7 ranks are still named
    assert main(["view", str(f), "--at", "p=8", "--ranks", "mean", "--json"]) == 0
    item = json.loads(capsys.readouterr().out)["items"][0]
    got = {n["path"]: (n["inclusive"], n["exclusive"], n["inclusive_pct"]) for n in item["nodes"]}
    assert got["main"][:2] == (112, 20) and got["main->comm"] == (28, 28, pytest.approx(25.0))
    assert item["fewer_ranks"] == fewer and not [w for w in item["warnings"] if "do not add up" in w]
    assert main(["view", str(f), "--at", "p=8", "--ranks", "mean"]) == 0
    assert "main->comm inclusive over 7" in capsys.readouterr().out


def test_heading_counts_the_ranks_that_hold_the_metric():
    """A campaign's wall time is recorded on rank 0 only while its counters come from all 4 ranks: the
    time's reduction is over 1 rank (the heading said "ranks sum over 4 ranks" of rank 0's value)."""
    rows = [{"rep": 0, "rank": 0, "callpath": "app", "metric": "time", "value": 1.5}]
    rows += [{"rep": 0, "rank": r, "callpath": "app", "metric": "Ir", "value": 10.0 * (r + 1)} for r in range(4)]
    exp = Experiment([], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive"),
                                              Metric("Ir", "#", "count", "inclusive")])
    t = top_down(profile(exp, "time", ranks="sum"))
    assert t["total"] == 1.5 and t["over"].startswith("1 rank (of 4 ranks")
    i = top_down(profile(exp, "Ir", ranks="sum"))
    assert i["total"] == 100.0 and i["over"] == "4 ranks"


def test_a_campaigns_nested_timers_have_no_exclusive_time_not_a_negative_one(capsys):
    """CoMD (tests/data/comd/md.perfcast): the campaign stores each timer CoMD printed (total > loop
    > timestep > force, nested) under the run `app`, so app's inclusive minus its timers' is below zero
    at every point (truth: the store's values, read with pandas).  view printed app's exclusive time
    -11.44 (-298%) and scaling-loss ranked total, loop and timestep first by an exclusive loss called
    "self" (their whole inclusive loss: nested timers are no scope's own).  Now no exclusive value
    (null, n/a) of the run or of its timers, the note says the timers nest, and the inclusive values
    and losses are the measured ones (hand-computed from the store)."""
    from pathlib import Path

    from conftest import cli, cli_json

    store = Path(__file__).parent / "data" / "comd" / "md.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    t = v[v["metric"] == "time"].groupby(["p", "n", "rep", "callpath"])["value"].sum()
    t = t.groupby(["p", "n", "callpath"]).mean().unstack("callpath")
    timers = [c for c in t.columns if c != "app"]
    assert len(timers) == 10 and (t[timers].sum(axis=1) > t["app"]).all()      # the premise, at every point
    code, out, _ = cli(capsys, "view", store, "--at", "p=2,n=28", "--json")
    item = cli_json(out, "view")["items"][0]
    got = {n["path"]: (n["inclusive"], n["exclusive"]) for n in item["nodes"]}
    assert code == 0 and set(got) == {"app", *timers}
    assert got["app"][0] == pytest.approx(t.loc[(2, 28), "app"])
    assert got["app->force"][0] == pytest.approx(t.loc[(2, 28), "app->force"])
    assert all(e is None for _, e in got.values())
    assert any("timers nest" in w for w in item["warnings"]) and not any("negative" in w for w in item["warnings"])
    for mode in ("flat", "bottom-up"):
        code, out, _ = cli(capsys, "view", store, "--at", "p=2,n=28", "--mode", mode, "--json")
        assert all(r["exclusive"] is None for r in cli_json(out, "view")["items"][0]["rows"])
    code, out, _ = cli(capsys, "scaling-loss", store, "--mode", "strong", "--at", "n=28", "--json")
    pair = cli_json(out, "scaling-loss")["items"][0]["pairs"][0]
    rows = {r["path"]: r for r in pair["rows"]}
    assert all(r["exclusive_loss"] is None and r["where"] is None for r in rows.values())
    # strong scaling p 1 -> 2: (2 T_2 - T_1) of each timer's inclusive time over the run's 2 T_2
    for c in ("app", "app->total", "app->force"):
        t1, t2 = t.loc[(1, 28), c], t.loc[(2, 28), c]
        assert rows[c]["inclusive_loss"] == pytest.approx((2 * t2 - t1) / (2 * t.loc[(2, 28), "app"]))
    assert any("timers nest" in n for n in pair["notes"]) and not any("negative" in n for n in pair["notes"])


def test_timers_that_do_not_nest_keep_the_runs_exclusive_time():
    """The rule is the nesting, not the campaign: timers that add up to less than the run (disjoint
    phases) leave the run its own time, app 10 - (3 + 4) = 3 by hand; nested ones (9 + 8 > 10) none."""
    from perfcast.experiment import RUN_TIMERS

    def camp(a, b):
        rows = [{"p": p, "rep": 0, "callpath": c, "metric": "time", "value": val * p}
                for p in (1, 2) for c, val in (("app", 10.0), ("app->a", a), ("app->b", b))]
        return Experiment(["p"], pd.DataFrame(rows), [Metric("time", "s", "time", "inclusive", RUN_TIMERS)],
                          CallTree.from_paths(["app", "app->a", "app->b"]))

    got = {n["path"]: n["exclusive"] for n in top_down(profile(camp(3.0, 4.0), "time", {"p": 2}))["nodes"]}
    assert got == {"app": 6.0, "app->a": 6.0, "app->b": 8.0}
    got = {n["path"]: n["exclusive"] for n in top_down(profile(camp(9.0, 8.0), "time", {"p": 2}))["nodes"]}
    assert got == {"app": None, "app->a": None, "app->b": None}


def test_a_cachegrind_campaigns_view_says_the_profile_is_flat(capsys):
    """bench/data/hpccg-p (perfcast collect with cachegrind): cachegrind records no callers, so every
    function holding Ir is app->function (read with pandas) and `view --metric Ir` showed each one's
    inclusive Ir equal to its own, with nothing saying callees are not in it.  The view says so now
    (JSON "flat", a note in the text); the campaign's time (app and HPCCG's timers) is no such profile."""
    from pathlib import Path

    from conftest import cli, cli_json

    store = Path(__file__).parents[1] / "bench" / "data" / "hpccg-p" / "hpccg-p.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    ir = v[(v["metric"] == "Ir") & (v["p"] == 2)]
    depth = ir["callpath"].astype(str).str.count("->")
    assert depth.max() == 1 and (depth == 1).sum() > 10              # the premise: flat, many functions
    code, out, err = cli(capsys, "view", store, "--metric", "Ir", "--at", "p=2", "--json")
    assert code == 0, err
    item = cli_json(out, "view")["items"][0]
    assert item["flat"] is not None and "cachegrind" in item["flat"]
    code, out, err = cli(capsys, "view", store, "--metric", "Ir", "--at", "p=2")
    assert code == 0 and "note: flat profile" in err
    code, out, err = cli(capsys, "view", store, "--metric", "time", "--at", "p=2", "--json")
    assert code == 0, err
    assert cli_json(out, "view")["items"][0]["flat"] is None


def test_timers_that_nest_at_some_points_have_no_exclusive_time(capsys):
    """bench/data/hpccg-n: HPCCG prints Total and, inside it, DDOT, WAXPBY and SPARSEMV; the campaign
    stores each under app.  Their sum exceeds app's wall time from n = 28 on but not at n = 16 (read
    with pandas: start-up outweighs the doubly counted parts there), so the rule "more than the run at
    every point" did not apply, and `view --metric time --at n=40` printed app's exclusive time
    negative (app - Total - DDOT - ...), scaling-loss and the report an exclusive loss of it.  One
    point where timers inside the run add up to more than the run shows they nest: no exclusive time
    of the run or its timers (null / n/a) at any point."""
    from pathlib import Path

    from conftest import cli, cli_json

    store = Path(__file__).parents[1] / "bench" / "data" / "hpccg-n" / "hpccg-n.perfcast"
    v = pd.read_parquet(store / "values.parquet")
    t = v[v["metric"] == "time"].groupby(["n", "callpath"])["value"].mean().unstack("callpath")
    over = t.drop(columns="app").sum(axis=1) > t["app"]
    assert over.any() and not over.all()                              # the premise: at some points only
    for n in (16, 40):
        code, out, err = cli(capsys, "view", store, "--metric", "time", "--at", f"n={n}", "--json")
        assert code == 0, err
        nodes = {x["path"]: x for x in cli_json(out, "view")["items"][0]["nodes"]}
        assert all(nodes[c]["exclusive"] is None for c in ("app", "app->Total", "app->DDOT"))
    code, out, err = cli(capsys, "scaling-loss", store, "--metric", "time", "--procs", "n", "--mode", "weak", "--json")
    assert code == 0, err
    for pair in cli_json(out, "scaling-loss")["items"][0]["pairs"]:
        assert all(r["exclusive_loss"] is None for r in pair["rows"])

"""`model --json` streamed from the fit's arrays (ModelSet.json_chunks): the records against laws
known beforehand -- terms, coefficients, lead orders and the cost ranking worked out here by hand
from the generating formulas -- and the pieces joining into the text of the json module."""

import json

import pytest

import perfcast
from conftest import PMNF_LAWS, cli, cli_items, pmnf_law, write_law_file

PS = [4, 8, 16, 32, 64]
LAWS = PMNF_LAWS
MODEL_KEYS = ["parameters", "status", "formula", "constant", "terms", "quality", "lead", "noise", "dof", "cov"]


def law(name, p):
    return pmnf_law(LAWS[name], p)


@pytest.fixture
def law_file(tmp_path):
    return write_law_file(tmp_path / "laws.txt", LAWS, PS)


def test_model_json_records_are_the_generating_laws(capsys, law_file):
    code, out, err = cli(capsys, "model", law_file, "--json")
    assert code == 0, err
    recs = cli_items(out, "models")
    # the cost ranking by hand: default target p = 2 x 64 (p counts the processes); the increase
    # from p = 4 (measured) to 128 (the law) as a share of the root, the sum of all at 128
    root = sum(law(n, 128) for n in LAWS)
    inc = {n: (law(n, 128) - law(n, 4)) / root for n in LAWS}
    assert [r["callpath"] for r in recs] == sorted(LAWS, key=lambda n: -inc[n])
    assert [r["rank"] for r in recs] == [1, 2, 3, 4, 5]
    for r in recs:
        name = r["callpath"]
        c, terms = LAWS[name]
        keys = list(r)
        assert keys[:2] == ["callpath", "metric"] and keys[2:12] == MODEL_KEYS
        assert keys[-4:] == ["aggregate", "rank", "ranking", "warnings"]
        assert set(keys[12:-5]) <= {"drift", "growth", "drift_dof", "largest_measured", "noise_shape"}
        assert r["metric"] == "time" and r["parameters"] == ["p"] and r["status"] == "ok"
        assert r["constant"] == pytest.approx(c, rel=1e-6, abs=1e-9)
        assert len(r["terms"]) == len(terms)
        for t, (a, e, j) in zip(r["terms"], terms):
            assert t["coefficient"] == pytest.approx(a, rel=1e-6)
            assert t["factors"] == {"p": {"exponent": e, "log_exponent": j}}
        lead = (terms[0][1], terms[0][2]) if terms else ("0", 0)
        assert r["lead"] == {"p": {"exponent": lead[0], "log_exponent": lead[1]}}
        assert r["quality"]["n_points"] == 5 and r["quality"]["n_obs"] == 10
        assert len(r["cov"]) == 1 + len(terms) and all(len(row) == 1 + len(terms) for row in r["cov"])
        assert r.get("upper", [64.0]) == [64.0]
        assert r["warnings"] == []
        k = r["ranking"]
        assert k["from"] == {"p": 4.0} and k["at"] == {"p": 128.0} and k["significant"] is True
        assert k["per_process_first"] == pytest.approx(law(name, 4), rel=1e-12)
        assert k["per_process_now"] == pytest.approx(law(name, 64), rel=1e-12)
        assert k["per_process_at"] == pytest.approx(law(name, 128), rel=1e-6)
        assert k["increase_share"] == pytest.approx(inc[name], rel=1e-6, abs=1e-12)
    code, out, err = cli(capsys, "model", law_file, "--json", "--by", "growth", "--target", "p=1024")
    assert code == 0, err
    recs = cli_items(out, "models")
    # growth order: p^2, p log p, p, p^(1/2), constant; the values at the target are the laws'
    assert [r["callpath"] for r in recs] == ["quad", "plogp", "lin", "sqrt", "flat"]
    for r in recs:
        assert "ranking" not in r and r["at"] == {"p": 1024} and r["value"] == pytest.approx(law(r["callpath"], 1024), rel=1e-6)


def test_pieces_join_into_the_json_modules_text_without_building_models(law_file, tmp_path):
    """Any piece size gives the text json_text writes for the same records (every float as the
    json module prints it); the records come from the fit's arrays, no series model is built.  A
    series measured at one point is insufficient: no terms, cov null, the points it needs."""
    from perfcast.output import json_text

    rows = [f"{p},{r},{n},time,{law(n, p)!r}" for n in LAWS for p in PS for r in (0, 1)]
    rows += ["4,0,one,time,42.0", "4,1,one,time,42.0"]
    path = tmp_path / "laws.csv"
    path.write_text("p,rep,callpath,metric,value\n" + "\n".join(rows) + "\n")
    # without the segmentation's screen (it builds the models of these noise-free series)
    ms = perfcast.model(perfcast.io.load([str(path)]), segmented=False)
    assert all(sm._model is None for sm in ms.series)
    texts = ["".join(ms.json_chunks(chunk=k)) for k in (1, 2, 4096)]
    assert all(sm._model is None for sm in ms.series)
    assert texts[0] == texts[1] == texts[2]
    recs = json.loads(texts[0])
    got = {r["callpath"]: r for r in recs}
    for name, (c, terms) in LAWS.items():
        r = got[name]
        assert r["constant"] == pytest.approx(c, rel=1e-6, abs=1e-9)
        assert [(t["coefficient"], t["factors"]) for t in r["terms"]] == [
            (pytest.approx(a, rel=1e-6), {"p": {"exponent": e, "log_exponent": j}}) for a, e, j in terms]
    one = recs[-1]
    assert one["callpath"] == "one" and one["status"] == "insufficient" and one["terms"] == []
    assert one["constant"] == 42.0 and one["cov"] is None and one["needed"] >= 2 and one["dof"] == 0
    assert texts[0] == json_text(recs)


def test_table_head_builds_only_its_rows_and_finds_every_warning(tmp_path):
    """ModelSet.rank_head (the ``model`` table): the first rows of the ranking with their models,
    the others unbuilt; the lack-of-fit warnings of all series from the fit's arrays -- a step
    (1 up to p = 16, 100 from 32: no PMNF law follows it) is a poor fit, a series measured at two
    points says so, the exact laws have none."""
    rows = [f"{p},{r},{n},time,{law(n, p)!r}" for n in LAWS for p in PS for r in (0, 1)]
    rows += [f"{p},{r},step,time,{1.0 if p <= 16 else 100.0}" for p in PS for r in (0, 1)]
    rows += [f"{p},{r},two,time,{5.0 * p}" for p in (4, 8) for r in (0, 1)]
    path = tmp_path / "warn.csv"
    path.write_text("p,rep,callpath,metric,value\n" + "\n".join(rows) + "\n")
    ms = perfcast.model(perfcast.io.load([str(path)]), segmented=False)
    head, total, at, warned, noted = ms.rank_head(limit=2)
    assert total == len(LAWS) + 2 and [r.rank for r in head] == [1, 2] and at == {"p": 128.0}
    assert sum(sm._model is not None for sm in ms.series) <= 2
    kinds = {cp: text.split(":")[0] for cp, _, text in warned}
    assert kinds == {"step": "poor fit", "two": "2 points only"}
    # the two-point law is a law in p: no note says p was treated as having no effect
    assert not any("no effect" in text for _, _, text in noted)


def test_float_texts_are_pythons_repr():
    # the ground truth is float.__repr__ (what the json module writes), element by element: random
    # bit patterns (every exponent), the format boundaries of Python (1e-4, 1e16) and of pyarrow's
    # cast (1e-6, 1e10) with their neighbours, integral values, signed zeros, non-finite values
    import numpy as np

    from perfcast.fit.columns import float_texts

    rng = np.random.default_rng(17)
    bits = rng.integers(0, 2**64 - 1, 20000, dtype=np.uint64, endpoint=True)
    edges = 10.0 ** np.arange(-12, 20)
    values = np.concatenate([
        bits.view(np.float64), rng.standard_normal(20000) * 10.0 ** rng.integers(-12, 20, 20000),
        edges, -edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf), np.round(edges * 1.2345),
        [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, 2.0**53, 2.0**53 + 2, 1.7976931348623157e308]])
    for clean in (True, False):
        want = [float.__repr__(v) if (np.isfinite(v) or not clean) else "null" for v in values.tolist()]
        assert float_texts(values, clean) == want
        assert float_texts(values[:10], clean) == want[:10]      # the short path


def test_float_texts_between_1e6_and_1e4_are_pythons_repr():
    # where pyarrow writes positional digits and Python an exponent (moved in C): every decade's
    # edges and neighbours, one- to seventeen-digit mantissas, both signs; ground truth float.__repr__
    import numpy as np

    from perfcast.fit.columns import float_texts

    rng = np.random.default_rng(5)
    digits = rng.integers(1, 18, 30000)
    mant = np.array([float(f"{m:.{d - 1}e}".split("e")[0]) for m, d in zip(rng.uniform(1, 10, 30000), digits)])
    values = mant * 10.0 ** rng.integers(-7, -3, 30000)
    edges = np.array([1e-6, 1e-5, 1e-4])
    values = np.concatenate([values, -values, edges, np.nextafter(edges, 0), np.nextafter(edges, 1), [1.5e-5, 2e-6]])
    want = [float.__repr__(v) for v in values.tolist()]
    assert float_texts(values) == want

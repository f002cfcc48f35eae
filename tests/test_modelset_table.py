"""`model -o FILE.parquet` (ModelSet.to_table, built from the fit's arrays) against laws known
beforehand: the terms, coefficients and the ranking are worked out here by hand from the
generating formulas, not taken from an earlier output."""


import pyarrow.parquet as pq
import pytest

from conftest import PMNF_LAWS, cli, pmnf_law, write_law_file

PS = [4, 8, 16, 32, 64]
#: the shared laws and a pure log2(p) one
LAWS = {**PMNF_LAWS, "logp": (100.0, [(5.0, "0", 1)])}


def law(name, p):
    return pmnf_law(LAWS[name], p)


@pytest.fixture
def law_file(tmp_path):
    return write_law_file(tmp_path / "laws.txt", LAWS, PS)


def _rows(path):
    return pq.read_table(path).to_pylist()


def test_parquet_terms_are_the_generating_laws(capsys, law_file, tmp_path):
    out = tmp_path / "m.parquet"
    code, _, err = cli(capsys, "model", law_file, "-o", out)
    assert code == 0, err
    rows = _rows(out)
    assert sorted(r["callpath"] for r in rows) == sorted(LAWS)
    for r in rows:
        c, terms = LAWS[r["callpath"]]
        assert r["metric"] == "time" and r["status"] == "ok"
        assert r["constant"] == pytest.approx(c, rel=1e-9, abs=1e-9)
        assert len(r["terms"]) == len(terms)
        for t, (a, e, j) in zip(r["terms"], terms):
            assert t["coefficient"] == pytest.approx(a, rel=1e-9)
            assert t["factors"] == {"p": {"exponent": e, "log_exponent": j}}
        assert r["smape"] == pytest.approx(0.0, abs=1e-9)


def test_parquet_rank_order_and_increase_by_hand(capsys, law_file, tmp_path):
    """--by cost (default target: twice the largest p, 128): the increase is (f(128) - f(4)) over
    the root's f(128), the root being the sum of all callpaths (flat regions); ranked by it."""
    out = tmp_path / "m.parquet"
    code, _, err = cli(capsys, "model", law_file, "-o", out)
    assert code == 0, err
    rows = _rows(out)
    root = sum(law(n, 128) for n in LAWS)
    inc = {n: (law(n, 128) - law(n, 4)) / root for n in LAWS}
    hand = sorted(LAWS, key=lambda n: inc[n], reverse=True)
    assert [r["callpath"] for r in rows] == hand
    assert [r["rank"] for r in rows] == list(range(1, len(LAWS) + 1))
    for r in rows:
        assert r["increase"] == pytest.approx(inc[r["callpath"]], rel=1e-9, abs=1e-12)


def test_parquet_by_growth_and_target(capsys, law_file, tmp_path):
    """--by growth: lead order first (p^2 > p log p > p > p^(1/2) > log p > constant); with
    --target the value there is the law's, and the increase column is absent."""
    out = tmp_path / "g.parquet"
    code, _, err = cli(capsys, "model", law_file, "--by", "growth", "--target", "p=1024", "-o", out)
    assert code == 0, err
    rows = _rows(out)
    assert [r["callpath"] for r in rows] == ["quad", "plogp", "lin", "sqrt", "logp", "flat"]
    assert "increase" not in rows[0]
    for r in rows:
        assert r["value"] == pytest.approx(law(r["callpath"], 1024), rel=1e-9)
        assert r["lower"] <= r["value"] <= r["upper"]


def test_parquet_two_parameters_and_an_insufficient_series(capsys, tmp_path):
    """Two parameters: a term's factors hold both parameters, null for one it does not use; a
    series measured at one point is insufficient: no terms, its value as the constant."""
    pts = [(p, n) for p in (2, 4, 8, 16, 32) for n in (10, 20, 40, 80, 160)]
    f = {"pn": lambda p, n: 5.0 + 3.0 * p * n, "p2": lambda p, n: 1.0 + 2.0 * p ** 2}
    lines = ["PARAMETER p", "PARAMETER n", "", "POINTS " + " ".join(f"( {p} {n} )" for p, n in pts), "",
             "METRIC time", ""]
    for name, g in f.items():
        lines.append(f"REGION {name}")
        lines += [f"DATA {g(p, n)!r} {g(p, n)!r}" for p, n in pts]
        lines.append("")
    path = tmp_path / "two.txt"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "two.parquet"
    code, _, err = cli(capsys, "model", path, "-o", out)
    assert code == 0, err
    rows = {r["callpath"]: r for r in _rows(out)}
    (t,) = rows["pn"]["terms"]
    assert t["coefficient"] == pytest.approx(3.0, rel=1e-9)
    assert t["factors"] == {"p": {"exponent": "1", "log_exponent": 0}, "n": {"exponent": "1", "log_exponent": 0}}
    (t,) = rows["p2"]["terms"]
    assert t["coefficient"] == pytest.approx(2.0, rel=1e-9)
    assert t["factors"] == {"p": {"exponent": "2", "log_exponent": 0}, "n": None}
    assert rows["p2"]["constant"] == pytest.approx(1.0, rel=1e-9)


def test_parquet_insufficient_series(capsys, tmp_path):
    """A series measured at one point has no usable model: status insufficient, no terms, its value
    as the constant, ranked last."""
    rows = [f"{p},{r},a,time,{3.0 + 2.0 * p}" for p in PS for r in (0, 1)] + ["4,0,one,time,42.0", "4,1,one,time,42.0"]
    path = tmp_path / "ins.csv"
    path.write_text("p,rep,callpath,metric,value\n" + "\n".join(rows) + "\n")
    out = tmp_path / "ins.parquet"
    code, _, err = cli(capsys, "model", path, "-o", out)
    assert code == 0, err
    got = _rows(out)
    assert [r["callpath"] for r in got] == ["a", "one"]
    one = got[1]
    assert one["status"] == "insufficient" and one["terms"] == [] and one["constant"] == 42.0
    (t,) = got[0]["terms"]
    assert t["coefficient"] == pytest.approx(2.0, rel=1e-9) and t["factors"]["p"]["exponent"] == "1"


def test_table_is_the_frame(law_file):
    """The columnar table and the pandas frame of the same model set are one table."""
    import pyarrow as pa

    import perfcast

    ms = perfcast.model(perfcast.io.load([law_file]))
    for kw in ({}, {"by": "growth"}, {"target": {"p": 256.0}}):
        assert ms.to_table(**kw).equals(pa.Table.from_pandas(ms.to_frame(**kw), preserve_index=False))

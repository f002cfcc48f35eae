"""Derived metrics: the formula language (parser, errors with columns, fuzzing) and its evaluation
per scope, checked against values computed by hand and an independent scalar evaluator."""

import builtins
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast import CallTree, Experiment, Metric, PerfcastError, store
from perfcast.analysis.derived import (Binary, Call, Num, Ref, Total, Unary, derive, evaluate_scalar, formula_unit,
                                       parse, parse_formula, render)

# main -> a -> b ; main -> c   (exclusive cycles and instructions per rank)
CYC = {"main": 10.0, "main->a": 20.0, "main->a->b": 30.0, "main->c": 40.0}
INS = {"main": 5.0, "main->a": 40.0, "main->a->b": 10.0, "main->c": 0.0}
SUBTREE = {"main": ["main", "main->a", "main->a->b", "main->c"], "main->a": ["main->a", "main->a->b"],
           "main->a->b": ["main->a->b"], "main->c": ["main->c"]}


def counters(ranks=2):
    rows = []
    for p in (2.0, 4.0):
        for r in range(ranks):
            for cp in CYC:
                rows.append(dict(p=p, rep=0, callpath=cp, metric="cycles", value=CYC[cp] * p + r, rank=r))
                rows.append(dict(p=p, rep=0, callpath=cp, metric="instructions", value=INS[cp] * p, rank=r))
    return Experiment(["p"], pd.DataFrame(rows), [Metric("cycles", "", "count", "exclusive"),
                                                 Metric("instructions", "", "count", "exclusive")],
                      CallTree.from_paths(CYC))


def values(exp, metric):
    d = exp.data[exp.data["metric"] == metric]
    return {(r.p, r.rank, r.callpath): r.value for r in d.itertuples()}


def ev(text, **vals):
    return evaluate_scalar(parse_formula(text), vals)


# -- the language -------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("-2^2", -4.0), ("2^3^2", 512.0), ("2^-1", 0.5), ("1 - 2 - 3", -4.0), ("8 / 2 / 2", 2.0),
    ("2 ** 3", 8.0), ("1 + 2 * 3", 7.0), ("(1 + 2) * 3", 9.0), ("min(3, 1, 2)", 1.0), ("max(3, 1, 2)", 3.0),
    ("abs(-2.5)", 2.5), ("sqrt(16)", 4.0), ("log(exp(2))", 2.0), ("log2(8)", 3.0), ("log10(1000)", 3.0),
    ("if(1 < 2, 10, 20)", 10.0), ("if(2 <= 1, 10, 20)", 20.0), ("(3 == 3) + (3 != 3)", 1.0),
    ("1e3 + .5", 1000.5), ("--3", 3.0), ("+4", 4.0),
])
def test_arithmetic(text, expected):
    assert ev(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["1/0", "0/0", "sqrt(-1)", "log(0)", "log(-2)", "1/(1/0)", "exp(1000) - 1",
                                  "min(1, 1/0)", "(-8)^(1/3)", "0^-1", "1e999", "if(1/0 > 0, 1, 2)"])
def test_empty_cells(text):
    assert ev(text) is None


def test_if_does_not_empty_the_unused_branch():
    assert ev("if(x == 0, 0, 1 / x)", x=0.0) == 0.0
    assert ev("if(x == 0, 0, 1 / x)", x=4.0) == 0.25


@pytest.mark.parametrize("text,unit", [
    # dimensional analysis by hand: bytes over seconds, counts over counts, sums of one unit
    ("bytes / time", "bytes/sec"), ("cycles / instructions", ""), ("2 * time + time / 4", "sec"),
    ("time * time", "sec^2"), ("time ^ 2 / bytes", "sec^2/bytes"), ("sqrt(time * time)", "sec"),
    ("bytes / (time * cycles)", "bytes/(#*sec)"), ("inc(time) / @time", ""), ("max(time, 2 * time)", "sec"),
    ("if(time > 1, time, 0)", ""), ("-time", "sec"), ("1 / time", "1/sec"),
    # no unit to tell: different units summed, a logarithm of a quantity, an operand without one
    ("time + bytes", ""), ("log(time)", ""), ("log(cycles / instructions)", ""), ("time * nounit", ""),
])
def test_units_of_formulas(text, unit):
    units = {"bytes": "bytes", "time": "sec", "cycles": "#", "instructions": "#", "nounit": ""}
    assert formula_unit(parse_formula(text), lambda r: units[r.name]) == unit


def test_derived_metric_takes_the_formulas_unit_unless_given():
    exp = counters()
    exp = Experiment(exp.parameters, exp.data, [Metric("cycles", "#", "count", "exclusive"),
                                                Metric("instructions", "#", "count", "exclusive")], exp.tree)
    out, _ = derive(exp, ["cpi = cycles / instructions", "kilo = instructions / 1000"], scopes="exclusive")
    assert out.metrics["cpi"].unit == "" and out.metrics["kilo"].unit == "#"
    out, _ = derive(exp, ["twice = cycles + cycles"], scopes="exclusive")
    assert out.metrics["twice"].unit == "#"
    out, _ = derive(exp, ["cpi = cycles / instructions"], scopes="exclusive", unit="cycles/instr")
    assert out.metrics["cpi"].unit == "cycles/instr"
    # one unit given for two formulas labelled both (cpi and a count of cycles as "cycles/instr")
    with pytest.raises(PerfcastError, match="with 2 derivations: it would label every one of them"):
        derive(exp, ["cpi = cycles / instructions", "c2 = cycles"], scopes="exclusive", unit="cycles/instr")


def test_references_and_quoting():
    d = parse('"time (inc) share" = "time (inc)" / @"time (inc)" + $0 - @$1 + inc(cycles) * exc($2)')
    assert d.name == "time (inc) share"
    assert d.expr == Binary("+", Binary("-", Binary("+", Binary("/", Ref("time (inc)"), Total(Ref("time (inc)"))),
                                                    Ref(index=0)), Total(Ref(index=1))),
                            Binary("*", Ref("cycles", pin="inc"), Ref(index=2, pin="exc")))
    assert parse("x = 'it''s'".replace("''", "\\'")).expr == Ref("it's")
    assert parse("avg = avg#inclusive#sum#time.duration").expr == Ref("avg#inclusive#sum#time.duration")
    # a function name without parentheses is a metric
    assert parse_formula("log + 1") == Binary("+", Ref("log"), Num(1.0))


@pytest.mark.parametrize("spec,column,fragment", [
    ("x = 1 + * 2", 9, "expected a number"),
    ("x = cycles +", 13, "end of the formula"),
    ("x = (1 + 2", 11, "expected ')'"),
    ("x = foo(1)", 5, "unknown function 'foo'"),
    ("x = max(1)", 10, "max() takes at least 2"),
    ("x = sqrt(1, 2)", 14, "sqrt() takes 1"),
    ('x = "abc', 5, "unterminated quoted name"),
    ("x = 3 4", 7, "missing operator"),
    ("x = 1 < 2 < 3", 11, "do not chain"),
    ("x = a = b", 7, "only allowed once"),
    ("x = 1 ; 2", 7, "unexpected character ';'"),
    ("x = $", 5, "$ must be followed"),
    ("= 3", 1, "expected NAME = FORMULA"),
    ("x 3", 3, "expected NAME = FORMULA"),
    ("x =   ", 7, "empty formula"),
    ("x = 2x", 6, "runs into a name"),
    ("x = inc(1)", 9, "expected a metric name"),
])
def test_errors_point_at_the_column(spec, column, fragment):
    with pytest.raises(PerfcastError) as e:
        parse(spec)
    assert e.value.where == f"column {column}"
    assert fragment in e.value.message
    assert len(e.value.format().splitlines()) == 1  # one line, quoting the formula
    assert repr(spec) in e.value.message


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(PerfcastError, match="nested deeper"):
        parse_formula("(" * 2000 + "1" + ")" * 2000)
    for text in ("-" * 5000 + "1", "2^" * 3000 + "2", "abs(" * 1000 + "1" + ")" * 1000):
        with pytest.raises(PerfcastError, match="nested deeper"):
            parse_formula(text)
    with pytest.raises(PerfcastError, match="longer than"):
        parse_formula("1+" * 6000 + "1")


# -- evaluation on an experiment ---------------------------------------------------------------
def test_cpi_exclusive_and_inclusive_by_hand():
    e, reports = derive(counters(), ["CPI = cycles / instructions"])
    assert [(r["name"], r["scope"]) for r in reports] == [("CPI", "exclusive"), ("CPI (inc)", "inclusive")]
    assert e.metrics["CPI"].scope == "exclusive" and e.metrics["CPI (inc)"].scope == "inclusive"
    exc, inc = values(e, "CPI"), values(e, "CPI (inc)")
    for p in (2.0, 4.0):
        for r in (0, 1):
            for cp in CYC:
                if INS[cp] == 0:
                    assert (p, r, cp) not in exc  # division by zero: an empty cell, not stored
                else:
                    assert exc[(p, r, cp)] == pytest.approx((CYC[cp] * p + r) / (INS[cp] * p))
                cyc = sum(CYC[s] * p + r for s in SUBTREE[cp])
                ins = sum(INS[s] * p for s in SUBTREE[cp])
                if ins == 0:
                    assert (p, r, cp) not in inc
                else:
                    assert inc[(p, r, cp)] == pytest.approx(cyc / ins)
    # main->c has no instructions: 2 points x 2 ranks empty cells in each scope
    assert reports[0]["empty"] == 4 and reports[1]["empty"] == 4
    assert reports[0]["values"] == 12 and reports[1]["values"] == 12
    assert np.isfinite(e.data["value"]).all()


def test_totals_positional_and_single_scope():
    e0 = counters()
    # $0 is cycles (0-based); @cycles the root inclusive total per point, rep and rank
    e, rep = derive(e0, ["share = 100 * $0 / @cycles"], scopes="exclusive")
    assert [r["name"] for r in rep] == ["share"] and "share (inc)" not in e.metrics
    got = values(e, "share")
    for p in (2.0, 4.0):
        for r in (0, 1):
            total = sum(CYC[s] * p + r for s in CYC)
            for cp in CYC:
                assert got[(p, r, cp)] == pytest.approx(100 * (CYC[cp] * p + r) / total)
    e, _ = derive(e0, ["selfshare = exc(cycles) / inc(cycles)"], scopes="inclusive")
    got = values(e, "selfshare")
    assert got[(2.0, 1, "main->a")] == pytest.approx(41.0 / (41.0 + 61.0))


def test_sparse_values_count_as_zero_within_a_measured_run():
    e = counters()
    d = e.data[~((e.data["metric"] == "instructions") & (e.data["callpath"] == "main->a->b"))]
    e = e.replace(data=d)
    out, rep = derive(e, ["w = cycles - instructions"], scopes="exclusive")
    got = values(out, "w")
    assert got[(2.0, 0, "main->a->b")] == pytest.approx(60.0)  # instructions absent there: 0
    # a metric with no value at all in a run: that run's cells are empty
    d2 = e.data[~((e.data["metric"] == "instructions") & (e.data["p"] == 4.0))]
    out, rep = derive(e.replace(data=d2), ["w = cycles - instructions"], scopes="exclusive")
    assert rep[0]["empty"] == 8 and all(k[0] == 2.0 for k in values(out, "w"))


def test_later_derivations_use_earlier_ones_and_pairs():
    e, _ = derive(counters(), ["CPI = cycles / instructions", "IPC = 1 / CPI"])
    a, b = values(e, "CPI (inc)"), values(e, "IPC (inc)")
    assert all(b[k] == pytest.approx(1 / a[k]) for k in a)
    # single-scope derived metrics are not additive: converting them is refused
    e1, _ = derive(counters(), ["CPI = cycles / instructions"], scopes="exclusive")
    with pytest.raises(PerfcastError, match="not additive"):
        derive(e1, ["x = 2 * CPI"])


def test_unknown_scope_gives_one_metric():
    d = pd.DataFrame({"p": [1, 2, 1, 2], "callpath": ["f"] * 4, "metric": ["a", "a", "b", "b"],
                      "value": [2.0, 3.0, 4.0, 0.0]})
    e = Experiment.from_pandas(d)
    out, rep = derive(e, ["r = b / a"])
    assert [(r["name"], r["scope"], r["empty"]) for r in rep] == [("r", "unknown", 0)]
    with pytest.raises(PerfcastError, match="scope 'unknown'") as err:
        derive(e, ["t = a / @a"])
    assert err.value.where == "column 9"


def test_bad_references_name_the_column():
    with pytest.raises(PerfcastError, match="no metric 'cycels'; did you mean cycles") as e:
        derive(counters(), ["x = 1 + cycels"])
    assert e.value.where == "column 9"
    with pytest.raises(PerfcastError, match=r"\$0..\$1") as e:
        derive(counters(), ["x = $7"])
    with pytest.raises(PerfcastError, match="already has a metric"):
        derive(counters(), ["cycles = 2"], scopes="exclusive")
    with pytest.raises(PerfcastError, match="empty everywhere"):
        derive(counters(), ["z = cycles / 0"])


def test_derived_metrics_are_stored(tmp_path):
    e, _ = derive(counters(), ["CPI = cycles / instructions"])
    store.write(e, tmp_path / "d.perfcast")
    back = store.read(tmp_path / "d.perfcast")
    assert back.equals(e)
    assert back.meta["derived"]["CPI (inc)"]["formula"] == "(cycles / instructions)"
    # a stored derived metric is an ordinary metric: selectable and aggregatable like any other
    agg = back.select(metric="CPI").aggregate("mean", over=("rep", "rank")).set_index(["p", "callpath"])["value"]
    assert agg[(4.0, "main->a")] == pytest.approx(((80 + 81) / 2) / 160)


# -- fuzzing ------------------------------------------------------------------------------------
NAMES = ["cycles", "instructions", "time (inc)", 'odd "name"', "a.b#c:d", "log"]
leaf = st.one_of(
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False).map(Num),
    st.sampled_from(NAMES).map(lambda n: Ref(n)),
    st.integers(0, 2).map(lambda i: Ref(index=i)),
    st.tuples(st.sampled_from(NAMES), st.sampled_from(["inc", "exc"])).map(lambda t: Ref(t[0], pin=t[1])),
    st.sampled_from(NAMES).map(lambda n: Total(Ref(n))),
)


def _node(children):
    return st.one_of(
        st.tuples(st.sampled_from("+-"), children).map(lambda t: Unary(*t)),
        st.tuples(st.sampled_from(["+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!="]), children,
                  children).map(lambda t: Binary(*t)),
        st.tuples(st.sampled_from(["abs", "sqrt", "exp", "log", "log2", "log10"]), children).map(
            lambda t: Call(t[0], (t[1],))),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(children, min_size=2, max_size=3)).map(
            lambda t: Call(t[0], tuple(t[1]))),
        st.tuples(children, children, children).map(lambda t: Call("if", t)),
    )


asts = st.recursive(leaf, _node, max_leaves=12)


def reference(node, vals, totals):
    """Plain-Python evaluator written independently of the library: None = empty cell."""
    def go(n):
        if isinstance(n, Num):
            return n.value
        if isinstance(n, Ref):
            return vals[n.name if n.index is None else f"${n.index}"]
        if isinstance(n, Total):
            return totals[n.ref.name]
        if isinstance(n, Unary):
            return -go(n.arg) if n.op == "-" else go(n.arg)
        if isinstance(n, Binary):
            a, b = go(n.left), go(n.right)
            ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                   "^": lambda: a ** b, "<": lambda: float(a < b), "<=": lambda: float(a <= b),
                   ">": lambda: float(a > b), ">=": lambda: float(a >= b), "==": lambda: float(a == b),
                   "!=": lambda: float(a != b)}
            r = ops[n.op]()
        elif n.fn == "if":
            r = go(n.args[1]) if go(n.args[0]) != 0 else go(n.args[2])
        else:
            xs = [go(a) for a in n.args]
            r = {"min": lambda: min(xs), "max": lambda: max(xs), "abs": lambda: abs(xs[0]),
                 "sqrt": lambda: math.sqrt(xs[0]), "exp": lambda: math.exp(xs[0]), "log": lambda: math.log(xs[0]),
                 "log2": lambda: math.log2(xs[0]), "log10": lambda: math.log10(xs[0])}[n.fn]()
        if isinstance(r, complex) or not math.isfinite(r):
            raise ArithmeticError
        return r

    try:
        return go(node)
    except (ArithmeticError, ValueError):
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(asts, st.lists(st.floats(-50, 50, allow_nan=False), min_size=len(NAMES) + 3, max_size=len(NAMES) + 3))
def test_random_asts_round_trip_and_match_a_reference(ast, numbers):
    text = render(ast)
    assert parse_formula(text) == ast
    vals = {n: numbers[i] for i, n in enumerate(NAMES)}
    vals.update({f"${i}": numbers[len(NAMES) + i] for i in range(3)})
    totals = {n: numbers[i] * 3 + 1 for i, n in enumerate(NAMES)}
    got = evaluate_scalar(ast, vals, totals)
    want = reference(ast, vals, totals)
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


ALPHABET = st.sampled_from(list("abcxyz_0123456789.$@\"'()+-*/^<>=!,; \t#:e") + ["if", "min", "log", "**", "=="])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(ALPHABET, max_size=30).map("".join)))
def test_random_text_never_crashes(text):
    for attempt in (text, "x = " + text):
        try:
            d = parse(attempt) if attempt.startswith("x = ") else parse_formula(attempt)
        except PerfcastError as e:
            assert e.where is None or e.where.startswith("column ")
        else:
            expr = d.expr if hasattr(d, "expr") else d
            assert parse_formula(render(expr)) == expr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.one_of(st.floats(0, 100, allow_nan=False).map(Num),
                              st.sampled_from(["cycles", "instructions"]).map(lambda n: Ref(n))),
                    _node, max_leaves=6))
def test_vectorised_evaluation_matches_the_reference(ast):
    spec = "d = " + render(ast)
    try:
        out, rep = derive(counters(ranks=1), [spec], scopes="exclusive")
    except PerfcastError as e:
        assert "empty everywhere" in e.message
        out = None
    got = values(out, "d") if out is not None else {}
    for p in (2.0, 4.0):
        for cp in CYC:
            want = reference(ast, {"cycles": CYC[cp] * p, "instructions": INS[cp] * p}, {})
            if want is None:
                assert (p, 0, cp) not in got
            else:
                assert got[(p, 0, cp)] == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_formulas_never_execute_code(monkeypatch, tmp_path):
    calls = []
    for fn in ("eval", "exec", "compile", "__import__"):
        real = getattr(builtins, fn)
        monkeypatch.setattr(builtins, fn, lambda *a, _real=real, _fn=fn, **k: (calls.append(_fn), _real(*a, **k))[1])
    target = tmp_path / "pwned"
    for spec in [f"x = __import__('os').system('touch {target}')", "x = exec(\"1\")", "x = eval('1')",
                 "x = cycles.__class__", "x = [c for c in ()]", "x = lambda: 1", "x = cycles; import os"]:
        with pytest.raises(PerfcastError):
            derive(counters(), [spec])
    monkeypatch.undo()
    assert not target.exists()
    assert [c for c in calls if c != "__import__"] == []


def test_a_stored_derived_metric_is_modeled_like_any_other(tmp_path):
    from perfcast.fit import model_experiment

    # exclusive cycles 100 p log2 p and instructions 50 p at main, a leaf with 3x main's values:
    # CPI = 2 log2 p in every scope (inclusive: 400 p log2 p / 200 p)
    rows = []
    for p in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0):
        for cp, k in (("main", 1.0), ("main->leaf", 3.0)):
            rows.append(dict(p=p, callpath=cp, metric="cycles", value=k * 100 * p * math.log2(p)))
            rows.append(dict(p=p, callpath=cp, metric="instructions", value=k * 50 * p))
    e = Experiment(["p"], pd.DataFrame(rows), [Metric("cycles", "", "count", "exclusive"),
                                               Metric("instructions", "", "count", "exclusive")])
    e, _ = derive(e, ["CPI = cycles / instructions"])
    store.write(e, tmp_path / "cpi.perfcast")
    (m,) = model_experiment(store.read(tmp_path / "cpi.perfcast"), "CPI (inc)", "main")
    assert m.model.predict(1024.0) == pytest.approx(2 * 10, rel=1e-6)
    assert "log2(p)" in m.model.formula()

"""Derived metrics: a small, safe formula language evaluated per scope of the calling-context tree.

A derivation is ``NAME = FORMULA``, e.g. ``CPI = cycles / instructions``.  The formula is read by
a tokenizer and a recursive-descent parser into an AST and evaluated with numpy; nothing is ever
passed to ``eval``/``exec``.

Syntax
------
* numbers: ``2``, ``0.5``, ``1e-9``;
* metric references: a bare name made of letters, digits and ``_ . # :`` (not starting with a
  digit), e.g. ``PAPI_TOT_CYC`` or ``avg#inclusive#sum#time.duration``; any other name in double or
  single quotes, e.g. ``"time (inc)"`` (a backslash escapes the quote or itself);
* positional references ``$n``: the n-th metric of the experiment, **0-based** in the order
  ``perfcast metrics EXP`` lists them (as in hpcviewer, where the first column is ``$0``);
* aggregate totals ``@name``, ``@"quoted name"``, ``@$n``: the metric's total over the whole tree
  for the same point, repetition and location -- the inclusive value of the root of the
  calling-context tree (the sum over roots for a forest; when a root carries no value, the
  topmost callpaths that do);
* operators ``+ - * /``, ``^`` (or ``**``) for powers (right-associative, binds tighter than unary
  minus: ``-2^2 = -4``), unary ``-`` and ``+``, parentheses;
* comparisons ``< <= > >= == !=`` giving 1 or 0 (used in conditions; they do not chain);
* functions ``min(a, b, ...)``, ``max(a, b, ...)``, ``abs``, ``sqrt``, ``exp``, ``log`` (natural),
  ``log2``, ``log10`` and ``if(condition, then, else)`` (condition true when non-zero);
* ``inc(ref)`` / ``exc(ref)`` pin a reference to its inclusive / exclusive values whatever the
  scope being evaluated (e.g. ``selfshare = exc(time) / inc(time)``).

Semantics
---------
A formula is evaluated independently for every callpath, point, repetition and location
(rank/thread).  A derivation produces up to two metrics: ``NAME`` evaluated on the *exclusive*
values of its operands (scope ``exclusive``) and ``NAME (inc)`` evaluated on their *inclusive*
values (scope ``inclusive``) -- the Hatchet/Thicket naming convention.  An operand whose other
scope is stored as a twin metric uses the twin (``time``/``time (inc)`` as Hatchet and Thicket
name them, ``CPUTIME (E)``/``CPUTIME (I)`` as HPCToolkit does); an operand known in only one scope
is converted with :meth:`Experiment.to_inclusive`/:meth:`Experiment.to_exclusive`.  When every
operand has scope ``unknown`` (flat data), one metric ``NAME`` with scope ``unknown`` results.
The scope of a derived metric says which operand values it was computed from; a ratio evaluated
on inclusive values is the ratio of the inclusive costs, not a sum over the subtree.

A metric that has no value at a callpath where others do counts as 0 there (profiles are sparse
and omit zeros) as long as it has values elsewhere in the same point/repetition/location and its
collector could see that callpath (:func:`perfcast.experiment.covered`: inputs of different
collectors merged record what each saw -- cachegrind's ``Ir`` at a campaign's timer ``app->halo``
is not measured, not 0); otherwise the cell is empty (counted in the report's ``not_measured``
when a collector never saw the callpath).  Division by zero, ``sqrt``/``log`` of negative numbers, overflow and
empty operands give an empty cell: the row is not stored (an Experiment holds finite values only)
and the number of empty cells is reported.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import PerfcastError
from ..experiment import (COVERAGE, LOCATION_COLUMNS, Experiment, Metric, absent_location_is_missing, covered,
                          metric_coverage)
from ..lazy import LazyModule

pd = LazyModule("pandas")   # imported where a DataFrame is made (perfcast.lazy)

__all__ = ["Num", "Ref", "Total", "Unary", "Binary", "Call", "Derivation", "parse", "parse_formula",
           "render", "evaluate_scalar", "derive", "formula_unit", "FUNCTIONS", "MAX_LENGTH", "INC_SUFFIX", "additive", "operands",
           "refuse_non_additive"]

#: suffix naming the inclusive partner of a metric (Hatchet/Thicket convention)
INC_SUFFIX = " (inc)"
#: longest formula accepted
MAX_LENGTH = 10_000
#: deepest nesting accepted (parentheses, unary operators, function calls)
MAX_DEPTH = 100

#: function name -> (min args, max args or None)
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "min": (2, None), "max": (2, None), "abs": (1, 1), "sqrt": (1, 1), "exp": (1, 1), "log": (1, 1),
    "log2": (1, 1), "log10": (1, 1), "if": (3, 3), "inc": (1, 1), "exc": (1, 1),
}
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DIGITS = set("0123456789")  # ASCII only: str.isdigit() also accepts "¹", "٣", ...
_NAME_CHARS = _NAME_START | _DIGITS | set(".#:")


# -- AST ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    value: float
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Ref:
    """A metric reference: ``name`` (str) or ``index`` (int, from ``$n``); ``pin`` = inc/exc/None."""

    name: str | None = None
    index: int | None = None
    pin: str | None = None
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Total:
    ref: Ref
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Unary:
    op: str
    arg: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Derivation:
    name: str
    expr: object
    text: str = field(default="", compare=False)


# -- errors with a caret --------------------------------------------------------------------------
def _error(text: str, pos: int, message: str) -> PerfcastError:
    """A PerfcastError naming the (1-based) column of ``text`` and quoting the formula."""
    pos = max(0, min(pos, len(text)))
    shown = text.replace("\n", " ").replace("\t", " ")
    # one line (the CLI's contract): the column is in `where`, the formula quoted after the message
    return PerfcastError(f"{message} in {shown!r}", None, f"column {pos + 1}")


# -- tokenizer ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tok:
    kind: str  # num, name, str, dollar, at, op, eof
    value: object
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        start = i
        if c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            while i < n and text[i] in _DIGITS:
                i += 1
            if i < n and text[i] == ".":
                i += 1
                while i < n and text[i] in _DIGITS:
                    i += 1
            if i < n and text[i] in "eE":
                j = i + 1
                if j < n and text[j] in "+-":
                    j += 1
                if j < n and text[j] in _DIGITS:
                    i = j
                    while i < n and text[i] in _DIGITS:
                        i += 1
            if i < n and text[i] in _NAME_START:
                raise _error(text, i, "a number runs into a name; put an operator between them")
            toks.append(_Tok("num", float(text[start:i]), start))
        elif c in _NAME_START:
            while i < n and text[i] in _NAME_CHARS:
                i += 1
            toks.append(_Tok("name", text[start:i], start))
        elif c in "\"'":
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise _error(text, start, f"unterminated quoted name (no closing {c})")
                ch = text[i]
                if ch == "\\" and i + 1 < n and text[i + 1] in (c, "\\"):
                    buf.append(text[i + 1])
                    i += 2
                elif ch == c:
                    i += 1
                    break
                else:
                    buf.append(ch)
                    i += 1
            if not buf:
                raise _error(text, start, "empty quoted name")
            toks.append(_Tok("str", "".join(buf), start))
        elif c == "$":
            i += 1
            while i < n and text[i] in _DIGITS:
                i += 1
            if i == start + 1:
                raise _error(text, start, "$ must be followed by a column number, e.g. $0")
            toks.append(_Tok("dollar", int(text[start + 1:i]), start))
        elif c == "@":
            toks.append(_Tok("at", "@", start))
            i += 1
        else:
            two = text[i:i + 2]
            if two in ("<=", ">=", "==", "!=", "**"):
                toks.append(_Tok("op", "^" if two == "**" else two, start))
                i += 2
            elif c in "+-*/^(),<>=":
                toks.append(_Tok("op", c, start))
                i += 1
            else:
                raise _error(text, start, f"unexpected character {c!r}")
    toks.append(_Tok("eof", None, n))
    return toks


# -- parser ---------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str, start: int = 0):
        """Parse ``text[start:]``; positions (and error carets) refer to the whole ``text``."""
        if len(text) > MAX_LENGTH:
            raise PerfcastError(f"formula longer than {MAX_LENGTH} characters")
        self.text = text
        self.toks = [_Tok(t.kind, t.value, t.pos + start) for t in _tokenize(text[start:])]
        self.i = 0
        self.depth = 0
        self.levels: dict[int, int] = {}  # id(node) -> operators on its deepest path (leaves: 0)

    def err(self, tok: _Tok, message: str) -> PerfcastError:
        return _error(self.text, tok.pos, message)

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def is_op(self, *ops) -> bool:
        return self.tok.kind == "op" and self.tok.value in ops

    def expect(self, op: str, what: str) -> _Tok:
        if not self.is_op(op):
            raise self.err(self.tok, f"expected {what}, found {self.describe(self.tok)}")
        return self.take()

    @staticmethod
    def describe(t: _Tok) -> str:
        if t.kind == "eof":
            return "the end of the formula"
        if t.kind == "num":
            return f"number {t.value:g}"
        if t.kind == "dollar":
            return f"${t.value}"
        return repr(t.value)

    def node(self, tok: _Tok, node, *children):
        """``node`` (built at ``tok`` from ``children``), refused when the tree gets deeper than
        MAX_DEPTH operators: a long flat sum is a left-deep tree, and every walker over the tree
        (evaluation, rendering, references) recurses once per level."""
        level = 1 + max((self.levels.get(id(c), 0) for c in children), default=0)
        if level > MAX_DEPTH:
            raise self.err(tok, f"formula too deeply nested (> {MAX_DEPTH} levels: every operator of a sum or "
                                f"product is one); split it into several derived metrics")
        self.levels[id(node)] = level
        return node

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.err(self.tok, f"formula nested deeper than {MAX_DEPTH} levels")

    def parse_all(self):
        if self.tok.kind == "eof":
            raise self.err(self.tok, "empty formula")
        e = self.comparison()
        if self.tok.kind != "eof":
            raise self.err(self.tok, f"unexpected {self.describe(self.tok)} (missing operator?)")
        return e

    def comparison(self):
        left = self.additive()
        if self.is_op(*_COMPARISONS):
            t = self.take()
            right = self.additive()
            if self.is_op(*_COMPARISONS):
                raise self.err(self.tok, "comparisons do not chain; combine them with if()")
            return self.node(t, Binary(t.value, left, right, t.pos), left, right)
        if self.is_op("="):
            raise self.err(self.tok, "'=' is only allowed once, after the metric name; compare with '=='")
        return left

    def additive(self):
        left = self.term()
        while self.is_op("+", "-"):
            t = self.take()
            right = self.term()
            left = self.node(t, Binary(t.value, left, right, t.pos), left, right)
        return left

    def term(self):
        left = self.unary()
        while self.is_op("*", "/"):
            t = self.take()
            right = self.unary()
            left = self.node(t, Binary(t.value, left, right, t.pos), left, right)
        return left

    def unary(self):
        if self.is_op("-", "+"):
            t = self.take()
            self.enter()
            arg = self.unary()
            self.depth -= 1
            return self.node(t, Unary(t.value, arg, t.pos), arg)
        return self.power()

    def power(self):
        base = self.primary()
        if self.is_op("^"):
            t = self.take()
            self.enter()
            exponent = self.unary()  # right-associative; allows 2^-1
            self.depth -= 1
            return self.node(t, Binary("^", base, exponent, t.pos), base, exponent)
        return base

    def ref(self, pin=None):
        t = self.tok
        if t.kind in ("name", "str"):
            self.take()
            return Ref(name=t.value, pin=pin, pos=t.pos)
        if t.kind == "dollar":
            self.take()
            return Ref(index=t.value, pin=pin, pos=t.pos)
        raise self.err(t, f"expected a metric name or $n, found {self.describe(t)}")

    def primary(self):
        t = self.tok
        if t.kind == "num":
            self.take()
            return Num(t.value, t.pos)
        if t.kind == "at":
            self.take()
            return self.node(t, Total(self.ref(), t.pos))
        if t.kind == "dollar" or t.kind == "str":
            return self.ref()
        if t.kind == "name":
            if self.toks[self.i + 1].kind == "op" and self.toks[self.i + 1].value == "(":
                return self.call()
            return self.ref()
        if self.is_op("("):
            self.take()
            self.enter()
            e = self.comparison()
            self.depth -= 1
            self.expect(")", "')'")
            return e
        raise self.err(t, f"expected a number, metric or '(', found {self.describe(t)}")

    def call(self):
        t = self.take()
        fn = t.value
        if fn not in FUNCTIONS:
            import difflib   # a suggestion for a typo only: not imported by every command

            close = difflib.get_close_matches(fn, list(FUNCTIONS), 1)
            hint = f" (did you mean {close[0]}?)" if close else f"; functions: {', '.join(FUNCTIONS)}"
            raise self.err(t, f"unknown function {fn!r}{hint}")
        self.take()  # '('
        self.enter()
        if fn in ("inc", "exc"):
            r = self.ref(pin=fn)
            self.depth -= 1
            self.expect(")", "')' (inc/exc take one metric)")
            return r
        args = [self.comparison()]
        while self.is_op(","):
            self.take()
            args.append(self.comparison())
        args = tuple(args)
        self.depth -= 1
        close_tok = self.expect(")", "',' or ')'")
        lo, hi = FUNCTIONS[fn]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}"
            raise _error(self.text, close_tok.pos, f"{fn}() takes {want} argument(s), got {len(args)}")
        return self.node(t, Call(fn, args, t.pos), *args)


def parse_formula(text: str):
    """Parse a formula (no ``NAME =``) into an AST; PerfcastError with a caret on bad input."""
    if not isinstance(text, str):
        raise PerfcastError("a formula must be text")
    return _Parser(text).parse_all()


def parse(spec: str) -> Derivation:
    """Parse ``NAME = FORMULA`` (NAME bare or quoted)."""
    if not isinstance(spec, str):
        raise PerfcastError("a derivation must be text")
    if len(spec) > MAX_LENGTH:
        raise PerfcastError(f"derivation longer than {MAX_LENGTH} characters")
    toks = _tokenize(spec)
    t0 = toks[0]
    if t0.kind not in ("name", "str") or not (toks[1].kind == "op" and toks[1].value == "="):
        pos = t0.pos if t0.kind not in ("name", "str") else toks[1].pos
        raise _error(spec, pos, "expected NAME = FORMULA (quote a NAME with spaces or punctuation)")
    start = toks[1].pos + 1
    if not spec[start:].strip():
        raise _error(spec, len(spec), "empty formula after '='")
    return Derivation(str(t0.value), _Parser(spec, start).parse_all(), spec)


# -- rendering ------------------------------------------------------------------------------------
_PREC = {"cmp": 1, "+": 2, "-": 2, "*": 3, "/": 3, "neg": 4, "^": 5}


def _quote(name: str) -> str:
    if name and name[0] in _NAME_START and all(ch in _NAME_CHARS for ch in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(node) -> str:
    """Formula text that parses back to the same AST (fully parenthesised where needed)."""
    if isinstance(node, Num):
        v = node.value
        if v == math.inf:
            return "1e999"  # a literal beyond float range (1e400) parses to infinity, and back
        if v < 0 or not math.isfinite(v):
            raise PerfcastError("cannot render a negative or non-finite literal")
        return repr(float(v))
    if isinstance(node, Ref):
        r = f"${node.index}" if node.index is not None else _quote(node.name)
        return f"{node.pin}({r})" if node.pin else r
    if isinstance(node, Total):
        return "@" + render(node.ref)
    if isinstance(node, Unary):
        # parenthesised whole: `-x ^ 2` would parse as -(x ^ 2)
        return f"({node.op}({render(node.arg)}))"
    if isinstance(node, Binary):
        return f"({render(node.left)} {node.op} {render(node.right)})"
    if isinstance(node, Call):
        return f"{node.fn}({', '.join(render(a) for a in node.args)})"
    raise TypeError(type(node).__name__)


# -- units --------------------------------------------------------------------------------------
def formula_unit(node, unit_of) -> str:
    """The unit of a formula's values from its operands' units (``unit_of(ref) -> str``, each an
    opaque symbol: ``bytes``, ``sec``, ``#``): products and quotients combine them (``bytes / time``
    is ``bytes/sec``; ``cycles / instructions`` of two ``#`` counts has none), a sum keeps the unit
    its terms share, a power with a number raises it.  "" when the values have no unit or when it
    cannot be told: an operand without a unit, a sum of different units, ``log`` of a quantity."""
    u = _unit(node, unit_of)
    if not u:
        return ""
    num = [f"{k}^{_exp_text(e)}" if e != 1 else k for k, e in sorted(u.items()) if e > 0]
    den = [f"{k}^{_exp_text(-e)}" if e != -1 else k for k, e in sorted(u.items()) if e < 0]
    text = "*".join(num) or "1"
    if den:
        text += "/" + (den[0] if len(den) == 1 else "(" + "*".join(den) + ")")
    return text


def _exp_text(e: float) -> str:
    return str(int(e)) if float(e).is_integer() else f"{e:g}"


def _unit(node, unit_of) -> dict | None:
    """A formula's unit as {symbol: exponent} ({} none, None unknown or inconsistent)."""
    if isinstance(node, Num):
        return {}
    if isinstance(node, Total):
        return _unit(node.ref, unit_of)
    if isinstance(node, Ref):
        text = unit_of(node)
        return {text: 1} if text else None
    if isinstance(node, Unary):
        return _unit(node.arg, unit_of)
    if isinstance(node, Binary):
        if node.op in _COMPARISONS:
            return {}
        a, b = _unit(node.left, unit_of), _unit(node.right, unit_of)
        if node.op in ("+", "-"):
            return a if a == b else None
        if node.op in ("^", "**"):
            if a == {}:
                return {}
            if a is None or not isinstance(node.right, Num):
                return None
            return {k: e * node.right.value for k, e in a.items()}
        if a is None or b is None:
            return None
        sign = 1 if node.op == "*" else -1
        out = dict(a)
        for k, e in b.items():
            out[k] = out.get(k, 0) + sign * e
        return {k: e for k, e in out.items() if e != 0}
    if isinstance(node, Call):
        args = [_unit(a, unit_of) for a in node.args]
        if node.fn in ("min", "max", "if"):
            same = args[1:] if node.fn == "if" else args
            return same[0] if all(x == same[0] for x in same) else None
        if node.fn == "abs":
            return args[0]
        if node.fn == "sqrt":
            return None if args[0] is None else {k: e / 2 for k, e in args[0].items()}
        return {} if args[0] == {} else None          # exp, log, log2, log10 of a pure number
    return None


# -- evaluation -----------------------------------------------------------------------------------
def _finite(x):
    """Non-finite intermediate results become NaN: an empty cell stays empty (1/(1/0) is empty)."""
    x = np.asarray(x, dtype=float)
    return np.where(np.isfinite(x), x, np.nan)


def _apply(node, env) -> np.ndarray:
    """Evaluate with ``env(ref_or_total) -> array``: numpy semantics, NaN marks an empty cell."""
    if isinstance(node, Num):
        return _finite(node.value)
    if isinstance(node, (Ref, Total)):
        return _finite(env(node))
    if isinstance(node, Unary):
        a = _apply(node.arg, env)
        return -a if node.op == "-" else a
    if isinstance(node, Binary):
        a, b = _apply(node.left, env), _apply(node.right, env)
        op = node.op
        if op in _COMPARISONS:
            cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                   "==": np.equal, "!=": np.not_equal}[op]
            return np.where(np.isnan(a) | np.isnan(b), np.nan, cmp(a, b).astype(float))
        f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "^": np.power}[op]
        # IEEE pow(1, nan) = 1 and pow(nan, 0) = 1: an empty operand must keep the cell empty
        return np.where(np.isnan(a) | np.isnan(b), np.nan, _finite(f(a, b)))
    if isinstance(node, Call):
        fn = node.fn
        vals = [_apply(a, env) for a in node.args]
        if fn == "if":
            c, x, y = vals
            return np.where(np.isnan(c), np.nan, np.where(c != 0, x, y))
        if fn in ("min", "max"):
            f = np.minimum if fn == "min" else np.maximum  # NaN (empty) propagates
            out = vals[0]
            for v in vals[1:]:
                out = f(out, v)
            return out
        f = {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log2": np.log2,
             "log10": np.log10}[fn]
        return _finite(f(vals[0]))
    raise TypeError(type(node).__name__)


def evaluate_scalar(node, values: Mapping[str, float] | None = None, totals: Mapping[str, float] | None = None):
    """Evaluate an AST on scalars (metric name -> value); None for an empty cell.  For tests/tools."""
    values, totals = values or {}, totals or {}

    def env(n):
        if isinstance(n, Total):
            key = n.ref.name if n.ref.name is not None else f"${n.ref.index}"
            if key not in totals:
                raise PerfcastError(f"no total for {key!r}")
            return float(totals[key])
        key = n.name if n.name is not None else f"${n.index}"
        if key not in values:
            raise PerfcastError(f"no value for {key!r}")
        return float(values[key])

    with np.errstate(all="ignore"):
        v = float(np.asarray(_apply(node, env), dtype=float))
    return v if math.isfinite(v) else None


def _refs(node, out=None) -> list:
    out = [] if out is None else out
    if isinstance(node, (Ref, Total)):
        out.append(node)
    elif isinstance(node, Unary):
        _refs(node.arg, out)
    elif isinstance(node, Binary):
        _refs(node.left, out)
        _refs(node.right, out)
    elif isinstance(node, Call):
        for a in node.args:
            _refs(a, out)
    return out


class _Scoped:
    """Values of an experiment's metrics in a requested scope, computed once each."""

    def __init__(self, exp: Experiment):
        self.exp = exp
        self.keys = [*exp.parameters, "rep", *[c for c in LOCATION_COLUMNS if c in exp.data.columns]]
        self.cache: dict[tuple[str, str], pd.DataFrame] = {}
        self.derived = exp.meta.get("derived", {}) if isinstance(exp.meta.get("derived"), dict) else {}

    def partner(self, name: str, scope: str) -> str | None:
        """The metric holding ``name``'s values in ``scope``: same base name, that scope."""
        return partner(self.exp, name, scope)

    def values(self, name: str, scope: str | None) -> pd.DataFrame:
        """Tidy frame keys + callpath + value of metric ``name`` in ``scope`` (None: as stored)."""
        m = self.exp.metrics[name]
        if scope is None or m.scope == "unknown" or m.scope == scope:
            src, conv = name, None
        elif (p := self.partner(name, scope)) is not None:
            src, conv = p, None
        else:
            if name in self.derived:
                raise PerfcastError(f"derived metric {name!r} has no {scope} values (it is not additive over "
                                    f"the tree); derive it with both scopes")
            src, conv = name, scope
        key = (src, conv or "as-is")
        if key not in self.cache:
            sub = self.exp.data[self.exp.data["metric"] == src]
            if conv is not None:
                # the meta too: a dense table's gaps make converted values missing (Experiment._gapped)
                one = Experiment(self.exp.parameters, sub, [self.exp.metrics[src]], self.exp.tree, self.exp.meta,
                                 validate=False)
                one = one.to_inclusive(src) if conv == "inclusive" else one.to_exclusive(src)
                sub = one.data
            sub = sub[[*self.keys, "callpath", "value"]].astype({"callpath": str})
            if sub.duplicated([*self.keys, "callpath"]).any():
                raise PerfcastError(f"metric {src!r} has several values for one callpath, point, repetition "
                                    f"and location")
            self.cache[key] = sub.reset_index(drop=True)
        return self.cache[key]

    def totals(self, name: str) -> pd.Series:
        """Root inclusive total of ``name`` per point/rep/location (indexed by the keys)."""
        m = self.exp.metrics[name]
        if m.scope == "unknown":
            raise PerfcastError(f"metric {name!r} has scope 'unknown': its total over the tree is undefined")
        d = self.values(name, "inclusive")
        stored = self.exp.data.loc[self.exp.data["metric"] == name, "callpath"].astype(str).unique()
        # topmost of what was stored too: a dense table's root whose inclusive value is missing at
        # every location (Experiment._gapped) must not hand the total to its children
        top = topmost(self.exp.tree, set(d["callpath"].unique()) | set(stored))
        d = d[d["callpath"].isin(top)]
        if not self.keys:
            return pd.Series([d["value"].sum()])
        loc = [c for c in LOCATION_COLUMNS if c in self.keys]
        if absent_location_is_missing(self.exp):
            # a location (or repetition) lacking a topmost's inclusive value (a gap under it) has no
            # whole-program total: left out, the total is reduced over the locations (repetitions)
            # that have one (not a 0 there)
            n = d.groupby(self.keys, sort=False)["callpath"].nunique()
            point = [k for k in self.keys if k not in loc and k != "rep"]
            need = n.groupby(level=point, sort=False).transform("max") if point else n.max()
            d = d.set_index(self.keys).loc[n[n == need].index].reset_index()
        return d.groupby(self.keys, sort=False)["value"].sum()


#: suffixes pairing an exclusive metric with its inclusive twin (Hatchet/Thicket, HPCToolkit)
PAIR_SUFFIXES = {" (inc)": "inclusive", " (exc)": "exclusive", " (I)": "inclusive", " (E)": "exclusive"}


def base_name(name: str) -> str:
    for suf in PAIR_SUFFIXES:
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def partner(exp: Experiment, name: str, scope: str) -> str | None:
    """The metric with ``name``'s base name (``time``/``time (inc)``, ``CPUTIME (E)``/``CPUTIME (I)``)
    and the given scope, or None."""
    base = base_name(name)
    for cand in (base, *(base + suf for suf, sc in PAIR_SUFFIXES.items() if sc == scope)):
        if cand != name and cand in exp.metrics and exp.metrics[cand].scope == scope:
            return cand
    return None


def topmost(tree, present) -> list[str]:
    """Callpaths in ``present`` none of whose ancestors is in ``present``, in tree order."""
    out = []
    for r in tree.roots():
        stack = [r]
        while stack:
            p = stack.pop()
            if p in present:
                out.append(p)  # its subtree is covered
            else:
                stack.extend(reversed(tree.children(p)))
    return out


def _resolve_name(exp: Experiment, ref: Ref, text: str) -> str:
    names = list(exp.metrics)
    if ref.index is not None:
        if ref.index >= len(names):
            raise _error(text, ref.pos, f"${ref.index}: the experiment has {len(names)} metric(s), "
                                        f"$0..${len(names) - 1} (see `perfcast metrics`)")
        return names[ref.index]
    if ref.name not in exp.metrics:
        import difflib

        close = difflib.get_close_matches(ref.name, names, 3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; metrics: {', '.join(names[:12])}"
        raise _error(text, ref.pos, f"no metric {ref.name!r}{hint}")
    return ref.name


def derive(exp: Experiment, specs: Sequence[str | Derivation], scopes: str = "both",
           unit: str = "") -> tuple[Experiment, list[dict]]:
    """Add derived metrics to ``exp``; returns the new experiment and one report per new metric.

    ``scopes``: ``both`` (``NAME`` exclusive and ``NAME (inc)`` inclusive), ``exclusive`` or
    ``inclusive`` (one metric ``NAME``).  Derivations are applied in order, so a later formula may
    use an earlier derived metric.  Each report holds name, scope, formula, values, empty.
    """
    if scopes not in ("both", "inclusive", "exclusive"):
        raise PerfcastError(f"scope {scopes!r}: use both, inclusive or exclusive")
    if unit and len(specs) > 1:
        # one unit for every formula labelled a rate and a count alike ("a = bytes / time", "b = cycles")
        raise PerfcastError(f"--unit {unit!r} with {len(specs)} derivations: it would label every one of them; "
                            f"give it with one --derive (the others take their formulas' units)")
    reports: list[dict] = []
    for spec in specs:
        d = spec if isinstance(spec, Derivation) else parse(spec)
        exp, rep = _derive_one(exp, d, scopes, unit)
        reports.extend(rep)
    return exp, reports


def _derive_one(exp: Experiment, d: Derivation, scopes: str, unit: str) -> tuple[Experiment, list[dict]]:
    text = d.text or d.name
    refs = _refs(d.expr)
    resolved: dict[int, str] = {}
    for r in refs:
        ref = r.ref if isinstance(r, Total) else r
        resolved[id(ref)] = _resolve_name(exp, ref, text)
    scoped = _Scoped(exp)
    # the formula as stored and shown: positional $n replaced by the metric's name
    formula = render(_named(d.expr, resolved))
    plain = [r for r in refs if isinstance(r, Ref)]
    known = {exp.metrics[resolved[id(r)]].scope for r in plain}
    if plain and known == {"unknown"} and not any(r.pin for r in plain):
        targets = [("unknown", d.name)]
    elif scopes == "both":
        targets = [("exclusive", d.name), ("inclusive", d.name + INC_SUFFIX)]
    else:
        targets = [(scopes, d.name)]
    for _, name in targets:
        if name in exp.metrics:
            raise PerfcastError(f"the experiment already has a metric named {name!r}; choose another name")
    keys = scoped.keys
    frames, reports, new_metrics = [], [], []
    for scope, name in targets:
        operands = {}
        for r in plain:
            sc = r.pin and ("inclusive" if r.pin == "inc" else "exclusive") or (None if scope == "unknown" else scope)
            try:
                operands[id(r)] = scoped.values(resolved[id(r)], sc)
            except PerfcastError as e:
                raise _error(text, r.pos, e.message) from None
        # the rows: every (keys, callpath) where some operand has a value
        if operands:
            rows = pd.concat([f[[*keys, "callpath"]] for f in operands.values()], ignore_index=True)
        else:
            rows = exp.data[[*keys, "callpath"]].astype({"callpath": str})
        rows = rows.drop_duplicates(ignore_index=True)
        group_of_rows = _group_index(rows, keys)
        cols: dict[int, np.ndarray] = {}
        unseen = np.zeros(len(rows), dtype=bool)   # cells where an operand's collector never saw the callpath
        for rid, f in operands.items():
            v = rows.merge(f, on=[*keys, "callpath"], how="left")["value"].to_numpy(dtype=float)
            # absent at a callpath but measured in the same point/rep/location: 0 (sparse profile), where
            # the metric's collector could see the callpath (experiment.covered); missing elsewhere
            measured = _group_index(f[keys].drop_duplicates(), keys)
            absent = np.isnan(v)
            seen = covered(exp, resolved[rid], rows["callpath"].to_numpy()) if absent.any() else ~absent
            unseen |= absent & ~seen
            v = np.where(absent & group_of_rows.isin(measured) & seen, 0.0, v)
            cols[rid] = v
        for t in refs:
            if isinstance(t, Total):
                n = resolved[id(t.ref)]
                try:
                    tot = scoped.totals(n)
                except PerfcastError as e:
                    raise _error(text, t.pos, e.message) from None
                if keys:
                    cols[id(t)] = rows[keys].merge(tot.rename("value").reset_index(), on=keys, how="left")[
                        "value"].to_numpy(dtype=float)
                else:
                    cols[id(t)] = np.full(len(rows), float(tot.iloc[0]) if len(tot) else np.nan)

        def env(node):
            return cols[id(node)]

        with np.errstate(all="ignore"):
            val = np.broadcast_to(_apply(d.expr, env), (len(rows),))
        ok = np.isfinite(val)
        out = rows[ok].copy()
        out["metric"] = name
        out["value"] = val[ok]
        frames.append(out)
        reports.append({"name": name, "scope": scope, "formula": formula, "values": int(ok.sum()),
                        "empty": int((~ok).sum()), "not_measured": int((~ok & unseen).sum())})
        new_metrics.append(Metric(name, unit or formula_unit(d.expr, lambda r: exp.metrics[resolved[id(r)]].unit),
                                  "other", scope, f"derived: {formula}"))
    if all(len(f) == 0 for f in frames):
        unseen = max(r["not_measured"] for r in reports)
        raise _error(text, len(d.name), f"{d.name!r} is empty everywhere (every cell divides by zero or "
                                        f"has no operand values" + (f"; at {unseen}, an operand's collector never "
                                                                    f"saw the callpath" if unseen else "") + ")")
    base = exp.data.astype({"callpath": str, "metric": str})
    data = pd.concat([base, *[f[base.columns] for f in frames]], ignore_index=True)
    meta = copy.deepcopy(exp.meta)
    derived = meta.get("derived") if isinstance(meta.get("derived"), dict) else {}
    # the operands whose absence the derived metric's inherits (experiment.absent_means_not_run)
    names = list(dict.fromkeys(resolved[id(r.ref if isinstance(r, Total) else r)] for r in refs))
    for rep in reports:
        derived[rep["name"]] = {"formula": rep["formula"], "scope": rep["scope"], "definition": text,
                                "operands": names}
    meta["derived"] = derived
    # a derived metric is seen where all its operands' collectors saw the callpath
    covs = [c for c in (metric_coverage(exp, resolved[id(r.ref if isinstance(r, Total) else r)]) for r in refs)
            if c is not None]
    if covs:
        meta[COVERAGE] = [*(meta.get(COVERAGE) or []), {"metrics": [r["name"] for r in reports],
                                                       "callpaths": sorted(frozenset.intersection(*covs))}]
    metrics = [*exp.metrics.values(), *new_metrics]
    return Experiment(exp.parameters, data, metrics, exp.tree, meta), reports


def additive(node) -> bool:
    """Whether a formula's values add up over ranks, threads and callpaths as its operands' do: a
    sum of metric references with constant coefficients (``a + 2 * b``, ``time / 1e6``, ``-x``).
    A ratio or product of metrics, a function, a comparison, a total (``@x``, each location's own)
    or a constant term (added once per rank) does not: its sum over ranks means nothing."""
    def const(n) -> bool:
        if isinstance(n, Num):
            return True
        if isinstance(n, Unary):
            return const(n.arg)
        if isinstance(n, Binary):
            return const(n.left) and const(n.right)
        return isinstance(n, Call) and all(map(const, n.args)) and n.fn not in ("inc", "exc")

    def linear(n) -> bool:
        if isinstance(n, Ref):
            return True
        if isinstance(n, Unary):
            return n.op in "+-" and linear(n.arg)
        if isinstance(n, Binary):
            if n.op in ("+", "-"):
                return linear(n.left) and linear(n.right)
            if n.op == "*":
                return (const(n.left) and linear(n.right)) or (linear(n.left) and const(n.right))
            if n.op == "/":
                return linear(n.left) and const(n.right)
        return isinstance(n, Call) and n.fn in ("inc", "exc") and all(map(linear, n.args))

    return linear(node)


def operands(node) -> list[str]:
    """The metric names a formula refers to, in order of first appearance."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop(0)
        if isinstance(n, Ref) and n.name is not None and n.name not in out:
            out.append(n.name)
        elif isinstance(n, Total):
            stack.insert(0, n.ref)
        elif isinstance(n, Unary):
            stack.insert(0, n.arg)
        elif isinstance(n, Binary):
            stack[:0] = [n.left, n.right]
        elif isinstance(n, Call):
            stack[:0] = list(n.args)
    return out


def refuse_non_additive(exp: Experiment, metric: str, what: str) -> None:
    """PerfcastError when ``metric`` was derived by a formula whose values do not add up
    (:func:`additive`: a rate, a ratio such as CPI, a share): ``what`` (a view's sums over ranks
    and callpaths, shares of the root) cannot be formed from it."""
    derived = exp.meta.get("derived") if isinstance(exp.meta.get("derived"), dict) else {}
    entry = derived.get(metric)
    formula = entry.get("formula") if isinstance(entry, dict) else None
    if not isinstance(formula, str):
        return
    try:
        node = parse_formula(formula)
    except PerfcastError:
        return
    if additive(node):
        return
    ops = ", ".join(operands(node)) or "its operands"
    raise PerfcastError(f"{metric!r} is derived as {formula}, which is not a sum of metrics (a ratio, rate or "
                        f"function): its values do not add up over ranks or callpaths, so {what} would mean "
                        f"nothing; use its operands ({ops}) instead")


def _named(node, resolved: dict):
    """``node`` with every reference spelled by the metric name it resolved to."""
    if isinstance(node, Ref):
        return Ref(resolved[id(node)], None, node.pin, node.pos)
    if isinstance(node, Total):
        return Total(_named(node.ref, resolved), node.pos)
    if isinstance(node, Unary):
        return Unary(node.op, _named(node.arg, resolved), node.pos)
    if isinstance(node, Binary):
        return Binary(node.op, _named(node.left, resolved), _named(node.right, resolved), node.pos)
    if isinstance(node, Call):
        return Call(node.fn, tuple(_named(a, resolved) for a in node.args), node.pos)
    return node


def _group_index(frame: pd.DataFrame, keys: list[str]) -> pd.Index:
    if not keys:
        return pd.Index(np.zeros(len(frame), dtype=np.int64))
    return pd.MultiIndex.from_frame(frame[keys]) if len(keys) > 1 else pd.Index(frame[keys[0]])

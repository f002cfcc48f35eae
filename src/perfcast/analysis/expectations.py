"""Growth-order expectations such as ``"solve*: O(p log p)"`` and their comparison with models.

An order is, per parameter, the pair (polynomial exponent, log exponent) of its dominant factor,
compared lexicographically: ``p^(1/2) log^2 p`` < ``p^(2/3)`` < ``p`` < ``p log p``.  A model
*exceeds* an expectation when, for some parameter, its lead-order factor is above the expected
one (performance regression testing in the sense of "Exascaling your library", ICS'15).
Multi-parameter orders are compared per parameter: ``O(p n)`` allows p to grow linearly and n to
grow linearly.

Grammar of the inside of ``O(...)``: factors separated by spaces, ``*`` or ``·``; a factor is a
number (ignored), ``p``, ``p^2``, ``p**(3/2)``, ``p^1.5``, ``sqrt(p)``, ``cbrt(p)``,
``log p``, ``log(p)``, ``log2(p)``, ``log^2 p``, ``log(p)^2``, ``log2^2(p)``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from ..errors import PerfcastError

Order = dict[str, tuple[Fraction, int]]

_NUM = r"(?:\d+(?:\.\d+)?(?:/\d+)?)"
_EXP = rf"(?:\^|\*\*)\s*(?:\(\s*(?P<{{n}}>-?{_NUM})\s*\)|(?P<{{n}}2>-?{_NUM}))"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"

_TOKEN = re.compile(
    rf"""\s*(?:
      (?P<log>log2?|ln)\s*(?:{_EXP.format(n='le')})?\s*(?:\(\s*(?P<lp>{_NAME})\s*\)|\s(?P<lp2>{_NAME}))
          \s*(?:{_EXP.format(n='lpe')})?
    | (?P<root>sqrt|cbrt)\s*\(\s*(?P<rp>{_NAME})\s*\)
    | (?P<num>{_NUM})
    | (?P<par>{_NAME})\s*(?:{_EXP.format(n='pe')})?
    )\s*(?:\*|·|\\cdot)?""", re.X)


def _frac(text: str | None) -> Fraction | None:
    if text is None:
        return None
    try:
        return Fraction(text).limit_denominator(1000) if "." in text else Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise PerfcastError(f"bad exponent {text!r}", where="expectation") from None


def parse_order(text: str, parameters: Sequence[str] | None = None) -> Order:
    """``"O(p^2 log p)"`` (or the bare ``"p^2 log p"``) -> {"p": (Fraction(2), 1)}."""
    s = text.strip()
    m = re.fullmatch(r"O\s*\((.*)\)", s, re.S)
    body = m.group(1) if m else s
    order: Order = {}
    pos = 0
    body = body.strip()
    if not body:
        raise PerfcastError(f"empty growth order in {text!r}", where="expectation")
    while pos < len(body):
        t = _TOKEN.match(body, pos)
        if not t or t.end() == pos:
            raise PerfcastError(f"cannot read growth order {text!r} at {body[pos:]!r}", where="expectation")
        pos = t.end()
        g = t.groupdict()
        if g["log"]:
            p = g["lp"] or g["lp2"]
            if p in ("O", "log", "ln", "sqrt", "cbrt"):   # log log p was read as log of a parameter 'log'
                raise PerfcastError(f"cannot read growth order {text!r}: {g['log'].strip()} of {p}(...) is not a "
                                    "PMNF term (p^i log2(p)^j)", where="expectation")
            k1 = _frac(g["le"] or g["le2"])
            k2 = _frac(g["lpe"] or g["lpe2"])
            k = (k1 or 1) * (k2 or 1)
            if k.denominator != 1 or k < 0:
                raise PerfcastError(f"log exponents must be whole numbers >= 0 in {text!r}", where="expectation")
            i, j = order.get(p, (Fraction(0), 0))
            order[p] = (i, j + int(k))
        elif g["root"]:
            p = g["rp"]
            i, j = order.get(p, (Fraction(0), 0))
            order[p] = (i + (Fraction(1, 2) if g["root"] == "sqrt" else Fraction(1, 3)), j)
        elif g["num"]:
            continue
        else:
            p = g["par"]
            if p in ("O", "log", "ln", "sqrt", "cbrt"):
                raise PerfcastError(f"cannot read growth order {text!r}", where="expectation")
            e = _frac(g["pe"] or g["pe2"])
            i, j = order.get(p, (Fraction(0), 0))
            order[p] = (i + (e if e is not None else 1), j)
    if parameters is not None:
        unknown = [p for p in order if p not in parameters]
        if unknown:
            raise PerfcastError(f"growth order {text!r} names unknown parameter(s) {', '.join(unknown)}; "
                                f"the experiment has: {', '.join(parameters) or '(none)'}", where="expectation")
    return order


def order_str(order: Mapping[str, tuple[Fraction, int]]) -> str:
    parts = []
    for p, (i, j) in order.items():
        if i != 0:
            parts.append(p if i == 1 else f"{p}^{i}" if i.denominator == 1 and i > 0 else f"{p}^({i})")
        if j:
            parts.append(f"log {p}" if j == 1 else f"log^{j} {p}")
    return "O(" + (" ".join(parts) or "1") + ")"


def exceeds(model_order: Mapping[str, tuple[Fraction, int]], expected: Mapping[str, tuple[Fraction, int]]
            ) -> list[str]:
    """Parameters along which ``model_order`` grows faster than ``expected`` (empty = within)."""
    zero = (Fraction(0), 0)
    return [p for p, o in model_order.items() if tuple(o) > tuple(expected.get(p, zero))]


@dataclass(frozen=True)
class Expectation:
    pattern: str
    order: Order
    text: str


def parse_expectation(text: str, parameters: Sequence[str] | None = None) -> Expectation:
    """``"CALLPATH_GLOB: O(...)"``; the glob may itself contain ``:`` (the order follows the last
    ``": O("``); without a glob the expectation applies to every callpath."""
    s = text.strip()
    m = re.match(r"^(.*?):\s*(O\s*\(.*\))\s*$", s, re.S)
    if m:
        pattern, order = m.group(1).strip(), m.group(2)
    elif s.startswith("O"):
        pattern, order = "*", s
    else:
        raise PerfcastError(f"expectation {text!r} is not 'CALLPATH_GLOB: O(...)'", where="expectation")
    if not pattern:
        pattern = "*"
    return Expectation(pattern, parse_order(order, parameters), s)


@dataclass(frozen=True)
class Violation:
    callpath: str
    metric: str
    expectation: str
    expected: str
    found: str
    parameters: tuple[str, ...]
    formula: str

    def to_dict(self) -> dict:
        return {"callpath": self.callpath, "metric": self.metric, "expectation": self.expectation,
                "expected": self.expected, "found": self.found, "parameters": list(self.parameters),
                "formula": self.formula}


def check(series_models: Iterable, expectations: Sequence[Expectation]) -> tuple[list[Violation], int]:
    """Compare models (objects with ``callpath``, ``metric``, ``model``) with expectations; returns
    the violations and the number of (model, expectation) pairs checked.  Models without enough
    points ("insufficient") are not judged.  The fit's series are read from their groups' arrays
    (:mod:`perfcast.fit.columns`: status, lead orders, the violators' formulas): each distinct lead
    order is compared once per expectation."""
    from ..fit import columns

    series = list(series_models)
    parts = columns.split(series)
    ok = columns.status_ok(series, parts).tolist()
    code, orders = columns.lead_codes(series, parts)
    code = code.tolist()
    zero = (Fraction(0), 0)
    expected = [order_str(e.order) for e in expectations]
    verdicts: dict = {}
    found_at, checked = [], 0
    for s, sm in enumerate(series):
        for k, e in enumerate(expectations):
            if not fnmatch.fnmatchcase(sm.callpath, e.pattern):
                continue
            if not ok[s]:
                continue
            checked += 1
            v = verdicts.get((code[s], k))
            if v is None:
                found = orders[code[s]]
                v = verdicts[(code[s], k)] = (tuple(exceeds(found, e.order)),
                                              order_str({p: o for p, o in found.items() if o != zero}))
            if v[0]:
                found_at.append((s, k, v))
    bad = sorted({s for s, _, _ in found_at})
    texts = dict(zip(bad, columns.formulas([series[s] for s in bad])))
    out = [Violation(series[s].callpath, series[s].metric, expectations[k].text, expected[k], v[1], v[0], texts[s])
           for s, k, v in found_at]
    return out, checked

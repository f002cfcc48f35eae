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
        raise PerfcastError(f"{text!r} is not 'CALLPATH_GLOB: O(...)'", where="expectation")
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
    #: the regime of a segmented model the violation is in (``"p <= 128"``), None: the whole series
    regime: str | None = None

    def to_dict(self) -> dict:
        return {"callpath": self.callpath, "metric": self.metric, "expectation": self.expectation,
                "expected": self.expected, "found": self.found, "parameters": list(self.parameters),
                "formula": self.formula, "regime": self.regime}


@dataclass(frozen=True)
class Unchecked:
    """A matched series whose growth could not be judged (wholly, or in its last regime)."""
    callpath: str
    metric: str
    reason: str
    #: the regimes of a segmented model that were judged (``["p <= 128"]``); empty: none
    regimes_checked: tuple[str, ...] = ()
    #: a model that does not follow the measured growth: the ranking's per-process cost measured at
    #: the smallest and the largest run and the model's at the target, with their points; else None
    growth: dict | None = None

    def to_dict(self) -> dict:
        return {"callpath": self.callpath, "metric": self.metric, "reason": self.reason,
                "regimes_checked": list(self.regimes_checked), "growth": self.growth}


@dataclass(frozen=True)
class CheckResult:
    """The verdict of :func:`check`: ``fail`` when a judged model (or regime) grows faster than
    expected, else ``incomplete`` when a matched series could not be judged (entirely or in its
    last regime: a regression there would go unseen), else ``pass``."""
    violations: list[Violation]
    checked: int
    unchecked: list[Unchecked]

    @property
    def status(self) -> str:
        return "fail" if self.violations else "incomplete" if self.unchecked else "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


#: ``perfcast check``'s exit codes (its --help documents them)
EXIT_CODES = {"pass": 0, "fail": 1, "incomplete": 3}


def growth_ends(columns: Mapping, upper: Mapping[str, float]) -> dict | None:
    """``check``'s ``ends`` from :func:`perfcast.analysis.ranking.rank_order`'s ``cost`` columns
    (None when it ranked by growth: nothing known about the measured range) and the largest
    measured value of each parameter ``upper``."""
    if columns.get("by") != "cost":
        return None
    return {"first": columns["per_process_first"], "last": columns["per_process_now"],
            "target": columns["per_process"], "first_at": columns["first_at"],
            "last_at": {**columns["at"], **upper}, "target_at": columns["at"]}


def _regimes(model) -> list[tuple[str, object]]:
    """(label, model) of the judged regimes of a segmented model whose last regime has too few
    points (the regimes with a model of their own); empty for any other model."""
    segs = getattr(model, "segments", None)
    if not segs:
        return []
    p = model.parameters[0]
    labels = (f"{p} <= {float(model.change[0]):g}", f"{p} >= {float(model.change[1]):g}")
    return [(lab, m) for lab, m in zip(labels, segs) if m.status == "ok"]


#: the share of the competing hypotheses' weight a growth beyond the expected order needs before a
#: check fails on it: with less, the data cannot tell it from growth within the order
DECIDED = 0.5


def _undecided(hypotheses, expected: Order) -> str | None:
    """Why a series whose selected hypothesis exceeds ``expected`` cannot be judged: its competing
    hypotheses (``hypotheses``: [(weight, lead order)], the selected one first,
    :func:`perfcast.fit.columns.hypothesis_leads`), which fit its data almost as well, put at
    least half of the weight (:data:`DECIDED`) within the expected order -- CoMD's run time, O(n^3)
    by its source, measured on shared cores: the selected n^3 log2(n) holds 19% of the weight,
    hypotheses within O(n^3) most of the rest.  None when the excess is decided (or there are no
    competing hypotheses)."""
    if not hypotheses or len(hypotheses) < 2:
        return None
    within = [(w, o) for w, o in hypotheses[1:] if not exceeds(o, expected)]
    share = sum(w for w, _ in within)
    if share < DECIDED:
        return None
    zero = (Fraction(0), 0)
    shown = lambda o: order_str({q: v for q, v in o.items() if v != zero})  # noqa: E731
    best = max(within, key=lambda x: x[0])[1]
    return (f"the data cannot tell its growth from {order_str(expected)}: hypotheses within it hold "
            f"{share:.0%} of the weight (e.g. {shown(best)}), the selected one ({shown(hypotheses[0][1])}) "
            f"{hypotheses[0][0]:.0%}")


def _two_values(laws: Mapping[str, str] | None, along: Sequence[str]) -> str | None:
    """Why a growth beyond the expected order found along the parameters ``along`` cannot be
    judged: the series' law along each of them rests on two values (``laws``:
    :func:`perfcast.analysis.fitcheck.two_value_laws`' warnings: a law through two points, or one
    power through the two levels of a parameter measured at two values -- the fit's own warning
    says its form cannot be checked).  LULESH's MPI_Isend calls summed over ranks, 0 at p = 1 and
    596, 3226 at p = 8, 27 (by its source 251 p - 489 p^(2/3) + 306 p^(1/3) - 68 over five
    iterations: O(p)), got ``(p >= 8) * (10.27 + 31.87 p^(7/5))``, the one power through p = 8, 27.
    None when the growth along some parameter of ``along`` rests on more values."""
    if not laws or not along:
        return None
    if "*" in laws:
        return laws["*"]
    if any(p not in laws for p in along):
        return None
    return "; ".join(dict.fromkeys(laws[p] for p in along))


def _why(model) -> str:
    notes = getattr(model, "notes", ())
    return "; ".join(notes[:2]) or f"insufficient points: need {model.needed}"


def _growth(ends: Mapping | None, s: int, noise) -> dict | None:
    """The measured growth of series ``s`` that its model does not follow
    (:func:`perfcast.analysis.fitcheck.follows_growth`), None when it follows or nothing is known."""
    from .fitcheck import follows_growth

    if ends is None:
        return None
    a, b, t = (float(ends[k][s]) for k in ("first", "last", "target"))
    if follows_growth(a, b, t, noise):
        return None
    return {"first": a, "first_at": dict(ends["first_at"]), "last": b, "last_at": dict(ends["last_at"]),
            "model_at_target": t, "target": dict(ends["target_at"])}


def growth_reason(g: Mapping) -> str:
    """The reason a series whose model does not follow its measured growth is not checked."""
    at = lambda pt: ",".join(f"{k}={v:g}" for k, v in pt.items())  # noqa: E731
    times = f"x{g['last'] / g['first']:.2g} " if g["first"] > 0 else ""
    return (f"the model does not follow the measured growth ({times}from {at(g['first_at'])} to "
            f"{at(g['last_at'])}: {g['first']:.4g} -> {g['last']:.4g}); it gives {g['model_at_target']:.4g} at "
            f"{at(g['target'])}, below the last measurement, so its lead order says nothing about how the "
            "series grows")


def check(series_models: Iterable, expectations: Sequence[Expectation], ends: Mapping | None = None,
          digits=None) -> CheckResult:
    """Compare models (objects with ``callpath``, ``metric``, ``model``) with expectations.

    A series whose model is usable is judged by its lead order.  A poor fit
    (:func:`perfcast.analysis.fitcheck.poor_fits`: the model does not follow the data) is listed as
    unchecked with its warning: its lead order says nothing about how the data grow.  So is a growth
    beyond the expected order found only along parameters whose law rests on two values
    (:func:`_two_values`: its form cannot be checked), and a model
    that does not follow the measured growth (:func:`perfcast.analysis.fitcheck.follows_growth`, the
    rule the report's "What grows?" answer uses), judged from ``ends``: the ranking's per-process
    cost of each series (by position) measured at the smallest (``first``) and the largest run
    (``last``) and the model's at the target (``target``), with the points ``first_at``,
    ``last_at`` and ``target_at`` (:func:`growth_ends`; None: not judged).  One without a
    usable model is not passed over either: a segmented model whose last regime is the mean of its
    points (saved before such regimes became two-point laws) is judged in the regimes that have a
    model (a violation there fails the check) and is listed as unchecked, as is any other series
    without a model.  The fit's series are read from their groups' arrays
    (:mod:`perfcast.fit.columns`: status, lead orders, the violators' formulas): each distinct lead
    order is compared once per expectation.  ``digits``: series -> the significant digits of their
    formulas (:meth:`perfcast.modelset.ModelSet.formula_digits`, as every other output prints them;
    default 4); a regime's formula keeps 4."""
    from ..fit import columns

    from .fitcheck import fit_warnings, poor_fits, two_value_laws

    series = list(series_models)
    parts = columns.split(series)
    ok = columns.status_ok(series, parts).tolist()
    # a model that does not follow its data (a poor fit: a step, or noise beyond any trend) cannot
    # tell how the series grows: LULESH's MPI_Waitall, 0.018 s -> 2.6 s per rank over the runs, is a
    # flat poor fit and would pass O(1)
    poor = poor_fits(series, parts).tolist()
    code, orders = columns.lead_codes(series, parts)
    code = code.tolist()
    zero = (Fraction(0), 0)
    expected = [order_str(e.order) for e in expectations]
    verdicts: dict = {}
    found_at, checked = [], 0
    partial: list = []          # (series, expectation, regime label, (params, found), formula)
    leads: dict = {}            # series -> its hypotheses' weights and lead orders (violators only)
    twos: dict = {}             # series -> its laws on two values (violators only; two_value_laws)
    unchecked: list[Unchecked] = []

    def judge(found, k):
        return (tuple(exceeds(found, expectations[k].order)),
                order_str({p: o for p, o in found.items() if o != zero}))

    for s, sm in enumerate(series):
        # a callpath's own name is that callpath even with glob characters ("app->[unknown]: O(1)")
        matched = [k for k, e in enumerate(expectations)
                   if sm.callpath == e.pattern or fnmatch.fnmatchcase(sm.callpath, e.pattern)]
        if not matched:
            continue
        if ok[s] and poor[s] and not getattr(sm.model, "segments", None):
            unchecked.append(Unchecked(sm.callpath, sm.metric, "; ".join(fit_warnings(sm.model))))
            continue
        if ok[s] and ends is not None and ends["last"][s] > ends["first"][s] and ends["target"][s] < ends["last"][s]:
            # a candidate by the rule's cheap part: its model (and noise) built for it only
            q = getattr(sm.model, "quality", None)
            g = _growth(ends, s, None if q is None else q.noise)
            if g is not None:
                unchecked.append(Unchecked(sm.callpath, sm.metric, growth_reason(g), growth=g))
                continue
        if not ok[s]:
            model = sm.model
            regimes = _regimes(model)
            for k in matched:
                if regimes:
                    checked += 1
                for lab, m in regimes:
                    v = judge(m.lead_order(), k)
                    if v[0]:
                        partial.append((s, k, lab, v, m.formula()))
            unchecked.append(Unchecked(sm.callpath, sm.metric, _why(model), tuple(lab for lab, _ in regimes)))
            continue
        for k in matched:
            v = verdicts.get((code[s], k))
            if v is None:
                v = verdicts[(code[s], k)] = judge(orders[code[s]], k)
            if v[0]:
                if s not in twos:
                    twos.update({s: None, **two_value_laws(series, [s], parts)})
                why = _two_values(twos[s], v[0])
                if why is not None:  # a growth the data cannot show: neither passed nor failed
                    unchecked.append(Unchecked(sm.callpath, sm.metric, why))
                    continue
                if s not in leads:
                    leads.update(columns.hypothesis_leads(series, [s], parts))
                why = _undecided(leads.get(s), expectations[k].order)
                if why is not None:  # neither passed nor failed
                    unchecked.append(Unchecked(sm.callpath, sm.metric, why))
                    continue
                found_at.append((s, k, v))
            checked += 1
    bad = sorted({s for s, _, _ in found_at})
    shown = [series[s] for s in bad]
    texts = dict(zip(bad, columns.formulas(shown, digits=4 if digits is None or not shown else digits(shown))))
    out = [Violation(series[s].callpath, series[s].metric, expectations[k].text, expected[k], v[1], v[0], texts[s])
           for s, k, v in found_at]
    out += [Violation(series[s].callpath, series[s].metric, expectations[k].text, expected[k], v[1], v[0], text, lab)
            for s, k, lab, v, text in partial]
    return CheckResult(out, checked, unchecked)

"""Columnar views of fitted series: what the model set's tables read (status, constant, terms,
quality, formulas, values and prediction intervals at points, growth keys, lead orders), taken
from the fit's group arrays for series whose Model objects are not built
(:class:`perfcast.fit.series.SeriesModel` builds them on first use), from the models for the
others.  Every value is what the Model the series would build gives
(the same floats, the same texts): the models and these views share :meth:`GroupFit._build`'s
layout (terms in hypothesis order, coefficient ``1 + t`` for the t-th used term) and the
measured lines' factors (``GroupFit.lines``, :mod:`perfcast.fit.lines`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .core import GroupFit
from .lines import line_dicts
from .model import Model, Term, factors_at, render_rows, roundoff_rows, values_at
from ..table import arrow_array, arrow_scalar, arrow_strings


def split(series: Sequence) -> tuple[list[tuple[GroupFit, np.ndarray, np.ndarray]], list[int]]:
    """([(group, positions in ``series``, rows in the group)], positions of the other series).
    The functions below take it as ``parts`` when already computed for the same ``series``."""
    from .series import SeriesModel, pending_rows

    fast = pending_rows(series)
    if fast is not None:
        return _apart(series, fast)
    parts: dict = {}
    others = []
    for s, sm in enumerate(series):
        if type(sm) is SeriesModel:
            if sm._model is not None:
                others.append(s)
                continue
            g, r = sm._group, sm._row
        else:
            pend = getattr(sm, "pending", None)
            src = pend() if pend is not None else None
            if src is None:
                others.append(s)
                continue
            g, r = src
        e = parts.get(id(g))
        if e is None:
            e = parts[id(g)] = (g, [], [])
        e[1].append(s)
        e[2].append(r)
    return _apart(series, ([(g, np.asarray(p, dtype=np.int64), np.asarray(r, dtype=np.int64))
                            for g, p, r in parts.values()], others))


def _apart(series: Sequence, parts: tuple) -> tuple:
    """``parts`` with the series of groups whose models are 0 below a process count
    (``GroupFit.zero_below``, :func:`perfcast.fit.core.not_running_first`) and the series with a
    drift per parameter (``GroupFit.drift_along``) among the others: their Model objects are built
    and read (the formula, value and interval say the exception), not the group's arrays."""
    groups, others = parts
    if not any(g.zero_below is not None or g.zero_from is not None or g.drift_along is not None
               for g, _, _ in groups):
        return parts
    keep, more = [], list(others)
    for g, pos, rows in groups:
        if g.zero_below is None and g.zero_from is None:
            if g.drift_along is not None:
                # a drift per parameter (``Model.drift_along``): those rows' models are built
                own = ~np.isnan(g.drift_along[rows]).all(axis=1)
                if own.any():
                    more.extend(pos[own].tolist())
                    pos, rows = pos[~own], rows[~own]
            if len(pos):
                keep.append((g, pos, rows))
        else:
            more.extend(pos.tolist())
    return keep, sorted(more)


def take(parts, size: int, idx: np.ndarray):
    """:func:`split` of ``[series[i] for i in idx]`` from ``parts``, the split of ``series``
    (``size`` items): the groups in order of first appearance in ``idx``, positions ascending."""
    groups, others = parts
    which = np.full(size, -1, dtype=np.int64)
    row = np.zeros(size, dtype=np.int64)
    for u, (_, pos, rows) in enumerate(groups):
        which[pos] = u
        row[pos] = rows
    w = which[idx]
    present, first = np.unique(w[w >= 0], return_index=True)
    out = []
    for u in present[np.argsort(first, kind="stable")].tolist():
        sel = np.flatnonzero(w == u)
        out.append((groups[u][0], sel, row[idx[sel]]))
    return out, np.flatnonzero(w < 0).tolist()


def _patterns(g: GroupFit) -> tuple[np.ndarray, list[tuple]]:
    """Per row of ``g``: the number of its best hypothesis' pattern, and per pattern the factors
    of its terms (as :meth:`GroupFit._build` builds them; insufficient rows have no terms)."""
    cached = g.__dict__.get("_patterns")
    if cached is not None:
        return cached
    S, _, K, m = g.hyp.shape
    h = g.hyp[:, 0].reshape(S, K * m).astype(np.int64) + 1
    h[g.status != 0] = 0
    base = len(g.blocks) + 1
    if K * m * np.log2(base) < 62:
        code = h @ (base ** np.arange(K * m, dtype=np.int64))
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(h, axis=0, return_index=True, return_inverse=True)
    params, blocks = g.parameters, g.blocks
    facs = []
    for r in first.tolist():
        hv = (h[r] - 1).tolist()
        terms = []
        if m == 1:
            for b in hv:
                if b >= 0:
                    terms.append(((params[0], blocks[b][0], blocks[b][1]),))
        else:
            for t in range(K):
                f = tuple((params[p], blocks[b][0], blocks[b][1]) for p, b in enumerate(hv[t * m:(t + 1) * m]) if b >= 0)
                if f:
                    terms.append(f)
        facs.append(tuple(terms))
    out = (np.asarray(inv).ravel(), facs)
    g.__dict__["_patterns"] = out
    return out


def status_ok(series: Sequence, parts=None) -> np.ndarray:
    """Per series: its model's status is ``ok``."""
    ok = np.zeros(len(series), dtype=bool)
    parts, others = parts or split(series)
    for g, pos, rows in parts:
        ok[pos] = g.status[rows] == 0
    for s in others:
        ok[s] = series[s].model.status == "ok"
    return ok


def constants(series: Sequence, parts=None) -> list[float]:
    out = np.zeros(len(series))
    parts, others = parts or split(series)
    for g, pos, rows in parts:
        out[pos] = g.coef[rows, 0, 0]
    res = out.tolist()
    for s in others:
        res[s] = series[s].model.constant
    return res


def quality(series: Sequence, parts=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(smape, smape is None, noise, noise is None) of the models' ``quality`` (None without a
    quality; noise None where not finite, as :meth:`GroupFit.model` sets it)."""
    S = len(series)
    smape, noise = np.full(S, np.nan), np.full(S, np.nan)
    s_none, n_none = np.zeros(S, dtype=bool), np.zeros(S, dtype=bool)
    parts, others = parts or split(series)
    for g, pos, rows in parts:
        smape[pos] = g.quality[rows, 2]
        nz = g.quality[rows, 4]
        noise[pos] = nz
        n_none[pos] = ~np.isfinite(nz)
    for s in others:
        q = getattr(series[s].model, "quality", None)
        if q is None:
            s_none[s] = n_none[s] = True
        else:
            smape[s] = q.smape
            if q.noise is None:
                n_none[s] = True
            else:
                noise[s] = q.noise
    return smape, s_none, noise, n_none


def terms(series: Sequence, parts=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple]]:
    """The terms of every series, flat: (has terms (False: the model has no ``terms``), offsets
    (S + 1), coefficients, kind of each term, the factors of each kind)."""
    S = len(series)
    parts, others = parts or split(series)
    has = np.ones(S, dtype=bool)
    count = np.zeros(S, dtype=np.int64)
    kind_of: dict = {}
    per_group = []
    for g, pos, rows in parts:
        pat, facs = _patterns(g)
        nt = np.array([len(f) for f in facs], dtype=np.int64)
        kinds = np.full((len(facs), max(1, int(nt.max(initial=0)))), -1, dtype=np.int64)
        for u, f in enumerate(facs):
            for j, fac in enumerate(f):
                kinds[u, j] = kind_of.setdefault(fac, len(kind_of))
        p = pat[rows]
        count[pos] = nt[p]
        per_group.append((g, pos, rows, p, kinds))
    other_terms = {}
    for s in others:
        m = series[s].model
        if not hasattr(m, "terms"):
            has[s] = False
            continue
        ts = m.terms
        other_terms[s] = ts
        count[s] = len(ts)
    offsets = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    coef = np.zeros(int(offsets[-1]))
    kind = np.zeros(int(offsets[-1]), dtype=np.int64)
    for g, pos, rows, p, kinds in per_group:
        for j in range(kinds.shape[1]):
            sel = count[pos] > j
            if not sel.any():
                continue
            at = offsets[pos[sel]] + j
            coef[at] = g.coef[rows[sel], 0, 1 + j]
            kind[at] = kinds[p[sel], j]
    for s, ts in other_terms.items():
        o = int(offsets[s])
        for j, t in enumerate(ts):
            coef[o + j] = float(t.coefficient)
            kind[o + j] = kind_of.setdefault(t.factors, len(kind_of))
    return has, offsets, coef, kind, list(kind_of)


def formulas(series: Sequence, style: str = "plain", digits=4, parts=None) -> list[str]:
    """:func:`perfcast.fit.model.formulas` of the series' models, the pending ones from their
    groups' arrays (the terms' texts once per pattern, the round-off test per pattern as one array
    operation, as :func:`perfcast.fit.model._roundoff` does it).  ``digits``: one for all, or one
    per series (:func:`faithful_digits`)."""
    from .model import formulas as model_formulas

    out: list = [None] * len(series)
    parts, others = parts or split(series)
    dg = np.broadcast_to(np.asarray(digits, dtype=np.int64), (len(series),))
    for s, text in zip(others, model_formulas([series[s].model for s in others], style, dg[others])):
        out[s] = text
    for g, pos, rows in parts:
        for s, text in zip(pos.tolist(), _group_formulas(g, rows, style, dg[pos])):
            out[s] = text
    return out


#: significant digits of a formula's numbers where its terms do not cancel ...
DIGITS = 4
#: ... and at most, where they do (``-53.04 + 10.32 * j^(1/2)`` is 0.600 at j = 27)
MAX_DIGITS = 9


def faithful_digits(series: Sequence, cols: Mapping[str, np.ndarray], parts=None) -> np.ndarray:
    """Per series, the significant digits its formula's numbers need so that the formula, evaluated
    as printed, gives the model's value to :data:`DIGITS` significant digits at the points ``cols``
    ({parameter: values}; the measured extremes, the points predicted): :data:`DIGITS` plus the
    decimal logarithm of the terms' cancellation there, ``sum |part| / |sum of parts|`` (rounding
    each part to d digits moves the sum by up to ``5 10^-d sum |part|``), at most
    :data:`MAX_DIGITS`.  Models that are not plain PMNF functions (segmented, grid, sums) and
    series not defined at the points: :data:`DIGITS`."""
    S = len(series)
    out = np.full(S, DIGITS, dtype=np.int64)
    if not S or not cols:
        return out
    inb, b = batch(series, cols, False, parts)
    with np.errstate(invalid="ignore", over="ignore"):
        c = b.coef[:, None, :]
        parts_at = np.where(c != 0, b.D * c, 0.0)                 # (S, n, k); an unused column adds 0
        ratio = np.abs(parts_at).sum(axis=2) / np.abs(parts_at.sum(axis=2))   # inf: they cancel to 0
        worst = np.max(np.where(np.isnan(ratio), 1.0, ratio), axis=1)
        need = DIGITS + np.ceil(np.log10(np.maximum(worst, 1.0)) - 1e-9)
    out[inb] = np.clip(need[inb], DIGITS, MAX_DIGITS).astype(np.int64)
    return out


def _group_formulas(g: GroupFit, rows: np.ndarray, style: str, digits) -> list[str]:
    """The formulas of rows of ``g`` (:func:`formulas`), all patterns at once: the terms' basis
    texts and factors at the largest measured point once per pattern (kept on the group), the
    round-off test and the numbers' texts a column at a time."""
    pat, facs = _patterns(g)
    p = pat[rows]
    n = len(rows)
    params = g.parameters
    used = np.unique(p).tolist()
    nts = np.array([len(f) for f in facs], dtype=np.int64)
    nt = nts[p]
    K = int(nts[used].max()) if used else 0
    const = g.coef[rows, 0, 0]
    if K == 0:
        return render_rows(const, (), (), False, digits, style)
    up1 = np.array(g.upper if g.upper is not None else (np.nan,) * len(params), dtype=float).reshape(1, len(params))
    cache = g.__dict__.setdefault("_formula_terms", {})     # (style, pattern) -> bases, factors
    per = {}
    for u in used:
        e = cache.get((style, u))
        if e is None:
            sig = facs[u]
            e = cache[style, u] = ([Term(0.0, f).basis_str(style) for f in sig], factors_at(up1, params, sig))
        per[u] = e
    # per pattern: its terms' basis texts, whether its factors are defined, each factor's value
    # (1.0 past its factors: v * 1.0 is v)
    M = max((len(f) for u in used for f in facs[u]), default=0)
    F = np.ones((len(facs), K, M))
    D = np.ones(len(facs), dtype=bool)
    B = [[""] * len(facs) for _ in range(K)]
    for u, (bases, (ok, fac)) in per.items():
        D[u] = bool(ok[0])
        for k, fs in enumerate(fac):
            B[k][u] = bases[k]
            for m, f in enumerate(fs):
                F[u, k, m] = f[0]
    has = nt[:, None] > np.arange(K)[None, :]
    cf = np.where(has, g.coef[rows, 0, 1:1 + K], 0.0)
    up = np.broadcast_to(up1, (n, len(params)))
    factors = (D[p], [[F[p, k, m] for m in range(M)] for k in range(K)])
    ro = roundoff_rows(up, cf, const, params, (), factors)
    pl = p.tolist()
    bases = [[B[k][u] for u in pl] for k in range(K)]
    return render_rows(const, cf, bases, ro, digits, style, nterms=nt)


def lines(series: Sequence, parts=None) -> list[tuple]:
    """Per series, (its model's parameters, its measured lines with their own level, the model's
    ``lines``; :mod:`perfcast.fit.lines`), the pending ones from ``GroupFit.lines``."""
    out: list = [None] * len(series)
    parts, others = parts or split(series)
    for g, pos, rows in parts:
        ln, params = g.lines, g.parameters
        if ln is None:
            for s in pos.tolist():
                out[s] = (params, ())
            continue
        for s, r, ok in zip(pos.tolist(), rows.tolist(), (g.status[rows] == 0).tolist()):
            out[s] = (params, ln[r] if ok else ())
    for s in others:
        m = series[s].model
        out[s] = (getattr(m, "parameters", ()), getattr(m, "lines", ()))
    return out


def growth_keys(series: Sequence, parts=None) -> list[tuple]:
    """:func:`perfcast.analysis.ranking.growth_keys` of the series' models (once per pattern)."""
    from ..analysis.ranking import growth_key, growth_keys as model_growth_keys

    out: list = [None] * len(series)
    parts, others = parts or split(series)
    for s, k in zip(others, model_growth_keys([series[s].model for s in others])):
        out[s] = k
    for g, pos, rows in parts:
        pat, facs = _patterns(g)
        keys = [growth_key(Model(g.parameters, 0.0, tuple(Term(1.0, f) for f in sig))) for sig in facs]
        for s, u in zip(pos.tolist(), pat[rows].tolist()):
            out[s] = keys[u]
    return out


def lead_codes(series: Sequence, parts=None) -> tuple[np.ndarray, list[dict]]:
    """:meth:`Model.lead_order` of the series' models as (a code per series, the distinct lead
    orders): series ``s``'s is ``orders[code[s]]`` (once per pattern for the pending ones)."""
    S = len(series)
    parts, others = parts or split(series)
    ident: dict = {}                       # lead order's items -> code
    orders: list = []
    code = np.zeros(S, dtype=np.int64)

    def number(order: dict) -> int:
        key = tuple(order.items())
        c = ident.get(key)
        if c is None:
            c = ident[key] = len(orders)
            orders.append(order)
        return c

    for s in others:
        code[s] = number(series[s].model.lead_order())
    for g, pos, rows in parts:
        pat, facs = _patterns(g)
        used = np.unique(pat[rows])
        num = np.zeros(len(facs), dtype=np.int64)
        for u in used.tolist():
            num[u] = number(Model(g.parameters, 0.0, tuple(Term(1.0, f) for f in facs[u])).lead_order())
        code[pos] = num[pat[rows]]
    return code, orders


def hypothesis_leads(series: Sequence, positions: Sequence[int], parts=None) -> dict[int, list[tuple]]:
    """Position -> [(weight, :meth:`Model.lead_order`)] of the hypotheses of ``series[position]``:
    the selected one first, then its competing ones (``Model.alternatives``: weight at least
    :data:`perfcast.fit.core.MIN_WEIGHT`), the selected one's weight the rest of 1, as the model
    built weighs them; no model is built for a pending series."""
    from .core import MIN_WEIGHT

    want = set(int(p) for p in positions)
    parts, others = parts or split(series)
    out: dict[int, list[tuple]] = {}
    for s in others:
        if s in want:
            m = series[s].model
            alts = [(float(w), a.lead_order()) for w, a in (getattr(m, "alternatives", ()) or ())]
            out[s] = [(1.0 - sum(w for w, _ in alts), m.lead_order()), *alts]
    for g, pos, rows in parts:
        _, M, K, m = g.hyp.shape
        params, blocks = g.parameters, g.blocks
        for s, r in zip(pos.tolist(), rows.tolist()):
            if s not in want or g.status[r] != 0:
                continue
            hyps = []
            for a in range(M):
                w = float(g.weight[r, a])
                if a and w < MIN_WEIGHT:
                    continue
                h = g.hyp[r, a].reshape(K, m)
                terms = tuple(Term(1.0, f) for f in (tuple((params[q], blocks[b][0], blocks[b][1])
                                                           for q, b in enumerate(h[t].tolist()) if b >= 0)
                                                     for t in range(K)) if f)
                hyps.append([w, Model(params, 0.0, terms).lead_order()])
            hyps[0][0] = 1.0 - sum(w for w, _ in hyps[1:])
            out[s] = [tuple(h) for h in hyps]
    return out


def growth_codes(series: Sequence, parts=None) -> tuple[np.ndarray, list[tuple]]:
    """:func:`growth_keys` as (a code per series, the distinct keys in ascending order): code ``c``
    is ``keys[c]``, so the codes order the series as their keys do (ties equal)."""
    from ..analysis.ranking import growth_key, growth_keys as model_growth_keys

    S = len(series)
    parts, others = parts or split(series)
    ident: dict = {}                       # key -> provisional number
    prov = np.zeros(S, dtype=np.int64)
    for s, k in zip(others, model_growth_keys([series[s].model for s in others])):
        prov[s] = ident.setdefault(k, len(ident))
    for g, pos, rows in parts:
        pat, facs = _patterns(g)
        used = np.unique(pat[rows])
        num = np.zeros(len(facs), dtype=np.int64)
        for u in used.tolist():
            k = growth_key(Model(g.parameters, 0.0, tuple(Term(1.0, f) for f in facs[u])))
            num[u] = ident.setdefault(k, len(ident))
        prov[pos] = num[pat[rows]]
    keys = sorted(ident)
    rank = np.zeros(max(1, len(ident)), dtype=np.int64)
    for r, k in enumerate(keys):
        rank[ident[k]] = r
    return rank[prov], keys


def json_ready(series: Sequence, parts=None) -> bool:
    """The pending series' models can be written as JSON (:func:`model_json`): their constants and
    the coefficients of their terms are finite (else the json module refuses them, as before)."""
    parts, _ = parts or split(series)
    for g, pos, rows in parts:
        if not np.isfinite(g.coef[rows, 0, 0]).all():
            return False
        used = (g.hyp[rows, 0] >= 0).any(axis=2) & (g.status[rows] == 0)[:, None]      # (n, K)
        # the t-th used term's coefficient is column 1 + t (GroupFit._build)
        col = np.cumsum(used, axis=1)
        c = np.take_along_axis(g.coef[rows, 0], col, axis=1)
        if not np.isfinite(c[used]).all():
            return False
        q = g.quality[rows][:, 5:7]
        if not np.isfinite(q).all():
            return False
    return True


def float_texts(values, clean: bool = True) -> list[str]:
    """JSON texts of floats as the json module writes them (``float.__repr__``: the shortest text
    that reads back the same float); ``clean``: not finite as null
    (:func:`perfcast.fit.model._clean`).  The texts of :func:`float_text_array`, as Python
    strings."""
    a = np.ascontiguousarray(values, dtype=float).ravel()
    if len(a) < 64:
        fr = float.__repr__
        fin = np.isfinite(a).tolist() if clean else [True] * len(a)
        return [fr(v) if f else "null" for v, f in zip(a.tolist(), fin)]
    return float_text_array(a, clean).to_pylist()


def float_text_array(values, clean: bool = True):
    """:func:`float_texts` as an Arrow string array (the texts stay in one buffer: no Python
    string per number; :func:`joined_text` assembles records from such columns).  Whole arrays
    at once: pyarrow's cast writes the same shortest digits as ``float.__repr__`` in C,
    positional for 1e-6 <= |x| < 1e10 and with one-digit exponents, where Python writes
    positional for 1e-4 <= |x| < 1e16 and two-digit exponents: integral positional values get
    their ".0", the one-digit exponents (1e-9 <= |x| < 1e-6) a "0", the values pyarrow writes
    positional and Python not (1e-6..1e-4) have their digits moved, and those Python writes
    positional and pyarrow not (1e10..1e16) are written by ``float.__repr__`` itself."""
    import pyarrow as pa
    from .. import arrow_kernels as pc

    a = np.ascontiguousarray(values, dtype=float).ravel()
    if len(a) < 64:
        return arrow_strings(float_texts(a, clean))
    s = pc.cast(arrow_array(a), pa.string())
    m = np.abs(a)
    with np.errstate(invalid="ignore"):
        fin = np.isfinite(a)
        nz = fin & (m != 0)
        ar_exp = nz & ((m < 1e-6) | (m >= 1e10))
        integral = fin & ~ar_exp & (a == np.trunc(a))
        short_exp = nz & (m >= 1e-9) & (m < 1e-6)
    # each fix written to the values it applies to only
    for mask, fix in ((integral, lambda t: pc.binary_join_element_wise(t, arrow_scalar(".0"), arrow_scalar(""))),
                      (short_exp, lambda t: pc.replace_substring_regex(t, r"e([-+])(\d)$", "e\\10\\2"))):
        if mask.any():
            m_a = arrow_array(mask)
            s = pc.replace_with_mask(s, m_a, fix(pc.filter(s, m_a)))
    if clean and not fin.all():
        s = pc.if_else(arrow_array(fin), s, arrow_scalar("null"))
    # 1e-6 <= |x| < 1e-4: pyarrow's positional digits are Python's exponent form, moved
    # ("0.0000325" is "3.25e-05", "0.000001" "1e-06"; in C, where ``float.__repr__`` of each took
    # a tenth of `model --json`'s records on 30k series)
    for low, high, zeros, exp in ((1e-5, 1e-4, "0000", "e-05"), (1e-6, 1e-5, "00000", "e-06")):
        mask = nz & (m >= low) & (m < high)
        if mask.any():
            m_a = arrow_array(mask)
            t = pc.replace_substring_regex(pc.filter(s, m_a), r"^(-?)0\." + zeros + r"(\d)(\d+)$", r"\1\2.\3" + exp)
            s = pc.replace_with_mask(s, m_a, pc.replace_substring_regex(t, r"^(-?)0\." + zeros + r"(\d)$", r"\1\2" + exp))
    # 1e10 <= |x| < 1e16: positional in Python, not in pyarrow: Python's own text
    other = nz & (m >= 1e10) & (m < 1e16)
    if other.any():
        fr = float.__repr__
        s = pc.replace_with_mask(s, arrow_array(other), arrow_strings([fr(v) for v in a[other].tolist()]))
    return s


#: rows per element-wise join in :func:`joined_text` (Arrow string arrays hold < 2 GB each)
_JOIN_ROWS = 65536


def text_array(values):
    """An Arrow string array of ``values`` (strings: a list, an object array or an Arrow array)."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return arrow_strings(values.tolist() if isinstance(values, np.ndarray) else values)


def joined_text(columns: Sequence, rows: int | None = None) -> str:
    """``"".join`` of the rows' pieces, row after row: ``columns`` are per-row texts (Arrow string
    arrays, lists or object arrays of one length) or one text for every row; the pieces of a row
    in the order of ``columns``.  Joined element-wise in C (no Python string per piece)."""
    import pyarrow as pa
    from .. import arrow_kernels as pc

    cols = [c if isinstance(c, str) else text_array(c) for c in columns]
    if rows is None:
        rows = next(len(c) for c in cols if not isinstance(c, str))
    out = []
    for lo in range(0, rows, _JOIN_ROWS):
        n = min(_JOIN_ROWS, rows - lo)
        part = [c if isinstance(c, str) else c.slice(lo, n) for c in cols]
        if all(isinstance(c, str) for c in part):
            out.append("".join(part) * n)
            continue
        r = pc.binary_join_element_wise(*(arrow_scalar(c) if isinstance(c, str) else c for c in part),
                                        arrow_scalar(""))
        if isinstance(r, pa.ChunkedArray):
            r = r.combine_chunks()
        off = np.frombuffer(r.buffers()[1], dtype=np.int32)[r.offset:r.offset + len(r) + 1]
        a, b = int(off[0]), int(off[-1])
        out.append(str(memoryview(r.buffers()[2])[a:b], "utf-8") if b > a else "")
    return "".join(out)


def _fixed(text: str) -> str:
    """A literal part of a %-template."""
    return text.replace("%", "%%")


def _template_pieces(template: str) -> list[str]:
    """The literal pieces of a %-template around its ``%s`` fields (``%%`` read as ``%``)."""
    import re

    pieces, cur = [], []
    for tok in re.split(r"(%%|%s)", template):
        if tok == "%s":
            pieces.append("".join(cur))
            cur = []
        else:
            cur.append("%" if tok == "%%" else tok)
    pieces.append("".join(cur))
    return pieces


def model_json(series: Sequence, parts=None, texts: Sequence[str] | None = None) -> list:
    """Per series, the JSON text of ``Model.to_dict(alternatives=False)`` without its braces (the
    keys and values exactly as ``json.dumps`` writes them) for the pending series, from their
    groups' arrays; None for the others (their models are built: use ``Model.to_dict``).
    ``texts``: their formulas (:func:`formulas`) when already computed.  Check :func:`json_ready`
    first.  The texts of :func:`model_json_array`, as Python strings."""
    return model_json_array(series, parts, texts).to_pylist()


def model_json_array(series: Sequence, parts=None, texts: Sequence[str] | None = None):
    """:func:`model_json` as an Arrow string array aligned with ``series`` (null for the series
    whose models are built): every number a column at a time (:func:`float_text_array`), each
    record joined element-wise from its columns and its pattern's literal pieces (no Python string
    per number or record)."""
    import json
    from json.encoder import encode_basestring_ascii

    import pyarrow as pa
    from .. import arrow_kernels as pc

    from .model import Model, Term
    from .terms import fraction_str

    enc = json.dumps
    parts = parts or split(series)
    if texts is None:
        texts = formulas(series, parts=parts)
    parts = parts[0]
    made: list = []          # (positions in series, their texts)
    for g, pos, rows in parts:
        pat, facs = _patterns(g)
        p = pat[rows]
        params = _fixed(enc(list(g.parameters)))
        upper = "" if g.upper is None else _fixed(', "largest_measured": [' + ", ".join(float_texts(g.upper)) + "]")
        if g.upper is not None and g.frontier is not None:
            upper += _fixed(', "measured_frontier": [' + ", ".join("[" + ", ".join(float_texts(q)) + "]"
                                                                   for q in g.frontier) + "]")
        shape = "" if g.shape.beta == 2.0 else _fixed(', "noise_shape": ' + float_texts([g.shape.beta])[0])
        notes = _fixed(', "notes": ' + enc(list(g.notes))) if g.notes else ""
        growth = float_texts([g.growth])[0]
        status = g.status[rows]
        used = np.unique(p).tolist()
        # integers as ``str(int(v))``; rows a column does not apply to (NaN) as 0, never written
        ints = lambda v: pc.cast(arrow_array(np.where(np.isfinite(v), v, 0).astype(np.int64)), pa.string())  # noqa: E731
        # a %-template per (pattern, status) -- the pattern's terms and lead order as text -- read as
        # its literal pieces once per pattern of the group, kept on it for the next call
        # (json_chunks calls once per chunk; the rest of a template is the group's)
        tmpl_of = g.__dict__.setdefault("_json_pieces", {})     # (pattern, ok) -> pieces, for every call
        for u in used:
            if (u, True) in tmpl_of:
                continue
            sig = facs[u]
            lead_t = _fixed(enc(Model(g.parameters, 0.0, tuple(Term(1.0, f) for f in sig)).lead()))
            terms = ['{"coefficient": %s, "factors": '
                     + _fixed(enc({q: {"exponent": fraction_str(i), "log_exponent": int(j)} for q, i, j in f}))
                     + "}" for f in sig]
            k = 1 + len(sig)
            cov_t = "[" + ", ".join("[" + ", ".join(["%s"] * k) + "]" for _ in range(k)) + "]"
            for ok, status_t, tail in ((True, "ok", ', "noise": %s, "dof": %s, "cov": ' + cov_t + notes + "%s"
                                        + upper + shape),
                                       (False, "insufficient", ', "noise": 0.0, "dof": 0, "cov": null, '
                                        '"needed": %s' + notes)):
                tmpl_of[u, ok] = _template_pieces(
                    '"parameters": ' + params + ', "status": "' + status_t + '", "formula": %s, '
                    '"constant": %s, "terms": [' + ", ".join(terms if ok else []) + '], "quality": '
                    '{"rss": %s, "adj_r2": %s, "smape": %s, "cv": %s, "noise": %s, "n_points": %s, '
                    '"n_obs": %s, "criterion": %s}, "lead": ' + lead_t + tail)
        # the rows taken once per (number of terms, status): every row with as many terms has the
        # same columns, each number of them as text a column at a time (columns a pattern does not
        # use are not written)
        nterms = np.array([len(f) for f in facs], dtype=np.int64)[p]
        ok_rows = status == 0
        for ok in (True, False):
            rows_ok = ok_rows if ok else ~ok_rows
            for nt_k in np.unique(nterms[rows_ok]).tolist():
                sel = np.nonzero((nterms == nt_k) & rows_ok)[0]
                r = rows[sel]
                k = 1 + nt_k
                q = g.quality[r]
                cols = ([arrow_strings(list(map(encode_basestring_ascii, [texts[s] for s in pos[sel].tolist()]))),
                         # json.dumps of a str
                         float_text_array(g.coef[r, 0, 0], clean=False)]
                        + [float_text_array(g.coef[r, 0, 1 + t], clean=False) for t in range(nt_k if ok else 0)]
                        + [ints(q[:, c]) if c in (5, 6) else float_text_array(q[:, c]) for c in range(8)])
                if ok:
                    cv = g.cov[r, 0, :k, :k]
                    cols += [float_text_array(g.noise[r]), ints(g.dof[r])]
                    cols += [float_text_array(cv[:, i, j]) for i in range(k) for j in range(k)]
                    drift = [""] * len(r)
                    if g.drift is not None:
                        d = g.drift[r]
                        nz = np.nonzero(d != 0.0)[0]
                        if len(nz):
                            dd = g.drift_dof
                            ddof = (np.full(len(r), int(dd)) if np.ndim(dd) == 0
                                    else np.asarray(dd)[r].astype(np.int64))
                            # as Model.to_dict: the measured values of each parameter of an unchecked law
                            uo = "" if g.unchecked_on is None else ', "unchecked_on": ' + enc(
                                {q: int(v) for q, v in zip(g.parameters, g.unchecked_on)})
                            for i, dt, o in zip(nz.tolist(), float_texts(d[nz]), ddof[nz].tolist()):
                                drift[i] = ', "drift": ' + dt + ', "growth": ' + growth + ', "drift_dof": ' + str(o) + uo
                    cols.append(drift if any(drift) else "")
                else:
                    cols.append(ints(g.needed[r]))
                up, inv = np.unique(p[sel], return_inverse=True)
                lits = [tmpl_of[u, ok] for u in up.tolist()]
                inv_a = arrow_array(inv.astype(np.int64)) if len(up) > 1 else None
                args: list = []
                for j in range(len(cols) + 1):
                    piece = [lt[j] for lt in lits]
                    if inv_a is None or all(x == piece[0] for x in piece):
                        args.append(piece[0])
                    else:
                        args.append(pc.take(arrow_strings(piece), inv_a))
                    if j < len(cols):
                        args.append(cols[j])
                if ok and g.lines is not None:
                    # the measured lines with their own level, where ``Model.to_dict`` puts them
                    lined = [', "lines": ' + enc(line_dicts(g.lines[i], g.parameters)) if g.lines[i] else ""
                             for i in r.tolist()]
                    if any(lined):
                        args.append(lined)
                args = [arrow_scalar(a) if isinstance(a, str) else a if isinstance(a, pa.Array) else arrow_strings(a)
                        for a in args if not (isinstance(a, str) and not a)]
                made.append((pos[sel], pc.binary_join_element_wise(*args, arrow_scalar(""))))
    S = len(series)
    if not made:
        return pa.nulls(S, pa.string())
    at = np.full(S, sum(len(t) for _, t in made), dtype=np.int64)   # the series not made: null
    at[np.concatenate([p for p, _ in made])] = np.arange(at[0])
    return pc.take(pa.concat_arrays([t for _, t in made] + [pa.nulls(1, pa.string())]), arrow_array(at))


def predict(series: Sequence, cols: Mapping[str, np.ndarray], level: float = 0.9, averaged: bool = False,
            intervals: bool = True, parts=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`perfcast.fit.model.predict_many` of the series whose models are plain :class:`Model`
    objects with parameters among ``cols`` (built or not): (in the batch (S,), value, lower, upper
    (S, n); NaN outside the batch), in one batch, the pending ones from their groups' arrays
    (:meth:`GroupFit.hypotheses_design`, the competing hypotheses from ``GroupFit.weight``, the
    interval's inputs as :meth:`GroupFit.model` sets them) -- the same floats as ``predict_many``
    over the built models, through the same :class:`perfcast.fit.model.PredictBatch`."""
    from .model import check_level

    check_level(level)
    inb, b = batch(series, cols, averaged or intervals, parts)
    v, lo, hi = b.predict(level, averaged, intervals)
    v[~inb] = np.nan
    return inb, v, lo, hi


def batch(series: Sequence, cols: Mapping[str, np.ndarray], alternatives: bool = True, parts=None):
    """(in the batch (S,), :class:`perfcast.fit.model.PredictBatch`) of :func:`predict`: the
    batch's :meth:`~perfcast.fit.model.PredictBatch.variance_parts` are the parts of each
    interval (``alternatives``: with the competing hypotheses)."""
    from .core import MIN_WEIGHT
    from .lines import line_log_factors
    from .model import PredictBatch, doublings_rows, frontier_doublings

    S = len(series)
    n = len(next(iter(cols.values()))) if cols else 1
    keys = set(cols)
    parts, others = parts or split(series)
    plain = [s for s in others if type(series[s].model) is Model and set(series[s].model.parameters) <= keys]
    usable = [(g, pos, rows) for g, pos, rows in parts if set(g.parameters) <= keys]
    # the batch's width, as predict_many lays it out: 1 + the most terms of any model in it
    k = 1 + max((len(series[s].model.terms) for s in plain), default=0)
    for g, pos, rows in usable:
        pat, facs = _patterns(g)
        k = max(k, 1 + max((len(facs[u]) for u in np.unique(pat[rows]).tolist()), default=0))
    b = PredictBatch(S, n, k, cols)
    inb = np.zeros(S, dtype=bool)
    if plain:
        at = np.asarray(plain, dtype=np.int64)
        b.add_models(at, [series[s].model for s in plain], alternatives)
        inb[at] = True
    for g, pos, rows in usable:
        inb[pos] = True
        pat, facs = _patterns(g)
        p = pat[rows]
        nt = np.array([len(f) for f in facs], dtype=np.int64)[p]
        # the selected hypothesis' design, a pattern at a time (what GroupFit.hypotheses_design
        # gives for it, without finding the patterns again): the t-th term's values and coefficient
        # in column 1 + t; an insufficient row's pattern has no terms (the constant alone)
        b.coef[pos, 0] = g.coef[rows, 0, 0]
        for u in np.unique(p).tolist():
            sel = np.flatnonzero(p == u)
            at, r = pos[sel], rows[sel]
            for t, f in enumerate(facs[u]):
                b.D[at, :, 1 + t] = b.term_values(f)
                b.coef[at, 1 + t] = g.coef[r, 0, 1 + t]
        good = g.status[rows] == 0             # insufficient: no interval
        gp, gr = pos[good], rows[good]
        b.ok[gp] = g.dof[gr] > 0
        for j in np.unique(nt[good]).tolist():
            sel = nt[good] == j
            b.cov[gp[sel], :j + 1, :j + 1] = g.cov[gr[sel], 0, :j + 1, :j + 1]
        b.noise[gp] = g.noise[gr]
        b.dof[gp] = g.dof[gr]
        if g.drift is not None:
            b.drift[gp] = g.drift[gr]
        b.growth[gp] = g.growth
        dd = g.drift_dof
        b.drift_dof[gp] = int(dd) if np.ndim(dd) == 0 else np.asarray(dd)[gr].astype(np.int64)   # as GroupFit._drift_dof
        b.noise_shape[gp] = g.shape.beta
        if g.upper is not None and g.frontier is not None and len(gp):
            b.doublings[gp] = frontier_doublings(g.parameters, g.frontier, cols, n)[None, :]
        elif g.upper is not None and len(gp):
            up = np.broadcast_to(np.asarray(g.upper, dtype=float)[None, :], (len(gp), len(g.parameters)))
            b.doublings[gp] = doublings_rows(g.parameters, up, cols, n)
        if g.lines is not None:
            pc = [cols[p] for p in g.parameters]
            for s, r in zip(gp.tolist(), gr.tolist()):
                if g.lines[r]:
                    b.line_log[s] = line_log_factors(g.lines[r], pc)
        if alternatives and g.weight.shape[1] > 1:
            i, a = np.nonzero(g.weight[gr, 1:] >= MIN_WEIGHT)
            if len(i):
                b.add_lazy(g, gp[i].tolist(), gr[i].tolist(), (a + 1).tolist())
    return inb, b


def values(series: Sequence, points: Sequence[Mapping[str, float]], averaged: bool = False, parts=None) -> np.ndarray:
    """:func:`perfcast.fit.model.values_at` of the series' models: (len(series), len(points)), the
    plain and pending ones in one batch (:func:`predict`)."""
    S, P = len(series), len(points)
    parts, others = parts or split(series)
    if not P or not parts:
        return values_at([sm.model for sm in series], points, averaged)
    keys = set.intersection(*(set(t) for t in points))
    cols = {p: np.array([float(t[p]) for t in points]) for p in keys}
    inb, out, _, _ = predict(series, cols, 0.9, averaged, intervals=False, parts=(parts, others))
    rest = [s for s in others if not inb[s]]
    if rest:
        out[rest] = values_at([series[s].model for s in rest], points, averaged)
    return out


__all__ = ["split", "take", "status_ok", "constants", "quality", "terms", "formulas", "lines", "growth_keys", "growth_codes", "lead_codes", "json_ready", "float_texts", "float_text_array", "joined_text", "text_array", "model_json", "model_json_array", "predict", "batch", "values"]

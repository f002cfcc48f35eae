"""The HTML report: one self-contained file (inline CSS, static SVG plots, MathML formulas, a few
lines of inline JavaScript for sorting and filtering) that works offline.

Two steps, so that the numbers can be tested without HTML and the HTML without fitting:

* :func:`build_report` computes a :class:`Report` from an Experiment -- summary, models of one
  metric for every callpath, the scalability-bug ranking, measured medians with repetition spread,
  curves and prediction bands for the plotted kernels, the cost breakdown over the process count,
  the scaling-loss tree, the metric/derived-metric table and, when given, an APMT breakdown
  (computation / memory / communication) and projections to target machines;
* :func:`render_html` turns a Report into the HTML text (jinja2 with autoescaping; SVG built by
  :mod:`perfcast.report.svg`, which escapes every name it writes).

Big experiments stay small: the ranked table holds ``kernels`` rows, plots are drawn for the first
``plots`` of them that have a model, everything else is collapsed into an "other kernels" row, and the scaling-loss
tree keeps the scopes that matter (capped at ``tree_rows``).

Which kernels are shown (decided here, printed in the report): the ranking is
:mod:`perfcast.analysis.ranking`'s -- by default the per-process cost increase from the smallest
measured process count to the target (measured, then predicted) as a share of the root's, a metric
summed over ranks divided by the process count; ``by="growth"`` the SC13 order, asymptotic growth
first, then the value at the target; a
callpath enters the table when it is *significant*, i.e. holds at least ``min_share`` of the
total at the largest measured point or is predicted to hold at least that share at the target
-- a tiny callpath fitted with a steep exponent from noise is not a scalability bug, a small one
predicted to dominate is.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from .. import __version__
from ..errors import PerfcastError
from ..analysis.fitcheck import fit_warnings
from ..fit.lines import line_note
from ..experiment import Experiment, reduce_over_repetitions
from ..modelset import CAPPED_NOTE
from . import svg as S

__all__ = ["ReportOptions", "Report", "build_report", "render_html", "write_report", "formula_mathml"]


@dataclass
class ReportOptions:
    metric: str | None = None
    #: target point {param: value}; default: 4x the largest measured value of ``x``
    target: Mapping[str, float] | None = None
    #: parameter on the x axis of the plots (default: the process count, else the first parameter)
    x: str | None = None
    kernels: int = 30
    plots: int = 12
    min_share: float = 0.01
    #: weak, strong, auto (guess from the totals) or none (no scaling-loss section)
    scaling: str = "auto"
    level: float = 0.9
    title: str | None = None
    locations: str = "auto"
    tree_rows: int = 300
    max_terms: int = 1
    negative: bool = False
    #: predictions averaged over the competing hypotheses (as ``perfcast predict``); False: the selected one
    averaged: bool = False
    #: ranking order (:mod:`perfcast.analysis.ranking`): ``cost`` (per-process cost increase up to the
    #: target, a share of the root's) or ``growth`` (asymptotic order first)
    by: str = "cost"


@dataclass
class Report:
    title: str
    options: ReportOptions
    summary: dict
    metric: str
    unit: str
    x: str | None
    target: dict | None
    target_default: bool
    #: how the metric's values combine the processes ("sum over ranks", ...; "" unknown)
    aggregate: str = ""
    kernels: list[dict] = field(default_factory=list)
    other: dict | None = None
    n_models: int = 0
    plots: list[dict] = field(default_factory=list)
    cost_breakdown: dict | None = None
    apmt: dict | None = None
    #: every prediction of the run at the target side by side (apmt/reconcile.py), with the APMT section
    reconciliation: dict | None = None
    #: the three answers the summary opens with (:func:`_answers`)
    answers: list[dict] = field(default_factory=list)
    scaling_loss: dict | None = None
    metrics_table: dict | None = None
    projections: dict | None = None
    #: predictions vs validation runs the models were not fitted on (rows, summary)
    validation: dict | None = None
    notes: list[str] = field(default_factory=list)
    #: prediction intervals clipped at 0 (a cost that cannot be negative)
    clipped: bool = False
    #: the metric's description from its source (a Caliper alias such as "Avg time/rank"), for labels
    description: str = ""
    #: what the ranking's increase is of (:func:`perfcast.analysis.ranking.cost_words`)
    cost: str = "per-process cost"
    #: the metric's values add up over callpaths (False: derived as a ratio, rate or function --
    #: no shares of a total, no run cost summed from its parts)
    additive: bool = True

    @property
    def label(self) -> str:
        """The metric as an axis label: its description when the source gave one, with the unit."""
        return (self.description or self.metric) + (f" [{self.unit}]" if self.unit else "")

    def to_dict(self) -> dict:
        """JSON-ready summary of what the report shows (no SVG)."""
        # the value at the target is "value", as in every --json output (the template says "predicted")
        ks = [{("value" if k == "predicted" else k): v for k, v in r.items() if k not in ("mathml", "trend", "series")}
              for r in self.kernels]
        sl = None
        if self.scaling_loss:
            sl = {k: v for k, v in self.scaling_loss.items() if k != "rows"}
            sl["n_rows"] = len(self.scaling_loss.get("rows", []))
        return {"title": self.title, "metric": self.metric, "unit": self.unit, "aggregate": self.aggregate,
                "ranked_by": self.options.by, "x": self.x, "target": self.target,
                "target_default": self.target_default, "n_models": self.n_models, "kernels": ks,
                "other": self.other, "plots": [p["callpath"] for p in self.plots],
                "sections": self.sections(), "scaling_loss": sl, "notes": self.notes,
                "apmt": None if not self.apmt else {k: self.apmt[k] for k in ("x", "points", "components", "unit",
                                                                              "note", "notes")},
                "reconciliation": self.reconciliation, "answers": self.answers,
                "projections": self.projections, "validation": self.validation,
                "summary": {k: v for k, v in self.summary.items() if k != "points"}}

    def sections(self) -> list[str]:
        out = ["answers"] if self.answers else []
        out.append("summary")
        if self.kernels or self.other:
            out.append("ranking")
        if self.plots:
            out.append("plots")
        if self.validation:
            out.append("validation")
        if self.apmt:
            out.append("apmt")
        if self.cost_breakdown:
            out.append("breakdown")
        if self.scaling_loss:
            out.append("scaling-loss")
        if self.metrics_table:
            out.append("metrics")
        if self.projections:
            out.append("projections")
        return out


# -- numbers and formulas -------------------------------------------------------------------------
def _num(v, digits: int = 4) -> str:
    if v is None:
        return "–"
    v = float(v)
    if not math.isfinite(v):
        return "–"
    if v == 0:
        return "0"
    if v.is_integer() and abs(v) < 1e7:
        return str(int(v))
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        m, e = f"{v:.{digits - 1}e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"{v:.{digits}g}"


def _pct(v) -> str:
    if v is None or not math.isfinite(float(v)):
        return "–"
    return f"{100 * float(v):.1f}%"


def _mn(v: float, digits: int = 4) -> str:
    """A number as MathML (m x 10^e for large and small magnitudes)."""
    v = float(v)
    s = f"{v:.{digits}g}"
    if "e" in s:
        m, e = s.split("e")
        return (f"<mn>{escape(m)}</mn><mo>&#xD7;</mo><msup><mn>10</mn><mn>{int(e)}</mn></msup>"
                if m != "1" else f"<msup><mn>10</mn><mn>{int(e)}</mn></msup>")
    return f"<mn>{escape(s)}</mn>"


def _factor_mathml(param: str, i: Fraction, j: int) -> str:
    p = f"<mi>{escape(param)}</mi>"
    parts = []
    if i != 0:
        if i == 1:
            parts.append(p)
        else:
            ex = (f"<mn>{i.numerator}</mn>" if i.denominator == 1 and i > 0 else
                  f"<mrow><mn>{escape(str(i.numerator))}</mn><mo>/</mo><mn>{i.denominator}</mn></mrow>")
            parts.append(f"<msup>{p}{ex}</msup>")
    if j:
        log = "<msub><mi>log</mi><mn>2</mn></msub>" if j == 1 else \
            f"<msubsup><mi>log</mi><mn>2</mn><mn>{int(j)}</mn></msubsup>"
        parts.append(f"{log}<mo>&#x2061;</mo><mi>{escape(param)}</mi>")
    return "<mo>&#xB7;</mo>".join(parts)


#: a formula longer than this (its plain text) is shown one term per line: the ranking's model
#: column stays narrow enough for the table to fit a 1400 px window
WRAP_CHARS = 44


def formula_mathml(model, digits: int = 4) -> Markup:
    """The model as a MathML ``<math>`` element (parameter names escaped); a segmented model
    (fit/segmented.py) as its two regimes with their ranges, one per line; a long formula one term
    per line (:data:`WRAP_CHARS`)."""
    segs = getattr(model, "segments", None)
    text = model.formula(digits=digits)
    plain = escape(text)
    if segs:
        p, (lo, hi) = escape(model.parameters[0]), model.change
        rows = [f"<mi>{p}</mi><mo>&#x2264;</mo>{_mn(lo, digits)}<mo>:</mo>{''.join(_terms_mathml(segs[0], digits))}",
                f"<mi>{p}</mi><mo>&#x2265;</mo>{_mn(hi, digits)}<mo>:</mo>{''.join(_terms_mathml(segs[1], digits))}"]
    else:
        terms = _terms_mathml(model, digits)
        rows = terms if len(text) > WRAP_CHARS and len(terms) > 1 else ["".join(terms)]
    if len(rows) == 1:
        body = rows[0]
    else:
        body = ('<mtable columnalign="left">'
                + "".join(f"<mtr><mtd><mrow>{r}</mrow></mtd></mtr>" for r in rows) + "</mtable>")
    return Markup(f'<math display="inline" title="{plain}"><mrow>{body}</mrow></math>')


def _terms_mathml(model, digits: int) -> list[str]:
    """The formula's MathML, one string per term (the constant first; each later term with its sign)."""
    items: list[str] = []
    if (model.constant != 0 and not model.constant_is_roundoff()) or not model.terms:
        items.append(_mn(model.constant, digits))
    for t in model.terms:
        c = float(t.coefficient)
        sign = "&#x2212;" if c < 0 else ("+" if items else "")
        fac = "<mo>&#xB7;</mo>".join(_factor_mathml(p, i, j) for p, i, j in t.factors if i != 0 or j)
        items.append((f"<mo>{sign}</mo>" if sign else "") + _mn(abs(c), digits) + ("<mo>&#xB7;</mo>" + fac if fac else ""))
    return items


def _order_str(model) -> str:
    from ..analysis.expectations import order_str

    return order_str(model.lead_order())


# -- building -------------------------------------------------------------------------------------
def _primary_metric(exp: Experiment, metric: str | None) -> str:
    if metric is not None:
        if metric not in exp.metrics:
            raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(exp.metrics)}", where="--metric")
        return metric
    from ..analysis.views import default_metric

    try:
        return default_metric(exp)
    except PerfcastError:
        times = [m.name for m in exp.metrics.values() if m.kind == "time"]
        if not exp.metrics:
            raise PerfcastError("the experiment has no metrics") from None
        return times[0] if times else next(iter(exp.metrics))


def _x_param(exp: Experiment, x: str | None) -> str | None:
    if not exp.parameters:
        return None
    if x is not None:
        if x not in exp.parameters:
            raise PerfcastError(f"no parameter {x!r}; the experiment has: {', '.join(exp.parameters)}", where="--x")
        return x
    from ..analysis.scaling_loss import process_parameter

    try:
        return process_parameter(exp)
    except PerfcastError:
        pts = exp.points()
        varying = [p for p in exp.parameters if pts[p].nunique() > 1]
        return (varying or list(exp.parameters))[0]


class _Measured:
    """The measured values of the report's metric (locations reduced as the modeler does) and their
    median, min, max, mean and count over repetitions per point and callpath -- computed for what
    the report shows only: the means at one point for every callpath (the shares), the whole
    series of the ranked kernels (their trends and plots).  Each statistic is the one the
    grouping of every row gives (the same groups in the same order, fewer of them).  The value
    "now" (and its share) is the mean over repetitions, the statistic the models are fitted on
    and the ranking's measured cost: a median there contradicted the ranking's increase and the
    answers on the same page (cg 'now 2.603' next to 'measured ... to 2.81 s')."""

    def __init__(self, exp: Experiment, metric: str, locations: str):
        from ..experiment import fill_absent_repetitions
        from ..fit.series import _reduce_locations

        # an experiment of this metric alone is its own selection (without a copy of every row)
        whole = list(exp.metrics) == [metric] and len(exp.data)
        sub = exp if whole else exp.select(metric=metric)
        # repetitions by the one rule of the model path (experiment.fill_absent_repetitions)
        self.data = fill_absent_repetitions(sub, _reduce_locations(sub, locations))
        self.keys = [*exp.parameters, "callpath"]
        self._all: pd.DataFrame | None = None

    @staticmethod
    def _stats(d: pd.DataFrame, keys: list) -> pd.DataFrame:
        g = d.groupby(keys, observed=True, sort=False)["value"]
        st = g.agg(["median", "min", "max", "mean", "count"]).reset_index()
        st["callpath"] = st["callpath"].astype(str)
        return st

    def table(self) -> pd.DataFrame:
        """Per point and callpath, every callpath."""
        if self._all is None:
            self._all = self._stats(self.data, self.keys)
        return self._all

    def means_at(self, point: Mapping[str, float]) -> dict:
        """callpath -> mean over repetitions at ``point`` (in the order of the full table's rows)."""
        d = self.data
        sel = np.ones(len(d), dtype=bool)
        for p, v in point.items():
            sel &= d[p].to_numpy() == np.float64(v)  # in float64 (a float32 column: exact)
        st = self._stats(d[sel], self.keys)
        return dict(zip(st["callpath"], st["mean"].astype(float)))

    def series(self, callpaths) -> dict:
        """callpath -> its rows of :meth:`table` (as grouping it by callpath gives them)."""
        want = set(callpaths)
        if not want:
            return {}
        d = self.data
        sel = d["callpath"].isin(list(want)).to_numpy()
        return {c: g for c, g in self._stats(d[sel], self.keys).groupby("callpath", sort=False)}


def build_report(exp: Experiment, options: ReportOptions | None = None, *, models=None,
                 apmt=None, projections: Mapping | Sequence | None = None, apmt_note: str | None = None,
                 validation: Experiment | None = None, run_times: Experiment | None = None,
                 run_times_label: str | None = None) -> Report:
    """Compute everything the report shows.  ``models``: fitted :class:`perfcast.fit.SeriesModel`
    list to reuse (default: fit the metric now); ``apmt``: ``{"x": name, "points": [...],
    "components": {"computation": [...], "memory": [...], "communication": [...]}, "unit": ...}``,
    or a fitted :class:`perfcast.apmt.model.APMTModel` (drawn per process count at the target, see
    :func:`perfcast.apmt.report.breakdown_series`); ``apmt_note``: why there is no APMT section;
    ``projections``: ``{"columns": [...], "rows": [[...], ...]}`` or a list of dicts (one per target
    machine); ``validation``: runs the models were not fitted on, compared with the predictions of
    the ranked kernels (:mod:`perfcast.analysis.validation`) and drawn on their plots;
    ``run_times`` (named ``run_times_label``): a timing campaign of the same application whose PMNF
    models give the run time that APMT's total is put next to (:func:`perfcast.apmt.reconcile.reconcile`'s
    ``times``), instead of ``exp``'s own timers."""
    o = options or ReportOptions()
    if o.kernels < 1 or o.plots < 0:
        raise PerfcastError("kernels must be >= 1 and plots >= 0")
    if not 0 <= o.min_share < 1:
        raise PerfcastError(f"min share {o.min_share}: must be between 0 and 1", where="min_share")
    if o.scaling not in ("auto", "weak", "strong", "none"):
        raise PerfcastError(f"scaling mode {o.scaling!r}: use auto, weak, strong or none")
    metric = _primary_metric(exp, o.metric)
    m = exp.metrics[metric]
    x = _x_param(exp, o.x)
    s = exp.summary(callpaths=False)
    summary = {"parameters": s["parameters"], "points": s["points"][:200], "n_points": s["n_points"],
               "metrics": s["metrics"], "n_callpaths": s["n_callpaths"], "n_values": s["n_values"],
               "locations": s["locations"], "sources": [str(v) for v in (exp.meta.get("sources") or [])][:20],
               "n_sources": len(exp.meta.get("sources") or []), "format": exp.meta.get("format"),
               "warnings": [str(w) for w in exp.meta.get("warnings", [])][:20],
               "max_reps": max((p["repetitions"] for p in s["points"]), default=0)}
    camp = exp.meta.get("campaign")
    if isinstance(camp, dict) and camp.get("command"):
        summary["command"] = " ".join(str(c) for c in camp["command"])
    title = o.title or _default_title(exp)
    rep = Report(title=title, options=o, summary=summary, metric=metric, unit=m.unit, x=x, target=None,
                 target_default=False, aggregate=m.aggregate, description=m.description or "")
    if o.level <= 0 or o.level >= 1:
        raise PerfcastError(f"interval level {o.level}: must be between 0 and 1", where="level")

    from ..analysis.oversubscription import AFFECTED_KINDS, oversubscription

    crowded = oversubscription(exp)
    measured = oversubscription(validation) if validation is not None else None
    for what, over in (("", crowded), ("The validation runs: ", measured)):
        if over is not None:
            note = over.note()
            rep.notes.append(f"{what}{note if what else note[:1].upper() + note[1:]}."
                             + (" The time models and predictions below are built on them: low confidence."
                                if not what and m.kind in AFFECTED_KINDS else ""))
    from ..experiment import location_gaps, location_gaps_warning

    gaps = location_gaps(exp)
    if gaps:
        said = location_gaps_warning(gaps)
        rep.notes.append(said[:1].upper() + said[1:] + ".")
    meas = _Measured(exp, metric, o.locations)
    vmeans = None
    if validation is not None:
        from ..analysis.validation import measured_means

        vmeans = measured_means(validation, exp.parameters, o.locations).of_metric(metric)
        if not vmeans:
            raise PerfcastError(f"the validation runs have no values of metric {metric!r}", where="--validate")
    ms = None
    if exp.parameters:
        ms = _models_section(rep, exp, meas, models, o, vmeans)
    else:
        rep.notes.append("The experiment holds a single run (no parameters): no scaling models; "
                         "combine runs at several process counts to model them.")
    sv = _scope_values(rep, exp)
    _breakdown_section(rep, exp, o, sv)
    if o.scaling != "none":
        _scaling_loss_section(rep, exp, o, sv)
    _metrics_section(rep, exp, o)
    rep.answers = _answers(rep, exp, ms, o, crowded)
    if apmt is not None and hasattr(apmt, "predict"):
        # a fitted APMT model: its breakdown per process count at the report's target, and every
        # prediction of the run at the target side by side
        from ..apmt.reconcile import check_line, lines as reconciled_lines, reconcile
        from ..apmt.report import breakdown_series

        try:
            model, apmt = apmt, breakdown_series(apmt, rep.target or {})
            rec = reconcile(exp, model, model.predict(apmt["at"]), level=o.level, measured=validation,
                            times=run_times, times_label=run_times_label)
        except PerfcastError as e:
            if run_times is not None:
                raise   # asked for the breakdown beside the run time: the reason predict --breakdown gives
            # not asked for: the rest of the report, with the reason the breakdown is not shown
            apmt, apmt_note = None, e.format()
        else:
            rep.reconciliation = {"lines": [ln.strip() for ln in reconciled_lines({**rec, "check": None})[1:-1]],
                                  "verdict": rec["verdict"]["text"], "at": apmt["at"],
                                  "check": None if rec["check"] is None else check_line(rec["check"])}
            _other_run_time(rep, rec)
    if apmt:
        rep.apmt = _check_apmt(apmt)
    if apmt_note:
        rep.notes.append(f"APMT breakdown not shown: {apmt_note}")
    if projections:
        rep.projections = _check_projections(projections)
    return rep


def _default_title(exp: Experiment) -> str:
    src = exp.meta.get("sources") or []
    if src:
        p = Path(str(src[0]))
        name = p.parent.name if len(src) > 1 else p.name
        return f"perfcast report: {name}"
    return "perfcast report"


def _models_section(rep: Report, exp: Experiment, meas: _Measured, models, o: ReportOptions, vmeans=None):
    x = rep.x
    pts = exp.points()
    maxpt = {p: float(pts[p].max()) for p in exp.parameters}
    if o.target:
        target = {k: float(v) for k, v in o.target.items()}
        unknown = [k for k in target if k not in exp.parameters]
        if unknown:
            raise PerfcastError(f"unknown parameter(s) {', '.join(unknown)}; the experiment has: "
                                f"{', '.join(exp.parameters)}", where="--target")
        for p in exp.parameters:
            target.setdefault(p, maxpt[p])
        from ..modelset import check_positive

        check_positive(target, "--target")
    else:
        target = dict(maxpt)
        target[x] = 4 * maxpt[x]
        rep.target_default = True
    rep.target = target
    from ..analysis.ranking import cost_words, ranked_rows
    from ..modelset import model, model_set

    if models is None:
        ms = model(exp, [rep.metric], max_terms=o.max_terms, negative=o.negative, locations=o.locations,
                   averaged=o.averaged)
    else:
        models = [sm for sm in models if sm.metric == rep.metric]
        ms = model_set(exp, models, o.locations, o.averaged) if models else None
    rep.n_models = len(ms) if ms is not None else 0
    if ms is not None and ms.aggregates.get(rep.metric):
        # per-rank values: how the modelled value combines them (--ranks), as model and predict label
        # it ('Ir [#] (sum over ranks)'); the report said nothing, its values read as per rank
        rep.aggregate = ms.aggregates[rep.metric]
    if not rep.n_models:
        rep.notes.append(f"No series of metric {rep.metric!r} to model.")
        return
    # a target beyond a parameter measured without a line of >= 3 values: said, as model's heading says it
    said = ms.target_note(target, "The default target (4x the largest measured " + x + ")" if rep.target_default
                          else "--target")
    if said:
        rep.notes.append(said[:1].upper() + said[1:] + ".")
    # the ranking's order and columns, without a model per series: models are built for the rows shown
    series, order, rc = ms.rank_order(target, o.by)
    rep.cost = cost_words(ms.procs)

    # shares: of the total at the largest measured point, and predicted at the target
    scope = exp.metrics[rep.metric].scope
    tree = exp.tree
    now = meas.means_at(maxpt)
    if not now:  # no callpath measured at the corner point: use each callpath's largest x
        last = meas.table().sort_values(list(exp.parameters)).groupby("callpath", sort=False).tail(1)
        now = dict(zip(last["callpath"], last["mean"].astype(float)))
    predicted = rc["predicted"]
    pred = {series[s].callpath: (v if v is not None and math.isfinite(v) else None)
            for s, v in zip(order, (predicted[s] for s in order))}
    tops = _topmost(tree, set(now)) if scope == "inclusive" else set(now)
    ptops = _topmost(tree, {c for c, v in pred.items() if v is not None}) if scope == "inclusive" else \
        {c for c, v in pred.items() if v is not None}
    # a flat timer list with a whole-run timer (Relearn's main()): the shares are of that timer, the
    # root of the ranking's increase (ModelSet.whole_run), not of the sum of the timers, which counts
    # the time nested in it again
    whole = ms.whole_run.get(rep.metric) if scope != "inclusive" else None
    if whole is not None and whole in tops:
        tops = {whole}
        rep.notes.append(f"{rep.metric!r} is a flat timer list whose {whole} holds every other timer at every "
                         f"measured point: the shares and the increase are of {whole} (the whole run), not of the "
                         "sum of the timers, which would count nested time again.")
    if whole is not None and whole in ptops:
        ptops = {whole}
    # math.fsum: the correctly rounded sum, whatever the order of the set (a plain sum over a set of
    # strings changed the last digits with PYTHONHASHSEED)
    total_now = math.fsum(v for c, v in now.items() if c in tops and v > 0)
    root_pred = math.fsum(pred[c] for c in ptops if pred[c] is not None and pred[c] > 0)
    # the whole holds each of its parts -- the ranking's rule (analysis.ranking.cost_order): where a
    # callpath's model predicts more than the root's at the target (hpccg-n: app->Total 78.56 s under
    # app 22.45 s gave a share of 349.9%), the root is taken as at least that part, and the rows and
    # a note say that the models disagree there
    largest = max((v for v in pred.values() if v is not None and v > 0), default=0.0)
    total_pred = max(root_pred, largest)
    if largest > root_pred > 0:
        above = [c for c, v in pred.items() if v is not None and v > root_pred]
        rep.notes.append(
            f"At the target, {len(above)} callpath(s) are predicted above the whole ({root_pred:.4g}"
            f"{' ' + rep.unit if rep.unit else ''}: {', '.join(sorted(ptops)[:3])}{', ...' if len(ptops) > 3 else ''}), "
            f"the largest {max(above, key=lambda c: pred[c])} at {largest:.4g}: their models and the root's "
            "disagree there (marked (!)); the shares at the target take the whole as at least its largest part, "
            "as the ranking's increase does.")

    rep.clipped = ms.nonnegative(rep.metric)   # costs that cannot be negative: intervals clip at 0
    from ..analysis.derived import refuse_non_additive

    try:
        refuse_non_additive(exp, rep.metric, "shares of the total and the run's cost")
    except PerfcastError as e:
        # a ratio such as 'share = 100 * time / @time': the table showed shares of its sum over
        # callpaths and the answers a run cost of 134.1 (the sum of the callpaths' percentages)
        rep.additive = False
        rep.notes.append(f"No shares and no run cost: {e}.")
    rows, rest = [], []
    for i, s in enumerate(order):
        cp = series[s].callpath
        sh_now = now.get(cp, 0.0) / total_now if total_now > 0 and rep.additive else None
        pv = pred.get(cp)
        sh_pred = pv / total_pred if (pv is not None and total_pred > 0 and rep.additive) else None
        significant = ((sh_now is not None and sh_now >= o.min_share) or
                       (sh_pred is not None and sh_pred >= o.min_share) or o.min_share == 0 or not rep.additive)
        if not (significant and len(rows) < o.kernels):
            rest.append((sh_now or 0.0, sh_pred or 0.0))
            continue
        r = ranked_rows(series, [s], rc, start=i)[0]
        rows.append({"rank": r.rank, "callpath": cp, "name": tree.name(cp) if cp in tree else cp,
                     "context": _context(tree, cp), "depth": tree.depth(cp) if cp in tree else 0,
                     "status": r.model.status, "share_now": sh_now, "share_target": sh_pred,
                     "above_root": pv is not None and root_pred > 0 and pv > root_pred, "now": now.get(cp),
                     "predicted": pv, "model": r.model, "increase": r.increase, "per_process": r.per_process,
                     "per_process_first": r.per_process_first, "per_process_now": r.per_process_now,
                     "first_at": r.first_at, "now_at": maxpt})
    rep.other = None
    if rest:
        rep.other = {"count": len(rest),
                     "max_share_now": max(a for a, _ in rest) if rep.additive else None,
                     "max_share_target": max(b for _, b in rest) if rep.additive else None,
                     "insignificant": sum(1 for a, b in rest if not (a >= o.min_share or b >= o.min_share))
                     if rep.additive else 0}
    by_cp = meas.series([row["callpath"] for row in rows])
    # the intervals at the target as `perfcast predict` gives them (clipped at 0, capped by ancestors)
    _, blo, bhi, bclip, bcap = ms.bounds([(row["callpath"], rep.metric) for row in rows], [target], o.level)
    # the digits every output of the set prints the formulas with (their terms' cancellation)
    from types import SimpleNamespace

    digits = ms.formula_digits([SimpleNamespace(model=row["model"]) for row in rows], None, [target]).tolist()
    for i, row in enumerate(rows):
        mdl = row.pop("model")
        q = mdl.quality
        lo = hi = None
        clipped = False
        if mdl.status == "ok":
            lo, hi, clipped = float(blo[i, 0]), float(bhi[i, 0]), bool(bclip[i, 0])
            lo = lo if math.isfinite(lo) else None
            hi = hi if math.isfinite(hi) else None
        g = by_cp.get(row["callpath"])
        series = []
        if g is not None:
            gg = g
            for p in exp.parameters:
                if p != x:
                    gg = gg[gg[p] == maxpt[p]]
            gg = gg.sort_values(x)
            series = [float(v) for v in gg["median"]]
        row.update({"formula": mdl.formula(digits=digits[i]), "mathml": formula_mathml(mdl, digits[i]),
                    "order": _order_str(mdl),
                    "smape": None if q is None or not math.isfinite(q.smape) else q.smape,
                    "warnings": fit_warnings(mdl), "segmented": bool(getattr(mdl, "segments", None)),
                    "noise": None if q is None or q.noise is None else q.noise,
                    "lower": lo, "upper": hi, "clipped": clipped, "capped_by": bcap[i, 0] if hi is not None else None,
                    "needed": mdl.needed, "series": series,
                    "growth_factor": (row["predicted"] / row["now"] if row["predicted"] is not None and row["now"]
                                      and row["now"] > 0 else None),
                    "trend": Markup(S.sparkline(series, tooltip=f"median {rep.metric} over {x}"))})
        line = mdl.line_at(target) if hasattr(mdl, "line_at") else None
        if line is not None:
            # the value at the target lies on a measured line: the formula's times its factor
            row["line"] = line
            row["line_note"] = line_note(line)
        row["_model"] = mdl
    rep.kernels = rows
    if vmeans is not None:
        rep.validation = _validation(rep, ms, rows, vmeans, exp.parameters, o, exp)
    for row in [r for r in rows if r["status"] == "ok"][: o.plots]:   # models to draw, in rank order
        rep.plots.append(_plot(exp, rep, ms, row, by_cp.get(row["callpath"]), maxpt, o))
    for row in rows:
        row.pop("_model", None)
    return ms


def _validation(rep: Report, ms, rows: list[dict], vmeans: Mapping, params: Sequence[str],
                o: ReportOptions, fitted: Experiment | None = None) -> dict:
    """The ranked kernels' predictions at the validation runs' points against their measured means
    (as `perfcast predict` gives them: :meth:`perfcast.modelset.ModelSet.bounds`)."""
    from ..analysis.validation import compare, fitted_note, summarize

    preds = []
    for row in rows:
        mdl = row["_model"]
        if mdl.status != "ok":
            continue
        mt = rep.metric
        for pt in vmeans.points(mt):
            cp = row["callpath"]
            # measured there, or (a sparse profile) did not run there: a 0 (compare says which)
            if vmeans.lookup(cp, mt, pt) is None:
                continue
            at = dict(zip(params, pt))
            value, lo, hi = (float(a[0, 0]) for a in ms.bounds([(cp, mt)], [at], o.level)[:3])
            pred = {"callpath": cp, "name": row["name"], "rank": row["rank"], "metric": mt, "at": at,
                    "value": value, "lower": lo if math.isfinite(lo) else None,
                    "upper": hi if math.isfinite(hi) else None}
            line = mdl.line_at(at) if hasattr(mdl, "line_at") else None
            if line is not None:
                # the value lies on a measured line: the formula's times its factor, marked as in the ranking
                pred.update(line=line, line_note=line_note(line))
            preds.append(pred)
    out = compare(preds, vmeans, params, fitted)
    if not out:
        return {"rows": [], "summary": summarize(out),
                "note": "none of the ranked kernels was measured in the validation runs"}
    summary = summarize(out)
    return {"rows": out, "summary": summary, "note": "", "fitted": fitted_note(summary)}


def _context(tree, path: str, keep: int = 2) -> str:
    """The callers of ``path`` for display: ``main › … › solve › iterate`` (last ``keep`` frames)."""
    if path not in tree:
        return ""
    anc = [tree.name(a) for a in reversed(tree.ancestors(path))]
    if len(anc) > keep + 1:
        anc = [anc[0], "…", *anc[-keep:]]
    return " › ".join(anc)


def _topmost(tree, present: set) -> set:
    out = set()
    for c in present:
        if c not in tree or not any(a in present for a in tree.ancestors(c)):
            out.add(c)
    return out


#: "What grows?" names the most specific ranked callpath under the first-ranked one that still holds
#: at least this share of its cost increase (an inclusive root's increase is its children's)
GROWER_SHARE = 0.5


def _grower(tree, kernels: list[dict]) -> dict:
    """The ranked row that answers "What grows?": starting from the first-ranked row, step down to
    the best-ranked descendant shown in the ranking that holds at least :data:`GROWER_SHARE` of the
    current row's per-process cost increase, as long as there is one.  An inclusive metric's root
    (the whole run) ranks first whenever anything grows; the callpath that makes it grow is the
    answer.  Rows without an increase (ranking by growth order) keep the first row."""
    k = kernels[0]
    while k.get("increase") is not None and k["increase"] > 0 and k["callpath"] in tree:
        below = [r for r in kernels if r["callpath"] in tree and r.get("increase") is not None
                 and k["callpath"] in tree.ancestors(r["callpath"])
                 and r["increase"] >= GROWER_SHARE * k["increase"]]
        if not below:
            break
        k = below[0]
    return k


def _spread(tree, kernels: list[dict], k: dict, most: int = 3) -> str:
    """When no callpath under ``k`` holds :data:`GROWER_SHARE` of its growth (:func:`_grower` stopped
    at it) but ranked ones under it grow: the largest of them, so the answer names where the growth
    is spread."""
    if k.get("increase") is None or k["callpath"] not in tree:
        return ""
    parts = [r for r in kernels if r["callpath"] in tree and r.get("increase") is not None and r["increase"] > 0
             and k["callpath"] in tree.ancestors(r["callpath"])]
    if not parts:
        return ""
    parts = sorted(parts, key=lambda r: -r["increase"])[:most]
    return "; no part under it holds half of that growth, the largest: " + ", ".join(
        f"{r['callpath']} {r['increase']:+.1%}" for r in parts)


def _growth_said(k: dict, unit: str | None, cost: str = "per-process cost") -> str:
    """The ranking's increase of row ``k`` in words: the measured part (per-process cost at the
    smallest and the largest measured run) and, where the model at the target lies below the last
    measurement by more than its misfit (:func:`_growth_fields`), that the model does not follow the
    measured growth -- the increase counts the measured growth (:mod:`perfcast.analysis.ranking`),
    so "grows to the target" next to a flat model's smaller value read as a contradiction."""
    u = f" {unit}" if unit else ""
    at = lambda pt: ", ".join(f"{a}={v:g}" for a, v in (pt or {}).items())  # noqa: E731
    f = _growth_fields(k)
    text = f": its {cost} grows by {k['increase']:.1%} of the root's cost at the target"
    if "measured" not in f:
        return text + " (from the smallest measured run to the target)"
    a, b = f["measured"]["first"], f["measured"]["last"]
    if f["measured"]["first_at"] == f["measured"]["last_at"]:
        # one process count measured (hpccg-n, p=2 throughout): no measured growth to name -- was
        # "measured 2.503 to 2.503 s from p=2, n=40 to p=2, n=40"
        text += (f", predicted from its {b:.4g}{u} measured at {at(f['measured']['last_at'])} (the runs take one "
                 "process count: nothing measured grows per process)")
    else:
        text += (f", measured {a:.4g} to {b:.4g}{u} from {at(f['measured']['first_at'])} to "
                 f"{at(f['measured']['last_at'])}")
    if not f["follows"]:
        text += (f"; its model gives {k['per_process']:.4g}{u} at the target, below that last measurement: it does not "
                 "follow the growth")
    return text


def _growth_fields(k: dict) -> dict:
    """The numbers behind :func:`_growth_said` for the answer's JSON: the per-process cost measured
    at the smallest and the largest run, and whether the model follows that growth (``follows``:
    :func:`perfcast.analysis.fitcheck.follows_growth` -- at the target not below the last
    measurement by more than a poor fit's misfit -- the rule ``perfcast check`` uses too)."""
    from ..analysis.fitcheck import follows_growth

    a, b, t = k.get("per_process_first"), k.get("per_process_now"), k.get("per_process")
    if a is None or b is None:
        return {}
    return {"measured": {"first": a, "first_at": dict(k.get("first_at") or {}), "last": b,
                         "last_at": dict(k.get("now_at") or {})},
            "follows": follows_growth(a, b, t, k.get("noise"))}


def _answers(rep: Report, exp: Experiment, ms, o: ReportOptions, over=None) -> list[dict]:
    """The three answers a user came for, each from the section below that shows it in full (so
    nothing below contradicts them) and with its confidence: what grows (the ranking's first row),
    what the run will cost at the target (the prediction of the measured root with its interval, as
    ``perfcast predict`` gives it) and where the time is lost (the scope with the largest measured
    loss between the two runs of the scaling-loss tree).  ``over``: the experiment's oversubscribed
    runs (:func:`perfcast.analysis.oversubscription.oversubscription`), said with the answers."""
    from ..analysis.oversubscription import FITTED
    from ..modelset import ABOVE_PARENT, CHILDREN_SUM

    said = (FITTED, ABOVE_PARENT, CHILDREN_SUM)   # the notes an answer carries: what makes its number doubtful
    out = []
    if rep.kernels and ms is not None and rep.target:
        pred = {r["callpath"]: r for r in ms.predict(rep.target, o.level) if r["metric"] == rep.metric}
        for row in rep.kernels:
            # the ranking's confidence column: the confidence `perfcast predict` gives the value
            row["confidence"] = (pred.get(row["callpath"]) or {}).get("confidence")
        top = rep.kernels[0]
        k = _grower(exp.tree, rep.kernels)
        first = pred.get(k["callpath"]) or {}
        inside = "" if k is top else f" (inside {top['callpath']}, which ranks first)"
        out.append({"question": "What grows?", "notes": [n for n in first.get("notes", ()) if n.startswith(said)],
                    "answer": f"{k['callpath']}{inside if inside else ' ranks first'}"
                              + (f" by asymptotic growth, {k['order']}" if o.by == "growth" else
                                 _growth_said(k, rep.unit, rep.cost) if k.get("increase") is not None else "")
                              + f"; model {k['formula']}" + _spread(exp.tree, rep.kernels, k),
                    "confidence": first.get("confidence"), "section": "ranking", "callpath": k["callpath"],
                    "formula": k["formula"], "value": k.get("predicted"), **_growth_fields(k)})
        now = {r["callpath"]: r.get("now") or 0.0 for r in rep.kernels}
        tops = [c for c in exp.tree.roots() if c in pred]
        whole = pred
        if tops and exp.metrics[rep.metric].scope == "exclusive":
            # the run's cost is a root's inclusive time: of an exclusive metric (CUBE's time) the
            # root's own series is only the time outside its callees; the sum of the models under
            # it is (the total `advise` takes)
            from ..analysis.advisor import subtree_total

            whole = {c: subtree_total(ms, rep.metric, [c, *exp.tree.descendants(c)], rep.target, o.level, c)
                     for c in tops}
            whole = {c: r for c, r in whole.items() if r is not None}
            now = {c: whole[c]["value"] for c in whole}
            tops = [c for c in tops if c in whole]
        if tops and rep.additive:
            root = max(tops, key=lambda c: now.get(c, 0.0))
            r = whole[root]
            at = ", ".join(f"{a}={v:g}" for a, v in rep.target.items())
            iv = ("" if r["lower"] is None else f" ({r['level']:.0%} interval {r['lower']:.4g} to {r['upper']:.4g}"
                  + (", clipped at 0" if r["clipped"] else "") + ")")
            out.append({"question": f"What will it cost at {at}?",
                        "answer": f"{root}{' with its callees (the sum of their models)' if whole is not pred else ''}: "
                                  f"{r['value']:.4g}{(' ' + rep.unit) if rep.unit else ''}{iv}",
                        "confidence": r["confidence"], "section": "ranking",
                        "notes": [n for n in r["notes"] if n.startswith(said)], "callpath": root,
                        "value": r["value"], "lower": r["lower"], "upper": r["upper"], "at": dict(rep.target)})
    sl = rep.scaling_loss
    rows = []
    if sl and sl.get("rows"):
        rows = [x for x in sl["rows"] if x["path"] in exp.tree and exp.tree.depth(x["path"]) > 0] or sl["rows"]
        # a scope whose exclusive loss is not known (timers that nest: views.no_exclusive) is no answer
        rows = [x for x in rows if x["exclusive_loss"] is not None]
    if sl and rows:
        top = max(rows, key=lambda x: x["exclusive_loss"])
        crowded = [] if over is None or over.parameter != sl["procs"] else (
            [f"{sl['procs']}={v:g} ran with more ranks than the {over.cores} cores: the loss includes "
             "waiting for descheduled ranks" for v in (sl["q"],) if v in over.over]
            + [f"runs at {sl['procs']}={v:g} shared their cores with other processes: the loss includes waiting "
               "for them" for v in (sl["p"], sl["q"]) if v in {r for r, _ in over.contended}])
        out.append({"question": "Where is performance lost?", "notes": crowded,
                    "answer": f"{top['path']}: {top['exclusive_loss']:.1%} of the {sl['procs']}={sl['q']:g} run's "
                              f"{rep.metric} is excess work in it, of {sl['loss']:.1%} in all"
                              # more than the whole: other scopes got faster (a negative loss) -- said, as
                              # "16.3% of 10.2% in all" reads as a contradiction
                              + (" (other scopes gained time back)" if top["exclusive_loss"] > sl["loss"] else "")
                              + f" ({sl['mode']} scaling from {sl['procs']}={sl['p']:g})",
                    "confidence": "measured", "section": "scaling-loss", "callpath": top["path"],
                    "value": top["exclusive_loss"], "total": sl["loss"]})
    return out


def _other_run_time(rep: Report, rec: Mapping) -> None:
    """With the run time taken from a timing campaign (``rec["times_from"]``,
    :func:`perfcast.apmt.reconcile.reconcile`), the cost answer (this experiment's own model) says
    that campaign's prediction of the same run time at the same point next to it, the one the
    breakdown uses."""
    if not rec.get("times_from"):
        return
    for a in rep.answers:
        if not a["question"].startswith("What will it cost") or a.get("at") != rec["at"]:
            continue
        for r in rec["runs"]:
            p = r["pmnf"]
            if r["callpath"] == a.get("callpath") and p is not None:
                lo = "0 (clipped)" if p.get("clipped") else f"{p['lower']:.4g}" if p["lower"] is not None else ""
                iv = "" if p["lower"] is None else f" [{lo}, {p['upper']:.4g}]"
                a.setdefault("notes", []).append(
                    f"the timing campaign {rec['times_from']} predicts {p['value']:.4g}{iv} for the same run: "
                    "the run time the breakdown puts next to APMT's total")


#: measured lines (values of the other parameters) drawn per plot, those with the most points
PLOT_LINES = 4


def _plot(exp: Experiment, rep: Report, ms, row: dict, g: pd.DataFrame | None, maxpt: dict,
          o: ReportOptions) -> dict:
    """Measured medians with min-max spread per combination of the other parameters, the model
    (solid where measured, dashed beyond), its prediction band and the target marker (as `perfcast
    predict` gives them: :meth:`perfcast.modelset.ModelSet.bounds`)."""
    mdl = row["_model"]
    x = rep.x
    target = rep.target
    others = [p for p in exp.parameters if p != x]
    fig = S.Figure(540, 300, xlabel=x, ylabel=rep.label)
    combos: list[tuple] = []
    omitted: list[tuple] = []
    if g is not None and len(g):
        if others:
            cnt = g.groupby(others, sort=False).size().reset_index(name="_count")
            cnt = cnt.sort_values(["_count", *others], ascending=False)
            every = [tuple(float(v) for v in r) for r in cnt[others].to_numpy()]
            combos, omitted = every[:PLOT_LINES], every[PLOT_LINES:]
        else:
            combos = [()]
    xs_meas = g[x].to_numpy(dtype=float) if g is not None else np.array([])
    x_lo = float(xs_meas.min()) if len(xs_meas) else target[x]
    x_hi = float(xs_meas.max()) if len(xs_meas) else target[x]
    x_end = max(x_hi, target[x])
    x_start = min(x_lo, target[x])
    xkind = S.choose_scale([x_start, x_end, *xs_meas])
    grid = (np.geomspace(x_start, x_end, 80) if xkind == "log" and x_start > 0 else np.linspace(x_start, x_end, 80))
    grid = np.unique(np.concatenate([grid, xs_meas, [x_hi]]))
    layers = []
    yvals = []
    tcombo = tuple(target[p] for p in others)
    for k, combo in enumerate(combos):
        colour = S.PALETTE[k % len(S.PALETTE)]
        sel = g
        for p, v in zip(others, combo):
            sel = sel[sel[p] == v]
        sel = sel.sort_values(x)
        fixed = dict(zip(others, combo))
        lab = ", ".join(f"{p}={_num(v)}" for p, v in fixed.items())
        tips = [f"{x}={_num(a)}{', ' + lab if lab else ''}: median {_num(b)} (min {_num(c)}, max {_num(d)}, {int(n)} rep.)"
                for a, b, c, d, n in sel[[x, "median", "min", "max", "count"]].to_numpy()]
        xm = sel[x].to_numpy(dtype=float)
        inside = grid[(grid >= xm.min()) & (grid <= xm.max())] if len(xm) else grid[:0]
        ym = mdl.predict({x: inside, **{p: np.full(len(inside), v) for p, v in fixed.items()}},
                         averaged=o.averaged) if len(inside) else []
        layers.append(("points", xm, sel["median"].to_numpy(float), sel["min"].to_numpy(float),
                       sel["max"].to_numpy(float), colour, "measured median, min–max" + (f" ({lab})" if lab else ""), tips))
        layers.append(("curve", inside, np.asarray(ym, dtype=float), colour, None))
        yvals += [*sel["min"], *sel["max"], *np.asarray(ym, dtype=float)]
    # the target curve: band over the whole range, dashed beyond the measured range
    tfixed = {p: target[p] for p in others}
    gpts = [{x: float(v), **tfixed} for v in grid]
    bv, blo, bhi, _, bcap = ms.bounds([(row["callpath"], rep.metric)], [*gpts, target], o.level)
    ty, tlo, thi = bv[0, :-1], blo[0, :-1], bhi[0, :-1]
    tv, tl, th = float(bv[0, -1]), float(blo[0, -1]), float(bhi[0, -1])
    measured_combo = (tcombo in combos) if others else bool(combos)
    ext = grid >= x_hi if measured_combo else np.ones(len(grid), bool)
    yvals += [*ty[np.isfinite(ty)], tv, *[v for v in (tl, th) if math.isfinite(v)]]
    val = [r for r in (rep.validation or {}).get("rows", []) if r["callpath"] == row["callpath"]
           and all(r["at"][p] == v for p, v in tfixed.items())]
    yvals += [r["measured"] for r in val]
    band_ok = np.isfinite(tlo) & np.isfinite(thi)
    if band_ok.any():
        yvals += [*np.asarray(tlo)[band_ok], *np.asarray(thi)[band_ok]]
    yv = np.asarray(yvals, dtype=float)
    yv = yv[np.isfinite(yv)]
    pos = yv[yv > 0]
    ykind = "log" if len(pos) == len(yv) and len(pos) and pos.max() / pos.min() >= 100 else "linear"
    if ykind == "log":
        # keep the band from stretching the axis over many decades (interval lower ends near 0)
        top = float(pos.max())
        lo = max(float(pos.min()), top * 1e-6)
        yr = S.padded_range([lo, top], "log")
    else:
        core = yv
        yr = S.padded_range(core, "linear")
    fig.set_scales(xkind, S.padded_range([x_start, x_end], xkind, 0.04), ykind, yr)
    band_label = f"{o.level:.0%} prediction interval" + (f" ({', '.join(f'{p}={_num(v)}' for p, v in tfixed.items())})"
                                                          if tfixed else "")
    if band_ok.sum() >= 2:
        fig.band(grid[band_ok], np.asarray(tlo)[band_ok], np.asarray(thi)[band_ok], "#0072B2", 0.15, legend=band_label)
    for layer in layers:
        if layer[0] == "curve" and len(layer[1]) >= 2:
            fig.line(layer[1], layer[2], layer[3], tooltip=row["formula"])
    if ext.sum() >= 2:
        fig.line(grid[ext], ty[ext], "#0072B2" if not others else "#333333", dashed=True,
                 legend="model, extrapolated", tooltip=row["formula"])
    for layer in layers:
        if layer[0] == "points":
            _, xm, med, mn, mx, colour, lab, tips = layer
            fig.points(xm, med, colour, lo=mn, hi=mx, legend=lab, tooltips=tips)
    if val:
        vx = np.array([r["at"][x] for r in val], dtype=float)
        vy = np.array([r["measured"] for r in val], dtype=float)
        fig.points(vx, vy, "#000000", lo=vy, hi=vy, legend="validation run (not fitted)",
                   tooltips=[f"{x}={_num(a)}: measured {_num(b)}, predicted {_num(r['value'])}"
                             + (f" ({r['error']:+.1%})" if r["error"] is not None else "") for a, b, r in zip(vx, vy, val)])
    tlabel = ", ".join(f"{p}={_num(v)}" for p, v in target.items())
    fig.vline(target[x], text="target")
    fig.marker(target[x], tv, "#D55E00", lo=tl if math.isfinite(tl) else None, hi=th if math.isfinite(th) else None,
               legend=f"prediction at {tlabel}",
               tooltip=f"{tlabel}: {_num(tv)} [{_num(tl)}, {_num(th)}]")
    return {"callpath": row["callpath"], "name": row["name"], "context": row["context"], "rank": row["rank"],
            "svg": Markup(fig.svg(aria=f"model of {row['callpath']}")),
            "mathml": row["mathml"], "formula": row["formula"], "predicted": tv, "lower": tl, "upper": th,
            "capped_by": bcap[0, -1],
            "xkind": xkind, "ykind": ykind, "line_note": row.get("line_note"),
            "omitted": ("; ".join(", ".join(f"{p}={_num(v)}" for p, v in zip(others, c)) for c in omitted)
                        if omitted else "")}


def _scope_values(rep: Report, exp: Experiment) -> pd.DataFrame | None:
    """Inclusive/exclusive per-process cost (ranks averaged) per point and callpath, or None for
    flat metrics; shared by the breakdown and the scaling-loss sections."""
    if rep.x is None:
        return None
    if exp.metrics[rep.metric].scope == "unknown":
        rep.notes.append(f"Metric {rep.metric!r} has no calling-context scope (flat values): no cost breakdown "
                         f"by callpath and no scaling-loss tree.")
        return None
    from ..analysis.views import scope_values

    try:
        return scope_values(exp, rep.metric, ranks="mean")
    except PerfcastError as e:
        rep.notes.append(f"No cost breakdown: {e}")
        return None


def _breakdown_section(rep: Report, exp: Experiment, o: ReportOptions, sv: pd.DataFrame | None):
    """Exclusive cost of the heaviest callpaths vs the x parameter, the rest as "other"."""
    x = rep.x
    if sv is None:
        return
    ranks = "mean"
    v = sv
    pts = exp.points()
    for p in exp.parameters:
        if p != x:
            v = v[v[p] == float(pts[p].max())]
    if v[x].nunique() < 2:
        return
    # a scope whose exclusive cost is not known (views.no_exclusive: a run whose timers nest, and its
    # timers) is no part of a stack of own costs: left out, said (CoMD's chart was empty, before that
    # it stacked the nested timers' times)
    unknown = sorted(set(v.loc[v["exclusive"].isna(), "callpath"].astype(str)))
    if unknown:
        v = v[v["exclusive"].notna()]
        left = (f"{', '.join(unknown[:4])}{', ...' if len(unknown) > 4 else ''}: no exclusive {rep.metric} known "
                f"(the application's timers nest)")
        if not len(v) or v[x].nunique() < 2:
            rep.notes.append(f"No cost breakdown: {left}.")
            return
        rep.notes.append(f"Cost breakdown: {left}; left out of it.")
    piv = v.pivot_table(index="callpath", columns=x, values="exclusive", aggfunc="sum", fill_value=0.0, observed=True)
    piv.index = piv.index.astype(str)
    xs = sorted(float(c) for c in piv.columns)
    piv = piv[xs]
    # a metric that is itself a sum over the ranks (Caliper's sum#...): its values are the whole
    # run's, not a process's -- the chart said "per process" next to LULESH's 212.3 s of
    # MPI_Allreduce at 27 ranks (7.862 s each); divided by the process count when it is on the x
    # axis (as the ranking does), otherwise labelled as the sum it is
    from ..analysis.ranking import is_sum_over_ranks
    from ..analysis.scaling_loss import process_parameter

    per = "per process (ranks averaged, repetitions averaged)"
    if is_sum_over_ranks(exp.metrics[rep.metric].aggregate):
        try:
            procs = process_parameter(exp)
        except PerfcastError:
            procs = None
        if procs == x:
            piv = piv / np.array(xs, dtype=float)
            per = f"per process (the metric's {exp.metrics[rep.metric].aggregate} divided by {x}; repetitions averaged)"
        else:
            per = f"of all processes (the metric's {exp.metrics[rep.metric].aggregate}; repetitions averaged)"
    last = piv[xs[-1]]
    top = [c for c in last.sort_values(ascending=False).index[:8] if last[c] > 0]
    series = [(c, piv.loc[c].to_numpy(float)) for c in top]
    rest = piv.drop(index=top).sum(axis=0).to_numpy(float)
    names = _distinct_names(exp.tree, top)
    colours = [S.PALETTE[i % len(S.PALETTE)] for i in range(len(series))]
    if len(piv) > len(top) and rest.sum() > 0:
        series.append((f"other ({len(piv) - len(top)} callpaths)", rest))
        names.append(series[-1][0])
        colours.append(S.OTHER_COLOUR)
    totals = np.sum([s[1] for s in series], axis=0)
    fig = S.Figure(max(360, 90 * len(xs) + 80), 320, title=f"Exclusive cost {per.split(' (')[0]} by callpath", xlabel=x,
                   ylabel=rep.label)
    fig.set_scales("linear", (-0.6, len(xs) - 0.4), "linear", (0.0, float(totals.max()) * 1.05 or 1.0))
    fig.stacked_bars([_num(c) for c in xs], [(n, s[1]) for n, s in zip(names, series)], colours)
    # legend outside the plot area, on the right
    fig.legend_items = []
    svg = fig.svg()
    legend = "".join(f'<li><span class="sw" style="background:{c}"></span>{escape(n)}</li>'
                     for n, c in zip(reversed(names), reversed(colours)))
    rep.cost_breakdown = {"x": x, "points": xs, "names": names, "ranks": ranks, "per": per,
                          "svg": Markup(svg), "legend": Markup(legend),
                          "values": {n: [float(a) for a in s[1]] for n, s in zip(names, series)}}


def _distinct_names(tree, callpaths: Sequence[str]) -> list[str]:
    """Labels for ``callpaths``: the frame's name, with its caller where two share a name (LULESH's
    MPI_Wait under CalcQForElems and under LagrangeNodal were two bars labelled alike, and the
    breakdown's JSON, keyed by label, kept one of them), the whole callpath where that is not enough."""
    from collections import Counter

    name = [tree.name(c) if c in tree else c for c in callpaths]
    seen = Counter(name)
    out = []
    for c, n in zip(callpaths, name):
        par = tree.parent(c) if c in tree else None
        out.append(n if seen[n] == 1 else f"{n} in {tree.name(par)}" if par is not None else c)
    seen = Counter(out)
    return [lab if seen[lab] == 1 else c for c, lab in zip(callpaths, out)]


def _scaling_loss_section(rep: Report, exp: Experiment, o: ReportOptions, sv: pd.DataFrame | None):
    """The smallest against the largest run of the process parameter (others at their largest)."""
    from ..analysis.scaling_loss import process_parameter, scaling_loss

    if sv is None:
        return
    try:
        proc = process_parameter(exp, rep.x)
        pts = exp.points()
        at = {p: float(pts[p].max()) for p in exp.parameters if p != proc and pts[p].nunique() > 1}
        v = sv
        for p, val in at.items():
            v = v[v[p] == val]
        counts = sorted(float(c) for c in v[proc].unique())
        if len(counts) < 2:
            return
        pair = [(counts[0], counts[-1])]
        mode = o.scaling
        guessed = mode == "auto"
        why = None
        if guessed:
            # the one rule kernel identification follows (kernels.guess_scaling: the total work on every
            # line of the other parameters, instructions when there are; was this pair's time alone)
            from ..analysis.kernels import guess_scaling

            mode, why, slope = guess_scaling(exp, rep.metric, proc)
            if mode == "undetermined" or slope is None:
                rep.notes.append(f"No scaling-loss tree: weak or strong scaling could not be told from the runs "
                                 f"({why}); give --scaling weak or strong.")
                return
        # only the two runs compared: the loss of each scope needs nothing else
        sub = exp.select(**{proc: [counts[0], counts[-1]]}, **at)
        res = scaling_loss(sub, mode, rep.metric, proc, pair, None)
    except PerfcastError as e:
        rep.notes.append(f"No scaling-loss tree: {e}")
        return
    pr = res["pairs"][0]
    # what the pair's numbers need said (runs sharing the cores, negative exclusive values, ...)
    rep.notes.extend(f"Scaling-loss tree: {n}" for n in pr.get("notes", ()))
    rows = pr["rows"]
    byp = {r["path"]: r for r in rows}
    tree = exp.tree
    thr = 0.002  # scopes with |inclusive loss| below 0.2% of the larger run are folded
    keep = {r["path"] for r in rows if abs(r["inclusive_loss"]) >= thr or abs(r["exclusive_loss"] or 0.0) >= thr}
    keep = set(sorted(keep, key=lambda c: -abs(byp[c]["inclusive_loss"]))[: o.tree_rows])
    for c in list(keep):
        if c in tree:
            keep.update(a for a in tree.ancestors(c) if a in byp)
    order = [c for c in tree.preorder() if c in keep] + sorted(c for c in keep if c not in tree)
    out = []
    scale = max((abs(byp[c]["inclusive_loss"]) for c in order), default=0.0) or 1.0
    for c in order:
        r = byp[c]
        hidden = 0
        if c in tree:
            hidden = sum(1 for k in tree.children(c) if k in byp and k not in keep)
        out.append({**r, "hidden_children": hidden,
                    "bar": Markup(S.hbar(r["inclusive_loss"] / scale))})
    rep.scaling_loss = {"mode": mode, "guessed": guessed, "procs": proc, "p": pr["p"], "q": pr["q"],
                        "total_p": pr["total_p"], "total_q": pr["total_q"], "loss": pr["loss"], "at": at,
                        "rows": out, "n_scopes": len(rows), "n_hidden": len(rows) - len(out),
                        "ranks": res["ranks"], **({"guessed_from": why} if guessed else {})}


def _metrics_section(rep: Report, exp: Experiment, o: ReportOptions):
    """Every metric (derived ones with their formulas) at the largest point for the top kernels."""
    derived = exp.meta.get("derived") if isinstance(exp.meta.get("derived"), dict) else {}
    names = list(exp.metrics)[:12]
    cps = [k["callpath"] for k in rep.kernels[:15]]
    pts = exp.points()
    at = {p: float(pts[p].max()) for p in exp.parameters}
    values = {}
    if cps:
        from ..fit.series import _reduce_locations

        d = exp.data
        # every callpath of the metrics at the point, not only the kernels': which runs measured
        # a metric (a sparse profile's run that did and lacks a kernel did not run it: a 0)
        mask = d["metric"].isin(names).to_numpy(copy=True)
        for p, v in at.items():
            mask &= (d[p] == v).to_numpy()
        if mask.any():
            # the meta too: a dense table's absent rank stays missing (reduce_over_locations)
            sub = Experiment(exp.parameters, d[mask].reset_index(drop=True),
                             [exp.metrics[n] for n in names], exp.tree, exp.meta, validate=False)
            mean = reduce_over_repetitions(sub, _reduce_locations(sub, o.locations))
            mean = mean[mean["callpath"].isin(cps).to_numpy()]
            values = {(str(c), str(mm)): float(v) for c, mm, v in zip(mean["callpath"], mean["metric"], mean["value"])}
    mrows = []
    for i, n in enumerate(exp.metrics):
        mt = exp.metrics[n]
        f = (derived.get(n) or {}).get("formula") if isinstance(derived.get(n), dict) else None
        mrows.append({"index": i, "name": n, "unit": mt.unit, "kind": mt.kind, "scope": mt.scope,
                      "aggregate": mt.aggregate, "description": mt.description, "formula": f})
    # each column's unit and, for per-rank values, how the ranks were combined (--ranks): the
    # table's numbers had no unit, a count summed over ranks next to a time averaged over them
    from ..experiment import location_reduction

    how = {n: (location_reduction(exp.metrics[n]) if o.locations == "auto" else o.locations) for n in names}
    heads = [{"name": n, "unit": exp.metrics[n].unit,
              "ranks": f"{how[n]} over ranks" if exp.has_locations else ""} for n in names]
    rep.metrics_table = {"metrics": mrows, "columns": names, "heads": heads, "at": at,
                         # the callers too, as in the ranking: two rows of one name (LULESH's
                         # MPI_Waitall under CalcForceForNodes and under LagrangeNodal) told apart
                         "rows": [{"callpath": c, "name": exp.tree.name(c) if c in exp.tree else c,
                                   "context": _context(exp.tree, c),
                                   "values": [values.get((c, n)) for n in names]} for c in cps],
                         "n_derived": sum(1 for r in mrows if r["formula"])}


def _check_apmt(a: Mapping) -> dict:
    try:
        xs = [float(v) for v in a["points"]]
        comps = {str(k): [float(v) for v in vals] for k, vals in a["components"].items()}
    except (KeyError, TypeError, ValueError) as e:
        raise PerfcastError(f"malformed APMT breakdown ({e})") from None
    if any(len(v) != len(xs) for v in comps.values()) or not xs:
        raise PerfcastError("APMT breakdown: every component needs one value per point")
    order = np.argsort(xs)
    xs = [xs[i] for i in order]
    comps = {k: [v[i] for i in order] for k, v in comps.items()}
    unit = str(a.get("unit", ""))
    x = str(a.get("x", "p"))
    kind = S.choose_scale(xs)
    tot = np.sum(list(comps.values()), axis=0)
    fig = S.Figure(620, 320, title="Computation / memory / communication", xlabel=x,
                   ylabel="time" + (f" [{unit}]" if unit else ""))
    fig.set_scales(kind, S.padded_range(xs, kind, 0.02), "linear", (0.0, float(np.nanmax(tot)) * 1.08 or 1.0))
    colours = {"computation": "#0072B2", "memory": "#E69F00", "communication": "#D55E00"}
    fig.stacked_areas(xs, list(comps.items()), [colours.get(k, S.PALETTE[i % 10]) for i, k in enumerate(comps)])
    return {"x": x, "points": xs, "components": comps, "unit": unit, "svg": Markup(fig.svg()),
            "note": str(a.get("note", "")), "notes": [str(n) for n in a.get("notes", ())]}


def projection_table(proj) -> dict:
    """Table of target machines from a :class:`perfcast.projection.project.Projection`."""
    try:
        rows = [[t.system, t.name, t.compute_factor, t.compute, t.comm, t.total] for t in proj.targets]
        iv = any(t.factor_interval for t in proj.targets)
        if iv:
            for r, t in zip(rows, proj.targets):
                r += list(t.factor_interval) if t.factor_interval else [None, None]
        note = (f"Measured on {proj.base} ({proj.base_name}): compute {_num(proj.compute_base)} s"
                + (f", communication {_num(proj.comm_base)} s" if proj.comm_base is not None else "")
                + "".join(f". {str(n)[:1].upper()}{str(n)[1:]}" for n in proj.notes) + ".")
    except AttributeError as e:
        raise PerfcastError(f"not a projection result ({e})") from None
    cols = ["system", "name", "compute factor", "compute [s]", "communication [s]", "total [s]"]
    if iv:
        from ..projection.factor import LEVEL
        cols += [f"factor low ({LEVEL:.0%})", f"factor high ({LEVEL:.0%})"]
    return {"columns": cols, "rows": rows, "note": note}


def _check_projections(p) -> dict:
    if isinstance(p, Mapping):
        cols = [str(c) for c in p.get("columns", [])]
        rows = [list(r) for r in p.get("rows", [])]
        note = str(p.get("note", ""))
    else:
        rows_d = list(p)
        cols = []
        for r in rows_d:
            for k in r:
                if k not in cols:
                    cols.append(str(k))
        rows = [[r.get(c) for c in cols] for r in rows_d]
        note = ""
    if any(len(r) != len(cols) for r in rows):
        raise PerfcastError("projection table: rows and columns do not match")
    fmt_rows = [[_num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else ("–" if v is None else str(v))
                 for v in r] for r in rows]
    # rows as shown; values unformatted (numbers stay numbers in --json)
    values = [[v if isinstance(v, (int, float, str)) or v is None else str(v) for v in r] for r in rows]
    return {"columns": cols, "rows": fmt_rows, "values": values, "note": note}


# -- rendering ------------------------------------------------------------------------------------
_CSS = """
:root{--fg:#1d232b;--mute:#5c6670;--line:#dde2e7;--bg:#fff;--acc:#0072B2;--bad:#D55E00}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#f6f7f9;margin:0}
header{background:#1d232b;color:#fff;padding:14px 28px}
header h1{margin:0;font-size:20px;font-weight:600;overflow-wrap:anywhere}
header .sub{color:#b9c2cc;font-size:12px}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:6px 28px;z-index:2}
nav a{margin-right:14px;color:var(--acc);text-decoration:none;font-size:13px}
main{padding:8px 28px 40px;max-width:1800px}
section{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:12px 18px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px}
h3{font-size:14px;margin:2px 0 6px;overflow-wrap:anywhere}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:middle}
th{background:#f0f2f5;font-weight:600;white-space:nowrap}
th.sortable{cursor:pointer}
th.sortable:after{content:" \\2195";color:#aab}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.path{min-width:180px;max-width:420px;overflow-wrap:anywhere}
.scroll{overflow-x:auto}
.full{display:block;color:var(--mute);font-size:11px;font-weight:normal}
.order{white-space:nowrap}
.full.order{white-space:normal;max-width:120px;margin-left:auto;overflow-wrap:anywhere}
math mtd{text-align:left}
tr.other td{color:var(--mute);font-style:italic}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:13px}
.kv dt{color:var(--mute)}
.kv dd{margin:0;overflow-wrap:anywhere}
.note{color:var(--mute);font-size:12px;margin:6px 0}
dl.answers dt{font-weight:600;margin-top:6px}dl.answers dd{margin:2px 0 0 16px}
.conf{font-size:12px;padding:0 4px;border-radius:3px;border:1px solid var(--mute)}
.conf-low{color:#b3261e;border-color:#b3261e}.conf-high{color:#1b7f3b;border-color:#1b7f3b}
.warn{color:var(--bad)}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
.plotcard svg{max-width:100%;height:auto}
.plotcard{border:1px solid var(--line);border-radius:5px;padding:8px}
.plotcard .f{font-size:13px;margin:4px 0 0}
svg text{font-family:system-ui,sans-serif;fill:#333}
svg .tick{font-size:10px}
svg .axis{font-size:11px}
svg .title{font-size:12px;font-weight:600}
svg .legend{font-size:10px}
svg .small{font-size:9px;fill:#777}
svg .legend-box{pointer-events:none}
.bd{display:flex;gap:12px;align-items:flex-start;flex-wrap:wrap}
.bd ul{list-style:none;padding:0;margin:30px 0 0;font-size:12px}
.bd li{margin:2px 0;overflow-wrap:anywhere;max-width:360px}
.sw{display:inline-block;width:11px;height:11px;margin-right:6px;vertical-align:-1px}
.tree td.name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:480px}
.where-self{color:var(--bad);font-weight:600}
.where-callees{color:var(--acc)}
input.filter{padding:4px 8px;border:1px solid var(--line);border-radius:4px;width:280px;margin-bottom:6px}
math{font-size:1.05em}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
"""

_JS = """
(function(){
  function val(td){var v=td.getAttribute('data-v');if(v!==null&&v!==''){var f=parseFloat(v);if(!isNaN(f))return f;}
    return td.textContent.trim().toLowerCase();}
  document.querySelectorAll('table.sortable').forEach(function(t){
    var ths=t.querySelectorAll('thead th');
    ths.forEach(function(th,i){
      if(!th.classList.contains('sortable'))return;
      th.addEventListener('click',function(){
        var tb=t.tBodies[0];var rows=Array.prototype.slice.call(tb.querySelectorAll('tr:not(.other)'));
        var dir=th.getAttribute('data-dir')==='asc'?-1:1;th.setAttribute('data-dir',dir===1?'asc':'desc');
        rows.sort(function(a,b){var x=val(a.cells[i]),y=val(b.cells[i]);
          if(typeof x===typeof y)return (x<y?-1:x>y?1:0)*dir;return (typeof x==='number'?-1:1)*dir;});
        var other=tb.querySelector('tr.other');
        rows.forEach(function(r){tb.insertBefore(r,other);});
      });
    });
  });
  document.querySelectorAll('input.filter').forEach(function(inp){
    var t=document.getElementById(inp.getAttribute('data-table'));
    if(!t)return;
    inp.addEventListener('input',function(){
      var q=inp.value.toLowerCase();
      Array.prototype.forEach.call(t.tBodies[0].rows,function(r){
        if(r.classList.contains('other'))return;
        r.style.display=(q===''||r.textContent.toLowerCase().indexOf(q)>=0)?'':'none';});
    });
  });
})();
"""

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="perfcast {{ version }}">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{{ js_hash }}'; img-src data:">
<title>{{ r.title }}</title>
<style>{{ css }}</style>
</head>
<body>
<header><h1>{{ r.title }}</h1>
<div class="sub">generated by perfcast {{ version }} on {{ generated }} · metric {{ r.metric }}{% if r.unit %} [{{ r.unit }}]{% endif %}{% if r.description %} ({{ r.description }}){% endif %}{% if r.aggregate %}, {{ r.aggregate }}{% endif %}</div></header>
<nav>{% for id, label in nav %}<a href="#{{ id }}">{{ label }}</a>{% endfor %}</nav>
<main>
{% if r.answers %}<section id="answers"><h2>In short</h2>
<dl class="answers">{% for a in r.answers %}<dt>{{ a.question }}</dt><dd>{{ a.answer }} <span class="conf conf-{{ a.confidence or 'none' }}">{% if a.confidence == "measured" %}measured{% elif a.confidence %}{{ a.confidence }} confidence{% endif %}</span>{% for n in a.get("notes", []) %} <span class="note">({{ n }})</span>{% endfor %} <a href="#{{ a.section }}">details</a></dd>{% endfor %}</dl>
</section>
{% endif %}
<section id="summary"><h2>Experiment</h2>
<dl class="kv">
<dt>parameters</dt><dd>{{ s.parameters|join(", ") or "(none: one run)" }}</dd>
<dt>points</dt><dd>{{ s.n_points }}{% if s.parameters %}: {% for p in s.points[:40] %}({% for k in s.parameters %}{{ k }}={{ fnum(p[k]) }}{% if not loop.last %}, {% endif %}{% endfor %}{% if p.repetitions > 1 %} ×{{ p.repetitions }}{% endif %}){% if not loop.last %} {% endif %}{% endfor %}{% if s.n_points > 40 %} …{% endif %}{% endif %}</dd>
<dt>repetitions</dt><dd>up to {{ s.max_reps }} per point</dd>
<dt>callpaths</dt><dd>{{ s.n_callpaths }}</dd>
<dt>metrics</dt><dd>{% for m in s.metrics %}{{ m.name }}{% if m.unit %} [{{ m.unit }}]{% endif %}{% if m.get("aggregate") %} ({{ m.aggregate }}){% endif %}{% if not loop.last %}, {% endif %}{% endfor %}</dd>
<dt>values</dt><dd>{{ s.n_values }}{% for k, v in s.locations.items() %} · {{ v }} {{ k }}s{% endfor %}</dd>
{% if s.format %}<dt>format</dt><dd>{{ s.format }}</dd>{% endif %}
{% if s.get("command") %}<dt>command</dt><dd class="mono">{{ s.command }}</dd>{% endif %}
{% if s.n_sources %}<dt>sources</dt><dd class="mono">{% for src in s.sources[:6] %}{{ src }}{% if not loop.last %}<br>{% endif %}{% endfor %}{% if s.n_sources > 6 %}<br>… {{ s.n_sources - 6 }} more{% endif %}</dd>{% endif %}
{% if r.target %}<dt>target</dt><dd>{% for k, v in r.target.items() %}{{ k }}={{ fnum(v) }}{% if not loop.last %}, {% endif %}{% endfor %}{% if r.target_default %} <span class="note">(default: 4× the largest measured {{ r.x }}; set with --target)</span>{% endif %}</dd>{% endif %}
</dl>
{% for w in s.warnings %}<p class="note warn">reader warning: {{ w }}</p>{% endfor %}
{% for n in r.notes %}<p class="note">{{ n }}</p>{% endfor %}
</section>

{% if r.kernels or r.other %}
<section id="ranking"><h2>Scalability bugs: kernels ranked by {% if r.options.by == "growth" %}growth{% else %}{{ r.cost }} increase{% endif %}</h2>
<p class="note">{{ r.n_models }} callpath(s) modelled for {{ r.metric }}{% if r.aggregate %} ({{ r.aggregate }}{% if r.aggregate.startswith("sum over") and r.options.by != "growth" %}: divided by the process count for the ranking{% endif %}){% endif %}. {% if r.options.by == "growth" %}Ranked by the asymptotic order of the lead term, then by the value predicted at the target.{% else %}Ranked by the {{ r.cost }} increase from the smallest measured {% if r.cost == "cost" %}point{% else %}process count{% endif %} to the target (measured up to the largest run, predicted beyond) as a share of the root's {{ r.cost }} at the target (at least each callpath's own), then by growth order; callpaths below 0.1% of the root rank last.{% endif %} Shown: callpaths holding at least {{ pct(r.options.min_share) }} of the total now or at the target (top {{ r.options.kernels }}; the ranks of the others are skipped, so the numbers have gaps); interval: {{ pct(r.options.level) }} prediction interval for a new measurement. {% if r.options.averaged %}Model: the selected hypothesis; values at the target: averaged over the competing hypotheses with their weights (<code>--averaged</code>).{% else %}Values at the target: the selected hypothesis, the formula shown (as <code>perfcast predict</code>).{% endif %}</p>
<input class="filter" type="search" placeholder="filter callpaths" data-table="ranktable" aria-label="filter callpaths">
<div class="scroll"><table id="ranktable" class="sortable">
<thead><tr><th class="sortable num">#</th><th class="sortable">callpath</th><th>model</th><th class="num sortable">at target{% if r.unit %} [{{ r.unit }}]{% endif %}<span class="full">{{ pct(r.options.level) }} interval</span></th><th class="sortable">confidence<span class="full">at target</span></th>{% if r.options.by != "growth" %}<th class="num sortable">change<span class="full">per process, of root</span></th>{% endif %}<th class="num sortable">share<span class="full">at target</span></th><th class="num sortable">growth<span class="full">order</span></th><th>trend</th><th class="num sortable">now{% if r.unit %} [{{ r.unit }}]{% endif %}<span class="full">{{ maxlabel }}</span><span class="full">mean, share</span></th><th class="num sortable">SMAPE<span class="full">noise</span></th></tr></thead>
<tbody>
{% for k in r.kernels %}<tr>
<td class="num" data-v="{{ k.rank }}">{{ k.rank }}</td>
<td class="path" title="{{ k.callpath }}"><a href="#plot-{{ k.rank }}">{{ k.name }}</a>{% if k.context %}<span class="full">{{ k.context }}</span>{% endif %}</td>
<td>{% if k.status == "ok" or k.segmented %}{{ k.mathml }}{% for w in k.warnings %}<span class="note full" title="{{ w }}">{{ w.split(':')[0] }}: predictions unreliable</span>{% endfor %}{% else %}<span class="note">insufficient points (needs {{ k.needed }})</span>{% endif %}</td>
<td class="num" data-v="{{ k.predicted if k.predicted is not none else '' }}">{{ fnum(k.predicted) }}{% if k.get("line") %}<span class="note" title="{{ k.line_note }}"> ×{{ fnum(k.line.factor, 3) }} measured line</span>{% endif %}{% if k.lower is not none %}<span class="full">[{% if k.clipped %}<span title="the interval reaches below 0; a cost cannot">0 clipped</span>{% else %}{{ fnum(k.lower) }}{% endif %}, {% if k.capped_by %}<span title="{{ CAPPED_NOTE }} {{ k.capped_by }}: a part cannot exceed the whole">{{ fnum(k.upper) }} capped</span>{% else %}{{ fnum(k.upper) }}{% endif %}]</span>{% endif %}</td>
<td>{% if k.confidence %}<span class="conf conf-{{ k.confidence }}">{{ k.confidence }}</span>{% else %}–{% endif %}</td>
{% if r.options.by != "growth" %}<td class="num" data-v="{{ k.increase if k.increase is not none else '' }}">{% if k.increase is not none %}{{ "%+.2f"|format(100 * k.increase) }} %{% else %}–{% endif %}</td>{% endif %}
<td class="num" data-v="{{ k.share_target if k.share_target is not none else '' }}">{{ pct(k.share_target) }}{% if k.above_root %}<span class="note" title="predicted above the whole at the target: the models disagree there (see the note above the table)"> (!)</span>{% endif %}</td>
<td class="num" data-v="{{ k.growth_factor if k.growth_factor is not none else '' }}">{% if k.growth_factor is not none %}×{{ fnum(k.growth_factor, 3) }}{% else %}–{% endif %}<span class="full order">{{ k.order }}</span></td>
<td>{{ k.trend }}</td>
<td class="num" data-v="{{ k.now if k.now is not none else '' }}">{{ fnum(k.now) }}<span class="full">{{ pct(k.share_now) }}</span></td>
<td class="num" data-v="{{ k.smape if k.smape is not none else '' }}">{{ fpct1(k.smape) }}<span class="full">{{ fpct1(k.noise) }}</span></td>
</tr>
{% endfor %}
{% if r.other %}<tr class="other"><td class="num">…</td><td colspan="{{ 9 if r.options.by == 'growth' else 10 }}">other kernels: {{ r.other.count }} more callpath(s){% if r.other.insignificant %}, {{ r.other.insignificant }} below {{ pct(r.options.min_share) }} of the total (<code>--min-share 0</code> lists them){% endif %}{% if r.additive %}; the largest holds {{ pct(r.other.max_share_now) }} now and {{ pct(r.other.max_share_target) }} at the target{% endif %}</td></tr>{% endif %}
</tbody></table></div>
</section>
{% endif %}

{% if r.plots %}
<section id="plots"><h2>Models of the top kernels</h2>
<p class="note">Points: median over repetitions, bars: min–max; solid line: the model over the measured range, dashed: extrapolation; shaded: {{ pct(r.options.level) }} prediction interval{% if r.clipped %} (clipped at 0){% endif %}; diamond: prediction at the target{% if r.validation and r.validation.rows %}; black points: validation runs (not fitted on){% endif %}.</p>
<div class="plots">
{% for p in r.plots %}<div class="plotcard" id="plot-{{ p.rank }}">
<h3 title="{{ p.callpath }}">#{{ p.rank }} {{ p.name }}{% if p.context %} <span class="note">in {{ p.context }}</span>{% endif %}</h3>
{{ p.svg }}
<p class="f">{{ p.mathml }}</p>
<p class="note">at target: {{ fnum(p.predicted) }}{% if p.lower == p.lower %} [{{ fnum(p.lower) }}, {{ fnum(p.upper) }}]{% endif %} {{ r.unit }}{% if p.line_note %}; {{ p.line_note }}{% endif %}{% if p.capped_by %}; {{ CAPPED_NOTE }} {{ p.capped_by }} (a part cannot exceed the whole){% endif %}</p>
{% if p.omitted %}<p class="note">not drawn (the {{ PLOT_LINES }} measured lines with the most points are): {{ p.omitted }}</p>{% endif %}
</div>
{% endfor %}
</div>
</section>
{% endif %}

{% if r.validation %}
<section id="validation"><h2>Predictions vs validation runs (not fitted on)</h2>
{% set vs = r.validation.summary %}
{% if r.validation.note %}<p class="note">{{ r.validation.note }}</p>{% else %}
<p class="note">{{ vs.compared }} prediction(s) of the ranked kernels at the points of the validation runs{% if vs.at_fitted_points %}; of the {{ vs.held_out }} at points the models were not fitted on{% endif %}{% if vs.with_error %}: |error| median {{ pct(vs.median_abs_error) }}, max {{ pct(vs.max_abs_error) }}{% endif %}{% if vs.with_interval %}; {{ vs.inside }} of {{ vs.with_interval }} measured means inside the {{ pct(r.options.level) }} prediction interval{% endif %}. Black points on the plots.</p>
{% if r.validation.fitted %}<p class="note"><b>Not a check:</b> {{ r.validation.fitted }}.</p>{% endif %}
<table><thead><tr><th class="num">#</th><th>callpath</th><th>at</th><th class="num">predicted</th><th class="num">{{ pct(r.options.level) }} interval</th><th class="num">measured</th><th class="num">error</th></tr></thead><tbody>
{% for v in r.validation.rows %}<tr><td class="num">{{ v.rank }}</td><td class="path" title="{{ v.callpath }}">{{ v.name }}</td><td>{% for k, x in v.at.items() %}{{ k }}={{ fnum(x) }}{% if not loop.last %}, {% endif %}{% endfor %}</td><td class="num">{{ fnum(v.value) }}{% if v.get("line") %}<span class="note" title="{{ v.line_note }}"> ×{{ fnum(v.line.factor, 3) }} measured line</span>{% endif %}</td><td class="num">{% if v.lower is not none %}[{{ fnum(v.lower) }}, {{ fnum(v.upper) }}]{% else %}–{% endif %}</td><td class="num">{% if v.measured is not none %}{{ fnum(v.measured) }}{% if v.get("ran") == false %} <span class="note">(did not run)</span>{% endif %}{% if v.inside == false %} <span class="note">(outside)</span>{% endif %}{% else %}–{% endif %}</td><td class="num">{% if v.error is not none %}{{ "%+.1f"|format(100 * v.error) }} %{% elif v.measured == 0 and v.value %}predicted where 0{% else %}–{% endif %}</td></tr>
{% endfor %}</tbody></table>{% endif %}
</section>
{% endif %}

{% if r.apmt %}
<section id="apmt"><h2>Computation, memory and communication vs {{ r.apmt.x }}</h2>
{{ r.apmt.svg }}
{% if r.apmt.note %}<p class="note">{{ r.apmt.note }}</p>{% endif %}{% if r.apmt.notes %}
<details><summary>What the APMT model says of its data ({{ r.apmt.notes|length }} notes)</summary>
<ul class="notes">{% for n in r.apmt.notes %}<li>{{ n }}</li>{% endfor %}</ul></details>{% endif %}
{% if r.reconciliation %}<h3>Every prediction of the run at {% for k, v in r.reconciliation.at.items() %}{{ k }}={{ fnum(v) }}{% if not loop.last %}, {% endif %}{% endfor %}</h3>
<ul class="reconcile">{% for ln in r.reconciliation.lines %}<li>{{ ln }}</li>{% endfor %}</ul>
<p><strong>{{ r.reconciliation.verdict }}</strong></p>{% if r.reconciliation.check %}
<p>{{ r.reconciliation.check }}</p>{% endif %}{% endif %}
<table><thead><tr><th class="num">{{ r.apmt.x }}</th>{% for c in r.apmt.components %}<th class="num">{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for i in range(r.apmt.points|length) %}<tr><td class="num">{{ fnum(r.apmt.points[i]) }}</td>{% for c, v in r.apmt.components.items() %}<td class="num">{{ fnum(v[i]) }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table>
</section>
{% endif %}

{% if r.cost_breakdown %}
<section id="breakdown"><h2>Where the {{ r.metric }} goes, by {{ r.cost_breakdown.x }}</h2>
<div class="bd">{{ r.cost_breakdown.svg }}<ul>{{ r.cost_breakdown.legend }}</ul></div>
<p class="note">Exclusive cost {{ r.cost_breakdown.per }}{% if r.summary.parameters|length > 1 %}; other parameters at their largest values{% endif %}.</p>
</section>
{% endif %}

{% if r.scaling_loss %}{% set sl = r.scaling_loss %}
<section id="scaling-loss"><h2>Scaling loss from {{ sl.procs }}={{ fnum(sl.p) }} to {{ fnum(sl.q) }} ({{ sl.mode }} scaling)</h2>
<p class="note">Excess work of each scope as a fraction of the larger run's total ({{ fnum(sl.total_q) }} {{ r.unit }}); the whole run loses {{ pct(sl.loss) }}.{% if sl.guessed %} Mode guessed ({{ sl.guessed_from }}).{% endif %} “self”: the scope's own code loses, “callees”: look below it.{% if sl.n_hidden %} {{ sl.n_hidden }} scope(s) with a loss under 0.2% are folded.{% endif %}</p>
<table class="tree"><thead><tr><th>scope</th><th class="num">inclusive loss</th><th></th><th class="num">exclusive loss</th><th>where</th><th class="num">inclusive {{ fnum(sl.p) }}{% if r.unit %} [{{ r.unit }}]{% endif %}</th><th class="num">inclusive {{ fnum(sl.q) }}{% if r.unit %} [{{ r.unit }}]{% endif %}</th></tr></thead><tbody>
{% for row in sl.rows %}<tr><td class="name" style="padding-left:{{ 8 + 14 * row.depth }}px" title="{{ row.path }}">{{ row.name }}{% if row.hidden_children %} <span class="note">(+{{ row.hidden_children }})</span>{% endif %}</td>
<td class="num">{{ pct(row.inclusive_loss) }}</td><td>{{ row.bar }}</td><td class="num">{{ pct(row.exclusive_loss) }}</td>
<td class="where-{{ row.where if row.where in ('self', 'callees') else 'none' }}">{{ row.where or 'n/a' }}</td>
<td class="num">{{ fnum(row.inclusive_p) }}</td><td class="num">{{ fnum(row.inclusive_q) }}</td></tr>
{% endfor %}</tbody></table>
</section>
{% endif %}

{% if r.metrics_table %}{% set mt = r.metrics_table %}
<section id="metrics"><h2>Metrics{% if mt.n_derived %} and derived metrics{% endif %}</h2>
<table><thead><tr><th class="num">$</th><th>metric</th><th>unit</th><th>kind</th><th>scope</th><th>formula / description</th></tr></thead><tbody>
{% for m in mt.metrics %}<tr><td class="num">{{ m.index }}</td><td>{{ m.name }}</td><td>{{ m.unit }}</td><td>{{ m.kind }}</td><td>{{ m.scope }}{% if m.aggregate %}, {{ m.aggregate }}{% endif %}</td><td>{% if m.formula %}<span class="mono">{{ m.formula }}</span>{% else %}{{ m.description }}{% endif %}</td></tr>
{% endfor %}</tbody></table>
{% if mt.rows %}
<h3 style="margin-top:14px">Values at {% for k, v in mt.at.items() %}{{ k }}={{ fnum(v) }}{% if not loop.last %}, {% endif %}{% endfor %} (mean over repetitions)</h3>
<div style="overflow-x:auto"><table><thead><tr><th>callpath</th>{% for c in mt.heads %}<th class="num">{{ c.name }}{% if c.unit %} [{{ c.unit }}]{% endif %}{% if c.ranks %}<span class="full">{{ c.ranks }}</span>{% endif %}</th>{% endfor %}</tr></thead><tbody>
{% for row in mt.rows %}<tr><td class="path" title="{{ row.callpath }}">{{ row.name }}{% if row.context %}<span class="full">{{ row.context }}</span>{% endif %}</td>{% for v in row["values"] %}<td class="num">{{ fnum(v) }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table></div>
{% endif %}
</section>
{% endif %}

{% if r.projections %}
<section id="projections"><h2>Projections to target machines</h2>
{% if r.projections.note %}<p class="note">{{ r.projections.note }}</p>{% endif %}
<table><thead><tr>{% for c in r.projections.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in r.projections.rows %}<tr>{% for v in row %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table>
</section>
{% endif %}
</main>
<script>{{ js }}</script>
</body>
</html>
"""


def _js_hash() -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()


def render_html(rep: Report) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
    tmpl = env.from_string(_TEMPLATE)
    names = {"answers": "In short", "summary": "Experiment", "ranking": "Ranking", "plots": "Plots", "apmt": "Breakdown", "breakdown": "Cost by callpath",
             "scaling-loss": "Scaling loss", "metrics": "Metrics", "projections": "Projections",
             "validation": "Validation"}
    nav = [(s, names[s]) for s in rep.sections() if s in names]
    pts = rep.summary.get("points") or []
    maxlabel = ", ".join(f"{p}={_num(max(pt[p] for pt in pts))}" for p in rep.summary["parameters"]) if pts and \
        rep.summary["parameters"] else "the run"
    return tmpl.render(r=rep, s=rep.summary, version=__version__, css=Markup(_CSS), js=Markup(_JS),
                       js_hash=_js_hash(), nav=nav, fnum=_num, pct=_pct, maxlabel=maxlabel, PLOT_LINES=PLOT_LINES,
                       CAPPED_NOTE=CAPPED_NOTE,
                       fpct1=lambda v: "–" if v is None else f"{float(v):.1f}%",
                       generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def write_report(exp: Experiment, path: str | Path, options: ReportOptions | None = None, force: bool = True,
                 **kw) -> Report:
    """Build and write the report to ``path`` atomically; returns the Report.  An existing file is
    replaced only with ``force``; a FIFO, device or directory never is (:mod:`perfcast.output`)."""
    from ..output import check_file_output, write_file

    check_file_output(path, force)  # before the work, not after it
    rep = build_report(exp, options, **kw)
    write_file(path, render_html(rep), force)
    return rep

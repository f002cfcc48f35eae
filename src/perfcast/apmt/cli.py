"""Bodies of the APMT commands (``kernels``, ``machine``, ``compare``, ``predict --breakdown``);
:mod:`perfcast.cli` holds only their option declarations."""

from __future__ import annotations

from typing import Sequence

from ..errors import PerfcastError
from ..machine import Machine


def parse_timers(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise PerfcastError(f"--timer {it!r}: expected KERNEL=CALLPATH (e.g. compute_sweep=app->compute)")
        out[k.strip()] = v.strip()
    return out


def load_machine(path) -> Machine:
    return Machine.load(path) if path else Machine.host()


def kernels_cmd(exp, threshold, metric, procs, as_json, scaling="auto", gaps=None):
    """``gaps``: ``perfcast.cli._rank_gaps`` (the missing-rank warning of the cost metric)."""
    from ..analysis.kernels import identify_kernels
    from ..report.terminal import out, write_json

    ks = identify_kernels(exp, metric=metric, procs=procs, threshold=threshold, scaling=scaling)
    extra = gaps(exp, as_json, [ks.metric]) if gaps is not None else {}
    if as_json:
        return write_json("kernels", ks.to_dict(), **extra)
    for line in ks.explain():
        out.print(line, markup=False, highlight=False)


def machine_cmd(source, write, as_json, force=False):
    import yaml

    from ..report.terminal import out, write_json

    if write:
        from ..output import check_file_output

        check_file_output(write, force)
    m = load_machine(source)
    if write:
        m.save(write, force)
    if as_json:
        return write_json("machine", m.to_dict())
    if not write:
        out.print(yaml.safe_dump(m.to_dict(), sort_keys=False).rstrip(), markup=False, highlight=False)
    else:
        assumed = m.assumed()
        out.print(f"wrote {write}" + (f"; assumed (edit them): {', '.join(assumed)}" if assumed else ""),
                  markup=False, highlight=False)


def _fit(exp, machine, timers, threshold, procs, functions, quiet, comm_max_procs=None, scaling="auto",
         max_terms=1, negative=False):
    from .model import fit_apmt
    from ..report.terminal import progress

    with progress("modelling", enabled=None if not quiet else False):
        return fit_apmt(exp, load_machine(machine), procs=procs, threshold=threshold,
                        timers=parse_timers(timers), functions=functions, comm_time_procs_max=comm_max_procs,
                        scaling=scaling, max_terms=max_terms, negative=negative)


def breakdown_cmd(exp, targets, machine, timers, size_ratio, threshold, procs, functions, strong, as_json,
                  comm_max_procs=None, scaling="auto", measured=None, times=None, times_label=None,
                  max_terms=1, negative=False, level=0.9):
    """``max_terms``, ``negative``: predict's ``--terms``, ``--negative`` (the kernels' time models and
    the PMNF estimates next to them are fitted as `perfcast predict` fits its series)."""
    from ..report.terminal import out, write_json

    ps = []
    for x in (strong.split(",") if strong else ()):
        try:
            ps.append(float(x))
        except ValueError:
            raise PerfcastError(f"--strong {strong!r}: {x.strip()!r} is not a number") from None
        if not (ps[-1] > 0 and ps[-1] != float("inf")):
            raise PerfcastError(f"--strong {strong!r}: {x.strip()!r} is not a positive process count")
    model = _fit(exp, machine, timers, threshold, procs, functions, as_json, comm_max_procs, scaling,
                 max_terms, negative)
    preds = [model.predict(t, size_ratio=size_ratio) for t in targets]
    curve = []
    if strong:
        if model.procs is None:
            raise PerfcastError("--strong needs a process-count parameter")
        curve = model.strong_scaling(ps, targets[0], size_ratio=size_ratio)
    from .reconcile import lines as reconciled_lines, reconcile

    recs = [reconcile(exp, model, p, parse_timers(timers), level=level, measured=measured, times=times,
                      times_label=times_label) for p in preds]
    if as_json:
        return write_json("breakdown", [p.to_dict() for p in preds], model=model.to_dict(),
                          strong_scaling=[p.to_dict() for p in curve], insights=model.insights(targets[0]),
                          reconciliation=recs)
    say = lambda s: out.print(s, markup=False, highlight=False)  # noqa: E731
    for line in model.kernelset.explain():
        say(line)
    for p, rec in zip(preds, recs):
        for line in p.lines() + reconciled_lines(rec):
            say(line)
    if curve:
        fixed = ", ".join(f"{k}={v:g}" for k, v in targets[0].items() if k != model.procs)
        say("strong scaling" + (f" at {fixed}" if fixed else "")
            + (f" (problem {size_ratio:g}x the profiled size)" if size_ratio != 1 else "") + ":")
        for p in curve:
            comp = f"{p.computation:.4g} s" if p.computation_modelled else "not modelled"
            say(f"  {model.procs}={p.at[model.procs]:g}: {p.total:.4g} s (computation {comp}, "
                f"communication {p.comm_total:.4g} s)")
    say("insights:")
    for line in model.insights(targets[0]):
        say("  " + line)
    for n in model.notes:
        say("note: " + n)


def compare_cmd(exp, validation, measure, machine, timers, size, threshold, procs, functions, target, as_json,
                comm_max_procs=None):
    import numpy as np

    from .baselines import Nan, Worley
    from .refine import measured_totals, validate
    from ..report.terminal import out, write_json

    model = _fit(exp, machine, timers, threshold, procs, functions, as_json, comm_max_procs)
    val = validate(model, validation, measure, target, timers=parse_timers(timers))
    train = measured_totals(exp, measure)
    rows = []
    base = {}
    try:
        base["worley"] = Worley.fit(train, model.procs)
    except PerfcastError as e:
        base["worley"] = e.message
    if size:
        try:
            base["nan"] = Nan.fit(train, model.procs, size)
        except PerfcastError as e:
            base["nan"] = e.message
    else:
        base["nan"] = "give --size (e.g. n^2) for the Nan model"
    errs = {"perfcast": [], "worley": [], "nan": []}
    for r in val.rows:
        row = {"at": r["at"], "measured": r["measured"], "perfcast": r["predicted"]}
        errs["perfcast"].append(abs(r["error"]))
        for name, b in base.items():
            v = b.predict(r["at"]) if not isinstance(b, str) else None
            row[name] = v
            if v is not None:
                errs[name].append(abs(v - r["measured"]) / r["measured"])
        rows.append(row)
    summary = {k: (float(np.mean(v)) if v else None) for k, v in errs.items()}
    # the kernels without a time (no CPI, no time model) are not in perfcast's total: a reader comparing
    # its error with the baselines' must know what it leaves out
    left_out = sorted({k for r in val.rows for k, v in model.predict(r["at"]).kernels.items() if v["total"] is None},
                      key=[k.name for k in model.kernels].index)
    if as_json:
        return write_json("comparison", rows, mean_abs_error=summary, validation=val.to_dict(),
                          baselines={k: (v if isinstance(v, str) else v.formula()) for k, v in base.items()},
                          left_out=left_out)
    say = lambda s: out.print(s, markup=False, highlight=False)  # noqa: E731
    if left_out:
        say(f"perfcast: the APMT total leaves out {', '.join(left_out)} (no cycles counter and no time mapped: "
            "no CPI; --timer KERNEL=CALLPATH maps one)")
    for name, b in base.items():
        # Worley's form has no size: fitted at one size, it predicts there only (n/a elsewhere, said)
        at = "" if isinstance(b, str) or not getattr(b, "fixed", None) else \
            " (fitted over " + b.procs + " at " + ",".join(f"{k}={v:g}" for k, v in b.fixed.items()) + \
            "; no prediction at other sizes)"
        say(f"{name}: " + (f"n/a ({b})" if isinstance(b, str) else b.formula()) + at)
    for r in rows:
        at = ",".join(f"{k}={v:g}" for k, v in r["at"].items())
        parts = [f"measured {r['measured']:.4g}"]
        for name in ("perfcast", "worley", "nan"):
            v = r.get(name)
            parts.append(f"{name} " + ("n/a" if v is None else f"{v:.4g} ({(v - r['measured']) / r['measured']:+.1%})"))
        say(f"{at}: " + ", ".join(parts))
    say("mean absolute error: " + ", ".join(f"{k} {'n/a' if v is None else f'{v:.1%}'}" for k, v in summary.items()))
    for line in val.lines()[len(val.rows):]:
        say(line)

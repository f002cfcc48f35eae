"""perfcast command line: a thin shell over the library.

Every command accepts ``--json``.  Input errors are one line on stderr and exit code 2; nothing
half-written is left behind (stores are written atomically).
"""

from __future__ import annotations

import gc
import math
import os
import sys
import warnings
from pathlib import Path

import click

from . import __version__
from .errors import PerfcastError
from .output import check_file_output, check_store_output, os_error_message
from .text import safe_text

#: the cyclic garbage collector's thresholds for a CLI run (:func:`main`; Python's default: 700, 10, 10)
CLI_GC_THRESHOLDS = (200_000, 50, 1000)


def _skip_exit_collection() -> None:
    """At interpreter exit (atexit, registered once by :func:`main`): the objects left frozen
    (``gc.freeze``), so the collector's passes while the interpreter shuts down do not walk every
    object the command made (30k series: ~0.15 s of CPU after the output was written).  The
    atexit handlers registered after this one run first (the last registered runs first):
    process pools, temporary files and the like are closed by then, and standard output is
    flushed by the interpreter; the memory goes back to the system with the process."""
    gc.freeze()


#: not empty once :func:`main` registered :func:`_skip_exit_collection` (tests run main many times)
_EXIT: list = []
#: glibc malloc settings for a CLI run (:func:`_tune_malloc`): arrays above 32 MB (glibc's largest
#: mmap threshold) from fresh mappings, below it from the heap, whose free top is given back to the
#: kernel only beyond 256 MB
CLI_MALLOC = {"M_MMAP_THRESHOLD": (-3, 32 << 20), "M_TRIM_THRESHOLD": (-1, 256 << 20)}


class Finite(click.FloatRange):
    """A float option (optionally within a range) that refuses nan and inf, which every range
    comparison would let through."""

    def _describe_range(self) -> str:
        # no bounds: nothing to say (click printed "[x<=None]" in --help)
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


def parse_coords(text: str, what: str = "--point") -> dict[str, float]:
    """``p=4,n=8`` -> {"p": 4.0, "n": 8.0}."""
    coords: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise PerfcastError(f"{what} {text!r}: expected NAME=VALUE[,NAME=VALUE...]")
        k, v = (s.strip() for s in part.split("=", 1))
        if k in coords:
            raise PerfcastError(f"{what} {text!r}: parameter {k!r} given twice")
        try:
            coords[k] = float(v)
        except ValueError:
            raise PerfcastError(f"{what} {text!r}: {v!r} is not a number") from None
        if not math.isfinite(coords[k]):
            raise PerfcastError(f"{what} {text!r}: {v!r} is not a finite number")
        if not k:
            raise PerfcastError(f"{what} {text!r}: empty parameter name")
    if not coords:
        raise PerfcastError(f"{what} {text!r}: no NAME=VALUE given")
    return coords


def input_options(f):
    """Options shared by every command that reads an experiment."""
    f = click.option("--format", "fmt", metavar="FORMAT",
                     help="Input format (default: detected). `perfcast formats` lists them.")(f)
    f = click.option("--point", "points", multiple=True, metavar="P=V[,Q=W]",
                     help="Coordinates of an input without parameters of its own; once per input, in order.")(f)
    f = click.option("--param", "params", multiple=True, metavar="KEY",
                     help="Metadata key to use as a parameter (e.g. Caliper/Adiak jobsize), or a name whose value "
                          "a run's path carries (mm.x10y1z1.r1: x); repeatable.")(f)
    f = click.option("--statistic", metavar="NAME", expose_value=False, callback=_remember_statistic,
                     help="Inputs holding statistics, not values (summary tables, .extra-p saved without "
                          "repetitions): the statistic to model, e.g. median, mean, min (default: median, "
                          "else mean; Extra-P's own choice for archives).")(f)
    f = click.option("--where", metavar="KEY=VALUE", multiple=True, expose_value=False, callback=_remember_where,
                     help="Read only the runs whose parameter KEY equals VALUE (any input: --where p=1 "
                          "--where p=2), or, in Caliper/Adiak/Thicket inputs, whose metadata KEY does (e.g. "
                          "compiler=clang, so an ensemble's builds are not mixed as repetitions); repeatable "
                          "(one of several values of a key; every key named).")(f)
    return f


def _remember_where(ctx, param, value):
    pairs = []
    for item in value:
        key, eq, val = item.partition("=")
        if not eq or not key.strip() or not val.strip():
            raise PerfcastError(f"{item!r}: give KEY=VALUE", where="--where")
        pairs.append((key.strip(), val.strip()))
    ctx.meta["perfcast.where"] = tuple(pairs)
    return value


def _remember_scaling(ctx, param, value):
    ctx.meta["perfcast.scaling"] = value
    return value


#: import and model only (predict and report have a --scaling of their own)
cube_scaling_option = click.option(
    "--scaling", type=click.Choice(["weak", "weak-threaded", "strong"]), expose_value=False,
    callback=_remember_scaling,
    help="CUBE sets: one value per run from the per-location values, as Extra-P's --scaling: weak = mean "
         "over ranks x threads, weak-threaded = mean over the non-zero ones, strong = sum (default: keep "
         "every location).")


#: import and show: Caliper time series per snapshot
timeseries_option = click.option(
    "--timeseries", is_flag=True, expose_value=False,
    callback=lambda ctx, param, value: ctx.meta.__setitem__("perfcast.timeseries", value),
    help="Caliper time series: one point per snapshot at parameter iteration (the snapshot's first loop "
         "iteration, 1-based) instead of the whole-run profile.")


def _remember_statistic(ctx, param, value):
    ctx.meta["perfcast.statistic"] = value
    return value


def load_experiment(inputs, fmt=None, points=(), params=(), quiet=False, fitted=None):
    """Read EXP arguments (files, directories or a stored experiment) into one Experiment.
    ``fitted``: the experiment these are measurements to compare with (--validate): --where on one
    of its parameters chose the runs to fit, not the runs to compare with, so it is not applied."""
    from .io import ReadOptions, load
    from .report.terminal import progress

    from .report.terminal import err

    pts = [parse_coords(p) for p in points] if points else None
    with progress("reading", enabled=None if not quiet else False) as cb:
        ctx = click.get_current_context(silent=True)
        stat = ctx.meta.get("perfcast.statistic") if ctx is not None else None
        scaling = ctx.meta.get("perfcast.scaling") if ctx is not None else None
        series = bool(ctx.meta.get("perfcast.timeseries")) if ctx is not None else False
        where = ctx.meta.get("perfcast.where", ()) if ctx is not None else ()
        if fitted is not None:
            where = tuple((k, v) for k, v in where if k not in fitted.parameters)
        exp = load(list(inputs), fmt, pts, ReadOptions(parameters=tuple(params), progress=cb, statistic=stat,
                                                       scaling=scaling, timeseries=series, where=where))
    meta_keys = sorted({k for k, _ in where if k not in exp.parameters})
    if meta_keys and exp.meta.get("format") not in ("caliper", "caliper-json", "thicket"):
        exp.meta.setdefault("warnings", []).append(
            f"--where {', '.join(meta_keys)}: not a parameter, and run metadata exist in Caliper and Thicket inputs "
            f"only; ignored for {exp.meta.get('format') or 'this input'}")
    if series and exp.meta.get("format") != "caliper":
        exp.meta.setdefault("warnings", []).append(
            f"--timeseries applies to Caliper .cali files only; ignored for {exp.meta.get('format') or 'this input'}")
    if stat:
        from .store import is_store

        # was ignored silently: a tidy/Extra-P text/Caliper input holds values, not statistics, and a
        # stored experiment holds the statistic chosen when it was imported
        stored = any(is_store(Path(i)) for i in inputs)
        if stored or exp.meta.get("format") not in ("summary", "extrap-experiment", "extrap3"):
            exp.meta.setdefault("warnings", []).append(
                "--statistic applies to inputs holding statistics (summary tables, .extra-p and Extra-P 3 "
                "archives) as they are read; ignored for "
                + ("a stored experiment (its statistic was chosen by perfcast import --statistic)" if stored
                   else exp.meta.get("format") or "this input"))
    if scaling and exp.meta.get("format") != "cube":
        exp.meta.setdefault("warnings", []).append(
            f"--scaling applies to CUBE profiles only; ignored for {exp.meta.get('format') or 'this input'}")
    for w in exp.meta.get("warnings", []):
        err.print(f"perfcast: warning: {w}", markup=False, highlight=False)
    return exp


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", "-V", prog_name="perfcast")
def cli():
    """perfcast: automatic performance modeling of parallel applications.

    Read profiles (Extra-P, CUBE, Caliper, HPCToolkit, tidy CSV/Parquet) or collect them, find
    the kernels that do not scale, fit human-readable scaling models, predict and project.
    EXP arguments are any input the readers accept, or a stored NAME.perfcast experiment.
    """


@cli.command("import")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Directory to write, conventionally NAME.perfcast.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@input_options
@cube_scaling_option
@timeseries_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def import_cmd(inputs, output, force, fmt, points, params, as_json):
    """Read INPUTS (files or directories) into one stored experiment.

    Several inputs combine into one experiment: their parameter values come from the files'
    metadata, from their paths (Score-P style names such as mm.x10y1z1.r1) or from --point.
    Equal coordinates become further repetitions.

    \b
    Examples:
      perfcast import lulesh_weak_scaling_cali/ -o lulesh.perfcast
      perfcast import run4/profile.cubex run8/profile.cubex --point p=4 --point p=8 -o mm.perfcast
    """
    from . import store
    from .report.terminal import out, write_json

    check_store_output(output, force)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    store.write(exp, output, overwrite=force)  # checked again under the output's lock
    s = exp.summary(callpaths=False)
    # what several inputs had in common: their runs at a shared point became further repetitions
    shared = (exp.meta.get("combined") or {}).get("points_in_several_inputs", 0) if len(inputs) > 1 else 0
    if as_json:
        write_json("import", {"output": str(output), "parameters": s["parameters"], "n_points": s["n_points"],
                              "n_callpaths": s["n_callpaths"], "metrics": [m["name"] for m in s["metrics"]],
                              "n_values": s["n_values"], "n_inputs": len(inputs),
                              "points_in_several_inputs": shared})
    else:
        out.print(f"wrote {output}: {s['n_points']} point(s) over {', '.join(s['parameters']) or '(none)'}, "
                  f"{s['n_callpaths']} callpath(s), {len(s['metrics'])} metric(s), {s['n_values']} value(s)"
                  + (f"; {shared} point(s) measured in more than one of the {len(inputs)} inputs: their runs "
                     "merged as further repetitions" if shared else ""),
                  markup=False, highlight=False)


@cli.command("show")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@timeseries_option
@click.option("--max-callpaths", type=click.IntRange(0), default=200, show_default=True,
              help="Callpaths to draw in the tree.")
@click.option("--depth", type=click.IntRange(0), default=None, help="Deepest tree level to draw (0 = the roots).")
@click.option("--json", "as_json", is_flag=True, help="Print the full description as JSON.")
def show_cmd(inputs, fmt, points, params, max_callpaths, depth, as_json):
    """Describe an experiment: parameters, points and repetitions, metrics, callpath tree."""
    from .output import json_chunks, list_of_chunks
    from .report.terminal import show_experiment, write_json_chunks

    from .analysis.oversubscription import oversubscription

    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    over = oversubscription(exp)
    if as_json:
        # the per-callpath list encoded as it is written (800,000 callpaths: 0.5 GB as dicts)
        s = exp.summary(callpaths=False)
        if over is not None:
            s["oversubscribed"] = over.to_dict()
        s["callpaths"] = exp.callpath_records()
        write_json_chunks("experiment", list_of_chunks(json_chunks(s)))
    else:
        show_experiment(exp, max_callpaths, depth)
        if over is not None:
            from .report.terminal import err

            err.print(f"perfcast: note: {over.note()}", markup=False, highlight=False)


@cli.command("formats")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def formats_cmd(as_json):
    """List the input formats perfcast reads."""
    from .io import readers
    from .report.terminal import out, table, write_json

    rs = sorted(readers().values(), key=lambda r: r.name)
    rows = [[r.name, " ".join(r.extensions) + (" (dir)" if r.directories else ""), r.description] for r in rs]
    if as_json:
        write_json("formats", [{"name": r.name, "extensions": list(r.extensions), "directories": r.directories,
                                "description": r.description} for r in rs])
    else:
        out.print(table("Formats", ["format", "inputs", "description"], rows))


# -- analysis in the HPCToolkit way: derived metrics, views, waste, scaling loss (issue #6) ------
def _at_option(f):
    return click.option("--at", "at", metavar="P=V[,Q=W]", default=None,
                        help="Point to analyse when the experiment holds several (fixes parameters).")(f)


def _parse_rate(text: str, what: str) -> float:
    """``12.5``, ``100G``, ``2.5e9`` -> float (suffixes K, M, G, T are powers of 1000)."""
    t = text.strip()
    mult = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
    factor = 1.0
    if t and t[-1].lower() in mult:
        factor = mult[t[-1].lower()]
        t = t[:-1]
    try:
        v = float(t) * factor
    except ValueError:
        raise PerfcastError(f"{what} {text!r}: not a number (suffixes K, M, G, T allowed)") from None
    if not (v > 0 and v != float("inf")):
        raise PerfcastError(f"{what} {text!r}: must be a positive number")
    return v


@cli.command("metrics")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--derive", "derives", multiple=True, metavar='"NAME = FORMULA"',
              help="Add a derived metric; repeatable, applied in order.")
@click.option("--scope", type=click.Choice(["both", "inclusive", "exclusive"]), default="both", show_default=True,
              help="Scopes to evaluate derived metrics in: both gives NAME (exclusive) and 'NAME (inc)'.")
@click.option("--unit", default="", help="Unit of the derived metric, with one --derive (default: from the formula and its operands' "
                                         "units, e.g. bytes / time is bytes/sec).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Store the experiment with its derived metrics (NAME.perfcast).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def metrics_cmd(inputs, fmt, points, params, derives, scope, unit, output, force, as_json):
    """List an experiment's metrics with their positional names ($0, $1, ...) and derive new ones.

    \b
    Formulas (no code is ever executed):
      names       cycles, PAPI_TOT_CYC, "time (inc)" (quote names with spaces/punctuation)
      $n          the n-th metric as listed here, 0-based
      @name       the metric's total (root inclusive) for the same point/rep/rank
      operators   + - * / ^  ( )  < <= > >= == !=
      functions   min max abs sqrt exp log log2 log10 if(cond, a, b) inc(m) exc(m)
    Each derivation is evaluated per callpath, point, repetition and rank, on exclusive values
    (metric NAME) and inclusive values (metric 'NAME (inc)').  Division by zero, sqrt/log of a
    negative number give an empty cell: not stored, counted in the report.

    \b
    Examples:
      perfcast metrics run.perfcast --derive "CPI = PAPI_TOT_CYC / PAPI_TOT_INS" -o run.perfcast --force
      perfcast metrics run.perfcast --derive "share = 100 * time / @time"
    """
    from . import store
    from .analysis.derived import derive
    from .report.terminal import out, write_json
    from .report.views import metrics_table, print_derived

    if output is not None:
        check_store_output(output, force)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    reports = []
    if derives:
        exp, reports = derive(exp, derives, scope, unit)
    derived = exp.meta.get("derived", {}) if isinstance(exp.meta.get("derived"), dict) else {}
    rows = [{"index": i, **m.to_dict(), "formula": (derived.get(n) or {}).get("formula")}
            for i, (n, m) in enumerate(exp.metrics.items())]
    if output is not None:
        store.write(exp, output, overwrite=force)
    if as_json:
        write_json("metrics", rows, derived=reports, output=str(output) if output else None)
        return
    print_derived(reports)
    out.print(metrics_table(rows))
    if output is not None:
        out.print(f"wrote {output}", markup=False, highlight=False)


def _rows_option(default: int, what: str):
    """``--limit`` of a command printing ``what``: a count >= 0, 0 = all (a negative count was read as
    Python's slice, every row but the last ones, and 0 printed none)."""
    return click.option("--limit", type=click.IntRange(0), default=default, show_default=True,
                        help=f"{what}; 0 = all.")


@cli.command("view")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--mode", type=click.Choice(["top-down", "bottom-up", "flat"]), default="top-down", show_default=True,
              help="Calling-context tree, callers of each procedure, or procedures.")
@click.option("--metric", default=None, help="Metric to show (default: the first time metric).")
@click.option("--inclusive/--exclusive", "inclusive", default=None,
              help="Cost that sorts and thresholds (default: inclusive top-down, exclusive otherwise).")
@click.option("--sort", type=click.Choice(["inclusive", "exclusive", "name", "tree"]), default=None,
              help="Order of siblings/rows (overrides --inclusive/--exclusive).")
@click.option("--threshold", type=Finite(), default=0.0, metavar="PCT",
              help="Hide scopes below PCT percent of the total.")
@click.option("--depth", type=click.IntRange(0), default=None,
              help="Deepest level shown (top-down), or caller levels computed (bottom-up, default 3).")
@click.option("--hot-path", "hot", default=None, metavar="CALLPATH",
              help="Show the hot path from CALLPATH (a full callpath or a unique frame name; '-' = the root).")
@click.option("--hot-fraction", type=Finite(), default=0.5, show_default=True,
              help="Follow a child while it holds this fraction of its parent's inclusive cost.")
@click.option("--ranks", type=click.Choice(["sum", "mean", "max", "min"]), default="sum", show_default=True,
              help="How per-rank/thread values are combined.")
@_rows_option(50, "Rows to print (flat, bottom-up)")
@_at_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def view_cmd(inputs, fmt, points, params, mode, metric, inclusive, sort, threshold, depth, hot, hot_fraction,
             ranks, limit, at, as_json):
    """Top-down, bottom-up (callers) and flat views of one profile, and the hot path.

    Costs are inclusive and exclusive per scope, ranks summed (--ranks), repetitions averaged,
    percentages of the root's inclusive total.  A derived metric that is not a sum of metrics (a
    ratio such as CPI, a rate, a share) is refused: view its operands.
    """
    from .analysis import views as V
    from .report import views as R
    from .report.terminal import write_json

    if not 0 <= threshold <= 100:
        raise PerfcastError(f"--threshold {threshold}: must be a percentage between 0 and 100")
    # options the chosen view does not use were accepted and ignored (--hot-fraction 0 without --hot-path
    # printed the top-down tree; --limit 3 top-down printed every row)
    ctx = click.get_current_context()
    unused = [o for o, n in (("--mode", "mode"), ("--sort", "sort"), ("--threshold", "threshold"), ("--depth", "depth"),
                             ("--limit", "limit"), ("--inclusive/--exclusive", "inclusive"))
              if hot is not None and ctx.get_parameter_source(n) not in (None, click.core.ParameterSource.DEFAULT)]
    if unused:
        raise PerfcastError(f"{', '.join(unused)}: not with --hot-path (one path, followed by --hot-fraction)")
    if hot is None and ctx.get_parameter_source("hot_fraction") not in (None, click.core.ParameterSource.DEFAULT):
        raise PerfcastError("--hot-fraction: only with --hot-path")
    if mode == "top-down" and hot is None and \
            ctx.get_parameter_source("limit") not in (None, click.core.ParameterSource.DEFAULT):
        raise PerfcastError("--limit: not with --mode top-down (the tree is cut by --depth and --threshold)")
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    prof = V.profile(exp, metric, parse_coords(at, "--at") if at else None, ranks)
    # the heading names what a value is instead, easily read past: --ranks max on Caliper avg# showed means
    said = _ranks_said(prof.exp, as_json, [prof.metric], _given(ranks, "ranks"))
    said.update(_viewed_shared_cores(prof, as_json))
    if sort is None:
        sort = ("inclusive" if mode == "top-down" else "exclusive") if inclusive is None else \
            ("inclusive" if inclusive else "exclusive")
    if hot is not None:
        res = V.hot_path(prof, None if hot == "-" else hot, hot_fraction)
        return write_json("view", res, **said) if as_json else R.print_hot_path(res)
    if mode == "top-down":
        res = V.top_down(prof, threshold, sort, depth)
        return write_json("view", res, **said) if as_json else R.print_top_down(res)
    if mode == "flat":
        res = V.flat(prof, threshold, sort)
    else:
        res = V.bottom_up(prof, threshold, sort, 3 if depth is None else depth)
    if as_json:
        return write_json("view", res, **said)
    shown = dict(res, rows=_shown(res["rows"], limit))
    R.print_flat(shown) if mode == "flat" else R.print_bottom_up(shown, 3 if depth is None else depth)
    from .report.terminal import err   # the rows --limit leaves out were dropped without a word

    _print_not_shown(err, len(res["rows"]), len(shown["rows"]), "procedure(s)", "--json prints")


@cli.command("waste")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--ops", default=None, metavar="METRIC", help="Floating-point (or other) operations done.")
@click.option("--cycles", default=None, metavar="METRIC", help="Cycles spent (with --peak-ops-per-cycle).")
@click.option("--peak-ops-per-cycle", "peak_ops", default=None, metavar="RATE", help="Peak operations per cycle.")
@click.option("--peak-ops-per-second", "peak_ops_s", default=None, metavar="RATE",
              help="Peak operations per second, against --time (suffix K, M, G, T allowed: 12.8G).")
@click.option("--bytes", "bytes_", default=None, metavar="METRIC", help="Bytes moved.")
@click.option("--time", "time_", default=None, metavar="METRIC", help="Time spent (unit from the metric, else s).")
@click.option("--peak-bandwidth", "peak_bw", default=None, metavar="BYTES/S",
              help="Peak bandwidth in bytes per second, against --time (suffix K, M, G, T allowed: 100G).")
@click.option("--ranks", type=click.Choice(["sum", "mean", "max", "min"]), default="sum", show_default=True,
              help="How per-rank/thread values are combined.")
@click.option("--threshold", type=Finite(), default=0.0, metavar="PCT",
              help="Leave out scopes below PCT percent of the total waste.")
@_rows_option(30, "Rows to print")
@_at_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def waste_cmd(inputs, fmt, points, params, ops, cycles, peak_ops, peak_ops_s, bytes_, time_, peak_bw, ranks,
              threshold, limit, at, as_json):
    """Rank scopes by waste (potential minus actual work) with the companion efficiency.

    FP waste = cycles x peak ops per cycle - ops (or time x peak ops per second - ops);
    efficiency = ops / potential x 100.  Bandwidth waste = time x peak bandwidth - bytes,
    likewise.  Peak rates come from flags (a machine description file will supply them later).
    A scope with work but no time (cycles) of its own measured has no waste ("no time"), nor has one
    whose own time is below zero (its children's exceed it: timers that nest); one whose
    work exceeds its potential ran above the peak given (the peak is too low for that metric):
    its waste is "above peak", not a negative number, and a note says so.  Both are left out of
    the shares: exclusive shares are of the exclusive waste where it is defined (adding up to
    100%), inclusive shares of the whole program's total waste.  A timer without work that holds
    each of its sibling timers at every point (a campaign's `total`) is the whole run of those
    timers, not a scope of its own.

    \b
    Examples:
      perfcast waste run.perfcast --ops PAPI_FP_OPS --cycles PAPI_TOT_CYC --peak-ops-per-cycle 16
      perfcast waste profile.cubex --ops PAPI_FP_OPS --time time --peak-ops-per-second 12.8G
    """
    from .analysis.waste import time_factor, waste
    from .report.terminal import write_json
    from .report.views import print_waste

    if ops is not None:
        if (cycles is None) == (time_ is None) or (cycles is not None and peak_ops is None) or \
                (cycles is None and peak_ops_s is None) or (peak_ops is not None and peak_ops_s is not None):
            raise PerfcastError("--ops needs --cycles with --peak-ops-per-cycle, or --time with --peak-ops-per-second")
    elif cycles is not None or peak_ops is not None or peak_ops_s is not None:
        raise PerfcastError("--cycles/--peak-ops-per-cycle/--peak-ops-per-second need --ops")
    if bytes_ is not None or peak_bw is not None:
        if bytes_ is None or peak_bw is None or time_ is None:
            raise PerfcastError("give --bytes, --time and --peak-bandwidth together")
    if ops is None and bytes_ is None:
        raise PerfcastError("nothing to compute: give --ops with --cycles/--peak-ops-per-cycle or "
                            "--time/--peak-ops-per-second, and/or --bytes/--time/--peak-bandwidth")
    if not 0 <= threshold <= 100:
        raise PerfcastError(f"--threshold {threshold}: must be a percentage between 0 and 100")
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    coords = parse_coords(at, "--at") if at else None

    def seconds(metric):
        if metric not in exp.metrics:
            raise PerfcastError(f"no metric {metric!r}; the experiment has: {', '.join(exp.metrics)}")
        return time_factor(exp, metric)

    results = []
    if ops is not None and cycles is not None:
        results.append(waste(exp, ops, cycles, _parse_rate(peak_ops, "--peak-ops-per-cycle"), coords, ranks,
                             "FP waste", 1.0, threshold))
    elif ops is not None:
        results.append(waste(exp, ops, time_, _parse_rate(peak_ops_s, "--peak-ops-per-second"), coords, ranks,
                             "FP waste", seconds(time_), threshold))
    if bytes_ is not None:
        results.append(waste(exp, bytes_, time_, _parse_rate(peak_bw, "--peak-bandwidth"), coords, ranks,
                             "bandwidth waste", seconds(time_), threshold))
    gaps = _rank_gaps(exp, as_json, [m for m in (ops, cycles, time_, bytes_) if m is not None], _given(ranks, "ranks"))
    if as_json:
        return write_json("waste", results, **gaps)
    for r in results:
        print_waste(r, limit)


@cli.command("scaling-loss")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--mode", type=click.Choice(["weak", "strong"]), required=True,
              help="weak: ideal cost per process constant; strong: ideal cost per process ~ 1/p.")
@click.option("--from", "from_", default=None, metavar="P=V", help="Smaller run, e.g. p=27 (with --to).")
@click.option("--to", "to", default=None, metavar="P=V", help="Larger run, e.g. p=343 (with --from).")
@click.option("--metric", default=None, help="Cost metric (default: the first time metric).")
@click.option("--procs", default=None, metavar="PARAM", help="Parameter counting processes (default: detected).")
@click.option("--ranks", type=click.Choice(["mean", "max", "sum", "min"]), default="mean", show_default=True,
              help="Per-process cost from per-rank values (mean = sum over ranks / ranks; sum, a run's total, "
                   "is refused).")
@click.option("--sort", type=click.Choice(["exclusive", "inclusive"]), default="exclusive", show_default=True,
              help="Rank scopes by exclusive or inclusive loss.")
@_rows_option(20, "Rows to print per pair")
@_at_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def scaling_loss_cmd(inputs, fmt, points, params, mode, from_, to, metric, procs, ranks, sort, limit, at, as_json):
    """Excess work per scope between runs at p and q processes (differential profiling).

    weak: (C_q - C_p) / T_q; strong: (q/p C_q - C_p) / (q/p T_q), C per-process cost of a
    scope (inclusive and exclusive), T the run's total.  0 = perfect, > 0 loss, < 0 superlinear.
    'where' tells whether the loss lives in the scope itself (self) or in its callees.
    Every consecutive pair of process counts unless --from/--to.

    \b
    Example:
      perfcast scaling-loss lulesh_weak_scaling_cali/ --mode weak --from jobsize=27 --to jobsize=343
    """
    from .analysis.scaling_loss import scaling_loss
    from .report.terminal import write_json
    from .report.views import print_scaling_loss

    pairs = None
    if (from_ is None) != (to is None):
        raise PerfcastError("give --from and --to together")
    if from_ is not None:
        a, b = parse_coords(from_, "--from"), parse_coords(to, "--to")
        if len(a) != 1 or len(b) != 1 or set(a) != set(b):
            raise PerfcastError("--from and --to name the same single parameter, e.g. --from p=8 --to p=64")
        name = next(iter(a))
        if procs is not None and procs != name:
            raise PerfcastError(f"--procs {procs!r} differs from the parameter of --from/--to ({name!r})")
        procs, pairs = name, [(a[name], b[name])]
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    res = scaling_loss(exp, mode, metric, procs, pairs, parse_coords(at, "--at") if at else None, ranks, sort)
    gaps = _rank_gaps(exp, as_json, [res["metric"]], _given(ranks, "ranks"))
    if as_json:
        return write_json("scaling-loss", res, **gaps)
    print_scaling_loss(res, limit)


# -- scaling models (issue #3): model, predict, check ------------------------------------------
_ranks_option = click.option(
    "--ranks", "locations", type=click.Choice(["auto", "sum", "mean", "max", "min", "median"]),
    default="auto", show_default=True, help="Reduce per-rank values: auto sums counts/bytes and averages times.")


def _model_options(f):
    f = click.option("--metric", "metrics", multiple=True, metavar="NAME|GLOB",
                     help="Metric(s) to model, names or globs (default: all).")(f)
    f = click.option("--callpath", "callpaths", multiple=True, metavar="GLOB",
                     help="Callpath glob(s) to model (default: all).")(f)
    f = click.option("--terms", "max_terms", type=click.IntRange(1, 2), default=1, show_default=True,
                     help="Terms per parameter in single-parameter models.")(f)
    f = click.option("--negative", is_flag=True, help="Allow negative exponents (strong scaling).")(f)
    f = _ranks_option(f)
    f = click.option("--workers", type=_WORKERS, default="auto", show_default=True, metavar="N|auto",
                     expose_value=False,
                     callback=_workers_option,
                     help="Processes fitting the series in parallel (forked; results identical to one): "
                          "N, or auto = the CPUs this process may run on, at most 8 (one for a fit of one "
                          "chunk, 4,096 series); they also build the records of model --json from "
                          "8,192 series on (the same text).")(f)
    f = click.option("--dask", metavar="ADDRESS", default=None, expose_value=False,
                     callback=lambda ctx, _param, value: ctx.meta.__setitem__("dask", value),
                     help="Fit the series on this Dask cluster, e.g. tcp://host:8786 (results identical "
                          "to one process; needs pip install 'perfcast[dask]').")(f)
    return f


class _Workers(click.ParamType):
    """--workers: a whole number >= 1 or "auto" (kept as None until the fit: usable_cpus())."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return None
        try:
            n = int(value)
        except (TypeError, ValueError):
            n = 0
        if n < 1:
            self.fail(f"{value!r} is neither a whole number >= 1 nor 'auto'", param, ctx)
        return n


_WORKERS = _Workers()
#: --workers auto uses at most this many processes: each forked worker holds ~70 MB of its own
#: (a chunk's temporaries; bench/README.md), and beyond a few the serial reading, statistics and
#: output bound the run (1M series: 63 s in one process, 48 s with two on a 2-core VM)
AUTO_WORKERS = 8


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the platform has one (a Slurm
    job step's or a cgroup's cpuset, taskset), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _workers_option(ctx, _param, value):
    """--workers N: kept for the fit (FitOptions.workers).  numpy's BLAS runs one thread (set
    before numpy loads), also in one process: on small least-squares problems its threads cost more
    than they give (60k series: no measurable difference), N processes x its threads would
    oversubscribe the cores, and a threaded BLAS rounds some sums differently -- one thread, as in
    the forked workers and on Dask workers (which set it too), keeps the output byte-identical
    whichever of one process, --workers N or --dask runs the fit, on any number of cores."""
    ctx.meta["workers"] = value
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
    return value


def _fit_models(exp, metrics, callpaths, max_terms, negative, locations, quiet, averaged=False, intervals=True):
    """The one model set every modelling command reads (perfcast.modelset.model), with progress.
    ``intervals=False`` for outputs without intervals or model records (the fit's leave-largest-out
    check skipped: the same models)."""
    from .modelset import model
    from .report.terminal import progress

    options, session = _fit_options(max_terms, negative)
    if max_terms > 1 and len(exp.parameters) > 1 and not quiet:
        from .report.terminal import err

        err.print(f"perfcast: note: --terms {max_terms} applies to models of one parameter; models of "
                  f"{len(exp.parameters)} parameters ({', '.join(exp.parameters)}) combine up to two "
                  f"monomials (a*b, a + b, a*b + a) or one per parameter, whatever --terms",
                  markup=False, highlight=False)
    with session, progress("modeling", enabled=None if not quiet else False) as cb:
        ms = model(exp, metrics, callpaths, max_terms=max_terms, negative=negative, locations=locations,
                   averaged=averaged, options=options, progress=lambda done, total: cb(done, total, ""),
                   intervals=intervals)
    # the experiment and the model set (one object or more per series) live until the command
    # ends: frozen, so the collector's passes while the output is built do not walk them again
    # (30k series: one pass of ~0.06 s in `model --json` and `predict`); :func:`main` unfreezes
    gc.freeze()
    return ms


def _fit_options(max_terms, negative):
    """(FitOptions from --terms, --negative, --workers and --dask; the Dask session, or a null
    context)."""
    import contextlib

    from .fit import FitOptions

    ctx = click.get_current_context(silent=True)
    dask = ctx.meta.get("dask") if ctx is not None else None
    workers = _workers()
    session = contextlib.nullcontext()
    if dask is not None:
        from .fit import cluster

        session = cluster.session(dask)   # one connection for all groups; checked before any fitting
    return FitOptions(max_terms=max_terms, negative=negative, workers=workers, dask=dask), session


def _workers() -> int:
    """The processes --workers gives the fit and the outputs built after it (``model --json``'s
    records, :meth:`perfcast.modelset.ModelSet.json_chunks`)."""
    ctx = click.get_current_context(silent=True)
    workers = ctx.meta.get("workers", 1) if ctx is not None else 1
    dask = ctx.meta.get("dask") if ctx is not None else None
    if dask is not None and workers is not None and workers > 1:
        raise PerfcastError(f"--dask and --workers {workers}: give one of them")
    if workers is None:
        # auto: the usable CPUs here, up to AUTO_WORKERS (the chunks are the unit of work: a fit of
        # one chunk forks nothing, perfcast.fit.core._chunks); none with a cluster doing the fit
        workers = 1 if dask is not None else min(usable_cpus(), AUTO_WORKERS)
    return workers


def _table_output_options(f):
    f = click.option("--force", is_flag=True, help="Replace an existing --output file.")(f)
    return click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
                        help="Write the whole table to this file instead of printing it: .parquet (nested "
                             "columns for the terms), .csv or .json (what --json prints), atomically; for "
                             "large outputs.")(f)


def _wrote(output, n, what, as_json, frame, records, force, table=None):
    """Write a command's table to --output (perfcast.output.write_table) and say so in one line."""
    from .output import write_table

    return _say_wrote(write_table(output, frame, records, force, table), n, what, as_json)


def _say_wrote(path, n, what, as_json):
    from .report.terminal import err, write_json

    if as_json:
        return write_json("written", {"output": str(path), "what": what, "count": n})
    err.print(f"perfcast: wrote {n} {what} to {path}", markup=False, highlight=False)


_limit_option = click.option(
    "--limit", type=click.IntRange(0), default=50, show_default=True,
    help="Table rows to print; 0 = all (--json and -o FILE always hold every row).")


def _shown(rows, limit: int):
    """The rows a terminal table prints: the first ``limit``, all for 0."""
    return rows if limit == 0 else rows[:limit]


def _print_not_shown(err, total: int, shown: int, what: str, whole: str = "--json or -o FILE writes") -> None:
    if shown < total:
        err.print(f"perfcast: {total - shown} more {what} not shown (--limit 0 prints all; {whole} them all)",
                  markup=False, highlight=False)


_averaged_option = click.option(
    "--averaged", is_flag=True,
    help="Values averaged over the competing hypotheses with their weights (Bayesian model averaging); "
         "default: the selected hypothesis, so the formula shown is the function that gave the value "
         "(on real data the two are as accurate, bench/realdata.py; intervals include the competing "
         "hypotheses either way). The same in predict, model and report.")


@cli.command("model")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@cube_scaling_option
@_model_options
@click.option("--target", default=None, metavar="P=V[,Q=W]",
              help="Scale to rank at (default with --by cost: twice the largest process count).")
@click.option("--by", "by", type=click.Choice(["cost", "growth"]), default="cost", show_default=True,
              help="Ranking: cost = per-process cost increase from the smallest measured process count to "
                   "--target (measured, then predicted) as a share of the root's, negligible callpaths last; "
                   "growth = asymptotic order of the lead term first, then the value at --target.")
@_limit_option
@_averaged_option
@click.option("--json", "as_json", is_flag=True, help="Print every model as JSON.")
@_table_output_options
@click.option("--stream/--no-stream", "stream", default=None,
              help="-o FILE.parquet from one Extra-P text file: read, fit and write it a block of callpaths "
                   "at a time, so memory follows the block, not the file (the same table; default: for "
                   "inputs from 256 MB on; perfcast.pipeline).  Without --target, ranked by cost, all "
                   "metrics and callpaths; other runs model in memory.")
def model_cmd(inputs, fmt, points, params, metrics, callpaths, max_terms, negative, locations, target, by, limit,
              averaged, as_json, output, force, stream):
    """Fit a scaling model to every callpath x metric, ranked as scalability bugs.

    Ranking (--by cost, the default): the per-process cost increase from the smallest measured
    process count to --target -- measured up to the largest run, predicted beyond -- as a share of
    the root's per-process cost there (the root at least each callpath's own cost there; without a
    process-count parameter the costs as measured, and the increase from the smallest point); a metric summed over ranks is divided by the process count,
    metrics averaged over ranks come before the other aggregates, callpaths below 0.1% of the root
    rank last (perfcast.analysis.ranking).  --by growth: asymptotic order of the lead term first,
    then the value at --target.  The metric column names how a value combines the processes
    (sum/mean/max/min over ranks) when known.

    \b
    Examples:
      perfcast model relearn_data.txt --target p=4096,n=9000
      perfcast model exp.perfcast --metric time --callpath 'main->*' --json
    """
    from .analysis.fitcheck import fit_warnings
    from .fit.lines import line_note
    from .output import enveloped_chunks
    from .report.terminal import err, out, table, write_json

    if output is not None:
        from .output import check_file_output, table_format

        table_format(output)
        check_file_output(output, force)
        if stream is not False and not (points or params or metrics or callpaths or target) and by == "cost":
            roots: dict = {}
            n = _streamed(inputs, fmt, output, force, stream, max_terms, negative, locations, averaged, as_json, roots)
            if n is not None:
                done = _say_wrote(output, n, "models", as_json)
                _say_whole_run(_whole_run_roots(roots, by), as_json)
                return done
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    # the table shows no model record and, without a target, no interval: then fitted without the
    # check giving the drift
    ms = _fit_models(exp, metrics, callpaths, max_terms, negative, locations, as_json, averaged,
                     intervals=as_json or output is not None or bool(target))
    tgt = parse_coords(target, "--target") if target else None
    over = {**_rank_gaps(exp, as_json), **_ranks_said(exp, as_json, _modelled(exp, metrics), _given(locations, "locations")),
            **_oversubscribed(ms, as_json), **_whole_run_roots(ms.whole_run, by), **_ranking_target(ms, tgt, by)}
    if as_json or (output is not None and table_format(output) == "json"):
        _json_arrow_pool()
    if output is not None:
        done = _wrote(output, len(ms), "models", as_json, lambda: ms.to_frame(tgt, by=by),
                      lambda: "".join(enveloped_chunks("models", ms.json_chunks(tgt, by, workers=_workers()), **over)),
                      force, lambda: ms.to_table(tgt, by=by))
        _say_whole_run(over, as_json)
        return done
    if as_json:
        from .report.terminal import write_json_chunks

        return write_json_chunks("models", ms.json_chunks(tgt, by, workers=_workers(), direct=True), **over)
    # the rows printed, and the warnings and notes of every series, without building every model
    shown, total, at, warned, noted = ms.rank_head(tgt, by, limit)
    # at the target: predict's values, bounds and notes (the model set's one computation of them)
    pr = ms.predicted(tgt) if tgt else None
    if pr is not None:
        where = ",".join(f"{k}={v:g}" for k, v in tgt.items()) + ": "
        noted += [(sm.callpath, sm.metric, where + n) for s, sm in enumerate(pr.series) for n in pr.extra.get(s, ())]
    from .report.terminal import trends

    tr = trends(exp, [(r.callpath, r.metric) for r in shown], locations, ascii=not out.is_terminal)
    cols = (["#", "callpath", "metric", "trend", "model", "SMAPE %", "noise %"] + (["at target"] if target else [])
            + (["change"] if by == "cost" else []))   # signed: a falling callpath's is negative, no "increase"
    rows = []
    pos = {} if pr is None else {(sm.callpath, sm.metric): s for s, sm in enumerate(pr.series)}
    digits = ms.formula_digits(shown)        # as every output of the set prints them
    for r, d in zip(shown, digits.tolist()):
        m, q = r.model, r.model.quality
        formula = m.formula(digits=d)
        if m.status != "ok" and not getattr(m, "segments", None):
            formula += f"  (insufficient points: need {m.needed})"
        for w in fit_warnings(m):
            formula += f"  (!) {w.split(':')[0]}"     # "poor fit", "2 points only"
        row = [r.rank, r.callpath, _metric_label(r.metric, ms.aggregates, ms.units), tr.get((r.callpath, r.metric), ""), formula,
               "-" if q is None or q.smape != q.smape else f"{q.smape:.2f}",
               "-" if q is None or q.noise is None else f"{q.noise:.2f}"]
        # the value at the ranking's point (the target) on a measured line: the formula's x its factor
        point = at or tgt
        line = m.line_at(point) if point and getattr(m, "lines", ()) else None
        if line:
            if not tgt:     # at the target, predict's notes (above) say it
                noted.append((r.callpath, r.metric, ",".join(f"{k}={v:g}" for k, v in point.items()) + ": "
                              + line_note(line)))
        if target:
            p = pr.at_target(pos[r.callpath, r.metric])
            row.append(_value_cell(p, line) + " " + _interval_cell(p))
        if by == "cost":
            row.append("-" if r.increase is None else f"{r.increase:+.2%}" + ("" if r.significant else " (negligible)"))
        rows.append(row)
    from .analysis.ranking import cost_heading

    # the ranking's smallest measured point: the same for every row (Ranked.first_at)
    first_at = shown[0].first_at if shown and shown[0].first_at else {}
    how = "by asymptotic growth" if by == "growth" else (cost_heading(ms.procs, first_at, at or {}) if total else "")
    said = over.get("ranking_target", {}).get("note")
    out.print(table(f"Scaling models ({total} series, ranked as scalability bugs {how}{'; ' + said if said else ''})",
                    cols, rows))
    _print_not_shown(err, total, len(rows), "models")
    _print_series_notes(err, "warning", warned, f"{_notes_named(warned)}, marked (!)")
    _print_series_notes(err, "note", noted)
    _say_whole_run(over, False)


def _modelled(exp, metrics):
    """The metrics ``--metric`` names (names or globs; None: all) of ``exp``."""
    return exp.metric_names(list(metrics)) if metrics else None


def _given(value, name: str):
    """``value`` of the option ``name`` when the user gave it (not its default), else None."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.get_parameter_source(name) in (None, click.core.ParameterSource.DEFAULT):
        return None
    return value


def _viewed_shared_cores(prof, quiet: bool) -> dict:
    """The runs of the point ``view`` shows whose ranks shared the cores (more ranks than cores, or
    other processes busy on them), when its metric is a time: said once on stderr unless ``quiet``;
    returned as the JSON summary's ``oversubscribed`` field (``viewed``).  LULESH's time at p = 27 on a
    2-core machine was shown without a word, as if it were the code's."""
    from .analysis.oversubscription import of_metric
    from .report.terminal import err

    over = of_metric(prof.exp, prof.metric)
    if over is None:
        return {}
    if not quiet:
        err.print(f"perfcast: note: {over.note()}", markup=False, highlight=False)
    return {"oversubscribed": {"viewed": over.to_dict()}}


def _ranks_said(exp, quiet: bool, metrics=None, ranks=None) -> dict:
    """``--ranks ranks`` given explicitly on metrics (of ``metrics``; None: all) holding one value per
    run (:func:`perfcast.experiment.ranks_not_combined`): said once on stderr unless ``quiet`` and
    returned as the JSON summary's ``ranks_not_combined`` field -- never ignored silently (--ranks max
    on Caliper avg# modelled the means).  Nothing when ``ranks`` is None (the default)."""
    from .experiment import ranks_not_combined, ranks_not_combined_note
    from .report.terminal import err

    if ranks is None:
        return {}
    items = ranks_not_combined(exp, metrics)
    if not items:
        return {}
    if not quiet:
        err.print(f"perfcast: note: {ranks_not_combined_note(items, ranks)}", markup=False, highlight=False)
    return {"ranks_not_combined": {"ranks": ranks, "metrics": items}}


def _rank_gaps(exp, quiet: bool, metrics=None, ranks=None) -> dict:
    """The callpaths/metrics of a dense input without values at some ranks
    (:func:`perfcast.experiment.location_gaps`) or in some repetitions of a point
    (:func:`perfcast.experiment.repetition_gaps`; of ``metrics`` only when given: the ones a command
    reduced): said once on stderr unless ``quiet``; returned as the JSON summary's
    ``missing_ranks`` / ``missing_repetitions`` fields.  The one helper of every command that reduces over ranks."""
    from .experiment import location_gaps, location_gaps_warning, repetition_gaps, repetition_gaps_warning
    from .report.terminal import err

    out = {}
    for field, find, say in (("missing_ranks", location_gaps, location_gaps_warning),
                             ("missing_repetitions", repetition_gaps, repetition_gaps_warning)):
        gaps = find(exp)
        if metrics is not None:
            keep = set(metrics)
            gaps = [g for g in gaps if g["metric"] in keep]
        if gaps and not quiet:
            err.print(f"perfcast: warning: {say(gaps)}", markup=False, highlight=False)
        if gaps:
            out[field] = gaps
    return {**out, **_ranks_said(exp, quiet, metrics, ranks)}


def _ranking_target(ms, target, by: str) -> dict:
    """The JSON summary's ``ranking_target`` field when the ranking's target meets a parameter no
    model follows (:meth:`perfcast.modelset.ModelSet.target_note`): the point ranked at and the
    note (the table's heading says it); nothing otherwise."""
    if target is None and by != "cost":
        return {}
    note = ms.target_note(target)
    if note is None:
        return {}
    return {"ranking_target": {"at": dict(target) if target is not None else ms.default_target(),
                               "given": target is not None, "unfollowed": list(ms.unfollowed), "note": note}}


def _whole_run_roots(whole_run, by: str) -> dict:
    """The cost ranking's root of each flat timer list with a whole-run timer (``ModelSet.whole_run``,
    or the streamed fit's, perfcast.pipeline: the rule ``project`` and ``advise`` use), as the JSON
    summary's ``ranking_root`` field (metric -> timer); :func:`_say_whole_run` says it."""
    return {"ranking_root": dict(whole_run)} if by == "cost" and whole_run else {}


def _say_whole_run(summary: dict, quiet: bool) -> None:
    """The ``ranking_root`` of ``summary`` on stderr (once the ranking succeeded) unless ``quiet``."""
    from .report.terminal import err

    if quiet:
        return
    for metric, timer in summary.get("ranking_root", {}).items():
        err.print(f"perfcast: note: {metric!r} is a flat timer list whose {timer} holds every other timer at every "
                  f"measured point: the cost shares are of {timer} (the whole run), not of the sum of the timers, "
                  f"which would count nested time again", markup=False, highlight=False)


def _oversubscribed(ms, quiet: bool, measured=None) -> dict:
    """The model set's oversubscribed runs (and those of the ``measured`` validation experiment):
    said once on stderr unless ``quiet``; returned as the JSON summary's ``oversubscribed`` field."""
    from .analysis.oversubscription import oversubscription
    from .report.terminal import err

    found = {}
    if ms.oversubscribed is not None:
        found["fitted"] = ms.oversubscribed
    if measured is not None and (o := oversubscription(measured, ms.procs)) is not None:
        found["measured"] = o
    if not quiet:
        for what, o in found.items():
            err.print(f"perfcast: note: {'the measurements compared: ' if what == 'measured' else ''}{o.note()}; "
                      + ("times predicted from them are of low confidence" if what == "fitted" else
                         "their times are not what the application takes on enough cores"),
                      markup=False, highlight=False)
    return {"oversubscribed": {k: o.to_dict() for k, o in found.items()}} if found else {}


def _streamed(inputs, fmt, output, force, stream, max_terms, negative, locations, averaged, quiet, roots=None):
    """``model -o FILE.parquet`` streamed (perfcast.pipeline) when the input is one it takes: the
    number of series written, or None (nothing written: model in memory); ``roots`` filled with the
    ranking's whole-run timers (metric -> timer)."""
    from .pipeline import model_table, streamable
    from .report.terminal import err, progress

    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    if len(inputs) != 1 or meta.get("dask") or any(meta.get(f"perfcast.{k}") for k in
                                                   ("statistic", "scaling", "timeseries", "where")):
        return None
    if not streamable(inputs[0], fmt, output, forced=bool(stream)):
        return None
    options, _ = _fit_options(max_terms, negative)
    with progress("modeling", enabled=None if not quiet else False) as cb:
        return model_table(inputs[0], output, force=force, options=options, locations=locations, averaged=averaged,
                           progress=cb, warn=lambda w: err.print(f"perfcast: warning: {w}", markup=False,
                                                                 highlight=False), roots=roots)


def _metric_label(metric: str, aggregates, units=None) -> str:
    """The metric with its unit (the values, intervals and formulas in its row are in it) and how
    its value combines the processes, e.g. ``sum#time [sec] (sum over ranks)``."""
    agg = aggregates.get(metric) if aggregates else ""
    unit = units.get(metric) if units else ""
    label = f"{metric} [{unit}]" if unit else metric
    return f"{label} ({agg})" if agg else label


def _value_cell(p, line) -> str:
    """A prediction's value in a table (``p``: a predict row, or ModelSet.predicted's at_target):
    (!) when a quantity that cannot be negative is predicted below zero."""
    from .modelset import NEGATIVE_NOTE

    return (f"{p['value']:.6g}" + (" (!)" if any(n.startswith(NEGATIVE_NOTE) for n in p["notes"]) else "")
            + (f" (x{line['factor']:.3g} line)" if line else ""))


def _interval_cell(p) -> str:
    """A prediction's interval in a table, ``-`` without one."""
    return "-" if p["lower"] is None else (f"[{'0 (clipped)' if p['clipped'] else format(p['lower'], '.6g')}, "
                                           f"{p['upper']:.6g}]")


def _notes_named(items) -> str:
    """What the notes ``items`` (callpath, metric, text) are, for a summary line: by a phrase of
    each note."""
    from .modelset import NEGATIVE_NOTE

    kinds = (("regime change", "regime change(s)"), ("measured line", "values on a measured line"),
             (NEGATIVE_NOTE, "negative values at the target"), ("poor fit", "poor fits"),
             ("falls with", "values falling with a parameter (negative exponents searched)"),
             ("no line of >= 3 points", "a parameter no model follows (no line of >= 3 points along it)"),
             ("2 points only", "laws through 2 points"),
             (" through the two levels", "a law on 2 values of a parameter (one power through its two levels)"),
             ("does not run at", "routines that do not run at p = 1 (0 there, their law from the next process count on)"))
    texts = {t for *_, t in items}
    named = [name for key, name in kinds if any(key in t for t in texts)]
    if any(not any(key in t for key, _ in kinds) for t in texts):
        named.append("other notes")
    return ", ".join(named)


def _print_series_notes(err, kind, items, what=None, limit=6):
    """One line per (callpath, metric, text) when there are few series, else a summary line naming
    ``what`` they are (default: the kinds of notes among them)."""
    items = list(dict.fromkeys(items))
    what = what or _notes_named(items)
    series = list(dict.fromkeys((cp, m) for cp, m, _ in items))
    if len(series) <= limit:
        for cp, m, text in items:
            err.print(f"perfcast: {kind}: {cp} {m}: {text}", markup=False, highlight=False)
    elif series:
        names = ", ".join(f"{cp} {m}" for cp, m in series[:3])
        err.print(f"perfcast: {kind}: {len(series)} series with {what}, e.g. {names}; --json gives the "
                  "details per series", markup=False, highlight=False)


_run_times_option = click.option(
    "--run-times", "run_times", multiple=True, type=click.Path(path_type=Path), metavar="EXP",
    help="With the APMT breakdown: a timing campaign of the same application (same parameters; more points, "
         "larger scales than the counter runs) whose models of the measured times give the PMNF run time "
         "APMT's total is put next to, instead of the APMT experiment's own timers: one PMNF estimate of the run.")


def _load_run_times(run_times, params, quiet: bool):
    """--run-times EXP: (the timing campaign, its name for the output), or (None, None)."""
    if not run_times:
        return None, None
    return load_experiment(run_times, None, (), params, quiet=quiet), ", ".join(map(str, run_times))


@cli.command("predict")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@_model_options
@click.option("--at", "at", multiple=True, metavar="P=V[,Q=W]",
              help="Point(s) to predict (default with --validate: the validation runs' points).")
@click.option("--validate", "measured", multiple=True, type=click.Path(path_type=Path), metavar="EXP",
              help="Validation runs the models are not fitted on (e.g. one larger run): each prediction is "
                   "compared with the measured mean, ranks reduced the same way; repeatable. With "
                   "--breakdown: the APMT total and the PMNF run time checked against the run time measured there.")
@click.option("--level", type=Finite(0, 1, min_open=True, max_open=True), default=0.9,
              show_default=True, help="Probability of the prediction interval.")
@_averaged_option
@click.option("--breakdown", is_flag=True,
              help="APMT: total runtime with a per-kernel computation / memory / communication breakdown.")
@click.option("--timer", "timers", multiple=True, metavar="KERNEL=CALLPATH",
              help="With --breakdown: an application timer measuring a kernel (effective CPI source).")
@click.option("--machine", "machine", type=click.Path(path_type=Path),
              help="With --breakdown: machine description YAML (default: this host).")
@click.option("--size-ratio", type=Finite(0, min_open=True), default=1.0,
              help="With --breakdown: problem size relative to the profiled one (APMT work per rank).")
@click.option("--strong", metavar="P1,P2,...", help="With --breakdown: also print a strong-scaling curve.")
@_run_times_option
@click.option("--comm-max-procs", type=Finite(1), default=None, metavar="N",
              help="APMT: fit communication times on runs with at most N processes (e.g. the cores: "
                   "oversubscribed runs measure descheduling); counts and sizes use every run.")
@click.option("--scaling", type=click.Choice(["auto", "strong", "weak"]), default="auto", show_default=True,
              help="With --breakdown: How the work per rank changes with p, for the non-scalable rule: strong (total work fixed: cost per rank expected ~ 1/p), weak (work per rank fixed: expected constant), auto (inferred from the total instructions summed over ranks).")
@_limit_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_table_output_options
def predict_cmd(inputs, fmt, points, params, metrics, callpaths, max_terms, negative, locations, at, measured,
                level, averaged, breakdown, timers, machine, size_ratio, strong, run_times, comm_max_procs, scaling,
                limit, as_json, output, force):
    """Predict every callpath x metric at --at with a prediction interval for a new measurement.

    With --validate, also compare each prediction with what was measured there (relative error,
    inside the interval or not).

    \b
    Examples:
      perfcast predict exp.perfcast --at p=4096 --metric time
      perfcast predict small.perfcast --validate large.perfcast
    """
    from .output import envelope
    from .report.terminal import err, out, table, write_json, write_json_chunks

    if not breakdown:
        # were accepted and ignored: `--timer solve=app->t` without --breakdown changed nothing
        ctx = click.get_current_context()
        given = [f"--{name.replace('_', '-')}" for name in ("timers", "machine", "size_ratio", "strong",
                                                            "run_times", "comm_max_procs", "scaling")
                 if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
        if given:
            given = ["--timer" if g == "--timers" else g for g in given]
            raise PerfcastError(f"{', '.join(given)}: only with --breakdown (the APMT total and its parts)")
    else:
        # the breakdown models its own series (ranks: the slowest; every metric APMT uses): were ignored
        ctx = click.get_current_context()
        given = [opt for name, opt in (("metrics", "--metric"), ("callpaths", "--callpath"), ("locations", "--ranks"),
                                       ("averaged", "--averaged"), ("limit", "--limit"))
                 if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
        if given:
            raise PerfcastError(f"{', '.join(given)}: not with --breakdown (it models the kernels' counters and the MPI "
                                "routines, ranks reduced to the slowest, and prints every part)")
    if output is not None:
        from .output import check_file_output, table_format

        if breakdown:
            raise PerfcastError("--output writes the per-series predictions; --breakdown prints the APMT total",
                                where="--output")
        table_format(output)
        check_file_output(output, force)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    check, mexp, targets = None, None, [parse_coords(a, "--at") for a in at]
    if measured:
        from .analysis import validation

        mexp = load_experiment(measured, None, (), params, quiet=as_json, fitted=exp)
        check = validation.measured_means(mexp, exp.parameters, locations, source=[str(m) for m in measured])
        targets = targets or validation.measured_points(mexp, exp.parameters)
    if not targets:
        raise PerfcastError("no point to predict: give --at P=V[,Q=W] or validation runs with --validate")
    for t in targets:
        extra = [k for k in t if k not in exp.parameters]
        missing = [p for p in exp.parameters if p not in t]
        if extra or missing:
            raise PerfcastError(f"--at {','.join(f'{k}={v:g}' for k, v in t.items())}: give exactly the "
                                f"parameters {', '.join(exp.parameters)}" if exp.parameters else
                                "the experiment has no parameters (one run): nothing to predict at --at; "
                                "scaling models need runs at several points")
    if breakdown:
        from .apmt.cli import breakdown_cmd
        times, label = _load_run_times(run_times, params, as_json)
        return breakdown_cmd(exp, targets, machine, timers, size_ratio, 0.05, None, "pmnf", strong, as_json,
                             comm_max_procs, scaling, measured=mexp, times=times, times_label=label,
                             max_terms=max_terms, negative=negative, level=level)
    ms = _fit_models(exp, metrics, callpaths, max_terms, negative, locations, as_json, averaged)
    over = {**_rank_gaps(exp, as_json), **_ranks_said(exp, as_json, _modelled(exp, metrics), _given(locations, "locations")),
            **_oversubscribed(ms, as_json, mexp)}
    if as_json and check is None and output is None:
        return write_json_chunks("predictions", [ms.predict_json(targets, level)], **over)
    if check is None and output is not None:
        from .modelset import predictions_frame
        from .output import enveloped_chunks

        # without --validate the JSON file is the --json text written a column at a time (no dict
        # per row: a million predictions); the rows are built for a CSV/Parquet table only
        n = len(ms) * len(targets)
        return _wrote(output, n, "predictions", as_json,
                      lambda: predictions_frame(ms.predict(targets, level), exp.parameters),
                      lambda: "".join(enveloped_chunks("predictions", [ms.predict_json(targets, level, nested=True)],
                                                       **over)),
                      force)
    rows = ms.predict(targets, level)
    summary = None
    if check is not None:
        rows = validation.compare(rows, check, exp.parameters, fitted=exp)
        summary = validation.summarize(rows)
        if not summary["compared"]:
            raise PerfcastError("no predicted series was measured at the predicted point(s): the callpaths, "
                                "metrics or points differ", where="--validate")
    if output is not None:
        from .modelset import predictions_frame

        return _wrote(output, len(rows), "predictions", as_json, lambda: predictions_frame(rows, exp.parameters),
                      lambda: envelope("predictions", rows, **({} if summary is None else {"accuracy": summary}),
                                       **over),
                      force)
    if as_json:
        return write_json("predictions", rows, **({} if summary is None else {"accuracy": summary}), **over)
    from .report.terminal import trends

    all_rows, rows = rows, _shown(rows, limit)
    tr = trends(exp, [(r["callpath"], r["metric"]) for r in rows], locations, ascii=not out.is_terminal)
    cols = ["callpath", "metric", "trend", "at", "value", f"{level:.0%} interval", "confidence"]
    if summary is not None:
        cols += ["measured", "error"]
    cols += ["model"]

    def compared(r):
        if summary is None:
            return []
        if r["measured"] is None:
            return ["-", "-"]
        return [f"{r['measured']:.6g}" + (" (did not run)" if r.get("ran") is False else "")
                + ("" if r["inside"] in (None, True) else " (outside)"),
                ("0 as predicted" if r["measured"] == 0 and not r["value"] else "predicted where 0")
                if r["measured"] == 0 else
                "-" if r["error"] is None else f"{0.0 if abs(r['error']) < 5e-4 else r['error']:+.1%}"]

    out.print(table("Predictions" if summary is None else "Predictions vs measured", cols, [
        [r["callpath"], _metric_label(r["metric"], ms.aggregates, ms.units), tr.get((r["callpath"], r["metric"]), ""),
         ",".join(f"{k}={v:g}" for k, v in r["at"].items()),
         _value_cell(r, r.get("line")), _interval_cell(r), r["confidence"]] + compared(r)
        + [r["formula"] if r["status"] == "ok" or r["segmented"] else "insufficient points"] for r in rows]))
    _print_not_shown(err, len(all_rows), len(rows), "predictions")
    if summary is not None:
        s = summary
        out.print(f"measured: {s['compared']} of {len(all_rows)} predictions"
                  + (f"; at the {s['held_out']} not fitted on" if s["at_fitted_points"] else "")
                  + (f"{':' if s['at_fitted_points'] else ';'} |error| median {s['median_abs_error']:.1%}, mean {s['mean_abs_error']:.1%}, "
                     f"max {s['max_abs_error']:.1%}" if s["with_error"] else "")
                  + (f"; {s['predicted_where_zero']} predicted non-zero where the measured value is 0 (up to "
                     f"{s['max_predicted_where_zero']:.6g}: no relative error, a miss)" if s["predicted_where_zero"] else "")
                  + (f"; {s['inside']} of {s['with_interval']} measured means inside the {level:.0%} interval"
                     if s["with_interval"] else ""), markup=False, highlight=False)
        from .analysis.validation import fitted_note

        if fitted_note(s):
            err.print(f"perfcast: warning: {fitted_note(s)}", markup=False, highlight=False)
    _print_series_notes(err, "note", [(r["callpath"], r["metric"], n) for r in all_rows for n in r["notes"]])


@cli.command("advise")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--target", required=True, metavar="P=V[,Q=W]",
              help="Point to predict, beyond the measured range; parameters left out stay at their largest "
                   "measured value.")
@click.option("--budget", type=Finite(), default=None, metavar="CORE_HOURS",
              help="Plan the runs to make within this many core-hours (greedy, best gain per cost first).")
@click.option("--candidates", "candidates", multiple=True, metavar="NAME=V1,V2,...",
              help="Candidate values of a parameter; repeatable, one parameter each: the grid of the values "
                   "given, the other parameters at their measured values (default: each parameter's measured "
                   "values continued by their own progression, two steps).  Measured points are always "
                   "candidates for another repetition.")
@click.option("--metric", default=None,
              help="Metric whose prediction should become more certain (default: the time metric runs are "
                   "costed by).")
@click.option("--terms", "max_terms", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Terms per parameter in single-parameter models.")
@click.option("--negative", is_flag=True, help="Allow negative exponents (strong scaling).")
@_ranks_option
@_limit_option
@click.option("--json", "as_json", is_flag=True, help="Print every candidate as JSON.")
def advise_cmd(inputs, fmt, points, params, target, budget, candidates, metric, max_terms, negative, locations,
               limit, as_json):
    """Which run next: rank candidate measurements by the uncertainty they remove at --target, per
    core-hour, each with a one-line reason.

    The uncertainty of each kernel that matters at the target (>= 1% of the whole run there) has
    three parts the models carry: coefficient uncertainty (reduced by a run at x by the
    Sherman-Morrison update, the c-optimal criterion), competing hypotheses (a run where they differ
    by more than the noise separates them: expected reweighting by quadrature), and the
    extrapolation term (a run closer to the target than every measured point shortens it).  Cost:
    the predicted run time at a new point (the whole-run time model) x processes; a repetition of a
    measured point costs its measured time x processes (perfcast.analysis.advisor).  Nothing is run.

    \b
    Examples:
      perfcast advise app.perfcast --target p=4096
      perfcast advise relearn_data.txt --target p=2048,n=9000 --budget 500
      perfcast advise app.perfcast --target p=4096 --candidates p=1024,2048 --candidates n=64
    """
    from .analysis.advisor import advise, metrics_needed, request
    from .report.terminal import progress, write_json

    grid: dict = {}
    for c in candidates:
        name, eq, vals = c.partition("=")
        name = name.strip()
        if not eq or not name or not vals.strip():
            raise PerfcastError(f"{c!r}: give NAME=V1,V2,...", where="--candidates")
        if name in grid:
            raise PerfcastError(f"{c!r}: {name} given twice; give its values in one option", where="--candidates")
        try:
            grid[name] = [float(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise PerfcastError(f"{c!r}: the values are not numbers", where="--candidates") from None
        if not all(math.isfinite(v) for v in grid[name]):
            raise PerfcastError(f"{c!r}: the values must be finite", where="--candidates")
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    req = request(exp.parameters, exp.points().to_dict("records"),
                  parse_coords(target, "--target"), [grid] if grid else (), budget)
    needed = metrics_needed(exp, metric)
    ms = _fit_models(exp, needed, None, max_terms, negative, locations, as_json)
    said = _ranks_said(exp, as_json, needed, _given(locations, "locations"))
    with progress("advising", enabled=None if not as_json else False) as cb:
        adv = advise(ms, exp, req, metric, locations, cb)
    if as_json:
        return write_json("advice", adv.items(), **adv.summary(), **said)
    _print_advice(adv, limit)


def _pct_pm(v) -> str:
    return "no interval" if v is None else f"±{v:.1%}"


def _print_advice(adv, limit: int) -> None:
    from .analysis.advisor import LEVEL, core_hours
    from .report.terminal import err, out, table

    say = lambda text: out.print(text, markup=False, highlight=False)  # noqa: E731
    sd = lambda v: f"±{math.sqrt(max(v, 0.0)):.1%}"  # noqa: E731
    u = adv.summary()["uncertainty"]
    # "the total's 90% interval there is no interval" when a topmost callpath's model gives none
    # (LULESH's MPI_Gather: a last regime of 2 points): said as such
    total = (f"the total's {LEVEL:.0%} interval there is {_pct_pm(u)} (perfcast predict's)" if u is not None else
             f"the total has no {LEVEL:.0%} interval there (a topmost callpath's model gives none: "
             "perfcast predict says which)")
    say(f"Target {','.join(f'{k}={v:g}' for k, v in adv.target.items())}, metric {adv.metric}: {total}; the kernels that matter there "
        f"have a standard deviation of ±{adv.sd:.1%} (coefficients {sd(adv.parts['coefficients'])}, "
        f"hypotheses {sd(adv.parts['hypotheses'])}, extrapolation {sd(adv.parts['extrapolation'])}), "
        f"which the candidates are ranked by")
    out.print(table("Kernels at the target", ["callpath", "share", "coefficients", "hypotheses", "extrapolation"],
                    [[k["callpath"], f"{k['share']:.0%}"] + [f"±{k['sd'][p]:.1%}" for p in
                                                              ("coefficients", "hypotheses", "extrapolation")]
                     for k in adv.kernels]))
    whole = "+".join(adv.cost_root) if len(adv.cost_root) <= 3 else f"the {len(adv.cost_root)} topmost callpaths"
    say(f"Cost: run time = {whole} ({adv.cost_metric}), x {adv.procs or '1 process'}: predicted at new points, "
        f"measured at repetitions")
    shown = _shown(adv.choices, limit)
    say("Candidates, best reduction per core-hour first:")
    for i, c in enumerate(shown):
        say(f"{i + 1:>3}. {c.reason}")
    _print_not_shown(err, len(adv.choices), len(shown), "candidates", "--json prints")
    if adv.budget is not None:
        say(f"Plan within {adv.budget:g} core-hours ({core_hours(adv.spent)} spent):")
        for st in adv.plan:
            say(f"{st['step']:>3}. {','.join(f'{k}={v:g}' for k, v in st['at'].items())}"
                f"{' again' if st['kind'] == 'repeat' else ''}: ~{core_hours(st['cost'])} core-h, "
                f"{_pct_pm(st['uncertainty_after'])} after")
    for n in adv.notes:
        err.print(f"perfcast: note: {n}", markup=False, highlight=False)


@cli.command("check")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@_model_options
@click.option("--expect", "expects", multiple=True, required=True, metavar='"GLOB: O(...)"',
              help='Expected growth, e.g. "main->solve*: O(p log p)"; repeatable.')
@_limit_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def check_cmd(inputs, fmt, points, params, metrics, callpaths, max_terms, negative, locations, expects, limit,
              as_json):
    """Exit 1 when a callpath's model grows faster than expected (performance regression test).

    \b
    Exit codes:
      0  every matched series was judged and grows no faster than expected
      1  a model (or a modelled regime of a segmented one) grows faster than expected
      3  nothing grows faster, but a matched series could not be judged (too few points for a
         model, or a model that does not follow its data: a poor fit, or one that stays below the
         measured growth as the report's "What grows?" says, or a faster growth than expected
         that its competing hypotheses hold less than half of the weight of: the data cannot
         tell it from the expected one): measure more; not a pass
      2  bad input

    \b
    Example:
      perfcast check exp.perfcast --metric time --expect "*: O(p log p)" --expect "main->io: O(1)"
    """
    from .analysis.expectations import check, growth_ends, parse_expectation
    from .report.terminal import err, out, table, write_json

    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    parsed = [parse_expectation(e, exp.parameters) for e in expects]
    # growth orders and formulas only: fitted without the check giving the intervals' drift
    res = _fit_models(exp, metrics, callpaths, max_terms, negative, locations, as_json, intervals=False)
    over = {**_rank_gaps(exp, as_json), **_ranks_said(exp, as_json, _modelled(exp, metrics), _given(locations, "locations")),
            **_oversubscribed(res, as_json)}
    # the ranking's measured growth of each series (`perfcast model`'s default target): a model that
    # does not follow it is not judged by its lead order
    series, _, ranked = res.rank_order(None, "cost")
    # the fit's series, read from their arrays (iterating the model set would build every model)
    result = check(series, parsed, growth_ends(ranked, res.upper), res.formula_digits)
    if result.checked == 0 and not result.unchecked:
        raise PerfcastError("no modelled callpath matches the expectations' globs")
    bad, checked, unchecked = result.violations, result.checked, [u.to_dict() for u in result.unchecked]
    if as_json:
        write_json("check", [v.to_dict() for v in bad], checked=checked, ok=result.status == "pass",
                   status=result.status, exit_code=result.exit_code, unchecked=unchecked, **over)
    elif bad:
        out.print(table(f"{len(bad)} of {checked} check(s) failed: growing faster than expected",
                        ["callpath", "metric", "expected", "found", "model"],
                        [[v.callpath, _metric_label(v.metric, res.aggregates, res.units), v.expected,
                          v.found + (f" (where {v.regime})" if v.regime else ""),
                          v.formula] for v in _shown(bad, limit)]))
        _print_not_shown(err, len(bad), len(_shown(bad, limit)), "failed checks", "--json lists")
    elif unchecked:
        out.print(f"INCOMPLETE: {checked} check(s) passed, but {len(unchecked)} series could not be checked "
                  f"(below; exit {result.exit_code})")
    else:
        out.print(f"all {checked} check(s) passed")
    if not as_json and unchecked:
        def status(u):
            done = u["regimes_checked"]
            return "unchecked" if not done else f"checked only where {' and '.join(done)} (the last regime is not)"

        shown = _shown(unchecked, limit)
        out.print(table(f"{len(unchecked)} series not (or not fully) checked: not a pass",
                        ["callpath", "metric", "status", "why"],
                        [[u["callpath"], _metric_label(u["metric"], res.aggregates, res.units), status(u), u["reason"]]
                         for u in shown]))
        _print_not_shown(err, len(unchecked), len(shown), "unchecked series", "--json lists")
    if result.exit_code:
        sys.exit(result.exit_code)  # click (standalone_mode=False) would swallow click.exceptions.Exit's code


# -- reports people look at (issue #8) -----------------------------------------------------------
@cli.command("report")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="HTML file to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--metric", default=None, help="Metric to model and plot (default: the first time metric).")
@click.option("--target", default=None, metavar="P=V[,Q=W]",
              help="Scale to extrapolate to and rank at (default: 4x the largest process count).")
@click.option("--x", "x", default=None, metavar="PARAM", help="Parameter on the plots' x axis (default: process count).")
@click.option("--kernels", type=click.IntRange(1, 10_000), default=30, show_default=True,
              help="Rows of the ranked table; the rest is collapsed into 'other kernels'.")
@click.option("--plots", type=click.IntRange(0, 200), default=12, show_default=True, help="Kernels to plot.")
@click.option("--min-share", type=Finite(0, 100, max_open=True), default=1.0, show_default=True, metavar="PCT",
              help="Show kernels holding at least PCT percent of the total, now or at the target.")
@click.option("--scaling", type=click.Choice(["auto", "weak", "strong", "none"]), default="auto", show_default=True,
              help="Scaling mode of the experiment, for the scaling-loss tree and APMT's non-scalable kernels "
                   "(auto: guessed for both by one rule, from the application's total work against the process count: "
                   "the instructions when measured, else the metric; none: no scaling-loss tree, kernels auto).")
@click.option("--level", type=Finite(0, 1, min_open=True, max_open=True), default=0.9, show_default=True,
              help="Probability of the prediction intervals.")
@click.option("--terms", "max_terms", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Terms per parameter in single-parameter models.")
@click.option("--negative", is_flag=True, help="Allow negative exponents (strong scaling).")
@click.option("--ranks", "locations", type=click.Choice(["auto", "sum", "mean", "max", "min", "median"]),
              default="auto", show_default=True, help="Reduce per-rank values: auto sums counts/bytes and averages times.")
@click.option("--derive", "derives", multiple=True, metavar='"NAME = FORMULA"',
              help="Add a derived metric before reporting (as in `perfcast metrics`); repeatable.")
@click.option("--base", default=None, metavar="SYSTEM",
              help="System the experiment was measured on: adds projections to each --machine.")
@click.option("--machine", "machines", multiple=True, metavar="SYSTEM",
              help="Target machine to project onto (with --base); repeatable.")
@click.option("--method", type=click.Choice(["auto", "factor", "surrogate", "mean"]), default="auto",
              show_default=True, help="Compute projection method, as in `perfcast project --method` (mean: "
                                      "the experiment needs no counters).")
@click.option("--title", default=None, help="Title of the report.")
@click.option("--validate", "validate", multiple=True, type=click.Path(path_type=Path), metavar="EXP",
              help="Validation runs the models are not fitted on (e.g. one larger run): the ranked kernels' "
                   "predictions are compared with them in a table and on the plots; repeatable.")
@click.option("--apmt", "apmt_mode", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="APMT computation/memory/communication breakdown: auto = when the experiment has instruction "
                   "counts with a CPI source (and/or a PMPI profile); on = fail if it cannot be computed.")
@click.option("--timer", "timers", multiple=True, metavar="KERNEL=CALLPATH",
              help="APMT: an application timer measuring a kernel (effective CPI source), e.g. "
                   "compute_sweep=app->compute; repeatable.")
@_run_times_option
@click.option("--apmt-machine", type=click.Path(path_type=Path), default=None,
              help="APMT: machine description YAML (default: this host; see `perfcast machine`).")
@click.option("--comm-max-procs", type=Finite(1), default=None, metavar="N",
              help="APMT: fit communication times on runs with at most N processes (e.g. the cores: "
                   "oversubscribed runs measure descheduling); counts and sizes use every run.")
@_averaged_option
@click.option("--by", "by", type=click.Choice(["cost", "growth"]), default="cost", show_default=True,
              help="Ranking of the kernels, as in `perfcast model --by`: per-process cost increase up to the "
                   "target, or asymptotic growth first.")
@click.option("--json", "as_json", is_flag=True, help="Print what the report shows as JSON.")
def report_cmd(inputs, fmt, points, params, output, force, metric, target, x, kernels, plots, min_share, scaling,
               level, max_terms, negative, locations, derives, base, machines, method, title, validate, apmt_mode,
               timers, run_times, apmt_machine, comm_max_procs, averaged, by, as_json):
    """Write one self-contained HTML report (works offline): summary, ranked kernels, model plots
    with extrapolation and prediction bands, cost breakdown, scaling-loss tree, metrics.

    \b
    Examples:
      perfcast report lulesh_weak_scaling_cali/ -o lulesh.html --target jobsize=1000
      perfcast report jacobi.perfcast -o jacobi.html --derive "share = 100 * time / @time"
      perfcast report jacobi-apmt.perfcast -o jacobi-apmt.html --timer compute_sweep=app->compute --target p=16,n=256
    """
    from .report.html import ReportOptions, projection_table, write_report
    from .report.terminal import out, write_json

    if (base is None) != (not machines):
        raise PerfcastError("give --base and --machine together")
    # options of a part the report leaves out were accepted and ignored
    ctx = click.get_current_context()

    def given(name):
        return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)

    if base is None and given("method"):
        raise PerfcastError("--method: only with --base and --machine (the projection)")
    if apmt_mode == "off":
        unused = [o for o, n in (("--timer", "timers"), ("--apmt-machine", "apmt_machine"),
                                 ("--comm-max-procs", "comm_max_procs"), ("--run-times", "run_times")) if given(n)]
        if unused:
            raise PerfcastError(f"{', '.join(unused)}: not with --apmt off (the APMT breakdown is left out)")
    check_file_output(output, force)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    if derives:
        from .analysis.derived import derive

        exp, _ = derive(exp, derives)
    projections = None
    if base is not None:
        from .projection.project import load_db, load_signatures, project

        # project at the report's --target when it can be projected (measured, or modelled from an MPI
        # profile), else at the largest measured point; the table's note says which
        db, sigs = load_db(()), load_signatures(None)
        last = ({k: float(v) for k, v in exp.points().iloc[-1].items()} if exp.parameters else None)
        tpoint = parse_coords(target, "--target") if target else None
        try:
            proj = project(exp, db, sigs, base, list(machines), tpoint or last, method=method)
            at = tpoint or last
        except PerfcastError:
            if tpoint is None or tpoint == last:
                raise
            proj, at = project(exp, db, sigs, base, list(machines), last, method=method), last
        projections = projection_table(proj)
        if at:
            projections["note"] = (f"At {', '.join(f'{k}={v:g}' for k, v in at.items())}"
                                   + (" (largest measured point; the target cannot be projected without an MPI "
                                      "profile)" if tpoint and at != tpoint else "") + ". " + projections["note"])
    apmt, apmt_note = None, None
    if apmt_mode != "off":
        from .apmt.cli import load_machine, parse_timers
        from .apmt.report import fit_for_report

        try:
            apmt, apmt_note = fit_for_report(exp, load_machine(apmt_machine), parse_timers(timers),
                                             comm_max_procs=comm_max_procs,
                                             scaling=scaling if scaling in ("strong", "weak") else "auto",
                                             max_terms=max_terms, negative=negative)
        except PerfcastError as e:
            if apmt_mode == "on":
                raise
            apmt_note = e.format()
        if apmt is None and apmt_mode == "on":
            raise PerfcastError(f"--apmt on: {apmt_note or 'no instruction counts and no MPI profile'}")
        if run_times and not hasattr(apmt, "predict"):
            raise PerfcastError("--run-times: no APMT breakdown to put the run time next to ("
                                + (apmt_note or "no instruction counts with a CPI source") + ")")
    opts = ReportOptions(metric=metric, target=parse_coords(target, "--target") if target else None, x=x,
                         kernels=kernels, plots=plots, min_share=min_share / 100.0, scaling=scaling, level=level,
                         title=title, locations=locations, max_terms=max_terms, negative=negative,
                         averaged=averaged, by=by)
    vexp = load_experiment(validate, None, (), params, quiet=as_json, fitted=exp) if validate else None
    if vexp is not None and derives:
        vexp, _ = derive(vexp, derives)
    times, label = _load_run_times(run_times, params, as_json)
    rep = write_report(exp, output, opts, force, projections=projections, apmt=apmt, apmt_note=apmt_note,
                       validation=vexp, run_times=times, run_times_label=label)
    gaps = {**_rank_gaps(exp, as_json), **_ranks_said(exp, as_json, [rep.metric], _given(locations, "locations"))}
    if as_json:
        write_json("report", {"output": str(output), "bytes": output.stat().st_size, **rep.to_dict()}, **gaps)
    else:
        below = (rep.other or {}).get("insignificant") or 0
        # the rows --kernels cut off are said too: "1 kernel(s) ranked (9 more below --min-share 1%)"
        # read as if 10 were all there is of 14
        cut = ((rep.other or {}).get("count") or 0) - below
        more = [f"{cut} more beyond --kernels {opts.kernels}"] * bool(cut) + \
            [f"{below} more below --min-share {100 * opts.min_share:g}%"] * bool(below)
        out.print(f"wrote {output} ({output.stat().st_size / 1024:.0f} KiB): {len(rep.kernels)} kernel(s) ranked"
                  + (f" ({', '.join(more)})" if more else "")
                  + f", {len(rep.plots)} plot(s), sections: {', '.join(rep.sections())}", markup=False, highlight=False)


# -- collection: profiling campaigns (issue #4) ---------------------------------------------------
@cli.command("collect", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Experiment to write (NAME.perfcast); the journal goes to NAME.perfcast.campaign/.")
@click.option("-P", "--param", "grid", multiple=True, metavar="NAME=V1,V2,...",
              help="A parameter and its values; repeatable; {NAME} in the command is replaced.")
@click.option("--reps", default=None, metavar="MIN..MAX", help="Repetitions per configuration [3..10].")
@click.option("--cv", type=Finite(), default=None, help="Stop repeating when the runtime's CV is below this [0.05].")
@click.option("--cv-metric", default=None, help="Runtime for --cv: 'time' (wall) or an application timer's name.")
@click.option("--timeout", default=None, metavar="SECONDS|none",
              help="Seconds before a run is killed (its process group); 0 or 'none': no limit "
                   "[automatic: max(60 s, 10 x the configuration's median successful run, else 10 x the "
                   "longest successful run so far)].")
@click.option("--first-timeout", default=None, metavar="SECONDS|none",
              help="The automatic limit while no run has succeeded yet [3600]; 0 or 'none': no limit.")
@click.option("--output-cap", default=None, metavar="SIZE",
              help="stdout and stderr kept per run (each; the middle of a longer stream is dropped, with a "
                   "marker line), e.g. 10M, 500k; 0: keep all [10M].")
@click.option("--allow-missing", is_flag=True,
              help="Exit 0 even when configurations are short of repetitions (they are still listed).")
@click.option("--collect", "collect", default=None, metavar="LIST",
              help="Collectors: time,perf,counters,memory,cachegrind,mpi; NAME? = optional (warn if unavailable).")
@click.option("--timer-regex", default=None, help=r"Regex of app timers [perfcast-timer (\S+) ([0-9.eE+-]+)].")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default=None, help="Where runs execute [local].")
@click.option("--oversubscribe/--no-oversubscribe", default=None, help="Add --oversubscribe to Open MPI's mpirun [on].")
@click.option("--perf-freq", type=int, default=None, help="perf sampling frequency in Hz [999].")
@click.option("--perf-event", default=None, help="perf sampling event [cycles where supported, else cpu-clock].")
@click.option("--call-graph", default=None, help="perf call graphs: fp or dwarf[,SIZE] [fp].")
@click.option("--counters", "counter_events", default=None, metavar="EV1,EV2", help="perf stat events [probed hardware events].")
@click.option("--memory-events", "memory_events", default=None, metavar="EV1,EV2",
              help="Events the memory collector counts with perf stat -a once per node "
                   "[uncore_imc/cas_count_read/,uncore_imc/cas_count_write/].")
@click.option("--I1", "cg_i1", default=None, metavar="SIZE,ASSOC,LINE", help="cachegrind I1 geometry.")
@click.option("--D1", "cg_d1", default=None, metavar="SIZE,ASSOC,LINE", help="cachegrind D1 geometry.")
@click.option("--LL", "cg_ll", default=None, metavar="SIZE,ASSOC,LINE", help="cachegrind LL geometry.")
@click.option("--cachegrind-toggle", "cg_toggle", multiple=True, metavar="PATTERN",
              help="Count only inside functions matching PATTERN (and their callees), e.g. 'solve_*', so "
                   "start-up code is left out; repeatable (valgrind's --toggle-collect, run via callgrind).")
@click.option("--max-failures", type=int, default=None, help="Failed runs before a configuration is given up [2].")
@click.option("--seed", type=int, default=None, help="Seed of the run order shuffle [0].")
@click.option("--slurm-opt", "slurm_opts", multiple=True, help="Extra sbatch option (e.g. --partition=x); repeatable.")
@click.option("--adaptive", is_flag=True,
              help="Run only what the prediction at --target needs: a start design, then the grid points the "
                   "advisor ranks best, one run at a time, until --until or --budget (perfcast.collect.adaptive).")
@click.option("--target", default=None, metavar="P=V[,Q=W]",
              help="With --adaptive: the point to predict, beyond the grid (parameters left out: their largest "
                   "grid value).")
@click.option("--budget", type=Finite(), default=None, metavar="CORE_HOURS",
              help="With --adaptive: core-hours for the whole campaign (a run costs its wall time x processes); "
                   "a run that reaches it is stopped.")
@click.option("--until", default=None, metavar="WIDTH",
              help="With --adaptive: stop when the 90% interval of the predicted total at --target is this "
                   "wide relative to its value at three consecutive fits, one run apart [10%].")
@click.option("--force", is_flag=True,
              help="Replace an existing OUTPUT that is not this campaign's (no NAME.perfcast.campaign/ journal "
                   "beside it); this campaign's own is resumed without it.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def collect_cmd(args, output, grid, reps, cv, cv_metric, timeout, first_timeout, output_cap, allow_missing, collect,
                timer_regex, launcher, oversubscribe, perf_freq, perf_event, call_graph, counter_events, memory_events,
                cg_i1, cg_d1, cg_ll, cg_toggle, max_failures, seed, slurm_opts, adaptive, target, budget, until,
                force, as_json):
    """Run an application over a parameter grid and store the profiles as one experiment.

    Give the command after `--` (with {NAME} placeholders, and optionally {wrap} where per-rank
    profilers go), or a YAML campaign file with the same settings (command:, parameters:, reps:,
    cv:, timeout:, first_timeout:, output_cap:, collect:, output:, perf:, counters:, memory:,
    cachegrind:, slurm:); options given on the command line override the file.  Configurations are
    interleaved, repeated until their runtime's coefficient of variation is below --cv, failed and
    timed-out runs are recorded and skipped.
    Interrupt it at any time: rerunning the same command resumes where it stopped.

    \b
    Time limit per run (--timeout / timeout:): without one it is automatic,
    max(60 s, 10 x the median successful run of the same configuration,
    else 10 x the longest successful run so far); before any run has
    succeeded, --first-timeout (1 hour).  0 or 'none' = no limit.
    Timed-out runs are recorded with status "timeout".
    Output: each run's stdout/stderr is streamed to its run directory, at
    most --output-cap (10M) each; timer lines are read from all of it.

    \b
    Exit status: 0 done; 3 incomplete (some configuration has fewer
    successful runs than --reps MIN; they are listed, with their last
    failure, and the experiment of the runs that succeeded is still
    written; --allow-missing turns this into 0); 2 bad input or no run
    succeeded; 130 on Ctrl-C (SIGINT), 143 on SIGTERM, 129 on SIGHUP
    (the running application's process group is killed, the journal keeps
    every finished run; rerun to resume).

    \b
    Adaptive (--adaptive --target P=V --budget CORE_HOURS [--until 10%]):
    the grid is what the campaign may run.  It runs a start design (the
    smallest value of every parameter and the next two of each parameter
    with three or more values), fits, and then makes one run at a time, the
    first step of `perfcast advise --budget`'s plan within the budget left,
    until the 90% interval of the predicted whole-run time at the target is
    within --until of its value, the budget is spent, or no affordable run
    removes 5% of the uncertainty left.
    The journal records why each point was chosen and why it stopped;
    rerunning resumes (a larger --budget continues a stopped campaign).
    It exits 0 whatever the stop (until, budget, exhausted, failed,
    no-advice: printed, and in --json); 2 on bad input, or when the budget
    is below one run's cost (a fresh campaign learns that cost from one
    run of its cheapest point, kept in the journal).

    \b
    Examples:
      perfcast collect -o jacobi.perfcast -P p=1,2,4 -P n=64,128 --reps 3..10 -- mpirun -np {p} ./jacobi {n}
      perfcast collect --collect time,perf,cachegrind? -o app.perfcast -P n=1,2 -- ./app {n}
      perfcast collect campaign.yaml
      perfcast collect --adaptive --target n=1024 --budget 0.5 -o j.perfcast -P p=2 -P n=32,64,128,256 \\
          -- mpirun -np {p} ./jacobi -w {n}
    """
    from .collect import campaign as cp
    from .report.terminal import err, out, progress, write_json

    args = list(args)
    if len(args) == 1 and args[0].lower().endswith((".yaml", ".yml")) and not Path(args[0]).is_file():
        what = "is not a regular file" if Path(args[0]).exists() else "no such file"
        raise PerfcastError(f"campaign file: {what}", args[0])
    if len(args) == 1 and args[0].lower().endswith((".yaml", ".yml")) and Path(args[0]).is_file():
        spec, yaml_out = cp.load_spec(args[0])
        d = spec
    elif args:
        if not grid:
            raise PerfcastError("give the parameters with -P NAME=V1,V2 (or use a YAML campaign file)")
        params = cp.parse_params(grid)
        d = cp.CampaignSpec(command=args, parameters=params)
        yaml_out = None
    else:
        raise PerfcastError("nothing to run: give a command after -- or a campaign.yaml")
    if grid and len(args) == 1 and args[0].lower().endswith((".yaml", ".yml")):
        d.parameters = cp.parse_params(grid)
    if reps is not None:
        d.reps_min, d.reps_max = cp.parse_reps(reps)
    if timeout is not None:
        d.timeout = cp.parse_timeout(timeout, "--timeout")
    if first_timeout is not None:
        d.first_timeout = cp.parse_timeout(first_timeout, "--first-timeout")
        if d.first_timeout is None:
            d.first_timeout = cp.FIRST_TIMEOUT
    if output_cap is not None:
        d.output_cap = cp.parse_size(output_cap, "--output-cap")
    for name, value in (("cv", cv), ("cv_metric", cv_metric), ("launcher", launcher),
                        ("oversubscribe", oversubscribe), ("max_failures", max_failures), ("seed", seed)):
        if value is not None:
            setattr(d, name, value)
    if collect is not None:
        d.collect = cp.coll.parse_names(collect)
    settings = dict(d.settings)
    if timer_regex is not None:
        settings["timer_regex"] = timer_regex
    perf = dict(settings.get("perf") or {})
    for k, v in (("frequency", perf_freq), ("event", perf_event), ("callgraph", call_graph)):
        if v is not None:
            perf[k] = v
    if perf:
        settings["perf"] = perf
    if counter_events is not None:
        settings["counters"] = {"events": [e.strip() for e in counter_events.split(",") if e.strip()]}
    if memory_events is not None:
        settings["memory"] = {"events": cp.coll.parse_events(memory_events, where="--memory-events")}
    cg = dict(settings.get("cachegrind") or {})
    for k, v in (("I1", cg_i1), ("D1", cg_d1), ("LL", cg_ll), ("toggle", list(cg_toggle) or None)):
        if v is not None:
            cg[k] = v
    if cg:
        settings["cachegrind"] = cg
    d.settings = settings
    if slurm_opts:
        d.slurm = {**d.slurm, "options": [*d.slurm.get("options", []), *slurm_opts]}
    d.validate()
    output = output or (Path(yaml_out) if yaml_out else None)
    if output is None:
        raise PerfcastError("no output: give -o NAME.perfcast (or output: in the campaign file)")
    from .output import refuse_stdout

    refuse_stdout(output)
    if not adaptive and (target is not None or budget is not None or until is not None):
        raise PerfcastError("--target, --budget and --until belong to --adaptive", where="--adaptive")

    def log(msg: str):
        err.print(f"perfcast: warning: {msg}", markup=False, highlight=False)

    if adaptive:
        return _collect_adaptive(d, output, target, budget, until, log, as_json, force)
    try:
        with cp.terminate_on_signals(), progress("collecting", enabled=None if not as_json else False) as cb:
            exp = cp.run_campaign(d, output, progress=cb, log=log, force=force)
    except cp.Terminated as e:
        click.echo(f"perfcast: terminated by {e}; rerun the same command to resume", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:   # Ctrl-C: stopped as cleanly (launchers.execute killed the run's process group)
        click.echo("perfcast: interrupted (SIGINT); rerun the same command to resume", err=True)
        sys.exit(130)
    s = exp.summary(callpaths=False)
    failed = exp.meta["campaign"]["failed"]
    runs = exp.meta["campaign"]["runs"]
    missing = exp.meta["campaign"].get("incomplete") or []
    if as_json:
        write_json("campaign", {"output": str(output), "campaign": str(cp.campaign_dir(output)), "parameters": s["parameters"],
                    "points": s["points"], "runs": len(runs), "failed": failed,
                    "metrics": [m["name"] for m in s["metrics"]], "warnings": exp.meta["campaign"]["warnings"],
                    "complete": not missing, "incomplete": missing})
    else:
        out.print(f"wrote {output}: {s['n_points']} point(s) over {', '.join(s['parameters'])}, {len(runs)} run(s)"
                  f" ({len(failed)} failed), {len(s['metrics'])} metric(s); journal in {cp.campaign_dir(output)}",
                  markup=False, highlight=False)
        if missing:
            out.print(f"incomplete: {len(missing)} configuration(s) short of successful runs"
                      + ("" if allow_missing else " (exit 3; --allow-missing accepts this)") + ":",
                      markup=False, highlight=False)
            for m in missing:
                where = ", ".join(f"{k}={cp.fmt_value(v)}" for k, v in m["config"].items())
                last = f"; last: {m['last_status']}: {m['last_reason']}" if m["last_status"] else ""
                mode = "" if m["mode"] == "main" else f" ({m['mode']} runs)"
                out.print(f"  {where}{mode}: "
                          f"{m['succeeded']} of {m['wanted']} succeeded, {m['failed']} failed{last}",
                          markup=False, highlight=False)
    if missing and not allow_missing:
        sys.exit(3)  # click (standalone_mode=False) would swallow click.exceptions.Exit's code


def _collect_adaptive(spec, output, target, budget, until, log, as_json, force=False):
    """``collect --adaptive``: parse, run perfcast.collect.adaptive, render."""
    from .collect import adaptive as ad
    from .collect import campaign as cp
    from .report.terminal import err, out, progress, write_json

    if target is None or budget is None:
        raise PerfcastError("--adaptive needs --target P=V and --budget CORE_HOURS", where="--adaptive")
    tgt = parse_coords(target, "--target")
    width = ad.UNTIL if until is None else ad.parse_until(until)

    def say(text: str):
        err.print(f"perfcast: {text}", markup=False, highlight=False)

    try:
        with cp.terminate_on_signals(), progress("collecting", enabled=None if not as_json else False) as cb:
            res = ad.run_adaptive(spec, output, tgt, budget, width, progress=cb, log=log, say=say, force=force)
    except cp.Terminated as e:
        click.echo(f"perfcast: terminated by {e}; rerun the same command to resume", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:   # Ctrl-C: stopped as cleanly (launchers.execute killed the run's process group)
        click.echo("perfcast: interrupted (SIGINT); rerun the same command to resume", err=True)
        sys.exit(130)
    if as_json:
        return write_json("campaign", [{k: r.get(k) for k in ("step", "at", "kind", "at_least", "reason",
                                                              "cost_estimate", "value", "lower", "upper", "width",
                                                              "spent")} for r in res.steps],
                          **res.summary())
    at = ",".join(f"{k}={v:g}" for k, v in res.target.items())
    total = (f"total at {at}: {res.value:.4g} [{res.lower:.4g}, {res.upper:.4g}] "
             f"({'-' if res.width is None else f'{res.width:.1%}'} wide, --until {res.until:.1%})"
             if res.value is not None else f"no prediction at {at}")
    out.print(f"wrote {output}: {res.runs} run(s) at {len(res.experiment.points())} point(s) ({len(res.design)} of the "
              f"start design, {len(res.steps)} chosen step(s)), {res.spent:.3g} of {res.budget:g} core-hours; {total}; "
              f"stopped: {res.stop}; journal in {res.campaign}", markup=False, highlight=False)


# -- projection onto machines the user does not have (issue #7) ------------------------------------
@cli.command("systems")
@click.argument("query", required=False, default="")
@click.option("--db", "dbs", multiple=True, type=click.Path(path_type=Path),
              help="Benchmark results (spec17-ml table or tidy system,benchmark,time CSV); repeatable; a "
                   "spec17-ml table of other benchmarks of the same kind (rate/speed) joins the same machines. "
                   "Default: SPEC CPU2017 FP rate + integer rate.")
@_rows_option(25, "Rows to list (--json too)")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def systems_cmd(query, dbs, limit, as_json):
    """Search the benchmark database: words must all match; KEY=V, KEY>V, KEY<V filter attributes.
    No system matching is an error (exit 2, --json too)."""
    from .projection.lookup import load_systems, partial_model_words  # pandas-free when the cache is warm
    from .report.terminal import out, table, write_json

    db = load_systems(dbs)
    hits = db.find(query)
    if not len(hits):   # a lookup that finds nothing is an error, with --json too (the same exit code)
        raise db.no_match_error(query)
    cols = [c for c in ("system", "name") if c in db.columns]
    # one match through a model number inside a longer one is not a --base/--target (BenchmarkDB.resolve)
    partial = partial_model_words(query, {c: v[hits[0]] for c, v in db.columns.items()}) if len(hits) == 1 else []
    if as_json:
        write_json("systems", [dict(zip(cols, r)) for r in db.rows(_shown(hits, limit), cols)], query=query,
                   matches=len(hits), unique=len(hits) == 1 and not partial)
        return
    rows = db.rows(_shown(hits, limit), cols)
    title = f"{len(hits)} system(s) match {query!r}" if query else f"{len(hits)} systems in {db.source}"
    if len(hits) > 1 and query:
        title += " (ambiguous as a --base/--target: add words, filters or use an id)"
    if partial:
        title += (" (not a --base/--target as typed: " + ", ".join(f"{w!r} inside {t!r}" for w, t in partial)
                  + "; give the whole model name or the id)")
    out.print(table(title, cols, rows))


@cli.group("data")
def data_group():
    """The published benchmark tables `systems` and `project` read by default: where they are found,
    and `data wheel` to pack them as the separate perfcast-data distribution for a pip install."""


@data_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def data_status_cmd(as_json):
    """Where the shared data is found ($PERFCAST_SHARED_DATA, shared/data beside the checkout, or the
    installed perfcast-data package) and which default tables are there; exit 1 when one is missing."""
    from .datapkg import status
    from .report.terminal import out, table, write_json

    st = status()
    missing = [t["table"] for t in st["tables"] if not t["found"]]
    if as_json:
        write_json("data", st["tables"], root=st["root"], source=st["source"], root_exists=st["exists"],
                   complete=not missing)
    else:
        where = st["source"] + ("" if st["exists"] else "; no such directory")
        out.print(table(f"shared data: {st['root']} ({where})", ["table", "path"],
                        [[t["table"], t["path"] or "MISSING"] for t in st["tables"]]))
        if missing:
            out.print("missing tables: `systems` and `project` need --db/--signatures, "
                      "or build and install the data wheel: perfcast data wheel -o dist/",
                      markup=False, highlight=False)
    if missing:
        sys.exit(1)


@data_group.command("wheel")
@click.argument("source", required=False, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Directory to write the wheel into.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def data_wheel_cmd(source, out_dir, as_json):
    """Pack the default tables (from SOURCE, a directory laid out like shared/data; default: the shared
    data found as by `data status`) into a perfcast-data wheel: `pip install` it next to perfcast."""
    from .datapkg import build_wheel
    from .report.terminal import out, write_json

    if source is not None and not source.is_dir():
        raise PerfcastError("not a directory", source)
    from .output import refuse_stdout

    refuse_stdout(out_dir)
    res = build_wheel(out_dir, source)
    if as_json:
        write_json("written", [{"output": res["wheel"], "what": "perfcast-data wheel",
                                "count": len(res["files"]), "bytes": res["bytes"], "version": res["version"],
                                "files": res["files"]}])
        return
    src = sum(f["source_bytes"] for f in res["files"])
    out.print(f"wrote {res['wheel']}: {len(res['files'])} files, {src / 1e6:.1f} MB of tables in "
              f"{res['bytes'] / 1e6:.1f} MB; install it with: pip install {res['wheel']}",
              markup=False, highlight=False)


@cli.command("project")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--base", required=True, metavar="SYSTEM", help="System the experiment was measured on (query or id).")
@click.option("--target", "targets", multiple=True, required=True, metavar="SYSTEM",
              help="System to project onto (query or id); repeatable.")
@click.option("--all-matches", is_flag=True, help="Project onto every system matching each --target query.")
@click.option("--at", "at", metavar="P=V[,Q=W]", default=None, help="Point of the experiment to project.")
@click.option("--groups", default=None, metavar="G1,G2", help="Metric groups to match (default: all the "
              "application's signature has; cpi, mix, cache, llc, bandwidth, prefetch).")
@click.option("--db", "dbs", multiple=True, type=click.Path(path_type=Path),
              help="Benchmark results; repeatable (as for `perfcast systems`). Default: SPEC CPU2017 FP rate + "
                   "integer rate, joined by machine.")
@click.option("--signatures", type=click.Path(path_type=Path), default=None,
              help="Benchmark signatures: a Navarro-style directory or a name,metric,value CSV.")
@click.option("--micro", type=click.Path(path_type=Path), default=None,
              help="MPI micro-benchmark table (system,routine,nprocs,bytes,time_us, or archer/stackhpc CSV).")
@click.option("--micro-base", default=None, help="Micro-benchmark system of the base (default: --base query).")
@click.option("--micro-target", "micro_targets", multiple=True, help="Micro-benchmark system per target.")
@click.option("--compute-factor", type=Finite(), default=None, metavar="F",
              help="Scale compute time by F instead of a surrogate (e.g. 1 when only the network changes); "
                   "--base/--target then name systems of the --micro table.")
@click.option("--method", type=click.Choice(["auto", "factor", "surrogate", "mean"]), default="auto",
              show_default=True,
              help="Compute projection: factor = supervised factor model of the benchmark database (needs "
                   "one of the memory groups llc/bandwidth/prefetch; closed loop with all of them on the default "
                   "FP + integer rate database: 11.2 % mean error, bench/PROJECTION.md; "
                   "90 % intervals printed); surrogate = Sharkawi's surrogate; mean = geometric mean of the "
                   "benchmarks' ratios (needs no counters: an experiment with times only uses every benchmark "
                   "both systems published); auto = the one with the smallest error in a closed loop on the "
                   "published data run with the application's counter groups (printed); without counters, mean.")
@click.option("--metric", default=None, help="Time metric to project (default: the first time metric as `view` "
              "shows it, e.g. CUBE time, HPCToolkit CPUTIME (E), Caliper avg#...time.duration; printed with the "
              "others).")
@click.option("--ranks", type=click.Choice(["mean", "max", "sum", "min"]), default=None,
              help="Combine per-rank/thread values: mean (default: one rank's time, which the per-copy factor "
                   "scales), max (slowest rank), sum (CPU time of the job), min.")
@_rows_option(30, "Targets listed")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def project_cmd(inputs, fmt, points, params, base, targets, all_matches, at, groups, dbs, signatures, micro,
                micro_base, micro_targets, compute_factor, method, metric, ranks, limit, as_json):
    """Project EXP's runtime from --base onto --target machines (seed 002): compute by the factor model,
    Sharkawi's surrogate or the mean of the benchmarks, whichever a closed loop on the published data
    finds best for the application's counters; communication from micro-benchmark tables.

    With an MPI profile at several process counts, --at p=N may name a count that was not measured:
    message sizes, call counts and times per MPI routine and the compute time then come from fitted
    models in p (Eq 14-16), which are printed."""
    from .projection.comm import load_micro
    from .projection.project import load_db, load_signatures, project
    from .report.terminal import err, out, table, write_json

    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    point = parse_coords(at, "--at") if at else None
    cf = compute_factor is not None
    res = project(exp, None if cf else load_db(dbs), None if cf else load_signatures(signatures), base, targets,
                  point, [g.strip() for g in groups.split(",") if g.strip()] if groups else None,
                  load_micro(micro) if micro else None, micro_base, micro_targets, all_matches,
                  compute_factor=compute_factor, method=method, metric=metric, ranks=ranks)
    gaps = _rank_gaps(exp, as_json, None if res.base_time is None else [res.base_time.metric],
                      None if res.base_time is None else _given(ranks, "ranks"))
    if as_json:
        write_json("projection", res.to_dict(), **gaps)
        return
    s = res.surrogate
    out.print(f"base {res.base}" + ("" if res.base_name == res.base else f" = {res.base_name}")
              + (f" at p={res.nprocs:g}" if res.nprocs is not None else "")
              + f": compute {res.compute_base:.4g} s"
              + (f", communication {res.comm_base:.4g} s" if res.comm_base is not None else ""),
              markup=False, highlight=False)
    if res.base_time is not None:
        out.print(f"time: {res.base_time.describe()}", markup=False, highlight=False)
    if res.models:
        out.print("MPI profile models in p (Eq 14-16; per rank):", markup=False, highlight=False)
        for m in res.models:
            out.print(f"  {m['routine']:18s} {m['quantity']:8s} = {m['model']}   (fitted on p="
                      f"{','.join(f'{x:g}' for x in m['fitted_on'])})", markup=False, highlight=False)
    if not cf:
        out.print(f"compute factor from: {res.compute_source}", markup=False, highlight=False)
    if s is not None:
        role = "" if res.compute_source == "surrogate" else ", for comparison"
        rating = (f"not rated ({s.free} free fraction(s) for {s.constraints} metric constraint(s): exact by "
                  f"construction, see the notes)" if s.quality == "unrated" else
                  f"{s.quality}; group errors " + ", ".join(f"{g} {s.group_error[g]:.0%}" for g in s.groups))
        out.print(f"surrogate (target {res.surrogate_target}{role}; per target in --json): {s.describe()}  match "
                  + rating, markup=False, highlight=False)
    shown = _shown(res.targets, limit)
    level = next((t.to_dict()["interval_level"] for t in shown if t.factor_interval), None)
    rows = [[t.system, t.name, f"{t.compute_factor:.3f}"]
            + ([f"{t.factor_interval[0]:.3f}-{t.factor_interval[1]:.3f}" if t.factor_interval else "-"] if level else [])
            + [f"{t.compute:.4g}", "-" if t.comm is None else f"{t.comm:.4g}", f"{t.total:.4g}"] for t in shown]
    head = ["system", "name", "factor"] + ([f"{level:.0%} range"] if level else []) + ["compute", "comm", "total"]
    if res.factor_definition:
        out.print(res.factor_definition["text"], markup=False, highlight=False)
    out.print(table("Projected runtime (s), fastest first" + (
        "; factor = per-copy runtime ratio target/base" if (res.factor_definition or {}).get("per") == "copy" else ""),
        head, rows, {h: "right" for h in head[2:]}))
    for n in res.notes:
        out.print(f"note: {n}", markup=False, highlight=False)
    _print_not_shown(err, len(res.targets), len(shown), "target(s)", "--json lists")
    detail = next((t.comm_detail for t in res.targets if t.comm_detail and "interpolation" in t.comm_detail), None)
    if detail:
        for n in dict.fromkeys(x for t in res.targets if t.comm_detail for x in t.comm_detail.get("notes", [])):
            out.print(f"note: {n}", markup=False, highlight=False)
        out.print(f"micro-benchmark interpolation: {detail['interpolation']}", markup=False, highlight=False)


@cli.command("kernels")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--threshold", type=Finite(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Share of the cost metric that makes a function a kernel.")
@click.option("--metric", help="Cost metric (default: cycles, else sampled time, else instructions).")
@click.option("--procs", help="Process-count parameter (default: p, procs, np, ranks, ...).")
@click.option("--scaling", type=click.Choice(["auto", "strong", "weak"]), default="auto", show_default=True,
              help="How the work per rank changes with p, for the non-scalable rule: strong (total work fixed: cost per rank expected ~ 1/p), weak (work per rank fixed: expected constant), auto (inferred from the total instructions summed over ranks).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def kernels_cmd(inputs, fmt, points, params, threshold, metric, procs, scaling, as_json):
    """APMT key kernels: hot (share >= threshold), non-scalable (cost per rank growing faster with p
    than the scaling mode expects: constant under weak, ~1/p under strong scaling)
    and the aggregated rest, each with the reason it was chosen and the covered share."""
    from .apmt.cli import kernels_cmd as body

    body(load_experiment(inputs, fmt, points, params, quiet=as_json), threshold, metric, procs, as_json, scaling,
         gaps=_rank_gaps)


@cli.command("machine")
@click.option("--from", "source", type=click.Path(path_type=Path), help="Read this machine YAML instead of probing.")
@click.option("--write", type=click.Path(path_type=Path), help="Write the description as YAML (to edit).")
@click.option("--force", is_flag=True, help="Replace the --write file if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def machine_cmd(source, write, force, as_json):
    """Show (or --write) the machine description used by APMT: frequency, cache latencies in
    cycles, cores, peaks; every value says whether it was probed, derived or assumed."""
    from .apmt.cli import machine_cmd as body

    body(source, write, as_json, force)


@cli.command("compare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--validate", "validation", required=True, type=click.Path(path_type=Path),
              help="Experiment with the validation runs (not used for fitting).")
@click.option("--measure", default="app->total", show_default=True,
              help="Callpath of the measured total (metric time, max over ranks).")
@click.option("--timer", "timers", multiple=True, metavar="KERNEL=CALLPATH",
              help="An application timer measuring a kernel (effective CPI source).")
@click.option("--machine", type=click.Path(path_type=Path), help="Machine description YAML (default: this host).")
@click.option("--size", help="Problem size as a product of parameter powers for the Nan baseline (e.g. n^2).")
@click.option("--target", type=Finite(0, min_open=True), default=0.15, show_default=True,
              help="Accuracy target (relative error) of the refinement loop.")
@click.option("--threshold", type=Finite(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Kernel share threshold.")
@click.option("--comm-max-procs", type=Finite(1), default=None, metavar="N",
              help="APMT: fit communication times on runs with at most N processes (e.g. the cores: "
                   "oversubscribed runs measure descheduling); counts and sizes use every run.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def compare_cmd(inputs, fmt, points, params, validation, measure, timers, machine, size, target, threshold,
                comm_max_procs, as_json):
    """APMT vs the Worley (a/p + b p^c + d) and Nan (a size/p + b) baselines on validation runs,
    with error attribution and the runs that would improve the model."""
    from .apmt.cli import compare_cmd as body

    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    val = load_experiment([validation], quiet=as_json)
    body(exp, val, measure, machine, timers, size, threshold, None, "pmnf", target, as_json, comm_max_procs)


@cli.command("export")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="File to write (.txt: extrap-text, .json: extrap-json, unless --to says).")
@click.option("--to", "to", type=click.Choice(["extrap-text", "extrap-json"]), default=None,
              help="Output format: Extra-P text or JSON input (default: from the output's suffix).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@input_options
@cube_scaling_option
@timeseries_option
@_ranks_option
@click.option("--metric", "metrics", multiple=True, help="Metric(s) to write (default: all).")
@click.option("--callpath", "callpaths", multiple=True, metavar="GLOB",
              help="Callpath glob(s) to write (default: all); the tree keeps their ancestors.")
@click.option("--drop-incomplete", is_flag=True,
              help="Leave out the callpath x metric series without values at every point (Extra-P refuses "
                   "them); --json lists them. Default: refuse, naming the first.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export_cmd(inputs, output, to, force, fmt, points, params, locations, metrics, callpaths, drop_incomplete,
               as_json):
    """Write an experiment as Extra-P input, for the Extra-P GUI or `extrap --text/--json`.

    Every value is written exactly, repetitions in order; per-rank values are reduced per point,
    repetition and callpath (--ranks); callpaths nest with '->'. Extra-P's formats carry no units.

    \b
    Examples:
      perfcast export app.perfcast -o app.txt              # then: extrap --text app.txt
      perfcast export lulesh_cali/ --to extrap-json -o lulesh.json
      perfcast export lulesh_cali/ --metric 'avg#inclusive#sum#time.duration' --callpath 'main->*' -o l.txt
    """
    from .io.extrap import export, export_format
    from .report.terminal import err, out, write_json

    check_file_output(output, force)
    to = export_format(output, to)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    if metrics or callpaths:
        exp = exp.select(callpath=list(callpaths) or None, metric=list(metrics) or None)
    info = export(exp, output, to, force=force, locations=locations, drop_incomplete=drop_incomplete)
    said = _ranks_said(exp, as_json, None, _given(locations, "locations"))
    if as_json:
        write_json("export", info, **said)
        return
    out.print(f"wrote {output} ({to}): {info['n_points']} point(s) over {', '.join(info['parameters'])}, "
              f"{info['n_callpaths']} callpath(s), {len(info['metrics'])} metric(s), {info['n_series']} series, "
              f"{info['n_values']} value(s)", markup=False, highlight=False)
    for note in info["notes"]:
        err.print(f"perfcast: note: {note}", markup=False, highlight=False)


def _tune_malloc():
    """Set :data:`CLI_MALLOC` when the C library is glibc and the user set no malloc option.

    glibc's defaults trim the heap's free top above 128 KB and raise the mmap threshold only as
    large blocks are freed: the fit's chunk temporaries (1-30 MB arrays, allocated and freed
    thousands of times) went back to the kernel and came again as fresh, zeroed pages -- a sixth
    of a `model` run's CPU in the kernel (bench/README.md, branch rd17c).  For the CLI process only:
    a program importing perfcast keeps its own allocator settings."""
    if any(k.startswith("MALLOC_") for k in os.environ) or "GLIBC_TUNABLES" in os.environ:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only (musl and others have no such symbol): probe, never assume
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    for option, value in CLI_MALLOC.values():
        mallopt(ctypes.c_int(option), ctypes.c_int(value))


def _json_arrow_pool():
    """The model records' Arrow buffers (:meth:`perfcast.modelset.ModelSet.json_chunks`) from the
    C library's allocator (the one :func:`_tune_malloc` sets up), unless the user chose a pool:
    pyarrow's mimalloc pool keeps the pages of the chunks' freed buffers, which raised the peak of
    `model --json` on 30k series by ~40 MB; with the system allocator it is below what it was
    before the records were built in Arrow, at the same speed.  Set after reading: the reader's
    many small string buffers are ~35 ms faster from mimalloc (bench/README.md, branch spd17g).
    pyarrow is loaded by then (pandas loads it)."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ and "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def main(argv=None) -> int:
    """Console entry point: runs the CLI, turning input errors into one line and exit code 2."""
    frozen = gc.get_freeze_count()
    try:
        return _main(argv)
    finally:
        if not frozen:   # what the command froze (:func:`_fit_models`; tests run main many times),
            gc.unfreeze()   # never what a program calling main had frozen itself


def run() -> None:
    """The ``perfcast`` script and ``python -m perfcast``: :func:`main`, then the process ends
    without tearing the interpreter down object by object (:func:`_end`)."""
    _end(main())


def _end(code: int) -> None:
    """End the process with exit ``code`` as the interpreter would -- the exit handlers run
    (atexit: temporary files, pools, logging), standard output and error flushed -- but without
    freeing every module and object of the command one at a time (30k series: ~0.02 s after the
    output was written); the memory goes back with the process.  Where another thread is still
    running, or flushing fails (a closed pipe), the interpreter's own exit."""
    import atexit
    import threading

    if threading.active_count() == 1 and hasattr(atexit, "_run_exitfuncs"):
        atexit._run_exitfuncs()
        try:
            for f in (sys.stdout, sys.stderr):
                if f is not None:
                    f.flush()
        except Exception:
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _main(argv) -> int:
    _tune_malloc()
    # one short-lived process building up to millions of small objects that form no cycles
    # (models, rows, dicts): at the default thresholds the cyclic collector's full passes over the
    # growing heap took a quarter of `model --json` on 30k series (bench/cli_scale.py); cycles
    # are still collected, only less often
    gc.set_threshold(*CLI_GC_THRESHOLDS)
    if not _EXIT:
        import atexit

        atexit.register(_skip_exit_collection)
        _EXIT.append(True)
    try:
        # without standalone mode click returns ctx.exit()'s code instead of raising it
        with warnings.catch_warnings():
            if not os.environ.get("PERFCAST_DEBUG"):
                # numpy's RuntimeWarnings (overflow, invalid value) print a source line of perfcast
                # on stderr: a value they leave NaN or infinite is refused or said by name where it
                # matters (a point beyond a model's domain or the range of floats)
                warnings.simplefilter("ignore", RuntimeWarning)
            rc = cli.main(args=argv, prog_name="perfcast", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except PerfcastError as e:
        click.echo(f"perfcast: error: {safe_text(e.format())}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("perfcast: aborted", err=True)
        return 130
    except click.ClickException as e:
        if isinstance(e, getattr(click.exceptions, "NoArgsIsHelpError", ())):
            e.show()  # `perfcast` alone: the help
            return 2
        # one line like every other input error (click's own show() prints usage lines too)
        ctx = getattr(e, "ctx", None)
        hint = f" (try '{ctx.command_path} --help')" if ctx is not None else ""
        click.echo(f"perfcast: error: {safe_text(' '.join(e.format_message().split()))}{hint}", err=True)
        return 2
    except KeyboardInterrupt:
        click.echo("perfcast: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # output piped into `head` and the like
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as e:
        # disk full, read-only file system, permission denied, ...: the user's environment, not a bug
        click.echo(f"perfcast: error: {safe_text(os_error_message(e))}", err=True)
        return 2
    except MemoryError:
        click.echo("perfcast: error: out of memory", err=True)
        return 2
    except Exception as e:  # a bug in perfcast: one line, traceback only on request
        if os.environ.get("PERFCAST_DEBUG"):
            raise
        click.echo(f"perfcast: internal error: {type(e).__name__}: {safe_text(e)} (set PERFCAST_DEBUG=1 for a "
                   f"traceback; please report it)", err=True)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

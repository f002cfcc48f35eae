"""Terminal output: rich tables and trees on a TTY, plain text otherwise, progress on stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterator

from ..text import SEP, safe_text

if TYPE_CHECKING:  # annotations only: `perfcast systems` prints tables without loading pandas/scipy
    from rich.table import Table
    from rich.tree import Tree

    from ..experiment import Experiment


def esc(value) -> str:
    """Data (a name from a profile, a path) for rich markup: control characters, escape sequences and
    bidi overrides shown escaped (:func:`perfcast.text.safe_text`), ``[...]`` shown literally."""
    from rich.markup import escape

    return escape(safe_text(value))


def _console(**kw):
    """A rich Console that never writes a control character it did not generate itself: the text of
    every rendered segment goes through :func:`safe_text` (newlines and tabs kept) just before
    output, rich's own styles and cursor controls are untouched.  Data should still be passed
    through :func:`esc` (or printed with ``markup=False``) so tables are laid out with the escaped
    width."""
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def _render_buffer(self, buffer):
            return super()._render_buffer(
                seg if seg.control or not seg.text else Segment(safe_text(seg.text, multiline=True), seg.style)
                for seg in buffer)

    return _SafeConsole(**kw)


class _LazyConsole:
    """A console made, and rich imported (~15 ms), where a command first prints through it: a
    ``--json`` output or a file written never does."""

    def __init__(self, **kw):
        object.__setattr__(self, "_kw", kw)
        object.__setattr__(self, "_made", None)

    def console(self):
        """The rich Console itself (for rich's own objects that take one)."""
        if self._made is None:
            kw = dict(self._kw)
            if kw.pop("piped_width", False):
                # Piped output (files, CI logs, `| less`) is not squeezed into 80 columns: tables of
                # callpaths and formulas stay readable; COLUMNS still wins when set
                kw["width"] = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
            object.__setattr__(self, "_made", _console(**kw))
        return self._made

    def __getattr__(self, name):
        return getattr(self.console(), name)

    def __setattr__(self, name, value):
        setattr(self.console(), name, value)


# No emoji codes: ":thumbs_up:" in a callpath stays text.
out = _LazyConsole(highlight=False, soft_wrap=True, piped_width=True, emoji=False)
err = _LazyConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)


@contextlib.contextmanager
def progress(label: str, enabled: bool | None = None) -> Iterator[Callable[[int, int, str], None]]:
    """Yield a callback ``(done, total, what)`` drawing a progress bar with ETA on stderr.

    Disabled when stderr is not a terminal (CI logs stay clean) unless ``enabled`` is True.
    """
    enabled = err.is_terminal if enabled is None else enabled
    if not enabled:
        yield lambda done, total, what="": None
        return
    # imported where a bar is drawn (~5 ms of every command's start otherwise)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[what]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                   console=err.console(), transient=True)
    task = bar.add_task(label, total=None, what="")
    with bar:
        def update(done: int, total: int, what: str = ""):
            bar.update(task, completed=done, total=total, what=esc(what)[-40:])
        yield update


def new_table(title: str | None = None, **kw) -> Table:
    """A rich Table: box drawing on a terminal, plain ASCII when output goes to a file or pipe."""
    from rich import box
    from rich.table import Table

    kw.setdefault("show_edge", False)
    if title is not None:
        kw.setdefault("title_justify", "left")
    if not out.is_terminal:
        kw.setdefault("box", box.ASCII)
    return Table(title=title, **kw)


def _num(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def show_experiment(exp: Experiment, max_callpaths: int = 200, depth: int | None = None) -> None:
    s = exp.summary(callpaths=False)     # the tree is drawn from exp.tree
    out.print(f"[bold]Parameters:[/bold] {esc(', '.join(s['parameters'])) or '(none: a single run)'}")
    out.print(f"[bold]Points:[/bold] {s['n_points']}   [bold]Callpaths:[/bold] {s['n_callpaths']}   "
              f"[bold]Values:[/bold] {s['n_values']}"
              + "".join(f"   [bold]{k}s:[/bold] {v}" for k, v in s["locations"].items()))
    pts = new_table("Points")
    for p in s["parameters"]:
        pts.add_column(esc(p), justify="right")
    pts.add_column("repetitions", justify="right")
    # ranks/threads holding values at each point (a parameter may be called "threads" too)
    locs = [k for k in ("rank", "thread") if s["points"] and k in s["points"][0].get("locations", {})]
    for k in locs:
        pts.add_column(f"{k}s" + (" (locations)" if f"{k}s" in s["parameters"] else ""), justify="right")
    for row in s["points"][:100]:
        pts.add_row(*[_num(row[p]) for p in s["parameters"]], str(row["repetitions"]),
                    *[str(row["locations"][k]) for k in locs])
    if len(s["points"]) > 100:
        pts.add_row(*(["…"] * (len(s["parameters"]) + 1 + len(locs))))
    out.print(pts)
    mt = new_table("Metrics")
    agg = any(m.get("aggregate") for m in s["metrics"])   # how a run's value combines the processes
    # repetitions per point of each metric, when they differ (Experiment._metric_repetitions)
    reps = any("repetitions" in m for m in s["metrics"])
    for c in ("name", "unit", "kind", "scope") + (("aggregate",) if agg else ()) + (("repetitions",) if reps else ()):
        mt.add_column(c)
    for m in s["metrics"]:
        r = m.get("repetitions")
        mt.add_row(esc(m["name"]), esc(m["unit"]), m["kind"], m["scope"], *((m.get("aggregate") or "-",) if agg else ()),
                   *((("-" if r is None else f"{r[0]}-{r[1]}" if isinstance(r, list) else str(r)),) if reps else ()))
    out.print(mt)
    out.print(callpath_tree(exp, max_callpaths, depth))


def callpath_tree(exp: Experiment, max_nodes: int = 200, depth: int | None = None) -> Tree:
    """The first ``max_nodes`` callpaths in preorder down to level ``depth``, and a line counting
    the others.  Every callpath not drawn is below a cut (the node limit or the depth) and is
    counted once, so the count is the tree size minus the callpaths drawn; the walk stops at the
    limit (it never visits the rest of an 800,000-callpath tree) and keeps its own stack (no
    recursion limit for deep trees)."""
    from rich.tree import Tree

    tree = exp.tree
    root = Tree("[bold]Callpaths[/bold]")
    shown = 0
    for r in tree.iter_roots() if depth is None or depth >= 0 else ():
        if shown >= max_nodes:
            break
        stack = [(root, r, 0)]
        while stack and shown < max_nodes:
            node_ui, path, d = stack.pop()
            shown += 1
            child = node_ui.add(esc(tree.name(path)))
            if depth is None or d + 1 <= depth:
                stack.extend((child, c, d + 1) for c in reversed(tree.children(path)))
    hidden = len(tree) - shown
    if hidden:
        root.add(f"[dim]… {hidden} more callpath(s) (use --max-callpaths / --depth)[/dim]")
    return root


#: the narrowest a callpath column is allowed to get before its paths are shortened (characters)
MIN_PATH_WIDTH = 24


def path_width(width: int | None = None) -> int:
    """The widest a callpath cell gets in a terminal table of ``width`` columns (the console's by
    default): a quarter of the line, at least :data:`MIN_PATH_WIDTH`."""
    return max(MIN_PATH_WIDTH, (out.width if width is None else width) // 4)


def short_path(path: str, width: int) -> str:
    """``path`` shortened on the left to about ``width`` characters, keeping whole frames from the
    leaf up: ``…->TimeIncrement->MPI_Allreduce``.  The leaf is the frame a reader looks for, so it
    is kept whole even when it alone is wider (the cell then wraps); ``--json`` has every path."""
    if len(path) <= width:
        return path
    frames = path.split(SEP)
    kept = frames[-1]
    for frame in reversed(frames[:-1]):
        if len(kept) + len(frame) + 2 * len(SEP) + 1 > width:
            break
        kept = frame + SEP + kept
    return "…" + SEP + kept


def table(title: str, columns: list[str], rows: list[list[str]], justify: dict[str, str] | None = None) -> Table:
    """A table of strings; a ``callpath`` column's paths shortened on the left (:func:`short_path`)
    and wrapped, never cut on the right."""
    t = new_table(None if title is None else esc(title))
    justify = justify or {}
    rows = [[esc(x) for x in r] for r in rows]
    width = path_width()
    for i, c in enumerate(columns):
        kw = {}
        if c == "callpath":
            for r in rows:
                r[i] = short_path(r[i], width)
            # as wide as its shortened paths (the other columns give way), folded if a leaf is wider
            kw = {"overflow": "fold", "min_width": min(width, max((len(r[i]) for r in rows), default=0))}
        t.add_column(esc(c), justify=justify.get(c, "left"), **kw)
    for r in rows:
        t.add_row(*r)
    return t


def write_json(kind: str, items, **extra) -> None:
    """A command's ``--json`` output on stdout: ``items`` (a list, or the one object the command
    produced) and summary fields ``extra`` in the envelope every command shares
    (:func:`perfcast.output.envelope`, :func:`perfcast.output.json_text`)."""
    from ..output import envelope, json_text

    sys.stdout.write(json_text(envelope(kind, items, **extra)))


def write_json_chunks(kind: str, list_chunks, **extra) -> None:
    """:func:`write_json` of a list given as JSON text a piece at a time (e.g.
    :meth:`perfcast.modelset.ModelSet.json_chunks`, which fails, if at all, before its first piece;
    its pieces strings or :class:`perfcast.output.ForkedText`)."""
    from ..output import enveloped_chunks

    write = sys.stdout.write
    for c in enveloped_chunks(kind, list_chunks, **extra):
        if isinstance(c, str):
            write(c)
        else:       # a share a forked process built (perfcast.output.ForkedText): written by it
            c.write(sys.stdout)


def trends(exp: Experiment, keys, locations: str = "auto", ascii: bool = False) -> dict[tuple[str, str], str]:
    """Text sparkline of the measured means of each (callpath, metric) in ``keys`` over the first
    varying parameter (other parameters at their largest values), for a "trend" table column."""
    import numpy as np

    from ..fit.series import statistics_columns
    from .sparkline import trend

    keys = {(str(c), str(m)) for c, m in keys}
    if not exp.parameters or not keys:
        return {}
    pts = exp.point_arrays()[0]
    # only the series asked for (a table shows tens of the thousands modelled); exact names, no
    # glob matching ("[" in a callpath)
    st = statistics_columns(exp.select(callpath=sorted({c for c, _ in keys}), metric=sorted({m for _, m in keys}),
                                       literal=True), locations)
    varying = [p for p in exp.parameters if len(np.unique(pts[p])) > 1] or list(exp.parameters)
    x = varying[0]
    keep = np.ones(len(st), dtype=bool)
    for p in exp.parameters:
        if p != x:
            keep &= np.asarray(st[p]) == float(pts[p].max())
    rows = np.flatnonzero(keep)
    cp, mt = st["callpath"], st["metric"]
    # each series' rows (callpath, metric) in the order of the parameter ``x``
    key = cp.codes[rows].astype(np.int64) * max(mt.n_names, 1) + mt.codes[rows]
    rows = rows[np.lexsort((np.asarray(st[x])[rows], key))]
    key = cp.codes[rows].astype(np.int64) * max(mt.n_names, 1) + mt.codes[rows]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(rows) else np.zeros(0, np.int64)
    mean = np.asarray(st["mean"], dtype=float)
    out = {}
    for a, b in zip(starts.tolist(), np.append(starts[1:], len(rows)).tolist()):
        k = (cp.strings(rows[a:a + 1])[0], mt.strings(rows[a:a + 1])[0])
        if k in keys:
            out[k] = trend(mean[rows[a:b]], log=True, ascii=ascii)
    return out

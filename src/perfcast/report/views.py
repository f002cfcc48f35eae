"""Terminal rendering of the analysis views (derived metrics, top-down/bottom-up/flat, hot path,
waste, scaling loss).  Input is the JSON-ready dicts of :mod:`perfcast.analysis`."""

from __future__ import annotations

from rich.table import Table
from rich.tree import Tree

from .sparkline import bar
from .terminal import esc as escape  # data: control characters escaped, [markup] literal
from .terminal import err, new_table, out


def _v(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    x = float(x)
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.{digits}g}"


def _ex(x) -> str:
    """An exclusive value, or n/a where it is not known (analysis.views.no_exclusive: timers that nest)."""
    return "n/a" if x is None else _v(x)


def _pct(x) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}%" if abs(x) >= 1 or x == 0 else f"{x:.2g}%"


def _point(d: dict) -> str:
    p = d.get("point") or {}
    return ", ".join(f"{k}={_v(v)}" for k, v in p.items()) or "the only run"


def metrics_table(rows: list[dict], title: str = "Metrics") -> Table:
    t = new_table(title)
    for c, j in (("$n", "right"), ("name", "left"), ("unit", "left"), ("kind", "left"), ("scope", "left"),
                 ("derived from", "left")):
        t.add_column(c, justify=j)
    for r in rows:
        t.add_row(f"${r['index']}", escape(r["name"]), escape(r["unit"]), r["kind"], r["scope"],
                  escape(r.get("formula") or ""))
    return t


def print_derived(reports: list[dict]) -> None:
    for r in reports:
        unseen = r.get("not_measured") or 0
        empty = (f", {r['empty']} empty cell(s) left out" if r["empty"] else "") + \
            (f" ({unseen} where an operand's collector never saw the callpath: not measured, not 0)" if unseen else "")
        out.print(f"derived {escape(r['name'])} ({r['scope']}) = {escape(r['formula'])}: {r['values']} value(s){empty}")


def _warnings(d: dict) -> None:
    from .terminal import err

    for w in d.get("warnings", ()):
        err.print(f"perfcast: warning: {w}", markup=False, highlight=False)
    if d.get("flat"):     # analysis.views.flat_profile: inclusive = exclusive, no callees below
        err.print(f"perfcast: note: {d['flat']}", markup=False, highlight=False)


def _heading(d: dict) -> str:
    # escaped brackets and all: "[s]" is rich markup (strike-through) and "[sec]" vanished
    unit = escape(f" [{d['unit']}]") if d.get("unit") else ""
    ranks = (f"ranks {d['ranks']}" + (f" over {escape(d['over'])}" if d.get("over") else "")
             if not d.get("combined") else escape(d["combined"]))
    if d.get("fewer_ranks"):    # analysis.views._fewer_locations: values over fewer ranks than the heading's
        ranks += " (" + ", ".join(escape(f"{f['path']} {f['scope']}") + f" over {f['locations']}"
                                  for f in d["fewer_ranks"][:4]) + (", ..." if len(d["fewer_ranks"]) > 4 else "") + ")"
    return f"[bold]{escape(d['metric'])}[/bold]{unit} at {escape(_point(d))}, {ranks}, total {_v(d['total'])}"


def print_top_down(d: dict) -> None:
    out.print(f"Top-down: {_heading(d)}")
    t = new_table()
    t.add_column("callpath")
    for c in ("inclusive", "%", "exclusive", "%"):
        t.add_column(c, justify="right")
    for n in d["nodes"]:
        t.add_row("  " * n["depth"] + escape(n["name"]), _v(n["inclusive"]), _pct(n["inclusive_pct"]),
                  _ex(n["exclusive"]), _pct(n["exclusive_pct"]))
    out.print(t)
    if d["hidden"]:
        out.print(f"[dim]{d['hidden']} callpath(s) below the threshold or depth hidden[/dim]")
    _warnings(d)


def print_flat(d: dict) -> None:
    out.print(f"Flat: {_heading(d)}")
    t = new_table()
    t.add_column("procedure")
    for c in ("inclusive", "%", "exclusive", "%", "contexts"):
        t.add_column(c, justify="right")
    for r in d["rows"]:
        t.add_row(escape(r["name"]), _v(r["inclusive"]), _pct(r["inclusive_pct"]), _ex(r["exclusive"]),
                  _pct(r["exclusive_pct"]), str(r["contexts"]))
    out.print(t)
    _warnings(d)


def print_bottom_up(d: dict, depth: int = 2) -> None:
    out.print(f"Bottom-up (callers): {_heading(d)}")
    root = Tree("[bold]procedure[/bold]  inclusive (%)  exclusive (%)")

    def label(r):
        sites = r.get("call_sites")   # a caller: the line(s) of it that call the procedure below
        at = (f" [dim]calls at {escape(', '.join(sites[:4]))}{', ...' if len(sites) > 4 else ''}[/dim]"
              if sites else "")
        return (f"{escape(r['name'])}{at}  {_v(r['inclusive'])} ({_pct(r['inclusive_pct'])})  "
                f"{_ex(r['exclusive'])} ({_pct(r['exclusive_pct'])})")

    def add(ui, r, lvl):
        node = ui.add(label(r))
        if lvl < depth:
            for c in r["callers"]:
                add(node, c, lvl + 1)
        elif r["callers"]:
            node.add(f"[dim]… {len(r['callers'])} caller(s)[/dim]")

    for r in d["rows"]:
        add(root, r, 0)
    out.print(root)
    if d.get("callers_note"):
        out.print(f"[dim]note: {escape(d['callers_note'])}[/dim]")
    _warnings(d)


def print_hot_path(d: dict) -> None:
    out.print(f"Hot path (child >= {d['fraction'] * 100:.0f}% of its parent): {_heading(d)}")
    t = new_table()
    t.add_column("callpath")
    for c in ("inclusive", "%", "exclusive", "%"):
        t.add_column(c, justify="right")
    for i, n in enumerate(d["nodes"]):
        t.add_row("  " * i + escape(n["name"]), _v(n["inclusive"]), _pct(n["inclusive_pct"]), _ex(n["exclusive"]),
                  _pct(n["exclusive_pct"]))
    out.print(t)
    _warnings(d)


def _waste_cell(r: dict, scope: str, resource: str, work: str) -> str:
    """A scope's waste, or why it has none (analysis.waste: no resource measured, above the peak, no
    work measured)."""
    status = r.get(f"status_{scope}", "ok")
    said = {"no resource": f"no {resource}", "no work": f"no {work}"}
    return _v(r[f"waste_{scope}"]) if status == "ok" else escape(said.get(status, status))


def print_waste(d: dict, limit: int = 30) -> None:
    out.print(f"[bold]{escape(d['label'])}[/bold]: {escape(d['work'])} against {escape(d['resource'])} x "
              f"peak {_v(d['peak'])} at {escape(_point(d))}; total waste {_v(d['total_waste'])}, "
              f"overall efficiency {_pct(d['efficiency'])}")
    out.print(f"[dim]shares: exclusive of {_v(d['waste_attributed'])} (the exclusive waste where defined), "
              f"inclusive of the total waste {_v(d['total_waste'])}[/dim]")
    t = new_table()
    t.add_column("scope", no_wrap=True, max_width=28)
    for c in ("waste exc", "share", "eff. exc", "waste inc", "share", "eff. inc"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("callpath", overflow="fold", min_width=20)
    for r in (d["rows"][:limit] if limit else d["rows"]):
        t.add_row(escape(r["name"]), _waste_cell(r, "exclusive", d["resource"], d["work"]), _pct(r["waste_exclusive_share"]),
                  _pct(r["efficiency_exclusive"]), _waste_cell(r, "inclusive", d["resource"], d["work"]), _pct(r["waste_inclusive_share"]),
                  _pct(r["efficiency_inclusive"]), escape(r["path"]))
    out.print(t)
    if limit and len(d["rows"]) > limit:
        out.print(f"[dim]… {len(d['rows']) - limit} more scope(s) (--limit)[/dim]")
    for n in d.get("notes", ()):
        err.print(f"perfcast: note: {n}", markup=False, highlight=False)
    _warnings(d)


def print_scaling_loss(d: dict, limit: int = 20) -> None:
    for pair in d["pairs"]:
        unit = f" {escape(d['unit'])}" if d.get("unit") else ""
        out.print(f"[bold]{d['mode']} scaling loss[/bold] of {escape(d['metric'])}"
                  + (escape(f" [{d['unit']}]") if d.get("unit") else "") + f", {escape(d['procs'])} "
                  f"{_v(pair['p'])} -> {_v(pair['q'])}: total {_v(pair['total_p'])} -> {_v(pair['total_q'])}{unit}, "
                  f"excess work {pair['loss'] * 100:.2f}% of the {_v(pair['q'])} run "
                  f"(ranked by {d['sort']} loss; per-process cost, ranks {d['ranks']})")
        t = new_table()
        t.add_column("scope", no_wrap=True, max_width=28)
        t.add_column("", no_wrap=True)  # bar: the sorted loss relative to the largest shown
        for c in ("excl. loss", "incl. loss", "where", f"incl. @{_v(pair['p'])}", f"incl. @{_v(pair['q'])}"):
            t.add_column(c, justify="right", no_wrap=True)
        t.add_column("callpath", overflow="fold", min_width=20)
        shown = pair["rows"][:limit] if limit else pair["rows"]
        key = "inclusive_loss" if d["sort"] == "inclusive" else "exclusive_loss"
        top = max((abs(r[key]) for r in shown if r[key] is not None), default=0.0) or 1.0
        for r in shown:
            # an exclusive loss not known (timers that nest: analysis.views.no_exclusive) is n/a
            t.add_row(escape(r["name"]), bar(max(r[key] or 0.0, 0.0) / top, 10, ascii=not out.is_terminal),
                      "n/a" if r["exclusive_loss"] is None else f"{r['exclusive_loss'] * 100:.2f}%",
                      f"{r['inclusive_loss'] * 100:.2f}%", r["where"] or "n/a", _v(r["inclusive_p"]),
                      _v(r["inclusive_q"]), escape(r["path"]))
        out.print(t)
        if limit and len(pair["rows"]) > limit:
            out.print(f"[dim]… {len(pair['rows']) - limit} more scope(s) (--limit)[/dim]")
        for n in pair.get("notes", ()):
            err.print(f"perfcast: note: {n}", markup=False, highlight=False)

"""The callpath tree of `perfcast show`: what it draws and how many callpaths it says it left out."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from rich.tree import Tree

from perfcast import CallTree, Experiment, Metric
from perfcast.report.terminal import callpath_tree, esc


def _reference_tree(tree: CallTree, max_nodes: int, depth: int | None) -> Tree:
    """The plain rule: preorder, a node is drawn while fewer than max_nodes are drawn and it is not
    below ``depth``; a node not drawn is counted with all its descendants (children not visited)."""
    root = Tree("[bold]Callpaths[/bold]")
    shown = hidden = 0

    def add(node_ui, path, d):
        nonlocal shown, hidden
        if shown >= max_nodes or (depth is not None and d > depth):
            hidden += 1 + len(tree.descendants(path))
            return
        shown += 1
        child = node_ui.add(esc(tree.name(path)))
        for c in tree.children(path):
            add(child, c, d + 1)

    for r in tree.roots():
        add(root, r, 0)
    if hidden:
        root.add(f"[dim]… {hidden} more callpath(s) (use --max-callpaths / --depth)[/dim]")
    return root


def _text(t: Tree) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(t)
    return buf.getvalue()


def _exp(tree: CallTree) -> Experiment:
    paths = tree.paths
    df = pd.DataFrame({"callpath": paths, "metric": "t", "value": 1.0})
    return Experiment([], df, [Metric("t", kind="time")], tree)


def _random_forest(rng, n) -> CallTree:
    t = CallTree()
    nodes = []
    for i in range(n):
        parent = None if not nodes or rng.random() < 0.15 else nodes[int(rng.integers(0, len(nodes)))]
        path = f"f{i}" if parent is None else f"{parent}->f{i}"
        t.add(path, parent, f"f{i}")
        nodes.append(path)
    return t


@pytest.mark.parametrize("seed", range(6))
def test_callpath_tree_draws_and_counts_as_the_plain_rule(seed):
    rng = np.random.default_rng(seed)
    tree = _random_forest(rng, int(rng.integers(1, 60)))
    e = _exp(tree)
    for max_nodes in (0, 1, 3, 10, 1000):
        for depth in (None, -1, 0, 1, 2, 5):
            assert _text(callpath_tree(e, max_nodes, depth)) == _text(_reference_tree(tree, max_nodes, depth))


def test_callpath_tree_by_hand_and_deep():
    e = _exp(CallTree.from_paths(["main->a->b", "main->c", "other"]))
    assert _text(callpath_tree(e, 2)).splitlines()[-1].endswith("… 3 more callpath(s) (use --max-callpaths / --depth)")
    assert "more callpath" not in _text(callpath_tree(e, 5))
    assert "… 1 more callpath(s)" in _text(callpath_tree(e, 5, depth=1))  # b, at level 2
    # a chain 3000 deep (deeper than Python's recursion limit), every node drawn
    frames = [f"g{i}" for i in range(3000)]
    chain = CallTree()
    chain.add_frames(frames)
    node, labels = callpath_tree(_exp(chain), 5000), []
    while node.children:
        assert len(node.children) == 1
        node = node.children[0]
        labels.append(node.label)
    assert labels == frames


# -- callpaths in tables: shortened on the left, the leaf kept (issue 19) --------------------------

def test_short_path_keeps_whole_frames_from_the_leaf():
    from perfcast.report.terminal import short_path

    p = "main->lulesh.cycle->TimeIncrement->MPI_Allreduce"          # 48 characters
    assert short_path(p, 48) == p                                    # fits: unchanged
    # width 40: "…->" (3) + frames from the leaf while they fit: MPI_Allreduce (13),
    # "TimeIncrement->" (+15 = 31 with the ellipsis), "lulesh.cycle->" would make 45 > 40
    assert short_path(p, 40) == "…->TimeIncrement->MPI_Allreduce"
    assert short_path(p, 31) == "…->TimeIncrement->MPI_Allreduce"
    assert short_path(p, 30) == "…->MPI_Allreduce"
    # a leaf wider than the width is kept whole (the table folds it), never cut
    assert short_path("a->" + "x" * 30, 10) == "…->" + "x" * 30


def test_cli_tables_keep_the_leaf_of_long_callpaths(tmp_path):
    """`perfcast model` / `predict` printed 200 columns wide: a 72-character callpath is shown as its
    last frames that fit in 50 = 200 // 4 characters, the leaf whole, and no cell is cut on the right."""
    import subprocess
    import sys

    frames = [f"stage{i}_timestep" for i in range(3)] + ["solve_pressure_kernel"]
    deep = "->".join(frames)
    lines = ["PARAMETER p", "POINTS 2 4 8 16 32", "", "REGION main", "METRIC time"]
    lines += [f"DATA {10 * p} {10 * p}" for p in (2, 4, 8, 16, 32)]
    lines += ["", f"REGION {deep}", "METRIC time"]
    lines += [f"DATA {p * p} {p * p}" for p in (2, 4, 8, 16, 32)]
    f = tmp_path / "deep.txt"
    f.write_text("\n".join(lines) + "\n")
    for cmd in (["model"], ["predict", "--at", "p=64"]):
        r = subprocess.run([sys.executable, "-m", "perfcast", *cmd, str(f)], capture_output=True, text=True,
                           env={**__import__("os").environ, "COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
        row = next(line for line in r.stdout.splitlines() if "solve_pressure_kernel" in line)
        # "…->" 3 + "stage2_timestep->" 17 + leaf 21 = 41; with "stage1_timestep->" 58 > 50
        assert " …->stage2_timestep->solve_pressure_kernel " in row
        assert deep not in r.stdout


def test_model_and_predict_tables_name_the_unit_of_their_numbers(tmp_path, capsys):
    """The model, predict and check tables printed values, intervals and formulas with no unit (Extra-P's
    mpi_data.csv: microseconds, shown as plain '106.459'); the unit is the file's own ('ms' in the
    unit column here), next to the metric in every row, as --json's ``unit`` and `view`'s header."""
    from conftest import cli

    f = tmp_path / "t.csv"
    f.write_text("p,rep,callpath,metric,value,unit\n" + "".join(
        f"{p},{r},solve,time,{2.0 * p + r},ms\n" for p in (2, 4, 8, 16, 32) for r in (0, 1)))
    for args in (["model", str(f)], ["predict", str(f), "--at", "p=64"], ["model", str(f), "--target", "p=64"],
                 ["check", str(f), "--expect", "solve: O(1)"]):
        code, out, err = cli(capsys, *args)
        assert code == (1 if args[0] == "check" else 0), err     # check: 2 p + 0.5 grows faster than O(1)
        row = next(line for line in out.splitlines() if line.lstrip().startswith(("solve", "1 ")) and "solve" in line)
        assert "time [ms]" in row, out


def test_scaling_loss_names_the_unit_of_its_totals(tmp_path, capsys):
    """`scaling-loss` printed 'total 10.5 -> 11.5' and the inclusive columns with no unit; the unit is
    the file's own ('ms'), as --json's ``unit``.  Totals by hand: main = 10 + p / 2 ms per rank."""
    from conftest import cli

    f = tmp_path / "t.csv"
    f.write_text("p,callpath,metric,value,unit,scope\n" + "".join(
        f"{p},main,time,{10 + p / 2},ms,inclusive\n{p},main->solve,time,{p / 2},ms,inclusive\n" for p in (2, 4)))
    code, out, err = cli(capsys, "scaling-loss", str(f), "--mode", "weak")
    assert code == 0, err
    assert "loss of time [ms], p 2 -> 4: total 11 -> 12 ms," in " ".join(out.split())

"""`model --json` built by several processes (perfcast.output.forked_texts):
the text is the one a single process writes, whoever builds which share, handed over through a
pipe or written by the forked process itself; a forked process that fails leaves its share to
this one.  The records are checked against the generating laws."""

import json
import os
import subprocess
import sys

import pytest

from conftest import PMNF_LAWS, cli, cli_items, pmnf_law, write_law_file
from perfcast import output

PS = [4, 8, 16, 32, 64]
# the five laws, each scaled by 1..12: 60 series with known values
LAWS = {f"{name}_{k}": (c * k, [(a * k, e, l) for a, e, l in terms])
        for name, (c, terms) in PMNF_LAWS.items() for k in range(1, 13)}


def numbers(lo, hi):
    """A text of parts ``lo`` to ``hi`` in pieces of 7 parts (the ``make`` of forked_texts)."""
    for a in range(lo, hi, 7):
        yield "".join(f"<{i}>" for i in range(a, min(hi, a + 7)))


def whole(parts):
    return "".join(f"<{i}>" for i in range(parts))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
@pytest.mark.parametrize("workers", [2, 3])
def test_forked_texts_are_the_whole_text(monkeypatch, workers):
    monkeypatch.setattr(output, "FORK_MIN_PARTS", 8)
    pieces = list(output.forked_texts(numbers, 1000, workers))
    assert all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == whole(1000)
    # the first share is this process' own, piece by piece (7 parts each)
    assert pieces[0] == "".join(f"<{i}>" for i in range(7))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_forked_shares_written_to_the_file_in_order(monkeypatch, tmp_path):
    monkeypatch.setattr(output, "FORK_MIN_PARTS", 8)
    path = tmp_path / "out.txt"
    with open(path, "w") as f:
        f.write("head|")
        for p in output.forked_texts(numbers, 999, 3, direct=True):
            if isinstance(p, str):
                f.write(p)
            else:
                p.write(f)      # the forked process writes after what this one wrote
        f.write("|tail")
    assert path.read_text() == "head|" + whole(999) + "|tail"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
@pytest.mark.parametrize("direct", [False, True])
def test_failed_forked_process_leaves_its_share_here(monkeypatch, tmp_path, direct):
    monkeypatch.setattr(output, "FORK_MIN_PARTS", 8)
    me = os.getpid()

    def failing(lo, hi):
        if os.getpid() != me:
            raise MemoryError("forked process out of memory")
        yield from numbers(lo, hi)

    path = tmp_path / "out.txt"
    with open(path, "w") as f:
        for p in output.forked_texts(failing, 500, 2, direct=direct):
            f.write(p) if isinstance(p, str) else p.write(f)
    assert path.read_text() == whole(500)


def test_one_worker_or_few_parts_fork_nothing(monkeypatch):
    def here_only(lo, hi):
        assert os.getpid() == me
        yield from numbers(lo, hi)

    me = os.getpid()
    assert "".join(output.forked_texts(here_only, 1000, 1)) == whole(1000)
    # below FORK_MIN_PARTS: one process whatever the workers
    assert "".join(output.forked_texts(here_only, output.FORK_MIN_PARTS - 1, 4)) == whole(output.FORK_MIN_PARTS - 1)


def check_laws(recs):
    """model --json records against the generating laws: constant and coefficients."""
    assert sorted(r["callpath"] for r in recs) == sorted(LAWS)
    for r in recs:
        c, terms = LAWS[r["callpath"]]
        assert r["constant"] == pytest.approx(c, rel=1e-6, abs=1e-6)
        assert sorted(t["coefficient"] for t in r["terms"]) == pytest.approx(sorted(a for a, _, _ in terms), rel=1e-6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_model_json_split_across_processes(monkeypatch, capsys, tmp_path):
    law_file = write_law_file(tmp_path / "laws.txt", LAWS, PS)
    args = ["model", law_file, "--json", "--target", "p=512"]
    code, one, err = cli(capsys, *args, "--workers", "1")
    assert code == 0, err
    recs = cli_items(one, "models")
    check_laws(recs)
    for r in recs:
        assert r["value"] == pytest.approx(pmnf_law(LAWS[r["callpath"]], 512), rel=1e-6)
    # split in 3 (every share over the threshold): in process (shares through a pipe: the test's
    # stdout has no file) and in a subprocess whose stdout is a file (shares written by their
    # processes), the same text
    monkeypatch.setattr(output, "FORK_MIN_PARTS", 4)
    code, three, err = cli(capsys, *args, "--workers", "3")
    assert (code, three) == (0, one), err
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    path = tmp_path / "out.json"
    with open(path, "w") as f:
        run = subprocess.run([sys.executable, "-c", "import sys, perfcast.output as o; o.FORK_MIN_PARTS = 4; "
                              "from perfcast.cli import main; sys.exit(main(sys.argv[1:]))", *map(str, args),
                              "--workers", "3"], stdout=f, stderr=subprocess.PIPE, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert path.read_text() == one
    json.loads(one)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("child_delay", [0.0, 0.15, 30.0])
def test_a_share_not_ready_is_built_here_piece_by_piece(monkeypatch, tmp_path, direct, child_delay):
    # the forked process late (no free core): this process builds its pieces until it is ready,
    # then the forked process hands over the rest; never ready: all built here, the process ended
    import time

    monkeypatch.setattr(output, "FORK_MIN_PARTS", 8)
    me = os.getpid()

    def make(lo, hi):
        if os.getpid() != me:
            time.sleep(child_delay)
        for a in range(lo, hi, 7):
            if os.getpid() == me:
                time.sleep(0.01)
            yield "".join(f"<{i}>" for i in range(a, min(hi, a + 7)))

    path = tmp_path / "out.txt"
    start = time.monotonic()
    with open(path, "w") as f:
        for p in output.forked_texts(make, 300, 2, direct=direct, step=7):
            f.write(p) if isinstance(p, str) else p.write(f)
    assert path.read_text() == whole(300)
    assert time.monotonic() - start < 10      # the 30 s process was not waited for

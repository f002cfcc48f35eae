"""What a command imports: the table of an Extra-P text file (`perfcast model`) and `perfcast check`
on one parameter need neither scipy.sparse nor scipy.special (~0.15 s of a command's start,
perfcast.lazy and the intervals' imports where they are made); `model --json` computes the drift,
so it imports scipy.special; a CUBE-style sparse use still works through the lazy name."""

import subprocess
import sys

import numpy as np

from conftest import power_law_file

X = np.array([4.0, 8, 16, 32, 64])


def _loaded(path, *argv):
    code = ("import sys, contextlib, io\n"
            "from perfcast.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            f"        main({[*argv[:1], str(path), *argv[1:]]!r})\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in ('scipy.sparse', 'scipy.special') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def test_table_and_check_import_no_scipy(tmp_path):
    path = power_law_file(tmp_path, X, S=20, seed=4)
    assert _loaded(path, "model") == "[]"
    assert _loaded(path, "check", "--expect", "*: O(p^2)") == "[]"
    assert _loaded(path, "model", "--json") == "['scipy.special']"


def test_lazy_module_imports_on_use():
    from perfcast.experiment import sp

    m = sp.csr_matrix(([1.0, 2.0], ([0, 1], [1, 0])), shape=(2, 2))
    assert m.toarray().tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert "scipy.sparse" in sys.modules


def test_exit_skips_the_collection_once_registered():
    """main() registers, once however often it runs, the freeze of the objects left at exit (the
    interpreter's shutdown collections then skip them): run, the atexit handlers leave every
    object frozen."""
    code = ("import atexit, gc\n"
            "from perfcast.cli import main\n"
            "n0 = atexit._ncallbacks()\n"
            "main(['--version']); n1 = atexit._ncallbacks(); main(['--version']); n2 = atexit._ncallbacks()\n"
            "before = gc.get_freeze_count()\n"
            "atexit._run_exitfuncs()\n"
            "print(n1 - n0, n2 - n1, before, gc.get_freeze_count() > 1000)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "1 0 0 True"

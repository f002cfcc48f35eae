"""What a command imports: the table of an Extra-P text file (`perfcast model`), `perfcast check`,
`model --json` and `predict` need neither scipy.sparse nor scipy.special (~0.15-0.19 s of a
command's start): perfcast.lazy imports scipy.sparse where a sparse matrix is made, and the tests
and quantiles of the fit and its intervals come from perfcast.fit.special (scipy decides only a
test whose p-value is within 1e-6 of its level); a CUBE-style sparse use still works through the
lazy name.  Reading an Extra-P text file imports the reader modules up to the Extra-P one only."""

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
    assert _loaded(path, "model", "--json") == "[]"
    assert _loaded(path, "predict", "--at", "p=512", "--json") == "[]"


def test_extrap_text_imports_the_reader_modules_before_its_own_only(tmp_path):
    path = power_law_file(tmp_path, X, S=20, seed=4)
    code = ("import sys\n"
            "from perfcast import io\n"
            f"exp = io.load([{str(path)!r}])\n"
            "print(exp.meta['format'], sorted(m.split('.')[-1] for m in sys.modules if m.startswith('perfcast.io.')"
            " and m.split('.')[-1] in io._MODULES))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "extrap-text ['extrap', 'summary', 'tidy']"


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


def test_lazy_detection_chooses_what_all_readers_choose(tmp_path):
    """io.detect imports the reader modules only until one recognises the file: in a fresh process
    (nothing imported) it picks the reader it picks with every module imported first."""
    from pathlib import Path

    here = Path(__file__).parent / "data"
    paths = [power_law_file(tmp_path, X, S=3, seed=1)]
    paths += sorted(p for p in (here / "likwid").glob("*.txt"))
    csv = tmp_path / "tidy.csv"
    csv.write_text("p,callpath,metric,value\n4,main,time,1.0\n8,main,time,2.0\n16,main,time,4.0\n")
    odd = tmp_path / "exp.dat"          # no extension of any reader: by content
    odd.write_text(Path(paths[0]).read_text())
    paths += [csv, odd]
    code = ("import sys\nfrom pathlib import Path\nfrom perfcast import io\n"
            "if sys.argv[2] == 'all':\n    io._load_modules()\n"
            "print(io.detect(Path(sys.argv[1])).name)\n")
    for p in paths:
        names = [subprocess.run([sys.executable, "-c", code, str(p), how], capture_output=True, text=True,
                                check=True).stdout.strip() for how in ("lazy", "all")]
        assert names[0] == names[1] and names[0], (p, names)


def test_a_command_leaves_nothing_frozen(tmp_path):
    """The fitted model set is frozen for the collector while a command builds its output
    (cli._fit_models); main() unfreezes it when the command ends, so a program (or a test run)
    calling main again collects as before."""
    import gc

    from perfcast.cli import main

    path = power_law_file(tmp_path, X, S=20, seed=4)
    before = gc.get_freeze_count()
    assert main(["model", str(path), "--json"]) == 0
    assert gc.get_freeze_count() == before == 0


def test_main_keeps_what_its_caller_froze(tmp_path):
    """A program that froze objects of its own before calling main finds them frozen after it."""
    path = power_law_file(tmp_path, X, S=20, seed=4)
    code = ("import gc\nfrom perfcast.cli import main\n"
            "keep = [[i] for i in range(1000)]\ngc.freeze()\nn = gc.get_freeze_count()\n"
            f"rc = main(['model', {str(path)!r}, '--json'])\n"
            "print(rc, n > 0, gc.get_freeze_count() >= n)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 True True"

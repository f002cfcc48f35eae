"""The ``perfcast`` script and ``python -m perfcast`` end the process without the interpreter's
teardown (perfcast.cli.run): what the command wrote is all there, the exit handlers ran, the exit
code is the command's."""

import json
import os
import subprocess
import sys

import pytest

from conftest import PMNF_LAWS, pmnf_law, write_law_file

SCRIPT = ("import atexit, sys; from perfcast import cli; "
          "atexit.register(lambda: print('handler ran', file=sys.stderr)); "
          "sys.argv[0] = 'perfcast'; sys.stdout.write(''); cli.run()")


def perfcast(*args, **kw):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", SCRIPT, *map(str, args)], capture_output=True, text=True,
                          env=env, **kw)


def test_run_writes_everything_and_runs_the_exit_handlers(tmp_path):
    law_file = write_law_file(tmp_path / "laws.txt", PMNF_LAWS, [4, 8, 16, 32, 64])
    r = perfcast("predict", law_file, "--at", "p=256", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "handler ran\n"
    items = json.loads(r.stdout)["items"]
    assert {i["callpath"]: i["value"] for i in items} == {
        name: pytest.approx(pmnf_law(law, 256), rel=1e-6) for name, law in PMNF_LAWS.items()}


def test_run_keeps_the_commands_exit_code(tmp_path):
    r = perfcast("model", tmp_path / "missing.txt", "--json")
    assert r.returncode == 2
    assert r.stderr.startswith("perfcast: error: ") and r.stderr.endswith("handler ran\n")
    assert r.stdout == ""

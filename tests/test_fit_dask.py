"""FitOptions.dask / --dask ADDRESS: the chunks of a group fitted on a Dask cluster (here a
LocalCluster of two worker processes on loopback) give exactly the results of one process; a
missing extra, an unreachable or malformed address, a worker that dies and workers running other
code are one-line errors."""
import functools
import json
import os
import socket

import numpy as np
import pytest

from conftest import cli, one_error, power_law_file, power_law_group
from perfcast.errors import PerfcastError
from perfcast.fit import FitOptions, cluster, fit_group

try:
    import distributed
except ImportError:   # the test extra installs it (make test): missing is a broken setup, not a skip
    pytest.fail("dask[distributed] is not installed: pip install -e '.[test]' (make test does)", pytrace=False)

X = np.array([4.0, 8, 16, 32, 64])
FIELDS = ("hyp", "coef", "cov", "noise", "dof", "drift", "weight", "quality", "status", "drift_dof")


class _Computed(distributed.diagnostics.plugin.SchedulerPlugin):
    """Counts the chunks the scheduler saw computed (tasks of ``_fit_chunk`` reaching memory)."""

    def __init__(self):
        self.chunks = 0

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and str(key).startswith("_fit_chunk-"):
            self.chunks += 1


@pytest.fixture(scope="module")
def local_cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as lc:
        lc.computed = _Computed()
        lc.scheduler.add_plugin(lc.computed, name="perfcast-test-computed")
        yield lc


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 0.5)


def _fitted_chunks(lc) -> int:
    """Chunks the cluster's scheduler has computed so far (counted by the scheduler itself)."""
    return lc.computed.chunks


def _group(S, seed):
    return power_law_group(X, S, seed)


def _experiment_file(tmp_path, S=60, seed=9):
    return power_law_file(tmp_path, X, S, seed)


def _run(capsys, *args):
    """(exit code, stdout, stderr) of the command line in-process; `check` exits 1 on violations."""
    try:
        return cli(capsys, *args)
    except SystemExit as e:
        out, err = capsys.readouterr()
        return e.code, out, err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_chunks_equal_one_process(local_cluster):
    mean, count, ssd, reps = _group(300, 5)
    one = fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(chunk=64), reps=reps)
    before = _fitted_chunks(local_cluster)
    seen = []
    two = fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(chunk=64, dask=local_cluster.scheduler_address),
                    reps=reps, progress=lambda done, total: seen.append(done))
    assert _fitted_chunks(local_cluster) - before == 5          # 300 series in chunks of 64, on the cluster
    assert seen == [64, 128, 192, 256, 300]                     # in chunk order
    for f in FIELDS:
        a, b = getattr(one, f), getattr(two, f)
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f
    assert [m.to_dict() for m in one.models()] == [m.to_dict() for m in two.models()]


@pytest.mark.parametrize("command", [("model", "--json"), ("predict", "--at", "p=128", "--json"),
                                     ("check", "--expect", "*: O(p^(1/2))", "--json")])
def test_cli_dask_gives_byte_identical_json(tmp_path, capsys, monkeypatch, local_cluster, command):
    import perfcast.fit

    path = _experiment_file(tmp_path)
    code, plain, err = _run(capsys, command[0], path, *command[1:])
    assert code in (0, 1), err          # check: 1 = a series grows faster than expected
    assert len(plain) > 1000
    # several chunks per group (the default chunk would hold all 60 series)
    monkeypatch.setattr(perfcast.fit, "FitOptions", functools.partial(FitOptions, chunk=16))
    before = _fitted_chunks(local_cluster)
    code2, out, err = _run(capsys, command[0], path, *command[1:], "--dask", local_cluster.scheduler_address)
    assert code2 == code, err
    assert _fitted_chunks(local_cluster) - before == 4
    assert out == plain


def test_option_checks():
    with pytest.raises(PerfcastError, match="dask"):
        FitOptions(dask="")
    with pytest.raises(PerfcastError, match="not both"):
        FitOptions(dask="tcp://127.0.0.1:8786", workers=2)


def test_cli_errors(tmp_path, capsys, monkeypatch, short_timeout):
    path = _experiment_file(tmp_path, S=3)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    line = one_error(*cli(capsys, "model", path, "--json", "--dask", address)[::2])
    assert address in line and "cannot reach" in line
    line = one_error(*cli(capsys, "predict", path, "--at", "p=128", "--dask", "nonsense::")[::2])
    assert "'nonsense::'" in line and "not a Dask scheduler address" in line
    line = one_error(*cli(capsys, "model", path, "--dask", address, "--workers", "2")[::2])
    assert "--dask" in line and "--workers" in line
    # the optional extra not installed
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    line = one_error(*cli(capsys, "model", path, "--dask", address)[::2])
    assert line == "perfcast: error: " + cluster.INSTALL      # the place once: the message starts with it


def test_workers_running_other_code_are_refused(monkeypatch, local_cluster):
    # a fingerprint that differs between processes (this one's and each worker's)
    monkeypatch.setattr(cluster, "fingerprint", lambda: str(os.getpid()))
    mean, count, ssd, _ = _group(10, 1)
    with pytest.raises(PerfcastError, match="other fitting code") as e:
        fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(dask=local_cluster.scheduler_address))
    assert local_cluster.scheduler_address in str(e.value)


def test_workers_with_a_threaded_blas_are_refused(monkeypatch, local_cluster):
    monkeypatch.setattr(cluster, "blas_threads", lambda: "4")   # as a worker started without a nanny
    mean, count, ssd, _ = _group(10, 1)
    with pytest.raises(PerfcastError, match="several threads"):
        fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(dask=local_cluster.scheduler_address))


def test_a_dying_worker_is_one_error():
    import dask

    mean, count, ssd, _ = _group(10, 1)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=":0") as lc:
        with pytest.raises(PerfcastError, match=r"worker .* died fitting series 0:10") as e:
            list(cluster.map_chunks(lc.scheduler_address, lambda state, lo, hi: os._exit(1), (mean,), [(0, 10)]))
    assert lc.scheduler_address in str(e.value)

"""FitOptions.workers / --workers: chunks of a group fitted by forked processes give exactly the
results of one process (the same chunks, group-level estimates made once)."""

import numpy as np
import pytest

from conftest import cli_items, power_law_file, power_law_group
from perfcast.errors import PerfcastError
from perfcast.fit import FitOptions, fit_group

X = np.array([4.0, 8, 16, 32, 64])


def _group(S=300, seed=5):
    return power_law_group(X, S, seed)


def test_forked_chunks_equal_one_process():
    mean, count, ssd, reps = _group()
    one = fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(chunk=64), reps=reps)
    two = fit_group(X[:, None], mean, count, ssd, ("p",), FitOptions(chunk=64, workers=2), reps=reps)
    for f in ("hyp", "coef", "cov", "noise", "dof", "drift", "weight", "quality", "status", "drift_dof"):
        assert np.array_equal(getattr(one, f), getattr(two, f), equal_nan=True), f
    assert [m.formula() for m in one.models()] == [m.formula() for m in two.models()]


def test_workers_option_is_checked():
    for bad in (0, -1, 1.5):
        with pytest.raises(PerfcastError, match="workers"):
            FitOptions(workers=bad)


def test_cli_workers_gives_the_same_json(tmp_path, capsys):
    from perfcast.cli import main

    # more series than one chunk (FitOptions.chunk, 4,096): two chunks, so the workers really fork
    path = power_law_file(tmp_path, X, S=4100, seed=9)
    outs = []
    for w in ("1", "2", "auto"):
        assert main(["model", str(path), "--json", "--workers", w]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] and len(cli_items(outs[0], "models")) == 4100
    assert main(["model", str(path), "--workers", "0"]) == 2


def test_cli_workers_auto_and_its_errors(tmp_path, capsys, monkeypatch):
    """--workers auto (the default) is the usable CPUs, capped; bad values exit 2 naming the option."""
    import perfcast.cli as cli
    import perfcast.modelset as modelset

    seen = []
    real = modelset.model

    def spy(*a, options=None, **k):
        seen.append(options.workers)
        return real(*a, options=options, **k)

    monkeypatch.setattr(modelset, "model", spy)
    path = power_law_file(tmp_path, X, S=5, seed=3)
    monkeypatch.setattr(cli, "usable_cpus", lambda: 3)
    assert cli.main(["model", str(path), "--json"]) == 0
    monkeypatch.setattr(cli, "usable_cpus", lambda: 64)
    assert cli.main(["model", str(path), "--json", "--workers", "auto"]) == 0
    assert cli.main(["model", str(path), "--json", "--workers", "5"]) == 0
    assert seen == [3, cli.AUTO_WORKERS, 5]
    capsys.readouterr()
    for bad in ("0", "-1", "two", "1.5"):
        assert cli.main(["model", str(path), "--workers", bad]) == 2
        err = capsys.readouterr().err
        assert "--workers" in err and "Traceback" not in err


def test_forked_chunks_are_balanced():
    """The workers get equal shares: 30,000 series in 4,096-series chunks were 8 chunks, 16,384
    series for one of two workers and 13,616 for the other; now 8 chunks of 3,750.  Never larger
    than a chunk, contiguous, covering every series once, a multiple of the workers."""
    from perfcast.fit.core import _balanced

    assert _balanced(30_000, 8, 2) == [(3750 * i, 3750 * (i + 1)) for i in range(8)]
    for S, chunk, w in [(30_000, 4096, 2), (20_000, 4096, 2), (4097, 4096, 2), (300, 64, 2), (1000, 7, 3),
                        (10, 3, 8)]:
        pieces = -(-S // chunk)
        b = _balanced(S, pieces, w)
        sizes = [hi - lo for lo, hi in b]
        assert b[0][0] == 0 and b[-1][1] == S and all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))
        assert max(sizes) <= chunk and max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
        assert len(b) >= pieces and (len(b) % w == 0 or len(b) == S)

"""Shared test fixtures.

Real third-party data lives beside the repository in ../shared/data (never copied into the
package); PERFCAST_SHARED_DATA overrides the location -- the same rule the library follows
(perfcast.shared_data), so the suite runs from any working directory.
"""

import os
from pathlib import Path

import pytest

from perfcast.shared_data import shared_data_dir

REPO = Path(__file__).resolve().parents[1]
DATA = shared_data_dir()


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """perfcast's caches (the benchmark database, the PMPI library) go to a directory of this test
    session, not the user's ~/.cache (subprocesses inherit it)."""
    old = os.environ.get("PERFCAST_CACHE")
    os.environ["PERFCAST_CACHE"] = str(tmp_path_factory.mktemp("perfcast-cache"))
    yield
    if old is None:
        os.environ.pop("PERFCAST_CACHE", None)
    else:
        os.environ["PERFCAST_CACHE"] = old


_NUMBER = r"([-+\u2212]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def number_after(text: str, label: str) -> float:
    """The number printed right after ``label`` in ``text`` (spaces, ``=``, ``:``, ``~`` and ``x``
    between them allowed; a Unicode minus is read as ``-``): rendered output is checked by the
    numbers it carries, compared with a tolerance, never by matching formatted floats."""
    import re

    m = re.search(re.escape(label) + r"[\s:=~]*" + _NUMBER, text)
    if m is None:
        raise AssertionError(f"no number after {label!r} in:\n{text}")
    return float(m.group(1).replace("\u2212", "-"))


def cli(capsys, *args):
    """Run the command line in-process: (exit code, stdout, stderr); a command that exits through
    SystemExit (``check``'s 1 and 3) gives that code."""
    from perfcast.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, err):
    """Exit 2 and exactly one line on stderr, the `perfcast: error:` line; returns that line."""
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("perfcast: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


def require_tools(*tools: str) -> None:
    """Fail (never skip) when a program the project's setup installs is missing: `make test` installs
    Open MPI, valgrind, perf, gcc, Slurm, munge and Chromium (scripts/install-system-deps.sh), so a
    missing one is a broken machine, and a skip would hide it.  What the machine may legitimately
    lack (root, a perf_event permission, a hardware PMU) is a skip with its reason, where it is tested."""
    import shutil

    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: install with scripts/install-system-deps.sh "
                    "(make test runs it)", pytrace=False)


def require_data(path: Path) -> Path:
    """Fail when a file or folder of the shared data is missing (the tests run against it)."""
    if not path.exists():
        pytest.fail(f"shared data missing: {path} (set PERFCAST_SHARED_DATA)", pytrace=False)
    return path


def extrap_python() -> Path:
    """The python of Extra-P 4.2.5's own virtual environment (PERFCAST_EXTRAP_PYTHON, else
    bench/.venv-extrap), for tests against Extra-P itself.  `make test` installs it (requirements-extrap.lock),
    so a missing one fails the test that needs it, as missing shared data does: a skip would hide it."""
    for p in (os.environ.get("PERFCAST_EXTRAP_PYTHON"), REPO / "bench" / ".venv-extrap" / "bin" / "python"):
        if p and Path(p).is_file():
            return Path(p)
    pytest.fail("Extra-P's venv is missing: bench/.venv-extrap/bin/python (make test installs it from "
                "requirements-extrap.lock; or set PERFCAST_EXTRAP_PYTHON)", pytrace=False)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"shared data not found at {DATA} (set PERFCAST_SHARED_DATA)")
    return DATA


@pytest.fixture(scope="session")
def examples_built() -> Path:
    """The bundled example applications, built (the project's setup installs Open MPI: a missing
    compiler is a failure, not a skip)."""
    import shutil
    import subprocess

    require_tools("mpicc", "mpirun")
    r = subprocess.run(["make", "-s", "-C", str(REPO / "examples")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building examples/ failed: {r.stderr[-2000:]}")
    return REPO / "examples"


# Every run explores the same (large) set of generated examples, so `make test` gives the same
# result on every machine and a red run always points at a reproducible failure.  To hunt for new
# cases with random examples: HYPOTHESIS_PROFILE=explore make test.
try:
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("deterministic", derandomize=True, database=None, print_blob=True, deadline=None)
    _hsettings.register_profile("explore", print_blob=True, deadline=None)
    _hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
except ImportError:  # pragma: no cover
    pass


def power_law_group(x, S: int, seed: int):
    """(mean, count, ssd, reps) of ``S`` series ``a + b * x^e`` (e in 0.5..2) at the points ``x``, 5
    repetitions each with +-2.5% uniform noise: input for fit_group."""
    import numpy as np

    rng = np.random.default_rng(seed)
    e = rng.choice([0.5, 1.0, 1.5, 2.0], S)
    mu = rng.uniform(1, 10, S)[:, None] + rng.uniform(0.01, 1, S)[:, None] * x[None, :] ** e[:, None]
    reps = mu[:, :, None] * (1 + rng.uniform(-0.025, 0.025, (S, len(x), 5)))
    mean = reps.mean(axis=2)
    ssd = ((reps - mean[:, :, None]) ** 2).sum(axis=2)
    return mean, np.full(mean.shape, 5.0), ssd, reps


def power_law_file(tmp_path, x, S: int, seed: int):
    """An Extra-P text file (``tmp_path``/exp.txt) of the repetitions of :func:`power_law_group`:
    regions r0..r{S-1}, one parameter p at the points ``x``."""
    _, _, _, reps = power_law_group(x, S, seed)
    return write_reps_file(tmp_path / "exp.txt", x, reps)


def write_reps_file(path: Path, x, reps) -> Path:
    """An Extra-P text file at ``path``: repetitions ``reps`` (S, len(x), R) of regions r0..r{S-1},
    metric time, one parameter p at the points ``x``."""
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p:g} )" for p in x), "", "METRIC time", ""]
    for s in range(len(reps)):
        lines.append(f"REGION r{s}")
        lines += ["DATA " + " ".join(repr(float(v)) for v in reps[s, i]) for i in range(len(x))]
    path.write_text("\n".join(lines) + "\n")
    return path


#: one-parameter PMNF laws of the model-set tests: callpath -> (constant, [(coefficient, exponent
#: text, log exponent)]) -- exact data whose models are known by construction
PMNF_LAWS = {
    "quad": (3.0, [(2.0, "2", 0)]),
    "plogp": (10.0, [(0.5, "1", 1)]),
    "lin": (7.0, [(4.0, "1", 0)]),
    "sqrt": (1.0, [(30.0, "1/2", 0)]),
    "flat": (50.0, []),
}


def pmnf_law(law, p: float) -> float:
    """The value at ``p`` of a one-parameter PMNF law ``(constant, [(coefficient, "i/j", log
    exponent), ...])``, computed directly from its terms (the ground truth of model tests)."""
    import math

    c, terms = law
    out = c
    for a, e, j in terms:
        num, _, den = e.partition("/")
        out += a * p ** (float(num) / float(den or 1)) * math.log2(p) ** j
    return out


def write_law_file(path: Path, laws: dict, ps) -> Path:
    """An Extra-P text file with one region per law of ``laws`` (name -> :func:`pmnf_law` law),
    metric ``time``, two identical repetitions at each ``p`` of ``ps``."""
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in ps), "", "METRIC time", ""]
    for name, law in laws.items():
        lines.append(f"REGION {name}")
        lines += [f"DATA {pmnf_law(law, p)!r} {pmnf_law(law, p)!r}" for p in ps]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


_VALIDATOR = None


def cli_json(text: str, kind: str | None = None) -> dict:
    """A command's ``--json`` output (or an ``-o FILE.json``), checked against the JSON Schema the
    package ships (perfcast/schema/output.schema.json) and, given ``kind``, of that kind; returns
    the envelope (``["items"]`` is the list the command produced)."""
    import json

    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema

        from perfcast.output import SCHEMA_FILE

        schema = json.loads(SCHEMA_FILE.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    doc = json.loads(text)
    errors = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    if kind is not None:
        assert doc["kind"] == kind, doc["kind"]
    return doc


def cli_items(text: str, kind: str | None = None) -> list:
    """:func:`cli_json`'s ``items``."""
    return cli_json(text, kind)["items"]


def bench_module(name: str, filename: str):
    """The bench/ script ``filename`` imported as module ``name`` (bench/ on sys.path for its own
    imports): the tests of the benchmarks' helpers run the scripts' own code."""
    import importlib.util
    import sys

    bench = Path(__file__).resolve().parents[1] / "bench"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location(name, bench / filename)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m

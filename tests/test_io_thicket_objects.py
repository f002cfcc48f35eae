"""perfcast.io.from_thicket / to_thicket / from_hatchet in the main venv, which cannot hold Thicket
(llnl-thicket caps pandas below 3): the conversions themselves are tested against Thicket's and
Hatchet's own values in tests_thicket/, which `make test` runs in .venv-thicket.  Here: what a user
without the extra sees."""

import importlib.util
from pathlib import Path

import pytest

import perfcast
from perfcast.errors import PerfcastError

REPO = Path(__file__).resolve().parents[1]


def test_to_thicket_without_thicket_names_the_extra(data_dir):
    assert importlib.util.find_spec("thicket") is None, "the main test venv is not meant to hold Thicket"
    exp = perfcast.io.load([data_dir / "thicket" / "lulesh_weak_scaling_cali"])
    with pytest.raises(PerfcastError) as ei:
        exp.to_thicket()
    assert "pip install 'perfcast[thicket]'" in ei.value.message


def test_from_thicket_refuses_other_objects():
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_thicket(object())
    assert "not a Thicket" in ei.value.message and "'graph'" in ei.value.message
    with pytest.raises(PerfcastError) as ei:
        perfcast.io.from_hatchet([1, 2])
    assert "not a Hatchet GraphFrame" in ei.value.message


def test_make_test_runs_the_thicket_tests():
    """The Thicket tests are not collected here (they import thicket); make test runs them in their venv."""
    make = (REPO / "Makefile").read_text()
    recipe = make[make.index("\ntest:"):make.index("\n\n", make.index("\ntest:"))]
    assert "$(TKVENV)/bin/python -m pytest" in recipe and "tests_thicket" in recipe
    assert sorted(p.name for p in (REPO / "tests_thicket").glob("test_*.py"))
    assert (REPO / "requirements-thicket.lock").is_file()

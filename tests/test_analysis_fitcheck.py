"""Lack-of-fit warnings (analysis/fitcheck.py) on real and synthetic Extra-P inputs."""

import csv
import json

import pytest

from perfcast.analysis.fitcheck import fit_warnings
from perfcast.cli import main
from perfcast.fit import model_experiment
from perfcast.fit.model import Quality
from perfcast.io import load

from conftest import DATA


class _M:
    status = "ok"

    def __init__(self, smape, noise):
        self.quality = Quality(0.0, 1.0, smape, float("nan"), noise, 5, 25, 0.0)


def test_rule_by_hand():
    assert fit_warnings(_M(9.9, None)) == []          # below the 10 % floor
    assert fit_warnings(_M(10.1, None))                # above it, no noise measured
    assert fit_warnings(_M(29.0, 10.0)) == []          # within 3 x noise
    assert fit_warnings(_M(31.0, 10.0))                # beyond 3 x noise
    assert fit_warnings(_M(float("nan"), None)) == []  # no quality: nothing claimed


def test_mpi_data_flags_only_the_series_with_a_step(capsys):
    path = DATA / "extrap" / "mpi_data.csv"
    # the ground truth, read independently: the largest step between consecutive rank counts
    med = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            med.setdefault(f"{row['mpi']}/{row['variable']}", []).append((int(row["Ranks"]), float(row["median"])))
    step = {k: max(b[1] / a[1] for a, b in zip(sorted(v), sorted(v)[1:])) for k, v in med.items()}
    assert max(step, key=step.get) == "OpenMPI/MPI_Gather" and step["OpenMPI/MPI_Gather"] > 9
    assert main(["model", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    flagged = {r["callpath"] for r in rows if r["warnings"]}
    assert flagged == {"OpenMPI/MPI_Gather"}
    assert main(["model", str(path), "--callpath", "OpenMPI/MPI_Gather"]) == 0
    cap = capsys.readouterr()
    assert "poor fit" in cap.out and "warning: OpenMPI/MPI_Gather time: poor fit" in cap.err


@pytest.mark.parametrize("name, flagged", [("one_parameter_segmented_1.txt", True),
                                           ("two_parameter_segmented_1.txt", True),
                                           ("one_parameter_1.txt", False), ("two_parameter_1.txt", False)])
def test_segmented_inputs_are_flagged_and_pmnf_ones_are_not(name, flagged):
    models = model_experiment(load([DATA / "extrap" / "text" / name]))
    assert any(fit_warnings(sm.model) for sm in models) == flagged

"""A quantity that cannot be negative is never modelled below zero where it was measured (issue 16,
item 3: "non-negative quantities are never predicted negative").

Ground truth: times are >= 0, so a model of a time must be >= 0 at every measured point.  The data
are LULESH's MPI_Waitall under CalcForceForNodes, summed over ranks (sum#inclusive#sum#time.duration
of shared/data/thicket/lulesh_weak_scaling_cali, read with caliper-reader): the best law the
asymptotic sign rule alone admitted was ``-928 + 194 log2(jobsize)``, -5.5 s at jobsize 27."""

import math

import numpy as np
import pytest

from perfcast.fit import FitOptions, fit_series
from conftest import DATA, cli, cli_json, require_data

JOBSIZE = [27, 64, 125, 216, 343]
WAITALL_SUM = [0.481769, 192.907452, 582.780602, 306.122928, 755.164036]


def test_the_lulesh_waitall_sum_is_not_modelled_below_zero_at_its_points():
    m = fit_series(JOBSIZE, [[v] for v in WAITALL_SUM], "jobsize", FitOptions(nonnegative="asymptotic"))
    assert all(float(m.predict(x)) >= 0 for x in JOBSIZE), m.formula()
    # the law the rule now rejects is below zero at 27 (by hand) and would fit these points better
    assert -928 + 194 * math.log2(27) < 0


def test_a_series_that_may_be_negative_keeps_its_best_law():
    # no sign constraint (a metric of unknown kind): the same values may be fitted below zero
    m = fit_series(JOBSIZE, [[v] for v in WAITALL_SUM], "jobsize", FitOptions(nonnegative=False))
    assert min(float(m.predict(x)) for x in JOBSIZE) < 0


def test_a_single_parameter_name_may_be_a_string():
    m = fit_series([1, 2, 4, 8], [[3 + 2 * x] for x in (1, 2, 4, 8)], "ranks")
    assert m.parameters == ("ranks",) and float(m.predict({"ranks": 16})) == pytest.approx(35)


def test_no_time_of_lulesh_is_predicted_negative_at_a_measured_jobsize(capsys):
    src = require_data(DATA / "thicket" / "lulesh_weak_scaling_cali")
    for j in JOBSIZE:
        code, out, err = cli(capsys, "predict", src, "--param", "jobsize", "--at", f"jobsize={j}", "--json")
        assert code == 0, err
        vals = np.array([r["value"] for r in cli_json(out, "predictions")["items"]])
        assert len(vals) == 184 and np.all(vals >= 0), (j, vals.min())

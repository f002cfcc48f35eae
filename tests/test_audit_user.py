"""Found by auditing perfcast as a new HPC user on the shared third-party data (regression tests for the
fixes): options that were silently misread, defaults that refused real profiles."""

import json

import pytest
from conftest import DATA, cli, one_error, require_data

LULESH = DATA / "thicket" / "lulesh_weak_scaling_cali"


def test_kernels_on_caliper_uses_the_time_metric_view_shows(capsys):
    # was "no cost metric to rank functions by: need ... a time metric" while listing four time metrics
    require_data(LULESH)
    code, out, err = cli(capsys, "kernels", LULESH, "--param", "jobsize", "--json")
    assert code == 0, err
    ks = json.loads(out)["items"][0]
    assert ks["metric"] == "avg#inclusive#sum#time.duration"
    # the five runs are jobsize 27 .. 343: every one gets a share column
    assert sorted(ks["coverage"]) == sorted(f"jobsize={p}" for p in (27, 64, 125, 216, 343))

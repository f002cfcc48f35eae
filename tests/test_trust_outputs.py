"""Issue #16: predictions a user can trust on real data -- one model set behind every output, no
silent nonsense.  Truth comes from the files (read with caliper-reader, or the generating
formulas), never from perfcast's earlier output."""

import json

import caliperreader
import pytest
from conftest import DATA, cli_json, require_data

from perfcast.cli import main

LULESH = DATA / "thicket" / "lulesh_weak_scaling_cali"
AVG = "avg#inclusive#sum#time.duration"
WAITALL = "main->lulesh.cycle->LagrangeLeapFrog->LagrangeNodal->CalcForceForNodes->MPI_Waitall"


def run(capsys, *args):
    """(exit code, stdout, stderr); check exits through SystemExit."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def raw_avg(path, callpath=WAITALL, metric=AVG):
    """(jobsize, the region's value of ``metric``) read from the .cali file with caliper-reader."""
    r = caliperreader.CaliperReader()
    r.read(str(path))
    for rec in r.records:
        frames = rec.get("path")
        if frames is None or metric not in rec:
            continue
        frames = frames if isinstance(frames, list) else [frames]
        if "->".join(frames) == callpath:
            return int(r.globals["jobsize"]), float(rec[metric])
    raise AssertionError(f"{callpath} not in {path}")


# -- 1. check: a series that cannot be judged is not a pass ----------------------------------------
def test_check_does_not_pass_a_lulesh_series_that_grew_120x(capsys):
    require_data(LULESH)
    raw = dict(sorted(raw_avg(f) for f in LULESH.glob("*.cali")))
    assert list(raw) == [27, 64, 125, 216, 343]
    # the truth: the mean MPI_Waitall time per rank grows > 100x over the runs, and already grows
    # (strictly) through the first three scales, the regime the model set can fit
    assert raw[343] / raw[27] > 100 and raw[27] < raw[64] < raw[125]
    args = ("check", LULESH, "--param", "jobsize", "--callpath", "*CalcForceForNodes->MPI_Waitall",
            "--metric", AVG)
    code, out, err = run(capsys, *args, "--expect", "*: O(1)")
    assert code == 1, err           # was exit 2 "no modelled callpath matches" (or 0 among other series)
    assert "failed" in out and "jobsize <= 125" in out
    code, out, err = run(capsys, *args, "--expect", "*: O(1)", "--json")
    assert code == 1
    d = cli_json(out, "check")
    assert (d["status"], d["exit_code"], d["ok"]) == ("fail", 1, False)
    assert [(v["callpath"], v["regime"]) for v in d["items"]] == [(WAITALL, "jobsize <= 125")]
    assert d["unchecked"][0]["regimes_checked"] == ["jobsize <= 125"]
    # an expectation the first regime meets: the last regime (2 points) is still unjudged -> exit 3
    for extra in ((), ("--json",)):
        code, out, err = run(capsys, *args, "--expect", "*: O(jobsize^3)", *extra)
        assert code == 3, err
        if extra:
            d = cli_json(out, "check")
            assert (d["status"], d["exit_code"], d["ok"], d["items"]) == ("incomplete", 3, False, [])
        else:
            assert out.startswith("INCOMPLETE") and "passed" in out


def test_check_exit_codes_on_a_series_without_a_model(capsys, tmp_path):
    # a = 3 + 2 p exactly at p = 4..64; b measured at one scale only (no model can be fitted)
    path = tmp_path / "t.csv"
    rows = ["p,callpath,metric,value"] + [f"{p},a,time,{3 + 2 * p}" for p in (4, 8, 16, 32, 64)]
    rows += ["4,b,time,16"]
    path.write_text("\n".join(rows) + "\n")
    code, out, err = run(capsys, "check", path, "--expect", "a: O(p)")
    assert code == 0 and out.startswith("all 1 check(s) passed"), err
    code, out, err = run(capsys, "check", path, "--expect", "*: O(p)", "--json")
    d = cli_json(out, "check")
    assert code == 3 and (d["status"], d["checked"], [u["callpath"] for u in d["unchecked"]]) == ("incomplete", 1, ["b"])
    code, out, err = run(capsys, "check", path, "--expect", "b: O(p^2)")
    assert code == 3 and "b time: not checked" in err        # b only: nothing judged, not an error
    code, out, err = run(capsys, "check", path, "--expect", "*: O(1)")
    assert code == 1 and "1 of 1 check(s) failed" in out and "b time: not checked" in err
    code, out, err = run(capsys, "check", "--help")
    assert "3  nothing grows faster" in out

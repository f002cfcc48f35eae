"""The cost ranking's root is the run's whole (issue #16: one model set behind every output): a flat
timer list's whole-run timer, not the sum of nested timers; the full tree's, whatever a --callpath
filter shows."""

import json
import math
from fractions import Fraction

from conftest import DATA, cli, require_data

RELEARN = DATA / "extrap" / "text" / "mpa" / "relearn_data.txt"   # parameters p, n; flat timers


def _value(item: dict, at: dict) -> float:
    """A model's value at ``at`` from its JSON terms, by hand: constant + sum of coefficient x
    product of x^e log2(x)^l."""
    v = item["constant"]
    for t in item["terms"]:
        f = t["coefficient"]
        for p, fac in t["factors"].items():
            x = at[p]
            f *= x ** float(Fraction(fac["exponent"])) * math.log2(x) ** fac["log_exponent"]
        v += f
    return v


def test_flat_timer_shares_are_of_the_whole_run_timer(capsys):
    require_data(RELEARN)
    # by hand from the file: main() is at least every other timer at every point (the means of its
    # repetitions), so main() is the run
    from perfcast import io

    exp = io.load([RELEARN])
    means = exp.data.groupby(["p", "n", "callpath"], observed=True)["value"].mean().unstack("callpath")
    others = means.drop(columns=["main()"]).max(axis=1)
    assert (means["main()"] >= others).all()

    code, out, err = cli(capsys, "model", RELEARN, "--json")
    assert code == 0, err
    doc = json.loads(out)
    items = {d["callpath"]: d for d in doc["items"]}
    main_at = items["main()"]["ranking"]["per_process_at"]
    up = {"p": float(means.index.get_level_values("p").max()), "n": float(means.index.get_level_values("n").max())}
    total_at = sum(max(d["ranking"]["per_process_at"], 0.0) for d in items.values())
    assert total_at > 2 * main_at        # the nested timers' sum counts main()'s time several times
    # the models' values at the largest measured point (what `predict` gives: on a measured line the
    # formula's times the line's level)
    code, pout, err = cli(capsys, "predict", RELEARN, "--at", f"p={up['p']:g},n={up['n']:g}", "--json")
    assert code == 0, err
    model_up = {d["callpath"]: d["value"] for d in json.loads(pout)["items"]}
    checked = 0
    for cp, d in items.items():
        r = d["ranking"]
        # increase = (measured largest - measured smallest) + (model at target - model at largest)
        inc = (r["per_process_now"] - r["per_process_first"]) + (r["per_process_at"] - model_up[cp])
        assert r["at"] == {"p": 2 * up["p"], "n": up["n"]}
        assert math.isclose(r["increase_share"], inc / main_at, rel_tol=1e-9, abs_tol=1e-15), cp
        checked += 1
    assert checked == 14
    assert doc["ranking_root"] == {"time": "main()"}
    # the target's value of main() by hand from its formula (not on a measured line there)
    assert math.isclose(main_at, _value(items["main()"], {"p": 2 * up["p"], "n": up["n"]}), rel_tol=1e-12)
    # said on stderr without --json
    code, out, err = cli(capsys, "model", RELEARN)
    assert code == 0
    assert "the cost shares are of main()" in err.replace("\n", " ")

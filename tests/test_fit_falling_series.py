"""A series that falls with p (strong scaling) has a serial part >= 0: a constant that comes out
negative is refitted through the origin (issue 16, item 3: "decreasing series get negative exponents
automatically", "non-negative quantities are never predicted negative").

Ground truth: instructions per rank 1e9 / p at p = 1 .. 16, 3 repetitions with +-2% uniform noise,
predicted at p = 1024 (truth 976,562.5).  Under the asymptotic sign rule alone, a noise-drawn
negative constant ruled ``c + b / p`` out and ``9.8e8 - 5.8e8 p^(-1/3) log2(p)``, which falls to a
minimum at p = 20 and climbs back to 9.8e8, won in 9 of these 20 draws (417x too high)."""

import numpy as np
import pandas as pd

from conftest import cli, cli_items

PS = [1, 2, 4, 8, 16]
TRUTH = 1e9 / 1024

def write(path, seed):
    rng = np.random.default_rng(seed)
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), "", "METRIC instructions", "",
             "REGION k"]
    lines += ["DATA " + " ".join(f"{1e9 / p * (1 + rng.uniform(-0.02, 0.02)):.10g}" for _ in range(3)) for p in PS]
    path.write_text("\n".join(lines) + "\n")
    return path

def test_strong_scaling_counts_are_predicted_from_non_negative_parts(capsys, tmp_path):
    errors, covered = [], 0
    for seed in range(20):
        code, out, err = cli(capsys, "predict", write(tmp_path / f"s{seed}.txt", seed), "--at", "p=1024", "--json")
        assert code == 0, err
        (r,) = cli_items(out, "predictions")
        errors.append(abs(r["value"] / TRUTH - 1))
        covered += r["lower"] <= TRUTH <= r["upper"]
        assert any(n.startswith("falls with p") for n in r["notes"])
        # the law printed has no negative coefficient: every "-" in it is an exponent's sign
        assert " - " not in r["formula"], r["formula"]
    # the constant is the noise's: 2% of 1e9 / 16 is 1.25e6 at most, so the error stays below
    # 1.25e6 / 976,562.5 = 128% (by hand); most draws do much better
    assert max(errors) < 1.28 and np.median(errors) < 0.4, errors
    assert covered >= 18

def test_a_summary_of_many_series_notes_names_what_they_are(capsys, tmp_path):
    # seven falling series, no regime change: the summary line said "7 series with regime change(s)"
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), "", "METRIC instructions", ""]
    for s in range(7):
        lines += [f"REGION r{s}"] + [f"DATA {1e9 * (s + 1) / p:.10g} {1.01e9 * (s + 1) / p:.10g}" for p in PS]
    (path := tmp_path / "seven.txt").write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "model", path)
    assert code == 0, err
    assert "7 series with values falling with a parameter (negative exponents searched)" in err
    assert "regime change" not in err


def test_the_noise_shape_refit_keeps_the_falling_rule(capsys, tmp_path):
    """Uniform noise (+-2%, 5 repetitions) makes the fit re-rank and refit under a flat-topped
    generalised normal likelihood; that refit moved the constant of a / p below zero in about half
    the series (``-5147 + 8.72e6 / p``: negative from p ~ 1700 on).  Truth: a / p, no constant."""
    rng = np.random.default_rng(5)
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in PS), "", "METRIC instructions", ""]
    for s in range(100):
        a = rng.uniform(1e6, 1e9)
        lines += [f"REGION r{s}"] + ["DATA " + " ".join(f"{a / p * (1 + rng.uniform(-0.02, 0.02)):.8g}"
                                                        for _ in range(5)) for p in PS]
    (path := tmp_path / "uniform.txt").write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "model", path, "--json")
    assert code == 0, err
    items = cli_items(out, "models")
    assert {r["noise_shape"] for r in items} != {None}        # the refit ran
    assert all(r["constant"] >= 0 and all(t["coefficient"] >= 0 for t in r["terms"]) for r in items)
    code, out, err = cli(capsys, "predict", path, "--at", "p=65536", "--json")
    assert code == 0, err
    assert min(r["value"] for r in cli_items(out, "predictions")) >= 0


def test_a_falling_series_keeps_a_term_that_bends_it_towards_a_rising_overhead(capsys, tmp_path):
    """a n^2 / (100 p) + a log2(p), p = 1..16, n = 64..512, +-3% normal noise, 3 repetitions,
    predicted at p = 256, n = 1024 (truth by the formula).  The search has one block per
    parameter, so it bends the n^2 / p law towards the log2(p) overhead with ``c - d / p``: a
    negative term that the strict rule refused (82% off) and that is >= 0 everywhere, which the
    sign rule's bound alone could not tell (``264 - 428 / p + 0.625 n^2 / p``: bound 264 - 428)."""
    import itertools

    law = lambda a, p, n: a * n * n / p / 100 + a * np.log2(p)       # noqa: E731
    pts = list(itertools.product(PS, (64, 128, 256, 512)))
    rng = np.random.default_rng(7)
    lines = ["PARAMETER p", "PARAMETER n", "", "POINTS " + " ".join(f"( {p} {n} )" for p, n in pts), "",
             "METRIC time", ""]
    truth = {}
    for s in range(40):
        a = rng.uniform(1, 100)
        truth[f"r{s}"] = law(a, 256, 1024)
        lines += [f"REGION r{s}"] + ["DATA " + " ".join(f"{law(a, p, n) * (1 + e):.8g}" for e in rng.normal(0, 0.03, 3))
                                     for p, n in pts]
    (path := tmp_path / "bend.txt").write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "predict", path, "--at", "p=256,n=1024", "--json")
    assert code == 0, err
    rows = cli_items(out, "predictions")
    errors = [abs(r["value"] / truth[r["callpath"]] - 1) for r in rows]
    assert np.median(errors) < 0.15 and max(errors) < 0.2, sorted(errors)[-5:]
    assert any(" - " in r["formula"] for r in rows)                # the bending term is there ...
    code, out, err = cli(capsys, "predict", path, "--at", "p=65536,n=64", "--json")
    assert min(r["value"] for r in cli_items(out, "predictions")) >= 0     # ... and never below zero


def test_fit_series_finds_a_falling_law_as_the_experiment_fit_does():
    # the one-series API (used for APMT's counters and the communication models): 1e9 / p + 5e6 at
    # p = 1..16 without noise is that law (it was the training mean, 3.925e8, at every p), and a
    # rising series keeps the growing search (no note)
    from perfcast.fit import fit_series

    p = np.array(PS, dtype=float)
    m = fit_series(p, 1e9 / p + 5e6, "p")
    assert np.isclose(m.predict({"p": 1024}), 1e9 / 1024 + 5e6, rtol=1e-9)
    assert any(n.startswith("falls with p") for n in m.notes)
    up = fit_series(p, 1e3 * p, "p")
    assert np.isclose(up.predict({"p": 1024}), 1.024e6, rtol=1e-9) and not up.notes


def test_the_summary_names_a_parameter_no_model_follows(capsys, tmp_path):
    # p at 1 and 2 with no pair of points that differ in p alone (n = 16, 24, 32 at p = 1, n = 40,
    # 48 at p = 2): p has no line of 3 points and no two levels of a line, so every model is flat
    # in p; the summary line called that "other notes", and the ranking's default target (p = 4)
    # moves p without a word on the table's side.  Seven series a * p * n (exact), summed over
    # ranks.  (At p = 1, 2 x the same sizes the law in p goes through the two levels instead:
    # tests/test_fit_two_levels.py.)
    rows = [{"p": p, "n": n, "callpath": f"r{s}", "metric": "calls", "value": (s + 1) * p * n}
            for s in range(7) for p, ns in ((1, (16, 24, 32)), (2, (40, 48))) for n in ns]
    pd.DataFrame(rows).to_csv(path := tmp_path / "two_p.csv", index=False)
    code, out, err = cli(capsys, "model", path)
    assert code == 0, err
    assert "7 series with" in err and "a parameter no model follows (no line of >= 3 points along it)" in err

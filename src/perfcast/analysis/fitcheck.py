"""Lack-of-fit warnings: a model whose residuals are far larger than the measurement noise.

The selected PMNF hypothesis is the best of its search space, not necessarily a good description:
a step in the data (an MPI library switching algorithms between two process counts, a cache
level overflowing) or a segmented behaviour fits no single monomial.  Such a model is printed with
a warning instead of being presented as if it were as trustworthy as the others.

Rule: SMAPE of the model over the measured means (in %) above ``max(SMAPE_FLOOR, NOISE_FACTOR x
noise)``, where noise is the relative standard deviation of one repetition (%).  The SMAPE of
means of r repetitions that follow the model is about noise / sqrt(r), so NOISE_FACTOR = 3 only
fires when the misfit dwarfs the measured noise.  Without repetitions the noise is unknown, and
single runs of real codes scatter by 10-20 % (LULESH's per-rank maxima in the shared Caliper data):
the limit is then UNMEASURED_LIMIT.  On the shared Extra-P inputs the rule flags the segmented
examples (``one_parameter_segmented_1``, ``two_parameter_segmented_1``), ``2_param_gpr2`` (SMAPE
12 % on noise-free data) and Open MPI's MPI_Gather in ``mpi_data.csv`` (median 59 -> 581 us between
128 and 256 ranks, SMAPE 86 %), and none of Relearn's noisy timers.  The limit is
:func:`misfit_limit`; it is the same for every series whose noise is not measured, so of LULESH's
single runs (mean over ranks) TimeIncrement's constant at SMAPE 23.3 % passes while MPI_Comm_dup's
at 25.4 % and MPI_Gather's at 27.0 % do not.

A model can also fit its points on average and still miss where they go: LULESH's TimeIncrement
(7.865 -> 16.43 s per rank from jobsize 27 to 343, one dip at 216) gets the constant 11.62, below
the last run.  :func:`follows_growth` is the one rule for that (the report's "What grows?" answer
and ``perfcast check`` use it): a cost that grew from the smallest to the largest measured run
whose model at the target lies below the last measurement by more than the same limit (the
symmetric relative error of SMAPE's terms).
"""

from __future__ import annotations

SMAPE_FLOOR = 10.0
NOISE_FACTOR = 3.0
UNMEASURED_LIMIT = 25.0


#: the warning of a model through two points (:func:`fit_warnings`)
TWO_POINTS = ("2 points only: a law through them; its form cannot be checked, and its interval assumes "
              "an exponent uncertain by 0.25; measure a third point to choose the form")


def fit_warnings(model) -> list[str]:
    """Warnings about how well ``model`` (a fit.Model) describes its own data; [] when fine.  A
    model of two points cannot be checked at all: it is a law through them, and says so."""
    q = getattr(model, "quality", None)
    if getattr(model, "status", "ok") != "ok" or q is None or q.smape != q.smape:
        return []
    if q.n_points == 2:
        return [TWO_POINTS]
    from ..fit.core import two_level_parameter

    two = [n for n in getattr(model, "notes", ()) if two_level_parameter(n) is not None]
    if two:
        return two
    measured = q.noise is not None and q.noise == q.noise
    if q.smape <= misfit_limit(q.noise):
        return []
    why = f"{q.noise:.1f}% noise per repetition" if measured else "no repetitions to measure the noise"
    return [f"poor fit: SMAPE {q.smape:.1f}% ({why}); no hypothesis of the search space follows these "
            "values (a regime change between scales, or noise beyond any trend?); predictions from this "
            "model are unreliable"]


def misfit_limit(noise):
    """The SMAPE (%) above which a model does not follow its data: ``max(SMAPE_FLOOR, NOISE_FACTOR
    x noise)`` with the noise (% per repetition) measured, ``UNMEASURED_LIMIT`` without (None or
    NaN); a float for a number, an array for an array."""
    import numpy as np

    n = np.asarray(noise, dtype=float)
    out = np.where(np.isnan(n), UNMEASURED_LIMIT, np.maximum(SMAPE_FLOOR, NOISE_FACTOR * np.nan_to_num(n)))
    return float(out) if out.ndim == 0 else out


def follows_growth(first, last, at_target, noise=None) -> bool:
    """Whether a model follows the measured growth of its series (module docstring): False when the
    cost grew from the smallest measured run (``first``) to the largest (``last``) and the model's
    value at the target beyond them (``at_target``) lies below ``last`` by more than a poor fit's
    misfit -- ``2 (last - at_target) / (|last| + |at_target|)`` above :func:`misfit_limit` of the
    series' ``noise`` (%, None: not measured).  Unknown values (None, NaN): True (nothing to say)."""
    vals = (first, last, at_target)
    if any(v is None or v != v for v in vals) or not (last > first and at_target < last):
        return True
    den = abs(last) + abs(at_target)
    return not (den > 0 and 200 * (last - at_target) / den > misfit_limit(noise))


def pending_warned(series, parts=None, two_point: bool = True):
    """Per series of ``series`` (objects with ``model``; :func:`perfcast.fit.columns.split`'s
    ``parts`` when already computed), two boolean arrays: whose model is not built yet (its group's
    quality arrays hold it), and of those, which :func:`warned` flags (``two_point`` False: the
    SMAPE rule alone, not the two-point warning)."""
    import numpy as np

    from ..fit import columns
    from ..fit.core import two_level_parameter

    pending = np.zeros(len(series), dtype=bool)
    out = np.zeros(len(series), dtype=bool)
    for g, pos, rows in (parts or columns.split(series))[0]:
        q = g.quality[rows]
        noise = np.where(np.isfinite(q[:, 4]), q[:, 4], np.nan)
        pending[pos] = True
        two = two_point and any(two_level_parameter(n) is not None for n in g.notes)
        out[pos] = warned(g.status[rows] == 0, q[:, 2], noise,
                          np.full(len(rows), 2) if two else
                          q[:, 5].astype(np.int64) if two_point else np.full(len(rows), 3))
    return pending, out


def two_value_laws(series, positions, parts=None) -> dict[int, dict[str, str]]:
    """Of the series at ``positions`` of ``series`` (as :func:`pending_warned`), those whose law
    along some parameter rests on two values, the fit's warning per such parameter: a law through
    two points (:data:`TWO_POINTS`, under ``"*"``: every parameter) or one power through the two
    levels of a parameter measured at two values (its two-level note,
    :func:`perfcast.fit.core.two_level_parameter`).  From the group's notes and quality arrays
    while the model is not built (no model is built), else from the model's warnings."""
    from ..fit import columns
    from ..fit.core import two_level_parameter

    parts = parts or columns.split(series)
    want = set(int(s) for s in positions)
    out: dict[int, dict[str, str]] = {}

    def laws(warns):
        if TWO_POINTS in warns:
            return {"*": TWO_POINTS}
        return {p: w for w in warns if (p := two_level_parameter(w)) is not None}

    for g, pos, rows in parts[0]:
        hit = [(int(s), int(r)) for s, r in zip(pos, rows) if int(s) in want]
        if not hit:
            continue
        two = laws([n for n in g.notes if two_level_parameter(n) is not None])
        for s, r in hit:
            found = {"*": TWO_POINTS} if g.status[r] == 0 and int(g.quality[r, 5]) == 2 else two
            if found:
                out[s] = found
    for s in parts[1]:
        if s in want:
            m = series[s].model
            found = laws(fit_warnings(m))
            # a sum of its children's models (a PMPI node, fit.sums): a growth its parts' laws on two
            # values give it is no more shown by the data than theirs (LULESH's MPI calls, O(p^(7/5))
            # from MPI_Isend's and MPI_Irecv's laws on p = 8, 27, failed a check they left unchecked)
            for part in getattr(m, "parts", ()):
                for q, w in laws(fit_warnings(part)).items():
                    found.setdefault(q, f"the sum of its children, of which one's law rests on this: {w}")
            if found:
                out[s] = found
    return out


def poor_fits(series, parts=None):
    """Per series of ``series`` (as :func:`pending_warned`), whether its model is a poor fit by the
    rule above (the SMAPE rule alone, not the two-point warning): from its group's quality arrays
    while the model is not built, else from the model."""
    from ..fit import columns

    parts = parts or columns.split(series)
    _, out = pending_warned(series, parts, two_point=False)
    for s in parts[1]:
        out[s] = any(w.startswith("poor fit") for w in fit_warnings(series[s].model))
    return out


def warned(ok, smape, noise, n_points):
    """:func:`fit_warnings` non-empty, as arrays: ``ok`` status ok with a quality, ``smape``,
    ``noise`` (NaN: not measured), ``n_points`` of each model's quality."""
    import numpy as np

    smape = np.asarray(smape, dtype=float)
    limit = misfit_limit(noise)
    return np.asarray(ok, dtype=bool) & ~np.isnan(smape) & ((np.asarray(n_points) == 2) | (smape > limit))


__all__ = ["fit_warnings", "follows_growth", "two_value_laws", "TWO_POINTS", "misfit_limit", "pending_warned", "poor_fits", "warned", "SMAPE_FLOOR", "NOISE_FACTOR", "UNMEASURED_LIMIT"]

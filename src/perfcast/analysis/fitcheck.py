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
128 and 256 ranks, SMAPE 86 %), and none of Relearn's noisy timers.
"""

from __future__ import annotations

SMAPE_FLOOR = 10.0
NOISE_FACTOR = 3.0
UNMEASURED_LIMIT = 25.0


def fit_warnings(model) -> list[str]:
    """Warnings about how well ``model`` (a fit.Model) describes its own data; [] when fine.  A
    model of two points cannot be checked at all: it is a law through them, and says so."""
    q = getattr(model, "quality", None)
    if getattr(model, "status", "ok") != "ok" or q is None or q.smape != q.smape:
        return []
    if q.n_points == 2:
        return ["2 points only: a law through them; its form cannot be checked, and its interval assumes "
                "an exponent uncertain by 0.25; measure a third point to choose the form"]
    measured = q.noise is not None and q.noise == q.noise
    limit = max(SMAPE_FLOOR, NOISE_FACTOR * q.noise) if measured else UNMEASURED_LIMIT
    if q.smape <= limit:
        return []
    why = f"{q.noise:.1f}% noise per repetition" if measured else "no repetitions to measure the noise"
    return [f"poor fit: SMAPE {q.smape:.1f}% ({why}); no hypothesis of the search space follows these "
            "values (a regime change between scales, or noise beyond any trend?); predictions from this "
            "model are unreliable"]


def pending_warned(series, parts=None, two_point: bool = True):
    """Per series of ``series`` (objects with ``model``; :func:`perfcast.fit.columns.split`'s
    ``parts`` when already computed), two boolean arrays: whose model is not built yet (its group's
    quality arrays hold it), and of those, which :func:`warned` flags (``two_point`` False: the
    SMAPE rule alone, not the two-point warning)."""
    import numpy as np

    from ..fit import columns

    pending = np.zeros(len(series), dtype=bool)
    out = np.zeros(len(series), dtype=bool)
    for g, pos, rows in (parts or columns.split(series))[0]:
        q = g.quality[rows]
        noise = np.where(np.isfinite(q[:, 4]), q[:, 4], np.nan)
        pending[pos] = True
        out[pos] = warned(g.status[rows] == 0, q[:, 2], noise,
                          q[:, 5].astype(np.int64) if two_point else np.full(len(rows), 3))
    return pending, out


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

    smape, noise = np.asarray(smape, dtype=float), np.asarray(noise, dtype=float)
    measured = ~np.isnan(noise)
    limit = np.where(measured, np.maximum(SMAPE_FLOOR, NOISE_FACTOR * np.where(measured, noise, 0.0)),
                     UNMEASURED_LIMIT)
    return np.asarray(ok, dtype=bool) & ~np.isnan(smape) & ((np.asarray(n_points) == 2) | (smape > limit))


__all__ = ["fit_warnings", "pending_warned", "poor_fits", "warned", "SMAPE_FLOOR", "NOISE_FACTOR", "UNMEASURED_LIMIT"]

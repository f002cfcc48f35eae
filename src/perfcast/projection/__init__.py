"""Projection onto machines the user does not have (Sharkawi's surrogate method, seed 002).

* :mod:`.database` -- published benchmark results (SPEC CPU2017, user CSVs), system search;
* :mod:`.signatures` -- per-instruction counter signatures (characterisation data, Experiments);
* :mod:`.factor` -- low-rank factor model of the database: the default compute scaling factor
  when the signature has the memory groups (bench/PROJECTION.md);
* :mod:`.surrogate` -- surrogate search and compute scaling factor (fallback, always reported);
* :mod:`.comm` -- MPI micro-benchmark tables, interpolation, transfer/wait projection;
* :mod:`.closed_loop` -- validation on published data.

SPEC CPU2017 (rate) replaces the seed's CFP2006 because that is the data at hand.
"""

from .database import BenchmarkDB, load_spec, load_user_csv
from .signatures import GROUPS, PORTABLE, Signature, load_navarro, load_signature_csv, signature_from_experiment


def __getattr__(name):  # the surrogate imports scipy: loaded when asked for, not by `perfcast systems`
    if name in ("Surrogate", "find_surrogate"):
        from . import surrogate

        return getattr(surrogate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["BenchmarkDB", "load_spec", "load_user_csv", "GROUPS", "PORTABLE", "Signature", "load_navarro",
           "load_signature_csv", "signature_from_experiment", "Surrogate", "find_surrogate"]

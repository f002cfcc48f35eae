"""Projection onto machines the user does not have (Sharkawi's surrogate method, seed 002).

* :mod:`.database` -- published benchmark results (SPEC CPU2017, user CSVs);
* :mod:`.lookup` -- system search (also without pandas: ``perfcast systems``);
* :mod:`.signatures` -- per-instruction counter signatures (characterisation data, Experiments);
* :mod:`.factor` -- low-rank factor model of the database: the default compute scaling factor
  when the signature has the memory groups (bench/PROJECTION.md);
* :mod:`.surrogate` -- surrogate search and compute scaling factor (fallback, always reported);
* :mod:`.comm` -- MPI micro-benchmark tables, interpolation, transfer/wait projection;
* :mod:`.closed_loop` -- validation on published data.

SPEC CPU2017 (rate) replaces the seed's CFP2006 because that is the data at hand.
"""

import importlib

#: public names and the module each comes from: imported when first asked for, so that
#: ``perfcast systems`` (:mod:`.lookup`) loads neither pandas nor scipy
_LAZY = {"BenchmarkDB": "database", "load_spec": "database", "load_user_csv": "database",
         "GROUPS": "signatures", "PORTABLE": "signatures", "Signature": "signatures", "load_navarro": "signatures",
         "load_signature_csv": "signatures", "signature_from_experiment": "signatures",
         "Surrogate": "surrogate", "find_surrogate": "surrogate"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_LAZY)

"""perfcast: automatic performance modeling of parallel (MPI) applications."""

from .errors import PerfcastError

__version__ = "0.1.0"
__all__ = ["CallTree", "Experiment", "Metric", "ModelSet", "PerfcastError", "combine", "model", "__version__"]

_LAZY = {"CallTree": "experiment", "Experiment": "experiment", "Metric": "experiment", "combine": "experiment",
         "model": "modelset", "ModelSet": "modelset"}
_SUBPACKAGES = ("analysis", "apmt", "collect", "fit", "io", "modelset", "projection", "report", "scaling",
                "shared_data", "store")


def __getattr__(name):
    # the Experiment (and with it pandas/scipy) is imported on first use, so that `perfcast --help`,
    # `--version` and errors about arguments answer without loading the numerical stack; the
    # subpackages likewise (`perfcast.fit` works without importing it first)
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'perfcast' has no attribute {name!r}")

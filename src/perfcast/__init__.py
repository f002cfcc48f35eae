"""perfcast: automatic performance modeling of parallel (MPI) applications."""

from .errors import PerfcastError

__version__ = "0.1.0"
__all__ = ["CallTree", "Experiment", "Metric", "PerfcastError", "combine", "__version__"]

_LAZY = ("CallTree", "Experiment", "Metric", "combine")


def __getattr__(name):
    # the Experiment (and with it pandas/scipy) is imported on first use, so that `perfcast --help`,
    # `--version` and errors about arguments answer without loading the numerical stack
    if name in _LAZY:
        from . import experiment

        return getattr(experiment, name)
    raise AttributeError(f"module 'perfcast' has no attribute {name!r}")

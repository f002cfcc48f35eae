"""perfcast: automatic performance modeling of parallel (MPI) applications."""

from .errors import PerfcastError
from .experiment import CallTree, Experiment, Metric, combine

__version__ = "0.1.0"
__all__ = ["CallTree", "Experiment", "Metric", "PerfcastError", "combine", "__version__"]

"""APMT: automatic performance modeling from a few small profiling runs (seed 000, methods.md §1).

>>> from perfcast.apmt import fit_apmt
>>> m = fit_apmt(exp, timers={"compute_sweep": "app->compute"})
>>> m.predict({"p": 16, "n": 256}).lines(), m.insights()

Modules: :mod:`.model` (kernels x counters + communication, prediction with breakdown),
:mod:`.comm` (Hockney / collective models from PMPI profiles), :mod:`.counters` (counter roles),
:mod:`.refine` (validation, error attribution, Eq 5), :mod:`.baselines` (Worley, Nan).
Kernel identification lives in :mod:`perfcast.analysis.kernels`, machine descriptions in
:mod:`perfcast.machine`.
"""

from .comm import CommModel, fit_comm
from .model import APMTModel, KernelModel, Prediction, fit_apmt, fit_options

__all__ = ["APMTModel", "KernelModel", "Prediction", "fit_apmt", "fit_options", "CommModel", "fit_comm"]

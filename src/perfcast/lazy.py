"""A module imported on its first use: for the heavy imports that few commands need."""

from __future__ import annotations

import importlib


class LazyModule:
    """``sp = LazyModule("scipy.sparse")`` at a module's top: ``sp.csr_matrix`` imports
    scipy.sparse on first use.  Every command imports the modules holding such names (the
    experiment, every reader for the format detection); scipy.sparse costs ~50 ms of a command's
    start that a run reading an Extra-P text file never uses."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"

"""Where perfcast keeps what it can rebuild (the benchmark-table cache, the compiled PMPI library).

``$PERFCAST_CACHE`` when set, else ``$XDG_CACHE_HOME/perfcast``, else ``~/.cache/perfcast`` (an empty
variable counts as unset); each user of the cache takes a subdirectory of it.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache's root directory (module docstring); not created here."""
    root = os.environ.get("PERFCAST_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "perfcast"

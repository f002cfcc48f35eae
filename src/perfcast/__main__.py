"""``python -m perfcast``: the same command line as the ``perfcast`` script, from any interpreter that
has perfcast installed (no need to know where the script was put)."""

from .cli import run

run()

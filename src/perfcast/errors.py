"""The one error type users see.

Every failure caused by input (a file, a flag, a formula) is raised as :class:`PerfcastError`
with the file and the place in it (line, field, column) so the CLI can print one line and exit 2.
Anything else escaping to the CLI is a bug in perfcast.
"""

from __future__ import annotations

from pathlib import Path


class PerfcastError(Exception):
    """An error in the user's input, reported as ``file:place: message``."""

    def __init__(self, message: str, path: str | Path | None = None, where: str | int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.where = None if where is None else str(where)
        super().__init__(self.format())

    def format(self) -> str:
        loc = ""
        if self.path:
            loc = self.path
            if self.where:
                # bare numbers are line numbers; anything else names a field or column
                loc += f":{self.where}" if self.where.isdigit() else f" ({self.where})"
            loc += ": "
        elif self.where and not self.message.startswith((f"{self.where} ", f"{self.where}:")):
            loc = f"{self.where}: "   # not when the message already starts with it ("-P 'n=x': ...")
        return loc + self.message

    def at(self, path: str | Path | None = None, where: str | int | None = None) -> "PerfcastError":
        """Return a copy located in ``path``/``where`` unless it already names a place."""
        return PerfcastError(self.message, self.path or path, self.where or where)

"""YAML files written by users (campaign specs, machine descriptions): the one reader.

PyYAML's ``safe_load`` keeps the *last* of two equal keys in a mapping, so a campaign whose
``parameters:`` block is written twice runs only the second grid, and a machine file with two
``peak_flops:`` lines uses whichever came last -- silently.  :func:`read_yaml` refuses that, names
the line of the repeated key, and turns every other failure (unreadable file, binary content, a
syntax error) into a :class:`~perfcast.errors.PerfcastError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import PerfcastError


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding one key twice."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:      # the keys written here: a ``<<`` merge may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:               # an unhashable key: PyYAML's own error follows
                    continue
                if first is not None:
                    raise _Duplicate(key, first, line)
                seen[key] = line
        return super().construct_mapping(node, deep)


class _Duplicate(Exception):
    def __init__(self, key, first: int, line: int):
        super().__init__(key, first, line)
        self.key, self.first, self.line = key, first, line


def read_yaml(path: str | Path, what: str = "file"):
    """The document of the YAML file ``path`` (``None`` when it is empty); ``what`` names the file
    in the error when it cannot be read ("the machine file")."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PerfcastError(f"cannot read {what} ({e.strerror})", path) from None
    except UnicodeDecodeError:
        raise PerfcastError("not a YAML text file (binary content)", path) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _Duplicate as d:
        raise PerfcastError(f"key {d.key!r} given twice (first on line {d.first}); "
                            "YAML would keep only the last", path, d.line) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise PerfcastError(f"not valid YAML ({getattr(e, 'problem', e)})", path,
                            None if mark is None else mark.line + 1) from None

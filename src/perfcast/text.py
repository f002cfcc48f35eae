"""Names from profiles and application output shown on a terminal: the one sanitiser.

Callpaths, metric, parameter, timer and file names come from files perfcast did not write.  Printed
raw, an escape sequence in one clears the screen or sets the window title, a bidi override
reorders the rest of the line and a NUL or a lone surrogate garbles (or aborts) the output.
:func:`safe_text` shows every such character escaped, Python-style (``\\x1b``, ``\\u202e``),
so the name is visible and nothing is executed.  JSON output does not use it: ``json.dumps``
escapes control characters itself and keeps the exact string.
"""

from __future__ import annotations

import re

#: Separator used to display callpaths as one string (Extra-P's convention).
SEP = "->"

# gfortran's symbol of a module procedure: "__" module "_MOD_" procedure (gfortran's
# trans-decl.c, gfc_sym_mangled_function_id); valgrind and perf demangle C++ and Rust, not Fortran
_GFORTRAN = re.compile(r"__(?P<module>[A-Za-z0-9_$]+?)_MOD_(?P<proc>[A-Za-z0-9_$]+)")


def fortran_name(symbol: str) -> str:
    """A gfortran module procedure's symbol as the source names it, ``module::procedure`` (as gdb
    shows it): ``__pdv_kernel_module_MOD_pdv_kernel`` -> ``pdv_kernel_module::pdv_kernel``; any other
    symbol unchanged (an external procedure's trailing ``_``, ``hydro_``, cannot be told from a C
    name's)."""
    m = _GFORTRAN.fullmatch(symbol)
    return f"{m.group('module')}::{m.group('proc')}" if m else symbol

# bidi embeddings/overrides (U+202A-U+202E), isolates (U+2066-U+2069), marks (LRM, RLM, ALM)
_BIDI = {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}
# characters that end a line without being "\n"
_LINE_BREAKS = {0x2028, 0x2029, 0x85}


def _unsafe(cp: int, multiline: bool) -> bool:
    if cp < 0x20:
        return not (multiline and cp in (0x09, 0x0A))
    return (cp == 0x7F or 0x80 <= cp <= 0x9F or cp in _BIDI or cp in _LINE_BREAKS
            or 0xD800 <= cp <= 0xDFFF)  # lone surrogates (undecodable bytes of a file name)


_SHORT = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _shown(cp: int) -> str:
    return _SHORT.get(cp) or (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")


def safe_text(value, multiline: bool = False) -> str:
    """``value`` as text safe to print on a terminal: C0 control characters (tab and newline kept
    only when ``multiline``), DEL, C1, bidi controls, line/paragraph separators and lone surrogates
    are shown escaped (``\\x1b``, ``\\u202e``); everything else is unchanged."""
    s = value if isinstance(value, str) else str(value)
    if s.isprintable():
        return s  # the common case, fast: every character escaped here is a non-printable one
    return "".join(_shown(ord(c)) if _unsafe(ord(c), multiline) else c for c in s)

"""Arrow's compute functions by name, without importing ``pyarrow.compute``.

``import pyarrow.compute`` wraps each of Arrow's ~290 compute functions in a Python function with
a generated docstring: ~20 ms, a fortieth of ``perfcast model --json`` on 30,000 series, for the
dozen functions perfcast calls.  This module calls the same kernels through the function registry
that ``pyarrow.compute`` itself wraps (``pyarrow._compute``), building a caller only for a name
used, with the same positional and keyword options (``kernels.utf8_slice_codeunits(strings, 4)``
is ``pc.utf8_slice_codeunits(strings, 4)``).  Where this pyarrow lacks that registry the names are
``pyarrow.compute``'s own functions.

pyarrow's own array methods ``take``, ``filter``, ``cast``, ``dictionary_encode`` and ``unique``
import ``pyarrow.compute``: call this module's functions of those names instead.
"""

from __future__ import annotations

try:
    from pyarrow import _compute as _registry

    for _name in ("get_function", "CastOptions", "FilterOptions", "TakeOptions"):
        getattr(_registry, _name)
except (ImportError, AttributeError):   # a pyarrow without it: pyarrow.compute's functions
    _registry = None

_made: dict = {}


def _caller(name: str):
    """The function ``name`` of Arrow's registry, called as ``pyarrow.compute.<name>``: its arguments,
    then the fields of its options class positionally or by keyword (or ``options=``)."""
    if _registry is None:
        import pyarrow.compute as pc

        return getattr(pc, name)
    try:
        func = _registry.get_function(name)
    except Exception as e:        # pyarrow's ArrowKeyError: not a function name
        raise AttributeError(f"Arrow has no compute function {name!r}") from e
    cls_name = func._doc.options_class
    cls = getattr(_registry, cls_name) if cls_name else None
    arity = func.arity

    def call(*args, options=None, **kwargs):
        if arity is not Ellipsis:
            if len(args) < arity:
                raise TypeError(f"{name} takes {arity} positional argument(s), but {len(args)} were given")
            args, extra = args[:arity], args[arity:]
        else:
            extra = ()
        if extra or kwargs:
            if cls is None or options is not None:
                raise TypeError(f"{name}: unexpected options {extra or kwargs}")
            options = cls(*extra, **kwargs)
        return func.call(list(args), options)

    call.__name__ = call.__qualname__ = name
    return call


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    f = _made.get(name)
    if f is None:
        f = _made[name] = _caller(name)
    return f


def cast(arr, target_type):
    """``pyarrow.compute.cast(arr, target_type)``: a safe cast (an overflow or a text that is no
    number of that type raises ``pyarrow.ArrowInvalid``)."""
    if _registry is None:
        import pyarrow.compute as pc

        return pc.cast(arr, target_type)
    return _registry.call_function("cast", [arr], _registry.CastOptions.safe(target_type))


def take(data, indices):
    """``data.take(indices)`` (bounds checked)."""
    if _registry is None:
        return data.take(indices)
    return _registry.call_function("take", [data, indices], _registry.TakeOptions(boundscheck=True))


def filter(data, mask):   # noqa: A001 -- pyarrow.compute's name
    """``data.filter(mask)`` (a null in the mask drops the row)."""
    if _registry is None:
        return data.filter(mask)
    return _registry.call_function("filter", [data, mask], _registry.FilterOptions("drop"))

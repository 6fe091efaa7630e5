"""``gradviz.jit``: what model code calls on ``torch.jit`` while it runs eagerly.

Model definitions written for TorchScript call ``torch.jit.is_scripting()`` and decorate
methods with ``@torch.jit.ignore``/``unused``/``export``; training scripts sometimes pass a
model through ``torch.jit.script``/``trace``. gradviz runs every model eagerly (that is what
its debugger records), so the queries answer False, the decorators return the function, and
``script``/``trace`` return the module or function itself with a warning that it stays eager.
``save``/``load`` of TorchScript archives are not available (a clear error).
"""

from __future__ import annotations

import warnings
from typing import Final  # noqa: F401  (torch.jit.Final is typing.Final)

__all__ = ["is_scripting", "is_tracing", "ignore", "unused", "export", "script", "trace", "annotate",
           "Final", "save", "load", "ScriptModule"]


def is_scripting() -> bool:
    """False: gradviz never compiles TorchScript."""
    return False


def is_tracing() -> bool:
    """False: gradviz never traces."""
    return False


def _identity_decorator(function=None, **kwargs):
    if function is None:
        return lambda inner: inner
    return function


ignore = unused = export = _identity_decorator


def annotate(the_type, the_value):
    """``the_value`` (a type hint for the TorchScript compiler; nothing at run time)."""
    return the_value


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself, run eagerly (gradviz records eager execution; there is no TorchScript)."""
    warnings.warn("gradviz.jit.script returns its argument unchanged: gradviz runs models eagerly "
                  "(the debugger records eager execution)", UserWarning, stacklevel=2)
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """``func`` itself, run eagerly (see :func:`script`)."""
    warnings.warn("gradviz.jit.trace returns its argument unchanged: gradviz runs models eagerly "
                  "(the debugger records eager execution)", UserWarning, stacklevel=2)
    return func


class ScriptModule:
    """Only for ``isinstance`` checks: no gradviz object is a ScriptModule."""


def _no_archives(*args, **kwargs):
    raise RuntimeError("gradviz has no TorchScript: save the model's state_dict with gradviz.save "
                       "and rebuild the module in Python instead")


save = load = _no_archives

"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` (context managers and
decorators, like PyTorch's), ``is_grad_enabled`` and ``is_inference_mode_enabled``.

They switch the engine's per-thread flags, so they sit in the core layer with the engine, where
the ops layer can use them (docs/architecture.md). The public module is
``gradviz.autograd.grad_mode``: it re-exports them and defines ``inference_mode``, which also
turns forward AD (autograd) off."""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "is_inference_mode_enabled"]

# grad mode as set, True under enable_grad inside inference_mode, which records nothing all
# the same (Note [Inference mode] in gradviz_ext/_engine.py)
is_grad_enabled = _engine.grad_mode_enabled


class _GradModeContext:
    """Base: a context manager that is also a decorator."""

    _mode = True

    def __enter__(self):  # returns None, as torch's (``with no_grad() as x``: x is None)
        self._previous = _engine.set_grad_enabled_flag(self._mode)

    def __exit__(self, *exc):
        _engine.set_grad_enabled_flag(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):
    """Disable recording of operations inside the block (or the decorated function)."""

    _mode = False


class enable_grad(_GradModeContext):
    """Enable recording of operations inside the block, even within ``no_grad``."""

    _mode = True


is_inference_mode_enabled = _engine.is_inference_mode_enabled


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: as a function call, a context manager or a decorator."""

    def __init__(self, mode: bool):
        self._mode = bool(mode)
        self._previous = _engine.set_grad_enabled_flag(self._mode)

    def __enter__(self):
        pass  # the mode was set by the constructor, as in torch; returns None

    def __exit__(self, *exc):
        _engine.set_grad_enabled_flag(self._previous)
        return False

    def __call__(self, fn):
        mode = self._mode
        _engine.set_grad_enabled_flag(self._previous)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


# Shown (repr, help, pickling) under the public module, as before they moved into the core layer.
for _public in (no_grad, enable_grad, set_grad_enabled):
    _public.__module__ = "gradviz.autograd.grad_mode"
del _public

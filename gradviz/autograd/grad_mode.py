"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` (context managers and
decorators, like PyTorch's) and ``is_grad_enabled``."""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]

is_grad_enabled = _engine.is_grad_enabled


class _GradModeContext:
    """Base: a context manager that is also a decorator."""

    _mode = True

    def __enter__(self):
        self._previous = _engine.set_grad_enabled_flag(self._mode)
        return self

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


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (gradviz has no separate inference tensors)."""

    _mode = False

    def __init__(self, mode: bool = True):
        self._mode = not mode

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(not mode):
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: as a function call, a context manager or a decorator."""

    def __init__(self, mode: bool):
        self._mode = bool(mode)
        self._previous = _engine.set_grad_enabled_flag(self._mode)

    def __enter__(self):
        return self

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

"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` (context
managers and decorators, like PyTorch's), ``is_grad_enabled`` and
``is_inference_mode_enabled``."""

from __future__ import annotations

import functools
import threading

from gradviz_ext import engine as _engine

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]

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


_inference = threading.local()  # per thread, like torch's InferenceMode guard


def is_inference_mode_enabled() -> bool:
    """Whether the innermost ``inference_mode`` block (of this thread) is on."""
    return getattr(_inference, "enabled", False)


class inference_mode(_GradModeContext):
    """Like ``no_grad``, and ``is_inference_mode_enabled()`` is True inside;
    ``inference_mode(False)`` turns grad mode on and inference mode off (as in torch).

    Unlike torch, gradviz has no separate inference tensors: tensors made inside are normal
    tensors that do not require grad (``Tensor.is_inference()`` is not available).
    """

    _mode = False

    def __init__(self, mode: bool = True):
        self._mode = not mode
        self._enabled = bool(mode)

    def __enter__(self):
        self._previous_inference = is_inference_mode_enabled()
        _inference.enabled = self._enabled
        return super().__enter__()

    def __exit__(self, *exc):
        _inference.enabled = self._previous_inference
        return super().__exit__(*exc)

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

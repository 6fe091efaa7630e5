"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` (context
managers and decorators, like PyTorch's), ``is_grad_enabled`` and
``is_inference_mode_enabled``."""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]

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


class inference_mode(_GradModeContext):
    """Like ``no_grad``, and more: inside, nothing is recorded even under ``enable_grad``,
    ``is_inference_mode_enabled()`` is True, and every tensor made (by any op, and views of
    those) is an *inference tensor*, as in PyTorch. ``inference_mode(False)`` turns grad mode
    on and inference mode off.

    Outside inference mode an inference tensor (``Tensor.is_inference()``) cannot be saved for
    backward, written in place, or made to require grad, and has no ``_version``: each raises
    PyTorch's ``RuntimeError``. ``.clone()`` outside gives a normal tensor. Tensors made
    outside stay normal tensors, even when written in place inside (their ``_version`` counts
    that write). Use ``no_grad`` for values that will later take part in autograd.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.ones(2, requires_grad=True)
    >>> with torch.inference_mode():
    ...     x = torch.ones(2) * 3
    >>> x.is_inference(), (x + w).requires_grad, x.clone().is_inference()
    (True, True, False)
    >>> w * x
    Traceback (most recent call last):
      ...
    RuntimeError: Inference tensors cannot be saved for backward. ...
    """

    _mode = False

    def __init__(self, mode: bool = True):
        self._mode = not mode
        self._enabled = bool(mode)

    def __enter__(self):
        from . import _forward_ad_impl  # imports tensors: not at gradviz's import time

        self._previous_inference = _engine.set_inference_mode_flag(self._enabled)
        # inference mode turns forward AD off too (PyTorch's forward grad mode)
        self._previous_forward = _forward_ad_impl.set_mode_enabled(not self._enabled)
        super().__enter__()

    def __exit__(self, *exc):
        from . import _forward_ad_impl

        _engine.set_inference_mode_flag(self._previous_inference)
        _forward_ad_impl.set_mode_enabled(self._previous_forward)
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

"""Grad modes (``torch.autograd.grad_mode``): ``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``, ``is_grad_enabled`` and ``is_inference_mode_enabled``.

All but ``inference_mode`` are defined in :mod:`gradviz._grad_mode`, in the core layer beside
the engine whose flags they switch, so that the ops layer can use them without importing
autograd. ``inference_mode`` turns forward AD off as well, so it lives here.
"""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine

from .._grad_mode import (
    _GradModeContext,
    enable_grad,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from . import _forward_ad_impl

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]


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
        self._previous_inference = _engine.set_inference_mode_flag(self._enabled)
        # inference mode turns forward AD off too (PyTorch's forward grad mode)
        self._previous_forward = _forward_ad_impl.set_mode_enabled(not self._enabled)
        super().__enter__()

    def __exit__(self, *exc):
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

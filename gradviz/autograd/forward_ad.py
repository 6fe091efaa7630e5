"""``gradviz.autograd.forward_ad``: forward-mode automatic differentiation, as
``torch.autograd.forward_ad``.

Inside a :class:`dual_level`, :func:`make_dual` attaches a tangent to a tensor; every built-in
op and every custom ``Function`` with a ``jvp`` then computes its outputs' tangents, and
:func:`unpack_dual` reads them back. As in PyTorch, only one dual level exists at a time.

How tangents are stored and computed is described in ``gradviz/autograd/_forward_ad_impl.py``
(Notes [Where tangents live] and [Generic JVP from the VJP rule]).

Examples
--------
>>> import gradviz as torch
>>> import gradviz.autograd.forward_ad as fwAD
>>> x = torch.tensor([1.0, 2.0])
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(x, torch.tensor([1.0, 0.0])) ** 2
...     fwAD.unpack_dual(y).tangent
tensor([2., 0.])
"""

from __future__ import annotations

import functools
from collections import namedtuple

from .. import ops
from .._tensor import Tensor
from . import _forward_ad_impl as _impl

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]


def enter_dual_level():
    """Open a dual level and return its index. Levels do not nest (PyTorch's rule).

    Prefer the :class:`dual_level` context manager, which also closes the level.
    """
    return _impl.enter_dual_level()


def exit_dual_level(*, level=None):
    """Close the active dual level (``level``, if given, must be its index); the tangents of
    every tensor at that level are dropped."""
    _impl.exit_dual_level(level=level)


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` that carries ``tangent`` at the active dual level.

    Parameters
    ----------
    tensor : Tensor
        The primal, of a floating-point dtype. It must not already be dual at this level.
    tangent : Tensor
        Its tangent, of a floating-point dtype and the same shape.
    level : int, optional
        The dual level; default the active one.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(torch.tensor(3.0), torch.tensor(1.0))
    ...     fwAD.unpack_dual(d.sin()).tangent.allclose(torch.tensor(3.0).cos())
    True
    """
    active = _impl.current_level()
    if active is None:
        raise RuntimeError(_impl.NO_LEVEL_MESSAGE)
    if level is not None and level != active.index:
        raise RuntimeError("Invalid level given to _make_dual")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"make_dual(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    if not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual(): argument 'tangent' must be Tensor, not {type(tangent).__name__}")
    if not tensor.dtype.is_floating_point:
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not tangent.dtype.is_floating_point:
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if _impl.tangent_of(tensor) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the "
            f"same level {active.index} is not supported."
        )
    _impl.check_tangent_shape(tensor, tangent)
    dual = _alias(tensor)
    _impl.set_tangent(dual, tangent)
    return dual


UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = """What :func:`unpack_dual` returns: ``primal`` (a view of the
tensor without its tangent) and ``tangent`` (None if the tensor is not dual)."""


def unpack_dual(tensor, *, level=None):
    """Split a dual tensor into ``(primal, tangent)``; ``tangent`` is None if it has none.

    The tangent is the tensor object the level holds (the one given to :func:`make_dual`, or
    the one an op computed); the primal is a view of ``tensor`` that carries no tangent.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     primal, tangent = fwAD.unpack_dual(fwAD.make_dual(torch.ones(2), torch.zeros(2)))
    >>> primal, tangent
    (tensor([1., 1.]), tensor([0., 0.]))
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"_unpack_dual(): argument 'dual' (position 1) must be Tensor, not {type(tensor).__name__}")
    active = _impl.current_level()
    tangent = None
    # a custom Function's forward and jvp run with forward AD off: no tangent is visible there
    # (PyTorch's forward grad mode), though make_dual still records one
    if (active is not None and _impl.propagating()
            and (level is None or level == active.index)):
        tangent = _impl.tangent_of(tensor)
    return UnpackedDualTensor(_alias(tensor), tangent)


def _alias(tensor):
    """A view of ``tensor`` with the same shape (``ViewBackward0`` if it requires grad),
    made without tangent propagation."""
    with _impl.suspended():
        return ops.view(tensor, tensor._data.shape)


class dual_level:
    """Context manager (or decorator) for one dual level: tangents live until it exits.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(torch.tensor([2.0]), torch.tensor([1.0]))
    ...     fwAD.unpack_dual(d * d).tangent
    tensor([4.])
    >>> fwAD.unpack_dual(d).tangent is None
    True
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper

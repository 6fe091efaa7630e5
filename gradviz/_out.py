"""The ``out=`` argument of torch's functions (``torch.add(a, b, out=result)``, as in the
PyTorch "Tensors" tutorial): the result is written into ``out``, which is returned.

As in PyTorch: ``out`` keeps its dtype (a result that cannot be cast to it is an error), an
``out`` of another shape is resized (with torch's deprecation warning unless it was empty),
and ``out=`` does not record a graph, so an argument that requires grad is an error while
grad mode is on."""

from __future__ import annotations

import functools
import warnings

from ._grad_mode import is_grad_enabled, no_grad
from ._tensor import TYPE_WORDS, Tensor

__all__ = ["with_out"]


def _tensors(values):
    for value in values:
        if isinstance(value, Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _tensors(value)


def _write(result, out):
    if result.dtype._category > out.dtype._category:
        raise RuntimeError(f"result type {TYPE_WORDS[result.dtype.name]} can't be cast to the desired "
                           f"output type {TYPE_WORDS[out.dtype.name]}")
    with no_grad():
        if tuple(out.shape) != tuple(result.shape):
            if out.numel():
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(out.shape)}, which does not match the required output shape "
                    f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch "
                    "release outputs will not be resized unless they have zero elements. You can "
                    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                    "with t.resize_(0).", UserWarning, stacklevel=3)
            out.data = result.to(out.dtype)
        else:
            out.copy_(result)
    return out


def with_out(fn, name=None):
    """``fn`` taking ``out=`` as well."""
    name = name or fn.__name__

    @functools.wraps(fn)
    def function(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if is_grad_enabled() and any(t.requires_grad for t in _tensors((*args, *kwargs.values(), out))):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        with no_grad():
            result = fn(*args, **kwargs)
        return _write(result, out)

    return function

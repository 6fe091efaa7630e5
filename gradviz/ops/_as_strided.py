"""``as_strided`` and ``Tensor.as_strided_``: a view with the given sizes and strides (in
elements) over the tensor's memory, starting ``storage_offset`` elements into it.

Note [as_strided over a dense tensor]
-------------------------------------
PyTorch measures the strides and the offset in the tensor's storage. gradviz keeps no storage
apart from the numpy arrays, so it takes them in the memory of the tensor itself, which is the
same thing when the tensor is C-contiguous (a fresh tensor, a row block of one): the offset is
counted from the storage's start (the tensor's base), and every element read must lie inside
the tensor. Other layouts (a transposed tensor, a column) are refused with an error that names
the fix (``.contiguous()`` first). The view is one op of the view chain (Note [In-place
semantics] in ``ops/_inplace.py``), so writes through it reach the tensor; when two of its
elements share a memory location, it is read-only and an in-place write raises PyTorch's
error. The gradient of the input adds each element's gradient at the position it reads
(``AsStridedBackward0``).
"""

from __future__ import annotations

import operator

import numpy as np

from gradviz_ext import engine as _engine

from ._inplace_views import _change_view
from ._registry import Op, apply, declare
from ._saved import Attr

__all__ = ["as_strided"]


def _positions(count, size, stride, offset):
    """The flat positions the view reads, shaped like the view."""
    base = np.arange(count, dtype=np.int64)
    if not all(size):
        return np.zeros(size, dtype=np.int64)
    return np.lib.stride_tricks.as_strided(base[offset:], shape=size,
                                           strides=tuple(s * base.itemsize for s in stride))


def _as_strided_forward(a, size, stride, offset, **_):
    flat = a.reshape(-1)
    if not all(size):
        return np.empty(size, dtype=a.dtype)
    view = np.lib.stride_tricks.as_strided(flat[offset:], shape=size,
                                           strides=tuple(s * a.itemsize for s in stride))
    positions = _positions(a.size, size, stride, offset)
    if np.unique(positions).size != positions.size:
        view.flags.writeable = False  # elements that share memory: no in-place writes
    return view


def _scatter_forward(g, size, stride, offset, shape, **_):
    out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=g.dtype)
    np.add.at(out, _positions(out.size, size, stride, offset).ravel(), np.asarray(g).ravel())
    return out.reshape(shape)


def _as_strided_backward(ctx, g):
    return (apply(AS_STRIDED_SCATTER, g, size=ctx.size, stride=ctx.stride, offset=ctx.offset,
                  shape=ctx.shape),)


def _scatter_backward(ctx, g):
    return (apply(AS_STRIDED_READ, g, size=ctx.size, stride=ctx.stride, offset=ctx.offset,
                  shape=ctx.shape),)


_SAVED = {"size": Attr("size", tuple), "stride": Attr("stride", tuple),
          "storage_offset": Attr("storage_offset")}  # as given: None without one
AS_STRIDED = Op("as_strided", "AsStridedBackward0", forward=_as_strided_forward,
                backward=_as_strided_backward, view=True, saved=_SAVED)
AS_STRIDED_INPLACE = Op("as_strided_", "AsStridedBackward1", forward=_as_strided_forward,
                        backward=_as_strided_backward, saved=_SAVED)
# the gradient of the input (each element's gradient added where it reads), and its
# derivative, the same reading as a copy (not a view of the gradient)
AS_STRIDED_SCATTER = Op("as_strided_scatter", "AsStridedScatterBackward0", forward=_scatter_forward,
                        backward=_scatter_backward)
AS_STRIDED_READ = Op("as_strided_read", "AsStridedBackward0",
                     forward=lambda g, **attrs: np.array(_as_strided_forward(g, **attrs)),
                     backward=_as_strided_backward)


def _storage_offset(input):
    """``input``'s first element's position in its base's memory (0 without a base)."""
    base = input._base
    if base is None or input._data.size == 0:
        return 0
    start = input._data.__array_interface__["data"][0]
    return (start - base._data.__array_interface__["data"][0]) // input._data.itemsize


def _geometry(input, size, stride, storage_offset, name):
    """Sizes, strides and the offset from ``input``'s first element, after PyTorch's checks
    and gradviz's (Note [as_strided over a dense tensor])."""
    try:
        size = tuple(operator.index(n) for n in size)
        stride = tuple(operator.index(s) for s in stride)
    except TypeError:
        raise TypeError(f"{name}(): argument 'size' and 'stride' must be tuples of ints") from None
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    if not input._data.flags.c_contiguous:
        raise RuntimeError(f"{name}(): gradviz takes the strides in the memory of a C-contiguous "
                           f"tensor, and this one (shape {list(input.shape)}, strides "
                           f"{list(input.stride())}) is not; call .contiguous() first")
    own = _storage_offset(input)
    offset = own if storage_offset is None else operator.index(storage_offset)
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    if all(size) and (offset < own or needed > own + input._data.size):
        storage = own + input._data.size if input._base is None else input._base._data.size
        if needed > storage or offset < 0:
            raise RuntimeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
                f"and itemsize {input._data.itemsize} requiring a storage size of "
                f"{needed * input._data.itemsize} are out of bounds for storage of size "
                f"{storage * input._data.itemsize}")
        raise RuntimeError(f"{name}(): gradviz reads only the tensor's own elements (positions "
                           f"{own} to {own + input._data.size - 1} of its storage), and this view "
                           f"reaches outside them; call it on the base tensor")
    return size, stride, offset - own


@declare(method=True)
def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input`` with sizes ``size`` and strides ``stride`` (in elements), starting
    ``storage_offset`` elements into its storage. Mirrors ``torch.as_strided`` (Note
    [as_strided over a dense tensor]).

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.arange(5.0).as_strided((3, 3), (1, 1))     # sliding windows of 3
    tensor([[0., 1., 2.],
            [1., 2., 3.],
            [2., 3., 4.]])
    """
    size, stride, offset = _geometry(input, size, stride, storage_offset, "as_strided")
    return apply(AS_STRIDED, input, size=size, stride=stride, offset=offset,
                 storage_offset=storage_offset, shape=tuple(input.shape))


@declare(name=False, method=True)
def as_strided_(self, size, stride, storage_offset=None):
    """``as_strided`` in place: ``self`` takes the sizes and strides. Mirrors
    ``torch.Tensor.as_strided_``."""
    size, stride, offset = _geometry(self, size, stride, storage_offset, "as_strided_")
    if self._base is None and _engine.live_views(self):
        raise RuntimeError("as_strided_(): gradviz cannot re-derive the live views of a tensor "
                           "after as_strided_ changes it; take the views after the call, or use "
                           "as_strided (out of place)")
    attrs = {"size": size, "stride": stride, "offset": offset,
             "storage_offset": storage_offset, "shape": tuple(self.shape)}
    return _change_view(self, AS_STRIDED_INPLACE, AS_STRIDED, attrs, None)


"""``as_strided``: a view of a tensor's memory with the sizes and strides you give, as PyTorch's
(``AsStridedBackward0``). Teaching code builds convolution's windows with it (im2col), where
windows overlap, so the backward adds the gradient of every window element that reads one
input element.

Note [Strided views of a tensor's memory]
-----------------------------------------
PyTorch's ``as_strided`` reads the input's storage: ``storage_offset`` (by default the input's
own) and the strides count elements of that storage. A gradviz tensor's storage is the memory of
the tensor it is a view of (``storage_offset()`` counts from there), so the view is that memory
seen through numpy's strides. gradviz supports the case this op is used for: an input whose own
elements fill a dense block of memory (row-major, or any order of its dimensions) and a view
that reads inside that block; the positions of the view's elements in the block map back to the
input's elements, and the backward adds each view element's gradient there (overlaps add up, as
im2col's windows do). A view reaching memory outside the input's own elements, or an input with
gaps (a sliced tensor), raises NotImplementedError naming the fix (``.contiguous()`` first, or
call it on the base tensor).

A view whose elements overlap (im2col's windows) is read-only: an in-place write into it would
write some memory twice, where torch's result depends on its kernel's order, so gradviz raises
torch's "more than one element of the written-to tensor refers to a single memory location"
error instead of giving a different value. Reading it, and everything out of place, is exact.
"""

from __future__ import annotations

import numpy as np

from ._registry import Op, apply, declare
from ._scatter_add import add_at

__all__ = ["as_strided"]


def _memory_order(data: np.ndarray) -> np.ndarray | None:
    """For each memory position of a dense array, the row-major index of the element there
    (None if the array's elements leave gaps or overlap)."""
    shape, strides = data.shape, [s // data.itemsize if data.itemsize else 0 for s in data.strides]
    expected = 1
    for stride, size in sorted((st, n) for st, n in zip(strides, shape) if n != 1):
        if stride != expected:
            return None
        expected *= size
    if data.flags.c_contiguous:
        return np.arange(data.size)
    grid = np.indices(shape).reshape(len(shape), -1)
    memory_of_element = (np.asarray(strides).reshape(-1, 1) * grid).sum(0)
    order = np.empty(data.size, dtype=np.intp)
    order[memory_of_element] = np.arange(data.size)
    return order


def _flat_memory(data: np.ndarray) -> np.ndarray:
    """The dense array's memory as a 1-D view, in memory order."""
    return np.lib.stride_tricks.as_strided(data, (data.size,), (data.itemsize,))


def _forward(a, size, stride, start, positions, input_size, input_shape, overlapping):
    flat = _flat_memory(a)
    itemsize = a.itemsize
    return np.lib.stride_tricks.as_strided(flat[start:], size, tuple(s * itemsize for s in stride),
                                           writeable=not overlapping)


def _backward(ctx, g):
    from ._creation import tensor, zeros

    index = tensor(ctx.positions.reshape(-1))
    flat = zeros(ctx.input_size, dtype=g.dtype).index_add(0, index, g.reshape(-1))
    return (flat.reshape(ctx.input_shape),)


def _fast_backward(ctx, g):
    out = np.zeros(ctx.attrs["input_size"], dtype=g.dtype)
    add_at(out, ctx.attrs["positions"].reshape(-1), np.ascontiguousarray(g).reshape(-1))
    return (out.reshape(ctx.attrs["input_shape"]),)


AS_STRIDED = Op("as_strided", "AsStridedBackward0", forward=_forward, backward=_backward,
                fast_backward=_fast_backward, view=True)


@declare(method=True)
def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input``'s memory with sizes ``size`` and strides ``stride`` (in elements)
    starting ``storage_offset`` elements into its storage (by default where ``input`` starts).
    Mirrors ``torch.as_strided`` (Note [Strided views of a tensor's memory])."""
    size = tuple(int(n) for n in size)
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    own_offset = input.storage_offset()
    offset = own_offset if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    root = input if input._base is None else input._base
    storage = root.numel()
    itemsize = input._data.itemsize
    needed = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if needed > storage:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
            f"{itemsize} requiring a storage size of {needed * itemsize} are out of bounds for storage of size "
            f"{storage * itemsize}")
    order = _memory_order(input._data)
    start = offset - own_offset
    if order is None:
        raise NotImplementedError(
            "as_strided of a tensor whose elements leave gaps in memory (a sliced view) is not supported by "
            "gradviz: call .contiguous() first, or as_strided on the tensor it is a slice of")
    if 0 not in size and (start < 0 or needed - own_offset > input.numel()):
        raise NotImplementedError(
            "this as_strided view reads memory outside the input's own elements, which gradviz does not "
            "support: call as_strided on the base tensor whose memory it reads")
    memory = np.lib.stride_tricks.as_strided(np.arange(max(input.numel(), 1))[max(start, 0):], size, tuple(
        s * np.dtype(np.intp).itemsize for s in stride)) if 0 not in size else np.zeros(size, dtype=np.intp)
    positions = order[memory] if input.numel() else memory
    overlapping = bool(np.unique(positions).size < positions.size)
    return apply(AS_STRIDED, input, size=size, stride=stride, start=max(start, 0), positions=positions,
                 input_size=input.numel(), input_shape=tuple(input.shape), overlapping=overlapping)

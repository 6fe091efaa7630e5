"""Memory formats (``torch.contiguous_format``, ``channels_last``, ``channels_last_3d``,
``preserve_format``): the ``memory_format=`` argument of ``contiguous``, ``clone``, ``to`` and
the ``*_like`` constructors, and ``is_contiguous(memory_format=...)``.

Note [Memory formats]
---------------------
A gradviz tensor's memory is a numpy array, whose strides can express PyTorch's layouts
exactly: ``channels_last`` is the NCHW shape over NHWC memory (``x.contiguous(
memory_format=torch.channels_last).stride()`` is ``(H*W*C, 1, W*C, C)``, as in torch), so
code that asks for it gets torch's strides, ``is_contiguous()`` false and
``is_contiguous(memory_format=torch.channels_last)`` true. Values never depend on the layout.
``preserve_format``, the default of ``clone`` and the ``*_like`` constructors, keeps the input's
axis order (a transposed tensor's clone is transposed too), except where its axes overlap (an
``expand``): then the result is row-major, as torch's.
"""

from __future__ import annotations

import numpy as np

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


class memory_format:  # noqa: N801 - torch's name
    """A memory layout, as ``torch.memory_format`` (compare with ``is``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"gradviz.{self._name}"

    def __reduce__(self):
        return self._name  # pickles as the module-level singleton


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the axis order of the memory (outermost first) for each channels-last format
_CHANNELS_LAST_ORDER = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check(value, where: str) -> memory_format:
    """``value`` if it is a memory format, else torch's TypeError."""
    if not isinstance(value, memory_format):
        raise TypeError(f"{where}(): argument 'memory_format' must be torch.memory_format, not "
                        f"{type(value).__name__}")
    return value


def _channels_last_order(array: np.ndarray, format: memory_format) -> tuple[int, ...]:
    rank, order = _CHANNELS_LAST_ORDER[format]
    if array.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {format._name} format")
    return order


def relayout(array: np.ndarray, format: memory_format) -> np.ndarray:
    """A copy of ``array`` in ``format``'s memory layout (``preserve_format``: the array's own
    layout where it is dense, as torch's ``clone``)."""
    if format is contiguous_format:
        return np.array(array, order="C")
    if format is preserve_format:
        return preserved_copy(array)
    order = _channels_last_order(array, format)
    inverse = tuple(int(i) for i in np.argsort(order))
    return np.ascontiguousarray(array.transpose(order)).transpose(inverse)


def preserved_copy(array: np.ndarray) -> np.ndarray:
    """A copy in ``array``'s own axis order (its strides sorted, made dense: numpy's
    ``order="K"``), or row-major if axes overlap (a stride of 0 over a size above 1, as an
    ``expand``), as torch's ``preserve_format``; of no elements, with ``array``'s strides."""
    if array.size == 0:
        return with_strides_of(array.copy(), array)
    overlapping = any(stride == 0 and size > 1 for stride, size in zip(array.strides, array.shape))
    return array.copy(order="C" if overlapping else "K")


def with_strides_of(array: np.ndarray, source: np.ndarray) -> np.ndarray:
    """``array`` (of no elements, shaped like ``source``) viewed with ``source``'s strides in
    elements, as PyTorch's ``preserve_format`` and its conversions from numpy keep an empty
    tensor's strides, whatever they are (it counts every empty tensor as dense; Note [Empty
    tensors' strides] in gradviz_ext/_ops.py); ``array`` itself where ``source`` has a
    negative stride (a numpy flip), which no tensor has."""
    if min(source.strides, default=0) < 0:
        return array
    strides = tuple(stride // source.itemsize * array.itemsize for stride in source.strides)
    return np.lib.stride_tricks.as_strided(array, source.shape, strides)


def is_laid_out(array: np.ndarray, format: memory_format) -> bool:
    """Whether ``array``'s strides are ``format``'s dense layout (sizes of 1 may have any
    stride, as torch decides)."""
    if format is contiguous_format or format is preserve_format:
        return bool(array.flags.c_contiguous)
    rank, order = _CHANNELS_LAST_ORDER[format]
    if array.ndim != rank:
        return False
    expected = 1
    for axis in reversed(order):
        size = array.shape[axis]
        if size != 1 and array.strides[axis] != expected * array.itemsize:
            return False
        expected *= size
    return True


def like(out: np.ndarray, input: np.ndarray, format: memory_format | None) -> np.ndarray:
    """``out`` (row-major, shaped like ``input``) in the layout a ``*_like`` constructor gives:
    ``preserve_format`` (the default) keeps ``input``'s axis order unless its axes overlap."""
    format = preserve_format if format is None else check(format, "empty_like")
    if format is contiguous_format:
        return out
    if format is not preserve_format:
        return relayout(out, format)
    if input.size == 0:
        return with_strides_of(out, input)
    overlapping = any(stride == 0 and size > 1 for stride, size in zip(input.strides, input.shape))
    if input.flags.c_contiguous or overlapping:
        return out
    result = np.empty_like(input, dtype=out.dtype, order="K")
    result[...] = out
    return result

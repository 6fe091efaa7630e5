"""Lookups and integer helpers, not differentiable, as in PyTorch: ``searchsorted``,
``bucketize``, ``isin``, ``unique_consecutive``, ``broadcast_shapes``, ``gcd``, ``lcm``."""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Size, Tensor, _wrap, install_methods
from ._pointwise import _broadcasting
from ._registry import Op, apply, declare, exports, promote


def _array(value):
    return value._data if isinstance(value, Tensor) else np.asarray(value)


def _side(right, side):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        return side
    return "right" if right else "left"


@declare()
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Where each value of ``input`` would go in ``sorted_sequence`` (sorted along its last
    dim) to keep it sorted: the first such place, or the last with ``right=True``. A sequence
    of more than one dim is searched row by row, matching ``input``'s leading dims."""
    side = _side(right, side)
    sequence = sorted_sequence._data
    if sorter is not None:
        sequence = np.take_along_axis(sequence, sorter._data, axis=-1)
    values = _array(input)
    out_dtype = np.int32 if out_int32 else np.int64
    if sequence.ndim <= 1:
        return _wrap(np.asarray(np.searchsorted(sequence, values, side=side), dtype=out_dtype))
    if values.ndim == 0 or sequence.shape[:-1] != values.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(sequence.shape)} and input value tensor "
            f"{list(values.shape)}")
    rows = sequence.reshape(-1, sequence.shape[-1])
    wanted = values.reshape(-1, values.shape[-1])
    found = np.stack([np.searchsorted(row, want, side=side) for row, want in zip(rows, wanted)])
    return _wrap(found.reshape(values.shape).astype(out_dtype))


@declare()
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` between the sorted 1-D ``boundaries``:
    ``boundaries[i-1] < x <= boundaries[i]`` (``<=`` and ``<`` swapped with ``right=True``)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@declare()
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each entry of ``elements`` occurs in ``test_elements`` (a bool tensor shaped
    like ``elements``; either may be a number)."""
    found = np.isin(_array(elements), _array(test_elements), invert=invert)
    return _wrap(np.asarray(found, dtype=bool))


@declare(method=True)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive values (or slices along ``dim``) kept
    once; with ``return_inverse``, the run of each entry; with ``return_counts``, run lengths."""
    data = input._data
    if dim is None:
        flat = data.reshape(-1)
        starts = np.flatnonzero(np.concatenate([[True], flat[1:] != flat[:-1]])) if flat.size \
            else np.zeros(0, dtype=np.int64)
        values = flat[starts]
        inverse = (np.cumsum(np.concatenate([[True], flat[1:] != flat[:-1]])) - 1).reshape(
            data.shape) if flat.size else np.zeros(data.shape, dtype=np.int64)
    else:
        axis = dim % data.ndim
        moved = np.moveaxis(data, axis, 0)
        changed = [True] + [not np.array_equal(moved[i], moved[i - 1]) for i in range(1, len(moved))]
        starts = np.flatnonzero(changed)
        values = np.moveaxis(moved[starts], 0, axis)
        inverse = np.cumsum(changed) - 1
    counts = np.diff(np.append(starts, data.size if dim is None else data.shape[dim % data.ndim]))
    result = [_wrap(np.ascontiguousarray(values))]
    if return_inverse:
        result.append(_wrap(np.asarray(inverse, dtype=np.int64)))
    if return_counts:
        result.append(_wrap(counts.astype(np.int64)))
    return result[0] if len(result) == 1 else tuple(result)


@declare()
def broadcast_shapes(*shapes):
    """The shape tensors of ``shapes`` broadcast to, as a ``Size``."""
    result = []
    for i, shape in enumerate(shapes):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) > len(result):
            result = [1] * (len(shape) - len(result)) + result
        for back in range(1, len(shape) + 1):
            size = shape[-back]
            if size != 1 and result[-back] not in (1, size):
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {size} at -{back}! "
                    f"Mismatching argument at index {i} had {shape}; but expected shape should "
                    f"be broadcastable to {result}")
            if size != 1:
                result[-back] = size
    return Size(result)


def _integer_op(name, ufunc):
    op = Op(name, name, forward=_broadcasting(ufunc), backward=None, dtype=promote)

    def function(input, other):
        for t in (input, other):
            if isinstance(t, Tensor) and (t.dtype.is_floating_point or t.dtype is _dtypes.bool):
                raise NotImplementedError(
                    f"\"{name}_cpu\" not implemented for '{TYPE_WORDS[t.dtype.name]}'")
        return apply(op, input, other)

    function.__name__ = name
    meaning = "greatest common divisor" if name == "gcd" else "least common multiple"
    function.__doc__ = f"The elementwise {meaning} of integer tensors."
    return function


gcd = _integer_op("gcd", np.gcd)
declare(method=True)(gcd)
lcm = _integer_op("lcm", np.lcm)
declare(method=True)(lcm)


# ---- dtype and value predicates ------------------------------------------------------------------

@declare()
def result_type(tensor1, tensor2):
    """The dtype an op of ``tensor1`` and ``tensor2`` (tensors or numbers) computes in."""
    return _dtypes.result_type(tensor1, tensor2)


@declare()
def scalar_tensor(s, *, dtype=None, **kwargs):
    """A 0-d tensor of the number ``s``, in the default float dtype unless ``dtype`` says."""
    target = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    return _wrap(np.asarray(s, dtype=target.numpy))


@declare(method=True)
def is_nonzero(input):
    """Whether the single value of ``input`` is nonzero (an error for more than one value)."""
    if input.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if input.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input._data.reshape(-1)[0])


@declare(method=True)
def is_signed(input):
    """Whether ``input``'s dtype is a signed type (floats and signed integers).

    Mirrors ``torch.is_signed``."""
    return input.dtype is not _dtypes.uint8 and input.dtype is not _dtypes.bool


@declare(method=True)
def is_complex(input):
    """Always False: gradviz has no complex dtypes."""
    return False


@declare()
def real(input):
    """``input`` itself: a real tensor is its own real part."""
    return input


_IDENTITIES = ("conj", "resolve_conj", "resolve_neg")
_NO_BITS = ("is_conj", "is_neg")


@declare(name=_IDENTITIES, method=_IDENTITIES)
def conj(input):
    """``input`` itself (``conj``, ``resolve_conj``, ``resolve_neg``): a real tensor is its own
    conjugate, and gradviz has no lazy conjugate or negation bit to materialize (as in torch,
    the same tensor)."""
    return input


@declare(name=_NO_BITS, method=_NO_BITS)
def is_conj(input):
    """Always False (``is_conj``, ``is_neg``): gradviz has no lazy conjugate or negation bit."""
    return False


resolve_conj = resolve_neg = conj
is_neg = is_conj


@declare(name=False, method=True)
def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


@declare(name=False, method=True)
def data_ptr(input):
    """The address of the first element (views of one tensor differ by their offset)."""
    return int(input._data.__array_interface__["data"][0])


@declare(name=False, method=True)
def storage_offset(input):
    """How many elements into its base's memory this tensor starts (0 unless a view)."""
    root = input if input._base is None else input._base
    start = root._data.__array_interface__["data"][0]
    return (data_ptr(input) - start) // input._data.itemsize


install_methods({
    "real": property(real),
})


__all__ = exports(globals())

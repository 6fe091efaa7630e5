"""Max unpooling: the partial inverse of ``max_pool2d``/``max_pool3d`` with ``return_indices``.

Each input value goes to the position its index names in its (N, C) plane of a zero output of
``output_size``; the gradient of the input is the output gradient read back at those
positions (PyTorch's ``MaxUnpool2DBackward0``/``MaxUnpool3DBackward0``, which save only the
indices). The backward rule is a ``gather``, so it differentiates again.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor
from ._indexing import gather
from ._registry import Op, apply
from ._saved import Computed, tensor_attr
from ._shape import reshape

__all__: list[str] = []


def _unpool_forward(x, indices, output_size, **_):
    planes = x.shape[:-len(output_size)]
    flat_x = x.reshape(planes + (-1,))
    flat_indices = indices.reshape(planes + (-1,))
    out = np.zeros(planes + (int(np.prod(output_size)),), dtype=x.dtype)
    np.put_along_axis(out, flat_indices, flat_x, axis=-1)
    return out.reshape(planes + tuple(output_size))


def _unpool_backward(ctx, g):
    spatial = len(ctx.output_size)
    planes = tuple(g.shape[:-spatial])
    flat_g = reshape(g, planes + (-1,))
    flat_indices = reshape(ctx.indices_tensor, planes + (-1,))
    return (reshape(gather(flat_g, len(planes), flat_indices), tuple(ctx.indices_tensor.shape)),)


MAX_UNPOOL2D = Op("max_unpool2d", "MaxUnpool2DBackward0", forward=_unpool_forward,
                  backward=_unpool_backward,
                  saved={"indices": Computed(tensor_attr("indices_tensor"))})
MAX_UNPOOL3D = Op("max_unpool3d", "MaxUnpool3DBackward0", forward=_unpool_forward,
                  backward=_unpool_backward,
                  saved={"indices": Computed(tensor_attr("indices_tensor"))})


def max_unpool(input, indices, output_size):
    """``input`` spread into zeros of ``output_size`` (2 or 3 spatial sizes) at ``indices``
    (flat positions within each plane), with PyTorch's checks of ``max_unpooling2d/3d``."""
    spatial = len(output_size)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Input to max_unpooling{spatial}d should be a {spatial + 1}d or "
                           f"{spatial + 2}d Tensor, but got a tensor with {input.ndim} dimensions.")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"max_unpool{spatial}d" not implemented for '
                                  f"'{TYPE_WORDS[input.dtype.name]}'")
    if not isinstance(indices, Tensor) or indices.dtype is not _dtypes.int64:
        got = TYPE_WORDS[indices.dtype.name] if isinstance(indices, Tensor) else type(indices).__name__
        raise RuntimeError(f"elements in indices should be type int64 but got: {got}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    size = int(np.prod(output_size))
    positions = indices._data
    bad = positions[(positions < 0) | (positions >= size)]
    if bad.size:
        # PyTorch's kernel reports the last invalid index it meets
        raise RuntimeError(f"Found an invalid max index: {int(bad.reshape(-1)[-1])} (output volumes "
                           f"are of size {'x'.join(str(n) for n in output_size)})")
    op = MAX_UNPOOL2D if spatial == 2 else MAX_UNPOOL3D
    return apply(op, input, indices=positions, indices_tensor=indices,
                 output_size=tuple(int(n) for n in output_size))

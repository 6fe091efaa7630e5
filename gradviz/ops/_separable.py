"""Separable linear resampling: an (out, in) matrix per trailing spatial dim, applied one dim
after another. Adaptive average pooling 3-D (``AdaptiveAvgPool3DBackward0``) and 2-D with
sizes that do not divide (``AdaptiveAvgPool2DBackward0``), with torch's overlapping bins, and
bicubic up-sampling (``UpsampleBicubic2DBackward0``, torch's cubic-convolution weights) are
such maps, each one op and one node as in torch.

The forward multiplies numpy arrays; the backward applies each matrix transposed (the map's
adjoint) with ``matmul`` and ``movedim`` (Note [Backward rules are differentiable]), so the
gradient differentiates again.
"""

from __future__ import annotations

import numpy as np

from .._tensor import _wrap
from ._compose import movedim
from ._conv import _tied
from ._linalg import matmul
from ._registry import Op, apply, promote_float, saves_inputs
from ._saved import SELF, Attr, Computed

__all__ = ["adaptive_avg_pool2d", "adaptive_avg_pool3d", "upsample_bicubic2d"]


def _forward(x, matrices, np_dtype, **_):
    out = x
    first = x.ndim - len(matrices)
    for axis, matrix in enumerate(matrices):
        dim = first + axis
        out = np.moveaxis(np.moveaxis(out, dim, -1) @ matrix.T.astype(x.dtype), -1, dim)
    return np.ascontiguousarray(out)


def _adjoint(ctx, g):
    out = g
    first = g.ndim - len(ctx.matrices)
    for axis, matrix in enumerate(ctx.matrices):
        dim = first + axis
        out = movedim(matmul(movedim(out, dim, -1), _wrap(matrix.astype(ctx.np_dtype))), -1, dim)
    return out


# torch's backward of both takes the gradient alone (adaptive pooling's also the input, for its
# shape): a first gradient never requires grad through them
def _adaptive_2d_backward(ctx, g):
    # torch's 2-D backward kernel takes the input, and its derivative there is zeros_like(self):
    # under create_graph the gradient requires grad when the input does (unlike the 3-D one)
    return (_tied(_adjoint(ctx, g), ctx.input(0)),)


ADAPTIVE_AVG_POOL2D_BINS = Op("adaptive_avg_pool2d_bins", "AdaptiveAvgPool2DBackward0",
                              forward=_forward, backward=_adaptive_2d_backward,
                              saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})
ADAPTIVE_AVG_POOL3D = Op("adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0", forward=_forward,
                         backward=lambda ctx, g: (_adjoint(ctx, g),), saves=saves_inputs(0),
                         dtype=promote_float, saved={"self": SELF})
UPSAMPLE_BICUBIC2D = Op("upsample_bicubic2d", "UpsampleBicubic2DBackward0", forward=_forward,
                        backward=lambda ctx, g: (_adjoint(ctx, g),), dtype=promote_float,
                        saved={
                            "align_corners": Attr("align_corners"), "output_size": Attr("output_size"),
                            "scales_h": Computed(lambda node: node.attrs["scales"][0]),
                            "scales_w": Computed(lambda node: node.attrs["scales"][1]),
                            "self_sym_sizes": Attr("input_sizes"),
                        })


def _averaging_matrix(n, m):
    """(m, n): row i averages torch's adaptive bin ``floor(i n / m) .. ceil((i + 1) n / m)``."""
    matrix = np.zeros((m, n))
    for i in range(m):
        start, end = (i * n) // m, -((-(i + 1) * n) // m)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def adaptive_avg_pool2d(input, sizes):
    """Average pooling of the last two dims of ``input`` to ``sizes`` with torch's bins, which
    overlap when an input size is not a multiple of the output size."""
    matrices = tuple(_averaging_matrix(n, m) for n, m in zip(input.shape[-2:], sizes))
    return apply(ADAPTIVE_AVG_POOL2D_BINS, input, matrices=matrices,
                 np_dtype=input.numpy(force=True).dtype)


def adaptive_avg_pool3d(input, sizes):
    """Average pooling of the last three dims of ``input`` to ``sizes`` with torch's bins."""
    matrices = tuple(_averaging_matrix(n, m) for n, m in zip(input.shape[-3:], sizes))
    return apply(ADAPTIVE_AVG_POOL3D, input, matrices=matrices,
                 np_dtype=input.numpy(force=True).dtype)


def upsample_bicubic2d(input, matrices, **arguments):
    """(N, C, H, W) ``input`` resized by the (out, in) bicubic weight ``matrices`` of H and W
    (float64 numpy arrays); ``arguments`` (``output_size``, ``scales``, ``align_corners``) are
    kept for the node's saved values."""
    return apply(UPSAMPLE_BICUBIC2D, input, matrices=tuple(matrices),
                 np_dtype=input.numpy(force=True).dtype, input_sizes=tuple(input.shape),
                 **arguments)

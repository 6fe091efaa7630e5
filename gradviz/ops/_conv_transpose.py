"""Transposed convolution: ``conv_transpose2d`` and ``conv_transpose1d``, one
``ConvolutionBackward0`` node each, as in torch (which records its transposed convolution as
the same ``convolution`` op with ``transposed=True``).

A transposed convolution is the adjoint of a convolution: each input pixel spreads
``weight[c_in, c_out]`` times itself over its window of the (cropped) output, which is
``col2im`` of ``weight^T @ input``. Its backward is therefore a convolution again: the
gradient's sliding blocks (``unfold``, ``Im2ColBackward0``) against the weight, written with
``unfold``, ``matmul`` and ``reshape`` (Note [Backward rules are differentiable]), so it
differentiates any number of times. Groups split the channels into independent blocks, done as
one batched ``matmul`` over a group dim.
"""

from __future__ import annotations

import numpy as np

from ._conv import _bias_sizes, _Geometry, _requiring_grad, check_dtypes, unfold
from ._linalg import matmul
from ._reduction import sum
from ._registry import Op, apply, promote_float, saves_inputs
from ._shape import getitem, reshape, squeeze_dim, transpose, unsqueeze

__all__ = ["conv_transpose1d", "conv_transpose2d"]


class _TransposedGeometry(_Geometry):
    """A convolution's window geometry plus the transposed convolution's ``output_padding``
    (extra rows and columns on the bottom and right of the output) and ``groups``."""

    __slots__ = ("output_padding", "groups")

    def __init__(self, kernel, dilation, padding, stride, output_padding, groups):
        super().__init__(kernel, dilation, padding, stride)
        self.output_padding = tuple(output_padding)
        self.groups = groups

    def full(self, height, width):
        """The uncropped output frame: every window of every input pixel, plus output_padding."""
        return tuple((n - 1) * s + d * (k - 1) + 1 + op for n, s, d, k, op in zip(
            (height, width), self.stride, self.dilation, self.kernel, self.output_padding))

    def output(self, height, width):
        return tuple(f - 2 * p for f, p in zip(self.full(height, width), self.padding))


def _conv_transpose2d_forward(x, weight, bias, geometry, bias_sizes=None):
    n, c_in, height, width = x.shape
    groups = geometry.groups
    (kh, kw), (dh, dw), (sh, sw) = geometry.kernel, geometry.dilation, geometry.stride
    c_out = weight.shape[1] * groups
    # cols[n, g, (c_out, i, j), pixel] = sum over the group's c_in of weight * x
    grouped_w = weight.reshape(groups, c_in // groups, -1).transpose(0, 2, 1)
    cols = np.matmul(grouped_w, x.reshape(n, groups, c_in // groups, height * width))
    cols = cols.reshape(n, c_out, kh, kw, height, width)
    full_h, full_w = geometry.full(height, width)
    out = np.zeros((n, c_out, full_h, full_w), dtype=np.result_type(x, weight))
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (height - 1) + 1:sh,
                j * dw:j * dw + sw * (width - 1) + 1:sw] += cols[:, :, i, j]
    ph, pw = geometry.padding
    out = out[:, :, ph:full_h - ph, pw:full_w - pw]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(out, dtype=x.dtype)


def _transposed_grads(ctx, x, weight, g):
    """The gradients of a 2-D transposed convolution's input, weight and bias."""
    geometry = ctx.geometry
    groups = geometry.groups
    n, c_in, height, width = x.shape
    # the gradient's blocks at the input's pixels (more blocks fit when output_padding >= stride)
    blocks = unfold(g, geometry)
    rows_fit, cols_fit = geometry.blocks(g.shape[2], g.shape[3])
    if (rows_fit, cols_fit) != (height, width):
        blocks = reshape(blocks, (n, blocks.shape[1], rows_fit, cols_fit))
        blocks = reshape(getitem(blocks, (slice(None), slice(None), slice(0, height),
                                          slice(0, width))), (n, blocks.shape[1], height * width))
    # explicit sizes: n may be 0
    blocks = reshape(blocks, (n, groups, blocks.shape[1] // groups, height * width))  # (N, G, K, L)
    grouped_w = reshape(weight, (groups, c_in // groups, -1))      # (G, C_in/G, K)
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = reshape(matmul(grouped_w, blocks), tuple(x.shape))
        grad_x = _requiring_grad(grad_x, x, weight)
    if ctx.needs_input_grad[1]:
        grouped_x = reshape(x, (n, groups, c_in // groups, height * width))
        grad_w = reshape(sum(matmul(grouped_x, transpose(blocks, 2, 3)), 0), tuple(weight.shape))
        grad_w = _requiring_grad(grad_w, x, weight)
    if ctx.needs_input_grad[2]:
        grad_b = _requiring_grad(sum(g, (0, 2, 3)), x, weight)
    return grad_x, grad_w, grad_b


def _conv_transpose2d_backward(ctx, g):
    return _transposed_grads(ctx, ctx.input(0), ctx.input(1), g)


def _conv_transpose1d_backward(ctx, g):
    """A 1-D transposed convolution is a 2-D one over (1, L): the same rule, unsqueezed."""
    grad_x, grad_w, grad_b = _transposed_grads(
        ctx, unsqueeze(ctx.input(0), 2), unsqueeze(ctx.input(1), 2), unsqueeze(g, 2))
    return (None if grad_x is None else squeeze_dim(grad_x, 2),
            None if grad_w is None else squeeze_dim(grad_w, 2), grad_b)


CONV_TRANSPOSE2D = Op("conv_transpose2d", "ConvolutionBackward0",
                      forward=_conv_transpose2d_forward, backward=_conv_transpose2d_backward,
                      saves=saves_inputs(0, 1), dtype=promote_float)
CONV_TRANSPOSE1D = Op("conv_transpose1d", "ConvolutionBackward0",
                      forward=lambda x, weight, bias, geometry, **_: _conv_transpose2d_forward(
                          x[:, :, None, :], weight[:, :, None, :], bias, geometry)[:, :, 0, :],
                      backward=_conv_transpose1d_backward, saves=saves_inputs(0, 1),
                      dtype=promote_float)


def conv_transpose2d(input, weight, bias, geometry):
    """Transposed convolution of (N, C_in, H, W) ``input`` with (C_in, C_out/groups, kh, kw)
    ``weight`` (``geometry``: a :class:`_TransposedGeometry`)."""
    check_dtypes(input, weight, bias, transposed=True)
    return apply(CONV_TRANSPOSE2D, input, weight, bias, geometry=geometry,
                 bias_sizes=_bias_sizes(bias))


def conv_transpose1d(input, weight, bias, geometry):
    """Transposed convolution of (N, C_in, L) ``input`` with (C_in, C_out/groups, k) ``weight``
    (``geometry`` over (1, L))."""
    check_dtypes(input, weight, bias, transposed=True)
    return apply(CONV_TRANSPOSE1D, input, weight, bias, geometry=geometry,
                 bias_sizes=_bias_sizes(bias))

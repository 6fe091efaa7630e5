"""Convolution and pooling: ``unfold``/``fold`` (``Im2ColBackward0``/``Col2ImBackward0``,
each the other's adjoint), ``conv2d`` and ``conv1d`` (``ConvolutionBackward0``), ``max_pool2d``
(``MaxPool2DWithIndicesBackward0``) and ``avg_pool2d`` (``AvgPool2DBackward0``).

The forwards run on numpy windows; every backward rule is written with ``unfold``, ``fold``,
``matmul`` and the other differentiable ops (Note [Backward rules are differentiable]), so a
convolution differentiates any number of times.
"""

from __future__ import annotations

import numpy as np

from .._tensor import C_TYPE_NAMES, TYPE_WORDS
from ._indexing import scatter_add
from ._linalg import matmul
from ._reduction import sum
from ._registry import Op, apply, promote_float, saves_inputs
from ._shape import expand, reshape, squeeze_dim, transpose, unsqueeze

__all__ = ["unfold", "fold", "conv1d", "conv2d", "max_pool2d", "avg_pool2d"]


def _pair(value, name="kernel_size"):
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) == 1:
        return value * 2
    return value


def _output_size(size, kernel, dilation, padding, stride):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


class _Geometry:
    """Kernel, dilation, padding and stride of a 2-D window, and the sizes they give."""

    __slots__ = ("kernel", "dilation", "padding", "stride")

    def __init__(self, kernel, dilation, padding, stride):
        self.kernel, self.dilation = _pair(kernel), _pair(dilation)
        self.padding, self.stride = _pair(padding), _pair(stride)

    def blocks(self, height, width):
        return tuple(_output_size(n, k, d, p, s) for n, k, d, p, s in zip(
            (height, width), self.kernel, self.dilation, self.padding, self.stride))


def _windows(x, geometry, fill=0.0):
    """(N, C, kh, kw, oh, ow): each kernel offset's view of the padded input."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (geometry.kernel, geometry.dilation,
                                              geometry.padding, geometry.stride)
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh, ow = geometry.blocks(x.shape[2] - 2 * ph, x.shape[3] - 2 * pw)
    out = np.empty(x.shape[:2] + (kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i, j] = x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                j * dw:j * dw + sw * (ow - 1) + 1:sw]
    return out


def _im2col(x, geometry):
    windows = _windows(x, geometry)
    n, c, kh, kw, oh, ow = windows.shape
    return windows.reshape(n, c * kh * kw, oh * ow)


def _col2im(cols, output_size, geometry):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (geometry.kernel, geometry.dilation,
                                              geometry.padding, geometry.stride)
    height, width = output_size
    oh, ow = geometry.blocks(height, width)
    n = cols.shape[0]
    c = cols.shape[1] // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, height + 2 * ph, width + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += blocks[:, :, i, j]
    return out[:, :, ph:ph + height, pw:pw + width]


def _tied(grad, *inputs):
    """``grad``, made to depend (with a zero derivative) on ``inputs`` when the backward is
    recorded: torch's convolution and pooling backward kernels take the forward's inputs, so
    under ``create_graph`` their results require grad whenever those inputs do, even where the
    gradient is constant in them (``max_pool2d(x) * 3``)."""
    from gradviz_ext import engine

    from ._pointwise import where_zero

    if not engine.is_grad_enabled():
        return grad
    for t in inputs:
        if t is not None and t.requires_grad:
            everywhere = _wrap_array(np.ones(t.shape, dtype=bool))
            grad = grad + sum(where_zero(everywhere, t))
    return grad


def _wrap_array(array):
    from .._tensor import _wrap

    return _wrap(array)


# ---- unfold / fold ------------------------------------------------------------------------------

IM2COL = Op("im2col", "Im2ColBackward0",
            forward=lambda x, geometry, size: _im2col(x, geometry),
            backward=lambda ctx, g: (fold(g, ctx.size, ctx.geometry),))
COL2IM = Op("col2im", "Col2ImBackward0",
            forward=lambda cols, geometry, size: _col2im(cols, size, geometry),
            backward=lambda ctx, g: (unfold(g, ctx.geometry),))


def unfold(input, geometry):
    """(N, C, H, W) -> (N, C*kh*kw, L): the sliding blocks as columns (im2col)."""
    return apply(IM2COL, input, geometry=geometry, size=tuple(input.shape[2:]))


def fold(input, output_size, geometry):
    """(N, C*kh*kw, L) -> (N, C, H, W): columns summed back into place (col2im)."""
    return apply(COL2IM, input, geometry=geometry, size=tuple(output_size))


# ---- conv2d ----------------------------------------------------------------------------------

def _conv2d_forward(x, weight, bias, geometry):
    n = x.shape[0]
    out_channels = weight.shape[0]
    oh, ow = geometry.blocks(x.shape[2], x.shape[3])
    cols = _im2col(x, geometry)
    out = np.matmul(weight.reshape(out_channels, -1), cols)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1)
    return out.reshape(n, out_channels, oh, ow).astype(x.dtype, copy=False)


def _convolution_grads(ctx, x, weight, g):
    """The gradients of a 2-D convolution's input, weight and bias (None where not needed)."""
    n, out_channels = g.shape[0], g.shape[1]
    flat_g = reshape(g, (n, out_channels, -1))
    flat_w = reshape(weight, (out_channels, -1))
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = fold(matmul(transpose(flat_w, 0, 1), flat_g), tuple(x.shape[2:]), ctx.geometry)
        grad_x = _tied(grad_x, x)
    if ctx.needs_input_grad[1]:
        grad_w = reshape(sum(matmul(flat_g, transpose(unfold(x, ctx.geometry), 1, 2)), 0),
                         tuple(weight.shape))
        grad_w = _tied(grad_w, weight)
    if ctx.needs_input_grad[2]:
        grad_b = sum(g, (0, 2, 3))
    return grad_x, grad_w, grad_b


def _conv2d_backward(ctx, g):
    return _convolution_grads(ctx, ctx.input(0), ctx.input(1), g)


def _conv1d_backward(ctx, g):
    """A 1-D convolution is a 2-D one over (1, L): the same rule on unsqueezed tensors."""
    grad_x, grad_w, grad_b = _convolution_grads(
        ctx, unsqueeze(ctx.input(0), 2), unsqueeze(ctx.input(1), 2), unsqueeze(g, 2))
    return (None if grad_x is None else squeeze_dim(grad_x, 2),
            None if grad_w is None else squeeze_dim(grad_w, 2), grad_b)


CONV2D = Op("conv2d", "ConvolutionBackward0", forward=_conv2d_forward, backward=_conv2d_backward,
            saves=saves_inputs(0, 1), dtype=promote_float)


CONV1D = Op("conv1d", "ConvolutionBackward0",
            forward=lambda x, weight, bias, geometry: _conv2d_forward(
                x[:, :, None, :], weight[:, :, None, :], bias, geometry)[:, :, 0, :],
            backward=_conv1d_backward, saves=saves_inputs(0, 1), dtype=promote_float)


def check_dtypes(input, weight, bias, transposed=False):
    """torch's errors for a convolution whose operands differ in dtype (a float64 batch from
    numpy into a float32 model is the classic): it computes in one dtype, it does not promote.
    A transposed convolution checks the weight only, as torch does."""
    dtype = input._data.dtype
    if not transposed and bias is not None and bias._data.dtype != dtype:
        raise RuntimeError(f"Input type ({C_TYPE_NAMES[input.dtype.name]}) and bias type "
                           f"({C_TYPE_NAMES[bias.dtype.name]}) should be the same")
    if weight._data.dtype != dtype:
        raise RuntimeError(f"expected scalar type {TYPE_WORDS[input.dtype.name]} but found "
                           f"{TYPE_WORDS[weight.dtype.name]}")


def conv2d(input, weight, bias, geometry):
    """Cross-correlation of (N, C, H, W) ``input`` with (O, C, kh, kw) ``weight``."""
    check_dtypes(input, weight, bias)
    return apply(CONV2D, input, weight, bias, geometry=geometry)


def conv1d(input, weight, bias, geometry):
    """Cross-correlation of (N, C, L) ``input`` with (O, C, k) ``weight`` (``geometry`` over
    (1, L))."""
    check_dtypes(input, weight, bias)
    return apply(CONV1D, input, weight, bias, geometry=geometry)


# ---- pooling ----------------------------------------------------------------------------------

def _pool_windows(x, geometry, fill):
    """(N, C, kh*kw, L): each block's values, padded with ``fill``."""
    windows = _windows(x, geometry, fill)
    n, c, kh, kw, oh, ow = windows.shape
    return windows.reshape(n, c, kh * kw, oh * ow)


def _spread(ctx, cols):
    """(N, C, kh*kw, L) gradients of the blocks back onto the input (N, C, H, W)."""
    n, c = cols.shape[0], cols.shape[1]
    return fold(reshape(cols, (n, c * cols.shape[2], -1)), ctx.size, ctx.geometry)


def _max_pool_backward(ctx, g):
    from .._tensor import _wrap
    from ._creation import zeros

    n, c, kk = ctx.indices.shape[0], ctx.indices.shape[1], ctx.kernel_area
    flat_g = unsqueeze(reshape(g, (n, c, -1)), 2)
    cols = scatter_add(zeros((n, c, kk, flat_g.shape[3]), dtype=g.dtype), 2,
                       _wrap(ctx.indices), flat_g)
    return (_tied(_spread(ctx, cols), ctx.input(0)),)


MAX_POOL2D = Op("max_pool2d", "MaxPool2DWithIndicesBackward0",
                forward=lambda x, values, **_: values, backward=_max_pool_backward,
                saves=saves_inputs(0))


def max_pool2d(input, geometry):
    """The maximum of each block (the gradient to the first maximum, as in torch); also the
    flat input index of each maximum, as torch's ``return_indices`` gives it."""
    x = input._data
    windows = _pool_windows(x, geometry, -np.inf)
    indices = np.argmax(windows, axis=2)[:, :, None, :]
    height, width = x.shape[2:]
    oh, ow = geometry.blocks(height, width)
    values = np.take_along_axis(windows, indices, axis=2).reshape(x.shape[:2] + (oh, ow))
    out = apply(MAX_POOL2D, input, values=values, geometry=geometry, indices=indices,
                size=(height, width), kernel_area=windows.shape[2])
    # the flat index (row * W + col) of each maximum in its input plane
    kw = geometry.kernel[1]
    ki, kj = np.divmod(indices[:, :, 0, :], kw)
    rows = (np.arange(oh)[:, None] * geometry.stride[0]).repeat(ow, 1).reshape(-1)
    cols = np.tile(np.arange(ow) * geometry.stride[1], oh)
    flat = ((rows + ki * geometry.dilation[0] - geometry.padding[0]) * width
            + cols + kj * geometry.dilation[1] - geometry.padding[1])
    return out, flat.reshape(x.shape[:2] + (oh, ow)).astype(np.int64)


def _avg_pool_forward(x, geometry, size, divisor):
    sums = _pool_windows(x, geometry, 0.0).sum(axis=2)
    return (sums / divisor).reshape(x.shape[:2] + geometry.blocks(*size)).astype(x.dtype)


def _avg_pool_backward(ctx, g):
    n, c = g.shape[0], g.shape[1]
    kk = ctx.geometry.kernel[0] * ctx.geometry.kernel[1]
    flat_g = unsqueeze(reshape(g, (n, c, -1)), 2)
    cols = expand(flat_g / ctx.divisor, n, c, kk, flat_g.shape[3])
    return (_tied(_spread(ctx, cols), ctx.input(0)),)


AVG_POOL2D = Op("avg_pool2d", "AvgPool2DBackward0", forward=_avg_pool_forward,
                backward=_avg_pool_backward, saves=saves_inputs(0), dtype=promote_float)
ADAPTIVE_AVG_POOL2D = Op("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0",
                         forward=_avg_pool_forward, backward=_avg_pool_backward,
                         saves=saves_inputs(0), dtype=promote_float)


def avg_pool2d(input, geometry, divisor=None, adaptive=False):
    """The mean of each block, zero padding counted (or the sum over ``divisor``)."""
    if divisor is None:
        divisor = geometry.kernel[0] * geometry.kernel[1]
    return apply(ADAPTIVE_AVG_POOL2D if adaptive else AVG_POOL2D, input, geometry=geometry,
                 size=tuple(input.shape[2:]), divisor=divisor)

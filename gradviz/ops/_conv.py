"""Convolution and pooling: ``unfold``/``fold`` (``Im2ColBackward0``/``Col2ImBackward0``,
each the other's adjoint), ``conv2d`` and ``conv1d`` (``ConvolutionBackward0``), ``max_pool2d``
(``MaxPool2DWithIndicesBackward0``) and ``avg_pool2d`` (``AvgPool2DBackward0``).

The forwards run on numpy windows; every backward rule is written with ``unfold``, ``fold``,
``matmul`` and the other differentiable ops (Note [Backward rules are differentiable]), so a
convolution differentiates any number of times.
"""

from __future__ import annotations

import math

import numpy as np

from gradviz_ext import engine
from gradviz_ext import ops as _ext_ops

from .._tensor import C_TYPE_NAMES, TYPE_WORDS, _wrap
from ._creation import zeros
from ._flat_windows import _unfold_wide, crop_wide, flat_windows, fold_wide, unfold_wide
from ._indexing import scatter_add
from ._linalg import matmul
from ._pointwise import where_zero
from ._reduction import sum
from ._registry import Op, apply, promote, promote_float, saves_inputs
from ._saved import NOT_INDICES, OTHER, SELF, Attr, Computed, conv_geometry, conv_groups, pool_geometry
from ._shape import expand, reshape, squeeze_dim, transpose, unsqueeze
from ._windows import pad

__all__ = ["unfold", "fold", "conv1d", "conv2d", "conv3d", "max_pool2d", "max_pool3d",
           "avg_pool2d", "avg_pool3d"]


def _pair(value, name="kernel_size"):
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) == 1:
        return value * 2
    return value


def _ntuple(value, dims):
    if isinstance(value, int):
        return (value,) * dims
    value = tuple(value)
    return value * dims if len(value) == 1 else value


def _output_size(size, kernel, dilation, padding, stride, ceil_mode=False):
    """torch's output size; with ``ceil_mode`` a last, partial window is kept when it starts
    inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    count = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (count - 1) * stride >= size + padding:
        count -= 1
    return count


class _Geometry:
    """Kernel, dilation, padding and stride of a window over ``dims`` spatial dims (2 unless
    told), and the sizes they give (``ceil_mode``: pooling's rounding up)."""

    __slots__ = ("kernel", "dilation", "padding", "stride", "ceil_mode")

    def __init__(self, kernel, dilation, padding, stride, dims=2, ceil_mode=False):
        self.kernel, self.dilation = _ntuple(kernel, dims), _ntuple(dilation, dims)
        self.padding, self.stride = _ntuple(padding, dims), _ntuple(stride, dims)
        self.ceil_mode = ceil_mode

    def blocks(self, *sizes):
        return tuple(_output_size(n, k, d, p, s, self.ceil_mode) for n, k, d, p, s in zip(
            sizes, self.kernel, self.dilation, self.padding, self.stride))

    def pads(self, sizes):
        """(before, after) padding per spatial dim: ``padding`` on both sides, and after it
        whatever a ``ceil_mode`` last window reaches beyond."""
        pairs = []
        for n, k, d, p, s, m in zip(sizes, self.kernel, self.dilation, self.padding,
                                    self.stride, self.blocks(*sizes)):
            reach = (m - 1) * s + d * (k - 1) + 1
            pairs.append((p, max(p, reach - n - p)))
        return tuple(pairs)

    def offsets(self, out_sizes):
        """Each kernel offset (row-major) and its strided slices into the padded input."""
        for offset in np.ndindex(*self.kernel):
            yield offset, (slice(None), slice(None)) + tuple(
                slice(o * d, o * d + s * (m - 1) + 1, s)
                for o, d, s, m in zip(offset, self.dilation, self.stride, out_sizes))


def _padded(x, geometry, fill=0.0):
    """``x`` padded as the windows need (``x`` itself when they need no padding), and the
    output sizes."""
    sizes = x.shape[2:]
    pairs = geometry.pads(sizes)
    if any(before or after for before, after in pairs):
        x = np.pad(x, ((0, 0), (0, 0)) + pairs, constant_values=fill)
    return x, geometry.blocks(*sizes)


def _windows(x, geometry, fill=0.0):
    """(N, C, *kernel, *out): each kernel offset's view of the padded input."""
    x, out_sizes = _padded(x, geometry, fill)
    out = np.empty(x.shape[:2] + geometry.kernel + out_sizes, dtype=x.dtype)
    for offset, index in geometry.offsets(out_sizes):
        out[(slice(None), slice(None)) + offset] = x[index]
    return out


def _scatter_offsets(parts, output_size, geometry):
    """The adjoint of taking the windows: ``parts(k, offset)`` is the (N, C, *out) gradient of
    kernel offset ``k``'s view (None: nothing there), added into a zero (N, C, *output_size)
    array one offset at a time, in offset order (col2im's order: Note [Scatter by offsets])."""
    out_sizes = geometry.blocks(*output_size)
    pairs = geometry.pads(output_size)
    out = None
    for k, (offset, index) in enumerate(geometry.offsets(out_sizes)):
        part, where = parts(k, offset)
        if out is None:
            out = np.zeros(part.shape[:2] + tuple(
                size + before + after for size, (before, after) in zip(output_size, pairs)),
                dtype=part.dtype)
        view = out[index]
        if where is None:
            view += part
        else:  # adding a zero elsewhere: a masked add (``np.add(where=)``) is 4x slower
            view += np.where(where, part, np.zeros((), part.dtype))
    return out[(slice(None), slice(None)) + tuple(
        slice(before, before + size) for size, (before, _) in zip(output_size, pairs))]


def _im2col(x, geometry):
    windows = _windows(x, geometry)
    n, c = windows.shape[:2]
    taps = math.prod(geometry.kernel)
    # explicit sizes: an empty batch has no -1 to infer
    return windows.reshape(n, c * taps, math.prod(windows.shape[2:]) // taps)


def _col2im(cols, output_size, geometry):
    n = cols.shape[0]
    c = cols.shape[1] // math.prod(geometry.kernel)
    blocks = cols.reshape((n, c) + geometry.kernel + geometry.blocks(*output_size))
    return _scatter_offsets(lambda k, offset: (blocks[(slice(None), slice(None)) + offset], None),
                            output_size, geometry)


def _tied(grad, *inputs):
    """``grad``, made to depend (with a zero derivative) on ``inputs`` when the backward is
    recorded: torch's convolution and pooling backward kernels take the forward's inputs, so
    under ``create_graph`` their results require grad whenever those inputs do, even where the
    gradient is constant in them (``max_pool2d(x) * 3``)."""
    if not engine.is_grad_enabled():
        return grad
    for t in inputs:
        if t is not None and t.requires_grad:
            everywhere = _wrap_array(np.ones(t.shape, dtype=bool))
            grad = grad + sum(where_zero(everywhere, t))
    return grad


def _tie_backward(ctx, g):
    return (g,) + (None,) * (len(ctx.needs_input_grad) - 1)


# the gradient ``g`` unchanged, recorded with the forward's inputs as inputs of its node that get
# no gradient back: torch's convolution double backward returns an undefined gradient for an
# input the convolution is linear in (a second derivative finds it unused, not zeros)
_CONVOLUTION_BACKWARD = Op("convolution_backward", "ConvolutionBackwardBackward0",
                           forward=lambda g, *inputs: g, backward=_tie_backward)


def _requiring_grad(grad, *inputs, op=_CONVOLUTION_BACKWARD):
    """``grad``, requiring grad under ``create_graph`` whenever one of ``inputs`` does, as the
    result of torch's convolution (or normalization, ``op``) backward kernel, which takes the
    forward's inputs; unlike :func:`_tied`, differentiating it gives those inputs no gradient
    (None, as torch)."""
    tied = [t for t in inputs if t is not None and t.requires_grad]
    if grad is None or not engine.is_grad_enabled() or not tied:
        return grad
    return apply(op, grad, *tied)


def _wrap_array(array):
    return _wrap(array)


# ---- unfold / fold ------------------------------------------------------------------------------

def _unbatched(batched):
    """A forward on batched arrays, applied to an unbatched one (no batch dim: ``(C, H, W)``
    for im2col, ``(C*kh*kw, L)`` for col2im) as a batch of one; torch records the same one
    node either way."""
    def forward(x, geometry, size, batched_ndim):
        if x.ndim == batched_ndim:
            return batched(x, geometry, size)
        return batched(x[None], geometry, size)[0]
    return forward


def _window_attr(read):
    """``read(attrs)`` of an unfold/fold node; the wide columns of a convolution's backward
    (``Im2ColBackward0``/``Col2ImBackward0`` too, Note [Flat windows] in _flat_windows.py) are
    laid out as no PyTorch node is, and have no such value."""
    def value(node):
        if "geometry" not in node.attrs:
            raise AttributeError(f"'{node.name()}' object: gradviz's wide columns of a "
                                 "convolution's backward have no PyTorch counterpart to read this "
                                 "from (Note [Flat windows]); see grad_fn.windows")
        return read(node.attrs)
    return Computed(value)


_WINDOW_SAVED = {key: _window_attr(lambda attrs, part=part: tuple(getattr(attrs["geometry"], part)))
                 for key, part in (("kernel_size", "kernel"), ("dilation", "dilation"),
                                   ("padding", "padding"), ("stride", "stride"))}
IM2COL = Op("im2col", "Im2ColBackward0",
            forward=_unbatched(lambda x, geometry, size: _im2col(x, geometry)),
            backward=lambda ctx, g: (fold(g, ctx.size, ctx.geometry),),
            saved={**_WINDOW_SAVED,
                   "self_sym_argsize_minus_2": _window_attr(lambda attrs: attrs["size"][0]),
                   "self_sym_argsize_minus_1": _window_attr(lambda attrs: attrs["size"][1])})
COL2IM = Op("col2im", "Col2ImBackward0",
            forward=_unbatched(lambda cols, geometry, size: _col2im(cols, size, geometry)),
            backward=lambda ctx, g: (unfold(g, ctx.geometry),), saved=_WINDOW_SAVED)


def unfold(input, geometry):
    """(N, C, H, W) -> (N, C*kh*kw, L), or (C, H, W) -> (C*kh*kw, L): the sliding blocks as
    columns (im2col); likewise over 3 spatial dims with a 3-D geometry."""
    dims = len(geometry.kernel)
    return apply(IM2COL, input, geometry=geometry, size=tuple(input.shape[-dims:]),
                 batched_ndim=dims + 2)


def fold(input, output_size, geometry):
    """(N, C*kh*kw, L) -> (N, C, H, W), or (C*kh*kw, L) -> (C, H, W): columns summed back into
    place (col2im)."""
    return apply(COL2IM, input, geometry=geometry, size=tuple(output_size), batched_ndim=3)


# ---- convolution ------------------------------------------------------------------------------

# Note [Direct convolution]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# The forward of a 2-D convolution without groups, float32 or float64, runs as one compiled
# direct convolution (gradviz_ext/c/direct_conv.h): output pixels as the lanes of AVX-512
# vectors, register blocks of output channels times pixel vectors, each sample's input copied
# once into column-shifted copies that stay in cache; no columns, no matrix product. The
# column product below built im2col (or wide) columns of the whole batch and ran BLAS on
# products of 6 to 32 rows, its weak case, with up to 40% of the wide columns thrown away.
# Measured in one process, alternating, one thread, float32, microseconds (medians, a shared
# machine), forward without grad, then forward and the backward of the weight and bias:
#
#     conv                                      torch  before  after | torch  before  after
#     LeNet 1: (64,1,28,28) * (6,1,5,5), pad 2   1250     938    258 |  1913    2426   1552
#     LeNet 2: (64,6,14,14) * (16,6,5,5)          504    1061    430 |  1481    2821   2033
#     CNN 1: (32,3,32,32) * (16,3,3,3), pad 1     825    1067    479 |  1963    2808   2028
#     CNN 2: (32,16,16,16) * (32,16,3,3), pad 1  1084    1807    710 |  2304    7964   2952
#
# It was faster than the column product in every 2-D class measured, not only these: strides
# 2 and 4 (0.2-0.3x the time), 1x1 kernels (0.6-0.9x), 7x7 and 11x11 kernels (0.3x), one or
# two output channels (0.45x), and large channel counts (64 to 512 channels, 3x3: 0.5-0.9x;
# a 1x1 of 512 channels over 7x7: 0.9x float32, 0.6x float64). So it takes every 2-D
# convolution with groups = 1 of float32 or float64 whose kernel is at most 64 wide, on a CPU
# with AVX-512F (its register blocks need 32 vector registers: with AVX2's 16 they spilled
# and ran 20-50x slower). The column product stays the path for groups, 3-D, other dtypes,
# other CPUs and the interpreted engine. The sums are not the column product's bits (from
# +0.0, the taps in (c, ky, kx) order, fused multiply-adds, then the bias: one fixed order
# per output): within rounding of it, the same bits where the sums are exact, NaN and
# infinities in the same places (tests/ops/test_direct_conv_kernel.py). A 1-D convolution,
# run as a 2-D one over (1, L), takes it too.

def _conv_forward(x, weight, bias, geometry, groups=1, **_):
    """Cross-correlation over any number of spatial dims: the direct kernel of Note [Direct
    convolution] where it applies, else one matmul per group of channels, the groups a batch
    dim of it (input channels and output channels split alike), over the wide columns of Note
    [Flat windows] when the geometry allows."""
    if groups == 1 and x.ndim == 4:
        out = _ext_ops.direct_conv2d_arrays(
            np.ascontiguousarray(x), np.ascontiguousarray(weight),
            None if bias is None else np.ascontiguousarray(bias), geometry,
            geometry.blocks(*x.shape[2:]))
        if out is not None:  # Note [Direct convolution]
            return out
    n, out_channels = x.shape[0], weight.shape[0]
    group_taps = math.prod(weight.shape[1:])  # (C/G) * K: explicit, as an empty batch needs
    grouped_w = weight.reshape(groups, out_channels // groups, group_taps)
    windows = flat_windows(geometry, x.shape[2:])
    if windows is not None:
        cols = _unfold_wide(x, windows).reshape(n, groups, group_taps, windows.length)
        wide = crop_wide(np.matmul(grouped_w, cols).reshape(n, out_channels, windows.length),
                         windows)
        out = np.empty(wide.shape, dtype=x.dtype)  # the crop, the bias and the cast in one pass
        if bias is None:
            np.copyto(out, wide, casting="unsafe")
        else:
            np.add(wide, bias.reshape((1, -1) + (1,) * len(windows.out_sizes)), out=out,
                   casting="unsafe")
        return out
    out_sizes = geometry.blocks(*x.shape[2:])
    cols = _im2col(x, geometry).reshape(n, groups, group_taps, math.prod(out_sizes))
    out = np.matmul(grouped_w, cols).reshape(n, out_channels, math.prod(out_sizes))
    if bias is not None:
        out = out + bias.reshape(1, -1, 1)
    return out.reshape((n, out_channels) + out_sizes).astype(x.dtype, copy=False)


def _convolution_grads(ctx, x, weight, g):
    """The gradients of a (grouped) convolution's input, weight and bias (None where not
    needed): the input's is the blocks ``weight^T @ g`` folded back into place, the weight's
    ``g @ blocks^T`` summed over the batch, per group; over the wide columns of Note [Flat
    windows] where the geometry and the operands allow."""
    groups = ctx.groups
    n, out_channels = g.shape[0], g.shape[1]
    windows = flat_windows(ctx.geometry, tuple(x.shape[2:]))
    wide_x = (windows is not None and ctx.needs_input_grad[0]
              and bool(np.isfinite(weight._data).all()))
    wide_w = (windows is not None and ctx.needs_input_grad[1]
              and bool(np.isfinite(x._data).all()))
    group_taps = math.prod(weight.shape[1:])  # explicit sizes: a batch may be empty
    taps = x.shape[1] * math.prod(weight.shape[2:])                  # C * K
    flat_w = reshape(weight, (groups, out_channels // groups, group_taps))   # (G, O/G, K)
    grad_x = grad_w = grad_b = None
    if wide_x or wide_w:
        # (N, G, O/G, length): zeros in the garbage columns
        widths = ((0, 0),) * 3 + tuple((0, w - m) for w, m in zip(windows.wide[1:],
                                                                   windows.out_sizes[1:]))
        wide_g = reshape(pad(g, _pad_arguments(widths)),
                         (n, groups, out_channels // groups, windows.length))
        if wide_x:
            cols = _input_columns(flat_w, wide_g, out_channels == groups)
            grad_x = fold_wide(reshape(cols, (n, taps, windows.length)), windows)
        if wide_w:
            blocks = reshape(unfold_wide(x, windows), (n, groups, group_taps, windows.length))
            grad_w = _weight_grad(wide_g, blocks, weight)
    flat_g = reshape(g, (n, groups, out_channels // groups,
                         math.prod(g.shape[2:])))                      # (N, G, O/G, L)
    if ctx.needs_input_grad[0] and not wide_x:
        cols = _input_columns(flat_w, flat_g, out_channels == groups)
        grad_x = fold(reshape(cols, (n, taps, flat_g.shape[3])), tuple(x.shape[2:]), ctx.geometry)
    if ctx.needs_input_grad[1] and not wide_w:
        blocks = reshape(unfold(x, ctx.geometry), (n, groups, group_taps, flat_g.shape[3]))
        grad_w = _weight_grad(flat_g, blocks, weight)
    if ctx.needs_input_grad[2]:
        grad_b = sum(g, (0,) + tuple(range(2, g.ndim)))
    return tuple(None if grad is None else _requiring_grad(grad, x, weight)
                 for grad in (grad_x, grad_w, grad_b))


def _weight_grad(grads, blocks, weight):
    """``grads @ blocks^T`` summed over the batch, per group: (N, G, O/G, L) gradients and (N,
    G, C/G * K, L) columns give the weight's gradient. Computed as ``(blocks @ grads^T)^T``:
    OpenBLAS runs the product with the long ``L`` as the transposed right operand 1.4-1.7x
    slower (a (32, 144) x (144, 288) layer: 1.88 -> 1.38 ms per batch of 32); the sums are the
    same dot products, in an order within rounding of the other (as any GEMM's)."""
    summed = sum(matmul(blocks, transpose(grads, 2, 3)), 0)   # (G, C/G * K, O/G)
    return reshape(transpose(summed, 1, 2), tuple(weight.shape))


def _input_columns(flat_w, grads, depthwise):
    """``weight^T @ grads`` per group; depthwise (O/G = 1) these are outer products, which a
    broadcast multiply computes ~3x faster than numpy's batched matmul."""
    if depthwise:
        return transpose(flat_w, -2, -1) * grads
    return matmul(transpose(flat_w, -2, -1), grads)


def _pad_arguments(widths):
    """``nn.functional.pad``'s flat argument (last dim first) for per-dim (before, after)."""
    return tuple(v for before_after in reversed(widths) for v in before_after)


# Note [Direct convolution backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Without a recorded graph, the gradients of a 2-D convolution without groups (float32 or
# float64, AVX-512F, as Note [Direct convolution]) come from compiled direct kernels too,
# where the rule below built wide columns (pad, unfold, fold) and ran batched BLAS products
# of 16 to 144 rows, 1.3-2.7x torch's time:
#
# - the weight's: gradviz_ext/c/direct_conv.h's weight gradient, each sample copied into the
#   forward's column-shifted scratch, whose tap runs are dotted with the output gradient's
#   rows in register blocks of 4 channels x 6 taps, per-lane sums kept across the batch;
# - the input's, for stride 1 with padding at most dilation * (kernel - 1): the direct forward
#   itself, the output gradient convolved with the weight transposed (in and out channels
#   swapped) and flipped, padded by dilation * (kernel - 1) - padding;
# - the bias's: the same numpy sum as the rule.
#
# Measured in one process, alternating, one thread, float32, microseconds (medians, a shared
# machine), one ``autograd.grad`` of the weight's and bias's gradients, and the input's for
# the second layer (torch: its ``convolution_backward``), then a training step of the models
# of bench/models.py, milliseconds:
#
#     conv                                      torch  before  after
#     CNN 1: (32,3,32,32) * (16,3,3,3), pad 1     603    1392    740
#     CNN 2: (32,16,16,16) * (32,16,3,3), pad 1  1609    4053   1855
#     cnn_bn step (both)                        13.23   12.67   9.81
#     lenet step (both of LeNet's)               6.87    6.63   4.48
#
# Alone, the weight's kernel takes about 350 us (CNN 1) and 650 us (CNN 2) against torch's
# 485 and 723; the input's, the direct forward, about 0.75 ms against torch's 0.62 for CNN 2
# (the forward's register blocks reach about half the machine's multiply-add rate there),
# and the bias's sum 60-110 us: per layer, the time is still about 1.15x torch's.
#
# The sums are not the rule's bits (BLAS's order is unspecified; here each output sums in
# one fixed order: the weight's per lane over samples and pixels with fused multiply-adds,
# then the lanes pairwise; the input's as the direct forward's), within rounding of them
# (tests/ops/test_direct_conv_backward_kernel.py). The weight's gradient multiplies the
# padding's zeros as the im2col columns do, so NaN and infinities land where the rule's
# strided columns put them; the input's would multiply the output gradient's padding by the
# weight, so a weight with an infinity or NaN takes the rule, as it takes the strided
# columns there. Groups, 3-D, other strides or paddings for the input's gradient, other
# dtypes and CPUs, and every recorded backward (``create_graph``) keep the rule.

def _conv_backward(ctx, g):
    if not engine.is_grad_enabled():
        found = _direct_convolution_grads(ctx, g)
        if found is not None:  # Note [Direct convolution backward]
            return found
    return _convolution_grads(ctx, ctx.input(0), ctx.input(1), g)


def _direct_convolution_grads(ctx, g):
    """The gradients of a 2-D convolution's input, weight and bias (None where not needed) by
    the direct kernels of Note [Direct convolution backward], or None where they do not
    apply."""
    x, weight = ctx.data(0), ctx.data(1)
    geometry, needs = ctx.geometry, ctx.needs_input_grad
    if ctx.groups != 1 or x.ndim != 4:
        return None
    grads = np.ascontiguousarray(g._data)
    grad_x = grad_w = None
    if needs[0]:
        grad_x = _direct_input_grad(grads, weight, geometry, x.shape[2:])
        if grad_x is None:
            return None
    if needs[1]:
        grad_w = _ext_ops.direct_conv2d_weight_grad_arrays(
            np.ascontiguousarray(x), grads, weight.shape[2:], geometry)
        if grad_w is None:
            return None
    grad_b = sum(g, (0, 2, 3)) if needs[2] else None
    return (None if grad_x is None else _wrap(grad_x), None if grad_w is None else _wrap(grad_w),
            grad_b)


def _direct_input_grad(g, weight, geometry, size):
    """The input's gradient as the direct forward of ``g`` with the weight transposed and
    flipped (Note [Direct convolution backward]), or None where that does not apply."""
    kernel = weight.shape[2:]
    if any(s != 1 for s in geometry.stride) or not np.isfinite(weight).all():
        return None
    padding = tuple(d * (k - 1) - p for d, k, p in zip(geometry.dilation, kernel,
                                                       geometry.padding))
    if min(padding) < 0:
        return None
    flipped = np.ascontiguousarray(weight.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    return _ext_ops.direct_conv2d_arrays(g, flipped, None,
                                         _Geometry(kernel, geometry.dilation, padding, 1),
                                         tuple(size))


def _conv1d_backward(ctx, g):
    """A 1-D convolution is a 2-D one over (1, L): the same rule on unsqueezed tensors."""
    grad_x, grad_w, grad_b = _convolution_grads(
        ctx, unsqueeze(ctx.input(0), 2), unsqueeze(ctx.input(1), 2), unsqueeze(g, 2))
    return (None if grad_x is None else squeeze_dim(grad_x, 2),
            None if grad_w is None else squeeze_dim(grad_w, 2), grad_b)


def _operands_dtype(*inputs, **attrs):
    """The operands' common dtype (integers too: torch's 3-D kernel takes them), a missing
    bias left out."""
    return promote(*(t for t in inputs if t is not None))


CONV2D = Op("conv2d", "ConvolutionBackward0", forward=_conv_forward, backward=_conv_backward,
            saves=saves_inputs(0, 1), dtype=promote_float,
            saved={
                "input": SELF, "weight": OTHER,
                "stride": Computed(conv_geometry("stride")),
                "padding": Computed(conv_geometry("padding")),
                "dilation": Computed(conv_geometry("dilation")),
                "output_padding": Computed(conv_geometry("output_padding")),
                "transposed": Computed(lambda node: hasattr(node.attrs["geometry"], "output_padding")),
                "groups": Computed(conv_groups),
                "bias_sym_sizes_opt": Attr("bias_sizes"),
            })
CONV3D = Op("conv3d", "ConvolutionBackward0", forward=_conv_forward, backward=_conv_backward,
            saves=saves_inputs(0, 1), dtype=_operands_dtype)
CONV1D = Op("conv1d", "ConvolutionBackward0",
            forward=lambda x, weight, bias, geometry, groups, **_: _conv_forward(
                x[:, :, None, :], weight[:, :, None, :], bias, geometry, groups)[:, :, 0, :],
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


def _bias_sizes(bias):
    """torch's ``_saved_bias_sym_sizes_opt``: the bias's shape, ``(0,)`` without one."""
    return (0,) if bias is None else tuple(bias.shape)


def conv2d(input, weight, bias, geometry, groups=1):
    """Cross-correlation of (N, C, H, W) ``input`` with (O, C / groups, kh, kw) ``weight``."""
    check_dtypes(input, weight, bias)
    return apply(CONV2D, input, weight, bias, geometry=geometry, groups=groups,
                 bias_sizes=_bias_sizes(bias))


def conv3d(input, weight, bias, geometry, groups=1):
    """Cross-correlation of (N, C, D, H, W) ``input`` with (O, C / groups, kd, kh, kw)
    ``weight`` (``geometry`` over three dims)."""
    check_dtypes(input, weight, bias)
    return apply(CONV3D, input, weight, bias, geometry=geometry, groups=groups,
                 bias_sizes=_bias_sizes(bias))


def conv1d(input, weight, bias, geometry, groups=1):
    """Cross-correlation of (N, C, L) ``input`` with (O, C / groups, k) ``weight``
    (``geometry`` over (1, L))."""
    check_dtypes(input, weight, bias)
    return apply(CONV1D, input, weight, bias, geometry=geometry, groups=groups,
                 bias_sizes=_bias_sizes(bias))


# ---- pooling ----------------------------------------------------------------------------------

def _pool_windows(x, geometry, fill):
    """(N, C, K, L): each block's values (K the kernel volume), padded with ``fill``."""
    windows = _windows(x, geometry, fill)
    n, c = windows.shape[:2]
    taps = math.prod(geometry.kernel)
    return windows.reshape(n, c, taps, math.prod(windows.shape[2:]) // taps)  # n may be 0


def _spread(ctx, cols):
    """(N, C, K, L) gradients of the blocks back onto the input (N, C, *spatial)."""
    n, c = cols.shape[0], cols.shape[1]
    return fold(reshape(cols, (n, c * cols.shape[2], cols.shape[3])), ctx.size, ctx.geometry)


def _max_pool_backward(ctx, g):
    if ctx.unbatched:
        g = unsqueeze(g, 0)
    n, c, kk = ctx.indices.shape[0], ctx.indices.shape[1], ctx.kernel_area
    flat_g = unsqueeze(reshape(g, (n, c, math.prod(g.shape[2:]))), 2)
    cols = scatter_add(zeros((n, c, kk, flat_g.shape[3]), dtype=g.dtype), 2,
                       _wrap(ctx.indices), flat_g)
    return (_tied(_unbatch(ctx, _spread(ctx, cols)), ctx.input(0)),)


# Note [Scatter by offsets]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# col2im, and the fast rules of max and average pooling, add each kernel offset's (N, C, *out)
# gradient into a strided view of a zero padded input: kernel-volume vectorized adds, no
# (N, C, K, L) array of mostly zeros, no np.add.at. Max pooling adds the gradient where the
# offset holds the window's maximum and 0 elsewhere. The fast rules are bit-identical to
# the differentiable ones (scatter_add into zeros, then fold): both add the same values into
# the same zeros in the same offset order, and adding a 0 there changes nothing (a sum
# started from +0.0 is never -0.0).

def _tiles(geometry, size):
    """For windows that tile the input (stride = kernel, no padding or dilation, every block
    inside: a 2x2 pool's usual case), the shape that splits each spatial dim into (block,
    offset) pairs, else None."""
    if (any(geometry.padding) or any(d != 1 for d in geometry.dilation)
            or geometry.stride != geometry.kernel):
        return None
    blocks = geometry.blocks(*size)
    if any(m * k != n for m, k, n in zip(blocks, geometry.kernel, size)):
        return None
    return tuple(v for pair in zip(blocks, geometry.kernel) for v in pair)


def _tile_views(out, kernel):
    """Each kernel offset's (N, C, *blocks) strided view of ``out``, an (N, C, *tiles) array."""
    dims = len(kernel)
    for offset in np.ndindex(*kernel):
        index = [slice(None), slice(None)]
        for o in offset:
            index += [slice(None), o]
        yield out[tuple(index)] if dims else out


def _max_pool_fast(ctx, g):
    """The max pool's gradient on numpy arrays (Note [Scatter by offsets]). Windows that tile
    the input write each offset's gradient (times its mask) straight into its view: no zero
    array, no adds; the mask's zeros are signed as ``g`` is (``-2 * False`` is -0.0), so a
    second pass adds +0.0, as the sum from zeros does."""
    if g is None:
        return (None,)
    if ctx.unbatched:
        g = g[None]
    positions = ctx.indices.reshape(g.shape)
    if len(ctx.geometry.kernel) == 2:
        grad = _ext_ops.max_pool2d_backward_arrays(np.ascontiguousarray(g), positions,
                                                    ctx.geometry, ctx.size)
        if grad is not None:  # Note [Max pool kernels]
            return (grad[0] if ctx.unbatched else grad,)
    tiles = _tiles(ctx.geometry, ctx.size)
    if tiles is None or not np.isfinite(g).all():  # inf * False is NaN
        grad = _scatter_offsets(lambda k, offset: (g, positions == k), ctx.size, ctx.geometry)
    else:
        zero = np.zeros((), g.dtype)
        grad = np.empty(g.shape[:2] + tiles, dtype=g.dtype)
        for k, view in enumerate(_tile_views(grad, ctx.geometry.kernel)):
            np.multiply(g, positions == k, out=view)
            np.add(view, zero, out=view)
        grad = grad.reshape(g.shape[:2] + tuple(ctx.size))
    return (grad[0] if ctx.unbatched else grad,)


def _unbatch(ctx, grad):
    """A pool of an unbatched input (torch's kernels take one, no batch dim added in the
    graph) computes with a batch of one: its gradient drops that dim again."""
    return squeeze_dim(grad, 0) if ctx.unbatched else grad


# the stride as given (``()`` for the kernel's), the rest as the geometry has them
_MAX_POOL_SAVED = {
    "self": SELF, "kernel_size": pool_geometry("kernel"), "stride": Attr("stride_arg"),
    "padding": pool_geometry("padding"), "dilation": pool_geometry("dilation"),
    "ceil_mode": Computed(lambda node: node.attrs["geometry"].ceil_mode),
    "result1": NOT_INDICES,
}
MAX_POOL2D = Op("max_pool2d", "MaxPool2DWithIndicesBackward0",
                forward=lambda x, values, **_: values, backward=_max_pool_backward,
                fast_backward=_max_pool_fast, saves=saves_inputs(0), saved=_MAX_POOL_SAVED)
MAX_POOL3D = Op("max_pool3d", "MaxPool3DWithIndicesBackward0",
                forward=lambda x, values, **_: values, backward=_max_pool_backward,
                fast_backward=_max_pool_fast, saves=saves_inputs(0), saved=_MAX_POOL_SAVED)


# Note [Max pool kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A 2-D max pool of float32 or float64 (3x3, stride 2, padding 1: ResNet's; 2x2, stride 2:
# LeNet's) runs forward and backward as one compiled pass each
# (gradviz_ext/c/max_pool.h), where the numpy scan below takes three passes and two
# temporaries per kernel offset and the scatter-back a masked product per offset: 6.2 ms
# against 9.3 for a (32, 16, 32, 32) batch. The 2x2, stride 2 pool of most CNNs (windows that
# tile the input) has a loop of its own there, each output's four elements read from two input
# rows: 0.15 ms where numpy's tile scan took 2.3 ms for a (32, 16, 32, 32) float32 batch, 0.18
# against 1.3 for LeNet's (64, 6, 28, 28) (about a tenth of a LeNet training step). Its
# backward is one pass in output order that finds each winner through a table of offsets:
# 0.15 ms where the tile path's masked products took 0.92 for a (32, 16, 32, 32) batch. The
# kernel picks the same winners (torch's rule: the first maximum, or the last NaN, never
# padding; a zero maximum keeps the first zero's sign, as torch's does, where numpy's maximum
# may not) and adds gradients in the same order as the differentiable rule, so nothing changes
# but the time; other dtypes and 1-D or 3-D pools keep the numpy paths, which stay the
# definition (tests/ops/test_max_pool_kernel.py compares them).

def _window_maxima(x, geometry, fill):
    """Each window's maximum (N, C, *out) and its kernel offset's row-major number (N, C,
    *out), in torch's kernel's scan: an offset wins when its value is larger or NaN, so the
    first maximum, or the last NaN, of a window. One comparison pass per kernel offset over
    strided views of the padded input (no copied windows, no argmax over a strided axis).
    NaN needs a second test per offset, so it is looked for in the maxima (a NaN in a window
    makes its maximum NaN) and the scan redone with it only when there is one."""
    if len(geometry.kernel) == 2 and fill == -np.inf:
        found = _ext_ops.max_pool2d_arrays(x, geometry, geometry.blocks(*x.shape[2:]))
        if found is not None:  # Note [Max pool kernels]
            return found
    padded, out_sizes = _padded(x, geometry, fill)
    values, positions = _scan_maxima(padded, geometry, out_sizes, nan_wins=False)
    if x.dtype.kind == "f" and np.isnan(values).any():
        values, positions = _scan_maxima(padded, geometry, out_sizes, nan_wins=True)
    return values, positions


def _scan_maxima(padded, geometry, out_sizes, nan_wins):
    """:func:`_window_maxima`'s scan; ``nan_wins``: a NaN at a later offset wins too."""
    values = positions = None
    for k, (_, index) in enumerate(geometry.offsets(out_sizes)):
        view = padded[index]
        if values is None:
            values = view.copy()
            positions = np.zeros(values.shape, dtype=np.int64)
            continue
        larger = np.greater(view, values)  # strictly: an equal value later keeps the first
        if nan_wins:
            larger |= np.isnan(view)
        np.maximum(values, view, out=values)  # NaN wins here too (masked copies are slower)
        np.copyto(positions, k, where=larger)
    return values, positions


def _max_pool(op, input, geometry, fill, stride_arg=(), with_indices=True):
    """The maximum of each block (the gradient to the first maximum, as in torch); also the
    flat index (into the spatial dims) of each maximum, as torch's ``return_indices`` gives it
    (None unless ``with_indices``)."""
    x = input._data
    unbatched = x.ndim == len(geometry.kernel) + 1
    if unbatched:
        x = x[None]
    sizes = x.shape[2:]
    out_sizes = geometry.blocks(*sizes)
    values, positions = _window_maxima(x, geometry, fill)
    indices = positions.reshape(x.shape[:2] + (1, math.prod(out_sizes)))
    out = apply(op, input, values=values[0] if unbatched else values, geometry=geometry,
                indices=indices, size=tuple(sizes), kernel_area=math.prod(geometry.kernel),
                unbatched=unbatched, stride_arg=stride_arg)
    if not with_indices:
        return out, None
    kernel_index = np.unravel_index(indices[:, :, 0, :], geometry.kernel)
    grid = np.indices(out_sizes).reshape(len(out_sizes), -1)
    flat = np.zeros(indices[:, :, 0, :].shape, dtype=np.int64)
    for axis, size in enumerate(sizes):
        start = grid[axis] * geometry.stride[axis] - geometry.padding[axis]
        flat = flat * size + start + kernel_index[axis] * geometry.dilation[axis]
    flat = flat.reshape(x.shape[:2] + out_sizes)
    return out, flat[0] if unbatched else flat


def max_pool2d(input, geometry, with_indices=True, stride_arg=()):
    """2-D max pooling of (N, C, H, W) or (C, H, W) ``input``
    (``MaxPool2DWithIndicesBackward0``); also the flat indices of the maxima (None unless
    ``with_indices``); ``stride_arg`` as for :func:`max_pool3d`."""
    return _max_pool(MAX_POOL2D, input, geometry, -np.inf, stride_arg, with_indices=with_indices)


def max_pool3d(input, geometry, fill=-np.inf, stride_arg=()):
    """3-D max pooling of (N, C, D, H, W) or (C, D, H, W) ``input``
    (``MaxPool3DWithIndicesBackward0``); ``fill`` pads (the dtype's least value for integers);
    ``stride_arg`` is the stride as given (``()`` for the kernel's), which torch's node
    reports."""
    return _max_pool(MAX_POOL3D, input, geometry, fill, stride_arg)


def _divisor_in(divisor, dtype):
    """The pool's divisor as torch divides by it: a window count (an int64 array, one per
    window) converted to the data's dtype, so a float32 mean is one float32 division (numpy
    would divide in float64 and round twice)."""
    return divisor.astype(dtype) if isinstance(divisor, np.ndarray) and dtype.kind == "f" else divisor


def _avg_pool_forward(x, geometry, size, divisor, unbatched=False, **_):
    batched = x[None] if unbatched else x
    if batched.dtype in (np.float32, np.float64):
        # the windows' sums one kernel offset at a time over strided views: the order
        # ``sum(axis=2)`` of the copied windows adds in, without the copy; from +0.0, as
        # torch's sums start (a window of -0.0 averages to +0.0)
        padded, out_sizes = _padded(batched, geometry)
        sums = None
        for _, index in geometry.offsets(out_sizes):
            if sums is None:
                sums = np.add(padded[index], batched.dtype.type(0))
            else:
                np.add(sums, padded[index], out=sums)
        sums = sums.reshape(batched.shape[:2] + (math.prod(sums.shape[2:]),))
    else:
        sums = _pool_windows(batched, geometry, 0.0).sum(axis=2)
    out = (sums / _divisor_in(divisor, sums.dtype)).reshape(
        batched.shape[:2] + geometry.blocks(*size)).astype(x.dtype)
    return out[0] if unbatched else out


def _avg_pool_backward(ctx, g):
    if ctx.unbatched:
        g = unsqueeze(g, 0)
    n, c = g.shape[0], g.shape[1]
    kk = math.prod(ctx.geometry.kernel)
    flat_g = unsqueeze(reshape(g, (n, c, math.prod(g.shape[2:]))), 2)
    cols = expand(flat_g / _divisor_in(ctx.divisor, g._data.dtype), n, c, kk, flat_g.shape[3])
    return (_tied(_unbatch(ctx, _spread(ctx, cols)), ctx.input(0)),)


def _avg_pool_fast(ctx, g):
    """The average pool's gradient on numpy arrays: every offset gets ``g / divisor``
    (Note [Scatter by offsets])."""
    if g is None:
        return (None,)
    batched = g[None] if ctx.unbatched else g
    n, c = batched.shape[0], batched.shape[1]
    share = (batched.reshape(n, c, 1, math.prod(batched.shape[2:]))
             / _divisor_in(ctx.divisor, batched.dtype)).reshape(batched.shape)
    tiles = _tiles(ctx.geometry, ctx.size)
    if tiles is None:
        grad = _scatter_offsets(lambda k, offset: (share, None), ctx.size, ctx.geometry)
    else:  # 0 + share written into every offset's view of the tiles
        zero = np.zeros((), share.dtype)
        grad = np.empty((n, c) + tiles, dtype=share.dtype)
        for view in _tile_views(grad, ctx.geometry.kernel):
            np.add(share, zero, out=view)
        grad = grad.reshape((n, c) + tuple(ctx.size))
    return (grad[0] if ctx.unbatched else grad,)


_AVG_POOL_SAVED = {
    "self": SELF, "kernel_size": pool_geometry("kernel"), "stride": Attr("stride_arg"),
    "padding": pool_geometry("padding"),
    "ceil_mode": Computed(lambda node: node.attrs["geometry"].ceil_mode),
    "count_include_pad": Attr("count_include_pad"),
    "divisor_override": Attr("divisor_override"),
}
AVG_POOL2D = Op("avg_pool2d", "AvgPool2DBackward0", forward=_avg_pool_forward,
                backward=_avg_pool_backward, fast_backward=_avg_pool_fast, saves=saves_inputs(0), dtype=promote_float,
                saved=_AVG_POOL_SAVED)
AVG_POOL3D = Op("avg_pool3d", "AvgPool3DBackward0", forward=_avg_pool_forward,
                backward=_avg_pool_backward, fast_backward=_avg_pool_fast, saves=saves_inputs(0), dtype=promote_float,
                saved=_AVG_POOL_SAVED)
ADAPTIVE_AVG_POOL2D = Op("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0",
                         forward=_avg_pool_forward, backward=_avg_pool_backward,
                         fast_backward=_avg_pool_fast, saves=saves_inputs(0), dtype=promote_float)


def avg_pool2d(input, geometry, divisor=None, adaptive=False, **arguments):
    """The mean of each block, zero padding counted (or the sum over ``divisor``);
    ``arguments`` as for :func:`avg_pool3d`."""
    if divisor is None:
        divisor = math.prod(geometry.kernel)
    return apply(ADAPTIVE_AVG_POOL2D if adaptive else AVG_POOL2D, input, geometry=geometry,
                 size=tuple(input.shape[-2:]), divisor=divisor, unbatched=input.ndim == 3,
                 **arguments)


def avg_pool3d(input, geometry, divisor, **arguments):
    """The sum of each block of (N, C, D, H, W) or (C, D, H, W) ``input`` over ``divisor`` (a
    number, or one per block, flattened row-major) (``AvgPool3DBackward0``); ``arguments``
    (the stride as given, ``count_include_pad``, ``divisor_override``) are kept for the
    node's saved values."""
    return apply(AVG_POOL3D, input, geometry=geometry, size=tuple(input.shape[-3:]),
                 divisor=divisor, unbatched=input.ndim == 4, **arguments)

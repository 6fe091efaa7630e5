"""The ops behind ``nn.Embedding``, ``nn.LayerNorm``, ``nn.BatchNorm1d`` and ``nn.GroupNorm``:
``embedding`` (``EmbeddingBackward0``), ``layer_norm`` (``NativeLayerNormBackward0``),
``batch_norm`` (``NativeBatchNormBackward0``) and ``group_norm`` (``NativeGroupNormBackward0``),
each one node as in PyTorch.

Their backward rules recompute the normalized input from the saved input with gradviz ops
(Note [Backward rules are differentiable]), so gradients of gradients work.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .._tensor import _wrap
from ._conv import _requiring_grad, _tie_backward
from ._creation import zeros
from ._indexing import index_add, index_select
from ._pointwise import rsqrt
from ._reduction import mean, sum
from ._registry import Op, apply, check_saveable, promote_float, saves_inputs
from ._saved import SELF, Attr, Computed, Input, NotKept, tensor_attr, torch_int
from ._scatter_add import add_rows
from ._shape import reshape

__all__ = ["embedding", "layer_norm", "batch_norm", "group_norm"]


# ---- embedding ------------------------------------------------------------------------------

# Note [Embedding gradient scaled by frequency]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# With ``scale_grad_by_freq`` each gradient row goes to its weight row times ``1 / count``, the
# count of its index in the batch (padding included in the count, as torch counts it). torch's
# CPU backward adds ``grad[i]`` into ``grad_weight[k]`` with ``alpha = 1 / count``, an FMA on
# CPUs with one; gradviz scales the rows (the scale rounded to the dtype, as torch's alpha) and
# adds them in the same order: the same bits where the scale is exact in the product (a count
# that is a power of two), otherwise within one rounding per row added.

def _frequency_scale(ctx, dtype):
    """``1 / count`` of each kept index, a column of ``dtype`` (Note [Embedding gradient scaled
    by frequency]), or None without ``scale_grad_by_freq``."""
    if not ctx.scale_grad_by_freq:
        return None
    index = ctx.index_tensor._data
    counts = np.bincount(index, minlength=ctx.shape[0])
    scale = (1.0 / counts[index]).astype(dtype)[:, None]
    return scale if ctx.padding_idx is None else scale[ctx.keep]


def _embedding_backward(ctx, g):
    flat = reshape(g, (int(np.prod(g.shape[:-1])), ctx.shape[1]))  # -1 is ambiguous for width 0
    index = ctx.index_tensor
    if ctx.padding_idx is not None:  # the padding row gets no gradient: its entries are left
        # out, as PyTorch skips them (a NaN or an infinity there times 0 would be NaN)
        flat = index_select(flat, 0, _wrap(np.flatnonzero(ctx.keep)))
        index = _wrap(index._data[ctx.keep])
    scale = _frequency_scale(ctx, g._data.dtype)
    if scale is not None:
        flat = flat * _wrap(scale)
    return (index_add(zeros(ctx.shape, dtype=g.dtype), 0, index, flat),)


def _embedding_fast(ctx, g):
    """:func:`_embedding_backward` on arrays: the same rows added in the same order into
    zeros (``index_add``'s forward is ``add_rows`` on a copy of them)."""
    flat = g.reshape(math.prod(g.shape[:-1]), ctx.shape[1])
    index = ctx.index_tensor._data
    if ctx.padding_idx is not None:
        flat, index = flat[ctx.keep], index[ctx.keep]
    scale = _frequency_scale(ctx, g.dtype)
    if scale is not None:
        flat = flat * scale
    grad = np.zeros(ctx.shape, dtype=g.dtype)
    add_rows(grad, index, flat)
    return (grad,)


# the indices are an attribute, not an input: the node's one edge is the weight's, as in
# PyTorch, which saves the indices tensor passed and reports a missing padding_idx as -1
EMBEDDING = Op("embedding", "EmbeddingBackward0",
               forward=lambda weight, *, indices, **_: weight[indices._data],
               backward=_embedding_backward, fast_backward=_embedding_fast,
               saved={"indices": Computed(tensor_attr("indices")),
                      "padding_idx": Computed(lambda node: torch_int(
                          -1 if node.attrs["padding_idx"] is None else node.attrs["padding_idx"])),
                      "scale_grad_by_freq": Attr("scale_grad_by_freq"),
                      "sparse": Computed(lambda node: False),
                      "weight_sym_argsize_0": Computed(lambda node: node.attrs["shape"][0])})


def embedding(weight, indices, padding_idx=None, scale_grad_by_freq=False):
    """Rows of ``weight`` (num_embeddings, dim) at ``indices`` (any shape, int64 or int32);
    ``padding_idx`` rows receive no gradient; with ``scale_grad_by_freq`` each row's gradient
    is divided by its index's count in ``indices`` (Note [Embedding gradient scaled by
    frequency])."""
    check_saveable(indices, weight)
    array = indices._data.reshape(-1).astype(np.int64)
    keep = None if padding_idx is None else array != padding_idx
    return apply(EMBEDDING, weight, indices=indices, index_tensor=_wrap(array), keep=keep,
                 padding_idx=padding_idx, shape=weight._data.shape,
                 scale_grad_by_freq=bool(scale_grad_by_freq))


# ---- normalization ----------------------------------------------------------------------------

def _mean(a, dims):
    """``a.mean(axis=dims, keepdims=True)``; NaN over no entries (an empty batch) without
    numpy's "Mean of empty slice" warning, which torch does not give."""
    if a.size:
        return a.mean(axis=dims, keepdims=True)
    reduced = {axis % a.ndim for axis in dims}
    shape = tuple(1 if axis in reduced else size for axis, size in enumerate(a.shape))
    return np.full(shape, np.nan, dtype=a.dtype)


def _normalize_forward(x, dims, eps, statistics=None):
    """``(x - mean) / sqrt(var + eps)`` over ``dims`` (biased variance), in ``x``'s dtype: the
    mean, the centered copy, its squares' sum and the scaling in place on arrays this owns
    (Note [Normalization kernels]); the mean, variance and scale go into ``statistics`` (a
    :class:`NormStatistics`) when given."""
    mean = _mean(x, dims)
    centered = np.subtract(x, mean)
    var = _mean(np.multiply(centered, centered), dims)
    rstd = (1 / np.sqrt(var + eps)).astype(centered.dtype, copy=False)
    np.multiply(centered, rstd, out=centered)
    if statistics is not None:
        statistics.keep(x, mean, var, rstd)
    return centered


# Note [Normalization statistics once]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Training batch norm needs each channel's mean and variance three times: to normalize, to
# update the running statistics, and in the backward; layer norm needs its rows' twice. The
# forward computes them once and keeps them in a ``NormStatistics`` passed as an attribute of
# the op (torch's ``save_mean``/``save_invstd``); ``nn.functional.batch_norm`` derives the
# running update from them (the unbiased variance is the biased one times ``n / (n - 1)``),
# and the backward without ``create_graph`` normalizes the saved input with them instead of
# reducing it twice more. They are the very numbers the backward computed before (the same
# numpy calls on the same input, which the saved tensor's version check keeps unchanged), so
# the gradients are bit-identical; the running variance may differ from ``np.var(ddof=1)`` in
# its last bit.

class NormStatistics:
    """A training batch norm's per-channel mean, biased variance and ``1 / sqrt(var + eps)``
    (kept-dims arrays) and the input they are of, filled by its forward (Note [Batch
    statistics once])."""

    __slots__ = ("source", "mean", "var", "rstd")

    def __init__(self):
        self.source = self.mean = self.var = self.rstd = None

    def keep(self, x, mean, var, rstd):
        # a weak reference: the node's saved tensor owns the input (and frees it after the
        # backward); these small arrays must not keep it alive
        self.source = weakref.ref(x)
        self.mean, self.var, self.rstd = mean, var, rstd

    def of(self, x) -> bool:
        """Whether these are ``x``'s statistics (kept by its forward, ``x`` unchanged since: the
        saved tensor's version check sees to that)."""
        return self.source is not None and self.source() is x

    def normalized(self, x):
        """``(x - mean) * rstd`` as a new array if these are ``x``'s statistics, else None."""
        if not self.of(x):
            return None
        normalized = np.subtract(x, self.mean)
        np.multiply(normalized, self.rstd, out=normalized)
        return normalized


# Note [Normalization kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Layer, batch and group norm are a few passes over their input each step, so their kernels
# allocate little: the centered copy is normalized in place and the affine applied to it in
# place (it is ours), and the backward
# without ``create_graph`` is the same formula as the differentiable rule on numpy arrays
# (``_normalize_backward_arrays``), one array of temporaries instead of a dozen Tensor ops.
# The differentiable rule stays the definition and runs whenever the gradient is recorded.

def _normalize_backward_arrays(x, g, dims, eps, statistics=None):
    """:func:`_normalize_backward` on numpy arrays (Note [Normalization kernels]), with the
    forward's ``statistics`` of ``x`` when kept (Note [Normalization statistics once])."""
    normalized = None if statistics is None else statistics.normalized(x)
    if normalized is not None:
        rstd = statistics.rstd
    else:
        normalized = np.subtract(x, _mean(x, dims))
        var = _mean(np.multiply(normalized, normalized), dims)
        rstd = (1 / np.sqrt(var + eps)).astype(normalized.dtype, copy=False)
        np.multiply(normalized, rstd, out=normalized)
    g_mean = _mean(g, dims)
    projection = _mean(np.multiply(g, normalized), dims)
    grad = np.multiply(normalized, projection)
    np.subtract(g, grad, out=grad)
    np.subtract(grad, g_mean, out=grad)
    np.multiply(grad, rstd, out=grad)
    return grad, normalized


def _affine_grad_arrays(ctx, g, normalized, reduce_dims, shape):
    grad_weight = grad_bias = None
    if ctx.needs_input_grad[1]:
        product = g * normalized
        grad_weight = (np.add.reduce(product, axis=reduce_dims) if reduce_dims
                       else product).reshape(shape)
    if ctx.needs_input_grad[2]:
        grad_bias = (np.add.reduce(g, axis=reduce_dims) if reduce_dims else g).reshape(shape)
    return grad_weight, grad_bias


def _normalize_backward(x, g, dims, eps):
    """``d(normalize(x))`` applied to ``g`` (the gradient of the normalized values), and the
    normalized values, both as differentiable functions of ``x``."""
    centered = x - mean(x, dims, keepdim=True)
    rstd = rsqrt(mean(centered * centered, dims, keepdim=True) + eps)
    normalized = centered * rstd
    grad = rstd * (g - mean(g, dims, keepdim=True)
                   - normalized * mean(g * normalized, dims, keepdim=True))
    return grad, normalized


def _affine_grads(ctx, g, normalized, reduce_dims, shape):
    grad_weight = grad_bias = None
    if ctx.needs_input_grad[1]:
        grad_weight = reshape(sum(g * normalized, reduce_dims) if reduce_dims else g * normalized,
                              shape)
    if ctx.needs_input_grad[2]:
        grad_bias = reshape(sum(g, reduce_dims) if reduce_dims else g, shape)
    return grad_weight, grad_bias


def _layer_norm_forward(x, weight, bias, dims, eps, statistics=None):
    if dims == (x.ndim - 1,):
        found = _ext_ops.layer_norm_arrays(x, weight, bias, eps)  # Note [Layer norm kernel]
        if found is not None:
            out, mean, var, rstd = found
            if statistics is not None:
                statistics.keep(x, mean, var, rstd)
            return out if bias is not None else _plus_zero(out)
    out = _normalize_forward(x, dims, eps, statistics)  # ours: the affine goes in place when it may
    if weight is not None:
        out = _in_place(out, weight, np.multiply)
    out = _in_place(out, bias, np.add) if bias is not None else _plus_zero(out)
    return out.astype(x.dtype, copy=False)


def _plus_zero(out):
    """``out + 0.0`` in place: torch's layer norm without a bias adds a zero one, so an entry
    normalized to -0.0 (a -0.0 at a row's mean of +0.0) comes out +0.0."""
    return np.add(out, out.dtype.type(0), out=out)


# Note [Layer norm kernel]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Layer norm over the last dim (every transformer's) of float32 or float64 rows is one compiled
# pass per row, forward and backward (gradviz_ext/c/layer_norm.h, ``layer_norm_arrays`` and
# ``layer_norm_backward_arrays``), doing what the numpy code does, operation for operation:
# numpy's pairwise sum in the dtype from the identity, the division by the count in float64
# (numpy's rule for an array divided by an intp scalar) rounded back, the centered row, its
# squares' mean the same way, ``1 / sqrt(var + eps)`` in the dtype, the scaling, the weight, the
# bias. So the output and the kept statistics have the same bits
# (tests/ops/test_layer_norm_kernel.py compares them over row lengths 1 to 1,000, NaN and
# infinities included): 80 -> 31 us for a GPT's (16, 32, 64) activation, where numpy made eight
# passes and six temporaries, and 31 -> 19 us compiled for AVX-512 and AVX2 too, the widest
# chosen at load time (the same operations per lane, so the same bits; layer_norm.h). The
# backward on arrays likewise (the kept statistics' normalized row, the two row means, the
# input's gradient; the weight's and bias's gradients summed over the rows in row order from 0,
# as numpy's reduction over the leading dims adds them): 133 -> 52 us. Batch norm's training
# backward on arrays likewise, per channel (numpy sums each (n, c) plane pairwise and adds the
# planes in n order from 0): 1.36 -> 0.98 ms for (32, 16, 32, 32). Other layouts, planes above
# 8,192 entries (where numpy's reduction may split them), and a backward without the forward's
# statistics, keep numpy.

def _in_place(out, parameter, ufunc):
    """``ufunc(out, parameter)``, into ``out`` (an array this module owns) when the result
    keeps its shape and dtype."""
    if (np.result_type(out, parameter) == out.dtype
            and np.broadcast_shapes(out.shape, parameter.shape) == out.shape):
        return ufunc(out, parameter, out=out)
    return ufunc(out, parameter)


def _layer_norm_backward(ctx, g):
    x, weight = ctx.input(0), ctx.input(1)
    scaled = g * weight if weight is not None else g
    grad_x, normalized = _normalize_backward(x, scaled, ctx.dims, ctx.eps)
    batch_dims = tuple(range(x.ndim - len(ctx.dims)))
    grad_weight, grad_bias = _affine_grads(ctx, g, normalized, batch_dims,
                                           tuple(x.shape[x.ndim - len(ctx.dims):]))
    grads = ((grad_x if ctx.needs_input_grad[0] else None), grad_weight, grad_bias)
    return tuple(_requiring_grad(grad, x, weight, ctx.input(2), op=_LAYER_NORM_BACKWARD)
                 for grad in grads)


def _layer_norm_backward_arrays(ctx, g):
    """:func:`_layer_norm_backward` on numpy arrays, the fast rule (Note [Normalization
    kernels])."""
    x, weight = ctx.data(0), ctx.data(1)
    statistics = ctx.statistics
    if ctx.dims == (x.ndim - 1,) and statistics is not None and statistics.of(x):
        # Note [Layer norm kernel]
        found = _ext_ops.layer_norm_backward_arrays(x, g, weight, statistics.mean,
                                                    statistics.rstd, ctx.needs_input_grad)
        if found is not None:
            return found
    scaled = g * weight if weight is not None else g
    grad_x, normalized = _normalize_backward_arrays(x, scaled, ctx.dims, ctx.eps,
                                                    ctx.statistics)
    batch_dims = tuple(range(x.ndim - len(ctx.dims)))
    grad_weight, grad_bias = _affine_grad_arrays(ctx, g, normalized, batch_dims,
                                                 x.shape[x.ndim - len(ctx.dims):])
    return grad_x if ctx.needs_input_grad[0] else None, grad_weight, grad_bias


# torch's layer and batch norm backward are one node each, taking the input and the weight
# (layer norm's the bias too): every gradient it gives requires grad when one of those does,
# even one constant in them (the bias's, a sum of the upstream); the tie gives them nothing
_LAYER_NORM_BACKWARD = Op("native_layer_norm_backward", "NativeLayerNormBackwardBackward0",
                          forward=lambda g, *inputs: g, backward=_tie_backward)
_GROUP_NORM_BACKWARD = Op("native_group_norm_backward", "NativeGroupNormBackwardBackward0",
                          forward=lambda g, *inputs: g, backward=_tie_backward)
_BATCH_NORM_BACKWARD = Op("native_batch_norm_backward", "NativeBatchNormBackwardBackward0",
                          forward=lambda g, *inputs: g, backward=_tie_backward)


def _row_statistic(key):
    """``_saved_result1``/``_saved_result2`` of layer norm: each row's mean or ``1 / sqrt(var
    + eps)``, kept by the forward (Note [Normalization statistics once]), shaped as torch's
    (the normalized dims kept as 1s) in the input's dtype; freed with the graph, as torch's."""
    def value(node):
        if node._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        statistics, dims = node.attrs["statistics"], node.attrs["dims"]
        output = node._input_metadata[0]
        shape = tuple(1 if d in dims else n for d, n in enumerate(output.shape))
        array = getattr(statistics, key).reshape(shape).astype(output.np_dtype, copy=False)
        return _wrap(array.copy())
    return Computed(value)


LAYER_NORM = Op("layer_norm", "NativeLayerNormBackward0", forward=_layer_norm_forward,
                backward=_layer_norm_backward, fast_backward=_layer_norm_backward_arrays,
                saves=saves_inputs(0, 1, 2), dtype=promote_float,
                saved={"input": SELF, "weight": Input(1), "bias": Input(2),
                       "normalized_shape": Computed(lambda node: tuple(
                           node._input_metadata[0].shape[d] for d in node.attrs["dims"])),
                       "result1": _row_statistic("mean"), "result2": _row_statistic("rstd")})


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last ``len(normalized_shape)`` dims (biased variance), then
    ``* weight + bias``."""
    k = len(normalized_shape)
    dims = tuple(range(input.ndim - k, input.ndim))
    return apply(LAYER_NORM, input, weight, bias, dims=dims, eps=eps,
                 statistics=NormStatistics())  # Note [Normalization statistics once]


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _channel_affine(out, x, weight, bias):
    """``out * weight + bias`` per channel (dim 1) of ``x``, in ``x``'s dtype."""
    shape = _channel_shape(x)
    if weight is not None:
        out = _in_place(out, weight.reshape(shape), np.multiply)
    if bias is not None:
        out = _in_place(out, bias.reshape(shape), np.add)
    return out.astype(x.dtype, copy=False)


def _batch_norm_forward(x, weight, bias, dims, eps, mean_, var, statistics=None, running_mean=None,
                        running_var=None):
    if mean_ is None:
        out = _normalize_forward(x, dims, eps, statistics)
    else:  # evaluation: the running statistics
        shape = _channel_shape(x)
        out = _in_place(x - mean_.reshape(shape), np.sqrt(var.reshape(shape) + eps), np.divide)
    return _channel_affine(out, x, weight, bias)


def _batch_norm_backward(ctx, g):
    x, weight = ctx.input(0), ctx.input(1)
    shape = _channel_shape(x)
    scaled = g * reshape(weight, shape) if weight is not None else g
    if ctx.mean_ is None:
        grad_x, normalized = _normalize_backward(x, scaled, ctx.dims, ctx.eps)
    else:
        mean_ = _wrap(ctx.mean_.reshape(shape).astype(x._data.dtype))
        rstd = _wrap((1 / np.sqrt(ctx.var.reshape(shape) + ctx.eps)).astype(x._data.dtype))
        grad_x, normalized = scaled * rstd, (x - mean_) * rstd
    grad_weight, grad_bias = _affine_grads(ctx, g, normalized, ctx.dims, (x.shape[1],))
    grads = ((grad_x if ctx.needs_input_grad[0] else None), grad_weight, grad_bias)
    return tuple(_requiring_grad(grad, x, weight, op=_BATCH_NORM_BACKWARD) for grad in grads)


def _batch_norm_backward_arrays(ctx, g):
    """:func:`_batch_norm_backward` on numpy arrays, the fast rule (Note [Normalization
    kernels])."""
    x, weight = ctx.data(0), ctx.data(1)
    statistics = ctx.statistics
    if ctx.mean_ is None and statistics is not None and statistics.of(x):
        # Note [Layer norm kernel]
        found = _ext_ops.batch_norm_backward_arrays(x, g, weight, statistics.mean,
                                                    statistics.rstd, ctx.needs_input_grad)
        if found is not None:
            return found
    shape = _channel_shape(x)
    scaled = g * weight.reshape(shape) if weight is not None else g
    if ctx.mean_ is None:
        grad_x, normalized = _normalize_backward_arrays(x, scaled, ctx.dims, ctx.eps,
                                                        ctx.statistics)
    else:
        rstd = (1 / np.sqrt(ctx.var.reshape(shape) + ctx.eps)).astype(x.dtype)
        grad_x = scaled * rstd
        normalized = None
        if ctx.needs_input_grad[1]:
            normalized = (x - ctx.mean_.reshape(shape).astype(x.dtype)) * rstd
    grad_weight, grad_bias = _affine_grad_arrays(ctx, g, normalized, ctx.dims, (x.shape[1],))
    return grad_x if ctx.needs_input_grad[0] else None, grad_weight, grad_bias


def _channel_statistic(key):
    """``_saved_result1``/``_saved_result2`` of batch norm: each channel's batch mean or ``1 /
    sqrt(var + eps)`` when training (Note [Normalization statistics once]), an empty tensor in
    evaluation, as torch's; in the input's dtype, freed with the graph."""
    def value(node):
        if node._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        statistics, dtype = node.attrs["statistics"], node._input_metadata[0].np_dtype
        if statistics is None:
            return _wrap(np.empty(0, dtype=dtype))
        return _wrap(getattr(statistics, key).reshape(-1).astype(dtype))
    return Computed(value)


BATCH_NORM = Op("batch_norm", "NativeBatchNormBackward0", forward=_batch_norm_forward,
                backward=_batch_norm_backward, fast_backward=_batch_norm_backward_arrays,
                saves=saves_inputs(0, 1), dtype=promote_float,
                saved={"input": SELF, "weight": Input(1), "eps": Attr("eps"),
                       "training": Computed(lambda node: node.attrs["statistics"] is not None),
                       "running_mean": Computed(tensor_attr("running_mean")),
                       "running_var": Computed(tensor_attr("running_var")),
                       "result1": _channel_statistic("mean"), "result2": _channel_statistic("rstd")})


def batch_norm(input, weight, bias, eps, mean=None, var=None, statistics=None, *,
               running_mean=None, running_var=None):
    """Normalize each channel (dim 1) over the other dims: with the batch's statistics
    (biased variance; kept in ``statistics``, a :class:`NormStatistics`, when given), or with
    ``mean``/``var`` arrays given (evaluation); then ``* weight + bias``. ``running_mean`` and
    ``running_var``, the module's buffers, are kept for the node's saved values only."""
    dims = (0,) + tuple(range(2, input.ndim))
    if mean is None and statistics is None:
        statistics = NormStatistics()  # for the backward (Note [Normalization statistics once])
    return apply(BATCH_NORM, input, weight, bias, dims=dims, eps=eps, mean_=mean, var=var,
                 statistics=statistics, running_mean=running_mean, running_var=running_var)


def _grouped(shape, groups):
    """``(N, C, *)`` seen as ``(N, groups, C // groups * prod(*))`` (explicit: N may be 0)."""
    return (shape[0], groups, math.prod(shape[1:]) // groups)


def _group_norm_forward(x, weight, bias, groups, eps):
    out = _normalize_forward(x.reshape(_grouped(x.shape, groups)), (2,), eps).reshape(x.shape)
    return _channel_affine(out, x, weight, bias)


def _group_norm_backward(ctx, g):
    x, weight = ctx.input(0), ctx.input(1)
    shape, grouped = _channel_shape(x), _grouped(x.shape, ctx.groups)
    scaled = g * reshape(weight, shape) if weight is not None else g
    grad_x, normalized = _normalize_backward(reshape(x, grouped), reshape(scaled, grouped), (2,),
                                             ctx.eps)
    reduce_dims = (0,) + tuple(range(2, x.ndim))
    grad_weight, grad_bias = _affine_grads(ctx, g, reshape(normalized, tuple(x.shape)),
                                           reduce_dims, (x.shape[1],))
    grad_x = reshape(grad_x, tuple(x.shape)) if ctx.needs_input_grad[0] else None
    # one torch node: its weight gradient requires grad when the input or the weight does
    # (its bias gradient, computed apart in torch's group norm, does not)
    grad_weight = _requiring_grad(grad_weight, x, ctx.input(1), op=_GROUP_NORM_BACKWARD)
    return grad_x, grad_weight, grad_bias


def _group_norm_backward_arrays(ctx, g):
    """:func:`_group_norm_backward` on numpy arrays, the fast rule (Note [Normalization
    kernels])."""
    x, weight = ctx.data(0), ctx.data(1)
    grouped = _grouped(x.shape, ctx.groups)
    scaled = g * weight.reshape(_channel_shape(x)) if weight is not None else g
    grad_x, normalized = _normalize_backward_arrays(x.reshape(grouped), scaled.reshape(grouped),
                                                    (2,), ctx.eps)
    reduce_dims = (0,) + tuple(range(2, x.ndim))
    grad_weight, grad_bias = _affine_grad_arrays(ctx, g, normalized.reshape(x.shape),
                                                 reduce_dims, (x.shape[1],))
    return (grad_x.reshape(x.shape) if ctx.needs_input_grad[0] else None, grad_weight,
            grad_bias)


_GROUP_STATISTICS = NotKept("gradviz's group norm computes the groups' mean and 1 / std again "
                            "in its backward instead of keeping them")


def _output_size(read):
    return Computed(lambda node: read(tuple(node._input_metadata[0].shape)))


GROUP_NORM = Op("group_norm", "NativeGroupNormBackward0", forward=_group_norm_forward,
                backward=_group_norm_backward, fast_backward=_group_norm_backward_arrays,
                saves=saves_inputs(0, 1), dtype=promote_float,
                saved={"input": SELF, "weight": Input(1), "eps": Attr("eps"),
                       "group": Attr("groups"), "N": _output_size(lambda shape: shape[0]),
                       "C": _output_size(lambda shape: shape[1]),
                       "HxW": _output_size(lambda shape: math.prod(shape[2:])),
                       "result1": _GROUP_STATISTICS, "result2": _GROUP_STATISTICS})


def group_norm(input, groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """Normalize each of ``groups`` groups of channels (dim 1) of each sample over its channels
    and the other dims (biased variance), then ``* weight + bias`` per channel."""
    return apply(GROUP_NORM, input, weight, bias, groups=groups, eps=eps)

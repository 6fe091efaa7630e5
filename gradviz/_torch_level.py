"""Functions that PyTorch code calls on ``torch`` itself rather than on ``torch.nn.functional``
or a Tensor: the ATen forms of the layers (``torch.conv2d``, ``torch.layer_norm``,
``torch.batch_norm``, ``torch.embedding``, ...), with ATen's argument orders and integer
reductions; the in-place functions (``torch.relu_(x)`` is ``x.relu_()``); window functions;
and small queries (``torch.is_same_size``, ``torch.get_device``, ``torch.typename``).

Note [ATen argument orders]
---------------------------
``torch.<layer>`` is ATen's operator, not ``torch.nn.functional``'s wrapper, and several differ
in argument order or form: ``torch.embedding(weight, indices)`` takes the table first,
``torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
cudnn_enabled)`` its affine parameters before the statistics, the losses an integer
``reduction`` (0 none, 1 mean, 2 sum), ``torch.max_pool2d``'s stride ``[]`` means the kernel
size, and ``torch.adaptive_max_pool1d``/``max_pool1d_with_indices`` return the indices too.
Each function here maps those onto the one functional implementation, so the values and
gradients are the layer's own.

Layering: this module sits at the package level, above ``nn`` (it calls
``nn.functional``), and only ``gradviz/__init__.py`` imports it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import dtypes as _dtypes
from ._tensor import Tensor
from .nn import functional as _functional
from .nn._dropout import _feature_dropout as _channel_dropout
from .ops import _creation

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value):
    """ATen's integer reduction (0 none, 1 mean, 2 sum) as nn.functional's name."""
    if isinstance(value, str):
        return value
    try:
        return _REDUCTIONS[int(value)]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{value} is not a valid value for reduction: use 0 (none), 1 (mean) or "
                         "2 (sum)") from None


def _stride(stride):
    """An empty stride (``torch.max_pool2d``'s default) as the functional's None: the kernel
    size, and ``()`` in the node's ``_saved_stride``, as torch's."""
    return None if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else stride


# ---- convolutions and pooling --------------------------------------------------------------------

def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.conv1d``: :func:`gradviz.nn.functional.conv1d`."""
    return _functional.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.conv2d``: :func:`gradviz.nn.functional.conv2d`."""
    return _functional.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.conv3d``: :func:`gradviz.nn.functional.conv3d`."""
    return _functional.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``torch.conv_transpose1d``: :func:`gradviz.nn.functional.conv_transpose1d`."""
    return _functional.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``torch.conv_transpose2d``: :func:`gradviz.nn.functional.conv_transpose2d`."""
    return _functional.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool1d`` (a stride of ``[]`` is the kernel size)."""
    return _functional.max_pool1d(input, kernel_size, _stride(stride), padding, dilation,
                                  ceil_mode=ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool2d`` (a stride of ``[]`` is the kernel size)."""
    return _functional.max_pool2d(input, kernel_size, _stride(stride), padding, dilation,
                                  ceil_mode=ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool3d`` (a stride of ``[]`` is the kernel size)."""
    return _functional.max_pool3d(input, kernel_size, _stride(stride), padding, dilation,
                                  ceil_mode=ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool1d_with_indices``: the pooled values and their positions."""
    return _functional.max_pool1d(input, kernel_size, _stride(stride), padding, dilation,
                                  ceil_mode=ceil_mode, return_indices=True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """``torch.avg_pool1d``: :func:`gradviz.nn.functional.avg_pool1d`."""
    return _functional.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                                  count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    """``torch.adaptive_avg_pool1d``: :func:`gradviz.nn.functional.adaptive_avg_pool1d`."""
    return _functional.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """``torch.adaptive_max_pool1d``: the pooled values and their positions (as ATen's)."""
    return _functional.adaptive_max_pool1d(input, output_size, return_indices=True)


# ---- normalisation, embedding, dropout -----------------------------------------------------------

def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """``torch.layer_norm``: :func:`gradviz.nn.functional.layer_norm`."""
    return _functional.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """``torch.group_norm``: :func:`gradviz.nn.functional.group_norm`."""
    return _functional.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """``torch.batch_norm``: ATen's order, affine parameters before the running statistics
    (Note [ATen argument orders])."""
    return _functional.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled):
    """``torch.instance_norm``: ATen's order (Note [ATen argument orders])."""
    return _functional.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                                     momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``torch.rms_norm``: :func:`gradviz.nn.functional.rms_norm`."""
    return _functional.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: the table first, and ``padding_idx=-1`` for none (Note [ATen argument
    orders])."""
    return _functional.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                                 scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _probability(p):
    """ATen's check (a RuntimeError, where nn.functional raises ValueError)."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout(input, p, train):
    """``torch.dropout``: :func:`gradviz.nn.functional.dropout` with ``training=train``."""
    return _functional.dropout(input, _probability(p), train)


def dropout_(input, p, train):
    """``torch.dropout_``: dropout in place."""
    return _functional.dropout(input, _probability(p), train, inplace=True)


def alpha_dropout(input, p, train):
    """``torch.alpha_dropout``: :func:`gradviz.nn.functional.alpha_dropout`."""
    return _functional.alpha_dropout(input, _probability(p), train)


def alpha_dropout_(input, p, train):
    """``torch.alpha_dropout_``: alpha dropout in place."""
    return _functional.alpha_dropout(input, _probability(p), train, inplace=True)


def feature_dropout(input, p, train):
    """``torch.feature_dropout``: whole channels (dimension 1) zeroed, the rest scaled by
    ``1 / (1 - p)`` (nn's channel dropout, with ATen's probability check)."""
    return _channel_dropout(input, _probability(p), train, False)


def feature_dropout_(input, p, train):
    """``torch.feature_dropout_``: :func:`feature_dropout` in place."""
    return _channel_dropout(input, _probability(p), train, True)


def feature_alpha_dropout(input, p, train):
    """``torch.feature_alpha_dropout``: :func:`gradviz.nn.functional.feature_alpha_dropout`."""
    return _functional.feature_alpha_dropout(input, _probability(p), train)


def feature_alpha_dropout_(input, p, train):
    """``torch.feature_alpha_dropout_``: :func:`feature_alpha_dropout` in place."""
    return _functional.feature_alpha_dropout(input, _probability(p), train, inplace=True)


# ---- activations and small layers ----------------------------------------------------------------

def channel_shuffle(input, groups):
    """``torch.channel_shuffle``: :func:`gradviz.nn.functional.channel_shuffle`."""
    return _functional.channel_shuffle(input, groups)


def pdist(input, p=2):
    """``torch.pdist``: :func:`gradviz.nn.functional.pdist`."""
    return _functional.pdist(input, p)


def pixel_shuffle(input, upscale_factor):
    """``torch.pixel_shuffle``: :func:`gradviz.nn.functional.pixel_shuffle`."""
    return _functional.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    """``torch.pixel_unshuffle``: :func:`gradviz.nn.functional.pixel_unshuffle`."""
    return _functional.pixel_unshuffle(input, downscale_factor)


def prelu(input, weight):
    """``torch.prelu``: :func:`gradviz.nn.functional.prelu`."""
    return _functional.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``: :func:`gradviz.nn.functional.rrelu` (eval by default, as ATen's)."""
    return _functional.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu_``: :func:`rrelu` in place."""
    return _functional.rrelu(input, lower, upper, training, inplace=True)


def threshold(input, threshold, value):
    """``torch.threshold``: :func:`gradviz.nn.functional.threshold`."""
    return _functional.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """``torch.threshold_``: :func:`threshold` in place."""
    return _functional.threshold(input, threshold, value, inplace=True)


def hardshrink(input, lambd=0.5):
    """``torch.hardshrink``: :func:`gradviz.nn.functional.hardshrink`."""
    return _functional.hardshrink(input, lambd)


def selu_(input):
    """``torch.selu_``: SELU in place."""
    return _functional.selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """``torch.celu_``: CELU in place."""
    return _functional.celu(input, alpha, inplace=True)


def bilinear(input1, input2, weight, bias=None):
    """``torch.bilinear``: :func:`gradviz.nn.functional.bilinear`."""
    return _functional.bilinear(input1, input2, weight, bias)


# ---- losses, with ATen's integer reduction -------------------------------------------------------

def kl_div(input, target, reduction=0, *, log_target=False):
    """``torch.kl_div``; ``reduction`` 1 is the elementwise mean, without nn.functional's warning
    about it (ATen's operator has none)."""
    pointwise = _functional.kl_div(input, target, reduction="none", log_target=log_target)
    how = _reduction(reduction)
    return pointwise if how == "none" else pointwise.mean() if how == "mean" else pointwise.sum()


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.cosine_embedding_loss``: :func:`gradviz.nn.functional.cosine_embedding_loss`."""
    return _functional.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``torch.hinge_embedding_loss``: :func:`gradviz.nn.functional.hinge_embedding_loss`."""
    return _functional.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.margin_ranking_loss``: :func:`gradviz.nn.functional.margin_ranking_loss`."""
    return _functional.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=0):
    """``torch.triplet_margin_loss``: :func:`gradviz.nn.functional.triplet_margin_loss`."""
    return _functional.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                           reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss`` (every argument required, as ATen's)."""
    return _functional.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """``torch.binary_cross_entropy_with_logits``: the functional form with an integer reduction."""
    return _functional.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                                        pos_weight=pos_weight)


# ---- in-place functions: ``torch.relu_(x)`` is ``x.relu_()`` ---------------------------------------

_INPLACE_METHODS = (
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_",
    "cos_", "cosh_", "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_",
    "fix_", "floor_", "frac_", "i0_", "index_put_", "log10_", "log1p_", "log2_",
    "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_",
    "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "zero_", "addmv_",
)


def _inplace_function(name):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.{name}(input, ...)``: ``input.{name}(...)``."
    return function


INPLACE_FUNCTIONS = {name: _inplace_function(name) for name in _INPLACE_METHODS}
globals().update(INPLACE_FUNCTIONS)


# ---- windows -------------------------------------------------------------------------------------

def _window(name, window_length, periodic, dtype, requires_grad, values):
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = _dtypes.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length == 0:
        array = np.zeros(0)
    elif window_length == 1:
        array = np.ones(1)
    else:
        # periodic: the symmetric window of length + 1 without its last point
        length = window_length + 1 if periodic else window_length
        array = values(length)[:window_length]
    return _creation.tensor(array, dtype=dtype, requires_grad=requires_grad)


def _cosine_sum(*coefficients):
    def values(length):
        phase = 2 * math.pi * np.arange(length) / (length - 1)
        return sum(((-1) ** k) * a * np.cos(k * phase) for k, a in enumerate(coefficients))

    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window. Mirrors ``torch.hann_window``."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad, _cosine_sum(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None,
                   device=None, requires_grad=False):
    """The Hamming window ``alpha - beta cos(...)``. Mirrors ``torch.hamming_window``."""
    return _window("hamming_window", window_length, periodic, dtype, requires_grad, _cosine_sum(alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window. Mirrors ``torch.blackman_window``."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad, _cosine_sum(0.42, 0.5, 0.08))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular Bartlett window. Mirrors ``torch.bartlett_window``."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda length: 1 - np.abs(2 * np.arange(length) / (length - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """The Kaiser window of shape ``beta``. Mirrors ``torch.kaiser_window``."""
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad,
                   lambda length: np.kaiser(length, beta))


# ---- small queries -------------------------------------------------------------------------------

def is_same_size(input, other):
    """Whether the two tensors have the same shape: ``input.is_same_size(other)``. Mirrors
    ``torch.is_same_size``."""
    return input.is_same_size(other)


def get_device(input):
    """``input.get_device()``: -1, a CPU tensor's device index. Mirrors ``torch.get_device``."""
    return input.get_device()


def rsub(input, other, alpha=1):
    """``other - alpha * input``. Mirrors ``torch.rsub``."""
    return other - input * alpha if alpha != 1 else other - input


def split_with_sizes(input, split_sizes, dim=0):
    """``input.split(split_sizes, dim)`` with a list of sizes. Mirrors ``torch.split_with_sizes``."""
    if sum(split_sizes) != input.shape[dim]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {input.shape[dim]} (input tensor's "
            f"size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return input.split(list(split_sizes), dim)


def fill(input, value):
    """A new tensor of ``input``'s shape and dtype filled with ``value`` (differentiable in a
    tensor ``value``). Mirrors ``torch.fill``."""
    return input.clone().fill_(value)


def detach(input):
    """``input.detach()``. Mirrors ``torch.detach``."""
    return input.detach()


def typename(obj):
    """The type name of ``obj``: a tensor's legacy type (``'gradviz.FloatTensor'``, as
    :meth:`Tensor.type`), else the class's qualified name. Mirrors ``torch.typename``."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "")
    name = type(obj).__qualname__
    return name if module in ("", "builtins", None) else f"{module}.{name}"


def set_default_tensor_type(t):
    """``torch.set_default_tensor_type`` (deprecated in torch too): the default floating dtype
    of a legacy type (``gradviz.DoubleTensor`` or ``"torch.DoubleTensor"``)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    dtype = _LEGACY_FLOAT_TYPES.get(str(name).rsplit(".", 1)[-1])
    if dtype is None:
        raise TypeError(f"invalid type object: only floating-point types are supported as the default "
                        f"type, got {t!r}")
    _dtypes.set_default_dtype(dtype)


_LEGACY_FLOAT_TYPES = {"FloatTensor": _dtypes.float32, "DoubleTensor": _dtypes.float64,
                       "HalfTensor": _dtypes.float16}


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor of ``obj`` sharing its memory when it can (a tensor of the same dtype is returned
    itself, a numpy array is wrapped without a copy), unless ``copy=True``; ``copy=False`` raises
    where a copy is needed. Mirrors ``torch.asarray``."""
    _creation._check_device(device)
    target = None if dtype is None else _dtypes.as_dtype(dtype)
    if isinstance(obj, Tensor):
        same = target is None or target is obj.dtype
        if same and copy is not True:
            result = obj
        elif copy is False:
            raise ValueError(f"can't alias tensor with dtype '{obj.dtype}' into dtype '{target}'.")
        else:
            result = obj.to(target or obj.dtype, copy=True).detach()
    elif isinstance(obj, np.ndarray):
        same = target is None or target.numpy == obj.dtype
        if copy is False and not same:
            raise ValueError(f"can't alias an array of dtype '{obj.dtype}' into dtype '{target}'.")
        array = obj if same and copy is not True else np.array(obj, dtype=None if target is None else target.numpy)
        result = _creation.from_numpy(array)
    else:
        if copy is False:
            raise ValueError(f"can't alias a {type(obj).__name__} without a copy: pass copy=None or True")
        result = _creation.tensor(obj, dtype=target)
    if requires_grad:
        result.requires_grad_()
    return result


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor (gradviz fills it with zeros) of ``size`` with ``stride`` (in
    elements). Mirrors ``torch.empty_strided``."""
    _creation._check_device(device)
    size, stride = tuple(int(n) for n in size), tuple(int(n) for n in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(n < 0 for n in stride):
        raise RuntimeError("Negative strides are not supported")
    dtype = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    storage = np.zeros(extent, dtype=dtype.numpy)
    itemsize = storage.itemsize
    array = np.lib.stride_tricks.as_strided(storage, size, tuple(s * itemsize for s in stride))
    result = _creation.from_numpy(array)
    return result.requires_grad_() if requires_grad else result


FUNCTIONS = {
    name: value for name, value in list(globals().items())
    if callable(value) and getattr(value, "__module__", None) == __name__ and not name.startswith("_")
}
FUNCTIONS.update(INPLACE_FUNCTIONS)
__all__ = sorted(FUNCTIONS)

"""3-D (volumetric) layers: ``conv3d``, ``max_pool3d``, ``avg_pool3d``, ``adaptive_avg_pool3d``
and their modules ``Conv3d``, ``MaxPool3d``, ``AvgPool3d``, ``AdaptiveAvgPool3d``, with
``BatchNorm3d``, ``InstanceNorm3d`` and the 3-D padding modules.

Note [Volumetric layers are single ops]
---------------------------------------
Each 3-D layer is one op of :mod:`gradviz.ops._conv`, as the 2-D ones, so the graph shows
torch's one node: ``ConvolutionBackward0``, ``MaxPool3DWithIndicesBackward0``,
``AvgPool3DBackward0``, ``AdaptiveAvgPool3DBackward0`` (:mod:`gradviz.ops._separable`). The
forwards run on numpy;
the backward rules are written with differentiable ops (``fold``/``unfold`` over three dims,
``matmul``), so second derivatives work. An uneven ``padding='same'`` pads first (a
``ConstantPadNdBackward0`` node, as torch).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from ..ops import _conv, _separable
from ..ops._conv import check_dtypes
from ._functional_core import _type_word
from ._module import Module, Parameter
from ._normalization import _BatchNorm, _InstanceNorm
from ._padding import CircularPad2d, ConstantPad2d, ReflectionPad2d, ReplicationPad2d, ZeroPad2d, pad
from .init import _reset_conv

__all__ = ["conv3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "Conv3d", "MaxPool3d",
           "AvgPool3d", "AdaptiveAvgPool3d", "BatchNorm3d", "InstanceNorm3d", "ConstantPad3d",
           "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]


def _triple(value):
    if isinstance(value, int):
        return (value,) * 3
    value = tuple(value)
    return value * 3 if len(value) == 1 else value



def _output_sizes(sizes, kernel, dilation, padding, stride, ceil_mode=False):
    """torch's pooling output sizes: with ``ceil_mode`` a last, partial window is kept when it
    starts inside the input or its left padding."""
    out = []
    for n, k, d, p, s in zip(sizes, kernel, dilation, padding, stride):
        span = n + 2 * p - d * (k - 1) - 1
        m = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (m - 1) * s >= n + p:
            m -= 1
        out.append(m)
    return tuple(out)


def _pad_spatial(x, padding, value=0.0):
    """Pad D, H and W by ``padding`` (pairs ``(before, after)`` per dim, in D, H, W order)."""
    if not any(p for pair in padding for p in pair):
        return x
    flat = []
    for before, after in reversed(padding):  # F.pad lists the last dim first
        flat += [before, after]
    return pad(x, tuple(flat), "constant", value)


def _batched_5d(input, message):
    if input.ndim == 4:
        return input.unsqueeze(0), True
    if input.ndim != 5:
        raise RuntimeError(message)
    return input, False


# ---- convolution ----------------------------------------------------------------------------

def _conv_padding(padding, kernel, dilation, stride):
    """``padding`` as (before, after) pairs per spatial dim; ``"same"`` pads ``d * (k - 1)``
    in total, the odd element after, as torch."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string '{padding}', should be one of "
                             "{'valid', 'same'}")
        if padding == "valid":
            return ((0, 0),) * 3
        if stride != (1, 1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    padding = _triple(padding)
    if min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in padding)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of (N, C, D, H, W) (or (C, D, H, W)) ``input`` with
    (O, C / groups, kd, kh, kw) ``weight``, as ``torch.nn.functional.conv3d`` (one
    ``ConvolutionBackward0``: Note [Volumetric layers are single ops]).

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(1, 1, 3, 3, 3)
    >>> torch.nn.functional.conv3d(x, torch.ones(2, 1, 2, 2, 2)).shape
    gradviz.Size([1, 2, 2, 2, 2])
    """
    x, unbatched = _batched_5d(
        input, f"Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of "
               f"size: {list(input.shape)}")
    stride, dilation = _triple(stride), _triple(dilation)
    if weight.ndim != 5:
        raise RuntimeError(f"expected stride to be a single integer value or a list of "
                           f"{weight.ndim - 2} values to match the convolution dimensions, but "
                           f"got stride={list(stride)}")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    out_channels, kernel = weight.shape[0], tuple(weight.shape[2:])
    if out_channels < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {list(weight.shape)} instead")
    if out_channels % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{list(weight.shape)}] instead")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {weight.shape[1] * groups} channels, "
                           f"but got {x.shape[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {out_channels} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    check_dtypes(x, weight, bias)
    pairs = _conv_padding(padding, kernel, dilation, stride)
    padded = [n + before + after for n, (before, after) in zip(x.shape[2:], pairs)]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(n < span for n, span in zip(padded, spans)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, spans))}). Kernel size can't be greater than "
            "actual input size")
    if any(before != after for before, after in pairs):  # uneven 'same': pad first, as torch
        x = _pad_spatial(x, tuple((0, after - before) for before, after in pairs))
    geometry = _conv._Geometry(kernel, dilation, tuple(before for before, _ in pairs), stride,
                               dims=3)
    out = _conv.conv3d(x, weight, bias, geometry, groups)
    return out.squeeze(0) if unbatched else out


# ---- pooling --------------------------------------------------------------------------------

def _pool_geometry(input, kernel_size, stride, padding, dilation):
    kernel = _triple(kernel_size)
    stride = kernel if stride is None or stride == [] else _triple(stride)
    padding, dilation = _triple(padding), _triple(dilation)
    if min(stride) == 0:
        raise RuntimeError("stride should not be zero")
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")
    return kernel, stride, padding, dilation


def _pool_input(input):
    if input.ndim not in (4, 5) or input.numel() == 0:
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    return _batched_5d(input, "")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum over each window of (N, C, D, H, W) or (C, D, H, W) ``input``; with
    ``return_indices``, the flat index (into D * H * W) of each maximum, as torch's."""
    x, unbatched = _pool_input(input)
    stride_arg = () if stride is None or stride == [] else _triple(stride)
    kernel, stride, padding, dilation = _pool_geometry(input, kernel_size, stride, padding,
                                                       dilation)
    sizes = tuple(x.shape[2:])
    out_sizes = _output_sizes(sizes, kernel, dilation, padding, stride, ceil_mode)
    if min(out_sizes) < 1:
        raise RuntimeError(f"Given input size: ({x.shape[1]}x{'x'.join(map(str, sizes))}). "
                           f"Calculated output size: ({x.shape[1]}x"
                           f"{'x'.join(str(max(n, 0)) for n in out_sizes)}). Output size is too "
                           "small")
    fill = -math.inf if x.dtype.is_floating_point else int(np.iinfo(x.numpy(force=True).dtype).min)
    geometry = _conv._Geometry(kernel, dilation, padding, stride, dims=3, ceil_mode=ceil_mode)
    out, indices = _conv.max_pool3d(input, geometry, fill, stride_arg)  # unbatched as is
    return (out, _ops.tensor(indices)) if return_indices else out


def _window_counts(sizes, kernel, padding, stride, out_sizes, with_padding):
    """The number of elements each window covers, shaped (D', H', W'): of the input alone, or
    of the input and its padding (a ceil_mode window is cut at the padding's end, as torch)."""
    counts = []
    for n, k, p, s, m in zip(sizes, kernel, padding, stride, out_sizes):
        starts = np.arange(m) * s - p
        low, high = (-p, n + p) if with_padding else (0, n)
        counts.append(np.minimum(starts + k, high) - np.maximum(starts, low))
    return counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean over each window of (N, C, D, H, W) or (C, D, H, W) ``input``: zero padding
    counted unless ``count_include_pad=False``, or the sum over ``divisor_override``. As torch,
    int64 inputs give int64 means (truncated toward zero); other integer types are refused."""
    x, unbatched = _pool_input(input)
    if not (x.dtype.is_floating_point or x.dtype is _dtypes.int64):
        raise NotImplementedError(
            f"\"avg_pool3d_out_frame\" not implemented for '{_type_word(x.dtype)}'")
    stride_arg = () if stride is None or stride == [] else _triple(stride)
    kernel, stride, padding, dilation = _pool_geometry(input, kernel_size, stride, padding, 1)
    sizes = tuple(x.shape[2:])
    if any(n + 2 * p < k for n, p, k in zip(sizes, padding, kernel)):
        raise RuntimeError(
            f"input image (T: {sizes[0]} H: {sizes[1]} W: {sizes[2]}) smaller than kernel size "
            f"(kT: {kernel[0]} kH: {kernel[1]} kW: {kernel[2]})")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out_sizes = _output_sizes(sizes, kernel, dilation, padding, stride, ceil_mode)
    if divisor_override is not None:
        divisor = divisor_override
    else:
        divisor = _window_counts(sizes, kernel, padding, stride, out_sizes, count_include_pad)
        if np.all(divisor == divisor.flat[0]):
            divisor = int(divisor.flat[0])
    geometry = _conv._Geometry(kernel, 1, padding, stride, dims=3, ceil_mode=ceil_mode)
    if isinstance(divisor, np.ndarray):
        divisor = divisor.reshape(-1)
    if x.dtype is _dtypes.int64:  # C's integer division, truncating toward zero, as torch's
        sums = _conv.avg_pool3d(x.to(_dtypes.float64), geometry, 1).numpy()  # exact below 2**53
        sums = np.rint(sums).astype(np.int64)
        divisor = np.asarray(divisor, dtype=np.int64)
        if divisor.ndim:
            divisor = divisor.reshape(sums.shape[2:])
        out = _ops.tensor(np.abs(sums) // np.abs(divisor) * (np.sign(sums) * np.sign(divisor)))
    else:
        if isinstance(divisor, np.ndarray):
            divisor = divisor.astype(x.numpy(force=True).dtype)
        return _conv.avg_pool3d(input, geometry, divisor, stride_arg=stride_arg,  # unbatched
                                count_include_pad=count_include_pad,    # as is, as torch
                                divisor_override=divisor_override)
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool3d(input, output_size):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) ``input`` to ``output_size`` (an int,
    or three, None keeping that dim) with torch's overlapping bins."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got "
                           f"{list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f"\"adaptive_avg_pool3d_cpu\" not implemented for '{_type_word(input.dtype)}'")
    sizes = (output_size,) * 3 if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(sizes) != 3:
        raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
    spatial = tuple(input.shape[-3:])
    sizes = tuple(n if m is None else int(m) for m, n in zip(sizes, spatial))
    if sizes == (1, 1, 1):  # torch takes the mean (a MeanBackward1 node)
        return input.mean((-3, -2, -1), keepdim=True)
    return _separable.adaptive_avg_pool3d(input, sizes)


# ---- modules --------------------------------------------------------------------------------

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class Conv3d(Module):
    """3-D convolution (cross-correlation) of (N, C_in, D, H, W) inputs, initialised as torch
    (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from gradviz's generator); ``padding_mode`` pads with
    :func:`gradviz.nn.functional.pad` first, as torch.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nn.Conv3d(4, 6, 3, padding=1, groups=2)
    Conv3d(4, 6, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), groups=2)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _triple(kernel_size), _triple(stride)
        self.dilation = _triple(dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and self.stride != (1, 1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _triple(padding)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_ops.empty(out_channels, in_channels // groups,
                                           *self.kernel_size, dtype=dtype))
        self.bias = Parameter(_ops.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As :meth:`Conv2d.reset_parameters`."""
        _reset_conv(self)

    def forward(self, input):
        if self.padding_mode == "zeros":
            return conv3d(input, self.weight, self.bias, self.stride, self.padding,
                          self.dilation, self.groups)
        pairs = _conv_padding(self.padding, self.kernel_size, self.dilation, self.stride)
        flat = []
        for before, after in reversed(pairs):
            flat += [before, after]
        return conv3d(pad(input, tuple(flat), self.padding_mode), self.weight, self.bias,
                      self.stride, 0, self.dilation, self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0, 0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class MaxPool3d(Module):
    """The maximum over each window of (N, C, D, H, W) inputs (see :func:`max_pool3d`)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(Module):
    """The mean over each window of (N, C, D, H, W) inputs (see :func:`avg_pool3d`)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    """Average pooling to ``output_size`` (see :func:`adaptive_avg_pool3d`)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) inputs (each channel over the batch and voxels)."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""

    _no_batch_dim = 4

    def _check_input_dim(self, input):
        if input.dim() not in (4, 5):
            raise ValueError(f"expected 4D or 5D input (got {input.dim()}D input)")


class ConstantPad3d(ConstantPad2d):
    """Pad the last three dims with ``value``: ``padding`` is an int or
    ``(left, right, top, bottom, front, back)``."""

    _dims = 3


class ZeroPad3d(ZeroPad2d):
    """Pad the last three dims with zeros."""

    _dims = 3


class ReflectionPad3d(ReflectionPad2d):
    """Mirror the last three dims at their edges."""

    _dims = 3


class ReplicationPad3d(ReplicationPad2d):
    """Repeat the edge values of the last three dims."""

    _dims = 3


class CircularPad3d(CircularPad2d):
    """Wrap the last three dims around (periodic padding)."""

    _dims = 3

"""Convolution and pooling layers: ``Conv2d``, ``MaxPool2d``, ``AvgPool2d``,
``AdaptiveAvgPool2d``, ``ConvTranspose2d`` and their 1-D versions (ops in
:mod:`gradviz.ops._conv` and :mod:`gradviz.ops._conv_transpose`)."""

from __future__ import annotations

import math

from .. import ops as _ops
from ..ops._conv import _pair
from . import functional as F
from ._module import Module, Parameter
from ._padding import check_padding_mode, pad_for_conv
from .init import _reset_conv, _uniform_

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Conv1d", "MaxPool1d", "AvgPool1d",
           "AdaptiveAvgPool1d", "ConvTranspose1d", "ConvTranspose2d"]


class Conv2d(Module):
    """2-D convolution (cross-correlation) of (N, C_in, H, W) inputs with ``out_channels``
    filters of ``kernel_size``, initialised as torch does (kaiming-uniform with ``a=sqrt(5)``:
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from gradviz's generator).

    Examples
    --------
    >>> import gradviz as torch
    >>> conv = torch.nn.Conv2d(1, 6, kernel_size=5, padding=2)
    >>> conv
    Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))
    >>> conv(torch.zeros(8, 1, 28, 28)).shape
    gradviz.Size([8, 6, 28, 28])
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
        check_padding_mode(padding_mode)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and _pair(stride) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_ops.empty(out_channels, in_channels // groups, *self.kernel_size,
                                           dtype=dtype))
        self.bias = Parameter(_ops.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch's kaiming-uniform with
        ``a=sqrt(5)``), fan_in = in_channels / groups * prod(kernel_size)."""
        _reset_conv(self)

    def forward(self, input):
        if self.padding_mode != "zeros":
            padded = pad_for_conv(input, self.padding, self.kernel_size, self.dilation, self.padding_mode)
            return F.conv2d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class MaxPool2d(Module):
    """2-D max pooling over windows of ``kernel_size``. Mirrors ``torch.nn.MaxPool2d``."""

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
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """2-D average pooling over windows of ``kernel_size``. Mirrors ``torch.nn.AvgPool2d``."""

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
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """2-D average pooling whose windows are chosen to give ``output_size``.

    Mirrors ``torch.nn.AdaptiveAvgPool2d``."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _single(value):
    return (value,) if isinstance(value, int) else tuple(value)


class Conv1d(Module):
    """1-D convolution of (N, C_in, L) inputs, initialised as torch does (from gradviz's
    generator)."""

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
        check_padding_mode(padding_mode)
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string '{padding}', should be one of "
                             "{'valid', 'same'}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride)
        self.padding = padding if isinstance(padding, str) else _single(padding)
        self.dilation = _single(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_ops.empty(out_channels, in_channels // groups,
                                           self.kernel_size[0], dtype=dtype))
        self.bias = Parameter(_ops.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As :meth:`Conv2d.reset_parameters`."""
        _reset_conv(self)

    def forward(self, input):
        if self.padding_mode != "zeros":
            padded = pad_for_conv(input, self.padding, self.kernel_size, self.dilation, self.padding_mode)
            return F.conv1d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,):
            text += f", padding={self.padding}"
        if self.dilation != (1,):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class MaxPool1d(MaxPool2d):
    """1-D max pooling over windows of ``kernel_size``. Mirrors ``torch.nn.MaxPool1d``."""

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """1-D average pooling over windows of ``kernel_size``. Mirrors ``torch.nn.AvgPool1d``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """1-D average pooling whose windows are chosen to give ``output_size``.

    Mirrors ``torch.nn.AdaptiveAvgPool1d``."""

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


# ---- transposed convolution ---------------------------------------------------------------------

class _ConvTransposeNd(Module):
    """The shared parts of ``ConvTranspose1d`` and ``ConvTranspose2d``: ``weight`` is
    (in_channels, out_channels / groups, *kernel_size), initialised as torch does
    (kaiming-uniform with ``a=sqrt(5)``, fan-in ``out_channels / groups * prod(kernel_size)``),
    from gradviz's generator."""

    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding,
                 groups, bias, dilation, padding_mode, dtype):
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = True
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_ops.empty(in_channels, out_channels // groups, *self.kernel_size,
                                           dtype=dtype))
        if bias:
            self.bias = Parameter(_ops.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        _uniform_(self.weight, bound)
        if self.bias is not None:
            _uniform_(self.bias, bound)

    def _output_padding(self, input, output_size):
        """``output_padding``, or the padding that gives ``output_size`` (torch's rule)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        batch_dims = 2 if input.dim() == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == batch_dims + n:
            output_size = output_size[batch_dims:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have "
                             f"{n} or {batch_dims + n} elements (got {len(output_size)})")
        smallest = [(input.size(d + batch_dims) - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        for size, low, high in zip(output_size, smallest, largest):
            if size < low or size > high:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {smallest} to {largest} (for an input of "
                                 f"{input.size()[2:]})")
        return tuple(size - low for size, low in zip(output_size, smallest))

    def extra_repr(self) -> str:
        n = self._dims
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


def _ntuple(value, n):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    return value * n if len(value) == 1 else value


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-D convolution ("deconvolution") of (N, C_in, H, W) inputs: each input
    pixel spreads a ``kernel_size`` patch over an output ``stride`` times larger (a DCGAN
    generator's up-sampling layer). ``forward(input, output_size=None)`` picks the
    ``output_padding`` that gives ``output_size``.

    Examples
    --------
    >>> import gradviz as torch
    >>> up = torch.nn.ConvTranspose2d(8, 4, kernel_size=4, stride=2, padding=1)
    >>> up
    ConvTranspose2d(8, 4, kernel_size=(4, 4), stride=(2, 2), padding=(1, 1))
    >>> up(torch.zeros(1, 8, 7, 7)).shape
    gradviz.Size([1, 4, 14, 14])
    """

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, dtype)

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-D convolution of (N, C_in, L) inputs (see :class:`ConvTranspose2d`)."""

    _dims = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, dtype)

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)

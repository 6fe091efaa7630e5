"""Up-sampling and parametric layers: ``Upsample`` (and the older ``UpsamplingNearest2d`` /
``UpsamplingBilinear2d``), ``PixelShuffle``, ``PixelUnshuffle``, ``PReLU`` and ``Bilinear``
(functional forms in :mod:`gradviz.nn._functional_layers`)."""

from __future__ import annotations

import math

from .. import ops as _ops
from ..autograd import no_grad
from . import functional as F
from ._module import Module, Parameter
from .init import _uniform_

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle",
           "PixelUnshuffle", "PReLU", "Bilinear"]


class Upsample(Module):
    """Resize the spatial dims of its input to ``size`` or by ``scale_factor`` with
    :func:`gradviz.nn.functional.interpolate` (``mode`` ``"nearest"``, ``"linear"``,
    ``"bilinear"``, ``"trilinear"``, ``"nearest-exact"``).

    Examples
    --------
    >>> import gradviz as torch
    >>> up = torch.nn.Upsample(scale_factor=2, mode="bilinear")
    >>> up
    Upsample(scale_factor=2.0, mode='bilinear')
    >>> up(torch.zeros(1, 3, 4, 4)).shape
    gradviz.Size([1, 3, 8, 8])
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            text = f"scale_factor={self.scale_factor!r}"
        else:
            text = f"size={self.size!r}"
        return text + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode="nearest")`` (torch's older name)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode="bilinear", align_corners=True)`` (torch's older
    name)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r), the sub-pixel convolution's up-sampling.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nn.PixelShuffle(2)(torch.zeros(1, 8, 3, 3)).shape
    gradviz.Size([1, 2, 6, 6])
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), the inverse of :class:`PixelShuffle`."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with a learned slope: one for all channels, or one
    per channel (dim 1) with ``num_parameters=C``; ``weight`` starts at ``init`` (0.25).

    Examples
    --------
    >>> import gradviz as torch
    >>> act = torch.nn.PReLU()
    >>> act
    PReLU(num_parameters=1)
    >>> act(torch.tensor([-2.0, 3.0]))
    tensor([-0.5000,  3.0000], grad_fn=<PreluKernelBackward0>)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_ops.empty(num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Bilinear(Module):
    """``y[o] = x1 @ weight[o] @ x2 + bias[o]`` for (*, in1_features) and (*, in2_features)
    inputs; ``weight`` (out_features, in1_features, in2_features) and ``bias`` are
    U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as in torch (from gradviz's generator).

    Examples
    --------
    >>> import gradviz as torch
    >>> layer = torch.nn.Bilinear(3, 4, 2)
    >>> layer
    Bilinear(in1_features=3, in2_features=4, out_features=2, bias=True)
    >>> layer(torch.zeros(5, 3), torch.zeros(5, 4)).shape
    gradviz.Size([5, 2])
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_ops.empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(_ops.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(1))
        _uniform_(self.weight, bound)
        if self.bias is not None:
            _uniform_(self.bias, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

"""``ConvTranspose3d`` and ``LazyConvTranspose3d``, the layers of
:func:`gradviz.nn.functional.conv_transpose3d` (kept apart from the function: the layers build on
``_conv.py``, which imports ``nn.functional``, and ``nn.functional`` imports the function)."""

from __future__ import annotations

from ._conv import _ConvTransposeNd
from ._conv_transpose3d import conv_transpose3d
from ._lazy import _lazy_conv_init, _LazyConvMixin

__all__ = ["ConvTranspose3d", "LazyConvTranspose3d"]


class ConvTranspose3d(_ConvTransposeNd):
    """The transposed 3-D convolution of (N, C_in, D, H, W) inputs (see ``ConvTranspose2d``);
    ``forward(input, output_size=None)`` picks the ``output_padding`` that gives
    ``output_size``. Mirrors ``torch.nn.ConvTranspose3d``.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nn.ConvTranspose3d(4, 2, kernel_size=3, stride=2, padding=1)
    ConvTranspose3d(4, 2, kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1))
    """

    _dims = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, dtype)

    def forward(self, input, output_size=None):
        return conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups,
                                self.dilation)


class LazyConvTranspose3d(_LazyConvMixin, ConvTranspose3d):
    """A :class:`ConvTranspose3d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConvTranspose3d``."""

    cls_to_become = ConvTranspose3d
    _spatial_dims = 3
    _transposed = True

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)

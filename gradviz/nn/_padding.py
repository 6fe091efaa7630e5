"""``nn.functional.pad`` in every mode (``constant``, ``reflect``, ``replicate``, ``circular``)
and the padding modules ``ZeroPad1d/2d``, ``ConstantPad1d/2d``, ``ReflectionPad1d/2d``,
``ReplicationPad1d/2d`` and ``CircularPad1d/2d``.

Constant padding is gradviz's ``ConstantPadNdBackward0`` op; the other modes gather the padded
dims with ``index_select`` (one ``IndexSelectBackward0`` node per padded dim, where torch records
one ``ReflectionPad2dBackward0``, ...), so first and second derivatives follow from that op.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import _int_arg
from ._module import Module

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _source_index(mode, n, left, right):
    """For each position of a dim of length ``n`` padded by ``left``/``right`` (>= 0), the
    position of ``input`` it copies."""
    i = np.arange(-left, n + right)
    if mode == "reflect":
        return (n - 1) - np.abs((n - 1) - np.abs(i))
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    return i % n  # circular


def _check_non_constant(input, pad, mode):
    dims = len(pad) // 2
    if dims > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")
    if len(pad) % 2 or dims not in (1, 2, 3) or input.ndim not in (dims + 1, dims + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    shape = list(input.shape)
    for k in range(dims):
        d = input.ndim - 1 - k
        left, right = int(pad[2 * k]), int(pad[2 * k + 1])
        if mode == "reflect" and (left >= shape[d] or right >= shape[d]):
            raise RuntimeError(
                f"Argument #{2 * k + 4}: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({left}, {right}) at dimension {d} of input "
                f"{shape}")
        if mode == "circular" and (left > shape[d] or right > shape[d]):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if shape[d] == 0:
            raise RuntimeError(f"{mode} padding: the padded dimension {d} of the input "
                               f"{shape} is empty; expected non-zero sizes")


def pad(input, pad, mode: str = "constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)`` starts
    with the last dim; negative amounts crop. ``mode`` is ``"constant"`` (with ``value``,
    default 0), ``"reflect"`` (mirror without repeating the edge), ``"replicate"`` (repeat the
    edge) or ``"circular"`` (wrap around); the last three pad 1 to 3 dims of a batched or
    unbatched input, as in torch.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([[1.0, 2.0, 3.0]])
    >>> torch.nn.functional.pad(x, (2, 1), mode="reflect")
    tensor([[3., 2., 1., 2., 3., 2.]])
    """
    pad = tuple(_int_arg(p, "pad") for p in pad)  # (a float amount is torch's TypeError)
    if mode == "constant":
        return _ops.pad(input, pad, "constant", value)
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    _check_non_constant(input, pad, mode)
    # crop first (negative amounts), then pad the cropped tensor, as torch does
    crop = [min(int(p), 0) for p in pad]
    out = _ops.pad(input, crop) if any(crop) else input
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        left, right = max(int(pad[2 * k]), 0), max(int(pad[2 * k + 1]), 0)
        if left or right:
            index = _source_index(mode, out.shape[d], left, right)
            out = _ops.index_select(out, d, _ops.tensor(index, dtype=_dtypes.int64))
    return out


# ---- modules ---------------------------------------------------------------------------------

def _ntuple(padding, n):
    return (padding,) * (2 * n) if isinstance(padding, int) else tuple(padding)


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._dims)

    def forward(self, input):
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ConstantPad1d(_PadNd):
    """Pad the last dim of a (C, L) or (N, C, L) input with ``value``: ``padding`` is an int
    or ``(left, right)``."""

    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad2d(ConstantPad1d):
    """Pad the last two dims with ``value``: ``padding`` is an int or
    ``(left, right, top, bottom)``."""

    _dims = 2


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros: ``padding`` is an int or ``(left, right)``."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    """Pad the last two dims with zeros: ``padding`` is an int or
    ``(left, right, top, bottom)``.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nn.ZeroPad2d((1, 0, 0, 1))(torch.ones(1, 1, 1, 1))
    tensor([[[[0., 1.],
              [0., 0.]]]])
    """

    _dims = 2


class ReflectionPad1d(_PadNd):
    """Mirror the last dim at its edges (the edge itself is not repeated): ``padding`` is an
    int or ``(left, right)``, each smaller than the input's last dim."""

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Mirror the last two dims at their edges, as style-transfer and CycleGAN generators do
    before a convolution: ``padding`` is an int or ``(left, right, top, bottom)``.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nn.ReflectionPad2d(1)(torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]]))
    tensor([[[[4., 3., 4., 3.],
              [2., 1., 2., 1.],
              [4., 3., 4., 3.],
              [2., 1., 2., 1.]]]])
    """

    _dims = 2


class ReplicationPad1d(_PadNd):
    """Repeat the edge values of the last dim: ``padding`` is an int or ``(left, right)``."""

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Repeat the edge values of the last two dims: ``padding`` is an int or
    ``(left, right, top, bottom)``."""

    _dims = 2


class CircularPad1d(_PadNd):
    """Wrap the last dim around (periodic padding): ``padding`` is an int or
    ``(left, right)``, each at most the input's last dim."""

    _mode = "circular"

    def forward(self, input):
        if input.ndim not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got "
                             f"{input.ndim}D input)")
        return super().forward(input)


class CircularPad2d(CircularPad1d):
    """Wrap the last two dims around (periodic padding): ``padding`` is an int or
    ``(left, right, top, bottom)``."""

    _dims = 2


__all__ += ["ConstantPad1d", "ConstantPad2d", "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d",
            "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d",
            "CircularPad2d"]


# ---- a convolution's padding_mode ---------------------------------------------------------------

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def check_padding_mode(padding_mode: str) -> None:
    """Refuse a ``padding_mode`` torch's convolutions do not know, with torch's message."""
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode='{padding_mode}'")


def pad_for_conv(input, padding, kernel_size, dilation, padding_mode: str):
    """``input`` padded in ``padding_mode`` by a convolution's ``padding`` (one number per
    spatial dim, or "same"/"valid"; "same" pads ``d * (k - 1)`` in all, the odd element after),
    as torch's convolution modules do before convolving with no padding."""
    if isinstance(padding, str):
        totals = [d * (k - 1) if padding == "same" else 0 for k, d in zip(kernel_size, dilation)]
        pairs = [(total // 2, total - total // 2) for total in totals]
    else:
        pairs = [(p, p) for p in padding]
    flat: list[int] = []
    for before, after in reversed(pairs):
        flat += [before, after]
    return pad(input, tuple(flat), padding_mode)

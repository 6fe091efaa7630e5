"""Small activations and pools: ``glu``/``GLU``, ``threshold``/``Threshold``,
``hardshrink``/``Hardshrink``, ``softshrink``/``Softshrink``, ``Softmax2d``,
``adaptive_max_pool1d/2d``/``AdaptiveMaxPool1d/2d`` (with ``return_indices``), and the
``Unfold``/``Fold`` modules over ``F.unfold``/``F.fold``. Each is a composite of differentiable
gradviz ops (``where``, ``sigmoid``, ``gather``), so first and second derivatives follow."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from ..ops import _activation
from ..ops._inplace import inplace as _inplace
from ..ops._registry import apply as _apply
from . import _functional_core as F
from ._module import Module

__all__ = ["glu", "threshold", "hardshrink", "softshrink", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d"]


def glu(input, dim: int = -1):
    """The gated linear unit: ``a * sigmoid(b)`` with ``a``, ``b`` the two halves of
    ``input`` along ``dim`` (one ``GluBackward0`` node)."""
    return _activation.glu(input, dim)


def threshold(input, threshold, value, inplace: bool = False):
    """``input`` where it is greater than ``threshold``, ``value`` elsewhere."""
    if inplace:  # its own op, ThresholdBackward1 (Note [In-place activations])
        return _inplace(input, lambda old: _activation.threshold_result(old, threshold, value))
    return _apply(_activation.THRESHOLD, input, threshold=threshold, value=value)


def hardshrink(input, lambd: float = 0.5):
    """``input`` where ``|input| > lambd``, 0 elsewhere."""
    return _apply(_activation.HARDSHRINK, input, lambd=lambd)


def softshrink(input, lambd: float = 0.5):
    """``input - lambd`` above ``lambd``, ``input + lambd`` below ``-lambd``, 0 between."""
    top = (float(np.finfo(input.detach().numpy().dtype).max) if input.dtype.is_floating_point
           else math.inf)
    if not 0 <= lambd <= top:
        name = {"float32": "Float", "float64": "Double", "float16": "Half"}.get(
            str(input.dtype).split(".")[-1], str(input.dtype))
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {name}, but "
                           f"found {lambd:g}")
    return _apply(_activation.SOFTSHRINK, input, lambd=lambd)


# ---- adaptive max pooling --------------------------------------------------------------------

def _bins(length, size):
    """torch's adaptive bins: output ``i`` pools ``[floor(i * L / n), ceil((i + 1) * L / n))``."""
    return [((i * length) // size, -(-((i + 1) * length) // size)) for i in range(size)]


def _window_choice(block):
    """Position in the last axis of each window's maximum: the first maximum; with NaNs, the
    last NaN (torch's loop takes ``val > max || isnan``)."""
    nan = np.isnan(block)
    if not nan.any():  # the common case: one argmax, no NaN bookkeeping
        return block.argmax(-1)
    last_nan = nan.shape[-1] - 1 - nan[..., ::-1].argmax(-1)
    return np.where(nan.any(-1), last_nan, block.argmax(-1))


def _even_windows_argmax(data, flat, spatial, sizes):
    """The flat positions of the maxima when every spatial size is a multiple of its output size
    (Note [Even adaptive windows])."""
    # Note [Even adaptive windows]
    # When n % s == 0 torch's bins [floor(i n / s), ceil((i + 1) n / s)) are the disjoint
    # windows [i k, (i + 1) k) with k = n / s, so one reshape splits each spatial axis n into
    # (s, k); moving the k axes last and merging them lists every window's elements in the same
    # row-major order as the general loop's block, so _window_choice picks the same element.
    lead = data.shape[:data.ndim - len(spatial)]
    kernel = tuple(n // s for n, s in zip(spatial, sizes))
    split = lead + tuple(v for pair in zip(sizes, kernel) for v in pair)
    outer = tuple(range(len(lead)))
    order = outer + tuple(len(lead) + 2 * d for d in range(len(sizes))) \
        + tuple(len(lead) + 2 * d + 1 for d in range(len(sizes)))
    blocks = data.reshape(split).transpose(order).reshape(lead + sizes + (-1,))
    positions = flat.reshape(split[len(lead):]).transpose(
        [o - len(lead) for o in order[len(lead):]]).reshape(sizes + (-1,))
    choice = _window_choice(blocks)
    return np.take_along_axis(np.broadcast_to(positions, lead + positions.shape),
                              choice[..., None], -1)[..., 0].astype(np.int64)


def _adaptive_max(input, sizes, what):
    """Max over torch's adaptive bins of the last ``len(sizes)`` dims; the values are gathered
    from ``input`` (``GatherBackward0``), the indices are flat over those dims."""
    spatial = tuple(input.shape[-len(sizes):])
    lead = tuple(input.shape[:-len(sizes)])
    sizes = tuple(s if s is not None else n for s, n in zip(sizes, spatial))
    for d, n in enumerate(spatial):
        if n == 0:
            raise RuntimeError(f"{what}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {input.ndim - len(spatial) + d} being empty")
    data = input.detach().numpy().reshape(lead + spatial)
    flat = np.arange(int(np.prod(spatial))).reshape(spatial)
    if all(s and n % s == 0 for n, s in zip(spatial, sizes)):
        index = _even_windows_argmax(data, flat, spatial, sizes)
    else:
        index = np.zeros(lead + sizes, dtype=np.int64)
        for out_pos in np.ndindex(*sizes):
            region = tuple(slice(*_bins(n, s)[o]) for n, s, o in zip(spatial, sizes, out_pos))
            block = data[(Ellipsis,) + region]
            block = block.reshape(lead + (math.prod(block.shape[len(lead):]),))  # lead may hold 0
            index[(Ellipsis,) + out_pos] = flat[region].reshape(-1)[_window_choice(block)]
    indices = _ops.tensor(index, dtype=_dtypes.int64)
    values = _ops.gather(input.flatten(-len(sizes)), -1,
                         indices.flatten(-len(sizes))).reshape(lead + sizes)
    return values, indices


def _output_sizes(output_size, n, what):
    sizes = (output_size,) * n if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(sizes) != n:
        if n == 1:
            raise RuntimeError(f"{what}() argument 'output_size' should contain one int (got "
                               f"{len(sizes)})")
        raise RuntimeError(f"{what}(): internal error: output_size.size() must be {n}")
    return sizes


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    """The max over ``output_size`` near-equal windows of the last dim of a (N, C, L) or
    (C, L) input; ``return_indices`` also gives each max's position in L."""
    sizes = _output_sizes(output_size, 1, "adaptive_max_pool1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor "
                           "for argument #1 'self' (while checking arguments for "
                           "adaptive_max_pool1d)")
    values, indices = _adaptive_max(input, sizes, "adaptive_max_pool1d")
    return (values, indices) if return_indices else values


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """The max over an ``output_size`` grid of near-equal windows of a (N, C, H, W) or
    (C, H, W) input (``None`` keeps that dim's size); ``return_indices`` also gives each max's
    position in the flattened H * W plane.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.arange(16.0).reshape(1, 4, 4)
    >>> torch.nn.functional.adaptive_max_pool2d(x, 2, return_indices=True)
    (tensor([[[ 5.,  7.],
             [13., 15.]]]), tensor([[[ 5,  7],
             [13, 15]]]))
    """
    sizes = _output_sizes(output_size, 2, "adaptive_max_pool2d")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{list(input.shape)}")
    values, indices = _adaptive_max(input, sizes, "adaptive_max_pool2d")
    return (values, indices) if return_indices else values


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    """The max over an ``output_size`` grid of near-equal windows of a (N, C, D, H, W) or
    (C, D, H, W) input (``None`` keeps that dim's size); ``return_indices`` also gives each
    max's position in the flattened D * H * W volume."""
    sizes = _output_sizes(output_size, 3, "adaptive_max_pool3d")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                           f"{list(input.shape)}")
    values, indices = _adaptive_max(input, sizes, "adaptive_max_pool3d")
    return (values, indices) if return_indices else values


# ---- modules ---------------------------------------------------------------------------------

class GLU(Module):
    """The gated linear unit along ``dim`` (see :func:`glu`)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """``x`` above ``threshold``, ``value`` elsewhere (see :func:`threshold`)."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class RReLU(Module):
    """Randomized leaky ReLU: per-element slopes from ``[lower, upper]`` in training, their
    mean in eval (see :func:`gradviz.nn.functional.rrelu`)."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, 0 elsewhere."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """``x`` moved ``lambd`` towards 0, and 0 within ``lambd`` of it."""

    def forward(self, input):
        return softshrink(input, self.lambd)


class Softmax2d(Module):
    """Softmax over the channels of each pixel of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             "instead")
        return F.softmax(input, -3)


class AdaptiveMaxPool1d(Module):
    """The max over ``output_size`` near-equal windows of the last dim (see
    :func:`adaptive_max_pool1d`)."""

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """The max over an ``output_size`` grid of near-equal windows (see
    :func:`adaptive_max_pool2d`)."""

    def forward(self, input):
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    """The max over an ``output_size`` grid of near-equal 3-D windows (see
    :func:`adaptive_max_pool3d`)."""

    def forward(self, input):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)


class Unfold(Module):
    """(N, C, H, W) -> (N, C * kh * kw, L): the sliding blocks as columns (see
    :func:`gradviz.nn.functional.unfold`)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """(N, C * kh * kw, L) -> (N, C, H, W): blocks summed back into place (see
    :func:`gradviz.nn.functional.fold`)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


__all__ += ["GLU", "Threshold", "Hardshrink", "Softshrink", "Softmax2d", "AdaptiveMaxPool1d",
            "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Unfold", "Fold"]

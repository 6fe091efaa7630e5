"""The transposed 3-D convolution ``conv_transpose3d`` (its layer, ``ConvTranspose3d``, is in
``_conv_transpose3d_layer.py``).

Note [Transposed convolution as a convolution]
----------------------------------------------
A transposed convolution with stride ``s``, padding ``p``, dilation ``d`` and output padding
``o`` equals a stride-1 convolution, with the same dilation and groups, of the input spread
out with ``s - 1`` zeros between its values and padded by ``d * (k - 1) - p`` on each side
(plus ``o`` at the end), against the weight with its in/out channels swapped per group and its
kernel flipped. gradviz builds it that way from differentiable ops: the output's ``grad_fn``
is the convolution's ``ConvolutionBackward0``, as in PyTorch, and every derivative follows
from the convolution's; the steps before it (the spread input's ``CopySlices``, the weight's
``FlipBackward0``) are nodes of their own, where PyTorch records the whole layer as one node.
"""

from __future__ import annotations

import numbers

from ..ops import _conv
from ..ops._conv import check_dtypes
from ._padding import pad

__all__ = ["conv_transpose3d"]


def _triple(value):
    if isinstance(value, numbers.Integral):
        return (int(value),) * 3
    value = tuple(int(v) for v in value)
    return value * 3 if len(value) == 1 else value


def _check(x, weight, bias, groups, stride, dilation, output_padding, padding):
    """PyTorch's checks of ``conv_transpose3d``, in its order and words."""
    if weight.ndim != 5:
        raise RuntimeError(f"expected stride to be a single integer value or a list of "
                           f"{weight.ndim - 2} values to match the convolution dimensions, but "
                           f"got stride={list(stride)}")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{list(weight.shape)}] instead")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {weight.shape[0]} channels, but got "
                           f"{x.shape[1]} channels instead")
    out_channels = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"bias to be 1-dimensional with {out_channels} elements, but got bias "
                           f"of size {list(bias.shape)} instead")
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation)):
        words = " ".join(
            f"{name}_{axis}: {value}" for name, values in
            (("output_padding", output_padding), ("stride", stride), ("dilation", dilation))
            for axis, value in zip(("depth", "height", "width"), values))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but "
                           f"got {words}")
    sizes = tuple(x.shape[2:])
    out = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
           zip(sizes, stride, padding, dilation, weight.shape[2:], output_padding)]
    if min(out) < 1:
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, sizes))}). "
                           f"Calculated output size per channel: ({' x '.join(map(str, out))}). "
                           f"Output size is too small")
    check_dtypes(x, weight, bias, transposed=True)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 3-D convolution of (N, C_in, D, H, W) (or (C_in, D, H, W)) ``input``
    with (C_in, C_out / groups, kd, kh, kw) ``weight``: each output size is
    ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``. Mirrors
    ``torch.nn.functional.conv_transpose3d`` (Note [Transposed convolution as a convolution]).

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(1, 1, 2, 2, 2)
    >>> torch.nn.functional.conv_transpose3d(x, torch.ones(1, 1, 2, 2, 2), stride=2).shape
    gradviz.Size([1, 1, 4, 4, 4])
    """
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to conv_transpose3d, "
                           f"but got input of size: {list(input.shape)}")
    x = input.unsqueeze(0) if input.ndim == 4 else input
    stride, padding = _triple(stride), _triple(padding)
    output_padding, dilation = _triple(output_padding), _triple(dilation)
    _check(x, weight, bias, groups, stride, dilation, output_padding, padding)
    kernel = tuple(weight.shape[2:])
    if max(stride) > 1:  # the input's values `stride` apart, zeros between them
        n, channels = x.shape[:2]
        spread = x.new_zeros((n, channels) + tuple((size - 1) * s + 1
                                                   for size, s in zip(x.shape[2:], stride)))
        spread[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = x
        x = spread
    before = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding)]
    after = [b + o for b, o in zip(before, output_padding)]
    if min(before + after) < 0:  # more padding than the kernel spans: crop instead
        x = x[(slice(None), slice(None)) + tuple(
            slice(max(-b, 0), size - max(-a, 0)) for b, a, size in zip(before, after, x.shape[2:]))]
    widths = []
    for b, a in zip(reversed(before), reversed(after)):  # pad() takes the last dim first
        widths += [max(b, 0), max(a, 0)]
    if any(widths):
        x = pad(x, tuple(widths))
    c_in, c_out_per_group = weight.shape[:2]
    flipped = weight.reshape((groups, c_in // groups, c_out_per_group) + kernel).transpose(1, 2)
    flipped = flipped.reshape((groups * c_out_per_group, c_in // groups) + kernel).flip((2, 3, 4))
    geometry = _conv._Geometry(kernel, dilation, (0, 0, 0), (1, 1, 1), dims=3)
    out = _conv.conv3d(x, flipped, bias, geometry, groups)
    return out.squeeze(0) if input.ndim == 4 else out

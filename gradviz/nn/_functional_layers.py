"""The functional forms of the up-sampling and parametric layers, re-exported by
:mod:`gradviz.nn.functional`: ``conv_transpose1d``/``conv_transpose2d`` (one
``ConvolutionBackward0``), ``interpolate`` (one ``Upsample...Backward0``), ``pixel_shuffle``,
``pixel_unshuffle``, ``prelu`` (``PreluKernelBackward0``), ``bilinear``
(``TrilinearBackward0``), and the composite ``gumbel_softmax``, recorded as
torch records them."""

from __future__ import annotations

import numbers

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import C_TYPE_NAMES, TYPE_WORDS
from ..ops import _conv_transpose, _parametric, _resample
from ._functional_core import adaptive_avg_pool1d, adaptive_avg_pool2d
from ._sampling import bicubic
from ._volumetric import adaptive_avg_pool3d
from ._warn import warn as _warn

__all__ = ["conv_transpose1d", "conv_transpose2d", "interpolate", "upsample", "pixel_shuffle",
           "pixel_unshuffle", "prelu", "bilinear", "gumbel_softmax"]


# ---- transposed convolution ------------------------------------------------------------------

def _tuple(value, n):
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    return value * n if len(value) == 1 else value


def _check_transposed(x, weight, bias, groups, geometry):
    """torch's checks of a transposed convolution, in its order and words."""
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{list(weight.shape)}] instead")
    if x.ndim != weight.ndim:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional "
                           f"weight {list(weight.shape)}, but got {x.ndim}-dimensional input of "
                           f"size {list(x.shape)} instead")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {weight.shape[0]} channels, but got "
                           f"{x.shape[1]} channels instead")
    out_channels = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"bias to be 1-dimensional with {out_channels} elements, but got bias "
                           f"of size {list(bias.shape)} instead")
    op, s, d = geometry.output_padding, geometry.stride, geometry.dilation
    if any(o >= max(si, di) for o, si, di in zip(op, s, d)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but "
                           f"got output_padding_height: {op[0]} output_padding_width: {op[1]} "
                           f"stride_height: {s[0]} stride_width: {s[1]} dilation_height: {d[0]} "
                           f"dilation_width: {d[1]}")
    sizes = tuple(x.shape[2:]) if x.ndim == 4 else (1, x.shape[2])
    out = geometry.output(*sizes)
    if min(out) < 1:
        shown = (lambda v: " x ".join(str(n) for n in v)) if x.ndim == 4 else (lambda v: str(v[1]))
        raise RuntimeError(f"Given input size per channel: ({shown(sizes)}). Calculated output "
                           f"size per channel: ({shown(out)}). Output size is too small")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 2-D convolution ("deconvolution") of (N, C_in, H, W) (or (C_in, H, W))
    ``input`` with (C_in, C_out / groups, kh, kw) ``weight``: the output is
    ``(H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1`` high (one
    ``ConvolutionBackward0`` node, as in torch).

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(1, 1, 2, 2)
    >>> torch.nn.functional.conv_transpose2d(x, torch.ones(1, 1, 2, 2), stride=2).shape
    gradviz.Size([1, 1, 4, 4])
    """
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, "
                           f"but got input of size: {list(input.shape)}")
    x = input.unsqueeze(0) if input.ndim == 3 else input
    geometry = _conv_transpose._TransposedGeometry(
        tuple(weight.shape[2:]), _tuple(dilation, 2), _tuple(padding, 2), _tuple(stride, 2),
        _tuple(output_padding, 2), groups)
    _check_transposed(x, weight, bias, groups, geometry)
    out = _conv_transpose.conv_transpose2d(x, weight, bias, geometry)
    return out.squeeze(0) if input.ndim == 3 else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 1-D convolution of (N, C_in, L) (or (C_in, L)) ``input`` with
    (C_in, C_out / groups, k) ``weight`` (one ``ConvolutionBackward0`` node)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, "
                           f"but got input of size: {list(input.shape)}")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    geometry = _conv_transpose._TransposedGeometry(
        (1,) + tuple(weight.shape[2:]), (1,) + _tuple(dilation, 1), (0,) + _tuple(padding, 1),
        (1,) + _tuple(stride, 1), (0,) + _tuple(output_padding, 1), groups)
    _check_transposed(x, weight, bias, groups, geometry)
    out = _conv_transpose.conv_transpose1d(x, weight, bias, geometry)
    return out.squeeze(0) if input.ndim == 2 else out


# ---- interpolate ---------------------------------------------------------------------------

_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _output_sizes(input, size, scale_factor, recompute_scale_factor, mode):
    """torch's sizes and scales: (output sizes, the scale of each dim or None)."""
    dim = input.ndim - 2
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format.")
            if not all(isinstance(n, numbers.Integral) for n in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                "or Tuple[int, int, int], but got size with types "
                                f"{[type(n) for n in size]}")
            sizes = [int(n) for n in size]
        else:
            sizes = [int(size)] * dim
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return sizes, [None] * dim
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {spatial} and "
                f"scale_factor of shape {scale_factor}. "
                "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                "scale_factor in (s1, s2, ...,sK) format.")
        scales = [float(s) for s in scale_factor]
    else:
        scales = [float(scale_factor)] * dim
    sizes = [int(n * s) for n, s in zip(spatial, scales)]
    if recompute_scale_factor or mode == "area":
        return sizes, [None] * dim
    return sizes, scales


def _check_positive(spatial, sizes):
    if min(spatial) > 0 and min(sizes) > 0:
        return
    letters = "DHW"[3 - len(sizes):]
    given = ", ".join(f"{c}: {n}" for c, n in zip(letters, spatial))
    wanted = ", ".join(f"{c}: {n}" for c, n in zip(letters, sizes))
    joint = " and" if len(sizes) == 1 else ""
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                       f"({given}){joint} output ({wanted})")


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) ``input`` to
    ``size`` or by ``scale_factor``: ``mode`` ``"nearest"``, ``"nearest-exact"``, ``"linear"``
    (3-D input), ``"bilinear"`` (4-D), ``"trilinear"`` (5-D), with or without
    ``align_corners``, or ``"area"`` (adaptive average pooling). One
    ``Upsample<Mode><N>DBackward0`` node, as in torch.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([[[1.0, 2.0]]])
    >>> torch.nn.functional.interpolate(x, scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    >>> torch.nn.functional.interpolate(x, size=3, mode="linear", align_corners=True)
    tensor([[[1.0000, 1.5000, 2.0000]]])
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    sizes, scales = _output_sizes(input, size, scale_factor, recompute_scale_factor, mode)
    if antialias:
        if not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
            raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                             "modes and requires a 4-D tensor as input")
        raise NotImplementedError("interpolate: antialias=True is not supported by gradviz")
    if mode == "area" and input.ndim in (3, 4, 5):
        pool = {3: adaptive_avg_pool1d, 4: adaptive_avg_pool2d, 5: adaptive_avg_pool3d}[input.ndim]
        return pool(input, sizes)
    if input.ndim in (3, 4, 5) and (mode in ("nearest", "nearest-exact")
                                    or _LINEAR_MODES.get(mode) == input.ndim):
        _check_positive(list(input.shape[2:]), sizes)
        dtype = input.numpy(force=True).dtype
        plans = [_resample.axis_plan(mode, n, m, s, align_corners, dtype)
                 for n, m, s in zip(input.shape[2:], sizes, scales)]
        return _resample.upsample(input, mode, plans, output_size=tuple(sizes),
                                  scales=tuple(scales), align_corners=align_corners)
    if mode == "bicubic" and input.ndim == 4:
        _check_positive(list(input.shape[2:]), sizes)
        return bicubic(input, sizes, scales, align_corners)
    if mode == "lanczos":
        raise NotImplementedError(f"interpolate: mode={mode!r} is not supported by gradviz")
    for wanted, needs in _LINEAR_MODES.items():
        if mode == wanted and input.ndim in (3, 4, 5):
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {needs}D "
                                      "input")
    raise NotImplementedError(
        "Input Error: Only 3D, 4D and 5D input Tensors supported"
        f" (got {input.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear "
        f"| lanczos | area | nearest-exact (got {mode})")


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """The deprecated name of :func:`interpolate` (with torch's warning)."""
    _warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
          "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---- pixel shuffle -------------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor: int):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): channels rearranged into space
    (``PixelShuffleBackward0``)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    if input.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                           f"by the square of upscale_factor, but input.size(-3)={input.shape[-3]} "
                           f"is not divisible by {r * r}")
    return _resample.pixel_shuffle(input, r)


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), the inverse of :func:`pixel_shuffle`
    (``PixelUnshuffleBackward0``)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    for dim, name in ((-2, "height"), (-1, "width")):
        if input.shape[dim] % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by "
                               f"downscale_factor, but input.size({dim})={input.shape[dim]} is "
                               f"not divisible by {r}")
    return _resample.pixel_unshuffle(input, r)


# ---- prelu, bilinear, gumbel_softmax ----- ------------------------------------------------

def prelu(input, weight):
    """``max(0, x) + weight * min(0, x)``, ``weight`` one value or one per channel (dim 1); the
    weight is viewed to broadcast along dim 1 (``ViewBackward0``) and one
    ``PreluKernelBackward0`` node follows, as in torch."""
    if input._data.dtype != weight._data.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got "
                           f"{TYPE_WORDS[input.dtype.name]} and {TYPE_WORDS[weight.dtype.name]}")
    count = weight.numel()
    if count != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.ndim > 1 else 1
        if channels != count:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {count} and channel size = {channels}.")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    if input.ndim != weight.ndim:
        shape = [1] * input.ndim
        if input.ndim >= 2:
            shape[1] = count
        weight = weight.reshape(shape)
    return _parametric.prelu_kernel(input, weight)


def bilinear(input1, input2, weight, bias=None):
    """``input1[..., i] * weight[o, i, j] * input2[..., j]`` summed over ``i, j``, plus
    ``bias[o]`` (``TrilinearBackward0``, ``ViewBackward0``, ``AddBackward0``, as in torch)."""
    operands = [("input1", input1), ("input2", input2), ("weight", weight)]
    if bias is not None:
        operands.append(("bias", bias))
    if len({t._data.dtype for _, t in operands}) > 1:
        raise RuntimeError("All tensors must have the same dtype, got " + ", ".join(
            f"{name}: {C_TYPE_NAMES[t.dtype.name]}" for name, t in operands))
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and "
                           f"{input2.ndim}")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got "
                               f"{input1.shape[d]} and {input2.shape[d]}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {weight.shape[2]}")
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[0]} but expected {weight.shape[0]}")
    batch = tuple(input1.shape[:-1])
    out = _parametric.trilinear(input1.reshape(-1, input1.shape[-1]), weight,
                                input2.reshape(-1, input2.shape[-1]))
    out = out.view(*batch, weight.shape[0])
    return out if bias is None else out + bias


def _gumbel_noise(logits):
    """Standard Gumbel noise shaped like ``logits``: ``-log(e)`` for exponential ``e`` (as
    torch's ``-empty_like(logits).exponential_().log()``), from gradviz's generator."""
    uniform = _ops.rand(*logits.shape, dtype=_dtypes.float64)
    exponential = -_ops.log(1.0 - uniform)  # 1 - U lies in (0, 1]: never log(0)
    return (-_ops.log(exponential)).to(logits.dtype)


def _gumbel_softmax_with(logits, gumbels, tau, hard, dim):
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = _ops.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft  # the straight-through estimator


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1):
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with
    standard Gumbel noise ``g``; ``hard`` returns the one-hot of its argmax in the forward and
    the soft sample's gradient in the backward. The noise comes from gradviz's generator."""
    if eps != 1e-10:
        _warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    return _gumbel_softmax_with(logits, _gumbel_noise(logits), tau, hard, dim)


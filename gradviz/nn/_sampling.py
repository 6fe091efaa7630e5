"""Spatial sampling: ``affine_grid``, ``grid_sample`` and bicubic ``interpolate``, built from
differentiable gradviz ops (Note [Sampling is gather and weights]).

Note [Sampling is gather and weights]
-------------------------------------
``grid_sample`` reads each output pixel from the input at a real-valued source position: the
position is computed with Tensor ops from the grid (unnormalized, then clipped or reflected as
``padding_mode`` says), the integer corners around it are numpy arrays (they carry no
gradient, as torch's ``floor``), and the output is the sum over the corners of ``gather``-ed
input values times their interpolation weights, zero for corners outside the input. So the
gradient of the input is ``gather``'s (a scatter-add), the gradient of the grid flows through
the weights, and both can be differentiated again. Bicubic up-sampling is separable: one
(out, in) matrix of torch's cubic-convolution weights (``A = -0.75``, edge indices clamped) per
spatial dim, applied by one op (``UpsampleBicubic2DBackward0``, :mod:`gradviz.ops._separable`).
"""

from __future__ import annotations

import numpy as np

from .. import ops as _ops
from .._tensor import _wrap
from ..ops import _separable
from ..ops._conv import _tied
from ..ops._registry import Op, apply, saves_inputs
from ..ops._saved import GRID_MODES, GRID_PADDING, OTHER, SELF, Attr, Computed
from ._functional_core import _type_word
from ._warn import warn as _warn

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False "
                  "since 1.3.0. Please specify align_corners=True if the old behavior is desired. "
                  "See the documentation of grid_sample for details.")



# ---- affine_grid ----------------------------------------------------------------------------

def _base_coordinates(n, align_corners, dtype):
    """torch's normalized pixel centres along a dim of ``n``: -1 .. 1 at the corner pixels'
    centres (``align_corners``) or at their outer edges; a single pixel sits at 0."""
    if n <= 1:
        return np.zeros(max(n, 0), dtype=dtype)
    values = np.linspace(-1.0, 1.0, n)
    if not align_corners:
        values = values * (n - 1) / n
    return values.astype(dtype)


def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) (or (N, D, H, W, 3)) sampling grid of the affine maps ``theta``
    (N, 2, 3) (or (N, 3, 4)) for an output of ``size`` (N, C, H, W) (or (N, C, D, H, W)), as
    ``torch.nn.functional.affine_grid``: ``grid = [x, y, 1] @ theta^T`` at each output pixel's
    normalized centre.

    Examples
    --------
    >>> import gradviz as torch
    >>> theta = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> torch.nn.functional.affine_grid(theta, (1, 1, 1, 2), align_corners=False)
    tensor([[[[-0.5000,  0.0000],
              [ 0.5000,  0.0000]]]])
    """
    if align_corners is None:
        _warn(_ALIGN_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype.name}")
    size = tuple(int(n) for n in size)
    shape = tuple(theta.shape)
    if len(size) == 4:
        if theta.ndim != 3 or shape[-2:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.ndim != 3 or shape[-2:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        _warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids "
              "when align_corners=True. This is not an intended use case of affine_grid. "
              "See the documentation of affine_grid for details.", UserWarning,
              stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if shape[0] != size[0]:
        rows = len(spatial) + 1
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{size[0]}, {rows}] but got: [{shape[0]}, {rows}].")
    return apply(AFFINE_GRID, theta, size=size, align_corners=bool(align_corners))


def _affine_base(spatial, align_corners, dtype):
    """The (pixels, d + 1) rows ``[x, (y, (z,)) 1]`` of every output pixel's normalized
    centre, x (W) first as the grid lists it."""
    axes = [_base_coordinates(n, align_corners, dtype) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    base = np.stack([m for m in reversed(mesh)] + [np.ones(spatial, dtype=dtype)], axis=-1)
    return base.reshape(-1, len(spatial) + 1)


def _affine_grid_forward(theta, size, align_corners):
    spatial = size[2:]
    grid = _affine_base(spatial, align_corners, theta.dtype) @ np.swapaxes(theta, 1, 2)
    return grid.reshape(size[0], *spatial, len(spatial))


def _affine_grid_backward(ctx, g):
    """torch's affine_grid_generator_backward: ``g_theta = g^T @ base`` per batch element
    (the grid is linear in theta, so its second derivative in theta is zero)."""
    size = ctx.size
    spatial = size[2:]
    base = _ops.tensor(_affine_base(spatial, ctx.align_corners, g.numpy(force=True).dtype))
    rows = g.reshape(size[0], -1, len(spatial))
    return (_ops.matmul(rows.transpose(1, 2), base),)


AFFINE_GRID = Op("affine_grid", "AffineGridGeneratorBackward0", forward=_affine_grid_forward,
                 backward=_affine_grid_backward,
                 saved={"size": Attr("size"), "align_corners": Attr("align_corners")})


# ---- grid_sample ----------------------------------------------------------------------------

def _unnormalize(coordinate, n, align_corners):
    if align_corners:
        return (coordinate + 1) / 2 * (n - 1)
    return ((coordinate + 1) * n - 1) / 2


def _reflect(coordinate, twice_low, twice_high):
    """torch's ``reflect_coordinates``: fold ``coordinate`` into [low, high] by reflections."""
    if twice_low == twice_high:
        return coordinate * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coordinate - low).abs()
    extra = _ops.fmod(distance, span)
    flips = np.floor(distance.numpy(force=True) / span)
    return _ops.where(_ops.tensor(flips % 2 == 0), extra + low, span - extra + low)


def _source_index(coordinate, n, padding_mode, align_corners):
    """torch's ``grid_sampler_compute_source_index``."""
    coordinate = _unnormalize(coordinate, n, align_corners)
    if padding_mode == "border":
        return coordinate.clamp(0, n - 1)
    if padding_mode == "reflection":
        if align_corners:
            coordinate = _reflect(coordinate, 0, 2 * (n - 1))
        else:
            coordinate = _reflect(coordinate, -1, 2 * n - 1)
        return coordinate.clamp(0, n - 1)
    return coordinate


def _source_slope(coordinate, n, padding_mode, align_corners):
    """d(source index)/d(grid coordinate) as torch's kernel takes it (numpy, piecewise
    constant): the unnormalizing scale, times -1 per reflection, times 0 where ``border`` or
    ``reflection`` clips (the borders themselves count as outside)."""
    scale = (n - 1) / 2 if align_corners else n / 2
    source = np.asarray(coordinate, dtype=np.float64)
    source = (source + 1) / 2 * (n - 1) if align_corners else ((source + 1) * n - 1) / 2
    slope = np.full(source.shape, scale)
    if padding_mode == "zeros":
        return slope
    if padding_mode == "reflection":
        twice_low, twice_high = (0, 2 * (n - 1)) if align_corners else (-1, 2 * n - 1)
        if twice_low == twice_high:
            return np.zeros(source.shape)
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        shifted = source - low
        slope = np.where(shifted < 0, -slope, slope)
        distance = np.abs(shifted)
        odd = np.floor(distance / span) % 2 == 1
        slope = np.where(odd, -slope, slope)
        source = np.where(odd, span - np.fmod(distance, span), np.fmod(distance, span)) + low
    return np.where((source > 0) & (source < n - 1), slope, 0.0)


def _corners(x, y):
    """The four integer corners around (``x``, ``y``) (numpy) with their bilinear weights
    (Tensors, differentiable in the grid) and, for the grid's gradient, the weights' slopes
    along x and along y."""
    x0, y0 = np.floor(x.numpy(force=True)), np.floor(y.numpy(force=True))
    tx, ty = x - _ops.tensor(x0), y - _ops.tensor(y0)
    rows, cols = y0.astype(np.int64), x0.astype(np.int64)
    for drow, wy, sy in ((0, 1 - ty, -1), (1, ty, 1)):
        for dcol, wx, sx in ((0, 1 - tx, -1), (1, tx, 1)):
            yield rows + drow, cols + dcol, wy * wx, sx * wy, sy * wx


def _gather_corner(flat_input, rows, cols, height, width):
    """(N, C, Ho, Wo): the input at integer ``rows``/``cols`` (N, Ho, Wo), zero outside."""
    inside, index = _corner_index(rows, cols, height, width, flat_input.shape[1])
    values = _ops.gather(flat_input, 2, index).reshape(*flat_input.shape[:2], *rows.shape[1:])
    return values, inside


def _corner_index(rows, cols, height, width, channels):
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    index = np.clip(rows, 0, height - 1) * width + np.clip(cols, 0, width - 1)
    batch = rows.shape[0]
    index = _ops.tensor(index.reshape(batch, 1, -1).astype(np.int64)).expand(batch, channels, -1)
    return inside, index


def _sample(input, grid, mode, padding_mode, align_corners):
    """The sampled (N, C, Ho, Wo) values (Note [Sampling is gather and weights])."""
    batch, channels, height, width = input.shape
    x = _source_index(grid[..., 0], width, padding_mode, align_corners)
    y = _source_index(grid[..., 1], height, padding_mode, align_corners)
    flat_input = input.reshape(batch, channels, height * width)
    if mode == "nearest":  # torch rounds half to even (nearbyint), as np.rint
        rows = np.rint(y.numpy(force=True)).astype(np.int64)
        cols = np.rint(x.numpy(force=True)).astype(np.int64)
        values, inside = _gather_corner(flat_input, rows, cols, height, width)
        return values * _ops.tensor(inside[:, None].astype(values.numpy(force=True).dtype))
    out = None
    for rows, cols, weight, _, _ in _corners(x, y):
        values, inside = _gather_corner(flat_input, rows, cols, height, width)
        term = values * (weight * _ops.tensor(inside.astype(x.numpy(force=True).dtype))
                         ).unsqueeze(1)
        out = term if out is None else out + term
    return out


def _grid_sampler_forward(input, grid, mode, padding_mode, align_corners, **_):
    return _sample(_wrap(input), _wrap(grid), mode, padding_mode, align_corners)._data


def _grid_sampler_backward(ctx, g):
    """The input's gradient scatters ``g`` times each corner's weight back onto the corner;
    the grid's is ``g`` times each corner's value times the weight's slope, times the source
    index's slope (:func:`_source_slope`). Written with Tensor ops, so it differentiates again."""
    input, grid = ctx.input(0), ctx.input(1)
    batch, channels, height, width = input.shape
    x = _source_index(grid[..., 0], width, ctx.padding_mode, ctx.align_corners)
    y = _source_index(grid[..., 1], height, ctx.padding_mode, ctx.align_corners)
    dtype = x.numpy(force=True).dtype
    flat_g = g.reshape(batch, channels, -1)
    grad_input = _ops.zeros(batch, channels, height * width, dtype=g.dtype)
    grad_grid = None
    if ctx.mode == "nearest":
        rows = np.rint(y.numpy(force=True)).astype(np.int64)
        cols = np.rint(x.numpy(force=True)).astype(np.int64)
        inside, index = _corner_index(rows, cols, height, width, channels)
        grad_input = _ops.scatter_add(grad_input, 2, index, flat_g * _ops.tensor(
            inside.reshape(batch, 1, -1).astype(dtype)))
        if ctx.needs_input_grad[1]:
            grad_grid = _tied(_ops.zeros(tuple(grid.shape), dtype=g.dtype), input, grid)
    else:
        flat_input = input.reshape(batch, channels, height * width)
        along_x = along_y = 0
        for rows, cols, weight, slope_x, slope_y in _corners(x, y):
            inside, index = _corner_index(rows, cols, height, width, channels)
            mask = _ops.tensor(inside.astype(dtype))
            if ctx.needs_input_grad[0]:
                spread = flat_g * (weight * mask).reshape(batch, 1, -1)
                grad_input = _ops.scatter_add(grad_input, 2, index, spread)
            if ctx.needs_input_grad[1]:
                values = _ops.gather(flat_input, 2, index).reshape(tuple(g.shape))
                weighted = (g * values).sum(1) * mask
                along_x = along_x + weighted * slope_x
                along_y = along_y + weighted * slope_y
        if ctx.needs_input_grad[1]:
            slopes = [_ops.tensor(_source_slope(grid[..., i].numpy(force=True), n,
                                                ctx.padding_mode, ctx.align_corners
                                                ).astype(dtype)) for i, n in ((0, width),
                                                                               (1, height))]
            grad_grid = _ops.stack([along_x * slopes[0], along_y * slopes[1]], -1)
            grad_grid = _tied(grad_grid, input, grid)
    if not ctx.needs_input_grad[0]:
        return None, grad_grid
    return _tied(grad_input.reshape(tuple(input.shape)), input, grid), grad_grid


GRID_SAMPLER_2D = Op("grid_sampler_2d", "GridSampler2DBackward0", forward=_grid_sampler_forward,
                     backward=_grid_sampler_backward, saves=saves_inputs(0, 1),
                     saved={
                         "input": SELF, "grid": OTHER,
                         "interpolation_mode": Computed(lambda node: GRID_MODES[node.attrs["mode"]]),
                         "padding_mode": Computed(lambda node: GRID_PADDING[node.attrs["padding_mode"]]),
                         "align_corners": Attr("align_corners"),
                     })


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners=None):
    """Sample (N, C, H, W) ``input`` at the (N, Ho, Wo, 2) ``grid`` of normalized (x, y)
    positions (-1 and 1 the edges, or the corner pixels' centres with ``align_corners``), as
    ``torch.nn.functional.grid_sample``: ``mode`` ``"bilinear"`` or ``"nearest"``,
    ``padding_mode`` ``"zeros"``, ``"border"`` or ``"reflection"``; gradients for the input
    and the grid (Note [Sampling is gather and weights]).

    Examples
    --------
    >>> import gradviz as torch
    >>> image = torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    >>> grid = torch.tensor([[[[0.0, 0.0]]]])
    >>> torch.nn.functional.grid_sample(image, grid, align_corners=False)
    tensor([[[[1.5000]]]])
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        _warn(_ALIGN_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last "
                           f"dimension, but got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if mode == "bicubic" and input.ndim != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"grid_sampler_{input.ndim - 2}d_cpu_kernel_impl\" not "
                                  f"implemented for '{_type_word(input.dtype)}'")
    if input.dtype is not grid.dtype:
        raise RuntimeError(f"expected scalar type {_type_word(input.dtype)} but found "
                           f"{_type_word(grid.dtype)}")
    if input.ndim != 4 or mode == "bicubic":
        raise NotImplementedError(f"grid_sample: gradviz supports 4-D inputs in 'bilinear' and "
                                  f"'nearest' modes (got a {input.ndim}-D input, mode={mode!r})")
    return apply(GRID_SAMPLER_2D, input, grid, mode=mode, padding_mode=padding_mode,
                 align_corners=align_corners)


# ---- bicubic interpolation ------------------------------------------------------------------

_CUBIC_A = -0.75  # torch's (and Keys') cubic-convolution coefficient


def _cubic_weights(t):
    """The four weights of the taps at floor - 1 .. floor + 2 for the fraction ``t``."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def bicubic_matrix(n, m, scale, align_corners):
    """(m, n): output position i as torch's bicubic weights over the input (source index
    ``scale * (i + 0.5) - 0.5``, or ``i * (n - 1) / (m - 1)`` with ``align_corners``; taps
    outside clamped to the edge). ``scale`` is ``1 / scale_factor`` when one was given."""
    if align_corners:
        ratio = (n - 1) / (m - 1) if m > 1 else 0.0
    else:
        ratio = scale if scale is not None and scale > 0 else n / m
    matrix = np.zeros((m, n))
    for i in range(m):
        source = ratio * i if align_corners else ratio * (i + 0.5) - 0.5
        floor = int(np.floor(source))
        for k, w in enumerate(_cubic_weights(source - floor)):
            matrix[i, min(max(floor - 1 + k, 0), n - 1)] += w
    return matrix


def bicubic(input, sizes, scales, align_corners):
    """(N, C, H, W) ``input`` resized to ``sizes`` with torch's bicubic weights (one
    ``UpsampleBicubic2DBackward0`` node)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"compute_indices_weights_cubic\" not implemented for "
                                  f"'{_type_word(input.dtype)}'")
    matrices = [bicubic_matrix(n, m, None if s is None else 1.0 / s, align_corners)
                for n, m, s in zip(input.shape[2:], sizes, scales)]
    return _separable.upsample_bicubic2d(input, matrices, output_size=tuple(sizes),
                                         scales=tuple(scales), align_corners=bool(align_corners))

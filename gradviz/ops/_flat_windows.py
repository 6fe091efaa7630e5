"""The windows of a stride-1 convolution taken over the flattened, padded input ("wide"
columns): ``unfold_wide`` (``Im2ColBackward0``) and ``fold_wide`` (``Col2ImBackward0``), each
the other's adjoint, so a convolution's forward and every backward built from them are one
matrix product plus long contiguous copies or adds (Note [Flat windows]).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from gradviz_ext import ops as _ext_ops

from ._registry import Op, apply

__all__ = ["FlatWindows", "flat_windows", "unfold_wide", "fold_wide", "crop_wide"]

# Note [Flat windows]
# ~~~~~~~~~~~~~~~~~~~
# im2col copies each kernel offset's (N, C, *out) view of the padded input into the columns,
# and col2im adds it back: with LeNet's 10 x 10 outputs that is N * C * kh * kw * oh copies or
# adds of 10 entries each, and numpy's per-row cost, not the arithmetic, set the time
# (convolution ~2.1x torch). With stride 1 every window lies in the *flattened* padded input:
# output position (y, x) of offset (i, j) reads flat entry (y + i * dh) * Wp + (x + j * dw), so
# each offset's columns are ONE contiguous slice of length oh * Wp, starting at i * dh * Wp +
# j * dw. The "wide" columns keep all Wp positions of every output row; those with x >= ow
# ("garbage" columns) read real entries of the next row, wrapping around. So:
#
# - forward: wide columns (N, C * K, oh * Wp) by one copy with contiguous rows, one matmul
#   per sample, and the output's garbage columns cropped away (N * O * oh short rows). (One
#   matmul for the whole batch, the batch inside the columns, was up to 4x slower on
#   OpenBLAS for LeNet's 6 x 25 weight: very wide products with a few rows are its weak case.)
# - backward: the output gradient widened with zeros in the garbage columns (``pad``), then
#   ``weight^T @ g_wide`` folded back by K slice-adds of oh * Wp entries each (offset order, the
#   order col2im adds in), and the weight's gradient ``g_wide @ wide_columns^T``.
#
# The garbage columns must contribute nothing. In the input's gradient they are
# ``weight^T @ 0``, exact zeros when the weight is finite; in the weight's gradient they are
# input entries times 0, exact zeros when the input is finite. Adding a zero to a sum that
# started from +0.0 changes nothing (the sum is never -0.0), so the input's gradient is the
# same sums in the same order as col2im's; the weight's gradient sums more (zero) terms, which
# may move BLAS's blocking: a difference within rounding, as any GEMM order is. A non-finite
# weight or input takes the strided windows instead (``_conv.py``), and so do strides above 1
# (the flattened slices would skip half the row) and windows whose wide columns would be more
# than twice the real ones (tiny outputs of large kernels). Spatial dims are 2 or 3 (a 1-D
# convolution runs as 2-D over (1, L)).
#
# For 2-D windows of float32 or float64, both copies are one compiled pass
# (gradviz_ext/c/flat_windows.h: ``unfold_wide_arrays``, ``fold_wide_arrays``): each plane is
# padded into a scratch plane that stays in cache, its offsets' slices copied out of it, and
# the adjoint sums the offsets' columns into a zeroed scratch plane in offset order, as the
# numpy slice-adds below do (the same bits; tests/ops/test_flat_windows_kernel.py). For a
# (32, 16, 16, 16) input and a 3 x 3 kernel: columns 0.28 -> 0.10 ms, adjoint 0.69 -> 0.17 ms.
# The numpy code stays the definition, for 3-D windows and the interpreted engine.

_MAX_WIDENING = 2.0  # wide columns per real column above which the strided windows are used


class FlatWindows:
    """Where the offsets of stride-1 windows (``kernel``, ``dilation``, ``padding`` per
    spatial dim) lie in the flattened padded input of spatial ``sizes`` (Note [Flat
    windows])."""

    __slots__ = ("sizes", "padding", "padded", "out_sizes", "wide", "length", "flat",
                 "kernel", "steps", "starts", "start_array")

    def __init__(self, kernel, dilation, padding, sizes):
        self.sizes, self.padding, self.kernel = tuple(sizes), tuple(padding), tuple(kernel)
        self.padded = tuple(n + 2 * p for n, p in zip(self.sizes, self.padding))
        self.out_sizes = tuple(n - d * (k - 1) for n, d, k in zip(self.padded, dilation, kernel))
        self.wide = (self.out_sizes[0],) + self.padded[1:]        # output grid, rows full width
        row = math.prod(self.padded[1:])
        self.length = self.out_sizes[0] * row                     # wide columns per channel
        # one spare first-dim row: the last offset's slice reaches past the padded input by at
        # most sum((k - 1) * d * stride) over the inner dims, less than one row
        self.flat = (self.padded[0] + 1) * row
        element_strides = [math.prod(self.padded[d + 1:]) for d in range(len(self.padded))]
        self.steps = tuple(d * s for d, s in zip(dilation, element_strides))
        self.starts = tuple(sum(o * s for o, s in zip(offset, self.steps))
                            for offset in np.ndindex(*self.kernel))
        self.start_array = np.array(self.starts, dtype=np.intp)  # for the compiled kernels

    def __repr__(self):
        return f"FlatWindows(kernel={self.kernel}, sizes={self.sizes}, padding={self.padding})"


def flat_windows(geometry, sizes):
    """A :class:`FlatWindows` for ``geometry`` over spatial ``sizes`` when the flat layout
    applies (stride 1, 2 or 3 spatial dims, non-empty output, at most ``_MAX_WIDENING`` wide
    columns per real one), else None. Kept per geometry and sizes: a layer calls this three
    times a step with the same ones."""
    return _flat_windows(tuple(geometry.kernel), tuple(geometry.dilation),
                         tuple(geometry.padding), tuple(geometry.stride),
                         bool(geometry.ceil_mode), tuple(int(n) for n in sizes))


@functools.lru_cache(maxsize=256)
def _flat_windows(kernel, dilation, padding, stride, ceil_mode, sizes):
    if len(sizes) not in (2, 3) or any(s != 1 for s in stride) or ceil_mode:
        return None
    if any(n == 0 for n in sizes):
        return None
    windows = FlatWindows(kernel, dilation, padding, sizes)
    if (any(m <= 0 for m in windows.out_sizes)
            or windows.length > _MAX_WIDENING * math.prod(windows.out_sizes)):
        return None
    return windows


def _interior(windows):
    """The index of the unpadded input inside the (N, C, *padded) frame."""
    return (slice(None), slice(None)) + tuple(
        slice(p, p + n) for p, n in zip(windows.padding, windows.sizes))


def _unfold_wide(x, windows):
    """(N, C, *sizes) -> (N, C * K, length): each offset's contiguous slice of the flattened
    padded input, one copy with rows of ``length`` entries."""
    cols = _ext_ops.unfold_wide_arrays(x, windows)  # one compiled pass, 2-D
    if cols is not None:
        return cols
    n, c = x.shape[:2]
    flat = np.zeros((n, c, windows.flat), dtype=x.dtype)
    frame = flat[:, :, :math.prod(windows.padded)].reshape((n, c) + windows.padded)
    frame[_interior(windows)] = x
    item = flat.itemsize
    view = as_strided(flat, (n, c) + windows.kernel + (windows.length,),
                      flat.strides[:2] + tuple(s * item for s in windows.steps) + (item,),
                      writeable=False)
    return np.ascontiguousarray(view).reshape(n, c * math.prod(windows.kernel), windows.length)


def _fold_wide(cols, windows):
    """(N, C * K, length) -> (N, C, *sizes): the adjoint of :func:`_unfold_wide`, each
    offset's columns added into its slice of a zero flat input, in offset order."""
    found = _ext_ops.fold_wide_arrays(cols, windows)  # one compiled pass, 2-D
    if found is not None:
        return found
    n = cols.shape[0]
    blocks = cols.reshape(n, cols.shape[1] // len(windows.starts), len(windows.starts),
                          windows.length)  # explicit: n may be 0
    flat = np.zeros((n, blocks.shape[1], windows.flat), dtype=cols.dtype)
    for k, start in enumerate(windows.starts):
        target = flat[:, :, start:start + windows.length]
        np.add(target, blocks[:, :, k], out=target)
    frame = flat[:, :, :math.prod(windows.padded)].reshape(flat.shape[:2] + windows.padded)
    return np.ascontiguousarray(frame[_interior(windows)])


def crop_wide(out, windows):
    """The real outputs, (N, O, *out_sizes), of wide (N, O, length) ones: a strided view."""
    grid = out.reshape(out.shape[:2] + windows.wide)
    return grid[(slice(None), slice(None)) + tuple(slice(0, m) for m in windows.out_sizes)]


IM2COL_WIDE = Op("im2col_wide", "Im2ColBackward0",
                 forward=lambda x, windows: _unfold_wide(x, windows),
                 backward=lambda ctx, g: (fold_wide(g, ctx.windows),))
COL2IM_WIDE = Op("col2im_wide", "Col2ImBackward0",
                 forward=lambda cols, windows: _fold_wide(cols, windows),
                 backward=lambda ctx, g: (unfold_wide(g, ctx.windows),))


def unfold_wide(input, windows):
    """(N, C, *sizes) -> (N, C * K, length): the wide columns (Note [Flat windows])."""
    return apply(IM2COL_WIDE, input, windows=windows)


def fold_wide(input, windows):
    """(N, C * K, length) -> (N, C, *sizes): wide columns summed back into place."""
    return apply(COL2IM_WIDE, input, windows=windows)

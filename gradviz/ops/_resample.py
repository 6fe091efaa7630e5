"""Resampling: ``upsample`` (nearest, nearest-exact and (bi/tri)linear interpolation, one
``Upsample<Mode><N>DBackward0`` node as in torch) and ``pixel_shuffle`` / ``pixel_unshuffle``
(``PixelShuffleBackward0`` / ``PixelUnshuffleBackward0``).

Note [Separable resampling]
---------------------------
Every mode here is separable: along each spatial axis an output position reads one input
position (nearest) or two, mixed with weights ``lambda0`` and ``lambda1`` (linear). An axis'
*plan* holds those indices and weights, computed as torch's CPU kernels compute them (in the
input's dtype, torch's ``opmath`` type for float32 and float64). The forward applies the plans
from the last axis to the first, the order of torch's kernel (``(x[h, w0] * lw0 + x[h, w1] *
lw1) * lh0 + ...``). The backward is the adjoint (each output gradient added back to the
positions it read, with the same weights), itself an op whose backward is the forward again, so
resampling differentiates any number of times (torch's ``Upsample...BackwardBackward0``).
"""

from __future__ import annotations

import numpy as np

from ._registry import Op, apply
from ._saved import Attr, Computed
from ._scatter_add import add_rows

__all__ = ["upsample", "axis_plan", "pixel_shuffle", "pixel_unshuffle"]


def axis_plan(mode, in_size, out_size, scale, align_corners, dtype):
    """One axis' ``(index0, index1, lambda0, lambda1)`` (the last three None for nearest):
    ``scale`` is the user's scale factor for this axis or None (then ``in_size / out_size``)."""
    dst = np.arange(out_size)
    if mode in ("nearest", "nearest-exact"):
        if mode == "nearest" and out_size == in_size:
            return dst, None, None, None
        if mode == "nearest" and out_size == 2 * in_size:
            return dst >> 1, None, None, None
        step = np.float32(1.0 / scale if scale else np.float32(in_size) / np.float32(out_size))
        offset = 0.5 if mode == "nearest-exact" else 0.0
        source = np.floor((dst.astype(np.float32) + np.float32(offset)) * step)
        return np.minimum(source.astype(np.int64), in_size - 1), None, None, None
    real = np.dtype(dtype).type
    if align_corners:
        step = real(in_size - 1) / real(out_size - 1) if out_size > 1 else real(0)
        source = step * dst.astype(real)
    else:
        step = real(1.0 / scale) if scale else real(in_size) / real(out_size)
        source = np.maximum(step * (dst.astype(real) + real(0.5)) - real(0.5), real(0))
    index0 = np.minimum(np.floor(source).astype(np.int64), in_size - 1)
    lambda1 = np.clip(source - index0.astype(real), real(0), real(1)).astype(real)
    lambda0 = (real(1) - lambda1).astype(real)
    index1 = index0 + (index0 < in_size - 1)
    return index0, index1, lambda0, lambda1


def _weights(lam, ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return lam.reshape(shape)


def _resample(x, plans):
    """Apply each spatial axis' plan, the last axis first (Note [Separable resampling])."""
    for k in reversed(range(len(plans))):
        axis = 2 + k
        index0, index1, lambda0, lambda1 = plans[k]
        first = np.take(x, index0, axis)
        if index1 is None:
            x = first
        else:
            x = (first * _weights(lambda0, x.ndim, axis)
                 + np.take(x, index1, axis) * _weights(lambda1, x.ndim, axis))
    return np.ascontiguousarray(x)


def _resample_adjoint(g, plans, sizes):
    """The adjoint of :func:`_resample`: each gradient added back where its value was read."""
    for k in range(len(plans)):
        axis = 2 + k
        index0, index1, lambda0, lambda1 = plans[k]
        moved = np.moveaxis(g, axis, 0)
        out = np.zeros((sizes[k],) + moved.shape[1:], dtype=g.dtype)
        if index1 is None:
            add_rows(out, index0, moved)
        else:
            add_rows(out, index0, moved * _weights(lambda0, moved.ndim, 0))
            add_rows(out, index1, moved * _weights(lambda1, moved.ndim, 0))
        g = np.moveaxis(out, 0, axis)
    return np.ascontiguousarray(g)


_NODE_WORDS = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear",
               "bilinear": "Bilinear", "trilinear": "Trilinear"}
UPSAMPLE = {}  # (mode, spatial dims) -> (forward op, its adjoint op)


# what torch's nodes save, kept by interpolate as the forward's attributes and passed on to
# the adjoint's (and its own backward's) nodes
_SAVED_ARGUMENTS = ("output_size", "scales", "align_corners")


def _saved(mode, dims, adjoint):
    """The saved values of an upsampling node (its adjoint's: without the input's sizes)."""
    if dims == 1:
        scales = {"scales": Computed(lambda node: node.attrs["scales"][0])}
    else:
        scales = {f"scales_{axis}": Computed(lambda node, k=k: node.attrs["scales"][k])
                  for k, axis in enumerate("dhw"[3 - dims:])}
    saved = {"output_size": Attr("output_size"), **scales}
    if mode not in ("nearest", "nearest-exact"):
        saved["align_corners"] = Attr("align_corners")
    if not adjoint:
        saved["self_sym_sizes"] = Computed(
            lambda node: tuple(node._input_metadata[0].shape[:2]) + tuple(node.attrs["sizes"]))
    return saved


def _register(mode, dims):
    name = f"upsample_{mode.replace('-', '_')}{dims}d"
    node = f"Upsample{_NODE_WORDS[mode]}{dims}DBackward0"

    def passed_on(ctx):
        return {key: ctx.attrs[key] for key in _SAVED_ARGUMENTS if key in ctx.attrs}

    forward = Op(name, node, forward=lambda x, plans, sizes, **_: _resample(x, plans),
                 backward=lambda ctx, g: (apply(adjoint, g, plans=ctx.plans, sizes=ctx.sizes,
                                                **passed_on(ctx)),),
                 saved=_saved(mode, dims, adjoint=False))
    adjoint = Op(name + "_backward", node.replace("Backward0", "BackwardBackward0"),
                 forward=lambda g, plans, sizes, **_: _resample_adjoint(g, plans, sizes),
                 backward=lambda ctx, gg: (apply(forward, gg, plans=ctx.plans, sizes=ctx.sizes,
                                                 **passed_on(ctx)),),
                 saved=_saved(mode, dims, adjoint=True))
    UPSAMPLE[mode, dims] = forward, adjoint


for _mode, _dims in (("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 1),
                     ("nearest-exact", 2), ("nearest-exact", 3), ("linear", 1), ("bilinear", 2),
                     ("trilinear", 3)):
    _register(_mode, _dims)


def upsample(input, mode, plans, **arguments):
    """Resample the spatial dims (2, 3, ...) of ``input`` with one :func:`axis_plan` each;
    ``arguments`` (``output_size``, ``scales``, ``align_corners``) are kept for the node's
    saved values."""
    forward, _ = UPSAMPLE[mode, len(plans)]
    return apply(forward, input, plans=tuple(plans), sizes=tuple(input.shape[2:]), **arguments)


# ---- pixel shuffle --------------------------------------------------------------------------

def _shuffle(x, factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    *batch, channels, height, width = x.shape
    c = channels // (factor * factor)
    x = x.reshape(*batch, c, factor, factor, height, width)
    n = len(batch)
    x = x.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return np.ascontiguousarray(x.reshape(*batch, c, height * factor, width * factor))


def _unshuffle(x, factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    *batch, c, height, width = x.shape
    h, w = height // factor, width // factor
    x = x.reshape(*batch, c, h, factor, w, factor)
    n = len(batch)
    x = x.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return np.ascontiguousarray(x.reshape(*batch, c * factor * factor, h, w))


PIXEL_SHUFFLE = Op("pixel_shuffle", "PixelShuffleBackward0",
                   forward=lambda x, factor: _shuffle(x, factor),
                   backward=lambda ctx, g: (pixel_unshuffle(g, ctx.factor),),
                   saved={"upscale_factor": Attr("factor")})
PIXEL_UNSHUFFLE = Op("pixel_unshuffle", "PixelUnshuffleBackward0",
                     forward=lambda x, factor: _unshuffle(x, factor),
                     backward=lambda ctx, g: (pixel_shuffle(g, ctx.factor),),
                     saved={"downscale_factor": Attr("factor")})


def pixel_shuffle(input, factor):
    return apply(PIXEL_SHUFFLE, input, factor=factor)


def pixel_unshuffle(input, factor):
    return apply(PIXEL_UNSHUFFLE, input, factor=factor)

"""Padding and sliding windows: ``nn.functional.pad`` (constant mode,
``ConstantPadNdBackward0``) and ``Tensor.unfold`` (``UnfoldBackward0``), each with a backward
rule made of ops that differentiate again."""

from __future__ import annotations

import numpy as np

from .._tensor import _wrap_dim
from ._registry import Op, apply, declare, exports
from ._saved import SELF_SIZES, Attr, Computed, passed, torch_int


def _pad_forward(a, pads, value, pad_arg=None):
    """``pads`` = ((left, right) for each dim, first dim first); negative amounts crop. The
    padded array is filled, then the input written into its interior (``np.pad`` does the
    same in Python-level steps that cost more than the copy on a convolution's gradients)."""
    crop = tuple(slice(max(-left, 0), a.shape[d] - max(-right, 0))
                 for d, (left, right) in enumerate(pads))
    a = a[crop]
    widths = [(max(left, 0), max(right, 0)) for left, right in pads]
    out = np.full(tuple(n + left + right for n, (left, right) in zip(a.shape, widths)),
                  np.asarray(value).astype(a.dtype), dtype=a.dtype)
    out[tuple(slice(left, left + n) for n, (left, _) in zip(a.shape, widths))] = a
    return out


def _saved_pad(node):
    """PyTorch's ``_saved_pad``: the amounts as passed, last dim first (Note [Saved ints as
    passed]); the pad a backward applies, from its pairs."""
    amounts = node.attrs.get("pad_arg")
    if amounts is None:
        amounts = [amount for pair in reversed(node.attrs["pads"]) for amount in pair]
    return tuple(torch_int(amount) for amount in amounts)


PAD = Op("constant_pad_nd", "ConstantPadNdBackward0", forward=_pad_forward,
         backward=lambda ctx, g: (apply(PAD, g, pads=tuple((-left, -right) for left, right in
                                                           ctx.pads), value=0),),
         saved={"pad": Computed(_saved_pad)})


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)`` starts
    with the last dim; negative amounts crop. Only ``mode="constant"`` in gradviz."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode={mode!r} is not supported by gradviz (only "
                                  "'constant')")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")
    pairs = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        pairs[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    for d, (left, right) in enumerate(pairs):
        if input.shape[d] + left + right < 0:
            raise RuntimeError(f"The input size {input.shape[d]}, plus negative padding {left} "
                               f"and {right} resulted in a negative output size, which is "
                               "invalid. Check dimension {d} of your input.")
    return apply(PAD, input, pads=tuple(pairs), value=0 if value is None else value,
                 pad_arg=tuple(int(amount) for amount in pad))


# ---- Tensor.unfold ----------------------------------------------------------------------------

def _window_starts(length, size, step):
    return range(0, length - size + 1, step)


def _unfold_forward(a, dim, size, step, shape, dim_arg=None):
    """Every window as a view of ``a`` (strides, no copy), the window's own dim last, as in
    torch. Overlapping windows (``step < size``) share elements and stay writable, as in torch;
    an in-place op over several of them at once computes from the values before the write
    (torch's CPU kernel lets the writes compound, in its loop order)."""
    if a.ndim == 0:
        return a.reshape(1)
    count = (a.shape[dim] - size) // step + 1
    out_shape = a.shape[:dim] + (count,) + a.shape[dim + 1:] + (size,)
    strides = a.strides[:dim] + (a.strides[dim] * step,) + a.strides[dim + 1:] + (a.strides[dim],)
    return np.lib.stride_tricks.as_strided(a, out_shape, strides)


def _unfold_backward_forward(g, shape, dim, size, step, dim_arg=None):
    out = np.zeros(shape, dtype=g.dtype)
    if not shape:
        return g.reshape(())
    moved = np.moveaxis(g, -1, dim + 1)
    for i, s in enumerate(_window_starts(shape[dim], size, step)):
        index = [slice(None)] * len(shape)
        index[dim] = slice(s, s + size)
        out[tuple(index)] += np.take(moved, i, axis=dim)
    return out


def _dim_passed_on(ctx):
    return {"dim_arg": ctx.attrs["dim_arg"]} if "dim_arg" in ctx.attrs else {}


# the window's dim as passed to unfold, on the nodes of its backward too, as torch's
UNFOLD_BACKWARD = Op("unfold_backward", "UnfoldBackwardBackward0",
                     forward=_unfold_backward_forward,
                     backward=lambda ctx, g: (apply(UNFOLD, g, dim=ctx.dim, size=ctx.size,
                                                    step=ctx.step, shape=ctx.shape,
                                                    **_dim_passed_on(ctx)),),
                     saved={"dim": passed("dim"), "size": Attr("size"), "step": Attr("step")})
UNFOLD = Op("unfold", "UnfoldBackward0", forward=_unfold_forward, view=True,
            backward=lambda ctx, g: (apply(UNFOLD_BACKWARD, g, shape=ctx.shape,
                                           dim=ctx.dim, size=ctx.size, step=ctx.step,
                                           **_dim_passed_on(ctx)),),
            saved={"dimension": passed("dim"), "size": Attr("size"), "step": Attr("step"),
                   "self_sym_sizes": SELF_SIZES})


@declare(name=False, method=True)
def unfold(self, dimension, size, step):
    """Every window of ``size`` entries along ``dimension``, ``step`` apart, as a new last
    dim: a view of ``self``, as in torch."""
    dim = _wrap_dim(dimension, self.ndim)
    length = self.shape[dim] if self.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return apply(UNFOLD, self, dim=dim, size=size, step=step, shape=tuple(self.shape),
                 dim_arg=dimension)


__all__ = exports(globals(), "pad")

"""Ops of layers with their own weights that torch records as one node: ``prelu_kernel``
(``PreluKernelBackward0``: ``x`` where positive, else ``weight * x``) and ``trilinear``
(``TrilinearBackward0``: ``x1^T W[o] x2`` for each output feature, the heart of
``nn.Bilinear``); and ``add_scalar`` (``AddBackward1``), the tensor-plus-number that torch's C++
composites record (``rms_norm``'s ``+ eps``) where Python's ``x + 1.0`` records
``AddBackward0``. Their backward rules are written with differentiable ops (Note [Backward
rules are differentiable])."""

from __future__ import annotations

import numpy as np

from ._compose import einsum
from ._pointwise import where
from ._registry import Op, apply, promote_float, saves_inputs
from ._saved import OTHER, SELF

__all__ = ["prelu_kernel", "trilinear", "add_scalar"]


def _prelu_backward(ctx, g):
    x, weight = ctx.input(0), ctx.input(1)
    positive = x > 0
    grad_x = where(positive, g, weight * g) if ctx.needs_input_grad[0] else None
    grad_w = where(positive, 0.0, x * g) if ctx.needs_input_grad[1] else None
    return grad_x, grad_w  # the engine sums grad_w over the dims the weight was broadcast along


PRELU_KERNEL = Op("prelu_kernel", "PreluKernelBackward0",
                  forward=lambda x, weight: np.where(x > 0, x, weight * x).astype(x.dtype, copy=False),
                  backward=_prelu_backward, saves=saves_inputs(0, 1), dtype=promote_float,
                  saved={"self": SELF, "weight": OTHER})


def prelu_kernel(input, weight):
    """``input`` where positive, else ``weight * input`` (``weight`` broadcasts)."""
    return apply(PRELU_KERNEL, input, weight)


def _trilinear_backward(ctx, g):
    x1, weight, x2 = ctx.input(0), ctx.input(1), ctx.input(2)
    needs = ctx.needs_input_grad
    return (einsum("bo,oij,bj->bi", g, weight, x2) if needs[0] else None,
            einsum("bo,bi,bj->oij", g, x1, x2) if needs[1] else None,
            einsum("bo,oij,bi->bj", g, weight, x1) if needs[2] else None)


TRILINEAR = Op("trilinear", "TrilinearBackward0",
               forward=lambda x1, weight, x2: np.einsum("bi,oij,bj->bo", x1, weight, x2),
               backward=_trilinear_backward, saves=saves_inputs(0, 1, 2), dtype=promote_float)


def trilinear(input1, weight, input2):
    """(B, I) x (O, I, J) x (B, J) -> (B, O): ``input1[b] @ weight[o] @ input2[b]``."""
    return apply(TRILINEAR, input1, weight, input2)


ADD_SCALAR = Op("add_scalar", "AddBackward1",
                forward=lambda x, other: (x + np.asarray(other, dtype=x.dtype)).astype(x.dtype, copy=False),
                backward=lambda ctx, g: (g,))


def add_scalar(input, other):
    """``input + other`` for a Python number ``other``, in ``input``'s dtype (``AddBackward1``)."""
    return apply(ADD_SCALAR, input, other=other)

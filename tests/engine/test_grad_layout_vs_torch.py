"""The layout of a leaf's first ``.grad``, against PyTorch.

PyTorch's AccumulateGrad gives a dense leaf's ``.grad`` the leaf's own strides
(``clone_obey_contract``): a transposed or permuted weight gets a transposed gradient, so
``w.grad.view(-1)`` fails exactly when ``w.view(-1)`` would. A leaf with gaps gets a row-major
one; ``autograd.grad`` returns the gradient as the backward made it. Every expected value
below is read from torch running the same code.
"""

from __future__ import annotations

import pytest
import torch

import gradviz

LIBS = (torch, gradviz)


def _leaf(lib, kind):
    if kind == "transposed":
        return lib.ones(3, 2).t().requires_grad_()
    if kind == "permuted":
        return lib.ones(2, 3, 4).permute(2, 0, 1).requires_grad_()
    if kind == "strided":
        return lib.ones(6)[::2].requires_grad_()
    return lib.ones(2, 3).requires_grad_()


def _facts(lib, kind, how):
    x = _leaf(lib, kind)
    if how == "builtin":
        (x * 2).sum().backward()
    elif how == "custom":
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        Twice.apply(x).sum().backward()
    elif how == "twice":
        (x * 2).sum().backward()
        (x * 3).sum().backward()
    else:
        (grad,) = lib.autograd.grad((x * 2).sum(), x)
        return grad.stride(), grad.is_contiguous(), grad.tolist()
    try:
        flat = x.grad.view(-1).tolist()
    except RuntimeError as error:
        flat = type(error).__name__
    return x.grad.stride(), x.grad.is_contiguous(), x.grad.tolist(), flat


@pytest.mark.parametrize("kind", ["transposed", "permuted", "strided", "row_major"])
@pytest.mark.parametrize("how", ["builtin", "custom", "twice", "grad"])
def test_first_grad_takes_the_leafs_layout_as_in_torch(kind, how):
    expected, got = (_facts(lib, kind, how) for lib in LIBS)
    assert got == expected

"""``nn.grad.conv{1,2,3}d_input`` / ``_weight`` (also ``nn.functional.grad``) against
``torch.nn.grad``: the gradients of a convolution, over strides, padding, dilation and groups,
in float32 and float64 (within the summation-order rounding of the two convolutions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

GEOMETRIES = [(1, 0, 1, 1), (2, 1, 1, 2), (1, 2, 2, 1), (3, 0, 1, 4)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("stride,padding,dilation,groups", GEOMETRIES)
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_input_and_weight_gradients_match_torch(dims, stride, padding, dilation, groups, dtype):
    rng = np.random.default_rng(dims * 100 + stride * 10 + groups)
    x = rng.standard_normal((2, 4) + (7,) * dims).astype(dtype)
    w = rng.standard_normal((8, 4 // groups) + (3,) * dims).astype(dtype)
    out_shape = torch.nn.functional.__dict__[f"conv{dims}d"](
        torch.tensor(x), torch.tensor(w), None, stride, padding, dilation, groups).shape
    g = rng.standard_normal(tuple(out_shape)).astype(dtype)
    for kind in ("input", "weight"):
        results = []
        for m in (gradviz, torch):
            fn = getattr(m.nn.grad, f"conv{dims}d_{kind}")
            first = x.shape if kind == "input" else m.tensor(x)
            second = m.tensor(w) if kind == "input" else w.shape
            results.append(fn(first, second, m.tensor(g), stride, padding, dilation, groups))
        ours, theirs = results
        assert ours.dtype.itemsize == theirs.dtype.itemsize and tuple(ours.shape) == tuple(theirs.shape)
        tolerance = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=tolerance, atol=tolerance)


def test_functional_grad_is_the_module_and_follows_grad_mode():
    for m in (gradviz, torch):
        assert m.nn.functional.grad is m.nn.grad
        w = m.ones(1, 1, 1, 2, requires_grad=True)
        g = m.ones(1, 1, 3, 2)
        assert m.nn.grad.conv2d_input((1, 1, 3, 3), w, g).requires_grad
        assert not m.nn.grad.conv2d_input((1, 1, 3, 3), w.detach(), g).requires_grad
        with m.no_grad():
            assert not m.nn.grad.conv2d_input((1, 1, 3, 3), w, g).requires_grad

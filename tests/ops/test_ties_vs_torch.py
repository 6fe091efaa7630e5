"""Note [Ties of maximum and minimum] (gradviz/ops/_pointwise.py): relu, clamp with number
bounds, relu6, hardtanh and threshold give PyTorch's bits where the input equals a bound (the
sign of a zero) or is NaN, at every size (vectorized body and scalar tail), in float32 and
float64, contiguous or strided; threshold's gradient lets a NaN input's gradient through.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

VALUES = [-0.0, 0.0, -1.0, 2.0, 6.0, -6.0, float("nan"), float("inf"), -float("inf"), 0.5]
SIZES = (1, 3, 17, 1000)
LAYOUTS = ("contiguous", "every other", "transposed")


def _input(lib, size, dtype, layout):
    values = np.resize(np.array(VALUES, dtype=dtype), size * 2 if layout == "every other" else size)
    tensor = lib.tensor(values)
    if layout == "every other":
        return tensor[::2]
    if layout == "transposed":
        return tensor.reshape(size, 1).t()
    return tensor


FUNCTIONS = {
    "relu": lambda lib, x: lib.relu(x),
    "F.relu": lambda lib, x: lib.nn.functional.relu(x),
    "F.relu inplace": lambda lib, x: lib.nn.functional.relu(x.clone(), inplace=True),
    "nn.ReLU": lambda lib, x: lib.nn.ReLU()(x),
    "relu_": lambda lib, x: x.clone().relu_(),
    "clamp(min=0)": lambda lib, x: x.clamp(min=0),
    "clamp(min=-0.0)": lambda lib, x: x.clamp(min=-0.0),
    "clamp(max=0)": lambda lib, x: x.clamp(max=0),
    "clamp(max=-0.0)": lambda lib, x: x.clamp(max=-0.0),
    "clamp(0, 0)": lambda lib, x: x.clamp(0, 0),
    "clamp(-0.0, 0.0)": lambda lib, x: x.clamp(-0.0, 0.0),
    "clamp(-1, 1)": lambda lib, x: lib.clamp(x, -1, 1),
    "clamp(2, 1)": lambda lib, x: lib.clamp(x, 2, 1),
    "clamp_min": lambda lib, x: x.clamp_min(0),
    "clamp_max": lambda lib, x: x.clamp_max(0),
    "clamp_": lambda lib, x: x.clone().clamp_(min=0),
    "clip": lambda lib, x: lib.clip(x, 0, 6),
    "relu6": lambda lib, x: lib.nn.functional.relu6(x),
    "hardtanh": lambda lib, x: lib.nn.functional.hardtanh(x, 0.0, 1.0),
    "threshold": lambda lib, x: lib.nn.functional.threshold(x, 0.0, 5.0),
    "threshold at -0.0": lambda lib, x: lib.nn.functional.threshold(x, -0.0, -0.0),
    "threshold_": lambda lib, x: lib.nn.functional.threshold_(x.clone(), 0.0, 5.0),
}


def _same_bits(got, want):
    got, want = got.detach().numpy(), want.detach().numpy()
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got, want, equal_nan=True)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # zeros' signs


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ties_and_nan_as_torch(name, dtype, size, layout):
    fn = FUNCTIONS[name]
    want = fn(torch, _input(torch, size, dtype, layout))
    got = fn(gradviz, _input(gradviz, size, dtype, layout))
    _same_bits(got, want)


# PyTorch's hardtanh backward gives a NaN input's gradient 0 in its vectorized body and lets
# it through in its scalar tail: those two are checked on numbers only
@pytest.mark.parametrize("name, with_nan", [
    ("relu", True), ("clamp(min=0)", True), ("clamp(-1, 1)", True), ("threshold", True),
    ("threshold at -0.0", True), ("relu6", False), ("hardtanh", False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_at_ties_and_nan_as_torch(name, with_nan, dtype):
    fn = FUNCTIONS[name]
    grads = []
    for lib in (torch, gradviz):
        x = _input(lib, 17, dtype, "contiguous")
        if not with_nan:
            x = lib.nan_to_num(x, nan=0.25)
        x.requires_grad_(True)
        weights = lib.tensor(np.linspace(-2.0, 2.0, 17).astype(dtype))
        (fn(lib, x) * weights).sum().backward()
        grads.append(x.grad)
    _same_bits(grads[1], grads[0])

"""The backward of piecewise-linear activations against PyTorch (Note [Backward of
piecewise-linear activations] in gradviz/ops/_activation.py): whether a first derivative taken
with ``create_graph=True`` still depends on the input (so a second derivative is zeros rather
than an error), its node names, and which NaN gradients a zero slope lets through."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import gradviz

X = [2.0, -1.5, 0.25, -0.3, 7.0]


def _f(lib):
    return lib.nn.functional


ACTIVATIONS = {
    "relu": lambda L, x: L.relu(x),
    "leaky_relu": lambda L, x: _f(L).leaky_relu(x, 0.1),
    "leaky_relu_zero_slope": lambda L, x: _f(L).leaky_relu(x, 0.0),
    "hardtanh": lambda L, x: _f(L).hardtanh(x),
    "relu6": lambda L, x: _f(L).relu6(x),
    "hardshrink": lambda L, x: _f(L).hardshrink(x, 0.5),
    "softshrink": lambda L, x: _f(L).softshrink(x, 0.5),
    "threshold": lambda L, x: _f(L).threshold(x, 0.1, 3.0),
    "clamp": lambda L, x: x.clamp(-0.5, 0.5),
    "clamp_min": lambda L, x: x.clamp(min=0.0),
    "sign_times_x": lambda L, x: x.sign() * x,
}


def _second_derivative(lib, name):
    x = lib.tensor(X, requires_grad=True)
    y = ACTIVATIONS[name](lib, x)
    (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
    facts = [y.detach().tolist(), y.grad_fn.name(), g.detach().tolist(), g.requires_grad]
    if g.requires_grad:
        facts.append(g.grad_fn.name())
        (h,) = lib.autograd.grad((g * g).sum(), x)
        facts.append(h.tolist())
    return facts


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_second_derivative_and_node_names(name):
    expected = _second_derivative(torch, name)
    got = _second_derivative(gradviz, name)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    assert got[1] == expected[1]
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-6)
    assert got[3:] == expected[3:]


def test_hessian_of_a_leaky_relu_network_with_respect_to_its_input():
    """The input reaches the first derivative only through the activations' masks: torch gives
    zeros, where a constant mask would make autograd.grad raise "not used in the graph"."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((1, 4))
    results = []
    for lib in (torch, gradviz):
        x = lib.tensor(rng.standard_normal(3).tolist(), dtype=lib.float64, requires_grad=True)
        a = lib.tensor(w1, requires_grad=True)
        b = lib.tensor(w2, requires_grad=True)
        y = (b @ _f(lib).leaky_relu(a @ x, 0.2)).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        hessian = [lib.autograd.grad(g[i], x, retain_graph=True)[0].tolist() for i in range(3)]
        results.append(hessian)
    assert results[0] == results[1] == [[0.0] * 3] * 3


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_nan_gradients_through_zero_slopes(name):
    """A select (relu, hardtanh, clamp, ...) keeps a NaN upstream gradient out where the slope
    is zero; a product (leaky_relu with slope 0) lets it through, as torch's kernels do."""
    nans = []
    for lib in (torch, gradviz):
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        y = ACTIVATIONS[name](lib, x)
        (g,) = lib.autograd.grad(y, x, lib.full(y.shape, math.nan, dtype=lib.float64))
        nans.append(np.isnan(g.numpy()).tolist())
    assert nans[0] == nans[1]


def test_threshold_in_place_keeps_its_gradient():
    for lib in (torch, gradviz):
        x = lib.tensor(X, requires_grad=True)
        y = x * 1.0
        _f(lib).threshold(y, 0.1, 3.0, inplace=True)
        y.sum().backward()
        assert x.grad.tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape", [(1,), (0,), (0, 3)])
def test_variance_without_degrees_of_freedom(shape, correction):
    """No degrees of freedom left: the gradient is nan (one element) or empty, as in torch."""
    grads = []
    for lib in (torch, gradviz):
        x = lib.zeros(shape, dtype=lib.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # both warn that there are no degrees of freedom
            x.var(dim=0, correction=correction).sum().backward()
        grads.append(np.isnan(x.grad.numpy()).tolist())
    assert grads[0] == grads[1]


def test_cumprod_over_an_empty_dim():
    shapes = []
    for lib in (torch, gradviz):
        x = lib.zeros(4, 0, dtype=lib.float64, requires_grad=True)
        y = x.norm(dim=0).cumprod(0)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        shapes.append(tuple(g.shape))
    assert shapes[0] == shapes[1] == (4, 0)


def _force(lib):
    return {"force": True} if lib is torch else {}  # torch's zero gradients are ZeroTensors


def _sign_of_another_tensor(lib):
    a = lib.tensor([0.5, -1.5, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([2.0, -3.0, 0.0], dtype=lib.float64, requires_grad=True)
    ga, gb = lib.autograd.grad((a.abs() * b.sign()).sum(), [a, b], create_graph=True)
    facts = [ga.tolist(), ga.requires_grad, gb.tolist(), gb.requires_grad]
    facts.append([None if h is None else h.detach().numpy(**_force(lib)).tolist()
                  for h in lib.autograd.grad((ga + gb).sum(), [a, b], allow_unused=True)])
    try:
        lib.autograd.grad(gb.sum(), b)
    except RuntimeError as e:
        facts.append(("RuntimeError", "does not require grad" in str(e)))
    return facts


def test_gradient_through_sign_is_a_constant_zero():
    """torch's sign backward is ``zeros_like(grad)``: b's gradient in ``a.abs() * b.sign()``
    does not require grad under create_graph (so differentiating it alone raises), and
    a second derivative with allow_unused gives zeros for b only through a's path."""
    assert _sign_of_another_tensor(gradviz) == _sign_of_another_tensor(torch)


INTEGER_INPUT_ACTIVATIONS = ["mish", "silu", "gelu", "elu", "selu", "celu", "softplus", "hardswish",
                             "hardsigmoid", "logsigmoid", "leaky_relu", "softsign", "hardtanh", "relu6"]


def _on_integers(lib, name, dtype):
    try:
        out = getattr(lib.nn.functional, name)(lib.tensor([1, 0, 2], dtype=getattr(lib, dtype)))
        return ("value", str(out.dtype).split(".")[-1], out.tolist())
    except (RuntimeError, NotImplementedError) as e:
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("dtype", ["bool", "int64", "uint8"])
@pytest.mark.parametrize("name", INTEGER_INPUT_ACTIVATIONS)
def test_activation_of_integer_tensor(name, dtype):
    """torch's activation kernels exist for floating types only: an integer or bool input is
    a NotImplementedError naming the kernel (hardtanh refuses bool alone, and keeps integers);
    gradviz computed them in float (mish of a bool tensor; found by the op fuzzer)."""
    assert _on_integers(gradviz, name, dtype) == _on_integers(torch, name, dtype)


def _addcmul_of_integers(lib, value, dtypes):
    a, b, c = (lib.tensor([1, 2], dtype=getattr(lib, d)) for d in dtypes)
    try:
        out = lib.addcmul(a, b, c, value=value)
        return ("value", str(out.dtype).split(".")[-1], out.tolist())
    except (RuntimeError, NotImplementedError) as e:
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("value", [0.5, 1.5, -1.7, 2, True])
@pytest.mark.parametrize("dtypes", [("int64",) * 3, ("int32", "uint8", "int16"), ("bool",) * 3,
                                    ("bool", "bool", "int64"), ("int64", "float32", "int64")])
def test_addcmul_integer_tensors_with_float_value(value, dtypes):
    """For integer tensors torch converts ``value`` to the integer type (truncating: 0.5 adds
    nothing) and the result stays integer; all-bool tensors have no kernel. gradviz gave a
    float64 result (found by the op fuzzer)."""
    assert _addcmul_of_integers(gradviz, value, dtypes) == _addcmul_of_integers(torch, value, dtypes)

"""The small modules and losses teaching code uses against torch 2.13: padding modules and
``F.pad`` in every mode, channel dropout, the margin/embedding/likelihood losses, and the small
activations and pools (values, gradients of inputs and parameters in float32 and float64, all
reductions, repr, and torch's errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from layer_compare import close, compare_layer, same_error

DTYPES = ["float32", "float64"]


def lib_of(t):
    return gradviz if isinstance(t, gradviz.Tensor) else torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def second_order(fn, arrays, seed=3):
    """d/dx of sum(grad(fn(x)) * probe), with the graph of the first derivative, against
    torch's, in float64."""
    results = []
    for lib in (gradviz, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *xs)
        probe = lib.tensor(np.random.default_rng(seed).standard_normal(tuple(out.shape)))
        grads = lib.autograd.grad((out * probe).sum(), xs, create_graph=True)
        total = sum((g * g).sum() for g in grads)
        results.append(lib.autograd.grad(total, xs, allow_unused=True))
    for i, (a, b) in enumerate(zip(*results)):
        close(a, b, f"second-order grad of input {i}")


# ---- padding ---------------------------------------------------------------------------------

PAD_CASES = [
    ((2, 3, 5), (2, 1), "reflect"),
    ((3, 5), (0, 4), "reflect"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "reflect"),
    ((3, 4, 5), (2, 2, 2, 2), "reflect"),
    ((2, 3, 5), (-1, 3), "reflect"),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "reflect"),
    ((2, 3, 5), (4, 6), "replicate"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "replicate"),
    ((2, 3, 4, 5), (-2, 2, 1, -1), "replicate"),
    ((2, 3, 5), (5, 2), "circular"),
    ((2, 3, 4, 5), (1, 2, 3, 4), "circular"),
    ((2, 3, 5), (-1, 2), "circular"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "constant"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,pads,mode", PAD_CASES, ids=[f"{m}-{s}-{p}" for s, p, m in PAD_CASES])
def test_pad_modes(shape, pads, mode, dtype):
    compare_layer(lambda nn: nn.Identity(), [rand(*shape)], dtype,
                  forward=lambda layer, t: lib_of(t).nn.functional.pad(t, pads, mode))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_second_order(mode):
    second_order(lambda lib, x: lib.nn.functional.pad(x, (2, 1, 1, 2), mode) ** 2,
                 [rand(2, 3, 4, 5)])


PAD_MODULES = [
    ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad1d", ((1, 3),), (3, 5)),
    ("ReflectionPad2d", (1,), (2, 3, 4, 5)), ("ReflectionPad2d", ((1, 0, 2, 3),), (3, 4, 5)),
    ("ReplicationPad1d", (3,), (2, 3, 5)), ("ReplicationPad2d", ((3, 0, 1, 2),), (2, 3, 4, 5)),
    ("CircularPad1d", (2,), (2, 3, 5)), ("CircularPad2d", ((1, 2, 0, 3),), (2, 3, 4, 5)),
    ("ZeroPad1d", ((2, 1),), (2, 3, 5)), ("ZeroPad2d", (2,), (2, 3, 4, 5)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 5)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0), (3, 4, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,shape", PAD_MODULES, ids=[f"{n}-{a}" for n, a, _ in PAD_MODULES])
def test_pad_modules(name, args, shape, dtype):
    compare_layer(lambda nn: getattr(nn, name)(*args), [rand(*shape)], dtype)
    assert repr(getattr(gradviz.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


@pytest.mark.parametrize("call,phrase", [
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (3, 3, 0, 0), "reflect"),
     "Padding size should be less than the corresponding input dimension"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 5), (5, 0), "reflect"), "Argument #4"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5), (0, 0, 3, 3), "reflect"), "Argument #6"),
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (4, 0, 0, 0), "circular"),
     "wrapping around more than once"),
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (1, 1), "reflect"),
     "Padding size 2 is not supported for 4D input tensor"),
    (lambda lib: lib.nn.functional.pad(lib.ones(5), (1, 1), "replicate"),
     "Padding size 2 is not supported for 1D input tensor"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3), (1, 1), "reflect", 1.0),
     "doesn't take in value argument"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3), (1, 1), "mirror"),
     "Unrecognised padding mode mirror"),
    (lambda lib: lib.nn.ReflectionPad2d(2)(lib.ones(3)), "Padding length should be less than"),
    (lambda lib: lib.nn.ZeroPad2d(2)(lib.ones(3)), "Padding length should be less than"),
    (lambda lib: lib.nn.CircularPad2d(2)(lib.ones(3)), "expected 3D or 4D input (got 1D input)"),
    (lambda lib: lib.nn.CircularPad1d(2)(lib.ones(2, 3, 4, 5)), "expected 2D or 3D input (got 4D input)"),
])
def test_pad_errors(call, phrase):
    same_error(lambda: call(gradviz), lambda: call(torch), phrase)

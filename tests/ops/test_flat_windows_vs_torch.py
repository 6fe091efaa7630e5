"""Stride-1 convolutions over the flattened padded input (Note [Flat windows] in
``gradviz/ops/_flat_windows.py``) against PyTorch: values and every gradient, with padding,
dilation, groups, odd shapes, non-contiguous inputs, float32 and float64; the strided-window
path taken for non-finite operands; second derivatives by gradcheck."""

import numpy as np
import pytest
import torch

import gradviz as gv
from gradviz.ops._conv import _Geometry
from gradviz.ops._flat_windows import flat_windows

TOLERANCES = {np.float32: (2e-5, 2e-4), np.float64: (1e-11, 1e-10)}

# (input shape, weight shape, arguments)
CASES = {
    "lenet_1": ((3, 1, 12, 11), (4, 1, 5, 5), dict(padding=2)),
    "lenet_2": ((2, 6, 9, 10), (5, 6, 5, 5), dict()),
    "padding_per_dim": ((2, 3, 7, 9), (4, 3, 3, 2), dict(padding=(2, 1))),
    "dilation": ((2, 4, 11, 14), (6, 4, 3, 3), dict(padding=(2, 1), dilation=(2, 3))),
    "groups": ((2, 6, 8, 7), (9, 2, 3, 3), dict(padding=1, groups=3)),
    "depthwise": ((2, 4, 8, 7), (4, 1, 3, 3), dict(padding=1, groups=4)),
    "one_by_one": ((2, 5, 4, 6), (3, 5, 1, 1), dict()),
    "kernel_fills_input": ((2, 3, 5, 5), (2, 3, 5, 5), dict(padding=2)),
    "conv1d": ((3, 4, 23), (5, 4, 4), dict(padding=2, dilation=2)),
    "conv1d_groups": ((2, 4, 17), (6, 2, 3), dict(groups=2)),
    "conv3d": ((2, 3, 5, 6, 7), (4, 3, 2, 3, 2), dict(padding=1)),
    "conv3d_dilation": ((1, 2, 7, 6, 8), (3, 2, 3, 2, 3), dict(padding=(0, 1, 2), dilation=(2, 1, 2))),
}


def _function(module, x_shape):
    return getattr(module.nn.functional, f"conv{len(x_shape) - 2}d")


def _operands(x_shape, w_shape, dtype, seed, transposed_input=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    if transposed_input:  # a non-contiguous input: the last two dims swapped in memory
        x = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    return x, rng.standard_normal(w_shape).astype(dtype), rng.standard_normal(w_shape[0]).astype(dtype)


def _run(module, arrays, x_shape, arguments, seed_array):
    tensors = [module.tensor(a, requires_grad=True) for a in arrays]
    if module is gv:
        tensors[0] = gv.tensor(arrays[0], requires_grad=True)
    out = _function(module, x_shape)(*tensors, **arguments)
    out.backward(module.tensor(seed_array))
    return out.detach().numpy(), [t.grad.numpy() for t in tensors]


def _compare(x, w, b, arguments, dtype):
    rtol, atol = TOLERANCES[dtype]
    t_out = _function(torch, x.shape)(torch.tensor(x), torch.tensor(w), torch.tensor(b), **arguments)
    seed = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(dtype)
    want_out, want_grads = _run(torch, (x, w, b), x.shape, arguments, seed)
    got_out, got_grads = _run(gv, (x, w, b), x.shape, arguments, seed)
    np.testing.assert_allclose(got_out, want_out, rtol=rtol, atol=atol)
    for name, got, want in zip(("input", "weight", "bias"), got_grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * 10, err_msg=name)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_stride_one_convolution_matches_torch(name, dtype):
    x_shape, w_shape, arguments = CASES[name]
    x, w, b = _operands(x_shape, w_shape, dtype, seed=len(name))
    _compare(x, w, b, arguments, dtype)


@pytest.mark.parametrize("name", ["lenet_2", "dilation", "conv3d"])
def test_non_contiguous_input_matches_torch(name):
    x_shape, w_shape, arguments = CASES[name]
    x, w, b = _operands(x_shape, w_shape, np.float64, seed=3, transposed_input=True)
    assert not x.flags.c_contiguous
    _compare(x, w, b, arguments, np.float64)


def test_the_cases_take_the_flat_windows():
    # the flat layout is what these tests are about: each case must take it
    for name, (x_shape, w_shape, arguments) in CASES.items():
        dims = len(x_shape) - 2
        geometry = _Geometry(w_shape[2:], arguments.get("dilation", 1),
                             arguments.get("padding", 0), 1, dims)
        sizes = x_shape[2:]
        if dims == 1:  # a 1-D convolution runs as 2-D over (1, L)
            geometry = _Geometry((1,) + w_shape[2:], (1, arguments.get("dilation", 1)),
                                 (0, arguments.get("padding", 0)), 1)
            sizes = (1,) + sizes
        assert flat_windows(geometry, sizes) is not None, name


def test_strided_convolution_keeps_the_strided_windows():
    assert flat_windows(_Geometry(3, 1, 1, 2), (8, 8)) is None
    x, w, b = _operands((2, 3, 9, 8), (4, 3, 3, 2), np.float64, seed=5)
    _compare(x, w, b, dict(stride=2, padding=1), np.float64)


@pytest.mark.parametrize("bad", ["weight_nan", "weight_inf", "input_nan", "input_inf"])
def test_non_finite_operands_match_torch(bad):
    # the garbage columns would spread a NaN or Inf where torch has none: these take the
    # strided windows, and give torch's values, NaN and Inf in the same places
    x, w, b = _operands((2, 3, 7, 8), (4, 3, 3, 3), np.float64, seed=7)
    value = np.nan if bad.endswith("nan") else np.inf
    if bad.startswith("weight"):
        w[1, 2, 0, 2] = value
    else:
        x[1, 0, 3, 0] = value
    arguments = dict(padding=(0, 1))
    t_out = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **arguments)
    seed = np.random.default_rng(2).standard_normal(tuple(t_out.shape))
    want_out, want_grads = _run(torch, (x, w, b), x.shape, arguments, seed)
    got_out, got_grads = _run(gv, (x, w, b), x.shape, arguments, seed)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-11, atol=1e-11)
    for got, want in zip(got_grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-10)


@pytest.mark.parametrize("name", ["padding_per_dim", "groups", "conv1d", "conv3d"])
def test_second_derivatives_by_gradcheck(name):
    x_shape, w_shape, arguments = CASES[name]
    small = tuple(min(s, 5) if i >= 2 else min(s, 2) for i, s in enumerate(x_shape))
    small = small[:1] + x_shape[1:2] + small[2:]
    x, w, b = _operands(small, w_shape, np.float64, seed=11)
    inputs = [gv.tensor(a, requires_grad=True) for a in (x, w, b)]
    function = _function(gv, small)
    assert gv.autograd.gradcheck(lambda *t: function(*t, **arguments), inputs)
    assert gv.autograd.gradgradcheck(lambda *t: function(*t, **arguments), inputs)

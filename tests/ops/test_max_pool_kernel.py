"""Note [Max pool kernels]: the compiled 2-D max pool picks the same winners as the numpy scan
(torch's rule: first maximum, last NaN, never padding) and gives the same gradients bit for
bit, over random geometries (padding, stride, dilation, ceil_mode), NaN and ties; and the
layer still matches torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops import _conv
from gradviz_ext import ops as ext_ops

COMPILED = gradviz.config()["engine"] == "compiled"


def _geometries(count, seed):
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(3, 11)),
                 int(rng.integers(3, 11)))
        kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
        stride = tuple(int(s) for s in rng.integers(1, 4, 2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
        padding = tuple(min(int(rng.integers(0, 2)), k // 2) for k in kernel)
        geometry = _conv._Geometry(kernel, dilation, padding, stride, ceil_mode=bool(rng.integers(0, 2)))
        if min(geometry.blocks(*shape[2:])) > 0:
            found.append((shape, geometry))
    return found


def _numpy_path(monkeypatch, function, *args):
    with monkeypatch.context() as patch:
        patch.setattr(ext_ops, "max_pool2d_arrays", lambda *a: None)
        patch.setattr(ext_ops, "max_pool2d_backward_arrays", lambda *a: None)
        return function(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_picks_the_numpy_scans_winners(dtype, monkeypatch):
    rng = np.random.default_rng(1)
    for shape, geometry in _geometries(150, 2):
        x = np.round(rng.standard_normal(shape), 1).astype(dtype)  # ties
        if rng.random() < 0.3:
            x.flat[rng.integers(0, x.size, 2)] = np.nan
        got = _conv._window_maxima(x, geometry, -np.inf)
        want = _numpy_path(monkeypatch, _conv._window_maxima, x, geometry, -np.inf)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernels_gradients_equal_the_numpy_rules_bit_for_bit(dtype, monkeypatch):
    rng = np.random.default_rng(3)
    for shape, geometry in _geometries(60, 4):
        x = gradviz.tensor(np.round(rng.standard_normal(shape), 1).astype(dtype), requires_grad=True)
        stride, padding, dilation = geometry.stride, geometry.padding, geometry.dilation

        def grads(x=x, geometry=geometry):
            found = []
            seed = None
            for create in (False, True):
                out = gradviz.nn.functional.max_pool2d(x, geometry.kernel, stride, padding,
                                                       dilation, ceil_mode=geometry.ceil_mode)
                if seed is None:
                    seed = gradviz.tensor(rng.standard_normal(tuple(out.shape)).astype(dtype))
                found.append(gradviz.autograd.grad(out, x, seed, create_graph=create)[0]
                             .detach().numpy())
            return found

        state = rng.bit_generator.state
        fast, slow = grads()
        rng.bit_generator.state = state
        numpy_fast, _ = _numpy_path(monkeypatch, grads)
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(fast, numpy_fast)


def test_the_layer_with_the_kernel_matches_torch():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        xt = lib.tensor(x, requires_grad=True)
        out, indices = lib.nn.functional.max_pool2d(xt, 3, 2, 1, return_indices=True)
        (out * lib.tensor(np.arange(out.numel(), dtype=np.float32).reshape(out.shape))).sum().backward()
        results.append((out.detach().numpy(), indices.numpy(), xt.grad.numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", [2, 3])
def test_a_tiling_pools_kernel_gradient_equals_the_tile_paths_and_torchs(dtype, kernel,
                                                                          monkeypatch):
    """Windows that tile the input (kernel = stride, no padding) take the compiled backward's
    single pass; non-finite and negative-zero output gradients included (the numpy tile path
    takes the scatter for those)."""
    rng = np.random.default_rng(kernel)
    x = np.round(rng.standard_normal((3, 2, 4 * kernel, 2 * kernel)), 1).astype(dtype)
    x[0, 0, 0, :2] = np.nan
    for special in (False, True):
        seed = rng.standard_normal((3, 2, 4, 2)).astype(dtype)
        if special:
            seed[0, 0, 0, 0], seed[1, 1, 2, 1], seed[2, 0, 3, 0] = np.inf, -0.0, np.nan

        def grad(lib, seed=seed):
            xt = lib.tensor(x, requires_grad=True)
            lib.nn.functional.max_pool2d(xt, kernel).backward(lib.tensor(seed))
            return xt.grad.numpy()

        got = grad(gradviz)
        np.testing.assert_array_equal(got, _numpy_path(monkeypatch, grad, gradviz))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(_numpy_path(monkeypatch, grad, gradviz)))
        np.testing.assert_array_equal(got, grad(torch))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_a_2x2_pools_forward_picks_the_numpy_scans_winners(dtype, ceil_mode, monkeypatch):
    """The 2x2, stride 2 pool (nn.MaxPool2d(2)) has a loop of its own in the kernel: the same
    values and winners as the numpy scan over odd sizes (the last row and column dropped, or
    partial windows with ceil_mode), ties of equal values and of 0.0 and -0.0, infinities and
    one to four NaNs in a window; and the values (the sign of a zero included) and indices
    torch gives."""
    rng = np.random.default_rng(11)
    geometry = _conv._Geometry((2, 2), (1, 1), (0, 0), (2, 2), ceil_mode=ceil_mode)
    for height, width in [(2, 2), (4, 6), (5, 7), (28, 28), (3, 2), (10, 11), (2, 9)]:
        if min(geometry.blocks(height, width)) <= 0:
            continue
        x = np.round(rng.standard_normal((3, 4, height, width)), 0).astype(dtype)  # many ties
        flat = x.reshape(-1)
        picks = rng.integers(0, flat.size, flat.size // 5)
        flat[picks[::4]] = np.nan
        flat[picks[1::4]] = np.inf
        flat[picks[2::4]] = -np.inf
        flat[picks[3::4]] = -0.0
        if height >= 2 and width >= 2:
            x[0, 0, :2, :2] = np.nan  # a window of NaNs only
            x[0, 1, :2, :2] = [[0.0, -0.0], [-0.0, 0.0]]
        got = _conv._window_maxima(x, geometry, -np.inf)
        want = _numpy_path(monkeypatch, _conv._window_maxima, x, geometry, -np.inf)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        values, indices = gradviz.nn.functional.max_pool2d(
            gradviz.tensor(x), 2, ceil_mode=ceil_mode, return_indices=True)
        expected, expected_indices = torch.nn.functional.max_pool2d(
            torch.tensor(x), 2, ceil_mode=ceil_mode, return_indices=True)
        np.testing.assert_array_equal(values.numpy(), expected.numpy())
        if COMPILED:  # the sign of a zero maximum is the first zero's, as torch keeps it
            # (numpy's maximum, which the interpreted engine's scan uses, may return either)
            np.testing.assert_array_equal(np.signbit(values.numpy()),
                                          np.signbit(expected.numpy()))
        np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())


def test_a_2x2_pool_of_a_strided_input_matches_torch():
    """A non-contiguous input (a channels-last view) takes the numpy scan; same answer."""
    x = np.random.default_rng(12).standard_normal((2, 6, 8, 3)).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        xt = lib.tensor(x).permute(0, 3, 1, 2).requires_grad_()
        out, indices = lib.nn.functional.max_pool2d(xt, 2, return_indices=True)
        out.sum().backward()
        results.append((out.detach().numpy(), indices.numpy(), xt.grad.numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_array_equal(mine, theirs)

"""``as_strided`` against PyTorch: im2col's overlapping windows (values, first and second
derivatives, and a convolution built from them equal to conv2d), sliding windows, explicit
storage offsets, inputs whose memory is in another dimension order, writes through a view,
and the errors (Note [Strided views of a tensor's memory])."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz as gv

RNG = np.random.default_rng(23)

CASES = {
    # name: (input array, make the input from a leaf, size, stride, storage_offset)
    "im2col": (RNG.standard_normal((4, 5)), lambda x: x, (2, 3, 3, 3), (5, 1, 5, 1), None),
    "sliding_1d": (RNG.standard_normal(10), lambda x: x, (8, 3), (1, 1), None),
    "offset": (RNG.standard_normal(12), lambda x: x, (3, 2), (3, 1), 2),
    "transpose_memory": (RNG.standard_normal((3, 4)), lambda x: x.t().contiguous().t(), (2, 2), (3, 1), 1),
    "broadcast_rows": (RNG.standard_normal(4), lambda x: x, (3, 4), (0, 1), None),
    "view_of_view": (RNG.standard_normal((2, 6)), lambda x: x.reshape(3, 4), (2, 2), (4, 2), None),
}


def _run(m, name, order):
    data, make, size, stride, offset = CASES[name]
    leaf = m.tensor(data, requires_grad=True)
    view = make(leaf).as_strided(size, stride, offset)
    weights = m.tensor(np.linspace(-1, 2, view.numel()).reshape(size))
    out = (view * weights).sin().sum()
    (first,) = m.autograd.grad(out, leaf, create_graph=order > 1)
    second = None
    if order > 1:
        (second,) = m.autograd.grad((first * first).sum(), leaf)
    return type(view.grad_fn).__name__, view.detach().numpy().copy(), first.detach().numpy(), (
        None if second is None else second.numpy())


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_derivatives_match_torch(name):
    got, want = _run(gv, name, 2), _run(torch, name, 2)
    assert got[0] == want[0] == "AsStridedBackward0"
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_convolution_from_im2col_windows_is_conv2d():
    image, kernel = RNG.standard_normal((1, 1, 6, 6)), RNG.standard_normal((1, 1, 3, 3))
    x = gv.tensor(image, requires_grad=True)
    windows = x[0, 0].as_strided((4, 4, 3, 3), (6, 1, 6, 1))
    ours = (windows * gv.tensor(kernel[0, 0])).sum((-1, -2))
    reference = gv.nn.functional.conv2d(gv.tensor(image), gv.tensor(kernel))[0, 0]
    np.testing.assert_allclose(ours.detach().numpy(), reference.numpy(), rtol=1e-12)
    ours.sum().backward()
    t = torch.tensor(image, requires_grad=True)
    torch.nn.functional.conv2d(t, torch.tensor(kernel)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_writes_through_a_view_match_torch_and_overlapping_views_refuse_them():
    for m in (gv, torch):
        base = m.arange(1.0, 7.0, dtype=m.float64, requires_grad=True)
        y = base * 1
        y.as_strided((3,), (2,)).mul_(2)
        assert type(y.grad_fn).__name__ == "CopySlices"
        y.sum().backward()
        if m is gv:
            ours = (y.detach().numpy().copy(), base.grad.numpy().copy())
        else:
            np.testing.assert_array_equal(ours[0], y.detach().numpy())
            np.testing.assert_array_equal(ours[1], base.grad.numpy())
    y = gv.arange(6.0) * 1
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        y.as_strided((2, 2), (1, 1)).mul_(2)


def test_errors_match_torch():
    for m in (gv, torch):
        x = m.arange(6.0)
        with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
            x.as_strided((3, 3), (2, 1))
        with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
            x.as_strided((2, 2), (1,))
        with pytest.raises(RuntimeError, match="Negative strides are not supported"):
            x.as_strided((2,), (-1,), 3)
    sliced = gv.arange(10.0)[::2]
    with pytest.raises(NotImplementedError, match="call .contiguous"):
        sliced.as_strided((2,), (1,))
    with pytest.raises(NotImplementedError, match="outside the input's own elements"):
        gv.arange(10.0)[2:].as_strided((2,), (1,), 0)


def test_torch_level_function_and_size_zero():
    np.testing.assert_array_equal(gv.as_strided(gv.arange(6.0), (2, 2), (2, 1)).numpy(),
                                  torch.as_strided(torch.arange(6.0), (2, 2), (2, 1)).numpy())
    assert tuple(gv.arange(6.0).as_strided((0, 3), (1, 1)).shape) == (0, 3)

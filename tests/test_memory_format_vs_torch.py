"""Memory formats and the small torch-level constructors against PyTorch: strides after
``contiguous``/``clone``/``to``/``*_like`` with each format, ``is_contiguous`` per format,
errors, and that values and gradients never depend on the layout (Note [Memory formats])."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch

import gradviz as gv

DATA = np.random.default_rng(3).standard_normal((2, 3, 4, 5))

LAYOUTS = {
    "plain": lambda m, x: x,
    "transposed": lambda m, x: x.transpose(1, 2),
    "channels_last": lambda m, x: x.contiguous(memory_format=m.channels_last),
    "sliced": lambda m, x: x[:, :, ::2],
    "expanded": lambda m, x: x[:, :1].expand(2, 3, 4, 5),
    "size_one_channels": lambda m, x: x[:, :1, :1],
}
MAKERS = {
    "contiguous": lambda m, x: x.contiguous(),
    "contiguous_channels_last": lambda m, x: x.contiguous(memory_format=m.channels_last),
    "clone": lambda m, x: x.clone(),
    "clone_contiguous": lambda m, x: x.clone(memory_format=m.contiguous_format),
    "clone_channels_last": lambda m, x: x.clone(memory_format=m.channels_last),
    "to_channels_last": lambda m, x: x.to(memory_format=m.channels_last),
    "to_dtype_channels_last": lambda m, x: x.to(m.float32, memory_format=m.channels_last),
    "zeros_like": lambda m, x: m.zeros_like(x),
    "ones_like_contiguous": lambda m, x: m.ones_like(x, memory_format=m.contiguous_format),
    "empty_like_channels_last": lambda m, x: m.empty_like(x, memory_format=m.channels_last).zero_(),
    "full_like": lambda m, x: m.full_like(x, 2.0),
    "randn_like_shape": lambda m, x: m.randn_like(x) * 0,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_strides_and_values_match_torch(layout, maker):
    results = []
    for m in (gv, torch):
        x = m.tensor(DATA, requires_grad=True)
        y = MAKERS[maker](m, LAYOUTS[layout](m, x))
        weights = m.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))
        grad = None
        if y.requires_grad:
            (grad,) = m.autograd.grad((y * weights).sum(), x)
        results.append((y.stride(), y.is_contiguous(), y.is_contiguous(memory_format=m.channels_last),
                        y.detach().numpy().copy(), None if grad is None else grad.numpy()))
    (g_stride, g_c, g_cl, g_value, g_grad), (t_stride, t_c, t_cl, t_value, t_grad) = results
    # a size-1 dimension's stride carries no meaning and differs between torch builds
    shape = g_value.shape
    assert [s for s, n in zip(g_stride, shape) if n != 1] == [s for s, n in zip(t_stride, shape) if n != 1]
    assert (g_c, g_cl) == (t_c, t_cl)
    np.testing.assert_allclose(g_value, t_value, rtol=1e-6)
    assert (g_grad is None) == (t_grad is None)
    if g_grad is not None:
        np.testing.assert_allclose(g_grad, t_grad, rtol=1e-12)


def test_memory_format_objects_and_errors_match_torch():
    for name in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
        value = getattr(gv, name)
        assert isinstance(value, gv.memory_format)
        assert repr(value) == f"gradviz.{name}"
        assert pickle.loads(pickle.dumps(value)) is value
    for m in (gv, torch):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            m.ones(2, 3).contiguous(memory_format=m.channels_last)
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
            m.ones(2, 3).t().contiguous(memory_format=m.preserve_format)
        plain = m.ones(2, 3)
        assert plain.contiguous(memory_format=m.preserve_format) is plain
        with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
            m.ones(2, 3, 4, 5).contiguous(memory_format=m.channels_last_3d)
    five = gv.ones(2, 3, 4, 5, 6).contiguous(memory_format=gv.channels_last_3d)
    assert five.stride() == torch.ones(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d).stride()
    with pytest.raises(TypeError, match="argument 'memory_format' must be torch.memory_format"):
        gv.ones(2, 3, 4, 5).contiguous(memory_format="channels_last")


def test_a_channels_last_tensor_flows_through_a_conv_net_with_torchs_values():
    rng = np.random.default_rng(5)
    x_data, w_data = rng.standard_normal((2, 3, 8, 8)), rng.standard_normal((4, 3, 3, 3))
    outs = []
    for m in (gv, torch):
        x = m.tensor(x_data).contiguous(memory_format=m.channels_last).requires_grad_()
        w = m.tensor(w_data, requires_grad=True)
        y = m.nn.functional.conv2d(x, w, padding=1).relu().mean((2, 3)).sum()
        y.backward()
        outs.append((y.item(), x.grad.numpy(), w.grad.numpy()))
    assert outs[0][0] == pytest.approx(outs[1][0], rel=1e-12)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-10)
    np.testing.assert_allclose(outs[0][2], outs[1][2], rtol=1e-10)


def test_asarray_shares_memory_like_torch():
    for m in (gv, torch):
        t = m.ones(3)
        assert m.asarray(t) is t
        assert m.asarray(t, copy=True) is not t
        assert m.asarray(t, dtype=m.float64).dtype == m.float64
        array = np.ones(3)
        shared = m.asarray(array)
        array[0] = 5.0
        assert shared[0].item() == 5.0
        assert m.asarray([1, 2]).dtype == m.int64 and m.asarray([1.0, 2.0]).dtype == m.float32
        grad = m.asarray([1.0, 2.0], requires_grad=True)
        assert grad.requires_grad and grad.is_leaf
        with pytest.raises(ValueError, match="can't alias"):
            m.asarray(np.ones(2), dtype=m.float32, copy=False)


def test_small_torch_level_functions_match_torch():
    assert gv.version.cuda is torch.version.cuda is None
    assert gv.version.hip is None and gv.version.__version__ == gv.__version__
    assert gv.typename(1.0) == torch.typename(1.0) == "float"
    assert gv.typename(gv.ones(2)) == "gradviz.FloatTensor"
    assert gv.typename(gv.nn.Linear(1, 1)).endswith(".Linear")
    for m in (gv, torch):
        strided = m.empty_strided((2, 3), (1, 2))
        assert strided.stride() == (1, 2) and tuple(strided.shape) == (2, 3)
    before = gv.get_default_dtype()
    try:
        with pytest.warns(UserWarning, match=r"set_default_tensor_type\(\) is deprecated"):
            gv.set_default_tensor_type(gv.DoubleTensor)
        assert gv.ones(1).dtype is gv.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gv.set_default_tensor_type("torch.FloatTensor")
            assert gv.ones(1).dtype is gv.float32
            with pytest.raises(TypeError, match="only floating-point types"):
                gv.set_default_tensor_type(gv.LongTensor)
    finally:
        gv.set_default_dtype(before)

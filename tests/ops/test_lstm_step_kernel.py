"""Note [LSTM step kernel]: the compiled backward of one LSTM time step gives the bits of the
numpy rule it replaces (the same float32 operations in the same order), for gate blocks that
are column slices of the step's gate activations, strided rows, no cell gradient, and NaN and
infinite entries; and the layer's gradients still match torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _lstm_layer
from gradviz_ext import ops as _ext_ops

COMPILED = config()["engine"] == "compiled"


def _record(rng, batch, hidden, special=False):
    gates = rng.uniform(0.0, 1.0, (batch, 4 * hidden)).astype(np.float32)
    i, f, o = gates[:, :hidden], gates[:, hidden:2 * hidden], gates[:, 3 * hidden:]
    g = np.tanh(rng.standard_normal((batch, hidden)).astype(np.float32))
    c = rng.standard_normal((batch, hidden)).astype(np.float32)
    tanh_c = np.tanh(c)
    if special:
        i[0, 0], g[-1, -1], tanh_c[0, -1] = np.nan, np.inf, -np.inf
    return (i, f, g, o, c, tanh_c, o * tanh_c)


@pytest.mark.parametrize("batch, hidden", [(1, 1), (3, 5), (16, 64), (7, 33), (2, 130)])
@pytest.mark.parametrize("with_dc", [True, False])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("special", [False, True])
def test_the_kernel_gives_the_numpy_rules_bits(batch, hidden, with_dc, strided, special):
    rng = np.random.default_rng(batch * 1000 + hidden)
    record = _record(rng, batch, hidden, special)
    c_prev = rng.standard_normal((batch, hidden)).astype(np.float32)
    dh = rng.standard_normal((batch, 2 * hidden if strided else hidden)).astype(np.float32)
    dh = dh[:, ::2] if strided else dh   # strided entries: the kernel must decline
    strided = strided and hidden > 1     # one entry per row is contiguous after all
    wide = rng.standard_normal((batch, hidden + 3)).astype(np.float32)
    dc = wide[:, 3:] if with_dc else None   # rows with a stride of their own
    want = _lstm_layer._step_grads(_lstm_layer._Arrays, record, c_prev, dh, dc)
    found = _ext_ops.lstm_step_backward(*record[:4], c_prev, record[5], dh, dc)
    if strided or not COMPILED:
        assert found is None
        return
    assert found is not None
    for got, expected in zip(found, want):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


def test_the_kernel_declines_what_it_does_not_cover():
    rng = np.random.default_rng(0)
    record = _record(rng, 2, 3)
    c_prev = np.zeros((2, 3), np.float32)
    as64 = [a.astype(np.float64) for a in record]
    assert _ext_ops.lstm_step_backward(*as64[:4], c_prev, as64[5], c_prev, None) is None
    assert _ext_ops.lstm_step_backward(*record[:4], c_prev, record[5], c_prev[:1], None) is None


@pytest.mark.parametrize("reverse", [False, True])
def test_an_lstm_layers_gradients_match_torch(reverse):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(np.float32) * 0.5
              for shape in [(6, 4, 3), (20, 3), (20, 5), (20,), (20,), (4, 5), (4, 5)]]
    results = []
    for lib in (gradviz, torch):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        if lib is gradviz:
            out, h, c = _lstm_layer.lstm_layer(*inputs, reverse=reverse)
        else:
            x, w_ih, w_hh, b_ih, b_hh, h0, c0 = inputs
            grads_of = [x, None, None, None, None, h0, c0]
            lstm = torch.nn.LSTM(3, 5)
            with torch.no_grad():
                for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                        "bias_hh_l0"), (w_ih, w_hh, b_ih, b_hh)):
                    getattr(lstm, name).copy_(value)
            if reverse:
                x = x.flip(0)
            out, (h, c) = lstm(x, (h0[None], c0[None]))
            if reverse:
                out = out.flip(0)
            h, c = h[0], c[0]
            grads_of[1:5] = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0,
                             lstm.bias_hh_l0]
        ((out * out).sum() + (h * 3).sum() + c.sum()).backward()
        if lib is gradviz:
            grads_of = inputs
        results.append([t.grad.numpy() for t in grads_of])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


# Note [LSTM forward kernel]: the compiled layer (forward and backward through time) against
# the numpy code of :func:`_lstm_layer._forward` and :func:`_lstm_layer._backward`, bit for bit.

def _bits_equal(got, want):
    """Same dtype, shape and bits (NaN payloads and signed zeros included)."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    return (got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(got.view(np.uint8), want.view(np.uint8)))


def _layer_operands(rng, length, batch, inputs, hidden, bias, special):
    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32)
    x = normal(length, batch, inputs) * 2
    if special:  # NaN, infinities and signed zeros into the gates and the state
        x[0, 0, 0], x[-1, -1, -1], x[length // 2, 0, -1] = np.nan, np.inf, -np.inf
    w_ih, w_hh = normal(4 * hidden, inputs), normal(4 * hidden, hidden)
    b_ih, b_hh = (normal(4 * hidden), normal(4 * hidden)) if bias else (None, None)
    h0, c0 = normal(batch, hidden), normal(batch, hidden)
    if special:
        c0[0, 0], h0[-1, -1] = -0.0, np.inf
    return x, w_ih, w_hh, b_ih, b_hh, h0, c0


def _compiled_forward(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, swapped=None):
    projected = _lstm_layer._projected(_lstm_layer._Arrays, x, w_ih, b_ih)
    if swapped is None:
        swapped = _lstm_layer._swapped_is_exact(x.shape[1], w_hh.shape[1])
    return _ext_ops.lstm_layer_forward(projected, w_hh, b_hh, h0, c0, reverse, swapped)


LAYER_SHAPES = [(1, 1, 1, 1), (3, 2, 3, 5), (5, 16, 32, 64), (4, 7, 5, 33), (2, 1, 4, 65),
                (3, 3, 2, 130)]


@pytest.mark.parametrize("length, batch, inputs, hidden", LAYER_SHAPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("special", [False, True])
def test_the_layer_kernels_give_the_numpy_codes_bits(length, batch, inputs, hidden, bias,
                                                     reverse, special):
    rng = np.random.default_rng(length * 7919 + batch * 31 + hidden)
    operands = _layer_operands(rng, length, batch, inputs, hidden, bias, special)
    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = operands
    with np.errstate(all="ignore"):
        records = _lstm_layer._forward(_lstm_layer._Arrays, *operands, reverse)
        arrays = _compiled_forward(*operands, reverse)
        if not COMPILED:
            assert arrays is None
            return
        for swapped in (False, True):  # either product order, where it gives the same bits
            if swapped and not _lstm_layer._swapped_is_exact(batch, hidden):
                continue
            arrays = _compiled_forward(*operands, reverse, swapped=swapped)
            for t, (got, want) in enumerate(zip(_lstm_layer._records(arrays), records)):
                for name, a, b in zip(("i", "f", "g", "o", "c", "tanh_c", "h"), got, want):
                    assert _bits_equal(a, b), (swapped, t, name)
        rng_g = np.random.default_rng(1)
        g_out = rng_g.standard_normal((length, batch, hidden), dtype=np.float32)
        g_hy = rng_g.standard_normal((batch, hidden), dtype=np.float32)
        g_cy = np.broadcast_to(np.float32(0.5), (batch, hidden))  # a stride-0 gradient
        hs = arrays[4]
        hidden_before = (np.concatenate([hs[1:], h0[None]]) if reverse
                         else np.concatenate([h0[None], hs[:-1]]))
        for grads in [(g_out, g_hy, g_cy), (g_out, None, None), (None, g_hy, None),
                      (None, None, g_cy), (g_out[:, :, ::-1], None, g_hy.T.copy().T)]:
            want = _lstm_layer._backward(_lstm_layer._Arrays, records, x, w_ih, w_hh, h0, c0,
                                         reverse, *grads, (True,) * 7)
            dz, dh, dc = _ext_ops.lstm_layer_backward(*arrays[:4], c0, w_hh, *grads, reverse)
            got = _lstm_layer._gradients(_lstm_layer._Arrays, dz, x, w_ih, hidden_before, dh,
                                         dc, (True,) * 7)
            for index, (a, b) in enumerate(zip(got, want)):
                assert (a is None) == (b is None)
                assert a is None or _bits_equal(a, b), index


def test_the_layer_kernels_take_strided_states_and_decline_the_rest():
    rng = np.random.default_rng(5)
    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = _layer_operands(rng, 3, 4, 3, 6, True, False)
    wide = rng.standard_normal((4, 20), dtype=np.float32)
    h0_t, c0_s = np.asfortranarray(h0), wide[:, 2:8]   # a column-major h0, c0 with row gaps
    records = _lstm_layer._forward(_lstm_layer._Arrays, x, w_ih, w_hh, b_ih, b_hh, h0_t, c0_s,
                                   False)
    arrays = _compiled_forward(x, w_ih, w_hh, b_ih, b_hh, h0_t, c0_s, False)
    if not COMPILED:
        assert arrays is None
        return
    for got, want in zip(_lstm_layer._records(arrays), records):
        assert all(_bits_equal(a, b) for a, b in zip(got, want))
    projected = _lstm_layer._projected(_lstm_layer._Arrays, x, w_ih, b_ih)
    as64 = [a.astype(np.float64) for a in (projected, w_hh, b_hh, h0, c0)]
    assert _ext_ops.lstm_layer_forward(*as64, False, True) is None   # float64: the numpy code
    assert _ext_ops.lstm_layer_forward(projected, w_hh, b_hh, h0, c0[:, ::2], False, True) is None
    assert _ext_ops.lstm_layer_forward(projected[:, :, ::2], w_hh, b_hh, h0, c0, False,
                                       True) is None
    g64 = np.zeros((4, 6))
    assert _ext_ops.lstm_layer_backward(*arrays[:4], c0, w_hh, None, g64, None, False) is None


@pytest.mark.parametrize("length", [1, 2, 3, 15, 16, 17, 33, 100, 1000, 4097])
@pytest.mark.parametrize("dtype", [np.float32])
def test_numpys_exp_and_tanh_loops_give_each_entrys_bits_on_any_run(length, dtype):
    # the forward kernel runs numpy's loops over a step's array at once, and the numpy code
    # over whole arrays or rows of column blocks: each entry's bits must not depend on the run
    rng = np.random.default_rng(length)
    a = (rng.standard_normal(length) * 30).astype(dtype)
    a[::7] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 88.8, -104.0], dtype)[
        np.arange(len(a[::7])) % 7]
    with np.errstate(all="ignore"):
        for ufunc in (np.exp, np.tanh):
            whole = ufunc(a)
            for start in (0, 1, 3, 8, 15):
                if start < length:
                    assert _bits_equal(ufunc(a[start:].copy()), whole[start:])
            wide = np.concatenate([a, a, a]).reshape(3, length)[:, 1:]  # rows of a column block
            assert _bits_equal(ufunc(wide), np.stack([whole[1:]] * 3))


def _torch_lstm_pair(rng, **options):
    layer = torch.nn.LSTM(**options)
    ours = gradviz.nn.LSTM(**options)
    with torch.no_grad():
        for name, value in layer.named_parameters():
            value.copy_(torch.from_numpy(rng.standard_normal(tuple(value.shape),
                                                             dtype=np.float32) * 0.4))
            getattr(ours, name).data = gradviz.tensor(value.detach().numpy().copy()).data
    return layer, ours


@pytest.mark.parametrize("options", [
    dict(input_size=3, hidden_size=5),
    dict(input_size=3, hidden_size=5, num_layers=2),
    dict(input_size=4, hidden_size=6, bidirectional=True),
    dict(input_size=4, hidden_size=7, num_layers=2, bidirectional=True, batch_first=True),
    dict(input_size=3, hidden_size=5, bias=False),
    dict(input_size=3, hidden_size=8, proj_size=4),
])
@pytest.mark.parametrize("with_state", [False, True])
def test_lstm_modules_match_torch_forward_and_gradients(options, with_state):
    rng = np.random.default_rng(len(options) * 10 + with_state)
    layer, ours = _torch_lstm_pair(rng, **options)
    batch, length = 3, 6
    shape = (batch, length) if options.get("batch_first") else (length, batch)
    x = rng.standard_normal((*shape, options["input_size"]), dtype=np.float32)
    states = []
    if with_state:
        layers = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
        out_size = options.get("proj_size") or options["hidden_size"]
        states = [rng.standard_normal((layers, batch, size), dtype=np.float32)
                  for size in (out_size, options["hidden_size"])]
    results = []
    for lib, module in ((gradviz, ours), (torch, layer)):
        xs = lib.tensor(x, requires_grad=True)
        state = [lib.tensor(s, requires_grad=True) for s in states]
        out, (h, c) = module(xs, tuple(state) if state else None)
        ((out * out).sum() + (h * 3).sum() + c.sum()).backward()
        grads = [xs.grad] + [s.grad for s in state] + [p.grad for p in module.parameters()]
        results.append([t.detach().numpy() for t in (out, h, c, *grads)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_a_nan_input_gives_torchs_nans():
    rng = np.random.default_rng(11)
    layer, ours = _torch_lstm_pair(rng, input_size=3, hidden_size=4)
    x = rng.standard_normal((5, 2, 3), dtype=np.float32)
    x[2, 1, 0] = np.nan
    results = []
    for lib, module in ((gradviz, ours), (torch, layer)):
        xs = lib.tensor(x, requires_grad=True)
        out, (h, c) = module(xs)
        out.sum().backward()
        results.append([t.detach().numpy() for t in (out, h, c, xs.grad, module.weight_hh_l0.grad)])
    for got, want in zip(*results):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)

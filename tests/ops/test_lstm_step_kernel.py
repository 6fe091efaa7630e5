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

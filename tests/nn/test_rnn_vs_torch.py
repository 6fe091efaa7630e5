"""RNN, LSTM, GRU and their cells against PyTorch with the same weights: outputs, final states,
gradients of the input and of every parameter (and second derivatives), reprs, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

X = np.random.default_rng(0).standard_normal((5, 2, 3))


def build(m, name, args, kwargs, dtype):
    module = getattr(m.nn, name)(*args, **kwargs)
    values = np.random.default_rng(1)
    with m.no_grad():
        for p in module.parameters():
            p.copy_(m.tensor(values.standard_normal(tuple(p.shape)) * 0.4))
    return module.to(getattr(m, dtype))


def run(m, name, args, kwargs, dtype, x, create_graph=False):
    module = build(m, name, args, kwargs, dtype)
    inputs = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
    result = module(inputs)
    out, state = result if isinstance(result, tuple) and not name.endswith("Cell") else (None, result)
    states = state if isinstance(state, tuple) else (state,)
    loss = sum((t ** 3).sum() for t in states) + ((out ** 2).sum() if out is not None else 0)
    params = list(module.parameters())
    grads = m.autograd.grad(loss, [inputs] + params, create_graph=create_graph)
    values = ([] if out is None else [out]) + list(states) + list(grads)
    if create_graph:
        values += list(m.autograd.grad(sum((g ** 2).sum() for g in grads), [inputs] + params))
    return [v.detach().numpy() for v in values], repr(module)


LAYERS = [
    ("RNN", (3, 4), {}), ("RNN", (3, 4, 2), {"nonlinearity": "relu"}),
    ("RNN", (3, 4), {"batch_first": True, "bias": False}), ("LSTM", (3, 4), {}),
    ("LSTM", (3, 4, 2), {"bidirectional": True, "batch_first": True}),
    ("GRU", (3, 4), {"bias": False}), ("GRU", (3, 4, 2), {"bidirectional": True}),
    ("LSTM", (3, 4), {"bias": False}), ("GRU", (3, 4, 3), {"batch_first": True}),
]
CELLS = [("RNNCell", (3, 4), {}), ("RNNCell", (3, 4), {"nonlinearity": "relu"}),
         ("LSTMCell", (3, 4), {}), ("GRUCell", (3, 4), {"bias": False})]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", LAYERS + CELLS, ids=lambda c: f"{c[0]}{c[2]}")
def test_matches_torch(case, dtype):
    name, args, kwargs = case
    x = X[0] if name.endswith("Cell") else X
    ours, our_repr = run(gradviz, name, args, kwargs, dtype, x, create_graph=dtype == "float64")
    theirs, their_repr = run(torch, name, args, kwargs, dtype, x, create_graph=dtype == "float64")
    assert our_repr == their_repr
    assert len(ours) == len(theirs)
    tolerance = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **tolerance)


def test_unbatched_input_and_given_state():
    results = []
    for m in (gradviz, torch):
        lstm = build(m, "LSTM", (3, 4), {}, "float64")
        h0 = m.tensor(np.full((1, 4), 0.1))
        out, (h, c) = lstm(m.tensor(X[:, 0]), (h0, h0 * 2))
        gru = build(m, "GRU", (3, 4), {}, "float64")
        out2, h2 = gru(m.tensor(X), m.tensor(np.full((1, 2, 4), -0.2)))
        results.append([t.detach().numpy() for t in (out, h, c, out2, h2)])
    for a, b in zip(*results):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


ERRORS = [
    (lambda m: m.nn.RNN(3, 4)(m.ones(5, 2, 4)), "input.size(-1) must be equal to input_size. Expected 3, got 4"),
    (lambda m: m.nn.RNN(3, 4)(m.ones(5, 2, 3), m.zeros(2, 2, 4)), "Expected hidden size (1, 2, 4), got [2, 2, 4]"),
    (lambda m: m.nn.RNN(3, 4)(m.ones(2, 3, 4, 5)), "RNN: Expected input to be 2D or 3D, got 4D tensor instead"),
    (lambda m: m.nn.GRU(3, 4)(m.ones(2, 3, 4, 5)), "GRU: Expected input to be 2D or 3D, got 4D instead"),
    (lambda m: m.nn.LSTMCell(3, 4)(m.ones(2, 3, 4)), "LSTMCell: Expected input to be 1D or 2D, got 3D instead"),
    (lambda m: m.nn.RNN(3, 4, nonlinearity="sigmoid"), "Unknown nonlinearity 'sigmoid'. Select from 'tanh' or 'relu'."),
]


@pytest.mark.parametrize("case", ERRORS, ids=range(len(ERRORS)))
def test_errors_match_torch(case):
    program, phrase = case
    kinds = []
    for m in (gradviz, torch):
        with pytest.raises(Exception) as info:
            program(m)
        assert phrase in str(info.value)
        kinds.append(info.type)
    assert kinds[0] is kinds[1]


def test_parameter_names_and_init_bounds():
    ours = gradviz.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    theirs = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert all(float(p.detach().abs().max()) <= 0.5 for p in ours.parameters())

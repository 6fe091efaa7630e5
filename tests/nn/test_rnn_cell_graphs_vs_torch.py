"""LSTMCell and GRUCell record PyTorch's graph (``lstm_cell``/``gru_cell``: the hidden
projection added first, gates split by ``unsafe_chunk``), and ``unsafe_split`` /
``unsafe_chunk`` behave as torch's. Every expected value is read from torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def _graph(loss):
    """Node names in breadth-first order from ``loss``, each node once."""
    names, seen, queue = [], set(), [loss.grad_fn]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name())
        queue.extend(next_node for next_node, _ in node.next_functions)
    return names


def _cell_run(lib, kind, with_state):
    lib.manual_seed(0)
    cell = getattr(lib.nn, kind)(3, 2).double()
    if lib is gradviz:
        torch.manual_seed(0)
        reference = getattr(torch.nn, kind)(3, 2).double()
        cell.load_state_dict({k: gradviz.tensor(v.detach().numpy())
                              for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    state = None
    if with_state:
        h = lib.tensor(rng.standard_normal((4, 2)), requires_grad=True)
        state = (h, h * 0.5) if kind == "LSTMCell" else h
    out = cell(x, state)
    h = out[0] if isinstance(out, tuple) else out
    loss = (h * h).sum()
    names = _graph(loss)
    loss.backward()
    grads = {name: p.grad.numpy().copy() for name, p in cell.named_parameters()}
    return names, h.detach().numpy().copy(), x.grad.numpy().copy(), grads


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_cell_graph_values_and_grads_match_torch(kind, with_state):
    expected = _cell_run(torch, kind, with_state)
    got = _cell_run(gradviz, kind, with_state)
    assert got[0] == expected[0]
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-10, atol=1e-12)
    assert got[3].keys() == expected[3].keys()
    for name in expected[3]:
        np.testing.assert_allclose(got[3][name], expected[3][name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call", ["chunk3", "chunk4", "split4", "method"])
def test_unsafe_split_and_chunk_match_torch(call):
    def run(lib):
        x = lib.arange(12.0, requires_grad=True)
        y = x.reshape(2, 6) * 1
        pieces = {"chunk3": lambda: lib.unsafe_chunk(y, 3, 1),
                  "chunk4": lambda: lib.unsafe_chunk(y, 4, 1),
                  "split4": lambda: lib.unsafe_split(y, 4, 1),
                  "method": lambda: y.unsafe_chunk(2, 0)}[call]()
        node = pieces[0].grad_fn
        (pieces[0] * 2 + pieces[-1].sum()).sum().backward()
        return ([tuple(p.shape) for p in pieces], node.name(), node._saved_split_size,
                node._saved_dim, tuple(node._saved_self_sym_sizes), x.grad.tolist(),
                [p._base is None for p in pieces])
    assert run(gradviz) == run(torch)

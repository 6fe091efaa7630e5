"""A float32 ``nn.LSTM`` records one ``MkldnnRnnLayerBackward0`` node per layer and direction,
as torch does on the CPU (Note [One node per LSTM layer] in gradviz/ops/_lstm_layer.py): the
same graph, the same node edges and output numbers, values and gradients of every input and
parameter (first and second order) equal to torch's within float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

CONFIGS = {
    "one layer": dict(),
    "no bias": dict(bias=False),
    "two layers, bidirectional": dict(num_layers=2, bidirectional=True),
    "batch first": dict(batch_first=True, num_layers=2),
    "dropout between layers": dict(num_layers=3, dropout=0.5),
}


def _graph(tensor):
    """(name, [(next name, output number), ...]) breadth-first from ``tensor``, each node once."""
    found, seen, queue = [], set(), [tensor.grad_fn]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        edges = [(None if n is None else n.name().replace("torch::autograd::", ""), nr)
                 for n, nr in node.next_functions]
        found.append((node.name(), edges))
        queue.extend(n for n, _ in node.next_functions)
    return found


def _pair(config, train=False):
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(6, 5, **config).train(train)
    ours = gradviz.nn.LSTM(6, 5, **config).train(train)
    ours.load_state_dict({k: gradviz.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(lib, module, x, h0, c0, create_graph=False):
    xt = lib.tensor(x, requires_grad=True)
    state = None
    if h0 is not None:
        state = (lib.tensor(h0, requires_grad=True), lib.tensor(c0, requires_grad=True))
    out, (h, c) = module(xt, state)
    loss = (out * out).sum() + (h * 2.0).sum() + (c * c).sum()
    leaves = [xt, *(state or ()), *module.parameters()]
    grads = lib.autograd.grad(loss, leaves, create_graph=create_graph)
    return out, h, c, leaves, grads


def _inputs(config, batch=3, length=4, with_state=True):
    rng = np.random.default_rng(5)
    shape = (batch, length, 6) if config.get("batch_first") else (length, batch, 6)
    layers = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
    x = rng.standard_normal(shape).astype(np.float32)
    if not with_state:
        return x, None, None
    h0 = rng.standard_normal((layers, batch, 5)).astype(np.float32)
    return x, h0, (h0 * 0.5).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("with_state", [True, False])
def test_the_graph_is_torchs(name, with_state):
    config = CONFIGS[name]
    ours, theirs = _pair(config, train=True)
    x, h0, c0 = _inputs(config, with_state=with_state)
    got = _run(gradviz, ours, x, h0, c0)
    want = _run(torch, theirs, x, h0, c0)
    for mine, reference in zip(got[:3], want[:3]):
        assert _graph(mine) == _graph(reference)


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - {"dropout between layers"}))
def test_values_and_gradients_match_torch(name):
    config = CONFIGS[name]
    ours, theirs = _pair(config)
    x, h0, c0 = _inputs(config)
    got, want = _run(gradviz, ours, x, h0, c0), _run(torch, theirs, x, h0, c0)
    for mine, reference in zip(got[:3], want[:3]):
        np.testing.assert_allclose(mine.detach().numpy(), reference.detach().numpy(), rtol=1e-5, atol=1e-6)
    for mine, reference in zip(got[4], want[4]):
        np.testing.assert_allclose(mine.numpy(), reference.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["one layer", "two layers, bidirectional"])
def test_second_derivatives_match_torch(name):
    config = CONFIGS[name]
    results = []
    for lib, module in zip((gradviz, torch), _pair(config)):
        x, h0, c0 = _inputs(config)
        *_, leaves, grads = _run(lib, module, x, h0, c0, create_graph=True)
        total = sum((g * g).sum() for g in grads)
        results.append([g.numpy() for g in lib.autograd.grad(total, leaves)])
    for mine, reference in zip(*results):
        np.testing.assert_allclose(mine, reference, rtol=1e-3, atol=1e-4)


def test_the_unbatched_form_and_the_saved_attributes_match_torch():
    ours, theirs = _pair({})
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    got, want = ours(gradviz.tensor(x)), theirs(torch.tensor(x))
    assert _graph(got[0]) == _graph(want[0])
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    ours_node = ours(gradviz.tensor(x).unsqueeze(1))[0].grad_fn
    their_node = theirs(torch.tensor(x).unsqueeze(1))[0].grad_fn
    for name in ("reverse", "mode", "hidden_size", "num_layers", "has_biases", "bidirectional",
                 "batch_first", "train", "batch_sizes"):
        assert getattr(ours_node, f"_saved_{name}") == getattr(their_node, f"_saved_{name}"), name
    np.testing.assert_array_equal(ours_node._saved_weight0.detach().numpy(),
                                  their_node._saved_weight0.detach().numpy())


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_a_float64_lstm_and_a_projected_one_stay_step_by_step_as_torchs():
    for config, dtype in (({}, "double"), ({"proj_size": 3}, "float")):
        ours, theirs = _pair(config)
        ours, theirs = getattr(ours, dtype)(), getattr(theirs, dtype)()
        x = np.random.default_rng(3).standard_normal((3, 2, 6))
        got = ours(gradviz.tensor(x).to(ours.weight_ih_l0.dtype))[0]
        want = theirs(torch.tensor(x).to(theirs.weight_ih_l0.dtype))[0]
        assert got.grad_fn.name() == want.grad_fn.name() == "StackBackward0"


def test_the_fast_rule_gives_the_differentiable_rules_gradients_bit_for_bit():
    ours, _ = _pair({"num_layers": 2, "bidirectional": True})
    x, h0, c0 = _inputs({"num_layers": 2, "bidirectional": True})
    fast = _run(gradviz, ours, x, h0, c0)[4]
    slow = _run(gradviz, ours, x, h0, c0, create_graph=True)[4]
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())

"""Convolutions and pools over an empty batch (N = 0), as PyTorch runs them: an empty output of
the right shape, an empty input gradient, zero weight and bias gradients; with and without
``create_graph`` (which takes the rules instead of the kernels)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

CASES = {
    "conv2d": lambda F, x, w: F.conv2d(x, w["conv"], w["bias"], padding=1),
    "conv2d stride 2": lambda F, x, w: F.conv2d(x, w["conv"], w["bias"], stride=2),
    "conv2d groups": lambda F, x, w: F.conv2d(x, w["grouped"], groups=3),
    "conv2d dilation": lambda F, x, w: F.conv2d(x, w["conv"], dilation=2),
    "conv1d": lambda F, x, w: F.conv1d(x[:, :, 0], w["conv"][:, :, 0]),
    "conv_transpose2d": lambda F, x, w: F.conv_transpose2d(x, w["transposed"], stride=2),
    "max_pool2d": lambda F, x, w: F.max_pool2d(x, 2),
    "max_pool2d padded": lambda F, x, w: F.max_pool2d(x, 3, 1, 1),
    "max_pool1d": lambda F, x, w: F.max_pool1d(x[:, :, 0], 2),
    "avg_pool2d": lambda F, x, w: F.avg_pool2d(x, 2),
    "avg_pool2d padded": lambda F, x, w: F.avg_pool2d(x, 3, 2, 1),
    "avg_pool1d": lambda F, x, w: F.avg_pool1d(x[:, :, 0], 2),
    "adaptive_avg_pool2d": lambda F, x, w: F.adaptive_avg_pool2d(x, 3),
    "adaptive_max_pool2d": lambda F, x, w: F.adaptive_max_pool2d(x, 3),
    "unfold": lambda F, x, w: F.unfold(x, 2),
}

_SHAPES = {"conv": (4, 3, 3, 3), "bias": (4,), "grouped": (6, 1, 3, 3), "transposed": (3, 4, 3, 3)}


def _run(module, case, create_graph):
    functional = module.nn.functional
    x = module.zeros(0, 3, 8, 8, requires_grad=True)
    weights = {name: module.ones(shape, requires_grad=True) for name, shape in _SHAPES.items()}
    out = CASES[case](functional, x, weights)
    used = [x] + [w for w in weights.values() if _uses(out, w)]
    grads = module.autograd.grad(out.sum(), used, create_graph=create_graph, allow_unused=True)
    return out, grads


def _uses(out, weight):
    # the leaves the case reads: those its graph reaches
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "variable", None) is weight:
            return True
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_an_empty_batch_runs_as_in_torch(case, create_graph):
    out, grads = _run(gradviz, case, create_graph)
    expected_out, expected_grads = _run(torch, case, create_graph)
    assert tuple(out.shape) == tuple(expected_out.shape)
    assert len(grads) == len(expected_grads)
    for got, expected in zip(grads, expected_grads):
        assert (got is None) == (expected is None)
        if got is not None:
            assert tuple(got.shape) == tuple(expected.shape)
            np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())


# ---- other layers over an empty batch -----------------------------------------------------

LAYERS = {
    "linear": lambda m: m.nn.Linear(4, 3)(m.zeros(0, 4, requires_grad=True)),
    "layer_norm": lambda m: m.nn.LayerNorm(4)(m.zeros(0, 4, requires_grad=True)),
    "group_norm": lambda m: m.nn.GroupNorm(1, 3)(m.zeros(0, 3, 4, requires_grad=True)),
    "batch_norm eval": lambda m: m.nn.BatchNorm2d(3).eval()(m.zeros(0, 3, 4, 4, requires_grad=True)),
    "batch_norm train": lambda m: m.nn.BatchNorm2d(3)(m.zeros(0, 3, 4, 4, requires_grad=True)),
    "lstm": lambda m: m.nn.LSTM(4, 3, batch_first=True)(m.zeros(0, 5, 4, requires_grad=True))[0],
    "gru": lambda m: m.nn.GRU(4, 3)(m.zeros(5, 0, 4, requires_grad=True))[0],
    "cross_entropy mean": lambda m: m.nn.functional.cross_entropy(
        m.zeros(0, 4, requires_grad=True), m.zeros(0, dtype=m.long)),
    "cross_entropy sum": lambda m: m.nn.functional.cross_entropy(
        m.zeros(0, 4, requires_grad=True), m.zeros(0, dtype=m.long), reduction="sum"),
    "nll_loss mean": lambda m: m.nn.functional.nll_loss(
        m.zeros(0, 4, requires_grad=True), m.zeros(0, dtype=m.long)),
    "mse mean": lambda m: m.nn.functional.mse_loss(m.zeros(0, 4, requires_grad=True),
                                                   m.zeros(0, 4)),
    "softmax": lambda m: m.zeros(0, 4, requires_grad=True).softmax(-1),
}


@pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy's "Mean of empty slice": torch is quiet
@pytest.mark.parametrize("layer", LAYERS)
def test_layers_over_an_empty_batch_as_in_torch(layer):
    gradviz.manual_seed(0)
    out = LAYERS[layer](gradviz)
    expected = LAYERS[layer](torch)
    assert tuple(out.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy())
    out.sum().backward()
    expected.sum().backward()


@pytest.mark.parametrize("weight_shape, groups", [((0, 3, 3, 3), 1), ((1, 2, 3, 3), 2),
                                                  ((0, 3, 3), 1)])
def test_a_convolution_without_output_channels_is_refused_as_in_torch(weight_shape, groups):
    channels = 4 if groups == 2 else 3
    spatial = (5,) * (len(weight_shape) - 2)
    results = []
    for module in (gradviz, torch):
        convolution = (module.nn.functional.conv2d if len(weight_shape) == 4
                       else module.nn.functional.conv1d)
        with pytest.raises(RuntimeError) as raised:
            convolution(module.ones((1, channels) + spatial), module.zeros(weight_shape),
                        groups=groups)
        results.append(str(raised.value))
    assert results[0] == results[1]

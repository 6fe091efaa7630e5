"""Edge values against PyTorch: 0-d tensors reduced or sorted along dim 0, NaN in a full max/min,
a cross entropy with every target ignored or of zero weight, atan2 at the origin, cumsum of
negative zeros. Values and gradients must be torch's, bit for bit where torch's formula is
followed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

ZERO_D = {
    "max": lambda s: s.max(0)[0],
    "max keepdim": lambda s: s.max(-1, keepdim=True)[0],
    "min": lambda s: s.min(0)[0],
    "median": lambda s: s.median(0)[0],
    "nanmedian": lambda s: s.nanmedian(0)[0],
    "mode": lambda s: s.mode(0)[0],
    "kthvalue": lambda s: s.kthvalue(1, 0)[0],
    "sort": lambda s: s.sort(0)[0],
    "msort": lambda s: s.msort(),
    "topk": lambda s: s.topk(1, 0)[0],
    "cumsum": lambda s: s.cumsum(0),
    "flip": lambda s: s.flip([0]),
}


def _value_and_grad(module, make):
    s = module.tensor(2.5, requires_grad=True)
    out = make(s)
    grad, = module.autograd.grad(out.sum(), [s])
    return out.detach().numpy(), grad.numpy()


@pytest.mark.parametrize("case", ZERO_D)
def test_a_0d_tensor_along_dim_0_as_in_torch(case):
    got = _value_and_grad(gradviz, ZERO_D[case])
    expected = _value_and_grad(torch, ZERO_D[case])
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_the_gradient_of_a_nan_maximum_goes_to_the_nans(reduction, create_graph):
    values = [[1.0, float("nan"), 3.0], [4.0, float("nan"), 5.0]]
    grads = []
    for module in (gradviz, torch):
        x = module.tensor(values, requires_grad=True)
        grad, = module.autograd.grad(getattr(x, reduction)(), [x], create_graph=create_graph)
        grads.append(grad.detach().numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert grads[0][0, 1] == 0.5


CROSS_ENTROPY = {
    "every target ignored": dict(target=[-100, -100]),
    "targets of zero weight": dict(target=[1, 2], weight=[1.0, 0.0, 0.0]),
    "one target ignored": dict(target=[1, -100]),
}


@pytest.mark.parametrize("case", CROSS_ENTROPY)
def test_a_cross_entropy_mean_over_no_weight(case):
    spec = CROSS_ENTROPY[case]
    results = []
    for module in (gradviz, torch):
        x = module.tensor([[1.0, 5.0, 2.0], [4.0, 4.0, 0.0]], requires_grad=True)
        weight = None if "weight" not in spec else module.tensor(spec["weight"])
        loss = module.nn.functional.cross_entropy(x, module.tensor(spec["target"]), weight=weight)
        grad, = module.autograd.grad(loss, [x])
        results.append((loss.detach().numpy(), grad.numpy()))
    (loss, grad), (expected_loss, expected_grad) = results
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-6, atol=1e-7)
    # the zeros' signs too: torch's ignored rows are +0
    np.testing.assert_array_equal(np.signbit(grad[np.isfinite(grad) & (grad == 0)]),
                                  np.signbit(expected_grad[np.isfinite(grad) & (grad == 0)]))


@pytest.mark.parametrize("y, x", [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0)])
def test_atan2_at_the_origin_has_torchs_zero_gradients(y, x):
    grads = []
    for module in (gradviz, torch):
        ty = module.tensor([y], requires_grad=True)
        tx = module.tensor([x], requires_grad=True)
        grads.append([g.numpy() for g in module.autograd.grad(module.atan2(ty, tx), [ty, tx])])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


def test_atan2_gradients_are_torchs_bits():
    rng = np.random.default_rng(0)
    y, x, g = (rng.standard_normal(4096).astype(np.float32) for _ in range(3))
    grads = []
    for module in (gradviz, torch):
        ty = module.tensor(y, requires_grad=True)
        tx = module.tensor(x, requires_grad=True)
        grads.append([t.numpy() for t in module.autograd.grad(module.atan2(ty, tx), [ty, tx],
                                                              module.tensor(g))])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumsum_of_negative_zeros_matches_torch(dtype):
    # numpy's running sum starts from the first entry, PyTorch's from +0.0: a leading run of
    # -0.0 sums to +0.0 in PyTorch; the gradient (a reversed cumsum) too
    rng = np.random.default_rng(5)
    for _ in range(20):
        values = np.where(rng.random((4, 7)) < 0.7, -0.0, 0.0)
        values[rng.random((4, 7)) < 0.15] = rng.choice([1.0, -1.0, np.inf, np.nan])
        values = values.astype(dtype)
        upstream = np.where(rng.random((4, 7)) < 0.7, -0.0, 1.0).astype(dtype)
        for dim in (0, 1, -1):
            results = []
            for module in (gradviz, torch):
                x = module.tensor(values, requires_grad=True)
                y = x.cumsum(dim)
                y.backward(module.tensor(upstream))
                results.append((y.detach().numpy(), x.grad.numpy()))
            for ours, theirs in zip(*results):
                assert np.array_equal(ours, theirs, equal_nan=True)
                assert np.array_equal(np.signbit(ours), np.signbit(theirs))
    assert np.signbit(gradviz.tensor(-0.0).cumsum(0).numpy())  # one entry: a copy, as torch's

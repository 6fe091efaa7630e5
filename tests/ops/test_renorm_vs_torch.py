"""``renorm`` (function, ``Tensor.renorm``, ``Tensor.renorm_``, ``out=``) against PyTorch
(Note [Renorm] in gradviz/ops/_reduction.py): values over p = 1, 2, inf and fractional ones,
every dim (negative ones too), float32 and float64, zero slices, NaN and infinities, transposed
inputs, empty ones; the node, what it saves, its errors; gradients against torch's and against
finite differences (gradcheck and gradgradcheck in float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz

rng = np.random.default_rng(23)

P_VALUES = [1, 2, 3, 0.5, 1.5, math.inf]
SHAPES_AND_DIMS = [((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3),
                   ((2, 3, 4), 2), ((4, 1), 0), ((1, 5), 0)]


def _values(shape, dtype):
    """Normal values, one slice along every dim scaled up (so it exceeds any maxnorm used)
    and one made of zeros where the shape allows."""
    values = rng.standard_normal(shape)
    values.reshape(-1)[:: max(1, values.size // 3)] *= 10.0
    if shape[0] > 1:
        values[1] = 0.0
    return values.astype(dtype)


def _close(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("shape,dim", SHAPES_AND_DIMS)
def test_values_and_gradients_match_torch(shape, dim, p, dtype):
    values = _values(shape, dtype)
    upstream = rng.standard_normal(shape).astype(dtype)
    for maxnorm in (0.0, 0.7, 5, 1e6):
        results = []
        for module in (gradviz, torch):
            x = module.tensor(values, requires_grad=True)
            y = module.renorm(x, p, dim, maxnorm)
            y.backward(module.tensor(upstream))
            results.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
        (ours, our_grad, our_node), (theirs, their_grad, their_node) = results
        assert ours.dtype == theirs.dtype
        assert our_node == their_node == "RenormBackward0"
        np.testing.assert_allclose(ours, theirs, **_close(dtype))
        np.testing.assert_allclose(our_grad, their_grad, **_close(dtype))


@pytest.mark.parametrize("p", P_VALUES)
def test_special_values_match_torch(p):
    values = np.array([[np.nan, 1.0, 2.0], [np.inf, 1.0, -0.0], [0.0, -0.0, 0.0],
                       [3.0, -4.0, 12.0], [-np.inf, np.inf, 1.0]], np.float32)
    for dim in (0, 1):
        ours = gradviz.renorm(gradviz.tensor(values), p, dim, 1.0).numpy()
        theirs = torch.renorm(torch.tensor(values), p, dim, 1.0).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs))


def test_methods_in_place_out_and_layouts_match_torch():
    values = _values((4, 5), np.float32)
    results = []
    for module in (gradviz, torch):
        x = module.tensor(values)
        transposed = module.tensor(values.T.copy()).t()  # not contiguous
        in_place = module.tensor(values)
        returned = in_place.renorm_(1.5, 0, 2.0)
        out = module.empty(4, 5)
        given = module.renorm(x, 2, 1, 1.0, out=out)
        leaf = module.tensor(values, requires_grad=True)
        y = leaf * 1.0
        y.renorm_(2, 0, 1.0)
        results.append((x.renorm(2, 0, 1.0).numpy(), transposed.renorm(2, 0, 1.0).numpy(),
                        in_place.numpy(), returned is in_place, given is out, out.numpy(),
                        type(y.grad_fn).__name__, y.grad_fn._saved_self is not None,
                        module.renorm(module.zeros(0, 3), 2, 0, 1.0).shape,
                        module.renorm(module.zeros(3, 0), 2, 0, 1.0).shape,
                        module.renorm(module.zeros(2, 0, 3), math.inf, 1, 1.0).shape))
    for ours, theirs in zip(*results):
        if isinstance(theirs, np.ndarray):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        else:
            assert tuple(ours) == tuple(theirs) if isinstance(theirs, torch.Size) else ours == theirs


def test_node_and_saved_values_match_torch():
    values = _values((3, 4), np.float32)
    for p, dim, maxnorm in ((2, 0, 1.0), (1.5, 1, 2), (math.inf, 1, 0.5), (True, 0, 3)):
        nodes = []
        for module in (gradviz, torch):
            x = module.tensor(values, requires_grad=True)
            node = module.renorm(x, p, dim, maxnorm).grad_fn
            saved = sorted(name for name in dir(node) if name.startswith("_saved_"))
            nodes.append((type(node).__name__, saved, node._saved_self is x,
                          (node._saved_p, type(node._saved_p)), node._saved_dim,
                          (node._saved_maxnorm, type(node._saved_maxnorm))))
        assert nodes[0] == nodes[1]


ERRORS = {
    "p zero": lambda m: m.renorm(m.ones(3, 4), 0, 0, 1.0),
    "p negative": lambda m: m.renorm(m.ones(3, 4), -1, 0, 1.0),
    "p NaN": lambda m: m.renorm(m.ones(3, 4), math.nan, 0, 1.0),
    "p complex": lambda m: m.renorm(m.ones(3, 4), 2 + 1j, 0, 1.0),
    "p a string": lambda m: m.renorm(m.ones(3, 4), "2", 0, 1.0),
    "maxnorm negative": lambda m: m.renorm(m.ones(3, 4), 2, 0, -1),
    "maxnorm tiny negative": lambda m: m.renorm(m.ones(3, 4), 2, 0, -1e-10),
    "maxnorm large negative": lambda m: m.renorm(m.ones(3, 4), 2, 0, -123456789.0),
    "maxnorm NaN": lambda m: m.renorm(m.ones(3, 4), 2, 0, math.nan),
    "maxnorm complex": lambda m: m.renorm(m.ones(3, 4), 2, 0, 1j),
    "maxnorm None": lambda m: m.renorm(m.ones(3, 4), 2, 0, None),
    "dim a float": lambda m: m.renorm(m.ones(3, 4), 2, 0.5, 1.0),
    "dim too large": lambda m: m.renorm(m.ones(3, 4), 2, 2, 1.0),
    "dim too small": lambda m: m.renorm(m.ones(3, 4), 2, -3, 1.0),
    "one dim": lambda m: m.renorm(m.ones(3), 2, 0, 1.0),
    "zero dims": lambda m: m.renorm(m.tensor(1.0), 2, 0, 1.0),
    "p checked before the dims": lambda m: m.renorm(m.ones(3), 0, 5, -1.0),
    "integers": lambda m: m.renorm(m.ones(3, 4, dtype=m.int64), 2, 0, 1.0),
    "integers, bad dim": lambda m: m.renorm(m.ones(3, 4, dtype=m.int64), 2, 5, 1.0),
    "inf over an empty dim": lambda m: m.renorm(m.ones(0, 3), math.inf, 1, 1.0),
    "method": lambda m: m.ones(3, 4).renorm(0, 0, 1.0),
    "in place": lambda m: m.ones(3, 4).renorm_(2, 0, -2.0),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    raised = []
    for module in (gradviz, torch):
        with pytest.raises(Exception) as info:
            ERRORS[name](module)
        raised.append((type(info.value), str(info.value).replace("gradviz", "torch")))
    (our_type, ours), (their_type, theirs) = raised
    assert our_type is their_type
    if our_type is RuntimeError or our_type is IndexError:
        assert ours == theirs
    else:  # TypeError: torch's argument parser numbers a method's arguments from self
        assert ours.split("(position")[0] == theirs.split("(position")[0]
        assert ours.split(")")[-1] == theirs.split(")")[-1]


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("dim", [0, -1])
def test_gradcheck_and_gradgradcheck(p, dim):
    # slices well away from the maxnorm boundary, where renorm is not differentiable
    values = rng.standard_normal((3, 4))
    values[0] *= 0.01
    values[2] *= 5.0
    x = gradviz.tensor(values, dtype=gradviz.float64, requires_grad=True)

    def program(t):
        return gradviz.renorm(t, p, dim, 1.0)

    assert gradviz.autograd.gradcheck(program, (x,), eps=1e-6, atol=1e-6)
    if p != math.inf:  # inf's gradient is piecewise constant in the ties
        assert gradviz.autograd.gradgradcheck(program, (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("p", P_VALUES)
def test_second_derivatives_match_torch(p):
    values = rng.standard_normal((3, 4)) * np.array([[0.01], [1.0], [5.0]])
    upstream = rng.standard_normal((3, 4))
    weights = rng.standard_normal((3, 4))
    results = []
    for module in (gradviz, torch):
        x = module.tensor(values, requires_grad=True)
        y = module.renorm(x, p, 1, 1.0)
        (grad,) = module.autograd.grad(y, x, module.tensor(upstream), create_graph=True)
        (second,) = module.autograd.grad((grad * module.tensor(weights)).sum(), x)
        results.append((grad.detach().numpy(), second.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_float16_matches_torch():
    # the norm and the factor in float32, as PyTorch's accumulate type: the same values
    values = (rng.standard_normal((5, 64)) * 3).astype(np.float16)
    for p in P_VALUES:
        results = []
        for module in (gradviz, torch):
            x = module.tensor(values, requires_grad=True)
            y = module.renorm(x, p, 0, 1.0)
            y.sum().backward()
            results.append((y.detach().numpy(), x.grad.numpy()))
        (ours, our_grad), (theirs, their_grad) = results
        assert ours.dtype == theirs.dtype == np.float16
        assert np.array_equal(ours, theirs)
        np.testing.assert_allclose(our_grad.astype(np.float64), their_grad.astype(np.float64),
                                   rtol=1e-2, atol=1e-3)

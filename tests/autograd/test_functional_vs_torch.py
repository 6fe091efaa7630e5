"""``autograd.functional`` (jacobian, hessian, vjp, jvp, vhp, hvp) against PyTorch: results,
their structure (nested tuples), ``create_graph`` and ``strict`` errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def flatten(result):
    if isinstance(result, tuple):
        return ("tuple", [flatten(r) for r in result])
    return ("tensor", result.detach().numpy().copy(), tuple(result.shape), result.requires_grad)


def assert_same(g, t):
    fg, ft = flatten(g), flatten(t)

    def check(a, b):
        assert a[0] == b[0]
        if a[0] == "tuple":
            assert len(a[1]) == len(b[1])
            for x, y in zip(a[1], b[1]):
                check(x, y)
        else:
            assert a[2:] == b[2:]
            np.testing.assert_allclose(a[1], b[1], rtol=1e-10, atol=1e-12)

    check(fg, ft)


X = np.array([[0.3, -0.5, 1.2], [0.7, 0.1, -0.9]])
Y = np.array([1.5, -0.4, 0.2])

CALLS = [
    ("jacobian", lambda m, F, x, y: F.jacobian(lambda a: a.sin() * a.sum(), x)),
    ("jacobian_tuple_in", lambda m, F, x, y: F.jacobian(lambda a, b: (a * b).exp(), (x, y))),
    ("jacobian_tuple_out", lambda m, F, x, y: F.jacobian(lambda a: (a ** 2, a.sum(0)), x)),
    ("jacobian_tuple_both", lambda m, F, x, y: F.jacobian(lambda a, b: (a * b, b.tanh()), (x, y))),
    ("jacobian_create_graph", lambda m, F, x, y: F.jacobian(lambda a: a ** 3, y, create_graph=True)),
    ("jacobian_unused", lambda m, F, x, y: F.jacobian(lambda a, b: a * 2, (x, y))),
    ("hessian", lambda m, F, x, y: F.hessian(lambda a: (a ** 3).sum() + a.prod(), y)),
    ("hessian_tuple", lambda m, F, x, y: F.hessian(lambda a, b: (a.sum(0) * b.exp()).sum(), (x, y))),
    ("hessian_create_graph", lambda m, F, x, y: F.hessian(lambda a: (a.sin() ** 2).sum(), y, create_graph=True)),
    ("vjp", lambda m, F, x, y: F.vjp(lambda a: a.exp() @ a.t(), x, m.ones(2, 2, dtype=m.float64))),
    ("vjp_scalar", lambda m, F, x, y: F.vjp(lambda a: (a ** 2).sum(), y)),
    ("jvp", lambda m, F, x, y: F.jvp(lambda a: a.tanh() * a, x, m.ones(2, 3, dtype=m.float64))),
    ("jvp_tuple", lambda m, F, x, y: F.jvp(lambda a, b: a * b, (x, y), (x * 0 + 1, y))),
    ("vhp", lambda m, F, x, y: F.vhp(lambda a: (a ** 4).sum(), y, y)),
    ("hvp", lambda m, F, x, y: F.hvp(lambda a: (a.exp() * a).sum(), y, y * 2)),
    ("hvp_create_graph", lambda m, F, x, y: F.hvp(lambda a: (a ** 3).sum(), y, y, create_graph=True)),
]


@pytest.mark.parametrize("call", CALLS, ids=[c[0] for c in CALLS])
def test_matches_torch(call):
    _, program = call
    results = []
    for m in (gradviz, torch):
        x = m.tensor(X, requires_grad=True)
        y = m.tensor(Y, requires_grad=True)
        results.append(program(m, m.autograd.functional, x, y))
    assert_same(*results)


def test_create_graph_result_is_differentiable_like_torch():
    grads = []
    for m in (gradviz, torch):
        y = m.tensor(Y, requires_grad=True)
        jac = m.autograd.functional.jacobian(lambda a: a ** 3, y, create_graph=True)
        (g,) = m.autograd.grad(jac.sum(), y)
        grads.append(g.numpy())
    np.testing.assert_allclose(grads[0], grads[1])


ERRORS = [
    ("strict_independent", lambda m, F: F.jacobian(lambda a, b: a * 2, (m.ones(2), m.ones(2)), strict=True),
     "Output 0 of the user-provided function is independent of input 1"),
    ("strict_no_grad_output", lambda m, F: F.vjp(lambda a: m.ones(2), m.ones(2), m.ones(2), strict=True),
     "Output 0 of the user-provided function does not require gradients"),
    ("v_needed", lambda m, F: F.vjp(lambda a: a * 2, m.ones(2)),
     "The vector v can only be None if the user-provided function returns a single Tensor with a single element."),
    ("v_size", lambda m, F: F.jvp(lambda a: a * 2, m.ones(2), m.ones(3)),
     "v has invalid size: should be"),
    ("v_tuple_length", lambda m, F: F.vjp(lambda a, b: (a, b), (m.ones(1), m.ones(1)), (m.ones(1),)),
     "v is a tuple of invalid length: should be 2 but got 1."),
    ("hessian_vector_output", lambda m, F: F.hessian(lambda a: a * 2, m.ones(2)),
     "The Tensor returned by the function given to hessian should contain a single element"),
    ("not_a_tensor", lambda m, F: F.jacobian(lambda a: a, [1.0]),
     "The inputs given to jacobian must be either a Tensor or a tuple of Tensors"),
    ("hessian_linear_strict", lambda m, F: F.hessian(lambda a: (a * 2).sum(), m.ones(2), strict=True),
     "jacobian of the user-provided function with respect to input 0 is independent of the input"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_match_torch(case):
    _, program, phrase = case
    caught = []
    for m in (gradviz, torch):
        with pytest.raises(Exception) as info:
            program(m, m.autograd.functional)
        caught.append(info)
    assert caught[0].type is caught[1].type
    assert phrase in str(caught[1].value)
    assert phrase in str(caught[0].value).replace("gradviz", "torch")

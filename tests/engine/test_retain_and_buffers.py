"""Input buffers (summing every contribution to one slot), retain_graph and freeing saved
tensors, accumulation into ``.grad`` across calls, and create_graph double backward.

Every expectation is what torch does with the same program.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import run_both
from torch_compare import assert_same_error, assert_tensors_equal, raised

import gradviz

SECOND_TIME = "Trying to backward through the graph a second time"
RNG = np.random.default_rng(11)


def leaf(m, array):
    return m.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


# ---- input-buffer summation ---------------------------------------------------------------

BUFFER_PROGRAMS = [
    ("leaf_used_five_times", lambda m, x: x * x + x * 3 + x.exp() - x, [RNG.standard_normal(4)]),
    ("nonleaf_used_four_times", lambda m, x: (lambda a: a + a + a * a)(x.sin()), [RNG.standard_normal(4)]),
    ("same_slot_twice", lambda m, x: x + x, [RNG.standard_normal(3)]),
    ("broadcast_contributions", lambda m, x, w: (x + w) * x + w.sum(0), [RNG.standard_normal(3), RNG.standard_normal((2, 3))]),
    ("chain_of_sums", lambda m, x: sum([x * float(k) for k in range(1, 9)]), [RNG.standard_normal(3)]),
    ("matrix_reuse", lambda m, w: w @ w @ w + w.t(), [RNG.standard_normal((3, 3))]),
    ("index_reuse", lambda m, x: x[0] * x[1:].sum() + x[None] * x[-1], [RNG.standard_normal(4)]),
]


@pytest.mark.parametrize("name,program,arrays", BUFFER_PROGRAMS, ids=[p[0] for p in BUFFER_PROGRAMS])
def test_contributions_are_summed_like_torch(name, program, arrays):
    run_both(program, arrays, create_graph_order=2)


def test_leaf_used_many_times_gets_one_summed_grad():
    def program(m):
        x = leaf(m, [0.5, -1.5, 2.0])
        terms = [x * float(k) for k in range(50)]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        total.sum().backward()
        return x.grad

    gv, th = program(gradviz), program(torch)
    assert_tensors_equal(gv, th)


def test_grad_of_root_equal_to_leaf():
    # backward on a leaf itself: the leaf's AccumulateGrad is the root
    def program(m):
        x = leaf(m, [1.0, 2.0])
        x.backward(m.tensor([3.0, 4.0], dtype=m.float64))
        return x.grad

    assert_tensors_equal(program(gradviz), program(torch))


# ---- retain_graph and the second backward -------------------------------------------------

SECOND_BACKWARD_PROGRAMS = [
    ("mul_tensors", lambda m, x: (x * x).sum()),
    ("mul_scalar", lambda m, x: (x * 2.0).sum()),
    ("add_scalar", lambda m, x: (x + 1.0).sum()),
    ("add_tensors", lambda m, x: (x + x).sum()),
    ("sub_neg", lambda m, x: (-(x - 3.0)).sum()),
    ("sum_only", lambda m, x: x.sum()),
    ("mean", lambda m, x: x.mean()),
    ("exp", lambda m, x: x.exp().sum()),
    ("tanh", lambda m, x: x.tanh().sum()),
    ("div_scalar", lambda m, x: (x / 2.0).sum()),
    ("pow", lambda m, x: (x ** 2).sum()),
    ("reshape_select", lambda m, x: x.reshape(2, 2)[0].sum()),
    ("matmul", lambda m, x: (x @ x)),
]


def _backward_twice(program, retain_first):
    def run(m):
        x = leaf(m, [0.5, -1.0, 1.5, 2.0])
        y = program(m, x)
        y.backward(retain_graph=retain_first)
        y.backward()
        return x.grad
    return run


@pytest.mark.parametrize("name,program", SECOND_BACKWARD_PROGRAMS, ids=[p[0] for p in SECOND_BACKWARD_PROGRAMS])
def test_second_backward_fails_or_works_like_torch(name, program):
    run = _backward_twice(program, retain_first=False)
    th_error = raised(run, torch)
    if th_error is not None:
        assert_same_error(run, SECOND_TIME)
    else:
        assert_tensors_equal(run(gradviz), run(torch), what="grad after two backward calls")


@pytest.mark.parametrize("name,program", SECOND_BACKWARD_PROGRAMS, ids=[p[0] for p in SECOND_BACKWARD_PROGRAMS])
def test_retain_graph_allows_a_second_backward(name, program):
    run = _backward_twice(program, retain_first=True)
    assert_tensors_equal(run(gradviz), run(torch), what="grad after two backward calls")


def test_mul_second_backward_error_message():
    gv, th = assert_same_error(_backward_twice(lambda m, x: (x * x).sum(), False), SECOND_TIME)
    assert "retain_graph=True" in str(gv)


def test_retained_then_released_then_fails():
    def run(m):
        x = leaf(m, [0.5, 2.0])
        y = (x * x.exp()).sum()
        y.backward(retain_graph=True)
        y.backward(retain_graph=True)
        y.backward()          # frees
        first = x.grad.clone()
        y.backward()          # raises
        return first

    assert_same_error(run, SECOND_TIME)


def test_autograd_grad_frees_by_default():
    def run(m):
        x = leaf(m, [0.5, 2.0])
        y = (x * x).sum()
        m.autograd.grad(y, x)
        m.autograd.grad(y, x)

    assert_same_error(run, SECOND_TIME)


def test_create_graph_implies_retain_graph():
    def run(m):
        x = leaf(m, [0.5, 2.0])
        y = (x * x * x).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (g2,) = m.autograd.grad(y, x)
        return g.detach(), g2

    (gv_g, gv_g2), (th_g, th_g2) = run(gradviz), run(torch)
    assert_tensors_equal(gv_g, th_g)
    assert_tensors_equal(gv_g2, th_g2)


def test_free_only_the_part_that_ran():
    # autograd.grad w.r.t. an intermediate frees only the nodes it executed
    def run(m):
        x = leaf(m, [0.5, 2.0])
        a = x.exp()
        y = (a * a).sum()
        m.autograd.grad(y, a)           # runs SumBackward0, MulBackward0; not ExpBackward0
        b = (a * 3.0).sum()             # a new graph on top of a
        b.backward()                    # goes through ExpBackward0: still has its saved result
        return x.grad

    assert_tensors_equal(run(gradviz), run(torch))


# ---- accumulation into .grad --------------------------------------------------------------

def test_grad_accumulates_across_two_backward_calls():
    def run(m):
        x = leaf(m, [0.5, -1.0, 2.0])
        (x * x).sum().backward()
        first = x.grad.clone()
        (x.exp() * 3.0).sum().backward()
        return first, x.grad

    (gv1, gv2), (th1, th2) = run(gradviz), run(torch)
    assert_tensors_equal(gv1, th1)
    assert_tensors_equal(gv2, th2)


def test_first_grad_is_not_aliased_to_the_incoming_gradient():
    # .grad must not share memory with a gradient tensor the user passed in
    def run(m):
        x = leaf(m, [1.0, 2.0])
        upstream = m.tensor([1.0, 1.0], dtype=m.float64)
        x.backward(upstream)
        x.backward(upstream)
        return upstream, x.grad

    (gv_up, gv_grad), (th_up, th_grad) = run(gradviz), run(torch)
    assert_tensors_equal(gv_up, th_up, what="upstream gradient after backward")
    assert_tensors_equal(gv_grad, th_grad)


def test_grad_accumulates_with_create_graph():
    def run(m):
        x = leaf(m, [0.5, 2.0])
        (x ** 3).sum().backward(create_graph=True)
        g = x.grad
        requires = g.requires_grad
        (g * g).sum().backward()      # adds d/dx sum(9 x^4) to x.grad
        return requires, x.grad.detach()

    (gv_req, gv_grad), (th_req, th_grad) = run(gradviz), run(torch)
    assert gv_req == th_req
    assert_tensors_equal(gv_grad, th_grad)


def test_grad_set_to_none_then_backward_again():
    def run(m):
        x = leaf(m, [0.5, 2.0])
        (x * 2.0).sum().backward()
        x.grad = None
        (x * 5.0).sum().backward()
        return x.grad

    assert_tensors_equal(run(gradviz), run(torch))


# ---- create_graph double backward ------------------------------------------------------

DOUBLE_PROGRAMS = [
    ("cube", lambda m, x: x ** 3),
    ("exp_sin", lambda m, x: x.exp() * x.sin()),
    ("tanh_chain", lambda m, x: (x * 2.0).tanh().tanh()),
    ("sigmoid_mul", lambda m, x: x.sigmoid() * x),
    ("div", lambda m, x: 1.0 / (x * x + 1.0)),
    ("matrix", lambda m, x: (x.reshape(2, 2) @ x.reshape(2, 2)).tanh()),
]


@pytest.mark.parametrize("name,program", DOUBLE_PROGRAMS, ids=[p[0] for p in DOUBLE_PROGRAMS])
def test_second_and_third_derivatives_match_torch(name, program):
    def run(m):
        x = leaf(m, [0.3, -0.8, 1.2, 0.5])
        y = program(m, x).sum()
        (g1,) = m.autograd.grad(y, x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = m.autograd.grad((g2 * g2).sum(), x)
        return g1.detach(), g2.detach(), g3

    for gv, th, what in zip(run(gradviz), run(torch), ["first", "second", "third"]):
        assert_tensors_equal(gv, th, rtol=1e-10, atol=1e-10, what=f"{what} derivative")


def test_double_backward_through_backward_api():
    def run(m):
        x = leaf(m, [0.3, -0.8])
        w = leaf(m, [1.5, 0.5])
        loss = ((x * w).tanh() * w).sum()
        (gx,) = m.autograd.grad(loss, x, create_graph=True)
        penalty = (gx * gx).sum()
        penalty.backward()
        return x.grad, w.grad

    for gv, th in zip(run(gradviz), run(torch)):
        assert_tensors_equal(gv, th)


def test_grad_of_grad_without_create_graph_fails_like_torch():
    def run(m):
        x = leaf(m, [0.3, -0.8])
        (g,) = m.autograd.grad((x ** 3).sum(), x)
        m.autograd.grad(g.sum(), x)

    assert_same_error(run, "does not require grad")

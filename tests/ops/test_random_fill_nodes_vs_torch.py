"""The nodes the in-place random fills record in a graph (Note [Random fills in a graph] in
``gradviz/ops/_random_fills.py``): PyTorch's node names, a zero gradient to the overwritten
tensor (and to ``bernoulli_``'s tensor of probabilities), the version bump, and the
``CopySlices`` of a fill through a view; each program runs on gradviz and on torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

FILLS = {
    "normal_": lambda t: t.normal_(0.5, 2.0),
    "uniform_": lambda t: t.uniform_(-1.0, 1.0),
    "exponential_": lambda t: t.exponential_(2.0),
    "geometric_": lambda t: t.geometric_(0.3),
    "log_normal_": lambda t: t.log_normal_(),
    "cauchy_": lambda t: t.cauchy_(),
    "random_": lambda t: t.random_(0, 5),
    "random_ to": lambda t: t.random_(7),
    "random_ full": lambda t: t.random_(),
    "bernoulli_": lambda t: t.bernoulli_(0.5),
    "fill_": lambda t: t.fill_(1.5),
    "zero_": lambda t: t.zero_(),
}


def _name(node):
    """The node's name as ``repr`` shows it (``CopySlices``, not ``torch::autograd::CopySlices``)."""
    return node.name().removeprefix("torch::autograd::")


def _fill_in_graph(lib, fill):
    x = lib.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3), requires_grad=True)
    y = x * 3.0
    version = y._version
    fill(y)
    node = y.grad_fn
    (y * x).sum().backward()  # the gradient through the fill is zero: x.grad is y's values
    return (_name(node), [_name(n) for n, _ in node.next_functions], y._version - version,
            np.array_equal(x.grad.numpy(), y.detach().numpy()))


@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_records_torchs_node_with_a_zero_gradient(name):
    ours = _fill_in_graph(gradviz, FILLS[name])
    theirs = _fill_in_graph(torch, FILLS[name])
    assert ours == theirs
    assert ours[3], "the gradient through the fill must be zero"


@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_through_a_view_records_copy_slices(name):
    def run(lib):
        x = lib.ones(2, 3, requires_grad=True)
        y = x * 2.0
        FILLS[name](y[1])
        (y * lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
        return _name(y.grad_fn), x.grad.numpy().tolist()

    assert run(gradviz) == run(torch)


@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_of_a_leaf_requiring_grad_raises_torchs_error(name):
    for lib in (gradviz, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            FILLS[name](lib.ones(3, requires_grad=True))


@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_of_a_leaf_under_no_grad_records_nothing(name):
    for lib in (gradviz, torch):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            FILLS[name](x)
        assert x.grad_fn is None and x.requires_grad and x._version == 1


def test_bernoulli_with_tensor_probabilities_gives_them_a_zero_gradient():
    def run(lib):
        x = lib.ones(3, requires_grad=True)
        p = lib.full((3,), 0.25, requires_grad=True)
        y = x * 2.0
        y.bernoulli_(p)
        node = y.grad_fn
        (y * x).sum().backward()
        return (_name(node), len(node.next_functions), p.grad.numpy().tolist(),
                np.array_equal(x.grad.numpy(), y.detach().numpy()))

    assert run(gradviz) == run(torch)


@pytest.mark.parametrize("bad,error,phrase", [
    (lambda lib: lib.zeros(3, dtype=lib.long).normal_(), NotImplementedError,
     "\"normal_kernel_cpu\" not implemented for 'Long'"),
    (lambda lib: lib.zeros(3, dtype=lib.bool).uniform_(), NotImplementedError,
     "\"check_uniform_bounds\" not implemented for 'Bool'"),
    (lambda lib: lib.zeros(3, dtype=lib.long).log_normal_(), NotImplementedError,
     "\"log_normal_cpu\" not implemented for 'Long'"),
    (lambda lib: lib.zeros(3, dtype=lib.bool).geometric_(0.5), NotImplementedError,
     "\"geometric_cpu\" not implemented for 'Bool'"),
    (lambda lib: lib.zeros(3, dtype=lib.long).exponential_(), RuntimeError,
     "Exponential distribution is a continuous probability distribution. dtype must be a floating point "
     "but you specified Long"),
    (lambda lib: lib.zeros(3, dtype=lib.long).cauchy_(), RuntimeError,
     "Cauchy distribution is a continuous probability distribution. dtype must be a floating point but "
     "you specified long int"),
    (lambda lib: lib.zeros(3).normal_(0, -1), RuntimeError, "normal expects std >= 0.0, but found std -1"),
    (lambda lib: lib.zeros(3).uniform_(2, 1), RuntimeError,
     "uniform_ expects to return a \\[from, to\\) range, but found from=2 > to=1"),
    (lambda lib: lib.zeros(3).bernoulli_(1.5), RuntimeError, "bernoulli_ expects p to be in \\[0, 1\\], but got p=1.5"),
    (lambda lib: lib.zeros(3).bernoulli_(lib.tensor([2.0, 0.0, 0.0])), RuntimeError,
     "Expected p_in >= 0 && p_in <= 1 to be true, but got false."),
])
def test_bad_fills_raise_torchs_errors(bad, error, phrase):
    for lib in (gradviz, torch):
        with pytest.raises(error, match=phrase):
            bad(lib)


@pytest.mark.parametrize("fill", [lambda t: t.geometric_(0.5), lambda t: t.bernoulli_(0.5),
                                  lambda t: t.random_(0, 3)])
def test_integer_fills_keep_the_dtype_as_torch(fill):
    for lib in (gradviz, torch):
        assert fill(lib.zeros(4, dtype=lib.long)).dtype is lib.long

"""``repeat_interleave`` and ``F.glu`` record PyTorch's nodes (Note [Repeat interleave graph]
in gradviz/ops/_indexing.py, the glu rows in gradviz/ops/_activation.py).

Checked against torch: the chain of node names from the output to the leaf, what each node
saves, the values and the first and second derivatives. Both ops were compositions before
(``index_select``; ``a * sigmoid(b)`` over the two halves); their values and gradients are
compared bit for bit with those compositions, which stay as the reference here, over float32
and float64, odd sizes, NaN, inf and -0.0 entries and non-contiguous inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(11)


def _chain(node):
    """The nodes from ``node`` to the leaf along the first edge: (name, saved non-tensors)."""
    chain = []
    while node is not None:
        saved = {}
        for name in dir(node):
            if name.startswith("_saved_"):
                value = getattr(node, name)
                is_tensor = isinstance(value, (torch.Tensor, gradviz.Tensor))
                saved[name] = tuple(value.shape) if is_tensor else value
        chain.append((node.name(), saved))
        edges = [next_node for next_node, _ in node.next_functions if next_node is not None]
        node = edges[0] if edges else None
    return chain


def _special(shape, dtype):
    """Normal values with NaN, inf, -inf and -0.0 among them."""
    values = RNG.standard_normal(shape).astype(dtype)
    flat = values.reshape(-1)
    for position, value in zip(RNG.permutation(flat.size)[:4], (np.nan, np.inf, -np.inf, -0.0)):
        flat[position] = value
    return values


# ---- repeat_interleave ---------------------------------------------------------------------

REPEATS = {
    "int, flattened": lambda m, x: x.repeat_interleave(2),
    "int, dim": lambda m, x: x.repeat_interleave(3, dim=1),
    "int, negative dim": lambda m, x: x.repeat_interleave(2, -1),
    "int, output_size": lambda m, x: m.repeat_interleave(x, 2, dim=0, output_size=4),
    "int, zero": lambda m, x: x.repeat_interleave(0, dim=1),
    "tensor, dim": lambda m, x: x.repeat_interleave(m.tensor([1, 0, 3]), dim=1),
    "tensor, negative dim": lambda m, x: x.repeat_interleave(m.tensor([2, 1, 0, 1, 1]), dim=-1),
    "tensor of one, dim": lambda m, x: x.repeat_interleave(m.tensor([2]), dim=0),
    "0-d tensor, flattened": lambda m, x: x.repeat_interleave(m.tensor(2)),
    "tensor, flattened": lambda m, x: x.repeat_interleave(m.tensor(list(range(30))) % 3),
}


@pytest.mark.parametrize("case", sorted(REPEATS))
@pytest.mark.parametrize("shape", [(2, 3, 5), (3,), ()], ids=["3-d", "1-d", "0-d"])
def test_repeat_interleave_nodes_values_and_gradients(case, shape):
    program = REPEATS[case]
    array = RNG.standard_normal(shape)
    results = []
    for m in (gradviz, torch):
        x = m.tensor(array, requires_grad=True)
        try:
            y = program(m, x)
        except (RuntimeError, IndexError) as error:
            results.append((type(error), str(error)))
            continue
        chain = _chain(y.grad_fn)
        weights = m.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)))
        (grad,) = m.autograd.grad((y * y * weights).sum(), x, create_graph=True)
        (second,) = m.autograd.grad((grad * grad).sum(), x)
        results.append((chain, y.detach().numpy(), grad.detach().numpy(), second.numpy()))
    ours, theirs = results
    if isinstance(theirs[0], type):  # both refuse the shape, with torch's error
        assert ours == theirs
        return
    assert ours[0] == theirs[0]
    for got, want in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_int_gives_the_index_select_bits(dtype, dim):
    """The expand-and-copy an int ``repeats`` now records gives the bits of the index_select
    gradviz used before, values and gradients, non-contiguous input and special values too."""
    array = _special((3, 7), dtype)
    x = gradviz.tensor(array.T.copy().T, requires_grad=True)  # Fortran order
    base = x.t() if dim is not None else x  # a transposed view: non-contiguous
    y = base.repeat_interleave(3, dim=dim)
    flat = base.reshape(-1) if dim is None else base
    d = 0 if dim is None else dim
    positions = np.repeat(np.arange(flat.shape[d]), 3)
    reference = gradviz.index_select(flat, d, gradviz.tensor(positions))
    np.testing.assert_array_equal(y.detach().numpy(), reference.detach().numpy())
    weights = gradviz.tensor(_special(tuple(y.shape), dtype))
    (ours,) = gradviz.autograd.grad((y * weights).sum(), x)
    (expected,) = gradviz.autograd.grad((reference * weights).sum(), x)
    np.testing.assert_array_equal(ours.numpy(), expected.numpy())


def test_repeat_interleave_errors_are_torchs():
    for program in (lambda m: m.ones(2, 3).repeat_interleave(-1),
                    lambda m: m.ones(2, 3).repeat_interleave(m.tensor([-1, 1]), dim=0),
                    lambda m: m.ones(2, 3).repeat_interleave(m.tensor([1, 2, 3]), dim=0),
                    lambda m: m.ones(2, 3).repeat_interleave(2, dim=0, output_size=5),
                    lambda m: m.tensor(1.0).repeat_interleave(2, dim=0)):
        errors = []
        for m in (gradviz, torch):
            with pytest.raises((RuntimeError, IndexError)) as info:
                program(m)
            errors.append((info.type, str(info.value)))
        assert errors[0] == errors[1]


# ---- glu -----------------------------------------------------------------------------------

def _glu_composed(x, dim):
    """gradviz's glu before it had its own node: the halves through split and sigmoid."""
    first, second = gradviz.chunk(x, 2, dim)
    return first * gradviz.sigmoid(second)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim", [((3, 8), -1), ((5, 4, 3), 1), ((6, 7), 0), ((2,), 0),
                                       ((4, 1, 6), 2), ((0, 4), 1)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_glu_gives_the_composition_bits(dtype, shape, dim, layout):
    array = _special(shape, dtype) if np.prod(shape) >= 4 else RNG.standard_normal(shape).astype(dtype)
    if layout == "transposed":
        array = np.asfortranarray(array)
    x = gradviz.tensor(array, requires_grad=True)
    y, reference = gradviz.nn.functional.glu(x, dim), _glu_composed(x, dim)
    assert y.grad_fn.name() == "GluBackward0"
    assert y.dtype == reference.dtype
    np.testing.assert_array_equal(y.detach().numpy(), reference.detach().numpy())
    weights = gradviz.tensor(_special(tuple(y.shape), dtype) if y.numel() >= 4
                             else np.ones(tuple(y.shape), dtype))
    (ours,) = gradviz.autograd.grad((y * weights).sum(), x)
    (expected,) = gradviz.autograd.grad((reference * weights).sum(), x)
    np.testing.assert_array_equal(ours.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype,tolerance", [(np.float32, 1e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu_node_values_and_derivatives_match_torch(dtype, tolerance, dim):
    """exp differs between numpy and torch's kernel in the last bit: values and derivatives
    agree within one or two roundings."""
    array = RNG.standard_normal((4, 6, 2)).astype(dtype)
    weights = RNG.standard_normal((4, 6, 2)).astype(dtype)
    results = []
    for m in (gradviz, torch):
        x = m.tensor(array, requires_grad=True)
        y = m.nn.functional.glu(x, dim)
        node = y.grad_fn
        saved = (node.name(), node._saved_dim, node._saved_self is x,
                 sorted(n for n in dir(node) if n.startswith("_saved_")),
                 [next_node.name() for next_node, _ in node.next_functions])
        w = m.tensor(weights).narrow(dim, 0, y.shape[dim])
        (grad,) = m.autograd.grad((y * y * w).sum(), x, create_graph=True)
        (second,) = m.autograd.grad((grad * grad).sum(), x)
        results.append((saved, y.detach().numpy(), grad.detach().numpy(), second.numpy()))
    (ours, *our_arrays), (theirs, *their_arrays) = results
    assert ours == theirs
    for got, want in zip(our_arrays, their_arrays):
        np.testing.assert_allclose(got, want, rtol=tolerance * 10, atol=tolerance)


def test_glu_errors_are_torchs():
    for program in (lambda m: m.nn.functional.glu(m.ones(3, 5)),
                    lambda m: m.nn.functional.glu(m.tensor(1.0)),
                    lambda m: m.nn.functional.glu(m.ones(2, 4), 2),
                    lambda m: m.nn.functional.glu(m.ones(2, 4, dtype=m.int64))):
        errors = []
        for m in (gradviz, torch):
            with pytest.raises((RuntimeError, IndexError, NotImplementedError)) as info:
                program(m)
            errors.append((info.type, str(info.value)))
        assert errors[0] == errors[1]

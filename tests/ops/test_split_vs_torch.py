"""split, chunk and unbind against PyTorch (Note [Multi-output views] in ops/_shape.py).

Each call records ONE node with an output per piece; the pieces are views of the input.
Checked: values and first and second derivatives, the graph (node names, one shared node,
``output_nr``, ``next_functions``), missing gradients of unused pieces, version counters,
and PyTorch's error for an in-place write to a piece.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from conftest import assert_close, run_both

import gradviz
from gradviz.instrument import record
from gradviz.ops import _shape

rng = np.random.default_rng(2024)


def normal(*shape):
    return rng.standard_normal(shape)


def _weighted_cat(m, pieces, dim):
    """The pieces recombined, each through a different nonlinear function."""
    return m.cat([p.sin() * (i + 1) + p ** 2 for i, p in enumerate(pieces)], dim)


def _used_twice(m, a):
    first, second = a.split(2)
    return first * first.sin() + second * first + second.exp()


def _pieces_of_non_leaf(m, a):
    y = a * a
    return m.stack([p * (i - 1.5) for i, p in enumerate(y.unbind(1))], 0).exp()


CASES = [
    ("split_int", lambda m, a: _weighted_cat(m, m.split(a, 2), 0), (normal(5, 3),)),
    ("split_int_method_dim1", lambda m, a: _weighted_cat(m, a.split(3, 1), 1), (normal(2, 7),)),
    ("split_int_dim_negative", lambda m, a: _weighted_cat(m, m.split(a, 2, dim=-1), -1), (normal(2, 3, 5),)),
    ("split_int_larger_than_dim", lambda m, a: _weighted_cat(m, a.split(10), 0), (normal(3, 2),)),
    ("split_list", lambda m, a: _weighted_cat(m, m.split(a, [1, 3, 1]), 0), (normal(5, 2),)),
    ("split_tuple_dim_negative", lambda m, a: _weighted_cat(m, a.split((2, 2), -2), -2), (normal(3, 4, 2),)),
    ("split_list_size_zero_pieces", lambda m, a: _weighted_cat(m, a.split([0, 3, 0, 1], 1), 1), (normal(2, 4),)),
    ("split_size_zero_input", lambda m, a: _weighted_cat(m, a.split(2), 0), (normal(0, 3),)),
    ("chunk_even", lambda m, a: _weighted_cat(m, a.chunk(2), 0), (normal(4, 3),)),
    ("chunk_uneven", lambda m, a: _weighted_cat(m, m.chunk(a, 3, 1), 1), (normal(2, 7),)),
    ("chunk_more_than_size", lambda m, a: _weighted_cat(m, a.chunk(4, -1), -1), (normal(2, 3),)),
    ("chunk_size_zero_input", lambda m, a: _weighted_cat(m, a.chunk(3), 0), (normal(0, 2),)),
    ("unbind_dim0", lambda m, a: m.stack([p.sin() * (i + 1) for i, p in enumerate(a.unbind())], 0), (normal(3, 4),)),
    ("unbind_dim1", lambda m, a: m.stack([p ** 2 * (i - 1) for i, p in enumerate(m.unbind(a, 1))], 1), (normal(3, 4),)),
    ("unbind_dim_negative_1d", lambda m, a: m.stack([p.exp() for p in a.unbind(-1)]) * 2, (normal(4),)),
    ("split_some_pieces_used", lambda m, a: a.split(2)[1].sin() * a.split(2)[2].sum(), (normal(5, 2),)),
    ("split_list_one_piece_used", lambda m, a: a.split([2, 1, 2], 1)[1] ** 3, (normal(3, 5),)),
    ("chunk_last_piece_used", lambda m, a: a.chunk(3)[2].exp(), (normal(7, 2),)),
    ("unbind_some_pieces_used", lambda m, a: a.unbind(1)[2] * a.unbind(1)[0].sin(), (normal(3, 4),)),
    ("split_pieces_used_twice", _used_twice, (normal(4, 3),)),
    ("unbind_of_non_leaf", _pieces_of_non_leaf, (normal(2, 3),)),
    ("split_of_split", lambda m, a: _weighted_cat(m, a.split(3)[0].split(1, 1), 1), (normal(4, 2),)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_two_orders_of_gradients_match_torch(case, dtype):
    _, program, arrays = case
    run_both(program, arrays, dtype=dtype, create_graph_order=2)


# (id, program(m, tensor) -> pieces)
SPLITTERS = [
    ("split_int", lambda m, a: m.split(a, 2)),
    ("split_int_dim1", lambda m, a: a.split(2, dim=1)),
    ("split_list", lambda m, a: a.split([1, 0, 3])),
    ("split_single_piece", lambda m, a: a.split(4)),
    ("chunk", lambda m, a: m.chunk(a, 3)),
    ("chunk_dim_negative", lambda m, a: a.chunk(2, -1)),
    ("unbind", lambda m, a: a.unbind()),
    ("unbind_dim1", lambda m, a: m.unbind(a, 1)),
]


def _both(program, data, transform=None):
    """The pieces in gradviz and torch, from a float64 leaf (or ``transform(m, leaf)``)."""
    results = []
    for m in (gradviz, torch):
        leaf = m.tensor(data, requires_grad=True)
        source = leaf if transform is None else transform(m, leaf)
        results.append((leaf, source, program(m, source)))
    return results


@pytest.mark.parametrize("non_leaf", [False, True], ids=["leaf", "non_leaf"])
@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_graph_matches_torch(case, non_leaf):
    _, program = case
    transform = (lambda m, a: a * 2) if non_leaf else None
    for leaf, source, pieces in _both(program, normal(4, 3), transform):
        assert isinstance(pieces, tuple)
        node = pieces[0].grad_fn
        assert all(p.grad_fn is node for p in pieces), "the pieces share one node"
        assert [p.output_nr for p in pieces] == list(range(len(pieces)))
        assert all(not p.is_leaf and p.requires_grad for p in pieces)
        assert all(p._base is source for p in pieces)
        (next_node, next_nr), = node.next_functions
        assert next_nr == 0
        if non_leaf:
            assert next_node is source.grad_fn
        else:
            assert next_node.variable is leaf
    (_, _, ours), (_, _, theirs) = _both(program, normal(4, 3), transform)
    assert ours[0].grad_fn.name() == theirs[0].grad_fn.name()
    assert len(ours) == len(theirs)
    for p, t in zip(ours, theirs):
        assert tuple(p.shape) == tuple(t.shape)
        np.testing.assert_array_equal(p.detach().numpy(), t.detach().numpy())


def test_node_names_are_torchs():
    x = gradviz.zeros(5, 3, requires_grad=True)
    assert x.split(2)[0].grad_fn.name() == "SplitBackward0"
    assert x.split([2, 3])[0].grad_fn.name() == "SplitWithSizesBackward0"
    assert x.chunk(2)[0].grad_fn.name() == "SplitBackward0"
    assert gradviz.zeros(0, 3, requires_grad=True).chunk(3)[0].grad_fn.name() == "SplitWithSizesBackward0"
    assert x.unbind(1)[0].grad_fn.name() == "UnbindBackward0"


@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_nothing_recorded_without_grad(case):
    _, program = case
    x = gradviz.tensor(normal(4, 3), requires_grad=True)
    with gradviz.no_grad():
        pieces = program(gradviz, x)
    # no node, but as in torch they require grad: their base does (Note [Views' requires_grad])
    with torch.no_grad():
        torch_pieces = program(torch, torch.tensor(normal(4, 3), requires_grad=True))
    assert [p.requires_grad for p in pieces] == [p.requires_grad for p in torch_pieces]
    assert all(p.grad_fn is None and p.is_leaf and p.requires_grad and p._base is x
               for p in pieces)
    plain = gradviz.tensor(normal(4, 3))
    assert all(p.grad_fn is None and p._base is plain for p in program(gradviz, plain))
    integers = gradviz.arange(12).reshape(4, 3)
    assert all(p.grad_fn is None and p.dtype is gradviz.int64 for p in program(gradviz, integers))


def test_piece_counts_and_shapes_match_torch():
    for shape, program in [((0, 3), lambda m, a: a.split(2)), ((0, 3), lambda m, a: a.chunk(3)),
                           ((0, 3), lambda m, a: a.split(0)), ((0, 3), lambda m, a: a.unbind()),
                           ((5,), lambda m, a: a.chunk(3)), ((5,), lambda m, a: a.chunk(4)),
                           ((5,), lambda m, a: a.chunk(6)), ((5,), lambda m, a: a.split([0, 5, 0]))]:
        ours = program(gradviz, gradviz.zeros(*shape, requires_grad=True))
        theirs = program(torch, torch.zeros(*shape, requires_grad=True))
        assert [tuple(p.shape) for p in ours] == [tuple(t.shape) for t in theirs], shape
        if theirs:
            assert ours[0].grad_fn.name() == theirs[0].grad_fn.name()


@pytest.mark.parametrize("program", [
    lambda m: m.split(m.tensor(1.0), 1),
    lambda m: m.split(m.tensor(1.0), [1]),
    lambda m: m.chunk(m.tensor(1.0), 2),
    lambda m: m.unbind(m.tensor(1.0)),
    lambda m: m.split(m.zeros(5), -1),
    lambda m: m.split(m.zeros(5), 0),
    lambda m: m.split(m.zeros(5), [1, 2]),
    lambda m: m.split(m.zeros(5), [6, -1]),
    lambda m: m.split(m.zeros(5), 1, 1),
    lambda m: m.chunk(m.zeros(5), 0),
    lambda m: m.unbind(m.zeros(2, 3), 2),
], ids=["split_0d", "split_list_0d", "chunk_0d", "unbind_0d", "split_negative", "split_zero",
        "split_list_wrong_sum", "split_list_negative", "split_dim_out_of_range", "chunk_zero",
        "unbind_dim_out_of_range"])
def test_errors_match_torch(program):
    with pytest.raises(Exception) as theirs:
        program(torch)
    with pytest.raises(type(theirs.value)) as ours:
        program(gradviz)
    assert str(ours.value) == str(theirs.value)


# ---- gradients of unused pieces -----------------------------------------------------------

@pytest.mark.parametrize("create_graph", [False, True], ids=["fast_rule", "differentiable_rule"])
@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_rules_treat_missing_gradients_as_zeros(case, create_graph):
    _, program = case
    data = normal(4, 3)
    pieces = program(gradviz, gradviz.tensor(data, requires_grad=True))
    expected = [np.zeros(p.shape) for p in pieces]
    grads = [None] * len(pieces)
    grads[-1] = gradviz.tensor(normal(*pieces[-1].shape))
    expected[-1] = grads[-1].numpy()
    node = pieces[0].grad_fn
    with gradviz.set_grad_enabled(create_graph):  # the node takes its fast rule with grad mode off
        result, = node._apply_grads(grads)
        nothing, = node._apply_grads([None] * len(pieces))
    assert nothing is None
    # the input's gradient: the last piece's gradient in place, zeros elsewhere (as in torch)
    whole = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    torch_pieces = program(torch, whole)
    torch.autograd.backward(torch_pieces[-1], torch.tensor(expected[-1]))
    assert result.dtype is gradviz.float64 and tuple(result.shape) == (4, 3)
    np.testing.assert_array_equal(result.numpy(), whole.grad.numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_double_backward_through_the_rule_matches_torch(case, dtype):
    """Gradients with respect to the pieces' gradients (the rule's own derivative), with only
    some pieces among the outputs: the others' gradients are missing."""
    _, program = case
    data = normal(4, 3).astype(dtype)
    results = []
    for m in (gradviz, torch):
        x = m.tensor(data, requires_grad=True)
        pieces = program(m, x.sin())
        chosen = [p for i, p in enumerate(pieces) if i % 2 == 0]
        seeds = [m.tensor(np.linspace(-1.0, 1.0, p.numel()).reshape(tuple(p.shape)).astype(dtype),
                          requires_grad=True) for p in chosen]
        g, = m.autograd.grad(chosen, x, seeds, create_graph=True)
        weights = m.tensor(np.arange(12.0).reshape(4, 3).astype(dtype))
        second = m.autograd.grad((g * g * weights).sum(), [x] + seeds, allow_unused=True)
        results.append((g, second))
    (g_ours, second_ours), (g_theirs, second_theirs) = results
    assert_close(g_ours, g_theirs, dtype, "first derivative")
    for i, (ours, theirs) in enumerate(zip(second_ours, second_theirs)):
        assert_close(ours, theirs, dtype, f"second derivative {i}")


@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_the_engine_leaves_unused_pieces_to_the_rule(case):
    """Note [Rules that fill missing gradients]: the engine materializes no zeros for a
    split node's unused pieces (no ``grads_materialized`` event, the rule receives None),
    and the input's gradient is torch's: the used piece's gradient, zeros elsewhere."""
    _, program = case
    data = normal(4, 3)
    x = gradviz.tensor(data, requires_grad=True)
    with record() as trace:
        pieces = program(gradviz, x)
        (pieces[-1] * 2).sum().backward()
    assert not [e for e in trace.events if e["kind"] == "grads_materialized"]
    assert pieces[0].grad_fn._materializes_grads() is False
    torch_x = torch.tensor(data, requires_grad=True)
    (program(torch, torch_x)[-1] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), torch_x.grad.numpy())


def test_node_pre_hook_sees_missing_gradients_like_torch():
    seen = []
    for m in (gradviz, torch):
        pieces = (m.tensor(normal(5, 3), requires_grad=True) * 1).split(2)
        pieces[0].grad_fn.register_prehook(
            lambda grads, m=m: seen.append((m.__name__, [g is None for g in grads])))
        pieces[1].sum().backward()
    assert seen == [("gradviz", [True, False, True]), ("torch", [True, False, True])]


def test_retain_grad_on_a_piece():
    results = []
    for m in (gradviz, torch):
        pieces = (m.tensor(normal(5, 3), requires_grad=True) * 1).split(2)
        pieces[1].retain_grad()
        (pieces[1] * 2 + pieces[2].sum()).sum().backward()
        results.append(pieces[1].grad)
    assert_close(*results)


# ---- views and version counters -----------------------------------------------------------

@pytest.mark.parametrize("case", SPLITTERS, ids=[c[0] for c in SPLITTERS])
def test_pieces_share_storage_and_version_counter(case):
    _, program = case
    for m in (gradviz, torch):
        base = m.tensor(normal(4, 3), requires_grad=True) * 1
        pieces = program(m, base)
        base.mul_(2)
        assert base._version == 1 and all(p._version == 1 for p in pieces)
        with m.no_grad():
            pieces[-1].add_(1)  # allowed without grad mode, writes through to the base
        assert base._version == 2 and all(p._version == 2 for p in pieces)
    plain = [program(m, m.tensor(np.arange(12.0).reshape(4, 3))) for m in (gradviz, torch)]
    for pieces in plain:
        pieces[0].mul_(10)  # nothing requires grad: an ordinary write through a view
        assert pieces[0]._base._version == 1
    np.testing.assert_array_equal(plain[0][0]._base.numpy(), plain[1][0]._base.numpy())


def test_detached_piece_is_writable():
    for m in (gradviz, torch):
        base = m.tensor(normal(4, 3), requires_grad=True) * 1
        piece = base.split(2)[0]
        piece.detach().zero_()
        assert base._version == 1 and float(base[:2].detach().abs().sum()) == 0.0


# ---- in-place writes to a piece -----------------------------------------------------------

WRITES = [
    ("mul_", lambda m, p: p.mul_(2)),
    ("add_", lambda m, p: p.add_(1.0)),
    ("zero_", lambda m, p: p.zero_()),
    ("iadd", lambda m, p: p.__iadd__(1.0)),
    ("copy_", lambda m, p: p.copy_(m.ones(p.shape, dtype=p.dtype))),
    ("view_of_piece_mul_", lambda m, p: p.unsqueeze(0).mul_(2)),
    ("select_of_piece_exp_", lambda m, p: p[0].exp_()),
]


def _write_error(m, program, write, source, nr):
    leaf = m.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    base = leaf if source == "leaf" else leaf * 1
    pieces = program(m, base)
    with pytest.raises(RuntimeError) as error:
        write(m, pieces[nr])
    return str(error.value)


@pytest.mark.parametrize("source", ["leaf", "non_leaf"])
@pytest.mark.parametrize("write", WRITES, ids=[w[0] for w in WRITES])
@pytest.mark.parametrize("case", [c for c in SPLITTERS if c[0] != "split_single_piece"],
                         ids=[c[0] for c in SPLITTERS if c[0] != "split_single_piece"])
def test_inplace_on_a_piece_raises_torchs_error(case, write, source):
    _, program = case
    _, write_fn = write
    for nr in (0, -1):
        ours = _write_error(gradviz, program, write_fn, source, nr)
        theirs = _write_error(torch, program, write_fn, source, nr)
        assert "This view is the output of a function that returns multiple views" in ours
        assert ours == theirs


def test_inplace_error_text():
    x = gradviz.zeros(5, 3, requires_grad=True)
    with pytest.raises(RuntimeError) as error:
        x.split(2)[1].mul_(2)
    assert str(error.value) == (
        "Output 1 of Split is a view and is being modified inplace. This view is the output of a "
        "function that returns multiple views. Such functions do not allow the output views to be "
        "modified inplace. You should replace the inplace operation by an out-of-place one.")


def test_setitem_on_a_piece_raises():
    # torch names the view setitem writes through ("Output 0 of Select"); the key phrase matches
    for m in (gradviz, torch):
        pieces = (m.zeros(4, 3, requires_grad=True) * 1).unbind()
        with pytest.raises(RuntimeError, match="is a view and is being modified inplace. This view "
                                               "is the output of a function that returns multiple views"):
            pieces[2][0] = 1.0


def test_inplace_with_a_differentiable_operand_on_a_piece_of_a_constant():
    results = []
    for m in (gradviz, torch):
        pieces = m.tensor(normal(4, 3)).split(2)
        other = m.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError) as error:
            pieces[0].mul_(other)
        results.append(str(error.value))
    assert results[0] == results[1]
    assert results[0].startswith("A view was created in no_grad mode")


def test_pieces_made_without_grad_mode_are_ordinary_views():
    # No multi-output mark: a later write follows gradviz's rules for views (values match torch
    # when nothing requires grad)
    base = gradviz.tensor(normal(4, 3)) * 1
    with gradviz.no_grad():
        pieces = base.split(2)
    pieces[1].mul_(0)
    assert float(base[2:].abs().sum()) == 0.0


def test_split_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(_shape.split, "split", globs={}) if t.examples]
    assert tests
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_forward_mode_ad_through_split_and_unbind():
    import torch.autograd.forward_ad as th_fwd

    import gradviz.autograd.forward_ad as gv_fwd

    data, tangent = normal(4, 3), normal(4, 3)
    results = []
    for m, fwd in ((gradviz, gv_fwd), (torch, th_fwd)):
        with fwd.dual_level():
            x = fwd.make_dual(m.tensor(data), m.tensor(tangent))
            first, second = x.split([1, 3])
            a, b, c = second.unbind(1)
            out = first.sin().sum() * a + b * c.exp()
            results.append(fwd.unpack_dual(out).tangent)
    assert_close(*results)

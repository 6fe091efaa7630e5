"""In-place view ops (``squeeze_``, ``unsqueeze_``, ``t_``, ``transpose_``, ``swapdims_``,
``swapaxes_``) against torch: shapes, values, node names and saved attributes, version
bumps, gradients through them, views of and through them, and torch's errors
(Note [In-place view ops] in ``gradviz/ops/_inplace_views.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

CALLS = {
    "t_": ((2, 3), lambda t: t.t_()),
    "t_ 1-d": ((3,), lambda t: t.t_()),
    "transpose_": ((2, 3, 4), lambda t: t.transpose_(0, 2)),
    "transpose_ negative": ((2, 3, 4), lambda t: t.transpose_(-1, 1)),
    "swapdims_": ((2, 3), lambda t: t.swapdims_(0, 1)),
    "swapaxes_": ((2, 3, 4), lambda t: t.swapaxes_(1, 2)),
    "unsqueeze_": ((2, 3), lambda t: t.unsqueeze_(1)),
    "unsqueeze_ last": ((2, 3), lambda t: t.unsqueeze_(-1)),
    "squeeze_": ((1, 3, 1, 2), lambda t: t.squeeze_()),
    "squeeze_ dim": ((1, 3, 1), lambda t: t.squeeze_(2)),
    "squeeze_ dim kept": ((2, 3), lambda t: t.squeeze_(0)),
    "squeeze_ dims": ((1, 3, 1, 2), lambda t: t.squeeze_((0, 2, 3))),
}


def _name(node):
    return node.name().removeprefix("torch::autograd::")


def _in_graph(lib, shape, call):
    x = lib.tensor(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape), requires_grad=True)
    y = x * 2.0
    version = y._version
    returned = call(y)
    weights = lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape)))
    (y * weights).sum().backward()
    node = y.grad_fn
    return (returned is y, tuple(y.shape), y.is_contiguous(), y._version - version,
            y.detach().numpy().tolist(), _name(node), [_name(n) for n, _ in node.next_functions],
            x.grad.numpy().tolist())


@pytest.mark.parametrize("name", sorted(CALLS))
def test_in_graph_matches_torch(name):
    shape, call = CALLS[name]
    assert _in_graph(gradviz, shape, call) == _in_graph(torch, shape, call)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_without_a_graph_matches_torch(name):
    def run(lib):
        shape, call = CALLS[name]
        y = lib.arange(float(np.prod(shape))).reshape(shape)
        call(y)
        return tuple(y.shape), y.is_contiguous(), y._version, y.numpy().tolist(), y.grad_fn

    assert run(gradviz) == run(torch)


@pytest.mark.parametrize("call,saved", [
    (lambda t: t.transpose_(0, 2), {"_saved_dim0": 0, "_saved_dim1": 2}),
    (lambda t: t.unsqueeze_(1), {"_saved_dim": 1}),
    (lambda t: t.squeeze_(1), {"_saved_dim": 1, "_saved_self_sym_sizes": (2, 1, 3)}),
    (lambda t: t.squeeze_(), {"_saved_self_sym_sizes": (2, 1, 3)}),
    (lambda t: t.squeeze_((1,)), {"_saved_dim": (1,), "_saved_self_sym_sizes": (2, 1, 3)}),
])
def test_saved_attributes_match_torch(call, saved):
    for lib in (gradviz, torch):
        y = lib.ones(2, 1, 3, requires_grad=True) * 2.0
        call(y)
        for attribute, value in saved.items():
            got = getattr(y.grad_fn, attribute)
            assert (tuple(got) if isinstance(value, tuple) else got) == value, (lib.__name__, attribute)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_leaf_requiring_grad_raises_and_no_grad_allows(name):
    shape, call = CALLS[name]
    results = []
    for lib in (gradviz, torch):
        x = lib.ones(shape, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            call(x)
        assert tuple(x.shape) == shape
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            call(x[...])
        with lib.no_grad():
            call(x)
        results.append((tuple(x.shape), x.grad_fn, x.requires_grad))
    assert results[0] == results[1]


@pytest.mark.parametrize("bad,error,phrase", [
    (lambda lib: lib.zeros(2, 3, 4).t_(), RuntimeError, "t_\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"),
    (lambda lib: lib.zeros(2, 3).squeeze_(5), IndexError, "Dimension out of range"),
    (lambda lib: lib.zeros(2, 3).transpose_(0, 5), IndexError, "Dimension out of range"),
    (lambda lib: lib.zeros(2, 3).unsqueeze_(5), IndexError, "Dimension out of range"),
    (lambda lib: lib.zeros(3, 1).squeeze_((1, 1)), RuntimeError, "dim 1 appears multiple times in the list of dims"),
    (lambda lib: lib.zeros(1, 2).squeeze_(0.5), TypeError, "squeeze_\\(\\) received an invalid combination of arguments"),
    (lambda lib: lib.zeros(1, 2).transpose_(0, 1.0), TypeError,
     "transpose_\\(\\): argument 'dim1' \\(position 2\\) must be int, not float"),
    (lambda lib: (lib.ones(4, 3, requires_grad=True) * 1.0).split(2)[0].t_(), RuntimeError,
     "Output 0 of SplitBackward0 is a view and is being modified inplace"),
])
def test_bad_calls_raise_torchs_errors(bad, error, phrase):
    for lib in (gradviz, torch):
        with pytest.raises(error, match=phrase.replace("SplitBackward0", "Split(Backward0)?")):
            bad(lib)


def test_a_saved_tensor_changed_by_t_fails_backward():
    for lib in (gradviz, torch):
        x = lib.ones(2, 3, requires_grad=True)
        q = x * 1.0
        product = q * q  # saves q
        q.t_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            product.sum().backward()


def _program_result(lib, program):
    x = lib.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    out = program(lib, x)
    out.backward(lib.tensor(np.linspace(1.0, 3.0, out.numel()).reshape(tuple(out.shape))))
    return out.detach().numpy().tolist(), x.grad.numpy().tolist()


PROGRAMS = {
    # an in-place op on a view: its chain gains the step, writes through it reach the base
    "view unsqueeze_ then write": lambda lib, x: _write_through(x, lambda y: y[0].unsqueeze_(0)),
    "view t_ then write": lambda lib, x: _write_through(x, lambda y: y[:, :2].t_()),
    # a base transposed with a live view of one column: the view still reads that column
    "base t_ with a live view": lambda lib, x: _base_changed(lib, x, lambda y: y.t_()),
    "base unsqueeze_ with a flat view": lambda lib, x: _base_changed_flat(lib, x, lambda y: y.unsqueeze_(0)),
    "base squeeze_ with a flat view": lambda lib, x: _base_changed_flat(
        lib, x, lambda y: y.unsqueeze_(1).squeeze_()),
    "t_ then matmul": lambda lib, x: (x * 1.0).t_() @ x,
    "swapdims_ twice": lambda lib, x: (x * 1.0).swapdims_(0, 1).swapaxes_(1, 0) * x,
}


def _write_through(x, change):
    y = x * 2.0
    view = change(y)
    view.mul_(lib_arange_like(view))
    return y * view.sum()


def lib_arange_like(tensor):
    """1, 2, 3, ... shaped like ``tensor`` (so a transposed write lands where it should)."""
    return (tensor.detach() * 0.0 + 1.0).flatten().cumsum(0).reshape(tuple(tensor.shape))


def _base_changed(lib, x, change):
    y = x * 2.0
    column = y[:, 1]
    change(y)
    column.mul_(10.0)
    return y * 1.0 + column.sum()


def _base_changed_flat(lib, x, change):
    y = x * 2.0
    flat = y.view(-1)
    change(y)
    flat.mul_(lib.arange(6.0))
    return y.sum() * y


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_torch(name):
    ours = _program_result(gradviz, PROGRAMS[name])
    theirs = _program_result(torch, PROGRAMS[name])
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_node_names_of_views_after_the_change_match_torch():
    def run(lib):
        y = lib.ones(2, 3, requires_grad=True) * 2.0
        row, column = y[0], y[:, 1]
        row.unsqueeze_(0)  # the written view keeps its in-place node, the other is regenerated
        names = [_name(row.grad_fn), _name(column.grad_fn), _name(y.grad_fn)]
        row.mul_(2.0)
        return names + [_name(row.grad_fn), _name(column.grad_fn), _name(y.grad_fn), row._version]

    assert run(gradviz) == run(torch)


def test_transpose_of_a_base_with_a_flat_view_is_refused_clearly():
    y = gradviz.ones(2, 3, requires_grad=True) * 2.0
    flat = y.view(-1)
    with pytest.raises(RuntimeError, match="not supported by gradviz.*transpose out of place"):
        y.t_()
    assert tuple(y.shape) == (2, 3) and y._version == 0 and flat._version == 0


@pytest.mark.parametrize("call,node", [
    (lambda t: t.squeeze_(), "SqueezeBackward3"), (lambda t: t.squeeze_(0), "SqueezeBackward4"),
    (lambda t: t.squeeze_(-1), "SqueezeBackward4"), (lambda t: t.unsqueeze_(-1), "UnsqueezeBackward1"),
    (lambda t: t.t_(), "TBackward1"), (lambda t: t.transpose_(0, -1), "TransposeBackward1"),
])
def test_zero_dimensional_tensors_match_torch(call, node):
    def run(lib):
        x = lib.tensor(3.0, requires_grad=True)
        y = x * 2.0
        call(y)
        (y * 5.0).sum().backward()
        return tuple(y.shape), _name(y.grad_fn), float(x.grad)

    assert run(gradviz) == run(torch)
    assert run(torch)[1] == node


@pytest.mark.parametrize("call", [lambda t: t.squeeze(0), lambda t: t.squeeze(-1), lambda t: t.transpose(0, -1),
                                  lambda t: t.swapaxes(-1, 0)])
def test_zero_dimensional_out_of_place_views_match_torch(call):
    def run(lib):
        x = lib.tensor(3.0, requires_grad=True)
        y = call(x * 2.0)
        (y * 5.0).backward()
        return tuple(y.shape), _name(y.grad_fn), float(x.grad)

    assert run(gradviz) == run(torch)


def test_forward_ad_tangent_follows_the_shape_change():
    def run(lib):
        forward_ad = lib.autograd.forward_ad
        with forward_ad.dual_level():
            dual = forward_ad.make_dual(lib.tensor(np.arange(6.0).reshape(2, 3)),
                                        lib.tensor(np.arange(6.0).reshape(2, 3) + 1.0))
            y = dual * 2.0
            y.t_()
            first = forward_ad.unpack_dual(y).tangent.numpy().tolist()
            y.unsqueeze_(0)
            total = forward_ad.unpack_dual((y.exp() * lib.arange(2.0)).sum()).tangent.item()
            view = (dual * 1.0)[0]
            view.unsqueeze_(0)
            through_view = forward_ad.unpack_dual(view.sin().sum()).tangent.item()
        return first, total, through_view

    ours, theirs = run(gradviz), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=1e-12)


def test_retain_grad_and_hooks_registered_before_stay_on_the_old_node_as_torch():
    def run(lib):
        z = lib.ones(2, 3, requires_grad=True)
        before = z * 2.0
        before.retain_grad()
        before.t_()
        (before * lib.arange(6.0).view(3, 2)).sum().backward()
        after = z * 2.0
        after.t_()
        after.retain_grad()
        seen = []
        after.register_hook(lambda g: seen.append(tuple(g.shape)))
        (after * lib.arange(6.0).view(3, 2)).sum().backward()
        return before.grad.tolist(), after.grad.tolist(), seen

    assert run(gradviz) == run(torch)


def test_a_write_through_a_view_taken_before_an_untracked_shape_change_is_refused_clearly():
    # neither had a history, so gradviz kept no record of the view when its base was transposed
    base = gradviz.zeros(2, 3)
    row = base[0]
    base.t_()
    with pytest.raises(RuntimeError, match="take the view again after the shape change"):
        row.copy_(gradviz.ones(3, requires_grad=True))
    assert base.tolist() == [[0.0, 0.0]] * 3

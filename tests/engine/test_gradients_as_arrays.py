"""Note [Gradients as arrays] (gradviz_ext/_task.py): nodes whose backward is a fast rule hand
each other numpy arrays when nothing looks at Tensors. The results must be the bits of the
Tensor path (the same graph run with an observer attached, which takes it), and whatever
looks at a gradient (hooks, retain_grad, a custom Function, a reader of the pending buffers)
still sees Tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tracked_per_waiting_piece

import gradviz as gv
import gradviz_ext
from gradviz.autograd._functional import make_graph_task
from gradviz_ext import engine as _engine


def coefficient_sets():
    """The products' constants: x's gradient is their sum, in the engine's order."""
    rng = np.random.default_rng(0)
    return [
        [float(c) for c in rng.standard_normal(33)],
        [float(c) for c in rng.standard_normal(2)],
        [0.75],
        [-0.0, -0.0, -0.0],             # a sum of negative zeros stays -0.0
        [1e-30, 1.0, -1.0, 3e-8],       # order-sensitive rounding
        [1.5, np.inf, 2.0],
        [np.nan, 1.0, 2.0],
    ]


def fan_in(m, form, x, cs):
    """``x`` read by one product per coefficient, joined by ``form``; (roots, upstream)."""
    ys = [x * c for c in cs]
    if form == "stack":
        return [m.stack(ys).sum()], None
    if form == "cat":
        return [m.cat([y.reshape(-1) for y in ys]).sum()], None
    if form == "sum":
        total = ys[0]
        for y in ys[1:]:
            total = total + y
        return [total.sum()], None
    return ys, [m.ones(x.shape, dtype=x.dtype)] * len(ys)  # "roots"


class Watching(_engine.Observer):
    """An observer that listens (an idle one would be told nothing, Note [Observer cost])."""

    def node_started(self, task, node, grads):
        pass


def gradviz_grad(form, data, cs, observed):
    """x.grad after the fan-in's backward; ``observed`` attaches an observer, which makes
    every node take Tensors (the path before Note [Gradients as arrays])."""
    x = gv.tensor(data, requires_grad=True)
    roots, upstream = fan_in(gv, form, x, cs)
    observer = Watching() if observed else None
    make_graph_task(roots, upstream, observer=observer).run()
    return x.grad


def torch_grad(form, data, cs):
    x = torch.tensor(data, requires_grad=True)
    roots, upstream = fan_in(torch, form, x, cs)
    torch.autograd.backward(roots, upstream)
    return x.grad.numpy()


@pytest.mark.parametrize("form", ["stack", "cat", "sum", "roots"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16,), (7, 3), (1,), (5, 1, 2)])
def test_fan_in_gives_the_bits_of_the_tensor_path_and_torchs_values(form, dtype, shape):
    rng = np.random.default_rng(sum(shape))
    data = rng.standard_normal(shape).astype(dtype)
    data.flat[0] = -0.0
    for cs in coefficient_sets():
        arrays = gradviz_grad(form, data, cs, observed=False)
        tensors = gradviz_grad(form, data, cs, observed=True)
        assert isinstance(arrays, gv.Tensor) and arrays.dtype == tensors.dtype
        got, expected = arrays.numpy(), tensors.numpy()
        assert got.dtype == dtype and got.shape == shape
        assert np.array_equal(got, expected, equal_nan=True), (form, cs)
        assert np.array_equal(np.signbit(got), np.signbit(expected)), (form, cs)
        np.testing.assert_allclose(got, torch_grad(form, data, cs), rtol=1e-6, atol=0)


def test_a_non_contiguous_input_and_reduced_or_cast_contributions():
    """Contributions that are broadcast (reduced to the input's shape) and cast (float64 to
    float32) join array ones in one buffer."""

    def program(m, x):
        wide = x + m.zeros((3, 4), dtype=m.float32)         # reduced back to (3, 1)
        ys = [x * 2.0, wide * 3.0, (x.double() * 0.5).float(), x.t().t() * -1.0]
        return m.stack([y.sum(1) for y in ys[:1] + ys[2:]]).sum() + ys[1].sum()

    base = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::4] - 1.5  # strided (3, 1)
    results = []
    for observed in (False, True):
        x = gv.tensor(base, requires_grad=True)
        observer = Watching() if observed else None
        make_graph_task([program(gv, x)], observer=observer).run()
        results.append(x.grad.numpy())
    tx = torch.tensor(base, requires_grad=True)
    program(torch, tx).backward()
    assert np.array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], tx.grad.numpy(), rtol=1e-6)


def test_hooks_retain_grad_and_custom_functions_see_tensors():
    class Twice(gv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            seen.append(("function", type(g)))
            return g * 2

    seen = []
    x = gv.ones(4, requires_grad=True)
    ys = [x * float(i + 1) for i in range(6)]
    ys[1].register_hook(lambda g: seen.append(("tensor hook", type(g))))
    ys[2].retain_grad()
    ys[3].grad_fn.register_prehook(lambda grads: seen.append(("pre-hook", type(grads[0]))))
    ys[4].grad_fn.register_hook(
        lambda outs, grads: seen.append(("post-hook", type(outs[0]), type(grads[0]))))
    x.register_hook(lambda g: seen.append(("leaf hook", type(g))))
    gv.stack(ys[:5] + [Twice.apply(ys[5])]).sum().backward()
    assert sorted(seen, key=str) == sorted([
        ("function", gv.Tensor), ("tensor hook", gv.Tensor), ("pre-hook", gv.Tensor),
        ("post-hook", gv.Tensor, gv.Tensor), ("leaf hook", gv.Tensor)], key=str)
    assert isinstance(ys[2].grad, gv.Tensor)
    assert np.array_equal(ys[2].grad.numpy(), np.ones(4, np.float32))
    assert np.array_equal(x.grad.numpy(), np.full(4, 1 + 2 + 3 + 4 + 5 + 12, np.float32))


def test_pending_buffers_read_during_a_pass_are_tensors():
    x = gv.ones(3, requires_grad=True)
    ys = [x * float(i + 1) for i in range(5)]
    task = make_graph_task([gv.stack(ys).sum()], observer=None)
    task.observer = None  # no default observer either: the pass takes arrays
    task.step()  # SumBackward0
    task.step()  # StackBackward0: each product's buffer now holds its piece
    pending = task.pending_buffer(ys[0].grad_fn)
    assert len(pending) == 1 and isinstance(pending[0], gv.Tensor)
    assert task.pending_buffer(ys[0].grad_fn)[0] is pending[0]  # wrapped once, in place
    while task.step() is not None:
        pass
    assert np.array_equal(x.grad.numpy(), np.full(3, 15.0, np.float32))


@pytest.mark.skipif(not gradviz_ext.COMPILED, reason="counts the compiled engine's objects")
def test_a_piece_in_the_ready_queue_is_one_tracked_object():
    """Per piece of a 2,000-way stack, while its product node waits in the ready queue: its
    InputBuffer (with the piece as an array in it), not a Tensor and a list as well."""
    assert tracked_per_waiting_piece() < 1.1

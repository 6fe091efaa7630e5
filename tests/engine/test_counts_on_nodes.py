"""Dependency counts and pending buffers kept on the nodes (Note [Counts on nodes] in
gradviz_ext/_task.py): a task uses them only when no other live task counts on the same
nodes, and either way every task gives torch's gradients. ``task._serial`` is non-zero when
a task keeps its counts on the nodes."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import gradviz
import gradviz_ext
from gradviz.autograd._functional import make_graph_task

ARRAYS = (np.array([0.3, -0.7, 1.1]), np.array([1.2, 0.4, -0.5]))


def program(m, x, w):
    """Fan-in (w is used three times, h twice) and a chain."""
    h = (x * w).tanh()
    return (h * h + (w * 2.0).exp() * h + x.sin()).sum()


def torch_grads():
    x, w = (torch.tensor(a, requires_grad=True) for a in ARRAYS)
    program(torch, x, w).backward()
    return x.grad.numpy(), w.grad.numpy()


def leaves():
    return [gradviz.tensor(a, requires_grad=True) for a in ARRAYS]


def assert_torch_grads(x, w, scale=1.0):
    tx, tw = torch_grads()
    np.testing.assert_allclose(x.grad.numpy(), scale * tx, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), scale * tw, rtol=1e-12)


def run_to_end(task):
    while task.step() is not None:
        pass


def on_nodes(task):
    """Whether ``task`` keeps its counts on the nodes; interpreted, no task does."""
    return task._serial != 0


COMPILED = gradviz_ext.COMPILED


def test_a_lone_task_counts_on_the_nodes():
    x, w = leaves()
    task = make_graph_task(program(gradviz, x, w))
    assert on_nodes(task) == COMPILED
    run_to_end(task)
    assert not on_nodes(task)  # finished: no longer live
    assert_torch_grads(x, w)


def test_a_second_task_on_a_paused_one_counts_in_dicts_and_both_are_right():
    x, w = leaves()
    y = program(gradviz, x, w)
    first = make_graph_task(y, retain_graph=True)
    for _ in range(3):
        first.step()
    pending_before = first.dependencies()
    second = make_graph_task(y, retain_graph=True)
    assert on_nodes(first) == COMPILED and not on_nodes(second)
    assert second.dependencies() == {n: c for n, c in second._dependencies.items()}
    run_to_end(second)  # x.grad and w.grad get one full gradient
    assert first.dependencies() == pending_before  # the second task left the first's counts
    run_to_end(first)
    assert_torch_grads(x, w, scale=2.0)


def test_dependencies_are_the_same_on_nodes_and_in_dicts():
    x, w = leaves()
    y = program(gradviz, x, w)
    first = make_graph_task(y, retain_graph=True)
    second = make_graph_task(y, retain_graph=True)
    assert on_nodes(first) == COMPILED and not on_nodes(second)
    while True:
        assert first.dependencies() == second.dependencies()
        assert first.ready_nodes() == second.ready_nodes()
        for node in first.dependencies():
            a, b = first.pending_buffer(node), second.pending_buffer(node)
            assert (a is None) == (b is None)
        if first.step() is None:
            assert second.step() is None
            break
        second.step()
    assert_torch_grads(x, w, scale=2.0)  # each task accumulated one full gradient


def test_a_dropped_paused_task_stops_being_live():
    x, w = leaves()
    y = program(gradviz, x, w)
    task = make_graph_task(y, retain_graph=True)
    task.step()
    del task
    gc.collect()
    again = make_graph_task(y)
    assert on_nodes(again) == COMPILED
    run_to_end(again)
    assert_torch_grads(x, w)


def test_an_aborted_task_stops_being_live():
    x, w = leaves()
    y = program(gradviz, x, w)
    task = make_graph_task(y, retain_graph=True)
    task.step()
    task.abort()
    assert not on_nodes(task)
    assert on_nodes(make_graph_task(y)) == COMPILED


def test_a_failed_task_drops_the_gradients_it_was_summing():
    x, w = leaves()
    h = x * w
    # h feeds two ops; a's backward runs first (made last) and its gradient for h waits in
    # h's pending buffer when b's branch fails
    b = h.exp()
    a = h * 3.0
    kept = []

    def keep(grad_inputs, grad_outputs):
        kept.extend(weakref.ref(g) for g in grad_inputs if g is not None)

    def fail(grad):
        raise ValueError("stop here")

    a.grad_fn.register_hook(keep)
    b.register_hook(fail)
    with pytest.raises(ValueError, match="stop here"):
        (a + b).sum().backward()
    gc.collect()
    assert kept and all(ref() is None for ref in kept)


def test_many_live_tasks_beyond_the_stamp_table():
    graphs = []
    for _ in range(40):
        x, w = leaves()
        task = make_graph_task(program(gradviz, x, w))
        task.step()
        graphs.append((x, w, task))
    assert any(on_nodes(task) for _, _, task in graphs) == COMPILED
    assert not all(on_nodes(task) for _, _, task in graphs)  # the table is full: dicts
    for x, w, task in graphs:
        run_to_end(task)
        assert_torch_grads(x, w)


def test_backward_inside_a_hook_on_the_same_graph():
    x, w = leaves()
    y = program(gradviz, x, w)
    inner = []

    def nested(grad):
        # a second backward over part of the graph the outer task is running (once: the
        # hook runs again inside it)
        if inner:
            return grad
        inner.append(None)
        inner.append(gradviz.autograd.grad(y, x, retain_graph=True)[0].numpy())
        return grad

    x.register_hook(nested)
    y.backward(retain_graph=True)
    tx, tw = torch_grads()
    np.testing.assert_allclose(x.grad.numpy(), tx, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw, rtol=1e-12)
    np.testing.assert_allclose(inner[1], tx, rtol=1e-12)


def test_threads_running_backward_on_one_graph():
    x, w = leaves()
    y = program(gradviz, x, w)
    results, errors = [], []

    def work():
        try:
            for _ in range(50):
                results.append([g.numpy() for g in gradviz.autograd.grad(y, (x, w),
                                                                          retain_graph=True)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    tx, tw = torch_grads()
    assert len(results) == 200
    for gx, gw in results:
        np.testing.assert_allclose(gx, tx, rtol=1e-12)
        np.testing.assert_allclose(gw, tw, rtol=1e-12)


CYCLE_PROGRAM = """
import gc
import numpy as np
import gradviz
from gradviz.autograd._functional import make_graph_task
from gradviz_ext._engine import Observer


class Holder(Observer):
    pass


x = gradviz.tensor([0.3, -0.7, 1.1], requires_grad=True)
w = gradviz.tensor([1.2, 0.4, -0.5], requires_grad=True)
for _ in range(20):
    h = (x * w).tanh()
    y = (h * h + (w * 2.0).exp() * h + x.sin()).sum()
    holder = Holder()
    task = make_graph_task(y, observer=holder)
    holder.task = task  # cycles: only the collector frees the task and the graph
    h.grad_fn.register_prehook(lambda grads, task=task: None)
    w.register_hook(lambda grad, task=task: None)
    for _ in range(4):
        task.step()  # h's and w's nodes hold partial sums
    del task, holder, h, y
    gc.collect()
x.grad = None
h = (x * w).tanh()
(h * h + (w * 2.0).exp() * h + x.sin()).sum().backward()
print(np.round(x.grad.numpy(), 6).tolist())
"""


def test_a_paused_task_freed_by_the_collector():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", CYCLE_PROGRAM], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    tx, _ = torch_grads()
    np.testing.assert_allclose(eval(result.stdout.strip()), tx, atol=1e-6)


def test_a_gradient_is_freed_once_the_node_that_used_it_has_run():
    """Note [Recycled buffers]: the buffer kept for reuse holds no gradient."""
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    w = ((x * 2.0) * 3.0) * 4.0
    z = w.grad_fn.next_functions[0][0]  # the node of (x * 2) * 3
    seen = {}

    def keep_w(grad):
        seen["w"] = weakref.ref(grad)

    def check_z(grads):
        # w's gradient went into MulBackward0 of w, which has run by now
        seen["w alive when z runs"] = seen["w"]() is not None

    w.register_hook(keep_w)
    z.register_prehook(check_z)
    w.sum().backward()
    assert seen["w alive when z runs"] is False
    np.testing.assert_array_equal(x.grad.numpy(), [24.0, 24.0])


def test_a_buffer_an_observer_keeps_is_not_reused():
    from gradviz_ext._engine import Observer

    class Keeper(Observer):
        def __init__(self):
            self.lists = []

        def node_started(self, task, node, grads):
            self.lists.append((node.name(), grads))

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2.0 + 1.0) * 3.0
    keeper = Keeper()
    task = make_graph_task(y.sum(), observer=keeper)
    run_to_end(task)
    assert [name for name, _ in keeper.lists] == [
        "SumBackward0", "MulBackward0", "AddBackward0", "MulBackward0", "torch::autograd::AccumulateGrad"]
    for _, grads in keeper.lists:  # what the observer saw was not emptied later
        assert len(grads) == 1 and grads[0] is not None
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])

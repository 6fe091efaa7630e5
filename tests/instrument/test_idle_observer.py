"""Note [Observer cost] (gradviz_ext/_task.py): an observer that overrides none of the backward
callbacks is kept as the task's ``observer`` but told nothing, so the pass runs as without one
(arrays path included); anything that may listen (a subclass overriding one callback, a callback
set on the instance, an object that only looks like an observer) is called at every point."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tracked_per_waiting_piece

import gradviz as gv
import gradviz_ext
from gradviz.autograd._functional import make_graph_task
from gradviz_ext import engine as _engine


def program(m, x, w):
    h = (x @ w).tanh()
    ys = [h * float(i + 1) for i in range(4)]
    return (m.stack(ys).sum(0) * h).sum() + m.cat([h, x]).pow(2).mean()


def inputs(m):
    rng = np.random.default_rng(3)
    x = m.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
    w = m.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    return x, w


def run(observer):
    x, w = inputs(gv)
    task = make_graph_task([program(gv, x, w)], observer=observer)
    task.run()
    return task, x.grad.numpy(), w.grad.numpy()


class FinishedNodes(_engine.Observer):
    """Overrides one callback: it is told every node."""

    def __init__(self):
        self.names = []

    def node_finished(self, task, node, grads_in, grads_out, duration):
        self.names.append(node.name())


def plain_node_names():
    x, w = inputs(gv)
    names = []
    stack = [program(gv, x, w).grad_fn]
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name())
        stack.extend(next_node for next_node, _ in node.next_functions)
    return sorted(names)


def test_an_idle_observer_is_kept_and_the_gradients_are_the_plain_ones():
    idle = _engine.Observer()
    task, gx, gw = run(idle)
    assert task.observer is idle
    assert task._listener is None
    _, plain_x, plain_w = run(None)
    assert np.array_equal(gx, plain_x) and np.array_equal(gw, plain_w)
    tx, tw = inputs(torch)
    program(torch, tx, tw).backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_an_observer_overriding_one_callback_is_told_every_node():
    listening = FinishedNodes()
    task, gx, _ = run(listening)
    assert task._listener is listening
    assert sorted(listening.names) == plain_node_names()
    _, plain_x, _ = run(None)
    assert np.array_equal(gx, plain_x)


def test_a_callback_set_on_the_instance_is_called():
    observer = _engine.Observer()
    started = []
    observer.node_started = lambda task, node, grads: started.append(node.name())
    task, _, _ = run(observer)
    assert task._listener is observer
    assert sorted(started) == plain_node_names()


def test_an_object_that_only_looks_like_an_observer_is_called():
    class LooksLike:
        def __init__(self):
            self.kinds = set()

        def __getattr__(self, name):
            if name.startswith("_"):
                raise AttributeError(name)
            return lambda *args: self.kinds.add(name)

    observer = LooksLike()
    run(observer)
    assert {"backward_started", "node_started", "node_finished", "grad_accumulated",
            "backward_finished"} <= observer.kinds


def test_setting_the_observer_between_steps_takes_effect():
    x, w = inputs(gv)
    task = make_graph_task([program(gv, x, w)], observer=_engine.Observer())
    task.step()
    listening = FinishedNodes()
    task.observer = listening
    assert task.observer is listening and task._listener is listening
    while task.step() is not None:
        pass
    assert len(listening.names) == len(plain_node_names()) - 1  # all but the first
    task.observer = None
    assert task.observer is None and task._listener is None


@pytest.mark.skipif(not gradviz_ext.COMPILED, reason="counts the compiled engine's objects")
def test_an_idle_observer_keeps_the_arrays_path():
    """Note [Gradients as arrays]: with an idle observer a piece waiting in the ready queue is
    still one tracked object (its InputBuffer), as with no observer; a listening observer
    makes the pass hand out Tensors."""
    assert tracked_per_waiting_piece(_engine.Observer()) < 1.1
    assert tracked_per_waiting_piece(FinishedNodes()) > 1.5

"""``gradviz.debug.runcall``: user code calling ``backward()`` runs in a worker thread that
pauses at breakpoints while the calling thread stays free. Every wait has a timeout, so a bug
fails these tests instead of hanging them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gradviz
from gradviz.debug import SessionAborted, runcall

T = 30  # seconds; generous, a healthy run takes milliseconds


class Square(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


def train(w, steps=3):
    losses = []
    for _ in range(steps):
        loss = Square.apply(w).sum()
        loss.backward()
        losses.append(float(loss.item()))
    return losses


@pytest.fixture(autouse=True)
def no_observer_left_behind():
    yield
    from gradviz_ext import engine

    assert engine.forward_observer() is None
    previous = engine.set_default_observer(None)
    assert previous is None, "a runcall session left its observer installed"


def test_pauses_at_a_breakpoint_in_every_backward_and_finishes():
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = runcall(train, w, breakpoints=[{"function": Square}], timeout=T)
    stops = 0
    while session.status == "paused":
        assert session.node(session.current)["name"] == "SquareBackward"
        assert session.node_states()[session.current] == "ready"
        assert threading.current_thread() is threading.main_thread()  # we are free to run
        stops += 1
        session.continue_(timeout=T)
    assert stops == 3 and session.status == "finished"
    assert session.result(timeout=T) == [5.0, 5.0, 5.0]
    np.testing.assert_allclose(w.grad.numpy(), [6.0, 12.0])


def test_step_and_step_event_in_the_worker():
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = runcall(train, w, 1, stop_at_first_node=True, timeout=T)
    assert session.status == "paused"
    assert session.node(session.current)["name"] == "SumBackward0"
    node = session.step(timeout=T)
    assert node.name() == "SumBackward0"
    assert session.node(session.current)["name"] == "SquareBackward"
    event = session.step_event(timeout=T)
    assert event["kind"] == "node_started" and event["name"] == "SquareBackward"
    assert session.node_states()[event["node"]] == "running"
    session.continue_(timeout=T)
    assert session.status == "finished" and session.current is None


def test_listeners_and_widget_follow_the_worker():
    from gradviz.widget import DebuggerWidget

    w = gradviz.tensor([1.0], requires_grad=True)
    session = runcall(train, w, 2, breakpoints=[{"function": "SquareBackward"}], timeout=T)
    widget = DebuggerWidget(session)
    assert widget.status == "paused" and widget.current == session.current
    names = [n["name"] for n in widget.graph["nodes"]]
    assert "SquareBackward" in names
    session.continue_(timeout=T)          # the second backward: a new graph
    assert widget.current == session.current
    assert set(widget.states) == {str(n["id"]) for n in session.graph()["nodes"]}
    session.continue_(timeout=T)
    assert widget.status == "finished"
    widget.close()


def test_exception_in_backward_pauses_at_the_node_then_reaches_the_caller():
    class Broken(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ZeroDivisionError("broken backward")

    def fn():
        x = gradviz.tensor([1.0], requires_grad=True)
        Broken.apply(x).sum().backward()

    session = runcall(fn, timeout=T)
    assert session.status == "paused"
    failing = session.current
    assert session.node(failing)["name"] == "BrokenBackward"
    assert session.node_states()[failing] == "error"
    with pytest.raises(ZeroDivisionError, match="broken backward"):
        session.continue_(timeout=T)
    assert session.status == "error" and isinstance(session.error, ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        session.result(timeout=T)
    # the engine is consistent afterwards
    z = gradviz.tensor([2.0], requires_grad=True)
    (z * z).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [4.0])


def test_exception_outside_backward_is_kept_for_result():
    def fn():
        raise LookupError("no data")

    session = runcall(fn, timeout=T)
    assert session.status == "error"
    with pytest.raises(LookupError, match="no data"):
        session.result(timeout=T)
    with pytest.raises(RuntimeError, match="the session is error"):
        session.step(timeout=T)


def test_abort_unwinds_the_worker_and_leaves_the_engine_usable():
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    caught = []

    def careless_train():
        try:
            return train(w, 5)
        except Exception as exc:  # user code catching Exception must not swallow abort
            caught.append(exc)
            raise

    session = runcall(careless_train, breakpoints=[{"function": Square}], timeout=T)
    assert session.status == "paused"
    session.abort(timeout=T)
    assert session.status == "aborted" and caught == []
    with pytest.raises(SessionAborted):
        session.result(timeout=T)
    z = gradviz.tensor([3.0], requires_grad=True)
    (z * z).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [6.0])


def test_other_threads_are_not_paused():
    w = gradviz.tensor([1.0], requires_grad=True)
    session = runcall(train, w, 1, stop_at_first_node=True, timeout=T)
    assert session.status == "paused"
    v = gradviz.tensor([2.0], requires_grad=True)
    (v * v).sum().backward()  # this thread's backward runs straight through
    np.testing.assert_allclose(v.grad.numpy(), [4.0])
    session.continue_(timeout=T)
    assert session.status == "finished"


def test_event_breakpoint_in_the_worker():
    x = gradviz.tensor([1.0, 0.0], requires_grad=True)

    def fn():
        (x.sqrt() * 2).sum().backward()

    session = runcall(fn, breakpoints=[{"nonfinite": True}], timeout=T)
    assert session.status == "paused"
    assert session.events[-1]["kind"] in ("node_finished", "grad_accumulated")
    stops = 1
    while session.status == "paused" and stops < 20:  # every later event carrying the inf
        session.continue_(timeout=T)
        stops += 1
    assert session.status == "finished" and 1 < stops < 20


def test_step_after_step_event_in_every_backward_pass():
    """Pass 1 shown event by event: after its backward_finished no node is in progress, so
    step() returns None and pauses before pass 2's first node. Pass 2: step() after Step
    event past a node_finished returns that node (not None), then the next nodes in torch's
    order, then None once fn is over. The gradients are torch's."""
    import torch

    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = runcall(train, w, 2, stop_at_first_node=True, timeout=T)
    names = {n["id"]: n["name"] for n in session.graph()["nodes"]}
    kinds = []
    while not kinds or kinds[-1] != "backward_finished":
        kinds.append(session.step_event(timeout=T)["kind"])
    assert session.current is None and session.status == "paused"
    assert session.step(timeout=T) is None
    assert session.node(session.current)["name"] == "SumBackward0"  # pass 2's first node
    assert session.current not in names  # a new graph
    while (event := session.step_event(timeout=T))["kind"] != "node_finished":
        pass
    node = session.step(timeout=T)
    assert node is not None and node.node_id == event["node"]
    stepped = [node.name()]
    while (node := session.step(timeout=T)) is not None:
        stepped.append(node.name())
    assert stepped == ["SumBackward0", "SquareBackward", "torch::autograd::AccumulateGrad"]  # torch's names
    assert session.status == "finished" and session.result(timeout=T) == [5.0, 5.0]
    reference = torch.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        (reference * reference).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), reference.grad.numpy())

"""Failures and sessions leave no reference cycle (issue 18 item 4): with the cycle collector
off, the graph of a failed backward, an aborted session, a session ended by an error and a
finished ``runcall`` session is freed as soon as the user drops the session or the exception,
as torch frees a failed backward's graph at once.

That holds for the compiled engine, whose frames keep no locals. The interpreted engine
(GRADVIZ_PURE_PYTHON=1, for stepping through the engine with pdb) runs in Python frames that
keep ``self`` and their locals, which the tracebacks and the frames' callers keep in turn: there
the cycle collector frees the graph, and these tests check that it does (``assert_freed``)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import gradviz
from gradviz import debug
from gradviz_ext import COMPILED


def assert_freed(ref):
    """``ref``'s object is gone without the cycle collector (compiled engine), or at least
    once the collector ran (interpreted engine: see the module docstring)."""
    if COMPILED:
        assert ref() is None
        assert gc.collect() == 0
    else:
        gc.collect()
        assert ref() is None


@pytest.fixture
def no_cycle_collector():
    """The collector off for the test (restored after), with nothing pending before it."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def failing_function(library):
    class Boom(library.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("boom in backward")

    return Boom


def graph_with_a_failing_node(library):
    """``(loss, weakref to the failing node's ctx)``; the graph saves tensors on the way."""
    x = library.randn(3, requires_grad=True)
    y = failing_function(library).apply(x * 1.5)
    return (y * y).sum(), weakref.ref(y.grad_fn)


def fail_backward(library):
    loss, ctx = graph_with_a_failing_node(library)
    with pytest.raises(ValueError, match="boom in backward"):
        loss.backward()
    del loss
    return ctx


@pytest.mark.parametrize("library", [torch, gradviz], ids=["torch", "gradviz"])
def test_a_failed_backward_frees_its_graph_at_once(no_cycle_collector, library):
    ctx = fail_backward(library)
    if library is torch:
        assert ctx() is None  # torch frees it at once; gradviz must too
    else:
        assert_freed(ctx)


def test_a_failed_autograd_grad_frees_its_graph_at_once(no_cycle_collector):
    def run():
        x = gradviz.randn(3, requires_grad=True)
        y = failing_function(gradviz).apply(x * 1.5)
        ctx = weakref.ref(y.grad_fn)
        with pytest.raises(ValueError):
            gradviz.autograd.grad((y * y).sum(), x)
        return ctx

    assert_freed(run())


def test_an_aborted_session_frees_its_graph_when_dropped(no_cycle_collector):
    def run():
        loss, ctx = graph_with_a_failing_node(gradviz)
        session = debug.backward(loss)
        session.step()
        session.abort()
        assert session.status == "aborted"
        del session, loss
        return ctx

    assert_freed(run())


@pytest.mark.parametrize("how", ["continue_", "step", "run_to", "step_event"])
def test_a_session_ended_by_an_error_frees_its_graph_when_dropped(no_cycle_collector, how):
    def run():
        loss, ctx = graph_with_a_failing_node(gradviz)
        session = debug.backward(loss)
        if how == "step_event":
            while session.step_event() is not None:
                pass
        else:
            with pytest.raises(ValueError, match="boom in backward") as info:
                if how == "continue_":
                    session.continue_()
                elif how == "step":
                    while session.step() is not None:
                        pass
                else:
                    session.run_to(ctx().node_id)
                    session.step()
            assert info.value is session.error
            del info
        assert session.status == "error" and isinstance(session.error, ValueError)
        del session, loss
        return ctx

    assert_freed(run())


def test_the_error_keeps_the_users_frames_in_its_traceback():
    loss, _ = graph_with_a_failing_node(gradviz)
    session = debug.backward(loss)
    with pytest.raises(ValueError) as info:
        session.continue_()
    names = [entry.name for entry in info.traceback]
    assert "test_the_error_keeps_the_users_frames_in_its_traceback" in names  # the caller
    assert "backward" in names  # the user's Function.backward that raised


def test_a_finished_runcall_session_frees_its_graph_when_dropped(no_cycle_collector):
    def run():
        refs = []

        def train():
            x = gradviz.randn(3, requires_grad=True)
            y = (x * 2).tanh()
            refs.append(weakref.ref(y.grad_fn))
            y.sum().backward()

        session = debug.runcall(train)
        session.continue_()
        session.result(timeout=30)
        assert session.status == "finished"
        session._thread.join(30)
        del session
        return refs[0]

    assert_freed(run())


def test_a_runcall_session_ended_by_an_error_frees_its_graph_when_dropped(no_cycle_collector):
    def run():
        refs = []

        def train():
            loss, ctx = graph_with_a_failing_node(gradviz)
            refs.append(ctx)
            loss.backward()

        session = debug.runcall(train)
        with pytest.raises(ValueError, match="boom in backward"):
            session.continue_()  # the worker failed: the controller gets the exception once
        assert session.status == "error" and isinstance(session.error, ValueError)
        session._thread.join(30)
        del session
        return refs[0]

    assert_freed(run())


def test_a_finished_session_frees_its_graph_when_dropped(no_cycle_collector):
    def run():
        x = gradviz.randn(3, requires_grad=True)
        y = (x * 2).tanh()
        node = weakref.ref(y.grad_fn)
        session = debug.backward(y.sum())
        session.continue_()
        assert session.status == "finished"
        del session, y
        return node

    assert_freed(run())


def test_a_session_method_keeps_a_temporary_session_alive_for_its_call():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    debug.backward((x * 3).sum()).continue_()  # the only reference is the call's own
    assert x.grad.tolist() == [3.0, 3.0]


def test_a_paused_session_dropped_without_abort_frees_its_graph():
    """A session paused mid-pass and simply dropped: its task and recorder form no cycle (the
    recorder refers to the task weakly), so the ctx dies at once, as it does in torch when a
    graph is dropped."""
    class Twice(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def paused_session():
        # in a function of its own: debug.backward reads its caller's variables to name the
        # leaves, and CPython keeps that snapshot of a function's locals until it returns
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        y = Twice.apply(x * 1)
        return debug.backward(y.sum()), weakref.ref(y.grad_fn)

    gc.collect()
    gc.disable()
    try:
        session, ctx = paused_session()
        session.step()
        assert ctx() is not None
        del session
        assert_freed(ctx)
    finally:
        gc.enable()

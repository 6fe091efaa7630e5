"""DebugSession beyond ``step()``: ``step_event``, breakpoints, ``run_to``, inspection,
freeing, faults and ``abort``."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import gradviz
from gradviz.debug import Breakpoint


def graph():
    x = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([1.5, 2.0, -0.5], requires_grad=True)
    h = (x * w).tanh()
    loss = (h * h + x.exp()).sum()
    return loss, x, w


def names_in_order(events, kind="node_started"):
    return [e["name"] for e in events if e["kind"] == kind]


# ---- step_event -------------------------------------------------------------------------

def test_step_event_shows_the_events_of_a_plain_run_one_by_one():
    loss, x, w = graph()
    reference = gradviz.debug.backward(loss)
    reference.continue_()
    expected = [e["kind"] for e in reference.events]
    expected_grad = x.grad.numpy().copy()

    loss, x, w = graph()
    session = gradviz.debug.backward(loss)
    shown = [e["kind"] for e in session.events]
    while True:
        before = len(session.events)
        event = session.step_event()
        if event is None:
            break
        assert len(session.events) == before + 1 and session.events[-1] is event
        shown.append(event["kind"])
    assert shown == expected
    assert session.status == "finished"
    np.testing.assert_allclose(x.grad.numpy(), expected_grad)


def test_display_follows_events_while_the_engine_is_ahead_within_a_node():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = gradviz.debug.backward((x * 3).sum())
    session.step()  # SumBackward0
    event = session.step_event()  # MulBackward0's node_started: the engine ran the whole node
    assert event["kind"] == "node_started" and event["name"] == "MulBackward0"
    mul = event["node"]
    assert session.current == mul
    assert session.node_states()[mul] == "running"
    assert session.status == "paused"
    node = session.step()  # finishes showing MulBackward0
    assert node.node_id == mul
    assert session.node_states()[mul] == "done"
    assert session.events[-1]["kind"] in ("node_ready", "buffer_added")


def test_step_event_at_a_failing_node_shows_the_error_in_turn():
    class Broken(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ArithmeticError("nope")

    x = gradviz.tensor([1.0], requires_grad=True)
    session = gradviz.debug.backward(Broken.apply(x).sum())
    kinds = []
    while (event := session.step_event()) is not None:
        kinds.append(event["kind"])
    assert kinds[-1] == "error"
    assert session.status == "error" and isinstance(session.error, ArithmeticError)


# ---- breakpoints ------------------------------------------------------------------------

def test_function_breakpoint_stops_before_the_node_runs():
    loss, x, w = graph()
    ran = []
    session = gradviz.debug.backward(loss)
    tanh = loss.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]
    assert tanh.name() == "TanhBackward0"
    tanh.register_prehook(lambda grads: ran.append("tanh"))
    bp = session.break_on(function="TanhBackward0")
    session.continue_()
    assert session.current == tanh.node_id and session.stopped_at is bp and bp.hits == 1
    assert ran == [] and session.node_states()[tanh.node_id] == "ready"
    session.continue_()  # runs on from the breakpoint to the end
    assert ran == ["tanh"] and session.status == "finished"


def test_custom_function_class_breakpoint():
    class Twice(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = gradviz.tensor([1.0], requires_grad=True)
    y = Twice.apply(x).sum()
    session = gradviz.debug.backward(y)
    session.break_on(function=Twice)
    session.continue_()
    assert session.node(session.current)["name"] == "TwiceBackward"


def test_node_breakpoint_and_run_to():
    loss, x, w = graph()
    session = gradviz.debug.backward(loss)
    target = gradviz.debug.backward  # noqa: F841 (keeps the name in the traceback readable)
    exp_node = loss.grad_fn.next_functions[0][0].next_functions[1][0]
    assert exp_node.name() == "ExpBackward0"
    session.break_on(node=exp_node)
    session.continue_()
    assert session.current == exp_node.node_id
    accumulate = [n for n in session.graph()["nodes"] if n["kind"] == "accumulate_grad"][0]
    session.run_to(accumulate["id"])
    assert session.current == accumulate["id"] and session.stopped_at is None
    assert len(session.breakpoints) == 1  # run_to's temporary breakpoint is gone


def test_event_breakpoint_stops_after_the_event_inside_a_node():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    d = gradviz.tensor([3.0, 4.0], dtype=gradviz.float64, requires_grad=True)
    session = gradviz.debug.backward((x * d).sum())
    bp = session.break_on(event="grad_cast")
    session.continue_()
    assert session.stopped_at is bp
    last = session.events[-1]
    assert last["kind"] == "grad_cast" and last["from_dtype"] == "float64" and last["to_dtype"] == "float32"
    assert session.node_states()[last["node"]] == "running"  # the display is inside the node
    session.continue_()
    assert session.status == "finished"


def test_nonfinite_and_predicate_breakpoints():
    x = gradviz.tensor([1.0, 0.0], requires_grad=True)
    y = (x.sqrt() * 2).sum()  # d sqrt(x)/dx at 0 is inf
    session = gradviz.debug.backward(y)
    bp = session.break_on(nonfinite=True)
    session.continue_()
    assert session.stopped_at is bp
    assert session.events[-1]["kind"] in ("node_finished", "grad_accumulated")
    assert session.events[-1]["name" if "name" in session.events[-1] else "kind"]

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = gradviz.debug.backward((x * 3).sum())
    seen = []
    session.break_on(when=lambda e: seen.append(e["kind"]) or e["kind"] == "grad_accumulated")
    session.continue_()
    assert session.events[-1]["kind"] == "grad_accumulated" and "node_started" in seen
    session.continue_()
    assert session.status == "finished"


def test_breakpoints_can_be_removed_and_disabled():
    loss, x, w = graph()
    session = gradviz.debug.backward(loss)
    bp = session.break_on(function="TanhBackward0")
    bp.enabled = False
    other = session.break_on(event="saved_released")
    other.remove()
    session.continue_()
    assert session.status == "finished" and bp.hits == 0 and len(session.breakpoints) == 1


def test_bad_breakpoints_are_refused_with_a_clear_message():
    x = gradviz.tensor([1.0], requires_grad=True)
    session = gradviz.debug.backward((x * 2).sum())
    with pytest.raises(ValueError, match="needs at least one of"):
        session.break_on()
    with pytest.raises(ValueError, match="must be one of"):
        session.break_on(event="node_exploded")
    with pytest.raises(TypeError, match="takes a custom autograd.Function class"):
        session.break_on(function=3)
    assert isinstance(session.break_on(event="node_ready"), Breakpoint)


# ---- inspection -------------------------------------------------------------------------

def test_node_inspection_and_full_tensors():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2
    y = (a * a).sum()
    mul_sq = y.grad_fn.next_functions[0][0]
    mul_sq.register_hook(lambda grad_inputs, grad_outputs: None)
    session = gradviz.debug.backward(y)
    session.step()  # SumBackward0
    info = session.node(mul_sq.node_id)
    assert info["state"] == "ready" and info["pending_buffer"][0]["shape"] == [2]
    assert [s["label"] for s in info["saved"]] == ["input 0", "input 1"]
    assert all(s["held"] for s in info["saved"])
    assert info["hooks"]["post"] and info["grads_in"] is None
    np.testing.assert_allclose(session.tensor(mul_sq.node_id, "buffer", 0).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(session.tensor(mul_sq.node_id, "saved", 0).detach().numpy(), [2.0, 4.0])
    session.step()  # a * a
    info = session.node(mul_sq.node_id)
    assert info["state"] == "released" and not any(s["held"] for s in info["saved"])
    assert info["grads_out"][0]["values"] == [2.0, 4.0]
    assert info["hook_runs"][0]["kind"] == "posthook" and not info["hook_runs"][0]["replaced"]
    np.testing.assert_allclose(session.tensor(mul_sq.node_id, "grads_out", 1).numpy(), [2.0, 4.0])
    with pytest.raises(LookupError, match="released after it ran"):
        session.tensor(mul_sq.node_id, "saved", 0)
    with pytest.raises(LookupError, match="has not run yet"):
        session.tensor(x.grad_fn.node_id if x.grad_fn else session.graph()["nodes"][-1]["id"], "grads_out")
    with pytest.raises(ValueError, match="must be one of"):
        session.tensor(mul_sq.node_id, "weights")
    with pytest.raises(KeyError):
        session.node(10 ** 9)


def test_node_shows_the_forward_line_when_recorded():
    x = gradviz.tensor([1.0], requires_grad=True)
    with gradviz.record():
        y = (x * 5).sum()  # forward line
    session = gradviz.debug.backward(y)
    mul = y.grad_fn.next_functions[0][0]
    assert session.node(mul.node_id)["source"]["code"] == "y = (x * 5).sum()  # forward line"


def test_materialized_and_hook_changes_are_shown():
    class Two(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + g2

    x = gradviz.tensor([1.0], requires_grad=True)
    first, _ = Two.apply(x)
    y = first.sum()
    node = first.grad_fn
    node.register_prehook(lambda grads: (grads[0] * 10, grads[1]))
    session = gradviz.debug.backward(y)
    session.run_to(node)
    session.step()
    info = session.node(node.node_id)
    assert info["materialized"] == [1]
    (run,) = info["hook_runs"]
    assert run["kind"] == "prehook" and run["replaced"] and run["after"][0]["values"] == [10.0]
    np.testing.assert_allclose(session.tensor(node.node_id, "grads_received", 0).numpy(), [10.0])


# ---- memory, faults, abort --------------------------------------------------------------

def test_session_without_retain_graph_frees_saved_tensors_like_plain_backward():
    def build():
        x = gradviz.tensor(np.linspace(0.1, 1.0, 1000), requires_grad=True)
        h = x.exp()                      # ExpBackward0 saves h (its output)
        k = x * 3.0
        return (h * k).sum(), x, weakref.ref(k)

    def saved_counts(y):
        nodes, stack, seen = [], [y.grad_fn], set()
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            nodes.append((n.name(), n._released))
            stack.extend(m for m, _ in n.next_functions)
        return sorted(nodes)

    y1, x1, k1 = build()
    y1.backward()
    y2, x2, k2 = build()
    session = gradviz.debug.backward(y2)
    session.continue_()
    assert saved_counts(y1) == saved_counts(y2)
    assert {name for name, released in saved_counts(y2) if released} >= {
        "ExpBackward0", "MulBackward0"}
    gc.collect()
    assert (k1() is None) == (k2() is None) is True  # the saved k was freed by both
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y2.backward()
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy())


def test_fault_in_a_hook_is_an_error_event_and_the_session_stays_inspectable():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    exp_node = y.grad_fn.next_functions[0][0].next_functions[0][0]

    def bad_hook(grads):
        raise KeyError("hook failed")

    exp_node.register_prehook(bad_hook)
    session = gradviz.debug.backward(y)
    with pytest.raises(KeyError, match="hook failed"):
        session.continue_()
    assert session.status == "error"
    info = session.node(exp_node.node_id)
    assert info["state"] == "error" and info["error"]["exception"] == "KeyError"
    assert session.events[-1]["kind"] == "error"
    assert session.step() is None and session.step_event() is None
    # the engine is consistent: a new backward works
    z = gradviz.tensor([3.0], requires_grad=True)
    (z * z).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [6.0])


def test_abort_mid_node_display_leaves_the_engine_consistent():
    loss, x, w = graph()
    session = gradviz.debug.backward(loss)
    session.step()
    session.step_event()
    session.abort()
    assert session.status == "aborted" and session.current is None
    assert session.step() is None
    loss2, x2, w2 = graph()
    loss2.backward()
    assert x2.grad is not None


def test_trace_of_a_session_replays_identically(tmp_path):
    loss, x, w = graph()
    session = gradviz.debug.backward(loss)
    session.continue_()
    trace = session.trace()
    trace.save(tmp_path / "s.json")
    replay = gradviz.debug.replay(tmp_path / "s.json")
    replay.continue_()
    assert replay.events == session.events
    assert replay.node_states() == session.node_states()

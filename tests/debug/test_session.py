"""``gradviz.debug.backward``: a backward pass paused between nodes.

Stepping must be the engine's own order (the order of a plain ``backward()``, which is
torch's order), running it to the end must have exactly the effect of ``backward()`` (checked
against torch), and the session's view (states, graph, events) must describe the real graph.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch

import gradviz

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "torch_compare_for_debug", os.path.join(_HERE, "..", "engine", "torch_compare.py"))
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
assert_tensors_equal = _compare.assert_tensors_equal
node_name = _compare.node_name

SECOND_TIME = "Trying to backward through the graph a second time"
X = np.array([0.3, -0.7, 1.1])
W = np.array([1.2, 0.4, -0.5])


def program(m, x, w):
    h = (x * w).tanh()
    return (h * h + (w * 2.0).exp() * h + x.sin()).sum()


def leaves(m):
    return m.tensor(X, requires_grad=True), m.tensor(W, requires_grad=True)


def reachable(root):
    """All nodes below ``root`` (``next_functions`` walk), root first."""
    nodes, stack = [], [root]
    while stack:
        node = stack.pop()
        if node in nodes:
            continue
        nodes.append(node)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return nodes


def prehook_order(m, y):
    """Attach pre-hooks to every node of y's graph; the list fills as backward runs."""
    order = []
    for node in reachable(y.grad_fn):
        node.register_prehook(lambda go, n=node: order.append(n))
    return order


def torch_reference(retain_graph=False):
    x, w = leaves(torch)
    y = program(torch, x, w)
    order = prehook_order(torch, y)
    y.backward(retain_graph=retain_graph)
    return [node_name(n) for n in order], x.grad, w.grad


def new_session(**kwargs):
    x, w = leaves(gradviz)
    y = program(gradviz, x, w)
    return gradviz.debug.backward(y, **kwargs), x, w, y


# ---- pausing and stepping ----------------------------------------------------------------

def test_session_starts_paused_before_the_first_node():
    x, w = leaves(gradviz)
    y = program(gradviz, x, w)
    ran = prehook_order(gradviz, y)
    session = gradviz.debug.backward(y)
    assert session.status == "paused"
    assert not session.finished
    assert ran == []
    assert session.current == y.grad_fn.node_id
    assert x.grad is None and w.grad is None
    states = session.node_states()
    assert states[y.grad_fn.node_id] == "ready"
    assert all(s == "pending" for node_id, s in states.items() if node_id != y.grad_fn.node_id)
    assert [e["kind"] for e in session.events][:1] == ["backward_started"]


def test_step_runs_one_node_in_the_order_of_plain_backward_and_torch():
    th_order, _, _ = torch_reference()

    # plain gradviz backward, recorded with pre-hooks
    x, w = leaves(gradviz)
    y = program(gradviz, x, w)
    plain = prehook_order(gradviz, y)
    y.backward()

    x2, w2 = leaves(gradviz)
    y2 = program(gradviz, x2, w2)
    ran = prehook_order(gradviz, y2)
    session = gradviz.debug.backward(y2)
    stepped = []
    while True:
        expected_next = session.current
        before = len(ran)
        node = session.step()
        if node is None:
            break
        assert len(ran) == before + 1, "step() must run exactly one node"
        assert ran[-1] is node and node.node_id == expected_next
        stepped.append(node_name(node))
    assert stepped == [node_name(n) for n in plain] == th_order
    assert session.status == "finished" and session.finished and session.current is None


def test_node_states_move_forward_only():
    session, x, w, y = new_session()
    order = {"pending": 0, "ready": 1, "running": 2, "done": 3, "released": 3}
    previous = session.node_states()
    ready_ids = {n.node_id for n in session._task.ready_nodes()}
    while True:
        node = session.step()
        states = session.node_states()
        assert set(states.values()) <= {"pending", "ready", "done", "released"}
        for node_id, state in states.items():
            assert order[state] >= order[previous[node_id]], (node_id, previous[node_id], state)
        if node is None:
            break
        assert states[node.node_id] in ("done", "released")
        ready_ids = {n.node_id for n in session._task.ready_nodes()}
        for node_id in ready_ids:
            assert states[node_id] == "ready"
        previous = states
    assert all(s in ("done", "released") for s in session.node_states().values())


def test_nodes_with_saved_tensors_end_released_unless_retained():
    session, x, w, y = new_session()
    session.continue_()
    states = session.node_states()
    by_name = {}
    for node in reachable(y.grad_fn):
        by_name.setdefault(node_name(node), set()).add(states[node.node_id])
    assert by_name["TanhBackward0"] == {"released"}      # saves its result
    assert by_name["SumBackward0"] == {"done"}           # saves no tensor
    assert by_name["AccumulateGrad"] == {"done"}

    retained, _, _, y2 = new_session(retain_graph=True)
    retained.continue_()
    assert set(retained.node_states().values()) == {"done"}


# ---- the effect of running to the end ---------------------------------------------------

def test_continue_gives_the_grads_of_plain_backward_and_torch():
    _, th_x, th_w = torch_reference()
    session, x, w, _ = new_session()
    session.step()
    session.step()
    session.continue_()
    assert session.status == "finished"
    xp, wp = leaves(gradviz)
    program(gradviz, xp, wp).backward()
    for gv, plain, th in ((x.grad, xp.grad, th_x), (w.grad, wp.grad, th_w)):
        assert_tensors_equal(gv, th)
        assert_tensors_equal(plain, th)


def test_session_without_retain_graph_frees_like_backward():
    session, x, w, y = new_session()
    session.continue_()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        y.backward()
    # torch agrees that this graph cannot be run twice
    tx, tw = leaves(torch)
    ty = program(torch, tx, tw)
    ty.backward()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        ty.backward()


def test_session_with_retain_graph_allows_a_second_backward():
    _, th_x, th_w = torch_reference()
    session, x, w, y = new_session(retain_graph=True)
    session.continue_()
    y.backward()
    assert_tensors_equal(x.grad, th_x * 2)
    assert_tensors_equal(w.grad, th_w * 2)


def test_session_with_gradient_and_multiple_roots():
    def run(m, session):
        x, w = leaves(m)
        a, b = x * w, (x + w).exp()
        grads = [m.tensor([1.0, 2.0, 3.0], dtype=m.float64), m.ones(3, dtype=m.float64)]
        if session:
            s = gradviz.debug.backward([a, b], grads)
            while s.step() is not None:
                pass
            assert s.status == "finished"
        else:
            m.autograd.backward([a, b], grads)
        return x.grad, w.grad

    for gv, th in zip(run(gradviz, True), run(torch, False)):
        assert_tensors_equal(gv, th)


def test_multiple_roots_session_steps_only_nodes_of_the_graph_in_torch_order():
    def build(m):
        x, w = leaves(m)
        h = x * w
        return [h.sin().sum(), (h * x).sum(), w.exp().sum()]

    th_roots = build(torch)
    th_order = []
    for node in {n for r in th_roots for n in reachable(r.grad_fn)}:
        node.register_prehook(lambda go, n=node: th_order.append(node_name(n)))
    torch.autograd.backward(th_roots)

    roots = build(gradviz)
    session = gradviz.debug.backward(roots)
    graph_ids = {n["id"] for n in session.graph()["nodes"]}
    assert sorted(session.graph()["roots"]) == sorted(r.grad_fn.node_id for r in roots)
    assert session.status == "paused"
    stepped = []
    while session.current is not None:
        assert session.current in graph_ids
        stepped.append(node_name(session.step()))
    assert stepped == th_order
    assert session.status == "finished"


def test_session_rejects_what_backward_rejects():
    x = gradviz.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        gradviz.debug.backward(x * 2.0)
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        gradviz.debug.backward(gradviz.tensor(X).sum())


# ---- abort and errors --------------------------------------------------------------------

def test_abort_leaves_the_engine_usable():
    _, th_x, th_w = torch_reference()
    session, x, w, y = new_session(retain_graph=True)
    session.step()
    session.step()
    session.abort()
    assert session.status == "aborted"
    assert session.step() is None
    assert gradviz.is_grad_enabled()
    assert x.grad is None and w.grad is None  # AccumulateGrad nodes did not run yet
    y.backward()                              # the same graph, retained: works
    assert_tensors_equal(x.grad, th_x)
    assert_tensors_equal(w.grad, th_w)
    # and an unrelated backward afterwards works too
    x3, w3 = leaves(gradviz)
    program(gradviz, x3, w3).backward()
    assert_tensors_equal(x3.grad, th_x)


def test_abort_without_retain_graph_then_new_graph():
    _, th_x, th_w = torch_reference()
    session, x, w, y = new_session()
    while session.step() is not None:
        if x.grad is not None or w.grad is not None:
            break
    session.abort()
    x.grad = w.grad = None
    y2 = program(gradviz, x, w)
    y2.backward()
    assert_tensors_equal(x.grad, th_x)
    assert_tensors_equal(w.grad, th_w)


def failing_function(m):
    class Fails(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward failed on purpose")
    return Fails


def test_exception_in_custom_backward_marks_the_node_and_propagates():
    x = gradviz.tensor(X, requires_grad=True)
    h = failing_function(gradviz).apply(x.exp())
    y = (h * 3.0).sum()
    session = gradviz.debug.backward(y)
    with pytest.raises(ValueError, match="backward failed on purpose"):
        session.continue_()
    assert session.status == "error"
    assert isinstance(session.error, ValueError)
    states = session.node_states()
    assert states[h.grad_fn.node_id] == "error"
    assert states[y.grad_fn.node_id] in ("done", "released")
    exp_node = h.grad_fn.next_functions[0][0]
    assert states[exp_node.node_id] == "pending"
    assert session.step() is None
    kinds = [e["kind"] for e in session.events]
    assert kinds[-1] == "error"
    assert gradviz.is_grad_enabled()
    # torch propagates the same exception from plain backward
    tx = torch.tensor(X, requires_grad=True)
    with pytest.raises(ValueError, match="backward failed on purpose"):
        (failing_function(torch).apply(tx.exp()) * 3.0).sum().backward()
    # the engine still works
    x2 = gradviz.tensor(X, requires_grad=True)
    (x2 * x2).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), 2 * X)


def test_exception_when_stepping_propagates_from_step():
    x = gradviz.tensor(X, requires_grad=True)
    y = failing_function(gradviz).apply(x).sum()
    session = gradviz.debug.backward(y)
    session.step()  # SumBackward0
    with pytest.raises(ValueError):
        session.step()
    assert session.status == "error"
    assert session.node_states()[y.grad_fn.next_functions[0][0].node_id] == "error"


# ---- the graph and the events -----------------------------------------------------------

def edge_multiset(root):
    edges = []
    for node in reachable(root):
        for next_node, input_nr in node.next_functions:
            if next_node is not None:
                edges.append((node_name(node), node_name(next_node), input_nr))
    return sorted(edges)


def test_graph_matches_next_functions_and_torch():
    session, x, w, y = new_session()
    graph = session.graph()
    real = reachable(y.grad_fn)
    assert sorted(n["id"] for n in graph["nodes"]) == sorted(n.node_id for n in real)
    names = {n.node_id: node_name(n) for n in real}
    for info in graph["nodes"]:
        assert info["name"].replace("torch::autograd::", "") == names[info["id"]]
    expected_edges = sorted((n.node_id, nxt.node_id, nr) for n in real
                            for nxt, nr in n.next_functions if nxt is not None)
    assert sorted((e["source"], e["target"], e["input_nr"]) for e in graph["edges"]) == expected_edges
    assert graph["roots"] == [y.grad_fn.node_id]

    tx, tw = leaves(torch)
    th_y = program(torch, tx, tw)
    shown = sorted((names[e["source"]], names[e["target"]], e["input_nr"]) for e in graph["edges"])
    assert shown == edge_multiset(th_y.grad_fn)


def test_events_come_in_a_sane_order():
    session, x, w, y = new_session()
    session.step()
    session.continue_()
    events = session.events
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "backward_started"
    assert kinds[-1] == "backward_finished"
    assert kinds.count("backward_started") == 1 and kinds.count("backward_finished") == 1
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    started, finished, ready = {}, {}, {}
    for index, event in enumerate(events):
        node = event["node"]
        if event["kind"] == "node_ready":
            ready.setdefault(node, index)
        elif event["kind"] == "node_started":
            assert node not in started, "a node started twice"
            started[node] = index
        elif event["kind"] == "node_finished":
            assert node in started, "finished before it started"
            finished[node] = index
    assert set(started) == set(finished) == set(session.node_states())
    for node in started:
        assert ready[node] < started[node] < finished[node]
    # one node at a time: no node starts before the previous one finished
    spans = sorted((started[n], finished[n]) for n in started)
    for (_, f1), (s2, _) in zip(spans, spans[1:]):
        assert f1 < s2


def test_listeners_are_called_after_each_step_with_the_new_state():
    session, x, w, y = new_session()
    seen = []

    def listener(s):
        seen.append((s.status, dict(s.node_states())))

    handle = session.add_listener(listener)
    node = session.step()
    assert len(seen) == 1
    assert seen[0][1][node.node_id] in ("done", "released")
    session.step()
    assert len(seen) == 2
    handle.remove()
    session.step()
    assert len(seen) == 2
    session.add_listener(listener)
    session.continue_()
    assert seen[-1][0] == "finished"


def test_version_check_error_during_a_session_marks_the_node():
    x = gradviz.tensor(X, requires_grad=True)
    a = x * 2.0
    b = a * a            # MulBackward0 saves a
    y = b.sum()
    with gradviz.no_grad():
        a.add_(1.0)
    session = gradviz.debug.backward(y)
    session.step()       # SumBackward0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        session.step()
    assert session.status == "error"
    assert session.node_states()[b.grad_fn.node_id] == "error"
    # torch raises the same error from plain backward
    tx = torch.tensor(X, requires_grad=True)
    ta = tx * 2.0
    tb = ta * ta
    with torch.no_grad():
        ta.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tb.sum().backward()


def test_debugging_a_freed_graph_warns_up_front_and_names_the_fix():
    # A notebook re-runs the cell with debug.backward(loss) but not the forward cell: the
    # graph's saved tensors are gone. torch fails on the second backward; the session would
    # open paused, so it warns at once, naming the freed nodes and both ways out.
    session, x, w, y = new_session()
    session.continue_()
    with pytest.warns(UserWarning, match="saved tensors were freed") as caught:
        again = gradviz.debug.backward(y)
    message = str(caught[0].message)
    assert "retain_graph=True" in message and "forward" in message
    assert caught[0].filename == __file__  # points at the caller's line, not at gradviz
    import re
    assert re.search(r"\(\d+ nodes: \w+Backward0 #\d+", message)  # names the freed nodes
    assert "AccumulateGrad" not in message  # saves nothing: a second pass through it is fine
    # ... and what it announces happens, as in torch
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        again.continue_()
    tx, tw = leaves(torch)
    ty = program(torch, tx, tw)
    ty.backward()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        ty.backward()


def test_debugging_a_fresh_or_retained_graph_does_not_warn():
    import warnings as _warnings
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        session, x, w, y = new_session(retain_graph=True)
        session.continue_()
        gradviz.debug.backward(y).continue_()  # retained: a second pass is fine
        plain = gradviz.tensor(X, requires_grad=True)
        loss = (plain + 1.0).sum()   # saves nothing: a second pass is fine, as in torch
        loss.backward()
        gradviz.debug.backward(loss).continue_()


@pytest.mark.parametrize("events_first", [1, 2, 3, 4, 5, 6, 7, 8])
def test_step_after_step_event_returns_the_node_in_progress_never_none(events_first):
    """A user steps some events, then a node: step() returns the node it finished (the one
    whose events were partly shown, even past its node_started/node_finished), in torch's
    order, and None only at the very end."""
    th_order, _, _ = torch_reference()
    x, w = leaves(gradviz)
    session = gradviz.debug.backward(program(gradviz, x, w))
    started = []
    for _ in range(events_first):
        event = session.step_event()
        if event["kind"] == "node_started":
            started.append(session.node(event["node"])["name"])
    stepped = []
    while not session.finished:
        node = session.step()
        assert node is not None, f"step() returned None mid-pass (status {session.status})"
        stepped.append(node_name(node))
    # the first step() finishes the node whose events were shown, so the full sequence of nodes
    # run is the node_started ones seen by step_event plus the steps, with one overlap
    if started and stepped[0] == started[-1]:
        started = started[:-1]
    assert started + stepped == th_order
    assert session.step() is None


@pytest.mark.parametrize("roots", [1, 2])
def test_the_session_graph_from_the_recorders_walk_is_the_graph_of_a_walk_of_its_own(
        roots, monkeypatch):
    """A session takes its graph from the walk its recorder made at backward_started (one
    root); it must be exactly the graph a walk of its own gives, module paths, leaf names and
    numbers included."""
    from gradviz.debug import _session

    model = gradviz.nn.Sequential(gradviz.nn.Linear(3, 4), gradviz.nn.Tanh(), gradviz.nn.Linear(4, 2))
    x = gradviz.randn(5, 3)
    out = model(x)
    tensors = out.sum() if roots == 1 else [out[:, 0].sum(), out[:, 1].sum()]
    shared = gradviz.debug.backward(tensors, retain_graph=True, params=model)
    walked = []

    def own_walk(task, recorder):
        recorder.first_walk = None
        walked.append(task)
        nodes, edges, roots, live = _session.walk_graph(task.graph_root)
        return (nodes, edges, roots), live

    monkeypatch.setattr(_session, "_session_graph", own_walk)
    own = gradviz.debug.backward(tensors, retain_graph=True, params=model)
    assert walked
    assert shared.graph() == own.graph()
    assert any(node.get("module") for node in shared.graph()["nodes"])
    assert any(node.get("leaf_name") == "0.weight" for node in shared.graph()["nodes"])

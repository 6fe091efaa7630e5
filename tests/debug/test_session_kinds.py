"""The three session kinds answer the same commands the same way for the same backward pass.

``DebugSession`` (``gradviz.debug.backward``), ``ReplaySession`` (a trace of that pass) and
``CallSession`` (``gradviz.debug.runcall`` of code calling ``backward()``) are driven with
``step_event()`` to every position of the pass, then given one command: ``step()``,
``step_event()``, ``continue_()`` (with a node or an event breakpoint) or ``run_to()``. Each
kind must return the same node (or event) and show the same events, states and status as the
live session; the node order of a pass stepped from the start is PyTorch's, and the gradients
at the end are PyTorch's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.debug import CallSession, ReplaySession

T = 30  # seconds for each runcall command; a healthy one takes milliseconds
X = np.array([0.5, -1.0, 2.0])
W = np.array([1.5, 2.0, -0.5])
KINDS = ("live", "replay", "call")


def program(m, x, w):
    h = (x * w).tanh()
    return (h * h + x.exp()).sum()


def leaves(m):
    return m.tensor(X, requires_grad=True), m.tensor(W, requires_grad=True)


def torch_reference():
    """Node names in PyTorch's execution order (node pre-hooks), and the leaves' gradients."""
    x, w = leaves(torch)
    loss = program(torch, x, w)
    order, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grads, n=node: order.append(
            n.name().removeprefix("torch::autograd::")))
        stack.extend(n for n, _ in node.next_functions if n is not None)
    loss.backward()
    return order, x.grad.numpy(), w.grad.numpy()


def open_session(kind):
    """A session of the pass, paused before its first node, and the leaves (x, w)."""
    x, w = leaves(gradviz)
    if kind == "live":
        return gradviz.debug.backward(program(gradviz, x, w)), (x, w)
    if kind == "replay":
        live = gradviz.debug.backward(program(gradviz, x, w))
        live.continue_()
        x.grad = w.grad = None  # the replay itself changes nothing
        return ReplaySession(live.trace()), (x, w)
    session = gradviz.debug.runcall(lambda: program(gradviz, x, w).backward(),
                                    stop_at_first_node=True, timeout=T)
    return session, (x, w)


def command(session, name, *args):
    method = getattr(session, name)
    return method(*args, timeout=T) if isinstance(session, CallSession) else method(*args)


def close(session):
    if isinstance(session, CallSession) and not session.finished:
        session.abort(timeout=T)
        assert session.finished, "the runcall worker did not stop"


class Ranks:
    """Node ids differ between sessions (the call builds its own graph); a node's rank among
    the graph's ids (creation order) is the same for the same program."""

    def __init__(self, session):
        self.rank = {node_id: rank for rank, node_id in
                     enumerate(sorted(n["id"] for n in session.graph()["nodes"]))}

    def __call__(self, node):
        return None if node is None else self.rank[node_id(node)]


def node_id(node):
    """The id of what step() returns: a graph entry (replay) or a node (live, call)."""
    return node["id"] if isinstance(node, dict) else getattr(node, "node_id", node)


def snapshot(session, rank):
    """What the session shows, in rank terms (``current`` is compared separately)."""
    events = [(e["kind"], rank(e["node"]) if e["kind"] != "node_created" else None)
              for e in session.events if e["kind"] != "node_created"]
    states = {rank(node_id): state for node_id, state in session.node_states().items()}
    status = session.status
    if isinstance(session, CallSession) and status == "paused" and \
            events[-1][0] == "backward_finished":
        # the pass is over but the user's function is not: its worker pauses after the pass's
        # last event (it may run another pass), where a one-pass session says "finished"
        status = "finished"
    return events, states, status


def event_key(event, rank):
    return None if event is None else (event["kind"], rank(event["node"]))


def node_named(session, name):
    return next(n["id"] for n in session.graph()["nodes"] if n["name"] == name)


def answer(kind, position, name, *args):
    """Open a session of ``kind``, step_event() ``position`` times, then run ``name``.

    ``args`` may hold a node name (resolved to this session's id) or a breakpoint spec.
    Returns (what the command returned, snapshot after it), in rank terms.
    """
    session, _ = open_session(kind)
    try:
        rank = Ranks(session)
        for _ in range(position):
            command(session, "step_event")
        if name == "step":
            returned = rank(command(session, "step"))
        elif name == "step_event":
            returned = event_key(command(session, "step_event"), rank)
        elif name == "run_to":
            returned = command(session, "run_to", node_named(session, args[0]))
        else:  # continue_ with a breakpoint
            breakpoint = session.break_on(**args[0])
            returned = (command(session, "continue_"), breakpoint.hits,
                        session.stopped_at is breakpoint)
        return returned, snapshot(session, rank)
    finally:
        close(session)


def pass_length():
    session, _ = open_session("replay")
    return len(session.trace.events) - session.position


COMMANDS = {
    "step": ("step",),
    "step_event": ("step_event",),
    "continue_node_breakpoint": ("continue_", {"function": "TanhBackward0"}),
    "continue_event_breakpoint": ("continue_", {"event": "buffer_added"}),
    "run_to_tanh": ("run_to", "TanhBackward0"),
    "run_to_mul": ("run_to", "MulBackward0"),
    "run_to_first_leaf": ("run_to", "AccumulateGrad"),
}


@pytest.mark.parametrize("kind", ["replay", "call"])
@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_every_kind_answers_like_the_live_session_at_every_position(kind, command_name):
    """From every event position of the pass (0 ... all shown, and one step_event past the
    end), the command returns what the live session returns and leaves the same picture."""
    name, *args = COMMANDS[command_name]
    for position in range(pass_length() + 2):
        expected = answer("live", position, name, *args)
        got = answer(kind, position, name, *args)
        assert got == expected, (f"{kind} after {position} step_event(): {name}{tuple(args)} "
                                 f"gave {got[0]!r}, the live session {expected[0]!r}")


@pytest.mark.parametrize("kind", KINDS)
def test_step_event_then_step_returns_the_node_in_progress(kind):
    """After step_event() shows a node's node_finished, step() ends that node and returns it
    (not None, not the next node); stepping on from there follows PyTorch's order."""
    order, _, _ = torch_reference()
    session, _ = open_session(kind)
    try:
        rank = Ranks(session)
        names = {n["id"]: n["name"] for n in session.graph()["nodes"]}
        while True:
            event = command(session, "step_event")
            if event["kind"] == "node_finished":
                break
        finished = event["node"]
        node = command(session, "step")
        assert node is not None and rank(node) == rank(finished)
        stepped = [names[finished]]
        while (node := command(session, "step")) is not None:
            stepped.append(names[node_id(node)])
        assert stepped == order
    finally:
        close(session)


@pytest.mark.parametrize("kind", KINDS)
def test_stepping_from_the_start_follows_torch_and_ends_with_its_gradients(kind):
    order, x_grad, w_grad = torch_reference()
    session, (x, w) = open_session(kind)
    try:
        names = {n["id"]: n["name"] for n in session.graph()["nodes"]}
        stepped = []
        while (node := command(session, "step")) is not None:
            stepped.append(names[node_id(node)])
        assert stepped == order
        assert session.status == "finished" and command(session, "step") is None
        if kind != "replay":
            np.testing.assert_allclose(x.grad.numpy(), x_grad, rtol=1e-12)
            np.testing.assert_allclose(w.grad.numpy(), w_grad, rtol=1e-12)
    finally:
        close(session)

"""ReplaySession: a trace steps forward and backward in time and shows what the live session
showed at the same point."""

from __future__ import annotations

import gradviz
from gradviz.debug import ReplaySession
from gradviz.widget._widget import normalize_graph, normalize_states


def build():
    x = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([1.5, 2.0, -0.5], requires_grad=True)
    h = (x * w).tanh()
    return (h * h + x.exp()).sum()


def live_snapshots():
    """(events shown, node states, current) after each step of a live session."""
    loss = build()
    with gradviz.record():
        session = gradviz.debug.backward(loss)
    snapshots = [(len(session.events), session.node_states(), session.current, session.status)]
    while session.step() is not None:
        snapshots.append((len(session.events), session.node_states(), session.current, session.status))
    return session, snapshots


def test_replay_steps_through_the_same_states_as_the_live_session():
    session, snapshots = live_snapshots()
    replay = ReplaySession(session.trace())
    seen = [(replay.position, replay.node_states(), replay.current, replay.status)]
    while replay.step() is not None:
        seen.append((replay.position, replay.node_states(), replay.current, replay.status))
    assert seen == snapshots
    normalize_graph(replay.graph())          # the widget accepts what a replay reports
    normalize_states(replay.node_states())


def test_step_back_returns_to_earlier_states_exactly():
    session, snapshots = live_snapshots()
    replay = ReplaySession(session.trace())
    replay.continue_()
    assert replay.status == "finished"
    for position, states, current, status in reversed(snapshots[:-1]):
        node = replay.step_back()
        assert node is not None and node["id"] == current
        assert (replay.position, replay.node_states(), replay.current, replay.status) == \
            (position, states, current, status)
    assert replay.step_back() is None  # at the start


def test_step_event_forward_and_back():
    session, _ = live_snapshots()
    replay = ReplaySession(session.trace())
    start = replay.position
    first = replay.step_event()
    assert first["kind"] == "node_started" and replay.node_states()[first["node"]] == "running"
    assert replay.step_event_back() is first and replay.position == start
    replay.seek(len(replay.trace.events))
    assert replay.status == "finished" and replay.step_event() is None


def test_replay_breakpoints_and_listeners():
    session, _ = live_snapshots()
    replay = ReplaySession(session.trace())
    calls = []
    replay.add_listener(lambda s: calls.append(s.position))
    bp = replay.break_on(function="TanhBackward0")
    replay.continue_()
    assert replay.stopped_at is bp and replay.node(replay.current)["name"] == "TanhBackward0"
    assert replay.node_states()[replay.current] == "ready"
    assert calls and calls[-1] == replay.position
    replay.break_on(event="saved_released")
    replay.continue_()
    assert replay.events[-1]["kind"] == "saved_released"
    replay.restart()
    assert replay.position == ReplaySession(session.trace()).position


def test_replay_of_a_failed_pass_ends_in_error():
    class Broken(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("bad")

    x = gradviz.tensor([1.0], requires_grad=True)
    with gradviz.record() as trace:
        try:
            Broken.apply(x).sum().backward()
        except ValueError:
            pass
    replay = ReplaySession(trace)
    replay.continue_()
    assert replay.status == "error"
    failing = trace.events[-1]["node"]
    assert replay.node_states()[failing] == "error"
    assert replay.node(failing)["error"]["message"] == "bad"
    assert replay.node(failing)["source"]["function"] == "test_replay_of_a_failed_pass_ends_in_error"


def test_replay_shows_in_the_widget():
    from gradviz.widget import DebuggerWidget

    session, _ = live_snapshots()
    replay = ReplaySession(session.trace())
    widget = DebuggerWidget(replay)
    assert widget.status == "paused" and widget.current == replay.current
    replay.step()
    assert widget.current == replay.current
    widget.close()

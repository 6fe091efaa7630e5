"""Protocol 6's states deltas (Note [States on the wire]): on real sessions, the whole states
plus every delta equal ``node_states()`` after each command; gaps and new passes resync."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_widget import Recorder, browser_sends  # noqa: E402

import gradviz as torch  # noqa: E402
from gradviz.debug import ReplaySession  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402
from gradviz.widget._widget import delivered_edges, normalize_states  # noqa: E402


def branchy_loss() -> Any:
    """A graph with a fan-out, a shared leaf and released saved tensors."""
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    h = torch.tanh(w * 2.0 + b)
    return (h * h + h.exp() * w).sum()


class BrowserCopy:
    """What a view keeps: the whole traits as sent, plus the deltas applied in order."""

    def __init__(self, widget: DebuggerWidget, recorder: Recorder) -> None:
        self.widget, self.recorder = widget, recorder
        self.states = dict(widget.states)
        self.delivered = None if widget.delivered is None else list(widget.delivered)
        self.seq = widget.states_base
        self.read = 0  # messages consumed

    def follow(self) -> None:
        for message in self.recorder.messages[self.read:]:
            if message.get("method") == "update" and "states_base" in message["state"]:
                state = message["state"]
                self.states, self.delivered, self.seq = dict(state["states"]), list(state["delivered"]), state["states_base"]
            elif message.get("method") == "custom" and message["content"]["type"] == "states_delta":
                delta = message["content"]
                assert delta["seq"] == self.seq + 1, "a gap in the deltas"
                self.states.update(delta["states"])
                self.delivered.extend(delta["delivered"])
                self.seq = delta["seq"]
        self.read = len(self.recorder.messages)
        assert self.seq == self.widget.states_seq


def expected(session: Any) -> tuple[dict[str, str], list]:
    ids = frozenset(node["id"] for node in session.graph()["nodes"])
    return normalize_states(session.node_states()), delivered_edges(session.events, ids)


def test_deltas_applied_to_the_first_states_give_node_states_after_every_step() -> None:
    session = torch.debug.backward(branchy_loss())
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    view = BrowserCopy(widget, recorder)
    commands = ["step", "step_event", "step_event", "step", "step", "step_event", "step", "continue"]
    for name in commands:
        browser_sends(widget, {"type": "command", "name": name})
        view.follow()
        states, delivered = expected(session)
        assert view.states == states == widget.states, name
        assert view.delivered == delivered == widget.delivered, name
    assert session.status == "finished"
    deltas = recorder.deltas
    assert len(deltas) == len(commands)
    # Only what changed travels: never all nodes at once on a step.
    assert all(len(delta["states"]) < len(view.states) for delta in deltas[:-1])
    assert all("states" not in update for update in recorder.updates)


def test_a_session_stepped_from_python_sends_deltas_too() -> None:
    session = torch.debug.backward(branchy_loss())
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    view = BrowserCopy(widget, recorder)
    while session.status == "paused":
        session.step()
        view.follow()
        assert view.states == expected(session)[0]


def test_state_changes_cover_every_change_of_node_states() -> None:
    session = torch.debug.backward(branchy_loss())
    mark, changes = session.state_changes()
    assert changes is None  # no mark: read node_states()
    states = session.node_states()
    while session.status == "paused":
        session.step_event()
        mark, changes = session.state_changes(mark)
        states.update(changes)
        assert states == session.node_states()


def test_a_replay_going_back_sends_the_states_whole() -> None:
    live = torch.debug.backward(branchy_loss())
    live.continue_()
    session = ReplaySession(live.trace())
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    view = BrowserCopy(widget, recorder)
    for name in ["step", "step", "step_back", "step", "step_event"]:
        base = widget.states_base
        browser_sends(widget, {"type": "command", "name": name})
        view.follow()
        assert view.states == expected(session)[0]
        assert view.delivered == expected(session)[1]
        assert (widget.states_base != base) == (name == "step_back"), name
    browser_sends(widget, {"type": "command", "name": "seek", "position": 3})
    view.follow()
    assert view.states == expected(session)[0]


def test_a_second_backward_pass_in_runcall_sends_the_states_whole() -> None:
    def train(w: Any) -> Any:
        for _ in range(2):
            (torch.tanh(w) * w).sum().backward()
        return w.grad

    w = torch.tensor([1.0, 2.0], requires_grad=True)
    session = torch.debug.runcall(train, w, breakpoints=[{"function": "TanhBackward0"}])
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    view = BrowserCopy(widget, recorder)
    bases = {widget.states_base}
    while session.status == "paused":
        browser_sends(widget, {"type": "command", "name": "continue"})
        view.follow()
        assert view.states == expected(session)[0]
        bases.add(widget.states_base)
    assert session.status == "finished"
    assert len(bases) > 1  # the second pass (a new graph) came whole


def test_resync_sends_the_whole_states_with_a_new_base() -> None:
    session = torch.debug.backward(branchy_loss())
    widget = DebuggerWidget(session)
    session.step()
    session.step()
    recorder = Recorder(widget)
    seq = widget.states_seq
    browser_sends(widget, {"type": "resync"})
    assert recorder.acks == []
    (update,) = recorder.updates
    assert update["states"] == normalize_states(session.node_states())
    assert update["delivered"] == widget.delivered
    assert update["states_base"] == update["states_seq"] > seq
    # a view that missed deltas (it asked for the resync) now has everything
    view = BrowserCopy(widget, recorder)
    session.step()
    view.follow()
    assert view.states == expected(session)[0]


@pytest.mark.parametrize(
    ("content", "buffers", "reason"),
    [
        ({"type": "resync", "seq": 3}, None, "a resync message has the field type only (unexpected seq)"),
        ({"type": "resync", "states": {}, "x": 1}, None, "a resync message has the field type only (unexpected states, x)"),
        ({"type": "resync"}, [b"\x00"], "the resync message carries binary buffers; it carries none"),
        ({"type": "states_delta", "seq": 1, "states": {}, "delivered": []}, None,
         "unknown message type 'states_delta'; expected 'command'"),
    ],
)
def test_malformed_resync_messages_get_an_error_reply(content: Any, buffers: Any, reason: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    session = torch.debug.backward(branchy_loss())
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    with caplog.at_level(logging.WARNING, logger="gradviz.widget"):
        browser_sends(widget, content, buffers=buffers)
    assert recorder.acks == [{"type": "error", "reason": reason}]
    assert recorder.updates == [] and recorder.deltas == []
    assert any("ignoring" in record.getMessage() for record in caplog.records)

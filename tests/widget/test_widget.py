"""The Python half of the debugger widget, against a fake session (no browser, no kernel)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_fake_session import FakeSession  # noqa: E402

from gradviz.widget import (  # noqa: E402
    DebuggerWidget,
    _bundle,  # noqa: E402
    display_session,
)
from gradviz.widget._widget import (  # noqa: E402
    SessionProtocolError,
    compact_event,
    json_safe,
    normalize_graph,
    normalize_states,
)

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    """Captures what the widget sends to the browser (DummyComm sends nowhere)."""

    def __init__(self, widget: DebuggerWidget) -> None:
        self.messages: list[dict[str, Any]] = []
        widget.comm.send = self._send  # type: ignore[union-attr]

    def _send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.messages.append(data)

    @property
    def acks(self) -> list[dict[str, Any]]:
        """Acks and error replies (the custom messages other than states deltas)."""
        return [m["content"] for m in self.messages
                if m.get("method") == "custom" and m["content"].get("type") != "states_delta"]

    @property
    def deltas(self) -> list[dict[str, Any]]:
        return [m["content"] for m in self.messages
                if m.get("method") == "custom" and m["content"].get("type") == "states_delta"]

    @property
    def updates(self) -> list[dict[str, Any]]:
        return [m["state"] for m in self.messages if m.get("method") == "update"]


def browser_sends(widget: DebuggerWidget, content: Any, buffers: list[bytes] | None = None) -> None:
    """Deliver a custom message exactly as ipywidgets does when the browser sends one."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": buffers or []})


def run_count(widget: DebuggerWidget) -> int:
    return sum(state in ("done", "released") for state in widget.states.values())


@pytest.fixture
def session() -> FakeSession:
    return FakeSession.tiny()


@pytest.fixture
def widget(session: FakeSession) -> DebuggerWidget:
    widget = DebuggerWidget(session)
    yield widget
    widget.close()


# ---- building ---------------------------------------------------------------------------------


def test_widget_mirrors_the_session(widget: DebuggerWidget, session: FakeSession) -> None:
    assert [node["id"] for node in widget.graph["nodes"]] == [4, 3, 2, 1, 0]
    assert widget.graph["roots"] == [4]
    assert widget.states == {"4": "ready", "3": "pending", "2": "pending", "1": "pending", "0": "pending"}
    assert all(isinstance(key, str) for key in widget.states)
    assert widget.current == 4
    assert widget.status == "paused"
    assert widget.error is None
    assert widget.protocol_version == 6
    assert widget.commands == ["step", "continue"]  # all that FakeSession offers
    assert widget.selected is None and widget.inspection is None
    assert widget.last_event is None  # FakeSession has no event stream
    assert widget.session is session


def test_widget_ships_the_fresh_bundle(widget: DebuggerWidget) -> None:
    info = _bundle.bundle_info()
    assert info["fresh"], info
    assert widget._esm.startswith("// gradviz widget")
    assert info["sha256"] in widget._esm.splitlines()[0]
    assert "export default" in widget._esm or "export {" in widget._esm


def test_python_and_the_view_speak_the_same_protocol_version() -> None:
    import re

    from gradviz.widget._widget import PROTOCOL_VERSION

    model_ts = (REPO / "labextension" / "src" / "model.ts").read_text()
    match = re.search(r"export const PROTOCOL_VERSION = (\d+);", model_ts)
    assert match is not None
    assert int(match.group(1)) == PROTOCOL_VERSION


def test_graph_is_normalized_to_plain_json() -> None:
    import numpy
    raw = {
        "nodes": [{"id": numpy.int64(1), "name": "A", "kind": "builtin", "label": "a"}],
        "edges": [],
        "roots": [numpy.int64(1)],
    }
    graph = normalize_graph(raw)
    assert graph == {"nodes": [{"id": 1, "name": "A", "kind": "builtin", "label": "a"}], "edges": [], "roots": [1]}
    assert type(graph["nodes"][0]["id"]) is int
    json.dumps(graph)


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        ([], "must return a dict"),
        ({"nodes": [{"id": -1, "name": "A", "kind": "builtin", "label": ""}]}, "non-negative int"),
        ({"nodes": [{"id": True, "name": "A", "kind": "builtin", "label": ""}]}, "non-negative int"),
        ({"nodes": [{"id": 1, "name": "A", "kind": "leaf", "label": ""}]}, r"\['kind'\] must be one of"),
        ({"nodes": [{"id": 1, "name": "A", "kind": "builtin", "label": ""}] * 2}, "used by two nodes"),
        ({"nodes": [], "edges": [{"source": 1, "target": 2, "input_nr": 0}]}, "must join two node ids"),
        ({"nodes": [], "roots": [3]}, "must list node ids"),
    ],
)
def test_bad_graphs_are_named(raw: Any, phrase: str) -> None:
    with pytest.raises(SessionProtocolError, match=phrase):
        normalize_graph(raw)


def test_bad_states_are_named() -> None:
    assert normalize_states({3: "done"}) == {"3": "done"}
    with pytest.raises(SessionProtocolError, match="must be one of"):
        normalize_states({3: "finished"})
    with pytest.raises(SessionProtocolError, match="not a node id"):
        normalize_states({"3": "done"})


# ---- commands from the browser ----------------------------------------------------------------


def test_step_command_runs_one_node_and_acks(widget: DebuggerWidget, session: FakeSession) -> None:
    recorder = Recorder(widget)
    for expected in range(1, 5):
        browser_sends(widget, {"type": "command", "name": "step"})
        assert run_count(widget) == expected
        assert session.steps_run == expected
    assert widget.current == 0
    assert widget.states["4"] == "released"
    assert widget.states["1"] == "done"
    assert recorder.acks == [{"type": "ack", "name": "step", "ok": True, "reason": None}] * 4
    # Each step is a states_delta, then one update message carrying its number (states_seq)
    # and the new current node together (protocol 6, Note [States on the wire]).
    assert len(recorder.updates) == 4 == len(recorder.deltas)
    assert all({"states_seq", "current"} <= set(update) for update in recorder.updates)
    kinds = [m["content"]["type"] if m["method"] == "custom" else "update" for m in recorder.messages]
    assert kinds == ["states_delta", "update", "ack"] * 4


def test_continue_command_runs_to_the_end(widget: DebuggerWidget) -> None:
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "continue"})
    assert widget.status == "finished"
    assert widget.current is None
    assert run_count(widget) == 5
    assert recorder.acks[-1]["ok"] is True
    # A finished session refuses further commands, politely.
    browser_sends(widget, {"type": "command", "name": "step"})
    assert recorder.acks[-1] == {"type": "ack", "name": "step", "ok": False, "reason": "the session is finished"}
    assert widget.error is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("step", "a message must be an object, got str 'step'"),
        (None, "a message must be an object, got NoneType None"),
        ([1, 2], "a message must be an object, got list [1, 2]"),
        ({}, "unknown message type None; expected 'command'"),
        ({"type": "cmd", "name": "step"}, "unknown message type 'cmd'; expected 'command'"),
        ({"type": "command"}, "unknown command None; known: "),
        ({"type": "command", "name": "rm -rf"}, "unknown command 'rm -rf'; known: "),
        ({"type": "command", "name": ["step"]}, "unknown command ['step']; known: "),
        ({"type": "command", "name": "__init__"}, "unknown command '__init__'; known: "),
        ({"type": "command", "name": "continue_"}, "unknown command 'continue_'; known: "),
        ({"type": "command", "name": "step", "extra": 1}, "a step command has the fields name, type (unexpected extra)"),
        ({"type": "command", "name": "step", "node": 3}, "a step command has the fields name, type (unexpected node)"),
        ({"type": "command", "name": "run_to"}, "a run_to command has the fields name, node, type (missing node)"),
        ({"type": "command", "name": "run_to", "node": None}, "a run_to command's node must be a node id (an integer >= 0), got None"),
        ({"type": "command", "name": "run_to", "node": "3"}, "a run_to command's node must be a node id (an integer >= 0), got '3'"),
        ({"type": "command", "name": "run_to", "node": 3.0}, "a run_to command's node must be a node id (an integer >= 0), got 3.0"),
        ({"type": "command", "name": "run_to", "node": True}, "a run_to command's node must be a node id (an integer >= 0), got True"),
        ({"type": "command", "name": "run_to", "node": -1}, "a run_to command's node must be a node id (an integer >= 0), got -1"),
        ({"type": "command", "name": "select"}, "a select command has the fields name, node, type (missing node)"),
        ({"type": "command", "name": "select", "node": [3]}, "a select command's node must be a node id or null, got [3]"),
        ({"type": "command", "name": "select", "node": 3, "extra": 1}, "a select command has the fields name, node, type (unexpected extra)"),
        ({"type": "command", "name": "step_event_back"}, "unknown command 'step_event_back'; known: "),
        ({"type": "command", "name": "_refresh"}, "unknown command '_refresh'; known: "),
        ({"type": "command", "name": "seek"}, "a seek command has the fields name, position, type (missing position)"),
        ({"type": "command", "name": "seek", "position": "2"}, "a seek command's position must be an integer >= 0, got '2'"),
        ({"type": "command", "name": "seek", "position": -2}, "a seek command's position must be an integer >= 0, got -2"),
        ({"type": "command", "name": "seek", "position": 2, "node": 1}, "a seek command has the fields name, position, type (unexpected node)"),
    ],
)
def test_malformed_messages_get_an_error_reply_and_change_nothing(
    widget: DebuggerWidget, session: FakeSession, content: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(widget)
    before = dict(widget.states)
    with caplog.at_level(logging.WARNING, logger="gradviz.widget"):
        browser_sends(widget, content)
    assert session.steps_run == 0
    assert widget.states == before
    assert widget.error is None
    # One reply, of type "error" (not an ack: nothing ran), saying what is wrong.
    assert len(recorder.acks) == 1
    reply = recorder.acks[0]
    assert reply["type"] == "error" and set(reply) == {"type", "reason"}
    assert reply["reason"].startswith(reason), reply["reason"]
    if "known: " in reason:
        assert reply["reason"].endswith("step, step_event, continue, run_to, step_back, abort, check_gradients, select, seek")
    assert [update for update in recorder.updates if set(update) - {"history_position"}] == []
    assert any("ignoring" in record.getMessage() for record in caplog.records)


def test_commands_with_buffers_are_refused(widget: DebuggerWidget, session: FakeSession) -> None:
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "step"}, buffers=[b"\x00"])
    assert session.steps_run == 0
    assert recorder.acks == [{"type": "error", "reason": "the step command carries binary buffers; commands carry none"}]


def test_a_stop_at_a_breakpoint_is_named_until_the_next_step() -> None:
    import gradviz as torch

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    session = torch.debug.backward((x.exp() * 2).sum())
    widget = DebuggerWidget(session)
    assert widget.stopped_at is None  # paused before the first node: no breakpoint involved
    session.break_on(function="ExpBackward0")
    browser_sends(widget, {"type": "command", "name": "continue"})
    assert widget.status == "paused"
    assert widget.graph["nodes"][[n["id"] for n in widget.graph["nodes"]].index(widget.current)]["name"] == "ExpBackward0"
    assert widget.stopped_at == "breakpoint on ExpBackward0"
    browser_sends(widget, {"type": "command", "name": "step"})
    assert widget.stopped_at is None
    widget.close()


def test_an_exception_in_a_command_is_shown_not_lost() -> None:
    session = FakeSession.tiny(fail_at=3)
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "step"})
    browser_sends(widget, {"type": "command", "name": "step"})  # node 3 raises
    assert widget.status == "error"
    assert widget.states["3"] == "error"
    assert widget.error is not None
    # The exception's line first: the box shows a few lines, and a traceback ends with it.
    first_line = widget.error.splitlines()[0]
    assert first_line == "ValueError: custom backward of node 3 returned a gradient of the wrong shape"
    assert "Traceback" in widget.error
    assert recorder.acks[-1]["ok"] is False
    assert recorder.acks[-1]["reason"].startswith("ValueError:")
    widget.close()


def test_an_exception_while_reading_the_session_is_shown(widget: DebuggerWidget, session: FakeSession) -> None:
    def broken() -> dict[int, str]:
        raise KeyError("states are gone")

    session.node_states = broken  # type: ignore[method-assign]
    session.step()  # notifies the widget, which cannot read the states
    assert widget.error is not None and "KeyError" in widget.error


def test_a_session_reporting_nonsense_is_shown(widget: DebuggerWidget, session: FakeSession) -> None:
    session.status = "exploded"
    session._notify()
    assert widget.error is not None and "session.status must be one of" in widget.error
    assert widget.status == "paused"  # the last good state stays on screen


# ---- inspector, narration and the session's own commands --------------------------------------


def _real_session() -> Any:
    """loss = (tanh(x * w) * w).sum() on gradviz's own engine: 5 nodes, w used twice."""
    import gradviz as torch

    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    return torch.debug.backward((torch.tanh(x * w) * w).sum())


def _replay_session() -> Any:
    import gradviz as torch

    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    with torch.record() as trace:
        (torch.tanh(x * w) * w).sum().backward()
    return torch.debug.ReplaySession(trace)


def _node_named(widget: DebuggerWidget, name: str) -> int:
    return next(node["id"] for node in widget.graph["nodes"] if node["name"] == name)


def _strict_json(value: Any) -> Any:
    return json.loads(json.dumps(value, allow_nan=False))


def test_commands_offered_follow_the_session() -> None:
    live, replay = DebuggerWidget(_real_session()), DebuggerWidget(_replay_session())
    assert live.commands == ["step", "step_event", "continue", "run_to", "abort", "check_gradients"]
    assert replay.commands == ["step", "step_event", "continue", "run_to", "step_back"]
    live.close()
    replay.close()


def test_select_fills_the_inspector_and_steps_refresh_it() -> None:
    widget = DebuggerWidget(_real_session())
    recorder = Recorder(widget)
    tanh = _node_named(widget, "TanhBackward0")
    browser_sends(widget, {"type": "command", "name": "select", "node": tanh})
    assert recorder.acks == [{"type": "ack", "name": "select", "ok": True, "reason": None}]
    assert widget.selected == tanh
    assert widget.inspection["name"] == "TanhBackward0"
    assert widget.inspection["state"] == "pending"
    assert widget.inspection["grads_in"] is None
    assert _strict_json(widget.inspection) == widget.inspection
    while widget.states[str(tanh)] not in ("done", "released"):
        browser_sends(widget, {"type": "command", "name": "step"})
        assert widget.inspection["state"] == widget.states[str(tanh)]  # refreshed on every step
    (grad_in,) = widget.inspection["grads_in"]
    assert grad_in["shape"] == [3] and grad_in["dtype"] == "float32" and grad_in["nan"] == 0
    assert len(widget.inspection["grads_out"]) == 1
    # Selecting nothing clears the inspector.
    browser_sends(widget, {"type": "command", "name": "select", "node": None})
    assert widget.selected is None and widget.inspection is None
    widget.close()


def test_select_works_in_every_status_and_refuses_unknown_nodes(widget: DebuggerWidget, session: FakeSession) -> None:
    recorder = Recorder(widget)
    session.continue_()
    browser_sends(widget, {"type": "command", "name": "select", "node": 99})
    assert recorder.acks[-1] == {"type": "ack", "name": "select", "ok": False, "reason": "no node with id 99 in the graph"}
    assert widget.selected is None
    # A session without node() still gets the graph's facts and the state.
    browser_sends(widget, {"type": "command", "name": "select", "node": 2})
    assert recorder.acks[-1]["ok"] is True
    assert widget.inspection == {"id": 2, "name": "MulBackward0", "kind": "builtin", "label": "x * w", "state": "released"}
    with pytest.raises(KeyError, match="no node with id 7"):
        widget.select(7)


def test_selection_is_dropped_when_the_graph_no_longer_has_the_node(widget: DebuggerWidget, session: FakeSession) -> None:
    widget.select(2)
    session._graph = {"nodes": [{"id": 10, "name": "SumBackward0", "kind": "builtin", "label": ""}], "edges": [], "roots": [10]}
    session._states = {10: "ready"}
    session._notify()
    assert [node["id"] for node in widget.graph["nodes"]] == [10]
    assert widget.selected is None and widget.inspection is None


def test_an_exception_in_node_is_shown(widget: DebuggerWidget, session: FakeSession) -> None:
    def broken(node_id: int) -> dict[str, Any]:
        raise LookupError(f"node {node_id} is gone")

    session.node = broken  # type: ignore[attr-defined]
    widget.select(3)
    assert widget.error is not None and "LookupError: node 3 is gone" in widget.error


def test_step_event_narrates_the_latest_event() -> None:
    session = _real_session()
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    before = widget.last_event
    browser_sends(widget, {"type": "command", "name": "step_event"})
    assert recorder.acks == [{"type": "ack", "name": "step_event", "ok": True, "reason": None}]
    event = session.events[-1]
    assert widget.last_event == {"seq": event["seq"], "kind": event["kind"], "node": event["node"], "text": event["text"]}
    assert widget.last_event != before
    assert widget.last_event["text"].startswith("SumBackward0 started")
    assert widget.states[str(widget.current)] == "running"  # mid-node
    widget.close()


def test_run_to_and_abort() -> None:
    session = _real_session()
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    target = _node_named(widget, "TanhBackward0")
    browser_sends(widget, {"type": "command", "name": "run_to", "node": target})
    assert recorder.acks[-1]["ok"] is True, recorder.acks
    assert widget.current == target and widget.status == "paused"
    absent = max(int(key) for key in widget.states) + 1  # ids are not per graph (yet): not a constant
    browser_sends(widget, {"type": "command", "name": "run_to", "node": absent})
    assert recorder.acks[-1] == {"type": "ack", "name": "run_to", "ok": False, "reason": f"no node with id {absent} in the graph"}
    browser_sends(widget, {"type": "command", "name": "abort"})
    assert recorder.acks[-1]["ok"] is True
    assert widget.status == "aborted"
    browser_sends(widget, {"type": "command", "name": "step"})
    assert recorder.acks[-1] == {"type": "ack", "name": "step", "ok": False, "reason": "the session is aborted"}
    widget.close()


def test_step_back_in_a_replay_even_after_the_end() -> None:
    session = _replay_session()
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "continue"})
    assert widget.status == "finished"
    finished = dict(widget.states)
    browser_sends(widget, {"type": "command", "name": "step_back"})
    assert recorder.acks[-1] == {"type": "ack", "name": "step_back", "ok": True, "reason": None}
    assert widget.status == "paused"
    assert widget.states != finished
    assert widget.states[str(widget.current)] == "ready"
    widget.close()


def test_commands_the_session_lacks_are_refused(widget: DebuggerWidget, session: FakeSession) -> None:
    recorder = Recorder(widget)
    for content in ({"type": "command", "name": "step_back"}, {"type": "command", "name": "run_to", "node": 2}):
        browser_sends(widget, content)
    assert recorder.acks == [
        {"type": "ack", "name": "step_back", "ok": False, "reason": "this session (FakeSession) has no step_back()"},
        {"type": "ack", "name": "run_to", "ok": False, "reason": "this session (FakeSession) has no run_to()"},
    ]
    assert session.steps_run == 0
    assert widget.error is None


def test_json_safe_makes_display_copies() -> None:
    import numpy

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    value = {
        1: (numpy.float32(0.5), float("nan"), float("-inf"), numpy.int64(3), numpy.bool_(True)),
        "nested": {"deep": [Opaque(), None, "text"]},
        "long": list(range(250)),
    }
    safe = json_safe(value)
    assert safe["1"] == [0.5, "nan", "-inf", 3, True]
    assert type(safe["1"][3]) is int and type(safe["1"][4]) is bool
    assert safe["nested"] == {"deep": ["<opaque>", None, "text"]}
    assert safe["long"][-1] == "… 50 more" and len(safe["long"]) == 201
    assert _strict_json(safe) == safe
    assert compact_event({"seq": 3, "kind": "node_ready", "node": 2, "text": "A became ready.", "time": 0.1}) == {
        "seq": 3, "kind": "node_ready", "node": 2, "text": "A became ready."
    }  # fmt: skip
    assert compact_event("junk") is None


# ---- the session drives the widget ------------------------------------------------------------


def test_stepping_the_session_from_python_updates_the_widget(widget: DebuggerWidget, session: FakeSession) -> None:
    recorder = Recorder(widget)
    session.step()
    session.step()
    assert run_count(widget) == 2
    assert widget.current == session.current
    assert len(recorder.updates) == 2


def test_a_step_sends_the_changed_states_only(widget: DebuggerWidget, session: FakeSession) -> None:
    # Protocol 6: a states_delta message with the changed states, numbered, then an update
    # with states_seq; `states` itself is not sent again (Note [States on the wire]).
    recorder = Recorder(widget)
    shown = dict(widget.states)
    base = widget.states_seq
    for index in range(3):
        session.step()
        delta = recorder.deltas[-1]
        assert delta["seq"] == base + index + 1 == widget.states_seq
        assert set(delta) == {"type", "seq", "states", "delivered"}
        shown.update(delta["states"])
        assert shown == normalize_states(session.node_states()) == widget.states
        assert 0 < len(delta["states"]) < len(shown)
    assert all("states" not in update for update in recorder.updates)
    assert widget.states_base == base


def test_notifications_from_a_worker_thread(widget: DebuggerWidget, session: FakeSession) -> None:
    worker = threading.Thread(target=session.continue_)
    worker.start()
    worker.join(timeout=10)
    assert widget.status == "finished"
    assert run_count(widget) == 5


def test_close_stops_following_the_session(session: FakeSession) -> None:
    widget = DebuggerWidget(session)
    widget.close()
    assert session._listeners == []
    session.step()  # must not touch the closed widget
    assert widget.states["4"] == "ready"


def test_display_session_reuses_the_widget_of_a_session(session: FakeSession, monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    first = display_session(session)
    second = display_session(session)
    other = display_session(FakeSession.tiny())
    assert isinstance(first, DebuggerWidget)
    assert first is second
    assert other is not first
    assert shown == [first, first, other]
    assert len(session._listeners) == 1
    for widget in (first, other):
        widget.close()


# ---- docstrings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["gradviz.widget._widget", "gradviz.widget._bundle"])
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    found = [test for test in doctest.DocTestFinder().find(importlib.import_module(module)) if test.examples]
    assert found, f"{module} has no docstring examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in found:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


# ---- stale-bundle protection ------------------------------------------------------------------


@pytest.fixture
def copied_checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of labextension/ (without node_modules) and of the built static/ dir."""
    labextension = tmp_path / "labextension"
    shutil.copytree(REPO / "labextension", labextension, ignore=shutil.ignore_patterns("node_modules", ".tsbuild"))
    static = tmp_path / "static"
    shutil.copytree(_bundle.STATIC_DIR, static)
    return labextension, static


def test_python_and_the_build_script_hash_the_same_bytes(copied_checkout: tuple[Path, Path]) -> None:
    labextension, _ = copied_checkout
    node = shutil.which("node")
    assert node is not None, "node (Node.js 20) builds the widget: scripts/setup.sh requires it"
    script = "import('./scripts/sources.mjs').then(m => console.log(m.bundleSourcesSha256('.')))"
    result = subprocess.run(
        [node, "--input-type=module", "-e", script], cwd=labextension, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == _bundle.sources_sha256(labextension)


def test_fresh_copy_is_fresh(copied_checkout: tuple[Path, Path]) -> None:
    labextension, static = copied_checkout
    assert _bundle.bundle_info(static, labextension)["fresh"] is True
    assert _bundle.load_bundle(static, labextension).startswith("// gradviz widget")


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "src" / "model.ts").write_text((root / "src" / "model.ts").read_text() + "\n// edit\n"),
        lambda root: (root / "src" / "new_module.ts").write_text("export const x = 1;\n"),
        lambda root: (root / "src" / "toolbar.ts").unlink(),
        lambda root: (root / "package-lock.json").write_text("{}"),
        lambda root: (root / "scripts" / "build.mjs").write_text("// changed\n"),
    ],
    ids=["edited", "added", "removed", "lockfile", "build-script"],
)
def test_changed_sources_make_the_bundle_stale(copied_checkout: tuple[Path, Path], change: Any) -> None:
    labextension, static = copied_checkout
    change(labextension)
    info = _bundle.bundle_info(static, labextension)
    assert info["fresh"] is False
    assert info["sources_sha256"] != info["sha256"]
    with pytest.raises(RuntimeError, match=r"bundle is stale.*npm --prefix labextension run build.*pip install -e \."):
        _bundle.load_bundle(static, labextension)


def test_ignored_files_do_not_make_the_bundle_stale(copied_checkout: tuple[Path, Path]) -> None:
    labextension, static = copied_checkout
    (labextension / "src" / ".model.ts.swp").write_bytes(b"editor junk")
    (labextension / "test" / "extra.test.ts").write_text("// tests are not part of the bundle\n")
    assert _bundle.bundle_info(static, labextension)["fresh"] is True


def test_missing_bundle_or_manifest(copied_checkout: tuple[Path, Path]) -> None:
    labextension, static = copied_checkout
    (static / "manifest.json").unlink()
    with pytest.raises(RuntimeError, match="no valid manifest.json"):
        _bundle.load_bundle(static, labextension)
    (static / "widget.js").unlink()
    with pytest.raises(RuntimeError, match=r"bundle is missing.*npm --prefix labextension run build"):
        _bundle.load_bundle(static, labextension)


def test_installed_package_without_sources_only_needs_the_bundle(copied_checkout: tuple[Path, Path], tmp_path: Path) -> None:
    _, static = copied_checkout
    info = _bundle.bundle_info(static, tmp_path / "no-such-labextension")
    assert info["dev_checkout"] is False
    assert info["fresh"] is True


def test_edges_turn_delivered_only_as_their_buffer_added_events_are_shown() -> None:
    """Step event past a node's node_finished: its gradients are still on the way, so no edge
    of it is delivered until its buffer_added event is shown (one edge per event; x * x has
    two edges to x, delivered one at a time). At the end every edge of the graph, as torch's
    next_functions has it, has carried its gradient."""
    import torch as real_torch

    import gradviz as torch

    def build(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        return (x * x).exp().sum()

    session = torch.debug.backward(build(torch))
    widget = DebuggerWidget(session)
    assert widget.delivered == []
    shown = []
    while True:
        event = session.step_event()
        if event is None:
            break
        if event["kind"] == "buffer_added":
            shown.append([event["producer"], event["node"]])
        assert widget.delivered == shown, event["kind"]
        if event["kind"] == "node_finished":
            sent = [e for e in widget.graph["edges"] if e["source"] == event["node"]]
            assert not any(pair[0] == event["node"] for pair in widget.delivered), (
                "an edge is delivered before its buffer_added event is shown", sent)
    names = {node["id"]: node["name"] for node in widget.graph["nodes"]}
    delivered = sorted((names[a], names[b]) for a, b in widget.delivered)

    def torch_edges(fn, seen):
        out = []
        for child, _ in fn.next_functions:
            if child is not None:
                out.append((type(fn).__name__, type(child).__name__))
                if child not in seen:
                    seen.add(child)
                    out.extend(torch_edges(child, seen))
        return out

    assert delivered == sorted(torch_edges(build(real_torch).grad_fn, set()))
    widget.close()


def test_a_session_without_events_sends_no_deliveries(widget: DebuggerWidget) -> None:
    assert widget.delivered is None  # the view then greens the edges of nodes that have run

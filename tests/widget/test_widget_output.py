"""What user code says during a button click (output panel, errors with the user's frames
first), the event history, jumps in a replay, Run to's status line, and a Trace in IPython."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_widget import Recorder, browser_sends  # noqa: E402

import gradviz as torch  # noqa: E402
from gradviz.debug import ReplaySession  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402
from gradviz.widget._output import OUTPUT_LIMIT, OutputCapture  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class Chatty(torch.autograd.Function):
    """A custom Function whose backward prints, as a student's debugging print does."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (x,) = ctx.saved_tensors
        print("inside Chatty.backward, grad =", grad.tolist())
        print("a warning-like line", file=sys.stderr)
        return 2 * x * grad


class Broken(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 3

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return user_helper_that_fails(grad)


def user_helper_that_fails(grad: Any) -> Any:
    raise ValueError("the user's backward failed here")


def session_of(function: type) -> Any:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    return torch.debug.backward(function.apply(x).sum())


def node_named(widget: DebuggerWidget, name: str) -> int:
    return next(node["id"] for node in widget.graph["nodes"] if node["name"] == name)


def test_what_a_stepped_backward_prints_reaches_the_output_trait(capsys: Any) -> None:
    widget = DebuggerWidget(session_of(Chatty))
    assert widget.output == ""
    browser_sends(widget, {"type": "command", "name": "step"})  # SumBackward0: prints nothing
    assert widget.output == ""
    browser_sends(widget, {"type": "command", "name": "step"})  # Chatty's backward
    assert widget.output == "[step]\ninside Chatty.backward, grad = [1.0, 1.0]\na warning-like line\n"
    # and it still goes where it went before (the kernel's streams: JupyterLab's Log Console)
    captured = capsys.readouterr()
    assert "inside Chatty.backward" in captured.out and "a warning-like line" in captured.err
    widget.close()


def test_the_streams_are_restored_after_a_command_even_when_it_raises() -> None:
    before = (sys.stdout, sys.stderr)
    widget = DebuggerWidget(session_of(Broken))
    browser_sends(widget, {"type": "command", "name": "continue"})
    assert (sys.stdout, sys.stderr) == before
    assert widget.status == "error"
    widget.close()


def test_the_output_keeps_the_last_characters_and_says_it_cut() -> None:
    shown: list[str] = []
    capture = OutputCapture(shown.append)
    for index in range(3):
        with capture.command(f"step{index}"):
            sys.stdout.write("x" * (OUTPUT_LIMIT // 2) + "\n")
    assert shown[-1].startswith("… (earlier output cut)\n")
    assert len(shown[-1]) <= OUTPUT_LIMIT + len("… (earlier output cut)\n")
    assert shown[-1].rstrip().endswith("x")
    with capture.command("quiet"):
        pass
    assert len(shown) == 3, "a command that printed nothing publishes nothing"


def test_an_error_in_a_users_backward_shows_the_users_frames_first() -> None:
    widget = DebuggerWidget(session_of(Broken))
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "continue"})
    error = widget.error
    assert error is not None
    summary, rest = error.split("\n\n", 1)
    assert summary == "ValueError: the user's backward failed here"
    mine, full = rest.split("\n\nFull traceback:\n", 1)
    assert mine.startswith("In your code (innermost last):")
    # only the user's frames, the failing line last
    assert "user_helper_that_fails" in mine.splitlines()[-2] or "user_helper_that_fails" in mine.splitlines()[-4]
    assert 'raise ValueError("the user\'s backward failed here")' in mine.splitlines()[-1]
    for internal in ("_widget.py", "_session.py", "_task.py", "gradviz_ext"):
        assert internal not in mine
    # the full traceback is still there, gradviz's frames included
    assert "Traceback (most recent call last)" in full and "_widget.py" in full
    assert recorder.acks[-1]["ok"] is False
    widget.close()


def test_a_live_history_lists_the_events_shown_and_a_click_selects() -> None:
    session = session_of(Chatty)
    widget = DebuggerWidget(session)
    session.step()
    session.step_event()
    assert widget.history is not None and widget.history["seekable"] is False
    assert widget.history["start"] == 0 and widget.history["total"] == len(session.events)
    assert [line[2] for line in widget.history["events"]] == [event["text"] for event in session.events]
    assert [line[1] for line in widget.history["events"]] == [event.get("node") for event in session.events]
    assert widget.history_position == len(session.events)
    # seek is a replay's: a live session refuses it with an ack that says why
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "seek", "position": 1})
    assert recorder.acks == [{"type": "ack", "name": "seek", "ok": False,
                              "reason": "this session (DebugSession) cannot jump to an event: only a replay can"}]
    widget.close()


def test_a_replay_history_lists_the_whole_trace_and_seek_jumps() -> None:
    session = session_of(Chatty)
    session.continue_()
    replay = ReplaySession(session.trace())
    widget = DebuggerWidget(replay)
    total = len(replay.trace.events)
    assert widget.history["seekable"] is True and widget.history["total"] == total
    assert [line[2] for line in widget.history["events"]] == [event["text"] for event in replay.trace.events]
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "seek", "position": 3})
    assert recorder.acks[-1] == {"type": "ack", "name": "seek", "ok": True, "reason": None}
    assert replay.position == 3 and widget.history_position == 3
    assert widget.last_event["text"] == replay.trace.events[2]["text"]
    browser_sends(widget, {"type": "command", "name": "seek", "position": total + 5})
    assert widget.history_position == replay.position
    widget.close()


def test_run_to_never_shows_its_own_breakpoint_as_a_stop() -> None:
    session = session_of(Chatty)
    widget = DebuggerWidget(session)
    seen: list[Any] = []
    widget.observe(lambda change: seen.append(change["new"]), names="stopped_at")
    target = node_named(widget, "AccumulateGrad")
    browser_sends(widget, {"type": "command", "name": "run_to", "node": target})
    assert widget.current == target
    assert all(value is None for value in seen), seen
    widget.close()


def test_run_to_still_names_a_users_breakpoint_it_stops_at() -> None:
    session = session_of(Chatty)
    widget = DebuggerWidget(session)
    session.break_on(function="ChattyBackward")
    browser_sends(widget, {"type": "command", "name": "run_to", "node": node_named(widget, "AccumulateGrad")})
    assert widget.stopped_at == "breakpoint on ChattyBackward"
    widget.close()


def test_a_trace_displayed_in_ipython_opens_its_replay_widget() -> None:
    script = textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import gradviz as torch
        from gradviz.widget import _widget
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        with torch.record() as trace:
            (x * x).sum().backward()
        shown = shell.display_formatter.ipython_display_formatter(trace)
        widgets = list(_widget._widgets_by_session.values())
        print(shown, len(widgets), type(widgets[0].session).__name__, widgets[0].session.trace is trace)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True 1 ReplaySession True"


class _Stub:
    """A session with `count` events, a replay (seek and a trace) when `trace_events` is given."""

    def __init__(self, shown: int, trace_events: list[dict] | None = None) -> None:
        self.events = [{"seq": i, "kind": "node_ready", "node": i % 5, "text": f"event {i}"} for i in range(shown)]
        if trace_events is not None:
            self.trace = type("T", (), {"events": trace_events})()
            self.seek = lambda position: None


def test_the_history_is_cut_to_its_limit_around_the_position() -> None:
    from gradviz.widget._widget import HISTORY_LIMIT, event_history

    live = _Stub(HISTORY_LIMIT + 250)
    history, position = event_history(live, live.events)
    assert position == HISTORY_LIMIT + 250
    assert history["start"] == 250 and history["total"] == HISTORY_LIMIT + 250 and not history["seekable"]
    assert len(history["events"]) == HISTORY_LIMIT and history["events"][-1] == ["node_ready", (HISTORY_LIMIT + 249) % 5, f"event {HISTORY_LIMIT + 249}"]
    everything = _Stub(3 * HISTORY_LIMIT).events
    replay = _Stub(HISTORY_LIMIT, trace_events=everything)  # a replay standing at position HISTORY_LIMIT
    history, position = event_history(replay, replay.events)
    assert history["seekable"] and history["total"] == 3 * HISTORY_LIMIT
    assert history["start"] == HISTORY_LIMIT // 2, "the window is centred on the position"
    assert history["start"] <= position - 1 < history["start"] + len(history["events"])
    near_end = _Stub(3 * HISTORY_LIMIT - 2, trace_events=everything)
    history, _ = event_history(near_end, near_end.events)
    assert history["start"] == 2 * HISTORY_LIMIT and len(history["events"]) == HISTORY_LIMIT
    assert event_history(object(), None) == (None, 0)

"""The widget's Check gradients command: the gradient doctor on the session's live graph
(Note [Check gradients] in gradviz/widget/_widget.py, docs/widget_protocol.md)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch as pytorch  # the real one: `torch` below is gradviz, as in a notebook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_fake_session import FakeSession  # noqa: E402
from test_widget import Recorder, browser_sends  # noqa: E402

import gradviz as torch  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402
from gradviz.widget._widget import json_safe  # noqa: E402

CHECK = {"type": "command", "name": "check_gradients"}


class BadSquare(torch.autograd.Function):
    """x * x whose backward has the wrong sign."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return -2 * x * grad


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def session_over(function: type, retain_graph: bool | None = None) -> Any:
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    return torch.debug.backward((function.apply(torch.tanh(x * w)) * 3.0).sum(), retain_graph=retain_graph)


def node_named(widget: DebuggerWidget, name: str) -> int:
    return next(node["id"] for node in widget.graph["nodes"] if node["name"] == name)


def progress_messages(recorder: Recorder) -> list[dict[str, Any]]:
    return [m for m in recorder.acks if m.get("type") == "progress"]


def acks(recorder: Recorder) -> list[dict[str, Any]]:
    return [m for m in recorder.acks if m.get("type") == "ack"]


def doctor_updates(recorder: Recorder) -> list[dict[str, Any]]:
    return [update["doctor"] for update in recorder.updates if "doctor" in update]


def test_a_wrong_backward_is_reported_as_the_doctor_reports_it() -> None:
    session = session_over(BadSquare)
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    states = dict(widget.states)
    assert "check_gradients" in widget.commands

    browser_sends(widget, CHECK)

    assert acks(recorder) == [{"type": "ack", "name": "check_gradients", "ok": True, "reason": None}]
    # What went over the wire: "checking" at once, then the report.
    sent = doctor_updates(recorder)
    assert [update["state"] for update in sent] == ["checking", "done"]
    assert sent[0] == {"run": 1, "state": "checking", "report": None, "error": None}
    report = sent[-1]["report"]
    assert widget.doctor == sent[-1]
    # The doctor's own report, run again directly on the same graph.
    expected = session.doctor().to_dict()
    assert report == json_safe(expected)
    assert report == json.loads(json.dumps(report, allow_nan=False)), "plain JSON"
    assert report["ok"] is False
    (finding,) = report["findings"]
    assert finding["kind"] == "wrong_gradient" and finding["severity"] == "error"
    assert finding["function"] == "BadSquare"
    assert finding["node"] == node_named(widget, "BadSquareBackward")
    assert finding["node_name"] == "BadSquareBackward"
    assert finding["input_index"] == 0
    assert finding["max_abs_error"] > 0 and finding["max_rel_error"] > 0
    assert finding["worst"] and all(len(entry["index"]) == 1 for entry in finding["worst"])
    worst = finding["worst"][0]
    assert worst["analytic"] == pytest.approx(-worst["numeric"], rel=1e-2), "the sign is flipped"
    assert "sign flipped?" in finding["message"]
    assert report["checked"] == [finding["node"]] and report["skipped"] == []
    # Progress: the backward pass, then the one custom node; the last one always arrives.
    progress = progress_messages(recorder)
    assert progress and progress[-1] == {"type": "progress", "name": "check_gradients", "done": 2, "total": 2,
                                         "label": "BadSquareBackward"}
    # The session has not moved.
    assert widget.states == states and widget.status == "paused" and widget.error is None
    widget.close()


def test_a_correct_backward_has_no_findings() -> None:
    session = session_over(Square)
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    browser_sends(widget, CHECK)
    assert acks(recorder)[-1]["ok"] is True
    report = widget.doctor["report"]
    assert report == json_safe(session.doctor().to_dict())
    assert report["ok"] is True and report["findings"] == []
    assert report["checked"] == [node_named(widget, "SquareBackward")]
    assert report["summary"].endswith("no problems found")
    widget.close()


def test_after_continue_the_wrong_backward_is_still_found() -> None:
    """The default path (no capture()): the node kept its forward inputs, so the doctor
    re-runs it although backward freed its saved tensors."""
    session = session_over(BadSquare)
    widget = DebuggerWidget(session)
    session.continue_()
    Recorder(widget)
    browser_sends(widget, CHECK)
    report = widget.doctor["report"]
    assert widget.doctor["state"] == "done" and report["skipped"] == []
    (finding,) = report["findings"]
    assert finding["kind"] == "wrong_gradient" and finding["function"] == "BadSquare"
    assert finding["node"] == node_named(widget, "BadSquareBackward")
    widget.close()


def test_nodes_that_could_not_be_checked_are_named_with_the_reason() -> None:
    """After the custom node ran without retain_graph its saved tensors are gone (and, with
    keep_forward_inputs(False), nothing else holds its forward arguments)."""
    with torch.debug.keep_forward_inputs(False):
        session = session_over(BadSquare)
    widget = DebuggerWidget(session)
    session.continue_()
    Recorder(widget)
    browser_sends(widget, CHECK)
    report = widget.doctor["report"]
    assert widget.doctor["state"] == "done" and report["findings"] == []
    (skipped,) = report["skipped"]
    assert skipped["node"] == node_named(widget, "BadSquareBackward")
    assert skipped["name"] == "BadSquareBackward"
    assert "saved tensors were freed" in skipped["reason"]
    assert any("retain_graph" in note for note in report["notes"])
    # Nothing was looked at: the summary must not read as a clean bill of health.
    assert report["checked"] == []
    assert report["summary"].endswith("nothing could be checked") and "no problems found" not in report["summary"]
    widget.close()


def test_checks_run_again_and_count() -> None:
    session = session_over(BadSquare, retain_graph=True)
    widget = DebuggerWidget(session)
    browser_sends(widget, CHECK)
    session.continue_()  # a finished session can still be checked (retain_graph kept the graph)
    assert widget.status == "finished"
    recorder = Recorder(widget)
    browser_sends(widget, CHECK)
    assert acks(recorder)[-1]["ok"] is True
    assert widget.doctor["run"] == 2 and len(widget.doctor["report"]["findings"]) == 1
    widget.close()


def test_a_replayed_trace_cannot_check_gradients_and_says_why() -> None:
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    with torch.record() as trace:
        BadSquare.apply(x * w).sum().backward()
    widget = DebuggerWidget(torch.debug.ReplaySession(trace))
    recorder = Recorder(widget)
    assert "check_gradients" not in widget.commands
    browser_sends(widget, CHECK)
    (ack,) = acks(recorder)
    assert ack["ok"] is False
    assert "cannot check gradients" in ack["reason"] and "a replayed trace has none" in ack["reason"]
    assert "gradviz.debug.doctor(loss)" in ack["reason"]
    assert widget.doctor is None and widget.error is None
    widget.close()


def test_a_pytorch_trace_does_not_offer_the_check() -> None:
    w = pytorch.tensor([1.5, 0.5], requires_grad=True)
    trace = torch.debug.record_torch((w * w).sum())
    widget = DebuggerWidget(torch.debug.replay(trace))
    recorder = Recorder(widget)
    assert "check_gradients" not in widget.commands
    browser_sends(widget, CHECK)
    assert acks(recorder)[0]["ok"] is False and widget.doctor is None
    widget.close()


class DoctorFails(FakeSession):
    def doctor(self, progress: Any = None) -> Any:
        progress(1, 3, "backward pass")
        raise ValueError("the doctor tripped over something")


def test_an_exception_in_the_doctor_is_shown_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    widget = DebuggerWidget(DoctorFails.tiny())
    recorder = Recorder(widget)
    assert "check_gradients" in widget.commands
    with caplog.at_level(logging.WARNING, logger="gradviz.widget"):
        browser_sends(widget, CHECK)
    assert acks(recorder) == [{"type": "ack", "name": "check_gradients", "ok": False,
                               "reason": "ValueError: the doctor tripped over something"}]
    assert widget.doctor == {"run": 1, "state": "error", "report": None,
                             "error": "ValueError: the doctor tripped over something"}
    assert "Traceback" in widget.error and "the doctor tripped over something" in widget.error
    assert progress_messages(recorder)[0]["done"] == 1
    widget.close()


def test_a_session_without_its_roots_gets_the_doctors_message() -> None:
    session = session_over(Square)
    session._doctor_arguments = None  # as a DebugSession not made by gradviz.debug.backward()
    widget = DebuggerWidget(session)
    recorder = Recorder(widget)
    browser_sends(widget, CHECK)
    assert acks(recorder)[-1]["ok"] is False
    assert widget.doctor["state"] == "error"
    assert "gradviz.debug.doctor(loss)" in widget.doctor["error"]
    widget.close()


class ManySteps(FakeSession):
    def doctor(self, progress: Any = None) -> Any:
        for done in range(1, 1001):
            progress(done, 1000, f"node {done}")
        return torch.debug.DoctorReport()


def test_progress_messages_are_throttled_and_the_last_one_arrives() -> None:
    widget = DebuggerWidget(ManySteps.tiny())
    recorder = Recorder(widget)
    browser_sends(widget, CHECK)
    progress = progress_messages(recorder)
    assert 2 <= len(progress) < 100
    assert progress[0]["done"] == 1 and progress[-1]["done"] == 1000
    assert widget.doctor["report"] == {"ok": True, "summary": str(torch.debug.DoctorReport()),
                                       "findings": [], "checked": [], "skipped": [], "notes": []}
    widget.close()


def test_check_gradients_takes_no_fields() -> None:
    widget = DebuggerWidget(session_over(Square))
    recorder = Recorder(widget)
    browser_sends(widget, {"type": "command", "name": "check_gradients", "node": 1})
    # Refused with an error reply (not an ack: the command did not run), and nothing checked.
    assert recorder.acks == [{"type": "error", "reason": "a check_gradients command has the fields name, type (unexpected node)"}]
    assert widget.doctor is None
    widget.close()

"""The widget tests' FakeSession against a real ``gradviz.debug`` session: the same commands,
sent as the browser sends them, on the same graph must leave the widget's traits the same.

The fake re-implements the engine's order (tests/widget/gradviz_fake_session.py) so that the
widget and browser tests do not depend on the engine; this test is what keeps it honest. The
fake's graph is the real session's graph, with ``saves`` taken from what each real node saved.
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_fake_session import FakeDebugSession, FakeSession  # noqa: E402

import gradviz as torch  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402
from gradviz.widget._protocol import Inspection  # noqa: E402

# the traits a command changes, compared after each command
TRAITS = ("states", "current", "status", "stopped_at", "selected", "error")
# Inspection's required keys (read from the annotations: with postponed annotations Python
# 3.11's __required_keys__ does not see NotRequired)
HINTS = typing.get_type_hints(Inspection)
REQUIRED = [key for key, hint in typing.get_type_hints(Inspection, include_extras=True).items()
            if typing.get_origin(hint) is not typing.NotRequired]


def _real_session() -> Any:
    """loss = (tanh(x * w + b) * w).sum(): 7 nodes, w used twice (its AccumulateGrad waits
    for two gradients), b's AccumulateGrad ready next to a MulBackward0."""
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    b = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    return torch.debug.backward((torch.tanh(x * w + b) * w).sum())


def _fake_of(real: Any, kind: type[FakeSession]) -> FakeSession:
    graph = real.graph()
    nodes = [{**node, "saves": bool(real.node(node["id"]).get("saved"))} for node in graph["nodes"]]
    return kind({**graph, "nodes": nodes})


class Pair:
    """A widget on the real session and one on the fake, driven alike."""

    def __init__(self, kind: type[FakeSession] = FakeDebugSession) -> None:
        self.real_session = _real_session()
        self.fake_session = _fake_of(self.real_session, kind)
        self.real = DebuggerWidget(self.real_session)
        self.fake = DebuggerWidget(self.fake_session)
        self.acks: dict[str, list[dict]] = {"real": [], "fake": []}
        for name, widget in (("real", self.real), ("fake", self.fake)):
            widget.comm.send = self._recorder(self.acks[name])  # type: ignore[union-attr]

    @staticmethod
    def _recorder(acks: list[dict]) -> Any:
        def send(data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
            if data.get("method") == "custom":
                acks.append(data["content"])
        return send

    def node(self, name: str) -> int:
        return next(node["id"] for node in self.real.graph["nodes"] if node["name"] == name)

    def command(self, name: str, **fields: Any) -> None:
        for widget in (self.real, self.fake):
            widget._handle_msg({"content": {"data": {"method": "custom", "content": {
                "type": "command", "name": name, **fields}}}, "buffers": []})
        self.check(f"{name} {fields}")

    def check(self, after: str) -> None:
        for trait in TRAITS:
            real, fake = getattr(self.real, trait), getattr(self.fake, trait)
            assert real == fake, f"after {after}: {trait} differs: real {real!r}, fake {fake!r}"
        assert self.acks["real"] == self.acks["fake"], f"after {after}: the acks differ"
        for widget in (self.real, self.fake):
            _check_inspection_shape(widget.inspection)
        if self.real.inspection is not None:
            real = {key: self.real.inspection[key] for key in REQUIRED}
            fake = {key: self.fake.inspection[key] for key in REQUIRED}
            assert real == fake, f"after {after}: the inspections differ"

    def close(self) -> None:
        self.real.close()
        self.fake.close()


def _check_inspection_shape(inspection: Any) -> None:
    """The inspection has the protocol's required keys with values of their types."""
    if inspection is None:
        return
    assert REQUIRED == ["id", "name", "kind", "label", "state"]
    for key in REQUIRED:
        expected = HINTS[key]
        allowed = typing.get_args(expected) or (expected,)
        value = inspection[key]
        assert (type(value) in allowed if typing.get_origin(expected) is not typing.Literal
                else value in allowed), f"inspection[{key!r}] = {value!r} is not {expected}"


@pytest.fixture
def pair() -> Pair:
    pair = Pair()
    yield pair
    pair.close()


def test_the_starting_traits_agree(pair: Pair) -> None:
    pair.check("construction")
    assert pair.real.status == "paused" and pair.real.current == pair.node("SumBackward0")


def test_step_select_run_to_breakpoint_and_abort_agree(pair: Pair) -> None:
    pair.command("step")
    pair.command("select", node=pair.node("TanhBackward0"))
    pair.command("run_to", node=pair.node("AddBackward0"))
    assert pair.real.current == pair.node("AddBackward0") and pair.real.stopped_at is None
    for session in (pair.real_session, pair.fake_session):
        session.break_on(function="MulBackward0")
    pair.command("continue")
    assert pair.real.stopped_at == "breakpoint on MulBackward0"
    assert pair.real.states[str(pair.node("TanhBackward0"))] == "released"  # it saved its output
    assert pair.real.states[str(pair.node("AddBackward0"))] == "done"       # it saved nothing
    leaf = next(node["id"] for node in pair.real.graph["nodes"] if node.get("leaf_name") == "b")
    pair.command("select", node=leaf)
    pair.command("step")
    assert pair.real.stopped_at is None
    pair.command("abort")
    assert pair.real.status == "aborted" and pair.real.current is None
    pair.command("step")  # refused: the session is aborted
    assert pair.acks["real"][-1] == {"type": "ack", "name": "step", "ok": False, "reason": "the session is aborted"}
    pair.command("select", node=None)


def test_continue_to_the_end_and_refusals_agree(pair: Pair) -> None:
    pair.command("select", node=pair.node("SumBackward0"))
    pair.command("continue")  # the first node may match: the one it is paused at never stops it
    assert pair.real.status == "finished" and pair.real.current is None
    pair.command("run_to", node=pair.node("AddBackward0"))
    pair.command("continue")
    assert [ack["ok"] for ack in pair.acks["real"]] == [True, True, False, False]


def test_the_plain_fake_agrees_on_step_and_continue() -> None:
    # the FakeSession most widget tests use: only step and continue
    pair = Pair(FakeSession)
    try:
        for _ in range(3):
            pair.command("step")
        pair.command("select", node=pair.node("MulBackward0"))
        pair.command("continue")
        assert pair.real.status == "finished"
    finally:
        pair.close()

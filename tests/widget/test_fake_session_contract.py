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
            # states deltas are how the states travel, not answers: the fake, without events,
            # batches them differently; the `states` trait they keep current is compared
            if data.get("method") == "custom" and data["content"].get("type") != "states_delta":
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
        # A refusal names the session's class ("this session (DebugSession) has no ..."): the
        # one place the two may differ, so the fake's class name is read as the real one's.
        real_class, fake_class = type(self.real_session).__name__, type(self.fake_session).__name__
        fake_acks = [{**ack, "reason": ack["reason"].replace(f"({fake_class})", f"({real_class})")}
                     if isinstance(ack.get("reason"), str) else ack for ack in self.acks["fake"]]
        assert self.acks["real"] == fake_acks, f"after {after}: the acks differ"
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


@pytest.mark.parametrize("name, fields", [("step_back", {}), ("seek", {"position": 1})])
def test_commands_only_a_replay_offers_are_refused_alike(pair: Pair, name: str, fields: dict) -> None:
    # The widget tests send these to replays; a live session (and so its fake) refuses them
    # with the same reason, and no trait moves.
    pair.command("step")
    pair.command(name, **fields)
    last = pair.acks["real"][-1]
    assert last["name"] == name and last["ok"] is False
    assert "(DebugSession)" in last["reason"], last["reason"]
    assert pair.real.status == "paused"


def test_refusals_of_nodes_not_in_the_graph_agree(pair: Pair) -> None:
    missing = max(node["id"] for node in pair.real.graph["nodes"]) + 1
    pair.command("run_to", node=missing)
    assert pair.acks["real"][-1] == {"type": "ack", "name": "run_to", "ok": False, "reason": f"no node with id {missing} in the graph"}
    pair.command("select", node=missing)
    assert pair.acks["real"][-1] == {"type": "ack", "name": "select", "ok": False, "reason": f"no node with id {missing} in the graph"}
    assert pair.real.current == pair.node("SumBackward0")

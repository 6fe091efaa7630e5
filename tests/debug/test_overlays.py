"""Overlays (``session.overlay``, ``session.overlays()``) on every session kind.

The built-ins are checked against gradients computed by PyTorch on a twin model with the same
weights, and saved bytes against numpy's sizes of the tensors a node saves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.debug._overlays import BUILTIN_OVERLAYS

HOSTILE = '<img src=x onerror="alert(1)">'


class Net(gradviz.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = gradviz.nn.Linear(3, 4)
        self.fc2 = gradviz.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh()).pow(2).sum()


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh()).pow(2).sum()


def twins():
    ours, theirs = Net(), TorchNet()
    with torch.no_grad():
        for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    x = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    loss = theirs(torch.from_numpy(x))
    loss.backward(retain_graph=True)
    expected = {name: p.grad.numpy().astype(np.float64) for name, p in theirs.named_parameters()}
    return ours, theirs, x, loss, expected


def sessions():
    """A live session (finished), a replay of a gradviz recording and of a torch recording."""
    ours, theirs, x, loss, expected = twins()
    live = gradviz.debug.backward(ours(gradviz.tensor(x)), params=ours)
    live.continue_()
    with gradviz.record() as trace:
        ours(gradviz.tensor(x)).backward()
    replay = gradviz.debug.ReplaySession(trace)
    replay.continue_()
    for p in theirs.parameters():
        p.grad = None
    torch_replay = gradviz.debug.ReplaySession(gradviz.debug.record_torch(theirs(torch.from_numpy(x)), params=theirs))
    torch_replay.continue_()
    return {"live": live, "replay": replay, "torch": torch_replay}, expected


def leaves(session) -> dict:
    return {n["leaf_name"]: n["id"] for n in session.graph()["nodes"] if "leaf_name" in n}


@pytest.mark.parametrize("kind", ["live", "replay", "torch"])
def test_builtin_gradient_overlays_match_torch(kind):
    found, expected = sessions()
    session = found[kind]
    overlays = session.overlays()
    assert list(overlays)[:5] == list(BUILTIN_OVERLAYS)
    named = leaves(session)
    assert set(named) == set(expected)
    for name, grad in expected.items():
        node = named[name]
        assert overlays["grad_norm"]["values"][node] == pytest.approx(np.linalg.norm(grad), rel=1e-5)
        assert overlays["max_abs_grad"]["values"][node] == pytest.approx(np.abs(grad).max(), rel=1e-5)
        assert overlays["nonfinite"]["values"][node] is False
        assert overlays["dtype"]["values"][node] == "float32"
    assert overlays["grad_norm"]["kind"] == "continuous" and overlays["grad_norm"]["scale"] == "log"
    assert overlays["nonfinite"]["kind"] == "boolean" and overlays["dtype"]["kind"] == "categorical"


def test_builtins_change_as_backward_proceeds_and_follow_a_replay_back():
    ours, _, x, _, expected = twins()
    with gradviz.record() as trace:
        ours(gradviz.tensor(x)).backward()
    replay = gradviz.debug.ReplaySession(trace)
    assert replay.overlays()["grad_norm"]["values"] == {}
    replay.step()  # the loss's own node: its gradient is the seed 1.0
    first = replay.overlays()["grad_norm"]["values"]
    assert list(first.values()) == [1.0]
    replay.continue_()
    done = replay.overlays()["grad_norm"]["values"]
    assert done is not first and len(done) == len(replay.graph()["nodes"])
    unchanged = replay.overlays()["grad_norm"]["values"]
    assert unchanged is done  # nothing shown since: the same object (Note [Incremental overlays])
    replay.restart()
    assert replay.overlays()["grad_norm"]["values"] == {}


def test_nan_and_inf_show_in_the_builtins():
    w = gradviz.tensor([0.0, 4.0], requires_grad=True)
    session = gradviz.debug.backward(w.sqrt().sum() + (w * 0 + float("nan")).sum(), params={"w": w})
    session.continue_()
    overlays = session.overlays()
    leaf = leaves(session)["w"]
    reference = torch.tensor([0.0, 4.0], requires_grad=True)
    (reference.sqrt().sum() + (reference * 0 + float("nan")).sum()).backward()
    grad = reference.grad.double()
    assert overlays["nonfinite"]["values"][leaf] is bool((~torch.isfinite(grad)).any())
    assert overlays["grad_norm"]["values"][leaf] == float(grad.norm())
    assert overlays["max_abs_grad"]["values"][leaf] == float(grad.abs().max())
    mul = next(n["id"] for n in session.graph()["nodes"] if n["name"] == "MulBackward0")
    assert overlays["nonfinite"]["values"][mul] is False
    sqrt = next(n["id"] for n in session.graph()["nodes"] if n["name"] == "SqrtBackward0")
    assert overlays["nonfinite"]["values"][sqrt] is True  # returns inf at 0


def test_saved_bytes_are_the_saved_tensors_until_released():
    a = gradviz.tensor(np.ones((3, 4), np.float64), requires_grad=True)
    b = gradviz.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    session = gradviz.debug.backward((a * a).sum() + (b * b).sum())
    muls = {n["id"] for n in session.graph()["nodes"] if n["name"] == "MulBackward0"}
    before = session.overlays()["saved_bytes"]["values"]
    # x * x saves both inputs: two arrays of 12 entries each
    assert sorted(before[node] for node in muls) == sorted(
        [2 * np.ones((3, 4), np.float32).nbytes, 2 * np.ones((3, 4), np.float64).nbytes])
    session.continue_()
    after = session.overlays()["saved_bytes"]["values"]
    assert all(after[node] == 0 for node in muls)


def test_user_overlays_are_validated_with_typed_errors():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = gradviz.debug.backward((x * x).sum())
    ids = [n["id"] for n in session.graph()["nodes"]]
    session.overlay(HOSTILE, {ids[0]: 1, ids[1]: np.float32(2.5)})
    session.overlay("phase", {ids[0]: "a", ids[1]: "b"})
    session.overlay("flag", {ids[0]: True})
    session.overlay("layer", {ids[0]: 3}, kind="categorical")
    overlays = session.overlays()
    assert overlays[HOSTILE]["values"] == {ids[0]: 1.0, ids[1]: 2.5}
    assert (overlays["phase"]["kind"], overlays["flag"]["kind"]) == ("categorical", "boolean")
    assert overlays["layer"]["values"] == {ids[0]: "3"}
    with pytest.raises(KeyError, match="no node with id 999"):
        session.overlay("bad", {999: 1.0})
    with pytest.raises(TypeError, match=f"node {ids[1]} must be a number"):
        session.overlay("bad", {ids[0]: 1.0, ids[1]: object()})
    with pytest.raises(TypeError, match="mixes kinds"):
        session.overlay("bad", {ids[0]: 1.0, ids[1]: "x"})
    with pytest.raises(TypeError, match="keys must be node ids"):
        session.overlay("bad", {"0": 1.0})
    with pytest.raises(ValueError, match="built-in"):
        session.overlay("grad_norm", {ids[0]: 1.0})
    with pytest.raises(ValueError, match="printable"):
        session.overlay("a\nb", {ids[0]: 1.0})
    with pytest.raises(TypeError, match="name must be a str"):
        session.overlay(3, {ids[0]: 1.0})
    with pytest.raises(ValueError, match="scale"):
        session.overlay("ok", {ids[0]: 1.0}, scale="sqrt")
    with pytest.raises(TypeError, match="kind='boolean' but the values are continuous"):
        session.overlay("ok", {ids[0]: 1.0}, kind="boolean")
    session.overlay("phase", None)
    assert "phase" not in session.overlays()
    with pytest.raises(KeyError, match="no overlay named"):
        session.overlay("phase", None)


def test_runcall_sessions_offer_overlays():
    w = gradviz.tensor([1.0, -2.0], requires_grad=True)

    def train():
        (w * 3.0).sum().backward()

    session = gradviz.debug.runcall(train, stop_at_first_node=True)
    try:
        session.continue_()
        values = session.overlays()["grad_norm"]["values"]
        leaf = next(n["id"] for n in session.graph()["nodes"] if n["kind"] == "accumulate_grad")
        assert values[leaf] == pytest.approx(np.linalg.norm([3.0, 3.0]))
    finally:
        if session.status == "paused":
            session.abort()


def test_edges_carry_the_gradient_that_flowed_along_them():
    values = np.array([1.0, -2.0, 3.0], np.float32)
    w = gradviz.tensor(values, requires_grad=True)
    h = w * 3.0
    session = gradviz.debug.backward((h * h).sum(), params={"w": w})
    session.continue_()
    reference_w = torch.tensor(values, requires_grad=True)
    reference_h = reference_w * 3.0
    reference_h.retain_grad()
    (reference_h * reference_h).sum().backward()
    graph = session.graph()
    by_name = {n["name"]: n["id"] for n in graph["nodes"] if n["name"] != "MulBackward0"}
    muls = [n["id"] for n in graph["nodes"] if n["name"] == "MulBackward0"]
    square, scale = muls  # h * h first (closer to the loss), then w * 3
    edges = session.overlays()["grad_norm"]["edges"]
    # h * h reaches w * 3 twice (its two inputs): each carries 2 * h, half of h's gradient
    half = float((reference_h.grad / 2).norm())
    assert edges[f"{square}:{scale}:0:0"] == pytest.approx(half, rel=1e-6)
    assert edges[f"{square}:{scale}:0:1"] == pytest.approx(half, rel=1e-6)
    assert edges[f"{scale}:{by_name['AccumulateGrad']}:0:0"] == pytest.approx(float(reference_w.grad.norm()), rel=1e-6)
    assert session.overlays()["dtype"]["edges"] is None

"""What a session shows is the state as of the shown event: values never run ahead of the
narration, and a "before" is the value before the change. Expected values come from torch
running the same program (or, for the engine's intermediate sums, from torch's own
arithmetic on the contributions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.debug import record_torch


def values(summary):
    return None if summary is None else summary["values"]


# ---- a leaf's .grad before and after ------------------------------------------------------

def stale_leaf(L):
    w = L.tensor([1.0, 2.0], requires_grad=True)
    (w * 2 * L.tensor([1.0, 2.0])).sum().backward()  # w.grad == [2, 4]
    return w


def test_grad_accumulated_before_is_the_grad_before_the_update():
    w_t = stale_leaf(torch)
    before_t = w_t.grad.tolist()
    (w_t * 3).sum().backward()
    after_t = w_t.grad.tolist()

    w = stale_leaf(gradviz)
    session = gradviz.debug.backward((w * 3).sum())
    session.continue_()
    [event] = [e for e in session.events if e["kind"] == "grad_accumulated"]
    assert values(event["before"]) == before_t == [2.0, 4.0]
    assert values(event["after"]) == after_t == [5.0, 7.0]
    leaf = [n for n in session.graph()["nodes"] if n["kind"] == "accumulate_grad"][0]
    accumulated = session.node(leaf["id"])["accumulated"]
    assert values(accumulated["before"]) == before_t
    assert values(accumulated["after"]) == after_t

    w = stale_leaf(gradviz)
    with gradviz.record() as trace:
        (w * 3).sum().backward()
    [event] = [e for e in trace.events if e["kind"] == "grad_accumulated"]
    assert (values(event["before"]), values(event["after"])) == (before_t, after_t)

    w_t = stale_leaf(torch)
    torch_trace = record_torch((w_t * 3).sum())
    [event] = [e for e in torch_trace.events if e["kind"] == "grad_accumulated"]
    assert (values(event["before"]), values(event["after"])) == (before_t, after_t)


def test_the_first_grad_has_no_before():
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    session = gradviz.debug.backward((w * 3).sum())
    session.continue_()
    [event] = [e for e in session.events if e["kind"] == "grad_accumulated"]
    assert event["before"] is None and values(event["after"]) == [3.0, 3.0]
    assert event["text"] == "AccumulateGrad: the gradient was stored as w.grad ([2] float32)."


# ---- input buffers as of the shown event ----------------------------------------------------

def fan_in(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    return x, y, y.sum() + (y * y).sum() + y.mean()


def test_stepping_event_by_event_shows_each_partial_sum():
    _, y_t, loss_t = fan_in(torch)
    torch_trace = record_torch(loss_t)
    # y's producer node (MulBackward0 of x * 2) is the one that receives three contributions
    target_t = [e["node"] for e in torch_trace.events
                if e["kind"] == "buffer_added" and e["contribution"] == 4][0]
    expected = [e["sum"]["values"] for e in torch_trace.events
                if e["kind"] == "buffer_added" and e["node"] == target_t]
    assert len(expected) == 4  # y.sum(), y * y (twice), y.mean()

    _, y, loss = fan_in(gradviz)
    target = y.grad_fn.node_id
    session = gradviz.debug.backward(loss)
    shown = []
    while True:
        event = session.step_event()
        if event is None:
            break
        info = session.node(target)
        if event["kind"] == "buffer_added" and event["node"] == target:
            # the inspector shows exactly the sum as of this event, not the final one
            assert info["pending_buffer"][0]["values"] == event["sum"]["values"]
            assert session.tensor(target, "buffer", 0).tolist() == event["sum"]["values"]
            assert len(info["contributions"]) == event["contribution"]
            shown.append(event["sum"]["values"])
        if info["state"] == "pending" and not info["contributions"]:
            assert info["pending_buffer"] is None
            with pytest.raises(LookupError):
                session.tensor(target, "buffer", 0)
    assert shown == expected


def test_a_node_not_yet_shown_as_run_has_no_gradients_yet():
    """step_event() runs a whole node in the engine; until its node_started is shown, the
    session says it has not run (the engine already has its gradients)."""
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * 2).sum()
    session = gradviz.debug.backward(loss)
    first = session.step_event()
    assert first["kind"] == "node_started"
    exp_node = x.exp().grad_fn  # a different node; use the graph's ExpBackward0 instead
    del exp_node
    exp_id = [n["id"] for n in session.graph()["nodes"] if n["name"] == "ExpBackward0"][0]
    mul_id = [n["id"] for n in session.graph()["nodes"] if n["name"] == "MulBackward0"][0]
    while True:
        event = session.step_event()
        if event["kind"] == "node_started" and event["node"] == mul_id:
            break
    assert session.node(mul_id)["grads_out"] is None
    with pytest.raises(LookupError):
        session.tensor(mul_id, "grads_out", 0)
    assert session.node(exp_id)["pending_buffer"] is None  # nothing shown to reach it yet
    session.continue_()
    assert session.tensor(mul_id, "grads_out", 0).tolist() == [2.0, 2.0]


# ---- hooks: before, after, changed -------------------------------------------------------

def test_a_hook_that_changes_the_gradient_in_place_is_shown_with_its_before():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3

    def times_ten(grad):
        grad.mul_(10)  # in place, returns None

    y.register_hook(times_ten)
    node = y.grad_fn
    node.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * -1, None))
    session = gradviz.debug.backward((y * 1).sum())  # y's gradient: a fresh tensor
    session.continue_()
    [pre] = [e for e in session.events if e["kind"] == "prehook"]
    assert values(pre["before"][0]) == [1.0, 1.0]
    assert values(pre["after"][0]) == [10.0, 10.0]
    assert pre["replaced"] is False and pre["changed"] is True
    assert "changed the gradient in place" in pre["text"]
    [post] = [e for e in session.events if e["kind"] == "posthook"]
    assert values(post["before"][0]) == [30.0, 30.0]
    assert values(post["grad_inputs"][0]) == [-30.0, -30.0]
    assert post["replaced"] is True and post["changed"] is True
    runs = session.node(node.node_id)["hook_runs"]
    assert [run["kind"] for run in runs] == ["prehook", "posthook"]
    assert values(runs[1]["before"][0]) == [30.0, 30.0]
    assert values(runs[1]["after"][0]) == [-30.0, -30.0]
    # torch agrees on the values that reach the leaf
    x_t = torch.tensor([1.0, 2.0], requires_grad=True)
    y_t = x_t * 3
    def times_ten_t(grad):
        grad.mul_(10)

    y_t.register_hook(times_ten_t)
    y_t.grad_fn.register_hook(lambda gi, go: (gi[0] * -1, None))
    (y_t * 1).sum().backward()
    assert x.grad.tolist() == x_t.grad.tolist()


# ---- a custom backward writing into an exposed buffer --------------------------------------

class FusedDouble(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (buffer,) = ctx.input_grad_buffers
        if buffer is not None:
            buffer.add_(grad * 2)
            return None
        return grad * 2


def test_a_write_into_an_exposed_buffer_is_an_event_with_the_new_sum():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    # created first, FusedDouble runs last: h * 5's contribution is already in h's buffer
    loss = FusedDouble.apply(h).sum() + (h * 5).sum()
    session = gradviz.debug.backward(loss)
    session.continue_()
    written = [e for e in session.events
               if e["kind"] == "buffer_added" and e["how"] == "written_by_backward"]
    assert len(written) == 1
    assert written[0]["grad"] is None
    assert values(written[0]["sum"]) == [7.0, 7.0]  # 5 from h * 5, then 2 added in place
    assert "added into the buffer in place by its backward" in written[0]["text"]
    assert x.grad.tolist() == [7.0, 7.0]


# ---- numbers and names ------------------------------------------------------------------

def test_nodes_get_small_numbers_and_narration_tells_same_names_apart():
    big = [gradviz.tensor([1.0]) * 2 for _ in range(200)]  # ids far from 0
    del big
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    b = gradviz.tensor([0.5, 0.5], requires_grad=True)
    loss = (w * b).sum() + (w * 2).sum()
    session = gradviz.debug.backward(loss)
    numbers = sorted(n["number"] for n in session.graph()["nodes"])
    assert numbers == list(range(1, len(numbers) + 1))
    session.continue_()
    texts = [e["text"] for e in session.events]
    assert any(t.startswith("SumBackward0 #") for t in texts)
    assert not any(t.startswith("SumBackward0 is ready") for t in texts)
    assert "AccumulateGrad for w is ready: every gradient it waits for has arrived." in texts
    assert any(t.startswith("AccumulateGrad for b input 0") for t in texts)
    assert "AddBackward0 is ready: every gradient it waits for has arrived." in texts  # unique


def test_record_names_leaves_from_the_code_that_called_backward():
    weight = gradviz.tensor([1.0, 2.0], requires_grad=True)
    bias = gradviz.tensor([0.5], requires_grad=True)
    with gradviz.record() as trace:
        (weight * 2 + bias).sum().backward()
    names = sorted(n["leaf_name"] for n in trace.graph["nodes"] if "leaf_name" in n)
    assert names == ["bias", "weight"]
    assert sorted(n["number"] for n in trace.graph["nodes"]) == list(
        range(1, len(trace.graph["nodes"]) + 1))
    replay = gradviz.debug.replay(trace)
    replay.continue_()
    assert any("AccumulateGrad for weight" in e["text"] for e in replay.events)


def test_torch_traces_are_numbered_and_named_alike():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    layer = torch.nn.Linear(2, 2)
    trace = record_torch((layer(w) * layer(w)).sum(), params=layer)
    numbers = sorted(n["number"] for n in trace.graph["nodes"])
    assert numbers == list(range(1, len(numbers) + 1))
    texts = [e["text"] for e in trace.events]
    assert any(t.startswith("AccumulateGrad for weight") for t in texts)
    assert any(t.startswith("AddmmBackward0 #") for t in texts)  # two of them


# ---- the inspector's facts ---------------------------------------------------------------

def make_scale(L, received):
    class Scale(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            mask = (x > 0).float()
            ctx.mark_non_differentiable(mask)
            return x * k, mask

        @staticmethod
        def backward(ctx, grad, grad_mask):
            (x,) = ctx.saved_tensors
            received.append(None if grad_mask is None else grad_mask.tolist())
            return grad * 2, None

    return Scale


def test_node_reports_saved_tensors_flags_and_release():
    received_t = []
    x_t = torch.tensor([1.0, -2.0], requires_grad=True)
    out_t, _ = make_scale(torch, received_t).apply(x_t, 2.0)
    out_t.sum().backward()

    received = []
    x = gradviz.tensor([1.0, -2.0], requires_grad=True)
    out, mask = make_scale(gradviz, received).apply(x, 2.0)
    node = out.grad_fn
    session = gradviz.debug.backward(out.sum())
    info = session.node(node.node_id)
    assert info["needs_input_grad"] == [True, False]
    assert info["non_differentiable"] == [1] and info["dirty"] == []
    [saved] = info["saved"]
    assert saved["held"] is True and saved["bytes"] == 2 * np.dtype(np.float32).itemsize
    assert saved["version"] == saved["current_version"] == 0
    session.continue_()
    assert received == received_t == [[0.0, 0.0]]  # torch materializes the mask's zeros too
    info = session.node(node.node_id)
    released = [e for e in session.events if e["kind"] == "saved_released"
                and e["node"] == node.node_id][0]
    assert info["saved"] and all(not entry["held"] for entry in info["saved"])
    assert info["released"]["seq"] == released["seq"]
    assert info["materialized"] == [1]

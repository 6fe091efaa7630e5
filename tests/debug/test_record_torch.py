"""``gradviz.debug.record_torch``: a real PyTorch backward, recorded into a gradviz trace.

Every check compares the trace with torch itself: the graph with ``next_functions``, the
order of ``node_started`` with prehooks of our own, gradient summaries and ``.grad`` with a
plain ``backward()`` of an identical model.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

import gradviz
from gradviz.debug import record_torch
from gradviz.debug._torch_recorder import _record, summarize_torch
from gradviz.widget._widget import normalize_graph, normalize_states

# ---- helpers --------------------------------------------------------------------------------

def torch_nodes(roots):
    """Every node reachable from the roots' grad_fns (iterative)."""
    seen, stack = [], [t.grad_fn for t in roots]
    while stack:
        node = stack.pop()
        if node is None or any(node is s for s in seen):
            continue
        seen.append(node)
        stack.extend(child for child, _ in node.next_functions)
    return seen


def capture_order(roots):
    """Our own prehooks on every node: torch's real execution order, independently."""
    order, handles = [], []
    for node in torch_nodes(roots):
        handles.append(node.register_prehook(lambda grads, node=node: order.append(node)))
    return order, handles


def kinds(trace, kind):
    return [e for e in trace.events if e["kind"] == kind]


def check_graph(trace, nodes):
    """Names and edges are torch's, node by node, in next_functions order."""
    ids = {}
    for node_id, node in enumerate(nodes):
        if node is not None:
            ids[node] = node_id
    for info in trace.graph["nodes"]:
        node = nodes[info["id"]]
        if node is None:
            assert info["name"] == "GraphRoot"
            continue
        assert info["name"] == node.name().replace("torch::autograd::", "")
        edges = [(e["target"], e["input_nr"]) for e in trace.graph["edges"]
                 if e["source"] == info["id"]]
        assert edges == [(ids[child], nr) for child, nr in node.next_functions
                         if child is not None]


def check_order(trace, nodes, order):
    started = [nodes[e["node"]] for e in kinds(trace, "node_started")
               if nodes[e["node"]] is not None]
    assert len(started) == len(order)
    assert all(a is b for a, b in zip(started, order))


def check_round_trip_and_replay(trace, tmp_path):
    path = tmp_path / "torch.trace.json"
    trace.save(path)
    loaded = gradviz.load_trace(path)
    assert loaded.events == json.loads(trace.to_json())["events"]
    assert loaded.graph == trace.graph
    replay = gradviz.debug.replay(path)
    replay.continue_()
    assert replay.status == "finished"
    assert set(replay.node_states().values()) <= {"done", "released"}
    normalize_graph(replay.graph())          # what the widget is given, it accepts
    normalize_states(replay.node_states())
    for info in trace.graph["nodes"]:
        assert replay.node(info["id"])["grads_out"] is not None


def assert_summary_of(summary, tensor):
    expected = summarize_torch(tensor)
    assert summary["shape"] == expected["shape"] and summary["dtype"] == expected["dtype"]
    np.testing.assert_allclose(summary["values"], expected["values"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(summary["norm"], expected["norm"], rtol=1e-6)


# ---- models ---------------------------------------------------------------------------------

def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))


def mlp_loss(model):
    torch.manual_seed(1)
    x, target = torch.randn(4, 3), torch.randn(4, 2)
    return torch.nn.functional.mse_loss(model(x), target)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class Broken(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("broken backward")


# ---- tests ----------------------------------------------------------------------------------

def test_mlp_graph_order_gradients_and_replay(tmp_path):
    model, reference = mlp(), mlp()
    mlp_loss(reference).backward()
    loss = mlp_loss(model)
    order, handles = capture_order([loss])
    trace, nodes = _record(loss)
    for handle in handles:
        handle.remove()

    check_graph(trace, nodes)
    check_order(trace, nodes, order)
    names = [e["name"] for e in kinds(trace, "node_started")]
    assert names[0] == "MseLossBackward0" and names.count("AccumulateGrad") == 4
    # .grad is exactly what a plain backward leaves
    for param, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad, expected.grad, rtol=0, atol=0)
    # the summaries are the real gradients
    by_variable = {id(node.variable): node_id for node_id, node in enumerate(nodes)
                   if hasattr(node, "variable")}
    for param in model.parameters():
        node_id = by_variable[id(param)]
        started = [e for e in kinds(trace, "node_started") if e["node"] == node_id]
        assert_summary_of(started[0]["grads_in"][0], param.grad)
        (accumulated,) = [e for e in kinds(trace, "grad_accumulated") if e["node"] == node_id]
        assert accumulated["before"] is None
        assert_summary_of(accumulated["after"], param.grad)
    # narration and bookkeeping like gradviz's own traces
    assert trace.events[-1]["text"] == "Backward finished: 10 nodes ran."
    assert {e["node"] for e in kinds(trace, "node_finished")} == set(range(len(nodes)))
    assert kinds(trace, "saved_released")   # retain_graph=False frees saved tensors
    check_round_trip_and_replay(trace, tmp_path)


def test_custom_function_is_a_custom_node_with_its_saved_tensor(tmp_path):
    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    loss = Cube.apply(x * 2).sum()
    order, handles = capture_order([loss])
    trace, nodes = _record(loss)
    for handle in handles:
        handle.remove()
    check_graph(trace, nodes)
    check_order(trace, nodes, order)
    (cube,) = [n for n in trace.graph["nodes"] if n["name"] == "CubeBackward"]
    assert cube["kind"] == "custom" and cube["label"] == "[3]"
    (created,) = [e for e in kinds(trace, "node_created") if e["node"] == cube["id"]]
    assert [s["label"] for s in created["saved"]] == ["saved_tensors[0]"]
    (released,) = [e for e in kinds(trace, "saved_released") if e["node"] == cube["id"]]
    assert released["count"] == 1 and released["bytes"] == 12
    torch.testing.assert_close(x.grad, 3 * (2 * x.detach()) ** 2 * 2)
    check_round_trip_and_replay(trace, tmp_path)


def test_fan_in_sums_two_contributions_then_accumulates_once(tmp_path):
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = (w * 2 + w.exp()).sum()
    trace, nodes = _record(loss)
    check_graph(trace, nodes)
    (accumulate,) = [n["id"] for n in trace.graph["nodes"] if n["kind"] == "accumulate_grad"]
    started = kinds(trace, "backward_started")[0]
    assert started["dependencies"][str(accumulate)] == 2
    added = [e for e in kinds(trace, "buffer_added") if e["node"] == accumulate]
    assert [e["contribution"] for e in added] == [1, 2]
    assert added[0]["how"] == "stored"
    assert added[1]["how"] in ("accumulated_in_place", "accumulated_out_of_place")
    assert "second contribution" in added[1]["text"]
    # ready only after the second producer finished; accumulated exactly once
    ready = [e["seq"] for e in kinds(trace, "node_ready") if e["node"] == accumulate]
    assert len(ready) == 1 and ready[0] > added[1]["seq"]
    assert len([e for e in kinds(trace, "grad_accumulated") if e["node"] == accumulate]) == 1
    torch.testing.assert_close(w.grad, 2 + w.detach().exp())
    check_round_trip_and_replay(trace, tmp_path)


def test_the_summation_strategy_is_the_one_torch_chose():
    # MulBackward0 returns fresh tensors: torch sums the second into the first in place.
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    trace = record_torch((w * 2 + w * 3).sum())
    assert [e["how"] for e in kinds(trace, "buffer_added")][-2:] == [
        "stored", "accumulated_in_place"]
    # SumBackward0 returns expanded views: the first sum is out of place, into a fresh tensor.
    trace = record_torch(w.sum() + w.sum() + w.sum())
    hows = [e["how"] for e in kinds(trace, "buffer_added") if e["contribution"] > 1]
    assert hows[0] == "accumulated_out_of_place"


def test_multi_root_runs_graph_root_first(tmp_path):
    model, reference = mlp(), mlp()
    out = reference(torch.ones(2, 3))
    torch.autograd.backward([out.sum(), (out ** 2).mean()])
    out = model(torch.ones(2, 3))
    roots = [out.sum(), (out ** 2).mean()]
    order, handles = capture_order(roots)
    trace, nodes = _record(roots)
    for handle in handles:
        handle.remove()
    check_graph(trace, nodes)
    check_order(trace, nodes, order)
    (root,) = trace.graph["roots"]
    assert trace.graph["nodes"][root]["name"] == "GraphRoot"
    assert kinds(trace, "node_started")[0]["node"] == root
    for param, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad, expected.grad, rtol=0, atol=0)
    check_round_trip_and_replay(trace, tmp_path)


def test_hooks_are_removed_recording_twice_gives_the_same_events(tmp_path):
    model, reference = mlp(), mlp()
    loss = mlp_loss(model)
    first = record_torch(loss, retain_graph=True)
    count = len(first.events)
    second = record_torch(loss)
    assert len(first.events) == count            # no hook of the first recording fired again
    strip = [{k: v for k, v in e.items() if k not in ("time", "duration", "seq")}
             for e in first.events]
    # same graph, same steps; the second call also frees and sums into existing .grad
    again = [{k: v for k, v in e.items() if k not in ("time", "duration", "seq")}
             for e in second.events]
    assert [e["kind"] for e in strip if e["kind"] != "saved_released"] == \
        [e["kind"] for e in again if e["kind"] != "saved_released"]
    assert not kinds(first, "saved_released") and kinds(second, "saved_released")
    assert all(e["before"] is not None for e in kinds(second, "grad_accumulated"))
    loss_ref = mlp_loss(reference)
    loss_ref.backward(retain_graph=True)
    loss_ref.backward()
    for param, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad, expected.grad, rtol=0, atol=0)


def test_inputs_limits_the_pass_to_those_leaves():
    model = mlp()
    loss = mlp_loss(model)
    weight = model[2].weight
    order, handles = capture_order([loss])
    trace, nodes = _record(loss, inputs=[weight])
    for handle in handles:
        handle.remove()
    check_order(trace, nodes, order)
    assert [p.grad is not None for p in model.parameters()] == [False, False, True, False]
    started = {e["node"] for e in kinds(trace, "node_started")}
    assert {e["node"] for e in kinds(trace, "node_ready")} == started
    assert kinds(trace, "backward_started")[0]["inputs"] == [
        i for i, n in enumerate(nodes) if getattr(n, "variable", None) is weight]
    with pytest.raises(ValueError, match="leaf tensors of the graph only"):
        record_torch(mlp_loss(model), inputs=[model[0](torch.ones(1, 3))])


def test_an_error_in_backward_is_recorded_and_re_raised():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (Broken.apply(x) * 2).sum()
    with pytest.raises(ValueError, match="broken backward") as info:
        record_torch(loss)
    trace = info.value.gradviz_trace
    assert trace.events[-1]["kind"] == "error"
    assert trace.graph["nodes"][trace.events[-1]["node"]]["name"] == "BrokenBackward"
    assert x.grad is None
    gradviz.instrument.Trace.from_dict(json.loads(trace.to_json()))   # still a valid trace
    assert gradviz.debug.ReplaySession(trace).continue_() is None


def test_bad_arguments_say_what_to_do():
    with pytest.raises(TypeError, match="takes a torch.Tensor"):
        record_torch([1.0])
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        record_torch(x * 2)
    trace = record_torch(x * 2, gradient=torch.ones(3))
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    assert copy.deepcopy(trace.graph)["roots"] == [0]

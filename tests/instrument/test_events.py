"""Every event kind of docs/events.md is emitted at the right moment, carries its payload
and a narration sentence, and validates against the generated schema (checked with the
``jsonschema`` package as an independent validator)."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

import gradviz
from gradviz.autograd.graph import saved_tensors_hooks
from gradviz.instrument import EVENT_KINDS, Recorder, record
from gradviz.instrument._schema import json_schema
from gradviz.instrument._validate import SchemaError, validate

SCHEMA = json_schema()
EVENT_VALIDATOR = jsonschema.Draft202012Validator({"$ref": "#/$defs/Event", "$defs": SCHEMA["$defs"]})


def assert_valid(events):
    for event in events:
        errors = list(EVENT_VALIDATOR.iter_errors(event))
        assert not errors, (event["kind"], [e.message for e in errors])
        validate(SCHEMA, event, definition="Event")  # our own validator agrees
        assert isinstance(event["text"], str) and event["text"].endswith((".", ")")) or \
            event["kind"] == "error"


class TwoOutputs(gradviz.autograd.Function):
    """Returns (2x, 3x); only the first is used, so the second gradient is materialized."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


class AddsIntoBuffer(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        buffers = ctx.input_grad_buffers
        if buffers[0] is not None:
            buffers[0].add_(grad)
            return None
        return grad


class Broken(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("broken backward")


def everything_program():
    """One backward pass that makes the engine take every decision it reports."""
    x = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)
    b = gradviz.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    d = gradviz.tensor([1.5, 2.5, 3.5], dtype=gradviz.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        h = x.exp()                                  # saves its output (packed by the hook)
    h.register_hook(lambda g: g * 1.0)               # tensor pre-hook (replaces)
    u = (h + b)                                      # broadcast: gradient of h is reduced
    first, _unused = TwoOutputs.apply(x)             # grads_materialized
    v = AddsIntoBuffer.apply(x * 1.0)                # buffers_exposed (x*1.0 used twice below)
    w = (x * 1.0)
    mixed = d * x                                    # float64 result: x's gradient is cast
    loss = u.sum() + first.sum() + v.sum() + w.sum() + mixed.sum()
    loss.grad_fn.register_prehook(lambda grads: None)
    loss.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    return loss, x


def test_every_event_kind_is_emitted_and_valid():
    with record() as trace:
        loss, x = everything_program()
        loss.backward()
        y = Broken.apply(gradviz.tensor([1.0], requires_grad=True)).sum()
        with pytest.raises(ValueError):
            y.backward()
    kinds = {e["kind"] for e in trace.events}
    assert kinds == set(EVENT_KINDS), set(EVENT_KINDS) - kinds
    assert_valid(trace.events)
    assert [e["seq"] for e in trace.events] == list(range(len(trace.events)))


def test_node_created_payload_names_the_forward_line_and_the_contract():
    class Scale(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.set_materialize_grads(False)
            ctx.set_output_grad_dtype(gradviz.float64)
            return x * k

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, None

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with record() as trace:
        y = Scale.apply(x, 2.0)  # the forward line
    created = [e for e in trace.events if e["kind"] == "node_created"]
    assert len(created) == 1
    event = created[0]
    assert event["name"] == "ScaleBackward" and event["node_kind"] == "custom"
    assert event["node"] == y.grad_fn.node_id and event["task"] is None
    assert event["needs_input_grad"] == [True, False]
    assert event["materialize_grads"] is False
    assert event["grad_dtypes"] == ["float64"]
    assert event["outputs"] == [{"shape": [2], "dtype": "float64"}]
    assert event["saved"] == [{"slot": 0, "label": "saved_tensors[0]", "shape": [2],
                               "dtype": "float32", "hooked": False}]
    assert event["edges"] == [{"node": x.grad_fn.node_id if x.grad_fn else
                               gradviz_ext_accumulator(x), "input_nr": 0}]
    source = event["source"]
    assert source["file"] == __file__ and source["code"] == "y = Scale.apply(x, 2.0)  # the forward line"
    assert source["function"] == "test_node_created_payload_names_the_forward_line_and_the_contract"
    assert "test_events.py" in event["text"] and "ScaleBackward" in event["text"]
    assert y.grad_fn._forward_site == source
    assert_valid(trace.events)


def gradviz_ext_accumulator(tensor):
    from gradviz_ext import engine

    return engine.grad_accumulator(tensor).node_id


def test_dirty_and_non_differentiable_outputs_are_reported():
    class Inplace(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            mask = b > 0
            ctx.mark_non_differentiable(mask)
            return a, mask

        @staticmethod
        def backward(ctx, grad, _):
            return grad, grad

    leaf = gradviz.tensor([1.0, 2.0], requires_grad=True)
    a = leaf * 1.0
    b = gradviz.tensor([3.0, -4.0], requires_grad=True)
    with record() as trace:
        Inplace.apply(a, b)
    (event,) = [e for e in trace.events if e["kind"] == "node_created"]
    assert event["dirty_outputs"] == [0]
    assert event["non_differentiable_outputs"] == [1]


def test_no_forward_observer_means_no_source_lookup_and_no_site():
    x = gradviz.tensor([1.0], requires_grad=True)
    y = x * 2
    assert y.grad_fn._forward_site is None


def test_saved_tensor_hooks_report_slot_and_hook():
    def pack(t):
        return t.clone()

    def unpack(t):
        return t

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with record() as trace:
        with saved_tensors_hooks(pack, unpack):
            y = (x * x).sum()
        y.backward()
    packed = [e for e in trace.events if e["kind"] == "saved_packed"]
    unpacked = [e for e in trace.events if e["kind"] == "saved_unpacked"]
    mul = y.grad_fn.next_functions[0][0].node_id
    assert [(e["node"], e["slot"], e["label"], e["hook"]) for e in packed] == [
        (mul, 0, "input 0", "test_saved_tensor_hooks_report_slot_and_hook.<locals>.pack"),
        (mul, 1, "input 1", "test_saved_tensor_hooks_report_slot_and_hook.<locals>.pack")]
    assert packed[0]["task"] is None
    assert sorted(e["slot"] for e in unpacked) == [0, 1]
    assert all(e["node"] == mul and e["task"] is not None for e in unpacked)
    # packing is reported right after the node's creation, unpacking while the node runs
    # (the pack hook's own clone() records CloneBackward nodes first)
    created = next(i for i, e in enumerate(trace.events)
                   if e["kind"] == "node_created" and e["node"] == mul)
    assert [e["kind"] for e in trace.events[created + 1:created + 3]] == ["saved_packed"] * 2
    started = next(i for i, e in enumerate(trace.events)
                   if e["kind"] == "node_started" and e["node"] == mul)
    assert all(trace.events.index(e) > started for e in unpacked)
    assert "packed input 0 with the saved-tensor hook" in packed[0]["text"]
    assert_valid(trace.events)


def test_grad_reduced_reports_the_broadcast():
    x = gradviz.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = gradviz.ones(2, 3, requires_grad=True)
    with record() as trace:
        (x + b).sum().backward()
    (event,) = [e for e in trace.events if e["kind"] == "grad_reduced"]
    assert event["slot"] == 0 and event["from_shape"] == [2, 3] and event["to_shape"] == [3]
    assert event["text"] == ("AddBackward0 gradient for input 0 summed from shape [2, 3] to [3] "
                             "(the input was broadcast).")
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_buffer_added_counts_contributions_in_its_text():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    recorder = Recorder()
    from gradviz.autograd._functional import make_graph_task

    a = x * 2
    y = (a + a * 3).sum()
    make_graph_task(y, observer=recorder).run()
    added = [e for e in recorder.events if e["kind"] == "buffer_added" and e["node"] == a.grad_fn.node_id]
    assert [e["contribution"] for e in added] == [1, 2]
    # two MulBackward0 nodes in the graph: the narration tells them apart by number
    assert added[0]["text"] == "MulBackward0 #3 input 0: first contribution, from AddBackward0, stored in the buffer."
    assert added[1]["text"] == ("MulBackward0 #3 input 0: second contribution, from "
                                "MulBackward0 #4, summed into the buffer.")


def test_error_event_carries_the_traceback():
    recorder = Recorder()
    from gradviz.autograd._functional import make_graph_task

    y = Broken.apply(gradviz.tensor([1.0], requires_grad=True)).sum()
    task = make_graph_task(y, observer=recorder)
    with pytest.raises(ValueError):
        task.run()
    (event,) = [e for e in recorder.events if e["kind"] == "error"]
    assert event["exception"] == "ValueError" and event["message"] == "broken backward"
    assert event["node"] == y.grad_fn.next_functions[0][0].node_id
    assert any("broken backward" in line for line in event["traceback"])
    assert event["text"] == "BrokenBackward raised ValueError: broken backward"


def test_our_validator_rejects_what_jsonschema_rejects():
    x = gradviz.tensor([1.0], requires_grad=True)
    with record() as trace:
        (x * 2).sum().backward()
    event = dict(next(e for e in trace.events if e["kind"] == "node_started"))
    bad = [
        {**event, "kind": "node_exploded"},
        {**event, "seq": "1"},
        {**event, "seq": True},
        {**event, "extra": 1},
        {**event, "grads_in": [{"shape": [1]}]},
        {k: v for k, v in event.items() if k != "text"},
        {**event, "time": float("nan")},
    ]
    for item in bad:
        with pytest.raises(SchemaError):
            validate(SCHEMA, item, definition="Event")
        assert not EVENT_VALIDATOR.is_valid(item) or item["time"] != item["time"] or \
            item.get("seq") is True

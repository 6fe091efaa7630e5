"""A golden event stream of a program that exercises every "before" and every sum: a leaf
whose ``.grad`` is accumulated into, a buffer summed in place and out of place, a tensor hook
that changes its gradient in place, a node post-hook that replaces results, a custom Function
whose missing gradient is materialized, and one that adds into an exposed input buffer.

The order of the events, their texts and every value are pinned; an engine or recorder change
that alters them must update the file on purpose:
``GRADVIZ_UPDATE_GOLDEN=1 python -m pytest tests/instrument/test_golden_fidelity.py``.
The values themselves are checked against torch where torch can run the same program
(tests/debug/test_fidelity.py, tests/engine/test_event_oracle_vs_torch.py).
"""

from __future__ import annotations

import json
import os

from test_trace import TRACE_VALIDATOR, normalize

import gradviz
from gradviz.instrument import Trace, record

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "debug", "golden",
                      "fidelity.events.json")


class TwoOut(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_a, grad_b):  # grad_b arrives as materialized zeros
        return grad_a * 2 + grad_b * 3


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


def fidelity_trace() -> Trace:
    w = gradviz.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (w * w).sum().backward()  # w.grad is set: the recorded pass accumulates into it
    h = w * 1.5
    used_once, _ = TwoOut.apply(h)

    def times_ten(grad):
        grad.mul_(10)

    y = h.tanh()
    y.register_hook(times_ten)
    squared = y * y
    # a post-hook on a node that does not feed h: h's buffer may still be exposed to FusedDouble
    squared.grad_fn.register_hook(
        lambda grad_inputs, grad_outputs: tuple(g * -1 for g in grad_inputs))
    fused = FusedDouble.apply(h)
    loss = fused.sum() + squared.sum() + used_once.sum() + (h * 4).mean()
    with record() as trace:
        loss.backward()
    return trace


def test_golden_event_stream_with_every_before_and_sum():
    data = normalize(fidelity_trace().to_dict())
    if os.environ.get("GRADVIZ_UPDATE_GOLDEN") == "1":
        with open(GOLDEN, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
    with open(GOLDEN, encoding="utf-8") as handle:
        golden = json.load(handle)
    assert [e["kind"] for e in data["events"]] == [e["kind"] for e in golden["events"]]
    assert [e["text"] for e in data["events"]] == [e["text"] for e in golden["events"]]
    assert data == golden
    TRACE_VALIDATOR.validate(golden)
    Trace.from_dict(golden)


def test_the_golden_program_covers_what_it_claims():
    events = fidelity_trace().events
    hows = {e["how"] for e in events if e["kind"] == "buffer_added"}
    assert {"stored", "accumulated_in_place", "accumulated_out_of_place",
            "written_by_backward"} <= hows
    [accumulated] = [e for e in events if e["kind"] == "grad_accumulated"]
    assert accumulated["before"]["values"] == [2.0, -4.0, 1.0]  # (w * w).sum()'s gradient
    assert any(e["kind"] == "prehook" and e["changed"] and not e["replaced"] for e in events)
    assert any(e["kind"] == "posthook" and e["replaced"] for e in events)
    assert any(e["kind"] == "grads_materialized" for e in events)

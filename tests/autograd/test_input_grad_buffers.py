"""``ctx.input_grad_buffers`` (docs/function_contract.md, "input_grad_buffers"). No
released PyTorch has it, so gradients are checked against torch running the same math
without the fused accumulation, and exposure against the rules on that page."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.instrument._recorder import Recorder
from gradviz_ext import engine as _engine


def f64(m, values, requires_grad=True):
    return m.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def fusing_mul(log):
    """y = x * w; backward adds grad_x into x's buffer when one is offered."""
    class FusedMul(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            x_buffer, w_buffer = ctx.input_grad_buffers
            log.append((x_buffer is not None, w_buffer is not None,
                        None if x_buffer is None else x_buffer.tolist()))
            grad_x = g * w
            if x_buffer is not None:
                x_buffer.add_(grad_x)
                grad_x = None
            return grad_x, g * x
    return FusedMul


def reference(shape):
    x, w = f64(torch, [1.0, 2.0]), f64(torch, [3.0, 4.0])
    if shape == "A":
        ((x * w) * x).sum().backward()
    else:
        v = x * 2
        (x * v).sum().backward()
    return x.grad, w.grad


def test_shape_a_offers_the_earlier_contribution():
    log = []
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul(log).apply(x, w)
    (y * x).sum().backward()
    assert log == [(True, False, [3.0, 8.0])]  # Mul's contribution y = x * w
    tx, tw = reference("A")
    assert x.grad.tolist() == tx.tolist() and w.grad.tolist() == tw.tolist()


def test_shape_b_offers_nothing_because_the_function_runs_first():
    log = []
    x = f64(gradviz, [1.0, 2.0])
    v = x * 2
    fusing_mul(log).apply(x, v).sum().backward()
    assert log == [(False, False, None)]
    tx, _ = reference("B")
    assert x.grad.tolist() == tx.tolist()


def test_leaf_hook_fires_once_with_the_completed_sum_and_grad_is_not_the_buffer():
    log, hooked = [], []
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    x.grad = gradviz.tensor([100.0, 100.0], dtype=gradviz.float64)
    x.register_hook(lambda g: hooked.append(g.tolist()))
    y = fusing_mul(log).apply(x, w)
    (y * x).sum().backward()
    assert log[0][2] == [3.0, 8.0]  # the execution-local buffer, not .grad (100s)
    assert hooked == [[6.0, 16.0]]
    assert x.grad.tolist() == [106.0, 116.0]


def test_autograd_grad_returns_the_completed_buffer_without_touching_grad():
    log = []
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul(log).apply(x, w)
    gx, gw = gradviz.autograd.grad((y * x).sum(), [x, w])
    assert log[0][0] is True
    assert gx.tolist() == [6.0, 16.0] and gw.tolist() == [1.0, 4.0]
    assert x.grad is None and w.grad is None


def test_non_leaf_input_with_three_producers_accumulates_in_the_owned_sum():
    log = []
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    h = x * 1.0
    y = fusing_mul(log).apply(h, w)
    (y * h + h * h).sum().backward()
    assert log[0][0] is True
    tx, tw = f64(torch, [1.0, 2.0]), f64(torch, [3.0, 4.0])
    th = tx * 1.0
    ((th * tw) * th + th * th).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() and w.grad.tolist() == tw.grad.tolist()


def test_one_entry_per_forward_argument_and_none_for_non_tensors():
    seen = []

    class WithScalar(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, scale, x):
            return x * scale

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.input_grad_buffers)
            return None, g * 2.0

    x = f64(gradviz, [1.0, 2.0])
    (WithScalar.apply(2.0, x) * x).sum().backward()
    assert len(seen[0]) == 2 and seen[0][0] is None and seen[0][1] is not None


@pytest.mark.parametrize("condition", ["create_graph", "anomaly", "post_hook"])
def test_unavailable_conditions(condition):
    log = []
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul(log).apply(x, w)
    if condition == "post_hook":
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    loss = (y * x).sum()
    previous = _engine.set_anomaly_enabled(condition == "anomaly")
    try:
        gradviz.autograd.grad(loss, [x, w], create_graph=condition == "create_graph")
    finally:
        _engine.set_anomaly_enabled(previous)
    assert log == [(False, False, None)]


def test_unavailable_outside_a_running_backward():
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul([]).apply(x, w)
    with pytest.raises(RuntimeError, match="only available while its backward is running"):
        y.grad_fn.input_grad_buffers


def test_unavailable_from_a_pre_hook_of_the_node():
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul([]).apply(x, w)
    node = y.grad_fn
    node.register_prehook(lambda grads: node.input_grad_buffers)
    with pytest.raises(RuntimeError, match="only available while its backward is running"):
        (y * x).sum().backward()


def test_nested_backward_after_receiving_a_buffer_raises():
    class Nested(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (buffer,) = ctx.input_grad_buffers
            assert buffer is not None
            z = gradviz.tensor([1.0], requires_grad=True)
            with gradviz.enable_grad():
                gradviz.autograd.grad((z * 2).sum(), z)
            return g * 2

    x = f64(gradviz, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="after it received a buffer from ctx.input_grad_buffers"):
        (Nested.apply(x) * x).sum().backward()


def test_nested_backward_without_a_buffer_is_allowed():
    class Nested(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (buffer,) = ctx.input_grad_buffers
            assert buffer is None
            z = gradviz.tensor([1.0], requires_grad=True)
            with gradviz.enable_grad():
                gradviz.autograd.grad((z * 2).sum(), z)
            return g * 2

    x = f64(gradviz, [1.0, 2.0])
    Nested.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_the_observer_reports_each_entry_and_its_reason():
    recorder = Recorder()
    x, w = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    y = fusing_mul([]).apply(x, w)
    previous = _engine.set_default_observer(recorder)
    try:
        (y * x).sum().backward()
    finally:
        _engine.set_default_observer(previous)
    (event,) = [e for e in recorder.events if e["kind"] == "buffers_exposed"]
    assert event["node"] == y.grad_fn.node_id
    assert [(i["input"], i["exposed"]) for i in event["inputs"]] == [(0, True), (1, False)]
    assert "copied into an engine-owned buffer" in event["inputs"][0]["reason"]
    assert event["inputs"][1]["reason"] == "no earlier contribution"


def test_engine_api_reports_the_running_task_and_node():
    seen = []

    class Probe(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            task = _engine.current_graph_task()
            seen.append(task.current is ctx)
            return g * 2

    Probe.apply(f64(gradviz, [1.0])).sum().backward()
    assert seen == [True] and _engine.current_graph_task() is None

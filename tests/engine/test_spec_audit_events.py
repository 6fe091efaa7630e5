"""The events the engine emits while it runs a custom Function's backward, checked against
the order of docs/design.md, "The engine" (tensor pre-hooks, node pre-hooks, zero-materialization,
input buffers, backward, validation, post-hooks, release, hand-off) and against the contract
of docs/function_contract.md (rules 3, 9, 11, 15). Gradviz-only facts: torch has no such events,
so the gradients themselves are compared with torch where the program can run in both."""

from __future__ import annotations

import pytest
import torch

import gradviz
from gradviz.instrument import record


def kinds_of(trace, node=None, kinds=None):
    return [e["kind"] for e in trace.events
            if (node is None or e["node"] == node) and (kinds is None or e["kind"] in kinds)]


def two_outputs(m, *, declare=None, materialize=True, save=True):
    class TwoOut(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if save:
                ctx.save_for_backward(x)
            if declare is not None:
                ctx.set_output_grad_dtype(*declare)
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.seen = (g1, g2)
            return g1.to(m.float32) * 2 + (0 if g2 is None else g2.to(m.float32) * 3)
    return TwoOut


def test_a_custom_node_reports_its_steps_in_the_engines_order():
    Fn = two_outputs(gradviz)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        a.register_hook(lambda g: g)
        a.grad_fn.register_prehook(lambda grads: None)
        a.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
        a.sum().backward()
    node = a.grad_fn.node_id
    assert kinds_of(trace, node)[1:] == [  # after node_created
        "buffer_added", "node_ready", "node_started", "prehook", "prehook",
        "grads_materialized", "posthook", "saved_released", "node_finished"]
    pre = [e for e in trace.events if e["node"] == node and e["kind"] == "prehook"]
    assert [e["slot"] for e in pre] == [0, -1]  # the tensor hook, then the node's pre-hook
    (mat,) = [e for e in trace.events if e["kind"] == "grads_materialized"]
    assert mat["slots"] == [1]
    # the successor's buffer gets the result only after the node finished
    finished = kinds_of(trace).index("node_finished", kinds_of(trace).index("saved_released"))
    added = [i for i, e in enumerate(trace.events)
             if e["kind"] == "buffer_added" and e["producer"] == node]
    assert added and all(i > finished for i in added)


@pytest.mark.parametrize("declare", [None, (None, None), ("f64", None), (None, "f64")])
def test_zeros_for_an_unused_output_are_reported_whatever_the_declared_dtype(declare):
    # contract rules 3 and 15: the zeros arrive in the declared dtype, or the output's own dtype
    # when the declaration is None; grads_materialized reports them either way
    dtypes = None if declare is None else tuple(
        None if d is None else gradviz.float64 for d in declare)
    Fn = two_outputs(gradviz, declare=dtypes)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        a.sum().backward()
    ctx = a.grad_fn
    events = [e for e in trace.events if e["kind"] == "grads_materialized"]
    assert [e["slots"] for e in events] == [[1]] and events[0]["node"] == ctx.node_id
    g2 = ctx.seen[1]
    want = gradviz.float64 if (declare is not None and declare[1] == "f64") else gradviz.float32
    assert g2.dtype == want and g2.tolist() == [0.0, 0.0]
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    two_outputs(torch).apply(tx)[0].sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_no_materialization_event_when_materialize_grads_is_off():
    Fn = two_outputs(gradviz, materialize=False)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        a.sum().backward()
    assert "grads_materialized" not in kinds_of(trace)
    assert a.grad_fn.seen[1] is None
    created = [e for e in trace.events
               if e["kind"] == "node_created" and e["name"] == "TwoOutBackward"]
    assert created[0]["materialize_grads"] is False


def test_non_differentiable_sort_indices_get_int64_zeros_and_an_event():
    class Sort(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return s, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            ctx.seen = g_idx
            (idx,) = ctx.saved_tensors
            out = gradviz.zeros_like(g)
            out.index_add_(0, idx, g)
            return out

    with record() as trace:
        x = gradviz.tensor([3.0, 1.0, 2.0], requires_grad=True)
        s, idx = Sort.apply(x)
        s.sum().backward()
    (created,) = [e for e in trace.events
                  if e["kind"] == "node_created" and e["name"] == "SortBackward"]
    assert created["non_differentiable_outputs"] == [1]
    assert created["outputs"][1] == {"shape": [3], "dtype": "int64"}
    (mat,) = [e for e in trace.events if e["kind"] == "grads_materialized"]
    assert mat["slots"] == [1]
    assert s.grad_fn.seen.dtype == gradviz.int64 and s.grad_fn.seen.tolist() == [0, 0, 0]


def test_saved_tensors_are_released_once_and_only_without_retain_graph():
    Fn = two_outputs(gradviz)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        loss = a.sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            a.grad_fn.saved_tensors
    node = a.grad_fn.node_id
    released = [e for e in trace.events if e["kind"] == "saved_released" and e["node"] == node]
    assert [(e["task"], e["count"], e["bytes"]) for e in released] == [(1, 1, 8)]
    started = [e for e in trace.events if e["kind"] == "backward_started"]
    assert [(e["retain_graph"], e["create_graph"]) for e in started[:2]] == [(True, False),
                                                                              (False, False)]


def test_create_graph_implies_retain_graph_and_releases_nothing():
    Fn = two_outputs(gradviz)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        gradviz.autograd.grad(a.sum(), x, create_graph=True)
    (started,) = [e for e in trace.events if e["kind"] == "backward_started"]
    assert started["retain_graph"] is True and started["create_graph"] is True
    assert "saved_released" not in kinds_of(trace)


def test_a_function_that_saves_nothing_reports_no_release():
    Fn = two_outputs(gradviz, save=False)
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        loss = a.sum()
        loss.backward()
        loss.backward()  # contract rule 9: nothing saved, so a second pass works
    assert "saved_released" not in kinds_of(trace, a.grad_fn.node_id)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tloss = two_outputs(torch, save=False).apply(tx)[0].sum()
    tloss.backward()
    tloss.backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_a_leaf_used_twice_is_accumulated_once_with_the_sum():
    class Both(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, g * 2

    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        hook_calls = []
        x.register_hook(lambda g: hook_calls.append(g.tolist()))
        y = Both.apply(x, x)
        accumulate = y.grad_fn.next_functions[0][0]
        y.sum().backward()
    leaf = accumulate.node_id
    leaf_events = [e for e in trace.events if e["node"] == leaf
                   and e["kind"] in ("buffer_added", "grad_accumulated")]
    added = [e for e in leaf_events if e["kind"] == "buffer_added"]
    assert [e["contribution"] for e in added] == [1, 2]
    assert [e["kind"] for e in leaf_events][-1] == "grad_accumulated"
    assert len([e for e in trace.events if e["kind"] == "grad_accumulated"]) == 1
    assert hook_calls == [[3.0, 3.0]]
    tbody = {"forward": staticmethod(lambda ctx, x, y: x * y),
             "backward": staticmethod(lambda ctx, g: (g, g * 2))}
    TBoth = type("Both", (torch.autograd.Function,), tbody)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    TBoth.apply(tx, tx).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_a_gradient_returned_in_another_dtype_is_cast_and_reported():
    class Double(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.double() * 2

    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        y = Double.apply(x)
        y.sum().backward()
    (cast,) = [e for e in trace.events if e["kind"] == "grad_cast"]
    assert (cast["node"], cast["slot"], cast["from_dtype"], cast["to_dtype"]) == (
        y.grad_fn.node_id, 0, "float64", "float32")
    assert x.grad.dtype == gradviz.float32 and x.grad.tolist() == [2.0, 2.0]


def test_a_declared_dtype_is_cast_at_the_producer_so_the_functions_hooks_see_it():
    seen = []
    Fn = two_outputs(gradviz, declare=(gradviz.float64, None))
    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Fn.apply(x)
        a.grad_fn.register_prehook(lambda grads: seen.append(grads[0].dtype))
        a.sum().backward()
    assert seen == [gradviz.float64]
    (cast,) = [e for e in trace.events if e["kind"] == "grad_cast"]
    assert cast["node"] != a.grad_fn.node_id  # cast by SumBackward0, a's consumer
    assert (cast["from_dtype"], cast["to_dtype"]) == ("float32", "float64")
    assert x.grad.dtype == gradviz.float32


def test_an_error_in_backward_ends_the_task_with_an_error_event():
    class Broken(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return gradviz.ones(7)

    with record() as trace:
        x = gradviz.ones(2, 3, requires_grad=True)
        y = Broken.apply(x)
        with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
            y.sum().backward()
    assert trace.events[-1]["kind"] == "error"
    assert trace.events[-1]["node"] == y.grad_fn.node_id
    assert "backward_finished" not in kinds_of(trace)
    tx = torch.ones(2, 3, requires_grad=True)

    class TBroken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(7)

    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        TBroken.apply(tx).sum().backward()


def test_buffers_exposed_is_reported_only_when_backward_reads_the_property():
    class Reads(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (buffer,) = ctx.input_grad_buffers
            if buffer is not None:
                buffer.add_(g * 2)
                return None
            return g * 2

    with record() as trace:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        y = Reads.apply(x)
        (y * x).sum().backward()  # shape (A): Mul runs first, x's buffer is offered
    node = y.grad_fn.node_id
    order = kinds_of(trace, node)
    assert (order.index("node_started") < order.index("buffers_exposed")
            < order.index("node_finished"))
    (exposed,) = [e for e in trace.events if e["kind"] == "buffers_exposed"]
    assert [i["exposed"] for i in exposed["inputs"]] == [True]
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ((tx * 2) * tx).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_a_leafs_buffer_holds_only_this_passes_contributions_not_its_old_grad():
    # spec 000, Note on leaf inputs: the entry is the execution-local InputBuffer, not .grad;
    # AccumulateGrad then runs once with the completed buffer (one hook call, with the sum)
    def run(m, fuse):
        class M(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x * w

            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                if fuse:
                    x_buffer, w_buffer = ctx.input_grad_buffers
                    seen.append((x_buffer.tolist(), w_buffer, x.grad.tolist()))
                    x_buffer.add_(g * w)
                    return None, g * x
                return g * w, g * x

        seen = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        w = m.tensor([3.0, 4.0], requires_grad=True)
        x.grad = m.tensor([100.0, 100.0])
        hooks = []
        x.register_hook(lambda g: hooks.append(g.tolist()))
        (M.apply(x, w) * x).sum().backward()  # shape (A): Mul runs before M
        return seen, hooks, x.grad.tolist(), w.grad.tolist()

    seen, hooks, x_grad, w_grad = run(gradviz, fuse=True)
    assert seen == [([3.0, 8.0], None, [100.0, 100.0])]  # Mul's x * w, not .grad
    _, t_hooks, t_x_grad, t_w_grad = run(torch, fuse=False)
    assert (hooks, x_grad, w_grad) == (t_hooks, t_x_grad, t_w_grad)


def test_unpack_is_reported_on_every_access_and_validation_precedes_post_hooks():
    # contract rule 12: pack once per non-None tensor at save time, unpack on every access;
    # docs/design.md: validate (cast, reduce) -> post-hooks -> release -> node_finished
    def program(m, log):
        class Saves(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, None, y)
                return x * y

            @staticmethod
            def backward(ctx, g):
                x, _, y = ctx.saved_tensors
                x, _, y = ctx.saved_tensors
                return (g * y).double(), m.ones(4, 2) * x

        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.tensor([3.0, 4.0], requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                                  lambda t: (log.append("unpack"), t)[1]):
            z = Saves.apply(x, y)
        z.grad_fn.register_hook(lambda grad_inputs, grad_outputs: log.append("post"))
        z.sum().backward()
        return z, x, y

    log = []
    with record() as trace:
        z, x, y = program(gradviz, log)
    t_log = []
    _, tx, ty = program(torch, t_log)
    assert log == t_log == ["pack", "pack", "unpack", "unpack", "unpack", "unpack", "post"]
    assert x.grad.tolist() == tx.grad.tolist() and y.grad.tolist() == ty.grad.tolist()
    events = [e for e in trace.events if e["node"] == z.grad_fn.node_id]
    assert [e["kind"] for e in events] == [
        "node_created", "saved_packed", "saved_packed", "buffer_added", "node_ready",
        "node_started", "saved_unpacked", "saved_unpacked", "saved_unpacked", "saved_unpacked",
        "grad_cast", "grad_reduced", "posthook", "saved_released", "node_finished"]
    packed = [e["label"] for e in events if e["kind"] == "saved_packed"]
    assert packed == ["saved_tensors[0]", "saved_tensors[2]"]
    cast = next(e for e in events if e["kind"] == "grad_cast")
    reduced = next(e for e in events if e["kind"] == "grad_reduced")
    assert (cast["slot"], cast["from_dtype"], cast["to_dtype"]) == (0, "float64", "float32")
    assert (reduced["slot"], reduced["from_shape"], reduced["to_shape"]) == (1, [4, 2], [2])

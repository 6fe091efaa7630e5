"""Tensor hooks (``register_hook``) and node pre/post-hooks: what they receive, what a returned
value replaces, and the order they run in, all compared with torch."""

from __future__ import annotations

import numpy as np
import torch
from torch_compare import as_numpy, assert_same_error, assert_tensors_equal, node_name

import gradviz


def leaf(m, values):
    return m.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def snap(value):
    """A hook argument as plain data: tensors to numpy, tuples element by element."""
    if isinstance(value, tuple):
        return tuple(snap(v) for v in value)
    if value is None:
        return None
    return as_numpy(value).copy()


def assert_same_values(a, b, label):
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b), (label, a, b)
        for x, y in zip(a, b):
            assert_same_values(x, y, label)
    elif a is None or b is None:
        assert a is None and b is None, (label, a, b)
    else:
        assert a.shape == b.shape and a.dtype == b.dtype, (label, a, b)
        np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=label)


def assert_logs_equal(gv_log, th_log):
    assert [entry[0] for entry in gv_log] == [entry[0] for entry in th_log]
    for (label, gv_value), (_, th_value) in zip(gv_log, th_log):
        assert_same_values(gv_value, th_value, label)


def test_hook_order_around_one_node():
    """Output-tensor hooks, node pre-hooks, backward, node post-hooks, input-tensor hooks."""
    def run(m):
        log = []
        x = leaf(m, [0.5, -1.0])
        a = x * 3.0
        y = a.exp()
        node = y.grad_fn
        y.register_hook(lambda g: log.append(("y tensor hook", snap(g))))
        node.register_prehook(lambda go: log.append(("exp prehook", snap(go))))
        node.register_hook(lambda gi, go: log.append(("exp posthook", (snap(gi), snap(go)))))
        a.register_hook(lambda g: log.append(("a tensor hook", snap(g))))
        x.register_hook(lambda g: log.append(("x tensor hook", snap(g))))
        a.grad_fn.register_prehook(lambda go: log.append(("mul prehook", snap(go))))
        a.grad_fn.register_hook(lambda gi, go: log.append(("mul posthook", (snap(gi), snap(go)))))
        y.backward(m.tensor([1.0, 2.0], dtype=m.float64))
        return log

    assert_logs_equal(run(gradviz), run(torch))


def test_tensor_hook_replaces_the_gradient_of_a_non_leaf():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * x
        a.register_hook(lambda g: g * 10.0)
        a.sum().backward()
        return x.grad

    assert_tensors_equal(run(gradviz), run(torch))


def test_tensor_hooks_chain_in_registration_order():
    def run(m):
        calls = []
        x = leaf(m, [0.5, -1.0])
        a = x.sin()
        a.register_hook(lambda g: (calls.append(("first", snap(g))), g + 1.0)[1])
        a.register_hook(lambda g: (calls.append(("second", snap(g))), g * 2.0)[1])
        a.register_hook(lambda g: calls.append(("third", snap(g))))  # returns None: no change
        a.sum().backward()
        return calls, x.grad

    (gv_calls, gv_grad), (th_calls, th_grad) = run(gradviz), run(torch)
    assert_logs_equal(gv_calls, th_calls)
    assert_tensors_equal(gv_grad, th_grad)


def test_leaf_hook_fires_once_with_the_summed_gradient():
    def run(m):
        calls = []
        x = leaf(m, [0.5, -1.0])
        x.register_hook(lambda g: calls.append(("x", snap(g))))
        (x * x + x.exp() + x * 3.0).sum().backward()
        return calls, x.grad

    (gv_calls, gv_grad), (th_calls, th_grad) = run(gradviz), run(torch)
    assert_logs_equal(gv_calls, th_calls)
    assert_tensors_equal(gv_grad, th_grad)


def test_leaf_hook_result_is_what_gets_accumulated():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        x.register_hook(lambda g: g * 0.5)
        (x * 4.0).sum().backward()
        (x * 4.0).sum().backward()
        return x.grad

    assert_tensors_equal(run(gradviz), run(torch))


def test_removed_hook_does_not_run():
    def run(m):
        calls = []
        x = leaf(m, [0.5, -1.0])
        a = x * 2.0
        handle = a.register_hook(lambda g: calls.append("removed") or g * 100.0)
        a.register_hook(lambda g: calls.append("kept"))
        handle.remove()
        a.sum().backward()
        return calls, x.grad

    (gv_calls, gv_grad), (th_calls, th_grad) = run(gradviz), run(torch)
    assert gv_calls == th_calls
    assert_tensors_equal(gv_grad, th_grad)


def test_node_prehook_replaces_grad_outputs():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        y = x.exp()
        y.grad_fn.register_prehook(lambda go: (go[0] * 3.0,))
        y.sum().backward()
        return x.grad

    assert_tensors_equal(run(gradviz), run(torch))


def test_node_posthook_replaces_grad_inputs():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        w = leaf(m, [2.0, 3.0])
        y = x * w
        y.grad_fn.register_hook(lambda gi, go: (gi[0] * -1.0, gi[1]))
        y.sum().backward()
        return x.grad, w.grad

    for gv, th in zip(run(gradviz), run(torch)):
        assert_tensors_equal(gv, th)


def test_posthook_sees_none_for_inputs_without_grad():
    def run(m):
        seen = []
        x = leaf(m, [0.5, -1.0])
        c = m.tensor([2.0, 3.0], dtype=m.float64)
        y = x * c
        y.grad_fn.register_hook(lambda gi, go: seen.append(("post", (snap(gi), snap(go)))))
        y.sum().backward()
        return seen

    assert_logs_equal(run(gradviz), run(torch))


def test_prehook_wrong_number_of_values():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        y = x.exp()

        def two_values(grad_outputs):
            return (grad_outputs[0], grad_outputs[0])

        y.grad_fn.register_prehook(two_values)
        y.sum().backward()

    gv, _ = assert_same_error(run, "has returned an incorrect number of values (got 2, but expected 1)")
    assert "two_values" in str(gv)


def test_hook_on_tensor_that_does_not_require_grad():
    def run(m):
        m.tensor([1.0, 2.0]).register_hook(lambda g: g)

    assert_same_error(run, "cannot register a hook on a tensor that doesn't require gradient")


def test_prehooks_on_every_node_see_the_same_gradients_as_torch():
    def run(m):
        log = []
        x = leaf(m, [0.5, -1.0, 2.0])
        w = leaf(m, [1.5, 0.5, -0.5])
        h = (x * w).tanh()
        y = (h * h + w.exp() * h).sum()
        stack, seen = [y.grad_fn], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)

            def hook(go, name=node_name(node), tag=len(seen)):  # noqa: B008 - bound per node, on purpose
                log.append((f"{name}#{tag}", snap(go)))
            node.register_prehook(hook)
            stack.extend(n for n, _ in node.next_functions if n is not None)
        y.backward()
        return log

    assert_logs_equal(run(gradviz), run(torch))


def test_hook_handles_work_as_context_managers():
    def run(m):
        calls = []
        x = leaf(m, [0.5])
        a = x * 2.0
        with a.register_hook(lambda g: calls.append("inside")):
            pass
        a.sum().backward()
        return calls

    assert run(gradviz) == run(torch) == []

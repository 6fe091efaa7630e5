"""The rest of the hook and Node API, compared with torch: ``retain_grad``/``retains_grad`` and
the non-leaf ``.grad`` warning, ``register_post_accumulate_grad_hook``, what a hook may return
(PyTorch's checks), hooks on AccumulateGrad, and the Node's ``name``, ``next_functions``,
``metadata`` and ``_sequence_nr``. (``test_hooks.py`` covers the order and replacement basics.)"""

from __future__ import annotations

import warnings

import pytest
import torch
from test_hooks import assert_logs_equal, leaf, snap
from torch_compare import assert_same_error, assert_tensors_equal, node_name

import gradviz

NON_LEAF_WARNING = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


def both(run):
    return run(gradviz), run(torch)


# ---- retain_grad and the .grad warning ------------------------------------------------

def test_retain_grad_populates_a_non_leaf_grad():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * 3.0
        a.retain_grad()
        (a * a).sum().backward()
        return a.retains_grad, x.retains_grad, a.grad, x.grad

    (gv_flags, gv_x_flag, *gv), (th_flags, th_x_flag, *th) = both(run)
    assert (gv_flags, gv_x_flag) == (th_flags, th_x_flag) == (True, False)
    for g, t in zip(gv, th):
        assert_tensors_equal(g, t)


def test_retained_grad_sees_the_hooks_of_the_tensor_even_those_registered_later():
    """PyTorch runs the retain_grad hook after every other hook of the tensor."""
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * 2.0
        a.register_hook(lambda g: g + 1.0)
        a.retain_grad()
        a.register_hook(lambda g: g * 100.0)
        a.sum().backward()
        return a.grad, x.grad

    for g, t in zip(*both(run)):
        assert_tensors_equal(g, t)


def test_retained_grad_accumulates_over_backward_calls():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * 2.0
        a.retain_grad()
        a.sum().backward(retain_graph=True)
        first = a.grad
        (a * a).sum().backward()
        return first is a.grad, first, a.grad

    (gv_same, *gv), (th_same, *th) = both(run)
    assert gv_same == th_same
    for g, t in zip(gv, th):
        assert_tensors_equal(g, t)


def test_retained_grad_under_create_graph_is_differentiable():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * 2.0
        a.retain_grad()
        (a * a * a).sum().backward(create_graph=True)
        name, first = node_name(a.grad.grad_fn), a.grad
        # the second pass runs a's node again, so its retain_grad hook adds to a.grad
        (second,) = m.autograd.grad(first.sum(), x)
        return name, first, second, a.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's create_graph reference-cycle warning
        (gv_name, *gv), (th_name, *th) = both(run)
    assert gv_name == th_name == "CloneBackward0"
    for g, t in zip(gv, th):
        assert_tensors_equal(g, t)


def test_retain_grad_follows_the_tensor_through_an_in_place_op():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        a = x * 2.0
        a.retain_grad()
        a.mul_(3.0)
        (a * a).sum().backward()
        return a.grad, x.grad

    for g, t in zip(*both(run)):
        assert_tensors_equal(g, t)


def test_retain_grad_on_a_leaf_is_a_no_op_and_on_a_constant_an_error():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        x.retain_grad()
        return x.retains_grad

    assert run(gradviz) is run(torch) is False
    assert_same_error(lambda m: m.tensor([1.0]).retain_grad(),
                      "can't retain_grad on Tensor that has requires_grad=False")


@pytest.mark.parametrize("module", [gradviz, torch], ids=["gradviz", "torch"])
def test_reading_grad_of_a_non_leaf_warns_like_torch(module):
    x = leaf(module, [0.5, -1.0])
    a = x * 2.0
    with pytest.warns(UserWarning, match="not a leaf Tensor is being accessed") as record:
        assert a.grad is None
    assert record[0].filename == __file__  # points at the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None  # a leaf: no warning
        a.retain_grad()
        assert a.grad is None  # retains grad: no warning


def test_grad_can_be_assigned_and_deleted():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        x.grad = m.tensor([1.0, 1.0], dtype=m.float64)
        (x * 2.0).sum().backward()
        total = x.grad
        del x.grad
        return total, x.grad

    for g, t in zip(*both(run)):
        assert_tensors_equal(g, t)


# ---- post-accumulate-grad hooks ---------------------------------------------------------

def test_post_accumulate_grad_hook_sees_the_updated_grad_and_runs_in_torchs_order():
    def run(m):
        log = []
        x = leaf(m, [0.5, -1.0])
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post-accumulate", snap(t.grad))))
        x.register_hook(lambda g: log.append(("tensor hook", snap(g))))
        accumulator = (x * 1.0).grad_fn.next_functions[0][0]
        accumulator.register_prehook(lambda go: log.append(("node prehook", snap(go))))
        accumulator.register_hook(lambda gi, go: log.append(("node posthook", (snap(gi), snap(go)))))
        (x * 2.0).sum().backward()
        (x * 3.0).sum().backward()
        return log

    assert_logs_equal(*both(run))


def test_post_accumulate_grad_hook_removal_and_autograd_grad():
    def run(m):
        calls = []
        x = leaf(m, [0.5, -1.0])
        handle = x.register_post_accumulate_grad_hook(lambda t: calls.append("hook"))
        m.autograd.grad((x * 2.0).sum(), x)  # .grad untouched: no call
        (x * 2.0).sum().backward()
        handle.remove()
        (x * 2.0).sum().backward()
        return calls

    assert run(gradviz) == run(torch) == ["hook"]


def test_post_accumulate_grad_hook_errors():
    assert_same_error(
        lambda m: (leaf(m, [1.0]) * 2.0).register_post_accumulate_grad_hook(lambda t: None),
        "post accumulate grad hooks cannot be registered on non-leaf tensors")
    assert_same_error(
        lambda m: m.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None),
        "cannot register a hook on a tensor that doesn't require gradient")

    def returns_a_value(m):
        x = leaf(m, [1.0])
        x.register_post_accumulate_grad_hook(lambda t: 5)
        (x * 2.0).sum().backward()

    assert_same_error(returns_a_value, "expected Variable, but hook returned 'int'")


# ---- what a hook may return -------------------------------------------------------------

def _exp_graph(m):
    x = leaf(m, [0.5, -1.0])
    return x, x.exp()


@pytest.mark.parametrize("case, phrase", [
    ("tensor hook returns a tuple", "expected Variable, but hook returned 'tuple'"),
    ("tensor hook returns a float", "expected Variable, but hook returned 'float'"),
    ("tensor hook changes the shape", "has changed the size of value"),
    ("tensor hook changes the dtype", "has changed the type of value"),
    ("leaf hook changes the shape", "has changed the size of value"),
    ("prehook returns a tensor", "expected tuple, but hook returned 'Tensor'"),
    ("prehook returns a list", "expected tuple, but hook returned 'list'"),
    ("prehook returns an int inside the tuple", "expected Variable, but hook returned 'int'"),
    ("posthook returns too many values", "has returned an incorrect number of values (got 3, but expected 2)"),
    ("posthook fills a None slot", "can't replace a None gradient with a non-None value"),
    ("posthook changes the dtype", "has changed the type of value"),
    ("posthook changes the shape", "has changed the size of value"),
])
def test_invalid_hook_results_raise_torchs_errors(case, phrase):
    def run(m):
        x, y = _exp_graph(m)
        if case == "tensor hook returns a tuple":
            y.register_hook(lambda g: (g, g))
        elif case == "tensor hook returns a float":
            y.register_hook(lambda g: 3.0)
        elif case == "tensor hook changes the shape":
            y.register_hook(lambda g: m.ones(3, dtype=m.float64))
        elif case == "tensor hook changes the dtype":
            y.register_hook(lambda g: g.float())
        elif case == "leaf hook changes the shape":
            x.register_hook(lambda g: m.ones(3, dtype=m.float64))
        elif case == "prehook returns a tensor":
            y.grad_fn.register_prehook(lambda go: go[0])
        elif case == "prehook returns a list":
            y.grad_fn.register_prehook(lambda go: [go[0]])
        elif case == "prehook returns an int inside the tuple":
            y.grad_fn.register_prehook(lambda go: (5,))
        else:
            y = x * 2.0  # MulBackward0 has a None slot for the constant
            if case == "posthook returns too many values":
                def too_many(gi, go):
                    return (gi[0], gi[1], None)
                y.grad_fn.register_hook(too_many)
            elif case == "posthook fills a None slot":
                y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
            elif case == "posthook changes the dtype":
                y.grad_fn.register_hook(lambda gi, go: (gi[0].float(), None))
            else:
                y.grad_fn.register_hook(lambda gi, go: (m.ones(3, dtype=m.float64), None))
        y.sum().backward()

    gv, th = assert_same_error(run, phrase)
    if "hook '" in str(th):  # the hook's name, as torch prints it
        name = str(th).split("'")[1]
        assert f"hook '{name}'" in str(gv)


def test_hook_arity_error_names_the_hook_like_torch():
    def run(m):
        x, y = _exp_graph(m)

        def two_values(grad_outputs):
            return (grad_outputs[0], grad_outputs[0])

        y.grad_fn.register_prehook(two_values)
        y.sum().backward()

    assert_same_error(run, "hook 'two_values' has returned an incorrect number of values "
                           "(got 2, but expected 1)")


def test_tensor_hook_on_an_unused_output_is_called_with_none():
    def run(m):
        class Split(m.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t * 2, t * 3

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 3

        calls = []
        x = leaf(m, [0.5, -1.0])
        a, b = Split.apply(x)
        b.register_hook(lambda g: calls.append(("b", snap(g))))
        a.register_hook(lambda g: calls.append(("a", snap(g))))
        a.sum().backward()
        return calls, x.grad

    (gv_calls, gv_grad), (th_calls, th_grad) = both(run)
    assert_logs_equal(gv_calls, th_calls)
    assert_tensors_equal(gv_grad, th_grad)


# ---- handles ----------------------------------------------------------------------------

def test_handles_remove_once_and_keep_the_other_hooks_in_order():
    def run(m):
        log = []
        x = leaf(m, [0.5])
        a = x * 2.0
        handles = [a.register_hook(lambda g, i=i: log.append(i)) for i in range(4)]
        handles[1].remove()
        handles[1].remove()  # a second remove is harmless
        pre = a.grad_fn.register_prehook(lambda go: log.append("pre"))
        post = a.grad_fn.register_hook(lambda gi, go: log.append("post"))
        a.sum().backward(retain_graph=True)
        pre.remove()
        post.remove()
        handles[3].remove()
        a.sum().backward()
        return log

    assert run(gradviz) == run(torch) == [0, 2, 3, "pre", "post", 0, 2]


# ---- the Node API ----------------------------------------------------------------------

def test_node_name_next_functions_and_accumulate_grad():
    def run(m):
        x = leaf(m, [0.5, -1.0])
        w = leaf(m, [2.0, 3.0])
        c = m.tensor([1.0, 1.0], dtype=m.float64)
        y = (x * w + c).exp()
        add = y.grad_fn.next_functions[0][0]
        mul = add.next_functions[0][0]
        acc_x, acc_w = mul.next_functions[0][0], mul.next_functions[1][0]
        return (node_name(y.grad_fn), node_name(add), add.next_functions[1],
                node_name(mul), [nr for _, nr in mul.next_functions],
                node_name(acc_x), acc_x.variable is x, acc_w.variable is w,
                acc_x.next_functions, acc_x is (x * 1.0).grad_fn.next_functions[0][0])

    gv, th = both(run)
    assert gv == th


def test_grad_fn_names_of_views():
    def run(m):
        x = leaf(m, [[0.5, -1.0, 2.0], [1.0, 3.0, -2.0]])
        views = [x[0], x[:, 1:], x.view(6), x.t(), x.unsqueeze(0), x.transpose(0, 1),
                 x.permute(1, 0), x.reshape(3, 2), x.expand(2, 2, 3), x.select(1, 0),
                 x.narrow(1, 0, 2), x.squeeze(), x.flatten()]
        return [node_name(v.grad_fn) for v in views] + [
            views[2]._base is x, views[2].grad_fn.next_functions[0][0].variable is x]

    assert run(gradviz) == run(torch)


def test_metadata_is_a_persistent_dict_on_every_kind_of_node():
    class Double(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = leaf(gradviz, [0.5])
    y = Double.apply(x * 3.0)
    for node in (y.grad_fn, y.grad_fn.next_functions[0][0],
                 y.grad_fn.next_functions[0][0].next_functions[0][0]):
        assert node.metadata == {} and isinstance(node.metadata, dict)
        node.metadata["label"] = node.name()
        assert node.metadata is node.metadata
    assert y.grad_fn.metadata == {"label": "DoubleBackward"}
    assert x.grad_fn is None


def test_sequence_numbers_grow_in_creation_order_and_accumulate_grad_runs_first():
    def run(m):
        x = leaf(m, [0.5])
        a = x * 2.0
        b = a.exp()
        c = b + a
        nodes = [a.grad_fn, b.grad_fn, c.grad_fn]
        numbers = [n._sequence_nr() for n in nodes]
        acc = a.grad_fn.next_functions[0][0]
        return numbers == sorted(numbers), acc._sequence_nr() > max(numbers), \
            acc._sequence_nr() >= 2 ** 63 - 1

    assert run(gradviz) == run(torch) == (True, True, True)


def test_node_hooks_on_accumulate_grad_fire_once_per_backward():
    def run(m):
        log = []
        x = leaf(m, [0.5, -1.0])
        acc = (x * 1.0).grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: log.append(("pre", snap(go))))
        acc.register_hook(lambda gi, go: log.append(("post", (snap(gi), snap(go)))))
        (x * x + x.exp()).sum().backward()
        return log, x.grad

    (gv_log, gv_grad), (th_log, th_grad) = both(run)
    assert_logs_equal(gv_log, th_log)
    assert_tensors_equal(gv_grad, th_grad)


def test_custom_function_node_api():
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, t, factor, w):
                return t * factor * w

            @staticmethod
            def backward(ctx, g):
                return g * 2.0, None, None

        log = []
        x = leaf(m, [0.5, -1.0])
        y = Scale.apply(x, 2.0, m.tensor([1.0, 1.0], dtype=m.float64))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", (snap(gi), snap(go)))))
        y.sum().backward()
        return (y.grad_fn.name(), [node_name(n) for n, _ in y.grad_fn.next_functions], log)

    (gv_name, gv_next, gv_log), (th_name, th_next, th_log) = both(run)
    assert (gv_name, gv_next) == (th_name, th_next) == ("ScaleBackward", ["AccumulateGrad", None])
    assert_logs_equal(gv_log, th_log)


def test_hooks_keep_no_reference_cycle_alive_after_retain_grad():
    import gc
    import weakref

    x = leaf(gradviz, [0.5])
    a = x * 2.0
    a.retain_grad()
    ref = weakref.ref(a)
    node_ref = weakref.ref(a.grad_fn)
    del a
    assert ref() is None and node_ref() is None  # freed by reference counting, no gc needed
    gc.collect()


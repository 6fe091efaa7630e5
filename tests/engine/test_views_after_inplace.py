"""Views whose base is modified in place, against PyTorch.

Note [Views after their base changed] (gradviz_ext/_engine.py): a view's ``grad_fn`` is
renewed as an ``AsStridedBackward0`` over its base's current history, so its gradient goes
through the in-place op (before, gradviz skipped it: a wrong gradient, silently). Also the
errors for multi-output views and views made under no_grad, the wording of the "modified by
an inplace operation" error, and ``x[key] = v`` recording ``CopySlices``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import gradviz

LIBS = (torch, gradviz)


def _name(node):
    return None if node is None else node.name().replace("torch::autograd::", "")


def _text(message):
    """A message with gradviz's names read as torch's (gradviz leaves out the
    ``torch::autograd::`` of CopySlices, as of AccumulateGrad)."""
    return message.replace("gradviz", "torch").replace("torch::autograd::", "")


def _both(fn):
    """``fn(lib)`` for torch and gradviz."""
    return [fn(lib) for lib in LIBS]


def _close(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6)


def _error(fn):
    """(type, message) that ``fn()`` raises."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test compares whatever was raised
        return type(exc), _text(str(exc))
    return None, None


# ---- 1. the gradient goes through the in-place op on the base ------------------------------

VIEWS = {
    "slice": lambda y: y[0:1],
    "select": lambda y: y[1],
    "view": lambda y: y.view(2, 1),
    "reshape": lambda y: y.reshape(1, 2),
    "t": lambda y: y.unsqueeze(0).t(),
    "transpose": lambda y: y.view(2, 1).transpose(0, 1),
    "unsqueeze": lambda y: y.unsqueeze(0),
    "squeeze": lambda y: y.unsqueeze(0).squeeze(0),
    "permute": lambda y: y.view(2, 1).permute(1, 0),
    "expand": lambda y: y.expand(3, 2),
    "narrow": lambda y: y.narrow(0, 1, 1),
    "flatten": lambda y: y.view(2, 1).flatten(),
    "view of a view": lambda y: y.view(2, 1)[1:],
    "step": lambda y: y.view(2, 1)[::2],
}


@pytest.mark.parametrize("make", VIEWS.values(), ids=VIEWS.keys())
def test_view_used_after_its_base_changed(make):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = make(y)
        before = _name(v.grad_fn)
        y.mul_(3)
        weights = lib.arange(1.0, v.numel() + 1).view(v.shape)
        (v * weights).sum().backward()
        node = v.grad_fn
        return x.grad, [before, _name(node), [_name(f) for f, _ in node.next_functions], v._base is y]

    (torch_grad, torch_names), (grad, names) = _both(run)
    _close(torch_grad, grad)
    assert names == torch_names


def test_the_reported_example_gives_torchs_gradient():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = y[0:1]
        y.mul_(3)
        v.sum().backward()
        return x.grad

    torch_grad, grad = _both(run)
    _close(torch_grad, grad)
    assert grad.tolist() == [6.0, 0.0]


def test_backward_on_the_view_and_autograd_grad_upstream():
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        v = y[1:]
        early = (v * 5).sum()  # used before the change: keeps the old history
        y.mul_(3)
        late = (v * v).sum()
        grads = lib.autograd.grad(late, [x, y], retain_graph=True)
        early_grads = lib.autograd.grad(early, [x], retain_graph=True)
        wrt_view = lib.autograd.grad((v * v).sum(), [v], retain_graph=True)
        v.backward(lib.tensor([1.0, 10.0]))
        return [*grads, *early_grads, *wrt_view, x.grad]

    torch_grads, grads = _both(run)
    _close(torch_grads, grads)


def test_views_of_views_and_a_change_through_the_middle_view():
    def run(lib):
        out = []
        for change in ("base", "middle", "other"):
            x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
            y = x * 2
            v = y[1:]
            w = v[1:]
            other = y[:2]
            if change == "base":
                y.mul_(3)
            elif change == "middle":
                v.mul_(3)
            else:
                other.mul_(x[2:])
            (w * lib.tensor([1.0, 10.0])).sum().backward(retain_graph=True)
            (other * lib.tensor([100.0, 1000.0])).sum().backward()
            out += [x.grad, _name(w.grad_fn), _name(v.grad_fn), _name(y.grad_fn)]
        return out

    torch_out, out = _both(run)
    _close([t for t in torch_out if not isinstance(t, str)], [t for t in out if not isinstance(t, str)])
    assert [t for t in out if isinstance(t, str)] == [t for t in torch_out if isinstance(t, str)]


def test_inplace_on_the_view_after_its_base_changed():
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        v = y[1:]
        y.mul_(3)
        v.mul_(x[:2])
        (y * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        return x.grad, [_name(v.grad_fn), _name(v.grad_fn.next_functions[0][0]), _name(y.grad_fn)]

    (torch_grad, torch_names), (grad, names) = _both(run)
    _close(torch_grad, grad)
    assert names == torch_names == ["AsStridedBackward0", "CopySlices", "CopySlices"]


def test_base_changed_under_no_grad_keeps_the_gradient():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = y[0:1]
        with lib.no_grad():
            y.mul_(3)
        v.sum().backward()
        leaf = lib.tensor([1.0, 2.0], requires_grad=True)
        u = leaf[1:]
        with lib.no_grad():
            leaf.mul_(2)  # an optimizer step on a parameter with a live view
        (u * 3).sum().backward()
        return [x.grad, leaf.grad, _name(v.grad_fn), _name(u.grad_fn.next_functions[0][0])]

    torch_out, out = _both(run)
    _close(torch_out[:2], out[:2])
    assert out[2:] == torch_out[2:]


def test_double_backward_through_a_renewed_view():
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        y = x * x
        v = y.expand(2, 3)[:, 1:]  # reads each element twice
        y.mul_(x)
        g, = lib.autograd.grad((v * v).sum(), x, create_graph=True)
        gg, = lib.autograd.grad((g * g).sum(), x)
        return [g, gg]

    torch_out, out = _both(run)
    _close(torch_out, out)


def test_retain_grad_moves_to_the_renewed_node():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = y[1:]
        v.retain_grad()
        y.mul_(3)
        (v * 5).sum().backward()
        return [v.grad, x.grad]

    torch_out, out = _both(run)
    _close(torch_out, out)


def test_a_dead_view_is_forgotten():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    for _ in range(1000):
        (y[0:1] * 2).sum()
    assert len(y._views) <= 32  # weak references, pruned as the list grows
    keep = y[1:]
    y.mul_(3)
    assert len(y._views) == 1 and y._views[0]() is keep


def test_recording_views_costs_nothing_without_autograd():
    data = gradviz.arange(6.0)
    rows = [data[i:i + 2] for i in range(4)]
    assert data._views is None and len(rows) == 4


# ---- 3. multi-output views and views made under no_grad ------------------------------------

INDIRECT = ("is a view and its base or another view of its base has been modified inplace. This "
            "view is the output of a function that returns multiple views.")


@pytest.mark.parametrize("pieces", ["split", "chunk", "unbind"])
@pytest.mark.parametrize("change", ["base", "sibling", "base under no_grad"])
def test_using_a_piece_after_its_base_changed_raises(pieces, change):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        a, b = {"split": lambda: y.split(1), "chunk": lambda: y.chunk(2),
                "unbind": lambda: y.unbind()}[pieces]()
        if change == "base":
            y.mul_(2)
        elif change == "sibling":
            y[0:1].mul_(2)
        else:
            with lib.no_grad():
                y.mul_(2)
        used = _error(lambda: (b * 2).sum().backward())
        written = _error(lambda: b.mul_(2))
        return used, written

    (torch_used, torch_written), (used, written) = _both(run)
    assert used[0] is torch_used[0] is RuntimeError
    assert INDIRECT in torch_used[1] and used[1] == torch_used[1]
    assert written[0] is torch_written[0] is RuntimeError
    assert "is a view and is being modified inplace" in written[1]
    assert written[1] == torch_written[1]


def test_a_view_made_under_no_grad():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        with lib.no_grad():
            v = y[0:1]
        direct = _error(lambda: v.mul_(3))
        y.mul_(3)
        indirect = _error(lambda: (v * 2).sum().backward())
        # both made and changed under no_grad: fine
        with lib.no_grad():
            w = y[1:]
            y.add_(1)
            value = w * 2
        return direct, indirect, value

    (torch_direct, torch_indirect, torch_value), (direct, indirect, value) = _both(run)
    assert direct == torch_direct and direct[0] is RuntimeError
    assert "A view was created in no_grad mode and is being modified inplace" in direct[1]
    assert indirect == torch_indirect
    assert "its base or another view of its base has been modified inplace with grad mode enabled" in indirect[1]
    _close(torch_value, value)


def test_pieces_of_a_tensor_that_needs_no_grad_stay_usable():
    def run(lib):
        y = lib.zeros(2)
        a, b = y.split(1)
        y.add_(1)
        return a * 2, _name(a.grad_fn)

    (torch_value, torch_name), (value, name) = _both(run)
    _close(torch_value, value)
    assert name == torch_name is None


# ---- 4. the "modified by an inplace operation" error ---------------------------------------

MODIFIED = {
    "output of the saving node": "y = x.tanh(); y.add_(1); y.sum().backward()",
    "leaf input": "a = lib.tensor([1., 2.]); y = x * a; a.add_(1); y.sum().backward()",
    "leaf that requires grad": "y = x * w\nwith lib.no_grad(): w.add_(1)\ny.sum().backward()",
    "non-leaf input": "a = x * 1; y = a * a; a.add_(1); y.sum().backward()",
    "node with a number": "e = lib.tensor([2., 3.], requires_grad=True); y = x ** e; y.add_(1); y.sum().backward()",
    "view of a changed base": "y = x * 1; v = y[1:]; z = v * v; y.add_(1); z.sum().backward()",
    "through CopySlices": "y = x * 1; y[0].mul_(2); z = y * y; y[1].add_(1); z.sum().backward()",
    "float64 2-d": "z = x.double().view(2, 1).sigmoid(); z.mul_(2); z.sum().backward()",
}


@pytest.mark.parametrize("source", MODIFIED.values(), ids=MODIFIED.keys())
@pytest.mark.parametrize("anomaly", [False, True])
def test_modified_by_an_inplace_operation_in_torchs_words(source, anomaly):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)

        def body():
            exec(source, {"lib": lib, "x": x, "w": w})

        if anomaly:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with lib.autograd.detect_anomaly():
                    return _error(body)
        return _error(body)

    torch_error, error = _both(run)
    assert torch_error[0] is RuntimeError
    assert error == torch_error


def test_custom_function_output_in_the_error():
    def run(lib):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                out = a * 2
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                out, = ctx.saved_tensors
                return g * out

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Double.apply(x)
        y.add_(1)
        return _error(lambda: y.sum().backward())

    torch_error, error = _both(run)
    assert "which is output 0 of Double," in torch_error[1]
    assert error == torch_error


# ---- 2 and 5: in-place through a slice of a non-leaf, and x[key] = v -----------------------

def test_slice_of_a_non_leaf_after_inplace_is_as_strided():
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        z = y[1:]
        z.add_(1)
        after_own = [_name(z.grad_fn), _name(z.grad_fn.next_functions[0][0]), _name(y.grad_fn)]
        y.add_(1)
        after_base = [_name(z.grad_fn), _name(z.grad_fn.next_functions[0][0])]
        (z * z).sum().backward()
        return after_own + after_base, x.grad

    (torch_names, torch_grad), (names, grad) = _both(run)
    assert names == torch_names == ["AsStridedBackward0", "CopySlices", "CopySlices",
                                    "AsStridedBackward0", "AddBackward0"]
    _close(torch_grad, grad)


SETITEM = [
    ("[0]", "0."), ("[1:]", "v"), ("[1]", "s"), ("[1:]", "v[0]"), ("[None, 0]", "3."),
    ("[..., 1]", "s"), ("[::2]", "v[:1]"), ("[:]", "1."), ("[...]", "v[:1]"), ("[0:3]", "s"),
    ("[[0, 2]]", "0."), ("[t > 3]", "0."), ("[[1]]", "v[:1]"), ("[1:][[0, 1]]", "v"),
]


@pytest.mark.parametrize("key,value", SETITEM)
def test_setitem_node_and_gradients(key, value):
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        p = lib.tensor([5.0, 6.0], dtype=lib.float64, requires_grad=True)
        t = x * x
        v = p * p
        s = p[0] * 2
        exec(f"t{key} = {value}", {"t": t, "v": v, "s": s})
        node = _name(t.grad_fn)
        loss = (t * t * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum()
        grads = lib.autograd.grad(loss, [x, p], create_graph=True, allow_unused=True)
        grads = [g if g is not None else lib.zeros(2, dtype=lib.float64) for g in grads]
        second = lib.autograd.grad(sum(g.sum() for g in grads), [x, p], allow_unused=True)
        return node, list(grads) + list(second)

    (torch_node, torch_grads), (node, grads) = _both(run)
    assert node == torch_node
    _close(torch_grads, grads)


def test_setitem_basic_keys_record_copy_slices_advanced_keys_index_put():
    def run(lib):
        names = []
        for key in (0, (slice(None), 1), (None, 0), (Ellipsis, 0), [0, 1], (0, [0, 2]),
                    (slice(None), [0, 2]), ([1], 0), (Ellipsis, [1]), (slice(1, None), [0])):
            x = lib.ones(2, 3, requires_grad=True)
            y = x * 2
            y[key] = 0.0
            names.append(_name(y.grad_fn))
        plain = lib.zeros(3)
        value = lib.tensor(2.0, requires_grad=True)
        plain[0] = value
        names.append(_name(plain.grad_fn))
        return names

    torch_names, names = _both(run)
    assert names == torch_names
    assert names[:4] == ["CopySlices"] * 4 and names[4] == "IndexPutBackward0"
    assert names[5] == "CopySlices" and names[6] == "IndexPutBackward0"


def test_setitem_on_a_leaf_that_requires_grad():
    def run(lib):
        y = lib.ones(3, requires_grad=True)

        def write():
            y[0] = 1.0

        return _error(write)

    torch_error, error = _both(run)
    assert error == torch_error and error[0] is RuntimeError


def test_setitem_values_and_versions_match():
    def run(lib):
        y = lib.arange(12).view(3, 4)
        y[0] = 7
        y[1, 1:3] = lib.tensor([8, 9])
        y[:, 3] = 1.5  # truncated into the integer tensor
        y[2] = lib.tensor([[1, 2, 3, 4]])  # leading 1s dropped
        return y, y._version

    (torch_y, torch_version), (y, version) = _both(run)
    assert y.tolist() == torch_y.tolist()
    assert version == torch_version


def test_error_phrase_of_a_view_modified_message_names_as_strided():
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1
        v = y[1:]
        z = v * v
        y.add_(1)
        return _error(lambda: z.sum().backward())

    torch_error, error = _both(run)
    assert re.search("output 0 of AsStrided,", torch_error[1])
    assert error == torch_error


def _copy_slices_with_strided_gradient(lib, order):
    """A write through ``view(-1)[::2]``, then a transpose (its backward hands CopySlices a
    non-contiguous gradient); first and second derivatives."""
    a = lib.tensor(np.arange(6.0).reshape(2, 3) * 0.3 - 0.5, dtype=lib.float64, requires_grad=True)
    c = a * a
    c.view(-1)[::2].mul_(2)
    y = c.t() * lib.tensor(np.arange(6.0).reshape(3, 2))
    (g,) = lib.autograd.grad(y.sum(), a, create_graph=order == 2)
    if order == 1:
        return [g.tolist()]
    (gg,) = lib.autograd.grad((g * g).sum(), a)
    return [g.tolist(), gg.tolist()]


@pytest.mark.parametrize("order", [1, 2])
def test_copy_slices_backward_of_a_non_contiguous_gradient(order):
    """torch's CopySlices copies the gradient into the base's layout before replaying the view
    chain on it; gradviz replayed ``view(-1)`` on a transposed gradient and raised "view size
    is not compatible" (found by the op fuzzer, seed 1669)."""
    got, expected = _copy_slices_with_strided_gradient(gradviz, order), _copy_slices_with_strided_gradient(torch, order)
    np.testing.assert_allclose(np.array(got), np.array(expected), rtol=1e-12)

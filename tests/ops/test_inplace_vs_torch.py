"""In-place operations and version counters against PyTorch (Note [In-place semantics])."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close, run_both

import gradviz

rng = np.random.default_rng(7)


def normal(*shape):
    return rng.standard_normal(shape)


def _add_(m, a):
    y = a * 2
    y.add_(a, alpha=0.5)
    return y


def _chain(m, a):
    y = a * 1.5
    y.mul_(a).sub_(1).div_(2.0)
    y += a
    y *= 3
    y -= a.exp()
    y /= 1.5
    return y


def _unary_(m, a):
    y = a * 2.0
    y.mul_(a)
    y.tanh_()
    z = a * 1.0
    z.exp_()
    return y * a + z


def _clamp_(m, a):
    y = a + 0
    y.clamp_(-0.3, 0.4)
    return y ** 2


def _setitem_basic(m, a):
    y = a * 2
    y[1] = a[0] * 10
    return y


def _setitem_slice(m, a):
    y = a * 1.0
    y[:, 1:] = a[:, :2] ** 2
    return y.sin()


def _setitem_tensor_index(m, a):
    y = a * 3
    y[m.tensor([0, 2])] = 0.5
    return y


def _setitem_bool_mask(m, a):
    y = a * 1.0
    y[y > 0] = 0.0
    return y * a


def _view_mul_(m, a):
    y = a * 3
    y[0].mul_(2)
    return y


def _transpose_view_add_(m, a):
    y = a * 1.0
    y.t()[1].add_(a[:, 0])
    return y.exp()


def _view_chain(m, a):
    y = a * 2
    v = y.view(6)[2:5]
    v.mul_(3)
    v.add_(1)
    return y * a


def _masked_fill_(m, a):
    y = a * 1
    y.masked_fill_(a > 0, 2.0)
    return y * a


def _index_add_(m, a):
    y = a * 1
    y.index_add_(0, m.tensor([0, 0, 1]), a[:3] * 2)
    return y


def _zero_fill_copy(m, a):
    y = a * 2
    z = a * 1
    z.zero_()
    w = a * 1
    w.fill_(3.0)
    u = a * 0
    u.copy_(y.sin())
    return z + w * y + u


def _into_fresh_tensor(m, a):
    out = m.zeros(3, 2, dtype=a.dtype)
    out += a
    out[0] = a[1] * a[2]
    return out


def _relu_inplace_then_use(m, a):
    y = a * 2
    z = y.relu_()
    return z * a


CASES = [
    ("add_", _add_, (3,)), ("chain", _chain, (4,)), ("unary_", _unary_, (3,)),
    ("clamp_", _clamp_, (5,)), ("setitem_basic", _setitem_basic, (3,)),
    ("setitem_slice", _setitem_slice, (2, 3)), ("setitem_tensor_index", _setitem_tensor_index, (3,)),
    ("setitem_bool_mask", _setitem_bool_mask, (2, 3)), ("view_mul_", _view_mul_, (2, 3)),
    ("transpose_view_add_", _transpose_view_add_, (3, 2)), ("view_chain", _view_chain, (2, 3)),
    ("masked_fill_", _masked_fill_, (2, 3)), ("index_add_", _index_add_, (4, 2)),
    ("zero_fill_copy", _zero_fill_copy, (3,)), ("into_fresh_tensor", _into_fresh_tensor, (3, 2)),
    ("relu_", _relu_inplace_then_use, (4,)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_inplace_gradients_match_torch(case):
    _, program, shape = case
    run_both(program, (normal(*shape),), create_graph_order=2)


def test_version_counters_match_torch():
    def program(m):
        x = m.ones(2, 3)
        v = x[0]
        versions = [x._version]
        x.add_(1)
        versions.append((x._version, v._version))
        v.mul_(2)
        versions.append((x._version, v._version))
        x[1] = 5.0
        versions.append((x._version, v._version))
        with m.no_grad():
            x += 1
        versions.append(x._version)
        d = x.detach()
        d.zero_()
        versions.append((x._version, d._version))
        return versions

    assert program(gradviz) == program(torch)


ERRORS = [
    ("leaf", lambda m: m.tensor([1.0], requires_grad=True).add_(1),
     "a leaf Variable that requires grad is being used in an in-place operation."),
    ("view_of_leaf", lambda m: m.tensor([1.0, 2.0], requires_grad=True)[0].mul_(2),
     "a view of a leaf Variable that requires grad is being used in an in-place operation."),
    ("setitem_leaf", lambda m: m.tensor([1.0, 2.0], requires_grad=True).__setitem__(0, 1.0),
     "a view of a leaf Variable that requires grad is being used in an in-place operation."),
    ("cast", lambda m: m.tensor([1, 2]).add_(1.5), "result type Float can't be cast to the desired output type Long"),
    ("expanded", lambda m: m.zeros(1, 3).expand(2, 3).add_(1),
     "unsupported operation: more than one element of the written-to tensor refers to a single memory location"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_inplace_errors_match_torch(case):
    _, program, phrase = case
    with pytest.raises(RuntimeError) as theirs:
        program(torch)
    assert phrase in str(theirs.value)
    with pytest.raises(RuntimeError) as ours:
        program(gradviz)
    assert phrase in str(ours.value)


def _saved_output_modified(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    y = a * 1.0
    y.tanh_()  # saves its result, which is y
    y.exp_()
    y.sum().backward()


def _self_aliasing_mul_(m):
    a = m.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    y = a * 2
    v = y.view(3)[1:]
    v.mul_(v)  # `other` is saved, then overwritten by the op itself
    y.sum().backward()


@pytest.mark.parametrize("program", [_saved_output_modified, _self_aliasing_mul_])
def test_saved_tensors_modified_by_inplace_ops_raise_like_torch(program):
    phrase = "one of the variables needed for gradient computation has been modified by an inplace operation"
    with pytest.raises(RuntimeError, match=phrase):
        program(torch)
    with pytest.raises(RuntimeError, match=phrase):
        program(gradviz)


def test_modified_saved_tensor_raises_like_torch():
    def program(m):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        b = a * 1
        c = b * b
        b.add_(1)
        c.sum().backward()

    phrase = "one of the variables needed for gradient computation has been modified by an inplace operation"
    with pytest.raises(RuntimeError, match=phrase):
        program(torch)
    with pytest.raises(RuntimeError, match=phrase) as ours:
        program(gradviz)
    assert "is at version 1; expected version 0 instead" in str(ours.value)


def test_inplace_under_no_grad_updates_leaf_like_sgd():
    def program(m):
        w = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
        for _ in range(3):
            loss = (w * w).sum()
            loss.backward()
            with m.no_grad():
                w -= 0.1 * w.grad
            w.grad.zero_()
        return w

    ours, theirs = program(gradviz), program(torch)
    assert_close(ours, theirs, "float32")
    assert ours.is_leaf and ours.requires_grad and ours._version == theirs._version


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_direct_inplace_arithmetic_without_a_graph_matches_torch(dtype):
    # Note [Direct in-place arithmetic]: an optimizer-style update writes straight into the
    # parameter; values, the version counter and the identity of the result are torch's.
    start = normal(3, 4)
    step = normal(3, 4)

    def run(m):
        p = m.tensor(start, dtype=getattr(m, dtype), requires_grad=True)
        g = m.tensor(step, dtype=getattr(m, dtype))
        with m.no_grad():
            versions = [p._version]
            same = p.add_(g, alpha=-0.1) is p
            p.sub_(g).mul_(1.5).div_(3).add_(2).sub_(0.25, alpha=2)
            p += g
            p *= 2
            versions.append(p._version)
        return p.detach().numpy().copy(), versions, same, p.requires_grad, p.grad_fn is None

    gv_out, th_out = run(gradviz), run(torch)
    np.testing.assert_allclose(gv_out[0], th_out[0], rtol=1e-6 if dtype == "float32" else 1e-12)
    assert gv_out[1:] == th_out[1:]


def test_direct_inplace_arithmetic_keeps_the_leaf_error_under_grad_mode():
    for m in (gradviz, torch):
        p = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            p.add_(m.ones(3), alpha=-0.1)


def _overwritten_gradients(lib, write):
    x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
    v = lib.tensor(0.3, dtype=lib.float64, requires_grad=True)
    c = x * 1
    write(c, v)
    y = (c * lib.tensor([float("inf"), 1.0], dtype=lib.float64)).sum()
    gx, gv = lib.autograd.grad(y, [x, v], create_graph=True, allow_unused=True)
    return [gx.tolist(), gx.requires_grad, None if gv is None else [gv.tolist(), gv.requires_grad]]


@pytest.mark.parametrize("write", [
    lambda c, v: c[:1].zero_(),
    lambda c, v: c[:1].fill_(2.0),
    lambda c, v: c[:1].fill_(v),
    lambda c, v: c[:1].copy_(v),
    lambda c, v: c.__setitem__(slice(0, 1), 0.0),
], ids=["zero_", "fill_", "fill_tensor", "copy_", "setitem"])
def test_overwritten_values_get_a_constant_zero_gradient(write):
    """torch's backward for what zero_/fill_/copy_ overwrote is ``zeros_like(grad)``: an inf
    upstream gives 0 there, not inf * 0 = NaN, and the zeros do not require grad under
    create_graph (found by the op fuzzer, seeds 1128/1879)."""
    assert _overwritten_gradients(gradviz, write) == _overwritten_gradients(torch, write)

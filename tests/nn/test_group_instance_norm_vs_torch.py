"""nn.GroupNorm, nn.InstanceNorm1d/2d, F.group_norm and F.instance_norm against torch: values,
gradients and gradients of gradients, running statistics, state_dict, repr, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gradviz

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-10)}  # ints: exact


def close(a, b, what):
    a = a.detach().numpy() if isinstance(a, gradviz.Tensor) else a
    b = b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    np.testing.assert_allclose(a, b, err_msg=what, **TOL.get(b.dtype.type, {}))


def arrays(shape, dtype, seed=0, affine=True):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    c = shape[1] if len(shape) > 1 else shape[0]
    w = (rng.standard_normal(c) + 1).astype(dtype) if affine else None
    b = rng.standard_normal(c).astype(dtype) if affine else None
    probe = rng.standard_normal(shape).astype(dtype)
    return x, w, b, probe


def first_and_second_grads(m, fn, x, w, b, probe):
    """``fn``'s values, its gradients, and the gradients of ``sum(grad_x ** 2)``."""
    tx = m.tensor(x, requires_grad=True)
    tw = m.tensor(w, requires_grad=True) if w is not None else None
    tb = m.tensor(b, requires_grad=True) if b is not None else None
    out = fn(m, tx, tw, tb)
    inputs = [t for t in (tx, tw, tb) if t is not None]
    grads = m.autograd.grad((out * m.tensor(probe)).sum(), inputs, create_graph=True)
    second = m.autograd.grad((grads[0] ** 2).sum(), [t for t in (tx, tw) if t is not None],
                             allow_unused=True)
    return out, grads, second, out.grad_fn.name()


GROUP_CASES = [((2, 4, 3), 2), ((3, 6), 3), ((2, 6, 2, 3), 3), ((2, 4, 5), 1), ((2, 4, 5), 4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,groups", GROUP_CASES)
def test_group_norm_values_grads_double_backward(shape, groups, affine, dtype):
    data = arrays(shape, dtype, affine=affine)

    def fn(m, x, w, b):
        return m.nn.functional.group_norm(x, groups, w, b, eps=1e-5)

    g, t = first_and_second_grads(gradviz, fn, *data), first_and_second_grads(torch, fn, *data)
    close(g[0], t[0], "output")
    assert g[3] == t[3] == "NativeGroupNormBackward0"
    for i, (a, b) in enumerate(zip(g[1], t[1])):
        close(a, b, f"grad {i}")
    for i, (a, b) in enumerate(zip(g[2], t[2])):
        if b is None:
            assert a is None or not a.detach().numpy().any()
        else:
            close(a, b, f"second-order grad {i}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 2, 4, 3)])
def test_instance_norm_values_grads_double_backward(shape, affine, dtype):
    data = arrays(shape, dtype, affine=affine)

    def fn(m, x, w, b):
        return m.nn.functional.instance_norm(x, weight=w, bias=b, eps=1e-5)

    g, t = first_and_second_grads(gradviz, fn, *data), first_and_second_grads(torch, fn, *data)
    close(g[0], t[0], "output")
    assert g[3] == t[3]
    for i, (a, b) in enumerate(zip(g[1], t[1])):
        close(a, b, f"grad {i}")
    for i, (a, b) in enumerate(zip(g[2], t[2])):
        if b is None:
            assert a is None or not a.detach().numpy().any()
        else:
            close(a, b, f"second-order grad {i}")


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (4, 3, 6)), ("InstanceNorm1d", (3, 6)),
                                       ("InstanceNorm2d", (2, 3, 4, 5)), ("InstanceNorm2d", (3, 4, 5))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True), (False, True)])
def test_instance_norm_modules_train_eval_state_dict(cls, shape, affine, track):
    x, _, _, probe = arrays(shape, np.float32, seed=3)
    results = []
    for m in (gradviz, torch):
        layer = getattr(m.nn, cls)(3, affine=affine, track_running_stats=track, momentum=0.2)
        seen = [repr(layer), list(layer.state_dict())]
        tx = m.tensor(x, requires_grad=True)
        for step in range(2):
            out = layer(tx * (step + 1))
            seen.append(out)
        (out * m.tensor(probe)).sum().backward()
        seen.append(tx.grad)
        seen += [p.grad for p in layer.parameters()]
        seen += list(layer.state_dict().values())
        layer.eval()
        seen.append(layer(tx))
        results.append(seen)
    g, t = results
    assert g[:2] == t[:2]
    assert len(g) == len(t)
    for i, (a, b) in enumerate(zip(g[2:], t[2:])):
        close(a, b, f"item {i}")


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_module_matches_torch(affine):
    x, _, _, probe = arrays((2, 6, 4), np.float32, seed=5)
    results = []
    for m in (gradviz, torch):
        layer = m.nn.GroupNorm(3, 6, eps=1e-3, affine=affine)
        tx = m.tensor(x, requires_grad=True)
        out = layer(tx)
        (out * m.tensor(probe)).sum().backward()
        layer.eval()
        results.append([repr(layer), list(layer.state_dict()), out, tx.grad,
                        *[p.grad for p in layer.parameters()], layer(tx)])
    g, t = results
    assert g[:2] == t[:2] and len(g) == len(t)
    for i, (a, b) in enumerate(zip(g[2:], t[2:])):
        close(a, b, f"item {i}")
    assert repr(gradviz.nn.GroupNorm(2, 4, bias=False)) == repr(torch.nn.GroupNorm(2, 4, bias=False))


ERRORS = [
    (lambda m: m.nn.functional.group_norm(m.ones(2, 3, 4), 2), RuntimeError,
     "Expected number of channels in input to be divisible by num_groups"),
    (lambda m: m.nn.functional.group_norm(m.ones(2, 4, 3), 2, m.ones(3)), RuntimeError,
     "Expected weight to be a vector of size equal to the number of channels"),
    (lambda m: m.nn.functional.group_norm(m.ones(1, 4), 4), ValueError,
     "Expected more than 1 value per channel when training"),
    (lambda m: m.nn.functional.group_norm(m.ones(4), 2), RuntimeError,
     "Expected at least 2 dimensions for input tensor but received 1"),
    (lambda m: m.nn.GroupNorm(2, 3), ValueError, r"num_channels \(3\) must be divisible by num_groups \(2\)"),
    (lambda m: m.nn.functional.instance_norm(m.ones(2, 3, 1)), ValueError,
     "Expected more than 1 spatial element when training"),
    (lambda m: m.nn.functional.instance_norm(m.ones(2, 3, 4), use_input_stats=False), RuntimeError,
     "Expected running_mean and running_var to be defined when use_input_stats is false"),
    (lambda m: m.nn.InstanceNorm1d(3, affine=True)(m.ones(2, 4, 5)), ValueError,
     r"expected input's size at dim=1 to match num_features \(3\), but got: 4"),
    (lambda m: m.nn.InstanceNorm1d(3)(m.ones(2, 3, 4, 5)), ValueError, r"expected 2D or 3D input \(got 4D input\)"),
    (lambda m: m.nn.InstanceNorm2d(3)(m.ones(3, 4)), ValueError, r"expected 3D or 4D input \(got 2D input\)"),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match_torch(index):
    make, error, phrase = ERRORS[index]
    for m in (torch, gradviz):
        with pytest.raises(error, match=phrase):
            make(m)


def test_instance_norm_warns_when_num_features_is_unused_like_torch():
    for m in (torch, gradviz):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.nn.InstanceNorm1d(3)(m.ones(2, 4, 5))
        assert any("does not match num_features" in str(w.message) for w in caught), m.__name__

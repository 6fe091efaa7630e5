"""Helpers for the layer tests: build a layer in gradviz and in torch, load torch's weights
into gradviz (through ``load_state_dict``, so the keys must match), run both on the same
inputs and compare the outputs and the gradients of every input and parameter."""

from __future__ import annotations

import numpy as np
import torch

import gradviz

TOL = {"float32": dict(rtol=3e-4, atol=3e-5), "float64": dict(rtol=1e-9, atol=1e-10)}


def close(a, b, what, dtype=None):
    """gradviz ``a`` against torch ``b``: shape, dtype, values (NaN where torch has NaN)."""
    if b is None:
        assert a is None, f"{what}: gradviz {a!r}, torch None"
        return
    assert a is not None, f"{what}: gradviz None, torch {b!r}"
    a = a.detach().numpy() if isinstance(a, gradviz.Tensor) else np.asarray(a)
    b = b.detach().numpy()
    assert a.shape == b.shape, f"{what}: shape {a.shape} (gradviz) vs {b.shape} (torch)"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} (gradviz) vs {b.dtype} (torch)"
    tolerance = TOL.get(str(b.dtype), dict(rtol=0, atol=0))
    np.testing.assert_allclose(a, b, err_msg=what, equal_nan=True, **tolerance)


def load_torch_weights(gv_module, th_module):
    """torch's state_dict (its values) loaded into the gradviz module: same keys, same shapes."""
    state = {k: gradviz.tensor(v.detach().numpy().copy()) for k, v in th_module.state_dict().items()}
    assert list(state) == list(gv_module.state_dict()), (list(gv_module.state_dict()), list(state))
    gv_module.load_state_dict(state)


def _tensors(out):
    if isinstance(out, (tuple, list)):
        return [t for t in out if t is not None]
    return [out]


def compare_layer(make, inputs, dtype="float64", forward=None, seed=0, grad_inputs=None):
    """``make(nn)`` builds the layer in each library; torch's weights go into gradviz; both
    run ``forward(layer, *tensors)`` (default ``layer(*tensors)``) on ``inputs`` (numpy arrays;
    float ones require grad unless ``grad_inputs`` says which). Outputs, input gradients and
    every parameter's gradient must agree. Returns (gradviz outputs, torch outputs)."""
    forward = forward or (lambda layer, *xs: layer(*xs))
    th_layer = make(torch.nn).to(getattr(torch, dtype))
    gv_layer = make(gradviz.nn).to(getattr(gradviz, dtype))
    load_torch_weights(gv_layer, th_layer)
    results = []
    for lib, layer in ((gradviz, gv_layer), (torch, th_layer)):
        xs = []
        for i, a in enumerate(inputs):
            wants = (a.dtype.kind == "f" if grad_inputs is None else grad_inputs[i])
            xs.append(lib.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, requires_grad=wants))
        outs = _tensors(forward(layer, *xs))
        rng = np.random.default_rng(seed + 1)
        loss = sum((o * lib.tensor(rng.standard_normal(tuple(o.shape)).astype(dtype))).sum()
                   for o in outs if o.requires_grad)
        loss.backward()
        grads = [x.grad for x in xs]
        params = {n: p.grad for n, p in layer.named_parameters()}
        results.append((outs, grads, params))
    (g_outs, g_grads, g_params), (t_outs, t_grads, t_params) = results
    assert len(g_outs) == len(t_outs)
    for i, (a, b) in enumerate(zip(g_outs, t_outs)):
        close(a, b, f"output {i}")
    for i, (a, b) in enumerate(zip(g_grads, t_grads)):
        close(a, b, f"grad of input {i}")
    assert list(g_params) == list(t_params)
    for name in t_params:
        close(g_params[name], t_params[name], f"grad of {name}")
    return g_outs, t_outs


def error_of(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - compared with torch's
        return type(exc), str(exc)
    return None, None


def same_error(gv_fn, th_fn, phrase):
    """Both raise the same exception type, and both messages hold ``phrase``."""
    (g_type, g_msg), (t_type, t_msg) = error_of(gv_fn), error_of(th_fn)
    assert t_type is not None, "torch did not raise"
    assert g_type is not None, f"gradviz did not raise (torch: {t_type.__name__}: {t_msg})"
    assert g_type.__name__ == t_type.__name__, f"gradviz {g_type.__name__}: {g_msg} / torch {t_type.__name__}: {t_msg}"
    assert phrase in t_msg, f"the phrase is not torch's: {t_msg}"
    assert phrase in g_msg.replace("gradviz", "torch"), f"gradviz's message lacks {phrase!r}: {g_msg}"

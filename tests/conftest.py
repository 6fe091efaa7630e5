"""Shared test helpers: run the same program in gradviz and in PyTorch and compare."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import gradviz
from gradviz.autograd._functional import make_graph_task

TOLERANCES = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-10)}


def cpu_has(*flags):
    """Whether this CPU has every one of ``flags`` (as /proc/cpuinfo names them, e.g. "avx2",
    "fma", "avx512f"): which compiled kernel loop runs, and so which bits a test expects."""
    try:
        with open("/proc/cpuinfo") as f:
            found = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return all(flag in found for flag in flags)


def tracked_per_waiting_piece(observer=None, n=2000):
    """GC-tracked objects allocated per piece of an ``n``-way ``stack`` of products of one
    leaf, by the time the last product runs: its pre-hook sees every other piece waiting in
    the ready queue (Note [Gradients as arrays] in gradviz_ext/_task.py). The pass runs with
    ``observer``; x's gradient is checked."""
    x = gradviz.ones(16, requires_grad=True)
    ys = [x * ((1 + i % 16) / 16) for i in range(n)]
    loss = gradviz.stack(ys).sum()
    counts = []
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        start = gc.get_count()[0]
        ys[-1].grad_fn.register_prehook(lambda grads: counts.append(gc.get_count()[0] - start))
        make_graph_task([loss], observer=observer).run()
    finally:
        if was_enabled:
            gc.enable()
    np.testing.assert_allclose(x.grad.numpy(), sum((1 + i % 16) / 16 for i in range(n)),
                               rtol=1e-5)
    return counts[0] / n


def to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().numpy(force=True)  # force: torch returns ZeroTensors for some Hessians
    if isinstance(value, gradviz.Tensor):
        return value.detach().numpy()
    return np.asarray(value)


def assert_close(gv_value, torch_value, dtype_name="float64", what="value", loose=False):
    """Values and dtypes must agree (dtype by name: gradviz.float32 ~ torch.float32)."""
    if torch_value is None or gv_value is None:
        assert gv_value is None and torch_value is None, f"{what}: gradviz {gv_value!r} vs torch {torch_value!r}"
        return
    a, b = to_numpy(gv_value), to_numpy(torch_value)
    assert a.shape == b.shape, f"{what}: shape {a.shape} (gradviz) != {b.shape} (torch)"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} (gradviz) != {b.dtype} (torch)"
    tolerance = TOLERANCES["float64"] if a.dtype == np.float64 and not loose else TOLERANCES["float32"]
    np.testing.assert_allclose(a, b, err_msg=what, equal_nan=True, **tolerance)


def run_both(program, arrays, requires_grad=True, dtype="float64", create_graph_order=1, seed=0,
             loose=False):
    """Run ``program(module, *tensors)`` in gradviz and torch; compare outputs and gradients.

    ``arrays`` are numpy arrays (the inputs). The output is reduced with a random upstream
    gradient, so every entry of the Jacobian-vector product is checked. With
    ``create_graph_order=2`` the second derivative (a Hessian-vector product) is compared too.
    ``loose`` uses float32 tolerances for a float64 program that computes in float32.
    """
    rng = np.random.default_rng(seed)
    gv_inputs = [gradviz.tensor(a.astype(dtype), requires_grad=requires_grad) for a in arrays]
    th_inputs = [torch.tensor(a.astype(dtype), requires_grad=requires_grad) for a in arrays]
    gv_out = program(gradviz, *gv_inputs)
    th_out = program(torch, *th_inputs)
    assert_close(gv_out, th_out, dtype, "forward", loose)
    if not requires_grad or not th_out.requires_grad:
        return
    upstream = rng.standard_normal(tuple(th_out.shape)).astype(dtype)
    gv_grads = gradviz.autograd.grad(gv_out, gv_inputs, gradviz.tensor(upstream),
                                     create_graph=create_graph_order > 1, allow_unused=True)
    th_grads = torch.autograd.grad(th_out, th_inputs, torch.tensor(upstream),
                                   create_graph=create_graph_order > 1, allow_unused=True)
    for i, (g, t) in enumerate(zip(gv_grads, th_grads)):
        assert_close(g, t, dtype, f"gradient of input {i}", loose)
    if create_graph_order > 1:
        # differentiate <grads, v> once more
        used = [(g, t, i) for i, (g, t) in enumerate(zip(gv_grads, th_grads))
                if t is not None and t.requires_grad]
        if not used:
            return
        vs = [rng.standard_normal(tuple(t.shape)).astype(dtype) for _, t, _ in used]
        gv_total = sum((g * gradviz.tensor(v)).sum() for (g, _, _), v in zip(used, vs))
        th_total = sum((t * torch.tensor(v)).sum() for (_, t, _), v in zip(used, vs))
        gv_second = gradviz.autograd.grad(gv_total, gv_inputs, allow_unused=True)
        th_second = torch.autograd.grad(th_total, th_inputs, allow_unused=True)
        for i, (g, t) in enumerate(zip(gv_second, th_second)):
            if t is None:
                # torch may leave an input unused where gradviz's rule produced zeros
                assert g is None or np.all(to_numpy(g) == 0), f"second derivative {i}"
                continue
            if g is None:
                assert np.all(to_numpy(t) == 0), f"second derivative {i}: gradviz None, torch {t}"
                continue
            assert_close(g, t, dtype, f"second derivative of input {i}", loose)


@pytest.fixture
def gv():
    return gradviz

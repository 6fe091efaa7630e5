"""Helpers for the engine, autograd and debug tests: run one program in gradviz and torch.

(Imported as ``torch_compare``: pytest puts each test directory on ``sys.path``; the
autograd and debug tests load this file by path.)
"""

from __future__ import annotations

import numpy as np
import torch

import gradviz


def raised(program, module):
    """Run ``program(module)``; return the exception it raised (or None)."""
    try:
        program(module)
    except Exception as exc:  # noqa: BLE001 - the test compares whatever was raised
        return exc
    return None


def assert_same_error(program, phrase):
    """Both frameworks raise the same exception type, and both messages contain ``phrase``."""
    th = raised(program, torch)
    gv = raised(program, gradviz)
    assert th is not None, f"torch did not raise; the test's premise is wrong ({phrase!r})"
    assert phrase in str(th), f"the phrase is not torch's: {th}"
    assert gv is not None, f"gradviz did not raise; torch raised {type(th).__name__}: {th}"
    assert type(gv).__name__ == type(th).__name__, (
        f"gradviz raised {type(gv).__name__}: {gv}\ntorch raised {type(th).__name__}: {th}")
    assert phrase in str(gv), f"gradviz's message lacks {phrase!r}: {gv}"
    return gv, th


def assert_both_succeed(program):
    """Neither framework raises; returns both results."""
    th_result = program(torch)
    gv_result = program(gradviz)
    return gv_result, th_result


def as_numpy(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return value.detach().numpy()


def assert_tensors_equal(gv_value, th_value, rtol=1e-12, atol=1e-12, what="value"):
    """Same None-ness, shape, dtype name and values."""
    if gv_value is None or th_value is None:
        assert gv_value is None and th_value is None, f"{what}: gradviz {gv_value!r}, torch {th_value!r}"
        return
    a, b = as_numpy(gv_value), as_numpy(th_value)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs torch {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs torch {b.dtype}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def node_name(node):
    """A node's name; torch's AccumulateGrad says ``torch::autograd::AccumulateGrad``."""
    return None if node is None else node.name().replace("torch::autograd::", "")

"""Result dtypes of mixed-dtype arithmetic, and gradient dtypes, compared with torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def make(m, kind):
    """Build a named operand in module ``m``."""
    table = {
        "i64": lambda: m.tensor([3, -4, 5]),
        "i32": lambda: m.tensor([3, -4, 5], dtype=m.int32),
        "i64_0d": lambda: m.tensor(7),
        "u8": lambda: m.tensor([1, 2, 3], dtype=m.uint8),
        "bool": lambda: m.tensor([True, False, True]),
        "f32": lambda: m.tensor([0.5, 1.5, -2.0]),
        "f64": lambda: m.tensor([0.5, 1.5, -2.0], dtype=m.float64),
        "f16": lambda: m.tensor([0.5, 1.5, -2.0], dtype=m.float16),
        "f32_0d": lambda: m.tensor(2.5),
        "f64_0d": lambda: m.tensor(2.5, dtype=m.float64),
        "int": lambda: 3,
        "float": lambda: 2.5,
        "pybool": lambda: True,
    }
    return table[kind]()


OPERATORS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}

PAIRS = [
    ("i64", "i64"), ("i64", "i32"), ("i32", "u8"), ("u8", "bool"), ("i64", "f32"),
    ("i64", "int"), ("i64", "float"), ("i32", "float"), ("f32", "f64"), ("f16", "f32"),
    ("f32", "f64_0d"), ("f64_0d", "f32"), ("i64", "f32_0d"), ("f16", "f64_0d"), ("f32", "float"),
    ("f16", "float"), ("f64", "int"), ("i64_0d", "f32"), ("i64_0d", "i32"), ("u8", "int"),
    ("bool", "int"), ("bool", "float"), ("f32_0d", "f64_0d"), ("i32", "i64_0d"),
    ("float", "i64"), ("int", "f16"), ("float", "f64_0d"), ("f32", "pybool"),
]


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("left,right", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_result_dtype_matches_torch(op, left, right):
    fn = OPERATORS[op]
    try:
        th = fn(make(torch, left), make(torch, right))
    except RuntimeError as th_error:  # e.g. subtraction with bool tensors
        with pytest.raises(RuntimeError) as gv_error:
            fn(make(gradviz, left), make(gradviz, right))
        assert str(th_error).split(".")[0] in str(gv_error.value)
        return
    gv = fn(make(gradviz, left), make(gradviz, right))
    assert str(gv.dtype).split(".")[-1] == str(th.dtype).split(".")[-1]
    assert tuple(gv.shape) == tuple(th.shape)
    np.testing.assert_allclose(gv.numpy().astype(np.float64), th.numpy().astype(np.float64),
                               rtol=1e-3 if "f16" in (left, right) else 1e-6)


@pytest.mark.parametrize("left,right", [("f32", "f64"), ("f16", "f32"), ("f32", "f64_0d"),
                                        ("f64_0d", "f32"), ("f16", "f64_0d")])
def test_gradients_come_back_in_each_input_dtype(left, right):
    def run(m):
        a = make(m, left).requires_grad_()
        b = make(m, right).requires_grad_()
        (a * b + a).sum().backward()
        return a.grad, b.grad

    (gv_a, gv_b), (th_a, th_b) = run(gradviz), run(torch)
    for gv, th in ((gv_a, th_a), (gv_b, th_b)):
        assert str(gv.dtype).split(".")[-1] == str(th.dtype).split(".")[-1]
        assert tuple(gv.shape) == tuple(th.shape)
        np.testing.assert_allclose(gv.numpy().astype(np.float64), th.numpy().astype(np.float64),
                                   rtol=1e-3)


def test_default_dtypes_of_python_data():
    for data in ([1.0, 2.0], [1, 2], [True, False], 3.0, 3, [[1, 2.5]]):
        assert str(gradviz.tensor(data).dtype).split(".")[-1] == str(torch.tensor(data).dtype).split(".")[-1]


def test_explicit_float64_keeps_python_float_precision():
    assert gradviz.tensor([0.1, 1 / 3], dtype=gradviz.float64).tolist() == \
        torch.tensor([0.1, 1 / 3], dtype=torch.float64).tolist()

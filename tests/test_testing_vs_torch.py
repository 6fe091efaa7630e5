"""``gradviz.testing`` against ``torch.testing``: assert_close passes and fails on the same
inputs with the same exception type and message (tests written for torch match on them), and
make_tensor keeps torch's ranges and checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import gradviz

nan, inf = float("nan"), float("inf")


def cases(lib):
    """(actual, expected, options) built with ``lib``."""
    t = lib.tensor
    return {
        "close": (t([1.0, 2.0]), t([1.0, 2.0 + 1e-7]), {}),
        "two mismatches": (t([1.0, 2.0, 3.0, 4.0]), t([1.0, 2.1, 3.0, 4.5]), {}),
        "2-d index": (t([[1.0, 2.0], [3.0, 4.0]]), t([[1.0, 2.0], [3.0, 5.0]]), {}),
        "dtype": (t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64), {}),
        "dtype unchecked": (t([1.0, 2.0]), t([1.0, 2.0000001], dtype=lib.float64), {"check_dtype": False}),
        "dtype unchecked far": (t([1.0, 2.0]), t([1.0, 2.5], dtype=lib.float64), {"check_dtype": False}),
        "shape": (t([1.0, 2.0]), t([1.0, 2.0, 3.0]), {}),
        "tensor and float": (t(1.0), 1.0, {}),
        "floats": (1.0, 1.1, {}),
        "ints": (1, 2, {}),
        "int and float": (1, 1.0, {}),
        "int and float untyped": (1, 1.0, {"check_dtype": False}),
        "bools": (True, False, {}),
        "none": (None, 1, {}),
        "strings": ("a", "a", {}),
        "list item": ([t(1.0), t(2.0)], [t(1.0), t(2.5)], {}),
        "dict item": ({"a": t(1.0)}, {"a": t(1.5)}, {}),
        "dict keys": ({"a": 1}, {"b": 1}, {}),
        "lengths": ([1, 2], [1, 2, 3], {}),
        "nested": ({"w": [t([1.0]), (t([2.0]), 3)]}, {"w": [t([1.0]), (t([2.0]), 4)]}, {}),
        "int tensors": (t([1, 2]), t([1, 3]), {}),
        "bool tensors": (t([True]), t([False]), {}),
        "nan": (t([nan]), t([nan]), {}),
        "nan equal": (t([nan]), t([nan]), {"equal_nan": True}),
        "inf": (t([inf]), t([inf]), {}),
        "inf signs": (t([inf]), t([-inf]), {}),
        "tiny": (t([1e-9]), t([0.0]), {}),
        "rtol only": (t([1.0, 2.0]), t([1.0, 2.1]), {"rtol": 0.1}),
        "atol only": (t([1.0, 2.0]), t([1.0, 2.0]), {"atol": 1e-3}),
        "loose": (t([1.0, 2.0]), t([1.0, 2.1]), {"rtol": 0.1, "atol": 0.0}),
        "message": (t([1.0, 2.0]), t([1.0, 2.1]), {"msg": "custom"}),
        "message function": (t([1.0, 2.0]), t([1.0, 3.0]), {"msg": lambda m: f"Header\n\n{m}\n\nFooter"}),
        "requires grad": (t([1.0, 2.0], requires_grad=True), t([1.0, 2.0]), {}),
        "transposed": (lib.zeros(2, 3).t(), lib.zeros(3, 2), {}),
        "empty": (lib.zeros(0), lib.zeros(0), {}),
        "float64": (t([1.0], dtype=lib.float64), t([1.0 + 1e-6], dtype=lib.float64), {}),
        "float16": (t([1.0], dtype=lib.float16), t([1.002], dtype=lib.float16), {}),
        "scalar tensors": (t(2.0), t(2.5), {}),
        "numpy arrays": (np.array([1.0, 2.0]), np.array([1.0, 2.5]), {}),
        "tensor and numpy": (t([1.0, 2.0]), np.array([1.0, 2.0]), {}),
        "numpy numbers": (np.float32(1.0), np.float64(1.5), {}),
    }


def outcome(lib, name):
    actual, expected, options = cases(lib)[name]
    try:
        lib.testing.assert_close(actual, expected, **options)
    except Exception as error:  # the type and message, compared with torch's
        return type(error).__name__, str(error).replace("gradviz._tensor.", "").replace("torch.", "").replace("gradviz.", "")
    return "passed"


@pytest.mark.parametrize("name", list(cases(torch)))
def test_assert_close_agrees_with_torch(name):
    assert outcome(gradviz, name) == outcome(torch, name)


def test_assert_allclose_is_deprecated_and_lenient():
    for lib in (gradviz, torch):
        with pytest.warns(FutureWarning, match="assert_allclose"):
            lib.testing.assert_allclose(lib.tensor([nan, 1.0]), [nan, 1.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool"])
def test_make_tensor_draws_in_torch_ranges(dtype):
    gradviz.manual_seed(3)
    ours = gradviz.testing.make_tensor(400, dtype=getattr(gradviz, dtype), device="cpu")
    theirs = torch.testing.make_tensor(400, dtype=getattr(torch, dtype), device="cpu")
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.shape == (400,)
    low, high = {"bool": (0, 1), "uint8": (0, 9)}.get(dtype, (-9, 9))
    values = ours.numpy().astype(np.float64)
    assert values.min() >= low and values.max() <= high
    assert len(np.unique(values)) > (1 if dtype == "bool" else 5)


def test_make_tensor_options_match_torch():
    for lib in (gradviz, torch):
        t = lib.testing.make_tensor((3, 4), dtype=lib.float32, device="cpu", low=-1, high=1,
                                    noncontiguous=True, requires_grad=True, exclude_zero=True)
        assert tuple(t.shape) == (3, 4) and not t.is_contiguous() and t.requires_grad and t.is_leaf
        assert bool((t != 0).all()) and bool((t.abs() <= 1).all())
        t.sum().backward()
        assert t.grad.shape == t.shape
        i = lib.testing.make_tensor(50, dtype=lib.int64, device="cpu", low=-2, high=2, exclude_zero=True)
        assert bool((i != 0).all()) and int(i.min()) >= -2 and int(i.max()) <= 1


@pytest.mark.parametrize("bad", ["low above high", "nan", "outside", "grad of ints", "noncontiguous and format"])
def test_make_tensor_refuses_what_torch_refuses(bad):
    def run(lib):
        options = {"low above high": dict(dtype=lib.float32, low=2, high=1),
                   "nan": dict(dtype=lib.float32, low=math.nan),
                   "outside": dict(dtype=lib.uint8, low=-20, high=-10),
                   "grad of ints": dict(dtype=lib.int64, requires_grad=True),
                   "noncontiguous and format": dict(dtype=lib.float32, noncontiguous=True,
                                                    memory_format="contiguous")}[bad]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lib.testing.make_tensor(3, device="cpu", **options)
        except Exception as error:  # compared with torch's
            return type(error).__name__, str(error).split(",")[0].replace("torch.", "").replace("gradviz.", "")
        return "made"

    assert run(gradviz) == run(torch)

"""Tensor basics against PyTorch: creation dtypes and shapes, printing, conversion, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz as gv

CREATIONS = [
    ("float_list", lambda m: m.tensor([1.0, 2.0])),
    ("int_list", lambda m: m.tensor([1, 2])),
    ("bool_list", lambda m: m.tensor([True, False])),
    ("nested", lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]])),
    ("scalar", lambda m: m.tensor(2.5)),
    ("numpy_f64", lambda m: m.tensor(np.array([1.0, 2.0]))),
    ("numpy_i32", lambda m: m.tensor(np.array([1, 2], dtype=np.int32))),
    ("dtype_arg", lambda m: m.tensor([1, 2], dtype=m.float64)),
    ("zeros", lambda m: m.zeros(2, 3)),
    ("zeros_tuple", lambda m: m.zeros((2, 3), dtype=m.int64)),
    ("ones", lambda m: m.ones(3)),
    ("full_int", lambda m: m.full((2,), 3)),
    ("full_float", lambda m: m.full((2,), 3.0)),
    ("full_bool", lambda m: m.full((2,), True)),
    ("arange_int", lambda m: m.arange(5)),
    ("arange_float", lambda m: m.arange(0, 1, 0.25)),
    ("arange_start_end", lambda m: m.arange(2, 7, 2)),
    ("arange_negative_step", lambda m: m.arange(5, 0, -1.5)),
    ("eye", lambda m: m.eye(3)),
    ("linspace", lambda m: m.linspace(0, 1, 5)),
    ("zeros_like", lambda m: m.zeros_like(m.tensor([1, 2]))),
    ("ones_like_dtype", lambda m: m.ones_like(m.tensor([1, 2]), dtype=m.float16)),
    ("full_like", lambda m: m.full_like(m.tensor([1.0, 2.0]), 7)),
    ("empty_shape", lambda m: m.zeros(0, 3)),
]


@pytest.mark.parametrize("program", [c[1] for c in CREATIONS], ids=[c[0] for c in CREATIONS])
def test_creation_matches_torch(program):
    ours, theirs = program(gv), program(torch)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


PRINTED = [
    lambda m: m.tensor([1.0, 2.0]),
    lambda m: m.tensor([1.0, 2.0], requires_grad=True),
    lambda m: m.tensor([1.0, 2.0], requires_grad=True) * 2,
    lambda m: m.tensor(3.0),
    lambda m: m.tensor([1, 2]),
    lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
    lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]),
    lambda m: m.tensor([0.5, 0.25]),
    lambda m: m.tensor([True, False]),
]


@pytest.mark.parametrize("program", PRINTED)
def test_repr_matches_torch(program):
    assert repr(program(gv)) == repr(program(torch)).replace("torch.", "gradviz.")


def test_size_and_dims_match_torch():
    for m in (gv, torch):
        t = m.zeros(2, 3, 4)
        assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
        assert t.dim() == t.ndim == 3 and t.numel() == 24 and len(t) == 2
    assert repr(gv.zeros(2, 3).shape) == "gradviz.Size([2, 3])"


def test_item_tolist_float_bool():
    for m in (gv, torch):
        assert m.tensor([2.5]).item() == 2.5
        assert m.tensor([[1, 2]]).tolist() == [[1, 2]]
        assert float(m.tensor(1.5)) == 1.5 and int(m.tensor(3)) == 3
        assert bool(m.tensor([1.0])) is True


@pytest.mark.parametrize("program, error, phrase", [
    (lambda m: m.tensor([1.0, 2.0]).item(), RuntimeError, "cannot be converted to Scalar"),
    (lambda m: bool(m.tensor([1.0, 2.0])), RuntimeError, "Boolean value of Tensor with more than one value is ambiguous"),
    (lambda m: m.tensor([1, 2], requires_grad=True), RuntimeError, "Only Tensors of floating point and complex dtype can require gradients"),
    (lambda m: m.tensor([1.0], requires_grad=True).numpy(), RuntimeError, "Can't call numpy() on Tensor that requires grad"),
    (lambda m: (m.tensor([1.0], requires_grad=True) * 2).requires_grad_(False), RuntimeError, "you can only change requires_grad flags of leaf variables"),
    (lambda m: m.zeros(2, 3).view(4), RuntimeError, "is invalid for input of size 6"),
    (lambda m: m.zeros(2, 3).sum(2), IndexError, "Dimension out of range"),
    (lambda m: m.zeros(2, 3) @ m.zeros(2, 3), RuntimeError, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"),
    (lambda m: m.zeros(3)[3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda m: m.zeros(2).expand(3, 3), RuntimeError, "must match the existing size (2) at non-singleton dimension 1"),
    (lambda m: m.zeros(2, 3).t().view(6), RuntimeError, "view size is not compatible with input tensor's size and stride"),
])
def test_errors_match_torch(program, error, phrase):
    with pytest.raises(error) as theirs:
        program(torch)
    assert phrase in str(theirs.value), f"torch says: {theirs.value}"
    with pytest.raises(error) as ours:
        program(gv)
    assert phrase in str(ours.value), f"gradviz says: {ours.value}"


def test_views_share_storage_and_version_counter():
    x = gv.zeros(2, 3)
    v = x.view(6)
    v.numpy()[0] = 5.0
    assert x.numpy()[0, 0] == 5.0
    assert v._version_counter is x._version_counter
    t = x.t()
    assert t._version_counter is x._version_counter and t._base is x


def test_numpy_shares_memory_and_detach_shares_data():
    x = gv.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    d.numpy()[1] = 7.0
    assert x.detach().numpy()[1] == 7.0 and not d.requires_grad and d.is_leaf

"""``nn.Buffer``: assigning one to a Module attribute registers a buffer, persistent or not,
as torch does; the returned tensor is a plain, detached tensor that ``isinstance`` still
recognises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def _module(lib, persistent):
    class Running(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = lib.nn.Parameter(lib.ones(3))
            self.mean = lib.nn.Buffer(lib.zeros(3))
            self.scratch = lib.nn.Buffer(lib.arange(2.0), persistent=persistent)

        def forward(self, x):
            return x * self.weight + self.mean

    return Running()


@pytest.mark.parametrize("persistent", [True, False])
def test_buffers_register_as_in_torch(persistent):
    ours, theirs = _module(gradviz, persistent), _module(torch, persistent)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert isinstance(ours.mean, gradviz.nn.Buffer) and isinstance(ours.mean, gradviz.Tensor)
    assert not isinstance(gradviz.zeros(1), gradviz.nn.Buffer)
    assert ours.mean.persistent == theirs.mean.persistent
    assert ours.scratch.persistent == theirs.scratch.persistent == persistent
    np.testing.assert_array_equal(ours.scratch.numpy(), theirs.scratch.numpy())
    # reassigning a plain tensor to a buffer name keeps it a buffer, persistence unchanged
    ours.scratch, theirs.scratch = gradviz.ones(2), torch.ones(2)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_a_buffer_is_detached_and_keeps_requires_grad():
    for lib in (gradviz, torch):
        source = lib.ones(2, requires_grad=True)
        marked = lib.nn.Buffer(source * 2)
        assert marked.requires_grad and marked.is_leaf
        assert lib.nn.Buffer().shape == (0,) and lib.nn.parameter.Buffer is lib.nn.Buffer


def test_a_buffer_over_a_taken_attribute_name_fails_as_in_torch():
    errors = []
    for lib in (gradviz, torch):
        module = lib.nn.Module()
        module.taken = 1
        with pytest.raises(KeyError) as info:
            module.taken = lib.nn.Buffer(lib.zeros(1))
        errors.append(str(info.value))
    assert "already exists" in errors[0] and "already exists" in errors[1]

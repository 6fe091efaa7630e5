"""``flatten`` with nothing to merge returns the tensor itself, as in PyTorch (no view node),
and ``start_dim`` after ``end_dim`` is torch's error. Facts read from torch."""

from __future__ import annotations

import pytest
import torch

import gradviz


@pytest.mark.parametrize("dims", [(0, 0), (1, 1), (-1, -1), (1, -1), (0, -1), (0, 1)])
def test_flatten_returns_self_exactly_when_torch_does(dims):
    facts = []
    for lib in (torch, gradviz):
        x = lib.ones(2, 3, requires_grad=True) * 1
        y = x.flatten(*dims)
        module = lib.nn.Flatten(*dims)(x)
        facts.append((y is x, module is x, tuple(y.shape), y.grad_fn.name()))
    assert facts[1] == facts[0]


def test_flatten_of_a_vector_and_of_a_scalar():
    facts = []
    for lib in (torch, gradviz):
        v = lib.ones(3, requires_grad=True)
        s = lib.ones((), requires_grad=True)
        facts.append((v.flatten() is v, tuple(s.flatten().shape), s.flatten().grad_fn.name()))
    assert facts[1] == facts[0]


def test_start_after_end_is_torchs_error():
    messages = []
    for lib in (torch, gradviz):
        with pytest.raises(RuntimeError) as error:
            lib.ones(2, 3).flatten(1, 0)
        messages.append(str(error.value))
    assert messages[1] == messages[0]

"""``as_strided`` / ``Tensor.as_strided_`` against torch: values, gradients (with overlapping
windows), node names and saved names, writes through the view, the in-place form, torch's
errors, and gradviz's refusals for layouts it does not cover (Note [as_strided over a dense
tensor] in ``gradviz/ops/_as_strided.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

CALLS = {
    "windows": lambda x: x.as_strided((4, 3), (1, 1)),
    "offset": lambda x: x.as_strided((2, 2), (1, 2), 1),
    "transposed": lambda x: x.as_strided((3, 2), (1, 3)),
    "repeated": lambda x: x.as_strided((2, 3), (0, 2), 1),
    "function": lambda x: gradviz.as_strided(x, (3,), (2,)) if isinstance(x, gradviz.Tensor)
    else torch.as_strided(x, (3,), (2,)),
    "of a row block": lambda x: x.view(2, 3)[1:].as_strided((2,), (1,)),
    "of a row block with offset": lambda x: x.view(2, 3)[1:].as_strided((2,), (1,), 4),
    "empty": lambda x: x.as_strided((0, 2), (1, 1)),
}


def _run(lib, call):
    x = lib.tensor(np.arange(1.0, 7.0), requires_grad=True)
    y = call(x * 2.0)
    weights = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))
    (grad,) = lib.autograd.grad((y * y * weights).sum(), x, create_graph=True)
    (second,) = lib.autograd.grad(grad.sum(), x) if y.numel() else (lib.zeros(6),)
    return (y.detach().numpy().tolist(), y.grad_fn.name(), grad.detach().numpy().tolist(),
            second.numpy().tolist(), y._base is not None)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_as_strided_matches_torch(name):
    assert _run(gradviz, CALLS[name]) == _run(torch, CALLS[name])


def test_saved_names_and_in_place_form_match_torch():
    def run(lib):
        x = lib.arange(6.0, requires_grad=True)
        node = (x * 1.0).as_strided((2, 2), (1, 1), 2).grad_fn
        saved = (tuple(node._saved_size), tuple(node._saved_stride), node._saved_storage_offset)
        y = x * 1.0
        returned = y.as_strided_((2, 3), (1, 2))
        (y * lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
        return (saved, returned is y, tuple(y.shape), y._version, y.grad_fn.name(),
                y.grad_fn.next_functions[0][0].name(), x.grad.tolist())

    assert run(gradviz) == run(torch)


def test_writes_through_the_view_reach_the_tensor_as_torch():
    def run(lib):
        x = lib.arange(6.0, requires_grad=True)
        y = x * 2.0
        every_other = y.as_strided((3,), (2,), 1)
        every_other.mul_(10.0)
        y.sum().backward()
        plain = lib.zeros(6)
        plain.as_strided((2,), (3,)).fill_(5.0)
        return y.detach().tolist(), y.grad_fn.name(), x.grad.tolist(), plain.tolist()

    assert run(gradviz) == run(torch)


@pytest.mark.parametrize("bad,phrase", [
    (lambda lib, x: x.as_strided((2, 2), (1,)), "mismatch in length of strides and shape"),
    (lambda lib, x: x.as_strided((2, 2), (1, -1)), "as_strided: Negative strides are not supported at the moment, "
                                                   "got strides: \\[1, -1\\]"),
    (lambda lib, x: x.as_strided((4, 4), (4, 1)), "setStorage: sizes \\[4, 4\\], strides \\[4, 1\\], storage offset 0, "
                                                  "and itemsize 4 requiring a storage size of 64 are out of bounds "
                                                  "for storage of size 36"),
])
def test_bad_calls_raise_torchs_errors(bad, phrase):
    for lib in (gradviz, torch):
        with pytest.raises(RuntimeError, match=phrase):
            bad(lib, lib.arange(9.0).view(3, 3))


@pytest.mark.parametrize("bad,phrase", [
    (lambda x: x.t().as_strided((2,), (1,)), "is not; call .contiguous\\(\\) first"),
    (lambda x: x[1:].as_strided((2,), (1,), 0), "reaches outside them; call it on the base tensor"),
    (lambda x: (lambda view: (x.as_strided_((9,), (1,)), view))(x[0]), "take the views after the call"),
])
def test_layouts_gradviz_does_not_cover_are_refused_clearly(bad, phrase):
    x = gradviz.arange(9.0, requires_grad=True).view(3, 3) * 1.0
    with pytest.raises(RuntimeError, match=phrase):
        bad(x)

"""What gradviz does not implement fails with a typed error that says so, never silently:
complex numbers, nested forward-mode levels (``jacfwd(jacfwd(f))``), the deprecated
``Module.register_backward_hook``. PyTorch runs these programs, so the sweep cannot compare
them; where PyTorch has the same error for the same cause (nested dual levels), its type and
phrase are checked against torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


@pytest.mark.parametrize("make", [
    lambda t: t.tensor([1 + 2j]),
    lambda t: t.zeros(2, dtype=complex),
    lambda t: t.from_numpy(np.ones(2, dtype=np.complex64)),
    lambda t: t.tensor([1.0]).to(complex),
    lambda t: t.ones(2) * 1j,
    lambda t: t.ones(2, requires_grad=True) * 1j,
    lambda t: 1j - t.ones(2),
    lambda t: t.ones(2) + np.complex64(1 + 1j),
    lambda t: t.add(t.ones(2), 1j),
], ids=["tensor", "zeros_dtype", "from_numpy", "to", "mul_scalar", "mul_scalar_recorded",
        "rsub_scalar", "add_numpy_complex", "add_function"])
def test_complex_values_are_a_type_error(make):
    make(torch)  # torch has complex tensors
    with pytest.raises(TypeError, match="gradviz does not support complex numbers"):
        make(gradviz)


@pytest.mark.parametrize("name", ["complex64", "cfloat", "view_as_complex"])
def test_complex_names_say_why_they_are_missing(name):
    assert hasattr(torch, name)
    with pytest.raises(AttributeError, match="does not support complex numbers"):
        getattr(gradviz, name)


def test_other_missing_names_keep_the_plain_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'$"):
        gradviz.no_such_thing  # noqa: B018


def test_nested_dual_levels_raise_torchs_error():
    for lib in (torch, gradviz):
        fwad = lib.autograd.forward_ad
        with fwad.dual_level():
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                with fwad.dual_level():
                    pass


def test_jacfwd_of_jacfwd_is_refused_not_wrong():
    def f(x):
        return x.sin().sum()

    x = [0.3, -0.4]
    expected = torch.func.jacfwd(torch.func.jacfwd(f))(torch.tensor(x))
    assert torch.allclose(expected, torch.diag(-torch.tensor(x).sin()))
    with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
        gradviz.func.jacfwd(gradviz.func.jacfwd(f))(gradviz.tensor(x))
    # the supported ways to the same Hessian agree with torch
    for way in (gradviz.func.hessian, lambda g: gradviz.func.jacrev(gradviz.func.jacrev(g)),
                lambda g: gradviz.func.jacrev(gradviz.func.jacfwd(g))):
        got = way(f)(gradviz.tensor(x))
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)


def test_module_register_backward_hook_points_to_the_full_hook():
    lin = gradviz.nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        lin.register_backward_hook(lambda m, gi, go: None)

"""In-place activations against PyTorch (Note [In-place activations] in
gradviz/ops/_activation.py).

``leaky_relu_``, ``elu_``/``selu_``, ``celu_``, ``threshold_`` and ``rrelu_`` are ops of their
own in PyTorch, recorded as ``<Name>Backward1`` with the result saved (threshold_ keeps the
input). For each form, the node name, the values, the first and second derivatives, the saved
values and the error after a later in-place write are read from torch running the same code.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gradviz
import gradviz.nn.functional as GF

FORMS = {
    "leaky_relu_inplace": lambda F, x: F.leaky_relu(x, 0.2, inplace=True),
    "leaky_relu_": lambda F, x: F.leaky_relu_(x, 0.2),
    "elu_inplace": lambda F, x: F.elu(x, 0.7, inplace=True),
    "elu_": lambda F, x: F.elu_(x),
    "selu_inplace": lambda F, x: F.selu(x, inplace=True),
    "celu_inplace": lambda F, x: F.celu(x, 0.5, inplace=True),
    "threshold_value_above": lambda F, x: F.threshold(x, 0.1, 2.0, inplace=True),
    "threshold_value_below": lambda F, x: F.threshold_(x, 0.1, -3.0),
    "rrelu_eval": lambda F, x: F.rrelu(x, inplace=True),
    "relu_stays_backward0": lambda F, x: F.relu(x, inplace=True),
    "hardtanh_stays_backward0": lambda F, x: F.hardtanh(x, inplace=True),
    "silu_stays_backward0": lambda F, x: F.silu(x, inplace=True),
}
MODULES = {
    "LeakyReLU": lambda nn: nn.LeakyReLU(0.2, inplace=True),
    "ELU": lambda nn: nn.ELU(inplace=True),
    "SELU": lambda nn: nn.SELU(inplace=True),
    "CELU": lambda nn: nn.CELU(0.5, inplace=True),
    "Threshold": lambda nn: nn.Threshold(0.1, 2.0, inplace=True),
    "SiLU": lambda nn: nn.SiLU(inplace=True),
    "ReLU6": lambda nn: nn.ReLU6(inplace=True),
    "Hardswish": lambda nn: nn.Hardswish(inplace=True),
    "Mish": lambda nn: nn.Mish(inplace=True),
}


def _round(t):
    return np.round(t.detach().numpy().astype(np.float64), 6).tolist()


def _run(lib, F, form, dtype):
    x = lib.linspace(-2, 2, 6, dtype=dtype, requires_grad=True)
    y = form(F, x * 1.5)
    saved = {name: _round(getattr(y.grad_fn, name))
             for name in ("_saved_result", "_saved_self") if hasattr(y.grad_fn, name)}
    if y.grad_fn.name() == "RreluWithNoiseBackward1":
        saved = {}  # gradviz keeps rrelu's slopes, not torch's saved names
    (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
    (gg,) = lib.autograd.grad(g.sum(), x, allow_unused=True)
    return (y.grad_fn.name(), _round(y), _round(g), None if gg is None else _round(gg), saved)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_inplace_activation_matches_torch(form, dtype):
    expected = _run(torch, TF, FORMS[form], getattr(torch, dtype))
    got = _run(gradviz, GF, FORMS[form], getattr(gradviz, dtype))
    assert got == expected


@pytest.mark.parametrize("module", sorted(MODULES))
def test_inplace_modules_record_torchs_nodes(module):
    facts = []
    for lib in (torch, gradviz):
        x = lib.linspace(-2, 2, 6, requires_grad=True)
        h = x * 1
        y = MODULES[module](lib.nn)(h)
        facts.append((y.grad_fn.name(), h.grad_fn.name(), h._version, h.detach().numpy().copy()))
    assert facts[1][:3] == facts[0][:3]
    np.testing.assert_allclose(facts[1][3], facts[0][3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["leaky_relu_", "elu_", "celu_inplace"])
def test_writing_the_result_again_breaks_backward_as_in_torch(form):
    messages = []
    for lib, F in ((torch, TF), (gradviz, GF)):
        x = lib.linspace(-1, 1, 4, requires_grad=True)
        y = FORMS[form](F, x * 1)
        y.mul_(2)
        with pytest.raises(RuntimeError) as error:
            y.sum().backward()
        messages.append(str(error.value).split("[")[0])
    assert messages[1] == messages[0]
    assert "modified by an inplace operation" in messages[1]

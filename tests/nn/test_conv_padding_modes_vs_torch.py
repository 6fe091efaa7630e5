"""Conv1d and Conv2d with ``padding_mode`` reflect, replicate and circular (the pad-then-convolve
of torch's modules): values, input and parameter gradients, reprs and the refusal of an unknown
mode, against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

rng = np.random.default_rng(23)


@pytest.mark.parametrize("padding", [1, (1, 2), "same", "valid"], ids=str)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("dims", [1, 2])
def test_padding_modes_match_torch(dims, mode, padding):
    if dims == 1 and isinstance(padding, tuple):
        padding = padding[1]
    options = dict(padding=padding, padding_mode=mode, dilation=2 if padding == "same" else 1, groups=1)
    theirs = getattr(torch.nn, f"Conv{dims}d")(4, 6, 3, **options)
    ours = getattr(gradviz.nn, f"Conv{dims}d")(4, 6, 3, **options)
    ours.load_state_dict({key: gradviz.tensor(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    x = rng.standard_normal((2, 4) + (9,) * dims).astype(np.float32)
    a, b = gradviz.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_b = ours(a), theirs(b)
    np.testing.assert_allclose(out_a.detach().numpy(), out_b.detach().numpy(), rtol=1e-5, atol=1e-5)
    weights = rng.standard_normal(tuple(out_b.shape)).astype(np.float32)
    (out_a * gradviz.tensor(weights)).sum().backward()
    (out_b * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_an_unknown_padding_mode_is_refused_as_torch_refuses_it():
    messages = []
    for lib in (gradviz, torch):
        with pytest.raises(ValueError) as caught:
            lib.nn.Conv2d(1, 1, 3, padding_mode="mirror")
        messages.append(str(caught.value).split("{")[0] + str(caught.value).split("}")[1])
    assert messages[0] == messages[1]

"""``nn.LSTM(..., proj_size=p)`` against PyTorch: parameter names and shapes, the printed
module, outputs and final states, gradients, the packed path, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.nn.utils.rnn import pack_padded_sequence as gv_pack


def _pair(**options):
    torch.manual_seed(0)
    reference = torch.nn.LSTM(3, 5, proj_size=2, **options).double()
    ours = gradviz.nn.LSTM(3, 5, proj_size=2, **options).double()
    ours.load_state_dict({k: gradviz.tensor(v.detach().numpy())
                          for k, v in reference.state_dict().items()})
    return reference, ours


@pytest.mark.parametrize("options", [{}, {"num_layers": 2}, {"bidirectional": True},
                                     {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_projected_lstm_matches_torch(options):
    reference, ours = _pair(**options)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in reference.named_parameters()]
    assert repr(ours) == repr(reference)
    x = np.random.default_rng(0).standard_normal((4, 2, 3))
    results = []
    for lib, module in ((torch, reference), (gradviz, ours)):
        inp = lib.tensor(x, requires_grad=True)
        out, (h, c) = module(inp)
        (out.pow(2).sum() + h.sum() + c.pow(2).sum()).backward()
        results.append([out.detach().numpy(), h.detach().numpy(), c.detach().numpy(),
                        inp.grad.numpy()] + [p.grad.numpy() for p in module.parameters()])
    for expected, got in zip(*results):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_projected_lstm_over_a_packed_sequence_matches_torch():
    reference, ours = _pair()
    x = np.random.default_rng(1).standard_normal((4, 2, 3))
    outs = []
    for lib, module, pack in ((torch, reference, torch.nn.utils.rnn.pack_padded_sequence),
                              (gradviz, ours, gv_pack)):
        packed = pack(lib.tensor(x), lib.tensor([4, 2]))
        out, (h, c) = module(packed)
        outs.append((out.data.detach().numpy(), h.detach().numpy(), c.detach().numpy()))
    for expected, got in zip(*outs):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", ["negative", "too_big", "wrong_h"])
def test_errors_match_torch(case):
    def run(lib):
        try:
            if case == "negative":
                lib.nn.LSTM(3, 5, proj_size=-1)
            elif case == "too_big":
                lib.nn.LSTM(3, 5, proj_size=5)
            else:
                lib.nn.LSTM(3, 5, proj_size=2)(lib.zeros(4, 2, 3),
                                               (lib.zeros(1, 2, 5), lib.zeros(1, 2, 5)))
        except Exception as error:  # noqa: BLE001 - type and message are compared
            return type(error).__name__, str(error)
        return None
    assert run(gradviz) == run(torch)

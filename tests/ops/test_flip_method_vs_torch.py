"""``Tensor.flip`` takes its dims as one sequence or one by one (``x.flip(0, 2)``), as torch's
method does; the function ``flip`` takes a sequence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


@pytest.mark.parametrize("call", [lambda x: x.flip(0, 2), lambda x: x.flip((0, 2)), lambda x: x.flip([1]),
                                  lambda x: x.flip(-1), lambda x: x.flip(dims=(1, 2)),
                                  lambda x: x.flip(0, 2).flip(1)])
def test_flip_method_matches_torch(call):
    def run(lib):
        x = lib.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
        y = call(x)
        (y * lib.tensor(np.linspace(0, 1, 24).reshape(tuple(y.shape)))).sum().backward()
        return y.detach().numpy().tolist(), x.grad.numpy().tolist(), y.grad_fn.name()

    assert run(gradviz) == run(torch)

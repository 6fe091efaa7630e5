"""Ops given tensors with an empty dim raise PyTorch's exception, with its message, or return
what it returns: norms without an identity (inf, negative p) over an empty dim, kthvalue,
index_select from an empty dim, quantile, reshape with -1 of no elements, one_hot without
num_classes, multinomial with no categories or no samples, the reductions without an identity
(max, amax, argmax, median, ...) of nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz

CASES = {
    "norm inf over an empty dim": lambda m: m.zeros(3, 0).norm(math.inf, dim=1),
    "norm -inf over an empty dim": lambda m: m.zeros(3, 0).norm(-math.inf, dim=-1),
    "norm -1 over an empty dim": lambda m: m.zeros(3, 0).norm(-1, dim=1),
    "norm inf of nothing": lambda m: m.zeros(3, 0).norm(math.inf),
    "torch.norm inf of nothing": lambda m: m.norm(m.zeros(0), math.inf),
    "norm inf over dims, one empty": lambda m: m.zeros(3, 0, 2).norm(math.inf, dim=(0, 1)),
    "norm inf over a full dim": lambda m: m.zeros(3, 0).norm(math.inf, dim=0),
    "norm 0.5 over an empty dim": lambda m: m.zeros(3, 0).norm(0.5, dim=1),
    "linalg.vector_norm inf over an empty dim": lambda m: m.linalg.vector_norm(
        m.zeros(3, 0), math.inf, dim=1),
    "kthvalue over an empty dim": lambda m: m.zeros(3, 0).kthvalue(1, 1),
    "kthvalue of an empty vector": lambda m: m.zeros(0).kthvalue(1),
    "index_select from an empty dim": lambda m: m.zeros(2, 3, 0).index_select(
        2, m.tensor([0, 0])),
    "index_select from an empty vector": lambda m: m.zeros(0).index_select(0, m.tensor([0])),
    "index_select of no indices": lambda m: m.zeros(2, 3, 0).index_select(
        2, m.tensor([], dtype=m.int64)),
    "index_select beside an empty dim": lambda m: m.zeros(0, 3).index_select(1, m.tensor([1])),
    "quantile of nothing": lambda m: m.zeros(0).quantile(0.5),
    "quantile over an empty dim": lambda m: m.zeros(0, 3).quantile(0.5, dim=0),
    "nanmedian over an empty dim": lambda m: m.zeros(3, 0).nanmedian(1),
    "reshape nothing with -1": lambda m: m.zeros(0, 2, 3).reshape(0, -1),
    "view nothing with -1": lambda m: m.zeros(0, 2, 3).view(-1, 0),
    "reshape nothing with -1 and sizes": lambda m: m.zeros(0, 2, 3).reshape(5, -1),
    "reshape something into nothing": lambda m: m.zeros(6).reshape(0, -1),
    "one_hot of nothing": lambda m: m.nn.functional.one_hot(m.zeros(0, dtype=m.int64)),
    "one_hot of nothing, classes given": lambda m: m.nn.functional.one_hot(
        m.zeros(0, dtype=m.int64), 3),
    "multinomial, no categories": lambda m: m.multinomial(m.zeros(0), 1),
    "multinomial, no categories, replacement": lambda m: m.multinomial(m.zeros(0), 1, True),
    "multinomial, no categories, two draws": lambda m: m.multinomial(m.zeros(2, 0), 2, True),
    "multinomial, no rows": lambda m: m.multinomial(m.zeros(0, 3), 1),
    "multinomial, no rows nor categories": lambda m: m.multinomial(m.zeros(0, 0), 1, True),
    "multinomial, no samples": lambda m: m.multinomial(m.ones(3), 0),
    "multinomial, negative samples": lambda m: m.multinomial(m.ones(3), -1, True),
    "argmax of nothing": lambda m: m.zeros(0).argmax(),
    "argmin of nothing": lambda m: m.zeros(0).argmin(),
    "max of nothing": lambda m: m.zeros(0).max(),
    "amax of nothing": lambda m: m.zeros(3, 0).amax(),
    "amin of nothing": lambda m: m.zeros(3, 0).amin(),
    "amax over dims, the second empty": lambda m: m.zeros(3, 0).amax((0, 1)),
    "max over an empty dim": lambda m: m.zeros(3, 0).max(1),
}


def _outcome(module, name):
    try:
        result = CASES[name](module)
    except Exception as error:  # noqa: BLE001 - compared with torch's
        return type(error).__name__, str(error).replace("gradviz", "torch")
    return "result", tuple(result.shape), result.dtype.is_floating_point, result.tolist()


@pytest.mark.parametrize("name", list(CASES))
def test_empty_inputs_match_torch(name):
    ours, theirs = _outcome(gradviz, name), _outcome(torch, name)
    if ours[0] == "result" and theirs[0] == "result" and name.startswith("norm"):
        assert ours[1:3] == theirs[1:3]
        np.testing.assert_array_equal(np.asarray(ours[3]), np.asarray(theirs[3]))
    else:
        assert ours == theirs

"""In-place ops whose operand shares part of the written-to memory: PyTorch refuses them with
"unsupported operation: some elements of the input tensor and the written-to tensor refer to a
single memory location" when both tensors are dense, and runs them otherwise. gradviz must
agree case by case (the numpy result of a partly overlapping write depends on buffering)."""

import pytest
import torch

import gradviz

CASES = {
    "add_ shifted": lambda lib, t: t[1:].add_(t[:-1]),
    "sub_ shifted, alpha": lambda lib, t: t[1:].sub_(t[:-1], alpha=2),
    "mul_ shifted": lambda lib, t: t[1:].mul_(t[:-1]),
    "copy_ shifted": lambda lib, t: t[1:].copy_(t[:-1]),
    "setitem shifted": lambda lib, t: t.__setitem__(slice(1, None), t[:-1]),
    "iadd shifted": lambda lib, t: t[1:].__iadd__(t[:-1]),
    "clamp_ with tensor bound": lambda lib, t: t[1:].clamp_(min=t[:-1]),
    "transposed square": lambda lib, t: t[:9].view(3, 3).add_(t[:9].view(3, 3).t()),
    "advanced setitem": lambda lib, t: t.__setitem__(lib.tensor([1, 2]), t[1:3]),
    "index_add_": lambda lib, t: t[1:].index_add_(0, lib.tensor([0, 1]), t[0:2]),
    "same tensor": lambda lib, t: t.add_(t),
    "same elements, another view": lambda lib, t: t[2:6].mul_(t[2:6].view(2, 2).view(4)),
    "every other element": lambda lib, t: t[::2].add_(t[1::2]),
    "disjoint halves": lambda lib, t: t[5:].add_(t[:5]),
    "graph recorded": lambda lib, t: (t.requires_grad_() * 1)[1:].add_(t[:-1]),
    "no grad, leaf requiring grad": lambda lib, t: _under_no_grad(lib, t),
}


def _under_no_grad(lib, t):
    t.requires_grad_()
    with lib.no_grad():
        t[1:].add_(t[:-1], alpha=0.5)


def _run(lib, case):
    t = lib.arange(10.0)
    try:
        CASES[case](lib, t)
    except RuntimeError as error:
        return ("error", str(error).split(".")[0])
    return ("ok", t.detach().tolist())


@pytest.mark.parametrize("case", sorted(CASES))
def test_partial_overlap_matches_torch(case):
    expected = _run(torch, case)
    assert _run(gradviz, case) == expected
    if "shifted" in case:
        assert expected[0] == "error"


def test_update_through_data_slice_is_the_same_elements():
    # d2l's ``w.data[:] -= lr * w.grad``: the value is the region itself, viewed without its
    # leading size-1 dimension
    results = []
    for lib in (gradviz, torch):
        w = lib.nn.Parameter(lib.ones((1, 2)) * 0.5)
        (w * w).sum().backward()
        w.data[:] -= 0.25 * w.grad
        w.data[0, :] *= 2
        results.append(w.detach().tolist())
    assert results[0] == results[1]

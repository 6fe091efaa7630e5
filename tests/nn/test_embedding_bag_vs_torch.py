"""``F.embedding_bag`` and ``nn.EmbeddingBag`` against torch 2.13: sum/mean/max bags from 2-D
inputs and from offsets (include_last_offset, empty bags), per_sample_weights, padding_idx
(including bags of padding only), int32 indices; values, gradients of the weight and of the
per-sample weights, second derivatives, reprs and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close, same_error

import gradviz

WEIGHT = np.random.default_rng(0).standard_normal((10, 4))


def compare(inputs, dtype="float64", second=False, **kwargs):
    """``embedding_bag`` of the same weight (and per_sample_weights) in both libraries: the
    output and the gradients of ``sum(out * probe)``."""
    results = {}
    for lib in (gradviz, torch):
        weight = lib.tensor(WEIGHT, dtype=getattr(lib, dtype), requires_grad=True)
        args = {k: (lib.tensor(v) if isinstance(v, np.ndarray) else v)
                for k, v in kwargs.items()}
        leaves = [weight]
        if "per_sample_weights" in args:
            args["per_sample_weights"] = args["per_sample_weights"].to(weight.dtype)
            args["per_sample_weights"].requires_grad_()
            leaves.append(args["per_sample_weights"])
        out = lib.nn.functional.embedding_bag(lib.tensor(inputs), weight, **args)
        probe = lib.tensor(np.random.default_rng(5).standard_normal(tuple(out.shape)),
                           dtype=out.dtype)
        grads = lib.autograd.grad((out * probe).sum(), leaves, create_graph=second)
        entry = [[out], grads]
        if second:
            entry.append(lib.autograd.grad(sum((g * g).sum() for g in grads), leaves,
                                           allow_unused=True))
        results[lib] = entry
    for part, (ours, theirs) in enumerate(zip(results[gradviz], results[torch])):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if b is not None:
                b = torch.from_numpy(b.detach().numpy().copy())
            close(a, b, f"{['output', 'gradient', 'second-order gradient'][part]} {i}")


BAGS_2D = np.array([[1, 2, 4], [4, 3, 2], [9, 9, 0]])
FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
CASES = [
    (BAGS_2D, {}),
    (FLAT, dict(offsets=np.array([0, 3, 4]))),
    (FLAT, dict(offsets=np.array([0, 0, 3, 3, 9]))),  # empty bags, one at the end
    (FLAT, dict(offsets=np.array([0, 2, 9]), include_last_offset=True)),
    (BAGS_2D, dict(padding_idx=2)),
    (BAGS_2D, dict(padding_idx=-1)),  # row 9: the last bag is padding but 0
    (np.array([[2, 2], [1, 2]]), dict(padding_idx=2)),  # a bag of padding only
    (FLAT.astype(np.int32), dict(offsets=np.array([0, 5], dtype=np.int32))),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_embedding_bag(case, mode):
    inputs, kwargs = CASES[case]
    compare(inputs, mode=mode, **kwargs)
    compare(inputs, dtype="float32", mode=mode, **kwargs)


SAVED = ["indices", "offsets", "mode", "padding_idx", "result1", "result2", "result3",
         "scale_grad_by_freq", "sparse", "weight_sym_argsize_0"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_embedding_bag_saved_values(case, mode, dtype):
    # grad_fn._saved_*: torch's CPU kernel's offset2bag / bag_size / max_indices included (a
    # float32 sum without padding takes its fast path: offset2bag is empty)
    inputs, kwargs = CASES[case]
    seen = {}
    for lib in (gradviz, torch):
        weight = lib.tensor(WEIGHT, dtype=getattr(lib, dtype), requires_grad=True)
        args = {k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        node = lib.nn.functional.embedding_bag(lib.tensor(inputs), weight, mode=mode,
                                               **args).grad_fn
        values = [getattr(node, "_saved_" + name) for name in SAVED]
        seen[lib] = [(v.tolist(), str(v.dtype).split(".")[-1]) if hasattr(v, "tolist") else v
                     for v in values]
        assert node._saved_weight is None and node._saved_per_sample_weights is None
        if "offsets" in args:
            assert node._saved_offsets is args["offsets"]
    assert dict(zip(SAVED, seen[gradviz])) == dict(zip(SAVED, seen[torch]))


def test_embedding_bag_saved_weights():
    for lib in (gradviz, torch):
        weight = lib.tensor(WEIGHT, requires_grad=True)
        psw = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        node = lib.nn.functional.embedding_bag(lib.tensor([1, 2, 3]), weight, lib.tensor([0, 1]),
                                               mode="sum", per_sample_weights=psw).grad_fn
        assert node._saved_weight is weight and node._saved_per_sample_weights is psw
        node = lib.nn.functional.embedding_bag(lib.tensor([1, 2, 3]), weight, lib.tensor([0, 1]),
                                               mode="sum", per_sample_weights=psw.detach())
        assert node.grad_fn._saved_weight is None


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_without_bags(mode):
    # torch 2.13 answers (0, dim) for a float32 sum or mean without grad, but crashes
    # (segmentation fault) in max mode, in float64 or when differentiated: gradviz answers
    # torch's float32 sum for every mode, and its gradient is the weight's zeros
    want = torch.nn.functional.embedding_bag(torch.tensor(FLAT), torch.tensor(WEIGHT).float(),
                                             torch.tensor([0]), mode="sum",
                                             include_last_offset=True)
    weight = gradviz.tensor(WEIGHT, requires_grad=True)
    got = gradviz.nn.functional.embedding_bag(gradviz.tensor(FLAT), weight, gradviz.tensor([0]),
                                              mode=mode, include_last_offset=True)
    close(got.float(), want, "no bags")
    got.sum().backward()
    assert weight.grad is not None and not weight.grad.numpy().any()


def test_embedding_bag_ties_in_max_send_the_gradient_to_the_first():
    compare(np.array([[3, 3, 1]]), mode="max")


@pytest.mark.parametrize("case", [0, 1, 2, 5])
def test_per_sample_weights(case):
    inputs, kwargs = CASES[case]
    weights = np.random.default_rng(2).uniform(0.5, 2.0, inputs.shape)
    compare(inputs, mode="sum", per_sample_weights=weights, **kwargs)


def test_per_sample_weights_second_order_is_a_known_difference():
    """torch 2.13 has no derivative for its per-sample-weights backward ("derivative for
    aten::_embedding_bag_per_sample_weights_backward is not implemented"); gradviz's
    composite differentiates it: d/dw of sum(grad_w^2), grad_w = rows @ probe per member,
    is zero, and d/dweight is checked against finite differences."""
    inputs = BAGS_2D
    weights = np.random.default_rng(2).uniform(0.5, 2.0, inputs.shape)
    probe = np.random.default_rng(5).standard_normal((3, 4))
    w = torch.tensor(WEIGHT, requires_grad=True)
    psw = torch.tensor(weights, requires_grad=True)
    out = torch.nn.functional.embedding_bag(torch.tensor(inputs), w, mode="sum",
                                            per_sample_weights=psw)
    grad_w, grad_psw = torch.autograd.grad((out * torch.tensor(probe)).sum(), (w, psw),
                                           create_graph=True)
    with pytest.raises(RuntimeError, match="_embedding_bag_per_sample_weights_backward"):
        torch.autograd.grad((grad_psw * grad_psw).sum(), (w, psw))

    def loss(table, per_sample):
        out = gradviz.nn.functional.embedding_bag(gradviz.tensor(inputs), table, mode="sum",
                                                  per_sample_weights=per_sample)
        gw, gp = gradviz.autograd.grad((out * gradviz.tensor(probe)).sum(), (table, per_sample),
                                       create_graph=True)
        return (gp * gp).sum()

    table = gradviz.tensor(WEIGHT, requires_grad=True)
    per_sample = gradviz.tensor(weights, requires_grad=True)
    assert gradviz.autograd.gradcheck(loss, (table, per_sample))


def test_embedding_bag_module_and_reprs():
    for make in (lambda nn: nn.EmbeddingBag(10, 3),
                 lambda nn: nn.EmbeddingBag(10, 3, mode="max", padding_idx=2, max_norm=1.0,
                                            include_last_offset=True),
                 lambda nn: nn.EmbeddingBag(10, 3, mode="sum", scale_grad_by_freq=True),
                 lambda nn: nn.EmbeddingBag(10, 3, norm_type=1.0, padding_idx=-2)):
        assert repr(make(gradviz.nn)) == repr(make(torch.nn))
    for lib in (gradviz, torch):
        bag = lib.nn.EmbeddingBag(10, 3, padding_idx=2)
        assert not bag.weight[2].detach().numpy().any()
        pretrained = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(WEIGHT), mode="sum")
        assert not pretrained.weight.requires_grad
        assert repr(pretrained) == "EmbeddingBag(10, 4, mode='sum')"
        out = pretrained(lib.tensor(FLAT), lib.tensor([0, 4]))
        if lib is gradviz:
            ours = out
        else:
            close(ours, out, "from_pretrained bags")


def both(fn):
    return (lambda: fn(gradviz)), (lambda: fn(torch))


def weight(lib):
    return lib.tensor(WEIGHT, dtype=lib.float32)  # torch's messages differ between dtypes


ERRORS = [
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 2]]), weight(lib),
                                                 lib.tensor([0])),
     "if input is 2D, then offsets has to be None"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([1, 2]), weight(lib)),
     "offsets has to be a 1D Tensor but got None"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 2]]), weight(lib),
                                                 per_sample_weights=lib.ones(1, 2)),
     "per_sample_weights is only supported for mode='sum' (got mode='mean')"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 2]]), weight(lib), mode="sum",
                                                 per_sample_weights=lib.ones(2)),
     "then it must have the same shape as the input"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([1, 2, 3]), weight(lib),
                                                 lib.tensor([1, 2])),
     "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
     "position 0. However, got 1"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([1, 2, 3]), weight(lib),
                                                 lib.tensor([0, 5])),
     "offsets[-1] can not be greater than input's length 3 but got offsets[-1] of 5"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 12]]), weight(lib)),
     "Index 1 of input takes value 12 which is not in the valid range [0, 10)"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, -1]]), weight(lib)),
     "Index 1 of input takes value -1 which is not in the valid range [0, 10)"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1.0, 2.0]]), weight(lib)),
     "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
     "Long, Int"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 2]]), weight(lib), mode="foo"),
     "mode has to be one of sum, mean or max"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[[1, 2]]]), weight(lib)),
     "input has to be 1D or 2D Tensor, but got Tensor of dimension 3"),
    (lambda lib: lib.nn.functional.embedding_bag(lib.tensor([[1, 2]]), weight(lib),
                                                 padding_idx=10),
     "padding_idx must be within the number of embeddings, -10 through 9, but got 10"),
    (lambda lib: lib.nn.EmbeddingBag(10, 3, padding_idx=12),
     "padding_idx must be within num_embeddings"),
    (lambda lib: lib.nn.EmbeddingBag.from_pretrained(lib.ones(3)),
     "Embeddings parameter is expected to be 2-dimensional"),
]


@pytest.mark.parametrize("fn,phrase", ERRORS, ids=lambda v: v if isinstance(v, str) else "")
def test_errors(fn, phrase):
    same_error(*both(fn), phrase)


def test_decreasing_offsets_are_a_runtime_error():
    # torch fails an internal check ("Expected i < index_size"); gradviz says what is wrong
    for lib in (gradviz, torch):
        with pytest.raises(RuntimeError):
            lib.nn.functional.embedding_bag(lib.tensor([1, 2, 3]), weight(lib),
                                            lib.tensor([0, 2, 1]))

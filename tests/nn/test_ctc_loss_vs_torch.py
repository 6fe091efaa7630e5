"""``nn.functional.ctc_loss`` / ``nn.CTCLoss`` against torch: losses and gradients for every
reduction, ``zero_infinity``, padded and concatenated targets, a non-zero blank, labels equal
to the blank, empty targets, unbatched input; the node chain, the saved names, the missing
second derivative and torch's errors (Note [CTC forward-backward] in
``gradviz/ops/_ctc.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(11)
LOGITS = RNG.standard_normal((7, 3, 5))

CASES = {
    "padded": ([[1, 2, 2], [3, 1, 0], [4, 0, 0]], [7, 6, 5], [3, 2, 1], {}),
    "concatenated": ([1, 2, 2, 3, 1, 4], [7, 6, 5], [3, 2, 1], {}),
    "blank 2": ([[1, 3, 3], [4, 1, 0], [0, 0, 0]], [7, 7, 4], [3, 2, 2], {"blank": 2}),
    "label equal to blank": ([[0, 2, 2], [3, 0, 0], [1, 1, 1]], [7, 6, 7], [3, 2, 3], {}),
    "empty target": ([[1, 2], [0, 0], [3, 3]], [7, 3, 6], [2, 0, 2], {}),
    "impossible": ([[1, 1, 1], [3, 1, 0], [2, 2, 0]], [3, 6, 2], [3, 2, 2], {}),
    "impossible zero_infinity": ([[1, 1, 1], [3, 1, 0], [2, 2, 0]], [3, 6, 2], [3, 2, 2], {"zero_infinity": True}),
    "tensor lengths": ([[1, 2, 2], [3, 1, 0], [4, 0, 0]], "tensor 7 6 5", "tensor 3 2 1", {}),
}


def _lengths(lib, lengths):
    if isinstance(lengths, str):
        return lib.tensor([int(n) for n in lengths.split()[1:]])
    return lengths


def _run(lib, name, reduction, dtype="float64"):
    targets, input_lengths, target_lengths, options = CASES[name]
    logits = lib.tensor(LOGITS, dtype=getattr(lib, dtype), requires_grad=True)
    log_probs = logits.log_softmax(2)
    loss = lib.nn.functional.ctc_loss(log_probs, lib.tensor(targets), _lengths(lib, input_lengths),
                                      _lengths(lib, target_lengths), reduction=reduction, **options)
    weights = lib.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)), dtype=loss.dtype)
    direct, = lib.autograd.grad((loss * weights).sum(), log_probs, retain_graph=True)
    through_softmax, = lib.autograd.grad((loss * weights).sum(), logits)
    chain, node = [], loss.grad_fn
    while node is not None:
        chain.append(node.name().removeprefix("torch::autograd::"))
        node = next((n for n, _ in node.next_functions if n is not None), None)
    return loss.detach().numpy(), direct.numpy(), through_softmax.numpy(), chain


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_and_gradients_match_torch(name, reduction):
    ours, theirs = _run(gradviz, name, reduction), _run(torch, name, reduction)
    for mine, reference in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(mine, reference, rtol=1e-10, atol=1e-12)
    assert ours[3] == theirs[3]


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_float32_matches_torch(reduction):
    ours, theirs = _run(gradviz, "padded", reduction, "float32"), _run(torch, "padded", reduction, "float32")
    assert ours[0].dtype == theirs[0].dtype == np.float32
    for mine, reference in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(mine, reference, rtol=2e-5, atol=2e-6)


def test_unbatched_input_matches_torch():
    def run(lib):
        log_probs = lib.tensor(LOGITS[:, 0], requires_grad=True)
        loss = lib.nn.functional.ctc_loss(log_probs.log_softmax(1), lib.tensor([1, 2, 2]), lib.tensor(7),
                                          lib.tensor(3), reduction="none")
        loss.backward()
        return tuple(loss.shape), float(loss), log_probs.grad.numpy()

    ours, theirs = run(gradviz), run(torch)
    assert ours[:1] == theirs[:1]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-10)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-10, atol=1e-12)


def test_module_matches_torch():
    def run(lib):
        criterion = lib.nn.CTCLoss(blank=2, reduction="sum", zero_infinity=True)
        log_probs = lib.tensor(LOGITS, requires_grad=True)
        loss = criterion(log_probs.log_softmax(2), lib.tensor([[1, 3, 3], [4, 1, 0], [0, 0, 0]]), [7, 7, 4],
                         [3, 2, 2])
        loss.backward()
        return repr(criterion), criterion.reduction, float(loss), log_probs.grad.numpy()

    ours, theirs = run(gradviz), run(torch)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-10)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-10, atol=1e-12)


def test_node_saves_torchs_names_and_has_no_second_derivative():
    for lib in (gradviz, torch):
        log_probs = lib.tensor(LOGITS, requires_grad=True).log_softmax(2)
        loss = lib.nn.functional.ctc_loss(log_probs, lib.tensor([[1, 2], [3, 1], [4, 0]]), [7, 6, 5], [2, 2, 1],
                                          reduction="none", blank=0)
        node = loss.grad_fn
        assert node.name().endswith("CtcLossBackward0")
        assert (node._saved_blank, list(node._saved_input_lengths), list(node._saved_target_lengths),
                node._saved_zero_infinity) == (0, [7, 6, 5], [2, 2, 1], False)
        assert node._saved_log_probs.shape == log_probs.shape
        (grad,) = lib.autograd.grad(loss.sum(), log_probs, create_graph=True)
        with pytest.raises(RuntimeError, match="derivative for aten::_ctc_loss_backward is not implemented"):
            lib.autograd.grad(grad.sum(), log_probs)


@pytest.mark.parametrize("bad,error,phrase", [
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [6, 5], [3, 2], blank=4), RuntimeError,
     "blank must be in label range"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [6], [3, 2]), RuntimeError,
     "input_lengths must be of size batch_size"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [6, 5], [3]), RuntimeError,
     "target_lengths must be of size batch_size"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [7, 5], [3, 2]), RuntimeError,
     "Expected input_lengths to have value at most 6, but got value 7"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [-1, 5], [3, 2]), RuntimeError,
     "Expected input_lengths to have value at least 0, but got value -1"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [6, 5], [4, 2]), RuntimeError,
     "Expected tensor to have size at least 4 at dimension 1, but got size 3 for argument #2 'targets'"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, lib.tensor([1, 2, 2, 3, 1]), [6, 5], [3, 3]), RuntimeError,
     "Expected tensor to have size 6 at dimension 0, but got size 5 for argument #2 'targets'"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, lib.tensor([6.0, 5.0]), lib.tensor([3, 2])),
     RuntimeError, "input_lengths must be integral"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, lib.tensor([6, 5]), lib.tensor([3.0, 2.0])),
     RuntimeError, "target_lengths must be integral"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, lib.tensor([6, 5]), [3, 2]), TypeError,
     "ctc_loss\\(\\) received an invalid combination of arguments"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp.long(), t, [6, 5], [3, 2]), NotImplementedError,
     "\"ctc_loss_cpu\" not implemented for 'Long'"),
    (lambda lib, lp, t: lib.nn.functional.ctc_loss(lp, t, [6, 5], [3, 2], reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
])
def test_bad_calls_raise_torchs_errors(bad, error, phrase):
    for lib in (gradviz, torch):
        log_probs = lib.tensor(LOGITS[:6, :2, :4]).log_softmax(2)
        with pytest.raises(error, match=phrase):
            bad(lib, log_probs, lib.tensor([[1, 2, 2], [3, 1, 0]]))

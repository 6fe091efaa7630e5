"""The connectionist temporal classification loss: PyTorch's ``_ctc_loss`` op
(``CtcLossBackward0``) behind ``nn.functional.ctc_loss`` and ``nn.CTCLoss``.

Note [CTC forward-backward]
---------------------------
For each sample the target ``l`` is extended with blanks, ``l' = (blank, l1, blank, l2, ...,
blank)``; ``alpha[t, s]`` is the log-probability of all paths through ``l'[:s + 1]`` in the first
``t + 1`` frames, ``beta[t, s]`` that of the paths from ``l'[s]`` at frame ``t`` to the end. A
path may stay on ``s``, step to ``s + 1``, or skip a blank to ``s + 2`` when ``s + 2`` is odd
and ``l'[s + 2] != l'[s]`` (PyTorch's condition, on positions, so a target label equal to the
blank is treated as a label). The loss is ``-log(alpha[T-1, L-1] + alpha[T-1, L-2])``.

The recursions run over time with all samples and positions at once (numpy, float64). The
gradient is PyTorch's: ``exp(lp[t, c]) - exp(log(sum over s with l'[s] = c of alpha * beta) +
loss - lp[t, c])`` for ``t`` below the sample's input length, else zero (zero for a whole sample
whose loss is infinite when ``zero_infinity``). It is the loss's gradient through a
``log_softmax`` that PyTorch assumes produced ``lp``, and, as in PyTorch, it has no derivative
itself (``derivative for aten::_ctc_loss_backward is not implemented``).
"""

from __future__ import annotations

import numpy as np

from ._registry import Op, apply
from ._saved import RESULT, Attr, Computed, Input, NotKept

__all__: list[str] = []

_NEGATIVE_INFINITY = -np.inf


def _extended(targets, target_lengths, blank):
    """The blank-extended targets (N, 2 * S + 1), padded with blanks, and their lengths."""
    longest = max((int(n) for n in target_lengths), default=0)
    extended = np.full((len(targets), 2 * longest + 1), blank, dtype=np.int64)
    for sample, labels in enumerate(targets):
        extended[sample, 1:2 * len(labels):2] = labels
    return extended, 2 * np.asarray(target_lengths, dtype=np.int64) + 1


def _can_skip(extended):
    """``skip[n, s]``: a path may come to ``s`` from ``s - 2`` (Note [CTC forward-backward])."""
    skip = np.zeros(extended.shape, dtype=bool)
    skip[:, 3::2] = extended[:, 3::2] != extended[:, 1:-2:2]
    return skip


def _shifted(values, by):
    """``values`` moved ``by`` positions along the last axis (``-inf`` coming in)."""
    out = np.full_like(values, _NEGATIVE_INFINITY)
    if by > 0:
        out[:, by:] = values[:, :-by]
    else:
        out[:, :by] = values[:, -by:]
    return out


def _alpha_beta(log_probs, extended, lengths, input_lengths):
    """``alpha`` and ``beta`` (T, N, L) in log space, ``-inf`` outside each sample's path."""
    frames, samples = log_probs.shape[:2]
    width = extended.shape[1]
    emitted = np.take_along_axis(log_probs, np.broadcast_to(extended, (frames, samples, width)), axis=2)
    inside = np.arange(width)[None, :] < lengths[:, None]
    emitted = np.where(inside[None], emitted, _NEGATIVE_INFINITY)
    skip = _can_skip(extended)
    with np.errstate(invalid="ignore"):
        alpha = np.full((frames, samples, width), _NEGATIVE_INFINITY)
        alpha[0, :, :2] = emitted[0, :, :2]
        for t in range(1, frames):
            previous = alpha[t - 1]
            reach = np.logaddexp(previous, _shifted(previous, 1))
            reach = np.where(skip, np.logaddexp(reach, _shifted(previous, 2)), reach)
            alpha[t] = reach + emitted[t]
        beta = np.full((frames, samples, width), _NEGATIVE_INFINITY)
        last = np.asarray(input_lengths, dtype=np.int64) - 1
        ends = (np.arange(width)[None, :] >= lengths[:, None] - 2) & inside
        skip_next = _shifted(skip.astype(np.float64), -2) > 0  # s + 2 may be reached from s
        for t in range(frames - 1, -1, -1):
            start = np.where(ends, emitted[t], _NEGATIVE_INFINITY)
            if t + 1 < frames:
                following = beta[t + 1]
                reach = np.logaddexp(following, _shifted(following, -1))
                reach = np.where(skip_next, np.logaddexp(reach, _shifted(following, -2)), reach)
                carried = reach + emitted[t]
            else:
                carried = np.full((samples, width), _NEGATIVE_INFINITY)
            beta[t] = np.where((t == last)[:, None], start,
                               np.where((t < last)[:, None], carried, _NEGATIVE_INFINITY))
    return alpha, beta


def _negative_log_likelihood(alpha, lengths, input_lengths):
    samples = alpha.shape[1]
    final = alpha[np.maximum(np.asarray(input_lengths, dtype=np.int64) - 1, 0), np.arange(samples)]
    last = np.take_along_axis(final, (lengths - 1)[:, None], axis=1)[:, 0]
    before = np.take_along_axis(final, np.maximum(lengths - 2, 0)[:, None], axis=1)[:, 0]
    total = np.where(lengths > 1, np.logaddexp(last, before), last)
    return np.where(np.asarray(input_lengths) > 0, -total, np.where(lengths == 1, 0.0, np.inf))


def _ctc_forward(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity, **_):
    data = log_probs.astype(np.float64)
    extended, lengths = _extended(targets, target_lengths, blank)
    alpha, _ = _alpha_beta(data, extended, lengths, input_lengths)
    return _negative_log_likelihood(alpha, lengths, input_lengths).astype(log_probs.dtype)


def _ctc_gradient(grad, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity,
                  **_):
    """PyTorch's ``_ctc_loss_backward`` (Note [CTC forward-backward]): ``grad`` is (N,)."""
    data = log_probs.astype(np.float64)
    frames, samples, classes = data.shape
    extended, lengths = _extended(targets, target_lengths, blank)
    alpha, beta = _alpha_beta(data, extended, lengths, input_lengths)
    loss = _negative_log_likelihood(alpha, lengths, input_lengths)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        products = alpha + beta                                      # (T, N, L)
        peak = np.max(products, axis=2, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0.0)
        per_class = np.zeros((frames, samples, classes))
        frame_index = np.arange(frames)[:, None, None]
        sample_index = np.arange(samples)[None, :, None]
        np.add.at(per_class, (frame_index, sample_index, np.broadcast_to(extended, products.shape)),
                  np.exp(products - peak))
        log_class = np.log(per_class) + peak
        # PyTorch assigns (not adds) the last frame's two terms, the blank's first: a last
        # label equal to the blank keeps only its own term
        last = np.asarray(input_lengths, dtype=np.int64) - 1
        rows = np.flatnonzero(last >= 0)
        frame, ends = last[rows], lengths[rows] - 1
        log_class[frame, rows] = _NEGATIVE_INFINITY
        log_class[frame, rows, blank] = products[frame, rows, ends]
        labelled = rows[ends > 0]
        frame, before = last[labelled], lengths[labelled] - 2
        log_class[frame, labelled, extended[labelled, before]] = products[frame, labelled, before]
        result = np.exp(data) - np.exp(log_class + loss[None, :, None] - data)
    result = result * np.asarray(grad, dtype=np.float64).reshape(1, samples, 1)
    active = np.arange(frames)[:, None] < np.asarray(input_lengths)[None, :]
    result = np.where(active[:, :, None], result, 0.0)
    if zero_infinity:
        result = np.where(np.isinf(loss)[None, :, None], 0.0, result)
    return result.astype(log_probs.dtype)


def _not_implemented(ctx, g):
    raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")


# the gradient, an op of its own so that differentiating it raises PyTorch's error
CTC_LOSS_BACKWARD = Op("ctc_loss_backward", "NotImplemented",
                       forward=lambda grad, log_probs, **attrs: _ctc_gradient(grad, log_probs, **attrs),
                       backward=_not_implemented, dtype=lambda grad, log_probs, **_: log_probs.dtype)


def _ctc_backward(ctx, g):
    attrs = {key: ctx.attrs[key] for key in ("targets", "input_lengths", "target_lengths", "blank",
                                              "zero_infinity")}
    return (apply(CTC_LOSS_BACKWARD, g, ctx.input(0), **attrs),)


CTC_LOSS = Op("ctc_loss", "CtcLossBackward0", forward=_ctc_forward, backward=_ctc_backward,
              saves=lambda needs: ((0,), True),
              saved={"blank": Attr("blank"), "input_lengths": Attr("input_lengths", tuple),
                     "target_lengths": Attr("target_lengths", tuple), "log_probs": Input(0),
                     "targets": Computed(lambda node: node.attrs["targets_tensor"]),
                     "zero_infinity": Attr("zero_infinity"), "result0": RESULT,
                     "result1": NotKept("gradviz computes the forward variables (alpha) again "
                                        "in the backward instead of keeping them")})


def ctc_loss(log_probs, targets, targets_tensor, input_lengths, target_lengths, blank,
             zero_infinity):
    """The per-sample CTC losses (N,) of (T, N, C) ``log_probs``; ``targets`` is a list of
    integer arrays (one per sample), ``targets_tensor`` the tensor they came from (kept as the
    node's ``_saved_targets``); the lengths are tuples of ints. Checked by the caller."""
    return apply(CTC_LOSS, log_probs, targets=targets, targets_tensor=targets_tensor,
                 input_lengths=tuple(input_lengths), target_lengths=tuple(target_lengths),
                 blank=int(blank), zero_infinity=bool(zero_infinity))

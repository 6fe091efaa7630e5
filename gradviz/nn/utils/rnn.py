"""``torch.nn.utils.rnn``: batches of sequences of different lengths, padded
(``pad_sequence``) or packed (``PackedSequence``, ``pack_padded_sequence``, ``pack_sequence``,
``pad_packed_sequence``) for the recurrent layers.

A ``PackedSequence`` holds the time steps one after the other, each with only the sequences
still running at that step (``batch_sizes[t]`` of them, longest first), as torch's does.

Examples
--------
>>> import gradviz as torch
>>> from gradviz.nn.utils.rnn import pad_sequence
>>> pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
tensor([[1, 2, 3],
        [4, 0, 0]])
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import dtypes as _dtypes
from ... import ops as _ops
from ..._tensor import Tensor, _wrap
from ...ops._saved import Attr, Computed, wrapped_array

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "pad_sequence", "unpad_sequence"]


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Sequences packed step by step: ``data`` (sum of lengths, *), ``batch_sizes`` (one count
    per time step, int64), and the permutation that sorted the batch by length
    (``sorted_indices``) with its inverse (``unsorted_indices``), or None when it was sorted."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes,
                                                          self.sorted_indices,
                                                          self.unsorted_indices)

    def cpu(self):
        return self

    def double(self):
        return self.to(dtype=_dtypes.float64)

    def float(self):
        return self.to(dtype=_dtypes.float32)

    def half(self):
        return self.to(dtype=_dtypes.float16)


def _invert_permutation(permutation):
    inverse = np.empty_like(permutation.numpy())
    inverse[permutation.numpy()] = np.arange(len(inverse))
    return _ops.tensor(inverse, dtype=_dtypes.int64)


def pack_padded_sequence(input, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with ``batch_first``) whose sequence ``b``
    has ``lengths[b]`` steps. With ``enforce_sorted`` the lengths must be decreasing; else the
    batch is sorted here and the permutation kept in the result."""
    if isinstance(lengths, Tensor):
        lengths = lengths.to(dtype=_dtypes.int64)
    else:
        lengths = _ops.as_tensor(lengths, dtype=_dtypes.int64)
    if enforce_sorted:
        sorted_indices = None
    else:
        order = np.argsort(-lengths.numpy(), kind="stable")
        sorted_indices = _ops.tensor(order, dtype=_dtypes.int64)
        lengths = _ops.tensor(lengths.numpy()[order], dtype=_dtypes.int64)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    values = [int(n) for n in lengths.numpy().reshape(-1)]
    if len(values) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(values)} (batch_size={batch})")
    if any(n <= 0 for n in values):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(values, values[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
            "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
            "sidestep this requirement if you do not need ONNX exportability.")
    if values[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: the longest length, {values[0]}, is more than "
                           f"the {steps} steps of the input")
    batch_sizes = [sum(1 for n in values if n > t) for t in range(values[0])]
    # the packed rows of the (T * B, *) steps-first input: step t's first batch_sizes[t]
    rows = np.concatenate([t * batch + np.arange(b) for t, b in enumerate(batch_sizes)])
    data = _ops.apply(PACK_PADDED_SEQUENCE, input, rows=rows, batch_first=batch_first,
                      input_shape=tuple(input.shape),
                      batch_sizes=np.asarray(batch_sizes, dtype=np.int64))
    return PackedSequence(data, _ops.tensor(batch_sizes, dtype=_dtypes.int64), sorted_indices,
                          None)


def _steps_first(x, batch_first):
    return x.swapaxes(0, 1) if batch_first else x


def _pack_backward(ctx, g):
    """The packed rows' gradients put back in place (zeros at the padding), in the input's
    layout; written with ``index_add`` and ``reshape`` (differentiable)."""
    shape = ctx.input_shape
    steps_first = (shape[1], shape[0]) + shape[2:] if ctx.batch_first else shape
    rest = tuple(shape[2:])
    flat = _ops.zeros((shape[0] * shape[1],) + rest, dtype=g.dtype)
    grad = _ops.index_add(flat, 0, _wrap(ctx.rows), g).reshape(steps_first)
    return (grad.transpose(0, 1) if ctx.batch_first else grad,)


# one op, one PackPaddedSequenceBackward0 node, as torch (which transposes a batch_first input
# inside it)
PACK_PADDED_SEQUENCE = _ops.Op(
    "pack_padded_sequence", "PackPaddedSequenceBackward0",
    forward=lambda x, rows, batch_first, **_: np.ascontiguousarray(
        _steps_first(x, batch_first).reshape((-1,) + x.shape[2:])[rows]),
    backward=_pack_backward,
    saved={
        "batch_first": Attr("batch_first"),
        "input_sym_sizes": Attr("input_shape", tuple),
        "result1": Computed(lambda node: wrapped_array(node.attrs["batch_sizes"])),
    })


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length=None):
    """The inverse of :func:`pack_padded_sequence`: ``(padded, lengths)`` in the batch's
    original order, padded with ``padding_value`` to the longest length (or ``total_length``)."""
    batch_sizes = [int(b) for b in sequence.batch_sizes.numpy()]
    max_seq_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{max_seq_length}")
        max_seq_length = total_length
    data = sequence.data
    batch = batch_sizes[0]
    steps, offset = [], 0
    for b in batch_sizes:
        step = data[offset:offset + b]
        offset += b
        if b < batch:
            filler = _ops.full((batch - b, *data.shape[1:]), padding_value, dtype=data.dtype)
            step = _ops.cat([step, filler], 0)
        steps.append(step)
    if max_seq_length > len(batch_sizes):
        steps += [_ops.full((batch, *data.shape[1:]), padding_value, dtype=data.dtype)] * (
            max_seq_length - len(batch_sizes))
    padded = _ops.stack(steps, 0)
    lengths = _ops.tensor([sum(1 for b in batch_sizes if b > i) for i in range(batch)],
                          dtype=_dtypes.int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (longest first, unless ``enforce_sorted=False``)."""
    lengths = _ops.as_tensor([v.size(0) for v in sequences], dtype=_dtypes.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of (L_i, *) tensors of a :class:`PackedSequence`."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False):
    """The list of (L_i, *) tensors of a padded batch."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(length)] for seq, length in zip(padded_sequences, lengths)]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """Stack (L_i, *) tensors into (L, B, *) (or (B, L, *) with ``batch_first``), padding each
    to the longest with ``padding_value`` (after it, or before with ``padding_side="left"``)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([0, missing] if padding_side == "right" else [missing, 0])
        padded.append(_ops.pad(s, widths, value=padding_value) if missing else s)
    return _ops.stack(padded, 0 if batch_first else 1)

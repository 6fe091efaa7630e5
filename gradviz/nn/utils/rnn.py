"""``torch.nn.utils.rnn.pad_sequence``: a batch from sequences of different lengths.

Examples
--------
>>> import gradviz as torch
>>> from gradviz.nn.utils.rnn import pad_sequence
>>> pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
tensor([[1, 2, 3],
        [4, 0, 0]])
"""

from __future__ import annotations

from ... import ops as _ops

__all__ = ["pad_sequence"]


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

"""``channel_shuffle`` (ShuffleNet's interleaving of channel groups, ``nn.ChannelShuffle``) and
``pdist`` (the distances between every pair of rows), as torch's, composed from gradviz ops so
their gradients are torch's."""

from __future__ import annotations

import numpy as np

from .. import ops as _ops
from ._module import Module

__all__ = ["channel_shuffle", "pdist", "ChannelShuffle"]


def channel_shuffle(input, groups: int):
    """Split the C channels of an ``(N, C, *)`` input into ``groups`` groups and interleave them:
    ``(N, g, C/g, *) -> (N, C/g, g, *)``. Mirrors ``torch.nn.functional.channel_shuffle``."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    channels = input.shape[1]
    if channels % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} channels and "
                           f"{groups} groups.")
    batch, rest = input.shape[0], tuple(input.shape[2:])
    grouped = input.reshape(batch, groups, channels // groups, *rest)
    return grouped.transpose(1, 2).reshape(batch, channels, *rest)


def pdist(input, p: float = 2):
    """The ``p``-norm distance between each pair of the N rows of an (N, M) input: the upper
    triangle of ``cdist(input, input)`` row by row, ``N (N - 1) / 2`` values. Mirrors
    ``torch.nn.functional.pdist``."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"pdist only supports floating-point dtypes, but got {input.dtype}")
    first, second = np.triu_indices(input.shape[0], k=1)
    differences = input[_ops.tensor(first)] - input[_ops.tensor(second)]
    if p == 0:  # how many coordinates differ: piecewise constant, so a zero gradient (as torch)
        return (differences != 0).sum(-1).to(input.dtype) + differences.sum(-1) * 0
    return differences.norm(p, dim=-1)


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups (see :func:`channel_shuffle`). Mirrors
    ``torch.nn.ChannelShuffle``."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

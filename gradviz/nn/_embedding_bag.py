"""``embedding_bag`` and ``EmbeddingBag``: sums, means or maxima of bags of embeddings, without
materializing the (bag, member, dim) tensor a user would build with ``Embedding``.

One op, one ``EmbeddingBagBackward0`` node as in torch (:mod:`gradviz.ops._embedding_bag`):
a ``mode="max"`` bag's gradient goes to the first maximum, as torch's kernel; an empty bag, or
one holding only ``padding_idx``, gives zeros.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from .. import ops as _ops
from ..autograd.grad_mode import no_grad
from ..ops import _embedding_bag
from ._module import Module, Parameter

__all__ = ["embedding_bag", "EmbeddingBag"]

_MODES = ("sum", "mean", "max")


def _bags(input, offsets, include_last_offset):
    """(flat indices, (start, end) per bag), with torch's checks of ``input`` and ``offsets``."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                "mini-batch of fixed length sequences. However, found offsets of type "
                f"{type(offsets)}")
        length = input.shape[1]
        return input.reshape(-1), [(b * length, (b + 1) * length) for b in range(input.shape[0])]
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    starts = [int(v) for v in offsets.numpy(force=True)]
    total = input.shape[0]
    if starts and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {starts[0]}")
    if starts and starts[-1] > total:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {total} but got "
                           f"offsets[-1] of {starts[-1]}")
    if any(b < a for a, b in zip(starts, starts[1:])):
        raise RuntimeError(f"embedding_bag: offsets must be non-decreasing (each bag starts where "
                           f"the previous one ends or after it), but got {starts}")
    ends = starts[1:] + [total]
    bags = list(zip(starts, ends))
    if include_last_offset:
        bags = bags[:-1]
    return input, bags


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False, padding_idx=None):
    """Reduce bags of rows of ``weight``: a (B, N) ``input`` holds B bags of N indices; a 1-D
    ``input`` is cut into bags at ``offsets`` (each bag's start; with ``include_last_offset``
    the last entry is the end). ``mode`` ``"sum"`` (optionally weighted by
    ``per_sample_weights``, shaped like ``input``), ``"mean"`` or ``"max"`` (per coordinate);
    members equal to ``padding_idx`` are left out. Returns (B, embedding_dim).

    Examples
    --------
    >>> import gradviz as torch
    >>> weight = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    >>> torch.nn.functional.embedding_bag(torch.tensor([0, 1, 2]), weight,
    ...                                   torch.tensor([0, 2]), mode="sum")
    tensor([[1., 2.],
            [3., 3.]])
    """
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    flat, bags = _bags(input, offsets, include_last_offset)
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse are "
                                  "not supported by gradviz")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub.")
    if input.dtype.name not in ("int64", "int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.type()} instead "
                           "(while checking arguments for embedding_bag)")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{rows} "
                               f"through {rows - 1}, but got {padding_idx}")
        padding_idx %= rows
    indices = flat.numpy(force=True).astype(np.int64)
    bad = np.flatnonzero((indices < 0) | (indices >= rows))
    if bad.size:
        raise RuntimeError(f"Index {bad[0]} of input takes value {indices[bad[0]]} which is not "
                           f"in the valid range [0, {rows})")
    keep = indices != padding_idx if padding_idx is not None else np.ones(indices.shape, bool)
    if offsets is None:  # a (B, N) input: torch's node saves the bags' starts
        offsets = ops.arange(0, indices.size, max(input.shape[1], 1))[:len(bags)]
    saved = {"indices": flat, "offsets": offsets, "padding_idx": padding_idx}
    return _embedding_bag.embedding_bag(weight, per_sample_weights, indices, bags, keep, mode,
                                        saved)


class EmbeddingBag(Module):
    """A table of ``num_embeddings`` vectors reduced per bag (see :func:`embedding_bag`);
    ``weight`` is N(0, 1) from gradviz's generator, its ``padding_idx`` row zero.

    Examples
    --------
    >>> import gradviz as torch
    >>> bag = torch.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag
    EmbeddingBag(10, 3, mode='sum')
    >>> bag(torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 2])).shape
    gradviz.Size([2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_ops.randn(num_embeddings, embedding_dim, dtype=dtype))
            if padding_idx is not None:
                with no_grad():
                    self.weight[padding_idx].fill_(0)
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None):
        """An ``EmbeddingBag`` holding ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        text += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text

"""``add_rows``: ``np.add.at(out, index, values)`` for a vector of row indices, the same sums
bit for bit and several times faster when the rows are wide (``index_add``, and through it the
embedding's backward)."""

from __future__ import annotations

import numpy as np

__all__ = ["add_rows"]

# Note [Adding rows in order]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# np.add.at(out, index, values) with a vector index and rows of many elements walks the index
# one entry at a time (about 0.5 µs per row), which made the embedding's backward a visible
# part of a small transformer's step. The result must not change: add.at adds each row to its
# target in the order of the index, ((out[i] + v1) + v2) + ..., and floating point addition is
# not associative, so a sort + np.add.reduceat (which sums a segment pairwise) or np.bincount
# (which sums in float64) gives different bits. Instead:
#
# - a stable argsort groups the entries by target, keeping each target's entries in index order;
# - each entry's rank within its group says which "round" it belongs to; a (rounds + 1, targets,
#   ...) array holds in round 0 the current out[target] and in round r the target's r-th row;
#   groups shorter than the longest are padded with -0.0, the one exact additive identity
#   (x + -0.0 == x for every x, including -0.0; +0.0 would turn -0.0 into +0.0);
# - np.add.reduce over axis 0 of that array adds round after round, each round a whole
#   (targets, ...) slab: the same sequence of additions per element as add.at, vectorised across
#   targets and columns. (numpy reduces an outer axis slab by slab; it sums pairwise only along
#   the innermost contiguous axis, which is why rows of one element keep add.at.)
#
# The padded array has (longest group + 1) * targets rows; when one index dominates that is far
# more than the entries, so the rule falls back to add.at there, and for narrow rows, where
# add.at's own fast path is quicker (bench/index_ops.py measures both).

_MIN_WIDTH = 16  # elements per row below which np.add.at is faster (bench/index_ops.py)


def add_rows(out, index, values):
    """``np.add.at(out, index, values)`` for a 1-D integer ``index`` into ``out``'s first axis
    and ``values`` of shape ``index.shape + out.shape[1:]``; ``out`` is updated in place
    (Note [Adding rows in order])."""
    values = np.asarray(values)
    if (index.ndim != 1 or out.ndim < 2 or values.shape != index.shape + out.shape[1:]
            or values.dtype != out.dtype or out.dtype.kind not in "fiu"):
        np.add.at(out, index, values)
        return
    count = index.shape[0]
    width = int(np.prod(out.shape[1:], dtype=np.int64))
    if count == 0 or width < _MIN_WIDTH:
        np.add.at(out, index, values)
        return
    index = np.where(index < 0, index + out.shape[0], index)
    order = np.argsort(index, kind="stable")
    ordered = index[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, count))
    targets = ordered[starts]
    longest = int(sizes.max())
    if (longest + 1) * targets.size > 4 * count + 64:
        np.add.at(out, index, values)
        return
    rank = np.arange(count) - np.repeat(starts, sizes)
    rounds = np.full((longest + 1, targets.size) + out.shape[1:], -0.0, dtype=out.dtype)
    rounds[0] = out[targets]
    rounds[rank + 1, np.repeat(np.arange(targets.size), sizes)] = values[order]
    out[targets] = np.add.reduce(rounds, axis=0)

"""``add_rows``: ``np.add.at(out, index, values)`` for a vector of row indices, the same sums
bit for bit and several times faster when the rows are wide (``index_add``, and through it the
embedding's backward); ``add_at``: the same for any index, through numpy's one-dimensional
fast path (Note [Flat positions])."""

from __future__ import annotations

import numpy as np

from gradviz_ext import ops as _ext_ops

__all__ = ["add_rows", "add_at"]

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
#   the innermost contiguous axis, which is why rows of one element keep add.at.) The reduction
#   starts from ``initial=-0.0``, not numpy's identity +0.0, whose ``0 + out[t]`` would turn a
#   -0.0 in ``out`` into +0.0 before the first addition: -0.0 in ``out`` plus -0.0 values is
#   -0.0 in add.at and in PyTorch (``index_add_`` into a tensor holding -0.0).
#
# The padded array has (longest group + 1) * targets rows; when one index dominates that is far
# more than the entries, so the rule falls back to add.at there, and for narrow rows, where
# add.at's own fast path is quicker (bench/index_ops.py measures both); narrow rows go
# through ``add_at`` (Note [Flat positions]).
#
# Compiled (gradviz_ext/c/add_rows.h, through ``add_rows_arrays``), the rounds' sums need no
# sort and no array: each target's row is (out[t] + v1) + v2 ..., which a C loop over the
# entries in index order computes, one IEEE addition per element. It takes
# the C-contiguous float32 and float64 cases without NaN values (of two NaNs an addition
# keeps one, and which one numpy's vectorized loops keep varies with the column) and makes the
# same dominance test; the rest stays the numpy code. The embedding's backward on the GPT's
# (512, 64) gradient into 65 rows took 160 us and takes 65-90 (torch: 50).

_MIN_WIDTH = 16  # elements per row below which the flat np.add.at is faster (bench/index_ops.py)

# Note [Flat positions]
# ~~~~~~~~~~~~~~~~~~~~~
# numpy's ufunc.at has a fast loop only for one integer index array into a one-dimensional
# array; a tuple of index arrays (scatter_add's grid, an advanced index ``x[i, j]``), or a row
# index into a 2-D array, walks numpy's general "map iterator", 3-6x slower (gather's backward
# of (64, 500) entries: 658 µs against 277; makemore's ``C[X]`` backward: 95 µs against 26).
# ``add_at`` indexes an ``arange`` of the output's flat positions with the same key, so
# ``positions`` has the shape of ``out[key]`` and lists its elements in the order add.at visits
# them, then adds through the one-dimensional loop: the same additions in the same order, bit
# for bit. The ``arange`` costs a pass over the output; when the key selects far fewer
# elements than the output holds (a few writes into a large tensor), add.at is called as is.

_SPARSE_KEY = 8  # output elements per selected element above which add.at is called as is


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
        add_at(out, index, values)
        return
    if _ext_ops.add_rows_arrays(out, index, values):  # the rounds' sums in one C loop
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
    out[targets] = np.add.reduce(rounds, axis=0, initial=-0.0)


def add_at(out, key, values):
    """``np.add.at(out, key, values)`` for any index ``key`` into a C-contiguous ``out``, the
    same additions in the same order, through numpy's one-dimensional fast loop (Note [Flat
    positions]); ``out`` is updated in place."""
    if (out.ndim <= 1 and not isinstance(key, tuple)) or not out.flags.c_contiguous:
        np.add.at(out, key, values)
        return
    selected = _selected_size(key, out.shape)
    if selected is None or out.size > _SPARSE_KEY * selected + 4096:
        np.add.at(out, key, values)
        return
    positions = np.arange(out.size, dtype=np.intp).reshape(out.shape)[key]
    values = np.broadcast_to(np.asarray(values), positions.shape)
    np.add.at(out.reshape(-1), positions.reshape(-1), values.reshape(-1))


def _selected_size(key, shape):
    """About how many elements ``out[key]`` selects (the largest index array, at most the
    broadcast size of them all, times the dims kept whole), or None for a key of another
    kind (then add.at is called as is)."""
    items = key if isinstance(key, tuple) else (key,)
    index_size, whole, taken = 1, 1, 0
    for item in items:
        if isinstance(item, np.ndarray) and item.dtype == bool:
            index_size = max(index_size, int(np.count_nonzero(item)))
            taken += item.ndim
        elif isinstance(item, np.ndarray) and item.dtype.kind in "iu":
            index_size = max(index_size, item.size)
            taken += 1
        elif isinstance(item, (int, np.integer)):
            taken += 1
        elif isinstance(item, slice) and taken < len(shape):
            whole *= len(range(*item.indices(shape[taken])))
            taken += 1
        else:
            return None
    if taken > len(shape):
        return None
    return index_size * whole * int(np.prod(shape[taken:], dtype=np.int64))

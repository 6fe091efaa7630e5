"""Hostile arguments, round two: the op families ``test_hostile_inputs_vs_torch`` does not
cover, compared with torch by the same rules (its :func:`_compare`: the same exception type
and key phrase where torch raises, the same values where it returns).

The families: indexing, scatter and gather; shapes and views; linear algebra; ``nn`` layers
given the wrong channels, rank or dtype; losses given bad targets and reductions; modules and
their state (``load_state_dict``, buffers, parameters, ``torch.save``/``torch.load``),
optimizers' state, learning-rate schedulers and ``DataLoader``; autograd misuse (``grad``,
hooks, custom ``Function``\\ s, ``.grad`` assignment). Each case is one program run on both
libraries; values are seeded, and nothing bigger than a few kilobytes is allocated.

:data:`KNOWN` lists the divergences kept on purpose, with their reasons (docs/differences.md
lists the ones users meet); the test checks that each still differs.
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from test_hostile_inputs_vs_torch import KEY_PHRASES, _compare, _outcome, _values, _x, check_case

import gradviz

# the phrases torch users search for in these families (checked as KEY_PHRASES are)
FAMILY_PHRASES = (
    "view size is not compatible with input tensor's size and stride",
    "only one dimension can be inferred",
    "must match the existing size",
    "must be greater or equal to the number of dimensions in the tensor",
    "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
    "repeated dim in permute",
    "number of dims don't match in permute",
    "start_dim cannot come after end_dim",
    "don't multiply up to the size of dim",
    "split_size can only be 0 if dimension size is 0",
    "split expects split_size be non-negative",
    "chunk expects `chunks` to be greater than 0",
    "exceeds dimension size",
    "start out of range",
    "narrow(): length must be non-negative",
    "movedim: repeated dim",
    "movedim: Invalid source or destination dims",
    "t() expects a tensor with <= 2 dimensions",
    "index out of range in self",
    "is out of bounds for dimension",
    "out of range",
    "tensors used as indices must be long, int, byte or bool tensors",
    "The shape of the mask",
    "does not match the shape of the indexed tensor",
    "Index tensor must have the same number of dimensions as",
    "an index can only have a single ellipsis",
    "too many indices for tensor of dimension",
    "shape mismatch",
    "mask must be a bool tensor",
    "expected scalar type",
    "index_add_(): Number of indices",
    "Expected dtype int64 for index",
    "shapes cannot be multiplied",
    "Expected size for first two dimensions of batch2 tensor",
    "batch1 must be a 3D tensor",
    "size mismatch",
    "1D tensors expected",
    "inconsistent tensor size",
    "outer: Expected 1-D argument",
    "einsum()",
    "must be batches of square matrices",
    "singular",
    "not positive-definite",
    "must have at least 2 dimensions",
    "Expected a floating point or complex tensor as input",
    "Given groups=1, weight of size",
    "expected input",
    "Expected 2D (unbatched) or 3D (batched) input",
    "Expected 3D (unbatched) or 4D (batched) input",
    "expected 4D input",
    "expected 2D or 3D input",
    "input.size(-1) must be equal to input_size",
    "Expected input batch_size",
    "Target",
    "is out of bounds",
    "is not a valid value for reduction",
    "all elements of input should be between 0 and 1",
    "that is different to the input size",
    "must be the same as input size",
    "The size of tensor a",
    "does not support negative values for beta",
    "does not support non-positive values for delta",
    "Expected input_lengths to have value at most",
    "Missing key(s) in state_dict",
    "Unexpected key(s) in state_dict",
    "size mismatch for",
    "Expected state_dict to be dict-like",
    "buffer name can't contain",
    "buffer name can't be empty string",
    "attribute 'training' already exists",
    "parameter name can't contain",
    "parameter name can't be empty string",
    "torch.nn.Parameter or None required",
    "module name can't contain",
    "module name can't be empty string",
    "is not a Module subclass",
    "cannot assign",
    "Only Tensors of floating point and complex dtype can require gradients",
    "loaded state dict has a different number of parameter groups",
    "loaded state dict contains a parameter group that doesn't match the size of optimizer's "
    "group",
    "is not an Optimizer",
    "batch_size should be a positive integer value",
    "num_workers option should be non-negative",
    "sampler option is mutually exclusive with shuffle",
    "stack expects each tensor to be equal size",
    "each element in list of batch should be of equal size",
    "One of the differentiated Tensors appears to not have been used in the graph",
    "Set allow_unused=True if this is the desired behavior",
    "Expected allow_unused to be True or not passed when materialize_grads=True",
    "Mismatch in shape",
    "grad requires non-empty inputs",
    "cannot be empty",
    "has changed the size of value",
    "has changed the type of value",
    "returned an incorrect number of gradients",
    "returned an invalid gradient at index",
    "assigned grad has data of a different size",
    "assigned grad has data of a different type",
    "assigned grad expected to be a Tensor or None",
    "you can only change requires_grad flags of leaf variables",
    "does not require grad and does not have a grad_fn",
)


def _f(m):
    return m.nn.functional


def _leaf(m, *shape):
    return m.tensor(_values(shape or (2, 3)), requires_grad=True)


def _i(m, *values):
    return m.tensor(list(values))


# ---- indexing, scatter and gather --------------------------------------------------------------

INDEXING = {
    "index_select 5 of 2": lambda m: _x(m).index_select(0, _i(m, 5)),
    "index_select -1": lambda m: _x(m).index_select(0, _i(m, -1)),
    "index_select of a float index": lambda m: _x(m).index_select(0, m.tensor([0.0])),
    "index_select of a 2-d index": lambda m: _x(m).index_select(0, m.tensor([[0]])),
    "index_select of an int32 index": lambda m: _x(m).index_select(0, m.tensor([1], dtype=m.int32)),
    "index_add_ 5 of 2": lambda m: _x(m).index_add_(0, _i(m, 5), m.ones(1, 3)),
    "index_add_, source of the wrong shape": lambda m: _x(m).index_add_(0, _i(m, 0), m.ones(1, 4)),
    "index_add_, source of float64": lambda m: _x(m).index_add_(
        0, _i(m, 0), m.ones(1, 3, dtype=m.float64)),
    "index_add_, more indices than rows": lambda m: _x(m).index_add_(0, _i(m, 0, 1), m.ones(1, 3)),
    "index_add, float index": lambda m: _x(m).index_add(0, m.tensor([0.0]), m.ones(1, 3)),
    "index_add, alpha 2": lambda m: _x(m).index_add(0, _i(m, 1, 1), m.ones(2, 3), alpha=2),
    "index_add, -1": lambda m: _x(m).index_add(0, _i(m, -1), m.ones(1, 3)),
    "index_copy_ 5 of 2": lambda m: _x(m).index_copy_(0, _i(m, 5), m.ones(1, 3)),
    "index_copy, source of the wrong shape": lambda m: _x(m).index_copy(
        0, _i(m, 0), m.ones(2, 3)),
    "index_copy, float index": lambda m: _x(m).index_copy(0, m.tensor([0.0]), m.ones(1, 3)),
    "index_copy, int32 index": lambda m: _x(m).index_copy(
        0, m.tensor([0], dtype=m.int32), m.ones(1, 3)),
    "index_fill, int32 index": lambda m: _x(m).index_fill(1, m.tensor([0], dtype=m.int32), 7.0),
    "index_copy, dim 2": lambda m: _x(m).index_copy(2, _i(m, 0), m.ones(1, 3)),
    "index_fill_ 5 of 3": lambda m: _x(m).index_fill_(1, _i(m, 5), 0.0),
    "index_fill, value a 1-d tensor": lambda m: _x(m).index_fill(1, _i(m, 0), m.ones(2)),
    "index_fill, -1": lambda m: _x(m).index_fill(1, _i(m, -1), 7.0),
    "index_fill, float index": lambda m: _x(m).index_fill(1, m.tensor([0.0]), 7.0),
    "scatter_ 5 of 2": lambda m: _x(m).scatter_(0, m.tensor([[5, 0, 0]]), 1.0),
    "scatter_ -1": lambda m: _x(m).scatter_(0, m.tensor([[-1, 0, 0]]), 1.0),
    "scatter_, float index": lambda m: _x(m).scatter_(0, m.tensor([[0.0, 0.0, 0.0]]), 1.0),
    "scatter, src of float64": lambda m: _x(m).scatter(
        0, m.zeros(1, 3, dtype=m.int64), m.ones(1, 3, dtype=m.float64)),
    "scatter, index larger than src": lambda m: _x(m).scatter(
        0, m.zeros(2, 3, dtype=m.int64), m.ones(1, 3)),
    "scatter, index of another rank": lambda m: _x(m).scatter(0, _i(m, 0), 1.0),
    "scatter, reduce 'avg'": lambda m: _x(m).scatter(
        0, m.zeros(1, 3, dtype=m.int64), 1.0, reduce="avg"),
    "scatter_add_ 5 of 2": lambda m: _x(m).scatter_add_(0, m.tensor([[5, 0, 0]]), m.ones(1, 3)),
    "scatter_add, float index": lambda m: _x(m).scatter_add(0, m.zeros(1, 3), m.ones(1, 3)),
    "scatter_add, src a number": lambda m: _x(m).scatter_add(
        0, m.zeros(1, 3, dtype=m.int64), 1.0),
    "scatter_reduce 'avg'": lambda m: _x(m).scatter_reduce(
        0, m.zeros(1, 3, dtype=m.int64), m.ones(1, 3), "avg"),
    "scatter_reduce 'mean'": lambda m: _x(m).scatter_reduce(
        0, m.zeros(1, 3, dtype=m.int64), m.ones(1, 3), "mean"),
    "scatter_reduce 'amax', 5 of 2": lambda m: _x(m).scatter_reduce(
        0, m.tensor([[5, 0, 0]]), m.ones(1, 3), "amax"),
    "gather 5 of 3": lambda m: _x(m).gather(1, m.tensor([[5], [0]])),
    "gather -1": lambda m: _x(m).gather(1, m.tensor([[-1], [0]])),
    "gather, index of another rank": lambda m: _x(m).gather(1, _i(m, 0)),
    "gather, index larger than the input": lambda m: _x(m).gather(1, m.zeros(3, 1, dtype=m.int64)),
    "take 6 of 6": lambda m: _x(m).take(_i(m, 6)),
    "take -1": lambda m: _x(m).take(_i(m, -1)),
    "take -7": lambda m: _x(m).take(_i(m, -7)),
    "take, float index": lambda m: _x(m).take(m.tensor([0.0])),
    "take_along_dim 5 of 3": lambda m: m.take_along_dim(_x(m), m.tensor([[5], [0]]), 1),
    "take_along_dim, float index": lambda m: m.take_along_dim(_x(m), m.tensor([[0.0]]), 1),
    "take_along_dim, index of another rank": lambda m: m.take_along_dim(_x(m), _i(m, 0), 1),
    "take_along_dim, no dim": lambda m: m.take_along_dim(_x(m), _i(m, 5, 0)),
    "take_along_dim, dim 2": lambda m: m.take_along_dim(_x(m), m.tensor([[0]]), 2),
    "masked_select, mask of the wrong shape": lambda m: _x(m).masked_select(
        m.ones(3, dtype=m.bool)),
    "masked_select, float mask": lambda m: _x(m).masked_select(m.ones(2, 3)),
    "masked_select, broadcast mask": lambda m: _x(m).masked_select(m.tensor([True, False, True])),
    "masked_scatter, source too small": lambda m: _x(m).masked_scatter(
        m.ones(2, 3, dtype=m.bool), m.zeros(2)),
    "masked_scatter, float mask": lambda m: _x(m).masked_scatter(m.ones(2, 3), m.zeros(6)),
    "masked_scatter, source of float64": lambda m: _x(m).masked_scatter(
        m.ones(2, 3, dtype=m.bool), m.zeros(6, dtype=m.float64)),
    "masked_scatter_, mask of the wrong shape": lambda m: _x(m).masked_scatter_(
        m.ones(2, 2, dtype=m.bool), m.zeros(6)),
    "put_ 6 of 6": lambda m: _x(m).put_(_i(m, 6), m.tensor([1.0])),
    "put_ -1": lambda m: _x(m).put_(_i(m, -1), m.tensor([1.0])),
    "put_, source of another size": lambda m: _x(m).put_(_i(m, 0, 1), m.tensor([1.0])),
    "put_, accumulate": lambda m: _x(m).put_(_i(m, 0, 0), m.tensor([1.0, 2.0]), accumulate=True),
    "put_, int32 index": lambda m: _x(m).put_(m.tensor([0], dtype=m.int32), m.tensor([1.0])),
    "put_, float index": lambda m: _x(m).put_(m.tensor([0.0]), m.tensor([1.0])),
    "nonzero of a 0-d": lambda m: m.tensor(2.0).nonzero(),
    "nonzero of nothing": lambda m: m.zeros(0, 3).nonzero(),
    "nonzero as_tuple of a 0-d": lambda m: m.tensor(2.0).nonzero(as_tuple=True),
    "where of one argument": lambda m: m.where(_x(m) > 0),
    "where of one float argument": lambda m: m.where(_x(m)),
    "index [-4] of 3": lambda m: m.ones(3)[_i(m, -4)],
    "index [-3] of 3": lambda m: m.arange(3.0)[_i(m, -3)],
    "index of an int32 tensor": lambda m: m.arange(3.0)[m.tensor([2], dtype=m.int32)],
    "index of an int8 tensor": lambda m: m.arange(3.0)[m.tensor([2], dtype=m.int8)],
    "index of a 2-d list": lambda m: m.arange(6.0).reshape(2, 3)[[[0, 1], [1, 0]]],
    "index, two tensors that do not broadcast": lambda m: _x(m)[_i(m, 0, 1), _i(m, 0, 1, 2)],
    "index, a (2, 2) mask of (2, 3)": lambda m: _x(m)[m.ones(2, 2, dtype=m.bool)],
    "index, a list mask too long": lambda m: m.ones(3)[[True, False, True, True]],
    "index, a float list": lambda m: m.ones(3)[[0.0, 1.0]],
    "index, two ellipses": lambda m: _x(m)[..., ...],
    "index, three dims of two": lambda m: _x(m)[0, 0, 0],
    "index, None and a slice": lambda m: _x(m)[None, :, 1],
    "index, a tensor past dim 1": lambda m: _x(m)[:, _i(m, 3)],
    "setitem, a row of the wrong length": lambda m: _x(m).__setitem__(0, m.ones(4)),
    "setitem, a mask and too many values": lambda m: _x(m).__setitem__(
        _x(m) > 0, m.ones(7)),
    "setitem of float64 values": lambda m: (lambda x: (x.__setitem__(0, m.ones(
        3, dtype=m.float64) * 1.5), x)[1])(_x(m)),
    "setitem of floats into int64": lambda m: (lambda x: (x.__setitem__(0, 2.7), x)[1])(
        m.zeros(2, 3, dtype=m.int64)),
    "setitem of a str": lambda m: _x(m).__setitem__(0, "a"),
    "setitem of None": lambda m: _x(m).__setitem__(0, None),
    "setitem of a list": lambda m: _x(m).__setitem__(0, [1.0, 2.0, 3.0]),
    "setitem of a numpy array": lambda m: _x(m).__setitem__(0, _values((3,))),
    "setitem of a dict": lambda m: _x(m).__setitem__(0, {}),
    "setitem, index 5 of 3": lambda m: _x(m).__setitem__((0, 5), 1.0),
    "setitem, repeated indices": lambda m: (lambda x: (x.__setitem__(_i(m, 0, 0), m.tensor(
        [[1.0] * 3, [1.0] * 3])), x)[1])(_x(m)),
}

# ---- shapes and views --------------------------------------------------------------------------

SHAPES = {
    "view of a transposed": lambda m: _x(m).t().view(6),
    "view with two -1": lambda m: _x(m).view(-1, -1),
    "view(3, 4) of 6": lambda m: _x(m).view(3, 4),
    "view of an expanded": lambda m: _x(m, 1, 3).expand(2, 3).view(6),
    "view as int64": lambda m: _x(m).view(m.int64).shape,
    "reshape with two -1": lambda m: _x(m).reshape(-1, 2, -1),
    "reshape with -1 of nothing": lambda m: m.zeros(0, 3).reshape(-1, 0),
    "reshape(0, -1) of 6": lambda m: _x(m).reshape(0, -1),
    "expand to fewer dims": lambda m: _x(m).expand(3),
    "expand (2, 4) of (2, 3)": lambda m: _x(m).expand(2, 4),
    "expand -1 on a new dim": lambda m: _x(m).expand(-1, 2, 3),
    "expand with -2": lambda m: _x(m, 1, 3).expand(-2, 3),
    "repeat with fewer dims": lambda m: _x(m).repeat(2),
    "repeat -1": lambda m: _x(m).repeat(2, -1),
    "permute with a repeated dim": lambda m: _x(m).permute(0, 0),
    "permute with too few dims": lambda m: _x(m).permute(0),
    "permute with dim 2": lambda m: _x(m).permute(0, 2),
    "flatten start after end": lambda m: _x(m, 2, 3, 4).flatten(2, 1),
    "flatten end 3": lambda m: _x(m).flatten(0, 3),
    "unflatten, product differs": lambda m: _x(m).unflatten(1, (4, 2)),
    "unflatten, two -1": lambda m: _x(m).unflatten(1, (-1, -1)),
    "unflatten, empty sizes": lambda m: _x(m).unflatten(1, ()),
    "unflatten dim 2": lambda m: _x(m).unflatten(2, (3, 1)),
    "split 0": lambda m: _x(m).split(0, 1),
    "split -1": lambda m: _x(m).split(-1, 1),
    "split sizes not adding up": lambda m: _x(m).split([1, 1], 1),
    "split sizes with a negative": lambda m: _x(m).split([4, -1], 1),
    "chunk 0": lambda m: _x(m).chunk(0, 1),
    "chunk -1": lambda m: _x(m).chunk(-1, 1),
    "chunk 5 of 3": lambda m: _x(m).chunk(5, 1),
    "tensor_split 0": lambda m: _x(m).tensor_split(0, 1),
    "narrow past the end": lambda m: _x(m).narrow(1, 2, 5),
    "narrow start 5": lambda m: _x(m).narrow(1, 5, 0),
    "narrow start -5": lambda m: _x(m).narrow(1, -5, 1),
    "narrow length -1": lambda m: _x(m).narrow(1, 0, -1),
    "narrow start -1": lambda m: _x(m).narrow(1, -1, 1),
    "movedim, repeated source": lambda m: _x(m, 2, 3, 4).movedim((0, 0), (1, 2)),
    "movedim, repeated destination": lambda m: _x(m, 2, 3, 4).movedim((0, 1), (2, 2)),
    "movedim, lengths differ": lambda m: _x(m, 2, 3, 4).movedim((0, 1), (2,)),
    "squeeze a dim of 3": lambda m: _x(m).squeeze(1),
    "squeeze dims (0, 0)": lambda m: _x(m, 1, 3).squeeze((0, 0)),
    "stack of float32 and float64": lambda m: m.stack([_x(m), _x(m).double()]),
    "cat of float32 and int64": lambda m: m.cat([_x(m), m.ones(2, 3, dtype=m.int64)]),
    "cat of bool and int64": lambda m: m.cat([m.ones(2, dtype=m.bool), m.ones(2, dtype=m.int64)]),
    "cat of a 0-size 1-d and a 2-d": lambda m: m.cat([m.ones(0), _x(m)]),
    "cat, sizes differ off the dim": lambda m: m.cat([_x(m), _x(m, 2, 4)], 0),
    "stack of a tensor and a list": lambda m: m.stack([_x(m), [[1.0] * 3] * 2]),
    "t() of a 3-d": lambda m: _x(m, 2, 3, 4).t(),
    "swapaxes 0, 3": lambda m: _x(m).swapaxes(0, 3),
    "unsqueeze -4": lambda m: _x(m).unsqueeze(-4),
    "broadcast_to (3,)": lambda m: _x(m).broadcast_to((3,)),
    "broadcast_tensors, mismatched": lambda m: m.broadcast_tensors(_x(m), m.ones(4)),
    "view_as a smaller": lambda m: _x(m).view_as(m.ones(5)),
    "reshape_as a smaller": lambda m: _x(m).reshape_as(m.ones(5)),
    "unfold size 5 of 3": lambda m: _x(m).unfold(1, 5, 1),
    "unfold step 0": lambda m: _x(m).unfold(1, 2, 0),
    "diagonal, dims equal": lambda m: _x(m).diagonal(0, 0, 0),
    "tril of a 1-d": lambda m: m.ones(3).tril(),
    "flip, a repeated dim": lambda m: _x(m).flip(0, 0),
    "roll, dims longer than shifts": lambda m: _x(m).roll((1,), (0, 1)),
}

# ---- linear algebra ----------------------------------------------------------------------------

LINALG = {
    "mm (2, 3) x (4, 5)": lambda m: m.mm(_x(m), m.ones(4, 5)),
    "mm of int64 and float32": lambda m: m.mm(m.ones(2, 3, dtype=m.int64), m.ones(3, 2)),
    "mm of a 3-d": lambda m: m.mm(_x(m, 2, 2, 3), m.ones(3, 2)),
    "bmm, batches differ": lambda m: m.bmm(m.ones(2, 2, 3), m.ones(3, 3, 2)),
    "bmm, inner sizes differ": lambda m: m.bmm(m.ones(2, 2, 3), m.ones(2, 4, 2)),
    "bmm of float64 and float32": lambda m: m.bmm(m.ones(2, 2, 3, dtype=m.float64),
                                                  m.ones(2, 3, 2)),
    "mv, sizes differ": lambda m: m.mv(_x(m), m.ones(2)),
    "mv of a vector": lambda m: m.mv(m.ones(3), m.ones(3)),
    "mv by a matrix": lambda m: m.mv(_x(m), m.ones(3, 1)),
    "dot of matrices": lambda m: m.dot(_x(m), _x(m)),
    "dot of int64 and float32": lambda m: m.dot(m.ones(3, dtype=m.int64), m.ones(3)),
    "outer of a matrix": lambda m: m.outer(_x(m), m.ones(2)),
    "outer of a 0-d": lambda m: m.outer(m.tensor(1.0), m.ones(2)),
    "matmul (3,) x (2,)": lambda m: m.matmul(m.ones(3), m.ones(2)),
    "matmul, batches do not broadcast": lambda m: m.matmul(m.ones(2, 2, 3), m.ones(3, 3, 2)),
    "matmul of two 0-d": lambda m: m.matmul(m.tensor(1.0), m.tensor(2.0)),
    "einsum, sizes differ": lambda m: m.einsum("ij,jk->ik", _x(m), m.ones(4, 5)),
    "einsum, output letter not in the inputs": lambda m: m.einsum("ij->ik", _x(m)),
    "einsum, too many operands": lambda m: m.einsum("ij->i", _x(m), _x(m)),
    "einsum, too few operands": lambda m: m.einsum("ij,jk->ik", _x(m)),
    "einsum, subscripts and dims differ": lambda m: m.einsum("ijk->i", _x(m)),
    "einsum, a digit subscript": lambda m: m.einsum("i1->i", _x(m)),
    "einsum, output letter twice": lambda m: m.einsum("ij->ii", _x(m)),
    "einsum of no operands": lambda m: m.einsum("ij->i"),
    "einsum, repeated index of unequal sizes": lambda m: m.einsum("ii->i", _x(m)),
    "einsum, two arrows": lambda m: m.einsum("i->j->i", m.ones(2)),
    "einsum of int64 and float32": lambda m: m.einsum("i,i->", m.ones(2, dtype=m.int64),
                                                      m.ones(2)),
    "einsum of float32 and float64": lambda m: m.einsum("i,i->", m.ones(2), m.ones(
        2, dtype=m.float64)),
    "einsum with an ellipsis": lambda m: m.einsum("...j,jk->...k", _x(m, 2, 2, 3), _x(m, 3, 2)),
    "einsum, a space and a capital": lambda m: m.einsum("iJ, J -> i", _x(m), _x(m, 3)),
    "inv of a singular": lambda m: m.linalg.inv(m.zeros(2, 2)),
    "inv of (2, 3)": lambda m: m.linalg.inv(_x(m)),
    "inv of a 1-d": lambda m: m.linalg.inv(m.ones(3)),
    "inv of int64": lambda m: m.linalg.inv(m.eye(2, dtype=m.int64)),
    "inverse of a singular": lambda m: m.inverse(m.ones(2, 2)),
    "solve of a singular": lambda m: m.linalg.solve(m.zeros(2, 2), m.ones(2)),
    "solve of (2, 3)": lambda m: m.linalg.solve(_x(m), m.ones(2)),
    "solve, B of the wrong size": lambda m: m.linalg.solve(m.eye(2), m.ones(3)),
    "solve, dtypes differ": lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.float64)),
    "cholesky of a non-PD": lambda m: m.linalg.cholesky(-m.eye(2)),
    "cholesky of (2, 3)": lambda m: m.linalg.cholesky(_x(m)),
    "cholesky of a 1-d": lambda m: m.linalg.cholesky(m.ones(2)),
    "det of (2, 3)": lambda m: m.linalg.det(_x(m)),
    "det of a 1-d": lambda m: m.linalg.det(m.ones(3)),
    "det of int64": lambda m: m.det(m.eye(2, dtype=m.int64)),
    "det of a singular": lambda m: m.det(m.ones(2, 2)),
    "slogdet of (2, 3)": lambda m: m.linalg.slogdet(_x(m)),
    "eigh of (2, 3)": lambda m: m.linalg.eigh(_x(m)),
    "qr of a 1-d": lambda m: m.linalg.qr(m.ones(3)),
    "svd of a 1-d": lambda m: m.linalg.svd(m.ones(3)),
    "matrix_power of (2, 3)": lambda m: m.linalg.matrix_power(_x(m), 2),
    "matrix_power -1 of a singular": lambda m: m.linalg.matrix_power(m.zeros(2, 2), -1),
    "pinv of a 1-d": lambda m: m.linalg.pinv(m.ones(3)),
    "cross of length 2": lambda m: m.linalg.cross(m.ones(2), m.ones(2)),
}

# ---- nn layers and losses ----------------------------------------------------------------------


def _ctc(m, log_probs_shape=(4, 1, 3), targets=(1, 2), input_lengths=(4,), target_lengths=(2,),
         blank=0):
    log_probs = m.tensor(_values(log_probs_shape)).log_softmax(2)
    return _f(m).ctc_loss(log_probs, m.tensor([list(targets)]), m.tensor(list(input_lengths)),
                          m.tensor(list(target_lengths)), blank=blank)


LAYERS = {
    "Conv1d on the wrong channels": lambda m: m.nn.Conv1d(2, 2, 3)(m.ones(1, 3, 5)),
    "Conv1d on 4-d": lambda m: m.nn.Conv1d(1, 2, 3)(m.ones(1, 1, 5, 5)),
    "Conv1d on 1-d": lambda m: m.nn.Conv1d(1, 2, 3)(m.ones(5)),
    "Conv1d on int64": lambda m: m.nn.Conv1d(1, 2, 3)(m.ones(1, 1, 5, dtype=m.int64)),
    "Conv3d on 4-d of the wrong channels": lambda m: m.nn.Conv3d(2, 2, 1)(m.ones(3, 2, 2, 2)),
    "ConvTranspose2d on the wrong channels": lambda m: m.nn.ConvTranspose2d(2, 2, 3)(
        m.ones(1, 3, 4, 4)),
    "ConvTranspose2d on 2-d": lambda m: m.nn.ConvTranspose2d(1, 2, 3)(m.ones(4, 4)),
    "BatchNorm2d, wrong channels": lambda m: m.nn.BatchNorm2d(4)(m.ones(2, 3, 2, 2)),
    "BatchNorm2d on int64": lambda m: m.nn.BatchNorm2d(3)(m.ones(2, 3, 2, 2, dtype=m.int64)),
    "BatchNorm1d on 4-d": lambda m: m.nn.BatchNorm1d(3)(m.ones(2, 3, 2, 2)),
    "BatchNorm1d eval, wrong channels": lambda m: m.nn.BatchNorm1d(4).eval()(m.ones(2, 3)),
    "InstanceNorm1d, wrong channels, affine": lambda m: m.nn.InstanceNorm1d(4, affine=True)(
        m.ones(2, 3, 5)),
    "GroupNorm, wrong channels": lambda m: m.nn.GroupNorm(2, 4)(m.ones(2, 6, 3)),
    "GroupNorm on 1-d": lambda m: m.nn.GroupNorm(1, 3)(m.ones(3)),
    "LayerNorm on int64": lambda m: m.nn.LayerNorm(3)(m.ones(3, dtype=m.int64)),
    "Linear on int64": lambda m: m.nn.Linear(3, 2)(m.ones(2, 3, dtype=m.int64)),
    "Linear on 0-d": lambda m: m.nn.Linear(3, 2)(m.tensor(1.0)),
    "Bilinear, wrong features": lambda m: m.nn.Bilinear(3, 4, 2)(m.ones(2, 3), m.ones(2, 3)),
    "Embedding of floats": lambda m: m.nn.Embedding(3, 2)(m.tensor([1.0])),
    "Embedding of int32": lambda m: m.nn.Embedding(3, 2)(m.tensor([1], dtype=m.int32)).shape,
    "EmbeddingBag, offsets past the end": lambda m: m.nn.EmbeddingBag(3, 2)(
        m.tensor([0, 1]), m.tensor([0, 5])),
    "LSTM on int64": lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 3, dtype=m.int64)),
    "LSTM on float64": lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 3, dtype=m.float64)),
    "GRU on the wrong features": lambda m: m.nn.GRU(3, 4)(m.ones(5, 2, 2)),
    "GRU, wrong hidden state": lambda m: m.nn.GRU(3, 4)(m.ones(5, 2, 3), m.ones(1, 2, 3)),
    "RNN on 1-d": lambda m: m.nn.RNN(3, 4)(m.ones(3)),
    "LSTMCell on the wrong features": lambda m: m.nn.LSTMCell(3, 4)(m.ones(2, 2)),
    "MultiheadAttention, wrong embed dim": lambda m: (lambda a, q: a(q, q, q))(
        m.nn.MultiheadAttention(4, 2), m.ones(3, 2, 5)),
    "TransformerEncoderLayer, wrong d_model": lambda m: m.nn.TransformerEncoderLayer(
        4, 2, 8)(m.ones(3, 2, 5)),
    "MaxPool1d on 4-d": lambda m: m.nn.MaxPool1d(2)(m.ones(1, 1, 4, 4)),
    "AvgPool2d on 2-d": lambda m: m.nn.AvgPool2d(2)(m.ones(4, 4)),
    "AdaptiveAvgPool2d on 2-d": lambda m: m.nn.AdaptiveAvgPool2d(2)(m.ones(4, 4)),
    "MaxPool2d on int64": lambda m: m.nn.MaxPool2d(2)(m.ones(1, 1, 4, 4, dtype=m.int64)),
    "PReLU, wrong channels": lambda m: m.nn.PReLU(4)(m.ones(2, 3)),
    "Dropout on int64, training": lambda m: m.nn.Dropout(0.5)(m.ones(3, dtype=m.int64)),
    "Softmax on int64": lambda m: m.nn.Softmax(0)(m.ones(3, dtype=m.int64)),
    "Upsample on 2-d": lambda m: m.nn.Upsample(scale_factor=2)(m.ones(4, 4)),
    "PixelShuffle, channels not divisible": lambda m: m.nn.PixelShuffle(2)(m.ones(1, 3, 2, 2)),
    "Flatten, start after end": lambda m: m.nn.Flatten(2, 1)(m.ones(2, 3, 4)),
    "Unflatten, product differs": lambda m: m.nn.Unflatten(1, (2, 2))(m.ones(2, 3)),
}

LOSSES = {
    "nll_loss, target 3 of 3": lambda m: _f(m).nll_loss(_x(m).log_softmax(1), _i(m, 0, 3)),
    "nll_loss, target -1": lambda m: _f(m).nll_loss(_x(m).log_softmax(1), _i(m, 0, -1)),
    "nll_loss, target of int32": lambda m: _f(m).nll_loss(
        _x(m), m.tensor([0, 1], dtype=m.int32)),
    "nll_loss, target of another batch": lambda m: _f(m).nll_loss(_x(m), _i(m, 0, 1, 2)),
    "nll_loss, 2-d target of 2-d input": lambda m: _f(m).nll_loss(_x(m), m.tensor([[0], [1]])),
    "nll_loss, 3-d input, target of the wrong shape": lambda m: _f(m).nll_loss(
        _x(m, 2, 3, 4), m.zeros(2, 5, dtype=m.int64)),
    "nll_loss, reduction 'foo'": lambda m: _f(m).nll_loss(_x(m), _i(m, 0, 1), reduction="foo"),
    "nll_loss, weight of the wrong size": lambda m: _f(m).nll_loss(
        _x(m), _i(m, 0, 1), weight=m.ones(4)),
    "nll_loss, ignore_index -100": lambda m: _f(m).nll_loss(_x(m), _i(m, 0, -100)),
    "cross_entropy, target 5 with ignore_index 5": lambda m: _f(m).cross_entropy(
        _x(m), _i(m, 0, 5), ignore_index=5),
    "cross_entropy, probabilities of the wrong shape": lambda m: _f(m).cross_entropy(
        _x(m), m.ones(2, 4) / 4),
    "cross_entropy, 3-d input, target of the wrong shape": lambda m: _f(m).cross_entropy(
        _x(m, 2, 3, 4), m.zeros(2, 5, dtype=m.int64)),
    "cross_entropy, target of bool": lambda m: _f(m).cross_entropy(_x(m), m.tensor([True, False])),
    "CrossEntropyLoss(reduction='foo')": lambda m: m.nn.CrossEntropyLoss(reduction="foo")(
        _x(m), _i(m, 0, 1)),
    "binary_cross_entropy, target 1.5": lambda m: _f(m).binary_cross_entropy(
        m.tensor([0.5]), m.tensor([1.5])),
    "binary_cross_entropy, input -0.5": lambda m: _f(m).binary_cross_entropy(
        m.tensor([-0.5]), m.tensor([1.0])),
    "binary_cross_entropy, int64 target": lambda m: _f(m).binary_cross_entropy(
        m.tensor([0.5]), m.tensor([1])),
    "binary_cross_entropy, reduction 'foo'": lambda m: _f(m).binary_cross_entropy(
        m.tensor([0.5]), m.tensor([1.0]), reduction="foo"),
    "binary_cross_entropy, weight of the wrong shape": lambda m: _f(m).binary_cross_entropy(
        m.tensor([0.5, 0.5]), m.tensor([1.0, 0.0]), weight=m.ones(3)),
    "bce_with_logits, int64 target": lambda m: _f(m).binary_cross_entropy_with_logits(
        m.tensor([0.5]), m.tensor([1])),
    "bce_with_logits, pos_weight of the wrong size": lambda m: (
        _f(m).binary_cross_entropy_with_logits(_x(m), m.ones(2, 3), pos_weight=m.ones(4))),
    "BCELoss on a 1.5": lambda m: m.nn.BCELoss()(m.tensor([1.5]), m.tensor([1.0])),
    "mse_loss, shapes do not broadcast": lambda m: _f(m).mse_loss(_x(m), m.ones(4)),
    "mse_loss, shapes broadcast": lambda m: _f(m).mse_loss(_x(m), m.ones(3)),
    "mse_loss, reduction 'avg'": lambda m: _f(m).mse_loss(_x(m), _x(m), reduction="avg"),
    "l1_loss, reduction 'foo'": lambda m: _f(m).l1_loss(_x(m), _x(m), reduction="foo"),
    "L1Loss(reduction=None)": lambda m: m.nn.L1Loss(reduction=None)(_x(m), _x(m)),
    "smooth_l1_loss, beta -1": lambda m: _f(m).smooth_l1_loss(_x(m), m.zeros(2, 3), beta=-1.0),
    "huber_loss, delta 0": lambda m: _f(m).huber_loss(_x(m), m.zeros(2, 3), delta=0.0),
    "kl_div, reduction 'foo'": lambda m: _f(m).kl_div(_x(m), _x(m), reduction="foo"),
    "kl_div, shapes do not broadcast": lambda m: _f(m).kl_div(_x(m), m.ones(4)),
    "margin_ranking_loss, shapes differ": lambda m: _f(m).margin_ranking_loss(
        m.ones(2), m.ones(3), m.ones(2)),
    "cosine_embedding_loss, target of the wrong size": lambda m: _f(m).cosine_embedding_loss(
        _x(m), _x(m), m.ones(3)),
    "triplet_margin_loss, shapes differ": lambda m: _f(m).triplet_margin_loss(
        _x(m), _x(m), m.ones(2, 4)),
    "poisson_nll_loss, reduction 'foo'": lambda m: _f(m).poisson_nll_loss(
        _x(m), _x(m), reduction="foo"),
    "gaussian_nll_loss, negative var": lambda m: _f(m).gaussian_nll_loss(
        _x(m), _x(m), -m.ones(2, 3)),
    "ctc_loss": lambda m: _ctc(m),
    "ctc_loss, input length past the input": lambda m: _ctc(m, input_lengths=(5,)),
    "ctc_loss, target longer than the input": lambda m: _ctc(
        m, targets=(1, 2, 1, 2, 1), target_lengths=(5,)),
    "ctc_loss, blank 3 of 3": lambda m: _ctc(m, blank=3),
    "ctc_loss, lengths of two for a batch of one": lambda m: _ctc(m, input_lengths=(4, 4)),
    "ctc_loss, reduction 'foo'": lambda m: _f(m).ctc_loss(
        m.ones(4, 1, 3).log_softmax(2), m.tensor([[1]]), m.tensor([4]), m.tensor([1]),
        reduction="foo"),
}

# ---- modules and their state -------------------------------------------------------------------


def _linear_state(m, **extra):
    return {"weight": m.ones(3, 2), "bias": m.ones(3), **extra}


def _round_trip(m):
    layer = m.nn.Linear(2, 3)
    with m.no_grad():
        layer.weight.copy_(m.tensor(_values((3, 2))))
    buffer = io.BytesIO()
    m.save(layer.state_dict(), buffer)
    buffer.seek(0)
    fresh = m.nn.Linear(2, 3)
    keys = fresh.load_state_dict(m.load(buffer))
    return keys, fresh.weight.detach(), list(m.load(io.BytesIO(buffer.getvalue())))


def _saved_tensor(m):
    buffer = io.BytesIO()
    m.save({"x": _x(m), "n": 3, "s": [1.5, "a"]}, buffer)
    buffer.seek(0)
    loaded = m.load(buffer)
    return loaded["x"], loaded["n"], loaded["s"]


def _optimizer(m, *shapes, **kwargs):
    return m.optim.SGD([m.nn.Parameter(m.ones(s)) for s in shapes], lr=0.1, **kwargs)


def _optimizer_state(m, *shapes):
    first = _optimizer(m, *shapes, momentum=0.9)
    for p in first.param_groups[0]["params"]:
        p.grad = m.ones_like(p)
    first.step()
    return first.state_dict()


def _warned(m, run, phrase):
    """Whether running ``run`` warns with ``phrase`` (torch's words) in the message."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return any(phrase in str(w.message).replace("gradviz", "torch") for w in caught)


def _scheduler_before_optimizer(m):
    opt = _optimizer(m, 2)
    scheduler = m.optim.lr_scheduler.StepLR(opt, 1)
    return _warned(m, scheduler.step, "Detected call of `lr_scheduler.step()` before "
                   "`optimizer.step()`")


def _scheduler_after_optimizer(m):
    opt = _optimizer(m, 2)
    scheduler = m.optim.lr_scheduler.StepLR(opt, 1)
    opt.param_groups[0]["params"][0].grad = m.ones(2)
    opt.step()
    return _warned(m, scheduler.step, "lr_scheduler.step()"), opt.param_groups[0]["lr"]


class _Items:
    """A map-style dataset of the given items."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def _loader(m, items, **kwargs):
    return list(m.utils.data.DataLoader(_Items(items(m)), **kwargs))


def _with(m, method, *args):
    module = m.nn.Module()
    return getattr(module, method)(*args)


MODULES = {
    "load_state_dict, unexpected key": lambda m: m.nn.Linear(2, 3).load_state_dict(
        _linear_state(m, extra=m.ones(1))),
    "load_state_dict, unexpected key, strict False": lambda m: m.nn.Linear(2, 3).load_state_dict(
        _linear_state(m, extra=m.ones(1)), strict=False),
    "load_state_dict, missing key, strict False": lambda m: m.nn.Linear(2, 3).load_state_dict(
        {"weight": m.ones(3, 2)}, strict=False),
    "load_state_dict, missing and unexpected": lambda m: m.nn.Linear(2, 3).load_state_dict(
        {"weight": m.ones(3, 2), "b": m.ones(3)}),
    "load_state_dict, wrong shape, strict False": lambda m: m.nn.Linear(2, 3).load_state_dict(
        {"weight": m.ones(2, 2), "bias": m.ones(3)}, strict=False),
    "load_state_dict, nested missing": lambda m: m.nn.Sequential(m.nn.Linear(2, 3)).load_state_dict(
        {"0.weight": m.ones(3, 2)}),
    "load_state_dict of an int": lambda m: m.nn.Linear(2, 3).load_state_dict(3),
    "load_state_dict of a list": lambda m: m.nn.Linear(2, 3).load_state_dict([m.ones(3, 2)]),
    "load_state_dict, a value not a tensor": lambda m: m.nn.Linear(2, 3).load_state_dict(
        {"weight": [[1.0] * 2] * 3, "bias": m.ones(3)}),
    "load_state_dict, float64 values": lambda m: (lambda layer: (layer.load_state_dict(
        {"weight": m.ones(3, 2, dtype=m.float64), "bias": m.ones(3, dtype=m.float64)}),
        layer.weight.detach())[1])(m.nn.Linear(2, 3)),
    "load_state_dict, int64 values": lambda m: (lambda layer: (layer.load_state_dict(
        {"weight": m.ones(3, 2, dtype=m.int64), "bias": m.ones(3, dtype=m.int64)}),
        layer.weight.detach())[1])(m.nn.Linear(2, 3)),
    "state_dict round trip through save and load": _round_trip,
    "save and load of a dict": _saved_tensor,
    "load of garbage": lambda m: m.load(io.BytesIO(b"not a checkpoint")),
    "load of nothing": lambda m: m.load(io.BytesIO(b"")),
    "register_buffer ''": lambda m: _with(m, "register_buffer", "", m.ones(1)),
    "register_buffer 'a.b'": lambda m: _with(m, "register_buffer", "a.b", m.ones(1)),
    "register_buffer 'training'": lambda m: _with(m, "register_buffer", "training", m.ones(1)),
    "register_buffer of a name 3": lambda m: _with(m, "register_buffer", 3, m.ones(1)),
    "register_buffer of None": lambda m: _with(m, "register_buffer", "b", None),
    "register_buffer of a list": lambda m: _with(m, "register_buffer", "b", [1.0]),
    "register_parameter ''": lambda m: _with(m, "register_parameter", "", m.nn.Parameter(
        m.ones(1))),
    "register_parameter 'a.b'": lambda m: _with(m, "register_parameter", "a.b", m.nn.Parameter(
        m.ones(1))),
    "register_parameter of a tensor": lambda m: _with(m, "register_parameter", "p", m.ones(1)),
    "register_parameter of a number": lambda m: _with(m, "register_parameter", "p", 3.0),
    "register_parameter of a name 3": lambda m: _with(m, "register_parameter", 3, None),
    "register_parameter 'training'": lambda m: _with(m, "register_parameter", "training", None),
    "add_module ''": lambda m: _with(m, "add_module", "", m.nn.ReLU()),
    "add_module of a tensor": lambda m: _with(m, "add_module", "a", m.ones(1)),
    "add_module of a name 3": lambda m: _with(m, "add_module", 3, m.nn.ReLU()),
    "add_module 'training'": lambda m: _with(m, "add_module", "training", m.nn.ReLU()),
    "register_module of a tensor": lambda m: _with(m, "register_module", "a", m.ones(1)),
    "setattr weight to a tensor": lambda m: setattr(m.nn.Linear(2, 3), "weight", m.ones(3, 2)),
    "setattr weight to a number": lambda m: setattr(m.nn.Linear(2, 3), "weight", 3.0),
    "Parameter of int64 without grad": lambda m: m.nn.Parameter(
        m.ones(2, dtype=m.int64), requires_grad=False),
    "Parameter of bool": lambda m: m.nn.Parameter(m.ones(2, dtype=m.bool)),
    "Parameter of a number": lambda m: m.nn.Parameter(3.0),
    "get_submodule 'x'": lambda m: m.nn.Linear(2, 3).get_submodule("x"),
    "get_parameter 'x'": lambda m: m.nn.Linear(2, 3).get_parameter("x"),
    "optimizer load_state_dict, groups differ": lambda m: _optimizer(m, 2).load_state_dict(
        {"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]}),
    "optimizer load_state_dict, group sizes differ": lambda m: _optimizer(m, 2).load_state_dict(
        _optimizer_state(m, 2, 3)),
    "optimizer load_state_dict, shapes differ": lambda m: (lambda opt: (
        opt.load_state_dict(_optimizer_state(m, 3)), opt.param_groups[0]["momentum"])[1])(
        _optimizer(m, 2, momentum=0.9)),
    "optimizer load_state_dict of a list": lambda m: _optimizer(m, 2).load_state_dict([]),
    "optimizer add_param_group, a parameter twice": lambda m: (lambda opt: opt.add_param_group(
        {"params": opt.param_groups[0]["params"]}))(_optimizer(m, 2)),
    "lr_scheduler.step before optimizer.step warns": _scheduler_before_optimizer,
    "lr_scheduler.step after optimizer.step": _scheduler_after_optimizer,
    "StepLR of a number": lambda m: m.optim.lr_scheduler.StepLR(3, 1),
    "StepLR of a module": lambda m: m.optim.lr_scheduler.StepLR(m.nn.Linear(2, 2), 1),
    "DataLoader batch_size 0": lambda m: _loader(m, lambda m: [1, 2], batch_size=0),
    "DataLoader batch_size -1": lambda m: _loader(m, lambda m: [1, 2], batch_size=-1),
    "DataLoader batch_size 1.5": lambda m: _loader(m, lambda m: [1, 2], batch_size=1.5),
    "DataLoader batch_size True": lambda m: _loader(m, lambda m: [1, 2], batch_size=True),
    "DataLoader num_workers -1": lambda m: _loader(m, lambda m: [1, 2], num_workers=-1),
    "DataLoader shuffle with a sampler": lambda m: _loader(
        m, lambda m: [1, 2], shuffle=True, sampler=[0, 1]),
    "DataLoader of a tensor and an int": lambda m: _loader(
        m, lambda m: [m.ones(2), 3], batch_size=2),
    "DataLoader of an int and a tensor": lambda m: _loader(
        m, lambda m: [3, m.ones(2)], batch_size=2),
    "DataLoader of an int and a str": lambda m: _loader(m, lambda m: [3, "a"], batch_size=2),
    "DataLoader of tensors of two shapes": lambda m: _loader(
        m, lambda m: [m.ones(2), m.ones(3)], batch_size=2),
    "DataLoader of tuples of two lengths": lambda m: _loader(
        m, lambda m: [(1, 2), (1, 2, 3)], batch_size=2),
    "DataLoader of dicts with other keys": lambda m: _loader(
        m, lambda m: [{"a": 1}, {"b": 2}], batch_size=2),
    "DataLoader of None": lambda m: _loader(m, lambda m: [None, None], batch_size=2),
    "DataLoader of float and int": lambda m: _loader(m, lambda m: [1.5, 2], batch_size=2),
    "DataLoader of a dataset of numbers, no batch": lambda m: _loader(
        m, lambda m: [1.5, 2], batch_size=None),
}

# ---- autograd misuse ---------------------------------------------------------------------------


def _grad(m, **kwargs):
    x, unused = _leaf(m), _leaf(m)
    return m.autograd.grad((x * 2).sum(), [x, unused], **kwargs)


def _hooked(m, hook):
    x = _leaf(m)
    y = x * 2
    y.register_hook(hook)
    y.sum().backward()
    return x.grad


def _function(m, backward):
    """A custom Function of two inputs (x * y) whose backward is ``backward(ctx, g)``."""

    class Mul(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

    Mul.backward = staticmethod(backward)
    x, y = _leaf(m), _leaf(m)
    Mul.apply(x, y).sum().backward()
    return x.grad, y.grad


def _set_grad(m, value):
    x = _leaf(m)
    x.grad = value(m)
    return x.grad


def _backward_in_no_grad(m):
    x = _leaf(m)
    loss = (x * x).sum()
    with m.no_grad():
        loss.backward()
    return x.grad


def _backward_of_a_loss_made_in_no_grad(m):
    x = _leaf(m)
    with m.no_grad():
        loss = (x * x).sum()
    loss.backward()


AUTOGRAD = {
    "grad, allow_unused False": lambda m: _grad(m),
    "grad, allow_unused True": lambda m: _grad(m, allow_unused=True),
    "grad, materialize_grads": lambda m: _grad(m, allow_unused=True, materialize_grads=True),
    "grad, materialize_grads without allow_unused": lambda m: _grad(m, materialize_grads=True),
    "grad, materialize_grads, allow_unused False": lambda m: _grad(
        m, allow_unused=False, materialize_grads=True),
    "grad, grad_outputs of the wrong shape": lambda m: (lambda x: m.autograd.grad(
        x * 2, [x], m.ones(3)))(_leaf(m)),
    "grad, grad_outputs of float64": lambda m: (lambda x: m.autograd.grad(
        x * 2, [x], m.ones(2, 3, dtype=m.float64)))(_leaf(m)),
    "grad, grad_outputs of int64": lambda m: (lambda x: m.autograd.grad(
        x * 2, [x], m.ones(2, 3, dtype=m.int64)))(_leaf(m)),
    "grad, grad_outputs of a number": lambda m: (lambda x: m.autograd.grad(
        (x * 2).sum(), [x], 2.0))(_leaf(m)),
    "grad, more grad_outputs than outputs": lambda m: (lambda x: m.autograd.grad(
        [x * 2], [x], [m.ones(2, 3), m.ones(2, 3)]))(_leaf(m)),
    "grad, no inputs": lambda m: m.autograd.grad(_leaf(m).sum(), []),
    "grad of nothing": lambda m: m.autograd.grad([], [_leaf(m)]),
    "grad, outputs of no grad, allow_unused": lambda m: m.autograd.grad(
        m.ones(2).sum(), [_leaf(m)], allow_unused=True),
    "backward, inputs empty": lambda m: (_leaf(m) * 2).sum().backward(inputs=[]),
    "backward, inputs not in the graph": lambda m: (lambda x, y: ((x * 2).sum().backward(
        inputs=[y]), y.grad)[1])(_leaf(m), _leaf(m)),
    "hook returning the wrong shape": lambda m: _hooked(m, lambda g: g[0]),
    "hook returning float64": lambda m: _hooked(m, lambda g: g.double()),
    "hook returning a number": lambda m: _hooked(m, lambda g: 3.0),
    "hook returning a list": lambda m: _hooked(m, lambda g: [[1.0] * 3] * 2),
    "hook returning None": lambda m: _hooked(m, lambda g: None),
    "hook of a tensor not requiring grad": lambda m: m.ones(2).register_hook(lambda g: g),
    "register_hook of a number": lambda m: _leaf(m).register_hook(3),
    "Function backward, too few gradients": lambda m: _function(m, lambda ctx, g: g),
    "Function backward, too many gradients": lambda m: _function(m, lambda ctx, g: (g, g, g)),
    "Function backward, wrong shape": lambda m: _function(m, lambda ctx, g: (g[0], g)),
    "Function backward, broadcastable shape": lambda m: _function(m, lambda ctx, g: (
        g[0:1], g)),
    "Function backward, float64": lambda m: _function(m, lambda ctx, g: (g.double(), g)),
    "Function backward, a number": lambda m: _function(m, lambda ctx, g: (2.0, g)),
    "Function backward, a list": lambda m: _function(m, lambda ctx, g: ([1.0], g)),
    "Function backward, None": lambda m: _function(m, lambda ctx, g: (None, g)),
    "backward inside no_grad": _backward_in_no_grad,
    "backward of a loss made in no_grad": _backward_of_a_loss_made_in_no_grad,
    "retain_graph then backward twice more": lambda m: (lambda x: (lambda y: (
        y.backward(retain_graph=True), y.backward(), y.backward()))(x.exp().sum()))(_leaf(m)),
    "grad with retain_graph, then backward": lambda m: (lambda x: (lambda y: (
        m.autograd.grad(y, [x], retain_graph=True), y.backward(), x.grad)[2])(
        x.exp().sum()))(_leaf(m)),
    ".grad of the wrong shape": lambda m: _set_grad(m, lambda m: m.ones(3)),
    ".grad of float64": lambda m: _set_grad(m, lambda m: m.ones(2, 3, dtype=m.float64)),
    ".grad of int64": lambda m: _set_grad(m, lambda m: m.ones(2, 3, dtype=m.int64)),
    ".grad of a number": lambda m: _set_grad(m, lambda m: 3.0),
    ".grad of a list": lambda m: _set_grad(m, lambda m: [1.0]),
    ".grad of None": lambda m: _set_grad(m, lambda m: None),
    ".grad of an expanded": lambda m: _set_grad(m, lambda m: m.ones(1, 3).expand(2, 3)),
    "requires_grad_(False) on a non-leaf": lambda m: (_leaf(m) * 2).requires_grad_(False),
    "requires_grad_(True) on a non-leaf": lambda m: (_leaf(m) * 2).requires_grad_().is_leaf,
    "requires_grad = False on a non-leaf": lambda m: setattr(_leaf(m) * 2, "requires_grad", False),
    "requires_grad = 'yes'": lambda m: setattr(_x(m), "requires_grad", "yes"),
    "requires_grad_('yes')": lambda m: _x(m).requires_grad_("yes"),
    "requires_grad_(1)": lambda m: _x(m).requires_grad_(1),
    "requires_grad = None": lambda m: setattr(_x(m), "requires_grad", None),
    "requires_grad_ on bool": lambda m: m.ones(2, dtype=m.bool).requires_grad_(),
    "detach_ of a view": lambda m: _leaf(m)[0].detach_(),
    "retain_grad of a tensor not requiring grad": lambda m: _x(m).retain_grad(),
}

FAMILIES = {"indexing": INDEXING, "shapes": SHAPES, "linalg": LINALG, "layers": LAYERS,
            "losses": LOSSES, "modules": MODULES, "autograd": AUTOGRAD}
CASES = {name: case for family in FAMILIES.values() for name, case in family.items()}

KNOWN = {
    "scatter, reduce 'avg'": "gradviz's scatter has no reduce= (deprecated in torch for "
                             "scatter_reduce, which gradviz has): a TypeError names the argument",
    "take_along_dim 5 of 3": "torch reads past the row unchecked (a value from elsewhere in "
                             "memory); gradviz refuses the index",
    "index, a float list": "torch truncates a list of floats to indices; gradviz refuses float "
                           "indices as it does for a float tensor (IndexError)",
    "view as int64": "gradviz has no view(dtype) (a bit reinterpretation): a TypeError that "
                     "points to .to(dtype)",
    "Parameter of a number": "as Parameter of a list in test_hostile_inputs_vs_torch: gradviz "
                             "makes the number a 0-d tensor",
    "setitem of a list": "gradviz writes a list or a numpy array of values (numpy's "
                         "x[0] = [1, 2, 3]); torch wants a tensor or a number",
    "setitem of a numpy array": "as setitem of a list",
    "grad, more grad_outputs than outputs": "torch ignores the extra gradients; gradviz refuses "
                                            "the count, as both do for too few",
}


def _compare_with_phrases(ours, theirs):
    _compare(ours, theirs)
    if theirs[0] == "raised":
        message = str(ours[1]).replace("gradviz", "torch")
        for phrase in FAMILY_PHRASES:
            if phrase in str(theirs[1]) and phrase not in KEY_PHRASES:
                assert phrase in message, f"torch says {theirs[1]!s}; gradviz says {ours[1]!s}"


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_family_arguments_as_in_torch(case):
    check_case(_outcome(gradviz, case, CASES), _outcome(torch, case, CASES), case in KNOWN,
               _compare_with_phrases)


def test_no_case_is_named_twice_and_every_known_divergence_names_a_case():
    assert len(CASES) == sum(len(family) for family in FAMILIES.values())
    assert set(KNOWN) <= set(CASES)

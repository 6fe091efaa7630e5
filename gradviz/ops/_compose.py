"""Functions PyTorch builds from other ops, built here the same way: ``hstack``, ``vstack``,
``column_stack``, ``meshgrid``, ``broadcast_to``, ``broadcast_tensors``, ``tile`` and
``einsum``. They record the primitives' nodes (``CatBackward0``, ``ExpandBackward0``, ...), so
their gradients, of every order, come from those ops' rules.
"""

from __future__ import annotations

import builtins
import string
import warnings

import numpy as np

from .._tensor import TYPE_WORDS, _wrap_dim
from ._indexing import repeat
from ._linalg import diagonal
from ._pointwise import _broadcast_error, mul
from ._reduction import sum
from ._registry import declare, exports, numpy_names
from ._shape import _shape_arg, cat, expand, permute, reshape, transpose, unsqueeze


@declare()
def atleast_1d(tensor):
    """``tensor`` viewed with at least one dimension (a sequence: each of them).

    Mirrors ``torch.atleast_1d``."""
    return reshape(tensor, (1,)) if tensor.ndim == 0 else tensor


@declare()
def atleast_2d(tensor):
    """``tensor`` viewed with at least two dimensions (a sequence: each of them).

    Mirrors ``torch.atleast_2d``."""
    if tensor.ndim == 0:
        return reshape(tensor, (1, 1))
    return unsqueeze(tensor, 0) if tensor.ndim == 1 else tensor


@declare()
def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    tensors = [atleast_1d(t) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@declare()
def vstack(tensors):
    """Concatenate along dim 0, 1-D tensors becoming rows."""
    return cat([atleast_2d(t) for t in tensors], 0)


@declare()
def column_stack(tensors):
    """1-D tensors become columns, then ``hstack``."""
    return hstack([reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors])


@declare(method=True)
def broadcast_to(input, shape):
    """A view of ``input`` expanded to ``shape`` by broadcasting. Mirrors ``torch.broadcast_to``."""
    return expand(input, *shape)


@declare()
def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape, as views.

    Mirrors ``torch.broadcast_tensors``."""
    shape: tuple = ()
    for t in tensors:
        error = _broadcast_error(np.broadcast_to(0, shape), t._data)
        if error is not None:
            raise error
        shape = np.broadcast_shapes(shape, t._data.shape)
    return tuple(expand(t, *shape) for t in tensors)


@declare()
def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (``indexing="ij"``, or ``"xy"`` to swap the first
    two dims); views made by ``expand``, as in PyTorch."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    swap = indexing == "xy" and len(tensors) >= 2
    order = list(tensors)
    if swap:
        order[0], order[1] = order[1], order[0]
    shape = tuple(t.numel() for t in order)
    grids = []
    for i, t in enumerate(order):
        view = [1] * len(order)
        view[i] = -1
        grids.append(expand(reshape(t, tuple(view)), *shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@declare(method=True)
def tile(input, dims):
    """``repeat`` with ``dims`` padded with leading ones to the input's number of dims."""
    dims = _shape_arg(tuple(dims) if isinstance(dims, (tuple, list)) else (dims,))
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, *dims)


def _spell_out_ellipsis(equation, operands):
    """``equation`` with each ``...`` replaced by letters it does not use, one per broadcast
    dim (right-aligned across operands, as torch broadcasts them); without ``->`` the output is
    the broadcast dims followed by the letters used once, in alphabetical order, as in torch."""
    inputs, arrow, output = equation.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(operands):
        return equation  # the caller names the operand-count error
    counts = []
    for i, (spec, operand) in enumerate(zip(specs, operands)):
        named = len(spec) - 3 if "..." in spec else len(spec)
        if "..." in spec and named > operand.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) is "
                               f"more than the number of dimensions ({operand.ndim}) for operand {i}")
        counts.append(operand.ndim - named if "..." in spec else 0)
    spare = [c for c in string.ascii_letters if c not in equation]
    width = builtins.max(counts + [0])
    broadcast = "".join(spare[:width])
    if not arrow:
        letters = inputs.replace(",", "").replace("...", "")
        output = "..." + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    specs = [spec.replace("...", broadcast[width - k:] if k else "") for spec, k in zip(specs, counts)]
    return ",".join(specs) + "->" + output.replace("...", broadcast)


def _einsum_diagonals(operand, spec, i):
    """A subscript repeated within one operand (``'ii->i'``) takes the diagonal of those dims,
    as torch: ``(operand, spec)`` with each repeated letter once, its diagonal dim last."""
    for letter in dict.fromkeys(spec):
        while spec.count(letter) > 1:
            first = spec.index(letter)
            second = spec.index(letter, first + 1)
            if operand.shape[first] != operand.shape[second]:
                raise RuntimeError(f"einsum(): subscript {letter} is repeated for operand {i} but "
                                   f"the sizes don't match, {operand.shape[second]} != "
                                   f"{operand.shape[first]}")
            operand = diagonal(operand, 0, first, second)
            spec = spec[:first] + spec[first + 1:second] + spec[second + 1:] + letter
    return operand, spec


def _check_einsum_equation(equation, operands):
    """torch's checks of the equation's characters and of the output's letters, in its order
    (numpy's would be a KeyError, or digits read as subscripts)."""
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least "
                         "one operand and its subscripts list")
    inputs, arrow, output = equation.partition("->")
    for i, c in enumerate(inputs):
        if not (c in string.ascii_letters or c in ",."):
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, "
                               "subscripts must be in [a-zA-Z]")
    for i, c in enumerate(output, len(inputs) + len(arrow)):
        if c == ".":
            continue
        if c not in string.ascii_letters:
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, "
                               "subscripts must be in [a-zA-Z]")
        if c not in inputs:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any "
                               "input operand")
        if output.count(c) > 1:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    dtypes = [t.dtype for t in operands if hasattr(t, "dtype")]
    for dtype in dtypes[1:]:
        if dtype is not dtypes[0]:
            raise RuntimeError(f"expected scalar type {TYPE_WORDS[dtypes[0].name]} but found "
                               f"{TYPE_WORDS[dtype.name]}")


@declare()
def einsum(equation, *operands):
    """Einstein summation, built from broadcasting products and sums (so its gradients are those
    of ``mul`` and ``sum``); ``...`` stands for broadcast dims (spelled out as spare letters)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = equation.replace(" ", "")
    _check_einsum_equation(equation, operands)
    if "..." in equation:
        equation = _spell_out_ellipsis(equation, operands)
    inputs, _, output = equation.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(specs) else
                           "einsum(): fewer operands were provided than specified in the equation")
    if not _:
        counts = {}
        for letter in inputs.replace(",", ""):
            counts[letter] = counts.get(letter, 0) + 1
        output = "".join(sorted(k for k, v in counts.items() if v == 1))
    letters = list(output) + sorted({c for spec in specs for c in spec} - set(output))
    sizes = {}
    aligned = []
    for spec, operand in zip(specs, operands):
        if len(spec) != operand.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(spec)}) does not match the number of dimensions "
                               f"({operand.ndim}) for operand {len(aligned)} and no ellipsis "
                               "was given")
        operand, spec = _einsum_diagonals(operand, spec, len(aligned))
        for letter, size in zip(spec, operand.shape):
            if sizes.setdefault(letter, size) != size and size != 1 and sizes[letter] != 1:
                raise RuntimeError("einsum(): operands do not broadcast with remapped shapes "
                                   "(original->remapped)")
            if size != 1:  # a size-1 dim broadcasts, also against a size-0 one
                sizes[letter] = size
        # put the operand's dims in `letters` order, with size-1 dims for the missing letters
        present = [letter for letter in letters if letter in spec]
        moved = permute(operand, *[spec.index(letter) for letter in present])
        shape = tuple(operand.shape[spec.index(letter)] if letter in spec else 1
                      for letter in letters)
        aligned.append(reshape(moved, shape))
    product = aligned[0]
    for operand in aligned[1:]:
        product = mul(product, operand)
    contracted = tuple(range(len(output), len(letters)))
    if contracted:
        product = sum(product, contracted)
    full = tuple(sizes[letter] for letter in output)
    return expand(product, *full) if tuple(product.shape) != full else product


@declare(method=True)
@numpy_names
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """Differences of neighbours along ``dim``, ``n`` times (``x[1:] - x[:-1]``)."""
    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        input = cat(parts, dim)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = _wrap_dim(dim, input.ndim)
    for _ in range(n):
        length = input.shape[dim]
        if length == 0:
            break
        input = input.narrow(dim, 1, length - 1) - input.narrow(dim, 0, length - 1)
    return input


@declare(name=("movedim", "moveaxis"), method=("movedim", "moveaxis"))
def movedim(input, source, destination):
    """``input`` with the dims ``source`` moved to ``destination`` (a ``permute``)."""
    sources = list(source) if isinstance(source, (tuple, list)) else [source]
    destinations = list(destination) if isinstance(destination, (tuple, list)) else [destination]
    if len(sources) != len(destinations):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({sources} dims) "
                           f"should contain the same number of dims as destination "
                           f"({destinations} dims)")
    given = {"source": sources, "destination": destinations}
    sources = [_wrap_dim(d, input.ndim) for d in sources]
    destinations = [_wrap_dim(d, input.ndim) for d in destinations]
    for name, wrapped in (("source", sources), ("destination", destinations)):
        if len(set(wrapped)) != len(wrapped):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given[name]})")
    order = [d for d in range(input.ndim) if d not in sources]
    for dst, src in sorted(zip(destinations, sources)):
        order.insert(dst, src)
    return permute(input, *order)


@declare(name=("swapaxes", "swapdims"), method=("swapaxes", "swapdims"))
def swapaxes(input, axis0, axis1):
    """``transpose`` under numpy's name."""
    return transpose(input, axis0, axis1)


@declare(method=True)
def ravel(input):
    """The values as a 1-D tensor (``reshape(-1)``)."""
    return reshape(input, (-1,))


__all__ = exports(globals())

"""``matmul`` and its primitives ``dot``, ``mv``, ``mm``, ``bmm``.

``matmul`` is composite, exactly as PyTorch's ``at::matmul`` (aten LinearAlgebra.cpp,
``_matmul_impl``): 1-D and 2-D cases dispatch to a primitive; a batch against a matrix or
vector is folded into one ``mm``/``mv``; anything else is expanded, flattened to 3-D and run
through ``bmm``. So the graph a user sees (``UnsafeViewBackward0`` over ``MmBackward0``, ...)
is the graph PyTorch records for the same expression.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gradviz_ext import ops as _ext_ops

from .._tensor import C_TYPE_NAMES, TYPE_WORDS, Tensor, _wrap_dim
from ._creation import eye
from ._layout import product as _product
from ._registry import Op, apply, declare, exports, promote
from ._saved import NO_LU, RESULT, SELF_SIZES, Attr, Computed, Input, input_strides, matrix_shape, passed
from ._shape import (
    contiguous,
    expand_to,
    reshape,
    reshape_to,
    squeeze_dim,
    t,
    transpose,
    unsafe_view,
    unsafe_view_to,
    unsqueeze,
)
from ._shape import unsqueeze as _unsqueeze


def _each_for_the_other(needs):
    """The saves of a product of two operands (dot, mv, mm, bmm): as PyTorch, each operand is
    kept only for the other's gradient."""
    return ((1,) if needs[0] else ()) + ((0,) if needs[1] else ()), False


def _check_float_pair(what, a, b):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{what}(): arguments must be Tensors, got "
                        f"{type(a).__name__} and {type(b).__name__}")
    if a._data.dtype != b._data.dtype and what == "bmm":
        raise RuntimeError(f"expected scalar type {TYPE_WORDS[a.dtype.name]} but found {TYPE_WORDS[b.dtype.name]}")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_C_TYPE_NAMES[a.dtype.name]} != {_C_TYPE_NAMES[b.dtype.name]}"
                           if what != "dot" else
                           f"dot : expected both vectors to have same dtype, but found "
                           f"{TYPE_WORDS[a.dtype.name]} and {TYPE_WORDS[b.dtype.name]}")


_C_TYPE_NAMES = C_TYPE_NAMES


def _mm_mat2_grad(mat1, g, mat2_transposed):
    """``mat1.T @ g`` laid out like ``mat2``: when ``mat2`` was a transposed view (``x @ w.t()``,
    as in every Linear layer) compute ``(g.T @ mat1).T``, as PyTorch's mm_mat2_backward does, so
    the gradient that reaches ``w`` is row-major and ``.grad`` needs no transposing copy."""
    if mat2_transposed:
        return _product(g.T, mat1).T
    return _product(mat1.T, g)


def _transposed(matrix):
    """Whether a 2-D array is a transposed view (column-major only): mat2's layout, recorded at
    forward (with both matrices' ``strides``) so the gradient of mat2 needs mat2's layout but
    not its values, as PyTorch keeps its strides: mat2 is saved only when mat1 needs a
    gradient."""
    flags = matrix.flags
    return flags.f_contiguous and not flags.c_contiguous


def _mm_forward(a, b, mat2_transposed=False, strides=None):
    return _product(a, b)


DOT = Op("dot", "DotBackward0", forward=np.dot, saves=_each_for_the_other, dtype=promote,
         backward=lambda ctx, g: (g * ctx.input(1) if ctx.needs_input_grad[0] else None,
                                  g * ctx.input(0) if ctx.needs_input_grad[1] else None),
         fast_backward=lambda ctx, g: (g * ctx.data(1) if ctx.needs_input_grad[0] else None,
                                       g * ctx.data(0) if ctx.needs_input_grad[1] else None),
         saved={"self": Input(0, needed_by=1), "tensor": Input(1, needed_by=0)})
MV = Op("mv", "MvBackward0", forward=np.matmul, saves=_each_for_the_other, dtype=promote,
        backward=lambda ctx, g: (
            unsqueeze(g, 1) * unsqueeze(ctx.input(1), 0) if ctx.needs_input_grad[0] else None,
            mv(t(ctx.input(0)), g) if ctx.needs_input_grad[1] else None),
        fast_backward=lambda ctx, g: (
            g[:, None] * ctx.data(1)[None, :] if ctx.needs_input_grad[0] else None,
            np.matmul(ctx.data(0).T, g) if ctx.needs_input_grad[1] else None),
        saved={"self": Input(0, needed_by=1), "vec": Input(1, needed_by=0)})
MM = Op("mm", "MmBackward0", forward=_mm_forward, saves=_each_for_the_other, dtype=promote,
        backward=lambda ctx, g: (
            mm(g, t(ctx.input(1))) if ctx.needs_input_grad[0] else None,
            mm(t(ctx.input(0)), g) if ctx.needs_input_grad[1] else None),
        fast_backward=lambda ctx, g: (
            _product(g, ctx.data(1).T) if ctx.needs_input_grad[0] else None,
            _mm_mat2_grad(ctx.data(0), g, ctx.mat2_transposed) if ctx.needs_input_grad[1]
            else None),
        saved={
            "self": Input(0, needed_by=1), "mat2": Input(1, needed_by=0),
            "self_sym_sizes": Computed(matrix_shape(0, 1, 0, 0, True)),
            "self_sym_strides": Computed(input_strides(0, 0)),
            "mat2_sym_sizes": Computed(matrix_shape(1, 0, 1, 1, False)),
            "mat2_sym_strides": Computed(input_strides(1, 0)),
        })
# Note [Small batched products]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's bmm and baddbmm (and matmul of batched operands, which reaches bmm; and their
# gradients, which are bmm too) do not call BLAS when inner * rows * columns < 400: each entry
# is summed in a plain loop, k by k from 0, a multiply and an add each, in float for float32.
# numpy's matmul sums as BLAS does (in blocks, fused), so a tiny attention's scores differed
# from torch's in the last bits: 243 of the 600 entries of a float32 (50, 3, 5) @ (50, 5, 4).
# Below the threshold gradviz sums as torch: a C loop (gradviz_ext/c/small_bmm.h), or,
# interpreted, the same operations in numpy one k at a time (the same bits). baddbmm's rule
# there is torch's loop's too: ``alpha * sum`` when beta is 0 (the input ignored, NaN
# included), else ``input * beta + alpha * sum``. At and above the threshold torch calls BLAS
# per batch, as numpy's matmul does. The loop costs more than numpy's matmul at these sizes
# (median of 2,000 calls each, alternated in one process: 4.0 us against 2.6 for the
# (50, 3, 5) @ (50, 5, 4) above, 7.0 against 2.7 for (32, 4, 16) @ (32, 16, 4), 10.3 against
# 3.4 for (64, 8, 4) @ (64, 4, 8)); the products of the benchmark models are all above the
# threshold (the GPT's attention scores are 32 x 16 x 32), so they do not meet it.

_SMALL_PRODUCT = 400


def batched_product(a, b, input=None, beta=1, alpha=1):
    """``a @ b`` of (batches, rows, inner) and (batches, inner, columns) arrays as torch's bmm
    computes it, or with ``input`` (the output's shape) torch's baddbmm of small matrices
    (Note [Small batched products]); None for baddbmm at the sizes torch gives to BLAS."""
    if (a.shape[1] * a.shape[2] * b.shape[2] >= _SMALL_PRODUCT or a.dtype != b.dtype
            or a.dtype not in (np.float32, np.float64)):
        return np.matmul(a, b) if input is None else None
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if input is not None:
        input = np.ascontiguousarray(np.broadcast_to(input, (a.shape[0], a.shape[1], b.shape[2])))
    found = _ext_ops.small_bmm(a, b, input, beta, alpha)
    if found is not None:
        return found
    total = np.zeros((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
    for k in range(a.shape[2]):
        total += a[:, :, k, None] * b[:, None, k, :]
    if input is None:
        return total
    scaled = a.dtype.type(alpha) * total
    return scaled if beta == 0 else input * a.dtype.type(beta) + scaled


BMM = Op("bmm", "BmmBackward0", forward=batched_product, saves=_each_for_the_other,
         dtype=promote,
         backward=lambda ctx, g: (
             bmm(g, transpose(ctx.input(1), 1, 2)) if ctx.needs_input_grad[0] else None,
             bmm(transpose(ctx.input(0), 1, 2), g) if ctx.needs_input_grad[1] else None),
         fast_backward=lambda ctx, g: (
             batched_product(g, np.swapaxes(ctx.data(1), 1, 2)) if ctx.needs_input_grad[0]
             else None,
             batched_product(np.swapaxes(ctx.data(0), 1, 2), g) if ctx.needs_input_grad[1]
             else None),
         saved={"self": Input(0, needed_by=1), "mat2": Input(1, needed_by=0)})

def scaled_sum(input, product, beta, alpha, shape):
    """BLAS's ``beta * input + alpha * product()`` (gemm's and gemv's, as torch's addmm,
    addmv and addbmm reach them): beta 0 ignores ``input``, NaN and inf included; alpha 0
    ignores the product, not computed (NaN in its operands does not reach the result); a
    ``shape`` result."""
    if alpha == 0:
        if beta == 0:
            return np.zeros(shape, np.result_type(input))
        return np.broadcast_to(input * beta, shape).copy()
    total = product()
    if alpha != 1:
        total = total * alpha
    if beta == 0:
        return total if total.shape == shape else np.broadcast_to(total, shape).copy()
    return (input * beta if beta != 1 else input) + total


def _scaled(g, factor):
    """torch's ``maybe_multiply``: ``g`` itself for a factor of 1."""
    return g if factor == 1 else g * factor


def _addmm_backward(ctx, g):
    return (g if ctx.needs_input_grad[0] else None,
            mm(g, t(ctx.input(2))) if ctx.needs_input_grad[1] else None,
            mm(t(ctx.input(1)), g) if ctx.needs_input_grad[2] else None)


def _addmm_fast(ctx, g):
    return (g if ctx.needs_input_grad[0] else None,
            _product(g, ctx.data(2).T) if ctx.needs_input_grad[1] else None,
            _mm_mat2_grad(ctx.data(1), g, ctx.mat2_transposed) if ctx.needs_input_grad[2]
            else None)


def _scaled_addmm_backward(ctx, g):
    """torch's addmm gradients with its factors: ``grad * beta``, each product's ``* alpha``."""
    grads = _addmm_backward(ctx, g)
    return tuple(None if grad is None else _scaled(grad, ctx.beta if i == 0 else ctx.alpha)
                 for i, grad in enumerate(grads))


def _scaled_addmm_fast(ctx, g):
    grads = _addmm_fast(ctx, g)
    return tuple(None if grad is None else _scaled(grad, ctx.beta if i == 0 else ctx.alpha)
                 for i, grad in enumerate(grads))


def _addmm_saves(needs):
    # as PyTorch: mat2 is kept for mat1's gradient, mat1 for mat2's (and only then)
    return ((2,) if needs[1] else ()) + ((1,) if needs[2] else ()), False


# ``bias + mat1 @ mat2``, one node as in PyTorch (a Linear layer's ``AddmmBackward0``); the
# engine sums the bias's gradient over the rows it was broadcast to.
def _addmm_forward(bias, a, b, mat2_transposed=False, strides=None):
    if getattr(bias, "dtype", None) == a.dtype == b.dtype and _fits(bias.shape, a.shape[0],
                                                                    b.shape[1]):
        return _product(a, b, bias)  # the bias added into the product: no second array
    product = _product(a, b)
    try:
        return np.add(product, bias)  # numpy decides: promotion, or a larger shape
    except ValueError:  # numpy's error names no dim: torch's expand error does
        raise _bias_expand_error(np.shape(bias), product.shape) from None


def _bias_expand_error(shape, target):
    """torch's error for an addmm bias of ``shape`` that does not expand to ``target``."""
    for i in range(1, len(shape) + 1):
        if shape[-i] not in (1, target[-i]) if i <= len(target) else True:
            break
    dim = len(target) - i
    existing = shape[-i]
    wanted = target[-i] if i <= len(target) else existing
    return RuntimeError(f"The expanded size of the tensor ({wanted}) must match the existing size "
                        f"({existing}) at non-singleton dimension {dim}.  Target sizes: "
                        f"{list(target)}.  Tensor sizes: {list(shape)}")


def _fits(shape, rows, columns):
    """Whether a bias of ``shape`` broadcasts to (rows, columns) without enlarging it."""
    if shape == (columns,):  # a Linear layer's
        return True
    n = len(shape)
    return n <= 2 and (n < 1 or shape[-1] in (1, columns)) and (n < 2 or shape[0] in (1, rows))


ADDMM = Op("addmm", "AddmmBackward0", forward=_addmm_forward,
           backward=_addmm_backward, fast_backward=_addmm_fast, saves=_addmm_saves,
           saved={
               "mat1": Input(1, needed_by=2), "mat2": Input(2, needed_by=1),
               "alpha": Attr("alpha", default=1), "beta": Attr("beta", default=1),
               "mat1_sym_sizes": Computed(matrix_shape(1, 2, 0, 0, True)),
               "mat1_sym_strides": Computed(input_strides(1, 1)),
               "mat2_sym_sizes": Computed(matrix_shape(2, 1, 1, 1, False)),
               "mat2_sym_strides": Computed(input_strides(2, 1)),
           })
# with a beta or an alpha other than 1: the same node, BLAS's rule for a factor of 0
ADDMM_SCALED = Op("addmm_scaled", "AddmmBackward0",
                  forward=lambda bias, a, b, beta, alpha, **_: scaled_sum(
                      bias, lambda: _product(a, b), beta, alpha, (a.shape[0], b.shape[1])),
                  backward=_scaled_addmm_backward, fast_backward=_scaled_addmm_fast,
                  saves=_addmm_saves)

_TORCH_TYPE_WORDS = TYPE_WORDS


@declare(method=True, inplace=True, out=True)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` (``input`` broadcasts to the product's shape)."""
    first, second = mat1._data, mat2._data  # (the checks read the arrays: a Linear's hot path)
    if first.dtype != second.dtype or input._data.dtype != first.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{_TORCH_TYPE_WORDS[mat1.dtype.name]} and "
                           f"{_TORCH_TYPE_WORDS[mat2.dtype.name]}")
    if first.ndim != 2 or second.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {mat1.ndim}-D tensor" if mat1.ndim != 2
                           else f"mat2 must be a matrix, got {mat2.ndim}-D tensor")
    if first.shape[1] != second.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})")
    if beta != 1 or alpha != 1:
        return apply(ADDMM_SCALED, input, mat1, mat2, mat2_transposed=_transposed(second),
                     strides=(first.strides, second.strides), beta=beta, alpha=alpha)
    return apply(ADDMM, input, mat1, mat2, mat2_transposed=_transposed(second),
                 strides=(first.strides, second.strides))


@declare(method=True, out=True)
def dot(input, other):
    """The dot product of two 1-D tensors of the same length. Mirrors ``torch.dot``."""
    _check_float_pair("dot", input, other)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
            f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
            "elements respectively")
    return apply(DOT, input, other)


@declare(method=True, out=True)
def mv(input, vec):
    """The product of a matrix and a vector. Mirrors ``torch.mv``."""
    _check_float_pair("mv", input, vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return apply(MV, input, vec)


@declare(method=True, out=True)
def mm(input, mat2):
    """The matrix product of two 2-D tensors (no broadcasting). Mirrors ``torch.mm``."""
    if not isinstance(input, Tensor) or not isinstance(mat2, Tensor):
        _check_float_pair("mm", input, mat2)
    a, b = input._data, mat2._data
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("self must be a matrix" if a.ndim != 2 else "mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:  # before the dtypes, as torch
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})")
    _check_float_pair("mm", input, mat2)
    return apply(MM, input, mat2, mat2_transposed=_transposed(b), strides=(a.strides, b.strides))


@declare(method=True, out=True)
def bmm(input, mat2):
    """The batched matrix product of two 3-D tensors of matching batch size.

    Mirrors ``torch.bmm``."""
    _check_float_pair("bmm", input, mat2)
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.ndim != 3 else "batch2 must be a 3D tensor")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{input.shape[0]}, "
            f"{input.shape[2]}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    return apply(BMM, input, mat2)


_requires_grad = _ext_ops.requires_grad


def _should_fold(a, b):
    a_larger = a.ndim >= b.ndim
    t1 = a if a_larger else transpose(b, -1, -2)  # only its shape and strides are read
    dim_t2 = b.ndim if a_larger else a.ndim
    if not (t1.ndim >= 3 and dim_t2 <= 2):
        return False
    if _requires_grad(b if a_larger else a):
        return True
    if a.ndim == 2:
        return False
    if t1._data.size == 0:
        return True
    shape, strides = t1._data.shape, t1._data.strides
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(t1.ndim - 2))


# Note [Batched matmul]
# ~~~~~~~~~~~~~~~~~~~~~
# Past the 1-D and 2-D cases and the folds, matmul records PyTorch's six nodes (an expand and
# a reshape per operand, bmm, an unsafe view) on shapes it has computed itself: the batch
# broadcast (numpy's only where the two batches differ), then ``expand_to``, ``reshape_to``
# and ``unsafe_view_to`` (gradviz/ops/_shape.py), which skip the public functions' parsing of
# sizes and their checks, and bmm's node directly where its checks cannot fail (bmm itself
# otherwise, for its error). The expands are mostly no-ops, whose view skips np.broadcast_to's
# iterator (``_expand_forward``), and a row-major operand's reshape is a view without the
# strides' test. The same nodes, arrays and errors (tests/nn/test_linear_views.py); a
# (2, 3, 4, 5) @ (2, 3, 5, 4) product with gradients took 43 us and takes 17 (torch: 6); the
# GPT's attention makes two per block.
# F.linear (gradviz/nn/_functional_core.py) does the same for the two views around a
# Linear's addmm on inputs of 3+ dims: 18 -> 13.5 us on a (2, 3, 4) input (torch: 6).

@declare(method=("matmul", "__matmul__"), out=True)
def matmul(input, other):
    """Matrix product with PyTorch's rules for 1-D, 2-D and batched (broadcast) operands."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(
            f"matmul(): arguments must be Tensors, got {type(input).__name__} and {type(other).__name__}")
    d1, d2 = input.ndim, other.ndim
    if d1 == 0 or d2 == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {d1}D and {d2}D")
    if d1 == 1 and d2 == 1:
        return dot(input, other)
    # inner sizes are checked by the mm / mv / bmm the operands reach, so the message names
    # the kernel torch reaches too ("size mismatch, got input (3) ..." from mv, "Expected size
    # for first two dimensions of batch2 ..." from bmm)
    if d1 == 2 and d2 == 1:
        return mv(input, other)
    if d1 == 1 and d2 == 2:
        return squeeze_dim(mm(unsqueeze(input, 0), other), 0, node="SqueezeBackward4")
    if d1 == 2 and d2 == 2:
        return mm(input, other)
    if _should_fold(input, other):
        swap = d2 > d1
        t1 = transpose(other, -1, -2) if swap else input
        t2 = (t(input) if d1 == 2 else input) if swap else other
        output_shape = list(t1.shape[:-1])
        folded = int(np.prod(output_shape))
        if t2.ndim == 2:
            output_shape.append(t2.shape[1])
        t1_folded = reshape(t1, folded, t1.shape[-1])
        if t2.ndim == 2:
            out = unsafe_view(mm(t1_folded, t2), *output_shape)
            return contiguous(transpose(out, -1, -2)) if swap else out
        return unsafe_view(mv(t1_folded, t2), *output_shape)
    shape1, shape2 = input._data.shape, other._data.shape  # plain tuples: no Size objects
    n = shape1[-2] if d1 > 1 else 1
    m1 = shape1[-1]
    batch1 = shape1[:max(d1 - 2, 0)]
    m2 = shape2[-2] if d2 > 1 else shape2[0]
    p = shape2[-1] if d2 > 1 else 1
    batch2 = shape2[:max(d2 - 2, 0)]
    if d1 == 3 and d2 == 3 and batch1[0] != batch2[0]:
        if batch1[0] == 1 and _requires_grad(input):
            return matmul(squeeze_dim(input, 0), other)
        if batch2[0] == 1 and _requires_grad(other):
            return matmul(input, squeeze_dim(other, 0))
    if batch1 == batch2:  # attention's operands: numpy's broadcast is the identity
        batch = batch1
    else:
        try:
            batch = tuple(np.broadcast_shapes(batch1, batch2))
        except ValueError:
            raise RuntimeError(
                f"The size of tensor a ({batch1[-1]}) must match the size of tensor b "
                f"({batch2[-1]}) at non-singleton dimension 0") from None
    count = math.prod(batch)
    # the shapes below are valid by construction: the ops are recorded without their
    # argument parsing (the batched attention's per-op overhead, Note [Batched matmul])
    a3 = reshape_to(expand_to(input, batch + (n, m1)), (count, n, m1))
    if d2 == 1:
        b3 = unsqueeze(reshape_to(expand_to(other, batch + (m2,)), (count, m2)), 2)
    else:
        b3 = reshape_to(expand_to(other, batch + (m2, p)), (count, m2, p))
    output_shape = batch + ((n,) if d1 > 1 else ()) + ((p,) if d2 > 1 else ())
    if m1 == m2 and a3._data.dtype == b3._data.dtype:
        product = apply(BMM, a3, b3)
    else:
        product = bmm(a3, b3)  # its error
    if d2 == 1:
        product = squeeze_dim(product, -1)
    return unsafe_view_to(product, output_shape)


# ---- diagonals, triangles, trace, outer ---------------------------------------------------

def _diagonal_view(a, offset, dim1, dim2, shape, **_):
    """The diagonal as a writable view of ``a`` (numpy's ``diagonal`` is read-only): the
    other dims, then the diagonal, whose step is one row plus one column."""
    n1, n2 = a.shape[dim1], a.shape[dim2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    if length:  # start at the diagonal's first element (a view, so it stays writable)
        start = [slice(None)] * a.ndim
        start[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
        a = a[tuple(start)]
    others = [d for d in range(a.ndim) if d not in (dim1, dim2)]
    return np.lib.stride_tricks.as_strided(
        a, [a.shape[d] for d in others] + [length],
        [a.strides[d] for d in others] + [a.strides[dim1] + a.strides[dim2]])


def _diagonal_copy(a, offset, dim1, dim2, shape, **_):
    return np.diagonal(a, offset, dim1, dim2).copy()


# diagonal's, diagonal_copy's, diag_embed's and their backwards' (Note [Saved ints as passed])
_DIAGONAL_ARGUMENTS = {"offset": passed("offset"), "dim1": passed("dim1"), "dim2": passed("dim2")}


def _dims_passed_on(ctx):
    """The diagonal's dims as passed (Note [Saved ints as passed]), for the nodes of its
    backward, which torch's save too."""
    return {key: ctx.attrs[key] for key in ("dim1_arg", "dim2_arg") if key in ctx.attrs}


# a view sharing storage and version counter with its input, as in PyTorch
DIAGONAL = Op("diagonal", "DiagonalBackward0", forward=_diagonal_view, view=True,
              backward=lambda ctx, g: (_diagonal_scatter(g, ctx.shape, ctx.offset, ctx.dim1, ctx.dim2,
                                                         **_dims_passed_on(ctx)),),
              saved={**_DIAGONAL_ARGUMENTS, "self_sym_sizes": SELF_SIZES})


DIAGONAL_COPY = Op("diagonal_copy", "DiagonalBackward0_copy", forward=_diagonal_copy,
                   backward=DIAGONAL.backward,
                   saved={**_DIAGONAL_ARGUMENTS, "self_sym_sizes": SELF_SIZES})


def _diagonal_backward_forward(g, shape, offset, dim1, dim2, dim1_arg=None, dim2_arg=None):
    """Zeros of ``shape`` with ``g`` written on the diagonal that ``diagonal`` reads."""
    out = np.zeros(shape, dtype=g.dtype)
    view = np.moveaxis(out, (dim1, dim2), (-2, -1))  # a view: writes land in ``out``
    steps = np.arange(g.shape[-1])
    view[..., steps + max(-offset, 0), steps + max(offset, 0)] = g
    return out


DIAGONAL_BACKWARD = Op("diagonal_backward", "DiagonalBackwardBackward0",
                       forward=_diagonal_backward_forward,
                       backward=lambda ctx, gg: (diagonal(gg, ctx.offset, ctx.attrs.get("dim1_arg", ctx.dim1),
                                                          ctx.attrs.get("dim2_arg", ctx.dim2)),),
                       saved=_DIAGONAL_ARGUMENTS)


def _diagonal_scatter(g, shape, offset, dim1, dim2, **dims_passed):
    return apply(DIAGONAL_BACKWARD, g, shape=shape, offset=offset, dim1=dim1, dim2=dim2,
                 **dims_passed)


@declare(method=True)
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims ``dim1``, ``dim2`` (appended as the last dim): a view, as in
    PyTorch, so writing into it writes into ``input``."""
    ndim = input.ndim
    dim1_arg, dim2_arg = dim1, dim2
    dim1, dim2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(DIAGONAL, input, offset=int(offset), dim1=dim1, dim2=dim2,
                 shape=tuple(input._data.shape), dim1_arg=dim1_arg, dim2_arg=dim2_arg)


def _diag_embed_forward(a, offset, dim1, dim2, **_):
    """Zeros with the last dim of ``a`` written on the diagonal of the new dims ``dim1``,
    ``dim2`` (numbered in the output)."""
    size = a.shape[-1] + abs(offset)
    shape = list(a.shape[:-1])
    for d in sorted((dim1, dim2)):
        shape.insert(d, size)
    out = np.zeros(shape, dtype=a.dtype)
    np.copyto(_diagonal_view(out, offset, dim1, dim2, None), a)
    return out


DIAG_EMBED = Op("diag_embed", "DiagEmbedBackward0", forward=_diag_embed_forward,
                backward=lambda ctx, g: (diagonal(g, ctx.offset, ctx.dim1, ctx.dim2),),
                saved=_DIAGONAL_ARGUMENTS)


@declare(method=True)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose ``(dim1, dim2)`` diagonals hold the last dim of ``input`` (zeros
    elsewhere); the batched ``diag``."""
    ndim = input.ndim + 1
    dim1_arg, dim2_arg = dim1, dim2
    dim1, dim2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -1)")
    return apply(DIAG_EMBED, input, offset=int(offset), dim1=dim1, dim2=dim2, dim1_arg=dim1_arg,
                 dim2_arg=dim2_arg)


_diagonal = diagonal  # diag's and tril's argument is also called ``diagonal``, as in torch


@declare(method=True)
def diag(input, diagonal=0):  # noqa: A002  (torch's name)
    """A 1-D tensor becomes a square matrix with it on the ``diagonal``; a matrix gives its
    ``diagonal`` as 1-D."""
    if input.ndim == 1:
        # torch's diag of a vector is diag_embed's defaults, which its node saves
        return apply(DIAG_EMBED, input, offset=int(diagonal), dim1=0, dim2=1, dim1_arg=-2,
                     dim2_arg=-1)
    if input.ndim == 2:  # a copy of the diagonal in torch, hence its node's name
        return apply(DIAGONAL_COPY, input, offset=int(diagonal), dim1=0, dim2=1,
                     shape=tuple(input._data.shape))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@functools.lru_cache(maxsize=64)
def _below(rows, cols, diagonal):
    """``np.tri(rows, cols, diagonal, dtype=bool)``, read-only: the mask of ``np.tril`` and
    ``np.triu``, made once per shape and diagonal (numpy's Python-level ``tri`` is most of a
    small ``tril``: 5.2 -> 1.9 us for a 4 x 4 matrix)."""
    mask = np.tri(rows, cols, diagonal, dtype=bool)
    mask.flags.writeable = False
    return mask


_CACHED_MASK = 1 << 16  # elements; larger masks are made per call, as numpy does


def _tril_forward(a, diagonal):
    """``np.tril(a, diagonal)``, its own computation with a remembered mask."""
    rows, cols = a.shape[-2:]
    if rows * cols > _CACHED_MASK:
        return np.tril(a, diagonal)
    return np.where(_below(rows, cols, diagonal), a, np.zeros(1, a.dtype))


def _triu_forward(a, diagonal):
    """``np.triu(a, diagonal)``, its own computation with a remembered mask."""
    rows, cols = a.shape[-2:]
    if rows * cols > _CACHED_MASK:
        return np.triu(a, diagonal)
    return np.where(_below(rows, cols, diagonal - 1), np.zeros(1, a.dtype), a)


TRIL = Op("tril", "TrilBackward0", forward=_tril_forward,
          backward=lambda ctx, g: (tril(g, ctx.diagonal),), saved={"diagonal": passed("diagonal")})
TRIU = Op("triu", "TriuBackward0", forward=_triu_forward,
          backward=lambda ctx, g: (triu(g, ctx.diagonal),), saved={"diagonal": passed("diagonal")})


@declare(method=True, inplace=True)
def tril(input, diagonal=0):  # noqa: A002
    """The lower triangle of a matrix (or batch), zeros above the ``diagonal``-th diagonal.

    Mirrors ``torch.tril``."""
    if input.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return apply(TRIL, input, diagonal=int(diagonal))


@declare(method=True, inplace=True)
def triu(input, diagonal=0):  # noqa: A002
    """The upper triangle of a matrix (or batch), zeros below the ``diagonal``-th diagonal.

    Mirrors ``torch.triu``."""
    if input.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return apply(TRIU, input, diagonal=int(diagonal))


def _trace_backward(ctx, g):
    n, m = ctx.shape
    return (g * eye(n, m, dtype=g.dtype),)


TRACE = Op("trace", "TraceBackward0", forward=lambda a, shape: np.asarray(np.trace(a)),
           backward=_trace_backward,
           saved={"self_sym_sizes": SELF_SIZES})


@declare(method=True)
def trace(input):
    """The sum of a matrix's diagonal."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return apply(TRACE, input, shape=tuple(input._data.shape))


@declare(name=("outer", "ger"), method=True)
def outer(input, vec2):
    """``input[i] * vec2[j]`` (recorded as a ``MulBackward0``, as in PyTorch)."""
    for name, vector in (("self", input), ("vec2", vec2)):
        if vector.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {vector.ndim}-D")
    return reshape(input, (input._data.shape[0], 1)) * vec2


# ---- inverse, determinant, solve -----------------------------------------------------------

def _check_floating_matrix(what, input):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. "
                           f"Got {TYPE_WORDS[input.dtype.name]}")


def _check_square(what, input):
    if input.ndim < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"{what}: A must be batches of square matrices, but they are "
                           f"{input.shape[-2] if input.ndim > 1 else 1} by "
                           f"{input.shape[-1] if input.ndim else 1} matrices")


class _LinAlgError(RuntimeError):
    """A singular matrix (``torch.linalg.LinAlgError``, a RuntimeError)."""


def _lu_diagonal(a):
    """The diagonal of U and the permutation's sign from an LU factorization with partial
    pivoting (LAPACK's ``getrf``, which PyTorch uses), for each matrix of a batch: one
    elimination step per column, done for the whole batch at once."""
    n = a.shape[-1]
    count = int(np.prod(a.shape[:-2]))
    u = np.array(a, copy=True).reshape(count, n, n)  # (0x0 matrices too)
    signs = np.ones(count, dtype=a.dtype)
    rows = np.arange(count)
    for k in range(n):
        pivots = k + np.argmax(np.abs(u[:, k:, k]), axis=1)
        swap = pivots != k
        if swap.any():
            top = u[rows, k].copy()
            u[rows, k] = u[rows, pivots]
            u[rows, pivots] = top
            signs[swap] = -signs[swap]
        pivot = u[:, k, k]
        zero = pivot == 0  # a zero column below the diagonal: nothing to eliminate
        factors = u[:, k + 1:, k] / np.where(zero, 1, pivot)[:, None]
        factors[zero] = 0
        u[:, k + 1:, k:] -= factors[:, :, None] * u[:, None, k, k:]
    return np.diagonal(u, axis1=-2, axis2=-1).reshape(a.shape[:-1]), signs.reshape(a.shape[:-2])


def _batch_element(failed):
    """PyTorch's ``"(Batch element k): "`` naming the first failed matrix of a batch (``failed``
    has the batch's shape; a single matrix, 0-d, is not named)."""
    if failed.ndim == 0:
        return ""
    return f"(Batch element {int(np.flatnonzero(failed.reshape(-1))[0])}): "


def _singular_error(what, diagonal):
    """The error of ``inv`` on a singular matrix: the first failed matrix of the batch and
    the first zero on its U diagonal (1-based), as LAPACK's ``getrf`` reports it."""
    singular = diagonal == 0
    where = _batch_element(singular.any(-1))
    flat = singular.reshape(-1, diagonal.shape[-1])
    zero = int(np.argmax(flat[flat.any(-1)][0]))
    return _LinAlgError(f"{what}: {where}The diagonal element {zero + 1} is zero, the inversion "
                        "could not be completed because the input matrix is singular.")


def _inverse_forward(a):
    diagonal, _ = _lu_diagonal(a)
    if np.any(diagonal == 0):
        raise _singular_error("linalg.inv", diagonal)
    return np.linalg.inv(a)


INVERSE = Op("inverse", "LinalgInvExBackward0", forward=_inverse_forward,
             backward=lambda ctx, g: (-matmul(matmul(transpose(ctx.output(), -2, -1), g),
                                             transpose(ctx.output(), -2, -1)),),
             saves=lambda needs: ((), True), saved={"inverse": RESULT})


@declare(method=True)
def inverse(input):
    """The matrix inverse (of each matrix in a batch)."""
    _check_floating_matrix("linalg.inv", input)
    _check_square("linalg.inv", input)
    return apply(INVERSE, input)


def _det_backward(ctx, g):
    a = ctx.input(0)
    scale = _unsqueeze(_unsqueeze(g * ctx.output(), -1), -1)
    return (scale * transpose(inverse(a), -2, -1),)


def _det_forward(a):
    diagonal, sign = _lu_diagonal(a)
    return np.asarray(sign * np.prod(diagonal, axis=-1)).astype(a.dtype)


DET = Op("det", "LinalgDetBackward0", forward=_det_forward,
         backward=_det_backward, saves=lambda needs: ((0,), True),
         saved={"A": Input(0), "result": RESULT, "LU": NO_LU, "pivots": NO_LU})


@declare(method=True)
def det(input):
    """The determinant (of each matrix in a batch)."""
    _check_floating_matrix("linalg.det", input)
    _check_square("linalg.det", input)
    return apply(DET, input)


def solve(A, B, *, left=True):
    """The solution ``X`` of ``A @ X = B`` (as ``inverse(A) @ B``)."""
    if not left:
        return matmul(B, inverse(A))
    if B.ndim == A.ndim - 1:
        return matmul(inverse(A), B)
    return matmul(inverse(A), B)


__all__ = exports(globals())

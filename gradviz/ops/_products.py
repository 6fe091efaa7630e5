"""More products, as in PyTorch: the fused ``beta * input + alpha * product`` family
(``addmv``, ``addr``, ``baddbmm``, ``addbmm``, one node each), ``vdot``, ``cross``
(``LinalgCrossBackward0``), and the products PyTorch composes from others and records as
those: ``matrix_power`` (``MmBackward0``), ``kron``, ``tensordot``, ``inner``."""

from __future__ import annotations

import warnings

import numpy as np

from .._tensor import TYPE_WORDS, Tensor, _wrap_dim
from ._creation import eye
from ._linalg import (
    _check_floating_matrix,
    _check_square,
    batched_product,
    bmm,
    inverse,
    matmul,
    mm,
    mv,
    scaled_sum,
)
from ._pointwise import eq, where
from ._registry import Op, apply, declare, exports, promote, saves_inputs
from ._saved import NO_LU, Attr, Computed, Input, NotKept, passed
from ._shape import expand, permute, reshape, transpose, unsafe_view, unsqueeze

# ---- beta * input + alpha * product ------------------------------------------------------------

def _scaled(g, factor):
    return g if factor == 1 else g * factor


def _input_grad(ctx, g):
    return _scaled(g, ctx.beta) if ctx.needs_input_grad[0] else None


def _addr_forward(input, u, v, beta, alpha):
    """torch's addr kernel: ``(alpha * vec1) * vec2`` per entry, plus ``beta * input`` unless
    beta is 0, which ignores the input (NaN included). torch's compiled loop may fuse the
    addition into an FMA (it does for float32 with beta other than 1 on an AVX2 CPU, not for
    float64): there the last bit may differ."""
    outer = np.outer(u * alpha if alpha != 1 else u, v)
    if beta == 0:
        return outer
    return (input if beta == 1 else input * beta) + outer


def _baddbmm_forward(input, b1, b2, beta, alpha):
    """torch's baddbmm: small matrices summed by its loop, with its rule for beta 0 (Note
    [Small batched products]); larger ones as BLAS, per batch."""
    shape = (b1.shape[0], b1.shape[1], b2.shape[2])
    small = batched_product(b1, b2, input, beta, alpha)
    return small if small is not None else scaled_sum(input, lambda: np.matmul(b1, b2), beta,
                                                      alpha, shape)


def _factors_saved(first, second):
    """What torch's node of ``beta * input + alpha * product`` saves: the numbers, and each
    factor for the other's gradient."""
    return {"alpha": Attr("alpha"), "beta": Attr("beta"),
            first: Input(1, needed_by=2), second: Input(2, needed_by=1)}


def _factor_size(index, dim):
    return Computed(lambda node: node.input(index).shape[dim])


ADDMV = Op("addmv", "AddmvBackward0",
           forward=lambda a, m, v, beta, alpha: scaled_sum(a, lambda: np.matmul(m, v), beta,
                                                           alpha, (m.shape[0],)),
           backward=lambda ctx, g: (
               _input_grad(ctx, g),
               _scaled(unsqueeze(g, 1) * unsqueeze(ctx.input(2), 0), ctx.alpha)
               if ctx.needs_input_grad[1] else None,
               _scaled(mv(transpose(ctx.input(1), 0, 1), g), ctx.alpha)
               if ctx.needs_input_grad[2] else None),
           saves=saves_inputs(1, 2), dtype=promote, saved=_factors_saved("mat", "vec"))
ADDR = Op("addr", "AddrBackward0", forward=_addr_forward,
          backward=lambda ctx, g: (
              _input_grad(ctx, g),
              _scaled(mv(g, ctx.input(2)), ctx.alpha) if ctx.needs_input_grad[1] else None,
              _scaled(mv(transpose(g, 0, 1), ctx.input(1)), ctx.alpha)
              if ctx.needs_input_grad[2] else None),
          saves=saves_inputs(1, 2), dtype=promote, saved=_factors_saved("vec1", "vec2"))
BADDBMM = Op("baddbmm", "BaddbmmBackward0", forward=_baddbmm_forward,
             backward=lambda ctx, g: (
                 _input_grad(ctx, g),
                 _scaled(bmm(g, transpose(ctx.input(2), 1, 2)), ctx.alpha)
                 if ctx.needs_input_grad[1] else None,
                 _scaled(bmm(transpose(ctx.input(1), 1, 2), g), ctx.alpha)
                 if ctx.needs_input_grad[2] else None),
             saves=saves_inputs(1, 2), dtype=promote, saved=_factors_saved("batch1", "batch2"))


def _addbmm_backward(ctx, g):
    b1, b2 = ctx.input(1), ctx.input(2)
    batch = b1.shape[0]
    expanded = expand(unsqueeze(g, 0), batch, *g.shape)
    return (_input_grad(ctx, g),
            _scaled(bmm(expanded, transpose(b2, 1, 2)), ctx.alpha) if ctx.needs_input_grad[1] else None,
            _scaled(bmm(transpose(b1, 1, 2), expanded), ctx.alpha) if ctx.needs_input_grad[2] else None)


ADDBMM = Op("addbmm", "AddbmmBackward0",
            forward=lambda a, b1, b2, beta, alpha: scaled_sum(
                a, lambda: np.matmul(b1, b2).sum(axis=0), beta, alpha, (b1.shape[1], b2.shape[2])),
            backward=_addbmm_backward, saves=saves_inputs(1, 2), dtype=promote,
            saved={**_factors_saved("batch1", "batch2"), "batch1_sym_argsize_0": _factor_size(1, 0),
                   "batch1_sym_argsize_1": _factor_size(1, 1), "batch2_sym_argsize_2": _factor_size(2, 2)})


def _check_same_dtype(what, *tensors):
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype is not first.dtype:
            raise RuntimeError(f"{what}: expected all tensors to have the same dtype, but got "
                               f"{TYPE_WORDS[first.dtype.name]} and {TYPE_WORDS[t.dtype.name]}")


def _check_dims(what, name, tensor, ndim):
    if tensor.ndim != ndim:
        kind = {1: "vector", 2: "matrix", 3: "3D tensor"}[ndim]
        raise RuntimeError(f"{what}: {name} must be a {kind}, got {tensor.ndim}-D tensor")


def _check_broadcast(what, input, shape):
    try:
        if np.broadcast_shapes(tuple(input.shape), shape) != shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"{what}: the input of shape {list(input.shape)} does not broadcast "
                           f"to the product's shape {list(shape)}") from None


@declare(method=True, inplace=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``."""
    _check_dims("addmv", "mat", mat, 2)
    _check_dims("addmv", "vec", vec, 1)
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0] if input.ndim else 1}), "
                           f"mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    _check_broadcast("addmv", input, (mat.shape[0],))
    return apply(ADDMV, input, mat, vec, beta=beta, alpha=alpha)


@declare(method=True, inplace=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _check_dims("addr", "vec1", vec1, 1)
    _check_dims("addr", "vec2", vec2, 1)
    _check_broadcast("addr", input, (vec1.shape[0], vec2.shape[0]))
    return apply(ADDR, input, vec1, vec2, beta=beta, alpha=alpha)


def _check_batches(what, batch1, batch2):
    _check_dims(what, "batch1", batch1, 3)
    _check_dims(what, "batch2", batch2, 3)
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"{what}: batch1 and batch2 must have same number of batches, got "
                           f"{batch1.shape[0]} and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
            f"{batch2.shape[1]}x{batch2.shape[2]})")


@declare(method=True, inplace=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)``, one matrix product per batch entry."""
    _check_batches("baddbmm", batch1, batch2)
    _check_same_dtype("baddbmm", input, batch1, batch2)
    _check_broadcast("baddbmm", input, (batch1.shape[0], batch1.shape[1], batch2.shape[2]))
    return apply(BADDBMM, input, batch1, batch2, beta=beta, alpha=alpha)


@declare(method=True, inplace=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    _check_batches("addbmm", batch1, batch2)
    _check_same_dtype("addbmm", input, batch1, batch2)
    _check_broadcast("addbmm", input, (batch1.shape[1], batch2.shape[2]))
    return apply(ADDBMM, input, batch1, batch2, beta=beta, alpha=alpha)


# ---- vdot, cross -------------------------------------------------------------------------------------

VDOT = Op("vdot", "VdotBackward0", forward=np.dot, saves=saves_inputs(0, 1), dtype=promote,
          backward=lambda ctx, g: (g * ctx.input(1) if ctx.needs_input_grad[0] else None,
                                   g * ctx.input(0) if ctx.needs_input_grad[1] else None),
                                   saved={"self": Input(0, needed_by=1), "other": Input(1, needed_by=0)})


@declare(method=True)
def vdot(input, other):
    """The dot product of two 1-D tensors (``dot``; gradviz has no complex numbers to
    conjugate)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                           f"[{other.shape[0]}] to have the same number of elements, but got "
                           f"{input.shape[0]} and {other.shape[0]} elements respectively")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"vdot : expected both vectors to have same dtype, but found "
                           f"{TYPE_WORDS[input.dtype.name]} and {TYPE_WORDS[other.dtype.name]}")
    return apply(VDOT, input, other)


def _cross_backward(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    return (linalg_cross(b, g, dim=ctx.dim) if ctx.needs_input_grad[0] else None,
            linalg_cross(g, a, dim=ctx.dim) if ctx.needs_input_grad[1] else None)


# each input is saved for the other's gradient, as PyTorch's (torch.cross without a dim
# saves the dim it chose, linalg.cross the dim as passed)
CROSS = Op("linalg_cross", "LinalgCrossBackward0",
           forward=lambda a, b, dim, dim_arg=None: np.cross(a, b, axis=dim),
           backward=_cross_backward, saves=saves_inputs(0, 1), dtype=promote,
           saved={"self": Input(0, needed_by=1), "other": Input(1, needed_by=0), "dim": passed("dim")})


def linalg_cross(input, other, *, dim=-1):
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (broadcast)."""
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. Got "
                           f"{input.ndim} and {other.ndim}")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    if tuple(input.shape) != shape:
        input = expand(input, *shape)
    if tuple(other.shape) != shape:
        other = expand(other, *shape)
    return apply(CROSS, input, other, dim=d, dim_arg=dim)


@declare(method=True)
def cross(input, other, dim=None):
    """``torch.cross``: with no ``dim``, the first dim of length 3 (deprecated in PyTorch,
    which warns); else ``linalg.cross`` along ``dim``."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                      "either pass the dim explicitly or simply use torch.linalg.cross.\nThe "
                      "default value of dim will change to agree with that of linalg.cross in a "
                      "future release.", UserWarning, stacklevel=2)
        dim = next((d for d, size in enumerate(input.shape) if size == 3), -1)
    return linalg_cross(input, other, dim=dim)


# ---- composed products -----------------------------------------------------------------------

@declare(method=True)
def matrix_power(input, n):
    """``input`` multiplied by itself ``n`` times (``n == 0``: the identity; negative ``n``:
    powers of the inverse), by repeated squaring as PyTorch does."""
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but they "
                           f"are {input.shape[-2] if input.ndim >= 2 else 1} by "
                           f"{input.shape[-1] if input.ndim else 1} matrices")
    if n == 0:
        return expand(eye(input.shape[-1], dtype=input.dtype), *input.shape).clone()
    if n < 0:
        input, n = inverse(input), -n
    if n == 1:
        return input.clone()
    product = matmul if input.ndim > 2 else mm
    result, power = None, input
    while n:
        if n & 1:
            result = power if result is None else product(result, power)
        n >>= 1
        if n:
            power = product(power, power)
    return result


@declare(method=True)
def kron(input, other):
    """The Kronecker product: every entry of ``input`` times all of ``other``, laid out in
    blocks (a broadcasting product reshaped, ``UnsafeViewBackward0`` as in PyTorch)."""
    ndim = max(input.ndim, other.ndim)
    a = reshape(input, (1,) * (ndim - input.ndim) + tuple(input.shape))
    b = reshape(other, (1,) * (ndim - other.ndim) + tuple(other.shape))
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    interleaved_a = reshape(a, tuple(s for size in a_shape for s in (size, 1)))
    interleaved_b = reshape(b, tuple(s for size in b_shape for s in (1, size)))
    product = interleaved_a * interleaved_b
    return unsafe_view(product, *(x * y for x, y in zip(a_shape, b_shape)))


@declare()
def tensordot(a, b, dims=2):
    """Contract ``dims`` dims of ``a`` with dims of ``b``: the last ``dims`` of ``a`` with the
    first ``dims`` of ``b``, or the lists ``dims = (dims_a, dims_b)``; a matrix product of the
    permuted, flattened operands, as PyTorch computes it."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    dims_a = [_wrap_dim(d, a.ndim) for d in dims_a]
    dims_b = [_wrap_dim(d, b.ndim) for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} "
                               f"in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    size = 1
    for d in dims_a:
        size *= a.shape[d]
    rows = 1
    for d in free_a:
        rows *= a.shape[d]
    columns = 1
    for d in free_b:
        columns *= b.shape[d]
    left = reshape(permute(a, *(free_a + dims_a)), (rows, size))
    right = reshape(permute(b, *(dims_b + free_b)), (size, columns))
    return reshape(mm(left, right), tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


@declare(method=True)
def inner(input, other):
    """The sum of products over the last dims of both (a number times a tensor for 0-d)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"inner(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


# ---- slogdet, logdet -----------------------------------------------------------------------------

def _slogdet_forward(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.asarray(sign, dtype=a.dtype), np.asarray(logabsdet, dtype=a.dtype)


def _slogdet_backward(ctx, g_sign, g_logabsdet):
    """d log|det A| / dA = inverse(A)^T; the sign is piecewise constant (no gradient)."""
    if g_logabsdet is None:
        return (None,)
    a = ctx.input(0)
    return (unsqueeze(unsqueeze(g_logabsdet, -1), -1) * transpose(inverse(a), -2, -1),)


SLOGDET = Op("slogdet", "LinalgSlogdetBackward0", forward=_slogdet_forward,
             backward=_slogdet_backward, saves=saves_inputs(0),
             saved={"A": Input(0), "LU": NO_LU, "pivots": NO_LU,
                    "sign": NotKept("gradviz computes the sign again from A in the backward")})


class _SignLogAbsDet(tuple):
    """``(sign, logabsdet)`` with attribute access, as ``torch.return_types.slogdet``."""

    __slots__ = ()

    def __new__(cls, sign, logabsdet):
        return super().__new__(cls, (sign, logabsdet))

    @property
    def sign(self):
        return self[0]

    @property
    def logabsdet(self):
        return self[1]

    def __repr__(self) -> str:
        return (f"gradviz.return_types.{type(self).__name__}(\nsign={self[0]!r},\n"
                f"logabsdet={self[1]!r})")


# ``torch.slogdet`` and ``torch.linalg.slogdet`` name their results differently
_SLOGDET_TYPES = {name: type(name, (_SignLogAbsDet,), {"__slots__": (),
                                                        "__module__": "gradviz.return_types"})
                  for name in ("slogdet", "linalg_slogdet")}


@declare(method=True)
def slogdet(input):
    """``(sign, log|det|)`` of a (batch of) square matrices: the determinant without overflow."""
    _check_floating_matrix("linalg.slogdet", input)
    _check_square("linalg.slogdet", input)
    sign, logabsdet = apply(SLOGDET, input)
    return _SLOGDET_TYPES["slogdet"](sign, logabsdet)


def linalg_slogdet(A):
    """``torch.linalg.slogdet``: :func:`slogdet`, its result named ``linalg_slogdet``."""
    return _SLOGDET_TYPES["linalg_slogdet"](*slogdet(A))


@declare(method=True)
def logdet(input):
    """``log(det(input))``: NaN where the determinant is negative (``WhereBackward0``, as
    PyTorch composes it)."""
    sign, logabsdet = slogdet(input)
    return where(eq(sign, -1), float("nan"), logabsdet)


__all__ = exports(globals())

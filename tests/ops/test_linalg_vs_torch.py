"""``gradviz.linalg`` and the matrix functions against torch 2.13: values, first derivatives
and second derivatives (torch's double backward, and gradviz's gradgradcheck by finite
differences), float32 and float64, batched, and errors (type and key phrase).

Factorizations are defined up to signs (a column of Q with its row of R, an eigenvector, a
singular-vector pair), so they are compared through quantities invariant to those signs, as
torch's own tests do: reconstructions, elementwise squares of the factors, ``V diag(w) V^T``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import gradviz

TOLERANCES = {"float64": (1e-7, 1e-9), "float32": (2e-4, 2e-5)}


def rng(seed=0):
    return np.random.default_rng(seed)


def general(*shape, seed=0):
    """Well-conditioned square matrices: random plus n times the identity."""
    a = rng(seed).standard_normal(shape)
    return a + shape[-1] * np.eye(shape[-1])


def spd(*shape, seed=0):
    """Symmetric positive-definite matrices with well-separated eigenvalues."""
    x = rng(seed).standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def symmetric(*shape, seed=0):
    x = rng(seed).standard_normal(shape)
    return x + np.swapaxes(x, -1, -2)


def plain(*shape, seed=0):
    return rng(seed).standard_normal(shape)


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _flat(r)]
    return [result]


def _array(t):
    return t.detach().numpy()


def run(m, fn, arrays, dtype, second):
    """``fn(m, *tensors)``: its outputs, the gradients of a weighted sum of them, and the
    gradients of the squared norm of those gradients (double backward)."""
    tensors = [m.tensor(a, dtype=getattr(m, dtype), requires_grad=True) for a in arrays]
    outputs = [o for o in _flat(fn(m, *tensors))]
    record = {"outputs": [_array(o) for o in outputs]}
    differentiable = [o for o in outputs if o.requires_grad]
    weights = rng(11)
    loss = 0
    for o in differentiable:
        w = m.tensor(weights.standard_normal(tuple(o.shape)), dtype=o.dtype)
        loss = loss + (o * w).sum() + (o * o).sum() * 0.1
    grads = m.autograd.grad(loss, tensors, create_graph=second, allow_unused=True)
    record["grads"] = [None if g is None else _array(g) for g in grads]
    if second:
        total = sum((g * g).sum() for g in grads if g is not None)
        seconds = m.autograd.grad(total, tensors, allow_unused=True)
        record["second"] = [None if g is None else _array(g) for g in seconds]
    return record


def compare(fn, *arrays, dtype="float64", second=True, scale=1.0):
    """``fn`` run in gradviz and in torch agree on outputs, gradients and second gradients."""
    rtol, atol = TOLERANCES[dtype]
    ours = run(gradviz, fn, arrays, dtype, second)
    theirs = run(torch, fn, arrays, dtype, second)
    for key in ("outputs", "grads", "second"):
        assert len(ours.get(key, [])) == len(theirs.get(key, [])), key
        for i, (a, b) in enumerate(zip(ours.get(key, []), theirs.get(key, []))):
            assert (a is None) == (b is None), f"{key} {i}"
            if a is None:
                continue
            assert a.shape == b.shape, f"{key} {i}: shape {a.shape} vs {b.shape}"
            assert a.dtype == b.dtype, f"{key} {i}: dtype {a.dtype} vs {b.dtype}"
            np.testing.assert_allclose(a, b, rtol=rtol * scale, atol=atol * scale,
                                       err_msg=f"{key} {i}")
    return ours


def gradgrad(fn, *arrays):
    """gradviz's own gradcheck and gradgradcheck (finite differences, float64)."""
    tensors = [gradviz.tensor(a, dtype=gradviz.float64, requires_grad=True) for a in arrays]

    def outputs(*xs):
        return tuple(o for o in _flat(fn(gradviz, *xs)) if o.dtype.is_floating_point)

    assert gradviz.autograd.gradcheck(outputs, tensors)
    assert gradviz.autograd.gradgradcheck(outputs, tensors)


def raises_like_torch(fn, kind, phrase):
    """``fn(m)`` raises ``kind`` with ``phrase`` in both libraries."""
    for m in (torch, gradviz):
        with pytest.raises(kind) as info:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(m)
        assert phrase in str(info.value).replace("gradviz", "torch"), (m.__name__, info.value)


DTYPES = ["float64", "float32"]


# ---- norms ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord, dim, keepdim", [
    (2, None, False), (1, -1, False), (3, 1, True), (math.inf, (0, 2), False),
    (-math.inf, -1, True), (0, None, False), (-1, 1, False), (0.5, None, True)])
def test_vector_norm(dtype, ord, dim, keepdim):
    x = plain(2, 3, 4) + 0.1
    compare(lambda m, x: m.linalg.vector_norm(x, ord, dim, keepdim), x, dtype=dtype,
            second=ord not in (0, math.inf, -math.inf))


def test_vector_norm_dtype_and_errors():
    compare(lambda m, x: m.linalg.vector_norm(x, dtype=m.float64), plain(3, 4), dtype="float32",
            second=False)
    raises_like_torch(lambda m: m.linalg.vector_norm(m.ones(3), "fro"), TypeError,
                      "argument 'ord' (position 2) must be Number, not str")
    raises_like_torch(lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.long)), RuntimeError,
                      "linalg.vector_norm: Expected a floating point or complex tensor as input")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm(dtype, ord, keepdim):
    # distinct column and row sums: the max/min picks one, as torch's
    a = plain(2, 3, 4) + np.arange(4) * 0.3 + np.arange(3)[:, None] * 0.7
    compare(lambda m, a: m.linalg.matrix_norm(a, ord, keepdim=keepdim), a, dtype=dtype,
            scale=10 if ord in ("nuc", 2, -2) else 1)


def test_matrix_norm_other_dims_and_errors():
    a = plain(3, 2, 4) + np.arange(4) * 0.3
    for ord in ("fro", 1, math.inf, 2):
        compare(lambda m, a: m.linalg.matrix_norm(a, ord, dim=(2, 0)), a)
        compare(lambda m, a: m.linalg.matrix_norm(a, ord, dim=(0, -1), keepdim=True), a)
    raises_like_torch(lambda m: m.linalg.matrix_norm(m.ones(3, 3), 3), RuntimeError,
                      "linalg.matrix_norm: Order 3 not supported.")
    raises_like_torch(lambda m: m.linalg.matrix_norm(m.ones(3)), RuntimeError,
                      "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")


@pytest.mark.parametrize("args", [
    dict(), dict(ord=1), dict(ord="fro"), dict(ord=math.inf), dict(dim=1), dict(dim=(0, 1)),
    dict(ord=2, dim=(1, 0), keepdim=True), dict(ord=3, dim=0)])
def test_linalg_norm(args):
    a = plain(3, 4) + np.arange(4) * 0.3
    compare(lambda m, a: m.linalg.norm(a, **args), a)


def test_linalg_norm_vector_and_errors():
    compare(lambda m, x: m.linalg.norm(x, 3), plain(5))
    compare(lambda m, x: m.linalg.norm(x), plain(2, 3, 4))
    raises_like_torch(lambda m: m.linalg.norm(m.ones(2, 2, 2), 2), RuntimeError,
                      "linalg.norm: If dim is not specified but ord is, the input must be 1D or "
                      "2D. Got 3D.")
    raises_like_torch(lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=(0, 1, 2)), RuntimeError,
                      "linalg.norm: If dim is specified, it must be of length 1 or 2. Got [0, 1, 2]")
    raises_like_torch(lambda m: m.linalg.norm(m.ones(3), "fro"), RuntimeError,
                      "The input tensor A must have at least 2 dimensions.")


# ---- inverses, determinants, solvers -------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_inv_det_slogdet(dtype, shape):
    a = general(*shape)
    compare(lambda m, a: m.linalg.inv(a), a, dtype=dtype)
    compare(lambda m, a: m.linalg.inv_ex(a), a, dtype=dtype)
    compare(lambda m, a: m.linalg.det(a), a, dtype=dtype)
    compare(lambda m, a: m.linalg.slogdet(a), a - 2 * shape[-1] * np.eye(shape[-1]), dtype=dtype)


def test_inv_ex_singular_and_errors():
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
    ours = gradviz.linalg.inv_ex(gradviz.tensor(singular))
    theirs = torch.linalg.inv_ex(torch.tensor(singular))
    assert type(ours).__name__ == type(theirs).__name__ == "linalg_inv_ex"
    np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
    assert ours.info.dtype == gradviz.int32
    np.testing.assert_allclose(ours.inverse.numpy()[1], theirs.inverse.numpy()[1])
    raises_like_torch(lambda m: m.linalg.inv_ex(m.zeros(2, 2), check_errors=True),
                      m_linalg_error(), "linalg.inv_ex: The diagonal element 1 is zero")
    raises_like_torch(lambda m: m.linalg.inv(m.tensor([[1.0, 2.0], [2.0, 4.0]])), RuntimeError,
                      "linalg.inv: The diagonal element 2 is zero, the inversion could not be "
                      "completed because the input matrix is singular.")
    raises_like_torch(lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.inv: Expected a floating point or complex tensor as input. Got Long")
    raises_like_torch(lambda m: m.linalg.det(m.ones(2, 3)), RuntimeError,
                      "linalg.det: A must be batches of square matrices, but they are 2 by 3 "
                      "matrices")
    for m in (torch, gradviz):
        assert issubclass(m.linalg.LinAlgError, RuntimeError)
        with pytest.raises(m.linalg.LinAlgError):
            m.linalg.inv(m.zeros(2, 2))


def m_linalg_error():
    return RuntimeError  # both LinAlgErrors are RuntimeErrors; the class is checked above


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve(dtype):
    compare(lambda m, a, b: m.linalg.solve(a, b), general(3, 3), plain(3, 2), dtype=dtype)
    compare(lambda m, a, b: m.linalg.solve(a, b), general(2, 3, 3), plain(3), dtype=dtype)
    compare(lambda m, a, b: m.linalg.solve(a, b), general(2, 3, 3), plain(2, 3), dtype=dtype)
    compare(lambda m, a, b: m.linalg.solve(a, b), general(2, 1, 3, 3), plain(4, 3, 2),
            dtype=dtype)
    compare(lambda m, a, b: m.linalg.solve(a, b, left=False), general(3, 3), plain(2, 3),
            dtype=dtype)
    compare(lambda m, a, b: m.linalg.solve(a, b, left=False), general(2, 1, 3, 3), plain(4, 2, 3),
            dtype=dtype)
    compare(lambda m, a, b: m.linalg.lstsq(a, b).solution, plain(2, 6, 3), plain(2, 6),
            dtype=dtype, scale=20)


def test_solve_errors():
    raises_like_torch(lambda m: m.linalg.solve(m.zeros(2, 2), m.ones(2)), RuntimeError,
                      "linalg.solve: The solver failed because the input matrix is singular.")
    raises_like_torch(lambda m: m.linalg.solve(m.eye(3), m.ones(4, 2)), RuntimeError,
                      "linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                      "(3x3 and 4x2)")
    raises_like_torch(lambda m: m.linalg.solve(m.ones(2, 3), m.ones(2, 2)), RuntimeError,
                      "linalg.solve: A must be batches of square matrices, but they are 2 by 3 "
                      "matrices")
    with pytest.raises(gradviz.linalg.LinAlgError):
        gradviz.linalg.solve(gradviz.zeros(2, 2), gradviz.ones(2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular(dtype, upper, left, unitriangular):
    a = general(2, 3, 3)
    b = plain(2, 3, 4) if left else plain(2, 4, 3)
    compare(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=upper, left=left,
                                                      unitriangular=unitriangular), a, b,
            dtype=dtype)


def test_triangular_solve_legacy_and_errors():
    compare(lambda m, b, a: m.triangular_solve(b, a), plain(3, 2), general(3, 3))
    compare(lambda m, b, a: m.triangular_solve(b, a, upper=False, transpose=True), plain(3, 2),
            general(3, 3))
    compare(lambda m, b, a: b.triangular_solve(a, unitriangular=True), plain(2, 3, 2),
            general(2, 3, 3))
    assert type(gradviz.triangular_solve(gradviz.ones(2, 1), gradviz.eye(2))).__name__ == \
        "triangular_solve"
    raises_like_torch(lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(2, 2), upper=True),
                      RuntimeError, "linalg.solve_triangular: Incompatible shapes of A and B for "
                      "the equation AX = B (3x3 and 2x2)")
    raises_like_torch(lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(3, 2)), TypeError,
                      "upper")


# ---- products ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_products(dtype):
    compare(lambda m, x, y: m.linalg.vecdot(x, y), plain(3, 4), plain(4), dtype=dtype)
    compare(lambda m, x, y: m.linalg.vecdot(x, y, dim=0), plain(3, 4), plain(3, 1), dtype=dtype)
    compare(lambda m, a, b: m.linalg.cross(a, b), plain(2, 3), plain(2, 3), dtype=dtype)
    compare(lambda m, a: m.linalg.matrix_power(a, -2), general(2, 3, 3), dtype=dtype)
    compare(lambda m, a: m.linalg.diagonal(a, offset=1), plain(2, 3, 4), dtype=dtype)
    compare(lambda m, a: m.linalg.diagonal(a, dim1=0, dim2=2), plain(2, 3, 4), dtype=dtype)


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4, 2)], [(4,), (4, 5), (5,)], [(2, 9), (9, 3), (3, 7)], [(8, 2), (2, 9), (9, 3)],
    [(5,), (5, 2), (2, 6), (6, 3), (3, 4)], [(2, 6), (6, 3), (3, 8), (8,)]])
def test_multi_dot(shapes):
    arrays = [plain(*s, seed=i) for i, s in enumerate(shapes)]
    compare(lambda m, *xs: m.linalg.multi_dot(xs), *arrays)
    compare(lambda m, *xs: m.linalg.multi_dot(list(xs)), *arrays, dtype="float32", second=False)


def test_chain_matmul_and_multi_dot_errors():
    arrays = [plain(2, 3), plain(3, 4, seed=1), plain(4, 2, seed=2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(lambda m, *xs: m.chain_matmul(*xs), *arrays)
        compare(lambda m, x: m.chain_matmul(x), arrays[0])
    raises_like_torch(lambda m: m.chain_matmul(m.ones(3, 3), m.ones(3)), RuntimeError,
                      "Tensor dimension is 1, expected 2 instead.")
    raises_like_torch(lambda m: m.linalg.multi_dot([m.ones(3, 3)]), RuntimeError,
                      "multi_dot(): expected at least 2 tensors but got 1")
    raises_like_torch(lambda m: m.linalg.multi_dot([m.ones(3, 3), m.ones(2, 2)]), RuntimeError,
                      "multi_dot(): tensors 0 and 1 with shapes [3, 3] and [2, 2] cannot be "
                      "multiplied")
    raises_like_torch(lambda m: m.linalg.multi_dot([m.ones(3, 3), m.ones(3), m.ones(3, 3)]),
                      RuntimeError, "multi_dot(): tensor 1 must be 2D but got 1D")
    raises_like_torch(lambda m: m.linalg.multi_dot([m.ones(2, 3, 3), m.ones(3, 3)]),
                      RuntimeError, "multi_dot(): the first tensor must be 1D or 2D but got 3D")
    raises_like_torch(lambda m: m.linalg.multi_dot([m.ones(3, 3), m.ones(3, 3).double()]),
                      RuntimeError, "multi_dot(): all tensors must have be the same dtype but "
                      "tensor 0 is float and tensor 1 double")
    raises_like_torch(lambda m: m.linalg.vecdot(m.ones(3), m.ones(3).double()), RuntimeError,
                      "linalg.vecdot: Expected x and y to have the same dtype, but found x of "
                      "type Float and y of type Double instead")


def test_deprecation_warnings_once():
    from gradviz._tensor import _WARNED

    for key, call, phrase in [
            ("chain_matmul", lambda m: m.chain_matmul(m.eye(2), m.eye(2)),
             "torch.chain_matmul is deprecated"),
            ("cholesky", lambda m: m.cholesky(m.eye(2)), "torch.cholesky is deprecated"),
            ("triangular_solve", lambda m: m.triangular_solve(m.eye(2), m.eye(2)),
             "torch.triangular_solve is deprecated"),
            ("qr", lambda m: m.qr(m.eye(2)), "torch.qr is deprecated")]:
        _WARNED.discard(key)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(gradviz)
            call(gradviz)
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1 and phrase in messages[0], messages


# ---- cholesky ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, shape, upper):
    compare(lambda m, a: m.linalg.cholesky(a, upper=upper), spd(*shape), dtype=dtype)
    compare(lambda m, a: m.linalg.cholesky_ex(a, upper=upper), spd(*shape), dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(lambda m, a: m.cholesky(a, upper), spd(*shape), dtype=dtype)
        compare(lambda m, a: a.cholesky(upper=upper), spd(*shape), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve(dtype, upper):
    # the factor given as a (full) matrix: torch's gradient is not kept on its triangle
    factor = np.linalg.cholesky(spd(2, 3, 3))
    factor = np.swapaxes(factor, -1, -2) if upper else factor
    compare(lambda m, b, f: m.cholesky_solve(b, f, upper), plain(2, 3, 2), factor, dtype=dtype)
    compare(lambda m, b, f: b.cholesky_solve(f, upper=upper), plain(3, 4), factor[0],
            dtype=dtype)


def test_cholesky_errors():
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])
    raises_like_torch(lambda m: m.linalg.cholesky(m.tensor(not_pd)), RuntimeError,
                      "linalg.cholesky: The factorization could not be completed because the "
                      "input is not positive-definite (the leading minor of order 2 is not "
                      "positive-definite).")
    raises_like_torch(lambda m: m.linalg.cholesky_ex(-m.eye(2), check_errors=True), RuntimeError,
                      "linalg.cholesky_ex: The factorization could not be completed because the "
                      "input is not positive-definite (the leading minor of order 1")
    raises_like_torch(lambda m: m.linalg.cholesky(m.ones(2, 3)), RuntimeError,
                      "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 "
                      "matrices")
    raises_like_torch(lambda m: m.cholesky_solve(m.ones(3, 2), m.eye(4)), RuntimeError,
                      "Incompatible matrix sizes for cholesky_solve: each A matrix is 4 by 4 but "
                      "each b matrix is 3 by 2")
    batch = np.stack([spd(3, 3), -np.eye(3), spd(3, 3, seed=1)])
    ours = gradviz.linalg.cholesky_ex(gradviz.tensor(batch))
    theirs = torch.linalg.cholesky_ex(torch.tensor(batch))
    np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
    assert type(ours).__name__ == "linalg_cholesky_ex" and ours.info.dtype == gradviz.int32
    with pytest.raises(gradviz.linalg.LinAlgError):
        gradviz.linalg.cholesky(gradviz.tensor(not_pd))


# ---- qr, eigh, svd ------------------------------------------------------------------------------

def qr_invariants(m, a, mode="reduced"):
    Q, R = m.linalg.qr(a, mode)
    return [Q @ R, Q * Q, R * R]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 5, 3), (3, 5), (2, 3, 5)])
def test_qr(dtype, shape):
    compare(lambda m, a: qr_invariants(m, a), plain(*shape), dtype=dtype, scale=5)


def test_qr_modes_and_errors():
    a = plain(4, 3)
    compare(lambda m, a: qr_invariants(m, a, "complete"), plain(3, 5))
    for mode in ("complete", "r"):
        ours, theirs = gradviz.linalg.qr(gradviz.tensor(a), mode), torch.linalg.qr(
            torch.tensor(a), mode)
        assert tuple(ours.Q.shape) == tuple(theirs.Q.shape)
        np.testing.assert_allclose(np.abs(ours.R.numpy()), np.abs(theirs.R.numpy()), atol=1e-12)
    np.testing.assert_allclose(np.abs(gradviz.qr(gradviz.tensor(a), some=False).Q.numpy()),
                               np.abs(torch.qr(torch.tensor(a), some=False).Q.numpy()))
    assert type(gradviz.linalg.qr(gradviz.tensor(a))).__name__ == "linalg_qr"
    assert type(gradviz.tensor(a).qr()).__name__ == "qr"
    raises_like_torch(lambda m: m.linalg.qr(m.ones(3, 3), mode="x"), RuntimeError,
                      "qr received unrecognized mode 'x' but expected one of 'reduced' "
                      "(default), 'r', or 'complete'")
    raises_like_torch(lambda m: m.linalg.qr(m.ones(3)), RuntimeError,
                      "linalg.qr: The input tensor A must have at least 2 dimensions.")
    raises_like_torch(
        lambda m: m.linalg.qr(m.tensor(a, requires_grad=True), mode="r").R.sum().backward(),
        RuntimeError, "The derivative of linalg.qr depends on Q, which is not computed when "
        "mode='r'.")
    raises_like_torch(
        lambda m: m.linalg.qr(m.tensor(a, requires_grad=True), "complete").Q.sum().backward(),
        RuntimeError, "The QR decomposition is not differentiable when mode='complete' and "
        "nrows > ncols.")


def eigh_invariants(m, a, UPLO="L"):
    L, V = m.linalg.eigh(a, UPLO)
    w = m.tensor([0.5, -1.0, 2.0, 0.3][:a.shape[-1]], dtype=a.dtype)
    return [L, V * V, (V * w) @ V.mT]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh(dtype, shape, UPLO):
    compare(lambda m, a: eigh_invariants(m, a, UPLO), symmetric(*shape), dtype=dtype, scale=10)
    compare(lambda m, a: m.linalg.eigvalsh(a, UPLO), symmetric(*shape), dtype=dtype, scale=10)
    # a non-symmetric input: only the UPLO triangle is read, the gradient is torch's
    compare(lambda m, a: m.linalg.eigvalsh(a, UPLO), plain(*shape), dtype=dtype, scale=10,
            second=False)


def test_eigh_errors():
    raises_like_torch(lambda m: m.linalg.eigh(m.eye(3), UPLO="X"), RuntimeError,
                      "Expected UPLO argument to be 'L' or 'U', but got X")
    raises_like_torch(lambda m: m.linalg.eigh(m.ones(2, 3)), RuntimeError,
                      "linalg.eigh: A must be batches of square matrices, but they are 2 by 3 "
                      "matrices")
    assert type(gradviz.linalg.eigh(gradviz.eye(2))).__name__ == "linalg_eigh"


def svd_invariants(m, a, full_matrices=False):
    U, S, Vh = m.linalg.svd(a, full_matrices=full_matrices)
    k = S.shape[-1]
    return [S, U[..., :k] * U[..., :k], Vh[..., :k, :] * Vh[..., :k, :],
            (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 5)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(dtype, shape, full_matrices):
    compare(lambda m, a: svd_invariants(m, a, full_matrices), plain(*shape), dtype=dtype,
            scale=20)
    compare(lambda m, a: m.linalg.svdvals(a), plain(*shape), dtype=dtype, scale=10)


def test_legacy_svd():
    a = plain(5, 3)

    def legacy(m, a, some=True):
        U, S, V = m.svd(a, some)
        return [S, U[:, :3] * U[:, :3], V * V, (U[:, :3] * S) @ V.mT]

    compare(legacy, a)
    compare(lambda m, a: legacy(m, a, False), a)
    compare(lambda m, a: m.svd(a, compute_uv=False), a)
    compare(lambda m, a: legacy(m, a.mT), a)
    result = gradviz.tensor(a).svd()
    assert type(result).__name__ == "svd" and tuple(result.V.shape) == (3, 3)
    full = gradviz.linalg.svd(gradviz.tensor(a))
    assert type(full).__name__ == "linalg_svd" and tuple(full.U.shape) == (5, 5)
    raises_like_torch(lambda m: m.linalg.svd(m.ones(3)), RuntimeError,
                      "linalg.svd: The input tensor A must have at least 2 dimensions.")


# ---- pinv, lstsq, matrix_rank -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (2, 3, 5)])
def test_pinv(dtype, shape):
    compare(lambda m, a: m.linalg.pinv(a), plain(*shape), dtype=dtype, scale=20)
    compare(lambda m, a: m.pinverse(a), plain(*shape), dtype=dtype, scale=20)
    compare(lambda m, a: a.pinverse(), plain(*shape), dtype=dtype, scale=20, second=False)


def test_pinv_rank_deficient_hermitian_and_errors():
    low_rank = plain(4, 2) @ plain(2, 4, seed=1)
    compare(lambda m, a: m.linalg.pinv(a), low_rank, second=False, scale=100)
    compare(lambda m, a: m.linalg.pinv(a, hermitian=True), spd(3, 3), scale=10)
    compare(lambda m, a: m.linalg.pinv(a, atol=0.5), low_rank, second=False, scale=100)
    raises_like_torch(lambda m: m.linalg.pinv(m.ones(3)), RuntimeError,
                      "linalg.pinv(Float{[3]}): expected a tensor with 2 or more dimensions of "
                      "float, double, cfloat or cdouble types")


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq(dtype):
    compare(lambda m, a, b: m.linalg.lstsq(a, b).solution, plain(6, 3), plain(6, 2),
            dtype=dtype, scale=20)
    compare(lambda m, a, b: m.linalg.lstsq(a, b).solution, plain(2, 6, 3), plain(2, 6, 2),
            dtype=dtype, scale=20)
    compare(lambda m, a, b: m.linalg.lstsq(a, b).solution, plain(3, 3) + 3 * np.eye(3),
            plain(3), dtype=dtype, scale=20)


def test_lstsq_results_and_errors():
    a, b = plain(6, 3), plain(6, 2, seed=1)
    ours = gradviz.linalg.lstsq(gradviz.tensor(a), gradviz.tensor(b))
    theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b))
    assert type(ours).__name__ == "linalg_lstsq"
    for x, y in zip(ours, theirs):
        assert tuple(x.shape) == tuple(y.shape) and str(x.dtype).split('.')[-1] == str(y.dtype).split('.')[-1]
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-9, atol=1e-12)
    for driver in ("gelsd", "gelss"):
        ours = gradviz.linalg.lstsq(gradviz.tensor(a), gradviz.tensor(b), driver=driver)
        theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        for x, y in zip(ours, theirs):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-9, atol=1e-12)
    raises_like_torch(lambda m: m.linalg.lstsq(m.ones(3, 3), m.ones(4, 2)), RuntimeError,
                      "torch.linalg.lstsq: input.size(-2) should match other.size(-2)")


def test_matrix_rank():
    cases = [plain(4, 2) @ plain(2, 5, seed=1), plain(3, 3), np.zeros((2, 2)),
             np.stack([np.eye(3), np.diag([1.0, 1.0, 0.0])])]
    for a in cases:
        for kwargs in ({}, {"atol": 0.5}, {"rtol": 0.3}, {"hermitian": True}):
            x = a @ np.swapaxes(a, -1, -2) if kwargs.get("hermitian") else a
            ours = gradviz.linalg.matrix_rank(gradviz.tensor(x), **kwargs)
            theirs = torch.linalg.matrix_rank(torch.tensor(x), **kwargs)
            assert ours.dtype == gradviz.int64
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# ---- second derivatives by finite differences (gradviz's gradgradcheck) ---------------------------

@pytest.mark.parametrize("name, fn, arrays", [
    ("inv", lambda m, a: m.linalg.inv(a), [general(2, 3, 3)]),
    ("solve", lambda m, a, b: m.linalg.solve(a, b), [general(3, 3), plain(3, 2)]),
    ("solve_triangular", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
     [general(3, 3), plain(3, 2)]),
    ("cholesky", lambda m, a: m.linalg.cholesky(a @ a.mT), [general(3, 3)]),
    # through tril: the forward reads the factor's triangle, torch's gradient is not kept on it
    ("cholesky_solve", lambda m, b, f: m.cholesky_solve(b, f.tril()), [plain(3, 2),
                                                               np.linalg.cholesky(spd(3, 3))]),
    ("qr", lambda m, a: qr_invariants(m, a), [plain(4, 3)]),
    ("qr wide", lambda m, a: qr_invariants(m, a), [plain(2, 4)]),
    ("eigh", lambda m, a: eigh_invariants(m, a + a.mT), [plain(3, 3)]),
    ("svd", lambda m, a: svd_invariants(m, a), [plain(4, 3)]),
    ("svd wide", lambda m, a: svd_invariants(m, a), [plain(2, 4)]),
    ("pinv", lambda m, a: m.linalg.pinv(a), [plain(4, 3)]),
    ("matrix_norm nuc", lambda m, a: m.linalg.matrix_norm(a, "nuc"), [plain(3, 4)]),
    ("slogdet", lambda m, a: m.linalg.slogdet(a).logabsdet, [general(3, 3)]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradgradcheck(name, fn, arrays):
    gradgrad(fn, *arrays)


# ---- node names, edge shapes, more errors -------------------------------------------------------

def _node(result):
    first = _flat(result)[0]
    return first.grad_fn.name() if first.grad_fn is not None else None


@pytest.mark.parametrize("name, fn", [
    ("inv", lambda m, a, s, w: m.linalg.inv(a)),
    ("solve", lambda m, a, s, w: m.linalg.solve(a, w.mT)),
    ("solve vector", lambda m, a, s, w: m.linalg.solve(a, w[0])),
    ("solve left=False", lambda m, a, s, w: m.linalg.solve(a, w, left=False)),
    ("solve_triangular", lambda m, a, s, w: m.linalg.solve_triangular(a, w.mT, upper=True)),
    ("triangular_solve", lambda m, a, s, w: m.triangular_solve(w.mT, a)),
    ("cholesky", lambda m, a, s, w: m.linalg.cholesky(s)),
    ("cholesky upper", lambda m, a, s, w: m.linalg.cholesky(s, upper=True)),
    ("torch.cholesky", lambda m, a, s, w: m.cholesky(s, True)),
    ("cholesky_solve", lambda m, a, s, w: m.cholesky_solve(w.mT, s)),
    ("qr", lambda m, a, s, w: m.linalg.qr(w)),
    ("eigh", lambda m, a, s, w: m.linalg.eigh(s)),
    ("svd", lambda m, a, s, w: m.linalg.svd(w)),
    ("torch.svd", lambda m, a, s, w: m.svd(w)[2]),
    ("pinv", lambda m, a, s, w: m.linalg.pinv(w)),
    ("lstsq", lambda m, a, s, w: m.linalg.lstsq(w.mT, a)),
    ("norm", lambda m, a, s, w: m.linalg.norm(w)),
    ("vector_norm inf", lambda m, a, s, w: m.linalg.vector_norm(w, math.inf)),
    ("vector_norm -1", lambda m, a, s, w: m.linalg.vector_norm(w, -1)),
    ("matrix_norm 1", lambda m, a, s, w: m.linalg.matrix_norm(w, 1)),
    ("matrix_norm nuc", lambda m, a, s, w: m.linalg.matrix_norm(w, "nuc")),
    ("multi_dot", lambda m, a, s, w: m.linalg.multi_dot([w, a, w.mT])),
    ("vecdot", lambda m, a, s, w: m.linalg.vecdot(w, w)),
    ("cond", lambda m, a, s, w: m.linalg.cond(a)),
    ("cond 1", lambda m, a, s, w: m.linalg.cond(a, 1)),
    ("solve_ex", lambda m, a, s, w: m.linalg.solve_ex(a, w[0])),
    ("cholesky_inverse", lambda m, a, s, w: m.cholesky_inverse(s)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_node_names(name, fn):
    arrays = (general(3, 3), spd(3, 3), plain(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        names = [_node(fn(m, *[m.tensor(a, requires_grad=True) for a in arrays]))
                 for m in (gradviz, torch)]
    assert names[0] == names[1]


@pytest.mark.parametrize("name, fn", [
    ("inv 0x0", lambda m: m.linalg.inv(m.zeros(0, 0))),
    ("det 0x0", lambda m: m.linalg.det(m.zeros(0, 0))),
    ("cholesky 0x0", lambda m: m.linalg.cholesky(m.zeros(0, 0))),
    ("inv_ex empty batch", lambda m: m.linalg.inv_ex(m.zeros(0, 2, 2))),
    ("qr 0x3", lambda m: m.linalg.qr(m.zeros(0, 3))),
    ("eigh empty batch", lambda m: m.linalg.eigh(m.zeros(0, 2, 2))),
    ("svd empty batch", lambda m: m.linalg.svd(m.zeros(0, 3, 2))),
    ("pinv 0x3", lambda m: m.linalg.pinv(m.zeros(0, 3))),
    ("matrix_rank 0x3", lambda m: m.linalg.matrix_rank(m.zeros(0, 3))),
    ("matrix_norm 2 of 0x3", lambda m: m.linalg.matrix_norm(m.zeros(0, 3), 2)),
    ("solve empty batch", lambda m: m.linalg.solve(m.zeros(0, 2, 2), m.zeros(0, 2))),
    ("lstsq empty batch", lambda m: m.linalg.lstsq(m.zeros(0, 3, 2), m.zeros(0, 3, 1)).solution),
    ("solve_triangular takes A's dtype", lambda m: m.linalg.solve_triangular(
        m.eye(2, dtype=m.float64), m.ones(2, 1), upper=True)),
    ("torch.norm nuc", lambda m: m.norm(m.tensor([[1.0, 2.0], [3.0, 4.0]]), "nuc")),
    ("rank with tensor atol", lambda m: m.linalg.matrix_rank(
        m.tensor([[[1.0, 0.0], [0.0, 0.2]], [[1.0, 0.0], [0.0, 0.05]]]), atol=m.tensor([0.1, 0.01]))),
    ("pinv with rcond", lambda m: m.linalg.pinv(m.tensor([[1.0, 0.0], [0.0, 1e-3]]), 0.01)),
    ("lstsq batched matrix b", lambda m: m.linalg.lstsq(m.tensor(plain(2, 6, 3)),
                                                        m.tensor(plain(1, 6, 2))).solution),
])
def test_edge_shapes_match_torch(name, fn):
    ours, theirs = _flat(fn(gradviz)), _flat(fn(torch))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape), name
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], name
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_norm_gradients_at_ties_zeros_and_order_zero():
    tied = np.array([[1.0, -3.0, 3.0, 0.5], [0.0, 2.0, -1.0, 0.0]])
    for ord in (math.inf, -math.inf, -1, -0.5, 0):
        grads = []
        for m in (gradviz, torch):
            x = m.tensor(tied, requires_grad=True)
            m.linalg.vector_norm(x, ord, dim=1).sum().backward()
            grads.append(x.grad)
        if ord == 0:  # a count: torch leaves the gradient undefined
            assert grads[0] is None and grads[1] is None
        else:
            np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), err_msg=str(ord))


@pytest.mark.parametrize("args", [
    dict(b=(2, 3, 2), a=(3, 3)), dict(b=(3, 2), a=(2, 3, 3))])
def test_triangular_solve_batches_and_coefficient_gradient(args):
    # the cloned coefficient is differentiable: its gradient joins the solution's
    def fn(m, b, a):
        solution, coefficient = m.triangular_solve(b, a, upper=False)
        return [solution, coefficient * 2]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(fn, plain(*args["b"]), general(*args["a"]))


def test_cholesky_of_a_nonsymmetric_input_reads_one_triangle():
    # the lower one, or the upper one with upper=True (LAPACK's uplo), as torch
    a = spd(3, 3) + np.triu(plain(3, 3), 1)
    compare(lambda m, a: m.linalg.cholesky(a), a)
    compare(lambda m, a: m.linalg.cholesky(a, upper=True), a)


def test_more_errors():
    raises_like_torch(lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.float64), dtype=m.float32),
                      RuntimeError, "linalg.vector_norm: the dtype of the input (Double) should "
                      "be convertible without narrowing to the specified dtype (Float)")
    raises_like_torch(lambda m: m.linalg.vector_norm(m.zeros(0), -1), RuntimeError,
                      "linalg.vector_norm cannot compute the -1 norm on an empty tensor because "
                      "the operation does not have an identity")
    raises_like_torch(lambda m: m.linalg.vector_norm(m.zeros(2, 0), -math.inf, dim=-1),
                      RuntimeError, "linalg.vector_norm cannot compute the -inf norm on the "
                      "dimension -1because this dimension is empty")
    raises_like_torch(lambda m: m.linalg.eigh(m.ones(2, 2, dtype=m.long)), NotImplementedError,
                      "\"linalg_eigh_cpu\" not implemented for 'Long'")
    raises_like_torch(lambda m: m.linalg.eigvalsh(m.ones(3)), RuntimeError,
                      "linalg.eigh: The input tensor A must have at least 2 dimensions.")
    raises_like_torch(lambda m: m.linalg.matrix_rank(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "This function doesn't handle types other than float and double")
    raises_like_torch(lambda m: m.linalg.lstsq(m.eye(2), m.ones(2, 1, dtype=m.float64)),
                      RuntimeError, "torch.linalg.lstsq: Expected input and other to have the "
                      "same dtype, but got input's dtype Float and other's dtype Double")
    raises_like_torch(lambda m: m.linalg.lstsq(m.eye(2), m.ones(2, 1), driver="x"), RuntimeError,
                      "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, "
                      "gelsd, gelss)")
    raises_like_torch(lambda m: m.norm(m.ones(2, 2, 2), "nuc"), RuntimeError,
                      "linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2")
    raises_like_torch(lambda m: m.linalg.matrix_norm(m.ones(2, 2), dim=(0, 0)), RuntimeError,
                      "linalg.matrix_norm: dims must be different. Got (0, 0)")
    raises_like_torch(lambda m: m.linalg.inv_ex(m.ones(2, 3)), RuntimeError,
                      "linalg.inv: A must be batches of square matrices, but they are 2 by 3 "
                      "matrices")
    raises_like_torch(lambda m: m.cholesky(m.ones(2, 3)), RuntimeError,
                      "cholesky: A must be batches of square matrices, but they are 2 by 3")
    raises_like_torch(lambda m: m.cholesky(m.tensor([[1.0, 2.0], [2.0, 1.0]])), RuntimeError,
                      "cholesky: The factorization could not be completed because the input is "
                      "not positive-definite (the leading minor of order 2")
    raises_like_torch(lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2), upper=True),
                      RuntimeError, "linalg.solve_triangular: The input tensor B must have at "
                      "least 2 dimensions.")
    raises_like_torch(lambda m: m.triangular_solve(m.ones(2), m.eye(2)), RuntimeError,
                      "torch.triangular_solve: Expected b to have at least 2 dimensions, but it "
                      "has 1 dimensions instead")
    raises_like_torch(lambda m: m.cholesky_solve(m.ones(2), m.eye(2)), RuntimeError,
                      "b should have at least 2 dimensions, but has 1 dimensions instead")
    raises_like_torch(lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.float64)),
                      RuntimeError, "linalg.solve: Expected A and B to have the same dtype, but "
                      "found A of type Float and B of type Double instead")
    for legacy in (lambda m: m.triangular_solve(m.ones(2, 1), m.eye(2, dtype=m.float64)),
                   lambda m: m.cholesky_solve(m.ones(2, 1), m.eye(2, dtype=m.float64))):
        raises_like_torch(legacy, RuntimeError, "Expected b and A to have the same dtype, but "
                          "found b of type Float and A of type Double instead.")
    raises_like_torch(lambda m: m.linalg.svd(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.svd: Expected a floating point or complex tensor as input. Got Long")
    raises_like_torch(lambda m: m.linalg.pinv(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.pinv(Long{[2, 2]}): expected a tensor with 2 or more dimensions")
    raises_like_torch(lambda m: m.linalg.det(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.det: Expected a floating point or complex tensor as input. Got Long")
    raises_like_torch(lambda m: m.linalg.slogdet(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.slogdet: Expected a floating point or complex tensor as input.")


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"])
def test_cond(p):
    if p in (None, 2, -2, "nuc"):
        compare(lambda m, a: m.linalg.cond(a, p), general(2, 3, 3), scale=20)
    else:  # torch 2.13 cannot differentiate these (it modifies its saved inverse in place)
        a = general(2, 3, 3)
        ours = gradviz.linalg.cond(gradviz.tensor(a), p)
        np.testing.assert_allclose(ours.numpy(), torch.linalg.cond(torch.tensor(a), p).numpy(),
                                   rtol=1e-10)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.linalg.cond(torch.tensor(a, requires_grad=True), p).sum().backward()
        gradgrad(lambda m, a: m.linalg.cond(a, p), a)
    if p in (1, math.inf, "fro"):  # exactly singular: inf
        ours = gradviz.linalg.cond(gradviz.ones(2, 2), p)
        theirs = torch.linalg.cond(torch.ones(2, 2), p)
        assert math.isinf(ours.item()) and math.isinf(theirs.item())


def test_cond_solve_ex_cholesky_inverse_transposes():
    compare(lambda m, a: m.linalg.cond(a), plain(4, 3), scale=20)
    compare(lambda m, a, b: m.linalg.solve_ex(a, b), general(2, 3, 3), plain(2, 3))
    compare(lambda m, a, b: m.linalg.solve_ex(a, b, left=False), general(3, 3), plain(2, 3))
    for upper in (False, True):
        factor = np.linalg.cholesky(spd(2, 3, 3))
        factor = np.swapaxes(factor, -1, -2) if upper else factor
        compare(lambda m, f: m.cholesky_inverse(f, upper), factor)
        compare(lambda m, f: f.cholesky_inverse(upper), factor[0])
    gradgrad(lambda m, f: m.cholesky_inverse(f.tril()), np.linalg.cholesky(spd(3, 3)))
    compare(lambda m, a: [a.mH, a.adjoint(), a[0].H, m.adjoint(a)], plain(2, 3, 4))
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 1.0]]])
    ours = gradviz.linalg.solve_ex(gradviz.tensor(singular), gradviz.ones(2, 2,
                                                                          dtype=gradviz.float64))
    theirs = torch.linalg.solve_ex(torch.tensor(singular), torch.ones(2, 2, dtype=torch.float64))
    np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
    assert type(ours).__name__ == "linalg_solve_ex" and ours.info.dtype == gradviz.int32
    raises_like_torch(lambda m: m.linalg.solve_ex(m.zeros(2, 2), m.ones(2), check_errors=True),
                      RuntimeError, "torch.linalg.solve_ex: The solver failed because the input "
                      "matrix is singular.")
    raises_like_torch(lambda m: m.linalg.cond(m.ones(2, 3), 1), RuntimeError,
                      "linalg.cond(ord=1): A must be batches of square matrices, but they are 2 "
                      "by 3 matrices")
    raises_like_torch(lambda m: m.linalg.cond(m.ones(2, 2), 3), RuntimeError,
                      "linalg.cond got an invalid norm type: 3")
    raises_like_torch(lambda m: m.cholesky_inverse(m.ones(3)), RuntimeError,
                      "cholesky_inverse: The input tensor A must have at least 2 dimensions.")
    raises_like_torch(lambda m: m.ones(2, 2, 2).H, RuntimeError,
                      "tensor.H is only supported on matrices (2-D tensors). Got 3-D tensor. For "
                      "batches of matrices, consider using tensor.mH")
    raises_like_torch(lambda m: m.ones(3).mT, RuntimeError,
                      "tensor.mT is only supported on matrices or batches of matrices. Got 1-D "
                      "tensor.")
    raises_like_torch(lambda m: m.ones(3).mH, RuntimeError, "tensor.mH is only supported on")
    for fn in (lambda m: m.linalg.svd(m.full((2, 2), math.nan)),
               lambda m: m.linalg.svdvals(m.full((2, 2), math.nan)),
               lambda m: m.linalg.pinv(m.full((2, 2), math.nan)),
               lambda m: m.linalg.matrix_rank(m.full((2, 2), math.nan))):
        raises_like_torch(fn, RuntimeError, "linalg.svd: The algorithm failed to converge "
                          "because the input matrix contained non-finite values.")
    infinite = np.array([[[1.0, math.inf], [0.0, 1.0]], [[3.0, 0.0], [0.0, 2.0]]])
    for m in (gradviz, torch):  # an infinity: NaN singular values, not an error
        values = m.linalg.svdvals(m.tensor(infinite)).numpy()
        np.testing.assert_array_equal(np.isnan(values), [[True, True], [False, False]])


# ---- grad_fn._saved_<name> ----------------------------------------------------------------------

SAVED_CASES = {
    "inv": lambda m, a, s, b: m.linalg.inv(a),
    "solve": lambda m, a, s, b: m.linalg.solve(a, b.mT),
    "solve_triangular": lambda m, a, s, b: m.linalg.solve_triangular(a, b, upper=True,
                                                                       left=False),
    "triangular_solve": lambda m, a, s, b: m.triangular_solve(b.mT, a, transpose=True)[0],
    "cholesky": lambda m, a, s, b: m.linalg.cholesky(s, upper=True),
    "torch.cholesky": lambda m, a, s, b: m.cholesky(s),
    "cholesky_solve": lambda m, a, s, b: m.cholesky_solve(b.mT, s),
    "cholesky_inverse": lambda m, a, s, b: m.cholesky_inverse(s, upper=True),
    "qr": lambda m, a, s, b: m.linalg.qr(a)[0],
    "eigh": lambda m, a, s, b: m.linalg.eigh(s)[0],
    "svd": lambda m, a, s, b: m.linalg.svd(b)[1],
    "pinv": lambda m, a, s, b: m.linalg.pinv(b),
    "lstsq": lambda m, a, s, b: m.linalg.lstsq(a, b.mT).solution,
}


@pytest.mark.parametrize("case", sorted(SAVED_CASES))
def test_saved_names_and_values(case):
    arrays = (general(3, 3), spd(3, 3), plain(2, 3))
    nodes, inputs = [], []
    for m in (gradviz, torch):
        tensors = [m.tensor(a, requires_grad=True) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nodes.append(SAVED_CASES[case](m, *tensors).grad_fn)
        inputs.append(tensors)
    ours, theirs = nodes
    names = sorted(n for n in dir(theirs) if n.startswith("_saved_"))
    assert sorted(n for n in dir(ours) if n.startswith("_saved_")) == names
    for name in names:
        expected = getattr(theirs, name)
        if name[len("_saved_"):] in ("Q", "R", "eigenvalues", "eigenvectors", "U", "S", "Vh",
                                     "LU", "pivots"):
            with pytest.raises(AttributeError, match="gradviz does not keep"):
                getattr(ours, name)
            continue
        got = getattr(ours, name)
        if isinstance(expected, torch.Tensor):
            np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                                       rtol=1e-9, err_msg=name)
            for mine, torchs in zip(*inputs):
                assert (got is mine) == (expected is torchs), name
        else:
            assert got == expected, name


# ---- matrix_exp, LU, eig ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype, scale", [("float64", 0.1), ("float64", 1.0), ("float64", 2.5),
                                          ("float32", 0.1), ("float32", 1.0)])
def test_matrix_exp(dtype, scale):
    # scale 2.5: the 1-norm needs several squarings; gradients through exp of a 2n x 2n block
    # (in float32 its second derivatives, ~1e11, cancel: torch's own float32 and float64 differ)
    ours = compare(lambda m, a: m.linalg.matrix_exp(a), plain(3, 4, 4) * scale, dtype=dtype,
                   scale=10 * scale)
    assert len(ours["second"]) == 1
    compare(lambda m, a: m.matrix_exp(a), plain(2, 2) * scale, dtype=dtype, scale=10 * scale)
    compare(lambda m, a: a.matrix_exp(), plain(1, 1) * scale, dtype=dtype)


def test_matrix_exp_nodes_and_errors():
    for m in (torch, gradviz):
        A = m.tensor(plain(3, 3), requires_grad=True)
        E = m.linalg.matrix_exp(A)
        assert E.grad_fn.name() == "LinalgMatrixExpBackward0"
        assert E.grad_fn._saved_self is A
        assert m.linalg.matrix_exp(m.zeros(0, 0)).shape == (0, 0)
    raises_like_torch(lambda m: m.linalg.matrix_exp(m.ones(2, 3)), RuntimeError,
                      "linalg.matrix_exp: A must be batches of square matrices, but they are 2 "
                      "by 3 matrices")
    raises_like_torch(lambda m: m.linalg.matrix_exp(m.ones(2, 2, dtype=m.long)), RuntimeError,
                      "linalg.matrix_exp: Expected a floating point or complex tensor as input. "
                      "Got Long")


LU_SHAPES = [(4, 4), (2, 3, 3), (3, 5), (2, 5, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_and_lu(dtype, shape):
    a = plain(*shape, seed=3)
    ours = compare(lambda m, a: m.linalg.lu_factor(a), a, dtype=dtype)
    np.testing.assert_array_equal(ours["outputs"][1], torch.linalg.lu_factor(
        torch.tensor(a)).pivots.numpy())
    compare(lambda m, a: m.linalg.lu_factor_ex(a), a, dtype=dtype)
    compare(lambda m, a: m.linalg.lu(a), a, dtype=dtype)
    compare(lambda m, a: m.linalg.lu(a).L, a, dtype=dtype)  # only one factor used
    compare(lambda m, a: m.linalg.lu(a).U, a, dtype=dtype)
    compare(lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), a, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    b = plain(2, 4, 3) if left else plain(2, 3, 4)
    compare(lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, left=left,
                                              adjoint=adjoint), general(2, 4, 4), b, dtype=dtype)
    compare(lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, left=left,
                                              adjoint=adjoint), general(4, 4), b, dtype=dtype)


def test_lu_legacy_nodes_and_errors():
    a = plain(3, 3, seed=1)
    for m in (torch, gradviz):
        A = m.tensor(a, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            LU, pivots = m.lu(A)
            x = m.lu_solve(m.ones(3, 1, dtype=m.float64), LU, pivots)
        assert any("torch.lu is deprecated" in str(w.message).replace("gradviz", "torch")
                   for w in caught) or m is gradviz and "lu" in gradviz._tensor._WARNED
        assert LU.grad_fn.name() == "LinalgLuFactorExBackward0"
        assert x.grad_fn.name() == "LinalgLuSolveBackward0"
        assert pivots.dtype == m.int32 and not pivots.requires_grad
        P, L, U = m.linalg.lu(A)
        assert not P.requires_grad and L.grad_fn.name() == "LinalgLuBackward0"
        assert m.lu_unpack(LU, pivots).L.grad_fn.name() == "LuUnpackBackward0"
        assert len(A.lu(get_infos=True)) == 3
    singular = [[1.0, 2.0], [2.0, 4.0]]
    raises_like_torch(lambda m: m.linalg.lu_factor(m.tensor(singular)), RuntimeError,
                      "torch.linalg.lu_factor: U[2,2] is zero and using it on lu_solve would "
                      "result in a division by zero.")
    raises_like_torch(lambda m: m.linalg.lu_factor(m.zeros(3, 2, 2)), RuntimeError,
                      "torch.linalg.lu_factor: (Batch element 0): U[1,1] is zero")
    ours, theirs = (m.linalg.lu_factor_ex(m.tensor([[[2.0, 0.0], [0.0, 1.0]], singular]))
                    for m in (gradviz, torch))
    assert type(ours).__name__ == type(theirs).__name__ == "linalg_lu_factor_ex"
    np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
    np.testing.assert_allclose(ours.LU.numpy(), theirs.LU.numpy())
    raises_like_torch(lambda m: m.linalg.lu_factor(m.ones(2, 2), pivot=False), RuntimeError,
                      "linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    raises_like_torch(lambda m: m.linalg.lu_factor(m.ones(3)), RuntimeError,
                      "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: [3]")
    raises_like_torch(lambda m: m.linalg.lu_factor(m.ones(2, 2, dtype=m.long)),
                      NotImplementedError, "\"lu_cpu\" not implemented for 'Long'")
    raises_like_torch(lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(2)), m.ones(3, 1)),
                      RuntimeError, "linalg.lu_solve: Incompatible shapes of A and B for the "
                      "equation AX = B (2x2 and 3x1)")


def test_eig_of_a_real_matrix_needs_complex_tensors():
    # torch returns complex eigenvalues (here 0 and 5, as complex64); gradviz has no complex
    # dtype, so eig and eigvals say so instead of returning something else
    a = [[1.0, 2.0], [2.0, 4.0]]
    assert torch.linalg.eig(torch.tensor(a)).eigenvalues.dtype == torch.complex64
    assert torch.linalg.eigvals(torch.tensor(a)).dtype == torch.complex64
    for fn in (gradviz.linalg.eig, gradviz.linalg.eigvals):
        with pytest.raises(TypeError, match="gradviz has no complex tensors.*linalg.eigh"):
            fn(gradviz.tensor(a))

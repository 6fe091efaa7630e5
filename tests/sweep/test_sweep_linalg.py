"""Conformance sweep: teaching programs built on ``torch.linalg`` (least squares by the normal
equations, a Gaussian-process likelihood through a Cholesky factor, PCA by the SVD, weight
normalisation, Mahalanobis distances, power iteration against ``eigh``).

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Factorizations are defined up to signs, so
programs observe quantities that do not depend on them (reconstructions, projections onto a
subspace, squared components).
"""

from __future__ import annotations

import math

import pytest
from sweep_harness import check, node_name, registry

program = registry()


@program(1e-5, atol=1e-6)
def least_squares_by_normal_equations(torch, o):
    # fit y = 2 - 3x + 0.5x^2 with a polynomial design matrix, three ways
    x = torch.linspace(-1.0, 2.0, 12)
    y = 2.0 - 3.0 * x + 0.5 * x ** 2 + 0.1 * torch.sin(7 * x)
    X = torch.stack([torch.ones_like(x), x, x ** 2], dim=1).requires_grad_()
    gram = X.T @ X
    w = torch.linalg.solve(gram, X.T @ y.unsqueeze(1))
    L = torch.linalg.cholesky(gram)
    w_chol = torch.cholesky_solve(X.T @ y.unsqueeze(1), L)
    w_lstsq = torch.linalg.lstsq(X.detach(), y.unsqueeze(1)).solution
    residual = X @ w - y.unsqueeze(1)
    loss = (residual ** 2).mean()
    loss.backward()
    o("weights", [w, w_chol, w_lstsq, loss, node_name(w.grad_fn), node_name(L.grad_fn)])
    o("design grad", X.grad)
    o("condition", [torch.linalg.matrix_norm(gram, 2) * torch.linalg.matrix_norm(
        torch.linalg.inv(gram), 2), torch.linalg.matrix_rank(X.detach())])
    o.raises("shapes", lambda: torch.linalg.solve(gram, torch.ones(4, 1)),
             "Incompatible shapes of A and B for the equation AX = B (3x3 and 4x1)")


@program(1e-5, atol=1e-6)
def gaussian_process_log_likelihood(torch, o):
    # fit an RBF kernel's lengthscale and noise by gradient descent on the negative log marginal
    # likelihood, computed through a Cholesky factor
    x = torch.linspace(0.0, 5.0, 8).double()
    y = torch.sin(x) + 0.05 * torch.cos(3 * x)
    log_length = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    log_noise = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    n = x.shape[0]
    for step in range(4):
        sq = (x.unsqueeze(0) - x.unsqueeze(1)) ** 2
        K = torch.exp(-0.5 * sq / torch.exp(2 * log_length)) + torch.exp(log_noise) * torch.eye(
            n, dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(1), L)
        nll = (0.5 * (y.unsqueeze(1) * alpha).sum() + torch.log(torch.diagonal(L)).sum()
               + 0.5 * n * math.log(2 * math.pi))
        log_length.grad = log_noise.grad = None
        nll.backward()
        o(f"step {step}", [nll, log_length.grad, log_noise.grad])
        with torch.no_grad():
            log_length -= 0.05 * log_length.grad
            log_noise -= 0.05 * log_noise.grad
    sign, logabsdet = torch.linalg.slogdet(K.detach())
    o("logdet", [sign, logabsdet, 2 * torch.log(torch.diagonal(L.detach())).sum()])
    o.raises("not positive-definite",
             lambda: torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]])),
             "the leading minor of order 2 is not positive-definite")


@program(1e-4, atol=1e-5)
def pca_by_svd(torch, o):
    # principal components of a small 3-D cloud; the projection onto the top-2 subspace and
    # the explained variance do not depend on the singular vectors' signs
    t = torch.linspace(0.0, 1.0, 10)
    data = torch.stack([t * 3.0 + 0.1 * torch.sin(9 * t), t * 2.0 - 0.2 * torch.cos(5 * t),
                        0.3 * torch.sin(13 * t)], dim=1).requires_grad_()
    centered = data - data.mean(0)
    U, S, Vh = torch.linalg.svd(centered, full_matrices=False)
    explained = S ** 2 / (S ** 2).sum()
    top = Vh[:2]
    reconstruction = centered @ top.T @ top
    error = ((centered - reconstruction) ** 2).sum()
    error.backward()
    o("spectrum", [S, explained, node_name(S.grad_fn), torch.linalg.svdvals(centered)])
    o("subspace", [reconstruction, top.T @ top, (U[:, :2] * U[:, :2]).sum(1)])
    o("error", [error, data.grad, torch.linalg.matrix_norm(centered, "nuc")])
    o("pinv", torch.linalg.pinv(centered) @ centered)
    o("legacy shapes", [tuple(t.shape) for t in torch.svd(centered.detach(), some=False)])


@program(1e-5, atol=1e-6)
def weight_normalisation_with_linalg_norm(torch, o):
    # w = g * v / ||v|| (Salimans & Kingma), trained by plain SGD on a tiny regression
    x = torch.linspace(-1.0, 1.0, 6).view(3, 2)
    target = torch.tensor([[0.5, -1.0], [1.5, 0.0], [-0.5, 2.0]])
    v = torch.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    g = torch.tensor([[1.0], [2.0]], requires_grad=True)
    for step in range(3):
        w = g * v / torch.linalg.norm(v, dim=1, keepdim=True)
        loss = ((x @ w.T - target) ** 2).mean()
        v.grad = g.grad = None
        loss.backward()
        o(f"step {step}", [loss, v.grad, g.grad])
        with torch.no_grad():
            v -= 0.1 * v.grad
            g -= 0.1 * g.grad
    o("row norms", [torch.linalg.norm(w, dim=1), torch.linalg.vector_norm(v, ord=1, dim=1),
                    torch.linalg.vector_norm(v, ord=math.inf), torch.linalg.norm(v),
                    torch.linalg.matrix_norm(v, ord=1), torch.linalg.norm(v, "fro"),
                    node_name(torch.linalg.norm(v).grad_fn)])
    o.raises("ord for a 3-D input", lambda: torch.linalg.norm(torch.ones(2, 2, 2), 2),
             "If dim is not specified but ord is, the input must be 1D or 2D")


@program(1e-5, atol=1e-6)
def mahalanobis_distance(torch, o):
    # distances of query points to a sample's mean under its covariance: by a triangular solve
    # with the Cholesky factor, and by the inverse
    t = torch.linspace(0.0, 1.0, 9).double()
    sample = torch.stack([t + 0.3 * torch.sin(11 * t), 2 * t ** 2 - 0.1 * torch.cos(7 * t)], 1)
    mean = sample.mean(0)
    centered = sample - mean
    cov = centered.T @ centered / (sample.shape[0] - 1)
    queries = torch.tensor([[0.5, 0.5], [1.0, -0.2], [0.0, 1.5]], dtype=torch.float64,
                           requires_grad=True)
    diff = queries - mean
    L = torch.linalg.cholesky(cov)
    z = torch.linalg.solve_triangular(L, diff.T, upper=False)
    d2 = (z ** 2).sum(0)
    d2_inv = torch.linalg.vecdot(diff @ torch.linalg.inv(cov), diff)
    d2.sum().backward()
    o("distances", [d2, d2_inv, queries.grad, node_name(z.grad_fn)])
    o("factor", [L, torch.linalg.cholesky(cov, upper=True), torch.linalg.det(cov)])
    o.raises("singular covariance",
             lambda: torch.linalg.inv(torch.tensor([[1.0, 2.0], [2.0, 4.0]])),
             "The diagonal element 2 is zero, the inversion could not be completed")


@program(1e-4, atol=1e-5)
def power_iteration_against_eigh(torch, o):
    # the dominant eigenpair of a symmetric matrix by power iteration, checked against eigh;
    # the eigenvalue's gradient is v v^T either way
    A = torch.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 1.0]], dtype=torch.float64,
                     requires_grad=True)
    v = torch.ones(3, dtype=torch.float64)
    for _ in range(30):
        v = A @ v
        v = v / torch.linalg.vector_norm(v)
    rayleigh = v @ A @ v
    values, vectors = torch.linalg.eigh(A)
    top = vectors[:, -1]
    (grad_power,) = torch.autograd.grad(rayleigh, A, retain_graph=True)
    (grad_eigh,) = torch.autograd.grad(values[-1], A)
    o("eigenvalues", [rayleigh, values, torch.linalg.eigvalsh(A), node_name(values.grad_fn)])
    o("vectors", [torch.outer(top, top), torch.outer(v, v).detach()])
    o("gradients", [grad_power, grad_eigh])
    o("powers", [torch.linalg.matrix_power(A.detach(), 5), torch.linalg.multi_dot(
        [A.detach(), A.detach(), A.detach()]), torch.linalg.matrix_power(A.detach(), -1)])
    o.raises("UPLO", lambda: torch.linalg.eigh(A, UPLO="X"), "Expected UPLO argument to be")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)

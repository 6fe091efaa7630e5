"""Conformance sweep: leftovers of ``torch.linalg`` and ``torch.nn`` that teaching code meets
(a failed factorization in a batch, ``matrix_exp``, LU, ``affine_grid``, the orthogonal
parametrization, modules built under ``inference_mode``, ...).

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest

from sweep_harness import check, node_name, registry

program = registry()


@program
def singular_matrix_in_a_batch(torch, o):
    # a batch with one singular / one non-positive-definite matrix: the errors name it, the
    # _ex variants report it in info and still solve the good ones
    eye = torch.eye(2)
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    A = torch.stack([eye * 2, singular])
    o.raises("inv", lambda: torch.linalg.inv(A), "linalg.inv: (Batch element 1): The diagonal "
             "element 2 is zero, the inversion could not be completed")
    o.raises("inverse 3-d batch", lambda: torch.inverse(torch.stack([A, A]).flip(1)),
             "(Batch element 0): The diagonal element 2 is zero")
    o.raises("inv single", lambda: torch.linalg.inv(singular),
             "linalg.inv: The diagonal element 2 is zero")
    o.raises("solve", lambda: torch.linalg.solve(A, torch.ones(2, 2, 1)),
             "torch.linalg.solve: (Batch element 1): The solver failed because the input matrix "
             "is singular.")
    o.raises("solve broadcast B", lambda: torch.linalg.solve(A, torch.ones(3, 1, 2, 1)),
             "torch.linalg.solve: (Batch element 1): The solver failed")
    o.raises("solve batch of one", lambda: torch.linalg.solve(singular.expand(1, 2, 2),
                                                              torch.ones(3, 2, 1)),
             "torch.linalg.solve: (Batch element 0): The solver failed")
    o.raises("shape before singularity", lambda: torch.linalg.solve(A, torch.ones(3, 1, 2)),
             "Incompatible shapes of A and B for the equation AX = B (2x2 and 1x2)")
    o.raises("solve broadcast A", lambda: torch.linalg.solve(singular, torch.ones(3, 2, 1)),
             "torch.linalg.solve: The solver failed because the input matrix is singular.")
    o.raises("solve_ex check", lambda: torch.linalg.solve_ex(A, torch.ones(2, 2),
                                                             check_errors=True),
             "torch.linalg.solve_ex: (Batch element 1): The solver failed")
    o.raises("inv_ex check", lambda: torch.linalg.inv_ex(A, check_errors=True),
             "linalg.inv_ex: (Batch element 1): The diagonal element 2 is zero")
    P = torch.stack([eye, torch.tensor([[1.0, 2.0], [2.0, 1.0]]), eye * -1])
    o.raises("cholesky", lambda: torch.linalg.cholesky(P),
             "linalg.cholesky: (Batch element 1): The factorization could not be completed "
             "because the input is not positive-definite (the leading minor of order 2")
    o.raises("cholesky_ex check", lambda: torch.linalg.cholesky_ex(P, check_errors=True),
             "linalg.cholesky_ex: (Batch element 1): The factorization could not be completed")
    result, info = torch.linalg.solve_ex(A, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    o("solve_ex", [result[0], info])
    o("inv_ex", [torch.linalg.inv_ex(A).inverse[0], torch.linalg.inv_ex(A).info])
    o("cholesky_ex", [torch.linalg.cholesky_ex(P).L[0], torch.linalg.cholesky_ex(P).info])
    B = torch.ones(3, 2, 2, 1)
    o("solve_ex broadcast", [torch.linalg.solve_ex(A, B).result[:, 0], torch.linalg.solve_ex(
        A, B).info])


@program(1e-5, atol=1e-4)  # a second derivative that cancels to ~1e-6 in float32
def spatial_transformer_affine_grid(torch, o):
    # affine_grid is one node (AffineGridGeneratorBackward0) in 2-D and 3-D, both corner modes
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]],
                          [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], requires_grad=True)
    theta3 = (torch.arange(24.0).reshape(2, 3, 4) / 20 - 0.5).requires_grad_()
    for align in (False, True):
        grid = torch.nn.functional.affine_grid(theta, (2, 3, 4, 5), align_corners=align)
        weights = torch.linspace(-1.0, 1.0, grid.numel()).reshape(grid.shape)
        (g_theta,) = torch.autograd.grad((grid * weights).sum(), theta)
        o(f"2-d {align}", [grid, g_theta, node_name(grid.grad_fn), grid.grad_fn._saved_size,
                           grid.grad_fn._saved_align_corners])
        grid3 = torch.nn.functional.affine_grid(theta3, (2, 1, 2, 3, 4), align_corners=align)
        (g3,) = torch.autograd.grad((grid3 ** 2).sum(), theta3, create_graph=True)
        (gg3,) = torch.autograd.grad((g3 ** 2).sum(), theta3)
        o(f"3-d {align}", [grid3, g3, gg3, node_name(grid3.grad_fn)])
    o("one pixel", torch.nn.functional.affine_grid(theta, (2, 1, 1, 3), align_corners=False))
    # the spatial transformer: sample an image through the grid
    image = torch.arange(2 * 1 * 4 * 5.0).reshape(2, 1, 4, 5)
    grid = torch.nn.functional.affine_grid(theta, (2, 1, 4, 5), align_corners=False)
    out = torch.nn.functional.grid_sample(image, grid, align_corners=False)
    out.sum().backward()
    o("sampled", [out, theta.grad])
    o.raises("theta shape", lambda: torch.nn.functional.affine_grid(theta3, (2, 1, 4, 5),
                                                                    align_corners=False),
             "Expected a batch of 2D affine matrices of shape Nx2x3")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)

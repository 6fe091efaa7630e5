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


@program(1e-5, atol=1e-6)
def rotation_by_matrix_exp(torch, o):
    # exp of a skew-symmetric generator is a rotation; fit its angle by gradient descent
    angle = torch.tensor(0.3, requires_grad=True)
    target = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # a quarter turn
    generator = torch.tensor([[0.0, -1.0], [1.0, 0.0]])
    for step in range(5):
        R = torch.linalg.matrix_exp(angle * generator)
        loss = ((R - target) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            angle -= 0.2 * angle.grad
        angle.grad.zero_()
    o("fit", [R, loss, angle, node_name(R.grad_fn)])
    o("orthogonal", R.detach() @ R.detach().T)
    A = (torch.arange(9.0).reshape(3, 3) / 10).double().requires_grad_()
    E = torch.matrix_exp(A)
    (g,) = torch.autograd.grad(E.sum(), A, create_graph=True)
    (gg,) = torch.autograd.grad((g ** 2).sum(), A)
    o("second order", [E, g, gg, E.grad_fn._saved_self is A, A.matrix_exp()])
    o("det = exp(trace)", [torch.linalg.det(E), torch.exp(torch.trace(A))])
    o.raises("not square", lambda: torch.linalg.matrix_exp(torch.ones(2, 3)),
             "A must be batches of square matrices")


@program(1e-5, atol=1e-6)
def lu_factor_once_solve_many(torch, o):
    # factor once, solve for several right-hand sides; LU's pieces and their gradients
    A = torch.tensor([[2.0, 1.0, 1.0], [4.0, -6.0, 0.0], [-2.0, 7.0, 2.0]], requires_grad=True)
    LU, pivots = torch.linalg.lu_factor(A)
    B = torch.tensor([[5.0, 1.0], [-2.0, 0.0], [9.0, 1.0]])
    X = torch.linalg.lu_solve(LU, pivots, B)
    Xt = torch.linalg.lu_solve(LU, pivots, B, adjoint=True)
    Xr = torch.linalg.lu_solve(LU, pivots, B.T, left=False)
    o("solutions", [X, Xt, Xr, torch.linalg.solve(A, B), pivots])
    (X.sum() + (Xt ** 2).sum() + Xr.mean()).backward()
    o("grad", A.grad)
    P, L, U = torch.linalg.lu(A)
    o("P L U", [P, L, U, P @ L @ U, node_name(L.grad_fn), node_name(LU.grad_fn),
                node_name(X.grad_fn), X.grad_fn._saved_left, X.grad_fn._saved_adjoint])
    P2, L2, U2 = torch.lu_unpack(LU, pivots)
    o("unpacked", [P2, L2, U2, node_name(L2.grad_fn)])
    wide = torch.tensor([[1.0, 2.0, 3.0], [2.0, 3.0, 5.0]], requires_grad=True)
    LUw, piv_w = torch.linalg.lu_factor(wide)
    LUw.sum().backward()
    o("wide", [LUw, piv_w, wide.grad, torch.lu_unpack(LUw, piv_w).U.grad_fn
               ._saved_LU_data_sym_argsize_minus_1])
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    o("ex", list(torch.linalg.lu_factor_ex(singular)))
    o.raises("singular", lambda: torch.linalg.lu_factor(singular),
             "U[2,2] is zero and using it on lu_solve would result in a division by zero")
    o.warns("legacy", lambda: torch.lu(A), "torch.lu is deprecated in favor of")


@program(1e-4, atol=1e-5)
def orthogonal_recurrent_weight(torch, o):
    # an orthogonal recurrent matrix (all three maps), trained a few steps: it stays orthogonal
    start = torch.tensor([[0.5, -1.0, 0.2, 0.3], [1.0, 0.4, -0.6, 0.1],
                          [-0.3, 0.8, 0.9, -0.5], [0.2, 0.1, 0.7, 1.2]])
    x = torch.linspace(-1.0, 1.0, 8).reshape(2, 4)
    for orthogonal_map in ("matrix_exp", "cayley", "householder"):
        for trivial in (True, False):
            layer = torch.nn.Linear(4, 4, bias=False)
            with torch.no_grad():
                layer.weight.copy_(start)
            torch.nn.utils.parametrizations.orthogonal(layer, orthogonal_map=orthogonal_map,
                                                       use_trivialization=trivial)
            optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
            for step in range(3):
                optimizer.zero_grad()
                loss = ((layer(x) - 1.0) ** 2).mean()
                loss.backward()
                optimizer.step()
            W = layer.weight
            o(f"{orthogonal_map} {trivial}", [W, loss, W @ W.T, node_name(W.grad_fn),
                                               [n for n, _ in layer.named_parameters()]])
            if trivial or orthogonal_map == "householder":
                layer.weight = start.flip(0)  # right_inverse: orthogonalized again
                o(f"assigned {orthogonal_map} {trivial}", layer.weight)
            else:
                o.raises(f"assign {orthogonal_map}", lambda: setattr(layer, "weight", start),
                         "It is not possible to assign to the matrix exponential or the Cayley")
    tall = torch.nn.Linear(3, 5)
    with torch.no_grad():
        tall.weight.copy_(torch.arange(15.0).reshape(5, 3).cos() + torch.eye(5, 3))
    torch.nn.utils.parametrizations.orthogonal(tall, use_trivialization=False)
    tall(x[:, :3]).sum().backward()
    o("tall householder", [tall.weight, tall.weight.T @ tall.weight,
                           tall.parametrizations.weight.original.grad, str(tall)])
    o.raises("vector", lambda: torch.nn.utils.parametrizations.orthogonal(tall, "bias"),
             "Expected a matrix or batch of matrices. Got a tensor of 1 dimensions.")
    o.raises("map", lambda: torch.nn.utils.parametrizations.orthogonal(
        torch.nn.Linear(2, 2), orthogonal_map="qr"), 'orthogonal_map has to be one of')


@program
def layers_built_under_inference_mode(torch, o):
    # a model built inside inference_mode has inference parameters: what still works outside
    # it, what raises, and the fixes (clone into a new Parameter, load_state_dict)
    with torch.inference_mode():
        layer = torch.nn.Linear(3, 2)
        norm = torch.nn.BatchNorm1d(2)
        layer.weight.copy_(torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]]))
        layer.bias.copy_(torch.tensor([0.1, -0.2]))
        plain = torch.ones(2)

    def copy_outside():
        with torch.no_grad():
            layer.weight.copy_(torch.ones(2, 3))

    o.raises("copy_ outside", copy_outside,
             "Inplace update to inference tensor outside InferenceMode is not allowed.")
    o("flags", [layer.weight.is_inference(), layer.weight.requires_grad, layer.weight.is_leaf])
    x = torch.linspace(-1.0, 1.0, 6).reshape(2, 3)
    o("forward", [layer(x), node_name(layer(x).grad_fn)])
    o.raises("input requiring grad", lambda: layer(x.clone().requires_grad_()),
             "Inference tensors cannot be saved for backward.")
    o.raises("optimizer step", lambda: torch.optim.SGD(layer.parameters(), lr=0.1).step(),
             "Inplace update to inference tensor outside InferenceMode is not allowed.")
    o.raises("batch norm statistics", lambda: norm(torch.ones(4, 2)),
             "Inplace update to inference tensor outside InferenceMode is not allowed.")
    o.raises("requires_grad_", lambda: plain.requires_grad_(),
             "Setting requires_grad=True on inference tensor outside InferenceMode is not "
             "allowed.")
    fixed = torch.nn.Linear(3, 2)
    fixed.load_state_dict(layer.state_dict())
    fixed(x).sum().backward()
    o("load_state_dict", [fixed.weight.is_inference(), fixed.weight.grad, fixed.bias.grad])
    layer.weight = torch.nn.Parameter(layer.weight.clone())
    o("cloned", [layer.weight.is_inference(), node_name(layer(x).grad_fn)])
    with torch.no_grad():
        other = torch.nn.Linear(3, 2)
    o("no_grad instead", [other.weight.is_inference(), other.weight.requires_grad])


@program(1e-5, atol=1e-6)
def alexnet_style_normalization_and_pools(torch, o):
    # local response normalization (AlexNet), power-average pools, pools with their indices,
    # the in-place functional activations and the deprecated upsample_* aliases
    F = torch.nn.functional
    x = (torch.arange(2 * 5 * 4 * 3.0).reshape(2, 5, 4, 3) / 17 - 1.5).requires_grad_()
    lrn = F.local_response_norm(x, 3, alpha=0.1, beta=0.75, k=2.0)
    lrn3 = torch.nn.LocalResponseNorm(2)(x[:, :, :, 0])
    (g,) = torch.autograd.grad(lrn.sum() + lrn3.sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad((g ** 2).sum(), x)
    o("lrn", [lrn, lrn3, g, gg, node_name(lrn.grad_fn), str(torch.nn.LocalResponseNorm(2))])
    positive = x.abs() + 0.1
    pools = [F.lp_pool1d(positive[:, :, 0], 2, 2), F.lp_pool2d(positive, 3.0, (2, 3)),
             F.lp_pool2d(positive, float("inf"), 2), torch.nn.LPPool2d(2, 2, stride=1)(positive),
             torch.nn.LPPool1d(1.5, 3)(positive[:, :, :, 1]),
             F.lp_pool3d(positive.unsqueeze(1), 2, (1, 2, 2))]
    (gp,) = torch.autograd.grad(sum(p.sum() for p in pools), x)
    o("lp pools", pools + [gp, str(torch.nn.LPPool2d(2, 2, stride=1))])
    values, indices = F.max_pool2d_with_indices(x, 2)
    o("with indices", [values, indices, F.max_pool1d_with_indices(x[:, :, 0], 2),
                       F.adaptive_max_pool2d_with_indices(x, (2, 1)),
                       F.adaptive_max_pool1d_with_indices(x[:, :, 0], 2),
                       F.max_pool3d_with_indices(x.unsqueeze(1), 2)])
    y = x.detach() * 1.0
    activations = []
    for name, args in [("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)),
                       ("hardtanh_", (-0.5, 0.5)), ("threshold_", (0.1, 20.0)), ("selu_", ()),
                       ("celu_", (2.0,)), ("rrelu_", ())]:
        z = y.clone().requires_grad_() * 1.0
        out = getattr(F, name)(z, *args)
        out.sum().backward()
        # (node names differ: torch records the in-place forms as EluBackward1,
        # LeakyReluBackward1, ThresholdBackward1, ...; gradviz as the out-of-place node)
        activations.append([out is z, out, z._version])
    o("in-place", activations)
    image = torch.arange(8.0).reshape(1, 2, 2, 2)
    o.warns("upsample_nearest", lambda: F.upsample_nearest(image, scale_factor=2),
            "`nn.functional.upsample_nearest` is deprecated.")
    o.warns("upsample_bilinear", lambda: F.upsample_bilinear(image, size=(3, 3)),
            "`nn.functional.upsample_bilinear` is deprecated.")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        o("upsampled", [F.upsample_nearest(image, scale_factor=2),
                        F.upsample_bilinear(image, size=(3, 3))])
    o.raises("lrn of a matrix", lambda: F.local_response_norm(torch.ones(2, 3), 2),
             "Expected 3D or higher dimensionality")


@program
def polynomial_fit_with_vander(torch, o):
    # least squares on a Vandermonde design matrix; linalg.matmul is matmul
    x = torch.linspace(-1.0, 1.0, 7, dtype=torch.float64).requires_grad_()
    V = torch.linalg.vander(x, N=4)
    y = torch.cos(2 * x.detach())
    coefficients = torch.linalg.solve(V.T @ V, V.T @ y)
    fitted = torch.linalg.matmul(V, coefficients)
    ((fitted - y) ** 2).sum().backward()
    o("fit", [V, coefficients, fitted, x.grad, node_name(V.grad_fn)])
    o("defaults", [torch.linalg.vander(torch.tensor([2, 3])), torch.linalg.vander(
        torch.tensor([[1.0, 2.0, 3.0]]))])
    o.raises("N", lambda: torch.linalg.vander(x, N=1), "N must be greater than 1.")
    o.raises("0-d", lambda: torch.linalg.vander(torch.tensor(2.0)), "N must be greater than 1.")


@program(1e-5, atol=1e-6)
def spectral_norm_discriminator(torch, o):
    # a GAN discriminator's layers under spectral normalization; the power-iteration vectors
    # start random, so both libraries' are set to the same values before the steps compared
    start = torch.tensor([[0.5, -1.0, 0.2, 0.3], [1.0, 0.4, -0.6, 0.1], [-0.3, 0.8, 0.9, -0.5]])
    layer = torch.nn.Linear(4, 3)
    conv = torch.nn.ConvTranspose1d(2, 3, 2)
    with torch.no_grad():
        layer.weight.copy_(start)
        layer.bias.zero_()
        conv.weight.copy_(torch.arange(12.0).reshape(2, 3, 2).sin())
        conv.bias.fill_(0.1)
    torch.nn.utils.parametrizations.spectral_norm(layer)
    torch.nn.utils.parametrizations.spectral_norm(conv)
    for module, (u, v) in [(layer, ([0.6, 0.0, 0.8], [0.5, 0.5, 0.5, 0.5])),
                           (conv, ([1.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0]))]:
        with torch.no_grad():
            module.parametrizations.weight[0]._u.copy_(torch.tensor(u))
            module.parametrizations.weight[0]._v.copy_(torch.tensor(v))
    optimizer = torch.optim.SGD(list(layer.parameters()) + list(conv.parameters()), lr=0.05)
    x = torch.linspace(-1.0, 1.0, 8).reshape(2, 4)
    for step in range(3):
        optimizer.zero_grad()
        loss = layer(x).pow(2).mean() + conv(x.reshape(2, 2, 2)).mean()
        loss.backward()
        optimizer.step()
    o("trained", [layer.weight, conv.weight, loss, layer.parametrizations.weight[0]._u,
                  conv.parametrizations.weight[0]._v,
                  layer.parametrizations.weight.original.grad,
                  [n for n, _ in layer.named_buffers()]])
    layer.eval()
    o("eval keeps u", [layer.weight, layer.parametrizations.weight[0]._u])
    o.raises("dim", lambda: torch.nn.utils.parametrizations.spectral_norm(
        torch.nn.Linear(2, 2), dim=2), "Dimension out of range")
    o.raises("iterations", lambda: torch.nn.utils.parametrizations.spectral_norm(
        torch.nn.Linear(2, 2), n_power_iterations=0), "Expected n_power_iterations to be positive")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)

"""Fast backward rules (Note [Fast backward rules]) give the same gradients as the
differentiable rules they shadow.

Plain ``autograd.grad`` runs an op's ``fast_backward`` on numpy arrays; the same call with
``create_graph=True`` runs its differentiable ``backward`` made of Tensor ops. Both must give
bit-identical gradients for every program of ``PROGRAMS``, in float32 and float64, with
broadcasting, size-0 and 0-d shapes; the fast rules that are compiled kernels computing in
another order (``CLOSE_PROGRAMS``) agree within rounding. A last test checks that the programs
exercise every op that has a fast rule, so a new fast rule cannot go untested.
"""

import contextlib
import zlib

import numpy as np
import pytest

import gradviz as gv
from gradviz.ops import TABLE
from gradviz.ops._lstm_layer import lstm_layer
from gradviz.ops._registry import OpNode


def _positive(shape, rng, dtype):
    return (rng.random(shape) + 0.5).astype(dtype)


def _signed(shape, rng, dtype):
    return rng.standard_normal(shape).astype(dtype)


# name -> (input makers, program). Input makers give numpy arrays; the program takes tensors.
PROGRAMS = {
    "add_broadcast": ([((3, 1), _signed), ((4,), _signed)], lambda x, y: x + y),
    "add_scalar": ([((3,), _signed)], lambda x: x + 2.5),
    "add_alpha": ([((2, 3), _signed), ((3,), _signed)], lambda x, y: gv.add(x, y, alpha=2)),
    "sub": ([((2, 3), _signed), ((2, 1), _signed)], lambda x, y: x - y),
    "sub_alpha": ([((3,), _signed), ((3,), _signed)], lambda x, y: gv.sub(x, y, alpha=0.5)),
    "rsub": ([((3,), _signed)], lambda x: 2 - x),
    "mul": ([((2, 3), _signed), ((1, 3), _signed)], lambda x, y: x * y),
    "mul_scalars": ([((4,), _signed)], lambda x: x * 3.0 * 2),
    "mul_same": ([((3,), _signed)], lambda x: x * x),
    "div": ([((2, 3), _signed), ((3,), _positive)], lambda x, y: x / y),
    "div_scalar": ([((3,), _signed)], lambda x: x / 7.0),
    "rdiv": ([((3,), _positive)], lambda x: 2.0 / x),
    "neg": ([((3,), _signed)], lambda x: -x),
    "pow": ([((3,), _positive)], lambda x: x ** 2 + x ** 0.5 + x ** -1 + x ** 0),
    "exp_log": ([((2, 2), _positive)], lambda x: gv.exp(x) + gv.log(x)),
    "trig": ([((5,), _signed)], lambda x: gv.sin(x) * gv.cos(x)),
    "tanh_sigmoid": ([((5,), _signed)], lambda x: gv.tanh(x) + gv.sigmoid(x)),
    "sqrt_abs": ([((4,), _positive), ((4,), _signed)], lambda x, y: gv.sqrt(x) + gv.abs(y)),
    "relu": ([((6,), _signed)], lambda x: gv.relu(x)),
    "mse_loss_mean": ([((3, 4), _signed), ((3, 4), _signed)],
                      lambda x, y: gv.nn.functional.mse_loss(x, y)),
    "mse_loss_sum_broadcast": ([((3, 1), _signed), ((3, 4), _signed)],
                               lambda x, y: gv.nn.functional.mse_loss(x, y, reduction="sum") * 1.5),
    "mse_loss_none": ([((2, 5), _signed), ((2, 5), _signed)],
                      lambda x, y: gv.nn.functional.mse_loss(x, y, reduction="none")),
    "to": ([((3,), _signed)], lambda x: x.double() * 2 if x.dtype is gv.float32 else x.float() * 2),
    "sum": ([((2, 3, 4), _signed)],
            lambda x: x.sum() + x.sum(0).sum() + x.sum((0, 2), keepdim=True).sum()),
    "mean": ([((2, 3), _signed)], lambda x: x.mean() + x.mean(1, keepdim=True).sum()),
    "dot": ([((3,), _signed), ((3,), _signed)], lambda x, y: gv.dot(x, y)),
    "mv": ([((2, 3), _signed), ((3,), _signed)], lambda x, y: gv.mv(x, y)),
    "mm": ([((2, 3), _signed), ((3, 4), _signed)], lambda x, y: gv.mm(x, y)),
    "linear": ([((5, 3), _signed), ((4, 3), _signed), ((4,), _signed)],
               lambda x, w, b: x @ w.t() + b),
    "linear_large": ([((64, 96), _signed), ((80, 96), _signed)], lambda x, w: gv.relu(x @ w.t())),
    "addmm": ([((5, 3), _signed), ((4, 3), _signed), ((4,), _signed)],
              lambda x, w, b: gv.nn.functional.linear(x, w, b) + gv.addmm(b, x, w.t()[:, :4])),
    "addmm_scaled": ([((5, 3), _signed), ((3, 4), _signed), ((4,), _signed)],
                     lambda x, w, b: gv.addmm(b, x, w, beta=0.5, alpha=-2.0)),
    "bmm": ([((2, 2, 3), _signed), ((2, 3, 4), _signed)], lambda x, y: gv.bmm(x, y)),
    "matmul_batched": ([((2, 2, 3), _signed), ((3,), _signed)], lambda x, y: x @ y),
    "views": ([((2, 3), _signed)],
              lambda x: x.view(3, 2).t().reshape(6).unsqueeze(0).squeeze(0).squeeze()),
    "reshape_copy": ([((2, 3), _signed)], lambda x: x.t().reshape(6)),
    "reshape_alias": ([((4, 3), _signed)], lambda x: x[::2].reshape(2, 1, 3)),
    "vector_matmul": ([((3,), _signed), ((3, 4), _signed)], lambda x, y: x @ y),
    "transpose_permute": ([((2, 3, 4), _signed)],
                          lambda x: x.transpose(0, 2).permute(2, 0, 1).squeeze(1)),
    "expand": ([((3, 1), _signed)], lambda x: x.expand(2, 3, 4)),
    "clone": ([((3,), _signed)], lambda x: x.clone()),
    # one node, several outputs; the rule fills an unused piece's gradient with zeros
    "split": ([((5, 3), _signed)],
              lambda x: gv.cat([p * (i + 1) for i, p in enumerate(x.split(2))][::2]) + x.chunk(2, 1)[1].sum()),
    "split_with_sizes": ([((2, 5), _signed)],
                         lambda x: gv.cat(x.split([0, 2, 3], -1)[1:], -1) * x.split([1, 4], 1)[0]),
    "split_single_piece": ([((3,), _signed)], lambda x: x.split(3)[0] * 2),
    "unsafe_split": ([((2, 6), _signed)],
                     lambda x: x.unsafe_chunk(3, 1)[2] * 3 + gv.unsafe_split(x, 4, 1)[1]),
    "split_size_zero": ([((0, 3), _signed)], lambda x: x.split(2)[0] + x.chunk(2)[1]),
    "unbind": ([((3, 4), _signed)], lambda x: x.unbind(1)[0] * x.unbind(1)[3] + x.unbind()[1][:3]),
    "stack": ([((2, 3), _signed), ((2, 3), _signed)],
              lambda x, y: gv.stack([x, y * 2, x], 1) + gv.stack([y, x]).sum(0).unsqueeze(1)),
    "squeeze_dims": ([((1, 3, 1), _signed)], lambda x: x.squeeze((0, 2)) * x.squeeze([-1, 1])),
    "size_zero": ([((0, 3), _signed), ((3,), _signed)], lambda x, y: (x * y + 1).sum(0)),
    "zero_dim": ([((), _signed), ((), _positive)], lambda x, y: gv.exp(x) * y / y + x.sum()),
    # pooling: overlapping windows, padding, dilation, ties (a rounded input)
    "max_pool2d": ([((2, 3, 7, 6), _signed)],
                   lambda x: gv.nn.functional.max_pool2d(x, 3, 2, padding=1)),
    "max_pool2d_ties_dilated": ([((1, 2, 9, 8), _signed)],
                                lambda x: gv.nn.functional.max_pool2d(
                                    gv.round(x), (2, 3), (1, 2), dilation=(2, 1))),
    "max_pool2d_unbatched": ([((2, 6, 6), _signed)],
                             lambda x: gv.nn.functional.max_pool2d(x, 2)),
    "max_pool2d_tiles": ([((2, 3, 6, 8), _signed)],
                         lambda x: gv.nn.functional.max_pool2d(gv.round(x), (2, 4))),
    "avg_pool2d_tiles": ([((2, 3, 6, 8), _signed)],
                         lambda x: gv.nn.functional.avg_pool2d(x, (3, 2))),
    "max_pool3d_tiles": ([((1, 2, 4, 4, 6), _signed)],
                         lambda x: gv.nn.functional.max_pool3d(x, 2)),
    "max_pool3d": ([((1, 2, 5, 4, 6), _signed)],
                   lambda x: gv.nn.functional.max_pool3d(x, 2, (1, 2, 2), padding=1)),
    "avg_pool2d": ([((2, 3, 7, 6), _signed)],
                   lambda x: gv.nn.functional.avg_pool2d(x, 3, 2, padding=1)),
    "avg_pool2d_unbatched": ([((2, 6, 6), _signed)],
                             lambda x: gv.nn.functional.avg_pool2d(x, 2) * 3),
    "adaptive_avg_pool2d": ([((2, 3, 6, 4), _signed)],
                            lambda x: gv.nn.functional.adaptive_avg_pool2d(x, (3, 2))),
    "avg_pool3d": ([((1, 2, 5, 4, 6), _signed)],
                   lambda x: gv.nn.functional.avg_pool3d(x, 2, (1, 2, 2), padding=1)),
    # one LSTM layer, reversed, h_n and c_n folded into the output (Note [One node per LSTM layer])
    "lstm_layer": ([((4, 2, 3), _signed), ((8, 3), _signed), ((8, 2), _signed), ((8,), _signed),
                    ((8,), _signed), ((2, 2), _signed), ((2, 2), _signed)],
                   lambda x, w_ih, w_hh, b_ih, b_hh, h0, c0: (lambda out, h, c: out + h + c * 2)(
                       *lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse=True))),
    "avg_pool3d_divisor": ([((1, 2, 5, 4, 6), _signed)],
                           lambda x: gv.nn.functional.avg_pool3d(
                               x, 3, 2, padding=1, count_include_pad=False)),
    # a transformer's ops: rows added in order, the softmax kernels over the last dim and
    # numpy's over another, a fill broadcast from a smaller mask, a loss with every reduction
    "embedding": ([((6, 3), _signed)],
                  lambda w: gv.nn.functional.embedding(gv.tensor([[0, 2, 2], [5, 0, 1]]), w)
                  + gv.nn.functional.embedding(gv.tensor([1, 2]), w, padding_idx=2).sum(0)),
    "embedding_wide": ([((7, 20), _signed)],
                       lambda w: gv.nn.functional.embedding(gv.tensor([3, 0, 3, 6, 3]), w).t()),
    "softmax": ([((3, 8), _signed)],
                lambda x: gv.softmax(x, -1) * gv.softmax(x, 0) + gv.softmax(x.t(), 1).t()),
    "safe_softmax": ([((2, 3, 4), _signed)],
                     lambda x: gv.nn.functional.scaled_dot_product_attention(
                         x, x * 2, x, attn_mask=gv.tensor([[True, False, True], [False, False, False],
                                                          [True, True, True]]))),
    "log_softmax": ([((3, 8), _signed)],
                    lambda x: gv.log_softmax(x, -1) * gv.log_softmax(x, 0)),
    "softmax_zero_dim": ([((), _signed)], lambda x: gv.softmax(x, 0) + gv.log_softmax(x, 0)),
    "masked_fill": ([((2, 3, 4), _signed)],
                    lambda x: x.masked_fill(gv.tensor([True, False, False, True]), 2.0)
                    + x.transpose(1, 2).masked_fill(gv.tensor([[True], [False], [True], [False]]),
                                                    0.5).transpose(1, 2)),
    "cross_entropy": ([((5, 4), _signed), ((4,), _positive)],
                      lambda x, w: gv.nn.functional.cross_entropy(x, gv.tensor([0, 3, 1, 1, 2]))
                      + gv.nn.functional.cross_entropy(x, gv.tensor([0, 3, -100, 1, 2]), w,
                                                       reduction="sum")
                      + gv.nn.functional.nll_loss(x, gv.tensor([2, 2, 0, 1, 3]),
                                                  reduction="none").sum()),
}

# Fast rules that compute in another order than their differentiable rule: the normalizations'
# compiled kernels (one pass per row, Note [Layer norm kernel]) and GELU's float32 kernel (Note
# [GELU kernels]). These fast rules are what a backward without ``create_graph`` always ran
# (the differentiable rules used to branch to them); here they must agree with the
# differentiable rules within rounding, float32 or float64.
CLOSE_PROGRAMS = {
    "layer_norm": ([((4, 5, 7), _signed), ((7,), _signed), ((7,), _signed)],
                   lambda x, w, b: gv.nn.functional.layer_norm(x, (7,), w, b)
                   + gv.nn.functional.layer_norm(x, (5, 7))),
    "batch_norm": ([((4, 3, 5), _signed), ((3,), _signed), ((3,), _signed)],
                   lambda x, w, b: gv.nn.functional.batch_norm(x, None, None, w, b, training=True)
                   + gv.nn.functional.batch_norm(x, gv.zeros(3, dtype=x.dtype),
                                                 gv.ones(3, dtype=x.dtype), w, b)),
    "group_norm": ([((2, 4, 5), _signed), ((4,), _signed), ((4,), _signed)],
                   lambda x, w, b: gv.nn.functional.group_norm(x, 2, w, b)),
    "gelu": ([((4, 9), _signed)],
             lambda x: gv.nn.functional.gelu(x) + gv.nn.functional.gelu(x.t(), approximate="tanh").t()),
}
CLOSE = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}


def _gradients(program, arrays, create_graph):
    inputs = [gv.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = program(*inputs)
    seed = gv.tensor(np.linspace(-1.0, 2.0, out.numel(), dtype=out._data.dtype).reshape(out.shape))
    grads = gv.autograd.grad(out, inputs, seed, create_graph=create_graph, allow_unused=True)
    return out, [None if g is None else g.detach().numpy().copy() for g in grads]


def _fast_and_slow(programs, name, dtype):
    """The gradients of ``programs[name]`` by the fast rules and by the differentiable ones
    (create_graph), pairwise, after checking both gave the same Nones, dtypes and shapes."""
    # zlib.crc32, not hash(): str hashes are salted per process, so hash(name) drew other
    # inputs on every run and a failure could not be reproduced.
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    makers, program = programs[name]
    arrays = [make(shape, rng, dtype) for shape, make in makers]
    _, fast = _gradients(program, arrays, create_graph=False)
    _, slow = _gradients(program, arrays, create_graph=True)
    pairs = []
    for index, (f, s) in enumerate(zip(fast, slow)):
        assert (f is None) == (s is None), f"input {index}: one rule gave no gradient"
        if f is not None:
            assert f.dtype == s.dtype and f.shape == s.shape, (index, f.dtype, s.dtype, f.shape,
                                                               s.shape)
            pairs.append((index, f, s))
    return pairs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_fast_rule_matches_differentiable_rule(name, dtype):
    for index, f, s in _fast_and_slow(PROGRAMS, name, dtype):
        np.testing.assert_array_equal(f, s, err_msg=f"{name}, input {index}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CLOSE_PROGRAMS))
def test_kernel_fast_rule_is_close_to_differentiable_rule(name, dtype):
    for index, f, s in _fast_and_slow(CLOSE_PROGRAMS, name, dtype):
        np.testing.assert_allclose(f, s, err_msg=f"{name}, input {index}", **CLOSE[dtype])


@contextlib.contextmanager
def _counting_fast_rule(name):
    """Count the calls of op ``name``'s Python fast rule while the block runs."""
    calls = []
    original = TABLE[name].fast_backward
    TABLE[name].fast_backward = lambda ctx, g: calls.append(1) or original(ctx, g)
    try:
        yield calls
    finally:
        TABLE[name].fast_backward = original


def test_fast_rules_are_used_without_create_graph_only():
    # a fast rule that raised would show up here: count the calls through a wrapper
    with _counting_fast_rule("exp") as calls:
        x = gv.tensor([1.0, 2.0], requires_grad=True)
        gv.autograd.grad(gv.exp(x).sum(), x)
        assert len(calls) == 1
        gv.autograd.grad(gv.exp(x).sum(), x, create_graph=True)
        assert len(calls) == 1


@pytest.mark.parametrize("name, program", [
    ("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
    ("div", lambda x, y: x / y), ("neg", lambda x, y: -x * 1.0),
])
def test_compiled_kernels_stand_in_for_the_python_fast_rules(name, program):
    # Note [Compiled kernels]: the arithmetic ops' fast rules run compiled, so the Python
    # rule is not called, and the gradients are still those of the differentiable rule
    with _counting_fast_rule(name) as calls:
        x = gv.tensor([1.5, -2.0, 3.0], requires_grad=True)
        y = gv.tensor([0.5, 4.0, -1.25], requires_grad=True)
        fast = gv.autograd.grad(program(x, y).sum(), (x, y), allow_unused=True)
        slow = gv.autograd.grad(program(x, y).sum(), (x, y), allow_unused=True,
                                create_graph=True)
        assert calls == []
    for got, want in zip(fast, slow):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_array_equal(got.numpy(), want.detach().numpy())


def test_alpha_falls_back_to_the_python_fast_rule():
    with _counting_fast_rule("add") as calls:
        x = gv.tensor([1.0, 2.0], requires_grad=True)
        y = gv.tensor([3.0, 4.0], requires_grad=True)
        gx, gy = gv.autograd.grad(gv.add(x, y, alpha=3).sum(), (x, y))
        assert len(calls) == 1
    np.testing.assert_array_equal(gy.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0])


def test_a_kernel_needs_a_fast_rule():
    from gradviz.ops._registry import Op
    from gradviz_ext import ops as ext_ops

    with pytest.raises(ValueError, match="kernel stands for a fast_backward"):
        Op("mul_without_fast_rule", "MulBackward0", forward=np.multiply,
           backward=lambda ctx, g: (g, g), kernel=ext_ops.KERNEL_MUL)
    assert "mul_without_fast_rule" not in TABLE


def _op_names(tensor):
    names, seen, stack = set(), set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, OpNode):
            names.add(node.op.name)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_programs_cover_every_fast_rule():
    rng = np.random.default_rng(0)
    covered = set()
    for makers, program in (*PROGRAMS.values(), *CLOSE_PROGRAMS.values()):
        inputs = [gv.tensor(make(shape, rng, np.float32), requires_grad=True)
                  for shape, make in makers]
        covered |= _op_names(program(*inputs))
    with_fast_rule = {name for name, op in TABLE.items() if op.fast_backward is not None}
    assert with_fast_rule - covered == set()


def test_a_fast_rule_still_checks_saved_versions():
    x = gv.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    out = (y * y).sum()
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_a_fast_rule_after_release_raises_the_backward_twice_error():
    x = gv.tensor([1.0, 2.0], requires_grad=True)
    out = gv.exp(x).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        out.backward()

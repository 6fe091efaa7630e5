"""``grad_fn`` names and ``next_functions`` (the edges, in order, with input numbers), as torch
records them for the same expression."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import node_name

import gradviz


def structure(node, depth=0):
    """(name, [(child structure, input_nr), ...]) for the graph below ``node``."""
    if node is None:
        return None
    assert depth < 50, "graph unexpectedly deep"
    return (node_name(node),
            [(structure(child, depth + 1), input_nr) for child, input_nr in node.next_functions])


VEC = np.array([0.5, -1.25, 2.0])
MAT = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
SQUARE = np.array([[0.5, -1.0], [1.5, 0.25]])
BATCH = np.arange(12.0).reshape(2, 2, 3) / 7.0

EXPRESSIONS = [
    # (id, inputs, program)
    ("sum_of_mul", [VEC], lambda m, x: (x * 2).sum()),
    ("add_scalar", [VEC], lambda m, x: x + 1),
    ("radd_scalar", [VEC], lambda m, x: 1 + x),
    ("rmul_scalar", [VEC], lambda m, x: 2.0 * x),
    ("rsub_scalar", [VEC], lambda m, x: 2 - x),
    ("sub_scalar", [VEC], lambda m, x: x - 2),
    ("div_scalar", [VEC], lambda m, x: x / 2),
    ("rdiv_scalar", [VEC], lambda m, x: 2 / x),
    ("neg", [VEC], lambda m, x: -x),
    ("pow_scalar", [VEC], lambda m, x: x ** 2),
    ("rpow_scalar", [VEC], lambda m, x: 2 ** x),
    ("pow_tensor", [VEC], lambda m, x: x ** x),
    ("select", [VEC], lambda m, x: x[0]),
    ("slice", [VEC], lambda m, x: x[1:]),
    ("full_slice", [VEC], lambda m, x: x[:]),
    ("none_index", [VEC], lambda m, x: x[None]),
    ("slice_then_none", [VEC], lambda m, x: x[:, None]),
    ("matrix_column", [MAT], lambda m, x: x[:, 1]),
    ("matrix_column_range", [MAT], lambda m, x: x[:, 1:]),
    ("matrix_row", [MAT], lambda m, x: x[1]),
    ("matrix_negative_start", [MAT], lambda m, x: x[-2:, 0]),
    ("dot", [VEC], lambda m, x: x @ x),
    ("mm", [MAT, MAT], lambda m, a, b: a @ b.t()),
    ("mv", [MAT, VEC], lambda m, a, v: a @ v),
    ("mm_square_reuse", [SQUARE], lambda m, a: a @ a),
    ("vec_mat", [VEC, MAT], lambda m, v, a: v @ a.t()),
    ("batched_mat", [BATCH, MAT], lambda m, b, a: b @ a.t()),
    ("batched_batched", [BATCH], lambda m, b: b @ b.transpose(1, 2)),
    ("mul_two_leaves", [VEC, VEC], lambda m, a, b: a * b),
    ("same_leaf_twice", [VEC], lambda m, x: x * x),
    ("chain", [VEC], lambda m, x: (x.exp() + x.sin()).tanh().mean()),
    ("sum_dim", [MAT], lambda m, x: x.sum(0)),
    ("mean_dim_keepdim", [MAT], lambda m, x: x.mean(1, keepdim=True)),
    ("reshape", [MAT], lambda m, x: x.reshape(3, 2)),
    ("view", [MAT], lambda m, x: x.view(6)),
    ("transpose", [MAT], lambda m, x: x.transpose(0, 1)),
    ("t", [MAT], lambda m, x: x.t()),
    ("permute", [BATCH], lambda m, x: x.permute(2, 0, 1)),
    ("unsqueeze", [VEC], lambda m, x: x.unsqueeze(1)),
    ("squeeze_dim", [VEC], lambda m, x: x[None].squeeze(0)),
    ("expand", [VEC], lambda m, x: x.expand(2, 3)),
    ("flatten", [BATCH], lambda m, x: x.flatten()),
    ("clone", [VEC], lambda m, x: x.clone()),
    ("to_float32", [VEC], lambda m, x: x.float()),
    ("relu_sigmoid", [VEC], lambda m, x: x.relu() + x.sigmoid()),
    ("clamp", [VEC], lambda m, x: x.clamp(0, 1)),
    ("clamp_min", [VEC], lambda m, x: x.clamp(min=0)),
    ("abs_sqrt_log", [VEC], lambda m, x: x.abs().sqrt().log()),
    ("broadcast_add", [MAT, VEC], lambda m, a, v: a + v),
    ("detached_operand", [VEC], lambda m, x: x * x.detach()),
    ("constant_operand", [VEC], lambda m, x: x * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)),
]


@pytest.mark.parametrize("name,arrays,program", EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_next_functions_match_torch(name, arrays, program):
    gv_inputs = [gradviz.tensor(a, requires_grad=True) for a in arrays]
    th_inputs = [torch.tensor(a, requires_grad=True) for a in arrays]
    gv_out = program(gradviz, *gv_inputs)
    th_out = program(torch, *th_inputs)
    assert structure(gv_out.grad_fn) == structure(th_out.grad_fn)


@pytest.mark.parametrize("name,arrays,program", EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_values_and_grads_of_structure_cases(name, arrays, program):
    from conftest import run_both
    run_both(program, arrays)


def test_leaf_accumulate_grad_is_shared_while_alive():
    def run(m):
        x = m.tensor(VEC, requires_grad=True)
        a, b = x * 2, x * 3
        acc_a = a.grad_fn.next_functions[0][0]
        acc_b = b.grad_fn.next_functions[0][0]
        return acc_a is acc_b, acc_a.variable is x

    assert run(gradviz) == run(torch) == (True, True)


def test_leaf_and_no_grad_tensors_have_no_grad_fn():
    def run(m):
        x = m.tensor(VEC, requires_grad=True)
        c = m.tensor(VEC)
        with m.no_grad():
            y = x * 2
        return x.grad_fn is None, c.grad_fn is None, y.grad_fn is None, (c * 2).grad_fn is None

    assert run(gradviz) == run(torch)


def test_output_nr_and_is_leaf():
    def run(m):
        x = m.tensor(VEC, requires_grad=True)
        y = x.exp()
        return x.is_leaf, y.is_leaf, y.output_nr, x.requires_grad, y.requires_grad

    assert run(gradviz) == run(torch)


def test_integer_results_are_not_differentiable():
    def run(m):
        x = m.tensor(VEC, requires_grad=True)
        mask = x > 0
        return mask.requires_grad, mask.grad_fn is None, mask.dtype.is_floating_point

    assert run(gradviz) == run(torch)


def test_sequence_numbers_increase_in_creation_order():
    # Compared with torch: later nodes have larger sequence numbers; AccumulateGrad has the max
    def run(m):
        x = m.tensor(VEC, requires_grad=True)
        a = x * 2
        b = a.exp()
        c = b.sum()
        acc = a.grad_fn.next_functions[0][0]
        seqs = [a.grad_fn._sequence_nr(), b.grad_fn._sequence_nr(), c.grad_fn._sequence_nr()]
        return seqs[0] < seqs[1] < seqs[2], acc._sequence_nr() > seqs[2]

    assert run(gradviz) == run(torch) == (True, True)

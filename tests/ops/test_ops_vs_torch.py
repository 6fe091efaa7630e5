"""Every op against PyTorch: forward values, first and second derivatives, several shapes
(broadcasting, size-1 and zero-size dims included), float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_both

rng = np.random.default_rng(1234)


def positive(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


def normal(*shape):
    return rng.standard_normal(shape)


def away_from_zero(*shape):
    x = rng.uniform(0.3, 1.5, size=shape)
    return x * rng.choice([-1.0, 1.0], size=shape)


# (id, program, input factories) -- program(m, *tensors) runs identically in torch and gradviz
BINARY_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((1,), (2, 3)), ((), (2, 2)),
                 ((0, 3), (3,)), ((2, 3, 4), (1, 4))]

CASES = []
for sa, sb in BINARY_SHAPES:
    tag = f"{sa}x{sb}"
    CASES += [
        (f"add{tag}", lambda m, a, b: a + b, (normal(*sa), normal(*sb))),
        (f"add_alpha{tag}", lambda m, a, b: m.add(a, b, alpha=2.5), (normal(*sa), normal(*sb))),
        (f"sub{tag}", lambda m, a, b: a - b, (normal(*sa), normal(*sb))),
        (f"mul{tag}", lambda m, a, b: a * b, (normal(*sa), normal(*sb))),
        (f"div{tag}", lambda m, a, b: a / b, (normal(*sa), away_from_zero(*sb))),
        (f"pow_tensor{tag}", lambda m, a, b: a ** b, (positive(*sa), normal(*sb))),
    ]

UNARY_SHAPES = [(4,), (2, 3), (), (1, 5), (0,)]
for s in UNARY_SHAPES:
    tag = f"{s}"
    CASES += [
        (f"neg{tag}", lambda m, a: -a, (normal(*s),)),
        (f"exp{tag}", lambda m, a: a.exp(), (normal(*s),)),
        (f"log{tag}", lambda m, a: a.log(), (positive(*s),)),
        (f"tanh{tag}", lambda m, a: m.tanh(a), (normal(*s),)),
        (f"sigmoid{tag}", lambda m, a: m.sigmoid(a), (normal(*s) * 3,)),
        (f"relu{tag}", lambda m, a: m.relu(a), (away_from_zero(*s),)),
        (f"sin{tag}", lambda m, a: a.sin(), (normal(*s),)),
        (f"cos{tag}", lambda m, a: m.cos(a), (normal(*s),)),
        (f"sqrt{tag}", lambda m, a: a.sqrt(), (positive(*s),)),
        (f"abs{tag}", lambda m, a: a.abs(), (away_from_zero(*s),)),
        (f"pow_scalar{tag}", lambda m, a: a ** 3, (normal(*s),)),
        (f"pow_half{tag}", lambda m, a: a ** 0.5, (positive(*s),)),
        (f"rpow{tag}", lambda m, a: 2.0 ** a, (normal(*s),)),
        (f"rsub{tag}", lambda m, a: 1.5 - a, (normal(*s),)),
        (f"rdiv{tag}", lambda m, a: 2.0 / a, (away_from_zero(*s),)),
        (f"scalar_mix{tag}", lambda m, a: (a * 2 + 1) / 3 - 0.5, (normal(*s),)),
        (f"clamp{tag}", lambda m, a: a.clamp(-0.5, 0.7), (normal(*s),)),
        (f"clone{tag}", lambda m, a: a.clone() * a, (normal(*s),)),
        (f"sum{tag}", lambda m, a: a.sum(), (normal(*s),)),
        (f"mean{tag}", lambda m, a: (a * a).mean(), (normal(*s) if s != (0,) else normal(1),)),
    ]

REDUCE_SHAPES = [((2, 3), 0), ((2, 3), 1), ((2, 3, 4), (0, 2)), ((2, 3), -1), ((1, 4), 0), ((3, 0), 1)]
for s, dim in REDUCE_SHAPES:
    for keepdim in (False, True):
        tag = f"{s}_dim{dim}_keep{keepdim}"
        CASES += [
            (f"sum{tag}", lambda m, a, d=dim, k=keepdim: (a * a).sum(d, keepdim=k), (normal(*s),)),
            (f"mean{tag}", lambda m, a, d=dim, k=keepdim: (a * a).mean(d, keepdim=k), (normal(*s),)),
        ]

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 4)),
                 ((5, 2, 3), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,)), ((1, 2, 3), (4, 3, 2)), ((0, 3), (3, 2))]
for sa, sb in MATMUL_SHAPES:
    CASES.append((f"matmul{sa}@{sb}", lambda m, a, b: (a @ b) * (a @ b).sum(), (normal(*sa), normal(*sb))))

SHAPE_CASES = [
    ("reshape", lambda m, a: (a.reshape(3, 2) * a.reshape(3, 2)), ((2, 3),)),
    ("reshape_infer", lambda m, a: a.reshape(-1) ** 2, ((2, 3),)),
    ("view", lambda m, a: a.view(6) * 3, ((2, 3),)),
    ("view_tuple", lambda m, a: a.view((3, 2)).sin(), ((2, 3),)),
    ("reshape_noncontiguous", lambda m, a: a.t().reshape(6) ** 2, ((2, 3),)),
    ("transpose", lambda m, a: a.transpose(0, 2).exp(), ((2, 3, 4),)),
    ("t", lambda m, a: a.t() @ a, ((2, 3),)),
    ("T", lambda m, a: a.T * a.T, ((2, 3),)),
    ("permute", lambda m, a: a.permute(2, 0, 1) ** 2, ((2, 3, 4),)),
    ("unsqueeze", lambda m, a: a.unsqueeze(1) * a.unsqueeze(0), ((3,),)),
    ("squeeze", lambda m, a: a.squeeze() ** 2, ((1, 3, 1),)),
    ("squeeze_dim", lambda m, a: a.squeeze(0) ** 2, ((1, 3),)),
    ("expand", lambda m, a: a.expand(4, 3) ** 2, ((1, 3),)),
    ("expand_new_dim", lambda m, a: a.expand(2, 3) * m.tensor([[1.0], [2.0]], dtype=a.dtype), ((3,),)),
    ("flatten", lambda m, a: a.flatten() ** 2, ((2, 3, 2),)),
    ("index_int", lambda m, a: a[1] ** 2, ((3, 4),)),
    ("index_negative", lambda m, a: a[-1, 2] * a[0, 0], ((3, 4),)),
    ("index_slice", lambda m, a: a[1:3] ** 2, ((4, 2),)),
    ("index_step", lambda m, a: a[::2, 1:] ** 2, ((5, 3),)),
    ("index_mixed", lambda m, a: a[0, 1:] * 2, ((3, 4),)),
    ("index_none_ellipsis", lambda m, a: a[None, ..., 1] ** 2, ((2, 3, 4),)),
    ("index_tensor", lambda m, a: a[m.tensor([0, 2, 0])] ** 2, ((3, 2),)),
    ("index_bool", lambda m, a: a[a > 0] ** 2, ((3, 4),)),
    ("index_repeated_accumulates", lambda m, a: a[[1, 1, 2]].sum() * a[1], ((3,),)),
    ("to_double", lambda m, a: a.double() * a.double(), ((3,),)),
    ("to_float", lambda m, a: a.float() ** 2, ((3,),)),
    ("chain_mix", lambda m, a: (m.tanh(a @ a.t()) + a.sum(1, keepdim=True)).sigmoid().mean(), ((3, 4),)),
]
for name, program, shapes in SHAPE_CASES:
    CASES.append((name, program, tuple(normal(*s) for s in shapes)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_torch(case, dtype):
    name, program, arrays = case
    run_both(program, arrays, dtype=dtype, create_graph_order=2 if dtype == "float64" else 1,
             loose=name.startswith("to_float"))

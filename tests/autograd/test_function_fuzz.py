"""Property test: ``Function.apply`` driven with random arguments and random (often wrong)
backward results. gradviz and torch must agree on every case: both raise the same exception
type (gradviz with a non-empty message), or both succeed with equal gradients. Never a crash
of another kind, never a silently different gradient."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradviz

SHAPES = [(), (3,), (2, 3)]
DTYPES = ["float32", "float64"]

# one forward argument: a tensor (shape, dtype, requires_grad), an int, or a list of a tensor
argument = st.one_of(
    st.tuples(st.just("tensor"), st.sampled_from(SHAPES), st.sampled_from(DTYPES), st.booleans()),
    st.tuples(st.just("int"), st.integers(-3, 3)),
    st.tuples(st.just("list")),
)

# the first argument always requires grad, so most cases record a graph
first_argument = st.tuples(st.just("tensor"), st.sampled_from(SHAPES), st.sampled_from(DTYPES),
                           st.just(True))
arguments = st.builds(lambda first, rest: [first] + rest, first_argument,
                      st.lists(argument, min_size=0, max_size=2))

# what backward returns for one position
GRADIENT_KINDS = ["right", "none", "scalar", "wrong_shape", "leading_dim", "other_dtype",
                  "int_dtype", "python_int", "string", "broadcastable_smaller"]

OUTPUT_KINDS = ["single", "with_non_tensor", "with_unused_tensor"]
ARITY_KINDS = ["exact", "missing_last", "extra_none", "extra_tensor"]


def build(m, args_spec):
    args = []
    for spec in args_spec:
        if spec[0] == "tensor":
            _, shape, dtype, requires_grad = spec
            value = np.arange(1, 1 + int(np.prod(shape, dtype=int))).reshape(shape) / 4.0
            args.append(m.tensor(value.astype(dtype), requires_grad=requires_grad))
        elif spec[0] == "int":
            args.append(spec[1])
        else:
            args.append([m.tensor([1.0])])
    return args


def make_gradient(m, kind, arg, g):
    like = arg if isinstance(arg, (torch.Tensor, gradviz.Tensor)) else m.ones(3)
    shape = tuple(like.shape)
    if kind == "right":
        return g * m.ones(shape, dtype=like.dtype) if isinstance(like, (torch.Tensor, gradviz.Tensor)) else None
    if kind == "none":
        return None
    if kind == "scalar":
        return m.ones((), dtype=m.float64) * 2
    if kind == "wrong_shape":
        return m.ones((7,), dtype=m.float64)
    if kind == "leading_dim":
        return m.ones((2,) + shape, dtype=m.float64)
    if kind == "other_dtype":
        return m.ones(shape, dtype=m.float32 if like.dtype == m.float64 else m.float64) * 3
    if kind == "int_dtype":
        return m.ones(shape, dtype=m.int64)
    if kind == "python_int":
        return 1
    if kind == "string":
        return "gradient"
    # broadcastable_smaller
    return m.ones((1,) * len(shape), dtype=m.float64) if shape else m.ones((1,), dtype=m.float64)


def program(m, args_spec, output_kind, gradient_kinds, arity):
    args = build(m, args_spec)

    class Fuzzed(m.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            total = m.zeros((), dtype=m.float64)
            for value in inputs:
                if isinstance(value, (torch.Tensor, gradviz.Tensor)):
                    total = total + value.to(m.float64).sum()
            if output_kind == "single":
                return total
            if output_kind == "with_non_tensor":
                return total, "extra"
            return total, total * 2

        @staticmethod
        def backward(ctx, g, *rest):
            grads = [make_gradient(m, kind, a, g) for kind, a in zip(gradient_kinds, args)]
            if arity == "missing_last" and grads:
                grads = grads[:-1]
            elif arity == "extra_none":
                grads = grads + [None]
            elif arity == "extra_tensor":
                grads = grads + [m.ones(1)]
            return tuple(grads)

    outputs = Fuzzed.apply(*args)
    out = outputs if output_kind == "single" else outputs[0]
    if not out.requires_grad:
        return ("no graph",)
    out.backward()
    return tuple(a.grad if isinstance(a, (torch.Tensor, gradviz.Tensor)) else None for a in args)


def outcome(m, *case):
    try:
        return "ok", program(m, *case)
    except Exception as exc:  # noqa: BLE001 - the property compares whatever happens
        return "error", exc


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    args_spec=arguments,
    output_kind=st.sampled_from(OUTPUT_KINDS),
    gradient_kinds=st.lists(st.sampled_from(GRADIENT_KINDS), min_size=3, max_size=3),
    arity=st.sampled_from(ARITY_KINDS),
)
def test_apply_with_random_results_agrees_with_torch(args_spec, output_kind, gradient_kinds, arity):
    case = (args_spec, output_kind, gradient_kinds, arity)
    th_status, th_value = outcome(torch, *case)
    gv_status, gv_value = outcome(gradviz, *case)
    assert gv_status == th_status, f"{case}: gradviz {gv_status} {gv_value!r}, torch {th_status} {th_value!r}"
    if th_status == "error":
        assert type(gv_value).__name__ == type(th_value).__name__, (
            f"{case}: gradviz {type(gv_value).__name__}: {gv_value}\ntorch {type(th_value).__name__}: {th_value}")
        assert str(gv_value).strip(), f"{case}: empty message"
        return
    assert len(gv_value) == len(th_value)
    for index, (a, b) in enumerate(zip(gv_value, th_value)):
        if isinstance(b, str) or isinstance(a, str):
            assert a == b
            continue
        if b is None or a is None:
            assert a is None and b is None, f"{case}: input {index}: gradviz {a!r}, torch {b!r}"
            continue
        assert a.dtype.name == str(b.dtype).replace("torch.", ""), f"{case}: dtype of input {index}"
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{case}: gradient of input {index}")

"""Python operators (the compiled fast paths and their Python fallbacks) against PyTorch:
operand kinds, result dtypes, graph edges and the errors users see."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

OPERANDS = {
    "int": lambda m: 2,
    "float": lambda m: 2.5,
    "bool": lambda m: True,
    "np_float64": lambda m: np.float64(1.5),
    "np_int64": lambda m: np.int64(3),
    "f32_vec": lambda m: m.tensor([1.0, -2.0, 3.0]),
    "f64_vec": lambda m: m.tensor([1.0, -2.0, 3.0], dtype=m.float64),
    "i64_vec": lambda m: m.tensor([1, 2, 3]),
    "f64_scalar_tensor": lambda m: m.tensor(2.0, dtype=m.float64),
}
OPERATORS = {
    "add": lambda a, b: a + b, "radd": lambda a, b: b + a,
    "sub": lambda a, b: a - b, "rsub": lambda a, b: b - a,
    "mul": lambda a, b: a * b, "rmul": lambda a, b: b * a,
    "div": lambda a, b: a / b, "rdiv": lambda a, b: b / a,
}


@pytest.mark.parametrize("left", ["f32_vec", "i64_vec", "f64_vec"])
@pytest.mark.parametrize("right", sorted(OPERANDS))
@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_operator_results_match_torch(left, right, operator):
    fn = OPERATORS[operator]

    def run(m):
        a = OPERANDS[left](m)
        if a.dtype.is_floating_point:
            a.requires_grad_(True)
        return a, fn(a, OPERANDS[right](m))

    try:
        ta, theirs = run(torch)
    except RuntimeError as error:  # e.g. subtraction with bools: gradviz must refuse the same way
        with pytest.raises(RuntimeError) as ours_error:
            run(gradviz)
        assert str(error).split(".")[0] == str(ours_error.value).split(".")[0]
        return
    ga, ours = run(gradviz)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6)
    assert ours.requires_grad == theirs.requires_grad
    if theirs.requires_grad:
        ours_edges = [None if n is None else n.name() for n, _ in ours.grad_fn.next_functions]
        theirs_edges = [None if n is None else n.name() for n, _ in theirs.grad_fn.next_functions]
        assert ours.grad_fn.name() == theirs.grad_fn.name()
        assert ours_edges == theirs_edges


@pytest.mark.parametrize("program", [
    lambda m: m.tensor([True]) - m.tensor([False]),
    lambda m: m.tensor([True]) - 1,
    lambda m: 1.0 - m.tensor([True]),
    lambda m: -m.tensor([True, False]),
])
def test_bool_arithmetic_errors_match_torch(program):
    with pytest.raises(RuntimeError) as theirs:
        program(torch)
    with pytest.raises(RuntimeError) as ours:
        program(gradviz)
    assert str(theirs.value).split(".")[0] == str(ours.value).split(".")[0]


def test_unsupported_operand_is_a_type_error():
    x = gradviz.tensor([1.0])
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        x * object()


@pytest.mark.parametrize("program", [
    lambda m: m.tensor([3e38], dtype=m.float32) * 10,
    lambda m: m.tensor([1.0]) / 0,
    lambda m: m.tensor([0.0]).log(),
    lambda m: m.tensor([-1.0]).sqrt(),
    lambda m: m.tensor([1000.0]).exp(),
])
def test_overflow_and_invalid_values_are_silent_like_torch(program, recwarn):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any numpy RuntimeWarning fails the test
        ours = program(gradviz)
    theirs = program(torch)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# Note [Compiled kernels]: add/sub/mul/div/neg run their ufunc inside a cached quiet context.
KERNEL_PROGRAMS = [
    lambda m: m.tensor([3e38, 1.0], dtype=m.float32) * 10,
    lambda m: m.tensor([1.0, 0.0]) / 0.0,
    lambda m: m.tensor([3e38], dtype=m.float32) + m.tensor([3e38], dtype=m.float32),
    lambda m: m.tensor([-3e38], dtype=m.float32) - 3e38,
    lambda m: -(m.tensor([float("inf")]) * 0),
]


@pytest.mark.parametrize("program", KERNEL_PROGRAMS)
def test_kernels_are_silent_and_leave_numpy_as_it_was(program):
    import warnings

    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = program(gradviz)
        with np.errstate(all="raise"):  # the user's own setting does not reach our ops
            again = program(gradviz)
    np.testing.assert_array_equal(ours.numpy(), program(torch).numpy())
    np.testing.assert_array_equal(again.numpy(), ours.numpy())
    assert np.geterr() == before
    with pytest.warns(RuntimeWarning):  # numpy outside gradviz still warns
        np.array([3e38], dtype=np.float32) * np.float32(10)


def test_kernels_stay_silent_while_another_thread_holds_their_context():
    # numpy lets go of the GIL in long loops, so another thread can be inside the kernels'
    # context; an op must then silence numpy the usual way, not fail or warn
    import threading
    import warnings

    from gradviz_ext import ops as ext_ops

    context = ext_ops.kernel_quiet_context()  # None when interpreted: no context to hold
    entered, release = threading.Event(), threading.Event()
    hold = (lambda: (entered.set(), release.wait(10))) if context is None else (
        lambda: context.run(lambda: (entered.set(), release.wait(10))))
    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(10)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            x = gradviz.tensor([3e38, 2.0], dtype=gradviz.float32, requires_grad=True)
            y = x * 10
        np.testing.assert_array_equal(y.detach().numpy(), np.array([np.inf, 20.0], np.float32))
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [10.0, 10.0])
    finally:
        release.set()
        holder.join()


# Arithmetic that records nothing takes a shorter path (gradviz_ext._ops._unrecorded_binary);
# these programs cross its edges: dtypes, scalars on either side, broadcasting, grad mode.
UNRECORDED_PROGRAMS = [
    lambda m, a, b: a * b,
    lambda m, a, b: a / b - 1.5,
    lambda m, a, b: 2 - a + b * 3,
    lambda m, a, b: 1 / (a + 0.25) * 7,
    lambda m, a, b: a.double() * b.float(),  # mixed dtypes: promotion
    lambda m, a, b: (a * 10).long() * 3 + (b * 10).long(),  # integers
    lambda m, a, b: a[:, None] * b,  # broadcasting
    lambda m, a, b: a * True - b * False,  # bools as scalars
    lambda m, a, b: a.half() * 100 - 1e-8,  # float16, and a scalar below its resolution
]


@pytest.mark.parametrize("program", UNRECORDED_PROGRAMS)
@pytest.mark.parametrize("mode", ["no_grad", "plain_inputs"])
def test_unrecorded_arithmetic_matches_torch(program, mode):
    values = [np.array([0.5, -2.0, 3.0], np.float32), np.array([4.0, 0.25, -1.0], np.float32)]
    results = []
    for m in (gradviz, torch):
        needs = mode == "no_grad"
        a, b = (m.tensor(v, requires_grad=needs) for v in values)
        if needs:
            with m.no_grad():
                out = program(m, a, b)
        else:
            out = program(m, a, b)
        assert out.grad_fn is None and not out.requires_grad
        results.append(out)
    ours, theirs = results
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_unrecorded_arithmetic_still_explains_shape_errors():
    a, b = gradviz.ones(3), gradviz.ones(4)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        a * b
    with gradviz.no_grad():
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            a - b


NARROW_PROGRAMS = {
    "uint8_plus_negative": lambda m, t: t(m.uint8) + -1,
    "uint8_minus_large": lambda m, t: t(m.uint8) - 300,
    "uint8_times_large": lambda m, t: t(m.uint8) * 300,
    "negative_plus_uint8": lambda m, t: -7 + t(m.uint8),
    "int8_times_large": lambda m, t: t(m.int8) * 1000,
    "int16_minus_large": lambda m, t: t(m.int16) - 40000,
    "float16_times_large": lambda m, t: t(m.float16) * 1e5,
    "float16_div_small": lambda m, t: t(m.float16) / 1e-5,
    "float16_plus_number": lambda m, t: t(m.float16) + 1000.7,
    "large_times_float16": lambda m, t: 7e4 * t(m.float16),
}


@pytest.mark.parametrize("program", sorted(NARROW_PROGRAMS))
def test_narrow_dtypes_with_numbers_match_torch(program):
    """Integers wrap like torch's; float16 with a number computes in float32 and rounds once.
    Run three times: a number seen again takes another path (Note [Scalar operands])."""
    fn = NARROW_PROGRAMS[program]
    for _ in range(3):
        results = []
        for m in (gradviz, torch):
            def make(dtype, m=m):
                if dtype in (m.float16,):
                    return m.tensor([0.5, 1.5, -2.25, 0.1], dtype=dtype)
                return m.tensor([1, 2, 100, 120], dtype=dtype)
            results.append(fn(m, make))
        got, want = results
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_float16_gradients_of_products_with_numbers_match_torch():
    grads = []
    for m in (gradviz, torch):
        x = m.tensor([0.5, 1.5, 3e-3], dtype=m.float16, requires_grad=True)
        ((x * 1e4) / 3e-3).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])

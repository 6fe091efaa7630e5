"""``ctx.set_output_grad_dtype`` (torch 2.14; docs/function_contract.md, rule 15). torch
2.13 has no oracle, so these follow that rule and PyTorch 2.14's documentation."""

from __future__ import annotations

import pytest

import gradviz as torch  # the documentation's examples read as torch code


def declaring(declared, got, hook_log=None):
    class Declares(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            t1, t2, t3 = x.sin(), x.cos(), x.sin() / x.cos()  # x.tan(): gradviz has no tan
            ctx.set_output_grad_dtype(*declared)
            return t1, t2, t3, "not a tensor"

        @staticmethod
        def backward(ctx, g1, g2, g3, g4):
            got.append((g1.dtype, g2.dtype, g3.dtype, g4))
            return (g1.to(torch.float64) * torch.cos(ctx_x[0]) - g2.to(torch.float64) * torch.sin(ctx_x[0])
                    + g3.to(torch.float64) / torch.cos(ctx_x[0]) ** 2)

    ctx_x = []
    return Declares, ctx_x


def emit(dtype):
    """Sums its inputs; its backward sends ones of ``dtype`` (a producer of another dtype)."""
    class Emit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            ctx.shapes = [t.shape for t in tensors]
            return sum(t.sum() for t in tensors)

        @staticmethod
        def backward(ctx, g):
            return tuple(torch.ones(shape, dtype=dtype) for shape in ctx.shapes)
    return Emit


def run_spec_example(declared, grads_dtype=torch.float64, use_grad=False):
    got = []
    Declares, ctx_x = declaring(declared, got)
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    ctx_x.append(x.detach())
    t1, t2, t3, tag = Declares.apply(x)
    hooked = []
    t1.grad_fn.register_prehook(lambda grads: hooked.append([None if g is None else g.dtype for g in grads]))
    loss = emit(grads_dtype).apply(t1, t2, t3)
    if use_grad:
        (gx,) = torch.autograd.grad(loss, x)
        return got, hooked, gx
    loss.backward()
    return got, hooked, x.grad


def test_the_spec_example_declares_float32_default_and_pass_through():
    got, hooked, grad = run_spec_example((torch.float32, None, None, None), torch.float32)
    # t1 declared float32 (cast), t2 and t3 declared None (float32 passes through uncast)
    assert got == [(torch.float32, torch.float32, torch.float32, None)]
    assert hooked == [[torch.float32, torch.float32, torch.float32, None]]  # hooks see the declared dtype
    assert grad.dtype == torch.float64  # .grad stays in the input's dtype


def test_declared_dtype_casts_and_default_follows_the_output():
    got, _, grad = run_spec_example((torch.float32, torch.float64, None, None), torch.float16)
    assert got == [(torch.float32, torch.float64, torch.float16, None)]
    assert grad.dtype == torch.float64


def test_without_a_declaration_gradients_arrive_in_the_outputs_dtype():
    got = []

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            got.append(g.dtype)
            return g * 2

    x = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    Plain.apply(x).to(torch.float32).sum().backward()
    assert got == [torch.float64]


def test_autograd_grad_result_stays_in_the_inputs_dtype():
    _, _, gx = run_spec_example((torch.float32, None, None, None), torch.float32, use_grad=True)
    assert gx.dtype == torch.float64


def test_materialized_zeros_use_the_declared_dtype():
    got = []

    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_output_grad_dtype(torch.float32, None)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            got.append((g1.dtype, g2.dtype))
            return g1.to(torch.float64) * 2

    x = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    a, b = Two.apply(x)
    b.sum().backward()
    a2, _ = Two.apply(x)
    a2.sum().backward()
    assert got == [(torch.float32, torch.float64), (torch.float32, torch.float64)]


def fn_declaring(*declared, outputs=2, non_diff=False):
    class Declares(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_output_grad_dtype(*declared)
            results = (x * 2, x.argmax())[:outputs] if outputs <= 2 else (x * 2, x * 3, "s")
            if non_diff:
                ctx.mark_non_differentiable(results[0])
            return results

        @staticmethod
        def backward(ctx, *grads):
            return grads[0]
    return Declares


def test_only_once():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_output_grad_dtype(None)
            ctx.set_output_grad_dtype(None)
            return x * 2

    with pytest.raises(RuntimeError, match="set_output_grad_dtype can only be called once"):
        Twice.apply(torch.tensor([1.0], requires_grad=True))


# torch 2.14.1's messages, read from its libtorch_python.so (`strings`; torch 2.14 is not a
# test dependency, 2.13 has no set_output_grad_dtype): the exact text users will search for.
TORCH_COUNT_MESSAGE = ("set_output_grad_dtype expected the number of declarations to match the "
                       "number of outputs: the Function returned {outputs} values but "
                       "{declared} declarations were provided")
TORCH_CONCRETE_MESSAGE = ("set_output_grad_dtype: got a concrete dtype for output {index}, but that "
                          "output is not a differentiable tensor (it is a non-tensor, was marked "
                          "non-differentiable, or has a non-differentiable dtype). Pass None for "
                          "output {index} instead.")


def test_the_count_must_match_the_outputs():
    with pytest.raises(RuntimeError) as info:
        fn_declaring(None).apply(torch.tensor([1.0], requires_grad=True))
    assert str(info.value) == TORCH_COUNT_MESSAGE.format(outputs=2, declared=1)


@pytest.mark.parametrize("case", ["integer_output", "non_tensor_output", "marked_non_differentiable"])
def test_concrete_dtype_for_an_output_without_gradient(case):
    if case == "integer_output":
        fn, index = fn_declaring(None, torch.float32), 1
    elif case == "non_tensor_output":
        fn, index = fn_declaring(None, None, torch.float32, outputs=3), 2
    else:
        fn, index = fn_declaring(torch.float32, None, non_diff=True), 0
    with pytest.raises(RuntimeError) as info:
        fn.apply(torch.tensor([1.0, 2.0], requires_grad=True))
    message = str(info.value)
    assert message.startswith(TORCH_CONCRETE_MESSAGE.format(index=index)), message


def test_non_dtype_declaration_is_a_type_error():
    with pytest.raises(TypeError, match="expects a dtype or None"):
        fn_declaring("float32", None).apply(torch.tensor([1.0], requires_grad=True))

"""gradviz.func.vmap (a loop, Note [vmap is a loop]) against torch.func.vmap."""

import numpy as np
import pytest
import torch
from torch.func import vmap as tvmap

import gradviz
from gradviz.func import vmap as gvmap

RNG = np.random.default_rng(1)


def _both(program, *arrays, **vmap_kwargs):
    ours = program(gradviz, gvmap, *[gradviz.tensor(a) for a in arrays], **vmap_kwargs)
    theirs = program(torch, tvmap, *[torch.tensor(a) for a in arrays], **vmap_kwargs)
    return ours, theirs


def _close(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _close(o, t)
    elif isinstance(theirs, dict):
        for key in theirs:
            _close(ours[key], theirs[key])
    elif isinstance(theirs, torch.Tensor):
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        assert ours == theirs


PROGRAMS = {
    "sum_rows": lambda m, vmap, x, y: vmap(lambda r: r.sum())(x),
    "in_dims_tuple": lambda m, vmap, x, y: vmap(lambda a, b: a * b, in_dims=(1, None))(x, y[0, 0]),
    "out_dims": lambda m, vmap, x, y: vmap(lambda a: a * 2, out_dims=1)(x),
    "nested": lambda m, vmap, x, y: vmap(vmap(lambda a, b: a * b))(x, y),
    "outer_product": lambda m, vmap, x, y: vmap(vmap(lambda a, b: a * b, in_dims=(None, 0)),
                                               in_dims=(0, None))(x[:, 0], y[0]),
    "tuple_outputs": lambda m, vmap, x, y: vmap(lambda a: (a.sum(), a * 3), out_dims=(0, 1))(x),
    "dict_input": lambda m, vmap, x, y: vmap(lambda d: d["a"] @ d["b"], in_dims=({"a": 0, "b": None},))(
        {"a": x, "b": y[0]}),
    "negative_in_dim": lambda m, vmap, x, y: vmap(lambda a: a.softmax(0), in_dims=-1)(x),
    "matmul_batch": lambda m, vmap, x, y: vmap(lambda a, b: a @ b, in_dims=(0, None))(x, y.t()),
    "unbatched_output": lambda m, vmap, x, y: vmap(lambda a: (a * 2, y), out_dims=(0, None))(x),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_programs_match_torch(name):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y = RNG.standard_normal((3, 4)).astype(np.float32)
    if name == "unbatched_output":
        ours = PROGRAMS[name](gradviz, gvmap, gradviz.tensor(x), gradviz.tensor(y))
        theirs = PROGRAMS[name](torch, tvmap, torch.tensor(x), torch.tensor(y))
        _close(ours[0], theirs[0])
        return
    _close(*_both(PROGRAMS[name], x, y))


def test_gradient_flows_through_vmap():
    results = []
    for m, vmap in ((gradviz, gvmap), (torch, tvmap)):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        w = m.tensor([0.5, -1.0], requires_grad=True)
        vmap(lambda r: (r * w).sum() ** 2)(x).sum().backward()
        results.append((x.grad.tolist(), w.grad.tolist()))
    assert results[0] == results[1]


ERRORS = [
    ("batch sizes", lambda m, vmap, x, y: vmap(lambda a, b: a + b)(x, y[:2]),
     "Expected all tensors to have the same size in the mapped dimension"),
    ("in_dims structure", lambda m, vmap, x, y: vmap(lambda a, b: a + b, in_dims=(0,))(x, y),
     "in_dims is not compatible with the structure of `inputs`"),
    ("in_dims type", lambda m, vmap, x, y: vmap(lambda a: a, in_dims="a")(x),
     "expected `in_dims` to be int or a (potentially nested) tuple"),
    ("nothing batched", lambda m, vmap, x, y: vmap(lambda a, b: a + b, in_dims=(None, None))(x, y),
     "Expected at least one Tensor to vmap over"),
    ("non-tensor in_dim", lambda m, vmap, x, y: vmap(lambda a, k: a * k, in_dims=(0, 0))(x, 3),
     "We cannot vmap over non-Tensor arguments"),
    ("in_dim range", lambda m, vmap, x, y: vmap(lambda a: a, in_dims=5)(x),
     "so expected in_dim to satisfy -2 <= in_dim < 2"),
    ("non-tensor output", lambda m, vmap, x, y: vmap(lambda a: 3)(x),
     "must only return Tensors, got type <class 'int'>"),
    ("randomness value", lambda m, vmap, x, y: vmap(lambda a: a, randomness="x")(x),
     "Only allowed values for randomness are 'error', 'different', or 'same'. Got x"),
    ("random op", lambda m, vmap, x, y: vmap(lambda a: a + m.randn(4))(x),
     "called random operation while in randomness error mode"),
]


@pytest.mark.parametrize("name,program,phrase", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, program, phrase):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for m, vmap in ((gradviz, gvmap), (torch, tvmap)):
        with pytest.raises((ValueError, RuntimeError)) as info:
            program(m, vmap, m.tensor(x), m.tensor(x))
        assert phrase in str(info.value), (m.__name__, str(info.value))


def test_randomness_same_and_different():
    x = gradviz.zeros(3, 2)
    same = gvmap(lambda a: a + gradviz.randn(2), randomness="same")(x)
    assert same[0].tolist() == same[1].tolist() == same[2].tolist()
    different = gvmap(lambda a: a + gradviz.randn(2), randomness="different")(x)
    assert different[0].tolist() != different[1].tolist()


# ---- custom Functions (contract rule 14) -----------------------------------------------

def _functions(m):
    calls = []

    class NoSupport(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Both(NoSupport):
        generate_vmap_rule = True

        @staticmethod
        def vmap(info, in_dims, x):
            return x * 2, 0

    class CtxStyle(m.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Generated(NoSupport):
        generate_vmap_rule = True

    class Rule(m.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

        @staticmethod
        def vmap(info, in_dims, x, k):
            calls.append((info.batch_size, info.randomness, tuple(in_dims), tuple(x.shape), k))
            return Rule.apply(x, k) + 1, in_dims[0]

    return NoSupport, Both, CtxStyle, Generated, Rule, calls


@pytest.mark.parametrize("which,phrase", [
    (0, "You tried to vmap over NoSupport, but it does not have vmap support. Please override and "
        "implement the vmap staticmethod or set generate_vmap_rule=True."),
    (1, "You tried to vmap over Both, but it has both generate_vmap_rule=True and an overridden "
        "vmap staticmethod"),
    (2, "it must override the setup_context staticmethod"),
])
def test_function_vmap_support_errors_match_torch(which, phrase):
    for m, vmap in ((gradviz, gvmap), (torch, tvmap)):
        fn = _functions(m)[which]
        x = m.ones(3, 2)
        with pytest.raises(RuntimeError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
            vmap(fn.apply)(x)
        with pytest.raises(RuntimeError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
            vmap(lambda a: fn.apply(a) + 1)(x)


def test_function_vmap_rule_and_generated_rule_match_torch():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    results = []
    for m, vmap in ((gradviz, gvmap), (torch, tvmap)):
        _, _, _, Generated, Rule, calls = _functions(m)
        out_rule = vmap(Rule.apply, in_dims=(1, None))(m.tensor(x), 3.0)
        out_generated = vmap(Generated.apply)(m.tensor(x))
        results.append((out_rule.numpy().tolist(), out_generated.numpy().tolist(), calls[:1]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    # the rule is called with the whole batch, in_dims per argument, randomness "error"
    assert results[0][2] == results[1][2] == [(3, "error", (1, None), (2, 3), 3.0)]


def test_function_rule_inside_func_gives_torch_values():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    values = []
    for m, vmap in ((gradviz, gvmap), (torch, tvmap)):
        Rule = _functions(m)[4]
        values.append(vmap(lambda a: Rule.apply(a * 2, 2.0).sum())(m.tensor(x)).numpy())
    np.testing.assert_allclose(values[0], values[1], rtol=1e-6)

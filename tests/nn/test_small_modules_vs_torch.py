"""The small modules and losses teaching code uses against torch 2.13: padding modules and
``F.pad`` in every mode, channel dropout, the margin/embedding/likelihood losses, and the small
activations and pools (values, gradients of inputs and parameters in float32 and float64, all
reductions, repr, and torch's errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz

DTYPES = ["float32", "float64"]


def lib_of(t):
    return gradviz if isinstance(t, gradviz.Tensor) else torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def second_order(fn, arrays, seed=3):
    """d/dx of sum(grad(fn(x)) * probe), with the graph of the first derivative, against
    torch's, in float64."""
    results = []
    for lib in (gradviz, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *xs)
        probe = lib.tensor(np.random.default_rng(seed).standard_normal(tuple(out.shape)))
        grads = lib.autograd.grad((out * probe).sum(), xs, create_graph=True)
        total = sum((g * g).sum() for g in grads)
        # piecewise-linear losses: the first derivative is constant, in both libraries
        results.append(lib.autograd.grad(total, xs, allow_unused=True) if total.requires_grad
                       else [None] * len(xs))
    for i, (a, b) in enumerate(zip(*results)):
        if b is not None:  # torch may answer a ZeroTensor, which .numpy() refuses
            b = torch.from_numpy(b.detach().numpy(force=True).copy())
        close(a, b, f"second-order grad of input {i}")


# ---- padding ---------------------------------------------------------------------------------

PAD_CASES = [
    ((2, 3, 5), (2, 1), "reflect"),
    ((3, 5), (0, 4), "reflect"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "reflect"),
    ((3, 4, 5), (2, 2, 2, 2), "reflect"),
    ((2, 3, 5), (-1, 3), "reflect"),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "reflect"),
    ((2, 3, 5), (4, 6), "replicate"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "replicate"),
    ((2, 3, 4, 5), (-2, 2, 1, -1), "replicate"),
    ((2, 3, 5), (5, 2), "circular"),
    ((2, 3, 4, 5), (1, 2, 3, 4), "circular"),
    ((2, 3, 5), (-1, 2), "circular"),
    ((2, 3, 4, 5), (1, 2, 3, 0), "constant"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,pads,mode", PAD_CASES, ids=[f"{m}-{s}-{p}" for s, p, m in PAD_CASES])
def test_pad_modes(shape, pads, mode, dtype):
    compare_layer(lambda nn: nn.Identity(), [rand(*shape)], dtype,
                  forward=lambda layer, t: lib_of(t).nn.functional.pad(t, pads, mode))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_second_order(mode):
    second_order(lambda lib, x: lib.nn.functional.pad(x, (2, 1, 1, 2), mode) ** 2,
                 [rand(2, 3, 4, 5)])


PAD_MODULES = [
    ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad1d", ((1, 3),), (3, 5)),
    ("ReflectionPad2d", (1,), (2, 3, 4, 5)), ("ReflectionPad2d", ((1, 0, 2, 3),), (3, 4, 5)),
    ("ReplicationPad1d", (3,), (2, 3, 5)), ("ReplicationPad2d", ((3, 0, 1, 2),), (2, 3, 4, 5)),
    ("CircularPad1d", (2,), (2, 3, 5)), ("CircularPad2d", ((1, 2, 0, 3),), (2, 3, 4, 5)),
    ("ZeroPad1d", ((2, 1),), (2, 3, 5)), ("ZeroPad2d", (2,), (2, 3, 4, 5)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 5)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0), (3, 4, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,shape", PAD_MODULES, ids=[f"{n}-{a}" for n, a, _ in PAD_MODULES])
def test_pad_modules(name, args, shape, dtype):
    compare_layer(lambda nn: getattr(nn, name)(*args), [rand(*shape)], dtype)
    assert repr(getattr(gradviz.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


@pytest.mark.parametrize("call,phrase", [
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (3, 3, 0, 0), "reflect"),
     "Padding size should be less than the corresponding input dimension"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 5), (5, 0), "reflect"), "Argument #4"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5), (0, 0, 3, 3), "reflect"), "Argument #6"),
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (4, 0, 0, 0), "circular"),
     "wrapping around more than once"),
    (lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3, 3), (1, 1), "reflect"),
     "Padding size 2 is not supported for 4D input tensor"),
    (lambda lib: lib.nn.functional.pad(lib.ones(5), (1, 1), "replicate"),
     "Padding size 2 is not supported for 1D input tensor"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3), (1, 1), "reflect", 1.0),
     "doesn't take in value argument"),
    (lambda lib: lib.nn.functional.pad(lib.ones(2, 3), (1, 1), "mirror"),
     "Unrecognised padding mode mirror"),
    (lambda lib: lib.nn.ReflectionPad2d(2)(lib.ones(3)), "Padding length should be less than"),
    (lambda lib: lib.nn.ZeroPad2d(2)(lib.ones(3)), "Padding length should be less than"),
    (lambda lib: lib.nn.CircularPad2d(2)(lib.ones(3)), "expected 3D or 4D input (got 1D input)"),
    (lambda lib: lib.nn.CircularPad1d(2)(lib.ones(2, 3, 4, 5)), "expected 2D or 3D input (got 4D input)"),
])
def test_pad_errors(call, phrase):
    same_error(lambda: call(gradviz), lambda: call(torch), phrase)


# ---- channel dropout -------------------------------------------------------------------------

CHANNEL_DROPOUT = [("dropout1d", "Dropout1d", (64, 50, 7)), ("dropout1d", "Dropout1d", (500, 7)),
                   ("dropout2d", "Dropout2d", (64, 50, 3, 4)),
                   ("dropout3d", "Dropout3d", (32, 50, 2, 3, 2)),
                   ("dropout3d", "Dropout3d", (500, 2, 3, 2))]




@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("fname,mname,shape", CHANNEL_DROPOUT, ids=[f"{f}-{s}" for f, _, s in CHANNEL_DROPOUT])
def test_channel_dropout(fname, mname, shape, p):
    """Whole channels are zeroed, the rest scaled by 1/(1-p); the dropped fraction is p
    (binomial, 5 sigma), as torch's; the gradient is the same mask; eval is the identity."""
    slices = int(np.prod(shape[:len(shape) - {"dropout1d": 1, "dropout2d": 2, "dropout3d": 3}[fname]]))
    identity, nodes = [], []
    for lib in (gradviz, torch):
        x = lib.ones(*shape, dtype=lib.float64, requires_grad=True)
        out = getattr(lib.nn.functional, fname)(x, p)
        out.backward(lib.ones_like(out))
        values = out.detach().numpy().reshape(slices, -1)
        assert ((values == 0) | np.isclose(values, 1 / (1 - p))).all()
        assert (values == values[:, :1]).all(), f"{lib.__name__}: a channel was partly dropped"
        np.testing.assert_array_equal(x.grad.numpy().reshape(slices, -1), values)
        dropped = (values[:, 0] == 0).mean()
        assert abs(dropped - p) < 5 * np.sqrt(p * (1 - p) / slices), (lib.__name__, dropped)
        layer = getattr(lib.nn, mname)(p)
        assert layer(x).requires_grad
        layer.eval()
        assert layer(x).equal(x)
        out = getattr(lib.nn.functional, fname)(x, p, training=False)
        identity.append(out is x)
        nodes.append(out.grad_fn and out.grad_fn.name())
    assert identity[0] == identity[1] and nodes[0] == nodes[1]
    assert repr(getattr(gradviz.nn, mname)(p, True)) == repr(getattr(torch.nn, mname)(p, True))


@pytest.mark.parametrize("fname", ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout"])
def test_dropout_edge_probabilities(fname):
    for lib in (gradviz, torch):
        shape = (2, 3, 4, 5) if fname != "dropout1d" else (2, 3, 4)
        x = lib.tensor(rand(*shape), requires_grad=True)
        assert getattr(lib.nn.functional, fname)(x, 0.0, training=True).equal(x)
        out = getattr(lib.nn.functional, fname)(x, 1.0, training=True)
        assert (out.detach().numpy() == 0).all()
        out.sum().backward()
        assert (x.grad.numpy() == 0).all()


def test_channel_dropout_inplace():
    for lib in (gradviz, torch):
        x = lib.ones(8, 20, 3, dtype=lib.float64)
        out = lib.nn.functional.dropout1d(x, 0.5, inplace=True)
        assert out is x and ((x.numpy() == 0) | (x.numpy() == 2)).all()
        y = lib.ones(20, 3, dtype=lib.float64)
        lib.nn.functional.dropout1d(y, 0.5, inplace=True)
        assert (y.numpy() == 0).any() and (y.numpy() == 2).any()


@pytest.mark.parametrize("call,phrase", [
    (lambda lib: lib.nn.functional.dropout1d(lib.ones(2, 3, 4, 5)), "dropout1d: Expected 2D or 3D input"),
    (lambda lib: lib.nn.functional.dropout2d(lib.ones(2, 3, 4), 1.5), "dropout probability has to be between 0 and 1"),
    (lambda lib: lib.nn.Dropout3d(-0.1), "dropout probability has to be between 0 and 1, but got -0.1"),
    (lambda lib: lib.nn.AlphaDropout(2), "dropout probability has to be between 0 and 1"),
    (lambda lib: lib.nn.functional.dropout2d(lib.ones(3), 0.5), "Feature dropout requires at least 2 dimensions"),
])
@pytest.mark.filterwarnings("ignore:dropout2d. Received a 1-D input")
def test_dropout_errors(call, phrase):
    same_error(lambda: call(gradviz), lambda: call(torch), phrase)


@pytest.mark.parametrize("fname,shape,phrase", [
    ("dropout2d", (2, 3, 4), "assuming that channel-wise 1D dropout behavior is desired"),
    ("dropout2d", (2, 3), "Received a 2-D input to dropout2d, which is deprecated"),
    ("dropout3d", (2, 3, 4), "Received a 3-D input to dropout3d, which is deprecated"),
])
def test_dropout_warnings(fname, shape, phrase):
    for lib in (gradviz, torch):
        with pytest.warns(UserWarning, match=phrase):
            getattr(lib.nn.functional, fname)(lib.ones(*shape), 0.5)


def test_alpha_dropout():
    """The two values an input of zeros (and of ones) maps to are torch's; the dropped
    fraction is p; a standard normal input keeps mean 0 and variance 1; eval is the identity."""
    p = 0.3
    values = {}
    for lib in (gradviz, torch):
        zeros = lib.nn.functional.alpha_dropout(lib.zeros(100000, dtype=lib.float64), p, True).numpy()
        ones = lib.nn.functional.alpha_dropout(lib.ones(100000, dtype=lib.float64), p, True).numpy()
        values[lib] = (np.unique(zeros), np.unique(ones))
        assert abs((zeros == zeros.min()).mean() - p) < 0.01
        x = lib.tensor(rand(200000, seed=4))
        out = lib.nn.AlphaDropout(p)(x).numpy()
        assert abs(out.mean()) < 0.02 and abs(out.var() - 1) < 0.02
        layer = lib.nn.AlphaDropout(p).eval()
        assert layer(x) is x
    for a, b in zip(values[gradviz], values[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    x = gradviz.tensor(rand(3, 4), requires_grad=True)
    out = gradviz.nn.functional.alpha_dropout(x, p, True)
    out.sum().backward()
    kept = out.detach().numpy() != values[torch][0].min()
    a = values[torch][1].max() - values[torch][0].max()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, a, 0.0), rtol=1e-12)


# ---- losses ----------------------------------------------------------------------------------

def signs(*shape, seed=5):
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)


def counts(*shape, seed=6):
    return np.random.default_rng(seed).poisson(2.0, shape).astype(np.float64)


def positive(*shape, seed=7):
    return np.random.default_rng(seed).uniform(0.2, 2.0, shape)


def labels01(*shape, seed=8):
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(np.float64)


# (module name, functional name, module kwargs, inputs, which inputs require grad)
LOSS_CASES = [
    ("MarginRankingLoss", "margin_ranking_loss", {}, [rand(6), rand(6, seed=1), signs(6)], [1, 1, 0]),
    ("MarginRankingLoss", "margin_ranking_loss", dict(margin=0.7), [rand(4, 3), rand(4, 3, seed=1), signs(4, 3)], [1, 1, 0]),
    ("HingeEmbeddingLoss", "hinge_embedding_loss", {}, [rand(5, 4), signs(5, 4)], [1, 0]),
    ("HingeEmbeddingLoss", "hinge_embedding_loss", dict(margin=0.3), [positive(7), signs(7)], [1, 0]),
    ("SoftMarginLoss", "soft_margin_loss", {}, [rand(5, 4), signs(5, 4)], [1, 0]),
    ("CosineEmbeddingLoss", "cosine_embedding_loss", {}, [rand(6, 5), rand(6, 5, seed=1), signs(6)], [1, 1, 0]),
    ("CosineEmbeddingLoss", "cosine_embedding_loss", dict(margin=-0.2), [rand(6, 5), rand(6, 5, seed=2), signs(6)], [1, 1, 0]),
    ("CosineEmbeddingLoss", "cosine_embedding_loss", dict(margin=0.1), [rand(5), rand(5, seed=1), np.array(-1.0)], [1, 1, 0]),
    ("TripletMarginLoss", "triplet_margin_loss", {}, [rand(6, 4), rand(6, 4, seed=1), rand(6, 4, seed=2)], [1, 1, 1]),
    ("TripletMarginLoss", "triplet_margin_loss", dict(margin=2.0, p=1.0, swap=True), [rand(6, 4), rand(6, 4, seed=1), rand(6, 4, seed=2)], [1, 1, 1]),
    ("TripletMarginLoss", "triplet_margin_loss", dict(p=3.0, eps=1e-3, swap=True), [rand(4), rand(4, seed=1), rand(4, seed=2)], [1, 1, 1]),
    ("PoissonNLLLoss", "poisson_nll_loss", {}, [rand(4, 5), counts(4, 5)], [1, 1]),
    ("PoissonNLLLoss", "poisson_nll_loss", dict(log_input=False), [positive(4, 5), counts(4, 5)], [1, 1]),
    ("PoissonNLLLoss", "poisson_nll_loss", dict(full=True), [rand(4, 5), counts(4, 5) + 2.0], [1, 1]),
    ("PoissonNLLLoss", "poisson_nll_loss", dict(full=True, log_input=False, eps=0.1), [positive(4, 5), counts(4, 5)], [1, 0]),
    ("GaussianNLLLoss", "gaussian_nll_loss", {}, [rand(4, 3), rand(4, 3, seed=1), positive(4, 3)], [1, 1, 1]),
    ("GaussianNLLLoss", "gaussian_nll_loss", dict(full=True), [rand(4, 3), rand(4, 3, seed=1), positive(4)], [1, 1, 1]),
    ("GaussianNLLLoss", "gaussian_nll_loss", dict(eps=0.5), [rand(4, 3), rand(4, 3, seed=1), positive(4, 1)], [1, 1, 1]),
    ("GaussianNLLLoss", "gaussian_nll_loss", {}, [rand(2, 3, 4), rand(2, 3, 4, seed=1), positive(2, 1, 4)], [1, 1, 1]),
    ("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", {}, [rand(5, 4), labels01(5, 4)], [1, 1]),
    ("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", {}, [rand(4), labels01(4)], [1, 0]),
]
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,fname,kw,inputs,grads", LOSS_CASES,
                         ids=[f"{n}-{i}" for i, (n, *_) in enumerate(LOSS_CASES)])
def test_loss_module(name, fname, kw, inputs, grads, reduction, dtype):
    compare_layer(lambda nn: getattr(nn, name)(**kw, reduction=reduction), inputs, dtype,
                  grad_inputs=[bool(g) for g in grads])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,fname,kw,inputs,grads", LOSS_CASES,
                         ids=[f"{n}-{i}" for i, (n, *_) in enumerate(LOSS_CASES)])
def test_loss_functional_and_second_order(name, fname, kw, inputs, grads, reduction):
    compare_layer(lambda nn: nn.Identity(), inputs, "float32", grad_inputs=[bool(g) for g in grads],
                  forward=lambda layer, *xs: getattr(lib_of(xs[0]).nn.functional, fname)(
                      *xs, **kw, reduction=reduction))
    grad_arrays = [a for a, g in zip(inputs, grads) if g]
    fixed = [a for a, g in zip(inputs, grads) if not g]

    def fn(lib, *xs):
        it, fx = iter(xs), iter(fixed)
        args = [next(it) if g else lib.tensor(next(fx)) for g in grads]
        return getattr(lib.nn.functional, fname)(*args, **kw, reduction=reduction)
    second_order(fn, grad_arrays)


def test_multilabel_soft_margin_weight_and_gaussian_float_var():
    w = positive(4, seed=9)
    for lib in (gradviz, torch):  # the module's weight is a buffer, as torch's
        assert [n for n, _ in lib.nn.MultiLabelSoftMarginLoss(weight=lib.tensor(w)).named_buffers()] == ["weight"]
    for reduction in REDUCTIONS:
        compare_layer(lambda nn: nn.Identity(), [rand(5, 4), labels01(5, 4), w], "float64",
                      forward=lambda layer, x, y, wt: lib_of(x).nn.functional.multilabel_soft_margin_loss(
                          x, y, weight=wt, reduction=reduction))
        compare_layer(lambda nn: nn.Identity(), [rand(5, 4), rand(5, 4, seed=1)], "float64",
                      forward=lambda layer, x, y: lib_of(x).nn.functional.gaussian_nll_loss(
                          x, y, 0.7, reduction=reduction))


def test_loss_module_defaults_and_repr():
    for name, _, kw, *_ in LOSS_CASES:
        g, t = getattr(gradviz.nn, name)(**kw), getattr(torch.nn, name)(**kw)
        assert repr(g) == repr(t)
        for attr in ("reduction", "margin", "p", "eps", "swap", "log_input", "full"):
            assert getattr(g, attr, None) == getattr(t, attr, None), (name, attr)


LOSS_ERRORS = [
    (lambda lib: lib.nn.functional.margin_ranking_loss(lib.ones(3), lib.ones(3), lib.ones(1, 3)),
     "All input tensors should have same dimension"),
    (lambda lib: lib.nn.functional.cosine_embedding_loss(lib.ones(2, 3), lib.ones(2, 3), lib.ones(2, 1)),
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda lib: lib.nn.functional.cosine_embedding_loss(lib.ones(3), lib.ones(3), lib.ones(2)),
     "1D target tensor expects 2D input tensors, but found inputs with sizes [3] and [3]"),
    (lambda lib: lib.nn.functional.cosine_embedding_loss(lib.ones(2, 3), lib.ones(2, 3), lib.tensor(1.0)),
     "0D target tensor expects 1D input tensors"),
    (lambda lib: lib.nn.functional.triplet_margin_loss(lib.ones(2, 3), lib.ones(2, 3), lib.ones(3)),
     "anchor 2D, positive 2D, and negative 1D inputs"),
    (lambda lib: lib.nn.functional.triplet_margin_loss(lib.ones(3), lib.ones(3), lib.ones(3), margin=0),
     "margin must be greater than 0, got 0"),
    (lambda lib: lib.nn.TripletMarginLoss(margin=-1.0), "expected margin to be greater than 0"),
    (lambda lib: lib.nn.functional.soft_margin_loss(lib.ones(2), lib.ones(2), reduction="avg"),
     "avg is not a valid value for reduction"),
    (lambda lib: lib.nn.HingeEmbeddingLoss(reduction="avg")(lib.ones(2), lib.ones(2)),
     "avg is not a valid value for reduction"),
    (lambda lib: lib.nn.functional.poisson_nll_loss(lib.ones(2), lib.ones(2), reduction="avg"),
     "avg is not a valid value for reduction"),
    (lambda lib: lib.nn.functional.multilabel_soft_margin_loss(lib.ones(2, 3), lib.ones(2, 3), reduction="x"),
     "x is not valid"),
    (lambda lib: lib.nn.functional.gaussian_nll_loss(lib.ones(2, 3), lib.ones(2, 3), lib.ones(3, 3)),
     "var is of incorrect size"),
    (lambda lib: lib.nn.functional.gaussian_nll_loss(lib.ones(2, 3), lib.ones(2, 3), -lib.ones(2, 3)),
     "var has negative entry/entries"),
    (lambda lib: lib.nn.functional.gaussian_nll_loss(lib.ones(2, 3), lib.ones(2, 3), -1.0),
     "var has negative entry/entries"),
    (lambda lib: lib.nn.GaussianNLLLoss(reduction="avg")(lib.ones(2), lib.ones(2), lib.ones(2)),
     "avg is not valid"),
]


@pytest.mark.parametrize("call,phrase", LOSS_ERRORS, ids=[p for _, p in LOSS_ERRORS])
def test_loss_errors(call, phrase):
    same_error(lambda: call(gradviz), lambda: call(torch), phrase)


def test_legacy_size_average():
    x, y = rand(4, 3), signs(4, 3)
    for kw in (dict(size_average=False), dict(reduce=False)):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            compare_layer(lambda nn: nn.SoftMarginLoss(**kw), [x, y], "float64", grad_inputs=[True, False])


# ---- small activations, pools, Unfold/Fold, Softmax2d ----------------------------------------

def spaced(*shape, seed=10):
    """Distinct values (no ties inside a pooling window), away from the shrink/threshold kinks."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) - np.prod(shape) / 2 + 0.25) / 7


SMALL_LAYERS = [
    ("GLU", (), (4, 6)), ("GLU", (1,), (3, 4, 5)), ("GLU", (-3,), (4, 3, 2)),
    ("Threshold", (0.1, 20.0), (4, 5)), ("Threshold", (-0.5, -2.0), (2, 3, 4)),
    ("Hardshrink", (), (4, 5)), ("Hardshrink", (1.3,), (3, 4, 5)),
    ("Softshrink", (), (4, 5)), ("Softshrink", (0.9,), (3, 4, 5)),
    ("Softmax2d", (), (2, 3, 4, 5)), ("Softmax2d", (), (3, 4, 5)),
    ("AdaptiveMaxPool1d", (3,), (2, 3, 7)), ("AdaptiveMaxPool1d", (5,), (3, 5)),
    ("AdaptiveMaxPool1d", (4, True), (2, 3, 10)),
    ("AdaptiveMaxPool2d", ((2, 3),), (2, 3, 5, 7)), ("AdaptiveMaxPool2d", (3,), (3, 7, 4)),
    ("AdaptiveMaxPool2d", ((None, 2), True), (2, 2, 5, 6)), ("AdaptiveMaxPool2d", ((6, 8),), (1, 2, 5, 6)),
    ("Unfold", (2,), (2, 3, 4, 5)), ("Unfold", ((2, 3), 1, 1, 2), (2, 3, 4, 5)),
    ("Fold", ((4, 5), 2), (2, 12, 12)), ("Fold", ((3, 4), (2, 2), 1, 1), (2, 8, 20)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,shape", SMALL_LAYERS, ids=[f"{n}-{a}-{s}" for n, a, s in SMALL_LAYERS])
def test_small_layers(name, args, shape, dtype):
    g_outs, t_outs = compare_layer(lambda nn: getattr(nn, name)(*args), [spaced(*shape)], dtype)
    for a, b in zip(g_outs, t_outs):
        if not b.is_floating_point():  # the indices of return_indices
            np.testing.assert_array_equal(a.numpy(), b.numpy())
            assert a.dtype == gradviz.int64
    assert repr(getattr(gradviz.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


SMALL_FUNCTIONS = [
    ("glu", dict(dim=0), (4, 3)), ("threshold", dict(threshold=0.2, value=-1.0), (3, 4)),
    ("hardshrink", dict(lambd=0.2), (3, 4)), ("softshrink", dict(lambd=0.2), (3, 4)),
    ("adaptive_max_pool1d", dict(output_size=2), (2, 3, 5)),
    ("adaptive_max_pool2d", dict(output_size=(3, 2)), (2, 3, 5, 4)),
]


@pytest.mark.parametrize("fname,kw,shape", SMALL_FUNCTIONS, ids=[f for f, *_ in SMALL_FUNCTIONS])
def test_small_functions_and_second_order(fname, kw, shape):
    compare_layer(lambda nn: nn.Identity(), [spaced(*shape)], "float32",
                  forward=lambda layer, x: getattr(lib_of(x).nn.functional, fname)(x, **kw))
    second_order(lambda lib, x: getattr(lib.nn.functional, fname)(x, **kw) ** 2, [spaced(*shape)])


def test_threshold_inplace():
    for dtype in DTYPES:
        compare_layer(lambda nn: nn.Threshold(0.1, 2.0, inplace=True), [spaced(3, 4)], dtype,
                      forward=lambda layer, x: layer(x * 1.0))


def test_adaptive_max_pool_ties_take_the_first():
    x = np.array([[[[2.0, 2.0, 0.0], [2.0, 2.0, 2.0], [0.0, 2.0, 2.0]]]])
    compare_layer(lambda nn: nn.AdaptiveMaxPool2d(2, return_indices=True), [x], "float64")
    x = np.array([[[1.0, np.nan, 2.0, np.nan, 0.0, 3.0]]])
    for size in (1, 2, 3):
        g = gradviz.nn.functional.adaptive_max_pool1d(gradviz.tensor(x), size, True)
        t = torch.nn.functional.adaptive_max_pool1d(torch.tensor(x), size, True)
        close(g[0], t[0], f"NaN values, size {size}")
        assert g[1].tolist() == t[1].tolist(), (size, g[1], t[1])
    g = gradviz.nn.functional.adaptive_max_pool2d(gradviz.tensor(x), 2, True)[1].tolist()
    t = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), 2, True)[1].tolist()
    assert g == t


SMALL_ERRORS = [
    (lambda lib: lib.nn.functional.glu(lib.ones(3, 5)), "Halving dimension must be even, but dimension 1 is size 5"),
    (lambda lib: lib.nn.GLU(0)(lib.ones(3, 4)), "Halving dimension must be even"),
    (lambda lib: lib.nn.functional.glu(lib.tensor(1.0)), "glu does not support scalars"),
    (lambda lib: lib.nn.functional.softshrink(lib.ones(3), -1.0), "lambda must be in range [0, 3.40282e+38] for input dtype Float"),
    (lambda lib: lib.nn.functional.softshrink(lib.ones(3, dtype=lib.float64), -0.5), "lambda must be in range"),
    (lambda lib: lib.nn.Softmax2d()(lib.ones(2, 3)), "Softmax2d: expected input to be 3D or 4D, got 2D instead"),
    (lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.ones(2, 3), 2), "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: [2, 3]"),
    (lambda lib: lib.nn.functional.adaptive_max_pool1d(lib.ones(2, 3, 4, 5), 2), "Expected 2 to 3 dimensions, but got 4-dimensional tensor"),
    (lambda lib: lib.nn.functional.adaptive_max_pool1d(lib.ones(2, 3, 4), (2, 3)), "'output_size' should contain one int (got 2)"),
    (lambda lib: lib.nn.functional.threshold(lib.ones(2), 0.5), "missing 1 required positional argument: 'value'"),
    (lambda lib: lib.nn.Threshold(0.1, 2.0, inplace=True)(lib.ones(2, requires_grad=True)),
     "a leaf Variable that requires grad is being used in an in-place operation"),
]


@pytest.mark.parametrize("call,phrase", SMALL_ERRORS, ids=[p for _, p in SMALL_ERRORS])
def test_small_layer_errors(call, phrase):
    same_error(lambda: call(gradviz), lambda: call(torch), phrase)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rrelu_eval_matches_torch_and_training_draws_one_slope_per_element(dtype):
    x = np.array([[-1.0, 2.0, -3.0], [0.0, -0.5, 4.0]])
    for lower, upper in ((1.0 / 8, 1.0 / 3), (0.1, 0.3)):
        compare_layer(lambda nn: nn.RReLU(lower, upper).eval(), [x], dtype)
        results = []
        for lib in (torch, gradviz):
            t = lib.tensor(x, dtype=getattr(lib, dtype), requires_grad=True)
            y = lib.nn.functional.rrelu(t, lower, upper)  # training=False: the mean slope
            y.sum().backward()
            results.append((y.grad_fn.name(), y.tolist(), t.grad.tolist()))
        assert results[0][0] == results[1][0]
        np.testing.assert_allclose(results[1][1:], results[0][1:], rtol=1e-6)
    # training: each negative element gets its own slope in [lower, upper]; the gradient is it
    layer = gradviz.nn.RReLU(0.1, 0.3)
    t = gradviz.tensor(-np.linspace(1.0, 2.0, 200), dtype=getattr(gradviz, dtype),
                       requires_grad=True)
    y = layer(t)
    y.sum().backward()
    slopes = (y / t).detach().numpy()
    assert ((slopes >= 0.1) & (slopes <= 0.3 + 1e-6)).all() and np.unique(slopes).size > 100
    np.testing.assert_allclose(t.grad.numpy(), slopes, rtol=1e-6)
    assert repr(layer) == repr(torch.nn.RReLU(0.1, 0.3))
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        gradviz.nn.functional.rrelu(t, 0.5, 0.1)

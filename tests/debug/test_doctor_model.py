"""The whole-model doctor (issue: every classic wrong-gradient bug named, with its place): a
corpus of seeded bugs, each with a correct twin, each written once against a library ``lib``
and run on gradviz and on real PyTorch. PyTorch proves each bug's symptom (``.grad`` None or
zero, an ``[N, N]`` shape, NaN, an error ...); the doctor must name the kind and the parameter
on both libraries, and report nothing on every twin (Note [Model-level checks] in
gradviz/debug/_model_checks.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch as real_torch

import gradviz

LIBRARIES = {"gradviz": gradviz, "torch": real_torch}
RNG = np.random.default_rng(20)
X = RNG.standard_normal((6, 4))
Y = RNG.standard_normal(6)
LABELS = np.array([0, 2, 1, 2, 0, 1])


def tensor(lib, array, grad=False):
    return lib.tensor(np.array(array, dtype=np.float64), requires_grad=grad)


def layer(lib, name, fan_in, fan_out, seed, scale=None, bias=0.0):
    """(name.weight, name.bias) as [fan_out, fan_in] and [fan_out] leaves, as nn.Linear."""
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(fan_in) if scale is None else scale
    weight = tensor(lib, rng.standard_normal((fan_out, fan_in)) * scale, grad=True)
    return [(f"{name}.weight", weight),
            (f"{name}.bias", tensor(lib, np.full(fan_out, bias), grad=True))]


def linear(lib, x, params, name):
    named = dict(params)
    return x @ named[f"{name}.weight"].T + named[f"{name}.bias"]


@dataclass
class Model:
    loss: object
    params: list
    symptom: Callable | None = None   # torch only: proves the bug's effect, after backward


def mse(lib, prediction, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the size-mismatch warning of the bug
        return lib.nn.functional.mse_loss(prediction, target)


def grad_of(model, name):
    return dict(model.params)[name].grad


# ---- the corpus: build(lib, buggy) -> Model ----------------------------------------------

def detach_parameter(lib, buggy):
    params = layer(lib, "fc", 4, 1, 1)
    weight, bias = dict(params)["fc.weight"], dict(params)["fc.bias"]
    used = weight.detach() if buggy else weight
    out = tensor(lib, X) @ used.T + bias
    return Model(mse(lib, out, tensor(lib, Y).unsqueeze(1)), params,
                 lambda m: grad_of(m, "fc.weight") is None)


def data_parameter(lib, buggy):
    params = layer(lib, "fc", 4, 1, 2)
    weight, bias = dict(params)["fc.weight"], dict(params)["fc.bias"]
    used = weight.data if buggy else weight
    out = tensor(lib, X) @ used.T + bias
    return Model(mse(lib, out, tensor(lib, Y).unsqueeze(1)), params,
                 lambda m: grad_of(m, "fc.weight") is None)


def numpy_round_trip(lib, buggy):
    params = layer(lib, "fc", 4, 3, 3)
    weight, bias = dict(params)["fc.weight"], dict(params)["fc.bias"]
    used = lib.from_numpy(weight.detach().numpy()) if buggy else weight
    out = lib.tanh(tensor(lib, X) @ used.T + bias)
    return Model((out ** 2).mean(), params, lambda m: grad_of(m, "fc.weight") is None)


def tensor_of_existing(lib, buggy):
    params = layer(lib, "fc", 4, 3, 4)
    weight, bias = dict(params)["fc.weight"], dict(params)["fc.bias"]
    used = lib.tensor(weight.tolist(), dtype=lib.float64) if buggy else weight
    out = lib.sigmoid(tensor(lib, X) @ used.T + bias)
    return Model(out.mean(), params, lambda m: grad_of(m, "fc.weight") is None)


def round_on_path(lib, buggy):
    params = layer(lib, "fc", 4, 3, 5)
    hidden = linear(lib, tensor(lib, X), params, "fc")
    hidden = lib.round(hidden * 4) / 4 if buggy else hidden
    return Model((hidden ** 2).mean(), params,
                 lambda m: not grad_of(m, "fc.weight").any())


def unused_layer(lib, buggy):
    params = layer(lib, "fc1", 4, 3, 6) + layer(lib, "fc2", 3, 1, 7) + layer(lib, "extra", 3, 3, 8)
    hidden = lib.tanh(linear(lib, tensor(lib, X), params, "fc1"))
    if not buggy:
        hidden = lib.tanh(linear(lib, hidden, params, "extra"))
    out = linear(lib, hidden, params, "fc2")
    return Model(mse(lib, out, tensor(lib, Y).unsqueeze(1)), params,
                 lambda m: grad_of(m, "extra.weight") is None)


def broadcast_mse(lib, buggy):
    params = layer(lib, "fc", 4, 1, 9)
    out = linear(lib, tensor(lib, X), params, "fc")         # [N, 1]
    target = tensor(lib, Y) if buggy else tensor(lib, Y).unsqueeze(1)

    def symptom(model):  # torch's loss broadcast [N, 1] against [N]: its saved input is [N, N]
        return tuple(model.loss.grad_fn._saved_self.shape) == (6, 6)

    return Model(mse(lib, out, target), params, symptom)


def broadcast_subtraction(lib, buggy):
    params = layer(lib, "fc", 4, 1, 10)
    out = linear(lib, tensor(lib, X), params, "fc")
    target = tensor(lib, Y) if buggy else tensor(lib, Y).unsqueeze(1)
    difference = out - target
    return Model((difference ** 2).mean(), params,
                 lambda m: tuple(m.loss.grad_fn.next_functions[0][0]._saved_self.shape) == (6, 6))


def sqrt_at_zero(lib, buggy):
    params = layer(lib, "fc", 4, 3, 11)
    x = X.copy()
    x[2] = 0.0                                              # fc(x)[2] == bias == 0
    out = linear(lib, tensor(lib, x), params, "fc")
    squared = (out * out).sum(1)
    norms = lib.sqrt(squared) if buggy else lib.sqrt(squared + 1e-12)
    return Model(norms.mean(), params,
                 lambda m: bool(grad_of(m, "fc.weight").isnan().any()))


def log_of_zero(lib, buggy):
    params = layer(lib, "fc", 4, 3, 12)
    hidden = lib.relu(linear(lib, tensor(lib, X), params, "fc"))
    logs = lib.log(hidden) if buggy else lib.log(hidden + 1e-6)
    return Model((logs * logs).mean(), params,
                 lambda m: not bool(grad_of(m, "fc.weight").isfinite().all())
                 or not bool(m.loss.isfinite()))


def deep_stack(lib, buggy, activation, scale, depth=8, width=16):
    params = []
    x = tensor(lib, np.random.default_rng(13).standard_normal((8, width)))
    for index in range(depth):
        params += layer(lib, f"layer{index}", width, width, 100 + index,
                        scale=scale / np.sqrt(width))
        x = activation(lib, linear(lib, x, params, f"layer{index}"))
    return x, params


def sigmoid_stack(lib, buggy):
    if buggy:
        out, params = deep_stack(lib, buggy, lambda lib, h: lib.sigmoid(h), 1.0)
    else:
        out, params = deep_stack(lib, buggy, lambda lib, h: lib.tanh(h), 1.0)

    def symptom(model):
        first, last = grad_of(model, "layer0.weight"), grad_of(model, "layer7.weight")
        return float(first.norm() / last.norm()) < 1e-4

    return Model((out ** 2).mean(), params, symptom)


def exploding_stack(lib, buggy):
    # sin keeps the forward bounded while its derivative times a large weight exceeds 1
    out, params = deep_stack(lib, buggy, lambda lib, h: lib.sin(h), 8.0 if buggy else 1.0)

    def symptom(model):
        first, last = grad_of(model, "layer0.weight"), grad_of(model, "layer7.weight")
        return float(first.norm() / last.norm()) > 1e4

    return Model((out ** 2).mean(), params, symptom)


def dead_relu(lib, buggy):
    params = (layer(lib, "fc1", 4, 16, 14, bias=-10.0 if buggy else 0.1)
              + layer(lib, "fc2", 16, 1, 15))
    hidden = lib.relu(linear(lib, tensor(lib, X), params, "fc1"))
    out = linear(lib, hidden, params, "fc2")
    return Model(mse(lib, out, tensor(lib, Y).unsqueeze(1)), params,
                 lambda m: not grad_of(m, "fc1.weight").any())


def softmax_into_cross_entropy(lib, buggy):
    params = layer(lib, "head", 4, 3, 16)
    logits = linear(lib, tensor(lib, X), params, "head")
    functional = lib.nn.functional
    scores = functional.softmax(logits, dim=1) if buggy else logits
    loss = functional.cross_entropy(scores, lib.tensor(LABELS))

    def symptom(model):  # the gradient is not (softmax(logits) - onehot) / N
        probabilities = real_torch.softmax(logits.detach(), 1)
        right = (probabilities - real_torch.nn.functional.one_hot(
            real_torch.tensor(LABELS), 3)) / len(LABELS)
        got = real_torch.autograd.grad(model.loss, logits, retain_graph=True)[0]
        return not real_torch.allclose(got, right.to(got.dtype), atol=1e-6)

    return Model(loss, params, symptom)


def sigmoid_into_bce_with_logits(lib, buggy):
    params = layer(lib, "head", 4, 1, 17)
    logits = linear(lib, tensor(lib, X), params, "head").squeeze(1)
    scores = lib.sigmoid(logits) if buggy else logits
    targets = tensor(lib, (Y > 0).astype(float))
    loss = lib.nn.functional.binary_cross_entropy_with_logits(scores, targets)
    return Model(loss, params, lambda m: float(m.loss) > 0.55 and bool(scores.min() >= 0))


def missing_zero_grad(lib, buggy):
    params = layer(lib, "fc", 4, 1, 18)
    first = mse(lib, linear(lib, tensor(lib, X), params, "fc"), tensor(lib, Y).unsqueeze(1))
    first.backward()                                        # the previous step
    if not buggy:
        for _, parameter in params:
            parameter.grad = None                           # optimizer.zero_grad()
    # the next batch
    loss = mse(lib, linear(lib, tensor(lib, X[::-1] * 0.5), params, "fc"),
               tensor(lib, Y).unsqueeze(1))
    before = grad_of(Model(loss, params), "fc.weight")
    before = None if before is None else before.clone()

    def symptom(model):  # after this backward .grad is not this loss's gradient
        fresh = real_torch.autograd.grad(model.loss, dict(params)["fc.weight"])[0]
        return real_torch.allclose(grad_of(model, "fc.weight"), before + fresh) \
            and not real_torch.allclose(grad_of(model, "fc.weight"), fresh)

    return Model(loss, params, symptom)


def inplace_on_saved(lib, buggy):
    params = layer(lib, "fc", 4, 3, 19)
    activation = lib.sigmoid(linear(lib, tensor(lib, X), params, "fc"))
    if buggy:
        activation.mul_(2.0)
    else:
        activation = activation * 2.0

    def symptom(model):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            model.loss.backward()
        return True

    return Model(activation.sum(), params, symptom)


CORPUS = {
    # name: (build, kind, parameter the finding must name)
    "detach a parameter": (detach_parameter, "no_gradient", "fc.weight"),
    ".data of a parameter": (data_parameter, "no_gradient", "fc.weight"),
    "numpy round trip": (numpy_round_trip, "no_gradient", "fc.weight"),
    "tensor(existing)": (tensor_of_existing, "no_gradient", "fc.weight"),
    "round on the path": (round_on_path, "no_gradient", "fc.weight"),
    "layer never used": (unused_layer, "unused_parameter", "extra.weight"),
    "mse [N, 1] vs [N]": (broadcast_mse, "broadcast_suspect", "fc.weight"),
    "subtraction [N, 1] - [N]": (broadcast_subtraction, "broadcast_suspect", "fc.weight"),
    "sqrt at zero": (sqrt_at_zero, "nonfinite_origin", "fc.weight"),
    "log of zero": (log_of_zero, "nonfinite_origin", "fc.weight"),
    "deep sigmoid stack": (sigmoid_stack, "vanishing_gradient", "layer0.weight"),
    "deep stack, large init": (exploding_stack, "exploding_gradient", "layer0.weight"),
    "dead ReLUs": (dead_relu, "dead_units", "fc1.weight"),
    "softmax into cross_entropy": (softmax_into_cross_entropy, "double_softmax", "head.weight"),
    "sigmoid into BCE with logits": (sigmoid_into_bce_with_logits, "double_softmax", "head.weight"),
    "missing zero_grad": (missing_zero_grad, "stale_grad", "fc.weight"),
    "in-place on a saved tensor": (inplace_on_saved, "inplace_overwrite", "fc.weight"),
}


def named(report):
    return {(finding.kind, name) for finding in report.findings for name in finding.params}


@pytest.mark.parametrize("case", list(CORPUS))
def test_torch_shows_the_symptom_of_each_bug(case):
    build, _, _ = CORPUS[case]
    model = build(real_torch, True)
    if build is not inplace_on_saved and build is not softmax_into_cross_entropy:
        model.loss.backward(retain_graph=True)
    assert model.symptom(model), case


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("case", list(CORPUS))
def test_the_doctor_names_the_kind_and_the_parameter(case, library):
    build, kind, parameter = CORPUS[case]
    model = build(LIBRARIES[library], True)
    report = gradviz.debug.doctor(model.loss, params=model.params)
    assert (kind, parameter) in named(report), f"{case} on {library}:\n{report}"
    finding = next(f for f in report.findings if f.kind == kind)
    assert finding.summary and finding.summary.endswith(".") and finding.fix and finding.cause
    data = report.to_dict()["findings"]
    assert any(d["kind"] == kind and parameter in d["params"] for d in data)


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("case", list(CORPUS))
def test_the_correct_twin_has_no_finding(case, library):
    build, _, _ = CORPUS[case]
    model = build(LIBRARIES[library], False)
    report = gradviz.debug.doctor(model.loss, params=model.params)
    assert report.findings == [], f"{case} twin on {library}:\n{report}"


# ---- no false alarms on correct code -----------------------------------------------------

@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_frozen_parameter_is_not_reported(library):
    lib = LIBRARIES[library]
    params = layer(lib, "fc", 4, 1, 30) + layer(lib, "frozen", 4, 4, 31)
    for name, parameter in params:
        if name.startswith("frozen"):
            parameter.requires_grad_(False)
    hidden = linear(lib, tensor(lib, X), params, "frozen")
    loss = mse(lib, linear(lib, hidden, params, "fc"), tensor(lib, Y).unsqueeze(1))
    assert gradviz.debug.doctor(loss, params=params).findings == []


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_detached_target_and_bias_broadcasting_are_not_reported(library):
    lib = LIBRARIES[library]
    params = layer(lib, "fc", 4, 3, 32)
    x = tensor(lib, X)
    target = lib.tanh(x[:, :3] * 2).detach()               # a target: leads to no parameter
    loss = mse(lib, lib.tanh(linear(lib, x, params, "fc")), target)  # bias [3] over [6, 3]
    assert gradviz.debug.doctor(loss, params=params).findings == []


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_correct_custom_function_is_not_reported(library):
    lib = LIBRARIES[library]

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    params = layer(lib, "fc", 4, 3, 33)
    loss = Square.apply(linear(lib, tensor(lib, X), params, "fc")).mean()
    report = gradviz.debug.doctor(loss, params=params)
    assert report.findings == [] and len(report.checked) == 1, str(report)


@pytest.mark.parametrize("lookup", ["embedding", "index_select", "indexing"])
@pytest.mark.parametrize("library", list(LIBRARIES))
def test_embedding_rows_of_tokens_not_in_the_batch_are_not_dead_units(library, lookup):
    """An embedding table's rows are tokens, not units: the rows of tokens the batch does not
    hold get no gradient by design, ReLU or not (a real vocabulary: nearly all of them)."""
    lib = LIBRARIES[library]
    table = tensor(lib, RNG.standard_normal((20, 4)), grad=True)
    tokens = lib.tensor([1, 5, 5, 7, 2, 1])
    rows = {"embedding": lambda: lib.nn.functional.embedding(tokens, table),
            "index_select": lambda: lib.index_select(table, 0, tokens),
            "indexing": lambda: table[tokens]}[lookup]()
    params = [("embed.weight", table), *layer(lib, "fc", 4, 1, 34)]
    loss = mse(lib, linear(lib, lib.relu(rows), params, "fc"), tensor(lib, Y).unsqueeze(1))
    report = gradviz.debug.doctor(loss, params=params)
    assert report.findings == [], str(report)


def test_the_minus_inf_of_an_attention_mask_is_not_a_nonfinite_origin():
    """``nn.MultiheadAttention`` with a causal and a key padding mask merges them into one float
    mask of -inf entries, which torch's fused attention saves: masked, not non-finite values.
    A mask with a NaN is still reported."""
    real_torch.manual_seed(0)
    attention = real_torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = real_torch.randn(2, 5, 8)
    causal = real_torch.triu(real_torch.ones(5, 5, dtype=real_torch.bool), 1)
    padding = real_torch.zeros(2, 5, dtype=real_torch.bool)
    padding[1, 4] = True
    out = attention(x, x, x, attn_mask=causal, key_padding_mask=padding, need_weights=False)[0]
    report = gradviz.debug.doctor(out.pow(2).mean(), params=attention)
    assert report.findings == [], str(report)
    mask = real_torch.zeros(5, 5)
    mask[0, 1] = float("nan")
    q = real_torch.randn(1, 5, 8, requires_grad=True)
    out = real_torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    report = gradviz.debug.doctor(out.sum(), params=[("q", q)])
    assert "nonfinite_origin" in {finding.kind for finding in report.findings}, str(report)


def test_modules_are_accepted_as_params_on_both_libraries():
    for lib in LIBRARIES.values():
        lib.manual_seed(0)

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = lib.nn.Linear(4, 8)
                self.fc2 = lib.nn.Linear(8, 1)
                self.unused = lib.nn.Linear(4, 4)

            def forward(self, x):
                return self.fc2(lib.relu(self.fc1(x)))

        net = Net()
        loss = mse(lib, net(lib.tensor(X, dtype=lib.float32)),
                   lib.tensor(Y, dtype=lib.float32).unsqueeze(1))
        report = gradviz.debug.doctor(loss, params=net)
        assert named(report) == {("unused_parameter", "unused.weight"),
                                 ("unused_parameter", "unused.bias")}, str(report)
        assert {f.module for f in report.findings} == {"unused"}


def test_bad_params_are_a_clear_type_error():
    loss = (tensor(gradviz, X, grad=True) ** 2).sum()
    with pytest.raises(TypeError, match=r"params\[0\] must be a \(name, tensor\) pair"):
        gradviz.debug.doctor(loss, params=[tensor(gradviz, X)])
    with pytest.raises(TypeError, match="params must be a Module, an iterable"):
        gradviz.debug.doctor(loss, params=3)


def test_model_checks_can_be_turned_off():
    model = unused_layer(gradviz, True)
    report = gradviz.debug.doctor(model.loss, params=model.params, model_checks=False)
    assert report.findings == []

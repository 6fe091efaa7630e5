"""Seeded bugs for the gradient doctor and its hints: the bugs of
test_doctor_seeded_both_libraries that had no fitting hint, and new Functions with the same kinds of bug, each with its correct twin, on gradviz graphs and
on real PyTorch graphs (``doctor(torch_loss)``).

The hints come from evidence the checker has (``gradviz.debug._jacobian_hints``): the
forward's full Jacobian by finite differences against backward's matrix (a gradient mixed in
from outputs an entry does not affect: a reduction over the wrong dim, a scan the wrong way, an
index ignored), a shift or scale the forward does not see (softmax, log-softmax, normalizations)
that backward's gradient does, the true gradient at the output's values, and the true gradient
with a number argument set to 1 or a bool mask inverted.

For every case and library: the correct twin's gradients equal PyTorch's built-ins and the
doctor finds nothing in it; the seeded bug is real; the doctor names exactly the wrong Function,
the input and the kind, and its hint says what the evidence shows. Last, a loss built only from
gradients (a gradient penalty) says which custom Functions it was built with and how to check
them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import test_doctor_seeded_both_libraries as both_libraries
import torch as real_torch
from test_doctor_seeded_both_libraries import Case, arrays, const, normal, uniform

import gradviz

LIBRARIES = ("gradviz", "torch")
RUNS = [(0, "gradviz"), (1, "gradviz"), (0, "torch")]


def family(T):
    """test_doctor_seeded_both_libraries' Functions for the library ``T`` and this file's new ones."""
    Function = T.autograd.Function
    ns = dict(vars(both_libraries.FAMILIES["gradviz" if T is gradviz else "torch"]))

    def add(cls):
        ns[cls.__name__] = cls
        return cls

    @add
    class Rms(Function):
        """x / sqrt(mean(x^2) + eps) over the last dim."""

        @staticmethod
        def forward(ctx, x):
            rstd = ((x * x).mean(-1, keepdim=True) + 1e-6).rsqrt()
            y = x * rstd
            ctx.save_for_backward(y, rstd)
            return y

        @staticmethod
        def backward(ctx, grad):
            y, rstd = ctx.saved_tensors
            return rstd * (grad - y * (grad * y).mean(-1, keepdim=True))

    @add
    class RmsDropsScaleTerm(Rms):
        @staticmethod
        def backward(ctx, grad):
            y, rstd = ctx.saved_tensors
            return rstd * grad

    @add
    class SigmoidFromOutput(Function):
        """The derivative recomputed from the saved output as if it were the input."""

        @staticmethod
        def forward(ctx, x):
            y = T.sigmoid(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            s = T.sigmoid(y)
            return grad * s * (1 - s)

    @add
    class ScaledTanh(Function):
        """tanh(alpha x) with a number alpha."""

        @staticmethod
        def forward(ctx, x, alpha):
            ctx.save_for_backward(x)
            ctx.alpha = alpha
            return T.tanh(x * alpha)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.alpha * (1 - T.tanh(x * ctx.alpha) ** 2), None

    @add
    class ScaledTanhForgetsAlpha(ScaledTanh):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (1 - T.tanh(x) ** 2), None

    @add
    class RowMean(Function):
        """x [n, m] minus its row means: the forward mixes entries along dim 1."""

        @staticmethod
        def forward(ctx, x):
            return x - x.mean(1, keepdim=True)

        @staticmethod
        def backward(ctx, grad):
            return grad - grad.mean(1, keepdim=True)

    @add
    class RowMeanWrongDim(RowMean):
        @staticmethod
        def backward(ctx, grad):
            return grad - grad.mean(0, keepdim=True)

    @add
    class WhereMask(Function):
        """x where the mask is set, x^2 elsewhere."""

        @staticmethod
        def forward(ctx, x, mask):
            ctx.save_for_backward(x, mask)
            return T.where(mask, x, x * x)

        @staticmethod
        def backward(ctx, grad):
            x, mask = ctx.saved_tensors
            return T.where(mask, grad, 2 * x * grad), None

    @add
    class WhereMaskInverted(WhereMask):
        @staticmethod
        def backward(ctx, grad):
            x, mask = ctx.saved_tensors
            return T.where(~mask, grad, 2 * x * grad), None

    return SimpleNamespace(**ns)


FAMILIES = {"gradviz": family(gradviz), "torch": family(real_torch)}
LIB = {"gradviz": gradviz, "torch": real_torch}


def _rms_ref(T, x, w):
    return (x * ((x * x).mean(-1, keepdim=True) + 1e-6).rsqrt() * w).sum()


REDUCTION = "a reduction over the wrong dim"
CASES = [
    # a gradient mixed in from outputs the entry does not affect
    Case("column scale reduced over the wrong axis", {"ColumnScale": "ColumnScaleWrongAxis"},
         lambda ns, T, x, w: (ns.ColumnScale.apply(x, w) ** 2).sum(),
         lambda T, x, w: ((x * w) ** 2).sum(),
         arrays((normal(4, 4), True), (normal(4, 1), True)),
         {("wrong_gradient", 1)}, hint=REDUCTION),
    Case("row centering reduced over the wrong dim", {"RowMean": "RowMeanWrongDim"},
         lambda ns, T, x, w: (ns.RowMean.apply(x) * w).sum(),
         lambda T, x, w: ((x - x.mean(1, keepdim=True)) * w).sum(),
         arrays((normal(3, 4), True), (normal(3, 4), False)),
         {("wrong_gradient", 0)}, hint=REDUCTION),
    Case("softmax row sums without keepdim", {"Softmax": "SoftmaxNoKeepdim"},
         lambda ns, T, x, w: (ns.Softmax.apply(x, -1) * w).sum(),
         lambda T, x, w: (x.softmax(-1) * w).sum(),
         arrays((normal(4, 4), True), (normal(4, 4), False)),
         {("wrong_gradient", 0)}, hint="without keepdim=True"),
    Case("softmax dim argument ignored in backward", {"Softmax": "SoftmaxIgnoresDim"},
         lambda ns, T, x, w: (ns.Softmax.apply(x, 0) * w).sum(),
         lambda T, x, w: (x.softmax(0) * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}, hint="ctx.dim ignored"),
    Case("softmax over the middle dim of three, dim ignored", {"Softmax": "SoftmaxIgnoresDim"},
         lambda ns, T, x, w: (ns.Softmax.apply(x, 1) * w).sum(),
         lambda T, x, w: (x.softmax(1) * w).sum(),
         arrays((normal(2, 3, 4), True), (normal(2, 3, 4), False)),
         {("wrong_gradient", 0)}, hint="sums the gradients along dim 2, but the forward "
                                        "mixes (or broadcasts) input 0 along dim 1"),
    Case("cumprod backward scans forward", {"Cumprod": "CumprodForwardScan"},
         lambda ns, T, x, w: (ns.Cumprod.apply(x) * w).sum(),
         lambda T, x, w: (x.cumprod(-1) * w).sum(),
         arrays((uniform(0.5, 1.5, 2, 5), True), (normal(2, 5), False)),
         {("wrong_gradient", 0)}, hint="a scan runs the wrong way along dim 1"),
    Case("index_add backward ignores the index", {"IndexAdd": "IndexAddRoutesInOrder"},
         lambda ns, T, s, i: (ns.IndexAdd.apply(s, i, 4) ** 2).sum(),
         lambda T, s, i: (T.zeros(4, 3, dtype=s.dtype).index_add(0, i, s) ** 2).sum(),
         arrays((normal(3, 3), True), (const([3, 0, 3]), False)),
         {("wrong_gradient", 0)}, hint="the index routes the gradients the wrong way"),
    # an invariance of the forward that backward's gradient breaks
    Case("log-softmax uses log-probabilities", {"LogSoftmax": "LogSoftmaxUsesLogProbs"},
         lambda ns, T, x, w: (ns.LogSoftmax.apply(x) * w).sum(),
         lambda T, x, w: (x.log_softmax(-1) * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}, hint="log-probabilities where probabilities are needed"),
    Case("layer norm drops the variance term", {"LayerNorm": "LayerNormDropsVarianceTerm"},
         lambda ns, T, x, w: (ns.LayerNorm.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.layer_norm(x, (6,)) * w).sum(),
         arrays((normal(3, 6, scale=2.0, offset=1.0), True), (normal(3, 6), False)),
         {("wrong_gradient", 0)}, hint="variance (scale) term"),
    Case("rms norm drops the scale term", {"Rms": "RmsDropsScaleTerm"},
         lambda ns, T, x, w: (ns.Rms.apply(x) * w).sum(),
         _rms_ref,
         arrays((normal(4, 5), True), (normal(4, 5), False)),
         {("wrong_gradient", 0)}, hint="is scaled along dim 1"),
    # the output taken for the input
    Case("elu uses its output, recorded inputs all positive", {"Elu": "EluUsesOutput"},
         lambda ns, T, x, w: (ns.Elu.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.elu(x) * w).sum(),
         arrays((uniform(0.2, 1.5, 6), True), (normal(6), False)),
         {("wrong_gradient", 0)}, hint="grad_output times the forward's output",
         changes_gradient=False),
    Case("setup_context, derivative from the saved output", {"Cube": "CubeUsesOutput"},
         lambda ns, T, x: (ns.Cube.apply(x) * 0.5).sum(),
         lambda T, x: (x ** 3 * 0.5).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="computed at the output's values"),
    Case("mark_dirty tanh_, saved output taken for the input",
         {"TanhInPlace": "TanhInPlaceTreatsOutputAsInput"},
         lambda ns, T, x: (ns.TanhInPlace.apply(x * 1.0) ** 2).sum(),
         lambda T, x: (x.tanh() ** 2).sum(),
         arrays((normal(5, scale=1.5), True)),
         {("wrong_gradient", 0)}, hint="computed at the output's values"),
    Case("sigmoid derivative recomputed from the output", {"Sigmoid": "SigmoidFromOutput"},
         lambda ns, T, x, w: (ns.Sigmoid.apply(x) * w).sum(),
         lambda T, x, w: (T.sigmoid(x) * w).sum(),
         arrays((normal(6, scale=2.0), True), (normal(6), False)),
         {("wrong_gradient", 0)}, hint="computed at the output's values"),
    # an argument ignored or used the wrong way round
    Case("scale factor beta forgotten", {"ScaledSoftplus": "ScaledSoftplusForgetsBeta"},
         lambda ns, T, x: (ns.ScaledSoftplus.apply(x, 3.0) ** 2).sum(),
         lambda T, x: (T.nn.functional.softplus(x, beta=3.0) ** 2).sum(),
         arrays((normal(6), True)),
         {("wrong_gradient", 0)}, hint="number argument 1 set to 1 (it is 3)"),
    Case("tanh's alpha forgotten", {"ScaledTanh": "ScaledTanhForgetsAlpha"},
         lambda ns, T, x, w: (ns.ScaledTanh.apply(x, 0.5) * w).sum(),
         lambda T, x, w: ((x * 0.5).tanh() * w).sum(),
         arrays((normal(3, 3), True), (normal(3, 3), False)),
         {("wrong_gradient", 0)}, hint="number argument 1 set to 1 (it is 0.5)"),
    Case("bool mask inverted in backward", {"MaskedScale": "MaskedScaleMaskInverted"},
         lambda ns, T, x, m: (ns.MaskedScale.apply(x, m) ** 2).sum(),
         lambda T, x, m: (T.where(m, x * 3, x) ** 2).sum(),
         arrays((normal(8), True), (const([1, 0, 0, 1, 1, 0, 1, 0], bool), False)),
         {("wrong_gradient", 0)}, hint="bool mask (argument 1) inverted"),
    Case("where's branches swapped by an inverted mask", {"WhereMask": "WhereMaskInverted"},
         lambda ns, T, x, m: (ns.WhereMask.apply(x, m) * 2).sum(),
         lambda T, x, m: (T.where(m, x, x * x) * 2).sum(),
         arrays((normal(2, 3), True), (const([[1, 0, 1], [0, 0, 1]], bool), False)),
         {("wrong_gradient", 0)}, hint="bool mask (argument 1) inverted"),
]


def _case_id(case):
    return case.name.replace(" ", "-")


def _tensors(case, seed, lib):
    T = LIB[lib]
    return [T.tensor(a, requires_grad=g) for a, g in case.inputs(np.random.default_rng(seed))]


def _loss(case, lib, seed, buggy, capture=True):
    T = LIB[lib]
    ns = both_libraries._Names(FAMILIES[lib], case.buggy if buggy else {})
    tensors = _tensors(case, seed, lib)
    if capture:
        with gradviz.debug.capture():
            return case.program(ns, T, *tensors), tensors
    return case.program(ns, T, *tensors), tensors


def _grads(loss, tensors):
    loss.backward()
    return [(t.grad.numpy() if t.grad is not None else np.zeros(t.shape)).astype(np.float64)
            for t in tensors if t.requires_grad]


def _found(report):
    return {(f.kind, f.input_index) for f in report.findings if f.severity == "error"}


def problems(case, lib, report):
    """What is wrong with the report on the seeded bug (empty when the doctor got it right)."""
    out = []
    if _found(report) != case.expect:
        out.append(f"found {_found(report)} expected {case.expect}")
    blamed = {getattr(FAMILIES[lib], n) for k, n in case.buggy.items() if k != n}
    for finding in report.findings:
        if finding.function not in blamed:
            out.append(f"blamed {finding!r}")
    hints = " | ".join(str(f.hint) for f in report.findings)
    if case.hint not in hints:
        out.append(f"hint {case.hint!r} not in {hints!r}")
    if out:
        out.append(str(report))
    return out


@pytest.mark.parametrize("seed, lib", RUNS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_twin_matches_torch_and_is_clean(case, seed, lib):
    tensors = _tensors(case, seed, "torch")
    expected = _grads(case.reference(real_torch, *tensors), tensors)
    loss, tensors = _loss(case, lib, seed, buggy=False, capture=False)
    for got, want in zip(_grads(loss, tensors), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    loss, _ = _loss(case, lib, seed, buggy=False)
    report = gradviz.debug.doctor(loss, seed=seed)
    assert report.ok and not report.findings and report.checked, str(report)


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_real(case, lib):
    got = _grads(*_loss(case, lib, 0, buggy=True, capture=False))
    right = _grads(*_loss(case, lib, 0, buggy=False, capture=False))
    same = all(np.allclose(g, r, rtol=1e-6, atol=1e-9) for g, r in zip(got, right))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("seed, lib", RUNS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_gets_its_hint(case, seed, lib):
    loss, _ = _loss(case, lib, seed, buggy=True)
    found = problems(case, lib, gradviz.debug.doctor(loss, seed=seed))
    assert not found, "\n".join(found)


# ---- a loss built only from gradients (a gradient penalty) ----------------------------------

def _penalty(name, capture=True):
    T = gradviz
    x = T.tensor(np.random.default_rng(0).standard_normal(6), requires_grad=True)
    w = T.tensor(np.random.default_rng(1).standard_normal(6))
    fn = getattr(FAMILIES["gradviz"], name)
    with gradviz.debug.capture() if capture else _nothing():
        task = (fn.apply(x) * w).sum()
        (gx,) = T.autograd.grad(task, x, create_graph=True)
        penalty = (gx * gx).sum()
    return task, penalty


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("name", ["Silu", "SiluDetachedSigmoid"])
def test_penalty_only_loss_names_the_custom_function_behind_it(name):
    task, penalty = _penalty(name)
    report = gradviz.debug.doctor(penalty)
    assert not report.checked and not report.findings
    text = str(report)
    assert f"{name}Backward was used in building this graph's backward" in text, text
    assert "not in the loss's graph" in text and "double_backward=True" in text, text
    # the way the note gives checks it: the task term with double_backward=True
    full = gradviz.debug.doctor(task + penalty, double_backward=True)
    assert [f.kind for f in full.findings] == (
        [] if name == "Silu" else ["wrong_double_backward"]), str(full)
    assert not any("not in the loss's graph" in n for n in full.notes), str(full)


def test_penalty_note_needs_capture_and_is_not_given_without_evidence():
    _, penalty = _penalty("Silu", capture=False)
    assert not any("building this graph's backward" in n
                   for n in gradviz.debug.doctor(penalty).notes)

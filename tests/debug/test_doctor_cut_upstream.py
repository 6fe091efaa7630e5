"""The whole-model doctor on a layer cut off upstream (Note [Modules cut off upstream] in
gradviz/debug/_model_checks.py): ``layer2(layer1(x).detach())``, ``.data``, a ``no_grad``
block, ``argmax`` of its output. Each seeded bug has a correct twin and runs on gradviz and on
PyTorch (whose forward runs inside ``gradviz.debug.torch_scopes()``, the record of module
calls PyTorch needs); PyTorch proves the symptom (``layer1.weight.grad`` stays None). The
doctor must say ``no_gradient`` (not ``unused_parameter``) for both parameters of ``layer1``,
point at the node where the loss's graph resumes, and say nothing on the twins; a layer never
called stays ``unused_parameter``."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import torch as real_torch

import gradviz

LIBRARIES = {"gradviz": gradviz, "torch": real_torch}
X = np.random.default_rng(21).standard_normal((6, 4))


def cut(lib, style, h_of):
    """``layer1``'s output ``h_of(x)`` cut off the graph in ``style`` (None: not cut)."""
    if style == "detach":
        return h_of().detach()
    if style == "data":
        return h_of().data
    if style == "no_grad":
        with lib.no_grad():
            return h_of()
    return h_of()


def build(lib, style, never_called=False):
    """A two-layer net whose forward cuts ``layer1``'s output in ``style``; ``extra`` is a
    layer defined and never called."""
    lib.manual_seed(0)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = lib.nn.Linear(4, 8)
            self.layer2 = lib.nn.Linear(8, 3)
            self.table = lib.nn.Embedding(8, 3)
            self.extra = lib.nn.Linear(3, 3)

        def forward(self, x):
            if style == "argmax":   # the index of the largest unit: piecewise constant
                return self.table(self.layer1(x).argmax(1))
            if style == "int cast":
                return self.table(self.layer1(x).abs().clamp(max=7).long()[:, 0])
            h = cut(lib, style, lambda: self.layer1(x))
            return self.layer2(lib.tanh(h))

    net = Net()
    if style in ("argmax", "int cast"):
        net.layer2.requires_grad_(False)   # not part of this forward
    else:
        net.table.requires_grad_(False)
    if not never_called:
        net.extra.requires_grad_(False)
    scopes = gradviz.debug.torch_scopes() if lib is real_torch else contextlib.nullcontext()
    with scopes:
        loss = (net(lib.tensor(X, dtype=lib.float32)) ** 2).mean()
    return net, loss


STYLES = ["detach", "data", "no_grad", "argmax", "int cast"]


@pytest.mark.parametrize("style", STYLES)
def test_torch_shows_the_symptom(style):
    net, loss = build(real_torch, style)
    loss.backward()
    assert net.layer1.weight.grad is None and net.layer1.bias.grad is None
    twin, loss = build(real_torch, None)   # the twin: layer1's output not cut
    loss.backward()
    assert twin.layer1.weight.grad is not None and bool(twin.layer1.weight.grad.any())


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("style", STYLES)
def test_a_layer_cut_upstream_is_no_gradient_with_where(style, library):
    lib = LIBRARIES[library]
    net, loss = build(lib, style)
    report = gradviz.debug.doctor(loss, params=net)
    kinds = {(f.kind, name) for f in report.findings for name in f.params}
    assert kinds == {("no_gradient", "layer1.weight"), ("no_gradient", "layer1.bias")}, \
        f"{style} on {library}:\n{report}"
    finding = report.findings[0]
    assert finding.module == "layer1" and finding.node is not None
    assert finding.details["cut_at"] == finding.node.name()
    assert "layer1 (Linear) ran in this forward" in finding.message
    # where the graph resumes: the op of the next layer that takes the cut output
    expected = "EmbeddingBackward0" if style in ("argmax", "int cast") else "AddmmBackward0"
    assert finding.node.name() == expected, str(report)
    data = report.to_dict()["findings"][0]
    assert data["node"] is not None and data["node_name"] == expected


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_the_twin_without_a_cut_has_no_finding(library):
    net, loss = build(LIBRARIES[library], None)
    assert gradviz.debug.doctor(loss, params=net).findings == []


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_layer_never_called_stays_unused_parameter(library):
    net, loss = build(LIBRARIES[library], None, never_called=True)
    report = gradviz.debug.doctor(loss, params=net)
    assert {(f.kind, n) for f in report.findings for n in f.params} == {
        ("unused_parameter", "extra.weight"), ("unused_parameter", "extra.bias")}, str(report)


def test_a_torch_forward_outside_torch_scopes_says_both_causes():
    lib = real_torch
    lib.manual_seed(0)
    layer1, layer2 = lib.nn.Linear(4, 8), lib.nn.Linear(8, 1)
    model = lib.nn.ModuleDict({"layer1": layer1, "layer2": layer2})
    loss = layer2(layer1(lib.tensor(X, dtype=lib.float32)).detach()).sum()
    report = gradviz.debug.doctor(loss, params=model)
    finding = report.findings[0]
    assert finding.kind == "unused_parameter" and "torch_scopes()" in finding.cause


def two_modules(lib, steps):
    """An encoder and a head called at the top level (no module around them), as a training
    loop does; ``steps`` lists, per step, whether the encoder is called (its output detached)
    or not (the head then reads the input). Returns the modules, named as the doctor sees
    them, and the last step's loss."""
    lib.manual_seed(0)
    encoder, head = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Tanh()), lib.nn.Linear(4, 1)
    model = lib.nn.ModuleDict({"encoder": encoder, "head": head})
    x = lib.tensor(X, dtype=lib.float32)
    scopes = gradviz.debug.torch_scopes() if lib is real_torch else contextlib.nullcontext()
    with scopes:
        for calls_encoder in steps:
            h = encoder(x).detach() if calls_encoder else x
            loss = head(h).pow(2).mean()
    return model, loss


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("steps", [[True], [False, True], [True, True, True]],
                         ids=["one step", "after a step without it", "third step"])
def test_a_module_called_at_the_top_level_and_cut_is_no_gradient(library, steps):
    model, loss = two_modules(LIBRARIES[library], steps)
    report = gradviz.debug.doctor(loss, params=model)
    assert {(f.kind, n) for f in report.findings for n in f.params} == {
        ("no_gradient", "encoder.0.weight"), ("no_gradient", "encoder.0.bias")}, str(report)
    finding = report.findings[0]
    assert "ran in this forward" in finding.message and finding.node.name() == "AddmmBackward0"


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_module_called_only_in_an_earlier_step_is_unused_parameter(library):
    # the encoder ran in the first step, not in the one whose loss is examined
    model, loss = two_modules(LIBRARIES[library], [True, False])
    report = gradviz.debug.doctor(loss, params=model)
    assert {(f.kind, n) for f in report.findings for n in f.params} == {
        ("unused_parameter", "encoder.0.weight"), ("unused_parameter", "encoder.0.bias")}, str(report)


def test_top_level_calls_are_kept_weakly_and_bounded():
    import gc

    from gradviz_ext import engine

    layer = gradviz.nn.Linear(2, 2)
    layer(gradviz.ones(1, 2))
    assert any(module is layer for module, _ in engine.top_module_calls())
    del layer
    gc.collect()
    assert all(type(module) is not gradviz.nn.Linear or module.in_features != 2
               for module, _ in engine.top_module_calls()[-1:])
    relu = gradviz.nn.ReLU()
    for _ in range(600):
        relu(gradviz.ones(1))
    assert len(engine.top_module_calls()) <= 512


# ---- inplace_overwrite names both ops with their source lines ----------------------------

def overwrite_saved(lib, saved_input):
    """A tensor saved for backward, then overwritten in place; returns (loss, weight, the line
    of the op that saved it, the line of the in-place op)."""
    import inspect

    weight = lib.tensor(np.random.default_rng(22).standard_normal((3, 4)), requires_grad=True)
    x = lib.tensor(X)
    if saved_input:   # exp's output is saved by the multiplication as its input
        hidden = lib.exp(x @ weight.T)
        scaled = hidden * hidden; saver = inspect.currentframe().f_lineno  # noqa: E702
        hidden.add_(1.0); writer = inspect.currentframe().f_lineno  # noqa: E702
        return (scaled.sum() + hidden.sum()), weight, saver, writer
    hidden = lib.sigmoid(x @ weight.T); saver = inspect.currentframe().f_lineno  # noqa: E702
    hidden.mul_(2.0); writer = inspect.currentframe().f_lineno  # noqa: E702
    return hidden.sum(), weight, saver, writer


def anomaly(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch warns that anomaly mode is slow
        return lib.autograd.detect_anomaly()


@pytest.mark.parametrize("saved_input", [False, True], ids=["saved output", "saved input"])
@pytest.mark.parametrize("library", list(LIBRARIES))
def test_inplace_overwrite_names_both_ops_and_their_lines(library, saved_input):
    lib = LIBRARIES[library]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.autograd.detect_anomaly():
            loss, weight, saver, writer = overwrite_saved(lib, saved_input)
        if lib is real_torch:   # torch proves the symptom
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward(retain_graph=True)
    report = gradviz.debug.doctor(loss, params=[("fc.weight", weight)])
    finding = next(f for f in report.findings if f.kind == "inplace_overwrite")
    saver_op, writer_op = ("MulBackward0", "AddBackward0") if saved_input else \
        ("SigmoidBackward0", "MulBackward0")
    assert finding.params == ["fc.weight"] and finding.node.name() == saver_op
    assert finding.details["overwriter"] == writer_op
    assert finding.details["saver_source"] == f"{__file__}:{saver}"
    assert finding.details["overwriter_source"] == f"{__file__}:{writer}"
    assert f"{__file__}:{saver}" in finding.message and f"{__file__}:{writer}" in finding.message
    data = next(d for d in report.to_dict()["findings"] if d["kind"] == "inplace_overwrite")
    writer_node = finding.related_nodes[0]
    assert data["param_nodes"] == [report.node_id(finding.param_nodes[0])]
    assert finding.param_nodes[0].variable is weight
    assert writer_node.name() == writer_op
    assert data["related_nodes"][0] == report.node_id(writer_node)


def test_inplace_overwrite_lines_from_a_gradviz_recording():
    with gradviz.record():
        loss, weight, saver, writer = overwrite_saved(gradviz, False)
    finding = next(f for f in gradviz.debug.doctor(loss, params=[("w", weight)]).findings
                   if f.kind == "inplace_overwrite")
    assert finding.details["saver_source"] == f"{__file__}:{saver}"
    assert finding.details["overwriter_source"] == f"{__file__}:{writer}"


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_inplace_overwrite_on_a_plain_graph_names_the_ops_and_how_to_see_lines(library):
    loss, weight, _, _ = overwrite_saved(LIBRARIES[library], False)
    finding = next(f for f in gradviz.debug.doctor(loss, params=[("w", weight)]).findings
                   if f.kind == "inplace_overwrite")
    assert finding.details["overwriter"] == "MulBackward0"
    assert finding.details["saver_source"] is None and "detect_anomaly()" in finding.cause


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_detached_target_network_is_named_with_how_to_freeze_it_and_a_frozen_one_is_not(library):
    lib = LIBRARIES[library]
    lib.manual_seed(0)

    class Agent(lib.nn.Module):   # a DQN-style target network: its output is a detached target
        def __init__(self):
            super().__init__()
            self.online = lib.nn.Linear(4, 2)
            self.target = lib.nn.Linear(4, 2)

        def forward(self, x):
            return ((self.online(x) - self.target(x).detach()) ** 2).mean()

    agent = Agent()
    scopes = gradviz.debug.torch_scopes() if lib is real_torch else contextlib.nullcontext()
    with scopes:
        loss = agent(lib.tensor(X, dtype=lib.float32))
    finding = gradviz.debug.doctor(loss, params=agent).findings[0]
    assert finding.kind == "no_gradient" and finding.module == "target"
    assert "requires_grad_(False)" in finding.fix
    agent.target.requires_grad_(False)   # frozen on purpose: nothing to say
    with scopes:
        loss = agent(lib.tensor(X, dtype=lib.float32))
    assert gradviz.debug.doctor(loss, params=agent).findings == []


def test_a_layer_cut_inside_a_scope_block_is_found_and_a_long_scope_block_keeps_no_calls():
    from gradviz_ext import engine

    gradviz.manual_seed(0)

    class Net(gradviz.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = gradviz.nn.Linear(4, 8)
            self.layer2 = gradviz.nn.Linear(8, 1)

        def forward(self, x):
            with gradviz.debug.scope("encoder"):   # noted in Net's frame, past the block
                h = self.layer1(x).detach()
            return self.layer2(h)

    net, x = Net(), gradviz.tensor(X, dtype=gradviz.float32)
    with gradviz.debug.scope("training loop"):
        for _ in range(3):
            loss = net(x).sum()
        outer = engine.current_scope()
    assert outer.calls is None, "a scope block lasting a training loop keeps no module calls"
    findings = gradviz.debug.doctor(loss, params=net).findings
    assert {(f.kind, f.params[0]) for f in findings} == {("no_gradient", "layer1.weight"),
                                                         ("no_gradient", "layer1.bias")}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_submodule_called_only_in_an_earlier_forward_is_unused_parameter(library):
    # the parameters' AccumulateGrad nodes keep the frames of the first forward, which called
    # `extra`; the forward examined did not
    lib = LIBRARIES[library]
    lib.manual_seed(0)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.extra = lib.nn.Linear(4, 4), lib.nn.Linear(4, 4)

        def forward(self, x, warmup):
            return self.body(self.extra(x).detach() if warmup else x).sum()

    net, x = Net(), lib.tensor(X, dtype=lib.float32)
    scopes = gradviz.debug.torch_scopes() if lib is real_torch else contextlib.nullcontext()
    with scopes:
        net(x, warmup=True)
        loss = net(x, warmup=False)
    report = gradviz.debug.doctor(loss, params=net)
    assert {(f.kind, n) for f in report.findings for n in f.params} == {
        ("unused_parameter", "extra.weight"), ("unused_parameter", "extra.bias")}, str(report)

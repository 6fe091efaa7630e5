"""Leaves named in the debugger's graph (``leaf_name``): from ``params=`` (an ``nn.Module`` or a
dict like torchviz's ``make_dot(y, params=dict(model.named_parameters()))``), else from the one
variable of the caller bound to the leaf; through the widget's traits and the DOT drawing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch as real_torch

import gradviz as torch
from gradviz.widget import DebuggerWidget
from gradviz.widget._widget import SessionProtocolError, normalize_graph


def leaf_names(graph: dict) -> dict[str, str]:
    """``{leaf_name: label}`` of the named AccumulateGrad nodes; the count of unnamed ones under ""."""
    named = {}
    unnamed = 0
    for node in graph["nodes"]:
        if node["kind"] != "accumulate_grad":
            assert "leaf_name" not in node, node
            continue
        if "leaf_name" in node:
            named[node["leaf_name"]] = node["label"]
        else:
            unnamed += 1
    if unnamed:
        named[""] = str(unnamed)
    return named


def test_leaves_are_named_after_the_callers_variables() -> None:
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    b = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    x = torch.tensor([0.5, -1.0, 2.0])
    session = torch.debug.backward((torch.tanh(x * w) + b).sum())
    assert leaf_names(session.graph()) == {"w": "[3] float32", "b": "[3] float32"}
    w_node = next(n["id"] for n in session.graph()["nodes"] if n.get("leaf_name") == "w")
    assert session.node(w_node)["leaf_name"] == "w"
    session.continue_()


def test_a_leaf_bound_to_two_variables_gets_no_name() -> None:
    w = torch.tensor([1.5, 0.5], requires_grad=True)
    b = torch.tensor([0.0, 1.0], requires_grad=True)
    alias = w  # noqa: F841 (the point of the test: w has two names here)
    session = torch.debug.backward((w * w + b).sum())
    assert leaf_names(session.graph()) == {"b": "[2] float32", "": "1"}


def test_names_come_from_the_calling_function_not_from_gradviz() -> None:
    def train_step(weight: Any, data: Any) -> Any:
        return torch.debug.backward((weight * data).sum())

    session = train_step(torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0]))
    assert leaf_names(session.graph()) == {"weight": "[2] float32"}


def _models() -> tuple[Any, Any]:
    mine = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    theirs = real_torch.nn.Sequential(real_torch.nn.Linear(3, 4), real_torch.nn.Tanh(), real_torch.nn.Linear(4, 2))
    return mine, theirs


def _torch_names(model: Any) -> dict[str, str]:
    return {name: f"{list(p.shape)} float32" for name, p in model.named_parameters()}


@pytest.mark.parametrize("as_dict", [False, True], ids=["module", "named_parameters dict"])
def test_module_parameters_are_named_as_pytorch_names_them(as_dict: bool) -> None:
    model, reference = _models()
    params = dict(model.named_parameters()) if as_dict else model
    session = torch.debug.backward(model(torch.randn(5, 3)).sum(), params=params)
    assert leaf_names(session.graph()) == _torch_names(reference)  # "0.weight", "2.bias", ...


def test_params_name_first_and_the_frame_names_the_rest() -> None:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([0.5, 0.5], requires_grad=True)
    session = torch.debug.backward((w * w + b).sum(), params={"weight": w})
    assert leaf_names(session.graph()) == {"weight": "[2] float32", "b": "[2] float32"}


@pytest.mark.parametrize(("params", "phrase"), [
    (42, "params must be a dict of name -> Tensor"),
    ({"w": [1.0]}, "params['w'] must be a gradviz Tensor"),
])
def test_bad_params_fail_before_the_pass_starts(params: Any, phrase: str) -> None:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    with pytest.raises(TypeError, match=phrase.replace("[", r"\[").replace("]", r"\]")):
        torch.debug.backward(loss, params=params)
    loss.backward()  # the graph was not touched: a plain backward still runs
    assert w.grad.tolist() == real_torch.tensor([2.0, 4.0]).tolist()


def test_the_widget_syncs_and_inspects_leaf_names() -> None:
    model, reference = _models()
    widget = DebuggerWidget(torch.debug.backward(model(torch.randn(2, 3)).sum(), params=model))
    assert leaf_names(widget.graph) == _torch_names(reference)
    node = next(n for n in widget.graph["nodes"] if n.get("leaf_name") == "2.bias")
    widget.select(node["id"])
    assert widget.inspection["leaf_name"] == "2.bias"
    json.dumps(widget.graph)
    widget.close()


def test_normalize_graph_keeps_leaf_names_and_rejects_bad_ones() -> None:
    leaf = {"id": 1, "name": "AccumulateGrad", "kind": "accumulate_grad", "label": "[2] float32"}
    graph = normalize_graph({"nodes": [{**leaf, "leaf_name": "w"}], "edges": [], "roots": [1]})
    assert graph["nodes"] == [{**leaf, "leaf_name": "w"}]
    assert normalize_graph({"nodes": [leaf], "edges": [], "roots": [1]})["nodes"] == [leaf]
    with pytest.raises(SessionProtocolError, match=r"\['leaf_name'\] must be a str"):
        normalize_graph({"nodes": [{**leaf, "leaf_name": 3}]})
    with pytest.raises(SessionProtocolError, match="on an accumulate_grad node"):
        normalize_graph({"nodes": [{**leaf, "kind": "builtin", "leaf_name": "w"}]})


def test_the_widget_graph_keeps_node_numbers_and_rejects_bad_ones() -> None:
    """The view titles nodes by their small number (#1, #2...), not the engine's id."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    session = torch.debug.backward((x * 3).sum())
    graph = normalize_graph(session.graph())
    assert sorted(node["number"] for node in graph["nodes"]) == [1, 2, 3]
    node = {"id": 7, "name": "SumBackward0", "kind": "builtin", "label": "[]"}
    with pytest.raises(SessionProtocolError, match=r"\['number'\] must be a non-negative int"):
        normalize_graph({"nodes": [{**node, "number": -1}]})


def test_to_dot_names_the_parameters_of_a_module() -> None:
    from gradviz.viz import to_dot

    model, reference = _models()
    source = to_dot(model(torch.randn(2, 3)).sum(), params=model).source
    for name, label in _torch_names(reference).items():
        shape = "(" + label.split("]")[0][1:] + ")"
        assert f'label="{name}\\n{shape}"' in source, (name, source)


def test_saved_traces_and_their_pages_carry_the_leaf_names(tmp_path) -> None:
    """session.trace() keeps the names (schema field leaf_name), through save, load and the
    standalone page."""
    from gradviz.widget import _html

    model = torch.nn.Linear(3, 2)
    x = torch.ones(4, 3)
    session = torch.debug.backward(model(x).sum(), params=model)
    session.continue_()
    path = tmp_path / "named.trace.json"
    session.trace().save(path)
    loaded = torch.load_trace(path)
    assert leaf_names(loaded.graph) == {"weight": "[2, 3] float32", "bias": "[2] float32"}
    data = _html.standalone_data(loaded)
    assert leaf_names(data["graph"]) == leaf_names(loaded.graph)
    page = _html.trace_to_html(loaded, tmp_path / "named.html").read_text()
    assert '"leaf_name":"weight"' in page.replace(" ", "")

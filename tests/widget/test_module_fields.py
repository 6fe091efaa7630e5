"""The widget's graph keeps each node's module path (``module``, ``module_types``,
``module_call``), which the front end folds the drawing by; the HTML page's data keeps them too."""

from __future__ import annotations

import json

import pytest

import gradviz as torch
from gradviz.widget import DebuggerWidget, _html
from gradviz.widget._widget import SessionProtocolError, normalize_graph


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def _session():
    model = torch.nn.Sequential(Block(), Block())
    return torch.debug.backward(model(torch.randn(2, 3)).sum(), params=model)


def test_the_widget_graph_keeps_module_paths() -> None:
    session = _session()
    raw = {node["id"]: node for node in session.graph()["nodes"]}
    widget = DebuggerWidget(session)
    kept = [node for node in widget.graph["nodes"] if "module" in node]
    assert kept, "the session's graph has module paths; the widget's must keep them"
    for node in kept:
        source = raw[node["id"]]
        assert node["module"] == source["module"]
        assert node.get("module_types") == source.get("module_types")
        assert node.get("module_call") == source.get("module_call")
    assert {tuple(node["module"][:1]) for node in kept} == {("0",), ("1",)}
    json.dumps(widget.graph)
    widget.close()


def test_the_html_page_data_keeps_module_paths() -> None:
    model = torch.nn.Sequential(Block(), Block())
    with torch.record() as trace:
        model(torch.randn(2, 3)).sum().backward()
    graph = _html.standalone_data(trace)["graph"]
    assert any(node.get("module_types") == ["Block", "Linear"] for node in graph["nodes"])
    assert {tuple(node["module"][:1]) for node in graph["nodes"] if "module" in node} == {("0",), ("1",)}


@pytest.mark.parametrize(("field", "value", "phrase"), [
    ("module", "blocks.0", r"\['module'\] must be a list of str"),
    ("module", ["blocks", 0], r"\['module'\] must be a list of str"),
    ("module_types", ["Block"], r"\['module_types'\] must be a list of 2 str"),
    ("module_call", -1, r"\['module_call'\] must be a non-negative int"),
])
def test_normalize_graph_rejects_bad_module_fields(field: str, value: object, phrase: str) -> None:
    node = {"id": 1, "name": "AddBackward0", "kind": "builtin", "label": "",
            "module": ["blocks", "0"], "module_types": ["ModuleList", "Block"], "module_call": 0}
    assert normalize_graph({"nodes": [node], "edges": [], "roots": [1]})["nodes"] == [node]
    with pytest.raises(SessionProtocolError, match=phrase):
        normalize_graph({"nodes": [{**node, field: value}], "edges": [], "roots": [1]})

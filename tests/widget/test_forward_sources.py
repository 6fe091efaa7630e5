"""Each graph node carries the user's forward line that built it (``source``, shown on hover),
when the forward was observed: inside ``gradviz.record()``, or in anomaly mode."""

from __future__ import annotations

import inspect

import pytest

import gradviz as torch
from gradviz.debug import ReplaySession
from gradviz.widget import DebuggerWidget
from gradviz.widget._html import standalone_data
from gradviz.widget._widget import SessionProtocolError, normalize_graph

HERE = __file__


def _forward(x, w):
    line = inspect.currentframe().f_lineno + 1
    return (x * w).tanh().sum(), line


def _names_and_sources(graph: dict) -> dict[str, str | None]:
    return {node["name"]: node.get("source") for node in graph["nodes"]}


def test_a_recorded_forward_gives_each_node_its_line_in_the_page_data() -> None:
    w = torch.randn(3, requires_grad=True)
    with torch.record() as trace:
        loss, line = _forward(torch.randn(3), w)
        loss.backward()
    expected = f"{HERE}:{line}: return (x * w).tanh().sum(), line"
    sources = _names_and_sources(normalize_graph(ReplaySession(trace).graph(), ReplaySession(trace).forward_sources()))
    assert sources == {"SumBackward0": expected, "TanhBackward0": expected, "MulBackward0": expected,
                       "AccumulateGrad": None}, "a leaf has no forward line"
    page = _names_and_sources(standalone_data(trace)["graph"])
    assert page == sources


def test_a_live_session_in_anomaly_mode_shows_the_line() -> None:
    w = torch.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection"), torch.autograd.detect_anomaly():
        loss, line = _forward(torch.randn(3), w)
        widget = DebuggerWidget(torch.debug.backward(loss))
    sources = _names_and_sources(widget.graph)
    assert sources["MulBackward0"] == f"{HERE}:{line}: return (x * w).tanh().sum(), line"
    widget.close()


def test_an_unobserved_forward_has_no_source() -> None:
    w = torch.randn(3, requires_grad=True)
    loss, _ = _forward(torch.randn(3), w)
    widget = DebuggerWidget(torch.debug.backward(loss))
    assert all("source" not in node for node in widget.graph["nodes"])
    widget.close()


def test_normalize_graph_rejects_a_source_that_is_not_text() -> None:
    node = {"id": 1, "name": "MulBackward0", "kind": "builtin", "label": ""}
    assert normalize_graph({"nodes": [{**node, "source": "f.py:3: y = x * w"}]})["nodes"][0]["source"] == "f.py:3: y = x * w"
    with pytest.raises(SessionProtocolError, match=r"\['source'\] must be a str"):
        normalize_graph({"nodes": [{**node, "source": 3}]})


"""The models of tests/browser/torch_model_zoo.py (masked TransformerEncoder, bidirectional GRU,
U-Net, ViT, custom autograd.Function, weight tying, a module called twice, BatchNorm in train
and eval mode, ModuleDict / ParameterList / ParameterDict) recorded with
``gradviz.debug.record_torch`` inside ``torch_scopes()`` and replayed in the notebook widget,
checked everywhere the browser tests only sample: every parameter is named as
``named_parameters()`` names it and sits in the module that owns it, every module path is one
of ``named_modules()``, a module applied twice shows two applications, after Continue every
parameter's ``.grad`` in the inspector is torch's (bit for bit: min, max, the values shown) and
the module inspector of every module lists exactly its parameters with those gradients, and the
gradient into the node that made a module's output is what a torch hook on that output got.
The browser half is tests/browser/test_torch_model_zoo.py."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
import torch_model_zoo  # noqa: E402

import gradviz  # noqa: E402
from gradviz.debug import ReplaySession  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402


def _send(widget: DebuggerWidget, content: dict[str, Any]) -> None:
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def _discovery_ids(loss: Any) -> dict[Any, int]:
    """record_torch's numbering (docs/events.md): discovery order from ``loss.grad_fn``."""
    ids = {loss.grad_fn: 0}
    stack = [loss.grad_fn]
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None and child not in ids:
                ids[child] = len(ids)
                stack.append(child)
    return ids


def _same_as_torch(summary: dict[str, Any], grad: Any) -> None:
    flat = grad.detach().reshape(-1)
    shown = len(summary["values"])
    assert summary["shape"] == list(grad.shape) and summary["dtype"] == "float32"
    assert summary["numel"] == flat.numel() and summary["nan"] == 0 and summary["inf"] == 0
    assert summary["min"] == flat.min().item() and summary["max"] == flat.max().item()
    assert summary["values"] == flat[:shown].tolist() and shown == min(flat.numel(), 32 if flat.numel() <= 32 else 6)
    assert math.isclose(summary["mean"], flat.double().mean().item(), rel_tol=1e-9, abs_tol=1e-15)
    assert math.isclose(summary["norm"], flat.double().norm().item(), rel_tol=1e-9)


@pytest.mark.parametrize("name", torch_model_zoo.NAMES)
def test_a_torch_model_replays_in_the_widget_with_every_gradient_torchs(name: str) -> None:
    case = torch_model_zoo.make(name)
    probe = torch_model_zoo.probe_output(case)
    with gradviz.debug.torch_scopes():
        loss = case.forward_and_loss()
    output = probe()
    probe_node = _discovery_ids(loss)[output.grad_fn]
    trace = gradviz.debug.record_torch(loss, params=case.model)
    parameters = dict(case.model.named_parameters())
    modules = {path for path, _ in case.model.named_modules()}
    nodes = trace.graph["nodes"]

    leaves = {node["leaf_name"]: node for node in nodes if "leaf_name" in node}
    assert sorted(leaves) == sorted(parameters)
    for key, node in leaves.items():
        assert ".".join(node["module"]) == key.rpartition(".")[0], (key, node["module"])
    assert {".".join(node["module"]) for node in nodes if "module" in node} <= modules
    calls = {node["module_call"] for node in nodes if node.get("module") == ["block", "0"] and "module_call" in node}
    assert calls == ({0, 1} if name == "called_twice" else set())

    widget = DebuggerWidget(ReplaySession(trace))
    try:
        _send(widget, {"type": "command", "name": "continue"})
        assert widget.status == "finished"
        for key, node in leaves.items():
            _send(widget, {"type": "command", "name": "select", "node": node["id"]})
            assert widget.inspection["leaf_name"] == key
            _same_as_torch(widget.inspection["accumulated"]["after"], parameters[key].grad)
        _send(widget, {"type": "command", "name": "select", "node": probe_node})
        _same_as_torch(widget.inspection["grads_in"][output.output_nr], output.grad)
        for path in sorted({".".join(node["module"]) for node in nodes if "module" in node}):
            widget.select_module(path)
            listed = widget.inspection["parameters"]
            prefix = f"{path}." if path else ""
            assert [entry["name"] for entry in listed] == sorted(key for key in parameters if key.startswith(prefix)), path
            for entry in listed:
                _same_as_torch(entry["grad"], parameters[entry["name"]].grad)
    finally:
        widget.close()

"""Real PyTorch models (tests/browser/torch_models.py: a ResNet-18, a GPT-2-style transformer,
an unrolled LSTM), their backward recorded with ``gradviz.debug.record_torch``, replayed in the
notebook widget: the graph trait carries the model's module paths and parameter names, a
Continue command runs the replay to its end, and selecting a parameter's AccumulateGrad puts
torch's own ``.grad`` in the inspector. The browser half is tests/browser/test_torch_models.py."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
import torch_models  # noqa: E402

import gradviz  # noqa: E402
from gradviz.debug import ReplaySession  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402

#: A module each model's graph must name (the parameter to select: torch_models.CHECKS).
MODULES = {"resnet18": "layer3.1.conv2", "gpt": "h.4.attn", "lstm": "cells.1"}


def _send(widget: DebuggerWidget, content: dict[str, Any]) -> None:
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


@pytest.mark.parametrize("name", torch_models.NAMES)
def test_a_recorded_torch_model_replays_in_the_widget_with_torchs_grads(name: str) -> None:
    model, forward_and_loss = torch_models.make(name)
    with gradviz.debug.torch_scopes():
        loss = forward_and_loss()
    trace = gradviz.debug.record_torch(loss, params=model)
    parameter, module = torch_models.CHECKS[name][1], MODULES[name]
    grad = dict(model.named_parameters())[parameter].grad
    assert grad is not None
    widget = DebuggerWidget(ReplaySession(trace))
    try:
        nodes = widget.graph["nodes"]
        assert len(nodes) == len(trace.graph["nodes"])
        assert any(".".join(node.get("module", [])) == module for node in nodes)
        (leaf,) = [node["id"] for node in nodes if node.get("leaf_name") == parameter]
        _send(widget, {"type": "command", "name": "continue"})
        assert widget.status == "finished"
        assert all(state in ("done", "released") for state in widget.states.values())
        _send(widget, {"type": "command", "name": "select", "node": leaf})
        after = widget.inspection["accumulated"]["after"]
        assert after["shape"] == list(grad.shape) and after["dtype"] == "float32"
        assert after["min"] == grad.min().item() and after["max"] == grad.max().item()
        assert math.isclose(after["norm"], grad.double().norm().item(), rel_tol=1e-12)
        assert widget.inspection["leaf_name"] == parameter
    finally:
        widget.close()

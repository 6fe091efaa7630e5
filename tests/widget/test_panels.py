"""Protocol 5 in the Python half: the ``overlays`` trait, ``overlay`` requests and the module
inspector (``{"type": "select", "module": ...}``), on real gradviz sessions."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import gradviz
from gradviz.widget import DebuggerWidget

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_widget import Recorder, browser_sends  # noqa: E402

HOSTILE = '<img src=x onerror="alert(1)">'


class Block(gradviz.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = gradviz.nn.Sequential(gradviz.nn.Linear(3, 4), gradviz.nn.Tanh(), gradviz.nn.Linear(4, 3))

    def forward(self, x):
        return x + self.mlp(x)


class Model(gradviz.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = gradviz.nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.pow(2).sum()


def make_widget():
    model = Model()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    session = gradviz.debug.backward(model(gradviz.tensor(x)), params=model)
    return model, x, session, DebuggerWidget(session)


def torch_grads(model, x) -> dict:
    """The same model's parameter gradients from PyTorch."""
    tensors = {name: torch.tensor(p.detach().numpy(), requires_grad=True) for name, p in model.named_parameters()}
    h = torch.from_numpy(x)
    for index in range(2):
        prefix = f"blocks.{index}.mlp."
        hidden = torch.tanh(h @ tensors[prefix + "0.weight"].T + tensors[prefix + "0.bias"])
        h = h + hidden @ tensors[prefix + "2.weight"].T + tensors[prefix + "2.bias"]
    h.pow(2).sum().backward()
    return {name: t.grad.numpy() for name, t in tensors.items()}


def test_overlays_trait_lists_builtins_and_sends_values_on_request():
    model, x, session, widget = make_widget()
    try:
        recorder = Recorder(widget)
        assert widget.protocol_version == 6
        assert list(widget.overlays)[:5] == ["grad_norm", "max_abs_grad", "nonfinite", "dtype", "saved_bytes"]
        assert widget.overlays["grad_norm"]["values"] is None  # not requested yet
        browser_sends(widget, {"type": "overlay", "name": "grad_norm"})
        assert recorder.acks[-1] == {"type": "ack", "name": "overlay", "ok": True, "reason": None}
        session.continue_()
        values = widget.overlays["grad_norm"]["values"]
        expected = torch_grads(model, x)
        for node in widget.graph["nodes"]:
            if node.get("leaf_name") in expected:
                assert values[str(node["id"])] == pytest.approx(np.linalg.norm(expected[node["leaf_name"]]), rel=1e-5)
        assert widget.overlays["dtype"]["values"] is None
        ids = [node["id"] for node in widget.graph["nodes"]]
        session.overlay(HOSTILE, {ids[0]: float("nan"), ids[1]: 2.0})
        assert widget.overlays[HOSTILE]["values"] == {str(ids[0]): "nan", str(ids[1]): 2.0}
        browser_sends(widget, {"type": "overlay", "name": "nope"})
        assert recorder.acks[-1]["type"] == "error" and "no overlay named 'nope'" in recorder.acks[-1]["reason"]
        browser_sends(widget, {"type": "overlay", "name": 3})
        assert recorder.acks[-1]["type"] == "error"
    finally:
        widget.close()


def test_selecting_a_module_shows_its_parameters_with_torch_gradients():
    model, x, session, widget = make_widget()
    try:
        recorder = Recorder(widget)
        leaf = next(node["id"] for node in widget.graph["nodes"] if node["kind"] == "accumulate_grad")
        widget.select(leaf)
        browser_sends(widget, {"type": "select", "module": "blocks.1"})
        assert recorder.acks[-1] == {"type": "ack", "name": "select", "ok": True, "reason": None}
        assert widget.selected is None and widget.selected_module == "blocks.1"
        inspection = widget.inspection
        assert (inspection["module"], inspection["type"], inspection["calls"]) == ("blocks.1", "Block", 1)
        names = [p["name"] for p in inspection["parameters"]]
        assert names == sorted(f"blocks.1.mlp.{i}.{w}" for i in (0, 2) for w in ("weight", "bias"))
        assert all(p["grad"] is None for p in inspection["parameters"])  # not run yet
        assert inspection["states"].get("pending", 0) + inspection["states"].get("ready", 0) == inspection["count"]
        session.continue_()
        expected = torch_grads(model, x)
        for parameter in widget.inspection["parameters"]:
            grad = expected[parameter["name"]]
            assert parameter["grad"]["shape"] == list(grad.shape)
            assert parameter["grad"]["norm"] == pytest.approx(np.linalg.norm(grad), rel=1e-5)
        states = widget.inspection["states"]
        assert set(states) <= {"done", "released"} and sum(states.values()) == widget.inspection["count"]
        # unknown path: the error reply; the selection stays
        browser_sends(widget, {"type": "select", "module": HOSTILE})
        assert recorder.acks[-1]["type"] == "error" and "no module" in recorder.acks[-1]["reason"]
        assert widget.selected_module == "blocks.1"
        browser_sends(widget, {"type": "select", "module": "blocks.1", "extra": 1})
        assert recorder.acks[-1]["type"] == "error"
        # a node click leaves the module view
        widget.select(leaf)
        assert widget.selected_module is None and widget.inspection["id"] == leaf
        browser_sends(widget, {"type": "select", "module": None})
        assert widget.selected_module is None and widget.selected is None
    finally:
        widget.close()


def test_a_module_named_with_markup_is_kept_as_plain_text():
    class Odd(gradviz.nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module(HOSTILE, gradviz.nn.Linear(2, 1))

        def forward(self, x):
            return getattr(self, HOSTILE)(x).sum()

    model = Odd()
    session = gradviz.debug.backward(model(gradviz.ones(1, 2)), params=model)
    widget = DebuggerWidget(session)
    try:
        widget.select_module(HOSTILE)
        assert widget.inspection["module"] == HOSTILE
        assert {p["name"] for p in widget.inspection["parameters"]} == {f"{HOSTILE}.weight", f"{HOSTILE}.bias"}
        with pytest.raises(KeyError, match="no module"):
            widget.select_module("missing")
    finally:
        widget.close()

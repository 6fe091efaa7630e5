"""``gradviz.debug.record_torch(loss, params=...)``: the leaves of a recorded PyTorch pass carry
the names ``named_parameters()`` gives them, so replays, the widget and standalone pages label
``fc1.weight`` instead of an anonymous ``AccumulateGrad [4] float32``.

Names are checked against torch itself (the tensor behind each AccumulateGrad node is the
parameter of that name), the trace against the trace schema (with ``jsonschema``, and the
strict loader), and the gradients against a plain ``backward()`` of an identical model.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

import gradviz
from gradviz.debug import record_torch
from gradviz.debug._torch_recorder import _record
from gradviz.instrument._schema import json_schema
from gradviz.widget import _html
from gradviz.widget._widget import DebuggerWidget

VALIDATOR = jsonschema.Draft202012Validator(json_schema())


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(4, 2)
        self.scale = torch.nn.Parameter(torch.tensor([0.5, -2.0]))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))) * self.scale


def model():
    torch.manual_seed(0)
    return Net()


def loss_of(net, x=None):
    torch.manual_seed(1)
    inputs = torch.randn(5, 3) if x is None else x
    return ((net(inputs) - torch.randn(5, 2)) ** 2).mean()


def leaf_names(trace):
    return {n["id"]: n["leaf_name"] for n in trace.graph["nodes"] if "leaf_name" in n}


def check_trace(trace, tmp_path):
    """Valid against the schema (jsonschema), and loads strictly with the same graph."""
    data = json.loads(trace.to_json())
    errors = sorted(VALIDATOR.iter_errors(data), key=lambda e: list(e.path))
    assert not errors, errors[0].message
    path = tmp_path / "named.trace.json"
    trace.save(path)
    assert gradviz.load_trace(path).graph == trace.graph


@pytest.mark.parametrize("form", ["module", "dict", "pairs"])
def test_leaves_are_named_as_named_parameters(form, tmp_path):
    net, reference = model(), model()
    params = {"module": net, "dict": dict(net.named_parameters()),
              "pairs": list(net.named_parameters())}[form]
    trace, nodes = _record(loss_of(net), params=params)
    names = leaf_names(trace)
    by_name = dict(net.named_parameters())
    assert sorted(names.values()) == sorted(by_name)  # every parameter, once
    for node_id, name in names.items():
        assert nodes[node_id].variable is by_name[name]  # the tensor torch accumulates into
        assert trace.graph["nodes"][node_id]["kind"] == "accumulate_grad"
    check_trace(trace, tmp_path)
    # recording changes nothing: the gradients of a plain backward
    loss_of(reference).backward()
    for (name, p), (_, q) in zip(net.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)


def test_without_params_nothing_changes(tmp_path):
    net = model()
    named = record_torch(loss_of(net), params=net)
    net.zero_grad()
    plain = record_torch(loss_of(net))
    assert leaf_names(plain) == {}
    # params also places each named parameter in the module that owns it
    added = ("leaf_name", "module", "module_types")
    stripped = [{k: v for k, v in node.items() if k not in added} for node in named.graph["nodes"]]
    assert stripped == plain.graph["nodes"] and named.graph["edges"] == plain.graph["edges"]
    assert [(e["kind"], e["node"]) for e in named.events] == \
        [(e["kind"], e["node"]) for e in plain.events]
    check_trace(plain, tmp_path)


def test_only_the_leaves_params_names_are_named():
    """A leaf input that requires grad and a parameter left out of ``params`` stay unnamed."""
    net = model()
    x = torch.randn(5, 3, requires_grad=True)
    params = {"first.weight": net.fc1.weight, "the scale": net.scale}
    trace, nodes = _record(loss_of(net, x), params=params)
    names = leaf_names(trace)
    assert sorted(names.values()) == ["first.weight", "the scale"]
    unnamed = [nodes[i].variable for i, n in enumerate(trace.graph["nodes"])
               if n["kind"] == "accumulate_grad" and i not in names]
    assert len(unnamed) == 4
    assert any(t is x for t in unnamed) and any(t is net.fc2.bias for t in unnamed)


def test_a_tensor_listed_twice_keeps_its_first_name():
    net = model()
    trace = record_torch(loss_of(net), params=[("a", net.scale), ("b", net.scale)])
    assert list(leaf_names(trace).values()) == ["a"]


def test_replay_widget_and_page_show_the_names():
    net = model()
    trace = record_torch(loss_of(net), params=net)
    names = leaf_names(trace)
    replay = gradviz.debug.replay(trace)
    assert {n["id"]: n["leaf_name"] for n in replay.graph()["nodes"] if "leaf_name" in n} == names
    node_id = next(iter(names))
    assert replay.node(node_id)["leaf_name"] == names[node_id]
    widget = DebuggerWidget(replay)
    shown = {n["id"]: n.get("leaf_name") for n in widget.graph["nodes"] if "leaf_name" in n}
    assert shown == names
    page = _html.standalone_data(trace)
    assert {n["id"]: n["leaf_name"] for n in page["graph"]["nodes"] if "leaf_name" in n} == names


def test_bad_params_say_what_to_pass_before_anything_runs():
    net = model()
    loss = loss_of(net)
    with pytest.raises(TypeError, match=r"params\['w'\] must be a torch.Tensor, got "
                                        r"gradviz.*Tensor"):
        record_torch(loss, params={"w": gradviz.ones(3, requires_grad=True)})
    with pytest.raises(TypeError, match="params must be a dict of name -> torch.Tensor.*got int"):
        record_torch(loss, params=3)
    with pytest.raises(TypeError, match=r"\(name, Tensor\) pairs\); got the item"):
        record_torch(loss, params=[net.scale])
    assert all(p.grad is None for p in net.parameters())  # nothing ran
    record_torch(loss, params=net)  # the graph is intact
    assert all(p.grad is not None for p in net.parameters())

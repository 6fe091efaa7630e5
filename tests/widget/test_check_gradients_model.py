"""Check gradients on a model session (docs/doctor.md, the whole-model doctor): a gradviz
``debug.backward(loss, params=model)`` session runs the whole-model doctor, and a
``record_torch(..., params=model, doctor=True)`` replay shows the report recorded with the
trace, as does the trace's HTML page. Each finding's node, related nodes and parameter nodes
are node ids of the widget's graph (what the view marks and selects)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch as real_torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_widget import Recorder, browser_sends  # noqa: E402

import gradviz  # noqa: E402
from gradviz.widget import DebuggerWidget  # noqa: E402
from gradviz.widget._html import DATA_ELEMENT_ID  # noqa: E402

CHECK = {"type": "command", "name": "check_gradients"}


def cut_net(lib):
    lib.manual_seed(0)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = lib.nn.Linear(3, 4)
            self.layer2 = lib.nn.Linear(4, 1)

        def forward(self, x):
            return self.layer2(lib.tanh(self.layer1(x).detach()))

    return Net()


def check(widget):
    recorder = Recorder(widget)
    browser_sends(widget, CHECK)
    assert widget.doctor["state"] == "done", widget.doctor
    report = widget.doctor["report"]
    ids = {node["id"]: node for node in widget.graph["nodes"]}
    findings = report["findings"]
    assert [(f["kind"], f["params"]) for f in findings] == [
        ("no_gradient", ["layer1.weight"]), ("no_gradient", ["layer1.bias"])]
    for finding in findings:
        assert ids[finding["node"]]["name"] == "AddmmBackward0" == finding["node_name"]
        assert finding["module"] == "layer1" and finding["summary"] and finding["fix"]
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    return recorder, report


def test_a_gradviz_model_session_runs_the_whole_model_doctor_with_a_progress_step():
    net = cut_net(gradviz)
    session = gradviz.debug.backward(net(gradviz.ones(2, 3)).pow(2).mean(), params=net)
    widget = DebuggerWidget(session)
    recorder, _ = check(widget)
    progress = [m for m in recorder.acks if m.get("type") == "progress"]
    assert progress[-1]["label"] == "model checks" and progress[-1]["done"] == progress[-1]["total"]
    widget.close()


def test_a_record_torch_replay_with_the_doctor_shows_its_report_and_so_does_its_page(tmp_path):
    net = cut_net(real_torch)
    with gradviz.debug.torch_scopes():
        loss = net(real_torch.ones(2, 3)).pow(2).mean()
    trace = gradviz.debug.record_torch(loss, params=net, doctor=True)
    assert net.layer2.weight.grad is not None, "the recorded backward ran after the doctor"
    widget = DebuggerWidget(gradviz.debug.ReplaySession(trace))
    assert "check_gradients" in widget.commands
    _, report = check(widget)
    widget.close()
    page = trace.to_html(tmp_path / "model.html").read_text(encoding="utf-8")
    text = re.search(f'<script type="application/json" id="{DATA_ELEMENT_ID}">(.*?)</script>',
                     page, re.S).group(1)
    assert json.loads(text)["doctor"] == report
    # a replay without a report does not offer the check
    plain = gradviz.debug.record_torch(net(real_torch.ones(2, 3)).sum(), params=net)
    assert "check_gradients" not in DebuggerWidget(gradviz.debug.ReplaySession(plain)).commands

"""The saved trace view (``Trace.save_view`` / ``Trace.view``, ``.gvtrace.json``): the file
format, its round trip and the errors of a malformed or oversized file. The JupyterLab
extension that shows it is driven in tests/browser/test_trace_view_in_jupyter.py."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch as real_torch

import gradviz as torch
from gradviz import nn
from gradviz.debug import ReplaySession, record_torch, torch_scopes
from gradviz.errors import TraceFormatError
from gradviz.instrument import Trace
from gradviz.widget import TRACE_VIEW_MIME, TraceView, load_trace_view
from gradviz.widget._trace_view import TRACE_VIEW_VERSION, check_trace_view

EVIL = '<img src=x onerror="alert(1)">'


def model_trace(name: str = "hidden") -> Trace:
    """A two-layer model whose first block (class and attribute) is called ``name``."""

    def init(self: nn.Module) -> None:
        nn.Module.__init__(self)
        self.add_module(name, nn.Linear(3, 4))

    block = type(name, (nn.Module,), {"__init__": init, "forward": lambda self, x: getattr(self, name)(x).relu()})
    torch.manual_seed(0)
    model = nn.Sequential(block(), nn.Linear(4, 1))
    x = torch.randn(5, 3)
    with torch.record() as trace:
        model(x).pow(2).mean().backward()
    return trace


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Path]:
    trace = model_trace(EVIL)
    path = trace.save_view(tmp_path_factory.mktemp("view") / "run.gvtrace.json", title=EVIL)
    return trace, path


def document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_saved_view_reads_back_as_the_same_trace_and_replays_like_a_replay_session(saved: tuple[Trace, Path]) -> None:
    trace, path = saved
    view = load_trace_view(path)
    assert isinstance(view, TraceView)
    assert view.document == document(path)
    assert view.trace.to_dict() == trace.to_dict()
    # gradviz.load_trace reads the trace inside a view file, for a notebook replay.
    assert torch.load_trace(path).to_dict() == trace.to_dict()
    data = view.document["view"]
    assert data["title"] == EVIL
    assert f"0.{EVIL}.weight" in {node.get("leaf_name") for node in data["graph"]["nodes"]}
    # What the file says at each position is what a ReplaySession of the trace says there.
    names = data["state_names"]
    states = {node["id"]: "pending" for node in data["graph"]["nodes"]}
    session = ReplaySession(torch.load_trace(path))
    assert data["start"] == session.position
    for position, flat in enumerate(data["changes"]):
        for node_id, code in zip(flat[::2], flat[1::2]):
            states[node_id] = names[code]
        session.seek(position)
        assert states == session.node_states(), position
        assert data["current"][position] == session.current, position
    assert len(data["events"]) == len(trace.events)


def test_the_output_carries_the_same_document_under_its_mime_type(saved: tuple[Trace, Path]) -> None:
    trace, path = saved
    view = trace.view(title=EVIL)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {TRACE_VIEW_MIME, "text/plain"}
    assert TRACE_VIEW_MIME == "application/vnd.gradviz.trace+json"
    # JSON-able as it is (a notebook stores it), and the same document as the file.
    assert json.loads(json.dumps(bundle[TRACE_VIEW_MIME], allow_nan=False)) == document(path)
    assert "TraceView" in bundle["text/plain"] and "JupyterLab" in bundle["text/plain"]


def test_a_view_file_must_be_named_gvtrace_json(tmp_path: Path) -> None:
    trace = model_trace()
    with pytest.raises(ValueError, match=r"must end in '\.gvtrace\.json'.*save it as run\.gvtrace\.json"):
        trace.save_view(tmp_path / "run.json")
    assert not (tmp_path / "run.json").exists()
    assert trace.save_view(tmp_path / "RUN.GVTRACE.JSON").is_file()


def malformed(good: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(case, document, the phrase its error must contain)."""
    cases: list[tuple[str, Any, str]] = [
        ("a list", [], "must be a JSON object, got list"),
        ("a raw trace", good["trace"], "this is a raw trace .*gradviz.load_trace"),
    ]

    def changed(case: str, phrase: str, edit: Any) -> None:
        data = copy.deepcopy(good)
        edit(data)
        cases.append((case, data, phrase))

    changed("a newer version", r"version 2 \(written by gradviz '9\.0'\).*reads version 1",
            lambda d: d.update(version=2, gradviz_version="9.0"))
    changed("an unknown field", "has no field 'extra'", lambda d: d.update(extra=1))
    changed("a trace without events", "the trace view's trace is malformed", lambda d: d["trace"].pop("events"))
    changed("a view of another format", "view is malformed: format and version", lambda d: d["view"].update(format="x"))
    changed("too few change lists", r"changes must have one entry per position", lambda d: d["view"]["changes"].pop())
    changed("a current node not in the graph", r"current\[1\] must be a node id of the graph",
            lambda d: d["view"]["current"].__setitem__(1, 10**9))
    changed("an event of an unknown node", r"events\[3\] must be \[kind, node id or null",
            lambda d: d["view"]["events"][3].__setitem__(1, 10**9))
    changed("a bad state code", r"changes\[2\] must be \[node id, state code",
            lambda d: d["view"]["changes"].__setitem__(2, [d["view"]["graph"]["nodes"][0]["id"], 99]))
    changed("a start past the end", "start must be a position", lambda d: d["view"].update(start=10**6))
    changed("inspections of a non-node", r"inspections\['x'\] must list", lambda d: d["view"]["inspections"].update(x=[]))
    changed("a final status that is no status", "final_status must be one of", lambda d: d["view"].update(final_status="done"))
    return cases


def test_malformed_view_files_are_refused_with_what_is_wrong(saved: tuple[Trace, Path], tmp_path: Path) -> None:
    _, path = saved
    good = document(path)
    check_trace_view(copy.deepcopy(good))  # the cases below differ from a valid document
    for case, data, phrase in malformed(good):
        target = tmp_path / "bad.gvtrace.json"
        target.write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(TraceFormatError, match=phrase):
            load_trace_view(target)
        assert case


def test_unreadable_and_oversized_view_files_are_refused_before_parsing(saved: tuple[Trace, Path], tmp_path: Path) -> None:
    _, path = saved
    size = os.path.getsize(path)
    with pytest.raises(TraceFormatError, match=f"is {size} bytes, more than the limit of {size - 1}"):
        load_trace_view(path, max_bytes=size - 1)
    assert load_trace_view(path, max_bytes=size).document == document(path)
    with pytest.raises(TraceFormatError, match="more than the limit|too many"):
        load_trace_view(path, max_values=100)
    with pytest.raises(TraceFormatError, match="is a directory, not a regular file"):
        load_trace_view(tmp_path)
    bad = tmp_path / "nan.gvtrace.json"
    bad.write_text('{"format": "gradviz-trace-view", "version": NaN}', encoding="utf-8")
    with pytest.raises(TraceFormatError, match="may not contain the literal NaN"):
        load_trace_view(bad)
    bad.write_text('{"format": "gradviz-trace-view", "format": "x"}', encoding="utf-8")
    with pytest.raises(TraceFormatError, match="appears twice"):
        load_trace_view(bad)
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        load_trace_view(bad)


def test_the_version_matches_the_viewers() -> None:
    source = (Path(__file__).resolve().parents[2] / "labextension" / "src" / "trace_view.ts").read_text(encoding="utf-8")
    assert f"export const TRACE_VIEW_VERSION = {TRACE_VIEW_VERSION};" in source
    assert f'export const TRACE_VIEW_MIME = "{TRACE_VIEW_MIME}";' in source


def test_a_trace_with_a_doctor_report_keeps_it_in_its_view(tmp_path: Path) -> None:
    """record_torch(doctor=True) puts the doctor's report on the trace; the saved view carries
    it (the viewer's Check gradients shows it, as the HTML page's does)."""
    class Cut(real_torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = real_torch.nn.Linear(3, 3)
            self.second = real_torch.nn.Linear(3, 1)

        def forward(self, x: real_torch.Tensor) -> real_torch.Tensor:
            return self.second(self.first(x).detach().tanh())  # first is cut off from the loss

    real_torch.manual_seed(0)
    model = Cut()
    with torch_scopes():  # the doctor sees `first` run, so it tells a cut from an unused layer
        loss = model(real_torch.randn(4, 3)).sum()
    trace = record_torch(loss, params=model, doctor=True)
    path = trace.save_view(tmp_path / "cut.gvtrace.json")
    view = json.loads(path.read_text(encoding="utf-8"))["view"]
    cut_off = {name for finding in view["doctor"]["findings"] if finding["kind"] == "no_gradient"
               for name in finding["params"]}
    assert cut_off == {"first.weight", "first.bias"}
    load_trace_view(path)  # the file with its report passes the loader's checks

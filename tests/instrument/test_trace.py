"""``gradviz.record()``, ``Trace.save`` / ``gradviz.load_trace``: round trips, a golden event
stream, and hostile files (which must raise TraceFormatError, never anything else)."""

from __future__ import annotations

import copy
import json
import os
import threading

import jsonschema
import pytest

import gradviz
from gradviz.errors import TraceFormatError
from gradviz.instrument import SCHEMA_VERSION, Trace, load_trace, record
from gradviz.instrument._schema import json_schema
from gradviz.instrument._trace import load_trace_from_json

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "debug", "golden",
                      "small_graph.events.json")
TRACE_VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def small_graph():
    """A fixed graph touching sums, broadcasting, a shared input and two leaves."""
    x = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]], requires_grad=True)
    h = (x * w).tanh()
    loss = (h * h + x.exp()).sum()
    return loss, x, w


def recorded_trace():
    loss, x, w = small_graph()
    with record() as trace:
        loss.backward()
    return trace


def normalize(trace_dict):
    """Times to 0 and ids renumbered in order of appearance, so the stream is reproducible."""
    data = copy.deepcopy(trace_dict)
    ids = {}

    def node(value):
        if value is None:
            return None
        return ids.setdefault(value, len(ids))

    for item in data["graph"]["nodes"]:
        item["id"] = node(item["id"])
    for edge in data["graph"]["edges"]:
        edge["source"], edge["target"] = node(edge["source"]), node(edge["target"])
    data["graph"]["roots"] = [node(r) for r in data["graph"]["roots"]]
    data["gradviz_version"] = "normalized"
    for event in data["events"]:
        event["time"] = 0.0
        if "duration" in event:
            event["duration"] = 0.0
        event["node"] = node(event["node"])
        if "producer" in event:
            event["producer"] = node(event["producer"])
        if event["kind"] == "backward_started":
            event["roots"] = [{"node": node(r["node"]), "input_nr": r["input_nr"]} for r in event["roots"]]
            event["dependencies"] = {str(node(int(k))): v for k, v in sorted(
                event["dependencies"].items(), key=lambda kv: node(int(kv[0])))}
    return data


def test_save_then_load_gives_the_identical_trace(tmp_path):
    trace = recorded_trace()
    path = tmp_path / "trace.json"
    trace.save(path)
    loaded = load_trace(path)
    assert loaded.events == trace.events
    assert loaded.graph == trace.graph
    TRACE_VALIDATOR.validate(json.loads(path.read_text()))


def test_golden_event_stream_of_a_fixed_small_graph():
    """An engine change that alters this stream must update the golden file on purpose:
    GRADVIZ_UPDATE_GOLDEN=1 python -m pytest tests/instrument/test_trace.py -k golden"""
    data = normalize(recorded_trace().to_dict())
    if os.environ.get("GRADVIZ_UPDATE_GOLDEN") == "1":
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
    with open(GOLDEN, encoding="utf-8") as handle:
        golden = json.load(handle)
    assert [e["kind"] for e in data["events"]] == [e["kind"] for e in golden["events"]]
    assert [e["text"] for e in data["events"]] == [e["text"] for e in golden["events"]]
    assert data == golden
    Trace.from_dict(golden)  # the golden file itself is a valid trace


def test_record_records_every_backward_of_its_thread_only():
    a = gradviz.tensor([1.0], requires_grad=True)
    other_done = threading.Event()

    def other_thread():
        (a * 5).sum().backward()
        other_done.set()

    with record() as trace:
        (a * 2).sum().backward()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=30)
        (a * 3).sum().backward()
    assert other_done.is_set()
    tasks = [e["task"] for e in trace.events if e["kind"] == "backward_started"]
    assert tasks == [0, 1]
    (a * 4).sum().backward()  # outside the block: not recorded, and no observer is left
    assert [e["task"] for e in trace.events if e["kind"] == "backward_started"] == [0, 1]
    from gradviz_ext import engine

    assert engine.forward_observer() is None
    assert engine.set_default_observer(None) is None


def test_record_nests_and_restores_previous_observers():
    a = gradviz.tensor([1.0], requires_grad=True)
    with record() as outer:
        with record() as inner:
            (a * 2).sum().backward()
        (a * 3).sum().backward()
    assert sum(e["kind"] == "backward_started" for e in inner.events) == 1
    assert sum(e["kind"] == "backward_started" for e in outer.events) == 2


def test_record_with_several_roots_keeps_the_graph_root_in_the_trace(tmp_path):
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with record() as trace:
        gradviz.autograd.backward([(x * 2).sum(), (x * 3).sum()])
    trace.save(tmp_path / "t.json")
    assert load_trace(tmp_path / "t.json").events == trace.events
    assert "GraphRoot" in [n["name"] for n in trace.graph["nodes"]]


# ---- hostile and malformed files --------------------------------------------------------

def valid_dict():
    return recorded_trace().to_dict()


def write(tmp_path, text, name="trace.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def mutated(change):
    data = valid_dict()
    change(data)
    return json.dumps(data)


HOSTILE = {
    "not json": ("{not json", "not valid JSON"),
    "a list": ("[]", "must be a JSON object"),
    "NaN literal": (None, "may not contain the literal NaN"),
    "Infinity literal": (None, "may not contain the literal Infinity"),
    "duplicate key": ('{"format": "gradviz-trace", "format": "x"}', "appears twice"),
    "other format": (lambda d: d.update(format="pickle"), "not a gradviz trace"),
    "other version": (lambda d: d.update(schema_version=99), "schema_version 99"),
    "unknown kind": (lambda d: d["events"][0].update(kind="rm_rf"), "unknown event kind 'rm_rf'"),
    "wrong type": (lambda d: d["events"][1].update(seq="1"), "events[1].seq: expected an integer"),
    "bool as int": (lambda d: d["events"][1].update(task=True), "events[1].task"),
    "float as int": (lambda d: d["events"][1].update(seq=1.0), "events[1].seq"),
    "extra field": (lambda d: d["events"][2].update(__class__="os.system"), "unknown field '__class__'"),
    "missing field": (lambda d: d["events"][2].pop("text"), "missing the field 'text'"),
    "bad node id": (lambda d: d["events"][3].update(node=10 ** 6), "not in the trace"),
    "negative id": (lambda d: d["graph"]["nodes"][0].update(id=-1), "must be >= 0"),
    "duplicate node": (lambda d: d["graph"]["nodes"].append(dict(d["graph"]["nodes"][0])), "used twice"),
    "dangling edge": (lambda d: d["graph"]["edges"].append({"source": 10 ** 6, "target": 0, "input_nr": 0}),
                      "not a node of the graph"),
    "bad root": (lambda d: d["graph"]["roots"].append(10 ** 6), "graph.roots"),
    "seq out of order": (lambda d: d["events"][2].update(seq=7), "events[2].seq must be 2"),
    "huge integer": (lambda d: d["events"][1].update(seq=2 ** 80), "events[1].seq"),
    "negative time": (lambda d: d["events"][1].update(time=-1.0), "time must be >= 0"),
    "bad summary": (lambda d: d["events"][-2].update(grads_in=[{"shape": "[1]"}]), "grads_in[0]"),
    "unknown producer": (lambda d: next(e for e in d["events"] if e["kind"] == "buffer_added").update(
        producer=10 ** 6), "producer"),
    "empty event": (lambda d: d["events"].insert(0, {}), "events[0]"),
    "forward event with a task": (lambda d: next(e for e in d["events"] if e["kind"] == "backward_started").update(
        kind="node_created"), "events[0]"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_trace_files_raise_trace_format_error(tmp_path, case):
    content, phrase = HOSTILE[case]
    if content is None:
        literal = "NaN" if "NaN" in case else "Infinity"
        text = json.dumps(valid_dict()).replace('"time": ', f'"time": {literal}, "x": ', 1)
    elif callable(content):
        text = mutated(content)
    else:
        text = content
    path = write(tmp_path, text)
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert phrase in str(info.value), str(info.value)


def test_oversized_and_binary_files_are_refused_before_parsing(tmp_path):
    path = write(tmp_path, json.dumps(valid_dict()))
    with pytest.raises(TraceFormatError, match="more than the limit of 100"):
        load_trace(path, max_bytes=100)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceFormatError, match="not UTF-8"):
        load_trace(binary)
    with pytest.raises(TraceFormatError, match="cannot read"):
        load_trace(tmp_path / "missing.json")


def test_deeply_nested_json_is_refused_cleanly():
    with pytest.raises(TraceFormatError):
        load_trace_from_json("[" * 100000 + "]" * 100000)
    nested = {"format": "gradviz-trace", "schema_version": SCHEMA_VERSION, "gradviz_version": "x",
              "graph": {"nodes": [], "edges": [], "roots": []},
              "events": [{"kind": "error", "seq": 0, "task": 0, "node": None, "time": 0.0,
                          "text": "", "exception": "E", "message": "",
                          "traceback": [[[[[]]]]]}]}
    with pytest.raises(TraceFormatError, match="traceback"):
        Trace.from_dict(nested)


def test_loading_never_executes_or_imports_anything(tmp_path, monkeypatch):
    import builtins

    calls = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        calls.append(name)
        return real_import(name, *args, **kwargs)

    data = valid_dict()
    data["events"][0]["text"] = "__import__('os').system('echo pwned')"
    path = write(tmp_path, json.dumps(data))
    monkeypatch.setattr(builtins, "__import__", spy)
    trace = load_trace(path)
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert trace.events[0]["text"].startswith("__import__")
    assert "os" not in calls and "pickle" not in calls

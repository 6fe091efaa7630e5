"""``gradviz.load_trace`` on hostile input: paths that are not regular files, files full of tiny
JSON values (refused at bounded cost), and graphs that are not DAGs of distinct nodes."""

from __future__ import annotations

import json
import os
import socket
import threading
import tracemalloc

import pytest

import gradviz
from gradviz.errors import TraceFormatError
from gradviz.instrument import MAX_TRACE_CONTAINERS, MAX_TRACE_VALUES, SCHEMA_VERSION, Trace, load_trace, record

# The memory bound asked of refusing a hostile file (its time is not asserted: tests never
# time; a file is refused before parsing, which the tiny-value tests check directly).
REFUSE_PEAK_BYTES = 300 * 1024 * 1024
HOSTILE_BYTES = 60 * 1024 * 1024  # under the 64 MiB byte limit


def recorded_dict():
    x = gradviz.tensor([0.5, -1.0], requires_grad=True)
    with record() as trace:
        (x * x).sum().backward()
    return trace.to_dict()


# ---- 1. only regular files --------------------------------------------------------------

def load_with_deadline(path, seconds=20.0):
    """``load_trace(path)`` on a thread, so a hang fails the test instead of stalling it."""
    outcome = {}

    def run():
        try:
            outcome["value"] = load_trace(path)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return thread.is_alive(), outcome


def test_a_directory_is_refused_with_trace_format_error(tmp_path):
    hung, outcome = load_with_deadline(tmp_path)
    assert not hung
    assert isinstance(outcome.get("error"), TraceFormatError), outcome
    assert "a directory, not a regular file" in str(outcome["error"])


def test_a_named_pipe_is_refused_at_once_instead_of_waiting_for_a_writer(tmp_path):
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    hung, outcome = load_with_deadline(pipe)
    if hung:  # unblock the reader so the thread ends, then fail
        with open(pipe, "w"):
            pass
    assert not hung, "load_trace waited on a named pipe"
    assert isinstance(outcome.get("error"), TraceFormatError), outcome
    assert "a named pipe, not a regular file" in str(outcome["error"])


def test_devices_and_sockets_are_refused(tmp_path):
    hung, outcome = load_with_deadline(os.devnull)
    assert not hung and isinstance(outcome.get("error"), TraceFormatError), outcome
    assert "a character device" in str(outcome["error"])
    hung, outcome = load_with_deadline("/dev/zero")  # endless: must not be read at all
    assert not hung and isinstance(outcome.get("error"), TraceFormatError), outcome
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp_path / "trace.sock"))
        hung, outcome = load_with_deadline(tmp_path / "trace.sock")
    finally:
        server.close()
    assert not hung and isinstance(outcome.get("error"), TraceFormatError), outcome


def test_a_regular_file_still_loads(tmp_path):
    data = recorded_dict()
    (tmp_path / "t.json").write_text(json.dumps(data), encoding="utf-8")
    assert load_trace(tmp_path / "t.json").events == data["events"]


# ---- 2. bounded cost --------------------------------------------------------------------

HEAD = {"format": "gradviz-trace", "schema_version": SCHEMA_VERSION, "gradviz_version": "x",
        "graph": {"nodes": [], "edges": [], "roots": []}, "events": []}


def hostile_text(field: str, item: str, size: int = HOSTILE_BYTES) -> str:
    """A trace whose ``field`` array is ``item, item, ...`` filling about ``size`` bytes."""
    text = json.dumps(HEAD, separators=(",", ":"))
    body = ",".join([item] * (size // (len(item) + 1)))
    return text.replace(f'"{field}":[]', f'"{field}":[{body}]', 1)


def measured_refusal(path):
    """``(peak traced bytes, message)`` of refusing the file at ``path``."""
    with pytest.raises(TraceFormatError) as first:
        load_trace(path)
    tracemalloc.start()
    try:
        with pytest.raises(TraceFormatError):
            load_trace(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, str(first.value)


# The reproducers: 60 MB of tiny values where the schema wants nodes, edges, events.
TINY = [("roots", "[]"), ("events", "{}"), ("roots", "1"), ("edges", "7"), ("nodes", '{"a":1}'),
        ("events", "1.5")]


@pytest.mark.parametrize(("field", "item"), TINY, ids=[f"{f}-{i}" for f, i in TINY])
def test_files_full_of_tiny_values_are_refused_before_parsing(tmp_path, monkeypatch, field, item):
    path = tmp_path / "hostile.json"
    path.write_text(hostile_text(field, item), encoding="utf-8")
    assert path.stat().st_size < gradviz.instrument.MAX_TRACE_BYTES
    peak, message = measured_refusal(path)
    assert "more than the limit of" in message and "pass max_" in message, message
    assert peak < REFUSE_PEAK_BYTES, peak

    def parse_called(*args, **kwargs):
        raise AssertionError("a file over the value limits was parsed")

    monkeypatch.setattr(json, "loads", parse_called)
    with pytest.raises(TraceFormatError, match="JSON (values|arrays and objects)"):
        load_trace(path)


# Just under the count limits the file is parsed, then refused at its first item.
UNDER = [("roots", "1", MAX_TRACE_VALUES - 100, "graph.roots has"),
         ("events", "1.5", MAX_TRACE_VALUES - 100, "events[0]: expected"),
         ("edges", '{"source":1,"target":2,"input_nr":0}', MAX_TRACE_CONTAINERS - 100,
          "graph.edges[0].source is 1"),
         ("nodes", "[]", MAX_TRACE_CONTAINERS - 100, "graph.nodes[0]: expected an object")]


@pytest.mark.parametrize(("field", "item", "count", "phrase"), UNDER,
                         ids=[f"{u[0]}-{u[1][:6]}" for u in UNDER])
def test_files_just_under_the_limits_are_refused_at_their_first_bad_item(tmp_path, field, item,
                                                                         count, phrase):
    path = tmp_path / "hostile.json"
    path.write_text(hostile_text(field, item, count * (len(item) + 1)), encoding="utf-8")
    peak, message = measured_refusal(path)
    assert phrase in message, message
    assert peak < REFUSE_PEAK_BYTES, peak


def test_limits_can_be_raised_for_a_trusted_file(tmp_path):
    data = recorded_dict()
    text = json.dumps(data)
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError, match="more than the limit of 10; pass max_values="):
        load_trace(path, max_values=10)
    with pytest.raises(TraceFormatError, match="pass max_containers="):
        load_trace(path, max_containers=3)
    assert load_trace(path, max_values=10 ** 6, max_containers=10 ** 5).events == data["events"]
    with pytest.raises(TraceFormatError, match="pass max_values="):
        gradviz.instrument.load_trace_from_json(text, max_values=10)


def test_the_default_limits_admit_recorded_traces_near_the_byte_limit():
    """A recorded training loop, repeated until it filled 90% of the byte limit, would hold
    fewer values and containers than the default limits (the density docs/events.md cites)."""
    gradviz.manual_seed(0)
    model = gradviz.nn.Sequential(gradviz.nn.Linear(8, 16), gradviz.nn.Tanh(),
                                  gradviz.nn.Linear(16, 3))
    inputs, targets = gradviz.randn(4, 8), gradviz.tensor([0, 1, 2, 1])
    with record() as trace:
        for _ in range(3):
            gradviz.nn.functional.cross_entropy(model(inputs), targets).backward()
    raw = trace.to_json().encode()
    containers = raw.count(b"[") + raw.count(b"{")
    values = containers + raw.count(b",") + 1
    scale = 0.9 * gradviz.instrument.MAX_TRACE_BYTES / len(raw)
    assert values * scale < MAX_TRACE_VALUES
    assert containers * scale < MAX_TRACE_CONTAINERS


# ---- 3. the graph is a DAG of distinct nodes -------------------------------------------

def graph_trace(nodes, edges, roots):
    data = dict(HEAD)
    data["graph"] = {"nodes": [{"id": n, "name": f"N{n}", "kind": "builtin", "label": ""}
                               for n in nodes],
                     "edges": [{"source": s, "target": t, "input_nr": 0} for s, t in edges],
                     "roots": roots}
    return data


GRAPHS = {
    "two-node cycle": (([1, 2], [(1, 2), (2, 1)], [1]), "cycle through the nodes"),
    "longer cycle": (([1, 2, 3, 4], [(4, 1), (1, 2), (2, 3), (3, 1)], [4]),
                     "cycle through the nodes 1 -> 2 -> 3 -> 1"),
    "self-loop": (([5, 6], [(5, 6), (6, 6)], [5]), "graph.edges[1] joins node 6 to itself"),
    "edge to an unknown node": (([1], [(1, 9)], [1]), "graph.edges[0].target is 9, which is not a node"),
    "edge from an unknown node": (([1], [(8, 1)], [1]), "graph.edges[0].source is 8"),
    "duplicate id": (([3, 4, 3], [], [3]), "graph.nodes[2].id 3 is used twice (also by graph.nodes[0])"),
    "root not a node": (([1, 2], [(1, 2)], [7]), "graph.roots[0] is 7, which is not a node"),
    "repeated root": (([1, 2], [(1, 2)], [1, 1]), "graph.roots[1] repeats the root 1"),
}


@pytest.mark.parametrize("case", sorted(GRAPHS))
def test_graphs_that_are_not_dags_of_distinct_nodes_are_refused(case):
    (nodes, edges, roots), phrase = GRAPHS[case]
    with pytest.raises(TraceFormatError) as info:
        Trace.from_dict(graph_trace(nodes, edges, roots))
    assert phrase in str(info.value), str(info.value)


def test_the_cycle_message_names_exactly_the_ids_around_it():
    with pytest.raises(TraceFormatError) as info:
        Trace.from_dict(graph_trace([1, 2, 3], [(1, 2), (2, 3), (3, 2)], [1]))
    message = str(info.value)
    assert "2 -> 3 -> 2" in message or "3 -> 2 -> 3" in message, message
    assert "1 ->" not in message


def test_a_diamond_and_a_shared_input_are_valid_graphs():
    # x * x: two edges between the same pair; a diamond joins again below
    Trace.from_dict(graph_trace([1, 2, 3, 4], [(1, 2), (1, 2), (1, 3), (2, 4), (3, 4)], [1]))
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with record() as trace:
        y = x * x
        (y * 2 + y.exp()).sum().backward()
    assert Trace.from_dict(trace.to_dict()).events == trace.events

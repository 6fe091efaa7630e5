"""``Trace``: a recorded backward pass (the graph and every event), its JSON file format, and
``gradviz.record()``.

The file is one JSON object, described by ``docs/schema/trace.schema.json`` (generated from
``_schema.py``) and ``docs/events.md``::

    {"format": "gradviz-trace", "schema_version": 3, "gradviz_version": "0.1.0",
     "graph": {"nodes": [...], "edges": [...], "roots": [...]},
     "events": [{"kind": "backward_started", "seq": 0, ...}, ...]}

Note [Loading untrusted traces]
-------------------------------
A trace may come from anyone. Loading reads at most ``max_bytes``, parses plain JSON only
(``NaN``/``Infinity`` literals and duplicate keys are refused; nothing is ever evaluated or
imported), checks the data against the schema field by field, then checks what a schema cannot
say: ``seq`` counts 0, 1, 2, ...; node ids are unique and every id an event, edge or root uses
is a node of the graph (or was introduced by a ``node_created`` event). Anything else raises
:class:`gradviz.errors.TraceFormatError` naming the offending place.
"""

from __future__ import annotations

import json
import os
import threading

from ..errors import TraceFormatError
from ._nodes import frame_leaf_names, user_frame, walk_graph
from ._observers import observe
from ._recorder import Recorder
from ._schema import SCHEMA_VERSION, TRACE_FORMAT, json_schema
from ._validate import SchemaError, validate

__all__ = ["Trace", "record", "load_trace", "MAX_TRACE_BYTES"]

#: The largest trace file :func:`load_trace` reads unless told otherwise.
MAX_TRACE_BYTES = 64 * 1024 * 1024

_schema_cache: list = []


def _schema() -> dict:
    if not _schema_cache:
        _schema_cache.append(json_schema())
    return _schema_cache[0]


class Trace:
    """A recorded backward pass: ``graph`` (nodes, edges, roots) and ``events``.

    Make one with :func:`gradviz.record`, read one with :func:`gradviz.load_trace`, replay one
    with :class:`gradviz.debug.ReplaySession`.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.record() as trace:
    ...     (x * x).sum().backward()
    >>> [e["kind"] for e in trace.events][:3]
    ['node_created', 'node_created', 'backward_started']
    >>> [n["name"] for n in trace.graph["nodes"]]
    ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    """

    def __init__(self, graph: dict | None = None, events: list | None = None,
                 gradviz_version: str | None = None):
        from .. import __version__

        self.graph = graph if graph is not None else {"nodes": [], "edges": [], "roots": []}
        self.events: list[dict] = events if events is not None else []
        self.gradviz_version = gradviz_version or __version__

    def to_dict(self) -> dict:
        """The JSON object of the file format."""
        return {"format": TRACE_FORMAT, "schema_version": SCHEMA_VERSION,
                "gradviz_version": self.gradviz_version, "graph": self.graph,
                "events": self.events}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, separators=(",", ":"))

    def save(self, path) -> None:
        """Write the trace as JSON (``docs/events.md`` describes the format)."""
        text = self.to_json()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def to_html(self, path, title: str | None = None):
        """Write one self-contained HTML file that replays this trace offline (no kernel, no
        server, no network requests); returns its path. See :func:`gradviz.widget.trace_to_html`.

        The widget layer owns the front end, so this imports it when called (the instrument
        layer never imports it at import time; docs/design.md, "Layers").

        Raises
        ------
        gradviz.widget._bundle.BundleError
            If the front-end bundle is missing or stale: run ``npm --prefix labextension run build``.
        """
        from ..widget._html import trace_to_html

        return trace_to_html(self, path, title=title)

    @classmethod
    def from_dict(cls, data) -> "Trace":
        """Check ``data`` strictly (schema and consistency) and build a trace from it."""
        check_trace(data)
        return cls(data["graph"], data["events"], data["gradviz_version"])

    @classmethod
    def load(cls, path, max_bytes: int = MAX_TRACE_BYTES) -> "Trace":
        return load_trace(path, max_bytes=max_bytes)

    def __repr__(self) -> str:
        tasks = {e["task"] for e in self.events if e["task"] is not None}
        return (f"<Trace: {len(self.graph['nodes'])} nodes, {len(self.events)} events, "
                f"{len(tasks)} backward pass{'es' if len(tasks) != 1 else ''}>")


# ---- recording -------------------------------------------------------------------------

class _TraceRecorder(Recorder):
    """A recorder that also collects the graph of every backward pass it sees."""

    def __init__(self, trace: Trace):
        super().__init__()
        self.events = trace.events
        self._trace = trace
        self._known: set[int] = set()
        self._sources: set[int] = set()

    def _graph_learned(self, task, walked):
        nodes, _, _, live = walked
        unnamed = {id(node.variable): node.variable for node_id, node in live.items()
                   if nodes[node_id]["kind"] == "accumulate_grad"
                   and node_id not in self.leaf_names}
        if unnamed:
            # the leaves' names in the code that called backward (``w`` in ``loss.backward()``
            # next to ``w = ...``): Note [Node numbers and labels]
            frame = user_frame()
            try:
                found = frame_leaf_names(frame, unnamed)
            finally:
                del frame
            for node_id, node in live.items():
                name = found.get(id(getattr(node, "variable", None)))
                if name is not None and nodes[node_id]["kind"] == "accumulate_grad":
                    self.name_leaf(node_id, name)
                    nodes[node_id]["leaf_name"] = name
        add_to_graph(self._trace.graph, task.graph_root, self._known, self._sources, walked)


def add_to_graph(graph: dict, root, known: set, sources: set, walked=None) -> None:
    """Add the graph below ``root`` to ``graph`` (nodes and sources already there are kept);
    ``walked``: :func:`walk_graph`'s result for ``root`` (GraphRoot included), if at hand."""
    if walked is None:
        walked = walk_graph(root, include_graph_root=True)
    nodes, edges, roots, _ = walked
    for node_id, info in nodes.items():
        if node_id not in known:
            known.add(node_id)
            graph["nodes"].append(info)
    new_sources = set()
    for edge in edges:
        # every edge of a node, in order (x * x joins the same pair twice), once per node
        if edge["source"] not in sources:
            new_sources.add(edge["source"])
            graph["edges"].append(edge)
    sources |= new_sources
    for root in roots:
        if root not in graph["roots"]:
            graph["roots"].append(root)


class record:
    """Record every backward pass inside the ``with`` block (on this thread) into a Trace.

    The graphs are recorded too, with each node's ``node_created`` event (forward source line,
    saved tensors...) for the nodes built inside the block.

    Parameters
    ----------
    all_threads : bool
        Record backward passes of every thread, not only of the one that entered the block.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.tensor([0.5, -1.0], requires_grad=True)
    >>> with torch.record() as trace:
    ...     loss = (w * w).sum()
    ...     loss.backward()
    >>> trace.events[-1]["text"]
    'Backward finished: 3 nodes ran.'
    >>> restored = torch.instrument.Trace.from_dict(trace.to_dict())
    >>> restored.events == trace.events
    True
    """

    def __init__(self, *, all_threads: bool = False):
        self.trace = Trace()
        self._all_threads = all_threads
        self._handle = None

    def __enter__(self) -> Trace:
        if self._handle is not None:
            raise RuntimeError("this gradviz.record() block is already active")
        recorder = _TraceRecorder(self.trace)
        thread = None if self._all_threads else threading.get_ident()
        self._handle = observe(recorder, thread=thread)
        return self.trace

    def __exit__(self, *exc):
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()
        return False


# ---- loading ---------------------------------------------------------------------------

def _refuse_constant(name):
    raise TraceFormatError(f"trace files may not contain the literal {name}; non-finite "
                           "numbers are written as the strings \"nan\", \"inf\", \"-inf\"")


def _no_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise TraceFormatError(f"the key {key!r} appears twice in one JSON object")
        result[key] = value
    return result


def load_trace(path, max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """Read a trace file written by :meth:`Trace.save`, checking it strictly.

    Nothing in the file is executed (Note [Loading untrusted traces]).

    Raises
    ------
    gradviz.errors.TraceFormatError
        If the file is too large, not JSON, of another format or schema version, or does not
        match the schema; the message names the offending field.

    Examples
    --------
    >>> import gradviz as torch, os, tempfile
    >>> x = torch.tensor([3.0], requires_grad=True)
    >>> with torch.record() as trace:
    ...     (x * 2).sum().backward()
    >>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
    >>> trace.save(path)
    >>> torch.load_trace(path).events == trace.events
    True
    """
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise TraceFormatError(f"cannot read the trace file {path!s}: {exc}") from exc
    if size > max_bytes:
        raise TraceFormatError(
            f"the trace file {path!s} is {size} bytes, more than the limit of {max_bytes}; "
            "pass max_bytes= to load_trace to read a larger file you trust")
    with open(path, "rb") as handle:
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise TraceFormatError(f"the trace file {path!s} is larger than {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"the trace file {path!s} is not UTF-8 text: {exc}") from exc
    return load_trace_from_json(text)


def load_trace_from_json(text: str) -> Trace:
    """Parse and check the JSON text of a trace (see :func:`load_trace`)."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant,
                          object_pairs_hook=_no_duplicates)
    except TraceFormatError:
        raise
    except RecursionError:
        raise TraceFormatError("the trace is nested too deeply to be a gradviz trace") from None
    except ValueError as exc:
        raise TraceFormatError(f"the trace is not valid JSON: {exc}") from None
    return load_trace_from_dict(data)


def load_trace_from_dict(data) -> Trace:
    """Check already-parsed trace data (see :func:`load_trace`) and return the Trace."""
    return Trace.from_dict(data)


def check_trace(data) -> None:
    """Raise TraceFormatError unless ``data`` is a valid trace (schema and consistency)."""
    if not isinstance(data, dict):
        raise TraceFormatError(f"a trace must be a JSON object, got {type(data).__name__}")
    if data.get("format") != TRACE_FORMAT:
        raise TraceFormatError(
            f"not a gradviz trace: expected \"format\": \"{TRACE_FORMAT}\", got "
            f"{data.get('format')!r}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise TraceFormatError(
            f"this gradviz reads trace schema version {SCHEMA_VERSION}, but the file has "
            f"schema_version {version!r}; record it again with this version of gradviz")
    try:
        validate(_schema(), data)
    except SchemaError as exc:
        raise TraceFormatError(f"the trace does not match the schema: {exc}") from None
    except RecursionError:
        raise TraceFormatError("the trace is nested too deeply to be a gradviz trace") from None
    _check_consistency(data)


def _check_consistency(data) -> None:
    graph = data["graph"]
    ids: set[int] = set()
    for index, node in enumerate(graph["nodes"]):
        if node["id"] < 0:
            raise TraceFormatError(f"graph.nodes[{index}].id must be >= 0, got {node['id']}")
        if node["id"] in ids:
            raise TraceFormatError(f"graph.nodes[{index}].id {node['id']} is used twice")
        ids.add(node["id"])
    for index, edge in enumerate(graph["edges"]):
        for key in ("source", "target"):
            if edge[key] not in ids:
                raise TraceFormatError(
                    f"graph.edges[{index}].{key} is {edge[key]}, which is not a node of the graph")
        if edge["input_nr"] < 0:
            raise TraceFormatError(f"graph.edges[{index}].input_nr must be >= 0")
    for index, root in enumerate(graph["roots"]):
        if root not in ids:
            raise TraceFormatError(f"graph.roots[{index}] is {root}, which is not a node of the graph")
    known = set(ids)
    for index, event in enumerate(data["events"]):
        where = f"events[{index}]"
        if event["seq"] != index:
            raise TraceFormatError(f"{where}.seq must be {index} (events are numbered in order), "
                                   f"got {event['seq']}")
        if event["time"] < 0:
            raise TraceFormatError(f"{where}.time must be >= 0, got {event['time']}")
        kind = event["kind"]
        node = event["node"]
        if kind == "node_created":
            if node is None or node < 0:
                raise TraceFormatError(f"{where}.node must be a node id")
            known.add(node)
        elif kind not in ("backward_started", "backward_finished", "error") or node is not None:
            if node is None or node not in known:
                raise TraceFormatError(
                    f"{where} ({kind}) refers to node {node!r}, which is not in the trace")
        task = event["task"]
        if kind in ("node_created", "saved_packed"):
            if task is not None:
                raise TraceFormatError(f"{where} ({kind}) happens in forward: task must be null")
        elif task is None or task < 0:
            raise TraceFormatError(f"{where}.task must be a backward pass number >= 0, got {task!r}")
        producer = event.get("producer")
        if producer is not None and producer not in known:
            raise TraceFormatError(f"{where}.producer {producer} is not a node of the trace")

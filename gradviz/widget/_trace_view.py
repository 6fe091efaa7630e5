"""A saved trace view: the ``.gvtrace.json`` file and the ``application/vnd.gradviz.trace+json``
output that gradviz's JupyterLab extension shows without a kernel (``Trace.save_view``,
``Trace.view``).

The document is one JSON object::

    {"format": "gradviz-trace-view", "version": 1, "gradviz_version": "0.1.0",
     "trace": {"format": "gradviz-trace", ...},       # Trace.to_dict()
     "view": {"format": "gradviz-standalone", ...}}   # standalone_data(), as in the HTML page

Note [One replay, computed in Python]
-------------------------------------
What the viewer shows at each position of a replay (node states, the current node, the
inspector's snapshots, the narration) is what :class:`~gradviz.debug.ReplaySession` says, so it
is computed here, by the same ``standalone_data`` as the self-contained HTML page, and stored in
``view``. The front end (``labextension/src/trace_view.ts``) only checks and indexes into it; it
never replays the raw events itself, which would be a second implementation of the replay
rules to keep in step. The raw trace rides along in ``trace`` so that Python can read the file
back (``gradviz.load_trace`` accepts a ``.gvtrace.json`` and returns the trace, for a notebook
replay with gradient values), and so that the view can always be computed again from it.
``version`` changes whenever the document or the view data changes shape; both readers refuse
another version with a message that says which gradviz wrote the file.

Loading is as strict as :func:`~gradviz.load_trace` (Note [Loading untrusted traces]): at most
``max_bytes`` read from a regular file, JSON values counted before parsing, the trace checked
against its schema, and the view checked field by field here (mirroring ``parseStandalone`` in
``labextension/src/replay.ts``), including that every node id it names is a node of its graph.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NoReturn, TypeGuard

from ..errors import TraceFormatError
from ..instrument._trace import (
    MAX_TRACE_BYTES,
    MAX_TRACE_CONTAINERS,
    MAX_TRACE_VALUES,
    TRACE_VIEW_FORMAT,
    Trace,
    parse_trace_json,
    read_trace_file,
)
from ._html import INSPECTION_BUDGET, STANDALONE_FORMAT, STANDALONE_VERSION, STATE_NAMES, standalone_data

__all__ = ["TraceView", "trace_view", "save_trace_view", "load_trace_view", "check_trace_view",
           "TRACE_VIEW_MIME", "TRACE_VIEW_FORMAT", "TRACE_VIEW_VERSION", "TRACE_VIEW_SUFFIX"]

#: The mime type of a trace view output (labextension/src/trace_view.ts, TRACE_VIEW_MIME).
TRACE_VIEW_MIME = "application/vnd.gradviz.trace+json"
#: The document's version (labextension/src/trace_view.ts, TRACE_VIEW_VERSION).
TRACE_VIEW_VERSION = 1
#: The file name ending JupyterLab opens with gradviz's viewer.
TRACE_VIEW_SUFFIX = ".gvtrace.json"

_SESSION_STATUSES = ("paused", "running", "finished", "aborted", "error")


class TraceView:
    """A trace with its precomputed replay view; displays as the viewer in JupyterLab.

    Make one with :meth:`gradviz.instrument.Trace.view` (or read one with
    :func:`load_trace_view`); :meth:`save` writes the ``.gvtrace.json`` file. In JupyterLab or
    Notebook 7 with gradviz installed, displaying it (the last expression of a cell) shows the
    same view as ``Trace.to_html``'s page: Step, Step event, Continue, Run to, Step back,
    Restart and a scrubber, with no kernel round trip. Elsewhere it displays as plain text.

    Attributes
    ----------
    trace : gradviz.instrument.Trace
        The recorded pass.
    document : dict
        The JSON object of the file format (module docstring).
    """

    def __init__(self, trace: Trace, document: dict[str, Any]):
        self.trace = trace
        self.document = document

    @property
    def title(self) -> str:
        return self.document["view"]["title"]

    def to_json(self) -> str:
        """The file's text: compact JSON, no NaN or Infinity literals."""
        return json.dumps(self.document, allow_nan=False, ensure_ascii=False, separators=(",", ":"))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the view to ``path``, which must end in ``.gvtrace.json``; returns the path.

        Raises
        ------
        ValueError
            If ``path`` does not end in ``.gvtrace.json`` (JupyterLab would open it as plain
            JSON instead of with gradviz's viewer).
        """
        target = _view_path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        """The output: the document under its mime type, and a text line for other front ends."""
        return {TRACE_VIEW_MIME: self.document, "text/plain": repr(self)}

    def __repr__(self) -> str:
        view = self.document["view"]
        return (f"<TraceView {view['title']!r}: {len(view['graph'].get('nodes', []))} nodes, "
                f"{len(view['events'])} events; shown by gradviz's JupyterLab extension>")


def _view_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    if not target.name.lower().endswith(TRACE_VIEW_SUFFIX):
        stem = target.name.split(".")[0] or "run"
        raise ValueError(
            f"a trace view file must end in {TRACE_VIEW_SUFFIX!r} so that JupyterLab opens it with "
            f"gradviz's viewer, got {target.name!r}; save it as {stem}{TRACE_VIEW_SUFFIX} "
            "(Trace.save writes a raw trace file under any name)")
    return target


def trace_view(trace: Trace, title: str | None = None, inspection_budget: int = INSPECTION_BUDGET) -> TraceView:
    """The view of ``trace`` (see :meth:`gradviz.instrument.Trace.view`)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"trace_view() expects a gradviz.instrument.Trace (from gradviz.record() or "
                        f"gradviz.load_trace()), got {type(trace).__name__}")
    document = {
        "format": TRACE_VIEW_FORMAT,
        "version": TRACE_VIEW_VERSION,
        "gradviz_version": str(trace.gradviz_version),
        "trace": trace.to_dict(),
        "view": standalone_data(trace, title, inspection_budget),
    }
    return TraceView(trace, document)


def save_trace_view(trace: Trace, path: str | os.PathLike[str], title: str | None = None,
                    inspection_budget: int = INSPECTION_BUDGET) -> Path:
    """Write ``trace``'s view to ``path`` (``.gvtrace.json``); see :meth:`gradviz.instrument.Trace.save_view`."""
    _view_path(path)  # a bad name fails before any work
    return trace_view(trace, title, inspection_budget).save(path)


def load_trace_view(path: str | os.PathLike[str], max_bytes: int = MAX_TRACE_BYTES, *,
                    max_values: int = MAX_TRACE_VALUES, max_containers: int = MAX_TRACE_CONTAINERS) -> TraceView:
    """Read a ``.gvtrace.json`` file written by :meth:`TraceView.save`, checking it strictly.

    Nothing in the file is executed; the limits are :func:`gradviz.load_trace`'s.

    Raises
    ------
    gradviz.errors.TraceFormatError
        If the path is not a regular file, is too large or holds too many values, is not JSON,
        is not a trace view of this version, or its trace or view is malformed; the message
        names the offending field.
    """
    data = parse_trace_json(read_trace_file(path, max_bytes), max_values, max_containers, path)
    return check_trace_view(data)


def check_trace_view(data: Any) -> TraceView:
    """Check a parsed trace view document and return it as a :class:`TraceView`."""
    if not isinstance(data, dict):
        raise TraceFormatError(f"a gradviz trace view must be a JSON object, got {type(data).__name__}")
    if data.get("format") != TRACE_VIEW_FORMAT:
        hint = ("this is a raw trace (Trace.save): read it with gradviz.load_trace"
                if data.get("format") == "gradviz-trace" else "write one with trace.save_view(path)")
        raise TraceFormatError(f"a gradviz trace view must have format {TRACE_VIEW_FORMAT!r}, "
                               f"got {data.get('format')!r}; {hint}")
    if data.get("version") != TRACE_VIEW_VERSION:
        raise TraceFormatError(
            f"this trace view has version {data.get('version')!r} (written by gradviz "
            f"{data.get('gradviz_version')!r}), but this gradviz reads version {TRACE_VIEW_VERSION}; "
            "save it again from the trace, or use the gradviz that wrote it")
    extra = set(data) - {"format", "version", "gradviz_version", "trace", "view"}
    if extra:
        raise TraceFormatError(f"a gradviz trace view has no field {sorted(extra)[0]!r}")
    if not isinstance(data.get("gradviz_version"), str):
        raise TraceFormatError("a gradviz trace view's gradviz_version must be a string")
    try:
        trace = Trace.from_dict(data.get("trace"))
    except TraceFormatError as exc:
        raise TraceFormatError(f"the trace view's trace is malformed: {exc}") from None
    check_view_data(data.get("view"))
    return TraceView(trace, data)


def _fail(what: str) -> NoReturn:
    raise TraceFormatError(f"the trace view's view is malformed: {what}; save it again with trace.save_view(path)")


def _is_id(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def check_view_data(view: Any) -> None:
    """Check the view data (``standalone_data``'s object) as ``parseStandalone`` does, and that
    every node id it names is a node of its graph."""
    if not isinstance(view, dict):
        _fail(f"expected an object, got {type(view).__name__}")
    if view.get("format") != STANDALONE_FORMAT or view.get("version") != STANDALONE_VERSION:
        _fail(f"format and version must be {STANDALONE_FORMAT!r} and {STANDALONE_VERSION}, "
              f"got {view.get('format')!r} and {view.get('version')!r}")
    if not isinstance(view.get("title"), str) or not isinstance(view.get("gradviz_version"), str):
        _fail("title and gradviz_version must be strings")
    graph = view.get("graph")
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and _is_id(n.get("id")) for n in nodes):
        _fail("graph.nodes must be a list of nodes with integer ids")
    ids = {node["id"] for node in nodes}
    names = view.get("state_names")
    if not isinstance(names, list) or not all(name in STATE_NAMES for name in names):
        _fail(f"state_names must list node states ({', '.join(STATE_NAMES)})")
    if view.get("final_status") not in _SESSION_STATUSES:
        _fail(f"final_status must be one of {', '.join(_SESSION_STATUSES)}, got {view.get('final_status')!r}")
    events = view.get("events")
    if not isinstance(events, list):
        _fail("events must be a list")
    for index, event in enumerate(events):
        if (not isinstance(event, list) or len(event) not in (3, 4) or not isinstance(event[0], str)
                or not (event[1] is None or event[1] in ids) or not isinstance(event[2], str)
                or (len(event) == 4 and event[3] not in ids)):
            _fail(f"events[{index}] must be [kind, node id or null, text, producer id?] with ids of graph nodes")
    n = len(events)
    start = view.get("start")
    if not _is_id(start) or start > n:
        _fail(f"start must be a position from 0 to {n}, got {start!r}")
    changes, current = view.get("changes"), view.get("current")
    if not isinstance(changes, list) or len(changes) != n + 1:
        _fail(f"changes must have one entry per position ({n + 1})")
    if not isinstance(current, list) or len(current) != n + 1:
        _fail(f"current must have one entry per position ({n + 1})")
    for position, flat in enumerate(changes):
        if (not isinstance(flat, list) or len(flat) % 2 or not all(node in ids for node in flat[::2])
                or not all(type(code) is int and 0 <= code < len(names) for code in flat[1::2])):
            _fail(f"changes[{position}] must be [node id, state code, ...] with ids of graph nodes")
    for position, node in enumerate(current):
        if node is not None and node not in ids:
            _fail(f"current[{position}] must be a node id of the graph or null, got {node!r}")
    _check_inspections(view, ids, n)


def _check_inspections(view: dict, ids: set[int], n: int) -> None:
    inspections = view.get("inspections")
    if inspections is None and "inspections" not in view:
        return
    if not isinstance(inspections, dict):
        _fail("inspections must be an object")
    for key, snapshots in inspections.items():
        if not key.isdigit() or int(key) not in ids or not isinstance(snapshots, list):
            _fail(f"inspections[{key!r}] must list [position, info] pairs of a graph node")
        for index, pair in enumerate(snapshots):
            if (not isinstance(pair, list) or len(pair) != 2 or not _is_id(pair[0]) or pair[0] > n
                    or not isinstance(pair[1], dict)):
                _fail(f"inspections[{key!r}][{index}] must be [position, info]")

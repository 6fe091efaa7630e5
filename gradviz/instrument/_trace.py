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
is a node of the graph (or was introduced by a ``node_created`` event); the graph has no
cycles (Note [A trace's graph is a DAG]). Only a regular file is opened (never a pipe, device
or directory), and the counts of JSON values are limited before parsing (Note [Bounded cost
of refusing a trace], in ``_trace_check.py``). Anything else raises
:class:`gradviz.errors.TraceFormatError` naming the offending place.
"""

from __future__ import annotations

import json
import os
import stat
import threading

from gradviz_ext import engine as _engine

from .._version import __version__
from ..errors import TraceFormatError
from ._nodes import frame_leaf_names, user_frame, walk_graph
from ._observers import ObserverHandle, observe
from ._recorder import Recorder
from ._schema import SCHEMA_VERSION, TRACE_FORMAT
from ._trace_check import MAX_TRACE_CONTAINERS, MAX_TRACE_VALUES, check_structure, check_trace

__all__ = ["Trace", "record", "load_trace", "MAX_TRACE_BYTES", "MAX_TRACE_VALUES",
           "MAX_TRACE_CONTAINERS", "TRACE_VIEW_FORMAT"]

#: The largest trace file :func:`load_trace` reads unless told otherwise.
MAX_TRACE_BYTES = 64 * 1024 * 1024
#: The format of a saved trace view (``.gvtrace.json``: the trace and its replay view;
#: ``gradviz/widget/_trace_view.py``). :func:`load_trace` reads the trace inside one.
TRACE_VIEW_FORMAT = "gradviz-trace-view"

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
        self._graph = graph if graph is not None else {"nodes": [], "edges": [], "roots": []}
        self._events: list[dict] = events if events is not None else []
        self.gradviz_version = gradviz_version or __version__
        # a gradient doctor's report of the recorded graph (DoctorReport.to_dict(), node ids
        # of this graph), or None; kept in memory and on the HTML page, not in the file
        self.doctor: dict | None = None
        # the recorder of a gradviz.record() block, while it may hold events not built yet
        # (Note [Events when read] in _recorder.py): reading the trace builds them
        self._recorder: _TraceRecorder | None = None
        self._recording = False

    @property
    def graph(self) -> dict:
        """The recorded graph: ``{"nodes": [...], "edges": [...], "roots": [...]}``."""
        if self._recorder is not None:
            self._build()
        return self._graph

    @graph.setter
    def graph(self, graph: dict) -> None:
        if self._recorder is not None:
            self._build()
        self._graph = graph

    @property
    def events(self) -> list[dict]:
        """Every recorded event, in order (``docs/events.md``)."""
        if self._recorder is not None:
            self._build()
        return self._events

    @events.setter
    def events(self, events: list[dict]) -> None:
        if self._recorder is not None:
            self._build()
        self._events = events

    def __getstate__(self) -> dict:
        # a copy or a pickle holds what was recorded so far, built, not the recorder
        if self._recorder is not None:
            self._build()
        return dict(self.__dict__, _recorder=None, _recording=False)

    def _build(self) -> None:
        recorder = self._recorder
        assert recorder is not None
        recorder.build_events()
        if not self._recording:  # the block is over and every event is built
            self._recorder = None

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

    def view(self, title: str | None = None, inspection_budget: int | None = None):
        """This trace with its replay view, precomputed (a :class:`gradviz.widget.TraceView`).

        Displayed in JupyterLab or Notebook 7 with gradviz installed, it shows the same view as
        :meth:`to_html`'s page, replayed in the browser with no kernel round trip; its ``save``
        writes a ``.gvtrace.json`` file. ``inspection_budget``: bytes the inspector's snapshots
        may take (default 8 MiB, as the HTML page; they are stored in the notebook).
        The widget layer is imported when called, as in :meth:`to_html`.
        """
        from ..widget._trace_view import INSPECTION_BUDGET, trace_view

        budget = INSPECTION_BUDGET if inspection_budget is None else inspection_budget
        return trace_view(self, title=title, inspection_budget=budget)

    def save_view(self, path, title: str | None = None, inspection_budget: int | None = None):
        """Write this trace and its replay view to ``path`` (a name ending in ``.gvtrace.json``)
        and return the path. JupyterLab and Notebook 7 with gradviz installed open the file
        with gradviz's viewer (double-click it in the file browser), without a kernel;
        :func:`load_trace` reads the trace back from it. See :meth:`view`.

        Raises
        ------
        ValueError
            If ``path`` does not end in ``.gvtrace.json``.

        Examples
        --------
        >>> import gradviz as torch, os, tempfile
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> with torch.record() as trace:
        ...     (x * x).sum().backward()
        >>> path = trace.save_view(os.path.join(tempfile.mkdtemp(), "run.gvtrace.json"))
        >>> torch.load_trace(path).events == trace.events
        True
        """
        from ..widget._trace_view import INSPECTION_BUDGET, save_trace_view

        budget = INSPECTION_BUDGET if inspection_budget is None else inspection_budget
        return save_trace_view(self, path, title=title, inspection_budget=budget)

    def to_html(self, path, title: str | None = None, doctor=None, *,
                inspection_budget: int | None = None):
        """Write one self-contained HTML file that replays this trace offline (no kernel, no
        server, no network requests); returns its path. See :func:`gradviz.widget.trace_to_html`
        (``doctor``: a gradient doctor's report of the recorded graph for the page's Check
        gradients; default ``self.doctor``; ``inspection_budget``: the most bytes the
        inspector's snapshots may take, default 8 MiB, as there).

        The widget layer owns the front end, so this imports it when called (the instrument
        layer never imports it at import time; docs/design.md, "Layers").

        Raises
        ------
        gradviz.widget._bundle.BundleError
            If the front-end bundle is missing or stale: run ``npm --prefix labextension run build``.
        """
        from ..widget._html import INSPECTION_BUDGET, trace_to_html

        budget = INSPECTION_BUDGET if inspection_budget is None else inspection_budget
        return trace_to_html(self, path, title=title, inspection_budget=budget, doctor=doctor)

    @classmethod
    def from_dict(cls, data) -> Trace:
        """Check ``data`` strictly (schema and consistency) and build a trace from it."""
        check_trace(data)
        return cls(data["graph"], data["events"], data["gradviz_version"])

    @classmethod
    def load(cls, path, max_bytes: int = MAX_TRACE_BYTES, **limits) -> Trace:
        """:func:`load_trace` (``limits``: its ``max_values`` and ``max_containers``)."""
        return load_trace(path, max_bytes=max_bytes, **limits)

    def __repr__(self) -> str:
        tasks = {e["task"] for e in self.events if e["task"] is not None}
        return (f"<Trace: {len(self.graph['nodes'])} nodes, {len(self.events)} events, "
                f"{len(tasks)} backward pass{'es' if len(tasks) != 1 else ''}>")


# ---- recording -------------------------------------------------------------------------

class _TraceRecorder(Recorder):
    """A recorder that also collects the graph of every backward pass it sees."""

    # Note [Events when read]: the events of a pass are built when the trace is read, or at
    # the latest when the next pass starts or the next op is recorded; a pass whose gradients
    # would hold more than this goes on eagerly
    lazy_summaries = True
    deferred_bytes_limit = 1 << 26

    def __init__(self, trace: Trace, defer: bool = True):
        super().__init__()
        self.defer_events = defer
        # the trace's own list and dict (the recorder holds no reference to the trace)
        self.events = trace._events
        self._graph = trace._graph
        self._known: set[int] = set()
        self._frame_names: dict[int, str] = {}  # id(leaf) -> name, for the pass described next
        self._sources: set[int] = set()

    def _graph_traversed(self, traversal):
        # The leaves' names in the code that called backward (``w`` in ``loss.backward()``
        # next to ``w = ...``: Note [Node numbers and labels]), read now, while that code runs;
        # applied when the graph is described (Note [Events when read]), before the next
        # pass's (backward_started builds the events of an earlier pass first)
        live = traversal[0]
        unnamed = {id(node.variable): node.variable for node_id, node in live.items()
                   if isinstance(node, _engine.AccumulateGrad) and node_id not in self.leaf_names}
        found = {}
        if unnamed:
            frame = user_frame()
            try:
                found = frame_leaf_names(frame, unnamed)
            finally:
                del frame
        self._frame_names = found

    def _graph_learned(self, root, walked):
        nodes, _, _, live = walked
        found, self._frame_names = self._frame_names, {}
        if found:
            for node_id, node in live.items():
                name = found.get(id(getattr(node, "variable", None)))
                if (name is not None and nodes[node_id]["kind"] == "accumulate_grad"
                        and node_id not in self.leaf_names):
                    self.name_leaf(node_id, name)
                    nodes[node_id]["leaf_name"] = name
        add_to_graph(self._graph, root, self._known, self._sources, walked)


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
        self._handle: ObserverHandle | None = None

    def __enter__(self) -> Trace:
        if self._handle is not None:
            raise RuntimeError("this gradviz.record() block is already active")
        trace = self.trace
        # one thread's passes follow one another; several threads' may interleave
        recorder = _TraceRecorder(trace, defer=not self._all_threads)
        thread = None if self._all_threads else threading.get_ident()
        self._handle = observe(recorder, thread=thread)
        trace._recorder, trace._recording = recorder, True
        return trace

    def __exit__(self, *exc):
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()
            trace = self.trace
            trace._recording = False
            if trace._recorder is not None and not trace._recorder._deferred:
                trace._recorder = None
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


def _read_regular_file(path, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes`` bytes.

    The file is opened without blocking and checked with ``fstat`` on the open descriptor
    (no race with a file swapped after a ``stat``): a directory, a named pipe (whose ``open``
    would wait for a writer forever), a device or a socket is refused at once.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                             | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise TraceFormatError(f"cannot read the trace file {path!s}: {exc}") from exc
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise TraceFormatError(
                f"the trace file {path!s} is {_file_kind(info.st_mode)}, not a regular file; "
                "pass the path of a trace saved with Trace.save")
        if info.st_size > max_bytes:
            raise TraceFormatError(
                f"the trace file {path!s} is {info.st_size} bytes, more than the limit of "
                f"{max_bytes}; pass max_bytes= to load_trace to read a larger file you trust")
    except BaseException:
        os.close(descriptor)
        raise
    with os.fdopen(descriptor, "rb") as handle:
        raw = handle.read(min(info.st_size, max_bytes) + 1)  # +1: a file grown past the limit
    if len(raw) > max_bytes:
        raise TraceFormatError(f"the trace file {path!s} is larger than {max_bytes} bytes")
    return raw


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def load_trace(path, max_bytes: int = MAX_TRACE_BYTES, *, max_values: int = MAX_TRACE_VALUES,
               max_containers: int = MAX_TRACE_CONTAINERS) -> Trace:
    """Read a trace file written by :meth:`Trace.save`, checking it strictly.

    Nothing in the file is executed (Note [Loading untrusted traces]), and refusing a hostile
    file costs bounded time and memory (Note [Bounded cost of refusing a trace]).

    Parameters
    ----------
    max_bytes, max_values, max_containers : int
        The largest file read, the most JSON values in it and the most JSON arrays and
        objects in it; raise them to read a larger file you trust.

    Raises
    ------
    gradviz.errors.TraceFormatError
        If the path is not a regular file, the file is too large or holds too many values,
        is not JSON, of another format or schema version, does not match the schema, or its
        graph is not a graph of distinct nodes without cycles; the message names the
        offending field or ids.

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
    data = parse_trace_json(read_trace_file(path, max_bytes), max_values, max_containers, path)
    return load_trace_from_dict(data)


def read_trace_file(path, max_bytes: int = MAX_TRACE_BYTES) -> bytes:
    """The bytes of a trace file (or of a ``.gvtrace.json`` view), refused as :func:`load_trace`
    refuses them: not a regular file, or larger than ``max_bytes``."""
    return _read_regular_file(path, max_bytes)


def parse_trace_json(raw: bytes, max_values: int = MAX_TRACE_VALUES,
                     max_containers: int = MAX_TRACE_CONTAINERS, path=None):
    """The JSON value of a trace file's bytes, parsed as strictly as :func:`load_trace` does
    (counts limited first, no NaN/Infinity literals, no duplicate keys); not checked further."""
    check_structure(raw, max_values, max_containers)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"the trace file {path!s} is not UTF-8 text: {exc}") from exc
    del raw  # only the text stays while parsing
    return _parse_json(text)


def load_trace_from_json(text: str, *, max_values: int = MAX_TRACE_VALUES,
                         max_containers: int = MAX_TRACE_CONTAINERS) -> Trace:
    """Parse and check the JSON text of a trace (see :func:`load_trace`)."""
    check_structure(text, max_values, max_containers)
    return _parse(text)


def _parse(text: str) -> Trace:
    return load_trace_from_dict(_parse_json(text))


def _parse_json(text: str):
    try:
        data = json.loads(text, parse_constant=_refuse_constant,
                          object_pairs_hook=_no_duplicates)
    except TraceFormatError:
        raise
    except RecursionError:
        raise TraceFormatError("the trace is nested too deeply to be a gradviz trace") from None
    except ValueError as exc:
        raise TraceFormatError(f"the trace is not valid JSON: {exc}") from None
    return data


def load_trace_from_dict(data) -> Trace:
    """Check already-parsed trace data (see :func:`load_trace`) and return the Trace.

    A saved trace view (``Trace.save_view``, format ``"gradviz-trace-view"``) holds a trace in
    its ``trace`` field; that trace is checked and returned (the view is not read here:
    ``gradviz.widget.load_trace_view`` checks both)."""
    if isinstance(data, dict) and data.get("format") == TRACE_VIEW_FORMAT:
        if not isinstance(data.get("trace"), dict):
            raise TraceFormatError("this trace view (a .gvtrace.json file) has no \"trace\" object; "
                                   "save it again with trace.save_view(path)")
        data = data["trace"]
    return Trace.from_dict(data)

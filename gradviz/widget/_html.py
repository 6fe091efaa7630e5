"""A trace as one self-contained HTML file that replays it offline (``Trace.to_html``).

The page holds three things and loads nothing else: the viewer script ``static/standalone.js``
(the notebook widget's own view code and Graphviz, built from ``labextension/src/standalone.ts``),
the replay data as JSON in a ``<script type="application/json">`` element, and a Content
Security Policy that forbids every network request. The browser does no replaying of its own:
this module steps a :class:`~gradviz.debug.ReplaySession` through every prefix of the event
stream once and writes what it shows at each position (the graph once; per position only the
node states that changed, the current node; the events' narration text), so the page just
indexes into that data (``labextension/src/replay.ts`` reads it).

Layering: the widget layer owns the front-end bundle, so the implementation lives here and
``gradviz.instrument.Trace.to_html`` is a thin wrapper that imports this module when it is
called (never at import time, so ``gradviz.instrument`` still loads without the widget layer).

Note [Inline script safety]
---------------------------
Text inside ``<script>`` ends at the first ``</script`` and ``<!--`` changes how the HTML parser
reads what follows, whatever the script's type. The JSON is therefore written with every ``<``,
``>`` and ``&`` as a ``\\uXXXX`` escape (still the same JSON), so no user text (node names,
labels, event text) can close the element; the page reads it with ``JSON.parse`` of the
element's ``textContent`` and puts text into the DOM with ``textContent`` only. The viewer script
is checked for both sequences here (and by the build). The title goes through ``html.escape``.
"""

from __future__ import annotations

import html
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

from ._bundle import STANDALONE_BUNDLE, BundleError, load_bundle
from ._widget import _as_id, compact_event, forward_sources, json_safe, normalize_graph, normalize_states

__all__ = ["trace_to_html", "standalone_data", "render_html", "STANDALONE_FORMAT", "STANDALONE_VERSION"]

STANDALONE_FORMAT = "gradviz-standalone"
STANDALONE_VERSION = 1  # labextension/src/replay.ts, STANDALONE_VERSION
STATE_NAMES = ("pending", "ready", "running", "done", "released", "error")
DATA_ELEMENT_ID = "gradviz-data"  # labextension/src/standalone.ts, DATA_ELEMENT_ID
# How many bytes of the page's JSON the inspector's snapshots may take (Note [Page inspector]).
INSPECTION_BUDGET = 8 * 1024 * 1024

# No network at all: scripts and styles only inline; the layout worker from a blob: URL; WASM
# compiled from bytes inside the script ('wasm-unsafe-eval'); 'unsafe-eval' for the layout's
# on-page fallback (new Function over the worker's text) when a worker cannot start.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval' 'wasm-unsafe-eval' blob:; "
    "worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
    "connect-src data: blob:; base-uri 'none'; form-action 'none'"
)

_UNSAFE_IN_SCRIPT = re.compile(r"</script|<!--", re.IGNORECASE)
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def standalone_data(trace: Any, title: str | None = None, inspection_budget: int = INSPECTION_BUDGET,
                    doctor: Any = None) -> dict[str, Any]:
    """The replay of ``trace`` as the page reads it (format in ``labextension/src/replay.ts``),
    with ``doctor`` (default ``trace.doctor``), a gradient doctor's report of its graph, when
    there is one.

    Position ``p`` (0 ... number of events) is what a ReplaySession shows after ``seek(p)``;
    ``start`` is where a new ReplaySession stands (before the first node ran). See Note
    [Replay deltas] for how the per-position states are found in linear time.
    """
    from ..debug import ReplaySession

    session = ReplaySession(trace)
    start = session.position
    graph = normalize_graph(session.graph(), forward_sources(session))
    ids = {node["id"] for node in graph["nodes"]}
    changes, current = _replay_changes(session, trace.events, ids)
    inspections, budget = _inspections(session, trace.events, ids, inspection_budget)
    session.seek(len(trace.events))
    events = []
    for event in trace.events:
        line = compact_event(event) or {"kind": "?", "node": None, "text": ""}
        entry = [line["kind"], line["node"], line["text"]]
        producer = _as_id(event.get("producer")) if isinstance(event, dict) else None
        if line["kind"] == "buffer_added" and producer in ids and line["node"] in ids:
            entry.append(producer)  # the edge the gradient arrives on (the view colours it)
        events.append(entry)
    data = {
        "format": STANDALONE_FORMAT,
        "version": STANDALONE_VERSION,
        "title": title if title is not None else "gradviz trace",
        "gradviz_version": str(trace.gradviz_version),
        "graph": graph,
        "state_names": list(STATE_NAMES),
        "start": start,
        "final_status": session.status,
        "events": events,
        "changes": changes,
        "current": current,
        "inspections": inspections,
        "inspection_budget": budget,
    }
    report = doctor if doctor is not None else getattr(trace, "doctor", None)
    if report is not None:
        data["doctor"] = json_safe(report if isinstance(report, dict) else report.to_dict())
    return data


# Note [Page inspector]
# ---------------------
# The page's inspector shows what ``ReplaySession.node(id)`` says at the shown position, as the
# notebook's does: gradient summaries in and out, buffers as of that event, hooks' before and
# after, ``.grad`` before and after, saved tensors. An event changes what ``node()`` says about
# its own node only (a node-less event, ``backward_started``, may change all of them), so the
# page keeps, per node, a snapshot at each position where it changed: ``inspections[id]`` =
# ``[[position, info], ...]`` in position order, and the view shows the last one at or before
# the position.
#
# Snapshots are taken in position order until the first one that would pass the byte budget;
# that position is the cut, and nothing from it on is read (reading every later position only
# to count what was left out was 80% of writing a 100,000-node page). The page must then never
# show a snapshot taken before the cut as what a node shows after it: the node may have changed
# in between (a buffer accumulated, the node run), and an earlier snapshot would be a wrong
# value. So every node with a kept snapshot gets a marker, ``[position, {"left_out": true}]``,
# at the first position from the cut on where it may change (an event of its own, or a node-less
# one), and the view shows the budget note from there on instead of the stale snapshot. A node
# with no kept snapshot needs no marker: the page shows the note for it anyway. ``left_out`` in
# ``inspection_budget`` counts the node reads skipped from the cut on, an upper bound of the
# snapshots left out; the page and ``trace_to_html``'s warning say so.

LEFT_OUT_MARKER = {"left_out": True}  # labextension/src/player.ts, inspection()


def _inspections(session: Any, events: list[dict], ids: set[int], limit: int) -> tuple[dict[str, list], dict[str, int]]:
    inspections: dict[str, list] = {}
    last: dict[int, Any] = {}
    all_ids = sorted(ids)
    used = 0
    cut: tuple[int, set[int]] | None = None  # (position, nodes already kept at that position)
    for position in range(len(events) + 1):
        event = events[position - 1] if position > 0 else None
        node = None if event is None else _as_id(event.get("node"))
        session.seek(position)
        kept_here: set[int] = set()
        for node_id in all_ids if node not in ids else (node,):
            info = json_safe(session.node(node_id))
            if info == last.get(node_id):
                continue
            size = len(script_json([position, info])) + 1
            if used + size > limit:
                cut = (position, kept_here)
                break
            last[node_id] = info
            used += size
            kept_here.add(node_id)
            inspections.setdefault(str(node_id), []).append([position, info])
        if cut is not None:
            break
    left_out = 0
    if cut is not None:
        cut_position, kept_at_cut = cut
        unmarked = set(last) - kept_at_cut  # nodes with a kept snapshot that may go stale
        for position in range(cut_position, len(events) + 1):
            event = events[position - 1] if position > 0 else None
            node = None if event is None else _as_id(event.get("node"))
            touched = all_ids if node not in ids else (node,)
            for node_id in touched:
                if position == cut_position and node_id in kept_at_cut:
                    continue
                left_out += 1
                if node_id in unmarked:
                    unmarked.discard(node_id)
                    inspections[str(node_id)].append([position, dict(LEFT_OUT_MARKER)])
    return inspections, {"bytes": used, "limit": limit, "left_out": left_out}


# Note [Replay deltas]
# --------------------
# Reading every node's state at every position costs nodes x events (minutes for a 3,000-node
# pass). An event changes at most the state of its own node, except events without a node
# (backward_started starts every node over), so at each position only that node is read
# (``session.node(id)["state"]``), and all of them only after a node-less event. The tracked
# states are compared with a full read before each node-less event and at the end; should the
# rule ever stop holding (a new event kind), every position is read in full instead.
# tests/widget/test_html.py compares every position with ReplaySession.node_states().


def _replay_changes(session: Any, events: list[dict], ids: set[int]) -> tuple[list[list[int]], list[int | None]]:
    codes = {name: code for code, name in enumerate(STATE_NAMES)}

    def full_states() -> dict[int, str]:
        raw = normalize_states(session.node_states())
        return {int(key): state for key, state in raw.items() if state != "pending"}

    def diff(before: dict[int, str], after: dict[int, str]) -> list[int]:
        flat: list[int] = []
        for node_id in sorted(before.keys() | after.keys()):
            state = after.get(node_id, "pending")
            if before.get(node_id, "pending") != state:
                flat += [node_id, codes[state]]
        return flat

    for fast in (True, False):
        changes: list[list[int]] = []
        current: list[int | None] = []
        states: dict[int, str] = {}  # the states shown, pending ones left out
        for position in range(len(events) + 1):
            event = events[position - 1] if position > 0 else None
            node = None if event is None else event.get("node")
            full = (position == 0 or not fast or event is None or node is None
                    or event.get("kind") == "backward_started")
            if full and fast and position > 0 and states != full_states():
                break  # what was tracked (up to position - 1) is wrong: read everything
            session.seek(position)
            if full:
                after = full_states()
                changes.append(diff(states, after))
                states = after
            elif node in ids and session.node(node)["state"] != states.get(node, "pending"):
                state = session.node(node)["state"]
                changes.append([node, codes[state]])
                if state == "pending":
                    del states[node]
                else:
                    states[node] = state
            else:
                changes.append([])
            current.append(None if session.current is None else int(session.current))
        else:
            if not fast or states == full_states():
                return changes, current
    raise AssertionError("unreachable")


# What a browser that does not run the page's script shows instead of a blank page. JupyterLab
# opens an .html file in its HTML viewer with scripts off until "Trust HTML" is clicked.
NO_SCRIPT_HINT = (
    "This page replays a recorded backward pass with its own script, and scripts are off here. "
    "In JupyterLab's HTML viewer, click \u201cTrust HTML\u201d in its toolbar; or open the file in a web "
    "browser (it makes no network requests)."
)


def script_json(data: Any) -> str:
    """Compact JSON that is safe inside a ``<script>`` element (Note [Inline script safety])."""
    return json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":")).translate(_JSON_ESCAPES)


def render_html(data: dict[str, Any], viewer: str) -> str:
    """The page: the data element, then the viewer script (``static/standalone.js``)."""
    unsafe = _UNSAFE_IN_SCRIPT.search(viewer)
    if unsafe is not None:
        raise BundleError(
            f"{STANDALONE_BUNDLE} contains {unsafe.group(0)!r} at offset {unsafe.start()}, which would end "
            "its inline <script> early; rebuild it with `npm --prefix labextension run build`"
        )
    title = html.escape(str(data["title"]), quote=True)
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="gradviz">\n'
        f"<title>{title}</title>\n</head>\n<body>\n"
        '<main id="gradviz-app"></main>\n'
        f"<noscript><p>{NO_SCRIPT_HINT}</p></noscript>\n"
        f'<script type="application/json" id="{DATA_ELEMENT_ID}">{script_json(data)}</script>\n'
        f"<script>\n{viewer}\n</script>\n"
        "</body>\n</html>\n"
    )


def trace_to_html(trace: Any, path: str | os.PathLike[str], title: str | None = None,
                  inspection_budget: int = INSPECTION_BUDGET, doctor: Any = None) -> Path:
    """Write ``trace`` as one HTML file that replays it in a browser, offline.

    The page shows the same view as the notebook widget, with Step, Step event, Continue,
    Run to selected, Step back, Restart and a scrubber over the events. It needs no kernel,
    no server and no network (it makes no requests at all), so it can be opened from disk
    or mailed. The inspector shows what a notebook replay's inspector shows at each event: the
    node's gradient summaries in and out (shape, dtype, min, max, mean, norm, NaN and Inf
    counts, the first values; every value of a tensor of six entries or fewer), buffers, hooks'
    before and after, ``.grad`` before and after, saved tensors. These snapshots take at most
    ``inspection_budget`` bytes of the page; the page's header says how many bytes they took
    and how many were left out, and a ``UserWarning`` says so when any were.

    Parameters
    ----------
    trace : gradviz.instrument.Trace
        From ``gradviz.record()`` or ``gradviz.load_trace(path)``.
    path : str or os.PathLike
        The file to write (overwritten).
    title : str, optional
        The page's title and heading (default ``"gradviz trace"``); shown as text, never HTML.
    inspection_budget : int, optional
        Bytes the inspector's snapshots may take (default 8 MiB); 0 keeps none.
    doctor : gradviz.debug.DoctorReport or dict, optional
        A gradient doctor's report of the recorded graph (its node ids are the trace's: run
        it on the loss inside the recording, before ``backward()``); default ``trace.doctor``
        (``record_torch(..., doctor=True)``). The page's Check gradients then shows it, as
        the notebook widget does.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    gradviz.widget._bundle.BundleError
        If ``static/standalone.js`` is missing or older than its sources (dev checkouts):
        run ``npm --prefix labextension run build``.

    Examples
    --------
    >>> import gradviz as torch, os, tempfile
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.record() as trace:
    ...     (x * x).sum().backward()
    >>> page = trace.to_html(os.path.join(tempfile.mkdtemp(), "trace.html"), title="x * x")
    >>> page.read_text(encoding="utf-8").startswith("<!doctype html>")
    True
    """
    viewer = load_bundle(name=STANDALONE_BUNDLE)  # first: a missing bundle fails before any work
    data = standalone_data(trace, title, inspection_budget, doctor)
    page = render_html(data, viewer)
    budget = data["inspection_budget"]
    if budget["left_out"]:
        warnings.warn(
            f"{path}: the inspector's snapshots of up to {budget['left_out']} node states were left out to keep "
            f"them within inspection_budget={budget['limit']} bytes (they took {budget['bytes']}); "
            "pass a larger inspection_budget to keep them", UserWarning, stacklevel=2)
    target = Path(path)
    target.write_text(page, encoding="utf-8")
    return target

"""Node states on the wire (protocol 6): whole on open and on resync, as deltas on a Step.

Kept apart from ``_widget.py``, whose ``_refresh`` reads a :class:`StatesSnapshot` from the
session and publishes it with :class:`StatesPublisher`.

Note [States on the wire]
-------------------------
A Step changes the state of a handful of nodes, but the ``states`` trait holds every node's:
at 100,000 nodes, rebuilding it, comparing it and sending it as JSON cost half a second a Step.
So the widget sends it whole only when a view needs all of it (the widget opens, a new graph, a
replay going back, a view asking with a ``resync`` message), and otherwise sends a
``states_delta`` custom message: the states that changed and the gradient deliveries
(``delivered`` pairs) added since the previous one, numbered by ``seq``. The session says which
nodes may have changed (``session.state_changes(mark)``, Note [State deltas] in
``gradviz/debug/_base.py``), so nothing here walks all nodes on a Step.

The Python traits stay whole: a delta updates ``states`` and ``delivered`` in place (which does
not sync them) and sets ``states_seq`` to the delta's number, in the same ``update`` that
carries the step's ``current`` and ``status``. A whole ``states`` goes with ``states_base``, the
number of the last delta it includes. A view keeps its own copy: it takes ``states`` and
``delivered`` whole when ``states_base`` changes, applies the delta numbered one more than its
copy's, ignores older ones, and asks for a ``resync`` when it sees a gap (a delta or a
``states_seq`` beyond its copy, e.g. a view opened after some steps, which got the traits as
they were last sent whole).

Sessions without ``state_changes`` (test doubles) get the same messages from a comparison of
the whole ``node_states()`` with what was sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

__all__ = ["RESYNC", "STATES_DELTA", "StatesMixin", "StatesPublisher", "StatesSnapshot", "validate_resync"]

log = logging.getLogger("gradviz.widget")

#: ``{"type": "resync"}``: a view's copy of the states missed a delta; send them whole.
RESYNC = "resync"
#: ``{"type": "states_delta", "seq", "states", "delivered"}``: Python -> browser.
STATES_DELTA = "states_delta"


@dataclass
class StatesSnapshot:
    """What one ``_refresh`` read: either whole states, or the changes since ``base_mark``."""

    mark: object                        # the session's state_changes mark after this read
    base_mark: object                   # the mark the changes are relative to
    states: dict[str, str] | None       # whole states (normalized), or None
    changes: dict[str, str] | None      # changed states (normalized), or None
    events: list | None                 # the events shown (a copy), None without events


class StatesPublisher:
    """The widget's side of Note [States on the wire]: what was last published, and the next
    ``seq``. Called under the widget's publish lock, never calling into the session."""

    def __init__(self) -> None:
        self.mark: object = None          # the mark of the last published snapshot
        self.seq = 0                       # the number of the last delta (or whole) sent
        self.delivered_seen = 0            # how many events the `delivered` trait covers

    def delta(self, widget: Any, snapshot: StatesSnapshot, delivered_edges: Any,
              graph_ids: frozenset[int]) -> dict | None:
        """Apply a snapshot of changes to the widget's traits in place; the ``states_delta``
        message to send (None: nothing changed)."""
        current = widget.states
        changed = {key: state for key, state in (snapshot.changes or {}).items() if current.get(key) != state}
        current.update(changed)
        added: list = []
        events = snapshot.events
        if events is not None and widget.delivered is not None and len(events) > self.delivered_seen:
            added = delivered_edges(events[self.delivered_seen:], graph_ids) or []
            widget.delivered.extend(added)
            self.delivered_seen = len(events)
        self.mark = snapshot.mark
        if not changed and not added:
            return None
        self.seq += 1
        return {"type": STATES_DELTA, "seq": self.seq, "states": changed, "delivered": added}

    def whole(self, snapshot: StatesSnapshot) -> int:
        """A whole snapshot is being published: the ``states_base`` (and ``states_seq``) it gets."""
        self.mark = snapshot.mark
        self.delivered_seen = 0 if snapshot.events is None else len(snapshot.events)
        self.seq += 1
        return self.seq


class StatesMixin:
    """The states half of ``DebuggerWidget._refresh`` (Note [States on the wire]). Uses the
    widget's ``_session``, ``_states_publisher``, ``_publish_lock``, ``_normalize_states``,
    ``_delivered_edges``, its ``states``, ``delivered``, ``states_seq``, ``states_base``
    traits, ``hold_sync`` and ``send``."""

    if TYPE_CHECKING:  # what the widget provides (traits, state, methods)
        _session: Any
        _states_publisher: StatesPublisher
        _publish_lock: threading.Lock
        _states_to_send: set[str]
        states: dict[str, str]
        delivered: list | None
        states_seq: int
        states_base: int

        _normalize_states: Callable[[object], dict[str, str]]
        _delivered_edges: Callable[[Iterable[object] | None, frozenset[int]], list[list[int]] | None]

        def send(self, content: Any, buffers: list[bytes] | None = None) -> None: ...

        def hold_sync(self) -> AbstractContextManager[None]: ...

    def _read_states(self) -> StatesSnapshot:
        """The session's node states: the changes since the last published snapshot when the
        session can tell them, else whole (Note [States on the wire])."""
        base_mark = self._states_publisher.mark
        reader = getattr(self._session, "state_changes", None)
        mark, changes = reader(base_mark) if callable(reader) and self._states_publisher.seq > 0 else (None, None)
        if changes is None:
            if callable(reader):
                mark, _ = reader(None)  # before reading: a change in between is sent again
            whole = self._normalize_states(self._session.node_states())
            return StatesSnapshot(mark, base_mark, whole, None, None)
        return StatesSnapshot(mark, base_mark, None, self._normalize_states(changes), None)

    def _publish_states(self, snapshot: StatesSnapshot, delivered: list | None, graph_ids: frozenset[int],
                        new_graph: bool) -> None:
        """Publish a snapshot's states and deliveries (inside ``hold_sync``): a ``states_delta``
        message, or the whole traits with a new ``states_base``."""
        publisher = self._states_publisher
        events = snapshot.events
        if (snapshot.states is not None and not callable(getattr(self._session, "state_changes", None))
                and publisher.seq > 0 and not new_graph and snapshot.states.keys() == self.states.keys()
                and (events is None) == (self.delivered is None)
                and (events is None or len(events) >= publisher.delivered_seen)):
            # a session without state_changes(): the changes from a comparison with what was sent
            snapshot.changes = {key: state for key, state in snapshot.states.items() if self.states.get(key) != state}
            snapshot.states = None
        if snapshot.states is None:
            # (a snapshot read before another was published holds changes relative to an older
            # mark: a superset, and states are absolute, so applying it again is right)
            message = publisher.delta(self, snapshot, self._delivered_edges, graph_ids)
            if message is not None:
                self.send(message)
                self.states_seq = publisher.seq
            return
        base = publisher.whole(snapshot)
        self.states = snapshot.states
        self.delivered = delivered
        self.states_base = base
        self.states_seq = base
        # equal values are not sent by traitlets, but a view's copy may hold deltas since
        self._states_to_send.update(("states", "delivered"))

    def _on_resync_message(self, content: dict, buffers: object) -> None:
        """A ``resync`` message: checked (an ``error`` reply when malformed), then answered."""
        reason = validate_resync(content) or ("the resync message carries binary buffers; it carries none"
                                              if buffers else None)
        if reason is not None:
            log.warning("gradviz widget: ignoring a message: %s", reason)
            self.send({"type": "error", "reason": reason})
            return
        self._run_resync()

    def _run_resync(self) -> None:
        """A view's copy of the states missed a delta: send them whole (Note [States on the wire])."""
        with self._publish_lock:
            seq = self._states_publisher.seq = self._states_publisher.seq + 1
            with self.hold_sync():
                self.states_base = seq
                self.states_seq = seq
                self._states_to_send.update(("states", "delivered"))


def validate_resync(content: dict) -> str | None:
    """Why a ``resync`` message is malformed (the text of the ``error`` reply); None if it is
    well-formed."""
    if set(content) != {"type"}:
        extra = ", ".join(sorted(map(str, set(content) - {"type"})))
        return f"a resync message has the field type only (unexpected {extra})"
    return None

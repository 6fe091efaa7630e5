"""Breakpoints of debug sessions (``session.break_on(...)``).

A breakpoint is one of two sorts, decided by what it is given:

* a **node breakpoint** (only ``node`` and/or ``function``): ``continue_()`` stops *before*
  running a matching node, with that node as ``session.current``;
* an **event breakpoint** (``event``, ``nonfinite`` or ``when``, optionally narrowed by
  ``node`` / ``function``): ``continue_()`` stops right *after* a matching event.

All criteria given to one breakpoint must hold together. Breakpoints see only event dicts and
node names, so the same breakpoint works in a live session and in a replayed trace.
"""

from __future__ import annotations

from collections.abc import Callable

from ..instrument import EVENT_KINDS

__all__ = ["Breakpoint", "BreakpointList", "has_nonfinite", "function_name"]


def function_name(function) -> str:
    """The node name a ``function=`` criterion matches: ``Fn`` (a custom Function) matches
    ``FnBackward``; a node class or a name string matches that name."""
    if isinstance(function, str):
        return function
    backward_cls = getattr(function, "_backward_cls", None)
    if backward_cls is not None:
        return backward_cls.__name__
    if isinstance(function, type):
        return function.__name__
    raise TypeError(
        "break_on(function=...) takes a custom autograd.Function class, a node class or a node "
        f"name such as 'MulBackward0', got {type(function).__name__}")


def has_nonfinite(value) -> bool:
    """Whether a summary anywhere inside an event payload counts a NaN or an Inf."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "nan" in item and "inf" in item and "numel" in item:
                if item["nan"] or item["inf"]:
                    return True
                continue
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class Breakpoint:
    """A breakpoint; ``remove()`` deletes it, ``enabled`` switches it, ``hits`` counts stops.

    Create breakpoints with ``session.break_on(...)``.

    Examples
    --------
    >>> x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    >>> session = gradviz.debug.backward((x.exp() * 2).sum())
    >>> stop = session.break_on(function="ExpBackward0")
    >>> session.continue_()  # runs SumBackward0 and MulBackward0, stops before ExpBackward0
    >>> session.node(session.current)["name"], stop.hits
    ('ExpBackward0', 1)
    >>> stop.remove()
    >>> session.continue_()
    >>> session.finished, x.grad is not None
    (True, True)
    """

    def __init__(self, node=None, function=None, event: str | None = None,
                 nonfinite: bool = False, when: Callable[[dict], bool] | None = None):
        if node is not None and hasattr(node, "node_id"):
            node = node.node_id
        if node is not None and (not isinstance(node, int) or isinstance(node, bool)):
            raise TypeError(f"break_on(node=...) takes a node or a node id, got {node!r}")
        if event is not None and event not in EVENT_KINDS:
            raise ValueError(f"break_on(event=...) must be one of {', '.join(EVENT_KINDS)}; "
                             f"got {event!r}")
        if when is not None and not callable(when):
            raise TypeError(f"break_on(when=...) takes a function of the event, got {when!r}")
        if node is None and function is None and event is None and not nonfinite and when is None:
            raise ValueError("break_on() needs at least one of node=, function=, event=, "
                             "nonfinite=True or when=")
        self.node = node
        self.function = None if function is None else function_name(function)
        self.event = event
        self.nonfinite = bool(nonfinite)
        self.when = when
        self.enabled = True
        self.hits = 0
        self._owner: BreakpointList | None = None

    @property
    def before_node(self) -> bool:
        """A node breakpoint (stops before a node runs), not an event breakpoint."""
        return self.event is None and not self.nonfinite and self.when is None

    def _node_matches(self, node_id, name) -> bool:
        if self.node is not None and node_id != self.node:
            return False
        return self.function is None or name == self.function

    def matches_node(self, node_id: int, name: str | None) -> bool:
        return self.enabled and self.before_node and self._node_matches(node_id, name)

    def matches_event(self, event: dict, name: str | None) -> bool:
        if not self.enabled or self.before_node:
            return False
        if (self.node is not None or self.function is not None) and \
                not self._node_matches(event["node"], name):
            return False
        if self.event is not None and event["kind"] != self.event:
            return False
        if self.nonfinite and not has_nonfinite(event):
            return False
        return self.when is None or bool(self.when(event))

    def remove(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.remove(self)

    def __repr__(self) -> str:
        parts = [f"{key}={value!r}" for key, value in (
            ("node", self.node), ("function", self.function), ("event", self.event))
            if value is not None]
        if self.nonfinite:
            parts.append("nonfinite=True")
        if self.when is not None:
            parts.append(f"when={getattr(self.when, '__name__', self.when)!r}")
        return f"<Breakpoint {' '.join(parts)} hits={self.hits}>"


class BreakpointList:
    """The breakpoints of one session (thread-safe to read while another thread adds)."""

    def __init__(self):
        self._items: tuple[Breakpoint, ...] = ()

    def add(self, breakpoint: Breakpoint) -> Breakpoint:
        if breakpoint._owner is not None:
            raise ValueError("this breakpoint already belongs to a session")
        breakpoint._owner = self
        self._items = self._items + (breakpoint,)
        return breakpoint

    def remove(self, breakpoint: Breakpoint) -> None:
        self._items = tuple(b for b in self._items if b is not breakpoint)
        breakpoint._owner = None

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    @property
    def runs_user_code(self) -> bool:
        """Whether checking an event calls a ``when=`` predicate (code of the user's)."""
        return any(breakpoint.when is not None for breakpoint in self._items)

    def node_hit(self, node_id: int, name: str | None) -> Breakpoint | None:
        for breakpoint in self._items:
            if breakpoint.matches_node(node_id, name):
                breakpoint.hits += 1
                return breakpoint
        return None

    def event_hit(self, event: dict, name: str | None) -> Breakpoint | None:
        for breakpoint in self._items:
            if breakpoint.matches_event(event, name):
                breakpoint.hits += 1
                return breakpoint
        return None

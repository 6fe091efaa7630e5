"""The widget's overlays and module inspector (protocol 5): their traits and messages.

Kept apart from ``_widget.py``, which calls into :class:`OverlayPublisher` on every snapshot
and into :func:`module_inspection` while a module is selected.

Note [Overlay values on the wire]
---------------------------------
``states`` already costs one JSON entry per node on a Step; sending five built-in overlays
with it would multiply that. So the ``overlays`` trait always lists every overlay (name,
kind, scale, title) but carries the ``values`` of a built-in only after a view asked for it
with an ``overlay`` message (its picker chose it): ``null`` values mean "not sent yet". A
requested built-in stays sent while the widget lives (two views may show two of them). Values
are converted to JSON only when the session's value dict changed (it is replaced, never
mutated: Note [Incremental overlays] in ``gradviz/debug/_overlays.py``).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from ..instrument._rollup import rollup
from ._protocol import AckMessage, ErrorReply, ModuleInspection, ModuleParameter, Overlay, ProgressMessage

__all__ = ["OverlayPublisher", "PanelsMixin", "module_inspection", "validate_panel_message",
           "MODULE_SELECT", "OVERLAY_REQUEST"]

log = logging.getLogger("gradviz.widget")

#: ``{"type": "select", "module": "blocks.3"}``: show a module in the inspector.
MODULE_SELECT = "select"
#: ``{"type": "overlay", "name": "grad_norm"}``: a view's picker wants this overlay's values.
OVERLAY_REQUEST = "overlay"


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


class OverlayPublisher:
    """Builds the ``overlays`` trait from ``session.overlays()`` (Note [Overlay values on the
    wire])."""

    def __init__(self) -> None:
        self.requested: set[str] = set()
        self._converted: dict[object, tuple] = {}

    def trait(self, session: Any) -> dict[str, Overlay] | None:
        """The trait's new value; None for a session without overlays."""
        reader = getattr(session, "overlays", None)
        if not callable(reader):
            return None
        found: dict[str, Overlay] = {}
        for name, overlay in reader().items():
            entry: Overlay = {"kind": overlay["kind"], "scale": overlay["scale"], "builtin": overlay["builtin"],
                              "title": overlay["title"], "description": overlay["description"],
                              "edges": None, "values": None}
            values = overlay["values"]
            edges = overlay.get("edges")
            if not (overlay["builtin"] and name not in self.requested):
                if edges is not None:
                    cached_edges = self._converted.get((name, "edges"))
                    if cached_edges is None or cached_edges[2] is not edges:
                        cached_edges = self._converted[(name, "edges")] = (
                            name, {key: _json_value(value) for key, value in edges.items()}, edges)
                    entry["edges"] = cached_edges[1]
                cached = self._converted.get(name)
                if cached is None or cached[2] is not values:
                    converted = {str(node): _json_value(value) for node, value in values.items()}
                    cached = self._converted[name] = (name, converted, values)
                entry["values"] = cached[1]
            found[name] = entry
        return found


def validate_panel_message(content: dict, known_overlays: object) -> tuple[str, str | None] | str:
    """``(type, argument)`` of a well-formed module ``select`` or ``overlay`` message, else
    why it is malformed (the text of the ``error`` reply)."""
    kind = content.get("type")
    field = "module" if kind == MODULE_SELECT else "name"
    expected = {"type", field}
    if set(content) != expected:
        return (f"a {kind} message has the fields {', '.join(sorted(expected))}, got "
                f"{', '.join(sorted(map(str, content)))}")
    argument = content[field]
    if kind == MODULE_SELECT:
        if argument is not None and not isinstance(argument, str):
            return f"a select message's module must be a dotted module path or null, got {argument!r:.80}"
        return MODULE_SELECT, argument
    if argument is not None and not isinstance(argument, str):
        return f"an overlay message's name must be an overlay name or null, got {argument!r:.80}"
    if argument is not None and isinstance(known_overlays, dict) and argument not in known_overlays:
        return f"no overlay named {argument!r:.80}; known: {', '.join(map(repr, known_overlays))}"
    return OVERLAY_REQUEST, argument


def module_rollup(graph: dict) -> dict[str, dict]:
    """``{dotted path: rollup module entry}`` of a graph (without states)."""
    return {entry["name"]: entry for entry in rollup(graph)["modules"]}


def module_inspection(session: Any, modules: dict[str, dict], path: str,
                      states: dict[str, str]) -> ModuleInspection:
    """The inspector's content for a module: ``{"module", "type", "count", "calls",
    "states", "parameters": [{"id", "name", "grad"}]}``: the parameters of the module and of
    its sub-modules, by name; ``grad`` is the summary of the
    gradient the parameter's AccumulateGrad node received, None before it ran."""
    entry = modules[path]
    counts: dict[str, int] = {}
    for node in entry["nodes"]:
        state = states.get(str(node), "pending")
        counts[state] = counts.get(state, 0) + 1
    reader = getattr(session, "node", None)
    prefix = path + "." if path else ""
    owned = [parameter for name, module in modules.items()
             if name == path or name.startswith(prefix)
             for parameter in module["parameters"]]
    parameters: list[ModuleParameter] = []
    for parameter in sorted(owned, key=lambda item: item["name"]):
        grad = None
        if callable(reader):
            received = reader(parameter["id"]).get("grads_in")
            if received:
                grad = received[0]
        parameters.append({"id": parameter["id"], "name": parameter["name"], "grad": grad})
    return {"module": path, "type": entry["type"], "count": entry["count"],
            "calls": entry["calls"], "states": counts, "parameters": parameters}


class PanelsMixin:
    """The module selection and overlay requests of ``DebuggerWidget`` (protocol 5). Uses the
    widget's ``_session``, ``_modules``, ``_overlay_publisher``, ``overlays``, ``selected``,
    ``selected_module``, ``_refresh``, ``_ack`` and ``send``."""

    if TYPE_CHECKING:  # what the widget provides (traits, state, methods)
        _session: Any
        _modules: dict[str, dict] | None
        _overlay_publisher: OverlayPublisher
        overlays: dict[str, Overlay] | None
        selected: int | None
        selected_module: str | None

        def _refresh(self) -> None: ...

        def _ack(self, name: str, ok: bool, reason: str | None = None) -> None: ...

        def send(self, content: AckMessage | ErrorReply | ProgressMessage,
                 buffers: list[bytes] | None = None) -> None: ...

    def select_module(self, path: str | None) -> None:
        """Show a module (dotted path, e.g. ``"blocks.3"``; ``""`` the whole model) in the
        inspector: its type, node counts and parameters with their gradients, as a click on a
        folded module does; None shows nothing.

        Raises
        ------
        KeyError
            If no node of the graph is inside a module of that path.

        Examples
        --------
        >>> import gradviz as torch
        >>> from gradviz.widget import DebuggerWidget
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
        >>> widget = DebuggerWidget(torch.debug.backward(model(torch.ones(1, 2)).sum(), params=model))
        >>> widget.select_module("0")
        >>> widget.inspection["type"], [p["name"] for p in widget.inspection["parameters"]]
        ('Linear', ['0.bias', '0.weight'])
        """
        if path is not None:
            modules = self._module_index()
            if not isinstance(path, str) or path not in modules:
                raise KeyError(f"no module {path!r} in this session's graph; modules: "
                               f"{', '.join(repr(name) for name in list(modules)[:10]) or 'none'}")
        self.selected = None
        self.selected_module = path
        self._refresh()

    def _module_index(self) -> dict[str, dict]:
        if self._modules is None:
            self._modules = module_rollup(self._session.graph())
        return self._modules

    def _on_panel_message(self, content: dict) -> None:
        """A module ``select`` or an ``overlay`` request (protocol 5, ``_panels.py``)."""
        checked = validate_panel_message(content, self.overlays)
        if isinstance(checked, str):
            log.warning("gradviz widget: ignoring a message: %s", checked)
            self.send({"type": "error", "reason": checked})
            return
        kind, argument = checked
        if kind == OVERLAY_REQUEST:
            if argument is not None and argument not in self._overlay_publisher.requested:
                self._overlay_publisher.requested.add(argument)
                self._refresh()
            self._ack(OVERLAY_REQUEST, True)
            return
        try:
            self.select_module(argument)
        except KeyError as exc:  # an unknown path: the view and the kernel are out of step
            self.send({"type": "error", "reason": str(exc.args[0])})
            return
        self._ack(MODULE_SELECT, True)

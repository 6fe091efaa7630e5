"""The widget protocol's trait and message shapes, defined once as Python types.

Each synced trait and each custom message of ``docs/widget_protocol.md`` is a ``TypedDict`` or
a ``Literal`` below. The widget (``_widget.py``, ``_panels.py``) builds exactly these dicts, and
:func:`typescript` turns the same definitions into ``labextension/src/generated/widget_protocol.ts``
(with ``gradviz/_typescript.py``, the emitter the trace events' TypeScript uses too),
which the view's parsers import (with its ``isRecord``, the first check of every parser);
``tests/widget/test_protocol_files.py`` checks that the
committed file equals what this module generates (regenerate with
``python -m gradviz.widget.protocol > labextension/src/generated/widget_protocol.ts``).

Note [Shapes at run time]
-------------------------
Besides the types, the generated file holds ``SHAPES``: each shape's JSON Schema (as
``gradviz/_typescript.py`` writes it, ``$ref``s naming other shapes). ``labextension/src/payload.ts``
checks a value from the wire against a shape with one generic reader, so a parser does not
re-describe the fields by hand; ``Summary`` is not among them (it is the events' type).

Note [One definition of the protocol]
-------------------------------------
The events already had one definition (``gradviz/instrument/_schema.py``), the widget's traits
and messages had two, written by hand on either side, which could drift without any test
noticing. These types are that one definition. They describe the *shape* of what is sent; the
checks of what comes from the other side stay where they were (``normalize_graph`` and
``_validate_command`` in Python, ``model.ts`` and its neighbours in TypeScript), because a
value from the wire must still be checked before it is trusted. The protocol version stays
``PROTOCOL_VERSION`` in ``_widget.py`` (and ``model.ts``); it is not part of the generated file,
so a version bump does not make that file stale. ``Summary`` is the event schema's (an
inspection's gradients are event summaries), imported in TypeScript from ``events.ts``.
"""

from __future__ import annotations

import json
import sys
import typing
from typing import Literal, NotRequired, TypedDict, TypeVar

import traitlets

from .._typescript import object_schema, ts_interface, ts_literal, ts_type, type_schema
from ..instrument._schema import Summary

__all__ = [
    "NodeState", "NodeKind", "SessionStatus", "CommandName", "ModuleFields", "GraphNode", "GraphEdge", "Graph",
    "EventLine", "History", "Inspection", "DoctorState", "Overlay", "DiffData", "AckMessage", "ErrorReply",
    "ProgressMessage", "CommandMessage", "PanelMessage", "Synced", "typescript", "main",
]

_Value = TypeVar("_Value")

NodeState = Literal["pending", "ready", "running", "done", "released", "error"]
NodeKind = Literal["builtin", "custom", "accumulate_grad"]
# "running": a session driving user code in a worker thread, between two pauses
SessionStatus = Literal["paused", "running", "finished", "aborted", "error"]
# The toolbar's commands, in toolbar order (the `commands` trait lists those a session offers).
CommandName = Literal["step", "step_event", "continue", "run_to", "step_back", "abort", "check_gradients"]
# A number in a summary or an overlay: NaN and infinities travel as text.
Number = float | Literal["nan", "inf", "-inf"]
# An event of the history: [kind, node, text].
HistoryEvent = tuple[str, int | None, str]


class ModuleFields(TypedDict, total=False):
    """Where a graph node was recorded: its module path (outermost first), the class name at
    each level, and which application of that path built it."""

    module: list[str]
    module_types: list[str]
    module_call: int


class GraphNode(TypedDict):
    """One node of the ``graph`` trait; the optional fields are absent when unknown."""

    id: int
    name: str
    kind: NodeKind
    label: str
    leaf_name: NotRequired[str]
    number: NotRequired[int]
    module: NotRequired[list[str]]
    module_types: NotRequired[list[str]]
    module_call: NotRequired[int]
    source: NotRequired[str]


class GraphEdge(TypedDict):
    """One entry of a node's ``next_functions``: the gradient flows from source to target."""

    source: int
    target: int
    input_nr: int


class Graph(TypedDict):
    """The ``graph`` trait (``{}`` until the session's graph is known)."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    roots: list[int]


class EventLine(TypedDict):
    """The ``last_event`` trait: the narration line's view of the latest event."""

    seq: int | None
    kind: str
    node: int | None
    text: str


class History(TypedDict):
    """The ``history`` trait: at most ``HISTORY_LIMIT`` events, ``events[i]`` is event ``start + i``."""

    start: int
    total: int
    events: list[HistoryEvent]
    seekable: bool


class Inspection(TypedDict):
    """The ``inspection`` trait for a node: ``session.node(selected)`` made JSON-safe over the
    graph's fields; a session without ``node()`` gives only those. Open: a session may add keys
    (see ``DebugSession.node``), so the view reads each key it knows and checks it."""

    id: int
    name: str
    kind: NodeKind
    label: str
    state: NodeState
    leaf_name: NotRequired[str]
    grads_in: NotRequired[list[Summary | None] | None]
    grads_out: NotRequired[list[Summary | None] | None]
    pending_buffer: NotRequired[list[Summary | None] | None]


class ModuleParameter(TypedDict):
    """A named leaf of a module inspection; ``grad``: what its AccumulateGrad received."""

    id: int
    name: str
    grad: Summary | None


class ModuleInspection(TypedDict):
    """The ``inspection`` trait while ``selected_module`` is set."""

    module: str
    type: str
    count: int
    calls: int
    states: dict[str, int]
    parameters: list[ModuleParameter]


class Overlay(TypedDict):
    """One entry of the ``overlays`` trait; values keyed by decimal node id, edges by
    ``"source:target:input_nr:k"``; null until some view asked for a built-in's values."""

    kind: Literal["continuous", "categorical", "boolean"]
    scale: Literal["linear", "log"]
    builtin: bool
    title: str
    description: str
    values: dict[str, float | str | bool] | None
    edges: dict[str, float | str | bool] | None


class DoctorChecking(TypedDict):
    """The ``doctor`` trait while a check runs."""

    run: int
    state: Literal["checking"]
    report: None
    error: None


class DoctorDone(TypedDict):
    """The ``doctor`` trait after a check: ``report`` is ``json_safe(DoctorReport.to_dict())``
    (``docs/widget_protocol.md``, ``DoctorReport``)."""

    run: int
    state: Literal["done"]
    report: dict[str, object]
    error: None


class DoctorFailed(TypedDict):
    """The ``doctor`` trait after a check that raised: ``error`` is ``"Type: message"``."""

    run: int
    state: Literal["error"]
    report: None
    error: str


DoctorState = DoctorChecking | DoctorDone | DoctorFailed


class DiffCounts(TypedDict):
    """How many nodes the two passes matched, how many of those differ, how many are one side's only."""

    pairs: int
    differ: int
    only_a: int
    only_b: int


class DiffDifference(TypedDict):
    """A matched node whose gradients differ (``node``: its id in trace a, whose graph is drawn);
    ``max_relative``: the largest relative gap of its statistics; at most three ``reasons``."""

    node: int
    key: str
    max_relative: Number
    reasons: list[str]


class DiffOnly(TypedDict):
    """A node of one pass without a partner in the other (``node``: its id in its own trace)."""

    node: int
    key: str


class DiffData(TypedDict):
    """The ``diff`` trait of a diff view (null otherwise): what its panel lists
    (``gradviz/widget/_diff_view.py``, ``diff_trait``); the lists are cut at ``DIFF_LIST_LIMIT``."""

    a: str
    b: str
    overlay: str | None
    summary: str
    counts: DiffCounts
    differences: list[DiffDifference]
    only_a: list[DiffOnly]
    only_b: list[DiffOnly]


# ---- Python -> browser messages ---------------------------------------------------------------

class AckMessage(TypedDict):
    """The answer to every well-formed command (and module select or overlay request)."""

    type: Literal["ack"]
    name: str
    ok: bool
    reason: str | None


class ErrorReply(TypedDict):
    """The reply to a malformed message: no command ran."""

    type: Literal["error"]
    reason: str


class ProgressMessage(TypedDict):
    """Check gradients' progress, at most ten a second (the last one always)."""

    type: Literal["progress"]
    name: Literal["check_gradients"]
    done: int
    total: int
    label: str


class StatesDelta(TypedDict):
    """A Step's node states (protocol 6): the states that changed and the gradient deliveries
    (``[source, target]`` pairs) added since delta ``seq - 1`` (Note [States on the wire])."""

    type: Literal["states_delta"]
    seq: int
    states: dict[str, NodeState]
    delivered: list[list[int]]


# ---- browser -> Python messages ---------------------------------------------------------------

class PlainCommand(TypedDict):
    """A toolbar command without an argument."""

    type: Literal["command"]
    name: Literal["step", "step_event", "continue", "step_back", "abort", "check_gradients"]


class RunToCommand(TypedDict):
    """Run to the node (the view sends the selected one)."""

    type: Literal["command"]
    name: Literal["run_to"]
    node: int


class SelectCommand(TypedDict):
    """Show a node in the inspector (null: none)."""

    type: Literal["command"]
    name: Literal["select"]
    node: int | None


class SeekCommand(TypedDict):
    """Show the first ``position`` events of a replay."""

    type: Literal["command"]
    name: Literal["seek"]
    position: int


class ModuleSelect(TypedDict):
    """Show a module in the inspector (a folded box's click; null: none)."""

    type: Literal["select"]
    module: str | None


class OverlayRequest(TypedDict):
    """This view's picker shows this overlay: send its values."""

    type: Literal["overlay"]
    name: str | None


class ResyncRequest(TypedDict):
    """This view's copy of the states missed a delta: send them whole."""

    type: Literal["resync"]


CommandMessage = PlainCommand | RunToCommand | SelectCommand | SeekCommand
PanelMessage = ModuleSelect | OverlayRequest

# What the TypeScript file holds, in order: (name, definition). Aliases of unions and literals
# become `type`s, TypedDicts `interface`s.
_ALIASES: dict[str, object] = {
    "NodeState": NodeState, "NodeKind": NodeKind, "SessionStatus": SessionStatus,
    "CommandName": CommandName, "Number": Number,
}
_INTERFACES: tuple[type, ...] = (
    ModuleFields, GraphNode, GraphEdge, Graph, EventLine, History, Inspection, ModuleParameter, ModuleInspection,
    Overlay, DiffCounts, DiffDifference, DiffOnly, DiffData, DoctorChecking, DoctorDone, DoctorFailed,
    AckMessage, ErrorReply, ProgressMessage, StatesDelta,
    PlainCommand, RunToCommand, SelectCommand, SeekCommand, ModuleSelect, OverlayRequest, ResyncRequest,
)
_UNIONS: dict[str, object] = {
    "DoctorState": DoctorState, "CommandMessage": CommandMessage, "PanelMessage": PanelMessage,
}
# Literal lists the view also needs at run time (to check a value from the wire).
_CONSTANTS: dict[str, object] = {
    "NODE_STATES": NodeState, "NODE_KINDS": NodeKind, "SESSION_STATUSES": SessionStatus,
    "COMMAND_NAMES": CommandName,
}
# Shapes a session may extend with keys of its own: the TypeScript interface is left open.
_OPEN = frozenset({"Inspection"})
# Types the generated file imports rather than defines.
_IMPORTED = {"Summary": "./events.js"}


# The first check of every parser of a trait or message, written once for all of them.
_RECORD_CHECK = [
    "/** A JSON object (not null, not an array): what every parser of a trait or message checks first. */",
    "export function isRecord(value: unknown): value is Record<string, unknown> {",
    '  return typeof value === "object" && value !== null && !Array.isArray(value);',
    "}",
    "",
]


def _literal_values(tp: object) -> tuple[object, ...]:
    if typing.get_origin(tp) is not Literal:
        raise TypeError(f"expected a Literal, got {tp!r}")
    return typing.get_args(tp)


def typescript() -> str:
    """The TypeScript types of the protocol (generated from these definitions, never edited)."""
    names = {id(value): name for name, value in {**_ALIASES, **_UNIONS}.items()}
    names[id(Summary)] = "Summary"
    out = [
        "// Generated from gradviz/widget/_protocol.py by",
        "// `python -m gradviz.widget.protocol`. Do not edit.",
        "",
    ]
    for name, module in _IMPORTED.items():
        out.append(f'import type {{ {name} }} from "{module}";')
    out.append("")
    for name, alias in _ALIASES.items():
        out.append(f"export type {name} = {_definition(alias, names)};")
    out.append("")
    for name, values in _CONSTANTS.items():
        literal = ", ".join(ts_literal(value) for value in _literal_values(values))
        out.append(f"export const {name} = [{literal}] as const;")
    out.append("")
    for interface in _INTERFACES:
        out.extend(ts_interface(interface.__name__, object_schema(interface, names),
                                open_keys=interface.__name__ in _OPEN))
        out.append("")
    for name, union in _UNIONS.items():
        out.append(f"export type {name} = {_definition(union, names)};")
    out.append("")
    out.extend(_shapes(names))
    out.extend(_RECORD_CHECK)
    return "\n".join(out)


def _shapes(names: dict[int, str]) -> list[str]:
    """``SHAPES``: each alias's and interface's JSON Schema, what ``payload.ts`` checks a value
    from the wire against (Note [Shapes at run time])."""
    shapes: dict[str, dict] = {}
    for name, alias in _ALIASES.items():
        shapes[name] = type_schema(alias, {key: value for key, value in names.items() if key != id(alias)})
    for interface in _INTERFACES:
        shape = object_schema(interface, names)
        shape.pop("description", None)
        if interface.__name__ in _OPEN:
            shape["additionalProperties"] = True
        shapes[interface.__name__] = shape
    lines = [
        "/** Each shape's JSON Schema (its fields' types, which are required), for payload.ts's checks. */",
        "export const SHAPES: { readonly [name: string]: unknown } = {",
    ]
    lines.extend(f"  {name}: {json.dumps(shape, separators=(', ', ': '))}," for name, shape in shapes.items())
    lines.extend(["};", ""])
    return lines


def _definition(tp: object, names: dict[int, str]) -> str:
    """The TypeScript of a named alias's own definition (not a reference to its name)."""
    own = {key: name for key, name in names.items() if key != id(tp)}
    return ts_type(type_schema(tp, own))


def main(argv: list[str] | None = None) -> int:
    """Print the generated TypeScript (``python -m gradviz.widget.protocol``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        sys.stderr.write("usage: python -m gradviz.widget.protocol\n")
        return 2
    sys.stdout.write(typescript())
    return 0


# A synced trait whose value has the shape T: traitlets types ``Dict()`` as ``dict`` without
# None and without a shape, so the widget casts each trait to the type of what it holds.
Synced = traitlets.TraitType[_Value, _Value]

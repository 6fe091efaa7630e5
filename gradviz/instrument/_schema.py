"""The event and trace schema, defined once as Python types.

Every event kind is a ``TypedDict`` below. :func:`json_schema` turns them into the JSON
Schema committed as ``docs/schema/trace.schema.json`` and :func:`typescript` into the types
committed as ``labextension/src/generated/events.ts``; tests check that both files equal what
these functions generate (regenerate with ``python -m gradviz.instrument.schema``). The
recorder builds exactly these dicts, and ``gradviz.load_trace`` validates a file against the
generated schema.

Note [Schema versions]
----------------------
``SCHEMA_VERSION`` changes whenever a field is added, removed or changes meaning; a trace file
carries the version it was written with, and loading refuses any other version. An
*optional* field (``NotRequired``) that files written before it simply lack is added within a
version: the graph nodes' ``leaf_name`` (an AccumulateGrad node's leaf tensor's name, as
``gradviz.debug.backward`` names it) came this way in version 2, and so did the module paths
(``module``, ``module_types``, ``module_call`` on graph nodes, ``module`` on ``node_created``).

Version 3: ``buffer_added`` carries the contribution (``grad``) and the slot's sum after it
(``sum``), and ``how`` may be ``written_by_backward``; ``prehook`` carries ``changed``;
``posthook`` carries ``before`` and ``changed``; every "before" (hooks, ``grad_accumulated``)
is the value before the engine or the hook changed it (versions 1 and 2 summarized a leaf's
``.grad`` after an in-place accumulation). Graph nodes carry ``number``, a small display
number per trace.
"""

from __future__ import annotations

import sys
import typing
from typing import Any, Literal, NotRequired, TypedDict

from .._typescript import object_schema, ts_interface, ts_literal, ts_type

__all__ = ["SCHEMA_VERSION", "TRACE_FORMAT", "EVENT_TYPES", "EVENT_KINDS", "json_schema",
           "typescript"]

SCHEMA_VERSION = 3
TRACE_FORMAT = "gradviz-trace"
SCHEMA_ID = f"https://gradviz.dev/schema/trace-v{SCHEMA_VERSION}.json"

# A number in a summary: non-finite values are written as strings (JSON has no NaN literal).
Number = float | Literal["nan", "inf", "-inf"]
NodeKind = Literal["builtin", "custom", "accumulate_grad"]


class Summary(TypedDict):
    """A tensor, summarized: statistics over its finite entries (null when there are none);
    ``values``: every entry of a tensor of at most 32 entries, else the first six."""

    shape: list[int]
    dtype: str
    numel: int
    nan: int
    inf: int
    min: Number | None
    max: Number | None
    mean: Number | None
    norm: Number | None
    values: list[Number]


class Edge(TypedDict):
    """``(node, input_nr)`` of ``next_functions``; ``node`` is null for an input without grad."""

    node: int | None
    input_nr: int


class OutputMeta(TypedDict):
    """What a node expects on one input slot (one forward output); dtype null: any dtype."""

    shape: list[int]
    dtype: str | None


class SavedInfo(TypedDict):
    """One tensor a node saved for backward."""

    slot: int
    label: str
    shape: list[int]
    dtype: str
    hooked: bool


class SourceLocation(TypedDict):
    """Where forward recorded the node: the first frame outside gradviz."""

    file: str
    line: int
    function: str
    code: str


class ExposedInput(TypedDict):
    input: int
    edge: int
    exposed: bool
    reason: str


class Base(TypedDict):
    """Fields of every event."""

    # Each event narrows ``kind`` to its Literal name; TypedDict fields are invariant for a
    # type checker, so the base says Any (the schema is built from the events, never from Base).
    kind: Any
    seq: int
    task: int | None
    node: int | None
    time: float
    text: str


class NodeCreated(Base):
    kind: Literal["node_created"]
    name: str
    node_kind: NodeKind
    edges: list[Edge]
    outputs: list[OutputMeta | None]
    needs_input_grad: list[bool]
    saved: list[SavedInfo]
    materialize_grads: bool
    dirty_outputs: list[int]
    non_differentiable_outputs: list[int]
    grad_dtypes: list[str | None] | None
    source: SourceLocation | None
    module: NotRequired[list[str]]  # the module path, outermost first, inside a module call


class SavedPacked(Base):
    kind: Literal["saved_packed"]
    slot: int
    label: str
    hook: str


class SavedUnpacked(Base):
    kind: Literal["saved_unpacked"]
    slot: int
    label: str
    hook: str


class BackwardStarted(Base):
    kind: Literal["backward_started"]
    roots: list[Edge]
    retain_graph: bool
    create_graph: bool
    inputs: list[int] | None
    dependencies: dict[str, int]


class BufferAdded(Base):
    """A gradient reached a pending node's input ``slot``; ``sum`` is the slot's value after
    it was added (the buffer as the node will receive it, if nothing else arrives).
    ``written_by_backward``: a custom backward added into an exposed buffer in place
    (``ctx.input_grad_buffers``), so ``grad`` is null and only the new ``sum`` is known."""

    kind: Literal["buffer_added"]
    slot: int
    producer: int
    how: Literal["stored", "accumulated_in_place", "accumulated_out_of_place",
                 "written_by_backward"]
    contribution: int
    grad: Summary | None
    sum: Summary | None


class NodeReady(Base):
    kind: Literal["node_ready"]
    name: str


class Prehook(Base):
    """A tensor pre-hook (``slot`` >= 0, one gradient) or a node pre-hook (``slot`` -1, all
    of them) ran. ``before`` is what the hook received, as it was before the hook ran;
    ``replaced``: the hook returned a value; ``changed``: the gradients differ afterwards
    (replaced, or modified in place)."""

    kind: Literal["prehook"]
    hook: str
    slot: int
    replaced: bool
    changed: bool
    before: list[Summary | None]
    after: list[Summary | None]


class Posthook(Base):
    """A node post-hook ran: ``before`` are the node's results as the hook received them,
    ``grad_inputs`` what the node hands on after it."""

    kind: Literal["posthook"]
    hook: str
    replaced: bool
    changed: bool
    before: list[Summary | None]
    grad_inputs: list[Summary | None]


class GradCast(Base):
    kind: Literal["grad_cast"]
    slot: int
    from_dtype: str
    to_dtype: str


class GradReduced(Base):
    kind: Literal["grad_reduced"]
    slot: int
    from_shape: list[int]
    to_shape: list[int]


class GradsMaterialized(Base):
    kind: Literal["grads_materialized"]
    slots: list[int]


class BuffersExposed(Base):
    kind: Literal["buffers_exposed"]
    inputs: list[ExposedInput]


class NodeStarted(Base):
    kind: Literal["node_started"]
    name: str
    grads_in: list[Summary | None]


class NodeFinished(Base):
    kind: Literal["node_finished"]
    name: str
    grads_in: list[Summary | None]
    grads_out: list[Summary | None]
    duration: float


class GradAccumulated(Base):
    kind: Literal["grad_accumulated"]
    before: Summary | None
    after: Summary | None


class SavedReleased(Base):
    kind: Literal["saved_released"]
    count: int
    bytes: int


class BackwardFinished(Base):
    kind: Literal["backward_finished"]
    duration: float


class Error(Base):
    kind: Literal["error"]
    exception: str
    message: str
    traceback: list[str]


#: Every event type, in the order of docs/design.md's list ("Events").
EVENT_TYPES: tuple[type, ...] = (
    NodeCreated, SavedPacked, SavedUnpacked, BackwardStarted, BufferAdded, NodeReady, Prehook,
    Posthook, GradCast, GradReduced, GradsMaterialized, BuffersExposed, NodeStarted,
    NodeFinished, GradAccumulated, SavedReleased, BackwardFinished, Error,
)


def _kind_of(event_type) -> str:
    return typing.get_args(typing.get_type_hints(event_type)["kind"])[0]


EVENT_KINDS: tuple[str, ...] = tuple(_kind_of(t) for t in EVENT_TYPES)


class GraphNode(TypedDict):
    id: int
    name: str
    kind: NodeKind
    label: str
    number: NotRequired[int]     # small display number: 1, 2, ... in discovery order (0: GraphRoot)
    leaf_name: NotRequired[str]  # AccumulateGrad nodes only, when the leaf's name is known
    # Note [Module paths]: present on nodes built inside a module call or a scope block
    module: NotRequired[list[str]]        # the module path, outermost first
    module_types: NotRequired[list[str]]  # the class name at each level ("" for a scope)
    module_call: NotRequired[int]         # which application of the path (0 = first)


class GraphEdge(TypedDict):
    source: int
    target: int
    input_nr: int


class Graph(TypedDict):
    """Every node the trace's backward passes could reach (the union of their graphs)."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    roots: list[int]


class Trace(TypedDict):
    format: Literal["gradviz-trace"]
    schema_version: int
    gradviz_version: str
    graph: Graph
    events: list[dict]  # replaced by the union of the event types in the schema


# --------------------------------------------------------------------------------------
# Python types -> JSON Schema (gradviz/_typescript.py, shared with the widget protocol)
# --------------------------------------------------------------------------------------

_DEFINITIONS = (Summary, Edge, OutputMeta, SavedInfo, SourceLocation, ExposedInput, GraphNode,
                GraphEdge, Graph)


def _event_name(event_type) -> str:
    return event_type.__name__ + "Event"


def json_schema() -> dict:
    """The JSON Schema of a trace file; ``$defs/Event`` is the schema of one event."""
    definitions = {tp.__name__: object_schema(tp) for tp in _DEFINITIONS}
    for event_type in EVENT_TYPES:
        definitions[_event_name(event_type)] = object_schema(event_type)
    definitions["Event"] = {"anyOf": [{"$ref": f"#/$defs/{_event_name(t)}"} for t in EVENT_TYPES]}
    trace = object_schema(Trace, overrides={
        "schema_version": {"const": SCHEMA_VERSION},
        "events": {"type": "array", "items": {"$ref": "#/$defs/Event"}},
    })
    trace.pop("description", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"gradviz trace, schema version {SCHEMA_VERSION}",
        "description": ("A recorded backward pass: the graph and every engine event. "
                        "Generated by `python -m gradviz.instrument.schema`; do not edit."),
        **trace,
        "$defs": definitions,
    }


# --------------------------------------------------------------------------------------
# JSON Schema -> TypeScript (the emitter is gradviz/_typescript.py, shared with the widget)
# --------------------------------------------------------------------------------------

def typescript(schema: dict | None = None) -> str:
    """TypeScript types for the JSON Schema (generated from it, never edited by hand)."""
    schema = json_schema() if schema is None else schema
    out = [
        "// Generated from docs/schema/trace.schema.json by",
        "// `python -m gradviz.instrument.schema --typescript`. Do not edit.",
        "",
        f"export const SCHEMA_VERSION = {schema['properties']['schema_version']['const']};",
        "",
    ]
    definitions = schema["$defs"]
    for name, definition in definitions.items():
        if name == "Event":
            continue
        out.extend(ts_interface(name, definition))
        out.append("")
    union = " | ".join(ts_type(s) for s in definitions["Event"]["anyOf"])
    out.append(f"export type Event = {union};")
    out.append("")
    out.append('export type EventKind = Event["kind"];')
    out.append("")
    out.append("export const EVENT_KINDS: readonly EventKind[] = [")
    for ref in definitions["Event"]["anyOf"]:
        kind = definitions[ts_type(ref)]["properties"]["kind"]["const"]
        out.append(f"  {ts_literal(kind)},")
    out.append("];")
    out.append("")
    top = {key: schema[key] for key in ("properties", "required")}
    out.extend(ts_interface("Trace", top))
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import json

    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--typescript"]:
        sys.stdout.write(typescript())
    elif not argv:
        sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
    else:
        sys.stderr.write("usage: python -m gradviz.instrument.schema [--typescript]\n")
        return 2
    return 0

"""Checking untrusted trace data: its size before parsing, then the schema and the graph.

Note [Bounded cost of refusing a trace]
---------------------------------------
A hostile file under the byte limit can still be expensive: 64 MiB of ``[],[],...`` parses
into 21 million Python lists (1.4 GB), and a schema check walking millions of small integers
takes seconds. So loading refuses in three stages, each cheaper than the next:

1. *Before parsing*, :func:`check_structure` counts the JSON values the text can hold
   (arrays and objects by their opening bracket, every value by its separating comma; commas
   and brackets inside strings do not count) with C-speed byte counts, and refuses more than
   ``max_values`` values or ``max_containers`` arrays and objects. Parsed JSON costs at most
   about 72 bytes per array or object and 32 per other value, so the defaults bound the
   parsed data near 200 MB whatever the file holds.
2. *While checking*, :func:`check_trace` checks per-field counts that follow from the schema
   (a trace has no more roots than nodes, since roots are distinct nodes) before looking at
   any item, then checks the graph's nodes, edges and roots, then the events, one item at a
   time, schema and consistency together, so a file full of invalid items stops at the first.
3. Arrays of plain integers (``graph.roots``) are checked by a fast path of the validator.

A typical recorded trace spends about 17 bytes per JSON value and 85 per array or object, so
the defaults accept ordinary traces up to the 64 MiB byte limit; ``load_trace(path,
max_values=..., max_containers=...)`` reads a larger file one trusts.

Note [A trace's graph is a DAG]
-------------------------------
Edges go from a node to the node its gradient flows to (``next_functions``), so a backward
graph has no cycles: a cycle or a self-loop in a file would make a replay or the widget's
layout loop. Node ids are unique, every edge joins two nodes of the graph, and each root is a
distinct node; errors name the offending ids (for a cycle, the ids around it, in order).
"""

from __future__ import annotations

from ..errors import TraceFormatError
from ._schema import SCHEMA_VERSION, TRACE_FORMAT, json_schema
from ._validate import SchemaError, Validator

__all__ = ["MAX_TRACE_VALUES", "MAX_TRACE_CONTAINERS", "check_structure", "check_trace"]

#: The most JSON values (of any kind) :func:`gradviz.load_trace` parses unless told otherwise.
MAX_TRACE_VALUES = 4_000_000
#: The most JSON arrays and objects, together, it parses unless told otherwise.
MAX_TRACE_CONTAINERS = 1_000_000

_cache: list = []


def _validator() -> tuple[Validator, dict]:
    """The validator of the trace schema, and the trace's outline: the top-level schema with
    the graph's and the events' arrays left unchecked item by item."""
    if not _cache:
        schema = json_schema()
        validator = Validator(schema)
        outline = {key: value for key, value in schema.items() if key != "$defs"}
        properties = dict(outline["properties"])
        properties["events"] = {"type": "array"}
        graph = dict(validator.resolve(properties["graph"]["$ref"]))
        graph["properties"] = {key: {"type": "array"} for key in graph["properties"]}
        properties["graph"] = graph
        outline["properties"] = properties
        _cache.append((validator, outline))
    return _cache[0]


def _count(text) -> tuple[int, int]:
    """``(containers, values)`` of JSON ``text`` (bytes or str): arrays and objects, and an
    upper bound on the number of values (every value but the first follows a comma or opens
    a container's first element)."""
    if isinstance(text, bytes):
        containers, commas = text.count(b"[") + text.count(b"{"), text.count(b",")
    else:
        containers, commas = text.count("[") + text.count("{"), text.count(",")
    return containers, containers + commas + 1


def check_structure(text, max_values: int = MAX_TRACE_VALUES,
                    max_containers: int = MAX_TRACE_CONTAINERS) -> None:
    """Raise TraceFormatError if the JSON ``text`` (bytes or str) holds more values or more
    arrays and objects than the limits, before it is parsed (Note [Bounded cost of refusing a
    trace])."""
    containers, values = _count(text)
    if containers > max_containers:
        raise TraceFormatError(
            f"the trace holds up to {containers} JSON arrays and objects, more than the limit "
            f"of {max_containers}; pass max_containers= to load_trace to read a larger file "
            "you trust")
    if values > max_values:
        raise TraceFormatError(
            f"the trace holds up to {values} JSON values, more than the limit of {max_values}; "
            "pass max_values= to load_trace to read a larger file you trust")


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
    validator, outline = _validator()
    try:
        # the outline first (fields and their kinds), then every item, in file order
        validator.check(outline, data, "")
        graph = data["graph"]
        _check_counts(graph)
        ids = _check_nodes(validator, graph["nodes"])
        _check_edges(validator, graph["edges"], ids)
        _check_roots(validator, graph["roots"], ids)
        _check_acyclic(graph["nodes"], graph["edges"])
        _check_events(validator, data["events"], ids)
    except SchemaError as exc:
        raise TraceFormatError(f"the trace does not match the schema: {exc}") from None
    except RecursionError:
        raise TraceFormatError("the trace is nested too deeply to be a gradviz trace") from None


def _check_counts(graph) -> None:
    if len(graph["roots"]) > len(graph["nodes"]):
        raise TraceFormatError(
            f"graph.roots has {len(graph['roots'])} entries but graph.nodes only "
            f"{len(graph['nodes'])}: each root is a distinct node of the graph")


def _check_nodes(validator, nodes) -> set:
    first: dict[int, int] = {}
    for index, node in enumerate(nodes):
        validator.check_definition("GraphNode", node, f"graph.nodes[{index}]")
        node_id = node["id"]
        if node_id < 0:
            raise TraceFormatError(f"graph.nodes[{index}].id must be >= 0, got {node_id}")
        if node_id in first:
            raise TraceFormatError(
                f"graph.nodes[{index}].id {node_id} is used twice (also by "
                f"graph.nodes[{first[node_id]}]); node ids are unique")
        first[node_id] = index
    return set(first)


def _check_edges(validator, edges, ids) -> None:
    for index, edge in enumerate(edges):
        where = f"graph.edges[{index}]"
        validator.check_definition("GraphEdge", edge, where)
        for key in ("source", "target"):
            if edge[key] not in ids:
                raise TraceFormatError(
                    f"{where}.{key} is {edge[key]}, which is not a node of the graph")
        if edge["source"] == edge["target"]:
            raise TraceFormatError(
                f"{where} joins node {edge['source']} to itself: a backward graph has no "
                "self-loops or cycles")
        if edge["input_nr"] < 0:
            raise TraceFormatError(f"{where}.input_nr must be >= 0")


def _check_roots(validator, roots, ids) -> None:
    validator.check(validator.resolve("#/$defs/Graph")["properties"]["roots"], roots, "graph.roots")
    seen: set[int] = set()
    for index, root in enumerate(roots):
        if root not in ids:
            raise TraceFormatError(f"graph.roots[{index}] is {root}, which is not a node of the graph")
        if root in seen:
            raise TraceFormatError(f"graph.roots[{index}] repeats the root {root}; roots are distinct")
        seen.add(root)


def _check_acyclic(nodes, edges) -> None:
    """Refuse a cycle, naming its node ids in order (Note [A trace's graph is a DAG])."""
    successors: dict[int, list[int]] = {node["id"]: [] for node in nodes}
    pending = dict.fromkeys(successors, 0)  # edges into a node not yet removed
    for edge in edges:
        successors[edge["source"]].append(edge["target"])
        pending[edge["target"]] += 1
    ready = [node for node, count in pending.items() if count == 0]
    removed = 0
    while ready:
        node = ready.pop()
        removed += 1
        for target in successors[node]:
            pending[target] -= 1
            if pending[target] == 0:
                ready.append(target)
    if removed == len(pending):
        return
    # Every node left has an edge from another node left: walk those edges backwards until
    # a node repeats; the walk between the repeats is a cycle.
    left = {node for node, count in pending.items() if count > 0}
    predecessor: dict = {}
    for edge in edges:
        if edge["source"] in left and edge["target"] in left:
            predecessor.setdefault(edge["target"], edge["source"])
    node = min(left)
    order: dict[int, int] = {}
    while node not in order:
        order[node] = len(order)
        node = predecessor[node]
    walk = list(order)[order[node]:]
    cycle = [*reversed(walk)]
    first = cycle.index(min(cycle))
    cycle = cycle[first:] + cycle[:first]  # from its smallest id, so the message is stable
    path = " -> ".join(str(n) for n in [*cycle, cycle[0]])
    raise TraceFormatError(
        f"graph.edges form a cycle through the nodes {path}: a backward graph has no cycles")


def _check_events(validator, events, ids) -> None:
    known = set(ids)
    for index, event in enumerate(events):
        where = f"events[{index}]"
        validator.check_definition("Event", event, where)
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

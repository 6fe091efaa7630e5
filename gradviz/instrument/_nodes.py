"""What the instrumentation reads off a live graph node (for ``node_created`` and the graph).

Only public node attributes and the fields the forward code documents for this purpose
(``needs_input_grad``, saved tensors, ``_dirty_outputs``...) are read; nothing here runs
unless an observer asked for it.
"""

from __future__ import annotations

import linecache
import os
import sys

from gradviz_ext import engine as _engine

from ..dtypes import from_numpy

__all__ = ["saved_tensors_of", "describe_node", "walk_graph", "node_created_payload",
           "forward_source"]

_GRADVIZ_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (os.path.dirname(os.path.abspath(__file__)),  # gradviz/
                 _engine.source_path()))                       # gradviz_ext/


def saved_tensors_of(node) -> list:
    """``(label, SavedTensor)`` for each tensor ``node`` holds for backward, in slot order.

    Labels: ``"saved_tensors[i]"`` for a custom Function, ``"input i"`` and ``"output"`` for a
    built-in op. Released tensors are no longer listed.
    """
    found = []
    saved = getattr(node, "_saved", None)
    if isinstance(saved, (list, tuple)):
        for index, item in enumerate(saved):
            if isinstance(item, _engine.SavedTensor):
                found.append((f"saved_tensors[{index}]", item))
    inputs = getattr(node, "_saved_inputs", None)
    if isinstance(inputs, dict):
        for index in sorted(inputs):
            item = inputs[index]
            if isinstance(item, _engine.SavedTensor):
                found.append((f"input {index}", item))
    output = getattr(node, "_saved_output", None)
    if isinstance(output, _engine.SavedTensor):
        found.append(("output", output))
    return found


def saved_array(saved):
    """The array a SavedTensor refers to, or None (released, or packed by a hook)."""
    if saved._tensor is not None:
        return saved._tensor._data
    return saved._data


def _saved_info(slot, label, saved) -> dict:
    data = saved_array(saved)
    if data is not None:
        shape, dtype = list(data.shape), _dtype_name(data.dtype)
    else:
        shape, dtype = [], "unknown"
    return {"slot": slot, "label": label, "shape": shape, "dtype": dtype,
            "hooked": bool(saved._has_hooks)}


def _dtype_name(numpy_dtype) -> str:
    try:
        return from_numpy(numpy_dtype).name
    except Exception:  # not a gradviz dtype: say what numpy calls it
        return str(numpy_dtype)


def describe_node(node) -> dict:
    """The node as a graph drawing needs it; ``label`` carries what the name does not say."""
    kind = node._kind()
    label = ""
    if kind == "accumulate_grad":
        variable = node.variable
        label = f"{list(variable._data.shape)} {variable.dtype.name}"
    elif node.num_inputs:
        meta = node.input_metadata(0)
        if meta is not None:
            label = f"{list(meta.shape)}"
    return {"id": node.node_id, "name": node.name(), "kind": kind, "label": label}


def walk_graph(root, include_graph_root=False):
    """``(nodes, edges, roots, live)`` reachable from ``root``, iteratively.

    ``nodes`` maps id to :func:`describe_node` and ``live`` maps id to the node object. The
    engine's ``GraphRoot`` (several roots) is left out unless ``include_graph_root``: it is not
    part of the user's graph (torch hides it too), but a trace needs it because it runs.
    """
    nodes: dict[int, dict] = {}
    live: dict[int, object] = {}
    edges: list[dict] = []
    if isinstance(root, _engine.GraphRoot) and not include_graph_root:
        starts = [n for n, _ in root.next_functions if n is not None]
    else:
        starts = [root]
    roots = []
    stack = []
    for node in starts:
        if node.node_id not in nodes:
            nodes[node.node_id] = describe_node(node)
            live[node.node_id] = node
            roots.append(node.node_id)
            stack.append(node)
    while stack:
        node = stack.pop()
        for next_node, input_nr in node.next_functions:
            if next_node is None:
                continue
            edges.append({"source": node.node_id, "target": next_node.node_id,
                          "input_nr": input_nr})
            if next_node.node_id not in nodes:
                nodes[next_node.node_id] = describe_node(next_node)
                live[next_node.node_id] = next_node
                stack.append(next_node)
    return nodes, edges, roots, live


def _meta(meta) -> dict | None:
    if meta is None:
        return None
    return {"shape": list(meta.shape), "dtype": None if meta.dtype is None else meta.dtype.name}


def node_created_payload(node) -> dict:
    """The payload of a ``node_created`` event (see ``_schema.NodeCreated``)."""
    kind = node._kind()
    needs = getattr(node, "needs_input_grad", None)
    if needs is None:
        needs = tuple(n is not None for n, _ in node.next_functions)
    declared = getattr(node, "_output_grad_dtypes", None)
    return {
        "name": node.name(),
        "node_kind": kind,
        "edges": [{"node": None if n is None else n.node_id, "input_nr": nr}
                  for n, nr in node.next_functions],
        "outputs": [_meta(node.input_metadata(slot)) for slot in range(node.num_inputs)],
        "needs_input_grad": [bool(flag) for flag in needs],
        "saved": [_saved_info(slot, label, saved)
                  for slot, (label, saved) in enumerate(saved_tensors_of(node))],
        "materialize_grads": bool(node._materializes_grads()),
        "dirty_outputs": list(getattr(node, "_dirty_outputs", ())),
        "non_differentiable_outputs": list(getattr(node, "_non_differentiable_outputs", ())),
        "grad_dtypes": None if declared is None else [
            None if dtype is None else dtype.name for dtype in declared],
        "source": forward_source(),
    }


def forward_source() -> dict | None:
    """The first frame outside gradviz on the current stack (the user's forward line).

    Only called by observers, so a forward without observers pays nothing for it.
    """
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith("<") or not os.path.abspath(filename).startswith(_GRADVIZ_DIRS):
            line = frame.f_lineno
            code = linecache.getline(filename, line).strip()
            return {"file": filename, "line": line, "function": frame.f_code.co_name,
                    "code": code}
        frame = frame.f_back
    return None

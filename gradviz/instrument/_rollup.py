"""Roll-up: a graph's nodes grouped by module, for drawing a model folded.

:func:`rollup` is a pure function of a graph dict (``session.graph()``, ``trace.graph``, a
loaded trace file's ``graph``) whose nodes carry ``module`` paths (Note [Module paths] in
``gradviz/autograd/_scopes.py``); it reads nothing else, so a front end or a saved trace can
use it as is.

Note [Fold depth]
-----------------
At fold depth ``d`` the modules whose path has ``d`` names are drawn as one box each, with
everything inside them folded; shallower modules are open, and nodes outside every module
are drawn as they are. A module applied N times (an RNN cell) is one box marked ``(xN)``:
its applications roll up. So the boxes at depth ``d`` are the nodes whose path is shorter
than ``d`` (or absent) plus the distinct paths of length ``d`` that hold nodes.
``fold_depth`` is the deepest ``d`` at which that count is at most ``max_boxes``; None when
the whole graph fits expanded (nothing to fold), 0 when even the model folded to one box
per top-level path does not fit (the front end then rolls up more, e.g. the instance
``groups``).
"""

from __future__ import annotations

__all__ = ["rollup", "DEFAULT_MAX_BOXES"]

#: About as many boxes as a first view can show legibly.
DEFAULT_MAX_BOXES = 150


def rollup(graph: dict, max_boxes: int = DEFAULT_MAX_BOXES, states: dict | None = None) -> dict:
    """Group the nodes of ``graph`` by module path.

    Returns a dict:

    * ``modules``: one entry per module path that holds nodes (directly or below it), outermost
      first: ``path`` (list of names), ``name`` (the dotted path, ``""`` for the model),
      ``type`` (class name, ``""`` for a ``scope`` block or unknown), ``depth``,
      ``nodes`` (ids of every node inside, sub-modules included), ``own_nodes`` (ids whose path
      is exactly this one), ``count`` (``len(nodes)``), ``calls`` (how many times it was
      applied: the ``(xN)`` of an unrolled cell; 1 for a single call), ``children`` (the
      dotted names of the modules right below it), ``parameters`` (``{"id", "name"}`` of the
      named leaves it owns, for an inspector to list with their gradients) and, when
      ``states`` (``session.node_states()``) is given, ``states`` (how many of its nodes are
      in each state: ``done``, ``running``, ``error``...).
    * ``groups``: distinct instances of one class under one parent with index names
      (``blocks.0`` ... ``blocks.11``): ``parent`` (dotted), ``type``, ``members`` (dotted,
      in index order) and ``label`` (``"+11 more Block"``, for the first member's box).
    * ``outside``: ids of the nodes outside every module.
    * ``boxes``: the box count at each fold depth 0 .. ``max_depth`` (Note [Fold depth]),
      and ``max_depth``.
    * ``fold_depth``: the default fold depth for ``max_boxes`` (Note [Fold depth]).

    Examples
    --------
    >>> import gradviz as torch
    >>> model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(4)])
    >>> graph = torch.debug.backward(model(torch.ones(1, 2)).sum()).graph()
    >>> summary = torch.debug.rollup(graph, max_boxes=10)
    >>> [(m["name"], m["type"], m["count"]) for m in summary["modules"][:3]]
    [('', '', 16), ('0', 'Linear', 4), ('1', 'Linear', 4)]
    >>> [g["label"] for g in summary["groups"]], summary["boxes"], summary["fold_depth"]
    (['+3 more Linear'], [2, 5], 1)
    """
    if isinstance(max_boxes, bool) or not isinstance(max_boxes, int) or max_boxes < 1:
        raise ValueError(f"rollup(max_boxes=...) must be a positive int, got {max_boxes!r}")
    modules: dict[tuple, dict] = {}
    outside: list[int] = []
    calls_of: dict[tuple, set] = {}
    for node in graph["nodes"]:
        path = node.get("module")
        if path is None:
            outside.append(node["id"])
            continue
        path = tuple(path)
        types = node.get("module_types") or ()
        for depth in range(len(path) + 1):
            prefix = path[:depth]
            entry = modules.get(prefix)
            if entry is None:
                entry = modules[prefix] = {
                    "path": list(prefix), "name": ".".join(prefix),
                    "type": types[depth - 1] if 0 < depth <= len(types) else "",
                    "depth": depth, "nodes": [], "own_nodes": [], "count": 0, "calls": 1,
                    "children": [], "parameters": []}
                if states is not None:
                    entry["states"] = {}
            elif not entry["type"] and 0 < depth <= len(types):
                entry["type"] = types[depth - 1]
            entry["nodes"].append(node["id"])
            if states is not None:
                state = states.get(node["id"], "pending")
                entry["states"][state] = entry["states"].get(state, 0) + 1
        modules[path]["own_nodes"].append(node["id"])
        if node["kind"] == "accumulate_grad" and "leaf_name" in node:
            modules[path]["parameters"].append({"id": node["id"], "name": node["leaf_name"]})
        if "module_call" in node:
            calls_of.setdefault(path, set()).add(node["module_call"])
    ordered = sorted(modules, key=lambda p: (len(p), p))
    children: dict[tuple, list] = {path: [] for path in modules}
    for path in ordered:
        entry = modules[path]
        entry["count"] = len(entry["nodes"])
        if path:
            children[path[:-1]].append(path)
            modules[path[:-1]]["children"].append(entry["name"])
    # a module's applications: those of its own nodes, else its busiest child's
    for path in sorted(modules, key=len, reverse=True):
        own = calls_of.get(path)
        modules[path]["calls"] = len(own) if own else max(
            (modules[child]["calls"] for child in children[path]), default=1)
    max_depth = max((len(p) for p in modules), default=0)
    boxes = [_boxes(modules, outside, depth) for depth in range(max_depth + 1)]
    fits = [depth for depth, count in enumerate(boxes) if count <= max_boxes]
    total = len(graph["nodes"])
    if total <= max_boxes:
        fold_depth = None
    else:
        fold_depth = max(fits) if fits else 0
    return {"modules": [modules[p] for p in ordered], "groups": _groups(modules),
            "outside": outside, "boxes": boxes, "max_depth": max_depth,
            "fold_depth": fold_depth}


def _boxes(modules: dict, outside: list, depth: int) -> int:
    """The boxes drawn at fold depth ``depth`` (Note [Fold depth])."""
    count = len(outside)
    for path, entry in modules.items():
        if len(path) < depth:
            count += len(entry["own_nodes"])
        elif len(path) == depth:
            count += 1
    return count


def _groups(modules: dict) -> list:
    """Index-named siblings of one class under one parent (``blocks.0..11``)."""
    by_parent: dict[tuple, list] = {}
    for path, entry in modules.items():
        if path and path[-1].isdigit():
            key = (path[:-1], entry["type"])
            by_parent.setdefault(key, []).append(path)
    groups = []
    for (parent, type_name), members in sorted(by_parent.items()):
        if len(members) < 2 or not type_name:
            continue
        members.sort(key=lambda p: int(p[-1]))
        groups.append({"parent": ".".join(parent), "type": type_name,
                       "members": [".".join(p) for p in members],
                       "label": f"+{len(members) - 1} more {type_name}"})
    return groups

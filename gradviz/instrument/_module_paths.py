"""Module paths and parameter names of graph nodes, read from the frames forward left on them.

``walk_graph`` calls :func:`annotate_modules` once per graph it walks: each node built inside a
module call or a ``gradviz.debug.scope`` block gets

* ``module``: the module path, a list of names outermost first (``["blocks", "3", "mlp",
  "0"]``; ``[]`` for the nodes the model's own ``forward`` created). Absent outside every
  module.
* ``module_types``: the class name of the module at each level of ``module`` (``""`` for a
  user scope), for roll-up labels (``+11 more Block``).
* ``module_call``: which application of that path built the node, 0 for the first (an RNN
  cell applied 150 times gives 0..149). Absent on ``AccumulateGrad`` nodes: a leaf belongs to
  every application.

An ``AccumulateGrad`` node of a module's parameter is placed in the module that *owns* the
parameter and named after it (``leaf_name``: ``"blocks.3.mlp.0.weight"``), whichever module
used it first; other leaves stay in the module whose call first used them (Note [Module paths]
in ``gradviz/autograd/_scopes.py`` says how paths are found).
"""

from __future__ import annotations

from typing import Any

from ..autograd._scopes import frame_path, frame_types, node_frame

__all__ = ["annotate_modules", "module_parameters", "module_path", "named_modules"]


def module_path(node) -> tuple | None:
    """The module path of a live graph node (a tuple of names, outermost first), or None when
    it was created outside every module call and ``scope`` block.

    Examples
    --------
    >>> import gradviz as torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    >>> y = model(torch.ones(1, 2))
    >>> torch.debug.module_path(y.grad_fn)
    ('1',)
    """
    frame = node_frame(node)
    return None if frame is None else frame_path(frame)


def _outermost_frames(frames) -> list:
    """The distinct outermost frames above ``frames`` (the models that ran)."""
    found = {}
    for frame in frames:
        while frame.parent is not None:
            frame = frame.parent
        found[id(frame)] = frame
    return list(found.values())


def module_parameters(frames) -> dict:
    """``{id(parameter): (parameter, name, owner path, owner types)}`` for every parameter of
    the modules whose calls left ``frames``: named from the outermost module of each frame
    chain, as its ``named_parameters()`` names them (plus the path of a user scope around it).
    A parameter already named by an earlier frame keeps that name."""
    names: dict[int, tuple] = {}
    for root in _outermost_frames(frames):
        module = root.module
        if module is None:  # a user scope outermost: the modules below it are the models
            continue
        prefix, prefix_types = frame_path(root), frame_types(root)
        for owner_names, owner_types, owner in named_modules(module):
            for key, parameter in owner.__dict__.get("_parameters", {}).items():
                if parameter is None or id(parameter) in names:
                    continue
                path = prefix + owner_names
                names[id(parameter)] = (parameter, ".".join(path + (str(key),)), path,
                                        prefix_types + owner_types)
    return names


def named_modules(module):
    """``(names, class names, module)`` for ``module`` and every module below it, in the
    order of ``named_modules()`` (depth first, registration order, a module registered twice
    only at its first place), iteratively: a deep ``Sequential`` must not hit the recursion
    limit."""
    stack: list[tuple[tuple[str, ...], tuple[str, ...], Any]] = [((), (), module)]
    seen = set()
    while stack:
        names, classes, current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield names, classes, current
        children = [(names + (str(key),), classes + (type(child).__name__,), child)
                    for key, child in current.__dict__.get("_modules", {}).items()
                    if child is not None]
        stack.extend(reversed(children))


def annotate_modules(nodes: dict, live: dict) -> None:
    """Add ``module``, ``module_types``, ``module_call`` and (parameters) ``leaf_name`` to the
    node dicts of ``nodes`` (from ``walk_graph``; ``live`` maps the same ids to the nodes)."""
    frames = {}
    for node_id, node in live.items():
        frame = node_frame(node)
        if frame is not None:
            frames[node_id] = frame
    if not frames:
        return
    parameters = module_parameters(frames.values())
    # Note [Module paths]: the k-th call of a path is the k-th frame of it to create a node.
    # Per distinct frame (a module call; a GPT step has ~20 for ~140 nodes): its first node,
    # path and class names.
    first_node: dict[int, int] = {}
    resolved: dict[int, tuple] = {}
    for node_id, frame in frames.items():
        key = id(frame)
        first = first_node.get(key)
        if first is None:
            first_node[key] = node_id
            resolved[key] = (frame_path(frame), frame_types(frame))
        elif node_id < first:
            first_node[key] = node_id
    calls_of_path: dict[tuple, list] = {}
    for key, node_id in first_node.items():
        calls_of_path.setdefault(resolved[key][0], []).append((node_id, key))
    call_number = {}
    for entries in calls_of_path.values():
        entries.sort()
        for number, (_, key) in enumerate(entries):
            call_number[key] = number
    for node_id, frame in frames.items():
        info = nodes[node_id]
        key = id(frame)
        path, types = resolved[key]
        info["module"] = list(path)
        info["module_types"] = list(types)
        if info["kind"] != "accumulate_grad":
            info["module_call"] = call_number[key]
    for node_id, node in live.items():  # a parameter belongs to its module, whoever used it
        if nodes[node_id]["kind"] != "accumulate_grad":
            continue
        owned = parameters.get(id(node.variable))
        if owned is not None and owned[0] is node.variable:
            info = nodes[node_id]
            info["module"] = list(owned[2])
            info["module_types"] = list(owned[3])
            info["leaf_name"] = owned[1]

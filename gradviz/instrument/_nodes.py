"""What the instrumentation reads off a live graph node (for ``node_created`` and the graph).

Only public node attributes and the fields the forward code documents for this purpose
(``needs_input_grad``, saved tensors, ``_dirty_outputs``...) are read; nothing here runs
unless an observer asked for it.
"""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Mapping
from types import FrameType

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ops

from .._tensor import Tensor
from ..autograd._scopes import frame_path
from ..dtypes import from_numpy
from ._module_paths import annotate_modules

__all__ = ["saved_tensors_of", "saved_details", "describe_node", "walk_graph", "traverse_graph",
           "describe_graph", "node_created_payload", "fill_node_created", "node_created_fields",
           "node_module",
           "forward_source", "forward_line", "source_text", "user_frame", "parameter_names",
           "frame_leaf_names", "name_leaves"]

_GRADVIZ_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (os.path.dirname(os.path.abspath(__file__)),  # gradviz/
                 _engine.source_path()))                       # gradviz_ext/


# Note [Attributes of Function nodes]
# -----------------------------------
# A custom Function's node has attributes no built-in node has (``_saved``,
# ``_dirty_outputs``, ``_output_grad_dtypes``...); reading one from a built-in node with a
# default (``getattr(node, name, None)``) raises and catches an AttributeError inside, about
# 0.7 us each, four per node for every ``node_created`` and graph walk: a fifth of what
# recording a GPT forward cost. The engine's own node types are known not to have them.
_OP_NODE = _ops.OpNode
_ENGINE_NODES = (_engine.AccumulateGrad, _engine.GraphRoot)  # no saved tensors either
_BUILTIN_NODES = (_ops.OpNode, _engine.AccumulateGrad, _engine.GraphRoot)
_SAVED_TENSOR = _engine.SavedTensor


def saved_tensors_of(node) -> list:
    """``(label, SavedTensor)`` for each tensor ``node`` holds for backward, in slot order.

    Labels: ``"saved_tensors[i]"`` for a custom Function, ``"input i"`` and ``"output"`` for a
    built-in op. Released tensors are no longer listed.
    """
    if isinstance(node, _ENGINE_NODES):
        return []
    if isinstance(node, _OP_NODE):
        return _op_saved(node)
    found = []
    saved = getattr(node, "_saved", None)
    if isinstance(saved, (list, tuple)):
        for index, item in enumerate(saved):
            if isinstance(item, _SAVED_TENSOR):
                found.append((f"saved_tensors[{index}]", item))
    inputs = getattr(node, "_saved_inputs", None)
    if isinstance(inputs, dict):
        for index in sorted(inputs):
            item = inputs[index]
            if isinstance(item, _SAVED_TENSOR):
                found.append((f"input {index}", item))
    output = getattr(node, "_saved_output", None)
    if isinstance(output, _SAVED_TENSOR):
        found.append(("output", output))
    return found


def _op_saved(node) -> list:
    """:func:`saved_tensors_of` for a built-in op's node, read off its fields: the saved inputs
    in input order (``_kept_inputs``, a tuple by input index, Note [Compact nodes] in
    ``_ops.py``), then the saved output. Most ops of a graph saved nothing."""
    kept = node._kept_inputs
    output = node._saved_output
    if kept is None and output is None:
        return []  # most of a graph's ops (a debug session reads every node at its start)
    found = []
    if kept is not None:
        for index, item in enumerate(kept):
            if isinstance(item, _SAVED_TENSOR):
                found.append((_INPUT_LABELS[index] if index < len(_INPUT_LABELS)
                              else f"input {index}", item))
    if output is not None:
        found.append(("output", output))
    return found


def _op_saved_infos(kept, output) -> list:
    """The ``saved`` entries of a built-in op's node from its ``_kept_inputs`` and
    ``_saved_output`` (not both None), as :func:`_op_saved` lists them."""
    infos: list[dict] = []
    if kept is not None:
        for index, item in enumerate(kept):
            if isinstance(item, _SAVED_TENSOR):
                infos.append(_saved_info(len(infos), _INPUT_LABELS[index]
                                         if index < len(_INPUT_LABELS) else f"input {index}", item))
    if output is not None:
        infos.append(_saved_info(len(infos), "output", output))
    return infos


_INPUT_LABELS = tuple(f"input {index}" for index in range(8))


def saved_array(saved):
    """The array a SavedTensor refers to, or None (released, or packed by a hook)."""
    if saved._tensor is not None:
        return saved._tensor._data
    return saved._data


def _saved_info(slot, label, saved) -> dict:
    tensor = saved._tensor  # saved_array(saved), inline: every saved tensor of a recorded op
    data = tensor._data if tensor is not None else saved._data
    if data is not None:
        dtype = _DTYPE_NAMES.get(data.dtype)
        shape, dtype = list(data.shape), dtype if dtype is not None else _dtype_name(data.dtype)
    else:
        shape, dtype = [], "unknown"
    return {"slot": slot, "label": label, "shape": shape, "dtype": dtype,
            "hooked": bool(saved._has_hooks)}


def _dtype_name(numpy_dtype) -> str:
    name = _DTYPE_NAMES.get(numpy_dtype)
    if name is None:
        try:
            name = from_numpy(numpy_dtype).name
        except Exception:  # not a gradviz dtype: say what numpy calls it
            name = str(numpy_dtype)
        _DTYPE_NAMES[numpy_dtype] = name
    return name


_DTYPE_NAMES: dict = {}  # numpy dtype -> the name _dtype_name gives it


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
    return {"id": node.node_id, "name": _engine.display_name(node), "kind": kind, "label": label}


def walk_graph(root, include_graph_root=False):
    """``(nodes, edges, roots, live)`` reachable from ``root``, iteratively.

    ``nodes`` maps id to :func:`describe_node` and ``live`` maps id to the node object. The
    engine's ``GraphRoot`` (several roots) is left out unless ``include_graph_root``: it is not
    part of the user's graph (torch hides it too), but a trace needs it because it runs.
    """
    live, edges, roots = traverse_graph(root, include_graph_root)
    return describe_graph(live), edges, roots, live


def traverse_graph(root, include_graph_root=False):
    """:func:`walk_graph` without the descriptions: ``(live, edges, roots)``, ``live`` in the
    order ``walk_graph``'s ``nodes`` has (Note [Events when read] describes later)."""
    live: dict[int, object] = {}
    edges: list[dict] = []
    if isinstance(root, _engine.GraphRoot) and not include_graph_root:
        starts = [n for n, _ in root.next_functions if n is not None]
    else:
        starts = [root]
    roots = []
    stack = []
    for node in starts:
        if node.node_id not in live:
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
            if next_node.node_id not in live:
                live[next_node.node_id] = next_node
                stack.append(next_node)
    return live, edges, roots


def describe_graph(live: dict) -> dict:
    """``walk_graph``'s ``nodes`` for the nodes of ``live`` (from :func:`traverse_graph`)."""
    nodes = {node_id: describe_node(node) for node_id, node in live.items()}
    annotate_modules(nodes, live)
    return nodes


def _meta(meta) -> dict | None:
    if meta is None:
        return None
    return {"shape": list(meta.shape), "dtype": None if meta.dtype is None else meta.dtype.name}


def saved_details(node) -> list[dict]:
    """Each tensor ``node`` holds for backward, for an inspector: the ``node_created`` entry
    plus ``version`` (the tensor's version when it was saved), ``current_version`` (now;
    differs when it was modified in place since, which backward will refuse) and ``bytes``."""
    details = []
    for slot, (label, saved) in enumerate(saved_tensors_of(node)):
        info = _saved_info(slot, label, saved)
        data = saved_array(saved)
        counter = saved._version_counter
        info.update(version=int(saved._saved_version),
                    current_version=None if counter is None else int(counter.value),
                    bytes=0 if data is None else int(data.nbytes))
        details.append(info)
    return details


# Note [The cost of node_created]
# -------------------------------
# ``gradviz.record()`` builds the ``node_created`` event of every op the moment the op records
# its node: its saved tensors are released during backward and the user's stack is gone by
# then, so the event cannot wait to be read (Note [Events when read] in _recorder.py defers
# only the backward's). On the GPT step of bench/models.py (111 nodes) a recorded forward cost
# 1.62x a plain one (bench/instrument.py --model gpt, "fwd vs plain"), about 22 us per node.
# Timed part by part inside that forward (us per node): the event dict made from a payload
# dict passed as keywords 4.6, the saved tensors 3.9 (a dict of the saved inputs built and
# sorted per node, then two calls per tensor), the module path 2.8 (a search of the model per
# module call making a name and a class tuple for every module it passed), the source line 2.4
# and the sentence 1.8, the output metadata 1.8 (two method calls per slot), the edges 1.3, the
# display name 1.0. Now:
#
# * a built-in op's node (every node of that step) is read off its fields
#   (:func:`node_created_fields`): the display name once per op name, the output metadata
#   from ``_input_metadata``, the saved tensors from ``_kept_inputs`` (:func:`_op_saved`);
#   other nodes go through their methods as before;
# * the stripped text of a source line and the place the sentence gives it (" at
#   models.py:71 (code)") are kept per file and line for as long as ``linecache`` holds the
#   same list of lines for the file, the list ``linecache.getline`` reads, so they are what it
#   gives (:func:`_line_facts`); the search for the user's frame starts above the recorder;
# * ``relative_names`` (gradviz/autograd/_scopes.py) enters only modules that have
#   submodules and makes the names of the one path it returns (that model's modules from the
#   model: 11 -> 3.8 us per call);
# * the recorder makes the event as one dict.
#
# A recorded forward is now 1.35-1.42x a plain one (same bench, the former code and this one
# alternating, load 2.1), +3.4-3.6 -> +2.1 ms over a 5 ms forward timed in one process. What
# is left is mostly the price of Python inside a forward: node_created runs 4.1 us per node in
# a loop over the same nodes but 11-13 us inside the forward, whose numpy work leaves the
# interpreter's caches cold (a plain Python loop runs 1.8x slower there), and the ~14 objects
# each event keeps bring two young collections per forward (1.9 us per node).
#
# The events are the same, key for key and in the same order: tests/instrument/
# test_node_created.py records varied programs with the former code alongside.

_OP_NAMES: dict[str, str] = {}  # a built-in op's name (``op.node``) -> its node's display name


def node_created_fields(node) -> tuple:
    """The fields of ``node``'s ``node_created`` event that the node itself tells, in the
    event's order: ``(name, node_kind, edges, outputs, needs_input_grad, saved,
    materialize_grads, dirty_outputs, non_differentiable_outputs, grad_dtypes)`` (Note [The
    cost of node_created]: a built-in op's node is read off its fields)."""
    if isinstance(node, _OP_NODE):
        op_name = node.op.node
        name = _OP_NAMES.get(op_name)
        if name is None:  # the node classes of ops add nothing: OpNode.name() reads op.node
            name = _OP_NAMES[op_name] = _engine.display_name(node)
        functions = node.next_functions
        if len(functions) == 1:  # most ops: no comprehension
            (first, input_nr), = functions
            edges = [{"node": None if first is None else first.node_id, "input_nr": input_nr}]
        else:
            edges = [{"node": None if n is None else n.node_id, "input_nr": nr}
                     for n, nr in functions]
        metas = node._input_metadata
        outputs: list[dict | None]
        if len(metas) == 1 and metas[0] is not None:  # nearly every op
            meta = metas[0]
            outputs = [{"shape": list(meta.shape),
                        "dtype": None if meta.dtype is None else meta.dtype.name}]
        else:
            outputs = [_meta(meta) for meta in metas]
        needs = node.needs_input_grad
        if needs is None:
            needs = tuple(n is not None for n, _ in node.next_functions)
        kept = node._kept_inputs
        output = node._saved_output
        saved = [] if kept is None and output is None else _op_saved_infos(kept, output)
        return (name, node._kind(), edges, outputs, list(map(bool, needs)), saved,
                bool(node._materializes_grads()), [], [], None)
    kind = node._kind()
    needs = None if isinstance(node, _ENGINE_NODES) else getattr(node, "needs_input_grad", None)
    if needs is None:
        needs = tuple(n is not None for n, _ in node.next_functions)
    custom = not isinstance(node, _BUILTIN_NODES)  # Note [Attributes of Function nodes]
    declared = getattr(node, "_output_grad_dtypes", None) if custom else None
    return (
        _engine.display_name(node),
        kind,
        [{"node": None if n is None else n.node_id, "input_nr": nr}
         for n, nr in node.next_functions],
        [_meta(node.input_metadata(slot)) for slot in range(node.num_inputs)],
        [bool(flag) for flag in needs],
        [_saved_info(slot, label, saved)
         for slot, (label, saved) in enumerate(saved_tensors_of(node))],
        bool(node._materializes_grads()),
        list(getattr(node, "_dirty_outputs", ())) if custom else [],
        list(getattr(node, "_non_differentiable_outputs", ())) if custom else [],
        None if declared is None else [None if dtype is None else dtype.name
                                       for dtype in declared],
    )


def node_module(node) -> list | None:
    """``node_created``'s ``module``: the module path of the call that created ``node``, or
    None outside every module call and scope (the event then has no ``module``)."""
    frame = getattr(node, "_scope", None)
    if frame is None:
        return None
    resolved = frame.resolved  # Note [Module paths]: named now, while the module runs
    return list(frame_path(frame) if resolved is None else resolved[0])


def node_created_payload(node, source: bool = True) -> dict:
    """The payload of a ``node_created`` event (see ``_schema.NodeCreated``); ``source``
    False leaves the forward line out (null), for a node inspected after its forward."""
    return fill_node_created({}, node, forward_source() if source else None)


def fill_node_created(event: dict, node, source) -> dict:
    """``event`` with the ``node_created`` payload of ``node`` added, in the payload's key
    order (``source``: :func:`forward_source`'s dict or None); returns ``event``. The recorder
    fills its event dict in place (Note [The cost of node_created])."""
    (event["name"], event["node_kind"], event["edges"], event["outputs"],
     event["needs_input_grad"], event["saved"], event["materialize_grads"],
     event["dirty_outputs"], event["non_differentiable_outputs"],
     event["grad_dtypes"]) = node_created_fields(node)
    event["source"] = source
    module = node_module(node)
    if module is not None:
        event["module"] = module
    return event


def user_frame(depth: int = 1):
    """The innermost frame on the current stack whose code is not gradviz's, or None; the
    search starts ``depth`` frames above this call (1: its caller), for a caller that knows the
    frames below are gradviz's (the frames passed over are not made into frame objects).

    The caller must drop the frame when done (``del``): a frame kept alive keeps all its
    variables alive.
    """
    try:
        frame: FrameType | None = sys._getframe(depth)
    except ValueError:  # the stack is not that deep (code called from C, no Python above)
        return None
    while frame is not None:
        filename = frame.f_code.co_filename
        users = _USER_FILES.get(filename)
        if users is None:
            users = _USER_FILES[filename] = _is_user_file(filename)
        if users:
            return frame
        frame = frame.f_back
    return None


# filename -> whether it is outside gradviz: user_frame() runs at every recorded op (the
# forward line of node_created) and walks several frames; os.path.abspath per frame was most
# of a recorded forward's cost (bench/README.md, "Fewer objects per debugged pass")
_USER_FILES: dict[str, bool] = {}


def _is_user_file(filename: str) -> bool:
    return filename.startswith("<") or not os.path.abspath(filename).startswith(_GRADVIZ_DIRS)


def forward_source() -> dict | None:
    """The first frame outside gradviz on the current stack (the user's forward line).

    Only called by observers, so a forward without observers pays nothing for it.
    """
    return forward_line()[0]


def forward_line(depth: int = 1) -> tuple:
    """``(forward_source(), place)``: ``place`` is where a sentence says the line is (``" at
    models.py:71 (x = self.fc(x))"``; ``""`` when no frame is the user's). The search starts
    ``depth`` frames above this call (:func:`user_frame`)."""
    frame = user_frame(depth + 1)
    if frame is None:
        return None, ""
    try:
        code = frame.f_code
        filename = code.co_filename
        line = frame.f_lineno
        function = code.co_name
    finally:
        del frame
    text, place = _line_facts(filename, line)
    return {"file": filename, "line": line, "function": function, "code": text}, place


def _line_facts(filename: str, line: int) -> tuple:
    """The stripped text of ``line`` of ``filename`` (``linecache.getline``'s) and its place
    (:func:`forward_line`): remembered per file while ``linecache`` holds the same list of
    lines for it, the list ``getline`` reads (Note [The cost of node_created])."""
    entry = linecache.cache.get(filename)
    if entry is None or len(entry) == 1:  # not read yet, or read lazily: getline reads it
        return _read_line(filename, line)
    lines = entry[2]
    known = _LINES.get(filename)
    if known is None or known[0] is not lines:
        if len(_LINES) >= _MAX_FILES:
            _LINES.clear()
        known = _LINES[filename] = (lines, {})
    facts = known[1].get(line)
    if facts is None:
        facts = known[1][line] = _read_line(filename, line)
    return facts


def _read_line(filename: str, line: int) -> tuple:
    text = linecache.getline(filename, line).strip()
    place = f" at {filename.rsplit('/', 1)[-1]}:{line}"
    if text:
        place += f" ({text})"
    return text, place


# filename -> (linecache's list of its lines, {line: (text, place)}) for _line_facts
_LINES: dict[str, tuple] = {}
_MAX_FILES = 256


def source_text(site) -> str | None:
    """``"file:line: code"`` of where forward built a node, or None when unknown.

    ``site`` is a ``node_created`` event's ``source`` (:func:`forward_source`'s dict), or the
    anomaly mode's ``ForwardSite`` (a node's ``_forward_site``: its innermost frame is the user's
    line), or None.
    """
    if site is None:
        return None
    if isinstance(site, dict):
        filename, line, code = site.get("file"), site.get("line"), site.get("code")
    else:
        frames = getattr(site, "frames", None)
        if not frames:
            return None
        filename, line, _function, code = frames[-1]
    if not filename:
        return None
    return f"{filename}:{line}: {code}" if code else f"{filename}:{line}"


# ---- leaf names --------------------------------------------------------------------------

def parameter_names(params) -> dict:
    """``{id(tensor): name}`` from ``params``, for identity lookups of leaves.

    ``params`` is an ``nn.Module`` (its ``named_parameters()``), a dict of name -> Tensor such
    as ``dict(model.named_parameters())`` (torchviz's ``make_dot(..., params=)``), or an
    iterable of ``(name, Tensor)`` pairs. A tensor listed twice keeps its first name. The
    caller keeps ``params`` alive while the ids are in use.

    Raises
    ------
    TypeError
        If ``params`` is none of these, or an entry is not a ``(str, Tensor)`` pair.
    """
    names: dict[int, str] = {}
    for name, tensor in named_pairs(params, "", "Tensor", "an nn.Module"):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"params[{name!r}] must be a gradviz Tensor, got "
                            f"{type(tensor).__name__}")
        names.setdefault(id(tensor), str(name))
    return names


def named_pairs(params, caller, tensor_word, module_word) -> list:
    """``params`` (a module's ``named_parameters()``, a dict, or ``(name, tensor)`` pairs) as
    a list of pairs, or the TypeError that names what was expected; ``caller`` prefixes the
    message ("record_torch: "), the words name the library's types. None gives no pairs."""
    if params is None:
        return []
    named = getattr(params, "named_parameters", None)
    if callable(named):
        items = named()
    else:
        items = params.items() if isinstance(params, Mapping) else params
    try:
        pairs = list(items)
    except TypeError:
        raise TypeError(f"{caller}params must be a dict of name -> {tensor_word}, such as "
                        f"dict(model.named_parameters()), or {module_word}; got "
                        f"{type(params).__name__}") from None
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"{caller}params must be a dict of name -> {tensor_word} (or "
                            f"(name, Tensor) pairs); got the item {pair!r}")
    return pairs


def frame_leaf_names(frame, leaf_ids) -> dict:
    """``{id(tensor): name}`` for the leaves (ids in ``leaf_ids``) that exactly one variable
    of ``frame`` names; a leaf bound to two names (``a = b = w``) gets none, and names that
    start with ``_`` (IPython's ``_``, ``_1``...) are not read."""
    if frame is None or not leaf_ids:
        return {}
    found: dict[int, set] = {}
    scopes = [frame.f_locals]
    if frame.f_globals is not frame.f_locals:
        scopes.append(frame.f_globals)
    for scope in scopes:
        for name, value in list(scope.items()):
            if not isinstance(name, str) or name.startswith("_"):
                continue
            if id(value) in leaf_ids and leaf_ids[id(value)] is value:
                found.setdefault(id(value), set()).add(name)
    return {key: next(iter(names)) for key, names in found.items() if len(names) == 1}


def name_leaves(nodes: dict, live: dict, names: dict, frame=None, frame_names=None) -> None:
    """Set ``leaf_name`` on the AccumulateGrad entries of ``nodes`` (from :func:`walk_graph`)
    whose tensor ``names`` names (from :func:`parameter_names`), else keep the module
    parameter name :func:`walk_graph` gave it, else the name that one variable of ``frame``
    names (see :func:`frame_leaf_names`; ``frame_names``: its result for the leaves, read
    earlier). Leaves with no known name get no key."""
    leaves = {node_id: node.variable for node_id, node in live.items()
              if nodes[node_id]["kind"] == "accumulate_grad"}
    if not leaves:
        return
    names = dict(names)
    for node_id, tensor in leaves.items():  # named as a module's parameter by walk_graph
        if "leaf_name" in nodes[node_id]:
            names.setdefault(id(tensor), nodes[node_id]["leaf_name"])
    unnamed = {id(tensor): tensor for tensor in leaves.values() if id(tensor) not in names}
    if frame_names is None:
        names.update(frame_leaf_names(frame, unnamed))
    else:  # a leaf's names in the frame do not depend on which other leaves were looked for
        names.update((key, name) for key, name in frame_names.items() if key in unnamed)
    for node_id, tensor in leaves.items():
        name = names.get(id(tensor))
        if name is not None:
            nodes[node_id]["leaf_name"] = name

"""Static drawings of the backward graph in torchviz's style: ``to_dot`` and ``render``.

A live graph (from ``tensor.grad_fn``) and a recorded :class:`~gradviz.instrument.Trace` are
both first reduced to the same small description, a list of :class:`_Box` and a list of
:class:`_Arrow`; one function turns that description into a ``graphviz.Digraph``. So both
sources are drawn alike, and only that function knows about DOT.

Note [Escaping DOT labels]
--------------------------
Labels carry user text: parameter names, Function class names, op attributes, and anything a
trace file (possibly hostile) says. In a DOT quoted string a backslash starts an escape
(``\\n``, ``\\l``, ``\\N`` mean line breaks and the node's name), and the ``graphviz``
package would pass text that looks like ``<...>`` through unquoted, as an HTML-like label. So
every piece of user text goes through :func:`_escape_text`: backslashes are doubled, a newline
becomes DOT's ``\\n`` line break, a tab a space, other control characters the visible text
``\\xNN``, and text UTF-8 cannot encode (lone surrogates) is backslash-escaped. The label is
then always written as a quoted string with its double quotes escaped (:func:`_quoted_label`):
since every backslash of user text was doubled, each quote is preceded by an even number of
backslashes and ``\\"`` is read back as a literal quote. ``<b>`` is drawn as three characters.
"""

from __future__ import annotations

import os
import reprlib
import shutil
from dataclasses import dataclass, field

import numpy as np

from gradviz_ext import engine as _engine

from .._tensor import Tensor
from ..instrument import Trace
from ..instrument._nodes import parameter_names, saved_tensors_of

__all__ = ["to_dot", "render"]

INSTALL_GRAPHVIZ_PACKAGE = (
    "gradviz.viz needs the `graphviz` Python package: install it with "
    "`pip install 'gradviz[viz]'` (or `pip install graphviz`)"
)
INSTALL_DOT_PROGRAM = (
    "rendering needs Graphviz's `dot` program: install it with `apt-get install graphviz` "
    "(Debian) or `brew install graphviz`; to_dot() itself needs nothing"
)

# torchviz's look (make_dot), so the drawings read the way its users expect.
NODE_ATTR = {"style": "filled", "shape": "box", "fontsize": "10", "height": "0.2",
             "fontname": "monospace"}
GRAPH_ATTR = {"size": "12,12", "ranksep": "0.1"}
FILL = {
    "builtin": "lightgrey",
    "custom": "thistle",            # custom autograd.Function nodes
    "accumulate_grad": "lightblue",  # leaves
    "output": "darkolivegreen1",    # the tensor(s) drawn from
    "saved": "orange",              # saved tensors
}
CUSTOM_MARKER = "custom Function"
FREED_MARKER = "saved tensors freed"

# how built-in ops name their saved inputs, as PyTorch's _saved_self / _saved_other do
_INPUT_NAMES = {0: "self", 1: "other"}


def _graphviz():
    """The ``graphviz`` package, imported on first use (it is the optional extra ``viz``)."""
    try:
        import graphviz
    except ImportError as exc:
        raise ImportError(INSTALL_GRAPHVIZ_PACKAGE) from exc
    return graphviz


# ---- the description both sources reduce to -----------------------------------------------

@dataclass
class _Box:
    """One DOT node: ``lines`` are raw text (escaped when drawn), ``kind`` picks the fill."""

    dot_id: str
    lines: list
    kind: str
    tooltip: str = ""
    dashed: bool = False


@dataclass
class _Arrow:
    tail: str
    head: str
    label: str = ""
    saved: bool = False  # a saved-tensor attachment: drawn without an arrowhead


@dataclass
class _Drawing:
    boxes: list = field(default_factory=list)
    arrows: list = field(default_factory=list)


def _node_id(node_id) -> str:
    return f"n{node_id}"


def _saved_id(node_id, slot) -> str:
    return f"n{node_id}_saved{slot}"


def _shape_text(shape) -> str:
    """``(2, 3)``, as torchviz writes sizes."""
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def _saved_name(label: str) -> str:
    """The label of a saved tensor as the instrumentation names it, in torchviz's words."""
    if label == "output":
        return "result"
    number = label[len("input "):]
    if label.startswith("input ") and number.isdecimal():
        return _INPUT_NAMES.get(int(number), label)
    return label  # "saved_tensors[i]" of a custom Function


# ---- live graphs ---------------------------------------------------------------------------

def _attribute_text(value, max_chars: int) -> str:
    if isinstance(value, Tensor):
        text = f"tensor{_shape_text(value.shape)}"
    elif isinstance(value, np.ndarray):
        text = f"array{_shape_text(value.shape)} {value.dtype}"
    else:
        text = reprlib.repr(value)  # bounded: a long tuple is cut, not printed whole
    if len(text) > max_chars:
        text = text[:max_chars] + "..."
    return text


def _saved_state(saved):
    """``(released, shape or None)`` of a SavedTensor; no shape when a pack hook holds it."""
    if saved._has_hooks:
        return saved._unpack_hook is None, None
    data = saved._data if saved._tensor is None else saved._tensor._data
    if data is None:
        return True, None
    return False, data.shape


def _live_node(drawing, node, names, show_saved, max_attr_chars) -> None:
    kind = node._kind()
    node_id = node.node_id
    dot_id = _node_id(node_id)
    if kind == "accumulate_grad":
        variable = node.variable
        lines = [_shape_text(variable.shape)]
        name = names.get(id(variable))
        if name is not None:
            lines.insert(0, name)
        drawing.boxes.append(_Box(dot_id, lines, kind, tooltip="AccumulateGrad"))
        return
    lines = [_engine.display_name(node)]
    if kind == "custom":
        lines.append(CUSTOM_MARKER)
    attrs = getattr(node, "attrs", None)
    if attrs:
        for key, value in attrs.items():
            if key.endswith("_arg"):  # an argument as passed, beside its normalized key (Note
                continue              # [Saved ints as passed] in gradviz/ops/_saved.py)
            lines.append(f"{key}: {_attribute_text(value, max_attr_chars)}")
    saved_inputs = getattr(node, "_saved_inputs", None)
    if saved_inputs:
        for index in sorted(saved_inputs):  # Python numbers saved by the op: attributes too
            value = saved_inputs[index]
            if not isinstance(value, _engine.SavedTensor):
                name = _INPUT_NAMES.get(index, f"input {index}")
                lines.append(f"{name}: {_attribute_text(value, max_attr_chars)}")
    freed = False
    saved_boxes = []
    for slot, (label, saved) in enumerate(saved_tensors_of(node)):
        released, shape = _saved_state(saved)
        if released:
            freed = True
            continue
        shown = _shape_text(shape) if shape is not None else "(packed by a hook)"
        saved_boxes.append(_Box(_saved_id(node_id, slot), [_saved_name(label), shown], "saved"))
    if kind == "custom" and node._released and getattr(node, "_saved", None) is None:
        freed = True  # release_variables() dropped the list; ctx.saved_tensors now raises
    if freed:
        lines.append(FREED_MARKER)
    drawing.boxes.append(_Box(dot_id, lines, kind, dashed=freed))
    if show_saved:
        for box in saved_boxes:
            drawing.boxes.append(box)
            drawing.arrows.append(_Arrow(box.dot_id, dot_id, saved=True))


def _from_tensors(outputs, params, show_saved, max_attr_chars) -> _Drawing:
    names = parameter_names(params)
    drawing = _Drawing()
    seen: dict[int, object] = {}
    stack = []
    for index, tensor in enumerate(outputs):
        lines = [_shape_text(tensor.shape)]
        name = names.get(id(tensor))
        if name is not None:
            lines.insert(0, name)
        out_id = f"output{index}"
        drawing.boxes.append(_Box(out_id, lines, "output", tooltip=f"output {index}"))
        fn = tensor.grad_fn
        if fn is None:
            continue
        label = str(tensor._output_nr) if fn.num_inputs > 1 else ""
        drawing.arrows.append(_Arrow(_node_id(fn.node_id), out_id, label))
        if fn.node_id not in seen:
            seen[fn.node_id] = fn
            stack.append(fn)
    # Iterative depth-first walk (docs/style.md 3: graphs can be 10^5+ nodes deep). Edges point the
    # way the forward pass ran, from each next_function to the node that used it (torchviz).
    while stack:
        node = stack.pop()
        _live_node(drawing, node, names, show_saved, max_attr_chars)
        head = _node_id(node.node_id)
        for next_node, input_nr in node.next_functions:
            if next_node is None:
                continue
            label = str(input_nr) if next_node.num_inputs > 1 else ""
            drawing.arrows.append(_Arrow(_node_id(next_node.node_id), head, label))
            if next_node.node_id not in seen:
                seen[next_node.node_id] = next_node
                stack.append(next_node)
    return drawing


# ---- recorded traces -----------------------------------------------------------------------

def _from_trace(trace: Trace, show_saved) -> _Drawing:
    graph = trace.graph
    created = {}
    freed = set()
    for event in trace.events:
        if event["kind"] == "node_created":
            created[event["node"]] = event
        elif event["kind"] == "saved_released":
            freed.add(event["node"])
    nodes = {node["id"]: node for node in graph["nodes"]}
    # The engine's GraphRoot (a backward from several roots) is not part of the user's graph;
    # the nodes it feeds are the roots (torch hides it too).
    hidden = {node_id for node_id in graph["roots"]
              if nodes.get(node_id, {}).get("name") == "GraphRoot"}
    roots = []
    for node_id in graph["roots"]:
        if node_id in hidden:
            roots.extend(edge["target"] for edge in graph["edges"] if edge["source"] == node_id)
        else:
            roots.append(node_id)
    outputs_of = {}  # how many outputs a node has: its input slots, as far as the trace says
    for node_id, event in created.items():
        outputs_of[node_id] = len(event["outputs"])
    for edge in graph["edges"]:
        target = edge["target"]
        outputs_of[target] = max(outputs_of.get(target, 1), edge["input_nr"] + 1)

    drawing = _Drawing()
    for index, node_id in enumerate(dict.fromkeys(roots)):
        event = created.get(node_id)
        meta = event["outputs"][0] if event is not None and event["outputs"] else None
        lines = [_shape_text(meta["shape"]) if meta is not None else "output"]
        out_id = f"output{index}"
        drawing.boxes.append(_Box(out_id, lines, "output", tooltip=f"output {index}"))
        drawing.arrows.append(_Arrow(_node_id(node_id), out_id))
    for node in graph["nodes"]:
        node_id = node["id"]
        if node_id in hidden:
            continue
        kind = node["kind"] if node["kind"] in FILL else "builtin"
        dot_id = _node_id(node_id)
        if kind == "accumulate_grad":
            drawing.boxes.append(_Box(dot_id, [node["label"] or "leaf"], kind,
                                      tooltip="AccumulateGrad"))
            continue
        lines = [node["name"]]
        if kind == "custom":
            lines.append(CUSTOM_MARKER)
        is_freed = node_id in freed
        if is_freed:
            lines.append(FREED_MARKER)
        drawing.boxes.append(_Box(dot_id, lines, kind, dashed=is_freed))
        event = created.get(node_id)
        if show_saved and event is not None and not is_freed:
            for slot, saved in enumerate(event["saved"]):  # as the live walk numbers them
                shown = "(packed by a hook)" if saved["hooked"] else _shape_text(saved["shape"])
                saved_id = _saved_id(node_id, slot)
                drawing.boxes.append(_Box(saved_id, [_saved_name(saved["label"]), shown],
                                          "saved"))
                drawing.arrows.append(_Arrow(saved_id, dot_id, saved=True))
    for edge in graph["edges"]:
        if edge["source"] in hidden:
            continue
        target = edge["target"]
        label = str(edge["input_nr"]) if outputs_of.get(target, 1) > 1 else ""
        drawing.arrows.append(_Arrow(_node_id(target), _node_id(edge["source"]), label))
    return drawing


# ---- DOT -----------------------------------------------------------------------------------

# control characters other than newline and tab are shown as the text \xNN
_ESCAPES = str.maketrans({
    **{chr(code): f"\\\\x{code:02x}" for code in (*range(0x20), 0x7F) if code not in (9, 10)},
    "\\": "\\\\", "\n": "\\n", "\t": " ",
})


def _escape_text(text: str) -> str:
    """One piece of user text made literal inside a DOT label (Note [Escaping DOT labels])."""
    text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: DOT files are UTF-8
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.translate(_ESCAPES)


def _quoted_label(lines) -> str:
    """A DOT quoted string of ``lines`` (user text) joined by line breaks."""
    text = "\\n".join(_escape_text(line) for line in lines)
    # every backslash of user text is doubled, so each quote becomes a lone escaped quote
    return '"' + text.replace('"', '\\"') + '"'


def _draw(drawing: _Drawing):
    """The Digraph of ``drawing``.

    Statements are appended to ``Digraph.body`` in the package's own format instead of one
    ``node()``/``edge()`` call each: those calls re-quote every attribute through regular
    expressions, about 25 microseconds a node, which made a 10^5-node graph take seconds.
    Node ids and attribute values other than labels are ours (``n12``, ``orange``), so only
    labels need quoting (Note [Escaping DOT labels]).
    """
    graphviz = _graphviz()
    dot = graphviz.Digraph(node_attr=NODE_ATTR, graph_attr=GRAPH_ATTR)
    body = []
    for box in drawing.boxes:
        extra = ""
        if box.tooltip:
            extra += f' tooltip="{box.tooltip}"'  # our words: "output 0", "AccumulateGrad"
        if box.dashed:
            extra += ' style="filled,dashed"'
        body.append(f"\t{box.dot_id} [label={_quoted_label(box.lines)} "
                    f"fillcolor={FILL[box.kind]}{extra}]\n")
    for arrow in drawing.arrows:
        extra = []
        if arrow.label:
            extra.append(f"label={arrow.label}")  # an output index: digits only
        if arrow.saved:
            extra.append("dir=none")
        attrs = f" [{' '.join(extra)}]" if extra else ""
        body.append(f"\t{arrow.tail} -> {arrow.head}{attrs}\n")
    dot.body.extend(body)
    return dot


def to_dot(tensor_or_trace, params=None, show_saved=True, max_attr_chars=50):
    """Draw the backward graph as a ``graphviz.Digraph``, in the style of torchviz's make_dot.

    Each node of the graph is one box: built-in nodes grey, custom ``autograd.Function`` nodes
    purple and marked "custom Function", leaves (``AccumulateGrad``) light blue with the
    parameter's name and shape, the tensor drawn from green. Saved tensors hang off the node
    that saved them in orange; a node whose saved tensors were freed by ``backward()`` is
    dashed and says "saved tensors freed". Arrows point the way the forward pass ran; an
    arrow out of a node with several outputs is labelled with the output's index.

    Making the drawing needs only the ``graphviz`` Python package (``pip install
    'gradviz[viz]'``); showing it needs Graphviz's ``dot`` program (Jupyter displays a Digraph
    through it, and so does :func:`render`).

    Parameters
    ----------
    tensor_or_trace : Tensor, sequence of Tensors, or Trace
        The output(s) to draw the graph of, or a trace from :func:`gradviz.record`, whose
        recorded graph is drawn (a trace holds no tensors: leaves show shape and dtype).
    params : nn.Module or dict of str to Tensor, optional
        Names for leaves: a module (its ``named_parameters()``) or a dict such as
        ``dict(model.named_parameters())``; matched by identity.
        Only for tensors.
    show_saved : bool
        Draw the tensors each node saved for backward (released ones are never drawn).
    max_attr_chars : int
        Op attributes drawn in a node (``dim: 1``) are cut to this many characters.

    Returns
    -------
    graphviz.Digraph
        Its ``.source`` is the DOT text; node ids are ``n<node_id>`` (stable ids, not memory
        addresses), ``n<node_id>_saved<slot>`` and ``output<i>``.

    Raises
    ------
    ImportError
        If the ``graphviz`` Python package is not installed.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.viz import to_dot
    >>> w = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> loss = (w * w.exp()).sum()
    >>> dot = to_dot(loss, params={"w": w})
    >>> print(dot.source)  # doctest: +ELLIPSIS
    digraph {
        graph [ranksep=0.1 size="12,12"]
        node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
        output0 [label="()" fillcolor=darkolivegreen1 tooltip="output 0"]
        n... [label="SumBackward0\\ndims: (0,)\\nkeepdim: False..." fillcolor=lightgrey]
        n... [label="MulBackward0" fillcolor=lightgrey]
        n..._saved0 [label="self\\n(2)" fillcolor=orange]
        ...
        n... [label="w\\n(2)" fillcolor=lightblue tooltip="AccumulateGrad"]
        ...
    }
    <BLANKLINE>
    >>> loss.backward()
    >>> "saved tensors freed" in to_dot(loss).source
    True
    """
    if not isinstance(max_attr_chars, int) or isinstance(max_attr_chars, bool) \
            or max_attr_chars < 1:
        raise ValueError(f"max_attr_chars must be a positive int, got {max_attr_chars!r}")
    _graphviz()  # fail before any work when the package is missing
    if isinstance(tensor_or_trace, Trace):
        if params is not None:
            raise ValueError("params names live tensors, and a Trace holds none; draw the "
                             "tensor itself with to_dot(loss, params=...) to name leaves")
        return _draw(_from_trace(tensor_or_trace, show_saved))
    if isinstance(tensor_or_trace, Tensor):
        outputs = (tensor_or_trace,)
    elif isinstance(tensor_or_trace, (tuple, list)) and tensor_or_trace \
            and all(isinstance(t, Tensor) for t in tensor_or_trace):
        outputs = tuple(tensor_or_trace)
    else:
        raise TypeError("to_dot expects a Tensor, a non-empty tuple or list of Tensors, or a "
                        f"gradviz Trace; got {type(tensor_or_trace).__name__}")
    return _draw(_from_tensors(outputs, params, show_saved, max_attr_chars))


def render(dot_or_tensor, path, format="svg"):  # noqa: A002 (graphviz's own parameter name)
    """Write the drawing to ``path`` with Graphviz's ``dot`` program and return the path.

    Parameters
    ----------
    dot_or_tensor : graphviz.Digraph, Tensor, sequence of Tensors, or Trace
        A drawing from :func:`to_dot`, or anything ``to_dot`` accepts (drawn with its
        defaults).
    path : str or os.PathLike
        The file to write; the extension is not looked at.
    format : str
        Any output format ``dot`` knows: ``"svg"``, ``"png"``, ``"pdf"``...

    Raises
    ------
    RuntimeError
        If the ``dot`` program is not installed (``to_dot`` itself does not need it).

    Examples
    --------
    >>> import gradviz as torch, os, shutil, tempfile
    >>> from gradviz.viz import render
    >>> x = torch.tensor([1.0], requires_grad=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "graph.svg")
    >>> if shutil.which("dot"):  # Graphviz installed
    ...     _ = render((x * 2).sum(), path)
    """
    graphviz = _graphviz()
    if isinstance(dot_or_tensor, graphviz.Digraph):
        dot = dot_or_tensor
    else:
        dot = to_dot(dot_or_tensor)
    if shutil.which("dot") is None:
        raise RuntimeError(INSTALL_DOT_PROGRAM)
    try:
        data = dot.pipe(format=format)
    except graphviz.ExecutableNotFound as exc:
        raise RuntimeError(INSTALL_DOT_PROGRAM) from exc
    with open(path, "wb") as handle:
        handle.write(data)
    return os.fspath(path)

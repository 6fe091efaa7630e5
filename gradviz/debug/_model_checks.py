"""The gradient doctor's model-level checks: the classic wrong-or-missing-gradient bugs that are
not in a custom Function (docs/doctor.md lists each kind with its evidence).

Note [Model-level checks]
-------------------------
``doctor(loss, params=...)`` runs these after the custom-Function checks, on gradviz and on
PyTorch graphs alike (``GraphLibrary`` hides the difference). They need the graph (a walk), the
saved tensors the graph still holds, and the leaves' gradients from the doctor's one extra
backward pass (``leaf_grads`` of the pass observer, which leaves ``.grad`` alone):

- ``no_gradient`` / ``unused_parameter``: a parameter that requires grad and that the graph
  does not reach. It is ``no_gradient`` when the graph shows the parameter was used anyway:
  a node holds a tensor sharing its memory (``.detach()``, ``.data``, ``from_numpy``) or a
  copy of its values (``tensor(existing)``, a numpy round trip), or another parameter of its
  module is reached (the module ran; this one went through a cut); and, for a reached
  parameter, when its gradient is exactly zero below a zero-gradient op (``round``,
  ``sign``, ``floor``...). Otherwise it is ``unused_parameter``. A whole module whose output
  was cut (a ``no_grad`` block around it, ``argmax`` or an int cast of its output) leaves no
  trace in the graph: it is reported as ``unused_parameter``, whose summary names both
  causes. A parameter with ``requires_grad=False`` is frozen on purpose: nothing is said;
  A loss with no graph at all (``tensor(loss.item(), requires_grad=True)``) is
  ``no_gradient`` for every parameter; a reached parameter that a node also uses through a
  detached alias (a tied weight used as ``weight.detach()``) is ``no_gradient`` at that node;
  a random draw (``normal(mean, std)``) on the only path is like a zero-gradient op;
- ``unregistered_parameter``: with a model as ``params``, a leaf the loss reaches that requires
  grad but that ``model.parameters()`` does not hold (Note [Unregistered parameters]);
- ``broadcast_suspect``: an elementwise op or loss whose inputs broadcast to more entries
  than either has, each along its own dimension (``[N, 1]`` with ``[N]`` gives ``[N, N]``);
  when only one input's shape is known (the other needs no gradient), a square ``[N, N]``
  output from an ``[N]``-like input. One input broadcast over the other (a bias) is not;
- ``nonfinite_origin``: the first node (forward order) holding a NaN/Inf saved value, and the
  first node whose backward made a NaN/Inf from finite gradients, with the parameters whose
  gradient is non-finite. The -inf entries of a saved ``attn_mask`` are not: they mark what
  the mask hides (``nn.MultiheadAttention`` merges a causal and a key padding mask into one
  float mask, which torch's fused attention saves), so such a mask counts only with a NaN or
  +inf;
- ``vanishing_gradient`` / ``exploding_gradient``: the gradient norms of the weight matrices
  ordered by their distance from the loss; the farthest over the nearest below 1e-4 or above
  1e4 (at least three depths);
- ``dead_units``: a weight matrix with at least half of its rows (units) getting exactly zero
  gradient for the whole batch, in a graph with a ReLU-style node. A table that the graph
  only reads rows of by index (``embedding``, ``index_select``, ``table[tokens]``) is left
  alone: its rows are tokens, and those the batch does not hold get no gradient by design;
- ``double_softmax``: ``cross_entropy``/``nll_loss`` on a softmax or log_softmax output, and
  ``binary_cross_entropy_with_logits`` on a sigmoid output;
- ``stale_grad``: ``.grad`` already holds something other than zero or this loss's gradient
  (called before ``backward()``: a missing ``zero_grad``; after: an accumulated one); only
  for ``params`` given (a leaf of the graph may hold another loss's gradient on purpose);
- ``inplace_overwrite``: a saved tensor whose version moved: the node that saved it and the
  in-place op that overwrote it (the tensor's ``grad_fn`` now), with the parameters below.

Note [Unregistered parameters]
------------------------------
An optimizer is given ``model.parameters()``; a tensor the loss trains that is not among them
is never updated, silently. With a model as ``params``, the leaves of the graph that require
grad and are not registered are named when they belong to the model: a tensor attribute made
with ``requires_grad=True`` instead of ``nn.Parameter`` (``h0``), the parameters of modules in
a plain list, tuple or dict (``cells.0.weight_ih``: named as a ModuleList would), found by a
walk of the modules' attributes; and an ``nn.Parameter`` that the nodes using it were made
in a module call of the model (the frames of Note [Modules cut off upstream]: always on
gradviz, inside ``torch_scopes`` on PyTorch), i.e. created during forward. Any other leaf
is left alone: an input made to require grad (a saliency map), another model's parameter
(a GAN's discriminator in the generator's loss).

Note [Modules cut off upstream]
-------------------------------
``h = layer1(x).detach(); loss = layer2(h)`` (or ``.data``, a ``no_grad`` block around
``layer1``, ``argmax`` or an int cast of its output) leaves nothing of ``layer1`` in the
loss's graph: the nodes it built are freed with its output, or were never made, and the
graph holds no tensor sharing its parameters' memory. So the graph alone cannot tell it from
a layer that forward never called. What tells them apart is the forward's module calls: on
gradviz every module call is noted in the frame of the nearest module around it
(``ScopeFrame.calls``: the module and the sequence number forward had reached; a ``scope``
block keeps none, as it may last a whole training loop), and the graph's nodes keep their
frames; on PyTorch, :func:`gradviz.debug.torch_scopes` keeps the same record
(``ModuleCall``) in the nodes it tags. A parameter the loss does not reach, of a
module called inside a module call that built nodes of the loss's graph, ran in this forward:
``no_gradient``, with ``cut_at`` the first node of the loss's graph made after that call
began (where the graph resumes past the cut). A PyTorch forward run outside ``torch_scopes``
keeps no record of module calls: such a module is ``unused_parameter``, whose cause names
both possibilities.

A module called at the top level (``h = encoder(x).detach(); loss = head(h)``, no module
around either call) has no enclosing frame to note it in. Those calls go to a short record
instead (the engine's ``top_module_calls()``, or the ``torch_scopes`` block's: the last 512,
as weak references with their sequence numbers), and every frame knows the sequence number
at which its own call began. The calls that belong to the loss's forward are those after the
previous call of any top-level module that built the graph (its previous forward) and before
the graph's last node: ``head``'s call in the step before bounds the window, so ``encoder``'s
call of this step counts and the one of the step before does not.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor
from ..nn import Parameter
from ._model_graph import GraphLibrary, ModelGraph, model_finding, module_of, named_parameters, op_of

__all__ = ["MODEL_KINDS", "model_findings", "named_parameters"]

MODEL_KINDS = ("no_gradient", "unused_parameter", "unregistered_parameter", "broadcast_suspect",
               "nonfinite_origin", "vanishing_gradient", "exploding_gradient", "dead_units",
               "double_softmax", "stale_grad", "inplace_overwrite")

# ops whose gradient is zero almost everywhere (piecewise constant)
_ZERO_GRADIENT = {"Round", "Sign", "Floor", "Ceil", "Trunc"}
# random draws whose gradient is zero: ``normal(mean, std)`` with tensor arguments (torch gives
# it a node; gradviz none, a cut)
_SAMPLES = {"Normal", "Bernoulli", "Poisson", "Binomial"}
# elementwise ops and losses whose inputs broadcast against each other
_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Atan2", "MseLoss",
                "L1Loss", "SmoothL1Loss", "HuberLoss", "BinaryCrossEntropy",
                "BinaryCrossEntropyWithLogits", "Where", "Hypot", "Fmod", "Remainder"}
_RELU_LIKE = {"Relu", "Threshold", "Hardtanh", "Relu6"}
# ops that read rows of a table by index: a row not looked up gets no gradient (dead_units)
_LOOKUPS = {"Embedding", "EmbeddingBag", "IndexSelect", "Index"}
_VIEWS = {"View", "Reshape", "Unsqueeze", "Squeeze", "Clone", "Transpose", "Permute",
          "UnsafeView", "Expand", "Alias"}
_VANISHING, _EXPLODING = 1e-4, 1e4
_DEAD_FRACTION = 0.5


def model_findings(roots, nodes, params, pass_result, library_torch=None, custom=(),
                   arguments=None):
    """The model-level findings (Note [Model-level checks]) and notes for the report; also
    names, in the custom-Function findings ``custom`` (their forward arguments in
    ``arguments``), the parameters below the input at fault."""
    library = GraphLibrary(library_torch)
    graph = ModelGraph(roots, nodes, library)
    named = named_parameters(params, nodes, library)
    names = {id(tensor): name for name, tensor in named}
    for finding in custom:
        _name_parameters_below(graph, finding, (arguments or {}).get(finding.node), names)
    leaf_grads = None if pass_result is None else getattr(pass_result, "leaf_grads", None)
    grads = {}
    if leaf_grads is not None:
        for key, grad in leaf_grads.items():
            grads[key] = None if grad is None else library.array(grad)
    notes = []
    if pass_result is None:  # a pass that failed has its own note
        notes.append("the model-level gradient checks (dead units, vanishing/exploding, stale "
                     ".grad, zero gradients) need the doctor's backward pass "
                     "(check_backward=False)")
    checks = [("no_gradient/unused_parameter", lambda: _reach(graph, named, grads, library)),
              ("broadcast_suspect", lambda: _broadcasts(graph, names)),
              ("double_softmax", lambda: _double_softmax(graph, names)),
              ("inplace_overwrite", lambda: _inplace(graph, names)),
              ("nonfinite_origin", lambda: _nonfinite(graph, named, grads, pass_result,
                                                      library))]
    if leaf_grads is not None:
        checks += [("vanishing/exploding_gradient", lambda: _depth(graph, named, grads)),
                   ("dead_units", lambda: _dead(graph, named, grads))]
        if params is not None:  # the graph's leaves may hold any .grad (another loss's)
            checks.append(("stale_grad", lambda: _stale(named, grads, graph, library)))
    if callable(getattr(params, "named_modules", None)):  # a model: what its optimizer gets
        checks.append(("unregistered_parameter",
                       lambda: _unregistered(graph, params, names, library)))
    findings = []
    for label, check in checks:
        try:
            findings += check()
        except Exception as exc:  # noqa: BLE001 - an odd tensor must not cost the report
            notes.append(f"the {label} check could not run on this graph: "
                         f"{type(exc).__name__}: {exc}")
    tensors = dict(named)
    for finding in findings:  # the parameters' AccumulateGrad nodes, for a viewer to mark
        for name in finding.params:
            leaf = graph.leaf_of.get(id(tensors.get(name)))
            if leaf is not None and leaf not in finding.param_nodes:
                finding.param_nodes.append(leaf)
    return findings, notes


def _name_parameters_below(graph, finding, args, names):
    """Fill a custom Function finding's ``params`` (and ``module``) with the parameters whose
    gradient flows through its wrong input: the leaves below the node's edge of that input
    (one edge per tensor argument), or below the node when the input is not known."""
    node = finding.node
    if node is None or finding.params or graph.library.is_leaf(node):
        return
    below = graph.leaves_below(node)
    index = finding.input_index
    if index is not None and args is not None and index < len(args):
        edge = sum(1 for arg in args[:index] if graph.library.is_tensor(arg))
        if edge < len(node.next_functions):
            child = node.next_functions[edge][0]
            below = set() if child is None else graph.leaves_below(child)
    finding.params = sorted(names[key] for key in below if key in names)
    modules = {module_of(name) for name in finding.params}
    if len(modules) == 1:
        finding.module = modules.pop()


# ---- no_gradient, unused_parameter -------------------------------------------------------

def _reach(graph, named, grads, library):
    findings = []
    reached_modules = {module_of(name) for name, tensor in named
                       if id(tensor) in graph.leaf_of}
    zero_nodes = [n for n in graph.nodes if op_of(n) in _ZERO_GRADIENT | _SAMPLES]
    ran = None
    # a loss without a graph (``tensor(loss.item(), requires_grad=True)``) reaches nothing
    rebuilt = all(getattr(root, "grad_fn", None) is None for root in graph.roots)
    for name, tensor in named:
        if not tensor.requires_grad:
            continue  # frozen on purpose
        module = module_of(name)
        if rebuilt and id(tensor) not in graph.leaf_of:
            findings.append(model_finding(
                "no_gradient", None, [name],
                f"{name} gets no gradient: the loss is a leaf tensor with no graph behind it.",
                f"{name} requires grad but the loss has no grad_fn: it is a new tensor, so "
                f"backward() stops at it and no parameter gets a gradient",
                "the loss rebuilt from its value (torch.tensor(loss.item(), "
                "requires_grad=True), loss.detach().requires_grad_(), a numpy round trip)",
                "keep the loss tensor itself for backward(); log loss.item() separately",
                {"cut_at": None}, module=module))
            continue
        if id(tensor) not in graph.leaf_of:
            evidence = _use_evidence(graph, tensor, library)
            if evidence is None:
                if ran is None:
                    ran = _ran_in_this_forward(graph)
                evidence = _cut_evidence(graph, ran.get(id(tensor)), name, module)
                fix = (f"keep {module or name}'s output in the graph (no .detach(), .data, "
                       f".item() or no_grad block around it); if it is meant to stay fixed (a target "
                       f"network, a teacher), freeze it with requires_grad_(False)"
                       if evidence is not None else None)
            else:
                fix = None
            if evidence is None and module is not None and module in reached_modules:
                evidence = (None, f"other parameters of {module} get gradients, so {module} "
                                  f"ran: {name} was used through a path that carries none")
            if evidence is not None:
                node, how = evidence
                findings.append(model_finding(
                    "no_gradient", node, [name],
                    f"{name} requires grad but gets no gradient from the loss: its path was "
                    f"cut.",
                    f"{name} requires grad but the loss's graph does not reach it: {how}",
                    "a .detach(), .data, .item() or torch.tensor(existing), a numpy round "
                    "trip, a no_grad block, argmax or an int cast between the parameter and "
                    "the loss",
                    fix or f"use {name} itself in forward (not a detached alias or a copy)",
                    {"cut_at": None if node is None else node.name()}, module=module))
            else:
                findings.append(model_finding(
                    "unused_parameter", None, [name],
                    f"{name} is never reached by the loss.",
                    f"{name} requires grad but the loss's graph does not reach it (nothing in "
                    f"the graph holds it or a copy of it)",
                    "a layer defined and never called in forward, or whose output was cut "
                    "before the loss (a .detach(), .data, .item(), a no_grad block, argmax, an "
                    "int cast); for a PyTorch model, run its forward inside "
                    "gradviz.debug.torch_scopes() to tell which",
                    "call the layer in forward, remove it, or freeze it with "
                    "requires_grad_(False) if it is meant to be unused",
                    {}, severity="warning", module=module))
            continue
        alias = _detached_alias(graph, tensor, library)
        if alias is not None:
            node, label = alias
            findings.append(model_finding(
                "no_gradient", node, [name],
                f"{name} gets no gradient through one of its uses: {node.name()} uses a "
                f"detached alias of it.",
                f"{name} is reached by the loss, but {node.name()} also uses it through a "
                f"tensor that shares its memory and does not require grad (saved {label}): "
                f"that use adds nothing to {name}'s gradient",
                "a .detach() or .data of the parameter in forward (a tied weight used as "
                "weight.detach(), a weight read through .data)",
                f"use {name} itself there; detach only what must not be trained",
                {"cut_at": node.name(), "saved": label}, module=module))
            continue
        grad = grads.get(id(tensor), "missing")
        if isinstance(grad, str):
            continue
        if grad is None or (grad.size and not np.any(grad)):
            leaf = graph.leaf_of[id(tensor)]
            for node in zero_nodes:
                if id(tensor) in graph.leaves_below(node):
                    if op_of(node) in _SAMPLES:
                        cause = (f"{op_of(node).lower()}() draws a sample, and a sample "
                                 f"carries no gradient to its parameters")
                        fix = ("reparameterize: mean + std * randn_like(std) (rsample() of "
                               "a distribution), or a score-function estimator")
                    else:
                        cause = (f"{op_of(node).lower()} is piecewise constant, so no "
                                 f"gradient passes it")
                        fix = ("keep the non-differentiable op out of the training path, or "
                               "use a straight-through estimator (x + (round(x) - x).detach())")
                    findings.append(model_finding(
                        "no_gradient", node, [name],
                        f"{name} gets an all-zero gradient: {node.name()} lies on its path.",
                        f"{name}'s gradient is exactly zero: its only path to the loss goes "
                        f"through {node.name()}, whose gradient is zero",
                        cause, fix, {"cut_at": node.name(), "leaf": leaf.name()},
                        module=module))
                    break
    return findings


def _ran_in_this_forward(graph):
    """``{id(parameter): (module, sequence number)}`` for the parameters of the modules called
    inside a module call that built nodes of this graph (Note [Modules cut off upstream]);
    each parameter under the innermost such module."""
    library = graph.library
    frames = {}
    for node in graph.nodes:
        if library.is_leaf(node):
            continue  # a parameter's AccumulateGrad keeps the frame of the call that made it first
        frame = library.frame(node)
        while frame is not None and id(frame) not in frames:
            frames[id(frame)] = frame
            frame = getattr(frame, "parent", None)
    ran: dict[int, tuple[object, int, int]] = {}
    top = [item for pair in _top_level_calls(graph, frames.values()) for item in pair]
    for calls in [top] + [getattr(frame, "calls", None) or () for frame in frames.values()]:
        if isinstance(calls, dict):  # torch_scopes' ModuleCall
            calls = [item for pair in calls.values() for item in pair]
        for module, sequence in zip(calls[0::2], calls[1::2]):
            parameters = getattr(module, "parameters", None)
            if not callable(parameters):
                continue
            found = list(parameters())
            for parameter in found:
                known = ran.get(id(parameter))
                if known is None or known[2] > len(found):
                    ran[id(parameter)] = (module, sequence, len(found))
    return ran


def _top_level_calls(graph, frames):
    """``[(module, sequence number)]``: the module calls made outside every other module call
    during the forward that built the loss's graph, other than those that built its nodes
    (Note [Modules cut off upstream])."""
    library = graph.library
    outermost = []
    for frame in frames:
        if getattr(frame, "module", None) is None:
            continue
        above = getattr(frame, "parent", None)
        while above is not None and getattr(above, "module", None) is None:
            above = getattr(above, "parent", None)
        if above is None and getattr(frame, "sequence", None) is not None:
            outermost.append(frame)
    if not outermost:
        return []
    calls = library.top_module_calls(outermost)
    reached = {id(frame.module) for frame in outermost}
    first = min(frame.sequence for frame in outermost)
    # the previous forward's calls of the modules that built this graph end the window
    start = max((sequence for module, sequence in calls if id(module) in reached and sequence < first),
                default=-1)
    end = max((library.sequence(node) for node in graph.nodes if not library.is_leaf(node)), default=first)
    return [(module, sequence) for module, sequence in calls
            if start < sequence <= end and id(module) not in reached]


def _cut_evidence(graph, call, name, module):
    """(node, how) for a parameter of a module that ran in this forward (``call``, from
    :func:`_ran_in_this_forward`) although the loss does not reach it; the node is the first
    one of the loss's graph made after the call began."""
    if call is None:
        return None
    called, sequence, _ = call
    library = graph.library
    after, entering = None, []
    if sequence is not None:
        later = [n for n in graph.nodes if not library.is_leaf(n)
                 and library.sequence(n) >= sequence]
        # where the cut tensor enters: the first later node with an input that needs no
        # gradient; else the first later node
        entering = [n for n in later if any(child is None for child, _ in n.next_functions)]
        if entering or later:
            after = min(entering or later, key=library.sequence)
    which = module or type(called).__name__
    where = ""
    if after is not None:
        where = (f"; the loss's graph resumes at {after.name()}, the first of its nodes made "
                 f"after {which} was called"
                 f"{' that takes an input outside the graph' if entering else ''}")
    return after, (f"{which} ({type(called).__name__}) ran in this forward, but none of its "
                   f"output reaches the loss: the path was cut after it{where}")


def _detached_alias(graph, tensor, library):
    """``(node, label)`` of a node that saved a tensor sharing ``tensor``'s memory that does
    not require grad (a ``.detach()`` or ``.data`` of a parameter the loss also reaches), or
    None."""
    aliases = graph.saved_by_memory().get(library.memory_key(tensor), ())
    for node, label, saved in aliases:
        if saved is not tensor and not saved.requires_grad and \
                library.shares_memory(tensor, saved):
            return node, label
    return None


def _use_evidence(graph, tensor, library):
    """(node, how) when a node of the graph holds an alias or a copy of ``tensor``."""
    values = library.array(tensor)
    for node in graph.nodes:
        if library.is_leaf(node):
            variable = node.variable
            if variable is not tensor and library.shares_memory(tensor, variable):
                return node, ("a leaf of the graph shares its memory (an alias made outside "
                              "autograd)")
            continue
        for label, saved, _ in library.saved(node):
            if saved is None:
                continue
            if library.shares_memory(tensor, saved):
                return node, (f"{node.name()} holds a tensor sharing its memory (saved "
                              f"{label}): a .detach() or .data of it")
            array = library.array(saved) if not isinstance(saved, np.ndarray) else saved
            if array.shape == values.shape and array.size > 1 and \
                    np.array_equal(array, values):
                return node, (f"{node.name()} holds a copy of its values (saved {label}): "
                              f"torch.tensor(existing), a numpy round trip or a clone outside "
                              f"autograd")
    return None


# ---- unregistered_parameter ----------------------------------------------------------------

def _unregistered(graph, model, names, library):
    """Leaves of the graph that require grad and that ``model.parameters()`` (what an optimizer
    is given) does not hold, although they belong to the model: a tensor attribute that is not
    a Parameter, the parameters of modules kept in a plain list, tuple or dict, and a
    Parameter made during the model's own forward (Note [Unregistered parameters])."""
    registered = set(names) | {id(p) for p in model.parameters()}
    owned: dict[int, tuple[str, str]] = {}  # id(tensor) -> (its path in the model, how)
    for path, module in model.named_modules():
        for attribute, value in vars(module).items():
            if attribute.startswith("_"):
                continue
            prefix = f"{path}.{attribute}" if path else attribute
            _collect_unregistered(value, prefix, registered, owned, library)
    inside = {id(module) for module in model.modules()}
    consumers: dict[int, list] = {}
    for node in graph.nodes:
        for child, _ in node.next_functions:
            if child is not None and library.is_leaf(child):
                consumers.setdefault(id(child), []).append(node)
    findings = []
    for key, leaf in graph.leaf_of.items():
        variable = leaf.variable
        if key in registered or not variable.requires_grad:
            continue
        name, how = owned.get(key, (None, None))
        if name is None:
            if not _is_parameter(variable, library):
                continue  # an input made to require grad (saliency, adversarial examples)
            maker = _made_in(consumers.get(id(leaf), ()), inside, library)
            if maker is None:
                continue  # another model's parameter (a GAN's discriminator)
            name = f"<Parameter {list(variable.shape)} made in {maker}'s forward>"
            how = "an nn.Parameter created during forward, a new one on every call"
        findings.append(model_finding(
            "unregistered_parameter", leaf, [name],
            f"{name} gets a gradient but is not among the model's parameters.",
            f"{name} requires grad and the loss reaches it, but model.parameters() does not "
            f"hold it ({how}): an optimizer built from model.parameters() never updates it",
            "a module kept in a plain list or dict instead of nn.ModuleList/ModuleDict, a "
            "tensor attribute made with requires_grad=True instead of nn.Parameter, or a "
            "Parameter created in forward",
            "register it: nn.ModuleList/nn.ModuleDict for modules, nn.Parameter assigned in "
            "__init__ for tensors",
            {"how": how}, module=module_of(name) if key in owned else None))
    return findings


_IN_CONTAINER = "a parameter of a module kept in a plain Python list, tuple or dict"


def _collect_unregistered(value, prefix, registered, owned, library, depth=0):
    """Note into ``owned`` the tensors requiring grad reachable from an attribute ``value``
    that the model does not register: the attribute itself, the contents of plain lists,
    tuples and dicts, and the parameters of modules inside them."""
    if depth > 3:
        return
    if library.is_tensor(value):
        if value.requires_grad and value.grad_fn is None and id(value) not in registered:
            owned.setdefault(id(value), (prefix, "a tensor attribute that is not an "
                                                 "nn.Parameter"))
        return
    items: list[tuple[object, Any]]
    if isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    elif isinstance(value, dict):
        items = [(key, item) for key, item in value.items() if isinstance(key, str)]
    else:
        return
    for key, item in items:
        path = f"{prefix}.{key}"
        if callable(getattr(item, "named_parameters", None)):
            for name, parameter in item.named_parameters():
                if id(parameter) not in registered:
                    owned.setdefault(id(parameter), (f"{path}.{name}", _IN_CONTAINER))
        else:
            _collect_unregistered(item, path, registered, owned, library, depth + 1)


def _is_parameter(tensor, library):
    if library.torch is None:
        return isinstance(tensor, Parameter)
    return isinstance(tensor, library.torch.nn.Parameter)


def _made_in(nodes, inside, library):
    """The class name of the model's module in whose forward the nodes that use a leaf were
    made (the module call that ``library.frame`` keeps), or None when none was."""
    for node in nodes:
        frame = library.frame(node)
        while frame is not None:
            module = getattr(frame, "module", None)
            if module is not None:
                return type(module).__name__ if id(module) in inside else None
            frame = getattr(frame, "parent", None)
    return None


# ---- broadcast_suspect -------------------------------------------------------------------

def _broadcasts(graph, names):
    findings = []
    library = graph.library
    for node in graph.nodes:
        if library.is_leaf(node) or op_of(node) not in _ELEMENTWISE:
            continue
        saved = {label: tensor for label, tensor, _ in library.saved(node)
                 if tensor is not None}
        known = []
        for index, (child, nr) in enumerate(node.next_functions):
            shape = _before_expand(library, child, nr) if child is not None else None
            if shape is None:  # an input that needs no gradient: from what the node saved
                keys = (("input", index),) + (("self",) if index == 0 else ("other", "target"))
                for key in keys:
                    if key in saved:
                        shape = _compact_shape(saved[key])
                        break
            if shape is not None:
                known.append(shape)
        out = library.edge_shape(node, 0)
        suspect = None
        if len(known) >= 2:
            try:
                combined = tuple(np.broadcast_shapes(*known))
            except ValueError:
                continue
            size = int(np.prod(combined))
            if all(int(np.prod(s)) < size for s in known) and len(combined) >= 2 and size > 1:
                suspect = (known, combined)
        elif len(known) == 1 and out is not None and len(out) == 2 and out[0] == out[1] > 1:
            (shape,) = known
            n = out[0]
            if shape in ((n, 1), (1, n), (n,)):
                suspect = (known, out)
        if suspect is None:
            continue
        inputs, combined = suspect
        params = sorted({names[i] for i in graph.leaves_below(node) if i in names})
        text = " and ".join(str(list(s)) for s in inputs)
        findings.append(model_finding(
            "broadcast_suspect", node, params,
            f"{node.name()} broadcasts {text} to {list(combined)}.",
            f"{node.name()} combines inputs of shapes {text} into {list(combined)}: each input "
            f"is broadcast along a dimension of its own, so every entry meets every other",
            "a prediction of shape [N, 1] compared with a target of shape [N] (or the reverse), "
            "as in mse_loss(model(x), y)",
            "make the shapes equal first: pred.squeeze(-1), or y.unsqueeze(-1)",
            {"input_shapes": [list(s) for s in inputs], "output_shape": list(combined)},
            severity="warning"))
    return findings


def _before_expand(library, node, nr):
    """The shape of edge ``(node, nr)``, or of what an ``expand`` there was applied to (torch's
    losses expand both inputs to the broadcast shape first)."""
    if node is not None and not library.is_leaf(node) and op_of(node) == "Expand":
        sizes = getattr(node, "_saved_self_sym_sizes", None)
        if sizes is not None:
            return tuple(int(s) for s in sizes)
        if node.next_functions:
            child, child_nr = node.next_functions[0]
            return library.edge_shape(child, child_nr)
    return library.edge_shape(node, nr)


def _compact_shape(tensor):
    """A tensor's shape with the dimensions it was broadcast along (stride 0) as 1."""
    strides = tensor.strides if isinstance(tensor, np.ndarray) else (
        tensor._data.strides if isinstance(tensor, Tensor) else tensor.stride())
    return tuple(1 if stride == 0 and size > 1 else size
                 for size, stride in zip(tensor.shape, strides))


# ---- double_softmax ----------------------------------------------------------------------

def _through_views(node):
    while node is not None and op_of(node) in _VIEWS and node.next_functions:
        node = node.next_functions[0][0]
    return node


def _double_softmax(graph, names):
    findings = []
    for node in graph.nodes:
        op = op_of(node)
        if op in ("NllLoss", "NllLoss2D") and node.next_functions:
            inner = _through_views(node.next_functions[0][0])
            if inner is None or op_of(inner) != "LogSoftmax" or not inner.next_functions:
                continue
            first = _through_views(inner.next_functions[0][0])
            if first is None or op_of(first) not in ("Softmax", "LogSoftmax"):
                continue
            what, loss = op_of(first).lower(), "cross_entropy (log_softmax + nll_loss)"
            fix = ("pass the raw logits to cross_entropy (or use nll_loss on log_softmax "
                   "output)")
        elif op == "BinaryCrossEntropyWithLogits" and node.next_functions:
            first = _through_views(node.next_functions[0][0])
            if first is None or op_of(first) != "Sigmoid":
                continue
            what, loss = "sigmoid", "binary_cross_entropy_with_logits"
            fix = "pass the raw logits, or use binary_cross_entropy on the sigmoid output"
        else:
            continue
        params = sorted({names[i] for i in graph.leaves_below(first) if i in names})
        findings.append(model_finding(
            "double_softmax", first, params,
            f"a {what} output is fed into {loss}, which applies it again.",
            f"{first.name()} ({what}) feeds {node.name()}: {loss} applies the "
            f"{'softmax' if what != 'sigmoid' else 'sigmoid'} itself, so it is applied twice "
            f"and the gradients shrink",
            f"{what} in the model's forward and again in the loss", fix,
            {"activation": first.name(), "loss": node.name()}))
    return findings


# ---- inplace_overwrite -------------------------------------------------------------------

def _inplace(graph, names):
    library = graph.library
    findings = []
    for node in graph.nodes:
        if library.is_leaf(node):
            continue
        for label, _, moved in library.saved(node):
            if moved is None:
                continue
            before, now, overwriter, producer = moved
            if overwriter is None:
                overwriter = _overwriter(graph, node, producer)
            writer = None if overwriter is None else overwriter.name()
            params = sorted({names[i] for i in graph.leaves_below(node) if i in names})
            saver_site, writer_site = library.site(node), library.site(overwriter)
            at = f" (at {saver_site})" if saver_site else ""
            by = f"{writer}, an in-place op" if writer else "an in-place op"
            if writer_site:
                by += f" at {writer_site}"
            versions = (f" (version {before} when saved, {now} now)"
                        if before is not None else "")
            lines = ("" if saver_site and writer_site else
                     " (to see both source lines, run the forward under detect_anomaly() or, "
                     "on gradviz, inside gradviz.record())")
            findings.append(model_finding(
                "inplace_overwrite", node, params,
                f"a tensor {node.name()}{at} saved for backward was overwritten in place"
                f"{' by ' + writer if writer else ''}"
                f"{' at ' + writer_site if writer_site else ''}.",
                f"{node.name()}{at} saved {label} for backward, then {by}, overwrote it"
                f"{versions}; backward() will raise",
                f"an in-place op (relu_, add_, x[...] = ..., +=) on a tensor an earlier op "
                f"still needs{lines}",
                "use the out-of-place op (x = x + 1, relu(x)), or clone before modifying",
                {"saver": node.name(), "overwriter": writer, "saved": label,
                 "saved_version": before, "version": now, "saver_source": saver_site,
                 "overwriter_source": writer_site}))
            if overwriter is not None:
                findings[-1].related_nodes.append(overwriter)
    return findings


def _overwriter(graph, saver, producer):
    """The node of the in-place op that overwrote a tensor ``saver`` saved, found from the op
    that made the tensor (``producer``: a node, or torch's op name, with the output number):
    an in-place op's node takes the tensor's old ``grad_fn`` as its first edge, and every op
    that uses the tensor after it takes the in-place node instead; so it is the last node made
    after ``saver`` whose first edge is that output. None when the graph does not hold it."""
    library = graph.library
    if producer is None:
        return None
    made_by, output_nr = producer
    after = library.sequence(saver)
    inputs = [child for child, _ in saver.next_functions if child is not None]
    if isinstance(made_by, str):
        # torch names the saver for a saved output ("output 0 of Sigmoid"), the tensor's
        # grad_fn now (the in-place op) for a saved input: that op's node takes the node
        # that made the input as its first edge
        name = made_by
        made_by = saver if op_of(saver) == name else None
        if made_by is None:
            found = [n for n in graph.nodes if not library.is_leaf(n) and op_of(n) == name
                     and n.next_functions and n.next_functions[0][0] in inputs
                     and library.sequence(n) > after]
            return min(found, key=library.sequence) if found else None
    if made_by is None:
        return None
    candidates = [n for n in graph.nodes if not library.is_leaf(n) and n.next_functions
                  and n.next_functions[0] == (made_by, output_nr)
                  and library.sequence(n) > after]
    return max(candidates, key=library.sequence) if candidates else None


# ---- nonfinite_origin --------------------------------------------------------------------

def _nonfinite_entries(array):
    if array.dtype.kind not in "fc":
        return 0
    return int(array.size - np.count_nonzero(np.isfinite(array)))


def _masks_out(label, array) -> bool:
    """Whether a saved tensor's non-finite entries are an attention mask's -inf: masked
    positions, not an overflow (Note [Model-level checks], ``nonfinite_origin``)."""
    return (label == "attn_mask" and array.dtype.kind == "f" and not np.isnan(array).any()
            and not np.isposinf(array).any())


def _nonfinite(graph, named, grads, pass_result, library):
    findings = []
    names = {id(tensor): name for name, tensor in named}
    bad_params = sorted(name for name, tensor in named
                        if grads.get(id(tensor)) is not None
                        and _nonfinite_entries(grads[id(tensor)]))
    for name, tensor in named:  # a parameter already non-finite: the origin is there
        count = _nonfinite_entries(library.array(tensor))
        if count:
            findings.append(model_finding(
                "nonfinite_origin", graph.leaf_of.get(id(tensor)), [name],
                f"{name} itself holds {count} NaN/Inf entries.",
                f"{name} holds {count} non-finite entries before forward even ran",
                "an earlier optimizer step with an exploding or NaN gradient",
                "find that step (doctor on its loss), lower the learning rate or clip "
                "gradients", {"entries": count}))
            return findings
    forward = sorted((n for n in graph.nodes if not library.is_leaf(n)), key=library.sequence)
    for node in forward:
        bad = []
        for label, saved, _ in library.saved(node):
            if saved is None:
                continue
            array = saved if isinstance(saved, np.ndarray) else library.array(saved)
            count = _nonfinite_entries(array)
            if count and not _masks_out(label, array):
                bad.append((label, count, library.producer(saved)))
        if bad:
            text = ", ".join(f"{label} ({count} entries)" for label, count, _ in bad)
            # a non-finite input made by an op that did not save its output: that op (past
            # views such as a transpose, which only pass their input's values on)
            producers = [_through_views(p) for _, _, p in bad if p is not None and p is not node]
            producers = [p for p in producers if p is not None and p is not node
                         and not library.is_leaf(p)]
            seen = f"saved {text}"
            if producers:
                seen = f"its output, saved by {node.name()} as {text}"
                node = min(producers, key=library.sequence)
            below = bad_params or sorted({names[i] for i in graph.leaves_below(node)
                                          if i in names})
            findings.append(model_finding(
                "nonfinite_origin", node, below,
                f"the first NaN/Inf of forward is made by {node.name()}.",
                f"{node.name()} is the first op (in forward order) with non-finite values: "
                f"{seen}",
                f"{op_of(node).lower()} at an input outside its domain (log of 0, division by "
                f"0, exp overflow) or a non-finite input",
                "clamp the input (x.clamp_min(eps)) or use the stable form (log_softmax, "
                "logsumexp, binary_cross_entropy_with_logits)",
                {"saved": [label for label, _, _ in bad],
                 "entries": sum(count for _, count, _ in bad)}))
            return findings
    first = None if pass_result is None else getattr(pass_result, "first_nonfinite", None)
    if first is not None:
        node, (slot, nan, inf, index), incoming, _ = first
        # a custom Function's non-finite backward is the ``nonfinite`` finding, with its
        # finite differences; the model-level origin is for built-in ops
        if incoming is None and getattr(node, "_forward_cls", None) is None:
            inputs = []
            for label, saved, _ in library.saved(node):
                if saved is None:
                    continue
                array = saved if isinstance(saved, np.ndarray) else library.array(saved)
                if array.dtype.kind == "f" and array.size and not np.all(array != 0):
                    inputs.append(f"saved {label} has {int(np.sum(array == 0))} zero entries")
            where = f" ({'; '.join(inputs)})" if inputs else ""
            below = bad_params or sorted({names[i] for i in graph.leaves_below(node)
                                          if i in names})
            findings.append(model_finding(
                "nonfinite_origin", node, below,
                f"the first NaN/Inf gradient is made by {node.name()} from finite gradients.",
                f"{node.name()}'s backward made {nan} NaN and {inf} Inf entries (input {slot}) "
                f"from finite incoming gradients{where}",
                f"the derivative of {op_of(node).lower()} is infinite at some input (sqrt or "
                f"pow(x, p<1) at 0, log at 0, acos/asin at +-1, norm of a zero vector)",
                "keep the input off that point: sqrt(x + eps), x.clamp_min(eps), or a "
                "where() that avoids it in both branches",
                {"nan": nan, "inf": inf, "input": slot, "first": list(index)}))
    return findings


# ---- vanishing_gradient, exploding_gradient ----------------------------------------------

def _depth(graph, named, grads):
    rows = []
    for name, tensor in named:
        grad = grads.get(id(tensor))
        leaf = graph.leaf_of.get(id(tensor))
        if grad is None or leaf is None or grad.ndim < 2 or not np.all(np.isfinite(grad)):
            continue
        norm = float(np.linalg.norm(grad))
        if norm == 0:
            continue  # no gradient at all is not a small one: no_gradient or dead_units
        rows.append((graph.depth.get(leaf, 0), name, norm, leaf))
    if len({depth for depth, *_ in rows}) < 3:
        return []
    rows.sort(key=lambda row: row[0])
    near, far = rows[0], rows[-1]
    if near[2] == 0:
        return []
    ratio = far[2] / near[2]
    norms = {name: norm for _, name, norm, _ in rows}
    if ratio < _VANISHING:
        concerned = [name for _, name, norm, _ in rows if norm < near[2] * 1e-2]
        return [model_finding(
            "vanishing_gradient", far[3], concerned,
            f"gradients vanish with depth: {far[1]} gets {ratio:.1e} times the gradient norm "
            f"of {near[1]}.",
            f"the gradient norm falls from {near[2]:.3g} at {near[1]} (nearest the loss) to "
            f"{far[2]:.3g} at {far[1]} (farthest), a factor of {ratio:.1e}",
            "saturating activations (sigmoid, tanh) stacked deep, or too small an init",
            "use ReLU-family activations, normalization layers, residual connections, or a "
            "variance-preserving init (kaiming/xavier)",
            {"norms": norms, "ratio": ratio}, severity="warning")]
    if ratio > _EXPLODING:
        concerned = [name for _, name, norm, _ in rows if norm > near[2] * 1e2]
        return [model_finding(
            "exploding_gradient", far[3], concerned,
            f"gradients explode with depth: {far[1]} gets {ratio:.1e} times the gradient norm "
            f"of {near[1]}.",
            f"the gradient norm grows from {near[2]:.3g} at {near[1]} (nearest the loss) to "
            f"{far[2]:.3g} at {far[1]} (farthest), a factor of {ratio:.1e}",
            "weights too large for the depth (init scale), or no normalization",
            "a variance-preserving init, normalization layers, or gradient clipping",
            {"norms": norms, "ratio": ratio}, severity="warning")]
    return []


# ---- dead_units --------------------------------------------------------------------------

def _dead(graph, named, grads):
    if not any(op_of(n) in _RELU_LIKE for n in graph.nodes):
        return []
    uses: dict[object, set[str]] = {}  # leaf node -> the ops that read it
    for node in graph.nodes:
        for child, _ in node.next_functions:
            if child is not None and graph.library.is_leaf(child):
                uses.setdefault(child, set()).add(op_of(node))
    findings = []
    for name, tensor in named:
        grad = grads.get(id(tensor))
        if grad is None or grad.ndim != 2 or grad.shape[0] < 2 or not np.all(np.isfinite(grad)):
            continue  # a NaN/Inf gradient is nonfinite_origin's; its zero rows say nothing
        readers = uses.get(graph.leaf_of.get(id(tensor)))
        if readers and readers <= _LOOKUPS:
            continue  # an embedding table: the rows of tokens not in the batch get nothing
        dead = np.flatnonzero(~np.any(grad != 0, axis=1))
        if dead.size < _DEAD_FRACTION * grad.shape[0]:
            continue
        module = module_of(name)
        findings.append(model_finding(
            "dead_units", graph.leaf_of.get(id(tensor)), [name],
            f"{dead.size} of {grad.shape[0]} units of {module or name} get zero gradient for "
            f"the whole batch.",
            f"{dead.size} of {grad.shape[0]} rows (units) of {name}'s gradient are exactly zero "
            f"for the whole batch (units {dead[:8].tolist()}{'...' if dead.size > 8 else ''}): "
            f"their ReLU is inactive for every example",
            "dead ReLUs: a large negative bias, too high a learning rate, or inputs that are "
            "all negative",
            "re-initialize the layer (smaller negative bias), lower the learning rate, or use "
            "LeakyReLU/GELU",
            {"dead": int(dead.size), "units": int(grad.shape[0]), "indices": dead.tolist()},
            module=module))
    return findings


# ---- stale_grad --------------------------------------------------------------------------

def _stale(named, grads, graph, library):
    findings = []
    for name, tensor in named:
        held = tensor.grad
        grad = grads.get(id(tensor))
        if held is None or grad is None or id(tensor) not in graph.leaf_of:
            continue
        held = library.array(held).astype(np.float64)
        if held.shape != grad.shape or not np.any(held) or not np.all(np.isfinite(held)):
            continue
        fresh = grad.astype(np.float64)
        if np.allclose(held, fresh, rtol=1e-5, atol=1e-12 + 1e-6 * float(np.abs(fresh).max())):
            continue  # backward of this loss ran once: .grad is its gradient
        norm, now = float(np.linalg.norm(held)), float(np.linalg.norm(fresh))
        findings.append(model_finding(
            "stale_grad", graph.leaf_of.get(id(tensor)), [name],
            f"{name}.grad already held a gradient from an earlier backward.",
            f"{name}.grad holds a gradient (norm {norm:.4g}) that is neither zero nor this "
            f"loss's gradient (norm {now:.4g}): backward() will add to it",
            "a missing optimizer.zero_grad() (or model.zero_grad()) before backward; "
            "intended only when accumulating gradients over several batches (and nothing "
            "to fix if zero_grad runs between this call and backward)",
            "call optimizer.zero_grad() at the start of each step",
            {"grad_norm": norm, "loss_grad_norm": now}, severity="warning",
            module=module_of(name)))
    return findings

"""``torch_scopes``: module paths for PyTorch graphs, so ``record_torch`` shows them too.

Note [Module paths of a PyTorch graph]
--------------------------------------
PyTorch's eager nodes do not say which module built them, and ``record_torch`` only sees the
graph after the forward ran. So the forward runs inside ``with gradviz.debug.torch_scopes():``,
which registers a global forward pre-hook and forward hook for every torch module
(``torch.nn.modules.module.register_module_forward_pre_hook``), removed when the block ends:

* the pre-hook pushes the call (module, path, call number) on this thread's stack and notes
  the autograd sequence number forward has reached (from a one-element probe op);
* the forward hook walks back from the module's outputs through the nodes created since, and
  writes the call's path into each untagged node's ``metadata["gradviz_module"]``. Inner
  modules finish first, so a node keeps the innermost module that built it; the walk goes
  through nodes already tagged and stops at nodes made before the call.

Paths follow the rule gradviz modules use (Note [Module paths] in
``gradviz/autograd/_scopes.py``): a module's names are its keys below the nearest enclosing
running module, and the outermost module adds none; so a gradviz model and its torch twin get
the same paths. A node the module made but did not feed into its outputs (a side computation)
is tagged by the enclosing module whose outputs reach it, if any. ``record_torch`` reads the
tags, and places a parameter's ``AccumulateGrad`` in the module that owns it when ``params``
names it.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque

from ..autograd._scopes import relative_names
from ..instrument._module_paths import named_modules

__all__ = ["torch_scopes", "METADATA_KEY", "CALL_KEY", "ModuleCall"]

#: The key of a torch node's ``metadata`` holding ``(path, types, call serial)``.
METADATA_KEY = "gradviz_module"
#: The key of a torch node's ``metadata`` holding its innermost :class:`ModuleCall`.
CALL_KEY = "gradviz_call"


class ModuleCall:
    """One module call inside :class:`torch_scopes`: the module, the enclosing call (None at
    the top), ``calls``, ``{id(module): (module, sequence number)}`` of the modules called
    directly inside it, at their last call (None until one is), and ``sequence``, the number
    forward had reached when this call began (the shape of gradviz's ``ScopeFrame``); a call
    at the top also holds ``top_calls``, the block's record of the calls made outside every
    other call: the :class:`torch_scopes` block (its :meth:`~torch_scopes.top_module_calls`)."""

    __slots__ = ("module", "parent", "calls", "sequence", "top_calls")

    def __init__(self, module, parent, sequence=None, top_calls=None):
        self.module = module
        self.parent = parent
        self.calls = None
        self.sequence = sequence
        self.top_calls = top_calls


class torch_scopes:
    """Record the module path of every PyTorch node built inside the block, for
    :func:`gradviz.debug.record_torch` (Note [Module paths of a PyTorch graph]).

    Examples
    --------
    >>> import torch
    >>> import gradviz
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    >>> with gradviz.debug.torch_scopes():
    ...     loss = model(torch.ones(1, 2)).sum()
    >>> trace = gradviz.debug.record_torch(loss, params=model)
    >>> sorted({".".join(n["module"]) for n in trace.graph["nodes"] if "module" in n})
    ['0', '1']
    """

    def __init__(self):
        self._handles = []
        self._local = threading.local()
        self._serial = 0
        # (weak reference to the module, sequence number) of the latest calls made outside
        # every other call, as gradviz's engine keeps them (Note [Modules cut off upstream])
        self._top_calls: deque[tuple[weakref.ref, int]] = deque(maxlen=512)

    def top_module_calls(self) -> list:
        """``[(module, sequence number)]`` of the latest module calls made in this block
        outside every other module call, oldest first (collected modules left out)."""
        found = []
        for reference, sequence in list(self._top_calls):
            module = reference()
            if module is not None:
                found.append((module, sequence))
        return found

    def __enter__(self):
        import torch  # gradviz never needs torch unless a torch graph is asked for

        if self._handles:
            raise RuntimeError("this torch_scopes() block is already active")
        self._probe = torch.zeros(1, requires_grad=True)
        modules = torch.nn.modules.module
        self._handles = [modules.register_module_forward_pre_hook(self._pre_hook),
                         modules.register_module_forward_hook(self._hook, always_call=True)]
        return self

    def __exit__(self, *exc):
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        return False

    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _pre_hook(self, module, args):
        import torch

        stack = self._stack()
        if stack:
            owner, path, types = stack[-1][0], stack[-1][1], stack[-1][2]
            names, classes = relative_names(owner, module)
            path, types = path + names, types + classes
        else:
            path, types = (), ()
        start = None
        if torch.is_grad_enabled():  # the probe's node has the next sequence number
            probe = (self._probe * 1).grad_fn
            start = None if probe is None else probe._sequence_nr()  # None: inference mode
        parent = stack[-1][5] if stack else None
        sequence = start
        if sequence is None and not torch.is_inference_mode_enabled():
            with torch.enable_grad():  # a no_grad block: where forward had reached
                probe = (self._probe * 1).grad_fn
            sequence = None if probe is None else probe._sequence_nr()
        call = ModuleCall(module, parent, sequence, None if parent is not None else self)
        if parent is not None:
            if parent.calls is None:
                parent.calls = {}
            parent.calls[id(module)] = (module, sequence)
        elif sequence is not None:
            try:
                self._top_calls.append((weakref.ref(module), sequence))
            except TypeError:  # a module object that takes no weak reference
                pass
        self._serial += 1
        stack.append((module, path, types, self._serial, start, call))

    def _hook(self, module, args, output):
        import torch

        stack = self._stack()
        if not stack or stack[-1][0] is not module:
            return  # a module entered before the block began
        _, path, types, serial, start, call = stack.pop()
        if start is None:
            return
        tag = (path, types, serial)
        pending = [t.grad_fn for t in _tensors(output, torch.Tensor) if t.grad_fn is not None]
        seen = set()
        while pending:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            if node._sequence_nr() < start:
                continue  # made before this call
            metadata = node.metadata
            if METADATA_KEY not in metadata:
                metadata[METADATA_KEY] = tag
                metadata[CALL_KEY] = call
            pending.extend(child for child, _ in node.next_functions if child is not None)


def _tensors(value, tensor_type) -> list:
    """The tensors in a module's output (nested tuples, lists and dicts), iteratively."""
    found, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, tensor_type):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return found


def torch_node_module(node) -> tuple | None:
    """``(path, types, call serial)`` that :class:`torch_scopes` wrote on a torch node."""
    return node.metadata.get(METADATA_KEY)


def module_class_names(params) -> dict:
    """``{path: class names along it}`` for every module below ``params`` when it is a torch
    module (``record_torch(params=model)``), else empty."""
    if not callable(getattr(params, "named_modules", None)):
        return {}
    found = {(): ()}
    for names, classes, _ in named_modules(params):
        found[names] = classes
    return found


def annotate_torch_modules(infos: list, nodes: list, names: dict, module_types: dict) -> None:
    """Add ``module``, ``module_types``, ``module_call`` and owner paths of parameters to the
    graph node dicts ``infos`` of the torch ``nodes`` (same index; None for the GraphRoot),
    as ``gradviz.instrument._module_paths.annotate_modules`` does for gradviz graphs."""
    tags = {}
    for index, node in enumerate(nodes):
        if node is not None:
            tag = node.metadata.get(METADATA_KEY)
            if tag is not None:
                tags[index] = tag
    calls: dict[tuple, set[int]] = {}
    for path, _, serial in tags.values():
        calls.setdefault(path, set()).add(serial)
    number = {(path, serial): rank for path, serials in calls.items()
              for rank, serial in enumerate(sorted(serials))}
    for index, (path, types, serial) in tags.items():
        info = infos[index]
        info["module"], info["module_types"] = list(path), list(types)
        if info["kind"] != "accumulate_grad":
            info["module_call"] = number[(path, serial)]
    for index, node in enumerate(nodes):
        if node is None or not hasattr(node, "variable"):
            continue
        named = names.get(id(node.variable))
        if named is None or named[0] is not node.variable:
            continue
        owner = tuple(named[1].split("."))[:-1]
        types = module_types.get(owner)
        if types is None and not module_types and index in tags:
            continue  # params gave plain names: keep the module that used the leaf
        info = infos[index]
        info["module"] = list(owner)
        info["module_types"] = list(types if types is not None else ("",) * len(owner))

"""Forward scopes: which module call (or ``gradviz.debug.scope`` block) built each graph node.

Note [Module paths]
-------------------
``Module.__call__`` and :class:`scope` push a frame (the engine's ``ScopeFrame``: parent
frame, module, label) as the engine's current scope (Note [Forward scopes] in
``gradviz_ext/_engine.py``) and restore the previous one when they end; every node created
meanwhile keeps the frame in ``Node._scope``. Pushing is one C call that makes one small
object, so a forward that nobody observes stays as fast: no name is looked up, no string is
built.

Everything else is computed when a debugger reads the graph, once per frame:

* :func:`frame_path`, the module path as a tuple of names, outermost first, like the keys of
  ``named_modules()`` split at the dots: ``("blocks", "3", "mlp", "0")``. A module's names
  are its keys under the nearest enclosing *running* module (``self.blocks[3]`` called from
  ``Model.forward`` is ``("blocks", "3")``: the ``ModuleList`` never runs itself). A module
  called with no module running (the model itself) adds no name, so its own nodes have the
  path ``()``; a module not registered under the running one is named by its class. A
  ``scope("encoder")`` block adds ``"encoder"``. Names are plain strings, never interpreted.
* :func:`frame_types`, the class name of each module along the path (``""`` for a user scope).

One frame is one call: the nodes of an RNN cell applied 150 times share one path but carry
150 frames, which is how the roll-up counts repeated applications. Paths are interned, so the
nodes of one path share one tuple.

A frame holds its module until the graph is freed; that is what lets a debugger name the
module and its parameters after the forward returned (the graph holds the parameters anyway).
"""

from __future__ import annotations

from typing import Any

from gradviz_ext import engine as _engine

__all__ = ["Frame", "frame_path", "frame_types", "relative_names", "scope", "node_frame"]

_set_current_scope = _engine.set_current_scope

# Note [Module paths]: one tuple per distinct path (there are as many as modules and scopes)
_interned_paths: dict[tuple, tuple] = {}


Frame = _engine.ScopeFrame


def frame_path(frame) -> tuple:
    """The module path of ``frame``, outermost first (``("blocks", "3", "attn")``)."""
    resolved = frame.resolved
    if resolved is None:
        resolved = _resolve(frame)
    return resolved[0]


def frame_types(frame) -> tuple:
    """The class name of the module at each level of :func:`frame_path` (``""``: a scope)."""
    resolved = frame.resolved
    if resolved is None:
        resolved = _resolve(frame)
    return resolved[1]


def _resolve(frame) -> tuple:
    # iterative: a deep recursion of frames (a recursive module) must not hit Python's limit
    chain = []
    current = frame
    while current is not None and current.resolved is None:
        chain.append(current)
        current = current.parent
    for current in reversed(chain):
        parent = current.parent
        names: tuple[str, ...]
        classes: tuple[str, ...]
        path, types = ((), ()) if parent is None else parent.resolved
        if current.module is None:
            names, classes = (str(current.label),), ("",)
        else:
            owner = _enclosing_module(parent)
            if owner is None:  # the outermost module: the model itself adds no name
                names, classes = (), ()
            else:
                names, classes = relative_names(owner, current.module)
        full = path + names
        current.resolved = (_interned_paths.setdefault(full, full), types + classes)
    return frame.resolved


def _enclosing_module(frame):
    """The module of the nearest module frame at or above ``frame``, or None."""
    while frame is not None:
        if frame.module is not None:
            return frame.module
        frame = frame.parent
    return None


def relative_names(owner, module) -> tuple[tuple, tuple]:
    """The keys leading from ``owner`` to ``module`` through ``_modules`` (the first place
    ``owner.named_modules()`` lists it: depth first, registration order) and the class name
    at each step; the class name alone when ``module`` is not below ``owner``."""
    # Depth first, as named_modules() (a module met again is not entered again), with a stack
    # of (key, module, the iterator over its siblings) above the modules looked at. Only a
    # module with submodules is remembered as seen and entered: a module without any is met
    # only to be compared with ``module``, whose first meeting returns. Names are made for the
    # path found only. (Note [The cost of node_created] in gradviz/instrument/_nodes.py: this
    # runs at the first node of every module call of a recorded forward.)
    seen = {id(owner)}
    above: list[tuple[Any, Any, Any]] = []
    siblings = iter(list(owner.__dict__.get("_modules", _NO_MODULES).items()))
    while True:
        for key, child in siblings:
            if child is None:
                continue
            if child is module and child is not owner:  # the owner itself is never listed
                return (tuple([str(entry[0]) for entry in above] + [str(key)]),
                        tuple([type(entry[1]).__name__ for entry in above]
                              + [type(child).__name__]))
            below = child.__dict__.get("_modules")
            if below and id(child) not in seen:
                seen.add(id(child))
                above.append((key, child, siblings))
                siblings = iter(list(below.items()))
                break
        else:
            if not above:
                break
            siblings = above.pop()[2]
    name = type(module).__name__
    return (name,), (name,)


_NO_MODULES: dict = {}


def node_frame(node):
    """The :class:`Frame` a graph node was created in, or None (outside every module)."""
    return getattr(node, "_scope", None)


class scope:
    """Group the graph nodes created inside the block under ``name`` in the module path.

    Scopes nest with each other and with module calls: inside ``Model.forward``,
    ``with scope("encoder"): self.layers[0](x)`` gives the layer's nodes the path
    ``encoder.layers.0``. The name is kept as a plain string.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(2, requires_grad=True)
    >>> with torch.debug.scope("encoder"):
    ...     y = x * 2
    >>> torch.debug.module_path(y.grad_fn)
    ('encoder',)
    """

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"scope(name) takes a str, got {type(name).__name__}; pass the "
                            "name as text, e.g. scope('encoder')")
        self.name = name
        self._previous: list = []

    def __enter__(self):
        self._previous.append(_engine.push_scope(None, self.name))
        return self

    def __exit__(self, *exc):
        _set_current_scope(self._previous.pop())
        return False

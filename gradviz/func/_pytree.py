"""A small pytree: flatten tuples, lists and dicts of leaves, and unflatten them again.

Enough for ``in_dims``/``out_dims`` and argument structures of :mod:`gradviz.func`
(``torch.utils._pytree`` in PyTorch).
"""

from __future__ import annotations

__all__ = ["tree_flatten", "tree_unflatten", "broadcast_prefix", "describe"]


class Spec:
    """The structure of a pytree: ``kind`` is ``"leaf"``, ``tuple``, ``list``, ``dict`` or a
    namedtuple class; ``children`` the child specs; ``keys`` the dict keys."""

    __slots__ = ("kind", "children", "keys")

    def __init__(self, kind, children=(), keys=None):
        self.kind = kind
        self.children = children
        self.keys = keys

    @property
    def num_leaves(self):
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self):
        return describe(self)


def _is_node(value):
    return isinstance(value, (tuple, list, dict))


def tree_flatten(tree):
    """``(leaves, spec)``."""
    leaves = []

    def walk(node):
        if isinstance(node, dict):
            keys = list(node.keys())
            return Spec(dict, tuple(walk(node[k]) for k in keys), keys)
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            return Spec(type(node), tuple(walk(c) for c in node))
        if isinstance(node, (tuple, list)):
            return Spec(type(node) if type(node) in (tuple, list) else tuple,
                        tuple(walk(c) for c in node))
        leaves.append(node)
        return Spec("leaf")

    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, spec):
    iterator = iter(leaves)

    def build(s):
        if s.kind == "leaf":
            return next(iterator)
        children = [build(c) for c in s.children]
        if s.kind is dict:
            return dict(zip(s.keys, children))
        if s.kind is list:
            return children
        if s.kind is tuple:
            return tuple(children)
        return s.kind(*children)  # a namedtuple

    return build(spec)


def broadcast_prefix(prefix, tree):
    """Expand ``prefix`` (a tree whose leaves apply to whole subtrees of ``tree``) to one value
    per leaf of ``tree``; None if the structures do not match."""
    result = []

    def walk(p, node):
        if not _is_node(p) or p is None:
            count = tree_flatten(node)[1].num_leaves
            result.extend([p] * count)
            return True
        if isinstance(p, dict):
            if not isinstance(node, dict) or set(p.keys()) != set(node.keys()):
                return False
            return all(walk(p[k], node[k]) for k in node)
        if not isinstance(node, (tuple, list)) or isinstance(node, dict) or len(p) != len(node):
            return False
        return all(walk(pc, nc) for pc, nc in zip(p, node))

    return result if walk(prefix, tree) else None


def describe(spec):
    """PyTorch's way of printing a structure (``TreeSpec(tuple, None, [*, *])``)."""
    if spec.kind == "leaf":
        return "*"
    name = spec.kind.__name__ if isinstance(spec.kind, type) else str(spec.kind)
    context = spec.keys if spec.kind is dict else None
    inner = ", ".join(describe(c) for c in spec.children)
    return f"TreeSpec({name}, {context}, [{inner}])"

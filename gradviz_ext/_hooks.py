"""Hook registration: the handles ``register_hook`` returns and the lists they point into.

Plain Python, never compiled (registration is not on any hot path).
"""

import weakref


class RemovableHandle:
    """Returned by ``register_hook``-style calls (tensors, nodes and modules); ``remove()``
    unregisters the hook. ``id`` numbers handles in creation order, as PyTorch's
    ``torch.utils.hooks.RemovableHandle`` (one counter for every kind of hook)."""

    next_id = 0

    def __init__(self, container, hook):
        self._container = weakref.ref(container) if container is not None else None
        self._hook = hook
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1

    def remove(self):
        container = self._container() if self._container is not None else None
        if container is not None:
            for i, hook in enumerate(container):
                if hook is self._hook:
                    del container[i]
                    break
        self._container = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class HookList(list):
    """A list that can be weak-referenced (RemovableHandle holds a weak reference)."""

    __slots__ = ("__weakref__",)


def hook_name(hook):
    """A hook's name for events and inspection (its qualified name when it has one)."""
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)

"""``gradviz.autograd.graph``: the graph's node type and saved-tensor hooks, as
``torch.autograd.graph``."""

from __future__ import annotations

import contextlib

from gradviz_ext import engine as _engine

Node = _engine.Node

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "register_multi_grad_hook"]

# The message of the innermost disable_saved_tensors_hooks block (None: hooks are allowed), and
# how many saved_tensors_hooks blocks are open (disabling them inside one is an error)
_disabled_message = None
_open_blocks = 0


class saved_tensors_hooks:
    """Context manager: pack every tensor saved for backward, unpack it on every access.

    Inside the block, each tensor that an operation (built-in or custom Function) saves for
    backward is passed once to ``pack_hook(tensor)`` at save time, and only the returned
    object is kept. Each time backward (or ``ctx.saved_tensors``) needs the tensor,
    ``unpack_hook(packed)`` is called and must return a Tensor. Blocks nest; the innermost
    pair wins. Hooks active only while backward runs do not apply. Tensors saved under hooks
    are not version-checked (the hooks may store a copy), as in PyTorch.

    Parameters
    ----------
    pack_hook : callable
        ``pack_hook(tensor) -> Any``.
    unpack_hook : callable
        ``unpack_hook(packed) -> Tensor``.

    Examples
    --------
    >>> import gradviz as torch
    >>> log = []
    >>> def pack(t):
    ...     log.append("pack")
    ...     return t.clone()
    >>> def unpack(t):
    ...     log.append("unpack")
    ...     return t
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> log
    ['pack', 'pack', 'unpack', 'unpack']
    >>> x.grad
    tensor([2., 4.])
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        global _open_blocks
        if _disabled_message is not None:
            raise RuntimeError(_disabled_message)
        _engine.push_saved_tensors_hooks(_checked_pack(self.pack_hook), self.unpack_hook)
        _open_blocks += 1
        return self

    def __exit__(self, *exc):
        global _open_blocks
        _engine.pop_saved_tensors_hooks()
        _open_blocks -= 1
        return False


_PACK_IN_PLACE_MESSAGE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook cannot be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook.")


def _checked_pack(pack_hook):
    """``pack_hook``, raising PyTorch's error when it writes its input in place (the tensor's
    version changes during the call). Named as the hook, for recorded events."""
    def pack(tensor):
        counter = tensor._version_counter
        before = counter.value
        packed = pack_hook(tensor)
        if counter.value != before:
            raise RuntimeError(_PACK_IN_PLACE_MESSAGE)
        return packed

    pack.__qualname__ = pack.__name__ = _engine._hook_name(pack_hook)
    return pack


class save_on_cpu(saved_tensors_hooks):
    """Saved-tensor hooks that keep a copy of every saved tensor in CPU memory, as
    ``torch.autograd.graph.save_on_cpu``.

    gradviz computes on the CPU only, so the copy stays where the tensor was; the observable
    behaviour is PyTorch's: backward uses the values at save time (an in-place change made
    afterwards is neither seen nor reported), and ``pin_memory`` is accepted and ignored.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.autograd.graph.save_on_cpu(pin_memory=True):
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    tensor([2., 4.])
    """

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return tensor.device, tensor.detach().clone()

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Context manager: inside it, starting a ``saved_tensors_hooks`` block (or
    ``save_on_cpu``) raises ``RuntimeError(error_message)``, as
    ``torch.autograd.graph.disable_saved_tensors_hooks``.

    For code that cannot work with saved-tensor hooks. Entering it while a
    ``saved_tensors_hooks`` block is open raises the same error. Blocks nest; leaving one
    restores the message of the enclosing one.

    Examples
    --------
    >>> import gradviz as torch
    >>> with torch.autograd.graph.disable_saved_tensors_hooks("hooks are off here"):
    ...     try:
    ...         with torch.autograd.graph.save_on_cpu():
    ...             pass
    ...     except RuntimeError as error:
    ...         print(error)
    hooks are off here
    """
    global _disabled_message
    if _open_blocks:
        raise RuntimeError(error_message)
    previous = _disabled_message
    _disabled_message = error_message
    try:
        yield
    finally:
        _disabled_message = previous


# ---- hooks on several tensors -------------------------------------------------------------

class _MultiHandle:
    """The handle ``register_multi_grad_hook`` returns: ``remove()`` removes every hook."""

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _node_of(tensor):
    """The node whose execution delivers ``tensor``'s gradient: its ``grad_fn``, or the
    gradient accumulator of a leaf."""
    if tensor.grad_fn is not None:
        return tensor.grad_fn
    return _engine.grad_accumulator(tensor) if tensor.requires_grad else None


def _will_execute(task, node):
    """Whether the running backward ``task`` reaches ``node`` and runs it."""
    if node is None or not task.is_needed(node):
        return False
    seen = set()
    stack = [task.graph_root]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        for successor, _ in current.next_functions:
            if successor is not None and id(successor) not in seen:
                seen.add(id(successor))
                stack.append(successor)
    return False


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call ``fn`` once per backward pass for a group of tensors, as
    ``torch.autograd.graph.register_multi_grad_hook``.

    ``mode="all"``: after the gradients of all the tensors that this backward computes are
    known, ``fn(grads)`` gets one entry per tensor (``None`` for a tensor whose gradient is not
    computed). ``mode="any"``: ``fn(grad)`` gets the first gradient computed. ``fn`` must return
    None. Returns a handle whose ``remove()`` unregisters the hooks.

    Examples
    --------
    >>> import gradviz as torch
    >>> a = torch.tensor([1.0], requires_grad=True)
    >>> b = torch.tensor([2.0], requires_grad=True)
    >>> seen = []
    >>> handle = torch.autograd.graph.register_multi_grad_hook((a, b), seen.append)
    >>> (a * 3).sum().backward()
    >>> seen
    [[tensor([3.]), None]]
    """
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    tensors = tuple(tensors)
    if mode == "any":
        fired: dict = {}  # id(task) -> task, for the backward passes that have called fn

        def any_hook(grad):
            task = _engine.current_graph_task()
            for key in [k for k, t in fired.items() if t.done]:
                del fired[key]
            if id(task) in fired:
                return
            fired[id(task)] = task
            fn(grad)

        handles = tuple(t.register_hook(any_hook) for t in tensors if t.requires_grad)
        return _MultiHandle(handles)

    nodes = [_node_of(t) for t in tensors]
    pending: dict = {}  # id(task) -> [task, calls still expected, gradients]

    def all_hook(index):
        def hook(grad):
            task = _engine.current_graph_task()
            entry = pending.get(id(task))
            if entry is None or entry[0] is not task:
                expected = sum(_will_execute(task, node) for node in nodes)
                entry = pending[id(task)] = [task, expected, [None] * len(tensors)]
            entry[2][index] = grad
            entry[1] -= 1
            if entry[1] == 0:
                del pending[id(task)]
                fn(entry[2])

        return hook

    handles = tuple(t.register_hook(all_hook(i)) for i, t in enumerate(tensors)
                    if t.requires_grad)
    return _MultiHandle(handles)

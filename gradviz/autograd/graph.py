"""``gradviz.autograd.graph``: the graph's node type and saved-tensor hooks, as
``torch.autograd.graph``."""

from __future__ import annotations

from gradviz_ext import engine as _engine

Node = _engine.Node

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu"]


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
        _engine.push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _engine.pop_saved_tensors_hooks()
        return False


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

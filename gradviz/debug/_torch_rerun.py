"""The doctor's rerun of a ``torch.autograd.Function`` (Note [The doctor's rerun interface]).

The Function is re-run with real PyTorch, on copies of its recorded arguments (float64 copies
when it accepts them), and its backward is run by ``torch.autograd.grad`` from the fresh
outputs to fresh leaves, so torch's own engine sums a gradient down to its input's shape,
casts it to its input's dtype, materializes the gradients of unused outputs (or passes None,
under ``ctx.set_materialize_grads(False)``) and raises its own errors.

What backward itself returned (a shape torch summed down, a dtype it cast, a None, a
``grad_output`` modified in place) is not visible from outside torch's engine, so the rerun
applies a subclass of the Function whose backward calls the user's and records what it
returned (:func:`_watched`); the user's class and graph are left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import torch

from ._rerun import Rerun

__all__ = ["TorchRerun", "as_array"]


def as_array(tensor):
    """A torch tensor's values as a numpy array (a copy, on the CPU; bfloat16 as float32)."""
    data = tensor.detach()
    if data.is_conj():
        data = data.resolve_conj()
    if data.is_neg():
        data = data.resolve_neg()
    if data.dtype == torch.bfloat16:
        data = data.float()  # numpy has no bfloat16
    return data.cpu().numpy().copy()


class _BackwardRecord:
    """What the re-run Function's backward returned (the fields of gradviz's rerun observer):
    ``reduced`` and ``cast`` by edge (shape and dtype before torch's engine fixed them),
    ``none_edges``, and ``mutated_grads`` by output (values given, values after backward)."""

    def __init__(self):
        self.reduced = {}
        self.cast = {}
        self.none_edges = set()
        self.mutated_grads = {}

    def saw(self, rerun, returned, given, before):
        returned = returned if isinstance(returned, tuple) else (returned,)
        for position, grad in enumerate(returned):
            edge = rerun.edge_of.get(position)
            if edge is None:
                continue
            if grad is None:
                self.none_edges.add(edge)
            elif isinstance(grad, torch.Tensor):
                base = rerun.base[position]
                if tuple(grad.shape) != tuple(base.shape):
                    self.reduced[edge] = tuple(grad.shape)
                name = str(grad.dtype).removeprefix("torch.")
                if name != base.dtype.name:
                    self.cast[edge] = name
        for output, (grad, copy) in enumerate(zip(given, before)):
            if grad is None or copy is None or not isinstance(grad, torch.Tensor):
                continue
            now, then = as_array(grad), as_array(copy)
            if now.shape != then.shape or not np.array_equal(now, then, equal_nan=True):
                self.mutated_grads[output] = (then.astype(np.float64), now.astype(np.float64))


def _watched(cls, rerun):
    """A subclass of ``cls`` whose backward calls ``cls``'s own and, while ``rerun`` is
    watching (inside :meth:`TorchRerun.analytic`), records what it returned."""
    function = torch.autograd.Function
    user = cls.vjp if cls.vjp is not function.vjp else cls.backward
    boxed = getattr(cls, "boxed_grads_call", False)  # then the gradients come as one list

    def backward(ctx, *grads):
        record = rerun.watching
        if record is None:
            return user(ctx, *grads)
        given = list(grads[0]) if boxed else list(grads)
        before = [g.detach().clone() if isinstance(g, torch.Tensor) else None for g in given]
        returned = user(ctx, *grads)
        record.saw(rerun, returned, given, before)
        return returned

    # only backward is replaced: torch allows a Function to define backward or vjp, not both
    return type(cls.__name__, (cls,), {"backward": staticmethod(backward),
                                       "vjp": staticmethod(function.vjp),
                                       "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__})


class TorchRerun(Rerun):
    """A ``torch.autograd.Function``, run through ``torch.autograd.grad``."""

    def __init__(self, cls, args, needs, positions, dtype, rng):
        self.watching = None
        self.keep_dtypes = dtype is None
        self.watched = _watched(cls, self)
        self.edge_of = {p: e for e, p in enumerate(
            i for i, a in enumerate(args) if isinstance(a, torch.Tensor))}
        super().__init__(cls, args, needs, positions, dtype, rng)

    @classmethod
    def positions_of(cls, args, needs):
        return [p for p, a in enumerate(args)
                if p < len(needs) and needs[p] and isinstance(a, torch.Tensor)
                and a.dtype.is_floating_point]

    @staticmethod
    def _array(arg):
        return as_array(arg) if isinstance(arg, torch.Tensor) else None

    @staticmethod
    def scaled(arg, factor):
        return arg.detach() * factor

    def _output_array(self, output):
        return as_array(output)

    def _differentiable(self, output):
        return isinstance(output, torch.Tensor) and output.requires_grad \
            and output.dtype.is_floating_point

    def _tensor(self, position, array):
        original = self.args[position]
        tensor = torch.from_numpy(np.array(array, copy=True))
        if self.keep_dtypes and tensor.dtype != original.dtype:
            tensor = tensor.to(original.dtype)  # a bfloat16 argument, checked as it was
        if original.device.type != "cpu":
            tensor = tensor.to(original.device)
        return tensor

    def _apply(self, call):
        with torch.enable_grad():
            return self.watched.apply(*call)  # the watching subclass: Note at the top

    def _applied_class(self):
        return self.watched

    def _modified_in_forward(self, call, arrays, outputs):
        return _modified_in_forward(call, arrays, outputs)

    @contextlib.contextmanager
    def _library_randomness(self):
        # Note [Random forwards] in _rerun; the CPU generator only (torch.manual_seed would
        # reseed the accelerators' generators too, for good; a CUDA forward's draws stay
        # random, and its node is skipped as not deterministic)
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(self.seed)
            yield

    def _cotangent(self, k, output, scale=1.0, requires_grad=False):
        # np.asarray: a 0-d cotangent times a number is a numpy scalar, not an array
        array = np.asarray(self.cotangents[k] * scale, dtype=self.out_dtypes[k])
        grad = torch.from_numpy(array).to(dtype=output.dtype, device=output.device)
        return grad.requires_grad_(True) if requires_grad else grad

    def analytic(self, scale=1.0, arrays=None, only=None):
        """The backward's vector-Jacobian product, run by ``torch.autograd.grad`` (at
        ``arrays``, default the recorded arguments; with ``only``, from that output alone).

        Returns ``({position: float64 array or None}, record)``.
        """
        outputs, leaves = self._forward(self.base if arrays is None else arrays)
        used = self.diff_outputs if only is None else [only]
        roots = [outputs[k] for k in used]
        grads = [self._cotangent(k, outputs[k], scale) for k in used]
        record = _BackwardRecord()
        self.watching = record
        try:
            captured = torch.autograd.grad(roots, [leaves[p] for p in self.positions], grads,
                                           allow_unused=True)
        finally:
            self.watching = None
        result = {p: None if value is None else as_array(value).astype(np.float64)
                  for p, value in zip(self.positions, captured)}
        return result, record

    # ---- second order (Note [Doctor's double backward]) -----------------------------------
    def cotangent_derivative(self, p, u_p):
        """``d/dv <u_p, vjp_p(x, v)>`` through the graph backward builds, flattened over the
        differentiable outputs."""
        outputs, leaves = self._forward(self.base)
        roots = [outputs[k] for k in self.diff_outputs]
        grads = [self._cotangent(k, outputs[k], requires_grad=True) for k in self.diff_outputs]
        with torch.enable_grad():
            (first,) = torch.autograd.grad(roots, [leaves[p]], grads, create_graph=True,
                                           allow_unused=True)
            derivative: Sequence[torch.Tensor | None]
            if first is None or not first.requires_grad:
                derivative = [None] * len(grads)
            else:
                term = (first * torch.from_numpy(u_p).to(first.dtype)).sum()
                derivative = torch.autograd.grad([term], grads, allow_unused=True)
        return np.concatenate([(np.zeros(tuple(g.shape)) if d is None
                                else as_array(d).astype(np.float64)).reshape(-1)
                               for g, d in zip(grads, derivative)])

    def second_order(self, u):
        """``d/dx sum_p <u_p, vjp_p(x, v)>`` through the graph backward builds (create_graph)."""
        outputs, leaves = self._forward(self.base)
        roots = [outputs[k] for k in self.diff_outputs]
        # the cotangents require grad, as in gradgradcheck: a @once_differentiable backward
        # then returns its gradients on a DelayedError node
        grads = [self._cotangent(k, outputs[k], requires_grad=True) for k in self.diff_outputs]
        inputs = [leaves[p] for p in self.positions]
        with torch.enable_grad():
            first = torch.autograd.grad(roots, inputs, grads, create_graph=True,
                                        allow_unused=True)
            if any(g is not None and g.grad_fn is not None and _delayed_error(g.grad_fn)
                   for g in first):
                raise RuntimeError("its backward is @once_differentiable")
            total = None
            for p, g in zip(self.positions, first):
                if g is None or not g.requires_grad:
                    continue
                term = (g * torch.from_numpy(u[p]).to(g.dtype)).sum()
                total = term if total is None else total + term
            second: Sequence[torch.Tensor | None] = [None] * len(inputs)
            if total is not None:
                second = torch.autograd.grad([total], inputs, allow_unused=True)
        return {p: (np.zeros(self.base[p].shape) if g is None else as_array(g).astype(np.float64))
                for p, g in zip(self.positions, second)}


def _delayed_error(node):
    """torch's node behind the gradients of a @once_differentiable backward under
    create_graph=True (``torch._C._functions.DelayedError``, named ``Error``)."""
    return node.name().rsplit("::", 1)[-1] in ("Error", "DelayedError")


def _modified_in_forward(call, arrays, outputs):
    """Note [Modified in forward] for PyTorch: the tensor arguments that forward saved for
    backward and then modified in place without ``ctx.mark_dirty``, ``{position: (before,
    after)}``. (Unpacking a saved input gives back the tensor object that was saved.)"""
    ctx = next((o.grad_fn for o in outputs if isinstance(o, torch.Tensor)
                and isinstance(o.grad_fn, torch.autograd.function.BackwardCFunction)), None)
    try:
        saved = ctx.saved_tensors if ctx is not None else ()
    except RuntimeError:  # modified after saving: torch raises for that in backward itself
        saved = ()
    saved_ids = {id(t) for t in saved if t is not None}
    found = {}
    for position, tensor in enumerate(call):
        if position not in arrays or not isinstance(tensor, torch.Tensor) \
                or id(tensor) not in saved_ids:
            continue
        if any(tensor is o for o in outputs):
            continue
        before = arrays[position]
        after = as_array(tensor)
        if after.shape == before.shape and not np.array_equal(after, before, equal_nan=True):
            found[position] = (before.astype(np.float64), after.astype(np.float64))
    return found

"""The legacy Function classes kept for backward compatibility: ``InplaceFunction`` and
``NestedIOFunction`` (docs/function_contract.md, rule 16).

``NestedIOFunction`` exists in PyTorch but cannot be used there; gradviz makes its documented
contract work. A subclass defines *instance* methods ``forward_extended(self, *inputs)`` and
``backward_extended(self, *grad_outputs)`` whose inputs and outputs may be nested lists and
tuples of tensors. ``Fn.apply(*nested)`` (or, legacy style, ``Fn()(*nested)``) flattens the
tensors into the node's slots; ``forward_extended`` receives the nesting with tensors that
share data but carry no history, and ``backward_extended`` receives the gradients nested
like the outputs and returns gradients nested like the inputs. ``self`` in both is the ctx:
``save_for_backward``, ``mark_dirty`` and ``mark_non_differentiable`` take nested
arguments, and ``saved_tensors`` comes back nested.

Note [NestedIOFunction's own ctx members]
-----------------------------------------
The reference page documents ``mark_dirty``, ``mark_non_differentiable``,
``save_for_backward``, ``save_for_forward``, ``saved_tensors``, ``set_materialize_grads``,
``set_output_grad_dtype`` and ``input_grad_buffers`` as members of ``NestedIOFunction``
itself, so they are defined on the class. Inside ``forward_extended`` / ``backward_extended``
``self`` is the node (the ctx), whose own versions run. On an instance (the legacy form
``fn = Fn(); fn.set_materialize_grads(False); out = fn(x)``) each call is checked as the ctx
checks it and recorded on the instance; ``fn(...)`` replays the records on the new ctx
before ``forward_extended`` runs, and ``fn.saved_tensors`` returns what was saved, nested.
``input_grad_buffers`` exists only while a backward runs, so on an instance it raises the
ctx's error.
"""

from __future__ import annotations

import types
from typing import Any

from ... import dtypes as _dtypes
from ..._tensor import Tensor, _wrap
from ._ctx import BackwardCFunction, FunctionCtx
from ._function import Function, _apply

__all__ = ["InplaceFunction", "NestedIOFunction"]


class InplaceFunction(Function):
    """A Function with an ``inplace`` flag (legacy; use :class:`Function`)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


# ---- nesting --------------------------------------------------------------------------

def _iter_filter(condition, condition_msg):
    def walk(obj):
        if condition(obj):
            yield obj
        elif obj is None:
            return
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                yield from walk(item)
        else:
            raise ValueError(
                f"Auto nesting doesn't know how to process an input object of type "
                f"{type(obj).__name__}. Accepted types: {condition_msg}, or lists/tuples of them"
            )
    return walk


_iter_tensors = _iter_filter(lambda x: isinstance(x, Tensor), "Tensors")
_iter_none_tensors = _iter_filter(lambda x: x is None or isinstance(x, Tensor), "Tensors or None")


def _unflatten(flat, proto):
    """Rebuild ``proto``'s nesting from the flat sequence ``flat``."""
    def helper(items, proto):
        if not isinstance(proto, (list, tuple)):
            return items[0], items[1:]
        result: list = []
        for element in proto:
            if element is None:
                result.append(None)
            else:
                value, items = helper(items, element)
                result.append(value)
        return type(proto)(result), items
    return helper(tuple(flat), proto)[0]


def _map_tensor_data(obj):
    if isinstance(obj, Tensor):
        return _wrap(obj._data, version_counter=obj._version_counter)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensor_data(o) for o in obj)
    return obj


class _NestedIOBackward(BackwardCFunction):
    """The ctx of a NestedIOFunction: nested save/mark methods, and the Function's own
    methods available on ``self`` (they are written as instance methods)."""

    def save_for_backward(self, *args):
        flat = tuple(_iter_tensors(args))
        BackwardCFunction.save_for_backward(self, *flat)
        self._to_save_nested = args

    @property
    def saved_tensors(self):
        flat = BackwardCFunction.saved_tensors.__get__(self)
        return _unflatten(flat, self._to_save_nested)

    def mark_dirty(self, *args, **kwargs):
        BackwardCFunction.mark_dirty(self, *_iter_tensors((args, tuple(kwargs.values()))))

    def mark_non_differentiable(self, *args, **kwargs):
        BackwardCFunction.mark_non_differentiable(
            self, *_iter_tensors((args, tuple(kwargs.values()))))

    def __getattr__(self, name):
        # helpers defined on the NestedIOFunction subclass, bound to this ctx
        value = getattr(type(self)._forward_cls, name)
        if isinstance(value, types.FunctionType):
            return types.MethodType(value, self)
        return value


class NestedIOFunction(Function):
    """Legacy Function with nested (list/tuple) inputs and outputs; see the module docstring.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.autograd.function import NestedIOFunction
    >>> class AddPair(NestedIOFunction):
    ...     def forward_extended(self, pair, scale):  # self is the ctx
    ...         self.save_for_backward(scale)
    ...         a, b = pair
    ...         return (a + b) * scale
    ...     def backward_extended(self, grad):  # gradients nested like the inputs
    ...         (scale,) = self.saved_tensors
    ...         return (grad * scale, grad * scale), None
    >>> a = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> b = torch.tensor([3.0, 4.0], requires_grad=True)
    >>> AddPair.apply((a, b), torch.tensor(2.0)).sum().backward()
    >>> a.grad
    tensor([2., 2.])
    """

    _backward_base = _NestedIOBackward
    saved_for_forward: Any  # set by save_for_forward (FunctionCtx's), then moved to the records

    @staticmethod
    def forward(ctx, *flat_inputs):
        """Shared forward utility: re-nests the inputs and calls ``forward_extended``."""
        nested = _map_tensor_data(_unflatten(flat_inputs, ctx._nested_input))
        result = type(ctx)._forward_cls.forward_extended(ctx, *nested)
        ctx._nested_output = result
        return tuple(_iter_tensors(result))

    @staticmethod
    def backward(ctx, *gradients):
        """Shared backward utility: re-nests the gradients and calls ``backward_extended``."""
        proto = ctx._nested_output
        nested = _unflatten(gradients, proto)
        if not isinstance(proto, (list, tuple)):
            nested = (nested,)  # forward_extended returned one tensor: one gradient
        result = type(ctx)._forward_cls.backward_extended(ctx, *nested)
        return tuple(_iter_none_tensors(result))

    def forward_extended(self, *input):
        """User defined forward."""
        raise NotImplementedError

    # ---- the ctx members, on the class (Note [NestedIOFunction's own ctx members]) ------
    def _record(self, method: str, *args) -> None:
        records = self.__dict__.setdefault("_ctx_records", {})
        if method in records and method == "set_output_grad_dtype":
            raise RuntimeError("set_output_grad_dtype can only be called once")
        records[method] = args

    def save_for_backward(self, *args):
        """Save tensors (nested in lists and tuples, or None) for ``backward_extended``."""
        tuple(_iter_tensors(args))  # torch's check: tensors, or lists/tuples of them
        self._record("save_for_backward", *args)

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, nested as they were given."""
        records = self.__dict__.get("_ctx_records", {})
        return records.get("save_for_backward", ())

    def save_for_forward(self, *tensors):
        """Save tensors (or None) for ``jvp``: see ``Function.save_for_forward``."""
        # checks the arguments as the ctx does (it only reads them and sets saved_for_forward)
        FunctionCtx.save_for_forward(self, *tensors)  # type: ignore[arg-type]
        del self.saved_for_forward
        self._record("save_for_forward", *tensors)

    def mark_dirty(self, *args, **kwargs):
        """Mark inputs (nested) that forward modified in place: see ``Function.mark_dirty``."""
        self._record("mark_dirty", *_iter_tensors((args, tuple(kwargs.values()))))

    def mark_non_differentiable(self, *args, **kwargs):
        """Mark outputs (nested) without a gradient: see ``Function.mark_non_differentiable``."""
        self._record("mark_non_differentiable", *_iter_tensors((args, tuple(kwargs.values()))))

    def set_materialize_grads(self, value: bool):
        """Whether missing output gradients become zeros (default True)."""
        self._record("set_materialize_grads", value)

    def set_output_grad_dtype(self, *dtypes):
        """Declare, per output, the dtype ``backward_extended`` gets its gradient in (a dtype,
        or None to pass it through uncast); at most once, one per returned value."""
        for index, value in enumerate(dtypes):
            if value is not None and not isinstance(value, _dtypes.dtype):
                raise TypeError(
                    f"set_output_grad_dtype expects a dtype or None for each output, but got "
                    f"{type(value).__name__} for output {index}")
        self._record("set_output_grad_dtype", *dtypes)

    @property
    def input_grad_buffers(self):
        """The engine's pending gradient buffers of the inputs; only while this Function's
        backward runs (there ``self`` is the node: see ``BackwardCFunction``)."""
        raise RuntimeError(
            f"input_grad_buffers of {type(self).__name__} is only available while its backward "
            "is running (during backward(), autograd.backward() or autograd.grad()); inside "
            "backward_extended, read it from self")

    def backward_extended(self, *grad_output):
        """User defined backward."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        flat = tuple(_iter_tensors(args))
        attributes: dict = {}
        return _apply_nested(cls, args, flat, attributes)

    def __call__(self, *args):
        # the legacy call form: attributes set on the instance are visible on ``self``, and
        # ctx calls made on the instance are replayed on the ctx
        flat = tuple(_iter_tensors(args))
        attributes = dict(vars(self))
        records = attributes.pop("_ctx_records", {})
        return _apply_nested(type(self), args, flat, attributes, records)


def _apply_nested(cls, nested_args, flat, attributes, records=None):
    def prepare(ctx):
        ctx.__dict__.update(attributes)
        ctx._nested_input = nested_args
        ctx._to_save_nested = ()
        for method, recorded in (records or {}).items():
            getattr(ctx, method)(*recorded)

    ctx, outputs = _apply(cls, flat, {}, prepare)
    return _unflatten(outputs, ctx._nested_output)

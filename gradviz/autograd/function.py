"""Custom ``autograd.Function``: the contract of the specification (``shared/spec``).

A subclass defines ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``;
``Fn.apply(*args)`` runs forward with grad mode off and records one node, an instance of
``Fn._backward_cls`` (named ``<Fn>Backward``). That node *is* the ``ctx``: ``y.grad_fn is
ctx``, as in PyTorch.

Note [Custom node slots]
------------------------
``needs_input_grad`` has one entry per forward argument. ``next_functions`` has one edge
per *tensor* argument only. ``backward`` returns one gradient per forward argument (extra
trailing ``None``s are allowed); ``_BackwardNode.apply`` maps them onto the tensor edges.
"""

from __future__ import annotations

from typing import Any

from gradviz_ext import engine as _engine

from .._tensor import Tensor, _wrap

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]


class FunctionCtx:
    """What ``forward`` gets as ``ctx``: saves tensors and flags for ``backward``.

    The calling rules are enforced at run time: ``save_for_backward``, ``mark_dirty``,
    ``mark_non_differentiable`` and ``set_materialize_grads`` belong in ``forward`` (or
    ``setup_context``).
    """

    def save_for_backward(self, *tensors):
        """Save tensors (or ``None``) for ``backward``; read them back as ``ctx.saved_tensors``.

        Saved tensors are version-checked: modifying one in place before backward is an error.
        Call it at most once, from ``forward`` or ``setup_context``.
        """
        for index, value in enumerate(tensors):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{index} is of type {type(value).__name__}"
                )
        self._to_save = tensors

    def mark_dirty(self, *tensors):
        """Mark inputs that ``forward`` modified in place (full contract: issue 4)."""
        self._dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Mark outputs that have no gradient; ``backward`` still receives zeros for them."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool):
        """Whether missing output gradients become zeros before ``backward`` (default True)."""
        self.materialize_grads = bool(value)


class BackwardCFunction(FunctionCtx, _engine.Node):
    """Base of every ``<Fn>Backward`` node: the ctx and the graph node in one object."""

    _forward_cls: Any = None

    def __init__(self):
        _engine.Node.__init__(self)
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._to_save = None
        self._saved = None
        self._dirty_tensors = ()
        self._non_differentiable = ()
        self._tensor_input_positions = ()
        self._num_forward_inputs = 0

    def name(self):
        return type(self).__name__

    def _kind(self):
        return "custom"

    def _materializes_grads(self):
        return self.materialize_grads

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, checked for in-place modification."""
        if self._saved is None:
            if self._released:
                raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
            return ()
        return tuple(s.unpack(self) if s is not None else None for s in self._saved)

    def saved_tensor_count(self):
        if self._saved is None:
            return 0, 0
        kept = [s for s in self._saved if s is not None]
        return len(kept), sum(s.nbytes() for s in kept)

    def release_variables(self):
        if self._saved is None:
            # saves nothing: may be backpropagated again (SEMANTICS 9), but reading
            # ctx.saved_tensors after the release raises, as in PyTorch
            self._released = True
            return
        for s in self._saved:
            if s is not None:
                s.release()
        self._saved = None
        self._released = True

    def apply(self, grads):
        cls = self._forward_cls
        backward = cls.backward
        if backward is Function.backward:
            raise NotImplementedError(
                "You must implement either the backward or vjp method for your custom "
                "autograd.Function to use it with backward mode AD."
            )
        result = backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        expected = self._num_forward_inputs
        if len(result) < expected or any(r is not None for r in result[expected:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {expected}, got {len(result)})"
            )
        tensor_positions = self._tensor_input_positions
        position_set = set(tensor_positions)
        for position in range(expected):
            value = result[position]
            if value is None:
                continue
            if position not in position_set:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {position + 1}, but the corresponding forward input was not a "
                    "Variable"
                )
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"function {self.name()} returned a {type(value).__name__} as the gradient "
                    f"at position {position + 1}; expected a Tensor or None"
                )
        grads_out = []
        for edge_index, position in enumerate(tensor_positions):
            value = result[position]
            if value is not None and not self.needs_input_grad[position]:
                value = None  # PyTorch drops gradients for inputs that need none
            grads_out.append(value)
        return grads_out


class FunctionMeta(type):
    """Creates ``<Fn>Backward``, the node class of each Function subclass."""

    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class for custom differentiable operations.

    Examples
    --------
    >>> import gradviz as torch
    >>> class Square(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (x,) = ctx.saved_tensors
    ...         return grad_output * 2 * x
    >>> x = torch.tensor([2.0, 3.0], requires_grad=True)
    >>> Square.apply(x).sum().backward()
    >>> x.grad
    tensor([4., 6.])
    """

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and record the node that will run ``backward``."""
        if kwargs:
            raise TypeError(f"{cls.__name__}.apply() takes positional arguments only")
        ctx = cls._backward_cls()
        tensor_positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        grad_enabled = _engine.is_grad_enabled()
        needs = tuple(grad_enabled and isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx.needs_input_grad = needs
        ctx._tensor_input_positions = tensor_positions
        ctx._num_forward_inputs = len(args)
        is_executable = any(needs)
        if is_executable:
            ctx.next_functions = tuple(
                _engine.gradient_edge(args[i]) if needs[i] else (None, 0) for i in tensor_positions
            )

        if is_executable and _engine.forward_observer() is not None:
            # Note [Forward capture]: while a forward observer is installed (for example by
            # gradviz.debug.capture()), keep copies of the forward arguments as they were
            # before forward ran, so the gradient doctor can re-run this Function later.
            ctx._forward_args = tuple(_wrap(a._data.copy()) if isinstance(a, Tensor) else a
                                      for a in args)

        previous = _engine.set_grad_enabled_flag(False)
        try:
            outputs = cls.forward(ctx, *args)
        finally:
            _engine.set_grad_enabled_flag(previous)

        return _wrap_outputs(ctx, args, outputs, is_executable)


def _wrap_outputs(ctx, args, outputs, is_executable):
    is_tuple = isinstance(outputs, tuple)
    raw = outputs if is_tuple else (outputs,)
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    non_diff = {id(t) for t in ctx._non_differentiable}
    wrapped = []
    metas = []
    for nr, out in enumerate(raw):
        if not isinstance(out, Tensor):
            wrapped.append(out)
            metas.append(None)
            continue
        if id(out) in input_ids and not any(out is d for d in ctx._dirty_tensors):
            # an input returned unchanged becomes a new tensor object (SEMANTICS 7)
            out = _wrap(out._data, version_counter=out._version_counter)
        metas.append(_engine.InputMeta(out._data.shape, out.dtype))
        if is_executable and id(raw[nr]) not in non_diff and out.dtype.is_floating_point:
            out.grad_fn = ctx
            out._output_nr = nr
            out._requires_grad = False
        wrapped.append(out)
    if is_executable:
        ctx._input_metadata = tuple(metas)
        _save_variables(ctx, wrapped, raw)
        observer = _engine.forward_observer()
        if observer is not None:
            observer.node_created(ctx)
    result = tuple(wrapped)
    return result if is_tuple else result[0]


def _save_variables(ctx, wrapped, raw):
    to_save = ctx._to_save
    ctx._to_save = None
    if to_save is None:
        return
    saved = []
    for tensor in to_save:
        if tensor is None:
            saved.append(None)
            continue
        output_index = next((i for i, r in enumerate(raw) if r is tensor), None)
        if output_index is not None and isinstance(wrapped[output_index], Tensor):
            saved.append(_engine.SavedTensor(wrapped[output_index], True))
        else:
            saved.append(_engine.SavedTensor(tensor, False))
    ctx._saved = saved


def once_differentiable(fn):
    """Run a custom backward with grad mode off (its result is not differentiable again)."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        previous = _engine.set_grad_enabled_flag(False)
        try:
            return fn(ctx, *args)
        finally:
            _engine.set_grad_enabled_flag(previous)

    return wrapper

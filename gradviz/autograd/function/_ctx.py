"""The ``ctx`` of a custom Function: :class:`FunctionCtx` (what ``forward`` and
``setup_context`` call) and :class:`BackwardCFunction` (the ctx and the graph node in one
object, whose ``apply`` runs the user's ``backward``).

Note [Custom node slots]
------------------------
``needs_input_grad`` and ``input_grad_buffers`` have one entry per forward argument.
``next_functions`` has one edge per *tensor* argument only. ``backward`` returns one gradient
per forward argument (extra trailing ``None``s are allowed); ``BackwardCFunction.apply`` maps
them onto the tensor edges. The node's input slots are the forward's outputs, one per
returned value; a non-tensor output has no metadata and always receives ``None``.

Note [Declared gradient dtypes]
-------------------------------
``ctx.set_output_grad_dtype`` is honoured through the node's input metadata, so the engine
stays generic: a concrete dtype becomes the slot's ``InputMeta.dtype`` (every producer's
gradient is cast to it before it reaches the buffer, so this node's hooks already see it),
and ``None`` becomes ``InputMeta.dtype = None`` (the engine passes any dtype through). The
gradients this node returns are cast to *its inputs'* dtypes as usual, so ``.grad`` and
``autograd.grad`` results keep the inputs' dtypes.
"""

from __future__ import annotations

import warnings
from typing import Any

from gradviz_ext import engine as _engine
from gradviz_ext._function import FunctionNode

from ... import dtypes as _dtypes
from ..._tensor import Tensor

__all__ = ["FunctionCtx", "BackwardCFunction"]

NO_BACKWARD_MESSAGE = (
    "You must implement either the backward or vjp method for your custom "
    "autograd.Function to use it with backward mode AD."
)
BOTH_BACKWARD_AND_VJP_MESSAGE = (
    "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
    "You should only implement one of them."
)


class FunctionCtx:
    """What ``forward`` (or ``setup_context``) gets as ``ctx``.

    Each method below is to be called at most once, from ``forward`` or ``setup_context``;
    what they record takes effect when ``Function.apply`` wraps the outputs.
    """

    # save_for_backward is FunctionNode's (gradviz_ext/_function.py): it runs in every
    # forward, so it is compiled. Its fields, read below, are declared for the type checker:
    saved_tensors: Any
    _to_save: Any

    def save_for_forward(self, *tensors):
        """Save tensors (or ``None``) for ``jvp`` (forward-mode AD), where ``ctx.saved_tensors``
        returns them (Note [Forward AD of custom Functions] in ``_function.py``)."""
        for value in tensors:
            if value is not None and not isinstance(value, Tensor):
                # torch raises AssertionError here; same type, so ported code behaves alike
                raise AssertionError(
                    "save_for_forward expects all arguments to be tensors; you should save "
                    "non-tensors as attributes on ctx."
                )
        self.saved_for_forward = tensors

    @property
    def saved_variables(self):
        """The deprecated name of ``saved_tensors`` (older tutorials use it): warns, then
        returns ``saved_tensors``."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning,
                      stacklevel=2)
        return self.saved_tensors

    @property
    def to_save(self):
        """What ``save_for_backward`` was given, while forward runs (then ``None``)."""
        return self._to_save

    @property
    def dirty_tensors(self):
        """What ``mark_dirty`` was given (None before it is called), as torch's ctx."""
        return self._dirty_tensors or None

    @property
    def requires_grad(self):
        """Always True: torch's ctx has this read-only attribute and it answers True."""
        return True

    def mark_dirty(self, *tensors):
        """Mark inputs that ``forward`` modified in place; each must be returned.

        ``apply`` bumps their version counters itself (a write through ``.numpy()`` is
        invisible to the engine) and returns the input object itself with this node as its
        ``grad_fn``.
        """
        self._dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Mark outputs that have no gradient; ``backward`` still receives zeros for them."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool):
        """Whether missing output gradients become zeros before ``backward`` (default True)."""
        self.materialize_grads = bool(value)

    def set_output_grad_dtype(self, *dtypes):
        """Declare, per output, the dtype ``backward`` receives that output's gradient in.

        A dtype for a differentiable tensor output, ``None`` to pass the gradient through
        uncast (the only choice for non-tensor and non-differentiable outputs). Call at most
        once; the number of declarations must match the number of returned values (checked
        when ``apply`` wraps the outputs).
        """
        if getattr(self, "_output_grad_dtypes", None) is not None:
            raise RuntimeError("set_output_grad_dtype can only be called once")
        for index, value in enumerate(dtypes):
            if value is not None and not isinstance(value, _dtypes.dtype):
                raise TypeError(
                    f"set_output_grad_dtype expects a dtype or None for each output, but got "
                    f"{type(value).__name__} for output {index}"
                )
        self._output_grad_dtypes = dtypes




class BackwardCFunction(FunctionCtx, FunctionNode):
    """Base of every ``<Fn>Backward`` node: the ctx and the graph node in one object.

    Its fields, ``_apply_grads`` (the engine's call of the user's ``backward``),
    ``release_variables`` and ``saved_tensor_count`` are in
    ``gradviz_ext._function.FunctionNode`` (Note [Custom Function fast path]); the general
    checks and the rarer features are here.
    """

    # FunctionNode's fields (declared for the type checker; set by Function.apply)
    _output_dtypes: Any
    _num_forward_inputs: int
    _tensor_input_positions: Any

    _forward_cls: Any = None
    _in_jvp = False  # True while the Function's jvp runs (saved_tensors reads save_for_forward)
    _dirty_outputs = ()  # output positions marked dirty (set by the general wrapping path)
    _non_differentiable_outputs = ()

    def name(self):
        return type(self).__name__

    def __repr__(self):
        # a Python class in PyTorch: <torch.autograd.function.FnBackward object at 0x...>
        return object.__repr__(self)

    # ---- input_grad_buffers ---------------------------------------------------------------
    @property
    def input_grad_buffers(self):
        """The engine's pending gradient buffers of this Function's inputs, or ``None``s.

        One entry per forward argument. An entry is a tensor that already holds the gradient
        contributions other producers made to that input during this backward; ``backward``
        may add its own contribution into it in place and return ``None`` for that input.
        ``None`` when nothing reached the input yet, or the buffer cannot safely be updated
        in place. Only readable while this Function's backward is running; always ``None``
        under ``create_graph=True``, anomaly mode or when this node has post-hooks
        (``GraphTask.expose_input_buffers`` states the rules). A buffer is valid only until
        ``backward`` returns; starting another backward before then raises.
        """
        task = _engine.current_graph_task()
        if not self._in_backward or task is None or task.current is not self:
            raise RuntimeError(
                f"ctx.input_grad_buffers of {self.name()} is only available while its backward "
                "is running (during backward(), autograd.backward() or autograd.grad())."
            )
        per_edge = task.expose_input_buffers(self)
        entries = [None] * self._num_forward_inputs
        for edge_index, position in enumerate(self._tensor_input_positions):
            entries[position] = per_edge[edge_index][0]
        return tuple(entries)

    # ---- backward -----------------------------------------------------------------------
    def apply(self, *grad_outputs):
        """Call the Function's ``backward`` (or ``vjp``) with this node as ``ctx``, as
        PyTorch's ``BackwardCFunction.apply``: ``grad_fn.apply(g)`` is ``Fn.backward(ctx, g)``,
        its result returned unchecked and no hooks run (the engine's own call is
        ``_apply_grads``)."""
        return self._backward_function()(self, *grad_outputs)

    def _backward_function(self):
        """The user's ``backward`` or ``vjp``, with PyTorch's errors for neither and both
        (``FunctionNode.apply`` caches the answer per class)."""
        from ._function import Function

        cls = self._forward_cls
        backward, vjp = cls.backward, cls.vjp

        has_backward = backward is not Function.backward
        has_vjp = vjp is not Function.vjp
        if has_backward and has_vjp:
            raise RuntimeError(BOTH_BACKWARD_AND_VJP_MESSAGE)
        if not has_backward and not has_vjp:
            raise NotImplementedError(NO_BACKWARD_MESSAGE)
        return vjp if has_vjp else backward

    def _materialize_uncast_slots(self, grads):
        """Zeros for slots declared ``None`` (their metadata has no dtype for the engine),
        reported as ``grads_materialized`` like the engine's own materialization."""
        slots = []
        for slot, dtype in enumerate(self._output_dtypes):
            if grads[slot] is None and dtype is not None:
                meta = self._input_metadata[slot]
                if meta is not None and meta.dtype is None:
                    grads[slot] = _engine.runtime().zeros(meta.shape, dtype)
                    slots.append(slot)
        if slots:
            task = _engine.current_graph_task()
            if task is not None and task.current is self and task._listener is not None:
                task._listener.grads_materialized(task, self, slots)
        return grads

    def _check_result(self, result):
        """Contract rule 4: one gradient per forward argument, tensors only where tensors went
        in."""
        if not isinstance(result, tuple):
            result = (result,)
        expected = self._num_forward_inputs
        if len(result) == expected and len(self._tensor_input_positions) == expected:
            # every forward argument was a tensor and the arity is exact: the common case
            grads_out = []
            for position in range(expected):
                value = result[position]
                if value is not None and not isinstance(value, Tensor):
                    break  # the general path below names the error
                grads_out.append(value)
            else:
                return grads_out
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
                raise RuntimeError(
                    f"expected Variable or None (got {_type_name(value)}): function "
                    f"{self.name()} returned it as the gradient at position {position + 1}"
                )
        # A gradient for an input that needs none is kept, as in PyTorch: post-hooks and
        # anomaly mode's NaN check see it; its edge is (None, 0), so the engine passes it on
        # to nobody.
        return [result[position] for position in tensor_positions]


def _type_name(value):
    kind = type(value)
    module = kind.__module__
    return kind.__name__ if module == "builtins" else f"{module}.{kind.__name__}"

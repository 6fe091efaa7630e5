"""The op table: one forward rule and one backward rule per differentiable operation.

An :class:`Op` is data. :func:`apply` is the only code that turns an op into a graph node,
so adding an op never touches the engine (the HIPS-autograd pattern).

Note [Backward rules are differentiable]
----------------------------------------
Every backward rule is written with gradviz Tensor operations, never with raw numpy. Run
without ``create_graph`` the engine switches grad mode off, so these operations record
nothing; with ``create_graph=True`` they build the graph of the gradient, which is how
higher-order gradients work for every built-in op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from gradviz_ext import engine as _engine

from .. import dtypes as _dtypes
from .._tensor import Tensor, _wrap

__all__ = ["Op", "OpNode", "apply", "TABLE"]

TABLE: dict[str, "Op"] = {}


@dataclass(frozen=True)
class Op:
    """A differentiable operation.

    Attributes
    ----------
    name : str
        The op's name in the table (``"mul"``).
    node : str
        The backward node's name, as PyTorch names it (``"MulBackward0"``).
    forward : callable
        ``forward(*arrays, **attrs) -> ndarray`` (or a tuple for several outputs). Arrays are
        numpy arrays, or Python numbers for scalar operands.
    backward : callable or None
        ``backward(ctx, *grads) -> tuple`` with one gradient (a Tensor or None) per input.
        None marks an op that is not differentiable.
    saves : callable
        ``saves(needs_input_grad) -> (input indices to save, save the output?)``.
    dtype : callable or None
        ``dtype(*inputs, **attrs) -> gradviz dtype`` the inputs are converted to before
        ``forward``.
    view : bool
        The output is a view of input 0 (shares storage and version counter).
    """

    name: str
    node: str
    forward: Callable
    backward: Callable | None
    saves: Callable = field(default=lambda needs: ((), False))
    dtype: Callable | None = None
    view: bool = False

    def __post_init__(self):
        if self.name in TABLE:
            raise ValueError(f"op {self.name!r} is already registered")
        TABLE[self.name] = self


class OpNode(_engine.Node):
    """The backward node of a built-in op; its ``apply`` calls the op's backward rule."""

    __slots__ = ("op", "needs_input_grad", "attrs", "_saved_inputs", "_saved_output")

    def __init__(self, op, edges, metas, needs, attrs):
        _engine.Node.__init__(self, edges, metas)
        self.op = op
        self.needs_input_grad = needs
        self.attrs = attrs
        self._saved_inputs = None
        self._saved_output = None

    def name(self):
        return self.op.node

    def apply(self, grads):
        result = self.op.backward(self, *grads)
        return result if isinstance(result, (tuple, list)) else (result,)

    # ---- what backward rules call ----------------------------------------------------
    def input(self, index):
        """Forward input ``index``, as saved (raises if freed or modified in place)."""
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        value = self._saved_inputs[index]
        if isinstance(value, _engine.SavedTensor):
            return value.unpack(self)
        return value

    def output(self):
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        return self._saved_output.unpack(self)

    def __getattr__(self, name):
        # attrs stored at forward time (dim, keepdim, shapes) read as ctx.dim
        attrs = object.__getattribute__(self, "attrs")
        if attrs is not None and name in attrs:
            return attrs[name]
        raise AttributeError(f"'{self.op.node}' object has no attribute '{name}'")

    # ---- saved tensors ----------------------------------------------------------------
    def saved_tensor_count(self):
        count = nbytes = 0
        for value in self._all_saved():
            count += 1
            nbytes += value.nbytes()
        return count, nbytes

    def _all_saved(self):
        saved = []
        if self._saved_inputs is not None:
            saved.extend(v for v in self._saved_inputs.values() if isinstance(v, _engine.SavedTensor))
        if self._saved_output is not None:
            saved.append(self._saved_output)
        return saved

    def release_variables(self):
        if self._saved_inputs is None and self._saved_output is None:
            return  # nothing saved: a second backward through this node is fine
        for value in self._all_saved():
            value.release()
        self._released = True


def apply(op: Op, *inputs, **attrs):
    """Run ``op`` forward on ``inputs`` (Tensors or Python numbers) and record its node."""
    if op.dtype is not None:
        target = op.dtype(*inputs, **attrs).numpy
        arrays = [x._data.astype(target, copy=False) if isinstance(x, Tensor) else x for x in inputs]
    else:
        arrays = [x._data if isinstance(x, Tensor) else x for x in inputs]
    with np.errstate(all="ignore"):  # like torch: inf/nan results, no numpy warnings
        result = op.forward(*arrays, **attrs)

    needs = None
    if _engine.is_grad_enabled() and op.backward is not None:
        for x in inputs:
            if isinstance(x, Tensor) and (x._requires_grad or x.grad_fn is not None):
                needs = tuple(isinstance(y, Tensor) and (y._requires_grad or y.grad_fn is not None)
                              for y in inputs)
                break

    if isinstance(result, tuple):
        outputs = tuple(_wrap(np.asarray(r)) for r in result)
    else:
        outputs = (_wrap(np.asarray(result)),)
    if op.view:
        base = inputs[0]
        chain = base._view_chain + ((op, attrs),)  # how to re-derive it from the root base
        for out in outputs:
            out._version_counter = base._version_counter
            out._base = base if base._base is None else base._base
            out._view_chain = chain

    if needs is not None:
        edges = tuple(_engine.gradient_edge(x) if needs[i] else (None, 0)
                      for i, x in enumerate(inputs))
        metas = tuple(_engine.InputMeta(o._data.shape, o.dtype) for o in outputs)
        node = OpNode(op, edges, metas, needs, attrs)
        input_indices, save_output = op.saves(needs)
        if input_indices:
            node._saved_inputs = {
                i: _engine.SavedTensor(inputs[i], False) if isinstance(inputs[i], Tensor) else inputs[i]
                for i in input_indices
            }
        for nr, out in enumerate(outputs):
            if out.dtype.is_floating_point:
                out.grad_fn = node
                out._output_nr = nr
        if save_output:
            node._saved_output = _engine.SavedTensor(outputs[0], True)
        observer = _engine.forward_observer()
        if observer is not None:
            observer.node_created(node)

    return outputs if isinstance(result, tuple) else outputs[0]


# ---- dtype rules ------------------------------------------------------------------------

def promote(*inputs, **attrs):
    return _dtypes.result_type(*inputs)


def promote_float(*inputs, **attrs):
    dtype = _dtypes.result_type(*inputs)
    return dtype if dtype.is_floating_point else _dtypes.get_default_dtype()


def saves_inputs(*indices, output=False):
    """A ``saves`` rule that always keeps the given inputs (and the output)."""
    chosen = tuple(indices)
    return lambda needs: (chosen, output)


def saves_output(needs):
    return (), True


def saves_nothing(needs):
    return (), False

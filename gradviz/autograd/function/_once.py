"""``once_differentiable``: a custom backward that cannot be differentiated again.

As in PyTorch (contract rule 2): the wrapped backward runs with grad mode off. When grad mode
was on (``create_graph=True``) and an incoming gradient requires grad, the results are
re-rooted on an :class:`DelayedError` node, so differentiating them a second time raises
"trying to differentiate twice a function that was marked with @once_differentiable". When
no incoming gradient requires grad the results simply have no history, and a second
differentiation fails with the usual "does not require grad".
"""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine

from ..._tensor import Tensor, _wrap

__all__ = ["once_differentiable", "DelayedError"]

ONCE_DIFFERENTIABLE_MESSAGE = (
    "trying to differentiate twice a function that was marked with @once_differentiable")


class DelayedError(_engine.Node):
    """A node whose backward raises: stands for a derivative that does not exist."""

    def __init__(self, message, edges):
        _engine.Node.__init__(self, edges, ())
        self.message = message

    def name(self):
        return "torch::autograd::Error"  # PyTorch's C++ node, qualified as its name() gives it

    def _apply_grads(self, grads):
        raise RuntimeError(self.message)


def once_differentiable(fn):
    """Run a custom backward with grad mode off (its result is not differentiable again)."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        previous = _engine.set_grad_enabled_flag(False)
        try:
            outputs = fn(ctx, *args)
        finally:
            _engine.set_grad_enabled_flag(previous)
        if not previous:
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        is_tuple = isinstance(outputs, tuple)
        values = outputs if is_tuple else (outputs,)
        # PyTorch feeds the error node fresh leaves that require grad, so it has edges and
        # the re-rooted results require grad.
        leaves = [_wrap(v._data, requires_grad=True) if isinstance(v, Tensor) else None
                  for v in values]
        edges = tuple(_engine.gradient_edge(leaf) if leaf is not None else (None, 0)
                      for leaf in leaves)
        error = DelayedError(ONCE_DIFFERENTIABLE_MESSAGE, edges)
        wrapped = tuple(
            _wrap(v._data, grad_fn=error, output_nr=nr) if isinstance(v, Tensor) else v
            for nr, v in enumerate(values))
        error._input_metadata = tuple(
            _engine.InputMeta(v._data.shape, v.dtype) if isinstance(v, Tensor) else None
            for v in values)
        return wrapped if is_tuple else wrapped[0]

    return wrapper

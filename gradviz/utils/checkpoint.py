"""``gradviz.utils.checkpoint``: activation checkpointing as torch's, ``checkpoint`` and
``checkpoint_sequential``.

Note [Checkpointing in a debugger]
----------------------------------
``use_reentrant=True`` (torch's default when the argument is not given, with torch's warning)
is torch's ``CheckpointFunction``: a custom Function whose forward runs the wrapped function
without recording and whose backward runs it again with recording (from the same random
state, so dropout draws the same mask) and backpropagates through the recomputed graph; the
graph shows one ``CheckpointFunctionBackward`` node, and the debugger steps into the nested
pass it starts. ``use_reentrant=False`` records the function's ops as usual: torch recomputes
their saved tensors in backward through saved-tensor hooks, which changes memory, not the
graph or a value, so gradviz keeps the saved tensors (the graph and every gradient are the same
as torch's).
"""

from __future__ import annotations

import warnings

from gradviz_ext import engine as _engine

from .. import _tensor
from .. import autograd as _autograd
from ..ops import _creation

__all__ = ["checkpoint", "checkpoint_sequential"]

_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in "
    "PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. use_reentrant=False "
    "is recommended, but if you need to preserve the current default behavior, you can pass "
    "use_reentrant=True. Refer to docs for more details on the differences between the two variants.")


def _detached(inputs):
    out = []
    for value in inputs:
        if isinstance(value, _tensor.Tensor):
            copy = value.detach()
            copy.requires_grad_(value.requires_grad)
            out.append(copy)
        else:
            out.append(value)
    return tuple(out)


class CheckpointFunction(_autograd.Function):
    """torch's reentrant checkpoint (Note [Checkpointing in a debugger])."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.forward_rng_state = _creation.get_rng_state()
        ctx.inputs, ctx.tensor_indices, tensors = [], [], []
        for index, value in enumerate(args):
            if isinstance(value, _tensor.Tensor):
                tensors.append(value)
                ctx.tensor_indices.append(index)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(value)
        ctx.save_for_backward(*tensors)
        with _autograd.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        task = _engine.current_graph_task()
        if task is not None and task._exec_info is not None:
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
                "an `inputs` parameter to .backward(). To resolve this error, you can either set "
                "use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        inputs = list(ctx.inputs)
        for index, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[index] = tensor
        outer_state = _creation.get_rng_state() if ctx.preserve_rng_state else None
        try:
            if outer_state is not None:
                _creation.set_rng_state(ctx.forward_rng_state)
            detached = _detached(inputs)
            with _autograd.enable_grad():
                outputs = ctx.run_function(*detached)
        finally:
            if outer_state is not None:
                _creation.set_rng_state(outer_state)
        if isinstance(outputs, _tensor.Tensor):
            outputs = (outputs,)
        pairs = [(out, grad) for out, grad in zip(outputs, grads)
                 if isinstance(out, _tensor.Tensor) and out.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _autograd.backward([out for out, _ in pairs], [grad for _, grad in pairs])
        return (None, None) + tuple(value.grad if isinstance(value, _tensor.Tensor) else None for value in detached)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` with its activations recomputed in backward, as
    ``torch.utils.checkpoint.checkpoint`` (Note [Checkpointing in a debugger])."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if not use_reentrant:
        return function(*args, **kwargs)
    if context_fn is not None:
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not any(isinstance(value, _tensor.Tensor) and value.requires_grad for value in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a ``Sequential`` (or a list of modules) in ``segments`` checkpointed chunks, the last
    one recorded normally, as ``torch.utils.checkpoint.checkpoint_sequential``."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)

    def run(start, end):
        def forward(value):
            for index in range(start, end + 1):
                value = functions[index](value)
            return value
        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)

"""``backward`` and ``grad``: turn user arguments into a graph task and run it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import task as _task

from .. import ops
from .._tensor import Tensor, _warn_once, _wrap, install_methods
from . import _forward_ad_impl as _fwad_impl

__all__ = ["backward", "grad", "make_graph_task"]


def _as_tuple(value, what):
    if isinstance(value, Tensor):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(value)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(value).__name__}")


def _make_grads(outputs, grad_outputs):
    """PyTorch's _make_grads: default to ones for scalars, validate shapes and dtypes."""
    grads = []
    for index, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(out, Tensor):
            raise TypeError(f"output {index} must be a Tensor, got {type(out).__name__}")
        if g is None:
            data = out._data
            requires_grad = out._requires_grad or out.grad_fn is not None
            if requires_grad and data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if requires_grad and data.dtype.kind != "f":  # (else: torch's "does not require grad")
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {out.dtype}"
                )
            # ones_like(out), made directly: every loss.backward() comes here
            grads.append(_wrap(np.ones(data.shape, data.dtype)) if requires_grad else None)
            continue
        if not isinstance(g, Tensor):
            raise TypeError(
                f"gradients can be either Tensors or None, but got {type(g).__name__} at index {index}"
            )
        if g._data.shape != out._data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{index}] has a shape of {g.shape} and "
                f"output[{index}] has a shape of {out.shape}."
            )
        # like torch, a gradient of another real dtype (even an integer one) is cast below
        if not _has_root_grad_dtype(out, g._data.dtype):
            target = _root_grad_dtype(out)
            if target is not None and g.dtype is not target:
                # PyTorch's engine casts each root gradient to what its node expects
                # (validate_outputs)
                g = ops.to(g, target)
        grads.append(g)
    return grads


def _has_root_grad_dtype(out, np_dtype):
    """Whether a root gradient of numpy dtype ``np_dtype`` is already what ``out``'s node
    expects (the common case, decided without building gradviz dtypes)."""
    if np_dtype is not out._data.dtype:
        return False
    fn = out.grad_fn
    if fn is not None and out._output_nr < len(fn._input_metadata):
        meta = fn._input_metadata[out._output_nr]
        return meta is not None and meta.np_dtype is np_dtype
    return True


def _root_grad_dtype(out):
    """The dtype the root's node expects: the output's, or what a custom Function declared
    with ``set_output_grad_dtype`` (None: any dtype passes)."""
    fn = out.grad_fn
    if fn is not None and out._output_nr < len(fn._input_metadata):
        meta = fn._input_metadata[out._output_nr]
        if meta is not None:
            return meta.dtype
    return out.dtype


def make_graph_task(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                    inputs=None, capture=None, observer=None):
    """Validate backward's arguments and build the (not yet started) graph task.

    Shared by ``backward``, ``grad`` and ``gradviz.debug.backward`` so all three accept and
    reject exactly the same arguments.
    """
    outputs = _as_tuple(tensors, "tensors")
    if grad_tensors is None:
        grad_tensors = (None,) * len(outputs)
    else:
        if not isinstance(grad_tensors, (Tensor, Sequence)):  # a numpy array, a number
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(grad_tensors).__name__}")
        grad_tensors = ((grad_tensors,) if isinstance(grad_tensors, Tensor)
                        else _as_tuple(grad_tensors, "grad_tensors"))
    grads = _make_grads(outputs, grad_tensors)  # first, as torch: a list of numbers as one
    if len(grad_tensors) != len(outputs):  # tensor's gradient is a TypeError, not a count
        # torch's words for too few; torch ignores extra gradients, gradviz names them too
        raise RuntimeError(
            f"got {len(outputs)} tensors and {len(grad_tensors)} gradients"
            + ("" if len(grad_tensors) < len(outputs) else ": give one gradient per output tensor")
        )
    roots, root_grads = [], []
    for index, (out, g) in enumerate(zip(outputs, grads)):
        if not out._requires_grad and out.grad_fn is None:
            raise RuntimeError(
                f"element {index} of tensors does not require grad and does not have a grad_fn"
            )
        roots.append(_engine.gradient_edge(out))
        root_grads.append(g)
    if retain_graph is None:
        retain_graph = create_graph
    accumulate_into = None
    if inputs is not None:
        inputs = _as_tuple(inputs, "inputs")
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        for i, t in enumerate(inputs):
            if isinstance(t, Tensor):
                # as PyTorch's engine does: a non-leaf input keeps its .grad in later passes
                # too, and a tensor without grad fails here with retain_grad's error
                t.retain_grad()
            _input_edge(t, i, "backward")
        accumulate_into = list(inputs)
    return _task.GraphTask(roots, root_grads, keep_graph=retain_graph,
                             create_graph=create_graph, capture=capture,
                             accumulate_into=accumulate_into, observer=observer,
                             made_grads=all(g is None for g in grad_tensors))


def _input_edge(tensor, index, caller):
    if not isinstance(tensor, Tensor):
        raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got "
                           f"{type(tensor).__name__} ({caller}: inputs[{index}])")
    if not tensor.requires_grad:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return _engine.gradient_edge(tensor)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the graph's leaves.

    Parameters
    ----------
    tensors : Tensor or sequence of Tensors
        Roots of the backward pass.
    grad_tensors : Tensor or sequence, optional
        The gradient of some loss with respect to each root; may be omitted for scalars.
    retain_graph : bool, optional
        Keep saved tensors so the graph can be differentiated again (default:
        ``create_graph``).
    create_graph : bool
        Record the backward computation, for higher-order gradients.
    inputs : sequence of Tensors, optional
        Accumulate only into these tensors' ``.grad``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> torch.autograd.backward((x * x).sum())
    >>> x.grad
    tensor([2., 4.])
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    task = make_graph_task(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)
    if create_graph:
        _warn_once("create_graph", _CREATE_GRAPH_WARNING)
    try:
        task.run()
    except BaseException:
        del task  # Note [No cycle through a failed backward]
        raise


# Note [No cycle through a failed backward]
# -----------------------------------------
# A failed task keeps its exception (``task.error``), whose traceback keeps this frame, whose
# local ``task`` would close a reference cycle: the graph, its ctx objects and saved tensors
# would then wait for the cycle collector (torch frees them as soon as the exception is
# dropped). So the frame lets go of the task before the exception leaves it; the frames of
# the traceback still hold what the user's own code held.


# PyTorch's engine gives this warning once per process when backward() (not grad()) builds a
# graph of the gradient: .grad then refers back to the parameter through its grad_fn.
_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using autograd.grad "
    "when creating the graph to avoid this. If you have to use this function, make sure to reset "
    "the .grad fields of your parameters to None after use to break the cycle and avoid the leak."
)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([3.0], requires_grad=True)
    >>> torch.autograd.grad((x ** 2).sum(), x)
    (tensor([6.]),)
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if type(inputs) is dict:  # PyTorch answers a dict of gradients, keyed as the inputs
        values = grad(outputs, tuple(inputs.values()), grad_outputs, retain_graph, create_graph,
                      only_inputs, allow_unused, is_grads_batched, materialize_grads)
        return dict(zip(inputs.keys(), values))
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    input_tuple = _as_tuple(inputs, "inputs")
    if not input_tuple:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    capture = [_input_edge(t, i, "grad") for i, t in enumerate(input_tuple)]
    # Forward-over-reverse (Note [Tangents of gradients]): the backward ops must run as
    # differentiable ops for forward AD to give the gradients their tangents.
    tangents_live = not create_graph and _forward_ad_active()
    if tangents_live and retain_graph is None:
        retain_graph = False
    task = make_graph_task(outputs, grad_outputs, retain_graph, create_graph or tangents_live,
                           capture=capture)
    try:
        captured = task.run()
    except BaseException:
        del task  # Note [No cycle through a failed backward]
        raise
    results = []
    for index, (value, tensor) in enumerate(zip(captured, input_tuple)):
        if value is None:
            if materialize_grads:
                value = ops.zeros_like(tensor)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {index} appears to not have been used "
                    "in the graph. Set allow_unused=True if this is the desired behavior."
                )
        elif not create_graph and value.requires_grad:
            value = _detach_keeping_tangent(value) if tangents_live else value.detach()
        results.append(value)
    return tuple(results)


# Note [Batched gradients]
# ------------------------
# ``grad(..., is_grads_batched=True)`` reads the first dimension of every ``grad_outputs``
# tensor as a batch: PyTorch vmaps one backward over it; gradviz runs one backward per example
# (keeping the graph for all but the last) and stacks each input's gradients. An input no
# example reached stays None (or zeros of the input's shape with ``materialize_grads``, made
# after the batch, as in PyTorch).

def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    output_tuple = _as_tuple(outputs, "outputs")
    input_tuple = _as_tuple(inputs, "inputs")
    if not input_tuple:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grads = (_as_tuple(grad_outputs, "grad_outputs") if grad_outputs is not None
             else (None,) * len(output_tuple))
    if len(grads) != len(output_tuple):
        raise RuntimeError(
            f"grad_outputs must have the same length as outputs: got {len(grads)} "
            f"grad_outputs and {len(output_tuple)} outputs")
    batch = None
    for index, (out, g) in enumerate(zip(output_tuple, grads)):
        if g is None:
            if out.requires_grad and out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if out.requires_grad and out.ndim == 0:  # PyTorch vmaps its implicit 0-dim ones
                raise ValueError(
                    "vmap(vjp, in_dims=0, ...)(<inputs>): Got in_dim=0 for some input, but that "
                    "input is a Tensor of dimensionality 0 so expected in_dim to satisfy "
                    "0 <= in_dim < 0.")
            continue
        if g.ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        if tuple(g.shape[1:]) != tuple(out.shape):
            grad_shape = g[0].shape[1:]  # sic: PyTorch reports the example's shape past dim 0
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{index}] has a shape of {grad_shape} and "
                f"output[{index}] has a shape of {out.shape}. If you only want some tensors in "
                "`grad_output` to be considered batched, consider using vmap.")
        if batch is None:
            batch = g.shape[0]
        elif g.shape[0] != batch:
            raise ValueError(
                "vmap: Expected all tensors to have the same size in the mapped dimension, got "
                f"sizes [{batch}, {g.shape[0]}] for the mapped dimension")
    if batch is None:  # nothing batched: one ordinary backward
        return grad(output_tuple, input_tuple, grads, retain_graph, create_graph,
                    allow_unused=allow_unused, materialize_grads=materialize_grads)
    if retain_graph is None:
        retain_graph = create_graph
    per_example = []
    for b in range(batch):
        example = tuple(None if g is None else g[b] for g in grads)
        per_example.append(grad(output_tuple, input_tuple, example,
                                retain_graph=retain_graph or b < batch - 1,
                                create_graph=create_graph, allow_unused=allow_unused))
    results = []
    for position, tensor in enumerate(input_tuple):
        column = [values[position] for values in per_example]
        if column[0] is None:
            results.append(ops.zeros_like(tensor, requires_grad=create_graph)
                           if materialize_grads else None)
        else:
            results.append(ops.stack(column))
    return tuple(results)


# Note [Tangents of gradients]
# ----------------------------
# Inside a dual level, the gradient ``autograd.grad`` returns carries the tangent of the
# gradient (a Hessian-vector product), as in PyTorch, whose saved tensors keep their forward
# gradients. gradviz's engine computes a backward without ``create_graph`` on plain arrays,
# which forward AD cannot see; so while any tensor has a tangent, ``grad`` runs the backward
# as with ``create_graph=True`` (keeping ``retain_graph``'s own default of False) and then
# detaches each result, giving it its tangent, detached too. Outside a dual level nothing
# changes.

def _forward_ad_active():
    level = _fwad_impl.current_level()
    return level is not None and len(level.holders) > 0


def _detach_keeping_tangent(value):
    tangent = _fwad_impl.tangent_of(value)
    detached = value.detach()
    if tangent is not None:
        _fwad_impl.set_tangent(detached, tangent.detach())
    return detached


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """Compute the gradient of this tensor with respect to graph leaves.

    See :func:`gradviz.autograd.backward`.
    """
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


# The core layer defines Tensor and cannot import autograd, so autograd attaches the method
# (docs/architecture.md: upper layers extend lower ones at import).
_tensor_backward.__name__, _tensor_backward.__qualname__ = "backward", "Tensor.backward"
install_methods({"backward": _tensor_backward})

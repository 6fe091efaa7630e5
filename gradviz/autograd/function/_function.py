"""``Function`` and ``Function.apply``: run ``forward`` and record the node.

A subclass defines either ``forward(ctx, *args)``, or ``forward(*args)`` together with
``setup_context(ctx, inputs, output)``; and ``backward(ctx, *grad_outputs)`` (or its alias
``vjp``). ``Fn.apply(*args)`` runs forward with grad mode off and records one node, an
instance of ``Fn._backward_cls`` (named ``<Fn>Backward``). That node *is* the ``ctx``:
``y.grad_fn is ctx``, as in PyTorch.

Note [Wrapping outputs]
-----------------------
After forward, ``_wrap_outputs`` decides what each returned value becomes (contract rules 6-8):

* a non-tensor (including a list or tuple) is returned as is and is not tracked;
* a tensor marked dirty *is* the input object: its version is bumped, and when the node is
  recorded its history is rebased onto the node (a view's base gets a ``CopySlices``; such a
  Function may return only one tensor);
* an input returned unchanged becomes a new tensor object, a view of the input;
* a view (an input returned unchanged, or a view forward made) has the view kind
  ``VIEW_CUSTOM_FUNCTION``: modifying it in place is PyTorch's error, since the view's
  history would bypass the custom backward;
* a non-differentiable output (marked, of an integer dtype, or with no node recorded: grad
  mode off, nothing requires grad) gets no ``grad_fn``, but its slot keeps metadata so
  ``backward`` receives zeros of its shape and dtype; if it is an input (dirty or not) that
  requires grad, it comes back as a detached alias (PyTorch's ``detach()``), and the input
  keeps its history; if it is not an input nor a view but has history of its own (forward
  computed it under ``enable_grad``), it is detached in place (PyTorch's ``detach_()``).

Note [Forward AD of custom Functions]
-------------------------------------
Under a dual level (``gradviz.autograd.forward_ad``), ``forward`` runs with tangent
propagation off, like grad mode. Afterwards, if an argument has a tangent,
``_forward_ad_impl.function_jvp`` calls the user's ``jvp`` (contract rule 13) and attaches the
tangents it returns to the wrapped outputs; ``ctx.saved_tensors`` inside ``jvp`` returns what
``save_for_forward`` saved.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import function as _ext_function
from gradviz_ext import ops as _ext_ops

from ... import dtypes as _dtypes
from ..._tensor import Tensor, _update_retains_grad, _wrap
from ...ops._inplace import COPY_SLICES, _snapshot, refresh_views
from ...ops._registry import apply as apply_op
from .. import _forward_ad_impl, _transform_state
from ._ctx import NO_BACKWARD_MESSAGE, BackwardCFunction

__all__ = ["Function", "FunctionMeta"]

_requires_grad = _ext_ops.requires_grad

_LEAF_DIRTY_MESSAGE = "a leaf Variable that requires grad has been used in an in-place operation."
_VIEW_OF_LEAF_DIRTY_MESSAGE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation.")
_DIRTY_NOT_RETURNED_MESSAGE = (
    "Some elements marked as dirty during the forward method were not returned as output. "
    "The inputs that are modified inplace must all be outputs of the Function.")
_DIRTY_VIEW_MESSAGE = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations).")
_DIRTY_NOT_INPUT_MESSAGE = (
    "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have "
    "been mutated should be passed to ctx.mark_dirty().")


class FunctionMeta(type):
    """Creates ``<Fn>Backward``, the node class of each Function subclass."""

    def __init__(cls, name, bases, attrs):
        base = getattr(cls, "_backward_base", BackwardCFunction)
        # PyTorch's <Fn>Backward classes live in torch.autograd.function: ours in its mirror
        backward_cls = type(name + "Backward", (base,), {"_forward_cls": cls,
                                                         "__module__": "gradviz.autograd.function"})
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
        warnings.warn(
            f"{type(self)} should not be instantiated. Methods on autograd functions are all "
            "static, so you should invoke them on the class itself. Instantiating an autograd "
            "function will raise an error in a future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Compute the outputs (grad mode is off). ``forward(ctx, *args)``, or
        ``forward(*args)`` when ``setup_context`` is defined."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Fill ``ctx`` from the inputs and the output (the separate-forward style)."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """One gradient per output in, one gradient (or None) per forward argument out."""
        raise NotImplementedError(NO_BACKWARD_MESSAGE)

    vjp = backward

    generate_vmap_rule = False  # True: gradviz.func.vmap applies the Function per example

    @staticmethod
    def vmap(info, in_dims, *args):
        """The batching rule under ``gradviz.func.vmap``: returns ``(output, out_dims)``.

        ``info.batch_size`` and ``info.randomness`` describe the vmap; ``in_dims`` has one
        ``Optional[int]`` per argument. Override it or set ``generate_vmap_rule = True``
        (not both); either requires the ``setup_context`` style of ``forward``.
        """
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap "
            "staticmethod or set generate_vmap_rule=True."
        )

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward-mode derivative: one tangent per forward argument in (``None`` for
        non-tensors), one per output out (Note [Forward AD of custom Functions])."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    # Run ``forward`` and record the node that will run ``backward``: the common case in C,
    # the rest in _general_apply (Note [Custom Function fast path] in gradviz_ext/_function.py)
    apply: Any = classmethod(_ext_function.apply)


def _general_apply(cls, args, kwargs):
    """``Function.apply`` for everything the C path does not take."""
    if _transform_state.stack:  # inside gradviz.func.vmap/grad/...: their rules apply
        return _transform_state.apply_function(cls, args, kwargs)  # type: ignore[misc]  # installed by func
    return _apply(cls, args, kwargs)[1]


def _has_setup_context(cls):
    return cls.setup_context is not Function.setup_context


def _bind_arguments(fn, args, kwargs, skip_ctx):
    """Keyword arguments and defaults become positional, as in ``torch.autograd.Function``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        if kwargs:
            raise
        return args
    if skip_ctx:
        parameters = list(signature.parameters.values())[1:]
        signature = signature.replace(parameters=parameters)
    bound = signature.bind(*args, **kwargs)
    for name in kwargs:
        parameter = signature.parameters.get(name)
        if parameter is None or parameter.kind is not parameter.POSITIONAL_OR_KEYWORD:
            # forward gets its arguments by position only: a keyword-only argument or one
            # that **kwargs would take cannot reach it (PyTorch's message)
            raise TypeError(f"forward() got an unexpected keyword argument '{name}'")
    bound.apply_defaults()
    return tuple(bound.args)


def _apply(cls, args, kwargs, prepare=None):
    """The body of ``Function.apply``; returns ``(ctx, outputs)``.

    ``prepare(ctx)`` runs before forward (``NestedIOFunction`` stores its nesting there).
    """
    setup_context = _has_setup_context(cls)
    if kwargs or setup_context:
        args = _bind_arguments(cls.forward, args, kwargs, skip_ctx=not setup_context)
    ctx = cls._backward_cls()
    # one pass over the arguments (this is the hot path of every custom Function call)
    grad_enabled = _engine.is_grad_enabled()
    positions = []
    need_list = []
    edges = []
    for index, arg in enumerate(args):
        if isinstance(arg, Tensor):
            positions.append(index)
            need = _requires_grad(arg)  # with grad mode off too, as in PyTorch
            need_list.append(need)
            edges.append(_engine.gradient_edge(arg) if need and grad_enabled else (None, 0))
        else:
            need_list.append(False)
    ctx.needs_input_grad = needs = tuple(need_list)
    ctx._tensor_input_positions = tuple(positions)
    ctx._num_forward_inputs = len(args)
    is_executable = grad_enabled and True in needs
    if is_executable:
        ctx.next_functions = tuple(edges)
        if len(positions) != len(args):
            ctx._forward_constants = _ext_function.forward_constants(args)
        if _ext_function.keeps_forward_inputs():  # Note [Kept forward inputs] in gradviz_ext
            ctx._forward_inputs = tuple(args)
            ctx._forward_versions = _ext_function.forward_versions(
                args, ctx._tensor_input_positions)
    if prepare is not None:
        prepare(ctx)

    if is_executable and _engine.forward_observer() is not None:
        # Note [Forward capture]: while a forward observer is installed (for example by
        # gradviz.debug.capture()), keep copies of the forward arguments as they were
        # before forward ran, so the gradient doctor can re-run this Function later.
        ctx._forward_args = tuple(_wrap(a._data.copy()) if isinstance(a, Tensor) else a
                                  for a in args)

    forward_ad = _ext_ops._forward_ad  # Note [Forward AD of custom Functions]
    previous = _engine.set_grad_enabled_flag(False)
    _ext_ops._forward_ad = None
    try:
        if setup_context:
            outputs = cls.forward(*args)
            cls.setup_context(ctx, args, outputs)
        else:
            outputs = cls.forward(ctx, *args)
    finally:
        _engine.set_grad_enabled_flag(previous)
        _ext_ops._forward_ad = forward_ad

    wrapped = _wrap_outputs(ctx, args, outputs, is_executable)
    if forward_ad is not None:
        _forward_ad_impl.function_jvp(cls, ctx, args, outputs, wrapped)
    return ctx, wrapped


def _wrap_outputs(ctx, args, outputs, is_executable):
    """Note [Wrapping outputs]."""
    is_tuple = isinstance(outputs, tuple)
    raw = outputs if is_tuple else (outputs,)
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    dirty = ctx._dirty_tensors
    if dirty and _dirties_batched_input(ctx, dirty):
        raise RuntimeError(_DIRTY_NOT_RETURNED_MESSAGE)
    _check_dirty(dirty, raw, input_ids, is_executable)
    non_diff = _non_differentiable_ids(ctx._non_differentiable)
    declared = _declared_grad_dtypes(ctx, raw, non_diff)
    if dirty and is_executable:
        # a dirty input gets this node as its grad_fn: keeping it would be a reference cycle
        # (Note [Kept forward inputs] in gradviz_ext/_function.py)
        ctx._forward_inputs = None
        ctx._forward_versions = None
    wrapped = []
    metas: list = []
    output_dtypes: list = []
    dirty_outputs = []  # output positions, kept for the debugger's node_created event
    for nr, out in enumerate(raw):
        if not isinstance(out, Tensor):
            wrapped.append(out)
            metas.append(None)
            output_dtypes.append(None)
            continue
        differentiable = (is_executable and id(out) not in non_diff
                          and out.dtype.is_floating_point)
        is_dirty = any(out is d for d in dirty)
        if is_dirty:
            dirty_outputs.append(nr)
            out._version_counter.bump()  # contract rule 8: mark_dirty bumps the version itself
            if differentiable and out._base is not None and len(raw) > 1:
                raise RuntimeError(_DIRTY_VIEW_MESSAGE)
            if is_executable:
                _rebase_dirty(out, ctx, nr, differentiable)
            if not differentiable and _requires_grad(out):
                out = _detached_alias(out)  # the input keeps its history and requires_grad
        elif id(out) in input_ids:
            out = _wrap_unchanged_input(out, differentiable)  # contract rule 7
        elif out._base is not None:
            out._view_kind = _engine.VIEW_CUSTOM_FUNCTION
        elif not differentiable and _requires_grad(out):
            out.detach_()  # history of its own, made in forward: PyTorch detaches it in place
        meta_dtype = out.dtype if declared is None else declared[nr]
        metas.append(_engine.InputMeta(out._data.shape, meta_dtype))
        output_dtypes.append(out.dtype)
        if differentiable and not is_dirty:
            out.grad_fn = ctx
            out._output_nr = nr
            out._requires_grad = False
        wrapped.append(out)
    if is_executable:
        ctx._input_metadata = tuple(metas)
        ctx._output_dtypes = tuple(output_dtypes)
        ctx._dirty_outputs = tuple(dirty_outputs)
        ctx._non_differentiable_outputs = tuple(
            nr for nr, out in enumerate(raw) if isinstance(out, Tensor) and id(out) in non_diff)
        _save_variables(ctx, wrapped, raw)
        observer = _engine.forward_observer()
        if observer is not None:
            observer.node_created(ctx)
    else:
        ctx._to_save = None
    result = tuple(wrapped)
    return result if is_tuple else result[0]


def _dirties_batched_input(ctx, dirty):
    """Under ``vmap`` with ``generate_vmap_rule``: a dirty tensor is (a slice of) a batched
    argument (Note [Dirty batched inputs] in gradviz/func/_vmap.py)."""
    batched = getattr(ctx, "_vmap_batched", ())
    return any(isinstance(d, Tensor) and np.shares_memory(d._data, b._data)
               for d in dirty for b in batched)


def _check_dirty(dirty, raw, input_ids, is_executable):
    """Contract rule 8: dirty tensors must be returned; a non-input only warns; no leaves."""
    for index, tensor in enumerate(dirty):
        if not isinstance(tensor, Tensor):
            raise RuntimeError(
                f"mark_dirty can only accept variables, but argument {index} is of type "
                f"{type(tensor).__name__}")
    for tensor in dirty:
        if id(tensor) not in input_ids:
            warnings.warn(_DIRTY_NOT_INPUT_MESSAGE, UserWarning, stacklevel=4)
        if not any(tensor is out for out in raw):
            raise RuntimeError(_DIRTY_NOT_RETURNED_MESSAGE)
        if is_executable:
            if tensor.grad_fn is None and tensor._requires_grad:
                raise RuntimeError(_LEAF_DIRTY_MESSAGE)
            base = tensor._base
            if base is not None and base.grad_fn is None and base._requires_grad:
                raise RuntimeError(_VIEW_OF_LEAF_DIRTY_MESSAGE)


def _non_differentiable_ids(tensors):
    """The ids of the tensors given to ``ctx.mark_non_differentiable``, checked to be tensors."""
    for value in tensors:
        if not isinstance(value, Tensor):
            raise RuntimeError(
                "mark_non_differentiable only accepts variable arguments, but got "
                f"{type(value).__name__}")
    return {id(t) for t in tensors}


def _declared_grad_dtypes(ctx, raw, non_diff):
    """Validate ``ctx.set_output_grad_dtype`` against the outputs (Note [Declared gradient dtypes])."""
    declared = ctx._output_grad_dtypes
    if declared is None:
        return None
    if len(declared) != len(raw):
        # torch 2.14.1's message, word for word (its libtorch_python.so)
        raise RuntimeError(
            f"set_output_grad_dtype expected the number of declarations to match the number "
            f"of outputs: the Function returned {len(raw)} values but {len(declared)} "
            f"declarations were provided"
        )
    for index, (dtype, out) in enumerate(zip(declared, raw)):
        if dtype is None:
            continue
        if not isinstance(out, Tensor):
            what = f"a {type(out).__name__}"
        elif id(out) in non_diff:
            what = "marked non-differentiable"
        elif not out.dtype.is_floating_point:
            what = f"of the non-differentiable dtype {out.dtype}"
        else:
            continue
        # torch 2.14.1's message, then which of its three cases this is
        raise RuntimeError(
            f"set_output_grad_dtype: got a concrete dtype for output {index}, but that output "
            f"is not a differentiable tensor (it is a non-tensor, was marked non-differentiable, "
            f"or has a non-differentiable dtype). Pass None for output {index} instead. "
            f"(Output {index} is {what}.)"
        )
    return declared


def _rebase_dirty(tensor, ctx, nr, differentiable):
    """Make the dirty input ``tensor`` (now an output) part of the node's history."""
    base = tensor._base
    if not differentiable:
        root = tensor if base is None else base
        if root._views is not None:
            refresh_views(root)
        return
    if base is None:
        tensor.grad_fn = ctx
        tensor._output_nr = nr
        tensor._requires_grad = False
        _update_retains_grad(tensor)
        if tensor._views is not None:
            refresh_views(tensor)
        return
    # a view: the write went through to its base, whose history gets a CopySlices node
    # (the same as an in-place op on a view, Note [In-place semantics] in ops/_inplace.py);
    # the base's views, this one included, are renewed over it
    region = _wrap(tensor._data, grad_fn=ctx, output_nr=nr)
    chain = tensor._view_chain
    new_base = apply_op(COPY_SLICES, _snapshot(base), region, chain=chain)
    base.grad_fn = new_base.grad_fn
    base._output_nr = 0
    base._requires_grad = False
    tensor._requires_grad = False
    refresh_views(base, tensor)
    _update_retains_grad(tensor)
    _update_retains_grad(base)


def _save_variables(ctx, wrapped, raw):
    to_save = ctx._to_save
    ctx._to_save = None
    if to_save is None:
        return
    saved: list = []
    for tensor in to_save:
        if tensor is None:
            saved.append(None)
            continue
        output_index = -1
        for index in range(len(raw)):
            if raw[index] is tensor:
                output_index = index
                break
        if output_index >= 0 and isinstance(wrapped[output_index], Tensor):
            out = wrapped[output_index]
            saved.append(_engine.save_tensor(out, out.grad_fn is ctx))
        else:
            saved.append(_engine.save_tensor(tensor, False))
    ctx._saved = saved


def _wrap_unchanged_input(tensor, differentiable):
    """An input that forward returned as is: a new tensor object (Note [Wrapping outputs]).

    A view of ``tensor`` that may not be modified in place (PyTorch's ``view_as(self)`` with
    the creation meta IN_CUSTOM_FUNCTION), unless the output is not ``differentiable`` while
    ``tensor`` requires grad: then a detached alias, as PyTorch's ``detach()``.
    """
    if not differentiable and _requires_grad(tensor):
        return _detached_alias(tensor)
    out = _wrap(tensor._data, version_counter=tensor._version_counter)
    root = tensor if tensor._base is None else tensor._base
    out._base = root
    out._view_chain = tensor._view_chain
    _engine.track_view(root, out, tensor, _engine.VIEW_CUSTOM_FUNCTION)
    out._view_kind = _engine.VIEW_CUSTOM_FUNCTION  # also when made with grad mode off
    return out


def _detached_alias(tensor):
    """``tensor.detach()``: the same data and version counter, no history."""
    return _wrap(tensor._data, version_counter=tensor._version_counter)


_ext_function.install(_dtypes._BY_NUMPY, _wrap_outputs, _wrap_unchanged_input, _general_apply,
                      _transform_state.stack, Function.setup_context)

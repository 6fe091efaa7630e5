"""``vmap``, and custom Functions under ``gradviz.func`` transforms.

Note [vmap is a loop]
---------------------
gradviz's ``vmap`` is not a batching transform: it calls ``func`` once per example, on
``select``-ed slices of the batched arguments, and stacks the results along ``out_dims``.
The results (values and gradients: slices and stacks are differentiable) are the same as
``torch.func.vmap``'s for functions that are pure per example; what differs is what ``func``
observes: shapes inside ``func`` are per-example, as under torch, but ``.item()`` and
data-dependent Python control flow work (torch rejects them), and ``chunk_size`` only
exists for API compatibility.

``randomness``: ``"error"`` makes gradviz's random ops raise torch's error inside ``func``;
``"same"`` rewinds the random generator before each example; ``"different"`` lets it run on.

Custom Functions (contract rule 14): ``vmap(Fn.apply, ...)`` calls ``Fn.vmap(info, in_dims, *args)``
with the whole batch, exactly as torch does. A Function applied *inside* ``func`` only sees
one example; gradviz then calls its ``vmap`` rule with ``info.batch_size == 1`` and
``in_dims`` 0 for every tensor argument (unsqueezed), and takes example 0 of the result.
With ``generate_vmap_rule = True`` the Function is simply applied per example. The
support checks and their errors are torch's in both cases.
"""

from __future__ import annotations

import functools
from collections import namedtuple

from .. import ops
from .._tensor import Tensor
from ..autograd import _transform_state
from ..autograd.function import Function
from ..autograd.function._function import _apply, _bind_arguments, _has_setup_context
from ..ops import _creation
from . import _pytree

__all__ = ["vmap", "VmapInfo", "apply_function"]

VmapInfo = namedtuple("VmapInfo", ["batch_size", "randomness"])
VmapInfo.__doc__ = "What a custom Function's ``vmap`` rule receives as ``info``."


class _LoopInfo(VmapInfo):
    """The transform-stack entry of one running ``vmap`` loop: its ``VmapInfo`` and the
    batched arguments it slices (``batched``), which a Function with ``generate_vmap_rule``
    must not mark dirty (Note [Dirty batched inputs])."""

    batched = ()

_RANDOMNESS = ("error", "different", "same")
_RANDOM_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the "
    "'same' or 'different' randomness flags on vmap or perform the randomness operation out "
    "of vmap"
)
_DOCS = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorize ``func`` over a dimension of its inputs (a loop: Note [vmap is a loop]).

    Parameters
    ----------
    func : callable
        Takes tensors (or pytrees of tensors) and returns tensors (or pytrees of tensors).
    in_dims : int, None or pytree
        The batched dimension of each input (None: not batched). A prefix of the arguments'
        structure: an int applies to every tensor.
    out_dims : int, None or pytree
        Where the batch dimension goes in each output.
    randomness : {"error", "different", "same"}
        What random ops inside ``func`` do.
    chunk_size : int, optional
        Accepted for compatibility; the loop runs one example at a time anyway.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import vmap
    >>> x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> vmap(lambda row: row.sum())(x)
    tensor([3., 7.])
    >>> vmap(lambda row, w: row * w, in_dims=(1, None))(x, torch.tensor(10.0))
    tensor([[10., 30.],
            [20., 40.]])
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, args, kwargs)

    return wrapped


def _name(func):
    return getattr(func, "__name__", repr(func))


def _flat_in_dims(func, in_dims, args):
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
            f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
            f"structure of `inputs`. in_dims has structure {_pytree.tree_flatten(in_dims)[1]} "
            f"but inputs has structure {_pytree.tree_flatten(args)[1]}.")
    prefix = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    flat = _pytree.broadcast_prefix(prefix, tuple(args))
    if flat is None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
            f"structure of `inputs`. in_dims has structure {_pytree.tree_flatten(in_dims)[1]} "
            f"but inputs has structure {_pytree.tree_flatten(args)[1]}.")
    return flat


def _batch_size(func, in_dims, flat_args, flat_dims):
    name = _name(func)
    sizes = []
    normalized = []
    for arg, dim in zip(flat_args, flat_dims):
        if dim is None:
            normalized.append(None)
            continue
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims must be int or None "
                f"for each input, got {dim!r}.")
        if not isinstance(arg, Tensor):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input "
                f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, "
                "please use None as the respective in_dim")
        ndim = arg.ndim
        if not -ndim <= dim < ndim:
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for some "
                f"input, but that input is a Tensor of dimensionality {ndim} so expected in_dim "
                f"to satisfy -{ndim} <= in_dim < {ndim}.")
        dim = dim % ndim
        normalized.append(dim)
        sizes.append(arg.shape[dim])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension")
    return sizes[0], normalized


def _function_class(func):
    """``Fn`` when ``func`` is ``Fn.apply`` of a custom Function, else None."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, Function) and getattr(func, "__name__", "") == "apply":
        return owner
    return None


def _vmap_call(func, in_dims, out_dims, randomness, args, kwargs):
    flat_dims = _flat_in_dims(func, in_dims, args)
    flat_args, args_spec = _pytree.tree_flatten(tuple(args))
    batch_size, flat_dims = _batch_size(func, in_dims, flat_args, flat_dims)
    info = _LoopInfo(batch_size, randomness)
    info.batched = tuple(arg for arg, dim in zip(flat_args, flat_dims)
                         if dim is not None and isinstance(arg, Tensor))

    function_cls = _function_class(func)
    if function_cls is not None and not kwargs:
        _check_vmap_support(function_cls)
        if not function_cls.generate_vmap_rule:
            arg_dims = tuple(_pytree.broadcast_prefix(
                in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args), tuple(args)))
            return _call_rule(function_cls, info, arg_dims, args, func, out_dims)

    results = []
    with _Randomness(randomness) as random_state:
        for index in range(batch_size):
            random_state.before_example()
            example = [arg if dim is None else ops.select(arg, dim, index)
                       for arg, dim in zip(flat_args, flat_dims)]
            _transform_state.stack.append(info)
            try:
                results.append(func(*_pytree.tree_unflatten(example, args_spec), **kwargs))
            finally:
                _transform_state.stack.pop()
    return _stack_results(func, results, out_dims, batch_size)


def _stack_results(func, results, out_dims, batch_size):
    name = _name(func)
    flat_first, out_spec = _pytree.tree_flatten(results[0]) if results else ([], None)
    flat_out_dims = _pytree.broadcast_prefix(out_dims, results[0]) if results else []
    if flat_out_dims is None or (isinstance(out_dims, tuple) and not isinstance(results[0], tuple)):
        raise ValueError(
            f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with "
            f"the structure of `outputs`. out_dims has structure "
            f"{_pytree.tree_flatten(out_dims)[1]} but outputs has structure {out_spec}.")
    columns = [_pytree.tree_flatten(r)[0] for r in results]
    stacked = []
    for position, dim in enumerate(flat_out_dims):
        values = [column[position] for column in columns]
        if dim is None:
            stacked.append(values[0])
            continue
        if not isinstance(values[0], Tensor):
            raise ValueError(
                f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                f"{type(values[0])}. Did you mean to set out_dims= to None for output?")
        stacked.append(ops.stack(values, dim))
    return _pytree.tree_unflatten(stacked, out_spec)


class _Randomness:
    """Install the behaviour of random ops for one vmap (Note [vmap is a loop])."""

    def __init__(self, randomness):
        self.randomness = randomness

    def __enter__(self):
        self.generator = _creation._generator
        if self.randomness == "error":
            _creation._generator = _RandomnessError()
        elif self.randomness == "same":
            self.state = self.generator.bit_generator.state
        return self

    def before_example(self):
        if self.randomness == "same":
            self.generator.bit_generator.state = self.state

    def __exit__(self, *exc):
        if self.randomness == "error":
            _creation._generator = self.generator


class _RandomnessError:
    """Stands in for the random generator under ``randomness="error"``."""

    def __getattr__(self, name):
        raise RuntimeError(_RANDOM_ERROR)


# ---- custom Functions under transforms (contract rule 14) --------------------------------

def _check_setup_context(cls):
    if not _has_setup_context(cls):
        raise RuntimeError(
            "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, "
            "jacrev, ...), it must override the setup_context staticmethod. " + _DOCS)


def _check_vmap_support(cls):
    _check_setup_context(cls)
    has_rule = cls.vmap is not Function.vmap
    if has_rule and cls.generate_vmap_rule:
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it has both generate_vmap_rule=True "
            "and an overridden vmap staticmethod. Please set generate_vmap_rule=False or delete "
            "the overridden vmap staticmethod to avoid ambiguity. " + _DOCS)
    if not has_rule and not cls.generate_vmap_rule:
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it does not have vmap support. Please "
            "override and implement the vmap staticmethod or set generate_vmap_rule=True. " + _DOCS)


def _call_rule(cls, info, arg_dims, args, func, out_dims):
    """``vmap(Fn.apply)``: the user's rule sees the whole batch; move its out_dims to vmap's."""
    result = _rule_output(cls, info, arg_dims, args)
    output, rule_dims = result
    flat_out, out_spec = _pytree.tree_flatten(output)
    flat_rule = _pytree.broadcast_prefix(rule_dims, output)
    if flat_rule is None:
        raise _incompatible_out_dims(rule_dims, out_spec)
    flat_target = _pytree.broadcast_prefix(out_dims, output)
    if flat_target is None:
        raise ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
            f"compatible with the structure of `outputs`. out_dims has structure "
            f"{_pytree.tree_flatten(out_dims)[1]} but outputs has structure {out_spec}.")
    moved = []
    for value, have, want in zip(flat_out, flat_rule, flat_target):
        if want is None or not isinstance(value, Tensor):
            moved.append(value)
            continue
        if have is None:
            value = ops.unsqueeze(value, 0)
            value = ops.expand(value, (info.batch_size,) + tuple(value.shape[1:]))
            have = 0
        moved.append(_movedim(value, have, want))
    return _pytree.tree_unflatten(moved, out_spec)


def _rule_output(cls, info, arg_dims, args):
    result = cls.vmap(info, tuple(arg_dims), *args)
    base = ("Expected the vmap staticmethod to have two returns, an output and out_dims with "
            "pytree structure compatible with the output. ")
    if not isinstance(result, tuple):
        raise RuntimeError(base + f"Got a {type(result)} instead")
    if len(result) != 2:
        raise RuntimeError(base + f"Got {len(result)} returns instead")
    return result


def _incompatible_out_dims(rule_dims, out_spec):
    return RuntimeError(
        "The autograd.Function's vmap staticmethod returned an incompatible (output, out_dims) "
        f"tuple. Expected out_dims={rule_dims} to be compatible with the structure of `output`. "
        f"out_dims has structure {_pytree.tree_flatten(rule_dims)[1]} but output has structure "
        f"{out_spec}. " + _DOCS)


# Note [Dirty batched inputs]
# ---------------------------
# torch's generated vmap rule runs the Function's ``setup_context`` on batched wrappers of its
# inputs and outputs, so ``ctx.mark_dirty`` of a batched input names a tensor the Function
# never returns: "Some elements marked as dirty ... were not returned as output". An input not
# batched by the vmap reaches ``setup_context`` as itself and may be dirty. The loop here sees
# per-example slices instead of wrappers; ``_wrap_outputs`` raises torch's error for a dirty
# tensor that shares memory with one of the batched arguments (``_LoopInfo.batched``).


def _movedim(tensor, source, destination):
    ndim = tensor.ndim
    source %= ndim
    destination %= ndim
    if source == destination:
        return tensor
    order = [d for d in range(ndim) if d != source]
    order.insert(destination, source)
    return ops.permute(tensor, *order)


# Note [Functions under grad transforms]
# -------------------------------------
# As in torch.func, the innermost transform decides. Under ``grad``/``vjp``/``jacrev``/``jvp``
# the call records one node of ``<Fn>Generated`` (torch's generated single-level Function, so
# its node is ``<Fn>GeneratedBackward``), whose ``setup_context``, ``backward`` and ``jvp`` are
# the Function's own, and whose forward is the Function at the transforms below: under an
# outer ``vmap`` that is its vmap rule, so ``vmap(grad(f))`` differentiates with the user's
# ``backward``, never through the rule's ops. Under ``vmap`` (innermost) the rule runs, or, with
# ``generate_vmap_rule``, the Function per example as ``Vmapped<Fn>`` (torch's vmapped
# Function).

_generated_classes = {}


def _derived(cls, name, forward):
    key = (cls, name)
    derived = _generated_classes.get(key)
    if derived is None:
        attrs = {"__module__": cls.__module__}
        if forward is not None:
            attrs["forward"] = staticmethod(forward)
        derived = type(name, (cls,), attrs)
        _generated_classes[key] = derived
    return derived


def _generated(cls):
    """``<Fn>Generated``: ``cls`` with its forward run at the transforms below this one."""
    def forward(*args):
        stack = _transform_state.stack
        top = stack.pop()
        try:
            if stack:
                return apply_function(cls, args, {})
            return cls.forward(*args)
        finally:
            stack.append(top)

    return _derived(cls, cls.__name__ + "Generated", forward)


def apply_function(cls, args, kwargs):
    """``Fn.apply`` while a ``gradviz.func`` transform runs (``Function.apply`` calls this;
    Note [Functions under grad transforms])."""
    stack = _transform_state.stack
    _check_setup_context(cls)
    if kwargs:
        args = _bind_arguments(cls.forward, args, kwargs, skip_ctx=False)
        kwargs = {}
    if not isinstance(stack[-1], VmapInfo):
        return _apply(_generated(cls), args, kwargs)[1]
    _check_vmap_support(cls)
    level = len(stack) - 1
    info = stack[level]
    saved = stack[level:]
    del stack[level:]  # the rule (and the Function inside it) runs below this vmap level
    try:
        if cls.generate_vmap_rule:
            batched = getattr(info, "batched", ())
            name = "Vmapped" + cls.__name__ + ("Generated" if stack else "")
            return _apply(_derived(cls, name, None), args, kwargs,
                          prepare=lambda ctx: setattr(ctx, "_vmap_batched", batched))[1]
        one = VmapInfo(1, info.randomness)
        batched = tuple(ops.unsqueeze(a, 0) if isinstance(a, Tensor) else a for a in args)
        dims = tuple(0 if isinstance(a, Tensor) else None for a in args)
        output, rule_dims = _rule_output(cls, one, dims, batched)
        flat_out, out_spec = _pytree.tree_flatten(output)
        flat_rule = _pytree.broadcast_prefix(rule_dims, output)
        if flat_rule is None:
            raise _incompatible_out_dims(rule_dims, out_spec)
        example = [value if dim is None or not isinstance(value, Tensor)
                   else ops.select(value, dim, 0) for value, dim in zip(flat_out, flat_rule)]
        return _pytree.tree_unflatten(example, out_spec)
    finally:
        stack[len(stack):] = saved


# Function.apply runs custom Functions under a transform through this rule; autograd sits below
# func, so func installs it (gradviz/autograd/_transform_state.py).
_transform_state.apply_function = apply_function

"""``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jvp`` and ``jacfwd``, as in
``torch.func``, built on gradviz's engine (``autograd.grad``) and forward-mode AD.

Note [Function transforms on the engine]
----------------------------------------
``grad(f)(x)`` runs ``f`` on a fresh leaf that stands for ``x`` (a differentiable alias when
``x`` itself requires grad) and differentiates with ``autograd.grad``. When the arguments
are part of an outer graph (an enclosing ``grad``), the gradient is computed with
``create_graph=True`` through the alias, so transforms compose: ``grad(grad(f))`` works.
``jacrev`` loops over the output's elements (one ``vjp`` each); ``jacfwd`` loops over the
input's elements (one ``jvp`` each); ``hessian`` is ``jacfwd(jacrev(f))``. Inside a dual
level (``jacfwd(jacrev(f))``, ``jvp(grad(f))``) the detached leaves and results keep their
tangents (``_detach``), so forward mode sees through the reverse-mode transforms.
"""

from __future__ import annotations

import functools

from .. import ops
from .._tensor import Tensor
from ..autograd import _transform_state
from ..autograd import forward_ad as _fwad
from ..autograd._functional import _detach_keeping_tangent, _forward_ad_active
from ..autograd._functional import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from . import _pytree
from ._vmap import VmapInfo, _Randomness

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian"]


def _argnums_tuple(argnums, count, name):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    normalized = []
    for n in nums:
        if not isinstance(n, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got: {type(n)}")
        if not -count <= n < count:
            raise RuntimeError(
                f"Got argnums={argnums}, but only {count} positional inputs")
        normalized.append(n % count)
    return single, tuple(normalized)


def _track(value):
    """A leaf (or differentiable alias) standing for ``value`` (Note [Function transforms...])."""
    if not isinstance(value, Tensor):
        return value
    if value.requires_grad:
        return ops.view(value, value._data.shape)
    leaf = _detach(value).requires_grad_(value.dtype.is_floating_point)
    return leaf


def _detach(tensor):
    """``tensor.detach()`` that keeps its forward-AD tangent, so transforms run inside ``jvp``
    or ``jacfwd`` (``hessian`` is ``jacfwd(jacrev(f))``) pass tangents through."""
    return _detach_keeping_tangent(tensor) if _forward_ad_active() else tensor.detach()


def _detached(tree):
    """``tree`` with its tensors detached: what a transform returns as ``aux`` when its inputs
    have no outer graph (torch unwraps them from the transform's level)."""
    leaves, spec = _pytree.tree_flatten(tree)
    return _pytree.tree_unflatten([_detach(leaf) if isinstance(leaf, Tensor) else leaf
                                   for leaf in leaves], spec)


def _outer_graph(values):
    return any(isinstance(v, Tensor) and v.requires_grad for v in values)


class _Transform:
    """Mark a transform as running (custom Functions check ``setup_context`` under it)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _transform_state.stack.append(self.name)

    def __exit__(self, *exc):
        _transform_state.stack.pop()


def grad_and_value(func, argnums=0, has_aux=False):
    """Like :func:`grad`, returning ``(gradient, value)``, or ``(gradient, (value, aux))``
    with ``has_aux``, as ``torch.func.grad_and_value``."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "grad_and_value")
        args = list(args)
        flat_by_arg = {}
        outer = False
        for n in nums:
            leaves, spec = _pytree.tree_flatten(args[n])
            outer = outer or _outer_graph(leaves)
            tracked = [_track(leaf) for leaf in leaves]
            flat_by_arg[n] = tracked
            args[n] = _pytree.tree_unflatten(tracked, spec)
        with enable_grad(), _Transform("grad"):
            result = func(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(
                    "grad_and_value(f)(*args): output of function f should be a tuple: "
                    "(output, aux) if has_aux is True")
            result, aux = result
        if not isinstance(result, Tensor):
            raise RuntimeError(
                f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(result)}")
        if result.numel() != 1 or result.ndim != 0:
            raise RuntimeError(
                "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                f"tensor with {result.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs "
                "instead?")
        inputs = [leaf for n in nums for leaf in flat_by_arg[n]]
        differentiable = [leaf for leaf in inputs if isinstance(leaf, Tensor) and leaf.requires_grad]
        grads = ()
        if differentiable and result.requires_grad:
            grads = _autograd_grad(result, differentiable, allow_unused=True,
                                   create_graph=outer)
        grads = iter(grads)
        per_arg = []
        for n in nums:
            values = []
            for leaf in flat_by_arg[n]:
                if isinstance(leaf, Tensor) and leaf.requires_grad:
                    g = next(grads, None) if result.requires_grad else None
                    values.append(g if g is not None else ops.zeros_like(leaf))
                else:
                    values.append(leaf if not isinstance(leaf, Tensor) else ops.zeros_like(leaf))
            per_arg.append(_pytree.tree_unflatten(values, _pytree.tree_flatten(args[n])[1]))
        gradient = per_arg[0] if single else tuple(per_arg)
        value = result if outer else _detach(result)
        if has_aux:
            return gradient, (value, aux if outer else _detached(aux))
        return gradient, value

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of the scalar function ``func`` with respect to ``args[argnums]``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import grad
    >>> grad(lambda x: (x ** 3).sum())(torch.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    >>> grad(grad(lambda x: x.sin()))(torch.tensor(0.0))
    tensor(-0.)
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = inner(*args, **kwargs)
        if has_aux:
            return gradient, value[1]
        return gradient

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` returns one gradient per primal.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import vjp
    >>> out, vjp_fn = vjp(torch.sin, torch.tensor([0.0, 1.0]))
    >>> vjp_fn(torch.ones(2))[0].allclose(torch.tensor([0.0, 1.0]).cos())
    True
    """
    flat, spec = _pytree.tree_flatten(tuple(primals))
    outer = _outer_graph(flat)
    tracked = [_track(leaf) for leaf in flat]
    with enable_grad(), _Transform("vjp"):
        result = func(*_pytree.tree_unflatten(tracked, spec))
    aux = None
    if has_aux:
        result, aux = result
    out_flat, out_spec = _pytree.tree_flatten(result)

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        cot_flat, cot_spec = _pytree.tree_flatten(cotangents)
        if len(cot_flat) != len(out_flat):
            raise RuntimeError(
                f"Expected pytree structure of cotangents to be the same as pytree structure of "
                f"outputs to the function. cotangents: {cot_spec}, primal output: {out_spec}")
        pairs = [(o, c) for o, c in zip(out_flat, cot_flat) if o.requires_grad]
        differentiable = [t for t in tracked if isinstance(t, Tensor) and t.requires_grad]
        grads = [None] * len(differentiable)
        if pairs and differentiable:
            grads = _autograd_grad([o for o, _ in pairs], differentiable,
                                   grad_outputs=[c for _, c in pairs], allow_unused=True,
                                   retain_graph=True,
                                   create_graph=outer if create_graph is None else create_graph)
        grads = iter(grads)
        values = []
        for t in tracked:
            if isinstance(t, Tensor) and t.requires_grad:
                g = next(grads)
                values.append(g if g is not None else ops.zeros_like(t))
            else:
                values.append(ops.zeros_like(t) if isinstance(t, Tensor) else None)
        return tuple(_pytree.tree_unflatten(values, spec))

    value = _pytree.tree_unflatten([o if outer else _detach(o) for o in out_flat], out_spec)
    if has_aux:
        return value, vjp_fn, aux if outer else _detached(aux)
    return value, vjp_fn


def jacrev(func, argnums=0, *, has_aux=False):
    """The Jacobian of ``func`` with respect to ``args[argnums]`` by reverse mode: one ``vjp``
    per output element. Shape: ``output.shape + input.shape``; outputs and arguments may be
    tuples, lists or dicts of tensors, and the result nests the same way (by output, then by
    argument).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import jacrev
    >>> jacrev(lambda x: x * x)(torch.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """

    @functools.wraps(func)
    def wrapper(*args):
        single, nums = _argnums_tuple(argnums, len(args), "jacrev")

        def selected(*chosen):
            full = list(args)
            for n, value in zip(nums, chosen):
                full[n] = value
            return func(*full)

        chosen = [args[n] for n in nums]
        result = vjp(selected, *chosen, has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        out_flat, out_spec = _pytree.tree_flatten(output)
        if not all(isinstance(out, Tensor) for out in out_flat):
            raise RuntimeError(
                "jacrev(func, ...)(*args): Expected all outputs of func to be Tensors, got "
                f"{[type(out).__name__ for out in out_flat]}")
        per_output = []
        for position, out in enumerate(out_flat):
            rows = []
            for index in range(out.numel()):
                cotangents = [ops.zeros_like(other) for other in out_flat]
                cotangents[position].view(-1)[index] = 1.0
                rows.append(vjp_fn(_pytree.tree_unflatten(cotangents, out_spec)))
            per_arg = []
            for arg_position, value in enumerate(chosen):
                leaves, spec = _pytree.tree_flatten(value)
                blocks = []
                for leaf_position, leaf in enumerate(leaves):
                    if rows:
                        block = ops.stack([_pytree.tree_flatten(row[arg_position])[0][leaf_position]
                                           for row in rows])
                    else:
                        block = ops.zeros((0,) + tuple(leaf.shape), dtype=leaf.dtype)
                    blocks.append(block.reshape(tuple(out.shape) + tuple(leaf.shape)))
                per_arg.append(_pytree.tree_unflatten(blocks, spec))
            per_output.append(per_arg[0] if single else tuple(per_arg))
        jacobian = _pytree.tree_unflatten(per_output, out_spec)
        if has_aux:
            return jacobian, result[2]
        return jacobian

    return wrapper


def jvp(func, primals, tangents, *, has_aux=False):
    """``(func(*primals), J @ tangents)`` by forward-mode AD (``gradviz.autograd.forward_ad``).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import jvp
    >>> jvp(lambda x: x * x, (torch.tensor([1.0, 2.0]),), (torch.tensor([1.0, 1.0]),))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to be tuples. E.g. it "
            "should be valid to call f(*primals).")
    flat_p, spec = _pytree.tree_flatten(primals)
    flat_t, tangent_spec = _pytree.tree_flatten(tangents)
    if len(flat_p) != len(flat_t):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
            f"structure. For example, if primals is a tuple of 3 tensors, tangents also must "
            f"be. Got primals with structure {spec} and tangents with structure {tangent_spec}")
    with _fwad.dual_level(), _Transform("jvp"):
        duals = [_fwad.make_dual(p, t) if isinstance(p, Tensor) else p
                 for p, t in zip(flat_p, flat_t)]
        result = func(*_pytree.tree_unflatten(duals, spec))
        aux = None
        if has_aux:
            result, aux = result
        out_flat, out_spec = _pytree.tree_flatten(result)
        primal_out, tangent_out = [], []
        for value in out_flat:
            unpacked = _fwad.unpack_dual(value)
            primal_out.append(unpacked.primal)
            tangent_out.append(unpacked.tangent if unpacked.tangent is not None
                               else ops.zeros_like(unpacked.primal))
    pair = (_pytree.tree_unflatten(primal_out, out_spec), _pytree.tree_unflatten(tangent_out, out_spec))
    return pair + (aux,) if has_aux else pair


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` by forward mode: one ``jvp`` per input element.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import jacfwd
    >>> jacfwd(lambda x: x.sin())(torch.tensor([0.0, 0.0]))
    tensor([[1., 0.],
            [0., 1.]])
    """

    @functools.wraps(func)
    def wrapper(*args):
        single, nums = _argnums_tuple(argnums, len(args), "jacfwd")
        with _Randomness(randomness):
            size = sum(leaf.numel() for n in nums for leaf in _pytree.tree_flatten(args[n])[0])
            return _jacfwd(func, args, single, nums, has_aux, VmapInfo(size, randomness))

    return wrapper


def _jacfwd(func, args, single, nums, has_aux, info):
    """``jacfwd``'s columns, one ``jvp`` per element of each chosen argument. As in PyTorch,
    where ``jacfwd`` is ``vmap`` over ``jvp``, the calls run at a vmap level (``info`` on the
    transform stack): a custom Function inside needs a vmap rule, and random ops follow
    ``randomness``. Outputs and arguments may be pytrees; the result nests by output, then by
    argument."""
    flat_args, args_spec = _pytree.tree_flatten(tuple(args))
    # which flat leaves belong to which chosen argument
    owners, start = [], 0
    for arg in args:
        count = _pytree.tree_flatten(arg)[1].num_leaves
        owners.append(range(start, start + count))
        start += count
    columns = {}  # (flat output index, flat arg leaf index) -> list of output tangents
    out_flat = out_spec = aux = None
    _transform_state.stack.append(info)
    try:
        for n in nums:
            for leaf_index in owners[n]:
                leaf = flat_args[leaf_index]
                for element in range(leaf.numel()):
                    tangents = [ops.zeros_like(a) if isinstance(a, Tensor) else a
                                for a in flat_args]
                    tangents[leaf_index].view(-1)[element] = 1.0
                    result = jvp(func, tuple(args),
                                 tuple(_pytree.tree_unflatten(tangents, args_spec)),
                                 has_aux=has_aux)
                    out_flat, out_spec = _pytree.tree_flatten(result[0])
                    if has_aux:
                        aux = result[2]
                    for o, column in enumerate(_pytree.tree_flatten(result[1])[0]):
                        columns.setdefault((o, leaf_index), []).append(column)
        if out_flat is None:  # every chosen argument is empty
            out_flat, out_spec = _pytree.tree_flatten(func(*args))
    finally:
        _transform_state.stack.pop()
    per_output = []
    for o, out in enumerate(out_flat):
        per_arg = []
        for n in nums:
            blocks = []
            for leaf_index in owners[n]:
                leaf = flat_args[leaf_index]
                shape = tuple(out.shape) + tuple(leaf.shape)
                found = columns.get((o, leaf_index))
                blocks.append(ops.stack(found, -1).reshape(shape) if found
                              else ops.zeros(shape, dtype=out.dtype))
            per_arg.append(_pytree.tree_unflatten(blocks, _pytree.tree_flatten(args[n])[1]))
        per_output.append(per_arg[0] if single else tuple(per_arg))
    jacobian = _pytree.tree_unflatten(per_output, out_spec)
    return (jacobian, aux) if has_aux else jacobian


def hessian(func, argnums=0):
    """The Hessian of the scalar-valued ``func`` with respect to ``args[argnums]``: the
    forward-mode Jacobian of its reverse-mode Jacobian (``jacfwd(jacrev(func))``), as
    ``torch.func.hessian``. Shape: ``output.shape + input.shape + input.shape``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(torch.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)

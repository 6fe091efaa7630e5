"""Forward-mode AD: dual levels, tangent storage and tangent propagation.

The public API is :mod:`gradviz.autograd.forward_ad`; this module is its machinery.

Note [Where tangents live]
--------------------------
A tensor's tangent at the active dual level is the attribute ``tensor._forward_tangent``
(``None`` on the class). As in PyTorch only one dual level exists at a time, so one field
suffices. Every tensor that receives a tangent is remembered (weakly) by the level, and
``exit_dual_level`` clears them all, so tangents never outlive their level.

A view without a tangent of its own whose base has one reads its tangent as the same view
of the base's tangent (``tangent_of``), so a base that gains a tangent through an in-place
op is seen through views made earlier. View ops give their output the same view of the
input's tangent, and in-place ops write into the existing tangent, so views and bases stay
consistent (Note [Forward AD of in-place ops]).

Note [Generic JVP from the VJP rule]
------------------------------------
Every built-in op has a backward rule written with differentiable gradviz ops (Note
[Backward rules are differentiable] in ``ops/_registry.py``). The rule computes
``VJP(u) = J^T u``, which is linear in the cotangent ``u``; hence for the input tangents
``v``::

    J v = d/du < VJP(u), v >

``_generic_jvp`` runs the rule on a leaf ``u`` (zeros of each output's shape) with grad
mode on, takes the inner product with the input tangents and differentiates it with
respect to ``u``. Broadcast inputs need no care: ``<g, v>`` broadcasts ``v`` to ``g``'s shape,
which equals ``<sum_to(g), v>``. The tangent is differentiable (it has a graph to the primals
and tangents) whenever grad mode is on and one of them requires grad, as in PyTorch.
``_FAST_RULES`` holds hand-written rules for the most frequent ops; both give the same values
(``tests/autograd/test_forward_ad.py`` checks every op against torch).

While a rule or a custom ``jvp`` runs, propagation is suspended: the ops it performs act on
primals and tangents and must not compute tangents of their own.
"""

from __future__ import annotations

import weakref

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .. import ops
from .._tensor import Tensor, _wrap
from ..ops import _inplace as _ops_inplace

__all__ = [
    "enter_dual_level", "exit_dual_level", "current_level", "tangent_of", "set_tangent",
    "propagate", "suspended", "inplace", "function_jvp",
]

NESTED_MESSAGE = "Nested forward mode AD is not supported at the moment"
NO_LEVEL_MESSAGE = (
    "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
    "enter_dual_level() first."
)


class _Level:
    """The active dual level: its index and the tensors that hold a tangent at it."""

    def __init__(self, index):
        self.index = index
        # id -> weak reference. Not a WeakSet: adding a tensor it holds already compares two
        # references with ==, which is elementwise for tensors (and raises for more than one
        # element); a reference's callback drops the entry before its id can be reused
        self.holders: dict[int, weakref.ref] = {}

    def hold(self, tensor):
        key = id(tensor)
        if key not in self.holders:
            holders = self.holders

            def forget(_reference, key=key):
                holders.pop(key, None)

            self.holders[key] = weakref.ref(tensor, forget)

    def held(self):
        """The live tensors that hold a tangent at this level."""
        return [t for t in (ref() for ref in list(self.holders.values())) if t is not None]


_level: _Level | None = None  # the active _Level, or None
_mode_enabled = True  # PyTorch's forward grad mode: off inside inference_mode


def current_level():
    return _level


def propagating():
    """Whether tangents propagate now: a level is open and not suspended (inside a custom
    Function's ``forward`` or ``jvp``, inside ``inference_mode``, or one of the rules here)."""
    return _ext_ops._forward_ad is not None


def set_mode_enabled(mode):
    """Turn forward grad mode on or off (``inference_mode`` does, as in PyTorch: no tangent
    propagates or is visible while it is off); returns the previous mode."""
    global _mode_enabled
    previous = _mode_enabled
    _mode_enabled = bool(mode)
    _ext_ops._forward_ad = propagate if _mode_enabled and _level is not None else None
    return previous


def enter_dual_level():
    """Open a dual level and return its index (0: levels do not nest, as in PyTorch)."""
    global _level
    if _level is not None:
        raise RuntimeError(NESTED_MESSAGE)
    _level = _Level(0)
    if _mode_enabled:
        _ext_ops._forward_ad = propagate  # Note [Forward AD hook] in gradviz_ext/_ops.py
    return _level.index


def exit_dual_level(*, level=None):
    """Close the active dual level; every tangent recorded at it is dropped."""
    global _level
    if _level is None:
        raise RuntimeError("Dual level must be a positive number.")
    if level is not None and level != _level.index:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported."
        )
    for tensor in _level.held():
        tensor._forward_tangent = None
    _level = None
    _ext_ops._forward_ad = None


# ---- tangent storage (Note [Where tangents live]) ------------------------------------

def tangent_of(tensor):
    """``tensor``'s tangent at the active level, or None."""
    tangent = tensor._forward_tangent
    if tangent is not None or _level is None:
        return tangent
    base = tensor._base
    if base is not None and base._forward_tangent is not None:
        region = _replay_numpy(base._forward_tangent._data, tensor._view_chain)
        tangent = _wrap(region)
        set_tangent(tensor, tangent)
    return tangent


def set_tangent(tensor, tangent):
    assert _level is not None, "a tangent is set only inside a dual level"
    tensor._forward_tangent = tangent
    _level.hold(tensor)


def _replay_numpy(array, chain):
    for op, attrs in chain:
        array = op.forward(array, **attrs)
    return array


class suspended:
    """Context manager: no tangent propagation inside (rules, custom forwards and jvps)."""

    __slots__ = ("previous",)

    def __enter__(self):
        self.previous = _ext_ops._forward_ad
        _ext_ops._forward_ad = None
        return self

    def __exit__(self, *exc):
        _ext_ops._forward_ad = self.previous


# ---- built-in ops -----------------------------------------------------------------------

def propagate(op, inputs, attrs, outputs):
    """Give ``outputs`` (a tuple) of the built-in ``op`` their tangents (Note [Forward AD hook])."""
    tangents = None
    for index, x in enumerate(inputs):
        if isinstance(x, Tensor):
            tangent = x._forward_tangent
            if tangent is None and x._base is not None:
                tangent = tangent_of(x)
            if tangent is not None:
                if tangents is None:
                    tangents = [None] * len(inputs)
                tangents[index] = tangent
    if tangents is None or op.backward is None:
        return
    if not any(out._data.dtype.kind == "f" for out in outputs):
        return
    _ext_ops._forward_ad = None  # suspended while the rule runs (Note [Generic JVP ...])
    try:
        fast = _FAST_RULES.get(op.name)
        if fast is not None:
            results = (fast(inputs, tangents, outputs[0], attrs),)
        elif op.view:
            results = (_ext_ops.apply_op(op, (tangents[0],), attrs),)
        else:
            results = _generic_jvp(op, inputs, attrs, outputs, tangents)
    finally:
        _ext_ops._forward_ad = propagate
    for out, tangent in zip(outputs, results):
        if tangent is not None and out._data.dtype.kind == "f":
            set_tangent(out, _fit(tangent, out))
            _keep_saved_output(out)


# Note [Saved outputs keep their tangent]
# ---------------------------------------
# A node that saves its own output (exp, tanh, sigmoid, relu, ...) keeps only the output's
# array and rebuilds a tensor on unpack (no reference cycle through grad_fn). The rebuilt
# tensor has no tangent, so forward-over-reverse (``jvp(grad(f))``, ``jacfwd(jacrev(f))``,
# ``hessian``) would miss the output's contribution and give silently wrong values. PyTorch's
# SavedVariable keeps the forward gradient. Inside a dual level, an output that gets a tangent
# is therefore kept whole by the saved entry (unpack returns the tensor itself: same array,
# grad_fn and version counter), so backward rules see its tangent. The cycle this makes
# (output -> node -> saved entry -> output) is only built inside a dual level, and the
# garbage collector or the release after backward breaks it.

def _keep_saved_output(out):
    node = out.grad_fn
    saved = getattr(node, "_saved_output", None) if node is not None else None
    if saved is None:
        saved = _saved_entry_of_function(node, out)
    if (saved is not None and saved._is_output and saved._tensor is None
            and not saved._has_hooks and saved._data is out._data):
        saved._tensor = out
        saved._data = None


def _saved_entry_of_function(node, out):
    for saved in getattr(node, "_saved", None) or ():
        if saved is not None and getattr(saved, "_is_output", False) and saved._data is out._data:
            return saved
    return None


def _fit(tangent, out):
    """The tangent in the output's dtype and shape."""
    if tangent._data.dtype != out._data.dtype:
        tangent = ops.to(tangent, out.dtype)
    if tangent._data.shape != out._data.shape:
        tangent = ops.clone(ops.expand(tangent, out._data.shape))
    return tangent


class _RuleContext:
    """What a backward rule reads as ``ctx`` (the ``OpNode`` interface) when the generic JVP
    calls it: inputs, output, ``needs_input_grad`` and the forward's attributes."""

    def __init__(self, op, inputs, output, attrs, needs):
        self.op = op
        self.attrs = attrs
        self.needs_input_grad = needs
        self._inputs = inputs
        self._output = output

    def input(self, index):
        return self._inputs[index]

    def output(self):
        return self._output

    def __getattr__(self, name):
        attrs = self.__dict__.get("attrs")
        if attrs is not None and name in attrs:
            return attrs[name]
        raise AttributeError(f"'{self.op.node}' object has no attribute '{name}'")


def _generic_jvp(op, inputs, attrs, outputs, tangents):
    """Note [Generic JVP from the VJP rule]."""
    from ._functional import grad

    differentiable = _engine.is_grad_enabled() and (
        any(isinstance(x, Tensor) and x.requires_grad for x in inputs)
        or any(t is not None and t.requires_grad for t in tangents))
    needs = tuple(t is not None for t in tangents)
    ctx = _RuleContext(op, inputs, outputs[0], attrs, needs)
    previous = _engine.set_grad_enabled_flag(True)
    observer = _engine.set_forward_observer(None)  # these nodes are not the user's graph
    try:
        cotangents = []
        leaves = []
        for out in outputs:
            u = _wrap(np.zeros(out._data.shape, dtype=out._data.dtype))
            if out._data.dtype.kind == "f":
                u._requires_grad = True
                leaves.append(u)
            cotangents.append(u)
        grads = op.backward(ctx, *cotangents)
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        total = None
        for g, v in zip(grads, tangents):
            if g is None or v is None:
                continue
            term = ops.sum(ops.mul(g, v))
            total = term if total is None else ops.add(total, term)
        results = None
        if total is not None and total.requires_grad:
            _engine.set_grad_enabled_flag(previous)
            default = _engine.set_default_observer(None)
            try:
                results = grad(total, leaves, allow_unused=True, create_graph=differentiable)
            finally:
                _engine.set_default_observer(default)
    finally:
        _engine.set_grad_enabled_flag(previous)
        _engine.set_forward_observer(observer)
    tangents_out: list = []
    position = 0
    for out in outputs:
        if out._data.dtype.kind != "f":
            tangents_out.append(None)
            continue
        value = results[position] if results is not None else None
        position += 1
        tangents_out.append(value if value is not None else ops.zeros_like(out))
    return tuple(tangents_out)


# ---- hand-written rules for the most frequent ops ---------------------------------------
# rule(inputs, tangents, output, attrs) -> the output's tangent. A missing input tangent is
# None; numbers are constants. The result may be broadcastable to the output (``_fit``).

def _scaled(tangent, factor):
    return tangent if factor == 1 else ops.mul(tangent, factor)


def _sum_terms(*terms):
    present = [t for t in terms if t is not None]
    total = present[0]
    for term in present[1:]:
        total = ops.add(total, term)
    return total


def _add_rule(inputs, tangents, out, attrs):
    ta, tb = tangents
    alpha = attrs.get("alpha", 1)
    if ta is not None and tb is not None:
        return ops.add(ta, tb, alpha=alpha)
    return ops.clone(ta) if tb is None else _scaled(ops.clone(tb), alpha)


def _sub_rule(inputs, tangents, out, attrs):
    ta, tb = tangents
    alpha = attrs.get("alpha", 1)
    if ta is not None and tb is not None:
        return ops.sub(ta, tb, alpha=alpha)
    return ops.clone(ta) if tb is None else _scaled(ops.neg(tb), alpha)


def _mul_rule(inputs, tangents, out, attrs):
    (a, b), (ta, tb) = inputs, tangents
    return _sum_terms(ops.mul(ta, b) if ta is not None else None,
                      ops.mul(a, tb) if tb is not None else None)


def _div_rule(inputs, tangents, out, attrs):
    (_, b), (ta, tb) = inputs, tangents
    if tb is None:
        return ops.div(ta, b)
    numerator = ops.neg(ops.mul(out, tb)) if ta is None else ops.sub(ta, ops.mul(out, tb))
    return ops.div(numerator, b)


def _make_linear(op_name):
    """Ops linear in their only tensor input: the tangent goes through the same op."""
    def rule(inputs, tangents, out, attrs):
        return _ext_ops.apply_op(ops.TABLE[op_name], (tangents[0],) + tuple(inputs[1:]), attrs)
    return rule


def _make_bilinear(op_name):
    def rule(inputs, tangents, out, attrs):
        op = ops.TABLE[op_name]
        (a, b), (ta, tb) = inputs, tangents
        return _sum_terms(_ext_ops.apply_op(op, (ta, b), attrs) if ta is not None else None,
                          _ext_ops.apply_op(op, (a, tb), attrs) if tb is not None else None)
    return rule


def _unary(derivative):
    def rule(inputs, tangents, out, attrs):
        return ops.mul(tangents[0], derivative(inputs[0], out, attrs))
    return rule


def _make_fast_rules():
    rules = {"add": _add_rule, "sub": _sub_rule, "mul": _mul_rule, "div": _div_rule}
    for name in ("neg", "clone", "sum_SumBackward0", "sum_SumBackward1", "mean", "mean_dim",
                 "cumsum", "flip", "to"):
        rules[name] = _make_linear(name)
    for name in ("mm", "mv", "dot", "bmm"):
        rules[name] = _make_bilinear(name)
    rules["exp"] = _unary(lambda a, out, attrs: out)
    rules["tanh"] = _unary(lambda a, out, attrs: ops.rsub(ops.mul(out, out), 1))
    rules["sigmoid"] = _unary(lambda a, out, attrs: ops.mul(out, ops.rsub(out, 1)))
    rules["sin"] = _unary(lambda a, out, attrs: ops.cos(a))
    rules["cos"] = _unary(lambda a, out, attrs: ops.neg(ops.sin(a)))
    rules["log"] = _unary(lambda a, out, attrs: ops.reciprocal(a))
    rules["sqrt"] = _unary(lambda a, out, attrs: ops.div(0.5, out))
    rules["reciprocal"] = _unary(lambda a, out, attrs: ops.neg(ops.mul(out, out)))
    return rules


class _LazyRules(dict):
    """The fast-rule table, built on first use (the ops package imports after this module)."""

    def get(self, key, default=None):
        if not self:
            self.update(_make_fast_rules())
        return dict.get(self, key, default)


_FAST_RULES = _LazyRules()


# ---- in-place ops (Note [Forward AD of in-place ops]) ------------------------------------
# Note [Forward AD of in-place ops]
# ``ops._inplace.inplace(self, fn)`` computes ``fn(old value)`` out of place and writes it into
# ``self``. Under a dual level the old value carries ``self``'s tangent, so the result gets the
# new tangent, which is then written *into* ``self``'s tangent (a view's tangent is a view of
# its base's tangent, so the base sees the change). A tensor that had no tangent gets one: a
# view first gives its base a zero tangent. When the result has no tangent, ``self``'s tangent
# becomes zeros, as in PyTorch (``x.zero_()``, ``x.copy_(plain)``).

def inplace(self, fn, others, run):
    """Run the in-place op ``run(self, fn, *others)`` and update ``self``'s tangent."""
    old_tangent = tangent_of(self)
    results = []

    def fn_with_tangent(old):
        if old_tangent is not None:
            set_tangent(old, old_tangent)
        result = fn(old)
        results.append(result)
        return result

    out = run(self, fn_with_tangent, *others)
    new_tangent = tangent_of(results[-1]) if results else None
    if new_tangent is None and old_tangent is None:
        return out
    target = old_tangent
    if target is None:
        target = _new_tangent_for(self)
    if new_tangent is None:
        target._data[...] = 0
    else:
        np.copyto(target._data, new_tangent._data, casting="unsafe")
        if new_tangent.requires_grad:
            # keep the tangent differentiable: it is the freshly computed tensor
            set_tangent(self, _fit(new_tangent, self))
    return out


def _new_tangent_for(tensor):
    """A zero tangent for ``tensor``; for a view, a view of a (new) zero tangent of its base."""
    base = tensor._base
    if base is None:
        tangent = _wrap(np.zeros(tensor._data.shape, dtype=_tangent_dtype(tensor)))
        set_tangent(tensor, tangent)
        return tangent
    if tangent_of(base) is None:
        set_tangent(base, _wrap(np.zeros(base._data.shape, dtype=_tangent_dtype(base))))
    tensor._forward_tangent = None
    return tangent_of(tensor)


def _tangent_dtype(tensor):
    return tensor._data.dtype if tensor._data.dtype.kind == "f" else np.float32


# ---- custom Functions (docs/function_contract.md, rule 13) -------------------------------

def _differentiable_output(ctx, raw, out):
    if not isinstance(out, Tensor) or not out.dtype.is_floating_point:
        return False
    return not any(raw is t for t in ctx._non_differentiable)


def function_jvp(cls, ctx, args, raw_outputs, outputs):
    """Call ``cls.jvp`` and give the Function's outputs their tangents.

    Not called at all when no argument has a tangent. Tensor arguments without a tangent get
    zeros (``None`` after ``ctx.set_materialize_grads(False)``), non-tensors ``None``;
    ``ctx.saved_tensors`` returns what ``save_for_forward`` saved.
    """
    tangents = [tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tangents):
        return
    for index, a in enumerate(args):
        if isinstance(a, Tensor) and tangents[index] is None and ctx.materialize_grads:
            if a.dtype.is_floating_point:
                tangents[index] = ops.zeros_like(a)
    is_tuple = isinstance(raw_outputs, tuple)
    raw = raw_outputs if is_tuple else (raw_outputs,)
    wrapped = outputs if is_tuple else (outputs,)
    ctx._in_jvp = True
    try:
        with suspended():
            result = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) != len(raw):
        raise RuntimeError(
            f"Function's jvp returned an invalid number of forward gradients (expected "
            f"{len(raw)} but got {len(result)})"
        )
    for position, (tangent, raw_out, out) in enumerate(zip(result, raw, wrapped)):
        if tangent is None:
            continue
        if not isinstance(tangent, Tensor):
            raise RuntimeError(
                f"expected Variable or None (got {type(tangent).__name__}) for grad output "
                f"{position}."
            )
        if not _differentiable_output(ctx, raw_out, out):
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {position}, but  the "
                "corresponding forward output is not a differentiable Tensor.You should "
                "return None at that position instead."
            )
        check_tangent_shape(out, tangent)
        _check_view_and_inplace_tangent(ctx, args, tangents, raw_out, out, tangent)
        set_tangent(out, tangent)
        _keep_saved_output(out)


_INPLACE_JVP_MESSAGE = (
    "An inplace custom Function is not modifying the forward mode gradients inplace. If the "
    "forward is modifying an input inplace, then the jvp function must modify the "
    "corresponding gradient inplace.")
_VIEW_JVP_MESSAGE = (
    "A custom Function's forward is returning a view (or an input as-is) but the jvp is not "
    "returning a view.")
_VIEW_OF_GRAD_JVP_MESSAGE = (
    "A custom Function is returning a view but the jvp is not returning a view of the given "
    "grad input.")


def _check_view_and_inplace_tangent(ctx, args, tangents, raw_out, out, tangent):
    """PyTorch's rules for an output that is an input modified in place (the jvp modifies
    that input's tangent in place and returns it) or a view of an input (the jvp returns a
    view of that input's tangent)."""
    if any(raw_out is d for d in ctx._dirty_tensors):
        for arg, given in zip(args, tangents):
            if arg is raw_out and tangent is not given:
                raise RuntimeError(_INPLACE_JVP_MESSAGE)
        return
    base = out._base
    if base is None:
        return
    for arg, given in zip(args, tangents):
        if not isinstance(arg, Tensor) or given is None:
            continue
        if base is arg or base is arg._base:
            if tangent._base is None:
                raise RuntimeError(_VIEW_JVP_MESSAGE)
            if tangent._base is not (given if given._base is None else given._base):
                raise RuntimeError(_VIEW_OF_GRAD_JVP_MESSAGE)
            return


def check_tangent_shape(primal, tangent):
    if tangent._data.shape != primal._data.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(primal.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )


# ops/_inplace.py runs this rule under a dual level; autograd sits above ops, so it installs it.
_ops_inplace.forward_ad_inplace = inplace

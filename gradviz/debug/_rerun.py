"""Re-running one custom Function for the doctor's checks, on gradviz or on PyTorch.

Note [The doctor's rerun interface]
-----------------------------------
The checker (``_gradcheck``) and the hints (``_hints``) never touch a Function or a graph
directly: they talk to a *rerun*, which holds the Function's recorded arguments as numpy
arrays (``base``, one per tensor argument, in one working dtype) and the random cotangents,
and offers

- ``evaluate(arrays)``: the forward's differentiable outputs (float64 arrays) at ``arrays``;
- ``analytic(scale, arrays, only)``: the Function's own backward for the cotangents, as the
  engine hands it to the inputs (summed down to their shapes, cast to their dtypes), with a
  record of what backward returned (``reduced``, ``cast``, ``none_edges``,
  ``mutated_grads``);
- ``second_order(u)`` and ``cotangent_derivative(p, u_p)``: the derivatives of backward
  (double backward);
- the finite-difference helpers every implementation shares (``difference``, ``moved``,
  ``prepare``, ``outputs_alone``).

:class:`Rerun` implements the shared part; :class:`GradvizRerun` runs a gradviz Function
through gradviz's engine, and ``_torch_rerun.TorchRerun`` a ``torch.autograd.Function``
through ``torch.autograd.grad``. Each also says which arguments are checked
(``positions_of``) and moves an argument to a probe point (``scaled``).
"""

from __future__ import annotations

import contextlib
import math
import random as _python_random

import numpy as np

from gradviz_ext import engine as _engine

from .. import ops as _ops
from .._tensor import Tensor
from ..autograd._functional import grad as _autograd_grad
from ..autograd._functional import make_graph_task
from ..autograd.function import DelayedError
from ..autograd.grad_mode import enable_grad
from ..ops import _creation

__all__ = ["Rerun", "GradvizRerun", "RTOL"]

# Relative tolerance by the precision the outputs were computed in. Generous on purpose: the
# bugs the doctor looks for (a sign, a factor, a swapped or ignored gradient) are O(1) errors.
RTOL = {8: 1e-4, 4: 2e-2, 2: 1e-1}
# Safety factor on the rounding-noise estimate (forward rounding can exceed one ulp per output).
_NOISE_SAFETY = 64.0
# Note [Random forwards]
# ----------------------
# A forward that draws random numbers (dropout with a saved mask, noise injection) gives
# other outputs at every call, so finite differences of it mean nothing, and the doctor
# used to skip it ("not deterministic"). But its backward is meant for the randomness its
# own forward drew: so every forward the doctor runs starts the random generators (the
# library's default generator, numpy's and Python's global ones) from this one state, and
# puts them back afterwards. The re-runs then see one mask, the one backward must match,
# and the user's random streams are left where they were. A forward that draws from a
# generator it owns (``generator=``) is still not deterministic, and skipped as before.
_RERUN_SEED = 0x646F63


def _computed_in_single(outputs, inputs):
    """Note [A forward in single precision]: float64 outputs that are all float32 numbers, of
    float64 inputs that are not."""
    def single(array):
        finite = array[np.isfinite(array)]
        return bool(np.array_equal(finite.astype(np.float32).astype(np.float64), finite))

    return (all(o.dtype == np.float64 and single(o) for o in outputs)
            and any(not single(i) for i in inputs))


# Note [A forward in single precision]
# ------------------------------------
# A forward that computes in float32 and casts back (``x.float() ... .double()``) gives float64
# outputs with float32's precision: finite differences with float64's step (about 3e-6 of
# the entry) then see outputs that move by whole float32 ulps or not at all, and a right
# backward disagrees with them. When every output value is a float32 number while some
# checked input is not (so the inputs were not merely simple numbers), the entries are
# differenced with float32's step and tolerance. The backward is then held to float32's
# tolerance too, which still finds the O(1) errors the doctor looks for.


class Rerun:
    """The Function, its recorded arguments and the cotangents, in one working dtype.

    Subclasses implement ``_array``, ``_output_array``, ``_forward`` and ``analytic`` (Note
    [The doctor's rerun interface]); the finite differences are shared.
    """

    def __init__(self, cls, args, needs, positions, dtype, rng):
        self.cls = cls
        self.positions = positions
        self.needs = needs
        self.args = args
        # tensor arguments as arrays in the working dtype (floating ones only are converted)
        self.base = {}
        for i, a in enumerate(args):
            data = self._array(a)
            if data is not None:
                if dtype is not None and data.dtype.kind == "f":
                    data = data.astype(dtype)
                self.base[i] = data
        self.tensor_positions = sorted(self.base)
        # at probe points (Note [Where the doctor evaluates]) the rounding noise also counts
        # the outputs too large to show a change (a saturated softmax): a false alarm there
        # would blame a right backward for inputs the user never gave it
        self.count_unchanged = False
        # the state every forward starts the random generators from (Note [Random forwards])
        self.seed = _RERUN_SEED
        self.mutated_inputs: dict[int, object] = {}
        # saved tensors modified after save_for_backward, before forward returned:
        # {saved index: (before, after, output or None)} (``_modified_after_saving``)
        self.mutated_saved: dict[int, tuple] = {}
        outputs, _ = self._forward(self.base, self.mutated_inputs)
        self.diff_outputs = [k for k, o in enumerate(outputs) if self._differentiable(o)]
        # integer outputs (the indices of a sort, topk or max): for the hints
        self.index_outputs = []
        # floating outputs that do not require grad: ctx.mark_non_differentiable (Note
        # [Floating outputs marked non-differentiable])
        self.frozen_outputs: list[int] = []
        for k, o in enumerate(outputs):
            try:
                kind = None if k in self.diff_outputs else self._output_array(o).dtype.kind
            except Exception:  # noqa: BLE001 - not a tensor
                continue
            if kind in ("i", "u"):
                self.index_outputs.append(k)
            elif kind == "f":
                self.frozen_outputs.append(k)
        arrays = {k: self._output_array(outputs[k]) for k in self.diff_outputs}
        precision = min([arrays[k].dtype.itemsize for k in self.diff_outputs]
                        + [self.base[p].dtype.itemsize for p in positions])
        if precision == 8 and _computed_in_single(list(arrays.values()),
                                                  [self.base[p] for p in positions]):
            precision = 4
        self.itemsize = precision if precision in RTOL else 4
        self.eps = float(np.finfo(np.dtype(f"f{self.itemsize}")).eps)  # float64, 32 or 16
        self.step = 0.5 * self.eps ** (1.0 / 3.0)
        self.rtol = RTOL[self.itemsize]
        self.out_dtypes = {k: arrays[k].dtype for k in self.diff_outputs}
        # cotangents, rounded to the outputs' dtypes so both sides use the same values
        self.cotangents = {k: rng.standard_normal(arrays[k].shape)
                              .astype(self.out_dtypes[k]).astype(np.float64)
                           for k in self.diff_outputs}
        # the cotangents of the differentiable outputs, in order (set by prepare())
        self._cotangent_list: list[np.ndarray] = []

    # ---- what an implementation provides ------------------------------------------------
    @classmethod
    def positions_of(cls, args, needs):
        """The argument positions to check: floating-point tensors that need a gradient."""
        return [p for p, a in enumerate(args)
                if p < len(needs) and needs[p] and cls._array(a) is not None
                and a.dtype.is_floating_point]

    @staticmethod
    def _array(arg):
        """The values of a tensor argument as a numpy array; None for any other argument."""
        raise NotImplementedError

    @staticmethod
    def scaled(arg, factor):
        """A tensor argument with its values multiplied by ``factor`` (a probe point)."""
        raise NotImplementedError

    def _output_array(self, output):
        raise NotImplementedError

    def _differentiable(self, output):
        raise NotImplementedError

    def _tensor(self, position, array):
        """A fresh tensor of this library holding a copy of ``array`` (argument ``position``)."""
        raise NotImplementedError

    def _apply(self, call):
        """``cls.apply(*call)`` with grad mode on."""
        raise NotImplementedError

    def _forward(self, arrays, mutated=None):
        """``cls.apply`` on fresh copies, with the original inputs requiring grad.

        With a dict ``mutated``, saved inputs that forward modified in place without
        ``ctx.mark_dirty`` are put in it (Note [Modified in forward]).
        """
        call = []
        leaves = {}
        for i, a in enumerate(self.args):
            if i in arrays:
                tensor = self._tensor(i, arrays[i])
                if i in self.positions:
                    tensor.requires_grad_(True)
                    leaves[i] = tensor
                    # a non-leaf, so that a Function that marks it dirty may modify it
                    tensor = tensor.clone()
                call.append(tensor)
            else:
                call.append(a)
        saves: list[tuple] | None = None if mutated is None else []
        with self._fixed_randomness(), self._saving(saves):
            outputs = self._apply(call)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        if mutated is not None:
            mutated.update(self._modified_in_forward(call, arrays, outputs))
            self.mutated_saved = _modified_after_saving(saves, call, outputs,
                                                        self._output_array)
        return outputs, leaves

    @contextlib.contextmanager
    def _saving(self, saves):
        """Within the block, ``save_for_backward`` of this Function's ``ctx`` also appends
        ``(tensor, its version, a copy of its values)`` to ``saves`` (for
        ``_modified_after_saving``); with ``saves`` None, nothing changes."""
        node_class = getattr(self._applied_class(), "_backward_cls", None)
        if saves is None or node_class is None:
            yield
            return
        original = node_class.save_for_backward
        output_array = self._output_array

        def save_for_backward(ctx, *tensors):
            for tensor in tensors:
                version = getattr(tensor, "_version", None)
                if isinstance(version, int):
                    saves.append((tensor, version, np.array(output_array(tensor), copy=True)))
            return original(ctx, *tensors)

        node_class.save_for_backward = save_for_backward
        try:
            yield
        finally:
            del node_class.save_for_backward

    def _applied_class(self):
        """The Function class ``_apply`` calls (its ``ctx`` is an instance of its
        ``_backward_cls``)."""
        return self.cls

    def _modified_in_forward(self, call, arrays, outputs):
        """Note [Modified in forward] for this library's tensors."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _fixed_randomness(self):
        """Note [Random forwards]: the random generators a forward may draw from (numpy's and
        Python's global ones here; the library's own in the subclasses), set to one fixed
        state for the call and put back after it."""
        numpy_state, python_state = np.random.get_state(), _python_random.getstate()
        np.random.seed(self.seed)
        _python_random.seed(self.seed)
        try:
            with self._library_randomness():
                yield
        finally:
            np.random.set_state(numpy_state)
            _python_random.setstate(python_state)

    def _library_randomness(self):
        """A context in which the library's default generator starts from ``self.seed`` and
        after which it is as before."""
        raise NotImplementedError

    def analytic(self, scale=1.0, arrays=None, only=None):
        raise NotImplementedError

    # ---- shared: finite differences -------------------------------------------------------
    def evaluate(self, arrays):
        """The differentiable outputs (float64 copies) at ``arrays``."""
        outputs, _ = self._forward(arrays)
        return [self._output_array(outputs[k]).astype(np.float64) for k in self.diff_outputs]

    def frozen_that_move(self):
        """``{output: input position}``: the floating outputs marked non-differentiable that
        change when that checked input moves (each entry by 1e-3 of its size, random signs).

        Note [Floating outputs marked non-differentiable]: an output marked so gets no
        gradient; for indices, counts or masks that is right, and they do not move with a
        small change of the inputs. A floating output that does (the max of a min/max pair
        marked by mistake) loses the gradient of any loss that uses it, silently; it may also
        be meant (a statistic for a running average), so it is a warning.
        """
        if not self.frozen_outputs:
            return {}
        rng = np.random.default_rng(0)
        at_base, _ = self._forward(self.base)
        found: dict[int, int] = {}
        for p in self.positions:
            x = self.base[p]
            step = 1e-3 * np.maximum(1.0, np.abs(x)) * rng.choice([-1.0, 1.0], x.shape)
            moved, _ = self._forward({**self.base, p: (x + step).astype(x.dtype)})
            for k in self.frozen_outputs:
                if k not in found and not np.array_equal(self._output_array(at_base[k]),
                                                         self._output_array(moved[k]),
                                                         equal_nan=True):
                    found[k] = p
        return found

    def draws_random(self):
        """Whether forward's outputs change with the random generators' state (after
        ``prepare``): a forward that draws, re-run from another state than the fixed one."""
        self.seed = _RERUN_SEED + 1
        try:
            other = self.evaluate(self.base)
        finally:
            self.seed = _RERUN_SEED
        return any(not np.array_equal(a, b, equal_nan=True)
                   for a, b in zip(self.base_outputs, other))

    @contextlib.contextmanager
    def outputs_alone(self):
        """Within the block, iterate over the differentiable outputs with the cotangents set to
        that output's alone (zeros for the others), as a graph that uses one output sends them;
        the cotangents are put back on leaving."""
        saved = self.cotangents, self._cotangent_list

        def each():
            for k in self.diff_outputs:
                alone = {j: (c if j == k else np.zeros_like(c)) for j, c in saved[0].items()}
                self.cotangents = alone
                self._cotangent_list = [alone[j] for j in self.diff_outputs]
                yield k

        try:
            yield each()
        finally:
            self.cotangents, self._cotangent_list = saved

    @contextlib.contextmanager
    def cotangents_set(self, cotangents):
        """Within the block, backward (``analytic``) runs with ``cotangents`` (one array per
        differentiable output); the random ones are put back on leaving."""
        saved = self.cotangents, self._cotangent_list
        self.cotangents = cotangents
        self._cotangent_list = [cotangents[k] for k in self.diff_outputs]
        try:
            yield
        finally:
            self.cotangents, self._cotangent_list = saved

    def difference(self, position, flat_index, lower, upper):
        """``(sum_k <v_k, y(upper) - y(lower)> / (upper - lower), noise)`` for one entry.

        ``lower``/``upper`` are values of the entry (None means the base value).
        """
        base = self.base[position]
        values: list[np.ndarray | None] = []
        for value in (upper, lower):
            if value is None:
                values.append(None)
                continue
            moved = base.copy()
            moved.reshape(-1)[flat_index] = value
            values.append(moved)
        y_up = self.evaluate({**self.base, position: values[0]}) if values[0] is not None \
            else self.base_outputs
        y_low = self.evaluate({**self.base, position: values[1]}) if values[1] is not None \
            else self.base_outputs
        x = base.reshape(-1)[flat_index]
        width = float(upper if upper is not None else x) - float(lower if lower is not None else x)
        total = 0.0
        magnitude = 0.0
        hidden = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for v, a, b in zip(self._cotangent_list, y_up, y_low):
                delta = a - b
                changed = delta != 0
                if changed.any():
                    total += float(np.sum(v[changed] * delta[changed]))
                    magnitude += float(np.sum(np.abs(v[changed]) * (np.abs(a[changed]) + np.abs(b[changed]))))
                # an output that did not change may still have moved by up to one ulp
                hidden += float(np.sum(np.abs(v[~changed]) * np.abs(a[~changed])))
        if not math.isfinite(total):
            return math.nan, math.nan
        if not self.count_unchanged and magnitude:
            # some output moved: the others that did not are taken not to depend on the entry
            hidden = 0.0
        # else (no output changed at all, as a saturated sigmoid at 30): the derivative is
        # below what the outputs' rounding can show, and may be anything that small
        return total / width, (_NOISE_SAFETY * magnitude + hidden) * self.eps / abs(width)

    def moved(self, position, flat_index, step_factor):
        """The entry's values one step below and above (rounded to the working dtype)."""
        base = self.base[position]
        x = base.reshape(-1)[flat_index]
        h = self.step * step_factor * max(1.0, abs(float(x)))
        dtype = base.dtype.type
        upper, lower = dtype(float(x) + h), dtype(float(x) - h)
        return lower, upper

    def prepare(self):
        self.base_outputs = self.evaluate(self.base)
        self._cotangent_list = [self.cotangents[k] for k in self.diff_outputs]
        again = self.evaluate(self.base)
        for a, b in zip(self.base_outputs, again):
            if not np.array_equal(a, b, equal_nan=True):
                return "its forward is not deterministic (two runs on the same inputs differ)"
        return None


class _RerunObserver(_engine.Observer):
    """Collects what the engine did to the re-run node's gradients (sum_to, casts)."""

    def __init__(self):
        self.node = None
        self.reduced = {}
        self.cast = {}
        self.none_edges = set()
        self.mutated_grads = {}  # output index -> (values given, values after backward)

    def grad_reduced(self, task, node, slot, from_shape, to_shape):
        if node is self.node:
            self.reduced[slot] = tuple(from_shape)

    def grad_cast(self, task, node, slot, from_dtype, to_dtype):
        if node is self.node:
            self.cast[slot] = from_dtype.name

    def node_finished(self, task, node, grads_in, grads_out, duration):
        if node is self.node:
            self.none_edges = {e for e, g in enumerate(grads_out) if g is None}


class GradvizRerun(Rerun):
    """A gradviz ``autograd.Function``, run through gradviz's engine."""

    @staticmethod
    def _array(arg):
        return arg._data if isinstance(arg, Tensor) else None

    @staticmethod
    def scaled(arg, factor):
        # np.asarray: a 0-d array times a number is a numpy scalar, not an array
        return _ops.from_numpy(np.asarray(arg._data * arg._data.dtype.type(factor)))

    def _output_array(self, output):
        return output._data

    def _differentiable(self, output):
        return isinstance(output, Tensor) and output.requires_grad \
            and output.dtype.is_floating_point

    def _tensor(self, position, array):
        return _ops.from_numpy(np.array(array, copy=True))

    def _apply(self, call):
        with enable_grad():
            return self.cls.apply(*call)

    def _modified_in_forward(self, call, arrays, outputs):
        return _modified_in_forward(call, arrays, outputs)

    @contextlib.contextmanager
    def _library_randomness(self):
        saved = _creation._generator
        _creation._generator = np.random.default_rng(self.seed)
        try:
            yield
        finally:
            _creation._generator = saved

    def analytic(self, scale=1.0, arrays=None, only=None):
        """The backward's vector-Jacobian product, run through the engine (at ``arrays``,
        default the recorded arguments). With ``only`` (an output number), backward runs
        from that output alone, as in a graph that uses no other output of the Function: the
        others' gradients are then None (``ctx.set_materialize_grads(False)``) or zeros.

        Returns ``({position: float64 array or None}, observer)``.
        """
        outputs, leaves = self._forward(self.base if arrays is None else arrays)
        used = self.diff_outputs if only is None else [only]
        roots = [outputs[k] for k in used]
        # np.asarray: a 0-d cotangent times a number is a numpy scalar, not an array
        grads = [_ops.from_numpy(np.asarray(self.cotangents[k] * scale, dtype=self.out_dtypes[k]))
                 for k in used]
        observer = _RerunObserver()
        observer.node = roots[0].grad_fn
        capture = [_engine.gradient_edge(leaves[p]) for p in self.positions]
        given = [g._data.copy() for g in grads]
        task = make_graph_task(roots, grads, retain_graph=False, capture=capture,
                               observer=observer)
        captured = task.run()
        for k, grad, before in zip(used, grads, given):
            if not np.array_equal(grad._data, before, equal_nan=True):
                observer.mutated_grads[k] = (before.astype(np.float64),
                                             grad._data.astype(np.float64))
        result = {}
        for p, value in zip(self.positions, captured):
            result[p] = None if value is None else value._data.astype(np.float64)
        return result, observer

    # ---- second order (Note [Doctor's double backward]) -----------------------------------
    def cotangent_derivative(self, p, u_p):
        """``d/dv <u_p, vjp_p(x, v)>`` through the graph backward builds, flattened over the
        differentiable outputs."""
        outputs, leaves = self._forward(self.base)
        roots = [outputs[k] for k in self.diff_outputs]
        grads = [_ops.from_numpy(np.asarray(self.cotangents[k], dtype=self.out_dtypes[k]))
                 .requires_grad_(True) for k in self.diff_outputs]
        with enable_grad():
            (first,) = _autograd_grad(roots, [leaves[p]], grads, create_graph=True,
                                      allow_unused=True)
            if first is None or not first.requires_grad:
                derivative = [None] * len(grads)
            else:
                term = (first * _ops.from_numpy(u_p.astype(first._data.dtype))).sum()
                derivative = _autograd_grad([term], grads, allow_unused=True)
        return np.concatenate([(np.zeros(g._data.shape) if d is None else d._data.astype(np.float64))
                               .reshape(-1) for g, d in zip(grads, derivative)])

    def second_order(self, u):
        """``d/dx sum_p <u_p, vjp_p(x, v)>`` through the graph backward builds (create_graph)."""
        outputs, leaves = self._forward(self.base)
        roots = [outputs[k] for k in self.diff_outputs]
        # the cotangents require grad, as in gradgradcheck: a @once_differentiable backward
        # then returns its gradients on a DelayedError node
        grads = [_ops.from_numpy(np.asarray(self.cotangents[k], dtype=self.out_dtypes[k]))
                 .requires_grad_(True) for k in self.diff_outputs]
        inputs = [leaves[p] for p in self.positions]
        with enable_grad():
            first = _autograd_grad(roots, inputs, grads, create_graph=True, allow_unused=True)
            if any(g is not None and isinstance(g.grad_fn, DelayedError) for g in first):
                raise RuntimeError("its backward is @once_differentiable")
            total = None
            for p, g in zip(self.positions, first):
                if g is None or not g.requires_grad:
                    continue
                term = (g * _ops.from_numpy(u[p].astype(g._data.dtype))).sum()
                total = term if total is None else total + term
            second = [None] * len(inputs)
            if total is not None:
                second = _autograd_grad([total], inputs, allow_unused=True)
        return {p: (np.zeros(self.base[p].shape) if g is None else g._data.astype(np.float64))
                for p, g in zip(self.positions, second)}


def _modified_after_saving(saves, call, outputs, output_array):
    """``{saved index: (before, after, output or None)}`` for each saved tensor, not an
    argument of forward, whose version moved after ``save_for_backward`` and before forward
    returned.

    Both libraries take a saved tensor's version when forward returns, so an intermediate
    saved and then modified in place (``t = x.tanh(); ctx.save_for_backward(t); t.mul_(2)``)
    raises nothing, and backward computes with the modified values. It is reported only when
    the gradient is wrong (a buffer saved first and filled after, for a backward written for
    its final values, is right). Arguments are Note [Modified in forward]'s.
    """
    found: dict[int, tuple] = {}
    for index, (tensor, version, before) in enumerate(saves or ()):
        if any(tensor is a for a in call) or tensor._version == version:
            continue
        after = np.array(output_array(tensor), copy=True)
        if after.shape != before.shape or before.dtype.kind != "f" \
                or np.array_equal(after, before, equal_nan=True):
            continue
        output = next((k for k, o in enumerate(outputs) if o is tensor), None)
        found[index] = (before.astype(np.float64), after.astype(np.float64), output)
    return found


def _modified_in_forward(call, arrays, outputs):
    """Note [Modified in forward]: ``{position: (before, after)}`` for each tensor argument that
    forward saved for backward and then modified in place without ``ctx.mark_dirty``.

    PyTorch saves tensors when forward returns, so backward silently computes with the
    modified values. (A tensor marked dirty is returned as an output: that is allowed.)
    """
    ctx = next((o.grad_fn for o in outputs if isinstance(o, Tensor) and o.grad_fn is not None),
               None)
    saved = getattr(ctx, "_saved", None) or ()
    saved_ids = {id(item._tensor) for item in saved
                 if item is not None and getattr(item, "_tensor", None) is not None}
    found = {}
    for position, tensor in enumerate(call):
        if position not in arrays or not isinstance(tensor, Tensor) or id(tensor) not in saved_ids:
            continue
        if any(tensor is o for o in outputs):
            continue
        before = arrays[position]
        after = tensor._data
        if after.shape == before.shape and not np.array_equal(after, before, equal_nan=True):
            found[position] = (before.astype(np.float64), after.astype(np.float64))
    return found

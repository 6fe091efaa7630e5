"""Check one custom Function node against central finite differences (the doctor's core).

Note [Doctor's finite differences]
----------------------------------
The Function is re-run, never the user's graph: ``cls.apply`` on fresh copies of the
forward arguments recorded at forward time (float64 copies when the Function accepts them),
with exactly the original ``needs_input_grad``. With random (seeded) cotangents ``v_k`` for
the differentiable outputs, the checked scalar is ``g(x) = sum_k <v_k, y_k(x)>``:

- analytic: the Function's own backward, run through the engine (a graph task that captures
  the gradients reaching the fresh inputs), i.e. exactly the vector-Jacobian product the
  engine would use, after its shape reduction and dtype cast;
- numeric: for each checked entry ``x_j``, ``sum_k <v_k, y_k(x + h e_j) - y_k(x - h e_j)>``
  divided by the step actually taken. Only outputs that changed contribute, so rounding
  noise is estimated from those entries alone (``noise`` below), not from all of ``g``.

An entry that disagrees is checked again with smaller steps, and with one-sided differences:
near a kink (relu, abs, clamp, sort ties) or a jump (round, sign) the left and right
derivatives differ, and any analytic value between them is a valid subgradient, so the entry
is excluded rather than reported; so is an entry whose one-sided derivatives still differ at
the smallest step (it sits on a kink where several pieces meet, such as a three-way tie in
sort). Only an entry that disagrees at every step, away from kinks, is a mismatch. Entries
where the Function itself is not finite nearby are excluded too; analytic NaN/Inf where the
numeric derivative is finite is reported.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np

from gradviz_ext import engine as _engine

from .. import ops as _ops
from .._tensor import Tensor
from ..autograd._functional import grad as _autograd_grad
from ..autograd._functional import make_graph_task
from ..autograd.function import DelayedError
from ..autograd.grad_mode import enable_grad
from ._hints import explain, factor_hint

__all__ = ["SlotCheck", "NodeCheck", "check_function", "check_double_backward"]

# Relative tolerance by the precision the outputs were computed in. Generous on purpose: the
# bugs the doctor looks for (a sign, a factor, a swapped or ignored gradient) are O(1) errors.
_RTOL = {8: 1e-4, 4: 2e-2, 2: 1e-1}
# Safety factor on the rounding-noise estimate (forward rounding can exceed one ulp per output).
_NOISE_SAFETY = 64.0
# The cotangents come from their own stream of the seed: a user's inputs drawn from
# np.random.default_rng(seed) must not be the cotangents (x.T @ v is symmetric when v is x,
# which hides a transposed gradient).
_COTANGENT_STREAM = 0x67726164
# Smaller steps tried for an entry that disagrees (multiples of the first step).
_REFINE = {8: (0.1, 0.01), 4: (0.3, 0.1), 2: (0.5, 0.25)}


@dataclass
class SlotCheck:
    """The result for one differentiable input slot (a forward argument position)."""

    position: int
    shape: tuple
    indices: np.ndarray                      # flat indices checked
    analytic: np.ndarray                     # analytic values at those indices
    numeric: np.ndarray                      # numeric values (NaN where excluded)
    mismatched: np.ndarray                   # bool mask over the checked indices
    nonfinite: np.ndarray                    # analytic NaN/Inf where numeric is finite
    excluded_near_kink: int = 0
    excluded_not_finite: int = 0
    none_returned: bool = False              # backward returned None for this input
    reduced_from: tuple | None = None        # shape backward returned, summed by the engine
    cast_from: str | None = None             # dtype backward returned, cast by the engine
    sampled: bool = False                    # only some entries were checked
    hint: str | None = None
    # the mismatched entries again, with the gradient the user's loss sent into the node
    # (what .grad shows) instead of the random cotangents: (flat indices, analytic, numeric)
    shown: tuple | None = None
    # double backward only: the derivative with respect to grad_output disagrees (Note
    # [Double backward and grad_output]); indices then run over the outputs' entries
    grad_output: bool = False

    @property
    def ok(self) -> bool:
        return not self.mismatched.any() and not self.nonfinite.any()


@dataclass
class NodeCheck:
    """The result for one custom Function node."""

    dtype: str = ""
    slots: list = field(default_factory=list)
    skipped: str | None = None               # why the node could not be checked
    backward_error: BaseException | None = None
    # saved inputs that forward modified in place without ctx.mark_dirty:
    # {position: (values before forward, values after)}
    mutated_inputs: dict = field(default_factory=dict)
    # gradients that backward modified in place: {output index: (values given, values after)}
    mutated_grad_outputs: dict = field(default_factory=dict)
    # Note [Where the doctor evaluates]: right at the recorded inputs, wrong at other inputs:
    # (the factor the checked inputs were scaled by, the NodeCheck there)
    probe: tuple | None = None
    # a Function of several outputs, right when all of them receive a gradient, wrong when
    # one is used alone: (that output, the NodeCheck with it alone)
    alone: tuple | None = None

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.backward_error is None and all(s.ok for s in self.slots)


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


class _Rerun:
    """The Function, its recorded arguments and the cotangents, in one working dtype."""

    def __init__(self, cls, args, needs, positions, dtype, rng):
        self.cls = cls
        self.positions = positions
        self.needs = needs
        self.args = args
        # tensor arguments as arrays in the working dtype (floating ones only are converted)
        self.base = {}
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                data = a._data
                if dtype is not None and data.dtype.kind == "f":
                    data = data.astype(dtype)
                self.base[i] = data
        self.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        # at probe points (Note [Where the doctor evaluates]) the rounding noise also counts
        # the outputs too large to show a change (a saturated softmax): a false alarm there
        # would blame a right backward for inputs the user never gave it
        self.count_unchanged = False
        self.mutated_inputs = {}
        outputs, _ = self._forward(self.base, self.mutated_inputs)
        self.diff_outputs = [k for k, o in enumerate(outputs)
                             if isinstance(o, Tensor) and o.requires_grad and o.dtype.is_floating_point]
        precision = min([outputs[k]._data.dtype.itemsize for k in self.diff_outputs]
                        + [self.base[p].dtype.itemsize for p in positions])
        self.itemsize = precision if precision in _RTOL else 4
        self.eps = float(np.finfo({8: np.float64, 4: np.float32, 2: np.float16}[self.itemsize]).eps)
        self.step = 0.5 * self.eps ** (1.0 / 3.0)
        self.rtol = _RTOL[self.itemsize]
        self.out_dtypes = {k: outputs[k]._data.dtype for k in self.diff_outputs}
        # cotangents, rounded to the outputs' dtypes so both sides use the same values
        self.cotangents = {k: rng.standard_normal(outputs[k]._data.shape)
                              .astype(self.out_dtypes[k]).astype(np.float64)
                           for k in self.diff_outputs}

    # ---- running the Function --------------------------------------------------------
    def _forward(self, arrays, mutated=None):
        """``cls.apply`` on fresh copies, with the original inputs requiring grad.

        With a dict ``mutated``, saved inputs that forward modified in place without
        ``ctx.mark_dirty`` are put in it (Note [Modified in forward]).
        """
        call = []
        leaves = {}
        for i, a in enumerate(self.args):
            if i in arrays:
                tensor = _ops.from_numpy(np.array(arrays[i], copy=True))
                if i in self.positions:
                    tensor.requires_grad_(True)
                    leaves[i] = tensor
                    # a non-leaf, so that a Function that marks it dirty may modify it
                    tensor = tensor.clone()
                call.append(tensor)
            else:
                call.append(a)
        with enable_grad():
            outputs = self.cls.apply(*call)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        if mutated is not None:
            mutated.update(_modified_in_forward(call, arrays, outputs))
        return outputs, leaves

    def evaluate(self, arrays):
        """The differentiable outputs (float64 copies) at ``arrays``."""
        outputs, _ = self._forward(arrays)
        return [outputs[k]._data.astype(np.float64) for k in self.diff_outputs]

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

    # ---- finite differences ------------------------------------------------------------
    def difference(self, position, flat_index, lower, upper):
        """``(sum_k <v_k, y(upper) - y(lower)> / (upper - lower), noise)`` for one entry.

        ``lower``/``upper`` are values of the entry (None means the base value).
        """
        base = self.base[position]
        values = []
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
                if self.count_unchanged:
                    # an output that did not change may still have moved by up to one ulp
                    hidden += float(np.sum(np.abs(v[~changed]) * np.abs(a[~changed])))
        if not math.isfinite(total):
            return math.nan, math.nan
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


def check_function(cls, args, needs, seed, max_entries=256, incoming=None,
                   probe=True, _at_probe=False) -> NodeCheck:
    """Check ``cls``'s backward at ``args`` (see Note [Doctor's finite differences]).

    ``needs`` is the original node's ``needs_input_grad``: the same inputs require grad in
    the re-run, and only they are checked. ``incoming`` (one array or None per output) is the
    gradient the user's loss sent into the node; mismatches are shown again with it. With
    ``probe``, a backward right at ``args`` is also checked at other inputs (Note [Where the
    doctor evaluates]) and, for several outputs, with each output used alone.
    """
    positions = [p for p, a in enumerate(args)
                 if p < len(needs) and needs[p] and isinstance(a, Tensor) and a.dtype.is_floating_point]
    if not positions:
        return NodeCheck(skipped="no floating-point input needs a gradient")

    rerun, analytic, observer, failure = None, None, None, None
    for dtype in (np.float64, None):
        try:
            candidate = _Rerun(cls, args, needs, positions, dtype,
                               np.random.default_rng((seed, _COTANGENT_STREAM)))
        except Exception as exc:  # noqa: BLE001 - the user's forward may raise anything
            failure = failure or ("forward", exc)
            continue
        candidate.count_unchanged = _at_probe
        if not candidate.diff_outputs:
            return NodeCheck(skipped="re-running it gave no differentiable outputs")
        try:
            analytic, observer = candidate.analytic()
        except Exception as exc:  # noqa: BLE001 - the user's backward may raise anything
            failure = ("backward", exc) if failure is None or failure[0] == "forward" else failure
            continue
        rerun = candidate
        break
    if rerun is None:
        stage, exc = failure
        if stage == "forward":
            return NodeCheck(skipped=f"re-running its forward raised {type(exc).__name__}: {exc}")
        return NodeCheck(backward_error=exc)

    check = NodeCheck(dtype=np.dtype({8: np.float64, 4: np.float32, 2: np.float16}[rerun.itemsize]).name)
    check.mutated_inputs = rerun.mutated_inputs
    check.mutated_grad_outputs = observer.mutated_grads
    reason = rerun.prepare()
    if reason is not None:
        check.skipped = reason
        return check

    edge_of = {p: e for e, p in enumerate(rerun.tensor_positions)}
    for p in positions:
        base = rerun.base[p]
        size = base.size
        sampled = size > max_entries
        if sampled:
            indices = np.sort(np.random.default_rng(seed + 7919 * (p + 1))
                              .choice(size, max_entries, replace=False))
        else:
            indices = np.arange(size)
        values = analytic[p]
        none_returned = values is None or edge_of[p] in observer.none_edges
        values = None if none_returned else values
        full = np.zeros(base.shape, dtype=np.float64) if none_returned else values
        slot = _check_slot(rerun, p, indices, full.reshape(-1)[indices])
        slot.none_returned = none_returned
        slot.sampled = sampled
        slot.reduced_from = observer.reduced.get(edge_of[p])
        slot.cast_from = observer.cast.get(edge_of[p])
        check.slots.append(slot)

    if check.ok and probe and not check.mutated_inputs:
        if len(rerun.diff_outputs) > 1:
            check.alone = _check_outputs_alone(rerun, positions, seed)
        if check.alone is None:
            check.probe = _probe(cls, args, needs, positions, seed)
    if not check.ok:
        explain(rerun, check, analytic)
        if incoming is not None:
            _show_with_incoming(rerun, check, incoming)
    return check


def _show_with_incoming(rerun, check, incoming):
    """Recompute the mismatched entries with the user's own incoming gradient.

    The random cotangents find the bug; the user knows the gradient of their loss. Where the
    disagreement shows with it too, the report quotes those values (as in ``.grad`` of a
    one-node graph).
    """
    cotangents = {}
    for k in rerun.diff_outputs:
        grad = incoming[k] if k < len(incoming) else None
        shape = rerun.cotangents[k].shape
        if grad is None:
            cotangents[k] = np.zeros(shape)
        elif tuple(grad.shape) != tuple(shape):
            return
        else:
            cotangents[k] = grad.astype(rerun.out_dtypes[k]).astype(np.float64)
    saved = rerun.cotangents, rerun._cotangent_list
    rerun.cotangents = cotangents
    rerun._cotangent_list = [cotangents[k] for k in rerun.diff_outputs]
    try:
        analytic, _ = rerun.analytic()
        for slot in check.slots:
            if not slot.mismatched.any():
                continue
            values = analytic[slot.position]
            values = np.zeros(slot.shape) if values is None else values
            flat = slot.indices[slot.mismatched]
            shown_a = values.reshape(-1)[flat]
            shown_n = np.empty(len(flat))
            for n, j in enumerate(flat):
                lower, upper = rerun.moved(slot.position, j, 1.0)
                shown_n[n] = rerun.difference(slot.position, j, lower, upper)[0]
            error = np.abs(shown_a - shown_n)
            if np.any(error > rerun.rtol * np.maximum(1.0, np.abs(shown_n))):
                slot.shown = (flat, shown_a, shown_n)
    except Exception:  # noqa: BLE001 - only a nicer display; the finding stands without it
        pass
    finally:
        rerun.cotangents, rerun._cotangent_list = saved


# Note [Where the doctor evaluates]
# ----------------------------------
# The doctor checks a backward where the user's graph ran it: at the recorded forward
# arguments. That is where the Function's own assumptions hold (a symmetric matrix, positive
# values, a sorted index), so a mismatch there is a bug in this graph. But a backward can be
# wrong only for some inputs (an abs or relu whose negative branch is wrong, a clamp with the
# wrong boundary, one wrong branch of a piecewise function), and the recorded inputs may all
# fall on the right side: all positive, all small. So a backward that is right at the recorded
# inputs is checked again at a few *probe points*: the checked inputs scaled together by each
# of ``_PROBE_FACTORS``. Scaling keeps what the Function may rely on (shape, symmetry, zeros,
# sparsity, the ratios between entries) while moving the values across zero and across the
# usual boundaries near 1. At most ``_PROBE_ENTRIES`` entries per input are checked there;
# a probe whose forward raises or is not finite is dropped silently (the Function may not
# accept such inputs), and so is one whose backward raises. A mismatch found at a probe is
# reported with the probe named (the factor, and the input's value at the worst entry), and
# at the first probe that shows one the search stops. A bug outside every probe's reach (a
# boundary at 6 for inputs near 0) still hides: the report's checked inputs are the only
# ones known to be right.
_PROBE_FACTORS = (-1.0, 3.0, -3.0, 0.25)
_PROBE_ENTRIES = 32


def _probe(cls, args, needs, positions, seed):
    """``(factor, NodeCheck)`` for the first probe point where backward disagrees, or None."""
    for factor in _PROBE_FACTORS:
        moved = list(args)
        for p in positions:
            moved[p] = _ops.from_numpy(args[p]._data * args[p]._data.dtype.type(factor))
        try:
            check = check_function(cls, tuple(moved), needs, seed, _PROBE_ENTRIES, probe=False,
                                   _at_probe=True)
        except Exception:  # noqa: BLE001 - the Function may not accept such inputs
            continue
        if check.skipped is None and check.backward_error is None and not check.mutated_inputs \
                and not check.ok:
            return factor, check
    return None


def _check_outputs_alone(rerun, positions, seed):
    """``(output, NodeCheck)`` for the first output that, used alone, gives a wrong gradient or
    makes backward raise, or None.

    A graph that uses one output of several runs backward with None (or zeros) for the
    others: a backward that mishandles None (``ctx.set_materialize_grads(False)``) is right
    when every output is used, and wrong here.
    """
    edge_of = {p: e for e, p in enumerate(rerun.tensor_positions)}
    with rerun.outputs_alone() as outputs:
        for k in outputs:
            check = NodeCheck(dtype=np.dtype({8: np.float64, 4: np.float32, 2: np.float16}
                                             [rerun.itemsize]).name)
            try:
                analytic, observer = rerun.analytic(only=k)
            except Exception as exc:  # noqa: BLE001 - the user's backward may raise anything
                check.backward_error = exc
                return k, check
            for p in positions:
                size = rerun.base[p].size
                indices = (np.sort(np.random.default_rng((seed, p, k)).choice(
                    size, _PROBE_ENTRIES, replace=False)) if size > _PROBE_ENTRIES
                    else np.arange(size))
                values = analytic[p]
                none_returned = values is None or edge_of[p] in observer.none_edges
                full = np.zeros(rerun.base[p].shape) if none_returned else values
                slot = _check_slot(rerun, p, indices, full.reshape(-1)[indices])
                slot.none_returned = none_returned
                slot.sampled = size > _PROBE_ENTRIES
                check.slots.append(slot)
            if not check.ok:
                explain(rerun, check, analytic, alone=True)
                return k, check
    return None


def _check_slot(rerun, position, indices, analytic) -> SlotCheck:
    count = len(indices)
    numeric = np.full(count, np.nan)
    noise = np.zeros(count)
    for n, j in enumerate(indices):
        lower, upper = rerun.moved(position, j, 1.0)
        numeric[n], noise[n] = rerun.difference(position, j, lower, upper)
    finite_numeric = numeric[np.isfinite(numeric)]
    scale = float(np.max(np.abs(finite_numeric))) if finite_numeric.size else 0.0
    atol = rerun.rtol * max(scale, 1e-12)

    def agrees(a, n, extra):
        return abs(a - n) <= atol + rerun.rtol * max(abs(a), abs(n)) + extra

    mismatched = np.zeros(count, dtype=bool)
    nonfinite = np.zeros(count, dtype=bool)
    near_kink = not_finite = 0
    for n, j in enumerate(indices):
        a = float(analytic[n])
        if math.isfinite(numeric[n]) and math.isfinite(a) and agrees(a, numeric[n], noise[n]):
            continue
        verdict, value = _refine(rerun, position, j, a, numeric[n], agrees)
        if verdict == "ok":
            numeric[n] = value
        elif verdict == "kink":
            near_kink += 1
            numeric[n] = np.nan
        elif verdict == "not_finite":
            not_finite += 1
            numeric[n] = np.nan
        elif verdict == "nonfinite":
            nonfinite[n] = True
            numeric[n] = value
        else:
            mismatched[n] = True
            numeric[n] = value
    return SlotCheck(position=position, shape=tuple(rerun.base[position].shape), indices=indices,
                     analytic=np.asarray(analytic, dtype=np.float64), numeric=numeric,
                     mismatched=mismatched, nonfinite=nonfinite, excluded_near_kink=near_kink,
                     excluded_not_finite=not_finite)


def _refine(rerun, position, j, a, first, agrees):
    """Decide an entry that disagreed at the first step: smaller steps, one-sided differences.

    Returns ``(verdict, numeric)`` with verdict ``ok``, ``kink`` (excluded: a subgradient at a
    kink or jump), ``not_finite`` (excluded: the Function is not finite nearby), ``nonfinite``
    (analytic NaN/Inf, numeric finite) or ``mismatch``.
    """
    best = first if math.isfinite(first) else None
    kink = False
    for factor in _REFINE[rerun.itemsize]:
        kink = False
        lower, upper = rerun.moved(position, j, factor)
        central, noise = rerun.difference(position, j, lower, upper)
        if not math.isfinite(central):
            continue
        best = central
        if not math.isfinite(a):
            continue
        if agrees(a, central, noise):
            return "ok", central
        right, noise_right = rerun.difference(position, j, None, upper)
        left, noise_left = rerun.difference(position, j, lower, None)
        if math.isfinite(right) and math.isfinite(left):
            noise_sides = noise_left + noise_right
            if not agrees(left, right, noise_sides):
                # the derivative jumps within the step: a kink or a jump of the Function
                kink = True
                low, high = min(left, right), max(left, right)
                slack = noise_sides + rerun.rtol * max(abs(left), abs(right))
                if low - slack <= a <= high + slack or agrees(a, left, noise_left) \
                        or agrees(a, right, noise_right):
                    return "kink", central
    if best is None:
        return "not_finite", math.nan
    if kink and math.isfinite(a):
        # Still a kink at the smallest step: x sits on it. Where several pieces meet (a tie of
        # three in sort or max) a valid choice need not lie between the one-sided
        # derivatives along one coordinate, so the entry is excluded, not judged.
        return "kink", best
    if not math.isfinite(a):
        return "nonfinite", best
    return "mismatch", best


# ---- second order -------------------------------------------------------------------------

def check_double_backward(cls, args, needs, seed, max_entries=64):
    """Check the derivative of ``cls``'s backward (what ``create_graph=True`` uses).

    Note [Doctor's double backward]: with the cotangents ``v`` fixed and random ``u_p`` for
    the gradients, the checked scalar is ``s(x) = sum_p <u_p, vjp_p(x, v)>``: analytic, the
    engine differentiates the graph that backward built under ``create_graph=True``; numeric,
    central differences of the backward re-run at moved inputs. A backward written with
    operations the engine cannot differentiate (``.numpy()``, ``.detach()``, ``.data``) builds
    no graph, so its second derivative comes out zero or missing terms, silently.

    Returns ``(NodeCheck, reason)``: reason says why it could not be checked (else None).
    """
    positions = [p for p, a in enumerate(args)
                 if p < len(needs) and needs[p] and isinstance(a, Tensor) and a.dtype.is_floating_point]
    if not positions:
        return None, "no floating-point input needs a gradient"
    rng = np.random.default_rng((seed, _COTANGENT_STREAM, 2))
    try:
        rerun = _Rerun(cls, args, needs, positions, np.float64, rng)
        if not rerun.diff_outputs or rerun.itemsize != 8:
            return None, "it does not run in float64"
        rerun.prepare()
        u = {p: rng.standard_normal(rerun.base[p].shape) for p in positions}
        second = _second_order(rerun, u)
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        if "once_differentiable" in str(exc):
            return None, "its backward is @once_differentiable (it cannot be differentiated again)"
        return None, f"differentiating its backward raised {type(exc).__name__}: {exc}"

    def contracted(arrays):
        values, _ = rerun.analytic(arrays=arrays)
        return sum(float(np.sum(u[p] * values[p])) for p in positions if values[p] is not None)

    check = NodeCheck(dtype="float64")
    for p in positions:
        base = rerun.base[p]
        size = base.size
        sampled = size > max_entries
        indices = (np.sort(np.random.default_rng((seed, p)).choice(size, max_entries, replace=False))
                   if sampled else np.arange(size))
        numeric = np.empty(len(indices))
        for n, j in enumerate(indices):
            values = []
            for factor in (1.0, 0.1):
                lower, upper = rerun.moved(p, j, factor)
                moved = [base.copy(), base.copy()]
                moved[0].reshape(-1)[j], moved[1].reshape(-1)[j] = upper, lower
                up = contracted({**rerun.base, p: moved[0]})
                low = contracted({**rerun.base, p: moved[1]})
                values.append((up - low) / (float(upper) - float(lower)))
            numeric[n] = values[0] if abs(values[0] - values[1]) <= 1e-3 * max(1.0, abs(values[1])) \
                else math.nan  # a jump of the backward within the step: not judged
        analytic = second[p].reshape(-1)[indices]
        finite = np.isfinite(numeric)
        scale = float(np.max(np.abs(numeric[finite]))) if finite.any() else 0.0
        tolerance = 1e-4 * max(scale, 1e-8) + 1e-4 * np.maximum(np.abs(analytic), np.abs(numeric))
        mismatched = finite & ~(np.abs(analytic - numeric) <= tolerance)
        slot = SlotCheck(position=p, shape=tuple(base.shape), indices=indices, analytic=analytic,
                         numeric=numeric, mismatched=mismatched,
                         nonfinite=np.zeros(len(indices), dtype=bool), sampled=sampled)
        if mismatched.any():
            a, n = analytic[finite], numeric[finite]
            if not np.any(second[p]):
                slot.hint = ("its gradient does not depend on the inputs through the graph: "
                             "backward computes with operations autograd cannot differentiate "
                             "(.numpy(), .detach(), .data); write it with tensor operations, or "
                             "mark it @once_differentiable so create_graph=True raises")
            else:
                slot.hint = factor_hint(a, n)
        check.slots.append(slot)
    for slot in _grad_output_slots(rerun, u, [s.position for s in check.slots if s.ok]):
        check.slots = [slot if s.position == slot.position else s for s in check.slots]
    return check, None


def _grad_output_slots(rerun, u, positions):
    """Note [Double backward and grad_output]: a backward must be differentiable in its
    ``grad_output`` too (a Hessian-vector product, or a penalty whose upstream gradient depends
    on parameters, differentiates through it). ``vjp_p(x, v)`` is linear in ``v``, so
    ``d/dv <u_p, vjp_p(x, v)>`` is the Jacobian-vector product ``J_p u_p``: the forward's
    directional derivative along ``u_p``, two forward runs. A backward that detaches
    ``grad_output`` (``grad.detach()``, ``grad.data``) gets zero here, silently.

    Returns a mismatched SlotCheck for each input whose gradient disagrees (over the outputs'
    entries).
    """
    found = []
    for p in positions:
        try:
            analytic = _cotangent_derivative(rerun, p, u[p])
        except Exception:  # noqa: BLE001 - checked above already; nothing more to say
            continue
        steps = []
        for factor in (1.0, 0.1):
            h = rerun.step * factor * max(1.0, float(np.max(np.abs(rerun.base[p]))))
            up = rerun.evaluate({**rerun.base, p: rerun.base[p] + h * u[p]})
            low = rerun.evaluate({**rerun.base, p: rerun.base[p] - h * u[p]})
            steps.append(np.concatenate([((a - b) / (2 * h)).reshape(-1) for a, b in zip(up, low)]))
        numeric = np.where(np.abs(steps[0] - steps[1]) <= 1e-3 * np.maximum(1.0, np.abs(steps[1])),
                           steps[0], np.nan)
        finite = np.isfinite(numeric)
        scale = float(np.max(np.abs(numeric[finite]))) if finite.any() else 0.0
        tolerance = 1e-4 * max(scale, 1e-8) + 1e-4 * np.maximum(np.abs(analytic), np.abs(numeric))
        mismatched = finite & ~(np.abs(analytic - numeric) <= tolerance)
        if not mismatched.any():
            continue
        slot = SlotCheck(position=p, shape=(analytic.size,), indices=np.arange(analytic.size),
                         analytic=analytic, numeric=numeric, mismatched=mismatched,
                         nonfinite=np.zeros(analytic.size, dtype=bool))
        slot.grad_output = True
        if not np.any(analytic):
            slot.hint = ("its gradient does not follow grad_output through the graph: backward "
                         "detaches grad_output (grad.detach(), grad.data, a numpy round trip); "
                         "compute with grad itself, or mark it @once_differentiable")
        else:
            slot.hint = factor_hint(analytic[finite], numeric[finite])
        found.append(slot)
    return found


def _cotangent_derivative(rerun, p, u_p):
    """``d/dv <u_p, vjp_p(x, v)>`` through the graph backward builds, flattened over the
    differentiable outputs."""
    outputs, leaves = rerun._forward(rerun.base)
    roots = [outputs[k] for k in rerun.diff_outputs]
    grads = [_ops.from_numpy(np.asarray(rerun.cotangents[k], dtype=rerun.out_dtypes[k]))
             .requires_grad_(True) for k in rerun.diff_outputs]
    with enable_grad():
        (first,) = _autograd_grad(roots, [leaves[p]], grads, create_graph=True, allow_unused=True)
        if first is None or not first.requires_grad:
            derivative = [None] * len(grads)
        else:
            term = (first * _ops.from_numpy(u_p.astype(first._data.dtype))).sum()
            derivative = _autograd_grad([term], grads, allow_unused=True)
    return np.concatenate([(np.zeros(g._data.shape) if d is None else d._data.astype(np.float64))
                           .reshape(-1) for g, d in zip(grads, derivative)])


def _second_order(rerun, u):
    """``d/dx sum_p <u_p, vjp_p(x, v)>`` through the graph backward builds (create_graph)."""
    outputs, leaves = rerun._forward(rerun.base)
    roots = [outputs[k] for k in rerun.diff_outputs]
    # the cotangents require grad, as in gradgradcheck: a @once_differentiable backward then
    # returns its gradients on a DelayedError node
    grads = [_ops.from_numpy(np.asarray(rerun.cotangents[k], dtype=rerun.out_dtypes[k]))
             .requires_grad_(True) for k in rerun.diff_outputs]
    inputs = [leaves[p] for p in rerun.positions]
    with enable_grad():
        first = _autograd_grad(roots, inputs, grads, create_graph=True, allow_unused=True)
        if any(g is not None and isinstance(g.grad_fn, DelayedError) for g in first):
            raise RuntimeError("its backward is @once_differentiable")
        total = None
        for p, g in zip(rerun.positions, first):
            if g is None or not g.requires_grad:
                continue
            term = (g * _ops.from_numpy(u[p].astype(g._data.dtype))).sum()
            total = term if total is None else total + term
        second = [None] * len(inputs)
        if total is not None:
            second = _autograd_grad([total], inputs, allow_unused=True)
    return {p: (np.zeros(rerun.base[p].shape) if g is None else g._data.astype(np.float64))
            for p, g in zip(rerun.positions, second)}

"""Check one custom Function node against central finite differences (the doctor's core).

Note [Doctor's finite differences]
----------------------------------
The Function is re-run, never the user's graph: ``cls.apply`` on fresh copies of the
forward arguments recorded at forward time (float64 copies when the Function accepts them),
with exactly the original ``needs_input_grad``. With random (seeded) cotangents ``v_k`` for
the differentiable outputs, the checked scalar is ``g(x) = sum_k <v_k, y_k(x)>``:

- analytic: the Function's own backward, run through the engine (a graph task that captures
  the gradients reaching the fresh inputs; for a ``torch.autograd.Function``,
  ``torch.autograd.grad``), i.e. exactly the vector-Jacobian product the engine would use,
  after its shape reduction and dtype cast. Both run behind one small interface, Note [The
  doctor's rerun interface] in ``_rerun``;
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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._hints import explain, factor_hint
from ._rerun import RTOL, GradvizRerun

__all__ = ["SlotCheck", "NodeCheck", "check_function", "check_double_backward"]

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
    # Note [Surrogate gradients]: no output moved when any checked entry did (the forward is
    # locally constant in this input: round, sign, a step)
    locally_constant: bool = False

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
    # other saved tensors that forward modified after saving them, when the gradient is wrong
    # (``_rerun._modified_after_saving``): {saved index: (before, after, output or None)}
    mutated_saved: dict = field(default_factory=dict)
    # gradients that backward modified in place: {output index: (values given, values after)}
    mutated_grad_outputs: dict = field(default_factory=dict)
    # Note [Where the doctor evaluates]: right at the recorded inputs, wrong at other inputs:
    # (the factor the checked inputs were scaled by, the NodeCheck there)
    probe: tuple | None = None
    # a Function of several outputs, right when all of them receive a gradient, wrong when
    # one is used alone: (that output, the NodeCheck with it alone)
    alone: tuple | None = None
    # Note [Backward replayed]: inputs whose gradient in the graph's backward pass differs
    # from the re-run's with the same incoming gradient: {position: (pass's, re-run's)}
    replayed: dict = field(default_factory=dict)
    # Note [Floating outputs marked non-differentiable] in ``_rerun``: {output: input position}
    frozen: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (self.skipped is None and self.backward_error is None and not self.replayed
                and all(s.ok for s in self.slots))


def check_function(cls, args, needs, seed, max_entries=256, incoming=None,
                   probe=True, _at_probe=False, rerun=GradvizRerun, returned=None) -> NodeCheck:
    """Check ``cls``'s backward at ``args`` (see Note [Doctor's finite differences]).

    ``needs`` is the original node's ``needs_input_grad``: the same inputs require grad in
    the re-run, and only they are checked. ``incoming`` (one array or None per output) is the
    gradient the user's loss sent into the node; mismatches are shown again with it. With
    ``probe``, a backward right at ``args`` is also checked at other inputs (Note [Where the
    doctor evaluates]) and, for several outputs, with each output used alone. ``rerun`` is
    the class that runs the Function (Note [The doctor's rerun interface]): gradviz's, or
    PyTorch's for a ``torch.autograd.Function``. ``returned`` (one array or None per edge)
    is what the node's backward returned in the graph's own backward pass, given ``incoming``
    (Note [Backward replayed]).
    """
    rerun_class = rerun
    positions = rerun_class.positions_of(args, needs)
    if not positions:
        return NodeCheck(skipped="no floating-point input needs a gradient")

    rerun = None
    analytic: dict | None = None
    observer: Any = None
    failure: tuple[str, Exception] | None = None
    for dtype in (np.float64, None):
        try:
            candidate = rerun_class(cls, args, needs, positions, dtype,
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
        assert failure is not None  # each attempt that neither returned nor broke recorded why
        stage, error = failure
        if stage == "forward":
            return NodeCheck(skipped=f"re-running its forward raised {type(error).__name__}: {error}")
        return NodeCheck(backward_error=error)
    assert analytic is not None and observer is not None  # set by the attempt that broke

    check = NodeCheck(dtype=np.dtype({8: np.float64, 4: np.float32, 2: np.float16}[rerun.itemsize]).name)
    check.mutated_inputs = rerun.mutated_inputs
    check.mutated_saved = rerun.mutated_saved
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
        full = np.zeros(base.shape, dtype=np.float64) if values is None else values
        slot = _check_slot(rerun, p, indices, full.reshape(-1)[indices])
        slot.none_returned = none_returned
        slot.sampled = sampled
        slot.reduced_from = observer.reduced.get(edge_of[p])
        slot.cast_from = observer.cast.get(edge_of[p])
        check.slots.append(slot)

    if probe:
        try:
            check.frozen = rerun.frozen_that_move()
        except Exception:  # noqa: BLE001 - the user's forward may raise anything; only a warning
            check.frozen = {}
    if all(s.ok for s in check.slots):
        # a tensor filled after it was saved, with a backward written for its final values
        check.mutated_saved = {}
    if check.ok and returned is not None and incoming is not None:
        check.replayed = _replay(rerun, incoming, returned, positions, edge_of)
    if check.ok and probe and not check.mutated_inputs and not check.mutated_saved \
            and not check.replayed:
        if len(rerun.diff_outputs) > 1:
            check.alone = _check_outputs_alone(rerun, positions, seed)
        if check.alone is None:
            check.probe = _probe(cls, args, needs, positions, seed, rerun_class)
    if probe and any(s.locally_constant and s.mismatched.any() for s in check.slots):
        _constant_at_probes(cls, args, needs, positions, seed, rerun_class, check)
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
    cotangents = _incoming_cotangents(rerun, incoming)
    if cotangents is None:
        return
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


def _incoming_cotangents(rerun, incoming):
    """The gradient the user's loss sent into the node as the re-run's cotangents (zeros for
    None), or None when their shapes do not fit."""
    cotangents = {}
    for k in rerun.diff_outputs:
        grad = incoming[k] if k < len(incoming) else None
        shape = rerun.cotangents[k].shape
        if grad is None:
            cotangents[k] = np.zeros(shape)
        elif tuple(grad.shape) != tuple(shape):
            return None
        else:
            cotangents[k] = grad.astype(rerun.out_dtypes[k]).astype(np.float64)
    return cotangents


# Note [Backward replayed]
# ------------------------
# The re-run calls forward and then backward at once, so a backward that reads state forward
# did not put on ``ctx`` (a factor kept on the class or in a global, which a later call of
# the Function overwrote before the graph's backward ran) agrees with finite differences
# there, and is wrong in the user's graph. So what the node's backward returned in the
# doctor's own backward pass is compared with what the re-run's backward returns for the
# same incoming gradient; a difference beyond the user's dtype's tolerance is a finding.
# A forward that draws random numbers is left out (the re-run draws another mask than the
# user's forward did: ``Rerun.draws_random``), and so is a node whose saved tensors were
# modified since forward (that finding says why its backward differs).


def _replay(rerun, incoming, returned, positions, edge_of):
    """``{position: (the pass's gradient, the re-run's)}`` where they differ."""
    cotangents = _incoming_cotangents(rerun, incoming)
    if cotangents is None:
        return {}
    found = {}
    try:
        with rerun.cotangents_set(cotangents):
            analytic, _ = rerun.analytic()
        for p in positions:
            given = returned[edge_of[p]] if edge_of[p] < len(returned) else None
            if given is None or given.dtype.kind != "f":
                continue
            mine = analytic[p]
            mine = np.zeros(given.shape) if mine is None else np.asarray(mine, np.float64)
            if mine.shape != given.shape:
                continue
            given64 = given.astype(np.float64)
            rtol = RTOL.get(given.dtype.itemsize, RTOL[4])
            with np.errstate(invalid="ignore"):
                scale = float(np.nanmax(np.abs(mine))) if mine.size else 0.0
                differ = ~(np.abs(given64 - mine) <= rtol * (scale + np.abs(mine)) + 1e-300)
            # NaN/Inf the pass produced is the nonfinite finding's (the re-run in float64
            # may not overflow where the user's float32 did)
            differ &= np.isfinite(given64)
            if differ.any():
                found[p] = (given64, mine)
        if found and rerun.draws_random():
            return {}
    except Exception:  # noqa: BLE001 - the user's code may raise anything; nothing to compare
        return {}
    return found


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
# accept such inputs). A backward that raises where its forward ran (a ``ctx`` attribute set
# on one branch of forward only) is reported: an error when the exception says that code
# refers to something that does not exist (AttributeError, NameError, UnboundLocalError),
# else a warning (a backward may refuse inputs its forward took). A mismatch found at a probe is
# reported with the probe named (the factor, and the input's value at the worst entry), and
# at the first probe that shows one the search stops. A bug outside every probe's reach (a
# boundary at 6 for inputs near 0) still hides: the report's checked inputs are the only
# ones known to be right.
_PROBE_FACTORS = (-1.0, 3.0, -3.0, 0.25)
_PROBE_ENTRIES = 32


def _probe(cls, args, needs, positions, seed, rerun_class):
    """``(factor, NodeCheck)`` for the first probe point where backward disagrees, or None."""
    for factor in _PROBE_FACTORS:
        moved = list(args)
        for p in positions:
            moved[p] = rerun_class.scaled(args[p], factor)
        try:
            check = check_function(cls, tuple(moved), needs, seed, _PROBE_ENTRIES, probe=False,
                                   _at_probe=True, rerun=rerun_class)
        except Exception:  # noqa: BLE001 - the Function may not accept such inputs
            continue
        if check.skipped is None and not check.mutated_inputs and not check.ok:
            return factor, check
    return None


def _constant_at_probes(cls, args, needs, positions, seed, rerun_class, check):
    """Note [Surrogate gradients]: a forward flat at the recorded inputs is piecewise constant
    (round, sign) only if it is flat at the probe points too; a continuous forward that is
    merely saturated there (a clamp with every input beyond its bounds) moves somewhere, and
    a non-zero gradient for it stays a plain mismatch. Clears ``locally_constant`` of the
    slots whose forward moves at some probe point."""
    for factor in _PROBE_FACTORS:
        moved = list(args)
        for p in positions:
            moved[p] = rerun_class.scaled(args[p], factor)
        try:
            there = check_function(cls, tuple(moved), needs, seed, _PROBE_ENTRIES, probe=False,
                                   _at_probe=True, rerun=rerun_class)
        except Exception:  # noqa: BLE001 - the Function may not accept such inputs
            continue
        if there.skipped is not None or there.backward_error is not None:
            continue
        moves = {s.position for s in there.slots if not s.locally_constant}
        for slot in check.slots:
            if slot.position in moves:
                slot.locally_constant = False


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
    finite = numeric[np.isfinite(numeric)]
    return SlotCheck(position=position, shape=tuple(rerun.base[position].shape), indices=indices,
                     analytic=np.asarray(analytic, dtype=np.float64), numeric=numeric,
                     mismatched=mismatched, nonfinite=nonfinite, excluded_near_kink=near_kink,
                     excluded_not_finite=not_finite,
                     locally_constant=bool(finite.size) and not np.any(finite))


def _refine(rerun, position, j, a, first, agrees):
    """Decide an entry that disagreed at the first step: smaller steps, one-sided differences.

    Returns ``(verdict, numeric)`` with verdict ``ok``, ``kink`` (excluded: a subgradient at a
    kink or jump), ``not_finite`` (excluded: the Function is not finite nearby), ``nonfinite``
    (analytic NaN/Inf, numeric finite) or ``mismatch``.
    """
    best = first if math.isfinite(first) else None
    kink = False
    gap = None  # (step factor, |left - right|) at the previous step
    factors = _REFINE[rerun.itemsize]
    for factor in factors:
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
            smooth, gap = _curvature(gap, factor, abs(left - right)), (factor, abs(left - right))
            if not smooth and not agrees(left, right, noise_sides):
                # the derivative jumps within the step: a kink or a jump of the Function
                kink = True
                low, high = min(left, right), max(left, right)
                slack = noise_sides + rerun.rtol * max(abs(left), abs(right))
                # a subgradient; unless the next step shows the gap was curvature
                if (low - slack <= a <= high + slack or agrees(a, left, noise_left)
                        or agrees(a, right, noise_right)) and factor == factors[-1]:
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


def _curvature(previous, factor, gap):
    """Note [Curvature is not a kink]: whether the one-sided derivatives' gap shrank with the
    step (at least about in proportion), as a smooth function's does, where a kink's stays."""
    if previous is None or previous[1] == 0.0:
        return False
    shrink = 1.5 * factor / previous[0]
    return gap <= shrink * previous[1]


# Note [Curvature is not a kink]
# ------------------------------
# The step grows with the entry (``h ~ eps^(1/3) max(1, |x|)``), so for inputs with a large
# offset (|x| ~ 1e5, a variance or a norm of shifted data) it is large against the scale on
# which the function curves, and the one-sided derivatives of a smooth function differ by
# about ``h f''``, enough to look like a kink; an analytic value between them was then
# excluded as a subgradient, and a wrong backward (computed in float32 there) went unseen.
# A kink's gap stays as the step shrinks; curvature's shrinks with it. So at the second and
# later steps of the refinement a gap that shrank at least about in proportion to the step
# (to within 1.5 times) is curvature: the entry is judged by its central difference.


# ---- second order -------------------------------------------------------------------------

def check_double_backward(cls, args, needs, seed, max_entries=64, rerun=GradvizRerun):
    """Check the derivative of ``cls``'s backward (what ``create_graph=True`` uses).

    Note [Doctor's double backward]: with the cotangents ``v`` fixed and random ``u_p`` for
    the gradients, the checked scalar is ``s(x) = sum_p <u_p, vjp_p(x, v)>``: analytic, the
    engine differentiates the graph that backward built under ``create_graph=True``; numeric,
    central differences of the backward re-run at moved inputs. A backward written with
    operations the engine cannot differentiate (``.numpy()``, ``.detach()``, ``.data``) builds
    no graph, so its second derivative comes out zero or missing terms, silently.

    Returns ``(NodeCheck, reason)``: reason says why it could not be checked (else None).
    """
    rerun_class = rerun
    positions = rerun_class.positions_of(args, needs)
    if not positions:
        return None, "no floating-point input needs a gradient"
    rng = np.random.default_rng((seed, _COTANGENT_STREAM, 2))
    try:
        rerun = rerun_class(cls, args, needs, positions, np.float64, rng)
        if not rerun.diff_outputs or rerun.itemsize != 8:
            return None, "it does not run in float64"
        rerun.prepare()
        u = {p: rng.standard_normal(rerun.base[p].shape) for p in positions}
        second = rerun.second_order(u)
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
        for entry, j in enumerate(indices):
            values = []
            for factor in (1.0, 0.1):
                lower, upper = rerun.moved(p, j, factor)
                moved = [base.copy(), base.copy()]
                moved[0].reshape(-1)[j], moved[1].reshape(-1)[j] = upper, lower
                up = contracted({**rerun.base, p: moved[0]})
                low = contracted({**rerun.base, p: moved[1]})
                values.append((up - low) / (float(upper) - float(lower)))
            numeric[entry] = values[0] if abs(values[0] - values[1]) <= 1e-3 * max(1.0, abs(values[1])) \
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
            analytic = rerun.cotangent_derivative(p, u[p])
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

"""The likely cause of a gradient that disagrees with finite differences (the doctor's hints).

Each heuristic compares what backward returned with the finite differences of one slot and
names a recognisable shape of bug: a flipped sign or a constant factor, the gradients of two
inputs swapped, the right values transposed or shifted by one, an ignored or non-linear use
of ``grad_output``, or the part of one output of several. For small Functions the hints of
``_jacobian_hints`` look at whole Jacobians and at re-runs with other arguments (a wrong
reduction dim or scan direction, a broken shift or scale invariance, the output used for the
input, an argument ignored). A hint is a guess offered next to the finding; the finding itself
never depends on it.
"""

from __future__ import annotations

import math

import numpy as np

from ._jacobian_hints import JacobianHints

__all__ = ["explain", "factor_hint"]


def explain(rerun, check, analytic, alone=False):
    """Attach a hint (the likely cause) to each slot that disagrees.

    ``alone``: backward ran from one output only (the cotangent-scaling and per-output
    heuristics, which run it from all outputs, do not apply).
    """
    compared = {}
    for slot in check.slots:
        keep = np.isfinite(slot.numeric) & np.isfinite(slot.analytic)
        compared[slot.position] = (slot, keep)
    linear: dict[int, str] | None = {} if alone else None
    reversed_runs: dict[int, dict[int, np.ndarray]] | None = {} if not alone else None
    jacobians = JacobianHints(rerun)
    for slot in check.slots:
        if not slot.mismatched.any():
            continue
        if slot.none_returned:
            slot.hint = "backward returned None for it"
            continue
        _, keep = compared[slot.position]
        a, n = slot.analytic[keep], slot.numeric[keep]
        indexed = bool(_index_arrays(rerun, slot.position) or rerun.index_outputs)
        hint = _single_precision_hint(rerun, slot, keep, analytic)
        if hint is None:
            hint = factor_hint(a, n)
            if hint is not None:
                # a factor may be an argument left out or taken for another: say which
                because = _guarded(jacobians.arguments, slot)
                if because is not None:
                    hint = f"{hint} {because}"
        if hint is None:
            hint = _repeated_index_hint(slot, keep, rerun)
        if hint is None:
            hint = _reshaped_transpose_hint(slot)
        if hint is None:
            hint = _region_hint(slot, keep, rerun.base[slot.position])
        if hint is None:
            hint = _flat_hint(slot, keep)
        if hint is None:
            hint = _guarded(jacobians.output_for_input, slot, keep)
        if hint is None:
            hint = _guarded(jacobians.arguments, slot)
        if hint is None:
            hint = _swap_hint(slot, compared)
        if hint is None:
            hint = _guarded(jacobians.exchanged, slot)
        if hint is None:
            hint = _layout_hint(slot, indexed=indexed)
        if hint is None:
            hint = _reversed_hint(rerun, slot, reversed_runs)
        if hint is None:
            if linear is None:
                linear = _linearity(rerun, analytic)
            hint = linear.get(slot.position)
        if hint is None and not alone:
            hint = _guarded(jacobians.coupling, slot, indexed=indexed)
        if hint is None:
            hint = _guarded(jacobians.invariance, slot)
        slot.hint = hint
    if len(rerun.diff_outputs) > 1 and not alone:
        swapped = _swapped_outputs(rerun, check)
        if swapped is not None:
            first, second = swapped
            for slot in check.slots:
                if slot.mismatched.any() and not slot.none_returned:
                    slot.hint = (f"it agrees when the gradients of outputs {first} and {second} "
                                 f"are exchanged: the grad_outputs of outputs {first} and "
                                 f"{second} swapped in backward?")
            return
        faults, ignored = _outputs_at_fault(rerun, check)
        for position, outputs in faults.items():
            slot = next(s for s in check.slots if s.position == position)
            part = (f"only the part from output{'s' if len(outputs) > 1 else ''} "
                    f"{', '.join(str(k) for k in outputs)} disagrees")
            zero = ignored.get(position, [])
            if zero:
                part += (f": backward ignores the gradient of output{'s' if len(zero) > 1 else ''} "
                         f"{', '.join(str(k) for k in zero)} (its part is zero)")
            slot.hint = part if slot.hint is None else f"{part}; {slot.hint}"


def _guarded(hint, *args, **kwargs):
    """A hint that runs the user's Function again: whatever it raises, there is no hint."""
    try:
        return hint(*args, **kwargs)
    except Exception:  # noqa: BLE001 - only a hint
        return None


def _swapped_outputs(rerun, check):
    """``(k1, k2)`` when backward, run with the cotangents of outputs ``k1`` and ``k2``
    exchanged (outputs of one shape), agrees with the finite differences at every entry that
    disagrees: the two ``grad_output`` s are used the wrong way round."""
    slots = [s for s in check.slots if s.mismatched.any() and not s.none_returned]
    if not slots:
        return None
    outputs = rerun.diff_outputs
    given = rerun.cotangents
    for i, first in enumerate(outputs):
        for second in outputs[i + 1:]:
            if given[first].shape != given[second].shape \
                    or rerun.out_dtypes[first] != rerun.out_dtypes[second]:
                continue
            exchanged = dict(given)
            exchanged[first], exchanged[second] = given[second], given[first]
            try:
                with rerun.cotangents_set(exchanged):
                    analytic, _ = rerun.analytic()
            except Exception:  # noqa: BLE001 - only a hint
                continue
            agrees = True
            for slot in slots:
                values = analytic.get(slot.position)
                keep = np.isfinite(slot.numeric)
                if values is None or not keep.any() or not _close(
                        values.reshape(-1)[slot.indices][keep], slot.numeric[keep]):
                    agrees = False
                    break
            if agrees:
                return first, second
    return None


def _index_arrays(rerun, position):
    """The integer tensor arguments of the Function (index arguments): ``(argument, array)``."""
    return [(q, a) for q, a in rerun.base.items()
            if q != position and a.dtype.kind in "iu" and a.size > 1]


def _repeated_targets(index, shape):
    """Boolean masks over ``shape``, one per way ``index`` may address it, of the entries
    that ``index`` addresses more than once: along each dim ``d`` of ``shape``, a 1-D index
    (embedding, index_select, index_add: every entry whose coordinate ``d`` is a repeated
    value) or an index of the input's rank (gather, scatter: the entry ``c`` with ``c[d]``
    replaced by ``index[c]``, repeated within its row)."""
    masks = []
    ndim = len(shape)
    for d in range(ndim):
        if index.min() < -shape[d] or index.max() >= shape[d]:
            continue
        wrapped = np.where(index < 0, index + shape[d], index)
        if index.ndim == 1:
            values, counts = np.unique(wrapped, return_counts=True)
            repeated = values[counts > 1]
            if repeated.size == 0:
                continue
            hit = np.isin(np.arange(shape[d]), repeated)
            view = [1] * ndim
            view[d] = shape[d]
            masks.append(np.broadcast_to(hit.reshape(view), shape))
        elif index.ndim == ndim and all(index.shape[e] <= shape[e] for e in range(ndim) if e != d):
            counts = np.zeros(shape, dtype=np.int64)
            coords = list(np.indices(index.shape))
            coords[d] = wrapped
            np.add.at(counts, tuple(coords), 1)
            if (counts > 1).any():
                masks.append(counts > 1)
    return masks


def _repeated_index_hint(slot, keep, rerun):
    """The entries that disagree are exactly those an index argument addresses more than once:
    the gradients of a repeated index were assigned (``grad[index] = g``, ``scatter``), where
    they must be summed."""
    wrong = slot.mismatched & keep
    right = keep & ~slot.mismatched
    if not wrong.any():
        return None
    for q, index in _index_arrays(rerun, slot.position):
        for mask in _repeated_targets(index, slot.shape):
            repeated = mask.reshape(-1)[slot.indices]
            if np.all(repeated[wrong]) and not np.any(repeated[right]):
                return (f"it disagrees only at the entries that index argument {q} addresses "
                        f"more than once (a repeated index): their gradients must be summed "
                        f"(index_add_, scatter_add_, index_put_(accumulate=True), np.add.at), "
                        f"not assigned")
    return None


def _region_hint(slot, keep, values):
    """When only some entries disagree: the range of the input's values where they sit, if it
    is apart from where backward agrees (a wrong branch, or a boundary in the wrong place)."""
    wrong = slot.mismatched & keep
    right = keep & ~slot.mismatched
    if not wrong.any() or not right.any():
        return None
    x = values.reshape(-1)[slot.indices].astype(np.float64)
    bad, good = x[wrong], x[right]
    p = slot.position
    if np.all(bad < 0) and np.all(good >= 0):
        where = f"where input {p} is negative"
    elif np.all(bad > 0) and np.all(good <= 0):
        where = f"where input {p} is positive"
    elif bad.min() > good.max():
        where = f"where input {p} is above {good.max():.4g} (from {bad.min():.4g} on)"
    elif bad.max() < good.min():
        where = f"where input {p} is below {good.min():.4g} (up to {bad.max():.4g})"
    elif not np.any((good >= bad.min()) & (good <= bad.max())):
        where = f"for input {p} between {bad.min():.4g} and {bad.max():.4g}"
    else:
        return None
    part = factor_hint(slot.analytic[wrong], slot.numeric[wrong])
    if part is not None and part.startswith("the true gradient is zero"):
        part = "the true gradient is zero there"
    part = "" if part is None else f" ({part})"
    return (f"it disagrees only {where}, and agrees elsewhere{part}: a wrong branch of "
            f"backward, or a boundary in the wrong place?")


def _single_precision_hint(rerun, slot, keep, analytic):
    """Backward computed in float32 for float64 inputs: its values are all float32 numbers,
    the finite differences' are not, and they are close (the error is the precision lost, not
    an O(1) bug)."""
    values = analytic.get(slot.position)
    if rerun.itemsize != 8 or values is None or not keep.any():
        return None
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    n = slot.numeric[keep]
    if not finite.size or not np.any(finite) \
            or not np.array_equal(finite.astype(np.float32).astype(np.float64), finite) \
            or np.array_equal(n.astype(np.float32).astype(np.float64), n) \
            or not _close(slot.analytic[keep], n, rel=1e-2):
        return None
    return ("backward's values are all float32 numbers and off by rounding only: it computes "
            "in single precision (a .float(), a float32 constant or buffer) for float64 "
            "inputs, and loses the precision a float64 gradient should have (torch.autograd."
            "gradcheck fails on it too); compute in the input's dtype")


def _reshaped_transpose_hint(slot):
    """The true gradient transposed and then reshaped back to the input's shape (a rectangular
    matrix: ``(x.T @ g).reshape(w.shape)`` where ``(x.T @ g).T`` was meant)."""
    full = _full(slot)
    if full is None or len(slot.shape) < 2 or slot.shape[-1] == slot.shape[-2]:
        return None
    a, n = full
    if not np.any(n):
        return None
    if _close(a, np.swapaxes(n, -1, -2).reshape(a.shape)) and not _close(a, n):
        return ("it equals the true gradient transposed and then reshaped to the input's "
                "shape: a reshape (or view) where a transpose was needed?")
    return None


def _flat_hint(slot, keep):
    """Backward passes a gradient only where the forward does not move (a clamp's or a mask's
    flat region), and is right elsewhere."""
    wrong = slot.mismatched & keep
    right = keep & ~slot.mismatched
    if not wrong.any() or not right.any() or np.any(slot.numeric[wrong]) \
            or not np.any(slot.numeric[right]):
        return None
    return ("it disagrees only where the forward does not move with input "
            f"{slot.position} (its output is clamped, masked or saturated there, so the true "
            f"gradient is zero), and agrees elsewhere: a mask that passes these entries (>= "
            f"where > was meant, taken from the output at a bound, or missing)?")


def _close(a, b, rel=1e-2):
    return float(np.linalg.norm(a - b)) <= rel * max(float(np.linalg.norm(b)), 1e-300)


def factor_hint(a, n):
    norm_n = float(np.linalg.norm(n))
    if a.size == 0:
        return None
    if norm_n == 0.0:
        return "the true gradient is zero here, but backward returned non-zero values"
    if _close(a, -n):
        return "sign flipped?"
    c = float(np.dot(a, n) / np.dot(n, n))
    if np.count_nonzero(n) > 1 and abs(c - 1.0) > 1e-2 and _close(a, c * n):
        if abs(c) < 1e-12:
            return "backward returned zeros, but the gradient is not zero"
        return f"off by a constant factor (analytic = {c:.4g} x numeric)?"
    return None


def _swap_hint(slot, compared):
    for position, (other, other_keep) in compared.items():
        if position == slot.position or other.shape != slot.shape:
            continue
        if not np.array_equal(other.indices, slot.indices):
            continue
        keep = compared[slot.position][1] & other_keep
        if not keep.any():
            continue
        if _close(slot.analytic[keep], other.numeric[keep]) \
                and not _close(other.numeric[keep], slot.numeric[keep]):
            if other.ok:
                return (f"it matches the gradient of input {position} (which input {position} "
                        f"gets right too): backward returns the gradient of the wrong input?")
            first, second = sorted((slot.position, position))
            return f"it matches the gradient of input {position}: gradients for inputs " \
                   f"{first} and {second} swapped in backward?"
    return None


def _full(slot):
    """The slot's analytic and numeric values in its shape, when every entry was checked and
    has a finite numeric value (else None)."""
    size = int(np.prod(slot.shape, dtype=np.int64))
    if slot.sampled or len(slot.indices) != size or not np.all(np.isfinite(slot.numeric)) \
            or not np.all(np.isfinite(slot.analytic)):
        return None
    return slot.analytic.reshape(slot.shape), slot.numeric.reshape(slot.shape)


def _layout_hint(slot, indexed=False):
    """The right values in the wrong places: transposed, or shifted by one along a dimension;
    for a Function with an index argument or output (``indexed``), routed by the index the
    wrong way."""
    full = _full(slot)
    if full is None:
        return None
    a, n = full
    if not np.any(n):
        return None
    if a.ndim >= 2 and a.shape[-1] == a.shape[-2] > 1:
        transposed = np.swapaxes(n, -1, -2)
        if _close(a, transposed) and not _close(n, transposed):
            return "it equals the transpose of the true gradient: looks transposed"
    shifted = _shift_hint(a, n)
    if shifted is not None:
        return shifted
    if a.size > 2 and _close(np.sort(a, axis=None), np.sort(n, axis=None), rel=1e-3) \
            and not _close(a, n):
        if indexed:
            return ("it holds the right values in the wrong places: the index routes them the "
                    "wrong way (gather where scatter is needed, the inverse permutation)?")
        return ("it holds the right values in the wrong places: a reshape or view where a "
                "transpose or permute is needed, or an index that routes them wrongly?")
    return None


def _reversed_hint(rerun, slot, runs):
    """Backward run with every grad_output reversed along dim ``d``, its result reversed back,
    agrees: a scan or a kernel runs the wrong way in backward (``cumsum`` where the reversed
    cumsum is needed, a convolution's kernel flipped). ``runs`` caches the backward per dim
    (None: not tried, for one output used alone)."""
    if runs is None or _full(slot) is None:
        return None
    n = slot.numeric.reshape(slot.shape)
    for d in range(len(slot.shape)):
        if slot.shape[d] < 3 or any(rerun.cotangents[k].ndim <= d for k in rerun.diff_outputs):
            continue
        if d not in runs:
            flipped = {k: np.flip(c, d).copy() for k, c in rerun.cotangents.items()}
            try:
                with rerun.cotangents_set(flipped):
                    runs[d], _ = rerun.analytic()
            except Exception:  # noqa: BLE001 - only a hint
                runs[d] = {}
        values = runs[d].get(slot.position)
        if values is None or values.shape != n.shape:
            continue
        back = np.flip(values, d)
        if np.any(n) and _close(back, n) and not _close(slot.analytic.reshape(slot.shape), n):
            return (f"it agrees when grad_output is reversed along dim {d} (and the result "
                    f"reversed back): a scan or a kernel runs the wrong way in backward (cumsum "
                    f"where the reversed cumsum is needed, a convolution's kernel flipped)?")
    return None


def _shift_hint(a, n):
    for dim in range(a.ndim):
        if a.shape[dim] < 3:
            continue
        for step in (1, -1):
            shifted = np.zeros_like(n)
            to = [slice(None)] * n.ndim
            src = [slice(None)] * n.ndim
            to[dim] = slice(1, None) if step == 1 else slice(None, -1)
            src[dim] = slice(None, -1) if step == 1 else slice(1, None)
            shifted[tuple(to)] = n[tuple(src)]
            if np.any(shifted) and _close(a, shifted) and not _close(n, shifted):
                return (f"its values sit {'one place later' if step == 1 else 'one place earlier'} "
                        f"along dim {dim} than they should: an index off by one?")
    return None


def _outputs_at_fault(rerun, check):
    """For a Function with several outputs: ``{position: [outputs]}`` of the outputs whose part
    of the gradient (backward with a cotangent on that output alone) disagrees, when not all do.
    """
    slots = [s for s in check.slots if s.mismatched.any() and not s.none_returned]
    if not slots:
        return {}, {}
    wrong: dict[int, list[int]] = {s.position: [] for s in slots}
    ignored: dict[int, list[int]] = {s.position: [] for s in slots}
    try:
        with rerun.outputs_alone() as outputs:
            for k in outputs:
                analytic, _ = rerun.analytic()
                for slot in slots:
                    values = analytic[slot.position]
                    values = np.zeros(slot.indices.max() + 1) if values is None else values.reshape(-1)
                    zero = seen = False
                    for j in slot.indices[slot.mismatched][:8]:
                        lower, upper = rerun.moved(slot.position, j, 1.0)
                        numeric, noise = rerun.difference(slot.position, j, lower, upper)
                        if not math.isfinite(numeric):
                            continue
                        if abs(values[j] - numeric) > noise + rerun.rtol * max(1.0, abs(numeric)):
                            seen = True
                            zero = not np.any(values[slot.indices[slot.mismatched][:8]])
                            break
                    if seen:
                        wrong[slot.position].append(k)
                        if zero:
                            ignored[slot.position].append(k)
    except Exception:  # noqa: BLE001 - only a hint
        return {}, {}
    faults = {p: ks for p, ks in wrong.items() if ks and len(ks) < len(rerun.diff_outputs)}
    return faults, ignored


def _linearity(rerun, analytic):
    """Hints from running backward again with twice the cotangents (a VJP is linear in them)."""
    try:
        doubled, _ = rerun.analytic(scale=2.0)
    except Exception:  # noqa: BLE001
        return {}
    hints = {}
    for p, values in analytic.items():
        again = doubled.get(p)
        if values is None or again is None or not np.all(np.isfinite(values)):
            continue
        if np.allclose(again, values, rtol=1e-6, atol=0) and np.any(values != 0):
            hints[p] = "it does not change with grad_output: is the incoming gradient ignored?"
        elif not np.allclose(again, 2 * values, rtol=1e-4, atol=1e-12):
            hints[p] = "it is not linear in grad_output"
    return hints

"""The doctor's hints that look at whole Jacobians and at re-runs with other arguments.

``_hints`` compares the gradient backward returned with the finite differences entry by
entry. For a small Function (Note [Small Functions' Jacobians]) the doctor can afford more:
the forward's full Jacobian by finite differences, backward's full matrix (one backward per
output entry), and the finite differences again at other arguments. From those:

- **coupling**: backward gives an input entry part of the gradient of an output entry that
  it does not affect (a reduction over the wrong dim, a scan the wrong way, an index
  ignored);
- **invariance**: the forward does not change when its input is shifted or scaled along a
  dim (softmax, log-softmax, a normalization), so the true gradient sums to zero, or is
  orthogonal to the input, along it; backward's is not;
- **the output for the input**: backward's gradient is the true one at the output's values,
  or grad_output times the output;
- **arguments**: backward's gradient is the true one with a number argument set to 1, to 2
  or to another number argument's value, with a bool mask inverted, or with another tensor
  input set to ones (an argument ignored, used the wrong way round, or a factor left out);
- **exchanged**: backward's gradient is the true one with two inputs of one shape exchanged
  (saved tensors or ``setup_context``'s inputs unpacked in the wrong order).

Each hint is stated only when that evidence holds; none decides a finding.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["JacobianHints"]

# Note [Small Functions' Jacobians]
# ---------------------------------
# The full Jacobian takes two forwards per input entry and backward's matrix one backward per
# output entry: a Function with at most this many entries in the checked input (and in its
# outputs) gets these hints; a larger one gets only the entry-by-entry hints of ``_hints``.
MAX_INPUT_ENTRIES = 128
MAX_OUTPUT_ENTRIES = 256


def _close(a, b, rel=1e-2):
    return float(np.linalg.norm(a - b)) <= rel * max(float(np.linalg.norm(b)), 1e-300)


def _coords(flat, shape):
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _fmt_index(coords):
    return "[" + ", ".join(str(i) for i in coords) + "]"


def _dims(dims):
    dims = sorted(dims)
    return f"dim {dims[0]}" if len(dims) == 1 else "dims " + ", ".join(str(d) for d in dims)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and bool(np.isfinite(value))


def _number_slots(args):
    """{(argument, element or None): value} of the number arguments, and of the numbers in
    tuple or list arguments (options passed as a tuple)."""
    slots: dict[tuple[int, int | None], object] = {}
    for q, value in enumerate(args):
        if _is_number(value):
            slots[(q, None)] = value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                if _is_number(item):
                    slots[(q, i)] = item
    return slots


def _slot_name(q, i):
    return f"number argument {q}" if i is None else f"argument {q}[{i}]"


class JacobianHints:
    """The Jacobian-based hints for the slots of one re-run (it caches the matrices)."""

    def __init__(self, rerun):
        self.rerun = rerun
        self._jacobians = {}
        self._backward_matrix = None

    # ---- the matrices ---------------------------------------------------------------------
    def _small(self, slot):
        size = int(np.prod(slot.shape, dtype=np.int64))
        outputs = sum(c.size for c in self.rerun.cotangents.values())
        return (not slot.sampled and len(slot.indices) == size and 0 < size <= MAX_INPUT_ENTRIES
                and outputs <= MAX_OUTPUT_ENTRIES)

    def jacobian(self, position, arrays=None, key=None):
        """The forward's Jacobian by central differences, ``[output entries, input entries]``
        (the differentiable outputs flattened one after another), at ``arrays`` (default the
        recorded ones); None when an output is not finite or has another shape."""
        if key is not None and key in self._jacobians:
            return self._jacobians[key]
        rerun = self.rerun
        arrays = dict(rerun.base if arrays is None else arrays)
        base = arrays[position]
        shapes = [rerun.cotangents[k].shape for k in rerun.diff_outputs]
        columns: list[np.ndarray] | None
        found: list[np.ndarray] = []
        try:
            for j in range(base.size):
                x = float(base.reshape(-1)[j])
                h = rerun.step * max(1.0, abs(x))
                upper, lower = base.dtype.type(x + h), base.dtype.type(x - h)
                values = []
                for value in (upper, lower):
                    moved = base.copy()
                    moved.reshape(-1)[j] = value
                    values.append(rerun.evaluate({**arrays, position: moved}))
                if any(y.shape != s for y, s in zip(values[0], shapes)):
                    raise ValueError("the outputs changed shape")
                width = float(upper) - float(lower)
                with np.errstate(invalid="ignore", over="ignore"):
                    found.append(np.concatenate(
                        [((a - b) / width).reshape(-1) for a, b in zip(*values)]))
            columns = found
        except Exception:  # noqa: BLE001 - only a hint: the forward may refuse such arguments
            columns = None
        matrix = None
        if columns is not None:
            matrix = np.stack(columns, axis=1)
            if not np.all(np.isfinite(matrix)):
                matrix = None
        if key is not None:
            self._jacobians[key] = matrix
        return matrix

    def numeric(self, position, arrays=None, key=None):
        """The vector-Jacobian product of the random cotangents by finite differences."""
        matrix = self.jacobian(position, arrays, key)
        if matrix is None:
            return None
        return self._cotangent_vector() @ matrix

    def _cotangent_vector(self):
        return np.concatenate([self.rerun.cotangents[k].reshape(-1)
                               for k in self.rerun.diff_outputs])

    def backward_matrix(self):
        """Backward's matrix ``{position: [output entries, input entries]}``: backward run with
        each output entry's cotangent alone set to one."""
        if self._backward_matrix is not None:
            return self._backward_matrix
        rerun = self.rerun
        rows: dict[int, list[np.ndarray]] = {p: [] for p in rerun.positions}
        zero = {k: np.zeros_like(rerun.cotangents[k]) for k in rerun.diff_outputs}
        try:
            for k in rerun.diff_outputs:
                for j in range(zero[k].size):
                    unit = dict(zero)
                    unit[k] = np.zeros_like(zero[k])
                    unit[k].reshape(-1)[j] = 1.0
                    with rerun.cotangents_set(unit):
                        values, _ = rerun.analytic()
                    for p in rows:
                        value = values.get(p)
                        rows[p].append(np.zeros(rerun.base[p].size) if value is None
                                       else value.reshape(-1))
            self._backward_matrix = {p: np.stack(r) for p, r in rows.items()}
        except Exception:  # noqa: BLE001 - only a hint
            self._backward_matrix = {}
        return self._backward_matrix

    # ---- the hints ------------------------------------------------------------------------
    def output_for_input(self, slot, keep):
        """Backward's gradient is the true one at the output's values (a derivative written
        with the result where the input is needed: 3 y^2 for x^3), or grad_output times the
        output where they disagree (exp(x) - 1 where exp(x) is needed)."""
        rerun = self.rerun
        if len(rerun.diff_outputs) != 1:
            return None
        (k,) = rerun.diff_outputs
        y = rerun.base_outputs[0]
        p = slot.position
        wrong = slot.mismatched & keep
        if not np.all(np.isfinite(y)) or not wrong.any():
            return None
        a = slot.analytic[wrong]
        if self._small(slot):
            # another input's values replaced by the output's (an input that forward
            # overwrote in place, mark_dirty, read back in backward as if it were the input)
            for q, value in rerun.base.items():
                if q == p or value.shape != y.shape or value.dtype.kind != "f":
                    continue
                other = self.numeric(p, {**rerun.base, q: y.astype(value.dtype)},
                                     key=("output for", q, p))
                if other is not None:
                    there = other[slot.indices][wrong]
                    if np.any(there) and _close(a, there) \
                            and not _close(there, slot.numeric[wrong]):
                        return (f"it equals the true gradient computed with input {q}'s values "
                                f"replaced by the output's: did backward use the result (a "
                                f"saved output, or input {q} after forward modified it in "
                                f"place) where input {q} was needed?")
        if y.shape != tuple(slot.shape):
            return None
        if self._small(slot):
            at_output = self.numeric(p, {**rerun.base, p: y.astype(rerun.base[p].dtype)},
                                     key=("output", p))
            if at_output is not None:
                there = at_output[slot.indices][wrong]
                if np.any(there) and _close(a, there) and not _close(there, slot.numeric[wrong]):
                    return (f"it equals the true gradient computed at the output's values: "
                            f"did backward use the result (a saved output) where input {p} "
                            f"was needed?")
        times_output = rerun.cotangents[k].reshape(-1)[slot.indices][wrong] \
            * y.reshape(-1)[slot.indices][wrong]
        if np.ptp(y.reshape(-1)[slot.indices][wrong]) > 0 and _close(a, times_output, rel=1e-3):
            where = "" if wrong.all() else "where it disagrees "
            return (f"{where}it equals grad_output times the forward's output: did backward use "
                    f"the output where the derivative was needed (exp(x) - 1 for exp(x))?")
        return None

    def arguments(self, slot):
        """Backward's gradient is the true one with a number argument set to 1 (a factor
        ignored), to 2 or another number argument's value (a value written into backward,
        or the wrong argument used), with a bool tensor argument inverted (a mask used the
        wrong way round), or with another floating input set to ones (a factor left out)."""
        if not self._small(slot):
            return None
        rerun = self.rerun
        p = slot.position
        for q, value in rerun.base.items():
            if q == p or value.dtype != np.bool_ or value.all() or not value.any():
                continue
            other = self.numeric(p, {**rerun.base, q: ~value}, key=("inverted", q, p))
            if other is not None and self._matches(slot, other):
                return (f"it equals the true gradient with the bool mask (argument {q}) "
                        f"inverted: backward uses the mask the wrong way round (~mask, or the "
                        f"branches of a where swapped)?")
        numbers = _number_slots(rerun.args)
        for (q, i), value in numbers.items():
            if value in (0, 1) or i is not None:
                continue
            with self._argument(q, i, type(value)(1)):
                other = self.numeric(p, key=("one", q, i, p))
            if other is not None and self._matches(slot, other):
                return (f"it equals the true gradient with the number argument {q} set to 1 "
                        f"(it is {value:g}): backward ignores that argument (a scale factor "
                        f"such as beta)? Keep it on ctx in forward and use it in backward")
        for (q, i), value in numbers.items():
            # a value written into backward (the square's 2 for any power), or another
            # number argument's value in its place
            others = {1: "a constant 1 written into backward"} if i is not None else {}
            others[2] = "a constant 2 written into backward"
            others.update({v: f"the value of {_slot_name(*key)}" for key, v in numbers.items()
                           if key != (q, i) and v != value})
            for candidate, what in others.items():
                if candidate in (value, 0) or (candidate == 1 and i is None):
                    continue
                with self._argument(q, i, type(value)(candidate)):
                    other = self.numeric(p, key=("set", q, i, candidate, p))
                if other is not None and self._matches(slot, other):
                    return (f"it equals the true gradient with the {_slot_name(q, i)} set to "
                            f"{candidate:g} (it is {value:g}): backward does not use that "
                            f"argument's value ({what} in its place?)")
        for q, value in rerun.base.items():
            if q == p or value.dtype.kind != "f" or np.all(value == 1):
                continue
            other = self.numeric(p, {**rerun.base, q: np.ones_like(value)}, key=("ones", q, p))
            if other is not None and self._matches(slot, other):
                return (f"it equals the true gradient with input {q} set to ones: backward "
                        f"leaves out the factor from input {q} (a loop that stops one short, "
                        f"or a term forgotten)?")
        return None

    def exchanged(self, slot):
        """Backward's gradient is the true one with two inputs of one shape exchanged: it
        takes one's values for the other (saved tensors, or setup_context's inputs, unpacked
        in the wrong order). Asked after the hint for two gradients swapped."""
        if not self._small(slot):
            return None
        rerun = self.rerun
        p = slot.position
        for q, value in rerun.base.items():
            if q == p or value.dtype != rerun.base[p].dtype or value.shape != rerun.base[p].shape:
                continue
            exchanged = {**rerun.base, p: value, q: rerun.base[p]}
            other = self.numeric(p, exchanged, key=("exchanged", q, p))
            if other is not None and self._matches(slot, other):
                return (f"it equals the true gradient with inputs {min(p, q)} and {max(p, q)} "
                        f"exchanged: backward takes one's values for the other (saved tensors, "
                        f"or setup_context's inputs, unpacked in the wrong order)?")
        return None

    def _matches(self, slot, other):
        there = other[slot.indices]
        return np.any(there) and _close(slot.analytic, there) \
            and not _close(there, slot.numeric)

    @contextlib.contextmanager
    def _argument(self, q, i, value):
        """Argument ``q`` (its element ``i`` when it is a tuple or list) set to ``value``."""
        rerun = self.rerun
        saved = rerun.args
        if i is not None:
            inner = list(saved[q])
            inner[i] = value
            value = type(saved[q])(inner)
        rerun.args = tuple(value if j == q else a for j, a in enumerate(saved))
        try:
            yield
        finally:
            rerun.args = saved

    def coupling(self, slot, indexed=False):
        """Backward gives an input entry part of the gradient of an output entry that does not
        change when that input entry moves."""
        if not self._small(slot):
            return None
        p = slot.position
        jacobian = self.jacobian(p, key=("base", p))
        backward = self.backward_matrix().get(p)
        if jacobian is None or backward is None or backward.shape != jacobian.shape \
                or not np.all(np.isfinite(backward)):
            return None
        size = np.abs(backward).max()
        if size == 0 or not _close(self._cotangent_vector() @ backward[:, slot.indices],
                                   slot.analytic, rel=1e-6):
            return None  # backward is not linear in grad_output: its matrix means nothing
        affects = jacobian != 0
        uses = np.abs(backward) > 1e-6 * size
        spurious = uses & ~affects
        if not spurious.any():
            return None
        outputs = [self.rerun.cotangents[k].shape for k in self.rerun.diff_outputs]
        o, j = np.unravel_index(np.argmax(np.where(spurious, np.abs(backward), 0)), spurious.shape)
        entry = _fmt_index(_coords(j, slot.shape))
        out = self._output_name(o, outputs)
        affected = [self._output_name(i, outputs) for i in np.flatnonzero(affects[:, j])]
        moves = (("changes only output " + ", ".join(affected[:3])
                  + (", ..." if len(affected) > 3 else "")) if affected else "changes no output")
        text = (f"backward gives input {p} entry {entry} part of the gradient of output "
                f"{out}, an output that entry does not affect (moving it {moves})")
        return f"{text}: {self._coupling_cause(slot, affects, uses, outputs, indexed)}"

    @staticmethod
    def _output_name(flat, shapes):
        for k, shape in enumerate(shapes):
            size = int(np.prod(shape, dtype=np.int64))
            if flat < size:
                name = _fmt_index(_coords(flat, shape))
                return name if len(shapes) == 1 else f"{k} entry {name}"
            flat -= size
        return "?"

    @staticmethod
    def _coupling_cause(slot, affects, uses, outputs, indexed):
        generic = ("a reduction over the wrong dim, or a sum taken without keepdim=True and "
                   "broadcast back along the wrong axis?")
        if indexed:
            return "the index routes the gradients the wrong way, or is ignored?"
        if len(outputs) != 1 or len(outputs[0]) != len(slot.shape) or not slot.shape:
            return generic
        shape = outputs[0]
        ndim = len(shape)
        pairs = {}
        for name, mask in (("forward", affects), ("backward", uses)):
            o, j = np.nonzero(mask)
            pairs[name] = (np.array(np.unravel_index(o, shape)).T,
                           np.array(np.unravel_index(j, slot.shape)).T, j)
        varying = {}
        for name, (out, _, flat) in pairs.items():
            dims = set()
            for j in np.unique(flat):
                rows = out[flat == j]
                dims |= {d for d in range(ndim) if np.unique(rows[:, d]).size > 1}
            varying[name] = dims
        if tuple(shape) == tuple(slot.shape):
            for d in range(ndim):
                others = [e for e in range(ndim) if e != d]
                steps = {name: out - inp for name, (out, inp, _) in pairs.items()}
                if any(np.any(s[:, others]) for s in steps.values()):
                    continue
                f, b = steps["forward"][:, d], steps["backward"][:, d]
                if (np.all(f >= 0) and np.any(f > 0) and np.all(b <= 0) and np.any(b < 0)) or \
                        (np.all(f <= 0) and np.any(f < 0) and np.all(b >= 0) and np.any(b > 0)):
                    return (f"a scan runs the wrong way along dim {d} in backward (the "
                            f"backward of a cumsum or cumprod scans in reverse: flip, cumsum, "
                            f"flip)?")
        forward, backward = varying["forward"], varying["backward"]
        if forward and backward and not forward & backward:
            return (f"backward sums the gradients along {_dims(backward)}, but the forward "
                    f"mixes (or broadcasts) input {slot.position} along {_dims(forward)}: a "
                    f"reduction over the wrong dim (a dim argument such as ctx.dim ignored, "
                    f"sum(0) for sum(1))?")
        return generic

    def invariance(self, slot):
        """The forward does not change when input ``p`` is shifted (or scaled) along a dim, so
        the true gradient sums to zero (is orthogonal to the input) along it; backward's
        does not (is not)."""
        if _full_values(slot) is None:
            return None
        a, n = _full_values(slot)
        x = self.rerun.base[slot.position].astype(np.float64)
        p = slot.position
        for weight, kind in ((np.ones_like(x), "shift"), (x, "scale")):
            # a normalization's eps makes it scale-invariant only nearly: a looser tolerance,
            # with the forward seen not to move when the whole input is scaled
            tolerance = 0.1 * self.rerun.rtol if kind == "shift" else 2e-2
            if kind == "scale" and not self._unchanged_when_scaled(p):
                continue
            for d in range(n.ndim):
                if n.shape[d] < 2:
                    continue
                scale = np.abs(n * weight).sum(d)
                if not np.all(scale > 0) or \
                        not np.all(np.abs((n * weight).sum(d)) <= tolerance * scale):
                    continue
                total = (a * weight).sum(d)
                off = np.abs(total) > 1e-2 * np.maximum(np.abs(a * weight).sum(d), 1e-300)
                if not off.any():
                    continue
                at = np.unravel_index(np.argmax(np.abs(total) * off), total.shape)
                where = _fmt_index(at)
                if kind == "shift":
                    return (f"the forward does not change when one number is added to input "
                            f"{p} along dim {d} (as a softmax, log-softmax or normalization), "
                            f"so the true gradient sums to zero along dim {d}; backward's does "
                            f"not (sum {total[at]:.4g} at {where}): the term that subtracts a "
                            f"weighted sum of grad_output is missing or its weights do not sum "
                            f"to one (log-probabilities where probabilities are needed?)")
                return (f"the forward does not change when input {p} is scaled along dim {d} "
                        f"(as a normalization x / std(x)), so the true gradient is orthogonal "
                        f"to input {p} along dim {d} (sum of grad * x is zero); backward's is "
                        f"not (sum {total[at]:.4g} at {where}): the variance (scale) term of "
                        f"the normalization's backward is missing?")
        return None

    def _unchanged_when_scaled(self, p, factor=1.01):
        rerun = self.rerun
        base = rerun.base[p]
        moved = rerun.evaluate({**rerun.base, p: (base * base.dtype.type(factor))})
        return all(float(np.linalg.norm(b - a)) <= 1e-3 * float(np.linalg.norm(a))
                   for a, b in zip(rerun.base_outputs, moved))


def _full_values(slot):
    size = int(np.prod(slot.shape, dtype=np.int64))
    if slot.sampled or len(slot.indices) != size or not np.all(np.isfinite(slot.numeric)) \
            or not np.all(np.isfinite(slot.analytic)) or not slot.shape:
        return None
    return slot.analytic.reshape(slot.shape), slot.numeric.reshape(slot.shape)

"""Rebuilding a custom Function node's forward arguments, so the doctor can re-run it.

Inside :func:`gradviz.debug.capture` every custom node keeps copies of its forward arguments
(Note [Forward capture] in ``gradviz.autograd.function``). Outside it, every node keeps
references to them by default (Note [Re-running from the kept inputs]). Failing that (the
switch is off, or an input was modified in place since forward) they are rebuilt from
what the graph still holds: the tensors the Function saved unchanged, the leaves' values, the
saved tensors of other nodes, and the outputs of other custom Functions re-run on their own
rebuilt arguments. Plain constants (numbers, None, strings, tuples of them) are kept on every
node.
"""

from __future__ import annotations

import itertools

import numpy as np

from gradviz_ext import engine as _engine

from .. import ops as _ops
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import _capture

__all__ = ["recorded_inputs", "graph_values", "is_custom"]


def is_custom(node):
    """A custom Function's node (the ctx): it knows its Function class."""
    return node._kind() == "custom" and getattr(node, "_forward_cls", None) is not None


def recorded_inputs(node, known, trail=()):
    """The node's forward arguments, or ``(None, reason)`` when they cannot be known.

    Inside ``capture()`` the Function recorded copies (Note [Forward capture]). Otherwise the
    arguments can still be rebuilt when each was a tensor the graph still holds: one the
    Function saved unchanged, one ``known`` has (:func:`graph_values`), or an output of a
    custom Function whose own arguments can be rebuilt (:func:`_edge_value`). A leaf may have
    changed since forward; that does not matter here, because the Function's backward is
    checked against its own forward at whatever point it is re-run.
    """
    recorded = getattr(node, "_forward_args", None)
    if recorded is not None:
        return tuple(recorded), None
    kept, modified = kept_inputs(node)
    if kept is not None:
        return kept, None
    args, reason = _rebuilt_inputs(node, known, trail)
    if args is None and modified is not None:
        reason = modified  # the first thing to know: the kept inputs were modified
    return args, reason


# Note [Re-running from the kept inputs]
# --------------------------------------
# By default a custom Function's node keeps references to its forward arguments and the
# version of each tensor among them (Note [Kept forward inputs] in gradviz_ext/_function.py).
# When no tensor's version has moved, its current values are those forward saw, and the
# doctor re-runs forward and backward on fresh copies of them: a fresh graph, so neither
# capture() nor the node's saved tensors are needed, before and after a backward that freed
# them. A moved version means an in-place write since forward; the values forward saw are gone,
# and the doctor falls back to what the graph still holds (the saved tensors), and when that
# fails too, says which input was modified.


def kept_inputs(node):
    """``(arguments, None)`` from the node's kept forward inputs (Note [Re-running from the
    kept inputs]); ``(None, reason)`` when a tensor among them was modified in place since
    forward; ``(None, None)`` when the node kept none."""
    kept = getattr(node, "_forward_inputs", None)
    versions = getattr(node, "_forward_versions", None)
    if kept is None or versions is None:
        return None, None
    args = list(kept)
    for position, version in zip(node._tensor_input_positions, versions):
        tensor = kept[position]
        now = tensor._version_counter.value
        if now != version:
            return None, (f"input {position} was modified in place after forward (its version "
                          f"moved from {version} to {now}), so the values forward saw are gone; "
                          f"modify a clone instead, or build the graph inside "
                          f"gradviz.debug.capture(), which copies the arguments")
        args[position] = _ops.from_numpy(tensor._data.copy())
    return tuple(args), None


def _rebuilt_inputs(node, known, trail):
    """The forward arguments rebuilt from what the graph holds (:func:`recorded_inputs`)."""
    hint = ("build the graph with gradviz.debug.keep_forward_inputs on (the default), or "
            "inside gradviz.debug.capture(), to record them")
    count = node._num_forward_inputs
    positions = node._tensor_input_positions
    args = [None] * count
    if len(positions) != count:
        # plain constants (numbers, None, strings) are kept on the node; others are not
        for position, value in getattr(node, "_forward_constants", None) or ():
            args[position] = value
        known_positions = {p for p, _ in getattr(node, "_forward_constants", None) or ()}
        if len(known_positions) + len(positions) != count:
            return None, (f"its forward arguments include non-tensors that were not recorded "
                          f"({hint})")
    saved = getattr(node, "_saved", None)
    constants = []  # positions of tensor arguments that do not require grad
    used = set()    # saved tensors matched to an argument
    for edge, position in enumerate(positions):
        next_node, input_nr = node.next_functions[edge]
        if next_node is None:
            constants.append(position)
            continue
        match = None
        for item in saved or ():
            if item is None or item._is_output or item._tensor is None:
                continue
            tensor = item._tensor
            node_of = _engine.stored_grad_fn(tensor)  # no error for a view whose base changed
            if node_of is not None:
                same = node_of is next_node and tensor._output_nr == input_nr
            else:
                same = isinstance(next_node, _engine.AccumulateGrad) and next_node.variable is tensor
            if same:
                match = item
                break
        if match is not None:
            if match._version_counter.value != match._saved_version:
                return None, f"input {position} was modified in place after forward ({hint})"
            args[position] = _ops.from_numpy(match._tensor._data.copy())
            used.add(id(match))
            continue
        value = _edge_value(next_node, input_nr, known, trail + (node,))
        if value is not None:
            args[position] = _ops.from_numpy(value.copy())
            continue
        if saved is None:
            if node._released:
                return None, f"its forward arguments were not recorded and its saved tensors were freed ({hint})"
            return None, f"its forward arguments were not recorded and it saved no tensors ({hint})"
        return None, f"input {position} was not saved for backward and not recorded ({hint})"
    if constants and not _place_constants(node, args, constants, saved, used, known):
        freed = " (its saved tensors were freed)" if node._released else ""
        return None, (f"input {constants[0]} does not require grad and was not recorded"
                      f"{freed} ({hint})")
    return tuple(args), None


def _place_constants(node, args, constants, saved, used, known):
    """Fill the arguments that need no gradient from the saved tensors no edge accounts for
    (:func:`choose_placing`)."""
    spare = [item for item in saved or () if item is not None and not item._is_output
             and item._tensor is not None and id(item) not in used
             and item._version_counter.value == item._saved_version]

    def run(trial):
        with no_grad():
            return node._forward_cls.apply(*trial)

    def same(output, value):
        return (isinstance(output, Tensor) and output._data.shape == value.shape
                and np.allclose(output._data, value, equal_nan=True))

    return choose_placing(node, args, constants, spare, known,
                          lambda item: _ops.from_numpy(item._tensor._data.copy()), run, same)


def choose_placing(node, args, constants, spare, known, fresh, run, same):
    """Put the ``spare`` saved values (no edge accounts for them) at the ``constants``
    positions of ``args``, the arguments that need no gradient; shared by gradviz and PyTorch
    graphs.

    Nothing links such a value to its position, so each way of placing them is tried, with
    ``fresh(value)`` a new tensor per try: the one placing whose forward (``run(trial)``) runs,
    and whose outputs equal (``same(output, value)``) those the graph still holds for ``node``
    in ``known``, if any, is taken. With none, or several, the node is skipped (False).
    """
    if len(spare) < len(constants) or len(spare) > 4:
        return False
    held = {nr: value for (owner, nr), value in known.items() if owner is node}
    working = []
    for choice in itertools.permutations(spare, len(constants)):
        trial = list(args)
        for position, value in zip(constants, choice):
            trial[position] = fresh(value)
        try:
            outputs = run(trial)
        except Exception:  # noqa: BLE001 - a placing the forward does not accept
            continue
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        if held:
            if all(nr < len(outputs) and same(outputs[nr], value) for nr, value in held.items()):
                working = [trial]
                break
            continue
        working.append(trial)
    if len(working) != 1:
        return False
    for position in constants:
        args[position] = working[0][position]
    return True


# How many custom Functions deep _edge_value re-runs forwards to find one argument.
_RERUN_DEPTH = 16


def _edge_value(node, output_nr, known, trail):
    """The value of edge ``(node, output_nr)``: from ``known``, or for a custom Function's
    output by re-running its forward (without recording) on its rebuilt arguments."""
    value = known.get((node, output_nr))
    if value is not None or not is_custom(node) or node in trail or len(trail) > _RERUN_DEPTH:
        return value
    args, _ = recorded_inputs(node, known, trail)
    if args is None:
        return None
    try:
        with no_grad():
            outputs = node._forward_cls.apply(*args)
    except Exception:  # noqa: BLE001 - the user's forward may raise anything; then unknown
        return None
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for nr, output in enumerate(outputs):
        if isinstance(output, Tensor):
            known.setdefault((node, nr), output._data)
    return known.get((node, output_nr))


def graph_values(nodes):
    """``{(node, output_nr): array}``: values of graph edges that the graph itself still holds.

    A leaf's current value (its AccumulateGrad), and every saved tensor still at the version
    it was saved at, under the edge it is the value of: an output saved by its own node, an
    input by the node (and output number) that made it.
    """
    known = {}
    for node in nodes:
        if isinstance(node, _engine.AccumulateGrad):
            variable = node.variable
            if isinstance(variable, Tensor):
                known[(node, 0)] = variable._data
            continue
        for _, item in _capture.saved_tensors_of(node):
            if item._version_counter.value != item._saved_version:
                continue
            data = _capture.saved_data(item)
            if data is None:
                continue
            if item._is_output:
                known.setdefault((node, item._output_nr), data)
            elif item._tensor is not None and _engine.stored_grad_fn(item._tensor) is not None:
                known.setdefault((_engine.stored_grad_fn(item._tensor), item._tensor._output_nr),
                                 data)
    return known

"""Every program of the op table's torch comparison (``SPECS`` in test_every_op_vs_torch.py)
builds the graph PyTorch builds: the same node names along ``next_functions`` to depth 3,
and on each of those nodes the same ``_saved_*`` names, with equal values (tensors by shape
and value, None where torch's is None, numbers and tuples exactly).

The differences gradviz knows of are listed below with their reasons: a listed program or
node that has come to agree with torch fails :func:`test_known_differences_are_still_there`,
so the lists stay exact.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_every_op_vs_torch import SPECS, _arrays, _flat

import gradviz

DEPTH = 3

_BACKWARD_OF_BACKWARD = (
    "the gradient's own graph: gradviz builds the derivative of a backward rule from its ops, "
    "torch records one node per formula (or NotImplemented where it has none)")
_IN_PLACE_INTO_VIEW = (
    "an in-place write into a view records the write's node as CopySlices' second edge; "
    "torch's CopySlices holds that node and takes its edges")
_AS_STRIDED = ("as_strided over a non-contiguous or offset view: torch records AsStridedBackward0 "
               "over its storage, gradviz an AsStridedScatterBackward0 (or a copy) of the view")
_NO_EDGE_INPUT = ("an input torch takes as not differentiable (LU pivots; a loss weight, Note "
                  "[Loss weights as inputs]) is an input of gradviz's node, which gives it a None "
                  "edge; torch gives it none")
_COMPOSED_IN_CPP = ("torch composes it in C++ with Scalar overloads (AddBackward1, MulBackward1, "
                    "SubBackward0 of a view), gradviz with its tensor ops")

# program -> why its graph differs from torch's within DEPTH
STRUCTURE_DIFFERS = {
    "as_strided_read": _AS_STRIDED,
    "as_strided_scatter": _AS_STRIDED,
    "as_strided_view": _IN_PLACE_INTO_VIEW,
    "as_strided_view_scatter": _AS_STRIDED,
    "col2im_wide": _BACKWARD_OF_BACKWARD,
    "convolution_backward": _BACKWARD_OF_BACKWARD,
    "copy": _IN_PLACE_INTO_VIEW,
    "copy_slices": _IN_PLACE_INTO_VIEW,
    "ctc_loss_backward": _BACKWARD_OF_BACKWARD,
    "div_number": _COMPOSED_IN_CPP,
    "fill": _IN_PLACE_INTO_VIEW,
    "fill_tensor": _IN_PLACE_INTO_VIEW,
    "hardsigmoid_backward": _BACKWARD_OF_BACKWARD,
    "im2col_wide": _BACKWARD_OF_BACKWARD,
    "index_backward": _BACKWARD_OF_BACKWARD,
    "linalg_lu_solve": _NO_EDGE_INPUT,
    "lu_unpack": _NO_EDGE_INPUT,
    "mul_number": _COMPOSED_IN_CPP,
    "native_batch_norm_backward": _BACKWARD_OF_BACKWARD,
    "native_group_norm_backward": _BACKWARD_OF_BACKWARD,
    "native_layer_norm_backward": _BACKWARD_OF_BACKWARD,
    "zero": _IN_PLACE_INTO_VIEW,
}

_NO_TABLE = "gradviz does not list this node's saved values under torch's names yet"

# node -> why its ``_saved_*`` names or values differ from torch's
SAVED_DIFFERS = {
    "IndexPutBackward0": _NO_TABLE,
    "RreluWithNoiseBackward0": _NO_TABLE,
    "RreluWithNoiseBackward1": _NO_TABLE,
    "TrilinearBackward0": _NO_TABLE,
}


def _raw_names(node):
    return {name for name in dir(node) if name.startswith("_raw_saved_")}


def _saved_values(node):
    names = sorted(name for name in dir(node) if name.startswith("_saved_"))
    values = {}
    for name in names:
        try:
            values[name] = getattr(node, name)
        except (AttributeError, RuntimeError) as error:
            values[name] = error
    return values


def _walk(node, depth, nodes):
    """The node names along ``next_functions`` to ``depth``; the nodes seen go to ``nodes``."""
    if node is None:
        return None
    if depth == 0:
        return node.name()
    nodes.append(node)
    return node.name(), tuple(_walk(next_node, depth - 1, nodes)
                              for next_node, _ in node.next_functions)


def _walked(m, name):
    """The node names of ``SPECS[name]``'s outputs to DEPTH, and the nodes on the way."""
    spec = SPECS[name]
    inputs = [m.tensor(array, requires_grad=array.dtype.kind == "f")
              for array in _arrays(name, spec)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outputs = [o for o in _flat(spec.program(m, *inputs)) if isinstance(o, m.Tensor)]
    nodes = []
    shapes = [_walk(o.grad_fn, DEPTH, nodes) for o in outputs]
    return shapes, nodes


def _graph(m, name):
    shapes, nodes = _walked(m, name)
    return shapes, [(node.name(), _saved_values(node)) for node in nodes]


def _same_value(ours, theirs):
    if isinstance(ours, AttributeError) and "gradviz does not keep" in str(ours):
        return True  # a value gradviz documents it does not keep (NotKept in ops/_saved.py)
    if theirs is None or ours is None:
        return ours is None and theirs is None
    if isinstance(theirs, torch.Tensor):
        return (isinstance(ours, gradviz.Tensor) and tuple(ours.shape) == tuple(theirs.shape)
                and np.allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6,
                                atol=1e-12, equal_nan=True))
    if isinstance(theirs, (tuple, list)):
        return (type(ours) is type(theirs) and len(ours) == len(theirs)
                and all(_same_value(o, t) for o, t in zip(ours, theirs)))
    if isinstance(theirs, Exception):
        return type(ours) is type(theirs)
    if isinstance(theirs, float) and np.isnan(theirs):
        return isinstance(ours, float) and np.isnan(ours)
    return ours == theirs and (type(ours) is type(theirs) or {type(ours), type(theirs)} <= {int, float})


def _saved_differences(ours, theirs):
    """(node name, what differs) for each node whose saved names or values differ."""
    found = []
    for (name, our_values), (_, their_values) in zip(ours, theirs):
        if sorted(our_values) != sorted(their_values):
            found.append((name, sorted(set(our_values) ^ set(their_values))))
            continue
        unequal = [key for key in their_values
                   if not _same_value(our_values[key], their_values[key])]
        if unequal:
            found.append((name, unequal))
    return found


@pytest.mark.parametrize("name", sorted(SPECS))
def test_graph_and_saved_values_match_torch(name):
    (our_shapes, our_saved), (their_shapes, their_saved) = _graph(gradviz, name), _graph(torch, name)
    if name in STRUCTURE_DIFFERS:
        return  # nodes cannot be matched one to one (test_known_differences_are_still_there)
    assert our_shapes == their_shapes
    unexplained = [(node, what) for node, what in _saved_differences(our_saved, their_saved)
                   if node not in SAVED_DIFFERS]
    assert not unexplained


@pytest.mark.parametrize("name", sorted(set(SPECS) - set(STRUCTURE_DIFFERS)))
def test_raw_saved_names_are_torchs(name):
    """``_raw_saved_<x>`` (the SavedTensor) for each saved input or output; a tensor gradviz
    keeps in the node's attributes (an index, a mask, returned indices) has none, where
    torch's node has one (ops/_saved.py), so gradviz's names are a subset of torch's."""
    for ours, theirs in zip(_walked(gradviz, name)[1], _walked(torch, name)[1]):
        assert _raw_names(ours) <= _raw_names(theirs), ours.name()


def test_known_differences_are_still_there():
    structure_now_equal, saved_seen = [], set()
    for name in sorted(SPECS):
        (our_shapes, our_saved), (their_shapes, their_saved) = (_graph(gradviz, name),
                                                                _graph(torch, name))
        if name in STRUCTURE_DIFFERS:
            if our_shapes == their_shapes:
                structure_now_equal.append(name)
            continue
        saved_seen.update(node for node, _ in _saved_differences(our_saved, their_saved))
    assert not structure_now_equal, "these graphs now match torch's: remove them from the list"
    assert not set(SAVED_DIFFERS) - saved_seen, "these nodes now match: remove them from the list"

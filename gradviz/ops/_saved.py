"""``grad_fn._saved_<name>`` and ``grad_fn._raw_saved_<name>``: a node's saved values under
PyTorch's names.

PyTorch's autograd mechanics note and its saved-tensor hooks tutorial read what a node keeps
for backward off the node: ``y = x.exp(); y.grad_fn._saved_result``, ``(a * b).grad_fn._saved_self
is a``, ``x.sum(dim=1).grad_fn._saved_dim``. gradviz names its nodes as PyTorch does, so
:data:`SAVED_NAMES` maps each node name to PyTorch's saved names and says where gradviz finds
each value; each op row declares its node's entry (``Op(..., saved={...})``), with these kinds:

- ``Input(i)``: forward input ``i`` as the node saved it. A tensor input is the input tensor
  itself (PyTorch's ``is`` holds); a Python number is a 0-d tensor like PyTorch's wrapped
  number (float64 for a float, int64 for an int). An input the node did not save, because no
  gradient needs it (``a * b`` with only ``a`` requiring grad keeps ``b`` only), is None, as in
  PyTorch.
- ``RESULT``: the forward output, a tensor equal to it whose ``grad_fn`` is the node.
- ``Attr(key)``: a forward attribute (``dim``, ``keepdim``, ``alpha``), or a tensor the op keeps
  in its attributes (``where``'s condition).
- ``Computed(fn)``: computed from what the node keeps (``_saved_self_sym_sizes`` from the input
  shape, ``_saved_reduction`` as PyTorch's enum).
- ``NotKept(reason)``: PyTorch saves it and gradviz does not; reading it raises AttributeError
  that says why, never a made-up value.

Like PyTorch, tensors read after the graph was freed by a backward raise RuntimeError "Trying to
backward through the graph a second time (or directly access saved tensors ...)".

Note [Saved ints as passed]: PyTorch's node keeps a dim (or an index, a diagonal's offset) as
the caller passed it, and its Python binding reads a saved int64 as unsigned: ``x.sum(-1)``
shows ``_saved_dim`` ``(18446744073709551615,)``, ``2**64 - 1``. gradviz's rules work on the
normalized dim, so an op whose argument may be negative records it as passed too, as
``<key>_arg`` beside the normalized ``<key>`` (``dim_arg=-1`` beside ``dim=1``); :func:`passed`
reads it and shows it through :func:`torch_int`, as PyTorch's binding does. Where PyTorch
itself normalizes first (``x[..., -1]``, ``movedim``) the normalized value is what both show.

Known differences (documented, not hidden): sizes computed from a saved input raise after
backward (PyTorch keeps them as integers); std's and var's ``correction`` for two calls
gradviz's signature cannot tell apart (Note [Saved correction] in ``_reduction.py``).

``_raw_saved_<name>`` is the engine's ``SavedTensor`` behind a tensor the node saved (an input
or the output); values kept as attributes (an index, a mask, the indices an op returns) have
none, where PyTorch's node has one: gradviz's ``_raw_saved_*`` names are a subset of PyTorch's.

``tests/ops/test_graph_parity_vs_torch.py`` compares every op program's nodes, their saved
names and values with PyTorch's, and lists the nodes that still differ.
"""

from __future__ import annotations

import math

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .._tensor import _wrap

__all__ = ["SAVED_NAMES", "saved_attribute", "saved_names"]

_PREFIX = "_saved_"
_RAW_PREFIX = "_raw_saved_"


class Input:
    """Forward input ``index`` as saved (None when no gradient needed it). ``needed_by``: the
    input whose gradient needs it, for ops that save it whatever is needed where PyTorch saves
    it only for that gradient (mm's ``self`` is there only when ``mat2`` requires grad)."""

    def __init__(self, index, needed_by=None):
        self.index = index
        self.needed_by = needed_by


class _Result:
    """The forward output as saved."""


RESULT = _Result()


class Attr:
    """The forward attribute ``key`` (``convert`` applied), or ``default`` when it is absent."""

    _MISSING = object()

    def __init__(self, key, convert=None, default=_MISSING):
        self.key = key
        self.convert = convert
        self.default = default


class Computed:
    """``fn(node)``: a value computed from what the node keeps."""

    def __init__(self, fn):
        self.fn = fn


class NotKept:
    """A value PyTorch saves that gradviz does not keep, and why."""

    def __init__(self, reason):
        self.reason = reason


# ---- helpers for Computed values ---------------------------------------------------------

_UINT64 = 2**64


def torch_int(value):
    """An int as PyTorch's node reports it: its binding reads a saved int64 as unsigned, so a
    negative one reads as ``2**64 + value`` (Note [Saved ints as passed])."""
    value = int(value)
    return value + _UINT64 if value < 0 else value


def passed(key, many=False):
    """PyTorch's saved ``key`` as the caller passed it: ``attrs[key + "_arg"]``, or the
    normalized ``attrs[key]`` where the op did not record the argument (it passed no negative
    one, or PyTorch normalizes it too); ``many``: a tuple (one dim passed as an int is one
    entry)."""
    arg = key + "_arg"

    def value(node):
        attrs = node.attrs
        found = attrs[arg] if arg in attrs else attrs[key]
        if not many:
            return torch_int(found)
        return tuple(torch_int(d) for d in (found if isinstance(found, (tuple, list)) else (found,)))
    return Computed(value)


def optional_dims(node):
    """PyTorch's optional ``dim`` (std, var, nansum, the vector norm): the dims as passed
    (Note [Saved ints as passed]), or None where the caller passed none (all dims)."""
    dims = node.attrs.get("dims_arg")
    if dims is None:
        return None
    return tuple(torch_int(d) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))


def _input_shape(index):
    """The shape of saved input ``index`` (a saved tensor must still be there)."""
    def shape(node):
        return tuple(node.input(index).shape)
    return shape


def input_strides(index, first_matrix):
    """PyTorch's ``_saved_<x>_sym_strides``: the strides of input ``index`` when its gradient is
    needed, else ``()`` (PyTorch saves them for that gradient only). A matrix product records
    its matrices' byte strides at forward (``strides``; the first is input ``first_matrix``),
    as their values are kept only for the other's gradient."""
    def strides(node):
        if not node.needs_input_grad[index]:
            return ()
        itemsize = node._input_metadata[0].np_dtype.itemsize
        return tuple(step // itemsize for step in node.strides[index - first_matrix])
    return strides


def _output_shape(node):
    meta = node._input_metadata[0]
    return tuple(meta.shape)


def matrix_shape(index, other, out_axis, other_axis, first):
    """The shape of a matrix product's input ``index`` (0 or 1 of mm; 1 or 2 of addmm): from
    the input itself when saved, else from the output and the other matrix (an input that needs
    no gradient partner is not saved, yet PyTorch still reports its size)."""
    def shape(node):
        saved = node._saved_inputs or {}
        if saved.get(index) is not None:
            return tuple(node.input(index).shape)
        rows_or_cols = _output_shape(node)[out_axis]
        inner = node.input(other).shape[other_axis]
        return (rows_or_cols, inner) if first else (inner, rows_or_cols)
    return shape


def shape_attr(key="shape"):
    return Attr(key, tuple)


_REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}  # at::Reduction, as PyTorch's node reports


def reduction_enum(node):
    return _REDUCTION_ENUM[node.attrs["reduction"]]


def input_numel(node):
    return math.prod(node.attrs["shape"])


def key_dim(node):
    """The dimension a basic-indexing node (select, slice) acts on: as passed to ``select`` or
    ``narrow`` (Note [Saved ints as passed]), else the position of the one entry of its key
    that is not a full slice."""
    dim_arg = node.attrs.get("dim_arg")
    return _key_entry(node)[0] if dim_arg is None else torch_int(dim_arg)


def _key_entry(node):
    key = node.attrs["key"]
    if not isinstance(key, tuple):
        key = (key,)
    found = [(i, k) for i, k in enumerate(key) if not (isinstance(k, slice) and k == slice(None))]
    if len(found) != 1 or any(k is Ellipsis or k is None for k in key):
        raise AttributeError(
            f"'{node.name()}' object: gradviz recorded the indexing key {key!r} as one node, "
            "which PyTorch records as several; read the key as grad_fn.key instead")
    dim, entry = found[0]
    return dim, entry


def slice_part(part):
    """A slice node's start, end or step as PyTorch saves them (an open end is INT64_MAX)."""
    def value(node):
        _, entry = _key_entry(node)
        if not isinstance(entry, slice):
            raise AttributeError(f"'{node.name()}' object: the key entry {entry!r} is not a slice")
        start, stop, step = entry.start, entry.stop, entry.step
        if part == "start":
            return 0 if start is None else torch_int(start)
        if part == "end":
            return 9223372036854775807 if stop is None else torch_int(stop)
        return 1 if step is None else step
    return value


def select_index(node):
    return torch_int(_key_entry(node)[1])


def optional_input(key, first, before=()):
    """An optional tensor an op takes as an input only when given (attribute ``has_<key>``):
    the input after ``first`` and the given ones among ``before``, or None."""
    def value(node):
        attrs = node.attrs
        if not attrs["has_" + key]:
            return None
        return _read_input(node, first + sum(1 for other in before if attrs["has_" + other]))
    return Computed(value)


def clamp_bound_attr(which):
    """clamp with tensor bounds: min is input 1, max input 2 (None when not given)."""
    def bound(node):
        if not node.attrs["has_" + which]:
            return None
        return _read_input(node, 1 if which == "min" else 2)
    return bound


def tensor_attr(key, needed_by=None):
    """A tensor the op keeps in its attributes; freed with the graph, as PyTorch's is (a node
    that saved no tensor at all is never marked freed: Note [Saved names] differences).
    ``needed_by``: the input whose gradient alone needs it in PyTorch (None otherwise)."""
    def value(node):
        if node._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        if needed_by is not None and not node.needs_input_grad[needed_by]:
            return None
        return node.attrs[key]
    return value


def reduced_indices(node):
    """max/min along a dim: the indices as returned (gradviz keeps them with the reduced dim
    kept, for backward)."""
    indices = tensor_attr("indices_tensor")(node)
    return indices if node.attrs["keepdim"] else indices.squeeze(node.attrs["dim"])


def indices_tuple(node):
    """PyTorch's ``_saved_indices`` of an advanced index: one entry per indexed dimension,
    None for a full slice, the index as a tensor otherwise."""
    if node._released:
        raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
    key = node.attrs["key"]
    if not isinstance(key, tuple):
        key = (key,)
    entries = []
    for k in key:
        if isinstance(k, slice) and k == slice(None):
            entries.append(None)
        elif isinstance(k, np.ndarray):
            entries.append(_wrap(k))
        else:
            raise AttributeError(
                f"'{node.name()}' object: gradviz keeps the index {key!r} in numpy form, "
                "which has no single PyTorch equivalent; read it as grad_fn.key instead")
    return tuple(entries)


def wrapped_array(array):
    return _wrap(array.copy())


def conv_geometry(key):
    """A convolution's ``stride``/``padding``/``dilation``/``output_padding`` as torch saves
    it: one entry per spatial dim (a 1-D convolution computes over (1, L): the first is
    dropped)."""
    def value(node):
        geometry = node.attrs["geometry"]
        dims = node.input(0).ndim - 2
        if key == "output_padding":
            values = getattr(geometry, "output_padding", (0,) * len(geometry.kernel))
        else:
            values = getattr(geometry, key)
        return tuple(values)[-dims:]
    return value


def conv_groups(node):
    groups = node.attrs.get("groups")
    return node.attrs["geometry"].groups if groups is None else groups


def pool_geometry(key):
    return Computed(lambda node: tuple(getattr(node.attrs["geometry"], key)))


GRID_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}  # torch's enums, as its node reports
GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}
NOT_INDICES = NotKept("gradviz keeps each maximum's offset within its window (grad_fn.indices), "
                       "not the flat indices; return_indices=True gives those")

NOT_NLL_TARGET = NotKept(
    "gradviz's nll_loss keeps the per-element coefficients of the gradient (target, weight, "
    "ignore_index and reduction folded into one array, grad_fn.coefficients) instead")


# ---- the table ---------------------------------------------------------------------------

SELF = Input(0)
OTHER = Input(1)
SELF_SIZES = shape_attr()
DIM = passed("dim")
DIMS = passed("dims", many=True)
OPTIONAL_DIMS = Computed(optional_dims)
KEEPDIM = Attr("keepdim")
# max, min, median, nanmedian, kthvalue along a dim: the dim as passed (kthvalue's default -1
# too), the indices as returned
SELECTED_SAVED = {"dim": DIM, "indices": Computed(reduced_indices), "keepdim": KEEPDIM,
                  "self_sym_sizes": SELF_SIZES}

NO_LU = NotKept("gradviz solves with numpy, which returns no LU factorization")
def SAVED(key, convert=lambda value: value):
    """A value kept for PyTorch's name only, in the node's ``saved`` attribute."""
    return Attr("saved", lambda saved: convert(saved[key]))


REFACTORED = NotKept("the node keeps A and factorizes it again in backward (Note [Recomputed "
                      "factorizations] in gradviz/ops/_linalg_factor.py)")

# node name -> {PyTorch's saved name: where gradviz finds it}. Filled by the op rows: each
# ``Op(..., saved={...})`` declares its node's entry (Note [Declared once] in _registry.py).
SAVED_NAMES: dict[str, dict] = {}


# ---- reading them --------------------------------------------------------------------------

def _wrapped_number(value):
    """A Python number as PyTorch saves it: a 0-d "wrapped number" tensor (float64 for a
    float, int64 for an int, bool for a bool)."""
    if isinstance(value, bool):
        dtype = np.bool_
    elif isinstance(value, int):
        dtype = np.int64
    elif isinstance(value, float):
        dtype = np.float64
    else:
        return value
    return _wrap(np.array(value, dtype=dtype))


def _read_input(node, index):
    saved = node._saved_inputs
    if saved is None or index not in saved:
        if node._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        return None  # no gradient needed it, so neither gradviz nor PyTorch saved it
    value = node.input(index)  # raises if freed or modified in place
    return _wrapped_number(value) if not hasattr(value, "_data") and value is not None else value


def _value(node, spec):
    if isinstance(spec, Input):
        if spec.needed_by is not None and not node.needs_input_grad[spec.needed_by]:
            return None  # gradviz keeps it anyway; PyTorch saves it for that gradient only
        return _read_input(node, spec.index)
    if spec is RESULT:
        if node._saved_output is None:
            raise AttributeError(f"'{node.name()}' object: gradviz did not save the result")
        return node.output()
    if isinstance(spec, Attr):
        attrs = node.attrs or {}
        if spec.key not in attrs:
            if spec.default is Attr._MISSING:
                raise AttributeError(f"'{node.name()}' object: gradviz did not record "
                                     f"{spec.key!r} for this node")
            return spec.default
        value = attrs[spec.key]
        return value if spec.convert is None or value is None else spec.convert(value)
    return spec.fn(node)


def _raw(node, torch_name, spec):
    """The SavedTensor behind a tensor the node saved."""
    if isinstance(spec, Input):
        saved = node._saved_inputs
        value = None if saved is None else saved.get(spec.index)
        if isinstance(value, _engine.SavedTensor):
            return value
        what = ("a number, kept as it is" if value is not None
                else "not saved: no gradient of this node needs it")
        raise AttributeError(f"'{node.name()}' object has no attribute '{_RAW_PREFIX}{torch_name}': "
                             f"in gradviz {torch_name} is {what}, so there is no SavedTensor")
    if spec is RESULT and node._saved_output is not None:
        return node._saved_output
    raise AttributeError(
        f"'{node.name()}' object has no attribute '{_RAW_PREFIX}{torch_name}': gradviz keeps "
        f"{torch_name} in the node's attributes, not as a SavedTensor")


def saved_attribute(node, name):
    """``node._saved_<x>`` or ``node._raw_saved_<x>`` (called by ``OpNode.__getattr__``)."""
    raw = name.startswith(_RAW_PREFIX)
    torch_name = name[len(_RAW_PREFIX if raw else _PREFIX):]
    table = SAVED_NAMES.get(node.name())
    node_name = node.name()
    if table is None:
        raise AttributeError(
            f"'{node_name}' object has no attribute '{name}': gradviz does not list the saved "
            f"values of {node_name} under PyTorch's names; its own are grad_fn.attrs and "
            "grad_fn.input(i) / grad_fn.output()")
    spec = table.get(torch_name)
    if spec is None:
        raise AttributeError(f"'{node_name}' object has no attribute '{name}'")
    if isinstance(spec, NotKept):
        raise AttributeError(f"'{node_name}' object has no attribute '{name}': gradviz does not "
                             f"keep PyTorch's saved {torch_name}: {spec.reason}")
    if raw:
        return _raw(node, torch_name, spec)
    return _value(node, spec)


# the engine's own fields (the saved inputs by index, the saved output), which share the prefix
_ENGINE_FIELDS = frozenset({"_saved_inputs", "_saved_output"})


def saved_names(node, attributes):
    """dir(node): its ``attributes`` with PyTorch's ``_saved_*`` names (and ``_raw_saved_*``
    for saved tensors) in place of the engine's own ``_saved_inputs`` and ``_saved_output``,
    so that ``[a for a in dir(grad_fn) if a.startswith('_saved_')]`` lists what PyTorch's does."""
    names = [name for name in attributes if name not in _ENGINE_FIELDS]
    table = SAVED_NAMES.get(node.name())
    if table:
        names += [_PREFIX + name for name in table]
        names += [_RAW_PREFIX + name for name, spec in table.items()
                  if isinstance(spec, Input) or spec is RESULT]
    return sorted(names)


_ext_ops.install_saved_attributes(saved_attribute, saved_names)

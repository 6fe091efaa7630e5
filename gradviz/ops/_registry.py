"""The op table: one forward rule and one backward rule per differentiable operation.

An :class:`Op` is data. :func:`apply` is the only code that turns an op into a graph node,
so adding an op never touches the engine (the HIPS-autograd pattern).

Note [Backward rules are differentiable]
----------------------------------------
Every backward rule is written with gradviz Tensor operations, never with raw numpy. Run
without ``create_graph`` the engine switches grad mode off, so these operations record
nothing; with ``create_graph=True`` they build the graph of the gradient, which is how
higher-order gradients work for every built-in op.

Note [Fast backward rules]
--------------------------
Without ``create_graph`` a backward rule's Tensor operations record nothing, yet each still
pays for building a Tensor and checking dtypes: on small tensors that is most of backward's
time. The hottest ops therefore also carry ``fast_backward``, the same formula on numpy
arrays, which ``OpNode.apply`` uses whenever grad mode is off (the engine turns it off unless
``create_graph``). The differentiable ``backward`` stays the definition: higher-order
gradients use it, and ``tests/ops/test_fast_backward.py`` checks that every fast rule gives
the same gradients as it, over dtypes, broadcasting, and size-0 and 0-d shapes; where the fast
rule is a compiled kernel that computes in another order (the normalizations' rows, GELU's
float32 polynomial), within rounding. A fast rule also keeps the gradients on arrays from one
node to the next (Note [Gradients as arrays] in gradviz_ext/_task.py): a rule without one
takes and gives Tensors. (The normalizations, GELU, softmax and log_softmax computed on arrays
inside their differentiable rules, and masked_fill, embedding and nll_loss called ops: as
fast rules, the GPT of bench/models.py, 15 such nodes, takes 4.09 ms to backward where it
took 4.28, medians of 150 alternating passes.) The engine reduces broadcast gradients and casts dtypes afterwards
for both kinds of rule.
"""

from __future__ import annotations

import functools

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .. import dtypes as _dtypes
from . import _saved

__all__ = ["Op", "OpNode", "apply", "TABLE", "numpy_names", "check_saveable", "Declared",
           "declare", "DECLARED", "exports"]

TABLE: dict[str, Op] = {}

OpNode = _ext_ops.OpNode
apply_op = _ext_ops.apply_op


class Op(_ext_ops.OpSpec):
    """A differentiable operation: a row of the op table.

    Parameters
    ----------
    name : str
        The op's name in the table (``"mul"``).
    node : str
        The backward node's name, as PyTorch names it (``"MulBackward0"``).
    forward : callable
        ``forward(*arrays, **attrs) -> ndarray`` (or a tuple for several outputs). Arrays are
        numpy arrays, or Python numbers for scalar operands.
    backward : callable or None
        ``backward(ctx, *grads) -> tuple`` with one gradient (a Tensor or None) per input.
        None marks an op that is not differentiable.
    saves : callable or None
        ``saves(needs_input_grad) -> (input indices to save, save the output?)``; None saves
        nothing. It must depend on ``needs_input_grad`` alone: the answer is remembered.
    dtype : callable or None
        ``dtype(*inputs, **attrs) -> gradviz dtype`` the inputs are converted to before
        ``forward``; ``promote`` and ``promote_float`` have fast paths (Note [Op fast paths]).
    view : bool
        The output is a view of input 0 (shares storage and version counter).
    quiet : bool
        Silence numpy's floating-point warnings (torch returns inf/nan silently). Views never
        compute, so they skip it.
    fast_backward : callable or None
        ``fast_backward(ctx, *grad_arrays) -> tuple`` of numpy arrays (or None): the same
        derivative as ``backward`` computed on arrays, used when the gradient needs no graph
        of its own (Note [Fast backward rules]). It reads saved values with ``ctx.data(i)``
        and ``ctx.output_data()``.
    kernel : int
        For add, sub, mul, div and neg only: the compiled kernel that computes the forward
        and the fast backward without calling Python (``gradviz_ext._ops``, Note [Compiled
        kernels]); the Python rules stay the definition and the fallback.
    saved : dict or None
        What PyTorch's node saves, under PyTorch's names: ``grad_fn._saved_<name>``
        (see ``ops/_saved.py``). Rows that share a node declare it once.
    fills_missing : bool
        ``backward`` and ``fast_backward`` take None for a missing output gradient and fill
        it in themselves, so the engine does not materialize zeros for the node (Note [Rules
        that fill missing gradients] in ``gradviz_ext/_ops.py``).
    """

    def __init__(self, name, node, forward, backward, saves=None, dtype=None, view=False,
                 quiet=True, fast_backward=None, kernel=_ext_ops.KERNEL_NONE, saved=None,
                 fills_missing=False):
        quiet = quiet and not view
        if name in TABLE:
            raise ValueError(f"op {name!r} is already registered")
        if dtype is None:
            rule = _ext_ops.DTYPE_NONE
        elif dtype is promote:
            rule = _ext_ops.DTYPE_PROMOTE
        elif dtype is promote_float:
            rule = _ext_ops.DTYPE_PROMOTE_FLOAT
        else:
            rule = _ext_ops.DTYPE_CUSTOM
        if fast_backward is not None and backward is None:
            raise ValueError(f"op {name!r}: a fast_backward needs the differentiable backward too")
        if saved is not None:
            if node in _saved.SAVED_NAMES:
                raise ValueError(f"op {name!r}: the saved names of {node} are already declared")
            _saved.SAVED_NAMES[node] = saved
        super().__init__(name, node, forward, backward, saves, dtype, rule, view, quiet,
                         fast_backward, kernel, fills_missing)
        TABLE[name] = self

    def __repr__(self):
        return f"Op({self.name!r}, {self.node!r})"


# ``apply(op, *inputs, **attrs)``: run ``op`` forward on ``inputs`` (Tensors or Python
# numbers) and record its node; compiled (gradviz_ext._ops), as every op goes through it.
apply = _ext_ops.apply


def check_saveable(tensor, *inputs):
    """PyTorch's error for an inference tensor that an op keeps for backward in its attributes
    (an index, a mask, a condition, a bound: not an input the engine saves), when the op is
    recorded because one of ``inputs`` (those whose gradient needs ``tensor``) requires grad:
    PyTorch saves it, and an inference tensor cannot be saved (Note [Inference tensors] in
    ``gradviz_ext/_engine.py``)."""
    if (tensor._version_counter.inference and _engine.is_grad_enabled()
            and any(_ext_ops.requires_grad(x) for x in inputs)):
        raise RuntimeError(_engine.INFERENCE_SAVED_MESSAGE)


def numpy_names(fn):
    """Accept numpy's ``axis=`` and ``keepdims=`` for ``dim=`` and ``keepdim=``, as PyTorch's
    argument parser does (``counts.sum(1, keepdims=True)``, ``torch.cat(xs, axis=1)``).
    Giving both names of one argument is a TypeError, as in PyTorch."""

    @functools.wraps(fn)
    def with_numpy_names(*args, **kwargs):
        if kwargs:
            for numpy_name, name in (("axis", "dim"), ("keepdims", "keepdim")):
                if numpy_name in kwargs:
                    if name in kwargs:
                        raise TypeError(
                            f"{fn.__name__}() got an unexpected keyword argument "
                            f"'{numpy_name}': {numpy_name}= is numpy's name for {name}=, "
                            f"give only one of them")
                    kwargs[name] = kwargs.pop(numpy_name)
        return fn(*args, **kwargs)

    return with_numpy_names


# ---- public declarations ------------------------------------------------------------------

# Note [Declared once]
# --------------------
# A public op function says, in a decorator on its own ``def``, everywhere it appears:
#
#     @declare(method=True, inplace=True, out=True)
#     def tanh(input):
#         return apply(TANH, input)
#
# is ``gradviz.tanh`` (in ``gradviz.__all__``, taking ``out=``), ``x.tanh()`` and ``x.tanh_()``.
# ``ops/__init__.py`` installs the Tensor methods and in-place methods from :data:`DECLARED`,
# ``gradviz/__init__.py`` binds the package's names and builds its ``__all__`` from it, and each
# op module ends with ``__all__ = exports(globals(), ...)`` (:func:`exports`), so no list
# elsewhere names the op. Static tools cannot run this code: ``gradviz/_op_exports.pyi``, written
# by ``scripts/generate_op_stubs.py`` and checked current by ``tests/ops/test_op_stubs.py``,
# lists the same names for type checkers and IDEs. What PyTorch's node saves is declared on the ``Op`` row
# (``saved=``, see ``ops/_saved.py``). ``tests/ops/test_public_api_snapshot.py``
# holds the public API these declarations produce, and ``tests/ops/test_every_op_vs_torch.py``
# requires a torch comparison for every row of the table.

class Declared:
    """Where one public op function appears (see :func:`declare`)."""

    __slots__ = ("function", "names", "hidden", "methods", "inplace", "out")

    def __init__(self, function, names, hidden, methods, inplace, out):
        self.function = function
        self.names = names  # gradviz.<name>, listed in gradviz.__all__
        self.hidden = hidden  # gradviz.<name>, left out of gradviz.__all__ (as torch does)
        self.methods = methods  # Tensor.<name>
        self.inplace = inplace  # Tensor.<name>: the in-place form, built from the function
        self.out = out  # gradviz.<name> takes out=

    def __repr__(self):
        return (f"Declared({self.function.__name__!r}, names={self.names}, methods={self.methods}, "
                f"inplace={self.inplace}, out={self.out})")


DECLARED: list[Declared] = []


def _names(value, default):
    if value is None or value is False:
        return ()
    if value is True:
        return (default,)
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def declare(*, name=True, hidden=(), method=None, inplace=None, out=False):
    """Declare a public op function where it is defined (Note [Declared once]).

    Parameters
    ----------
    name : bool, str or tuple of str
        Its names in the ``gradviz`` namespace and ``gradviz.__all__``: True for the function's
        own name, False for none (a Tensor method only).
    hidden : str or tuple of str
        Further ``gradviz`` names left out of ``__all__`` (``gradviz.concat``).
    method : bool, str or tuple of str
        Its Tensor method names: True for the function's own name.
    inplace : bool, str or tuple of str
        Its in-place Tensor methods (``x.tanh_()``), made from the function by
        ``ops/_inplace.py``: True for the function's name and ``_``.
    out : bool
        ``gradviz.<name>`` takes ``out=`` (``gradviz/_out.py``).
    """
    def register(function):
        own = function.__name__
        DECLARED.append(Declared(function, _names(name, own), _names(hidden, own),
                                 _names(method, own), _names(inplace, own + "_"), out))
        return function

    return register


def exports(namespace, *others):
    """An op module's ``__all__`` (Note [Declared once]), written as its last line:
    ``__all__ = exports(globals(), "sum_to")``.

    Parameters
    ----------
    namespace : dict
        The module's ``globals()``.
    *others : str
        Its public names that are not declared op functions: helpers other modules use
        (``sum_to``), ops that ``gradviz.ops`` has but the ``gradviz`` namespace does not
        (``gelu``), and aliases bound to another module's op.

    Returns
    -------
    list of str
        Each op function declared in the module under every ``gradviz`` name (``names`` and
        ``hidden``) the module binds to it, in the order of declaration, then ``others``.
    """
    module = namespace["__name__"]
    names = []
    for declared in DECLARED:
        if declared.function.__module__ != module:
            continue
        for name in (*declared.names, *declared.hidden):
            if namespace.get(name) is declared.function and name not in names:
                names.append(name)
    for name in others:
        if name not in namespace:
            raise NameError(f"{module}: exports() names {name!r}, which the module does not define")
        if name in names:
            raise ValueError(f"{module}: {name!r} is a declared op exported already; drop it from "
                             "exports()")
        names.append(name)
    return names


# ---- dtype rules ------------------------------------------------------------------------

def promote(*inputs, **attrs):
    return _dtypes.result_type(*inputs)


def promote_float(*inputs, **attrs):
    dtype = _dtypes.result_type(*inputs)
    return dtype if dtype.is_floating_point else _dtypes.get_default_dtype()


def saves_inputs(*indices, output=False):
    """A ``saves`` rule that always keeps the given inputs (and the output)."""
    chosen = tuple(indices)
    return lambda needs: (chosen, output)


def saves_output(needs):
    return (), True


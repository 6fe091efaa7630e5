# cython: language_level=3
"""Custom Function nodes: the C half of a Function's ``ctx``, and ``Function.apply``'s common
path.

``gradviz.autograd.function`` owns the contract (``FunctionCtx``'s methods, every check and
error message, the general ``apply``). This module holds what runs on every call: the node
type ``FunctionNode`` (the base of ``BackwardCFunction``, so a ``ctx`` keeps its fields in C),
its ``_apply_grads`` (the user's ``backward`` and the check of what it returned), and
``apply_function``, which records a call of ``Function.apply`` in the common case. Like the
other modules here it is Cython pure-Python mode; ``_function.pxd`` compiles it.

Note [Custom Function fast path]
--------------------------------
``Function.apply`` takes ``apply_function`` when no rule beyond the basic contract can apply
before forward runs: no keyword arguments, no ``setup_context``, no ``vmap`` or dual level
active, no forward observer (``gradviz.debug.capture`` copies the inputs). After forward, an
output that is one floating-point tensor, with nothing marked dirty or non-differentiable and
no declared gradient dtype, is wrapped here; anything else goes to the general
``_wrap_outputs`` (installed by ``install``). In ``backward``, a result with exactly one
gradient per forward argument, all tensors or ``None``, is checked here; anything else goes to
the general ``_check_result``, which names the error. Both paths give the same results: the
function tests run every case through both.
"""

import cython

from gradviz_ext import _ops
from gradviz_ext._engine import BACKWARD_TWICE_MESSAGE, VIEW_CUSTOM_FUNCTION

if not cython.compiled:  # compiled, these come from the cimport in _function.pxd
    from gradviz_ext._engine import (InputMeta, Node, SavedTensor, TensorBase, current_graph_task,
                                     forward_observer, gradient_edge, init_node,
                                     is_grad_enabled, save_tensor, set_grad_enabled_flag)
    from gradviz_ext._ops import _meta as _output_meta

    def gradviz_type_version(type_):
        return 0  # interpreted: no version tags, so backward is looked up every time

# Installed by gradviz.autograd.function at import (the general path, above this layer)
_dtypes_by_numpy = {}
_wrap_outputs = None
_wrap_unchanged_input = None
_general_apply = None
_transform_stack = []
_base_setup_context = None

# Backward resolution per node class: type -> (backward, vjp, the one to call, the node
# class's version tag, the Function class, its version tag)
_resolved_backward = {}
_FIRST_POSITION = (0,)
_NEEDS_ONE = (True,)
_NEEDS_NONE = (False,)


def install(dtypes_by_numpy, wrap_outputs, wrap_unchanged_input, general_apply, transform_stack,
            base_setup_context):
    """Give this module the numpy-to-gradviz dtype table and the general path's pieces:
    ``general_apply(cls, args, kwargs)``, the (mutated in place) list of active
    ``gradviz.func`` transforms, and ``Function.setup_context`` (the "not overridden" marker)."""
    global _dtypes_by_numpy, _wrap_outputs, _wrap_unchanged_input, _general_apply
    global _transform_stack, _base_setup_context
    _dtypes_by_numpy = dtypes_by_numpy
    _wrap_outputs = wrap_outputs
    _wrap_unchanged_input = wrap_unchanged_input
    _general_apply = general_apply
    _transform_stack = transform_stack
    _base_setup_context = base_setup_context


def apply(cls, *args, **kwargs):
    """``Function.apply``: the common path here (Note [Custom Function fast path]), anything
    else through the general one."""
    if (kwargs or _transform_stack or _ops._forward_ad is not None
            or forward_observer() is not None or cls.setup_context is not _base_setup_context):
        return _general_apply(cls, args, kwargs)
    return apply_function(cls, args)


# a chain of custom nodes is freed without deep C recursion (Note [Inline edges])
@cython.trashcan(True)
@cython.cclass
class FunctionNode(Node):
    """The fields every custom Function node carries, and its ``_apply_grads``.

    ``BackwardCFunction`` (gradviz.autograd.function) subclasses this together with
    ``FunctionCtx``; its instances are both the ``ctx`` of forward and the graph node.
    """

    def __init__(self):
        _init_fields(self)

    def save_for_backward(self, *tensors):
        """Save tensors (or ``None``) for ``backward``; read them back as ``ctx.saved_tensors``.

        Saved tensors are version-checked: modifying one in place before backward is an error.
        They are freed after backward unless the graph is retained. Active
        ``saved_tensors_hooks`` pack each non-``None`` tensor once, here.
        """
        index: cython.Py_ssize_t
        for index in range(len(tensors)):
            value = tensors[index]
            if value is not None and not isinstance(value, TensorBase):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{index} is of type {type(value).__name__}"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, checked for in-place modification.

        Inside ``jvp``: the tensors given to ``save_for_forward`` (an empty tuple if none).
        """
        if self._in_jvp:
            return tuple(getattr(self, "saved_for_forward", ()))
        saved_list = self._saved
        if saved_list is None:
            if self._released:
                raise RuntimeError(BACKWARD_TWICE_MESSAGE)
            return ()
        n: cython.Py_ssize_t = len(saved_list)
        i: cython.Py_ssize_t
        tensors = [None] * n
        for i in range(n):
            saved = saved_list[i]
            if saved is not None:
                entry: SavedTensor = saved
                tensors[i] = entry.unpack(self)
        return tuple(tensors)

    def _kind(self):
        return "custom"

    def _materializes_grads(self):
        return self.materialize_grads

    def saved_tensor_count(self):
        if self._saved is None:
            return 0, 0
        count = 0
        nbytes = 0
        for saved in self._saved:
            if saved is not None:
                count += 1
                nbytes += saved.nbytes()
        return count, nbytes

    def release_variables(self):
        entry: SavedTensor
        if self._saved is not None:
            for saved in self._saved:
                if saved is not None:
                    entry = saved
                    entry.release()
            self._saved = None
        # a node that saved nothing may be backpropagated again (contract rule 9), but reading
        # ctx.saved_tensors after the release raises, as in PyTorch
        self._released = True

    def _apply_grads(self, grads):
        backward = _backward_of(self)
        if self.materialize_grads and self._output_grad_dtypes is not None:
            grads = self._materialize_uncast_slots(list(grads))
        self._in_backward = True
        try:
            if len(grads) == 1:  # one output, the common case: no argument tuple to build
                result = backward(self, grads[0])
            else:
                result = backward(self, *grads)
        finally:
            self._in_backward = False
            task = current_graph_task()
            if task is not None and task._exposed_to is self:
                task.end_input_buffers(self)
        checked = _check_result(self, result)
        if checked is None:
            return self._check_result(result)  # the general check names what is wrong
        return checked


@cython.cfunc
def _init_fields(node: FunctionNode):
    init_node(node, (), ())
    node.materialize_grads = True
    node.needs_input_grad = ()
    node._to_save = None
    node._saved = None
    node._dirty_tensors = ()
    node._non_differentiable = ()
    node._output_grad_dtypes = None
    node._output_dtypes = ()
    node._tensor_input_positions = ()
    node._num_forward_inputs = 0
    node._forward_constants = None
    node._forward_inputs = None
    node._forward_versions = None
    node._in_backward = False


# Node classes (``<Fn>Backward``) whose ``__init__`` is FunctionNode's, so a ctx can be made
# without calling the class: its tp_new, then the fields set in C.
_plain_init = {}


@cython.cfunc
def _new_ctx(backward_cls):
    """``backward_cls()``, without the Python call when the class keeps FunctionNode's
    ``__init__``."""
    plain = _plain_init.get(backward_cls)
    if plain is None:
        plain = backward_cls.__init__ is FunctionNode.__init__
        _plain_init[backward_cls] = plain
    if not cython.compiled or plain is False:
        return backward_cls()
    ctx = gradviz_new_instance(backward_cls)
    _init_fields(ctx)
    return ctx


@cython.cfunc
def _backward_of(node: FunctionNode):
    """The user's ``backward`` (or ``vjp``); resolved once per class while neither changes."""
    node_class = type(node)
    resolved = _resolved_backward.get(node_class)
    if resolved is not None:
        entry: tuple = resolved
        # unchanged classes (CPython's type version tags: any assignment to a class attribute,
        # here or in a base, gives a new one) resolve to the same method without a lookup
        forward_class = entry[4]
        version: cython.uint = gradviz_type_version(node_class)
        if (version != 0 and version == entry[3]
                and gradviz_type_version(forward_class) == entry[5]):
            return entry[2]
    forward_class = node._forward_cls
    backward = forward_class.backward
    vjp = forward_class.vjp
    if resolved is not None and resolved[0] is backward and resolved[1] is vjp:
        chosen = resolved[2]
    else:
        chosen = node._backward_function()  # raises PyTorch's errors for neither / both
    _resolved_backward[node_class] = (backward, vjp, chosen, gradviz_type_version(node_class),
                                      forward_class, gradviz_type_version(forward_class))
    return chosen


@cython.cfunc
def _check_result(node: FunctionNode, result):
    """One gradient per edge for the common result (Note [Custom Function fast path]), or
    None when the general check must decide."""
    if not isinstance(result, tuple):
        result = (result,)
    expected: cython.Py_ssize_t = node._num_forward_inputs
    if len(result) != expected or len(node._tensor_input_positions) != expected:
        return None
    grads = [None] * expected
    i: cython.Py_ssize_t
    for i in range(expected):
        value = result[i]
        if value is None:
            continue
        if not isinstance(value, TensorBase):
            return None
        # kept for an input that needs no gradient too: post-hooks and anomaly mode see it,
        # as in PyTorch; its edge is (None, 0), so the engine passes it to nobody
        grads[i] = value
    return grads


_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)

# Note [Kept forward inputs]
# --------------------------
# The gradient doctor checks a custom Function by re-running its forward and backward on the
# arguments forward saw. So every recorded node keeps, by default, a reference to its
# argument tuple (``_forward_inputs``: the tensors themselves, not copies, and the non-tensor
# arguments) and the version of each tensor argument when forward started
# (``_forward_versions``, one per entry of ``_tensor_input_positions``). A tensor whose
# version has moved since was modified in place, and the doctor says so instead of checking
# values forward never saw. The references outlive backward (the doctor is asked after
# Continue too): they cost the memory of the input tensors nothing else keeps alive, for as
# long as the graph lives; ``set_keep_forward_inputs(False)`` (public as
# ``gradviz.debug.keep_forward_inputs``) turns this off. A Function that marks an input
# dirty keeps nothing: that input now has this node as its ``grad_fn`` (a reference cycle),
# and the values forward saw are gone anyway.
_keep_forward_inputs = True


def set_keep_forward_inputs(keep):
    """Whether custom Function nodes recorded from now on keep their forward arguments
    (Note [Kept forward inputs]); returns the previous setting."""
    global _keep_forward_inputs
    previous: cython.bint = _keep_forward_inputs
    _keep_forward_inputs = bool(keep)
    return bool(previous)


def keeps_forward_inputs():
    """The current setting of :func:`set_keep_forward_inputs`."""
    return bool(_keep_forward_inputs)


def forward_versions(args, positions):
    """The version of each tensor argument at ``positions`` (Note [Kept forward inputs])."""
    t: TensorBase
    versions = []
    for position in positions:
        t = args[position]
        versions.append(t._version_counter.value)
    return tuple(versions)


def forward_constants(args):
    """``((position, value), ...)`` for the arguments of a custom Function's forward that are
    plain constants (None, numbers, strings, and tuples of them), or None if there are none;
    kept on the node so the gradient doctor can re-run the Function without
    ``gradviz.debug.capture()``. Other non-tensor arguments (objects, arrays) are not kept:
    holding them would keep them alive as long as the graph."""
    constants = []
    for position in range(len(args)):
        value = args[position]
        if isinstance(value, _CONSTANT_TYPES) or (
                type(value) is tuple and all(isinstance(v, _CONSTANT_TYPES) for v in value)):
            constants.append((position, value))
    return tuple(constants) if constants else None


def apply_function(cls, args: tuple):
    """``cls.apply(*args)`` in the common case (Note [Custom Function fast path])."""
    ctx = _new_ctx(cls._backward_cls)
    node: FunctionNode = ctx
    grad_enabled: cython.bint = is_grad_enabled()
    n: cython.Py_ssize_t = len(args)
    i: cython.Py_ssize_t
    t: TensorBase
    executable: cython.bint = False
    arg = args[0] if n == 1 else None
    if n == 1 and isinstance(arg, TensorBase):  # one tensor argument: no lists to build
        t = arg
        node._tensor_input_positions = _FIRST_POSITION
        if (t._requires_grad or t.grad_fn is not None  # with grad mode off too, as PyTorch
                or (t._base is not None and _ops.requires_grad(t))):  # a no_grad view
            node.needs_input_grad = _NEEDS_ONE
            if grad_enabled:
                executable = True
                node.next_functions = (gradient_edge(t),)
                if _keep_forward_inputs:  # Note [Kept forward inputs]
                    node._forward_inputs = args
                    node._forward_versions = (t._version_counter.value,)
        else:
            node.needs_input_grad = _NEEDS_NONE
    else:
        needs = [False] * n
        positions = []
        edges = []
        for i in range(n):
            arg = args[i]
            if isinstance(arg, TensorBase):
                positions.append(i)
                t = arg
                if (t._requires_grad or t.grad_fn is not None
                        or (t._base is not None and _ops.requires_grad(t))):
                    needs[i] = True
                if needs[i] and grad_enabled:
                    executable = True
                    edges.append(gradient_edge(t))
                else:
                    edges.append((None, 0))
        node.needs_input_grad = tuple(needs)
        node._tensor_input_positions = tuple(positions)
        if executable:
            node.next_functions = tuple(edges)
            if len(positions) != n:
                node._forward_constants = forward_constants(args)
            if _keep_forward_inputs:  # Note [Kept forward inputs]
                node._forward_inputs = args
                node._forward_versions = forward_versions(args, node._tensor_input_positions)
    node._num_forward_inputs = n

    previous = set_grad_enabled_flag(False)
    try:
        outputs = cls.forward(ctx, *args)
    finally:
        set_grad_enabled_flag(previous)

    if (isinstance(outputs, TensorBase) and not node._dirty_tensors
            and not node._non_differentiable and node._output_grad_dtypes is None):
        t = outputs
        if t._data.dtype.kind == "f":
            return _wrap_single(node, args, t, executable)
    return _wrap_outputs(ctx, args, outputs, executable)


@cython.cfunc
def _wrap_single(node: FunctionNode, args: tuple, raw: TensorBase, executable: cython.bint):
    """One floating-point tensor output, nothing marked: Note [Wrapping outputs]."""
    out: TensorBase = raw
    for arg in args:
        if arg is raw:  # an input returned unchanged becomes a view of it (contract rule 7)
            out = _wrap_unchanged_input(raw, executable)
            break
    else:
        if raw._base is not None:  # a view made in forward cannot be modified in place
            raw._view_kind = VIEW_CUSTOM_FUNCTION
    if not executable:
        if out is raw and raw._base is None and (raw._requires_grad or raw.grad_fn is not None):
            # history made inside forward (under enable_grad) on an output no node records:
            # detached in place, as PyTorch's detach_() (Note [Wrapping outputs])
            raw.grad_fn = None
            raw._requires_grad = False
            raw._output_nr = 0
        node._to_save = None
        return out
    meta: InputMeta = _output_meta(out)  # shared with op nodes (never changed)
    node._input_metadata = (meta,)
    node._output_dtypes = (meta.dtype,)
    out.grad_fn = node
    out._output_nr = 0
    out._requires_grad = False
    to_save = node._to_save
    if to_save is not None:
        node._to_save = None
        saved = []
        for tensor in to_save:
            if tensor is None:
                saved.append(None)
            elif tensor is raw:
                saved.append(save_tensor(out, True))  # an output saved by its own node
            else:
                saved.append(save_tensor(tensor, False))
        node._saved = saved
    observer = forward_observer()
    if observer is not None:
        observer.node_created(node)
    return out

"""``Parameter`` and ``Module``: the registration machinery of ``torch.nn``.

A :class:`Module` keeps its parameters, buffers and submodules in three ordered dicts, filled
by ``__setattr__`` exactly as PyTorch does, so ``parameters()`` yields them in the same order
as the equivalent torch module (registration order, depth first).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext._hooks import HookList, RemovableHandle

from .. import dtypes as _dtypes
from .._tensor import Tensor, _format, _to_array, check_device, device
from ..ops._creation import empty_like as _empty_like
from . import _hooks
from ._state_dict import StateDictMixin, _IncompatibleKeys  # noqa: F401  (state_dict and its hooks)

_push_scope = _engine.push_scope
_set_current_scope = _engine.set_current_scope

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "Module",
           "register_module_forward_pre_hook", "register_module_forward_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook"]


# hooks of every module (torch.nn.modules.module.register_module_*_hook): they run before each
# module's own hooks of the same kind
_global_forward_pre_hooks = HookList()
_global_forward_hooks = HookList()
_global_backward_hooks = HookList()
_global_backward_pre_hooks = HookList()


def register_module_forward_pre_hook(hook):
    """Call ``hook(module, args)`` before the forward of every module (before its own pre-hooks);
    a non-None result replaces the positional arguments."""
    _global_forward_pre_hooks.append(_hooks.ModuleHook(hook, False))
    return RemovableHandle(_global_forward_pre_hooks, _global_forward_pre_hooks[-1])


def register_module_forward_hook(hook, *, with_kwargs: bool = False, always_call: bool = False):
    """Call ``hook(module, args, output)`` after the forward of every module (before its own
    forward hooks); a non-None result replaces the output."""
    _global_forward_hooks.append(_hooks.ModuleHook(hook, with_kwargs, always_call))
    return RemovableHandle(_global_forward_hooks, _global_forward_hooks[-1])


def register_module_full_backward_hook(hook):
    """``Module.register_full_backward_hook`` for every module (run before each module's own)."""
    _global_backward_hooks.append(hook)
    return RemovableHandle(_global_backward_hooks, hook)


def register_module_full_backward_pre_hook(hook):
    """``Module.register_full_backward_pre_hook`` for every module (run before each module's
    own)."""
    _global_backward_pre_hooks.append(hook)
    return RemovableHandle(_global_backward_pre_hooks, hook)


class Parameter(Tensor):
    """A leaf tensor that a :class:`Module` registers as a parameter (``requires_grad=True``).

    It shares storage with ``data``, like ``torch.nn.Parameter``.

    Examples
    --------
    >>> import gradviz as torch
    >>> p = torch.nn.Parameter(torch.zeros(2))
    >>> p
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    >>> isinstance(p, torch.Tensor), p.is_leaf
    (True, True)
    """

    def __init__(self, data=None, requires_grad: bool = True):
        if isinstance(data, Tensor):
            array = data._data
        else:
            array = _to_array(data)
        _engine.TensorBase.__init__(self, array, False)
        if isinstance(data, Tensor):  # the data's storage: an inference tensor's stays one
            self._version_counter.inference = data._version_counter.inference
        if requires_grad:
            self._set_requires_grad(True, "Only Tensors of floating point and complex dtype")

    def __repr__(self) -> str:
        return "Parameter containing:\n" + _format(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data.copy(), self._requires_grad))




class _BufferMeta(type(Tensor)):
    """``isinstance(t, Buffer)`` for the plain tensors :class:`Buffer` returns, as torch's."""

    def __instancecheck__(cls, instance):
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor marked to become a buffer when assigned to a :class:`Module` attribute
    (``self.running = nn.Buffer(torch.zeros(3))`` is ``register_buffer``), saved in
    ``state_dict`` unless ``persistent=False``. Like ``torch.nn.Buffer``, it returns a plain
    tensor (detached, keeping ``requires_grad``) carrying the mark.

    Examples
    --------
    >>> import gradviz as torch
    >>> class Counter(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.count = torch.nn.Buffer(torch.zeros(1))
    ...         self.scratch = torch.nn.Buffer(torch.zeros(2), persistent=False)
    >>> m = Counter()
    >>> list(m.state_dict()), [name for name, _ in m.named_buffers()]
    (['count'], ['count', 'scratch'])
    """

    def __new__(cls, data=None, *, persistent: bool = True):
        if data is None:
            data = Tensor(np.empty(0, dtype=_dtypes.get_default_dtype().numpy))
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): data must be a Tensor, got {_typename(data)}")
        marked = data.detach().requires_grad_(data.requires_grad)
        marked.persistent = persistent
        marked._is_buffer = True
        return marked
_UNINITIALIZED_USE = (
    "Attempted to use an uninitialized parameter in {}. This error happens when you are using a "
    "`LazyModule` or explicitly manipulating `torch.nn.parameter.UninitializedParameter` objects. "
    "When using LazyModules Call `forward` with a dummy batch to initialize the parameters before "
    "calling torch functions")


class _UninitializedShape:
    """What an uninitialized parameter or buffer refuses until ``materialize(shape)``."""

    _becomes: type

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually "
            "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
            "initialized one. Call `forward` to initialize the parameters before accessing their "
            "attributes.")

    def size(self, dim=None):
        return self.shape

    def numel(self):
        raise ValueError(_UNINITIALIZED_USE.format("<method 'numel' of 'torch._C.TensorBase' objects>"))

    def materialize(self, shape, device=None, dtype=None):
        """Give the tensor ``shape`` (uninitialized values) and turn it into a plain
        :class:`Parameter` (or tensor, for a buffer) in place."""
        dtype = self._data.dtype if dtype is None else _dtypes.as_dtype(dtype).numpy
        requires_grad = self._requires_grad
        _engine.TensorBase.__init__(self, np.empty(tuple(shape), dtype=dtype), False)
        self.__class__ = self._becomes
        if requires_grad:
            self._set_requires_grad(True, "Only Tensors of floating point and complex dtype")


def _empty_of(dtype):
    return np.empty((0,), dtype=_dtypes.as_dtype(dtype or _dtypes.get_default_dtype()).numpy)


class UninitializedParameter(_UninitializedShape, Parameter):
    """The parameter of a lazy module (``nn.LazyLinear``) before its first forward: its shape
    is not known yet, so reading it is an error; ``materialize(shape)`` turns it into a
    :class:`Parameter` in place (an optimizer that already holds it sees the new one)."""

    _becomes = Parameter

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        check_device(device)
        super().__init__(_empty_of(dtype), requires_grad)


class UninitializedBuffer(_UninitializedShape, Tensor):
    """A lazy module's buffer (``running_mean`` of ``nn.LazyBatchNorm2d``) before its first
    forward; ``materialize(shape)`` turns it into a plain tensor in place."""

    _becomes = Tensor

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        check_device(device)
        _engine.TensorBase.__init__(self, _empty_of(dtype), False)
        if requires_grad:
            self._set_requires_grad(True, "Only Tensors of floating point and complex dtype")


def _rebuild_parameter(array, requires_grad):
    return Parameter(array, requires_grad=requires_grad)


def _typename(obj) -> str:
    """``torch.typename``: a tensor's type string (``gradviz.FloatTensor``), else the
    qualified name of the object's type."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    module = cls.__module__ or ""
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


class Module(StateDictMixin):
    """Base class of every layer: ``__setattr__`` registers parameters and submodules.

    Examples
    --------
    >>> import gradviz as torch
    >>> class Net(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = torch.nn.Linear(3, 2)
    ...         self.scale = torch.nn.Parameter(torch.ones(1))
    ...     def forward(self, x):
    ...         return self.fc(x) * self.scale
    >>> [name for name, _ in Net().named_parameters()]
    ['scale', 'fc.weight', 'fc.bias']
    """

    training: bool
    _version: int = 1  # saved in state_dict's _metadata; see _upgrade_state_dict

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        # Note [Module paths] (gradviz/autograd/_scopes.py): the nodes this call creates keep
        # a frame naming it; one C call, names are looked up only when a debugger reads them
        previous = _push_scope(self)
        try:
            d = self.__dict__
            pre_hooks = d.get("_forward_pre_hooks")
            hooks = d.get("_forward_hooks")
            backward_hooks = d.get("_backward_hooks")
            backward_pre_hooks = d.get("_backward_pre_hooks")
            if not (pre_hooks or hooks or backward_hooks or backward_pre_hooks
                    or _global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                    or _global_backward_pre_hooks):
                return self.forward(*args, **kwargs)
            pre_hooks = [*_global_forward_pre_hooks, *(pre_hooks or ())]
            hooks = [*_global_forward_hooks, *(hooks or ())]
            backward_hooks = [*_global_backward_hooks, *(backward_hooks or ())]
            backward_pre_hooks = [*_global_backward_pre_hooks, *(backward_pre_hooks or ())]
            result = None
            called = set()
            try:
                for hook in list(pre_hooks or ()):
                    if hook.with_kwargs:
                        new = hook.fn(self, args, kwargs)
                        if new is not None:
                            if not (isinstance(new, tuple) and len(new) == 2):
                                raise RuntimeError(
                                    "forward pre-hook must return None or a tuple of "
                                    f"(new_args, new_kwargs), but got {new}.")
                            args, kwargs = new
                    else:
                        new = hook.fn(self, args)
                        if new is not None:
                            args = new if isinstance(new, tuple) else (new,)
                bw_hook = None
                if backward_hooks or backward_pre_hooks:
                    bw_hook = _hooks.BackwardHook(self, list(backward_hooks or ()),
                                                  list(backward_pre_hooks or ()))
                    args = bw_hook.setup_input_hook(args)
                result = self.forward(*args, **kwargs)
                for hook in list(hooks or ()):
                    called.add(id(hook))
                    new = (hook.fn(self, args, kwargs, result) if hook.with_kwargs
                           else hook.fn(self, args, result))
                    if new is not None:
                        result = new
                if bw_hook is not None:
                    _hooks.warn_if_not_tensor_output(result)
                    result = bw_hook.setup_output_hook(result)
                return result
            except Exception:
                # forward hooks registered with always_call run even when forward raised
                for hook in list(hooks or ()):
                    if hook.always_call and id(hook) not in called:
                        try:
                            new = (hook.fn(self, args, kwargs, result) if hook.with_kwargs
                                   else hook.fn(self, args, result))
                            if new is not None:
                                result = new
                        except Exception as exc:  # noqa: BLE001 - torch silences it the same way
                            warnings.warn("module forward hook with ``always_call=True`` raised an "
                                          "exception that was silenced as another error was raised "
                                          f"in forward: {exc}", stacklevel=2)
                raise
        finally:
            _set_current_scope(previous)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """Call ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs``) after every forward; a non-None result replaces the output.
        ``prepend`` runs it before the hooks already registered; ``always_call`` runs it even
        when forward raises. Returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("_forward_hooks", _hooks.ModuleHook(hook, with_kwargs, always_call),
                              prepend)

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False):
        """Call ``hook(module, args)`` before every forward; a non-None result replaces the
        positional arguments. With ``with_kwargs``, ``hook(module, args, kwargs)`` may return
        ``(new_args, new_kwargs)``."""
        return self._add_hook("_forward_pre_hooks", _hooks.ModuleHook(hook, with_kwargs), prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients with respect to the
        module's inputs are computed; a non-None result (a tuple as long as ``grad_input``)
        replaces ``grad_input``. ``grad_input`` and ``grad_output`` have one entry per
        positional argument and output, ``None`` for non-tensors (Note [Module backward hooks]
        in ``_hooks.py``). Tensor arguments and outputs pass through a
        ``BackwardHookFunctionBackward`` node, as in PyTorch."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_output)`` when the gradients with respect to the module's
        outputs arrive; a non-None result (a tuple as long as ``grad_output``) replaces them."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_backward_hook(self, hook):
        raise NotImplementedError(
            "gradviz does not implement Module.register_backward_hook (deprecated in PyTorch: "
            "its grad_input depends on the last operation of forward); use "
            "register_full_backward_hook(hook), which calls hook(module, grad_input, "
            "grad_output) with the gradients of the module's inputs and outputs")

    def _add_hook(self, store, hook, prepend=False):
        hooks = self.__dict__.get(store)
        if hooks is None:
            hooks = HookList()
            object.__setattr__(self, store, hooks)
        if prepend:
            hooks.insert(0, hook)
        else:
            hooks.append(hook)
        return RemovableHandle(hooks, hook)

    # ---- registration ----------------------------------------------------------------
    def _check_init(self, what="parameters"):
        if "_parameters" not in self.__dict__:
            # torch's wording: "parameter" (register_parameter), "parameters" (attribute
            # assignment), "buffer", "module"
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def _check_name(self, kind: str, name, store) -> None:
        """torch's checks of a new parameter/buffer/module name (``kind``)."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if kind == "module":
            if hasattr(self, name) and name not in store:
                raise KeyError(f"attribute '{name}' already exists")
            if "." in name:
                raise KeyError(f'module name can\'t contain ".", got: {name}')
            if name == "":
                raise KeyError('module name can\'t be empty string ""')
            return
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in store:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param) -> None:
        self._check_init("parameter")
        self._check_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(gradviz.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register ``tensor`` as a buffer: moved by ``to()``, listed by ``buffers()``, and
        saved in ``state_dict`` unless ``persistent=False``."""
        self._check_init("buffer")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(gradviz Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module) -> None:
        self._check_init("module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name("module", name, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init()
            self.__dict__.pop(name, None)
            for store in (self._buffers, self._modules):
                store.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(gradviz.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self._check_init("module")
            self.__dict__.pop(name, None)
            for store in (self._parameters, self._buffers):
                store.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            self.add_module(name, value)
        elif "_modules" in self.__dict__ and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(gradviz.nn.Module or None expected)")
            self._modules[name] = None
        elif isinstance(value, Buffer):
            self.register_buffer(name, value, value.persistent)
        elif "_buffers" in self.__dict__ and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(gradviz.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        # only called when normal lookup fails
        for store in ("_parameters", "_buffers", "_modules"):
            values = self.__dict__.get(store)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            values = self.__dict__.get(store)
            if values is not None and name in values:
                del values[name]
                if store == "_buffers":
                    self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        # as PyTorch's: the class's names, the instance's, and the parameters, submodules and
        # buffers registered under it (``"fc" in dir(net)``, tab completion)
        keys = [*dir(type(self)), *self.__dict__, *self._parameters, *self._modules,
                *self._buffers]
        return sorted(key for key in keys if not key[0].isdigit())

    def _get_name(self) -> str:
        return type(self).__name__

    def get_submodule(self, target: str):
        """The submodule at the dotted path ``target`` (``""`` is this module)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module, strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target``, whose parent must exist; with ``strict``,
        the name must already be a submodule there."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        parent_path, _, name = target.rpartition(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str):
        """The parameter at the dotted path ``target``."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str):
        """The buffer at the dotted path ``target``."""
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(mod, buffer_name)
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

    # ---- traversal -------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if self in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or (remove_duplicate and value in seen):
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ---------------------------------------------------------
    def train(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None by default, as in PyTorch 2)."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ---- device and dtype --------------------------------------------------------------
    def to(self, *args, **kwargs):
        """Move to a device (the CPU is the only one) and/or convert floating-point parameters
        and buffers to a dtype, in place (the ``Parameter`` objects stay the same)."""
        dtype = kwargs.pop("dtype", None)
        check_device(kwargs.pop("device", None))
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, (str, device)):
                check_device(arg)
            else:
                dtype = _dtypes.as_dtype(arg)
        if dtype is not None:
            dtype = _dtypes.as_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                                f"got desired dtype={dtype}")
            self._apply_to_floats(dtype)
        return self

    def _apply(self, fn, recurse: bool = True):
        """Replace every parameter's and buffer's data (and each gradient) by ``fn`` of it, as
        PyTorch's ``Module._apply``: a ``Parameter`` stays the same object, a buffer is replaced."""
        for module in (self.modules() if recurse else (self,)):
            for param in module._parameters.values():
                if param is None:
                    continue
                data = fn(param.data)
                if param.requires_grad and not data.dtype.is_floating_point:
                    raise RuntimeError("data set to a tensor that requires gradients must be "
                                       "floating point or complex dtype")
                param.data = data
                if param.grad is not None:
                    param.grad = fn(param.grad)
            for name, buffer in module._buffers.items():
                if buffer is not None:
                    module._buffers[name] = fn(buffer)
        return self

    def type(self, dst_type):
        """Convert every parameter and buffer, integer ones included, to ``dst_type`` (a dtype
        or a type name such as ``"torch.DoubleTensor"``), in place; returns ``self``."""
        return self._apply(lambda t: t.type(dst_type))

    def to_empty(self, *, device, recurse: bool = True):
        """New, uninitialized memory for every parameter and buffer, of the same shapes and
        dtypes (the values are not kept: load or initialize them afterwards). ``device`` can
        only be the CPU."""
        check_device(device)
        return self._apply(_empty_like, recurse=recurse)

    def share_memory(self):
        """``share_memory_()`` on every parameter, buffer and gradient; returns ``self``."""
        return self._apply(lambda t: t.share_memory_())

    def _apply_to_floats(self, dtype):
        for module in self.modules():
            for store in (module._parameters, module._buffers):
                for tensor in store.values():
                    if tensor is None or not tensor.dtype.is_floating_point:
                        continue
                    tensor.data = tensor.data.to(dtype)
                    if tensor.grad is not None:
                        tensor.grad = tensor.grad.to(dtype)

    def cpu(self):
        return self

    def cuda(self, device=None):
        check_device("cuda")
        return self

    def float(self):
        self._apply_to_floats(_dtypes.float32)
        return self

    def double(self):
        self._apply_to_floats(_dtypes.float64)
        return self

    def half(self):
        self._apply_to_floats(_dtypes.float16)
        return self

    # ---- printing --------------------------------------------------------------------
    def compile(self, *args, **kwargs) -> None:
        """``torch.nn.Module.compile``: gradviz runs every module eagerly (``gradviz.compile``
        returns what it is given), so calls stay as they are."""

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        main = type(self).__name__ + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _zero_grad(p, set_to_none: bool) -> None:
    grad = p.grad
    if grad is None:
        return
    if set_to_none:
        p.grad = None
        return
    if grad.grad_fn is not None:
        grad.detach_()
    else:
        grad.requires_grad_(False)
    grad.zero_()

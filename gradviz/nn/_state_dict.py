"""``Module.state_dict`` / ``Module.load_state_dict`` and their hooks, as PyTorch runs them.

Note [State dict walk and hooks]
--------------------------------
``state_dict()`` visits each module in turn: its pre-hooks ``hook(module, prefix,
keep_vars)``, then ``_save_to_state_dict`` (its own parameters and persistent buffers), then its
children, then its post-hooks ``hook(module, state_dict, prefix, local_metadata)``. A post-hook
registered with the private ``_register_state_dict_hook`` may return a new dict that replaces
the result; one registered with ``register_state_dict_post_hook`` must return None.

A module that overrides ``get_extra_state``/``set_extra_state`` saves and loads one more entry,
``<prefix>_extra_state``.

``load_state_dict()`` visits each module with the entries under its prefix: its
``_load_from_state_dict`` runs the load pre-hooks ``hook(module, state_dict, prefix,
local_metadata, strict, missing_keys, unexpected_keys, error_msgs)`` (without ``module`` for the
private ``_register_load_state_dict_pre_hook`` unless ``with_module=True``), which may edit the
dict and the lists in place, then copies its own entries; its children follow (with the
entries their parent's hooks left); then its post-hooks ``hook(module, incompatible_keys)``
run, which may edit the key lists in place and must return None. Only after the walk do
``strict`` and the collected errors raise. ``_upgrade_state_dict`` (gradviz's hook for a module
whose checkpoint format changed, PyTorch's ``_load_from_state_dict`` overrides) runs first.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from gradviz_ext._hooks import HookList, RemovableHandle

from .._tensor import Tensor
from ..autograd import no_grad

__all__ = ["StateDictMixin"]

_EXTRA_STATE = "_extra_state"  # the key of get_extra_state()'s value, after the module's prefix


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and did not expect."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class _StateDictHook:
    """A registered hook and how it is called: ``public`` state-dict post-hooks must return
    None; ``with_module`` load pre-hooks get the module first."""

    __slots__ = ("fn", "public", "with_module")

    def __init__(self, fn, public=False, with_module=False):
        self.fn = fn
        self.public = public
        self.with_module = with_module


def _hooks_of(module, name):
    """The module's list of hooks ``name``, made on first use (modules built before these hooks
    existed, or unpickled ones, have none)."""
    hooks = module.__dict__.get(name)
    if hooks is None:
        hooks = HookList()
        object.__setattr__(module, name, hooks)
    return hooks


def _register(module, name, record):
    hooks = _hooks_of(module, name)
    hooks.append(record)
    return RemovableHandle(hooks, record)


def _check_callable(hook):
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")


class StateDictMixin:
    """The state-dict half of ``Module`` (Note [State dict walk and hooks])."""

    # ---- registering hooks ----------------------------------------------------------------
    def register_state_dict_pre_hook(self, hook):
        """Call ``hook(module, prefix, keep_vars)`` before ``state_dict()`` saves this
        module's entries. Returns a handle whose ``remove()`` unregisters it."""
        _check_callable(hook)
        return _register(self, "_state_dict_pre_hooks", _StateDictHook(hook))

    def register_state_dict_post_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict()``
        saved this module and its children; it may edit ``state_dict`` in place and must
        return None. Returns a handle whose ``remove()`` unregisters it."""
        _check_callable(hook)
        try:
            hook._from_public_api = True  # PyTorch marks it so the private API refuses it
        except AttributeError:
            pass
        return _register(self, "_state_dict_hooks", _StateDictHook(hook, public=True))

    def _register_state_dict_hook(self, hook):
        """The private post-hook: as ``register_state_dict_post_hook``, but a returned dict
        replaces the state dict."""
        _check_callable(hook)
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that "
                               "was previously registered via register_state_dict_post_hook")
        return _register(self, "_state_dict_hooks", _StateDictHook(hook))

    def register_load_state_dict_pre_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before ``load_state_dict()`` loads this module's
        entries. Returns a handle whose ``remove()`` unregisters it."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False):
        """The private load pre-hook: called without the module unless ``with_module``."""
        _check_callable(hook)
        return _register(self, "_load_state_dict_pre_hooks",
                         _StateDictHook(hook, with_module=with_module))

    def register_load_state_dict_post_hook(self, hook):
        """Call ``hook(module, incompatible_keys)`` after ``load_state_dict()`` loaded this
        module and its children; it may edit ``incompatible_keys.missing_keys`` and
        ``.unexpected_keys`` in place and must return None. Returns a handle whose
        ``remove()`` unregisters it."""
        _check_callable(hook)
        return _register(self, "_load_state_dict_post_hooks", _StateDictHook(hook))

    # ---- extra state ----------------------------------------------------------------------
    def get_extra_state(self):
        """The module's state beyond parameters and buffers, saved under ``"_extra_state"``
        when a subclass overrides this (with ``set_extra_state`` to load it back)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state) -> None:
        """Load the state ``get_extra_state`` returned; override both together."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    # ---- saving ---------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        """Put this module's own parameters and persistent buffers into ``destination``
        (detached unless ``keep_vars``), as PyTorch's method of this name."""
        for name, value in self._parameters.items():
            if value is not None:
                destination[prefix + name] = value if keep_vars else value.detach()
        non_persistent = self.__dict__.get("_non_persistent_buffers_set", ())
        for name, value in self._buffers.items():
            if value is not None and name not in non_persistent:
                destination[prefix + name] = value if keep_vars else value.detach()
        if type(self).get_extra_state is not StateDictMixin.get_extra_state:
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``),
        with the state-dict hooks run as PyTorch runs them (Note [State dict walk and hooks]).

        Examples
        --------
        >>> import gradviz as torch
        >>> layer = torch.nn.Linear(2, 1)
        >>> def drop_bias(module, state, prefix, metadata):
        ...     del state[prefix + "bias"]
        >>> handle = layer.register_state_dict_post_hook(drop_bias)
        >>> list(layer.state_dict())
        ['weight']
        >>> handle.remove()
        >>> list(layer.state_dict())
        ['weight', 'bias']
        """
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": getattr(self, "_version", 1)}
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = local_metadata
        for hook in list(self.__dict__.get("_state_dict_pre_hooks") or ()):
            hook.fn(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook in list(self.__dict__.get("_state_dict_hooks") or ()):
            result = hook.fn(self, destination, prefix, local_metadata)
            if hook.public:
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    # ---- loading --------------------------------------------------------------------------
    def _upgrade_state_dict(self, state_dict, prefix: str, version) -> None:
        """Bring this module's entries of a checkpoint saved by an older version of the module
        (``version`` from the checkpoint's ``_metadata``, None without it) up to date, in place
        (torch's ``_load_from_state_dict`` overrides do this)."""

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        """Load this module's own entries of ``state_dict`` (those under ``prefix``), after its
        load pre-hooks, recording missing and unexpected keys and errors in the lists, as
        PyTorch's method of this name."""
        self._upgrade_state_dict(state_dict, prefix, local_metadata.get("version"))
        for hook in list(self.__dict__.get("_load_state_dict_pre_hooks") or ()):
            arguments = (state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                         error_msgs)
            if hook.with_module:
                hook.fn(self, *arguments)
            else:
                hook.fn(*arguments)
        non_persistent = self.__dict__.get("_non_persistent_buffers_set", ())
        local_state = {name: value for name, value in self._parameters.items() if value is not None}
        local_state.update((name, value) for name, value in self._buffers.items()
                           if value is not None and name not in non_persistent)
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, target in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected gradviz.Tensor '
                                  "or Tensor-like object from checkpoint but received "
                                  f"{type(value)}")
                continue
            if tuple(value.shape) != tuple(target.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} "
                                  f"from checkpoint, the shape in current model is {target.shape}.")
                continue
            if assign:
                if name in self._parameters:
                    parameter_type = type(target)
                    if not isinstance(value, parameter_type):
                        value = parameter_type(value, requires_grad=target.requires_grad)
                    else:
                        value.requires_grad_(target.requires_grad)
                setattr(self, name, value)
                continue
            try:
                with no_grad():
                    target.copy_(value)
            except Exception as error:  # noqa: BLE001 - PyTorch reports any failure of the copy
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in '
                                  f"the model are {target.shape} and whose dimensions in the "
                                  f"checkpoint are {value.shape}, an exception occurred : "
                                  f"{error.args}.")
        extra_key = prefix + _EXTRA_STATE
        if type(self).set_extra_state is not StateDictMixin.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_key:
                    continue
                head, dot, _ = key[len(prefix):].partition(".")
                if (head not in self._modules) if dot else (head not in local_state):
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the parameters and buffers (in place, under no_grad), or with
        ``assign`` make the checkpoint's tensors the module's (as Parameters where the module
        had Parameters), running the load hooks as PyTorch does (Note [State dict walk and
        hooks]). Returns the missing and unexpected keys."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        # an explicit stack, children in order after their parent (Note [State dict walk and
        # hooks]); a module's post-hooks run once its whole subtree is loaded
        stack = [("visit", self, state_dict, "")]
        while stack:
            step, module, local_state, prefix = stack.pop()
            if step == "post":
                keys = _IncompatibleKeys(missing_keys, unexpected_keys)
                for hook in list(module.__dict__.get("_load_state_dict_post_hooks") or ()):
                    if hook.fn(module, keys) is not None:
                        raise AssertionError(
                            "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                            "expected to return new values, if incompatible_keys need to be "
                            "modified, it should be done inplace.")
                continue
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            stack.append(("post", module, None, prefix))
            children = []
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state.items() if k.startswith(child_prefix)}
                    children.append(("visit", child, child_state, child_prefix))
            stack.extend(reversed(children))
        if strict:  # PyTorch's order: missing keys, unexpected keys, then the other errors
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: "
                                  + ", ".join(f'"{k}"' for k in unexpected_keys) + ". ")
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: "
                                  + ", ".join(f'"{k}"' for k in missing_keys) + ". ")
        if error_msgs:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(error_msgs))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

"""``functional_call`` and ``stack_module_state``, as in ``torch.func``: call a module with
other tensors in place of its parameters and buffers, and stack the states of several
models for ``vmap``.
"""

from __future__ import annotations

from .. import ops

__all__ = ["functional_call", "stack_module_state"]


def _owner(module, name):
    """``(submodule, attribute)`` for a dotted name such as ``"fc1.weight"``."""
    *path, attr = name.split(".")
    owner = module
    for part in path:
        children = owner.__dict__.get("_modules", {})
        if part not in children or children[part] is None:
            raise AttributeError(f"{type(owner).__name__} has no attribute `{part}` (while "
                                 f"looking up '{name}' in functional_call)")
        owner = children[part]
    return owner, attr


def _swap(module, name, value):
    """Put ``value`` in place of ``module``'s ``name``; returns how to undo it."""
    owner, attr = _owner(module, name)
    for store in ("_parameters", "_buffers"):
        values = owner.__dict__[store]
        if attr in values:
            old = values[attr]
            values[attr] = value
            return lambda: values.__setitem__(attr, old)
    missing = object()
    old = owner.__dict__.get(attr, missing)
    object.__setattr__(owner, attr, value)
    if old is missing:
        return lambda: owner.__dict__.pop(attr, None)
    return lambda: object.__setattr__(owner, attr, old)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts``
    (a dict from dotted names to tensors, or a tuple of such dicts) in place of its
    parameters and buffers; the module is restored afterwards, as
    ``torch.func.functional_call``. With ``tie_weights``, a tensor given for one name of a
    tied parameter replaces every name it has. ``strict`` requires every parameter and buffer
    to be given, and nothing else.

    Examples
    --------
    >>> import gradviz as torch
    >>> lin = torch.nn.Linear(2, 1)
    >>> params = {"weight": torch.tensor([[1.0, 2.0]]), "bias": torch.tensor([0.5])}
    >>> torch.func.functional_call(lin, params, (torch.tensor([[1.0, 1.0]]),))
    tensor([[3.5000]])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        values = {}
        for mapping in parameter_and_buffer_dicts:
            if not isinstance(mapping, dict):
                raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                                 f"dictionaries, got {type(mapping).__name__}")
            repeated = sorted(set(values) & set(mapping))
            if repeated:
                raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            values.update(mapping)
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    if strict:
        expected = ({n for n, _ in module.named_parameters(remove_duplicate=False)}
                    | {n for n, _ in module.named_buffers(remove_duplicate=False)})
        missing = sorted(expected - set(values))
        unexpected = sorted(set(values) - expected)
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
            if missing:
                parts.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(parts))
    if tie_weights:
        names_by_tensor = {}
        for name, tensor in list(module.named_parameters(remove_duplicate=False)) + list(
                module.named_buffers(remove_duplicate=False)):
            names_by_tensor.setdefault(id(tensor), []).append(name)
        for names in names_by_tensor.values():
            given = [n for n in names if n in values]
            if len(given) > 1 and any(values[n] is not values[given[0]] for n in given[1:]):
                raise ValueError(f"functional_call got multiple values for keys {given}, which "
                                 "are tied. Consider using tie_weights=False")
            if given:
                for n in names:
                    values.setdefault(n, values[given[0]])
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    undo = []
    try:
        for name, value in values.items():
            undo.append(_swap(module, name, value))
        return module(*args, **(kwargs or {}))
    finally:
        for restore in reversed(undo):
            restore()


def _stacked_leaf(tensors, name):
    all_requires_grad = all(t.requires_grad for t in tensors)
    if not all_requires_grad and any(t.requires_grad for t in tensors):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = ops.stack(list(tensors))
    if all_requires_grad:
        result = result.detach().requires_grad_()
    return result


def stack_module_state(models):
    """``(params, buffers)``: each model's parameters and buffers stacked along a new first
    dimension, by name (as ``torch.func.stack_module_state``), for ``vmap`` over
    ``functional_call``. Stacked parameters are new leaves that require grad.

    Examples
    --------
    >>> import gradviz as torch
    >>> models = [torch.nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = torch.func.stack_module_state(models)
    >>> params["weight"].shape, buffers
    (gradviz.Size([4, 2, 3]), {})
    """
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    first_type = type(models[0])
    if not all(type(m) is first_type for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf(tuple(p[k] for p in all_params), k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf(tuple(b[k] for b in all_buffers), k) for k in all_buffers[0]}
    return params, buffers

"""``torch.nn.utils.weight_norm`` (the deprecated hook version) and the formulas it shares
with ``parametrizations.weight_norm``: ``w = g * v / norm_except_dim(v)``."""

from __future__ import annotations

import warnings

from ._module import Parameter, UninitializedParameter

__all__ = ["norm_except_dim", "weight_norm", "WeightNorm", "apply_weight_norm",
           "remove_weight_norm"]


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002 - torch's name
    """The ``pow``-norm of ``v`` over every dimension but ``dim``, shaped to broadcast
    against ``v`` (size 1 except at ``dim``); ``dim=-1``: the norm of all of ``v``."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.dim()
    others = [d for d in range(v.dim()) if d != dim]
    return v.abs().pow(pow).sum(dim=others, keepdim=True).pow(1.0 / pow) if pow != 2 else \
        v.pow(2).sum(dim=others, keepdim=True).sqrt()


def weight_norm(v, g, dim: int = 0):
    """``v * (g / norm_except_dim(v, 2, dim))`` (``torch._weight_norm``)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook of :func:`apply_weight_norm`: recomputes ``name`` from
    ``name_g`` and ``name_v`` before every forward."""

    def __init__(self, name: str, dim: int):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return weight_norm(v, g, self.dim)

    def remove(self, module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def _weight_norm_hooks(module):
    return [h for h in module.__dict__.get("_forward_pre_hooks", ()) if isinstance(h.fn, WeightNorm)]


def apply_weight_norm(module, name: str = "weight", dim: int = 0):
    """``torch.nn.utils.weight_norm``: replace the parameter ``name`` by ``name_g``
    (magnitude) and ``name_v`` (direction), recombined by a forward pre-hook; returns the
    module. Deprecated in torch (FutureWarning) for ``parametrizations.weight_norm``."""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    for hook in _weight_norm_hooks(module):
        if hook.fn.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    fn = WeightNorm(name, dim)
    weight = getattr(module, name)
    if isinstance(weight, UninitializedParameter):
        raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. "
                         "Make sure to run the dummy forward before applying weight normalization")
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
    module.register_parameter(name + "_v", Parameter(weight.data))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo :func:`apply_weight_norm`: ``name`` becomes one parameter again."""
    hooks = module.__dict__.get("_forward_pre_hooks", [])
    for i, hook in enumerate(hooks):
        if isinstance(hook.fn, WeightNorm) and hook.fn.name == name:
            hook.fn.remove(module)
            del hooks[i]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")

"""``torch.nn.utils.spectral_norm`` (the hook version): the weight divided by its largest
singular value, estimated by power iteration with the vectors ``<name>_u`` and ``<name>_v``
kept as buffers (one iteration per forward in training; none in eval), as in torch."""

from __future__ import annotations

from .. import ops as _ops
from ..autograd import no_grad
from ._conv import ConvTranspose1d, ConvTranspose2d
from ._module import Parameter, UninitializedParameter
from .functional import normalize

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook: sets ``module.<name>`` to ``<name>_orig / sigma``."""

    _version = 1

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        weight_mat = weight
        if self.dim != 0:
            order = [self.dim] + [d for d in range(weight_mat.dim()) if d != self.dim]
            weight_mat = weight_mat.permute(*order)
        return weight_mat.reshape(weight_mat.size(0), -1)

    def compute_weight(self, module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    # in place, as torch's normalize(..., out=v): the buffers advance
                    v.copy_(normalize(_ops.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(_ops.mv(weight_mat, v), dim=0, eps=self.eps))
                u = u.clone()
                v = v.clone()
        sigma = _ops.dot(u, _ops.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def _hooks_of(module):
    return module.__dict__.get("_forward_pre_hooks", [])


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim=None):
    """Normalize ``module.<name>`` by its spectral norm before every forward (``dim``: the
    output dimension, 1 for transposed convolutions); returns the module."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    for hook in _hooks_of(module):
        if isinstance(hook.fn, SpectralNorm) and hook.fn.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    if isinstance(weight, UninitializedParameter):
        raise ValueError("The module passed to `SpectralNorm` can't have uninitialized parameters. "
                         "Make sure to run the dummy forward before applying spectral normalization")
    with no_grad():
        weight_mat = fn.reshape_weight_to_matrix(weight)
        h, w = weight_mat.shape
        u = normalize(_ops.empty(h, dtype=weight.dtype).normal_(0, 1), dim=0, eps=fn.eps)
        v = normalize(_ops.empty(w, dtype=weight.dtype).normal_(0, 1), dim=0, eps=fn.eps)
    delattr(module, fn.name)
    module.register_parameter(fn.name + "_orig", weight)
    setattr(module, fn.name, weight.data)
    module.register_buffer(fn.name + "_u", u)
    module.register_buffer(fn.name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Undo :func:`spectral_norm`: ``name`` becomes one parameter again (the normalized
    weight)."""
    hooks = _hooks_of(module)
    for i, hook in enumerate(hooks):
        if isinstance(hook.fn, SpectralNorm) and hook.fn.name == name:
            hook.fn.remove(module)
            del hooks[i]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")

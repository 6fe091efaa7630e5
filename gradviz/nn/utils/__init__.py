"""``gradviz.nn.utils``: gradient clipping, flattening parameters and folding BatchNorm into the
layer before it, as ``torch.nn.utils``."""

from __future__ import annotations

import types
import warnings

from ... import ops as _ops
from ..._tensor import Tensor
from ...autograd import no_grad
from .._module import _typename
from .._weight_norm import apply_weight_norm as weight_norm
from .._spectral_norm import remove_spectral_norm, spectral_norm
from .._weight_norm import remove_weight_norm
from . import fusion, parametrizations, parametrize, rnn, stateless
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights

__all__ = ["clip_grad_norm_", "clip_grad_norm", "get_total_norm", "clip_grads_with_norm_",
           "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn", "parametrize", "parametrizations", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "stateless", "fusion", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _as_list(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None):
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``;
    returns the norm before clipping (PyTorch's order of operations).

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(10.)
    >>> w.grad
    tensor([0.6000, 0.8000])
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None):
    """The ``norm_type``-norm of the tensors taken together (as one concatenated vector); with
    ``error_if_nonfinite``, a NaN or infinite norm is an error."""
    tensors = _as_list(tensors)
    if not tensors:
        return _ops.tensor(0.0)
    with no_grad():
        norm_type = float(norm_type)
        if norm_type == float("inf"):
            norms = [g.abs().max() for g in tensors]
            total = norms[0] if len(norms) == 1 else _ops.stack(norms).max()
        else:
            norms = [_ops.norm(g, norm_type) for g in tensors]
            total = _ops.norm(_ops.stack(norms), norm_type)
    if error_if_nonfinite and not bool(_ops.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients in place by ``min(max_norm / (total_norm + 1e-6), 1)`` (the second
    half of :func:`clip_grad_norm_`, given a norm from :func:`get_total_norm`)."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coefficient = _ops.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coefficient.to(g.dtype))


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach=None):
    """The deprecated name of :func:`clip_grad_norm_` (older tutorials), with torch's warning."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient entry to ``[-clip_value, clip_value]`` in place."""
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one vector."""
    return _ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters (their ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected gradviz.Tensor, but got: {_typename(vec)}")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[offset:offset + n].view_as(p).data
        offset += n

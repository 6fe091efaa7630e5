"""Helpers the distributions share, with torch's names (``broadcast_all``, ``probs_to_logits``,
``logits_to_probs``, ``clamp_probs``, ``lazy_property``)."""

import numbers
from functools import update_wrapper

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits"]

euler_constant = 0.57721566490153286060  # the Euler-Mascheroni constant


def broadcast_all(*values):
    """Broadcast tensors and numbers together; numbers become tensors of the first tensor's
    dtype (the default dtype when all are numbers).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions.utils import broadcast_all
    >>> [v.shape for v in broadcast_all(0.0, torch.ones(2, dtype=torch.float64))]
    [gradviz.Size([2]), gradviz.Size([2])]
    """
    if not all(isinstance(v, (gradviz.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, gradviz.Tensor) for v in values):
        dtype = next((v.dtype for v in values if isinstance(v, gradviz.Tensor)),
                     gradviz.get_default_dtype())
        values = [v if isinstance(v, gradviz.Tensor) else gradviz.tensor(v, dtype=dtype)
                  for v in values]
    return gradviz.broadcast_tensors(*values)


def _standard_normal(shape, dtype):
    return gradviz.randn(shape, dtype=dtype)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:-dim] + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from log-odds (``is_binary``) or from unnormalized log-probabilities along
    the last dimension."""
    if is_binary:
        return gradviz.sigmoid(logits)
    return gradviz.softmax(logits, dim=-1)


def clamp_probs(probs):
    """``probs`` clamped into ``[eps, 1 - eps]``, ``eps`` the dtype's machine epsilon."""
    eps = gradviz.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Log-odds (``is_binary``) or log-probabilities of (clamped) probabilities."""
    clamped = clamp_probs(probs)
    if is_binary:
        return gradviz.log(clamped) - gradviz.log1p(-clamped)
    return gradviz.log(clamped)


class lazy_property:  # noqa: N801 - torch's name
    """A property computed on first use (with grad enabled) and then stored on the instance.

    A distribution built from ``logits`` computes ``probs`` only when asked, and the other way
    round; parameters not yet computed are not validated.
    """

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with gradviz.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value

"""Channel dropout (``dropout1d/2d/3d``, ``Dropout1d/2d/3d``) and ``alpha_dropout`` /
``AlphaDropout``. The masks come from gradviz's generator (so they differ from torch's draws):
channel dropout zeroes whole channels of an ``(N, C, *)`` input and scales the kept ones by
``1 / (1 - p)``; every function is the identity outside training."""

from __future__ import annotations

import math

from .. import dtypes as _dtypes
from .. import ops as _ops
from ._functional_core import check_dropout_dtype, dropped
from ._module import Module
from ._warn import warn as _warn

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]


def _check_dtype(input, holder=None):
    check_dropout_dtype(input, holder)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, training, inplace):
    """Zero each (sample, channel) slice of an ``(N, C, *)`` input with probability ``p``; scale
    the rest by ``1 / (1 - p)``."""
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        mask = _ops.zeros(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype)
    else:
        _check_dtype(input)
        keep = _ops.rand(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype) >= p
        mask = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of a (N, C, L) or unbatched (C, L) input with probability ``p``,
    scaling the kept channels by ``1 / (1 - p)`` (in training; the identity otherwise)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs).")
    if input.ndim == 3:
        return _feature_dropout(input, p, training, inplace)
    if inplace:
        _feature_dropout(input.unsqueeze(0), p, training, True)
        return input
    return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of a (N, C, H, W) input with probability ``p``, scaling the kept
    channels by ``1 / (1 - p)``. As in torch, a 3-D input is read as (N, C, L) (with a
    warning), and other ranks warn that they are deprecated.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(1, 2, 2, 2)
    >>> torch.nn.functional.dropout2d(x, 0.5, training=False).equal(x)
    True
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        _warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence "
            "this warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        _warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of a (N, C, D, H, W) or unbatched (C, D, H, W) input with
    probability ``p``, scaling the kept channels by ``1 / (1 - p)``."""
    _check_p(p)
    if input.ndim not in (4, 5):
        _warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence "
            "this warning, please use dropout instead. Note that dropout3d exists to provide "
            "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 4D or 5D inputs).", stacklevel=2)
    if input.ndim == 5:
        return _feature_dropout(input, p, training, inplace)
    if inplace:
        _feature_dropout(input.unsqueeze(0), p, training, True)
        return input
    return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)


_SELU_ALPHA = 1.7580993408473766  # -selu's scale * alpha: the value SELU saturates to


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Dropout for SELU networks: dropped elements are set to SELU's negative saturation
    value, and an affine map ``a * x + b`` keeps the mean and variance (torch's formula:
    ``a = 1 / sqrt((alpha**2 * p + 1) * (1 - p))``, ``alpha = 1.7580993408473766``)."""
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return dropped(input, inplace)
    # torch builds its noise like the input and adds -1 to it: a bool input's noise is int64
    _check_dtype(input, _dtypes.int64 if input.dtype is _dtypes.bool else None)
    keep = (_ops.rand(*input.shape, dtype=input.dtype) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    b = (keep - 1.0) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    if inplace:
        return input.mul_(keep * a).add_(b)
    return input * (keep * a) + b


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Alpha dropout of whole channels: one draw per (sample, channel) of an ``(N, C, *)`` input,
    dropped channels set to SELU's negative saturation and the affine map of
    :func:`alpha_dropout` applied, so SELU's mean and variance are kept."""
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:
        return dropped(input, inplace)
    _check_dtype(input)
    keep = (_ops.rand(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    b = (keep - 1.0) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    if inplace:
        return input.mul_(keep * a).add_(b)
    return input * (keep * a) + b


# ---- modules ---------------------------------------------------------------------------------

class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        _check_p(p)
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) inputs in training (see
    :func:`dropout1d`); the identity in ``eval()`` mode."""

    def forward(self, input):
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels (feature maps) of (N, C, H, W) inputs in training (see
    :func:`dropout2d`); the identity in ``eval()`` mode."""

    def forward(self, input):
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs in training (see
    :func:`dropout3d`); the identity in ``eval()`` mode."""

    def forward(self, input):
        return dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Alpha dropout for SELU networks in training (see :func:`alpha_dropout`); the identity
    in ``eval()`` mode."""

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training)


__all__ += ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"]


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels in training (see :func:`feature_alpha_dropout`); the
    identity in ``eval()`` mode. Mirrors ``torch.nn.FeatureAlphaDropout``."""

    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)

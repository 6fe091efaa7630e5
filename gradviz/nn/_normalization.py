"""``Embedding``, ``LayerNorm``, ``BatchNorm1d``, ``BatchNorm2d``, ``GroupNorm``,
``InstanceNorm1d`` and ``InstanceNorm2d``: the layers of embedding tables and normalization
(ops in :mod:`gradviz.ops._nn`)."""

from __future__ import annotations

from .. import ops as _ops
from ..autograd import no_grad
from . import _functional_core as F
from ._module import Module, Parameter
from ._warn import warn as _warn

__all__ = ["Embedding", "LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d"]


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``, looked up by index.

    ``weight`` is N(0, 1) from gradviz's generator (values differ from torch's); the
    ``padding_idx`` row starts at zero and gets no gradient.

    Examples
    --------
    >>> import gradviz as torch
    >>> emb = torch.nn.Embedding(10, 3)
    >>> emb(torch.tensor([[1, 2], [4, 5]])).shape
    gradviz.Size([2, 2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None,
                 dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(_ops.randn(num_embeddings, embedding_dim, dtype=dtype),
                                    requires_grad=not _freeze)
            if padding_idx is not None:
                with no_grad():
                    self.weight[padding_idx].fill_(0)
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False):
        """An ``Embedding`` holding ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += ", scale_grad_by_freq=True"
        if self.sparse:
            text += ", sparse=True"
        return text


class LayerNorm(Module):
    """Normalize over the last dims ``normalized_shape``, then scale by ``weight`` (ones) and
    shift by ``bias`` (zeros) when ``elementwise_affine``."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_ops.ones(*self.normalized_shape, dtype=dtype))
            self.bias = Parameter(_ops.zeros(*self.normalized_shape, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class _BatchNorm(Module):
    """Normalize each channel (dim 1) over the batch and the other dims in training, keeping
    running averages of the mean and (unbiased) variance for ``eval()``."""

    _version = 2  # version 2 added num_batches_tracked

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_ops.ones(num_features, dtype=dtype))
            self.bias = Parameter(_ops.zeros(num_features, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None
        if track_running_stats:
            self.register_buffer("running_mean", _ops.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _ops.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", _ops.tensor(0))
        else:
            self.running_mean = None
            self.running_var = None
            self.num_batches_tracked = None

    def _upgrade_state_dict(self, state_dict, prefix: str, version) -> None:
        # a checkpoint from before num_batches_tracked (or a plain dict) keeps the current count
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else _ops.tensor(0))

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running statistics reset, and the affine weight 1 and bias 0."""
        self.reset_running_stats()
        with no_grad():
            if self.weight is not None:
                self.weight.fill_(1)
            if self.bias is not None:
                self.bias.zero_()

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(input,
                            self.running_mean if not self.training or self.track_running_stats else None,
                            self.running_var if not self.training or self.track_running_stats else None,
                            self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs (each feature over the batch)."""

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs (each channel over the batch and pixels)."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class GroupNorm(Module):
    """Normalize each sample's ``num_groups`` groups of channels over the group's channels and
    the other dims, then scale by ``weight`` (ones) and shift by ``bias`` (zeros) per channel
    when ``affine``. No running statistics: the same in ``train()`` and ``eval()``.

    Examples
    --------
    >>> import gradviz as torch
    >>> norm = torch.nn.GroupNorm(2, 4)
    >>> norm
    GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
    >>> norm(torch.arange(8.0).reshape(1, 4, 2))
    tensor([[[-1.3416, -0.4472],
             [ 0.4472,  1.3416],
             [-1.3416, -0.4472],
             [ 0.4472,  1.3416]]], grad_fn=<NativeGroupNormBackward0>)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(_ops.ones(num_channels, dtype=dtype))
            self.bias = Parameter(_ops.zeros(num_channels, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """Normalize each channel of each sample over its other dims; by default without
    ``weight``/``bias`` (``affine=False``) and without running statistics
    (``track_running_stats=False``), so ``eval()`` normalizes the same way."""

    _no_batch_dim = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *,
                 bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.size(feature_dim)}.")
            _warn(f"input's size at dim={feature_dim} does not match num_features. You "
                  "can silence this warning by not passing in num_features, which is "
                  "not used because affine=False", UserWarning, stacklevel=2)
        if input.dim() == self._no_batch_dim:  # one unbatched sample
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or unbatched (C, L) inputs.

    Examples
    --------
    >>> import gradviz as torch
    >>> norm = torch.nn.InstanceNorm1d(2)
    >>> norm
    InstanceNorm1d(2, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
    >>> norm(torch.tensor([[[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]]]))
    tensor([[[-1.2247,  0.0000,  1.2247],
             [-0.7071, -0.7071,  1.4142]]])
    """

    _no_batch_dim = 2

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or unbatched (C, H, W) inputs."""

    _no_batch_dim = 3

    def _check_input_dim(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"expected 3D or 4D input (got {input.dim()}D input)")


class RMSNorm(Module):
    """Root-mean-square normalization over the last dims ``normalized_shape``:
    ``x / sqrt(mean(x ** 2) + eps) * weight`` (``weight`` ones when ``elementwise_affine``;
    ``eps=None`` is the dtype's machine epsilon), composed as torch composes it.

    Examples
    --------
    >>> import gradviz as torch
    >>> norm = torch.nn.RMSNorm(2)
    >>> norm
    RMSNorm((2,), eps=None, elementwise_affine=True)
    >>> norm(torch.tensor([[3.0, 4.0]]))
    tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_ops.ones(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            with no_grad():
                self.weight.fill_(1.0)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")

"""Lazy modules: layers whose input size is read from the first input (``LazyLinear``,
``LazyConv2d``, ``LazyBatchNorm2d``, ...), the style of the *Dive into Deep Learning* book.

Note [Lazy modules]
~~~~~~~~~~~~~~~~~~~
As in torch, a lazy module is its eager class with :class:`LazyModuleMixin` in front: its
parameters (and running statistics) start as ``UninitializedParameter`` /
``UninitializedBuffer`` and the size it infers prints as 0. A forward pre-hook runs before the
first forward: ``initialize_parameters(input)`` reads the size, materializes every
uninitialized tensor, and calls ``reset_parameters()`` (the eager class's initialisation, so
the same draws from gradviz's generator as the eager module built with that size); then the
hook removes itself and the module becomes ``cls_to_become`` (``Conv2d``), so the forward
that follows, and every later one, is the eager class's. An optimizer built before that
holds the same parameter objects, materialized in place.
"""

from __future__ import annotations

from .. import ops as _ops
from ..autograd import no_grad
from ._conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from ._layers import Linear
from ._module import UninitializedBuffer, UninitializedParameter
from ._normalization import BatchNorm1d, BatchNorm2d, InstanceNorm1d, InstanceNorm2d
from ._volumetric import BatchNorm3d, Conv3d, InstanceNorm3d

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """Infer a module's parameter shapes from its first input (Note [Lazy modules]).
    Subclasses define ``initialize_parameters(*args)`` and ``cls_to_become``."""

    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer still waits for its shape."""
        tensors = [*self._parameters.values(), *self._buffers.values()]
        return any(isinstance(t, (UninitializedParameter, UninitializedBuffer)) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is read from the first input: until then its
    parameters are :class:`UninitializedParameter` and it prints ``in_features=0``; the first
    forward materializes and initializes them and the module becomes a ``Linear``. Mirrors
    ``torch.nn.LazyLinear``.

    Examples
    --------
    >>> import gradviz as torch
    >>> layer = torch.nn.LazyLinear(2)
    >>> layer
    LazyLinear(in_features=0, out_features=2, bias=True)
    >>> layer(torch.zeros(4, 3)).shape
    gradviz.Size([4, 2])
    >>> layer
    Linear(in_features=3, out_features=2, bias=True)
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False, device, dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


# ---- convolutions ----------------------------------------------------------------------------

class _LazyConvMixin(LazyModuleMixin):
    _spatial_dims = 2
    _transposed = False

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _in_channels(self, input) -> int:
        unbatched = self._spatial_dims + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with no_grad():
            if self._transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv_init(module, out_channels, bias, dtype) -> None:
    """Turn a convolution built with zero channels into the lazy one's uninitialized state."""
    module.weight = UninitializedParameter(dtype=dtype)
    module.out_channels = out_channels
    if bias:
        module.bias = UninitializedParameter(dtype=dtype)


class LazyConv1d(_LazyConvMixin, Conv1d):
    """A :class:`Conv1d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConv1d``."""

    cls_to_become = Conv1d
    _spatial_dims = 1

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)


class LazyConv2d(_LazyConvMixin, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConv2d``.

    Examples
    --------
    >>> import gradviz as torch
    >>> conv = torch.nn.LazyConv2d(8, kernel_size=3, padding=1)
    >>> conv
    LazyConv2d(0, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    >>> conv(torch.zeros(2, 3, 5, 5)).shape, conv
    (gradviz.Size([2, 8, 5, 5]), Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)))
    """

    cls_to_become = Conv2d

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)


class LazyConv3d(_LazyConvMixin, Conv3d):
    """A :class:`Conv3d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConv3d``."""

    cls_to_become = Conv3d
    _spatial_dims = 3

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)


class LazyConvTranspose1d(_LazyConvMixin, ConvTranspose1d):
    """A :class:`ConvTranspose1d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConvTranspose1d``."""

    cls_to_become = ConvTranspose1d
    _spatial_dims = 1
    _transposed = True

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)


class LazyConvTranspose2d(_LazyConvMixin, ConvTranspose2d):
    """A :class:`ConvTranspose2d` whose ``in_channels`` is read from the first input. Mirrors
    ``torch.nn.LazyConvTranspose2d``."""

    cls_to_become = ConvTranspose2d
    _transposed = True

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, dtype)


# ---- normalization ---------------------------------------------------------------------------

class _LazyNormMixin(LazyModuleMixin):

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.__dict__.pop(name, None)  # plain None attributes of the untracked base
            self.register_buffer("running_mean", UninitializedBuffer(dtype=dtype))
            self.register_buffer("running_var", UninitializedBuffer(dtype=dtype))
            self.register_buffer("num_batches_tracked", _ops.tensor(0))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with no_grad():
            for name in ("weight", "bias", "running_mean", "running_var"):
                value = getattr(self, name, None)
                if isinstance(value, (UninitializedParameter, UninitializedBuffer)):
                    value.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormMixin, BatchNorm1d):
    """A :class:`BatchNorm1d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyBatchNorm1d``."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormMixin, BatchNorm2d):
    """A :class:`BatchNorm2d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyBatchNorm2d``."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormMixin, BatchNorm3d):
    """A :class:`BatchNorm3d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyBatchNorm3d``."""

    cls_to_become = BatchNorm3d


class _LazyInstanceNormMixin(_LazyNormMixin):
    # torch's lazy instance norms keep _LazyNormBase's defaults: affine and running statistics
    # on (the eager InstanceNorm has both off)

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        # the channel dim: 1 when batched, 0 for one unbatched sample
        if self.has_uninitialized_params() and input.dim() == self._no_batch_dim:
            input = input.unsqueeze(0)
        super().initialize_parameters(input)


class LazyInstanceNorm1d(_LazyInstanceNormMixin, InstanceNorm1d):
    """An :class:`InstanceNorm1d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyInstanceNorm1d``."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNormMixin, InstanceNorm2d):
    """An :class:`InstanceNorm2d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyInstanceNorm2d``."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNormMixin, InstanceNorm3d):
    """An :class:`InstanceNorm3d` whose ``num_features`` is read from the first input. Mirrors
    ``torch.nn.LazyInstanceNorm3d``."""

    cls_to_become = InstanceNorm3d

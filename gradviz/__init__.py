"""gradviz: an interactive visual debugger for backpropagation.

Its engine mirrors PyTorch's API, so ``import gradviz as torch`` runs ordinary teaching code;
``gradviz.debug.backward(loss)`` steps through the backward pass node by node.
"""

import functools as _functools
import math as _math
import sys as _sys
import types as _types
import warnings as _warnings
import typing as _typing

from ._version import __version__

from . import dtypes
from . import _tensor as _tensor_module
from ._tensor import Size, Tensor, device, is_tensor, layout, set_printoptions, strided
from ._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from ._tensor import check_device as _check_device
from .dtypes import (bool, double, dtype, float, float16, float32, float64, get_default_dtype,  # noqa: A004
                     half, int, int8, int16, int32, int64, long, set_default_dtype, short, uint8)
from . import ops
from .ops._special_namespace import special
from ._out import with_out as _with_out

# The op functions, each under the names its declaration gives, wrapped to take out= where it
# says so (Note [Declared once] in gradviz/ops/_registry.py); their names end __all__.
_OP_NAMES = []
for _declared in ops._registry.DECLARED:
    _function = _declared.function
    if _declared.out:
        _function = _with_out(_function, (*_declared.names, *_declared.hidden)[0])
    for _name in (*_declared.names, *_declared.hidden):
        globals()[_name] = _function
    _OP_NAMES += _declared.names
del _declared, _function, _name
if _typing.TYPE_CHECKING:  # the same names, for type checkers and IDEs (Note [Op stubs])
    from ._op_exports import *  # noqa: F403
from .dtypes import finfo, iinfo, promote_types
from ._serialization import load, save
from . import storage
from .storage import UntypedStorage
from ._legacy_types import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor,
                            IntTensor, LongTensor, ShortTensor)
from . import autograd
from . import linalg
from . import nn
from . import optim
from . import utils
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                       no_grad, set_grad_enabled)
from .autograd import is_anomaly_check_nan_enabled, is_anomaly_enabled
from . import instrument
from .instrument import load_trace, record
from . import debug
from . import func
from .func import vmap  # torch.vmap is torch.func.vmap
from . import viz
from . import distributions
from . import _torch_level
from ._torch_level import *  # noqa: F401,F403  (torch.conv2d, torch.relu_, windows, ...)
from . import amp
from . import testing
from . import jit
from . import profiler
from ._runtime import (are_deterministic_algorithms_enabled, compile, get_num_threads,  # noqa: A004
                       is_deterministic_algorithms_warn_only_enabled, set_num_threads,
                       use_deterministic_algorithms)
from . import _runtime
from .amp import autocast, is_autocast_enabled
from ._config import config, show_config

_sys.modules[__name__ + ".special"] = special  # ``from torch.special import expit``
# torch's math constants (``masked_fill(mask, -torch.inf)``, ``x[:, torch.newaxis]``)
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None


_COMPLEX_NAMES = ("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf",
                  "view_as_complex", "view_as_real", "complex", "polar")


if not _typing.TYPE_CHECKING:  # a type checker seeing __getattr__ would take every unknown name as Any

    def __getattr__(name):
        # torch's complex dtypes and functions: say why they are missing
        if name in _COMPLEX_NAMES:
            raise AttributeError(f"module 'gradviz' has no attribute '{name}': gradviz does not "
                                 "support complex numbers (keep real and imaginary parts as two "
                                 "real tensors)")
        if name == "bfloat16":
            raise AttributeError("module 'gradviz' has no attribute 'bfloat16': gradviz computes "
                                 "with numpy, which has no bfloat16; use float32 (or float16)")
        raise AttributeError(f"module 'gradviz' has no attribute '{name}'")


def is_floating_point(input) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is a floating-point type. Mirrors ``torch.is_floating_point``."""
    return input.dtype.is_floating_point


def is_inference(input) -> bool:  # noqa: A002
    """``input.is_inference()``: whether ``input`` was made in ``inference_mode()``."""
    return input.is_inference()


def _not_available():
    return False


# Device-selecting code (``"cuda" if torch.cuda.is_available() else "cpu"``) runs unchanged:
# gradviz has no accelerator, so every probe says no.
cuda = _types.ModuleType("gradviz.cuda", "No CUDA: gradviz computes on the CPU.")
cuda.is_available = _not_available
cuda.device_count = lambda: 0
cuda.manual_seed = cuda.manual_seed_all = lambda seed: None
# torch.random: the default generator's seed and state
random = _types.ModuleType("gradviz.random", "The default random generator: seeds, state, fork_rng.")
random.manual_seed, random.seed, random.initial_seed = ops.manual_seed, ops.seed, ops.initial_seed
random.get_rng_state, random.set_rng_state = ops.get_rng_state, ops.set_rng_state
random.fork_rng = _runtime.fork_rng
random.default_generator = default_generator = ops._creation._default_generator
_sys.modules[__name__ + ".random"] = random
# torch.version: what environment printouts read (``torch.version.cuda`` is None without CUDA)
version = _types.ModuleType("gradviz.version", "gradviz's version, and no CUDA or ROCm.")
version.__version__ = __version__
version.cuda = version.hip = version.rocm = version.xpu = None
version.debug = False
version.git_version = "unknown"
_sys.modules[__name__ + ".version"] = version
cuda.is_bf16_supported = lambda including_emulation=True: False
cuda.synchronize = lambda device=None: None
cuda.empty_cache = lambda: None
cuda.amp = _types.ModuleType("gradviz.cuda.amp", "torch.cuda.amp: deprecated aliases of torch.amp.")
cuda.amp.GradScaler = amp.CudaGradScaler
cuda.amp.autocast = _functools.partial(amp.autocast, "cuda")
cuda.amp.custom_fwd, cuda.amp.custom_bwd = amp.custom_fwd, amp.custom_bwd
_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".cuda.amp"] = cuda.amp
backends = _types.ModuleType("gradviz.backends", "Accelerator backends: none in gradviz.")
backends.mps = _types.SimpleNamespace(is_available=_not_available, is_built=_not_available)
# flags training scripts set (``torch.backends.cuda.matmul.allow_tf32 = True``): kept, unused
backends.cuda = _types.SimpleNamespace(is_built=_not_available,
                                       matmul=_types.SimpleNamespace(allow_tf32=False,
                                                                     allow_fp16_reduced_precision_reduction=True,
                                                                     allow_bf16_reduced_precision_reduction=True))
backends.cudnn = _types.SimpleNamespace(deterministic=False, benchmark=False, enabled=False,
                                        allow_tf32=True, is_available=_not_available)
_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision``: kept for :func:`get_float32_matmul_precision`;
    gradviz's CPU matmuls are always full float32 ("highest")."""
    global _float32_matmul_precision
    if precision not in ("highest", "high", "medium"):
        _warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _float32_matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The value last given to :func:`set_float32_matmul_precision` ("highest" by default)."""
    return _float32_matmul_precision



accelerator = _types.ModuleType(
    "gradviz.accelerator", "The current accelerator (``torch.accelerator``): none in gradviz.")
accelerator.is_available = _not_available
accelerator.device_count = lambda: 0
accelerator.current_accelerator = lambda check_available=False: None
_sys.modules[__name__ + ".accelerator"] = accelerator


def set_default_device(device):
    """``torch.set_default_device``: gradviz computes on the CPU, so ``"cpu"``, a CPU
    :class:`device` and ``None`` are accepted (and change nothing); any other device raises
    at once (torch raises later, at the first tensor it would place there)."""
    _check_device(device)


def get_default_device():
    """The device new tensors are made on: always ``device(type='cpu')`` in gradviz."""
    return _tensor_module._CPU


def numel(input):
    """The number of elements of ``input``. Mirrors ``torch.numel``."""
    return input.numel()


def _register_notebook_display():
    """In IPython, show a DebugSession as the widget, and a Trace as the widget of its replay
    (the widget layer is imported lazily)."""
    import sys

    if "IPython" not in sys.modules:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return

    def show(session):
        from .widget import display_session

        display_session(session)

    def show_trace(trace):
        show(debug.ReplaySession(trace))

    formatter = shell.display_formatter.ipython_display_formatter
    for session_type in (debug.DebugSession, debug.ReplaySession, debug.CallSession):
        formatter.for_type(session_type, show)
    formatter.for_type(instrument.Trace, show_trace)

    def show_diff(result):
        from IPython.display import display

        display(result.show())

    formatter.for_type(debug.TraceDiff, show_diff)


_register_notebook_display()

__all__ = [
    "Tensor", "Size", "is_tensor", "dtype", "dtypes", "autograd", "debug", "ops", "float16",
    "float32", "float64", "half", "float", "double", "int8", "int16", "int32", "int64", "uint8",
    "bool", "short", "int", "long", "get_default_dtype", "set_default_dtype", "numel", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "show_config", "config", "__version__", "nn", "instrument", "record", "viz", "load_trace",
    "optim", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
    "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "utils", "pi", "e", "inf", "nan",
    "newaxis", "device", "set_default_device", "get_default_device", "accelerator",
    "set_printoptions", "is_floating_point", "is_inference", "cuda", "backends", "linalg",
    "finfo", "iinfo", "promote_types", "save", "load", "special", "amp", "autocast", "testing",
    "compile", "set_num_threads", "get_num_threads", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "random", "default_generator", "is_autocast_enabled", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "layout", "strided", "memory_format", "contiguous_format",
    "channels_last", "channels_last_3d", "preserve_format", "version", "jit", "profiler",
] + _OP_NAMES + _torch_level.__all__

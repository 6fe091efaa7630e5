"""Mixed precision, ``torch.amp``: :class:`autocast` and :class:`GradScaler`.

gradviz computes on the CPU in the dtypes it is given: inside ``autocast("cpu")`` it keeps
computing in float32 (it says so once with a warning), and ``autocast("cuda")`` disables
itself as torch does on a machine without CUDA. :class:`GradScaler` is torch's loss scaler,
step for step (scale, unscale, skip a step with non-finite gradients, grow or back off), so a
training loop written for mixed precision runs unchanged; ``GradScaler("cuda")`` disables
itself with torch's warning, as on a machine without CUDA (Note [Mixed precision without an
accelerator] in ``_autocast``).
"""

from ._autocast import autocast, custom_bwd, custom_fwd, is_autocast_enabled
from ._grad_scaler import CudaGradScaler, GradScaler, OptState

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_enabled", "GradScaler", "CudaGradScaler", "OptState"]

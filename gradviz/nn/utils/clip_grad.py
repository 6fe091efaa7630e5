"""``gradviz.nn.utils.clip_grad``: the gradient clipping functions where older code imports
them from (``torch.nn.utils.clip_grad``); they are defined in ``gradviz.nn.utils``."""

from . import clip_grad_norm, clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_"]

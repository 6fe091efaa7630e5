"""``torch.amp.GradScaler``: loss scaling with skipped steps on non-finite gradients, step for
step as torch does it (the same errors, the same scale updates)."""

from __future__ import annotations

import enum
import warnings
from collections import abc, defaultdict
from typing import Any

import numpy as np

from .. import dtypes as _dtypes
from .._grad_mode import no_grad
from .._tensor import Tensor, _wrap

__all__ = ["GradScaler", "CudaGradScaler", "OptState"]


class OptState(enum.Enum):
    """Where an optimizer is in the scaler's iteration: ready, gradients unscaled, stepped."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """``torch.amp.GradScaler(device="cuda", init_scale=2.0**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``.

    ``scale(loss)`` multiplies the loss by the scale, so its backward produces scaled
    gradients; ``step(optimizer)`` unscales them (unless ``unscale_`` already did, e.g. before
    gradient clipping) and skips ``optimizer.step()`` when any is NaN or infinite;
    ``update()`` then halves the scale after a skipped step (``backoff_factor``) or doubles it
    after ``growth_interval`` good steps in a row. gradviz computes on the CPU, so
    ``GradScaler("cuda")`` (the default device, and ``torch.cuda.amp.GradScaler``) disables
    itself with torch's warning, and ``GradScaler("cpu")`` scales
    (Note [Mixed precision without an accelerator] in ``_autocast``).

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.ones(2, requires_grad=True)
    >>> optimizer = torch.optim.SGD([w], lr=0.1)
    >>> scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    >>> scaler.scale((w * 3).sum()).backward()
    >>> w.grad
    tensor([12., 12.])
    >>> scaler.step(optimizer); scaler.update()
    >>> w.grad, w
    (tensor([3., 3.]), tensor([0.7000, 0.7000], requires_grad=True))
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states: defaultdict[int, dict[str, Any]] = defaultdict(_fresh_state)

    def _check_scale(self, what: str) -> Tensor:
        if self._scale is None:
            raise AssertionError(f"Attempted {what} but _scale is None.  This may indicate your script did "
                                 f"not use scaler.scale(loss or outputs) earlier in the iteration.")
        return self._scale

    def _lazy_init(self) -> None:
        self._scale = _wrap(np.array(self._init_scale, dtype=np.float32))
        self._growth_tracker = self._init_growth_tracker

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them, nested) times the scale; unchanged
        when the scaler is disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init()
            return outputs * self._check_scale("scale")

        def apply_scale(value):
            if isinstance(value, Tensor):
                return self.scale(value)
            if isinstance(value, abc.Iterable):
                scaled = map(apply_scale, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inverse: np.ndarray, allow_fp16: bool) -> bool:
        """Multiply every gradient of ``optimizer``'s parameters by ``inverse`` in place;
        whether any of them holds NaN or an infinity."""
        found_inf = False
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(f"expected param to be torch.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is _dtypes.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    data = grad._data
                    if not np.isfinite(data).all():
                        found_inf = True
                    grad.mul_(float(inverse))
        return found_inf

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (once per ``update()``), e.g.
        before clipping them; ``step()`` then does not unscale again."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # the reciprocal in float64, then float32, as torch computes it
        inverse = np.float32(1.0 / np.float64(self._check_scale("unscale_")._data))
        state["found_inf"] = self._unscale_grads_(optimizer, inverse, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients, skipped (returning None)
        when any gradient is NaN or infinite."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """End the iteration: set the scale to ``new_scale``, or back it off after a skipped
        step and grow it after ``growth_interval`` good ones (torch's ``_amp_update_scale_``)."""
        if not self._enabled:
            return
        scale = self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                value = new_scale
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                          "torch.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                value = float(new_scale.item())
            scale._data[...] = value
        else:
            found = [state["found_inf"] for state in self._per_optimizer_states.values()
                     if state["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found):
                scale._data[...] = scale._data * np.float32(self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = (self._growth_tracker or 0) + 1
                if successful == self._growth_interval:
                    grown = scale._data * np.float32(self._growth_factor)
                    if np.isfinite(grown):
                        scale._data[...] = grown
                    successful = 0
                self._growth_tracker = successful
        self._per_optimizer_states = defaultdict(_fresh_state)

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return float(self._init_scale if self._scale is None else self._scale._data)

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False after it disabled itself for "cuda")."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker``; empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (nothing when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a "
                               "disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale._data[...] = self._init_scale
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker


class CudaGradScaler(GradScaler):
    """``torch.cuda.amp.GradScaler``: the deprecated spelling of ``GradScaler("cuda", ...)``,
    disabled here as on any machine without CUDA."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)

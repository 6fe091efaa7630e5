"""Anomaly mode: ``detect_anomaly`` and ``set_detect_anomaly``, as ``torch.autograd``'s.

While anomaly mode is on (Note [Anomaly mode] in ``gradviz_ext/_anomaly.py``), every node
records the traceback of the forward call that created it, each node's gradients are checked
for NaN after its backward, and an error raised while a node runs is reported with that
node's forward traceback (a ``UserWarning``, and a note on the exception).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from gradviz_ext import engine as _engine

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]

is_anomaly_enabled = _engine.is_anomaly_enabled
is_anomaly_check_nan_enabled = _engine.is_anomaly_check_nan_enabled

_ENABLED_WARNING = ("Anomaly Detection has been enabled. This mode will increase the runtime "
                    "and should only be enabled for debugging.")


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on inside its block.

    Parameters
    ----------
    check_nan : bool
        Raise ``RuntimeError`` as soon as a node's backward returns NaN (default True).

    Examples
    --------
    >>> import warnings
    >>> import gradviz as torch
    >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with torch.autograd.detect_anomaly():
    ...         y = (x * 0.0) / x.detach()          # 0/0: NaN in forward and backward
    ...         try:
    ...             y.sum().backward()
    ...         except RuntimeError as error:
    ...             print(str(error).splitlines()[0])
    Function 'DivBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = bool(check_nan)
        self._previous: Any = None  # (grad anomaly flags) while the block runs
        warnings.warn(_ENABLED_WARNING, UserWarning, stacklevel=2)

    def __enter__(self):
        self._previous = (_engine.is_anomaly_enabled(), _engine.is_anomaly_check_nan_enabled())
        _engine.set_anomaly_enabled(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _engine.set_anomaly_enabled(*self._previous)
        return False

    def __call__(self, fn):
        """gradviz extension: ``@detect_anomaly()`` runs ``fn`` in anomaly mode."""
        check_nan = self.check_nan

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            previous = (_engine.is_anomaly_enabled(), _engine.is_anomaly_check_nan_enabled())
            _engine.set_anomaly_enabled(True, check_nan)
            try:
                return fn(*args, **kwargs)
            finally:
                _engine.set_anomaly_enabled(*previous)

        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off: as a call, or as a context manager that restores
    the previous state on exit.

    Examples
    --------
    >>> import gradviz as torch
    >>> with torch.autograd.set_detect_anomaly(True, check_nan=False):
    ...     torch.autograd.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    (True, False)
    >>> torch.autograd.is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self._previous = (_engine.is_anomaly_enabled(), _engine.is_anomaly_check_nan_enabled())
        _engine.set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _engine.set_anomaly_enabled(*self._previous)
        return False

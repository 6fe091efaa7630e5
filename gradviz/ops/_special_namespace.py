"""``gradviz.special``: PyTorch's ``torch.special`` namespace, gathered from where each
function is defined (the error and gamma functions in ``_special.py``, the Bessel, incomplete
gamma, zeta and polynomial families in ``_special_functions.py``, the rest beside their
non-special names)."""

from __future__ import annotations

import types

from . import _activation, _math, _pointwise, _reduction
from ._special import digamma, entr, erfc, erfinv, lgamma, logit, ndtr, polygamma, sinc, xlog1py
from ._special_functions import SPECIAL_FUNCTIONS

__all__ = ["special"]


def _special_module():
    special = types.ModuleType("gradviz.special", "PyTorch's torch.special functions gradviz has.")
    names = dict(
        expit=_pointwise.sigmoid, logit=logit, erf=_pointwise.erf, erfc=erfc, erfinv=erfinv,
        entr=entr, log_softmax=_activation.log_softmax, softmax=_activation.softmax,
        logsumexp=_reduction.logsumexp, sinc=sinc, ndtr=ndtr, xlogy=_math.xlogy,
        xlog1py=xlog1py, exp2=_pointwise.exp2, expm1=_pointwise.expm1, log1p=_pointwise.log1p,
        gammaln=lgamma, digamma=digamma, psi=digamma, polygamma=polygamma,
        round=_math.round, **SPECIAL_FUNCTIONS)
    for name, fn in names.items():
        setattr(special, name, fn)
    special.__all__ = sorted(names)
    return special


special = _special_module()

"""``warn``: ``warnings.warn`` that never blames gradviz's own files.

Note [Warnings point at the user's line]
----------------------------------------
A warning is only useful where the user can act on it. ``warnings.warn(..., stacklevel=n)``
counts frames, and the count that is right for ``F.log_softmax(x)`` called by the user is
wrong when the same function runs inside ``nn.LogSoftmax.forward`` or a user's own
``Module.forward`` (``Module.__call__`` and the layer add frames). So gradviz's ``nn`` warns
through :func:`warn`: it starts at the frame ``stacklevel`` names, as ``warnings.warn`` does
(torch's ``_stacklevel`` arguments keep their meaning), and then walks out past every frame
of the ``gradviz`` package, so the warning is attributed to the first line of user code.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _inside_gradviz(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)


def warn(message, category=None, stacklevel: int = 1) -> None:
    """``warnings.warn(message, category, stacklevel)``, moved out to the first frame that
    is not gradviz's (Note [Warnings point at the user's line])."""
    frame = sys._getframe(1)  # the caller: stacklevel 1
    level = 1
    while level < stacklevel and frame.f_back is not None:
        frame = frame.f_back
        level += 1
    while _inside_gradviz(frame) and frame.f_back is not None:
        frame = frame.f_back
        level += 1
    # +1: this function's own frame sits between warnings.warn and the caller
    warnings.warn(message, category, stacklevel=level + 1)

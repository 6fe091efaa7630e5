"""Sessions leave no reference cycle behind when they end, by an error or otherwise.

Note [No cycle through a session's error]
-----------------------------------------
A session keeps the exception that ended its pass (``session.error``). That exception's
traceback keeps the frames it passed through, and each of those frames keeps its caller
(``f_back``) up to the session method that ran the engine; were ``self`` a strong reference
there, session -> task -> error -> traceback -> frame -> session would be a reference cycle,
and the graph, its ctx objects and saved tensors would stay alive until the cycle collector
runs (about a hundred objects per failure), where PyTorch frees them as soon as the user lets
go. So the session methods that run user code (:func:`weak_self`) hold their session weakly
in their frames (a table keeps it alive for the duration of the call). Likewise a session's recorder refers to
its session weakly, and an aborted pass drops its task's observer (the recorder forgets a
task when its pass finishes or fails, but an abort sends no event).
"""

from __future__ import annotations

import functools
import weakref

__all__ = ["weak_self"]


# The objects whose weak_self methods are running, by a token of the call: what keeps an
# object alive during the call when the caller's only reference was handed to the call
# (``debug.backward(loss).continue_()``), without any frame referring to it.
_running: dict = {}


def weak_self(method):
    """Decorate a method so that its frame (and the wrapper's) hold ``self`` only weakly
    (Note [No cycle through a session's error]). While the call runs the object stays alive
    through a module-level table, not through a frame; attribute lookups go through the
    proxy to the object itself, so methods it calls (and listeners they notify) get the real
    object."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        token = object()
        _running[token] = self
        weak = weakref.proxy(self)
        del self
        try:
            return method(weak, *args, **kwargs)
        finally:
            del _running[token]

    return wrapper

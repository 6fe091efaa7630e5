"""numpy's floating-point error state, as one context variable (plain Python, never compiled).

PyTorch never warns about inf or NaN; numpy does unless told not to, and ``np.errstate`` costs
about a microsecond. numpy 2 keeps the error state in a context variable that can be set
directly for a fraction of that: ``ERRSTATE`` is that variable and ``QUIET`` the value that
ignores every floating-point error. Both are None where the private variable does not exist
(numpy < 2); callers then use ``np.errstate``. Used by the graph task (Note [Quiet backward]
in ``_task.py``) and by forward ops (Note [Op fast paths] in ``_ops.py``).
"""

try:
    from numpy._core.umath import _extobj_contextvar as ERRSTATE
    from numpy._core.umath import _make_extobj

    QUIET = _make_extobj(all="ignore")
except ImportError:  # numpy < 2
    ERRSTATE = None
    QUIET = None


def quiet_context():
    """A fresh ``contextvars.Context`` in which numpy's error state is ``QUIET`` and every
    other context variable has its default (None before numpy 2).

    Entering it costs a pointer swap, against a context-variable set and reset: the compiled
    arithmetic kernels run their single ufunc call inside it (Note [Compiled kernels] in
    ``_ops.py``). Only numpy's own ufunc runs there, and it reads no other variable.
    """
    if ERRSTATE is None:
        return None
    import contextvars

    context = contextvars.Context()
    context.run(ERRSTATE.set, QUIET)
    return context

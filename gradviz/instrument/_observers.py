"""Several observers, per thread, behind the engine's one default (and one forward) slot.

The engine has a single process-wide default observer (for every graph task it creates) and a
single forward observer. ``gradviz.record()`` and ``gradviz.debug.run()`` each need one of
their own, possibly at the same time and in different threads, so both go through
:func:`observe`: it installs a dispatching observer in the engine's slot while anything is
registered (and restores the previous one when the last registration goes), and passes each
callback to the observers registered for the calling thread (or for every thread).

A graph task runs on the thread that calls its ``step()``; a plain ``backward()`` runs on the
thread that called it, so "the backward passes of this thread" is exactly what is observed.
With nothing registered the engine's slots hold what they held before: no cost.
"""

from __future__ import annotations

import threading

from gradviz_ext import engine as _engine

__all__ = ["observe"]

_FORWARD_CALLBACKS = ("node_created", "saved_packed")

_lock = threading.Lock()
_get_ident = threading.get_ident


class _Registration:
    __slots__ = ("observer", "thread")

    def __init__(self, observer, thread):
        self.observer = observer
        self.thread = thread


class _Dispatcher(_engine.Observer):
    """Passes each callback to the registered observers of the calling thread, then to the
    observer that held the engine's slot before it (``previous``)."""

    def __init__(self, previous):
        self.previous = previous
        self.registrations: tuple = ()

    @property
    def _engine_log(self):
        """The one observer's log, when the engine's records may go straight to it (Note
        [Records the engine appends] in gradviz_ext/_task.py): it is the only one registered,
        for this thread, and no earlier observer waits for the callbacks."""
        registrations = self.registrations
        if len(registrations) == 1 and self.previous is None:
            only = registrations[0]
            if only.thread is None or only.thread == _get_ident():
                return getattr(only.observer, "_engine_log", None)
        return None

    def _targets(self):
        ident = threading.get_ident()
        return [r.observer for r in self.registrations if r.thread is None or r.thread == ident]


def _make_callback(name):
    def callback(self, *args):
        registrations = self.registrations
        if len(registrations) == 1:  # one recording (a record() block, a session): no list
            only = registrations[0]
            if only.thread is None or only.thread == _get_ident():
                getattr(only.observer, name)(*args)
        else:
            for observer in self._targets():
                getattr(observer, name)(*args)
        previous = self.previous
        if previous is not None:
            method = getattr(previous, name, None)
            if method is not None:
                method(*args)
    callback.__name__ = name
    return callback


for _name in _engine.BACKWARD_CALLBACKS + _FORWARD_CALLBACKS:
    setattr(_Dispatcher, _name, _make_callback(_name))


class _Slot:
    """One engine slot (default or forward observer) and its dispatcher while installed."""

    def __init__(self, get, put):
        self.get = get
        self.put = put
        self.dispatcher = None

    def add(self, registration):
        if self.dispatcher is None or self.get() is not self.dispatcher:
            if self.dispatcher is None:
                self.dispatcher = _Dispatcher(self.get())
                self.put(self.dispatcher)
            # else: someone chained on top of our dispatcher (capture()); it still forwards to us
        self.dispatcher.registrations = self.dispatcher.registrations + (registration,)

    def remove(self, registration):
        dispatcher = self.dispatcher
        if dispatcher is None:
            return
        dispatcher.registrations = tuple(r for r in dispatcher.registrations
                                         if r is not registration)
        if not dispatcher.registrations and self.get() is dispatcher:
            self.put(dispatcher.previous)
            self.dispatcher = None


def _get_default():
    previous = _engine.set_default_observer(None)
    _engine.set_default_observer(previous)
    return previous


_default_slot = _Slot(_get_default, _engine.set_default_observer)
_forward_slot = _Slot(_engine.forward_observer, _engine.set_forward_observer)


class ObserverHandle:
    """Returned by :func:`observe`; ``remove()`` stops the observation (idempotent)."""

    def __init__(self, registrations):
        self._registrations = registrations

    def remove(self) -> None:
        with _lock:
            registrations, self._registrations = self._registrations, ()
            for slot, registration in registrations:
                slot.remove(registration)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def observe(observer, *, thread: int | None = None, forward: bool = True,
            backward: bool = True) -> ObserverHandle:
    """Send the engine's events to ``observer`` until the handle's ``remove()``.

    Parameters
    ----------
    observer : gradviz.instrument.Observer
    thread : int or None
        ``threading.get_ident()`` of the one thread to observe; None observes every thread.
    forward : bool
        Also receive ``node_created`` and ``saved_packed`` while graphs are built.
    backward : bool
        Receive the events of every graph task created (on that thread) from now on.
    """
    registrations = []
    with _lock:
        if backward:
            registration = _Registration(observer, thread)
            _default_slot.add(registration)
            registrations.append((_default_slot, registration))
        if forward:
            registration = _Registration(observer, thread)
            _forward_slot.add(registration)
            registrations.append((_forward_slot, registration))
    return ObserverHandle(tuple(registrations))

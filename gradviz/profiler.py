"""``gradviz.profiler``: ``profile`` and ``record_function`` as context managers, timing the
ranges a program names.

Note [What the profiler records]
--------------------------------
PyTorch's profiler records every op its dispatcher runs. gradviz has no dispatcher to hook
(ops are Python calls over numpy), so ``profile`` does not pretend to: it runs the code and
records the wall-clock time of each ``record_function`` range entered inside it, and
``key_averages().table()`` lists those ranges, with a first line saying that ops are not in
it and where their times are (``cProfile``, ``bench/models.py --profile``, or gradviz's
recorder, ``gradviz.record``). A program that only profiles ops gets a table that says so,
not an empty one that looks like a fast run. ``export_chrome_trace`` writes the ranges in the
Chrome trace format PyTorch writes.
"""

from __future__ import annotations

import enum
import functools
import json
import time

__all__ = ["ProfilerActivity", "profile", "record_function", "schedule"]

_active: list[profile] = []  # the profilers running, innermost last

_NOTE = ("gradviz's profiler records the record_function ranges only, not each op; for the "
         "time of ops, run the code under cProfile or gradviz.record")


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """Accepted for ``profile(schedule=...)``; gradviz records every step (ranges only)."""
    return functools.partial(_no_schedule, wait, warmup, active, repeat, skip_first)


def _no_schedule(*args):
    return None


class _Event:
    __slots__ = ("name", "start", "end")

    def __init__(self, name, start):
        self.name, self.start, self.end = name, start, start


class _Averages(list):
    """``key_averages()``: one row per range name, with its count and total time."""

    def table(self, sort_by=None, row_limit: int = 100, **_) -> str:
        rows = sorted(self, key=lambda r: -r[1]) if sort_by else list(self)
        rows = rows[:row_limit] if row_limit and row_limit > 0 else rows
        width = max([len("Name")] + [len(name) for name, _, _ in rows]) + 2
        rule = "-" * (width + 45)
        lines = [_NOTE, rule,
                 f"{'Name':<{width}}{'CPU total':>15}{'CPU time avg':>15}{'# of Calls':>15}", rule]
        for name, total, count in rows:
            lines.append(f"{name:<{width}}{_us(total):>15}{_us(total / count):>15}{count:>15}")
        lines.append(rule)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _us(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds * 1e6:.3f}us"


class profile:
    """Run the code in the ``with`` block and record the time of its ``record_function``
    ranges (Note [What the profiler records]). The arguments PyTorch takes are accepted."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 use_cuda=None, custom_trace_id_callback=None):
        self.on_trace_ready = on_trace_ready
        self.events: list[_Event] = []
        self.step_num = 0

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        _active.append(self)

    def stop(self) -> None:
        if self in _active:
            _active.remove(self)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def step(self) -> None:
        self.step_num += 1

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0) -> _Averages:
        totals: dict[str, list] = {}
        for event in self.events:
            entry = totals.setdefault(event.name, [0.0, 0])
            entry[0] += event.end - event.start
            entry[1] += 1
        return _Averages((name, total, count) for name, (total, count) in totals.items())

    def events_list(self) -> list:
        return list(self.events)

    def export_chrome_trace(self, path: str) -> None:
        """The ranges as complete events ("ph": "X", times in microseconds) of a Chrome trace."""
        origin = min((e.start for e in self.events), default=0.0)
        trace = {"traceEvents": [{"name": e.name, "ph": "X", "cat": "user_annotation", "pid": 0,
                                  "tid": 0, "ts": (e.start - origin) * 1e6,
                                  "dur": (e.end - e.start) * 1e6} for e in self.events]}
        with open(path, "w") as f:
            json.dump(trace, f)


class record_function:
    """Name a range of code for ``profile`` (as a ``with`` block or a decorator); outside a
    profiler it only runs the code, as in PyTorch."""

    def __init__(self, name: str, args=None):
        self.name = name
        self._events: list[_Event] = []

    def __enter__(self):
        now = time.perf_counter()
        self._events = [_Event(self.name, now) for _ in _active]
        for profiler, event in zip(_active, self._events):
            profiler.events.append(event)
        return self

    def __exit__(self, *exc):
        now = time.perf_counter()
        for event in self._events:
            event.end = now
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper

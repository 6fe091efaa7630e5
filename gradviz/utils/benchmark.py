"""``gradviz.utils.benchmark``: ``Timer`` and ``Measurement``, as ``torch.utils.benchmark``.

Tutorials end by timing their code (the per-sample-gradients tutorial compares a loop with
``vmap``): ``Timer(stmt, setup, globals=...).timeit(100)`` or ``.blocked_autorange()`` returns
a :class:`Measurement` whose ``times``, ``mean``, ``median`` and ``repr`` read like torch's.
Statements run as Python in the given globals (``torch`` is gradviz unless the globals say
otherwise); timing uses :mod:`timeit`, with the garbage collector left as the user set it.

Examples
--------
>>> import gradviz as torch
>>> from gradviz.utils.benchmark import Timer
>>> timer = Timer("x * 2", setup="x = torch.ones(3)", label="double")
>>> measurement = timer.timeit(10)
>>> measurement.number_per_run, len(measurement.times)
(10, 1)
>>> measurement.mean > 0
True
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import textwrap
import timeit as _timeit

import numpy as np

import gradviz as _gradviz  # the default ``torch`` of a statement (read when a Timer is made)

__all__ = ["Timer", "Measurement", "TaskSpec", "select_unit"]

# A spread of the middle half (IQR) above these fractions of the median earns a warning.
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What was timed: the statement, its setup and the labels shown in a repr."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label, else the one-line statement, else the statement indented."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        sub = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{sub}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        if self.setup in ("", "pass"):
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The task's lines of a Measurement's repr."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{section}\n" if "\n" in section else section
                         for section in sections if section)


def select_unit(seconds: float) -> tuple[str, float]:
    """The unit (``"ns"``, ``"us"``, ``"ms"``, ``"s"``) that shows ``seconds`` near 1..999."""
    exponent = math.floor(math.log10(seconds)) // 3 if seconds > 0 else -3
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


@dataclasses.dataclass(repr=False)
class Measurement:
    """The result of a :class:`Timer`: ``raw_times`` are the seconds of each block of
    ``number_per_run`` runs; ``times`` are per run."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    @property
    def times(self) -> list[float]:
        """Seconds per run of each measurement (block time / runs per block)."""
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q: float) -> float:
        return float(np.quantile(np.asarray(self.times, dtype=np.float64), q))

    @property
    def median(self) -> float:
        return self._quantile(0.5)

    @property
    def mean(self) -> float:
        return float(np.mean(np.asarray(self.times, dtype=np.float64)))

    @property
    def iqr(self) -> float:
        """The spread of the middle half of the times (75th minus 25th percentile)."""
        return self._quantile(0.75) - self._quantile(0.25)

    @property
    def num_threads(self) -> int:
        return self.task_spec.num_threads

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def stmt(self) -> str:
        return self.task_spec.stmt

    @property
    def label(self) -> str | None:
        return self.task_spec.label

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        return self.iqr / self.median < threshold

    @property
    def has_warnings(self) -> bool:
        return bool(self._warnings())

    def _warnings(self) -> list[str]:
        if not self.raw_times:
            return []
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            why = "This suggests significant environmental influence."
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            why = "This could indicate system fluctuation."
        else:
            return []
        return [f"  WARNING: Interquartile range is {self.iqr / self.median * 100:.1f}% "
                f"of the median measurement.\n           {why}"]

    def __repr__(self) -> str:
        count = len(self.raw_times)
        unit, scale = select_unit(self.median)
        threads = self.num_threads
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if count > 1 else ''}{self.median / scale:.2f} {unit}"]
        if count >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                         f"({self._quantile(0.25) / scale:.2f} to "
                         f"{self._quantile(0.75) / scale:.2f})")
        lines.append(f"  {count} measurement{'s' if count > 1 else ''}, {self.number_per_run} "
                     f"runs {'per measurement,' if count > 1 else ','} {threads} "
                     f"thread{'s' if threads > 1 else ''}")
        lines.extend(self._warnings())
        return "\n".join(lines).strip()


class Timer:
    """Time the Python statement ``stmt`` after ``setup``, in a copy of ``globals``.

    Parameters are torch's: ``label``, ``sub_label``, ``description`` and ``env`` only label
    the :class:`Measurement`; ``num_threads`` is recorded (gradviz computes on one thread).
    """

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer=_timeit.default_timer, globals: dict | None = None,  # noqa: A002
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language="python"):
        if str(getattr(language, "value", language)).lower() not in ("python", "py"):
            raise ValueError(f"gradviz's Timer runs Python statements only, got language={language!r}")
        if not isinstance(stmt, str) or not isinstance(setup, str):
            raise ValueError("Timer expects stmt and setup as strings of Python code, got "
                             f"{type(stmt).__name__} and {type(setup).__name__}")
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", _gradviz)
        if global_setup:
            exec(compile(global_setup, "<global_setup>", "exec"), self._globals)  # noqa: S102
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup,
                                   label=label, sub_label=sub_label, description=description,
                                   env=env, num_threads=num_threads)

    def _run(self, number: int) -> float:
        """Seconds for ``number`` runs (the garbage collector as the user set it)."""
        # timeit.Timer.timeit turns the collector off while timing; inner() keeps it as is.
        return self._timer.inner(itertools.repeat(None, number), self._timer.timer)

    def timeit(self, number: int = 1000000) -> Measurement:
        """One measurement of ``number`` runs, after a warm-up of ``number // 100`` (>= 2)."""
        self._run(max(number // 100, 2))
        return Measurement(number, [self._run(number)], self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1):
        raise NotImplementedError("Timer.repeat is not implemented in torch either; use "
                                  "timeit or blocked_autorange")

    def autorange(self, callback=None):
        raise NotImplementedError("Timer.autorange is not implemented in torch either; use "
                                  "blocked_autorange")

    def _block_size(self, min_run_time: float) -> int:
        """Runs per block so that the timer's own overhead is negligible (also a warm-up)."""
        overhead = float(np.median([self._run(0) for _ in range(5)]))
        number = 1
        while True:
            taken = self._run(number)
            if taken > 0 and overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                return number
            if taken > min_run_time or number * 10 > 2147483647:
                return number
            number *= 10

    def _measure(self, number, min_run_time, max_run_time, stop, callback) -> Measurement:
        times: list[float] = []
        total = 0.0
        while total < max_run_time:
            taken = self._run(number)
            times.append(taken)
            total += taken
            if callback is not None:
                callback(number, taken)
            if total >= min_run_time and stop(times):
                break
        return Measurement(number, times, self._task_spec)

    def blocked_autorange(self, callback=None, min_run_time: float = 0.2) -> Measurement:
        """Blocks of runs (each block long enough to make the timer's overhead negligible)
        until ``min_run_time`` seconds have passed."""
        number = self._block_size(min_run_time)
        return self._measure(number, min_run_time, math.inf, lambda times: True, callback)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0, callback=None) -> Measurement:
        """Blocks of runs until the spread of the middle half falls below ``threshold`` of
        the median (at least 3 blocks) or ``max_run_time`` passes."""
        number = self._block_size(min_run_time=0.05)

        def stop(times):
            if len(times) <= 3:
                return False
            return Measurement(number, times, self._task_spec).meets_confidence(threshold)

        return self._measure(number, min_run_time, max_run_time, stop, callback)

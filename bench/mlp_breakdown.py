"""Where the time of a gradviz MLP step goes, line by line next to the numpy reference's.

Runs steps of a gradviz variant of ``mlp.py`` and of its numpy reference and reports, per
phase (forward, backward, update), medians over the steps of:

* for gradviz, the time spent in each op's numpy kernel, by op and operand shape, with calls
  per step. For the run, every op's ``forward`` and ``fast_backward`` in ``gradviz.ops.TABLE``
  is wrapped with a timer (in this process only, restored afterwards). What remains of the
  phase ("rest") is gradviz's own work: Python, tensors, nodes, the engine, and numpy calls
  made outside an op (the copy of an in-place write, for one);
* for numpy, the time of each line of the reference (``NumpyStep.mark``);
* for both, the "end of step": from the last phase to the step's return, where its
  temporaries are freed (an ``munmap`` per 1 MB array).

The two run in alternating blocks of ten steps, so both see the same machine load. An op
kernel that the reference has no line for (``clone``: the copy AccumulateGrad makes of a
weight's gradient), or that is slower than the reference's line for the same math, is work
gradviz adds; "rest" is its framework overhead. See bench/README.md.

    python bench/mlp_breakdown.py                          # gradviz nn, 200 steps each
    python bench/mlp_breakdown.py --variant "gradviz ops" --steps 400
"""

from __future__ import annotations

import argparse  # noqa: E402
import collections  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import mlp  # noqa: E402  (bench/ is the script's directory, so it is on sys.path)
import numpy as np  # noqa: E402
from _common import timed_region  # noqa: E402

import gradviz  # noqa: E402
from gradviz_ext import engine as _engine  # noqa: E402

PHASES = mlp.PHASES
END = "end of step"  # freeing the step's temporaries as it returns (munmap of 1 MB arrays)
BLOCK = 10


class KernelTimer:
    """Times every op's numpy kernel while installed; ``spent`` maps (phase, label) to seconds."""

    def __init__(self):
        self.spent = collections.defaultdict(float)
        self.calls = collections.Counter()
        self._saved = []
        self._inside = False

    @staticmethod
    def phase():
        # backward: a graph task is running; update: grad mode is off (optimizer.step and
        # the hand-written update run under no_grad); forward otherwise
        if _engine.current_graph_task() is not None:
            return "backward"
        return "forward" if gradviz.is_grad_enabled() else "update"

    def _wrap(self, kind, name, fn, first_array):
        def timed(*args, **kwargs):
            if self._inside:  # never count a kernel twice
                return fn(*args, **kwargs)
            self._inside = True
            start = mlp.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = mlp.clock() - start
                self._inside = False
                shape = next((a.shape for a in args[first_array:] if isinstance(a, np.ndarray)), ())
                key = (self.phase(), f"{kind}{name} {tuple(shape)}")
                self.spent[key] += elapsed
                self.calls[key] += 1
        return timed

    def install(self):
        for name, op in gradviz.ops.TABLE.items():
            self._saved.append((op, "forward", op.forward))
            op.forward = self._wrap("", name, op.forward, 0)
            fast = getattr(op, "fast_backward", None)
            if fast is not None:  # Note [Fast backward rules] in gradviz/ops/_registry.py
                self._saved.append((op, "fast_backward", fast))
                op.fast_backward = self._wrap("fast backward of ", name, fast, 1)

    def uninstall(self):
        for op, attribute, fn in reversed(self._saved):
            setattr(op, attribute, fn)
        self._saved = []


class LineTimer:
    """``NumpyStep.mark``: the time since the previous mark goes to (phase, label)."""

    def __init__(self):
        self.spent = collections.defaultdict(float)
        self.calls = collections.Counter()
        self.last = 0.0

    def start(self):
        self.last = mlp.clock()

    def __call__(self, phase, label):
        now = mlp.clock()
        self.spent[(phase, label)] += now - self.last
        self.calls[(phase, label)] += 1
        self.last = now


def collect(variant, reference, steps, gc_on=True):
    """``steps`` steps of each, in alternating blocks; per-step samples of every key. The
    collector is on, as users run (``gc_on``), or off (Note [GC on] in ``_common.py``)."""
    kernels, lines = KernelTimer(), LineTimer()
    timers = {"gradviz": (variant, kernels), "numpy": (reference, lines)}
    reference.mark = lines
    samples = collections.defaultdict(list)  # (who, phase, label) -> seconds, one per step
    variant.reset()
    reference.reset()
    kernels.install()
    try:
        for _ in range(5):  # warm-up
            variant.step([])
            reference.step([])
        for timer in (kernels, lines):
            timer.calls.clear()
        with timed_region(gc_on):
            # Blocks of BLOCK steps, alternating: both see the same machine load, and each
            # keeps its own parameters in cache, as in mlp.py (single alternating steps
            # evict each other's working set and slow both down).
            for block in range(2 * -(-steps // BLOCK)):
                who = ("gradviz", "numpy")[block % 2]
                runner, timer = timers[who]
                for _ in range(BLOCK):
                    timer.spent.clear()
                    times = []
                    lines.start()
                    start = mlp.clock()
                    runner.step(times)
                    whole = mlp.clock() - start
                    for phase, seconds in zip(PHASES, times[0]):
                        samples[(who, phase, "total")].append(seconds)
                    # after the last phase: the step returning, its temporaries being freed
                    samples[(who, END, "total")].append(whole - sum(times[0]))
                    for (phase, label), seconds in timer.spent.items():
                        samples[(who, phase, label)].append(seconds)
    finally:
        kernels.uninstall()
        reference.mark = mlp._no_mark
    steps_run = len(samples[("gradviz", PHASES[0], "total")])
    calls = {("gradviz",) + k: v / steps_run for k, v in kernels.calls.items()}
    calls.update({("numpy",) + k: v / steps_run for k, v in lines.calls.items()})
    return samples, calls, steps_run


def median_us(values, steps):
    """Median over steps in µs; a key missing from some steps counts 0 for them."""
    values = list(values) + [0.0] * (steps - len(values))
    return statistics.median(values) * 1e6


def report(samples, calls, steps, variant_name):
    print(f"mlp breakdown: {variant_name} vs numpy, {mlp.LAYERS} x Linear({mlp.WIDTH}, "
          f"{mlp.WIDTH}), batch {mlp.BATCH}; gradviz {gradviz.config()['engine']} engine; medians "
          f"over {steps} steps of each (alternating blocks of {BLOCK}), µs per step of "
          f"{'CPU' if mlp.clock is mlp.CLOCKS['cpu'] else 'wall'} time")
    step_total = {"gradviz": 0.0, "numpy": 0.0}
    for phase in PHASES + (END,):
        total = {who: median_us(samples[(who, phase, "total")], steps) for who in step_total}
        for who in step_total:
            step_total[who] += total[who]
        labels = {who: sorted((k for k in samples if k[0] == who and k[1] == phase
                               and k[2] != "total"),
                              key=lambda k: -median_us(samples[k], steps))
                  for who in step_total}
        in_kernels = sum(median_us(samples[k], steps) for k in labels["gradviz"])
        print(f"\n{phase}: gradviz {total['gradviz']:.0f} = op kernels {in_kernels:.0f} + rest "
              f"{total['gradviz'] - in_kernels:.0f}  |  numpy {total['numpy']:.0f}  |  "
              f"difference {total['gradviz'] - total['numpy']:+.0f}")
        for who in ("gradviz", "numpy"):
            for key in labels[who]:
                print(f"  {who:<8} {key[2]:<44} x{calls[key]:<4.0f} "
                      f"{median_us(samples[key], steps):8.1f}")
    g, n = step_total["gradviz"], step_total["numpy"]
    print(f"\nstep: gradviz {g:.0f}, numpy {n:.0f}, ratio {g / n:.3f} (sums of the medians above)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="gradviz nn", choices=("gradviz nn", "gradviz ops"))
    parser.add_argument("--steps", type=int, default=200, help="steps of each (default 200)")
    parser.add_argument("--clock", choices=sorted(mlp.CLOCKS), default="wall",
                        help="wall time (default) or the process's CPU time, for a busy "
                        "machine (Note [Wall or CPU time] in mlp.py)")
    parser.add_argument("--gc", choices=("on", "off"), default="on",
                        help="the garbage collector during the steps (default on, as users run)")
    args = parser.parse_args(argv)
    mlp.clock = mlp.CLOCKS[args.clock]
    x, target, params = mlp.make_problem()
    variants = {v.name: v for v in mlp.make_variants(x, target, params)}
    samples, calls, steps = collect(variants[args.variant], variants["numpy"], args.steps,
                                    gc_on=args.gc == "on")
    report(samples, calls, steps, args.variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())

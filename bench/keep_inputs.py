"""What keeping custom Functions' forward inputs costs (Note [Kept forward inputs]).

A chain of N ``Scale`` Functions, each applied to a fresh intermediate (``Scale.apply(y *
1.0)``) that nothing else keeps (``Scale`` saves nothing for backward), on ``(size,)``
float64 tensors. Measured with ``gradviz.debug.keep_forward_inputs`` on (the default) and off,
alternating, with torch as the reference of the same run:

- memory: the bytes numpy still holds (tracemalloc) while the graph is alive, after
  ``backward()`` freed the saved tensors: the kept inputs are what remains;
- time: µs per ``Scale.apply`` (median of repeats), as a ratio to torch's, with the garbage
  collector on as users run, and off as a second column (``_common.timed_region``).

    python bench/keep_inputs.py [--n 200] [--size 1024] [--repeats 9] [--json out.json]
"""

from __future__ import annotations

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import torch  # noqa: E402
from _common import GC_MODES, environment, interleaved, timed_region  # noqa: E402

import gradviz  # noqa: E402


def make_scale(module):
    class Scale(module.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2.0

    return Scale


def build(module, scale, n, size):
    x = module.full((size,), 1.0, dtype=module.float64, requires_grad=True)
    y = x
    for _ in range(n):
        y = scale.apply(y * 1.0)
    return x, y.sum()


def held_after_backward(scale, n, size, keep):
    """Bytes traced (numpy's buffers among them) while the graph lives, after backward."""
    gc.collect()
    tracemalloc.start()
    try:
        with gradviz.debug.keep_forward_inputs(keep):
            x, loss = build(gradviz, scale, n, size)
        loss.backward()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
        del x, loss
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return held - after


def apply_time(module, scale, n, size, keep=True, gc_on=True):
    with timed_region(gc_on), gradviz.debug.keep_forward_inputs(keep):
        start = time.perf_counter()
        graph = build(module, scale, n, size)
        done = time.perf_counter()
    del graph  # freed outside the timed region
    return (done - start) / n * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json")
    args = parser.parse_args()
    scales = {"kept": make_scale(gradviz), "off": make_scale(gradviz), "torch": make_scale(torch)}
    frameworks = (("kept", gradviz), ("off", gradviz), ("torch", torch))
    times = {}
    for mode in GC_MODES:  # GC on first: how users run
        runs = interleaved(frameworks, args.repeats,
                           lambda name, module: apply_time(module, scales[name], args.n,
                                                           args.size, keep=name != "off",
                                                           gc_on=mode == "on"),
                           lambda name, module: apply_time(module, scales[name], 20, args.size))
        times[mode] = {name: statistics.median(values) for name, values in runs.items()}
    memory = {keep: held_after_backward(scales["kept"], args.n, args.size, keep)
              for keep in (True, False)}
    expected = args.n * args.size * 8
    print(f"custom Function chain: {args.n} x Scale.apply(y * 1.0) on ({args.size},) float64, "
          f"gradviz {gradviz.config()['engine']} engine, torch {torch.__version__}, one thread")
    print(f"  held after backward, graph alive: kept {memory[True] / 1024:9.1f} KiB   "
          f"off {memory[False] / 1024:9.1f} KiB   (the inputs: {expected / 1024:.1f} KiB)")
    for mode in GC_MODES:
        t = times[mode]
        print(f"  apply (with the y * 1.0), GC {mode:>3}: kept {t['kept']:7.2f} µs   "
              f"off {t['off']:7.2f} µs   torch {t['torch']:7.2f} µs   ratio kept/torch "
              f"{t['kept'] / t['torch']:.2f}, off/torch {t['off'] / t['torch']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "args": vars(args), "apply_us": times,
                       "held_bytes": {"kept": memory[True], "off": memory[False]},
                       "inputs_bytes": expected}, f, indent=2)


if __name__ == "__main__":
    main()

"""MLP benchmark: one full training step of 4 Linear(512, 512) layers on a batch of 64.

A step is ``zero_grad``, forward, MSE loss, backward and an SGD update, in float32. It runs
as a user writes it in gradviz (``gradviz.nn`` + ``gradviz.optim.SGD``; and again with plain
tensor ops, ``x @ W.t() + b``), in PyTorch (``torch.nn`` + ``torch.optim.SGD``) and as a
hand-written numpy forward + backward + update doing the same math. The numpy step is the
floor for an engine built on numpy: the ratio gradviz / numpy is gradviz's overhead on
realistic arithmetic. Every variant starts from the same parameters, and after each repeat's
steps its parameters are checked against the numpy reference's, so a broken engine cannot
produce a fast number. See bench/README.md; ``mlp_breakdown.py`` attributes the gap.

    python bench/mlp.py                   # table
    python bench/mlp.py --json out.json   # table, and the results as JSON
    python bench/mlp.py --profile         # also: cProfile of the gradviz nn step
    GRADVIZ_PURE_PYTHON=1 python bench/mlp.py   # the interpreted engine
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, timed_region  # noqa: E402

import gradviz  # noqa: E402
from gradviz.ops._layout import product_layouts  # noqa: E402

LAYERS = 4
WIDTH = 512
BATCH = 64
LR = 0.01
PHASES = ("forward", "backward", "update")

# Note [Wall or CPU time]: wall time (the default, as in chain.py) is what a user waits for.
# On a machine shared with other work it also counts the time this process waits for a CPU,
# which swings the ratios run to run; the process's CPU time (user + system, page faults
# included) does not, and with every library pinned to one thread it equals wall time on an
# idle machine. ``--clock cpu`` switches every timer in the file.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


# ---- the data and the starting point, shared by every variant ----------------------------

def make_problem(seed=0):
    """Input, target and the initial parameters ``[(W, b), ...]`` as float32 numpy arrays.

    The parameters are those of a ``gradviz.nn.Linear`` (PyTorch's default initialisation),
    copied out so every variant starts from the same values.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
    target = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
    gradviz.manual_seed(seed)
    params = []
    for _ in range(LAYERS):
        layer = gradviz.nn.Linear(WIDTH, WIDTH)
        params.append((layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy()))
    return x, target, params


# ---- the variants ------------------------------------------------------------------------
# Each variant is an object with ``reset()`` (load the initial parameters, untimed),
# ``step(times)`` (one training step; appends the forward/backward/update seconds to
# ``times``) and ``parameters()`` (numpy copies, for the check).

def _no_mark(phase, label):
    pass


class NumpyStep:
    """The reference: forward, MSE, backward and SGD written by hand in numpy (float32).

    ``mark(phase, label)`` is called after each line (a no-op unless ``mlp_breakdown.py``
    times the lines).
    """

    name = "numpy"

    def __init__(self, x, target, params):
        self.x, self.target, self.initial = x, target, params
        self.mark = _no_mark

    def reset(self):
        self.params = [(w.copy(), b.copy()) for w, b in self.initial]

    def step(self, times):
        mark = self.mark
        start = clock()
        activations = [self.x]  # input of each layer: x, then relu outputs
        a = self.x
        for i, (w, b) in enumerate(self.params):
            z = a @ w.T + b
            mark("forward", "z = a @ W.T + b")
            if i < LAYERS - 1:
                a = np.maximum(z, np.float32(0))
                mark("forward", "a = maximum(z, 0)")
                activations.append(a)
            else:
                out = z
        diff = out - self.target
        loss = np.mean(diff * diff)  # noqa: F841  (computed, as the frameworks do)
        mark("forward", "loss = mean((out - y) ** 2)")
        forward_done = clock()
        d = diff * np.float32(2.0 / diff.size)  # d loss / d out
        mark("backward", "d = (out - y) * 2 / n")
        grads = [None] * LAYERS
        for i in reversed(range(LAYERS)):
            w, _ = self.params[i]
            a_in = activations[i]
            dw = d.T @ a_in
            mark("backward", "dW = d.T @ a")
            db = d.sum(axis=0)
            mark("backward", "db = d.sum(0)")
            grads[i] = (dw, db)
            if i > 0:
                d = d @ w
                mark("backward", "d = d @ W")
                # through the previous ReLU: the mask product, not np.where, whose loop
                # branches on the mask and costs several times more on a random sign pattern
                d = d * (a_in > 0)
                mark("backward", "d = d * (a > 0)")
        backward_done = clock()
        for (w, b), (dw, db) in zip(self.params, grads):
            w -= LR * dw
            mark("update", "W -= lr * dW")
            b -= LR * db
            mark("update", "b -= lr * db")
        done = clock()
        times.append((forward_done - start, backward_done - forward_done, done - backward_done))

    def parameters(self):
        return [array.copy() for pair in self.params for array in pair]


class ModuleStep:
    """``nn.Sequential`` of Linear/ReLU, ``nn.MSELoss`` and ``optim.SGD``, as a user writes it."""

    def __init__(self, name, module, x, target, params):
        self.name = name
        self.module = module
        self.initial = params
        layers = []
        for i in range(LAYERS):
            layers.append(module.nn.Linear(WIDTH, WIDTH))
            if i < LAYERS - 1:
                layers.append(module.nn.ReLU())
        self.model = module.nn.Sequential(*layers)
        self.linears = [m for m in self.model if isinstance(m, module.nn.Linear)]
        self.loss_fn = module.nn.MSELoss()
        self.optimizer = module.optim.SGD(self.model.parameters(), lr=LR)
        self.x = module.tensor(x)
        self.target = module.tensor(target)

    def reset(self):
        with self.module.no_grad():
            for layer, (w, b) in zip(self.linears, self.initial):
                layer.weight.copy_(self.module.tensor(w))
                layer.bias.copy_(self.module.tensor(b))
        self.optimizer.zero_grad()

    def step(self, times):
        start = clock()
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(self.x), self.target)
        forward_done = clock()
        loss.backward()
        backward_done = clock()
        self.optimizer.step()
        done = clock()
        times.append((forward_done - start, backward_done - forward_done, done - backward_done))

    def parameters(self):
        return [p.detach().numpy().copy() for layer in self.linears
                for p in (layer.weight, layer.bias)]


class TensorOpsStep:
    """The same step with plain tensor ops: ``a @ W.t() + b``, ``relu``, ``((out - y) ** 2).mean()``
    and the update ``p -= lr * p.grad`` under ``no_grad``."""

    def __init__(self, name, module, x, target, params):
        self.name = name
        self.module = module
        self.initial = params
        self.x = module.tensor(x)
        self.target = module.tensor(target)
        self.params = [(module.zeros(WIDTH, WIDTH, requires_grad=True),
                        module.zeros(WIDTH, requires_grad=True)) for _ in range(LAYERS)]

    def reset(self):
        with self.module.no_grad():
            for (w, b), (w0, b0) in zip(self.params, self.initial):
                w.copy_(self.module.tensor(w0))
                b.copy_(self.module.tensor(b0))
                w.grad = b.grad = None

    def step(self, times):
        start = clock()
        a = self.x
        for i, (w, b) in enumerate(self.params):
            a = a @ w.t() + b
            if i < LAYERS - 1:
                a = a.relu()
        loss = ((a - self.target) ** 2).mean()
        forward_done = clock()
        loss.backward()
        backward_done = clock()
        with self.module.no_grad():
            for pair in self.params:
                for p in pair:
                    p -= LR * p.grad
                    p.grad = None
        done = clock()
        times.append((forward_done - start, backward_done - forward_done, done - backward_done))

    def parameters(self):
        return [p.detach().numpy().copy() for pair in self.params for p in pair]


VARIANTS = ("numpy", "gradviz nn", "gradviz ops", "torch nn", "torch ops")


def make_variants(x, target, params):
    return [
        NumpyStep(x, target, params),
        ModuleStep("gradviz nn", gradviz, x, target, params),
        TensorOpsStep("gradviz ops", gradviz, x, target, params),
        ModuleStep("torch nn", torch, x, target, params),
        TensorOpsStep("torch ops", torch, x, target, params),
    ]


# ---- measuring ---------------------------------------------------------------------------

def reference_trajectory(x, target, params, steps):
    """The numpy reference's parameters after 0..steps steps (index k: after k steps)."""
    reference = NumpyStep(x, target, params)
    reference.reset()
    trajectory = [reference.parameters()]
    for _ in range(steps):
        reference.step([])
        trajectory.append(reference.parameters())
    return trajectory


# The steps move the parameters by ~1e-5 while they are ~1e-2, so comparing parameter values
# would let a gradient that is 10% off pass. What is compared is the change from the initial
# values, relative to its largest entry: float32 rounding and a different summation order
# (torch's fused addmm) stay under 3e-3; a gradient 1% off does not.
CHANGE_TOLERANCE = 1e-2


def check(variant, expected, initial, steps):
    """Every parameter of ``variant`` must have moved as the numpy reference's did."""
    for index, (got, want, start) in enumerate(zip(variant.parameters(), expected, initial)):
        moved = got.astype(np.float64) - start
        should = want.astype(np.float64) - start
        error = float(np.max(np.abs(moved - should)) / np.max(np.abs(should)))
        if got.dtype != np.float32 or not error <= CHANGE_TOLERANCE:
            layer, kind = divmod(index, 2)
            raise AssertionError(
                f"{variant.name}: after {steps} step(s), the change of layer {layer}'s "
                f"{'bias' if kind else 'weight'} ({got.dtype}) differs from the numpy "
                f"reference's by {error:.2g} of its largest entry (tolerance {CHANGE_TOLERANCE})")


def run_repeat(variant, steps, trajectory, gc_on=True):
    """Reset, run ``steps`` timed steps, check; return per-step seconds: the whole step, then
    each phase.

    The whole step is wall time around the calls, so it includes what happens when a step
    returns: freeing its temporaries (the numpy reference's gradients, a graph), which for
    1 MB arrays is an ``munmap`` each and not free.
    """
    variant.reset()
    times = []
    with timed_region(gc_on):  # on as users run, or off as timeit has it (Note [GC on])
        start = clock()
        for _ in range(steps):
            variant.step(times)
        elapsed = clock() - start
    check(variant, trajectory[steps], trajectory[0], steps)
    return (elapsed / steps,) + tuple(sum(t[k] for t in times) / steps for k in range(len(PHASES)))


def measure(variants, steps, repeats, trajectory, gc_on=True):
    """Time every variant; the repeats go round-robin, so a change in machine load during the
    run hits every variant alike instead of whichever ran at the time."""
    for variant in variants:
        run_repeat(variant, 1, trajectory, gc_on)  # warm-up, and the one-step check
    runs = {variant.name: [] for variant in variants}
    for _ in range(repeats):
        for variant in variants:
            runs[variant.name].append(run_repeat(variant, steps, trajectory, gc_on))
    results = {}
    for name, per_repeat in runs.items():
        result = {"step_ms": statistics.median(r[0] for r in per_repeat) * 1e3,
                  "step_s": [r[0] for r in per_repeat]}
        for k, phase in enumerate(PHASES + ("rest",)):
            if phase == "rest":  # what is outside the phases: mostly freeing at the step's end
                values = [r[0] - sum(r[1:]) for r in per_repeat]
            else:
                values = [r[k + 1] for r in per_repeat]
            result[f"{phase}_ms"] = statistics.median(values) * 1e3
            result[f"{phase}_s"] = values
        results[name] = result
    return results




def print_table(results, env, steps, repeats, off=None):
    """The GC-on table; ``off`` (GC-off results of the same variants) adds its ratios."""
    print(f"mlp benchmark: {LAYERS} x Linear({WIDTH}, {WIDTH}), ReLU between, batch {BATCH}, "
          f"MSE, SGD(lr={LR}), float32; gradviz {env['gradviz']} ({env['gradviz_engine']} engine), "
          f"torch {env['torch']}, numpy {env['numpy']}, one thread, {env['clock']} time, "
          f"median of {repeats} repeats x {steps} steps, GC on (last columns: GC off); load "
          f"average {env['load_average'][0]:.2f}")
    header = (f"{'variant':<12} | {'step ms':>8} {'/ numpy':>7} {'/ torch':>7} | "
              f"{'fwd ms':>7} {'bwd ms':>7} {'upd ms':>7} {'rest ms':>7}"
              + (f" | {'GC off: ms':>10} {'/ numpy':>7} {'/ torch':>7}" if off else ""))
    print(header)
    print("-" * len(header))
    def ratio(r, base, table=results):
        if base not in table:
            return f"{'-':>7}"
        return f"{r['step_ms'] / table[base]['step_ms']:>7.3f}"

    for name, r in results.items():
        line = (f"{name:<12} | {r['step_ms']:>8.2f} {ratio(r, 'numpy')} {ratio(r, 'torch nn')} | "
                f"{r['forward_ms']:>7.2f} {r['backward_ms']:>7.2f} {r['update_ms']:>7.2f} "
                f"{r['rest_ms']:>7.2f}")
        if off:
            o = off[name]
            line += (f" | {o['step_ms']:>10.2f} {ratio(o, 'numpy', off)} "
                     f"{ratio(o, 'torch nn', off)}")
        print(line)


def profile(variant, steps, limit):
    """cProfile of ``steps`` steps of ``variant`` (after a warm-up), sorted by own time."""
    import cProfile
    import pstats

    variant.reset()
    variant.step([])
    profiler = cProfile.Profile()
    with timed_region(True):  # the collector on, as users run (Note [GC on])
        profiler.enable()
        for _ in range(steps):
            variant.step([])
        profiler.disable()
    print(f"\ncProfile of {steps} steps of {variant.name} (own time; compiled engine functions "
          "are not seen by cProfile, their time shows in what they call):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(limit)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--repeats", type=int, default=11, help="timed repeats (default 11)")
    parser.add_argument("--steps", type=int, default=5,
                        help="consecutive steps per repeat, from the initial parameters "
                        "(default 5)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                        metavar="NAME", help="which to run (default: all of "
                        + ", ".join(repr(v) for v in VARIANTS) + ")")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time (default) or the process's CPU time, for a busy "
                        "machine (Note [Wall or CPU time])")
    parser.add_argument("--gc", nargs="+", choices=("on", "off"), default=["on", "off"],
                        help="GC on is always timed (the table); 'off' adds a GC-off run of "
                        "the same variants as the last columns (default: both)")
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of the gradviz nn step")
    args = parser.parse_args(argv)

    global clock
    clock = CLOCKS[args.clock]
    env = environment()
    env["clock"] = args.clock
    x, target, params = make_problem()
    trajectory = reference_trajectory(x, target, params, args.steps)
    variants = {v.name: v for v in make_variants(x, target, params)}
    chosen = [variants[name] for name in VARIANTS if name in args.variants]
    results = measure(chosen, args.steps, args.repeats, trajectory, gc_on=True)
    results_off = (measure(chosen, args.steps, args.repeats, trajectory, gc_on=False)
                   if "off" in args.gc else None)
    env["product_layouts"] = {" x ".join(map(str, key[:4])) + f" ({key[4]}, {key[5]})": layout
                              for key, layout in product_layouts()["shapes"].items()}
    print_table(results, env, args.steps, args.repeats, results_off)
    print("gradviz's product layouts (Note [Product layout]): "
          + (", ".join(f"{k}: {v}" for k, v in env["product_layouts"].items()) or "none"))
    if args.profile:
        profile(variants["gradviz nn"], 50, 30)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "steps": args.steps, "repeats": args.repeats,
                       "results": results, "results_gc_off": results_off}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
